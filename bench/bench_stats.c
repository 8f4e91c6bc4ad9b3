/* bench_stats.c -- ts_summarize_f32(TS_WATCH_STATS) against the read
 * bandwidth of a plain float sum over the same 64 MiB buffer, one core.
 * The sum uses 32 independent accumulators so that it vectorises without
 * -ffast-math: it is a bandwidth baseline, not a strawman. Target: the
 * summary reaches >= 0.70 of its GB/s. */
#include "tensorscope.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* 64 MiB of f32; volatile so the compiler cannot specialise the loops. */
static volatile int64_t n_elems = (int64_t)16 * 1024 * 1024;
#define REPS 7
#define SUM_LANES 32

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float plain_sum(const float *x, int64_t n) {
    float acc[SUM_LANES] = {0};
    int64_t i = 0;
    for (; i + SUM_LANES <= n; i += SUM_LANES)
        for (int j = 0; j < SUM_LANES; j++) acc[j] += x[i + j];
    float s = 0;
    for (; i < n; i++) s += x[i];
    for (int j = 0; j < SUM_LANES; j++) s += acc[j];
    return s;
}

/* Box-Muller normals from a fixed xorshift seed: the buffer is the same on
 * every run. */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double uniform(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
}

int main(void) {
    const int64_t N = n_elems;
    float *x = malloc((size_t)N * sizeof *x);
    ts_summary *s = malloc(sizeof *s);
    if (!x || !s) {
        fprintf(stderr, "bench_stats: out of memory\n");
        return 1;
    }
    for (int64_t i = 0; i < N; i++) x[i] = (float)(0.02 * (uniform() - 0.5));
    const double bytes = (double)N * sizeof(float);
    double best_sum = 1e30, best_stats = 1e30;
    volatile float sink = 0;
    for (int r = 0; r < REPS; r++) {
        double t0 = now_s();
        sink += plain_sum(x, N);
        double t1 = now_s();
        if (ts_summarize_f32(x, N, TS_WATCH_STATS, s) != TS_OK) {
            fprintf(stderr, "bench_stats: %s\n", ts_last_error());
            return 1;
        }
        double t2 = now_s();
        if (t1 - t0 < best_sum) best_sum = t1 - t0;
        if (t2 - t1 < best_stats) best_stats = t2 - t1;
    }
    double gs = bytes / best_sum / 1e9, gt = bytes / best_stats / 1e9;
    printf("buffer           %.0f MiB f32, best of %d\n", bytes / 1048576.0, REPS);
    printf("plain sum        %7.2f GB/s  (%.2f ms)\n", gs, best_sum * 1e3);
    printf("ts_summarize_f32 %7.2f GB/s  (%.2f ms)  mean=%.3g std=%.3g\n", gt, best_stats * 1e3,
           s->stats.mean, s->stats.std);
    printf("ratio            %7.2f  (target >= 0.70)\n", gt / gs);
    /* For scale: everything at once (histograms and ranges are not fused
     * into the vector pass; they are a second walk over each cached block). */
    const int all = TS_WATCH_STATS | TS_WATCH_HISTOGRAM | TS_WATCH_RANGE;
    double best_all = 1e30;
    for (int r = 0; r < 3; r++) {
        double t0 = now_s();
        ts_summarize_f32(x, N, all, s);
        double t1 = now_s();
        if (t1 - t0 < best_all) best_all = t1 - t0;
    }
    printf("stats+hist+range %7.2f GB/s  (%.2f ms)\n", bytes / best_all / 1e9, best_all * 1e3);
    free(x);
    free(s);
    (void)sink;
    return 0;
}
