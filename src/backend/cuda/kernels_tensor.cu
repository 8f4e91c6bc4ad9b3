/* kernels_tensor.cu -- the CUDA kernels of the tensor and transformer ops:
 * embedding, layer norm, batched matmul, permute, slice and concat. Each
 * adapter is the twin of the CPU's of the same name (backend/cpu/
 * adapters_tensor.c, kernels_tensor.c): same attributes, same shapes, the
 * backward kernels accumulating into the input gradients. Everything is
 * launched on the kernel's stream, nothing allocated, nothing read back.
 * No float atomics: each gradient element has one writer. */
#include "backend/cuda/adapters.h"
#include "backend/ew_math.h"
#include "backend/pad_index.h"

extern "C" {
#include "graph/ops_tensor.h"
}

/* ---------------------------------------------------------------- helpers */

static int64_t numel(const ts_shape *s) { return ts_shape_numel(s); }

/* [outer, dim, inner] around dim d of s */
static void around(const ts_shape *s, int64_t d, int64_t *outer, int64_t *inner) {
    *outer = 1, *inner = 1;
    for (int64_t i = 0; i < d; i++) *outer *= s->d[i];
    for (int64_t i = d + 1; i < s->ndim; i++) *inner *= s->d[i];
}

/* Blocks for `rows` items of one block each (grid-stride loops do the rest). */
static unsigned row_blocks(int64_t rows) {
    int64_t b = rows < 1 ? 1 : rows;
    return (unsigned)(b > 65535 * 4 ? 65535 * 4 : b);
}

template <class T> static __device__ __forceinline__ T warp_sum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* The sum of v over the block (blockDim.x a multiple of 32, at most 1024),
 * returned to every thread; sh holds 32 floats. Safe to call repeatedly:
 * the first barrier keeps a new call from overwriting sh before every
 * thread has read the previous result. */
template <class T> static __device__ T block_sum(T v, T *sh) { /* float or double */
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        T t = lane < nw ? sh[lane] : T(0);
        t = warp_sum(t);
        if (lane == 0) sh[0] = t;
    }
    __syncthreads();
    return sh[0];
}

/* Threads of a row-per-block kernel: a power of two from 32 to 256, no
 * wider than the row needs. */
static unsigned row_threads(int64_t n) {
    unsigned t = 32;
    while (t < 256 && (int64_t)t < n) t *= 2;
    return t;
}

/* -------------------------------------------------------------- embedding */

/* out[outer, n, C] = w[:, idx[i], :] for each of the n indices; w [outer,
 * V, C] (Embedding: outer 1); a negative index counts from V's end. An
 * index outside [-V, V) (the executor rejects those before the run) gives
 * a zero row instead of a read out of bounds. */
static __global__ void embedding_forward_kernel(float *out, const float *w, const int32_t *idx, int64_t outer, int64_t n, int64_t C,
                                                int64_t V) {
    TS_CU_FOR(i, outer * n * C) {
        int64_t o = i / (n * C), r = (i / C) % n, c = i % C;
        int64_t v = idx[r] < 0 ? (int64_t)idx[r] + V : idx[r];
        out[i] = (v >= 0 && v < V) ? w[(o * V + v) * C + c] : 0.0f;
    }
}

/* dw[V, C] += the rows of dout[n, C] that index each row. Deterministic
 * without atomics: one block owns weight row v (grid-stride over V) and
 * scans the indices in tiles of blockDim, each warp marking its matches in
 * a ballot; the block then adds the matching dout rows in ascending i, each
 * thread owning its columns of the row: the CPU's order of additions. Work:
 * V * n / blockDim index tiles, plus n * C additions. */
static __global__ void embedding_backward_kernel(float *dw, const float *dout, const int32_t *idx, int64_t outer, int64_t n, int64_t C,
                                                 int64_t V) {
    __shared__ unsigned hits[TS_CU_THREADS / 32];
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int64_t ov = blockIdx.x; ov < outer * V; ov += gridDim.x) {
        int64_t o = ov / V, v = ov % V;
        float *row = dw + ov * C;
        for (int64_t base = 0; base < n; base += blockDim.x) {
            int64_t t = base + threadIdx.x;
            bool hit = t < n && ((int64_t)idx[t] == v || (int64_t)idx[t] + V == v);
            unsigned m = __ballot_sync(0xffffffffu, hit);
            if (lane == 0) hits[w] = m;
            __syncthreads();
            for (int q = 0; q < nw; q++) {
                unsigned mq = hits[q];
                while (mq) {
                    int b = __ffs(mq) - 1;
                    mq &= mq - 1;
                    const float *d = dout + (o * n + base + q * 32 + b) * C;
                    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) row[c] += d[c];
                }
            }
            __syncthreads(); /* hits is rewritten by the next tile */
        }
    }
}

/* Gather along attr[0] as [outer, V, C] (Embedding: axis 0 of [V, C]) */
static void gather_dims(const ts_kctx *k, int64_t *outer, int64_t *V, int64_t *C) {
    ts_gather_dims(&k->in_shape[0], (int)k->node->attr[0], outer, V, C);
}

void ts_cu_fwd_gather(const ts_kctx *k) {
    int64_t n = numel(&k->in_shape[1]), outer, V, C;
    gather_dims(k, &outer, &V, &C);
    if (outer * n * C == 0) return;
    embedding_forward_kernel<<<ts_cu_blocks(outer * n * C), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->out, k->in[0], k->in_int[1], outer, n,
                                                                                                C, V);
    ts_cu_check(cudaGetLastError(), k->node->op == TS_OP_GATHER ? "Gather" : "Embedding");
}

void ts_cu_bwd_gather(const ts_kctx *k) {
    if (!k->din[0]) return;
    int64_t n = numel(&k->in_shape[1]), outer, V, C;
    gather_dims(k, &outer, &V, &C);
    if (n == 0 || C == 0 || outer == 0) return;
    embedding_backward_kernel<<<row_blocks(outer * V), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->din[0], k->dout, k->in_int[1], outer, n, C,
                                                                                           V);
    ts_cu_check(cudaGetLastError(), k->node->op == TS_OP_GATHER ? "Gather" : "Embedding");
}

/* --------------------------------------------------------- gather elements */

/* one thread per cell an index moves (the CPU's formula, backend/ew_math.h;
 * an i64 tensor's cells: w = 2 an index) */
static __global__ void gather_elements_forward_kernel(float *out, const float *x, const int32_t *idx, ts_shape sd, ts_shape si, int axis,
                                                      int64_t n, int64_t w) {
    TS_CU_FOR(q, n * w) {
        int64_t p = q / w;
        out[q] = x[ts_gather_elements_offset(&sd, &si, axis, p, idx[p]) * w + q % w];
    }
}

/* one thread per line of index positions along the axis, in the CPU's
 * order: a line reads and writes its own line of data (no atomics) */
static __global__ void gather_elements_backward_kernel(float *dx, const float *dout, const int32_t *idx, ts_shape sd, ts_shape si, int axis,
                                                       int64_t lines) {
    int64_t len = si.d[axis], inner = 1;
    for (int k = axis + 1; k < si.ndim; k++) inner *= si.d[k];
    TS_CU_FOR(q, lines) {
        int64_t base = (q / inner) * len * inner + q % inner;
        for (int64_t j = 0; j < len; j++) {
            int64_t p = base + j * inner;
            dx[ts_gather_elements_offset(&sd, &si, axis, p, idx[p])] += dout[p];
        }
    }
}

void ts_cu_fwd_gather_elements(const ts_kctx *k) {
    int64_t n = numel(&k->in_shape[1]);
    if (n == 0) return;
    int64_t w = numel(&k->out_shape) / n;
    gather_elements_forward_kernel<<<ts_cu_blocks(n * w), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->out, k->in[0], k->in_int[1], k->in_shape[0],
                                                                                              k->in_shape[1], (int)k->node->attr[0], n, w);
    ts_cu_check(cudaGetLastError(), "GatherElements");
}

void ts_cu_bwd_gather_elements(const ts_kctx *k) {
    int64_t n = numel(&k->in_shape[1]), len = k->in_shape[1].d[k->node->attr[0]];
    if (!k->din[0] || n == 0) return;
    gather_elements_backward_kernel<<<ts_cu_blocks(n / len), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(
        k->din[0], k->dout, k->in_int[1], k->in_shape[0], k->in_shape[1], (int)k->node->attr[0], n / len);
    ts_cu_check(cudaGetLastError(), "GatherElements");
}

/* ------------------------------------------------------------- layer norm */

/* x, y [rows, D]; w, b [D]; stats [rows, 2] = (mean, rstd) kept for the
 * backward. One block per row, two passes as the CPU: the mean, then the
 * variance around it (biased), rstd = 1 / sqrtf(var + eps). */
static __global__ void layer_norm_forward_kernel(float *y, float *stats, const float *x, const float *w, const float *b, int64_t rows, int64_t D,
                                          float eps) {
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * D;
        float *yr = y + r * D;
        float s = 0.0f;
        for (int64_t j = threadIdx.x; j < D; j += blockDim.x) s += xr[j];
        float mean = block_sum(s, sh) / (float)D;
        float v = 0.0f;
        for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
            float d = xr[j] - mean;
            v += d * d;
        }
        float rstd = 1.0f / sqrtf(block_sum(v, sh) / (float)D + eps);
        for (int64_t j = threadIdx.x; j < D; j += blockDim.x) yr[j] = (xr[j] - mean) * rstd * w[j] + b[j];
        if (threadIdx.x == 0) {
            stats[2 * r] = mean;
            stats[2 * r + 1] = rstd;
        }
    }
}

/* dx[rows, D] += rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w,
 * xhat = (x - mean) * rstd: one block per row. */
static __global__ void layer_norm_backward_dx_kernel(float *dx, const float *dy, const float *x, const float *stats, const float *w, int64_t rows,
                                              int64_t D) {
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * D, *d = dy + r * D;
        float mean = stats[2 * r], rstd = stats[2 * r + 1];
        float sg = 0.0f, sgx = 0.0f;
        for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
            float g = d[j] * w[j];
            sg += g;
            sgx += g * ((xr[j] - mean) * rstd);
        }
        float mg = block_sum(sg, sh) / (float)D;
        float mgx = block_sum(sgx, sh) / (float)D;
        float *o = dx + r * D;
        for (int64_t j = threadIdx.x; j < D; j += blockDim.x) o[j] += rstd * (d[j] * w[j] - mg - ((xr[j] - mean) * rstd) * mgx);
    }
}

#define LN_COLS 32 /* columns per block of the dw/db kernel (threadIdx.x) */
#define LN_ROWS 16 /* row groups per block (threadIdx.y) */

/* dw[D] += sum over rows of dy * xhat, db[D] += sum of dy: a block owns
 * LN_COLS columns (grid-stride over them); its LN_ROWS thread rows each sum
 * every LN_ROWS-th row, then one thread per column adds the LN_ROWS partial
 * sums in order. Deterministic, no atomics. */
static __global__ void layer_norm_backward_dwdb_kernel(float *dw, float *db, const float *dy, const float *x, const float *stats, int64_t rows,
                                                int64_t D) {
    __shared__ float pw[LN_ROWS][LN_COLS], pb[LN_ROWS][LN_COLS];
    int tx = threadIdx.x, ty = threadIdx.y;
    for (int64_t j0 = (int64_t)blockIdx.x * LN_COLS; j0 < D; j0 += (int64_t)gridDim.x * LN_COLS) {
        int64_t j = j0 + tx;
        float aw = 0.0f, ab = 0.0f;
        if (j < D) {
            for (int64_t r = ty; r < rows; r += LN_ROWS) {
                float d = dy[r * D + j];
                if (dw) aw += d * ((x[r * D + j] - stats[2 * r]) * stats[2 * r + 1]);
                ab += d;
            }
        }
        pw[ty][tx] = aw;
        pb[ty][tx] = ab;
        __syncthreads();
        if (ty == 0 && j < D) {
            float sw = 0.0f, sb = 0.0f;
            for (int q = 0; q < LN_ROWS; q++) {
                sw += pw[q][tx];
                sb += pb[q][tx];
            }
            if (dw) dw[j] += sw;
            if (db) db[j] += sb;
        }
        __syncthreads(); /* pw, pb are rewritten by the next columns */
    }
}

/* rows and D: D the size of the normalised trailing dims (the weight's) */
static void ln_dims(const ts_kctx *k, int64_t *rows, int64_t *D) {
    *D = numel(&k->in_shape[1]);
    *rows = *D > 0 ? numel(&k->out_shape) / *D : 0;
}

void ts_cu_fwd_layer_norm(const ts_kctx *k) {
    int64_t rows, D;
    ln_dims(k, &rows, &D);
    if (rows == 0) return;
    layer_norm_forward_kernel<<<row_blocks(rows), row_threads(D), 0, ts_cu_stream(k)>>>(k->out, k->scratch, k->in[0], k->in[1], k->in[2],
                                                                                        rows, D, k->node->fattr[0]);
    ts_cu_check(cudaGetLastError(), "LayerNorm");
}

void ts_cu_bwd_layer_norm(const ts_kctx *k) {
    int64_t rows, D;
    ln_dims(k, &rows, &D);
    if (rows == 0) return;
    cudaStream_t s = ts_cu_stream(k);
    if (k->din[0]) {
        layer_norm_backward_dx_kernel<<<row_blocks(rows), row_threads(D), 0, s>>>(k->din[0], k->dout, k->in[0], k->scratch, k->in[1], rows,
                                                                                 D);
        ts_cu_check(cudaGetLastError(), "LayerNorm");
    }
    if (k->din[1] || k->din[2]) {
        int64_t cols = (D + LN_COLS - 1) / LN_COLS;
        layer_norm_backward_dwdb_kernel<<<row_blocks(cols), dim3(LN_COLS, LN_ROWS), 0, s>>>(k->din[1], k->din[2], k->dout, k->in[0],
                                                                                           k->scratch, rows, D);
        ts_cu_check(cudaGetLastError(), "LayerNorm");
    }
}

/* --------------------------------------------------------------- rms norm */

/* x, y [rows, D]; w [D] or NULL; rstd [rows] = 1 / sqrtf(mean(x^2) + eps)
 * kept for the backward. One block per row, as layer norm's. */
static __global__ void rms_norm_forward_kernel(float *y, float *rstd, const float *x, const float *w, int64_t rows, int64_t D, float eps) {
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * D;
        float *yr = y + r * D;
        float s = 0.0f;
        for (int64_t j = threadIdx.x; j < D; j += blockDim.x) s += xr[j] * xr[j];
        float rr = 1.0f / sqrtf(block_sum(s, sh) / (float)D + eps);
        for (int64_t j = threadIdx.x; j < D; j += blockDim.x) yr[j] = w ? xr[j] * rr * w[j] : xr[j] * rr;
        if (threadIdx.x == 0) rstd[r] = rr;
    }
}

/* dx[rows, D] += r (g - x r^2 mean(g x)), g = dy * w (dy without a
 * weight): one block per row. */
static __global__ void rms_norm_backward_dx_kernel(float *dx, const float *dy, const float *x, const float *rstd, const float *w, int64_t rows,
                                                   int64_t D) {
    __shared__ float sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * D, *d = dy + r * D;
        float rr = rstd[r], sgx = 0.0f;
        for (int64_t j = threadIdx.x; j < D; j += blockDim.x) sgx += (w ? d[j] * w[j] : d[j]) * xr[j];
        float k = rr * rr * rr * block_sum(sgx, sh) / (float)D;
        float *o = dx + r * D;
        for (int64_t j = threadIdx.x; j < D; j += blockDim.x) o[j] += rr * (w ? d[j] * w[j] : d[j]) - xr[j] * k;
    }
}

/* dw[D] += sum over rows of dy * x * rstd: layer norm's column blocks,
 * deterministic, no atomics */
static __global__ void rms_norm_backward_dw_kernel(float *dw, const float *dy, const float *x, const float *rstd, int64_t rows, int64_t D) {
    __shared__ float pw[LN_ROWS][LN_COLS];
    int tx = threadIdx.x, ty = threadIdx.y;
    for (int64_t j0 = (int64_t)blockIdx.x * LN_COLS; j0 < D; j0 += (int64_t)gridDim.x * LN_COLS) {
        int64_t j = j0 + tx;
        float aw = 0.0f;
        if (j < D)
            for (int64_t r = ty; r < rows; r += LN_ROWS) aw += dy[r * D + j] * (x[r * D + j] * rstd[r]);
        pw[ty][tx] = aw;
        __syncthreads();
        if (ty == 0 && j < D) {
            float sw = 0.0f;
            for (int q = 0; q < LN_ROWS; q++) sw += pw[q][tx];
            dw[j] += sw;
        }
        __syncthreads();
    }
}

static void rms_dims(const ts_kctx *k, int64_t *rows, int64_t *D) {
    *D = k->out_shape.d[k->out_shape.ndim - 1];
    *rows = *D > 0 ? numel(&k->out_shape) / *D : 0;
}

void ts_cu_fwd_rms_norm(const ts_kctx *k) {
    int64_t rows, D;
    rms_dims(k, &rows, &D);
    if (rows == 0) return;
    rms_norm_forward_kernel<<<row_blocks(rows), row_threads(D), 0, ts_cu_stream(k)>>>(k->out, k->scratch, k->in[0],
                                                                                      k->n_in > 1 ? k->in[1] : nullptr, rows, D,
                                                                                      k->node->fattr[0]);
    ts_cu_check(cudaGetLastError(), "RMSNorm");
}

void ts_cu_bwd_rms_norm(const ts_kctx *k) {
    int64_t rows, D;
    rms_dims(k, &rows, &D);
    if (rows == 0) return;
    cudaStream_t s = ts_cu_stream(k);
    const float *w = k->n_in > 1 ? k->in[1] : nullptr;
    if (k->din[0]) {
        rms_norm_backward_dx_kernel<<<row_blocks(rows), row_threads(D), 0, s>>>(k->din[0], k->dout, k->in[0], k->scratch, w, rows, D);
        ts_cu_check(cudaGetLastError(), "RMSNorm");
    }
    if (k->n_in > 1 && k->din[1]) {
        int64_t cols = (D + LN_COLS - 1) / LN_COLS;
        rms_norm_backward_dw_kernel<<<row_blocks(cols), dim3(LN_COLS, LN_ROWS), 0, s>>>(k->din[1], k->dout, k->in[0], k->scratch, rows, D);
        ts_cu_check(cudaGetLastError(), "RMSNorm");
    }
}

/* ------------------------------------------------------------- group norm */

/* x, y [N, C, S] as N*G groups of L = C/G*S contiguous values (sample n,
 * channels g*C/G..); w, b [C]; stats [N*G, 2] = (mean, rstd). One block per
 * group, its sums in double as the CPU's. */
static __global__ void group_norm_forward_kernel(float *y, float *stats, const float *x, const float *w, const float *b, int64_t groups,
                                                 int64_t G, int64_t Cg, int64_t S, float eps) {
    __shared__ double sh[32];
    int64_t L = Cg * S;
    for (int64_t r = blockIdx.x; r < groups; r += gridDim.x) {
        const float *xr = x + r * L;
        double s = 0;
        for (int64_t j = threadIdx.x; j < L; j += blockDim.x) s += xr[j];
        double mean = L ? block_sum(s, sh) / (double)L : 0;
        double v = 0;
        for (int64_t j = threadIdx.x; j < L; j += blockDim.x) v += ((double)xr[j] - mean) * ((double)xr[j] - mean);
        v = block_sum(v, sh);
        float m = (float)mean, rstd = (float)(1.0 / sqrt((L ? v / (double)L : 0) + (double)eps));
        int64_t c0 = (r % G) * Cg;
        for (int64_t j = threadIdx.x; j < L; j += blockDim.x) y[r * L + j] = (xr[j] - m) * rstd * w[c0 + j / S] + b[c0 + j / S];
        if (threadIdx.x == 0) {
            stats[2 * r] = m;
            stats[2 * r + 1] = rstd;
        }
    }
}

/* dx += rstd * (g - mean(g) - xhat * mean(g * xhat)) over each group, g =
 * dy * w[channel]: one block per group */
static __global__ void group_norm_backward_dx_kernel(float *dx, const float *dy, const float *x, const float *stats, const float *w,
                                                     int64_t groups, int64_t G, int64_t Cg, int64_t S) {
    __shared__ double sh[32];
    int64_t L = Cg * S;
    for (int64_t r = blockIdx.x; r < groups; r += gridDim.x) {
        const float *xr = x + r * L, *d = dy + r * L;
        float m = stats[2 * r], rstd = stats[2 * r + 1];
        int64_t c0 = (r % G) * Cg;
        double sg = 0, sgx = 0;
        for (int64_t j = threadIdx.x; j < L; j += blockDim.x) {
            float g = d[j] * w[c0 + j / S];
            sg += g;
            sgx += g * ((xr[j] - m) * rstd);
        }
        float mg = (float)(block_sum(sg, sh) / (double)L);
        float mgx = (float)(block_sum(sgx, sh) / (double)L);
        for (int64_t j = threadIdx.x; j < L; j += blockDim.x)
            dx[r * L + j] += rstd * (d[j] * w[c0 + j / S] - mg - ((xr[j] - m) * rstd) * mgx);
    }
}

/* dw[c] += sum over samples and positions of dy * xhat, db[c] += sum of
 * dy: one block per channel, in double */
static __global__ void group_norm_backward_dwdb_kernel(float *dw, float *db, const float *dy, const float *x, const float *stats, int64_t N,
                                                       int64_t C, int64_t G, int64_t S) {
    __shared__ double sh[32];
    int64_t Cg = C / G;
    for (int64_t ch = blockIdx.x; ch < C; ch += gridDim.x) {
        double sw = 0, sb = 0;
        for (int64_t i = threadIdx.x; i < N * S; i += blockDim.x) {
            int64_t n = i / S, j = i % S, r = n * G + ch / Cg, at = (n * C + ch) * S + j;
            sw += dy[at] * ((x[at] - stats[2 * r]) * stats[2 * r + 1]);
            sb += dy[at];
        }
        sw = block_sum(sw, sh);
        sb = block_sum(sb, sh);
        if (threadIdx.x == 0) {
            if (dw) dw[ch] += (float)sw;
            if (db) db[ch] += (float)sb;
        }
    }
}

void ts_cu_fwd_group_norm(const ts_kctx *k) {
    int64_t N, C, S, G = k->node->attr[0];
    ts_group_norm_dims(&k->in_shape[0], &N, &C, &S);
    if (N * C * S == 0) return;
    group_norm_forward_kernel<<<row_blocks(N * G), row_threads(C / G * S), 0, ts_cu_stream(k)>>>(k->out, k->scratch, k->in[0], k->in[1],
                                                                                                 k->in[2], N * G, G, C / G, S, k->node->fattr[0]);
    ts_cu_check(cudaGetLastError(), "GroupNorm");
}

void ts_cu_bwd_group_norm(const ts_kctx *k) {
    int64_t N, C, S, G = k->node->attr[0];
    ts_group_norm_dims(&k->in_shape[0], &N, &C, &S);
    if (N * C * S == 0) return;
    cudaStream_t s = ts_cu_stream(k);
    if (k->din[0]) {
        group_norm_backward_dx_kernel<<<row_blocks(N * G), row_threads(C / G * S), 0, s>>>(k->din[0], k->dout, k->in[0], k->scratch, k->in[1],
                                                                                          N * G, G, C / G, S);
        ts_cu_check(cudaGetLastError(), "GroupNorm");
    }
    if (k->din[1] || k->din[2]) {
        group_norm_backward_dwdb_kernel<<<row_blocks(C), row_threads(N * S), 0, s>>>(k->din[1], k->din[2], k->dout, k->in[0], k->scratch, N, C,
                                                                                     G, S);
        ts_cu_check(cudaGetLastError(), "GroupNorm");
    }
}

/* --------------------------------------------------------- batched matmul */

/* The batch dims of C = op(A) op(B) as the CPU's broadcast view: C's batch
 * shape with size-1 dims dropped and adjacent dims merged where A, B and C
 * all step through both as through one; s[0], s[1], s[2]: the element
 * strides of A, B and C along each dim (0 where A or B is broadcast). */
typedef struct bmm_view {
    int nd;
    int64_t d[TS_MAX_DIMS];
    int64_t s[3][TS_MAX_DIMS];
} bmm_view;

static void bmm_view_make(bmm_view *v, const ts_shape *sc, const ts_shape *sa, const ts_shape *sb, int64_t sza, int64_t szb, int64_t szc) {
    int nb = sc->ndim - 2;
    const ts_shape *ops[2] = {sa, sb};
    const int64_t sz[3] = {sza, szb, szc};
    int64_t st[3][TS_MAX_DIMS];
    for (int k = 0; k < 2; k++) { /* numpy's rules, aligned on the right */
        int nk = ops[k]->ndim - 2;
        int64_t stride = 1;
        for (int i = nb - 1; i >= 0; i--) {
            int j = i - (nb - nk);
            if (j < 0 || ops[k]->d[j] == 1) {
                st[k][i] = 0;
            } else {
                st[k][i] = stride;
                stride *= ops[k]->d[j];
            }
        }
    }
    int64_t stride = 1; /* C is contiguous over its batch dims */
    for (int i = nb - 1; i >= 0; i--) {
        st[2][i] = stride;
        stride *= sc->d[i];
    }
    v->nd = 0;
    for (int i = 0; i < nb; i++) {
        if (sc->d[i] == 1) continue;
        bool merge = v->nd > 0;
        for (int k = 0; k < 3 && merge; k++) merge = v->s[k][v->nd - 1] == st[k][i] * sc->d[i];
        if (merge) {
            v->d[v->nd - 1] *= sc->d[i];
            for (int k = 0; k < 3; k++) v->s[k][v->nd - 1] = st[k][i];
        } else {
            v->d[v->nd] = sc->d[i];
            for (int k = 0; k < 3; k++) v->s[k][v->nd] = st[k][i];
            v->nd++;
        }
    }
    if (v->nd == 0) { /* one product */
        v->nd = 1;
        v->d[0] = 1;
        for (int k = 0; k < 3; k++) v->s[k][0] = 0;
    }
    for (int i = 0; i < v->nd; i++) /* in elements */
        for (int k = 0; k < 3; k++) v->s[k][i] *= sz[k];
}

/* The products R_i = beta R_i + op(P_i) op(Q_i) over the view, where P, Q,
 * R step by sp, sq, sr along its dims (each one of the view's s[]). One
 * dim along which R moves goes to one strided GEMM (its products write
 * distinct blocks, so they may run together); the other dims loop here, in
 * the CPU's order, so products that add into one block (R broadcast there,
 * a gradient of a broadcast operand) run one after another. */
static void bmm_run(const ts_kctx *k, const bmm_view *v, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *P, const int64_t *sp,
                    const float *Q, const int64_t *sq, float *R, const int64_t *sr, float beta) {
    int bd = -1;
    for (int i = 0; i < v->nd; i++)
        if (sr[i] != 0 && v->d[i] > 1 && (bd < 0 || v->d[i] > v->d[bd])) bd = i;
    int64_t outer = 1;
    for (int i = 0; i < v->nd; i++)
        if (i != bd) outer *= v->d[i];
    int64_t count = bd >= 0 ? v->d[bd] : 1;
    for (int64_t o = 0; o < outer; o++) {
        int64_t q = o, op = 0, oq = 0, orr = 0;
        for (int i = v->nd - 1; i >= 0; i--) {
            if (i == bd) continue;
            int64_t c = q % v->d[i];
            q /= v->d[i];
            op += c * sp[i], oq += c * sq[i], orr += c * sr[i];
        }
        ts_cu_gemm_strided(k, ta, tb, M, N, K, P + op, bd >= 0 ? sp[bd] : 0, Q + oq, bd >= 0 ? sq[bd] : 0, beta, R + orr,
                           bd >= 0 ? sr[bd] : 0, count);
    }
}

/* M, N, K of C[..., M, N] = op(A)[..., M, K] op(B)[..., K, N] and the view */
static int64_t bmm_setup(const ts_kctx *k, bmm_view *v, int64_t *M, int64_t *N, int64_t *K) {
    const ts_shape *sc = &k->out_shape, *sa = &k->in_shape[0];
    bool ta = k->node->attr[0] != 0;
    *M = sc->d[sc->ndim - 2];
    *N = sc->d[sc->ndim - 1];
    *K = ta ? sa->d[sa->ndim - 2] : sa->d[sa->ndim - 1];
    bmm_view_make(v, sc, sa, &k->in_shape[1], *M * *K, *K * *N, *M * *N);
    return numel(sc);
}

void ts_cu_fwd_bmm(const ts_kctx *k) {
    bmm_view v;
    int64_t M, N, K;
    if (bmm_setup(k, &v, &M, &N, &K) == 0) return;
    bool ta = k->node->attr[0] != 0, tb = k->node->attr[1] != 0;
    bmm_run(k, &v, ta, tb, M, N, K, k->in[0], v.s[0], k->in[1], v.s[1], k->out, v.s[2], 0.0f);
}

void ts_cu_bwd_bmm(const ts_kctx *k) {
    bmm_view v;
    int64_t M, N, K;
    if (bmm_setup(k, &v, &M, &N, &K) == 0) return;
    bool ta = k->node->attr[0] != 0, tb = k->node->attr[1] != 0;
    cudaStream_t s = ts_cu_stream(k);
    const float *a = k->in[0], *b = k->in[1], *dc = k->dout;
    /* dA = dC op(B)^T, or op(B) dC^T when A is stored transposed */
    if (k->din[0]) {
        if (!ta) bmm_run(k, &v, false, !tb, M, K, N, dc, v.s[2], b, v.s[1], k->din[0], v.s[0], 1.0f);
        else bmm_run(k, &v, tb, true, K, M, N, b, v.s[1], dc, v.s[2], k->din[0], v.s[0], 1.0f);
    }
    /* dB = op(A)^T dC, or dC^T op(A) when B is stored transposed */
    if (k->din[1]) {
        if (!tb) bmm_run(k, &v, !ta, false, K, N, M, a, v.s[0], dc, v.s[2], k->din[1], v.s[1], 1.0f);
        else bmm_run(k, &v, true, ta, N, K, M, dc, v.s[2], a, v.s[0], k->din[1], v.s[1], 1.0f);
    }
}

/* ---------------------------------------------------------------- permute */

/* The output's dims (size-1 dropped, merged where x steps through two as
 * through one) and x's stride along each: out is contiguous over d[]. */
typedef struct perm_view {
    int nd;
    int64_t d[TS_MAX_DIMS];
    int64_t s[TS_MAX_DIMS];
    bool narrow; /* indices fit 32 bits (ts_cu_divmod) */
} perm_view;

static void perm_view_make(perm_view *v, const ts_shape *sx, const int64_t *perm) {
    int64_t xs[TS_MAX_DIMS], st = 1;
    for (int i = sx->ndim - 1; i >= 0; i--) xs[i] = st, st *= sx->d[i];
    v->nd = 0;
    for (int i = 0; i < sx->ndim; i++) {
        int64_t d = sx->d[perm[i]], s = xs[perm[i]];
        if (d == 1) continue;
        if (v->nd > 0 && v->s[v->nd - 1] == s * d) {
            v->d[v->nd - 1] *= d;
            v->s[v->nd - 1] = s;
        } else {
            v->d[v->nd] = d;
            v->s[v->nd] = s;
            v->nd++;
        }
    }
    if (v->nd == 0) {
        v->nd = 1;
        v->d[0] = 1;
        v->s[0] = 0;
    }
    v->narrow = ts_cu_narrow(st);
}

/* x's offset of output element i */
static __device__ __forceinline__ int64_t perm_offset(const perm_view &v, int64_t i) {
    int64_t off = 0;
    for (int d = v.nd - 1; d >= 0; d--) off += ts_cu_divmod(&i, v.d[d], v.narrow) * v.s[d];
    return off;
}

/* out[n] (contiguous, the permuted shape) = x read through the view */
static __global__ void permute_forward_kernel(float *out, const float *x, perm_view v, int64_t n) {
    TS_CU_FOR(i, n) out[i] = x[perm_offset(v, i)];
}

/* dx += dout read back through the view: a permutation, so each dx element
 * has exactly one writer */
static __global__ void permute_backward_kernel(float *dx, const float *dout, perm_view v, int64_t n) {
    TS_CU_FOR(i, n) dx[perm_offset(v, i)] += dout[i];
}

void ts_cu_fwd_permute(const ts_kctx *k) {
    int64_t n = numel(&k->in_shape[0]);
    if (n == 0) return;
    perm_view v;
    perm_view_make(&v, &k->in_shape[0], k->node->attr);
    permute_forward_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->out, k->in[0], v, n);
    ts_cu_check(cudaGetLastError(), "Transpose");
}

void ts_cu_bwd_permute(const ts_kctx *k) {
    int64_t n = numel(&k->in_shape[0]);
    if (!k->din[0] || n == 0) return;
    perm_view v;
    perm_view_make(&v, &k->in_shape[0], k->node->attr);
    permute_backward_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->din[0], k->dout, v, n);
    ts_cu_check(cudaGetLastError(), "Transpose");
}

/* ---------------------------------------------------------- slice, concat */

/* n = rows * len elements: dst[q * dst_row + dst_at + r] (+)= src[q *
 * src_row + src_at + r] for row q, r < len. Slice, concat and their
 * gradients are all this copy of a block of each outer row; the written
 * places are distinct, so accumulating needs no atomics. */
static __global__ void rows_copy_kernel(float *dst, int64_t dst_row, int64_t dst_at, const float *src, int64_t src_row, int64_t src_at, int64_t len,
                                 int64_t n, bool accumulate) {
    bool narrow = ts_cu_narrow(n);
    TS_CU_FOR(i, n) {
        int64_t q = i, r = ts_cu_divmod(&q, len, narrow);
        float v = src[q * src_row + src_at + r];
        float *o = dst + q * dst_row + dst_at + r;
        if (accumulate) *o += v;
        else *o = v;
    }
}

static void rows_copy(const ts_kctx *k, float *dst, int64_t dst_row, int64_t dst_at, const float *src, int64_t src_row, int64_t src_at,
                      int64_t rows, int64_t len, bool accumulate, const char *what) {
    int64_t n = rows * len;
    if (n == 0) return;
    rows_copy_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(dst, dst_row, dst_at, src, src_row, src_at, len, n, accumulate);
    ts_cu_check(cudaGetLastError(), what);
}

/* Pad (backend/pad_index.h): one thread per output element forward, per
 * input element backward (each gathers its own gradient) */
static __global__ void pad_forward_kernel(float *out, const float *x, ts_pad_geom g, int64_t n) {
    TS_CU_FOR(o, n) out[o] = ts_pad_value_at(&g, x, o);
}
static __global__ void pad_backward_kernel(float *dx, const float *dout, ts_pad_geom g, int64_t n) {
    TS_CU_FOR(i, n) dx[i] += ts_pad_grad_at(&g, dout, i);
}

void ts_cu_fwd_pad(const ts_kctx *k) {
    ts_pad_geom g = ts_pad_geom_of(k->node, &k->in_shape[0], &k->out_shape);
    int64_t n = numel(&k->out_shape);
    pad_forward_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->out, k->in[0], g, n);
    ts_cu_check(cudaGetLastError(), "Pad");
}

void ts_cu_bwd_pad(const ts_kctx *k) {
    if (!k->din[0]) return;
    ts_pad_geom g = ts_pad_geom_of(k->node, &k->in_shape[0], &k->out_shape);
    int64_t n = numel(&k->in_shape[0]);
    pad_backward_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->din[0], k->dout, g, n);
    ts_cu_check(cudaGetLastError(), "Pad");
}

/* out[outer, len, inner] = x[outer, start:start+len, inner] */
void ts_cu_fwd_slice(const ts_kctx *k) {
    int64_t o, in, d = k->node->attr[0], start = k->node->attr[1], len = k->node->attr[2];
    around(&k->in_shape[0], d, &o, &in);
    int64_t dim_in = k->in_shape[0].d[d];
    rows_copy(k, k->out, len * in, 0, k->in[0], dim_in * in, start * in, o, len * in, false, "Slice");
}

void ts_cu_bwd_slice(const ts_kctx *k) {
    if (!k->din[0]) return;
    int64_t o, in, d = k->node->attr[0], start = k->node->attr[1], len = k->node->attr[2];
    around(&k->in_shape[0], d, &o, &in);
    int64_t dim_in = k->in_shape[0].d[d];
    rows_copy(k, k->din[0], dim_in * in, start * in, k->dout, len * in, 0, o, len * in, true, "Slice");
}

/* out[outer, sum of dk, inner]: part j fills [at, at + dk) of the dim */
void ts_cu_fwd_concat(const ts_kctx *k) {
    int64_t o, in, d = k->node->attr[0], at = 0, dim_out = k->out_shape.d[d];
    around(&k->out_shape, d, &o, &in);
    for (int j = 0; j < k->n_in; j++) {
        int64_t dk = k->in_shape[j].d[d];
        rows_copy(k, k->out, dim_out * in, at * in, k->in[j], dk * in, 0, o, dk * in, false, "Concat");
        at += dk;
    }
}

/* the gradient of part j is the slice of dout it came from */
void ts_cu_bwd_concat(const ts_kctx *k) {
    int64_t o, in, d = k->node->attr[0], at = 0, dim_out = k->out_shape.d[d];
    around(&k->out_shape, d, &o, &in);
    for (int j = 0; j < k->n_in; j++) {
        int64_t dk = k->in_shape[j].d[d];
        if (k->din[j]) rows_copy(k, k->din[j], dk * in, 0, k->dout, dim_out * in, at * in, o, dk * in, true, "Concat");
        at += dk;
    }
}
