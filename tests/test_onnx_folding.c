/* test_onnx_folding.c -- ONNX nodes the importer computes at import, on
 * constants (shape arithmetic, masks), checked against the ONNX
 * definitions: Mod (the divisor's sign), Mod with fmod=1 (the dividend's),
 * GreaterOrEqual, LessOrEqual, And, Or and Xor each folded from int64
 * constants; the MultiheadAttention idiom that picks Reshape's target with
 * a folded Mod of a negative axis; and one folded constant read by two
 * graph ops (both read the same graph constant, under its own name); Pow
 * by a float initializer, a constant exponent; GatherElements of int64
 * constants, whose result indexes a Gather; integer folds exact past 2^53
 * (Add, Range, Mul wrapping, Neg, Cast to int8), read as int64. */
/* needs: onnx */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "onnx_model.h"

#define N 7

/* Runs the graph on x and checks output k against want. */
static void check_run(ts_graph *g, const float *x, int n_out, const float *const *want) {
    ts_tensor *o[2];
    for (int k = 0; k < n_out; k++) o[k] = ts_graph_output_at(g, (size_t)k);
    ts_model *m = NULL;
    ts_options *opt = ts_options_new();
    ts_options_set_output_mode(opt, TS_OUTPUT_FINAL, 0);
    CHECK_OK(ts_model_inference(&m, g, o, (size_t)n_out, opt), "an inference model of its outputs");
    ts_array in = ts_array_f32((void *)x, 1, (int64_t[]){N});
    const char *name = "x";
    ts_status st = m ? ts_model_run(m, &name, &in, 1) : TS_ERR_STATE;
    CHECK(st == TS_OK, "runs%s%s", st ? ": " : "", st ? ts_last_error() : "");
    for (int k = 0; k < n_out && !st; k++) {
        ts_array a = {0};
        ts_status got = ts_model_anchored(m, ts_tensor_name(o[k]), &a);
        int bad = got || ts_array_numel(&a) != N ? 0 : -1;
        for (int i = 0; bad < 0 && i < N; i++)
            if (((const float *)a.data)[i] != want[k][i]) bad = i;
        CHECK(bad < 0, "output %d: every value as ONNX defines it", k);
        if (bad >= 0 && !got) printf("     [%d] got %g, want %g\n", bad, (double)((const float *)a.data)[bad], (double)want[k][bad]);
    }
    ts_model_free(m);
    ts_options_free(opt);
}

int main(void) {
    ts_set_log_level(TS_LOG_OFF);
    snprintf(dir, sizeof dir, "/tmp/ts_onnx_folding_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    static const float zeros[N] = {0};

    /* each op folded from int64 constants [1], cast to float, concatenated
     * and added to x (zeros): the sum is the folded values */
    model_begin();
    input("x", 1, (int64_t[]){N});
    output("y");
    init_i64("m7", 1, (int64_t[]){-7});
    init_i64("p3", 1, (int64_t[]){3});
    init_i64("p4", 1, (int64_t[]){4});
    init_i64("one", 1, (int64_t[]){1});
    init_i64("zero", 1, (int64_t[]){0});
    node("Mod", "mod", "m7,p3", "r0");
    attr_int(node("Mod", "fmod", "m7,p3", "r1"), "fmod", 1);
    node("GreaterOrEqual", "ge", "p3,p3", "r2");
    node("LessOrEqual", "le", "p4,p3", "r3");
    node("And", "and", "one,zero", "r4");
    node("Or", "or", "one,zero", "r5");
    node("Xor", "xor", "one,one", "r6");
    char ins[64] = "", name[8];
    for (int k = 0; k < N; k++) {
        char in[4], out[4];
        snprintf(in, sizeof in, "r%d", k);
        snprintf(out, sizeof out, "f%d", k);
        snprintf(name, sizeof name, "cast%d", k);
        attr_int(node("Cast", name, in, out), "to", 1);
        strcat(ins, k ? ",f" : "f");
        snprintf(ins + strlen(ins), sizeof ins - strlen(ins), "%d", k);
    }
    attr_int(node("Concat", "concat", ins, "folded"), "axis", 0);
    node("Add", "add", "x,folded", "y");
    ts_graph *g = NULL;
    ts_status st = import_as("ops", &g);
    CHECK(st == TS_OK, "the folded ops import%s%s", st ? ": " : "", st ? ts_last_error() : "");
    /* Mod(-7, 3) = 2, fmod(-7, 3) = -1, 3 >= 3, 4 <= 3, 1 and 0, 1 or 0, 1 xor 1 */
    if (!st) check_run(g, zeros, 1, (const float *const[]){(const float[N]){2, -1, 1, 0, 0, 1, 0}});
    ts_graph_free(g);

    /* nn.MultiheadAttention's in_proj unflatten (torchscript export):
     * axis = (-1 + 3) % 3 = 2; Reshape(x, shape[:axis] ++ [3, 2] ++ shape[axis+1:]) */
    model_begin();
    input("x", 1, (int64_t[]){N});
    input("q", 3, (int64_t[]){2, 1, 6});
    output("y");
    init_i64("m1", 1, (int64_t[]){-1});
    init_i64("three", 1, (int64_t[]){3});
    init_i64("unflat", 2, (int64_t[]){3, 2});
    init_i64("start", 1, (int64_t[]){0});
    init_i64("one", 1, (int64_t[]){1});
    init_i64("end", 1, (int64_t[]){INT64_MAX});
    node("Shape", "shape", "q", "s");
    node("Add", "add_axis", "m1,three", "a");
    node("Mod", "mod", "a,three", "axis");
    node("Slice", "head", "s,start,axis", "head");
    node("Add", "next", "axis,one", "after");
    node("Slice", "tail", "s,after,end", "tail");
    attr_int(node("Concat", "target", "head,unflat,tail", "shape"), "axis", 0);
    node("Reshape", "reshape", "q,shape", "y");
    st = import_as("unflatten", &g);
    CHECK(st == TS_OK, "the unflatten of dimension 2 imports%s%s", st ? ": " : "", st ? ts_last_error() : "");
    ts_array info = {0};
    if (g) ts_tensor_info(ts_graph_output_at(g, 0), &info);
    CHECK(info.ndim == 4 && info.shape[0] == 2 && info.shape[1] == 1 && info.shape[2] == 3 && info.shape[3] == 2,
          "Reshape's target is [2,1,3,2]");
    ts_graph_free(g);

    /* a folded constant read by two graph ops */
    model_begin();
    input("x", 1, (int64_t[]){N});
    output("sum");
    output("prod");
    init_i64("ints", N, (int64_t[]){1, 2, 3, 4, 5, 6, 7});
    attr_int(node("Cast", "cast", "ints", "shared"), "to", 1);
    node("Add", "add", "x,shared", "sum");
    node("Mul", "mul", "x,shared", "prod");
    st = import_as("shared", &g);
    CHECK(st == TS_OK, "a folded constant read by Add and Mul imports%s%s", st ? ": " : "", st ? ts_last_error() : "");
    if (!st) {
        CHECK(ts_graph_find(g, "shared") != NULL, "the constant keeps its name");
        static const float x[N] = {1, 1, 1, 1, 1, 2, 2};
        check_run(g, x, 2,
                  (const float *const[]){(const float[N]){2, 3, 4, 5, 6, 8, 9}, (const float[N]){1, 2, 3, 4, 5, 12, 14}});
    }
    ts_graph_free(g);

    /* Pow by a 0-d float initializer (how PyTorch's dynamo exporter
     * stores GPT-2's Gelu exponent): a constant exponent, not a parameter
     * (whose gradient x^3 log x is NaN for negative x) */
    model_begin();
    input("x", 1, (int64_t[]){N});
    output("cube");
    init_f32("three_f", 0, (int64_t[]){0}, (const float[]){3.0f});
    node("Pow", "pow", "x,three_f", "cube");
    st = import_as("pow", &g);
    CHECK(st == TS_OK, "Pow by a float initializer imports%s%s", st ? ": " : "", st ? ts_last_error() : "");
    if (!st) {
        int params = 0;
        for (size_t i = 0; i < ts_graph_tensor_count(g); i++) params += strcmp(ts_tensor_op(ts_graph_tensor_at(g, i)), "Param") == 0;
        CHECK(params == 0, "the exponent is no parameter of the model (%d parameters)", params);
        static const float x[N] = {-2, -1, 0, 1, 2, 3, -3};
        check_run(g, x, 1, (const float *const[]){(const float[N]){-8, -1, 0, 1, 8, 27, -27}});
    }
    ts_graph_free(g);

    /* GatherElements of int64 constants folded: its result indexes a
     * Gather as integers (BERT's token type ids) */
    model_begin();
    input("x", 1, (int64_t[]){N});
    output("picked");
    init_i64("rev", N, (const int64_t[]){6, 5, 4, 3, 2, 1, 0});
    init_i64("where", N, (const int64_t[]){0, 0, 1, 2, 3, 4, -1});
    node("GatherElements", "ge", "rev,where", "ids");
    node("Gather", "pick", "x,ids", "picked");
    st = import_as("gather_elements", &g);
    CHECK(st == TS_OK, "a Gather by folded GatherElements ids imports%s%s", st ? ": " : "", st ? ts_last_error() : "");
    if (!st) {
        static const float x[N] = {10, 11, 12, 13, 14, 15, 16};
        check_run(g, x, 1, (const float *const[]){(const float[N]){16, 16, 15, 14, 13, 12, 10}});
    }
    ts_graph_free(g);

    /* integer folds exact over int64's range, wrapping as ONNX's int64
     * arithmetic: Add of two int64 constants past 2^62, a Range from
     * 2^62+1 by 2, a Mul that wraps, -INT64_MIN, int64 300 cast to int8
     * (44) and back; added to a fed int64 zero vector, read as int64 */
    model_begin();
    input_typed("r", 7, 1, (int64_t[]){N});
    output_typed("y", 7, 1, (int64_t[]){N});
    const int64_t p62 = (int64_t)1 << 62, p61 = (int64_t)1 << 61;
    init_i64("c1", 1, (int64_t[]){p62 + 1});
    init_i64("c2", 1, (int64_t[]){p61 + 3});
    init_i64("start", 1, (int64_t[]){p62 + 1});
    init_i64("limit", 1, (int64_t[]){p62 + 7});
    init_i64("delta", 1, (int64_t[]){2});
    init_i64("four", 1, (int64_t[]){4});
    init_i64("min", 1, (int64_t[]){INT64_MIN});
    init_i64("c300", 1, (int64_t[]){300});
    node("Add", "add", "c1,c2", "k0");
    node("Range", "range", "start,limit,delta", "k1");
    node("Mul", "mul", "c1,four", "k2");
    node("Neg", "neg", "min", "k3");
    attr_int(node("Cast", "to_i8", "c300", "c8"), "to", 3);
    attr_int(node("Cast", "to_i64", "c8", "k4"), "to", 7);
    attr_int(node("Concat", "cat", "k0,k1,k2,k3,k4", "folded"), "axis", 0);
    node("Add", "add_r", "r,folded", "y");
    st = import_as("int64_folds", &g);
    CHECK(st == TS_OK, "integer folds past 2^53 import%s%s", st ? ": " : "", st ? ts_last_error() : "");
    if (!st) {
        ts_tensor *o = ts_graph_output_at(g, 0);
        ts_model *m = NULL;
        CHECK_OK(ts_model_inference(&m, g, &o, 1, NULL), "an inference model of the int64 output");
        int64_t zero64[N] = {0};
        ts_array in = {.dtype = TS_I64, .ndim = 1, .shape = {N}, .data = zero64}, a = {0};
        const char *rn = "r";
        st = m ? ts_model_run(m, &rn, &in, 1) : TS_ERR_STATE;
        if (!st) st = ts_model_anchored(m, ts_tensor_name(o), &a);
        const int64_t want[N] = {p62 + p61 + 4, p62 + 1, p62 + 3, p62 + 5, (int64_t)((uint64_t)(p62 + 1) * 4u), INT64_MIN, 44};
        int bad = st || a.dtype != TS_I64 || ts_array_numel(&a) != N ? 0 : -1;
        for (int i = 0; bad < 0 && i < N; i++)
            if (((const int64_t *)a.data)[i] != want[i]) bad = i;
        CHECK(bad < 0, "Add, Range, Mul (wrapped), Neg of INT64_MIN and a Cast to int8 folded exactly in int64");
        if (bad >= 0 && !st) printf("     [%d] got %lld, want %lld\n", bad, (long long)((const int64_t *)a.data)[bad], (long long)want[bad]);
        ts_model_free(m);
    }
    ts_graph_free(g);

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("could not remove %s\n", dir);
    return check_summary("test_onnx_folding");
}
