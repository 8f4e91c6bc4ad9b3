/* stats_vec.h -- the summaries' vector arithmetic, shared by stats.c and by
 * kernels that summarise values while they compute them: the optimizer step
 * (graph/optim.c, ts_opt_update_summarised) sums the gradient it reads and
 * the parameter it writes from registers, so the summaries' arithmetic hides
 * under the update's memory traffic. GCC/Clang vector extensions: plain C
 * arithmetic on TS_STATS_VEC floats that the compiler maps to the target's
 * SIMD registers. */
#ifndef TS_OBSERVE_STATS_VEC_H
#define TS_OBSERVE_STATS_VEC_H

#include "core/stats.h"

#include <stdint.h>

/* Floats per vector: the target's widest registers. */
#if defined(__AVX512F__)
#define TS_STATS_VEC 16
#include <immintrin.h>
#elif defined(__AVX__)
#define TS_STATS_VEC 8
#include <immintrin.h>
#else
#define TS_STATS_VEC 4
#endif
typedef float ts_vfloat __attribute__((vector_size(4 * TS_STATS_VEC)));
typedef int32_t ts_vint __attribute__((vector_size(4 * TS_STATS_VEC)));
typedef uint32_t ts_vuint __attribute__((vector_size(4 * TS_STATS_VEC)));
typedef float ts_vfloat4 __attribute__((vector_size(16)));
typedef double ts_vdouble4 __attribute__((vector_size(32)));

/* min, max (a < b ? a : b, as C's ternary) and a * b + c on vectors: one
 * instruction each where the target has it, else compare-and-select and
 * the plain (not contracted, ISO C) multiply-add. */
#if TS_STATS_VEC == 16
#define TS_VMIN(a, b) _mm512_min_ps(a, b)
#define TS_VMAX(a, b) _mm512_max_ps(a, b)
#define TS_VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#elif TS_STATS_VEC == 8
#define TS_VMIN(a, b) _mm256_min_ps(a, b)
#define TS_VMAX(a, b) _mm256_max_ps(a, b)
#ifdef __FMA__
#define TS_VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#endif
#endif
#ifndef TS_VMIN
static inline ts_vfloat vselect(ts_vint m, ts_vfloat a, ts_vfloat b) { return (ts_vfloat)(((ts_vint)a & m) | ((ts_vint)b & ~m)); }
#define TS_VMIN(a, b) vselect((a) < (b), a, b)
#define TS_VMAX(a, b) vselect((a) > (b), a, b)
#endif
#ifndef TS_VFMA
#define TS_VFMA(a, b, c) ((a) * (b) + (c))
#endif
/* a + b on vectors, rounded once as the addition is (a * 1 is exact: the
 * same bits), issued as a multiply-add where the target has one: AMD Zen's
 * additions, min and max share two pipes and its multiply-adds two others,
 * so a summary's additions can be split between them. */
#if TS_STATS_VEC == 16 || defined(__FMA__)
#define TS_VADD_FMA(a, b) ((ts_vfloat)TS_VFMA(a, (ts_vfloat){0} + 1.0f, b))
#else
#define TS_VADD_FMA(a, b) ((a) + (b))
#endif
/* v held in a register from here on: the compiler may not read it from
 * memory again for each instruction that uses it (GCC folds a vector it
 * loaded into each use as a memory operand, four loads a vector where the
 * target issues one 512-bit load a cycle). */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define TS_VKEEP(v) __asm__("" : "+v"(v))
#else
#define TS_VKEEP(v) ((void)0)
#endif
/* correctly rounded square root of each lane, as sqrtf */
#if TS_STATS_VEC == 16
#define TS_VSQRT(a) _mm512_sqrt_ps(a)
#elif TS_STATS_VEC == 8
#define TS_VSQRT(a) _mm256_sqrt_ps(a)
#else
static inline ts_vfloat ts_vsqrt_lanes(ts_vfloat a) {
    for (int j = 0; j < TS_STATS_VEC; j++) a[j] = __builtin_sqrtf(a[j]);
    return a;
}
#define TS_VSQRT(a) ts_vsqrt_lanes(a)
#endif

/* -1 in the lanes of v that are +0 or -0, else 0: twice the bits is 0
 * for those alone, and an integer compare runs on any of the vector
 * pipes, where a float compare competes with the sums' additions and the
 * min and max (AMD Zen 3: two pipes for those, four for integer work). */
static inline ts_vint ts_vzero(ts_vfloat v) {
    ts_vuint u = (ts_vuint)v;
    return u + u == 0;
}

/* A count of the zeros (+0 and -0) among vectors' lanes. On AVX-512 a
 * scalar: one test of each vector into a mask register, counted by a
 * popcount on the integer pipes, where a count in vector lanes (ts_vzero
 * and an add) took four vector instructions a vector -- close to half
 * of a stats pass's vector work (the MLP's activations at batch 32, and
 * the optimizer step's summaries). Else vector lanes counting down. */
#if TS_STATS_VEC == 16
typedef int64_t ts_vzcount;
static inline void ts_vz_add(ts_vzcount *z, ts_vfloat v) {
    *z += __builtin_popcount(_mm512_testn_epi32_mask((__m512i)v, _mm512_set1_epi32(0x7fffffff)));
}
static inline int64_t ts_vz_total(ts_vzcount z) { return z; }
#else
typedef ts_vint ts_vzcount;
static inline void ts_vz_add(ts_vzcount *z, ts_vfloat v) { *z += ts_vzero(v); }
static inline int64_t ts_vz_total(ts_vzcount z) {
    int64_t t = 0;
    for (int j = 0; j < TS_STATS_VEC; j++) t -= z[j]; /* true is -1 */
    return t;
}
#endif

/* One tensor's sums, lane by lane, while a kernel computes it: d = x - c
 * and d^2 summed in float over a run of at most TS_VACC_RUN vectors
 * (TS_VACC_RUN_FMA with ts_vacc_add2_fma), then in double; min and max of
 * x; the zeros (ts_vzcount).
 * Vectors come two at a time where they can (ts_vacc_add2: a lane's float
 * chain is then 32 long, the error of block_fast's runs; ts_vacc_add2_fma:
 * its squares in two chains of 128 multiply-adds, each rounded once, its
 * sums one chain of 128 pairs; a one-chain run of 128 failed test_watch's
 * 1e-7 on the std, and each run's bookkeeping (its NaN check, its sums
 * into double) cost the optimizer's fused step 8% at runs of 64: SGD over
 * 142,155 values, 24.2 us against 22.6 at 256). A run with NaN or Inf is
 * dropped whole (ts_vacc_run_end), and the caller summarises its values
 * from memory with ts_stats_partial_add. */
typedef struct ts_vacc {
    ts_vfloat s, q, q2, mn, mx; /* q2: ts_vacc_add2_fma's second chain of squares */
    ts_vzcount z;
    ts_vdouble4 ds[TS_STATS_VEC / 4], dq[TS_STATS_VEC / 4];
    int64_t n; /* values in the runs kept */
} ts_vacc;
/* The extremes and zeros before a run, to drop it. */
typedef struct ts_vacc_mark {
    ts_vfloat mn, mx;
    ts_vzcount z;
} ts_vacc_mark;
#define TS_VACC_RUN 64
#define TS_VACC_RUN_FMA 256

static inline void ts_vacc_start(ts_vacc *a) {
    *a = (ts_vacc){.n = 0};
    a->mn = (ts_vfloat){0} + __builtin_inff();
    a->mx = (ts_vfloat){0} - __builtin_inff();
}

static inline ts_vacc_mark ts_vacc_run_begin(ts_vacc *a) {
    a->s = a->q = a->q2 = (ts_vfloat){0};
    return (ts_vacc_mark){a->mn, a->mx, a->z};
}

static inline void ts_vacc_add(ts_vacc *a, ts_vfloat v, ts_vfloat c) {
    TS_VKEEP(v);
    ts_vfloat d = v - c;
    a->s += d;
    a->q = TS_VFMA(d, d, a->q);
    a->mn = TS_VMIN(v, a->mn);
    a->mx = TS_VMAX(v, a->mx);
    ts_vz_add(&a->z, v);
}

/* Two vectors at once: their sums and squares are added to each other
 * first (a tree), so a lane's float run is half as long a chain. */
static inline void ts_vacc_add2(ts_vacc *a, ts_vfloat v0, ts_vfloat v1, ts_vfloat c) {
    TS_VKEEP(v0);
    TS_VKEEP(v1);
    ts_vfloat d0 = v0 - c, d1 = v1 - c;
    a->s += d0 + d1;
    a->q += TS_VFMA(d1, d1, d0 * d0);
    a->mn = TS_VMIN(TS_VMIN(v0, v1), a->mn);
    a->mx = TS_VMAX(TS_VMAX(v0, v1), a->mx);
    ts_vz_add(&a->z, v0);
    ts_vz_add(&a->z, v1);
}

/* The same with the squares going straight into q and q2 by two
 * multiply-adds, which run on the multiply pipes: on AMD Zen 3 the
 * additions, min, max and float compares share two other pipes, the
 * bottleneck of the plain SGD and Adam updates with their summaries (the
 * MLP's fc1 SGD step with both summaries: 72 to 69 us; Adam's 171 to 168).
 * Runs of TS_VACC_RUN_FMA vectors: each of the two chains TS_VACC_RUN_FMA
 * / 2 products a lane, each rounded once. SGD with momentum keeps the
 * tree: its loop, one state array more, was 16% slower this way. */
static inline void ts_vacc_add2_fma(ts_vacc *a, ts_vfloat v0, ts_vfloat v1, ts_vfloat c) {
    TS_VKEEP(v0);
    TS_VKEEP(v1);
    ts_vfloat d0 = v0 - c, d1 = v1 - c;
    a->s = TS_VADD_FMA(d0 + d1, a->s);
    a->q = TS_VFMA(d0, d0, a->q);
    a->q2 = TS_VFMA(d1, d1, a->q2);
    a->mn = TS_VMIN(TS_VMIN(v0, v1), a->mn);
    a->mx = TS_VMAX(TS_VMAX(v0, v1), a->mx);
    ts_vz_add(&a->z, v0);
    ts_vz_add(&a->z, v1);
}

/* Whether a run's float sums s and q are finite in every lane (no NaN or
 * Inf among its values, no square beyond float's range). */
static inline bool ts_vsums_finite(ts_vfloat s, ts_vfloat q) {
    ts_vfloat t = (s + q) * 0.0f; /* Inf * 0 and NaN are NaN */
#if TS_STATS_VEC == 16 /* one compare into a mask register, not a test of each lane */
    return !_mm512_cmp_ps_mask(t, (ts_vfloat){0}, _CMP_NEQ_UQ);
#elif TS_STATS_VEC == 8
    return !_mm256_movemask_ps((__m256)(t != 0.0f));
#else
    ts_vint bad = t != 0.0f;
    int any = 0;
    for (int j = 0; j < TS_STATS_VEC; j++) any |= bad[j];
    return !any;
#endif
}

/* Adds a run's float sums to the double lanes ds and dq. */
static inline void ts_vsums_keep(ts_vdouble4 *ds, ts_vdouble4 *dq, ts_vfloat s, ts_vfloat q) {
    ts_vfloat4 hs[TS_STATS_VEC / 4], hq[TS_STATS_VEC / 4];
    __builtin_memcpy(hs, &s, sizeof hs);
    __builtin_memcpy(hq, &q, sizeof hq);
    for (int h = 0; h < TS_STATS_VEC / 4; h++) {
        ds[h] += __builtin_convertvector(hs[h], ts_vdouble4);
        dq[h] += __builtin_convertvector(hq[h], ts_vdouble4);
    }
}

/* A run's sums left out, its extremes and zeros back to the mark. */
static inline void ts_vacc_run_drop(ts_vacc *a, ts_vacc_mark m) {
    a->mn = m.mn;
    a->mx = m.mx;
    a->z = m.z;
}

/* A run of n values kept. */
static inline void ts_vacc_run_keep(ts_vacc *a, int64_t n) {
    ts_vsums_keep(a->ds, a->dq, a->s, a->q);
    a->n += n;
}

/* Keeps the run of n values (true) or, when its sums are not finite (a NaN
 * or Inf in it), drops it (false). */
static inline bool ts_vacc_run_end(ts_vacc *a, ts_vacc_mark m, int64_t n) {
    a->q += a->q2;
    if (!ts_vsums_finite(a->s, a->q)) {
        ts_vacc_run_drop(a, m);
        return false;
    }
    ts_vacc_run_keep(a, n);
    return true;
}

/* Ends the run of the n values at x: kept, or, holding NaN or Inf,
 * summarised from memory into p instead (NULL: that summary not wanted). */
static inline void ts_vacc_run_close(ts_vacc *a, ts_vacc_mark m, ts_stats_partial *p, const float *x, int64_t n) {
    if (!ts_vacc_run_end(a, m, n) && p) ts_stats_partial_add(p, x, n);
}

/* Adds the kept runs to st (shifted by st->c) and counts them in p. */
void ts_vacc_finish(const ts_vacc *a, ts_stats_stream *st, ts_stats_partial *p);

/* The Relu's side of a run beside x's ts_vacc: the sums of its values'
 * deviations and squares, in float over the run and in double lanes
 * after. Its extremes need no lanes of their own: a Relu's min is x's
 * where x's is positive, else 0; its max likewise. */
typedef struct ts_relu_acc {
    ts_vfloat s, q;
    ts_vdouble4 ds[TS_STATS_VEC / 4], dq[TS_STATS_VEC / 4];
} ts_relu_acc;

/* One work item's sums (core/stats.h's ts_stats_sums) over the rows a
 * kernel writes it in (a BatchNorm's channel: a row a sample), and its
 * Relu's: kept in vector lanes from row to row and added to the sums once
 * at the end, what ts_stats_sums_add over each row gives (to rounding)
 * without a call's setup per row, which cost more than the sums on rows
 * of a hundred values. Each call takes a block of rows (n values each,
 * stride apart) while they sit in L1:
 *
 *     ts_sums_rows r;
 *     ts_sums_rows_start(&r, &sums[c], relu ? &relu_sums[c] : NULL);
 *     for each block: ts_sums_rows_add(&r, first, rows, n, stride); // before a Relu writes over them
 *     ts_sums_rows_finish(&r);
 *
 * A run with NaN or Inf goes to ts_stats_sums_add (its Relu's too). */
typedef struct ts_sums_rows {
    ts_stats_sums *a, *ar; /* ar: the Relu's, or NULL */
    ts_vacc ax;
    ts_relu_acc ay;        /* the Relu's sums */
    ts_vzcount rz;         /* the Relu's zeros */
    int64_t zfix, rzfix;   /* the zeros the lanes counted that are not values (stats.c's rows_piece's fill) */
} ts_sums_rows;
void ts_sums_rows_start(ts_sums_rows *r, ts_stats_sums *a, ts_stats_sums *ar);
void ts_sums_rows_add(ts_sums_rows *r, const float *x, int64_t rows, int64_t n, int64_t stride);
void ts_sums_rows_finish(ts_sums_rows *r);

#endif
