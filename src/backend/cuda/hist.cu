/* hist.cu -- the histograms (TS_WATCH_HISTOGRAM: log2 magnitudes and
 * TensorBoard's buckets) and range counts (TS_WATCH_RANGE: what fp16,
 * bf16, e4m3 and e5m2 would flush to zero or overflow) of tensors, counted
 * on the device into ts_device_hist slots: the twin of core/stats.c's
 * hist_block and range_block, bin for bin. Each block counts its chunk in
 * shared memory (a warp's lanes with the same bin add once), then adds its
 * non-zero counters to the slot; integer counts, so any order gives the
 * same slot. A slot is cleared on the stream before its tensor's launch. */
#include "backend/cuda/cuda.h"

#include <stdint.h>

#define HIST_THREADS 256
#define HIST_CHUNK (HIST_THREADS * 32) /* values a block counts */
/* ts_device_hist's counters in order: log2_zeros, log2_counts, tb_counts, under, over */
#define C_LOG2 1
#define C_TB (C_LOG2 + TS_LOG2_BINS)
#define C_UNDER (C_TB + TS_TB_BINS)
#define C_OVER (C_UNDER + 4)
#define C_ALL (C_OVER + 4)
static_assert(sizeof(ts_device_hist) == C_ALL * sizeof(unsigned long long), "ts_device_hist is its counters, in order");

/* core/stats.c's tables, copied once at start-up (ts_cu_hist_init) */
__device__ static double g_tb_pos[TS_TB_SIDE];    /* TensorBoard's positive limits */
__device__ static int16_t g_tb_cell[TS_TB_CELLS]; /* positive limits <= each cell's lower edge */
__constant__ static uint32_t g_min_normal[4], g_over_from[4];

cudaError_t ts_cu_hist_init(void) {
    cudaError_t e = cudaMemcpyToSymbol(g_tb_pos, ts_tb_bucket_limits() + TS_TB_SIDE + 2, sizeof g_tb_pos);
    if (e == cudaSuccess) e = cudaMemcpyToSymbol(g_tb_cell, ts_tb_cells(), sizeof g_tb_cell);
    if (e == cudaSuccess) e = cudaMemcpyToSymbol(g_min_normal, ts_range_min_normal, sizeof g_min_normal);
    if (e == cudaSuccess) e = cudaMemcpyToSymbol(g_over_from, ts_range_over_from, sizeof g_over_from);
    return e;
}

/* TensorFlow's bucket of a finite x (upper_bound over the limits), as
 * core/stats.c's tb_index_f32: the cell's count of positive limits, then
 * the one limit a cell can hold. */
__device__ static int tb_index(float x, uint32_t abits) {
    if (abits == 0) return TS_TB_SIDE + 2;
    double a = fabs((double)x);
    int k = g_tb_cell[abits >> 16];
    while (k < TS_TB_SIDE && g_tb_pos[k] <= a) k++;
    if (x > 0) return TS_TB_SIDE + 2 + k;
    int lt = k - (k > 0 && g_tb_pos[k - 1] == a); /* the first -p[j] > x: the largest j with p[j] < |x| */
    return TS_TB_SIDE + 1 - lt;
}

/* counter c += 1 for each lane of `lanes` (the active ones, all calling)
 * passing the same c; c < 0: none */
__device__ __forceinline__ static void count(unsigned *s, int c, unsigned lanes) {
    unsigned peers = __match_any_sync(lanes, c);
    if (c >= 0 && (int)(threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&s[c], (unsigned)__popc(peers));
}

struct hist_args {
    const float *x[TS_STATS_MANY];
    int64_t n[TS_STATS_MANY];
    ts_device_hist *slot[TS_STATS_MANY];
    int what[TS_STATS_MANY];
    int first[TS_STATS_MANY + 1]; /* tensor t's chunks are blocks first[t] .. first[t + 1] - 1 */
    int count;
};

__global__ static void hist_many_kernel(const hist_args a) {
    __shared__ unsigned s[C_ALL];
    int b = (int)blockIdx.x, t = 0;
    while (t + 1 < a.count && a.first[t + 1] <= b) t++;
    for (int i = threadIdx.x; i < C_ALL; i += HIST_THREADS) s[i] = 0;
    __syncthreads();
    const float *x = a.x[t];
    int64_t begin = (int64_t)(b - a.first[t]) * HIST_CHUNK, end = begin + HIST_CHUNK < a.n[t] ? begin + HIST_CHUNK : a.n[t];
    bool hist = a.what[t] & TS_WATCH_HISTOGRAM, range = a.what[t] & TS_WATCH_RANGE;
    unsigned under[4] = {0, 0, 0, 0}, over[4] = {0, 0, 0, 0};
    for (int64_t i = begin + threadIdx.x; i < end; i += HIST_THREADS) {
        float v = x[i];
        uint32_t abits = __float_as_uint(v) & 0x7fffffffu, e = abits >> 23;
        if (hist) {
            unsigned lanes = __activemask();
            count(s, abits == 0 ? 0 : e != 0xffu ? C_LOG2 + (int)e : -1, lanes); /* NaN, Inf: nowhere (c -1 never added) */
            int k = e != 0xffu ? tb_index(v, abits) : -1;
            count(s, k < 0 ? -1 : C_TB + (k < TS_TB_BINS ? k : TS_TB_BINS - 1), lanes);
        }
        if (range)
            for (int r = 0; r < 4; r++) {
                under[r] += abits - 1u < g_min_normal[r] - 1u; /* 0 wraps to the top: not counted */
                over[r] += (abits >= g_over_from[r]) & (abits < 0x7f800000u);
            }
    }
    if (range)
        for (int r = 0; r < 4; r++) {
            if (under[r]) atomicAdd(&s[C_UNDER + r], under[r]);
            if (over[r]) atomicAdd(&s[C_OVER + r], over[r]);
        }
    __syncthreads();
    unsigned long long *slot = (unsigned long long *)(void *)a.slot[t];
    for (int i = threadIdx.x; i < C_ALL; i += HIST_THREADS)
        if (s[i]) atomicAdd(&slot[i], (unsigned long long)s[i]);
}

void ts_cu_hist_many(cudaStream_t s, const ts_stats_job *jobs, int n) {
    hist_args a;
    a.count = 0;
    a.first[0] = 0;
    for (int k = 0; k <= n; k++) {
        if (a.count > 0 && (k == n || a.count == TS_STATS_MANY)) { /* the tensors so far, in one launch */
            hist_many_kernel<<<a.first[a.count], HIST_THREADS, 0, s>>>(a);
            ts_cu_check(cudaGetLastError(), "histograms");
            a.count = 0;
        }
        if (k == n || !jobs[k].hist) continue;
        const ts_stats_job *j = &jobs[k];
        ts_cu_check(cudaMemsetAsync(j->hist, 0, sizeof *j->hist, s), "histograms");
        int c = a.count++;
        a.x[c] = j->x, a.n[c] = j->n, a.slot[c] = j->hist, a.what[c] = j->hist_what;
        int64_t parts = j->n > 0 ? (j->n + HIST_CHUNK - 1) / HIST_CHUNK : 1;
        a.first[c + 1] = a.first[c] + (int)parts;
    }
}
