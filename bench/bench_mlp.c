/* bench_mlp.c -- training throughput of the tutorial MLP (784-320-100-10,
 * ReLU, log_softmax + nll_loss, SGD lr 0.01) at a given batch size.
 *
 *     bench_mlp BATCH [STEPS [WARMUP [THREADS]]]
 *
 * Data: a pool of random batches (seeded, x ~ U(-1,1), labels 0..9) cycled
 * step by step, as bench/torch_mlp.py does. One run = one step (D = A = 1),
 * timed with the monotonic clock around ts_model_run, warmup excluded.
 * Threads: THREADS (default $TS_BENCH_THREADS, else 2) for tensorscope's
 * pool; BLAS threads come from OPENBLAS_NUM_THREADS (bench/run.sh sets it).
 * GFLOP/s uses ts_model_flops_per_microbatch (convention in bench/run.sh).
 * Precision: $TS_BENCH_PRECISION, f32 (default), bf16 or f16 (autocast's
 * mixed precision, docs/precision.md; f16 with dynamic loss scaling).
 *
 * Prints one line; peak_rss_mb is the process's peak resident set
 * (getrusage), act_mb the activation arena the memory plan laid out:
 * `tensorscope batch=B threads=T precision=P steps=N ms_per_step=.. samples_per_s=.. gflops=.. peak_rss_mb=.. act_mb=.. loss=..` */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "bench_common.h"
#include "tensorscope.h"

enum { POOL = 8 };

static int fail(const char *what)
{
    fprintf(stderr, "bench_mlp: %s: %s\n", what, ts_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    const char *env_threads = getenv("TS_BENCH_THREADS");
    long batch = arg_or(argc, argv, 1, 1000), steps = arg_or(argc, argv, 2, 50);
    long warmup = arg_or(argc, argv, 3, 5);
    long threads = arg_or(argc, argv, 4, env_threads ? strtol(env_threads, NULL, 10) : 2);
    if (batch < 1 || steps < 1 || warmup < 0 || threads < 0) {
        fprintf(stderr, "usage: bench_mlp BATCH [STEPS [WARMUP [THREADS]]]\n");
        return 2;
    }

    ts_tensor *loss;
    ts_graph *g = bench_mlp_graph(batch, &loss);
    if (ts_graph_status(g) != TS_OK)
        return fail("build");

    ts_options *o = ts_options_new();
    ts_options_set_threads(o, (int)threads);
    const char *precision;
    if (!bench_precision(o, &precision))
        return 2;
    ts_model *m = NULL;
    if (ts_model_training(&m, g, loss, o, ts_sgd(0.01f, 0.0f, 0.0f)) || ts_model_compile(m))
        return fail("compile");

    double secs = bench_timed_runs(m, batch, POOL, warmup, steps);
    if (secs < 0)
        return fail("run");

    ts_array l;
    double last_loss = ts_model_anchored(m, "loss", &l) == TS_OK ? *(const float *)l.data : 0.0;
    double ms = secs * 1e3 / (double)steps;
    double flops = ts_model_flops_per_microbatch(m) * (double)steps;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    ts_model_memory mem;
    double act_mb = ts_model_memory_get(m, &mem) == TS_OK ? (double)mem.activations / 1048576.0 : -1.0;
    printf("tensorscope batch=%ld threads=%ld precision=%s steps=%ld ms_per_step=%.4f samples_per_s=%.1f "
           "gflops=%.3f peak_rss_mb=%.1f act_mb=%.2f loss=%.4f\n",
           batch, threads, precision, steps, ms, (double)(batch * steps) / secs, flops / secs * 1e-9,
           (double)ru.ru_maxrss / 1024.0, act_mb, last_loss);
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
    return 0;
}
