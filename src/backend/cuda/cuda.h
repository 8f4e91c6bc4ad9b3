/* cuda.h -- what the CUDA backend's files share (backend/cuda/): a
 * model's stream (its queue) and a kernel's stream and cuBLAS handle, launch sizes, error capture and the
 * row-major GEMMs. Every kernel has a CPU twin in backend/cpu/ of the same
 * meaning (docs/backend.md); the kernel rows' functions are declared in
 * adapters.h. Internal to the backend: compiled by nvcc only. */
#ifndef TS_CUDA_H
#define TS_CUDA_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "backend/backend.h"
}

#define TS_CU_THREADS 256

/* Blocks of TS_CU_THREADS covering n items, capped (grid-stride loops
 * cover the rest). */
static inline unsigned ts_cu_blocks(int64_t n) {
    int64_t b = (n + TS_CU_THREADS - 1) / TS_CU_THREADS;
    if (b < 1) b = 1;
    if (b > 65535 * 4) b = 65535 * 4;
    return (unsigned)b;
}

/* for (i = first; i < n; i += stride) over the whole grid */
#define TS_CU_FOR(i, n)                                                                  \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (int64_t)(n); \
         i += (int64_t)blockDim.x * gridDim.x)

/* i % d, and i / d left in *i. `narrow`: every index of the walk is below
 * 2^32, so 32-bit division (a few instructions) serves where a 64-bit one
 * is a long software sequence on the GPU, the cost of the walk's index
 * arithmetic in an elementwise kernel. */
static __device__ __forceinline__ int64_t ts_cu_divmod(int64_t *i, int64_t d, bool narrow) {
    if (narrow) {
        uint32_t u = (uint32_t)*i, w = (uint32_t)d;
        *i = (int64_t)(u / w);
        return (int64_t)(u % w);
    }
    int64_t c = *i % d;
    *i /= d;
    return c;
}

/* Whether indices below n fit ts_cu_divmod's 32 bits. */
static inline __host__ __device__ bool ts_cu_narrow(int64_t n) { return n <= (int64_t)UINT32_MAX; }

/* A model's stream (stream_create makes one; the `void *stream` every
 * entry takes points at it): the CUDA stream its work goes on, and beside
 * it what its calls use alone, so that the work of two models never
 * meets: copy_out_then's side stream and its fork and join, the NaN/Inf
 * scan's word, the summaries' meeting place (stats.cu), a cuBLAS handle
 * bound to the stream with a workspace of its own (a recorded GEMM keeps
 * its pointer), and the recording being made or walked on it. */
struct cu_recording;
typedef struct ts_cu_queue {
    cudaStream_t s;            /* the model's work, in order (non-blocking: apart from the legacy default stream) */
    cudaStream_t side;         /* copy_out_then's copies and host functions, beside s */
    cudaEvent_t fork, join;    /* s's point the side waits for; the side's end s waits for */
    bool side_used;            /* work went to the side since the last join */
    float *flag;               /* device word of the NaN/Inf scan */
    void *records;             /* stats.cu's meeting place, made at its first launch */
    cublasHandle_t blas;       /* bound to s */
    void *blas_space;          /* its workspace */
    int mode;                  /* MODE_* (cuda.cu): what s's work does now */
    struct cu_recording *rec;  /* the recording being made or walked on s */
} ts_cu_queue;

/* The queue a stream argument names: the model's; NULL (work outside a
 * model: tests, benchmarks, memory cleared at allocation) is the
 * backend's own, made at start. TS_STREAM_THIS_THREAD, which no GPU is
 * given, is an error reported by the next synchronize (and the backend's
 * own queue used). */
ts_cu_queue *ts_cu_queue_of(void *stream);

static inline cudaStream_t ts_cu_stream(const ts_kctx *k) { return ts_cu_queue_of(k->stream)->s; }

/* Records the first CUDA error (with `what`: the op or entry that raised
 * it); the backend's synchronize reports it as TS_ERR_INTERNAL. Call after
 * each launch: ts_cu_check(cudaGetLastError(), "Relu"). */
void ts_cu_check(cudaError_t e, const char *what);
void ts_cu_check_blas(cublasStatus_t e, const char *what);

/* The cuBLAS handle of kernel call k's queue, bound to its stream. */
cublasHandle_t ts_cu_blas(const ts_kctx *k);

/* Row-major products as the CPU's ts_gemm_pool, for kernel call k (its
 * stream; fp32, or TF32 where its model allows it: kctx.tf32): C[M,N] =
 * beta C + op(A)[M,K] op(B)[K,N], A stored [M,K] ([K,M] when ta), B [K,N]
 * ([N,K] when tb). */
void ts_cu_gemm(const ts_kctx *k, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, const float *B, float beta,
                float *C);
/* `count` such products at fixed strides (elements) between the operands
 * (0: the same operand every time). */
void ts_cu_gemm_strided(const ts_kctx *k, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t sa, const float *B,
                        int64_t sb, float beta, float *C, int64_t sc, int64_t count);

/* The jobs' stats into their slots (stats.cu), on q's stream, through
 * its meeting place; and the histograms and range counts of those with a
 * hist slot (hist.cu), on stream s. */
void ts_cu_stats_reduce_many(ts_cu_queue *q, const ts_stats_job *jobs, int n);
/* stats.cu's meeting place of q given back (cudaFree: q's work done) */
void ts_cu_stats_free(ts_cu_queue *q);
void ts_cu_hist_many(cudaStream_t s, const ts_stats_job *jobs, int n);
/* hist.cu's tables on the device, once at start-up */
cudaError_t ts_cu_hist_init(void);

#endif
