/* test_replay.c -- steps recorded once and replayed (exec/replay.c; CUDA
 * graphs on a GPU) compute what steps launched call by call do. The MLP
 * (SGD with momentum, a cosine learning-rate schedule with warmup, 2
 * micro-batches accumulated), LeNet+BN (Adam) and a small GPT (AdamW) are
 * each trained twice on the device from the same weights on the same
 * data, with TS_CUDA_GRAPHS=0 and without, every tensor watched: the
 * weights, the loss anchor and every summary of the last run the same
 * (bit for bit on cpu-staged, which replays the very kernels; within 1e-6
 * on a GPU), and the counters show each run was recorded once per kind
 * and replayed after, the whole run one launch. Also: 3 steps per run and
 * a watch every 2 runs (more kinds of run, the summaries taken at the same
 * steps), 10 and 100 steps per run (the latter two launches a run, of 64
 * steps and 36), numeric checks,
 * which keep every step call by call and say why, and the metrics report's
 * lines for the device (copies, wait, memory on a GPU). The device is
 * TS_TEST_DEVICE ("cuda" unless set); without one: exits 77 saying why. */
/* labels: gpu */
#include "check.h"
#include "model_pair.h"
#include "report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RUNS 6
#define MAX_WATCHED 4096

typedef struct setup {
    int accum, steps, period; /* A, D, the watch's period in runs */
    ts_check_numerics check;
    bool schedule;
    int what; /* the watch's TS_WATCH_* (0: stats) */
    bool outfeed; /* every parameter's gradient streamed to a queue, each micro-batch */
} setup;

typedef struct outcome {
    double loss;
    int n;
    char *name[MAX_WATCHED];
    ts_stats stats[MAX_WATCHED];
    int64_t step[MAX_WATCHED];
    uint64_t counts[MAX_WATCHED]; /* the histograms' and range counts' fingerprint */
    int n_records;                /* outfeed records, the fingerprint of their order (run, sample, key), the sums of their values */
    uint64_t records;
    double record_sum, record_abs;
    int64_t captures, replays, refused, steps_replayed, streamed;
} outcome;

static void outcome_free(outcome *o) {
    for (int i = 0; i < o->n; i++) free(o->name[i]);
    o->n = 0;
}

static ts_status train(const model_pair *j, int k, ts_optimizer opt, const setup *s, const char *device, outcome *out) {
    setenv("TS_CUDA_GRAPHS", k == 0 ? "1" : "0", 1);
    int64_t c0 = ts_counter_get("GraphCaptures"), r0 = ts_counter_get("GraphReplays"), n0 = ts_counter_get("StepsNotRecorded"),
            s0 = ts_counter_get("StepsReplayed"), o0 = ts_counter_get("OutfeedsStreamed");
    ts_options *o = ts_options_new();
    ts_model *m = NULL;
    ts_outfeed *q = NULL;
    ts_status st = o ? TS_OK : TS_ERR_OUT_OF_MEMORY;
    if (!st && s->outfeed) st = ts_outfeed_new(&q, &(ts_outfeed_config){.name = "grads", .depth = 4096});
    if (!st && q) st = ts_options_outfeed_gradients(o, q, 1);
    if (!st) st = ts_options_set_device(o, device);
    if (!st) st = ts_options_set_gradient_accumulation(o, s->accum);
    if (!st) st = ts_options_set_device_iterations(o, s->steps);
    if (!st) st = ts_options_set_check_numerics(o, s->check);
    if (!st) st = ts_options_anchor(o, "l", ts_tensor_name(j->loss[k]), TS_OUTPUT_SUM, 0);
    if (!st) st = ts_options_watch(o, "*", s->what ? s->what : TS_WATCH_STATS, s->period);
    if (!st) st = ts_model_training(&m, j->g[k], j->loss[k], o, opt);
    ts_lr_schedule cosine = {.kind = TS_LR_COSINE, .warmup_steps = 2, .total_steps = 8, .min_lr = 1e-3};
    if (!st && s->schedule) st = ts_model_set_lr_schedule(m, &cosine);
    for (int r = 0; !st && r < RUNS; r++) st = ts_model_run(m, j->in_names, j->in, 2);
    ts_array a;
    if (!st) st = ts_model_anchored(m, "l", &a);
    if (!st) out->loss = ((const float *)a.data)[0];
    const ts_watch_result *w = NULL;
    size_t nw = 0;
    if (!st) st = ts_model_watch_results(m, &w, &nw);
    for (size_t i = 0; !st && i < nw && out->n < MAX_WATCHED; i++) {
        out->name[out->n] = strdup(w[i].name);
        out->step[out->n] = w[i].step;
        const ts_summary *sm = w[i].summary;
        uint64_t h = 1469598103934665603ull;
        for (int b = 0; b < TS_LOG2_BINS; b++) h = (h ^ (uint64_t)sm->log2_counts[b]) * 1099511628211ull;
        for (int b = 0; b < TS_TB_BINS; b++) h = (h ^ (uint64_t)sm->tb_counts[b]) * 1099511628211ull;
        out->counts[out->n] = sm->what & TS_WATCH_HISTOGRAM ? h : 0;
        out->stats[out->n++] = sm->stats;
    }
    out->n_records = 0, out->records = 1469598103934665603ull, out->record_sum = out->record_abs = 0;
    ts_outfeed_record r;
    while (!st && q && ts_outfeed_dequeue(q, &r, 0) == TS_OK) { /* in the order they were made */
        uint64_t h = out->records ^ (uint64_t)r.sample ^ ((uint64_t)r.run << 20);
        for (const char *c = r.key; *c; c++) h = (h ^ (uint64_t)(unsigned char)*c) * 1099511628211ull;
        out->records = h * 1099511628211ull;
        int64_t n = 1;
        for (int d = 0; d < r.array.ndim; d++) n *= r.array.shape[d];
        for (int64_t i = 0; i < n; i++) out->record_sum += ((const float *)r.array.data)[i], out->record_abs += fabs(((const float *)r.array.data)[i]);
        out->n_records++;
    }
    out->captures = ts_counter_get("GraphCaptures") - c0;
    out->replays = ts_counter_get("GraphReplays") - r0;
    out->refused = ts_counter_get("StepsNotRecorded") - n0;
    out->steps_replayed = ts_counter_get("StepsReplayed") - s0;
    out->streamed = ts_counter_get("OutfeedsStreamed") - o0;
    ts_model_free(m);
    ts_options_free(o);
    ts_outfeed_free(q);
    unsetenv("TS_CUDA_GRAPHS");
    return st;
}

/* |a - b| within tol of the magnitude (0: bit for bit, NaN equal to NaN) */
static bool same(double a, double b, double mag, double tol) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return tol == 0 ? a == b : fabs(a - b) <= tol * (fabs(mag) + 1e-6);
}

static void compare(const model_pair *j, ts_optimizer opt, const setup *s, const char *what, const char *device, double tol) {
    static outcome rec, plain;
    ts_status st = train(j, 0, opt, s, device, &rec);
    CHECK_OK(st, "%s %s: %d runs recorded on %s", j->name, what, RUNS, device);
    ts_status st2 = train(j, 1, opt, s, device, &plain);
    CHECK_OK(st2, "%s %s: %d runs call by call on %s", j->name, what, RUNS, device);
    if (!st && !st2) {
        int64_t steps = (int64_t)RUNS * s->steps;
        if (s->check == TS_CHECK_OFF) { /* the whole run one launch; a longer one a launch per 64 steps (TS_RECORDED_STEPS) */
            int64_t launches = (int64_t)RUNS * ((s->steps + 63) / 64);
            CHECK(rec.captures >= 1 && rec.replays >= launches / 2 && rec.captures + rec.replays == launches && rec.refused == 0 &&
                      rec.steps_replayed == steps,
                  "%s %s: %lld steps in %lld launches: %lld recorded, %lld replayed (%lld steps), %lld not recorded", j->name, what,
                  (long long)steps, (long long)launches, (long long)rec.captures, (long long)rec.replays, (long long)rec.steps_replayed,
                  (long long)rec.refused);
        } else {
            CHECK(rec.captures == 0 && rec.replays == 0 && rec.refused == steps,
                  "%s %s: numeric checks keep all %lld steps call by call (%lld recorded, %lld not)", j->name, what, (long long)steps,
                  (long long)rec.captures, (long long)rec.refused);
        }
        CHECK(plain.captures == 0 && plain.replays == 0, "%s %s: TS_CUDA_GRAPHS=0 records nothing (%lld)", j->name, what,
              (long long)plain.captures);
        char worst[256] = "";
        double e = pair_weights_error(j, worst, sizeof worst);
        CHECK(tol == 0 ? e == 0 : e <= tol, "%s %s: the weights the same recorded and call by call (worst %s: %.3g)", j->name, what, worst, e);
        CHECK(same(rec.loss, plain.loss, plain.loss, tol), "%s %s: the loss anchor %.9g recorded, %.9g call by call", j->name, what, rec.loss,
              plain.loss);
        int bad = 0, matched = 0;
        const char *first = "";
        for (int i = 0; i < rec.n && i < plain.n; i++) {
            const ts_stats *x = &rec.stats[i], *y = &plain.stats[i];
            double mag = fmax(fabs(y->min), fabs(y->max));
            bool ok = !strcmp(rec.name[i], plain.name[i]) && rec.step[i] == plain.step[i] && x->count == y->count && x->nans == y->nans &&
                      rec.counts[i] == plain.counts[i] && (!(s->what & TS_WATCH_HISTOGRAM) || rec.counts[i] != 0) &&
                      x->zeros == y->zeros && same(x->mean, y->mean, mag, tol) && same(x->std, y->std, mag, tol) &&
                      same(x->min, y->min, mag, tol) && same(x->max, y->max, mag, tol);
            if (!ok && !bad++) first = rec.name[i];
            matched += ok;
        }
        CHECK(rec.n == plain.n && rec.n > 0 && bad == 0, "%s %s: every summary (%d, %d) the same, taken at the same step (%d differ, first %s)",
              j->name, what, rec.n, plain.n, bad, first);
        if (s->outfeed)
            CHECK(rec.n_records == plain.n_records && rec.n_records > 0 && rec.n_records % (RUNS * s->accum * s->steps) == 0 && rec.records == plain.records &&
                      same(rec.record_sum, plain.record_sum, plain.record_abs, tol),
                  "%s %s: the outfeed's %d records (%d call by call: one per parameter a micro-batch) in the same order with the same values (sums %.9g, %.9g)", j->name, what,
                  rec.n_records, plain.n_records, rec.record_sum, plain.record_sum);
        if (s->outfeed) /* each step's pushed while the run went (a host function after its copies), recorded or not */
            CHECK(rec.streamed == rec.n_records && plain.streamed == plain.n_records,
                  "%s %s: every record streamed while the run went (%lld and %lld of %d)", j->name, what, (long long)rec.streamed,
                  (long long)plain.streamed, rec.n_records);
    }
    outcome_free(&rec);
    outcome_free(&plain);
}

/* OpTime.<Op> on the device (exec/op_times.c): each kernel of a step
 * launched call by call timed by a pair of events on the device's clock,
 * read after the run; nothing from a replayed step (the host's walk of it
 * is no kernel's time); a run of more micro-batches than a node keeps
 * events for has the rest of its calls estimated from the timed ones. */
static void op_times(const char *device) {
    enum { RUNS_TIMED = 4, MANY = 400 };
    model_pair p;
    CHECK_OK(pair_mlp(&p, 16, (int64_t)MANY * 16, 781), "mlp built twice");
    int64_t per_mb = 0; /* the kernel calls of a micro-batch: forward and backward */
    for (int k = 0; k < 3; k++) { /* call by call; recorded and replayed; call by call, MANY micro-batches a run */
        int A = k == 2 ? MANY : 1, runs = k == 2 ? 1 : RUNS_TIMED;
        const char *what = k == 0 ? "TS_CUDA_GRAPHS=0" : k == 1 ? "recorded" : "TS_CUDA_GRAPHS=0, 400 micro-batches a run";
        ts_array in[2] = {p.in[0], p.in[1]};
        in[0].shape[0] = in[1].shape[0] = 16 * A; /* one run's samples */
        setenv("TS_CUDA_GRAPHS", k == 1 ? "1" : "0", 1);
        ts_metrics_reset();
        ts_options *o = ts_options_new();
        ts_model *m = NULL;
        ts_status st = o ? ts_options_set_device(o, device) : TS_ERR_OUT_OF_MEMORY;
        if (!st) st = ts_options_set_gradient_accumulation(o, A);
        if (!st) st = ts_model_training(&m, p.g[0], p.loss[0], o, ts_sgd(0.01f, 0, 0));
        int64_t first = 0; /* the calls the first run timed */
        for (int r = 0; !st && r < runs; r++) {
            st = ts_model_run(m, p.in_names, in, 2);
            if (r == 0) first = ts_counter_get("OpCallsTimed");
        }
        CHECK_OK(st, "mlp: %d runs on %s (%s)", runs, device, what);
        ts_model_free(m);
        ts_options_free(o);
        char *rep = ts_metrics_report();
        long long n_mm = 0, n_run = 0, n_opt = 0;
        double mm = 0, run = 0, opt = 0;
        bool has_mm = rep && report_timing(rep, "OpTime.MatMul", &n_mm, &mm), has_run = rep && report_timing(rep, "DeviceTime.Run", &n_run, &run);
        bool has_opt = rep && report_timing(rep, "OpTime.Optimizer", &n_opt, &opt);
        int64_t timed = ts_counter_get("OpCallsTimed"), estimated = ts_counter_get("OpCallsEstimated");
        CHECK(has_run && n_run == runs && run > 0, "%s: DeviceTime.Run, one sample a run (%lld of %d), %.0f ns", what, n_run, runs, run);
        if (k == 0) {
            per_mb = first - 1; /* and the optimizer's step */
            CHECK(has_mm && n_mm == runs && mm > 0 && mm <= run,
                  "%s: OpTime.MatMul from the device's events, one sample a run (%lld of %d), %.0f ns in all, within the runs' "
                  "DeviceTime.Run (%.0f ns)", what, n_mm, runs, mm, run);
            CHECK(has_opt && n_opt == runs && opt > 0 && opt + mm <= run, "%s: OpTime.Optimizer too (%lld samples, %.0f ns)", what, n_opt, opt);
            CHECK(per_mb >= 6 && timed == RUNS_TIMED * first && estimated == 0,
                  "%s: every kernel call timed (%lld a run, %lld in all), none estimated (%lld)", what, (long long)first, (long long)timed,
                  (long long)estimated);
        } else if (k == 1) {
            CHECK(rep && !strstr(rep, "Metric: OpTime.") && timed == 0 && estimated == 0 && ts_counter_get("GraphCaptures") + ts_counter_get("GraphReplays") == runs,
                  "%s: no OpTime from the %d steps recorded or replayed (the host's walk is no kernel's time), no call timed (%lld)", what,
                  runs, (long long)timed);
        } else {
            CHECK(timed > 0 && estimated > 0 && timed + estimated == MANY * per_mb + 1,
                  "%s: %lld kernel calls timed and %lld estimated from them, %lld in all (%d micro-batches of %lld and the optimizer)", what,
                  (long long)timed, (long long)estimated, (long long)(timed + estimated), MANY, (long long)per_mb);
            /* most of it estimated from the calls timed: a timed call the
             * machine preempted (tests beside it) raises the estimate, so
             * it is held to twice the run's, not to the run's */
            CHECK(has_mm && n_mm == 1 && mm > 0 && mm <= 2 * run, "%s: OpTime.MatMul %.0f ns (%lld sample), of the order of DeviceTime.Run (%.0f ns)",
                  what, mm, n_mm, run);
        }
        ts_string_free(rep);
    }
    unsetenv("TS_CUDA_GRAPHS");
    pair_free(&p);
}

static int warnings;
static char warning[512];
static void keep_warning(void *user, int level, const char *msg) {
    (void)user;
    if (level != TS_LOG_WARN) return;
    warnings++;
    snprintf(warning, sizeof warning, "%s", msg);
}

int main(void) {
    const char *device = pair_device("test_replay");
    if (!device) return 77;
    ts_status st;
    double tol = strcmp(device, "cpu-staged") == 0 ? 0 : 1e-6;
    model_pair p;
    { /* MLP: SGD with momentum and a schedule, A = 2; then D = 3 with a watch every 2 runs; then numeric checks */
        const setup plain = {2, 1, 1, TS_CHECK_OFF, true, 0, false}, kinds = {1, 3, 2, TS_CHECK_OFF, true, 0, false},
                    crowded = {1, 10, 1, TS_CHECK_OFF, false, 0, false}, longer = {1, 100, 1, TS_CHECK_OFF, false, 0, false}, checked = {1, 1, 1, TS_CHECK_OUTPUT, false, 0, false},
                    hist = {1, 1, 1, TS_CHECK_OFF, false, TS_WATCH_STATS | TS_WATCH_HISTOGRAM | TS_WATCH_RANGE, false},
                    outfeed = {2, 3, 1, TS_CHECK_OFF, false, 0, true};
        const setup *s[] = {&plain, &kinds, &crowded, &longer, &checked, &hist, &outfeed};
        const char *what[] = {"(A=2, schedule)", "(D=3, watch every 2 runs)", "(D=10)", "(D=100: two launches a run)", "(numeric checks)",
                              "(histograms and ranges on the device)", "(gradients outfed each micro-batch, A=2, D=3)"};
        for (int v = 0; v < 7; v++) {
            CHECK_OK(pair_mlp(&p, 16, (int64_t)s[v]->accum * s[v]->steps * 16, 777), "mlp built twice");
            compare(&p, ts_sgd(0.05f, 0.9f, 1e-4f), s[v], what[v], device, tol);
            pair_free(&p);
        }
    }
    /* LeNet+BN, Adam: the bias corrections change every step, 3 of them in a run's one launch */
    CHECK_OK(pair_cnn(&p, 8, 24, 778), "cnn built twice");
    compare(&p, ts_adam(1e-3f), &(setup){1, 3, 1, TS_CHECK_OFF, false, 0, false}, "(Adam, D=3)", device, tol);
    pair_free(&p);
    /* a small GPT, AdamW */
    CHECK_OK(pair_gpt(&p, 779), "gpt built twice");
    compare(&p, ts_adamw(3e-3f, 0.1f), &(setup){1, 1, 1, TS_CHECK_OFF, false, 0, false}, "(AdamW)", device, tol);
    pair_free(&p);

    /* TS_CUDA_GRAPHS not a boolean: warned about once, taken as on */
    CHECK_OK(pair_mlp(&p, 16, 16, 780), "mlp built twice");
    setenv("TS_CUDA_GRAPHS", "maybe", 1);
    ts_set_log_callback(keep_warning, NULL);
    int64_t c0 = ts_counter_get("GraphCaptures") + ts_counter_get("GraphReplays");
    ts_options *o = ts_options_new();
    ts_model *m = NULL;
    st = ts_options_set_device(o, device);
    if (!st) st = ts_model_training(&m, p.g[0], p.loss[0], o, ts_sgd(0.05f, 0, 0));
    for (int r = 0; !st && r < 3; r++) st = ts_model_run(m, p.in_names, p.in, 2);
    CHECK(!st && ts_counter_get("GraphCaptures") + ts_counter_get("GraphReplays") - c0 == 3 && warnings == 1 &&
              strstr(warning, "TS_CUDA_GRAPHS='maybe' is not a boolean"),
          "TS_CUDA_GRAPHS=maybe: the 3 steps recorded or replayed, one warning (%d: %s)", warnings, warning);
    ts_set_log_callback(NULL, NULL);
    unsetenv("TS_CUDA_GRAPHS");
    /* a recompilation (an anchor added) records its runs again, counted as such */
    int64_t re0 = ts_counter_get("GraphCaptures.Recompiled"), first0 = ts_counter_get("GraphCaptures.FirstRun");
    if (!st) st = ts_model_anchor(m, "h", "Relu:0", TS_OUTPUT_FINAL, 0);
    for (int r = 0; !st && r < 2; r++) st = ts_model_run(m, p.in_names, p.in, 2);
    CHECK(!st && ts_counter_get("GraphCaptures.Recompiled") - re0 == 1 && ts_counter_get("GraphCaptures.FirstRun") == first0 &&
              ts_counter_get("Recompilations.AnchorsChanged") >= 1,
          "an anchor added: the model recompiled (AnchorsChanged) and its next run recorded again, as GraphCaptures.Recompiled (%lld)",
          (long long)(ts_counter_get("GraphCaptures.Recompiled") - re0));
    ts_model_free(m);
    ts_options_free(o);
    pair_free(&p);

    /* what the metrics report says of the runs above: the copies both ways,
     * the host's wait, the replays; on a GPU its memory */
    char *r = ts_metrics_report();
    CHECK(r && strstr(r, "Metric: TransferToDeviceBytes\n") && strstr(r, "Metric: TransferFromDeviceBytes\n") && strstr(r, "Metric: DeviceTime.Run\n") &&
              strstr(r, "Metric: DeviceWait\n") && strstr(r, "Counter: GraphReplays\n") && strstr(r, "Counter: GraphCaptures.FirstRun\n") &&
              strstr(r, "Counter: StepsNotRecorded.NumericChecks\n") && strstr(r, "Metric: InputStaging\n") && !strstr(r, "InputsNotStaged"),
          "the metrics report counts the device's copies (the inputs staged through page-locked memory, every one), its wait, its time "
          "on its own clock, the steps recorded, replayed and not (with why)");
    if (!strncmp(device, "cuda", 4))
        CHECK(r && strstr(r, "Metric: DeviceMemoryPeakBytes\n") && strstr(r, "Metric: DeviceMemoryFreeBytes\n"),
              "on a GPU the report gives the device's memory: peak and free");
    ts_string_free(r);
    op_times(device); /* last: it resets the metrics */
    return check_summary("test_replay");
}
