/* cnn.c -- convolution, pooling, batch norm, dropout, tanh and sigmoid.
 *
 * conv2d is im2col + GEMM one sample at a time, the samples split over the
 * pool's threads. Each thread has its own slot of the shared workspace: the
 * columns of a chunk of one sample's output rows [C*KH*KW, rows*OW], sized
 * to stay in the core's cache between im2col and the product, and, in the
 * backward pass, its partial dW and db, summed into the gradients after the
 * threads join. The product W [OC, C*KH*KW] x columns is those rows of the
 * sample's output [OC, OH*OW], already NCHW. Each product runs on a
 * one-thread OpenBLAS, so the pool's threads are the only ones working (no
 * second pool fighting for the cores). The backward pass rebuilds the
 * columns (no copy kept between passes) and takes dW from one product. With
 * stride 1 the input gradient is the forward pass of another convolution
 * (dgrad_conv: dy with the turned weights); otherwise the columns are
 * overwritten with W^T dY and scattered back (col2im). A 1x1
 * convolution with stride 1 and no padding uses the input as its columns.
 * With fewer samples than threads (inference at batch 1) the forward pass
 * shares each sample: the threads build a chunk's columns together, then
 * split its product by output positions or output channels. */
#include "backend/cpu/cnn.h"

#include "backend/cpu/gemm.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/lane_sum.h"
#include "backend/vmath.h"
#include "core/stats_vec.h"

#include <math.h>
#include <string.h>

#define GRAIN 16384 /* elements below which a hand-off costs more than the work */

static int64_t grain_for(int64_t work_per_item) { return work_per_item >= GRAIN ? 1 : GRAIN / (work_per_item > 0 ? work_per_item : 1); }

/* --------------------------------------------------------------- conv2d */

/* d[i] = s[i * stride] and d[i * stride] += s[i], i < n: rows of 32 or
 * so floats, short enough that a memcpy call costs more than the copy. The
 * copy is spelled in blocks of 8 and a straight-line tail so that the
 * compiler emits vector moves, not a call to memcpy. */
static inline void copy_row(float *restrict d, const float *restrict s, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) d[i + k] = s[i + k];
    if (n - i >= 4) {
        for (int k = 0; k < 4; k++) d[i + k] = s[i + k];
        i += 4;
    }
    if (n - i >= 2) {
        d[i] = s[i], d[i + 1] = s[i + 1];
        i += 2;
    }
    if (n - i >= 1) d[i] = s[i];
}

static void copy_strided(float *restrict d, const float *restrict s, int64_t n, int64_t stride) {
    if (stride == 1) copy_row(d, s, n);
    else if (stride == 2) /* the stem's and the downsampling convolutions': a constant stride the compiler vectorises */
        for (int64_t i = 0; i < n; i++) d[i] = s[2 * i];
    else
        for (int64_t i = 0; i < n; i++) d[i] = s[i * stride];
}

static void add_strided(float *restrict d, const float *restrict s, int64_t n, int64_t stride) {
    if (stride == 1)
        for (int64_t i = 0; i < n; i++) d[i] += s[i];
    else
        for (int64_t i = 0; i < n; i++) d[i * stride] += s[i];
}

/* x / d for x >= 0, without a division at the common strides 1 and 2
 * (pooling asks col_span for every tap of every row) */
static inline int64_t div_small(int64_t x, int64_t d) { return d == 1 ? x : d == 2 ? x >> 1 : x / d; }

/* Kernel column kj reads input column ow*SW + off for output column ow;
 * those in [lo, hi) are inside the plane, the others read padding. */
static inline void col_span(const ts_conv_geom *g, int64_t kj, int64_t *off, int64_t *lo, int64_t *hi) {
    *off = kj * g->DW - g->PL;
    *lo = *off < 0 ? div_small(-*off + g->SW - 1, g->SW) : 0;
    *hi = g->W - 1 - *off < 0 ? 0 : div_small(g->W - 1 - *off, g->SW) + 1;
    *lo = *lo > g->OW ? g->OW : *lo;
    *hi = *hi > g->OW ? g->OW : *hi < *lo ? *lo : *hi;
}

/* The columns of output rows [oh0, oh1) of one sample x[C, H, W] (dx NULL),
 * the rows of kernel rows [r0, r1) (r = c*KH + ki: the threads sharing a
 * sample of few channels, the 7x7 stem's 3, split these):
 * col[(c, ki, kj), (oh - oh0)*OW + ow] = x[c, ih, iw] (0 in the padding);
 * or the reverse (col2im): dx[c, ih, iw] += col[(c, ki, kj), ...]. */
static void im2col(const ts_conv_geom *g, float *restrict col, const float *restrict x, float *restrict dx, int64_t oh0, int64_t oh1,
                   int64_t r0, int64_t r1) {
    const int64_t H = g->H, W = g->W, OW = g->OW, KH = g->KH, KW = g->KW, SH = g->SH, SW = g->SW, DH = g->DH;
    float *d = col + r0 * KW * (oh1 - oh0) * OW;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t c = r / KH, ki = r % KH, kj = 0; kj < KW; kj++) {
            int64_t off, lo, hi;
            col_span(g, kj, &off, &lo, &hi);
            for (int64_t oh = oh0; oh < oh1; oh++, d += OW) {
                int64_t ih = oh * SH - g->PT + ki * DH, at = (c * H + ih) * W + lo * SW + off;
                if (dx) {
                    if (ih >= 0 && ih < H && hi > lo) add_strided(dx + at, d + lo, hi - lo, SW);
                    continue;
                }
                if (ih < 0 || ih >= H) {
                    for (int64_t ow = 0; ow < OW; ow++) d[ow] = 0.0f;
                    continue;
                }
                for (int64_t ow = 0; ow < lo; ow++) d[ow] = 0.0f;
                if (hi > lo) copy_strided(d + lo, x + at, hi - lo, SW);
                for (int64_t ow = hi; ow < OW; ow++) d[ow] = 0.0f;
            }
        }
}

/* Stride 1, dilation 1: the sample padded once to [C, OH+KH-1, OW+KW-1]
 * (or the input itself when it needs no padding), every row of the columns
 * is one copy of OW floats and every row of col2im one add, no bounds. */
static bool conv_unit(const ts_conv_geom *g) { return g->SH == 1 && g->SW == 1 && g->DH == 1 && g->DW == 1; }

static bool conv_padded(const ts_conv_geom *g) {
    return conv_unit(g) && !(g->PT == 0 && g->PL == 0 && g->OH + g->KH - 1 == g->H && g->OW + g->KW - 1 == g->W);
}

/* reserved in every slot: the workspace is sized from the shapes alone */
static int64_t padded_floats(const ts_conv_geom *g) { return g->C * (g->OH + g->KH - 1) * (g->OW + g->KW - 1); }

/* xp[c, i, j] = x[c, i - PT, j - PL] (0 outside) for channels [c0, c1), or
 * back: x[c, ih, iw] += xp[...] */
static void pad_sample(const ts_conv_geom *g, float *restrict xp, const float *restrict x, int64_t c0, int64_t c1) {
    int64_t Hp = g->OH + g->KH - 1, Wp = g->OW + g->KW - 1, n = g->W < Wp - g->PL ? g->W : Wp - g->PL; /* columns copied */
    for (int64_t c = c0; c < c1; c++)
        for (int64_t i = 0; i < Hp; i++) {
            float *d = xp + (c * Hp + i) * Wp;
            int64_t ih = i - g->PT, j = 0;
            if (ih >= 0 && ih < g->H && n > 0) {
                for (; j < g->PL; j++) d[j] = 0.0f;
                copy_row(d + j, x + (c * g->H + ih) * g->W, n);
                j += n;
            }
            for (; j < Wp; j++) d[j] = 0.0f;
        }
}

static void unpad_add(const ts_conv_geom *g, float *restrict x, const float *restrict xp) {
    int64_t Hp = g->OH + g->KH - 1, Wp = g->OW + g->KW - 1;
    for (int64_t c = 0; c < g->C; c++)
        for (int64_t ih = 0; ih < g->H && ih + g->PT < Hp; ih++) {
            int64_t n = g->W < Wp - g->PL ? g->W : Wp - g->PL;
            add_strided(x + (c * g->H + ih) * g->W, xp + (c * Hp + ih + g->PT) * Wp + g->PL, n, 1);
        }
}

static void im2col_unit(const ts_conv_geom *g, float *restrict col, const float *restrict xp, int64_t oh0, int64_t oh1, int64_t r0,
                        int64_t r1) {
    const int64_t OW = g->OW, KH = g->KH, KW = g->KW, Hp = g->OH + KH - 1, Wp = OW + KW - 1;
    float *d = col + r0 * KW * (oh1 - oh0) * OW;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t c = r / KH, ki = r % KH, kj = 0; kj < KW; kj++) {
            const float *s = xp + (c * Hp + ki + oh0) * Wp + kj;
            for (int64_t oh = oh0; oh < oh1; oh++, d += OW, s += Wp) copy_row(d, s, OW);
        }
}

static void col2im_unit(const ts_conv_geom *g, float *restrict dxp, const float *restrict col, int64_t oh0, int64_t oh1) {
    const int64_t OW = g->OW, KH = g->KH, KW = g->KW, Hp = g->OH + KH - 1, Wp = OW + KW - 1;
    const float *s = col;
    for (int64_t c = 0; c < g->C; c++)
        for (int64_t ki = 0; ki < KH; ki++)
            for (int64_t kj = 0; kj < KW; kj++) {
                float *d = dxp + (c * Hp + ki + oh0) * Wp + kj;
                for (int64_t oh = oh0; oh < oh1; oh++, s += OW, d += Wp) add_strided(d, s, OW, 1);
            }
}

typedef struct conv_job {
    const ts_conv_geom *g;
    float *ws, *y, *dx, *dw, *db;
    const float *x, *w, *b, *dy;
    int64_t slots;
    bool direct; /* the input is its own columns */
    bool shared; /* fewer samples than threads: the threads share each sample (forward) */
    bool bias_first; /* inference: the bias fills the output and the product adds to it */
    bool accumulate; /* the product adds to the output (the input gradient as a convolution: dx +=) */
    const ts_conv_tail *tail; /* the fused Add and Relu that follow it, in the output pass (ts_conv_tail), else NULL */
    ts_stats_sums *sums;      /* forward: the output's sums, one per sample (ts_conv_tail.sums), else NULL */
} conv_job;

/* r[i] = max(0, y[i]) for i in [0, n) as the Relu computes it
 * (ts_relu_forward: NaN and -0 kept), r may be y (two loops, so that the
 * compiler vectorizes both without a check of the pointers' overlap) */
static inline void relu_apart(float *restrict r, const float *restrict y, int64_t n) {
    for (int64_t i = 0; i < n; i++) r[i] = y[i] < 0.0f ? 0.0f : y[i];
}
static inline void relu_into(float *r, float *y, int64_t n) {
    if (r != y) {
        relu_apart(r, y, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) y[i] = y[i] < 0.0f ? 0.0f : y[i];
}

/* The tail t over outputs [o, o + n) of y, which holds conv + b there: the
 * residual's sum, as the Add computes it, then the Relu (the outputs may
 * be the same memory: ts_conv_tail, in order, element by element). */
static void tail_apply(const ts_conv_tail *t, float *y, int64_t o, int64_t n) {
    const float *res = t->res ? t->res + o : NULL;
    float *yo = y + o, *sum = t->sum ? t->sum + o : NULL, *relu = t->relu ? t->relu + o : NULL;
    if (!res) {
        if (relu) relu_into(relu, yo, n);
        return;
    }
    if (sum) {
        for (int64_t i = 0; i < n; i++) sum[i] = yo[i] + res[i];
        if (relu) relu_into(relu, sum, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        float v = yo[i] + res[i];
        relu[i] = v < 0.0f ? 0.0f : v;
    }
}

/* a tail that does something, else NULL; whether its outputs cover y's
 * (then y need not be written where the tail's own pass writes them) */
static const ts_conv_tail *tail_of(const ts_conv_tail *t) { return t && (t->relu || (t->res && (t->sum || t->relu))) ? t : NULL; }
static bool tail_over(const ts_conv_tail *t, const float *y) { return t && ((t->res && t->sum == y) || t->relu == y); }

/* below this many multiply-adds a convolution runs on the calling thread */
#define CONV_PAR_MACS (256 * 1024)
/* the columns of a chunk of output rows, at most about this many floats:
 * they stay in the core's L2 cache between im2col and the product; but a
 * chunk keeps at least CONV_MIN_COLS output positions (fewer: OpenBLAS's
 * products of 7 to 56 columns ran at a third of its speed) */
#ifndef CONV_CHUNK_FLOATS
#define CONV_CHUNK_FLOATS (64 * 1024)
#endif
#ifndef CONV_MIN_COLS
#define CONV_MIN_COLS 256
#endif

static int64_t conv_slots(const ts_conv_geom *g, int threads) { return g->N < threads ? (g->N > 0 ? g->N : 1) : threads; }

static bool conv_direct(const ts_conv_geom *g) {
    return g->KH == 1 && g->KW == 1 && g->SH == 1 && g->SW == 1 && g->PT == 0 && g->PL == 0 && g->OH == g->H && g->OW == g->W;
}

/* output rows per chunk for `share` threads working on it together: the
 * fewest equal chunks under share * CONV_CHUNK_FLOATS, with at least share *
 * CONV_MIN_COLS positions. This and the slot's size depend on the shapes
 * only (N, C, OC, OH, OW, KH, KW, groups): the workspace is sized from them. */
static int64_t chunk_rows(const ts_conv_geom *g, int64_t share) {
    if (g->OH < 1) return 1;
    int64_t per_row = g->C * g->KH * g->KW * g->OW, rows = per_row > 0 ? share * CONV_CHUNK_FLOATS / per_row : g->OH;
    int64_t least = g->OW > 0 ? (share * CONV_MIN_COLS + g->OW - 1) / g->OW : 1;
    rows = rows < least ? least : rows;
    rows = rows < 1 ? 1 : rows > g->OH ? g->OH : rows;
    int64_t chunks = (g->OH + rows - 1) / rows;
    return (g->OH + chunks - 1) / chunks;
}

/* a slot: columns [C*KK, rows*OW], partial dW [OC, C/groups*KK], partial
 * db [OC], the padded sample and its gradient (conv_padded) */
static int64_t col_floats(const ts_conv_geom *g) { return g->C * g->KH * g->KW * chunk_rows(g, 1) * g->OW; }

static size_t slot_floats(const ts_conv_geom *g) {
    int64_t KK = g->KH * g->KW;
    return (size_t)(col_floats(g) + g->OC * (g->C / (g->groups > 0 ? g->groups : 1)) * KK + g->OC + 2 * padded_floats(g));
}

/* the shared forward (conv_fwd_shared): the columns of one chunk for all
 * threads, then the padded sample */
static size_t shared_floats(const ts_conv_geom *g, int threads) {
    return (size_t)(g->C * g->KH * g->KW * chunk_rows(g, threads) * g->OW + padded_floats(g));
}

static size_t wino_floats(const ts_conv_geom *g, int threads);
static int wino_m(const ts_conv_geom *g, bool kept);
static void conv_fwd_winograd(ts_pool *p, float *ws, float *y, const float *x, const float *w, const float *b, const ts_conv_geom *g, int m,
                              float *cache, uint64_t key, bool accumulate, const ts_conv_tail *tail);
static void conv_dw_winograd(ts_pool *p, float *ws, float *dw, const float *dy, const float *x, const ts_conv_geom *g, int m);

/* im2col's workspace: a slot per thread, or the shared forward's columns */
static size_t cols_floats(const ts_conv_geom *g, int threads) {
    size_t slots = (size_t)conv_slots(g, threads) * slot_floats(g), shared = g->N < threads ? shared_floats(g, threads) : 0;
    return slots > shared ? slots : shared;
}

/* The input gradient of a convolution with stride 1 and dilation 1 is
 * itself one: dx = conv(dy, w'), dy padded by K-1-P at the top and left
 * (and what is left of the bottom and right), w' [C, OC/groups, KH, KW] the
 * weights with their channel axes swapped and their windows turned by 180
 * degrees. Its columns are dy's ([OC*KH*KW, positions]) and its product
 * writes dx's values, where the scatter (col2im) wrote and then added the
 * 9 times larger columns of a 3x3; the product adds to dx (beta 1), so
 * OpenBLAS does not zero anything first. It takes C*H*W*OC*KH*KW
 * multiply-adds where the scatter's product takes OH*OW for H*W: only
 * where the output is no smaller than the input ("same" padding; a
 * "valid" 5x5 on 12x12, LeNet's, would take 2.25 times as many and ran
 * slower). Padding wider than the window (K-1-P < 0) keeps the scatter. */
static bool dgrad_fits(const ts_conv_geom *g) { /* from the shapes: what stride 1 with that padding implies */
    return g->H > 0 && g->W > 0 && g->OH + g->KH - 1 >= g->H && g->OW + g->KW - 1 >= g->W && g->groups > 0 && g->H * g->W <= g->OH * g->OW;
}

static bool dgrad_conv(const ts_conv_geom *g) {
    return conv_unit(g) && !conv_direct(g) && g->PT <= g->KH - 1 && g->PL <= g->KW - 1 && dgrad_fits(g);
}

static ts_conv_geom dgrad_geom(const ts_conv_geom *g) {
    return (ts_conv_geom){.N = g->N, .C = g->OC, .H = g->OH, .W = g->OW, .OC = g->C, .OH = g->H, .OW = g->W, .KH = g->KH, .KW = g->KW,
                          .SH = 1, .SW = 1, .PT = g->KH - 1 - g->PT, .PL = g->KW - 1 - g->PL, .DH = 1, .DW = 1, .groups = g->groups};
}

/* w' first (rounded up to 64 bytes), then its convolution's columns */
static size_t dgrad_w_floats(const ts_conv_geom *g) { return ((size_t)(g->OC * (g->C / g->groups) * g->KH * g->KW) + 15) / 16 * 16; }

static size_t dgrad_floats(const ts_conv_geom *g, int threads) {
    if (!dgrad_fits(g)) return 0;
    ts_conv_geom d = dgrad_geom(g);
    size_t cols = cols_floats(&d, threads), wino = wino_floats(&d, threads);
    return dgrad_w_floats(g) + (cols > wino ? cols : wino);
}

static size_t packed_floats(const ts_conv_geom *g, int threads);

size_t ts_conv2d_workspace(const ts_conv_geom *g, int threads) {
    size_t most = cols_floats(g, threads), wino = wino_floats(g, threads), dgrad = dgrad_floats(g, threads), pk = packed_floats(g, threads);
    most = most > wino ? most : wino;
    most = most > pk ? most : pk;
    return most > dgrad ? most : dgrad;
}

/* Sample n as im2col reads it: padded into xp, or the input itself */
static const float *conv_sample(const conv_job *j, float *xp, int64_t n) {
    const float *xn = j->x + n * j->g->C * j->g->H * j->g->W;
    if (!conv_padded(j->g)) return xn;
    pad_sample(j->g, xp, xn, 0, j->g->C);
    return xp;
}

/* The columns of output rows [oh0, oh1) of sample xs (conv_sample) and
 * their row stride: built in col, or the input itself. */
static const float *conv_cols(const conv_job *j, float *col, const float *xs, int64_t oh0, int64_t oh1, int64_t *ld) {
    const ts_conv_geom *g = j->g;
    if (j->direct) {
        *ld = g->H * g->W;
        return xs + oh0 * g->W;
    }
    *ld = (oh1 - oh0) * g->OW;
    if (conv_unit(g)) im2col_unit(g, col, xs, oh0, oh1, 0, g->C * g->KH);
    else im2col(g, col, xs, NULL, oh0, oh1, 0, g->C * g->KH);
    return col;
}

static void slot_samples(const conv_job *j, int64_t slot, int64_t *n0, int64_t *n1) {
    *n0 = j->g->N * slot / j->slots;
    *n1 = j->g->N * (slot + 1) / j->slots;
}

/* yn[oc, p] += b[oc] (or = b[oc]: fill) for output channels [oc0, oc1), positions [p0, p1) */
static void add_bias(float *yn, const float *b, int64_t OHW, int64_t oc0, int64_t oc1, int64_t p0, int64_t p1, bool fill) {
    for (int64_t oc = oc0; b && oc < oc1; oc++) {
        float bv = b[oc], *r = yn + oc * OHW;
        if (fill)
            for (int64_t i = p0; i < p1; i++) r[i] = bv;
        else
            for (int64_t i = p0; i < p1; i++) r[i] += bv;
    }
}

/* The bias around a chunk's product: added after it (the training
 * forward's sums), or in inference written first, the product adding to it
 * (beta 1: OpenBLAS then skips its pass zeroing the output, and no second
 * pass adds the bias). Returns the product's beta. */
static float bias_before(const conv_job *j, float *yn, int64_t OHW, int64_t oc0, int64_t oc1, int64_t p0, int64_t p1) {
    if (j->accumulate) return 1.0f;
    if (!j->bias_first || !j->b) return 0.0f;
    add_bias(yn, j->b, OHW, oc0, oc1, p0, p1, true);
    return 1.0f;
}

/* ... and the Add and Relu that follow it (the tail), over the same outputs */
static void bias_after(const conv_job *j, float *yn, int64_t OHW, int64_t oc0, int64_t oc1, int64_t p0, int64_t p1) {
    if (!j->bias_first) add_bias(yn, j->b, OHW, oc0, oc1, p0, p1, false);
    for (int64_t oc = oc0; j->tail && oc < oc1; oc++) tail_apply(j->tail, j->y, (yn - j->y) + oc * OHW + p0, p1 - p0);
}

static void conv_fwd_slots(void *vj, int64_t begin, int64_t end) {
    const conv_job *j = vj;
    const ts_conv_geom *g = j->g;
    int64_t OHW = g->OH * g->OW, CgKK = g->C / g->groups * g->KH * g->KW, OCg = g->OC / g->groups, R = chunk_rows(g, 1);
    for (int64_t slot = begin; slot < end; slot++) {
        int64_t n0, n1, ld;
        slot_samples(j, slot, &n0, &n1);
        float *col = j->ws + (size_t)slot * slot_floats(g), *xp = col + slot_floats(g) - 2 * padded_floats(g);
        for (int64_t n = n0; n < n1; n++) {
            float *yn = j->y + n * g->OC * OHW;
            const float *xs = conv_sample(j, xp, n);
            for (int64_t oh0 = 0; oh0 < g->OH; oh0 += R) {
                int64_t oh1 = oh0 + R < g->OH ? oh0 + R : g->OH;
                const float *cols = conv_cols(j, col, xs, oh0, oh1, &ld);
                float beta = bias_before(j, yn, OHW, 0, g->OC, oh0 * g->OW, oh1 * g->OW);
                for (int64_t gi = 0; gi < g->groups; gi++)
                    ts_gemm_serial(false, false, OCg, (oh1 - oh0) * g->OW, CgKK, j->w + gi * OCg * CgKK, CgKK, cols + gi * CgKK * ld, ld,
                                   beta, yn + gi * OCg * OHW + oh0 * g->OW, OHW);
                bias_after(j, yn, OHW, 0, g->OC, oh0 * g->OW, oh1 * g->OW);
            }
            if (j->sums) ts_stats_sums_add(&j->sums[n], yn, g->OC * OHW); /* the sample's output, in the cache still */
        }
    }
}

/* Fewer samples than threads: the threads share each chunk of one sample.
 * They pad the sample and build the columns by input channels, then split
 * the product by output positions where each thread gets CONV_MIN_COLS of
 * them, else by output channels (at least SHARE_MIN_ROWS each). Its chunks
 * are `threads` times a slot's. */
#define SHARE_MIN_ROWS 16

typedef struct conv_share {
    const conv_job *j;
    float *col, *xp, *yn;
    const float *xn, *xs, *cols;
    int64_t oh0, oh1, ld;
} conv_share;

static void share_pad(void *v, int64_t c0, int64_t c1) {
    const conv_share *s = v;
    pad_sample(s->j->g, s->xp, s->xn, c0, c1);
}

static void share_im2col(void *v, int64_t r0, int64_t r1) {
    const conv_share *s = v;
    if (conv_unit(s->j->g)) im2col_unit(s->j->g, s->col, s->xs, s->oh0, s->oh1, r0, r1);
    else im2col(s->j->g, s->col, s->xs, NULL, s->oh0, s->oh1, r0, r1);
}

/* output channels [r0, r1) of the chunk, over every group they touch */
static void share_rows(void *v, int64_t r0, int64_t r1) {
    const conv_share *s = v;
    const ts_conv_geom *g = s->j->g;
    int64_t OHW = g->OH * g->OW, CgKK = g->C / g->groups * g->KH * g->KW, OCg = g->OC / g->groups, p0 = s->oh0 * g->OW;
    float beta = bias_before(s->j, s->yn, OHW, r0, r1, p0, s->oh1 * g->OW);
    for (int64_t gi = r0 / OCg; gi < g->groups && gi * OCg < r1; gi++) {
        int64_t lo = r0 > gi * OCg ? r0 : gi * OCg, hi = r1 < (gi + 1) * OCg ? r1 : (gi + 1) * OCg;
        ts_gemm_serial(false, false, hi - lo, (s->oh1 - s->oh0) * g->OW, CgKK, s->j->w + lo * CgKK, CgKK, s->cols + gi * CgKK * s->ld,
                       s->ld, beta, s->yn + lo * OHW + p0, OHW);
    }
    bias_after(s->j, s->yn, OHW, r0, r1, p0, s->oh1 * g->OW);
}

/* output positions [q0, q1) of the chunk (counted from its first), every channel */
static void share_cols(void *v, int64_t q0, int64_t q1) {
    const conv_share *s = v;
    const ts_conv_geom *g = s->j->g;
    int64_t OHW = g->OH * g->OW, CgKK = g->C / g->groups * g->KH * g->KW, OCg = g->OC / g->groups, p0 = s->oh0 * g->OW;
    float beta = bias_before(s->j, s->yn, OHW, 0, g->OC, p0 + q0, p0 + q1);
    for (int64_t gi = 0; gi < g->groups; gi++)
        ts_gemm_serial(false, false, OCg, q1 - q0, CgKK, s->j->w + gi * OCg * CgKK, CgKK, s->cols + gi * CgKK * s->ld + q0, s->ld, beta,
                       s->yn + gi * OCg * OHW + p0 + q0, OHW);
    bias_after(s->j, s->yn, OHW, 0, g->OC, p0 + q0, p0 + q1);
}

static void conv_fwd_shared(ts_pool *p, const conv_job *j) {
    const ts_conv_geom *g = j->g;
    int64_t OHW = g->OH * g->OW, threads = ts_pool_threads(p), R = chunk_rows(g, threads);
    conv_share s = {.j = j, .col = j->ws};
    s.xp = s.col + shared_floats(g, (int)threads) - padded_floats(g);
    for (int64_t n = 0; n < g->N; n++) {
        s.yn = j->y + n * g->OC * OHW;
        s.xn = s.xs = j->x + n * g->C * g->H * g->W;
        if (conv_padded(g)) {
            ts_pool_for(p, g->C, 1, share_pad, &s);
            s.xs = s.xp;
        }
        for (s.oh0 = 0; s.oh0 < g->OH; s.oh0 += R) {
            s.oh1 = s.oh0 + R < g->OH ? s.oh0 + R : g->OH;
            int64_t P = (s.oh1 - s.oh0) * g->OW;
            if (j->direct) {
                s.cols = s.xs + s.oh0 * g->W, s.ld = g->H * g->W;
            } else {
                ts_pool_for(p, g->C * g->KH, 1, share_im2col, &s);
                s.cols = s.col, s.ld = P;
            }
            if (P >= threads * CONV_MIN_COLS || g->OC < threads * SHARE_MIN_ROWS) ts_pool_for(p, P, CONV_MIN_COLS / 4, share_cols, &s);
            else ts_pool_for(p, g->OC, SHARE_MIN_ROWS, share_rows, &s);
        }
    }
}

/* The weights' gradient of few output channels (one group) as its
 * transpose, columns x dY^T: OpenBLAS then takes the output channels,
 * not the columns' rows, as the rows of its register tile. At batch 64,
 * one thread: 16 channels 3x3 on 32x32 6.0 -> 5.3 ms, 16 to 32 channels
 * stride 2 3.0 -> 2.75 ms; at 64 channels it was slower, so those stay.
 * The partials are [CKK, OC]; add_partials turns them back. */
#ifndef CONV_DW_TURNED_OC
#define CONV_DW_TURNED_OC 32
#endif
static bool dw_turned(const ts_conv_geom *g) { return g->groups == 1 && g->OC <= CONV_DW_TURNED_OC; }

static void conv_bwd_slots(void *vj, int64_t begin, int64_t end) {
    const conv_job *j = vj;
    const ts_conv_geom *g = j->g;
    int64_t OHW = g->OH * g->OW, CgKK = g->C / g->groups * g->KH * g->KW, OCg = g->OC / g->groups, R = chunk_rows(g, 1);
    bool padded = conv_padded(g), unit = conv_unit(g);
    for (int64_t slot = begin; slot < end; slot++) {
        int64_t n0, n1, ld;
        slot_samples(j, slot, &n0, &n1);
        float *col = j->ws + (size_t)slot * slot_floats(g), *dwp = col + col_floats(g), *dbp = dwp + g->OC * CgKK;
        float *xp = dbp + g->OC, *dxp = xp + padded_floats(g);
        memset(dbp, 0, (size_t)g->OC * sizeof(float));
        for (int64_t n = n0; n < n1; n++) {
            const float *dyn = j->dy + n * g->OC * OHW, *xs = j->dw ? conv_sample(j, xp, n) : NULL;
            float *dxn = j->dx ? j->dx + n * g->C * g->H * g->W : NULL, *dxs = padded ? dxp : dxn; /* where col2im adds */
            if (dxn && padded) memset(dxp, 0, (size_t)padded_floats(g) * sizeof(float));
            for (int64_t oc = 0; j->db && oc < g->OC; oc++) dbp[oc] += (float)ts_lane_sum(dyn + oc * OHW, 0.0f, NULL, 0.0f, OHW);
            for (int64_t oh0 = 0; oh0 < g->OH; oh0 += R) {
                int64_t oh1 = oh0 + R < g->OH ? oh0 + R : g->OH, P = (oh1 - oh0) * g->OW;
                const float *dyc = dyn + oh0 * g->OW;
                if (j->dw) {
                    const float *cols = conv_cols(j, col, xs, oh0, oh1, &ld);
                    float beta = n == n0 && oh0 == 0 ? 0.0f : 1.0f;
                    if (dw_turned(g)) /* dW^T [CKK, OC] = columns x dY^T */
                        ts_gemm_serial(false, true, CgKK, g->OC, P, cols, ld, dyc, OHW, beta, dwp, g->OC);
                    else
                        for (int64_t gi = 0; gi < g->groups; gi++)
                            ts_gemm_serial(false, true, OCg, CgKK, P, dyc + gi * OCg * OHW, OHW, cols + gi * CgKK * ld, ld, beta,
                                           dwp + gi * OCg * CgKK, CgKK);
                }
                if (!dxn) continue;
                for (int64_t gi = 0; gi < g->groups; gi++) /* direct: straight into dx (OHW = H*W, KK = 1) */
                    ts_gemm_serial(true, false, CgKK, P, OCg, j->w + gi * OCg * CgKK, CgKK, dyc + gi * OCg * OHW, OHW,
                                   j->direct ? 1.0f : 0.0f, j->direct ? dxn + gi * CgKK * OHW + oh0 * g->OW : col + gi * CgKK * P,
                                   j->direct ? OHW : P);
                if (j->direct) continue;
                if (unit) col2im_unit(g, dxs, col, oh0, oh1);
                else im2col(g, col, NULL, dxn, oh0, oh1, 0, g->C * g->KH);
            }
            if (dxn && padded) unpad_add(g, dxn, dxp);
        }
    }
}

/* sum over the slots' partials: out[i] += sum_s part_s[i]; or, rows > 0,
 * the partials are out^T [n / rows, rows]: out[r, q] += sum_s part_s[q, r] */
static void add_partials(float *out, const float *part, int64_t n, int64_t slots, size_t stride, int64_t rows) {
    for (int64_t i = 0; i < n; i++) {
        size_t at = rows > 0 ? (size_t)(i % (n / rows) * rows + i / (n / rows)) : (size_t)i;
        double s = 0;
        for (int64_t k = 0; k < slots; k++) s += part[(size_t)k * stride + at];
        out[i] += (float)s;
    }
}

static conv_job conv_job_for(ts_pool *p, float *ws, const ts_conv_geom *g) {
    int64_t macs = g->N * g->OC * g->OH * g->OW * (g->C / g->groups) * g->KH * g->KW;
    int threads = ts_pool_threads(p);
    conv_job j = {.g = g, .ws = ws, .slots = macs < CONV_PAR_MACS ? 1 : conv_slots(g, threads), .direct = conv_direct(g),
                  .shared = macs >= CONV_PAR_MACS && g->N < threads};
    ts_gemm_serial_begin();
    return j;
}

static void conv_forward(ts_pool *p, float *ws, float *y, const float *x, const float *w, const float *b, const ts_conv_geom *g,
                         bool bias_first, const ts_conv_tail *tail) {
    conv_job j = conv_job_for(p, ws, g);
    j.y = y, j.x = x, j.w = w, j.b = b, j.bias_first = bias_first, j.tail = tail_of(tail), j.sums = tail ? tail->sums : NULL;
    if (j.shared) conv_fwd_shared(p, &j);
    else ts_pool_for(p, j.slots, 1, conv_fwd_slots, &j);
}

void ts_conv2d_forward(ts_pool *p, float *ws, float *y, const float *x, const float *w, const float *b, const ts_conv_geom *g,
                       const ts_conv_tail *tail) {
    conv_forward(p, ws, y, x, w, b, g, false, tail);
}

typedef struct dgrad_job {
    const ts_conv_geom *g;
    float *wt;
    const float *w;
} dgrad_job;

/* w'[gi*Cg + c, oc, KH-1-ki, KW-1-kj] = w[gi*OCg + oc, c, ki, kj] for rows [r0, r1) of w' */
static void dgrad_weights(void *v, int64_t r0, int64_t r1) {
    const dgrad_job *d = v;
    const ts_conv_geom *g = d->g;
    int64_t KK = g->KH * g->KW, Cg = g->C / g->groups, OCg = g->OC / g->groups;
    for (int64_t r = r0; r < r1; r++) {
        int64_t gi = r / Cg, c = r % Cg;
        for (int64_t oc = 0; oc < OCg; oc++) {
            const float *s = d->w + ((gi * OCg + oc) * Cg + c) * KK;
            float *t = d->wt + (r * OCg + oc) * KK;
            for (int64_t k = 0; k < KK; k++) t[KK - 1 - k] = s[k];
        }
    }
}

static void dgrad_by_conv(ts_pool *p, float *ws, float *dx, const float *dy, const float *w, const ts_conv_geom *g, bool store) {
    ts_conv_geom d = dgrad_geom(g);
    dgrad_job dj = {g, ws, w};
    ts_pool_for(p, g->C, grain_for(g->OC / g->groups * g->KH * g->KW), dgrad_weights, &dj);
    int m = wino_m(&d, false);
    if (m) { /* a 3x3 with enough tiles: Winograd's products, as the forward pass's */
        conv_fwd_winograd(p, ws + dgrad_w_floats(g), dx, dy, dj.wt, NULL, &d, m, NULL, 0, !store, NULL);
        return;
    }
    conv_job j = conv_job_for(p, ws + dgrad_w_floats(g), &d);
    j.y = dx, j.x = dy, j.w = dj.wt, j.accumulate = !store; /* storing: the forward's product, beta 0 */
    if (j.shared) conv_fwd_shared(p, &j);
    else ts_pool_for(p, j.slots, 1, conv_fwd_slots, &j);
}

void ts_conv2d_backward(ts_pool *p, float *ws, float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                        const ts_conv_geom *g, bool dx_store) {
    if (!dx && !dw && !db) return;
    bool by_conv = dx && dgrad_conv(g);
    int wm = dw ? ts_conv2d_winograd_tile(g, false) : 0; /* dw through the forward's tiles */
    if (dx && dx_store && !by_conv) ts_zero(p, dx, g->N * g->C * g->H * g->W); /* the scatter adds */
    conv_job j = conv_job_for(p, ws, g);
    j.dx = by_conv ? NULL : dx, j.dw = wm ? NULL : dw, j.db = db, j.dy = dy, j.x = x, j.w = w;
    if (j.dx || j.dw || db) {
        ts_pool_for(p, j.slots, 1, conv_bwd_slots, &j);
        int64_t wn = g->OC * (g->C / g->groups) * g->KH * g->KW;
        const float *dwp = ws + col_floats(g);
        if (j.dw) add_partials(dw, dwp, wn, j.slots, slot_floats(g), dw_turned(g) ? g->OC : 0);
        if (db) add_partials(db, dwp + wn, g->OC, j.slots, slot_floats(g), 0);
    }
    /* after the partials are read: these reuse the workspace */
    if (wm) conv_dw_winograd(p, ws, dw, dy, x, g, wm);
    if (by_conv) dgrad_by_conv(p, ws, dx, dy, w, g, dx_store);
}

/* ------------------------------------------------ transposed convolution */

size_t ts_conv_transpose2d_workspace(const ts_conv_geom *g, int threads) {
    return ts_conv2d_workspace(g, threads) + (size_t)(g->N * g->OC * g->OH * g->OW); /* and conv(dy, w), added to dx */
}

void ts_conv_transpose2d_forward(ts_pool *p, float *ws, float *y, const float *x, const float *w, const float *b, const ts_conv_geom *g) {
    int64_t HW = g->H * g->W;
    ts_conv2d_backward(p, ws, y, NULL, NULL, x, NULL, w, g, true);
    for (int64_t q = 0; b && q < g->N * g->C; q++) {
        float bv = b[q % g->C], *yq = y + q * HW;
        for (int64_t i = 0; i < HW; i++) yq[i] += bv;
    }
}

void ts_conv_transpose2d_backward(ts_pool *p, float *ws, float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                                  const ts_conv_geom *g, bool dx_store) {
    int64_t HW = g->H * g->W, n = g->N * g->OC * g->OH * g->OW;
    for (int64_t c = 0; db && c < g->C; c++) {
        double s = 0;
        for (int64_t nn = 0; nn < g->N; nn++) s += ts_lane_sum(dy + (nn * g->C + c) * HW, 0.0f, NULL, 0.0f, HW);
        db[c] += (float)s;
    }
    if (dw) ts_conv2d_backward(p, ws, NULL, dw, NULL, x, dy, w, g, false);
    if (!dx) return;
    if (dx_store) {
        ts_conv2d_forward(p, ws, dx, dy, w, NULL, g, NULL);
        return;
    }
    float *t = ws + ts_conv2d_workspace(g, ts_pool_threads(p));
    ts_conv2d_forward(p, ws, t, dy, w, NULL, g, NULL);
    ts_accumulate(p, dx, t, n);
}

/* ------------------------------------------- conv2d: Winograd F(m x m, 3x3) */

/* A 3x3 convolution with stride 1 through Winograd's minimal filtering
 * (Lavin and Gray, 2015): each m x m block of outputs (a tile) from the
 * a x a input patch under it (a = m + 2), d, as
 *     Y = A^T [(G g G^T) .* (B^T d B)] A.
 * The a*a products of a tile's transformed values, summed over the input
 * channels, are a*a GEMMs M[e] = U[e] [OC, C] x V[e] [C, tiles]. F(2x2, 3x3)
 * takes 16 multiply-adds per tile and channel pair where im2col + GEMM
 * takes 36 (2.25 times fewer), F(4x4, 3x3) 36 where it takes 144 (4 times
 * fewer; its transforms, with points 0, +-1, +-2, lose a few more bits).
 * U, the transformed weights, is made at every call (the weights may change
 * between calls), or kept in the caller's cache and made again only when
 * the weights' key changes (an inference model's: its weights change only
 * when the host writes them). Making U is memory traffic that pays only
 * with enough tiles, so the variant is chosen from the tile counts (wino_m);
 * with U kept, fewer tiles pay (ResNet-18's last two stages at batch 1, 16
 * tiles of a 14x14 or 7x7 plane). The tiles are done a
 * chunk of tile rows at a time (V and M stay in the cache), in three steps
 * shared by the threads: the input transform by input channels, the a*a
 * products by e, the output transform (and bias) by output channels. The
 * sums run in another order than im2col's, so outputs differ from
 * im2col's in the last bits; training takes it only where the tiles pay
 * for making U at every call (ts_conv2d_winograd_tile(g, false)). */

/* the fewest multiply-adds of a sample worth the transforms (the 3-stage
 * CIFAR ResNet's 3x3s, 2.4M each, train faster through F(4x4): their
 * convolutions' time 43 -> 35 ms a step at batch 64; its 3-channel stem,
 * 0.44M, slower); the fewest tiles of the batch for F(2x2) and for F(4x4),
 * U made at the call (below, making U costs more than the products save:
 * measured on ResNet-18's shapes) and U kept (_KEPT: below, reading U
 * costs more than im2col's products); the fewest tiles a chunk's products
 * keep (OpenBLAS's slow shapes below) */
#ifndef WINO_MIN_MACS
#define WINO_MIN_MACS (1024 * 1024)
#endif
#ifndef WINO_F2_TILES
#define WINO_F2_TILES 32
#endif
#ifndef WINO_F4_TILES
#define WINO_F4_TILES 48
#endif
#ifndef WINO_F2_TILES_KEPT
#define WINO_F2_TILES_KEPT 16
#endif
#ifndef WINO_F4_TILES_KEPT
#define WINO_F4_TILES_KEPT 16
#endif
#ifndef WINO_CHUNK_FLOATS
#define WINO_CHUNK_FLOATS (1024 * 1024)
#endif
#define WINO_MIN_TILES 64

static int64_t wino_tiles(const ts_conv_geom *g, int m) { return g->N * ((g->OH + m - 1) / m) * ((g->OW + m - 1) / m); }

/* the tile size for a convolution of these shapes (sizing the workspace
 * knows no more than the shapes), U kept or not, 0 for none */
static int wino_m(const ts_conv_geom *g, bool kept) {
    if (g->KH != 3 || g->KW != 3 || g->groups != 1 || g->N < 1 || g->OH < 1 || g->OW < 1 || g->OC * g->C * 9 * g->OH * g->OW < WINO_MIN_MACS)
        return 0;
    int64_t f4 = kept ? WINO_F4_TILES_KEPT : WINO_F4_TILES, f2 = kept ? WINO_F2_TILES_KEPT : WINO_F2_TILES;
    return wino_tiles(g, 4) >= f4 ? 4 : wino_tiles(g, 2) >= f2 ? 2 : 0;
}

int ts_conv2d_winograd_tile(const ts_conv_geom *g, bool cached) { return conv_unit(g) ? wino_m(g, cached) : 0; }

typedef struct wino_job {
    const ts_conv_geom *g;
    const float *x, *w, *b;
    float *y, *u, *v, *mm;
    int m, a, E;        /* tile, patch, a*a */
    int64_t TH, TW;     /* tiles down a sample and across */
    int64_t row0, row1; /* the chunk's tile rows, over the batch (N * TH) */
    int64_t ld;         /* its tiles rounded up to WINO_NT / 2: the distance between the E rows of V and of M */
    int64_t oc0, oc1;   /* the output channels of M (the forward's slice: M's rows are oc - oc0) */
    float *pk;          /* WINO_NT tiles of one V[e] packed for the products */
    bool accumulate;    /* the outputs add to y (an input gradient: dx +=) */
    const float *dy;    /* the weight gradient's output gradient (y: its dw) */
    const ts_conv_tail *tail; /* the fused Add and Relu, as the output transform writes y (conv_job.tail), else NULL */
    bool y_over;        /* the tail's outputs cover y's: the vector rows skip writing y */
} wino_job;

/* tiles the products take at a time (wino_products): WINO_NT, the last
 * block of a chunk half as many where they are enough */
#define WINO_NT 16
/* output channels the products take at a time (a block of U's rows) */
#define WINO_MR 6

static int64_t wino_ld(int64_t tiles) { return (tiles + WINO_NT / 2 - 1) / (WINO_NT / 2) * (WINO_NT / 2); }

static wino_job wino_job_for(const ts_conv_geom *g, int m) {
    return (wino_job){.g = g, .m = m, .a = m + 2, .E = (m + 2) * (m + 2), .TH = (g->OH + m - 1) / m, .TW = (g->OW + m - 1) / m};
}

/* tile rows per chunk: V and M of a chunk about WINO_CHUNK_FLOATS, at least
 * WINO_MIN_TILES tiles */
static int64_t wino_chunk_rows(const wino_job *j) {
    int64_t rows_all = j->g->N * j->TH, tiles = WINO_CHUNK_FLOATS / (j->E * (j->g->C + j->g->OC));
    tiles = tiles < WINO_MIN_TILES ? WINO_MIN_TILES : tiles;
    int64_t rows = (tiles + j->TW - 1) / j->TW;
    rows = rows > rows_all ? rows_all : rows;
    int64_t chunks = (rows_all + rows - 1) / rows;
    return (rows_all + chunks - 1) / chunks;
}

/* The weight gradient's workspace (conv_dw_winograd): U [E, OC, C] (dU),
 * then V [C, E, tiles] and Q [OC, E, tiles] of a chunk: the E matrices
 * interleaved by rows, so that a transform writes or reads its E values
 * close together (whole matrices apart, they fell on the same cache sets). */
static size_t wino_u_floats(const ts_conv_geom *g, int m) { return (size_t)((m + 2) * (m + 2) * g->OC * g->C); }

static size_t wino_chunk_floats(const ts_conv_geom *g, int m) {
    wino_job j = wino_job_for(g, m);
    return (size_t)(j.E * (g->C + g->OC) * wino_ld(wino_chunk_rows(&j) * j.TW));
}

/* The forward's slices (conv_fwd_winograd): each thread takes one and does
 * all three steps of it in its own part of the workspace, so that V and M
 * stay in its core's cache and the step hands out one job, not three a
 * chunk (three, each thread read the other's half of V and of M). A slice
 * is a run of tile rows over all output channels, or, with fewer tiles
 * than output channels (ResNet-18's last stages at batch 1), all the tiles
 * over a run of output channels (U, the larger then, is read once, and each
 * slice makes all of V, the smaller). A slice goes a chunk of its tile rows
 * at a time, V and M of a chunk about WINO_SLICE_FLOATS. Its part of the
 * workspace: V [C, E, ld], M [its OC, E, ld], then WINO_NT tiles of one
 * V[e] packed for the products. */
#ifndef WINO_SLICE_FLOATS
#define WINO_SLICE_FLOATS (256 * 1024)
#endif

#ifndef WINO_OC_SPLIT
#define WINO_OC_SPLIT 1
#endif

typedef struct wino_plan {
    int slices;
    bool by_oc;       /* the slices split the output channels, not the tile rows */
    int64_t oc_per;   /* output channels a slice (by_oc: a multiple of WINO_MR) */
    int64_t rows;     /* tile rows a chunk at most */
    size_t v_floats;  /* by_oc: V, which the slices share (a multiple of 16: 64 bytes) */
    size_t floats;    /* workspace a slice (a multiple of 16) */
} wino_plan;

static wino_plan wino_plan_for(const ts_conv_geom *g, int m, int threads) {
    wino_job j = wino_job_for(g, m);
    int64_t rows_all = g->N * j.TH, blocks = (g->OC + WINO_MR - 1) / WINO_MR, T = threads < 1 ? 1 : threads;
    wino_plan pl = {.slices = 1, .oc_per = g->OC};
    pl.by_oc = T > 1 && (rows_all < T || rows_all * j.TW * WINO_OC_SPLIT < g->OC);
    int64_t rows_slice = rows_all;
    if (pl.by_oc) {
        int64_t per = (blocks + T - 1) / T;
        pl.oc_per = per * WINO_MR < g->OC ? per * WINO_MR : g->OC;
        pl.slices = (int)((g->OC + pl.oc_per - 1) / pl.oc_per);
    } else {
        pl.slices = (int)(rows_all < T ? rows_all : T);
        rows_slice = (rows_all + pl.slices - 1) / pl.slices;
    }
    int64_t tiles = WINO_SLICE_FLOATS / (j.E * (g->C + pl.oc_per));
    tiles = tiles < WINO_MIN_TILES ? WINO_MIN_TILES : tiles;
    int64_t rows = (tiles + j.TW - 1) / j.TW;
    rows = rows > rows_slice ? rows_slice : rows;
    int64_t chunks = (rows_slice + rows - 1) / rows;
    pl.rows = (rows_slice + chunks - 1) / chunks;
    size_t v = (size_t)(j.E * g->C * wino_ld(pl.rows * j.TW)), f = (size_t)(j.E * pl.oc_per * wino_ld(pl.rows * j.TW) + g->C * WINO_NT);
    if (pl.by_oc) pl.v_floats = (v + 15) / 16 * 16;
    else f += v;
    pl.floats = (f + 15) / 16 * 16;
    return pl;
}

/* U made at the call, then the slices; U kept (in the cache), the slices;
 * or the weight gradient's */
static size_t wino_floats(const ts_conv_geom *g, int threads) {
    int m = wino_m(g, false), mk = wino_m(g, true);
    size_t most = 0;
    if (m) {
        wino_plan pl = wino_plan_for(g, m, threads);
        size_t made = (wino_u_floats(g, m) + 15) / 16 * 16 + pl.v_floats + (size_t)pl.slices * pl.floats, dw = wino_u_floats(g, m) + wino_chunk_floats(g, m);
        most = made > dw ? made : dw;
    }
    if (mk) {
        wino_plan pl = wino_plan_for(g, mk, threads);
        size_t kept = pl.v_floats + (size_t)pl.slices * pl.floats;
        most = most > kept ? most : kept;
    }
    return most;
}

/* The cache of a kept U: a header (whether U is made, and the key of the
 * weights it was made from), WINO_HEAD floats that keep U 64-byte aligned,
 * then U. */
#define WINO_HEAD 16
typedef struct wino_head {
    uint64_t made, key;
} wino_head;
_Static_assert(sizeof(wino_head) <= WINO_HEAD * sizeof(float), "the cache's header fits its floats");

static bool packed_conv(const ts_conv_geom *g);
static size_t packed_w_floats(const ts_conv_geom *g);

size_t ts_conv2d_cache_floats(const ts_conv_geom *g) {
    int m = conv_unit(g) ? wino_m(g, true) : 0;
    return m ? WINO_HEAD + wino_u_floats(g, m) : packed_conv(g) ? WINO_HEAD + packed_w_floats(g) : 0;
}

/* The 1-D transforms, from s (stride ss) to d (stride ds):
 * G (weights, 3 -> a), B^T (input, a -> a), A^T (output, a -> m) */
static inline void wino_g(int m, const float *s, int64_t ss, float *d, int64_t ds) {
    float g0 = s[0], g1 = s[ss], g2 = s[2 * ss];
    if (m == 2) {
        d[0] = g0, d[ds] = 0.5f * (g0 + g1 + g2), d[2 * ds] = 0.5f * (g0 - g1 + g2), d[3 * ds] = g2;
        return;
    }
    d[0] = 0.25f * g0;
    d[ds] = (g0 + g1 + g2) * (-1.0f / 6), d[2 * ds] = (g0 - g1 + g2) * (-1.0f / 6);
    d[3 * ds] = g0 * (1.0f / 24) + g1 * (1.0f / 12) + g2 * (1.0f / 6), d[4 * ds] = g0 * (1.0f / 24) - g1 * (1.0f / 12) + g2 * (1.0f / 6);
    d[5 * ds] = g2;
}

static inline void wino_bt(int m, const float *s, int64_t ss, float *d, int64_t ds) {
    if (m == 2) {
        float s0 = s[0], s1 = s[ss], s2 = s[2 * ss], s3 = s[3 * ss];
        d[0] = s0 - s2, d[ds] = s1 + s2, d[2 * ds] = s2 - s1, d[3 * ds] = s1 - s3;
        return;
    }
    float s0 = s[0], s1 = s[ss], s2 = s[2 * ss], s3 = s[3 * ss], s4 = s[4 * ss], s5 = s[5 * ss];
    d[0] = 4.0f * s0 - 5.0f * s2 + s4;
    d[ds] = s3 + s4 - 4.0f * (s1 + s2), d[2 * ds] = s4 - s3 + 4.0f * (s1 - s2);
    d[3 * ds] = s4 - s2 + 2.0f * (s3 - s1), d[4 * ds] = s4 - s2 - 2.0f * (s3 - s1);
    d[5 * ds] = 4.0f * s1 - 5.0f * s3 + s5;
}

static inline void wino_at(int m, const float *s, int64_t ss, float *d, int64_t ds) {
    if (m == 2) {
        d[0] = s[0] + s[ss] + s[2 * ss], d[ds] = s[ss] - s[2 * ss] - s[3 * ss];
        return;
    }
    float s1 = s[ss], s2 = s[2 * ss], s3 = s[3 * ss], s4 = s[4 * ss], p = s1 + s2, q = s1 - s2, r = s3 + s4, t = s3 - s4;
    d[0] = s[0] + p + r, d[ds] = q + 2.0f * t, d[2 * ds] = p + 4.0f * r, d[3 * ds] = q + 8.0f * t + s[5 * ss];
}

/* U[e] = (G g G^T)[e] of the kernels w[oc, c], each U[e] [OC, C] stored
 * as the products read it (wino_products): its rows in blocks of WINO_MR,
 * a block's rows [C][rows] side by side (the last block's, OC % WINO_MR,
 * likewise), so that a block's values for one c are adjacent. Threads
 * split the blocks. */

static void wino_weights(void *vj, int64_t b0, int64_t b1) {
    enum { CB = 16 }; /* input channels at a time: loops of constant counts across them, which the compiler vectorises */
    const wino_job *j = vj;
    int64_t C = j->g->C, OC = j->g->OC;
    int a = j->a, E = j->E;
    for (int64_t b = b0; b < b1; b++) {
        int64_t first = b * WINO_MR, rows = OC - first < WINO_MR ? OC - first : WINO_MR;
        for (int64_t c0 = 0; c0 < C; c0 += CB) {
            int64_t nc = C - c0 < CB ? C - c0 : CB;
            for (int64_t r = 0; r < rows; r++) {
                float kk[3][3][CB], t[6][3][CB], d[6][6][CB];
                const float *w = j->w + ((first + r) * C + c0) * 9;
                for (int i = 0; i < 3; i++)
                    for (int q = 0; q < 3; q++)
                        for (int64_t c = 0; c < CB; c++) kk[i][q][c] = c < nc ? w[c * 9 + i * 3 + q] : 0.0f;
                for (int q = 0; q < 3; q++) /* down the kernel's columns */
                    for (int c = 0; c < CB; c++) wino_g(j->m, &kk[0][q][c], 3 * CB, &t[0][q][c], 3 * CB);
                for (int i = 0; i < a; i++) /* along the rows */
                    for (int c = 0; c < CB; c++) wino_g(j->m, &t[i][0][c], CB, &d[i][0][c], CB);
                for (int e = 0; e < E; e++) { /* U[e]'s rows of the block, these channels: a run of nc * rows floats */
                    float *u = j->u + (e * OC + first) * C + c0 * rows + r;
                    for (int64_t c = 0; c < nc; c++) u[c * rows] = d[e / a][e % a][c];
                }
            }
        }
    }
}

/* The transforms of a row of tiles go WINO_BLOCK tiles at a time through
 * local blocks, in loops of constant counts that the compiler vectorises
 * across the tiles (on V or M directly, E streams of unknown distance, it
 * did not) */
#ifndef WINO_BLOCK
#define WINO_BLOCK 4
#endif

/* F(4x4)'s transforms of a row's blocks of WINO_VB = 8 tiles in vectors of
 * 8 (one lane a tile; the rest of the row in blocks of WINO_BLOCK), the
 * same sums in the same order as wino_bt and wino_at (the same bits): down
 * the columns on contiguous rows, then along the rows with the tiles'
 * columns (4 apart) gathered into lanes by shuffles (a 4 x 8 transpose),
 * and back for the outputs. Of ResNet-18's convolution at 56x56 at batch
 * 8, one thread: the input transform 4.9 ms before, the output's 3.9 ms. */
#define WINO_VB 8
typedef float wino_f8 __attribute__((vector_size(8 * sizeof(float))));
typedef int32_t wino_i8 __attribute__((vector_size(8 * sizeof(int32_t))));
/* lanes of a and b by a constant mask whose int vector type is IT (the
 * max pool's too) */
#if defined(__clang__)
#define TS_SHUF(IT, a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define TS_SHUF(IT, a, b, ...) __builtin_shuffle(a, b, (IT){__VA_ARGS__})
#endif
#define WINO_SHUF(a, b, ...) TS_SHUF(wino_i8, a, b, __VA_ARGS__)

/* (the vectors through pointers: returned by value, a build without AVX
 * would pass them unlike one with) */
static inline void wino_ld8(wino_f8 *v, const float *p) { memcpy(v, p, sizeof *v); }

static inline void wino_st8(float *p, const wino_f8 *v) { memcpy(p, v, sizeof *v); }

/* max(0, v) as relu_into: the lanes below 0 cleared (NaN and -0 kept) */
static inline void wino_relu8(wino_f8 *v) {
    wino_i8 neg = *v < (wino_f8){0};
    *v = (wino_f8)((wino_i8)*v & ~neg);
}

#define WINO_BT4(T, s, d)                                                                                                          \
    do {                                                                                                                            \
        T s0_ = (s)[0], s1_ = (s)[1], s2_ = (s)[2], s3_ = (s)[3], s4_ = (s)[4], s5_ = (s)[5];                                      \
        (d)[0] = 4.0f * s0_ - 5.0f * s2_ + s4_;                                                                                     \
        (d)[1] = s3_ + s4_ - 4.0f * (s1_ + s2_), (d)[2] = s4_ - s3_ + 4.0f * (s1_ - s2_);                                          \
        (d)[3] = s4_ - s2_ + 2.0f * (s3_ - s1_), (d)[4] = s4_ - s2_ - 2.0f * (s3_ - s1_);                                          \
        (d)[5] = 4.0f * s1_ - 5.0f * s3_ + s5_;                                                                                     \
    } while (0)

#define WINO_AT4(T, s, d)                                                                                                          \
    do {                                                                                                                            \
        T s1_ = (s)[1], s2_ = (s)[2], s3_ = (s)[3], s4_ = (s)[4], p_ = s1_ + s2_, q_ = s1_ - s2_, r_ = s3_ + s4_, t_ = s3_ - s4_;    \
        (d)[0] = (s)[0] + p_ + r_, (d)[1] = q_ + 2.0f * t_, (d)[2] = p_ + 4.0f * r_, (d)[3] = q_ + 8.0f * t_ + (s)[5];              \
    } while (0)

/* v[e * vs + k] of F(4x4) for the first n of 8 tiles whose patches' rows
 * start at r (rs apart): 34 floats a row */
static inline void wino_in_block4(float *restrict v, int64_t vs, const float *restrict r, int64_t rs, int64_t n) {
    wino_f8 t[6][4];
    float tail[6][2];
    for (int c = 0; c < 4; c++) { /* down the columns: 4 vectors of 8 columns */
        wino_f8 x[6];
        for (int i = 0; i < 6; i++) wino_ld8(&x[i], r + i * rs + 8 * c);
        wino_f8 d[6];
        WINO_BT4(wino_f8, x, d);
        for (int i = 0; i < 6; i++) t[i][c] = d[i];
    }
    for (int c = 0; c < 2; c++) { /* and the last two columns */
        float x[6], d[6];
        for (int i = 0; i < 6; i++) x[i] = r[i * rs + 32 + c];
        WINO_BT4(float, x, d);
        for (int i = 0; i < 6; i++) tail[i][c] = d[i];
    }
    for (int i = 0; i < 6; i++) { /* along the rows: column q of tile k is 4k + q */
        wino_f8 a = WINO_SHUF(t[i][0], t[i][1], 0, 4, 8, 12, 1, 5, 9, 13), b = WINO_SHUF(t[i][0], t[i][1], 2, 6, 10, 14, 3, 7, 11, 15);
        wino_f8 c = WINO_SHUF(t[i][2], t[i][3], 0, 4, 8, 12, 1, 5, 9, 13), d = WINO_SHUF(t[i][2], t[i][3], 2, 6, 10, 14, 3, 7, 11, 15);
        wino_f8 q[6], o[6], end = {tail[i][0], tail[i][1], 0, 0, 0, 0, 0, 0};
        q[0] = WINO_SHUF(a, c, 0, 1, 2, 3, 8, 9, 10, 11), q[1] = WINO_SHUF(a, c, 4, 5, 6, 7, 12, 13, 14, 15);
        q[2] = WINO_SHUF(b, d, 0, 1, 2, 3, 8, 9, 10, 11), q[3] = WINO_SHUF(b, d, 4, 5, 6, 7, 12, 13, 14, 15);
        q[4] = WINO_SHUF(q[0], end, 1, 2, 3, 4, 5, 6, 7, 8), q[5] = WINO_SHUF(q[1], end, 1, 2, 3, 4, 5, 6, 7, 9);
        WINO_BT4(wino_f8, q, o);
        if (n == 8)
            for (int e = 0; e < 6; e++) wino_st8(v + (i * 6 + e) * vs, &o[e]);
        else
            for (int e = 0; e < 6; e++) {
                float f[8];
                wino_st8(f, &o[e]);
                for (int64_t k = 0; k < n; k++) v[(i * 6 + e) * vs + k] = f[k];
            }
    }
}

/* F(4x4)'s outputs (+ bv) of 8 tiles whose values are s[e * ss + k]: row i
 * of the block's 4 output rows, its 32 columns in order, in o[i] */
static inline void wino_out_block4(wino_f8 o[4][4], const float *restrict s, int64_t ss, float bv) {
    wino_f8 t[4][6];
    for (int q = 0; q < 6; q++) { /* down the columns */
        wino_f8 x[6], d[4];
        for (int i = 0; i < 6; i++) wino_ld8(&x[i], s + (i * 6 + q) * ss);
        WINO_AT4(wino_f8, x, d);
        for (int i = 0; i < 4; i++) t[i][q] = d[i];
    }
    for (int i = 0; i < 4; i++) { /* along the rows, then the tiles' 4 columns interleaved */
        wino_f8 d[4];
        WINO_AT4(wino_f8, t[i], d);
        for (int q = 0; q < 4; q++) d[q] += bv;
        wino_f8 a = WINO_SHUF(d[0], d[1], 0, 8, 1, 9, 2, 10, 3, 11), b = WINO_SHUF(d[0], d[1], 4, 12, 5, 13, 6, 14, 7, 15);
        wino_f8 c = WINO_SHUF(d[2], d[3], 0, 8, 1, 9, 2, 10, 3, 11), e = WINO_SHUF(d[2], d[3], 4, 12, 5, 13, 6, 14, 7, 15);
        o[i][0] = WINO_SHUF(a, c, 0, 1, 8, 9, 2, 3, 10, 11), o[i][1] = WINO_SHUF(a, c, 4, 5, 12, 13, 6, 7, 14, 15);
        o[i][2] = WINO_SHUF(b, e, 0, 1, 8, 9, 2, 3, 10, 11), o[i][3] = WINO_SHUF(b, e, 4, 5, 12, 13, 6, 7, 14, 15);
    }
}

/* v[e * vs + k] for the first n of WINO_BLOCK tiles whose patches' rows
 * start at r (rs apart), the first at column 0 */
static inline void wino_in_block(int m, float *restrict v, int64_t vs, const float *restrict r, int64_t rs, int64_t n) {
    enum { A = 6, B = WINO_BLOCK };
    int a = m + 2;
    float d[A][A][B], t[A][A][B];
    for (int i = 0; i < a; i++)
        for (int q = 0; q < a; q++)
            for (int k = 0; k < B; k++) d[i][q][k] = r[i * rs + m * k + q];
    for (int q = 0; q < a; q++)
        for (int k = 0; k < B; k++) wino_bt(m, &d[0][q][k], A * B, &t[0][q][k], A * B);
    for (int i = 0; i < a; i++)
        for (int k = 0; k < B; k++) wino_bt(m, &t[i][0][k], B, &d[i][0][k], B);
    if (n == B)
        for (int e = 0; e < a * a; e++)
            for (int k = 0; k < B; k++) v[e * vs + k] = d[e / a][e % a][k];
    else
        for (int e = 0; e < a * a; e++)
            for (int64_t k = 0; k < n; k++) v[e * vs + k] = d[e / a][e % a][k];
}

/* V[c, e, t] for the chunk's tiles, input channels [c0, c1): a block of
 * tiles at a time, read in place where their patches lie inside the input,
 * else from a zero-padded copy */
static void wino_input(void *vj, int64_t c0, int64_t c1) {
    const wino_job *j = vj;
    const ts_conv_geom *g = j->g;
    int64_t m = j->m, a = j->a, T = (j->row1 - j->row0) * j->TW, W = g->W, ld = j->ld;
    enum { PW = WINO_VB * 4 + 2 }; /* the widest block's patches */
    float pad[6 * PW];
    for (int64_t c = c0; c < c1; c++) {
        for (int e = 0; e < j->E; e++) /* the rounding up: zeros the products take along */
            for (int64_t t = T; t < ld; t++) j->v[(c * j->E + e) * ld + t] = 0.0f;
        for (int64_t gr = j->row0; gr < j->row1; gr++) {
            int64_t n = gr / j->TH, i0 = (gr % j->TH) * m - g->PT;
            const float *xc = j->x + (n * g->C + c) * g->H * W;
            float *v = j->v + c * j->E * ld + (gr - j->row0) * j->TW;
            for (int64_t t0 = 0, B; t0 < j->TW; t0 += B) {
                B = m == 4 && j->TW - t0 >= WINO_VB ? WINO_VB : WINO_BLOCK;
                int64_t nt = j->TW - t0 < B ? j->TW - t0 : B, j0 = t0 * m - g->PL, span = B * m + 2;
                const float *r = pad;
                int64_t rs = PW;
                if (i0 >= 0 && i0 + a <= g->H && j0 >= 0 && j0 + span <= W) {
                    r = xc + i0 * W + j0, rs = W;
                } else {
                    int64_t qlo = j0 < 0 ? -j0 : 0, qhi = W - j0 < span ? W - j0 : span; /* the columns inside */
                    for (int q = 0; q < 6 * PW; q++) pad[q] = 0.0f; /* a constant count: vector stores */
                    for (int64_t i = 0; i < a; i++) {
                        int64_t ih = i0 + i;
                        if (ih >= 0 && ih < g->H && qhi > qlo) copy_row(pad + i * PW + qlo, xc + ih * W + j0 + qlo, qhi - qlo);
                    }
                }
                if (B == WINO_VB) wino_in_block4(v + t0, ld, r, rs, nt);
                else if (m == 2) wino_in_block(2, v + t0, ld, r, rs, nt);
                else wino_in_block(4, v + t0, ld, r, rs, nt);
            }
        }
    }
}

/* The products M[e] = U[e] V[e] in registers: WINO_NT tiles (two vectors
 * of 8) by WINO_MR output channels at a time, summed over the input
 * channels, U read where it lies (in blocks of WINO_MR rows). Through OpenBLAS, which copies both operands
 * into its own layout at every call, the copies cost about a third of the
 * products: U is the same from call to call, and each value of V serves
 * only OC multiply-adds (64 in ResNet's first stage). */
#ifdef __AVX__
#define WINO_VW 8 /* floats a vector holds */
#else
#define WINO_VW 4
#endif
#define WINO_NV (WINO_NT / WINO_VW)
typedef float wino_vec __attribute__((vector_size(WINO_VW * sizeof(float))));
#ifdef __AVX__
#include <immintrin.h>
#define WINO_SPLAT(x) ((wino_vec)_mm256_set1_ps(x))
#else
#define WINO_SPLAT(x) ((wino_vec){0} + (x))
#endif
#if defined(__AVX__) && defined(__FMA__)
#define WINO_FMA(a, b, c) ((wino_vec)_mm256_fmadd_ps((__m256)(a), (__m256)(b), (__m256)(c)))
#else
#define WINO_FMA(a, b, c) ((a) * (b) + (c))
#endif

static inline wino_vec wino_load(const float *p) {
    wino_vec v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void wino_store(float *p, wino_vec v) { memcpy(p, &v, sizeof v); }

/* U's floats read ahead of the products' block (a prefetch each input
 * channel, 4 KB on): where U[e] is larger than L2 (ResNet-18's 14x14 and
 * 7x7 stages at batch 1, 9.4 and 16.8 MB a convolution) the hardware's
 * prefetchers left the products waiting on L3 */
#ifndef WINO_PF
#define WINO_PF 1024
#endif
#ifndef WINO_PF_LOC
#define WINO_PF_LOC 1 /* the locality hint: 0 and 3 were a little slower at 7x7 */
#endif

/* mm[r, t] = sum_c u[c, r] pk[c, t] for the R rows of a block of U
 * (wino_weights: [C][R]) and t < NV vectors (pk: rows of WINO_NT floats;
 * mm: rows ldm apart); inlined with R and NV constant, the 12 sums of a
 * full block stay in registers (6 x 2 vectors: each c's two loads of pk and
 * six broadcasts serve 12 multiply-adds) */
static inline __attribute__((always_inline)) void wino_block_rows(int R, int NV, const float *restrict u, const float *restrict pk,
                                                                  float *restrict mm, int64_t ldm, int64_t C) {
    wino_vec acc[WINO_MR][WINO_NV];
    for (int r = 0; r < R; r++)
        for (int k = 0; k < NV; k++) acc[r][k] = (wino_vec){0};
    for (int64_t c = 0; c < C; c++) {
        wino_vec x[WINO_NV];
        for (int k = 0; k < NV; k++) x[k] = wino_load(pk + c * WINO_NT + k * WINO_VW);
        __builtin_prefetch(u + c * R + WINO_PF, 0, WINO_PF_LOC); /* U streams from L3 where it is large */
        for (int r = 0; r < R; r++) {
            wino_vec s = WINO_SPLAT(u[c * R + r]);
            for (int k = 0; k < NV; k++) acc[r][k] = WINO_FMA(s, x[k], acc[r][k]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int k = 0; k < NV; k++) wino_store(mm + r * ldm + k * WINO_VW, acc[r][k]);
}

/* the products of WINO_NT tiles (NV = WINO_NV) or half as many, packed in
 * pk, for every block of rows of U[e] (u) */
static inline __attribute__((always_inline)) void wino_block(int NV, const float *u, const float *pk, float *mm, int64_t ldm, int64_t OC,
                                                             int64_t C) {
    int64_t oc = 0;
    for (; oc + WINO_MR <= OC; oc += WINO_MR) wino_block_rows(WINO_MR, NV, u + oc * C, pk, mm + oc * ldm, ldm, C);
    switch (OC - oc) { /* the last block's rows: a constant count each */
    case 5: wino_block_rows(5, NV, u + oc * C, pk, mm + oc * ldm, ldm, C); break;
    case 4: wino_block_rows(4, NV, u + oc * C, pk, mm + oc * ldm, ldm, C); break;
    case 3: wino_block_rows(3, NV, u + oc * C, pk, mm + oc * ldm, ldm, C); break;
    case 2: wino_block_rows(2, NV, u + oc * C, pk, mm + oc * ldm, ldm, C); break;
    case 1: wino_block_rows(1, NV, u + oc * C, pk, mm + oc * ldm, ldm, C); break;
    default: break;
    }
}

/* M[e] = U[e] V[e] for e in [e0, e1), output channels [oc0, oc1) (oc0 a
 * multiple of WINO_MR): WINO_NT tiles at a time, packed together (in V, a
 * row of a matrix is E rows from the next: the rows of one e fell on few
 * cache sets), then WINO_MR output channels at a time over them */
static void wino_products(const wino_job *j, int64_t e0, int64_t e1) {
    int64_t C = j->g->C, OC = j->g->OC, E = j->E, ld = j->ld, ldm = E * ld, rows = j->oc1 - j->oc0;
    float *pk = j->pk;
    for (int64_t e = e0; e < e1; e++)
        for (int64_t t = 0; t < ld; t += WINO_NT) {
            int64_t n = ld - t < WINO_NT ? ld - t : WINO_NT;
            const float *v = j->v + e * ld + t;
            if (n == WINO_NT) /* a constant count: vector moves, not a call */
                for (int64_t c = 0; c < C; c++)
                    for (int k = 0; k < WINO_NT; k++) pk[c * WINO_NT + k] = v[c * ldm + k];
            else
                for (int64_t c = 0; c < C; c++) memcpy(pk + c * WINO_NT, v + c * ldm, (size_t)n * sizeof(float));
            const float *u = j->u + (e * OC + j->oc0) * C;
            if (n == WINO_NT) wino_block(WINO_NV, u, pk, j->mm + e * ld + t, ldm, rows, C);
            else wino_block(WINO_NV / 2, u, pk, j->mm + e * ld + t, ldm, rows, C);
        }
}

/* o[i][q][k] = (A^T M A)[i][q] + bv for WINO_BLOCK tiles whose values are
 * s[e * ss + k] */
static inline void wino_out_block(int m, float o[4][4][WINO_BLOCK], const float *restrict s, int64_t ss, float bv) {
    enum { A = 6, B = WINO_BLOCK };
    int a = m + 2;
    float d[A][A][B], t[4][A][B];
    for (int e = 0; e < a * a; e++)
        for (int k = 0; k < B; k++) d[e / a][e % a][k] = s[e * ss + k];
    for (int q = 0; q < a; q++)
        for (int k = 0; k < B; k++) wino_at(m, &d[0][q][k], A * B, &t[0][q][k], A * B);
    for (int i = 0; i < m; i++)
        for (int k = 0; k < B; k++) wino_at(m, &t[i][0][k], B, &o[i][0][k], B);
    for (int i = 0; i < m; i++)
        for (int q = 0; q < m; q++)
            for (int k = 0; k < B; k++) o[i][q][k] += bv;
}

/* y = A^T M A + b for output channels [oc0, oc1) (of M's, from j->oc0): a
 * block of tiles at a time, the outputs past the bottom or right edge
 * dropped */
static void wino_output(const wino_job *j, int64_t oc0, int64_t oc1) {
    const ts_conv_geom *g = j->g;
    int64_t m = j->m, T = j->ld, OW = g->OW, ET = j->E * T;
    for (int64_t oc = oc0; oc < oc1; oc++)
        for (int64_t gr = j->row0; gr < j->row1; gr++) {
            int64_t n = gr / j->TH, oh = (gr % j->TH) * m, rows = g->OH - oh < m ? g->OH - oh : m;
            const float *s = j->mm + (oc - j->oc0) * ET + (gr - j->row0) * j->TW;
            float bv = j->b ? j->b[oc] : 0.0f, *y = j->y + ((n * g->OC + oc) * g->OH + oh) * OW;
            for (int64_t t0 = 0, B; t0 < j->TW; t0 += B) {
                B = m == 4 && j->TW - t0 >= WINO_VB ? WINO_VB : WINO_BLOCK;
                float o[4][4][WINO_BLOCK], in[36 * WINO_BLOCK];
                int64_t n_t = j->TW - t0 < WINO_BLOCK ? j->TW - t0 : WINO_BLOCK;
                const float *src = s + t0;
                int64_t ss = T;
                if (n_t < WINO_BLOCK) { /* the last, partial block: padded */
                    for (int e = 0; e < j->E; e++)
                        for (int k = 0; k < WINO_BLOCK; k++) in[e * WINO_BLOCK + k] = k < n_t ? src[e * T + k] : 0.0f;
                    src = in, ss = WINO_BLOCK;
                }
                int64_t cols = OW - t0 * m < B * m ? OW - t0 * m : B * m;
                if (B == WINO_VB) { /* a whole block: rows of 32 outputs in vectors */
                    wino_f8 o4[4][4];
                    wino_out_block4(o4, src, T, bv);
                    for (int64_t i = 0; i < rows; i++) {
                        float *yr = y + i * OW + t0 * m;
                        const ts_conv_tail *tl = j->tail;
                        int64_t off = yr - j->y;
                        if (cols == 32 && j->accumulate)
                            for (int q = 0; q < 4; q++) {
                                wino_f8 old;
                                wino_ld8(&old, yr + 8 * q);
                                old += o4[i][q];
                                wino_st8(yr + 8 * q, &old);
                            }
                        else if (cols == 32)
                            for (int q = 0; q < 4; q++) { /* the tail's outputs in registers: each written once */
                                wino_f8 v = o4[i][q];
                                if (!j->y_over) wino_st8(yr + 8 * q, &v);
                                if (tl && tl->res) {
                                    wino_f8 r;
                                    wino_ld8(&r, tl->res + off + 8 * q);
                                    v += r;
                                    if (tl->sum && tl->sum != tl->relu) wino_st8(tl->sum + off + 8 * q, &v);
                                }
                                if (tl && tl->relu) wino_relu8(&v), wino_st8(tl->relu + off + 8 * q, &v);
                            }
                        else { /* the plane's last outputs */
                            float f[32];
                            memcpy(f, o4[i], sizeof f);
                            for (int64_t x = 0; x < cols; x++) yr[x] = j->accumulate ? yr[x] + f[x] : f[x];
                            if (tl) tail_apply(tl, j->y, off, cols);
                        }
                    }
                    continue;
                }
                if (m == 2) wino_out_block(2, o, src, ss, bv);
                else wino_out_block(4, o, src, ss, bv);
                for (int64_t i = 0; i < rows; i++) {
                    float *yr = y + i * OW + t0 * m;
                    if (cols == WINO_BLOCK * m && j->accumulate) /* a whole block: constant counts, no divisions */
                        for (int k = 0; k < WINO_BLOCK; k++)
                            for (int q = 0; q < m; q++) yr[k * m + q] += o[i][q][k];
                    else if (cols == WINO_BLOCK * m)
                        for (int k = 0; k < WINO_BLOCK; k++)
                            for (int q = 0; q < m; q++) yr[k * m + q] = o[i][q][k];
                    else /* the last, partial block (a small plane's only one): its first cols outputs */
                        for (int64_t k = 0, x = 0; k < n_t; k++)
                            for (int64_t q = 0; q < m && x < cols; q++, x++) yr[x] = j->accumulate ? yr[x] + o[i][q][k] : o[i][q][k];
                    if (j->tail) tail_apply(j->tail, j->y, yr - j->y, cols);
                }
            }
        }
}

/* slices [s0, s1) of the plan (wino_plan_for): by tile rows, each all
 * three steps of its rows, a chunk at a time; by output channels, the
 * products and output transform of the chunk's V (made before) */
typedef struct wino_fwd {
    const wino_job *j;
    wino_plan pl;
    float *ws; /* by_oc: V, then the slices' parts */
    int64_t row0, row1; /* by_oc: the chunk */
} wino_fwd;

static void wino_slices(void *vf, int64_t s0, int64_t s1) {
    const wino_fwd *f = vf;
    const ts_conv_geom *g = f->j->g;
    for (int64_t s = s0; s < s1; s++) {
        wino_job j = *f->j;
        float *own = f->ws + f->pl.v_floats + (size_t)s * f->pl.floats;
        if (f->pl.by_oc) {
            j.oc0 = s * f->pl.oc_per, j.oc1 = j.oc0 + f->pl.oc_per < g->OC ? j.oc0 + f->pl.oc_per : g->OC;
            j.row0 = f->row0, j.row1 = f->row1, j.ld = wino_ld((j.row1 - j.row0) * j.TW);
            j.v = f->ws, j.mm = own, j.pk = j.mm + j.E * (j.oc1 - j.oc0) * j.ld;
            wino_products(&j, 0, j.E);
            wino_output(&j, j.oc0, j.oc1);
            continue;
        }
        int64_t rows_all = g->N * j.TH, r0 = rows_all * s / f->pl.slices, r1 = rows_all * (s + 1) / f->pl.slices;
        j.oc0 = 0, j.oc1 = g->OC;
        for (j.row0 = r0; j.row0 < r1; j.row0 += f->pl.rows) {
            j.row1 = j.row0 + f->pl.rows < r1 ? j.row0 + f->pl.rows : r1;
            j.ld = wino_ld((j.row1 - j.row0) * j.TW);
            j.v = own, j.mm = j.v + j.E * g->C * j.ld, j.pk = j.mm + j.E * g->OC * j.ld;
            wino_input(&j, 0, g->C);
            wino_products(&j, 0, j.E);
            wino_output(&j, 0, g->OC);
        }
    }
}

/* U made into the workspace (cache NULL), or kept in the cache and made
 * again when its key is not `key` */
static void conv_fwd_winograd(ts_pool *p, float *ws, float *y, const float *x, const float *w, const float *b, const ts_conv_geom *g, int m,
                              float *cache, uint64_t key, bool accumulate, const ts_conv_tail *tail) {
    wino_job j = wino_job_for(g, m);
    j.accumulate = accumulate, j.tail = tail_of(tail), j.y_over = tail_over(j.tail, y);
    j.x = x, j.w = w, j.b = b, j.y = y, j.u = cache ? cache + WINO_HEAD : ws;
    wino_fwd f = {.j = &j, .pl = wino_plan_for(g, m, ts_pool_threads(p)), .ws = cache ? ws : ws + (wino_u_floats(g, m) + 15) / 16 * 16};
    wino_head h = {0};
    if (cache) memcpy(&h, cache, sizeof h);
    if (!h.made || h.key != key) {
        ts_pool_for(p, (g->OC + WINO_MR - 1) / WINO_MR, grain_for(g->C * j.E * 4 * WINO_MR), wino_weights, &j);
        h = (wino_head){.made = 1, .key = key};
        if (cache) memcpy(cache, &h, sizeof h);
    }
    if (!f.pl.by_oc) {
        ts_pool_for(p, f.pl.slices, 1, wino_slices, &f);
        return;
    }
    for (f.row0 = 0; f.row0 < g->N * j.TH; f.row0 += f.pl.rows) { /* V shared by the slices */
        f.row1 = f.row0 + f.pl.rows < g->N * j.TH ? f.row0 + f.pl.rows : g->N * j.TH;
        j.row0 = f.row0, j.row1 = f.row1, j.ld = wino_ld((j.row1 - j.row0) * j.TW), j.v = f.ws;
        ts_pool_for(p, g->C, grain_for((j.row1 - j.row0) * j.TW * j.E), wino_input, &j);
        ts_pool_for(p, f.pl.slices, 1, wino_slices, &f);
    }
}

/* The weight gradient through the same tiles. With M = U V and y = A^T M
 * A, U = G g G^T: dM = A dY A^T for each tile (Q, the output gradient's
 * transform), dU[e] = sum over the tiles Q[e] V[e]^T (a GEMM of K = the
 * tiles, on the forward's input transform V), and dg = G^T dU G. The
 * outputs past the bottom or right edge have no gradient: Q's tiles take
 * zeros there. dU [E, OC, C] sums the chunks in the workspace where the
 * forward keeps U, Q takes M's place. */
static inline void wino_a(int m, const float *s, int64_t ss, float *d, int64_t ds) { /* A (m -> a) */
    if (m == 2) {
        float s0 = s[0], s1 = s[ss];
        d[0] = s0, d[ds] = s0 + s1, d[2 * ds] = s0 - s1, d[3 * ds] = -s1;
        return;
    }
    float s0 = s[0], s1 = s[ss], s2 = s[2 * ss], s3 = s[3 * ss], p = s0 + s2, q = s1 + s3, r = s0 + 4.0f * s2, t = 2.0f * s1 + 8.0f * s3;
    d[0] = s0, d[ds] = p + q, d[2 * ds] = p - q, d[3 * ds] = r + t, d[4 * ds] = r - t, d[5 * ds] = s3;
}

static inline void wino_gt(int m, const float *s, int64_t ss, float *d, int64_t ds) { /* G^T (a -> 3) */
    if (m == 2) {
        float s1 = s[ss], s2 = s[2 * ss];
        d[0] = s[0] + 0.5f * (s1 + s2), d[ds] = 0.5f * (s1 - s2), d[2 * ds] = 0.5f * (s1 + s2) + s[3 * ss];
        return;
    }
    float s1 = s[ss], s2 = s[2 * ss], s3 = s[3 * ss], s4 = s[4 * ss];
    d[0] = 0.25f * s[0] - (s1 + s2) * (1.0f / 6) + (s3 + s4) * (1.0f / 24);
    d[ds] = (s2 - s1) * (1.0f / 6) + (s3 - s4) * (1.0f / 12);
    d[2 * ds] = (s3 + s4 - s1 - s2) * (1.0f / 6) + s[5 * ss];
}

/* Q[oc, e, t] = (A dY A^T)[e] of the chunk's tiles, output channels [oc0,
 * oc1): WINO_DB tiles of a tile row at a time in local blocks (loops of
 * constant counts across the tiles, which the compiler vectorises), the
 * outputs past the bottom or right edge read as zeros */
#define WINO_DB 8

static void wino_dy(void *vj, int64_t oc0, int64_t oc1) {
    const wino_job *j = vj;
    const ts_conv_geom *g = j->g;
    int64_t m = j->m, a = j->a, OW = g->OW, ld = j->ld;
    for (int64_t oc = oc0; oc < oc1; oc++)
        for (int64_t gr = j->row0; gr < j->row1; gr++) {
            int64_t n = gr / j->TH, oh = (gr % j->TH) * m, rows = g->OH - oh < m ? g->OH - oh : m;
            const float *dy = j->dy + ((n * g->OC + oc) * g->OH + oh) * OW;
            float *q = j->mm + oc * j->E * ld + (gr - j->row0) * j->TW;
            for (int64_t t0 = 0; t0 < j->TW; t0 += WINO_DB) {
                int64_t nt = j->TW - t0 < WINO_DB ? j->TW - t0 : WINO_DB;
                float s[4][4][WINO_DB], h[6][4][WINO_DB], d[6][6][WINO_DB];
                if (rows == m && (t0 + WINO_DB) * m <= OW) /* inside the plane */
                    for (int64_t i = 0; i < m; i++)
                        for (int64_t c = 0; c < m; c++)
                            for (int k = 0; k < WINO_DB; k++) s[i][c][k] = dy[i * OW + (t0 + k) * m + c];
                else
                    for (int64_t i = 0; i < m; i++)
                        for (int64_t c = 0; c < m; c++)
                            for (int64_t k = 0; k < WINO_DB; k++) {
                                int64_t ow = (t0 + k) * m + c;
                                s[i][c][k] = i < rows && k < nt && ow < OW ? dy[i * OW + ow] : 0.0f;
                            }
                for (int64_t c = 0; c < m; c++) /* down the columns */
                    for (int k = 0; k < WINO_DB; k++) wino_a((int)m, &s[0][c][k], 4 * WINO_DB, &h[0][c][k], 4 * WINO_DB);
                for (int i = 0; i < a; i++) /* along the rows */
                    for (int k = 0; k < WINO_DB; k++) wino_a((int)m, &h[i][0][k], WINO_DB, &d[i][0][k], WINO_DB);
                if (nt == WINO_DB) /* a constant count: vector moves */
                    for (int64_t e = 0; e < j->E; e++)
                        for (int k = 0; k < WINO_DB; k++) q[e * ld + t0 + k] = d[e / a][e % a][k];
                else
                    for (int64_t e = 0; e < j->E; e++)
                        for (int64_t k = 0; k < nt; k++) q[e * ld + t0 + k] = d[e / a][e % a][k];
            }
        }
}

/* dU[e] (+)= Q[e] V[e]^T for e in [e0, e1), over the chunk's tiles */
static void wino_dw_products(void *vj, int64_t e0, int64_t e1) {
    const wino_job *j = vj;
    int64_t C = j->g->C, OC = j->g->OC, ldq = j->E * j->ld, T = (j->row1 - j->row0) * j->TW;
    for (int64_t e = e0; e < e1; e++)
        ts_gemm_serial(false, true, OC, C, T, j->mm + e * j->ld, ldq, j->v + e * j->ld, ldq, j->row0 == 0 ? 0.0f : 1.0f, j->u + e * OC * C, C);
}

/* dw[oc, c] += G^T dU[., oc, c] G for output channels [oc0, oc1):
 * WINO_DB input channels at a time (adjacent in dU) */
static void wino_dw_out(void *vj, int64_t oc0, int64_t oc1) {
    const wino_job *j = vj;
    int64_t C = j->g->C, OCC = j->g->OC * C;
    int a = j->a;
    for (int64_t oc = oc0; oc < oc1; oc++)
        for (int64_t c0 = 0; c0 < C; c0 += WINO_DB) {
            int64_t nc = C - c0 < WINO_DB ? C - c0 : WINO_DB;
            float s[6][6][WINO_DB], h[3][6][WINO_DB] = {{{0}}}, d[3][3][WINO_DB];
            for (int e = 0; e < j->E; e++) {
                const float *u = j->u + e * OCC + oc * C + c0;
                for (int64_t k = 0; k < WINO_DB; k++) s[e / a][e % a][k] = k < nc ? u[k] : 0.0f;
            }
            for (int q = 0; q < a; q++)
                for (int k = 0; k < WINO_DB; k++) wino_gt(j->m, &s[0][q][k], 6 * WINO_DB, &h[0][q][k], 6 * WINO_DB);
            for (int i = 0; i < 3; i++)
                for (int k = 0; k < WINO_DB; k++) wino_gt(j->m, &h[i][0][k], WINO_DB, &d[i][0][k], WINO_DB);
            float *dw = j->y + (oc * C + c0) * 9;
            for (int64_t k = 0; k < nc; k++)
                for (int t = 0; t < 9; t++) dw[k * 9 + t] += d[t / 3][t % 3][k];
        }
}

/* dw += the weight gradient of a convolution that wino_m gives tile m */
static void conv_dw_winograd(ts_pool *p, float *ws, float *dw, const float *dy, const float *x, const ts_conv_geom *g, int m) {
    wino_job j = wino_job_for(g, m);
    int64_t R = wino_chunk_rows(&j), rows_all = g->N * j.TH;
    j.x = x, j.dy = dy, j.y = dw, j.u = ws, j.v = j.u + wino_u_floats(g, m), j.mm = j.v + j.E * g->C * wino_ld(R * j.TW);
    ts_gemm_serial_begin();
    for (j.row0 = 0; j.row0 < rows_all; j.row0 += R) {
        j.row1 = j.row0 + R < rows_all ? j.row0 + R : rows_all;
        int64_t tiles = (j.row1 - j.row0) * j.TW;
        j.ld = wino_ld(tiles);
        ts_pool_for(p, g->C, grain_for(tiles * j.E), wino_input, &j);
        ts_pool_for(p, g->OC, grain_for(tiles * j.E), wino_dy, &j);
        ts_pool_for(p, j.E, 1, wino_dw_products, &j);
    }
    ts_pool_for(p, g->OC, grain_for(g->C * j.E * 4), wino_dw_out, &j);
}

/* ------------------------- conv2d: packed from the input, inference */

/* A convolution of few taps a position (C*KH*KW at most PK_MAX_K: the 7x7
 * stem's 147 over 3 channels) that Winograd does not take, with its weights
 * kept (an inference model's): no im2col. Its columns went through memory
 * twice, written by im2col (the stem's 1.8 M floats a sample, past L2) and
 * copied again by OpenBLAS into its panels; here each block of PK_NT
 * positions is gathered straight from the input into one panel [K, PK_NT]
 * (in L1), and a register block of PK_MR output channels by PK_NT
 * positions sums it over the K taps against the weights, kept in the cache
 * in the blocks' layout ([K, PK_MR] a block, made again when the key
 * changes). The bias and the tail follow per panel. The sums run in
 * another order than OpenBLAS's: inference only (as Winograd). The threads
 * split the panels. With AVX-512 the block is 8 channels by two vectors of
 * 16 (16 sums in registers, each tap's two loads and 8 broadcasts serving
 * 16 multiply-adds); else Winograd's (WINO_MR by WINO_NT). */
#if defined(__AVX512F__)
#define PK_VW 16
#define PK_MR 8
typedef float pk_vec __attribute__((vector_size(PK_VW * sizeof(float))));
#define PK_SPLAT(x) ((pk_vec)_mm512_set1_ps(x))
#define PK_FMA(a, b, c) ((pk_vec)_mm512_fmadd_ps((__m512)(a), (__m512)(b), (__m512)(c)))
#else
#define PK_VW WINO_VW
#define PK_MR WINO_MR
typedef wino_vec pk_vec;
#define PK_SPLAT(x) WINO_SPLAT(x)
#define PK_FMA(a, b, c) WINO_FMA(a, b, c)
#endif
#define PK_NV 2
#define PK_NT (PK_NV * PK_VW)
#define PK_ROW 16 /* positions gathered at a time from one output row */
#ifndef PK_MAX_K
#define PK_MAX_K 160
#endif
#ifndef PK_MAX_W
#define PK_MAX_W (64 * 1024)
#endif
#ifndef PK_MIN_P
#define PK_MIN_P 1024
#endif

/* from the shapes alone (the workspace's size) */
static bool packed_fits(const ts_conv_geom *g) {
    int64_t K = g->C * g->KH * g->KW;
    return g->groups == 1 && K <= PK_MAX_K && g->OC * K <= PK_MAX_W && g->OH * g->OW >= PK_MIN_P && g->N >= 1;
}

/* ... and what ts_conv2d_infer takes so, with the weights kept: not a 1x1
 * of stride 1 (the input is its own columns) nor Winograd's */
static bool packed_conv(const ts_conv_geom *g) { return packed_fits(g) && !conv_direct(g) && !ts_conv2d_winograd_tile(g, true); }

static size_t packed_w_floats(const ts_conv_geom *g) { return (size_t)(g->OC * g->C * g->KH * g->KW + 15) / 16 * 16; }

/* a slot: the panel [K, PK_NT] and the products [OC, PK_NT] */
static size_t packed_slot(const ts_conv_geom *g) { return (size_t)((g->C * g->KH * g->KW + g->OC) * PK_NT + 15) / 16 * 16; }

static int64_t packed_panels(const ts_conv_geom *g) { return g->N * ((g->OH * g->OW + PK_NT - 1) / PK_NT); }

/* slices: PK_SPLIT a thread, so that a thread the scheduler runs late
 * still finds some left */
#ifndef PK_SPLIT
#define PK_SPLIT 8
#endif
static int64_t packed_slots(const ts_conv_geom *g, int threads) {
    int64_t n = packed_panels(g), t = (threads < 1 ? 1 : threads) * PK_SPLIT;
    return n < t ? n : t;
}

static size_t packed_floats(const ts_conv_geom *g, int threads) {
    return packed_fits(g) ? (size_t)packed_slots(g, threads) * packed_slot(g) : 0;
}

typedef struct packed_job {
    const ts_conv_geom *g;
    const float *x, *wp, *b;
    float *y, *ws;
    const ts_conv_tail *tail;
    bool relu_over; /* the tail a Relu alone, over y (the stem's) */
    int64_t slots;
} packed_job;

/* wp: w [OC, K] as pk_block reads it: a block of PK_MR rows at wp + oc *
 * K, [K, PK_MR], the rows past the last whole block one at a time */
static void packed_weights(float *restrict wp, const float *restrict w, int64_t OC, int64_t K) {
    for (int64_t oc = 0, R; oc < OC; oc += R) {
        R = OC - oc >= PK_MR ? PK_MR : 1;
        for (int64_t k = 0; k < K; k++)
            for (int64_t r = 0; r < R; r++) wp[oc * K + k * R + r] = w[(oc + r) * K + k];
    }
}

/* pk[(c, ki, kj), t] (rows PK_NT apart) = x[c, ih, iw] under output
 * position p0 + t of sample xn for t < n (0 in the padding and past n):
 * PK_ROW positions at a time, gathered along their input row where they
 * lie on one output row */
static void packed_panel(const ts_conv_geom *g, float *restrict pk, const float *restrict xn, int64_t p0, int64_t n) {
    const int64_t H = g->H, W = g->W, OW = g->OW, KH = g->KH, KW = g->KW, SW = g->SW;
    for (int64_t h = 0; h < PK_NT; h += PK_ROW) {
        int64_t q0 = p0 + h, cnt = n - h < 0 ? 0 : n - h > PK_ROW ? PK_ROW : n - h, oh = q0 / OW, ow0 = q0 % OW;
        float *d = pk + h;
        if (cnt == PK_ROW && ow0 + PK_ROW <= OW) {
            for (int64_t c = 0; c < g->C; c++)
                for (int64_t ki = 0; ki < KH; ki++) {
                    int64_t ih = oh * g->SH - g->PT + ki * g->DH;
                    const float *row = xn + (c * H + ih) * W;
                    for (int64_t kj = 0; kj < KW; kj++, d += PK_NT) {
                        int64_t iw0 = ow0 * SW - g->PL + kj * g->DW;
                        bool inside = iw0 >= 0 && iw0 + (PK_ROW - 1) * SW < W;
                        if (ih < 0 || ih >= H)
                            for (int t = 0; t < PK_ROW; t++) d[t] = 0.0f;
                        else if (inside && SW == 2) /* a constant stride: vector moves */
                            for (int t = 0; t < PK_ROW; t++) d[t] = row[iw0 + 2 * t];
                        else if (inside)
                            for (int t = 0; t < PK_ROW; t++) d[t] = row[iw0 + t * SW];
                        else
                            for (int64_t t = 0; t < PK_ROW; t++) {
                                int64_t iw = iw0 + t * SW;
                                d[t] = iw >= 0 && iw < W ? row[iw] : 0.0f;
                            }
                    }
                }
            continue;
        }
        int64_t hb[PK_ROW], wb[PK_ROW]; /* each position's first input row and column (past n: none) */
        for (int64_t t = 0; t < PK_ROW; t++) {
            int64_t q = q0 + t;
            hb[t] = t < cnt ? q / OW * g->SH - g->PT : -H - KH * g->DH, wb[t] = t < cnt ? q % OW * SW - g->PL : 0;
        }
        for (int64_t c = 0; c < g->C; c++)
            for (int64_t ki = 0; ki < KH; ki++)
                for (int64_t kj = 0; kj < KW; kj++, d += PK_NT)
                    for (int64_t t = 0; t < PK_ROW; t++) {
                        int64_t ih = hb[t] + ki * g->DH, iw = wb[t] + kj * g->DW;
                        d[t] = ih >= 0 && ih < H && iw >= 0 && iw < W ? xn[(c * H + ih) * W + iw] : 0.0f;
                    }
    }
}

/* mm[r, t] = sum_k u[k, r] pk[k, t] for the R rows of a block (rows of
 * PK_NT floats), inlined with R constant: the sums stay in registers */
static inline __attribute__((always_inline)) void pk_block_rows(int R, const float *restrict u, const float *restrict pk, float *restrict mm,
                                                                int64_t K) {
    pk_vec acc[PK_MR][PK_NV];
    for (int r = 0; r < R; r++)
        for (int k = 0; k < PK_NV; k++) acc[r][k] = (pk_vec){0};
    for (int64_t c = 0; c < K; c++) {
        pk_vec x[PK_NV];
        for (int k = 0; k < PK_NV; k++) memcpy(&x[k], pk + c * PK_NT + k * PK_VW, sizeof x[k]);
        for (int r = 0; r < R; r++) {
            pk_vec s = PK_SPLAT(u[c * R + r]);
            for (int k = 0; k < PK_NV; k++) acc[r][k] = PK_FMA(s, x[k], acc[r][k]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int k = 0; k < PK_NV; k++) memcpy(mm + r * PK_NT + k * PK_VW, &acc[r][k], sizeof acc[r][k]);
}

static void pk_block(const float *wp, const float *pk, float *mm, int64_t OC, int64_t K) {
    int64_t oc = 0;
    for (; oc + PK_MR <= OC; oc += PK_MR) pk_block_rows(PK_MR, wp + oc * K, pk, mm + oc * PK_NT, K);
    for (; oc < OC; oc++) pk_block_rows(1, wp + oc * K, pk, mm + oc * PK_NT, K); /* the last rows: one at a time ([K, 1] each, as packed) */
}

static void packed_slices(void *vj, int64_t s0, int64_t s1) {
    const packed_job *j = vj;
    const ts_conv_geom *g = j->g;
    int64_t K = g->C * g->KH * g->KW, OC = g->OC, P = g->OH * g->OW, per = (P + PK_NT - 1) / PK_NT, all = packed_panels(g);
    for (int64_t s = s0; s < s1; s++) {
        float *pk = j->ws + (size_t)s * packed_slot(g), *mm = pk + K * PK_NT;
        for (int64_t q = all * s / j->slots; q < all * (s + 1) / j->slots; q++) {
            int64_t n = q / per, p0 = q % per * PK_NT, cnt = P - p0 < PK_NT ? P - p0 : PK_NT;
            packed_panel(g, pk, j->x + n * g->C * g->H * g->W, p0, cnt);
            pk_block(j->wp, pk, mm, OC, K);
            for (int64_t oc = 0; oc < OC; oc++) {
                float bv = j->b ? j->b[oc] : 0.0f, *yo = j->y + (n * OC + oc) * P + p0;
                const float *m = mm + oc * PK_NT;
                if (cnt == PK_NT && j->relu_over) /* the Relu alone, over the output: written once */
                    for (int t = 0; t < PK_NT; t++) {
                        float v = m[t] + bv;
                        yo[t] = v < 0.0f ? 0.0f : v;
                    }
                else if (cnt == PK_NT)
                    for (int t = 0; t < PK_NT; t++) yo[t] = m[t] + bv;
                else
                    for (int64_t t = 0; t < cnt; t++) yo[t] = m[t] + bv;
                if (j->tail && !(cnt == PK_NT && j->relu_over)) tail_apply(j->tail, j->y, yo - j->y, cnt);
            }
        }
    }
}

static void conv_fwd_packed(ts_pool *p, float *ws, float *y, const float *x, const float *w, const float *b, const ts_conv_geom *g,
                            float *cache, uint64_t key, const ts_conv_tail *tail) {
    int64_t K = g->C * g->KH * g->KW, macs = g->N * g->OC * g->OH * g->OW * K;
    wino_head h;
    memcpy(&h, cache, sizeof h);
    if (!h.made || h.key != key) {
        packed_weights(cache + WINO_HEAD, w, g->OC, K);
        h = (wino_head){.made = 1, .key = key};
        memcpy(cache, &h, sizeof h);
    }
    packed_job j = {.g = g, .x = x, .wp = cache + WINO_HEAD, .b = b, .y = y, .ws = ws, .tail = tail_of(tail),
                    .slots = macs < CONV_PAR_MACS ? 1 : packed_slots(g, ts_pool_threads(p))};
    j.relu_over = j.tail && !j.tail->res && j.tail->relu == y;
    ts_pool_for(p, j.slots, 1, packed_slices, &j);
}

void ts_conv2d_infer(ts_pool *p, float *ws, float *y, const float *x, const float *w, const float *b, const ts_conv_geom *g, float *cache,
                     uint64_t key, const ts_conv_tail *tail) {
    int m = ts_conv2d_winograd_tile(g, cache != NULL);
    if (m) conv_fwd_winograd(p, ws, y, x, w, b, g, m, cache, key, false, tail);
    else if (cache && packed_conv(g)) conv_fwd_packed(p, ws, y, x, w, b, g, cache, key, tail);
    else conv_forward(p, ws, y, x, w, b, g, true, tail);
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
    int32_t *idx; /* max: the winners */
    const float *x, *dy;
    bool include_pad;
    ts_stats_sums *sums; /* max forward: the output's, one per sample, else NULL */
} pool_job;

/* The kernel taps k < K whose input o*S - P + k*D lies in [0, size): [lo, hi) */
static inline void tap_range(int64_t o, int64_t S, int64_t P, int64_t D, int64_t K, int64_t size, int64_t *lo, int64_t *hi) {
    int64_t first = o * S - P;
    *lo = first >= 0 ? 0 : div_small(-first + D - 1, D);
    *hi = first > size - 1 ? 0 : div_small(size - 1 - first, D) + 1;
    if (*hi > K) *hi = K;
    if (*hi < *lo) *hi = *lo;
}

/* one output row of a 2x2 window with stride 2 inside the plane, the rule
 * of max_fwd_planes in selects the compiler vectorises (r1 = r0 + W, i0: r0's index; at NULL: the values alone) */
static void max2x2_row(float *restrict out, int32_t *restrict at, const float *restrict r0, const float *restrict r1, int32_t i0,
                       int32_t W, int64_t OW) {
    for (int64_t ow = 0; !at && ow < OW; ow++) {
        float a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1], m = a;
        m = (b > m) | (b != b) ? b : m;
        m = (c > m) | (c != c) ? c : m;
        out[ow] = (d > m) | (d != d) ? d : m;
    }
    for (int64_t ow = 0; at && ow < OW; ow++) {
        float a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1], m = a;
        int32_t i = i0 + 2 * (int32_t)ow, k = i;
        bool t = (b > m) | (b != b);
        m = t ? b : m, k = t ? i + 1 : k;
        t = (c > m) | (c != c);
        m = t ? c : m, k = t ? i + W : k;
        t = (d > m) | (d != d);
        m = t ? d : m, k = t ? i + W + 1 : k;
        out[ow] = m, at[ow] = k;
    }
}

static bool max2x2(const ts_conv_geom *g) {
    return g->KH == 2 && g->KW == 2 && g->SH == 2 && g->SW == 2 && g->PT == 0 && g->PL == 0 && g->DH == 1 && g->DW == 1 &&
           2 * g->OH <= g->H && 2 * g->OW <= g->W;
}

/* The winner of window (oh, ow) of one plane, rows [ki0, ki1) of the
 * window inside it (ih0: its first row): the rule of max_fwd_planes one
 * tap at a time in selects (random values mispredict branches), for the
 * columns at the edges of max_row's vectors (a NULL: the value alone). */
static void max_window(const ts_conv_geom *g, const float *plane, int64_t ih0, int64_t ki0, int64_t ki1, int64_t ow, float *o, int32_t *a) {
    int64_t iw0 = ow * g->SW - g->PL, DW = g->DW, kj0, kj1;
    tap_range(ow, g->SW, g->PL, DW, g->KW, g->W, &kj0, &kj1);
    float m = -INFINITY;
    int32_t k = -1;
    for (int64_t ki = ki0; ki < ki1 && kj0 < kj1; ki++) {
        int64_t at = (ih0 + ki * g->DH) * g->W + iw0;
        if (k < 0) m = plane[at + kj0 * DW], k = (int32_t)(at + kj0 * DW); /* the first tap */
        for (int64_t kj = kj0; kj < kj1; kj++) {
            float v = plane[at + kj * DW];
            int32_t take = -(int32_t)((v > m) | (v != v));
            m = ts_bits_float((ts_float_bits(v) & (uint32_t)take) | (ts_float_bits(m) & ~(uint32_t)take));
            k = ((int32_t)(at + kj * DW) & take) | (k & ~take);
        }
    }
    *o = m;
    if (a) *a = k;
}

/* one kernel tap over outputs [lo, hi) of a row, reading row[ow*SW + off]
 * (index base + ow*SW within the plane): the rule of max_fwd_planes one
 * output at a time, for the rows too short for max_row's vectors;
 * max_tap_values the same without the indices (one loop testing for them
 * ran the short rows of 256x14x14 planes 1.6 times as long) */
static void max_tap(float *restrict o, int32_t *restrict a, const float *restrict row, int32_t base, int64_t off, int64_t SW, int64_t lo,
                    int64_t hi) {
    for (int64_t ow = lo; ow < hi; ow++) {
        float v = row[ow * SW + off];
        bool take = (a[ow] < 0) | (v > o[ow]) | (v != v);
        o[ow] = take ? v : o[ow];
        a[ow] = take ? base + (int32_t)(ow * SW) : a[ow];
    }
}

static void max_tap_values(float *restrict o, const float *restrict row, int64_t off, int64_t SW, int64_t lo, int64_t hi) {
    for (int64_t ow = lo; ow < hi; ow++) {
        float v = row[ow * SW + off];
        o[ow] = (v > o[ow]) | (v != v) ? v : o[ow];
    }
}

/* A vector of outputs of a row at a time (16 with AVX-512, else 8), where
 * every tap of their windows lies inside the row: the values the tap
 * reads (SW apart; stride 2 as the even lanes of two loads), the winners
 * in registers. */
#if defined(__AVX512F__)
#define MP_LANES 16
#define MP_EVEN 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30
#define MP_IOTA 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
#else
#define MP_LANES 8
#define MP_EVEN 0, 2, 4, 6, 8, 10, 12, 14
#define MP_IOTA 0, 1, 2, 3, 4, 5, 6, 7
#endif
typedef float mp_vf __attribute__((vector_size(MP_LANES * sizeof(float))));
typedef int32_t mp_vi __attribute__((vector_size(MP_LANES * sizeof(int32_t))));

/* (through pointers, as wino_ld8) */
static inline void mp_load(mp_vf *v, const float *x, int64_t SW) {
    if (SW == 1) {
        memcpy(v, x, sizeof *v);
        return;
    }
    if (SW == 2) { /* x[0 .. 2 * MP_LANES - 1]: in the row, as max_row's interior keeps it */
        mp_vf e, f;
        memcpy(&e, x, sizeof e);
        memcpy(&f, x + MP_LANES, sizeof f);
        *v = TS_SHUF(mp_vi, e, f, MP_EVEN);
        return;
    }
    for (int l = 0; l < MP_LANES; l++) (*v)[l] = x[l * SW];
}

/* Output row oh of one plane into o (and the winners' indices into a,
 * unless NULL): the edges window by window and the columns between a
 * vector at a time (the last vector overlapping the one before), or a row
 * too short for a vector tap after tap; the taps in the same order every
 * way (rows, then columns), so ties and NaNs resolve alike. */
static void max_row(const ts_conv_geom *g, const float *plane, int64_t oh, float *o, int32_t *a) {
    int64_t ki0, ki1, ih0 = oh * g->SH - g->PT, SW = g->SW;
    tap_range(oh, g->SH, g->PT, g->DH, g->KH, g->H, &ki0, &ki1);
    /* the vectors' columns [lo, lo + n): ow*SW - PL >= 0 and the last
     * column a load touches, (ow + MP_LANES - 1)*SW - PL + (KW-1)*DW (+1 at
     * stride 2), inside the row */
    int64_t span = (g->KW - 1) * g->DW + (SW == 2), first = (g->PL + SW - 1) / SW, last = g->W - 1 - span + g->PL;
    int64_t lo = first < g->OW ? first : g->OW, n = last < 0 ? 0 : last / SW + 1 - lo;
    n = n < g->OW - lo ? n : g->OW - lo;
    n = ki0 < ki1 && n >= MP_LANES ? n : 0;
    for (int64_t ow = 0; n && ow < g->OW; ow++) { /* the edges */
        if (ow == lo) ow += n;
        if (ow < g->OW) max_window(g, plane, ih0, ki0, ki1, ow, &o[ow], a ? &a[ow] : NULL);
    }
    for (int64_t ow = 0; !n && ow < g->OW; ow++) o[ow] = -INFINITY; /* a row without a vector's worth: tap after tap */
    for (int64_t ow = 0; !n && a && ow < g->OW; ow++) a[ow] = -1;
    for (int64_t ki = ki0; !n && ki < ki1; ki++)
        for (int64_t kj = 0, ih = ih0 + ki * g->DH; kj < g->KW; kj++) {
            int64_t off, c0, c1;
            col_span(g, kj, &off, &c0, &c1);
            if (a) max_tap(o, a, plane + ih * g->W, (int32_t)(ih * g->W + off), off, SW, c0, c1);
            else max_tap_values(o, plane + ih * g->W, off, SW, c0, c1);
        }
    mp_vi lane = {MP_IOTA};
    lane *= (int32_t)SW;
    for (int64_t c = 0; c < n; c += MP_LANES) {
        int64_t ow = lo + (c + MP_LANES <= n ? c : n - MP_LANES); /* the last overlapping: the same values again */
        mp_vf m = {0};
        mp_vi k = {0};
        for (int64_t ki = ki0; ki < ki1; ki++)
            for (int64_t kj = 0, ih = ih0 + ki * g->DH; kj < g->KW; kj++) {
                int64_t at = ih * g->W + ow * SW - g->PL + kj * g->DW;
                mp_vf v;
                mp_load(&v, plane + at, SW);
                mp_vi take = (v > m) | (v != v);
                if (ki == ki0 && kj == 0) take = lane >= 0; /* the first tap: all lanes */
                m = (mp_vf)(((mp_vi)v & take) | ((mp_vi)m & ~take));
                if (a) k = (((int32_t)at + lane) & take) | (k & ~take);
            }
        memcpy(o + ow, &m, sizeof m);
        if (a) memcpy(a + ow, &k, sizeof k);
    }
}

/* The winner of each window, its index within the plane kept in idx for
 * the backward pass (NULL: an inference model's, the values alone):
 * PyTorch's CPU rule, a strictly greater value or a NaN takes over, so
 * ties keep the first and the last NaN wins. Padding is never a candidate
 * (a window of padding only gives -inf and index -1). ResNet's 3x3
 * window with stride 2 over 64x112x112 on one thread, all tap after tap,
 * took 964 us; 528 us with max_row's vectors, 494 without the indices. */
static void max_fwd_planes(void *vj, int64_t begin, int64_t end) {
    const pool_job *j = vj;
    const ts_conv_geom *g = j->g;
    int64_t OHW = g->OH * g->OW;
    bool fast = max2x2(g);
    for (int64_t q = begin; q < end; q++) {
        const float *plane = j->x + q * g->H * g->W;
        float *out = j->y + q * OHW;
        int32_t *at = j->idx ? j->idx + q * OHW : NULL;
        for (int64_t oh = 0; oh < g->OH; oh++) {
            const float *r0 = plane + 2 * oh * g->W;
            if (fast) max2x2_row(out + oh * g->OW, at ? at + oh * g->OW : NULL, r0, r0 + g->W, (int32_t)(2 * oh * g->W), (int32_t)g->W, g->OW);
            else max_row(g, plane, oh, out + oh * g->OW, at ? at + oh * g->OW : NULL);
        }
    }
}

static void max_bwd_planes(void *vj, int64_t begin, int64_t end) {
    const pool_job *j = vj;
    const ts_conv_geom *g = j->g;
    int64_t OHW = g->OH * g->OW;
    for (int64_t q = begin; q < end; q++) {
        const float *d = j->dy + q * OHW;
        const int32_t *at = j->idx + q * OHW;
        float *dplane = j->dx + q * g->H * g->W;
        for (int64_t o = 0; o < OHW; o++)
            if (at[o] >= 0) dplane[at[o]] += d[o];
    }
}

/* --------------------------------------------------------------- conv3d */

/* out[i] (+)= one of conv3d_math.h's elements, i in [0, n), split over the pool */
typedef enum { C3_Y, C3_DX, C3_DW, C3_BIAS } c3_kind;
typedef struct c3_job {
    const ts_conv3d_geom *g;
    c3_kind kind;
    float *out;
    const float *a, *b; /* the element's two operands; C3_BIAS: a [N, C, S] */
    const float *bias;  /* added per channel of out [N, C, S] (C3_Y, C3_DX) */
    int64_t C, S;       /* out's channels and positions (C3_Y, C3_DX), or a's (C3_BIAS) */
    bool accumulate;
} c3_job;

static void c3_elements(void *vj, int64_t begin, int64_t end) {
    const c3_job *j = vj;
    for (int64_t i = begin; i < end; i++) {
        float v = j->kind == C3_Y    ? ts_conv3d_y_at(j->g, j->a, j->b, i)
                  : j->kind == C3_DX ? ts_conv3d_dx_at(j->g, j->a, j->b, i)
                  : j->kind == C3_DW ? ts_conv3d_dw_at(j->g, j->a, j->b, i)
                                     : ts_conv3d_channel_sum(j->a, j->g->N, j->C, j->S, i);
        if (j->bias) v += j->bias[i / j->S % j->C];
        j->out[i] = j->accumulate ? j->out[i] + v : v;
    }
}

static void c3_run(ts_pool *p, c3_job j, int64_t n, int64_t work_per_item) {
    if (j.out && n > 0) ts_pool_for(p, n, grain_for(work_per_item), c3_elements, &j);
}

static int64_t c3_prod(const int64_t *v) { return v[0] * v[1] * v[2]; }

void ts_conv3d_forward(ts_pool *p, float *y, const float *x, const float *w, const float *b, const ts_conv3d_geom *g) {
    int64_t taps = g->C / g->G * c3_prod(g->k), S = c3_prod(g->out);
    c3_run(p, (c3_job){.g = g, .kind = C3_Y, .out = y, .a = x, .b = w, .bias = b, .C = g->OC, .S = S}, g->N * g->OC * S, taps);
}

void ts_conv3d_backward(ts_pool *p, float *dx, float *dw, float *db, const float *dy, const float *x, const float *w, const ts_conv3d_geom *g) {
    int64_t taps = g->OC / g->G * c3_prod(g->k), S_in = c3_prod(g->in), S_out = c3_prod(g->out);
    c3_run(p, (c3_job){.g = g, .kind = C3_DX, .out = dx, .a = dy, .b = w, .C = g->C, .S = S_in, .accumulate = true}, g->N * g->C * S_in, taps);
    c3_run(p, (c3_job){.g = g, .kind = C3_DW, .out = dw, .a = dy, .b = x, .accumulate = true}, g->OC * (g->C / g->G) * c3_prod(g->k),
           g->N * S_out);
    c3_run(p, (c3_job){.g = g, .kind = C3_BIAS, .out = db, .a = dy, .C = g->OC, .S = S_out, .accumulate = true}, g->OC, g->N * S_out);
}

void ts_conv_transpose3d_forward(ts_pool *p, float *y, const float *x, const float *w, const float *b, const ts_conv3d_geom *g) {
    int64_t taps = g->OC / g->G * c3_prod(g->k), S = c3_prod(g->in);
    c3_run(p, (c3_job){.g = g, .kind = C3_DX, .out = y, .a = x, .b = w, .bias = b, .C = g->C, .S = S}, g->N * g->C * S, taps);
}

void ts_conv_transpose3d_backward(ts_pool *p, float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                                  const ts_conv3d_geom *g) {
    int64_t taps = g->C / g->G * c3_prod(g->k), S_in = c3_prod(g->in), S_out = c3_prod(g->out);
    c3_run(p, (c3_job){.g = g, .kind = C3_Y, .out = dx, .a = dy, .b = w, .C = g->OC, .S = S_out, .accumulate = true}, g->N * g->OC * S_out, taps);
    c3_run(p, (c3_job){.g = g, .kind = C3_DW, .out = dw, .a = x, .b = dy, .accumulate = true}, g->OC * (g->C / g->G) * c3_prod(g->k),
           g->N * S_out);
    c3_run(p, (c3_job){.g = g, .kind = C3_BIAS, .out = db, .a = dy, .C = g->C, .S = S_in, .accumulate = true}, g->C, g->N * S_in);
}

/* Samples [begin, end) whole, each sample's output summed after its
 * planes, in the cache still (as a convolution's, conv_fwd_slots) */
static void max_fwd_samples(void *vj, int64_t begin, int64_t end) {
    const pool_job *j = vj;
    int64_t C = j->g->C, OHW = j->g->OH * j->g->OW;
    for (int64_t n = begin; n < end; n++) {
        max_fwd_planes(vj, n * C, (n + 1) * C);
        ts_stats_sums_add(&j->sums[n], j->y + n * C * OHW, C * OHW);
    }
}

void ts_max_pool2d_forward(ts_pool *p, float *y, int32_t *idx, const float *x, const ts_conv_geom *g, ts_stats_sums *sums) {
    pool_job j = {.g = g, .y = y, .idx = idx, .x = x, .sums = sums};
    int64_t work = g->OH * g->OW * g->KH * g->KW;
    if (sums && g->N >= ts_pool_threads(p)) ts_pool_for(p, g->N, grain_for(g->C * work), max_fwd_samples, &j);
    else ts_pool_for(p, g->N * g->C, grain_for(work), max_fwd_planes, &j); /* fewer samples than threads: none summed */
}

void ts_max_pool2d_backward(ts_pool *p, float *dx, const float *dy, const int32_t *idx, const ts_conv_geom *g) {
    pool_job j = {.g = g, .dx = dx, .dy = dy, .idx = (int32_t *)(uintptr_t)idx};
    ts_pool_for(p, g->N * g->C, grain_for(g->OH * g->OW), max_bwd_planes, &j);
}

void ts_max_pool_flat_indices(float *out, const int32_t *idx, const ts_conv_geom *g, bool column_major) {
    int64_t OHW = g->OH * g->OW, HW = g->H * g->W, n = g->N * g->C * OHW;
    for (int64_t o = 0; o < n; o++) {
        int64_t a = idx[o];
        out[o] = a < 0 ? -1.0f : (float)(o / OHW * HW + (column_major ? a / g->W + a % g->W * g->H : a));
    }
}

/* How many of the K taps (D apart) from o*S - P lie in [0, size): K without
 * a division for a window inside, as most are. */
static int64_t axis_taps(int64_t o, int64_t S, int64_t P, int64_t D, int64_t K, int64_t size) {
    int64_t first = o * S - P, lo, hi;
    if (first >= 0 && first + (K - 1) * D < size) return K;
    tap_range(o, S, P, D, K, size, &lo, &hi);
    return hi - lo;
}

static double avg_divisor(const ts_conv_geom *g, int64_t oh, int64_t ow, bool include_pad) {
    int64_t n = include_pad /* positions from the start of the padded input */
                    ? axis_taps(oh, g->SH, 0, g->DH, g->KH, g->H + g->PT + g->PB) * axis_taps(ow, g->SW, 0, g->DW, g->KW, g->W + g->PL + g->PR)
                    : axis_taps(oh, g->SH, g->PT, g->DH, g->KH, g->H) * axis_taps(ow, g->SW, g->PL, g->DW, g->KW, g->W);
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
    float *relu; /* forward: also max(0, y) here, row by row as y is written (a Relu that follows: ts_kctx.relu_out; may be y), else NULL */
    ts_stats_sums *sy, *sr; /* forward: per channel, the sums of y and of the Relu's values (sr with sy) as they are written, else NULL */
    const float *x, *w, *b, *dy;
    int64_t N, C, inner;
    float eps, momentum;
    bool batch, update, store; /* store: dx = rather than dx += */
} bn_job;

/* Rows of a channel the forward writes before it sums them, about this
 * many floats (in L1 still; a call of the sums each, not one a row) */
#define BN_SUM_FLOATS 4096

static void bn_fwd_channels(void *vj, int64_t begin, int64_t end) {
    const bn_job *j = vj;
    int64_t M = j->N * j->inner;
    for (int64_t c = begin; c < end; c++) {
        double mean, var;
        if (j->batch) {
            double s = 0, ss = 0;
            for (int64_t n = 0; n < j->N; n++) s += ts_lane_sum32(j->x + (n * j->C + c) * j->inner, 0.0f, NULL, 0.0f, j->inner);
            mean = s / (double)M;
            for (int64_t n = 0; n < j->N; n++) {
                const float *r = j->x + (n * j->C + c) * j->inner;
                ss += ts_lane_sum32(r, (float)mean, r, (float)mean, j->inner);
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
        ts_sums_rows sums;
        if (j->sy) ts_sums_rows_start(&sums, &j->sy[c], j->sr ? &j->sr[c] : NULL);
        int64_t block = j->sy ? BN_SUM_FLOATS / j->inner + 1 : 1, stride = j->C * j->inner; /* rows summed at once */
        for (int64_t n0 = 0; n0 < j->N; n0 += block) {
            int64_t n1 = j->N - n0 < block ? j->N : n0 + block;
            for (int64_t n = n0; n < n1; n++) {
                const float *r = j->x + (n * j->C + c) * j->inner;
                float *o = j->y + (n * j->C + c) * j->inner;
                for (int64_t i = 0; i < j->inner; i++) o[i] = (r[i] - m) * scale + shift;
            }
            /* the rows still in the cache: their sums (and their Relu's), then their Relu, perhaps over them */
            float *o = j->y + (n0 * j->C + c) * j->inner;
            if (j->sy) ts_sums_rows_add(&sums, o, n1 - n0, j->inner, stride);
            for (int64_t n = n0; j->relu && n < n1; n++) relu_into(j->relu + (o - j->y) + (n - n0) * stride, o + (n - n0) * stride, j->inner);
        }
        if (j->sy) ts_sums_rows_finish(&sums);
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
            sdy += ts_lane_sum32(d, 0.0f, NULL, 0.0f, j->inner);
            sdyx += ts_lane_sum32(d, 0.0f, r, m, j->inner) * invstd;
        }
        if (j->dw) j->dw[c] += (float)sdyx;
        if (j->db) j->db[c] += (float)sdy;
        if (!j->dx) continue;
        float k = (j->w ? j->w[c] : 1.0f) * invstd;
        float mdy = j->batch ? (float)(sdy / (double)M) : 0.0f, mdyx = j->batch ? (float)(sdyx / (double)M) : 0.0f;
        for (int64_t n = 0; n < j->N; n++) {
            const float *r = j->x + (n * j->C + c) * j->inner, *d = j->dy + (n * j->C + c) * j->inner;
            float *o = j->dx + (n * j->C + c) * j->inner;
            if (j->store)
                for (int64_t i = 0; i < j->inner; i++) o[i] = k * (d[i] - mdy - (r[i] - m) * invstd * mdyx);
            else
                for (int64_t i = 0; i < j->inner; i++) o[i] += k * (d[i] - mdy - (r[i] - m) * invstd * mdyx);
        }
    }
}

void ts_batch_norm_forward(ts_pool *p, float *y, float *stats, const float *x, const float *w, const float *b, float *run_mean,
                           float *run_var, int64_t N, int64_t C, int64_t inner, float eps, float momentum, bool batch, bool update,
                           float *relu) {
    ts_batch_norm_forward_summed(p, y, stats, x, w, b, run_mean, run_var, N, C, inner, eps, momentum, batch, update, relu, NULL, NULL);
}

void ts_batch_norm_forward_summed(ts_pool *p, float *y, float *stats, const float *x, const float *w, const float *b, float *run_mean,
                                  float *run_var, int64_t N, int64_t C, int64_t inner, float eps, float momentum, bool batch, bool update,
                                  float *relu, ts_stats_sums *sy, ts_stats_sums *sr) {
    bn_job j = {.y = y, .stats = stats, .x = x, .w = w, .b = b, .run_mean = run_mean, .run_var = run_var, .N = N, .C = C, .inner = inner,
                .eps = eps, .momentum = momentum, .batch = batch, .update = update, .relu = relu, .sy = sy, .sr = relu ? sr : NULL};
    ts_pool_for(p, C, grain_for(2 * N * inner), bn_fwd_channels, &j);
}

void ts_batch_norm_backward(ts_pool *p, float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                            const float *stats, int64_t N, int64_t C, int64_t inner, bool batch, bool dx_store) {
    bn_job j = {.dx = dx, .dw = dw, .db = db, .dy = dy, .x = x, .w = w, .stats = (float *)(uintptr_t)stats, .N = N, .C = C,
                .inner = inner, .batch = batch, .store = dx_store};
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

static void uniform_slice(void *vj, int64_t begin, int64_t end) {
    const mask_job *j = vj;
    for (int64_t i = begin; i < end; i++) j->mask[i] = (float)(mix64(j->key + (uint64_t)i * 0x9E3779B97F4A7C15ull) >> 40) * 0x1.0p-24f;
}

void ts_random_uniform_fill(ts_pool *p, float *out, int64_t n, uint64_t seed, uint64_t iteration) {
    mask_job j = {.mask = out, .key = mix64(seed ^ mix64(iteration + 0x2545F4914F6CDD1Dull))};
    ts_pool_for(p, n, GRAIN, uniform_slice, &j);
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
    case SIGMOID_F: for (int64_t i = begin; i < end; i++) o[i] = ts_vsigmoid(a[i]); break;
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
