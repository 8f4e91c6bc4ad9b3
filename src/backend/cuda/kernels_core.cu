/* kernels_core.cu -- the CUDA kernels of the core ops: matmul, scale, relu,
 * log, copies, the losses (NLL, cross entropy), sum and mean, softmax and
 * log-softmax over any axis, the unary math ops (exp, sqrt, pow, erf, gelu),
 * tanh and sigmoid. Each adapter is the twin of the CPU's of the same op
 * (backend/cpu/cpu.c, adapters_tensor.c, adapters_cnn.c) and computes what
 * it computes, with its accumulations (double where the CPU sums in
 * double). Backward kernels accumulate into k->din[j] (NULL: skipped).
 * Reductions are deterministic: block reductions, no atomics. */
#include "backend/cuda/adapters.h"
#include "backend/ew_math.h"

extern "C" {
#include "graph/ops.h"
#include "graph/ops_tensor.h"
}

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>

/* the op's name for error capture */
static const char *op_name(const ts_kctx *k) { return ts_op_get(k->node->op)->name; }
static int64_t numel_out(const ts_kctx *k) { return ts_shape_numel(&k->out_shape); }
static int64_t numel_in0(const ts_kctx *k) { return ts_shape_numel(&k->in_shape[0]); }

/* ------------------------------------------------------ block reductions */

/* Sums and maxima over a block whose blockDim.x is a multiple of 32 (at
 * most 1024): every thread gets the result. `sh` is __shared__ [32]; the
 * leading barrier lets a block call these back to back with one `sh`. */
template <typename T> __device__ T warp_sum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

template <typename T> __device__ T block_sum(T v, T *sh) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    v = lane < warps ? sh[lane] : (T)0;
    return warp_sum(v);
}

/* the CPU's max: `x > m ? x : m` from -inf, so a NaN is never the max */
__device__ float max_nan_skip(float m, float x) { return x > m ? x : m; }

__device__ float block_max(float v, float *sh) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v = max_nan_skip(v, __shfl_xor_sync(0xffffffffu, v, o));
    __syncthreads();
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    v = lane < warps ? sh[lane] : -INFINITY;
    for (int o = 16; o > 0; o >>= 1) v = max_nan_skip(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* threads for one block per row of n: a power of two in [32, 1024] */
static unsigned row_threads(int64_t n) {
    unsigned t = 32;
    while (t < 256 && (int64_t)t < n) t <<= 1;
    if (n > 8192) t = 1024;
    return t;
}

/* blocks for one block per row (a grid-stride loop covers the rest) */
static unsigned row_blocks(int64_t rows) {
    if (rows < 1) return 1;
    return rows > 65535 * 4 ? 65535 * 4 : (unsigned)rows;
}

/* threads of the single-block reductions (losses, sum, mean) */
#define TS_CU_REDUCE_THREADS 1024

/* ------------------------------------------------------------------ matmul */

/* C[M,N] = A[M,K] B[K,N]  (MatMul_T: B stored [N,K]) */
void ts_cu_fwd_matmul(const ts_kctx *k) {
    bool t = k->node->op == TS_OP_MATMUL_T;
    int64_t M = k->in_shape[0].d[0], K = k->in_shape[0].d[1], N = k->out_shape.d[1];
    ts_cu_gemm(k, false, t, M, N, K, k->in[0], k->in[1], 0.0f, k->out);
}

/* dA += dC op(B)^T ; dB += A^T dC (dC^T A when B was transposed) */
void ts_cu_bwd_matmul(const ts_kctx *k) {
    bool t = k->node->op == TS_OP_MATMUL_T;
    int64_t M = k->in_shape[0].d[0], K = k->in_shape[0].d[1], N = k->out_shape.d[1];
    cudaStream_t s = ts_cu_stream(k);
    if (k->din[0]) ts_cu_gemm(k, false, !t, M, K, N, k->dout, k->in[1], 1.0f, k->din[0]);
    if (k->din[1]) {
        if (t) ts_cu_gemm(k, true, false, N, K, M, k->dout, k->in[0], 1.0f, k->din[1]);
        else ts_cu_gemm(k, true, false, K, N, M, k->in[0], k->dout, 1.0f, k->din[1]);
    }
}

/* ------------------------------------------------------------------- scale */

/* out[n] = s x[n] */
__global__ void scale_forward_kernel(float *out, const float *x, float s, int64_t n) {
    TS_CU_FOR(i, n) out[i] = s * x[i];
}

/* dx[n] += s dout[n] */
__global__ void scale_backward_kernel(float *dx, const float *dout, float s, int64_t n) {
    TS_CU_FOR(i, n) dx[i] += s * dout[i];
}

void ts_cu_fwd_scale(const ts_kctx *k) {
    int64_t n = numel_out(k);
    scale_forward_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->out, k->in[0], k->node->fparam, n);
    ts_cu_check(cudaGetLastError(), "Scale");
}

void ts_cu_bwd_scale(const ts_kctx *k) {
    if (!k->din[0]) return;
    int64_t n = numel_out(k);
    scale_backward_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->din[0], k->dout, k->node->fparam, n);
    ts_cu_check(cudaGetLastError(), "Scale");
}

/* -------------------------------------------------------------------- relu */

/* out[n] = max(x, 0), a NaN kept (written so: a NaN compares false) */
__global__ void relu_forward_kernel(float *out, const float *x, int64_t n) {
    TS_CU_FOR(i, n) out[i] = x[i] < 0.0f ? 0.0f : x[i];
}

/* dx[n] += dout where out > 0: the kink and a NaN output pass nothing */
__global__ void relu_backward_kernel(float *dx, const float *dout, const float *out, int64_t n) {
    TS_CU_FOR(i, n) dx[i] += out[i] <= 0.0f ? 0.0f : dout[i];
}

void ts_cu_fwd_relu(const ts_kctx *k) {
    int64_t n = numel_out(k);
    relu_forward_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->out, k->in[0], n);
    ts_cu_check(cudaGetLastError(), "Relu");
}

void ts_cu_bwd_relu(const ts_kctx *k) {
    if (!k->din[0]) return;
    int64_t n = numel_out(k);
    relu_backward_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->din[0], k->dout, k->out, n);
    ts_cu_check(cudaGetLastError(), "Relu");
}

/* --------------------------------------------------------------------- log */

/* out[n] = log(x) */
__global__ void log_forward_kernel(float *out, const float *x, int64_t n) {
    TS_CU_FOR(i, n) out[i] = logf(x[i]);
}

/* dx[n] += dout / x */
__global__ void log_backward_kernel(float *dx, const float *dout, const float *x, int64_t n) {
    TS_CU_FOR(i, n) dx[i] += dout[i] / x[i];
}

void ts_cu_fwd_log(const ts_kctx *k) {
    int64_t n = numel_out(k);
    log_forward_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->out, k->in[0], n);
    ts_cu_check(cudaGetLastError(), "Log");
}

void ts_cu_bwd_log(const ts_kctx *k) {
    if (!k->din[0]) return;
    int64_t n = numel_out(k);
    log_backward_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->din[0], k->dout, k->in[0], n);
    ts_cu_check(cudaGetLastError(), "Log");
}

/* ------------------------------------------------ copy: reshape, flatten, print */

/* dst[n] += src[n] */
__global__ void accumulate_kernel(float *dst, const float *src, int64_t n) {
    TS_CU_FOR(i, n) dst[i] += src[i];
}

/* out = x, unless the output is the input's own buffer (a view) */
void ts_cu_fwd_copy(const ts_kctx *k) {
    int64_t n = numel_out(k);
    if (k->out == k->in[0] || n == 0) return;
    ts_cu_check(cudaMemcpyAsync(k->out, k->in[0], (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice, ts_cu_stream(k)), op_name(k));
}

/* dx += dout */
void ts_cu_bwd_copy(const ts_kctx *k) {
    if (!k->din[0]) return;
    int64_t n = numel_out(k);
    accumulate_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->din[0], k->dout, n);
    ts_cu_check(cudaGetLastError(), op_name(k));
}

/* Attention with its unfused twin (in[4]): a copy of the twin, as the
 * CPU's when the unfused ops ran. This device has no one-pass kernel yet
 * (attention_one_pass false): the executor always runs the twin's ops here. */
void ts_cu_fwd_attention_twin(const ts_kctx *k) {
    if (k->n_in < 5 || !k->in[4]) { /* compile refuses such a node here: the kernel does not compute the one pass */
        ts_cu_check(cudaErrorNotSupported, "Attention without its unfused twin (this device has no one-pass kernel)");
        return;
    }
    ts_kctx c = *k;
    c.in[0] = k->in[4];
    ts_cu_fwd_copy(&c);
}
void ts_cu_bwd_attention_twin(const ts_kctx *k) {
    ts_kctx c = *k;
    c.din[0] = k->din[4];
    ts_cu_bwd_copy(&c);
}

/* --------------------------------------------------------------- NLL loss */

/* out[] = -mean_b logp[b, labels[b]]  (logp [B,C], labels [B]); one
 * block, the sum in double as the CPU's */
__global__ void nll_forward_kernel(float *out, const float *logp, const int32_t *labels, int64_t B, int64_t C) {
    __shared__ double sh[32];
    double s = 0;
    for (int64_t b = threadIdx.x; b < B; b += blockDim.x) s += logp[b * C + labels[b]];
    s = block_sum(s, sh);
    if (threadIdx.x == 0) out[0] = (float)(-s / (double)B);
}

/* dlogp[b, labels[b]] += -dout / B  (one row per b: no two threads share an item) */
__global__ void nll_backward_kernel(float *dlogp, const float *dout, const int32_t *labels, int64_t B, int64_t C) {
    float g = -dout[0] / (float)B;
    TS_CU_FOR(b, B) dlogp[b * C + labels[b]] += g;
}

void ts_cu_fwd_nll(const ts_kctx *k) {
    int64_t B = k->in_shape[0].d[0], C = k->in_shape[0].d[1];
    nll_forward_kernel<<<1, TS_CU_REDUCE_THREADS, 0, ts_cu_stream(k)>>>(k->out, k->in[0], k->in_int[1], B, C);
    ts_cu_check(cudaGetLastError(), "NllLoss");
}

void ts_cu_bwd_nll(const ts_kctx *k) {
    if (!k->din[0]) return;
    int64_t B = k->in_shape[0].d[0], C = k->in_shape[0].d[1];
    nll_backward_kernel<<<ts_cu_blocks(B), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->din[0], k->dout, k->in_int[1], B, C);
    ts_cu_check(cudaGetLastError(), "NllLoss");
}

/* ------------------------------------------------------------ sum and mean */

/* out[] = sum (or mean) of x[n]; one block, the sum in double as the CPU's
 * (one block: these ops reduce losses and small tensors; a big tensor
 * would want a two-pass reduction and a workspace) */
__global__ void reduce_forward_kernel(float *out, const float *x, int64_t n, bool mean) {
    __shared__ double sh[32];
    double s = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += x[i];
    s = block_sum(s, sh);
    if (threadIdx.x == 0) out[0] = (float)(mean ? s / (double)n : s);
}

/* dx[n] += dout (/ n) */
__global__ void reduce_backward_kernel(float *dx, const float *dout, int64_t n, bool mean) {
    float g = mean ? dout[0] / (float)n : dout[0];
    TS_CU_FOR(i, n) dx[i] += g;
}

void ts_cu_fwd_sum(const ts_kctx *k) {
    bool mean = k->node->op == TS_OP_MEAN;
    reduce_forward_kernel<<<1, TS_CU_REDUCE_THREADS, 0, ts_cu_stream(k)>>>(k->out, k->in[0], numel_in0(k), mean);
    ts_cu_check(cudaGetLastError(), mean ? "ReduceMean" : "ReduceSum");
}

void ts_cu_bwd_sum(const ts_kctx *k) {
    if (!k->din[0]) return;
    bool mean = k->node->op == TS_OP_MEAN;
    int64_t n = numel_in0(k);
    reduce_backward_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->din[0], k->dout, n, mean);
    ts_cu_check(cudaGetLastError(), mean ? "ReduceMean" : "ReduceSum");
}

/* ---------------------------------------------- softmax over the last axis */

/* y[rows, n] = softmax (or log-softmax) of each row of x, max-subtracted,
 * float sums as the CPU's rows kernel; a fully masked row (max -inf) gives
 * 0 (log: -inf). One block per row. */
__global__ void softmax_rows_forward_kernel(float *y, const float *x, int64_t rows, int64_t n, bool log) {
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        float mx = -INFINITY;
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) mx = max_nan_skip(mx, xr[j]);
        mx = block_max(mx, sh);
        if (mx == -INFINITY) { /* the whole block takes this branch */
            for (int64_t j = threadIdx.x; j < n; j += blockDim.x) yr[j] = log ? -INFINITY : 0.0f;
            continue;
        }
        float s = 0;
        if (log) {
            for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += expf(xr[j] - mx);
            s = block_sum(s, sh);
            float lse = mx + logf(s);
            for (int64_t j = threadIdx.x; j < n; j += blockDim.x) yr[j] = xr[j] - lse;
        } else {
            for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
                float e = expf(xr[j] - mx);
                yr[j] = e;
                s += e;
            }
            s = block_sum(s, sh);
            float inv = 1.0f / s;
            for (int64_t j = threadIdx.x; j < n; j += blockDim.x) yr[j] *= inv;
        }
    }
}

/* dx[rows, n] += softmax: y (dout - sum(dout y)); log: dout - exp(y) sum(dout),
 * nothing for a fully masked row (every y -inf). One block per row. */
__global__ void softmax_rows_backward_kernel(float *dx, const float *dout, const float *y, int64_t rows, int64_t n, bool log) {
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *yr = y + r * n, *d = dout + r * n;
        float *dxr = dx + r * n;
        float s = 0;
        if (log) {
            int live = 0;
            for (int64_t j = threadIdx.x; j < n; j += blockDim.x) live |= yr[j] != -INFINITY;
            if (!__syncthreads_or(live)) continue; /* uniform over the block */
            for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += d[j];
            s = block_sum(s, sh);
            for (int64_t j = threadIdx.x; j < n; j += blockDim.x) dxr[j] += d[j] - expf(yr[j]) * s;
        } else {
            for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += d[j] * yr[j];
            s = block_sum(s, sh);
            for (int64_t j = threadIdx.x; j < n; j += blockDim.x) dxr[j] += yr[j] * (d[j] - s);
        }
    }
}

/* ------------------------------------------- softmax over an inner axis */

/* x, y [outer, dim, inner], over the middle axis: one thread per (outer,
 * inner) column, walking dim at stride inner (neighbouring threads read
 * neighbouring floats); exp and the sums in double as the CPU's. */
__global__ void softmax_cols_forward_kernel(float *y, const float *x, int64_t outer, int64_t dim, int64_t inner, bool log) {
    TS_CU_FOR(c, outer * inner) {
        int64_t o = c / inner, in = c % inner, base = o * dim * inner + in;
        float mx = -INFINITY;
        for (int64_t d = 0; d < dim; d++) mx = max_nan_skip(mx, x[base + d * inner]);
        double sum = 0;
        for (int64_t d = 0; d < dim; d++) sum += exp((double)(x[base + d * inner] - mx));
        if (log) {
            float lse = mx + (float)::log(sum);
            for (int64_t d = 0; d < dim; d++) y[base + d * inner] = x[base + d * inner] - lse;
        } else {
            for (int64_t d = 0; d < dim; d++) y[base + d * inner] = (float)(exp((double)(x[base + d * inner] - mx)) / sum);
        }
    }
}

/* dx += softmax: y (dout - sum(dout y)); log: dout - exp(y) sum(dout); sums in double */
__global__ void softmax_cols_backward_kernel(float *dx, const float *dout, const float *y, int64_t outer, int64_t dim, int64_t inner,
                                             bool log) {
    TS_CU_FOR(c, outer * inner) {
        int64_t o = c / inner, in = c % inner, base = o * dim * inner + in;
        double s = 0;
        if (log) {
            for (int64_t d = 0; d < dim; d++) s += dout[base + d * inner];
            for (int64_t d = 0; d < dim; d++) {
                int64_t i = base + d * inner;
                dx[i] += dout[i] - expf(y[i]) * (float)s;
            }
        } else {
            for (int64_t d = 0; d < dim; d++) s += (double)dout[base + d * inner] * y[base + d * inner];
            for (int64_t d = 0; d < dim; d++) {
                int64_t i = base + d * inner;
                dx[i] += y[i] * (dout[i] - (float)s);
            }
        }
    }
}

/* [outer, dim, inner] around the node's axis (iparam, negative from the end) */
static void softmax_dims(const ts_kctx *k, int64_t *outer, int64_t *dim, int64_t *inner) {
    const ts_shape *s = &k->in_shape[0];
    int d = k->node->iparam < 0 ? k->node->iparam + s->ndim : k->node->iparam;
    *outer = 1, *inner = 1;
    for (int i = 0; i < d; i++) *outer *= s->d[i];
    for (int i = d + 1; i < s->ndim; i++) *inner *= s->d[i];
    *dim = s->d[d];
}

void ts_cu_fwd_softmax_any(const ts_kctx *k) {
    int64_t o, d, i;
    bool log = k->node->op == TS_OP_LOG_SOFTMAX;
    softmax_dims(k, &o, &d, &i);
    cudaStream_t s = ts_cu_stream(k);
    if (i == 1) softmax_rows_forward_kernel<<<row_blocks(o), row_threads(d), 0, s>>>(k->out, k->in[0], o, d, log);
    else softmax_cols_forward_kernel<<<ts_cu_blocks(o * i), TS_CU_THREADS, 0, s>>>(k->out, k->in[0], o, d, i, log);
    ts_cu_check(cudaGetLastError(), log ? "LogSoftmax" : "Softmax");
}

void ts_cu_bwd_softmax_any(const ts_kctx *k) {
    if (!k->din[0]) return;
    int64_t o, d, i;
    bool log = k->node->op == TS_OP_LOG_SOFTMAX;
    softmax_dims(k, &o, &d, &i);
    cudaStream_t s = ts_cu_stream(k);
    if (i == 1) softmax_rows_backward_kernel<<<row_blocks(o), row_threads(d), 0, s>>>(k->din[0], k->dout, k->out, o, d, log);
    else softmax_cols_backward_kernel<<<ts_cu_blocks(o * i), TS_CU_THREADS, 0, s>>>(k->din[0], k->dout, k->out, o, d, i, log);
    ts_cu_check(cudaGetLastError(), log ? "LogSoftmax" : "Softmax");
}

/* ------------------------------------------------------------ cross entropy */

/* The CPU's forward: probs = softmax rows of the logits (kept in scratch
 * for the backward), and loss = mean over the counted rows (label not
 * ignore_index) of lse - x[label] with lse = max + log(sum exp(x - max))
 * (a log-sum-exp, not log(prob), which loses tiny probabilities), the mean
 * in double. Here in two kernels without extra memory: the first (a block
 * per row) writes the probs and, of a counted row, puts its loss term in
 * probs[label]; the second (one block) sums the terms in double and puts
 * each prob back: exp(-term) = exp(x[label] - lse), within a few ulp of the
 * prob the first computed. */
__global__ void ce_forward_rows_kernel(float *probs, const float *logits, const int32_t *labels, int64_t rows, int64_t V, bool has_ignore,
                                       int32_t ignore) {
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *x = logits + r * V;
        float *p = probs + r * V;
        bool counted = !(has_ignore && labels[r] == ignore);
        int64_t label = counted ? labels[r] : -1;
        float mx = -INFINITY;
        for (int64_t j = threadIdx.x; j < V; j += blockDim.x) mx = max_nan_skip(mx, x[j]);
        mx = block_max(mx, sh);
        if (mx == -INFINITY) { /* fully masked: probs 0, the loss term NaN (exp(-inf - -inf) on the CPU) */
            for (int64_t j = threadIdx.x; j < V; j += blockDim.x) p[j] = j == label ? NAN : 0.0f;
            continue;
        }
        float s = 0;
        for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
            float e = expf(x[j] - mx);
            p[j] = e;
            s += e;
        }
        s = block_sum(s, sh);
        float inv = 1.0f / s;
        /* the thread that wrote probs[label] writes the term there */
        for (int64_t j = threadIdx.x; j < V; j += blockDim.x) p[j] = j == label ? mx + logf(s) - x[j] : p[j] * inv;
    }
}

__global__ void ce_forward_loss_kernel(float *out, float *probs, const float *logits, const int32_t *labels, int64_t rows, int64_t V,
                                       bool has_ignore, int32_t ignore) {
    __shared__ double sh[32];
    __shared__ long long shc[32];
    double s = 0;
    long long counted = 0;
    for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
        if (has_ignore && labels[r] == ignore) continue;
        int64_t at = r * V + labels[r];
        float term = probs[at];
        s += (double)term;
        counted++;
        float p = expf(-term);
        if (term != term) { /* NaN: a fully masked row's prob is 0; else the row's sum was NaN and so is its prob */
            const float *x = logits + r * V;
            bool masked = true;
            for (int64_t j = 0; j < V && masked; j++) masked = !(x[j] > -INFINITY);
            p = masked ? 0.0f : term;
        }
        probs[at] = p;
    }
    s = block_sum(s, sh);
    counted = block_sum(counted, shc);
    if (threadIdx.x == 0) out[0] = counted ? (float)(s / (double)counted) : 0.0f;
}

/* rows counted (label not ignore_index), each block on its own: the
 * backward has no memory to keep it in between kernels */
__device__ long long ce_counted(const int32_t *labels, int64_t rows, bool has_ignore, int32_t ignore) {
    __shared__ long long sh[32];
    if (!has_ignore) return rows;
    long long c = 0;
    for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) c += labels[r] != ignore;
    return block_sum(c, sh);
}

/* dlogits[rows, V] += g (probs - onehot(label)), g = dout / counted, over
 * the counted rows; the label's entry gets (d + g p) - g as the CPU's */
__global__ void ce_backward_kernel(float *dlogits, const float *dout, const float *probs, const int32_t *labels, int64_t rows, int64_t V,
                                   bool has_ignore, int32_t ignore) {
    long long counted = ce_counted(labels, rows, has_ignore, ignore);
    if (!counted) return; /* the whole block */
    float g = dout[0] / (float)counted;
    TS_CU_FOR(i, rows * V) {
        int64_t r = i / V, c = i % V;
        int32_t label = labels[r];
        if (has_ignore && label == ignore) continue;
        float v = dlogits[i] + g * probs[i];
        if (c == label) v -= g;
        dlogits[i] = v;
    }
}

/* logits [N,...,V], labels [N,...]: rows = numel(labels) */
static int64_t ce_rows(const ts_kctx *k, int64_t *V) {
    *V = k->in_shape[0].d[k->in_shape[0].ndim - 1];
    return ts_shape_numel(&k->in_shape[1]);
}

void ts_cu_fwd_cross_entropy(const ts_kctx *k) {
    int64_t V, rows = ce_rows(k, &V);
    bool has_ignore = k->node->attr[0] != 0;
    int32_t ignore = (int32_t)k->node->attr[1];
    cudaStream_t s = ts_cu_stream(k);
    ce_forward_rows_kernel<<<row_blocks(rows), row_threads(V), 0, s>>>(k->scratch, k->in[0], k->in_int[1], rows, V, has_ignore, ignore);
    ts_cu_check(cudaGetLastError(), "CrossEntropy");
    ce_forward_loss_kernel<<<1, TS_CU_REDUCE_THREADS, 0, s>>>(k->out, k->scratch, k->in[0], k->in_int[1], rows, V, has_ignore, ignore);
    ts_cu_check(cudaGetLastError(), "CrossEntropy");
}

void ts_cu_bwd_cross_entropy(const ts_kctx *k) {
    if (!k->din[0]) return;
    int64_t V, rows = ce_rows(k, &V);
    bool has_ignore = k->node->attr[0] != 0;
    /* each block counts the rows again when some may be ignored: fewer
     * blocks then, each covering more of the logits */
    unsigned blocks = ts_cu_blocks(rows * V);
    if (has_ignore && blocks > 1024) blocks = 1024;
    ce_backward_kernel<<<blocks, TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->din[0], k->dout, k->scratch, k->in_int[1], rows, V, has_ignore,
                                                                     (int32_t)k->node->attr[1]);
    ts_cu_check(cudaGetLastError(), "CrossEntropy");
}

/* ------------------------------------- the unary family (ew_math.h) */

/* y[n] = f(x; alpha, beta), the CPU's formulas (backend/ew_math.h) */
__global__ void ew_unary_forward_kernel(int kind, float *y, const float *x, float alpha, float beta, int64_t n) {
    TS_CU_FOR(i, n) y[i] = ts_ewu_forward(kind, x[i], alpha, beta);
}

/* v: x, or y for the kinds whose backward reads the output (ts_ewu_reads_output) */
__global__ void ew_unary_backward_kernel(int kind, float *dx, const float *dout, const float *v, float alpha, float beta, int64_t n) {
    TS_CU_FOR(i, n) dx[i] += dout[i] * ts_ewu_derivative(kind, v[i], alpha, beta);
}

void ts_cu_fwd_ew_unary(const ts_kctx *k) {
    int64_t n = numel_out(k);
    if (n <= 0) return;
    ew_unary_forward_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(ts_ewu_kind(k->node), k->out, k->in[0],
                                                                                    k->node->fattr[0], k->node->fattr[1], n);
    ts_cu_check(cudaGetLastError(), op_name(k));
}

void ts_cu_bwd_ew_unary(const ts_kctx *k) {
    int64_t n = numel_out(k);
    if (!k->din[0] || n <= 0) return;
    int kind = ts_ewu_kind(k->node);
    ew_unary_backward_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(kind, k->din[0], k->dout,
                                                                                     ts_ewu_reads_output(kind) ? k->out : k->in[0],
                                                                                     k->node->fattr[0], k->node->fattr[1], n);
    ts_cu_check(cudaGetLastError(), op_name(k));
}

__global__ void cast_float_kernel(float *y, const int32_t *x, int64_t n) {
    TS_CU_FOR(i, n) y[i] = (float)x[i];
}

void ts_cu_fwd_cast_float(const ts_kctx *k) {
    int64_t n = numel_out(k);
    if (n <= 0) return;
    cast_float_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->out, k->in_int[0], n);
    ts_cu_check(cudaGetLastError(), op_name(k));
}

__global__ void cast_index_kernel(int32_t *y, const float *x, float lo, float hi, int64_t n) {
    TS_CU_FOR(i, n) y[i] = ts_ew_cast_index(x[i], lo, hi);
}

void ts_cu_fwd_cast_index(const ts_kctx *k) {
    int64_t n = numel_out(k);
    if (n <= 0) return;
    cast_index_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>((int32_t *)(void *)k->out, k->in[0], k->node->fattr[0],
                                                                               k->node->fattr[1], n);
    ts_cu_check(cudaGetLastError(), op_name(k));
}

/* ---- integer tensors (backend/ew_math.h's ts_int_*): i32 or i64 cells,
 * or a bool tensor's f32 ones (1.0 or 0.0), by the dtypes the kernel is
 * handed. A kind: 0 i32, 1 i64, 2 f32, 3 bool */
struct int_cells {
    const void *p;
    int kind;
};
static int cells_kind(ts_dtype t) { return t == TS_I64 ? 1 : t == TS_F32 ? 2 : t == TS_BOOL ? 3 : 0; }
__device__ inline int64_t int_at(int_cells c, int64_t i) {
    if (c.kind == 3) return ((const float *)c.p)[i] != 0.0f;
    return c.kind == 1 ? ((const int64_t *)c.p)[i] : ((const int32_t *)c.p)[i];
}
__device__ inline void int_put(void *y, int kind, int64_t i, int64_t v) {
    if (kind == 1) ((int64_t *)y)[i] = v;
    else if (kind == 3) ((float *)y)[i] = v != 0 ? 1.0f : 0.0f;
    else ((int32_t *)y)[i] = ts_int_wrap32(v);
}
static int_cells int_input(const ts_kctx *k, int j) {
    int kind = cells_kind(k->in_dtype[j]);
    return int_cells{kind == 0 ? (const void *)k->in_int[j] : (const void *)k->in[j], kind};
}

__global__ void bitwise_kernel(void *y, int to, int_cells a, int_cells b, ts_shape so, ts_shape sa, ts_shape sb, int kind, int bits, int uns,
                               int64_t n) {
    TS_CU_FOR(i, n) int_put(y, to, i, ts_ew_bitwise(kind, bits, uns, int_at(a, ts_bcast_offset(&so, &sa, i)), int_at(b, ts_bcast_offset(&so, &sb, i))));
}

void ts_cu_fwd_bitwise(const ts_kctx *k) {
    int64_t n = numel_out(k);
    if (n <= 0) return;
    const ts_tensor *t = k->node;
    bitwise_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->out, cells_kind(k->out_dtype), int_input(k, 0), int_input(k, 1),
                                                                            k->out_shape, k->in_shape[0], k->in_shape[1], (int)t->attr[0],
                                                                            (int)t->attr[1], (int)t->attr[2], n);
    ts_cu_check(cudaGetLastError(), op_name(k));
}

/* type: the declared type the values wrap to (ts_int_as_type); from: the
 * declared type of x's values (ts_int_to_float); index: i32 indices
 * (ts_index_of_*) */
__global__ void convert_kernel(void *y, int to, int type, int from, int_cells x, bool index, int64_t n) {
    TS_CU_FOR(i, n) {
        float f = x.kind == 2 ? ((const float *)x.p)[i] : 0.0f;
        if (index) ((int32_t *)y)[i] = x.kind == 2 ? ts_index_of_float(f) : ts_index_of_int(int_at(x, i));
        else if (to == 2) ((float *)y)[i] = ts_int_to_float(from, int_at(x, i));
        else if (x.kind == 2 && to == 3) ((float *)y)[i] = f != 0.0f ? 1.0f : 0.0f; /* NaN is true */
        else if (x.kind == 2) int_put(y, to, i, ts_float_to_type(f, type));
        else int_put(y, to, i, ts_int_as_type(type, int_at(x, i)));
    }
}

void ts_cu_fwd_convert(const ts_kctx *k) {
    int64_t n = numel_out(k);
    if (n <= 0) return;
    convert_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->out, cells_kind(k->out_dtype), (int)k->node->attr[0], (int)k->node->attr[2], int_input(k, 0),
                                                                           k->node->attr[1] != 0, n);
    ts_cu_check(cudaGetLastError(), op_name(k));
}

__global__ void int_arith_kernel(void *y, int to, int_cells a, int_cells b, ts_shape so, ts_shape sa, ts_shape sb, int kind, int type, int64_t n) {
    TS_CU_FOR(i, n) int_put(y, to, i, ts_int_arith_in(type, kind, int_at(a, ts_bcast_offset(&so, &sa, i)), int_at(b, ts_bcast_offset(&so, &sb, i))));
}

void ts_cu_fwd_int_arith(const ts_kctx *k) {
    int64_t n = numel_out(k);
    if (n <= 0) return;
    int_arith_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->out, cells_kind(k->out_dtype), int_input(k, 0), int_input(k, 1),
                                                                              k->out_shape, k->in_shape[0], k->in_shape[1], (int)k->node->attr[0],
                                                                              (int)k->node->attr[1], n);
    ts_cu_check(cudaGetLastError(), op_name(k));
}

/* one thread a line [outer, n, inner] around the axis, summed in order */
__global__ void int_cumsum_kernel(void *y, int to, int_cells x, int64_t outer, int64_t n, int64_t inner, bool exclusive, bool reverse) {
    TS_CU_FOR(l, outer * inner) {
        int64_t o = l / inner, c = l % inner, sum = 0;
        for (int64_t s = 0; s < n; s++) {
            int64_t at = (o * n + (reverse ? n - 1 - s : s)) * inner + c, v = int_at(x, at);
            if (!exclusive) sum = ts_int_arith(TS_INT_ADD, sum, v);
            int_put(y, to, at, sum);
            if (exclusive) sum = ts_int_arith(TS_INT_ADD, sum, v);
        }
    }
}

void ts_cu_fwd_int_cumsum(const ts_kctx *k) {
    int64_t d = k->node->attr[0], n = k->out_shape.d[d], outer = 1, inner = 1;
    for (int64_t i = 0; i < d; i++) outer *= k->out_shape.d[i];
    for (int64_t i = d + 1; i < k->out_shape.ndim; i++) inner *= k->out_shape.d[i];
    if (outer * inner <= 0 || n <= 0) return;
    int_cumsum_kernel<<<ts_cu_blocks(outer * inner), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->out, cells_kind(k->out_dtype), int_input(k, 0), outer, n,
                                                                                         inner, k->node->attr[1] != 0, k->node->attr[2] != 0);
    ts_cu_check(cudaGetLastError(), op_name(k));
}

/* one thread an output element, folding its reduced elements in the CPU's order */
__global__ void int_reduce_kernel(void *y, int to, int_cells x, ts_shape in, ts_shape kept, int kind, int64_t n, int64_t m) {
    TS_CU_FOR(o, n) {
        ts_int_fold f = ts_int_reduce_first(kind);
        for (int64_t j = 0; j < m; j++) f = ts_int_reduce_step(kind, f, int_at(x, ts_int_reduce_at(&in, &kept, o, j)), m, to == 0);
        int_put(y, to, o, ts_int_reduce_last(kind, f, to == 0));
    }
}

void ts_cu_fwd_int_reduce(const ts_kctx *k) {
    ts_shape r = ts_reduce_kept_shape(k->node, &k->in_shape[0]);
    int64_t n = ts_shape_numel(&r), m = n ? numel_in0(k) / n : 0;
    if (n <= 0) return;
    int_reduce_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->out, cells_kind(k->out_dtype), int_input(k, 0), k->in_shape[0], r,
                                                                             (int)k->node->attr[2], n, m);
    ts_cu_check(cudaGetLastError(), op_name(k));
}

/* one thread an output element: its levels' sums in double, as the CPU's (graph/int_math.h) */
__global__ void int_resize_kernel(void *y, int to, const void *x, int x64, const int32_t *taps, const int64_t *w, ts_int_resize_plan p,
                                  ts_shape out, int type, int64_t n) {
    TS_CU_FOR(o, n) int_put(y, to, o, ts_int_resize_at(&p, x, x64, taps, w, &out, o, type));
}

void ts_cu_fwd_int_resize(const ts_kctx *k) {
    int64_t n = numel_out(k);
    if (n <= 0) return;
    int_cells x = int_input(k, 0);
    ts_int_resize_plan p = ts_int_resize_plan_of(k->node->attr, &k->in_shape[0], &k->out_shape);
    int type = k->node->iparam ? k->node->iparam : (int)k->out_dtype;
    int_resize_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->out, cells_kind(k->out_dtype), x.p, x.kind == 1, k->in_int[1],
                                                                             (const int64_t *)(const void *)k->in[2], p, k->out_shape, type, n);
    ts_cu_check(cudaGetLastError(), op_name(k));
}

/* ------------------------------------------- 16-bit float grids (core/half.h) */

/* y[n] = x rounded to the nearest bf16 / f16 value (ties to even), in f32:
 * the CPU's ts_round_half, by the device's own conversions; what it lost
 * (finite non-zero values that became 0, finite values that became
 * +-Inf) added to *lost, a block's counts at a time (lost NULL: not
 * counted). */
__global__ void round_half_kernel(float *y, const float *x, bool bf16, int64_t n, ts_half_loss *lost) {
    unsigned long long under = 0, over = 0;
    TS_CU_FOR(i, n) {
        float v = x[i], r = bf16 ? __bfloat162float(__float2bfloat16_rn(v)) : __half2float(__float2half_rn(v));
        under += r == 0.0f && v != 0.0f;
        over += isinf(r) && !isinf(v) && !isnan(v);
        y[i] = r;
    }
    if (!lost) return;
    const unsigned all = 0xffffffffu;
    for (int d = 16; d > 0; d >>= 1) under += __shfl_down_sync(all, under, d), over += __shfl_down_sync(all, over, d);
    __shared__ unsigned long long warps[2][TS_CU_THREADS / 32];
    if ((threadIdx.x & 31) == 0) warps[0][threadIdx.x >> 5] = under, warps[1][threadIdx.x >> 5] = over;
    __syncthreads();
    if (threadIdx.x != 0) return;
    under = over = 0;
    for (int w = 0; w < (int)(blockDim.x >> 5); w++) under += warps[0][w], over += warps[1][w];
    if (under) atomicAdd((unsigned long long *)&lost->underflow, under);
    if (over) atomicAdd((unsigned long long *)&lost->overflow, over);
}

void ts_cu_round_half(cudaStream_t s, ts_dtype t, float *y, const float *x, int64_t n, ts_half_loss *lost) {
    if (n <= 0) return;
    round_half_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, s>>>(y, x, t == TS_BF16, n, lost);
    ts_cu_check(cudaGetLastError(), "round to a 16-bit float");
}

void ts_cu_fwd_cast(const ts_kctx *k) {
    ts_dtype t = (ts_dtype)k->node->attr[0];
    if (t != TS_BF16 && t != TS_F16) {
        ts_cu_fwd_copy(k);
        return;
    }
    if (k->lost) ts_cu_check(cudaMemsetAsync(k->lost, 0, sizeof *k->lost, ts_cu_stream(k)), op_name(k)); /* this micro-batch's */
    ts_cu_round_half(ts_cu_stream(k), t, k->out, k->in[0], numel_out(k), k->lost);
}

/* ------------------------------------------------------- tanh and sigmoid */

/* y[n] = tanh(x) */
__global__ void tanh_forward_kernel(float *y, const float *x, int64_t n) {
    TS_CU_FOR(i, n) y[i] = tanhf(x[i]);
}

/* dx[n] += dy (1 - y^2) */
__global__ void tanh_backward_kernel(float *dx, const float *dy, const float *y, int64_t n) {
    TS_CU_FOR(i, n) dx[i] += dy[i] * (1.0f - y[i] * y[i]);
}

/* y[n] = 1 / (1 + e^-x), never the exp of a large positive number */
__global__ void sigmoid_forward_kernel(float *y, const float *x, int64_t n) {
    TS_CU_FOR(i, n) {
        float v = x[i], e = expf(-fabsf(v));
        y[i] = v >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
    }
}

/* dx[n] += dy y (1 - y) */
__global__ void sigmoid_backward_kernel(float *dx, const float *dy, const float *y, int64_t n) {
    TS_CU_FOR(i, n) dx[i] += dy[i] * y[i] * (1.0f - y[i]);
}

void ts_cu_fwd_tanh(const ts_kctx *k) {
    int64_t n = numel_out(k);
    tanh_forward_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->out, k->in[0], n);
    ts_cu_check(cudaGetLastError(), "Tanh");
}

void ts_cu_bwd_tanh(const ts_kctx *k) {
    if (!k->din[0]) return;
    int64_t n = numel_out(k);
    tanh_backward_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->din[0], k->dout, k->out, n);
    ts_cu_check(cudaGetLastError(), "Tanh");
}

void ts_cu_fwd_sigmoid(const ts_kctx *k) {
    int64_t n = numel_out(k);
    sigmoid_forward_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->out, k->in[0], n);
    ts_cu_check(cudaGetLastError(), "Sigmoid");
}

void ts_cu_bwd_sigmoid(const ts_kctx *k) {
    if (!k->din[0]) return;
    int64_t n = numel_out(k);
    sigmoid_backward_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->din[0], k->dout, k->out, n);
    ts_cu_check(cudaGetLastError(), "Sigmoid");
}
