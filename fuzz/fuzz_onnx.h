/* fuzz_onnx.h -- what the ONNX fuzz targets ask of every import: an error
 * leaves no graph; a success is a usable graph (outputs, each with a shape
 * of 0 to 2^34 elements). A broken promise traps (a finding).
 *
 * The targets import under a 16 MiB budget (FUZZ_ONNX_IMPORT_LIMIT,
 * fuzz_onnx_setup): at the default 1 GiB a few bytes folding a large
 * constant take seconds per execution and libFuzzer reports a timeout,
 * while the limit's own check is the same at any size. */
#ifndef TS_FUZZ_ONNX_H
#define TS_FUZZ_ONNX_H

#include "import/onnx_consts.h"

#define FUZZ_ONNX_IMPORT_LIMIT ((uint64_t)16 << 20)

static inline void fuzz_onnx_setup(void) {
    ts_set_log_level(TS_LOG_OFF);
    ts_set_limit(TS_LIMIT_IMPORT_BYTES, FUZZ_ONNX_IMPORT_LIMIT);
}

static inline void fuzz_onnx_check(ts_status st, ts_graph *g) {
    if (st != TS_OK) {
        if (g) __builtin_trap(); /* no graph after an error */
        return;
    }
    if (!g || ts_graph_output_count(g) == 0) __builtin_trap();
    for (size_t i = 0; i < ts_graph_output_count(g); i++) {
        ts_array a;
        if (ts_tensor_info(ts_graph_output_at(g, i), &a) != TS_OK || ts_array_numel(&a) < 0 || ts_array_numel(&a) > TS_MAX_NUMEL)
            __builtin_trap();
    }
}

#endif
