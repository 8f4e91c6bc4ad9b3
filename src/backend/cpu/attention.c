/* attention.c -- attention in one pass over the keys (TS_OP_ATTENTION):
 * softmax(scale q k^T, masked keys left out) v without the [T, S] scores
 * or probabilities in memory. Each (batch, head) pair is one thread's
 * work; its keys go by tiles of ATT_TILE, each tile's k (and in the
 * backward v) transposed once into the thread's workspace slot so that
 * every query row's scores are contiguous multiply-adds over the tile.
 * The forward keeps a running max and sum per query row (the flash-
 * attention recurrence: a new tile's larger max rescales what the row
 * holds), accumulating in the output rows, and leaves each row's
 * log-sum-exp for the backward, which recomputes the probabilities from it.
 * A query row reads keys only up to its last unmasked one (a causal mask
 * does half the work). A row whose keys are all masked averages v, as a
 * softmax over scores filled with one value does (its log-sum-exp is then
 * +inf, and no gradient reaches its q or k). */
#include "backend/cpu/kernels_tensor.h"

#include "backend/pool.h"
#include "backend/vmath.h"

#include <math.h>
#include <string.h>

#define ATT_TILE 64

/* floats of one thread's slot: k and v of a tile transposed, the tile's
 * scores and probabilities, and per query row its sum (forward) or
 * dO . O (backward) and the end of its unmasked keys */
static size_t slot_floats(const ts_attn_geom *g) {
    return (size_t)((g->D + g->Dv) * ATT_TILE + 2 * ATT_TILE + 2 * g->T);
}

static int64_t slots(const ts_attn_geom *g, int threads) {
    int64_t bh = g->B * g->H;
    return bh < threads ? (bh > 0 ? bh : 1) : threads;
}

size_t ts_attention_workspace(const ts_attn_geom *g, int threads) { return (size_t)slots(g, threads) * slot_floats(g); }

typedef struct att_job {
    const ts_attn_geom *g;
    int64_t slots;
    float *ws;
    float *out, *lse;                /* forward */
    const float *lse_in;             /* backward: the forward's log-sum-exps */
    float *dq, *dk, *dv;             /* backward, accumulated into (each may be NULL) */
    const float *q, *k, *v, *o, *dout;
} att_job;

/* mask of (b, h, i, j): non-zero = the key is left out */
static inline const int32_t *mask_row(const ts_attn_geom *g, int64_t b, int64_t h, int64_t i) {
    return g->mask + b * g->ms[0] + h * g->ms[1] + i * g->ms[2];
}

/* 1 + the last key row i may see (0: none) */
static int64_t row_end(const ts_attn_geom *g, const int32_t *m) {
    int64_t j = g->S;
    while (j > 0 && m[(j - 1) * g->ms[3]]) j--;
    return j;
}

/* x [n, w] (rows of w floats) -> xt [w][ATT_TILE] */
static void transpose_tile(float *restrict xt, const float *restrict x, int64_t n, int64_t w) {
    for (int64_t j = 0; j < n; j++)
        for (int64_t d = 0; d < w; d++) xt[d * ATT_TILE + j] = x[j * w + d];
}

/* scale q . k_j for the n keys of the tile (kt transposed), masked ones -inf; returns their max */
static float tile_scores(const ts_attn_geom *g, float *restrict s, const float *restrict qi, const float *restrict kt, const int32_t *m,
                         int64_t j0, int64_t n) {
    for (int64_t j = 0; j < n; j++) s[j] = 0.0f;
    for (int64_t d = 0; d < g->D; d++) {
        float qd = qi[d];
        const float *restrict kd = kt + d * ATT_TILE;
        for (int64_t j = 0; j < n; j++) s[j] += qd * kd[j];
    }
    float mx = -INFINITY;
    for (int64_t j = 0; j < n; j++) {
        float x = m[(j0 + j) * g->ms[3]] ? -INFINITY : s[j] * g->scale;
        s[j] = x;
        mx = x > mx ? x : mx;
    }
    return mx;
}

static void fwd_pair(const att_job *a, float *ws, int64_t bh) {
    const ts_attn_geom *g = a->g;
    int64_t b = bh / g->H, h = bh % g->H, T = g->T, S = g->S, D = g->D, Dv = g->Dv;
    const float *q = a->q + bh * T * D, *k = a->k + bh * S * D, *v = a->v + bh * S * Dv;
    float *out = a->out + bh * T * Dv, *mrow = a->lse + bh * T; /* the running max, then the log-sum-exp */
    float *kt = ws, *s = kt + (D + Dv) * ATT_TILE, *sum = s + 2 * ATT_TILE;
    int32_t *end = (int32_t *)(void *)(sum + T);
    int64_t last = 0;
    for (int64_t i = 0; i < T; i++) {
        end[i] = (int32_t)row_end(g, mask_row(g, b, h, i));
        last = end[i] > last ? end[i] : last;
        mrow[i] = -INFINITY, sum[i] = 0.0f;
        memset(out + i * Dv, 0, (size_t)Dv * sizeof *out);
    }
    for (int64_t j0 = 0; j0 < last; j0 += ATT_TILE) {
        int64_t nt = S - j0 < ATT_TILE ? S - j0 : ATT_TILE;
        transpose_tile(kt, k + j0 * D, nt, D);
        for (int64_t i = 0; i < T; i++) {
            if (end[i] <= j0) continue;
            int64_t n = end[i] - j0 < nt ? end[i] - j0 : nt;
            float mx = tile_scores(g, s, q + i * D, kt, mask_row(g, b, h, i), j0, n);
            if (mx == -INFINITY) continue; /* every key of the tile masked */
            float *oi = out + i * Dv;
            if (mx > mrow[i]) { /* a larger max: what the row holds is rescaled */
                float c = ts_vexp(mrow[i] - mx);
                sum[i] *= c;
                for (int64_t d = 0; d < Dv; d++) oi[d] *= c;
                mrow[i] = mx;
            }
            float m = mrow[i], l = 0.0f;
            for (int64_t j = 0; j < n; j++) s[j] = ts_vexp(s[j] - m);
            for (int64_t j = 0; j < n; j++) {
                float pj = s[j];
                l += pj;
                const float *restrict vj = v + (j0 + j) * Dv;
                for (int64_t d = 0; d < Dv; d++) oi[d] += pj * vj[d];
            }
            sum[i] += l;
        }
    }
    for (int64_t i = 0; i < T; i++) {
        float *oi = out + i * Dv;
        if (sum[i] > 0.0f) {
            float inv = 1.0f / sum[i];
            for (int64_t d = 0; d < Dv; d++) oi[d] *= inv;
            mrow[i] += logf(sum[i]);
            continue;
        }
        /* every key masked: the mean of v */
        for (int64_t j = 0; j < S; j++)
            for (int64_t d = 0; d < Dv; d++) oi[d] += v[j * Dv + d];
        for (int64_t d = 0; d < Dv; d++) oi[d] /= (float)S;
        mrow[i] = INFINITY;
    }
}

static void bwd_pair(const att_job *a, float *ws, int64_t bh) {
    const ts_attn_geom *g = a->g;
    int64_t b = bh / g->H, h = bh % g->H, T = g->T, S = g->S, D = g->D, Dv = g->Dv;
    const float *q = a->q + bh * T * D, *k = a->k + bh * S * D, *v = a->v + bh * S * Dv;
    const float *o = a->o + bh * T * Dv, *dout = a->dout + bh * T * Dv, *lse = a->lse_in + bh * T;
    float *dq = a->dq ? a->dq + bh * T * D : NULL, *dk = a->dk ? a->dk + bh * S * D : NULL, *dv = a->dv ? a->dv + bh * S * Dv : NULL;
    float *kt = ws, *vt = kt + D * ATT_TILE, *s = vt + Dv * ATT_TILE, *dp = s + ATT_TILE, *dd = dp + ATT_TILE;
    int32_t *end = (int32_t *)(void *)(dd + T);
    int64_t last = 0;
    for (int64_t i = 0; i < T; i++) {
        const float *oi = o + i * Dv, *gi = dout + i * Dv;
        float x = 0.0f;
        for (int64_t d = 0; d < Dv; d++) x += gi[d] * oi[d];
        dd[i] = x;
        end[i] = (int32_t)row_end(g, mask_row(g, b, h, i));
        if (lse[i] == INFINITY) { /* every key masked: the mean's gradient, to v alone */
            end[i] = 0;
            for (int64_t j = 0; dv && j < S; j++)
                for (int64_t d = 0; d < Dv; d++) dv[j * Dv + d] += gi[d] / (float)S;
        }
        last = end[i] > last ? end[i] : last;
    }
    for (int64_t j0 = 0; j0 < last; j0 += ATT_TILE) {
        int64_t nt = S - j0 < ATT_TILE ? S - j0 : ATT_TILE;
        transpose_tile(kt, k + j0 * D, nt, D);
        transpose_tile(vt, v + j0 * Dv, nt, Dv);
        for (int64_t i = 0; i < T; i++) {
            if (end[i] <= j0) continue;
            int64_t n = end[i] - j0 < nt ? end[i] - j0 : nt;
            const float *qi = q + i * D, *gi = dout + i * Dv;
            float mx = tile_scores(g, s, qi, kt, mask_row(g, b, h, i), j0, n);
            if (mx == -INFINITY) continue;
            float l = lse[i];
            for (int64_t j = 0; j < n; j++) s[j] = ts_vexp(s[j] - l); /* the probabilities */
            for (int64_t j = 0; j < n; j++) dp[j] = 0.0f;
            for (int64_t d = 0; d < Dv; d++) {
                float gd = gi[d];
                const float *restrict vd = vt + d * ATT_TILE;
                for (int64_t j = 0; j < n; j++) dp[j] += gd * vd[j];
            }
            float di = dd[i];
            for (int64_t j = 0; j < n; j++) {
                float pj = s[j];
                if (dv) {
                    float *restrict dvj = dv + (j0 + j) * Dv;
                    for (int64_t d = 0; d < Dv; d++) dvj[d] += pj * gi[d];
                }
                dp[j] = pj * (dp[j] - di) * g->scale; /* the scores' gradient, times the scale */
            }
            if (dq) {
                float *restrict dqi = dq + i * D;
                for (int64_t j = 0; j < n; j++) {
                    float x = dp[j];
                    const float *restrict kj = k + (j0 + j) * D;
                    for (int64_t d = 0; d < D; d++) dqi[d] += x * kj[d];
                }
            }
            if (dk)
                for (int64_t j = 0; j < n; j++) {
                    float x = dp[j];
                    float *restrict dkj = dk + (j0 + j) * D;
                    for (int64_t d = 0; d < D; d++) dkj[d] += x * qi[d];
                }
        }
    }
}

static void fwd_slots(void *ctx, int64_t begin, int64_t end) {
    const att_job *a = ctx;
    int64_t bh = a->g->B * a->g->H;
    for (int64_t slot = begin; slot < end; slot++)
        for (int64_t p = bh * slot / a->slots; p < bh * (slot + 1) / a->slots; p++) fwd_pair(a, a->ws + (size_t)slot * slot_floats(a->g), p);
}

static void bwd_slots(void *ctx, int64_t begin, int64_t end) {
    const att_job *a = ctx;
    int64_t bh = a->g->B * a->g->H;
    for (int64_t slot = begin; slot < end; slot++)
        for (int64_t p = bh * slot / a->slots; p < bh * (slot + 1) / a->slots; p++) bwd_pair(a, a->ws + (size_t)slot * slot_floats(a->g), p);
}

void ts_attention_forward(ts_pool *p, float *ws, float *out, float *lse, const float *q, const float *k, const float *v, const ts_attn_geom *g) {
    att_job a = {.g = g, .slots = slots(g, ts_pool_threads(p)), .ws = ws, .out = out, .lse = lse, .q = q, .k = k, .v = v};
    ts_pool_for(p, a.slots, 1, fwd_slots, &a);
}

void ts_attention_backward(ts_pool *p, float *ws, float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                           const float *v, const float *out, const float *lse, const ts_attn_geom *g) {
    att_job a = {.g = g, .slots = slots(g, ts_pool_threads(p)), .ws = ws, .lse_in = lse, .dq = dq, .dk = dk, .dv = dv,
                 .q = q, .k = k, .v = v, .o = out, .dout = dout};
    ts_pool_for(p, a.slots, 1, bwd_slots, &a);
}
