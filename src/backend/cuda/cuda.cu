/* cuda.cu -- the CUDA backend: device memory from cudaMalloc, one GPU per
 * process (cuda:N, the first one asked for), a stream per model (its
 * queue, cuda.h: stream_create) that every entry honours, cuBLAS for the
 * GEMMs, and the kernel table (one row per op, the twins of the CPU's in
 * backend/cpu/). Kernels and copies are asynchronous on the stream they
 * are given; the first CUDA error is kept, with the op that raised it,
 * and reported by synchronize. */
#include "backend/cuda/adapters.h"
extern "C" {
#include "backend/held.h"
}

extern "C" {
#include "graph/optim.h"
#include "core/stats.h"
}

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------- cuBLAS, loaded */

/* cuBLAS is loaded when the first model asks for the GPU, not linked:
 * linked, its libraries cost every process about 150 MB of resident memory
 * at start, a CPU-only run too. */
#define TS_STR_(x) #x
#define TS_STR(x) TS_STR_(x)
static struct {
    void *lib;
    cublasStatus_t (*create)(cublasHandle_t *);
    cublasStatus_t (*destroy)(cublasHandle_t);
    cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
    cublasStatus_t (*set_math_mode)(cublasHandle_t, cublasMath_t);
    cublasStatus_t (*set_workspace)(cublasHandle_t, void *, size_t);
    const char *(*status_string)(cublasStatus_t);
    cublasStatus_t (*sgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const float *, const float *, int,
                            const float *, int, const float *, float *, int);
    cublasStatus_t (*sgemm_strided)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const float *, const float *,
                                    int, long long, const float *, int, long long, const float *, float *, int, long long, int);
} blas_api;

static ts_status load_cublas(int ordinal) {
#ifndef TS_CUDA_LIBDIR
#define TS_CUDA_LIBDIR "/usr/local/cuda/lib64"
#endif
    /* the loader's path first, then the toolkit this was built with */
    const char *names[] = {"libcublas.so." TS_STR(CUBLAS_VER_MAJOR), TS_CUDA_LIBDIR "/libcublas.so." TS_STR(CUBLAS_VER_MAJOR), "libcublas.so"};
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !blas_api.lib; i++) blas_api.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!blas_api.lib)
        return ts_error(TS_ERR_UNSUPPORTED, "cuda:%d: cannot load cuBLAS (%s): install the CUDA toolkit's cuBLAS or add its folder to LD_LIBRARY_PATH",
                        ordinal, dlerror());
    struct {
        void **fn;
        const char *name;
    } want[] = {{(void **)&blas_api.create, "cublasCreate_v2"},
                {(void **)&blas_api.destroy, "cublasDestroy_v2"},
                {(void **)&blas_api.set_stream, "cublasSetStream_v2"},
                {(void **)&blas_api.set_math_mode, "cublasSetMathMode"},
                {(void **)&blas_api.set_workspace, "cublasSetWorkspace_v2"},
                {(void **)&blas_api.status_string, "cublasGetStatusString"},
                {(void **)&blas_api.sgemm, "cublasSgemm_v2"},
                {(void **)&blas_api.sgemm_strided, "cublasSgemmStridedBatched"}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!(*want[i].fn = dlsym(blas_api.lib, want[i].name)))
            return ts_error(TS_ERR_UNSUPPORTED, "cuda:%d: the cuBLAS found lacks %s: install cuBLAS %d", ordinal, want[i].name,
                            CUBLAS_VER_MAJOR);
    return TS_OK;
}

/* ------------------------------------------------------------- state */

static struct {
    pthread_mutex_t lock;
    bool ready;
    int ordinal;
    char error[512]; /* the first CUDA error since the last synchronize */
    ts_cu_queue own; /* the backend's own queue: work outside a model (a NULL stream) */
} g_cu = {PTHREAD_MUTEX_INITIALIZER, false, 0, "", {}};

/* A queue's mode. MODE_RECORD: its stream's work is captured into a
 * graph, not done; MODE_WALK: the host walks a recorded run and launches
 * nothing (the executor's walk table drops every call that works; the
 * optimizer's update only stages its step constants). */
enum { MODE_LAUNCH, MODE_RECORD, MODE_WALK };
#define BLAS_WORKSPACE (32u << 20) /* what cuBLAS asks for on Hopper */

void ts_cu_check(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return;
    /* a call that failed (an invalid argument) also leaves its error as the
     * runtime's last one: cleared here, so that the next launch's check
     * does not blame its own op for it */
    (void)cudaGetLastError();
    if (g_cu.error[0]) return;
    snprintf(g_cu.error, sizeof g_cu.error, "CUDA error in %s on cuda:%d: %s (%s)", what ? what : "(unknown)", g_cu.ordinal,
             cudaGetErrorString(e), cudaGetErrorName(e));
}

void ts_cu_check_blas(cublasStatus_t e, const char *what) {
    if (e == CUBLAS_STATUS_SUCCESS || g_cu.error[0]) return;
    snprintf(g_cu.error, sizeof g_cu.error, "cuBLAS error in %s on cuda:%d: %s", what ? what : "(unknown)", g_cu.ordinal,
             blas_api.status_string(e));
}

ts_cu_queue *ts_cu_queue_of(void *stream) {
    if (stream == TS_STREAM_THIS_THREAD) {
        ts_cu_check(cudaErrorInvalidResourceHandle, "a call given the host's TS_STREAM_THIS_THREAD rather than its model's stream");
        stream = nullptr;
    }
    return stream ? (ts_cu_queue *)stream : &g_cu.own;
}

static cudaStream_t cu_stream(void *stream) { return ts_cu_queue_of(stream)->s; }

/* Each queue's handle is bound to its stream once, when the queue is made
 * (queue_open), then given its workspace (binding a stream puts cuBLAS
 * back on a workspace of its own): never bound again. */
cublasHandle_t ts_cu_blas(const ts_kctx *k) { return ts_cu_queue_of(k->stream)->blas; }

/* ------------------------------------------------------------ GEMMs */

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLAS
 * gets B first, with the row-major leading dimensions. */
void ts_cu_gemm_strided(const ts_kctx *k, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t sa, const float *B,
                        int64_t sb, float beta, float *C, int64_t sc, int64_t count) {
    if (M == 0 || N == 0 || count == 0) return;
    const float one = 1.0f;
    cublasHandle_t h = ts_cu_blas(k);
    /* the handle's mode for this product: the default keeps fp32's
     * precision (no TF32, as PyTorch unless allow_tf32) and, unlike the
     * pedantic mode, leaves cuBLAS its fastest such kernels */
    ts_cu_check_blas(blas_api.set_math_mode(h, k->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH), "GEMM math mode");
    int lda = (int)(ta ? M : K), ldb = (int)(tb ? K : N), ldc = (int)N;
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasStatus_t st;
    if (count == 1)
        st = blas_api.sgemm(h, opb, opa, (int)N, (int)M, (int)K, &one, B, ldb, A, lda, &beta, C, ldc);
    else
        st = blas_api.sgemm_strided(h, opb, opa, (int)N, (int)M, (int)K, &one, B, ldb, sb, A, lda, sa, &beta, C, ldc, sc, (int)count);
    ts_cu_check_blas(st, "GEMM");
}

void ts_cu_gemm(const ts_kctx *k, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, const float *B, float beta,
                float *C) {
    ts_cu_gemm_strided(k, ta, tb, M, N, K, A, 0, B, 0, beta, C, 0, 1);
}

/* ------------------------------------------------------------ memory */

/* What this backend holds (backend/held.h): its allocations' sizes by
 * address, the sum and its peak. */
static ts_held g_held = TS_HELD_INIT;

/* The driver's free and total are asked at most every 10 ms while what
 * this process holds stays the same: the metrics ask after every run, and
 * a small model's run is a fraction of the call's cost. */
static void cu_memory_info(ts_device_memory *out) {
    static size_t free_b, total_b;
    static uint64_t asked_ns, asked_in_use = UINT64_MAX;
    uint64_t now = ts_now_ns(), in_use, peak;
    ts_held_get(&g_held, &in_use, &peak);
    if (asked_in_use != in_use || now - asked_ns > 10000000u) {
        if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) (void)cudaGetLastError(), free_b = total_b = 0;
        asked_ns = now, asked_in_use = in_use;
    }
    *out = ts_device_memory{in_use, peak, free_b, total_b};
}

static ts_status cu_alloc(size_t bytes, void **out) {
    *out = nullptr;
    cudaError_t e = cudaMalloc(out, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        *out = nullptr;
        (void)cudaGetLastError(); /* an allocation failure is not sticky */
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        return ts_error(TS_ERR_OUT_OF_MEMORY, "cuda:%d: no room for %zu bytes (%zu MiB of %zu MiB free): %s", g_cu.ordinal, bytes,
                        free_b >> 20, total_b >> 20, cudaGetErrorString(e));
    }
    /* cleared on the backend's own queue, and waited for: allocations come
     * with no model's stream (compile), and the memory is then ready for
     * any stream's work */
    e = cudaMemsetAsync(*out, 0, bytes ? bytes : 1, g_cu.own.s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(g_cu.own.s);
    if (e != cudaSuccess) {
        cudaFree(*out);
        *out = nullptr;
        return ts_error(TS_ERR_INTERNAL, "cuda:%d: clearing new memory: %s", g_cu.ordinal, cudaGetErrorString(e));
    }
    if (!ts_held_note(&g_held, *out, bytes)) {
        cudaFree(*out);
        *out = nullptr;
        return ts_error(TS_ERR_OUT_OF_MEMORY, "cuda:%d: no host memory to note an allocation", g_cu.ordinal);
    }
    return TS_OK;
}

static void cu_free(void *p) {
    if (!p) return;
    ts_held_forget(&g_held, p);
    ts_cu_check(cudaFree(p), "cudaFree");
}

/* ----------------------------------------------------------- copies */

/* Registered host memory: the copies' DMA reads and writes it directly,
 * asynchronously, instead of through the driver's pageable staging. */
static bool cu_host_pin(void *p, size_t bytes) {
    if (!p || !bytes) return false;
    if (cudaHostRegister(p, bytes, cudaHostRegisterDefault) == cudaSuccess) return true;
    (void)cudaGetLastError(); /* already registered (another model of the graph), or refused: the copies still work */
    return false;
}

static void cu_host_unpin(void *p) {
    if (p && cudaHostUnregister(p) != cudaSuccess) (void)cudaGetLastError();
}

static void cu_copy_to_device(void *stream, void *dst, const void *src, size_t bytes) {
    if (bytes) ts_cu_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cu_stream(stream)), "copy to the device");
}

static void cu_copy_to_host(void *stream, void *dst, const void *src, size_t bytes) {
    if (bytes) ts_cu_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, cu_stream(stream)), "copy to the host");
}

static void cu_copy_on_device(void *stream, void *dst, const void *src, size_t bytes) {
    if (bytes && dst != src) ts_cu_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cu_stream(stream)), "copy on the device");
}

/* q's side work so far made part of its stream's: a recorded run's
 * graph then ends with it, and the stream's next work waits for it. */
static void join_side(ts_cu_queue *q) {
    if (!q->side_used) return;
    ts_cu_check(cudaEventRecord(q->join, q->side), "the host copies' end");
    ts_cu_check(cudaStreamWaitEvent(q->s, q->join, 0), "the host copies' end");
    q->side_used = false;
}

/* The copies and fn(arg) on the queue's side stream once its stream's
 * work so far is done: the stream goes on meanwhile. Recording, the fork
 * and join make them a branch of the graph (joined at capture_end). */
static void cu_copy_out_then(void *stream, const ts_copy_out *c, int n, void (*fn)(void *), void *arg) {
    ts_cu_queue *q = ts_cu_queue_of(stream);
    ts_cu_check(cudaEventRecord(q->fork, q->s), "the host copies' start");
    ts_cu_check(cudaStreamWaitEvent(q->side, q->fork, 0), "the host copies' start");
    for (int i = 0; i < n; i++)
        if (c[i].bytes) ts_cu_check(cudaMemcpyAsync(c[i].dst, c[i].src, c[i].bytes, cudaMemcpyDeviceToHost, q->side), "a copy to the host");
    ts_cu_check(cudaLaunchHostFunc(q->side, fn, arg), "the host's part of the copies");
    q->side_used = true;
}

/* Everything on the queue's stream done, and its side's (joined first):
 * the host may then read what they copied. */
static ts_status cu_synchronize(void *stream) {
    ts_cu_queue *q = ts_cu_queue_of(stream);
    join_side(q);
    ts_cu_check(cudaStreamSynchronize(q->s), "synchronize");
    if (!g_cu.error[0]) return TS_OK;
    ts_status st = ts_error(TS_ERR_INTERNAL, "%s", g_cu.error);
    g_cu.error[0] = 0;
    return st;
}

static void queue_close(ts_cu_queue *q) {
    if (q->s) {
        join_side(q);
        (void)cudaStreamSynchronize(q->s); /* its work done before what it uses goes */
    }
    if (q->blas) blas_api.destroy(q->blas);
    if (q->blas_space) cudaFree(q->blas_space);
    ts_cu_stats_free(q);
    if (q->flag) cudaFree(q->flag);
    if (q->fork) cudaEventDestroy(q->fork);
    if (q->join) cudaEventDestroy(q->join);
    if (q->side) cudaStreamDestroy(q->side);
    if (q->s) cudaStreamDestroy(q->s);
    (void)cudaGetLastError();
    *q = ts_cu_queue{};
}

/* q made on the backend's GPU: its streams (non-blocking: the legacy
 * default stream never orders them), events, scan word, and a cuBLAS
 * handle bound to its stream with its own workspace. */
static ts_status queue_open(ts_cu_queue *q) {
    *q = ts_cu_queue{};
    cudaError_t e;
    if ((e = cudaSetDevice(g_cu.ordinal)) != cudaSuccess || (e = cudaStreamCreateWithFlags(&q->s, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaStreamCreateWithFlags(&q->side, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaEventCreateWithFlags(&q->fork, cudaEventDisableTiming)) != cudaSuccess ||
        (e = cudaEventCreateWithFlags(&q->join, cudaEventDisableTiming)) != cudaSuccess ||
        (e = cudaMalloc((void **)&q->flag, sizeof(float))) != cudaSuccess || (e = cudaMalloc(&q->blas_space, BLAS_WORKSPACE)) != cudaSuccess) {
        (void)cudaGetLastError();
        queue_close(q);
        return ts_error(TS_ERR_UNSUPPORTED, "cuda:%d: cannot make a stream: %s", g_cu.ordinal, cudaGetErrorString(e));
    }
    cublasStatus_t b = blas_api.create(&q->blas);
    if (b != CUBLAS_STATUS_SUCCESS) q->blas = nullptr;
    if (b == CUBLAS_STATUS_SUCCESS) b = blas_api.set_stream(q->blas, q->s);
    if (b == CUBLAS_STATUS_SUCCESS) b = blas_api.set_workspace(q->blas, q->blas_space, BLAS_WORKSPACE); /* after the stream, which resets it */
    if (b != CUBLAS_STATUS_SUCCESS) {
        ts_status st = ts_error(TS_ERR_UNSUPPORTED, "cuda:%d: cannot start cuBLAS on a stream: %s", g_cu.ordinal, blas_api.status_string(b));
        queue_close(q);
        return st;
    }
    return TS_OK;
}

static ts_status cu_stream_create(void **out) {
    *out = nullptr;
    ts_cu_queue *q = (ts_cu_queue *)calloc(1, sizeof *q);
    if (!q) return ts_error(TS_ERR_OUT_OF_MEMORY, "cuda:%d: no memory for a stream", g_cu.ordinal);
    ts_status st = queue_open(q);
    if (st) {
        free(q);
        return st;
    }
    *out = q;
    return TS_OK;
}

/* Its work completed, then the queue given back (the backend's own, or
 * NULL: nothing). */
static void cu_stream_destroy(void *stream) {
    ts_cu_queue *q = (ts_cu_queue *)stream;
    if (!q || q == &g_cu.own || stream == TS_STREAM_THIS_THREAD) return;
    queue_close(q);
    free(q);
}

/* ----------------------------------------------- fill and accumulate */

/* dst[n] = value */
__global__ static void fill_kernel(float *dst, float value, int64_t n) {
    TS_CU_FOR(i, n) dst[i] = value;
}

/* dst[n] += src[n] */
__global__ static void accumulate_kernel(float *dst, const float *src, int64_t n) {
    TS_CU_FOR(i, n) dst[i] += src[i];
}

/* dst[n] = s x[n] */
__global__ static void scale_kernel(float *dst, const float *x, float s, int64_t n) {
    TS_CU_FOR(i, n) dst[i] = s * x[i];
}

static void cu_fill(void *stream, float *dst, float value, int64_t n) {
    if (n <= 0) return;
    fill_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, cu_stream(stream)>>>(dst, value, n);
    ts_cu_check(cudaGetLastError(), "fill");
}

static void cu_zero(void *stream, float *dst, int64_t n) {
    if (n > 0) ts_cu_check(cudaMemsetAsync(dst, 0, (size_t)n * sizeof(float), cu_stream(stream)), "zero");
}

static void cu_accumulate(void *stream, float *dst, const float *src, int64_t n) {
    if (n <= 0) return;
    accumulate_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, cu_stream(stream)>>>(dst, src, n);
    ts_cu_check(cudaGetLastError(), "accumulate");
}

/* what it lost added to *lost, the device's memory (exec/ clears it) */
static void cu_round_half(void *stream, ts_dtype t, float *x, int64_t n, ts_half_loss *lost) { ts_cu_round_half(cu_stream(stream), t, x, x, n, lost); }

static void cu_scale(void *stream, float *dst, const float *x, float s, int64_t n) {
    if (n <= 0) return;
    scale_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, cu_stream(stream)>>>(dst, x, s, n);
    ts_cu_check(cudaGetLastError(), "scale");
}

/* -------------------------------------------------------- optimizers */

/* The twin of graph/optim.c's opt_step: one element. */
enum { STEP_SGD, STEP_MOMENTUM, STEP_ADAM };

typedef struct step_k {
    float lr, mom, damp, wd, b1, b2, step_size, bc2_sqrt, eps, decay;
    bool first, nesterov, adamw;
} step_k;

/* param[begin, end) and the optimizer state, the same range */
/* kp: the step's constants in device memory (a recorded run's table), else k */
template <int KIND>
__global__ static void opt_kernel(step_k kv, const step_k *kp, float *p, const float *gr, float *sa, float *sb, int64_t n) {
    const step_k k = kp ? *kp : kv;
    TS_CU_FOR(i, n) {
        float g = gr[i], w = p[i];
        if (KIND != STEP_ADAM) {
            if (k.wd != 0.0f) g += k.wd * w; /* as PyTorch: only when set */
            if (KIND == STEP_SGD) {
                p[i] = w - k.lr * g;
            } else {
                float a = k.first ? g : k.mom * sa[i] + k.damp * g;
                sa[i] = a;
                p[i] = w - k.lr * (k.nesterov ? g + k.mom * a : a);
            }
        } else {
            if (k.adamw) w *= k.decay;
            else if (k.wd != 0.0f) g += k.wd * w;
            float a = k.b1 * sa[i] + (1.0f - k.b1) * g;
            float b = k.b2 * sb[i] + (1.0f - k.b2) * g * g;
            sa[i] = a;
            sb[i] = b;
            p[i] = w - k.step_size * a / (sqrtf(b) / k.bc2_sqrt + k.eps);
        }
    }
}

/* ------------------------------------------------- recorded runs */

/* A run captured as a CUDA graph, and the table of the step constants its
 * updates read: filled by the host's walk of each run, sent before each
 * launch. */
typedef struct cu_recording {
    cudaGraphExec_t exec;
    step_k *host; /* pinned: the copy before a launch reads it after the walk */
    step_k *dev;
    int cap, used;
} cu_recording;

/* The update's constants into the recording's next row: the device's
 * address of that row, or nullptr when the table is full (the error kept). */
static const step_k *stage_step(ts_cu_queue *q, const step_k *k) {
    cu_recording *r = q->rec;
    if (!r || r->used >= r->cap) {
        ts_cu_check(cudaErrorInvalidValue, "recorded run: more optimizer updates than planned");
        return nullptr;
    }
    r->host[r->used] = *k;
    return r->dev + r->used++;
}

static void cu_recording_free(void *p) {
    cu_recording *r = (cu_recording *)p;
    if (!r) return;
    if (r->exec) cudaGraphExecDestroy(r->exec);
    cudaFreeHost(r->host);
    cudaFree(r->dev);
    free(r);
}

static ts_status cu_capture_begin(void *stream, int updates, void **out) {
    *out = nullptr;
    ts_cu_queue *q = ts_cu_queue_of(stream);
    cu_recording *r = (cu_recording *)calloc(1, sizeof *r);
    if (!r) return ts_error(TS_ERR_OUT_OF_MEMORY, "cuda:%d: no memory for a recorded run", g_cu.ordinal);
    r->cap = updates > 0 ? updates : 1;
    cudaError_t e = cudaMallocHost((void **)&r->host, (size_t)r->cap * sizeof *r->host);
    if (e == cudaSuccess) e = cudaMalloc((void **)&r->dev, (size_t)r->cap * sizeof *r->dev);
    join_side(q); /* side work of steps launched before: not part of the recording */
    if (e == cudaSuccess) e = cudaStreamBeginCapture(q->s, cudaStreamCaptureModeRelaxed);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        cu_recording_free(r);
        return ts_error(TS_ERR_UNSUPPORTED, "cuda:%d: cannot record a run: %s", g_cu.ordinal, cudaGetErrorString(e));
    }
    q->mode = MODE_RECORD;
    q->rec = r;
    *out = r;
    return TS_OK;
}

static ts_status cu_capture_end(void *stream, void *p) {
    cu_recording *r = (cu_recording *)p;
    ts_cu_queue *q = ts_cu_queue_of(stream);
    cudaGraph_t graph = nullptr;
    join_side(q); /* a capture ends with every stream it forked joined */
    cudaError_t e = cudaStreamEndCapture(q->s, &graph);
    q->mode = MODE_LAUNCH;
    q->rec = nullptr;
    if (e == cudaSuccess && !g_cu.error[0]) e = cudaGraphInstantiate(&r->exec, graph, 0);
    if (graph) cudaGraphDestroy(graph);
    if (e != cudaSuccess || g_cu.error[0]) {
        (void)cudaGetLastError();
        ts_status st = ts_error(TS_ERR_INTERNAL, "cuda:%d: recording a run: %s", g_cu.ordinal, g_cu.error[0] ? g_cu.error : cudaGetErrorString(e));
        g_cu.error[0] = 0;
        r->exec = nullptr;
        return st;
    }
    return TS_OK;
}

static void cu_walk_begin(void *stream, void *p) {
    ts_cu_queue *q = ts_cu_queue_of(stream);
    q->mode = MODE_WALK;
    q->rec = (cu_recording *)p;
    q->rec->used = 0;
}

static ts_status cu_replay(void *stream, void *p, bool launch) {
    cu_recording *r = (cu_recording *)p;
    ts_cu_queue *q = ts_cu_queue_of(stream);
    q->mode = MODE_LAUNCH;
    q->rec = nullptr;
    if (!launch) return TS_OK;
    cudaStream_t s = q->s;
    if (r->used) ts_cu_check(cudaMemcpyAsync(r->dev, r->host, (size_t)r->used * sizeof *r->host, cudaMemcpyHostToDevice, s), "recorded run's step constants");
    ts_cu_check(cudaGraphLaunch(r->exec, s), "replaying a recorded run");
    return TS_OK;
}

static void cu_opt_update(void *stream, const ts_optimizer *o, const ts_opt_consts *c, ts_opt_state *s, float *param, const float *grad,
                          int64_t begin, int64_t end) {
    ts_cu_queue *q = ts_cu_queue_of(stream);
    int64_t n = end - begin;
    if (n <= 0) return;
    int kind = o->kind != TS_OPT_SGD ? STEP_ADAM : o->momentum != 0.0f ? STEP_MOMENTUM : STEP_SGD;
    step_k k = {o->lr, o->momentum, 1.0f - o->dampening, o->weight_decay, o->beta1, o->beta2, c->step_size, c->bc2_sqrt, o->eps,
                1.0f - o->lr * o->weight_decay, c->first, o->nesterov != 0, o->kind == TS_OPT_ADAMW};
    const step_k *kp = q->mode == MODE_LAUNCH ? nullptr : stage_step(q, &k);
    if (q->mode == MODE_WALK) return;
    float *p = param + begin;
    const float *g = grad + begin;
    unsigned blocks = ts_cu_blocks(n);
    if (kind == STEP_SGD) opt_kernel<STEP_SGD><<<blocks, TS_CU_THREADS, 0, q->s>>>(k, kp, p, g, nullptr, nullptr, n);
    else if (kind == STEP_MOMENTUM) opt_kernel<STEP_MOMENTUM><<<blocks, TS_CU_THREADS, 0, q->s>>>(k, kp, p, g, s->accl + begin, nullptr, n);
    else opt_kernel<STEP_ADAM><<<blocks, TS_CU_THREADS, 0, q->s>>>(k, kp, p, g, s->accl1 + begin, s->accl2 + begin, n);
    ts_cu_check(cudaGetLastError(), "Optimizer");
}

/* -------------------------------------------------------- reductions */

static void cu_stats_reduce_many(void *stream, const ts_stats_job *jobs, int n) {
    ts_cu_queue *q = ts_cu_queue_of(stream);
    ts_cu_stats_reduce_many(q, jobs, n);
    ts_cu_hist_many(q->s, jobs, n);
}

/* *flag = 1 when x[n] holds a NaN or an Inf (exponent all ones) */
__global__ static void nonfinite_kernel(const float *x, int64_t n, float *flag) {
    bool bad = false;
    TS_CU_FOR(i, n) bad |= (__float_as_uint(x[i]) & 0x7f800000u) == 0x7f800000u;
    if (__syncthreads_or(bad) && threadIdx.x == 0) *flag = 1.0f;
}

static bool cu_has_nonfinite(void *stream, const float *x, int64_t n) {
    if (n <= 0) return false;
    float h = 0;
    ts_cu_queue *q = ts_cu_queue_of(stream);
    cudaStream_t s = q->s; /* after the work queued before it, which wrote x; the host waits for its word */
    ts_cu_check(cudaMemsetAsync(q->flag, 0, sizeof(float), s), "NaN/Inf scan");
    nonfinite_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, s>>>(x, n, q->flag);
    ts_cu_check(cudaGetLastError(), "NaN/Inf scan");
    ts_cu_check(cudaMemcpyAsync(&h, q->flag, sizeof h, cudaMemcpyDeviceToHost, s), "NaN/Inf scan");
    ts_cu_check(cudaStreamSynchronize(s), "NaN/Inf scan");
    return h != 0.0f;
}

/* ------------------------------------------------------------ timing */

static void cu_event_record(void *stream, ts_event *e) {
    if (!e->handle) {
        cudaEvent_t ev;
        if (cudaEventCreate(&ev) != cudaSuccess) {
            (void)cudaGetLastError();
            return;
        }
        e->handle = (void *)ev;
    }
    ts_cu_check(cudaEventRecord((cudaEvent_t)e->handle, cu_stream(stream)), "event");
}

static uint64_t cu_event_elapsed_ns(const ts_event *a, const ts_event *b) {
    float ms = 0;
    if (!a->handle || !b->handle || cudaEventElapsedTime(&ms, (cudaEvent_t)a->handle, (cudaEvent_t)b->handle) != cudaSuccess) return 0;
    return (uint64_t)((double)ms * 1e6);
}

static void cu_event_free(ts_event *e) {
    if (e->handle) ts_cu_check(cudaEventDestroy((cudaEvent_t)e->handle), "event");
    e->handle = nullptr;
}

/* ------------------------------------------------------ kernel table */

static ts_kernel_row kernels[TS_OP_COUNT];

/* a row of this device: its kernels (and workspace), every other field
 * off (no cache, no stored gradients, no fused bias or Relu) */
static ts_kernel_row row(ts_kernel_fn forward, ts_kernel_fn backward,
                         size_t (*workspace)(const ts_shape *, const ts_dtype *, const ts_shape *, int) = nullptr) {
    ts_kernel_row r{};
    r.forward = forward, r.backward = backward, r.workspace_floats = workspace;
    return r;
}

static void fill_kernel_table(void) {
    kernels[TS_OP_MATMUL] = row(ts_cu_fwd_matmul, ts_cu_bwd_matmul);
    kernels[TS_OP_MATMUL_T] = row(ts_cu_fwd_matmul, ts_cu_bwd_matmul);
    kernels[TS_OP_ADD] = row(ts_cu_fwd_broadcast_binary, ts_cu_bwd_broadcast_binary);
    kernels[TS_OP_SUB] = row(ts_cu_fwd_broadcast_binary, ts_cu_bwd_broadcast_binary);
    kernels[TS_OP_MUL] = row(ts_cu_fwd_broadcast_binary, ts_cu_bwd_broadcast_binary);
    kernels[TS_OP_SCALE] = row(ts_cu_fwd_scale, ts_cu_bwd_scale);
    kernels[TS_OP_RELU] = row(ts_cu_fwd_relu, ts_cu_bwd_relu);
    kernels[TS_OP_LOG] = row(ts_cu_fwd_log, ts_cu_bwd_log);
    kernels[TS_OP_RESHAPE] = row(ts_cu_fwd_copy, ts_cu_bwd_copy);
    kernels[TS_OP_FLATTEN] = row(ts_cu_fwd_copy, ts_cu_bwd_copy);
    kernels[TS_OP_LOG_SOFTMAX] = row(ts_cu_fwd_softmax_any, ts_cu_bwd_softmax_any);
    kernels[TS_OP_SOFTMAX] = row(ts_cu_fwd_softmax_any, ts_cu_bwd_softmax_any);
    kernels[TS_OP_NLL_LOSS] = row(ts_cu_fwd_nll, ts_cu_bwd_nll);
    kernels[TS_OP_CROSS_ENTROPY] = row(ts_cu_fwd_cross_entropy, ts_cu_bwd_cross_entropy);
    kernels[TS_OP_SUM] = row(ts_cu_fwd_sum, ts_cu_bwd_sum);
    kernels[TS_OP_MEAN] = row(ts_cu_fwd_sum, ts_cu_bwd_sum);
    kernels[TS_OP_PRINT] = row(ts_cu_fwd_copy, ts_cu_bwd_copy);
    kernels[TS_OP_DIV] = row(ts_cu_fwd_broadcast_binary, ts_cu_bwd_broadcast_binary);
    kernels[TS_OP_EXP] = row(ts_cu_fwd_ew_unary, ts_cu_bwd_ew_unary);
    kernels[TS_OP_SQRT] = row(ts_cu_fwd_ew_unary, ts_cu_bwd_ew_unary);
    kernels[TS_OP_POW] = row(ts_cu_fwd_ew_unary, ts_cu_bwd_ew_unary);
    kernels[TS_OP_ERF] = row(ts_cu_fwd_ew_unary, ts_cu_bwd_ew_unary);
    kernels[TS_OP_GELU] = row(ts_cu_fwd_ew_unary, ts_cu_bwd_ew_unary);
    kernels[TS_OP_EMBEDDING] = row(ts_cu_fwd_gather, ts_cu_bwd_gather);
    kernels[TS_OP_LAYER_NORM] = row(ts_cu_fwd_layer_norm, ts_cu_bwd_layer_norm);
    kernels[TS_OP_GROUP_NORM] = row(ts_cu_fwd_group_norm, ts_cu_bwd_group_norm);
    kernels[TS_OP_BATCH_MATMUL] = row(ts_cu_fwd_bmm, ts_cu_bwd_bmm);
    kernels[TS_OP_PERMUTE] = row(ts_cu_fwd_permute, ts_cu_bwd_permute);
    kernels[TS_OP_SLICE] = row(ts_cu_fwd_slice, ts_cu_bwd_slice);
    kernels[TS_OP_CONCAT] = row(ts_cu_fwd_concat, ts_cu_bwd_concat);
    kernels[TS_OP_WHERE] = row(ts_cu_fwd_where, ts_cu_bwd_where);
    kernels[TS_OP_MASKED_FILL] = row(ts_cu_fwd_masked_fill, ts_cu_bwd_masked_fill);
    kernels[TS_OP_REDUCE_SUM_AXES] = row(ts_cu_fwd_reduce_axes, ts_cu_bwd_reduce_axes);
    kernels[TS_OP_REDUCE_MEAN_AXES] = row(ts_cu_fwd_reduce_axes, ts_cu_bwd_reduce_axes);
    kernels[TS_OP_REDUCE_MAX_AXES] = row(ts_cu_fwd_reduce_axes, ts_cu_bwd_reduce_axes);
    kernels[TS_OP_CONV2D] = row(ts_cu_fwd_conv2d, ts_cu_bwd_conv2d, ts_cu_workspace_conv2d);
    kernels[TS_OP_CONV3D] = row(ts_cu_fwd_conv3d, ts_cu_bwd_conv3d);
    kernels[TS_OP_CONV_TRANSPOSE3D] = row(ts_cu_fwd_conv3d, ts_cu_bwd_conv3d);
    kernels[TS_OP_MAX_POOL2D] = row(ts_cu_fwd_max_pool2d, ts_cu_bwd_max_pool2d);
    kernels[TS_OP_AVG_POOL2D] = row(ts_cu_fwd_avg_pool2d, ts_cu_bwd_avg_pool2d);
    kernels[TS_OP_GLOBAL_AVG_POOL] = row(ts_cu_fwd_global_pool, ts_cu_bwd_global_pool);
    kernels[TS_OP_BATCH_NORM] = row(ts_cu_fwd_batch_norm, ts_cu_bwd_batch_norm);
    kernels[TS_OP_DROPOUT_MASK] = row(ts_cu_fwd_dropout_mask, nullptr);
    kernels[TS_OP_RANDOM_UNIFORM] = row(ts_cu_fwd_random_uniform, nullptr);
    kernels[TS_OP_TANH] = row(ts_cu_fwd_tanh, ts_cu_bwd_tanh);
    kernels[TS_OP_SIGMOID] = row(ts_cu_fwd_sigmoid, ts_cu_bwd_sigmoid);
    kernels[TS_OP_ABS] = row(ts_cu_fwd_ew_unary, ts_cu_bwd_ew_unary);
    kernels[TS_OP_CEIL] = row(ts_cu_fwd_ew_unary, nullptr);
    kernels[TS_OP_FLOOR] = row(ts_cu_fwd_ew_unary, nullptr);
    kernels[TS_OP_ROUND] = row(ts_cu_fwd_ew_unary, nullptr);
    kernels[TS_OP_CAST_INT] = row(ts_cu_fwd_ew_unary, nullptr);
    kernels[TS_OP_CAST_BOOL] = row(ts_cu_fwd_ew_unary, nullptr);
    kernels[TS_OP_SIN] = row(ts_cu_fwd_ew_unary, ts_cu_bwd_ew_unary);
    kernels[TS_OP_COS] = row(ts_cu_fwd_ew_unary, ts_cu_bwd_ew_unary);
    kernels[TS_OP_TAN] = row(ts_cu_fwd_ew_unary, ts_cu_bwd_ew_unary);
    kernels[TS_OP_ASIN] = row(ts_cu_fwd_ew_unary, ts_cu_bwd_ew_unary);
    kernels[TS_OP_ACOS] = row(ts_cu_fwd_ew_unary, ts_cu_bwd_ew_unary);
    kernels[TS_OP_ATAN] = row(ts_cu_fwd_ew_unary, ts_cu_bwd_ew_unary);
    kernels[TS_OP_SINH] = row(ts_cu_fwd_ew_unary, ts_cu_bwd_ew_unary);
    kernels[TS_OP_COSH] = row(ts_cu_fwd_ew_unary, ts_cu_bwd_ew_unary);
    kernels[TS_OP_ASINH] = row(ts_cu_fwd_ew_unary, ts_cu_bwd_ew_unary);
    kernels[TS_OP_ACOSH] = row(ts_cu_fwd_ew_unary, ts_cu_bwd_ew_unary);
    kernels[TS_OP_ATANH] = row(ts_cu_fwd_ew_unary, ts_cu_bwd_ew_unary);
    kernels[TS_OP_NOT] = row(ts_cu_fwd_ew_unary, nullptr);
    kernels[TS_OP_ISNAN] = row(ts_cu_fwd_ew_unary, nullptr);
    kernels[TS_OP_ISINF] = row(ts_cu_fwd_ew_unary, nullptr);
    kernels[TS_OP_HARD_SWISH] = row(ts_cu_fwd_ew_unary, ts_cu_bwd_ew_unary);
    kernels[TS_OP_HARD_SIGMOID] = row(ts_cu_fwd_ew_unary, ts_cu_bwd_ew_unary);
    kernels[TS_OP_LEAKY_RELU] = row(ts_cu_fwd_ew_unary, ts_cu_bwd_ew_unary);
    kernels[TS_OP_ELU] = row(ts_cu_fwd_ew_unary, ts_cu_bwd_ew_unary);
    kernels[TS_OP_SELU] = row(ts_cu_fwd_ew_unary, ts_cu_bwd_ew_unary);
    kernels[TS_OP_SOFTPLUS] = row(ts_cu_fwd_ew_unary, ts_cu_bwd_ew_unary);
    kernels[TS_OP_CAST_LOWBITS] = row(ts_cu_fwd_ew_unary, ts_cu_bwd_ew_unary);
    kernels[TS_OP_SELECT] = row(ts_cu_fwd_where, ts_cu_bwd_where);
    kernels[TS_OP_GATHER] = row(ts_cu_fwd_gather, ts_cu_bwd_gather);
    kernels[TS_OP_GATHER_ELEMENTS] = row(ts_cu_fwd_gather_elements, ts_cu_bwd_gather_elements);
    kernels[TS_OP_CAST_FLOAT] = row(ts_cu_fwd_cast_float, nullptr);
    kernels[TS_OP_CAST_INDEX] = row(ts_cu_fwd_cast_index, nullptr);
    kernels[TS_OP_CAST] = row(ts_cu_fwd_cast, ts_cu_bwd_copy);
    kernels[TS_OP_PAD] = row(ts_cu_fwd_pad, ts_cu_bwd_pad);
    kernels[TS_OP_MAX_POOL2D_INDICES] = row(ts_cu_fwd_max_pool2d_indices, nullptr);
    kernels[TS_OP_CONV_TRANSPOSE2D] = row(ts_cu_fwd_conv_transpose2d, ts_cu_bwd_conv_transpose2d, ts_cu_workspace_conv_transpose2d);
    kernels[TS_OP_STOP_GRADIENT] = row(ts_cu_fwd_copy, nullptr);
    kernels[TS_OP_BITWISE] = row(ts_cu_fwd_bitwise, nullptr);
    kernels[TS_OP_CONVERT] = row(ts_cu_fwd_convert, nullptr);
    kernels[TS_OP_INT_ARITH] = row(ts_cu_fwd_int_arith, nullptr);
    kernels[TS_OP_INT_CUMSUM] = row(ts_cu_fwd_int_cumsum, nullptr);
    kernels[TS_OP_INT_REDUCE] = row(ts_cu_fwd_int_reduce, nullptr);
    kernels[TS_OP_INT_RESIZE] = row(ts_cu_fwd_int_resize, nullptr);
    kernels[TS_OP_SILU] = row(ts_cu_fwd_ew_unary, ts_cu_bwd_ew_unary);
    kernels[TS_OP_ATTENTION] = row(ts_cu_fwd_attention_twin, ts_cu_bwd_attention_twin); /* a copy of its twin: attention_one_pass false */
    kernels[TS_OP_INT_MATMUL] = row(ts_cu_fwd_int_matmul, nullptr);
    kernels[TS_OP_POWER] = row(ts_cu_fwd_broadcast_binary, ts_cu_bwd_broadcast_binary);
    kernels[TS_OP_MAX] = row(ts_cu_fwd_broadcast_binary, ts_cu_bwd_broadcast_binary);
    kernels[TS_OP_MIN] = row(ts_cu_fwd_broadcast_binary, ts_cu_bwd_broadcast_binary);
    kernels[TS_OP_MOD] = row(ts_cu_fwd_broadcast_binary, ts_cu_bwd_broadcast_binary);
    kernels[TS_OP_FMOD] = row(ts_cu_fwd_broadcast_binary, ts_cu_bwd_broadcast_binary);
    kernels[TS_OP_EQUAL] = row(ts_cu_fwd_broadcast_binary, nullptr);
    kernels[TS_OP_GREATER] = row(ts_cu_fwd_broadcast_binary, nullptr);
    kernels[TS_OP_GREATER_EQUAL] = row(ts_cu_fwd_broadcast_binary, nullptr);
    kernels[TS_OP_LESS] = row(ts_cu_fwd_broadcast_binary, nullptr);
    kernels[TS_OP_LESS_EQUAL] = row(ts_cu_fwd_broadcast_binary, nullptr);
    kernels[TS_OP_AND] = row(ts_cu_fwd_broadcast_binary, nullptr);
    kernels[TS_OP_OR] = row(ts_cu_fwd_broadcast_binary, nullptr);
    kernels[TS_OP_XOR] = row(ts_cu_fwd_broadcast_binary, nullptr);
    kernels[TS_OP_RMS_NORM] = row(ts_cu_fwd_rms_norm, ts_cu_bwd_rms_norm);
    /* the leaves (Input, Param, Const, Buffer) are bound, not computed */
}

static ts_backend cuda_backend;

/* *count <- the GPUs CUDA sees, or why there is none, naming cuda:ordinal. */
static ts_status gpu_count(int ordinal, int *count) {
    *count = 0;
    cudaError_t e = cudaGetDeviceCount(count);
    if (e == cudaSuccess && *count == 0) e = cudaErrorNoDevice;
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        *count = 0;
        return ts_error(TS_ERR_UNSUPPORTED, "cuda:%d: no usable GPU here (%s): run with --device cpu", ordinal, cudaGetErrorString(e));
    }
    return TS_OK;
}

/* Whether GPU `ordinal` is here: as ts_backend_cuda refuses it. */
static ts_status gpu_present(int ordinal) {
    int count;
    ts_status st = gpu_count(ordinal, &count);
    if (st) return st;
    if (ordinal >= count)
        return ts_error(TS_ERR_UNSUPPORTED, "cuda:%d: this machine has %d GPU%s (cuda:0..cuda:%d)", ordinal, count, count == 1 ? "" : "s",
                        count - 1);
    return TS_OK;
}

static ts_status init_locked(int ordinal) {
    ts_status pst = gpu_present(ordinal);
    if (pst) return pst;
    cudaError_t e;
    /* hist.cu's tables are copied on the legacy default stream, which no
     * queue's stream waits for: the device is synchronised before any */
    if ((e = cudaSetDevice(ordinal)) != cudaSuccess || (e = ts_cu_hist_init()) != cudaSuccess || (e = cudaDeviceSynchronize()) != cudaSuccess)
        return ts_error(TS_ERR_UNSUPPORTED, "cuda:%d: cannot start the GPU: %s", ordinal, cudaGetErrorString(e));
    ts_status lst = load_cublas(ordinal);
    if (lst) return lst;
    g_cu.ordinal = ordinal;
    if ((lst = queue_open(&g_cu.own))) return lst;
    fill_kernel_table();
    ts_backend *be = &cuda_backend;
    be->name = "cuda";
    be->ordinal = ordinal;
    be->host_addressable = false;
    be->stream_create = cu_stream_create;
    be->stream_destroy = cu_stream_destroy;
    be->alloc = cu_alloc;
    be->free = cu_free;
    be->memory_info = cu_memory_info;
    be->copy_to_device = cu_copy_to_device;
    be->copy_to_host = cu_copy_to_host;
    be->copy_on_device = cu_copy_on_device;
    be->synchronize = cu_synchronize;
    be->fill = cu_fill;
    be->zero = cu_zero;
    be->accumulate = cu_accumulate;
    be->scale = cu_scale;
    be->round_half = cu_round_half;
    be->counts_half_loss = true;
    be->kernels = kernels;
    be->opt_update = cu_opt_update;
    be->stats_reduce_many = cu_stats_reduce_many;
    be->has_nonfinite = cu_has_nonfinite;
    be->copy_out_then = cu_copy_out_then;
    be->capture_begin = cu_capture_begin;
    be->capture_end = cu_capture_end;
    be->walk_begin = cu_walk_begin;
    be->replay = cu_replay;
    be->recording_free = cu_recording_free;
    be->event_record = cu_event_record;
    be->event_elapsed_ns = cu_event_elapsed_ns;
    be->event_free = cu_event_free;
    be->host_pin = cu_host_pin;
    be->host_unpin = cu_host_unpin;
    g_cu.ready = true;
    return TS_OK;
}

extern "C" ts_status ts_backend_cuda(int ordinal, const ts_backend **out) {
    *out = nullptr;
    pthread_mutex_lock(&g_cu.lock);
    ts_status st = TS_OK;
    if (!g_cu.ready) st = init_locked(ordinal);
    else if (ordinal != g_cu.ordinal)
        st = ts_error(TS_ERR_UNSUPPORTED, "cuda:%d: this process already runs on cuda:%d, and one process uses one GPU for now", ordinal,
                      g_cu.ordinal);
    pthread_mutex_unlock(&g_cu.lock);
    if (!st) *out = &cuda_backend;
    return st;
}

extern "C" ts_status ts_backend_cuda_count(int *count) { return gpu_count(0, count); }

/* "13.0" from CUDA's 13000 */
static void cuda_version(char *buf, size_t n, int v) {
    if (v > 0) snprintf(buf, n, "%d.%d", v / 1000, v % 1000 / 10);
    else snprintf(buf, n, "none");
}

extern "C" ts_status ts_backend_cuda_describe(int ordinal, char *buf, size_t n) {
    ts_status st = gpu_present(ordinal);
    if (st) return st;
    cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, ordinal);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return ts_error(TS_ERR_UNSUPPORTED, "cuda:%d: cannot read the GPU's properties: %s", ordinal, cudaGetErrorString(e));
    }
    /* free memory is the current device's: this thread's is put back */
    size_t free_b = 0, total_b = p.totalGlobalMem;
    int was = -1;
    if (cudaGetDevice(&was) != cudaSuccess || cudaSetDevice(ordinal) != cudaSuccess || cudaMemGetInfo(&free_b, &total_b) != cudaSuccess)
        free_b = 0, total_b = p.totalGlobalMem;
    if (was >= 0 && was != ordinal) cudaSetDevice(was);
    (void)cudaGetLastError();
    char bus[32] = "?";
    if (cudaDeviceGetPCIBusId(bus, (int)sizeof bus, ordinal) != cudaSuccess) (void)cudaGetLastError();
    int dv = 0, rv = 0;
    cudaDriverGetVersion(&dv);
    cudaRuntimeGetVersion(&rv);
    char driver[16], runtime[16], blas[96];
    cuda_version(driver, sizeof driver, dv);
    cuda_version(runtime, sizeof runtime, rv);
    /* the cuBLAS a model here would load (it is loaded now if not yet) */
    pthread_mutex_lock(&g_cu.lock);
    ts_status bst = load_cublas(ordinal);
    cublasStatus_t (*property)(libraryPropertyType, int *) =
        blas_api.lib ? (cublasStatus_t(*)(libraryPropertyType, int *))dlsym(blas_api.lib, "cublasGetProperty") : nullptr;
    int v[3] = {0, 0, 0};
    if (!bst && property && property(MAJOR_VERSION, &v[0]) == CUBLAS_STATUS_SUCCESS && property(MINOR_VERSION, &v[1]) == CUBLAS_STATUS_SUCCESS &&
        property(PATCH_LEVEL, &v[2]) == CUBLAS_STATUS_SUCCESS)
        snprintf(blas, sizeof blas, "cuBLAS %d.%d.%d", v[0], v[1], v[2]);
    else
        snprintf(blas, sizeof blas, "cuBLAS %s", bst ? "not found" : "of unknown version");
    pthread_mutex_unlock(&g_cu.lock);
    const double gib = 1024.0 * 1024.0 * 1024.0;
    char mem[64];
    if (free_b) snprintf(mem, sizeof mem, "%.1f GiB (%.1f free)", (double)total_b / gib, (double)free_b / gib);
    else snprintf(mem, sizeof mem, "%.1f GiB", (double)total_b / gib);
    snprintf(buf, n, "cuda:%d: %s, sm_%d%d, %s, %d SMs, driver %s, runtime %s, %s, PCI %s", ordinal, p.name, p.major, p.minor, mem,
             p.multiProcessorCount, driver, runtime, blas, bus);
    return TS_OK;
}
