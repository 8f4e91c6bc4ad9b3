/* test_gpu_train.c -- the built-in models trained on a GPU against the same
 * training on the CPU: the MLP (SGD with momentum, 2 micro-batches
 * accumulated), LeNet+BN (Adam) and a small GPT (AdamW, both with eps 1e-4:
 * see there), 10 runs each from
 * the same weights on the same data; every parameter and buffer within
 * 1e-4 relative of the CPU's, the loss anchor (SUM) and the last run's
 * stats summary of every tensor (watch "*") the same, and summarised at
 * least 8 tensors a launch on the device. The device is TS_TEST_DEVICE ("cuda" unless set; "cpu"
 * checks the test itself). No such device: exits 77 saying why.
 */
/* labels: gpu */
#include "check.h"
#include "model_pair.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RUNS 10

#define MAX_WATCHED 4096
typedef struct watched {
    int n;
    char *name[MAX_WATCHED];
    ts_stats stats[MAX_WATCHED];
} watched;

/* Trains copy k of the pair RUNS times on `device`; the loss anchor's
 * last value in *loss and the last run's summary of every tensor (watched
 * "*") in *w. */
static ts_status train(const model_pair *p, int k, const char *device, ts_optimizer opt, int accum, int runs, double *loss, watched *wd) {
    ts_options *o = ts_options_new();
    ts_model *m = NULL;
    ts_status st = o ? TS_OK : TS_ERR_OUT_OF_MEMORY;
    if (!st) st = ts_options_set_device(o, device);
    if (!st) st = ts_options_set_gradient_accumulation(o, accum);
    if (!st) st = ts_options_anchor(o, "l", ts_tensor_name(p->loss[k]), TS_OUTPUT_SUM, 0);
    if (!st) st = ts_options_watch(o, "*", TS_WATCH_STATS, 1);
    if (!st) st = ts_model_training(&m, p->g[k], p->loss[k], o, opt);
    int64_t launches = ts_counter_get("SummaryLaunches"), tensors = ts_counter_get("SummaryTensors"), shared = ts_counter_get("SummariesShared");
    for (int r = 0; !st && r < runs; r++) st = ts_model_run(m, p->in_names, p->in, 2);
    launches = ts_counter_get("SummaryLaunches") - launches, tensors = ts_counter_get("SummaryTensors") - tensors;
    shared = ts_counter_get("SummariesShared") - shared;
    /* a device summarises its watched tensors together, not a launch each,
     * and memory two watches name (a view and its input, a gradient and
     * its Accum___) once: their summaries, compared below, the CPU's */
    if (!st && strcmp(device, "cpu"))
        CHECK(tensors >= runs && launches * 8 <= tensors && shared >= runs,
              "%s on %s: %lld tensors summarised in %lld launches over %d runs, %lld more read once for two watches", p->name, device,
              (long long)tensors, (long long)launches, runs, (long long)shared);
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

/* Copy 0 of the pair on the CPU, copy 1 on `device`, from the same
 * weights, `runs` runs each. */
static void compare(const model_pair *p, ts_optimizer opt, int accum, int runs, const char *device) {
    double l0 = NAN, l1 = NAN;
    static watched w0, w1;
    w0.n = w1.n = 0;
    CHECK_OK(train(p, 0, "cpu", opt, accum, runs, &l0, &w0), "%s: %d runs on the CPU", p->name, runs);
    ts_status st = train(p, 1, device, opt, accum, runs, &l1, &w1);
    CHECK_OK(st, "%s: %d runs on %s", p->name, runs, device);
    if (!st) {
        char worst[256] = "";
        double e = pair_weights_error(p, worst, sizeof worst);
        CHECK(e <= 1e-4, "%s: weights after %d runs on %s within 1e-4 of the CPU's (worst %s: %.3g)", p->name, runs, device, worst, e);
        CHECK(fabs(l0 - l1) <= 1e-4 * (fabs(l0) + 1e-3), "%s: loss anchor %.7g on the CPU, %.7g on %s", p->name, l0, l1, device);
        compare_watched(p->name, &w0, &w1);
    }
    watched_free(&w0);
    watched_free(&w1);
}

int main(void) {
    const char *device = pair_device("test_gpu_train");
    if (!device) return 77;
    model_pair p;
    /* MLP, SGD with momentum, 2 micro-batches accumulated */
    CHECK_OK(pair_mlp(&p, 32, 64, 12345), "mlp built twice");
    p.name = "mlp b32";
    compare(&p, ts_sgd(0.05f, 0.9f, 1e-4f), 2, RUNS, device);
    pair_free(&p);
    /* the same at batch 4096: its layers' outputs too large for the memory
     * plan to keep them for a joint summary (over 4 MiB), so that memory
     * is reused within the pass, each summary taken before. One run: its
     * 4096-long sums differ in rounding between devices, which ten steps
     * of momentum grow past the summaries' tolerance. */
    CHECK_OK(pair_mlp(&p, 4096, 8192, 12348), "wide mlp built twice");
    p.name = "mlp b4096";
    compare(&p, ts_sgd(0.05f, 0.9f, 1e-4f), 2, 1, device);
    pair_free(&p);
    /* LeNet+BN, Adam (eps: see the GPT's) */
    CHECK_OK(pair_cnn(&p, 16, 16, 12346), "cnn built twice");
    p.name = "cnn b16";
    ts_optimizer adam = ts_adam(1e-3f);
    adam.eps = 1e-4f;
    compare(&p, adam, 1, RUNS, device);
    pair_free(&p);
    /* a small GPT, AdamW. Adam's update is g / (sqrt(v) + eps): a gradient
     * that is zero in exact arithmetic (the keys' bias, which softmax
     * cancels) is rounding noise of either sign on each device, and eps
     * 1e-8 turns that noise into full steps of +-lr. A larger eps keeps the
     * same arithmetic and lets the comparison see real differences; the
     * optimizers themselves are compared element by element in
     * test_backend_ops. */
    CHECK_OK(pair_gpt(&p, 12347), "gpt built twice");
    p.name = "gpt 2x32";
    ts_optimizer adamw = ts_adamw(3e-3f, 0.1f);
    adamw.eps = 1e-4f;
    compare(&p, adamw, 1, RUNS, device);
    pair_free(&p);
    return check_summary("test_gpu_train");
}
