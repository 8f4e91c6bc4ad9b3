/* onnx_torch.h -- PyTorch's parameter names in a dynamo export's metadata
 * (onnx_torch.c). Internal: nothing here is API.
 *
 * torch.onnx.export(..., dynamo=True) optimizes its file (onnxscript's
 * optimizer): initializers of equal values are merged into one, a Linear's
 * weight read by a MatMul is stored transposed under a new name (`val_N`),
 * a zero bias of a Gemm or Conv is dropped. What each was is written in
 * the file's metadata_props: the graph's ExportedProgram signature maps
 * placeholders (`p_layer1_0_conv1_weight`) to PyTorch's names
 * (`layer1.0.conv1.weight`); an initializer's value_info names its
 * placeholder (`pkg.torch.onnx.original_node_name`) or, for a fold, what
 * it was folded from (`pkg.onnxscript.optimizer.folded_from`); a node's
 * `pkg.torch.onnx.fx_node` is the FX call it came from, its parameters by
 * placeholder. ts_torch_fixes reads them into the parameters to restore
 * under their PyTorch names. */
#ifndef TS_ONNX_TORCH_H
#define TS_ONNX_TORCH_H

#include "core/core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct TensorscopeOnnx__GraphProto;

typedef enum ts_torch_fix_kind {
    /* initializer `init` is PyTorch's `name` (the file names it otherwise) */
    TS_TORCH_RENAME,
    /* initializer `init` is a Conv weight that the optimizer fused with a
     * BatchNorm (W * gamma / sqrt(var + eps)), `name` `<weight>.fused`:
     * neither its name in the file nor PyTorch's weight's finds it */
    TS_TORCH_FUSED,
    /* node `node` reads initializer `init` (merged: equal values) at input
     * `input` in place of its own parameter `name`: a copy of init's values */
    TS_TORCH_COPY,
    /* initializer `init` (2-D, read only as MatMul's B) is the transpose
     * of the Linear weight `name` (an initializer too where it is tied:
     * GPT-2's lm_head reads the embedding's) */
    TS_TORCH_TRANSPOSED,
    /* node `node`, a MatMul of aten.linear, reads at input `input` the
     * transposed initializer `init` of another Linear's weight in place of
     * the transpose of its own weight `name` (merged: equal values, the
     * copies of a fresh layer): name is a parameter of its own, of init's
     * values transposed */
    TS_TORCH_TRANSPOSED_COPY,
    /* node `node` (Gemm or Conv) lost its bias `name` of zeros, `length`
     * long, which goes back as its input `input` */
    TS_TORCH_ZERO_BIAS,
    /* float initializer `init` is no parameter: neither one of the
     * signature's inputs nor folded from one (an attention scale, a mask) */
    TS_TORCH_CONSTANT,
    /* float initializer `init` is folded from a parameter and constants
     * (ViT's class token expanded to the example's batch, `expand`): a
     * parameter under the file's name, whose samples along dim 0 may be
     * one sample repeated */
    TS_TORCH_FOLDED,
    /* parameter `name` of the signature is in the file nowhere, and no fix
     * restores it: merged into an initializer of equal values where the
     * metadata does not say which node reads it in its place (a Split the
     * optimizer made), fused (a BatchNorm's into the Conv), or unused */
    TS_TORCH_LOST,
} ts_torch_fix_kind;

typedef struct ts_torch_fix {
    ts_torch_fix_kind kind;
    size_t node, input, init; /* node and initializer indices in the graph */
    int64_t length;
    char *name; /* PyTorch's name, owned */
} ts_torch_fix;

/* The fixes the file's metadata states, in node order (*n 0 for a file
 * without an ExportedProgram signature); ts_torch_fixes_free frees them. */
/* The module a node of a dynamo export came from (`encoder.layers.0.linear1`,
 * the last but one of its `pkg.torch.onnx.name_scopes`) into buf, "" for
 * the root module; false where the node does not say. */
struct TensorscopeOnnx__NodeProto;
bool ts_torch_scope(const struct TensorscopeOnnx__NodeProto *n, char *buf, size_t cap);

/* How many BatchNorms of a module in training mode (the FX call's
 * `training` True) the file holds as inference ones: the dynamo exporter
 * writes each so, and its optimizer fuses it into the Conv before it.
 * The first one's module into first (cap bytes). */
size_t ts_torch_frozen_batch_norms(const struct TensorscopeOnnx__GraphProto *gp, char *first, size_t cap);

ts_status ts_torch_fixes(const struct TensorscopeOnnx__GraphProto *gp, ts_torch_fix **out, size_t *n);
void ts_torch_fixes_free(ts_torch_fix *f, size_t n);

#endif
