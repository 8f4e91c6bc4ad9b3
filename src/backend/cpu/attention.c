/* attention.c -- attention in one pass over the keys (TS_OP_ATTENTION):
 * softmax(scale q k^T, masked keys left out) v without the [T, S] scores
 * or probabilities in memory. Each (batch, key head) group, the query
 * heads that share that key and value head (one where there are as many
 * key heads as query heads), is one thread's work, so that the
 * backward's sums into dk and dv are one thread's; each (batch, head)
 * pair of it by blocks of ATT_QB queries against tiles of ATT_TILE keys: a
 * block's scores against a tile, and what they give back, are products on
 * a one-thread OpenBLAS into the thread's workspace slot (one tile of
 * scores, and in the backward one of their gradients: 32 KB; the tile of
 * keys, or values, a product reads transposed is transposed into the slot
 * first: times_tile_t). The forward
 * keeps a running max and sum per query row (the flash-attention
 * recurrence: a new tile's larger max rescales what the row holds),
 * accumulating in the output rows, and leaves each row's log-sum-exp for
 * the backward, which recomputes the probabilities from it. A block reads
 * tiles only up to the last key one of its rows may see (a causal mask
 * skips the tiles above the diagonal). A row whose keys are all masked
 * averages v, as a softmax over scores filled with one value does (its
 * log-sum-exp is then +inf, and no gradient reaches its q or k). */
#include "backend/cpu/kernels_tensor.h"

#include "backend/backend.h"
#include "backend/cpu/bf16_gemm.h"
#include "backend/cpu/cpu.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/lane_sum.h"
#include "backend/pool.h"
#include "backend/vmath.h"
#include "core/stats.h"

#include <math.h>
#include <string.h>

#define ATT_TILE 64
/* queries a block: half a tile, so that under a causal mask the first
 * half of a tile's queries reads the first half of its keys alone (a
 * quarter of the work of T = S = 64 left out) */
#define ATT_QB 32
/* queries a block of the 16-bit copies' form (below): a whole tile, so
 * that its products (on the bf16 kernel, which packs its operands per
 * product) are as few as the twin's */
#define COPY_QB ATT_TILE

/* n floats rounded up to 64 bytes */
static int64_t up16(int64_t n) { return (n + 15) / 16 * 16; }

/* The 16-bit copies' form of a slot (below): the rounded k and v of a
 * pair, the sums of their copies' gradients over a group, a block's
 * rounded q and dO and its copy of q's gradient, its rows of
 * probabilities, their copies and their gradients over every key, per
 * query row its dP . P and key end, then the bf16 kernel's packing room
 * (words, none where the build has no kernel). */
typedef struct copy_slot {
    float *k, *v, *dk, *dv, *q, *dout, *dq, *p, *p16, *dp, *rows;
    int64_t ld;
    uint32_t *packed; /* the bf16 kernel's packed operands (64-byte aligned) */
} copy_slot;

static int64_t max3(int64_t a, int64_t b, int64_t c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

static copy_slot copy_layout(const ts_attn_geom *g, float *ws, size_t *floats) {
    copy_slot c = {.ld = up16(g->S)};
    int64_t big = max3(g->S, g->D, g->Dv), words = (int64_t)ts_bf16k_serial_words(big, big > COPY_QB ? big : COPY_QB);
    int64_t sizes[11] = {g->S * g->D, g->S * g->Dv, g->S * g->D, g->S * g->Dv, COPY_QB * g->D, COPY_QB * g->Dv, COPY_QB * g->D,
                         COPY_QB * c.ld, COPY_QB * c.ld, COPY_QB * c.ld, 4 * ATT_TILE};
    float **at[11] = {&c.k, &c.v, &c.dk, &c.dv, &c.q, &c.dout, &c.dq, &c.p, &c.p16, &c.dp, &c.rows};
    size_t off = 0;
    for (int i = 0; i < 11; i++) {
        *at[i] = ws ? ws + off : NULL;
        off += (size_t)up16(sizes[i]);
    }
    if (ws) c.packed = (uint32_t *)(void *)(ws + off + (16 - (uintptr_t)(ws + off) / sizeof(float) % 16) % 16);
    *floats = off + (words ? (size_t)up16(words) + 16 : 0);
    return c;
}

/* A tile of keys (or values) transposed, [max(D, Dv), ATT_TILE], at the
 * end of the f32 form's slot: the scores' products without a transposed
 * side (ts_transpose_serial) */
static int64_t tile_t_floats(const ts_attn_geom *g) { return (g->D > g->Dv ? g->D : g->Dv) * ATT_TILE; }

/* c [m, n] (rows ldc apart) = x [m, d] times rows^T, rows [n, d] a tile
 * of keys or values, through the tile transposed into t */
static void times_tile_t(int64_t m, int64_t n, int64_t d, const float *x, const float *rows, float *t, float *c, int64_t ldc) {
    ts_transpose_serial(n, d, rows, d, t, n);
    ts_gemm_serial(false, false, m, n, d, x, d, t, n, 0.0f, c, ldc);
}

/* floats of one thread's slot: a tile of scores (then probabilities),
 * one of their gradients, and per query row of the block its max, sum,
 * dO . O and the end of its unmasked keys; or the 16-bit copies' form
 * (copy_layout), whichever is larger: the workspace is sized from the
 * shapes alone, before a node says which it runs */
static size_t slot_floats(const ts_attn_geom *g) {
    size_t f32 = (size_t)(2 * ATT_TILE * ATT_TILE + 4 * ATT_TILE + tile_t_floats(g)), copies;
    copy_layout(g, NULL, &copies);
    return f32 > copies ? f32 : copies;
}

static int64_t slots(const ts_attn_geom *g, int threads) {
    int64_t bh = g->B * g->Hk;
    return bh < threads ? (bh > 0 ? bh : 1) : threads;
}

size_t ts_attention_workspace(const ts_attn_geom *g, int threads) { return (size_t)slots(g, threads) * slot_floats(g); }

typedef struct att_job {
    const ts_attn_geom *g;
    const ts_att_sums *sums;         /* forward: the twin's summaries it takes (NULL: none) */
    int64_t slots;
    float *ws;
    float *out, *lse;                /* forward */
    const float *lse_in;             /* backward: the forward's log-sum-exps */
    float *dq, *dk, *dv;             /* backward, accumulated into (each may be NULL) */
    unsigned store;                  /* backward: bits 0, 1, 2: dq, dk, dv start unzeroed (each pair clears its own) */
    const float *q, *k, *v, *o, *dout;
    bool dc_qk, dc_pv;               /* backward, 16-bit copies: the twin's product reads dS, dO rounded to bf16 (below) */
    bool kernel;                     /* 16-bit copies: every product on the bf16 kernel, as the twin's (below) */
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

/* The row's n scores of tile j0 (raw products in s) scaled, the masked
 * ones -inf; returns their max. A mask stored with unit stride along the
 * keys (every mask but a broadcast one) is read as a row, so the loop
 * vectorises; the max in eight lanes, which a single running max does not
 * (each compare waits on the one before). */
static float scale_mask(const ts_attn_geom *g, float *restrict s, const int32_t *restrict m, int64_t end, int64_t j0, int64_t n) {
    int64_t live = end - j0 < n ? end - j0 : n, j = 0;
    float sc = g->scale;
    if (g->ms[3] == 1) {
        const int32_t *restrict mj = m + j0;
        for (; j < live; j++) s[j] = mj[j] ? -INFINITY : s[j] * sc;
    } else {
        for (; j < live; j++) s[j] = m[(j0 + j) * g->ms[3]] ? -INFINITY : s[j] * sc;
    }
    for (; j < n; j++) s[j] = -INFINITY;
    float acc[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    for (j = 0; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++) acc[l] = s[j + l] > acc[l] ? s[j + l] : acc[l];
    float mx = -INFINITY;
    for (int l = 0; l < 8; l++) mx = acc[l] > mx ? acc[l] : mx;
    for (; j < n; j++) mx = s[j] > mx ? s[j] : mx;
    return mx;
}

/* s[j] = e^(s[j] - m) for the n entries; returns their sum (eight lanes) */
static float exp_sum(float *restrict s, int64_t n, float m) {
    for (int64_t j = 0; j < n; j++) s[j] = ts_vexp(s[j] - m);
    float acc[8] = {0};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++) acc[l] += s[j + l];
    float t = 0.0f;
    for (int l = 0; l < 8; l++) t += acc[l];
    for (; j < n; j++) t += s[j];
    return t;
}

/* The key ends of a group of ATT_TILE query rows (two blocks): what end
 * holds, the mask rows it was computed from (their first row and count).
 * A mask broadcast over the batch and heads (a causal one) gives every
 * pair the same rows, so a slot computes them once rather than once a
 * pair. */
typedef struct ends_held {
    const int32_t *rows;
    int64_t n;
} ends_held;

/* The key ends of the block at query i0 of pair bh: those of its group
 * of ATT_TILE queries (computed into end when not held), from the
 * block's first row. */
static int32_t *group_ends(const ts_attn_geom *g, int64_t b, int64_t h, int64_t i0, int32_t *end, ends_held *held) {
    int64_t first = i0 / ATT_TILE * ATT_TILE, n = g->T - first < ATT_TILE ? g->T - first : ATT_TILE;
    const int32_t *rows = mask_row(g, b, h, first);
    if (held->rows != rows || held->n != n) {
        for (int64_t i = 0; i < n; i++) end[i] = (int32_t)row_end(g, mask_row(g, b, h, first + i));
        *held = (ends_held){rows, n};
    }
    return end + (i0 - first);
}

/* The probabilities of the block's qb rows at query i0 of pair (b, h)
 * against tile j0 (n keys) computed again into t (rows ld apart) from
 * the rows' log-sum-exps lse[0..qb), through kt (times_tile_t's): what
 * the backward reads, and the twin's summary of a row over several
 * tiles. A row whose log-sum-exp is +inf (every key masked) gets zeros. */
static void probs_again(const ts_attn_geom *g, float *t, int64_t ld, float *kt, const float *qi, const float *k, int64_t b, int64_t h,
                        int64_t i0, int64_t qb, const int32_t *e, const float *lse, int64_t j0, int64_t n) {
    times_tile_t(qb, n, g->D, qi, k + j0 * g->D, kt, t, ld);
    for (int64_t i = 0; i < qb; i++) {
        float *p = t + i * ld, l = lse[i];
        scale_mask(g, p, mask_row(g, b, h, i0 + i), e[i], j0, n);
        for (int64_t j = 0; j < n; j++) p[j] = ts_vexp(p[j] - l);
    }
}

/* ---- the twin's summaries (ts_att_sums): the pass's own values where it
 * has them (a tile's raw scores, its masked scaled ones, its
 * probabilities once a row's sum is known, the output rows), the rest
 * computed for them alone: the raw scores of keys past a block's last
 * (which the pass skips), the probabilities again where a row spans
 * several tiles (as the backward computes them). A masked key is -inf in
 * the pass and `fill` in the twin; the keys the pass skips are masked
 * keys, their probabilities 0 (1 / S in a row whose keys are all masked:
 * its softmax over one value). */

/* rows of n values, ld apart, into a's sums: in one call, through the
 * room `tmp` where they lie apart (a call's last few values go one by
 * one: rows of 32 so are mostly that) */
static void rows_sums(ts_stats_sums *a, const float *x, int64_t rows, int64_t n, int64_t ld, float *tmp) {
    if (n != ld && rows > 1) {
        for (int64_t i = 0; i < rows; i++) memcpy(tmp + i * n, x + i * ld, (size_t)n * sizeof *x);
        x = tmp;
    }
    ts_stats_sums_add(a, x, rows * n);
}

/* keys of the row's tile j0 (n of them) that the mask leaves out: those
 * from its end on, and those masked before it */
static int64_t masked_keys(const ts_attn_geom *g, const int32_t *m, int64_t end, int64_t j0, int64_t n) {
    int64_t live = end - j0 < n ? end - j0 : n, k = n - (live > 0 ? live : 0);
    for (int64_t j = 0; j < live; j++) k += m[(j0 + j) * g->ms[3]] != 0;
    return k;
}

/* the block's masked scaled scores of tile j0 (n keys, -inf where masked)
 * into the sums, the masked ones as the twin's fill */
static void masked_sums(const att_job *a, ts_stats_sums *ms, const float *sc, float *tmp, int64_t b, int64_t h, int64_t i0, int64_t qb,
                        const int32_t *e, int64_t j0, int64_t n) {
    const ts_attn_geom *g = a->g;
    rows_sums(ms, sc, qb, n, ATT_TILE, tmp);
    int64_t k = 0;
    for (int64_t i = 0; i < qb; i++) k += masked_keys(g, mask_row(g, b, h, i0 + i), e[i], j0, n);
    ms->neg_infs -= k, ms->count -= k;
    ts_stats_sums_repeat(ms, a->sums->fill, k);
}

/* the raw scores of the block's keys [from, S) (past its last) into the
 * sums, through the slot's room x (and kt, times_tile_t's) */
static void raw_sums_past(const att_job *a, ts_stats_sums *rs, float *x, float *kt, const float *qi, const float *k, int64_t qb, int64_t from) {
    const ts_attn_geom *g = a->g;
    for (int64_t j0 = from; j0 < g->S; j0 += ATT_TILE) {
        int64_t n = g->S - j0 < ATT_TILE ? g->S - j0 : ATT_TILE;
        times_tile_t(qb, n, g->D, qi, k + j0 * g->D, kt, x, n);
        ts_stats_sums_add(rs, x, qb * n);
    }
}

/* The block's probabilities into the sums, by way of the room x: p holds
 * a single tile's e^(s - max) (n keys; a row all masked: zeros), whose
 * sums `sum` are known; several tiles (p NULL) are computed again from
 * the rows' log-sum-exps. */
static void prob_sums(const att_job *a, ts_stats_sums *ps, float *p, const float *sum, float *x, float *kt, const float *qi, const float *k,
                      int64_t b, int64_t h, int64_t i0, int64_t qb, const int32_t *e, const float *lse, int64_t last) {
    const ts_attn_geom *g = a->g;
    float even = 1.0f / (float)g->S; /* a row whose keys are all masked */
    int64_t full = 0;
    for (int64_t i = 0; i < qb; i++) full += lse[i] == INFINITY;
    for (int64_t j0 = 0; j0 < last; j0 += ATT_TILE) {
        int64_t n = last - j0 < ATT_TILE ? last - j0 : ATT_TILE; /* rows n apart in x */
        if (!p) probs_again(g, x, n, kt, qi, k, b, h, i0, qb, e, lse, j0, n);
        for (int64_t i = 0; i < qb; i++) {
            float *r = x + i * n, inv = p && sum[i] > 0.0f ? 1.0f / sum[i] : 0.0f;
            const float *pi = p ? p + i * ATT_TILE : NULL;
            if (lse[i] == INFINITY)
                for (int64_t j = 0; j < n; j++) r[j] = even;
            else if (p)
                for (int64_t j = 0; j < n; j++) r[j] = pi[j] * inv;
        }
        ts_stats_sums_add(ps, x, qb * n);
    }
    ts_stats_sums_repeat(ps, 0.0f, (qb - full) * (g->S - last));
    ts_stats_sums_repeat(ps, even, full * (g->S - last));
}

static void fwd_pair(const att_job *a, float *ws, int64_t bh, ends_held *held) {
    const ts_attn_geom *g = a->g;
    int64_t b = bh / g->H, h = bh % g->H, T = g->T, S = g->S, D = g->D, Dv = g->Dv, kh = b * g->Hk + h / (g->H / g->Hk);
    const float *q = a->q + bh * T * D, *k = a->k + kh * S * D, *v = a->v + kh * S * Dv;
    float *out = a->out + bh * T * Dv, *lse = a->lse + bh * T;
    float *sc = ws, *room = sc + ATT_TILE * ATT_TILE, *mrow = sc + 2 * ATT_TILE * ATT_TILE, *sum = mrow + ATT_TILE;
    int32_t *end = (int32_t *)(void *)(sum + 2 * ATT_TILE);
    float *kt = ws + 2 * ATT_TILE * ATT_TILE + 4 * ATT_TILE;
    unsigned want = a->sums ? a->sums->want : 0;
    ts_stats_sums *tw = a->sums ? a->sums->pairs + bh * TS_ATT_ROLES : NULL;
    for (int64_t i0 = 0; i0 < T; i0 += ATT_QB) {
        int64_t qb = T - i0 < ATT_QB ? T - i0 : ATT_QB, last = 0;
        const int32_t *e = group_ends(g, b, h, i0, end, held);
        for (int64_t i = 0; i < qb; i++) last = e[i] > last ? e[i] : last;
        float *ob = out + i0 * Dv, mx[ATT_QB];
        for (int64_t i = 0; i < qb; i++) mrow[i] = -INFINITY, sum[i] = 0.0f;
        memset(ob, 0, (size_t)(qb * Dv) * sizeof *ob);
        for (int64_t j0 = 0; j0 < last; j0 += ATT_TILE) {
            int64_t n = last - j0 < ATT_TILE ? last - j0 : ATT_TILE; /* the keys a row of the block sees */
            times_tile_t(qb, n, D, q + i0 * D, k + j0 * D, kt, sc, ATT_TILE);
            if (want & 1u << TS_ATT_RAW) rows_sums(&tw[TS_ATT_RAW], sc, qb, n, ATT_TILE, room);
            for (int64_t i = 0; i < qb; i++) mx[i] = scale_mask(g, sc + i * ATT_TILE, mask_row(g, b, h, i0 + i), e[i], j0, n);
            if (want & 1u << TS_ATT_MASKED) masked_sums(a, &tw[TS_ATT_MASKED], sc, room, b, h, i0, qb, e, j0, n);
            for (int64_t i = 0; i < qb; i++) {
                float *s = sc + i * ATT_TILE, *oi = ob + i * Dv;
                if (mx[i] == -INFINITY) { /* every key of the tile masked: nothing from it */
                    memset(s, 0, (size_t)n * sizeof *s);
                    continue;
                }
                if (mx[i] > mrow[i]) { /* a larger max: what the row holds is rescaled */
                    float c = ts_vexp(mrow[i] - mx[i]);
                    sum[i] *= c;
                    for (int64_t d = 0; d < Dv; d++) oi[d] *= c;
                    mrow[i] = mx[i];
                }
                sum[i] += exp_sum(s, n, mrow[i]);
            }
            ts_gemm_serial(false, false, qb, Dv, n, sc, ATT_TILE, v + j0 * Dv, Dv, 1.0f, ob, Dv);
        }
        for (int64_t i = 0; i < qb; i++) {
            float *oi = ob + i * Dv;
            if (sum[i] > 0.0f) {
                float inv = 1.0f / sum[i];
                for (int64_t d = 0; d < Dv; d++) oi[d] *= inv;
                lse[i0 + i] = mrow[i] + logf(sum[i]);
                continue;
            }
            /* every key masked: the mean of v */
            for (int64_t j = 0; j < S; j++)
                for (int64_t d = 0; d < Dv; d++) oi[d] += v[j * Dv + d];
            for (int64_t d = 0; d < Dv; d++) oi[d] /= (float)S;
            lse[i0 + i] = INFINITY;
        }
        if (!want) continue;
        if (want & 1u << TS_ATT_RAW && last < S) raw_sums_past(a, &tw[TS_ATT_RAW], room, kt, q + i0 * D, k, qb, last);
        if (want & 1u << TS_ATT_MASKED) ts_stats_sums_repeat(&tw[TS_ATT_MASKED], a->sums->fill, qb * (S - last));
        if (want & 1u << TS_ATT_PROB)
            prob_sums(a, &tw[TS_ATT_PROB], last <= ATT_TILE ? sc : NULL, sum, room, kt, q + i0 * D, k, b, h, i0, qb, e, lse + i0, last);
        if (want & 1u << TS_ATT_OUT) ts_stats_sums_add(&tw[TS_ATT_OUT], ob, qb * Dv);
    }
}

static void bwd_pair(const att_job *a, float *ws, int64_t bh, ends_held *held) {
    const ts_attn_geom *g = a->g;
    int64_t b = bh / g->H, h = bh % g->H, T = g->T, S = g->S, D = g->D, Dv = g->Dv, kh = b * g->Hk + h / (g->H / g->Hk);
    const float *q = a->q + bh * T * D, *k = a->k + kh * S * D, *v = a->v + kh * S * Dv;
    const float *o = a->o + bh * T * Dv, *dout = a->dout + bh * T * Dv, *lse = a->lse_in + bh * T;
    float *dq = a->dq ? a->dq + bh * T * D : NULL, *dk = a->dk ? a->dk + kh * S * D : NULL, *dv = a->dv ? a->dv + kh * S * Dv : NULL;
    bool first = h % (g->H / g->Hk) == 0; /* the group's first query head: dk and dv start here */
    float *pt = ws, *ds = pt + ATT_TILE * ATT_TILE, *dd = ds + ATT_TILE * ATT_TILE;
    int32_t *end = (int32_t *)(void *)(dd + 3 * ATT_TILE);
    float *tt = ws + 2 * ATT_TILE * ATT_TILE + 4 * ATT_TILE; /* a tile of keys or values transposed */
    /* the first writer of a gradient clears it here, while the pair's
     * slice is about to be in cache anyway, rather than in a pass before */
    if (dq && (a->store & 1u)) memset(dq, 0, (size_t)(T * D) * sizeof *dq);
    if (dk && first && (a->store & 2u)) memset(dk, 0, (size_t)(S * D) * sizeof *dk);
    if (dv && first && (a->store & 4u)) memset(dv, 0, (size_t)(S * Dv) * sizeof *dv);
    for (int64_t i0 = 0; i0 < T; i0 += ATT_QB) {
        int64_t qb = T - i0 < ATT_QB ? T - i0 : ATT_QB;
        int32_t *e = group_ends(g, b, h, i0, end, held);
        const float *gb = dout + i0 * Dv;
        int64_t last = 0;
        for (int64_t i = 0; i < qb; i++) {
            const float *oi = o + (i0 + i) * Dv, *gi = gb + i * Dv;
            dd[i] = (float)ts_lane_sum(gi, 0.0f, oi, 0.0f, Dv);
            if (lse[i0 + i] == INFINITY) { /* every key masked: the mean's gradient, to v alone */
                e[i] = 0;
                held->rows = NULL; /* end no longer the mask's alone */
                for (int64_t j = 0; dv && j < S; j++)
                    for (int64_t d = 0; d < Dv; d++) dv[j * Dv + d] += gi[d] / (float)S;
            }
            last = e[i] > last ? e[i] : last;
        }
        for (int64_t j0 = 0; j0 < last; j0 += ATT_TILE) {
            int64_t n = last - j0 < ATT_TILE ? last - j0 : ATT_TILE; /* the keys a row of the block sees */
            probs_again(g, pt, ATT_TILE, tt, q + i0 * D, k, b, h, i0, qb, e, lse + i0, j0, n);
            if (dv) ts_gemm_serial(true, false, n, Dv, qb, pt, ATT_TILE, gb, Dv, 1.0f, dv + j0 * Dv, Dv);
            times_tile_t(qb, n, Dv, gb, v + j0 * Dv, tt, ds, ATT_TILE);
            for (int64_t i = 0; i < qb; i++) { /* the scores' gradient, times the scale */
                const float *p = pt + i * ATT_TILE;
                float *d = ds + i * ATT_TILE, di = dd[i];
                for (int64_t j = 0; j < n; j++) d[j] = p[j] * (d[j] - di) * g->scale;
            }
            if (dq) ts_gemm_serial(false, false, qb, D, n, ds, ATT_TILE, k + j0 * D, D, 1.0f, dq + i0 * D, D);
            if (dk) ts_gemm_serial(true, false, n, D, qb, ds, ATT_TILE, q + i0 * D, D, 1.0f, dk + j0 * D, D);
        }
    }
}

/* ------------------------------------------------ the 16-bit copies
 *
 * Under a model's precision the twin's products read 16-bit copies of q,
 * k, v and the probabilities (ts_attention_copies: Cast nodes, rounded to
 * nearest even). The pass then reads the values as the twin's products
 * do: q, k and v rounded onto the copies' grid, and the probabilities
 * rounded once each row is normalised, which the flash recurrence's
 * running max does not give; so a block of queries takes every key its
 * rows see at once (a slot holds the block's rows of probabilities), the
 * products in f32 on the rounded values (products of 16-bit numbers are
 * exact in f32: the twin's to the order of the f32 sums). The backward
 * follows the twin's gradients: the copies' gradients rounded once
 * complete (k's and v's summed over the group first), the softmax's with
 * the f32 probabilities and the rounded copy's gradient, and where the
 * twin's batched products run on the bf16 kernel (bf16_gemm.c: both
 * operands bf16 copies, none broadcast) the output gradient each product
 * reads rounded to bf16, dO for P v, dS for q k^T. There (every copy
 * bf16, the kernel's route) the pass's products run on the kernel too,
 * its operands given in f32 and rounded to bf16 as the kernel packs them:
 * no rounding pass over q, k, v, the probabilities, dO or dS. */

/* x's n values rounded onto the copies' grid, into dst (may be x) */
static void to_grid(const ts_attn_geom *g, float *dst, const float *x, int64_t n) {
    ts_cpu_round_half_pool(NULL, g->copy_dtype, dst, x, n, NULL);
}

/* rows of n values, ld apart, rounded in place */
static void rows_to_grid(const ts_attn_geom *g, float *x, int64_t rows, int64_t n, int64_t ld) {
    if (n == ld) to_grid(g, x, x, rows * n);
    else
        for (int64_t i = 0; i < rows; i++) to_grid(g, x + i * ld, x + i * ld, n);
}

/* What the pass reads of x (n values): its copy (rounded into dst) where
 * the twin reads one (copy bit `bit`), else x itself */
static const float *read_as(const ts_attn_geom *g, unsigned bit, float *dst, const float *x, int64_t n) {
    if (!(g->copies & bit)) return x;
    to_grid(g, dst, x, n);
    return dst;
}

/* C (M x N, ldc) = beta C + op(A) op(B), op(A) M x K: on the kernel
 * (the operands rounded to bf16 as it packs them, into the slot's packed
 * room) or the f32 GEMM (on operands the caller rounded) */
static void product(const att_job *a, const copy_slot *c, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                    const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (!a->kernel) {
        ts_gemm_serial(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    /* the kernel's operands as (row of C, summed index) */
    ts_bf16_mat x = {A, true, ta ? 1 : lda, ta ? lda : 1}, y = {B, true, tb ? ldb : 1, tb ? 1 : ldb};
    ts_bf16k_gemm_serial(M, N, K, x, y, beta, C, ldc, c->packed);
}

/* the probability of each key of a row whose keys are all masked (the
 * twin's softmax over one value), as its product reads it */
static float mean_weight(const ts_attn_geom *g) {
    float w = 1.0f / (float)g->S;
    if (g->copies & TS_ATT_COPY_P) to_grid(g, &w, &w, 1);
    return w;
}

/* a (batch, head) pair's slot and its group's k and v as the products
 * read them: the copies the kernel's packing does not round, rounded into
 * the slot */
typedef struct pair_kv {
    copy_slot c;
    unsigned own; /* the copies rounded here rather than by the kernel's packing */
    const float *k, *v;
} pair_kv;

static pair_kv pair_begin(const att_job *a, float *ws, int64_t kh) {
    const ts_attn_geom *g = a->g;
    size_t floats;
    pair_kv r = {copy_layout(g, ws, &floats), a->kernel ? 0 : g->copies, a->k + kh * g->S * g->D, a->v + kh * g->S * g->Dv};
    if (r.own & TS_ATT_COPY_K) r.k = read_as(g, TS_ATT_COPY_K, r.c.k, r.k, g->S * g->D);
    if (r.own & TS_ATT_COPY_V) r.v = read_as(g, TS_ATT_COPY_V, r.c.v, r.v, g->S * g->Dv);
    return r;
}

static void fwd_pair_copies(const att_job *a, float *ws, int64_t bh, ends_held *held) {
    const ts_attn_geom *g = a->g;
    int64_t b = bh / g->H, h = bh % g->H, T = g->T, S = g->S, D = g->D, Dv = g->Dv, kh = b * g->Hk + h / (g->H / g->Hk);
    pair_kv pk = pair_begin(a, ws, kh);
    copy_slot c = pk.c;
    unsigned own = pk.own;
    const float *k = pk.k, *v = pk.v;
    const float *vm = NULL; /* v as its copy, for rows whose keys are all masked */
    float *out = a->out + bh * T * Dv, *lse = a->lse + bh * T, w = mean_weight(g);
    int32_t *end = (int32_t *)(void *)c.rows;
    for (int64_t i0 = 0; i0 < T; i0 += COPY_QB) {
        int64_t qb = T - i0 < COPY_QB ? T - i0 : COPY_QB, last = 0;
        const int32_t *e = group_ends(g, b, h, i0, end, held);
        for (int64_t i = 0; i < qb; i++) last = e[i] > last ? e[i] : last;
        int64_t ld = last; /* the block's rows of probabilities, packed */
        float *ob = out + i0 * Dv;
        const float *q = a->q + (bh * T + i0) * D;
        if (own & TS_ATT_COPY_Q) q = read_as(g, TS_ATT_COPY_Q, c.q, q, qb * D);
        if (last) product(a, &c, false, true, qb, last, D, q, D, k, D, 0.0f, c.p, ld);
        for (int64_t i = 0; i < qb; i++) { /* the row's softmax, as the twin's: e^(s - max) times 1 / sum */
            int64_t n = e[i]; /* the keys past the row's end: none of its probability */
            float *p = c.p + i * ld, mx = n ? scale_mask(g, p, mask_row(g, b, h, i0 + i), n, 0, n) : -INFINITY;
            memset(p + n, 0, (size_t)(last - n) * sizeof *p);
            if (mx == -INFINITY) {
                memset(p, 0, (size_t)n * sizeof *p);
                lse[i0 + i] = INFINITY;
                continue;
            }
            float sum = exp_sum(p, n, mx), inv = 1.0f / sum;
            for (int64_t j = 0; j < n; j++) p[j] *= inv;
            lse[i0 + i] = mx + logf(sum);
        }
        if (own & TS_ATT_COPY_P) rows_to_grid(g, c.p, qb, last, ld);
        if (last) product(a, &c, false, false, qb, Dv, last, c.p, ld, v, Dv, 0.0f, ob, Dv);
        else memset(ob, 0, (size_t)(qb * Dv) * sizeof *ob);
        for (int64_t i = 0; i < qb; i++) {
            if (lse[i0 + i] != INFINITY) continue;
            if (!vm) vm = (g->copies & TS_ATT_COPY_V) && v != c.v ? read_as(g, TS_ATT_COPY_V, c.v, v, S * Dv) : v;
            float *oi = ob + i * Dv; /* every key masked: v averaged with the twin's weight */
            for (int64_t j = 0; j < S; j++)
                for (int64_t d = 0; d < Dv; d++) oi[d] += vm[j * Dv + d];
            for (int64_t d = 0; d < Dv; d++) oi[d] *= w;
        }
    }
}

/* dst (n values) = src, or += src */
static void put(float *dst, const float *src, int64_t n, bool store) {
    if (store) memcpy(dst, src, (size_t)n * sizeof *dst);
    else
        for (int64_t i = 0; i < n; i++) dst[i] += src[i];
}

static void bwd_pair_copies(const att_job *a, float *ws, int64_t bh, ends_held *held) {
    const ts_attn_geom *g = a->g;
    int64_t b = bh / g->H, h = bh % g->H, T = g->T, S = g->S, D = g->D, Dv = g->Dv, per = g->H / g->Hk, kh = b * g->Hk + h / per;
    pair_kv pk = pair_begin(a, ws, kh);
    copy_slot c = pk.c;
    unsigned own = pk.own;
    const float *k = pk.k, *v = pk.v;
    const float *dout = a->dout + bh * T * Dv, *lse = a->lse_in + bh * T;
    float *dq = a->dq ? a->dq + bh * T * D : NULL, *dk = a->dk ? a->dk + kh * S * D : NULL, *dv = a->dv ? a->dv + kh * S * Dv : NULL;
    /* a copy's gradient is summed over the group's heads in the slot,
     * rounded, then given to k's or v's; without a copy, into it directly */
    float *dks = dk && (g->copies & TS_ATT_COPY_K) ? c.dk : dk, *dvs = dv && (g->copies & TS_ATT_COPY_V) ? c.dv : dv;
    bool first = h % per == 0, final = h % per == per - 1;
    if (dq && (a->store & 1u)) memset(dq, 0, (size_t)(T * D) * sizeof *dq);
    if (dks && first && (dks != dk || (a->store & 2u))) memset(dks, 0, (size_t)(S * D) * sizeof *dks);
    if (dvs && first && (dvs != dv || (a->store & 4u))) memset(dvs, 0, (size_t)(S * Dv) * sizeof *dvs);
    float *dd = c.rows, w = mean_weight(g);
    int32_t *end = (int32_t *)(void *)(c.rows + ATT_TILE);
    for (int64_t i0 = 0; i0 < T; i0 += COPY_QB) {
        int64_t qb = T - i0 < COPY_QB ? T - i0 : COPY_QB, last = 0;
        int32_t *e = group_ends(g, b, h, i0, end, held);
        const float *gb = dout + i0 * Dv;
        if (a->dc_pv && !a->kernel) { /* dO as P v's gradients read it */
            to_grid(g, c.dout, gb, qb * Dv);
            gb = c.dout;
        }
        for (int64_t i = 0; i < qb; i++) {
            if (lse[i0 + i] == INFINITY) { /* every key masked: the mean's gradient, to v alone */
                e[i] = 0;
                held->rows = NULL; /* end no longer the mask's alone */
                const float *gi = gb + i * Dv; /* rounded above, or here where the kernel would round it */
                if (a->kernel) {
                    to_grid(g, c.dout + i * Dv, gi, Dv);
                    gi = c.dout + i * Dv;
                }
                for (int64_t j = 0; dvs && j < S; j++)
                    for (int64_t d = 0; d < Dv; d++) dvs[j * Dv + d] += w * gi[d];
            }
            last = e[i] > last ? e[i] : last;
        }
        if (!last) continue;
        int64_t ld = last; /* the block's rows of probabilities and their gradients, packed */
        const float *q = a->q + (bh * T + i0) * D, *p16 = c.p;
        if (own & TS_ATT_COPY_Q) q = read_as(g, TS_ATT_COPY_Q, c.q, q, qb * D);
        product(a, &c, false, true, qb, last, D, q, D, k, D, 0.0f, c.p, ld);
        for (int64_t i = 0; i < qb; i++) { /* the probabilities, again (f32), and their copy */
            int64_t n = e[i];
            float *p = c.p + i * ld, l = lse[i0 + i];
            scale_mask(g, p, mask_row(g, b, h, i0 + i), n, 0, n);
            for (int64_t j = 0; j < n; j++) p[j] = ts_vexp(p[j] - l);
            memset(p + n, 0, (size_t)(last - n) * sizeof *p);
            if (own & TS_ATT_COPY_P) to_grid(g, c.p16 + i * ld, p, last);
        }
        if (own & TS_ATT_COPY_P) p16 = c.p16;
        if (dvs) product(a, &c, true, false, last, Dv, qb, p16, ld, gb, Dv, 1.0f, dvs, Dv);
        product(a, &c, false, true, qb, last, Dv, gb, Dv, v, Dv, 0.0f, c.dp, ld);
        if (g->copies & TS_ATT_COPY_P) rows_to_grid(g, c.dp, qb, last, ld); /* the copy's gradient, complete */
        for (int64_t i = 0; i < qb; i++) { /* the softmax's gradient, times the scale */
            const float *p = c.p + i * ld;
            float *d = c.dp + i * ld;
            dd[i] = (float)ts_lane_sum(d, 0.0f, p, 0.0f, last);
            for (int64_t j = 0; j < last; j++) d[j] = p[j] * (d[j] - dd[i]) * g->scale;
        }
        if (a->dc_qk && !a->kernel) rows_to_grid(g, c.dp, qb, last, ld); /* dS as q k^T's gradients read it */
        if (dq && (g->copies & TS_ATT_COPY_Q)) {
            product(a, &c, false, false, qb, D, last, c.dp, ld, k, D, 0.0f, c.dq, D);
            to_grid(g, c.dq, c.dq, qb * D);
            put(dq + i0 * D, c.dq, qb * D, false);
        } else if (dq) {
            product(a, &c, false, false, qb, D, last, c.dp, ld, k, D, 1.0f, dq + i0 * D, D);
        }
        if (dks) product(a, &c, true, false, last, D, qb, c.dp, ld, q, D, 1.0f, dks, D);
    }
    if (!final) return;
    if (dks && dks != dk) {
        to_grid(g, dks, dks, S * D);
        put(dk, dks, S * D, a->store & 2u);
    }
    if (dvs && dvs != dv) {
        to_grid(g, dvs, dvs, S * Dv);
        put(dv, dvs, S * Dv, a->store & 4u);
    }
}

static void fwd_slots(void *ctx, int64_t begin, int64_t end) {
    const att_job *a = ctx;
    int64_t groups = a->g->B * a->g->Hk, per = a->g->H / a->g->Hk;
    for (int64_t slot = begin; slot < end; slot++) {
        ends_held held = {NULL, 0};
        for (int64_t p = groups * slot / a->slots * per; p < groups * (slot + 1) / a->slots * per; p++)
            (a->g->copies ? fwd_pair_copies : fwd_pair)(a, a->ws + (size_t)slot * slot_floats(a->g), p, &held);
    }
}

static void bwd_slots(void *ctx, int64_t begin, int64_t end) {
    const att_job *a = ctx;
    int64_t groups = a->g->B * a->g->Hk, per = a->g->H / a->g->Hk;
    for (int64_t slot = begin; slot < end; slot++) {
        ends_held held = {NULL, 0};
        for (int64_t p = groups * slot / a->slots * per; p < groups * (slot + 1) / a->slots * per; p++)
            (a->g->copies ? bwd_pair_copies : bwd_pair)(a, a->ws + (size_t)slot * slot_floats(a->g), p, &held);
    }
}

/* Where the twin's batched products run on the bf16 kernel, which rounds
 * the output gradient it reads (bf16_gemm.c: bf16 copies both, none
 * broadcast, the kernel's route); with every copy so, the pass's products
 * on the kernel too. */
static void copies_route(att_job *a) {
    const ts_attn_geom *g = a->g;
    bool kernel = g->copies && g->copy_dtype == TS_BF16 && g->H == g->Hk && ts_cpu_bf16_route() == TS_BF16_ROUTE_AVX512BF16;
    unsigned qk = TS_ATT_COPY_Q | TS_ATT_COPY_K, pv = TS_ATT_COPY_P | TS_ATT_COPY_V;
    a->dc_qk = kernel && (g->copies & qk) == qk;
    a->dc_pv = kernel && (g->copies & pv) == pv;
    a->kernel = a->dc_qk && a->dc_pv;
}

void ts_attention_forward(ts_pool *p, float *ws, float *out, float *lse, const float *q, const float *k, const float *v, const ts_attn_geom *g,
                          const ts_att_sums *sums) {
    att_job a = {.g = g, .sums = g->copies ? NULL : sums, .slots = slots(g, ts_pool_threads(p)), .ws = ws, .out = out, .lse = lse, .q = q, .k = k, .v = v};
    copies_route(&a);
    ts_gemm_serial_begin();
    ts_pool_for(p, a.slots, 1, fwd_slots, &a);
}

void ts_attention_backward(ts_pool *p, float *ws, float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                           const float *v, const float *out, const float *lse, const ts_attn_geom *g, unsigned store) {
    att_job a = {.g = g, .slots = slots(g, ts_pool_threads(p)), .ws = ws, .lse_in = lse, .dq = dq, .dk = dk, .dv = dv, .store = store,
                 .q = q, .k = k, .v = v, .o = out, .dout = dout};
    copies_route(&a);
    ts_gemm_serial_begin();
    ts_pool_for(p, a.slots, 1, bwd_slots, &a);
}
