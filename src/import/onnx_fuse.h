/* onnx_fuse.h -- chains of nodes that an exporter writes for one PyTorch
 * op, found in the file so that the import builds that op once
 * (onnx_fuse.c). Internal: nothing here is API.
 *
 * nn.GroupNorm(G, C): both of PyTorch's exporters write x [N,C,...]
 * reshaped to [N,G,L], an InstanceNormalization of G channels (unit scale,
 * zero bias), a Reshape back to x's shape, then Mul by the weight and Add
 * of the bias, each [C,1,...] (an Unsqueeze of the [C] parameter, or an
 * initializer of that shape). The import makes it one group-norm op
 * (ts_group_norm) with the affine folded in, named in the module's scope.
 *
 * F.gelu (nn.GELU) by the TorchScript exporter before opset 20: Div of x
 * by sqrt(2), Erf, Add of 1, Mul by x, Mul by 0.5 (five passes forward and
 * five back). The import makes it one GELU op (ts_gelu), named in the
 * module's scope.
 *
 * F.silu (nn.SiLU) by the TorchScript exporter: Mul(x, Sigmoid(x)), the
 * Sigmoid's value read by the Mul alone. The import makes it one SiLU op
 * (ts_silu), named in the module's scope.
 *
 * Attention as the TorchScript exporter writes softmax(q k^T * scale +
 * mask) v: MatMul(q, Transpose(k, last two dims swapped)), a Mul or Div by
 * the scale (or none), an Add of the additive mask or a Where of a
 * boolean one (masked_fill(mask, -inf)), or neither, Softmax on the last
 * axis, MatMul by v. Unlike the chains above, its nodes are
 * imported one by one as ever (every name the file gives still resolves);
 * the last MatMul's result becomes the one-pass Attention node with those
 * ops as its unfused twin (ts_attention), where the mask is a constant of
 * 0 and -inf (or at most -1e30: what `masked_fill(-inf)` or
 * `finfo.min` write), the scale a constant and q, k and v 4-D. Keys and
 * values that grouped-query attention repeats for the query heads
 * (Llama's repeat_kv: Unsqueeze at axis 2, Expand, Reshape to the query
 * heads) join the chain: the node reads them before the repeat.
 *
 * RMSNorm as PyTorch's exporters write w * (x * rsqrt(mean(x^2, -1) + eps))
 * (Llama's, Hugging Face's LlamaRMSNorm): Pow(x, 2) or Mul(x, x),
 * ReduceMean over the last axis keeping it, Add of eps, Sqrt, Reciprocal
 * or Div(1, .), Mul by x, Mul by the weight (or x divided by the Sqrt,
 * then the Mul by the weight; a Cast to float before that Mul, as the
 * TorchScript exporter writes LlamaRMSNorm's `.to(input_dtype)`), operands
 * in either order. The import makes
 * it one RMSNorm op (ts_rms_norm) where the weight is x's last dim's D
 * values and the constants are 2, eps and 1, named in the module's scope. */
#ifndef TS_ONNX_FUSE_H
#define TS_ONNX_FUSE_H

#include "core/core.h"

#include <stdbool.h>
#include <stddef.h>

struct TensorscopeOnnx__GraphProto;

#define TS_ONNX_CHAIN_NODES 12

enum { TS_ONNX_CHAIN_GROUP_NORM, TS_ONNX_CHAIN_GELU, TS_ONNX_CHAIN_ATTENTION, TS_ONNX_CHAIN_SILU, TS_ONNX_CHAIN_RMS_NORM };

typedef struct ts_onnx_chain {
    int kind; /* TS_ONNX_CHAIN_* */
    /* the chain's nodes in the file's order: Reshape, InstanceNormalization,
     * Reshape, Mul, Add and the Unsqueezes of the weight and bias (the Add
     * is the last); GELU's Div, Erf, Add, Mul, Mul; SiLU's Sigmoid, Mul; attention's Transpose,
     * MatMul, Mul or Div (or none), Add or Where (or none), Softmax, MatMul, and
     * the Unsqueeze, Expand and Reshape of k and of v where they repeat */
    size_t node[TS_ONNX_CHAIN_NODES];
    int n_node;
    size_t last;
    /* value names: x, the first Reshape's shape, the InstanceNormalization's
     * scale and bias, the second Reshape's shape, and the per-channel
     * weight and bias (an Unsqueeze's input where one makes them); GELU's
     * x, and its constants sqrt(2) (divisor), 1 (added) and 0.5 */
    const char *x, *shape_in, *scale, *bias, *shape_out, *weight, *shift;
    const char *root2, *one, *half;
    /* attention's q, k (the Transpose's input), v, the scale's operand and
     * the mask's (NULL where the chain has none); scale_div: a Div */
    const char *q, *k, *v, *scale_by, *mask;
    const char *fill; /* a Where's value where the mask is true (masked_fill), else NULL: an additive mask */
    /* each repeated for the query heads: k's and v's values before the
     * repeat, unsqueezed and expanded (NULL where k or v is not one) */
    const char *kv_src[2], *kv_unsq[2], *kv_exp[2];
    bool scale_div;
    size_t scale_node, mask_node;
    /* attention, noted by the import as it reaches the scale's and the
     * mask's nodes (their constants may be freed once read): the scale
     * (1 without one), the mask as a graph i32 tensor (NULL: none), and
     * whether each fits (a constant scalar; a constant of 0 and masked
     * values, no row all masked) */
    float att_scale;
    ts_tensor *mask_t;
    bool scale_bad, mask_bad;
    float eps;
    bool off; /* the values do not fit: its nodes are imported one by one */
    /* RMSNorm's x (above) and weight (above), the Pow's exponent (NULL: a
     * Mul of x by x), the eps added, the 1 divided (NULL: a Reciprocal, or
     * x divided), the ReduceMean's axes as its input (NULL: its attribute
     * `axis`, one axis, or none: has_axis false) */
    const char *two, *eps_in, *axes_in;
    int64_t axis;
    bool has_axis;
} ts_onnx_chain;

/* Every such chain of the graph whose intermediate values nothing else
 * reads, in the order of their last nodes (*n 0 for none);
 * ts_free(*out) frees them. */
ts_status ts_onnx_chains(const struct TensorscopeOnnx__GraphProto *gp, ts_onnx_chain **out, size_t *n);

#endif
