/* test_onnx_torch_names.c -- a dynamo export's parameters under their
 * PyTorch names, from the file's metadata_props (docs/onnx.md, "What the
 * dynamo exporter's file holds"). A small model written as PyTorch's
 * dynamo exporter and onnxscript's optimizer write one: two LayerNorms
 * whose equal weights and biases were merged into one initializer each
 * (the bias under the exporter's name val_3), a Linear whose weight is
 * stored transposed as MatMul's operand val_7, a Linear whose zero bias
 * the optimizer dropped (a Gemm of two inputs) and whose weight the file
 * names by its placeholder (p_head_weight), and a float scale val_9
 * that is no parameter. Imported with that metadata every parameter is a
 * Param under its PyTorch name, in PyTorch's layout, with the file's
 * values; nodes are scoped by their module; and the output is the one the
 * same file gives without metadata. Metadata that is malformed changes
 * nothing. Two Linears whose equal weights were merged into one transposed
 * initializer are two parameters again. */
/* needs: onnx */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "onnx_model.h"

/* An FX call's text as the exporter writes it (pkg.torch.onnx.fx_node). */
static void fx(Node *n, const char *out, const char *target, const char *args, const char *scope) {
    char text[512];
    snprintf(text, sizeof text, "%%%s : [num_users=1] = call_function[target=torch.ops.aten.%s](args = (%s), kwargs = {})", out, target,
             args);
    prop(&n->metadata_props, &n->n_metadata_props, "pkg.torch.onnx.fx_node", text);
    snprintf(text, sizeof text, "['', '%s', '%s']", scope, out);
    prop(&n->metadata_props, &n->n_metadata_props, "pkg.torch.onnx.name_scopes", text);
}


static const char *const PARAMS[] = {"ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias", "fc.weight", "fc.bias", "head.weight", "head.bias"};
enum { NP = sizeof PARAMS / sizeof *PARAMS };

static const float LN_W[4] = {1.5f, 0.5f, -1.0f, 2.0f}, LN_B[4] = {0.25f, -0.5f, 0.0f, 1.0f};
static float fc_t[4 * 3]; /* val_7: fc.weight [3,4] transposed */
static const float FC_B[3] = {0.1f, -0.2f, 0.3f}, HEAD_W[2 * 3] = {1, -1, 0.5f, 2, 0, -0.5f}, SCALE[1] = {0.5f};

/* meta: 0 none, 1 the exporter's, 2 malformed */
static void build(int meta) {
    model_begin();
    input("x", 2, (int64_t[]){2, 4});
    init_f32("ln1.weight", 1, (int64_t[]){4}, LN_W);
    init_f32("val_3", 1, (int64_t[]){4}, LN_B);
    init_f32("val_7", 2, (int64_t[]){4, 3}, fc_t);
    init_f32("fc.bias", 1, (int64_t[]){3}, FC_B);
    init_f32("p_head_weight", 2, (int64_t[]){2, 3}, HEAD_W);
    init_f32("val_9", 1, (int64_t[]){1}, SCALE);
    Node *ln1 = node("LayerNormalization", "node_layer_norm", "x,ln1.weight,val_3", "layer_norm");
    Node *ln2 = node("LayerNormalization", "node_layer_norm_1", "layer_norm,ln1.weight,val_3", "layer_norm_1");
    Node *mm = node("MatMul", "node_MatMul_4", "layer_norm_1,val_7", "val_8");
    Node *add = node("Add", "node_linear", "val_8,fc.bias", "linear");
    Node *gemm = node("Gemm", "node_Gemm_5", "linear,p_head_weight", "linear_1");
    attr_int(gemm, "transB", 1);
    node("Mul", "node_mul", "linear_1,val_9", "y");
    output("y");
    if (!meta) return;
    if (meta == 2) { /* what a hostile or truncated file may hold instead */
        prop(&graph->metadata_props, &graph->n_metadata_props, "pkg.torch.export.ExportedProgram.graph_signature",
             "# inputs\np_ln1_weight: PARAMETER target='ln2.weight\np_: PARAMETER target=''\n: PARAMETER target='x'\nPARAMETER target='");
        prop(&ln2->metadata_props, &ln2->n_metadata_props, "pkg.torch.onnx.fx_node", "%%%%%p_ln1_weight%p_%[target=");
        prop(&mm->metadata_props, &mm->n_metadata_props, "pkg.torch.onnx.name_scopes", "['', 'fc");
        prop(&add->metadata_props, &add->n_metadata_props, "pkg.torch.onnx.name_scopes", "'");
        value_meta("val_7", "pkg.onnxscript.optimizer.folded_from", "['fc.weight");
        value_meta("val_9", "pkg.onnxscript.optimizer.folded_from", "'''");
        return;
    }
    char sig[1024] = "# inputs\n";
    for (int i = 0; i < NP; i++) {
        char ph[64], *p = ph;
        snprintf(ph, sizeof ph, "p_%s", PARAMS[i]);
        while ((p = strchr(p, '.'))) *p = '_';
        snprintf(sig + strlen(sig), sizeof sig - strlen(sig), "%s: PARAMETER target='%s'\n", ph, PARAMS[i]);
    }
    strcat(sig, "x: USER_INPUT\n\n# outputs\nmul: USER_OUTPUT\n");
    prop(&graph->metadata_props, &graph->n_metadata_props, "pkg.torch.export.ExportedProgram.graph_signature", sig);
    value_meta("ln1.weight", "pkg.torch.onnx.original_node_name", "p_ln1_weight");
    value_meta("val_3", "pkg.torch.onnx.original_node_name", "p_ln1_bias");
    value_meta("fc.bias", "pkg.torch.onnx.original_node_name", "p_fc_bias");
    value_meta("val_7", "pkg.onnxscript.optimizer.folded_from", "['fc.weight']");
    value_meta("val_9", "pkg.onnxscript.optimizer.folded_from", "['val_5', 'val_6']");
    fx(ln1, "layer_norm", "layer_norm.default", "%x, [4], %p_ln1_weight, %p_ln1_bias, 1e-05, False", "ln1");
    fx(ln2, "layer_norm_1", "layer_norm.default", "%layer_norm, [4], %p_ln2_weight, %p_ln2_bias, 1e-05, False", "ln2");
    fx(mm, "linear", "linear.default", "%layer_norm_1, %p_fc_weight, %p_fc_bias", "fc");
    fx(add, "linear", "linear.default", "%layer_norm_1, %p_fc_weight, %p_fc_bias", "fc");
    fx(gemm, "linear_1", "linear.default", "%linear, %p_head_weight, %p_head_bias", "head");
    prop(&gemm->metadata_props, &gemm->n_metadata_props, "pkg.onnxscript.rewriter.rule_name", "RemoveOptionalBiasFromGemm");
}

/* A Conv whose weight the dynamo exporter's optimizer fused with a
 * BatchNorm of a module in training mode (the FX call's training True). */
static const float CONV_W[2] = {0.5f, -2.0f}, CONV_B[2] = {0.125f, 1.0f};
static void build_fused(void) {
    model_begin();
    input("x", 4, (int64_t[]){1, 1, 2, 2});
    init_f32("conv.weight", 4, (int64_t[]){2, 1, 1, 1}, CONV_W);
    init_f32("val_4", 1, (int64_t[]){2}, CONV_B);
    Node *conv = node("Conv", "node_Conv_5", "x,conv.weight,val_4", "y");
    output("y");
    prop(&graph->metadata_props, &graph->n_metadata_props, "pkg.torch.export.ExportedProgram.graph_signature",
         "# inputs\np_conv_weight: PARAMETER target='conv.weight'\np_bn_weight: PARAMETER target='bn.weight'\n"
         "p_bn_bias: PARAMETER target='bn.bias'\nx: USER_INPUT\n");
    value_meta("val_4", "pkg.onnxscript.optimizer.folded_from", "['bn.bias', 'bn.running_mean']");
    fx(conv, "_native_batch_norm_legit_functional", "_native_batch_norm_legit_functional.default",
       "%conv2d, %p_bn_weight, %p_bn_bias, %b_bn_running_mean, %b_bn_running_var, True, 0.1, 1e-05", "bn");
    prop(&conv->metadata_props, &conv->n_metadata_props, "pkg.onnxscript.rewriter.rule_name", "FuseBatchNormIntoConv");
}

/* Two Linears of equal weights (a layer and its fresh copy), the weights
 * merged by the optimizer into one transposed initializer val_7 that both
 * MatMuls read, each FX call naming its own weight: y = fc1(x) + fc2(x). */
static const float FC2_B[3] = {-0.5f, 0.0f, 0.75f};
static void build_copies(bool meta) {
    model_begin();
    input("x", 2, (int64_t[]){2, 4});
    init_f32("val_7", 2, (int64_t[]){4, 3}, fc_t);
    init_f32("fc1.bias", 1, (int64_t[]){3}, FC_B);
    init_f32("fc2.bias", 1, (int64_t[]){3}, FC2_B);
    Node *mm1 = node("MatMul", "node_MatMul_1", "x,val_7", "val_8");
    Node *add1 = node("Add", "node_linear", "val_8,fc1.bias", "linear");
    Node *mm2 = node("MatMul", "node_MatMul_2", "x,val_7", "val_9");
    Node *add2 = node("Add", "node_linear_1", "val_9,fc2.bias", "linear_1");
    node("Add", "node_add", "linear,linear_1", "y");
    output("y");
    if (!meta) return;
    prop(&graph->metadata_props, &graph->n_metadata_props, "pkg.torch.export.ExportedProgram.graph_signature",
         "# inputs\np_fc1_weight: PARAMETER target='fc1.weight'\np_fc1_bias: PARAMETER target='fc1.bias'\n"
         "p_fc2_weight: PARAMETER target='fc2.weight'\np_fc2_bias: PARAMETER target='fc2.bias'\nx: USER_INPUT\n");
    value_meta("val_7", "pkg.onnxscript.optimizer.folded_from", "['fc1.weight']");
    value_meta("fc1.bias", "pkg.torch.onnx.original_node_name", "p_fc1_bias");
    value_meta("fc2.bias", "pkg.torch.onnx.original_node_name", "p_fc2_bias");
    fx(mm1, "linear", "linear.default", "%x, %p_fc1_weight, %p_fc1_bias", "fc1");
    fx(add1, "linear", "linear.default", "%x, %p_fc1_weight, %p_fc1_bias", "fc1");
    fx(mm2, "linear_1", "linear.default", "%x, %p_fc2_weight, %p_fc2_bias", "fc2");
    fx(add2, "linear_1", "linear.default", "%x, %p_fc2_weight, %p_fc2_bias", "fc2");
}

static char warned[2048];
static void keep_warning(void *user, int level, const char *msg) {
    (void)user;
    if (level == TS_LOG_WARN && !warned[0]) snprintf(warned, sizeof warned, "%s", msg);
}

/* The graph's output on a fixed x, into y[n]; false on an error. */
static bool run(ts_graph *g, float *y, int64_t n) {
    const float x[8] = {0.5f, -1, 2, 0.25f, -0.75f, 1.5f, 0, 1};
    ts_tensor *out = ts_graph_output_at(g, 0);
    ts_options *opt = ts_options_new();
    ts_options_set_output_mode(opt, TS_OUTPUT_FINAL, 0);
    ts_model *m = NULL;
    const char *names[1] = {"x"};
    ts_array in = ts_array_f32((void *)x, 2, (int64_t[]){2, 4}), o;
    ts_status st = ts_model_inference(&m, g, &out, 1, opt);
    if (!st) st = ts_model_run(m, names, &in, 1);
    if (!st) st = ts_model_anchored(m, ts_tensor_name(out), &o);
    bool ok = !st && ts_array_numel(&o) == n;
    for (int64_t i = 0; ok && i < n; i++) y[i] = ((const float *)o.data)[i];
    if (st) printf("  %s\n", ts_last_error());
    ts_model_free(m);
    ts_options_free(opt);
    return ok;
}

/* Whether t is a Param of `ndim` dims `d` holding `want` (row-major). */
static bool param_is(ts_graph *g, const char *name, int ndim, const int64_t *d, const float *want) {
    ts_tensor *t = ts_graph_find(g, name);
    ts_array a;
    if (!t || strcmp(ts_tensor_op(t), "Param") != 0 || ts_tensor_info(t, &a) || a.ndim != ndim || !a.data) return false;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (a.shape[i] != d[i]) return false;
        n *= d[i];
    }
    for (int64_t i = 0; i < n; i++)
        if (((const float *)a.data)[i] != want[i]) return false;
    return true;
}

int main(void) {
    ts_set_log_level(TS_LOG_OFF);
    snprintf(dir, sizeof dir, "/tmp/ts_onnx_torch_names_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    float fc_w[3 * 4]; /* PyTorch's fc.weight [out 3, in 4] */
    for (int o = 0; o < 3; o++)
        for (int i = 0; i < 4; i++) fc_w[o * 4 + i] = 0.25f * (float)((o * 5 + i * 3) % 7) - 0.75f, fc_t[i * 3 + o] = fc_w[o * 4 + i];
    float plain[4] = {0}, named[4] = {0}, odd[4] = {0};

    build(0);
    ts_graph *g = NULL;
    CHECK_OK(import_as("plain", &g), "the model without metadata imports");
    if (g) {
        CHECK(!ts_graph_find(g, "fc.weight") && !ts_graph_find(g, "ln2.weight"), "without metadata the file's names are all there is");
        CHECK(run(g, plain, 4), "the model without metadata runs");
        ts_graph_free(g);
    }

    build(1);
    g = NULL;
    CHECK_OK(import_as("named", &g), "the model with the dynamo exporter's metadata imports");
    if (g) {
        CHECK(param_is(g, "ln1.weight", 1, (int64_t[]){4}, LN_W) && param_is(g, "ln2.weight", 1, (int64_t[]){4}, LN_W) &&
                  ts_graph_find(g, "ln1.weight") != ts_graph_find(g, "ln2.weight"),
              "the merged LayerNorm weight is two parameters, ln1.weight and ln2.weight, each with the file's values");
        CHECK(param_is(g, "ln1.bias", 1, (int64_t[]){4}, LN_B) && ts_graph_find(g, "val_3") == ts_graph_find(g, "ln1.bias") &&
                  param_is(g, "ln2.bias", 1, (int64_t[]){4}, LN_B) && ts_graph_find(g, "ln2.bias") != ts_graph_find(g, "ln1.bias"),
              "val_3 is ln1.bias (the file's name an alias of it), and ln2.bias its own copy");
        CHECK(param_is(g, "fc.weight", 2, (int64_t[]){3, 4}, fc_w) && !ts_graph_find(g, "val_7"),
              "val_7 [4,3] is fc.weight in PyTorch's layout [3,4], the transpose of the file's values, and no parameter of its own");
        CHECK(param_is(g, "fc.bias", 1, (int64_t[]){3}, FC_B), "a parameter the file names as PyTorch does keeps its name");
        CHECK(param_is(g, "head.weight", 2, (int64_t[]){2, 3}, HEAD_W) && ts_graph_find(g, "p_head_weight") == ts_graph_find(g, "head.weight"),
              "an initializer named by its placeholder (p_head_weight) is head.weight, the file's name an alias");
        CHECK(param_is(g, "head.bias", 1, (int64_t[]){2}, (const float[]){0, 0}),
              "the Gemm's dropped bias is back: head.bias, [2] zeros, a parameter");
        ts_tensor *scale = ts_graph_find(g, "val_9");
        CHECK(!scale || strcmp(ts_tensor_op(scale), "Param") != 0, "val_9, folded from no parameter, is a constant, not a parameter (%s)",
              scale ? ts_tensor_op(scale) : "absent");
        CHECK(ts_graph_find(g, "fc/MatMul:0") && ts_graph_find(g, "ln2/LayerNormalization:0"),
              "nodes are scoped by the module their FX call came from (fc/MatMul:0, ln2/LayerNormalization:0)");
        CHECK(run(g, named, 4), "the model with metadata runs");
        int bad = 0;
        for (int i = 0; i < 4; i++) bad += fabsf(named[i] - plain[i]) > 1e-6f * (1 + fabsf(plain[i]));
        CHECK(!bad, "its output is the same model's without metadata (%g %g %g %g against %g %g %g %g)", named[0], named[1], named[2],
              named[3], plain[0], plain[1], plain[2], plain[3]);
        ts_graph_free(g);
    }

    build(2);
    g = NULL;
    CHECK_OK(import_as("malformed", &g), "malformed metadata (truncated lists and quotes, empty names) is ignored");
    if (g) {
        CHECK(!ts_graph_find(g, "fc.weight") && !ts_graph_find(g, "ln2.weight") && ts_graph_find(g, "val_3"),
              "malformed metadata renames nothing");
        CHECK(run(g, odd, 4) && memcmp(odd, plain, sizeof odd) == 0, "and the model computes what it computes without metadata");
        ts_graph_free(g);
    }
    build_fused();
    g = NULL;
    ts_set_log_level(TS_LOG_WARN);
    ts_set_log_callback(keep_warning, NULL);
    CHECK_OK(import_as("fused", &g), "a Conv fused with a training-mode BatchNorm imports");
    ts_set_log_callback(NULL, NULL);
    ts_set_log_level(TS_LOG_OFF);
    if (g) {
        CHECK(param_is(g, "conv.weight.fused", 4, (int64_t[]){2, 1, 1, 1}, CONV_W),
              "the fused Conv's weight is the parameter conv.weight.fused, with the file's values");
        CHECK(!ts_graph_find(g, "conv.weight"), "and neither the file's name nor PyTorch's, conv.weight, finds it (it is not PyTorch's weight)");
        ts_graph_free(g);
    }
    CHECK(strstr(warned, "1 BatchNorm of a module in training mode is here in inference mode") && strstr(warned, "'bn'") &&
              strstr(warned, "TorchScript exporter"),
          "the import warns that the file holds the training-mode BatchNorm 'bn' in inference mode, and what to do: %s", warned);

    build_copies(false);
    g = NULL;
    float apart[6] = {0}, merged[6] = {0};
    CHECK_OK(import_as("copies_plain", &g), "two Linears reading one merged weight import without metadata");
    if (g) {
        CHECK(run(g, merged, 6), "and run");
        ts_graph_free(g);
    }
    build_copies(true);
    g = NULL;
    warned[0] = '\0';
    ts_set_log_level(TS_LOG_WARN);
    ts_set_log_callback(keep_warning, NULL);
    CHECK_OK(import_as("copies", &g), "two Linears whose equal weights the optimizer merged into one transposed initializer import");
    ts_set_log_callback(NULL, NULL);
    ts_set_log_level(TS_LOG_OFF);
    if (g) {
        CHECK(param_is(g, "fc1.weight", 2, (int64_t[]){3, 4}, fc_w) && param_is(g, "fc2.weight", 2, (int64_t[]){3, 4}, fc_w) &&
                  ts_graph_find(g, "fc1.weight") != ts_graph_find(g, "fc2.weight") && !ts_graph_find(g, "val_7"),
              "val_7 is two parameters, fc1.weight and fc2.weight, each in PyTorch's layout with the file's values transposed");
        CHECK(!warned[0], "no parameter of the module is lost (%s)", warned);
        CHECK(run(g, apart, 6) && memcmp(apart, merged, sizeof apart) == 0, "and the model computes what the file without metadata computes");
        ts_graph_free(g);
    }

    remove_dir();
    return check_summary("test_onnx_torch_names");
}
