/* stats.cu -- the stats summary (TS_WATCH_STATS) of a tensor, reduced on the
 * device into a ts_device_stats slot without a host sync: the twin of
 * core/stats.c's partial summaries (count, zeros, NaN, +-Inf; the finite
 * values' count, mean, squared deviations (Chan's merge, in double), min,
 * max). One kernel: each thread sums its grid-stride share about its first
 * value, each block merges its threads' (warp shuffles, then the warps'),
 * and the last block to finish merges the blocks' records in index order,
 * so the result does not depend on timing. A small model's step summarises
 * a few hundred small tensors: one launch and no shared-memory tree each. */
#include "backend/cuda/cuda.h"

#include <math.h>

#define STATS_BLOCKS 512
#define STATS_THREADS 256
#define STATS_WARPS (STATS_THREADS / 32)

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

/* *s merged with lane + d's (lanes past the warp's end read their own:
 * those never reach lane 0) */
__device__ static void merge_down(ts_device_stats *s, int d) {
    ts_device_stats o;
    const unsigned all = 0xffffffffu;
    o.count = __shfl_down_sync(all, s->count, d);
    o.zeros = __shfl_down_sync(all, s->zeros, d);
    o.nans = __shfl_down_sync(all, s->nans, d);
    o.pos_infs = __shfl_down_sync(all, s->pos_infs, d);
    o.neg_infs = __shfl_down_sync(all, s->neg_infs, d);
    o.finite = __shfl_down_sync(all, s->finite, d);
    o.mean = __shfl_down_sync(all, s->mean, d);
    o.m2 = __shfl_down_sync(all, s->m2, d);
    o.min = __shfl_down_sync(all, s->min, d);
    o.max = __shfl_down_sync(all, s->max, d);
    merge(s, &o);
}

/* *out (thread 0 writes it) <- the merge of every thread's *mine, in a
 * fixed order */
__device__ static void block_reduce(ts_device_stats *mine, ts_device_stats *out) {
    __shared__ ts_device_stats warps[STATS_WARPS];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int d = 16; d > 0; d >>= 1) merge_down(mine, d);
    if (lane == 0) warps[warp] = *mine;
    __syncthreads();
    if (warp != 0) return;
    if (lane < STATS_WARPS) *mine = warps[lane];
    else start(mine);
    for (int d = STATS_WARPS / 2; d > 0; d >>= 1) merge_down(mine, d);
    if (lane == 0) *out = *mine;
}

/* A record another block wrote, read past this block's L1. */
__device__ static ts_device_stats load_record(const ts_device_stats *r) {
    const double *p = (const double *)r;
    ts_device_stats s;
    double *q = (double *)&s;
    for (int i = 0; i < (int)(sizeof s / sizeof(double)); i++) q[i] = __ldcg(p + i);
    return s;
}

/* slot <- the stats of x[n]; records[gridDim.x] and *done (0 before and
 * after) are the blocks' meeting place when there is more than one */
__global__ static void stats_kernel(const float *x, int64_t n, ts_device_stats *records, unsigned *done, ts_device_stats *slot) {
    ts_device_stats s;
    start(&s);
    /* each thread: sums about its first finite value (exact for the first,
     * well conditioned after), turned into a mean and squared deviations */
    double shift = 0, s1 = 0, s2 = 0;
    float lo = INFINITY, hi = -INFINITY;
    TS_CU_FOR(i, n) {
        float v = x[i];
        s.count += 1;
        if (isnan(v)) {
            s.nans += 1;
        } else if (isinf(v)) {
            if (v > 0) s.pos_infs += 1;
            else s.neg_infs += 1;
        } else {
            if (s.finite == 0) shift = v;
            double d = (double)v - shift;
            s1 += d;
            s2 += d * d;
            s.finite += 1;
            s.zeros += v == 0.0f;
            lo = fminf(lo, v);
            hi = fmaxf(hi, v);
        }
    }
    if (s.finite > 0) {
        s.mean = shift + s1 / s.finite;
        s.m2 = fmax(s2 - s1 * s1 / s.finite, 0.0);
        s.min = lo, s.max = hi;
    }
    if (gridDim.x == 1) {
        block_reduce(&s, slot);
        return;
    }
    block_reduce(&s, &records[blockIdx.x]);
    __shared__ bool last;
    if (threadIdx.x == 0) {
        __threadfence(); /* this block's record before its count */
        last = atomicAdd(done, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    ts_device_stats m;
    start(&m);
    for (unsigned i = threadIdx.x; i < gridDim.x; i += STATS_THREADS) {
        ts_device_stats r = load_record(&records[i]);
        merge(&m, &r);
    }
    block_reduce(&m, slot);
    if (threadIdx.x == 0) *done = 0; /* for the next summary on the stream */
}

static ts_device_stats *g_records; /* STATS_BLOCKS records, then the blocks' counter: one summary at a time on the stream */

void ts_cu_stats_reduce(cudaStream_t s, const float *x, int64_t n, ts_device_stats *slot) {
    if (!g_records) {
        if (cudaMalloc((void **)&g_records, (STATS_BLOCKS + 1) * sizeof *g_records) != cudaSuccess ||
            cudaMemsetAsync(g_records + STATS_BLOCKS, 0, sizeof(unsigned), s) != cudaSuccess) {
            ts_cu_check(cudaErrorMemoryAllocation, "stats summary");
            g_records = nullptr;
            return;
        }
    }
    int64_t want = (n + STATS_THREADS * 4 - 1) / (STATS_THREADS * 4);
    int blocks = want < 1 ? 1 : want > STATS_BLOCKS ? STATS_BLOCKS : (int)want;
    stats_kernel<<<blocks, STATS_THREADS, 0, s>>>(x, n, g_records, (unsigned *)(void *)(g_records + STATS_BLOCKS), slot);
    ts_cu_check(cudaGetLastError(), "stats summary");
}
