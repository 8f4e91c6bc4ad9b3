/* onnx_export_none.c -- the graph as an ONNX file in a build without
 * protobuf-c: saving says what to install (features.c). */
#include "diag/onnx_export.h"

ts_status ts_onnx_export(const ts_model_def *m, const ts_bwd_model *bm, const char *path) {
    (void)m, (void)bm, (void)path;
    return ts_feature_unsupported("onnx");
}
