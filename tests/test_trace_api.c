/* test_trace_api.c -- ts_options_set_trace (include/tensorscope.h,
 * docs/trace.md) from C:
 * - bad arguments (last step before first, step 0, empty path, a path in a
 *   missing directory) fail at once with a message that says what to do;
 * - with D = 2 and A = 2, steps 2..3 of three runs: the file is written
 *   when step 3 ends (before the third run), holds steps 2 and 3 alone,
 *   two forward, two backward and one accumulate slice per step, and the
 *   optimizer's slice names its step;
 * - an open range is written when the model is freed, with a recompile
 *   slice naming its cause as the Recompilations counter does
 *   (InputShapeChanged: a new micro-batch size) and a counter given to
 *   ts_trace_counter (the memory watcher's hook);
 * - a second model that asks to trace while the first one does fails its
 *   run with TS_ERR_STATE naming the file being written;
 * - the event array of a million events (about 200 MB) is not touched when
 *   tracing starts: the process's RSS grows by less than a quarter of it;
 * - a trace that cannot be written (/dev/full) is the error of the step
 *   that ends its range, or of ts_model_finish for an open range, and
 *   ts_model_finish writes an open range at once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diag/trace.h"
#include "support/check.h"

enum { B = 4, IN = 8, OUT = 3 };

static float xs[16 * B * IN];
static int32_t ys[16 * B];

static ts_model *training(ts_graph **g, int D, int A, const char *path, int64_t first, int64_t last) {
    *g = ts_graph_new(3);
    ts_tensor *x = ts_input(*g, "x", TS_F32, 2, (int64_t[]){B, IN});
    ts_tensor *y = ts_input(*g, "labels", TS_I32, 1, (int64_t[]){B});
    ts_tensor *loss = ts_cross_entropy(*g, ts_relu(*g, ts_linear(*g, x, OUT, "fc")), y);
    ts_tensor_set_name(loss, "loss");
    ts_options *o = ts_options_new();
    ts_options_set_threads(o, 1);
    ts_options_set_device_iterations(o, D);
    ts_options_set_gradient_accumulation(o, A);
    ts_status st = ts_options_set_trace(o, path, first, last);
    ts_model *m = NULL;
    if (!st) st = ts_model_training(&m, *g, loss, o, ts_sgd(0.1f, 0.0f, 0.0f));
    ts_options_free(o);
    return st ? NULL : m;
}

static ts_status run(ts_model *m, int64_t rows) {
    ts_array in[2] = {ts_array_f32(xs, 2, (int64_t[]){rows, IN}), {.dtype = TS_I32, .ndim = 1, .shape = {rows}, .data = ys}};
    const char *names[2] = {"x", "labels"};
    return ts_model_run(m, names, in, 2);
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

static int count(const char *text, const char *what) {
    int n = 0;
    for (const char *p = text; p && (p = strstr(p, what)); p += strlen(what)) n++;
    return n;
}

int main(void) {
    for (size_t i = 0; i < sizeof xs / sizeof *xs; i++) xs[i] = (float)((i * 7919) % 13) / 13.0f - 0.5f;
    for (size_t i = 0; i < sizeof ys / sizeof *ys; i++) ys[i] = (int32_t)(i % OUT);
    char dir[] = "/tmp/ts_trace_api.XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "a temporary directory");
    char path[256], path2[256], path3[256], missing[256];
    snprintf(path, sizeof path, "%s/t.json", dir);
    snprintf(path2, sizeof path2, "%s/open.json", dir);
    snprintf(path3, sizeof path3, "%s/second.json", dir);
    snprintf(missing, sizeof missing, "%s/no/such/dir/t.json", dir);

    /* ---- bad arguments, said at once */
    ts_options *o = ts_options_new();
    CHECK(ts_options_set_trace(o, path, 5, 2) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "comes before first step 5"),
          "last step 2 before first step 5: %s", ts_last_error());
    CHECK(ts_options_set_trace(o, path, 0, 3) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "count from 1"),
          "step 0: %s", ts_last_error());
    CHECK(ts_options_set_trace(o, "", 1, 0) == TS_ERR_INVALID_ARGUMENT, "an empty path: %s", ts_last_error());
    CHECK(ts_options_set_trace(o, missing, 1, 0) != TS_OK && strstr(ts_last_error(), "cannot be written"),
          "a path in a missing directory: %s", ts_last_error());
    CHECK(ts_options_set_trace(NULL, path, 1, 0) == TS_ERR_INVALID_ARGUMENT, "NULL options");
    CHECK(access(path, F_OK) != 0, "checking the path left no file behind");
    ts_options_free(o);

    /* ---- D = 2, A = 2, steps 2..3 of 6 */
    ts_graph *g;
    ts_model *m = training(&g, 2, 2, path, 2, 3);
    CHECK(m != NULL, "a traced training model: %s", ts_last_error());
    CHECK_OK(run(m, 2 * 2 * B), "run 1 (steps 1, 2)");
    CHECK(access(path, F_OK) != 0, "after step 2 the file is not written yet");
    CHECK_OK(run(m, 2 * 2 * B), "run 2 (steps 3, 4)");
    char *t = slurp(path);
    CHECK(t != NULL, "written when step 3 ended");
    CHECK(t && count(t, "\"name\":\"step 2\"") == 1 && count(t, "\"name\":\"step 3\"") == 1 && count(t, "\"cat\":\"step\"") == 2,
          "steps 2 and 3 alone");
    CHECK(t && count(t, "\"name\":\"forward\"") == 4 && count(t, "\"name\":\"backward\"") == 4, "two forwards and two backwards a step");
    CHECK(t && count(t, "\"name\":\"accumulate\"") == 2, "one accumulate slice a step (A = 2)");
    CHECK(t && strstr(t, "\"name\":\"optimizer\"") && strstr(t, "\"args\":{\"step\":3}"), "the optimizer's slice names its step");
    CHECK(t && count(t, "\"name\":\"fc/MatMul:0\"") == 8 && strstr(t, "\"op\":\"MatMul\",\"shape\":[4,3]"),
          "the matmul forward and backward in each micro-batch, with its op type and shape");
    CHECK(t && strstr(t, "\"traceEvents\":[") && strstr(t, "\n]}\n"), "a whole JSON document");
    remove(path);
    CHECK_OK(run(m, 2 * 2 * B), "run 3 (steps 5, 6)");
    CHECK(access(path, F_OK) != 0, "steps past the range write nothing more");
    ts_model_free(m);
    ts_graph_free(g);

    /* ---- an open range: written at free, with a recompile and a counter */
    m = training(&g, 1, 1, path2, 1, 0);
    ts_graph *g2;
    ts_model *m2 = training(&g2, 1, 1, path3, 1, 0);
    CHECK(m && m2, "two traced models");
    CHECK_OK(run(m, B), "step 1 at micro-batch %d", B);
    CHECK(run(m2, B) == TS_ERR_STATE && strstr(ts_last_error(), path2), "a second model cannot trace meanwhile: %s", ts_last_error());
    ts_trace_counter("memory", ts_now_ns(), 42.5);
    CHECK_OK(run(m, 2), "step 2 at micro-batch 2 (a recompile)");
    CHECK(access(path2, F_OK) != 0, "an open range is not written before the model is freed");
    ts_model_free(m);
    t = slurp(path2);
    CHECK(t && count(t, "\"cat\":\"step\"") == 2, "written at free, both steps");
    CHECK(t && strstr(t, "\"cat\":\"recompile\"") && strstr(t, "\"cause\":\"InputShapeChanged\""), "a recompile slice with its cause");
    CHECK(t && strstr(t, "{\"ph\":\"C\",\"name\":\"memory\"") && strstr(t, "\"args\":{\"value\":42.5}"), "the counter");
    CHECK_OK(run(m2, B), "once the first model is freed, the second traces");
    ts_model_free(m2);
    CHECK(access(path3, F_OK) == 0, "the second model's file");
    ts_graph_free(g);
    ts_graph_free(g2);
    remove(path2);
    remove(path3);

    /* ---- a million events' array, untouched until events fill it */
    ts_memory_usage before, after;
    static int owner;
    CHECK_OK(ts_memory_get(&before), "RSS before tracing starts");
    CHECK_OK(ts_trace_start(&owner, path, 1 << 20, -1), "a trace of up to 2^20 events");
    CHECK_OK(ts_memory_get(&after), "RSS after");
    ts_trace_resume(&owner);
    ts_trace_counter("memory", ts_now_ns(), 7.0);
    ts_trace_pause(&owner);
    CHECK_OK(ts_trace_finish(&owner), "written");
    double grew = (double)(after.rss - before.rss) / (1 << 20);
    CHECK(grew < 50, "starting a trace of 2^20 events grew RSS by %.1f MiB (the array: ~200 MiB)", grew);
    t = slurp(path);
    CHECK(t && count(t, "\"ph\":\"C\"") == 1 && count(t, "\"ph\":\"X\"") == 0, "the one event recorded, nothing else");
    remove(path);

    /* ---- a trace that cannot be written is the run's error */
    m = training(&g, 1, 1, "/dev/full", 1, 1);
    CHECK(m != NULL, "a model tracing step 1 into /dev/full");
    ts_status st = m ? run(m, B) : TS_ERR_INTERNAL;
    CHECK(st == TS_ERR_IO && strstr(ts_last_error(), "trace: writing /dev/full failed"), "the step that ends the range fails: %s",
          ts_last_error());
    ts_model_free(m);
    ts_graph_free(g);
    m = training(&g, 1, 1, "/dev/full", 1, 0);
    CHECK(m && run(m, B) == TS_OK, "an open range into /dev/full: the step runs");
    st = m ? ts_model_finish(m) : TS_ERR_INTERNAL;
    CHECK(st == TS_ERR_IO && strstr(ts_last_error(), "/dev/full") && strstr(ts_last_error(), "No space left"),
          "ts_model_finish says it could not be written: %s", ts_last_error());
    CHECK(m && run(m, B) == TS_OK && ts_model_finish(m) == TS_OK, "the model runs on, untraced; a second finish has nothing to write");
    ts_model_free(m);
    ts_graph_free(g);
    m = training(&g, 1, 1, path2, 1, 0);
    CHECK(m && run(m, B) == TS_OK, "an open range, one step");
    CHECK_OK(m ? ts_model_finish(m) : TS_ERR_INTERNAL, "ts_model_finish");
    t = slurp(path2);
    CHECK(t && count(t, "\"cat\":\"step\"") == 1, "writes it at once");
    ts_model_free(m);
    ts_graph_free(g);
    remove(path2);
    rmdir(dir);
    return check_summary("test_trace_api");
}
