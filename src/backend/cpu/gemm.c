/* gemm.c -- matrix products. OpenBLAS does the work; the naive loop is the
 * oracle the tests compare it with.
 *
 * Two ways to run threads: ts_gemm lets OpenBLAS use its own threads (as many
 * as ts_gemm_set_threads said); ts_gemm_pool splits C over the executor's
 * pool and each slice calls a one-thread OpenBLAS. The second keeps one set
 * of threads busy for the whole step: OpenBLAS's threads, waiting by yielding
 * between products, no longer take the cores from the pool's elementwise
 * work and the pool's from the products (two 2-thread pools on 2 cores). */
#include "backend/cpu/gemm.h"
#include "backend/cpu/kernels_tensor.h"

#include "backend/pool.h"

#include <cblas.h>
#include <stdatomic.h>
#include <string.h>

void openblas_set_num_threads(int num_threads);

static _Atomic int g_threads = 1;   /* what ts_gemm lets OpenBLAS use */
static _Atomic int g_blas_now = 0;  /* what OpenBLAS is set to now (0: not set yet) */

/* Changed only between products, from the thread that calls them. */
static void blas_threads(int n) {
    if (atomic_load_explicit(&g_blas_now, memory_order_relaxed) == n) return;
    atomic_store_explicit(&g_blas_now, n, memory_order_relaxed);
    openblas_set_num_threads(n);
}

static void sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                  int64_t ldb, float beta, float *C, int64_t ldc) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K, 1.0f,
                A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}

void ts_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, const float *B,
             float beta, float *C) {
    blas_threads(atomic_load_explicit(&g_threads, memory_order_relaxed));
    sgemm(ta, tb, M, N, K, A, ta ? M : K, B, tb ? K : N, beta, C, N);
}

void ts_gemm_serial_begin(void) { blas_threads(1); }

void ts_gemm_serial(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                    float beta, float *C, int64_t ldc) {
    sgemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

void ts_transpose_serial(int64_t rows, int64_t cols, const float *a, int64_t lda, float *t, int64_t ldt) {
    cblas_somatcopy(CblasRowMajor, CblasTrans, (int)rows, (int)cols, 1.0f, a, (int)lda, t, (int)ldt);
}

typedef struct gemm_job {
    bool ta, tb, by_rows;
    int64_t M, N, K;
    const float *A, *B;
    float beta;
    float *C;
    const float *bias; /* ts_gemm_pool_bias: out = C + bias, else NULL */
    float *out;
    const ts_out_act *act; /* with bias: act->out = f(out) after it, else NULL */
} gemm_job;

/* out[r, c0:c1] = C[r, c0:c1] + bias[c0:c1] for rows [r0, r1) */
static void add_bias(const gemm_job *j, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    for (int64_t r = r0; r < r1; r++) {
        const float *x = j->C + r * j->N;
        float *o = j->out + r * j->N;
        for (int64_t c = c0; c < c1; c++) o[c] = x[c] + j->bias[c];
    }
}

/* The bias written first and the product added to it (beta 1) where that
 * gives the Add's bits: the sum over the product (out = C) with K no
 * longer than this. OpenBLAS adds a product to C once per block of K
 * (GEMM_Q, 256 or more on every target it tunes), each block's sum formed
 * in registers: with one block, bias + sum is the one rounding the Add
 * makes. Then C is written once, where a product with beta 0 clears C (a
 * pass) and the Add reads and writes it again (another). */
#define BIAS_FIRST_MAX_K 256

/* rows [r0, r1), columns [c0, c1) of out = bias */
static void fill_bias(const gemm_job *j, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    for (int64_t r = r0; r < r1; r++) memcpy(j->out + r * j->N + c0, j->bias + c0, (size_t)(c1 - c0) * sizeof(float));
}

/* C[begin:end, :] (rows) or C[:, begin:end] (columns) */
static void gemm_slice(void *ctx, int64_t begin, int64_t end) {
    const gemm_job *j = ctx;
    int64_t lda = j->ta ? j->M : j->K, ldb = j->tb ? j->K : j->N;
    bool first = j->bias && j->out == j->C && j->K <= BIAS_FIRST_MAX_K;
    float beta = first ? 1.0f : j->beta;
    if (first) {
        if (j->by_rows) fill_bias(j, begin, end, 0, j->N);
        else fill_bias(j, 0, j->M, begin, end);
    }
    if (j->by_rows) {
        sgemm(j->ta, j->tb, end - begin, j->N, j->K, j->ta ? j->A + begin : j->A + begin * j->K, lda, j->B, ldb, beta,
              j->C + begin * j->N, j->N);
        if (j->bias && !first) add_bias(j, begin, end, 0, j->N);
        if (j->act) ts_out_act_apply(j->act, j->act->out + begin * j->N, j->out + begin * j->N, (end - begin) * j->N);
    } else {
        sgemm(j->ta, j->tb, j->M, end - begin, j->K, j->A, lda, j->tb ? j->B + begin * j->K : j->B + begin, ldb, beta,
              j->C + begin, j->N);
        if (j->bias && !first) add_bias(j, 0, j->M, begin, end);
        for (int64_t r = 0; j->act && r < j->M; r++)
            ts_out_act_apply(j->act, j->act->out + r * j->N + begin, j->out + r * j->N + begin, end - begin);
    }
}

/* below this many multiply-adds a product runs on the calling thread: a
 * hand-off costs a few microseconds */
#define GEMM_PAR_MACS (256 * 1024)
/* a slice keeps at least this many rows or columns (the kernels' blocking) */
#define GEMM_MIN_SPLIT 32

static void gemm_pool(struct ts_pool *p, gemm_job j) {
    int64_t M = j.M, N = j.N, K = j.K;
    int threads = ts_pool_threads(p);
    if (threads <= 1 || M * N * K < GEMM_PAR_MACS || (M < 2 * GEMM_MIN_SPLIT && N < 2 * GEMM_MIN_SPLIT)) {
        gemm_slice(&j, 0, M);
        return;
    }
    j.by_rows = M >= 2 * GEMM_MIN_SPLIT; /* rows share B's packing least badly; columns when the batch is small (splitting a
                                          * weight's gradient [in, out] by columns where out > in measured slower) */
    ts_pool_for(p, j.by_rows ? M : N, GEMM_MIN_SPLIT, gemm_slice, &j);
}

void ts_gemm_pool(struct ts_pool *p, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, const float *B,
                  float beta, float *C) {
    blas_threads(1);
    gemm_pool(p, (gemm_job){ta, tb, true, M, N, K, A, B, beta, C, NULL, NULL, NULL});
}

/* A product split along K: each thread forms op(A) op(B) over its own run
 * of K, the first into C (with beta), the others into their own [M, N] of
 * ws; then a second job adds the partials into C by rows of C, in thread
 * order. It pays where K is long against M and N: a weight's gradient,
 * [out, in] summed over a batch's B*T rows. Split by rows of C, each
 * thread packs and streams the whole of both operands' K (the batch's
 * activations and gradients, megabytes in from L3 or memory); split along
 * K, half of each: on the char GPT (128 channels, B*T = 2048, 2 threads)
 * 0.07 to 0.4 ms less a gradient (docs/backend.md). The bounds depend only on K and the
 * pool's size, so a run gives the same bits every time; the sum differs
 * from one thread's in rounding only (as a split by rows does). */
#define SPLIT_K_RATIO 4 /* K at least this many times the larger of M and N */

static bool split_k(int threads, int64_t M, int64_t N, int64_t K) {
    return threads > 1 && K >= SPLIT_K_RATIO * (M > N ? M : N) && K >= threads * GEMM_MIN_SPLIT && M * N * K >= GEMM_PAR_MACS;
}

size_t ts_gemm_split_k_floats(int threads, int64_t M, int64_t N, int64_t K) {
    return split_k(threads, M, N, K) ? (size_t)(threads - 1) * (size_t)(M * N) : 0;
}

typedef struct split_job {
    gemm_job j;
    int parts;
    float *ws;
} split_job;

/* parts [begin, end): part s the product over K's run [K s / parts, K (s + 1) / parts) */
static void split_slice(void *ctx, int64_t begin, int64_t end) {
    const split_job *s = ctx;
    const gemm_job *j = &s->j;
    int64_t lda = j->ta ? j->M : j->K, ldb = j->tb ? j->K : j->N;
    for (int64_t q = begin; q < end; q++) {
        int64_t k0 = j->K * q / s->parts, k1 = j->K * (q + 1) / s->parts;
        const float *A = j->ta ? j->A + k0 * j->M : j->A + k0, *B = j->tb ? j->B + k0 : j->B + k0 * j->N;
        sgemm(j->ta, j->tb, j->M, j->N, k1 - k0, A, lda, B, ldb, q ? 0.0f : j->beta, q ? s->ws + (q - 1) * j->M * j->N : j->C, j->N);
    }
}

/* rows [begin, end) of C += the partials, in order */
static void split_sum(void *ctx, int64_t begin, int64_t end) {
    const split_job *s = ctx;
    int64_t N = s->j.N;
    float *c = s->j.C + begin * N;
    for (int q = 1; q < s->parts; q++) {
        const float *w = s->ws + (q - 1) * s->j.M * N + begin * N;
        for (int64_t i = 0; i < (end - begin) * N; i++) c[i] += w[i];
    }
}

void ts_gemm_pool_ws(struct ts_pool *p, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, const float *B,
                     float beta, float *C, float *ws, size_t ws_floats) {
    int threads = ts_pool_threads(p);
    size_t need = ts_gemm_split_k_floats(threads, M, N, K);
    if (!ws || !need || ws_floats < need) {
        ts_gemm_pool(p, ta, tb, M, N, K, A, B, beta, C);
        return;
    }
    blas_threads(1);
    split_job s = {{ta, tb, true, M, N, K, A, B, beta, C, NULL, NULL, NULL}, threads, ws};
    ts_pool_for(p, threads, 1, split_slice, &s);
    ts_pool_for(p, M, (16384 + N - 1) / N, split_sum, &s); /* a hand-off's worth of adds a slice */
}

void ts_gemm_pool_bias(struct ts_pool *p, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, const float *B,
                       float *C, const float *bias, float *out, const ts_out_act *act) {
    blas_threads(1);
    gemm_pool(p, (gemm_job){ta, tb, true, M, N, K, A, B, 0.0f, C, bias, out, act});
}

typedef struct batch_job {
    bool ta, tb;
    int64_t M, N, K;
    float beta;
    ts_gemm_item_fn item;
    void *ctx;
} batch_job;

static void batch_slice(void *ctx, int64_t begin, int64_t end) {
    const batch_job *j = ctx;
    for (int64_t i = begin; i < end; i++) {
        const float *A, *B;
        float *C;
        j->item(j->ctx, i, &A, &B, &C);
        ts_gemm_serial(j->ta, j->tb, j->M, j->N, j->K, A, j->ta ? j->M : j->K, B, j->tb ? j->K : j->N, j->beta, C, j->N);
    }
}

void ts_gemm_batch_pool(struct ts_pool *p, bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t count, ts_gemm_item_fn item,
                        void *ctx, float beta, bool shared_c) {
    int threads = ts_pool_threads(p);
    if (shared_c || count < threads) { /* one product at a time, each split over the pool */
        for (int64_t i = 0; i < count; i++) {
            const float *A, *B;
            float *C;
            item(ctx, i, &A, &B, &C);
            ts_gemm_pool(p, ta, tb, M, N, K, A, B, beta, C);
        }
        return;
    }
    ts_gemm_serial_begin();
    batch_job j = {ta, tb, M, N, K, beta, item, ctx};
    int64_t grain = GEMM_PAR_MACS / (M * N * K + 1) + 1; /* products per slice: a hand-off's worth of work */
    ts_pool_for(p, count, grain, batch_slice, &j);
}

void ts_gemm_naive(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A,
                   const float *B, float beta, float *C) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++) {
                float a = ta ? A[k * M + i] : A[i * K + k];
                float b = tb ? B[j * K + k] : B[k * N + j];
                acc += (double)a * b;
            }
            C[i * N + j] = (float)(beta == 0.0f ? acc : beta * C[i * N + j] + acc);
        }
}

void ts_gemm_set_threads(int n) { atomic_store_explicit(&g_threads, n < 1 ? 1 : n, memory_order_relaxed); }
