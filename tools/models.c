/* models.c -- the CLI's built-in models, built with the public API. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <strings.h>

/* Wraps t in a print op when asked, so the rest of the model reads the print. */
static ts_tensor *maybe_print(ts_graph *g, ts_tensor *t, const cli_list *prints) {
    if (t && cli_list_matches(prints, ts_tensor_name(t))) return ts_print(g, t, ts_tensor_name(t));
    return t;
}

/* Whether a print op already shows t (t is one, or one reads it). */
static bool printed(const ts_graph *g, const ts_tensor *t) {
    if (strcmp(ts_tensor_op(t), "Print") == 0) return true;
    for (size_t j = 0; j < ts_graph_tensor_count(g); j++) {
        const ts_tensor *u = ts_graph_tensor_at(g, j);
        if (strcmp(ts_tensor_op(u), "Print") == 0 && ts_tensor_input(u, 0) == t) return true;
    }
    return false;
}

/* What the layers above did not wrap (inputs, parameters, a layer's inner
 * outputs such as fc1/MatMul:0): a print op beside each one asked for logs
 * its value every micro-batch. */
static ts_status print_params(ts_graph *g, const cli_list *prints) {
    size_t n = ts_graph_tensor_count(g);
    for (size_t i = 0; prints && prints->n && i < n; i++) {
        ts_tensor *t = ts_graph_tensor_at(g, i);
        if (cli_list_matches(prints, ts_tensor_name(t)) && !printed(g, t) && !ts_print_beside(g, t, ts_tensor_name(t)))
            return ts_graph_status(g);
    }
    return TS_OK;
}

/* The built-in models' common end: fc3 (10 classes), log-softmax over the
 * class dimension, NLL loss named `loss`; prints where asked (parameters too). */
static ts_status classifier_head(ts_graph *g, ts_tensor *h, const cli_list *prints, cli_model *m) {
    h = maybe_print(g, ts_linear(g, h, 10, "fc3"), prints);
    m->logp = maybe_print(g, ts_log_softmax(g, h, 1), prints);
    m->loss = ts_nll_loss(g, m->logp, m->labels);
    ts_status st = ts_graph_status(g);
    if (!st) st = ts_tensor_set_name(m->loss, "loss");
    if (!st) m->loss = maybe_print(g, m->loss, prints);
    if (!st) st = print_params(g, prints);
    return st ? st : ts_graph_status(g);
}

/* A new graph in m with the MNIST inputs "x" [B,1,28,28] and "labels" [B];
 * NULL when out of memory. */
static ts_graph *mnist_graph(long B, uint64_t seed, cli_model *m) {
    ts_graph *g = ts_graph_new(seed);
    if (!g) return NULL;
    m->g = g;
    m->x = ts_input(g, "x", TS_F32, 4, (int64_t[]){B, 1, 28, 28});
    m->labels = ts_input(g, "labels", TS_I32, 1, (int64_t[]){B});
    return g;
}

/* The observing-tensors tutorial's MLP: 784-320-100-10, ReLU, LogSoftmax over
 * the class dimension, NLL loss. */
static ts_status build_mlp(long B, uint64_t seed, const cli_list *prints, cli_model *m) {
    ts_graph *g = mnist_graph(B, seed, m);
    if (!g) return TS_ERR_OUT_OF_MEMORY;
    ts_tensor *h = maybe_print(g, ts_flatten(g, m->x, 1), prints);
    h = maybe_print(g, ts_linear(g, h, 320, "fc1"), prints);
    h = maybe_print(g, ts_relu(g, h), prints);
    h = maybe_print(g, ts_linear(g, h, 100, "fc2"), prints);
    h = maybe_print(g, ts_relu(g, h), prints);
    return classifier_head(g, h, prints, m);
}

/* LeNet-5 with batch norm: conv 5x5 (pad 2) 1->6, BN, ReLU, max pool 2;
 * conv 5x5 6->16, BN, ReLU, max pool 2; 400-120-84-10 with ReLUs,
 * LogSoftmax, NLL loss. The convolutions have no bias: the batch norm after
 * each cancels it. */
static ts_status build_cnn(long B, uint64_t seed, const cli_list *prints, cli_model *m) {
    ts_graph *g = mnist_graph(B, seed, m);
    if (!g) return TS_ERR_OUT_OF_MEMORY;
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
    return classifier_head(g, h, prints, m);
}

/* A model built whole (a file's, the GPT): a print op beside each tensor
 * asked for, logging its value every micro-batch. */
static ts_status print_built(ts_graph *g, ts_tensor *loss, const cli_list *prints) {
    for (size_t i = 0; prints && prints->n && i < ts_graph_tensor_count(g); i++) {
        ts_tensor *t = ts_graph_tensor_at(g, i);
        if (t != loss && cli_list_matches(prints, ts_tensor_name(t))) ts_print_beside(g, t, ts_tensor_name(t));
    }
    if (loss && cli_list_matches(prints, "loss")) ts_print_beside(g, loss, "loss");
    return ts_graph_status(g);
}

const char *const cli_model_list[] = {"mlp", "cnn", "gpt", NULL};
const char *cli_model_names(void) { return "mlp, cnn, gpt"; }

int cli_unknown_model(const char *cmd, const char *name) {
    char close[256];
    ts_closest_words(name, cli_model_list, sizeof cli_model_list / sizeof cli_model_list[0] - 1, close, sizeof close);
    return cli_usage_error(cmd, "unknown model '%s'; did you mean %s? (built-in: %s; or an ONNX file ending in .onnx)", name, close,
                           cli_model_names());
}

cli_defaults cli_model_defaults(const char *name) {
    if (name && strcmp(name, "gpt") == 0) return (cli_defaults){"adamw", "tinyshakespeare", true, 0.002, 0.01, 32, 1000};
    if (name && strcmp(name, "cnn") == 0) return (cli_defaults){"adam", "mnist", false, 0.001, 0, 64, 0};
    return (cli_defaults){"sgd", "mnist", false, 0.01, 0, 64, 0};
}

ts_status cli_optimizer(const char *name, double lr, double momentum, double weight_decay, ts_optimizer *out) {
    if (strcasecmp(name, "sgd") == 0) *out = ts_sgd((float)lr, (float)momentum, (float)weight_decay);
    else if (strcasecmp(name, "adam") == 0) *out = ts_adam((float)lr), out->weight_decay = (float)weight_decay;
    else if (strcasecmp(name, "adamw") == 0) *out = ts_adamw((float)lr, (float)weight_decay);
    else return TS_ERR_NOT_FOUND;
    return TS_OK;
}

ts_status cli_precision(const char *name, ts_dtype *out) {
    if (!name || strcmp(name, "f32") == 0) *out = TS_F32;
    else if (strcmp(name, "bf16") == 0) *out = TS_BF16;
    else if (strcmp(name, "f16") == 0) *out = TS_F16;
    else return TS_ERR_NOT_FOUND;
    return TS_OK;
}

/* A usage problem found here (not by the library): kept in m->error. */
static ts_status fail(cli_model *m, ts_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static ts_status fail(cli_model *m, ts_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->error, sizeof m->error, fmt, ap);
    va_end(ap);
    return st;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

/* NAME:D0xD1x... (or commas) into *in. */
static ts_status parse_input_spec(cli_model *m, const char *spec, char *name, size_t n, ts_onnx_input *in) {
    const char *colon = strrchr(spec, ':');
    if (!colon || colon == spec || (size_t)(colon - spec) >= n)
        return fail(m, TS_ERR_INVALID_ARGUMENT, "--input %s: expected NAME:SHAPE, e.g. x:64x1x28x28", spec);
    memcpy(name, spec, (size_t)(colon - spec));
    name[colon - spec] = '\0';
    in->name = name;
    in->ndim = 0;
    const char *p = colon + 1;
    while (*p) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v <= 0 || in->ndim == TS_MAX_DIMS)
            return fail(m, TS_ERR_INVALID_ARGUMENT, "--input %s: the shape must be up to %d positive sizes joined by x, e.g. x:64x1x28x28",
                            spec, TS_MAX_DIMS);
        in->shape[in->ndim++] = v;
        p = end;
        if (*p == 'x' || *p == ',') p++;
        else if (*p) return fail(m, TS_ERR_INVALID_ARGUMENT, "--input %s: unexpected '%c' in the shape", spec, *p);
    }
    return TS_OK;
}

/* NAME=V0,V1,... (int64, 1-D) or NAME=FILE.npy into *out (owned: free
 * with ts_npy_free, or free for the list) and name. */
static ts_status parse_input_value(cli_model *m, const char *spec, char *name, size_t n, ts_array *out, bool *from_npy) {
    const char *eq = strchr(spec, '=');
    if (!eq || eq == spec || (size_t)(eq - spec) >= n || !eq[1])
        return fail(m, TS_ERR_INVALID_ARGUMENT, "--input-value %s: expected NAME=V0,V1,... or NAME=FILE.npy, e.g. shape=1,-1", spec);
    memcpy(name, spec, (size_t)(eq - spec));
    name[eq - spec] = '\0';
    const char *v = eq + 1;
    *from_npy = ends_with(v, ".npy");
    if (*from_npy) {
        ts_status st = ts_npy_load(v, out);
        return st ? fail(m, st, "--input-value %s: %s", spec, ts_last_error()) : TS_OK;
    }
    int64_t count = 1;
    for (const char *p = v; *p; p++) count += *p == ',';
    int64_t *vals = calloc((size_t)count, sizeof *vals);
    if (!vals) return fail(m, TS_ERR_OUT_OF_MEMORY, "--input-value %s: out of memory", spec);
    const char *p = v;
    for (int64_t i = 0; i < count; i++) {
        char *end;
        errno = 0;
        long long x = strtoll(p, &end, 10);
        if (end == p || errno || (*end && *end != ',')) {
            free(vals);
            return fail(m, TS_ERR_INVALID_ARGUMENT, "--input-value %s: '%s' is not a list of integers joined by commas (or a .npy file)", spec, v);
        }
        vals[i] = x;
        p = *end ? end + 1 : end;
    }
    *out = (ts_array){.dtype = TS_I64, .ndim = 1, .shape = {count}, .data = vals};
    return TS_OK;
}

/* The op type in a tensor name `<scope>/<Op>:<k>`. */
static bool made_by(const ts_tensor *t, const char *op) {
    const char *name = ts_tensor_name(t), *slash = strrchr(name, '/'), *colon = strrchr(name, ':');
    const char *start = slash ? slash + 1 : name;
    size_t n = strlen(op);
    return colon && (size_t)(colon - start) == n && strncmp(start, op, n) == 0;
}

/* An imported model: the graph's first tensor is the file's first input
 * (x), its first non-scalar output the scores, and the loss is added on
 * top of them unless the file computes its own. */
static ts_status open_onnx(const char *path, long batch, const cli_list *prints, const cli_import *imp, cli_model *m) {
    ts_onnx_input in[16] = {{0}};
    char names[16][256];
    int n_in = 0;
    for (int i = 0; imp && imp->inputs && i < imp->inputs->n; i++) {
        if (n_in == 16) return fail(m, TS_ERR_INVALID_ARGUMENT, "--input: at most 16 inputs");
        ts_status st = parse_input_spec(m, imp->inputs->items[i], names[n_in], sizeof names[n_in], &in[n_in]);
        if (st) return st;
        in[n_in].shape[0] = batch; /* the batch is --batch-size */
        n_in++;
    }
    ts_array values[16];
    bool npy[16];
    int n_values = 0;
    ts_status st = TS_OK;
    for (int i = 0; imp && imp->values && i < imp->values->n && !st; i++) {
        char name[256];
        if (n_values == 16) {
            st = fail(m, TS_ERR_INVALID_ARGUMENT, "--input-value: at most 16 values");
            break;
        }
        if ((st = parse_input_value(m, imp->values->items[i], name, sizeof name, &values[n_values], &npy[n_values]))) break;
        ts_array *a = &values[n_values++];
        int k = 0;
        while (k < n_in && strcmp(in[k].name, name) != 0) k++;
        if (k == n_in) { /* an input --input did not shape: the value's shape */
            if (n_in == 16) {
                st = fail(m, TS_ERR_INVALID_ARGUMENT, "--input-value: at most 16 inputs");
                break;
            }
            snprintf(names[k], sizeof names[k], "%s", name);
            in[k] = (ts_onnx_input){.name = names[k], .ndim = a->ndim};
            memcpy(in[k].shape, a->shape, sizeof in[k].shape);
            n_in++;
        }
        in[k].value = a;
    }
    if (!st) st = ts_graph_from_onnx(&m->g, path, in, n_in);
    for (int i = 0; i < n_values; i++) { /* the import keeps copies */
        if (npy[i]) ts_npy_free(&values[i]);
        else free(values[i].data);
    }
    if (st) return st;
    if (n_in == 0) { /* the exported example's batch size becomes --batch-size */
        ts_tensor *x = ts_graph_tensor_at(m->g, 0);
        ts_array info;
        ts_tensor_info(x, &info);
        /* a file without inputs (its outputs constants) has no batch */
        if (x && strcmp(ts_tensor_op(x), "Input") == 0 && info.ndim > 0 && info.shape[0] != batch) {
            snprintf(names[0], sizeof names[0], "%s", ts_tensor_name(x));
            in[0] = (ts_onnx_input){.name = names[0], .ndim = info.ndim};
            memcpy(in[0].shape, info.shape, sizeof in[0].shape);
            in[0].shape[0] = batch;
            ts_graph_free(m->g);
            m->g = NULL;
            if ((st = ts_graph_from_onnx(&m->g, path, in, 1))) return st;
        }
    }
    ts_graph *g = m->g;
    m->x = ts_graph_tensor_at(g, 0);
    const char *lab_name = imp && imp->labels_input ? imp->labels_input : NULL;
    size_t n_out = ts_graph_output_count(g);
    ts_tensor *scores = NULL, *file_loss = NULL;
    for (size_t i = 0; i < n_out; i++) {
        ts_tensor *o = ts_graph_output_at(g, i);
        ts_array info;
        ts_tensor_info(o, &info);
        if (info.ndim == 0 && !file_loss) file_loss = o;
        else if (info.ndim > 0 && !scores) scores = o;
    }
    if (imp && imp->output) {
        scores = ts_graph_find(g, imp->output);
        if (!scores) return fail(m, TS_ERR_NOT_FOUND, "--output %s: %s has no tensor or value of that name (see `tensorscope names --model %s`)",
                                 imp->output, path, path);
    }
    if (lab_name) {
        m->labels = ts_graph_find(g, lab_name);
        if (!m->labels) return fail(m, TS_ERR_NOT_FOUND, "--labels-input %s: %s has no input of that name", lab_name, path);
        if (m->labels == m->x) m->x = ts_graph_tensor_at(g, 1);
        if (!file_loss) return fail(m, TS_ERR_INVALID_ARGUMENT, "--labels-input %s: %s has no scalar (loss) output to train", lab_name, path);
        m->loss = file_loss;
        m->logp = scores;
        m->logits = true;
    } else {
        bool arrays = imp && imp->arrays, given = imp && imp->loss;
        ts_array info = {0};
        if (scores) ts_tensor_info(scores, &info);
        const char *loss = given ? imp->loss : scores && made_by(scores, "LogSoftmax") ? "nll" : "cross_entropy";
        bool mse = strcasecmp(loss, "mse") == 0;
        /* cross entropy also takes [batch, ..., classes] (a language model's [B,T,V]); mse against arrays any rank */
        /* integer outputs (ids, indices, counts) take no loss */
        bool fits = scores && info.dtype == TS_F32 &&
                    (mse && arrays ? info.ndim >= 1 : info.ndim == 2 || (info.ndim > 2 && strcasecmp(loss, "cross_entropy") == 0));
        if (!fits && arrays && !given) { /* no loss: the file's outputs as they are, its scalar one the loss if it has no other */
            m->logp = scores;
            m->loss = scores ? NULL : file_loss;
            /* an input or a constant (a folded Size) is no loss, and keeps the file's name */
            if (m->loss && (strcmp(ts_tensor_op(m->loss), "Input") == 0 || strcmp(ts_tensor_op(m->loss), "Const") == 0)) m->loss = NULL;
            st = ts_graph_status(g);
            if (!st && m->loss) st = ts_tensor_set_name(m->loss, "loss");
            return st ? st : print_built(g, m->loss, prints);
        }
        if (!scores) return fail(m, TS_ERR_INVALID_ARGUMENT, "%s has no non-scalar output to put a loss on", path);
        if (!fits)
            return fail(m, TS_ERR_SHAPE, "%s: the output '%s' is %d-D; --loss %s takes [batch, classes] scores (cross_entropy also [batch, ..., classes]%s)",
                        path, ts_tensor_name(scores), info.ndim, loss, arrays ? ", mse any rank" : "");
        m->logp = scores;
        if (mse) { /* against one-hot targets; with arrays, targets of the output's shape */
            m->onehot = arrays ? 0 : info.shape[1];
            m->labels = ts_input(g, "labels", TS_F32, info.ndim, info.shape);
            ts_tensor *d = ts_sub(g, scores, m->labels);
            m->loss = ts_mean(g, ts_mul(g, d, d));
            m->logits = true;
        } else if (strcasecmp(loss, "nll") == 0 || strcasecmp(loss, "cross_entropy") == 0) {
            m->labels = ts_input(g, "labels", TS_I32, info.ndim - 1, info.shape); /* the scores' shape less the classes */
            bool nll = strcasecmp(loss, "nll") == 0;
            m->loss = nll ? ts_nll_loss(g, scores, m->labels) : ts_cross_entropy(g, scores, m->labels);
            m->logits = !nll;
        } else {
            return fail(m, TS_ERR_INVALID_ARGUMENT, "--loss must be cross_entropy, nll or mse, got '%s'", loss);
        }
    }
    st = ts_graph_status(g);
    if (!st) st = ts_tensor_set_name(m->loss, "loss");
    ts_array xi, si;
    if (!st && m->logp && !ts_tensor_info(m->x, &xi) && !ts_tensor_info(m->logp, &si) && xi.ndim == 2 && si.ndim == 3 &&
        (xi.dtype == TS_I32 || xi.dtype == TS_I64) && xi.shape[1] == si.shape[1]) { /* token ids in, [B,T,V] scores out */
        m->lm = true;
        m->block = xi.shape[1], m->vocab = si.shape[2];
    }
    return st ? st : print_built(g, m->loss, prints);
}

/* The GPT's configuration the flags give, checked (a usage problem in m->error). */
static ts_status gpt_config(long batch, const cli_import *imp, cli_model *m, ts_gpt_config *out) {
    ts_gpt_config c = {.vocab = 65, .block_size = 64, .layers = 2, .heads = 4, .embd = 64, .batch = batch};
    if (imp && imp->vocab) c.vocab = imp->vocab;
    if (imp && imp->layers) c.layers = imp->layers;
    if (imp && imp->heads) c.heads = imp->heads;
    if (imp && imp->embd) c.embd = imp->embd;
    if (imp && imp->block_size) c.block_size = imp->block_size;
    for (int i = 0; imp && imp->inputs && i < imp->inputs->n; i++) { /* the same --input NAME:SHAPE as a file's */
        char name[256];
        ts_onnx_input in;
        ts_status st = parse_input_spec(m, imp->inputs->items[i], name, sizeof name, &in);
        if (st) return st;
        if (strcmp(name, "tokens") != 0 || in.ndim != 2)
            return fail(m, TS_ERR_INVALID_ARGUMENT, "--input %s: the gpt's input is tokens:BxT (B is --batch-size, T the block size)",
                        imp->inputs->items[i]);
        if (imp->block_size && imp->block_size != in.shape[1])
            return fail(m, TS_ERR_INVALID_ARGUMENT, "--input %s and --block-size %ld disagree on T", imp->inputs->items[i], imp->block_size);
        c.block_size = in.shape[1];
    }
    if (c.vocab < 2 || c.vocab > 1 << 24) return fail(m, TS_ERR_INVALID_ARGUMENT, "--vocab must be 2..%d, got %lld", 1 << 24, (long long)c.vocab);
    if (c.layers < 1 || c.layers > 64) return fail(m, TS_ERR_INVALID_ARGUMENT, "--layers must be 1..64, got %lld", (long long)c.layers);
    if (c.heads < 1 || c.embd < 1 || c.embd > 4096 || c.embd % c.heads)
        return fail(m, TS_ERR_INVALID_ARGUMENT, "--embd (%lld) must be 1..4096 and a multiple of --heads (%lld)", (long long)c.embd,
                    (long long)c.heads);
    if (c.block_size < 1 || c.block_size > 4096)
        return fail(m, TS_ERR_INVALID_ARGUMENT, "--block-size must be 1..4096, got %lld", (long long)c.block_size);
    *out = c;
    return TS_OK;
}

/* The character GPT (ts_gpt_build) for a vocabulary of imp->vocab tokens. */
static ts_status build_gpt(long batch, uint64_t seed, const cli_list *prints, const cli_import *imp, cli_model *m) {
    ts_gpt_config c;
    ts_status st = gpt_config(batch, imp, m, &c);
    if (st) return st;
    if (!(m->g = ts_graph_new(seed))) return TS_ERR_OUT_OF_MEMORY;
    ts_gpt gpt;
    st = ts_gpt_build(m->g, &c, &gpt);
    if (st) return st;
    m->x = gpt.tokens, m->labels = gpt.targets, m->logp = gpt.logits, m->loss = gpt.loss;
    m->logits = m->lm = true;
    m->block = c.block_size, m->vocab = c.vocab;
    return print_built(m->g, m->loss, prints);
}

/* A built-in model's inputs are fixed: an --input must give the shape they have. */
static ts_status check_fixed_inputs(const cli_import *imp, cli_model *m) {
    for (int i = 0; imp && imp->inputs && i < imp->inputs->n; i++) {
        char name[256], want[128];
        ts_onnx_input in;
        ts_status st = parse_input_spec(m, imp->inputs->items[i], name, sizeof name, &in);
        if (st) return st;
        ts_array info;
        ts_tensor_info(m->x, &info);
        bool same = strcmp(name, ts_tensor_name(m->x)) == 0 && in.ndim == info.ndim;
        for (int d = 1; same && d < in.ndim; d++) same = in.shape[d] == info.shape[d];
        if (!same)
            return fail(m, TS_ERR_INVALID_ARGUMENT, "--input %s: the model's input is %s %s (dim 0 is --batch-size); leave --input out",
                        imp->inputs->items[i], ts_tensor_name(m->x), ts_array_shape_str(&info, want, sizeof want));
    }
    return TS_OK;
}

int cli_model_check(const char *cmd, const char *name, const cli_import *imp) {
    cli_model m = {0};
    ts_gpt_config c;
    if (strcmp(name, "gpt") == 0 && gpt_config(1, imp, &m, &c)) return cli_usage_error(cmd, "%s", m.error);
    if (strcmp(name, "gpt") != 0 && imp && (imp->layers || imp->heads || imp->embd || imp->block_size || imp->vocab))
        return cli_usage_error(cmd, "--layers, --heads, --embd, --block-size and --vocab size a --model gpt; '%s' has its own", name);
    return CLI_OK;
}

ts_status cli_model_open(const char *name, long batch, uint64_t seed, const cli_list *prints, const cli_import *imp,
                         cli_model *out) {
    memset(out, 0, sizeof *out);
    if (batch < 1 || batch > 1000000) return TS_ERR_INVALID_ARGUMENT;
    ts_status st;
    if (strcmp(name, "mlp") == 0) {
        if (!(st = build_mlp(batch, seed, prints, out))) st = check_fixed_inputs(imp, out);
    } else if (strcmp(name, "cnn") == 0) {
        if (!(st = build_cnn(batch, seed, prints, out))) st = check_fixed_inputs(imp, out);
    } else if (strcmp(name, "gpt") == 0) st = build_gpt(batch, seed, prints, imp, out);
    else if (ends_with(name, ".onnx")) st = open_onnx(name, batch, prints, imp, out);
    else return out->unknown = true, TS_ERR_NOT_FOUND;
    if (st) {
        ts_graph_free(out->g);
        out->g = NULL;
    }
    return st;
}

/* Whether dir holds the data set `set` (mnist: its IDX images; a corpus: input.txt). */
static bool has_data(const char *dir, const char *set) {
    static const char *const mnist[] = {"t10k-images-idx3-ubyte.gz", "train-images-idx3-ubyte.gz", NULL};
    static const char *const corpus[] = {"input.txt", NULL};
    char path[PATH_MAX + 64];
    struct stat sb;
    for (const char *const *f = strcmp(set, "mnist") == 0 ? mnist : corpus; *f; f++) {
        snprintf(path, sizeof path, "%s/%s", dir, *f);
        if (stat(path, &sb) == 0) return true;
    }
    return false;
}

const char *cli_default_data_dir(const char *set, char *buf, size_t n) {
    snprintf(buf, n, "data/%s", set);
    if (has_data(buf, set)) return buf; /* a checkout */
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        /* installed: <prefix>/bin/tensorscope -> <prefix>/share/tensorscope/<set>;
         * built: <checkout>/build/tensorscope -> <checkout>/data/<set> */
        static const char *const rel[] = {"../share/tensorscope", "../data"};
        for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
            snprintf(buf, n, "%s/%s/%s", exe, rel[i], set);
            if (has_data(buf, set)) return buf;
        }
    }
    snprintf(buf, n, "data/%s", set);
    return buf; /* not found: the loader's error names it */
}
