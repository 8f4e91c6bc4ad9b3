/* ops.c -- the op table: one row per op. Shape rules check what the user
 * built and say what would fit; the kernel adapters unpack a node's context
 * into the fixed-argument kernels of backend/cpu/kernels.c. */
#include "graph/ops.h"

#include "backend/cpu/gemm.h"
#include "graph/cnn_ops.h"
#include "backend/cpu/kernels.h"
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

/* --------------------------------------------------------------- adapters */

static int64_t numel_out(const ts_kctx *k) { return ts_shape_numel(&k->out_shape); }

static void fwd_matmul(const ts_kctx *k) {
    bool t = k->node->op == TS_OP_MATMUL_T;
    int64_t M = k->in_shape[0].d[0], K = k->in_shape[0].d[1], N = k->out_shape.d[1];
    ts_gemm_pool(k->pool, false, t, M, N, K, k->in[0], k->in[1], 0.0f, k->out);
}

/* C = A op(B): dA += dC op(B)^T ; dB += A^T dC (or dC^T A when B was transposed) */
static void bwd_matmul(const ts_kctx *k) {
    bool t = k->node->op == TS_OP_MATMUL_T;
    int64_t M = k->in_shape[0].d[0], K = k->in_shape[0].d[1], N = k->out_shape.d[1];
    if (k->din[0]) ts_gemm_pool(k->pool, false, !t, M, K, N, k->dout, k->in[1], 1.0f, k->din[0]);
    if (k->din[1]) {
        if (t) ts_gemm_pool(k->pool, true, false, N, K, M, k->dout, k->in[0], 1.0f, k->din[1]);
        else ts_gemm_pool(k->pool, true, false, K, N, M, k->in[0], k->dout, 1.0f, k->din[1]);
    }
}

static void fwd_scale(const ts_kctx *k) { ts_scale_forward(k->pool, k->out, k->in[0], k->node->fparam, numel_out(k)); }
static void bwd_scale(const ts_kctx *k) { ts_scale_backward(k->pool, k->din[0], k->dout, k->node->fparam, numel_out(k)); }
static void fwd_relu(const ts_kctx *k) { ts_relu_forward(k->pool, k->out, k->in[0], numel_out(k)); }
static void bwd_relu(const ts_kctx *k) { ts_relu_backward(k->pool, k->din[0], k->dout, k->out, numel_out(k)); }
static void fwd_log(const ts_kctx *k) { ts_log_forward(k->pool, k->out, k->in[0], numel_out(k)); }
static void bwd_log(const ts_kctx *k) { ts_log_backward(k->pool, k->din[0], k->dout, k->in[0], numel_out(k)); }

static void fwd_copy(const ts_kctx *k) {
    if (k->out != k->in[0]) ts_copy_forward(k->pool, k->out, k->in[0], numel_out(k));
}
static void bwd_copy(const ts_kctx *k) { ts_copy_backward(k->pool, k->din[0], k->dout, numel_out(k)); }

static void fwd_nll(const ts_kctx *k) { ts_nll_forward(k->out, k->in[0], k->in_int[1], k->in_shape[0].d[0], k->in_shape[0].d[1]); }
static void bwd_nll(const ts_kctx *k) { ts_nll_backward(k->din[0], k->dout, k->in_int[1], k->in_shape[0].d[0], k->in_shape[0].d[1]); }
static void fwd_sum(const ts_kctx *k) { ts_reduce_forward(k->out, k->in[0], ts_shape_numel(&k->in_shape[0]), false); }
static void bwd_sum(const ts_kctx *k) { ts_reduce_backward(k->pool, k->din[0], k->dout, ts_shape_numel(&k->in_shape[0]), false); }
static void fwd_mean(const ts_kctx *k) { ts_reduce_forward(k->out, k->in[0], ts_shape_numel(&k->in_shape[0]), true); }
static void bwd_mean(const ts_kctx *k) { ts_reduce_backward(k->pool, k->din[0], k->dout, ts_shape_numel(&k->in_shape[0]), true); }

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
    [TS_OP_MATMUL] = {.op = TS_OP_MATMUL, .name = "MatMul", .arity = 2, .shape = shape_matmul, .forward = fwd_matmul, .backward = bwd_matmul, .flops = flops_matmul},
    [TS_OP_MATMUL_T] = {.op = TS_OP_MATMUL_T, .name = "MatMul", .arity = 2, .shape = shape_matmul, .forward = fwd_matmul, .backward = bwd_matmul, .flops = flops_matmul},
    [TS_OP_ADD] = {.op = TS_OP_ADD, .name = "Add", .arity = 2, .bwd_unread_inputs = 0x3u, .shape = ts_shape_broadcast_binary, .forward = ts_fwd_broadcast_binary, .backward = ts_bwd_broadcast_binary, .flops = flops_elementwise},
    [TS_OP_SUB] = {.op = TS_OP_SUB, .name = "Sub", .arity = 2, .bwd_unread_inputs = 0x3u, .shape = ts_shape_broadcast_binary, .forward = ts_fwd_broadcast_binary, .backward = ts_bwd_broadcast_binary, .flops = flops_elementwise},
    [TS_OP_MUL] = {.op = TS_OP_MUL, .name = "Mul", .arity = 2, .shape = ts_shape_broadcast_binary, .forward = ts_fwd_broadcast_binary, .backward = ts_bwd_broadcast_binary, .flops = flops_elementwise},
    [TS_OP_SCALE] = {.op = TS_OP_SCALE, .name = "Scale", .arity = 1, .bwd_unread_inputs = 0x1u, .shape = shape_same, .forward = fwd_scale, .backward = bwd_scale, .flops = flops_elementwise},
    [TS_OP_RELU] = {.op = TS_OP_RELU, .name = "Relu", .arity = 1, .needs_output = true, .bwd_unread_inputs = 0x1u, .shape = shape_same, .forward = fwd_relu, .backward = bwd_relu, .flops = flops_elementwise},
    [TS_OP_LOG] = {.op = TS_OP_LOG, .name = "Log", .arity = 1, .shape = shape_same, .forward = fwd_log, .backward = bwd_log, .flops = flops_elementwise},
    [TS_OP_RESHAPE] = {.op = TS_OP_RESHAPE, .name = "Reshape", .arity = 1, .bwd_unread_inputs = 0x1u, .view = true, .shape = shape_reshape, .forward = fwd_copy, .backward = bwd_copy},
    [TS_OP_FLATTEN] = {.op = TS_OP_FLATTEN, .name = "Flatten", .arity = 1, .bwd_unread_inputs = 0x1u, .view = true, .shape = shape_reshape, .forward = fwd_copy, .backward = bwd_copy},
    [TS_OP_LOG_SOFTMAX] = {.op = TS_OP_LOG_SOFTMAX, .name = "LogSoftmax", .arity = 1, .needs_output = true, .bwd_unread_inputs = 0x1u, .shape = shape_softmax, .forward = ts_fwd_softmax_any, .backward = ts_bwd_softmax_any, .flops = flops_softmax},
    [TS_OP_SOFTMAX] = {.op = TS_OP_SOFTMAX, .name = "Softmax", .arity = 1, .needs_output = true, .bwd_unread_inputs = 0x1u, .shape = shape_softmax, .forward = ts_fwd_softmax_any, .backward = ts_bwd_softmax_any, .flops = flops_softmax},
    [TS_OP_NLL_LOSS] = {.op = TS_OP_NLL_LOSS, .name = "NllLoss", .arity = 2, .int_inputs = 1u << 1, .bwd_unread_inputs = 0x1u, .shape = shape_loss, .forward = fwd_nll, .backward = bwd_nll, .flops = flops_input},
    [TS_OP_CROSS_ENTROPY] = {.op = TS_OP_CROSS_ENTROPY, .name = "CrossEntropy", .arity = 2, .int_inputs = 1u << 1, .bwd_unread_inputs = 0x1u, .shape = ts_shape_cross_entropy, .forward = ts_fwd_cross_entropy, .backward = ts_bwd_cross_entropy, .flops = flops_softmax, .scratch_floats = ts_scratch_cross_entropy},
    [TS_OP_SUM] = {.op = TS_OP_SUM, .name = "ReduceSum", .arity = 1, .bwd_unread_inputs = 0x1u, .shape = shape_reduce, .forward = fwd_sum, .backward = bwd_sum, .flops = flops_input},
    [TS_OP_MEAN] = {.op = TS_OP_MEAN, .name = "ReduceMean", .arity = 1, .bwd_unread_inputs = 0x1u, .shape = shape_reduce, .forward = fwd_mean, .backward = bwd_mean, .flops = flops_input},
    /* the executor adds the printing around the copy */
    [TS_OP_PRINT] = {.op = TS_OP_PRINT, .name = "Print", .arity = 1, .bwd_unread_inputs = 0x1u, .shape = shape_same, .forward = fwd_copy, .backward = bwd_copy},
    /* tensor and transformer ops (ops_tensor.c, backend/cpu/kernels_tensor.c) */
    [TS_OP_CONST] = {.op = TS_OP_CONST, .name = "Const", .shape = shape_leaf},
    [TS_OP_DIV] = {.op = TS_OP_DIV, .name = "Div", .arity = 2, .shape = ts_shape_broadcast_binary, .forward = ts_fwd_broadcast_binary, .backward = ts_bwd_broadcast_binary, .flops = flops_elementwise},
    [TS_OP_EXP] = {.op = TS_OP_EXP, .name = "Exp", .arity = 1, .bwd_unread_inputs = 0x1u, .needs_output = true, .shape = shape_same, .forward = ts_fwd_unary_math, .backward = ts_bwd_unary_math, .flops = flops_elementwise},
    [TS_OP_SQRT] = {.op = TS_OP_SQRT, .name = "Sqrt", .arity = 1, .bwd_unread_inputs = 0x1u, .needs_output = true, .shape = shape_same, .forward = ts_fwd_unary_math, .backward = ts_bwd_unary_math, .flops = flops_elementwise},
    [TS_OP_POW] = {.op = TS_OP_POW, .name = "Pow", .arity = 1, .shape = shape_same, .forward = ts_fwd_unary_math, .backward = ts_bwd_unary_math, .flops = flops_elementwise},
    [TS_OP_ERF] = {.op = TS_OP_ERF, .name = "Erf", .arity = 1, .shape = shape_same, .forward = ts_fwd_unary_math, .backward = ts_bwd_unary_math, .flops = flops_elementwise},
    [TS_OP_GELU] = {.op = TS_OP_GELU, .name = "Gelu", .arity = 1, .shape = shape_same, .forward = ts_fwd_unary_math, .backward = ts_bwd_unary_math, .flops = flops_elementwise},
    [TS_OP_EMBEDDING] = {.op = TS_OP_EMBEDDING, .name = "Embedding", .arity = 2, .bwd_unread_inputs = 0x1u, .int_inputs = 1u << 1, .shape = ts_shape_embedding, .forward = ts_fwd_embedding, .backward = ts_bwd_embedding, .flops = flops_elementwise},
    [TS_OP_LAYER_NORM] = {.op = TS_OP_LAYER_NORM, .name = "LayerNorm", .arity = 3, .bwd_unread_inputs = 0x4u, .shape = ts_shape_layer_norm, .forward = ts_fwd_layer_norm, .backward = ts_bwd_layer_norm, .flops = ts_flops_layer_norm, .scratch_floats = ts_scratch_layer_norm},
    [TS_OP_BATCH_MATMUL] = {.op = TS_OP_BATCH_MATMUL, .name = "MatMul", .arity = 2, .shape = ts_shape_bmm, .forward = ts_fwd_bmm, .backward = ts_bwd_bmm, .flops = ts_flops_bmm},
    [TS_OP_PERMUTE] = {.op = TS_OP_PERMUTE, .name = "Transpose", .arity = 1, .bwd_unread_inputs = 0x1u, .shape = ts_shape_permute, .forward = ts_fwd_permute, .backward = ts_bwd_permute},
    [TS_OP_SLICE] = {.op = TS_OP_SLICE, .name = "Slice", .arity = 1, .bwd_unread_inputs = 0x1u, .shape = ts_shape_slice, .forward = ts_fwd_slice, .backward = ts_bwd_slice},
    [TS_OP_CONCAT] = {.op = TS_OP_CONCAT, .name = "Concat", .arity = TS_ARITY_VARIADIC, .bwd_unread_inputs = 0xffu, .shape = ts_shape_concat, .forward = ts_fwd_concat, .backward = ts_bwd_concat},
    [TS_OP_WHERE] = {.op = TS_OP_WHERE, .name = "Where", .arity = 3, .bwd_unread_inputs = 0x6u, .int_inputs = 1u << 0, .shape = ts_shape_where, .forward = ts_fwd_where, .backward = ts_bwd_where, .flops = flops_elementwise},
    [TS_OP_MASKED_FILL] = {.op = TS_OP_MASKED_FILL, .name = "MaskedFill", .arity = 2, .bwd_unread_inputs = 0x1u, .int_inputs = 1u << 1, .shape = ts_shape_masked_fill, .forward = ts_fwd_masked_fill, .backward = ts_bwd_masked_fill, .flops = flops_elementwise},
    [TS_OP_REDUCE_SUM_AXES] = {.op = TS_OP_REDUCE_SUM_AXES, .name = "ReduceSum", .arity = 1, .bwd_unread_inputs = 0x1u, .shape = ts_shape_reduce_axes, .forward = ts_fwd_reduce_axes, .backward = ts_bwd_reduce_axes, .flops = flops_input},
    [TS_OP_REDUCE_MEAN_AXES] = {.op = TS_OP_REDUCE_MEAN_AXES, .name = "ReduceMean", .arity = 1, .bwd_unread_inputs = 0x1u, .shape = ts_shape_reduce_axes, .forward = ts_fwd_reduce_axes, .backward = ts_bwd_reduce_axes, .flops = flops_input},
    [TS_OP_REDUCE_MAX_AXES] = {.op = TS_OP_REDUCE_MAX_AXES, .name = "ReduceMax", .arity = 1, .needs_output = true, .shape = ts_shape_reduce_axes, .forward = ts_fwd_reduce_axes, .backward = ts_bwd_reduce_axes, .flops = flops_input},
    /* convolutional networks (graph/cnn_ops.c) */
    [TS_OP_BUFFER] = {.op = TS_OP_BUFFER, .name = "Buffer", .shape = shape_leaf},
    [TS_OP_CONV2D] = {.op = TS_OP_CONV2D, .name = "Conv2d", .arity = TS_ARITY_VARIADIC, .shape = ts_shape_conv2d, .forward = ts_fwd_conv2d, .backward = ts_bwd_conv2d, .flops = ts_flops_conv2d, .workspace_floats = ts_workspace_conv2d},
    [TS_OP_MAX_POOL2D] = {.op = TS_OP_MAX_POOL2D, .name = "MaxPool2d", .arity = 1, .shape = ts_shape_pool2d, .forward = ts_fwd_max_pool2d, .backward = ts_bwd_max_pool2d, .flops = ts_flops_pool2d, .scratch_floats = ts_scratch_max_pool2d},
    [TS_OP_AVG_POOL2D] = {.op = TS_OP_AVG_POOL2D, .name = "AvgPool2d", .arity = 1, .bwd_unread_inputs = 0x1u, .shape = ts_shape_pool2d, .forward = ts_fwd_avg_pool2d, .backward = ts_bwd_avg_pool2d, .flops = ts_flops_pool2d},
    [TS_OP_GLOBAL_AVG_POOL] = {.op = TS_OP_GLOBAL_AVG_POOL, .name = "GlobalAvgPool", .arity = 1, .bwd_unread_inputs = 0x1u, .shape = ts_shape_global_pool, .forward = ts_fwd_global_pool, .backward = ts_bwd_global_pool, .flops = ts_flops_pool2d},
    [TS_OP_BATCH_NORM] = {.op = TS_OP_BATCH_NORM, .name = "BatchNorm", .arity = 5, .shape = ts_shape_batch_norm, .forward = ts_fwd_batch_norm, .backward = ts_bwd_batch_norm, .flops = flops_softmax, .scratch_floats = ts_scratch_batch_norm},
    [TS_OP_DROPOUT_MASK] = {.op = TS_OP_DROPOUT_MASK, .name = "DropoutMask", .arity = 1, .bwd_unread_inputs = 0x1u, .shape = ts_shape_dropout_mask, .forward = ts_fwd_dropout_mask, .flops = flops_elementwise},
    [TS_OP_TANH] = {.op = TS_OP_TANH, .name = "Tanh", .arity = 1, .bwd_unread_inputs = 0x1u, .needs_output = true, .shape = shape_same, .forward = ts_fwd_tanh, .backward = ts_bwd_tanh, .flops = flops_elementwise},
    [TS_OP_SIGMOID] = {.op = TS_OP_SIGMOID, .name = "Sigmoid", .arity = 1, .bwd_unread_inputs = 0x1u, .needs_output = true, .shape = shape_same, .forward = ts_fwd_sigmoid, .backward = ts_bwd_sigmoid, .flops = flops_elementwise},
};
_Static_assert(sizeof table / sizeof table[0] == TS_OP_COUNT, "the op table must cover every ts_op");

const ts_op_def *ts_op_get(ts_op op) { return &table[op]; }
