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
 * module's scope. */
#ifndef TS_ONNX_FUSE_H
#define TS_ONNX_FUSE_H

#include "core/core.h"

#include <stdbool.h>
#include <stddef.h>

struct TensorscopeOnnx__GraphProto;

#define TS_ONNX_CHAIN_NODES 7

enum { TS_ONNX_CHAIN_GROUP_NORM, TS_ONNX_CHAIN_GELU };

typedef struct ts_onnx_chain {
    int kind; /* TS_ONNX_CHAIN_* */
    /* the chain's nodes in the file's order: Reshape, InstanceNormalization,
     * Reshape, Mul, Add and the Unsqueezes of the weight and bias (the Add
     * is the last); GELU's Div, Erf, Add, Mul, Mul */
    size_t node[TS_ONNX_CHAIN_NODES];
    int n_node;
    size_t last;
    /* value names: x, the first Reshape's shape, the InstanceNormalization's
     * scale and bias, the second Reshape's shape, and the per-channel
     * weight and bias (an Unsqueeze's input where one makes them); GELU's
     * x, and its constants sqrt(2) (divisor), 1 (added) and 0.5 */
    const char *x, *shape_in, *scale, *bias, *shape_out, *weight, *shift;
    const char *root2, *one, *half;
    float eps;
    bool off; /* the values do not fit: its nodes are imported one by one */
} ts_onnx_chain;

/* Every such chain of the graph whose intermediate values nothing else
 * reads, in the order of their last nodes (*n 0 for none);
 * ts_free(*out) frees them. */
ts_status ts_onnx_chains(const struct TensorscopeOnnx__GraphProto *gp, ts_onnx_chain **out, size_t *n);

#endif
