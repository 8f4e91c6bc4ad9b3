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

/* One value into a thread's running sums: the counts, and the finite
 * values' sums about the first of them (shift) and their range. */
struct thread_sums {
    int64_t count, finite, zeros, nans, pos_infs, neg_infs;
    double shift, s1, s2;
    float lo, hi;
};

__device__ __forceinline__ static void add_value(thread_sums *t, float v) {
    if (isnan(v)) {
        t->nans++;
    } else if (isinf(v)) {
        if (v > 0) t->pos_infs++;
        else t->neg_infs++;
    } else {
        if (t->finite == 0) t->shift = v;
        double d = (double)v - t->shift;
        t->s1 += d;
        t->s2 += d * d;
        t->finite++;
        t->zeros += v == 0.0f;
        t->lo = fminf(t->lo, v);
        t->hi = fmaxf(t->hi, v);
    }
}

/* *out <- the stats of x[i] for i = begin + k * step < end: sums about the
 * first finite value (exact for the first, well conditioned after), turned
 * into a mean and squared deviations. The values are loaded STATS_UNROLL
 * at a time before any is added (a thread keeps that many loads in flight:
 * with one, a summary reads memory at a fraction of its speed), and added
 * in index order, so the sums are those of one at a time. */
#define STATS_UNROLL 8
__device__ static void thread_stats(const float *x, int64_t begin, int64_t end, int64_t step, ts_device_stats *out) {
    thread_sums t = {0, 0, 0, 0, 0, 0, 0.0, 0.0, 0.0, INFINITY, -INFINITY};
    int64_t i = begin;
    for (; i + (STATS_UNROLL - 1) * step < end; i += STATS_UNROLL * step) {
        float v[STATS_UNROLL];
#pragma unroll
        for (int u = 0; u < STATS_UNROLL; u++) v[u] = x[i + u * step];
#pragma unroll
        for (int u = 0; u < STATS_UNROLL; u++) add_value(&t, v[u]);
        t.count += STATS_UNROLL;
    }
    for (; i < end; i += step, t.count++) add_value(&t, x[i]);
    ts_device_stats s;
    start(&s);
    s.count = (double)t.count, s.finite = (double)t.finite, s.zeros = (double)t.zeros;
    s.nans = (double)t.nans, s.pos_infs = (double)t.pos_infs, s.neg_infs = (double)t.neg_infs;
    if (t.finite > 0) {
        s.mean = t.shift + t.s1 / s.finite;
        s.m2 = fmax(t.s2 - t.s1 * t.s1 / s.finite, 0.0);
        s.min = t.lo, s.max = t.hi;
    }
    *out = s;
}

/* The block's record of its part into records[index]; the last of the
 * `parts` blocks to finish (counted in *done, 0 before and after) merges
 * the records[first, first + parts) in index order into *slot. */
__device__ static void finish_parts(ts_device_stats *s, ts_device_stats *records, int first, int index, int parts, unsigned *done,
                                    ts_device_stats *slot) {
    block_reduce(s, &records[index]);
    __shared__ bool last;
    if (threadIdx.x == 0) {
        __threadfence(); /* this block's record before its count */
        last = atomicAdd(done, 1u) == (unsigned)parts - 1;
    }
    __syncthreads();
    if (!last) return;
    ts_device_stats m;
    start(&m);
    for (int i = threadIdx.x; i < parts; i += STATS_THREADS) {
        ts_device_stats r = load_record(&records[first + i]);
        merge(&m, &r);
    }
    block_reduce(&m, slot);
    if (threadIdx.x == 0) *done = 0; /* for the next summary on the stream */
}

/* slot <- the stats of x[n]; records[gridDim.x] and *done are the blocks'
 * meeting place when there is more than one */
__global__ static void stats_kernel(const float *x, int64_t n, ts_device_stats *records, unsigned *done, ts_device_stats *slot) {
    ts_device_stats s;
    thread_stats(x, (int64_t)blockIdx.x * blockDim.x + threadIdx.x, n, (int64_t)blockDim.x * gridDim.x, &s);
    if (gridDim.x == 1) {
        block_reduce(&s, slot);
        return;
    }
    finish_parts(&s, records, 0, (int)blockIdx.x, (int)gridDim.x, done, slot);
}

/* ---- many tensors in one launch: the tensors by value in the kernel's
 * arguments (a recorded launch keeps them), each split into chunks of
 * `chunk` values, a block a chunk, the last block of a tensor merging
 * its chunks' records in order */
#define MANY_RECORDS 4096

struct many_args {
    const float *x[TS_STATS_MANY];
    int64_t n[TS_STATS_MANY];
    ts_device_stats *slot[TS_STATS_MANY];
    int first[TS_STATS_MANY + 1]; /* tensor t's chunks are blocks first[t] .. first[t + 1] - 1 */
    int count;
    int64_t chunk;
};

__global__ static void stats_many_kernel(const many_args a, ts_device_stats *records, unsigned *done) {
    int b = (int)blockIdx.x, t = 0;
    while (t + 1 < a.count && a.first[t + 1] <= b) t++;
    int c = b - a.first[t], parts = a.first[t + 1] - a.first[t];
    int64_t begin = (int64_t)c * a.chunk, end = begin + a.chunk < a.n[t] ? begin + a.chunk : a.n[t];
    ts_device_stats s;
    thread_stats(a.x[t], begin + threadIdx.x, end, blockDim.x, &s);
    if (parts == 1) block_reduce(&s, a.slot[t]);
    else finish_parts(&s, records, a.first[t], b, parts, &done[t], a.slot[t]);
}

static ts_device_stats *g_records; /* STATS_BLOCKS records, then the blocks' counter: one summary at a time on the stream */
static ts_device_stats *g_many;    /* MANY_RECORDS records, then TS_STATS_MANY counters */

void ts_cu_stats_reduce_many(cudaStream_t s, const ts_stats_job *jobs, int n) {
    if (!g_many) {
        size_t bytes = MANY_RECORDS * sizeof *g_many + TS_STATS_MANY * sizeof(unsigned);
        if (cudaMalloc((void **)&g_many, bytes) != cudaSuccess ||
            cudaMemsetAsync(g_many + MANY_RECORDS, 0, TS_STATS_MANY * sizeof(unsigned), s) != cudaSuccess) {
            ts_cu_check(cudaErrorMemoryAllocation, "stats summaries");
            g_many = nullptr;
            return;
        }
    }
    for (int k = 0; k < n; k += TS_STATS_MANY) {
        many_args a;
        a.count = n - k < TS_STATS_MANY ? n - k : TS_STATS_MANY;
        int64_t total = 0;
        for (int t = 0; t < a.count; t++) total += jobs[k + t].n;
        /* chunks of at least 64 values a thread (a block's merge of its
         * threads' sums costs about as much as reading that many), few
         * enough for the records */
        a.chunk = STATS_THREADS * 64;
        if (total / a.chunk + a.count > MANY_RECORDS) a.chunk = total / (MANY_RECORDS - a.count) + 1;
        a.first[0] = 0;
        for (int t = 0; t < a.count; t++) {
            const ts_stats_job *j = &jobs[k + t];
            a.x[t] = j->x, a.n[t] = j->n, a.slot[t] = j->slot;
            int64_t parts = j->n > 0 ? (j->n + a.chunk - 1) / a.chunk : 1;
            a.first[t + 1] = a.first[t] + (int)parts;
        }
        stats_many_kernel<<<a.first[a.count], STATS_THREADS, 0, s>>>(a, g_many, (unsigned *)(void *)(g_many + MANY_RECORDS));
        ts_cu_check(cudaGetLastError(), "stats summaries");
    }
}

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
