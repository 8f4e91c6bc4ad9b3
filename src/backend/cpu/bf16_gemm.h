/* bf16_gemm.h -- a bf16 model's matmuls multiplied with the CPU's bf16
 * instructions where it has them (avx512_bf16), picked at run time:
 * OpenBLAS's cblas_sbgemm (bf16 operands, f32 accumulation and output),
 * looked up in the OpenBLAS the process loaded (built with BUILD_BFLOAT16;
 * Debian's 0.3.21 is not), else tensorscope's own kernel (bf16_avx512.c).
 * TS_BF16_GEMM=sbgemm takes sbgemm on any CPU (OpenBLAS then runs its
 * scalar fallback: for tests), =avx512bf16 the kernel (where the CPU has
 * the instructions), =f32 neither; elsewhere the matmuls widen their bf16
 * cells to f32 and run the f32 GEMM (cpu.c), which gives the same products
 * (two bf16 numbers multiply exactly in f32) summed in another order. */
#ifndef TS_BF16_GEMM_H
#define TS_BF16_GEMM_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"

struct ts_pool;

/* where the bf16 products go, picked once: OpenBLAS's cblas_sbgemm,
 * tensorscope's own avx512_bf16 kernel (bf16_avx512.c), or f32 (the
 * operands widened, the f32 GEMM) */
typedef enum ts_bf16_route { TS_BF16_ROUTE_F32, TS_BF16_ROUTE_SBGEMM, TS_BF16_ROUTE_AVX512BF16 } ts_bf16_route;
/* TS_BF16_GEMM's value: NULL, "" or "auto" AUTO, else the route it
 * names (any case); *known false for a value it does not name (then AUTO) */
typedef enum ts_bf16_want { TS_BF16_WANT_AUTO, TS_BF16_WANT_F32, TS_BF16_WANT_SBGEMM, TS_BF16_WANT_AVX512BF16 } ts_bf16_want;
ts_bf16_want ts_cpu_bf16_want_parse(const char *value, bool *known);
/* whether the kernel can run: the build or the CPU lacks avx512_bf16, the
 * CPU has it but TS_CPU keeps the level below avx512, or it can */
typedef enum ts_bf16_kernel { TS_BF16K_ABSENT, TS_BF16K_CAPPED, TS_BF16K_READY } ts_bf16_kernel;
/* the route for an OpenBLAS with or without sbgemm, the kernel's state and
 * what TS_BF16_GEMM asks; why: the reason shown after the route's name
 * ("" or " (...)"); warn: what to log where the request cannot be met,
 * else NULL */
typedef struct ts_bf16_pick {
    ts_bf16_route route;
    const char *why, *warn;
} ts_bf16_pick;
ts_bf16_pick ts_cpu_bf16_route_pick(bool have_sbgemm, ts_bf16_kernel kernel, ts_bf16_want want);
/* the route this process took */
ts_bf16_route ts_cpu_bf16_route(void);
/* whether the bf16 matmuls go through sbgemm or the kernel (decided once) */
bool ts_cpu_bf16_gemm_on(void);
/* "sbgemm", "avx512bf16" or "f32", and why, for ts_cpu_features */
const char *ts_cpu_bf16_gemm_route(void);
struct ts_out_act;
/* C[M,N] = A[M,K] op(B) with A, B in bf16 cells (B [N,K] when tb, else
 * [K,N]), split over the pool; with bias, out[i, :] = C[i, :] + bias[:]
 * as the fused Add computes it (out may be C), and with act too (a
 * Linear's Relu or GELU, gemm.h's ts_gemm_pool_bias) act->out = f(out)
 * after it, each piece while in cache. Only when
 * ts_cpu_bf16_gemm_on(); false (nothing written) when it found no memory
 * for the packed operands: the caller widens to f32 instead. ws: the
 * kernels' workspace of ts_cpu_bf16_gemm_floats floats (compile plans it:
 * the step allocates nothing), or NULL: allocated for the call. */
bool ts_cpu_bf16_gemm(struct ts_pool *p, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t *A, const uint16_t *B, float *C,
                      const float *bias, float *out, const struct ts_out_act *act, float *ws);
/* the floats of workspace the kernel's products of a matmul [M,K] x
 * [K,N] and of its gradients take on threads threads (0 off its route) */
size_t ts_cpu_bf16_gemm_floats(int64_t M, int64_t N, int64_t K, int threads);

/* the gradients of C = A op(B), A [M,K] and B in bf16 cells (B [N,K]
 * when tb, else [K,N]), dC f32: dA = beta_a dA + dC op(B)^T, dB = beta_b
 * dB + A^T dC (dC^T A when tb), each where not NULL (beta 1 adds, 0
 * stores), through the kernel with dC rounded to
 * bf16 for the products (as PyTorch's autocast multiplies a bf16 matmul's
 * gradients). Returns those it added (1 dA, 2 dB): none where the route is
 * not the kernel, and not one that found no memory; the caller widens to
 * f32 for the others. room: M N bf16 cells for dC's rounded copy (the
 * node's ts_cpu_grad_room), or NULL: the products round dC as they pack it. */
unsigned ts_cpu_bf16_gemm_backward(struct ts_pool *p, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t *A, const uint16_t *B,
                                   const float *dC, float *dA, float beta_a, float *dB, float beta_b, uint16_t *room, float *ws);

/* a batched matmul (TS_OP_BATCH_MATMUL's shapes: C [..., M, N] = op(A)
 * op(B), A [..., M, K] or [..., K, M] when ta, B [..., K, N] or
 * [..., N, K] when tb) with A, B in bf16 cells, each product through the
 * kernel on one thread, the pool splitting the batch. Only on the
 * kernel's route, and only where A's and B's batch dims are C's (none
 * broadcast); false (nothing written) elsewhere or when it found no
 * memory: the caller widens to f32 instead. */
bool ts_cpu_bf16_bmm(struct ts_pool *p, bool ta, bool tb, const ts_shape *sc, const ts_shape *sa, const ts_shape *sb, const uint16_t *A,
                     const uint16_t *B, float *C, float *ws);
/* the floats of workspace (ws above, as ts_cpu_bf16_gemm's) a batched
 * matmul C (sc) of A (sa) and its gradients take on threads threads */
size_t ts_cpu_bf16_bmm_floats(const ts_shape *sc, const ts_shape *sa, int threads);
/* its gradients, added into dA and dB where not NULL, dC (f32) rounded to
 * bf16 for the products (as ts_cpu_bf16_gemm_backward); returns those it
 * added (1 dA, 2 dB): none where ts_cpu_bf16_bmm would be false, and not
 * one that found no memory; the caller widens to f32 for the others; room
 * as ts_cpu_bf16_gemm_backward's (dC's count M N cells) */
unsigned ts_cpu_bf16_bmm_backward(struct ts_pool *p, bool ta, bool tb, const ts_shape *sc, const ts_shape *sa, const ts_shape *sb,
                                  const uint16_t *A, const uint16_t *B, const float *dC, float *dA, float *dB, uint16_t *room, float *ws);

/* an operand of the kernel: element (r, k) at data[r * rs + k * cs], bf16
 * cells or f32 ones (rounded to bf16 to nearest even as they are packed) */
typedef struct ts_bf16_mat {
    const void *data;
    bool f32;
    int64_t rs, cs;
} ts_bf16_mat;

/* bf16_avx512.c: whether this build has the kernel (x86-64, a compiler
 * with avx512_bf16), and the kernel: C[M,N] = beta C + sum over k of
 * A(i, k) B(j, k), each product of two bf16 numbers exact, summed in f32;
 * ldc C's (and out's) row stride; with bias, out = C + bias[:] after,
 * and act non-NULL (with bias): act->out = f(out) after that, each block
 * of rows as its sums are done (act->out of ldc strides too).
 * TS_ERR_OUT_OF_MEMORY (C untouched) when the packed operands found no
 * memory. Only on a CPU with avx512_bf16. */
bool ts_bf16k_built(void);
ts_status ts_bf16k_gemm(struct ts_pool *p, int64_t M, int64_t N, int64_t K, ts_bf16_mat A, ts_bf16_mat B, float beta, float *C,
                        int64_t ldc, const float *bias, float *out, const struct ts_out_act *act);
/* the same in ws (64-byte aligned, ts_bf16k_gemm_words(N, K, the pool's
 * threads) words: B packed, then each slice's blocks of A), allocating
 * nothing; ts_bf16k_gemm allocates it for the call */
size_t ts_bf16k_gemm_words(int64_t N, int64_t K, int threads);
ts_status ts_bf16k_gemm_ws(struct ts_pool *p, int64_t M, int64_t N, int64_t K, ts_bf16_mat A, ts_bf16_mat B, float beta, float *C,
                           int64_t ldc, const float *bias, float *out, const struct ts_out_act *act, uint32_t *ws);

/* the kernel on the calling thread, its packed operands in ws (64-byte
 * aligned, ts_bf16k_serial_words(N, K) words); no bias */
size_t ts_bf16k_serial_words(int64_t N, int64_t K);
void ts_bf16k_gemm_serial(int64_t M, int64_t N, int64_t K, ts_bf16_mat A, ts_bf16_mat B, float beta, float *C, int64_t ldc,
                          uint32_t *ws);

/* src's n values rounded to bf16 to nearest even (NaNs quiet) into
 * dst's cells, the bits the kernel's packing rounds an f32 operand to;
 * split over the pool. Only where the kernel is built. */
void ts_bf16k_round(struct ts_pool *p, uint16_t *dst, const float *src, int64_t n);

#endif
