/* onnx_export_none.c -- the graph as an ONNX file in a build without
 * protobuf-c: saving says what to install (features.c). */
#include "diag/hooks.h"

ts_status ts_onnx_export(ts_model *m, const char *path) {
    (void)m, (void)path;
    return ts_feature_unsupported("onnx");
}
