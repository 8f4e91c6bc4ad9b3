/* test_dist.c -- data-parallel replicas (docs/design.md: the replica axis in
 * "Output modes and the replica axis", and "Replicas and pipeline stages").
 *
 * Alone (as ctest runs it) it checks what a job of one rank says: asking for
 * replicas without mpirun is a clear error. Under `mpirun -np R`
 * (tests/test_dist_mpi.sh runs R = 2 and 3) every rank checks:
 * - same numbers: R replicas of micro-batch b give the same weights after
 *   10 steps as one process of micro-batch R*b, with SGD + momentum (D=2)
 *   and with Adam (A=2), to float tolerance;
 * - the replica axis: an ALL anchor of Gradient___fc1.bias is [S, R, 320]
 *   whose mean over replicas is the one-process gradient at the first step,
 *   a FINAL Accum___ is [R, *T] with identical rows;
 * - watch results: a row per replica (equal to a summary of that replica's
 *   anchored gradient) and a reduced row over all of them;
 * - a desync (one rank's weights changed) is TS_ERR_DIST naming the rank and
 *   the parameter on every rank, at the next check (every 2 steps); of 3
 *   ranks also rank 0's change, named against the majority;
 * - the reduced watch row: NaN and Inf counts summed over the replicas,
 *   min and max with the replica each came from;
 * - loss scaling: ranks with different scaling options fail at compile
 *   naming it; a gradient overflow on one rank skips the step on all;
 * - a 1F1B pipeline gives the weights of the same GPipe run bit for bit;
 * - outfeed records: each rank's queue holds its own, rank 0's every
 *   rank's (its own first, then by rank), tagged with their replica or
 *   stage, with the values one process computes (replicas and pipelines,
 *   also when a stage has no outfeed);
 * - batch norm's running statistics of the CNN are averaged over the
 *   replicas (checked against the shards' statistics) and a buffer changed
 *   on one rank is a desync naming it;
 * - ts_model_cancel on the last rank alone, during a step, stops every rank
 *   after that step (replicas and a pipeline): each returns
 *   TS_ERR_CANCELLED with the same steps done, and the next run is whole,
 *   the weights the same on every rank (the checksum before it agrees).
 * `test_dist nan BAD`: a numeric stop on rank BAD stops every rank at its
 * step with its report (tests/test_dist_mpi.sh counts the ranks' lines).
 * `test_dist hang` is the failure case: the last rank stops answering and
 * the others must fail within the timeout with a message, and `test_dist die`
 * kills it (the script checks the time and the message). `test_dist --available` exits 0 iff this build
 * has MPI. */
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "cnn.h"
#include "fixture.h"
#include "mlp.h"
#include "tensorscope.h"

enum { B = 4, PIXELS = 784, CLASSES = 10 };

static const char *const PARAMS[] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"};

/* n samples of deterministic data, the same on every rank. */
typedef struct samples {
    float *x;
    int32_t *y;
    int64_t n;
} samples;

/* Room for n samples; the test stops when there is none. */
static samples data_new(int64_t n) {
    samples d = {malloc((size_t)n * PIXELS * sizeof(float)), malloc((size_t)n * sizeof(int32_t)), n};
    if (!d.x || !d.y) {
        fprintf(stderr, "test_dist: out of memory for %lld samples\n", (long long)n);
        exit(1);
    }
    return d;
}

static void data_free(samples *d) {
    free(d->x);
    free(d->y);
}

/* Fills d from `seed`. */
static void make_data(samples *d, unsigned seed) {
    uint64_t s = seed * 2654435761u + 1;
    for (int64_t i = 0; i < d->n * PIXELS; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        d->x[i] = (float)((double)(s >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
    }
    for (int64_t i = 0; i < d->n; i++) d->y[i] = (int32_t)((i * 7 + seed) % CLASSES);
}

typedef struct trained {
    mlp net;
    ts_model *m;
    ts_options *o;
} trained;

static ts_status setup(trained *t, int64_t batch, int replicas, int D, int A, ts_optimizer opt) {
    memset(t, 0, sizeof *t);
    ts_status st = test_mlp_build(&t->net, batch, 7);
    if (st) return st;
    t->o = ts_options_new();
    if (!t->o) return TS_ERR_OUT_OF_MEMORY;
    if ((st = ts_options_set_device_iterations(t->o, D)) || (st = ts_options_set_gradient_accumulation(t->o, A)) ||
        (st = ts_options_set_threads(t->o, 1)) || (st = ts_options_set_replication(t->o, replicas, 1)))
        return st;
    ts_options_anchor(t->o, "g1", "Gradient___fc1.bias", TS_OUTPUT_ALL, 0);
    ts_options_anchor(t->o, "acc3", "Accum___fc3.bias", TS_OUTPUT_FINAL, 0);
    ts_options_anchor(t->o, "g3", "Gradient___fc3.bias", TS_OUTPUT_FINAL, 0);
    ts_options_watch(t->o, "Gradient___fc3.bias", TS_WATCH_STATS | TS_WATCH_HISTOGRAM, 1);
    if ((st = ts_model_training(&t->m, t->net.g, t->net.loss, t->o, opt))) return st;
    return ts_model_compile(t->m);
}

static void teardown(trained *t) {
    ts_model_free(t->m);
    ts_options_free(t->o);
    ts_graph_free(t->net.g);
}

static ts_status run(ts_model *m, const samples *d) {
    const char *names[2] = {"x", "labels"};
    ts_array in[2] = {ts_array_f32(d->x, 4, (int64_t[]){d->n, 1, 28, 28}), ts_array_i32(d->y, 1, (int64_t[]){d->n})};
    return ts_model_run(m, names, in, 2);
}

static int weights_close(const trained *a, const trained *b, const char *label, double rtol, double atol) {
    int failed = 0;
    for (size_t i = 0; i < sizeof PARAMS / sizeof PARAMS[0]; i++) {
        ts_array wa, wb;
        ts_tensor_info(ts_graph_find(a->net.g, PARAMS[i]), &wa);
        ts_tensor_info(ts_graph_find(b->net.g, PARAMS[i]), &wb);
        char what[128];
        snprintf(what, sizeof what, "%s: %s", label, PARAMS[i]);
        failed |= ts_expect_close(what, wa.data, wb.data, ts_array_numel(&wa), rtol, atol);
    }
    return failed;
}

/* R replicas of micro-batch B against one process of micro-batch R*B. */
static void same_numbers(int R, const char *label, ts_optimizer opt, int D, int A, int runs, double rtol, double atol) {
    int64_t S = (int64_t)D * A, n = S * R * B;
    samples d = data_new(n);
    trained rep, one;
    CHECK_OK(setup(&rep, B, R, D, A, opt), "%s: %d replicas of micro-batch %d compile", label, R, B);
    CHECK_OK(setup(&one, (int64_t)R * B, 1, D, A, opt), "%s: one process of micro-batch %d compiles", label, R * B);
    if (!rep.m || !one.m) goto out;
    for (int r = 0; r < runs; r++) {
        make_data(&d, (unsigned)r);
        ts_status a = run(rep.m, &d), b = run(one.m, &d);
        if (a || b) {
            CHECK(0, "%s: run %d: %s", label, r, ts_last_error());
            goto out;
        }
        if (r == 0) { /* the replica axis, at the first step (same weights) */
            ts_array g1, g1one, acc;
            CHECK_OK(ts_model_anchored(rep.m, "g1", &g1), "%s: anchored g1", label);
            ts_model_anchored(one.m, "g1", &g1one);
            CHECK(g1.ndim == 3 && g1.shape[0] == S && g1.shape[1] == R && g1.shape[2] == 320, "%s: ALL anchor is [S=%lld, R=%d, 320]: got ndim %d [%lld, %lld, ...]",
                  label, (long long)S, R, g1.ndim, (long long)g1.shape[0], (long long)g1.shape[1]);
            float mean[320];
            for (int i = 0; i < 320; i++) {
                double s = 0;
                for (int q = 0; q < R; q++) s += ((const float *)g1.data)[q * 320 + i];
                mean[i] = (float)(s / R);
            }
            CHECK_RESULT(ts_expect_close("mean over replicas of Gradient___fc1.bias[0] = the one-process gradient", mean, g1one.data, 320, 1e-4, 1e-7));
            CHECK_OK(ts_model_anchored(rep.m, "acc3", &acc), "%s: anchored acc3", label);
            CHECK(acc.ndim == 2 && acc.shape[0] == R && acc.shape[1] == CLASSES, "%s: FINAL anchor of Accum___fc3.bias is [R, 10]", label);
            int same = 1;
            for (int q = 1; q < R; q++) same &= memcmp(acc.data, (const float *)acc.data + q * CLASSES, CLASSES * sizeof(float)) == 0;
            CHECK(same, "%s: Accum___ (after the all-reduce) is the same on every replica", label);
            /* watches: a row per replica, then the reduced row */
            const ts_watch_result *w;
            size_t nw = 0;
            ts_array g3;
            CHECK_OK(ts_model_watch_results(rep.m, &w, &nw), "%s: watch results", label);
            ts_model_anchored(rep.m, "g3", &g3);
            CHECK(nw == (size_t)R + 1 && w[R].replica == -1 && w[0].replica == 0, "%s: %zu watch rows: one per replica and the reduced one", label, nw);
            for (int q = 0; q < R && nw == (size_t)R + 1; q++) {
                ts_summary s;
                ts_summarize_f32((const float *)g3.data + q * CLASSES, CLASSES, TS_WATCH_STATS, &s);
                CHECK(w[q].summary->stats.count == CLASSES && fabs(w[q].summary->stats.mean - s.stats.mean) < 1e-9 &&
                          fabs(w[q].summary->stats.std - s.stats.std) < 1e-9 && w[q].summary->stats.max == s.stats.max,
                      "%s: replica %d's row summarises that replica's gradient (mean %.6g)", label, q, s.stats.mean);
            }
            if (nw == (size_t)R + 1) {
                ts_summary all;
                ts_summarize_f32(g3.data, (int64_t)R * CLASSES, TS_WATCH_STATS | TS_WATCH_HISTOGRAM, &all);
                const ts_summary *red = w[R].summary;
                int64_t hist = 0;
                for (int k = 0; k < TS_LOG2_BINS; k++) hist += red->log2_counts[k] == all.log2_counts[k] ? 0 : 1;
                double tol = 1e-6 * all.stats.std; /* merged moments vs one pass: rounding only */
                CHECK(red->stats.count == R * CLASSES && fabs(red->stats.mean - all.stats.mean) <= tol &&
                          fabs(red->stats.std - all.stats.std) <= tol && red->stats.min == all.stats.min &&
                          red->stats.max == all.stats.max && hist == 0,
                      "%s: the reduced row is the summary of every replica's values (n=%lld, mean %.6g vs %.6g, std %.6g vs %.6g)",
                      label, (long long)red->stats.count, red->stats.mean, all.stats.mean, red->stats.std, all.stats.std);
            }
        }
    }
    CHECK(ts_model_steps(rep.m) == (int64_t)D * runs, "%s: %lld steps", label, (long long)ts_model_steps(rep.m));
    CHECK_RESULT(weights_close(&rep, &one, label, rtol, atol));
out:
    teardown(&rep);
    teardown(&one);
    data_free(&d);
}

/* Every record a queue holds now, copied (at most 256). */
typedef struct taken {
    int n;
    struct {
        char key[16];
        int64_t run, sample, numel;
        int replica, stage;
        float *v;
    } r[256];
} taken;

static void take_all(ts_outfeed *q, taken *t) {
    ts_outfeed_record rec;
    while (t->n < 256 && ts_outfeed_dequeue(q, &rec, 0) == TS_OK) {
        snprintf(t->r[t->n].key, sizeof t->r[t->n].key, "%s", rec.key);
        t->r[t->n].run = rec.run;
        t->r[t->n].sample = rec.sample;
        t->r[t->n].replica = rec.replica;
        t->r[t->n].stage = rec.stage;
        t->r[t->n].numel = ts_array_numel(&rec.array);
        t->r[t->n].v = malloc((size_t)t->r[t->n].numel * sizeof(float));
        if (t->r[t->n].v) memcpy(t->r[t->n].v, rec.array.data, (size_t)t->r[t->n].numel * sizeof(float));
        t->n++;
    }
}

static void taken_free(taken *t) {
    for (int i = 0; i < t->n; i++) free(t->r[i].v);
    t->n = 0;
}

/* The pipeline's outfeed q against the unpipelined model's q1, after
 * their runs: each rank holds the records of the tensors of its stage;
 * rank 0 holds every stage's, its own then by rank, each tagged with its
 * stage, in the order the unpipelined model made them, with its values. */
static void pipeline_outfeeds(const char *label, ts_outfeed *q, ts_outfeed *q1, const char *const *keys, const int *key_stage, int n_keys,
                              int per_key) {
    taken *t = calloc(1, sizeof *t), *ref = calloc(1, sizeof *ref);
    if (!t || !ref) {
        free(t);
        free(ref);
        return;
    }
    take_all(q, t);
    take_all(q1, ref);
    int me = ts_dist_rank(), want = 0, bad = 0;
    for (int k = 0; k < n_keys; k++) want += me == 0 || key_stage[k] == me ? per_key : 0;
    CHECK(t->n == want && ref->n == n_keys * per_key, "%s: rank %d holds %d outfeed records, expected %d (unpipelined: %d of %d)", label, me, t->n, want, ref->n,
          n_keys * per_key);
    for (int k = 0; k < n_keys && t->n == want && ref->n == n_keys * per_key; k++) {
        int i = 0, j = 0, n = 0;
        if (me != 0 && key_stage[k] != me) continue;
        for (;; i++, j++, n++) { /* the k-th key's records, in both queues */
            while (i < t->n && strcmp(t->r[i].key, keys[k])) i++;
            while (j < ref->n && strcmp(ref->r[j].key, keys[k])) j++;
            if (i == t->n || j == ref->n) break;
            if (t->r[i].stage != key_stage[k] || t->r[i].replica != 0 || t->r[i].run != ref->r[j].run || t->r[i].sample != ref->r[j].sample ||
                t->r[i].numel != ref->r[j].numel) {
                CHECK(0, "%s: rank %d's record %d of '%s' is stage %d replica %d run %lld sample %lld, expected stage %d run %lld sample %lld", label,
                      me, n, keys[k], t->r[i].stage, t->r[i].replica, (long long)t->r[i].run, (long long)t->r[i].sample, key_stage[k],
                      (long long)ref->r[j].run, (long long)ref->r[j].sample);
                bad = 1;
                break;
            }
            if (ts_expect_close(keys[k], t->r[i].v, ref->r[j].v, t->r[i].numel, 1e-4, 1e-6)) {
                CHECK(0, "%s: rank %d's record %d of '%s' differs from the unpipelined one", label, me, n, keys[k]);
                bad = 1;
                break;
            }
        }
        CHECK(n == per_key || bad, "%s: rank %d matched %d records of '%s', expected %d", label, me, n, keys[k], per_key);
    }
    for (int i = 1; i < t->n; i++) /* by rank: the stages come in order within a run */
        bad |= t->r[i].run == t->r[i - 1].run && t->r[i].stage < t->r[i - 1].stage;
    CHECK(!bad, "%s: rank %d's outfeed records carry their stage and the unpipelined values, %s", label, me,
          me ? "its own stage's" : "every stage's, by rank");
    taken_free(t);
    taken_free(ref);
    free(t);
    free(ref);
}

/* A pipeline of K stages against the same model in one process. */
/* The weights a pipeline ended with, to compare the next one with. */
static float *last_weights;
static size_t n_last_weights;

/* Copies g's parameters into last_weights (keep) or says whether they are
 * the same bit for bit (!keep). */
static bool weights_as_before(ts_graph *g, bool keep) {
    size_t n = 0;
    bool same = last_weights != NULL;
    for (size_t i = 0; i < sizeof PARAMS / sizeof PARAMS[0]; i++) {
        ts_array w;
        ts_tensor_info(ts_graph_find(g, PARAMS[i]), &w);
        size_t k = (size_t)ts_array_numel(&w);
        if (keep) {
            float *grown = realloc(last_weights, (n + k) * sizeof *grown);
            if (!grown) return false;
            last_weights = grown;
            memcpy(last_weights + n, w.data, k * sizeof(float));
        } else {
            same = same && n + k <= n_last_weights && memcmp(last_weights + n, w.data, k * sizeof(float)) == 0;
        }
        n += k;
    }
    if (keep) n_last_weights = n;
    return same;
}

static void pipeline_numbers(int K, const char *label, ts_optimizer opt, int D, int A, int runs, double rtol, double atol, bool stage1_only,
                             ts_pipeline_schedule sched) {
    int64_t n = (int64_t)D * A * B;
    samples d = data_new(n);
    const char *splits[] = {"fc2", "fc3"};
    trained pipe, one;
    CHECK_OK(setup(&pipe, B, 1, D, A, opt), "%s: model", label);
    CHECK_OK(setup(&one, B, 1, D, A, opt), "%s: the unpipelined model", label);
    ts_model_free(pipe.m);
    pipe.m = NULL;
    /* outfeeds of stage 0 (Relu:0), stage 1 (Relu:1) and the last stage
     * (loss), or of stage 1 alone (the other stages send rank 0 nothing) */
    static const char *const all_keys[] = {"Relu:0", "Relu:1", "loss"};
    const char *const *keys = stage1_only ? all_keys + 1 : all_keys;
    int all_stages[] = {0, 1, K - 1}, *key_stage = stage1_only ? all_stages + 1 : all_stages, n_keys = stage1_only ? 1 : 3;
    ts_outfeed *q = NULL, *q1 = NULL;
    ts_outfeed_config qc = {.name = "stages", .mode = TS_OUTFEED_ALL, .depth = 128};
    CHECK_OK(ts_outfeed_new(&q, &qc), "%s: outfeed", label);
    CHECK_OK(ts_outfeed_new(&q1, &qc), "%s: the unpipelined model's outfeed", label);
    for (int k = 0; k < n_keys; k++) {
        ts_outfeed_add(pipe.net.g, q, keys[k], ts_graph_find(pipe.net.g, keys[k]));
        ts_outfeed_add(one.net.g, q1, keys[k], ts_graph_find(one.net.g, keys[k]));
    }
    CHECK_OK(ts_options_set_pipeline(pipe.o, K, splits, K - 1), "%s: %d stages split at fc2%s", label, K, K > 2 ? ", fc3" : "");
    CHECK_OK(ts_options_set_pipeline_schedule(pipe.o, sched), "%s: schedule", label);
    ts_options_anchor(pipe.o, "loss_all", "loss", TS_OUTPUT_ALL, 0);
    ts_options_anchor(one.o, "loss_all", "loss", TS_OUTPUT_ALL, 0);
    ts_model_free(one.m);
    one.m = NULL;
    CHECK_OK(ts_model_training(&pipe.m, pipe.net.g, pipe.net.loss, pipe.o, opt), "%s: pipelined model", label);
    CHECK_OK(ts_model_training(&one.m, one.net.g, one.net.loss, one.o, opt), "%s: reference model", label);
    if (!pipe.m || !one.m) goto out;
    for (int r = 0; r < runs; r++) {
        make_data(&d, (unsigned)r + 11);
        ts_status a = run(pipe.m, &d), b = run(one.m, &d);
        if (a || b) {
            CHECK(0, "%s: run %d: %s", label, r, ts_last_error());
            goto out;
        }
        if (r == runs - 1) { /* anchors of the first and the last stage reach every rank */
            ts_array g1p, g1o, lp, lo;
            CHECK_OK(ts_model_anchored(pipe.m, "g1", &g1p), "%s: Gradient___fc1.bias (stage 0) anchored on rank %d", label, ts_dist_rank());
            ts_model_anchored(one.m, "g1", &g1o);
            CHECK(g1p.ndim == 2 && g1p.shape[0] == D * A, "%s: ALL anchor shape [S, 320], no replica axis", label);
            CHECK_RESULT(ts_expect_close("pipelined Gradient___fc1.bias = unpipelined", g1p.data, g1o.data, ts_array_numel(&g1o), rtol, 1e-7));
            CHECK_OK(ts_model_anchored(pipe.m, "loss_all", &lp), "%s: loss (last stage) anchored on rank %d", label, ts_dist_rank());
            ts_model_anchored(one.m, "loss_all", &lo);
            CHECK_RESULT(ts_expect_close("pipelined loss = unpipelined", lp.data, lo.data, ts_array_numel(&lo), rtol, 1e-6));
        }
    }
    CHECK(ts_model_steps(pipe.m) == (int64_t)D * runs, "%s: %lld steps", label, (long long)ts_model_steps(pipe.m));
    CHECK_RESULT(weights_close(&pipe, &one, label, rtol, atol));
    if (sched == TS_PIPELINE_1F1B) /* the same backwards in the same order as the GPipe run before it */
        CHECK(weights_as_before(pipe.net.g, false), "%s: the weights are those of the same run under GPipe, bit for bit", label);
    else
        weights_as_before(pipe.net.g, true);
    pipeline_outfeeds(label, q, q1, keys, key_stage, n_keys, runs * D * A);
out:
    teardown(&pipe);
    ts_outfeed_free(q);
    ts_outfeed_free(q1);
    teardown(&one);
    data_free(&d);
}

/* Rank `who`'s fc2.bias changed behind the model's back after its first
 * step, with the weights compared every 2 steps: the second run (step 1)
 * is not checked and goes on, the third (step 2) is: TS_ERR_DIST on every
 * rank naming rank `who` and 'fc2.bias' (the first parameter, in graph
 * order, that differs: fc1's are the same). Of 3 ranks rank 0 can be the
 * odd one out: named against the others, not the others against it. */
static void desync(int R, int who) {
    int64_t n = (int64_t)R * B;
    samples d = data_new(n);
    trained t;
    CHECK_OK(setup(&t, B, R, 1, 1, ts_sgd(0.01f, 0, 0)), "desync: compile");
    ts_model_free(t.m);
    t.m = NULL;
    ts_options_set_replication(t.o, R, 2);
    CHECK_OK(ts_model_training(&t.m, t.net.g, t.net.loss, t.o, ts_sgd(0.01f, 0, 0)), "desync: a model checking every 2 steps");
    make_data(&d, 3);
    CHECK_OK(run(t.m, &d), "desync: a first run in step (checked)");
    if (ts_dist_rank() == who) {
        ts_tensor *p = ts_graph_find(t.net.g, "fc2.bias");
        ts_array v;
        ts_tensor_info(p, &v);
        float *bump = malloc((size_t)ts_array_numel(&v) * sizeof *bump);
        memcpy(bump, v.data, (size_t)ts_array_numel(&v) * sizeof *bump);
        bump[5] += 1e-3f;
        ts_array b = ts_array_f32(bump, v.ndim, v.shape);
        ts_param_set(p, &b);
        free(bump);
    }
    CHECK_OK(run(t.m, &d), "desync: rank %d of %d: the second run (step 1) is not checked", ts_dist_rank(), R);
    ts_status st = run(t.m, &d);
    char want[64];
    snprintf(want, sizeof want, "rank %d's 'fc2.bias'", who);
    CHECK(st == TS_ERR_DIST && strstr(ts_last_error(), want) && strstr(ts_last_error(), "out of sync after 2 steps"),
          "desync: at the check of step 2, TS_ERR_DIST naming rank %d and the parameter on rank %d: %s", who, ts_dist_rank(), ts_last_error());
    teardown(&t);
    data_free(&d);
}

/* Outfeed records say which replica produced them, and rank 0 gets every
 * replica's: R replicas with A = 2 micro-batches against one process of
 * micro-batch R*B, whose Relu:0 rows [r*B, (r+1)*B) are replica r's. */
static void outfeed_tagged(int R) {
    enum { A = 2 };
    int64_t n = (int64_t)R * B * A;
    samples d = data_new(n);
    trained rep, one;
    ts_outfeed *q = NULL, *q1 = NULL, *ql = NULL;
    ts_outfeed_config qc = {.name = "replica", .mode = TS_OUTFEED_ALL, .depth = 16}, qlc = {.name = "last", .mode = TS_OUTFEED_LAST, .depth = 16};
    CHECK_OK(ts_outfeed_new(&ql, &qlc), "outfeed: a LAST queue");
    CHECK_OK(setup(&rep, B, R, 1, A, ts_sgd(0.01f, 0, 0)), "outfeed: %d replicas", R);
    CHECK_OK(setup(&one, (int64_t)R * B, 1, 1, A, ts_sgd(0.01f, 0, 0)), "outfeed: one process");
    CHECK_OK(ts_outfeed_new(&q, &qc), "outfeed: new queue");
    CHECK_OK(ts_outfeed_new(&q1, &qc), "outfeed: the one process's queue");
    if (!rep.m || !one.m || !q || !q1) goto out;
    ts_outfeed_add(rep.net.g, q, "relu", ts_graph_find(rep.net.g, "Relu:0"));
    ts_outfeed_add(rep.net.g, ql, "relu", ts_graph_find(rep.net.g, "Relu:0"));
    ts_outfeed_add(one.net.g, q1, "relu", ts_graph_find(one.net.g, "Relu:0"));
    CHECK_OK(ts_model_compile(rep.m), "outfeed: %d replicas recompile with the outfeed", R);
    CHECK_OK(ts_model_compile(one.m), "outfeed: one process recompiles with the outfeed");
    make_data(&d, 5);
    CHECK_OK(run(rep.m, &d), "outfeed: run");
    CHECK_OK(run(one.m, &d), "outfeed: run of one process");
    taken *t = calloc(1, sizeof *t), *ref = calloc(1, sizeof *ref);
    if (!t || !ref) goto out;
    take_all(q, t);
    take_all(q1, ref);
    int me = ts_dist_rank(), want = me == 0 ? R * A : A, bad = 0;
    CHECK(t->n == want && ref->n == A, "outfeed: rank %d holds %d records (%s), expected %d", me, t->n, me ? "its own" : "every replica's", want);
    for (int i = 0; i < t->n && t->n == want && ref->n == A; i++) {
        int r = me == 0 ? i / A : me, a = i % A; /* rank 0: its own, then by rank, each in order */
        const float *expect = ref->r[a].v + (size_t)r * B * 320;
        if (strcmp(t->r[i].key, "relu") || t->r[i].replica != r || t->r[i].stage != 0 || t->r[i].sample != a || t->r[i].run != 0 ||
            t->r[i].numel != B * 320) {
            CHECK(0, "outfeed: rank %d's record %d is '%s' replica %d stage %d run %lld sample %lld [%lld], expected replica %d sample %d", me, i,
                  t->r[i].key, t->r[i].replica, t->r[i].stage, (long long)t->r[i].run, (long long)t->r[i].sample, (long long)t->r[i].numel, r, a);
            bad = 1;
            break;
        }
        char what[96];
        snprintf(what, sizeof what, "outfeed: rank %d's record %d (replica %d, sample %d) = its rows of Relu:0", me, i, r, a);
        bad |= ts_expect_close(what, t->r[i].v, expect, B * 320, 1e-5, 1e-6);
    }
    CHECK(!bad, "outfeed: rank %d's records carry their replica and the values that replica computed", me);
    taken_free(t);
    take_all(ql, t); /* LAST: the latest record of each replica */
    bad = t->n != (me == 0 ? R : 1);
    for (int i = 0; i < t->n && !bad; i++) bad = t->r[i].replica != (me == 0 ? i : me) || t->r[i].sample != A - 1;
    CHECK(!bad, "outfeed: rank %d's LAST queue holds the latest record of %s (%d records)", me, me ? "its replica" : "each replica", t->n);
    taken_free(t);
    taken_free(ref);
    free(t);
    free(ref);
out:
    teardown(&rep);
    teardown(&one);
    ts_outfeed_free(q);
    ts_outfeed_free(q1);
    ts_outfeed_free(ql);
    data_free(&d);
}

/* Batch norm's running statistics under R replicas of the CNN: after a
 * step each rank's bn1.running_mean and running_var are the mean over the
 * replicas of what each computed from its shard, i.e. (momentum 0.1, from
 * 0 and 1) 0.1 * the mean of the shards' batch means (= the one-process
 * running_mean of batch R*B) and 0.9 + 0.1 * the mean of the shards'
 * unbiased variances, computed here from the one-process conv1 output at
 * the same first step. Then a buffer changed on one rank is a desync the
 * checksum names. */
static void bn_buffers(int R) {
    enum { C = 6, HW = 28 * 28 };
    int64_t n = (int64_t)R * B;
    samples d = data_new(n);
    cnn rep, one;
    ts_model *mr = NULL, *m1 = NULL;
    ts_options *o = ts_options_new(), *o1 = ts_options_new();
    CHECK_OK(test_cnn_build(&rep, B, 3), "bn: %d replicas of the cnn", R);
    CHECK_OK(test_cnn_build(&one, n, 3), "bn: the cnn of micro-batch %lld", (long long)n);
    ts_options_set_threads(o, 1);
    ts_options_set_threads(o1, 1);
    ts_options_set_replication(o, R, 1); /* the checksum before every run */
    ts_options_anchor(o1, "conv1", "conv1/Conv2d:0", TS_OUTPUT_FINAL, 0);
    CHECK_OK(ts_model_training(&mr, rep.g, rep.loss, o, ts_sgd(0.01f, 0, 0)), "bn: replicas' model");
    CHECK_OK(ts_model_training(&m1, one.g, one.loss, o1, ts_sgd(0.01f, 0, 0)), "bn: one process's model");
    if (!mr || !m1) goto out;
    make_data(&d, 9);
    CHECK_OK(run(mr, &d), "bn: a step of %d replicas", R);
    CHECK_OK(run(m1, &d), "bn: a step of one process");
    ts_array x, rm, rv, rm1;
    CHECK_OK(ts_model_anchored(m1, "conv1", &x), "bn: conv1's output anchored");
    ts_tensor_info(ts_graph_find(rep.g, "bn1.running_mean"), &rm);
    ts_tensor_info(ts_graph_find(rep.g, "bn1.running_var"), &rv);
    ts_tensor_info(ts_graph_find(one.g, "bn1.running_mean"), &rm1);
    float want_var[C];
    for (int c = 0; c < C; c++) {
        double var = 0;
        for (int r = 0; r < R; r++) { /* replica r's shard: samples r*B .. r*B + B - 1 */
            double sum = 0, sq = 0;
            for (int64_t i = (int64_t)r * B; i < (int64_t)(r + 1) * B; i++)
                for (int k = 0; k < HW; k++) {
                    double v = ((const float *)x.data)[(i * C + c) * HW + k];
                    sum += v;
                    sq += v * v;
                }
            double N = (double)B * HW, mean = sum / N;
            var += (sq - N * mean * mean) / (N - 1) / R;
        }
        want_var[c] = (float)(0.9 + 0.1 * var);
    }
    CHECK_RESULT(ts_expect_close("bn: bn1.running_mean of the replicas = one process's", rm.data, rm1.data, C, 1e-4, 1e-7));
    CHECK_RESULT(ts_expect_close("bn: bn1.running_var = 0.9 + 0.1 * the mean of the shards' variances", rv.data, want_var, C, 1e-5, 1e-7));
    CHECK_OK(run(mr, &d), "bn: a second step: the checksum (weights and buffers) agrees on every rank");
    if (ts_dist_rank() == R - 1) ((float *)rv.data)[2] += 1e-3f; /* the graph's storage of the buffer */
    ts_status st = run(mr, &d);
    char want[64];
    snprintf(want, sizeof want, "rank %d's 'bn1.running_var'", R - 1);
    CHECK(st == TS_ERR_DIST && strstr(ts_last_error(), want), "bn: a buffer changed on rank %d is a desync naming it, on rank %d: %s", R - 1, ts_dist_rank(),
          ts_last_error());
out:
    ts_model_free(mr);
    ts_model_free(m1);
    ts_options_free(o);
    ts_options_free(o1);
    ts_graph_free(rep.g);
    ts_graph_free(one.g);
    data_free(&d);
}

/* ts_model_cancel on the last rank only, from its log callback during the
 * forward of micro-batch `tick` (a print op of the loss: the last stage). */
static ts_model *cancel_model;
static int cancel_ticks, cancel_tick;

static void cancel_on_tick(void *user, int level, const char *msg) {
    (void)user, (void)level;
    if (strstr(msg, "tick") && !strstr(msg, "tick_gradient") && ++cancel_ticks == cancel_tick && ts_dist_rank() == ts_dist_size() - 1)
        ts_model_cancel(cancel_model);
}

static void cancelled(int R, bool pipeline) {
    const char *label = pipeline ? "cancel: pipeline" : "cancel: replicas";
    int D = 4, A = pipeline ? 2 : 1, K = pipeline ? 1 : R, tick = 2 * A; /* during step 2: every rank stops after it */
    samples d = data_new((int64_t)D * A * K * B);
    trained t;
    memset(&t, 0, sizeof t);
    ts_status st = test_mlp_build(&t.net, B, 7);
    if (!st) ts_print(t.net.g, t.net.loss, "tick");
    t.o = ts_options_new();
    ts_options_set_threads(t.o, 1);
    ts_options_set_device_iterations(t.o, D);
    ts_options_set_gradient_accumulation(t.o, A);
    const char *splits[] = {"fc2", "fc3"};
    if (pipeline) ts_options_set_pipeline(t.o, R, splits, R - 1);
    else ts_options_set_replication(t.o, R, 1); /* the weight checksum before every run */
    if (!st) st = ts_model_training(&t.m, t.net.g, t.net.loss, t.o, ts_sgd(0.05f, 0.9f, 0.0f));
    CHECK_OK(st, "%s: model of %d ranks", label, R);
    if (st) goto out;
    make_data(&d, 5);
    cancel_model = t.m, cancel_ticks = 0, cancel_tick = tick;
    ts_set_log_callback(cancel_on_tick, NULL);
    st = run(t.m, &d);
    ts_set_log_callback(NULL, NULL);
    CHECK(st == TS_ERR_CANCELLED && ts_model_steps(t.m) == 2, "%s: cancelled on rank %d alone, rank %d stops after step 2: %s (%lld steps): %s",
          label, R - 1, ts_dist_rank(), ts_status_name(st), (long long)ts_model_steps(t.m), ts_last_error());
    CHECK_OK(run(t.m, &d), "%s: the next run on rank %d is whole, the ranks in step", label, ts_dist_rank());
    CHECK(ts_model_steps(t.m) == 2 + D, "%s: %lld steps", label, (long long)ts_model_steps(t.m));
out:
    teardown(&t);
    data_free(&d);
}

/* The last rank stops answering (or dies); the others' next collective must
 * fail within the timeout, or mpirun ends the job. */
static int hang(int R, bool die) {
    ts_dist_set_timeout(2.0);
    int64_t n = (int64_t)R * B;
    samples d = data_new(n);
    trained t;
    if (setup(&t, B, R, 1, 1, ts_sgd(0.01f, 0, 0))) return 2;
    make_data(&d, 1);
    if (ts_dist_rank() == R - 1) {
        if (die) raise(SIGKILL);
        sleep(60); /* hangs: mpirun ends it when the others abort */
    }
    ts_status st = run(t.m, &d);
    fprintf(stderr, "rank %d: run: %s: %s\n", ts_dist_rank(), ts_status_name(st), ts_last_error());
    ts_dist_finalize(); /* after TS_ERR_DIST: ends the job */
    return st == TS_ERR_DIST ? 0 : 1;
}

/* ts_dist_broadcast: rank 0's bytes on every rank (outside a job, buf as
 * it was); ts_dist_timeout reads back what ts_dist_set_timeout set. */
static void broadcast(int R) {
    long buf[3] = {7 + ts_dist_rank(), 100L * ts_dist_rank(), -1};
    ts_status st = ts_dist_broadcast(buf, sizeof buf);
    CHECK(st == TS_OK && buf[0] == 7 && buf[1] == 0 && buf[2] == -1, "rank %d of %d: the broadcast gives rank 0's bytes (%s): %ld %ld %ld",
          ts_dist_rank(), R, ts_status_name(st), buf[0], buf[1], buf[2]);
    double was = ts_dist_timeout();
    CHECK(ts_dist_set_timeout(7.5) == TS_OK && ts_dist_timeout() == 7.5, "the timeout set reads back: %g", ts_dist_timeout());
    ts_dist_set_timeout(was);
}

/* Loss scaling under replicas (ts_options_set_loss_scaling):
 * - ranks whose scaling options differ fail at compile, every one, naming
 *   loss scaling and both ranks' values;
 * - a step whose gradient overflows on one rank only (its shard holds huge
 *   inputs, the scale is high) is skipped by every rank: the weights stay
 *   as they were, each rank's scale backs off once, and the next step,
 *   taken, leaves the same weights on every rank (rank 0's broadcast, and
 *   the checksum before every run). */
static ts_status scaled_setup(trained *t, int R, float init) {
    memset(t, 0, sizeof *t);
    ts_status st = test_mlp_build(&t->net, B, 7);
    if (st) return st;
    if (!(t->o = ts_options_new())) return TS_ERR_OUT_OF_MEMORY;
    if ((st = ts_options_set_threads(t->o, 1)) || (st = ts_options_set_replication(t->o, R, 1)) ||
        (st = ts_options_set_loss_scaling(t->o, 1, init, 2.0f, 0.5f, 1000)))
        return st;
    if ((st = ts_model_training(&t->m, t->net.g, t->net.loss, t->o, ts_sgd(0.01f, 0, 0)))) return st;
    return ts_model_compile(t->m);
}

/* Every parameter, in PARAMS order, into a new array. */
static float *all_weights(ts_graph *g, size_t *n) {
    *n = 0;
    for (size_t i = 0; i < sizeof PARAMS / sizeof PARAMS[0]; i++) {
        ts_array a;
        ts_tensor_info(ts_graph_find(g, PARAMS[i]), &a);
        *n += (size_t)ts_array_numel(&a);
    }
    float *w = malloc(*n * sizeof *w), *at = w;
    for (size_t i = 0; w && i < sizeof PARAMS / sizeof PARAMS[0]; i++) {
        ts_array a;
        ts_tensor_info(ts_graph_find(g, PARAMS[i]), &a);
        memcpy(at, a.data, (size_t)ts_array_numel(&a) * sizeof *at);
        at += ts_array_numel(&a);
    }
    return w;
}

static void loss_scaling(int R) {
    int me = ts_dist_rank();
    trained t;
    ts_status st = scaled_setup(&t, R, me == R - 1 ? 2048.0f : 1024.0f);
    CHECK(st == TS_ERR_DIST && strstr(ts_last_error(), "loss scaling (--loss-scale) dynamic from 2048, rank 0 has dynamic from 1024"),
          "loss scale: rank %d of %d refuses scaling from 1024 on rank 0 and 2048 on rank %d, naming both: %s", me, R, R - 1, ts_last_error());
    teardown(&t);

    samples d = data_new((int64_t)R * B);
    make_data(&d, 5);
    CHECK_OK(scaled_setup(&t, R, 1e30f), "loss scale: compile with scaling from 1e30");
    for (int64_t i = (int64_t)(R - 1) * B * PIXELS; i < (int64_t)R * B * PIXELS; i++) d.x[i] *= 1e20f; /* the last rank's shard */
    size_t n;
    float *before = all_weights(t.net.g, &n);
    double scale0 = 0, scale = 0;
    int64_t skipped = 0;
    ts_model_loss_scale(t.m, &scale0, NULL);
    CHECK_OK(run(t.m, &d), "loss scale: a step that overflows on rank %d only", R - 1);
    ts_model_loss_scale(t.m, &scale, &skipped);
    float *after = all_weights(t.net.g, &n);
    CHECK(before && after && memcmp(before, after, n * sizeof *after) == 0 && skipped == 1 && scale == scale0 * 0.5 && ts_model_steps(t.m) == 1,
          "loss scale: rank %d of %d skipped the step that overflowed on rank %d (weights untouched, 1 skipped, scale %g, %lld steps)", me, R,
          R - 1, scale, (long long)ts_model_steps(t.m));
    make_data(&d, 5);
    CHECK_OK(run(t.m, &d), "loss scale: a step without overflow");
    CHECK_OK(run(t.m, &d), "loss scale: the next run's weight checksum agrees");
    ts_model_loss_scale(t.m, &scale, &skipped);
    free(after);
    after = all_weights(t.net.g, &n);
    float *lead = malloc(n * sizeof *lead);
    if (lead && after) memcpy(lead, after, n * sizeof *lead);
    CHECK(lead && after && ts_dist_broadcast(lead, n * sizeof *lead) == TS_OK && memcmp(lead, after, n * sizeof *lead) == 0 &&
              memcmp(before, after, n * sizeof *after) != 0 && skipped == 1,
          "loss scale: rank %d's weights are rank 0's after the steps taken (%lld skipped)", me, (long long)skipped);
    free(before);
    free(after);
    free(lead);
    teardown(&t);
    data_free(&d);
}

/* Summaries combined over the replicas: the input x watched, with one value
 * of -1e6 in replica `lo`'s shard, one of 1e6 in replica `hi`'s and a NaN
 * and a +Inf in replica `bad`'s. The reduced row's min and max come from
 * those replicas and say so, its counts of NaN and Inf are the sums over
 * the replicas (the NaN is not lost in the reduction), and the stats table
 * line names them ("[replica 1] max 1e+06"). */
static void combined_summaries(int R) {
    int lo = R - 1, hi = R > 2 ? 1 : R - 1, bad = R > 2 ? 1 : R - 1; /* none on replica 0, which a row starts from */
    samples d = data_new((int64_t)R * B);
    make_data(&d, 4);
    d.x[((int64_t)lo * B + 1) * PIXELS + 7] = -1e6f;
    d.x[((int64_t)hi * B + 2) * PIXELS + 9] = 1e6f;
    d.x[((int64_t)bad * B + 3) * PIXELS + 11] = NAN;
    d.x[((int64_t)bad * B) * PIXELS + 13] = INFINITY;
    trained t;
    memset(&t, 0, sizeof t);
    ts_status st = test_mlp_build(&t.net, B, 7);
    if (!st && !(t.o = ts_options_new())) st = TS_ERR_OUT_OF_MEMORY;
    if (!st) st = ts_options_set_threads(t.o, 1);
    if (!st) st = ts_options_set_replication(t.o, R, 0);
    if (!st) st = ts_options_watch(t.o, "x", TS_WATCH_STATS, 1);
    if (!st) st = ts_model_training(&t.m, t.net.g, t.net.loss, t.o, ts_sgd(0.01f, 0, 0));
    if (!st) st = run(t.m, &d);
    CHECK_OK(st, "combined: a step of %d replicas watching x", R);
    const ts_watch_result *w = NULL;
    size_t nw = 0;
    if (!st) st = ts_model_watch_results(t.m, &w, &nw);
    if (st || nw != (size_t)R + 1) {
        CHECK(0, "combined: %zu watch rows, expected %d: %s", nw, R + 1, ts_last_error());
        goto out;
    }
    const ts_watch_result *red = &w[R];
    const ts_stats *s = &red->summary->stats;
    int64_t nans = 0, infs = 0;
    for (int r = 0; r < R; r++) {
        nans += w[r].summary->stats.nans, infs += w[r].summary->stats.pos_infs;
        CHECK(w[r].min_replica == -1 && w[r].max_replica == -1 && w[r].nonfinite_replica == -1, "combined: replica %d's own row names no replica", r);
    }
    CHECK(red->replica == -1 && s->nans == 1 && nans == 1 && s->pos_infs == 1 && infs == 1,
          "combined: rank %d: the reduced row holds the NaN and the Inf of replica %d (NaNs %lld, +Infs %lld)", ts_dist_rank(), bad, (long long)s->nans,
          (long long)s->pos_infs);
    CHECK(s->min == -1e6 && s->max == 1e6 && red->min_replica == lo && red->max_replica == hi && red->nonfinite_replica == bad,
          "combined: rank %d: min %g from replica %d (expected %d), max %g from replica %d (expected %d), NaN/Inf first on replica %d (expected %d)",
          ts_dist_rank(), s->min, red->min_replica, lo, s->max, red->max_replica, hi, red->nonfinite_replica, bad);
    char line[256], want[64];
    ts_watch_result_replicas(red, line, sizeof line);
    snprintf(want, sizeof want, "[replica %d] max 1e+06", hi);
    CHECK(strstr(line, want) != NULL, "combined: the line names the replica of the max: '%s'", line);
    snprintf(want, sizeof want, "[replica %d] NaN/Inf", bad);
    CHECK(strstr(line, want) != NULL, "combined: the line names the replica of the NaN: '%s'", line);
    ts_watch_result_replicas(&w[0], line, sizeof line);
    CHECK(line[0] == '\0', "combined: a replica's own row has no such line: '%s'", line);
out:
    teardown(&t);
    data_free(&d);
}

/* `test_dist nan BAD`: --check-numerics op, and at the third step a sample
 * of replica BAD's shard that fc1's MatMul overflows (to Inf, then NaN
 * after it). Rank BAD's check stops it at that op; every other
 * rank must stop at the same step, soon (not at the timeout, set high),
 * with its report: the rank, the step, the op and its source line. Each
 * rank prints one "nan: ok ..." or "nan: FAIL ..." line; the job then ends
 * (the script counts the lines). `test_dist nan-pipeline`: the same in a
 * pipeline of R stages, where the overflow is stage 0's (rank 0's) fc1. */
static int nan_on_one_rank(int R, int bad, bool pipeline) {
    const double limit = 120;
    ts_dist_set_timeout(limit);
    int me = ts_dist_rank();
    samples d = data_new((int64_t)(pipeline ? 1 : R) * B);
    trained t;
    memset(&t, 0, sizeof t);
    ts_status st = test_mlp_build(&t.net, B, 7);
    if (!st && !(t.o = ts_options_new())) st = TS_ERR_OUT_OF_MEMORY;
    if (!st) st = ts_options_set_threads(t.o, 1);
    const char *splits[] = {"fc2", "fc3"};
    if (!st) st = pipeline ? ts_options_set_pipeline(t.o, R, splits, R - 1) : ts_options_set_replication(t.o, R, 1);
    if (!st) st = ts_options_set_check_numerics(t.o, TS_CHECK_OP);
    if (!st) st = ts_model_training(&t.m, t.net.g, t.net.loss, t.o, ts_sgd(0.01f, 0, 0));
    if (!st) st = ts_model_compile(t.m);
    if (st) {
        printf("nan: FAIL rank %d: setup: %s\n", me, ts_last_error());
        return 1;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int64_t run_no = 0;
    for (; run_no < 5 && !st; run_no++) {
        make_data(&d, (unsigned)run_no);
        if (run_no == 2) /* step 3: a sample of 3e38 in replica `bad`'s shard, which fc1's MatMul overflows to Inf */
            for (int64_t i = 0; i < PIXELS; i++) d.x[((int64_t)(pipeline ? 0 : bad) * B + 1) * PIXELS + i] = 3e38f;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        st = run(t.m, &d);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double took = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    char msg[8192], origin[1024] = "", who[64], when[64];
    snprintf(msg, sizeof msg, "%s", ts_last_error());
    /* the op the check names: the first one whose output holds the NaN */
    const char *failed = me == bad ? ts_model_failed_tensor(t.m) : "fc1/MatMul:0";
    ts_model_tensor_origin(t.m, failed ? failed : "?", origin, sizeof origin);
    const char *built = strstr(origin, "built at ");
    snprintf(who, sizeof who, me == bad ? "numeric check on rank %d of %d" : "rank %d failed and stopped every rank", bad, R);
    snprintf(when, sizeof when, "rank %d of %d at step 3:", bad, R);
    bool ok = st == TS_ERR_NUMERICS && run_no == 3 && ts_model_steps(t.m) == 2 && strstr(msg, who) && strstr(msg, when) && failed &&
              strstr(msg, "fc1/MatMul:0") && strstr(msg, "op MatMul") && built && strstr(msg, built) && took < limit / 2;
    printf("nan: %s rank %d of %d: %s at run %lld with %lld steps done, %.1f s after the run began (the timeout is %.0f s), the report %s '%s', '%s' "
           "and '%s'%s%s\n",
           ok ? "ok" : "FAIL", me, R, ts_status_name(st), (long long)run_no, (long long)ts_model_steps(t.m), took, limit, ok ? "names" : "should name",
           who, when, built ? built : "(no origin)", ok ? "" : ": ", ok ? "" : msg);
    fflush(stdout);
    teardown(&t);
    data_free(&d);
    ts_dist_finalize(); /* after the failure: every rank leaves, and the job ends */
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--available") == 0) return ts_dist_available() ? 0 : 1;
    if (ts_dist_init(&argc, &argv)) {
        fprintf(stderr, "%s\n", ts_last_error());
        return 1;
    }
    int R = ts_dist_size();
    if (argc > 1 && strcmp(argv[1], "hang") == 0) return hang(R, false);
    if (argc > 1 && strcmp(argv[1], "die") == 0) return hang(R, true);
    if (argc > 2 && strcmp(argv[1], "nan") == 0) return nan_on_one_rank(R, atoi(argv[2]), false);
    if (argc > 1 && strcmp(argv[1], "nan-pipeline") == 0 && R <= 3) return nan_on_one_rank(R, 0, true);
    broadcast(R);
    if (R == 1) {
        trained t;
        ts_status st = setup(&t, B, 2, 1, 1, ts_sgd(0.01f, 0, 0));
        CHECK((st == TS_ERR_STATE || st == TS_ERR_UNSUPPORTED) && strstr(ts_last_error(), "mpirun -np 2"),
              "replication 2 outside an MPI job says how to start one: %s", ts_last_error());
        teardown(&t);
        ts_options *o = ts_options_new();
        CHECK(ts_options_set_replication(o, 0, 1) == TS_ERR_INVALID_ARGUMENT, "replication 0 is refused: %s", ts_last_error());
        CHECK(ts_options_set_replication(o, 2, -1) == TS_ERR_INVALID_ARGUMENT, "a negative check period is refused: %s", ts_last_error());
        ts_options_free(o);
        CHECK(ts_dist_rank() == 0 && ts_dist_size() == 1, "outside a job: rank 0 of 1");
    } else {
        printf("rank %d of %d\n", ts_dist_rank(), R);
        same_numbers(R, "sgd momentum D=2", ts_sgd(0.05f, 0.9f, 0.0f), 2, 1, 5, 1e-4, 1e-6);
        same_numbers(R, "adam A=2", ts_adam(1e-3f), 1, 2, 10, 1e-4, 1e-5);
        if (R <= 3) {
            pipeline_numbers(R, "pipeline sgd momentum D=2 A=2", ts_sgd(0.05f, 0.9f, 0.0f), 2, 2, 5, 1e-4, 1e-6, false, TS_PIPELINE_GPIPE);
            pipeline_numbers(R, "pipeline adam A=3", ts_adam(1e-3f), 1, 3, 10, 1e-4, 1e-5, true, TS_PIPELINE_GPIPE);
            pipeline_numbers(R, "pipeline sgd A=5", ts_sgd(0.05f, 0.9f, 0.0f), 1, 5, 4, 1e-4, 1e-6, false, TS_PIPELINE_GPIPE);
            pipeline_numbers(R, "pipeline 1f1b sgd A=5", ts_sgd(0.05f, 0.9f, 0.0f), 1, 5, 4, 1e-4, 1e-6, false, TS_PIPELINE_1F1B);
            free(last_weights);
        }
        combined_summaries(R);
        outfeed_tagged(R);
        bn_buffers(R);
        cancelled(R, false);
        if (R <= 3) cancelled(R, true);
        desync(R, R - 1);
        if (R > 2) desync(R, 0);
        loss_scaling(R);
    }
    int rc = check_summary("test_dist");
    ts_dist_finalize();
    return rc;
}
