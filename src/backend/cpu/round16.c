/* round16.c -- the CPU's kernels for the 16-bit floats (core/half.h): f32
 * values rounded onto bf16's or f16's grid (kept in f32, or packed into
 * 16-bit cells), and 16-bit cells widened back to f32, eight values per
 * instruction where the CPU has AVX2 (bf16, by bits; sixteen where the
 * kernel level is avx512) and F16C (f16, by the hardware's conversion,
 * round to nearest even); elsewhere, and for
 * the tails, core/half.c's scalar twins, which give the same bits. Big
 * tensors are split over the pool. */
#include "backend/cpu/cpu.h"

#include "backend/cpu/cpu_features.h"

#include "core/half.h"

#include <stdatomic.h>

enum { ROUND, PACK, UNPACK }; /* f32 -> f32 on the grid, f32 -> 16-bit cells, 16-bit cells -> f32 */

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#include <math.h>

/* what rounding x to r lost, for 8 values: became 0 from non-zero, Inf
 * from finite; counted per lane (a true compare is -1), summed by
 * lost_sum */
__attribute__((target("avx2"))) static inline void count_lost(__m256 x, __m256 r, __m256i *under, __m256i *over) {
    const __m256 zero = _mm256_setzero_ps(), inf = _mm256_set1_ps(INFINITY);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 ax = _mm256_andnot_ps(sign, x), ar = _mm256_andnot_ps(sign, r);
    __m256 u = _mm256_and_ps(_mm256_cmp_ps(r, zero, _CMP_EQ_OQ), _mm256_cmp_ps(x, zero, _CMP_NEQ_OQ));
    __m256 o = _mm256_and_ps(_mm256_cmp_ps(ar, inf, _CMP_EQ_OQ), _mm256_cmp_ps(ax, inf, _CMP_LT_OQ));
    *under = _mm256_sub_epi32(*under, _mm256_castps_si256(u));
    *over = _mm256_sub_epi32(*over, _mm256_castps_si256(o));
}

__attribute__((target("avx2"))) static inline int64_t lost_sum(__m256i c) {
    int32_t l[8];
    _mm256_storeu_si256((__m256i *)l, c);
    int64_t s = 0;
    for (int i = 0; i < 8; i++) s += l[i];
    return s;
}

/* the lanes' counts stay far below 2^31: summed every LOST_RUN values */
#define LOST_RUN (1 << 24)

/* 8 values rounded to bf16 (NaN quieted), as f32 bits: the high halves */
__attribute__((target("avx2"))) static inline __m256i bf16_round8(__m256 v) {
    __m256i u = _mm256_castps_si256(v);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb));
    __m256i quieted = _mm256_or_si256(u, _mm256_set1_epi32(0x00400000));
    return _mm256_and_si256(_mm256_blendv_epi8(rounded, quieted, nan), _mm256_set1_epi32((int)0xffff0000u));
}

__attribute__((target("avx2"))) static int64_t bf16_avx2(int mode, void *dst, const void *src, int64_t n, int64_t *under, int64_t *over) {
    int64_t i = 0;
    __m256i cu = _mm256_setzero_si256(), co = _mm256_setzero_si256();
    for (; i + 8 <= n; i += 8) {
        if (i % LOST_RUN == 0 && i) {
            *under += lost_sum(cu), *over += lost_sum(co);
            cu = co = _mm256_setzero_si256();
        }
        if (mode == UNPACK) {
            __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)src + i)));
            _mm256_storeu_si256((__m256i *)((float *)dst + i), _mm256_slli_epi32(h, 16));
            continue;
        }
        __m256 v = _mm256_loadu_ps((const float *)src + i);
        __m256i r = bf16_round8(v);
        count_lost(v, _mm256_castsi256_ps(r), &cu, &co);
        if (mode == ROUND) {
            _mm256_storeu_si256((__m256i *)((float *)dst + i), r);
        } else {
            __m256i h = _mm256_srli_epi32(r, 16);
            __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
            _mm_storeu_si128((__m128i *)((uint16_t *)dst + i), packed);
        }
    }
    *under += lost_sum(cu), *over += lost_sum(co);
    return i;
}

/* bf16_avx2's twin on AVX-512 (TS_CPU's level avx512): 16 values a time,
 * the same bits and counts, the lost values counted from compare masks */
__attribute__((target("avx512f,avx512bw"))) static int64_t bf16_avx512(int mode, void *dst, const void *src, int64_t n, int64_t *under,
                                                                        int64_t *over) {
    int64_t i = 0, cu = 0, co = 0;
    const __m512 zero = _mm512_setzero_ps(), inf = _mm512_set1_ps(INFINITY);
    for (; i + 16 <= n; i += 16) {
        if (mode == UNPACK) {
            __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)((const uint16_t *)src + i)));
            _mm512_storeu_si512((float *)dst + i, _mm512_slli_epi32(h, 16));
            continue;
        }
        __m512 v = _mm512_loadu_ps((const float *)src + i);
        __m512i u = _mm512_castps_si512(v);
        __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
        __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
        __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb));
        r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(u, _mm512_set1_epi32(0x00400000)));
        r = _mm512_and_si512(r, _mm512_set1_epi32((int)0xffff0000u));
        __m512 rf = _mm512_castsi512_ps(r), ar = _mm512_abs_ps(rf), ax = _mm512_abs_ps(v);
        cu += __builtin_popcount((unsigned)(_mm512_cmp_ps_mask(rf, zero, _CMP_EQ_OQ) & _mm512_cmp_ps_mask(v, zero, _CMP_NEQ_OQ)));
        co += __builtin_popcount((unsigned)(_mm512_cmp_ps_mask(ar, inf, _CMP_EQ_OQ) & _mm512_cmp_ps_mask(ax, inf, _CMP_LT_OQ)));
        if (mode == ROUND) _mm512_storeu_si512((float *)dst + i, r);
        else _mm256_storeu_si256((__m256i *)(void *)((uint16_t *)dst + i), _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
    }
    *under += cu, *over += co;
    return i;
}

__attribute__((target("avx2,f16c"))) static int64_t f16_f16c(int mode, void *dst, const void *src, int64_t n, int64_t *under, int64_t *over) {
    int64_t i = 0;
    __m256i cu = _mm256_setzero_si256(), co = _mm256_setzero_si256();
    for (; i + 8 <= n; i += 8) {
        if (i % LOST_RUN == 0 && i) {
            *under += lost_sum(cu), *over += lost_sum(co);
            cu = co = _mm256_setzero_si256();
        }
        if (mode == UNPACK) {
            _mm256_storeu_ps((float *)dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)src + i))));
            continue;
        }
        __m256 v = _mm256_loadu_ps((const float *)src + i);
        __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m256 r = _mm256_cvtph_ps(h);
        count_lost(v, r, &cu, &co);
        if (mode == ROUND) _mm256_storeu_ps((float *)dst + i, r);
        else _mm_storeu_si128((__m128i *)((uint16_t *)dst + i), h);
    }
    *under += lost_sum(cu), *over += lost_sum(co);
    return i;
}

static int simd_level(void) { /* 0 none, 1 AVX2, 2 AVX2 and F16C; asked once */
    static int level = -1;
    int l = __atomic_load_n(&level, __ATOMIC_RELAXED);
    if (l < 0) { /* threads that race here compute the same answer */
        __builtin_cpu_init();
        l = __builtin_cpu_supports("avx2") ? 1 : 0;
        unsigned a, b, c, d; /* F16C from CPUID (older clangs' cpu_supports lacks the name) */
        if (l && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C)) l = 2;
        __atomic_store_n(&level, l, __ATOMIC_RELAXED);
    }
    return l;
}
#endif

/* One slice [0, n) of any mode: vectors first, the scalar twin for the rest. */
static void convert(int mode, ts_dtype t, void *dst, const void *src, int64_t n, ts_half_loss *loss) {
    int64_t done = 0, under = 0, over = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    int level = simd_level();
    if (t == TS_BF16 && ts_cpu_level() >= TS_CPU_AVX512) done = bf16_avx512(mode, dst, src, n, &under, &over);
    else if (t == TS_BF16 && level >= 1) done = bf16_avx2(mode, dst, src, n, &under, &over);
    else if (t == TS_F16 && level >= 2) done = f16_f16c(mode, dst, src, n, &under, &over);
#endif
    ts_half_loss tail = {under, over};
    if (mode == ROUND) {
        ts_round_half(t, (float *)dst + done, (const float *)src + done, n - done, &tail);
    } else if (mode == PACK) {
        const float *x = src;
        uint16_t *h = dst;
        for (int64_t i = done; i < n; i++) { /* the tail, or every value without the vector units */
            float r;
            ts_round_half(t, &r, &x[i], 1, &tail); /* counts what the packing loses */
            h[i] = t == TS_BF16 ? ts_f32_to_bf16(x[i]) : ts_f32_to_f16(x[i]);
        }
    } else {
        const uint16_t *h = src;
        float *y = dst;
        for (int64_t i = done; i < n; i++) y[i] = t == TS_BF16 ? ts_bf16_to_f32(h[i]) : ts_f16_to_f32(h[i]);
    }
    if (loss) {
        loss->underflow += tail.underflow;
        loss->overflow += tail.overflow;
    }
}

/* ---- over the pool */

#define GRAIN (1 << 14) /* values a thread converts at least */

typedef struct job {
    int mode;
    ts_dtype t;
    void *dst;
    const void *src;
    _Atomic int64_t underflow, overflow;
} job;

static void slice(void *ctx, int64_t begin, int64_t end) {
    job *j = ctx;
    size_t din = j->mode == PACK ? sizeof(uint16_t) : sizeof(float), sin = j->mode == UNPACK ? sizeof(uint16_t) : sizeof(float);
    ts_half_loss l = {0, 0};
    convert(j->mode, j->t, (char *)j->dst + (size_t)begin * din, (const char *)j->src + (size_t)begin * sin, end - begin, &l);
    if (l.underflow) atomic_fetch_add_explicit(&j->underflow, l.underflow, memory_order_relaxed);
    if (l.overflow) atomic_fetch_add_explicit(&j->overflow, l.overflow, memory_order_relaxed);
}

static void on_pool(ts_pool *pool, int mode, ts_dtype t, void *dst, const void *src, int64_t n, ts_half_loss *lost) {
    job j = {.mode = mode, .t = t, .dst = dst, .src = src};
    atomic_init(&j.underflow, 0);
    atomic_init(&j.overflow, 0);
    ts_pool_for(pool, n, GRAIN, slice, &j);
    if (lost) {
        lost->underflow += atomic_load_explicit(&j.underflow, memory_order_relaxed);
        lost->overflow += atomic_load_explicit(&j.overflow, memory_order_relaxed);
    }
}

void ts_cpu_round_half_pool(ts_pool *pool, ts_dtype t, float *dst, const float *x, int64_t n, ts_half_loss *lost) {
    on_pool(pool, ROUND, t, dst, x, n, lost);
}

void ts_cpu_pack_half(ts_pool *pool, ts_dtype t, uint16_t *dst, const float *x, int64_t n, ts_half_loss *lost) {
    on_pool(pool, PACK, t, dst, x, n, lost);
}

void ts_cpu_unpack_half(ts_pool *pool, ts_dtype t, float *dst, const uint16_t *h, int64_t n) { on_pool(pool, UNPACK, t, dst, h, n, NULL); }
