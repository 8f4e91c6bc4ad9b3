/* kernels_broadcast.cu -- broadcasting, masks and reductions over axes on
 * the GPU: Add/Sub/Mul/Div with numpy broadcasting, Where, MaskedFill,
 * ReduceSum/ReduceMean/ReduceMax over axes and the dropout mask. The twins
 * of the CPU's adapters_tensor.c / kernels_tensor.c and adapters_cnn.c /
 * cnn.c (dropout).
 *
 * Every op here walks an n-d view (the CPU's bview): the dims of a walked,
 * contiguous tensor (the output, or x for the reductions), size-1 dims
 * dropped and adjacent dims merged where every operand steps through both
 * as one, and each operand's stride per dim (0 where it is broadcast).
 * Elementwise kernels take one thread per walked element. Gradients of a
 * broadcast operand (and the reductions' forward) are a gather: each
 * element of the operand collects the walked positions that meet it, in
 * walk order, one thread per element (exactly the CPU's order) or, for few
 * elements with many positions, one block per element (a fixed tree:
 * deterministic, within float rounding of the CPU). No atomics. */
#include "backend/cuda/adapters.h"
#include "backend/ew_math.h"

extern "C" {
#include "graph/ops.h"
}

#include <math.h>
#include <stdint.h>

#define BV_OPS 3

enum { BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV };
enum { RED_SUM, RED_MEAN, RED_MAX };

/* ------------------------------------------------------- broadcast views */

/* The walked tensor is contiguous over d[0..nd) (os: its strides);
 * operand k is read at stride s[k][i] along dim i (0: broadcast). Passed
 * to kernels by value. */
struct bview {
    int nd;
    bool narrow; /* the walk's indices fit 32 bits (ts_cu_divmod) */
    int64_t d[TS_MAX_DIMS];
    int64_t os[TS_MAX_DIMS];
    int64_t s[BV_OPS][TS_MAX_DIMS];
};

/* Operands ops[0..nops) broadcast to `so` by numpy's rules (aligned on the
 * right); size-1 dims dropped, a dim merged into the previous one when
 * every operand steps through both as through one. */
static bview bview_of(const ts_shape *so, int nops, const ts_shape *const *ops) {
    int64_t st[BV_OPS][TS_MAX_DIMS] = {};
    for (int k = 0; k < nops; k++) {
        int64_t stride = 1;
        for (int i = so->ndim - 1; i >= 0; i--) {
            int j = i - (so->ndim - ops[k]->ndim);
            if (j < 0 || ops[k]->d[j] == 1) {
                st[k][i] = 0;
            } else {
                st[k][i] = stride;
                stride *= ops[k]->d[j];
            }
        }
    }
    bview v = {};
    for (int i = 0; i < so->ndim; i++) {
        if (so->d[i] == 1) continue;
        bool merge = v.nd > 0;
        for (int k = 0; k < BV_OPS && merge; k++) merge = v.s[k][v.nd - 1] == st[k][i] * so->d[i];
        if (merge) {
            v.d[v.nd - 1] *= so->d[i];
            for (int k = 0; k < BV_OPS; k++) v.s[k][v.nd - 1] = st[k][i];
        } else {
            v.d[v.nd] = so->d[i];
            for (int k = 0; k < BV_OPS; k++) v.s[k][v.nd] = st[k][i];
            v.nd++;
        }
    }
    if (v.nd == 0) { /* a scalar: one dim of 1, every operand at stride 0 */
        v.nd = 1;
        v.d[0] = 1;
    }
    v.os[v.nd - 1] = 1;
    for (int i = v.nd - 2; i >= 0; i--) v.os[i] = v.os[i + 1] * v.d[i + 1];
    v.narrow = ts_cu_narrow(v.os[0] * v.d[0]);
    return v;
}

/* off[k] <- where operand k is read at walked element i */
template <int NOPS>
__device__ __forceinline__ void bv_offsets(const bview &v, int64_t i, int64_t *off) {
    for (int k = 0; k < NOPS; k++) off[k] = 0;
    for (int q = v.nd - 1; q >= 0; q--) {
        int64_t c = ts_cu_divmod(&i, v.d[q], v.narrow);
        for (int k = 0; k < NOPS; k++) off[k] += c * v.s[k][q];
    }
}

/* --------------------------------------------------------------- gathers */

/* Element e of operand k meets the walked positions whose kept dims (those
 * where k's stride is not 0) are e's coordinates. base: the walked offset
 * *o and every operand's offsets off[] at the first such position. */
__device__ __forceinline__ void gather_base(const bview &v, int k, int64_t e, int64_t *o, int64_t *off) {
    *o = 0;
    for (int j = 0; j < BV_OPS; j++) off[j] = 0;
    for (int q = v.nd - 1; q >= 0; q--) {
        if (!v.s[k][q]) continue;
        int64_t c = ts_cu_divmod(&e, v.d[q], v.narrow);
        *o += c * v.os[q];
        for (int j = 0; j < BV_OPS; j++) off[j] += c * v.s[j][q];
    }
}

/* A gather F gives: init(e) (the starting value), ident() (the identity of
 * comb), term(e, o, off) (one position's contribution), comb(acc, t) and
 * done(e, acc) (writes the result). */

/* e in [0, ne): one thread per element, its R positions in walk order (the
 * CPU's order). [ne] threads. */
template <class F>
__global__ void gather_thread_kernel(bview v, int k, int64_t ne, int64_t R, F f) {
    TS_CU_FOR(e, ne) {
        int64_t o, off[BV_OPS], idx[TS_MAX_DIMS] = {};
        gather_base(v, k, e, &o, off);
        float acc = f.init(e);
        for (int64_t r = 0; r < R; r++) {
            acc = f.comb(acc, f.term(e, o, off));
            for (int q = v.nd - 1; q >= 0; q--) { /* next position: odometer over the reduced dims */
                if (v.s[k][q]) continue;
                o += v.os[q];
                for (int j = 0; j < BV_OPS; j++) off[j] += v.s[j][q];
                if (++idx[q] < v.d[q]) break;
                o -= v.os[q] * v.d[q];
                for (int j = 0; j < BV_OPS; j++) off[j] -= v.s[j][q] * v.d[q];
                idx[q] = 0;
            }
        }
        f.done(e, acc);
    }
}

/* One block of TS_CU_THREADS (a power of two) per element: thread t takes
 * positions t, t + blockDim, ..., then a fixed tree combines the partials.
 * Grid: min(ne, cap) blocks striding over the elements. */
template <class F>
__global__ void gather_block_kernel(bview v, int k, int64_t ne, int64_t R, F f) {
    __shared__ float part[TS_CU_THREADS];
    for (int64_t e = blockIdx.x; e < ne; e += gridDim.x) {
        int64_t o, off[BV_OPS];
        gather_base(v, k, e, &o, off);
        float acc = f.ident();
        for (int64_t r = threadIdx.x; r < R; r += blockDim.x) {
            int64_t ro = o, roff[BV_OPS] = {off[0], off[1], off[2]}, rem = r;
            for (int q = v.nd - 1; q >= 0; q--) {
                if (v.s[k][q]) continue;
                int64_t c = ts_cu_divmod(&rem, v.d[q], v.narrow);
                ro += c * v.os[q];
                for (int j = 0; j < BV_OPS; j++) roff[j] += c * v.s[j][q];
            }
            acc = f.comb(acc, f.term(e, ro, roff));
        }
        part[threadIdx.x] = acc;
        __syncthreads();
        for (unsigned h = blockDim.x / 2; h > 0; h >>= 1) {
            if (threadIdx.x < h) part[threadIdx.x] = f.comb(part[threadIdx.x], part[threadIdx.x + h]);
            __syncthreads();
        }
        if (threadIdx.x == 0) f.done(e, f.comb(f.init(e), part[0]));
        __syncthreads(); /* part[] is reused by the next element */
    }
}

/* Operand k kept along the inner dim of a 2-d walk and reduced along the
 * outer (a bias's gradient: a sum over rows): a block takes 32 neighbouring
 * elements, a warp reading 32 neighbours of a row at once, its 32 warps
 * each summing every 32nd row, 8 rows' loads at a time (added in row
 * order); a fixed order combines the warps'. Grid: one block per 32
 * elements. */
#define COLUMN_WARPS 32
#define COLUMN_UNROLL 8

/* row r's term of column e */
template <class F>
__device__ __forceinline__ float column_term(const bview &v, const F &f, int64_t e, int64_t r) {
    int64_t off[BV_OPS];
    for (int j = 0; j < BV_OPS; j++) off[j] = r * v.s[j][0] + e * v.s[j][1];
    return f.term(e, r * v.os[0] + e, off);
}

template <class F>
__global__ void gather_columns_kernel(bview v, int k, int64_t ne, int64_t R, F f) {
    __shared__ float part[COLUMN_WARPS][33];
    int64_t e = (int64_t)blockIdx.x * 32 + threadIdx.x, r = threadIdx.y;
    float acc = f.ident();
    if (e < ne) {
        for (; r + (COLUMN_UNROLL - 1) * COLUMN_WARPS < R; r += COLUMN_UNROLL * COLUMN_WARPS) {
            float t[COLUMN_UNROLL]; /* the rows' terms read first: their loads in flight together */
#pragma unroll
            for (int u = 0; u < COLUMN_UNROLL; u++) t[u] = column_term(v, f, e, r + u * COLUMN_WARPS);
#pragma unroll
            for (int u = 0; u < COLUMN_UNROLL; u++) acc = f.comb(acc, t[u]);
        }
        for (; r < R; r += COLUMN_WARPS) acc = f.comb(acc, column_term(v, f, e, r));
    }
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y != 0 || e >= ne) return;
    float sum = part[0][threadIdx.x];
    for (int y = 1; y < COLUMN_WARPS; y++) sum = f.comb(sum, part[y][threadIdx.x]);
    f.done(e, f.comb(f.init(e), sum));
}

/* Runs gather F for the ne elements of operand k over the walked
 * tensor's nw elements. Rows summed along a 2-d walk: the column kernel.
 * Else block per element when there are few elements and many positions
 * each, or when the positions are contiguous (the innermost dim reduced);
 * else thread per element (coalesced over the elements). */
template <class F>
static void gather(const ts_kctx *k, const char *what, const bview &v, int op, int64_t ne, int64_t nw, F f) {
    if (ne <= 0) return;
    int64_t R = nw / ne;
    if (v.nd == 2 && !v.s[op][0] && v.s[op][1] && R >= 64) { /* rows summed: read along them */
        dim3 block(32, COLUMN_WARPS);
        gather_columns_kernel<F><<<(unsigned)((ne + 31) / 32), block, 0, ts_cu_stream(k)>>>(v, op, ne, R, f);
        ts_cu_check(cudaGetLastError(), what);
        return;
    }
    bool block = R >= 64 && (ne < 8192 || !v.s[op][v.nd - 1]);
    if (block) {
        unsigned grid = (unsigned)(ne < 65535 * 4 ? ne : 65535 * 4);
        gather_block_kernel<F><<<grid, TS_CU_THREADS, 0, ts_cu_stream(k)>>>(v, op, ne, R, f);
    } else {
        gather_thread_kernel<F><<<ts_cu_blocks(ne), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(v, op, ne, R, f);
    }
    ts_cu_check(cudaGetLastError(), what);
}

/* Gradient gathers start from din[e] and add the terms (the CPU adds them
 * straight into din in walk order). __fadd_rn / __fmul_rn: no fused
 * multiply-add, each rounding as the CPU's expression. */
struct grad_sum {
    float *din;
    __device__ float init(int64_t e) const { return din[e]; }
    __device__ float ident() const { return 0.0f; }
    __device__ float comb(float a, float b) const { return __fadd_rn(a, b); }
    __device__ void done(int64_t e, float acc) const { din[e] = acc; }
};

static const char *op_name(ts_op op) {
    if (ts_ewb_kind(op) != TS_EWB_NONE) return ts_op_get(op)->name;
    switch (op) {
    case TS_OP_ADD: return "Add";
    case TS_OP_SUB: return "Sub";
    case TS_OP_MUL: return "Mul";
    case TS_OP_DIV: return "Div";
    case TS_OP_WHERE: return "Where";
    case TS_OP_MASKED_FILL: return "MaskedFill";
    case TS_OP_REDUCE_SUM_AXES: return "ReduceSum";
    case TS_OP_REDUCE_MEAN_AXES: return "ReduceMean";
    case TS_OP_REDUCE_MAX_AXES: return "ReduceMax";
    default: return "DropoutMask";
    }
}

/* ------------------------------------------- add, sub, mul, div (numpy) */

static int bin_kind(ts_op op) { return op == TS_OP_ADD ? BIN_ADD : op == TS_OP_SUB ? BIN_SUB : op == TS_OP_MUL ? BIN_MUL : BIN_DIV; }

/* out[n] = a op b, a and b read through the view (operands 0, 1) */
template <int KIND>
__global__ void binary_forward_kernel(float *out, const float *a, const float *b, bview v, int64_t n) {
    TS_CU_FOR(i, n) {
        int64_t off[2];
        bv_offsets<2>(v, i, off);
        float x = a[off[0]], y = b[off[1]];
        out[i] = KIND == BIN_ADD ? x + y : KIND == BIN_SUB ? x - y : KIND == BIN_MUL ? __fmul_rn(x, y) : x / y;
    }
}

/* the binary family of ew_math.h (Pow, Max, Equal, ...): its kind at run */
__global__ void ew_binary_forward_kernel(int kind, float *out, const float *a, const float *b, bview v, int64_t n) {
    TS_CU_FOR(i, n) {
        int64_t off[2];
        bv_offsets<2>(v, i, off);
        out[i] = ts_ewb_forward(kind, a[off[0]], b[off[1]]);
    }
}

void ts_cu_fwd_broadcast_binary(const ts_kctx *k) {
    const ts_shape *ops[2] = {&k->in_shape[0], &k->in_shape[1]};
    bview v = bview_of(&k->out_shape, 2, ops);
    int64_t n = ts_shape_numel(&k->out_shape);
    if (n <= 0) return;
    dim3 g(ts_cu_blocks(n)), b(TS_CU_THREADS);
    cudaStream_t s = ts_cu_stream(k);
    int ew = ts_ewb_kind(k->node->op);
    if (ew != TS_EWB_NONE) {
        ew_binary_forward_kernel<<<g, b, 0, s>>>(ew, k->out, k->in[0], k->in[1], v, n);
        ts_cu_check(cudaGetLastError(), op_name(k->node->op));
        return;
    }
    switch (bin_kind(k->node->op)) {
    case BIN_ADD: binary_forward_kernel<BIN_ADD><<<g, b, 0, s>>>(k->out, k->in[0], k->in[1], v, n); break;
    case BIN_SUB: binary_forward_kernel<BIN_SUB><<<g, b, 0, s>>>(k->out, k->in[0], k->in[1], v, n); break;
    case BIN_MUL: binary_forward_kernel<BIN_MUL><<<g, b, 0, s>>>(k->out, k->in[0], k->in[1], v, n); break;
    default: binary_forward_kernel<BIN_DIV><<<g, b, 0, s>>>(k->out, k->in[0], k->in[1], v, n); break;
    }
    ts_cu_check(cudaGetLastError(), op_name(k->node->op));
}

/* The gradient of operand WHICH (0: a, 1: b) of a op b, one term per
 * output position (the CPU's bin_bwd_row):
 *   add: da += d, db += d      sub: da += d, db -= d
 *   mul: da += d b, db += d a  div: da += d / b, db -= d a / (b b) */
template <int KIND, int WHICH>
struct grad_binary : grad_sum {
    const float *dout, *a, *b;
    __device__ float term(int64_t, int64_t o, const int64_t *off) const {
        float d = dout[o];
        if (KIND == BIN_ADD) return d;
        if (KIND == BIN_SUB) return WHICH == 0 ? d : -d;
        if (KIND == BIN_MUL) return WHICH == 0 ? __fmul_rn(d, b[off[1]]) : __fmul_rn(d, a[off[0]]);
        if (WHICH == 0) return d / b[off[1]];
        float bv = b[off[1]];
        return -(__fmul_rn(d, a[off[0]]) / __fmul_rn(bv, bv));
    }
};

/* the binary family's: d times ts_ewb_partial (the CPU's bin_bwd_row) */
template <int WHICH>
struct grad_ew_binary : grad_sum {
    int kind;
    const float *dout, *a, *b;
    __device__ float term(int64_t, int64_t o, const int64_t *off) const {
        return __fmul_rn(dout[o], ts_ewb_partial(kind, WHICH, a[off[0]], b[off[1]]));
    }
};

static void ew_binary_backward(const ts_kctx *k, int kind, const bview &v, int64_t nw) {
    const char *what = op_name(k->node->op);
    if (k->din[0]) {
        grad_ew_binary<0> f;
        f.din = k->din[0], f.kind = kind, f.dout = k->dout, f.a = k->in[0], f.b = k->in[1];
        gather(k, what, v, 0, ts_shape_numel(&k->in_shape[0]), nw, f);
    }
    if (k->din[1]) {
        grad_ew_binary<1> f;
        f.din = k->din[1], f.kind = kind, f.dout = k->dout, f.a = k->in[0], f.b = k->in[1];
        gather(k, what, v, 1, ts_shape_numel(&k->in_shape[1]), nw, f);
    }
}

template <int KIND>
static void binary_backward(const ts_kctx *k, const bview &v, int64_t nw) {
    const char *what = op_name(k->node->op);
    if (k->din[0]) {
        grad_binary<KIND, 0> f;
        f.din = k->din[0], f.dout = k->dout, f.a = k->in[0], f.b = k->in[1];
        gather(k, what, v, 0, ts_shape_numel(&k->in_shape[0]), nw, f);
    }
    if (k->din[1]) {
        grad_binary<KIND, 1> f;
        f.din = k->din[1], f.dout = k->dout, f.a = k->in[0], f.b = k->in[1];
        gather(k, what, v, 1, ts_shape_numel(&k->in_shape[1]), nw, f);
    }
}

void ts_cu_bwd_broadcast_binary(const ts_kctx *k) {
    const ts_shape *ops[2] = {&k->in_shape[0], &k->in_shape[1]};
    bview v = bview_of(&k->out_shape, 2, ops);
    int64_t nw = ts_shape_numel(&k->out_shape);
    if (ts_ewb_kind(k->node->op) != TS_EWB_NONE) {
        ew_binary_backward(k, ts_ewb_kind(k->node->op), v, nw);
        return;
    }
    switch (bin_kind(k->node->op)) {
    case BIN_ADD: binary_backward<BIN_ADD>(k, v, nw); break;
    case BIN_SUB: binary_backward<BIN_SUB>(k, v, nw); break;
    case BIN_MUL: binary_backward<BIN_MUL>(k, v, nw); break;
    default: binary_backward<BIN_DIV>(k, v, nw); break;
    }
}

/* ------------------------------------------------------------------ where */

/* the condition: i32, or (cond NULL) f32 (TS_OP_SELECT) */
__device__ inline bool where_true(const int32_t *cond, const float *fcond, int64_t i) { return cond ? cond[i] != 0 : fcond[i] != 0.0f; }

/* out[n] = cond ? a : b, the three read through the view (operands 0..2) */
__global__ void where_forward_kernel(float *out, const int32_t *cond, const float *fcond, const float *a, const float *b, bview v, int64_t n) {
    TS_CU_FOR(i, n) {
        int64_t off[3];
        bv_offsets<3>(v, i, off);
        out[i] = where_true(cond, fcond, off[0]) ? a[off[1]] : b[off[2]];
    }
}

void ts_cu_fwd_where(const ts_kctx *k) {
    const ts_shape *ops[3] = {&k->in_shape[0], &k->in_shape[1], &k->in_shape[2]};
    bview v = bview_of(&k->out_shape, 3, ops);
    int64_t n = ts_shape_numel(&k->out_shape);
    if (n <= 0) return;
    where_forward_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->out, k->in_int[0], k->in[0], k->in[1], k->in[2], v, n);
    ts_cu_check(cudaGetLastError(), "Where");
}

/* a's gradient where cond holds, b's where it does not (WHICH: 1 a, 2 b) */
template <int WHICH>
struct grad_where : grad_sum {
    const float *dout;
    const int32_t *cond;
    const float *fcond;
    __device__ float term(int64_t, int64_t o, const int64_t *off) const {
        bool t = where_true(cond, fcond, off[0]);
        return t == (WHICH == 1) ? dout[o] : 0.0f;
    }
};

void ts_cu_bwd_where(const ts_kctx *k) {
    const ts_shape *ops[3] = {&k->in_shape[0], &k->in_shape[1], &k->in_shape[2]};
    bview v = bview_of(&k->out_shape, 3, ops);
    int64_t nw = ts_shape_numel(&k->out_shape);
    if (k->din[1]) {
        grad_where<1> f;
        f.din = k->din[1], f.dout = k->dout, f.cond = k->in_int[0], f.fcond = k->in[0];
        gather(k, "Where", v, 1, ts_shape_numel(&k->in_shape[1]), nw, f);
    }
    if (k->din[2]) {
        grad_where<2> f;
        f.din = k->din[2], f.dout = k->dout, f.cond = k->in_int[0], f.fcond = k->in[0];
        gather(k, "Where", v, 2, ts_shape_numel(&k->in_shape[2]), nw, f);
    }
}

/* ------------------------------------------------------------ masked fill */

/* out[n] = mask ? value : x; x has the output's shape, the mask broadcasts
 * (view operand 0) */
__global__ void masked_fill_forward_kernel(float *out, const float *x, const int32_t *mask, float value, bview v, int64_t n) {
    TS_CU_FOR(i, n) {
        int64_t off[1];
        bv_offsets<1>(v, i, off);
        out[i] = mask[off[0]] ? value : x[i];
    }
}

/* dx[n] += dout where the mask is 0 (left as is where it is set) */
__global__ void masked_fill_backward_kernel(float *dx, const float *dout, const int32_t *mask, bview v, int64_t n) {
    TS_CU_FOR(i, n) {
        int64_t off[1];
        bv_offsets<1>(v, i, off);
        if (!mask[off[0]]) dx[i] += dout[i];
    }
}

void ts_cu_fwd_masked_fill(const ts_kctx *k) {
    const ts_shape *ops[1] = {&k->in_shape[1]};
    bview v = bview_of(&k->out_shape, 1, ops);
    int64_t n = ts_shape_numel(&k->out_shape);
    if (n <= 0) return;
    masked_fill_forward_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->out, k->in[0], k->in_int[1],
                                                                                       k->node->fattr[0], v, n);
    ts_cu_check(cudaGetLastError(), "MaskedFill");
}

void ts_cu_bwd_masked_fill(const ts_kctx *k) {
    if (!k->din[0]) return;
    const ts_shape *ops[1] = {&k->in_shape[1]};
    bview v = bview_of(&k->out_shape, 1, ops);
    int64_t n = ts_shape_numel(&k->out_shape);
    if (n <= 0) return;
    masked_fill_backward_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->din[0], k->dout, k->in_int[1], v, n);
    ts_cu_check(cudaGetLastError(), "MaskedFill");
}

/* ---------------------------------------------------- reductions over axes */

static int red_kind(ts_op op) { return op == TS_OP_REDUCE_SUM_AXES ? RED_SUM : op == TS_OP_REDUCE_MEAN_AXES ? RED_MEAN : RED_MAX; }

/* x's shape with the reduced dims (attr[0]'s bits) as 1: the output's
 * layout, keepdim or not (graph/ops_tensor.c's ts_reduce_kept_shape) */
static ts_shape kept_shape(const ts_kctx *k) {
    ts_shape r = k->in_shape[0];
    for (int i = 0; i < r.ndim; i++)
        if ((k->node->attr[0] >> i) & 1) r.d[i] = 1;
    return r;
}

/* sum and mean: out[e] = (sum of its x, in x's order) * scale (mean:
 * nr / nx in float, as the CPU; sum: not multiplied) */
template <bool MEAN>
struct red_sum {
    float *out;
    const float *x;
    float scale;
    __device__ float init(int64_t) const { return 0.0f; }
    __device__ float ident() const { return 0.0f; }
    __device__ float term(int64_t, int64_t o, const int64_t *) const { return x[o]; }
    __device__ float comb(float a, float b) const { return __fadd_rn(a, b); }
    __device__ void done(int64_t e, float acc) const { out[e] = MEAN ? __fmul_rn(acc, scale) : acc; }
};

/* max from -inf; a NaN wins and stays (the CPU's `x > m || isnan(x)`) */
struct red_max {
    float *out;
    const float *x;
    __device__ float init(int64_t) const { return -INFINITY; }
    __device__ float ident() const { return -INFINITY; }
    __device__ float term(int64_t, int64_t o, const int64_t *) const { return x[o]; }
    __device__ float comb(float m, float t) const { return t > m || isnan(t) ? t : m; }
    __device__ void done(int64_t e, float acc) const { out[e] = acc; }
};

void ts_cu_fwd_reduce_axes(const ts_kctx *k) {
    ts_shape r = kept_shape(k);
    const ts_shape *ops[1] = {&r};
    bview v = bview_of(&k->in_shape[0], 1, ops); /* walks x; operand 0: out */
    int64_t nr = ts_shape_numel(&r), nx = ts_shape_numel(&k->in_shape[0]);
    const char *what = op_name(k->node->op);
    switch (red_kind(k->node->op)) {
    case RED_SUM: {
        red_sum<false> f = {k->out, k->in[0], 1.0f};
        gather(k, what, v, 0, nr, nx, f);
        break;
    }
    case RED_MEAN: {
        red_sum<true> f = {k->out, k->in[0], (float)nr / (float)nx};
        gather(k, what, v, 0, nr, nx, f);
        break;
    }
    default: {
        red_max f = {k->out, k->in[0]};
        gather(k, what, v, 0, nr, nx, f);
        break;
    }
    }
}

/* dx[nx] += scale * dout (sum, mean) or, for max, dout where x equals the
 * maximum (every such element); out and dout read through the view */
template <bool MAX>
__global__ void reduce_backward_kernel(float *dx, const float *dout, const float *x, const float *y, float scale, bview v, int64_t n) {
    TS_CU_FOR(i, n) {
        int64_t off[1];
        bv_offsets<1>(v, i, off);
        if (MAX) {
            if (x[i] == y[off[0]]) dx[i] += dout[off[0]];
        } else {
            dx[i] = __fadd_rn(dx[i], __fmul_rn(scale, dout[off[0]]));
        }
    }
}

void ts_cu_bwd_reduce_axes(const ts_kctx *k) {
    if (!k->din[0]) return;
    ts_shape r = kept_shape(k);
    const ts_shape *ops[1] = {&r};
    bview v = bview_of(&k->in_shape[0], 1, ops);
    int64_t nr = ts_shape_numel(&r), nx = ts_shape_numel(&k->in_shape[0]);
    if (nx <= 0) return;
    int kind = red_kind(k->node->op);
    float scale = kind == RED_MEAN ? (float)nr / (float)nx : 1.0f;
    dim3 g(ts_cu_blocks(nx)), b(TS_CU_THREADS);
    if (kind == RED_MAX)
        reduce_backward_kernel<true><<<g, b, 0, ts_cu_stream(k)>>>(k->din[0], k->dout, k->in[0], k->out, scale, v, nx);
    else
        reduce_backward_kernel<false><<<g, b, 0, ts_cu_stream(k)>>>(k->din[0], k->dout, k->in[0], k->out, scale, v, nx);
    ts_cu_check(cudaGetLastError(), op_name(k->node->op));
}

/* ---------------------------------------------------------- dropout mask */

/* splitmix64's finaliser, as cnn.c's mix64 */
static __host__ __device__ inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* mask[n]: element i draws the high 32 bits of mix64(key + i * golden) and
 * is dropped (0) below the threshold, else keep_scale: counter-based, so
 * the same bits as the CPU whatever the split */
__global__ void dropout_mask_kernel(float *mask, int64_t n, uint64_t key, uint32_t threshold, float keep_scale) {
    TS_CU_FOR(i, n) {
        uint32_t r = (uint32_t)(mix64(key + (uint64_t)i * 0x9E3779B97F4A7C15ull) >> 32);
        mask[i] = r < threshold ? 0.0f : keep_scale;
    }
}

/* out[n]: element i the high 24 bits of mix64(key + i * golden), times
 * 2^-24, as ts_random_uniform_fill */
__global__ void random_uniform_kernel(float *out, int64_t n, uint64_t key) {
    TS_CU_FOR(i, n) out[i] = (float)(mix64(key + (uint64_t)i * 0x9E3779B97F4A7C15ull) >> 40) * 0x1.0p-24f;
}

void ts_cu_fwd_random_uniform(const ts_kctx *k) {
    int64_t n = ts_shape_numel(&k->out_shape);
    if (n <= 0) return;
    uint64_t key = mix64((uint64_t)k->node->attr[0] ^ mix64(k->iteration + 0x2545F4914F6CDD1Dull));
    random_uniform_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->out, n, key);
    ts_cu_check(cudaGetLastError(), "RandomUniform");
}

__global__ void fill_kernel(float *y, float value, int64_t n) {
    TS_CU_FOR(i, n) y[i] = value;
}

/* key, threshold and scale are computed here on the host exactly as
 * ts_dropout_mask does (the threshold in double, the scale in float) */
void ts_cu_fwd_dropout_mask(const ts_kctx *k) {
    int64_t n = ts_shape_numel(&k->out_shape);
    if (n <= 0) return;
    if (!k->training) { /* inference: all ones */
        fill_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->out, 1.0f, n);
        ts_cu_check(cudaGetLastError(), "DropoutMask");
        return;
    }
    float prob = k->node->fattr[0];
    uint64_t seed = (uint64_t)k->node->attr[0];
    double t = (double)prob * 4294967296.0;
    uint64_t key = mix64(seed ^ mix64(k->iteration + 0x632BE59BD9B4E019ull));
    uint32_t threshold = t >= 4294967295.0 ? UINT32_MAX : (uint32_t)t;
    float keep_scale = 1.0f / (1.0f - prob);
    dropout_mask_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->out, n, key, threshold, keep_scale);
    ts_cu_check(cudaGetLastError(), "DropoutMask");
}
