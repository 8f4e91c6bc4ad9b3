/* ops.c -- the op table: one row per op, semantics only. Shape rules check
 * what the user built and say what would fit; the kernels are each
 * backend's (backend/cpu/cpu.c holds the CPU's rows). */
#include "graph/ops.h"

#include "graph/cnn_ops.h"
#include "graph/ops_tensor.h"

#include <stdio.h>
#include <string.h>

#define SHAPE_ERR(...) ts_error(TS_ERR_SHAPE, __VA_ARGS__)

static const char *sh(const ts_shape *s, char *buf) { return ts_shape_str(s, buf, 96); }

/* ------------------------------------------------------------ shape rules */

static ts_status shape_leaf(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    (void)n, (void)in, (void)out;
    return TS_OK; /* declared by the user */
}

static ts_status shape_matmul(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    char a[96], b[96];
    bool t = n->op == TS_OP_MATMUL_T;
    if (in[0].ndim != 2 || in[1].ndim != 2)
        return SHAPE_ERR("MatMul needs 2-D operands, got %s and %s", sh(&in[0], a), sh(&in[1], b));
    int64_t k2 = t ? in[1].d[1] : in[1].d[0];
    if (in[0].d[1] != k2)
        return SHAPE_ERR("MatMul%s: inner dimensions differ: %s x %s%s (%lld != %lld)", t ? " (B transposed)" : "",
                         sh(&in[0], a), sh(&in[1], b), t ? "^T" : "", (long long)in[0].d[1], (long long)k2);
    *out = (ts_shape){.ndim = 2, .d = {in[0].d[0], t ? in[1].d[0] : in[1].d[1]}};
    return TS_OK;
}

static ts_status shape_same(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    (void)n;
    *out = in[0];
    return TS_OK;
}

/* TS_OP_INT_RESIZE (graph.h): x's shape, each level's dim resized; taps
 * and weights hold every level's taps */
static ts_status shape_int_resize(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    char a[96], b[96];
    int64_t total = 0, taps = ts_shape_numel(&in[1]);
    unsigned seen = 0;
    int L = 0;
    *out = in[0];
    for (; L < TS_MAX_DIMS && (n->attr[2 * L + 1] & 0xffff) != 0; L++) {
        int64_t d = n->attr[2 * L] & 255, t = n->attr[2 * L + 1] & 0xffff, o = n->attr[2 * L + 1] >> 16;
        if (d < 0 || d >= in[0].ndim || ((seen >> d) & 1u))
            return SHAPE_ERR("IntResize: level %d resizes dim %lld of %s, which is %s", L, (long long)d, sh(&in[0], a),
                             d < 0 || d >= in[0].ndim ? "not one of its dims" : "an earlier level's");
        if (o == 0 && L > 0) return SHAPE_ERR("IntResize: level %d gives no size (only a single level takes its size from the taps)", L);
        if (o == 0) o = taps / t;
        seen |= 1u << d, out->d[d] = o, total += o * t;
    }
    if (L == 0 || taps != total || ts_shape_numel(&in[2]) != total)
        return SHAPE_ERR("IntResize: %d levels of %lld taps in all; the taps %s and weights %s must hold them", L, (long long)total, sh(&in[1], a),
                         sh(&in[2], b));
    return TS_OK;
}

static ts_status shape_reshape(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    char a[96], b[96];
    int64_t numel = ts_shape_numel(&in[0]);
    if (n->sparam.ndim < 0) { /* flatten(start_dim) */
        int sd = n->iparam < 0 ? n->iparam + in[0].ndim : n->iparam;
        if (sd < 0 || (sd >= in[0].ndim && !(in[0].ndim == 0 && sd == 0)))
            return SHAPE_ERR("Flatten: start_dim %d is out of range for %s", n->iparam, sh(&in[0], a));
        ts_shape s = {.ndim = sd + 1};
        for (int i = 0; i < sd; i++) s.d[i] = in[0].d[i];
        s.d[sd] = 1;
        for (int i = sd; i < in[0].ndim; i++) s.d[sd] *= in[0].d[i];
        *out = s;
        return TS_OK;
    }
    ts_shape s = n->sparam;
    int minus = -1;
    int64_t known = 1;
    for (int i = 0; i < s.ndim; i++) {
        if (s.d[i] == -1 && minus < 0) minus = i;
        else if (s.d[i] <= 0) return SHAPE_ERR("Reshape: target %s has a bad dimension (positive sizes and at most one -1)", sh(&s, b));
        else known *= s.d[i];
    }
    if (minus >= 0) {
        if (numel % known) return SHAPE_ERR("Reshape: %s cannot be viewed as %s", sh(&in[0], a), sh(&s, b));
        s.d[minus] = numel / known;
    }
    if (ts_shape_numel(&s) != numel)
        return SHAPE_ERR("Reshape: %s (%lld elements) cannot be viewed as %s", sh(&in[0], a), (long long)numel, sh(&s, b));
    *out = s;
    return TS_OK;
}

static ts_status shape_softmax(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    char a[96];
    int d = n->iparam < 0 ? n->iparam + in[0].ndim : n->iparam;
    if (in[0].ndim < 1 || d < 0 || d >= in[0].ndim)
        return SHAPE_ERR("%s: dim %d is out of range for %s", ts_op_get(n->op)->name, n->iparam, sh(&in[0], a));
    *out = in[0];
    return TS_OK;
}

static ts_status shape_loss(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    char a[96], b[96];
    const ts_tensor *labels = n->g->t[n->in[1]];
    if (labels->dtype != TS_I32)
        return SHAPE_ERR("%s: labels '%s' must be an i32 input, not %s", ts_op_get(n->op)->name, labels->name, ts_dtype_name(labels->dtype));
    if (in[0].ndim != 2 || in[1].ndim != 1 || in[0].d[0] != in[1].d[0])
        return SHAPE_ERR("%s: expects scores [B,C] and labels [B], got %s and %s", ts_op_get(n->op)->name, sh(&in[0], a), sh(&in[1], b));
    *out = (ts_shape){.ndim = 0};
    return TS_OK;
}

static ts_status shape_reduce(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    (void)n, (void)in;
    *out = (ts_shape){.ndim = 0};
    return TS_OK;
}

/* TS_OP_INT_MATMUL: ts_shape_bmm's product of two integer tensors of one
 * dtype, and Gemm's C (integers) broadcast to it */
static ts_status shape_int_matmul(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    char a[96], b[96];
    const ts_tensor *x = n->g->t[n->in[0]], *y = n->n_in > 1 ? n->g->t[n->in[1]] : NULL, *c = n->n_in > 2 ? n->g->t[n->in[2]] : NULL;
    if (n->n_in < 2 || n->n_in > 3) return SHAPE_ERR("IntMatMul takes a, b and an optional c, not %d inputs", n->n_in);
    if ((x->dtype != TS_I32 && x->dtype != TS_I64) || y->dtype != x->dtype || (c && c->dtype != TS_I32 && c->dtype != TS_I64))
        return SHAPE_ERR("IntMatMul: '%s' is %s and '%s' is %s; it multiplies i32 or i64 tensors of one dtype (ts_cast one)%s", x->name,
                         ts_dtype_name(x->dtype), y->name, ts_dtype_name(y->dtype), c && c->dtype != TS_I32 && c->dtype != TS_I64 ? ", and adds an integer c" : "");
    if (n->dtype != x->dtype) return SHAPE_ERR("IntMatMul: its output is %s; it is its operands' dtype, %s", ts_dtype_name(n->dtype), ts_dtype_name(x->dtype));
    if (n->attr[2] != 0 && n->attr[2] != 1) return SHAPE_ERR("IntMatMul: attr[2] is %lld; 0 (wrapping) or 1 (Gemm in double)", (long long)n->attr[2]);
    ts_status st = ts_shape_bmm(n, in, out);
    if (st || !c) return st;
    ts_shape s;
    if (!ts_broadcast_shape(out, &in[2], &s) || s.ndim != out->ndim || memcmp(s.d, out->d, sizeof(int64_t) * (size_t)s.ndim) != 0)
        return SHAPE_ERR("IntMatMul: c %s does not broadcast to the product %s", sh(&in[2], a), sh(out, b));
    return TS_OK;
}

/* ------------------------------------------------------------------ costs */

static double flops_matmul(const ts_shape *in, const ts_shape *out) { return 2.0 * (double)in[0].d[0] * (double)in[0].d[1] * (double)out->d[1]; }
static double flops_elementwise(const ts_shape *in, const ts_shape *out) { (void)in; return (double)ts_shape_numel(out); }
static double flops_input(const ts_shape *in, const ts_shape *out) { (void)out; return (double)ts_shape_numel(&in[0]); }
static double flops_softmax(const ts_shape *in, const ts_shape *out) { (void)in; return 5.0 * (double)ts_shape_numel(out); }

/* ------------------------------------------------------------------ table */

/* Designated by enum value, so a row can never land at the wrong index. */
static const ts_op_def table[] = {
    [TS_OP_INPUT] = {.op = TS_OP_INPUT, .name = "Input", .shape = shape_leaf},
    [TS_OP_PARAM] = {.op = TS_OP_PARAM, .name = "Param", .shape = shape_leaf},
    [TS_OP_MATMUL] = {.op = TS_OP_MATMUL, .name = "MatMul", .arity = 2, .has_backward = true, .shape = shape_matmul, .flops = flops_matmul, .sample = {.shapes = TS_SAMPLE_MATMUL}},
    [TS_OP_MATMUL_T] = {.op = TS_OP_MATMUL_T, .name = "MatMul", .arity = 2, .has_backward = true, .shape = shape_matmul, .flops = flops_matmul, .sample = {.shapes = TS_SAMPLE_MATMUL, .attrs.attr = {0, 1}}},
    [TS_OP_ADD] = {.op = TS_OP_ADD, .name = "Add", .arity = 2, .bwd_unread_inputs = 0x3u, .has_backward = true, .shape = ts_shape_broadcast_binary, .flops = flops_elementwise},
    [TS_OP_SUB] = {.op = TS_OP_SUB, .name = "Sub", .arity = 2, .bwd_unread_inputs = 0x3u, .has_backward = true, .shape = ts_shape_broadcast_binary, .flops = flops_elementwise},
    [TS_OP_MUL] = {.op = TS_OP_MUL, .name = "Mul", .arity = 2, .has_backward = true, .shape = ts_shape_broadcast_binary, .flops = flops_elementwise},
    [TS_OP_SCALE] = {.op = TS_OP_SCALE, .name = "Scale", .arity = 1, .bwd_unread_inputs = 0x1u, .has_backward = true, .shape = shape_same, .flops = flops_elementwise, .sample = {.attrs.fparam = 2.5f}},
    [TS_OP_RELU] = {.op = TS_OP_RELU, .name = "Relu", .arity = 1, .needs_output = true, .bwd_unread_inputs = 0x1u, .has_backward = true, .shape = shape_same, .flops = flops_elementwise},
    [TS_OP_LOG] = {.op = TS_OP_LOG, .name = "Log", .arity = 1, .has_backward = true, .shape = shape_same, .flops = flops_elementwise, .sample = {.lo = 0.5f, .hi = 2.0f}},
    [TS_OP_RESHAPE] = {.op = TS_OP_RESHAPE, .name = "Reshape", .arity = 1, .bwd_unread_inputs = 0x1u, .view = true, .keeps_int = true, .has_backward = true, .shape = shape_reshape, .sample = {.attrs.sparam = {.ndim = 1, .d = {-1}}}},
    [TS_OP_FLATTEN] = {.op = TS_OP_FLATTEN, .name = "Flatten", .arity = 1, .bwd_unread_inputs = 0x1u, .view = true, .keeps_int = true, .has_backward = true, .shape = shape_reshape, .sample = {.attrs.sparam.ndim = -1}},
    [TS_OP_LOG_SOFTMAX] = {.op = TS_OP_LOG_SOFTMAX, .name = "LogSoftmax", .arity = 1, .needs_output = true, .bwd_unread_inputs = 0x1u, .has_backward = true, .shape = shape_softmax, .flops = flops_softmax, .sample = {.attrs.iparam = -1}},
    [TS_OP_SOFTMAX] = {.op = TS_OP_SOFTMAX, .name = "Softmax", .arity = 1, .needs_output = true, .bwd_unread_inputs = 0x1u, .has_backward = true, .shape = shape_softmax, .flops = flops_softmax, .sample = {.attrs.iparam = -1}},
    [TS_OP_NLL_LOSS] = {.op = TS_OP_NLL_LOSS, .name = "NllLoss", .arity = 2, .int_inputs = 1u << 1, .bwd_unread_inputs = 0x1u, .has_backward = true, .shape = shape_loss, .flops = flops_input, .sample = {.shapes = TS_SAMPLE_LABELS, .ints = TS_SAMPLE_LAST}},
    [TS_OP_CROSS_ENTROPY] = {.op = TS_OP_CROSS_ENTROPY, .name = "CrossEntropy", .arity = 2, .int_inputs = 1u << 1, .bwd_unread_inputs = 0x1u, .has_backward = true, .shape = ts_shape_cross_entropy, .flops = flops_softmax, .scratch_floats = ts_scratch_cross_entropy, .sample = {.shapes = TS_SAMPLE_LABELS, .ints = TS_SAMPLE_LAST}},
    [TS_OP_SUM] = {.op = TS_OP_SUM, .name = "ReduceSum", .arity = 1, .bwd_unread_inputs = 0x1u, .has_backward = true, .shape = shape_reduce, .flops = flops_input},
    [TS_OP_MEAN] = {.op = TS_OP_MEAN, .name = "ReduceMean", .arity = 1, .bwd_unread_inputs = 0x1u, .has_backward = true, .shape = shape_reduce, .flops = flops_input},
    /* the executor adds the printing around the copy (its kernels are a copy) */
    [TS_OP_PRINT] = {.op = TS_OP_PRINT, .name = "Print", .arity = 1, .bwd_unread_inputs = 0x1u, .has_backward = true, .shape = shape_same, .sample = {.attrs.title = "sample"}},
    /* tensor and transformer ops (ops_tensor.c) */
    [TS_OP_CONST] = {.op = TS_OP_CONST, .name = "Const", .shape = shape_leaf},
    [TS_OP_DIV] = {.op = TS_OP_DIV, .name = "Div", .arity = 2, .has_backward = true, .shape = ts_shape_broadcast_binary, .flops = flops_elementwise, .sample = {.lo = 0.5f, .hi = 2.0f}},
    [TS_OP_EXP] = {.op = TS_OP_EXP, .name = "Exp", .arity = 1, .bwd_unread_inputs = 0x1u, .needs_output = true, .has_backward = true, .shape = shape_same, .flops = flops_elementwise},
    [TS_OP_SQRT] = {.op = TS_OP_SQRT, .name = "Sqrt", .arity = 1, .bwd_unread_inputs = 0x1u, .needs_output = true, .has_backward = true, .shape = shape_same, .flops = flops_elementwise, .sample = {.lo = 0.5f, .hi = 2.0f}},
    [TS_OP_POW] = {.op = TS_OP_POW, .name = "Pow", .arity = 1, .has_backward = true, .shape = shape_same, .flops = flops_elementwise, .sample = {.lo = 0.5f, .hi = 2.0f, .attrs.fattr = {1.5f}}},
    [TS_OP_ERF] = {.op = TS_OP_ERF, .name = "Erf", .arity = 1, .has_backward = true, .shape = shape_same, .flops = flops_elementwise},
    [TS_OP_GELU] = {.op = TS_OP_GELU, .name = "Gelu", .arity = 1, .has_backward = true, .shape = shape_same, .flops = flops_elementwise},
    [TS_OP_EMBEDDING] = {.op = TS_OP_EMBEDDING, .name = "Embedding", .arity = 2, .bwd_unread_inputs = 0x1u, .int_inputs = 1u << 1, .has_backward = true, .shape = ts_shape_embedding, .flops = flops_elementwise, .sample = {.shapes = TS_SAMPLE_INDICES, .rank = 2, .ints = TS_SAMPLE_AXIS}},
    [TS_OP_LAYER_NORM] = {.op = TS_OP_LAYER_NORM, .name = "LayerNorm", .arity = 3, .bwd_unread_inputs = 0x4u, .has_backward = true, .shape = ts_shape_layer_norm, .flops = ts_flops_layer_norm, .scratch_floats = ts_scratch_layer_norm, .sample = {.shapes = TS_SAMPLE_TRAILING, .attrs = {.attr = {1}, .fattr = {1e-5f}}}},
    [TS_OP_GROUP_NORM] = {.op = TS_OP_GROUP_NORM, .name = "GroupNorm", .arity = 3, .bwd_unread_inputs = 0x4u, .has_backward = true, .shape = ts_shape_group_norm, .flops = ts_flops_layer_norm, .scratch_floats = ts_scratch_group_norm, .sample = {.shapes = TS_SAMPLE_CHANNELS, .attrs = {.attr = {3}, .fattr = {1e-5f}}}},
    [TS_OP_BATCH_MATMUL] = {.op = TS_OP_BATCH_MATMUL, .name = "MatMul", .arity = 2, .has_backward = true, .shape = ts_shape_bmm, .flops = ts_flops_bmm, .sample = {.shapes = TS_SAMPLE_MATMUL, .rank = 3}},
    [TS_OP_PERMUTE] = {.op = TS_OP_PERMUTE, .name = "Transpose", .arity = 1, .bwd_unread_inputs = 0x1u, .keeps_int = true, .has_backward = true, .shape = ts_shape_permute, .sample = {.rank = 3, .attrs.attr = {2, 0, 1}}},
    [TS_OP_SLICE] = {.op = TS_OP_SLICE, .name = "Slice", .arity = 1, .bwd_unread_inputs = 0x1u, .keeps_int = true, .has_backward = true, .shape = ts_shape_slice, .sample = {.attrs.attr = {0, 1, 2}}},
    [TS_OP_CONCAT] = {.op = TS_OP_CONCAT, .name = "Concat", .arity = TS_ARITY_VARIADIC, .bwd_unread_inputs = 0xffu, .keeps_int = true, .has_backward = true, .shape = ts_shape_concat, .sample = {.n_in = 3}},
    [TS_OP_WHERE] = {.op = TS_OP_WHERE, .bool_inputs = 0x1u, .name = "Where", .arity = 3, .bwd_unread_inputs = 0x6u, .int_inputs = 1u << 0, .keeps_int = true, .has_backward = true, .shape = ts_shape_where, .flops = flops_elementwise},
    [TS_OP_MASKED_FILL] = {.op = TS_OP_MASKED_FILL, .bool_inputs = 0x2u, .name = "MaskedFill", .arity = 2, .bwd_unread_inputs = 0x1u, .int_inputs = 1u << 1, .has_backward = true, .shape = ts_shape_masked_fill, .flops = flops_elementwise, .sample = {.shapes = TS_SAMPLE_BROADCAST, .attrs.fattr = {0.5f}}},
    [TS_OP_REDUCE_SUM_AXES] = {.op = TS_OP_REDUCE_SUM_AXES, .name = "ReduceSum", .arity = 1, .bwd_unread_inputs = 0x1u, .has_backward = true, .shape = ts_shape_reduce_axes, .flops = flops_input, .sample = {.attrs.attr = {1}}},
    [TS_OP_REDUCE_MEAN_AXES] = {.op = TS_OP_REDUCE_MEAN_AXES, .name = "ReduceMean", .arity = 1, .bwd_unread_inputs = 0x1u, .has_backward = true, .shape = ts_shape_reduce_axes, .flops = flops_input, .sample = {.attrs.attr = {1}}},
    [TS_OP_REDUCE_MAX_AXES] = {.op = TS_OP_REDUCE_MAX_AXES, .name = "ReduceMax", .arity = 1, .needs_output = true, .has_backward = true, .shape = ts_shape_reduce_axes, .flops = flops_input, .sample = {.attrs.attr = {1}}},
    /* convolutional networks (graph/cnn_ops.c) */
    [TS_OP_BUFFER] = {.op = TS_OP_BUFFER, .name = "Buffer", .shape = shape_leaf},
    [TS_OP_CONV2D] = {.op = TS_OP_CONV2D, .name = "Conv2d", .arity = TS_ARITY_VARIADIC, .has_backward = true, .shape = ts_shape_conv2d, .flops = ts_flops_conv2d, .sample = {.shapes = TS_SAMPLE_CONV, .rank = 4, .n_in = 3, .attrs.attr = {[CA_SH] = 1, [CA_SW] = 1, [CA_DH] = 1, [CA_DW] = 1, [CA_GROUPS] = 1}}},
    [TS_OP_MAX_POOL2D] = {.op = TS_OP_MAX_POOL2D, .name = "MaxPool2d", .arity = 1, .has_backward = true, .shape = ts_shape_pool2d, .flops = ts_flops_pool2d, .scratch_floats = ts_scratch_max_pool2d, .sample = {.rank = 4, .attrs.attr = {[CA_SH] = 2, [CA_SW] = 2, [PA_KH] = 2, [PA_KW] = 2, [PA_DH] = 1, [PA_DW] = 1}}},
    [TS_OP_AVG_POOL2D] = {.op = TS_OP_AVG_POOL2D, .name = "AvgPool2d", .arity = 1, .bwd_unread_inputs = 0x1u, .has_backward = true, .shape = ts_shape_pool2d, .flops = ts_flops_pool2d, .sample = {.rank = 4, .attrs.attr = {[CA_SH] = 2, [CA_SW] = 2, [PA_KH] = 2, [PA_KW] = 2, [PA_DH] = 1, [PA_DW] = 1}}},
    [TS_OP_GLOBAL_AVG_POOL] = {.op = TS_OP_GLOBAL_AVG_POOL, .name = "GlobalAvgPool", .arity = 1, .bwd_unread_inputs = 0x1u, .has_backward = true, .shape = ts_shape_global_pool, .flops = ts_flops_pool2d, .sample = {.rank = 4}},
    [TS_OP_CONV3D] = {.op = TS_OP_CONV3D, .name = "Conv3d", .arity = TS_ARITY_VARIADIC, .has_backward = true, .shape = ts_shape_conv3d, .flops = ts_flops_conv3d, .sample = {.shapes = TS_SAMPLE_CONV, .rank = 5, .n_in = 3, .attrs.attr = {[C3_S] = 1, 1, 1, [C3_D] = 1, 1, 1, [C3_GROUPS] = 1}}},
    [TS_OP_CONV_TRANSPOSE3D] = {.op = TS_OP_CONV_TRANSPOSE3D, .name = "ConvTranspose3d", .arity = TS_ARITY_VARIADIC, .has_backward = true, .shape = ts_shape_conv3d, .flops = ts_flops_conv3d, .sample = {.shapes = TS_SAMPLE_CONV_T, .rank = 5, .n_in = 3, .attrs.attr = {[C3_S] = 1, 1, 1, [C3_D] = 1, 1, 1, [C3_GROUPS] = 1}}},
    [TS_OP_BATCH_NORM] = {.op = TS_OP_BATCH_NORM, .name = "BatchNorm", .arity = 5, .has_backward = true, .shape = ts_shape_batch_norm, .flops = flops_softmax, .scratch_floats = ts_scratch_batch_norm, .sample = {.shapes = TS_SAMPLE_CHANNELS, .state_inputs = 0x18u, .attrs.fattr = {1e-5f, 0.1f}}},
    [TS_OP_RANDOM_UNIFORM] = {.op = TS_OP_RANDOM_UNIFORM, .name = "RandomUniform", .arity = 1, .bwd_unread_inputs = 0x1u, .shape = ts_shape_dropout_mask, .flops = flops_elementwise, .sample = {.attrs.attr = {7}}},
    [TS_OP_DROPOUT_MASK] = {.op = TS_OP_DROPOUT_MASK, .name = "DropoutMask", .arity = 1, .bwd_unread_inputs = 0x1u, .shape = ts_shape_dropout_mask, .flops = flops_elementwise, .sample = {.attrs = {.attr = {7}, .fattr = {0.5f}}}},
    [TS_OP_TANH] = {.op = TS_OP_TANH, .name = "Tanh", .arity = 1, .bwd_unread_inputs = 0x1u, .needs_output = true, .has_backward = true, .shape = shape_same, .flops = flops_elementwise},
    [TS_OP_SIGMOID] = {.op = TS_OP_SIGMOID, .name = "Sigmoid", .arity = 1, .bwd_unread_inputs = 0x1u, .needs_output = true, .has_backward = true, .shape = shape_same, .flops = flops_elementwise},
    [TS_OP_ABS] = {.op = TS_OP_ABS, .name = "Abs", .arity = 1, .has_backward = true, .shape = shape_same, .flops = flops_elementwise},
    /* the elementwise families (backend/ew_math.h): predicates and rounding
     * have no gradient */
    [TS_OP_CEIL] = {.op = TS_OP_CEIL, .name = "Ceil", .arity = 1, .bwd_unread_inputs = 0x1u, .shape = shape_same, .flops = flops_elementwise},
    [TS_OP_FLOOR] = {.op = TS_OP_FLOOR, .name = "Floor", .arity = 1, .bwd_unread_inputs = 0x1u, .shape = shape_same, .flops = flops_elementwise},
    [TS_OP_ROUND] = {.op = TS_OP_ROUND, .name = "Round", .arity = 1, .bwd_unread_inputs = 0x1u, .shape = shape_same, .flops = flops_elementwise},
    [TS_OP_CAST_INT] = {.op = TS_OP_CAST_INT, .name = "CastInt", .arity = 1, .bwd_unread_inputs = 0x1u, .shape = shape_same, .flops = flops_elementwise},
    [TS_OP_CAST_BOOL] = {.op = TS_OP_CAST_BOOL, .bool_output = true, .bool_inputs = 0x1u, .name = "CastBool", .arity = 1, .bwd_unread_inputs = 0x1u, .shape = shape_same, .flops = flops_elementwise},
    [TS_OP_SIN] = {.op = TS_OP_SIN, .name = "Sin", .arity = 1, .has_backward = true, .shape = shape_same, .flops = flops_elementwise},
    [TS_OP_COS] = {.op = TS_OP_COS, .name = "Cos", .arity = 1, .has_backward = true, .shape = shape_same, .flops = flops_elementwise},
    [TS_OP_TAN] = {.op = TS_OP_TAN, .name = "Tan", .arity = 1, .has_backward = true, .shape = shape_same, .flops = flops_elementwise},
    [TS_OP_ASIN] = {.op = TS_OP_ASIN, .name = "Asin", .arity = 1, .has_backward = true, .shape = shape_same, .flops = flops_elementwise, .sample = {.lo = -0.95f, .hi = 0.95f}},
    [TS_OP_ACOS] = {.op = TS_OP_ACOS, .name = "Acos", .arity = 1, .has_backward = true, .shape = shape_same, .flops = flops_elementwise, .sample = {.lo = -0.95f, .hi = 0.95f}},
    [TS_OP_ATAN] = {.op = TS_OP_ATAN, .name = "Atan", .arity = 1, .has_backward = true, .shape = shape_same, .flops = flops_elementwise},
    [TS_OP_SINH] = {.op = TS_OP_SINH, .name = "Sinh", .arity = 1, .has_backward = true, .shape = shape_same, .flops = flops_elementwise},
    [TS_OP_COSH] = {.op = TS_OP_COSH, .name = "Cosh", .arity = 1, .has_backward = true, .shape = shape_same, .flops = flops_elementwise},
    [TS_OP_ASINH] = {.op = TS_OP_ASINH, .name = "Asinh", .arity = 1, .has_backward = true, .shape = shape_same, .flops = flops_elementwise},
    [TS_OP_ACOSH] = {.op = TS_OP_ACOSH, .name = "Acosh", .arity = 1, .has_backward = true, .shape = shape_same, .flops = flops_elementwise, .sample = {.lo = 1.25f, .hi = 2.75f}},
    [TS_OP_ATANH] = {.op = TS_OP_ATANH, .name = "Atanh", .arity = 1, .has_backward = true, .shape = shape_same, .flops = flops_elementwise, .sample = {.lo = -0.95f, .hi = 0.95f}},
    [TS_OP_NOT] = {.op = TS_OP_NOT, .bool_output = true, .bool_inputs = 0x1u, .name = "Not", .arity = 1, .bwd_unread_inputs = 0x1u, .shape = shape_same, .flops = flops_elementwise},
    [TS_OP_ISNAN] = {.op = TS_OP_ISNAN, .bool_output = true, .name = "IsNaN", .arity = 1, .bwd_unread_inputs = 0x1u, .shape = shape_same, .flops = flops_elementwise},
    [TS_OP_ISINF] = {.op = TS_OP_ISINF, .bool_output = true, .name = "IsInf", .arity = 1, .bwd_unread_inputs = 0x1u, .shape = shape_same, .flops = flops_elementwise, .sample = {.attrs.fattr = {1, 1}}},
    [TS_OP_HARD_SWISH] = {.op = TS_OP_HARD_SWISH, .name = "HardSwish", .arity = 1, .has_backward = true, .shape = shape_same, .flops = flops_elementwise},
    [TS_OP_HARD_SIGMOID] = {.op = TS_OP_HARD_SIGMOID, .name = "HardSigmoid", .arity = 1, .has_backward = true, .shape = shape_same, .flops = flops_elementwise, .sample = {.attrs.fattr = {0.2f, 0.5f}}},
    [TS_OP_LEAKY_RELU] = {.op = TS_OP_LEAKY_RELU, .name = "LeakyRelu", .arity = 1, .has_backward = true, .shape = shape_same, .flops = flops_elementwise, .sample = {.attrs.fattr = {0.01f}}},
    [TS_OP_ELU] = {.op = TS_OP_ELU, .name = "Elu", .arity = 1, .has_backward = true, .shape = shape_same, .flops = flops_elementwise, .sample = {.attrs.fattr = {1.0f}}},
    [TS_OP_SELU] = {.op = TS_OP_SELU, .name = "Selu", .arity = 1, .has_backward = true, .shape = shape_same, .flops = flops_elementwise, .sample = {.attrs.fattr = {1.6732632f, 1.0507010f}}},
    [TS_OP_SOFTPLUS] = {.op = TS_OP_SOFTPLUS, .name = "Softplus", .arity = 1, .has_backward = true, .shape = shape_same, .flops = flops_elementwise},
    /* a Cast to float8, float4, int4, ...: the gradient passes straight through, as ts_cast's */
    [TS_OP_CAST_LOWBITS] = {.op = TS_OP_CAST_LOWBITS, .name = "CastLowbits", .arity = 1, .has_backward = true, .shape = shape_same, .flops = flops_elementwise, .sample = {.straight_through = true, .attrs.fattr = {17, 1}}},
    [TS_OP_SELECT] = {.op = TS_OP_SELECT, .bool_inputs = 0x1u, .name = "Where", .arity = 3, .bwd_unread_inputs = 0x6u, .has_backward = true, .shape = ts_shape_where, .flops = flops_elementwise},
    [TS_OP_GATHER] = {.op = TS_OP_GATHER, .name = "Gather", .arity = 2, .bwd_unread_inputs = 0x1u, .int_inputs = 1u << 1, .keeps_int = true, .has_backward = true, .shape = ts_shape_gather, .flops = flops_elementwise, .sample = {.shapes = TS_SAMPLE_INDICES, .ints = TS_SAMPLE_AXIS, .attrs.attr = {1}}},
    [TS_OP_GATHER_ELEMENTS] = {.op = TS_OP_GATHER_ELEMENTS, .name = "GatherElements", .arity = 2, .bwd_unread_inputs = 0x1u, .int_inputs = 1u << 1, .keeps_int = true, .has_backward = true, .shape = ts_shape_gather_elements, .flops = flops_elementwise, .sample = {.ints = TS_SAMPLE_AXIS}},
    [TS_OP_CAST_FLOAT] = {.op = TS_OP_CAST_FLOAT, .name = "CastFloat", .arity = 1, .int_inputs = 1u << 0, .bwd_unread_inputs = 0x1u, .shape = shape_same, .flops = flops_elementwise, .sample = {.int_hi = 1000}},
    [TS_OP_CAST_INDEX] = {.op = TS_OP_CAST_INDEX, .name = "CastIndex", .arity = 1, .int_output = true, .bwd_unread_inputs = 0x1u, .shape = shape_same, .flops = flops_elementwise, .sample = {.lo = -8, .hi = 8, .attrs.fattr = {-5, 5}}},
    [TS_OP_POWER] = {.op = TS_OP_POWER, .name = "Pow", .arity = 2, .has_backward = true, .shape = ts_shape_broadcast_binary, .flops = flops_elementwise, .sample = {.lo = 0.5f, .hi = 2.0f}},
    [TS_OP_MAX] = {.op = TS_OP_MAX, .name = "Max", .arity = 2, .has_backward = true, .shape = ts_shape_broadcast_binary, .flops = flops_elementwise},
    [TS_OP_MIN] = {.op = TS_OP_MIN, .name = "Min", .arity = 2, .has_backward = true, .shape = ts_shape_broadcast_binary, .flops = flops_elementwise},
    [TS_OP_MOD] = {.op = TS_OP_MOD, .name = "Mod", .arity = 2, .has_backward = true, .shape = ts_shape_broadcast_binary, .flops = flops_elementwise, .sample = {.lo = 0.5f, .hi = 2.0f}},
    [TS_OP_FMOD] = {.op = TS_OP_FMOD, .name = "FMod", .arity = 2, .has_backward = true, .shape = ts_shape_broadcast_binary, .flops = flops_elementwise, .sample = {.lo = 0.5f, .hi = 2.0f}},
    [TS_OP_EQUAL] = {.op = TS_OP_EQUAL, .bool_output = true, .bool_inputs = 0x3u, .name = "Equal", .arity = 2, .bwd_unread_inputs = 0x3u, .shape = ts_shape_broadcast_binary, .flops = flops_elementwise},
    [TS_OP_GREATER] = {.op = TS_OP_GREATER, .bool_output = true, .bool_inputs = 0x3u, .name = "Greater", .arity = 2, .bwd_unread_inputs = 0x3u, .shape = ts_shape_broadcast_binary, .flops = flops_elementwise},
    [TS_OP_GREATER_EQUAL] = {.op = TS_OP_GREATER_EQUAL, .bool_output = true, .bool_inputs = 0x3u, .name = "GreaterOrEqual", .arity = 2, .bwd_unread_inputs = 0x3u, .shape = ts_shape_broadcast_binary, .flops = flops_elementwise},
    [TS_OP_LESS] = {.op = TS_OP_LESS, .bool_output = true, .bool_inputs = 0x3u, .name = "Less", .arity = 2, .bwd_unread_inputs = 0x3u, .shape = ts_shape_broadcast_binary, .flops = flops_elementwise},
    [TS_OP_LESS_EQUAL] = {.op = TS_OP_LESS_EQUAL, .bool_output = true, .bool_inputs = 0x3u, .name = "LessOrEqual", .arity = 2, .bwd_unread_inputs = 0x3u, .shape = ts_shape_broadcast_binary, .flops = flops_elementwise},
    [TS_OP_AND] = {.op = TS_OP_AND, .bool_output = true, .bool_inputs = 0x3u, .name = "And", .arity = 2, .bwd_unread_inputs = 0x3u, .shape = ts_shape_broadcast_binary, .flops = flops_elementwise},
    [TS_OP_OR] = {.op = TS_OP_OR, .bool_output = true, .bool_inputs = 0x3u, .name = "Or", .arity = 2, .bwd_unread_inputs = 0x3u, .shape = ts_shape_broadcast_binary, .flops = flops_elementwise},
    [TS_OP_XOR] = {.op = TS_OP_XOR, .bool_output = true, .bool_inputs = 0x3u, .name = "Xor", .arity = 2, .bwd_unread_inputs = 0x3u, .shape = ts_shape_broadcast_binary, .flops = flops_elementwise},
    [TS_OP_CAST] = {.op = TS_OP_CAST, .name = "Cast", .arity = 1, .bwd_unread_inputs = 0x1u, .has_backward = true, .shape = shape_same, .flops = flops_elementwise, .sample = {.straight_through = true, .attrs.attr = {TS_BF16}}},
    [TS_OP_PAD] = {.op = TS_OP_PAD, .name = "Pad", .arity = 1, .bwd_unread_inputs = 0x1u, .keeps_int = true, .has_backward = true, .shape = ts_shape_pad, .flops = flops_elementwise, .sample = {.attrs = {.attr = {[0] = 1, [TS_MAX_DIMS] = 2}, .iparam = TS_PAD_CONSTANT, .fparam = -2.5f}}},
    [TS_OP_MAX_POOL2D_INDICES] = {.op = TS_OP_MAX_POOL2D_INDICES, .name = "MaxPool2dIndices", .arity = 1, .bwd_unread_inputs = 0x1u, .shape = ts_shape_pool2d, .flops = ts_flops_pool2d, .scratch_floats = ts_scratch_max_pool2d, .sample = {.rank = 4, .attrs.attr = {[CA_SH] = 2, [CA_SW] = 2, [PA_KH] = 2, [PA_KW] = 2, [PA_DH] = 1, [PA_DW] = 1}}},
    [TS_OP_CONV_TRANSPOSE2D] = {.op = TS_OP_CONV_TRANSPOSE2D, .name = "ConvTranspose2d", .arity = TS_ARITY_VARIADIC, .has_backward = true, .shape = ts_shape_conv_transpose2d, .flops = ts_flops_conv_transpose2d, .sample = {.shapes = TS_SAMPLE_CONV_T, .rank = 4, .n_in = 3, .attrs.attr = {[CA_SH] = 1, [CA_SW] = 1, [CA_DH] = 1, [CA_DW] = 1, [CA_GROUPS] = 1}}},
    [TS_OP_STOP_GRADIENT] = {.op = TS_OP_STOP_GRADIENT, .name = "StopGradient", .arity = 1, .bwd_unread_inputs = 0x1u, .shape = shape_same, .flops = flops_elementwise},
    /* input 3: the mask; input 4 (optional): the unfused twin, whose value the backward never reads */
    [TS_OP_ATTENTION] = {.op = TS_OP_ATTENTION, .bool_inputs = 1u << 3, .name = "Attention", .arity = TS_ARITY_VARIADIC, .needs_output = true, .bwd_unread_inputs = 1u << 4, .int_inputs = 1u << 3, .has_backward = true, .shape = ts_shape_attention, .flops = ts_flops_attention, .scratch_floats = ts_scratch_attention, .sample = {.shapes = TS_SAMPLE_ATTENTION, .n_in = 4, .attrs.fattr = {0.7f}}},
    [TS_OP_BITWISE] = {.op = TS_OP_BITWISE, .name = "Bitwise", .arity = 2, .any_dtype = true, .bwd_unread_inputs = 0x3u, .shape = ts_shape_broadcast_binary, .flops = flops_elementwise, .sample = {.dtype = TS_I64, .attrs = {.attr = {TS_BITWISE_XOR, 64, 0}, .dtype = TS_I64}}},
    /* integer tensors: no gradient (their builders set the dtypes) */
    [TS_OP_CONVERT] = {.op = TS_OP_CONVERT, .name = "Convert", .arity = 1, .any_dtype = true, .bwd_unread_inputs = 0x1u, .shape = shape_same, .flops = flops_elementwise, .sample = {.lo = -1000, .hi = 1000, .attrs = {.attr = {TS_I32}, .dtype = TS_I32}}},
    [TS_OP_INT_ARITH] = {.op = TS_OP_INT_ARITH, .name = "IntArith", .arity = 2, .any_dtype = true, .bwd_unread_inputs = 0x3u, .shape = ts_shape_broadcast_binary, .flops = flops_elementwise, .sample = {.dtype = TS_I64, .attrs = {.attr = {TS_INT_ADD}, .dtype = TS_I64}}},
    [TS_OP_INT_CUMSUM] = {.op = TS_OP_INT_CUMSUM, .name = "CumSum", .arity = 1, .any_dtype = true, .bwd_unread_inputs = 0x1u, .shape = shape_same, .flops = flops_elementwise, .sample = {.dtype = TS_I64, .attrs.dtype = TS_I64}},
    [TS_OP_INT_REDUCE] = {.op = TS_OP_INT_REDUCE, .name = "IntReduce", .arity = 1, .any_dtype = true, .bwd_unread_inputs = 0x1u, .shape = ts_shape_reduce_axes, .flops = flops_input, .sample = {.dtype = TS_I64, .attrs = {.attr = {1, 0, TS_INT_RED_PROD}, .dtype = TS_I64}}},
    [TS_OP_INT_MATMUL] = {.op = TS_OP_INT_MATMUL, .name = "IntMatMul", .arity = TS_ARITY_VARIADIC, .any_dtype = true, .bwd_unread_inputs = 0x7u, .shape = shape_int_matmul, .flops = ts_flops_bmm, .sample = {.shapes = TS_SAMPLE_MATMUL, .rank = 3, .n_in = 2, .dtype = TS_I64, .attrs.dtype = TS_I64}},
    [TS_OP_INT_RESIZE] = {.op = TS_OP_INT_RESIZE, .name = "IntResize", .arity = 3, .any_dtype = true, .int_inputs = 0x2u, .bwd_unread_inputs = 0x7u, .shape = shape_int_resize, .flops = flops_elementwise, .sample = {.dtype = TS_I64, .ints = TS_SAMPLE_AXIS, .attrs = {.attr = {0, 1}, .dtype = TS_I64}}},
    [TS_OP_SILU] = {.op = TS_OP_SILU, .name = "Silu", .arity = 1, .has_backward = true, .shape = shape_same, .flops = flops_elementwise},
    [TS_OP_RMS_NORM] = {.op = TS_OP_RMS_NORM, .name = "RMSNorm", .arity = TS_ARITY_VARIADIC, .has_backward = true, .shape = ts_shape_rms_norm, .flops = ts_flops_layer_norm, .scratch_floats = ts_scratch_rms_norm, .sample = {.shapes = TS_SAMPLE_TRAILING, .n_in = 2, .attrs = {.attr = {1}, .fattr = {1e-5f}}}},
};
_Static_assert(sizeof table / sizeof table[0] == TS_OP_COUNT, "the op table must cover every ts_op");

const ts_op_def *ts_op_get(ts_op op) { return &table[op]; }
