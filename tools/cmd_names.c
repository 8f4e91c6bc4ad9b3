/* cmd_names.c -- `names`, `graph` and `lint`: what a model contains, with
 * the same model flags as `train` for every model. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct model_args {
    const char *model, *optimizer, *format, *loss, *labels_input, *output, *precision, *save_graph;
    long batch_size, repeat_count, grad_accum;
    double momentum;
    bool locations, inference, backward;
    cli_list anchors, inputs, values;
    cli_import gpt; /* --layers, --heads, --embd, --block-size, --vocab */
} model_args;

/* Builds and compiles the training (or inference) model the flags describe. */
static int compile_model(const char *cmd, const model_args *a, bool plan_only, cli_model *cm, ts_model **m) {
    cli_import imp = a->gpt;
    imp.inputs = &a->inputs, imp.values = &a->values, imp.loss = a->loss, imp.labels_input = a->labels_input, imp.output = a->output;
    ts_status st = cli_model_open(a->model, a->batch_size, 0, NULL, &imp, cm);
    if (cm->unknown) return cli_unknown_model(cmd, a->model);
    if (st) return cm->error[0] ? cli_usage_error(cmd, "%s", cm->error) : cli_runtime_error("building the model");
    ts_options *o = ts_options_new();
    if (!o) return cli_runtime_error("options");
    ts_optimizer opt;
    const char *optimizer = a->optimizer;
    const cli_defaults d = cli_model_defaults(a->model); /* as `train` uses them */
    if (!optimizer) optimizer = d.optimizer;
    double lr = d.lr;
    if (cli_optimizer(optimizer, lr, a->momentum, 0, &opt)) {
        ts_options_free(o);
        return cli_usage_error(cmd, "--optimizer must be sgd, adam or adamw");
    }
    ts_dtype prec;
    if (cli_precision(a->precision, &prec)) {
        ts_options_free(o);
        return cli_usage_error(cmd, "--precision must be f32, bf16 or f16, got '%s'", a->precision);
    }
    /* names, shapes, the plan and lint: nothing there runs, so no buffer is allocated */
    if (ts_options_set_device_iterations(o, (int)a->repeat_count) || ts_options_set_gradient_accumulation(o, (int)a->grad_accum) ||
        (a->precision && ts_options_set_precision(o, prec)) || ts_options_set_plan_only(o, plan_only)) { /* no precision given: TS_USE_BF16 may choose */
        ts_options_free(o);
        return cli_usage_error(cmd, "%s", ts_last_error());
    }
    for (int i = 0; i < a->anchors.n; i++)
        if (ts_options_anchor(o, NULL, a->anchors.items[i], TS_OUTPUT_DEFAULT, 0)) {
            ts_options_free(o);
            return cli_usage_error(cmd, "--anchor: %s", ts_last_error());
        }
    ts_tensor *outs[1] = {cm->logp};
    st = a->inference ? ts_model_inference(m, cm->g, outs, 1, o) : ts_model_training(m, cm->g, cm->loss, o, opt);
    ts_options_free(o);
    if (st || ts_model_compile(*m)) return strstr(ts_last_error(), "anchor") ? cli_usage_error(cmd, "%s", ts_last_error()) : cli_runtime_error("compiling");
    return CLI_OK;
}

#define MODEL_FLAGS(a)                                                                                  \
    {"--model", FLAG_STRING, &(a).model, "NAME|FILE.onnx", "built-in model (mlp, cnn, gpt) or an ONNX file"}, \
    {"--input", FLAG_LIST, &(a).inputs, "NAME:SHAPE", "static shape of an input, e.g. x:64x1x28x28 or tokens:32x64 (dim 0 = --batch-size)"}, \
    {"--input-value", FLAG_LIST, &(a).values, "NAME=V,..|NAME=F.npy", "an ONNX input's value, bound at import (a shape input: shape=4,-1)"}, \
    {"--batch-size", FLAG_INT, &(a).batch_size, "B", "micro-batch size (default 64)"},                  \
    {"--optimizer", FLAG_STRING, &(a).optimizer, "sgd|adam|adamw", "optimizer state to include (default: the model's, mlp sgd, cnn adam, gpt adamw)"}, \
    {"--momentum", FLAG_FLOAT, &(a).momentum, "M", "SGD momentum (adds Accl___ tensors)"},              \
    {"--repeat-count", FLAG_INT, &(a).repeat_count, "D", "device iterations"},                          \
    {"--gradient-accumulation-count", FLAG_INT, &(a).grad_accum, "A", "gradient accumulation"},         \
    {"--inference", FLAG_BOOL, &(a).inference, NULL, "an inference model (no gradients)"},              \
    {"--precision", FLAG_STRING, &(a).precision, "f32|bf16|f16", "mixed precision: the 16-bit copies of matmul and conv inputs (docs/precision.md)"}, \
    {"--anchor", FLAG_LIST, &(a).anchors, "NAME", "anchor a tensor (marks it in dumps; adds gradients)"}, \
    {"", FLAG_SECTION, NULL, NULL, "--model FILE.onnx"},                                               \
    {"--loss", FLAG_STRING, &(a).loss, "cross_entropy|nll|mse", "loss on the output"},                 \
    {"--labels-input", FLAG_STRING, &(a).labels_input, "NAME", "the file's labels input (its scalar output is the loss)"}, \
    {"--output", FLAG_STRING, &(a).output, "NAME", "the scores to put the loss on (default: the first output)"}, \
    CLI_GPT_FLAGS((a).gpt)

static model_args defaults(void) {
    return (model_args){.model = "mlp", .optimizer = NULL, .format = "text", .batch_size = 64, .repeat_count = 1, .grad_accum = 1};
}

int cmd_names(int argc, char **argv) {
    model_args a = defaults();
    const cli_flag flags[] = {MODEL_FLAGS(a), {NULL, FLAG_BOOL, NULL, NULL, NULL}};
    bool help;
    int rc = cli_parse("names", "[--model mlp] [flags]", flags, argc, argv, 2, NULL, &help);
    if (rc || help) return rc;
    cli_model cm = {0};
    ts_model *m = NULL;
    rc = compile_model("names", &a, true, &cm, &m);
    if (!rc) {
        const char *const *names;
        size_t n;
        ts_model_tensor_names(m, &names, &n);
        for (size_t i = 0; i < n; i++) printf("%s\n", names[i]);
        /* an imported model's own value names find the same tensors */
        bool header = false;
        for (size_t i = 0; i < ts_graph_tensor_count(cm.g); i++) {
            const ts_tensor *t = ts_graph_tensor_at(cm.g, i);
            const char *alias = ts_tensor_alias(t);
            if (!alias) continue;
            if (!header) printf("# the model file's value names (aliases):\n");
            header = true;
            printf("%s -> %s\n", alias, ts_tensor_name(t));
        }
    }
    ts_model_free(m);
    ts_graph_free(cm.g);
    return rc;
}

int cmd_graph(int argc, char **argv) {
    model_args a = defaults();
    const cli_flag flags[] = {{"--format", FLAG_STRING, &a.format, "text|dot", "output format (default text)"},
                              {"--locations", FLAG_BOOL, &a.locations, NULL, "show where each node was built"},
                              {"--backward", FLAG_BOOL, &a.backward, NULL, "add the backward pass and the optimizer step the training program runs"},
                              {"--save-graph", FLAG_STRING, &a.save_graph, "FILE.onnx", "write the compiled graph as ONNX instead (with the backward and optimizer step unless --inference)"},
                              MODEL_FLAGS(a),
                              {NULL, FLAG_BOOL, NULL, NULL, NULL}};
    bool help;
    int rc = cli_parse("graph", "[--model mlp] [--format text|dot] [flags]", flags, argc, argv, 2, NULL, &help);
    if (rc || help) return rc;
    ts_dump_format fmt;
    if (strcasecmp(a.format, "text") == 0) fmt = TS_DUMP_TEXT;
    else if (strcasecmp(a.format, "dot") == 0) fmt = TS_DUMP_DOT;
    else return cli_usage_error("graph", "--format must be text or dot, got '%s'", a.format);
    if (a.backward && a.inference) return cli_usage_error("graph", "--backward shows the training program: an --inference model runs no backward pass");
    if (a.save_graph && (a.backward || a.locations || fmt != TS_DUMP_TEXT))
        return cli_usage_error("graph", "--save-graph writes the graph as ONNX, with the backward pass unless --inference; --format, --locations and --backward are for the printed graph");
    cli_model cm = {0};
    ts_model *m = NULL;
    rc = compile_model("graph", &a, !a.save_graph, &cm, &m); /* the saved graph holds the optimizer state's values: allocated */
    if (!rc && a.save_graph) {
        if (ts_model_save_graph(m, a.save_graph)) rc = cli_runtime_error("saving the graph");
    } else if (!rc) {
        char *s = ts_graph_dump(cm.g, m, fmt, (a.locations ? TS_DUMP_LOCATIONS : 0) | (a.backward ? TS_DUMP_BACKWARD : 0));
        if (s) fputs(s, stdout);
        else rc = cli_runtime_error("dumping the graph");
        ts_string_free(s);
    }
    ts_model_free(m);
    ts_graph_free(cm.g);
    return rc;
}

int cmd_lint(int argc, char **argv) {
    model_args a = defaults();
    const cli_flag flags[] = {MODEL_FLAGS(a), {NULL, FLAG_BOOL, NULL, NULL, NULL}};
    bool help;
    int rc = cli_parse("lint", "[--model mlp] [--batch-size B] [--inference] [flags]", flags, argc, argv, 2, NULL, &help);
    if (rc || help) return rc;
    ts_set_log_level(TS_LOG_ERROR); /* the warnings are printed below, once */
    cli_model cm = {0};
    ts_model *m = NULL;
    rc = compile_model("lint", &a, true, &cm, &m);
    const char *const *w;
    size_t n = 0;
    if (!rc && ts_model_lint(m, &w, &n)) rc = cli_runtime_error("linting the model");
    else if (!rc) {
        for (size_t i = 0; i < n; i++) printf("warning: %s\n", w[i]);
        printf("%s: %zu lint warning%s\n", a.model, n, n == 1 ? "" : "s");
        rc = n ? CLI_RUNTIME : CLI_OK;
    }
    ts_model_free(m);
    ts_graph_free(cm.g);
    return rc;
}

int cli_model_command(const char *cmd, const char *usage, const cli_flag *extra, int argc, char **argv, cli_model *cm, ts_model **m,
                      bool *help) {
    model_args a = defaults();
    const cli_flag model_flags[] = {MODEL_FLAGS(a)};
    size_t ne = 0, nm = sizeof model_flags / sizeof model_flags[0];
    while (extra && extra[ne].name) ne++;
    cli_flag *all = calloc(ne + nm + 1, sizeof *all);
    if (!all) return cli_runtime_error("out of memory");
    if (ne) memcpy(all, extra, ne * sizeof *all);
    memcpy(all + ne, model_flags, nm * sizeof *all);
    all[ne + nm] = (cli_flag){NULL, FLAG_BOOL, NULL, NULL, NULL};
    int rc = cli_parse(cmd, usage, all, argc, argv, 2, NULL, help);
    free(all);
    if (rc || *help) return rc;
    return compile_model(cmd, &a, false, cm, m);
}
