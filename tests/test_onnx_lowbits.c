/* test_onnx_lowbits.c -- ONNX's low-precision types in the importer
 * (docs/onnx.md), held in f32 on their grid:
 * - Cast of a graph tensor to FLOAT8E4M3FN (saturating: 464 ties to 448,
 *   1e6 clamps to 448) and to FLOAT8E5M2 with saturate=0 (1e6 is Inf),
 *   -0 and NaN kept; CastLike to a float8 cast's output casts to float8;
 *   the outputs declare their ONNX type (ts_tensor_onnx_type);
 * - initializers decoded: INT4 packed two per byte in raw_data, UINT2
 *   four per byte in int32_data, FLOAT8E5M2 one per int32 (Inf kept);
 * - a folded Cast of a double constant to FLOAT8E8M0 by round_mode "down"
 *   (3 -> 2), returned as a constant output of that type;
 * - CastLowbits's gradient passes straight through (not rounded), its
 *   forward rounds a parameter onto the grid;
 * - a ts_unary CastLowbits with a type that is not one is refused. */
/* needs: onnx */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "onnx_model.h"

enum { FLOAT = 1, DOUBLE = 11, E4M3FN = 17, E5M2 = 19, UINT2 = 25, INT4 = 22, E8M0 = 24 };

/* Output `k` (the file's name `name`): its declared ONNX type, and its f32
 * values equal to want (NaN matching NaN, the sign of 0 compared). */
static bool output_is(ts_model *m, ts_graph *g, int k, const char *name, int onnx_type, const float *want, int n) {
    ts_tensor *t = ts_graph_output_at(g, (size_t)k);
    ts_array out;
    ts_status st = ts_model_anchored(m, ts_tensor_name(t), &out);
    if (st) {
        printf("     %s: %s\n", name, ts_last_error());
        return false;
    }
    bool ok = out.dtype == TS_F32 && ts_array_numel(&out) == n && ts_tensor_onnx_type(t) == onnx_type;
    if (!ok) printf("     %s: %s, %lld values, ONNX type %d\n", name, ts_dtype_name(out.dtype), (long long)ts_array_numel(&out), ts_tensor_onnx_type(t));
    for (int i = 0; ok && i < n; i++) {
        float got = ((const float *)out.data)[i];
        ok = isnan(want[i]) ? isnan(got) : got == want[i] && signbit(got) == signbit(want[i]);
        if (!ok) printf("     %s[%d] = %g, want %g\n", name, i, got, want[i]);
    }
    return ok;
}

static Tensor *init_codes(const char *name, int dtype, int n, const uint8_t *bytes, int nbytes, bool raw) {
    Tensor *t = tensor(name, dtype, 1, (int64_t[]){n});
    if (raw) {
        t->has_raw_data = 1;
        t->raw_data.len = (size_t)nbytes;
        t->raw_data.data = mem((size_t)nbytes);
        memcpy(t->raw_data.data, bytes, (size_t)nbytes);
    } else {
        t->int32_data = mem((size_t)nbytes * sizeof *t->int32_data);
        for (int i = 0; i < nbytes; i++) t->int32_data[i] = bytes[i];
        t->n_int32_data = (size_t)nbytes;
    }
    push((void ***)&graph->initializer, &graph->n_initializer, t);
    return t;
}

int main(void) {
    ts_set_log_level(TS_LOG_OFF);
    snprintf(dir, sizeof dir, "/tmp/ts_onnx_lowbits_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    model_opset = 24;

    model_begin();
    input("x", 1, (int64_t[]){6});
    /* int4 -8, 7, -1, 3, 0 (low nibble first); uint2 3, 0, 1, 2, 3 (low bits first); e5m2 Inf, 1 */
    init_codes("q", INT4, 5, (const uint8_t[]){0x78, 0x3f, 0x00}, 3, true);
    init_codes("u", UINT2, 5, (const uint8_t[]){0x93, 0x03}, 2, false);
    init_codes("f", E5M2, 2, (const uint8_t[]){0x7c, 0x3c}, 2, false);
    attr_int(node("Cast", "c1", "x", "y1"), "to", E4M3FN);
    Node *c2 = node("Cast", "c2", "x", "y2");
    attr_int(c2, "to", E5M2);
    attr_int(c2, "saturate", 0);
    node("CastLike", "like", "x,y1", "k");
    attr_int(node("Cast", "cq", "q", "qf"), "to", FLOAT);
    attr_int(node("Cast", "cu", "u", "uf"), "to", FLOAT);
    node("Add", "add", "qf,uf", "z");
    attr_int(node("Cast", "cf", "f", "e"), "to", FLOAT);
    Node *cn = node("Constant", "const", "", "d");
    Attr *a = attr(cn, "value");
    a->has_type = 1;
    a->type = TENSORSCOPE_ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    a->t = tensor("d", DOUBLE, 1, (int64_t[]){1});
    a->t->double_data = mem(sizeof(double));
    a->t->double_data[0] = 3.0;
    a->t->n_double_data = 1;
    Node *c8 = node("Cast", "c8", "d", "w");
    attr_int(c8, "to", E8M0);
    attr_string(c8, "round_mode", "down");
    output_typed("y1", E4M3FN, 1, (int64_t[]){6});
    output_typed("y2", E5M2, 1, (int64_t[]){6});
    output_typed("k", E4M3FN, 1, (int64_t[]){6});
    output_typed("z", FLOAT, 1, (int64_t[]){5});
    output_typed("e", FLOAT, 1, (int64_t[]){2});
    output_typed("w", E8M0, 1, (int64_t[]){1});
    enum { NOUT = 6 };
    ts_graph *g = NULL;
    CHECK_OK(import_as("lowbits", &g), "a model of float8, int4, uint2 and e8m0 initializers, casts and outputs imports");
    if (g) {
        ts_tensor *o[NOUT];
        for (int k = 0; k < NOUT; k++) o[k] = ts_graph_output_at(g, (size_t)k);
        ts_options *opt = ts_options_new();
        ts_options_set_output_mode(opt, TS_OUTPUT_FINAL, 0);
        ts_model *m = NULL;
        CHECK_OK(ts_model_inference(&m, g, o, NOUT, opt), "an inference model of the outputs");
        ts_options_free(opt);
        float xv[6] = {464.0f, 1e6f, -0.0f, 0.3f, 17.0f, NAN};
        ts_array in = {.dtype = TS_F32, .ndim = 1, .shape = {6}, .data = xv};
        const char *names[1] = {"x"};
        ts_status st = m ? ts_model_run(m, names, &in, 1) : TS_ERR_STATE;
        CHECK(!st, "runs: %s", st ? ts_last_error() : "");
        if (!st) {
            /* e4m3fn: 464 is the tie between 448 and 480 (not finite): 448;
             * 0.3 between 0.28125 and 0.3125; 17 the tie between 16 and 18 */
            CHECK(output_is(m, g, 0, "y1", E4M3FN, (const float[]){448, 448, -0.0f, 0.3125f, 16, NAN}, 6),
                  "Cast to float8e4m3fn rounds to nearest even and saturates (464, 1e6 -> 448), -0 and NaN kept");
            CHECK(output_is(m, g, 1, "y2", E5M2, (const float[]){448, INFINITY, -0.0f, 0.3125f, 16, NAN}, 6),
                  "Cast to float8e5m2 with saturate=0: 1e6 overflows to Inf");
            CHECK(output_is(m, g, 2, "k", E4M3FN, (const float[]){448, 448, -0.0f, 0.3125f, 16, NAN}, 6),
                  "CastLike(x, a float8e4m3fn cast's output) is a cast to float8e4m3fn");
            CHECK(output_is(m, g, 3, "z", 0, (const float[]){-5, 7, 0, 5, 3}, 5),
                  "int4 (packed raw_data) + uint2 (packed int32_data) initializers decode to -8 7 -1 3 0 and 3 0 1 2 3");
            CHECK(output_is(m, g, 4, "e", 0, (const float[]){INFINITY, 1}, 2), "a float8e5m2 initializer decodes Inf and 1");
            CHECK(output_is(m, g, 5, "w", E8M0, (const float[]){2}, 1), "Cast(3.0, FLOAT8E8M0, round_mode down) folds to 2");
        }
        ts_model_free(m);
        ts_graph_free(g);
    }

    /* packed data of the wrong size names the type */
    model_begin();
    input("x", 1, (int64_t[]){1});
    init_codes("q", INT4, 5, (const uint8_t[]){0x78, 0x3f}, 2, true);
    node("Cast", "cq", "q", "y");
    output("y");
    expect("int4 initializer of 5 values in 2 bytes", import_as("short", NULL), TS_ERR_FORMAT, "int4");

    /* loss = sum(e4m3fn(p)) / 3: the loss sums the rounded values, the
     * gradient is 1/3 everywhere, as it is (1/3 is no e4m3fn value) */
    {
        ts_graph *gl = ts_graph_new(1);
        ts_tensor *p = ts_param(gl, "p", 1, (int64_t[]){4});
        ts_tensor *loss = ts_sum(gl, ts_scale(gl, ts_unary(gl, "CastLowbits", p, (float)E4M3FN, 1.0f), 1.0f / 3.0f));
        ts_options *o = ts_options_new();
        ts_options_anchor(o, "gp", "Gradient___p", TS_OUTPUT_FINAL, 0);
        ts_array pv = {.dtype = TS_F32, .ndim = 1, .shape = {4}, .data = (float[]){464.0f, 0.3f, 17.0f, -1e6f}};
        CHECK_OK(ts_param_set(p, &pv), "p = 464, 0.3, 17, -1e6");
        ts_model *m = NULL;
        CHECK_OK(ts_model_training(&m, gl, loss, o, ts_sgd(0.0f, 0.0f, 0.0f)), "a training model through CastLowbits");
        CHECK_OK(m ? ts_model_run(m, NULL, NULL, 0) : TS_ERR_STATE, "a step");
        ts_array gp = {0}, lv = {0};
        bool ok = m && !ts_model_anchored(m, "gp", &gp) && !ts_model_anchored(m, ts_tensor_name(loss), &lv);
        const float *gv = ok ? gp.data : NULL;
        CHECK(ok && gv[0] == 1.0f / 3.0f && gv[1] == 1.0f / 3.0f && gv[3] == 1.0f / 3.0f,
              "CastLowbits's gradient passes straight through: 1/3 (%.9g)", ok ? (double)gv[0] : 0.0);
        float want = (448.0f + 0.3125f + 16.0f - 448.0f) * (1.0f / 3.0f);
        CHECK(ok && fabsf(*(const float *)lv.data - want) < 1e-4f, "the loss sums the rounded values: %g (%g)",
              ok ? (double)*(const float *)lv.data : 0.0, (double)want);
        ts_model_free(m);
        ts_options_free(o);
        ts_graph_free(gl);
    }

    /* CastLowbits takes a low-precision type */
    ts_graph *g2 = ts_graph_new(1);
    ts_tensor *x = ts_input(g2, "x", TS_F32, 1, (int64_t[]){3});
    CHECK(ts_unary(g2, "CastLowbits", x, 16.0f, 0.0f) == NULL && ts_graph_status(g2) == TS_ERR_INVALID_ARGUMENT &&
              strstr(ts_last_error(), "17 to 26"),
          "ts_unary CastLowbits with type 16 (bfloat16) is refused naming the types: %s", ts_last_error());
    ts_graph_free(g2);

    remove_dir();
    return check_summary("test_onnx_lowbits");
}
