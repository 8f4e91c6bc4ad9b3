/* test_gpu_train.c -- the built-in models trained on a GPU against the same
 * training on the CPU: the MLP (SGD with momentum, 2 micro-batches
 * accumulated), LeNet+BN (Adam) and a small GPT (AdamW, both with eps 1e-4:
 * see there), 10 runs each from
 * the same weights on the same data; every parameter and buffer within
 * 1e-4 relative of the CPU's, the loss anchor (SUM) and the last run's
 * stats summary of every tensor (watch "*") the same. The device is TS_TEST_DEVICE ("cuda" unless set; "cpu"
 * checks the test itself). No such device: exits 77 saying why.
 */
/* labels: gpu */
#include "check.h"
#include "cnn.h"
#include "graph/graph.h"
#include "mlp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RUNS 10

static uint64_t seed_state = 12345;
static float uniform01(void) {
    seed_state = seed_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(seed_state >> 11) * 0x1.0p-53);
}

typedef struct job {
    const char *name;
    ts_graph *g;
    ts_tensor *loss;
    const char *in_names[2];
    ts_array in[2];
    ts_optimizer opt;
    int accum;
} job;

#define MAX_WATCHED 4096
typedef struct watched {
    int n;
    char *name[MAX_WATCHED];
    ts_stats stats[MAX_WATCHED];
} watched;

/* Trains j's graph RUNS times on `device`; the loss anchor's last value in
 * *loss and the last run's summary of every tensor (watched "*") in *w. */
static ts_status train(job *j, const char *device, double *loss, watched *wd) {
    ts_options *o = ts_options_new();
    ts_model *m = NULL;
    ts_status st = o ? TS_OK : TS_ERR_OUT_OF_MEMORY;
    if (!st) st = ts_options_set_device(o, device);
    if (!st) st = ts_options_set_gradient_accumulation(o, j->accum);
    if (!st) st = ts_options_anchor(o, "l", ts_tensor_name(j->loss), TS_OUTPUT_SUM, 0);
    if (!st) st = ts_options_watch(o, "*", TS_WATCH_STATS, 1);
    if (!st) st = ts_model_training(&m, j->g, j->loss, o, j->opt);
    for (int r = 0; !st && r < RUNS; r++) st = ts_model_run(m, j->in_names, j->in, 2);
    ts_array a;
    if (!st) st = ts_model_anchored(m, "l", &a);
    if (!st) *loss = ((const float *)a.data)[0];
    const ts_watch_result *w = NULL;
    size_t nw = 0;
    if (!st) st = ts_model_watch_results(m, &w, &nw);
    for (size_t i = 0; !st && i < nw && wd->n < MAX_WATCHED; i++) {
        wd->name[wd->n] = strdup(w[i].name);
        wd->stats[wd->n++] = w[i].summary->stats;
    }
    ts_model_free(m);
    ts_options_free(o);
    return st;
}

/* max |a - b| / (max |a| + 1e-6) over every parameter and buffer */
static double weights_error(const ts_graph *a, const ts_graph *b, char *worst, size_t n) {
    double err = 0;
    for (size_t i = 0; i < a->n; i++) {
        const ts_tensor *x = a->t[i], *y = b->t[i];
        if ((x->op != TS_OP_PARAM && x->op != TS_OP_BUFFER) || !x->value) continue;
        double d = 0, mag = 0;
        for (int64_t k = 0; k < ts_shape_numel(&x->shape); k++) {
            d = fmax(d, fabs((double)x->value[k] - (double)y->value[k]));
            mag = fmax(mag, fabs((double)x->value[k]));
        }
        if (isnan(d) || d / (mag + 1e-6) > err) {
            err = isnan(d) ? INFINITY : d / (mag + 1e-6);
            snprintf(worst, n, "%s", x->name);
        }
    }
    return err;
}

static bool close_to(double a, double b, double scale) { return (isnan(a) && isnan(b)) || fabs(a - b) <= 1e-4 * (scale + 1e-6); }

/* Every summary of the device's last run against the CPU's: the counts
 * equal, the moments and extremes within 1e-4 of the tensor's magnitude
 * (zeros may differ where a value rounds to zero on one device only). */
static void compare_watched(const char *model, const watched *a, const watched *b) {
    int bad = 0, n = 0;
    const char *worst = "";
    for (int i = 0; i < a->n; i++)
        for (int k = 0; k < b->n; k++) {
            if (strcmp(a->name[i], b->name[k])) continue;
            const ts_stats *x = &a->stats[i], *y = &b->stats[k];
            double scale = fmax(fabs(x->min), fabs(x->max));
            bool ok = x->count == y->count && x->nans == y->nans && x->pos_infs == y->pos_infs && x->neg_infs == y->neg_infs &&
                      close_to(x->mean, y->mean, scale) && close_to(x->std, y->std, scale) && close_to(x->min, y->min, scale) &&
                      close_to(x->max, y->max, scale) && close_to(x->l2, y->l2, x->l2);
            if (!ok && !bad++) worst = a->name[i];
            n++;
        }
    CHECK(n == a->n && n == b->n && bad == 0, "%s: %d summaries of the last run the same on both devices (%d of %d/%d matched; %d differ, first %s)",
          model, n, n, a->n, b->n, bad, worst);
}

static void watched_free(watched *w) {
    for (int i = 0; i < w->n; i++) free(w->name[i]);
}

static void compare(job *cpu, job *dev, const char *device) {
    double l0 = NAN, l1 = NAN;
    static watched w0, w1;
    w0.n = w1.n = 0;
    CHECK_OK(train(cpu, "cpu", &l0, &w0), "%s: %d runs on the CPU", cpu->name, RUNS);
    ts_status st = train(dev, device, &l1, &w1);
    CHECK_OK(st, "%s: %d runs on %s", dev->name, RUNS, device);
    if (st) {
        watched_free(&w0);
        watched_free(&w1);
        return;
    }
    char worst[256] = "";
    double e = weights_error(cpu->g, dev->g, worst, sizeof worst);
    CHECK(e <= 1e-4, "%s: weights after %d runs on %s within 1e-4 of the CPU's (worst %s: %.3g)", cpu->name, RUNS, device, worst, e);
    CHECK(fabs(l0 - l1) <= 1e-4 * (fabs(l0) + 1e-3), "%s: loss anchor %.7g on the CPU, %.7g on %s", cpu->name, l0, l1, device);
    compare_watched(cpu->name, &w0, &w1);
    watched_free(&w0);
    watched_free(&w1);
}

static void fill_inputs(job *a, job *b, int64_t nx, int64_t ny, int32_t classes, bool x_int) {
    float *x = malloc((size_t)nx * sizeof(float));
    int32_t *y = malloc((size_t)ny * sizeof(int32_t));
    for (int64_t i = 0; i < nx; i++) {
        if (x_int) ((int32_t *)(void *)x)[i] = (int32_t)(uniform01() * (float)classes);
        else x[i] = uniform01();
    }
    for (int64_t i = 0; i < ny; i++) y[i] = (int32_t)(uniform01() * (float)classes);
    a->in[0].data = b->in[0].data = x;
    a->in[1].data = b->in[1].data = y;
}

int main(void) {
    const char *device = getenv("TS_TEST_DEVICE");
    if (!device || !*device) device = "cuda";
    ts_options *probe = ts_options_new();
    ts_model *pm = NULL;
    ts_graph *pg = ts_graph_new(1);
    ts_tensor *px = ts_param(pg, "p", 1, (int64_t[]){4});
    ts_status st = ts_options_set_device(probe, device);
    if (!st) st = ts_model_training(&pm, pg, ts_sum(pg, px), probe, ts_sgd(0.1f, 0, 0));
    ts_model_free(pm);
    ts_graph_free(pg);
    ts_options_free(probe);
    if (st == TS_ERR_UNSUPPORTED) {
        printf("test_gpu_train skipped: %s\n", ts_last_error());
        return 77;
    }
    CHECK_OK(st, "a model on %s", device);

    { /* MLP, SGD with momentum, 2 micro-batches accumulated */
        mlp a, b;
        test_mlp_build(&a, 32, 7);
        test_mlp_build(&b, 32, 7);
        job ja = {"mlp b32", a.g, a.loss, {"x", "labels"}, {{0}}, ts_sgd(0.05f, 0.9f, 1e-4f), 2}, jb = ja;
        jb.g = b.g, jb.loss = b.loss;
        ja.in[0] = ts_array_f32(NULL, 4, (int64_t[]){64, 1, 28, 28});
        ja.in[1] = ts_array_i32(NULL, 1, (int64_t[]){64});
        jb.in[0] = ja.in[0], jb.in[1] = ja.in[1];
        fill_inputs(&ja, &jb, 64 * 784, 64, 10, false);
        compare(&ja, &jb, device);
        free(ja.in[0].data), free(ja.in[1].data);
        ts_graph_free(a.g), ts_graph_free(b.g);
    }
    { /* LeNet+BN, Adam */
        cnn a, b;
        test_cnn_build(&a, 16, 11);
        test_cnn_build(&b, 16, 11);
        job ja = {"cnn b16", a.g, a.loss, {"x", "labels"}, {{0}}, ts_adam(1e-3f), 1}, jb = ja;
        ja.opt.eps = jb.opt.eps = 1e-4f; /* see adamw's eps below */
        jb.g = b.g, jb.loss = b.loss;
        ja.in[0] = ts_array_f32(NULL, 4, (int64_t[]){16, 1, 28, 28});
        ja.in[1] = ts_array_i32(NULL, 1, (int64_t[]){16});
        jb.in[0] = ja.in[0], jb.in[1] = ja.in[1];
        fill_inputs(&ja, &jb, 16 * 784, 16, 10, false);
        compare(&ja, &jb, device);
        free(ja.in[0].data), free(ja.in[1].data);
        ts_graph_free(a.g), ts_graph_free(b.g);
    }
    { /* a small GPT, AdamW */
        ts_gpt_config cfg = {.vocab = 65, .block_size = 16, .layers = 2, .heads = 2, .embd = 32, .batch = 4};
        ts_graph *ga = ts_graph_new(3), *gb = ts_graph_new(3);
        ts_gpt a, b;
        CHECK_OK(ts_gpt_build(ga, &cfg, &a), "gpt built");
        CHECK_OK(ts_gpt_build(gb, &cfg, &b), "gpt built twice");
        job ja = {"gpt 2x32", ga, a.loss, {ts_tensor_name(a.tokens), ts_tensor_name(a.targets)}, {{0}}, ts_adamw(3e-3f, 0.1f), 1},
            jb = ja;
        /* Adam's update is g / (sqrt(v) + eps): a gradient that is zero in
         * exact arithmetic (the keys' bias, which softmax cancels) is
         * rounding noise of either sign on each device, and eps 1e-8 turns
         * that noise into full steps of +-lr. A larger eps keeps the same
         * arithmetic and lets the comparison see real differences; the
         * optimizers themselves are compared element by element in
         * test_backend_ops. */
        ja.opt.eps = jb.opt.eps = 1e-4f;
        jb.g = gb, jb.loss = b.loss;
        ja.in[0] = ts_array_i32(NULL, 2, (int64_t[]){4, 16});
        ja.in[1] = ts_array_i32(NULL, 2, (int64_t[]){4, 16});
        jb.in[0] = ja.in[0], jb.in[1] = ja.in[1];
        fill_inputs(&ja, &jb, 64, 64, 65, true);
        compare(&ja, &jb, device);
        free(ja.in[0].data), free(ja.in[1].data);
        ts_graph_free(ga), ts_graph_free(gb);
    }
    return check_summary("test_gpu_train");
}
