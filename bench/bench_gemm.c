/* bench_gemm.c -- the GEMM-only ceiling of `make bench`: how many GFLOP/s
 * tensorscope's own product path (ts_gemm_pool: the pool's threads, each
 * slice on a one-thread OpenBLAS, as a MatMul runs in a step) reaches on
 * these cores at these threads, for products of one shape. The rows' step
 * GFLOP/s are printed as a share of it, so the distance to the limit is
 * visible: a step that only multiplied matrices would reach 100%.
 *
 *   bench_gemm [M [K [N [REPS [THREADS]]]]]   (defaults 1024 1024 1024 9 2)
 *
 * One line: `gemm m=M k=K n=N threads=T reps=R ms=.. gflops=.. best_gflops=..`,
 * gflops from the median repetition (2*M*K*N per product), best_gflops from
 * the fastest. */
#include <stdio.h>
#include <stdlib.h>

#include "backend/cpu/gemm.h"
#include "backend/pool.h"
#include "bench_common.h"

int main(int argc, char **argv)
{
    const char *env_threads = getenv("TS_BENCH_THREADS");
    long M = arg_or(argc, argv, 1, 1024), K = arg_or(argc, argv, 2, 1024), N = arg_or(argc, argv, 3, 1024);
    long reps = arg_or(argc, argv, 4, 9);
    long threads = arg_or(argc, argv, 5, env_threads ? strtol(env_threads, NULL, 10) : 2);
    if (M < 1 || K < 1 || N < 1 || reps < 1 || reps > 1000 || threads < 1 || threads > 1024) {
        fprintf(stderr, "usage: bench_gemm [M [K [N [REPS [THREADS]]]]]  (sizes and REPS >= 1, THREADS 1..1024)\n");
        return 2;
    }
    size_t na = (size_t)M * (size_t)K, nb = (size_t)K * (size_t)N, nc = (size_t)M * (size_t)N;
    float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *c = malloc(nc * sizeof *c);
    double *ms = malloc((size_t)reps * sizeof *ms);
    ts_pool *pool = NULL;
    if (!a || !b || !c || !ms || ts_pool_new(&pool, (int)threads) != TS_OK) {
        fprintf(stderr, "bench_gemm: out of memory for %ldx%ldx%ld at %ld threads\n", M, K, N, threads);
        free(a), free(b), free(c), free(ms);
        return 1;
    }
    uint64_t seed = 0x2545F4914F6CDD1Du;
    for (size_t i = 0; i < na; i++) a[i] = (float)(xorshift(&seed) >> 40) * 0x1p-24f - 0.5f;
    for (size_t i = 0; i < nb; i++) b[i] = (float)(xorshift(&seed) >> 40) * 0x1p-24f - 0.5f;
    ts_gemm_set_threads((int)threads);
    ts_gemm_pool(pool, false, false, M, N, K, a, b, 0.0f, c); /* warm: pages touched, OpenBLAS's buffers made */
    for (long r = 0; r < reps; r++) {
        double t0 = now_s();
        ts_gemm_pool(pool, false, false, M, N, K, a, b, 0.0f, c);
        ms[r] = (now_s() - t0) * 1e3;
    }
    double flops = 2.0 * (double)M * (double)K * (double)N, med = median(ms, reps); /* sorts ms */
    printf("gemm m=%ld k=%ld n=%ld threads=%ld reps=%ld ms=%.4f gflops=%.3f best_gflops=%.3f\n", M, K, N, threads, reps, med,
           flops / med * 1e-6, flops / ms[0] * 1e-6);
    ts_pool_free(pool);
    free(a), free(b), free(c), free(ms);
    return 0;
}
