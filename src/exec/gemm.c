/* gemm.c -- matrix products. OpenBLAS does the work; the naive loop is the
 * oracle the tests compare it with. */
#include "exec/gemm.h"

#include <cblas.h>

void openblas_set_num_threads(int num_threads);

void ts_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, const float *B,
             float beta, float *C) {
    int lda = (int)(ta ? M : K), ldb = (int)(tb ? K : N);
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)M, (int)N, (int)K, 1.0f, A, lda, B, ldb, beta, C, (int)N);
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

void ts_gemm_set_threads(int n) { openblas_set_num_threads(n < 1 ? 1 : n); }
