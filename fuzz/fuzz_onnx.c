/* fuzz_onnx.c -- the ONNX importer on arbitrary bytes: protobuf decoding,
 * initializer data, attribute and shape folding, builder calls. Errors,
 * never crashes or leaks. Seeds: fuzz/corpus/fuzz_onnx/ (models exported
 * by PyTorch, copied from tests/reference/onnx/ by fuzz/make_corpus.py).
 * The bytes go in through the importer's in-memory entry (what
 * ts_graph_from_onnx calls after mapping the file) with a model path in a
 * directory that does not exist, so external-data references are refused
 * rather than opening whatever a fuzzed name points to. */
#include <stddef.h>
#include <stdint.h>

#include "import/onnx_consts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ts_set_log_level(TS_LOG_OFF);
    ts_graph *g = NULL;
    /* a path in a directory that does not exist: external data is refused */
    ts_status st = ts_onnx_import_bytes(&g, data, size, "/nonexistent/fuzz.onnx", NULL, 0);
    if (st == TS_OK) {
        /* a success must be a usable graph: every output has a shape */
        if (!g || ts_graph_output_count(g) == 0) __builtin_trap();
        for (size_t i = 0; i < ts_graph_output_count(g); i++) {
            ts_array a;
            if (ts_tensor_info(ts_graph_output_at(g, i), &a) != TS_OK || ts_array_numel(&a) < 0) __builtin_trap();
        }
    } else if (g) {
        __builtin_trap(); /* no graph after an error */
    }
    ts_graph_free(g);
    return 0;
}
