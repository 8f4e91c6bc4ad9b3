/* test_onnx_indices.c -- indices an imported graph makes and reads, as
 * ONNX defines them: ArgMax, ArgMin and TopK's indices are exact int64
 * graph tensors that a Gather, integer arithmetic and the outputs read as
 * they are; GatherND by indices the graph is fed or computes (negative
 * ones counted from their dim, batch_dims) gathers what ONNX says, and an
 * index out of its dim is an error at the run naming the tensor and the
 * value, never clamped into the data; constant indices out of range
 * (Gather, GatherElements, GatherND, ScatterElements, ScatterND) are
 * refused at import naming the node, the tensor and the value; a linear
 * TensorScatter's write index past the cache is an error at the run
 * naming write_indices and the value, as ONNX requires it to fit. */
/* needs: onnx */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "onnx_model.h"

/* The inference model of g's outputs (every one anchored as computed). */
static ts_model *infer(ts_graph *g, ts_options **opt) {
    size_t n = 0;
    while (ts_graph_output_at(g, n)) n++;
    ts_tensor *outs[8];
    for (size_t i = 0; i < n && i < 8; i++) outs[i] = ts_graph_output_at(g, i);
    *opt = ts_options_new();
    ts_options_set_output_mode(*opt, TS_OUTPUT_FINAL, 0);
    ts_model *m = NULL;
    ts_status st = ts_model_inference(&m, g, outs, (int)n, *opt);
    CHECK(st == TS_OK, "the inference model builds%s%s", st ? ": " : "", st ? ts_last_error() : "");
    return st ? NULL : m;
}

/* Output `name` of the run is of dtype dt (TS_I64 or TS_F32) and holds
 * want[0..n) exactly: int64 values as ONNX defines them, or the floats
 * gathered. */
static void check_values(ts_model *m, ts_graph *g, const char *name, ts_dtype dt, const void *want, int64_t n) {
    ts_tensor *t = ts_graph_find(g, name);
    ts_array a = {0};
    ts_status st = t ? ts_model_anchored(m, ts_tensor_name(t), &a) : TS_ERR_NOT_FOUND;
    bool i64 = dt == TS_I64;
    int64_t bad = st || a.dtype != dt || ts_array_numel(&a) != n ? 0 : -1;
    for (int64_t i = 0; bad < 0 && i < n; i++)
        if (i64 ? ((const int64_t *)a.data)[i] != ((const int64_t *)want)[i] : ((const float *)a.data)[i] != ((const float *)want)[i]) bad = i;
    CHECK(bad < 0, "%s: %s%s%s", name, i64 ? "int64 values as ONNX defines them" : "the values gathered", st ? ": " : "", st ? ts_last_error() : "");
    if (bad >= 0 && !st && a.dtype == dt && bad < ts_array_numel(&a)) {
        if (i64) printf("     [%lld] got %lld, want %lld\n", (long long)bad, (long long)((const int64_t *)a.data)[bad], (long long)((const int64_t *)want)[bad]);
        else printf("     [%lld] got %g, want %g\n", (long long)bad, (double)((const float *)a.data)[bad], (double)((const float *)want)[bad]);
    }
}
static void check_i64(ts_model *m, ts_graph *g, const char *name, const int64_t *want, int64_t n) { check_values(m, g, name, TS_I64, want, n); }
static void check_f32(ts_model *m, ts_graph *g, const char *name, const float *want, int64_t n) { check_values(m, g, name, TS_F32, want, n); }

/* The graph tensor the file names `name` is `dtype`. */
static void check_dtype(ts_graph *g, const char *name, ts_dtype dtype) {
    ts_tensor *t = ts_graph_find(g, name);
    ts_array info = {0};
    ts_status st = t ? ts_tensor_info(t, &info) : TS_ERR_NOT_FOUND;
    CHECK(st == TS_OK && info.dtype == dtype, "'%s' is a %s graph tensor (it is %s)", name, ts_dtype_name(dtype), st ? "absent" : ts_dtype_name(info.dtype));
}

/* ArgMax, ArgMin and TopK of x [2,4]: the indices int64 graph tensors, a
 * Gather reading ArgMax's, Add of an int64 constant reading ArgMin's. */
static void arg_extremes(void) {
    model_begin();
    input("x", 2, (int64_t[]){2, 4});
    input("table", 1, (int64_t[]){4});
    output_typed("am", 7, 1, (int64_t[]){2});
    output_typed("an1", 7, 1, (int64_t[]){2});
    output("picked");
    output("top");
    output_typed("ti", 7, 2, (int64_t[]){2, 2});
    init_i64("one", 1, (const int64_t[]){1});
    init_i64("k", 1, (const int64_t[]){2});
    Node *n = node("ArgMax", "argmax", "x", "am");
    attr_int(n, "axis", 1);
    attr_int(n, "keepdims", 0);
    n = node("ArgMin", "argmin", "x", "an");
    attr_int(n, "axis", 1);
    attr_int(n, "keepdims", 0);
    attr_int(n, "select_last_index", 1);
    node("Add", "next", "an,one", "an1");
    node("Gather", "pick", "table,am", "picked");
    attr_int(node("TopK", "topk", "x,k", "top,ti"), "axis", 1);
    ts_graph *g = NULL;
    ts_status st = import_as("arg_extremes", &g);
    CHECK(st == TS_OK, "ArgMax, ArgMin and TopK import%s%s", st ? ": " : "", st ? ts_last_error() : "");
    if (st) return;
    check_dtype(g, "am", TS_I64);
    check_dtype(g, "an", TS_I64);
    check_dtype(g, "ti", TS_I64);
    ts_options *opt = NULL;
    ts_model *m = infer(g, &opt);
    float xs[8] = {0.5f, 3.0f, -1.0f, 3.0f, /**/ 2.0f, -4.0f, 7.0f, -4.0f}, ts_[4] = {10.0f, 20.0f, 30.0f, 40.0f};
    ts_array in[2] = {ts_array_f32(xs, 2, (int64_t[]){2, 4}), ts_array_f32(ts_, 1, (int64_t[]){4})};
    const char *names[2] = {"x", "table"};
    st = m ? ts_model_run(m, names, in, 2) : TS_ERR_STATE;
    CHECK(st == TS_OK, "it runs%s%s", st ? ": " : "", st ? ts_last_error() : "");
    if (!st) {
        check_i64(m, g, "am", (const int64_t[]){1, 2}, 2);      /* the first of the tied maxima */
        check_i64(m, g, "an1", (const int64_t[]){2 + 1, 3 + 1}, 2); /* the last of the tied minima, + 1 */
        check_f32(m, g, "picked", (const float[]){20.0f, 30.0f}, 2);
        check_i64(m, g, "ti", (const int64_t[]){1, 3, 2, 0}, 4); /* the lower position first among equals */
        check_f32(m, g, "top", (const float[]){3.0f, 3.0f, 7.0f, 2.0f}, 4);
    }
    ts_model_free(m);
    ts_options_free(opt);
    ts_graph_free(g);
}

/* GatherND of data [2,3,4] by fed int64 indices [2,2] (a negative one
 * counted from its dim), and with batch_dims 1 by indices the graph
 * computes (an int64 Add): the values ONNX says; an index past its dim is
 * an error naming the indices and the value, never clamped. */
static void gather_nd(void) {
    model_begin();
    input("data", 3, (int64_t[]){2, 3, 4});
    input_typed("ind", 7, 2, (int64_t[]){2, 2});
    input_typed("bind", 7, 2, (int64_t[]){2, 1});
    output("rows");
    output("brows");
    init_i64("zero", 1, (const int64_t[]){0});
    node("GatherND", "gnd", "data,ind", "rows");
    node("Add", "computed", "bind,zero", "bind2");
    attr_int(node("GatherND", "gnd_batch", "data,bind2", "brows"), "batch_dims", 1);
    ts_graph *g = NULL;
    ts_status st = import_as("gather_nd", &g);
    CHECK(st == TS_OK, "GatherND by fed and computed indices imports%s%s", st ? ": " : "", st ? ts_last_error() : "");
    if (st) return;
    ts_options *opt = NULL;
    ts_model *m = infer(g, &opt);
    float d[24];
    for (int i = 0; i < 24; i++) d[i] = (float)i;
    int64_t iv[4] = {1, -1, 0, 2}, bv[2] = {2, -3};
    ts_array in[3] = {ts_array_f32(d, 3, (int64_t[]){2, 3, 4}), {.dtype = TS_I64, .ndim = 2, .shape = {2, 2}, .data = iv},
                      {.dtype = TS_I64, .ndim = 2, .shape = {2, 1}, .data = bv}};
    const char *names[3] = {"data", "ind", "bind"};
    st = m ? ts_model_run(m, names, in, 3) : TS_ERR_STATE;
    CHECK(st == TS_OK, "it runs with every index in range%s%s", st ? ": " : "", st ? ts_last_error() : "");
    if (!st) {
        float want[8], bwant[8];
        for (int j = 0; j < 4; j++) {
            want[j] = d[(1 * 3 + 2) * 4 + j], want[4 + j] = d[(0 * 3 + 2) * 4 + j]; /* data[1, -1], data[0, 2] */
            bwant[j] = d[(0 * 3 + 2) * 4 + j], bwant[4 + j] = d[(1 * 3 + 0) * 4 + j]; /* data[0][2], data[1][-3] */
        }
        check_f32(m, g, "rows", want, 8);
        check_f32(m, g, "brows", bwant, 8);
    }
    iv[1] = 3; /* past dim 1 (3): flat position 1*3+3 would be data[2, 0], inside the data */
    st = m ? ts_model_run(m, names, in, 3) : TS_ERR_STATE;
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "[0] = 3 (made of 'ind')") && strstr(ts_last_error(), "[-3, 3)"),
          "a fed index past its dim is an error naming the indices and the value, not clamped: %s", st ? ts_last_error() : "(ran)");
    iv[1] = -1, bv[1] = -4; /* the computed batch index past -3 */
    st = m ? ts_model_run(m, names, in, 3) : TS_ERR_STATE;
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "[1] = -4 (made of 'bind2')") && strstr(ts_last_error(), "[-3, 3)"),
          "a computed index past its dim is an error naming the tensor and the value: %s", st ? ts_last_error() : "(ran)");
    ts_model_free(m);
    ts_options_free(opt);
    ts_graph_free(g);
}

/* Constant indices out of range are refused at import, naming the node,
 * the indices and the value (where ONNX's reference would fail). */
static void constant_indices(void) {
    static const struct {
        const char *op, *what;
        int q, axis;
        int64_t bad, at;
    } cases[] = {
        {"Gather", "a Gather's", 1, 1, 4, 1},
        {"GatherElements", "a GatherElements'", 1, 1, -5, 2},
        {"GatherND", "a GatherND's", 2, 0, 4, 1},
        {"ScatterElements", "a ScatterElements'", 1, 1, 4, 3},
        {"ScatterND", "a ScatterND's", 2, 0, -3, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        model_begin();
        input("x", 2, (int64_t[]){2, 4});
        output("y");
        int64_t v[4] = {0, 1, 1, 0};
        v[cases[c].at] = cases[c].bad;
        bool scatter = strncmp(cases[c].op, "Scatter", 7) == 0, nd = strcmp(cases[c].op + strlen(cases[c].op) - 2, "ND") == 0;
        bool flat = strcmp(cases[c].op, "Gather") == 0; /* [4]; the others [2,2] */
        Tensor *t = tensor("idx", 7, flat ? 1 : 2, flat ? (int64_t[]){4} : (int64_t[]){2, 2});
        t->int64_data = mem(sizeof v);
        memcpy(t->int64_data, v, sizeof v);
        t->n_int64_data = 4;
        push((void ***)&graph->initializer, &graph->n_initializer, t);
        if (scatter) init_f32("upd", nd ? 1 : 2, nd ? (int64_t[]){2} : (int64_t[]){2, 2}, (const float[]){1, 2, 3, 4});
        Node *n = node(cases[c].op, "bad_indices", scatter ? "x,idx,upd" : "x,idx", "y");
        if (!nd) attr_int(n, "axis", cases[c].axis);
        ts_status st = import_as("constant_indices", NULL);
        char want[64];
        snprintf(want, sizeof want, "'idx'[%lld] = %lld", (long long)cases[c].at, (long long)cases[c].bad);
        CHECK(st == TS_ERR_FORMAT && strstr(ts_last_error(), "bad_indices") && strstr(ts_last_error(), want) && strstr(ts_last_error(), "never clamped"),
              "%s constant index out of range is refused at import naming the node, the tensor and the value: %s", cases[c].what,
              st ? ts_last_error() : "(imported)");
    }
}

/* TensorScatter of update [2,2,2] into past [2,5,2] along axis 1 from
 * write_indices the graph computes, in `mode`: the values of ONNX's pseudocode, and in
 * linear mode, which requires write_indices[b] + 2 <= 5, a write index
 * outside [0, 3] is an error at the run naming write_indices and the value
 * (not a write that silently drops the part past the cache or a negative
 * one counted from its end); in circular mode any index, modulo 5. */
static ts_model *tensor_scatter_model(const char *mode, ts_graph **g, ts_options **opt) {
    int64_t keep = model_opset;
    model_opset = 24;
    model_begin();
    input("past", 3, (int64_t[]){2, 5, 2});
    input("upd", 3, (int64_t[]){2, 2, 2});
    input_typed("wi", 7, 1, (int64_t[]){2});
    output("present");
    init_i64("zero", 1, (const int64_t[]){0});
    node("Add", "computed", "wi,zero", "wi2");
    attr_string(node("TensorScatter", "write", "past,upd,wi2", "present"), "mode", mode);
    attr_int(graph->node[graph->n_node - 1], "axis", 1);
    ts_status st = import_as("tensor_scatter", g);
    model_opset = keep;
    CHECK(st == TS_OK, "TensorScatter (%s) by computed write_indices imports%s%s", mode, st ? ": " : "", st ? ts_last_error() : "");
    return st ? NULL : infer(*g, opt);
}

static ts_status tensor_scatter_run(ts_model *m, ts_graph *g, const int64_t wi[2], bool circular) {
    float past[20], upd[8], want[20];
    for (int i = 0; i < 20; i++) past[i] = want[i] = (float)i;
    for (int i = 0; i < 8; i++) upd[i] = (float)(100 + i);
    for (int b = 0; b < 2; b++) /* ONNX's pseudocode */
        for (int l = 0; l < 2; l++) {
            int64_t s = wi[b] + l;
            if (circular) s = ((s % 5) + 5) % 5;
            for (int d = 0; d < 2 && s >= 0 && s < 5; d++) want[(b * 5 + s) * 2 + d] = upd[(b * 2 + l) * 2 + d];
        }
    int64_t w[2] = {wi[0], wi[1]};
    ts_array in[3] = {ts_array_f32(past, 3, (int64_t[]){2, 5, 2}), ts_array_f32(upd, 3, (int64_t[]){2, 2, 2}),
                      {.dtype = TS_I64, .ndim = 1, .shape = {2}, .data = w}};
    ts_status st = m ? ts_model_run(m, (const char *[]){"past", "upd", "wi"}, in, 3) : TS_ERR_STATE;
    if (!st) check_f32(m, g, "present", want, 20);
    return st;
}

static void tensor_scatter(void) {
    ts_graph *g = NULL;
    ts_options *opt = NULL;
    ts_model *m = tensor_scatter_model("linear", &g, &opt);
    ts_status st = tensor_scatter_run(m, g, (const int64_t[]){0, 3}, false);
    CHECK(st == TS_OK, "linear: it runs with write indices 0 and 3 (the last that fits)%s%s", st ? ": " : "", st ? ts_last_error() : "");
    st = tensor_scatter_run(m, g, (const int64_t[]){0, 4}, false);
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "[1] = 4 (made of 'wi2')") && strstr(ts_last_error(), "[0, 4)"),
          "linear: a write index whose update runs past the cache is an error naming write_indices and the value: %s",
          st ? ts_last_error() : "(ran)");
    st = tensor_scatter_run(m, g, (const int64_t[]){-1, 0}, false);
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "[0] = -1 (made of 'wi2')"),
          "linear: a negative write index is an error naming write_indices and the value: %s", st ? ts_last_error() : "(ran)");
    ts_model_free(m);
    ts_options_free(opt);
    ts_graph_free(g);
    m = tensor_scatter_model("circular", &g, &opt);
    st = tensor_scatter_run(m, g, (const int64_t[]){4, -2}, true);
    CHECK(st == TS_OK, "circular: write indices 4 and -2 wrap around the cache%s%s", st ? ": " : "", st ? ts_last_error() : "");
    ts_model_free(m);
    ts_options_free(opt);
    ts_graph_free(g);
    /* constant write_indices: checked at import */
    int64_t keep = model_opset;
    model_opset = 24;
    model_begin();
    input("past", 3, (int64_t[]){2, 5, 2});
    input("upd", 3, (int64_t[]){2, 2, 2});
    init_i64("wi", 2, (const int64_t[]){0, 4});
    output("present");
    attr_int(node("TensorScatter", "write", "past,upd,wi", "present"), "axis", 1);
    st = import_as("tensor_scatter_const", NULL);
    model_opset = keep;
    CHECK(st == TS_ERR_FORMAT && strstr(ts_last_error(), "write") && strstr(ts_last_error(), "'wi'[1] = 4") && strstr(ts_last_error(), "[0, 3]"),
          "linear: a constant write index past the cache is refused at import naming the node, the tensor and the value: %s",
          st ? ts_last_error() : "(imported)");
}

int main(void) {
    ts_set_log_level(TS_LOG_OFF);
    snprintf(dir, sizeof dir, "/tmp/ts_onnx_indices_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    arg_extremes();
    gather_nd();
    constant_indices();
    tensor_scatter();
    remove_dir();
    return check_summary("test_onnx_indices");
}
