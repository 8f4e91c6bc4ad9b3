/* bf16_gemm.h -- a bf16 model's matmuls multiplied with the CPU's bf16
 * instructions: OpenBLAS's cblas_sbgemm (bf16 operands, f32 accumulation
 * and output), looked up at run time in the OpenBLAS the process loaded
 * (built with BUILD_BFLOAT16; Debian's 0.3.21 is not), taken where the CPU
 * has avx512_bf16. TS_BF16_GEMM=sbgemm takes it on any CPU (OpenBLAS then
 * runs its scalar fallback: for tests), =f32 never; elsewhere the matmuls
 * widen their bf16 cells to f32 and run the f32 GEMM (cpu.c), which gives
 * the same products (two bf16 numbers multiply exactly in f32) summed in
 * another order. */
#ifndef TS_BF16_GEMM_H
#define TS_BF16_GEMM_H

#include <stdbool.h>
#include <stdint.h>

struct ts_pool;

/* whether the bf16 matmuls go through sbgemm (decided once) */
bool ts_cpu_bf16_gemm_on(void);
/* "sbgemm" or "f32", and why, for ts_cpu_features */
const char *ts_cpu_bf16_gemm_route(void);
/* C[M,N] = A[M,K] op(B) with A, B in bf16 cells (B [N,K] when tb, else
 * [K,N]), split over the pool's rows; with bias, out[i, :] = C[i, :] +
 * bias[:] as the fused Add computes it (out may be C). Only when
 * ts_cpu_bf16_gemm_on(). */
void ts_cpu_bf16_gemm(struct ts_pool *p, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t *A, const uint16_t *B, float *C,
                      const float *bias, float *out);

#endif
