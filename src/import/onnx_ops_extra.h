/* onnx_ops_extra.h -- ONNX ops of the newer opsets composed at import from
 * graph ops that already have gradients and device kernels
 * (onnx_ops_extra.c): CausalConvWithState and LinearAttention (opset 27),
 * GridSample (opset 16 on). onnx.c reads each node's attributes and inputs
 * and registers the rows. Internal: nothing here is API. */
#ifndef TS_ONNX_OPS_EXTRA_H
#define TS_ONNX_OPS_EXTRA_H

#include "graph/graph.h"

#include <stdbool.h>

/* CausalConvWithState: x [B,C,L] convolved depthwise and causally by w
 * [C,1,K] after past [B,C,K-1] (NULL: zeros), plus bias [C] (NULL: none),
 * then SiLU where `silu`. out[0]: [B,C,L]; out[1]: the last K-1 steps of
 * past and x, NULL when K is 1 (it would be empty). An error (ts_error)
 * for shapes that do not fit. */
ts_status ts_onnx_causal_conv(ts_graph *g, ts_tensor *x, ts_tensor *w, ts_tensor *bias, ts_tensor *past, bool silu, ts_tensor *out[2]);

/* LinearAttention's update rules */
enum { TS_LINATT_LINEAR, TS_LINATT_GATED, TS_LINATT_DELTA, TS_LINATT_GATED_DELTA };

typedef struct ts_onnx_linear_attention {
    int rule;                   /* TS_LINATT_* */
    float scale;                /* 0: 1/sqrt(d_k) */
    int64_t q_heads, kv_heads;
    ts_tensor *q, *k, *v;       /* [B,T,Hq*dk], [B,T,Hkv*dk], [B,T,Hkv*dv] */
    ts_tensor *past;            /* [B,Hkv,dk,dv] or NULL (zeros) */
    ts_tensor *decay;           /* [B,T,Hkv*dk] or [B,T,Hkv] (gated rules), else NULL */
    ts_tensor *beta;            /* [B,T,Hkv] or [B,T,1] (delta rules), else NULL */
} ts_onnx_linear_attention;

/* The recurrence unrolled over the T steps: out[0] [B,T,Hq*dv], out[1]
 * the last state [B,Hkv,dk,dv]. */
ts_status ts_onnx_linear_attention_build(ts_graph *g, const ts_onnx_linear_attention *a, ts_tensor *out[2]);

/* GridSample's modes and padding modes */
enum { TS_GRID_LINEAR, TS_GRID_NEAREST, TS_GRID_CUBIC };
enum { TS_GRID_ZEROS, TS_GRID_BORDER, TS_GRID_REFLECTION };

/* GridSample: x [N,C,D1..Dk] (k 1 to 3) sampled at grid [N,O1..Ok,k]
 * (normalized to [-1, 1], x first) as ONNX's reference does: per output
 * position the taps of the mode (1, 2 or 4 per dim) as GatherElements of
 * x's flattened positions, weighted; the gradient reaches x and, through
 * the weights of linear and cubic, the grid. *out: [N,C,O1..Ok]. */
ts_status ts_onnx_grid_sample(ts_graph *g, ts_tensor *x, ts_tensor *grid, int mode, int padding, bool align_corners, ts_tensor **out);

/* AffineGrid: theta [N,2,3] or [N,3,4] applied to the homogeneous base grid
 * of size (N, C, H, W) or (N, C, D, H, W) (its n_size values, constant),
 * normalized to [-1, 1] (align_corners: the corner pixels' centres) -- one
 * batched MatMul by a constant; the gradient reaches theta. *out: [N,H,W,2]
 * or [N,D,H,W,3]. */
ts_status ts_onnx_affine_grid(ts_graph *g, ts_tensor *theta, const int64_t *size, int n_size, bool align_corners, ts_tensor **out);

/* Col2Im with 2 spatial dims: x [N, C*KH*KW, L] summed into the image
 * img[0] x img[1] (pads in ONNX's order: top, left, bottom, right), as one
 * ConvTranspose2d per channel by a one-hot constant kernel; the gradient
 * reaches x. *out: [N,C,H,W]. */
ts_status ts_onnx_col2im(ts_graph *g, ts_tensor *x, const int64_t img[2], const int64_t block[2], const int64_t strides[2], const int64_t pads[4],
                         const int64_t dil[2], ts_tensor **out);

/* TensorScatter (opset 24): past_cache with the update written along axis
 * (after the batch axis) from write_indices[b] on (NULL: 0) in each batch
 * row, wrapping around in `circular` mode: a Where of a GatherElements of
 * the update at the positions it lands on; the gradient reaches both. */
ts_status ts_onnx_tensor_scatter(ts_graph *g, ts_tensor *past, ts_tensor *update, ts_tensor *index, int axis, bool circular, ts_tensor **out);

/* Det: the determinants of x [...,M,M] (M up to 4) by Leibniz's formula,
 * Slices multiplied and added; the gradient reaches x. *out: [...]. */
ts_status ts_onnx_det(ts_graph *g, ts_tensor *x, ts_tensor **out);

#endif
