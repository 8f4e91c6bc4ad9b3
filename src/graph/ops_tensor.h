/* ops_tensor.h -- shape rules and kernel adapters of the tensor and
 * transformer ops, referenced by their rows in the op table (ops.c). */
#ifndef TS_OPS_TENSOR_H
#define TS_OPS_TENSOR_H

#include "graph/ops.h"

ts_status ts_shape_broadcast_binary(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_embedding(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_layer_norm(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_bmm(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_permute(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_slice(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_concat(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_where(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_masked_fill(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_reduce_axes(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_cross_entropy(const ts_tensor *n, const ts_shape *in, ts_shape *out);

void ts_fwd_broadcast_binary(const ts_kctx *k);
void ts_bwd_broadcast_binary(const ts_kctx *k);
void ts_fwd_unary_math(const ts_kctx *k);
void ts_bwd_unary_math(const ts_kctx *k);
void ts_fwd_embedding(const ts_kctx *k);
void ts_bwd_embedding(const ts_kctx *k);
void ts_fwd_layer_norm(const ts_kctx *k);
void ts_bwd_layer_norm(const ts_kctx *k);
void ts_fwd_bmm(const ts_kctx *k);
void ts_bwd_bmm(const ts_kctx *k);
void ts_fwd_permute(const ts_kctx *k);
void ts_bwd_permute(const ts_kctx *k);
void ts_fwd_slice(const ts_kctx *k);
void ts_bwd_slice(const ts_kctx *k);
void ts_fwd_concat(const ts_kctx *k);
void ts_bwd_concat(const ts_kctx *k);
void ts_fwd_where(const ts_kctx *k);
void ts_bwd_where(const ts_kctx *k);
void ts_fwd_masked_fill(const ts_kctx *k);
void ts_bwd_masked_fill(const ts_kctx *k);
void ts_fwd_reduce_axes(const ts_kctx *k);
void ts_bwd_reduce_axes(const ts_kctx *k);
void ts_fwd_cross_entropy(const ts_kctx *k);
void ts_bwd_cross_entropy(const ts_kctx *k);
/* softmax / log-softmax over any dim: contiguous rows in parallel when the
 * dim is the last one */
void ts_fwd_softmax_any(const ts_kctx *k);
void ts_bwd_softmax_any(const ts_kctx *k);

double ts_flops_bmm(const ts_shape *in, const ts_shape *out);
double ts_flops_layer_norm(const ts_shape *in, const ts_shape *out);
size_t ts_scratch_layer_norm(const ts_shape *in, const ts_shape *out);
size_t ts_scratch_cross_entropy(const ts_shape *in, const ts_shape *out);

#endif
