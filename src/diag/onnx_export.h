/* onnx_export.h -- a compiled model as an ONNX file: ts_model_save_graph's
 * work (model/exports.c checks and compiles first). Internal. */
#ifndef TS_DIAG_ONNX_EXPORT_H
#define TS_DIAG_ONNX_EXPORT_H

#include "compile/program.h"
#include "diag/backward_ops.h"

/* m: what the model was compiled from; bm: its program and what the
 * backward walk reads (the learning rates). */
ts_status ts_onnx_export(const ts_model_def *m, const ts_bwd_model *bm, const char *path);

#endif
