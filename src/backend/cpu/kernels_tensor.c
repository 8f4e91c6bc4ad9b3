/* kernels_tensor.c -- the math of the tensor and transformer ops. Broadcast
 * and layout kernels walk an n-d view whose adjacent dims are merged when
 * every operand's layout allows, so the inner loop is as long as possible;
 * the common contiguous cases (bias add, rows) have their own loops. */
#include "backend/cpu/kernels_tensor.h"

#include "backend/cpu/gemm.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/lane_sum.h"
#include "backend/cpu/vk.h"
#include "backend/vmath.h"
#include "backend/ew_math.h"
#include "backend/pad_index.h"

#include <math.h>
#include <string.h>

#define GRAIN 16384
#define NOPS 3

/* ------------------------------------------------------- broadcast views */

/* The output is contiguous over d[]; operand k is read at stride s[k][i]
 * along dim i (0 where it is broadcast). */
typedef struct bview {
    int nd, nops;
    int64_t d[TS_MAX_DIMS];
    int64_t s[NOPS][TS_MAX_DIMS];
} bview;

/* From the output dims and each operand's strides per output dim: drops
 * dims of size 1 and merges a dim into the previous one when every operand
 * steps through both as through one. */
static void bview_make(bview *v, const ts_shape *so, int nops, int64_t st[NOPS][TS_MAX_DIMS]) {
    v->nd = 0;
    v->nops = nops;
    for (int i = 0; i < so->ndim; i++) {
        if (so->d[i] == 1) continue;
        bool merge = v->nd > 0;
        for (int k = 0; k < nops && merge; k++) merge = v->s[k][v->nd - 1] == st[k][i] * so->d[i];
        if (merge) {
            v->d[v->nd - 1] *= so->d[i];
            for (int k = 0; k < nops; k++) v->s[k][v->nd - 1] = st[k][i];
        } else {
            v->d[v->nd] = so->d[i];
            for (int k = 0; k < nops; k++) v->s[k][v->nd] = st[k][i];
            v->nd++;
        }
    }
    if (v->nd == 0) {
        v->nd = 1;
        v->d[0] = 1;
        for (int k = 0; k < nops; k++) v->s[k][0] = 0;
    }
}

/* Operands broadcast to `so` by numpy's rules (aligned on the right). */
static void bview_broadcast(bview *v, const ts_shape *so, int nops, const ts_shape *const *ops) {
    int64_t st[NOPS][TS_MAX_DIMS];
    for (int k = 0; k < nops; k++) {
        int64_t stride = 1;
        for (int i = so->ndim - 1; i >= 0; i--) {
            int j = i - (so->ndim - ops[k]->ndim);
            if (j < 0 || ops[k]->d[j] == 1) {
                st[k][i] = 0;
            } else {
                st[k][i] = stride;
                stride *= ops[k]->d[j];
            }
        }
    }
    bview_make(v, so, nops, st);
}

typedef void (*row_fn)(void *ctx, int64_t o, const int64_t *off, const int64_t *st, int64_t n);

/* Calls row() for every innermost row of the view whose outermost index is
 * in [b0, e0), in output order. */
static void bview_rows_range(const bview *v, int64_t b0, int64_t e0, row_fn row, void *ctx) {
    int nd = v->nd;
    int64_t n = v->d[nd - 1], per0 = 1, rows = 1, o = 0, st[NOPS] = {0}, off[NOPS] = {0}, idx[TS_MAX_DIMS] = {0};
    for (int k = 0; k < v->nops; k++) st[k] = v->s[k][nd - 1];
    for (int i = 1; i < nd - 1; i++) per0 *= v->d[i]; /* rows per outermost index */
    if (nd > 1) {
        idx[0] = b0;
        for (int k = 0; k < v->nops; k++) off[k] = b0 * v->s[k][0];
        rows = per0 * (e0 - b0);
        o = b0 * per0 * n;
    }
    for (int64_t r = 0; r < rows; r++, o += n) {
        row(ctx, o, off, st, n);
        for (int i = nd - 2; i >= 0; i--) {
            idx[i]++;
            for (int k = 0; k < v->nops; k++) off[k] += v->s[k][i];
            if (idx[i] < v->d[i]) break;
            for (int k = 0; k < v->nops; k++) off[k] -= v->s[k][i] * v->d[i];
            idx[i] = 0;
        }
    }
}

/* Calls row() for every innermost row of the view, in output order. */
static void bview_rows(const bview *v, row_fn row, void *ctx) { bview_rows_range(v, 0, v->nd > 1 ? v->d[0] : 1, row, ctx); }

typedef struct rows_job {
    const bview *v;
    row_fn row;
    void *ctx;
} rows_job;

static void rows_job_slice(void *vctx, int64_t begin, int64_t end) {
    const rows_job *j = vctx;
    bview_rows_range(j->v, begin, end, j->row, j->ctx);
}

/* bview_rows with the outermost dim split over the pool: for kernels whose
 * rows write disjoint places (each output or gradient element once) */
static void bview_rows_pool(ts_pool *p, const bview *v, row_fn row, void *ctx) {
    if (v->nd < 2) {
        bview_rows(v, row, ctx);
        return;
    }
    int64_t inner = 1;
    for (int i = 1; i < v->nd; i++) inner *= v->d[i];
    rows_job j = {v, row, ctx};
    ts_pool_for(p, v->d[0], 1 + GRAIN / (inner + 1), rows_job_slice, &j);
}

/* b broadcasts as a suffix of a, which has the output's shape: the fast
 * contiguous kernels of kernels.c apply (a bias add, a scalar). */
static bool suffix_case(const ts_shape *so, const ts_shape *sa, const ts_shape *sb) {
    if (!ts_shape_equal(so, sa)) return false;
    int lead = 0;
    while (lead < sb->ndim && sb->d[lead] == 1) lead++;
    int rest = sb->ndim - lead;
    if (rest > sa->ndim) return false;
    for (int i = 0; i < rest; i++)
        if (sb->d[lead + i] != sa->d[sa->ndim - rest + i]) return false;
    return true;
}

typedef struct bin_ctx {
    int kind;
    float *out, *da, *db;
    const float *a, *b, *dout;
} bin_ctx;

static void bin_fwd_row(void *vctx, int64_t o, const int64_t *off, const int64_t *st, int64_t n) {
    const bin_ctx *c = vctx;
    const float *a = c->a + off[0], *b = c->b + off[1];
    float *y = c->out + o;
    int64_t sa = st[0], sb = st[1];
    if (sa == 1 && sb == 1 && c->kind == TS_BIN_MUL) { /* contiguous rows: a loop that vectorises */
        for (int64_t j = 0; j < n; j++) y[j] = a[j] * b[j];
        return;
    }
    if (sa == 1 && sb == 0 && c->kind == TS_BIN_MUL) {
        for (int64_t j = 0; j < n; j++) y[j] = a[j] * b[0];
        return;
    }
    switch (c->kind) {
    case TS_BIN_ADD: for (int64_t j = 0; j < n; j++) y[j] = a[j * sa] + b[j * sb]; break;
    case TS_BIN_SUB: for (int64_t j = 0; j < n; j++) y[j] = a[j * sa] - b[j * sb]; break;
    case TS_BIN_MUL: for (int64_t j = 0; j < n; j++) y[j] = a[j * sa] * b[j * sb]; break;
    case TS_BIN_DIV: for (int64_t j = 0; j < n; j++) y[j] = a[j * sa] / b[j * sb]; break;
    default: for (int64_t j = 0; j < n; j++) y[j] = ts_ewb_forward(c->kind - TS_BIN_EW, a[j * sa], b[j * sb]); break;
    }
}

/* sum_j d[j] * a[j] (a NULL: sum_j d[j]) in 8 partial sums, which
 * vectorise where one running sum does not */
static float dot_row(const float *restrict d, const float *restrict a, int64_t n) {
    float acc[8] = {0};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; k++) acc[k] += d[j + k] * (a ? a[j + k] : 1.0f);
    float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; j < n; j++) s += d[j] * (a ? a[j] : 1.0f);
    return s;
}

/* Add, Sub and Mul where a's row is contiguous and b's contiguous or one
 * value (x * rstd of an RMSNorm, q * cos of a rotary embedding): loops
 * that vectorise. Returns false for the other rows. */
static bool bin_bwd_row_fast(const bin_ctx *c, int64_t o, const int64_t *off, int64_t sa, int64_t sb, int64_t n) {
    if (sa != 1 || (sb != 0 && sb != 1) || (c->kind != TS_BIN_ADD && c->kind != TS_BIN_SUB && c->kind != TS_BIN_MUL)) return false;
    const float *a = c->a + off[0], *b = c->b + off[1], *d = c->dout + o;
    bool mul = c->kind == TS_BIN_MUL;
    if (c->da) {
        float *da = c->da + off[0];
        if (!mul)
            for (int64_t j = 0; j < n; j++) da[j] += d[j];
        else if (sb == 0)
            for (int64_t j = 0; j < n; j++) da[j] += d[j] * b[0];
        else
            for (int64_t j = 0; j < n; j++) da[j] += d[j] * b[j];
    }
    if (c->db) {
        float *db = c->db + off[1], sign = c->kind == TS_BIN_SUB ? -1.0f : 1.0f;
        if (sb == 0) db[0] += sign * dot_row(d, mul ? a : NULL, n);
        else if (mul)
            for (int64_t j = 0; j < n; j++) db[j] += d[j] * a[j];
        else
            for (int64_t j = 0; j < n; j++) db[j] += sign * d[j];
    }
    return true;
}

static void bin_bwd_row(void *vctx, int64_t o, const int64_t *off, const int64_t *st, int64_t n) {
    const bin_ctx *c = vctx;
    const float *a = c->a + off[0], *b = c->b + off[1], *d = c->dout + o;
    int64_t sa = st[0], sb = st[1];
    if (bin_bwd_row_fast(c, o, off, sa, sb, n)) return;
    if (c->da) {
        float *da = c->da + off[0];
        switch (c->kind) {
        case TS_BIN_ADD:
        case TS_BIN_SUB: for (int64_t j = 0; j < n; j++) da[j * sa] += d[j]; break;
        case TS_BIN_MUL: for (int64_t j = 0; j < n; j++) da[j * sa] += d[j] * b[j * sb]; break;
        case TS_BIN_DIV: for (int64_t j = 0; j < n; j++) da[j * sa] += d[j] / b[j * sb]; break;
        default: for (int64_t j = 0; j < n; j++) da[j * sa] += d[j] * ts_ewb_partial(c->kind - TS_BIN_EW, 0, a[j * sa], b[j * sb]); break;
        }
    }
    if (c->db) {
        float *db = c->db + off[1];
        switch (c->kind) {
        case TS_BIN_ADD: for (int64_t j = 0; j < n; j++) db[j * sb] += d[j]; break;
        case TS_BIN_SUB: for (int64_t j = 0; j < n; j++) db[j * sb] -= d[j]; break;
        case TS_BIN_MUL: for (int64_t j = 0; j < n; j++) db[j * sb] += d[j] * a[j * sa]; break;
        case TS_BIN_DIV:
            for (int64_t j = 0; j < n; j++) {
                float bv = b[j * sb];
                db[j * sb] -= d[j] * a[j * sa] / (bv * bv);
            }
            break;
        default: for (int64_t j = 0; j < n; j++) db[j * sb] += d[j] * ts_ewb_partial(c->kind - TS_BIN_EW, 1, a[j * sa], b[j * sb]); break;
        }
    }
}

void ts_bcast_binary_forward(ts_pool *p, int kind, float *out, const float *a, const float *b, const ts_shape *so,
                             const ts_shape *sa, const ts_shape *sb) {
    if (kind < TS_BIN_EW && suffix_case(so, sa, sb)) {
        ts_binary_forward(p, kind, out, a, b, ts_shape_numel(so), ts_shape_numel(sb));
        return;
    }
    bview v;
    bview_broadcast(&v, so, 2, (const ts_shape *[]){sa, sb});
    bin_ctx c = {.kind = kind, .out = out, .a = a, .b = b};
    bview_rows(&v, bin_fwd_row, &c);
}

void ts_bcast_binary_backward(ts_pool *p, int kind, float *da, float *db, const float *dout, const float *a, const float *b,
                              const ts_shape *so, const ts_shape *sa, const ts_shape *sb, unsigned store) {
    if (kind < TS_BIN_EW && suffix_case(so, sa, sb)) {
        ts_binary_backward_store(p, kind, da, db, dout, a, b, ts_shape_numel(so), ts_shape_numel(sb), store);
        return;
    }
    if (da && (store & 1u)) memset(da, 0, (size_t)ts_shape_numel(sa) * sizeof *da); /* the rows below add */
    if (db && (store & 2u)) memset(db, 0, (size_t)ts_shape_numel(sb) * sizeof *db);
    bview v;
    bview_broadcast(&v, so, 2, (const ts_shape *[]){sa, sb});
    bin_ctx c = {.kind = kind, .da = da, .db = db, .a = a, .b = b, .dout = dout};
    bview_rows(&v, bin_bwd_row, &c);
}

/* ------------------------------------------------------------- elementwise */

typedef struct un_ctx {
    int kind;
    float *out;
    const float *x, *dout;
    float pw, pb;
    bool store; /* the backward stores dx rather than adding to it */
} un_ctx;

/* The unary family of ew_math.h: pw, pb its alpha and beta; the loops are
 * vk.h's, for the CPU at hand. */
static void ewu_fwd_slice(void *vctx, int64_t begin, int64_t end) {
    const un_ctx *c = vctx;
    ts_vk_get()->unary_forward(c->kind, c->out + begin, c->x + begin, c->pw, c->pb, end - begin);
}

static void ewu_bwd_slice(void *vctx, int64_t begin, int64_t end) {
    const un_ctx *c = vctx;
    ts_vk_get()->unary_backward(c->kind, c->out + begin, c->dout + begin, c->x + begin, c->pw, c->pb, end - begin, c->store);
}

void ts_ew_unary_forward(ts_pool *p, int kind, float *out, const float *x, float alpha, float beta, int64_t n) {
    un_ctx c = {.kind = kind, .out = out, .x = x, .pw = alpha, .pb = beta};
    ts_pool_for(p, n, GRAIN, ewu_fwd_slice, &c);
}

typedef struct gate_ctx {
    float *s, *y;
    const float *x, *u;
} gate_ctx;

static void silu_mul_slice(void *vctx, int64_t begin, int64_t end) {
    const gate_ctx *c = vctx;
    ts_vk_get()->silu_mul(c->s ? c->s + begin : NULL, c->y + begin, c->x + begin, c->u + begin, end - begin);
}

void ts_silu_mul_forward(ts_pool *p, float *s, float *y, const float *x, const float *u, int64_t n) {
    gate_ctx c = {.s = s, .y = y, .x = x, .u = u};
    ts_pool_for(p, n, GRAIN, silu_mul_slice, &c);
}

typedef struct gate_bwd_ctx {
    float *dx, *du;
    const float *dy, *u, *s, *x;
    bool plus, store, du_store, du_plus;
} gate_bwd_ctx;

static void silu_mul_bwd_slice(void *vctx, int64_t begin, int64_t end) {
    const gate_bwd_ctx *c = vctx;
    ts_vk_get()->silu_mul_backward(c->dx ? c->dx + begin : NULL, c->du ? c->du + begin : NULL, c->dy + begin, c->u + begin,
                                   c->s ? c->s + begin : NULL, c->x + begin, end - begin, c->plus, c->store, c->du_store, c->du_plus);
}

void ts_silu_mul_backward(ts_pool *p, float *dx, float *du, const float *dy, const float *u, const float *s, const float *x, int64_t n,
                          bool plus, bool store, bool du_store, bool du_plus) {
    gate_bwd_ctx c = {.dx = dx, .du = du, .dy = dy, .u = u, .s = s, .x = x, .plus = plus, .store = store, .du_store = du_store, .du_plus = du_plus};
    ts_pool_for(p, n, GRAIN, silu_mul_bwd_slice, &c);
}

void ts_ew_unary_backward(ts_pool *p, int kind, float *dx, const float *dout, const float *x, float alpha, float beta, int64_t n,
                          bool store) {
    un_ctx c = {.kind = kind, .out = dx, .x = x, .dout = dout, .pw = alpha, .pb = beta, .store = store};
    ts_pool_for(p, n, GRAIN, ewu_bwd_slice, &c);
}

/* --------------------------------------------------------------- embedding */

static int64_t gather_row(int32_t i, int64_t V) { return i < 0 ? i + V : i; }

void ts_gather_forward(float *out, const float *w, const int32_t *idx, int64_t outer, int64_t V, int64_t n, int64_t C) {
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < n; i++) memcpy(out + (o * n + i) * C, w + (o * V + gather_row(idx[i], V)) * C, (size_t)C * sizeof(float));
}

void ts_gather_backward(float *dw, const float *dout, const int32_t *idx, int64_t outer, int64_t V, int64_t n, int64_t C) {
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < n; i++) {
            float *r = dw + (o * V + gather_row(idx[i], V)) * C;
            const float *d = dout + (o * n + i) * C;
            for (int64_t c = 0; c < C; c++) r[c] += d[c];
        }
}

/* One context for the kernels over rows of n (layer norm, softmax): each
 * slice function reads what it needs. */
typedef struct rows_ctx {
    float *out, *aux; /* aux: layer norm's stats or db, softmax's dx */
    const ts_out_act *act; /* layer norm's forward: an op in its output pass, else NULL */
    const float *x, *w, *b, *dout, *y; /* y: softmax's output, layer norm's stats in backward */
    int64_t n, rows;
    float eps;
    bool log;
} rows_ctx;

/* -------------------------------------------------------------- layer norm */

void ts_out_act_apply(const ts_out_act *act, float *o, const float *y, int64_t n) {
    if (act->kind == TS_EWU_NONE) ts_relu_forward(NULL, o, y, n);
    else ts_vk_get()->unary_forward(act->kind, o, y, act->alpha, act->beta, n);
}

static void ln_fwd_slice(void *vctx, int64_t begin, int64_t end) {
    const rows_ctx *c = vctx;
    int64_t D = c->n;
    for (int64_t r = begin; r < end; r++) {
        const float *x = c->x + r * D;
        float *y = c->out + r * D;
        /* the row's sums in eight lanes (ts_lane_sum): a running float sum
         * waited on each add and was most of the kernel's time */
        float mean = (float)(ts_lane_sum(x, 0.0f, NULL, 0.0f, D) / (double)D);
        float v = (float)ts_lane_sum(x, mean, x, mean, D);
        float rstd = 1.0f / sqrtf(v / (float)D + c->eps);
        for (int64_t j = 0; j < D; j++) y[j] = (x[j] - mean) * rstd * c->w[j] + c->b[j];
        if (c->act) ts_out_act_apply(c->act, c->act->out + r * D, y, D);
        c->aux[2 * r] = mean;
        c->aux[2 * r + 1] = rstd;
    }
}

void ts_layer_norm_forward(ts_pool *p, float *y, float *stats, const float *x, const float *w, const float *b, int64_t rows,
                           int64_t D, float eps, const ts_out_act *act) {
    rows_ctx c = {.out = y, .aux = stats, .act = act, .x = x, .w = w, .b = b, .n = D, .eps = eps};
    ts_pool_for(p, rows, GRAIN / (D > 0 ? D : 1) + 1, ln_fwd_slice, &c);
}

/* dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * w: rows
 * split over the pool */
static void ln_bwd_dx_slice(void *vctx, int64_t begin, int64_t end) {
    const rows_ctx *c = vctx;
    int64_t D = c->n;
    const float *w = c->w;
    for (int64_t r = begin; r < end; r++) {
        const float *xr = c->x + r * D, *d = c->dout + r * D;
        float mean = c->y[2 * r], rstd = c->y[2 * r + 1];
        /* sum g and sum g (x - mean) (then times rstd) in eight lanes each,
         * as the forward's sums: a running float sum waits on each add */
        float sg = (float)ts_lane_sum(d, 0.0f, w, 0.0f, D), sgx = 0.0f, acc[8] = {0};
        int64_t j = 0;
        for (; j + 8 <= D; j += 8)
            for (int l = 0; l < 8; l++) acc[l] += d[j + l] * w[j + l] * (xr[j + l] - mean);
        for (int l = 0; l < 8; l++) sgx += acc[l];
        for (; j < D; j++) sgx += d[j] * w[j] * (xr[j] - mean);
        sgx *= rstd;
        float mg = sg / (float)D, mgx = sgx / (float)D;
        float *o = c->out + r * D;
        for (j = 0; j < D; j++) o[j] += rstd * (d[j] * w[j] - mg - ((xr[j] - mean) * rstd) * mgx);
    }
}

static void ln_bwd_db_rows(void *vctx, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float *ab, float *unused);

/* dw += sum over rows of dy * xhat, db += sum of dy: ts_sum_rows's
 * parts, each thread summing the rows it has in cache */
static void ln_bwd_dwdb_rows(void *vctx, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float *aw, float *ab) {
    const rows_ctx *c = vctx;
    int64_t D = c->n, w = c1 - c0;
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = c->x + r * D + c0, *d = c->dout + r * D + c0;
        float mean = c->y[2 * r], rstd = c->y[2 * r + 1];
        if (aw)
            for (int64_t j = 0; j < w; j++) aw[j] += d[j] * ((xr[j] - mean) * rstd);
        if (ab)
            for (int64_t j = 0; j < w; j++) ab[j] += d[j];
    }
}

static void ln_bwd_db_rows(void *vctx, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float *ab, float *unused) {
    (void)unused;
    ln_bwd_dwdb_rows(vctx, r0, r1, c0, c1, NULL, ab);
}

void ts_layer_norm_backward(ts_pool *p, float *dx, float *dw, float *db, const float *dy, const float *x, const float *stats,
                            const float *w, int64_t rows, int64_t D) {
    if (dx) {
        rows_ctx c = {.out = dx, .x = x, .w = w, .dout = dy, .y = stats, .n = D};
        ts_pool_for(p, rows, GRAIN / (D > 0 ? D : 1) + 1, ln_bwd_dx_slice, &c);
    }
    rows_ctx c = {.x = x, .dout = dy, .y = stats, .n = D};
    if (dw && db) ts_sum_rows(p, rows, D, ln_bwd_dwdb_rows, &c, dw, db, 0);
    else if (dw || db) ts_sum_rows(p, rows, D, dw ? ln_bwd_dwdb_rows : ln_bwd_db_rows, &c, dw ? dw : db, NULL, 0);
}

/* ---------------------------------------------------------------- rms norm */

static void rms_fwd_slice(void *vctx, int64_t begin, int64_t end) {
    const rows_ctx *c = vctx;
    int64_t D = c->n;
    for (int64_t r = begin; r < end; r++) {
        const float *x = c->x + r * D;
        float *y = c->out + r * D;
        /* the mean of squares in eight lanes, as layer norm's variance */
        float rr = 1.0f / sqrtf((float)(ts_lane_sum(x, 0.0f, x, 0.0f, D) / (double)D) + c->eps);
        if (c->w)
            for (int64_t j = 0; j < D; j++) y[j] = x[j] * rr * c->w[j];
        else
            for (int64_t j = 0; j < D; j++) y[j] = x[j] * rr;
        if (c->act) ts_out_act_apply(c->act, c->act->out + r * D, y, D);
        c->aux[r] = rr;
    }
}

void ts_rms_norm_forward(ts_pool *p, float *y, float *rstd, const float *x, const float *w, int64_t rows, int64_t D, float eps,
                         const ts_out_act *act) {
    rows_ctx c = {.out = y, .aux = rstd, .act = act, .x = x, .w = w, .n = D, .eps = eps};
    ts_pool_for(p, rows, GRAIN / (D > 0 ? D : 1) + 1, rms_fwd_slice, &c);
}

/* dx += r (g - x r^2 mean(g x)) with g = dy * w (dy without a weight):
 * rows split over the pool */
static void rms_bwd_dx_slice(void *vctx, int64_t begin, int64_t end) {
    const rows_ctx *c = vctx;
    int64_t D = c->n;
    const float *w = c->w;
    for (int64_t r = begin; r < end; r++) {
        const float *xr = c->x + r * D, *d = c->dout + r * D;
        float rr = c->y[r], sgx = 0.0f;
        if (w) { /* sum g x in eight lanes, as layer norm's */
            float acc[8] = {0};
            int64_t j = 0;
            for (; j + 8 <= D; j += 8)
                for (int l = 0; l < 8; l++) acc[l] += d[j + l] * w[j + l] * xr[j + l];
            for (int l = 0; l < 8; l++) sgx += acc[l];
            for (; j < D; j++) sgx += d[j] * w[j] * xr[j];
        } else {
            sgx = (float)ts_lane_sum(d, 0.0f, xr, 0.0f, D);
        }
        float k = rr * rr * rr * sgx / (float)D;
        float *o = c->out + r * D;
        if (w)
            for (int64_t j = 0; j < D; j++) o[j] += rr * (d[j] * w[j]) - xr[j] * k;
        else
            for (int64_t j = 0; j < D; j++) o[j] += rr * d[j] - xr[j] * k;
    }
}

/* dw += sum over rows of dy * x * r: ts_sum_rows's parts */
static void rms_bwd_dw_rows(void *vctx, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float *aw, float *unused) {
    const rows_ctx *c = vctx;
    (void)unused;
    int64_t D = c->n, w = c1 - c0;
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = c->x + r * D + c0, *d = c->dout + r * D + c0;
        float rr = c->y[r];
        for (int64_t j = 0; j < w; j++) aw[j] += d[j] * (xr[j] * rr);
    }
}

void ts_rms_norm_backward(ts_pool *p, float *dx, float *dw, const float *dy, const float *x, const float *rstd, const float *w,
                          int64_t rows, int64_t D) {
    rows_ctx c = {.out = dx, .x = x, .w = w, .dout = dy, .y = rstd, .n = D};
    if (dx) ts_pool_for(p, rows, GRAIN / (D > 0 ? D : 1) + 1, rms_bwd_dx_slice, &c);
    if (dw) ts_sum_rows(p, rows, D, rms_bwd_dw_rows, &c, dw, NULL, 0);
}

/* -------------------------------------------------------------- group norm */

/* A group (sample n, group g) is L = C/G * S contiguous values of x [N, C,
 * S]: channels g*C/G.. of sample n. Its sums in double, as a group holds
 * whole channels (an image's positions each). */
typedef struct gn_ctx {
    float *y, *stats_out, *dx, *dw, *db;
    const float *x, *w, *b, *dy, *stats;
    int64_t N, C, G, S;
    float eps;
} gn_ctx;

static void gn_fwd_slice(void *vctx, int64_t begin, int64_t end) {
    const gn_ctx *c = vctx;
    int64_t Cg = c->C / c->G, S = c->S, L = Cg * S;
    for (int64_t r = begin; r < end; r++) {
        const float *x = c->x + r * L;
        double mean = L ? ts_lane_sum(x, 0.0f, NULL, 0.0f, L) / (double)L : 0;
        float m = (float)mean;
        double v = ts_lane_sum(x, m, x, m, L), d = (double)m - mean; /* about the float mean, then corrected to the exact one */
        v -= (double)L * d * d;
        float rstd = (float)(1.0 / sqrt((L && v > 0 ? v / (double)L : 0) + (double)c->eps));
        for (int64_t q = 0, c0 = (r % c->G) * Cg; q < Cg; q++) {
            float w = c->w[c0 + q], b = c->b[c0 + q];
            const float *xq = x + q * S;
            float *yq = c->y + r * L + q * S;
            for (int64_t j = 0; j < S; j++) yq[j] = (xq[j] - m) * rstd * w + b;
        }
        c->stats_out[2 * r] = m;
        c->stats_out[2 * r + 1] = rstd;
    }
}

void ts_group_norm_forward(ts_pool *p, float *y, float *stats, const float *x, const float *w, const float *b, int64_t N, int64_t C,
                           int64_t G, int64_t S, float eps) {
    gn_ctx c = {.y = y, .stats_out = stats, .x = x, .w = w, .b = b, .N = N, .C = C, .G = G, .S = S, .eps = eps};
    int64_t L = C / G * S;
    ts_pool_for(p, N * G, GRAIN / (L > 0 ? L : 1) + 1, gn_fwd_slice, &c);
}

/* dx += rstd * (g - mean(g) - xhat * mean(g * xhat)) over each group, g =
 * dy * w[channel]: groups split over the pool */
static void gn_bwd_dx_slice(void *vctx, int64_t begin, int64_t end) {
    const gn_ctx *c = vctx;
    int64_t Cg = c->C / c->G, S = c->S, L = Cg * S;
    for (int64_t r = begin; r < end; r++) {
        const float *x = c->x + r * L, *d = c->dy + r * L;
        float m = c->stats[2 * r], rstd = c->stats[2 * r + 1];
        int64_t c0 = (r % c->G) * Cg;
        double sg = 0, sgx = 0;
        for (int64_t q = 0; q < Cg; q++) {
            double w = c->w[c0 + q];
            sg += w * ts_lane_sum(d + q * S, 0.0f, NULL, 0.0f, S);
            sgx += w * rstd * ts_lane_sum(d + q * S, 0.0f, x + q * S, m, S);
        }
        float mg = (float)(sg / (double)L), mgx = (float)(sgx / (double)L);
        float *o = c->dx + r * L;
        for (int64_t q = 0; q < Cg; q++) {
            float w = c->w[c0 + q];
            for (int64_t j = q * S; j < (q + 1) * S; j++) o[j] += rstd * (d[j] * w - mg - ((x[j] - m) * rstd) * mgx);
        }
    }
}

/* dw[c] += sum over samples and positions of dy * xhat, db[c] += sum of
 * dy: channels split over the pool, each thread owning its channels */
static void gn_bwd_dwdb_slice(void *vctx, int64_t begin, int64_t end) {
    const gn_ctx *c = vctx;
    int64_t Cg = c->C / c->G, S = c->S;
    for (int64_t ch = begin; ch < end; ch++) {
        double sw = 0, sb = 0;
        for (int64_t n = 0; n < c->N; n++) {
            int64_t r = n * c->G + ch / Cg;
            float m = c->stats[2 * r], rstd = c->stats[2 * r + 1];
            const float *x = c->x + (n * c->C + ch) * S, *d = c->dy + (n * c->C + ch) * S;
            sw += rstd * ts_lane_sum(d, 0.0f, x, m, S);
            sb += ts_lane_sum(d, 0.0f, NULL, 0.0f, S);
        }
        if (c->dw) c->dw[ch] += (float)sw;
        if (c->db) c->db[ch] += (float)sb;
    }
}

void ts_group_norm_backward(ts_pool *p, float *dx, float *dw, float *db, const float *dy, const float *x, const float *stats, const float *w,
                            int64_t N, int64_t C, int64_t G, int64_t S) {
    gn_ctx c = {.dx = dx, .dw = dw, .db = db, .x = x, .w = w, .dy = dy, .stats = stats, .N = N, .C = C, .G = G, .S = S};
    int64_t L = C / G * S;
    if (dx) ts_pool_for(p, N * G, GRAIN / (L > 0 ? L : 1) + 1, gn_bwd_dx_slice, &c);
    if (dw || db) ts_pool_for(p, C, GRAIN / (N * S > 0 ? N * S : 1) + 1, gn_bwd_dwdb_slice, &c);
}

/* ---------------------------------------------------------- batched matmul */

/* The products of a batched matmul go to ts_gemm_batch_pool; product i
 * (the i-th [M, N] block of C, in order) finds its A and B blocks through
 * the broadcast view of the batch dims. */
enum { BMM_C, BMM_DA, BMM_DB };

typedef struct bmm_ctx {
    int which; /* BMM_C: C = A B; BMM_DA, BMM_DB: the gradient of A or B */
    bool ta, tb;
    int64_t szc, sza, szb;
    bview v;
    float *c, *da, *db;
    const float *a, *b, *dc;
} bmm_ctx;

static void bmm_item(void *vctx, int64_t i, const float **A, const float **B, float **C) {
    const bmm_ctx *x = vctx;
    int64_t ia = 0, ib = 0, ic = i * x->szc;
    for (int d = x->v.nd - 1; d >= 0; d--) { /* i's coordinates in the view */
        int64_t q = i % x->v.d[d];
        i /= x->v.d[d];
        ia += q * x->v.s[0][d];
        ib += q * x->v.s[1][d];
    }
    ia *= x->sza, ib *= x->szb;
    switch (x->which) {
    case BMM_C: *A = x->a + ia, *B = x->b + ib, *C = x->c + ic; break;
    /* dA = dC op(B)^T, or op(B) dC^T when A is stored transposed */
    case BMM_DA:
        *C = x->da + ia;
        if (!x->ta) *A = x->dc + ic, *B = x->b + ib;
        else *A = x->b + ib, *B = x->dc + ic;
        break;
    /* dB = op(A)^T dC, or dC^T op(A) when B is stored transposed */
    default:
        *C = x->db + ib;
        if (!x->tb) *A = x->a + ia, *B = x->dc + ic;
        else *A = x->dc + ic, *B = x->a + ia;
        break;
    }
}

/* M, N, K of C = op(A) op(B); the batch view; whether A's and B's batch
 * dims are broadcast (a gradient then sums several products) */
static int64_t bmm_setup(bmm_ctx *x, const ts_shape *sc, const ts_shape *sa, const ts_shape *sb, int64_t *M, int64_t *N, int64_t *K,
                         bool *a_shared, bool *b_shared) {
    ts_shape bc = *sc, ba = *sa, bb = *sb;
    bc.ndim -= 2, ba.ndim -= 2, bb.ndim -= 2;
    *M = sc->d[sc->ndim - 2];
    *N = sc->d[sc->ndim - 1];
    *K = x->ta ? sa->d[sa->ndim - 2] : sa->d[sa->ndim - 1];
    x->szc = *M * *N, x->sza = *M * *K, x->szb = *K * *N;
    bview_broadcast(&x->v, &bc, 2, (const ts_shape *[]){&ba, &bb});
    int64_t count = ts_shape_numel(&bc);
    *a_shared = ts_shape_numel(&ba) < count;
    *b_shared = ts_shape_numel(&bb) < count;
    return count;
}

void ts_bmm_forward(ts_pool *p, float *c, const float *a, const float *b, bool ta, bool tb, const ts_shape *sc, const ts_shape *sa,
                    const ts_shape *sb) {
    bmm_ctx x = {.which = BMM_C, .ta = ta, .tb = tb, .c = c, .a = a, .b = b};
    int64_t M, N, K;
    bool as, bs;
    int64_t count = bmm_setup(&x, sc, sa, sb, &M, &N, &K, &as, &bs);
    ts_gemm_batch_pool(p, ta, tb, M, N, K, count, bmm_item, &x, 0.0f, false);
}

void ts_bmm_backward(ts_pool *p, float *da, float *db, const float *dc, const float *a, const float *b, bool ta, bool tb,
                     const ts_shape *sc, const ts_shape *sa, const ts_shape *sb) {
    bmm_ctx x = {.ta = ta, .tb = tb, .da = da, .db = db, .dc = dc, .a = a, .b = b};
    int64_t M, N, K;
    bool as, bs;
    int64_t count = bmm_setup(&x, sc, sa, sb, &M, &N, &K, &as, &bs);
    if (da) {
        x.which = BMM_DA;
        if (!ta) ts_gemm_batch_pool(p, false, !tb, M, K, N, count, bmm_item, &x, 1.0f, as);
        else ts_gemm_batch_pool(p, tb, true, K, M, N, count, bmm_item, &x, 1.0f, as);
    }
    if (db) {
        x.which = BMM_DB;
        if (!tb) ts_gemm_batch_pool(p, !ta, false, K, N, M, count, bmm_item, &x, 1.0f, bs);
        else ts_gemm_batch_pool(p, true, ta, N, K, M, count, bmm_item, &x, 1.0f, bs);
    }
}

/* ------------------------------------------------------------------ layout */

typedef struct copy_ctx {
    float *out;
    const float *x;
    float *dx;
    const float *dout;
} copy_ctx;

static void permute_fwd_row(void *vctx, int64_t o, const int64_t *off, const int64_t *st, int64_t n) {
    const copy_ctx *c = vctx;
    const float *x = c->x + off[0];
    float *y = c->out + o;
    if (st[0] == 1) memcpy(y, x, (size_t)n * sizeof(float));
    else
        for (int64_t j = 0; j < n; j++) y[j] = x[j * st[0]];
}

static void permute_bwd_row(void *vctx, int64_t o, const int64_t *off, const int64_t *st, int64_t n) {
    const copy_ctx *c = vctx;
    float *dx = c->dx + off[0];
    const float *d = c->dout + o;
    for (int64_t j = 0; j < n; j++) dx[j * st[0]] += d[j];
}

static void permute_view(bview *v, const ts_shape *sx, const int64_t *perm) {
    int64_t xs[TS_MAX_DIMS], st[NOPS][TS_MAX_DIMS];
    ts_shape so = {.ndim = sx->ndim};
    int64_t s = 1;
    for (int i = sx->ndim - 1; i >= 0; i--) xs[i] = s, s *= sx->d[i];
    for (int i = 0; i < sx->ndim; i++) {
        so.d[i] = sx->d[perm[i]];
        st[0][i] = xs[perm[i]];
    }
    bview_make(v, &so, 1, st);
}

void ts_permute_forward(ts_pool *p, float *out, const float *x, const ts_shape *sx, const int64_t *perm) {
    bview v;
    permute_view(&v, sx, perm);
    copy_ctx c = {.out = out, .x = x};
    bview_rows_pool(p, &v, permute_fwd_row, &c);
}

void ts_permute_backward(ts_pool *p, float *dx, const float *dout, const ts_shape *sx, const int64_t *perm) {
    bview v;
    permute_view(&v, sx, perm);
    copy_ctx c = {.dx = dx, .dout = dout};
    bview_rows_pool(p, &v, permute_bwd_row, &c);
}

/* A slice's rows: outer blocks of len * inner values, split over the pool
 * (each thread its own rows of out, or of dx's slice). */
typedef struct slice_ctx {
    float *out;
    const float *x;
    int64_t dim_in, inner, start, len;
    bool backward;
} slice_ctx;

static void slice_rows(void *vctx, int64_t o0, int64_t o1) {
    const slice_ctx *c = vctx;
    int64_t w = c->len * c->inner;
    for (int64_t o = o0; o < o1; o++) {
        if (!c->backward) {
            memcpy(c->out + o * w, c->x + (o * c->dim_in + c->start) * c->inner, (size_t)w * sizeof(float));
            continue;
        }
        float *r = c->out + (o * c->dim_in + c->start) * c->inner;
        const float *d = c->x + o * w;
        for (int64_t j = 0; j < w; j++) r[j] += d[j];
    }
}

void ts_slice_forward(ts_pool *p, float *out, const float *x, int64_t outer, int64_t dim_in, int64_t inner, int64_t start, int64_t len) {
    slice_ctx c = {out, x, dim_in, inner, start, len, false};
    ts_pool_for(p, outer, 1 + GRAIN / (len * inner + 1), slice_rows, &c);
}

void ts_slice_backward(ts_pool *p, float *dx, const float *dout, int64_t outer, int64_t dim_in, int64_t inner, int64_t start, int64_t len) {
    slice_ctx c = {dx, dout, dim_in, inner, start, len, true};
    ts_pool_for(p, outer, 1 + GRAIN / (len * inner + 1), slice_rows, &c);
}

void ts_pad_forward(float *out, const float *x, const ts_pad_geom *g, int64_t n_out) {
    for (int64_t o = 0; o < n_out; o++) out[o] = ts_pad_value_at(g, x, o);
}

void ts_pad_backward(float *dx, const float *dout, const ts_pad_geom *g, int64_t n_in) {
    for (int64_t i = 0; i < n_in; i++) dx[i] += ts_pad_grad_at(g, dout, i);
}

void ts_concat_part_forward(float *out, const float *part, int64_t outer, int64_t dim_out, int64_t inner, int64_t at, int64_t dk) {
    for (int64_t o = 0; o < outer; o++)
        memcpy(out + (o * dim_out + at) * inner, part + o * dk * inner, (size_t)(dk * inner) * sizeof(float));
}

/* ------------------------------------------------------ where, masked fill */

typedef struct where_ctx {
    float *out, *da, *db;
    const int32_t *cond;
    const float *fcond; /* an f32 condition where cond is NULL */
    const float *a, *b, *dout;
    float value;
} where_ctx;

static inline bool where_true(const where_ctx *c, int64_t i) { return c->cond ? c->cond[i] != 0 : c->fcond[i] != 0.0f; }

static void where_fwd_row(void *vctx, int64_t o, const int64_t *off, const int64_t *st, int64_t n) {
    const where_ctx *c = vctx;
    float *y = c->out + o;
    if (!c->b) { /* masked fill: operand 1 is x */
        const int32_t *m = c->cond + off[0];
        const float *x = c->a + off[1];
        for (int64_t j = 0; j < n; j++) y[j] = m[j * st[0]] ? c->value : x[j * st[1]];
        return;
    }
    const float *a = c->a + off[1], *b = c->b + off[2];
    for (int64_t j = 0; j < n; j++) y[j] = where_true(c, off[0] + j * st[0]) ? a[j * st[1]] : b[j * st[2]];
}

static void where_bwd_row(void *vctx, int64_t o, const int64_t *off, const int64_t *st, int64_t n) {
    const where_ctx *c = vctx;
    const float *d = c->dout + o;
    for (int64_t j = 0; j < n; j++) {
        bool t = where_true(c, off[0] + j * st[0]);
        if (t && c->da) c->da[off[1] + j * st[1]] += d[j];
        if (!t && c->db) c->db[off[2] + j * st[2]] += d[j];
    }
}

void ts_where_forward(float *out, const int32_t *cond, const float *fcond, const float *a, const float *b, const ts_shape *so, const ts_shape *sc,
                      const ts_shape *sa, const ts_shape *sb) {
    bview v;
    bview_broadcast(&v, so, 3, (const ts_shape *[]){sc, sa, sb});
    where_ctx c = {.out = out, .cond = cond, .fcond = fcond, .a = a, .b = b};
    bview_rows(&v, where_fwd_row, &c);
}

void ts_where_backward(float *da, float *db, const float *dout, const int32_t *cond, const float *fcond, const ts_shape *so, const ts_shape *sc,
                       const ts_shape *sa, const ts_shape *sb) {
    bview v;
    bview_broadcast(&v, so, 3, (const ts_shape *[]){sc, sa, sb});
    where_ctx c = {.da = da, .db = db, .dout = dout, .cond = cond, .fcond = fcond};
    bview_rows(&v, where_bwd_row, &c);
}

void ts_masked_fill_forward(ts_pool *p, float *out, const float *x, const int32_t *mask, float value, const ts_shape *so,
                            const ts_shape *sm) {
    bview v;
    bview_broadcast(&v, so, 2, (const ts_shape *[]){sm, so});
    where_ctx c = {.out = out, .cond = mask, .a = x, .value = value};
    bview_rows_pool(p, &v, where_fwd_row, &c);
}

void ts_masked_fill_backward(ts_pool *p, float *dx, const float *dout, const int32_t *mask, const ts_shape *so, const ts_shape *sm) {
    /* where(mask, value, x): x's gradient flows where the mask is 0; x has
     * the output's shape, so each row writes its own part of dx */
    bview v;
    bview_broadcast(&v, so, 3, (const ts_shape *[]){sm, so, so});
    where_ctx c = {.db = dx, .dout = dout, .cond = mask};
    bview_rows_pool(p, &v, where_bwd_row, &c);
}

/* -------------------------------------------------------------- reductions */

typedef struct red_ctx {
    int kind;
    float *out, *dx;
    const float *x, *dout, *y;
    float scale; /* backward of sum and mean */
} red_ctx;

/* the view runs over x (operand 0, contiguous) with out as operand 1 */
static void red_fwd_row(void *vctx, int64_t o, const int64_t *off, const int64_t *st, int64_t n) {
    (void)off;
    const red_ctx *c = vctx;
    const float *x = c->x + o;
    float *r = c->out + off[1];
    if (c->kind == TS_RED_MAX) {
        for (int64_t j = 0; j < n; j++)
            if (x[j] > r[j * st[1]] || isnan(x[j])) r[j * st[1]] = x[j];
        return;
    }
    if (st[1] == 0) {
        float s = 0;
        for (int64_t j = 0; j < n; j++) s += x[j];
        r[0] += s;
        return;
    }
    for (int64_t j = 0; j < n; j++) r[j * st[1]] += x[j];
}

static void red_bwd_row(void *vctx, int64_t o, const int64_t *off, const int64_t *st, int64_t n) {
    const red_ctx *c = vctx;
    float *dx = c->dx + o;
    const float *d = c->dout + off[1];
    if (c->kind == TS_RED_MAX) {
        const float *x = c->x + o, *y = c->y + off[1];
        for (int64_t j = 0; j < n; j++)
            if (x[j] == y[j * st[1]]) dx[j] += d[j * st[1]];
        return;
    }
    for (int64_t j = 0; j < n; j++) dx[j] += c->scale * d[j * st[1]];
}

void ts_reduce_axes_forward(int kind, float *out, const float *x, const ts_shape *sx, const ts_shape *sr) {
    int64_t nr = ts_shape_numel(sr), nx = ts_shape_numel(sx);
    for (int64_t i = 0; i < nr; i++) out[i] = kind == TS_RED_MAX ? -INFINITY : 0.0f;
    bview v;
    bview_broadcast(&v, sx, 2, (const ts_shape *[]){sx, sr});
    red_ctx c = {.kind = kind, .out = out, .x = x};
    bview_rows(&v, red_fwd_row, &c);
    if (kind == TS_RED_MEAN) {
        float k = (float)nr / (float)nx;
        for (int64_t i = 0; i < nr; i++) out[i] *= k;
    }
}

/* max: the gradient goes to every element equal to the maximum */
void ts_reduce_axes_backward(int kind, float *dx, const float *dout, const float *x, const float *out, const ts_shape *sx,
                             const ts_shape *sr) {
    bview v;
    bview_broadcast(&v, sx, 2, (const ts_shape *[]){sx, sr});
    float scale = kind == TS_RED_MEAN ? (float)ts_shape_numel(sr) / (float)ts_shape_numel(sx) : 1.0f;
    red_ctx c = {.kind = kind, .dx = dx, .dout = dout, .x = x, .y = out, .scale = scale};
    bview_rows(&v, red_bwd_row, &c);
}

/* ----------------------------------------------------------- softmax rows */

static void sm_fwd_slice(void *vctx, int64_t begin, int64_t end) {
    const rows_ctx *c = vctx;
    const ts_vk *vk = ts_vk_get();
    for (int64_t r = begin; r < end; r++) vk->softmax_row(c->out + r * c->n, c->x + r * c->n, c->n, c->log);
}

static void sm_bwd_slice(void *vctx, int64_t begin, int64_t end) {
    const rows_ctx *c = vctx;
    int64_t n = c->n;
    for (int64_t r = begin; r < end; r++) {
        const float *y = c->y + r * n, *d = c->dout + r * n;
        float *dx = c->aux + r * n;
        float s = 0;
        if (c->log) {
            if (y[0] == -INFINITY) {
                bool all = true;
                for (int64_t j = 0; j < n && all; j++) all = y[j] == -INFINITY;
                if (all) continue; /* fully masked: no gradient */
            }
            for (int64_t j = 0; j < n; j++) s += d[j];
            for (int64_t j = 0; j < n; j++) dx[j] += d[j] - ts_vexp(y[j]) * s;
        } else {
            for (int64_t j = 0; j < n; j++) s += d[j] * y[j];
            for (int64_t j = 0; j < n; j++) dx[j] += y[j] * (d[j] - s);
        }
    }
}

void ts_softmax_rows_forward(ts_pool *p, float *out, const float *x, int64_t rows, int64_t n, bool log) {
    rows_ctx c = {.out = out, .x = x, .n = n, .log = log};
    ts_pool_for(p, rows, 1 + GRAIN / (n + 1), sm_fwd_slice, &c);
}

void ts_softmax_rows_backward(ts_pool *p, float *dx, const float *dout, const float *out, int64_t rows, int64_t n, bool log) {
    rows_ctx c = {.aux = dx, .dout = dout, .y = out, .n = n, .log = log};
    ts_pool_for(p, rows, 1 + GRAIN / (n + 1), sm_bwd_slice, &c);
}

/* ----------------------------------------------------------- cross entropy */

void ts_ce_forward(ts_pool *p, float *out, float *probs, const float *logits, const int32_t *labels, int64_t rows, int64_t V,
                   bool has_ignore, int32_t ignore) {
    ts_softmax_rows_forward(p, probs, logits, rows, V, false);
    double s = 0;
    int64_t counted = 0;
    for (int64_t r = 0; r < rows; r++) {
        if (has_ignore && labels[r] == ignore) continue;
        /* log-sum-exp again for an exact log-probability (log of a tiny
         * probability loses precision) */
        const float *x = logits + r * V;
        float mx = -INFINITY, sum = 0;
        for (int64_t c = 0; c < V; c++) mx = x[c] > mx ? x[c] : mx;
        for (int64_t c = 0; c < V; c++) sum += ts_vexp(x[c] - mx);
        s += (double)(mx + logf(sum) - x[labels[r]]);
        counted++;
    }
    out[0] = counted ? (float)(s / (double)counted) : 0.0f;
}

void ts_ce_backward(float *dlogits, const float *dout, const float *probs, const int32_t *labels, int64_t rows, int64_t V,
                    bool has_ignore, int32_t ignore) {
    int64_t counted = 0;
    for (int64_t r = 0; r < rows; r++) counted += !(has_ignore && labels[r] == ignore);
    if (!counted) return;
    float g = dout[0] / (float)counted;
    for (int64_t r = 0; r < rows; r++) {
        if (has_ignore && labels[r] == ignore) continue;
        float *d = dlogits + r * V;
        const float *pr = probs + r * V;
        for (int64_t c = 0; c < V; c++) d[c] += g * pr[c];
        d[labels[r]] -= g;
    }
}
