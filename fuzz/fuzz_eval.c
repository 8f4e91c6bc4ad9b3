/* fuzz_eval.c -- the inspector's `eval` (diag/inspect_eval.c, ts_eval) over
 * any text: a fixed table of tensors (names with '.', '/', ':' and a
 * space; f32 and i32; 0-D to 3-D) and the expression the input spells. An
 * answer is an f32 array of at most TS_EVAL_MAX_VALUES values; an error
 * returns nothing and its message names a column inside the expression (or
 * just past it).
 *
 * Input: any bytes (up to the first NUL), at most TS_EVAL_MAX_CHARS. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag/inspect_eval.h"
#include "tensorscope.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static float v[64];
static int32_t ids[4] = {3, -1, 0, 7};

static ts_status lookup(void *ctx, const char *name, ts_array *out) {
    (void)ctx;
    if (strcmp(name, "x") == 0) *out = ts_array_f32(v, 2, (int64_t[]){4, 6});
    else if (strcmp(name, "fc1.weight") == 0) *out = ts_array_f32(v, 2, (int64_t[]){6, 4});
    else if (strcmp(name, "fc1/MatMul:0") == 0) *out = ts_array_f32(v, 3, (int64_t[]){2, 2, 8});
    else if (strcmp(name, "loss") == 0) *out = ts_array_f32(v, 0, NULL);
    else if (strcmp(name, "labels") == 0) *out = ts_array_i32(ids, 1, (int64_t[]){4});
    else if (strcmp(name, "a b") == 0) *out = ts_array_f32(v, 1, (int64_t[]){0});
    else abort(); /* only the table's names are asked for */
    return TS_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const names[] = {"x", "fc1.weight", "fc1/MatMul:0", "loss", "labels", "a b"};
    if (size > TS_EVAL_MAX_CHARS) return 0;
    for (int i = 0; i < 64; i++) v[i] = (float)(i % 7) - 2.5f;
    char expr[TS_EVAL_MAX_CHARS + 1];
    memcpy(expr, data, size);
    expr[size] = '\0';
    ts_array a = {.data = (void *)expr};
    ts_status st = ts_eval(expr, names, sizeof names / sizeof *names, lookup, NULL, &a);
    if (st == TS_OK) {
        if (!a.data || a.dtype != TS_F32 || a.ndim < 0 || a.ndim > TS_MAX_DIMS || ts_array_numel(&a) > TS_EVAL_MAX_VALUES) abort();
        volatile float sink = 0;
        for (int64_t i = 0; i < ts_array_numel(&a); i++) sink += ((float *)a.data)[i]; /* every value readable */
        (void)sink;
        ts_eval_free(&a);
        return 0;
    }
    if (a.data) abort(); /* nothing returned */
    int col = 0;
    if (sscanf(ts_last_error(), "eval: column %d: ", &col) != 1 || col < 1 || (size_t)col > strlen(expr) + 1) abort();
    return 0;
}
