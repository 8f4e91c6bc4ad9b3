/* test_onnx_half.c -- ONNX's float16 and bfloat16 (docs/onnx.md): a float16
 * graph input fed f16 data, float16 (int32_data) and bfloat16 (raw_data)
 * initializers, Cast of a graph tensor to BFLOAT16 and CastLike to its
 * type, ops computed in f32 between, and outputs returned in their declared
 * 16-bit dtype, rounded to nearest even (65504 + 16 overflows to Inf, the
 * bf16 tie 65792 goes to 65536); a double constant cast to FLOAT16 rounds
 * once (1 + 2^-11 + 2^-40 is 1 + 2^-10, where rounding to f32 first would
 * make a tie that goes to 1); a Cast to float6e2m3 is refused. */
/* needs: onnx */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "onnx_model.h"

enum { F16 = 10, BF16 = 16, DOUBLE = 11 };

static Tensor *init_bits(const char *name, int dtype, const uint16_t *bits, int n, bool raw) {
    Tensor *t = tensor(name, dtype, 1, (int64_t[]){n});
    if (raw) {
        t->has_raw_data = 1;
        t->raw_data.len = (size_t)n * 2;
        t->raw_data.data = mem((size_t)n * 2);
        for (int i = 0; i < n; i++) t->raw_data.data[2 * i] = (uint8_t)bits[i], t->raw_data.data[2 * i + 1] = (uint8_t)(bits[i] >> 8);
    } else {
        t->int32_data = mem((size_t)n * sizeof *t->int32_data);
        for (int i = 0; i < n; i++) t->int32_data[i] = bits[i];
        t->n_int32_data = (size_t)n;
    }
    push((void ***)&graph->initializer, &graph->n_initializer, t);
    return t;
}

/* Output k of the graph (the file's name `name`) as dt bits. */
static bool output_bits(ts_model *m, ts_graph *g, int k, const char *name, ts_dtype dt, const uint16_t *want, int n) {
    ts_array out;
    ts_status st = ts_model_anchored(m, ts_tensor_name(ts_graph_output_at(g, (size_t)k)), &out);
    if (st) {
        printf("     %s: %s\n", name, ts_last_error());
        return false;
    }
    bool ok = out.dtype == dt && ts_array_numel(&out) == n;
    for (int i = 0; ok && i < n; i++) {
        uint16_t got = ((const uint16_t *)out.data)[i];
        if (got != want[i]) printf("     %s[%d] = 0x%04x, want 0x%04x\n", name, i, got, want[i]);
        ok = got == want[i];
    }
    return ok;
}

int main(void) {
    ts_set_log_level(TS_LOG_OFF);
    snprintf(dir, sizeof dir, "/tmp/ts_onnx_half_XXXXXX");
    if (!mkdtemp(dir)) return 1;

    /* y = x + w (float16); c = Cast(x, BFLOAT16); z = c + b (bfloat16);
     * k = CastLike(x, c): bfloat16; e = Cast(d, FLOAT16), d a double constant */
    model_begin();
    input_typed("x", F16, 1, (int64_t[]){4});
    init_bits("w", F16, (const uint16_t[]){0x1000 /* 2^-11 */, 0x4c00 /* 16 */, 0x3c00 /* 1 */, 0x0001 /* 2^-24 */}, 4, false);
    init_bits("b", BF16, (const uint16_t[]){0x3f00 /* 0.5 */, 0x4380 /* 256 */, 0x0000, 0x3380 /* 2^-24 */}, 4, true);
    node("Add", "add1", "x,w", "y");
    attr_int(node("Cast", "cast1", "x", "c"), "to", BF16);
    node("Add", "add2", "c,b", "z");
    node("CastLike", "like", "x,c", "k");
    Node *cn = node("Constant", "const", "", "d");
    Attr *a = attr(cn, "value");
    a->has_type = 1;
    a->type = TENSORSCOPE_ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    a->t = tensor("d", DOUBLE, 1, (int64_t[]){1});
    double dv = 1.0 + 0x1p-11 + 0x1p-40;
    a->t->has_raw_data = 1;
    a->t->raw_data.len = sizeof dv;
    a->t->raw_data.data = mem(sizeof dv);
    memcpy(a->t->raw_data.data, &dv, sizeof dv); /* little-endian hosts only, as the importer */
    attr_int(node("Cast", "cast2", "d", "e"), "to", F16);
    output_typed("y", F16, 1, (int64_t[]){4});
    output_typed("z", BF16, 1, (int64_t[]){4});
    output_typed("k", BF16, 1, (int64_t[]){4});
    output_typed("e", F16, 1, (int64_t[]){1});
    ts_graph *g = NULL;
    CHECK_OK(import_as("half", &g), "a model of float16 and bfloat16 inputs, initializers, casts and outputs imports");
    if (g) {
        ts_tensor *o[4];
        for (int k = 0; k < 4; k++) o[k] = ts_graph_output_at(g, (size_t)k);
        ts_options *opt = ts_options_new();
        ts_options_set_output_mode(opt, TS_OUTPUT_FINAL, 0);
        ts_model *m = NULL;
        CHECK_OK(ts_model_inference(&m, g, o, 4, opt), "an inference model of the four outputs");
        ts_options_free(opt);
        /* x: 1, 65504, f16(1/3) = 0.333251953125, -2^-24 */
        uint16_t xv[4] = {0x3c00, 0x7bff, 0x3555, 0x8001};
        ts_array in = {.dtype = TS_F16, .ndim = 1, .shape = {4}, .data = xv};
        const char *names[1] = {"x"};
        ts_status st = m ? ts_model_run(m, names, &in, 1) : TS_ERR_STATE;
        CHECK(!st, "runs on f16 data for x: %s", st ? ts_last_error() : "");
        if (!st) {
            /* 1 + 2^-11: the tie goes to 1; 65520: Inf; 1.333251953125 to
             * 1 + 341/1024; -2^-24 + 2^-24 = +0 */
            CHECK(output_bits(m, g, 0, "y", TS_F16, (const uint16_t[]){0x3c00, 0x7c00, 0x3d55, 0x0000}, 4),
                  "y = x + w comes back f16, rounded to nearest even (a tie to even, 65520 to Inf)");
            /* c = bf16(x): 1, 65536, 0.333984375, -2^-24; + b: 1.5, 65792 (a
             * tie: 65536), 0.333984375, +0 */
            CHECK(output_bits(m, g, 1, "z", TS_BF16, (const uint16_t[]){0x3fc0, 0x4780, 0x3eab, 0x0000}, 4),
                  "z = bf16(x) + b comes back bf16: the cast rounded x, the sum is rounded once more");
            CHECK(output_bits(m, g, 2, "k", TS_BF16, (const uint16_t[]){0x3f80, 0x4780, 0x3eab, 0xb380}, 4),
                  "CastLike(x, a bf16 cast's output) is a cast to bf16");
            CHECK(output_bits(m, g, 3, "e", TS_F16, (const uint16_t[]){0x3c01}, 1),
                  "Cast(double 1 + 2^-11 + 2^-40, FLOAT16) is 1 + 2^-10: rounded once");
        }
        ts_model_free(m);
        ts_graph_free(g);
    }

    /* float6 (ONNX type 27): refused, naming the type (float8: test_onnx_lowbits) */
    model_begin();
    input("x", 1, (int64_t[]){4});
    attr_int(node("Cast", "cast6", "x", "y"), "to", 27);
    output("y");
    expect("Cast to float6e2m3", import_as("f6", NULL), TS_ERR_UNSUPPORTED, "float6e2m3");

    remove_dir();
    return check_summary("test_onnx_half");
}
