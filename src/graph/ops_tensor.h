/* ops_tensor.h -- shape rules, costs and scratch sizes of the tensor and
 * transformer ops, referenced by their rows in the op table (ops.c). */
#ifndef TS_OPS_TENSOR_H
#define TS_OPS_TENSOR_H

#include "graph/ops.h"

ts_status ts_shape_broadcast_binary(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_embedding(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_gather(const ts_tensor *n, const ts_shape *in, ts_shape *out);
/* Gather's data as [outer, V, C] around `axis` (Embedding: axis 0 of [V, C]),
 * for its kernels on every device. */
void ts_gather_dims(const ts_shape *data, int axis, int64_t *outer, int64_t *V, int64_t *C);
ts_status ts_shape_gather_elements(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_layer_norm(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_rms_norm(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_group_norm(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_bmm(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_permute(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_slice(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_pad(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_concat(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_where(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_masked_fill(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_reduce_axes(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_cross_entropy(const ts_tensor *n, const ts_shape *in, ts_shape *out);
ts_status ts_shape_attention(const ts_tensor *n, const ts_shape *in, ts_shape *out);
double ts_flops_attention(const ts_shape *in, const ts_shape *out);
size_t ts_scratch_attention(const ts_shape *in, const ts_shape *out);

/* The shape a reduction over axes keeps: the reduced dims (attr[0]'s bits)
 * set to 1, for its shape rule and its kernels. */
ts_shape ts_reduce_kept_shape(const ts_tensor *n, const ts_shape *x);

double ts_flops_bmm(const ts_shape *in, const ts_shape *out);
double ts_flops_layer_norm(const ts_shape *in, const ts_shape *out);
size_t ts_scratch_layer_norm(const ts_shape *in, const ts_shape *out);
size_t ts_scratch_rms_norm(const ts_shape *in, const ts_shape *out);
size_t ts_scratch_group_norm(const ts_shape *in, const ts_shape *out);
/* GroupNorm's x [N,C,...] as N, C and the positions S of each channel */
void ts_group_norm_dims(const ts_shape *x, int64_t *N, int64_t *C, int64_t *S);
size_t ts_scratch_cross_entropy(const ts_shape *in, const ts_shape *out);

#endif
