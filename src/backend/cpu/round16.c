/* round16.c -- the CPU's kernel for rounding f32 values onto bf16's or
 * f16's grid (the Cast op and 16-bit gradients), eight values per
 * instruction where the CPU has AVX2 (bf16, by bits) and F16C (f16, by
 * the hardware's conversion, round to nearest even); elsewhere, and for
 * the tail, core/half.c's scalar twin, which gives the same bits. */
#include "backend/cpu/cpu.h"

#include "core/half.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <math.h>

/* what rounding x to r lost, for 8 values: became 0 from non-zero, Inf from finite */
__attribute__((target("avx2"))) static inline void count_lost(__m256 x, __m256 r, int64_t *under, int64_t *over) {
    const __m256 zero = _mm256_setzero_ps(), inf = _mm256_set1_ps(INFINITY);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 ax = _mm256_andnot_ps(sign, x), ar = _mm256_andnot_ps(sign, r);
    __m256 u = _mm256_and_ps(_mm256_cmp_ps(r, zero, _CMP_EQ_OQ), _mm256_cmp_ps(x, zero, _CMP_NEQ_OQ));
    __m256 o = _mm256_and_ps(_mm256_cmp_ps(ar, inf, _CMP_EQ_OQ), _mm256_cmp_ps(ax, inf, _CMP_LT_OQ));
    *under += __builtin_popcount((unsigned)_mm256_movemask_ps(u));
    *over += __builtin_popcount((unsigned)_mm256_movemask_ps(o));
}

__attribute__((target("avx2"))) static int64_t round_bf16_avx2(float *dst, const float *x, int64_t n, int64_t *under, int64_t *over) {
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf_bits = _mm256_set1_epi32(0x7f800000);
    const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1), quiet = _mm256_set1_epi32(0x00400000);
    const __m256i high = _mm256_set1_epi32((int)0xffff0000u);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256i u = _mm256_castps_si256(v);
        __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf_bits);
        __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
        __m256i rounded = _mm256_and_si256(_mm256_add_epi32(u, _mm256_add_epi32(bias, lsb)), high);
        __m256i quieted = _mm256_and_si256(_mm256_or_si256(u, quiet), high);
        __m256 r = _mm256_castsi256_ps(_mm256_blendv_epi8(rounded, quieted, nan));
        count_lost(v, r, under, over);
        _mm256_storeu_ps(dst + i, r);
    }
    return i;
}

__attribute__((target("avx2,f16c"))) static int64_t round_f16_f16c(float *dst, const float *x, int64_t n, int64_t *under, int64_t *over) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256 r = _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        count_lost(v, r, under, over);
        _mm256_storeu_ps(dst + i, r);
    }
    return i;
}

static int simd_level(void) { /* 0 none, 1 AVX2, 2 AVX2 and F16C; asked once */
    static int level = -1;
    int l = __atomic_load_n(&level, __ATOMIC_RELAXED);
    if (l < 0) { /* threads that race here compute the same answer */
        __builtin_cpu_init();
        l = __builtin_cpu_supports("avx2") ? 1 : 0;
        if (l && __builtin_cpu_supports("f16c")) l = 2;
        __atomic_store_n(&level, l, __ATOMIC_RELAXED);
    }
    return l;
}
#endif

void ts_cpu_round_half(ts_dtype t, float *dst, const float *x, int64_t n, ts_half_loss *loss) {
    int64_t done = 0, under = 0, over = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    int level = simd_level();
    if (t == TS_BF16 && level >= 1) done = round_bf16_avx2(dst, x, n, &under, &over);
    else if (t == TS_F16 && level >= 2) done = round_f16_f16c(dst, x, n, &under, &over);
#endif
    ts_half_loss tail = {under, over};
    ts_round_half(t, dst + done, x + done, n - done, &tail);
    if (loss) {
        loss->underflow += tail.underflow;
        loss->overflow += tail.overflow;
    }
}
