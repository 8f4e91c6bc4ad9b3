/* kernels_cnn.cu -- the CUDA kernel rows of the convolutional ops, each the
 * twin of the CPU's of the same name (backend/cpu/adapters_cnn.c, cnn.c).
 *
 * conv2d is im2col + GEMM over chunks of samples: the chunk's columns
 * [nc, C*KH*KW, OH*OW] are built in the workspace and multiplied by the
 * weight in strided batches (over samples, or over groups where there are
 * more groups than samples). The backward pass rebuilds the columns, takes
 * each sample's dW into the workspace and sums them in sample order
 * (deterministic, no atomics), then overwrites the columns with W^T dY and
 * gathers them back into dx (col2im as a gather: each input element sums
 * the taps that read it). A 1x1 convolution with stride 1 and no padding
 * uses the input as its columns.
 *
 * Pooling backward passes are gathers too (each input element walks the
 * windows that can hold it, in the CPU's order), batch norm and the global
 * pool reduce one channel / plane per block in double. */
#include "backend/cuda/adapters.h"

extern "C" {
#include "graph/cnn_ops.h"
}

#include "backend/conv3d_math.h"

#include <math.h>

/* ------------------------------------------------------------- helpers */

/* Geometry of a conv or pooling window over NCHW, as the CPU's ts_conv_geom. */
struct cu_geom {
    int64_t N, C, H, W;
    int64_t OC, OH, OW;
    int64_t KH, KW;
    int64_t SH, SW;
    int64_t PT, PL;
    int64_t DH, DW;
    int64_t groups;
    int64_t PB, PR; /* pooling's divisor */
};

static cu_geom conv_geom(const ts_kctx *k) {
    const int64_t *at = k->node->attr;
    const ts_shape *x = &k->in_shape[0], *w = &k->in_shape[1], *y = &k->out_shape;
    return cu_geom{x->d[0], x->d[1], x->d[2],  x->d[3],  y->d[1],  y->d[2],  y->d[3],  w->d[2],
                   w->d[3], at[CA_SH], at[CA_SW], at[CA_PT], at[CA_PL], at[CA_DH], at[CA_DW], at[CA_GROUPS], at[CA_PB], at[CA_PR]};
}

static cu_geom pool_geom(const ts_kctx *k) {
    const int64_t *at = k->node->attr;
    const ts_shape *x = &k->in_shape[0], *y = &k->out_shape;
    return cu_geom{x->d[0],   x->d[1],   x->d[2],   x->d[3],   x->d[1],   y->d[2],   y->d[3], at[PA_KH], at[PA_KW],
                   at[CA_SH], at[CA_SW], at[CA_PT], at[CA_PL], at[PA_DH], at[PA_DW], 1,       at[CA_PB], at[CA_PR]};
}

/* Sum of v over the block, returned to every thread. blockDim.x a multiple
 * of 32 (at most 1024); sh: 33 doubles of shared memory. */
__device__ static double block_sum(double v, double *sh) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    __syncthreads(); /* sh may still be read from a previous call */
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < nw ? sh[lane] : 0.0;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
        if (lane == 0) sh[32] = v;
    }
    __syncthreads();
    return sh[32];
}

/* --------------------------------------------------------------- conv2d */

/* The workspace: a chunk of nc samples' columns [nc, C*KK, OHW] and their
 * per-sample dW [nc, OC*C/groups*KK]. nc: as many samples as fit under
 * CONV_CAP floats (at least one); from the shapes alone. */
#define CONV_CAP ((int64_t)1 << 23)

static int64_t conv_cols_per_sample(const cu_geom &g) { return g.C * g.KH * g.KW * g.OH * g.OW; }
static int64_t conv_dw_floats(const cu_geom &g) { return g.OC * (g.C / g.groups) * g.KH * g.KW; }

static int64_t conv_chunk(const cu_geom &g) {
    int64_t per = conv_cols_per_sample(g) + conv_dw_floats(g), nc = per > 0 ? CONV_CAP / per : g.N;
    return nc < 1 ? 1 : nc > g.N ? g.N : nc;
}

size_t ts_cu_workspace_conv2d(const ts_shape *in, const ts_dtype *in_dtype, const ts_shape *out, int threads) {
    (void)in_dtype;
    (void)threads;
    cu_geom g = {};
    g.N = in[0].d[0], g.C = in[0].d[1], g.H = in[0].d[2], g.W = in[0].d[3];
    g.KH = in[1].d[2], g.KW = in[1].d[3], g.OC = out->d[1], g.OH = out->d[2], g.OW = out->d[3];
    g.groups = in[1].d[1] > 0 ? in[0].d[1] / in[1].d[1] : 1; /* w is [OC, C/groups, KH, KW] */
    if (g.groups < 1) g.groups = 1;
    return (size_t)(conv_chunk(g) * (conv_cols_per_sample(g) + conv_dw_floats(g)));
}

/* The input is its own columns: 1x1, stride 1, no padding. */
static bool conv_direct(const cu_geom &g) {
    return g.KH == 1 && g.KW == 1 && g.SH == 1 && g.SW == 1 && g.PT == 0 && g.PL == 0 && g.OH == g.H && g.OW == g.W;
}

/* col[nn, (c, ki, kj), oh*OW + ow] = x[nn, c, oh*SH - PT + ki*DH, ow*SW - PL + kj*DW]
 * (0 in the padding), nn < nc samples from x (already offset to the chunk) */
__global__ static void im2col_kernel(float *col, const float *x, cu_geom g, int64_t nc) {
    int64_t OHW = g.OH * g.OW, KK = g.KH * g.KW, total = nc * g.C * KK * OHW;
    TS_CU_FOR(i, total) {
        int64_t p = i % OHW, r = i / OHW; /* r = (nn*C + c)*KK + kk */
        int64_t kk = r % KK, nc_ = r / KK;  /* nc_ = nn*C + c */
        int64_t oh = p / g.OW, ow = p % g.OW, ki = kk / g.KW, kj = kk % g.KW;
        int64_t ih = oh * g.SH - g.PT + ki * g.DH, iw = ow * g.SW - g.PL + kj * g.DW;
        col[i] = ih >= 0 && ih < g.H && iw >= 0 && iw < g.W ? x[(nc_ * g.H + ih) * g.W + iw] : 0.0f;
    }
}

/* dx[nn, c, ih, iw] += sum over the taps (ki, kj) that read it of
 * col[nn, (c, ki, kj), oh*OW + ow]: col2im as a gather, no atomics */
__global__ static void col2im_kernel(float *dx, const float *col, cu_geom g, int64_t nc) {
    int64_t OHW = g.OH * g.OW, KK = g.KH * g.KW, total = nc * g.C * g.H * g.W;
    TS_CU_FOR(i, total) {
        int64_t iw = i % g.W, ih = (i / g.W) % g.H, nc_ = i / (g.H * g.W); /* nc_ = nn*C + c */
        const float *cp = col + nc_ * KK * OHW;
        float acc = 0.0f;
        for (int64_t ki = 0; ki < g.KH; ki++) {
            int64_t th = ih + g.PT - ki * g.DH;
            if (th < 0 || th % g.SH) continue;
            int64_t oh = th / g.SH;
            if (oh >= g.OH) continue;
            for (int64_t kj = 0; kj < g.KW; kj++) {
                int64_t tw = iw + g.PL - kj * g.DW;
                if (tw < 0 || tw % g.SW) continue;
                int64_t ow = tw / g.SW;
                if (ow >= g.OW) continue;
                acc += cp[(ki * g.KW + kj) * OHW + oh * g.OW + ow];
            }
        }
        dx[i] += acc;
    }
}

/* y[n, oc, :] += b[oc], y [N, OC, OHW] */
__global__ static void bias_add_kernel(float *y, const float *b, int64_t total, int64_t OC, int64_t OHW) {
    TS_CU_FOR(i, total) y[i] += b[(i / OHW) % OC];
}

/* db[oc] += sum over n, p of dy[n, oc, p]; one block per channel, dy [N, OC, OHW] */
__global__ static void bias_grad_kernel(float *db, const float *dy, int64_t N, int64_t OC, int64_t OHW) {
    __shared__ double sh[33];
    int64_t oc = blockIdx.x;
    double s = 0;
    for (int64_t e = threadIdx.x; e < N * OHW; e += blockDim.x) s += dy[((e / OHW) * OC + oc) * OHW + e % OHW];
    s = block_sum(s, sh);
    if (threadIdx.x == 0) db[oc] += (float)s;
}

/* dw[i] += sum over nn < nc of part[nn, i] (in sample order), part [nc, n] */
__global__ static void sum_partials_kernel(float *dw, const float *part, int64_t n, int64_t nc) {
    TS_CU_FOR(i, n) {
        double s = 0;
        for (int64_t j = 0; j < nc; j++) s += part[j * n + i];
        dw[i] += (float)s;
    }
}

/* count x G products C = beta C + op(A) op(B), operand (sample j, group q)
 * at A + j*an + q*ag (the same for B, C): strided batches over the larger
 * of the two, a loop over the smaller */
static void gemm_grid(const ts_kctx *k, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t an, int64_t ag,
                      const float *B, int64_t bn, int64_t bg, float beta, float *C, int64_t cn, int64_t cg, int64_t count, int64_t G) {
    if (G <= count)
        for (int64_t q = 0; q < G; q++) ts_cu_gemm_strided(k, ta, tb, M, N, K, A + q * ag, an, B + q * bg, bn, beta, C + q * cg, cn, count);
    else
        for (int64_t j = 0; j < count; j++) ts_cu_gemm_strided(k, ta, tb, M, N, K, A + j * an, ag, B + j * bn, bg, beta, C + j * cn, cg, G);
}

/* y[N,OC,OH,OW] = x[N,C,H,W] (*) w[OC,C/groups,KH,KW] (+ b[OC]), or with
 * beta 1 y += that */
static void conv_forward(const ts_kctx *k, const cu_geom &g, float *y, const float *x, const float *w, const float *b, float beta) {
    cudaStream_t s = ts_cu_stream(k);
    int64_t OHW = g.OH * g.OW, HW = g.H * g.W, CKK = g.C * g.KH * g.KW, CgKK = CKK / g.groups, OCg = g.OC / g.groups;
    int64_t nc = conv_chunk(g), colsz = conv_cols_per_sample(g);
    bool direct = conv_direct(g);
    for (int64_t n0 = 0; n0 < g.N; n0 += nc) {
        int64_t cnt = g.N - n0 < nc ? g.N - n0 : nc;
        const float *cols = x + n0 * g.C * HW; /* direct: [C, HW] = [CKK, OHW] per sample */
        if (!direct) {
            im2col_kernel<<<ts_cu_blocks(cnt * colsz), TS_CU_THREADS, 0, s>>>(k->workspace, cols, g, cnt);
            ts_cu_check(cudaGetLastError(), "Conv2d");
            cols = k->workspace;
        }
        /* y_n,q [OCg, OHW] = W_q [OCg, CgKK] x cols_n,q [CgKK, OHW] */
        gemm_grid(k, false, false, OCg, OHW, CgKK, w, 0, OCg * CgKK, cols, colsz, CgKK * OHW, beta, y + n0 * g.OC * OHW, g.OC * OHW,
                  OCg * OHW, cnt, g.groups);
    }
    if (b) {
        int64_t total = g.N * g.OC * OHW;
        bias_add_kernel<<<ts_cu_blocks(total), TS_CU_THREADS, 0, s>>>(y, b, total, g.OC, OHW);
        ts_cu_check(cudaGetLastError(), "Conv2d");
    }
}

void ts_cu_fwd_conv2d(const ts_kctx *k) { conv_forward(k, conv_geom(k), k->out, k->in[0], k->in[1], k->n_in == 3 ? k->in[2] : NULL, 0.0f); }

/* dx += conv^T(dy, w), dw += dy (*) x, db += sum dy (each may be NULL) */
static void conv_backward(const ts_kctx *k, const cu_geom &g, float *dx, float *dw, float *db, const float *dy, const float *x,
                          const float *w) {
    cudaStream_t s = ts_cu_stream(k);
    int64_t OHW = g.OH * g.OW, HW = g.H * g.W, CKK = g.C * g.KH * g.KW, CgKK = CKK / g.groups, OCg = g.OC / g.groups;
    int64_t nc = conv_chunk(g), colsz = conv_cols_per_sample(g), wn = conv_dw_floats(g);
    bool direct = conv_direct(g);
    if (db) {
        bias_grad_kernel<<<(unsigned)g.OC, TS_CU_THREADS, 0, s>>>(db, dy, g.N, g.OC, OHW);
        ts_cu_check(cudaGetLastError(), "Conv2d");
    }
    if (!dx && !dw) return;
    float *col = k->workspace, *dwp = k->workspace + nc * colsz;
    for (int64_t n0 = 0; n0 < g.N; n0 += nc) {
        int64_t cnt = g.N - n0 < nc ? g.N - n0 : nc;
        const float *dyc = dy + n0 * g.OC * OHW;
        if (dw) {
            const float *cols = x + n0 * g.C * HW;
            if (!direct) {
                im2col_kernel<<<ts_cu_blocks(cnt * colsz), TS_CU_THREADS, 0, s>>>(col, cols, g, cnt);
                ts_cu_check(cudaGetLastError(), "Conv2d");
                cols = col;
            }
            /* dW_n,q [OCg, CgKK] = dy_n,q [OCg, OHW] x cols_n,q^T, one per sample, summed in order */
            gemm_grid(k, false, true, OCg, CgKK, OHW, dyc, g.OC * OHW, OCg * OHW, cols, colsz, CgKK * OHW, 0.0f, dwp, wn, OCg * CgKK, cnt,
                      g.groups);
            sum_partials_kernel<<<ts_cu_blocks(wn), TS_CU_THREADS, 0, s>>>(dw, dwp, wn, cnt);
            ts_cu_check(cudaGetLastError(), "Conv2d");
        }
        if (!dx) continue;
        /* cols_n,q [CgKK, OHW] = W_q^T [CgKK, OCg] x dy_n,q [OCg, OHW]; direct: straight into dx */
        float *dst = direct ? dx + n0 * g.C * HW : col;
        gemm_grid(k, true, false, CgKK, OHW, OCg, w, 0, OCg * CgKK, dyc, g.OC * OHW, OCg * OHW, direct ? 1.0f : 0.0f, dst, colsz,
                  CgKK * OHW, cnt, g.groups);
        if (direct) continue;
        col2im_kernel<<<ts_cu_blocks(cnt * g.C * HW), TS_CU_THREADS, 0, s>>>(dx + n0 * g.C * HW, col, g, cnt);
        ts_cu_check(cudaGetLastError(), "Conv2d");
    }
}

void ts_cu_bwd_conv2d(const ts_kctx *k) {
    conv_backward(k, conv_geom(k), k->din[0], k->din[1], k->n_in == 3 ? k->din[2] : NULL, k->dout, k->in[0], k->in[1]);
}

/* ConvTranspose2d x [N,C,H,W] -> y [N,OC,OH,OW] as the convolution it
 * transposes (the CPU's transposed_geom): y's shape -> x's, same weight */
static cu_geom transposed_geom(const ts_kctx *k) {
    const int64_t *at = k->node->attr;
    const ts_shape *x = &k->in_shape[0], *w = &k->in_shape[1], *y = &k->out_shape;
    return cu_geom{x->d[0], y->d[1],   y->d[2],   y->d[3],   x->d[1],   x->d[2],   x->d[3],        w->d[2], w->d[3],
                   at[CA_SH], at[CA_SW], at[CA_PT], at[CA_PL], at[CA_DH], at[CA_DW], at[CA_GROUPS], 0,       0};
}

size_t ts_cu_workspace_conv_transpose2d(const ts_shape *in, const ts_dtype *in_dtype, const ts_shape *out, int threads) {
    (void)in_dtype;
    (void)threads;
    cu_geom g = {};
    g.N = in[0].d[0], g.C = out->d[1], g.H = out->d[2], g.W = out->d[3];
    g.KH = in[1].d[2], g.KW = in[1].d[3], g.OC = in[0].d[1], g.OH = in[0].d[2], g.OW = in[0].d[3];
    g.groups = in[1].d[1] > 0 ? out->d[1] / in[1].d[1] : 1; /* w is [C, OC/groups, KH, KW] */
    if (g.groups < 1) g.groups = 1;
    return (size_t)(conv_chunk(g) * (conv_cols_per_sample(g) + conv_dw_floats(g)));
}

/* y = conv^T(x, w) + b: the convolution's input gradient into a zeroed y */
void ts_cu_fwd_conv_transpose2d(const ts_kctx *k) {
    cu_geom g = transposed_geom(k);
    cudaStream_t s = ts_cu_stream(k);
    int64_t n = g.N * g.C * g.H * g.W, HW = g.H * g.W;
    ts_cu_check(cudaMemsetAsync(k->out, 0, (size_t)n * sizeof(float), s), "ConvTranspose2d");
    conv_backward(k, g, k->out, NULL, NULL, k->in[0], NULL, k->in[1]);
    if (k->n_in == 3) {
        bias_add_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, s>>>(k->out, k->in[2], n, g.C, HW);
        ts_cu_check(cudaGetLastError(), "ConvTranspose2d");
    }
}

/* dx += conv(dy, w), dw += the convolution's weight gradient with x as
 * its output's, db += sum dy */
void ts_cu_bwd_conv_transpose2d(const ts_kctx *k) {
    cu_geom g = transposed_geom(k);
    cudaStream_t s = ts_cu_stream(k);
    float *db = k->n_in == 3 ? k->din[2] : NULL;
    if (db) {
        bias_grad_kernel<<<(unsigned)g.C, TS_CU_THREADS, 0, s>>>(db, k->dout, g.N, g.C, g.H * g.W);
        ts_cu_check(cudaGetLastError(), "ConvTranspose2d");
    }
    if (k->din[1]) conv_backward(k, g, NULL, k->din[1], NULL, k->in[0], k->dout, k->in[1]);
    if (k->din[0]) conv_forward(k, g, k->din[0], k->dout, k->in[1], NULL, 1.0f);
}

/* --------------------------------------------------------------- conv3d */

/* out[i] (+)= one of conv3d_math.h's elements, one thread an element (the
 * CPU's c3_elements) */
enum c3_kind { C3_Y, C3_DX, C3_DW, C3_BIAS };
__global__ static void conv3d_kernel(ts_conv3d_geom g, c3_kind kind, float *out, const float *a, const float *b, const float *bias,
                                     int64_t C, int64_t S, bool accumulate, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)blockDim.x * gridDim.x) {
        float v = kind == C3_Y    ? ts_conv3d_y_at(&g, a, b, i)
                  : kind == C3_DX ? ts_conv3d_dx_at(&g, a, b, i)
                  : kind == C3_DW ? ts_conv3d_dw_at(&g, a, b, i)
                                  : ts_conv3d_channel_sum(a, g.N, C, S, i);
        if (bias) v += bias[i / S % C];
        out[i] = accumulate ? out[i] + v : v;
    }
}

static void conv3d_run(const ts_kctx *k, const ts_conv3d_geom &g, c3_kind kind, float *out, const float *a, const float *b,
                       const float *bias, int64_t C, int64_t S, bool accumulate, int64_t n) {
    if (!out || n <= 0) return;
    conv3d_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(g, kind, out, a, b, bias, C, S, accumulate, n);
    ts_cu_check(cudaGetLastError(), k->node->op == TS_OP_CONV3D ? "Conv3d" : "ConvTranspose3d");
}

static ts_conv3d_geom conv3d_geom(const ts_kctx *k) {
    return ts_conv3d_geom_of(k->node->attr, &k->in_shape[0], &k->in_shape[1], &k->out_shape, k->node->op == TS_OP_CONV_TRANSPOSE3D);
}

/* Conv3d: y = conv(x, w) + b; ConvTranspose3d: y = the convolution's input gradient of x, + b */
void ts_cu_fwd_conv3d(const ts_kctx *k) {
    ts_conv3d_geom g = conv3d_geom(k);
    const float *b = k->n_in == 3 ? k->in[2] : NULL;
    int64_t S_in = g.in[0] * g.in[1] * g.in[2], S_out = g.out[0] * g.out[1] * g.out[2];
    if (k->node->op == TS_OP_CONV3D) conv3d_run(k, g, C3_Y, k->out, k->in[0], k->in[1], b, g.OC, S_out, false, g.N * g.OC * S_out);
    else conv3d_run(k, g, C3_DX, k->out, k->in[0], k->in[1], b, g.C, S_in, false, g.N * g.C * S_in);
}

/* Conv3d: dx += conv^T(dy, w), dw, db; ConvTranspose3d: dx += conv(dy, w),
 * dw with x as the convolution's output gradient, db */
void ts_cu_bwd_conv3d(const ts_kctx *k) {
    ts_conv3d_geom g = conv3d_geom(k);
    float *db = k->n_in == 3 ? k->din[2] : NULL;
    int64_t S_in = g.in[0] * g.in[1] * g.in[2], S_out = g.out[0] * g.out[1] * g.out[2], nw = g.OC * (g.C / g.G) * g.k[0] * g.k[1] * g.k[2];
    if (k->node->op == TS_OP_CONV3D) {
        conv3d_run(k, g, C3_DX, k->din[0], k->dout, k->in[1], NULL, g.C, S_in, true, g.N * g.C * S_in);
        conv3d_run(k, g, C3_DW, k->din[1], k->dout, k->in[0], NULL, 1, 1, true, nw);
        conv3d_run(k, g, C3_BIAS, db, k->dout, NULL, NULL, g.OC, S_out, true, g.OC);
    } else {
        conv3d_run(k, g, C3_Y, k->din[0], k->dout, k->in[1], NULL, g.OC, S_out, true, g.N * g.OC * S_out);
        conv3d_run(k, g, C3_DW, k->din[1], k->in[0], k->dout, NULL, 1, 1, true, nw);
        conv3d_run(k, g, C3_BIAS, db, k->dout, NULL, NULL, g.C, S_in, true, g.C);
    }
}

/* -------------------------------------------------------------- pooling */

/* The outputs whose window (K taps D apart from o*S - P) spans input
 * position i of an axis: [*lo, *hi) within [0, O); with D > 1 a tap lands
 * on i only where (i + P - o*S) % D == 0. */
__device__ static void windows_over(int64_t i, int64_t S, int64_t P, int64_t K, int64_t D, int64_t O, int64_t *lo, int64_t *hi) {
    int64_t t = i + P - (K - 1) * D;
    *lo = t <= 0 ? 0 : (t + S - 1) / S;
    *hi = (i + P) / S + 1; /* i + P >= 0 */
    if (*hi > O) *hi = O;
    if (*hi < *lo) *hi = *lo;
}

/* The in-bounds taps [lo, hi) of the window from o*S - P (K taps D apart) on an axis of `size`. */
__device__ static void taps_in(int64_t o, int64_t S, int64_t P, int64_t K, int64_t D, int64_t size, int64_t *lo, int64_t *hi) {
    int64_t first = o * S - P;
    *lo = first < 0 ? (-first + D - 1) / D : 0;
    *hi = first > size - 1 ? 0 : (size - 1 - first) / D + 1;
    if (*hi > K) *hi = K;
    if (*hi < *lo) *hi = *lo;
}

/* y[N,C,OH,OW] = max over each window of x[N,C,H,W]; idx keeps the
 * winner's index within the plane (-1: padding only). The CPU's rule: a
 * strictly greater value or a NaN takes over (ties keep the first in
 * row-major order, the last NaN wins); padding is never a candidate. */
__global__ static void max_pool_fwd_kernel(float *y, int32_t *idx, const float *x, cu_geom g) {
    int64_t total = g.N * g.C * g.OH * g.OW;
    TS_CU_FOR(i, total) {
        int64_t ow = i % g.OW, oh = (i / g.OW) % g.OH, q = i / (g.OH * g.OW);
        const float *plane = x + q * g.H * g.W;
        int64_t ki0, ki1, kj0, kj1, ih0 = oh * g.SH - g.PT, iw0 = ow * g.SW - g.PL, best_i = -1;
        taps_in(oh, g.SH, g.PT, g.KH, g.DH, g.H, &ki0, &ki1);
        taps_in(ow, g.SW, g.PL, g.KW, g.DW, g.W, &kj0, &kj1);
        float best = -INFINITY;
        for (int64_t ki = ki0; ki < ki1; ki++)
            for (int64_t kj = kj0; kj < kj1; kj++) {
                int64_t at = (ih0 + ki * g.DH) * g.W + iw0 + kj * g.DW;
                float v = plane[at];
                if (best_i < 0 || v > best || v != v) best = v, best_i = at;
            }
        y[i] = best;
        idx[i] = (int32_t)best_i;
    }
}

/* dx[q, ih, iw] += dy[q, o] for each window o (in order) that idx says it won */
__global__ static void max_pool_bwd_kernel(float *dx, const float *dy, const int32_t *idx, cu_geom g) {
    int64_t total = g.N * g.C * g.H * g.W;
    TS_CU_FOR(i, total) {
        int64_t iw = i % g.W, ih = (i / g.W) % g.H, q = i / (g.H * g.W), me = ih * g.W + iw;
        int64_t oh0, oh1, ow0, ow1;
        windows_over(ih, g.SH, g.PT, g.KH, g.DH, g.OH, &oh0, &oh1);
        windows_over(iw, g.SW, g.PL, g.KW, g.DW, g.OW, &ow0, &ow1);
        const float *d = dy + q * g.OH * g.OW;
        const int32_t *at = idx + q * g.OH * g.OW;
        float acc = dx[i];
        for (int64_t oh = oh0; oh < oh1; oh++)
            for (int64_t ow = ow0; ow < ow1; ow++)
                if (at[oh * g.OW + ow] == me) acc += d[oh * g.OW + ow];
        dx[i] = acc;
    }
}

void ts_cu_fwd_max_pool2d(const ts_kctx *k) {
    cu_geom g = pool_geom(k);
    int64_t total = g.N * g.C * g.OH * g.OW;
    max_pool_fwd_kernel<<<ts_cu_blocks(total), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->out, (int32_t *)(void *)k->scratch, k->in[0], g);
    ts_cu_check(cudaGetLastError(), "MaxPool2d");
}

/* out[q, o] = the winner idx[q, o] as a flat index into x, as the CPU's ts_max_pool_flat_indices */
__global__ static void flat_indices_kernel(float *out, const int32_t *idx, cu_geom g, bool column_major) {
    int64_t OHW = g.OH * g.OW, HW = g.H * g.W, total = g.N * g.C * OHW;
    TS_CU_FOR(o, total) {
        int64_t a = idx[o];
        out[o] = a < 0 ? -1.0f : (float)(o / OHW * HW + (column_major ? a / g.W + a % g.W * g.H : a));
    }
}

void ts_cu_fwd_max_pool2d_indices(const ts_kctx *k) {
    ts_cu_fwd_max_pool2d(k);
    cu_geom g = pool_geom(k);
    int64_t total = g.N * g.C * g.OH * g.OW;
    flat_indices_kernel<<<ts_cu_blocks(total), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->out, (const int32_t *)(const void *)k->scratch, g,
                                                                                   k->node->attr[PA_COLUMN_MAJOR] != 0);
    ts_cu_check(cudaGetLastError(), "MaxPool2dIndices");
}

void ts_cu_bwd_max_pool2d(const ts_kctx *k) {
    if (!k->din[0]) return;
    cu_geom g = pool_geom(k);
    int64_t total = g.N * g.C * g.H * g.W;
    max_pool_bwd_kernel<<<ts_cu_blocks(total), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->din[0], k->dout,
                                                                                   (const int32_t *)(const void *)k->scratch, g);
    ts_cu_check(cudaGetLastError(), "MaxPool2d");
}

/* The window's taps inside the padded input (include_pad) or inside the
 * input (at least 1), as the CPU's avg_divisor */
__device__ static double avg_divisor(const cu_geom &g, int64_t oh, int64_t ow, bool include_pad) {
    int64_t ki0, ki1, kj0, kj1;
    if (include_pad) {
        taps_in(oh, g.SH, 0, g.KH, g.DH, g.H + g.PT + g.PB, &ki0, &ki1);
        taps_in(ow, g.SW, 0, g.KW, g.DW, g.W + g.PL + g.PR, &kj0, &kj1);
    } else {
        taps_in(oh, g.SH, g.PT, g.KH, g.DH, g.H, &ki0, &ki1);
        taps_in(ow, g.SW, g.PL, g.KW, g.DW, g.W, &kj0, &kj1);
    }
    int64_t n = (ki1 - ki0) * (kj1 - kj0);
    return n ? (double)n : 1.0;
}

/* y[N,C,OH,OW] = the window's sum (in double, row-major) / avg_divisor */
__global__ static void avg_pool_fwd_kernel(float *y, const float *x, cu_geom g, bool include_pad) {
    int64_t total = g.N * g.C * g.OH * g.OW;
    TS_CU_FOR(i, total) {
        int64_t ow = i % g.OW, oh = (i / g.OW) % g.OH, q = i / (g.OH * g.OW);
        const float *plane = x + q * g.H * g.W;
        int64_t ki0, ki1, kj0, kj1, ih0 = oh * g.SH - g.PT, iw0 = ow * g.SW - g.PL;
        taps_in(oh, g.SH, g.PT, g.KH, g.DH, g.H, &ki0, &ki1);
        taps_in(ow, g.SW, g.PL, g.KW, g.DW, g.W, &kj0, &kj1);
        double s = 0;
        for (int64_t ki = ki0; ki < ki1; ki++)
            for (int64_t kj = kj0; kj < kj1; kj++) s += plane[(ih0 + ki * g.DH) * g.W + iw0 + kj * g.DW];
        y[i] = (float)(s / avg_divisor(g, oh, ow, include_pad));
    }
}

/* dx[q, ih, iw] += (float)(dy[q, o] / divisor(o)) over the windows o that
 * cover it, in the CPU's order */
__global__ static void avg_pool_bwd_kernel(float *dx, const float *dy, cu_geom g, bool include_pad) {
    int64_t total = g.N * g.C * g.H * g.W;
    TS_CU_FOR(i, total) {
        int64_t iw = i % g.W, ih = (i / g.W) % g.H, q = i / (g.H * g.W);
        int64_t oh0, oh1, ow0, ow1;
        windows_over(ih, g.SH, g.PT, g.KH, g.DH, g.OH, &oh0, &oh1);
        windows_over(iw, g.SW, g.PL, g.KW, g.DW, g.OW, &ow0, &ow1);
        const float *d = dy + q * g.OH * g.OW;
        float acc = dx[i];
        for (int64_t oh = oh0; oh < oh1; oh++)
            for (int64_t ow = ow0; ow < ow1; ow++)
                if ((ih + g.PT - oh * g.SH) % g.DH == 0 && (iw + g.PL - ow * g.SW) % g.DW == 0)
                    acc += (float)(d[oh * g.OW + ow] / avg_divisor(g, oh, ow, include_pad));
        dx[i] = acc;
    }
}

void ts_cu_fwd_avg_pool2d(const ts_kctx *k) {
    cu_geom g = pool_geom(k);
    int64_t total = g.N * g.C * g.OH * g.OW;
    avg_pool_fwd_kernel<<<ts_cu_blocks(total), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->out, k->in[0], g,
                                                                                   k->node->attr[PA_EXCLUDE_PAD] == 0);
    ts_cu_check(cudaGetLastError(), "AvgPool2d");
}

void ts_cu_bwd_avg_pool2d(const ts_kctx *k) {
    if (!k->din[0]) return;
    cu_geom g = pool_geom(k);
    int64_t total = g.N * g.C * g.H * g.W;
    avg_pool_bwd_kernel<<<ts_cu_blocks(total), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->din[0], k->dout, g,
                                                                                   k->node->attr[PA_EXCLUDE_PAD] == 0);
    ts_cu_check(cudaGetLastError(), "AvgPool2d");
}

/* y[q] = mean of plane q of x [NC, HW] (double sum); one block per plane */
__global__ static void global_pool_fwd_kernel(float *y, const float *x, int64_t HW) {
    __shared__ double sh[33];
    const float *p = x + (int64_t)blockIdx.x * HW;
    double s = 0;
    for (int64_t i = threadIdx.x; i < HW; i += blockDim.x) s += p[i];
    s = block_sum(s, sh);
    if (threadIdx.x == 0) y[blockIdx.x] = (float)(s / (double)HW);
}

/* dx[q, i] += (float)(dy[q] / HW) */
__global__ static void global_pool_bwd_kernel(float *dx, const float *dy, int64_t total, int64_t HW) {
    TS_CU_FOR(i, total) dx[i] += (float)(dy[i / HW] / (double)HW);
}

void ts_cu_fwd_global_pool(const ts_kctx *k) {
    const ts_shape *x = &k->in_shape[0];
    int64_t NC = x->d[0] * x->d[1], HW = x->d[2] * x->d[3];
    if (NC < 1) return;
    global_pool_fwd_kernel<<<(unsigned)NC, TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->out, k->in[0], HW);
    ts_cu_check(cudaGetLastError(), "GlobalAvgPool");
}

void ts_cu_bwd_global_pool(const ts_kctx *k) {
    if (!k->din[0]) return;
    const ts_shape *x = &k->in_shape[0];
    int64_t total = x->d[0] * x->d[1] * x->d[2] * x->d[3], HW = x->d[2] * x->d[3];
    global_pool_bwd_kernel<<<ts_cu_blocks(total), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->din[0], k->dout, total, HW);
    ts_cu_check(cudaGetLastError(), "GlobalAvgPool");
}

/* ----------------------------------------------------------- batch norm */

/* Batch norm over axis 1 of x viewed as [N, C, inner]; one block per
 * channel c. batch: the batch's mean and biased variance (double sums; the
 * variance about the float mean, as the CPU), and when update the running
 * buffers move by momentum towards the mean and the unbiased variance;
 * else the running values. stats[2C] = (mean, invstd) for the backward.
 * y = (x - mean) * w invstd + b. */
__global__ static void batch_norm_fwd_kernel(float *y, float *stats, const float *x, const float *w, const float *b, float *run_mean,
                                             float *run_var, int64_t N, int64_t C, int64_t inner, float eps, float momentum, bool batch,
                                             bool update) {
    __shared__ double sh[33];
    __shared__ float m_sh, invstd_sh;
    int64_t c = blockIdx.x, M = N * inner;
    if (batch) {
        double s = 0;
        for (int64_t e = threadIdx.x; e < M; e += blockDim.x) s += x[((e / inner) * C + c) * inner + e % inner];
        double mean = block_sum(s, sh) / (double)M;
        float mf = (float)mean;
        double ss = 0;
        for (int64_t e = threadIdx.x; e < M; e += blockDim.x) {
            float d = x[((e / inner) * C + c) * inner + e % inner] - mf;
            ss += (double)d * (double)d;
        }
        ss = block_sum(ss, sh);
        if (threadIdx.x == 0) {
            double var = ss / (double)M;
            if (update) {
                double unbiased = M > 1 ? ss / (double)(M - 1) : var;
                run_mean[c] = (float)((1.0 - momentum) * run_mean[c] + momentum * mean);
                run_var[c] = (float)((1.0 - momentum) * run_var[c] + momentum * unbiased);
            }
            m_sh = mf;
            invstd_sh = (float)(1.0 / sqrt(var + (double)eps));
        }
    } else if (threadIdx.x == 0) {
        m_sh = run_mean[c];
        invstd_sh = (float)(1.0 / sqrt((double)run_var[c] + (double)eps));
    }
    __syncthreads();
    float m = m_sh, invstd = invstd_sh;
    if (threadIdx.x == 0) stats[c] = m, stats[C + c] = invstd;
    float scale = (w ? w[c] : 1.0f) * invstd, shift = b ? b[c] : 0.0f;
    for (int64_t e = threadIdx.x; e < M; e += blockDim.x) {
        int64_t at = ((e / inner) * C + c) * inner + e % inner;
        y[at] = (x[at] - m) * scale + shift;
    }
}

/* dw[c] += sum dy xhat, db[c] += sum dy; batch: dx += w invstd (dy -
 * mean(dy) - xhat mean(dy xhat)), else dx += w invstd dy. One block per channel. */
__global__ static void batch_norm_bwd_kernel(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                                             const float *stats, int64_t N, int64_t C, int64_t inner, bool batch) {
    __shared__ double sh[33];
    int64_t c = blockIdx.x, M = N * inner;
    float m = stats[c], invstd = stats[C + c];
    double sdy = 0, sdyx = 0;
    for (int64_t e = threadIdx.x; e < M; e += blockDim.x) {
        int64_t at = ((e / inner) * C + c) * inner + e % inner;
        float d = dy[at];
        sdy += d;
        sdyx += (double)d * (double)(x[at] - m);
    }
    sdy = block_sum(sdy, sh);
    sdyx = block_sum(sdyx, sh) * invstd;
    if (threadIdx.x == 0) {
        if (dw) dw[c] += (float)sdyx;
        if (db) db[c] += (float)sdy;
    }
    if (!dx) return;
    float kk = (w ? w[c] : 1.0f) * invstd;
    float mdy = batch ? (float)(sdy / (double)M) : 0.0f, mdyx = batch ? (float)(sdyx / (double)M) : 0.0f;
    for (int64_t e = threadIdx.x; e < M; e += blockDim.x) {
        int64_t at = ((e / inner) * C + c) * inner + e % inner;
        dx[at] += kk * (dy[at] - mdy - (x[at] - m) * invstd * mdyx);
    }
}

static void bn_dims(const ts_kctx *k, int64_t *N, int64_t *C, int64_t *inner) {
    const ts_shape *x = &k->in_shape[0];
    *N = x->d[0], *C = x->d[1], *inner = 1;
    for (int i = 2; i < x->ndim; i++) *inner *= x->d[i];
}

/* Batch statistics in a training model unless frozen. */
static bool bn_batch(const ts_kctx *k) { return k->training && !k->node->attr[0]; }

void ts_cu_fwd_batch_norm(const ts_kctx *k) {
    int64_t N, C, inner;
    bn_dims(k, &N, &C, &inner);
    if (C < 1) return;
    bool batch = bn_batch(k);
    /* the running buffers are graph-held state this op updates in place */
    float *rm = (float *)(uintptr_t)k->in[3], *rv = (float *)(uintptr_t)k->in[4];
    batch_norm_fwd_kernel<<<(unsigned)C, TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->out, k->scratch, k->in[0], k->in[1], k->in[2], rm, rv, N,
                                                                             C, inner, k->node->fattr[0], k->node->fattr[1], batch,
                                                                             batch && k->update_state);
    ts_cu_check(cudaGetLastError(), "BatchNorm");
}

void ts_cu_bwd_batch_norm(const ts_kctx *k) {
    if (!k->din[0] && !k->din[1] && !k->din[2]) return;
    int64_t N, C, inner;
    bn_dims(k, &N, &C, &inner);
    if (C < 1) return;
    batch_norm_bwd_kernel<<<(unsigned)C, TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->din[0], k->din[1], k->din[2], k->dout, k->in[0], k->in[1],
                                                                             k->scratch, N, C, inner, bn_batch(k));
    ts_cu_check(cudaGetLastError(), "BatchNorm");
}
