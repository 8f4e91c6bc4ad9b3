/* test_cancel.c -- ts_model_cancel (include/tensorscope.h): a run asked to
 * stop returns TS_ERR_CANCELLED at the next micro-batch and keeps what it
 * computed:
 * - cancelled during micro-batch K of a training run (A = 1): K steps
 *   done, the weights bit for bit those of a model trained on those K
 *   micro-batches alone, the loss anchor's first K rows its losses and
 *   later rows NaN, SUM the sum of the K losses, FINAL NaN, EVERY_N rows
 *   of completed samples kept; the run counts; the next run is whole;
 * - cancelled in the middle of a step (A = 2): the unfinished step leaves
 *   no trace in the weights;
 * - an inference run: the completed batches' outputs kept, others NaN;
 * - a cancel asked between runs has no effect on the next run;
 * - from a signal handler (SIGALRM) during a long run: the run returns
 *   within a second instead of running its 20000 micro-batches (on a
 *   device that records runs, once the launch in flight, of up to 64
 *   steps, is done). */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "support/check.h"

enum { B = 4, IN = 8, OUT = 3 };

static ts_model *current;      /* the model the print op cancels */
static int ticks, cancel_at;   /* print-op lines seen; cancel when ticks reaches it */

static void on_log(void *user, int level, const char *msg) {
    (void)user, (void)level;
    if (strstr(msg, "tick") && !strstr(msg, "tick_gradient") && ++ticks == cancel_at) ts_model_cancel(current);
}

static ts_graph *build(ts_tensor **loss, ts_tensor **logits) {
    ts_graph *g = ts_graph_new(7);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){B, IN});
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){B});
    *logits = ts_print(g, ts_linear(g, x, OUT, "fc"), "tick"); /* one log line per micro-batch's forward */
    *loss = ts_cross_entropy(g, *logits, y);
    ts_tensor_set_name(*loss, "loss");
    return g;
}

static float xs[64 * B * IN];
static int32_t ys[64 * B];

static ts_status run(ts_model *m, int mbs) {
    ts_array in[2] = {ts_array_f32(xs, 2, (int64_t[]){(int64_t)mbs * B, IN}),
                      {.dtype = TS_I32, .ndim = 1, .shape = {(int64_t)mbs * B}, .data = ys}};
    const char *names[2] = {"x", "labels"};
    return ts_model_run(m, names, in, 2);
}

static ts_model *training(ts_graph **g, int D, int A) {
    ts_tensor *loss, *logits;
    *g = build(&loss, &logits);
    ts_options *o = ts_options_new();
    ts_options_set_threads(o, 1);
    ts_options_set_device_iterations(o, D);
    ts_options_set_gradient_accumulation(o, A);
    ts_options_anchor(o, "loss_all", "loss", TS_OUTPUT_ALL, 0);
    ts_options_anchor(o, "loss_sum", "loss", TS_OUTPUT_SUM, 0);
    ts_options_anchor(o, "loss_final", "loss", TS_OUTPUT_FINAL, 0);
    ts_options_anchor(o, "g_every2", "Gradient___fc.bias", TS_OUTPUT_EVERY_N, 2);
    ts_model *m = NULL;
    ts_status st = ts_model_training(&m, *g, loss, o, ts_sgd(0.1f, 0.9f, 0.0f));
    ts_options_free(o);
    return st ? NULL : m;
}

static const float *anchored(ts_model *m, const char *name, int64_t *rows) {
    ts_array a;
    if (ts_model_anchored(m, name, &a) != TS_OK) return NULL;
    *rows = a.ndim >= 1 ? a.shape[0] : 1; /* the sample axis of ALL and EVERY_N */
    return a.data;
}

static int same_weights(ts_graph *a, ts_graph *b) {
    const char *names[] = {"fc.weight", "fc.bias"};
    for (int i = 0; i < 2; i++) {
        ts_array x, y;
        ts_tensor_info(ts_graph_find(a, names[i]), &x);
        ts_tensor_info(ts_graph_find(b, names[i]), &y);
        if (memcmp(x.data, y.data, (size_t)(i ? OUT : OUT * IN) * sizeof(float)) != 0) return 0;
    }
    return 1;
}

static void cancelled_training(void) {
    enum { D = 10, K = 4 };
    ts_graph *g, *ref_g;
    ts_model *m = training(&g, D, 1), *ref = training(&ref_g, K, 1);
    CHECK(m && ref, "training models");
    current = m, ticks = 0, cancel_at = K;
    ts_status st = run(m, D);
    CHECK(st == TS_ERR_CANCELLED, "cancelled during micro-batch %d: %s (%s)", K, ts_status_name(st), ts_last_error());
    CHECK(strstr(ts_last_error(), "after 4 of 10 micro-batches (4 of 10 optimizer steps completed)") != NULL,
          "the message says how far the run got: %s", ts_last_error());
    CHECK(ticks == K, "no micro-batch started after the cancel (%d forwards)", ticks);
    CHECK(ts_model_steps(m) == K && ts_model_runs(m) == 1, "%d steps done, the run counted (steps %lld, runs %lld)", K,
          (long long)ts_model_steps(m), (long long)ts_model_runs(m));
    cancel_at = -1;
    CHECK_OK(run(ref, K), "a model trained on the same %d micro-batches alone", K);
    CHECK(same_weights(g, ref_g), "the weights are bit for bit those of the %d completed steps", K);
    int64_t rows, ref_rows;
    const float *l = anchored(m, "loss_all", &rows), *rl = anchored(ref, "loss_all", &ref_rows);
    int ok = l && rl && rows == D && ref_rows == K;
    for (int i = 0; ok && i < D; i++) ok = i < K ? l[i] == rl[i] : isnan(l[i]);
    CHECK(ok, "ALL anchor: rows 0..%d are the completed losses, rows %d..%d NaN", K - 1, K, D - 1);
    const float *s = anchored(m, "loss_sum", &rows), *f = anchored(m, "loss_final", &rows);
    CHECK(s && f && fabsf(*s - (rl[0] + rl[1] + rl[2] + rl[3])) < 1e-5f && isnan(*f),
          "SUM is the sum over the completed samples (%g), FINAL is NaN (%g)", s ? *s : 0.0, f ? *f : 0.0);
    const float *ge = anchored(m, "g_every2", &rows), *rge = anchored(ref, "g_every2", &ref_rows);
    ok = ge && rge && rows == D / 2;
    for (int r = 0; ok && r < rows; r++)
        for (int j = 0; ok && j < OUT; j++) ok = r < K / 2 ? ge[r * OUT + j] == rge[r * OUT + j] : isnan(ge[r * OUT + j]);
    CHECK(ok, "EVERY_N anchor: rows of completed samples kept, the others NaN");
    CHECK_OK(run(m, D), "the next run of the cancelled model is whole");
    CHECK(ts_model_steps(m) == K + D && ts_model_runs(m) == 2, "its steps count on (%lld)", (long long)ts_model_steps(m));
    l = anchored(m, "loss_all", &rows);
    ok = l != NULL;
    for (int i = 0; ok && i < D; i++) ok = isfinite(l[i]);
    CHECK(ok, "and its anchors hold every sample");
    ts_model_free(m), ts_model_free(ref), ts_graph_free(g), ts_graph_free(ref_g);
}

static void cancelled_mid_step(void) {
    ts_graph *g, *ref_g;
    ts_model *m = training(&g, 5, 2), *ref = training(&ref_g, 1, 2);
    current = m, ticks = 0, cancel_at = 3; /* micro-batch 3 is the first of step 2 */
    ts_status st = run(m, 10);
    CHECK(st == TS_ERR_CANCELLED && ts_model_steps(m) == 1, "A = 2, cancelled in step 2: %s, %lld step done", ts_status_name(st),
          (long long)ts_model_steps(m));
    cancel_at = -1;
    CHECK_OK(run(ref, 2), "reference: one step of two micro-batches");
    CHECK(same_weights(g, ref_g), "the unfinished step left no trace in the weights");
    int64_t rows;
    const float *ge = anchored(m, "g_every2", &rows); /* per micro-batch: 3 completed, rows 0 (sample 1) kept */
    CHECK(ge && isfinite(ge[0]) && isnan(ge[OUT]), "per-micro-batch anchors keep the completed micro-batches of the unfinished step");
    ts_model_free(m), ts_model_free(ref), ts_graph_free(g), ts_graph_free(ref_g);
}

static void cancelled_inference(void) {
    ts_tensor *loss, *logits;
    ts_graph *g = build(&loss, &logits);
    ts_options *o = ts_options_new();
    ts_options_set_threads(o, 1);
    ts_options_set_device_iterations(o, 6);
    ts_model *m = NULL;
    CHECK_OK(ts_model_inference(&m, g, &logits, 1, o), "inference model");
    current = m, ticks = 0, cancel_at = 2;
    ts_status st = run(m, 6);
    CHECK(st == TS_ERR_CANCELLED && strstr(ts_last_error(), "after 2 of 6 batches"), "inference cancelled after 2 of 6 batches: %s",
          ts_last_error());
    ts_array a;
    CHECK_OK(ts_model_anchored(m, ts_tensor_name(logits), &a), "its output is retrievable");
    const float *v = a.data;
    int ok = a.ndim == 3 && a.shape[0] == 6;
    for (int64_t i = 0; ok && i < 6 * B * OUT; i++) ok = i < 2 * B * OUT ? isfinite(v[i]) : isnan(v[i]);
    CHECK(ok, "the completed batches' outputs are kept, the others NaN");
    /* a cancel between runs: the next run clears it */
    cancel_at = -1;
    CHECK_OK(ts_model_cancel(m), "cancel with no run in progress");
    CHECK_OK(run(m, 6), "has no effect on the next run");
    CHECK(ts_model_cancel(NULL) == TS_ERR_INVALID_ARGUMENT, "a NULL model is TS_ERR_INVALID_ARGUMENT");
    ts_model_free(m), ts_graph_free(g), ts_options_free(o);
}

/* ---- from a signal handler, during a long run */

static ts_model *signalled;
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t); /* async-signal-safe */
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static volatile double cancelled_at; /* when the handler asked, 0 before */

/* every 0.2 s: cancels once the run has done some work (a device's run
 * first copies its inputs, which under a sanitizer beside other tests can
 * take a second) */
static void on_alarm(int sig) {
    (void)sig;
    if (cancelled_at == 0 && ts_model_steps(signalled) > 0) {
        cancelled_at = now();
        ts_model_cancel(signalled);
    }
}

static void cancelled_by_signal(void) {
    enum { D = 20000, BB = 32, W = 512 };
    ts_graph *g = ts_graph_new(1);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){BB, 16});
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){BB});
    ts_tensor *h = ts_relu(g, ts_linear(g, x, W, "fc1"));
    ts_tensor *loss = ts_cross_entropy(g, ts_linear(g, ts_relu(g, ts_linear(g, h, W, "fc2")), 10, "fc3"), y);
    ts_options *o = ts_options_new();
    ts_options_set_threads(o, 1);
    ts_options_set_device_iterations(o, D);
    ts_model *m = NULL;
    CHECK_OK(ts_model_training(&m, g, loss, o, ts_sgd(0.01f, 0.0f, 0.0f)), "a model of %d micro-batches per run", D);
    float *xv = calloc((size_t)D * BB * 16, sizeof *xv);
    int32_t *yv = calloc((size_t)D * BB, sizeof *yv);
    ts_array in[2] = {ts_array_f32(xv, 2, (int64_t[]){(int64_t)D * BB, 16}),
                      {.dtype = TS_I32, .ndim = 1, .shape = {(int64_t)D * BB}, .data = yv}};
    const char *names[2] = {"x", "labels"};
    signalled = m;
    struct sigaction sa = {.sa_handler = on_alarm};
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval at = {.it_value = {.tv_usec = 200000}, .it_interval = {.tv_usec = 200000}};
    setitimer(ITIMER_REAL, &at, NULL);
    double t0 = now();
    ts_status st = ts_model_run(m, names, in, 2);
    double t1 = now(), took = t1 - cancelled_at;
    struct itimerval off = {0};
    setitimer(ITIMER_REAL, &off, NULL);
    CHECK(st == TS_ERR_CANCELLED, "SIGALRM once steps are done: the run returns TS_ERR_CANCELLED (%s: %s)", ts_status_name(st), ts_last_error());
    /* a device replaying recorded runs hears it once the launch in flight,
     * of up to 64 steps, is done: those steps' time, plus a generous 10 s
     * for a loaded machine (that it stopped early is the step count's
     * check below: the whole run takes far longer) */
    const char *dev = getenv("TS_DEVICE");
    int64_t done = ts_model_steps(m);
    double allowed = 10.0 + (dev && strcmp(dev, "cpu") && done > 0 ? 64.0 * (t1 - t0) / (double)done : 0.0);
    CHECK(cancelled_at > 0 && took < allowed, "within %.2f s of the signal (%.2f s, %lld of %d steps)", allowed, took, (long long)done, D);
    CHECK(ts_model_steps(m) > 0 && ts_model_steps(m) < D, "it stopped between micro-batches, after some work");
    free(xv), free(yv);
    ts_model_free(m), ts_graph_free(g), ts_options_free(o);
}

int main(void) {
    for (int i = 0; i < (int)(sizeof xs / sizeof xs[0]); i++) xs[i] = (float)((i * 37) % 17) / 17.0f - 0.5f;
    for (int i = 0; i < (int)(sizeof ys / sizeof ys[0]); i++) ys[i] = (i * 7) % OUT;
    ts_set_log_callback(on_log, NULL);
    CHECK(strcmp(ts_status_name(TS_ERR_CANCELLED), "TS_ERR_CANCELLED") == 0, "ts_status_name knows TS_ERR_CANCELLED");
    /* the print op's lines trigger these cancels mid-run: on a device that
     * records runs (exec/replay.c) they come at the run's end, so these runs
     * are launched call by call there */
    setenv("TS_CUDA_GRAPHS", "0", 1);
    cancelled_training();
    cancelled_mid_step();
    cancelled_inference();
    unsetenv("TS_CUDA_GRAPHS"); /* a device's recorded runs: the cancel heard before a launch of 64 steps */
    cancelled_by_signal();
    return check_summary("test_cancel");
}
