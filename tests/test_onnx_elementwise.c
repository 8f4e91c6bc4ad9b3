/* test_onnx_elementwise.c -- ONNX nodes the importer maps to the
 * elementwise families, casts and gathers, with the attributes and input
 * types ONNX gives them, run on graph inputs and checked against the ONNX
 * definitions: IsInf's detect_negative, Cast to int64 (toward zero) and to
 * bool, Equal feeding Where (a computed condition), a bool input feeding
 * Where (fed as uint8), Gather along axis 1 by int64 ids with a negative
 * one, LeakyRelu's default alpha, Max of three inputs, Mod with fmod=1 by
 * an int64 constant, Gelu with approximate='tanh' (opset 20); the
 * trigonometric and hyperbolic functions of constants (folded); a Gather
 * by computed indices, one out of range an error naming it; integer
 * arithmetic and CumSum of int64 graph tensors exact in int64, labels the
 * graph computed reaching a loss. The values
 * that come out as 1/0 or integers (where ONNX's type is bool or int64)
 * are checked here because ONNX's own cases compare the output type too. */
/* needs: onnx */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "onnx_model.h"

#define N 6

static void set_elem(int k, int type) { graph->input[k]->type->tensor_type->elem_type = type; }

static void check_output(ts_model *m, ts_graph *g, const char *name, const float *want) {
    ts_tensor *t = ts_graph_find(g, name);
    ts_array a = {0};
    ts_status st = t ? ts_model_anchored(m, ts_tensor_name(t), &a) : TS_ERR_NOT_FOUND;
    int bad = st || ts_array_numel(&a) != N ? 0 : -1;
    float got[N] = {0}; /* f32 values, or an integer or bool tensor's (Cast to int64: i64) */
    for (int i = 0; bad < 0 && i < N; i++) {
        got[i] = a.dtype == TS_I64    ? (float)((const int64_t *)a.data)[i]
                 : a.dtype == TS_I32  ? (float)((const int32_t *)a.data)[i]
                 : a.dtype == TS_BOOL ? (float)((const uint8_t *)a.data)[i]
                                      : ((const float *)a.data)[i];
        if (!(fabsf(got[i] - want[i]) <= 1e-5f * fabsf(want[i]) || got[i] == want[i]))
            bad = i;
    }
    CHECK(bad < 0, "%s: every value as ONNX defines it%s", name, st ? ts_last_error() : "");
    if (bad >= 0 && !st)
        printf("     [%d] got %g, want %g\n", bad, (double)got[bad], (double)want[bad]);
}

int main(void) {
    ts_set_log_level(TS_LOG_OFF);
    snprintf(dir, sizeof dir, "/tmp/ts_onnx_elementwise_XXXXXX");
    if (!mkdtemp(dir)) return 1;

    model_begin();
    input("x", 2, (int64_t[]){2, 3});
    input("y", 2, (int64_t[]){2, 3});
    input("ids", 1, (int64_t[]){3});
    set_elem(2, 7); /* int64 */
    input("mask", 2, (int64_t[]){2, 3});
    set_elem(3, 9); /* bool */
    static const char *const outs[] = {"pinf", "xi", "xb", "w", "g", "wm", "lr", "mx", "md", "ge"};
    for (size_t i = 0; i < sizeof outs / sizeof *outs; i++) output(outs[i]);
    attr_int(node("IsInf", "isinf", "y", "pinf"), "detect_negative", 0);
    attr_int(node("Cast", "to_int", "x", "xi"), "to", 7);
    attr_int(node("Cast", "to_bool", "x", "xb"), "to", 9);
    node("Neg", "neg", "x", "nx");
    node("Equal", "eq", "xi,x", "integral");
    node("Where", "where", "integral,x,nx", "w");
    attr_int(node("Gather", "gather", "x,ids", "g"), "axis", 1);
    node("Where", "where_mask", "mask,x,nx", "wm");
    node("LeakyRelu", "leaky", "x", "lr");
    push((void ***)&graph->initializer, &graph->n_initializer, init_f32("half", 1, (int64_t[]){3}, (const float[]){0.5f, 0.5f, 0.5f}));
    node("Max", "max3", "x,nx,half", "mx");
    push((void ***)&graph->initializer, &graph->n_initializer, init_i64("two", 1, (int64_t[]){2}));
    attr_int(node("Mod", "fmod", "x,two", "md"), "fmod", 1);
    attr_string(node("Gelu", "gelu", "x", "ge"), "approximate", "tanh");
    model_opset = 20;
    ts_graph *g = NULL;
    ts_status st = import_as("elementwise", &g);
    CHECK(st == TS_OK, "the model imports at opset 20%s%s", st ? ": " : "", st ? ts_last_error() : "");
    if (st) return check_summary("test_onnx_elementwise");

    ts_tensor *o[10];
    for (int k = 0; k < 10; k++) o[k] = ts_graph_output_at(g, (size_t)k);
    ts_model *m = NULL;
    ts_options *opt = ts_options_new();
    ts_options_set_output_mode(opt, TS_OUTPUT_FINAL, 0);
    CHECK_OK(ts_model_inference(&m, g, o, 10, opt), "an inference model of its outputs");
    float x[N] = {-2.5f, -1.5f, 0.0f, 0.5f, 2.0f, 3.0f}, y[N] = {INFINITY, -INFINITY, NAN, 1.0f, -INFINITY, 0.0f};
    int64_t ids[3] = {0, -1, 1};
    uint8_t mask[N] = {1, 0, 1, 0, 1, 0};
    ts_array in[4] = {ts_array_f32(x, 2, (int64_t[]){2, 3}), ts_array_f32(y, 2, (int64_t[]){2, 3}),
                      {.dtype = TS_I64, .ndim = 1, .shape = {3}, .data = ids}, {.dtype = TS_U8, .ndim = 2, .shape = {2, 3}, .data = mask}};
    const char *names[4] = {"x", "y", "ids", "mask"};
    st = m ? ts_model_run(m, names, in, 4) : TS_ERR_STATE;
    CHECK(st == TS_OK, "runs on int64 ids and a bool mask fed as uint8%s%s", st ? ": " : "", st ? ts_last_error() : "");
    if (!st) {
        float want[N];
        check_output(m, g, "pinf", (const float[N]){1, 0, 0, 0, 0, 0}); /* detect_negative=0: -inf does not count */
        check_output(m, g, "xi", (const float[N]){-2, -1, 0, 0, 2, 3});
        check_output(m, g, "xb", (const float[N]){1, 1, 0, 1, 1, 1});
        check_output(m, g, "w", (const float[N]){2.5f, 1.5f, 0, -0.5f, 2, 3});
        check_output(m, g, "g", (const float[N]){-2.5f, 0.0f, -1.5f, 0.5f, 3.0f, 2.0f}); /* x[:, [0, -1, 1]] */
        check_output(m, g, "wm", (const float[N]){-2.5f, 1.5f, 0, -0.5f, 2, -3});
        for (int i = 0; i < N; i++) want[i] = x[i] < 0 ? 0.01f * x[i] : x[i];
        check_output(m, g, "lr", want);
        for (int i = 0; i < N; i++) want[i] = fmaxf(fabsf(x[i]), 0.5f);
        check_output(m, g, "mx", want);
        check_output(m, g, "md", (const float[N]){-0.5f, -1.5f, 0, 0.5f, 0, 1});
        for (int i = 0; i < N; i++) {
            double v = x[i];
            want[i] = (float)(0.5 * v * (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v))));
        }
        check_output(m, g, "ge", want);
    }
    ts_model_free(m);
    ts_options_free(opt);
    ts_graph_free(g);

    /* The trigonometric and hyperbolic functions of a constant (Llama's
     * rotary embedding: Cos and Sin of positions x frequencies, folded at
     * import) times a graph input: folded in double, then f32. */
    {
        static const char *const trig[] = {"Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh"};
        double (*const fn[])(double) = {sin, cos, tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh};
        enum { NT = sizeof trig / sizeof *trig };
        const float cv[N] = {0.5f, -0.25f, 0.75f, 0.1f, -0.6f, 0.3f}, cv1[N] = {1.0f, 1.5f, 2.0f, 3.0f, 1.25f, 10.0f};
        model_begin();
        input("x", 2, (int64_t[]){2, 3});
        for (int k = 0; k < 2; k++) {
            Node *cn = node("Constant", k ? "const1" : "const", "", k ? "c1" : "c");
            Attr *at = attr(cn, "value");
            at->has_type = 1;
            at->type = TENSORSCOPE_ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
            at->t = tensor(k ? "c1" : "c", 1, 2, (int64_t[]){2, 3});
            at->t->has_raw_data = 1;
            at->t->raw_data.len = sizeof cv;
            at->t->raw_data.data = mem(sizeof cv);
            memcpy(at->t->raw_data.data, k ? cv1 : cv, sizeof cv); /* little-endian hosts only, as the importer */
        }
        char names_[NT][2][16];
        for (int k = 0; k < NT; k++) {
            snprintf(names_[k][0], 16, "f_%s", trig[k]);
            snprintf(names_[k][1], 16, "y_%s", trig[k]);
            node(trig[k], trig[k], strcmp(trig[k], "Acosh") ? "c" : "c1", names_[k][0]);
            char ins[40];
            snprintf(ins, sizeof ins, "x,%.15s", names_[k][0]);
            node("Mul", names_[k][1], ins, names_[k][1]);
            output(names_[k][1]);
        }
        g = NULL;
        st = import_as("trig_of_constants", &g);
        CHECK(st == TS_OK, "Sin, Cos, ..., Atanh of constants fold at import%s%s", st ? ": " : "", st ? ts_last_error() : "");
        ts_tensor *ot[NT];
        for (int k = 0; !st && k < NT; k++) ot[k] = ts_graph_output_at(g, (size_t)k);
        m = NULL;
        opt = ts_options_new();
        ts_options_set_output_mode(opt, TS_OUTPUT_FINAL, 0);
        if (!st) st = ts_model_inference(&m, g, ot, NT, opt);
        float xs[N] = {1.0f, -2.0f, 0.5f, 3.0f, -1.0f, 2.0f};
        ts_array xin = ts_array_f32(xs, 2, (int64_t[]){2, 3});
        const char *xname = "x";
        if (!st) st = ts_model_run(m, &xname, &xin, 1);
        CHECK(st == TS_OK, "x times each runs%s%s", st ? ": " : "", st ? ts_last_error() : "");
        for (int k = 0; !st && k < NT; k++) {
            float want[N];
            for (int i = 0; i < N; i++) want[i] = xs[i] * (float)fn[k](strcmp(trig[k], "Acosh") ? cv[i] : cv1[i]);
            check_output(m, g, names_[k][1], want);
        }
        ts_model_free(m);
        ts_options_free(opt);
        ts_graph_free(g);
    }
    /* A Gather by indices the graph computes (int64 ids + 1): they are
     * checked before the gather reads them, and one out of range is an
     * error that names the tensor, as onnxruntime's, never clamped into
     * the axis */
    {
        model_begin();
        input("x", 2, (int64_t[]){2, 3});
        input("ids", 1, (int64_t[]){3});
        set_elem(1, 7); /* int64 */
        output("g");
        init_i64("one", 1, (const int64_t[]){1});
        node("Add", "shift", "ids,one", "shifted");
        attr_int(node("Gather", "gather", "x,shifted", "g"), "axis", 1);
        g = NULL;
        st = import_as("computed_indices", &g);
        CHECK(st == TS_OK, "a Gather by computed indices imports%s%s", st ? ": " : "", st ? ts_last_error() : "");
        ts_tensor *og = st ? NULL : ts_graph_output_at(g, 0);
        m = NULL;
        opt = ts_options_new();
        ts_options_set_output_mode(opt, TS_OUTPUT_FINAL, 0);
        if (!st) st = ts_model_inference(&m, g, &og, 1, opt);
        float xs[N] = {-2.5f, -1.5f, 0.0f, 0.5f, 2.0f, 3.0f};
        int64_t iv[3] = {0, 1, -3}; /* shifted: 1, 2, -2 */
        ts_array gin[2] = {ts_array_f32(xs, 2, (int64_t[]){2, 3}), {.dtype = TS_I64, .ndim = 1, .shape = {3}, .data = iv}};
        const char *gnames[2] = {"x", "ids"};
        if (!st) st = ts_model_run(m, gnames, gin, 2);
        CHECK(st == TS_OK, "it runs with the computed indices in range%s%s", st ? ": " : "", st ? ts_last_error() : "");
        if (!st) check_output(m, g, "g", (const float[N]){-1.5f, 0.0f, -1.5f, 2.0f, 3.0f, 2.0f}); /* x[:, [1, 2, -2]] */
        iv[1] = 2; /* shifted: 3, past the axis */
        st = m ? ts_model_run(m, gnames, gin, 2) : TS_ERR_STATE;
        CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "[1] = 3 (made of 'shifted')") && strstr(ts_last_error(), "[-3, 3)"),
              "a computed index past the axis is an error naming it, not clamped: %s", ts_last_error());
        ts_model_free(m);
        ts_options_free(opt);
        ts_graph_free(g);
    }
    /* Integer arithmetic between graph tensors, exactly in int64 (not in
     * f32, where 2^32 - 2 would be 2^32): ids + ids, and position ids
     * from a mask, CumSum - 1; labels the graph computed (ids - 0) reach
     * a SoftmaxCrossEntropyLoss as labels */
    {
        model_begin();
        input_typed("ids", 7, 1, (int64_t[]){4});
        input_typed("mask", 7, 1, (int64_t[]){4});
        input("scores", 2, (int64_t[]){4, 3});
        input_typed("labels", 7, 1, (int64_t[]){4});
        output_typed("sum", 7, 1, (int64_t[]){4});
        output_typed("pos", 7, 1, (int64_t[]){4});
        output("loss");
        init_i64("one", 1, (const int64_t[]){1});
        init_i64("zero", 1, (const int64_t[]){0});
        init_i64("axis0", 1, (const int64_t[]){0});
        node("Add", "twice", "ids,ids", "sum");
        node("CumSum", "count", "mask,axis0", "counted");
        node("Sub", "from0", "counted,one", "pos");
        node("Sub", "computed_labels", "labels,zero", "labels2");
        attr_int(node("SoftmaxCrossEntropyLoss", "ce", "scores,labels2", "loss"), "ignore_index", -100);
        g = NULL;
        st = import_as("int64_arithmetic", &g);
        CHECK(st == TS_OK, "integer arithmetic, CumSum and a loss of computed labels import%s%s", st ? ": " : "", st ? ts_last_error() : "");
        ts_tensor *oo[3];
        for (int k = 0; !st && k < 3; k++) oo[k] = ts_graph_output_at(g, (size_t)k);
        m = NULL;
        opt = ts_options_new();
        ts_options_set_output_mode(opt, TS_OUTPUT_FINAL, 0);
        if (!st) st = ts_model_inference(&m, g, oo, 3, opt);
        int64_t idv[4] = {2147483647, -2147483647 - 1, 16777217, 5}, mv[4] = {1, 1, 0, 1}, lv[4] = {2, -100, 0, 1};
        float sv[12] = {0.5f, -1.0f, 2.0f, 0.0f, 0.0f, 0.0f, 1.0f, 2.0f, 3.0f, -2.0f, 0.25f, 1.0f};
        ts_array ain[4] = {{.dtype = TS_I64, .ndim = 1, .shape = {4}, .data = idv}, {.dtype = TS_I64, .ndim = 1, .shape = {4}, .data = mv},
                           ts_array_f32(sv, 2, (int64_t[]){4, 3}), {.dtype = TS_I64, .ndim = 1, .shape = {4}, .data = lv}};
        const char *anames[4] = {"ids", "mask", "scores", "labels"};
        if (!st) st = ts_model_run(m, anames, ain, 4);
        CHECK(st == TS_OK, "it runs (the ignored label -100 among the computed ones)%s%s", st ? ": " : "", st ? ts_last_error() : "");
        ts_array sa = {0}, pa = {0}, la = {0};
        if (!st) st = ts_model_anchored(m, ts_tensor_name(oo[0]), &sa);
        if (!st) st = ts_model_anchored(m, ts_tensor_name(oo[1]), &pa);
        if (!st) st = ts_model_anchored(m, ts_tensor_name(oo[2]), &la);
        int wrong = st ? -1 : 0;
        for (int i = 0; !st && i < 4; i++) {
            int64_t cum = 0;
            for (int j = 0; j <= i; j++) cum += mv[j];
            wrong += sa.dtype != TS_I64 || ((const int64_t *)sa.data)[i] != 2 * idv[i] || pa.dtype != TS_I64 ||
                     ((const int64_t *)pa.data)[i] != cum - 1;
        }
        CHECK(wrong == 0, "ids + ids is 2^32 - 2 exactly and the position ids count the mask, as int64 outputs");
        double want = 0;
        for (int i = 0; i < 4; i++) {
            if (lv[i] == -100) continue;
            double mx = fmax(fmax(sv[3 * i], sv[3 * i + 1]), sv[3 * i + 2]), z = 0;
            for (int c = 0; c < 3; c++) z += exp(sv[3 * i + c] - mx);
            want += mx + log(z) - sv[3 * i + lv[i]];
        }
        want /= 3; /* the mean over the labels not ignored */
        CHECK(!st && la.dtype == TS_F32 && fabs(((const float *)la.data)[0] - want) < 1e-5 * fabs(want),
              "the loss of the computed labels leaves the ignored one out (%.6f, want %.6f)", st ? 0.0 : (double)((const float *)la.data)[0], want);
        lv[3] = 3;
        st = m ? ts_model_run(m, anames, ain, 4) : TS_ERR_STATE;
        CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "[3] = 3") && strstr(ts_last_error(), "class index"),
              "a computed label out of range is an error naming it: %s", ts_last_error());
        ts_model_free(m);
        ts_options_free(opt);
        ts_graph_free(g);
    }
    /* int64 all the way: an int64 input is an i64 graph tensor (int32 stays
     * i32), and comparisons, Where, Cast, Expand and OneHot of it and of
     * int64 initializers beyond 2^53 compute in integers, where double
     * would take 2^53 + 1 for 2^53 */
    {
        const int64_t B = (int64_t)1 << 53;
        model_begin();
        input_typed("x", 7, 1, (int64_t[]){4});
        input_typed("i", 6, 1, (int64_t[]){4});
        static const char *const outs64[] = {"lt", "w", "x32", "ex", "oh", "sum"};
        static const int types64[] = {9, 7, 6, 7, 7, 7};
        static const int nd64[] = {1, 1, 1, 2, 2, 1};
        for (int k = 0; k < 6; k++) output_typed(outs64[k], types64[k], nd64[k], k == 3 ? (int64_t[]){2, 4} : k == 4 ? (int64_t[]){4, 3} : (int64_t[]){4});
        init_i64("c", 1, (const int64_t[]){B + 1});
        init_i64("v", 2, (const int64_t[]){-(B + 3), B + 5});
        init_i64("shape", 2, (const int64_t[]){2, 4});
        init_i64("depth", 1, (const int64_t[]){3});
        node("Less", "less", "x,c", "lt");
        node("Where", "where", "lt,x,c", "w");
        attr_int(node("Cast", "narrow", "x", "x32"), "to", 6);
        node("Expand", "expand", "x,shape", "ex");
        node("OneHot", "onehot", "i,depth,v", "oh");
        attr_int(node("Cast", "widen", "i", "i64"), "to", 7);
        node("Add", "add", "i64,c", "sum");
        g = NULL;
        st = import_as("int64_ops", &g);
        CHECK(st == TS_OK, "comparisons, Where, Cast, Expand and OneHot of int64 tensors import%s%s", st ? ": " : "", st ? ts_last_error() : "");
        ts_array info = {0};
        if (!st) ts_tensor_info(ts_graph_find(g, "x"), &info);
        CHECK(!st && info.dtype == TS_I64, "the int64 input is an i64 graph tensor (%s)", ts_dtype_name(info.dtype));
        if (!st) ts_tensor_info(ts_graph_find(g, "i"), &info);
        CHECK(!st && info.dtype == TS_I32, "the int32 input is an i32 graph tensor (%s)", ts_dtype_name(info.dtype));
        ts_tensor *oo[6];
        for (int k = 0; !st && k < 6; k++) oo[k] = ts_graph_output_at(g, (size_t)k);
        m = NULL;
        opt = ts_options_new();
        ts_options_set_output_mode(opt, TS_OUTPUT_FINAL, 0);
        if (!st) st = ts_model_inference(&m, g, oo, 6, opt);
        int64_t xv[4] = {B, B + 1, B + 2, -(B + 1)};
        int32_t iv[4] = {0, 2, -1, 7}; /* -1: the last class; 7: none */
        ts_array xin[2] = {{.dtype = TS_I64, .ndim = 1, .shape = {4}, .data = xv}, {.dtype = TS_I32, .ndim = 1, .shape = {4}, .data = iv}};
        const char *xnames[2] = {"x", "i"};
        if (!st) st = ts_model_run(m, xnames, xin, 2);
        CHECK(st == TS_OK, "it runs on int64 values beyond 2^53%s%s", st ? ": " : "", st ? ts_last_error() : "");
        ts_array a[6] = {{0}};
        for (int k = 0; !st && k < 6; k++) st = ts_model_anchored(m, ts_tensor_name(oo[k]), &a[k]);
        int bad = st ? -1 : 0;
        for (int i = 0; !st && i < 4; i++) {
            bool lt = xv[i] < B + 1;
            bad += ((const uint8_t *)a[0].data)[i] != lt;
            bad += ((const int64_t *)a[1].data)[i] != (lt ? xv[i] : B + 1);
            bad += ((const int32_t *)a[2].data)[i] != (int32_t)(uint32_t)(uint64_t)xv[i]; /* wrapped, as onnxruntime's */
            bad += ((const int64_t *)a[3].data)[i] != xv[i] || ((const int64_t *)a[3].data)[4 + i] != xv[i];
            for (int c = 0; c < 3; c++)
                bad += ((const int64_t *)a[4].data)[3 * i + c] != ((iv[i] + 3) % 3 == c && iv[i] < 3 ? B + 5 : -(B + 3));
            bad += ((const int64_t *)a[5].data)[i] != iv[i] + B + 1;
        }
        CHECK(bad == 0 && a[0].dtype == TS_BOOL && a[1].dtype == TS_I64 && a[2].dtype == TS_I32 && a[4].dtype == TS_I64,
              "x < 2^53+1, Where, Cast to int32, Expand, OneHot of int64 values and int32 + 2^53+1 are exact (%d wrong)", bad);
        ts_model_free(m);
        ts_options_free(opt);
        ts_graph_free(g);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("could not remove %s\n", dir);
    return check_summary("test_onnx_elementwise");
}
