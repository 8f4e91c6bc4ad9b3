/* test_watch.c -- watches (docs/observation.md#summaries) on a training model: one result per
 * tensor whose name matches a pattern (glob or substring), the run and step
 * it was taken at, a period in runs, and summaries equal to
 * ts_summarize_f32 of the same tensor's last value (anchored FINAL). A wide
 * layer checks the summaries taken inside the optimizer step, split over
 * threads, against one pass. */
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tensorscope.h"

enum { B = 2, IN = 4, HID = 3, CLS = 2, D = 2, A = 2, RUNS = 4 };

typedef struct watch_case {
    const char *pattern;
    int what, period;
} watch_case;

static const watch_case WATCHES[] = {
    {"Gradient___fc*", TS_WATCH_STATS | TS_WATCH_HISTOGRAM | TS_WATCH_RANGE, 1},
    {"UpdatedVar___*", TS_WATCH_STATS, 2},
    {"fc1/Add:0", TS_WATCH_STATS | TS_WATCH_HISTOGRAM, 1},
    {"fc2/Add", TS_WATCH_STATS, 1}, /* no tensor is named so: matches nothing */
};
#define N_WATCHES ((int)(sizeof WATCHES / sizeof WATCHES[0]))

/* The test's own matcher: fnmatch for globs, the exact name otherwise. */
static int matches(const char *pattern, const char *name) {
    return strpbrk(pattern, "*?[") ? fnmatch(pattern, name, 0) == 0 : strcmp(name, pattern) == 0;
}

/* Union of `what` and the smallest period over the watches matching name. */
static int expected_what(const char *name, int *period) {
    int what = 0;
    *period = 0;
    for (int k = 0; k < N_WATCHES; k++)
        if (matches(WATCHES[k].pattern, name)) {
            what |= WATCHES[k].what;
            if (*period == 0 || WATCHES[k].period < *period) *period = WATCHES[k].period;
        }
    return what;
}

/* Float data summed in short float runs then in double: agreement to ~1e-9
 * of the data's scale, whatever the slicing. */
/* Within 5e-7 of scale. The summaries add floats in vector lanes, so a
 * std is as exact as its sums: relative to the std plus the mean's size
 * (the sum of squares cancels the mean's part), to a few ulps of float
 * (one is 6e-8 to 1.2e-7 of the value) whether or not the compiler fuses
 * the multiply-adds and however the threads split a tensor (each part's
 * sums rounded, then the parts added). */
static int close_to(double got, double want, double scale) { return fabs(got - want) <= 5e-7 * scale; }

/* Compares a watch summary with ts_summarize_f32 over x[0..n). */
static int same_summary(const ts_summary *got, const float *x, int64_t n, int what, const char *name) {
    ts_summary *want = calloc(1, sizeof *want);
    ts_summarize_f32(x, n, what, want);
    int ok = got->what == what;
    const ts_stats *g = &got->stats, *w = &want->stats;
    if (what & TS_WATCH_STATS)
        ok = ok && g->count == w->count && g->zeros == w->zeros && g->nans == w->nans && g->pos_infs == w->pos_infs &&
             g->neg_infs == w->neg_infs && close_to(g->mean, w->mean, w->std + fabs(w->mean)) && close_to(g->std, w->std, w->std + fabs(w->mean)) && g->min == w->min &&
             g->max == w->max && close_to(g->l2, w->l2, w->l2);
    if (what & TS_WATCH_HISTOGRAM)
        ok = ok && got->log2_zeros == want->log2_zeros && memcmp(got->log2_counts, want->log2_counts, sizeof want->log2_counts) == 0 &&
             memcmp(got->tb_counts, want->tb_counts, sizeof want->tb_counts) == 0;
    if (what & TS_WATCH_RANGE) ok = ok && memcmp(&got->range, &want->range, sizeof want->range) == 0;
    if (!ok)
        printf("     %s: got n=%lld mean=%.9g std=%.9g min=%g max=%g l2=%.9g; want n=%lld mean=%.9g std=%.9g min=%g max=%g l2=%.9g\n", name,
               (long long)g->count, g->mean, g->std, g->min, g->max, g->l2, (long long)w->count, w->mean, w->std, w->min, w->max, w->l2);
    free(want);
    return ok;
}

static uint32_t rng = 99u;
static float rnd(void) {
    rng = rng * 1664525u + 1013904223u;
    return (float)(rng >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

static void test_tiny(void) {
    ts_graph *g = ts_graph_new(5);
    int64_t xs[] = {B, IN}, ys[] = {B};
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, xs), *y = ts_input(g, "labels", TS_I32, 1, ys);
    ts_tensor *h = ts_relu(g, ts_linear(g, x, HID, "fc1"));
    ts_tensor *loss = ts_cross_entropy(g, ts_linear(g, h, CLS, "fc2"), y);
    ts_tensor_set_name(loss, "loss");
    ts_options *o = ts_options_new();
    ts_options_set_device_iterations(o, D);
    ts_options_set_gradient_accumulation(o, A);
    for (int k = 0; k < N_WATCHES; k++)
        CHECK_OK(ts_options_watch(o, WATCHES[k].pattern, WATCHES[k].what, WATCHES[k].period), "watch '%s' period %d", WATCHES[k].pattern,
                 WATCHES[k].period);
    CHECK(ts_options_watch(o, "x", TS_WATCH_STATS, 0) == TS_ERR_INVALID_ARGUMENT, "watch period 0 is refused: %s", ts_last_error());
    CHECK(ts_options_watch(o, "x", 8, 1) == TS_ERR_INVALID_ARGUMENT, "watch what=8 is refused: %s", ts_last_error());
    /* the same tensors anchored FINAL (training DEFAULT), under their own names */
    ts_options_anchor(o, NULL, "Gradient___fc*", TS_OUTPUT_DEFAULT, 0);
    ts_options_anchor(o, NULL, "UpdatedVar___*", TS_OUTPUT_DEFAULT, 0);
    ts_options_anchor(o, "fc1/Add:0", "fc1/Add:0", TS_OUTPUT_FINAL, 0);
    ts_model *m = NULL;
    ts_status st = ts_model_training(&m, g, loss, o, ts_sgd(0.1f, 0.9f, 0.0f));
    CHECK(st || ts_model_check_watches(m) == TS_ERR_STATE, "watches are checked against the compiled model only: %s", ts_last_error());
    if (!st) st = ts_model_compile(m);
    CHECK_OK(st, "compile with watches");
    if (st) goto done;
    /* compile accepts a watch that matches nothing; the check names it and,
     * as 'fc2/Add' begins some names, the glob that would match them */
    CHECK(ts_model_check_watches(m) == TS_ERR_NOT_FOUND && strstr(ts_last_error(), "watch 'fc2/Add'") && strstr(ts_last_error(), "'fc2/Add*'"),
          "the watch 'fc2/Add' is reported with its glob: %s", ts_last_error());
    const char *const *names;
    size_t n_names = 0, n_expected = 0;
    ts_model_tensor_names(m, &names, &n_names);
    int period;
    for (size_t i = 0; i < n_names; i++) n_expected += strcmp(names[i], "labels") != 0 && expected_what(names[i], &period) != 0;
    float xb[D * A * B * IN];
    int32_t yb[D * A * B];
    ts_summary *upd_saved = calloc(8, sizeof *upd_saved); /* UpdatedVar___ summaries of the last update */
    for (int r = 0; r < RUNS; r++) {
        for (int i = 0; i < D * A * B * IN; i++) xb[i] = rnd() * 2.0f;
        for (int i = 0; i < D * A * B; i++) yb[i] = rnd() > 0.0f;
        const char *in_names[2] = {"x", "labels"};
        ts_array in[2] = {ts_array_f32(xb, 2, (int64_t[]){D * A * B, IN}), ts_array_i32(yb, 1, (int64_t[]){D * A * B})};
        st = ts_model_run(m, in_names, in, 2);
        CHECK_OK(st, "run %d", r);
        if (st) break;
        const ts_watch_result *res;
        size_t n = 0;
        CHECK_OK(ts_model_watch_results(m, &res, &n), "run %d: watch results", r);
        /* one result per matching tensor name, each name once */
        int names_ok = n == n_expected;
        for (size_t i = 0; i < n && names_ok; i++) {
            names_ok = expected_what(res[i].name, &period) != 0;
            for (size_t j = 0; j < i; j++) names_ok = names_ok && strcmp(res[i].name, res[j].name) != 0;
        }
        CHECK(names_ok, "run %d: %zu results, one per tensor matching a pattern (%zu expected)", r, n, n_expected);
        int n_upd = 0;
        for (size_t i = 0; i < n; i++) {
            int what = expected_what(res[i].name, &period);
            int updated = r % period == 0; /* runs 0, period, 2*period, ... */
            int64_t want_run = updated ? r : r - r % period;
            int64_t want_step = (want_run + 1) * D - 1; /* the last step of that run */
            CHECK(res[i].run == want_run && res[i].step == want_step, "run %d: %s (period %d) taken at run %lld step %lld (want %lld, %lld)", r,
                  res[i].name, period, (long long)res[i].run, (long long)res[i].step, (long long)want_run, (long long)want_step);
            int is_upd = strncmp(res[i].name, "UpdatedVar___", 13) == 0;
            if (updated) {
                ts_array a;
                st = ts_model_anchored(m, res[i].name, &a);
                CHECK(st == TS_OK && same_summary(res[i].summary, a.data, ts_array_numel(&a), what, res[i].name),
                      "run %d: %s summary (what=%d) = ts_summarize_f32 of its anchored FINAL value", r, res[i].name, what);
                if (is_upd && n_upd < 8) upd_saved[n_upd] = *res[i].summary;
            } else if (is_upd && n_upd < 8) {
                CHECK(memcmp(&upd_saved[n_upd].stats, &res[i].summary->stats, sizeof(ts_stats)) == 0,
                      "run %d: %s keeps the summary of run %lld (period %d)", r, res[i].name, (long long)want_run, period);
            }
            n_upd += is_upd;
        }
        CHECK(n_upd == 4, "run %d: the 4 UpdatedVar___ tensors are watched by substring", r);
    }
    free(upd_saved);
done:
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
}

/* A 784 -> 700 layer (548800 values, enough to be split over two threads)
 * trained one run: the summaries taken inside the optimizer step (gradient,
 * Accum___, UpdatedVar___, optimizer state), chunk by chunk and merged over
 * threads, equal one pass over the anchored FINAL values. `fused`: only
 * the gradient, Accum___ and the updated weight with plain stats, which the
 * update summarises from registers as it goes (ts_opt_update_summarised);
 * the weights must then come out bit-identical to an unwatched twin's.
 * `nan`: one input value is NaN, so are a row of the gradient and of the
 * updated weight (the runs holding them are classified from memory). */
typedef struct step_case {
    const char *what;
    ts_optimizer opt;
    int accum, threads, iterations, fused, nan;
} step_case;

/* The layer of test_step, its loss named "loss". */
static ts_graph *step_graph(int64_t wb, int64_t win, int64_t wout) {
    ts_graph *g = ts_graph_new(9);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){wb, win});
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){wb});
    ts_tensor *loss = ts_cross_entropy(g, ts_linear(g, x, wout, "fc1"), y);
    ts_tensor_set_name(loss, "loss");
    return g;
}

static void test_step(const step_case *c) {
    enum { WB = 4, WIN = 784, WOUT = 700 };
    static const struct {
        const char *name;
        int what;
    } watched[] = {
        {"Gradient___fc1.weight", TS_WATCH_STATS | TS_WATCH_HISTOGRAM | TS_WATCH_RANGE},
        {"Accum___fc1.weight", TS_WATCH_STATS},
        {"UpdatedVar___fc1.weight", TS_WATCH_STATS | TS_WATCH_HISTOGRAM},
        {"Accl___fc1.weight", TS_WATCH_STATS},
        {"Accl1___fc1.weight", TS_WATCH_STATS | TS_WATCH_RANGE},
        {"Accl2___fc1.weight", TS_WATCH_STATS},
    };
    static const int fused_what[] = {TS_WATCH_STATS, TS_WATCH_STATS, TS_WATCH_STATS, 0, 0, 0}; /* gradient, Accum___, update */
    enum { N_WATCHED = sizeof watched / sizeof watched[0] };
    ts_graph *g = step_graph(WB, WIN, WOUT), *twin_g = step_graph(WB, WIN, WOUT);
    ts_options *o = ts_options_new(), *twin_o = ts_options_new();
    for (int k = 0; k < 2; k++) {
        ts_options *ok = k ? twin_o : o;
        ts_options_set_threads(ok, c->threads);
        ts_options_set_gradient_accumulation(ok, c->accum);
        ts_options_set_device_iterations(ok, c->iterations);
        ts_options_anchor(ok, NULL, "*___fc1.weight", TS_OUTPUT_FINAL, 0); /* each under its own name */
    }
    for (int k = 0; k < N_WATCHED; k++) /* none matching is fine */
        if (!c->fused || fused_what[k]) ts_options_watch(o, watched[k].name, c->fused ? fused_what[k] : watched[k].what, 1);
    ts_model *m = NULL, *twin = NULL;
    ts_status st = ts_model_training(&m, g, ts_graph_find(g, "loss"), o, c->opt);
    if (!st) st = ts_model_compile(m);
    if (!st) st = ts_model_training(&twin, twin_g, ts_graph_find(twin_g, "loss"), twin_o, c->opt);
    int n_exist = 0; /* the optimizer decides which state exists */
    const char *const *names;
    size_t n_names = 0;
    if (!st) ts_model_tensor_names(m, &names, &n_names);
    for (int k = 0; k < N_WATCHED; k++)
        for (size_t i = 0; i < n_names; i++) n_exist += strcmp(names[i], watched[k].name) == 0 && (!c->fused || fused_what[k]);
    int n_set = 0; /* the watches set: the check passes when each names a tensor that exists */
    for (int k = 0; k < N_WATCHED; k++) n_set += !c->fused || fused_what[k];
    if (!st)
        CHECK((ts_model_check_watches(m) == TS_OK) == (n_exist == n_set), "%s: the watch check passes iff all %d watched names exist (%d do): %s",
              c->what, n_set, n_exist, ts_last_error());
    static float xb[4 * WB * WIN];
    int32_t yb[4 * WB];
    int64_t rows = (int64_t)c->iterations * c->accum * WB; /* at most 4 micro-batches a run */
    for (int64_t i = 0; i < rows * WIN; i++) xb[i] = (i % WIN) % 5 == 0 ? 0.0f : rnd(); /* zero columns: zero gradients */
    for (int64_t i = 0; i < rows; i++) yb[i] = (int32_t)((i * 7) % WOUT);
    if (c->nan) xb[3 * WIN + 11] = NAN;
    const char *in_names[2] = {"x", "labels"};
    ts_array in[2] = {ts_array_f32(xb, 2, (int64_t[]){rows, WIN}), ts_array_i32(yb, 1, (int64_t[]){rows})};
    for (int r = 0; !st && r < 2; r++) st = ts_model_run(m, in_names, in, 2); /* two steps: the state is not zero */
    for (int r = 0; !st && r < 2; r++) st = ts_model_run(twin, in_names, in, 2);
    CHECK_OK(st, "%s: compile, watch and run", c->what);
    ts_array upd, twin_upd;
    if (!st && !ts_model_anchored(m, "UpdatedVar___fc1.weight", &upd) && !ts_model_anchored(twin, "UpdatedVar___fc1.weight", &twin_upd))
        CHECK(ts_array_numel(&upd) == WIN * WOUT && memcmp(upd.data, twin_upd.data, sizeof(float) * WIN * WOUT) == 0,
              "%s: the watched model's weights are bit-identical to the unwatched twin's", c->what);
    else
        CHECK(0, "%s: both models' updated weights anchored", c->what);
    const ts_watch_result *res;
    size_t n = 0;
    if (!st && ts_model_watch_results(m, &res, &n) == TS_OK && (int)n == n_exist) {
        int64_t zeros = -1;
        for (size_t i = 0; i < n; i++) {
            int what = 0;
            for (int k = 0; k < N_WATCHED; k++)
                if (strcmp(res[i].name, watched[k].name) == 0) what = c->fused ? fused_what[k] : watched[k].what;
            ts_array a;
            ts_model_anchored(m, res[i].name, &a);
            int64_t last_step = 2 * c->iterations - 1; /* of the second run */
            CHECK(ts_array_numel(&a) == WIN * WOUT && res[i].run == 1 && res[i].step == last_step &&
                      same_summary(res[i].summary, a.data, ts_array_numel(&a), what, res[i].name),
                  "%s: %s (%d values, run %lld step %lld) = one pass over its anchored value", c->what, res[i].name, WIN * WOUT,
                  (long long)res[i].run, (long long)res[i].step);
            if (strncmp(res[i].name, "Gradient___", 11) == 0) zeros = res[i].summary->stats.zeros;
        }
        CHECK(zeros >= WOUT * (WIN / 5), "%s: the gradient's zeros counted (%lld)", c->what, (long long)zeros);
        for (size_t i = 0; c->nan && i < n; i++)
            CHECK(res[i].summary->stats.nans == WOUT, "%s: %s counts the %d NaN of the poisoned input column (%lld)", c->what, res[i].name,
                  WOUT, (long long)res[i].summary->stats.nans);
    } else
        CHECK(0, "%s: %d watch results (got %zu)", c->what, n_exist, n);
    ts_model_free(m);
    ts_model_free(twin);
    ts_options_free(o);
    ts_options_free(twin_o);
    ts_graph_free(g);
    ts_graph_free(twin_g);
}

/* A watched Relu of a watched value is summarised in its input's pass
 * (ts_stats_partial_add_relu): the Relu's summary must be one pass over its
 * own output, for negative values, zeros of both signs, NaN and Inf (the
 * Relu passes -0 and NaN), over odd sizes that end in a ragged tail and
 * span blocks, with and without threads, and over two runs. Its min, max
 * and zeros come from x's lanes (x's min where positive, else 0): `sign`
 * 1 makes every x positive (the Relu's min is x's), -1 every x negative
 * (every Relu value a zero, its max 0 while x's is negative), 0 mixes
 * them. */
static void test_relu_pair(int64_t cols, int threads, int poison, int sign) {
    enum { ROWS = 3 };
    ts_graph *g = ts_graph_new(1);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){ROWS, cols});
    ts_tensor *r = ts_relu(g, x);
    ts_options *o = ts_options_new();
    ts_options_set_threads(o, threads);
    ts_options_watch(o, "x", TS_WATCH_STATS, 1);
    ts_options_watch(o, "Relu:0", TS_WATCH_STATS, 1);
    ts_options_anchor(o, "relu", "Relu:0", TS_OUTPUT_FINAL, 0);
    ts_model *m = NULL;
    ts_status st = ts_model_inference(&m, g, &r, 1, o);
    float *xv = malloc(sizeof(float) * ROWS * (size_t)cols);
    for (int run = 0; !st && run < 2; run++) {
        for (int64_t i = 0; i < ROWS * cols; i++) {
            float v = rnd() * (run ? 3.0f : 1.0f) + 0.25f;
            if (sign > 0) xv[i] = fabsf(v) + 0.5f; /* no zero */
            else if (sign < 0 && run) xv[i] = -fabsf(v) - 0.5f; /* the run checked: no zero in x */
            else xv[i] = (i % 7 == 3) ? -0.0f : (i % 11 == 5) ? 0.0f : sign < 0 ? -fabsf(v) - 0.5f : v;
        }
        if (poison) {
            xv[cols + 17] = NAN;
            xv[2 * cols - 1] = -INFINITY;
            xv[5] = INFINITY;
        }
        const char *names[1] = {"x"};
        ts_array in = ts_array_f32(xv, 2, (int64_t[]){ROWS, cols});
        st = ts_model_run(m, names, &in, 1);
    }
    const char *signs = sign > 0 ? ", x > 0" : sign < 0 ? ", x <= 0" : "";
    CHECK_OK(st, "relu pair, %lld columns, %d threads%s%s: run", (long long)cols, threads, poison ? ", NaN and Inf" : "", signs);
    const ts_watch_result *res;
    size_t n = 0;
    ts_array a;
    if (!st && !ts_model_watch_results(m, &res, &n) && !ts_model_anchored(m, "relu", &a)) {
        for (size_t i = 0; i < n; i++) {
            int is_relu = strcmp(res[i].name, "Relu:0") == 0;
            CHECK(res[i].run == 1 && same_summary(res[i].summary, is_relu ? a.data : xv, ROWS * cols, TS_WATCH_STATS, res[i].name),
                  "relu pair, %lld columns, %d threads%s%s: %s = one pass over its values", (long long)cols, threads, poison ? ", NaN and Inf" : "",
                  signs, res[i].name);
            const ts_stats *rs = &res[i].summary->stats;
            if (is_relu && sign == 0)
                CHECK(rs->zeros > ROWS * cols / 4 && rs->nans == poison && rs->neg_infs == 0 && rs->pos_infs == poison,
                      "relu pair: the Relu's zeros (%lld), NaN and Inf counted", (long long)rs->zeros);
            if (is_relu && sign > 0)
                CHECK(rs->zeros == poison && (poison ? rs->min == 0.0 : rs->min >= 0.5),
                      "relu pair, x > 0: no zero but the -Inf's, the Relu's min is x's (%g)", rs->min);
            if (is_relu && sign < 0)
                CHECK(rs->zeros == ROWS * cols - 2 * poison && rs->min == 0.0 && rs->max == 0.0 && rs->std == 0.0,
                      "relu pair, x <= 0: every finite Relu value a zero (%lld of %lld), min %g, max %g", (long long)rs->zeros,
                      (long long)(ROWS * cols), rs->min, rs->max);
        }
        CHECK(n == 2, "relu pair: two watch results (%zu)", n);
    }
    free(xv);
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
}

/* A watched model and its twin (0 and 1): their graphs, options and models. */
typedef struct twins {
    ts_graph *g[2];
    ts_options *o[2];
    ts_model *m[2];
} twins;

static void twins_free(twins *t) {
    for (int k = 0; k < 2; k++) {
        ts_model_free(t->m[k]);
        ts_options_free(t->o[k]);
        ts_graph_free(t->g[k]);
    }
}

/* A BatchNorm's output and its Relu, both watched with plain stats alone,
 * are summed by the BatchNorm's kernel as it writes them (one set of sums
 * per channel, merged in channel order; the Relu then written over the
 * output, which nothing reads after the kernel): each summary must be one
 * pass over the values a twin anchors instead (the twin's kernels sum
 * nothing), with rows of whole vectors (28x28), with a ragged tail
 * (10x10, 9x9), longer than one run of the sums (37x37), with NaN and Inf
 * in two channels (their runs summed from memory), the Relu watched every
 * other run (taken beside the output's, or from its own memory); the
 * weights the same bits as the twin's, and each summary the same bits on
 * 1 thread and on 3 (`bits`: that one's, kept from the first call).
 * `conv`: a 3x3 convolution in front, watched too, whose kernel sums its
 * output a sample at a time where its path takes samples whole; with
 * fewer samples than threads (`samples` 2 on 3 threads, 37x37) they share
 * each sample, that path sums nothing and the watch takes its own pass. */
static void test_bn_kernel(int64_t h, int64_t w, int threads, int poison, int relu_period, int conv, int samples, ts_stats bits[3]) {
    enum { C = 6, CIN = 2, CL = 3, RUNS2 = 3 };
    const int N = samples, CX = conv ? CIN : C;
    char what[160];
    snprintf(what, sizeof what, "kernel sums, %sbatch norm, %d x %lldx%lld, %d thread%s%s, Relu every %d", conv ? "conv + " : "", N,
             (long long)h, (long long)w, threads, threads > 1 ? "s" : "", poison ? ", NaN and Inf" : "", relu_period);
    int64_t n = N * CX * h * w;
    float *xb = malloc(sizeof(float) * (size_t)n);
    int32_t yb[8];
    uint32_t kept = rng;
    rng = 4242u; /* the same values on every thread count */
    for (int64_t i = 0; i < n; i++) xb[i] = rnd() * 2.0f + (float)(i / (h * w) % CX) * 0.5f; /* each channel its own mean */
    rng = kept;
    for (int i = 0; i < N; i++) yb[i] = i % CL;
    if (poison) xb[2 * h * w + 7] = NAN, xb[(CX + 3) * h * w + 1] = INFINITY; /* channel 2 of sample 0, channel 3 of sample 1 */
    static const char *const names[3] = {"bn/BatchNorm:0", "Relu:0", "conv/Conv2d:0"};
    twins pair = {{NULL}, {NULL}, {NULL}};
    ts_status st = TS_OK;
    int64_t in_kernel0 = ts_counter_get("SummariesInKernel");
    for (int k = 0; k < 2; k++) { /* 0 watched, 1 the twin anchoring the same tensors */
        ts_graph *g = pair.g[k] = ts_graph_new(21);
        ts_tensor *x = ts_input(g, "x", TS_F32, 4, (int64_t[]){N, CX, h, w});
        ts_tensor *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){N});
        ts_conv2d_params cp = {.stride_h = 1, .stride_w = 1, .pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1};
        if (conv) x = ts_conv2d_layer(g, x, C, 3, 3, &cp, 0, "conv");
        ts_tensor *b = ts_relu(g, ts_batch_norm_layer(g, x, "bn"));
        ts_tensor *loss = ts_cross_entropy(g, ts_linear(g, ts_flatten(g, b, 1), CL, "fc"), y);
        ts_options *o = pair.o[k] = ts_options_new();
        ts_options_set_threads(o, threads);
        for (int t = 0; t < 2 + conv; t++) {
            if (k == 0) ts_options_watch(o, names[t], TS_WATCH_STATS, t == 1 ? relu_period : 1);
            else ts_options_anchor(o, NULL, names[t], TS_OUTPUT_FINAL, 0);
        }
        ts_options_anchor(o, NULL, "UpdatedVar___*", TS_OUTPUT_FINAL, 0);
        if (!st) st = ts_model_training(&pair.m[k], g, loss, o, ts_sgd(0.05f, 0.9f, 0.0f));
        if (!st) st = ts_model_compile(pair.m[k]);
    }
    for (int r = 0; !st && r < (poison ? 1 : RUNS2); r++) {
        const char *in_names[2] = {"x", "labels"};
        ts_array in[2] = {ts_array_f32(xb, 4, (int64_t[]){N, CX, h, w}), ts_array_i32(yb, 1, (int64_t[]){N})};
        for (int k = 0; k < 2 && !st; k++) st = ts_model_run(pair.m[k], in_names, in, 2);
        CHECK_OK(st, "%s: run %d", what, r);
        const ts_watch_result *res;
        size_t nr = 0;
        if (st || ts_model_watch_results(pair.m[0], &res, &nr)) break;
        CHECK((int)nr == 2 + conv, "%s: %d watch results (%zu)", what, 2 + conv, nr);
        for (size_t i = 0; i < nr; i++) {
            int t = strcmp(res[i].name, names[0]) == 0 ? 0 : strcmp(res[i].name, names[1]) == 0 ? 1 : 2, due = t != 1 || r % relu_period == 0;
            ts_array a;
            if (!due) {
                CHECK(res[i].run == r - r % relu_period, "%s: run %d: %s keeps run %lld's summary", what, r, res[i].name, (long long)res[i].run);
                continue;
            }
            CHECK(res[i].run == r && ts_model_anchored(pair.m[1], res[i].name, &a) == TS_OK &&
                      same_summary(res[i].summary, a.data, ts_array_numel(&a), TS_WATCH_STATS, res[i].name),
                  "%s: run %d: %s = one pass over the twin's anchored values", what, r, res[i].name);
            if (poison && t == 0)
                CHECK(res[i].summary->stats.nans >= N * h * w, "%s: the NaN channel counted (%lld NaN)", what, (long long)res[i].summary->stats.nans);
            if (r == 0 && bits && !bits[t].count) bits[t] = res[i].summary->stats;
            else if (r == 0 && bits)
                CHECK(memcmp(&bits[t], &res[i].summary->stats, sizeof(ts_stats)) == 0, "%s: %s the same bits as on the first thread count",
                      what, res[i].name);
        }
        ts_array wa, wb;
        CHECK(ts_model_anchored(pair.m[0], "UpdatedVar___fc.weight", &wa) == TS_OK && ts_model_anchored(pair.m[1], "UpdatedVar___fc.weight", &wb) == TS_OK &&
                  memcmp(wa.data, wb.data, sizeof(float) * (size_t)ts_array_numel(&wa)) == 0,
              "%s: run %d: the weights the twin's bits", what, r);
    }
    /* the kernels took them on the host (a device, its staged twin too, summarises where the values live) */
    const char *dev = getenv("TS_DEVICE");
    int64_t want = 0, runs = poison ? 1 : RUNS2;
    bool shared = N < threads && h * w * N * C * CIN * 9 >= 256 * 1024; /* the convolution's threads share each sample */
    for (int r = 0; (!dev || !*dev || strcmp(dev, "cpu") == 0) && r < runs; r++) want += 1 + (r % relu_period == 0) + (conv && !shared);
    int64_t took = ts_counter_get("SummariesInKernel") - in_kernel0;
    CHECK(st || took == want, "%s: the kernels took %lld summaries (expected %lld)", what, (long long)took, (long long)want);
    twins_free(&pair);
    free(xb);
}

/* The kernels' summaries in other settings, each against a twin's
 * anchored values as test_bn_kernel, a convolution, a BatchNorm and its
 * Relu and a 3x3 max pool (a sample at a time, as the convolution)
 * watched: `kind` 0 a training model with gradient accumulation 2 and 2
 * steps a run (taken at the last micro-batch), 1 an inference model (the
 * norm's running statistics; the convolution's inference path, its
 * weights kept, sums nothing: the watch's own pass takes it), 2 planes of
 * 7x7 (rows under 64 values: the norm leaves them to the watch's pass). */
static void test_kernel_sums_modes(int kind) {
    enum { N = 4, C = 5, CIN = 3, CL = 3, ACC2 = 2, IT2 = 2 };
    static const char *const kinds[3] = {"accumulation 2, 2 steps a run", "inference", "7x7 planes"};
    static const char *const names[4] = {"bn/BatchNorm:0", "Relu:0", "conv/Conv2d:0", "MaxPool2d:0"};
    int batches = kind == 0 ? ACC2 * IT2 : 1, watched = 4;
    int64_t side = kind == 2 ? 7 : 12, xshape[4] = {(int64_t)N * batches, CIN, side, side}, per = CIN * side * side;
    float *xb = malloc(sizeof(float) * (size_t)(N * batches * per));
    int32_t yb[N * ACC2 * IT2];
    uint32_t kept = rng; /* the later tests' values as they were without this one */
    rng = 777u;
    for (int64_t i = 0; i < N * batches * per; i++) xb[i] = rnd() * 1.5f + 0.3f;
    rng = kept;
    for (int i = 0; i < N * batches; i++) yb[i] = i % CL;
    twins pair = {{NULL}, {NULL}, {NULL}};
    ts_status st = TS_OK;
    for (int k = 0; k < 2; k++) {
        ts_graph *g = pair.g[k] = ts_graph_new(33);
        ts_tensor *x = ts_input(g, "x", TS_F32, 4, (int64_t[]){N, CIN, side, side});
        ts_tensor *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){N});
        ts_conv2d_params cp = {.stride_h = 1, .stride_w = 1, .pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1};
        x = ts_conv2d_layer(g, x, C, 3, 3, &cp, 0, "conv");
        ts_tensor *b = ts_relu(g, ts_batch_norm_layer(g, x, "bn"));
        b = ts_max_pool2d(g, b, &(ts_pool2d_params){.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_top = 1, .pad_bottom = 1,
                                                     .pad_left = 1, .pad_right = 1});
        ts_tensor *logits = ts_linear(g, ts_flatten(g, b, 1), CL, "fc");
        ts_options *o = pair.o[k] = ts_options_new();
        ts_options_set_threads(o, 2);
        if (kind == 0) ts_options_set_gradient_accumulation(o, ACC2), ts_options_set_device_iterations(o, IT2);
        for (int t = 0; t < watched; t++) {
            if (k == 0) ts_options_watch(o, names[t], TS_WATCH_STATS, 1);
            else ts_options_anchor(o, NULL, names[t], TS_OUTPUT_FINAL, 0);
        }
        if (!st && kind == 1) st = ts_model_inference(&pair.m[k], g, &logits, 1, o);
        else if (!st) st = ts_model_training(&pair.m[k], g, ts_cross_entropy(g, logits, y), o, ts_sgd(0.05f, 0.0f, 0.0f));
        if (!st) st = ts_model_compile(pair.m[k]);
    }
    int64_t took0 = ts_counter_get("SummariesInKernel");
    for (int r = 0; !st && r < 2; r++) {
        const char *in_names[2] = {"x", "labels"};
        ts_array in[2] = {ts_array_f32(xb, 4, xshape), ts_array_i32(yb, 1, (int64_t[]){N * batches})};
        for (int k = 0; k < 2 && !st; k++) st = ts_model_run(pair.m[k], in_names, in, kind == 1 ? 1 : 2);
    }
    CHECK_OK(st, "kernel sums, %s: compile and run", kinds[kind]);
    const ts_watch_result *res;
    size_t nr = 0;
    if (!st && !ts_model_watch_results(pair.m[0], &res, &nr)) {
        CHECK((int)nr == watched, "kernel sums, %s: %d watch results (%zu)", kinds[kind], watched, nr);
        for (size_t i = 0; i < nr; i++) {
            ts_array a;
            CHECK(res[i].run == 1 && ts_model_anchored(pair.m[1], res[i].name, &a) == TS_OK &&
                      same_summary(res[i].summary, a.data, ts_array_numel(&a), TS_WATCH_STATS, res[i].name),
                  "kernel sums, %s: %s = one pass over the twin's anchored values", kinds[kind], res[i].name);
        }
    }
    const char *dev = getenv("TS_DEVICE");
    int64_t want = !dev || !*dev || strcmp(dev, "cpu") == 0 ? 2 * (kind == 0 ? 4 : 3 - (kind == 2)) : 0; /* the kernels' watches, once a run */
    CHECK(st || ts_counter_get("SummariesInKernel") - took0 == want, "kernel sums, %s: the kernels took %lld summaries (expected %lld)", kinds[kind],
          (long long)(ts_counter_get("SummariesInKernel") - took0), (long long)want);
    twins_free(&pair);
    free(xb);
}

/* Many small parameters of odd sizes (3 to 8710 values) and one optimizer:
 * their steps run as one job over the pool (ts_observe_steps), each
 * thread a run of the parameters' values laid end to end, so a thread's
 * run starts and ends inside parameters. Each parameter's gradient and
 * updated weight must still be summarised as one pass over its own values
 * (its anchored FINAL value), whatever the split, and the weights must
 * come out bit-identical to an unwatched twin's. One more parameter, l5.w
 * (37 values), adds sum(l5.w * c) to the loss: `poison` puts a NaN, a +Inf
 * and a -Inf into c, so its gradient and updated weight hold one of each
 * among finite values (classified from memory) while the others stay
 * finite. `grads_only`: the gradients alone watched (no summary of the
 * weights in the same pass). */
static void test_many_small(int threads, int poison, int grads_only) {
    enum { MB = 4, IN7 = 7, CLS3 = 3, LAYERS = 5, ODD = 37 };
    static const int64_t width[LAYERS] = {13, 5, 130, 67, CLS3};
    const int params = 2 * LAYERS + 1, summaries = (grads_only ? 1 : 2) * params;
    char what[96];
    snprintf(what, sizeof what, "many small parameters, %d thread%s%s%s", threads, threads > 1 ? "s" : "", poison ? ", NaN and Inf" : "",
             grads_only ? ", gradients only" : "");
    twins pair = {{NULL}, {NULL}, {NULL}};
    ts_status st = TS_OK;
    for (int k = 0; k < 2; k++) {
        ts_graph *g = pair.g[k] = ts_graph_new(5);
        ts_tensor *h = ts_input(g, "x", TS_F32, 2, (int64_t[]){MB, IN7});
        ts_tensor *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){MB});
        ts_tensor *c = ts_input(g, "c", TS_F32, 1, (int64_t[]){ODD});
        for (int l = 0; l < LAYERS; l++) {
            char name[8];
            snprintf(name, sizeof name, "l%d", l);
            h = ts_linear(g, h, width[l], name);
            if (l % 2 == 0 && l + 1 < LAYERS) h = ts_relu(g, h);
        }
        ts_tensor *odd = ts_param(g, "l5.w", 1, (int64_t[]){ODD});
        ts_tensor *loss = ts_add(g, ts_cross_entropy(g, h, y), ts_sum(g, ts_mul(g, odd, c)));
        pair.o[k] = ts_options_new();
        ts_options_set_threads(pair.o[k], threads);
        ts_options_anchor(pair.o[k], NULL, "*___l?.*", TS_OUTPUT_FINAL, 0);
        if (k == 0) { /* the twin (k = 1) watches nothing */
            ts_options_watch(pair.o[k], "Gradient___l?.*", TS_WATCH_STATS, 1);
            if (!grads_only) ts_options_watch(pair.o[k], "UpdatedVar___l?.*", TS_WATCH_STATS, 1);
        }
        if (!st) st = ts_model_training(&pair.m[k], g, loss, pair.o[k], ts_sgd(0.05f, 0.0f, 0.0f));
        if (!st) st = ts_model_compile(pair.m[k]);
    }
    float xb[MB * IN7], cb[ODD];
    int32_t yb[MB];
    for (int i = 0; i < MB * IN7; i++) xb[i] = i % 3 == 1 ? 0.0f : rnd(); /* zero columns: zero gradients */
    for (int i = 0; i < MB; i++) yb[i] = i % CLS3;
    for (int i = 0; i < ODD; i++) cb[i] = rnd();
    if (poison) cb[5] = NAN, cb[20] = INFINITY, cb[30] = -INFINITY;
    const char *in_names[3] = {"x", "labels", "c"};
    ts_array in[3] = {ts_array_f32(xb, 2, (int64_t[]){MB, IN7}), ts_array_i32(yb, 1, (int64_t[]){MB}), ts_array_f32(cb, 1, (int64_t[]){ODD})};
    for (int r = 0; !st && r < 2; r++) /* two steps: the second's weights and gradients are not the start's */
        for (int k = 0; !st && k < 2; k++) st = ts_model_run(pair.m[k], in_names, in, 3);
    CHECK_OK(st, "%s: compile and run", what);
    const ts_watch_result *res;
    size_t n = 0;
    if (!st && ts_model_watch_results(pair.m[0], &res, &n) == TS_OK) {
        CHECK((int)n == summaries, "%s: %d summaries (got %zu)", what, summaries, n);
        for (size_t i = 0; i < n; i++) {
            ts_array a;
            CHECK(ts_model_anchored(pair.m[0], res[i].name, &a) == TS_OK && res[i].run == 1 && res[i].step == 1 &&
                      same_summary(res[i].summary, a.data, ts_array_numel(&a), TS_WATCH_STATS, res[i].name),
                  "%s: %s (%lld values) = one pass over its anchored value", what, res[i].name, (long long)ts_array_numel(&a));
            const ts_stats *t = &res[i].summary->stats;
            bool odd_one = strstr(res[i].name, "l5.w") != NULL;
            int64_t want = poison && odd_one; /* one NaN, one +Inf, one -Inf */
            CHECK(t->nans == want && t->pos_infs == want && t->neg_infs == want,
                  "%s: %s counts %lld NaN, +Inf and -Inf (%lld, %lld, %lld)", what, res[i].name, (long long)want, (long long)t->nans,
                  (long long)t->pos_infs, (long long)t->neg_infs);
        }
    } else {
        CHECK(0, "%s: watch results", what);
    }
    for (int p = 0; !st && p < params; p++) {
        char name[40];
        if (p < 2 * LAYERS) snprintf(name, sizeof name, "UpdatedVar___l%d.%s", p / 2, p % 2 ? "bias" : "weight");
        else snprintf(name, sizeof name, "UpdatedVar___l5.w");
        ts_array w, tw;
        CHECK(ts_model_anchored(pair.m[0], name, &w) == TS_OK && ts_model_anchored(pair.m[1], name, &tw) == TS_OK && ts_array_numel(&w) == ts_array_numel(&tw) &&
                  memcmp(w.data, tw.data, sizeof(float) * (size_t)ts_array_numel(&w)) == 0,
              "%s: %s is bit-identical to the unwatched twin's", what, name);
    }
    twins_free(&pair);
}

/* A training model of g (SGD, rate 0.05) watching and anchoring the n
 * tensors t, compiled. */
static ts_status watched_model(ts_model **m, ts_graph *g, ts_tensor *loss, ts_options *o, ts_tensor *const *t, int n) {
    for (int k = 0; k < n; k++) {
        ts_options_watch(o, ts_tensor_name(t[k]), TS_WATCH_STATS, 1);
        ts_options_anchor(o, NULL, ts_tensor_name(t[k]), TS_OUTPUT_FINAL, 0);
    }
    ts_status st = ts_model_training(m, g, loss, o, ts_sgd(0.05f, 0.0f, 0.0f));
    return st ? st : ts_model_compile(*m);
}

/* Deferred summaries (docs/observation.md#summaries): a training
 * step's small activations summarised by a worker the forward pass leaves
 * idle, while the pass goes on. With 1 thread nothing is deferred; with 2
 * and 3 each summary must be bit for bit the 1-thread one, and within
 * rounding of one pass over its anchored value: the input, a Linear's sum
 * with its Relu (taken in the sum's pass), a Tanh with a view of it (a
 * Reshape, whose summary is the Tanh's), the logits. Two micro-batches a
 * step and two steps a run: the results are the run's last micro-batch's.
 * The forward waits for every one at its end: the counter
 * SummariesDeferred counts them (5 a run: the view and the Relu take
 * their inputs'; none on a device, which summarises where the values
 * live). */
static void test_deferred(void) {
    enum { MB = 5, IN2 = 40, H1 = 24, H2 = 12, CL = 3, N_ACT = 7, ACC = 2, STEPS = 2, RUNS2 = 3 };
    static const int thread_counts[3] = {1, 2, 3};
    ts_stats base[N_ACT];
    enum { SAMPLES = MB * ACC * STEPS };
    float *xb = malloc(sizeof(float) * SAMPLES * IN2); /* one run's data, the same for each thread count */
    int32_t yb[SAMPLES];
    for (int i = 0; i < SAMPLES * IN2; i++) xb[i] = i % 9 == 4 ? 0.0f : rnd();
    for (int i = 0; i < SAMPLES; i++) yb[i] = i % CL;
    for (int tc = 0; tc < 3; tc++) {
        int threads = thread_counts[tc];
        ts_graph *g = ts_graph_new(11);
        ts_tensor *t[N_ACT];
        ts_tensor *x = t[0] = ts_input(g, "x", TS_F32, 2, (int64_t[]){MB, IN2});
        ts_tensor *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){MB});
        ts_tensor *h = t[1] = ts_linear(g, x, H1, "l0");
        h = t[2] = ts_relu(g, h);
        h = t[3] = ts_linear(g, h, H2, "l1");
        h = t[4] = ts_tanh(g, h);
        h = t[5] = ts_reshape(g, h, 3, (int64_t[]){MB, 3, 4});
        ts_tensor *logits = t[6] = ts_linear(g, ts_flatten(g, h, 1), CL, "l2");
        ts_tensor *loss = ts_cross_entropy(g, logits, y);
        ts_options *o = ts_options_new();
        ts_options_set_threads(o, threads);
        ts_options_set_gradient_accumulation(o, ACC);
        ts_options_set_device_iterations(o, STEPS);
        ts_model *m = NULL;
        ts_status st = watched_model(&m, g, loss, o, t, N_ACT);
        const char *names[2] = {"x", "labels"};
        ts_array in[2] = {ts_array_f32(xb, 2, (int64_t[]){SAMPLES, IN2}), ts_array_i32(yb, 1, (int64_t[]){SAMPLES})};
        int64_t deferred0 = ts_counter_get("SummariesDeferred");
        for (int r = 0; !st && r < RUNS2; r++) st = ts_model_run(m, names, in, 2);
        int64_t deferred = ts_counter_get("SummariesDeferred") - deferred0;
        CHECK_OK(st, "deferred summaries, %d threads: compile and run", threads);
        const ts_watch_result *res;
        size_t n = 0;
        if (!st && ts_model_watch_results(m, &res, &n) == TS_OK) {
            CHECK(n == N_ACT, "deferred summaries, %d threads: %d results (%zu)", threads, N_ACT, n);
            for (int k = 0; k < N_ACT; k++) {
                const char *name = ts_tensor_name(t[k]);
                const ts_watch_result *w = NULL;
                for (size_t i = 0; i < n; i++)
                    if (strcmp(res[i].name, name) == 0) w = &res[i];
                ts_array a;
                CHECK(w && w->run == RUNS2 - 1 && ts_model_anchored(m, name, &a) == TS_OK &&
                          same_summary(w->summary, a.data, ts_array_numel(&a), TS_WATCH_STATS, name),
                      "deferred summaries, %d threads: %s = one pass over its last value", threads, name);
                if (!w) continue;
                if (tc == 0) base[k] = w->summary->stats;
                else
                    CHECK(memcmp(&base[k], &w->summary->stats, sizeof base[k]) == 0,
                          "deferred summaries, %d threads: %s has the bits of the 1-thread summary (mean %.9g against %.9g)", threads, name,
                          w->summary->stats.mean, base[k].mean);
            }
        } else {
            CHECK(0, "deferred summaries, %d threads: watch results", threads);
        }
        const char *dev = getenv("TS_DEVICE"); /* a device (its staged twin too) summarises where the values live */
        int64_t want = threads > 1 && (!dev || !*dev || strcmp(dev, "cpu") == 0) ? 5 * RUNS2 : 0;
        CHECK(deferred == want, "deferred summaries, %d threads: %lld deferred (expected %lld)", threads, (long long)deferred, (long long)want);
        ts_model_free(m);
        ts_options_free(o);
        ts_graph_free(g);
    }
    free(xb);
}

/* A view of an input nobody watches (the MLP's Flatten of its images)
 * has no summary to share: deferred too, from the caller's memory, as is
 * a view of an unwatched view of it, each with the 1-thread summary's
 * bits and within rounding of one pass over its value (the run's last
 * micro-batch's of two). */
static void test_deferred_input_view(void) {
    enum { MB = 6, ACC = 2, RUNS2 = 3 };
    float xb[ACC * MB * 20];
    int32_t yb[ACC * MB];
    for (int i = 0; i < ACC * MB * 20; i++) xb[i] = i % 7 == 3 ? 0.0f : rnd();
    for (int i = 0; i < ACC * MB; i++) yb[i] = i % 3;
    ts_stats base[2];
    for (int threads = 1; threads <= 2; threads++) {
        ts_graph *g = ts_graph_new(5);
        ts_tensor *x = ts_input(g, "x", TS_F32, 4, (int64_t[]){MB, 1, 4, 5});
        ts_tensor *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){MB});
        ts_tensor *v[2];
        v[0] = ts_flatten(g, x, 1);
        v[1] = ts_reshape(g, ts_reshape(g, v[0], 3, (int64_t[]){MB, 2, 10}), 3, (int64_t[]){MB, 10, 2}); /* of a view nobody watches */
        ts_tensor *loss = ts_cross_entropy(g, ts_linear(g, ts_flatten(g, v[1], 1), 3, "fc"), y);
        ts_options *o = ts_options_new();
        ts_options_set_threads(o, threads);
        ts_options_set_gradient_accumulation(o, ACC); /* the view follows each micro-batch's part of the input */
        ts_model *m = NULL;
        ts_status st = watched_model(&m, g, loss, o, v, 2);
        const char *names[2] = {"x", "labels"};
        ts_array in[2] = {ts_array_f32(xb, 4, (int64_t[]){ACC * MB, 1, 4, 5}), ts_array_i32(yb, 1, (int64_t[]){ACC * MB})};
        int64_t deferred0 = ts_counter_get("SummariesDeferred");
        for (int r = 0; !st && r < RUNS2; r++) st = ts_model_run(m, names, in, 2);
        int64_t deferred = ts_counter_get("SummariesDeferred") - deferred0;
        CHECK_OK(st, "deferred view of an input, %d threads: compile and run", threads);
        for (int k = 0; !st && k < 2; k++) {
            const char *name = ts_tensor_name(v[k]);
            const ts_summary *s = NULL;
            const ts_watch_result *res;
            size_t n = 0;
            for (size_t i = 0; ts_model_watch_results(m, &res, &n) == TS_OK && i < n; i++)
                if (strcmp(res[i].name, name) == 0 && res[i].run == RUNS2 - 1) s = res[i].summary;
            ts_array a;
            bool got = s && ts_model_anchored(m, name, &a) == TS_OK;
            CHECK(got && same_summary(s, a.data, ts_array_numel(&a), TS_WATCH_STATS, name), "deferred view of an input, %d threads: %s = one pass over its value", threads, name);
            if (!got) continue;
            if (threads == 1) base[k] = s->stats;
            else CHECK(memcmp(&base[k], &s->stats, sizeof base[k]) == 0, "deferred view of an input, 2 threads: %s has the 1-thread summary's bits", name);
        }
        const char *dev = getenv("TS_DEVICE");
        int64_t want = threads > 1 && (!dev || !*dev || strcmp(dev, "cpu") == 0) ? 2 * RUNS2 : 0;
        CHECK(deferred == want, "deferred view of an input, %d threads: %lld deferred (expected %lld)", threads, (long long)deferred, (long long)want);
        ts_model_free(m);
        ts_options_free(o);
        ts_graph_free(g);
    }
}

int main(void) {
    test_tiny();
    test_deferred();
    test_deferred_input_view();
    test_relu_pair(37, 1, 0, 0);
    test_relu_pair(9001, 2, 0, 0);
    test_relu_pair(30011, 3, 1, 0);
    test_relu_pair(30011, 2, 0, 0);
    for (int sign = -1; sign <= 1; sign += 2) {
        test_relu_pair(64, 1, 0, sign); /* whole vectors: no tail's values beside the lanes' */
        test_relu_pair(37, 1, 0, sign);
        test_relu_pair(9001, 1, 0, sign);
        test_relu_pair(30011, 2, 1, sign);
    }
    static const int64_t bn_sides[4][2] = {{28, 28}, {10, 10}, {9, 9}, {37, 37}};
    for (int k = 0; k < 4; k++)
        for (int conv = 0; conv < 2; conv++) {
            ts_stats bits[3] = {{0}, {0}, {0}};
            int64_t h = bn_sides[k][0], w = bn_sides[k][1];
            for (int threads = 1; threads <= 3; threads += 2) test_bn_kernel(h, w, threads, 0, 1, conv, 5, bits);
            test_bn_kernel(h, w, 2, 0, 2, conv, 5, NULL);
            if (!conv) test_bn_kernel(h, w, 2, 1, 1, conv, 5, NULL); /* (through a convolution the NaN would reach every channel) */
        }
    test_bn_kernel(37, 37, 3, 0, 1, 1, 2, NULL); /* the convolution's threads share each sample: it sums nothing */
    for (int kind = 0; kind < 3; kind++) test_kernel_sums_modes(kind);
    static const step_case steps[] = {
        {"SGD, no accumulation, 2 threads, 2 steps a run", {0}, 1, 2, 2, 0, 0},
        {"SGD momentum, accumulation 2, 1 thread", {0}, 2, 1, 1, 0, 0},
        {"Adam, no accumulation, 2 threads", {0}, 1, 2, 1, 0, 0},
        {"AdamW, accumulation 2, 3 threads, 2 steps a run", {0}, 2, 3, 2, 0, 0},
        {"fused: SGD, 2 threads, 2 steps a run", {0}, 1, 2, 2, 1, 0},
        {"fused: SGD nesterov and weight decay, 3 threads (ragged slices)", {0}, 1, 3, 1, 1, 0},
        {"fused: Adam, 1 thread", {0}, 1, 1, 1, 1, 0},
        {"fused: AdamW, 3 threads, 2 steps a run", {0}, 1, 3, 2, 1, 0},
        {"fused: SGD, accumulation 2 (the mean is read)", {0}, 2, 2, 1, 1, 0},
        {"fused: SGD with a NaN input, 2 threads", {0}, 1, 2, 1, 1, 1},
    };
    ts_optimizer nesterov = ts_sgd(0.1f, 0.9f, 1e-3f);
    nesterov.nesterov = 1;
    ts_optimizer opts[] = {ts_sgd(0.1f, 0.0f, 0.0f), ts_sgd(0.1f, 0.9f, 0.0f), ts_adam(1e-3f), ts_adamw(1e-3f, 0.01f),
                           ts_sgd(0.1f, 0.0f, 0.0f), nesterov, ts_adam(1e-3f), ts_adamw(1e-3f, 0.01f), ts_sgd(0.1f, 0.0f, 0.0f),
                           ts_sgd(0.1f, 0.0f, 0.0f)};
    for (int k = 0; k < (int)(sizeof steps / sizeof steps[0]); k++) {
        step_case c = steps[k];
        c.opt = opts[k];
        test_step(&c);
    }
    for (int threads = 1; threads <= 3; threads++)
        for (int poison = 0; poison < 2; poison++) test_many_small(threads, poison, 0);
    test_many_small(2, 1, 1);
    return check_summary("test_watch");
}
