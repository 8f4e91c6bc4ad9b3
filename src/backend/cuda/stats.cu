/* stats.cu -- the stats summary (TS_WATCH_STATS) of tensors, reduced on the
 * device into ts_device_stats slots without a host sync: the twin of
 * core/stats.c's partial summaries (count, zeros, NaN, +-Inf; the finite
 * values' count, mean, squared deviations, min, max), in its arithmetic:
 * every value's deviation d = x - c from one shift per tensor (core/stats.h's
 * ts_stats_typical, the host's too), d and d^2 summed in float over a run of
 * a few values, the runs' sums in double; a run holding a NaN or an Inf (or
 * a d^2 past float's range) is taken again a value at a time, all in
 * double. With one shift for the whole tensor every merge (a warp's lanes,
 * a block's warps, a tensor's blocks) is a plain sum in a fixed order, so
 * the result does not depend on timing, and the mean and squared
 * deviations come out of the sums once, at the end.
 *
 * One launch summarises up to TS_STATS_MANY tensors (their pointers by
 * value in the kernel's arguments, which a recorded launch keeps): each is
 * cut into chunks, a block a chunk; the last block of a tensor to finish
 * merges its chunks' records in index order. A chunk is one run of 16
 * values a thread where the launch's records allow: a small tensor's
 * summary then waits on memory once, not once per run (a small model's
 * step summarises a few hundred small tensors in a few launches, and each
 * launch takes as long as its slowest block). A 16-byte-aligned chunk is
 * read 4 floats a load. */
#include "backend/cuda/cuda.h"

#include <math.h>
#include <stdint.h>

#define STATS_THREADS 256
#define STATS_WARPS (STATS_THREADS / 32)
#define STATS_RUN 16      /* values a thread loads before adding any, summed in float */
#define MANY_RECORDS 4096 /* chunk records: the blocks of one launch at most */

/* Sums about the tensor's shift: a thread's, a block's, a tensor's. The
 * count is the values' (known), the finite ones those less the NaN and Inf. */
struct sums {
    double s1, s2; /* of d and d^2 over the finite values */
    unsigned long long zeros, nans, pos_infs, neg_infs;
    float lo, hi;
};

__device__ static void sums_start(sums *a) { *a = sums{0.0, 0.0, 0, 0, 0, 0, INFINITY, -INFINITY}; }

__device__ __forceinline__ static void sums_add(sums *a, const sums *b) {
    a->s1 += b->s1, a->s2 += b->s2;
    a->zeros += b->zeros, a->nans += b->nans, a->pos_infs += b->pos_infs, a->neg_infs += b->neg_infs;
    a->lo = fminf(a->lo, b->lo), a->hi = fmaxf(a->hi, b->hi);
}

/* *a += lane + d's (lanes past the warp's end read their own: those never
 * reach lane 0) */
__device__ static void sums_add_down(sums *a, int d) {
    const unsigned all = 0xffffffffu;
    sums o;
    o.s1 = __shfl_down_sync(all, a->s1, d), o.s2 = __shfl_down_sync(all, a->s2, d);
    o.zeros = __shfl_down_sync(all, a->zeros, d), o.nans = __shfl_down_sync(all, a->nans, d);
    o.pos_infs = __shfl_down_sync(all, a->pos_infs, d), o.neg_infs = __shfl_down_sync(all, a->neg_infs, d);
    o.lo = __shfl_down_sync(all, a->lo, d), o.hi = __shfl_down_sync(all, a->hi, d);
    sums_add(a, &o);
}

/* The block's sums, in a fixed order, returned to thread 0 (the others'
 * return value is not the block's) */
__device__ static sums block_sum(sums mine) {
    __shared__ sums warps[STATS_WARPS];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int d = 16; d > 0; d >>= 1) sums_add_down(&mine, d);
    if (lane == 0) warps[warp] = mine;
    __syncthreads();
    if (warp == 0) {
        if (lane < STATS_WARPS) mine = warps[lane];
        else sums_start(&mine);
        for (int d = STATS_WARPS / 2; d > 0; d >>= 1) sums_add_down(&mine, d);
    }
    __syncthreads(); /* warps[] free for the next block_sum */
    return mine;
}

/* The slot's record of a tensor of n values whose sums about c are *a. */
__device__ static void write_slot(const sums *a, int64_t n, float c, ts_device_stats *slot) {
    unsigned long long finite = (unsigned long long)n - a->nans - a->pos_infs - a->neg_infs;
    ts_device_stats s = {(double)n, (double)a->zeros, (double)a->nans, (double)a->pos_infs, (double)a->neg_infs,
                         (double)finite, 0.0, 0.0, INFINITY, -INFINITY};
    if (finite > 0) {
        double f = (double)finite;
        s.mean = (double)c + a->s1 / f;
        s.m2 = fmax(a->s2 - a->s1 * a->s1 / f, 0.0);
        s.min = a->lo, s.max = a->hi;
    }
    *slot = s;
}

/* One value into a thread's sums, in double: a run that was not all
 * finite, and the values no run takes. */
__device__ __forceinline__ static void add_slow(sums *t, float v, float c) {
    if (isnan(v)) {
        t->nans++;
    } else if (isinf(v)) {
        if (v > 0) t->pos_infs++;
        else t->neg_infs++;
    } else {
        double d = (double)v - (double)c;
        t->s1 += d;
        t->s2 += d * d;
        t->zeros += v == 0.0f;
        t->lo = fminf(t->lo, v);
        t->hi = fmaxf(t->hi, v);
    }
}

/* K loaded values into a thread's sums: in float, kept whole when d^2's
 * sum is finite (then every value is, and no d^2 overflowed), else a value
 * at a time. */
template <int K> __device__ __forceinline__ static void add_run(sums *t, const float *v, float c) {
    float s = 0.0f, q = 0.0f, lo = v[0], hi = v[0];
    unsigned z = 0;
#pragma unroll
    for (int u = 0; u < K; u++) {
        float d = v[u] - c;
        s += d;
        q = fmaf(d, d, q);
        lo = fminf(lo, v[u]), hi = fmaxf(hi, v[u]);
        z += v[u] == 0.0f;
    }
    if (isfinite(q)) {
        t->s1 += (double)s, t->s2 += (double)q, t->zeros += z;
        t->lo = fminf(t->lo, lo), t->hi = fmaxf(t->hi, hi);
    } else {
#pragma unroll
        for (int u = 0; u < K; u++) add_slow(t, v[u], c);
    }
}

/* *t += the sums of this thread's share of x[begin, end): runs of
 * STATS_RUN values, the block's threads' loads side by side, 4 floats a
 * load where x + begin is 16-byte aligned (begin is a multiple of 4) */
__device__ static void thread_sums(const float *x, int64_t begin, int64_t end, float c, sums *t) {
    const int64_t T = STATS_THREADS;
    int64_t i = begin;
    if (((uintptr_t)(x + begin) & 15) == 0) {
        const float4 *q = (const float4 *)(const void *)(x + begin);
        int64_t nq = (end - begin) / 4, k = threadIdx.x;
        for (; k + (STATS_RUN / 4 - 1) * T < nq; k += STATS_RUN / 4 * T) {
            float v[STATS_RUN];
#pragma unroll
            for (int u = 0; u < STATS_RUN / 4; u++) {
                float4 f = q[k + u * T];
                v[4 * u] = f.x, v[4 * u + 1] = f.y, v[4 * u + 2] = f.z, v[4 * u + 3] = f.w;
            }
            add_run<STATS_RUN>(t, v, c);
        }
        for (; k < nq; k += T) {
            float4 f = q[k];
            float v[4] = {f.x, f.y, f.z, f.w};
            add_run<4>(t, v, c);
        }
        i = begin + 4 * nq;
    } else {
        for (i += threadIdx.x; i + (STATS_RUN - 1) * T < end; i += STATS_RUN * T) {
            float v[STATS_RUN];
#pragma unroll
            for (int u = 0; u < STATS_RUN; u++) v[u] = x[i + u * T];
            add_run<STATS_RUN>(t, v, c);
        }
        i -= threadIdx.x;
    }
    for (i += threadIdx.x; i < end; i += T) add_slow(t, x[i], c);
}

struct many_args {
    const float *x[TS_STATS_MANY];
    int64_t n[TS_STATS_MANY];
    ts_device_stats *slot[TS_STATS_MANY];
    int first[TS_STATS_MANY + 1]; /* tensor t's chunks are blocks first[t] .. first[t + 1] - 1 */
    int count;
    int64_t chunk; /* a multiple of 4 * STATS_THREADS */
};

/* A record another block wrote, read past this block's L1. */
__device__ static sums load_record(const sums *p) {
    sums r;
    r.s1 = __ldcg(&p->s1), r.s2 = __ldcg(&p->s2);
    r.zeros = __ldcg(&p->zeros), r.nans = __ldcg(&p->nans), r.pos_infs = __ldcg(&p->pos_infs), r.neg_infs = __ldcg(&p->neg_infs);
    r.lo = __ldcg(&p->lo), r.hi = __ldcg(&p->hi);
    return r;
}

/* records[MANY_RECORDS] and done[TS_STATS_MANY] (0 before and after a
 * launch) are the blocks' meeting place */
__global__ static void stats_many_kernel(const many_args a, sums *records, unsigned *done) {
    __shared__ bool last;
    int b = (int)blockIdx.x, t = 0;
    while (t + 1 < a.count && a.first[t + 1] <= b) t++;
    const float *x = a.x[t];
    int64_t n = a.n[t];
    float c = ts_stats_typical(x, n); /* the shift: as the host's (core/stats.h) */
    int part = b - a.first[t], parts = a.first[t + 1] - a.first[t];
    int64_t begin = (int64_t)part * a.chunk, end = begin + a.chunk < n ? begin + a.chunk : n;
    sums mine;
    sums_start(&mine);
    thread_sums(x, begin, end, c, &mine);
    sums total = block_sum(mine);
    if (parts == 1) {
        if (threadIdx.x == 0) write_slot(&total, n, c, a.slot[t]);
        return;
    }
    if (threadIdx.x == 0) {
        records[b] = total;
        __threadfence(); /* this block's record before its count */
        last = atomicAdd(&done[t], 1u) == (unsigned)parts - 1;
    }
    __syncthreads();
    if (!last) return;
    /* the last block: the chunks' records, each thread's share in index
     * order (4 loads in flight), then the block's sum */
    const sums *r = records + a.first[t];
    sums_start(&mine);
    int i = threadIdx.x;
    for (; i + 3 * STATS_THREADS < parts; i += 4 * STATS_THREADS) {
        sums v[4];
#pragma unroll
        for (int u = 0; u < 4; u++) v[u] = load_record(&r[i + u * STATS_THREADS]);
#pragma unroll
        for (int u = 0; u < 4; u++) sums_add(&mine, &v[u]);
    }
    for (; i < parts; i += STATS_THREADS) {
        sums v = load_record(&r[i]);
        sums_add(&mine, &v);
    }
    total = block_sum(mine);
    if (threadIdx.x == 0) {
        write_slot(&total, n, c, a.slot[t]);
        done[t] = 0; /* for the next launch on the stream */
    }
}

/* q->records: MANY_RECORDS records, then TS_STATS_MANY counters, one
 * launch at a time on q's stream */
void ts_cu_stats_reduce_many(ts_cu_queue *q, const ts_stats_job *jobs, int n) {
    cudaStream_t s = q->s;
    if (!q->records) {
        size_t bytes = MANY_RECORDS * sizeof(sums) + TS_STATS_MANY * sizeof(unsigned);
        if (cudaMalloc(&q->records, bytes) != cudaSuccess ||
            cudaMemsetAsync((sums *)q->records + MANY_RECORDS, 0, TS_STATS_MANY * sizeof(unsigned), s) != cudaSuccess) {
            ts_cu_check(cudaErrorMemoryAllocation, "stats summaries");
            cudaFree(q->records);
            q->records = nullptr;
            return;
        }
    }
    sums *records = (sums *)q->records;
    const int64_t quantum = 4 * STATS_THREADS; /* chunks keep a tensor's 16-byte alignment */
    for (int k = 0; k < n; k += TS_STATS_MANY) {
        many_args a;
        a.count = n - k < TS_STATS_MANY ? n - k : TS_STATS_MANY;
        int64_t total = 0;
        for (int t = 0; t < a.count; t++) total += jobs[k + t].n;
        /* a run a thread, or as few as fit the records */
        a.chunk = STATS_THREADS * STATS_RUN;
        if (total / a.chunk + a.count > MANY_RECORDS) a.chunk = (total / (MANY_RECORDS - a.count) / quantum + 1) * quantum;
        a.first[0] = 0;
        for (int t = 0; t < a.count; t++) {
            const ts_stats_job *j = &jobs[k + t];
            a.x[t] = j->x, a.n[t] = j->n, a.slot[t] = j->slot;
            int64_t parts = j->n > 0 ? (j->n + a.chunk - 1) / a.chunk : 1;
            a.first[t + 1] = a.first[t] + (int)parts;
        }
        stats_many_kernel<<<a.first[a.count], STATS_THREADS, 0, s>>>(a, records, (unsigned *)(void *)(records + MANY_RECORDS));
        ts_cu_check(cudaGetLastError(), "stats summaries");
    }
}

void ts_cu_stats_free(ts_cu_queue *q) {
    if (q->records) cudaFree(q->records);
    q->records = nullptr;
}
