/* test_metrics_file.c -- what the diagnostics hooks do after each run, and
 * the model's memory by class:
 * - TS_METRICS_FILE: every run appends `[MetricsData; step=N]` (eval_run=N
 *   for an inference model) (N = optimizer
 *   steps for training, runs for inference) and the full metrics report;
 *   a path that cannot be written costs a warning, not the run;
 * - log level 5: one line per run `step N loss L batch B ms/step T
 *   samples/s S RSS R MB ...` whose loss is the anchored loss;
 * - ts_model_memory_get / ts_model_memory_line against sizes the test
 *   computes from the graph. */
#include "files.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tensorscope.h"

enum { BATCH = 8, D = 2, RUNS = 3 };

/* ---- captured log lines */

static char trace[16][512];
static int n_trace, n_eval_trace;
static char warnings[4096];

static void capture(void *user, int level, const char *msg) {
    (void)user;
    if (level == TS_LOG_TRACE && strncmp(msg, "step ", 5) == 0 && n_trace < 16)
        snprintf(trace[n_trace++], sizeof trace[0], "%s", msg);
    if (level == TS_LOG_TRACE && strncmp(msg, "eval run ", 9) == 0 && !strstr(msg, " lr ")) n_eval_trace++;
    if (level == TS_LOG_WARN) strncat(warnings, msg, sizeof warnings - strlen(warnings) - 2), strcat(warnings, "\n");
}

/* ---- model and data */

typedef struct mlp {
    ts_graph *g;
    ts_tensor *loss, *logp;
} mlp;

static void build(mlp *n) {
    ts_graph *g = n->g = ts_graph_new(3);
    int64_t xs[] = {BATCH, 1, 28, 28}, ys[] = {BATCH};
    ts_tensor *x = ts_input(g, "x", TS_F32, 4, xs);
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, ys);
    ts_tensor *h = ts_flatten(g, x, 1);
    h = ts_relu(g, ts_linear(g, h, 32, "fc1"));
    n->logp = ts_log_softmax(g, ts_linear(g, h, 10, "fc2"), 1);
    n->loss = ts_nll_loss(g, n->logp, y);
    ts_tensor_set_name(n->loss, "loss");
}

static float xbuf[D * BATCH * 784];
static int32_t ybuf[D * BATCH];

static ts_status run(ts_model *m, int r) {
    for (int i = 0; i < D * BATCH * 784; i++) xbuf[i] = (float)(((i + 13 * r) * 7919) % 1000) / 1000.0f - 0.5f;
    for (int i = 0; i < D * BATCH; i++) ybuf[i] = (i * 3 + r) % 10;
    ts_array in[2] = {ts_array_f32(xbuf, 4, (int64_t[]){D * BATCH, 1, 28, 28}),
                      ts_array_i32(ybuf, 1, (int64_t[]){D * BATCH})};
    const char *names[] = {"x", "labels"};
    return ts_model_run(m, names, in, 2);
}

/* Splits the metrics file into blocks: starts[k] points at block k's header;
 * returns the block count. */
static int blocks(char *text, char **starts, int max) {
    int n = 0;
    for (char *p = text; (p = strstr(p, "[MetricsData; ")) && n < max; p++) starts[n++] = p;
    return n;
}

/* Value of `Counter: name` inside [from, to). -1 if absent. */
static long long counter_in(const char *from, const char *to, const char *name) {
    char key[128];
    snprintf(key, sizeof key, "Counter: %s\n  Value: ", name);
    const char *p = strstr(from, key);
    return p && p < to ? atoll(p + strlen(key)) : -1;
}

static int contains_in(const char *from, const char *to, const char *what) {
    const char *p = strstr(from, what);
    return p && p < to;
}

static void test_metrics_file(const char *dir) {
    char path[256];
    snprintf(path, sizeof path, "%s/metrics.txt", dir);
    setenv("TS_METRICS_FILE", path, 1);
    ts_metrics_reset();
    mlp n;
    build(&n);
    ts_options *o = ts_options_new();
    ts_options_set_device_iterations(o, D);
    ts_model *m = NULL;
    CHECK_OK(ts_model_training(&m, n.g, n.loss, o, ts_sgd(0.05f, 0.9f, 0.0f)), "training model (D=%d, micro-batch %d)", D, BATCH);
    ts_set_log_level(TS_LOG_TRACE);
    n_trace = 0;
    float losses[RUNS] = {0};
    for (int r = 0; r < RUNS; r++) {
        CHECK_OK(run(m, r), "run %d", r + 1);
        ts_array l;
        if (ts_model_anchored(m, "loss", &l) == TS_OK) losses[r] = *(float *)l.data;
    }
    ts_set_log_level(TS_LOG_INFO);

    char *text = test_read_file(path, NULL);
    CHECK(text != NULL, "TS_METRICS_FILE %s exists after %d runs", path, RUNS);
    char *start[8] = {0};
    int nb = text ? blocks(text, start, 8) : 0;
    CHECK(nb == RUNS, "%d [MetricsData; step=N] blocks (want %d)", nb, RUNS);
    long long prev = 0;
    for (int k = 0; k < nb && k < RUNS; k++) {
        const char *end = k + 1 < nb ? start[k + 1] : text + strlen(text);
        long long step = atoll(start[k] + strlen("[MetricsData; step="));
        CHECK(step == (long long)(k + 1) * D && step > prev, "block %d: step=%lld (D=%d steps per run, increasing)", k + 1, step, D);
        prev = step;
        CHECK(contains_in(start[k], end, "]\nMetric: ") && contains_in(start[k], end, "Metric: ExecuteTime\n") &&
                  contains_in(start[k], end, "Metric: CompileTime\n") && contains_in(start[k], end, "Counter: Runs\n"),
              "block %d: the report follows the header with ExecuteTime, CompileTime and Runs", k + 1);
        long long runs = counter_in(start[k], end, "Runs");
        CHECK(runs == k + 1, "block %d: Counter Runs = %lld, the runs so far", k + 1, runs);
        CHECK(contains_in(start[k], end, "  TotalSamples: ") && contains_in(start[k], end, "  Percentiles: "),
              "block %d: metrics with TotalSamples and Percentiles", k + 1);
    }
    free(text);

    /* the trace line of each run at log level 5 */
    CHECK(n_trace == RUNS, "%d trace lines at log level 5 (want %d)", n_trace, RUNS);
    for (int r = 0; r < n_trace && r < RUNS; r++) {
        long long step = -1, batch = -1;
        char loss[64] = "";
        double ms = -1, sps = -1, rss = -1;
        double lr = -1;
        int got = sscanf(trace[r], "step %lld loss %63s lr %lf batch %lld ms/step %lf samples/s %lf RSS %lf MB", &step, loss, &lr, &batch,
                         &ms, &sps, &rss);
        float l = strtof(loss, NULL);
        CHECK(got == 7 && step == (long long)(r + 1) * D && batch == BATCH && ms > 0 && sps > 0 && rss > 1 && lr > 0,
              "trace %d: '%s'", r + 1, trace[r]);
        CHECK(l == losses[r] && l > 0, "trace %d: loss %s equals the anchored loss %.9g", r + 1, loss, (double)losses[r]);
    }

    /* an inference model: step = runs */
    ts_model *inf = NULL;
    CHECK_OK(ts_model_inference(&inf, n.g, &n.logp, 1, o), "inference model");
    ts_set_log_level(TS_LOG_TRACE);
    CHECK_OK(run(inf, 0), "inference run 1");
    CHECK_OK(run(inf, 1), "inference run 2");
    ts_set_log_level(TS_LOG_INFO);
    text = test_read_file(path, NULL);
    nb = text ? blocks(text, start, 8) : 0;
    CHECK(nb == RUNS + 2 && strncmp(start[nb - 2], "[MetricsData; eval_run=1]\n", 26) == 0 &&
              strncmp(start[nb - 1], "[MetricsData; eval_run=2]\n", 26) == 0,
          "inference appends blocks labelled eval_run = runs (1, 2), not steps");
    CHECK(n_eval_trace == 2 && n_trace == RUNS, "its trace lines say 'eval run N' (%d), without a learning rate", n_eval_trace);
    free(text);
    ts_model_free(inf);

    /* an unwritable path: the run's error, at once, naming the variable and path */
    setenv("TS_METRICS_FILE", "/nonexistent-dir/metrics.txt", 1);
    int64_t runs_before = ts_model_runs(m);
    ts_status st = run(m, 9);
    CHECK(st == TS_ERR_IO && strstr(ts_last_error(), "TS_METRICS_FILE") &&
              strstr(ts_last_error(), "/nonexistent-dir/metrics.txt"),
          "a run with TS_METRICS_FILE in a missing directory is TS_ERR_IO: %s", ts_last_error());
    CHECK(ts_model_runs(m) == runs_before + 1, "the run itself counts");
    /* a full disk (/dev/full): the write error is reported, not only logged */
    setenv("TS_METRICS_FILE", "/dev/full", 1);
    st = run(m, 9);
    CHECK(st == TS_ERR_IO && strstr(ts_last_error(), "/dev/full"), "TS_METRICS_FILE=/dev/full is TS_ERR_IO: %s",
          ts_last_error());
    unsetenv("TS_METRICS_FILE");

    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(n.g);
    unlink(path);
}

static void test_model_memory(void) {
    mlp n;
    build(&n);
    ts_options *o = ts_options_new();
    ts_options_set_device_iterations(o, D);
    ts_options_anchor(o, "h", "Relu:0", TS_OUTPUT_ALL, 0); /* [D, BATCH, 32] floats */
    ts_model *m = NULL;
    ts_model_memory mm;
    CHECK_OK(ts_model_training(&m, n.g, n.loss, o, ts_adam(1e-3f)), "Adam model");
    ts_status st = ts_model_memory_get(m, &mm);
    CHECK(st == TS_ERR_STATE, "memory before compile: %s (%s)", ts_status_name(st), ts_last_error());
    char line[512];
    ts_model_memory_line(m, line, sizeof line);
    CHECK(strstr(line, "memory: ") == line && strstr(line, "compile"), "line before compile says why: %s", line);
    CHECK_OK(ts_model_compile(m), "compile");
    CHECK_OK(ts_model_memory_get(m, &mm), "ts_model_memory_get");
    int64_t params = 0;
    for (size_t i = 0; i < ts_graph_tensor_count(n.g); i++) {
        ts_array a;
        ts_tensor_info(ts_graph_tensor_at(n.g, i), &a);
        if (a.data) params += ts_array_numel(&a) * 4;
    }
    int64_t want_params = (32 * 784 + 32 + 10 * 32 + 10) * 4;
    CHECK(params == want_params && mm.parameters == params, "parameters %lld bytes (want %lld)", (long long)mm.parameters,
          (long long)want_params);
    CHECK(mm.gradients >= params && mm.gradients < params + 64 * 4, "gradients %lld bytes: one per parameter (+ alignment)",
          (long long)mm.gradients);
    CHECK(mm.optimizer_state >= 2 * params && mm.optimizer_state <= 2 * params + 4 * 4, "Adam state %lld bytes: two moments",
          (long long)mm.optimizer_state);
    /* every forward activation: fc1 MatMul/Add/Relu, fc2 MatMul/Add, LogSoftmax, loss (Flatten of the
     * input x is a view of x's buffer: no bytes of its own) */
    int64_t act_values = (BATCH * 32 * 3 + BATCH * 10 * 3 + 1) * 4;
    CHECK(mm.activations > 0 && mm.activations < mm.activations_without_reuse && mm.activations_without_reuse >= act_values,
          "activations %lld < %lld without reuse (>= %lld of forward values)", (long long)mm.activations,
          (long long)mm.activations_without_reuse, (long long)act_values);
    CHECK(mm.anchors >= (int64_t)D * BATCH * 32 * 4 && mm.anchors <= (int64_t)D * BATCH * 32 * 4 + 64,
          "anchors %lld bytes: Relu:0 for %d micro-batches + the loss", (long long)mm.anchors, D);
    CHECK(mm.process.rss > 1 << 20, "process RSS %lld bytes", (long long)mm.process.rss);
    ts_model_memory_line(m, line, sizeof line);
    CHECK(strncmp(line, "memory: params ", 15) == 0 && strstr(line, " grads ") && strstr(line, " rss ") && strstr(line, " uss "),
          "line: %s", line);
    CHECK(ts_model_memory_get(NULL, &mm) == TS_ERR_INVALID_ARGUMENT, "NULL model: TS_ERR_INVALID_ARGUMENT");
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(n.g);
}

int main(void) {
    ts_set_log_callback(capture, NULL);
    unsetenv("TS_SAVE_GRAPH_FILE");
    char dir[] = "/tmp/ts_metrics_fileXXXXXX";
    CHECK(mkdtemp(dir) != NULL, "temp dir %s", dir);
    test_metrics_file(dir);
    test_model_memory();
    rmdir(dir);
    ts_set_log_callback(NULL, NULL);
    return check_summary("test_metrics_file");
}
