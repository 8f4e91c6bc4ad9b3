/* cnn.c -- convolution, pooling, batch norm, dropout, tanh and sigmoid.
 *
 * conv2d is im2col + one GEMM per group over the whole batch: the columns
 * [C*KH*KW, N*OH*OW] are built in the shared workspace (split over the pool
 * by rows), OpenBLAS multiplies, and the result [OC, N*OH*OW] is permuted to
 * NCHW with the bias added. The backward pass rebuilds the columns (no
 * per-node copy kept between passes), takes dW from one GEMM, then
 * overwrites the columns with W^T dY and scatters them back (col2im, split
 * over the pool by input planes so no two threads write one element). */
#include "exec/cnn.h"

#include "exec/gemm.h"

#include <math.h>
#include <string.h>

#define GRAIN 16384 /* elements below which a hand-off costs more than the work */

static int64_t grain_for(int64_t work_per_item) { return work_per_item >= GRAIN ? 1 : GRAIN / (work_per_item > 0 ? work_per_item : 1); }

/* --------------------------------------------------------------- conv2d */

typedef struct conv_job {
    const ts_conv_geom *g;
    float *col, *y, *dx;
    const float *x, *src, *b;
} conv_job;

/* col[r, n*OHW + oh*OW + ow] = x[n, c, ih, iw] (0 outside), r = (c, ki, kj) */
static void im2col_rows(void *vj, int64_t begin, int64_t end) {
    const conv_job *j = vj;
    const ts_conv_geom *g = j->g;
    int64_t OHW = g->OH * g->OW, NP = g->N * OHW, KK = g->KH * g->KW;
    for (int64_t r = begin; r < end; r++) {
        int64_t c = r / KK, ki = (r / g->KW) % g->KH, kj = r % g->KW;
        float *dst = j->col + r * NP;
        /* the output columns whose input column is in bounds: [lo, hi) */
        int64_t off = kj * g->DW - g->PL, lo = 0, hi = g->OW;
        while (lo < g->OW && lo * g->SW + off < 0) lo++;
        while (hi > lo && (hi - 1) * g->SW + off >= g->W) hi--;
        for (int64_t n = 0; n < g->N; n++) {
            const float *plane = j->x + (n * g->C + c) * g->H * g->W;
            for (int64_t oh = 0; oh < g->OH; oh++) {
                float *d = dst + n * OHW + oh * g->OW;
                int64_t ih = oh * g->SH - g->PT + ki * g->DH;
                if (ih < 0 || ih >= g->H) {
                    memset(d, 0, (size_t)g->OW * sizeof(float));
                    continue;
                }
                const float *row = plane + ih * g->W;
                for (int64_t ow = 0; ow < lo; ow++) d[ow] = 0.0f;
                if (g->SW == 1 && hi > lo) memcpy(d + lo, row + lo + off, (size_t)(hi - lo) * sizeof(float));
                else
                    for (int64_t ow = lo; ow < hi; ow++) d[ow] = row[ow * g->SW + off];
                for (int64_t ow = hi; ow < g->OW; ow++) d[ow] = 0.0f;
            }
        }
    }
}

/* dx[n, c, ih, iw] += col[(c, ki, kj), n*OHW + oh*OW + ow], one (n, c) plane per item */
static void col2im_planes(void *vj, int64_t begin, int64_t end) {
    const conv_job *j = vj;
    const ts_conv_geom *g = j->g;
    int64_t OHW = g->OH * g->OW, NP = g->N * OHW, KK = g->KH * g->KW;
    for (int64_t q = begin; q < end; q++) {
        int64_t n = q / g->C, c = q % g->C;
        float *plane = j->dx + q * g->H * g->W;
        for (int64_t ki = 0; ki < g->KH; ki++)
            for (int64_t kj = 0; kj < g->KW; kj++) {
                const float *src = j->col + (c * KK + ki * g->KW + kj) * NP + n * OHW;
                int64_t off = kj * g->DW - g->PL, lo = 0, hi = g->OW;
                while (lo < g->OW && lo * g->SW + off < 0) lo++;
                while (hi > lo && (hi - 1) * g->SW + off >= g->W) hi--;
                for (int64_t oh = 0; oh < g->OH; oh++) {
                    int64_t ih = oh * g->SH - g->PT + ki * g->DH;
                    if (ih < 0 || ih >= g->H) continue;
                    float *row = plane + ih * g->W;
                    const float *s = src + oh * g->OW;
                    for (int64_t ow = lo; ow < hi; ow++) row[ow * g->SW + off] += s[ow];
                }
            }
    }
}

/* y[n, oc, :] = src[oc, n, :] + b[oc], one (n, oc) row per item */
static void to_nchw_rows(void *vj, int64_t begin, int64_t end) {
    const conv_job *j = vj;
    const ts_conv_geom *g = j->g;
    int64_t OHW = g->OH * g->OW;
    for (int64_t q = begin; q < end; q++) {
        int64_t n = q / g->OC, oc = q % g->OC;
        const float *s = j->src + (oc * g->N + n) * OHW;
        float *d = j->y + q * OHW;
        float bv = j->b ? j->b[oc] : 0.0f;
        for (int64_t i = 0; i < OHW; i++) d[i] = s[i] + bv;
    }
}

/* y[oc, n, :] = src[n, oc, :], one (oc, n) row per item */
static void from_nchw_rows(void *vj, int64_t begin, int64_t end) {
    const conv_job *j = vj;
    const ts_conv_geom *g = j->g;
    int64_t OHW = g->OH * g->OW;
    for (int64_t q = begin; q < end; q++) {
        int64_t oc = q / g->N, n = q % g->N;
        memcpy(j->y + q * OHW, j->src + (n * g->OC + oc) * OHW, (size_t)OHW * sizeof(float));
    }
}

size_t ts_conv2d_workspace(const ts_conv_geom *g) {
    int64_t NP = g->N * g->OH * g->OW;
    return (size_t)((g->C * g->KH * g->KW + g->OC) * NP);
}

void ts_conv2d_forward(ts_pool *p, float *ws, float *y, const float *x, const float *w, const float *b, const ts_conv_geom *g) {
    int64_t KK = g->KH * g->KW, NP = g->N * g->OH * g->OW, Cg = g->C / g->groups, OCg = g->OC / g->groups;
    float *col = ws, *yp = ws + g->C * KK * NP;
    conv_job j = {.g = g, .col = col, .x = x};
    ts_pool_for(p, g->C * KK, grain_for(NP), im2col_rows, &j);
    for (int64_t gi = 0; gi < g->groups; gi++)
        ts_gemm(false, false, OCg, NP, Cg * KK, w + gi * OCg * Cg * KK, col + gi * Cg * KK * NP, 0.0f, yp + gi * OCg * NP);
    conv_job t = {.g = g, .y = y, .src = yp, .b = b};
    ts_pool_for(p, g->N * g->OC, grain_for(g->OH * g->OW), to_nchw_rows, &t);
}

void ts_conv2d_backward(ts_pool *p, float *ws, float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                        const ts_conv_geom *g) {
    int64_t KK = g->KH * g->KW, NP = g->N * g->OH * g->OW, OHW = g->OH * g->OW, Cg = g->C / g->groups, OCg = g->OC / g->groups;
    float *col = ws, *dyp = ws + g->C * KK * NP;
    conv_job t = {.g = g, .y = dyp, .src = dy};
    ts_pool_for(p, g->OC * g->N, grain_for(OHW), from_nchw_rows, &t);
    if (db)
        for (int64_t oc = 0; oc < g->OC; oc++) {
            double s = 0;
            const float *r = dyp + oc * NP;
            for (int64_t i = 0; i < NP; i++) s += r[i];
            db[oc] += (float)s;
        }
    if (!dw && !dx) return;
    if (dw) {
        conv_job j = {.g = g, .col = col, .x = x};
        ts_pool_for(p, g->C * KK, grain_for(NP), im2col_rows, &j);
        for (int64_t gi = 0; gi < g->groups; gi++)
            ts_gemm(false, true, OCg, Cg * KK, NP, dyp + gi * OCg * NP, col + gi * Cg * KK * NP, 1.0f, dw + gi * OCg * Cg * KK);
    }
    if (dx) {
        for (int64_t gi = 0; gi < g->groups; gi++)
            ts_gemm(true, false, Cg * KK, NP, OCg, w + gi * OCg * Cg * KK, dyp + gi * OCg * NP, 0.0f, col + gi * Cg * KK * NP);
        conv_job j = {.g = g, .col = col, .dx = dx};
        ts_pool_for(p, g->N * g->C, grain_for(KK * OHW), col2im_planes, &j);
    }
}

/* The input element under output (oh, ow) and kernel tap (ki, kj), or -1. */
static int64_t tap(const ts_conv_geom *g, int64_t oh, int64_t ow, int64_t ki, int64_t kj) {
    int64_t ih = oh * g->SH - g->PT + ki * g->DH, iw = ow * g->SW - g->PL + kj * g->DW;
    return ih < 0 || ih >= g->H || iw < 0 || iw >= g->W ? -1 : ih * g->W + iw;
}

void ts_conv2d_naive_forward(float *y, const float *x, const float *w, const float *b, const ts_conv_geom *g) {
    int64_t Cg = g->C / g->groups, OCg = g->OC / g->groups;
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t oc = 0; oc < g->OC; oc++)
            for (int64_t oh = 0; oh < g->OH; oh++)
                for (int64_t ow = 0; ow < g->OW; ow++) {
                    double acc = b ? b[oc] : 0.0;
                    for (int64_t ci = 0; ci < Cg; ci++) {
                        int64_t c = oc / OCg * Cg + ci;
                        for (int64_t ki = 0; ki < g->KH; ki++)
                            for (int64_t kj = 0; kj < g->KW; kj++) {
                                int64_t at = tap(g, oh, ow, ki, kj);
                                if (at >= 0) acc += (double)x[(n * g->C + c) * g->H * g->W + at] * w[((oc * Cg + ci) * g->KH + ki) * g->KW + kj];
                            }
                    }
                    y[((n * g->OC + oc) * g->OH + oh) * g->OW + ow] = (float)acc;
                }
}

void ts_conv2d_naive_backward(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w, const ts_conv_geom *g) {
    int64_t Cg = g->C / g->groups, OCg = g->OC / g->groups;
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t oc = 0; oc < g->OC; oc++)
            for (int64_t oh = 0; oh < g->OH; oh++)
                for (int64_t ow = 0; ow < g->OW; ow++) {
                    float d = dy[((n * g->OC + oc) * g->OH + oh) * g->OW + ow];
                    if (db) db[oc] += d;
                    for (int64_t ci = 0; ci < Cg; ci++) {
                        int64_t c = oc / OCg * Cg + ci;
                        for (int64_t ki = 0; ki < g->KH; ki++)
                            for (int64_t kj = 0; kj < g->KW; kj++) {
                                int64_t at = tap(g, oh, ow, ki, kj), wi = ((oc * Cg + ci) * g->KH + ki) * g->KW + kj;
                                if (at < 0) continue;
                                int64_t xi = (n * g->C + c) * g->H * g->W + at;
                                if (dx) dx[xi] += d * w[wi];
                                if (dw) dw[wi] += d * x[xi];
                            }
                    }
                }
}

/* -------------------------------------------------------------- pooling */

typedef struct pool_job {
    const ts_conv_geom *g;
    float *y, *dx;
    const float *x, *dy;
    bool include_pad;
} pool_job;

/* Index within the plane of the window's winner: PyTorch's CPU rule, a
 * strictly greater value or a NaN takes over, so ties keep the first and the
 * last NaN wins. Padding is never a candidate. */
static int64_t max_winner(const ts_conv_geom *g, const float *plane, int64_t oh, int64_t ow) {
    int64_t best_i = -1;
    float best = -INFINITY;
    for (int64_t ki = 0; ki < g->KH; ki++)
        for (int64_t kj = 0; kj < g->KW; kj++) {
            int64_t at = tap(g, oh, ow, ki, kj);
            if (at < 0) continue;
            if (best_i < 0) best_i = at;
            float v = plane[at];
            if (v > best || isnan(v)) best = v, best_i = at;
        }
    return best_i;
}

static void max_fwd_planes(void *vj, int64_t begin, int64_t end) {
    const pool_job *j = vj;
    const ts_conv_geom *g = j->g;
    for (int64_t q = begin; q < end; q++) {
        const float *plane = j->x + q * g->H * g->W;
        float *out = j->y + q * g->OH * g->OW;
        for (int64_t oh = 0; oh < g->OH; oh++)
            for (int64_t ow = 0; ow < g->OW; ow++) {
                int64_t at = max_winner(g, plane, oh, ow);
                out[oh * g->OW + ow] = at >= 0 ? plane[at] : -INFINITY;
            }
    }
}

static void max_bwd_planes(void *vj, int64_t begin, int64_t end) {
    const pool_job *j = vj;
    const ts_conv_geom *g = j->g;
    for (int64_t q = begin; q < end; q++) {
        const float *plane = j->x + q * g->H * g->W;
        const float *d = j->dy + q * g->OH * g->OW;
        float *dplane = j->dx + q * g->H * g->W;
        for (int64_t oh = 0; oh < g->OH; oh++)
            for (int64_t ow = 0; ow < g->OW; ow++) {
                int64_t at = max_winner(g, plane, oh, ow);
                if (at >= 0) dplane[at] += d[oh * g->OW + ow];
            }
    }
}

void ts_max_pool2d_forward(ts_pool *p, float *y, const float *x, const ts_conv_geom *g) {
    pool_job j = {.g = g, .y = y, .x = x};
    ts_pool_for(p, g->N * g->C, grain_for(g->OH * g->OW * g->KH * g->KW), max_fwd_planes, &j);
}

void ts_max_pool2d_backward(ts_pool *p, float *dx, const float *dy, const float *x, const ts_conv_geom *g) {
    pool_job j = {.g = g, .dx = dx, .dy = dy, .x = x};
    ts_pool_for(p, g->N * g->C, grain_for(g->OH * g->OW * g->KH * g->KW), max_bwd_planes, &j);
}

static double avg_divisor(const ts_conv_geom *g, int64_t oh, int64_t ow, bool include_pad) {
    if (include_pad) return (double)(g->KH * g->KW);
    int64_t n = 0;
    for (int64_t ki = 0; ki < g->KH; ki++)
        for (int64_t kj = 0; kj < g->KW; kj++) n += tap(g, oh, ow, ki, kj) >= 0;
    return n ? (double)n : 1.0;
}

static void avg_fwd_planes(void *vj, int64_t begin, int64_t end) {
    const pool_job *j = vj;
    const ts_conv_geom *g = j->g;
    for (int64_t q = begin; q < end; q++) {
        const float *plane = j->x + q * g->H * g->W;
        float *out = j->y + q * g->OH * g->OW;
        for (int64_t oh = 0; oh < g->OH; oh++)
            for (int64_t ow = 0; ow < g->OW; ow++) {
                double s = 0;
                for (int64_t ki = 0; ki < g->KH; ki++)
                    for (int64_t kj = 0; kj < g->KW; kj++) {
                        int64_t at = tap(g, oh, ow, ki, kj);
                        if (at >= 0) s += plane[at];
                    }
                out[oh * g->OW + ow] = (float)(s / avg_divisor(g, oh, ow, j->include_pad));
            }
    }
}

static void avg_bwd_planes(void *vj, int64_t begin, int64_t end) {
    const pool_job *j = vj;
    const ts_conv_geom *g = j->g;
    for (int64_t q = begin; q < end; q++) {
        const float *d = j->dy + q * g->OH * g->OW;
        float *dplane = j->dx + q * g->H * g->W;
        for (int64_t oh = 0; oh < g->OH; oh++)
            for (int64_t ow = 0; ow < g->OW; ow++) {
                float v = (float)(d[oh * g->OW + ow] / avg_divisor(g, oh, ow, j->include_pad));
                for (int64_t ki = 0; ki < g->KH; ki++)
                    for (int64_t kj = 0; kj < g->KW; kj++) {
                        int64_t at = tap(g, oh, ow, ki, kj);
                        if (at >= 0) dplane[at] += v;
                    }
            }
    }
}

void ts_avg_pool2d_forward(ts_pool *p, float *y, const float *x, const ts_conv_geom *g, bool include_pad) {
    pool_job j = {.g = g, .y = y, .x = x, .include_pad = include_pad};
    ts_pool_for(p, g->N * g->C, grain_for(g->OH * g->OW * g->KH * g->KW), avg_fwd_planes, &j);
}

void ts_avg_pool2d_backward(ts_pool *p, float *dx, const float *dy, const ts_conv_geom *g, bool include_pad) {
    pool_job j = {.g = g, .dx = dx, .dy = dy, .include_pad = include_pad};
    ts_pool_for(p, g->N * g->C, grain_for(g->OH * g->OW * g->KH * g->KW), avg_bwd_planes, &j);
}

/* ----------------------------------------------------------- batch norm */

typedef struct bn_job {
    float *y, *stats, *run_mean, *run_var, *dx, *dw, *db;
    const float *x, *w, *b, *dy;
    int64_t N, C, inner;
    float eps, momentum;
    bool batch, update;
} bn_job;

static void bn_fwd_channels(void *vj, int64_t begin, int64_t end) {
    const bn_job *j = vj;
    int64_t M = j->N * j->inner;
    for (int64_t c = begin; c < end; c++) {
        double mean, var;
        if (j->batch) {
            double s = 0, ss = 0;
            for (int64_t n = 0; n < j->N; n++) {
                const float *r = j->x + (n * j->C + c) * j->inner;
                for (int64_t i = 0; i < j->inner; i++) s += r[i];
            }
            mean = s / (double)M;
            for (int64_t n = 0; n < j->N; n++) {
                const float *r = j->x + (n * j->C + c) * j->inner;
                for (int64_t i = 0; i < j->inner; i++) ss += ((double)r[i] - mean) * ((double)r[i] - mean);
            }
            var = ss / (double)M;
            if (j->update) {
                double unbiased = M > 1 ? ss / (double)(M - 1) : var;
                j->run_mean[c] = (float)((1.0 - j->momentum) * j->run_mean[c] + j->momentum * mean);
                j->run_var[c] = (float)((1.0 - j->momentum) * j->run_var[c] + j->momentum * unbiased);
            }
        } else {
            mean = j->run_mean[c];
            var = j->run_var[c];
        }
        float invstd = (float)(1.0 / sqrt(var + (double)j->eps)), m = (float)mean;
        j->stats[c] = m;
        j->stats[j->C + c] = invstd;
        float scale = (j->w ? j->w[c] : 1.0f) * invstd, shift = j->b ? j->b[c] : 0.0f;
        for (int64_t n = 0; n < j->N; n++) {
            const float *r = j->x + (n * j->C + c) * j->inner;
            float *o = j->y + (n * j->C + c) * j->inner;
            for (int64_t i = 0; i < j->inner; i++) o[i] = (r[i] - m) * scale + shift;
        }
    }
}

/* batch: dx = w invstd (dy - mean(dy) - xhat mean(dy xhat)); else dx = w invstd dy */
static void bn_bwd_channels(void *vj, int64_t begin, int64_t end) {
    const bn_job *j = vj;
    int64_t M = j->N * j->inner;
    for (int64_t c = begin; c < end; c++) {
        float m = j->stats[c], invstd = j->stats[j->C + c];
        double sdy = 0, sdyx = 0;
        for (int64_t n = 0; n < j->N; n++) {
            const float *r = j->x + (n * j->C + c) * j->inner, *d = j->dy + (n * j->C + c) * j->inner;
            for (int64_t i = 0; i < j->inner; i++) {
                sdy += d[i];
                sdyx += (double)d[i] * (double)((r[i] - m) * invstd);
            }
        }
        if (j->dw) j->dw[c] += (float)sdyx;
        if (j->db) j->db[c] += (float)sdy;
        if (!j->dx) continue;
        float k = (j->w ? j->w[c] : 1.0f) * invstd;
        float mdy = j->batch ? (float)(sdy / (double)M) : 0.0f, mdyx = j->batch ? (float)(sdyx / (double)M) : 0.0f;
        for (int64_t n = 0; n < j->N; n++) {
            const float *r = j->x + (n * j->C + c) * j->inner, *d = j->dy + (n * j->C + c) * j->inner;
            float *o = j->dx + (n * j->C + c) * j->inner;
            for (int64_t i = 0; i < j->inner; i++) o[i] += k * (d[i] - mdy - (r[i] - m) * invstd * mdyx);
        }
    }
}

void ts_batch_norm_forward(ts_pool *p, float *y, float *stats, const float *x, const float *w, const float *b, float *run_mean,
                           float *run_var, int64_t N, int64_t C, int64_t inner, float eps, float momentum, bool batch, bool update) {
    bn_job j = {.y = y, .stats = stats, .x = x, .w = w, .b = b, .run_mean = run_mean, .run_var = run_var, .N = N, .C = C, .inner = inner,
                .eps = eps, .momentum = momentum, .batch = batch, .update = update};
    ts_pool_for(p, C, grain_for(2 * N * inner), bn_fwd_channels, &j);
}

void ts_batch_norm_backward(ts_pool *p, float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                            const float *stats, int64_t N, int64_t C, int64_t inner, bool batch) {
    bn_job j = {.dx = dx, .dw = dw, .db = db, .dy = dy, .x = x, .w = w, .stats = (float *)(uintptr_t)stats, .N = N, .C = C,
                .inner = inner, .batch = batch};
    ts_pool_for(p, C, grain_for(2 * N * inner), bn_bwd_channels, &j);
}

/* -------------------------------------------------------------- dropout */

typedef struct mask_job {
    float *mask;
    uint64_t key;
    uint32_t threshold; /* drop when the 32-bit draw is below it */
    float keep_scale;
} mask_job;

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void mask_slice(void *vj, int64_t begin, int64_t end) {
    const mask_job *j = vj;
    for (int64_t i = begin; i < end; i++) {
        uint32_t r = (uint32_t)(mix64(j->key + (uint64_t)i * 0x9E3779B97F4A7C15ull) >> 32);
        j->mask[i] = r < j->threshold ? 0.0f : j->keep_scale;
    }
}

void ts_dropout_mask(ts_pool *p, float *mask, int64_t n, float prob, uint64_t seed, uint64_t iteration) {
    double t = (double)prob * 4294967296.0;
    mask_job j = {.mask = mask, .key = mix64(seed ^ mix64(iteration + 0x632BE59BD9B4E019ull)),
                  .threshold = t >= 4294967295.0 ? UINT32_MAX : (uint32_t)t, .keep_scale = 1.0f / (1.0f - prob)};
    ts_pool_for(p, n, GRAIN, mask_slice, &j);
}

/* ------------------------------------------------------ tanh and sigmoid */

typedef struct act_job {
    float *out;
    const float *a, *b;
    int kind;
} act_job;

enum { TANH_F, TANH_B, SIGMOID_F, SIGMOID_B };

static void act_slice(void *vj, int64_t begin, int64_t end) {
    const act_job *j = vj;
    float *o = j->out;
    const float *a = j->a, *b = j->b;
    switch (j->kind) {
    case TANH_F: for (int64_t i = begin; i < end; i++) o[i] = tanhf(a[i]); break;
    case TANH_B: for (int64_t i = begin; i < end; i++) o[i] += a[i] * (1.0f - b[i] * b[i]); break;
    case SIGMOID_F: /* never exp of a large positive number */
        for (int64_t i = begin; i < end; i++) {
            float e = expf(-fabsf(a[i]));
            o[i] = a[i] >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
        }
        break;
    default: for (int64_t i = begin; i < end; i++) o[i] += a[i] * b[i] * (1.0f - b[i]); break;
    }
}

static void act(ts_pool *p, int kind, float *out, const float *a, const float *b, int64_t n) {
    act_job j = {.out = out, .a = a, .b = b, .kind = kind};
    ts_pool_for(p, n, GRAIN, act_slice, &j);
}

void ts_tanh_forward(ts_pool *p, float *y, const float *x, int64_t n) { act(p, TANH_F, y, x, NULL, n); }
void ts_tanh_backward(ts_pool *p, float *dx, const float *dy, const float *y, int64_t n) { act(p, TANH_B, dx, dy, y, n); }
void ts_sigmoid_forward(ts_pool *p, float *y, const float *x, int64_t n) { act(p, SIGMOID_F, y, x, NULL, n); }
void ts_sigmoid_backward(ts_pool *p, float *dx, const float *dy, const float *y, int64_t n) { act(p, SIGMOID_B, dx, dy, y, n); }
