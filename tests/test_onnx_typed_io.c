/* test_onnx_typed_io.c -- an imported model's typed inputs and outputs, and
 * inputs bound at import: an int8 input is fed int8 data and its output
 * comes back int8 (the file's type), Shape's int64 output comes back int64;
 * an output that folds to a constant is returned as that constant; an
 * input that gives Unsqueeze's axes is refused with a message that says how
 * to bind it, and once bound (ts_onnx_input.value) it is a constant folded
 * into the graph, no input of it; a bound value of the wrong shape or a
 * fraction for an integer input is refused. Integer Div truncates toward
 * zero, as ONNX's does; ReduceMax and MaxPool take integer and bool inputs
 * (a bool ReduceMax is an any). A BatchNormalization whose running
 * statistics are graph inputs needs them bound, and then normalizes with
 * the bound values. A training-mode Dropout gives its mask output as bool:
 * where the drawn mask keeps a value; a mask nothing reads is not made. */
/* needs: onnx */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "onnx_model.h"

static ts_model *model_of(ts_graph *g) {
    ts_tensor *o[4];
    size_t n = ts_graph_output_count(g);
    for (size_t k = 0; k < n && k < 4; k++) o[k] = ts_graph_output_at(g, k);
    ts_options *opt = ts_options_new();
    ts_options_set_output_mode(opt, TS_OUTPUT_FINAL, 0);
    ts_model *m = NULL;
    CHECK_OK(ts_model_inference(&m, g, o, (int)n, opt), "an inference model of the outputs");
    ts_options_free(opt);
    return m;
}

/* A Dropout node of a training export: ratio 0.25, training_mode a
 * constant true, outputs y and mask. */
static void dropout_in_training(void) {
    attr_float(node("Constant", "r", "", "ratio"), "value_float", 0.25f);
    Tensor *train = tensor("train", 9, 0, NULL);
    train->int32_data = mem(sizeof(int32_t));
    train->int32_data[0] = 1;
    train->n_int32_data = 1;
    push((void ***)&graph->initializer, &graph->n_initializer, train);
    node("Dropout", "d", "x,ratio,train", "y,mask");
}

int main(void) {
    ts_set_log_level(TS_LOG_OFF);
    snprintf(dir, sizeof dir, "/tmp/ts_onnx_typed_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    char path[256];

    /* y = Unsqueeze(x, axes) with axes a graph input; s = Shape(x), int64;
     * k8 = Identity(k), int8 in and out */
    model_begin();
    input("x", 1, (int64_t[]){4});
    input_typed("axes", 7, 1, (int64_t[]){1});
    input_typed("k", 3, 1, (int64_t[]){3});
    node("Unsqueeze", "u", "x,axes", "y");
    node("Shape", "sh", "x", "s");
    node("Neg", "n1", "k", "nk");
    node("Neg", "n2", "nk", "k8");
    output("y");
    output_typed("s", 7, 1, (int64_t[]){1});
    output_typed("k8", 3, 1, (int64_t[]){3});
    ts_graph *g = NULL;
    ts_status st = import_as("typed", &g);
    CHECK(st == TS_ERR_UNSUPPORTED && strstr(ts_last_error(), "'axes'") && strstr(ts_last_error(), "bind its value at import") &&
              strstr(ts_last_error(), "ts_onnx_input.value"),
          "axes fed as a graph input, not bound: an error that names it and says how to bind it: %s", ts_last_error());

    snprintf(path, sizeof path, "%s/typed.onnx", dir);
    int64_t axes_v[1] = {0};
    ts_array axes = {.dtype = TS_I64, .ndim = 1, .shape = {1}, .data = axes_v};
    ts_onnx_input bind = {.name = "axes", .value = &axes};
    CHECK_OK(ts_graph_from_onnx(&g, path, &bind, 1), "axes bound to [0] at import");
    if (g) {
        CHECK(ts_graph_output_count(g) == 3, "three outputs, the constant one too");
        ts_array info;
        ts_tensor_info(ts_graph_output_at(g, 0), &info);
        CHECK(info.ndim == 2 && info.shape[0] == 1 && info.shape[1] == 4, "y is Unsqueeze at axis 0: [1,4]");
        ts_model *m = model_of(g);
        float xv[4] = {1, 2, 3, 4};
        int8_t kv[3] = {-128, 5, 127};
        ts_array in[3] = {ts_array_f32(xv, 1, (int64_t[]){4}), {.dtype = TS_I8, .ndim = 1, .shape = {3}, .data = kv}, axes};
        const char *names[3] = {"x", "k", "axes"};
        st = m ? ts_model_run(m, names, in, 3) : TS_ERR_STATE;
        CHECK(st == TS_ERR_NOT_FOUND && strstr(ts_last_error(), "'axes' is not an input"), "the bound input is no input of the graph: %s",
              ts_last_error());
        st = m ? ts_model_run(m, names, in, 2) : TS_ERR_STATE;
        CHECK(!st, "runs on f32 x and int8 k: %s", st ? ts_last_error() : "");
        ts_array out;
        st = st ? st : ts_model_anchored(m, ts_tensor_name(ts_graph_output_at(g, 1)), &out);
        CHECK(!st && out.dtype == TS_I64 && ts_array_numel(&out) == 1 && ((const int64_t *)out.data)[0] == 4,
              "Shape's output, a constant, comes back as int64 [4]: %s", st ? ts_last_error() : "");
        st = st ? st : ts_model_anchored(m, ts_tensor_name(ts_graph_output_at(g, 2)), &out);
        CHECK(!st && out.dtype == TS_I8 && ts_array_numel(&out) == 3 && ((const int8_t *)out.data)[0] == -128 &&
                  ((const int8_t *)out.data)[2] == 127,
              "the int8 output comes back int8 with the values fed: %s", st ? ts_last_error() : "");
        ts_model_free(m);
        ts_graph_free(g);
        g = NULL;
    }

    axes = (ts_array){.dtype = TS_I64, .ndim = 1, .shape = {2}, .data = (int64_t[]){0, 1}};
    st = ts_graph_from_onnx(&g, path, &bind, 1);
    CHECK(st == TS_ERR_SHAPE && strstr(ts_last_error(), "'axes' is i64[2]"), "a bound value of another shape is refused: %s",
          ts_last_error());
    double half[1] = {0.5};
    axes = (ts_array){.dtype = TS_F64, .ndim = 1, .shape = {1}, .data = half};
    st = ts_graph_from_onnx(&g, path, &bind, 1);
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "0.5"), "a fraction for the int64 input is refused: %s", ts_last_error());
    /* q = a / b on int32 inputs: truncated, an int32 output */
    model_begin();
    input_typed("a", 6, 1, (int64_t[]){4});
    input_typed("b", 6, 1, (int64_t[]){4});
    node("Div", "d", "a,b", "q");
    output_typed("q", 6, 1, (int64_t[]){4});
    CHECK_OK(import_as("intdiv", &g), "an int32 Div imports");
    if (g) {
        ts_model *m = model_of(g);
        int32_t av[4] = {7, -7, 9, 1}, bv[4] = {2, 2, -4, 3};
        ts_array in[2] = {ts_array_i32(av, 1, (int64_t[]){4}), ts_array_i32(bv, 1, (int64_t[]){4})}, out;
        const char *names[2] = {"a", "b"};
        st = m ? ts_model_run(m, names, in, 2) : TS_ERR_STATE;
        if (!st) st = ts_model_anchored(m, ts_tensor_name(ts_graph_output_at(g, 0)), &out);
        const int32_t *q = st ? NULL : (const int32_t *)out.data;
        CHECK(q && out.dtype == TS_I32 && q[0] == 3 && q[1] == -3 && q[2] == -2 && q[3] == 0,
              "7/2, -7/2, 9/-4, 1/3 are 3, -3, -2, 0 (toward zero), int32: %s", st ? ts_last_error() : "");
        ts_model_free(m);
        ts_graph_free(g);
    }
    /* y = BatchNormalization(x, scale, bias, mean, var), the statistics graph inputs */
    model_begin();
    input("x", 2, (int64_t[]){2, 2});
    input("mean", 1, (int64_t[]){2});
    input("var", 1, (int64_t[]){2});
    init_f32("scale", 1, (int64_t[]){2}, (float[]){1.0f, 2.0f});
    init_f32("bias", 1, (int64_t[]){2}, (float[]){0.0f, 1.0f});
    node("BatchNormalization", "bn", "x,scale,bias,mean,var", "y");
    output("y");
    st = import_as("bn_stats", NULL);
    CHECK(st == TS_ERR_UNSUPPORTED && strstr(ts_last_error(), "'mean'") && strstr(ts_last_error(), "bind its value"),
          "running statistics fed as graph inputs, not bound: an error that says how to bind them: %s", ts_last_error());
    snprintf(path, sizeof path, "%s/bn_stats.onnx", dir);
    float mv[2] = {1.0f, -1.0f}, vv[2] = {4.0f, 0.25f};
    ts_array means = ts_array_f32(mv, 1, (int64_t[]){2}), vars = ts_array_f32(vv, 1, (int64_t[]){2});
    ts_onnx_input stats[2] = {{.name = "mean", .value = &means}, {.name = "var", .value = &vars}};
    CHECK_OK(ts_graph_from_onnx(&g, path, stats, 2), "the statistics bound at import");
    if (g) {
        ts_model *m = model_of(g);
        float xv[4] = {3.0f, 0.0f, -1.0f, -2.0f};
        ts_array in = ts_array_f32(xv, 2, (int64_t[]){2, 2}), out;
        const char *names[1] = {"x"};
        st = m ? ts_model_run(m, names, &in, 1) : TS_ERR_STATE;
        if (!st) st = ts_model_anchored(m, ts_tensor_name(ts_graph_output_at(g, 0)), &out);
        int bad = st != 0;
        for (int i = 0; !bad && i < 4; i++) {
            int c = i % 2;
            double want = (xv[i] - mv[c]) / sqrt(vv[c] + 1e-5) * (c ? 2.0 : 1.0) + (c ? 1.0 : 0.0);
            bad = fabs(((const float *)out.data)[i] - want) > 1e-4;
        }
        CHECK(!bad, "it normalizes with the bound mean and variance: %s", st ? ts_last_error() : "");
        ts_model_free(m);
        ts_graph_free(g);
    }

    /* any = ReduceMax(bools over axis 1), a bool output */
    model_begin();
    input_typed("m", 9, 2, (int64_t[]){3, 2});
    init_i64("ax", 1, (int64_t[]){1});
    attr_int(node("ReduceMax", "r", "m,ax", "any"), "keepdims", 0);
    output_typed("any", 9, 1, (int64_t[]){3});
    model_opset = 18;
    CHECK_OK(import_as("anybool", &g), "a ReduceMax of bools imports");
    if (g) {
        ts_model *m = model_of(g);
        uint8_t bools[6] = {0, 0, 1, 0, 1, 1};
        ts_array in = {.dtype = TS_BOOL, .ndim = 2, .shape = {3, 2}, .data = bools}, out;
        const char *names[1] = {"m"};
        st = m ? ts_model_run(m, names, &in, 1) : TS_ERR_STATE;
        if (!st) st = ts_model_anchored(m, ts_tensor_name(ts_graph_output_at(g, 0)), &out);
        const uint8_t *any = st ? NULL : (const uint8_t *)out.data;
        CHECK(any && out.dtype == TS_BOOL && any[0] == 0 && any[1] == 1 && any[2] == 1, "each row's any, as bool: %s",
              st ? ts_last_error() : "");
        ts_model_free(m);
        ts_graph_free(g);
    }

    /* Dropout in a training export (training_mode a constant true, ratio
     * 0.25): y and its bool mask, where y = x / 0.75 on the kept values
     * and 0 on the others; about three quarters kept */
    model_begin();
    input("x", 2, (int64_t[]){1, 4000});
    dropout_in_training();
    output("y");
    output_typed("mask", 9, 2, (int64_t[]){1, 4000});
    CHECK_OK(import_as("dropout_train", &g), "a training-mode Dropout with its mask output imports");
    if (g) {
        ts_tensor *y = ts_graph_output_at(g, 0), *mk = ts_graph_output_at(g, 1);
        ts_options *opt = ts_options_new();
        ts_options_anchor(opt, "y", ts_tensor_name(y), TS_OUTPUT_FINAL, 0);
        ts_options_anchor(opt, "mask", ts_tensor_name(mk), TS_OUTPUT_FINAL, 0);
        ts_model *m = NULL;
        /* the loss reads the mask (bool: cast to numbers) too, so that the training model computes it */
        ts_tensor *loss = ts_add(g, ts_sum(g, y), ts_scale(g, ts_sum(g, ts_cast(g, mk, TS_F32)), 0.0f));
        CHECK_OK(ts_model_training(&m, g, loss, opt, ts_sgd(0.0f, 0.0f, 0.0f)), "a training model over it");
        static float xv[4000];
        for (int i = 0; i < 4000; i++) xv[i] = 1.0f + (float)(i % 7);
        ts_array in = ts_array_f32(xv, 2, (int64_t[]){1, 4000}), ya, ma;
        const char *xn = "x";
        st = m ? ts_model_run(m, &xn, &in, 1) : TS_ERR_STATE;
        if (!st) st = ts_model_anchored(m, "y", &ya);
        if (!st) st = ts_model_anchored(m, "mask", &ma);
        CHECK(!st && ma.dtype == TS_BOOL, "the mask comes back as bool: %s", st ? ts_last_error() : "");
        int kept = 0, bad = 0;
        for (int i = 0; !st && i < 4000; i++) {
            bool k = ((const uint8_t *)ma.data)[i] != 0;
            kept += k;
            float want = k ? xv[i] / 0.75f : 0.0f;
            bad += fabsf(((const float *)ya.data)[i] - want) > 1e-5f * want;
        }
        CHECK(!st && bad == 0, "y is x / 0.75 where the mask keeps it, 0 elsewhere (%d wrong)", bad);
        CHECK(!st && kept > 2800 && kept < 3200, "about three quarters kept: %d of 4000", kept);
        ts_model_free(m);
        ts_options_free(opt);
        ts_graph_free(g);
    }
    /* the same Dropout where nothing reads the mask (as PyTorch's training
     * exports write it): no mask is made, so y is the last tensor the node
     * builds, the one `compare` pairs with PyTorch's dropout module */
    model_begin();
    input("x", 2, (int64_t[]){1, 4000});
    dropout_in_training();
    output("y");
    CHECK_OK(import_as("dropout_unread_mask", &g), "a training-mode Dropout whose mask nothing reads imports");
    if (g) {
        size_t n = ts_graph_tensor_count(g);
        CHECK(n > 0 && ts_graph_tensor_at(g, n - 1) == ts_graph_output_at(g, 0) && !ts_graph_find(g, "mask"),
              "no mask is made: the last tensor is y ('%s'), 'mask' is not a tensor", n ? ts_tensor_name(ts_graph_tensor_at(g, n - 1)) : "");
        ts_graph_free(g);
    }
    remove_dir();
    return check_summary("test_onnx_typed_io");
}
