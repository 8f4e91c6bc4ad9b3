/* models.c -- the CLI's built-in models, built with the public API. */
#include "cli.h"

#include <fnmatch.h>
#include <string.h>
#include <strings.h>

static bool wants_print(const cli_list *prints, const char *name) {
    for (int i = 0; prints && i < prints->n; i++)
        if (strcmp(prints->items[i], name) == 0 || fnmatch(prints->items[i], name, 0) == 0) return true;
    return false;
}

/* Wraps t in a print op when asked, so the rest of the model reads the print. */
static ts_tensor *maybe_print(ts_graph *g, ts_tensor *t, const cli_list *prints) {
    if (t && wants_print(prints, ts_tensor_name(t))) return ts_print(g, t, ts_tensor_name(t));
    return t;
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
