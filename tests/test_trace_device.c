/* test_trace_device.c -- the timeline (docs/trace.md) of a model on a
 * device: its kernels on a track of the device's own, "kernels (DEVICE)",
 * one slice per kernel call of each traced step, timed on the device's
 * clock.
 *
 * A training model of D = 2 steps of A = 2 micro-batches a run traces
 * steps 2 and 3: the second step of the first run and the first of the
 * second, so the file is written after a run whose later step is not
 * traced. Checks, per traced step:
 *  - its kernels' slices are the main track's op slices one for one (the
 *    same tensor, pass and micro-batch), and one optimizer slice;
 *  - no kernel of an untraced step is on the track, and none but kernels;
 *  - each slice lies within its run: after the step began on the host and
 *    before the next traced step began;
 *  - cpu-staged (the CPU's kernels, their events the host's clock): each
 *    kernel slice lasts at least its op slice (the events go around the
 *    host's clock reads).
 * The device is TS_TEST_DEVICE ("cpu-staged" unless set;
 * test_trace_device_cuda runs it on a GPU). No such device: exits 77
 * saying why. */
#include "check.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { B = 4, IN = 6, HID = 8, CLS = 3, D = 2, A = 2, RUNS = 3, MAX_SLICES = 512 };

typedef struct slice {
    char name[96], pass[32];
    int tid;
    long long mb; /* micro-batch (the optimizer's: its step); -1: none */
    double ts, dur;
} slice;

/* The JSON string after `key` in line, into out (names here have no escapes). */
static bool str_field(const char *line, const char *key, char *out, size_t n) {
    const char *p = strstr(line, key);
    if (!p) return false;
    p += strlen(key);
    if (*p != '"') return false;
    const char *e = strchr(++p, '"');
    if (!e || (size_t)(e - p) >= n) return false;
    memcpy(out, p, (size_t)(e - p));
    out[e - p] = 0;
    return true;
}

static bool num_field(const char *line, const char *key, double *out) {
    const char *p = strstr(line, key);
    if (!p) return false;
    char *end;
    *out = strtod(p + strlen(key), &end);
    return end != p + strlen(key);
}

typedef struct trace {
    slice ops[MAX_SLICES], kernels[MAX_SLICES];
    int n_ops, n_kernels, n_other_on_kernels;
    double step_ts[16], step_end[16]; /* by step number */
    int main_tid, kernel_tid;
} trace;

static void read_trace(const char *path, const char *track, trace *t) {
    memset(t, 0, sizeof *t);
    t->main_tid = t->kernel_tid = -1;
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[4096], name[96], cat[32];
    slice other_on[64];
    int n_other = 0;
    while (fgets(line, sizeof line, f)) {
        double tid = -1, ts = 0, dur = 0, v = -1;
        if (!str_field(line, "\"name\":", name, sizeof name) || !num_field(line, "\"tid\":", &tid)) continue;
        if (strstr(line, "\"name\":\"thread_name\"")) {
            char who[96];
            if (str_field(line, "\"args\":{\"name\":", who, sizeof who)) {
                if (strcmp(who, "main") == 0) t->main_tid = (int)tid;
                if (strcmp(who, track) == 0) t->kernel_tid = (int)tid;
            }
            continue;
        }
        if (!strstr(line, "\"ph\":\"X\"") || !str_field(line, "\"cat\":", cat, sizeof cat)) continue;
        num_field(line, "\"ts\":", &ts);
        num_field(line, "\"dur\":", &dur);
        slice s = {.tid = (int)tid, .mb = -1, .ts = ts, .dur = dur};
        snprintf(s.name, sizeof s.name, "%s", name);
        if (num_field(line, "\"micro_batch\":", &v) || num_field(line, "\"step\":", &v)) s.mb = (long long)v;
        if (strcmp(cat, "step") == 0 && s.mb >= 0 && s.mb < 16) {
            t->step_ts[s.mb] = ts, t->step_end[s.mb] = ts + dur;
        } else if (strcmp(cat, "kernel") == 0 && t->n_kernels < MAX_SLICES) {
            str_field(line, "\"pass\":", s.pass, sizeof s.pass);
            t->kernels[t->n_kernels++] = s;
        } else if ((strcmp(cat, "forward") == 0 || strcmp(cat, "backward") == 0) && strstr(line, "\"op\":") && t->n_ops < MAX_SLICES) {
            snprintf(s.pass, sizeof s.pass, "%s", cat);
            t->ops[t->n_ops++] = s;
        } else if (n_other < 64) {
            other_on[n_other++] = s;
        }
    }
    fclose(f);
    for (int i = 0; i < n_other; i++) t->n_other_on_kernels += other_on[i].tid == t->kernel_tid;
}

/* The traced step a slice at ts belongs to: 2 before step 3 began, else 3. */
static int step_of(const trace *t, double ts) { return ts < t->step_ts[3] ? 2 : 3; }

static void run(const char *dev) {
    char path[] = "/tmp/ts_trace_device_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "a file for the trace");
    if (fd < 0) return;
    close(fd);
    ts_graph *g = ts_graph_new(3);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){B, IN}), *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){B});
    ts_tensor *loss = ts_cross_entropy(g, ts_linear(g, ts_relu(g, ts_linear(g, x, HID, "fc1")), CLS, "fc2"), y);
    ts_tensor_set_name(loss, "loss");
    ts_options *o = ts_options_new();
    ts_options_set_device(o, dev);
    ts_options_set_device_iterations(o, D);
    ts_options_set_gradient_accumulation(o, A);
    CHECK_OK(ts_options_set_trace(o, path, 2, 3), "trace steps 2 to 3 into %s", path);
    ts_model *m = NULL;
    ts_status st = ts_model_training(&m, g, loss, o, ts_sgd(0.1f, 0.9f, 0.0f));
    CHECK_OK(st, "a training model on %s", dev);
    float xs[D * A * B * IN];
    int32_t ys[D * A * B];
    for (int i = 0; i < D * A * B * IN; i++) xs[i] = (float)((i * 29) % 13) / 6.0f - 1.0f;
    for (int i = 0; i < D * A * B; i++) ys[i] = (i * 5) % CLS;
    const char *names[2] = {"x", "labels"};
    ts_array in[2] = {ts_array_f32(xs, 2, (int64_t[]){D * A * B, IN}), ts_array_i32(ys, 1, (int64_t[]){D * A * B})};
    for (int r = 0; !st && r < RUNS; r++) st = ts_model_run(m, names, in, 2);
    CHECK_OK(st, "%d runs of %d steps", RUNS, D);
    char track[64];
    const char *colon = strchr(dev, ':');
    if (strncmp(dev, "cuda", 4) == 0) snprintf(track, sizeof track, "kernels (cuda:%s)", colon ? colon + 1 : "0");
    else snprintf(track, sizeof track, "kernels (%s)", dev);
    static trace t;
    read_trace(path, track, &t);
    CHECK(t.main_tid >= 0 && t.kernel_tid >= 0 && t.kernel_tid != t.main_tid, "the file has the main track and '%s' (written after run 2)",
          track);
    CHECK(t.step_ts[2] > 0 && t.step_ts[3] > t.step_ts[2] && t.step_ts[1] == 0 && t.step_ts[4] == 0, "steps 2 and 3 traced, no others");
    int on_track = 0;
    for (int k = 0; k < t.n_kernels; k++) on_track += t.kernels[k].tid == t.kernel_tid;
    CHECK(t.n_kernels > 0 && on_track == t.n_kernels && t.n_other_on_kernels == 0, "%d kernel slices, all on '%s', nothing else there",
          t.n_kernels, track);
    bool staged = strcmp(dev, "cpu-staged") == 0;
    for (int step = 2; step <= 3; step++) {
        int n_ops = 0, matched = 0, longer = 0, opt = 0, kernels = 0, within = 0;
        double next = step == 2 ? t.step_ts[3] : 1e300;
        for (int i = 0; i < t.n_ops; i++) {
            const slice *s = &t.ops[i];
            if (s->tid != t.main_tid || step_of(&t, s->ts) != step) continue;
            n_ops++;
            int found = 0;
            for (int k = 0; k < t.n_kernels; k++) {
                const slice *q = &t.kernels[k];
                if (step_of(&t, q->ts) == step && q->mb == s->mb && strcmp(q->name, s->name) == 0 && strcmp(q->pass, s->pass) == 0) {
                    found++;
                    longer += q->dur >= s->dur - 0.002;
                }
            }
            matched += found == 1;
        }
        for (int k = 0; k < t.n_kernels; k++) {
            const slice *q = &t.kernels[k];
            if (step_of(&t, q->ts) != step) continue;
            kernels++;
            opt += strcmp(q->pass, "optimizer") == 0 && strcmp(q->name, "optimizer") == 0;
            within += q->ts >= t.step_ts[step] && q->ts + q->dur <= next;
        }
        CHECK(n_ops > 0 && matched == n_ops, "step %d: each of its %d op slices (forward and backward, %d micro-batches) has one kernel slice", step,
              n_ops, A);
        CHECK(opt == 1 && kernels == n_ops + 1, "step %d: %d kernel slices: the ops' and one optimizer's", step, kernels);
        CHECK(within == kernels, "step %d: its kernels between its start and the next traced step's (%d of %d)", step, within, kernels);
        if (staged) CHECK(longer == n_ops, "step %d on cpu-staged: each kernel slice lasts at least its op slice (%d of %d)", step, longer, n_ops);
    }
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
    unlink(path);
}

int main(void) {
    const char *dev = getenv("TS_TEST_DEVICE");
    if (!dev || !*dev) dev = "cpu-staged";
    if (ts_device_check(dev)) {
        printf("test_trace_device skipped: %s\n", ts_last_error());
        return 77;
    }
    run(dev);
    return check_summary("test_trace_device");
}
