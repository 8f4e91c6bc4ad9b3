/* stats.c -- one fused pass of summaries over an f32 tensor (docs/observation.md#summaries).
 *
 * The data is walked in blocks of TS_STATS_BLOCK floats. Each block first
 * takes a branch-free pass that gcc vectorises: per-lane double sums of
 * d = x - c and d^2 (c = the running mean, so no cancellation however large
 * the offset), float min/max and a zero count (blocks are bigger when only
 * these are asked for). A NaN or Inf anywhere in the
 * block makes those sums non-finite -- that is the only test -- and the block
 * is then redone through the same lanes with each value classified by its
 * bits (still branch-free: a causal mask's -inf fills half of every masked
 * attention score); only a finite d^2 beyond float's range (a masked
 * score's finite -1e30) needs the pass in double lanes, which the rest of
 * the tensor then takes at once. Blocks are merged with Chan's update. Histograms and range counts,
 * when asked for, run over the same block while it is in L1. */
#include "core/stats.h"
#include "core/stats_vec.h"

#include <float.h>
#include <stddef.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#define TS_STATS_RUN 16         /* block_fast: float partial sums per lane before going double */
#define TS_STATS_BLOCK 4096     /* stays in L1 for the histogram/range passes */
#define TS_STATS_BIG_BLOCK 16384 /* stats alone: fewer merges; int32 counts fit */


/* ------------------------------------------------- TensorBoard's buckets */

static double tb_limits[TS_TB_EDGES];
/* Number of positive limits <= the lower edge of each cell of |x|'s bits
 * >> 16 (8 exponent + 7 mantissa bits: a cell spans < 1% so at most one
 * limit lies inside it). */
static int16_t tb_cell[TS_TB_CELLS];
static pthread_once_t tb_once = PTHREAD_ONCE_INIT;

static const double *tb_pos(void) { return tb_limits + TS_TB_SIDE + 2; }

/* Positive limits <= a, by binary search (the table's build and its check). */
static int tb_count_le_search(double a) {
    const double *p = tb_pos();
    int lo = 0, hi = TS_TB_SIDE;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (p[mid] <= a) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static void tb_build(void) {
    /* TensorFlow's InitDefaultBucketsInner, step for step, in double. */
    double pos[TS_TB_SIDE + 8];
    int k = 0;
    for (double v = 1.0e-12; v < 1.0e20 && k < (int)TS_ARRAY_LEN(pos); v *= 1.1) pos[k++] = v;
    /* k == TS_TB_SIDE (checked by the tests against the table's use). */
    int i = 0;
    tb_limits[i++] = -DBL_MAX;
    for (int j = k - 1; j >= 0; j--) tb_limits[i++] = -pos[j];
    tb_limits[i++] = 0.0;
    for (int j = 0; j < k; j++) tb_limits[i++] = pos[j];
    tb_limits[i++] = DBL_MAX;
    for (uint32_t c = 0; c < TS_ARRAY_LEN(tb_cell); c++)
        tb_cell[c] = (int16_t)tb_count_le_search((double)ts_bits_float(c << 16));
}

const double *ts_tb_bucket_limits(void) {
    pthread_once(&tb_once, tb_build);
    return tb_limits;
}

const int16_t *ts_tb_cells(void) {
    pthread_once(&tb_once, tb_build);
    return tb_cell;
}

/* Positive limits <= a, for a finite a > 0 whose float bits are `abits`. */
static int tb_count_le(double a, uint32_t abits) {
    const double *p = tb_pos();
    int k = tb_cell[abits >> 16];
    while (k < TS_TB_SIDE && p[k] <= a) k++;
    return k;
}

/* upper_bound for finite float values (see stats.h); layout: -DBL_MAX at 0,
 * -p[j] at SIDE - j, 0 at SIDE + 1, p[j] at SIDE + 2 + j, DBL_MAX last. */
static int tb_index_f32(float x) {
    uint32_t abits = ts_float_bits(x) & 0x7fffffffu;
    if (abits == 0) return TS_TB_SIDE + 2; /* first limit > 0 is p[0] */
    double a = fabs((double)x);
    int le = tb_count_le(a, abits);
    if (x > 0) return TS_TB_SIDE + 2 + le;
    /* x < 0: the first -p[j] > x has the largest j with p[j] < a. */
    int lt = le - (le > 0 && tb_pos()[le - 1] == a);
    return TS_TB_SIDE + 1 - lt;
}

int ts_tb_bucket_index(double x) {
    ts_tb_bucket_limits();
    if (x == 0) return TS_TB_SIDE + 2;
    double a = fabs(x);
    int le = tb_count_le_search(a);
    if (x > 0) return TS_TB_SIDE + 2 + le;
    int lt = le - (le > 0 && tb_pos()[le - 1] == a);
    return TS_TB_SIDE + 1 - lt;
}

/* ------------------------------------------------------------- moments */

typedef struct block_sums {
    int64_t n, zeros, nans, pos_infs, neg_infs;
    double s, q; /* sums of x - c and (x - c)^2 over the finite values */
    double min, max;
} block_sums;

/* Four vectors from x (unaligned loads, each held in a register:
 * TS_VKEEP) into v0..v3 and their deviations from c into d0..d3 (ncv is
 * -c; `shifted` false: c is 0, d is v), declared in the caller's block;
 * their squares added to q0..q3 (four chains), their extremes to mn and
 * mx (a tree of the four) and their zeros to z. block_fast and a work
 * item's rows (rows_piece) share it; each adds the d to its sum its own
 * way. */
#define VSUMS4(x, shifted, ncv, q0, q1, q2, q3, mn, mx, z)                                                       \
    ts_vfloat v0, v1, v2, v3;                                                                                   \
    memcpy(&v0, (x), sizeof v0);                                                                                \
    memcpy(&v1, (x) + TS_STATS_VEC, sizeof v1);                                                                 \
    memcpy(&v2, (x) + 2 * TS_STATS_VEC, sizeof v2);                                                             \
    memcpy(&v3, (x) + 3 * TS_STATS_VEC, sizeof v3);                                                             \
    TS_VKEEP(v0);                                                                                               \
    TS_VKEEP(v1);                                                                                               \
    TS_VKEEP(v2);                                                                                               \
    TS_VKEEP(v3);                                                                                               \
    ts_vfloat d0 = v0, d1 = v1, d2 = v2, d3 = v3;                                                               \
    if (shifted) d0 = TS_VADD_FMA(v0, ncv), d1 = TS_VADD_FMA(v1, ncv), d2 = TS_VADD_FMA(v2, ncv), d3 = TS_VADD_FMA(v3, ncv); \
    q0 = TS_VFMA(d0, d0, q0);                                                                                   \
    q1 = TS_VFMA(d1, d1, q1);                                                                                   \
    q2 = TS_VFMA(d2, d2, q2);                                                                                   \
    q3 = TS_VFMA(d3, d3, q3);                                                                                   \
    mn = TS_VMIN(TS_VMIN(TS_VMIN(v0, v1), TS_VMIN(v2, v3)), mn);                                                \
    mx = TS_VMAX(TS_VMAX(TS_VMAX(v0, v1), TS_VMAX(v2, v3)), mx);                                                \
    ts_vz_add(&(z), v0);                                                                                        \
    ts_vz_add(&(z), v1);                                                                                        \
    ts_vz_add(&(z), v2);                                                                                        \
    ts_vz_add(&(z), v3)

/* The vectorised pass over any n >= 1 values (at most a block), in GCC/Clang
 * vector extensions: plain C arithmetic on TS_STATS_VEC floats at a time
 * that the compiler maps to the target's SIMD registers. Each iteration
 * takes four vectors: their squares go to four independent multiply-add
 * accumulators (the multiply-add's latency hides), while their sum, min,
 * max and zero count are first reduced as a tree of the four, so one
 * accumulator of each kind keeps up (all in registers: 8 plus the four
 * values on AVX2's 16; the four loads are separate variables so the
 * compiler keeps them there). d = x - c and d^2 are formed in float and
 * summed in float over runs of TS_STATS_RUN iterations, then in double:
 * half the vector work of converting every value, for a relative error of
 * a few float ulps of each run's sum. The last n % (4 * VEC) values go
 * through one by one in the same arithmetic. A d^2 too big for a float becomes Inf and takes the (all
 * double) slow path. False when the block's sums are not finite (a NaN or
 * Inf in it, or such a d^2). */
static inline bool block_fast(const float *x, int64_t n, float c, block_sums *b) {
    enum { V = TS_STATS_VEC, STRIDE = TS_STATS_VEC * 4 };
    ts_vdouble4 s[V / 4] = {0}, q[V / 4] = {0};
    ts_vfloat mn, mx, cv = c - (ts_vfloat){0}, ncv = -cv;
    bool shifted = c != 0.0f; /* a constant where inlined (block_fast_shifted) */
    ts_vzcount z = {0};
    mn = mx = x[0] - (ts_vfloat){0};
    int64_t whole = n / STRIDE * STRIDE;
    for (int64_t r = 0; r < whole; r += TS_STATS_RUN * STRIDE) {
        ts_vfloat fs = {0}, q0 = {0}, q1 = {0}, q2 = {0}, q3 = {0};
        int64_t end = r + TS_STATS_RUN * STRIDE < whole ? r + TS_STATS_RUN * STRIDE : whole;
        for (int64_t i = r; i < end; i += STRIDE) {
            VSUMS4(x + i, shifted, ncv, q0, q1, q2, q3, mn, mx, z);
            /* fs += (d0 + d1) + (d2 + d3), with its additions split between
             * the two kinds of pipe (TS_VADD_FMA: the same bits) so that each
             * kind carries as much as the other */
            ts_vfloat t01 = shifted ? d0 + d1 : TS_VADD_FMA(d0, d1), t23 = TS_VADD_FMA(d2, d3);
            fs = TS_VADD_FMA(shifted ? t01 + t23 : TS_VADD_FMA(t01, t23), fs);
        }
        ts_vfloat fq = (q0 + q1) + (q2 + q3);
        ts_vfloat4 hs[V / 4], hq[V / 4];
        memcpy(hs, &fs, sizeof hs);
        memcpy(hq, &fq, sizeof hq);
        for (int h = 0; h < V / 4; h++) {
            s[h] += __builtin_convertvector(hs[h], ts_vdouble4);
            q[h] += __builtin_convertvector(hq[h], ts_vdouble4);
        }
    }
    double ss = 0, qq = 0;
    float lo = x[0], hi = x[0];
    int64_t zz = ts_vz_total(z);
    for (int h = 0; h < V / 4; h++)
        for (int j = 0; j < 4; j++) {
            ss += s[h][j];
            qq += q[h][j];
        }
    for (int j = 0; j < V; j++) {
        lo = mn[j] < lo ? mn[j] : lo;
        hi = mx[j] > hi ? mx[j] : hi;
    }
    for (int64_t i = whole; i < n; i++) { /* the ragged end */
        float v = x[i], d = v - c;
        ss += (double)d;
        qq += (double)(d * d);
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
        zz += v == 0.0f;
    }
    if (!isfinite(ss) || !isfinite(qq)) return false;
    memset(b, 0, sizeof *b);
    b->n = n;
    b->zeros = zz;
    b->s = ss;
    b->q = qq;
    b->min = lo;
    b->max = hi;
    return true;
}

#define MASKED_LANES 32 /* block_masked's lanes: two AVX-512 vectors of each kind, four AVX ones */
#define MASKED_VECS (MASKED_LANES / TS_STATS_VEC)

/* One vector of block_masked into the lanes of vector k: NaN and Inf (and
 * the lanes `valid` leaves out: a block's last few values) are counted or
 * left out and leave the sums, min and max alone, by selects rather than
 * branches. Each lane's arithmetic is a scalar one's (d = x - c where x is
 * finite, else 0; its sum and multiply-add square in float; its min and
 * max), so the lanes come out as one value at a time into each would. */
#if TS_STATS_VEC == 16
/* On AVX-512 the same in mask registers: the selects are masked
 * instructions and the counts popcounts of masks on the integer pipes
 * (NaN: what is neither finite nor an infinity). `valid` is a mask. */
typedef __mmask16 masked_valid;
#define MASKED_ALL ((__mmask16)0xffff)
#define MASKED_VEC(v, valid, k)                                                                          \
    do {                                                                                                 \
        __m512i u_ = _mm512_castps_si512(v), a_ = _mm512_and_si512(u_, abs_bits);                        \
        __mmask16 fin_ = _mm512_mask_cmplt_epu32_mask(valid, a_, inf_bits);                              \
        __m512 d_ = _mm512_maskz_sub_ps(fin_, v, cv);                                                    \
        fs[k] = _mm512_add_ps(fs[k], d_);                                                                \
        fq[k] = _mm512_fmadd_ps(d_, d_, fq[k]);                                                          \
        mn[k] = _mm512_mask_min_ps(mn[k], fin_, v, mn[k]);                                               \
        mx[k] = _mm512_mask_max_ps(mx[k], fin_, v, mx[k]);                                               \
        zc += __builtin_popcount(_mm512_mask_testn_epi32_mask(valid, u_, abs_bits));                     \
        fc += __builtin_popcount(fin_);                                                                  \
        pc += __builtin_popcount(_mm512_mask_cmpeq_epi32_mask(valid, u_, inf_bits));                     \
        nc += __builtin_popcount(_mm512_mask_cmpeq_epi32_mask(valid, u_, ninf_bits));                    \
        vc += __builtin_popcount(valid);                                                                 \
    } while (0)
#else
typedef ts_vint masked_valid;
#define MASKED_ALL ((ts_vint){0} - 1)
#define MASKED_VEC(v, valid, k)                                                                          \
    do {                                                                                                 \
        ts_vuint u_ = (ts_vuint)(v), a_ = u_ & 0x7fffffffu;                                              \
        ts_vint fin_ = (a_ < 0x7f800000u) & (valid);                                                     \
        ts_vfloat d_ = (ts_vfloat)((ts_vint)((v) - cv) & fin_);                                          \
        fs[k] += d_;                                                                                     \
        fq[k] = TS_VFMA(d_, d_, fq[k]);                                                                  \
        mn[k] = TS_VMIN((ts_vfloat)(((ts_vint)(v) & fin_) | ((ts_vint)pinf_v & ~fin_)), mn[k]);          \
        mx[k] = TS_VMAX((ts_vfloat)(((ts_vint)(v) & fin_) | ((ts_vint)ninf_v & ~fin_)), mx[k]);          \
        z[k] += ts_vzero(v) & (valid);                                                                   \
        f[k] += fin_;                                                                                    \
        nan[k] += (a_ > 0x7f800000u) & (valid);                                                          \
        pinf[k] += (u_ == 0x7f800000u) & (valid);                                                        \
        ninf[k] += (u_ == 0xff800000u) & (valid);                                                        \
    } while (0)
#endif

/* block_fast for a block holding NaN or Inf (a causal mask's -inf fills
 * half of a masked attention score): MASKED_LANES lanes and runs of
 * TS_STATS_RUN rows, each value classified by its bits, in vectors (one
 * value at a time through these lanes took 5x as long: 160 us for a GPT
 * layer's 524,288 masked scores). False when a finite d^2 overflows a
 * float (the double pass takes it). */
static bool block_masked(const float *x, int64_t n, float c, block_sums *b) {
    enum { V = TS_STATS_VEC, NV = MASKED_VECS };
    double s[MASKED_LANES] = {0}, q[MASKED_LANES] = {0};
    const ts_vfloat cv = c - (ts_vfloat){0}, pinf_v = (ts_vfloat){0} + INFINITY, ninf_v = -pinf_v;
    ts_vfloat mn[NV], mx[NV];
    for (int k = 0; k < NV; k++) mn[k] = pinf_v, mx[k] = ninf_v;
#if TS_STATS_VEC == 16
    const __m512i abs_bits = _mm512_set1_epi32(0x7fffffff), inf_bits = _mm512_set1_epi32(0x7f800000),
                  ninf_bits = _mm512_set1_epi32((int)0xff800000u);
    int64_t zc = 0, fc = 0, pc = 0, nc = 0, vc = 0; /* zeros, finite, +Inf, -Inf, values */
#else
    ts_vint z[NV], f[NV], nan[NV], pinf[NV], ninf[NV]; /* counted down: true is -1 */
    for (int k = 0; k < NV; k++) z[k] = f[k] = nan[k] = pinf[k] = ninf[k] = (ts_vint){0};
#endif
    int64_t rows = n / MASKED_LANES;
    for (int64_t r = 0;; r += TS_STATS_RUN) {
        ts_vfloat fs[NV], fq[NV];
        for (int k = 0; k < NV; k++) fs[k] = fq[k] = (ts_vfloat){0};
        int64_t end = r + TS_STATS_RUN < rows ? r + TS_STATS_RUN : rows;
        bool last = end == rows;
        for (int64_t i = r * MASKED_LANES; i < end * MASKED_LANES; i += MASKED_LANES)
            for (int k = 0; k < NV; k++) {
                ts_vfloat v;
                memcpy(&v, x + i + k * V, sizeof v);
                MASKED_VEC(v, MASKED_ALL, k);
            }
        if (last) /* the last n % MASKED_LANES values, into the first lanes */
            for (int k = 0; k < NV; k++) {
                int64_t at = rows * MASKED_LANES + k * V, have = n - at < V ? n - at : V;
                if (have <= 0) break;
                ts_vfloat v = {0};
                memcpy(&v, x + at, (size_t)have * sizeof(float));
#if TS_STATS_VEC == 16
                masked_valid valid = (__mmask16)((1u << have) - 1u);
#else
                masked_valid valid;
                for (int j = 0; j < V; j++) valid[j] = j < have ? -1 : 0;
#endif
                MASKED_VEC(v, valid, k);
            }
        for (int k = 0; k < NV; k++)
            for (int j = 0; j < V; j++) {
                s[k * V + j] += (double)fs[k][j];
                q[k * V + j] += (double)fq[k][j];
            }
        if (last) break;
    }
    memset(b, 0, sizeof *b);
    float lo = INFINITY, hi = -INFINITY;
    for (int j = 0; j < MASKED_LANES; j++) {
        b->s += s[j];
        b->q += q[j];
    }
    for (int k = 0; k < NV; k++)
        for (int j = 0; j < V; j++) {
            lo = mn[k][j] < lo ? mn[k][j] : lo;
            hi = mx[k][j] > hi ? mx[k][j] : hi;
        }
#if TS_STATS_VEC == 16
    b->zeros = zc, b->n = fc, b->pos_infs = pc, b->neg_infs = nc, b->nans = vc - fc - pc - nc;
#else
    for (int k = 0; k < NV; k++)
        for (int j = 0; j < V; j++) {
            b->zeros -= z[k][j];
            b->n -= f[k][j];
            b->nans -= nan[k][j];
            b->pos_infs -= pinf[k][j];
            b->neg_infs -= ninf[k][j];
        }
#endif
    b->min = lo;
    b->max = hi;
    return isfinite(b->s) && isfinite(b->q);
}
#undef MASKED_VEC
#undef MASKED_ALL
#undef MASKED_VECS
#undef MASKED_LANES

/* The pass for a block whose squares overflow a float (a finite -1e30
 * filling a masked score beside values near 1): each value classified by
 * its bits as block_masked does, d = x - c and d^2 summed in double lanes
 * (a non-finite x taken as c: it adds 0). Any length; never fails. One
 * value at a time in double, as this pass was, took 5x as long: the
 * additions' chain. */
static void block_wide(const float *x, int64_t n, float c, block_sums *b) {
    enum { V = TS_STATS_VEC, H = TS_STATS_VEC / 4 };
    ts_vdouble4 s[H], q[H];
#if TS_STATS_VEC != 16
    const ts_vdouble4 cd = (double)c - (ts_vdouble4){0};
#endif
    const ts_vfloat cv = c - (ts_vfloat){0}, pinf_v = (ts_vfloat){0} + INFINITY, ninf_v = -pinf_v;
    ts_vfloat mn = pinf_v, mx = ninf_v;
    ts_vint z = {0}, f = {0}, nan = {0}, pinf = {0}, ninf = {0}; /* counted down: true is -1 (n fits: a block) */
    for (int h = 0; h < H; h++) s[h] = q[h] = (ts_vdouble4){0};
#if TS_STATS_VEC == 16
    const __m512d cd8 = _mm512_set1_pd((double)c);
    __m512d s0 = _mm512_setzero_pd(), s1 = s0, q0 = s0, q1 = s0;
#endif
    for (int64_t i = 0; i < n; i += V) {
        ts_vfloat v = {0};
        ts_vint valid = (ts_vint){0} - 1;
        if (n - i >= V) {
            memcpy(&v, x + i, sizeof v);
        } else { /* the last few values */
            memcpy(&v, x + i, (size_t)(n - i) * sizeof(float));
            for (int j = 0; j < V; j++) valid[j] = j < n - i ? -1 : 0;
        }
        ts_vuint u = (ts_vuint)v, a = u & 0x7fffffffu;
        ts_vint fin = (a < 0x7f800000u) & valid;
        ts_vfloat vc = (ts_vfloat)(((ts_vint)v & fin) | ((ts_vint)cv & ~fin));
#if TS_STATS_VEC == 16 /* two vectors of 8 doubles, in registers */
        __m512d d0 = _mm512_sub_pd(_mm512_cvtps_pd(_mm512_castps512_ps256((__m512)vc)), cd8);
        __m512d d1 = _mm512_sub_pd(_mm512_cvtps_pd(_mm512_extractf32x8_ps((__m512)vc, 1)), cd8);
        s0 = _mm512_add_pd(s0, d0), s1 = _mm512_add_pd(s1, d1);
        q0 = _mm512_fmadd_pd(d0, d0, q0), q1 = _mm512_fmadd_pd(d1, d1, q1);
#else
        ts_vfloat4 part[H];
        memcpy(part, &vc, sizeof part);
        for (int h = 0; h < H; h++) {
            ts_vdouble4 d = __builtin_convertvector(part[h], ts_vdouble4) - cd;
            s[h] += d;
            q[h] += d * d;
        }
#endif
        mn = TS_VMIN((ts_vfloat)(((ts_vint)v & fin) | ((ts_vint)pinf_v & ~fin)), mn);
        mx = TS_VMAX((ts_vfloat)(((ts_vint)v & fin) | ((ts_vint)ninf_v & ~fin)), mx);
        z += ts_vzero(v) & valid;
        f += fin;
        nan += (a > 0x7f800000u) & valid;
        pinf += (u == 0x7f800000u) & valid;
        ninf += (u == 0xff800000u) & valid;
    }
#if TS_STATS_VEC == 16
    memcpy(s, &s0, sizeof s0), memcpy(&s[2], &s1, sizeof s1);
    memcpy(q, &q0, sizeof q0), memcpy(&q[2], &q1, sizeof q1);
#endif
    memset(b, 0, sizeof *b);
    for (int h = 0; h < H; h++)
        for (int j = 0; j < 4; j++) b->s += s[h][j], b->q += q[h][j];
    float lo = INFINITY, hi = -INFINITY;
    for (int j = 0; j < V; j++) {
        lo = mn[j] < lo ? mn[j] : lo;
        hi = mx[j] > hi ? mx[j] : hi;
        b->zeros -= z[j];
        b->n -= f[j];
        b->nans -= nan[j];
        b->pos_infs -= pinf[j];
        b->neg_infs -= ninf[j];
    }
    b->min = lo;
    b->max = hi;
}

/* Chan et al.'s parallel update of (n, mean, m2) with another set. */
static void moments_merge(int64_t *na, double *ma, double *m2a, int64_t nb, double mb,
                          double m2b) {
    if (nb == 0) return;
    if (*na == 0) {
        *na = nb;
        *ma = mb;
        *m2a = m2b;
        return;
    }
    double fa = (double)*na, fb = (double)nb, n = fa + fb, delta = mb - *ma;
    *ma += delta * (fb / n);
    *m2a += m2b + delta * delta * (fa * fb / n);
    *na += nb;
}

static void add_block(ts_stats_partial *p, const block_sums *b, double c) {
    p->zeros += b->zeros;
    p->nans += b->nans;
    p->pos_infs += b->pos_infs;
    p->neg_infs += b->neg_infs;
    if (b->n == 0) return;
    double fn = (double)b->n, mean = c + b->s / fn, m2 = b->q - b->s * (b->s / fn);
    moments_merge(&p->finite, &p->mean, &p->m2, b->n, mean, m2 > 0 ? m2 : 0);
    if (b->min < p->min) p->min = b->min;
    if (b->max > p->max) p->max = b->max;
}

/* The shift of a block that starts at x: the running mean (or the block's
 * first value) keeps d small. No shift once the mean is known to be within
 * a std of 0 (weights, gradients): x^2 then exceeds d^2 by at most 2x, and
 * the pass is one subtraction a vector lighter (the constant 0 folds away). */
float ts_stats_shift(const ts_stats_partial *p, const float *x, int64_t n) {
    if (p->finite > 1 && p->mean * p->mean <= p->m2 / (double)p->finite) return 0.0f;
    return p->finite > 0 ? (float)p->mean : ts_stats_typical(x, n);
}

static bool block_fast_shifted(const float *x, int64_t n, float c, block_sums *b) {
    return c == 0.0f ? block_fast(x, n, 0.0f, b) : block_fast(x, n, c, b);
}

/* A block's sums around c by the pass its values need, *masked saying
 * what the last block needed (a partial's `masked`) and then what this one
 * did. A tensor with NaN or Inf in one block (a masked score) usually has
 * them in the next, and one whose squares overflow a float (a masked
 * score's -1e30) too: no pass that would fail. */
static void block_any(int *masked, const float *x, int64_t n, float c, block_sums *b) {
    if (!*masked && block_fast_shifted(x, n, c, b)) return;
    bool wide = *masked == TS_STATS_WIDE || !block_masked(x, n, c, b);
    if (wide) block_wide(x, n, c, b);
    *masked = wide ? TS_STATS_WIDE : b->nans + b->pos_infs + b->neg_infs > 0;
}

static void stats_block(ts_stats_partial *p, const float *x, int64_t n) {
    float c = ts_stats_shift(p, x, n);
    block_sums b;
    block_any(&p->masked, x, n, c, &b);
    add_block(p, &b, c);
}

/* ------------------------------------------------- histograms and range */

static void hist_block(ts_stats_partial *p, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t a = ts_float_bits(x[i]) & 0x7fffffffu, e = a >> 23;
        if (a == 0) p->log2_zeros++;
        else if (e != 0xffu) p->log2_counts[e]++;
        if (e == 0xffu) continue;
        int k = tb_index_f32(x[i]);
        p->tb_counts[k < TS_TB_BINS ? k : TS_TB_BINS - 1]++;
    }
}

/* Bits of |x| thresholds, one per target (fp16, bf16, e4m3, e5m2): underflow
 * when 0 < bits < min_normal, overflow when bits >= over_from (and finite). */
const uint32_t ts_range_min_normal[4] = {
    (127u - 14u) << 23, /* fp16 2^-14 */
    1u << 23,           /* bf16 2^-126: float's own smallest normal */
    (127u - 6u) << 23,  /* e4m3 2^-6 */
    (127u - 14u) << 23, /* e5m2 2^-14 */
};
const uint32_t ts_range_over_from[4] = {
    0x477ff000u,      /* 65520 */
    0x7f7f8000u,      /* 0x1.ffp127 */
    0x43e80000u + 1u, /* just above 464 */
    0x47700000u,      /* 61440 */
};

static void range_block(ts_stats_partial *p, const float *x, int64_t n) {
    int64_t under[4] = {0}, over[4] = {0};
    for (int t = 0; t < 4; t++) {
        uint32_t lo = ts_range_min_normal[t] - 1u, hi = ts_range_over_from[t];
        int32_t u = 0, o = 0; /* n <= TS_STATS_BLOCK: no overflow */
        for (int64_t i = 0; i < n; i++) {
            uint32_t a = ts_float_bits(x[i]) & 0x7fffffffu;
            u += a - 1u < lo; /* a == 0 wraps to the top: not counted */
            o += (a >= hi) & (a < 0x7f800000u);
        }
        under[t] += u;
        over[t] += o;
    }
    for (int t = 0; t < 4; t++) {
        p->under[t] += under[t];
        p->over[t] += over[t];
    }
}

/* ------------------------------------------------------------- streams */

static void stream_sum(ts_stats_stream *s, int64_t n, int64_t zeros, double sum, double q, double min, double max) {
    if (s->n == 0) {
        s->min = min;
        s->max = max;
    }
    s->n += n;
    s->zeros += zeros;
    s->s += sum;
    s->q += q;
    if (min < s->min) s->min = min;
    if (max > s->max) s->max = max;
}

/* The kept runs' extremes and zeros, over the lanes. */
static void vacc_extremes(const ts_vacc *a, float *lo, float *hi, int64_t *zeros) {
    *lo = a->mn[0], *hi = a->mx[0], *zeros = ts_vz_total(a->z);
    for (int j = 0; j < TS_STATS_VEC; j++) {
        *lo = a->mn[j] < *lo ? a->mn[j] : *lo;
        *hi = a->mx[j] > *hi ? a->mx[j] : *hi;
    }
}

/* The double lanes' totals. */
static void lanes_totals(const ts_vdouble4 *ds, const ts_vdouble4 *dq, double *s, double *q) {
    *s = *q = 0;
    for (int h = 0; h < TS_STATS_VEC / 4; h++)
        for (int j = 0; j < 4; j++) {
            *s += ds[h][j];
            *q += dq[h][j];
        }
}

void ts_vacc_finish(const ts_vacc *a, ts_stats_stream *st, ts_stats_partial *p) {
    if (a->n == 0) return;
    double ss, qq;
    float lo, hi;
    int64_t zz;
    lanes_totals(a->ds, a->dq, &ss, &qq);
    vacc_extremes(a, &lo, &hi, &zz);
    stream_sum(st, a->n, zz, ss, qq, lo, hi);
    p->count += a->n;
}

void ts_stats_stream_add(ts_stats_stream *s, ts_stats_partial *p, const float *x, int64_t n) {
    if (n <= 0 || !x) return;
    p->count += n;
    if (!s->shifted) {
        s->c = ts_stats_shift(p, x, n);
        s->shifted = true;
    }
    block_sums b;
    if (!p->masked && block_fast_shifted(x, n, s->c, &b)) stream_sum(s, b.n, b.zeros, b.s, b.q, b.min, b.max);
    else stats_block(p, x, n); /* NaN or Inf: classified, straight into the partial */
}

void ts_stats_stream_flush(ts_stats_stream *s, ts_stats_partial *p) {
    if (s->n > 0) {
        block_sums b = {.n = s->n, .zeros = s->zeros, .s = s->s, .q = s->q, .min = s->min, .max = s->max};
        add_block(p, &b, s->c);
    }
    *s = (ts_stats_stream){0};
}

/* ------------------------------------------- sums of a kernel's work item */

static void sums_extremes(ts_stats_sums *a, double lo, double hi) {
    if (a->n + a->rn == 0) a->min = lo, a->max = hi;
    if (lo < a->min) a->min = lo;
    if (hi > a->max) a->max = hi;
}

void ts_stats_sums_add(ts_stats_sums *a, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i += TS_STATS_BIG_BLOCK) {
        int64_t len = n - i < TS_STATS_BIG_BLOCK ? n - i : TS_STATS_BIG_BLOCK;
        if (!a->shifted) a->c = ts_stats_typical(x + i, len), a->shifted = true;
        block_sums b;
        block_any(&a->masked, x + i, len, a->c, &b);
        a->count += len;
        a->zeros += b.zeros, a->nans += b.nans, a->pos_infs += b.pos_infs, a->neg_infs += b.neg_infs;
        if (b.n == 0) continue;
        sums_extremes(a, b.min, b.max);
        a->n += b.n;
        a->s += b.s, a->q += b.q;
    }
}

void ts_stats_sums_repeat(ts_stats_sums *a, float v, int64_t k) {
    if (k <= 0) return;
    a->count += k;
    if (isnan(v)) a->nans += k;
    else if (isinf(v)) *(v > 0 ? &a->pos_infs : &a->neg_infs) += k;
    else {
        a->zeros += v == 0.0f ? k : 0;
        sums_extremes(a, v, v);
        moments_merge(&a->rn, &a->rmean, &a->rm2, k, v, 0.0);
    }
}

void ts_stats_sums_merge(ts_stats_partial *p, const ts_stats_sums *a) {
    block_sums b = {a->n, a->zeros, a->nans, a->pos_infs, a->neg_infs, a->s, a->q, a->min, a->max};
    p->count += a->count;
    add_block(p, &b, a->c);
    if (a->rn == 0) return;
    moments_merge(&p->finite, &p->mean, &p->m2, a->rn, a->rmean, a->rm2);
    if (a->min < p->min) p->min = a->min;
    if (a->max > p->max) p->max = a->max;
}

void ts_stats_partial_scale(ts_stats_partial *p, double k) {
    p->mean *= k, p->m2 *= k * k;
    double lo = p->min * k, hi = p->max * k;
    p->min = k < 0 ? hi : lo, p->max = k < 0 ? lo : hi;
    if (k < 0) {
        int64_t t = p->pos_infs;
        p->pos_infs = p->neg_infs, p->neg_infs = t;
    }
}

/* -------------------------------------------------- a value and its Relu */

static float relu1(float v) { return v < 0.0f ? 0.0f : v; } /* as the Relu kernel: -0 and NaN pass */

/* ------------------------------------------ a work item's rows (and Relu) */

void ts_sums_rows_start(ts_sums_rows *r, ts_stats_sums *a, ts_stats_sums *ar) {
    *r = (ts_sums_rows){.a = a, .ar = ar};
    ts_vacc_start(&r->ax);
}

/* The Relu values of x[0..n) (n <= TS_VACC_RUN vectors) added to ar from memory */
static void relu_sums_add(ts_stats_sums *ar, const float *x, int64_t n) {
    float ys[TS_VACC_RUN * TS_STATS_VEC];
    for (int64_t k = 0; k < n; k++) ys[k] = relu1(x[k]);
    ts_stats_sums_add(ar, ys, n);
}

/* The Relu of v, as the Relu kernel: max(0, v) takes v where v is NaN or
 * -0 (the second operand where the compare fails), one instruction. */
static inline ts_vfloat relu_v(ts_vfloat v) { return TS_VMAX((ts_vfloat){0}, v); }

/* A piece of a row, x[0..n), into the lanes: four vectors at a time as
 * block_fast takes them (each sum split between the two kinds of pipe,
 * the squares in four chains folded into the run's at the end), then one
 * at a time, then its last few values as one vector whose other lanes
 * hold the shift c in the sums (deviations 0, a Relu's too: its shift is
 * relu1(c)) and x[whole] in the extremes and zeros, whose count *zfix
 * (and *rzfix, the Relu's zeros) take back. The Relu's zeros are counted
 * in its own values (*rz), its extremes follow x's. */
static inline void rows_piece(ts_vacc *ax, ts_relu_acc *ay, ts_vzcount *rz, bool relu, const float *x, int64_t n, ts_vfloat cx, ts_vfloat cy,
                              int64_t *zfix, int64_t *rzfix) {
    enum { V = TS_STATS_VEC };
    ts_vfloat ncx = -cx, ncy = -cy, q0 = {0}, q1 = {0}, q2 = {0}, q3 = {0}, r0 = {0}, r1 = {0}, r2 = {0}, r3 = {0};
    int64_t i = 0;
    for (; i + 4 * V <= n; i += 4 * V) {
        VSUMS4(x + i, true, ncx, q0, q1, q2, q3, ax->mn, ax->mx, ax->z);
        ax->s = TS_VADD_FMA((d0 + d1) + TS_VADD_FMA(d2, d3), ax->s);
        if (!relu) continue;
        ts_vfloat y0 = relu_v(v0), y1 = relu_v(v1), y2 = relu_v(v2), y3 = relu_v(v3);
        ts_vfloat e0 = TS_VADD_FMA(y0, ncy), e1 = TS_VADD_FMA(y1, ncy), e2 = TS_VADD_FMA(y2, ncy), e3 = TS_VADD_FMA(y3, ncy);
        r0 = TS_VFMA(e0, e0, r0);
        r1 = TS_VFMA(e1, e1, r1);
        r2 = TS_VFMA(e2, e2, r2);
        r3 = TS_VFMA(e3, e3, r3);
        ay->s = TS_VADD_FMA((e0 + e1) + TS_VADD_FMA(e2, e3), ay->s);
        ts_vz_add(rz, y0);
        ts_vz_add(rz, y1);
        ts_vz_add(rz, y2);
        ts_vz_add(rz, y3);
    }
    for (; i + V <= n; i += V) {
        ts_vfloat v, d;
        memcpy(&v, x + i, sizeof v);
        ts_vacc_add(ax, v, cx);
        if (!relu) continue;
        ts_vfloat y = relu_v(v);
        d = y - cy;
        ay->s += d;
        r0 = TS_VFMA(d, d, r0);
        ts_vz_add(rz, y);
    }
    ax->q += (q0 + q1) + (q2 + q3);
    if (relu) ay->q += (r0 + r1) + (r2 + r3);
    if (i == n) return;
    ts_vfloat vs, ve, d;
#if TS_STATS_VEC == 16
    __mmask16 k = (__mmask16)((1u << (n - i)) - 1u);
    vs = _mm512_mask_loadu_ps(cx, k, x + i);
    ve = _mm512_mask_loadu_ps(_mm512_set1_ps(x[i]), k, x + i);
#else
    float bs[V], be[V];
    for (int j = 0; j < V; j++) bs[j] = i + j < n ? x[i + j] : cx[0], be[j] = i + j < n ? x[i + j] : x[i];
    memcpy(&vs, bs, sizeof vs);
    memcpy(&ve, be, sizeof ve);
#endif
    d = vs - cx;
    ax->s += d;
    ax->q = TS_VFMA(d, d, ax->q);
    ax->mn = TS_VMIN(ve, ax->mn);
    ax->mx = TS_VMAX(ve, ax->mx);
    ts_vz_add(&ax->z, ve);
    int64_t fill = V - (n - i);
    *zfix += x[i] == 0.0f ? fill : 0;
    if (!relu) return;
    ts_vfloat y = relu_v(vs); /* the fill's Relu, relu1(c), deviates by 0 from the Relu's shift; a zero where c <= 0 */
    d = y - cy;
    ay->s += d;
    ay->q = TS_VFMA(d, d, ay->q);
    ts_vz_add(rz, y);
    *rzfix += cy[0] == 0.0f ? fill : 0;
}

void ts_sums_rows_add(ts_sums_rows *r, const float *x, int64_t rows, int64_t n, int64_t stride) {
    enum { V = TS_STATS_VEC, RUN = TS_VACC_RUN * TS_STATS_VEC };
    ts_stats_sums *a = r->a, *ar = r->ar;
    if (n <= 0 || rows <= 0) return;
    if (!a->shifted) a->c = ts_stats_typical(x, n), a->shifted = true;
    if (ar && !ar->shifted) ar->c = relu1(a->c), ar->shifted = true; /* the Relu values' typical one (Relu keeps the median) */
    ts_vfloat cx = a->c - (ts_vfloat){0}, cy = (ar ? ar->c : 0.0f) - (ts_vfloat){0};
    /* the rows in pieces of at most RUN values (a row's last piece its
     * rest); a run takes pieces while their vectors fit in one */
    int64_t per_row = (n + RUN - 1) / RUN, pieces = rows * per_row;
    ts_vacc ax = r->ax; /* in registers across the rows, not through r (which the loads of x may alias) */
    ts_relu_acc ay = r->ay;
    ts_vzcount rz = r->rz;
    for (int64_t p0 = 0, p1; p0 < pieces; p0 = p1) {
        ts_vacc_mark m = ts_vacc_run_begin(&ax);
        ts_vzcount rz0 = rz;
        int64_t zf0 = r->zfix, rf0 = r->rzfix, vecs = 0, vals = 0;
        ay.s = ay.q = (ts_vfloat){0};
        for (p1 = p0; p1 < pieces; p1++) {
            int64_t off = p1 % per_row * RUN, len = n - off < RUN ? n - off : RUN, nv = (len + V - 1) / V;
            if (vecs + nv > TS_VACC_RUN) break; /* never the run's first: a piece is at most a run */
            rows_piece(&ax, &ay, &rz, ar != NULL, x + p1 / per_row * stride + off, len, cx, cy, &r->zfix, &r->rzfix);
            vecs += nv, vals += len;
        }
        if (ts_vsums_finite(ax.s, ax.q) && (!ar || ts_vsums_finite(ay.s, ay.q))) {
            ts_vacc_run_keep(&ax, vals);
            if (ar) ts_vsums_keep(ay.ds, ay.dq, ay.s, ay.q);
            continue;
        }
        /* NaN or Inf, or a square beyond float's range: the run's pieces from memory */
        ts_vacc_run_drop(&ax, m);
        rz = rz0, r->zfix = zf0, r->rzfix = rf0;
        for (int64_t p = p0; p < p1; p++) {
            int64_t off = p % per_row * RUN, len = n - off < RUN ? n - off : RUN;
            const float *q = x + p / per_row * stride + off;
            ts_stats_sums_add(a, q, len);
            if (ar) relu_sums_add(ar, q, len);
        }
    }
    r->ax = ax, r->ay = ay, r->rz = rz;
}

/* n finite values, zeros of them, their sums around a->c and extremes, into a */
static void sums_add_finite(ts_stats_sums *a, int64_t n, int64_t zeros, double s, double q, double lo, double hi) {
    if (n == 0) return;
    sums_extremes(a, lo, hi);
    a->count += n, a->n += n, a->zeros += zeros;
    a->s += s, a->q += q;
}

void ts_sums_rows_finish(ts_sums_rows *r) {
    double ss, qq;
    float lo, hi;
    int64_t zz, n = r->ax.n;
    lanes_totals(r->ax.ds, r->ax.dq, &ss, &qq);
    vacc_extremes(&r->ax, &lo, &hi, &zz);
    sums_add_finite(r->a, n, zz - r->zfix, ss, qq, lo, hi);
    if (!r->ar) return;
    lanes_totals(r->ay.ds, r->ay.dq, &ss, &qq);
    sums_add_finite(r->ar, n, ts_vz_total(r->rz) - r->rzfix, ss, qq, lo > 0.0f ? lo : 0.0f, hi > 0.0f ? hi : 0.0f);
}

/* The pair's sums a block at a time, each around its own typical value
 * (the partials merge them as blocks), through a work item's rows: the
 * block one row. */
void ts_stats_partial_add_relu(ts_stats_partial *px, ts_stats_partial *py, const float *x, int64_t n) {
    for (int64_t b = 0; b < n; b += TS_STATS_BIG_BLOCK) {
        int64_t len = n - b < TS_STATS_BIG_BLOCK ? n - b : TS_STATS_BIG_BLOCK;
        ts_stats_sums a = {0}, ar = {0};
        ts_sums_rows r;
        ts_sums_rows_start(&r, &a, &ar);
        ts_sums_rows_add(&r, x + b, 1, len, len);
        ts_sums_rows_finish(&r);
        ts_stats_sums_merge(px, &a);
        ts_stats_sums_merge(py, &ar);
    }
}

/* ---------------------------------------------------------- the partials */

void ts_stats_partial_init(ts_stats_partial *p, int what) {
    memset(p, 0, offsetof(ts_stats_partial, log2_zeros));
    memset(p->under, 0, sizeof p->under);
    memset(p->over, 0, sizeof p->over);
    if (what & TS_WATCH_HISTOGRAM) {
        p->log2_zeros = 0;
        memset(p->log2_counts, 0, sizeof p->log2_counts);
        memset(p->tb_counts, 0, sizeof p->tb_counts);
    }
    p->what = what;
    p->min = INFINITY;
    p->max = -INFINITY;
    if (what & TS_WATCH_HISTOGRAM) ts_tb_bucket_limits();
}

void ts_stats_partial_add(ts_stats_partial *p, const float *x, int64_t n) {
    if (n <= 0 || !x) return;
    p->count += n;
    /* histograms and ranges walk each block again and want it in L1 */
    int64_t block = p->what == TS_WATCH_STATS ? TS_STATS_BIG_BLOCK : TS_STATS_BLOCK;
    for (int64_t i = 0; i < n; i += block) {
        int64_t len = n - i < block ? n - i : block;
        if (p->what & TS_WATCH_STATS) stats_block(p, x + i, len);
        if (p->what & TS_WATCH_HISTOGRAM) hist_block(p, x + i, len);
        if (p->what & TS_WATCH_RANGE) range_block(p, x + i, len);
    }
}

void ts_stats_merge(ts_stats_partial *into, const ts_stats_partial *from) {
    into->count += from->count;
    into->zeros += from->zeros;
    into->nans += from->nans;
    into->pos_infs += from->pos_infs;
    into->neg_infs += from->neg_infs;
    moments_merge(&into->finite, &into->mean, &into->m2, from->finite, from->mean, from->m2);
    if (from->min < into->min) into->min = from->min;
    if (from->max > into->max) into->max = from->max;
    if (into->what & TS_WATCH_HISTOGRAM) {
    into->log2_zeros += from->log2_zeros;
    for (int i = 0; i < TS_LOG2_BINS; i++) into->log2_counts[i] += from->log2_counts[i];
    for (int i = 0; i < TS_TB_BINS; i++) into->tb_counts[i] += from->tb_counts[i];
    }
    for (int t = 0; t < 4; t++) {
        into->under[t] += from->under[t];
        into->over[t] += from->over[t];
    }
}

void ts_stats_finish(const ts_stats_partial *p, ts_summary *out) {
    memset(out, 0, offsetof(ts_summary, log2_counts));
    memset(&out->range, 0, sizeof out->range);
    out->what = p->what;
    ts_stats *s = &out->stats;
    s->count = p->count;
    if (p->what & TS_WATCH_STATS) {
        s->zeros = p->zeros;
        s->nans = p->nans;
        s->pos_infs = p->pos_infs;
        s->neg_infs = p->neg_infs;
        if (p->finite > 0) {
            double fn = (double)p->finite;
            s->mean = p->mean;
            s->std = sqrt(p->m2 / fn);
            s->min = p->min;
            s->max = p->max;
            s->l2 = sqrt(p->m2 + fn * p->mean * p->mean);
        } else {
            s->mean = s->std = s->min = s->max = NAN;
            s->l2 = 0;
        }
    }
    if (p->what & TS_WATCH_HISTOGRAM) {
        out->log2_zeros = p->log2_zeros;
        memcpy(out->log2_counts, p->log2_counts, sizeof out->log2_counts);
        memcpy(out->tb_counts, p->tb_counts, sizeof out->tb_counts);
    }
    if (p->what & TS_WATCH_RANGE && p->count > 0) {
        double fn = (double)p->count;
        ts_range *r = &out->range;
        r->fp16_underflow = (double)p->under[0] / fn;
        r->fp16_overflow = (double)p->over[0] / fn;
        r->bf16_underflow = (double)p->under[1] / fn;
        r->bf16_overflow = (double)p->over[1] / fn;
        r->e4m3_underflow = (double)p->under[2] / fn;
        r->e4m3_overflow = (double)p->over[2] / fn;
        r->e5m2_underflow = (double)p->under[3] / fn;
        r->e5m2_overflow = (double)p->over[3] / fn;
    }
}

void ts_stats_from_summary(const ts_summary *s, ts_stats_partial *p) {
    ts_stats_partial_init(p, s->what);
    const ts_stats *st = &s->stats;
    p->count = st->count;
    if (s->what & TS_WATCH_STATS) {
        p->zeros = st->zeros;
        p->nans = st->nans;
        p->pos_infs = st->pos_infs;
        p->neg_infs = st->neg_infs;
        p->finite = st->count - st->nans - st->pos_infs - st->neg_infs;
        if (p->finite > 0) {
            p->mean = st->mean;
            p->m2 = st->std * st->std * (double)p->finite;
            p->min = st->min;
            p->max = st->max;
        }
    }
    if (s->what & TS_WATCH_HISTOGRAM) {
        p->log2_zeros = s->log2_zeros;
        memcpy(p->log2_counts, s->log2_counts, sizeof p->log2_counts);
        memcpy(p->tb_counts, s->tb_counts, sizeof p->tb_counts);
    }
    if (s->what & TS_WATCH_RANGE) {
        const ts_range *r = &s->range;
        const double under[4] = {r->fp16_underflow, r->bf16_underflow, r->e4m3_underflow, r->e5m2_underflow};
        const double over[4] = {r->fp16_overflow, r->bf16_overflow, r->e4m3_overflow, r->e5m2_overflow};
        for (int t = 0; t < 4; t++) {
            p->under[t] = llround(under[t] * (double)st->count);
            p->over[t] = llround(over[t] * (double)st->count);
        }
    }
}

ts_status ts_summarize_f32(const float *x, int64_t n, int what, ts_summary *out) {
    const int all = TS_WATCH_STATS | TS_WATCH_HISTOGRAM | TS_WATCH_RANGE;
    if (!out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_summarize_f32: out is NULL");
    if (n < 0)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_summarize_f32: n is %lld, must be >= 0",
                        (long long)n);
    if (n > 0 && !x)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_summarize_f32: x is NULL with n = %lld",
                        (long long)n);
    if (what == 0 || (what & ~all))
        return ts_error(TS_ERR_INVALID_ARGUMENT,
                        "ts_summarize_f32: what = %d; pass a non-empty OR of TS_WATCH_STATS, "
                        "TS_WATCH_HISTOGRAM and TS_WATCH_RANGE",
                        what);
    /* ~15 KB of stack: no allocation in the step loop. */
    ts_stats_partial p;
    ts_stats_partial_init(&p, what);
    ts_stats_partial_add(&p, x, n);
    ts_stats_finish(&p, out);
    return TS_OK;
}

void ts_summary_copy(ts_summary *dst, const ts_summary *src) {
    memcpy(dst, src, offsetof(ts_summary, log2_counts));
    if (src->what & TS_WATCH_HISTOGRAM) {
        memcpy(dst->log2_counts, src->log2_counts, sizeof dst->log2_counts);
        memcpy(dst->tb_counts, src->tb_counts, sizeof dst->tb_counts);
    }
    dst->range = src->range;
    dst->stored = src->stored, dst->stored_underflow = src->stored_underflow, dst->stored_overflow = src->stored_overflow;
}

ts_status ts_summary_merge(ts_summary *into, const ts_summary *from) {
    if (!into || !from)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_summary_merge: %s is NULL", !into ? "into" : "from");
    if (into->what == 0) { /* a zeroed summary: nothing summarised yet */
        *into = *from;
        return TS_OK;
    }
    if (into->what != from->what)
        return ts_error(TS_ERR_INVALID_ARGUMENT,
                        "ts_summary_merge: the summaries computed different things (what %d and %d); "
                        "summarise both with the same TS_WATCH_* flags",
                        into->what, from->what);
    /* ~30 KB of stack, as ts_summarize_f32: no allocation */
    ts_stats_partial a, b;
    ts_stats_from_summary(into, &a);
    ts_stats_from_summary(from, &b);
    ts_stats_merge(&a, &b);
    ts_stats_finish(&a, into);
    return TS_OK;
}

void ts_stats_to_device(const ts_stats_partial *p, ts_device_stats *out, ts_device_hist *h) {
    *out = (ts_device_stats){(double)p->count, (double)p->zeros,    (double)p->nans, (double)p->pos_infs, (double)p->neg_infs,
                             (double)p->finite, p->mean,            p->m2,           p->min,              p->max};
    if (!h) return;
    memset(h, 0, sizeof *h);
    if (p->what & TS_WATCH_HISTOGRAM) {
        h->log2_zeros = (unsigned long long)p->log2_zeros;
        for (int i = 0; i < TS_LOG2_BINS; i++) h->log2_counts[i] = (unsigned long long)p->log2_counts[i];
        for (int i = 0; i < TS_TB_BINS; i++) h->tb_counts[i] = (unsigned long long)p->tb_counts[i];
    }
    for (int t = 0; t < 4; t++) h->under[t] = (unsigned long long)p->under[t], h->over[t] = (unsigned long long)p->over[t];
}

void ts_stats_from_device(const ts_device_stats *d, const ts_device_hist *h, int what, ts_stats_partial *out) {
    ts_stats_partial_init(out, h ? what : TS_WATCH_STATS);
    out->count = (int64_t)d->count, out->zeros = (int64_t)d->zeros, out->nans = (int64_t)d->nans;
    out->pos_infs = (int64_t)d->pos_infs, out->neg_infs = (int64_t)d->neg_infs, out->finite = (int64_t)d->finite;
    if (out->finite > 0) out->mean = d->mean, out->m2 = d->m2, out->min = d->min, out->max = d->max;
    if (!h) return;
    if (what & TS_WATCH_HISTOGRAM) {
        out->log2_zeros = (int64_t)h->log2_zeros;
        for (int i = 0; i < TS_LOG2_BINS; i++) out->log2_counts[i] = (int64_t)h->log2_counts[i];
        for (int i = 0; i < TS_TB_BINS; i++) out->tb_counts[i] = (int64_t)h->tb_counts[i];
    }
    for (int t = 0; t < 4; t++) out->under[t] = (int64_t)h->under[t], out->over[t] = (int64_t)h->over[t];
}
