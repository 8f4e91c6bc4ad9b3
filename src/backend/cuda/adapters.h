/* adapters.h -- the CUDA kernel rows' functions for the kernel table in
 * cuda.cu: one forward/backward pair per op family, each the twin of the
 * CPU's of the same name (backend/cpu/adapters.h) on device pointers and
 * the kernel context's stream. */
#ifndef TS_CUDA_ADAPTERS_H
#define TS_CUDA_ADAPTERS_H
#include "backend/cuda/cuda.h"

/* core ops (kernels_core.cu) */
void ts_cu_fwd_matmul(const ts_kctx *k);
void ts_cu_bwd_matmul(const ts_kctx *k);
void ts_cu_fwd_scale(const ts_kctx *k);
void ts_cu_bwd_scale(const ts_kctx *k);
void ts_cu_fwd_relu(const ts_kctx *k);
void ts_cu_bwd_relu(const ts_kctx *k);
void ts_cu_fwd_log(const ts_kctx *k);
void ts_cu_bwd_log(const ts_kctx *k);
void ts_cu_fwd_copy(const ts_kctx *k); /* reshape, flatten, print */
void ts_cu_bwd_copy(const ts_kctx *k);
void ts_cu_fwd_attention_twin(const ts_kctx *k); /* Attention: a copy of its unfused twin (no one-pass kernel yet) */
void ts_cu_bwd_attention_twin(const ts_kctx *k);
void ts_cu_fwd_nll(const ts_kctx *k);
void ts_cu_bwd_nll(const ts_kctx *k);
void ts_cu_fwd_sum(const ts_kctx *k); /* sum and mean */
void ts_cu_bwd_sum(const ts_kctx *k);
void ts_cu_fwd_softmax_any(const ts_kctx *k);
void ts_cu_bwd_softmax_any(const ts_kctx *k);
void ts_cu_fwd_cross_entropy(const ts_kctx *k);
void ts_cu_bwd_cross_entropy(const ts_kctx *k);
void ts_cu_fwd_ew_unary(const ts_kctx *k); /* the unary family of backend/ew_math.h */
void ts_cu_bwd_ew_unary(const ts_kctx *k);
void ts_cu_fwd_cast_float(const ts_kctx *k); /* i32 -> f32 */
void ts_cu_fwd_cast_index(const ts_kctx *k); /* f32 -> i32 indices */
void ts_cu_fwd_bitwise(const ts_kctx *k);     /* bitwise ops and shifts on i32 or i64, in the declared integer type */
void ts_cu_fwd_convert(const ts_kctx *k);     /* between f32, i32 and i64 */
void ts_cu_fwd_int_arith(const ts_kctx *k);   /* i32 / i64 arithmetic and comparisons */
void ts_cu_fwd_int_cumsum(const ts_kctx *k);  /* i32 / i64 running sums */
void ts_cu_fwd_int_reduce(const ts_kctx *k);  /* i32 / i64 reductions over axes */
void ts_cu_fwd_int_matmul(const ts_kctx *k);  /* i32 / i64 matrix products (int_matmul.cu) */
void ts_cu_fwd_int_resize(const ts_kctx *k);  /* i32 / i64 Resize, interpolated in double */
void ts_cu_fwd_cast(const ts_kctx *k);       /* onto a 16-bit float's values */
void ts_cu_round_half(cudaStream_t s, ts_dtype t, float *y, const float *x, int64_t n, ts_half_loss *lost);
void ts_cu_fwd_tanh(const ts_kctx *k);
void ts_cu_bwd_tanh(const ts_kctx *k);
void ts_cu_fwd_sigmoid(const ts_kctx *k);
void ts_cu_bwd_sigmoid(const ts_kctx *k);

/* broadcasting, masks and reductions over axes (kernels_broadcast.cu) */
void ts_cu_fwd_broadcast_binary(const ts_kctx *k); /* add sub mul div, ew_math.h's binary family */
void ts_cu_bwd_broadcast_binary(const ts_kctx *k);
void ts_cu_fwd_where(const ts_kctx *k);
void ts_cu_bwd_where(const ts_kctx *k);
void ts_cu_fwd_masked_fill(const ts_kctx *k);
void ts_cu_bwd_masked_fill(const ts_kctx *k);
void ts_cu_fwd_reduce_axes(const ts_kctx *k);
void ts_cu_bwd_reduce_axes(const ts_kctx *k);
void ts_cu_fwd_dropout_mask(const ts_kctx *k);
void ts_cu_fwd_random_uniform(const ts_kctx *k);

/* tensor and transformer ops (kernels_tensor.cu) */
void ts_cu_fwd_gather(const ts_kctx *k); /* Gather and Embedding */
void ts_cu_bwd_gather(const ts_kctx *k);
void ts_cu_fwd_gather_elements(const ts_kctx *k);
void ts_cu_bwd_gather_elements(const ts_kctx *k);
void ts_cu_fwd_layer_norm(const ts_kctx *k);
void ts_cu_bwd_layer_norm(const ts_kctx *k);
void ts_cu_fwd_rms_norm(const ts_kctx *k);
void ts_cu_bwd_rms_norm(const ts_kctx *k);
void ts_cu_fwd_group_norm(const ts_kctx *k);
void ts_cu_bwd_group_norm(const ts_kctx *k);
void ts_cu_fwd_bmm(const ts_kctx *k);
void ts_cu_bwd_bmm(const ts_kctx *k);
void ts_cu_fwd_permute(const ts_kctx *k);
void ts_cu_bwd_permute(const ts_kctx *k);
void ts_cu_fwd_slice(const ts_kctx *k);
void ts_cu_bwd_slice(const ts_kctx *k);
void ts_cu_fwd_pad(const ts_kctx *k);
void ts_cu_bwd_pad(const ts_kctx *k);
void ts_cu_fwd_concat(const ts_kctx *k);
void ts_cu_bwd_concat(const ts_kctx *k);

/* convolutional networks (kernels_cnn.cu) */
void ts_cu_fwd_conv2d(const ts_kctx *k);
void ts_cu_bwd_conv2d(const ts_kctx *k);
size_t ts_cu_workspace_conv2d(const ts_shape *in, const ts_dtype *in_dtype, const ts_shape *out, int threads);
void ts_cu_fwd_conv3d(const ts_kctx *k); /* Conv3d and ConvTranspose3d */
void ts_cu_bwd_conv3d(const ts_kctx *k);
void ts_cu_fwd_conv_transpose2d(const ts_kctx *k);
void ts_cu_bwd_conv_transpose2d(const ts_kctx *k);
size_t ts_cu_workspace_conv_transpose2d(const ts_shape *in, const ts_dtype *in_dtype, const ts_shape *out, int threads);
void ts_cu_fwd_max_pool2d(const ts_kctx *k);
void ts_cu_bwd_max_pool2d(const ts_kctx *k);
void ts_cu_fwd_max_pool2d_indices(const ts_kctx *k);
void ts_cu_fwd_avg_pool2d(const ts_kctx *k);
void ts_cu_bwd_avg_pool2d(const ts_kctx *k);
void ts_cu_fwd_global_pool(const ts_kctx *k);
void ts_cu_bwd_global_pool(const ts_kctx *k);
void ts_cu_fwd_batch_norm(const ts_kctx *k);
void ts_cu_bwd_batch_norm(const ts_kctx *k);

#endif
