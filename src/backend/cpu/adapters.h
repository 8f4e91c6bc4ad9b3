/* adapters.h -- the CPU kernel rows' functions (one forward/backward pair
 * per op family) for the kernel table in cpu.c: each unpacks a node's
 * context into the fixed-argument kernels of kernels*.c and cnn.c. */
#ifndef TS_CPU_ADAPTERS_H
#define TS_CPU_ADAPTERS_H

#include "backend/backend.h"

/* k itself, or, when inputs are held in 16-bit cells (the GEMM operands
 * of a model's precision), *room: k with those inputs widened to f32
 * copies in k->widen (exact), so the f32 kernels read them (cpu.c). */
const ts_kctx *ts_cpu_widen(const ts_kctx *k, ts_kctx *room);
/* the room compile plans after those copies in k->widen for a training
 * node's output gradient rounded to 16-bit cells (64-byte aligned; the
 * bf16 products' dC), or NULL where there is none (no widen room) */
uint16_t *ts_cpu_grad_room(const ts_kctx *k);
/* The op a kernel does in its output pass (ts_kctx.relu_out, or act and
 * act_out) into *a, or false: none. */
struct ts_out_act;
bool ts_cpu_out_act(const ts_kctx *k, struct ts_out_act *a);

/* tensor and transformer ops (adapters_tensor.c) */
void ts_fwd_broadcast_binary(const ts_kctx *k);
void ts_bwd_broadcast_binary(const ts_kctx *k);
void ts_fwd_ew_unary(const ts_kctx *k);
void ts_fwd_cast_float(const ts_kctx *k);
void ts_fwd_cast_index(const ts_kctx *k);
void ts_fwd_bitwise(const ts_kctx *k);
void ts_fwd_convert(const ts_kctx *k);
void ts_fwd_int_arith(const ts_kctx *k);
void ts_fwd_int_cumsum(const ts_kctx *k);
void ts_fwd_int_reduce(const ts_kctx *k);
void ts_fwd_int_matmul(const ts_kctx *k); /* int_matmul.c */
void ts_fwd_int_resize(const ts_kctx *k);
void ts_bwd_ew_unary(const ts_kctx *k);
void ts_fwd_gather(const ts_kctx *k); /* Gather and Embedding */
void ts_bwd_gather(const ts_kctx *k);
void ts_fwd_gather_elements(const ts_kctx *k);
void ts_bwd_gather_elements(const ts_kctx *k);
void ts_fwd_layer_norm(const ts_kctx *k);
void ts_bwd_layer_norm(const ts_kctx *k);
void ts_fwd_rms_norm(const ts_kctx *k);
void ts_bwd_rms_norm(const ts_kctx *k);
void ts_fwd_group_norm(const ts_kctx *k);
void ts_bwd_group_norm(const ts_kctx *k);
size_t ts_cpu_workspace_bmm(const ts_shape *in, const ts_dtype *in_dtype, const ts_shape *out, int threads);
void ts_fwd_bmm(const ts_kctx *k);
void ts_bwd_bmm(const ts_kctx *k);
void ts_fwd_permute(const ts_kctx *k);
void ts_bwd_permute(const ts_kctx *k);
void ts_fwd_slice(const ts_kctx *k);
void ts_bwd_slice(const ts_kctx *k);
void ts_fwd_pad(const ts_kctx *k);
void ts_bwd_pad(const ts_kctx *k);
void ts_fwd_concat(const ts_kctx *k);
void ts_bwd_concat(const ts_kctx *k);
void ts_fwd_where(const ts_kctx *k);
void ts_bwd_where(const ts_kctx *k);
void ts_fwd_masked_fill(const ts_kctx *k);
void ts_bwd_masked_fill(const ts_kctx *k);
void ts_fwd_attention(const ts_kctx *k);
void ts_bwd_attention(const ts_kctx *k);
size_t ts_cpu_workspace_attention(const ts_shape *in, const ts_dtype *in_dtype, const ts_shape *out, int threads);
void ts_fwd_reduce_axes(const ts_kctx *k);
void ts_bwd_reduce_axes(const ts_kctx *k);
void ts_fwd_cross_entropy(const ts_kctx *k);
void ts_bwd_cross_entropy(const ts_kctx *k);
void ts_fwd_softmax_any(const ts_kctx *k);
void ts_bwd_softmax_any(const ts_kctx *k);

/* convolutional networks (adapters_cnn.c) */
void ts_fwd_conv2d(const ts_kctx *k);
void ts_bwd_conv2d(const ts_kctx *k);
void ts_fwd_max_pool2d(const ts_kctx *k);
void ts_bwd_max_pool2d(const ts_kctx *k);
void ts_fwd_max_pool2d_indices(const ts_kctx *k);
void ts_fwd_avg_pool2d(const ts_kctx *k);
void ts_bwd_avg_pool2d(const ts_kctx *k);
void ts_fwd_global_pool(const ts_kctx *k);
void ts_bwd_global_pool(const ts_kctx *k);
void ts_fwd_batch_norm(const ts_kctx *k);
void ts_bwd_batch_norm(const ts_kctx *k);
void ts_fwd_dropout_mask(const ts_kctx *k);
void ts_fwd_random_uniform(const ts_kctx *k);
void ts_fwd_tanh(const ts_kctx *k);
void ts_bwd_tanh(const ts_kctx *k);
void ts_fwd_sigmoid(const ts_kctx *k);
void ts_bwd_sigmoid(const ts_kctx *k);
/* Conv3d and ConvTranspose3d (the node's op says which) */
void ts_fwd_conv3d(const ts_kctx *k);
void ts_bwd_conv3d(const ts_kctx *k);
void ts_fwd_conv_transpose2d(const ts_kctx *k);
void ts_bwd_conv_transpose2d(const ts_kctx *k);
size_t ts_cpu_workspace_conv_transpose2d(const ts_shape *in, const ts_dtype *in_dtype, const ts_shape *out, int threads);
size_t ts_cpu_workspace_conv2d(const ts_shape *in, const ts_dtype *in_dtype, const ts_shape *out, int threads);
size_t ts_cpu_cache_conv2d(const ts_tensor *node, const ts_shape *in, const bool *held, const ts_shape *out);

#endif
