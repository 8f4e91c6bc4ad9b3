/* bench_gemm.c -- the GEMM-only ceiling of `make bench`: how many GFLOP/s
 * a model that only multiplies matrices reaches on these cores at these
 * threads: one MatMul [M,K] x [K,N] (a parameter) as an inference model,
 * the path a Linear's product takes in a step. The rows' step GFLOP/s are
 * printed as a share of it, so the distance to the limit is visible.
 *
 *   bench_gemm [M [K [N [REPS [THREADS]]]]]   (defaults 1024 1024 1024 9 2)
 *
 * One line: `gemm m=M k=K n=N threads=T reps=R ms=.. gflops=.. best_gflops=..`,
 * gflops from the median run (2*M*K*N each), best_gflops from the fastest. */
#include <stdio.h>
#include <stdlib.h>

#include "bench_common.h"

static int fail(const char *what)
{
    fprintf(stderr, "bench_gemm: %s: %s\n", what, ts_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    const char *env_threads = getenv("TS_BENCH_THREADS");
    long M = arg_or(argc, argv, 1, 1024), K = arg_or(argc, argv, 2, 1024), N = arg_or(argc, argv, 3, 1024);
    long reps = arg_or(argc, argv, 4, 9);
    long threads = arg_or(argc, argv, 5, env_threads ? strtol(env_threads, NULL, 10) : 2);
    if (M < 1 || K < 1 || N < 1 || reps < 1 || reps > 1000 || threads < 0) {
        fprintf(stderr, "usage: bench_gemm [M [K [N [REPS [THREADS]]]]]  (sizes and REPS >= 1)\n");
        return 2;
    }
    ts_graph *g = ts_graph_new(1);
    ts_tensor *a = ts_input(g, "a", TS_F32, 2, (int64_t[]){M, K});
    ts_tensor *y = ts_matmul(g, a, ts_param(g, "b", 2, (int64_t[]){K, N}));
    ts_options *o = ts_options_new();
    ts_options_set_threads(o, (int)threads);
    ts_model *m = NULL;
    if (ts_graph_status(g) != TS_OK)
        return fail("build");
    if (ts_model_inference(&m, g, &y, 1, o) || ts_model_compile(m))
        return fail("compile");
    float *x = malloc((size_t)M * (size_t)K * sizeof *x);
    double *ms = malloc((size_t)reps * sizeof *ms);
    if (!x || !ms)
        return fail("out of memory");
    uint64_t seed = 0x2545F4914F6CDD1Du;
    for (size_t i = 0; i < (size_t)M * (size_t)K; i++)
        x[i] = (float)(xorshift(&seed) >> 40) * 0x1p-24f - 0.5f;
    const char *names[1] = {"a"};
    ts_array in[1] = {ts_array_f32(x, 2, (int64_t[]){M, K})};
    for (long r = -1; r < reps; r++) { /* r = -1 warms: pages touched, OpenBLAS's buffers made */
        double t0 = now_s();
        if (ts_model_run(m, names, in, 1))
            return fail("run");
        if (r >= 0)
            ms[r] = (now_s() - t0) * 1e3;
    }
    double best = ms[0];
    for (long r = 1; r < reps; r++)
        best = ms[r] < best ? ms[r] : best;
    double flops = 2.0 * (double)M * (double)K * (double)N, med = median(ms, reps);
    printf("gemm m=%ld k=%ld n=%ld threads=%ld reps=%ld ms=%.4f gflops=%.3f best_gflops=%.3f\n", M, K, N, threads, reps, med,
           flops / med * 1e-6, flops / best * 1e-6);
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
    free(x), free(ms);
    return 0;
}
