/* fuzz_onnx.c -- the ONNX importer on arbitrary bytes: protobuf decoding,
 * initializer data, attribute and shape folding, builder calls. Errors,
 * never crashes or leaks (fuzz_onnx.h says what a result must be). Seeds:
 * fuzz/corpus/fuzz_onnx/ (models exported by PyTorch, copied from
 * tests/reference/onnx/ by fuzz/make_corpus.py). The bytes go in through
 * the importer's in-memory entry (what ts_graph_from_onnx calls after
 * mapping the file) with a model path in a directory that does not exist,
 * so external-data references are refused (fuzz_onnx_external fuzzes them). */
/* needs: onnx */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_onnx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_onnx_setup();
    ts_graph *g = NULL;
    ts_status st = ts_onnx_import_bytes(&g, data, size, "/nonexistent/fuzz.onnx", NULL, 0);
    fuzz_onnx_check(st, g);
    ts_graph_free(g);
    return 0;
}
