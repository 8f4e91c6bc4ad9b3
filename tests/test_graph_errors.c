/* test_graph_errors.c -- bad input while building graphs, setting options,
 * compiling and running: each must be a clear error (the expected status and
 * a message naming the problem), never a crash, and must leave the objects
 * usable. Also: a new batch size recompiles (counted) and still trains; an
 * anchor added after compile recompiles, and a bad one fails without
 * breaking the model. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tensorscope.h"

/* Case-insensitive substring. */
static int contains(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; hay && *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n)
            return 1;
    }
    return 0;
}

/* `st` is `want` and the last error mentions every `words` entry. */
static void expect_err(ts_status st, ts_status want, const char *what, int n_words, ...)
{
    const char *msg = ts_last_error();
    int ok = st == want;
    va_list ap;
    va_start(ap, n_words);
    const char *missing = NULL;
    for (int i = 0; i < n_words; i++) {
        const char *w = va_arg(ap, const char *);
        if (!contains(msg, w) && !missing)
            missing = w;
    }
    va_end(ap);
    CHECK(ok && !missing, "%s: %s \"%s\"%s%s%s", what, ts_status_name(st), msg,
          ok ? "" : " (want ", ok ? "" : ts_status_name(want), ok ? "" : ")");
    if (missing)
        printf("     message lacks '%s'\n", missing);
}

#define ERR(st, want, what, ...) \
    expect_err((st), (want), (what), (int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)), __VA_ARGS__)

/* ------------------------------------------------------------ graph build */

/* A builder that returned NULL: the sticky status and message. */
static void expect_build_err(ts_graph *g, const ts_tensor *t, ts_status want, const char *what,
                             const char *w1, const char *w2)
{
    CHECK(t == NULL, "%s: builder returns NULL", what);
    if (w2)
        ERR(ts_graph_status(g), want, what, w1, w2);
    else
        ERR(ts_graph_status(g), want, what, w1);
}

static void build_errors(void)
{
    printf("== building graphs\n");
    int64_t s23[] = {2, 3}, s45[] = {4, 5}, s2[] = {2};
    ts_graph *g = ts_graph_new(1);
    ts_tensor *a = ts_input(g, "a", TS_F32, 2, s23);
    ts_tensor *b = ts_param(g, "b", 2, s45);
    expect_build_err(g, ts_matmul(g, a, b), TS_ERR_SHAPE, "matmul [2,3]x[4,5]", "inner dimensions",
                     "3 != 4");
    ts_graph_free(g);

    g = ts_graph_new(1);
    a = ts_input(g, "a", TS_F32, 2, s23);
    b = ts_param(g, "b", 2, (int64_t[]){4, 3});
    CHECK(ts_matmul_t(g, a, b) != NULL && ts_graph_status(g) == TS_OK, "matmul_t [2,3]x[4,3]^T builds");
    expect_build_err(g, ts_matmul_t(g, a, ts_param(g, "c", 2, s45)), TS_ERR_SHAPE,
                     "matmul_t [2,3]x[4,5]^T", "inner dimensions", NULL);
    ts_graph_free(g);

    g = ts_graph_new(1);
    a = ts_input(g, "a", TS_F32, 2, s23);
    expect_build_err(g, ts_add(g, a, ts_param(g, "b", 1, s2)), TS_ERR_SHAPE, "add [2,3] + [2]",
                     "does not broadcast", "[2]");
    ts_graph_free(g);

    g = ts_graph_new(1);
    a = ts_input(g, "a", TS_F32, 1, s2);
    expect_build_err(g, ts_mul(g, a, ts_param(g, "b", 2, s23)), TS_ERR_SHAPE, "mul [2] * [2,3]",
                     "does not broadcast", NULL);
    ts_graph_free(g);

    g = ts_graph_new(1);
    a = ts_input(g, "x", TS_F32, 4, (int64_t[]){2, 1, 4, 4});
    expect_build_err(g, ts_linear(g, a, 3, "fc"), TS_ERR_SHAPE, "linear on a 4-D input", "2-D",
                     "flatten");
    ts_graph_free(g);

    g = ts_graph_new(1);
    a = ts_input(g, "x", TS_F32, 2, s23);
    expect_build_err(g, ts_pad(g, a, (int64_t[]){0, -2, 0, -1}, TS_PAD_CONSTANT, 0), TS_ERR_SHAPE,
                     "pad cropping all of a dim", "leave 0 elements", "at least 1 must stay");
    ts_graph_free(g);
    g = ts_graph_new(1);
    a = ts_input(g, "x", TS_F32, 2, s23);
    expect_build_err(g, ts_pad(g, a, (int64_t[]){0, 1, 0, 1}, (ts_pad_mode)7, 0), TS_ERR_SHAPE,
                     "pad in an unknown mode", "mode 7 is no ts_pad_mode", NULL);
    ts_graph_free(g);

    /* NULL input: sticky, reported again by status, by model creation and
     * by compile */
    g = ts_graph_new(1);
    a = ts_input(g, "x", TS_F32, 2, s23);
    ts_tensor *loss = ts_mean(g, ts_linear(g, a, 2, "fc"));
    ts_model *early = NULL;
    ts_options *o = ts_options_new();
    CHECK_OK(ts_model_training(&early, g, loss, o, ts_sgd(0.1f, 0, 0)), "model before the error");
    ts_tensor *bad = ts_relu(g, NULL);
    expect_build_err(g, bad, TS_ERR_INVALID_ARGUMENT, "relu(NULL)", "NULL", NULL);
    char first[512];
    snprintf(first, sizeof first, "%s", ts_last_error());
    CHECK(ts_scale(g, ts_relu(g, a), 2.0f) == NULL, "builders after a sticky error return NULL");
    ts_clear_error();
    ERR(ts_graph_status(g), TS_ERR_INVALID_ARGUMENT, "status again after clear_error", "relu", "NULL");
    CHECK(strstr(ts_last_error(), first) != NULL, "ts_graph_status repeats the first message");
    ts_model *late = NULL;
    ERR(ts_model_training(&late, g, loss, o, ts_sgd(0.1f, 0, 0)), TS_ERR_INVALID_ARGUMENT,
        "model of a graph with a sticky error", "relu", "NULL");
    CHECK(late == NULL, "no model returned");
    ERR(ts_model_compile(early), TS_ERR_INVALID_ARGUMENT, "compile of a graph with a sticky error",
        "compile", "NULL");
    ts_model_free(early);
    ts_graph_free(g);

    /* a tensor from another graph */
    g = ts_graph_new(1);
    ts_graph *g2 = ts_graph_new(2);
    a = ts_input(g, "x", TS_F32, 2, s23);
    ts_tensor *other = ts_input(g2, "y", TS_F32, 2, s23);
    expect_build_err(g, ts_add(g, a, other), TS_ERR_INVALID_ARGUMENT, "add with another graph's tensor",
                     "another graph", NULL);
    ts_graph_free(g2);
    ts_graph_free(g);
    g = ts_graph_new(1);
    g2 = ts_graph_new(2);
    a = ts_input(g, "x", TS_F32, 2, s23);
    other = ts_input(g2, "x", TS_F32, 2, s23);
    ts_model *mm = NULL;
    ERR(ts_model_training(&mm, g, ts_mean(g2, other), o, ts_sgd(0.1f, 0, 0)), TS_ERR_INVALID_ARGUMENT,
        "training model with another graph's loss", "loss", "graph");
    ERR(ts_model_inference(&mm, g, &other, 1, o), TS_ERR_INVALID_ARGUMENT,
        "inference model with another graph's output", "output", "graph");
    ts_graph_free(g2);
    ts_graph_free(g);

    /* names */
    g = ts_graph_new(1);
    a = ts_input(g, "x", TS_F32, 2, s23);
    expect_build_err(g, ts_input(g, "x", TS_F32, 2, s23), TS_ERR_INVALID_ARGUMENT, "duplicate input name",
                     "'x'", "already used");
    ts_graph_free(g);
    g = ts_graph_new(1);
    a = ts_input(g, "x", TS_F32, 2, s23);
    expect_build_err(g, ts_param(g, "x", 2, s23), TS_ERR_INVALID_ARGUMENT, "param named like an input",
                     "'x'", "already used");
    ts_graph_free(g);
    g = ts_graph_new(1);
    a = ts_input(g, "x", TS_F32, 2, s23);
    ts_tensor *r = ts_relu(g, a);
    ERR(ts_tensor_set_name(r, "x"), TS_ERR_INVALID_ARGUMENT, "rename to a used name", "'x'", "already");
    ERR(ts_tensor_set_name(r, "Gradient___x"), TS_ERR_INVALID_ARGUMENT, "rename to a reserved prefix",
        "reserved");
    ERR(ts_tensor_set_name(r, ""), TS_ERR_INVALID_ARGUMENT, "rename to an empty name", "name");
    ERR(ts_tensor_set_name(r, NULL), TS_ERR_INVALID_ARGUMENT, "rename to NULL", "name");
    ERR(ts_tensor_set_name(NULL, "y"), TS_ERR_INVALID_ARGUMENT, "rename a NULL tensor", "NULL");
    CHECK(ts_graph_status(g) == TS_OK && strcmp(ts_tensor_name(r), "Relu:0") == 0,
          "failed renames leave the graph and the name alone");
    CHECK(ts_tensor_set_name(r, "Relu:1") == TS_OK, "rename to the next automatic name");
    ts_tensor *r2 = ts_relu(g, a), *r3 = ts_relu(g, a);
    CHECK(r2 && r3 && strcmp(ts_tensor_name(r2), "Relu:2") == 0 && strcmp(ts_tensor_name(r3), "Relu:3") == 0 &&
              ts_graph_find(g, "Relu:1") == r && ts_graph_find(g, "Relu:2") == r2,
          "an automatic name skips one a rename took (got %s, %s)", r2 ? ts_tensor_name(r2) : "-",
          r3 ? ts_tensor_name(r3) : "-");
    ts_graph_free(g);
    const char *bad_names[] = {"", "a\nb", "quote\"d", NULL};
    for (int i = 0; i < 4; i++) {
        g = ts_graph_new(1);
        char what[64];
        snprintf(what, sizeof what, "input named %s%s%s", bad_names[i] ? "'" : "",
                 bad_names[i] ? (i == 1 ? "a\\nb" : bad_names[i]) : "NULL", bad_names[i] ? "'" : "");
        expect_build_err(g, ts_input(g, bad_names[i], TS_F32, 2, s23), TS_ERR_INVALID_ARGUMENT, what, "name",
                         NULL);
        ts_graph_free(g);
    }
    char longname[402];
    memset(longname, 'n', 401);
    longname[401] = '\0';
    g = ts_graph_new(1);
    expect_build_err(g, ts_param(g, longname, 2, s23), TS_ERR_INVALID_ARGUMENT, "401-character name", "name",
                     "400");
    ts_graph_free(g);
    g = ts_graph_new(1);
    a = ts_input(g, "x", TS_F32, 2, s23);
    expect_build_err(g, ts_linear(g, a, 2, "fc/1"), TS_ERR_INVALID_ARGUMENT, "linear layer named 'fc/1'",
                     "'/'", NULL);
    ts_graph_free(g);
    g = ts_graph_new(1);
    ERR(ts_scope_push(g, "a:b"), TS_ERR_INVALID_ARGUMENT, "scope 'a:b'", "':'");
    ERR(ts_scope_pop(g), TS_ERR_STATE, "scope pop without push", "push");
    ts_graph_free(g);

    /* dims */
    struct {
        int ndim;
        int64_t shape[3];
        const char *w;
    } dims[] = {{2, {0, 3}, "positive"}, {1, {-2}, "positive"}, {-1, {1}, "ndim"}, {9, {1}, "ndim"}};
    for (int i = 0; i < 4; i++) {
        g = ts_graph_new(1);
        int64_t big[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
        const int64_t *sh = dims[i].ndim == 9 ? big : dims[i].shape;
        char what[64];
        snprintf(what, sizeof what, "input with ndim %d, dim %lld", dims[i].ndim, (long long)dims[i].shape[0]);
        expect_build_err(g, ts_input(g, "x", TS_F32, dims[i].ndim, sh), TS_ERR_SHAPE, what, dims[i].w, NULL);
        ts_graph_free(g);
    }
    g = ts_graph_new(1);
    expect_build_err(g, ts_param(g, "w", 2, (int64_t[]){3, 0}), TS_ERR_SHAPE, "param with a zero dim",
                     "positive", NULL);
    ts_graph_free(g);
    g = ts_graph_new(1);
    a = ts_input(g, "x", TS_F32, 2, s23);
    expect_build_err(g, ts_linear(g, a, 0, "fc"), TS_ERR_SHAPE, "linear with 0 out_features", "positive",
                     NULL);
    ts_graph_free(g);
    g = ts_graph_new(1);
    expect_build_err(g, ts_input(g, "x", TS_F64, 2, s23), TS_ERR_INVALID_ARGUMENT, "f64 input", "dtype",
                     NULL);
    ts_graph_free(g);

    /* reshape and flatten */
    g = ts_graph_new(1);
    a = ts_input(g, "x", TS_F32, 2, s23);
    expect_build_err(g, ts_reshape(g, a, 2, (int64_t[]){4, 2}), TS_ERR_SHAPE, "reshape [2,3] -> [4,2]",
                     "6 elements", "[4,2]");
    ts_graph_free(g);
    g = ts_graph_new(1);
    a = ts_input(g, "x", TS_F32, 2, s23);
    expect_build_err(g, ts_reshape(g, a, 2, (int64_t[]){-1, -1}), TS_ERR_SHAPE, "reshape to [-1,-1]",
                     "-1", NULL);
    ts_graph_free(g);
    g = ts_graph_new(1);
    a = ts_input(g, "x", TS_F32, 2, s23);
    expect_build_err(g, ts_reshape(g, a, 2, (int64_t[]){-1, 4}), TS_ERR_SHAPE, "reshape [2,3] -> [-1,4]",
                     "[-1,4]", NULL);
    ts_graph_free(g);
    g = ts_graph_new(1);
    a = ts_input(g, "x", TS_F32, 2, s23);
    expect_build_err(g, ts_flatten(g, a, 2), TS_ERR_SHAPE, "flatten(2) of a 2-D tensor", "start_dim", NULL);
    ts_graph_free(g);

    /* softmax dims */
    int dims_bad[] = {3, -4};
    for (int i = 0; i < 2; i++) {
        g = ts_graph_new(1);
        a = ts_input(g, "x", TS_F32, 3, (int64_t[]){2, 3, 4});
        char what[64];
        snprintf(what, sizeof what, "log_softmax dim %d of a 3-D tensor", dims_bad[i]);
        expect_build_err(g, ts_log_softmax(g, a, dims_bad[i]), TS_ERR_SHAPE, what, "dim", "out of range");
        ts_graph_free(g);
        g = ts_graph_new(1);
        a = ts_input(g, "x", TS_F32, 3, (int64_t[]){2, 3, 4});
        snprintf(what, sizeof what, "softmax dim %d of a 3-D tensor", dims_bad[i]);
        expect_build_err(g, ts_softmax(g, a, dims_bad[i]), TS_ERR_SHAPE, what, "dim", "out of range");
        ts_graph_free(g);
    }

    /* float ops on integer tensors are refused when building, not at run time */
    g = ts_graph_new(1);
    ts_tensor *li = ts_input(g, "labels", TS_I32, 1, (int64_t[]){4});
    expect_build_err(g, ts_relu(g, li), TS_ERR_INVALID_ARGUMENT, "relu of an i32 tensor", "'labels' is i32", "f32");
    ts_graph_free(g);
    g = ts_graph_new(1);
    a = ts_input(g, "x", TS_F32, 1, (int64_t[]){4});
    li = ts_input(g, "labels", TS_I32, 1, (int64_t[]){4});
    expect_build_err(g, ts_mul(g, a, li), TS_ERR_INVALID_ARGUMENT, "mul by an i32 tensor", "input 2 'labels'", "f32");
    ts_graph_free(g);

    /* losses */
    g = ts_graph_new(1);
    a = ts_input(g, "x", TS_F32, 2, (int64_t[]){4, 10});
    ts_tensor *yf = ts_input(g, "labels", TS_F32, 1, (int64_t[]){4});
    expect_build_err(g, ts_nll_loss(g, a, yf), TS_ERR_INVALID_ARGUMENT, "nll_loss with f32 labels", "i32", "labels");
    ts_graph_free(g);
    g = ts_graph_new(1);
    a = ts_input(g, "x", TS_F32, 2, (int64_t[]){4, 10});
    ts_tensor *y3 = ts_input(g, "labels", TS_I32, 1, (int64_t[]){3});
    expect_build_err(g, ts_nll_loss(g, a, y3), TS_ERR_SHAPE, "nll_loss with 4 scores and 3 labels", "[4,10]",
                     "[3]");
    ts_graph_free(g);
    g = ts_graph_new(1);
    a = ts_input(g, "x", TS_F32, 2, (int64_t[]){4, 10});
    y3 = ts_input(g, "labels", TS_I32, 1, (int64_t[]){3});
    expect_build_err(g, ts_cross_entropy(g, a, y3), TS_ERR_SHAPE, "cross_entropy with 4 scores and 3 labels",
                     "[4,10]", "[3]");
    ts_graph_free(g);

    /* non-scalar loss */
    g = ts_graph_new(1);
    a = ts_input(g, "x", TS_F32, 2, s23);
    loss = ts_linear(g, a, 2, "fc");
    ts_model *m = NULL;
    ts_status st = ts_model_training(&m, g, loss, o, ts_sgd(0.1f, 0, 0));
    if (!st)
        st = ts_model_compile(m);
    ERR(st, TS_ERR_SHAPE, "non-scalar loss", "scalar", "fc/Add:0");
    ts_model_free(m);
    ts_graph_free(g);
    ts_options_free(o);
}

/* --------------------------------------------------------------- options */

static void option_errors(void)
{
    printf("== options\n");
    ts_options *o = ts_options_new();
    ERR(ts_options_set_device_iterations(o, 0), TS_ERR_INVALID_ARGUMENT, "D = 0", "device iterations", "0");
    ERR(ts_options_set_gradient_accumulation(o, -1), TS_ERR_INVALID_ARGUMENT, "A = -1", "accumulation", "-1");
    ERR(ts_options_set_output_mode(o, TS_OUTPUT_EVERY_N, 0), TS_ERR_INVALID_ARGUMENT, "every_n period 0",
        "every_n", "period");
    ERR(ts_options_anchor(o, "g", "Gradient___fc.bias", TS_OUTPUT_EVERY_N, 0), TS_ERR_INVALID_ARGUMENT,
        "anchor every_n period 0", "period");
    ERR(ts_options_set_output_mode(o, (ts_output_mode)99, 0), TS_ERR_INVALID_ARGUMENT, "output mode 99",
        "output mode", "99");
    ERR(ts_options_anchor(o, "g", "fc.bias", (ts_output_mode)-3, 0), TS_ERR_INVALID_ARGUMENT,
        "anchor output mode -3", "output mode");
    ts_output_mode mode;
    ERR(ts_output_mode_parse("sometimes", &mode), TS_ERR_INVALID_ARGUMENT, "parse 'sometimes'", "sometimes",
        "every_n");
    CHECK(ts_output_mode_parse("EVERY_N", &mode) == TS_OK && mode == TS_OUTPUT_EVERY_N,
          "parse 'EVERY_N' (case-insensitive)");
    ERR(ts_output_mode_parse("all", NULL), TS_ERR_INVALID_ARGUMENT, "output mode parse into NULL", "NULL");
    ERR(ts_check_numerics_parse("op", NULL), TS_ERR_INVALID_ARGUMENT, "check_numerics parse into NULL", "NULL");
    ERR(ts_options_set_threads(o, -1), TS_ERR_INVALID_ARGUMENT, "threads -1", "threads");
    ERR(ts_options_set_check_numerics(o, (ts_check_numerics)7), TS_ERR_INVALID_ARGUMENT, "check_numerics 7",
        "check_numerics");
    ERR(ts_options_watch(o, "fc*", 0, 1), TS_ERR_INVALID_ARGUMENT, "watch what = 0", "what");
    ERR(ts_options_watch(o, "fc*", TS_WATCH_STATS, 0), TS_ERR_INVALID_ARGUMENT, "watch period 0", "period");
    CHECK_OK(ts_options_anchor(o, "g2", "Gradient___fc2.bias", TS_OUTPUT_ALL, 0), "anchor g2");
    ERR(ts_options_anchor(o, "g2", "fc2.weight", TS_OUTPUT_FINAL, 0), TS_ERR_INVALID_ARGUMENT,
        "duplicate anchor short name", "duplicate", "'g2'");
    ERR(ts_options_anchor(o, "x", NULL, TS_OUTPUT_FINAL, 0), TS_ERR_INVALID_ARGUMENT, "anchor of NULL name",
        "tensor name");
    ERR(ts_options_set_device_iterations(NULL, 2), TS_ERR_INVALID_ARGUMENT, "NULL options", "NULL");
    ts_options_free(o);

    printf("== optimizers\n");
    ts_graph *g = ts_graph_new(1);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){2, 3});
    ts_tensor *loss = ts_mean(g, ts_linear(g, x, 2, "fc"));
    ts_model *m = NULL;
    ERR(ts_model_training(&m, g, loss, NULL, ts_sgd(-0.1f, 0, 0)), TS_ERR_INVALID_ARGUMENT, "SGD lr -0.1",
        "learning rate", "-0.1");
    ERR(ts_model_training(&m, g, loss, NULL, ts_sgd(0.1f, 1.5f, 0)), TS_ERR_INVALID_ARGUMENT,
        "SGD momentum 1.5", "momentum", "1.5");
    ERR(ts_model_training(&m, g, loss, NULL, ts_sgd(0.1f, 0.0f, -1.0f)), TS_ERR_INVALID_ARGUMENT,
        "SGD weight decay -1", "weight decay");
    ts_optimizer adam = ts_adam(1e-3f);
    adam.beta1 = 1.0f;
    ERR(ts_model_training(&m, g, loss, NULL, adam), TS_ERR_INVALID_ARGUMENT, "Adam beta1 = 1", "beta");
    ERR(ts_model_training(&m, g, loss, NULL, ts_adam(-1.0f)), TS_ERR_INVALID_ARGUMENT, "Adam lr -1",
        "learning rate");
    CHECK(m == NULL, "no model from bad optimizers");
    ts_graph_free(g);
}

/* ------------------------------------------------------ compile and run */

enum { B = 4, IN = 6, C = 10 };

typedef struct net {
    ts_graph *g;
    ts_tensor *loss;
} net;

/* x[B,IN] -> fc1 -> relu -> fc2 -> log_softmax -> nll, plus side branches:
 * `side` (printed only, feeds nothing) and `aside` (feeds nothing). */
static net net_build(void)
{
    net n = {ts_graph_new(11), NULL};
    ts_graph *g = n.g;
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){B, IN});
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){B});
    ts_tensor *h = ts_relu(g, ts_linear(g, x, 8, "fc1"));
    ts_tensor *side = ts_scale(g, h, 3.0f);
    ts_tensor_set_name(side, "side");
    ts_print(g, side, "side");
    ts_tensor *aside = ts_scale(g, h, 5.0f);
    ts_tensor_set_name(aside, "aside");
    n.loss = ts_nll_loss(g, ts_log_softmax(g, ts_linear(g, h, C, "fc2"), 1), y);
    ts_tensor_set_name(n.loss, "loss");
    return n;
}

typedef struct batch {
    float x[3 * 2 * B * IN];
    int32_t y[3 * 2 * B];
    ts_array in[2];
} batch;

static const char *const IN_NAMES[2] = {"x", "labels"};

/* `mb` micro-batches of `b` rows each. */
static void batch_make(batch *bt, int b, int mb)
{
    for (int i = 0; i < b * mb * IN; i++)
        bt->x[i] = (float)((i * 37 % 101) - 50) / 50.0f;
    for (int i = 0; i < b * mb; i++)
        bt->y[i] = (i * 7) % C;
    bt->in[0] = ts_array_f32(bt->x, 2, (int64_t[]){b * mb, IN});
    bt->in[1] = ts_array_i32(bt->y, 1, (int64_t[]){b * mb});
}

static ts_model *compile_with(net *n, ts_options *o, ts_status *st)
{
    ts_model *m = NULL;
    *st = ts_model_training(&m, n->g, n->loss, o, ts_sgd(0.1f, 0, 0));
    if (!*st)
        *st = ts_model_compile(m);
    return m;
}

static void compile_errors(void)
{
    printf("== compile\n");
    net n = net_build();
    CHECK_OK(ts_graph_status(n.g), "build the test net");
    ts_status st;

    ts_options *o = ts_options_new();
    ts_options_anchor(o, "b2", "fc2.bais", TS_OUTPUT_FINAL, 0);
    ts_model *m = compile_with(&n, o, &st);
    ERR(st, TS_ERR_NOT_FOUND, "unknown anchor 'fc2.bais'", "fc2.bais", "'fc2.bias'");
    ts_model_free(m);
    ts_options_free(o);

    o = ts_options_new();
    ts_options_anchor(o, "g", "Gradient___side", TS_OUTPUT_FINAL, 0);
    m = compile_with(&n, o, &st);
    ERR(st, TS_ERR_INVALID_ARGUMENT, "gradient of a printed-only side branch", "side",
        "does not reach the loss");
    ts_model_free(m);
    ts_options_free(o);

    /* `aside` is computed by no model but an inference one: in the training
     * model it is not live, and the message must still say why */
    o = ts_options_new();
    ts_options_anchor(o, "g", "Gradient___aside", TS_OUTPUT_FINAL, 0);
    m = compile_with(&n, o, &st);
    ERR(st, TS_ERR_INVALID_ARGUMENT, "gradient of a side branch outside the training model", "aside",
        "does not reach the loss");
    ts_model_free(m);
    ts_options_free(o);

    /* anchored by its name, `aside` is computed though neither the loss nor
     * an output reads it: what is asked for is returned (PopTorch's anchors) */
    o = ts_options_new();
    ts_options_anchor(o, "a", "aside", TS_OUTPUT_FINAL, 0);
    m = compile_with(&n, o, &st);
    CHECK(st == TS_OK && m, "anchor of a side branch the loss does not read: compiled, the branch computed (%s)", ts_last_error());
    ts_model_free(m);
    ts_options_free(o);

    o = ts_options_new();
    ts_options_anchor(o, "g", "Gradient___labels", TS_OUTPUT_FINAL, 0);
    m = compile_with(&n, o, &st);
    /* the labels do reach the loss; what they lack is a float dtype */
    ERR(st, TS_ERR_INVALID_ARGUMENT, "gradient of the i32 labels", "labels", "integer");
    ts_model_free(m);
    ts_options_free(o);

    o = ts_options_new();
    ts_options_set_device_iterations(o, 3);
    ts_options_anchor(o, "g", "Gradient___fc2.bias", TS_OUTPUT_EVERY_N, 2);
    m = compile_with(&n, o, &st);
    ERR(st, TS_ERR_INVALID_ARGUMENT, "every_n 2 with D=3", "every_n", "divide");
    ts_model_free(m);
    ts_options_free(o);

    o = ts_options_new();
    ts_options_set_device_iterations(o, 2);
    ts_options_set_gradient_accumulation(o, 3);
    ts_options_set_output_mode(o, TS_OUTPUT_EVERY_N, 4);
    ts_options_anchor(o, "g", "Gradient___fc2.bias", TS_OUTPUT_DEFAULT, 0);
    m = compile_with(&n, o, &st);
    ERR(st, TS_ERR_INVALID_ARGUMENT, "global every_n 4 with D*A=6", "every_n", "divide");
    ts_model_free(m);
    ts_options_free(o);

    o = ts_options_new();
    CHECK_OK(ts_options_anchor(o, NULL, "zzz*", TS_OUTPUT_FINAL, 0), "anchor glob 'zzz*'");
    m = compile_with(&n, o, &st);
    CHECK(st != TS_OK && contains(ts_last_error(), "zzz*"), "glob matching nothing: %s \"%s\"",
          ts_status_name(st), ts_last_error());
    ts_model_free(m);
    ts_options_free(o);

    o = ts_options_new();
    ts_options_set_gradient_accumulation(o, 2);
    ts_tensor *out = ts_graph_find(n.g, "loss");
    m = NULL;
    ERR(ts_model_inference(&m, n.g, &out, 1, o), TS_ERR_INVALID_ARGUMENT, "inference with A=2",
        "accumulation");
    ts_options_free(o);
    ERR(ts_model_inference(&m, n.g, &out, 0, NULL), TS_ERR_INVALID_ARGUMENT, "inference with 0 outputs",
        "outputs");

    /* state errors */
    o = ts_options_new();
    ts_options_anchor(o, "g2", "Gradient___fc2.bias", TS_OUTPUT_FINAL, 0);
    m = NULL;
    CHECK_OK(ts_model_training(&m, n.g, n.loss, o, ts_sgd(0.1f, 0, 0)), "training model");
    const char *const *names;
    size_t nn;
    ERR(ts_model_tensor_names(m, &names, &nn), TS_ERR_STATE, "tensor names before compile", "compile");
    ts_array a;
    ERR(ts_model_anchored(m, "g2", &a), TS_ERR_NOT_FOUND, "anchored before compile", "compiled");
    CHECK_OK(ts_model_compile(m), "compile");
    ERR(ts_model_anchored(m, "g2", &a), TS_ERR_STATE, "anchored before the first run", "run");
    ERR(ts_model_anchored(m, "gg2", &a), TS_ERR_NOT_FOUND, "unknown short name", "'gg2'", "'g2'");
    ERR(ts_model_anchored(m, NULL, &a), TS_ERR_INVALID_ARGUMENT, "NULL short name", "NULL");

    /* run errors: none may count as a run */
    printf("== run\n");
    batch bt;
    batch_make(&bt, B, 1);
    ts_array in[2] = {bt.in[0], bt.in[1]};
    ERR(ts_model_run(m, IN_NAMES, in, 1), TS_ERR_INVALID_ARGUMENT, "run without labels", "'labels'",
        "missing");
    ts_array xi = ts_array_i32(bt.y, 2, (int64_t[]){B, IN});
    ts_array wrong[2] = {xi, bt.in[1]};
    ERR(ts_model_run(m, IN_NAMES, wrong, 2), TS_ERR_INVALID_ARGUMENT, "x given as i32", "'x'", "f32");
    wrong[0] = ts_array_f32(bt.x, 2, (int64_t[]){B, IN - 1});
    ERR(ts_model_run(m, IN_NAMES, wrong, 2), TS_ERR_SHAPE, "x with 5 features", "'x'", "[4,5]");
    wrong[0] = ts_array_f32(bt.x, 3, (int64_t[]){B, IN, 1});
    ERR(ts_model_run(m, IN_NAMES, wrong, 2), TS_ERR_SHAPE, "x with 3 dims", "'x'");
    wrong[0] = bt.in[0];
    wrong[0].data = NULL;
    ERR(ts_model_run(m, IN_NAMES, wrong, 2), TS_ERR_INVALID_ARGUMENT, "x with no data", "'x'", "no data");
    const char *const bad_names[2] = {"x", "lables"};
    ERR(ts_model_run(m, bad_names, in, 2), TS_ERR_NOT_FOUND, "input 'lables'", "'lables'");
    const char *const twice[2] = {"x", "x"};
    ERR(ts_model_run(m, twice, in, 2), TS_ERR_INVALID_ARGUMENT, "x given twice", "twice");
    ERR(ts_model_run(m, IN_NAMES, in, -1), TS_ERR_INVALID_ARGUMENT, "negative input count", "negative");
    int32_t saved = bt.y[2];
    bt.y[2] = C;
    ERR(ts_model_run(m, IN_NAMES, in, 2), TS_ERR_INVALID_ARGUMENT, "label 10 with 10 classes", "10",
        "[0, 10)");
    bt.y[2] = -1;
    ERR(ts_model_run(m, IN_NAMES, in, 2), TS_ERR_INVALID_ARGUMENT, "label -1", "-1", "class");
    bt.y[2] = saved;
    CHECK(ts_model_runs(m) == 0 && ts_model_steps(m) == 0, "failed runs count no run or step (%lld, %lld)",
          (long long)ts_model_runs(m), (long long)ts_model_steps(m));
    ERR(ts_model_anchored(m, "g2", &a), TS_ERR_STATE, "anchored after only failed runs", "run");
    CHECK_OK(ts_model_run(m, IN_NAMES, in, 2), "a good run after the bad ones");
    CHECK_OK(ts_model_anchored(m, "g2", &a), "anchored after the run");
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(n.g);
}

/* ------------------------------------------------------------ recompiles */

static float param0(ts_graph *g, const char *name)
{
    ts_array a;
    ts_tensor *t = ts_graph_find(g, name);
    return t && ts_tensor_info(t, &a) == TS_OK && a.data ? ((float *)a.data)[0] : -999.0f;
}

static void recompiles(void)
{
    printf("== recompiles\n");
    net n = net_build();
    ts_options *o = ts_options_new();
    ts_options_set_device_iterations(o, 2);
    ts_options_anchor(o, "loss", "loss", TS_OUTPUT_ALL, 0);
    ts_status st;
    ts_model *m = compile_with(&n, o, &st);
    CHECK_OK(st, "compile D=2");
    if (st) {
        ts_model_free(m);
        ts_options_free(o);
        ts_graph_free(n.g);
        return;
    }
    batch bt;
    batch_make(&bt, B, 2);
    CHECK_OK(ts_model_run(m, IN_NAMES, bt.in, 2), "run B=4");
    int64_t r0 = ts_counter_get("Recompilations"), s0 = ts_counter_get("Recompilations.InputShapeChanged");
    float w0 = param0(n.g, "fc1.weight");

    batch_make(&bt, 3, 2); /* B = 3 */
    CHECK_OK(ts_model_run(m, IN_NAMES, bt.in, 2), "run B=3");
    CHECK(ts_counter_get("Recompilations") == r0 + 1 &&
              ts_counter_get("Recompilations.InputShapeChanged") == s0 + 1,
          "B 4 -> 3 recompiles once, cause InputShapeChanged (%lld -> %lld, %lld -> %lld)", (long long)r0,
          (long long)ts_counter_get("Recompilations"), (long long)s0,
          (long long)ts_counter_get("Recompilations.InputShapeChanged"));
    ts_array a;
    st = ts_model_anchored(m, "loss", &a);
    CHECK(st == TS_OK && a.ndim == 1 && a.shape[0] == 2 && ((float *)a.data)[0] > 0.0f,
          "loss anchored after the recompile: [%lld] first %g", st ? -1LL : (long long)a.shape[0],
          st ? 0.0 : (double)((float *)a.data)[0]);
    CHECK(ts_model_steps(m) == 4 && param0(n.g, "fc1.weight") != w0,
          "still trains: 4 steps, fc1.weight[0] %g -> %g", (double)w0, (double)param0(n.g, "fc1.weight"));
    CHECK_OK(ts_model_run(m, IN_NAMES, bt.in, 2), "run B=3 again");
    CHECK(ts_counter_get("Recompilations") == r0 + 1, "the same B does not recompile again");
    batch_make(&bt, 5, 2); /* a batch of 10 rows that is not D*B for the compiled B */
    bt.in[0].shape[0] = 9;
    bt.in[1].shape[0] = 9;
    ERR(ts_model_run(m, IN_NAMES, bt.in, 2), TS_ERR_SHAPE, "9 rows with D=2", "'x'", "micro-batches");

    /* anchors after compile */
    int64_t ac0 = ts_counter_get("Recompilations.AnchorsChanged");
    r0 = ts_counter_get("Recompilations");
    batch_make(&bt, 3, 2);
    CHECK_OK(ts_model_anchor(m, "g1", "Gradient___fc1.bias", TS_OUTPUT_FINAL, 0), "anchor after compile");
    CHECK(ts_counter_get("Recompilations.AnchorsChanged") == ac0 + 1 &&
              ts_counter_get("Recompilations") == r0 + 1,
          "ts_model_anchor recompiles, cause AnchorsChanged");
    ERR(ts_model_anchor(m, "bad", "fc1.bais", TS_OUTPUT_FINAL, 0), TS_ERR_NOT_FOUND,
        "anchor after compile of 'fc1.bais'", "fc1.bais", "'fc1.bias'");
    ERR(ts_model_anchor(m, "g1", "fc1.bias", TS_OUTPUT_FINAL, 0), TS_ERR_INVALID_ARGUMENT,
        "anchor after compile, duplicate short name", "'g1'");
    CHECK_OK(ts_model_run(m, IN_NAMES, bt.in, 2), "run after the failed anchors");
    CHECK_OK(ts_model_anchored(m, "g1", &a), "the good anchor has a value");
    ERR(ts_model_anchored(m, "bad", &a), TS_ERR_NOT_FOUND, "the failed anchor is not there", "'bad'");
    const char *const *list;
    size_t nl;
    CHECK(ts_model_anchor_list(m, &list, &nl) == TS_OK && nl == 2, "anchor list has loss and g1 (%zu)", nl);
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(n.g);
}

/* A batch size the graph cannot take (a fixed reshape) fails the run's
 * recompile; the model must stay as it was: the old batch size still runs,
 * and a later recompile (an anchor) must not inherit the rejected size. */
static void failed_recompile(void)
{
    printf("== failed recompile\n");
    ts_graph *g = ts_graph_new(3);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){B, IN});
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){B});
    ts_tensor *h = ts_reshape(g, ts_relu(g, ts_linear(g, x, 8, "fc1")), 2, (int64_t[]){B, 8});
    ts_tensor *loss = ts_cross_entropy(g, ts_linear(g, h, C, "fc2"), y);
    ts_tensor_set_name(loss, "loss");
    ts_model *m = NULL;
    ts_status st = ts_model_training(&m, g, loss, NULL, ts_sgd(0.1f, 0, 0));
    if (!st)
        st = ts_model_compile(m);
    CHECK_OK(st, "compile a net with a fixed reshape");
    batch bt;
    batch_make(&bt, 3, 1);
    st = ts_model_run(m, IN_NAMES, bt.in, 2);
    ERR(st, TS_ERR_SHAPE, "B=3 through a reshape to [4,8]", "Reshape", "[4,8]");
    batch_make(&bt, B, 1);
    CHECK_OK(ts_model_run(m, IN_NAMES, bt.in, 2), "the declared B=4 still runs");
    CHECK_OK(ts_model_anchor(m, "g", "Gradient___fc1.bias", TS_OUTPUT_FINAL, 0),
             "anchor after the failed recompile (recompiles with B=4)");
    CHECK_OK(ts_model_run(m, IN_NAMES, bt.in, 2), "run after the anchor");
    ts_model_free(m);
    ts_graph_free(g);
}

/* Float ops on an int32 tensor (labels) are refused when building, with a
 * message naming the op, the tensor and the dtype: they compiled and then
 * crashed in ts_model_run. */
typedef enum { I_RELU, I_MUL, I_ADD, I_SCALE, I_LINEAR, I_LOG_SOFTMAX, I_SUM } int_case;
static void int_inputs(void)
{
    printf("== int32 tensors into float ops\n");
    static const char *const names[] = {"ts_relu", "ts_mul", "ts_add", "ts_scale", "ts_linear", "ts_log_softmax", "ts_sum"};
    static const char *const ops[] = {"Relu", "Mul", "Add", "Scale", "MatMul", "LogSoftmax", "Sum"};
    for (int c = I_RELU; c <= I_SUM; c++) {
        ts_graph *g = ts_graph_new(1);
        ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){B, IN});
        ts_tensor *y = ts_input(g, "labels", TS_I32, 2, (int64_t[]){B, IN});
        ts_tensor *t = NULL;
        switch ((int_case)c) {
        case I_RELU: t = ts_relu(g, y); break;
        case I_MUL: t = ts_mul(g, x, y); break;
        case I_ADD: t = ts_add(g, y, x); break;
        case I_SCALE: t = ts_scale(g, y, 2.0f); break;
        case I_LINEAR: t = ts_linear(g, y, 3, "fc"); break;
        case I_LOG_SOFTMAX: t = ts_log_softmax(g, y, 1); break;
        case I_SUM: t = ts_sum(g, y); break;
        }
        char what[64];
        snprintf(what, sizeof what, "%s on an i32 tensor", names[c]);
        expect_build_err(g, t, TS_ERR_INVALID_ARGUMENT, what, ops[c], "'labels' is i32");
        /* the graph stays usable for reporting: compiling it is the sticky error, not a crash */
        ts_model *m = NULL;
        ts_tensor *outs[1] = {x};
        ts_status st = ts_model_inference(&m, g, outs, 1, NULL);
        CHECK(st != TS_OK || ts_model_compile(m) != TS_OK, "%s: the graph does not compile afterwards", names[c]);
        ts_model_free(m);
        ts_graph_free(g);
    }
}

/* Sizes whose element count overflows int64 are refused, when building
 * and when a run brings a huge micro-batch (before any data is read). */
static void huge_sizes(void)
{
    printf("== huge sizes\n");
    ts_graph *g = ts_graph_new(1);
    int64_t big = (int64_t)1 << 32;
    ts_tensor *t = ts_input(g, "x", TS_F32, 3, (int64_t[]){big, big, big});
    expect_build_err(g, t, TS_ERR_SHAPE, "input [2^32,2^32,2^32] (2^96 elements)", "2^34", NULL);
    ts_graph_free(g);

    net n = net_build();
    ts_status st;
    ts_model *m = compile_with(&n, NULL, &st);
    CHECK_OK(st, "compile the test net");
    static float x1[IN];
    static int32_t y1[1];
    for (int shift = 61; shift <= 62; shift++) {
        int64_t rows = (int64_t)1 << shift; /* far more than the data: the run must refuse before reading */
        ts_array in[2] = {ts_array_f32(x1, 2, (int64_t[]){rows, IN}), ts_array_i32(y1, 1, (int64_t[]){rows})};
        char what[64];
        snprintf(what, sizeof what, "a run with B = 2^%d", shift);
        ERR(ts_model_run(m, IN_NAMES, in, 2), TS_ERR_SHAPE, what, "micro-batch");
    }
    CHECK(ts_model_runs(m) == 0, "no run counted");
    ts_model_free(m);
    ts_graph_free(n.g);
}

int main(void)
{
    ts_set_log_level(TS_LOG_OFF); /* the print op in the test net */
    build_errors();
    option_errors();
    compile_errors();
    recompiles();
    failed_recompile();
    huge_sizes();
    int_inputs();
    return check_summary("test_graph_errors");
}
