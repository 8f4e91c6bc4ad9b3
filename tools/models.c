/* models.c -- the CLI's built-in models, built with the public API. */
#include "cli.h"

#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <strings.h>

/* Wraps t in a print op when asked, so the rest of the model reads the print. */
static ts_tensor *maybe_print(ts_graph *g, ts_tensor *t, const cli_list *prints) {
    if (t && cli_list_matches(prints, ts_tensor_name(t))) return ts_print(g, t, ts_tensor_name(t));
    return t;
}

/* Parameters are created inside their layers: a print op beside each one
 * asked for logs its value every micro-batch. */
static ts_status print_params(ts_graph *g, const cli_list *prints) {
    size_t n = ts_graph_tensor_count(g);
    for (size_t i = 0; prints && prints->n && i < n; i++) {
        ts_tensor *t = ts_graph_tensor_at(g, i);
        ts_array a;
        if (ts_tensor_info(t, &a) == TS_OK && a.data && cli_list_matches(prints, ts_tensor_name(t)) &&
            !ts_print(g, t, ts_tensor_name(t)))
            return ts_graph_status(g);
    }
    return TS_OK;
}

/* The observing-tensors tutorial's MLP: 784-320-100-10, ReLU, LogSoftmax over
 * the class dimension, NLL loss. */
static ts_status build_mlp(long B, uint64_t seed, const cli_list *prints, cli_model *m) {
    ts_graph *g = ts_graph_new(seed);
    if (!g) return TS_ERR_OUT_OF_MEMORY;
    m->g = g;
    m->x = ts_input(g, "x", TS_F32, 4, (int64_t[]){B, 1, 28, 28});
    m->labels = ts_input(g, "labels", TS_I32, 1, (int64_t[]){B});
    ts_tensor *h = maybe_print(g, ts_flatten(g, m->x, 1), prints);
    h = maybe_print(g, ts_linear(g, h, 320, "fc1"), prints);
    h = maybe_print(g, ts_relu(g, h), prints);
    h = maybe_print(g, ts_linear(g, h, 100, "fc2"), prints);
    h = maybe_print(g, ts_relu(g, h), prints);
    h = maybe_print(g, ts_linear(g, h, 10, "fc3"), prints);
    m->logp = maybe_print(g, ts_log_softmax(g, h, 1), prints);
    m->loss = ts_nll_loss(g, m->logp, m->labels);
    ts_status st = ts_graph_status(g);
    if (!st) st = ts_tensor_set_name(m->loss, "loss");
    if (!st) m->loss = maybe_print(g, m->loss, prints);
    if (!st) st = print_params(g, prints);
    return st ? st : ts_graph_status(g);
}

/* LeNet-5 with batch norm: conv 5x5 (pad 2) 1->6, BN, ReLU, max pool 2;
 * conv 5x5 6->16, BN, ReLU, max pool 2; 400-120-84-10 with ReLUs,
 * LogSoftmax, NLL loss. The convolutions have no bias: the batch norm after
 * each cancels it. */
static ts_status build_cnn(long B, uint64_t seed, const cli_list *prints, cli_model *m) {
    ts_graph *g = ts_graph_new(seed);
    if (!g) return TS_ERR_OUT_OF_MEMORY;
    m->g = g;
    m->x = ts_input(g, "x", TS_F32, 4, (int64_t[]){B, 1, 28, 28});
    m->labels = ts_input(g, "labels", TS_I32, 1, (int64_t[]){B});
    const ts_pool2d_params pool2 = {.kernel_h = 2, .kernel_w = 2};
    ts_tensor *h = maybe_print(g, ts_conv2d_layer(g, m->x, 6, 5, 5, &(ts_conv2d_params){.same = 1}, 0, "conv1"), prints);
    h = maybe_print(g, ts_batch_norm_layer(g, h, "bn1"), prints);
    h = maybe_print(g, ts_relu(g, h), prints);
    h = maybe_print(g, ts_max_pool2d(g, h, &pool2), prints);
    h = maybe_print(g, ts_conv2d_layer(g, h, 16, 5, 5, NULL, 0, "conv2"), prints);
    h = maybe_print(g, ts_batch_norm_layer(g, h, "bn2"), prints);
    h = maybe_print(g, ts_relu(g, h), prints);
    h = maybe_print(g, ts_max_pool2d(g, h, &pool2), prints);
    h = maybe_print(g, ts_flatten(g, h, 1), prints);
    h = maybe_print(g, ts_linear(g, h, 120, "fc1"), prints);
    h = maybe_print(g, ts_relu(g, h), prints);
    h = maybe_print(g, ts_linear(g, h, 84, "fc2"), prints);
    h = maybe_print(g, ts_relu(g, h), prints);
    h = maybe_print(g, ts_linear(g, h, 10, "fc3"), prints);
    m->logp = maybe_print(g, ts_log_softmax(g, h, 1), prints);
    m->loss = ts_nll_loss(g, m->logp, m->labels);
    ts_status st = ts_graph_status(g);
    if (!st) st = ts_tensor_set_name(m->loss, "loss");
    if (!st) m->loss = maybe_print(g, m->loss, prints);
    return st ? st : ts_graph_status(g);
}

const char *cli_model_names(void) { return "mlp, cnn"; }

void cli_model_defaults(const char *name, const char **optimizer, double *lr) {
    bool cnn = name && strcmp(name, "cnn") == 0;
    if (optimizer) *optimizer = cnn ? "adam" : "sgd";
    if (lr) *lr = cnn ? 0.001 : 0.01;
}

ts_status cli_model_build(const char *name, long batch, uint64_t seed, const cli_list *prints, cli_model *out) {
    memset(out, 0, sizeof *out);
    if (batch < 1 || batch > 1000000) return TS_ERR_INVALID_ARGUMENT;
    if (strcmp(name, "mlp") == 0) return build_mlp(batch, seed, prints, out);
    if (strcmp(name, "cnn") == 0) return build_cnn(batch, seed, prints, out);
    return TS_ERR_NOT_FOUND;
}

ts_status cli_optimizer(const char *name, double lr, double momentum, double weight_decay, ts_optimizer *out) {
    if (strcasecmp(name, "sgd") == 0) *out = ts_sgd((float)lr, (float)momentum, (float)weight_decay);
    else if (strcasecmp(name, "adam") == 0) *out = ts_adam((float)lr), out->weight_decay = (float)weight_decay;
    else if (strcasecmp(name, "adamw") == 0) *out = ts_adamw((float)lr, (float)weight_decay);
    else return TS_ERR_NOT_FOUND;
    return TS_OK;
}

static bool has_mnist(const char *dir) {
    char path[PATH_MAX + 64];
    struct stat sb;
    snprintf(path, sizeof path, "%s/t10k-images-idx3-ubyte.gz", dir);
    if (stat(path, &sb) == 0) return true;
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", dir);
    return stat(path, &sb) == 0;
}

const char *cli_default_data_dir(char *buf, size_t n) {
    if (has_mnist("data/mnist")) return "data/mnist"; /* a checkout */
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        /* installed: <prefix>/bin/tensorscope -> <prefix>/share/tensorscope/mnist;
         * built: <checkout>/build/tensorscope -> <checkout>/data/mnist */
        static const char *const rel[] = {"../share/tensorscope/mnist", "../data/mnist"};
        for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
            snprintf(buf, n, "%s/%s", exe, rel[i]);
            if (has_mnist(buf)) return buf;
        }
    }
    return "data/mnist"; /* not found: the loader's error names it */
}
