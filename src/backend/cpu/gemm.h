/* gemm.h -- C[M,N] (+)= op(A) op(B) through CBLAS, and a naive version kept
 * as the test oracle. Row-major throughout. */
#ifndef TS_GEMM_H
#define TS_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* C = beta*C + op(A)[M,K] op(B)[K,N]; ta/tb: the operand is stored transposed. */
void ts_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, const float *B,
             float beta, float *C);
/* The same product split over the pool's threads (rows of C, or columns when
 * C has few rows), each slice on a one-thread OpenBLAS; small products run
 * on the calling thread. p may be NULL. Not from inside a pool slice. */
struct ts_pool;
void ts_gemm_pool(struct ts_pool *p, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, const float *B,
                  float beta, float *C);
/* ts_gemm_pool that may split the product along K over the pool's threads
 * (each thread's partial over its run of K, then summed into C in thread
 * order) where K is long against M and N, as a weight's gradient summed
 * over a batch's rows: ws holds ws_floats floats of scratch, at least
 * ts_gemm_split_k_floats(threads, M, N, K) for the split (0 where the
 * product is not split); with less (or NULL) it is ts_gemm_pool. */
size_t ts_gemm_split_k_floats(int threads, int64_t M, int64_t N, int64_t K);
void ts_gemm_pool_ws(struct ts_pool *p, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, const float *B,
                     float beta, float *C, float *ws, size_t ws_floats);
/* ts_gemm_pool with beta 0 that also adds a bias row to the product, each
 * slice right after its product while it is in cache (a Linear's bias Add
 * in the product's output pass): out[i, :] = C[i, :] + bias[:], the float
 * sums the Add computes. out may be C; otherwise C keeps the product.
 * act non-NULL: its op over out's slice after the bias, in the same
 * pass (a Linear's Relu or GELU): act->out = f(out), act->out may be out. */
struct ts_out_act;
void ts_gemm_pool_bias(struct ts_pool *p, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, const float *B,
                       float *C, const float *bias, float *out, const struct ts_out_act *act);
/* `count` products C_i = beta*C_i + op(A_i)[M,K] op(B_i)[K,N] of one shape
 * (a batched matmul): item(ctx, i, &A, &B, &C) names the operands of
 * product i. The products are split over the pool's threads, each on a
 * one-thread OpenBLAS, without copying an operand; shared_c (several
 * products add into one C, as the gradient of a broadcast operand) runs
 * them one after another, each split over the pool. Not from inside a pool
 * slice. */
typedef void (*ts_gemm_item_fn)(void *ctx, int64_t i, const float **A, const float **B, float **C);
void ts_gemm_batch_pool(struct ts_pool *p, bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t count, ts_gemm_item_fn item,
                        void *ctx, float beta, bool shared_c);
/* Products run inside pool slices, one per thread, each on a one-thread
 * OpenBLAS: ts_gemm_serial_begin() on the thread that starts the pool job
 * (it sets OpenBLAS to one thread), then ts_gemm_serial from the slices;
 * lda, ldb, ldc: the row strides of A, B, C as stored. */
void ts_gemm_serial_begin(void);
void ts_gemm_serial(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                    float beta, float *C, int64_t ldc);
/* t[j * ldt + i] = a[i * lda + j] for the rows x cols of a (OpenBLAS's
 * out-of-place copy, from a slice as ts_gemm_serial): an operand's
 * transpose laid out for the product without a transposed side, which
 * OpenBLAS's small-matrix kernels run faster (attention's q k^T over a
 * tile, 32 x 64 x 32: 1.2 us against 1.9 with k transposed in the call,
 * the copy 0.16 us). */
void ts_transpose_serial(int64_t rows, int64_t cols, const float *a, int64_t lda, float *t, int64_t ldt);
void ts_gemm_naive(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A,
                   const float *B, float beta, float *C);
/* Threads OpenBLAS may use in ts_gemm (called once per model compile). */
void ts_gemm_set_threads(int n);

#endif
