/* test_stability.c -- stability signals through the C API
 * (ts_options_watch_stability, docs/observation.md#stability-signals): the
 * rows a small MLP trained with Adam gives, named stability/<layer>/<signal>
 * after the user's own watches (the watches only the rows read are not
 * rows), each value recomputed here from the same run's anchored tensors
 * and the weights before the step; the period in runs; bad arguments and a
 * replicated model refused with a message. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tensorscope.h"

enum { B = 9, IN = 12, HID = 16, CLS = 21, RUNS = 4, PERIOD = 2 }; /* the log-sum-exp: 8 rows a row a lane, a row of whole vectors and a ragged end */
static const char *const PARAMS[] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
#define N_PARAMS 4

static uint32_t rng = 7u;
static float rnd(void) {
    rng = rng * 1664525u + 1013904223u;
    return (float)(rng >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

static double norm(const float *x, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return sqrt(s);
}

/* The value of row `name` in the last results (NaN and *run -1 when absent). */
static double row(const ts_watch_result *res, size_t n, const char *name, int64_t *run) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(res[i].name, name) == 0) {
            *run = res[i].run;
            return res[i].summary->stats.mean;
        }
    *run = -1;
    return NAN;
}

static int near(double got, double want, double rel) { return fabs(got - want) <= rel * fabs(want) + 1e-30; }

static ts_graph *mlp(ts_tensor **loss) {
    ts_graph *g = ts_graph_new(3);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){B, IN}), *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){B});
    ts_tensor *h = ts_relu(g, ts_linear(g, x, HID, "fc1"));
    *loss = ts_nll_loss(g, ts_log_softmax(g, ts_linear(g, h, CLS, "fc2"), 1), y);
    ts_tensor_set_name(*loss, "loss");
    return g;
}

static void test_arguments(void) {
    ts_options *o = ts_options_new();
    CHECK(ts_options_watch_stability(NULL, "*", 1) == TS_ERR_INVALID_ARGUMENT, "no options: refused");
    CHECK(ts_options_watch_stability(o, "", 1) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "every layer"),
          "an empty pattern is refused, saying what matches every layer: %s", ts_last_error());
    CHECK(ts_options_watch_stability(o, "*", 0) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "period"),
          "period 0 is refused: %s", ts_last_error());
    /* replicas: refused at compile, saying what to drop */
    ts_tensor *loss;
    ts_graph *g = mlp(&loss);
    ts_model *m = NULL;
    CHECK_OK(ts_options_watch_stability(o, "*", 1), "stability watch of every layer");
    ts_status st = ts_options_set_replication(o, 2, 0);
    if (!st) st = ts_model_training(&m, g, loss, o, ts_adam(0.01f));
    if (!st) {
        st = ts_model_compile(m);
        CHECK(st == TS_ERR_UNSUPPORTED && strstr(ts_last_error(), "replica"), "replicas with stability signals: %s", ts_last_error());
    }
    ts_model_free(m);
    ts_graph_free(g);
    ts_options_free(o);
}

/* The summaries of a value x[0..n) a step's watch gave: count, extremes
 * exactly, mean and l2 to rounding. */
static int summary_of(const ts_watch_result *res, size_t n, const char *name, const float *x, int64_t cnt) {
    for (size_t i = 0; i < n; i++) {
        if (strcmp(res[i].name, name) != 0) continue;
        const ts_stats *st = &res[i].summary->stats;
        double mn = x[0], mx = x[0], s = 0;
        for (int64_t k = 0; k < cnt; k++) mn = fmin(mn, x[k]), mx = fmax(mx, x[k]), s += x[k];
        return st->count == cnt && st->min == mn && st->max == mx && fabs(st->mean - s / (double)cnt) <= 1e-6 * (fabs(mx) + fabs(mn)) &&
               near(st->l2, norm(x, cnt), 1e-6);
    }
    return 0;
}

/* step_summaries: the parameters' gradients and updated values watched
 * too, so the update that sums the squares also summarises them (one
 * pass): the rows must come out the same, and the summaries right. */
static void test_rows(bool step_summaries) {
    ts_tensor *loss;
    ts_graph *g = mlp(&loss);
    ts_options *o = ts_options_new();
    ts_options_watch(o, "fc1/Add:0", TS_WATCH_STATS, 1); /* the user's: a row; fc2/Add:0, Accum___*: read by the rows only */
    if (step_summaries) {
        ts_options_watch(o, "Accum___*", TS_WATCH_STATS, 1);
        ts_options_watch(o, "UpdatedVar___*", TS_WATCH_STATS, 1);
    }
    CHECK_OK(ts_options_watch_stability(o, "fc*", PERIOD), "stability watch of fc*, every %d runs", PERIOD);
    ts_options_anchor(o, NULL, "fc*/Add:0", TS_OUTPUT_FINAL, 0);
    ts_options_anchor(o, NULL, "Accum___*", TS_OUTPUT_FINAL, 0);
    ts_options_anchor(o, NULL, "UpdatedVar___*", TS_OUTPUT_FINAL, 0);
    ts_options_anchor(o, NULL, "Accl1___*", TS_OUTPUT_FINAL, 0);
    ts_options_anchor(o, NULL, "Accl2___*", TS_OUTPUT_FINAL, 0);
    ts_model *m = NULL;
    ts_status st = ts_model_training(&m, g, loss, o, ts_adam(0.01f));
    if (!st) st = ts_model_compile(m);
    CHECK_OK(st, "compile");
    if (st) goto done;
    float xb[B * IN], *before[N_PARAMS] = {NULL};
    int32_t yb[B];
    for (int r = 0; r < RUNS; r++) {
        for (int i = 0; i < B * IN; i++) xb[i] = rnd() * 3.0f;
        for (int i = 0; i < B; i++) yb[i] = (int32_t)((rnd() + 1.0f) * 2.49f);
        for (int k = 0; k < N_PARAMS; k++) { /* the weights before the step */
            ts_array a;
            ts_tensor_info(ts_graph_find(g, PARAMS[k]), &a);
            free(before[k]);
            before[k] = malloc((size_t)ts_array_numel(&a) * sizeof(float));
            memcpy(before[k], a.data, (size_t)ts_array_numel(&a) * sizeof(float));
        }
        const char *names[2] = {"x", "labels"};
        ts_array in[2] = {ts_array_f32(xb, 2, (int64_t[]){B, IN}), ts_array_i32(yb, 1, (int64_t[]){B})};
        if ((st = ts_model_run(m, names, in, 2))) {
            CHECK_OK(st, "run %d", r);
            break;
        }
        const ts_watch_result *res;
        size_t n;
        CHECK_OK(ts_model_watch_results(m, &res, &n), "run %d: watch results", r);
        int stab = 0, user = 0, other = 0, stepw = 0;
        for (size_t i = 0; i < n; i++) {
            if (strncmp(res[i].name, "stability/", 10) == 0) stab++;
            else if (strcmp(res[i].name, "fc1/Add:0") == 0) user++;
            else if (strncmp(res[i].name, "Accum___", 8) == 0 || strncmp(res[i].name, "UpdatedVar___", 13) == 0) stepw++;
            else other++;
        }
        /* fc1, fc2: rms, max_abs; fc2: lse; 4 parameters: grad_norm, update_ratio, adam_update_norm */
        CHECK(stab == 2 * 2 + 1 + N_PARAMS * 3 && user == 1 && other == 0 && (step_summaries || strcmp(res[0].name, "fc1/Add:0") == 0) &&
                  stepw == (step_summaries ? 2 * N_PARAMS : 0),
              "run %d: the user's watch first, then %d stability rows (want 17), %d of the step's (want %d), no other row (%d)", r, stab,
              stepw, step_summaries ? 2 * N_PARAMS : 0, other);
        int64_t due = r - r % PERIOD, got_run;
        double v = row(res, n, "stability/fc1/rms", &got_run);
        CHECK(got_run == due, "run %d: the rows were taken at run %lld (period %d: want %lld)", r, (long long)got_run, PERIOD, (long long)due);
        if (r % PERIOD) continue;
        ts_array a, dw, g1, m1, v1;
        for (int l = 1; l <= 2; l++) {
            char out[32], name[64];
            snprintf(out, sizeof out, "fc%d/Add:0", l);
            ts_model_anchored(m, out, &a);
            int64_t cnt = ts_array_numel(&a);
            double mx = 0;
            for (int64_t i = 0; i < cnt; i++) mx = fmax(mx, fabs(((const float *)a.data)[i]));
            snprintf(name, sizeof name, "stability/fc%d/rms", l);
            v = row(res, n, name, &got_run);
            CHECK(near(v, norm(a.data, cnt) / sqrt((double)cnt), 1e-6), "run %d: %s %.7g = the RMS of %s", r, name, v, out);
            snprintf(name, sizeof name, "stability/fc%d/max_abs", l);
            v = row(res, n, name, &got_run);
            CHECK(v == mx, "run %d: %s %.7g = max |x| of %s (%.7g)", r, name, v, out, mx);
        }
        ts_model_anchored(m, "fc2/Add:0", &a);
        double lse = 0;
        for (int i = 0; i < B; i++) {
            const float *z = (const float *)a.data + i * CLS;
            double s = 0, zm = z[0];
            for (int c = 1; c < CLS; c++) zm = fmax(zm, z[c]);
            for (int c = 0; c < CLS; c++) s += exp(z[c] - zm);
            lse += (zm + log(s)) / B;
        }
        v = row(res, n, "stability/fc2/lse", &got_run);
        CHECK(near(v, lse, 1e-6), "run %d: lse %.7g = the mean log-sum-exp of the logits' rows (%.7g)", r, v, lse);
        double t = r + 1, bc1 = 1 - pow(0.9, t), bc2 = 1 - pow(0.999, t); /* Adam's step count: one a run */
        for (int k = 0; k < N_PARAMS; k++) {
            char name[96], an[96];
            snprintf(an, sizeof an, "Accum___%s", PARAMS[k]);
            ts_model_anchored(m, an, &g1);
            int64_t cnt = ts_array_numel(&g1);
            snprintf(name, sizeof name, "stability/%s/grad_norm", PARAMS[k]);
            v = row(res, n, name, &got_run);
            CHECK(near(v, norm(g1.data, cnt), 1e-6), "run %d: %s %.7g = ||%s||", r, name, v, an);
            if (step_summaries) CHECK(summary_of(res, n, an, g1.data, cnt), "run %d: the summary of %s, taken in the same pass", r, an);
            snprintf(an, sizeof an, "UpdatedVar___%s", PARAMS[k]);
            ts_model_anchored(m, an, &dw);
            if (step_summaries) CHECK(summary_of(res, n, an, dw.data, cnt), "run %d: the summary of %s, taken in the same pass", r, an);
            float *d = malloc((size_t)cnt * sizeof *d);
            for (int64_t i = 0; i < cnt; i++) d[i] = ((const float *)dw.data)[i] - before[k][i];
            double w0 = norm(before[k], cnt), ratio = w0 > 0 ? norm(d, cnt) / w0 : INFINITY;
            snprintf(name, sizeof name, "stability/%s/update_ratio", PARAMS[k]);
            v = row(res, n, name, &got_run);
            CHECK(isinf(ratio) ? v == ratio : near(v, ratio, 1e-5), "run %d: %s %.7g = ||w_after - w_before|| / ||w_before|| (%.7g)", r, name, v, ratio);
            snprintf(an, sizeof an, "Accl1___%s", PARAMS[k]);
            ts_model_anchored(m, an, &m1);
            snprintf(an, sizeof an, "Accl2___%s", PARAMS[k]);
            ts_model_anchored(m, an, &v1);
            for (int64_t i = 0; i < cnt; i++)
                d[i] = (float)((((const float *)m1.data)[i] / bc1) / (sqrt(((const float *)v1.data)[i]) / sqrt(bc2) + 1e-8));
            snprintf(name, sizeof name, "stability/%s/adam_update_norm", PARAMS[k]);
            v = row(res, n, name, &got_run);
            CHECK(near(v, norm(d, cnt), 1e-5), "run %d: %s %.7g = ||m^/(sqrt(v^)+eps)|| (%.7g)", r, name, v, norm(d, cnt));
            free(d);
        }
    }
    for (int k = 0; k < N_PARAMS; k++) free(before[k]);
done:
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
}

/* The update that sums its squares leaves the weights and the optimizer
 * state bit-identical to an unobserved twin's (SGD with momentum, AdamW),
 * and so does the one that also summarises (step_summaries: the
 * gradients and updated values watched too). */
static void test_same_weights(const char *what, ts_optimizer opt, bool step_summaries) {
    ts_tensor *loss[2];
    ts_graph *g[2] = {mlp(&loss[0]), mlp(&loss[1])};
    ts_options *o[2] = {ts_options_new(), ts_options_new()};
    ts_model *m[2] = {NULL, NULL};
    ts_options_watch_stability(o[1], "*", 1);
    if (step_summaries) {
        ts_options_watch(o[1], "Accum___*", TS_WATCH_STATS, 1);
        ts_options_watch(o[1], "UpdatedVar___*", TS_WATCH_STATS, 1);
    }
    ts_status st = TS_OK;
    for (int k = 0; k < 2 && !st; k++)
        if (!(st = ts_model_training(&m[k], g[k], loss[k], o[k], opt))) st = ts_model_compile(m[k]);
    float xb[B * IN];
    int32_t yb[B];
    for (int r = 0; r < 3 && !st; r++) {
        for (int i = 0; i < B * IN; i++) xb[i] = rnd() * 3.0f;
        for (int i = 0; i < B; i++) yb[i] = (int32_t)((rnd() + 1.0f) * 2.49f);
        const char *names[2] = {"x", "labels"};
        ts_array in[2] = {ts_array_f32(xb, 2, (int64_t[]){B, IN}), ts_array_i32(yb, 1, (int64_t[]){B})};
        for (int k = 0; k < 2 && !st; k++) st = ts_model_run(m[k], names, in, 2);
    }
    CHECK_OK(st, "%s: both models trained 3 steps", what);
    int same = !st;
    for (int k = 0; k < N_PARAMS && same; k++) {
        ts_array a, b;
        ts_tensor_info(ts_graph_find(g[0], PARAMS[k]), &a);
        ts_tensor_info(ts_graph_find(g[1], PARAMS[k]), &b);
        same = memcmp(a.data, b.data, (size_t)ts_array_numel(&a) * sizeof(float)) == 0;
    }
    CHECK(same, "%s: the weights after 3 steps are bit-identical with and without the stability signals", what);
    for (int k = 0; k < 2; k++) {
        ts_model_free(m[k]);
        ts_options_free(o[k]);
        ts_graph_free(g[k]);
    }
}

/* Parameters wide enough that their updates, one job over the pool, are
 * split into thread slices (fc1.weight: 36,864 values): each parameter's
 * squares are its slices' added in order, so its gradient norm and update
 * ratio are still those of the whole tensors, on 1 thread and on 3. */
static void test_wide(int threads) {
    enum { WB = 8, WIN = 96, WHID = 384, WCLS = 10 };
    static const char *const wide[] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
    ts_graph *g = ts_graph_new(5);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){WB, WIN}), *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){WB});
    ts_tensor *h = ts_relu(g, ts_linear(g, x, WHID, "fc1"));
    ts_tensor *loss = ts_nll_loss(g, ts_log_softmax(g, ts_linear(g, h, WCLS, "fc2"), 1), y);
    ts_options *o = ts_options_new();
    ts_options_set_threads(o, threads);
    ts_options_watch_stability(o, "*", 1);
    ts_options_anchor(o, NULL, "Accum___*", TS_OUTPUT_FINAL, 0);
    ts_options_anchor(o, NULL, "UpdatedVar___*", TS_OUTPUT_FINAL, 0);
    ts_model *m = NULL;
    ts_status st = ts_model_training(&m, g, loss, o, ts_sgd(0.05f, 0.0f, 0.0f));
    if (!st) st = ts_model_compile(m);
    float *xb = malloc(sizeof(float) * WB * WIN), *before[4] = {NULL};
    int32_t yb[WB];
    for (int i = 0; i < WB * WIN; i++) xb[i] = rnd();
    for (int i = 0; i < WB; i++) yb[i] = i % WCLS;
    for (int k = 0; !st && k < 4; k++) {
        ts_array a;
        ts_tensor_info(ts_graph_find(g, wide[k]), &a);
        before[k] = malloc((size_t)ts_array_numel(&a) * sizeof(float));
        memcpy(before[k], a.data, (size_t)ts_array_numel(&a) * sizeof(float));
    }
    const char *names[2] = {"x", "labels"};
    ts_array in[2] = {ts_array_f32(xb, 2, (int64_t[]){WB, WIN}), ts_array_i32(yb, 1, (int64_t[]){WB})};
    if (!st) st = ts_model_run(m, names, in, 2);
    CHECK_OK(st, "wide layers, %d threads: compile and run", threads);
    const ts_watch_result *res;
    size_t n = 0;
    for (int k = 0; !st && k < 4 && ts_model_watch_results(m, &res, &n) == TS_OK; k++) {
        char name[96], an[96];
        int64_t got_run;
        ts_array g1, w1;
        snprintf(an, sizeof an, "Accum___%s", wide[k]);
        ts_model_anchored(m, an, &g1);
        int64_t cnt = ts_array_numel(&g1);
        snprintf(name, sizeof name, "stability/%s/grad_norm", wide[k]);
        double v = row(res, n, name, &got_run);
        CHECK(got_run == 0 && near(v, norm(g1.data, cnt), 1e-6), "wide layers, %d threads: %s %.9g = ||%s|| (%.9g)", threads, name, v, an,
              norm(g1.data, cnt));
        snprintf(an, sizeof an, "UpdatedVar___%s", wide[k]);
        ts_model_anchored(m, an, &w1);
        float *d = malloc((size_t)cnt * sizeof *d);
        for (int64_t i = 0; i < cnt; i++) d[i] = ((const float *)w1.data)[i] - before[k][i];
        double ratio = norm(d, cnt) / norm(before[k], cnt);
        snprintf(name, sizeof name, "stability/%s/update_ratio", wide[k]);
        v = row(res, n, name, &got_run);
        CHECK(near(v, ratio, 1e-5), "wide layers, %d threads: %s %.7g = ||w_after - w_before|| / ||w_before|| (%.7g)", threads, name, v, ratio);
        free(d);
    }
    for (int k = 0; k < 4; k++) free(before[k]);
    free(xb);
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
}

int main(void) {
    test_arguments();
    test_wide(1);
    test_wide(3);
    test_rows(false);
    test_rows(true);
    test_same_weights("SGD momentum", ts_sgd(0.05f, 0.9f, 0.01f), false);
    test_same_weights("AdamW", ts_adamw(0.01f, 0.1f), false);
    test_same_weights("SGD momentum, summaries", ts_sgd(0.05f, 0.9f, 0.01f), true);
    test_same_weights("AdamW, summaries", ts_adamw(0.01f, 0.1f), true);
    return check_summary("test_stability");
}
