/* cpu.c -- the CPU backend: the device is the host, its memory the heap,
 * its stream the model's thread pool (ts_pool *; TS_STREAM_THIS_THREAD
 * from inside the pool's jobs and NULL outside a model: the calling
 * thread), and every call completes before it returns. The kernel table
 * has one row per op: the rows of the core ops' adapters are here, the
 * others in adapters_tensor.c and adapters_cnn.c. */
#include "backend/cpu/cpu.h"

#include "backend/cpu/adapters.h"
#include "backend/cpu/bf16_gemm.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/kernels_tensor.h"
#include "backend/held.h"
#include "graph/optim.h"
#include "core/stats.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------- core ops' adapters */

static int64_t numel_out(const ts_kctx *k) { return ts_shape_numel(&k->out_shape); }

const ts_kctx *ts_cpu_widen(const ts_kctx *k, ts_kctx *room) {
    bool any = false;
    for (int j = 0; j < k->n_in; j++) any = any || ts_dtype_is_half(k->in_dtype[j]);
    if (!any) return k;
    *room = *k;
    float *at = k->widen;
    for (int j = 0; j < k->n_in; j++) {
        if (!ts_dtype_is_half(k->in_dtype[j])) continue;
        int64_t n = ts_shape_numel(&k->in_shape[j]);
        ts_cpu_unpack_half(k->pool, k->in_dtype[j], at, (const uint16_t *)(const void *)k->in[j], n);
        room->in[j] = at, room->in_dtype[j] = TS_F32;
        at += n;
    }
    return room;
}

uint16_t *ts_cpu_grad_room(const ts_kctx *k) {
    if (!k->widen) return NULL;
    int64_t at = 0;
    for (int j = 0; j < k->n_in; j++)
        if (ts_dtype_is_half(k->in_dtype[j])) at += ts_shape_numel(&k->in_shape[j]);
    return (uint16_t *)(void *)(k->widen + (at + 15) / 16 * 16); /* compile's plan_staging */
}

static void fwd_matmul(const ts_kctx *k) {
    bool t = k->node->op == TS_OP_MATMUL_T;
    int64_t M = k->in_shape[0].d[0], K = k->in_shape[0].d[1], N = k->out_shape.d[1];
    ts_out_act a; /* a Linear's Relu or unary op after its bias (fuses_bias_act) */
    const ts_out_act *act = k->bias && ts_cpu_out_act(k, &a) ? &a : NULL;
    if (k->in_dtype[0] == TS_BF16 && k->in_dtype[1] == TS_BF16 && ts_cpu_bf16_gemm_on() && /* bf16 cells both: the CPU's bf16 GEMM */
        ts_cpu_bf16_gemm(k->pool, t, M, N, K, (const uint16_t *)(const void *)k->in[0], (const uint16_t *)(const void *)k->in[1],
                         k->out, k->bias, k->bias ? k->bias_out : NULL, act, k->workspace))
        return;
    ts_kctx room;
    k = ts_cpu_widen(k, &room);
    if (k->bias) ts_gemm_pool_bias(k->pool, false, t, M, N, K, k->in[0], k->in[1], k->out, k->bias, k->bias_out, act);
    else ts_gemm_pool(k->pool, false, t, M, N, K, k->in[0], k->in[1], 0.0f, k->out);
}

/* C = A op(B): dA += dC op(B)^T ; dB += A^T dC (or dC^T A when B was
 * transposed); an input's gradient that din_store names is stored (beta
 * 0), saving the executor its zeroing */
static void bwd_matmul(const ts_kctx *k) {
    bool t = k->node->op == TS_OP_MATMUL_T;
    int64_t M = k->in_shape[0].d[0], K = k->in_shape[0].d[1], N = k->out_shape.d[1];
    float b0 = k->din_store & 1u ? 0.0f : 1.0f, b1 = k->din_store & 2u ? 0.0f : 1.0f;
    unsigned done = 0; /* bf16 cells both: the CPU's bf16 GEMM, dout rounded to bf16 for the products */
    if (k->in_dtype[0] == TS_BF16 && k->in_dtype[1] == TS_BF16 && ts_cpu_bf16_gemm_on())
        done = ts_cpu_bf16_gemm_backward(k->pool, t, M, N, K, (const uint16_t *)(const void *)k->in[0],
                                         (const uint16_t *)(const void *)k->in[1], k->dout, k->din[0], b0, k->din[1], b1, ts_cpu_grad_room(k),
                                         k->workspace);
    if ((!k->din[0] || done & 1u) && (!k->din[1] || done & 2u)) return;
    ts_kctx room;
    k = ts_cpu_widen(k, &room);
    if (k->din[0] && !(done & 1u)) ts_gemm_pool(k->pool, false, !t, M, K, N, k->dout, k->in[1], b0, k->din[0]);
    if (k->din[1] && !(done & 2u)) { /* summed over M rows: split along them where M is long (gemm.h), in the workspace */
        size_t ws = ts_gemm_split_k_floats(ts_pool_threads(k->pool), K, N, M);
        if (t) ts_gemm_pool_ws(k->pool, true, false, N, K, M, k->dout, k->in[0], b1, k->din[1], k->workspace, ws);
        else ts_gemm_pool_ws(k->pool, true, false, K, N, M, k->in[0], k->dout, b1, k->din[1], k->workspace, ws);
    }
}

/* the second operand's gradient split along the first's rows
 * (bwd_matmul), or, bf16 cells both, the bf16 kernel's packed operands
 * (one or the other at a time) */
static size_t workspace_matmul(const ts_shape *in, const ts_dtype *in_dtype, const ts_shape *out, int threads) {
    if (in[0].ndim != 2 || out->ndim != 2) return 0;
    int64_t M = in[0].d[0], K = in[0].d[1], N = out->d[1];
    size_t split = ts_gemm_split_k_floats(threads, K, N, M);
    size_t bf16 = in_dtype[0] == TS_BF16 && in_dtype[1] == TS_BF16 ? ts_cpu_bf16_gemm_floats(M, N, K, threads) : 0;
    return split > bf16 ? split : bf16;
}

static void fwd_scale(const ts_kctx *k) { ts_scale_forward(k->pool, k->out, k->in[0], k->node->fparam, numel_out(k)); }
static void bwd_scale(const ts_kctx *k) { ts_scale_backward(k->pool, k->din[0], k->dout, k->node->fparam, numel_out(k)); }
static void fwd_relu(const ts_kctx *k) { ts_relu_forward(k->pool, k->out, k->in[0], numel_out(k)); }
static void bwd_relu(const ts_kctx *k) {
    if (k->din_store & 1u) ts_relu_backward_store(k->pool, k->din[0], k->dout, k->out, numel_out(k));
    else ts_relu_backward(k->pool, k->din[0], k->dout, k->out, numel_out(k));
}
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

/* y = x on t's grid (attr[0]); to f32: a copy. The gradient passes as it
 * is (the executor rounded it to the output's grid once complete). */
static void fwd_cast(const ts_kctx *k) {
    ts_kctx room;
    k = ts_cpu_widen(k, &room); /* a cast of a tensor held in 16-bit cells */
    ts_dtype t = (ts_dtype)k->node->attr[0];
    if (k->lost) *k->lost = (ts_half_loss){0, 0}; /* this run's */
    if (ts_dtype_is_half(k->out_dtype)) ts_cpu_pack_half(k->pool, t, (uint16_t *)(void *)k->out, k->in[0], numel_out(k), k->lost);
    else if (ts_dtype_is_half(t)) ts_cpu_round_half_pool(k->pool, t, k->out, k->in[0], numel_out(k), k->lost);
    else fwd_copy(k);
}

/* ------------------------------------------------------- kernel table */

/* Designated by enum value, so a row can never land at the wrong index. */
static const ts_kernel_row kernels[] = {
    [TS_OP_INPUT] = {.forward = NULL}, /* a leaf: bound, not computed */
    [TS_OP_PARAM] = {.forward = NULL}, /* a leaf: bound, not computed */
    [TS_OP_MATMUL] = {.forward = fwd_matmul, .backward = bwd_matmul, .fuses_bias = true, .fuses_bias_act = true,
                       .workspace_floats = workspace_matmul, .stores_din = 3u},
    [TS_OP_MATMUL_T] = {.forward = fwd_matmul, .backward = bwd_matmul, .fuses_bias = true, .fuses_bias_act = true,
                       .workspace_floats = workspace_matmul, .stores_din = 3u},
    [TS_OP_ADD] = {.forward = ts_fwd_broadcast_binary, .backward = ts_bwd_broadcast_binary, .stores_din = 3u},
    [TS_OP_SUB] = {.forward = ts_fwd_broadcast_binary, .backward = ts_bwd_broadcast_binary, .stores_din = 3u},
    [TS_OP_MUL] = {.forward = ts_fwd_broadcast_binary, .backward = ts_bwd_broadcast_binary, .stores_din = 3u},
    [TS_OP_SCALE] = {.forward = fwd_scale, .backward = bwd_scale},
    [TS_OP_RELU] = {.forward = fwd_relu, .backward = bwd_relu, .stores_din = 1u},
    [TS_OP_LOG] = {.forward = fwd_log, .backward = bwd_log},
    [TS_OP_RESHAPE] = {.forward = fwd_copy, .backward = bwd_copy},
    [TS_OP_FLATTEN] = {.forward = fwd_copy, .backward = bwd_copy},
    [TS_OP_LOG_SOFTMAX] = {.forward = ts_fwd_softmax_any, .backward = ts_bwd_softmax_any},
    [TS_OP_SOFTMAX] = {.forward = ts_fwd_softmax_any, .backward = ts_bwd_softmax_any},
    [TS_OP_NLL_LOSS] = {.forward = fwd_nll, .backward = bwd_nll},
    [TS_OP_CROSS_ENTROPY] = {.forward = ts_fwd_cross_entropy, .backward = ts_bwd_cross_entropy},
    [TS_OP_SUM] = {.forward = fwd_sum, .backward = bwd_sum},
    [TS_OP_MEAN] = {.forward = fwd_mean, .backward = bwd_mean},
    [TS_OP_PRINT] = {.forward = fwd_copy, .backward = bwd_copy},
    [TS_OP_CONST] = {.forward = NULL}, /* a leaf: bound, not computed */
    [TS_OP_DIV] = {.forward = ts_fwd_broadcast_binary, .backward = ts_bwd_broadcast_binary, .stores_din = 3u},
    [TS_OP_EXP] = {.forward = ts_fwd_ew_unary, .backward = ts_bwd_ew_unary, .stores_din = 1u},
    [TS_OP_SQRT] = {.forward = ts_fwd_ew_unary, .backward = ts_bwd_ew_unary, .stores_din = 1u},
    [TS_OP_POW] = {.forward = ts_fwd_ew_unary, .backward = ts_bwd_ew_unary, .stores_din = 1u},
    [TS_OP_ERF] = {.forward = ts_fwd_ew_unary, .backward = ts_bwd_ew_unary, .stores_din = 1u},
    [TS_OP_GELU] = {.forward = ts_fwd_ew_unary, .backward = ts_bwd_ew_unary, .stores_din = 1u},
    [TS_OP_EMBEDDING] = {.forward = ts_fwd_gather, .backward = ts_bwd_gather},
    [TS_OP_LAYER_NORM] = {.forward = ts_fwd_layer_norm, .backward = ts_bwd_layer_norm, .fuses_relu = true, .fuses_unary = true,
                          .pass_over_in0 = true},
    [TS_OP_GROUP_NORM] = {.forward = ts_fwd_group_norm, .backward = ts_bwd_group_norm},
    [TS_OP_BATCH_MATMUL] = {.forward = ts_fwd_bmm, .backward = ts_bwd_bmm, .workspace_floats = ts_cpu_workspace_bmm},
    [TS_OP_PERMUTE] = {.forward = ts_fwd_permute, .backward = ts_bwd_permute},
    [TS_OP_SLICE] = {.forward = ts_fwd_slice, .backward = ts_bwd_slice},
    [TS_OP_CONCAT] = {.forward = ts_fwd_concat, .backward = ts_bwd_concat},
    [TS_OP_WHERE] = {.forward = ts_fwd_where, .backward = ts_bwd_where},
    [TS_OP_MASKED_FILL] = {.forward = ts_fwd_masked_fill, .backward = ts_bwd_masked_fill},
    [TS_OP_REDUCE_SUM_AXES] = {.forward = ts_fwd_reduce_axes, .backward = ts_bwd_reduce_axes},
    [TS_OP_REDUCE_MEAN_AXES] = {.forward = ts_fwd_reduce_axes, .backward = ts_bwd_reduce_axes},
    [TS_OP_REDUCE_MAX_AXES] = {.forward = ts_fwd_reduce_axes, .backward = ts_bwd_reduce_axes},
    [TS_OP_BUFFER] = {.forward = NULL}, /* a leaf: bound, not computed */
    [TS_OP_CONV2D] = {.forward = ts_fwd_conv2d, .backward = ts_bwd_conv2d, .workspace_floats = ts_cpu_workspace_conv2d,
                      .cache_floats = ts_cpu_cache_conv2d, .stores_din = 1u, .fuses_relu = true,
                      .fuses_add_relu = true, .sums_samples = true},
    [TS_OP_CONV3D] = {.forward = ts_fwd_conv3d, .backward = ts_bwd_conv3d},
    [TS_OP_CONV_TRANSPOSE3D] = {.forward = ts_fwd_conv3d, .backward = ts_bwd_conv3d},
    [TS_OP_MAX_POOL2D] = {.forward = ts_fwd_max_pool2d, .backward = ts_bwd_max_pool2d, .sums_samples = true},
    [TS_OP_AVG_POOL2D] = {.forward = ts_fwd_avg_pool2d, .backward = ts_bwd_avg_pool2d},
    [TS_OP_GLOBAL_AVG_POOL] = {.forward = ts_fwd_global_pool, .backward = ts_bwd_global_pool},
    [TS_OP_BATCH_NORM] = {.forward = ts_fwd_batch_norm, .backward = ts_bwd_batch_norm, .stores_din = 1u, .fuses_relu = true,
                          .sums_channels = true, .pass_over_in0 = true},
    [TS_OP_DROPOUT_MASK] = {.forward = ts_fwd_dropout_mask},
    [TS_OP_RANDOM_UNIFORM] = {.forward = ts_fwd_random_uniform},
    [TS_OP_TANH] = {.forward = ts_fwd_tanh, .backward = ts_bwd_tanh},
    [TS_OP_SIGMOID] = {.forward = ts_fwd_sigmoid, .backward = ts_bwd_sigmoid},
    [TS_OP_ABS] = {.forward = ts_fwd_ew_unary, .backward = ts_bwd_ew_unary, .stores_din = 1u},
    [TS_OP_CEIL] = {.forward = ts_fwd_ew_unary},
    [TS_OP_FLOOR] = {.forward = ts_fwd_ew_unary},
    [TS_OP_ROUND] = {.forward = ts_fwd_ew_unary},
    [TS_OP_CAST_INT] = {.forward = ts_fwd_ew_unary},
    [TS_OP_CAST_BOOL] = {.forward = ts_fwd_ew_unary},
    [TS_OP_SIN] = {.forward = ts_fwd_ew_unary, .backward = ts_bwd_ew_unary, .stores_din = 1u},
    [TS_OP_COS] = {.forward = ts_fwd_ew_unary, .backward = ts_bwd_ew_unary, .stores_din = 1u},
    [TS_OP_TAN] = {.forward = ts_fwd_ew_unary, .backward = ts_bwd_ew_unary, .stores_din = 1u},
    [TS_OP_ASIN] = {.forward = ts_fwd_ew_unary, .backward = ts_bwd_ew_unary, .stores_din = 1u},
    [TS_OP_ACOS] = {.forward = ts_fwd_ew_unary, .backward = ts_bwd_ew_unary, .stores_din = 1u},
    [TS_OP_ATAN] = {.forward = ts_fwd_ew_unary, .backward = ts_bwd_ew_unary, .stores_din = 1u},
    [TS_OP_SINH] = {.forward = ts_fwd_ew_unary, .backward = ts_bwd_ew_unary, .stores_din = 1u},
    [TS_OP_COSH] = {.forward = ts_fwd_ew_unary, .backward = ts_bwd_ew_unary, .stores_din = 1u},
    [TS_OP_ASINH] = {.forward = ts_fwd_ew_unary, .backward = ts_bwd_ew_unary, .stores_din = 1u},
    [TS_OP_ACOSH] = {.forward = ts_fwd_ew_unary, .backward = ts_bwd_ew_unary, .stores_din = 1u},
    [TS_OP_ATANH] = {.forward = ts_fwd_ew_unary, .backward = ts_bwd_ew_unary, .stores_din = 1u},
    [TS_OP_NOT] = {.forward = ts_fwd_ew_unary},
    [TS_OP_ISNAN] = {.forward = ts_fwd_ew_unary},
    [TS_OP_ISINF] = {.forward = ts_fwd_ew_unary},
    [TS_OP_HARD_SWISH] = {.forward = ts_fwd_ew_unary, .backward = ts_bwd_ew_unary, .stores_din = 1u},
    [TS_OP_HARD_SIGMOID] = {.forward = ts_fwd_ew_unary, .backward = ts_bwd_ew_unary, .stores_din = 1u},
    [TS_OP_LEAKY_RELU] = {.forward = ts_fwd_ew_unary, .backward = ts_bwd_ew_unary, .stores_din = 1u},
    [TS_OP_ELU] = {.forward = ts_fwd_ew_unary, .backward = ts_bwd_ew_unary, .stores_din = 1u},
    [TS_OP_SELU] = {.forward = ts_fwd_ew_unary, .backward = ts_bwd_ew_unary, .stores_din = 1u},
    [TS_OP_SOFTPLUS] = {.forward = ts_fwd_ew_unary, .backward = ts_bwd_ew_unary, .stores_din = 1u},
    [TS_OP_CAST_LOWBITS] = {.forward = ts_fwd_ew_unary, .backward = ts_bwd_ew_unary, .stores_din = 1u},
    [TS_OP_SELECT] = {.forward = ts_fwd_where, .backward = ts_bwd_where},
    [TS_OP_GATHER] = {.forward = ts_fwd_gather, .backward = ts_bwd_gather},
    [TS_OP_GATHER_ELEMENTS] = {.forward = ts_fwd_gather_elements, .backward = ts_bwd_gather_elements},
    [TS_OP_CAST_FLOAT] = {.forward = ts_fwd_cast_float},
    [TS_OP_CAST_INDEX] = {.forward = ts_fwd_cast_index},
    [TS_OP_POWER] = {.forward = ts_fwd_broadcast_binary, .backward = ts_bwd_broadcast_binary, .stores_din = 3u},
    [TS_OP_MAX] = {.forward = ts_fwd_broadcast_binary, .backward = ts_bwd_broadcast_binary, .stores_din = 3u},
    [TS_OP_MIN] = {.forward = ts_fwd_broadcast_binary, .backward = ts_bwd_broadcast_binary, .stores_din = 3u},
    [TS_OP_MOD] = {.forward = ts_fwd_broadcast_binary, .backward = ts_bwd_broadcast_binary, .stores_din = 3u},
    [TS_OP_FMOD] = {.forward = ts_fwd_broadcast_binary, .backward = ts_bwd_broadcast_binary, .stores_din = 3u},
    [TS_OP_EQUAL] = {.forward = ts_fwd_broadcast_binary},
    [TS_OP_GREATER] = {.forward = ts_fwd_broadcast_binary},
    [TS_OP_GREATER_EQUAL] = {.forward = ts_fwd_broadcast_binary},
    [TS_OP_LESS] = {.forward = ts_fwd_broadcast_binary},
    [TS_OP_LESS_EQUAL] = {.forward = ts_fwd_broadcast_binary},
    [TS_OP_AND] = {.forward = ts_fwd_broadcast_binary},
    [TS_OP_OR] = {.forward = ts_fwd_broadcast_binary},
    [TS_OP_XOR] = {.forward = ts_fwd_broadcast_binary},
    [TS_OP_CAST] = {.forward = fwd_cast, .backward = bwd_copy},
    [TS_OP_PAD] = {.forward = ts_fwd_pad, .backward = ts_bwd_pad},
    [TS_OP_MAX_POOL2D_INDICES] = {.forward = ts_fwd_max_pool2d_indices},
    [TS_OP_CONV_TRANSPOSE2D] = {.forward = ts_fwd_conv_transpose2d, .backward = ts_bwd_conv_transpose2d,
                                .workspace_floats = ts_cpu_workspace_conv_transpose2d, .stores_din = 1u},
    [TS_OP_STOP_GRADIENT] = {.forward = fwd_copy},
    [TS_OP_BITWISE] = {.forward = ts_fwd_bitwise},
    [TS_OP_CONVERT] = {.forward = ts_fwd_convert},
    [TS_OP_INT_ARITH] = {.forward = ts_fwd_int_arith},
    [TS_OP_INT_CUMSUM] = {.forward = ts_fwd_int_cumsum},
    [TS_OP_INT_REDUCE] = {.forward = ts_fwd_int_reduce},
    [TS_OP_INT_RESIZE] = {.forward = ts_fwd_int_resize},
    [TS_OP_SILU] = {.forward = ts_fwd_ew_unary, .backward = ts_bwd_ew_unary, .stores_din = 1u, .fuses_gate = true},
    [TS_OP_ATTENTION] = {.forward = ts_fwd_attention, .backward = ts_bwd_attention, .workspace_floats = ts_cpu_workspace_attention,
                         .stores_din = 0x17u}, /* q, k, v and the twin */
    [TS_OP_INT_MATMUL] = {.forward = ts_fwd_int_matmul},
    [TS_OP_RMS_NORM] = {.forward = ts_fwd_rms_norm, .backward = ts_bwd_rms_norm, .fuses_relu = true, .fuses_unary = true, .pass_over_in0 = true},
};
_Static_assert(sizeof kernels / sizeof kernels[0] == TS_OP_COUNT, "the CPU kernel table must cover every ts_op");

/* ------------------------------------------------------------- memory */

static ts_status cpu_alloc(size_t bytes, void **out) {
    *out = ts_calloc(bytes, 1);
    return *out ? TS_OK : TS_ERR_OUT_OF_MEMORY;
}

static void cpu_free(void *p) { ts_free(p); }

/* The pool a stream names: the model's, or none (the calling thread). */
static ts_pool *pool_of(void *stream) { return stream == TS_STREAM_THIS_THREAD ? NULL : (ts_pool *)stream; }

/* ------------------------------------------- copies: done on return */

static void cpu_copy(void *stream, void *dst, const void *src, size_t bytes) {
    (void)stream;
    if (bytes) memcpy(dst, src, bytes);
}

static ts_status cpu_synchronize(void *stream) {
    (void)stream;
    return TS_OK;
}

/* ------------------------------------------------ fill and accumulate */

static void cpu_fill(void *stream, float *dst, float value, int64_t n) {
    (void)stream;
    for (int64_t i = 0; i < n; i++) dst[i] = value;
}

static void cpu_zero(void *stream, float *dst, int64_t n) { ts_zero(pool_of(stream), dst, n); }
static void cpu_accumulate(void *stream, float *dst, const float *src, int64_t n) { ts_accumulate(pool_of(stream), dst, src, n); }
static void cpu_scale(void *stream, float *dst, const float *x, float s, int64_t n) { ts_scale_forward(pool_of(stream), dst, x, s, n); }

/* ------------------------------------------------- 16-bit float grids */

static void cpu_round_half(void *stream, ts_dtype t, float *x, int64_t n, ts_half_loss *lost) { ts_cpu_round_half_pool(pool_of(stream), t, x, x, n, lost); }

/* --------------------------------------------------------- reductions */

/* big tensors are split over the pool, whose threads together draw more
 * bandwidth than one */
#define SCAN_SPLIT_MIN (1 << 16)

/* Bit-exact test of the exponent field: vectorises to and/compare/or. */
static bool any_nonfinite(const float *x, int64_t begin, int64_t end) {
    uint32_t bad = 0;
    for (int64_t i = begin; i < end; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return bad != 0;
}

typedef struct scan_job {
    const float *x;
    atomic_bool bad;
} scan_job;

static void scan_slice(void *ctx, int64_t begin, int64_t end) {
    scan_job *j = ctx;
    if (any_nonfinite(j->x, begin, end)) atomic_store_explicit(&j->bad, true, memory_order_relaxed);
}

bool ts_cpu_has_nonfinite(ts_pool *pool, const float *x, int64_t n) {
    scan_job j = {.x = x};
    atomic_init(&j.bad, false);
    ts_pool_for(n >= SCAN_SPLIT_MIN ? pool : NULL, n, SCAN_SPLIT_MIN / 2, scan_slice, &j);
    return atomic_load_explicit(&j.bad, memory_order_relaxed);
}

static bool cpu_has_nonfinite(void *stream, const float *x, int64_t n) { return ts_cpu_has_nonfinite(pool_of(stream), x, n); }

static void cpu_unpack_half(void *stream, ts_dtype t, float *dst, const void *src, int64_t n) {
    ts_cpu_unpack_half(pool_of(stream), t, dst, src, n);
}

static void cpu_copy_out_then(void *stream, const ts_copy_out *c, int n, void (*fn)(void *), void *arg) {
    (void)stream;
    for (int i = 0; i < n; i++) memcpy(c[i].dst, c[i].src, c[i].bytes);
    fn(arg);
}

/* the step of [begin, end) on the calling thread (the executor splits a
 * parameter's step over the pool itself) */
static void cpu_opt_update(void *stream, const ts_optimizer *o, const ts_opt_consts *c, ts_opt_state *s, float *param, const float *grad,
                           int64_t begin, int64_t end) {
    (void)stream;
    ts_opt_update(o, c, s, param, grad, begin, end);
}

/* ------------------------------------------------------------- timing */

static void cpu_event_record(void *stream, ts_event *e) {
    (void)stream;
    *e = (ts_event){.ns = ts_now_ns()};
}

static uint64_t cpu_event_elapsed_ns(const ts_event *a, const ts_event *b) { return b->ns - a->ns; }

static const ts_backend cpu = {
    .name = "cpu",
    .host_addressable = true,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .copy_to_device = cpu_copy,
    .copy_to_host = cpu_copy,
    .copy_on_device = cpu_copy,
    .synchronize = cpu_synchronize,
    .fill = cpu_fill,
    .zero = cpu_zero,
    .accumulate = cpu_accumulate,
    .scale = cpu_scale,
    .round_half = cpu_round_half,
    .counts_half_loss = true,
    .unpack_half = cpu_unpack_half,
    .kernels = kernels,
    .attention_one_pass = true,
    .opt_update = cpu_opt_update,
    .opt_update_summarised = ts_opt_update_summarised,
    .opt_update_norms = ts_opt_update_norms,
    .has_nonfinite = cpu_has_nonfinite,
    .copy_out_then = cpu_copy_out_then,
    .event_record = cpu_event_record,
    .event_elapsed_ns = cpu_event_elapsed_ns,
};

const ts_backend *ts_backend_cpu(void) { return &cpu; }

ts_status ts_backend_host_pool(int n, ts_pool **out) {
    ts_status st = ts_pool_new(out, n);
    if (!st) ts_gemm_set_threads(n);
    return st;
}

/* ------------------------------------------- the CPU run as a GPU is */

/* The summaries of the jobs' tensors into their slots, as a device
 * reduces them. */
static void staged_stats_reduce_many(void *stream, const ts_stats_job *jobs, int n) {
    (void)stream;
    for (int i = 0; i < n; i++) {
        const ts_stats_job *j = &jobs[i];
        ts_stats_partial q; /* ~30 KB of stack, as ts_summarize_f32: no allocation in the step */
        ts_stats_partial_init(&q, TS_WATCH_STATS | (j->hist ? j->hist_what : 0));
        ts_stats_partial_add(&q, j->x, j->n);
        ts_stats_to_device(&q, j->slot, j->hist);
    }
}

/* "cpu-staged": the CPU's table with the host treating the memory as a
 * device's (host_addressable false) and the stats reduced into a device
 * slot, so the device path (exec/device.c, observation on the device,
 * copies in and out) runs and is tested on any machine, under the
 * sanitizers too. Not faster than "cpu". */
static ts_backend staged;
static pthread_once_t staged_once = PTHREAD_ONCE_INIT;

/* The host's memory is the device's: locking it changes nothing, but the
 * device path stages its copies as on a GPU (exec/device.c). */
static bool staged_host_pin(void *p, size_t bytes) { return p && bytes; }
static void staged_host_unpin(void *p) { (void)p; }

/* Its memory counted as a GPU's is (backend/held.h): what the models on
 * it hold now and at peak; free and total are the host's. */
static ts_held staged_held = TS_HELD_INIT;

static ts_status staged_alloc(size_t bytes, void **out) {
    ts_status st = cpu_alloc(bytes, out);
    if (st || ts_held_note(&staged_held, *out, bytes)) return st;
    cpu_free(*out);
    *out = NULL;
    return ts_error(TS_ERR_OUT_OF_MEMORY, "cpu-staged: no memory to note an allocation of %zu bytes", bytes);
}

static void staged_free(void *p) {
    if (!p) return;
    ts_held_forget(&staged_held, p);
    cpu_free(p);
}

static void staged_memory_info(ts_device_memory *out) {
    long pages = sysconf(_SC_PHYS_PAGES), avail = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    ts_held_get(&staged_held, &out->in_use, &out->peak);
    out->total = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    out->free = avail > 0 && page > 0 ? (uint64_t)avail * (uint64_t)page : 0;
}

static void staged_init(void) {
    staged = cpu;
    staged.name = "cpu-staged";
    staged.host_addressable = false;
    staged.stats_reduce_many = staged_stats_reduce_many;
    staged.host_pin = staged_host_pin;
    staged.host_unpin = staged_host_unpin;
    staged.alloc = staged_alloc;
    staged.free = staged_free;
    staged.memory_info = staged_memory_info;
    ts_cpu_staged_recording(&staged);
    ts_cpu_staged_streams(&staged); /* outermost: every call's stream checked as it comes */
}

const ts_backend *ts_backend_cpu_staged(void) {
    pthread_once(&staged_once, staged_init);
    return &staged;
}
