/* adapters_tensor.c -- the CPU kernel rows of the tensor and transformer
 * ops: each unpacks a node's context (ts_kctx) into the fixed-argument
 * kernels of kernels_tensor.c. */
#include "backend/cpu/adapters.h"
#include "backend/cpu/bf16_gemm.h"

#include "backend/cpu/kernels.h"
#include "backend/cpu/kernels_tensor.h"
#include "backend/ew_math.h"
#include "backend/pad_index.h"
#include "backend/pool.h"
#include "graph/ops_tensor.h"

static int64_t numel_out(const ts_kctx *k) { return ts_shape_numel(&k->out_shape); }

static int bin_kind(ts_op op) {
    if (ts_ewb_kind(op) != TS_EWB_NONE) return TS_BIN_EW + ts_ewb_kind(op);
    return op == TS_OP_ADD ? TS_BIN_ADD : op == TS_OP_SUB ? TS_BIN_SUB : op == TS_OP_MUL ? TS_BIN_MUL : TS_BIN_DIV;
}

void ts_fwd_broadcast_binary(const ts_kctx *k) {
    ts_bcast_binary_forward(k->pool, bin_kind(k->node->op), k->out, k->in[0], k->in[1], &k->out_shape, &k->in_shape[0],
                            &k->in_shape[1]);
}

void ts_bwd_broadcast_binary(const ts_kctx *k) {
    ts_bcast_binary_backward(k->pool, bin_kind(k->node->op), k->din[0], k->din[1], k->dout, k->in[0], k->in[1], &k->out_shape,
                             &k->in_shape[0], &k->in_shape[1], k->din_store);
}

void ts_fwd_ew_unary(const ts_kctx *k) {
    if (k->gate_out) { /* a Silu whose Mul the executor handed it */
        ts_silu_mul_forward(k->pool, k->out == k->gate_out ? NULL : k->out, k->gate_out, k->in[0], k->gate, numel_out(k));
        return;
    }
    ts_ew_unary_forward(k->pool, ts_ewu_kind(k->node), k->out, k->in[0], k->node->fattr[0], k->node->fattr[1], numel_out(k));
}
void ts_bwd_ew_unary(const ts_kctx *k) {
    if (k->gate_dout) { /* a Silu at the place of its Mul's backward, both in one pass */
        ts_silu_mul_backward(k->pool, k->din[0], k->gate_din, k->gate_dout, k->gate, k->out, k->in[0], numel_out(k), k->gate_plus,
                             k->din_store & 1u, k->gate_din_store, k->gate_din_plus);
        return;
    }
    if (k->din[0])
        ts_ew_unary_backward(k->pool, ts_ewu_kind(k->node), k->din[0], k->dout,
                             ts_ewu_reads_output(ts_ewu_kind(k->node)) ? k->out : k->in[0], k->node->fattr[0], k->node->fattr[1],
                             numel_out(k), k->din_store & 1u);
}

void ts_fwd_cast_float(const ts_kctx *k) {
    int64_t n = numel_out(k);
    for (int64_t i = 0; i < n; i++) k->out[i] = (float)k->in_int[0][i];
}

void ts_fwd_cast_index(const ts_kctx *k) {
    int64_t n = numel_out(k);
    int32_t *y = (int32_t *)(void *)k->out;
    for (int64_t i = 0; i < n; i++) y[i] = ts_ew_cast_index(k->in[0][i], k->node->fattr[0], k->node->fattr[1]);
}

/* ---- integer tensors: i32 cells (in_int) or i64 ones (behind in); a
 * bool tensor's f32 cells hold 1.0 or 0.0 */
static int64_t int_in(const ts_kctx *k, int j, int64_t i) {
    if (k->in_dtype[j] == TS_BOOL) return k->in[j][i] != 0.0f;
    if (k->in_dtype[j] == TS_F32) return ((const int32_t *)(const void *)k->in[j])[i]; /* its bits: an integer Pow's float exponent */
    return k->in_dtype[j] == TS_I64 ? ((const int64_t *)(const void *)k->in[j])[i] : k->in_int[j][i];
}
static void int_out(const ts_kctx *k, int64_t i, int64_t v) {
    if (k->out_dtype == TS_I64) ((int64_t *)(void *)k->out)[i] = v;
    else if (k->out_dtype == TS_BOOL) k->out[i] = v != 0 ? 1.0f : 0.0f;
    else ((int32_t *)(void *)k->out)[i] = ts_int_wrap32(v);
}

void ts_fwd_bitwise(const ts_kctx *k) {
    int64_t n = numel_out(k);
    const ts_tensor *t = k->node;
    for (int64_t i = 0; i < n; i++)
        int_out(k, i, ts_ew_bitwise((int)t->attr[0], (int)t->attr[1], (int)t->attr[2], int_in(k, 0, ts_bcast_offset(&k->out_shape, &k->in_shape[0], i)),
                                    int_in(k, 1, ts_bcast_offset(&k->out_shape, &k->in_shape[1], i))));
}

void ts_fwd_convert(const ts_kctx *k) {
    int64_t n = numel_out(k);
    bool index = k->node->attr[1] != 0;
    int type = (int)k->node->attr[0]; /* the declared type the values wrap to (ts_int_as_type) */
    int from = (int)k->node->attr[2]; /* the declared type of x's values (a uint64's bits read unsigned) */
    for (int64_t i = 0; i < n; i++) {
        if (index) ((int32_t *)(void *)k->out)[i] = k->in_dtype[0] == TS_F32 ? ts_index_of_float(k->in[0][i]) : ts_index_of_int(int_in(k, 0, i));
        else if (k->out_dtype == TS_F32) k->out[i] = ts_int_to_float(from, int_in(k, 0, i)); /* to nearest */
        else if (k->in_dtype[0] == TS_F32 && k->out_dtype == TS_BOOL) k->out[i] = k->in[0][i] != 0.0f ? 1.0f : 0.0f; /* NaN is true */
        else if (k->in_dtype[0] == TS_F32) int_out(k, i, ts_float_to_type(k->in[0][i], type));
        else int_out(k, i, ts_int_as_type(type, int_in(k, 0, i)));
    }
}

void ts_fwd_int_arith(const ts_kctx *k) {
    int64_t n = numel_out(k);
    int kind = (int)k->node->attr[0], type = (int)k->node->attr[1];
    for (int64_t i = 0; i < n; i++)
        int_out(k, i, ts_int_arith_in(type, kind, int_in(k, 0, ts_bcast_offset(&k->out_shape, &k->in_shape[0], i)),
                                      int_in(k, 1, ts_bcast_offset(&k->out_shape, &k->in_shape[1], i))));
}

/* [outer, n, inner] around dim attr[0]: each line summed in order */
void ts_fwd_int_cumsum(const ts_kctx *k) {
    int64_t d = k->node->attr[0], n = k->out_shape.d[d], outer = 1, inner = 1;
    bool exclusive = k->node->attr[1] != 0, reverse = k->node->attr[2] != 0;
    for (int64_t i = 0; i < d; i++) outer *= k->out_shape.d[i];
    for (int64_t i = d + 1; i < k->out_shape.ndim; i++) inner *= k->out_shape.d[i];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t c = 0; c < inner; c++) {
            int64_t sum = 0;
            for (int64_t s = 0; s < n; s++) {
                int64_t at = (o * n + (reverse ? n - 1 - s : s)) * inner + c, v = int_in(k, 0, at);
                if (!exclusive) sum = ts_int_arith(TS_INT_ADD, sum, v);
                int_out(k, at, sum);
                if (exclusive) sum = ts_int_arith(TS_INT_ADD, sum, v);
            }
        }
}

/* Gather along attr[0] as [outer, V, C] (Embedding: axis 0 of [V, C]) */
static void gather_dims(const ts_kctx *k, int64_t *outer, int64_t *V, int64_t *C) {
    ts_gather_dims(&k->in_shape[0], (int)k->node->attr[0], outer, V, C);
}
void ts_fwd_gather(const ts_kctx *k) {
    int64_t outer, V, C;
    gather_dims(k, &outer, &V, &C);
    ts_gather_forward(k->out, k->in[0], k->in_int[1], outer, V, ts_shape_numel(&k->in_shape[1]), C);
}
void ts_bwd_gather(const ts_kctx *k) {
    int64_t outer, V, C;
    gather_dims(k, &outer, &V, &C);
    if (k->din[0]) ts_gather_backward(k->din[0], k->dout, k->in_int[1], outer, V, ts_shape_numel(&k->in_shape[1]), C);
}

static void ln_dims(const ts_kctx *k, int64_t *rows, int64_t *D) {
    *D = ts_shape_numel(&k->in_shape[1]);
    *rows = numel_out(k) / *D;
}
/* an i64 tensor's cells (exec.c) move w = 2 cells an index, the data's
 * trailing dim of 2 past the indices' dims */
void ts_fwd_gather_elements(const ts_kctx *k) {
    const ts_shape *sd = &k->in_shape[0], *si = &k->in_shape[1];
    int axis = (int)k->node->attr[0];
    int64_t n = ts_shape_numel(si), w = n ? numel_out(k) / n : 1;
    for (int64_t p = 0; p < n; p++) {
        int64_t at = ts_gather_elements_offset(sd, si, axis, p, k->in_int[1][p]) * w;
        for (int64_t c = 0; c < w; c++) k->out[p * w + c] = k->in[0][at + c];
    }
}
void ts_bwd_gather_elements(const ts_kctx *k) {
    const ts_shape *sd = &k->in_shape[0], *si = &k->in_shape[1];
    int axis = (int)k->node->attr[0];
    int64_t n = ts_shape_numel(si);
    for (int64_t p = 0; k->din[0] && p < n; p++) k->din[0][ts_gather_elements_offset(sd, si, axis, p, k->in_int[1][p])] += k->dout[p];
}

bool ts_cpu_out_act(const ts_kctx *k, ts_out_act *a) {
    if (k->relu_out) *a = (ts_out_act){.out = k->relu_out, .kind = TS_EWU_NONE};
    else if (k->act_out) *a = (ts_out_act){.out = k->act_out, .kind = ts_ewu_kind(k->act), .alpha = k->act->fattr[0], .beta = k->act->fattr[1]};
    else return false;
    return true;
}

void ts_fwd_layer_norm(const ts_kctx *k) {
    int64_t rows, D;
    ln_dims(k, &rows, &D);
    ts_out_act a;
    ts_layer_norm_forward(k->pool, k->out, k->scratch, k->in[0], k->in[1], k->in[2], rows, D, k->node->fattr[0], ts_cpu_out_act(k, &a) ? &a : NULL);
}
void ts_bwd_layer_norm(const ts_kctx *k) {
    int64_t rows, D;
    ln_dims(k, &rows, &D);
    ts_layer_norm_backward(k->pool, k->din[0], k->din[1], k->din[2], k->dout, k->in[0], k->scratch, k->in[1], rows, D);
}

void ts_fwd_rms_norm(const ts_kctx *k) {
    int64_t D = k->out_shape.d[k->out_shape.ndim - 1], rows = D ? numel_out(k) / D : 0;
    ts_out_act a;
    ts_rms_norm_forward(k->pool, k->out, k->scratch, k->in[0], k->n_in > 1 ? k->in[1] : NULL, rows, D, k->node->fattr[0],
                        ts_cpu_out_act(k, &a) ? &a : NULL);
}
void ts_bwd_rms_norm(const ts_kctx *k) {
    int64_t D = k->out_shape.d[k->out_shape.ndim - 1], rows = D ? numel_out(k) / D : 0;
    ts_rms_norm_backward(k->pool, k->din[0], k->n_in > 1 ? k->din[1] : NULL, k->dout, k->in[0], k->scratch, k->n_in > 1 ? k->in[1] : NULL,
                         rows, D);
}

void ts_fwd_group_norm(const ts_kctx *k) {
    int64_t N, C, S;
    ts_group_norm_dims(&k->in_shape[0], &N, &C, &S);
    ts_group_norm_forward(k->pool, k->out, k->scratch, k->in[0], k->in[1], k->in[2], N, C, k->node->attr[0], S, k->node->fattr[0]);
}
void ts_bwd_group_norm(const ts_kctx *k) {
    int64_t N, C, S;
    ts_group_norm_dims(&k->in_shape[0], &N, &C, &S);
    ts_group_norm_backward(k->pool, k->din[0], k->din[1], k->din[2], k->dout, k->in[0], k->scratch, k->in[1], N, C, k->node->attr[0], S);
}

/* bf16 cells both: the CPU's bf16 kernel where it takes them (bf16_gemm.h) */
static bool bmm_bf16(const ts_kctx *k) { return k->in_dtype[0] == TS_BF16 && k->in_dtype[1] == TS_BF16; }

/* bf16 cells both: the bf16 kernel's packed operands; else none */
size_t ts_cpu_workspace_bmm(const ts_shape *in, const ts_dtype *in_dtype, const ts_shape *out, int threads) {
    return in_dtype[0] == TS_BF16 && in_dtype[1] == TS_BF16 ? ts_cpu_bf16_bmm_floats(out, &in[0], threads) : 0;
}

void ts_fwd_bmm(const ts_kctx *k) {
    bool ta = k->node->attr[0] != 0, tb = k->node->attr[1] != 0;
    if (bmm_bf16(k) && ts_cpu_bf16_bmm(k->pool, ta, tb, &k->out_shape, &k->in_shape[0], &k->in_shape[1],
                                       (const uint16_t *)(const void *)k->in[0], (const uint16_t *)(const void *)k->in[1], k->out, k->workspace))
        return;
    ts_kctx room;
    k = ts_cpu_widen(k, &room);
    ts_bmm_forward(k->pool, k->out, k->in[0], k->in[1], ta, tb, &k->out_shape, &k->in_shape[0], &k->in_shape[1]);
}
void ts_bwd_bmm(const ts_kctx *k) {
    bool ta = k->node->attr[0] != 0, tb = k->node->attr[1] != 0;
    unsigned done = 0; /* dout rounded to bf16 for the products, as a bf16 MatMul's */
    if (bmm_bf16(k))
        done = ts_cpu_bf16_bmm_backward(k->pool, ta, tb, &k->out_shape, &k->in_shape[0], &k->in_shape[1], (const uint16_t *)(const void *)k->in[0],
                                        (const uint16_t *)(const void *)k->in[1], k->dout, k->din[0], k->din[1],
                                        ts_cpu_grad_room(k), k->workspace);
    float *da = done & 1u ? NULL : k->din[0], *db = done & 2u ? NULL : k->din[1];
    if (!da && !db) return;
    ts_kctx room;
    k = ts_cpu_widen(k, &room);
    ts_bmm_backward(k->pool, da, db, k->dout, k->in[0], k->in[1], ta, tb, &k->out_shape, &k->in_shape[0], &k->in_shape[1]);
}

void ts_fwd_permute(const ts_kctx *k) { ts_permute_forward(k->pool, k->out, k->in[0], &k->in_shape[0], k->node->attr); }
void ts_bwd_permute(const ts_kctx *k) { ts_permute_backward(k->pool, k->din[0], k->dout, &k->in_shape[0], k->node->attr); }

/* [outer, dim, inner] around dim d of s */
static void around(const ts_shape *s, int64_t d, int64_t *outer, int64_t *inner) {
    *outer = 1, *inner = 1;
    for (int64_t i = 0; i < d; i++) *outer *= s->d[i];
    for (int64_t i = d + 1; i < s->ndim; i++) *inner *= s->d[i];
}

void ts_fwd_slice(const ts_kctx *k) {
    int64_t o, in, d = k->node->attr[0];
    around(&k->in_shape[0], d, &o, &in);
    ts_slice_forward(k->pool, k->out, k->in[0], o, k->in_shape[0].d[d], in, k->node->attr[1], k->node->attr[2]);
}
void ts_bwd_slice(const ts_kctx *k) {
    int64_t o, in, d = k->node->attr[0];
    around(&k->in_shape[0], d, &o, &in);
    ts_slice_backward(k->pool, k->din[0], k->dout, o, k->in_shape[0].d[d], in, k->node->attr[1], k->node->attr[2]);
}

void ts_fwd_concat(const ts_kctx *k) {
    int64_t o, in, d = k->node->attr[0], at = 0;
    around(&k->out_shape, d, &o, &in);
    for (int j = 0; j < k->n_in; j++) {
        ts_concat_part_forward(k->out, k->in[j], o, k->out_shape.d[d], in, at, k->in_shape[j].d[d]);
        at += k->in_shape[j].d[d];
    }
}
/* the gradient of part j is the slice of dout it came from */
void ts_bwd_concat(const ts_kctx *k) {
    int64_t o, in, d = k->node->attr[0], at = 0;
    around(&k->out_shape, d, &o, &in);
    for (int j = 0; j < k->n_in; j++) {
        int64_t dk = k->in_shape[j].d[d];
        if (k->din[j]) {
            for (int64_t q = 0; q < o; q++) {
                float *r = k->din[j] + q * dk * in;
                const float *src = k->dout + (q * k->out_shape.d[d] + at) * in;
                for (int64_t i = 0; i < dk * in; i++) r[i] += src[i];
            }
        }
        at += dk;
    }
}

void ts_fwd_where(const ts_kctx *k) {
    ts_where_forward(k->out, k->in_int[0], k->in[0], k->in[1], k->in[2], &k->out_shape, &k->in_shape[0], &k->in_shape[1], &k->in_shape[2]);
}
void ts_bwd_where(const ts_kctx *k) {
    ts_where_backward(k->din[1], k->din[2], k->dout, k->in_int[0], k->in[0], &k->out_shape, &k->in_shape[0], &k->in_shape[1], &k->in_shape[2]);
}

void ts_fwd_masked_fill(const ts_kctx *k) {
    ts_masked_fill_forward(k->pool, k->out, k->in[0], k->in_int[1], k->node->fattr[0], &k->out_shape, &k->in_shape[1]);
}
void ts_bwd_masked_fill(const ts_kctx *k) {
    if (k->din[0]) ts_masked_fill_backward(k->pool, k->din[0], k->dout, k->in_int[1], &k->out_shape, &k->in_shape[1]);
}

/* Attention's geometry from its shapes (in[3]: the mask, aligned on the
 * right of [B,H,T,S]) */
static ts_attn_geom attn_geom(const ts_shape *in, const ts_tensor *node, const int32_t *mask) {
    const ts_shape *q = &in[0], *k = &in[1], *v = &in[2], *m = &in[3];
    ts_attn_copies c = ts_attention_copies(node);
    ts_attn_geom g = {q->d[0], q->d[1], q->d[2], k->d[2], q->d[3], v->d[3], k->d[1], node ? node->fattr[0] : 0.0f, mask, {0, 0, 0, 0},
                      c.why_not ? 0 : c.which, c.dtype};
    int64_t stride = 1;
    for (int d = m->ndim - 1, e = 3; d >= 0; d--, e--) {
        g.ms[e] = m->d[d] == 1 ? 0 : stride;
        stride *= m->d[d];
    }
    return g;
}

size_t ts_cpu_workspace_attention(const ts_shape *in, const ts_dtype *in_dtype, const ts_shape *out, int threads) {
    (void)in_dtype;
    (void)out;
    ts_attn_geom g = attn_geom(in, NULL, NULL);
    return ts_attention_workspace(&g, threads);
}

/* With its unfused twin given (in[4]: the executor gives it when the
 * unfused ops ran), the node is a copy of it; else the one pass. */
void ts_fwd_attention(const ts_kctx *k) {
    if (k->n_in == 5 && k->in[4]) {
        ts_copy_forward(k->pool, k->out, k->in[4], numel_out(k));
        return;
    }
    ts_attn_geom g = attn_geom(k->in_shape, k->node, k->in_int[3]);
    ts_attention_forward(k->pool, k->workspace, k->out, k->scratch, k->in[0], k->in[1], k->in[2], &g, k->att_sums);
}
void ts_bwd_attention(const ts_kctx *k) {
    if (k->n_in == 5 && k->in[4]) { /* the twin's ops carry the gradient to q, k and v: they add to them */
        for (int j = 0; j < 3; j++)
            if (k->din[j] && (k->din_store >> j & 1u)) ts_zero(k->pool, k->din[j], ts_shape_numel(&k->in_shape[j]));
        if (k->din[4] && (k->din_store >> 4 & 1u)) ts_copy_forward(k->pool, k->din[4], k->dout, numel_out(k));
        else if (k->din[4]) ts_copy_backward(k->pool, k->din[4], k->dout, numel_out(k));
        return;
    }
    ts_attn_geom g = attn_geom(k->in_shape, k->node, k->in_int[3]);
    ts_attention_backward(k->pool, k->workspace, k->din[0], k->din[1], k->din[2], k->dout, k->in[0], k->in[1], k->in[2], k->out, k->scratch,
                          &g, k->din_store & 7u);
}

static int red_kind(ts_op op) { return op == TS_OP_REDUCE_SUM_AXES ? TS_RED_SUM : op == TS_OP_REDUCE_MEAN_AXES ? TS_RED_MEAN : TS_RED_MAX; }
void ts_fwd_reduce_axes(const ts_kctx *k) {
    ts_shape r = ts_reduce_kept_shape(k->node, &k->in_shape[0]);
    ts_reduce_axes_forward(red_kind(k->node->op), k->out, k->in[0], &k->in_shape[0], &r);
}
void ts_bwd_reduce_axes(const ts_kctx *k) {
    ts_shape r = ts_reduce_kept_shape(k->node, &k->in_shape[0]);
    ts_reduce_axes_backward(red_kind(k->node->op), k->din[0], k->dout, k->in[0], k->out, &k->in_shape[0], &r);
}

static int64_t ce_rows(const ts_kctx *k, int64_t *V) {
    *V = k->in_shape[0].d[k->in_shape[0].ndim - 1];
    return ts_shape_numel(&k->in_shape[1]);
}
void ts_fwd_cross_entropy(const ts_kctx *k) {
    int64_t V, rows = ce_rows(k, &V);
    ts_ce_forward(k->pool, k->out, k->scratch, k->in[0], k->in_int[1], rows, V, k->node->attr[0] != 0, (int32_t)k->node->attr[1]);
}
void ts_bwd_cross_entropy(const ts_kctx *k) {
    int64_t V, rows = ce_rows(k, &V);
    ts_ce_backward(k->din[0], k->dout, k->scratch, k->in_int[1], rows, V, k->node->attr[0] != 0, (int32_t)k->node->attr[1]);
}

static void softmax_dims(const ts_kctx *k, int64_t *outer, int64_t *dim, int64_t *inner) {
    const ts_shape *s = &k->in_shape[0];
    int d = k->node->iparam < 0 ? k->node->iparam + s->ndim : k->node->iparam;
    around(s, d, outer, inner);
    *dim = s->d[d];
}

void ts_fwd_softmax_any(const ts_kctx *k) {
    int64_t o, d, i;
    bool log = k->node->op == TS_OP_LOG_SOFTMAX;
    softmax_dims(k, &o, &d, &i);
    if (i == 1) ts_softmax_rows_forward(k->pool, k->out, k->in[0], o, d, log);
    else if (log) ts_log_softmax_forward(k->out, k->in[0], o, d, i);
    else ts_softmax_forward(k->out, k->in[0], o, d, i);
}

void ts_bwd_softmax_any(const ts_kctx *k) {
    int64_t o, d, i;
    bool log = k->node->op == TS_OP_LOG_SOFTMAX;
    softmax_dims(k, &o, &d, &i);
    if (i == 1) ts_softmax_rows_backward(k->pool, k->din[0], k->dout, k->out, o, d, log);
    else if (log) ts_log_softmax_backward(k->din[0], k->dout, k->out, o, d, i);
    else ts_softmax_backward(k->din[0], k->dout, k->out, o, d, i);
}

void ts_fwd_pad(const ts_kctx *k) {
    ts_pad_geom g = ts_pad_geom_of(k->node, &k->in_shape[0], &k->out_shape);
    ts_pad_forward(k->out, k->in[0], &g, numel_out(k));
}
void ts_bwd_pad(const ts_kctx *k) {
    if (!k->din[0]) return;
    ts_pad_geom g = ts_pad_geom_of(k->node, &k->in_shape[0], &k->out_shape);
    ts_pad_backward(k->din[0], k->dout, &g, ts_shape_numel(&k->in_shape[0]));
}

/* TS_OP_INT_REDUCE: each output element folds its reduced elements in
 * order (graph/int_math.h) */
void ts_fwd_int_reduce(const ts_kctx *k) {
    ts_shape r = ts_reduce_kept_shape(k->node, &k->in_shape[0]);
    int kind = (int)k->node->attr[2];
    int64_t n = ts_shape_numel(&r), m = n ? ts_shape_numel(&k->in_shape[0]) / n : 0;
    for (int64_t o = 0; o < n; o++) {
        ts_int_fold f = ts_int_reduce_first(kind);
        for (int64_t j = 0; j < m; j++) f = ts_int_reduce_step(kind, f, int_in(k, 0, ts_int_reduce_at(&k->in_shape[0], &r, o, j)), m, k->out_dtype == TS_I32);
        int_out(k, o, ts_int_reduce_last(kind, f, k->out_dtype == TS_I32));
    }
}

/* TS_OP_INT_RESIZE: each output element its levels' sums in double
 * (graph/int_math.h), slices of the outputs over the pool */
typedef struct int_resize_job {
    const ts_kctx *k;
    ts_int_resize_plan p;
    const void *x;
    bool x64;
    int type;
} int_resize_job;

static void int_resize_slice(void *ctx, int64_t begin, int64_t end) {
    const int_resize_job *j = ctx;
    const ts_kctx *k = j->k;
    for (int64_t o = begin; o < end; o++)
        int_out(k, o, ts_int_resize_at(&j->p, j->x, j->x64, k->in_int[1], (const int64_t *)(const void *)k->in[2], &k->out_shape, o, j->type));
}

void ts_fwd_int_resize(const ts_kctx *k) {
    bool x64 = k->in_dtype[0] == TS_I64;
    int_resize_job j = {k, ts_int_resize_plan_of(k->node->attr, &k->in_shape[0], &k->out_shape), x64 ? (const void *)k->in[0] : (const void *)k->in_int[0],
                        x64, k->node->iparam ? k->node->iparam : (int)k->out_dtype};
    ts_pool_for(k->pool, numel_out(k), 4096, int_resize_slice, &j);
}
