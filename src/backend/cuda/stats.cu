/* stats.cu -- the stats summary (TS_WATCH_STATS) of a tensor, reduced on the
 * device into a ts_device_stats slot without a host sync: the twin of
 * core/stats.c's partial summaries (count, zeros, NaN, +-Inf; the finite
 * values' count, mean, squared deviations (Chan's merge, in double), min,
 * max). Two kernels: per-block records, then one block merging them in
 * order, so the result does not depend on timing; one where a block covers
 * the tensor (most activations of a small model: half the launches). */
#include "backend/cuda/cuda.h"

#include <math.h>

#define STATS_BLOCKS 512
#define STATS_THREADS 256

/* a += b, Chan's parallel update of the moments */
__device__ static void merge(ts_device_stats *a, const ts_device_stats *b) {
    a->count += b->count;
    a->zeros += b->zeros;
    a->nans += b->nans;
    a->pos_infs += b->pos_infs;
    a->neg_infs += b->neg_infs;
    if (b->finite > 0) {
        if (a->finite == 0) {
            a->finite = b->finite, a->mean = b->mean, a->m2 = b->m2;
        } else {
            double n = a->finite + b->finite, d = b->mean - a->mean;
            a->mean += d * (b->finite / n);
            a->m2 += b->m2 + d * d * (a->finite * b->finite / n);
            a->finite = n;
        }
        a->min = fmin(a->min, b->min);
        a->max = fmax(a->max, b->max);
    }
}

__device__ static void start(ts_device_stats *s) {
    *s = ts_device_stats{0, 0, 0, 0, 0, 0, 0, 0, INFINITY, -INFINITY};
}

/* records[block] <- the stats of the block's grid-stride share of x[n] */
__device__ static void block_reduce(ts_device_stats *mine, ts_device_stats *out) {
    __shared__ ts_device_stats sh[STATS_THREADS];
    sh[threadIdx.x] = *mine;
    __syncthreads();
    for (int w = STATS_THREADS / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) merge(&sh[threadIdx.x], &sh[threadIdx.x + w]);
        __syncthreads();
    }
    if (threadIdx.x == 0) *out = sh[0];
}

__global__ static void stats_blocks(const float *x, int64_t n, ts_device_stats *records) {
    ts_device_stats s;
    start(&s);
    /* each thread: a Welford pass over its values in double */
    TS_CU_FOR(i, n) {
        float v = x[i];
        s.count += 1;
        if (isnan(v)) {
            s.nans += 1;
        } else if (isinf(v)) {
            if (v > 0) s.pos_infs += 1;
            else s.neg_infs += 1;
        } else {
            double d = v;
            s.zeros += v == 0.0f;
            s.finite += 1;
            double delta = d - s.mean;
            s.mean += delta / s.finite;
            s.m2 += delta * (d - s.mean);
            s.min = fmin(s.min, d);
            s.max = fmax(s.max, d);
        }
    }
    block_reduce(&s, &records[blockIdx.x]);
}

__global__ static void stats_merge(const ts_device_stats *records, int n, ts_device_stats *slot) {
    ts_device_stats s;
    start(&s);
    for (int i = threadIdx.x; i < n; i += STATS_THREADS) merge(&s, &records[i]);
    block_reduce(&s, slot);
}

static ts_device_stats *g_records; /* STATS_BLOCKS records, one reduction at a time on the stream */

void ts_cu_stats_reduce(cudaStream_t s, const float *x, int64_t n, ts_device_stats *slot) {
    if (!g_records && cudaMalloc((void **)&g_records, STATS_BLOCKS * sizeof *g_records) != cudaSuccess) {
        ts_cu_check(cudaErrorMemoryAllocation, "stats summary");
        g_records = nullptr;
        return;
    }
    int64_t want = (n + STATS_THREADS * 4 - 1) / (STATS_THREADS * 4);
    int blocks = want < 1 ? 1 : want > STATS_BLOCKS ? STATS_BLOCKS : (int)want;
    if (blocks == 1) { /* one block's record is the summary: one kernel, not two */
        stats_blocks<<<1, STATS_THREADS, 0, s>>>(x, n, slot);
        ts_cu_check(cudaGetLastError(), "stats summary");
        return;
    }
    stats_blocks<<<blocks, STATS_THREADS, 0, s>>>(x, n, g_records);
    ts_cu_check(cudaGetLastError(), "stats summary");
    stats_merge<<<1, STATS_THREADS, 0, s>>>(g_records, blocks, slot);
    ts_cu_check(cudaGetLastError(), "stats summary");
}
