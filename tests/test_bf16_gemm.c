/* test_bf16_gemm.c -- a bf16 model's matmuls through the CPU's bf16 GEMM
 * (backend/cpu/bf16_gemm.h, docs/precision.md):
 * (a) the route: sbgemm where the OpenBLAS loaded has it and the CPU has
 *     avx512_bf16, tensorscope's own kernel where the CPU has avx512_bf16
 *     and OpenBLAS no sbgemm (this program's stand-in below is not
 *     OpenBLAS's: the default leaves it), f32 elsewhere; TS_BF16_GEMM's
 *     values; ts_cpu_features says which;
 * (b) the kernel (only where the CPU has avx512_bf16: skipped with a line
 *     elsewhere): on many shapes (tails of M, N and K, odd K, either
 *     operand stored transposed, row strides wider than the rows, bf16 or
 *     f32 operands, beta 0, 1 and 0.5, a bias, 1 to 3 threads) its C is a
 *     bf16 product with f32 accumulation: within f32's summation error of
 *     the products of the bf16-rounded operands summed in double; and the
 *     gradients of a bf16 matmul (dA, dB, both layouts of B) are such
 *     products with dC rounded to bf16, and so are those of a bf16
 *     batched matmul (ts_cpu_bf16_bmm: the attention's shapes, either
 *     operand transposed, tails), one with a broadcast operand left to the
 *     f32 route;
 * (c) by default (the kernel here) a bf16 Linear (bias fused, B
 *     transposed) and a bf16 MatMul (B as stored) train a step with their
 *     outputs such products, and the weight's gradient is the product with
 *     the output gradient rounded to bf16 (the f32 one's rounding differs),
 *     a second step's the first's (the gradients are stored, the executor
 *     no longer zeroes them first);
 * (d) TS_BF16_GEMM=sbgemm (a second run of this program) routes both
 *     through cblas_sbgemm, with rows split over the model's threads,
 *     with the same outputs;
 * (e) TS_BF16_GEMM=f32 keeps every bf16 matmul on the f32 GEMM.
 * The OpenBLAS Debian ships has no cblas_sbgemm: this program then lends
 * its own (exported, found by the library's lookup when TS_BF16_GEMM=sbgemm
 * asks for one), which multiplies bf16 numbers exactly in f32 and sums in
 * f32, and counts its calls; with an OpenBLAS that has one, the library
 * takes OpenBLAS's and the checks hold for it. */
#define _GNU_SOURCE /* RTLD_NOLOAD */
#include <cblas.h>
#include <dlfcn.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/cpu/bf16_gemm.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/kernels_tensor.h"
#include "backend/ew_math.h"
#include "backend/pool.h"
#include "check.h"
#include "core/half.h"
#include "tensorscope.h"

static atomic_long calls;

static float widen(bfloat16 h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* the stand-in: C = alpha op(A) op(B) + beta C, bf16 products in f32,
 * summed in f32 in k's order (row-major only, as tensorscope calls it) */
void cblas_sbgemm(OPENBLAS_CONST enum CBLAS_ORDER order, OPENBLAS_CONST enum CBLAS_TRANSPOSE ta, OPENBLAS_CONST enum CBLAS_TRANSPOSE tb,
                  OPENBLAS_CONST blasint M, OPENBLAS_CONST blasint N, OPENBLAS_CONST blasint K, OPENBLAS_CONST float alpha,
                  OPENBLAS_CONST bfloat16 *A, OPENBLAS_CONST blasint lda, OPENBLAS_CONST bfloat16 *B, OPENBLAS_CONST blasint ldb,
                  OPENBLAS_CONST float beta, float *C, OPENBLAS_CONST blasint ldc) {
    atomic_fetch_add(&calls, 1);
    if (order != CblasRowMajor) abort();
    for (blasint i = 0; i < M; i++)
        for (blasint j = 0; j < N; j++) {
            float s = 0;
            for (blasint k = 0; k < K; k++) {
                float a = widen(ta == CblasTrans ? A[k * lda + i] : A[i * lda + k]);
                float b = widen(tb == CblasTrans ? B[j * ldb + k] : B[k * ldb + j]);
                s += a * b;
            }
            C[i * ldc + j] = alpha * s + (beta == 0.0f ? 0.0f : beta * C[i * ldc + j]);
        }
}

/* whether the OpenBLAS loaded has its own (then ours is not called) */
static bool openblas_has_sbgemm(void) {
    Dl_info info;
    if (!dladdr((void *)(uintptr_t)cblas_sgemm, &info) || !info.dli_fname) return false;
    void *h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    bool has = h && dlsym(h, "cblas_sbgemm");
    if (h) dlclose(h);
    return has;
}

enum { M = 150, K = 96, N = 64 };

static float round_bf16(float v) {
    float r;
    ts_round_half(TS_BF16, &r, &v, 1, NULL);
    return r;
}

typedef struct result {
    bool ok;
    float y[M * N], w[N * K], b[N], gw[N * K];
    bool same_again; /* a second step's weight gradient is the first's, bit for bit */
    float x[M * K];
} result;

/* one step of a bf16 model: op 0 a Linear (x [M,K] by w [N,K]^T + b), op 1
 * a MatMul (x [M,K] by w [K,N]); y anchored, with w (and b) as they were */
static void run(int op, result *r) {
    ts_graph *g = ts_graph_new(11);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (const int64_t[]){M, K});
    ts_tensor *y;
    if (op == 0) {
        y = ts_linear(g, x, N, "fc");
    } else {
        ts_tensor *w = ts_param(g, "w", 2, (const int64_t[]){K, N});
        y = ts_matmul(g, x, w);
    }
    ts_array wa, ba = {0};
    ts_tensor_info(ts_graph_find(g, op == 0 ? "fc.weight" : "w"), &wa);
    if (op == 1) /* a ts_param starts at zero */
        for (int i = 0; i < K * N; i++) ((float *)wa.data)[i] = 0.1f * cosf(0.11f * (float)i);
    memcpy(r->w, wa.data, sizeof r->w);
    if (op == 0) {
        ts_tensor_info(ts_graph_find(g, "fc.bias"), &ba);
        for (int j = 0; j < N; j++) ((float *)ba.data)[j] = 0.01f * (float)(j - 20);
        memcpy(r->b, ba.data, sizeof r->b);
    }
    for (int i = 0; i < M * K; i++) r->x[i] = sinf(0.37f * (float)i) * (1.0f + (float)(i % 5));
    ts_tensor *loss = ts_mean(g, y);
    ts_options *o = ts_options_new();
    ts_options_set_precision(o, TS_BF16);
    ts_options_set_threads(o, 2);
    ts_options_anchor(o, "y", ts_tensor_name(y), TS_OUTPUT_FINAL, 0);
    ts_options_anchor(o, "gw", op == 0 ? "Gradient___fc.weight" : "Gradient___w", TS_OUTPUT_FINAL, 0);
    ts_model *m = NULL;
    ts_array in = {.dtype = TS_F32, .ndim = 2, .shape = {M, K}, .data = r->x}, ya, ga;
    const char *names[] = {"x"};
    r->ok = !ts_model_training(&m, g, loss, o, ts_sgd(0.01f, 0.0f, 0.0f)) && !ts_model_run(m, names, &in, 1) &&
            !ts_model_anchored(m, "y", &ya) && ts_array_numel(&ya) == M * N && !ts_model_anchored(m, "gw", &ga) &&
            ts_array_numel(&ga) == N * K;
    if (r->ok) {
        memcpy(r->y, ya.data, sizeof r->y);
        memcpy(r->gw, ga.data, sizeof r->gw);
        /* the weight's gradient does not depend on the weight: the second
         * step's, stored or zeroed and added to, is the first's */
        r->same_again = !ts_model_run(m, names, &in, 1) && !ts_model_anchored(m, "gw", &ga) && ts_array_numel(&ga) == N * K &&
                        memcmp(r->gw, ga.data, sizeof r->gw) == 0;
    }
    else printf("     %s\n", ts_last_error());
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
}

/* y against the products of the rounded operands summed in double: the
 * error of an f32 sum of K terms is within K * 2^-24 of the sum of their
 * magnitudes; rounding the operands again (or not at all) misses by far
 * more */
static bool matches_bf16_product(int op, const result *r, double *worst) {
    *worst = 0;
    bool ok = true;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                double p = (double)round_bf16(r->x[i * K + k]) * round_bf16(op == 0 ? r->w[j * K + k] : r->w[k * N + j]);
                s += p, mag += fabs(p);
            }
            if (op == 0) s += r->b[j], mag += fabs(r->b[j]);
            double err = fabs(r->y[i * N + j] - s), bound = (K + 2) * 0x1p-24 * mag;
            *worst = fmax(*worst, mag > 0 ? err / mag : err);
            ok = ok && err <= bound;
        }
    return ok;
}

/* the weight's gradient (a mean's: every output's is 1/(M N)) against
 * the products of the rounded x with the output gradient rounded to bf16
 * (round_dy) or kept in f32: how many of its cells are that sum rounded to
 * bf16 (the gradient of a bf16 weight is held on its grid) */
static int gradient_matches(int op, const result *r, bool round_dy) {
    float dy = 1.0f / (float)(M * N);
    if (round_dy) dy = round_bf16(dy);
    int hits = 0;
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            double s = 0;
            for (int i = 0; i < M; i++) s += (double)round_bf16(r->x[i * K + k]) * dy;
            float got = op == 0 ? r->gw[n * K + k] : r->gw[k * N + n];
            hits += got == round_bf16((float)s) || got == (float)s;
        }
    return hits;
}

/* ---------------------------------------------------- (b) the kernel */

static float bits_float(uint16_t h) { return widen(h); }
static uint16_t float_bits(float v) {
    float r = round_bf16(v);
    uint32_t u;
    memcpy(&u, &r, sizeof u);
    return (uint16_t)(u >> 16);
}

/* an operand of `rows` x `cols` (as stored) with row stride ld >= cols,
 * in f32 or bf16 cells; value(r, c) at [r * ld + c], the pad NaN */
typedef struct operand {
    float *f;
    uint16_t *h;
    bool f32;
} operand;

static operand make_operand(int64_t rows, int64_t ld, int64_t cols, bool f32, float seed) {
    operand o = {calloc((size_t)(rows * ld), sizeof(float)), calloc((size_t)(rows * ld), sizeof(uint16_t)), f32};
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < ld; c++) {
            float v = c < cols ? sinf(seed * (float)(r * 131 + c * 7 + 1)) * (1.0f + (float)((r + c) % 7)) : NAN;
            o.f[r * ld + c] = v;
            o.h[r * ld + c] = float_bits(v);
        }
    return o;
}

/* the value the kernel multiplies: bf16 cells as they are, f32 rounded */
static double used(const operand *o, int64_t at) { return o->f32 ? round_bf16(o->f[at]) : bits_float(o->h[at]); }

static int kernel_fails, kernel_cases;

/* one product C = beta C + op(A) op(B) (+ bias into out) against the
 * reference; returns whether it held */
static bool kernel_case(ts_pool *pool, int64_t m, int64_t n, int64_t k, bool ta, bool tb, bool af, bool bf, int64_t pad, float beta,
                        bool with_bias) {
    int64_t lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
    operand A = make_operand(ta ? k : m, lda, ta ? m : k, af, 0.37f), B = make_operand(tb ? n : k, ldb, tb ? k : n, bf, 0.11f);
    float *C = malloc(sizeof(float) * (size_t)(m * ldc)), *C0 = malloc(sizeof(float) * (size_t)(m * ldc));
    float *out = malloc(sizeof(float) * (size_t)(m * ldc)), *bias = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < m * ldc; i++) C[i] = C0[i] = out[i] = i % ldc < n ? 0.25f * (float)(i % 9) - 1.0f : NAN;
    for (int64_t j = 0; j < n; j++) bias[j] = 0.01f * (float)(j - 20);
    ts_bf16_mat a = {af ? (const void *)A.f : (const void *)A.h, af, ta ? 1 : lda, ta ? lda : 1};
    ts_bf16_mat b = {bf ? (const void *)B.f : (const void *)B.h, bf, tb ? ldb : 1, tb ? 1 : ldb};
    bool ok = ts_bf16k_gemm(pool, m, n, k, a, b, beta, C, ldc, with_bias ? bias : NULL, with_bias ? out : NULL, NULL) == TS_OK;
    for (int64_t i = 0; ok && i < m; i++) {
        for (int64_t j = 0; ok && j < n; j++) {
            double sum = beta != 0.0f ? (double)beta * C0[i * ldc + j] : 0.0, mag = fabs(sum);
            for (int64_t q = 0; q < k; q++) {
                double pr = used(&A, ta ? q * lda + i : i * lda + q) * used(&B, tb ? j * ldb + q : q * ldb + j);
                sum += pr, mag += fabs(pr);
            }
            float c = C[i * ldc + j];
            ok = fabs(c - sum) <= (double)(k + 2) * 0x1p-24 * mag && (!with_bias || out[i * ldc + j] == c + bias[j]);
        }
        for (int64_t j = n; ok && j < ldc; j++) ok = isnan(C[i * ldc + j]) && isnan(out[i * ldc + j]); /* the pad untouched */
    }
    if (ok && with_bias) { /* again with a GELU after the bias (a Linear's, fused): the op's own loop over each row of the sums */
        float *r = malloc(sizeof(float) * (size_t)(m * ldc)), *want = malloc(sizeof(float) * (size_t)n);
        for (int64_t i = 0; i < m * ldc; i++) r[i] = NAN;
        ts_out_act act = {.out = r, .kind = TS_EWU_GELU};
        ok = ts_bf16k_gemm(pool, m, n, k, a, b, beta, C, ldc, bias, out, &act) == TS_OK;
        for (int64_t i = 0; ok && i < m; i++) {
            ts_out_act_apply(&act, want, out + i * ldc, n);
            ok = memcmp(want, r + i * ldc, sizeof(float) * (size_t)n) == 0;
            for (int64_t j = n; ok && j < ldc; j++) ok = isnan(r[i * ldc + j]);
        }
        free(r), free(want);
    }
    if (!ok)
        printf("     M %lld N %lld K %lld ta %d tb %d A %s B %s pad %lld beta %g bias %d: off\n", (long long)m, (long long)n, (long long)k, ta,
               tb, af ? "f32" : "bf16", bf ? "f32" : "bf16", (long long)pad, (double)beta, with_bias);
    free(A.f), free(A.h), free(B.f), free(B.h), free(C), free(C0), free(out), free(bias);
    kernel_cases++, kernel_fails += !ok;
    return ok;
}

/* the gradients of C = A op(B) through ts_cpu_bf16_gemm_backward against
 * the products of the rounded dC */
static bool backward_case(ts_pool *pool, bool tb, int64_t m, int64_t n, int64_t k) {
    operand A = make_operand(m, k, k, false, 0.37f), B = make_operand(tb ? n : k, tb ? k : n, tb ? k : n, false, 0.11f);
    operand dC = make_operand(m, n, n, true, 0.23f);
    float *dA = malloc(sizeof(float) * (size_t)(m * k)), *dB = malloc(sizeof(float) * (size_t)(n * k));
    for (int64_t i = 0; i < m * k; i++) dA[i] = 0.5f;
    for (int64_t i = 0; i < n * k; i++) dB[i] = -0.5f;
    /* dC's rounded copy and the kernel's workspace as compile plans them (the
     * workspace a float off 64 bytes: the kernel aligns it in its slack) */
    uint16_t *room = malloc(sizeof(uint16_t) * (size_t)(m * n));
    float *ws = malloc(sizeof(float) * (ts_cpu_bf16_gemm_floats(m, n, k, pool ? ts_pool_threads(pool) : 1) + 1));
    bool ok = room && ws && ts_cpu_bf16_gemm_backward(pool, tb, m, n, k, A.h, B.h, dC.f, dA, 1.0f, dB, 1.0f, room, ws + 1) == 3u;
    free(room), free(ws);
    for (int64_t i = 0; ok && i < m; i++)
        for (int64_t q = 0; ok && q < k; q++) { /* dA[i, q] = 0.5 + sum_j dC[i, j] op(B)[q, j] */
            double s = 0.5, mag = 0.5;
            for (int64_t j = 0; j < n; j++) {
                double pr = used(&dC, i * n + j) * used(&B, tb ? j * k + q : q * n + j);
                s += pr, mag += fabs(pr);
            }
            ok = fabs(dA[i * k + q] - s) <= (double)(n + 2) * 0x1p-24 * mag;
        }
    for (int64_t j = 0; ok && j < n; j++)
        for (int64_t q = 0; ok && q < k; q++) { /* dB (as B is stored) = -0.5 + sum_i A[i, q] dC[i, j] */
            double s = -0.5, mag = 0.5;
            for (int64_t i = 0; i < m; i++) {
                double pr = used(&A, i * k + q) * used(&dC, i * n + j);
                s += pr, mag += fabs(pr);
            }
            ok = fabs(dB[tb ? j * k + q : q * n + j] - s) <= (double)(m + 2) * 0x1p-24 * mag;
        }
    free(A.f), free(A.h), free(B.f), free(B.h), free(dC.f), free(dC.h), free(dA), free(dB);
    return ok;
}

/* a batched matmul (count products, A and B in bf16 cells, either stored
 * transposed) through ts_cpu_bf16_bmm and its gradients through
 * ts_cpu_bf16_bmm_backward, against the products of the bf16 operands
 * (and of dC rounded to bf16) summed in double */
static bool bmm_case(ts_pool *pool, int64_t count, int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
    int64_t sa = m * k, sb = k * n, sc = m * n;
    operand A = make_operand(count * (ta ? k : m), ta ? m : k, ta ? m : k, false, 0.37f);
    operand B = make_operand(count * (tb ? n : k), tb ? k : n, tb ? k : n, false, 0.11f);
    operand dC = make_operand(count * m, n, n, true, 0.23f);
    float *C = malloc(sizeof(float) * (size_t)(count * sc)), *dA = malloc(sizeof(float) * (size_t)(count * sa));
    float *dB = malloc(sizeof(float) * (size_t)(count * sb));
    for (int64_t i = 0; i < count * sc; i++) C[i] = NAN;
    for (int64_t i = 0; i < count * sa; i++) dA[i] = 0.5f;
    for (int64_t i = 0; i < count * sb; i++) dB[i] = -0.5f;
    ts_shape shc = {.ndim = 4, .d = {count, 1, m, n}}, sha = {.ndim = 4, .d = {count, 1, ta ? k : m, ta ? m : k}};
    ts_shape shb = {.ndim = 4, .d = {count, 1, tb ? n : k, tb ? k : n}};
    /* dC's rounded copy and the kernel's workspace as compile plans them (a
     * float off 64 bytes) */
    uint16_t *room = malloc(sizeof(uint16_t) * (size_t)(count * sc));
    float *ws = malloc(sizeof(float) * (ts_cpu_bf16_bmm_floats(&shc, &sha, pool ? ts_pool_threads(pool) : 1) + 1));
    bool ok = room && ws && ts_cpu_bf16_bmm(pool, ta, tb, &shc, &sha, &shb, A.h, B.h, C, ws + 1) &&
              ts_cpu_bf16_bmm_backward(pool, ta, tb, &shc, &sha, &shb, A.h, B.h, dC.f, dA, dB, room, ws + 1) == 3u;
    free(room), free(ws);
    for (int64_t c = 0; ok && c < count; c++) {
        /* op(A) (i, q), op(B) (q, j), dC (i, j) of product c */
#define OPA(i, q) used(&A, c * sa + (ta ? (q) * m + (i) : (i) * k + (q)))
#define OPB(q, j) used(&B, c * sb + (tb ? (j) * k + (q) : (q) * n + (j)))
#define DC(i, j) used(&dC, c * sc + (i) * n + (j))
        for (int64_t i = 0; ok && i < m; i++)
            for (int64_t j = 0; ok && j < n; j++) {
                double s = 0, mag = 0;
                for (int64_t q = 0; q < k; q++) s += OPA(i, q) * OPB(q, j), mag += fabs(OPA(i, q) * OPB(q, j));
                ok = fabs(C[c * sc + i * n + j] - s) <= (double)(k + 2) * 0x1p-24 * mag;
            }
        for (int64_t i = 0; ok && i < m; i++)
            for (int64_t q = 0; ok && q < k; q++) { /* dop(A) (i, q) = 0.5 + sum_j dC (i, j) op(B) (q, j) */
                double s = 0.5, mag = 0.5;
                for (int64_t j = 0; j < n; j++) s += DC(i, j) * OPB(q, j), mag += fabs(DC(i, j) * OPB(q, j));
                ok = fabs(dA[c * sa + (ta ? q * m + i : i * k + q)] - s) <= (double)(n + 2) * 0x1p-24 * mag;
            }
        for (int64_t q = 0; ok && q < k; q++)
            for (int64_t j = 0; ok && j < n; j++) { /* dop(B) (q, j) = -0.5 + sum_i op(A) (i, q) dC (i, j) */
                double s = -0.5, mag = 0.5;
                for (int64_t i = 0; i < m; i++) s += OPA(i, q) * DC(i, j), mag += fabs(OPA(i, q) * DC(i, j));
                ok = fabs(dB[c * sb + (tb ? j * k + q : q * n + j)] - s) <= (double)(m + 2) * 0x1p-24 * mag;
            }
#undef OPA
#undef OPB
#undef DC
    }
    if (!ok)
        printf("     batched: count %lld M %lld N %lld K %lld ta %d tb %d: off\n", (long long)count, (long long)m, (long long)n, (long long)k, ta,
               tb);
    free(A.f), free(A.h), free(B.f), free(B.h), free(dC.f), free(dC.h), free(C), free(dA), free(dB);
    return ok;
}

/* the same product with A read three ways: bf16 cells at an even row
 * stride (read in place, the whole tiles), the same cells at an odd
 * stride (packed) and the f32 values (rounded as packed); C (and out)
 * must be the same bits */
static bool same_bits_case(ts_pool *pool, int64_t m, int64_t n, int64_t k, float beta, bool with_bias) {
    operand even = make_operand(m, k, k, false, 0.29f), odd = make_operand(m, k + 1, k, false, 0.29f);
    operand B = make_operand(n, k, k, false, 0.13f);
    float *C[3], *out[3], *bias = malloc(sizeof(float) * (size_t)n);
    for (int64_t j = 0; j < n; j++) bias[j] = 0.01f * (float)(j - 20);
    ts_bf16_mat a[3] = {{even.h, false, k, 1}, {odd.h, false, k + 1, 1}, {even.f, true, k, 1}}, b = {B.h, false, k, 1};
    bool ok = true;
    for (int w = 0; w < 3; w++) {
        C[w] = malloc(sizeof(float) * (size_t)(m * n)), out[w] = malloc(sizeof(float) * (size_t)(m * n));
        for (int64_t i = 0; i < m * n; i++) C[w][i] = 0.25f * (float)(i % 9) - 1.0f, out[w][i] = NAN;
        ok = ok && ts_bf16k_gemm(pool, m, n, k, a[w], b, beta, C[w], n, with_bias ? bias : NULL, with_bias ? out[w] : NULL, NULL) == TS_OK;
    }
    size_t bytes = sizeof(float) * (size_t)(m * n);
    for (int w = 1; w < 3 && ok; w++) ok = memcmp(C[0], C[w], bytes) == 0 && (!with_bias || memcmp(out[0], out[w], bytes) == 0);
    if (!ok)
        printf("     M %lld N %lld K %lld beta %g bias %d: A in place, packed and rounded from f32 differ\n", (long long)m, (long long)n,
               (long long)k, (double)beta, with_bias);
    for (int w = 0; w < 3; w++) free(C[w]), free(out[w]);
    free(even.f), free(even.h), free(odd.f), free(odd.h), free(B.f), free(B.h), free(bias);
    return ok;
}

/* a 128-channel layer's dB = X^T dY (128 rows, K = 2048 tokens, A and B
 * read across their rows): one thread's rows and 2 and 3 threads' splits
 * (the columns, where rows would leave a thread 6 tiles against 5) give
 * the same bits */
static bool split_bits_case(ts_pool *const pools[3], int64_t n) {
    enum { ROWS = 128, TOKENS = 2048 };
    operand X = make_operand(TOKENS, ROWS, ROWS, false, 0.31f), dY = make_operand(TOKENS, n, n, false, 0.17f);
    ts_bf16_mat a = {X.h, false, 1, ROWS}, b = {dY.h, false, 1, n};
    float *C[3];
    bool ok = true;
    for (int t = 0; t < 3; t++) {
        C[t] = malloc(sizeof(float) * (size_t)(ROWS * n));
        ok = ok && ts_bf16k_gemm(pools[t], ROWS, n, TOKENS, a, b, 0.0f, C[t], n, NULL, NULL, NULL) == TS_OK;
    }
    for (int t = 1; t < 3 && ok; t++) ok = memcmp(C[0], C[t], sizeof(float) * (size_t)(ROWS * n)) == 0;
    for (int t = 0; t < 3; t++) free(C[t]);
    free(X.f), free(X.h), free(dY.f), free(dY.h);
    return ok;
}

/* ts_cpu_bf16_gemm_backward (dC rounded once to bf16 cells) against the
 * kernel's products on dC in f32, rounded as they are packed: the same bits */
static bool backward_bits_case(ts_pool *pool, bool tb, int64_t m, int64_t n, int64_t k) {
    operand A = make_operand(m, k, k, false, 0.37f), B = make_operand(tb ? n : k, tb ? k : n, tb ? k : n, false, 0.11f);
    operand dC = make_operand(m, n, n, true, 0.23f);
    size_t na = (size_t)(m * k), nb = (size_t)(n * k);
    float *dA = malloc(sizeof(float) * na), *dB = malloc(sizeof(float) * nb);
    float *rA = malloc(sizeof(float) * na), *rB = malloc(sizeof(float) * nb);
    for (size_t i = 0; i < na; i++) dA[i] = rA[i] = 0.5f;
    for (size_t i = 0; i < nb; i++) dB[i] = rB[i] = -0.5f;
    uint16_t *room = malloc(sizeof(uint16_t) * (size_t)(m * n)); /* dC's rounded copy (compile plans it) */
    bool ok = room && ts_cpu_bf16_gemm_backward(pool, tb, m, n, k, A.h, B.h, dC.f, dA, 1.0f, dB, 1.0f, room, NULL) == 3u;
    free(room);
    ts_bf16_mat dc_rows = {dC.f, true, n, 1}, dc_cols = {dC.f, true, 1, n}, a_cols = {A.h, false, 1, k};
    ts_bf16_mat b_rows = tb ? (ts_bf16_mat){B.h, false, 1, k} : (ts_bf16_mat){B.h, false, n, 1};
    ok = ok && ts_bf16k_gemm(pool, m, k, n, dc_rows, b_rows, 1.0f, rA, k, NULL, NULL, NULL) == TS_OK;
    ok = ok && (tb ? ts_bf16k_gemm(pool, n, k, m, dc_cols, a_cols, 1.0f, rB, k, NULL, NULL, NULL)
                   : ts_bf16k_gemm(pool, k, n, m, a_cols, dc_cols, 1.0f, rB, n, NULL, NULL, NULL)) == TS_OK;
    ok = ok && memcmp(dA, rA, sizeof(float) * na) == 0 && memcmp(dB, rB, sizeof(float) * nb) == 0;
    /* no room (none planned): the products round dC as they pack it, the same bits */
    for (size_t i = 0; i < na; i++) rA[i] = 0.5f;
    for (size_t i = 0; i < nb; i++) rB[i] = -0.5f;
    ok = ok && ts_cpu_bf16_gemm_backward(pool, tb, m, n, k, A.h, B.h, dC.f, rA, 1.0f, rB, 1.0f, NULL, NULL) == 3u;
    ok = ok && memcmp(dA, rA, sizeof(float) * na) == 0 && memcmp(dB, rB, sizeof(float) * nb) == 0;
    free(A.f), free(A.h), free(B.f), free(B.h), free(dC.f), free(dC.h), free(dA), free(dB), free(rA), free(rB);
    return ok;
}

/* ts_bf16k_round's bits are ts_f32_to_bf16's (round16.c's packing), on
 * every exponent, NaNs, infinities and subnormals, with a tail */
static bool round_bits_case(ts_pool *pool, int64_t n) {
    float *x = malloc(sizeof(float) * (size_t)n);
    uint16_t *h = malloc(sizeof(uint16_t) * (size_t)n);
    uint64_t state = 0x9e3779b97f4a7c15u;
    for (int64_t i = 0; i < n; i++) {
        state = state * 6364136223846793005u + 1442695040888963407u;
        uint32_t u = (uint32_t)(state >> 32);
        if (i % 97 == 0) u = 0x7f800000u | (u & 0x80000000u) | (i % 2 ? 1u : 0u); /* infinities and NaNs */
        memcpy(&x[i], &u, sizeof u);
    }
    ts_bf16k_round(pool, h, x, n);
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++) ok = h[i] == ts_f32_to_bf16(x[i]);
    free(x), free(h);
    return ok;
}

static void test_kernel(void) {
    if (!ts_bf16k_built() || !ts_cpu_flags_get()->avx512_bf16) {
        printf("skip the avx512_bf16 kernel's checks: this %s\n", ts_bf16k_built() ? "CPU lacks avx512_bf16" : "build has no kernel");
        return;
    }
    static const int64_t shapes[][3] = {{1, 1, 1},   {12, 32, 2},  {13, 33, 3},    {150, 64, 96}, {7, 100, 513}, {100, 7, 1030},
                                        {64, 130, 1}, {37, 45, 1100}, {200, 300, 64}, {3, 500, 17},  {30, 700, 300}};
    static const float betas[] = {0.0f, 1.0f, 0.5f};
    ts_pool *pools[3] = {NULL, NULL, NULL};
    for (int t = 0; t < 3; t++) CHECK_OK(ts_pool_new(&pools[t], t + 1), "a pool of %d threads", t + 1);
    int idx = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int c = 0; c < 16; c++, idx++) {
            float beta = betas[idx % 3];
            kernel_case(pools[idx % 3], shapes[s][0], shapes[s][1], shapes[s][2], c & 1, c >> 1 & 1, c >> 2 & 1, c >> 3 & 1,
                        (int64_t)((s + (size_t)c) % 3) * 5, beta, beta == 0.0f && idx % 2);
        }
    static const int64_t bits_shapes[][3] = {{12, 32, 2}, {37, 33, 96}, {150, 70, 1030}, {96, 64, 128}, {1, 5, 4}, {200, 300, 64}};
    int bits_fails = 0, bits_cases = 0;
    for (size_t s = 0; s < sizeof bits_shapes / sizeof bits_shapes[0]; s++)
        for (int c = 0; c < 3; c++, bits_cases++)
            bits_fails += !same_bits_case(pools[(s + (size_t)c) % 3], bits_shapes[s][0], bits_shapes[s][1], bits_shapes[s][2], betas[c],
                                          c == 0);
    CHECK(bits_fails == 0,
          "the avx512_bf16 kernel: %d of %d products give the same bits with A's bf16 rows read in place, packed, or rounded from f32 "
          "as packed (M tails, K over a block, beta, bias, 1-3 threads)", bits_cases - bits_fails, bits_cases);
    CHECK(split_bits_case(pools, 384) && split_bits_case(pools, 130),
          "a 128-row dB (K 2048) gives the same bits on 1, 2 and 3 threads (rows, or column panels where rows split worse)");
    CHECK(round_bits_case(pools[1], 100003), "ts_bf16k_round: a hundred thousand random bit patterns round to ts_f32_to_bf16's bits");
    CHECK(kernel_fails == 0,
          "the avx512_bf16 kernel: %d of %d products (M, N, K tails, odd K, transposes, strides, bf16/f32 operands, beta, bias, a GELU after "
          "the bias, 1-3 threads) are bf16 products with f32 accumulation",
          kernel_cases - kernel_fails, kernel_cases);
    if (ts_cpu_bf16_route() == TS_BF16_ROUTE_AVX512BF16) {
        for (int tb = 0; tb < 2; tb++) {
            CHECK(backward_case(pools[1], tb, 150, 70, 96), "a bf16 matmul's gradients (B %s): dA, dB are the products with dC rounded to bf16",
                  tb ? "[N,K]" : "[K,N]");
            CHECK(backward_case(pools[2], tb, 33, 17, 9), "the same on a small product (B %s), 3 threads", tb ? "[N,K]" : "[K,N]");
            CHECK(backward_bits_case(pools[1], tb, 150, 70, 96) && backward_bits_case(pools[2], tb, 37, 33, 1030) &&
                      backward_bits_case(pools[0], tb, 13, 7, 9),
                  "a bf16 matmul's gradients (B %s), dC rounded once for both products, are the bits of products rounding it as packed",
                  tb ? "[N,K]" : "[K,N]");
        }
        /* the attention's products of a bf16 GPT: q k^T, p v and their
         * gradients, per (batch, head); and tails, odd K, one product */
        static const int64_t bshapes[][4] = {{6, 64, 64, 32}, {5, 64, 32, 64}, {3, 13, 33, 7}, {1, 40, 9, 100}};
        for (size_t s = 0; s < sizeof bshapes / sizeof bshapes[0]; s++)
            for (int c = 0; c < 4; c++)
                CHECK(bmm_case(pools[(s + (size_t)c) % 3], bshapes[s][0], bshapes[s][1], bshapes[s][2], bshapes[s][3], c & 1, c >> 1 & 1),
                      "a bf16 batched matmul of %lld products M %lld N %lld K %lld (A%s, B%s), %zu threads: C, dA, dB are bf16 products "
                      "with f32 accumulation (dC rounded to bf16)", (long long)bshapes[s][0], (long long)bshapes[s][1], (long long)bshapes[s][2],
                      (long long)bshapes[s][3], c & 1 ? " transposed" : "", c & 2 ? " transposed" : "", (s + (size_t)c) % 3 + 1);
        uint16_t one[4] = {0x3f80, 0x3f80, 0x3f80, 0x3f80};
        float out[4] = {0};
        ts_shape c2 = {.ndim = 3, .d = {2, 1, 1}}, a2 = {.ndim = 3, .d = {2, 1, 1}}, b1 = {.ndim = 3, .d = {1, 1, 1}};
        CHECK(!ts_cpu_bf16_bmm(pools[0], false, false, &c2, &a2, &b1, one, one, out, NULL) && out[0] == 0.0f,
              "a batched matmul whose B is broadcast over the batch is left to the f32 route (nothing written)");
    } else {
        printf("skip the gradients' checks: the route is %s\n", ts_cpu_bf16_gemm_route());
    }
    for (int t = 0; t < 3; t++) ts_pool_free(pools[t]);
}

static ts_bf16_want want_of(const char *value) {
    bool known;
    ts_bf16_want w = ts_cpu_bf16_want_parse(value, &known);
    CHECK(known, "TS_BF16_GEMM='%s' is understood", value ? value : "(unset)");
    return w;
}

static void test_route_pick(void) {
    ts_bf16_pick k;
    CHECK(ts_cpu_bf16_route_pick(false, TS_BF16K_READY, want_of(NULL)).route == TS_BF16_ROUTE_AVX512BF16, "no sbgemm, avx512_bf16: the kernel");
    CHECK(ts_cpu_bf16_route_pick(true, TS_BF16K_READY, want_of("")).route == TS_BF16_ROUTE_SBGEMM, "sbgemm and avx512_bf16: sbgemm");
    k = ts_cpu_bf16_route_pick(true, TS_BF16K_ABSENT, want_of("auto"));
    CHECK(k.route == TS_BF16_ROUTE_F32 && strstr(k.why, "no avx512_bf16") && !k.warn, "no avx512_bf16: f32, saying why, no warning");
    k = ts_cpu_bf16_route_pick(true, TS_BF16K_CAPPED, want_of("AUTO"));
    CHECK(k.route == TS_BF16_ROUTE_F32 && strstr(k.why, "TS_CPU below avx512"), "TS_CPU below avx512: f32, naming TS_CPU (\"%s\")", k.why);
    CHECK(ts_cpu_bf16_route_pick(true, TS_BF16K_ABSENT, want_of("sbgemm")).route == TS_BF16_ROUTE_SBGEMM, "TS_BF16_GEMM=sbgemm: sbgemm on any CPU");
    k = ts_cpu_bf16_route_pick(false, TS_BF16K_READY, want_of("sbgemm"));
    CHECK(k.route == TS_BF16_ROUTE_F32 && k.warn && strstr(k.warn, "BUILD_BFLOAT16"), "TS_BF16_GEMM=sbgemm without sbgemm: f32 and a warning");
    CHECK(ts_cpu_bf16_route_pick(true, TS_BF16K_READY, want_of("avx512bf16")).route == TS_BF16_ROUTE_AVX512BF16, "TS_BF16_GEMM=avx512bf16: the kernel");
    k = ts_cpu_bf16_route_pick(true, TS_BF16K_ABSENT, want_of("Avx512Bf16"));
    CHECK(k.route == TS_BF16_ROUTE_F32 && strstr(k.why, "no avx512_bf16") && k.warn, "TS_BF16_GEMM=avx512bf16 without the instructions: f32, saying why");
    k = ts_cpu_bf16_route_pick(true, TS_BF16K_CAPPED, want_of("avx512bf16"));
    CHECK(k.route == TS_BF16_ROUTE_F32 && strstr(k.why, "TS_CPU") && k.warn, "TS_BF16_GEMM=avx512bf16 under TS_CPU's cap: f32, naming TS_CPU");
    CHECK(ts_cpu_bf16_route_pick(true, TS_BF16K_READY, want_of("f32")).route == TS_BF16_ROUTE_F32, "TS_BF16_GEMM=f32: f32");
    bool known = true;
    CHECK(ts_cpu_bf16_want_parse("fast", &known) == TS_BF16_WANT_AUTO && !known, "an unknown TS_BF16_GEMM is reported and taken as auto");
}

static const char *OP[] = {"Linear (bias, B transposed)", "MatMul (B as stored)"};

/* (c)-(e): both ops trained a step on the route taken; `mode` names it */
static void model_checks(const char *mode) {
    static result r;
    bool sb = ts_cpu_bf16_route() == TS_BF16_ROUTE_SBGEMM, own = ts_cpu_bf16_route() == TS_BF16_ROUTE_AVX512BF16;
    for (int op = 0; op < 2; op++) {
        long before = atomic_load(&calls);
        run(op, &r);
        long used_calls = atomic_load(&calls) - before;
        double worst = 0;
        CHECK(r.ok, "%s: a bf16 %s trains a step", mode, OP[op]);
        if (!openblas_has_sbgemm())
            CHECK(sb ? used_calls >= 2 : used_calls == 0, "%s: %s: %ld calls of cblas_sbgemm (%s)", mode, OP[op], used_calls,
                  sb ? "rows split over 2 threads" : "none");
        CHECK(r.ok && matches_bf16_product(op, &r, &worst), "%s: %s: a bf16 product with f32 accumulation (worst %.2g of the magnitudes)",
              mode, OP[op], worst);
        CHECK(r.ok && r.same_again, "%s: %s: a second step's weight gradient is the first's (stored, not added to the last step's)", mode,
              OP[op]);
        int rounded = gradient_matches(op, &r, true), kept = gradient_matches(op, &r, false);
        if (own)
            CHECK(r.ok && rounded >= N * K * 99 / 100 && kept < N * K * 9 / 10,
                  "%s: %s: the weight's gradient is the product with the output gradient rounded to bf16 (%d of %d cells; %d with it in f32)",
                  mode, OP[op], rounded, N * K, kept);
        else
            CHECK(r.ok && kept >= N * K * 99 / 100 && rounded < N * K * 9 / 10,
                  "%s: %s: the weight's gradient is the f32 product (%d of %d cells; %d with the output gradient rounded)", mode, OP[op], kept,
                  N * K, rounded);
    }
}

static int child(const char *mode) {
    bool forced = strcmp(mode, "sbgemm") == 0;
    CHECK(ts_cpu_bf16_route() == (forced ? TS_BF16_ROUTE_SBGEMM : TS_BF16_ROUTE_F32), "TS_BF16_GEMM=%s: the route is %s (\"%s\")", mode,
          forced ? "sbgemm" : "f32", ts_cpu_bf16_gemm_route());
    char label[64];
    snprintf(label, sizeof label, "TS_BF16_GEMM=%s", mode);
    model_checks(label);
    return check_summary(forced ? "test_bf16_gemm (TS_BF16_GEMM=sbgemm)" : "test_bf16_gemm (TS_BF16_GEMM=f32)");
}

static void run_child(const char *self, const char *mode) {
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TS_BF16_GEMM", mode, 1);
        execl(self, self, mode, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the TS_BF16_GEMM=%s run passed its checks", mode);
}

int main(int argc, char **argv) {
    if (argc > 1) return child(argv[1]);
    unsetenv("TS_BF16_GEMM"); /* (a) is the default route */
    test_route_pick();
    bool bf16 = ts_cpu_flags_get()->avx512_bf16 && ts_cpu_level() >= TS_CPU_AVX512;
    ts_bf16_route want = bf16 && openblas_has_sbgemm() ? TS_BF16_ROUTE_SBGEMM : bf16 && ts_bf16k_built() ? TS_BF16_ROUTE_AVX512BF16 : TS_BF16_ROUTE_F32;
    static const char *names[] = {"f32", "sbgemm", "avx512bf16"};
    CHECK(ts_cpu_bf16_route() == want, "by default the bf16 matmuls take %s (this CPU %s avx512_bf16%s, OpenBLAS %s cblas_sbgemm): \"%s\"",
          names[want], ts_cpu_flags_get()->avx512_bf16 ? "has" : "lacks", ts_cpu_flags_get()->avx512_bf16 && !bf16 ? ", TS_CPU below avx512" : "",
          openblas_has_sbgemm() ? "has" : "has no", ts_cpu_bf16_gemm_route());
    char line[64];
    snprintf(line, sizeof line, "bf16 products %s", names[want]);
    CHECK(strstr(ts_cpu_features(), line) != NULL, "ts_cpu_features: \"%s\"", ts_cpu_features());
    test_kernel();
    model_checks("by default");
    run_child(argv[0], "sbgemm");
    run_child(argv[0], "f32");
    return check_summary("test_bf16_gemm");
}
