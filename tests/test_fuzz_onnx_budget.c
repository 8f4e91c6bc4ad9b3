/* test_fuzz_onnx_budget.c -- the fuzz_onnx harness (fuzz/fuzz_onnx.c, as
 * libFuzzer calls it, linked here without libFuzzer) imports under its
 * small budget: a model of a few hundred bytes folding a 16M-element
 * constant (128 MiB of folded values, 256 MiB with the graph's copy) is
 * refused at once by the harness's 16 MiB limit instead of being computed
 * (at the default 1 GiB such inputs took seconds per execution and
 * libFuzzer reported timeouts); and every committed seed of fuzz_onnx
 * goes through the harness without a trap. */
/* needs: onnx */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../fuzz/fuzz_onnx.c"
#include "check.h"
#include "onnx.pb-c.h"
#include "onnx_model.h"

/* The model built with onnx_model.h, packed into bytes (freed by the caller). */
static uint8_t *packed_model(size_t *size) {
    TensorscopeOnnx__OperatorSetIdProto opset = TENSORSCOPE_ONNX__OPERATOR_SET_ID_PROTO__INIT;
    opset.has_version = 1;
    opset.version = 17;
    TensorscopeOnnx__OperatorSetIdProto *opsets[1] = {&opset};
    TensorscopeOnnx__ModelProto model = TENSORSCOPE_ONNX__MODEL_PROTO__INIT;
    model.n_opset_import = 1;
    model.opset_import = opsets;
    model.graph = graph;
    *size = tensorscope_onnx__model_proto__get_packed_size(&model);
    uint8_t *b = malloc(*size);
    if (!b) abort();
    tensorscope_onnx__model_proto__pack(&model, b);
    mem_free();
    return b;
}

static uint8_t *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = size > 0 ? malloc((size_t)size) : NULL;
    *n = b && fread(b, 1, (size_t)size, f) == (size_t)size ? (size_t)size : 0;
    fclose(f);
    return b;
}

int main(void) {
    (void)dir; /* models here are packed in memory, not written */
    /* x [2,4] -> Relu -> y; c = ConstantOfShape([4096, 4096]), an output too */
    model_begin();
    input("x", 2, (int64_t[]){2, 4});
    output("y");
    output("c");
    node("Relu", "relu", "x", "y");
    init_i64("dims", 2, (int64_t[]){4096, 4096});
    node("ConstantOfShape", "big", "dims", "c");
    size_t n = 0;
    uint8_t *bytes = packed_model(&n);
    ts_clear_error();
    LLVMFuzzerTestOneInput(bytes, n);
    CHECK(strstr(ts_last_error(), "'big'") && strstr(ts_last_error(), "over the limit of 16777216 bytes"),
          "a %zu-byte model folding [4096,4096]: refused by the harness's 16 MiB import limit: %s", n, ts_last_error());
    CHECK(ts_get_limit(TS_LIMIT_IMPORT_BYTES) == FUZZ_ONNX_IMPORT_LIMIT, "the harness's limit is %llu bytes",
          (unsigned long long)ts_get_limit(TS_LIMIT_IMPORT_BYTES));
    free(bytes);

    const char *src = getenv("TS_SOURCE_DIR");
    char dir_path[1024];
    snprintf(dir_path, sizeof dir_path, "%s/fuzz/corpus/fuzz_onnx", src ? src : ".");
    DIR *d = opendir(dir_path);
    int seeds = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char p[2048];
        snprintf(p, sizeof p, "%s/%s", dir_path, e->d_name);
        uint8_t *b = read_all(p, &n);
        if (!b) continue;
        LLVMFuzzerTestOneInput(b, n); /* a broken promise traps */
        free(b);
        seeds++;
    }
    if (d) closedir(d);
    CHECK(seeds > 0, "the %d committed seeds in %s go through the harness", seeds, dir_path);
    return check_summary("test_fuzz_onnx_budget");
}
