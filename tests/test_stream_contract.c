/* test_stream_contract.c -- the device contract's streams (backend.h): a
 * model's device handle is made once, with its stream, and every call the
 * layers above make through the backend's table passes that stream and
 * nothing else (no NULL, no thread pool in its place), so that a GPU which
 * honours it runs the model's work in order on the model's stream.
 *
 * "cpu-staged" makes real streams and checks every stream it is given
 * (backend/cpu/staged_stream.c); the models here go through every path
 * that calls the table: training with gradient accumulation, recorded
 * and replayed runs and runs launched call by call, watches reduced on
 * the device, anchors, outfeeds streamed while the run goes, print ops,
 * numeric checks and their report, loss scaling at f16, bf16, the hold
 * and its rerun, an inference model, parameters read and written between
 * runs, a recompile. Then the checker itself: it catches NULL, a foreign
 * pointer and a destroyed stream. */
#include "check.h"

#include "backend/backend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define B 4
#define IN 6

static float xs[2 * 2 * B * IN]; /* D = 2 steps of A = 2 micro-batches */
static int32_t ys[2 * 2 * B];
static const char *names[2] = {"x", "labels"};

/* The calls given a stream other than their model's since the last
 * look, reported under `what` with each kind of them. */
static void no_misuse(const char *what) {
    char seen[512];
    int n = ts_cpu_staged_stream_misuse(seen, sizeof seen);
    CHECK(n == 0, "%s: every call passed its model's stream (%d did not: %s)", what, n, seen);
}

typedef struct net {
    ts_graph *g;
    ts_tensor *loss, *logits;
} net;

static void build(net *n, bool print) {
    n->g = ts_graph_new(5);
    ts_tensor *x = ts_input(n->g, "x", TS_F32, 2, (int64_t[]){B, IN});
    ts_tensor *y = ts_input(n->g, "labels", TS_I32, 1, (int64_t[]){B});
    ts_tensor *h = ts_relu(n->g, ts_linear(n->g, x, 8, "fc1"));
    if (print) h = ts_print(n->g, h, "hidden");
    n->logits = ts_linear(n->g, h, 3, "fc2");
    n->loss = ts_cross_entropy(n->g, n->logits, y);
    ts_tensor_set_name(n->loss, "loss");
}

/* D x A micro-batches of a training model on cpu-staged with options o
 * (freed), `runs` times, its parameters read and written, then a
 * recompile and one more run; false when something failed. */
static bool train(const char *what, ts_options *o, bool print, int runs, int D, int A) {
    net n;
    build(&n, print);
    ts_model *m = NULL;
    ts_status st = ts_options_set_device(o, "cpu-staged");
    if (!st) st = ts_options_set_device_iterations(o, D);
    if (!st) st = ts_options_set_gradient_accumulation(o, A);
    if (!st) st = ts_model_training(&m, n.g, n.loss, o, ts_adam(0.01f));
    ts_array in[2] = {ts_array_f32(xs, 2, (int64_t[]){(int64_t)D * A * B, IN}), ts_array_i32(ys, 1, (int64_t[]){(int64_t)D * A * B})};
    for (int r = 0; !st && r < runs; r++) st = ts_model_run(m, names, in, 2);
    ts_array w;
    if (!st) st = ts_tensor_info(ts_graph_find(n.g, "fc1.weight"), &w); /* the parameters back from the device */
    if (!st) st = ts_param_set(ts_graph_find(n.g, "fc2.bias"), &(ts_array){.dtype = TS_F32, .ndim = 1, .shape = {3}, .data = (float[]){0.1f, 0, -0.1f}});
    if (!st) st = ts_model_anchor(m, "h", "fc1/MatMul:0", TS_OUTPUT_FINAL, 0); /* a recompile: the state fetched and sent again */
    if (!st) st = ts_model_run(m, names, in, 2);
    CHECK(!st, "%s: the runs: %s", what, st ? ts_last_error() : "ok");
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(n.g);
    no_misuse(what);
    return !st;
}

static int drained;
static void sink(void *user, const ts_outfeed_record *rec) {
    (void)user, (void)rec;
    drained++;
}

int main(void) {
    for (int i = 0; i < (int)(sizeof xs / sizeof xs[0]); i++) xs[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;
    for (int i = 0; i < (int)(sizeof ys / sizeof ys[0]); i++) ys[i] = i % 3;
    const ts_backend *be = ts_backend_cpu_staged();
    CHECK(be->stream_create && be->stream_destroy, "cpu-staged makes its streams");
    no_misuse("before any model");

    /* watches reduced on the device, anchors captured there, outfeeds
     * streamed (copy_out_then), print lines: recorded, then replayed */
    ts_options *o = ts_options_new();
    ts_options_watch(o, "*", TS_WATCH_STATS | TS_WATCH_HISTOGRAM | TS_WATCH_RANGE, 1);
    ts_options_anchor(o, NULL, "loss", TS_OUTPUT_ALL, 0);
    ts_options_anchor(o, "l_sum", "loss", TS_OUTPUT_SUM, 0);
    ts_outfeed *q = NULL;
    ts_outfeed_new(&q, &(ts_outfeed_config){.name = "grads", .depth = 64});
    ts_outfeed_set_sink(q, sink, NULL);
    ts_options_outfeed_gradients(o, q, 0);
    train("observed, recorded and replayed", o, true, 3, 2, 2);
    ts_outfeed_flush(q);
    CHECK(drained > 0, "the gradients' outfeed got records (%d)", drained);
    ts_outfeed_free(q);

    /* the same launched call by call */
    setenv("TS_CUDA_GRAPHS", "0", 1);
    o = ts_options_new();
    ts_options_watch(o, "*", TS_WATCH_STATS, 1);
    ts_options_anchor(o, NULL, "Relu:0", TS_OUTPUT_EVERY_N, 2);
    train("call by call", o, false, 2, 2, 2);
    unsetenv("TS_CUDA_GRAPHS");

    /* numeric checks after every op, with their scans and summaries */
    o = ts_options_new();
    ts_options_set_check_numerics(o, TS_CHECK_OP);
    train("numeric checks", o, false, 2, 1, 2);

    /* f16 with loss scaling (the overflow scan), bf16 (its roundings and
     * what they lose) */
    o = ts_options_new();
    ts_options_set_precision(o, TS_F16);
    ts_options_set_loss_scaling(o, 1, 65536.0f, 2.0f, 0.5f, 2);
    ts_options_watch(o, "*", TS_WATCH_STATS | TS_WATCH_RANGE, 1);
    train("f16, loss scaling", o, false, 2, 2, 1);
    o = ts_options_new();
    ts_options_set_precision(o, TS_BF16);
    ts_options_set_check_numerics(o, TS_CHECK_OUTPUT);
    train("bf16, checks", o, false, 2, 1, 1);

    /* a numeric check that fails: its report reads the device's tensors */
    {
        net n;
        build(&n, false);
        ts_options *c = ts_options_new();
        ts_options_set_device(c, "cpu-staged");
        ts_options_set_check_numerics(c, TS_CHECK_OUTPUT);
        ts_model *m = NULL;
        ts_status st = ts_model_training(&m, n.g, n.loss, c, ts_sgd(0.1f, 0, 0));
        float bad[B * IN];
        memcpy(bad, xs, sizeof bad);
        bad[3] = NAN;
        ts_array in[2] = {ts_array_f32(bad, 2, (int64_t[]){B, IN}), ts_array_i32(ys, 1, (int64_t[]){B})};
        if (!st) st = ts_model_run(m, names, in, 2);
        CHECK(st == TS_ERR_NUMERICS, "a NaN input stops the run with a report: %s", ts_last_error());
        ts_model_free(m);
        ts_options_free(c);
        ts_graph_free(n.g);
        no_misuse("a failed numeric check");
    }

    /* the hold, its readers and a rerun on the side */
    {
        net n;
        build(&n, false);
        ts_options *c = ts_options_new();
        ts_options_set_device(c, "cpu-staged");
        ts_model *m = NULL;
        ts_status st = ts_model_training(&m, n.g, n.loss, c, ts_sgd(0.1f, 0.9f, 0));
        ts_array in[2] = {ts_array_f32(xs, 2, (int64_t[]){B, IN}), ts_array_i32(ys, 1, (int64_t[]){B})}, a;
        if (!st) st = ts_model_hold(m, 1);
        if (!st) st = ts_model_run(m, names, in, 2);
        if (!st) st = ts_model_held(m, "Relu:0", &a);
        if (!st) st = ts_model_held_before(m, "fc1.weight", &a);
        ts_rerun_result r;
        if (!st) st = ts_model_rerun(m, "x", &in[0], &r);
        CHECK(!st && isfinite(r.loss), "a held run, read and rerun: %s", st ? ts_last_error() : "ok");
        if (!st) st = ts_model_run(m, names, in, 2); /* held again: the copies compared with the last */
        CHECK(!st, "a second held run: %s", st ? ts_last_error() : "ok");
        ts_model_free(m);
        ts_options_free(c);
        ts_graph_free(n.g);
        no_misuse("the hold and its rerun");
    }

    /* an inference model */
    {
        net n;
        build(&n, false);
        ts_options *c = ts_options_new();
        ts_options_set_device(c, "cpu-staged");
        ts_options_set_device_iterations(c, 2);
        ts_options_watch(c, "*", TS_WATCH_STATS, 1);
        ts_model *m = NULL;
        ts_status st = ts_model_inference(&m, n.g, &n.logits, 1, c);
        ts_array in[1] = {ts_array_f32(xs, 2, (int64_t[]){2 * B, IN})}, a;
        for (int r = 0; !st && r < 3; r++) st = ts_model_run(m, names, in, 1);
        if (!st) st = ts_model_anchored(m, ts_tensor_name(n.logits), &a);
        CHECK(!st, "inference runs: %s", st ? ts_last_error() : "ok");
        ts_model_free(m);
        ts_options_free(c);
        ts_graph_free(n.g);
        no_misuse("an inference model");
    }

    /* the checker catches what it must: each wrong stream counted once */
    void *s = NULL;
    CHECK_OK(be->stream_create(&s), "a stream");
    float v[4] = {0};
    be->fill(s, v, 1.0f, 4);
    CHECK(be->synchronize(s) == TS_OK && v[3] == 1.0f, "its own stream: the work done");
    CHECK(ts_cpu_staged_stream_misuse(NULL, 0) == 0, "its own stream is not counted");
    char seen[512];
    be->zero(NULL, v, 4);
    CHECK(ts_cpu_staged_stream_misuse(seen, sizeof seen) == 1 && !strcmp(seen, "zero given NULL"), "NULL is caught: %s", seen);
    CHECK(v[3] == 0.0f, "and the call still done");
    be->accumulate(TS_STREAM_THIS_THREAD, v, v, 4);
    int x = 0;
    be->scale(&x, v, v, 2.0f, 4);
    CHECK(ts_cpu_staged_stream_misuse(seen, sizeof seen) == 2 && strstr(seen, "accumulate given TS_STREAM_THIS_THREAD") &&
              strstr(seen, "scale given a stream it did not make"),
          "the calling thread's name and a foreign pointer are caught: %s", seen);
    be->stream_destroy(s);
    be->fill(s, v, 1.0f, 4);
    CHECK(ts_cpu_staged_stream_misuse(seen, sizeof seen) == 1 && !strcmp(seen, "fill given a stream it did not make"),
          "a destroyed stream is caught: %s", seen);
    return check_summary("test_stream_contract");
}
