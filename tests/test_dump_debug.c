/* test_dump_debug.c -- ts_options_set_dump_debug and ts_model_dump_debug_plan
 * (include/tensorscope.h, docs/formats.md#debugger-dump) from C:
 * - bad arguments are refused with what to give (steps, pattern, limit);
 * - the plan counts the selected tensors' files (header + data) x steps;
 *   over the limit it is TS_ERR_INVALID_ARGUMENT saying how to raise it,
 *   and the first dumped run refuses the same way, with no step taken;
 * - an open range under a limit writes steps until the limit, then the run
 *   that reaches it is TS_ERR_IO naming the limit; the index then lists
 *   only files that are there and whole;
 * - ts_model_finish waits for the writer: an open range's last step is in
 *   the index when it returns;
 * - a file of a step that cannot be written (its directory is a file) is
 *   the error of the run or of ts_model_finish, not lost;
 * - a dumped Relu:0 is max(fc1/Add:0, 0) of the same step, read back
 *   with ts_npy_load; a weight is the value its step read (step 3's is
 *   step 2's less lr x step 2's gradient);
 * all on the CPU and on cpu-staged (the path of a device the host does
 * not read directly: the dump starts at step 2, as a device's parameters
 * are read from the second step on). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/check.h"
#include "support/files.h"

enum { B = 4, IN = 6, HID = 5, OUT = 3 };

static float xs[B * IN];
static int32_t ys[B];

static ts_status run(ts_model *m) {
    ts_array in[2] = {ts_array_f32(xs, 2, (int64_t[]){B, IN}), {.dtype = TS_I32, .ndim = 1, .shape = {B}, .data = ys}};
    const char *names[2] = {"x", "labels"};
    return ts_model_run(m, names, in, 2);
}

static ts_graph *graphs[16]; /* freed at the end, after their models */
static int n_graphs;
static const char *device; /* "cpu", then "cpu-staged": a device the host does not read directly */

static ts_model *model(const char *dir, int64_t first, int64_t last, const char *ops, int grads, int64_t limit) {
    ts_graph *g = ts_graph_new(3);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){B, IN});
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){B});
    ts_tensor *h = ts_relu(g, ts_linear(g, x, HID, "fc1"));
    ts_tensor *loss = ts_cross_entropy(g, ts_linear(g, h, OUT, "fc2"), y);
    ts_tensor_set_name(loss, "loss");
    ts_options *o = ts_options_new();
    ts_options_set_threads(o, 1);
    ts_options_set_device(o, device);
    ts_model *m = NULL;
    if (ts_options_set_dump_debug(o, dir, first, last, ops, grads, limit) || ts_model_training(&m, g, loss, o, ts_sgd(0.1f, 0.0f, 0.0f)))
        fprintf(stderr, "model: %s\n", ts_last_error());
    ts_options_free(o);
    graphs[n_graphs++] = g;
    return m;
}

/* Rows of DIR/index.tsv (the header not counted), each file there; -1 when a listed file is missing or not whole. */
static int index_rows(const char *dir, int64_t step, int *of_step) {
    char path[512];
    snprintf(path, sizeof path, "%s/index.tsv", dir);
    char *text = test_read_file(path, NULL);
    if (!text) return 0;
    int rows = 0;
    *of_step = 0;
    for (char *line = strchr(text, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        char *end = strchr(line + 1, '\n'), *file = end;
        while (file > line && file[-1] != '\t') file--;
        char fpath[1024];
        snprintf(fpath, sizeof fpath, "%s/%.*s", dir, (int)(end - file), file);
        ts_array a;
        if (ts_npy_load(fpath, &a)) {
            free(text);
            return -1;
        }
        ts_npy_free(&a);
        rows++;
        if (atoll(line + 1) == step) (*of_step)++;
    }
    free(text);
    return rows;
}

/* The dumped tensor `name` of `step`, found through the index. */
static bool load(const char *dir, int64_t step, const char *name, ts_array *a) {
    char path[1024], key[300];
    snprintf(path, sizeof path, "%s/index.tsv", dir);
    snprintf(key, sizeof key, "\n%lld\t%s\t", (long long)step, name);
    char *text = test_read_file(path, NULL), *r = text ? strstr(text, key) : NULL;
    bool ok = r != NULL;
    if (ok) {
        char *end = strchr(r + 1, '\n'), *file = end;
        while (file[-1] != '\t') file--;
        snprintf(path, sizeof path, "%s/%.*s", dir, (int)(end - file), file);
        ok = ts_npy_load(path, a) == TS_OK;
    }
    free(text);
    return ok;
}

/* Every check on `device`, under base. */
static void checks(const char *base) {
    char dir[256];

    /* bad arguments */
    ts_options *o = ts_options_new();
    snprintf(dir, sizeof dir, "%s/bad", base);
    CHECK(ts_options_set_dump_debug(o, dir, 0, 2, NULL, 0, 0) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "count from 1"),
          "step 0 is refused: %s", ts_last_error());
    CHECK(ts_options_set_dump_debug(o, dir, 3, 2, NULL, 0, 0) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "FIRST <= LAST"),
          "a range backwards is refused: %s", ts_last_error());
    CHECK(ts_options_set_dump_debug(o, dir, 1, 2, "", 0, 0) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "glob"),
          "an empty pattern is refused: %s", ts_last_error());
    CHECK(ts_options_set_dump_debug(o, dir, 1, 2, NULL, 0, -1) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "0: no limit"),
          "a negative limit is refused: %s", ts_last_error());
    CHECK(ts_options_set_dump_debug(o, "/proc/no/such", 1, 2, NULL, 0, 0) == TS_ERR_IO, "a directory that cannot be made: %s", ts_last_error());
    ts_options_free(o);

    /* the plan, and the limit refused at the first dumped run */
    snprintf(dir, sizeof dir, "%s/plan", base);
    ts_model *m = model(dir, 2, 3, "fc1*", 0, 0);
    int64_t tensors = 0, steps = 0, bytes = 0;
    CHECK_OK(ts_model_dump_debug_plan(m, 0, &tensors, &steps, &bytes), "the plan");
    /* fc1.weight [5,6], fc1.bias [5], fc1/MatMul:0 and fc1/Add:0 [4,5]: a 128-byte header each (64-aligned) */
    int64_t want = 2 * (4 * 128 + 4 * (HID * IN + HID + 2 * B * HID));
    CHECK(tensors == 4 && steps == 2 && bytes == want, "the plan: 4 tensors x 2 steps = %lld bytes (want %lld)", (long long)bytes, (long long)want);
    ts_model_free(m);
    snprintf(dir, sizeof dir, "%s/over", base);
    m = model(dir, 1, 10, NULL, 1, 4096);
    CHECK(ts_model_dump_debug_plan(m, 0, &tensors, &steps, &bytes) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "raise the limit"),
          "a plan over the limit: %s", ts_last_error());
    CHECK(run(m) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "over the limit") && ts_model_steps(m) == 0,
          "the first dumped run refuses before any step: %s", ts_last_error());
    ts_model_free(m);

    /* an open range under a limit: steps until the limit, then TS_ERR_IO */
    snprintf(dir, sizeof dir, "%s/open", base);
    /* from step 2: on a device the parameters are read from the second step on */
    m = model(dir, 2, 0, "fc1*", 0, want + 100); /* two steps' files, and less than one more file */
    ts_status st1 = run(m), st2 = run(m), st3 = run(m), st4 = run(m);
    CHECK(st1 == TS_OK && st2 == TS_OK && st3 == TS_OK && st4 == TS_ERR_IO && strstr(ts_last_error(), "reached its limit"),
          "the third dumped step reaches the limit: %s", ts_last_error());
    int of4 = 0;
    int rows = index_rows(dir, 4, &of4);
    CHECK(rows == 8 && of4 == 0, "the index lists the two steps' files, every one whole (%d rows, %d of step 4)", rows, of4);
    ts_model_free(m);

    /* ts_model_finish waits for an open range's last step */
    snprintf(dir, sizeof dir, "%s/finish", base);
    m = model(dir, 2, 0, NULL, 1, 0);
    CHECK_OK(run(m), "run 1");
    CHECK_OK(run(m), "run 2");
    CHECK_OK(run(m), "run 3");
    CHECK_OK(ts_model_finish(m), "finish");
    int of3 = 0;
    rows = index_rows(dir, 3, &of3);
    CHECK(rows > 0 && of3 * 2 == rows, "after finish the index lists step 3's %d files too (%d rows)", of3, rows);
    ts_array relu, add, w2, w3, g2;
    bool found = load(dir, 2, "Relu:0", &relu);
    if (found && !load(dir, 2, "fc1/Add:0", &add)) ts_npy_free(&relu), found = false;
    CHECK(found, "Relu:0 and fc1/Add:0 of step 2 are in the index and load");
    if (found) {
        int bad = 0;
        for (int i = 0; i < B * HID; i++) bad += ((float *)relu.data)[i] != fmaxf(((float *)add.data)[i], 0.0f);
        CHECK(bad == 0 && relu.ndim == 2 && relu.shape[0] == B && relu.shape[1] == HID, "Relu:0 is max(fc1/Add:0, 0) of the same step (%d differ)", bad);
        ts_npy_free(&relu), ts_npy_free(&add);
    }
    found = load(dir, 2, "fc1.weight", &w2) && load(dir, 3, "fc1.weight", &w3) && load(dir, 2, "Gradient___fc1.weight", &g2);
    CHECK(found, "fc1.weight of steps 2 and 3 and its gradient of step 2 are in the index and load");
    if (found) { /* the weights as each step read them: step 3's are step 2's after its SGD update (lr 0.1) */
        double worst = 0;
        for (int i = 0; i < HID * IN; i++) {
            float want3 = ((float *)w2.data)[i] - 0.1f * ((float *)g2.data)[i];
            worst = fmax(worst, fabs((double)(((float *)w3.data)[i] - want3)));
        }
        CHECK(worst < 1e-6, "fc1.weight of step 3 is step 2's less 0.1 x its gradient (off by %g)", worst);
        ts_npy_free(&w2), ts_npy_free(&w3), ts_npy_free(&g2);
    }
    /* a step that cannot be written: its directory is a file */
    char blocker[512];
    snprintf(blocker, sizeof blocker, "%s/step_000004", dir);
    FILE *f = fopen(blocker, "w");
    if (f) fclose(f);
    CHECK(run(m) == TS_ERR_IO && strstr(ts_last_error(), "step_000004"), "a step whose directory is a file: %s", ts_last_error());
    ts_model_free(m);

}

int main(void) {
    for (int i = 0; i < B * IN; i++) xs[i] = (float)sin(0.7 * i);
    for (int i = 0; i < B; i++) ys[i] = i % OUT;
    static const char *const devices[] = {"cpu", "cpu-staged"};
    for (int k = 0; k < 2; k++) {
        char base[] = "/tmp/ts_dump_debug_XXXXXX";
        if (!mkdtemp(base)) return 1;
        device = devices[k];
        printf("-- on %s\n", device);
        checks(base);
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", base);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", base);
    }
    for (int i = 0; i < n_graphs; i++) ts_graph_free(graphs[i]);
    return check_summary("test_dump_debug");
}
