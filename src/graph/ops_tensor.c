/* ops_tensor.c -- shape rules, costs and scratch sizes of the tensor and
 * transformer ops. Shape rules say what was built and what would fit; the
 * kernels are each backend's (backend/cpu/adapters_tensor.c). */
#include "graph/ops_tensor.h"

#include <stdio.h>
#include <string.h>

#define SHAPE_ERR(...) ts_error(TS_ERR_SHAPE, __VA_ARGS__)

static const char *sh(const ts_shape *s, char *buf) { return ts_shape_str(s, buf, 96); }
static const char *opname(const ts_tensor *n) { return ts_op_get(n->op)->name; }

/* ------------------------------------------------------------ shape rules */

ts_status ts_shape_broadcast_binary(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    char a[96], b[96];
    if (!ts_broadcast_shape(&in[0], &in[1], out))
        return SHAPE_ERR("%s: %s does not broadcast with %s (numpy's rules: aligned on the right, each pair of dims equal or one of them 1)",
                         opname(n), sh(&in[0], a), sh(&in[1], b));
    return TS_OK;
}

ts_status ts_shape_embedding(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    char a[96], b[96];
    (void)n;
    if (in[0].ndim != 2) return SHAPE_ERR("Embedding: the weight must be [num_embeddings, dim], got %s", sh(&in[0], a));
    if (in[1].ndim >= TS_MAX_DIMS) return SHAPE_ERR("Embedding: indices %s have too many dims (at most %d)", sh(&in[1], b), TS_MAX_DIMS - 1);
    *out = in[1];
    out->d[out->ndim++] = in[0].d[1];
    return TS_OK;
}

/* data[:axis] + indices' shape + data[axis+1:] */
ts_status ts_shape_gather(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    char a[96], b[96];
    int axis = (int)n->attr[0];
    if (axis < 0 || axis >= in[0].ndim) return SHAPE_ERR("Gather: axis %d is out of range for data %s", axis, sh(&in[0], a));
    if (in[0].ndim - 1 + in[1].ndim > TS_MAX_DIMS)
        return SHAPE_ERR("Gather: data %s by indices %s would have more than %d dims", sh(&in[0], a), sh(&in[1], b), TS_MAX_DIMS);
    ts_shape s = {0};
    for (int i = 0; i < axis; i++) s.d[s.ndim++] = in[0].d[i];
    for (int i = 0; i < in[1].ndim; i++) s.d[s.ndim++] = in[1].d[i];
    for (int i = axis + 1; i < in[0].ndim; i++) s.d[s.ndim++] = in[0].d[i];
    *out = s;
    return TS_OK;
}

void ts_gather_dims(const ts_shape *data, int axis, int64_t *outer, int64_t *V, int64_t *C) {
    *outer = 1, *C = 1, *V = data->d[axis];
    for (int i = 0; i < axis; i++) *outer *= data->d[i];
    for (int i = axis + 1; i < data->ndim; i++) *C *= data->d[i];
}

/* the indices' shape: of data's rank, no larger off the axis */
ts_status ts_shape_gather_elements(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    char a[96], b[96];
    int axis = (int)n->attr[0];
    bool ok = in[0].ndim == in[1].ndim && axis >= 0 && axis < in[0].ndim;
    for (int i = 0; ok && i < in[0].ndim; i++) ok = i == axis || in[1].d[i] <= in[0].d[i];
    if (!ok)
        return SHAPE_ERR("GatherElements: indices %s must have data %s's rank and be no larger off axis %d", sh(&in[1], b), sh(&in[0], a), axis);
    *out = in[1];
    return TS_OK;
}

void ts_group_norm_dims(const ts_shape *x, int64_t *N, int64_t *C, int64_t *S) {
    *N = x->ndim > 0 ? x->d[0] : 1, *C = x->ndim > 1 ? x->d[1] : 1;
    *S = *N * *C > 0 ? ts_shape_numel(x) / (*N * *C) : 0;
}

ts_status ts_shape_group_norm(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    char a[96], b[96];
    int64_t G = n->attr[0];
    if (in[0].ndim < 2) return SHAPE_ERR("GroupNorm: the input %s must be [N, C, ...]", sh(&in[0], a));
    if (G < 1 || in[0].d[1] % G)
        return SHAPE_ERR("GroupNorm: %lld groups must divide the %lld channels of the input %s", (long long)G, (long long)in[0].d[1], sh(&in[0], a));
    for (int j = 1; j <= 2; j++)
        if (in[j].ndim != 1 || in[j].d[0] != in[0].d[1])
            return SHAPE_ERR("GroupNorm: the %s %s must be [%lld], one value per channel of the input %s", j == 1 ? "weight" : "bias", sh(&in[j], b),
                             (long long)in[0].d[1], sh(&in[0], a));
    *out = in[0];
    return TS_OK;
}

ts_status ts_shape_layer_norm(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    char a[96], b[96], c[96];
    int k = (int)n->attr[0];
    if (k < 1 || k > in[0].ndim)
        return SHAPE_ERR("LayerNorm: normalises the last %d dims but the input %s has %d", k, sh(&in[0], a), in[0].ndim);
    for (int j = 1; j <= 2; j++) {
        bool ok = in[j].ndim == k;
        for (int i = 0; ok && i < k; i++) ok = in[j].d[i] == in[0].d[in[0].ndim - k + i];
        if (!ok)
            return SHAPE_ERR("LayerNorm: the %s %s must have the shape of the last %d dims of the input %s", j == 1 ? "weight" : "bias",
                             sh(&in[j], b), k, sh(&in[0], c));
    }
    *out = in[0];
    return TS_OK;
}

/* x, and an optional weight of x's last dim */
ts_status ts_shape_rms_norm(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    char a[96], b[96];
    if (n->n_in < 1 || n->n_in > 2) return SHAPE_ERR("RMSNorm takes an input and an optional weight, got %d inputs", n->n_in);
    if (in[0].ndim < 1) return SHAPE_ERR("RMSNorm: the input %s needs a dim to normalise", sh(&in[0], a));
    if (n->n_in == 2 && (in[1].ndim != 1 || in[1].d[0] != in[0].d[in[0].ndim - 1]))
        return SHAPE_ERR("RMSNorm: the weight %s must be [%lld], the last dim of the input %s", sh(&in[1], b),
                         (long long)in[0].d[in[0].ndim - 1], sh(&in[0], a));
    *out = in[0];
    return TS_OK;
}

ts_status ts_shape_bmm(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    char a[96], b[96];
    bool ta = n->attr[0] != 0, tb = n->attr[1] != 0;
    const ts_shape *sa = &in[0], *sb = &in[1];
    if (sa->ndim < 2 || sb->ndim < 2)
        return SHAPE_ERR("MatMul (batched): operands need at least 2 dims, got %s and %s", sh(sa, a), sh(sb, b));
    int64_t M = sa->d[sa->ndim - (ta ? 1 : 2)], Ka = sa->d[sa->ndim - (ta ? 2 : 1)];
    int64_t Kb = sb->d[sb->ndim - (tb ? 1 : 2)], N = sb->d[sb->ndim - (tb ? 2 : 1)];
    if (Ka != Kb)
        return SHAPE_ERR("MatMul (batched%s%s): inner dimensions differ: %s x %s (%lld != %lld)", ta ? ", a transposed" : "",
                         tb ? ", b transposed" : "", sh(sa, a), sh(sb, b), (long long)Ka, (long long)Kb);
    ts_shape ba = *sa, bb = *sb;
    ba.ndim -= 2, bb.ndim -= 2;
    if (!ts_broadcast_shape(&ba, &bb, out))
        return SHAPE_ERR("MatMul (batched): the batch dims of %s and %s do not broadcast", sh(sa, a), sh(sb, b));
    out->d[out->ndim++] = M;
    out->d[out->ndim++] = N;
    return TS_OK;
}

ts_status ts_shape_permute(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    char a[96];
    bool seen[TS_MAX_DIMS] = {false};
    for (int i = 0; i < in[0].ndim; i++) {
        int64_t p = n->attr[i];
        if (p < 0 || p >= in[0].ndim || seen[p])
            return SHAPE_ERR("Transpose: the permutation is not one of the %d dims of %s", in[0].ndim, sh(&in[0], a));
        seen[p] = true;
        out->d[i] = in[0].d[p];
    }
    out->ndim = in[0].ndim;
    return TS_OK;
}

ts_status ts_shape_pad(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    char a[96];
    if (n->iparam < TS_PAD_CONSTANT || n->iparam > TS_PAD_WRAP)
        return SHAPE_ERR("Pad: mode %d is no ts_pad_mode (TS_PAD_CONSTANT, _REFLECT, _EDGE or _WRAP)", n->iparam);
    *out = in[0];
    for (int d = 0; d < in[0].ndim; d++) {
        out->d[d] += n->attr[d] + n->attr[TS_MAX_DIMS + d];
        if (out->d[d] < 1)
            return SHAPE_ERR("Pad: pads %lld before and %lld after dim %d of %s leave %lld elements; at least 1 must stay",
                             (long long)n->attr[d], (long long)n->attr[TS_MAX_DIMS + d], d, sh(&in[0], a), (long long)out->d[d]);
    }
    return TS_OK;
}

ts_status ts_shape_slice(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    char a[96];
    int64_t dim = n->attr[0], start = n->attr[1], len = n->attr[2];
    if (dim < 0 || dim >= in[0].ndim) return SHAPE_ERR("Slice: dim %lld is out of range for %s", (long long)dim, sh(&in[0], a));
    if (start < 0 || len < 1 || start + len > in[0].d[dim])
        return SHAPE_ERR("Slice: [%lld, %lld) is not inside dim %lld of %s", (long long)start, (long long)(start + len), (long long)dim,
                         sh(&in[0], a));
    *out = in[0];
    out->d[dim] = len;
    return TS_OK;
}

ts_status ts_shape_concat(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    char a[96], b[96];
    int64_t dim = n->attr[0];
    if (dim < 0 || dim >= in[0].ndim) return SHAPE_ERR("Concat: dim %lld is out of range for %s", (long long)dim, sh(&in[0], a));
    *out = in[0];
    for (int k = 1; k < n->n_in; k++) {
        bool ok = in[k].ndim == in[0].ndim;
        for (int i = 0; ok && i < in[0].ndim; i++) ok = i == dim || in[k].d[i] == in[0].d[i];
        if (!ok)
            return SHAPE_ERR("Concat along dim %lld: input %d %s does not match input 1 %s outside that dim", (long long)dim, k + 1,
                             sh(&in[k], b), sh(&in[0], a));
        out->d[dim] += in[k].d[dim];
    }
    return TS_OK;
}

ts_status ts_shape_where(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    char a[96], b[96], c[96];
    (void)n;
    ts_shape ab;
    if (!ts_broadcast_shape(&in[1], &in[2], &ab) || !ts_broadcast_shape(&in[0], &ab, out))
        return SHAPE_ERR("Where: condition %s, a %s and b %s do not broadcast together", sh(&in[0], a), sh(&in[1], b), sh(&in[2], c));
    return TS_OK;
}

ts_status ts_shape_masked_fill(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    char a[96], b[96];
    (void)n;
    if (!ts_broadcast_shape(&in[0], &in[1], out) || !ts_shape_equal(out, &in[0]))
        return SHAPE_ERR("MaskedFill: the mask %s must broadcast to the input %s", sh(&in[1], b), sh(&in[0], a));
    return TS_OK;
}

/* q [B,H,T,D], k [B,H,S,D], v [B,H,S,Dv], mask broadcasting to [B,H,T,S],
 * the unfused twin (when given) [B,H,T,Dv] -> [B,H,T,Dv] */
ts_status ts_shape_attention(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    char a[96], b[96], c[96];
    if (n->n_in != 4 && n->n_in != 5) return SHAPE_ERR("Attention: takes q, k, v, a mask and optionally its unfused twin, got %d inputs", n->n_in);
    const ts_shape *q = &in[0], *k = &in[1], *v = &in[2];
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4)
        return SHAPE_ERR("Attention: q, k and v must be [batch, heads, positions, channels], got %s, %s and %s", sh(q, a), sh(k, b), sh(v, c));
    if (q->d[0] != k->d[0] || k->d[1] < 1 || q->d[1] % k->d[1] || k->d[0] != v->d[0] || k->d[1] != v->d[1] || k->d[2] != v->d[2] ||
        q->d[3] != k->d[3])
        return SHAPE_ERR("Attention: q %s, k %s and v %s must share the batch, k and v their heads (q's heads a multiple of them: "
                         "grouped-query) and positions, q and k their channels", sh(q, a), sh(k, b), sh(v, c));
    ts_shape scores = {4, {q->d[0], q->d[1], q->d[2], k->d[2]}}, bc;
    if (in[3].ndim > 4 || !ts_broadcast_shape(&scores, &in[3], &bc) || !ts_shape_equal(&bc, &scores))
        return SHAPE_ERR("Attention: the mask %s must broadcast to the scores %s", sh(&in[3], a), sh(&scores, b));
    *out = (ts_shape){4, {q->d[0], q->d[1], q->d[2], v->d[3]}};
    if (n->n_in == 5 && !ts_shape_equal(&in[4], out))
        return SHAPE_ERR("Attention: its unfused twin is %s where the attention gives %s", sh(&in[4], a), sh(out, b));
    return TS_OK;
}

double ts_flops_attention(const ts_shape *in, const ts_shape *out) {
    int64_t S = in[1].d[2], D = in[0].d[3];
    return 2.0 * (double)ts_shape_numel(out) * (double)S + 2.0 * (double)(ts_shape_numel(out) / out->d[3]) * (double)(S * D);
}

/* the log-sum-exp of each query's scores, for the backward */
size_t ts_scratch_attention(const ts_shape *in, const ts_shape *out) {
    (void)in;
    return (size_t)(ts_shape_numel(out) / out->d[3]);
}

/* the reduced shape with the reduced dims kept as 1 */
ts_shape ts_reduce_kept_shape(const ts_tensor *n, const ts_shape *x) {
    ts_shape r = *x;
    for (int i = 0; i < x->ndim; i++)
        if ((n->attr[0] >> i) & 1) r.d[i] = 1;
    return r;
}

ts_status ts_shape_reduce_axes(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    char a[96];
    if (n->attr[0] >> in[0].ndim)
        return SHAPE_ERR("%s: an axis is out of range for %s", opname(n), sh(&in[0], a));
    ts_shape r = ts_reduce_kept_shape(n, &in[0]);
    if (!n->attr[1]) {
        int k = 0;
        for (int i = 0; i < in[0].ndim; i++)
            if (!((n->attr[0] >> i) & 1)) r.d[k++] = in[0].d[i];
        r.ndim = k;
    }
    *out = r;
    return TS_OK;
}

ts_status ts_shape_cross_entropy(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    char a[96], b[96];
    const ts_tensor *labels = n->g->t[n->in[1]];
    if (labels->dtype != TS_I32)
        return SHAPE_ERR("%s: labels '%s' must be an i32 tensor, not %s", opname(n), labels->name, ts_dtype_name(labels->dtype));
    bool ok = in[0].ndim >= 2 && in[1].ndim == in[0].ndim - 1;
    for (int i = 0; ok && i < in[1].ndim; i++) ok = in[1].d[i] == in[0].d[i];
    if (!ok)
        return SHAPE_ERR("%s: expects logits [N,...,V] and labels [N,...] (the logits' shape without its last dim), got %s and %s",
                         opname(n), sh(&in[0], a), sh(&in[1], b));
    *out = (ts_shape){.ndim = 0};
    return TS_OK;
}

/* ------------------------------------------------------------------ costs */

double ts_flops_bmm(const ts_shape *in, const ts_shape *out) {
    /* a's last two dims hold M x K, stored transposed or not */
    const ts_shape *a = &in[0];
    int64_t K = a->d[a->ndim - 1] * a->d[a->ndim - 2] / out->d[out->ndim - 2];
    return 2.0 * (double)ts_shape_numel(out) * (double)K;
}
double ts_flops_layer_norm(const ts_shape *in, const ts_shape *out) { (void)in; return 8.0 * (double)ts_shape_numel(out); }
size_t ts_scratch_layer_norm(const ts_shape *in, const ts_shape *out) {
    return 2 * (size_t)(ts_shape_numel(out) / ts_shape_numel(&in[1]));
}
size_t ts_scratch_rms_norm(const ts_shape *in, const ts_shape *out) { /* each row's 1 / rms */
    (void)in;
    int64_t D = out->ndim ? out->d[out->ndim - 1] : 1;
    return (size_t)(D ? ts_shape_numel(out) / D : 0);
}
size_t ts_scratch_group_norm(const ts_shape *in, const ts_shape *out) { /* (mean, rstd) per sample and group: room for C groups */
    int64_t N, C, S;
    (void)out;
    ts_group_norm_dims(&in[0], &N, &C, &S);
    return 2 * (size_t)N * (size_t)C;
}
size_t ts_scratch_cross_entropy(const ts_shape *in, const ts_shape *out) { (void)out; return (size_t)ts_shape_numel(&in[0]); }
