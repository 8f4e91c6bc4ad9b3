/* test_onnx_import.c -- ONNX files exported by PyTorch, imported and checked
 * against what PyTorch computed for them.
 *
 * tests/reference/onnx/ is written by tests/reference/make_onnx_fixtures.py
 * (Debian's python3-torch): for each model NAME.onnx, NAME.npz holds the
 * input x, integer labels, PyTorch's output, the cross-entropy loss and the
 * gradient of every parameter (and for LeNet a 10-step SGD trajectory).
 *
 * make_onnx_opset_fixtures.py converts some of them with onnx's own
 * version_converter to the opsets PyTorch's dynamo exporter writes (18 to
 * 28: ReduceMean's axes as an input, Split 18, MaxPool 22, ...); each is
 * checked against the .npz of the export it comes from.
 *
 * Every fixture is imported. One that imports must match PyTorch: outputs to
 * 1e-5 relative, gradients of the parameters that keep their names (an eval
 * export folds batch norm into new initializers) to 1e-4 (elementwise, with
 * a floor of 1e-4 of the tensor's largest value for elements near zero), the
 * trajectory to 1e-4. GPT-2's eval export folds the tied lm_head weight
 * into a transposed copy of wte.weight and stores the equal layer-norm
 * parameters once (Identity for the others): wte.weight's gradient (the
 * embedding's plus lm_head's) and each layer norm's own gradient matching
 * PyTorch's check that the import undoes both. One that does not import must fail with TS_ERR_UNSUPPORTED and the
 * message that names the op type, the node, the opset and the supported op
 * types -- never silently skipped. MUST_IMPORT lists the files that import
 * with today's op set; a regression there fails.
 *
 * Then the errors: truncated and corrupt files, a dynamic batch
 * dimension with and without its size, wrong input names and shapes, and an
 * initializer kept in a missing external-data file. */
/* needs: onnx npz */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "files.h"
#include "onnx.pb-c.h"
#include "tensorscope.h"

#define DIR "tests/reference/onnx/"
#define RTOL 1e-5
#define ATOL 1e-6
#define OUT_ATOL (-1e-5) /* of the output's largest |value| */
#define GRAD_RTOL 1e-4
#define GRAD_ATOL (-1e-4) /* of the tensor's largest |value| */

static const char *const MODELS[] = {"mlp_op11", "mlp_op13", "mlp_op17", "lenet_op13", "lenet_op17", "resnet18_eval_op13",
                                      "resnet18_train_op15", "gpt2_op13", "gpt2_op17", "gpt2_op18", "gpt2_op28",
                                      "lenet_op21", "resnet18_train_op22", "mlp_op28"};
static const char *const MUST_IMPORT[] = {"mlp_op11", "mlp_op13", "mlp_op17", "lenet_op13", "lenet_op17", "resnet18_eval_op13",
                                           "resnet18_train_op15", "gpt2_op13", "gpt2_op17", "gpt2_op18", "gpt2_op28",
                                           "lenet_op21", "resnet18_train_op22", "mlp_op28"};
/* The exports converted to newer opsets by onnx's version_converter
 * (make_onnx_opset_fixtures.py) and the export each one comes from, whose
 * .npz (PyTorch's results) they are checked against. */
static const char *const CONVERTED[][2] = {{"gpt2_op18", "gpt2_op13"}, {"gpt2_op28", "gpt2_op17"}, {"lenet_op21", "lenet_op17"},
                                           {"resnet18_train_op22", "resnet18_train_op15"}, {"mlp_op28", "mlp_op17"}};

static int must_import(const char *name) {
    for (size_t i = 0; i < sizeof MUST_IMPORT / sizeof *MUST_IMPORT; i++)
        if (strcmp(MUST_IMPORT[i], name) == 0) return 1;
    return 0;
}

/* max |a-b| and max |a-b|/|b|; 0 when every element is within atol + rtol|b|.
 * A negative atol is relative to the tensor's largest |value| (gradients:
 * elements near zero inside a tensor of larger ones carry the rounding of
 * the sums that made them, so their own relative error means nothing). */
static int compare(const char *what, const float *got, const ts_array *want, double rtol, double atol) {
    int64_t n = ts_array_numel(want);
    double max_abs = 0, max_rel = 0;
    int bad = 0;
    if (atol < 0) {
        double peak = 0;
        for (int64_t i = 0; i < n; i++) {
            double w = want->dtype == TS_F32 ? ((const float *)want->data)[i] : ((const double *)want->data)[i];
            if ((w > 0 ? w : -w) > peak) peak = w > 0 ? w : -w;
        }
        atol = -atol * peak;
    }
    for (int64_t i = 0; i < n; i++) {
        double w = want->dtype == TS_F32 ? ((const float *)want->data)[i] : ((const double *)want->data)[i];
        double d = got[i] > w ? got[i] - w : w - got[i];
        double r = w != 0 ? d / (w > 0 ? w : -w) : d;
        if (d > max_abs) max_abs = d;
        if (r > max_rel) max_rel = r;
        if (!(d <= atol + rtol * (w > 0 ? w : -w))) bad = 1;
    }
    CHECK(!bad, "%-34s %6lld values  max abs %.2e  max rel %.2e", what, (long long)n, max_abs, max_rel);
    return bad;
}

/* labels as the i32 the loss takes */
static int32_t *labels_i32(const ts_array *l) {
    int64_t n = ts_array_numel(l);
    int32_t *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = (int32_t)((const int64_t *)l->data)[i];
    return v;
}

/* Output and loss graph pieces for a fixture: logits [B,C] (or [B,T,V],
 * flattened to [B*T,V]) and cross-entropy with labels. */
static ts_tensor *add_loss(ts_graph *g, ts_tensor *out, const ts_array *labels) {
    ts_array info;
    ts_tensor_info(out, &info);
    ts_tensor *logits = out;
    int64_t rows = ts_array_numel(&info) / info.shape[info.ndim - 1];
    if (info.ndim != 2) logits = ts_reshape(g, out, 2, (int64_t[]){rows, info.shape[info.ndim - 1]});
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){ts_array_numel(labels)});
    ts_tensor *loss = ts_cross_entropy(g, logits, y);
    if (loss) ts_tensor_set_name(loss, "loss");
    return loss;
}

static void check_model(const char *name) {
    char path[512], npz_path[512];
    const char *source = name;
    for (size_t i = 0; i < sizeof CONVERTED / sizeof *CONVERTED; i++)
        if (strcmp(CONVERTED[i][0], name) == 0) source = CONVERTED[i][1];
    snprintf(path, sizeof path, DIR "%s.onnx", name);
    snprintf(npz_path, sizeof npz_path, DIR "%s.npz", source);
    printf("-- %s\n", name);
    ts_npz *z = NULL;
    ts_status zs = ts_npz_load(npz_path, &z);
    CHECK(zs == TS_OK, "%s.npz reads%s%s", source, zs ? ": " : "", zs ? ts_last_error() : "");
    if (zs) return;
    ts_graph *g = NULL;
    ts_status st = ts_graph_from_onnx(&g, path, NULL, 0);
    if (st != TS_OK) {
        const char *msg = ts_last_error();
        if (must_import(name)) CHECK(0, "%s imports (it did before): %s", name, msg);
        else CHECK(st == TS_ERR_UNSUPPORTED && strstr(msg, "node ") && strstr(msg, "opset ") && strstr(msg, "is not") &&
                  strstr(msg, path),
              "%s: not importable yet, with a clear unsupported-op error: %s", name, msg);
        ts_npz_free(z);
        return;
    }
    printf("     %s imports fully\n", name);
    const ts_array *x = ts_npz_find(z, "x"), *labels = ts_npz_find(z, "labels"), *want = ts_npz_find(z, "out");
    const ts_array *loss_want = ts_npz_find(z, "loss"), *traj = ts_npz_find(z, "traj");
    CHECK(ts_graph_output_count(g) == 1, "%s: one graph output", name);
    ts_tensor *out = ts_graph_output_at(g, 0);
    CHECK(ts_graph_find(g, "out") == out, "%s: the file's output name 'out' finds the output (alias of %s)", name, ts_tensor_name(out));
    ts_tensor *loss = add_loss(g, out, labels);
    CHECK_OK(ts_graph_status(g), "%s: loss on the imported output", name);
    int32_t *lab = labels_i32(labels);

    /* outputs and gradients: one step with lr 0 */
    ts_options *o = ts_options_new();
    ts_options_anchor(o, "out", ts_tensor_name(out), TS_OUTPUT_FINAL, 0);
    int n_grads = 0;
    for (size_t i = 0; i < ts_npz_count(z); i++) {
        const char *entry = ts_npz_name(z, i);
        if (strncmp(entry, "grad/", 5) == 0 && ts_graph_find(g, entry + 5)) {
            char anchor[600];
            snprintf(anchor, sizeof anchor, "Gradient___%s", entry + 5);
            ts_options_anchor(o, entry, anchor, TS_OUTPUT_FINAL, 0);
            n_grads++;
        }
    }
    ts_model *m = NULL;
    CHECK_OK(ts_model_training(&m, g, loss, o, ts_sgd(0.0f, 0.0f, 0.0f)), "%s: training model", name);
    CHECK_OK(ts_model_compile(m), "%s: compiles", name);
    ts_array in[2] = {*x, ts_array_i32(lab, 1, (int64_t[]){ts_array_numel(labels)})};
    const char *names[2] = {"x", "labels"};
    if (in[0].dtype == TS_I64) { /* token ids: fed as i32 */
        int32_t *ids = labels_i32(x);
        in[0] = ts_array_i32(ids, x->ndim, x->shape);
    }
    CHECK_OK(ts_model_run(m, names, in, 2), "%s: runs", name);
    ts_array a;
    if (ts_model_anchored(m, "out", &a) == TS_OK) CHECK_RESULT(compare("output", a.data, want, RTOL, OUT_ATOL));
    if (ts_model_anchored(m, "loss", &a) == TS_OK) CHECK_RESULT(compare("loss", a.data, loss_want, RTOL, ATOL));
    CHECK(n_grads > 0, "%s: %d parameter gradients to compare", name, n_grads);
    for (size_t i = 0; i < ts_npz_count(z); i++) {
        const char *entry = ts_npz_name(z, i);
        if (strncmp(entry, "grad/", 5) == 0 && ts_graph_find(g, entry + 5) && ts_model_anchored(m, entry, &a) == TS_OK)
            CHECK_RESULT(compare(entry, a.data, ts_npz_array(z, i), GRAD_RTOL, GRAD_ATOL));
    }
    ts_model_free(m);
    ts_options_free(o);

    if (traj) { /* 10 steps of SGD(lr 0.05) on the same batch */
        ts_graph_free(g);
        g = NULL;
        CHECK_OK(ts_graph_from_onnx(&g, path, NULL, 0), "%s: imports again", name);
        loss = add_loss(g, ts_graph_output_at(g, 0), labels);
        o = ts_options_new();
        CHECK_OK(ts_model_training(&m, g, loss, o, ts_sgd(0.05f, 0.0f, 0.0f)), "%s: SGD model", name);
        float losses[10];
        for (int s = 0; s < 10 && ts_model_run(m, names, in, 2) == TS_OK; s++)
            if (ts_model_anchored(m, "loss", &a) == TS_OK) losses[s] = *(const float *)a.data;
        CHECK_RESULT(compare("10-step SGD trajectory", losses, traj, GRAD_RTOL, GRAD_ATOL));
        ts_model_free(m);
        ts_options_free(o);
    }
    if (in[0].data != x->data) free(in[0].data);
    free(lab);
    ts_graph_free(g);
    ts_npz_free(z);
}

/* Names and locations of an imported model (docs/design.md#tensor-names). */
static void check_names(void) {
    printf("-- names and locations\n");
    ts_graph *g = NULL;
    CHECK_OK(ts_graph_from_onnx(&g, DIR "mlp_op13.onnx", NULL, 0), "mlp_op13 imports");
    if (!g) return;
    CHECK(ts_graph_find(g, "fc1.weight") != NULL, "parameters keep the file's initializer names (fc1.weight)");
    ts_tensor *gemm = ts_graph_find(g, "fc2/Gemm:0");
    CHECK(gemm != NULL, "the /fc2/Gemm node's output is fc2/Gemm:0");
    CHECK(gemm && ts_graph_find(g, "/fc2/Gemm_output_0") == gemm, "the file's value name /fc2/Gemm_output_0 finds it too");
    CHECK(gemm && ts_tensor_alias(gemm) && strcmp(ts_tensor_alias(gemm), "/fc2/Gemm_output_0") == 0, "ts_tensor_alias gives the file's name");
    CHECK(ts_graph_find(g, "Relu:1") != NULL, "top-level ops count per op type (Relu:1)");
    char *dump = ts_graph_dump(g, NULL, TS_DUMP_TEXT, 1);
    CHECK(dump && strstr(dump, "@ mlp_op13.onnx:3 (/fc2/Gemm)"), "the graph dump shows model.onnx:<node index> (<node name>)");
    ts_string_free(dump);

    /* an infinite weight: the numeric check names the imported node */
    ts_options *o = ts_options_new();
    ts_options_set_check_numerics(o, TS_CHECK_OUTPUT);
    ts_model *m = NULL;
    ts_tensor *out = ts_graph_output_at(g, 0);
    CHECK_OK(ts_model_inference(&m, g, &out, 1, o), "an inference model of the import");
    float x[64], w[120];
    for (int i = 0; i < 64; i++) x[i] = 1.0f;
    for (int i = 0; i < 120; i++) w[i] = 0.1f;
    w[7] = 1.0f / 0.0f;
    ts_array wa = ts_array_f32(w, 2, (int64_t[]){10, 12});
    CHECK_OK(ts_param_set(ts_graph_find(g, "fc2.weight"), &wa), "fc2.weight set with an Inf");
    ts_array in = ts_array_f32(x, 4, (int64_t[]){4, 1, 4, 4});
    const char *names[1] = {"x"};
    ts_set_log_level(TS_LOG_OFF);
    ts_status st = m ? ts_model_run(m, names, &in, 1) : TS_ERR_STATE;
    ts_set_log_level(TS_LOG_INFO);
    CHECK(st == TS_ERR_NUMERICS && strstr(ts_last_error(), "mlp_op13.onnx:3 (/fc2/Gemm)"),
          "the numeric check's report gives the node as model.onnx:<index> (<name>): %.300s", ts_last_error());
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);

    /* PyTorch names a Sequential's child by its whole path
     * (/layer4/layer4.0/conv1/Conv): the scope is the module path */
    g = NULL;
    CHECK_OK(ts_graph_from_onnx(&g, DIR "resnet18_train_op15.onnx", NULL, 0), "resnet18_train_op15 imports");
    CHECK(g && ts_graph_find(g, "layer4.0.conv1/Conv:0") && ts_graph_find(g, "layer4.0.bn1/BatchNormalization:0") &&
              ts_graph_find(g, "layer4.0.bn1.running_mean"),
          "/layer4/layer4.0/conv1/Conv -> layer4.0.conv1/Conv:0, beside layer4.0.conv1.weight; buffers keep their names");
    ts_graph_free(g);
}

static void expect_error(const char *what, ts_status want, const char *needle, ts_status got) {
    const char *msg = ts_last_error();
    CHECK(got == want && strstr(msg, needle), "%s: %s with '%s': %s", what, ts_status_name(want), needle, msg);
}

static int write_bytes(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(b, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

static void check_errors(const char *tmp) {
    printf("-- errors\n");
    ts_graph *g = NULL;
    size_t n = 0;
    char *bytes = test_read_file(DIR "mlp_op13.onnx", &n);
    CHECK(bytes != NULL, "reads mlp_op13.onnx");
    if (!bytes) return;
    char path[600];
    snprintf(path, sizeof path, "%s/bad.onnx", tmp);

    expect_error("a missing file", TS_ERR_IO, "cannot open", ts_graph_from_onnx(&g, "no/such/model.onnx", NULL, 0));
    CHECK(g == NULL, "no graph after an error");
    write_bytes(path, bytes, 0);
    expect_error("an empty file", TS_ERR_FORMAT, "empty", ts_graph_from_onnx(&g, path, NULL, 0));
    int bad_trunc = 0;
    for (size_t cut = 1; cut < n; cut += cut < 64 ? 1 : 97) {
        write_bytes(path, bytes, cut);
        ts_status st = ts_graph_from_onnx(&g, path, NULL, 0);
        if (st == TS_OK || g) bad_trunc++;
        ts_graph_free(g);
        g = NULL;
    }
    CHECK(bad_trunc == 0, "every truncation of the file is an error, never a graph (%d were not)", bad_trunc);
    write_bytes(path, bytes, n / 2);
    expect_error("a truncated file", TS_ERR_FORMAT, "corrupt or truncated", ts_graph_from_onnx(&g, path, NULL, 0));
    write_bytes(path, "this is not a protobuf at all", 29);
    expect_error("a text file", TS_ERR_FORMAT, "not a valid ONNX model", ts_graph_from_onnx(&g, path, NULL, 0));

    expect_error("a dynamic batch dimension not given", TS_ERR_INVALID_ARGUMENT, "--input x:batchx1x4x4",
                 ts_graph_from_onnx(&g, DIR "mlp_dynamic_op13.onnx", NULL, 0));
    ts_onnx_input in = {"x", 4, {7, 1, 4, 4}, NULL};
    CHECK_OK(ts_graph_from_onnx(&g, DIR "mlp_dynamic_op13.onnx", &in, 1), "the dynamic batch given as 7 imports");
    if (g) {
        ts_array info;
        ts_tensor_info(ts_graph_output_at(g, 0), &info);
        CHECK(info.ndim == 2 && info.shape[0] == 7 && info.shape[1] == 5, "its output is [7,5]");
        ts_graph_free(g);
        g = NULL;
    }
    ts_onnx_input wrong_name = {"image", 4, {4, 1, 4, 4}, NULL};
    expect_error("an input the model lacks", TS_ERR_NOT_FOUND, "its inputs: 'x'", ts_graph_from_onnx(&g, DIR "mlp_op13.onnx", &wrong_name, 1));
    ts_onnx_input batch9 = {"x", 4, {9, 1, 4, 4}, NULL};
    CHECK_OK(ts_graph_from_onnx(&g, DIR "mlp_op13.onnx", &batch9, 1), "a batch of 9 replaces the exported batch of 4");
    ts_graph_free(g);
    g = NULL;
    ts_onnx_input wrong_rank = {"x", 2, {4, 16}, NULL};
    expect_error("a shape of another rank", TS_ERR_SHAPE, "4 dimensions", ts_graph_from_onnx(&g, DIR "mlp_op13.onnx", &wrong_rank, 1));
    ts_onnx_input wrong_size = {"x", 4, {4, 1, 5, 4}, NULL};
    expect_error("a size the weights do not fit", TS_ERR_SHAPE, "fc1/Gemm", ts_graph_from_onnx(&g, DIR "mlp_op13.onnx", &wrong_size, 1));

    /* fc1.weight moved to an external-data file: missing, then present */
    TensorscopeOnnx__ModelProto *mp = tensorscope_onnx__model_proto__unpack(NULL, n, (const uint8_t *)bytes);
    CHECK(mp && mp->graph, "protobuf-c reads the fixture back");
    if (mp && mp->graph) {
        TensorscopeOnnx__TensorProto *w = NULL;
        for (size_t i = 0; i < mp->graph->n_initializer; i++)
            if (strcmp(mp->graph->initializer[i]->name, "fc1.weight") == 0) w = mp->graph->initializer[i];
        CHECK(w && w->has_raw_data, "fc1.weight is stored as raw data");
        if (w && w->has_raw_data) {
            char wpath[600];
            snprintf(wpath, sizeof wpath, "%s/weights.bin", tmp);
            unlink(wpath);
            ProtobufCBinaryData raw = w->raw_data;
            TensorscopeOnnx__StringStringEntryProto loc = TENSORSCOPE_ONNX__STRING_STRING_ENTRY_PROTO__INIT;
            loc.key = "location";
            loc.value = "weights.bin";
            TensorscopeOnnx__StringStringEntryProto *entries[1] = {&loc};
            w->has_raw_data = 0;
            w->has_data_location = 1;
            w->data_location = TENSORSCOPE_ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
            w->n_external_data = 1;
            TensorscopeOnnx__StringStringEntryProto **saved = w->external_data;
            w->external_data = entries;
            size_t size = tensorscope_onnx__model_proto__get_packed_size(mp);
            uint8_t *packed = malloc(size);
            tensorscope_onnx__model_proto__pack(mp, packed);
            snprintf(path, sizeof path, "%s/external.onnx", tmp);
            write_bytes(path, packed, size);
            expect_error("external data whose file is missing", TS_ERR_IO, "external file 'weights.bin'", ts_graph_from_onnx(&g, path, NULL, 0));
            write_bytes(wpath, raw.data, raw.len);
            CHECK_OK(ts_graph_from_onnx(&g, path, NULL, 0), "external data beside the model imports");
            ts_tensor *p = g ? ts_graph_find(g, "fc1.weight") : NULL;
            ts_array info;
            CHECK(p && ts_tensor_info(p, &info) == TS_OK && memcmp(info.data, raw.data, raw.len) == 0,
                  "fc1.weight holds the external file's values");
            ts_graph_free(g);
            g = NULL;
            write_bytes(wpath, raw.data, raw.len / 2);
            expect_error("external data too short", TS_ERR_FORMAT, "shorter", ts_graph_from_onnx(&g, path, NULL, 0));
            w->external_data = saved;
            w->n_external_data = 0;
            w->has_raw_data = 1;
            free(packed);
        }
        tensorscope_onnx__model_proto__free_unpacked(mp, NULL);
    }
    free(bytes);
}

/* A node of one output. */
static TensorscopeOnnx__NodeProto onnx_node(char *op_type, char *name, char **in, size_t n_in, char **out) {
    TensorscopeOnnx__NodeProto n = TENSORSCOPE_ONNX__NODE_PROTO__INIT;
    n.op_type = op_type;
    n.name = name;
    n.n_input = n_in;
    n.input = in;
    n.n_output = 1;
    n.output = out;
    return n;
}

/* Slice and Concat of graph tensors (GPT-2's exports slice and concatenate
 * only constants): a model written here, x [2,6] -> Concat(x[:, 1:-1], x)
 * along axis 1 -> [2,10]. */
static void check_slice_concat(const char *tmp) {
    printf("-- Slice and Concat of graph tensors\n");
    TensorscopeOnnx__TensorShapeProto__Dimension d0 = TENSORSCOPE_ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT, d1 = d0;
    d0.has_dim_value = d1.has_dim_value = 1;
    d0.dim_value = 2;
    d1.dim_value = 6;
    TensorscopeOnnx__TensorShapeProto__Dimension *dims[2] = {&d0, &d1};
    TensorscopeOnnx__TensorShapeProto shape = TENSORSCOPE_ONNX__TENSOR_SHAPE_PROTO__INIT;
    shape.n_dim = 2;
    shape.dim = dims;
    TensorscopeOnnx__TypeProto__Tensor tt = TENSORSCOPE_ONNX__TYPE_PROTO__TENSOR__INIT;
    tt.has_elem_type = 1;
    tt.elem_type = 1; /* float */
    tt.shape = &shape;
    TensorscopeOnnx__TypeProto type = TENSORSCOPE_ONNX__TYPE_PROTO__INIT;
    type.tensor_type = &tt;
    TensorscopeOnnx__ValueInfoProto xin = TENSORSCOPE_ONNX__VALUE_INFO_PROTO__INIT, yout = xin;
    xin.name = "x";
    xin.type = &type;
    yout.name = "y";
    int64_t one = 1, vals[3] = {1, -1, 1};
    TensorscopeOnnx__TensorProto ints[3];
    TensorscopeOnnx__TensorProto *inits[3];
    char *init_names[3] = {"starts", "ends", "axes"};
    for (int i = 0; i < 3; i++) {
        ints[i] = (TensorscopeOnnx__TensorProto)TENSORSCOPE_ONNX__TENSOR_PROTO__INIT;
        ints[i].name = init_names[i];
        ints[i].n_dims = 1;
        ints[i].dims = &one;
        ints[i].has_data_type = 1;
        ints[i].data_type = 7; /* int64 */
        ints[i].n_int64_data = 1;
        ints[i].int64_data = &vals[i];
        inits[i] = &ints[i];
    }
    char *slice_in[4] = {"x", "starts", "ends", "axes"}, *slice_out[1] = {"s"}, *cat_in[2] = {"s", "x"}, *cat_out[1] = {"y"};
    TensorscopeOnnx__AttributeProto axis = TENSORSCOPE_ONNX__ATTRIBUTE_PROTO__INIT;
    axis.name = "axis";
    axis.has_i = 1;
    axis.i = 1;
    TensorscopeOnnx__AttributeProto *attrs[1] = {&axis};
    TensorscopeOnnx__NodeProto slice = onnx_node("Slice", "/Slice", slice_in, 4, slice_out),
                               cat = onnx_node("Concat", "/Concat", cat_in, 2, cat_out);
    cat.n_attribute = 1;
    cat.attribute = attrs;
    TensorscopeOnnx__NodeProto *nodes[2] = {&slice, &cat};
    TensorscopeOnnx__ValueInfoProto *ins[1] = {&xin}, *outs[1] = {&yout};
    TensorscopeOnnx__GraphProto graph = TENSORSCOPE_ONNX__GRAPH_PROTO__INIT;
    graph.n_node = 2;
    graph.node = nodes;
    graph.n_initializer = 3;
    graph.initializer = inits;
    graph.n_input = 1;
    graph.input = ins;
    graph.n_output = 1;
    graph.output = outs;
    TensorscopeOnnx__OperatorSetIdProto opset = TENSORSCOPE_ONNX__OPERATOR_SET_ID_PROTO__INIT;
    opset.has_version = 1;
    opset.version = 13;
    TensorscopeOnnx__OperatorSetIdProto *opsets[1] = {&opset};
    TensorscopeOnnx__ModelProto model = TENSORSCOPE_ONNX__MODEL_PROTO__INIT;
    model.n_opset_import = 1;
    model.opset_import = opsets;
    model.graph = &graph;
    size_t size = tensorscope_onnx__model_proto__get_packed_size(&model);
    uint8_t *packed = malloc(size);
    tensorscope_onnx__model_proto__pack(&model, packed);
    char path[600];
    snprintf(path, sizeof path, "%s/slice_concat.onnx", tmp);
    CHECK(write_bytes(path, packed, size) == 0, "writes slice_concat.onnx");
    free(packed);
    ts_graph *g = NULL;
    CHECK_OK(ts_graph_from_onnx(&g, path, NULL, 0), "Slice and Concat of a graph input import");
    if (!g) return;
    ts_tensor *y = ts_graph_output_at(g, 0);
    ts_model *m = NULL;
    CHECK_OK(ts_model_inference(&m, g, &y, 1, NULL), "an inference model of it");
    float x[12], want[20];
    for (int i = 0; i < 12; i++) x[i] = (float)(i * i) - 3.5f;
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 10; c++) want[r * 10 + c] = c < 4 ? x[r * 6 + 1 + c] : x[r * 6 + c - 4];
    ts_array in = ts_array_f32(x, 2, (int64_t[]){2, 6}), a;
    const char *names[1] = {"x"};
    CHECK_OK(m ? ts_model_run(m, names, &in, 1) : TS_ERR_STATE, "runs");
    ts_status got = m ? ts_model_anchored(m, ts_tensor_name(y), &a) : TS_ERR_STATE;
    CHECK(m && got == TS_OK && ts_array_numel(&a) == 20 && a.shape[a.ndim - 2] == 2 && a.shape[a.ndim - 1] == 10 &&
              memcmp(a.data, want, sizeof want) == 0,
          "y = concat(x[:, 1:-1], x) along axis 1, [2,10]");
    ts_model_free(m);
    ts_graph_free(g);
}

int main(void) {
    char tmp[] = "/tmp/ts_onnx_XXXXXX";
    if (!mkdtemp(tmp)) return 1;
    for (size_t i = 0; i < sizeof MODELS / sizeof *MODELS; i++) check_model(MODELS[i]);
    check_names();
    check_errors(tmp);
    check_slice_concat(tmp);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) printf("could not remove %s\n", tmp);
    return check_summary("test_onnx_import");
}
