/* test_onnx_opsets.c -- the ONNX importer across the default domain's
 * opsets 1 to 28 (the newest onnx 1.23.2 defines): each node is read by
 * the version of its op that the model's opset selects, as the spec says.
 * Models are written here (tests/support/onnx_model.h), one per case:
 *
 * - the range: opset 0 and 29 are refused naming 1 to 28; 28 imports;
 * - below opset 13, an op whose version there reads as today's (Relu 6,
 *   And 7, Not 1) imports and runs; an older one (Relu 1, Split 2 with
 *   its 'split' attribute, Dropout 7) is refused naming the opset it
 *   needs; Unsqueeze's axes attribute at 12 and Dropout 10's ratio
 *   attribute (the identity at inference) are read; Softmax and LogSoftmax
 *   before 13 normalize the input coerced to 2-D at axis (default 1): run
 *   where that is the last axis, refused where dims after it are not 1;
 * - Split 18's num_outputs (ceil-sized parts, the last smaller), checked
 *   by running it; num_outputs with the sizes input, a wrong count, and
 *   num_outputs before 18 are refused; so is the 'split' attribute at 13
 *   (opset 2's form, which the importer used to read);
 * - ReduceMean 18's axes input, noop_with_empty_axes and the default of
 *   every axis, checked by running them; the axes attribute at 18 and the
 *   axes input at 17 are refused;
 * - Pad 18's axes input (zero pads: the identity; a pad of the axis it
 *   names, run), pads that do not match the axes, mode wrap before 19
 *   (refused) and at 19 (imported), Pad 2's pads attribute (refused);
 * - Squeeze/Unsqueeze 21 with their axes input, the axes attribute at 13
 *   refused;
 * - a model naming no opset of the default domain is refused;
 * - ops and attributes newer than the model's opset (LayerNormalization at
 *   16, Shape's start at 13, Reshape's allowzero at 13, Cast's saturate at
 *   17) are refused;
 * - LayerNormalization without its optional bias runs (zeros), its
 *   stash_type other than float is refused;
 * - Cast to string is refused naming the type;
 *   Range 27's stash_type for a float16 range other than float is refused. */
/* needs: onnx */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "onnx_model.h"


/* Imports the model at `opset` as NAME, runs it on x ([rows, cols], values
 * 0, 1, 2, ...) and compares output k (of n) with want[k] (numel values,
 * shape[ndim]); prints one check per output. */
typedef struct expected {
    int ndim;
    int64_t shape[4];
    const float *v;
} expected;

static void run_and_check(const char *what, int64_t opset, int64_t rows, int64_t cols, int n, const expected *want) {
    model_opset = opset;
    ts_graph *g = NULL;
    ts_status st = import_as(what, &g);
    model_opset = 17;
    CHECK(st == TS_OK, "%s at opset %lld imports%s%s", what, (long long)opset, st ? ": " : "", st ? ts_last_error() : "");
    if (st) return;
    ts_tensor *outs[8];
    for (int k = 0; k < n; k++) outs[k] = ts_graph_output_at(g, k);
    ts_model *m = NULL;
    ts_options *o = ts_options_new();
    ts_options_set_output_mode(o, TS_OUTPUT_FINAL, 0);
    CHECK_OK(ts_model_inference(&m, g, outs, n, o), "%s: an inference model", what);
    float x[64];
    for (int i = 0; i < rows * cols; i++) x[i] = (float)i;
    ts_array in = ts_array_f32(x, 2, (int64_t[]){rows, cols});
    const char *names[1] = {"x"};
    CHECK_OK(m ? ts_model_run(m, names, &in, 1) : TS_ERR_STATE, "%s: runs", what);
    for (int k = 0; k < n && m; k++) {
        ts_array a = {0};
        st = ts_model_anchored(m, ts_tensor_name(outs[k]), &a);
        int64_t numel = 1;
        for (int d = 0; d < want[k].ndim; d++) numel *= want[k].shape[d];
        bool same = st == TS_OK && a.ndim == want[k].ndim && ts_array_numel(&a) == numel;
        for (int d = 0; same && d < a.ndim; d++) same = a.shape[d] == want[k].shape[d];
        for (int64_t i = 0; same && i < numel; i++) same = fabsf(((const float *)a.data)[i] - want[k].v[i]) <= 1e-5f;
        char got[64] = "?";
        if (st == TS_OK) {
            size_t u = 0;
            for (int d = 0; d < a.ndim && u < sizeof got; d++) u += (size_t)snprintf(got + u, sizeof got - u, "%s%lld", d ? "x" : "", (long long)a.shape[d]);
        }
        CHECK(same, "%s: output %d has ONNX's shape and values (got shape %s)", what, k, got);
    }
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
}

/* A model of the input x [rows, cols] and the outputs `outs`. */
static void begin(int64_t rows, int64_t cols, const char *outs) {
    model_begin();
    input("x", 2, (int64_t[]){rows, cols});
    char list[64];
    snprintf(list, sizeof list, "%s", outs);
    for (char *p = strtok(list, ","); p; p = strtok(NULL, ",")) output(p);
}

/* x [rows, cols] -> outs by one node of op (its extra inputs after x). */
static Node *one_node(const char *op, int64_t rows, int64_t cols, const char *ins, const char *outs) {
    begin(rows, cols, outs);
    return node(op, "n", ins, outs);
}

static void expect_at(const char *what, int64_t opset, ts_status want, const char *needle) {
    model_opset = opset;
    expect(what, import_as(what, NULL), want, needle);
    model_opset = 17;
}

static void check_range(void) {
    printf("-- the opset range\n");
    one_node("Relu", 2, 3, "x", "y");
    expect_at("opset 0", 0, TS_ERR_UNSUPPORTED, "opsets 1 to 28");
    one_node("Relu", 2, 3, "x", "y");
    expect_at("opset 29", 29, TS_ERR_UNSUPPORTED, "uses opset 29 of the default ONNX domain; tensorscope imports opsets 1 to 28");
    one_node("Relu", 2, 3, "x", "y");
    expect_at("no opset of the default domain", -1, TS_ERR_FORMAT, "names no opset of the default ONNX domain");
    one_node("Relu", 2, 3, "x", "y");
    run_and_check("relu_op28", 28, 2, 3, 1, (expected[]){{2, {2, 3}, (const float[]){0, 1, 2, 3, 4, 5}}});
}

/* Below opset 13: each op's version there, read as its spec says or
 * refused. */
static void check_old_opsets(void) {
    printf("-- opsets before 13\n");
    const float x6[6] = {0, 1, 2, 3, 4, 5};
    one_node("Relu", 2, 3, "x", "y");
    run_and_check("relu_op6", 6, 2, 3, 1, (expected[]){{2, {2, 3}, x6}});
    one_node("Relu", 2, 3, "x", "y");
    expect_at("Relu at opset 5 (version 1, with consumed_inputs)", 5, TS_ERR_UNSUPPORTED,
              "opset 5 has an older version of Relu than tensorscope reads (that of opset 6 and later)");
    /* And 7 (numpy broadcasting) of x > 2 and x < 5; Not 1 of it */
    begin(2, 3, "y,z");
    init_f32("two", 0, NULL, (const float[]){2});
    init_f32("five", 0, NULL, (const float[]){5});
    node("Greater", "gt", "x,two", "a");
    node("Less", "lt", "x,five", "b");
    node("And", "and", "a,b", "c");
    node("Cast", "cy", "c", "y");
    attr_int(graph->node[3], "to", 1);
    node("Not", "not", "c", "d");
    node("Cast", "cz", "d", "z");
    attr_int(graph->node[5], "to", 1);
    run_and_check("and_not_op7", 7, 2, 3, 2,
                  (expected[]){{2, {2, 3}, (const float[]){0, 0, 0, 1, 1, 0}}, {2, {2, 3}, (const float[]){1, 1, 1, 0, 0, 1}}});
    /* Split 2..12 takes its sizes as the attribute 'split': not read, refused */
    attr_int(one_node("Split", 2, 4, "x", "a,b"), "axis", 1);
    attr_ints(graph->node[0], "split", 2, (int64_t[]){1, 3});
    expect_at("Split at opset 12", 12, TS_ERR_UNSUPPORTED, "opset 12 has an older version of Split than tensorscope reads (that of opset 13");
    /* Unsqueeze 1..12: the axes attribute */
    attr_ints(one_node("Unsqueeze", 2, 3, "x", "y"), "axes", 2, (int64_t[]){0, -1});
    run_and_check("unsqueeze_axes_attribute_op12", 12, 2, 3, 1, (expected[]){{4, {1, 2, 3, 1}, x6}});
    /* Dropout 10: the ratio attribute, the identity at inference; 7 refused */
    attr_float(one_node("Dropout", 2, 3, "x", "y"), "ratio", 0.25f);
    run_and_check("dropout_ratio_attribute_op10", 10, 2, 3, 1, (expected[]){{2, {2, 3}, x6}});
    one_node("Dropout", 2, 3, "x", "y");
    expect_at("Dropout at opset 9 (version 7)", 9, TS_ERR_UNSUPPORTED, "older version of Dropout than tensorscope reads (that of opset 10");
    /* Softmax 11 of [2,3,1] at its default axis 1 (not -1, which would
     * give ones): over each row's 3 values */
    float sm[6], lsm[6], z = 1.0f + expf(1.0f) + expf(2.0f);
    for (int i = 0; i < 6; i++) sm[i] = expf((float)(i % 3)) / z, lsm[i] = (float)(i % 3) - logf(z);
    attr_ints(one_node("Unsqueeze", 2, 3, "x", "u"), "axes", 1, (int64_t[]){2});
    node("Softmax", "sm", "u", "y");
    graph->n_output = 0;
    output("y");
    run_and_check("softmax_default_axis_op11", 11, 2, 3, 1, (expected[]){{3, {2, 3, 1}, sm}});
    one_node("LogSoftmax", 2, 3, "x", "y");
    run_and_check("logsoftmax_default_axis_op11", 11, 2, 3, 1, (expected[]){{2, {2, 3}, lsm}});
    /* at axis 0 the coerced input is [1,6]: one softmax over all six, not
     * one per column as from 13 on: refused */
    attr_int(one_node("Softmax", 2, 3, "x", "y"), "axis", 0);
    expect_at("Softmax at axis 0 at opset 11", 11, TS_ERR_UNSUPPORTED, "before opset 13, Softmax normalizes over every dim from axis 0 on");
}

static void check_split(void) {
    printf("-- Split\n");
    /* [2,7] in 3 parts along axis 1: 3, 3, 1 */
    attr_int(one_node("Split", 2, 7, "x", "a,b,c"), "axis", 1);
    attr_int(graph->node[0], "num_outputs", 3);
    run_and_check("split_num_outputs", 18, 2, 7, 3,
                  (expected[]){{2, {2, 3}, (const float[]){0, 1, 2, 7, 8, 9}},
                               {2, {2, 3}, (const float[]){3, 4, 5, 10, 11, 12}},
                               {2, {2, 1}, (const float[]){6, 13}}});
    /* equal parts without num_outputs or sizes, at 18 as at 13 */
    one_node("Split", 4, 2, "x", "a,b");
    run_and_check("split_equal", 18, 4, 2, 2,
                  (expected[]){{2, {2, 2}, (const float[]){0, 1, 2, 3}}, {2, {2, 2}, (const float[]){4, 5, 6, 7}}});
    one_node("Split", 2, 7, "x,sizes", "a,b");
    init_i64("sizes", 2, (int64_t[]){1, 1});
    attr_int(graph->node[0], "num_outputs", 2);
    expect_at("split sizes and num_outputs", 18, TS_ERR_FORMAT, "both the 'split' input and the 'num_outputs' attribute");
    attr_int(one_node("Split", 2, 7, "x", "a,b"), "num_outputs", 3);
    expect_at("num_outputs 3 for 2 outputs", 18, TS_ERR_FORMAT, "num_outputs is 3 for 2 outputs");
    attr_int(one_node("Split", 2, 7, "x", "a,b"), "num_outputs", 2);
    expect_at("num_outputs at opset 17", 17, TS_ERR_FORMAT, "attribute 'num_outputs' is part of Split from opset 18 on");
    attr_int(one_node("Split", 7, 2, "x", "a,b"), "num_outputs", 2); /* axis 0 of 7 */
    run_and_check("split_uneven", 18, 7, 2, 2,
                  (expected[]){{2, {4, 2}, (const float[]){0, 1, 2, 3, 4, 5, 6, 7}}, {2, {3, 2}, (const float[]){8, 9, 10, 11, 12, 13}}});
    attr_ints(one_node("Split", 6, 2, "x", "a,b"), "split", 2, (int64_t[]){1, 5});
    expect_at("the 'split' attribute at opset 13", 13, TS_ERR_FORMAT, "attribute 'split' is part of Split up to opset 12 only");
}

static void check_reduce_mean(void) {
    printf("-- ReduceMean\n");
    attr_int(one_node("ReduceMean", 2, 3, "x,axes", "y"), "keepdims", 0);
    init_i64("axes", 1, (int64_t[]){-1});
    run_and_check("reduce_axes_input", 18, 2, 3, 1, (expected[]){{1, {2}, (const float[]){1, 4}}});
    one_node("ReduceMean", 2, 3, "x", "y");
    run_and_check("reduce_all", 18, 2, 3, 1, (expected[]){{2, {1, 1}, (const float[]){2.5f}}});
    one_node("ReduceMean", 2, 3, "x,axes", "y");
    init_i64("axes", 0, (int64_t[]){0});
    run_and_check("reduce_empty_axes", 18, 2, 3, 1, (expected[]){{2, {1, 1}, (const float[]){2.5f}}});
    attr_int(one_node("ReduceMean", 2, 3, "x", "y"), "noop_with_empty_axes", 1);
    run_and_check("reduce_noop", 18, 2, 3, 1, (expected[]){{2, {2, 3}, (const float[]){0, 1, 2, 3, 4, 5}}});
    attr_ints(one_node("ReduceMean", 2, 3, "x", "y"), "axes", 1, (int64_t[]){1});
    run_and_check("reduce_axes_attribute", 17, 2, 3, 1, (expected[]){{2, {2, 1}, (const float[]){1, 4}}});
    attr_ints(one_node("ReduceMean", 2, 3, "x", "y"), "axes", 1, (int64_t[]){1});
    expect_at("ReduceMean's axes attribute at opset 18", 18, TS_ERR_FORMAT, "from opset 18 on, the axes are input 1");
    one_node("ReduceMean", 2, 3, "x,axes", "y");
    init_i64("axes", 1, (int64_t[]){1});
    expect_at("ReduceMean's axes input at opset 17", 17, TS_ERR_FORMAT, "takes its axes as the attribute 'axes' before opset 18");
    attr_int(one_node("ReduceMean", 2, 3, "x", "y"), "noop_with_empty_axes", 1);
    expect_at("noop_with_empty_axes at opset 17", 17, TS_ERR_FORMAT, "'noop_with_empty_axes' is part of ReduceMean from opset 18 on");
}

static void check_pad(void) {
    printf("-- Pad\n");
    one_node("Pad", 2, 3, "x,pads,,axes", "y");
    init_i64("pads", 2, (int64_t[]){0, 0});
    init_i64("axes", 1, (int64_t[]){-1});
    run_and_check("pad_axes_zero", 18, 2, 3, 1, (expected[]){{2, {2, 3}, (const float[]){0, 1, 2, 3, 4, 5}}});
    one_node("Pad", 2, 3, "x,pads,,axes", "y");
    init_i64("pads", 4, (int64_t[]){0, 0, 0, 0});
    init_i64("axes", 1, (int64_t[]){1});
    expect_at("4 pads for 1 axis", 18, TS_ERR_FORMAT, "Pad takes 2 per padded axis (2)");
    one_node("Pad", 2, 3, "x,pads,,axes", "y");
    init_i64("pads", 2, (int64_t[]){0, 0});
    init_i64("axes", 1, (int64_t[]){1});
    expect_at("Pad's axes input at opset 17", 17, TS_ERR_FORMAT, "input 3 (axes) is part of Pad from opset 18 on");
    attr_string(one_node("Pad", 2, 3, "x,pads", "y"), "mode", "wrap");
    init_i64("pads", 4, (int64_t[]){0, 0, 0, 0});
    expect_at("mode wrap at opset 18", 18, TS_ERR_FORMAT, "mode 'wrap' is not one of Pad's at this opset");
    attr_string(one_node("Pad", 2, 3, "x,pads", "y"), "mode", "wrap");
    init_i64("pads", 4, (int64_t[]){0, 0, 0, 0});
    run_and_check("pad_wrap_zero", 19, 2, 3, 1, (expected[]){{2, {2, 3}, (const float[]){0, 1, 2, 3, 4, 5}}});
    one_node("Pad", 2, 3, "x,pads,,axes", "y");
    init_i64("pads", 2, (int64_t[]){1, 0});
    init_i64("axes", 1, (int64_t[]){0});
    run_and_check("pad_axis_0_before", 21, 2, 3, 1, (expected[]){{2, {3, 3}, (const float[]){0, 0, 0, 0, 1, 2, 3, 4, 5}}});
    /* Pad 2..10 takes its pads as an attribute: an older version, refused */
    attr_ints(one_node("Pad", 2, 3, "x", "y"), "pads", 4, (int64_t[]){0, 1, 0, 1});
    expect_at("Pad's pads attribute at opset 10", 10, TS_ERR_UNSUPPORTED, "older version of Pad than tensorscope reads (that of opset 11");
}

static void check_squeeze(void) {
    printf("-- Squeeze and Unsqueeze\n");
    one_node("Unsqueeze", 2, 3, "x,axes", "y");
    init_i64("axes", 2, (int64_t[]){0, -1});
    run_and_check("unsqueeze_op21", 21, 2, 3, 1, (expected[]){{4, {1, 2, 3, 1}, (const float[]){0, 1, 2, 3, 4, 5}}});
    one_node("Squeeze", 1, 3, "x,axes", "y");
    init_i64("axes", 1, (int64_t[]){0});
    run_and_check("squeeze_op24", 24, 1, 3, 1, (expected[]){{1, {3}, (const float[]){0, 1, 2}}});
    attr_ints(one_node("Unsqueeze", 2, 3, "x", "y"), "axes", 1, (int64_t[]){0});
    expect_at("Unsqueeze's axes attribute at opset 13", 13, TS_ERR_FORMAT, "attribute 'axes' is part of Unsqueeze up to opset 12 only");
}

static void check_new_attributes(void) {
    printf("-- ops and attributes newer than the model's opset\n");
    one_node("LayerNormalization", 2, 3, "x,scale", "y");
    init_f32("scale", 1, (int64_t[]){3}, (const float[]){1, 1, 1});
    expect_at("LayerNormalization at opset 16", 16, TS_ERR_FORMAT, "LayerNormalization is part of the default ONNX domain from opset 17 on");
    begin(2, 3, "y");
    attr_int(node("Shape", "shape", "x", "s"), "start", 1);
    node("Reshape", "r", "x,s", "y");
    expect_at("Shape's start at opset 13", 13, TS_ERR_FORMAT, "attribute 'start' is part of Shape from opset 15 on");
    /* at 15: x [2,3] reshaped to Shape(x)[-1:] + [-1] = [3, -1], so [3,2] */
    begin(2, 3, "y");
    attr_int(node("Shape", "shape", "x", "s"), "start", -1);
    attr_int(node("Concat", "c", "s,minus1", "t"), "axis", 0);
    init_i64("minus1", 1, (int64_t[]){-1});
    node("Reshape", "r", "x,t", "y");
    run_and_check("shape_start", 15, 2, 3, 1, (expected[]){{2, {3, 2}, (const float[]){0, 1, 2, 3, 4, 5}}});
    attr_int(one_node("Reshape", 2, 3, "x,shape", "y"), "allowzero", 0);
    init_i64("shape", 1, (int64_t[]){6});
    expect_at("Reshape's allowzero at opset 13", 13, TS_ERR_FORMAT, "attribute 'allowzero' is part of Reshape from opset 14 on");
    begin(2, 3, "y");
    Node *cast = node("Cast", "cast", "k", "c");
    attr_int(cast, "to", 1);
    attr_int(cast, "saturate", 1);
    node("Add", "add", "x,c", "y");
    init_i64("k", 1, (int64_t[]){1});
    expect_at("Cast's saturate at opset 17", 17, TS_ERR_FORMAT, "attribute 'saturate' is part of Cast from opset 19 on");
}

static void check_layer_norm(void) {
    printf("-- LayerNormalization\n");
    /* B is optional: x [2,3] = [[0,1,2],[3,4,5]] normalised per row, times 2 */
    one_node("LayerNormalization", 2, 3, "x,scale", "y");
    init_f32("scale", 1, (int64_t[]){3}, (const float[]){2, 2, 2});
    run_and_check("layer_norm_without_bias", 17, 2, 3, 1,
                  (expected[]){{2, {2, 3}, (const float[]){-2.4494712f, 0, 2.4494712f, -2.4494712f, 0, 2.4494712f}}});
    one_node("LayerNormalization", 2, 3, "x,scale,", "y");
    init_f32("scale", 1, (int64_t[]){3}, (const float[]){2, 2, 2});
    run_and_check("layer_norm_bias_omitted", 25, 2, 3, 1,
                  (expected[]){{2, {2, 3}, (const float[]){-2.4494712f, 0, 2.4494712f, -2.4494712f, 0, 2.4494712f}}});
    attr_int(one_node("LayerNormalization", 2, 3, "x,scale", "y"), "stash_type", 11);
    init_f32("scale", 1, (int64_t[]){3}, (const float[]){1, 1, 1});
    expect_at("LayerNormalization's stash_type 11 (double)", 17, TS_ERR_UNSUPPORTED, "stash_type 11 (statistics computed in double)");
}

/* a float16 scalar initializer */
static void init_f16(const char *name, uint16_t bits) {
    Tensor *t = tensor(name, 10, 0, NULL);
    t->int32_data = mem(sizeof *t->int32_data);
    t->int32_data[0] = bits;
    t->n_int32_data = 1;
    push((void ***)&graph->initializer, &graph->n_initializer, t);
}

static void check_types(void) {
    printf("-- Cast's and Range's newer types and attributes\n");
    static const struct {
        int to;
        const char *name;
    } casts[] = {{8, "string"}}; /* float8, int4, float4: test_onnx_lowbits */
    for (size_t i = 0; i < sizeof casts / sizeof *casts; i++) {
        begin(2, 3, "y");
        attr_int(node("Cast", "cast", "k", "c"), "to", casts[i].to);
        node("Add", "add", "x,c", "y");
        init_i64("k", 1, (int64_t[]){1});
        char what[64], needle[96];
        snprintf(what, sizeof what, "Cast to %s at opset 21", casts[i].name);
        snprintf(needle, sizeof needle, "Cast to %s (ONNX data type %d) is not available", casts[i].name, casts[i].to);
        expect_at(what, 21, TS_ERR_UNSUPPORTED, needle);
    }
    /* x + Range(0, 3, 1) over float16: summed in float (stash_type 1) it
     * folds; stash_type 10 (float16 itself) is refused */
    for (int stash = 1; stash <= 10; stash += 9) {
        begin(2, 3, "y");
        attr_int(node("Range", "range", "start,limit,delta", "r"), "stash_type", stash);
        node("Add", "add", "x,r", "y");
        init_f16("start", 0x0000);
        init_f16("limit", 0x4200); /* 3 */
        init_f16("delta", 0x3c00); /* 1 */
        if (stash == 1) run_and_check("range_f16_stash_float", 27, 2, 3, 1, (expected[]){{2, {2, 3}, (const float[]){0, 2, 4, 3, 5, 7}}});
        else expect_at("Range of float16 with stash_type 10", 27, TS_ERR_UNSUPPORTED, "stash_type 10 (a float16 range summed in float16)");
    }
}

int main(void) {
    ts_set_log_level(TS_LOG_OFF);
    snprintf(dir, sizeof dir, "/tmp/ts_onnx_opsets_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    check_range();
    check_old_opsets();
    check_split();
    check_reduce_mean();
    check_pad();
    check_squeeze();
    check_new_attributes();
    check_layer_norm();
    check_types();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("could not remove %s\n", dir);
    return check_summary("test_onnx_opsets");
}
