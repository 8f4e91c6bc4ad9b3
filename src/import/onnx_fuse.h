/* onnx_fuse.h -- chains of nodes that an exporter writes for one PyTorch
 * op, found in the file so that the import builds that op once
 * (onnx_fuse.c). Internal: nothing here is API.
 *
 * nn.GroupNorm(G, C): both of PyTorch's exporters write x [N,C,...]
 * reshaped to [N,G,L], an InstanceNormalization of G channels (unit scale,
 * zero bias), a Reshape back to x's shape, then Mul by the weight and Add
 * of the bias, each [C,1,...] (an Unsqueeze of the [C] parameter, or an
 * initializer of that shape). The import makes it one group-norm op
 * (ts_group_norm) with the affine folded in, named in the module's scope. */
#ifndef TS_ONNX_FUSE_H
#define TS_ONNX_FUSE_H

#include "core/core.h"

#include <stdbool.h>
#include <stddef.h>

struct TensorscopeOnnx__GraphProto;

#define TS_ONNX_CHAIN_NODES 7

typedef struct ts_onnx_group_norm_chain {
    /* the chain's nodes in the file's order: Reshape, InstanceNormalization,
     * Reshape, Mul, Add and the Unsqueezes of the weight and bias; the
     * Add is the last */
    size_t node[TS_ONNX_CHAIN_NODES];
    int n_node;
    size_t last;
    /* value names: x, the first Reshape's shape, the InstanceNormalization's
     * scale and bias, the second Reshape's shape, and the per-channel
     * weight and bias (an Unsqueeze's input where one makes them) */
    const char *x, *shape_in, *scale, *bias, *shape_out, *weight, *shift;
    float eps;
    bool off; /* the values do not fit: its nodes are imported one by one */
} ts_onnx_group_norm_chain;

/* Every such chain of the graph whose intermediate values nothing else
 * reads, in the order of their last nodes (*n 0 for none);
 * ts_free(*out) frees them. */
ts_status ts_onnx_group_norm_chains(const struct TensorscopeOnnx__GraphProto *gp, ts_onnx_group_norm_chain **out, size_t *n);

#endif
