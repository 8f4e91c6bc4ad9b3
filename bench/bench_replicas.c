/* bench_replicas.c -- training throughput of the tutorial MLP or the
 * LeNet+BN CNN (`--model cnn`) as R data-parallel replicas, one per MPI
 * rank, or of the MLP as a pipeline of K stages
 * (docs/design.md#replicas-and-pipeline-stages).
 *
 *     mpirun -np R bench_replicas MODEL BATCH [STEPS [WARMUP [THREADS [A [1F1B]]]]]
 *
 * MODEL is mlp or cnn. With A > 0 (the MLP, 2 or 3 ranks) it times a
 * pipeline instead: the MLP split at fc2 (and fc3), A micro-batches of
 * BATCH/A a step, and reports the bubble (PipelineBubblePercent: the share
 * of the step a rank waits for its neighbours, averaged over ranks) as
 * bubble_pct; 1F1B = 1 runs the 1F1B schedule instead of GPipe.
 *
 * BATCH is the combined batch of a step: each replica computes BATCH/R
 * samples, then the gradients are averaged (MPI_Allreduce, overlapping the
 * backward). Same data pool and timing as bench_mlp (one run = one step,
 * warmup excluded). Without mpirun it is one process of BATCH, the baseline
 * the replicas compare with (bench/run.sh runs it with 2 threads against 2
 * ranks of 1 thread). Rank 0 prints one line:
 * `tensorscope-ranksR model=M batch=B threads=T steps=N ms_per_step=.. samples_per_s=.. gflops=.. allreduce_pct=..`
 * where allreduce_pct is the share of the step the step waited for the
 * all-reduce (the library's AllReduceTime metric over the timed steps: what
 * the backward did not hide). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "cnn.h"
#include "tensorscope.h"

enum { POOL = 8 };

static int fail(const char *what)
{
    fprintf(stderr, "bench_replicas: %s: %s\n", what, ts_last_error());
    ts_dist_finalize();
    return 1;
}

/* The total of a metric read back from the report ("Accumulator:
 * 01s192ms400.590us" for a timing, in seconds, or "Accumulator: 6318.62"
 * for a value), and its sample count; 0 when the metric is absent. */
static double metric_total(const char *name, double *samples)
{
    char *r = ts_metrics_report(), head[128];
    double total = 0;
    snprintf(head, sizeof head, "Metric: %s\n", name);
    const char *p = r ? strstr(r, head) : NULL;
    const char *n = p ? strstr(p, "TotalSamples: ") : NULL;
    if (samples)
        *samples = n ? strtod(n + strlen("TotalSamples: "), NULL) : 0;
    p = p ? strstr(p, "Accumulator: ") : NULL;
    if (p) {
        p += strlen("Accumulator: ");
        while (*p && *p != '\n') {
            char *end;
            double v = strtod(p, &end);
            if (end == p)
                break;
            static const struct { const char *unit; double s; } units[] = {
                {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}, {"s", 1.0}, {"m", 60.0}, {"h", 3600.0}};
            size_t u = 0;
            while (u < sizeof units / sizeof units[0] && strncmp(end, units[u].unit, strlen(units[u].unit)) != 0)
                u++;
            if (u == sizeof units / sizeof units[0]) { /* a value metric: no unit */
                total += v;
                break;
            }
            total += v * units[u].s;
            p = end + strlen(units[u].unit);
        }
    }
    ts_string_free(r);
    return total;
}

int main(int argc, char **argv)
{
    if (ts_dist_init(&argc, &argv))
        return fail("joining the MPI job");
    int R = ts_dist_size();
    const char *model = argc > 1 ? argv[1] : "";
    long batch = arg_or(argc, argv, 2, 1000), steps = arg_or(argc, argv, 3, 50);
    long warmup = arg_or(argc, argv, 4, 5), threads = arg_or(argc, argv, 5, 1), A = arg_or(argc, argv, 6, 0), one_f_one_b = arg_or(argc, argv, 7, 0);
    long shards = A > 0 ? A : R; /* micro-batches of a step, or replicas */
    bool cnn_model = strcmp(model, "cnn") == 0;
    if ((!cnn_model && strcmp(model, "mlp") != 0) || batch < 1 || steps < 1 || warmup < 0 || threads < 0 || A < 0 || batch % shards != 0 ||
        (A > 0 && (R < 2 || R > 3 || cnn_model))) {
        fprintf(stderr, "usage: mpirun -np R bench_replicas mlp|cnn BATCH [STEPS [WARMUP [THREADS [A]]]] (R, or A, divides BATCH; "
                        "a pipeline (A > 0) is of the mlp, with 2 or 3 ranks)\n");
        ts_dist_finalize();
        return 2;
    }
    ts_tensor *loss;
    ts_graph *g;
    if (cnn_model) {
        cnn c;
        test_cnn_build(&c, batch / shards, 0);
        g = c.g, loss = c.loss;
    } else {
        g = bench_mlp_graph(batch / shards, &loss);
    }
    if (ts_graph_status(g) != TS_OK)
        return fail("build");
    ts_options *o = ts_options_new();
    ts_options_set_threads(o, (int)threads);
    const char *splits[] = {"fc2", "fc3"};
    if (A > 0) {
        ts_options_set_gradient_accumulation(o, (int)A);
        ts_options_set_pipeline(o, R, splits, R - 1);
        ts_options_set_pipeline_schedule(o, one_f_one_b ? TS_PIPELINE_1F1B : TS_PIPELINE_GPIPE);
    } else if (R > 1) {
        ts_options_set_replication(o, R, 0);
    }
    ts_model *m = NULL;
    if (ts_model_training(&m, g, loss, o, ts_sgd(0.01f, 0.0f, 0.0f)) || ts_model_compile(m))
        return fail("compile");

    double secs = bench_timed_runs(m, batch, POOL, warmup, steps);
    if (secs < 0)
        return fail("run");
    double allreduce = metric_total("AllReduceTime", NULL), runs = 0;
    double bubble = metric_total("PipelineBubblePercent", &runs);
    double flops = ts_model_flops_per_microbatch(m) * (double)steps * (double)shards;
    if (ts_dist_rank() == 0 && A == 0)
        printf("tensorscope-ranks%d model=%s batch=%ld threads=%ld steps=%ld ms_per_step=%.4f samples_per_s=%.1f "
               "gflops=%.3f allreduce_pct=%.1f\n",
               R, model, batch, threads, steps, secs * 1e3 / (double)steps, (double)(batch * steps) / secs,
               flops / secs * 1e-9, 100.0 * allreduce / secs);
    if (ts_dist_rank() == 0 && A > 0)
        printf("tensorscope-stages%d%s batch=%ld threads=%ld steps=%ld ms_per_step=%.4f samples_per_s=%.1f "
               "gflops=%.3f micro_batches=%ld bubble_pct=%.1f ideal_bubble_pct=%.1f\n",
               R, one_f_one_b ? "-1f1b" : "", batch, threads, steps, secs * 1e3 / (double)steps, (double)(batch * steps) / secs,
               flops / secs * 1e-9, A, runs > 0 ? bubble / runs : 0.0, 100.0 * (R - 1) / (double)(A + R - 1));
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
    ts_dist_finalize();
    return 0;
}
