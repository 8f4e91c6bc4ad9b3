/* onnx_none.c -- ONNX import in a build without protobuf-c: importing says
 * what to install (features.c). */
#include "core/core.h"
#include "graph/graph.h"
#include "import/onnx_consts.h"

ts_status ts_onnx_import_bytes(ts_graph **out, const uint8_t *bytes, size_t n, const char *path, const ts_onnx_input *inputs,
                               int n_inputs) {
    (void)bytes, (void)n, (void)path, (void)inputs, (void)n_inputs;
    if (out) *out = NULL;
    return ts_feature_unsupported("onnx");
}

ts_status ts_graph_from_onnx(ts_graph **out, const char *path, const ts_onnx_input *inputs, int n_inputs) {
    return ts_onnx_import_bytes(out, NULL, 0, path, inputs, n_inputs);
}
