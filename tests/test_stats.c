/* test_stats.c -- summaries against independent references: a two-pass
 * double reference for the moments, frexp for the log2 bins, a brute-force
 * upper_bound over TensorFlow's bucket limits (rebuilt here), a software
 * round-to-nearest-even for the low-precision ranges, and the text forms
 * parsed back. */
#include "check.h"
#include "core/stats.h"
#include "core/stats_vec.h"

#include <float.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>



static uint64_t rng = 88172645463325252ull;
static uint64_t next_u64(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static double uniform(void) { return ((double)(next_u64() >> 11) + 0.5) / 9007199254740992.0; }
static double normal(void) { return sqrt(-2 * log(uniform())) * cos(2 * M_PI * uniform()); }

static bool close_rel(double a, double b, double rel) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return fabs(a - b) <= rel * fmax(fabs(a), fabs(b)) + 1e-300;
}

/* ------------------------------------------------------- two-pass reference */

static void reference(const float *x, int64_t n, ts_stats *r) {
    memset(r, 0, sizeof *r);
    r->count = n;
    int64_t k = 0;
    double sum = 0, mn = INFINITY, mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(x[i])) r->nans++;
        else if (isinf(x[i])) *(x[i] > 0 ? &r->pos_infs : &r->neg_infs) += 1;
        else {
            if (x[i] == 0) r->zeros++;
            k++;
            sum += x[i];
            mn = fmin(mn, x[i]);
            mx = fmax(mx, x[i]);
        }
    }
    double mean = k ? sum / (double)k : NAN, ss = 0, sq = 0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(x[i])) {
            ss += ((double)x[i] - mean) * ((double)x[i] - mean);
            sq += (double)x[i] * (double)x[i];
        }
    r->mean = mean;
    r->std = k ? sqrt(ss / (double)k) : NAN;
    r->min = k ? mn : NAN;
    r->max = k ? mx : NAN;
    r->l2 = sqrt(sq);
}

static void compare_stats(const char *what, const ts_stats *s, const ts_stats *r, double rel) {
    CHECK(s->count == r->count && s->zeros == r->zeros && s->nans == r->nans &&
              s->pos_infs == r->pos_infs && s->neg_infs == r->neg_infs,
          "%s: counts n=%lld zeros=%lld nan=%lld +inf=%lld -inf=%lld (ref %lld %lld %lld %lld %lld)",
          what, (long long)s->count, (long long)s->zeros, (long long)s->nans,
          (long long)s->pos_infs, (long long)s->neg_infs, (long long)r->count,
          (long long)r->zeros, (long long)r->nans, (long long)r->pos_infs, (long long)r->neg_infs);
    /* The mean is compared on the data's own scale: its std, or its size. */
    double mscale = fmax(r->std, fabs(r->mean) * 1e-3);
    CHECK(isnan(r->mean) ? isnan(s->mean) : fabs(s->mean - r->mean) <= rel * mscale,
          "%s: mean %.12g vs %.12g", what, s->mean, r->mean);
    CHECK(close_rel(s->std, r->std, rel), "%s: std %.12g vs %.12g", what, s->std, r->std);
    CHECK(close_rel(s->l2, r->l2, rel), "%s: l2 %.12g vs %.12g", what, s->l2, r->l2);
    CHECK((isnan(r->min) && isnan(s->min)) || (s->min == r->min && s->max == r->max),
          "%s: min/max of finite values %.9g %.9g (ref %.9g %.9g)", what, s->min, s->max, r->min,
          r->max);
}

/* Random data with an awkward value every `stride` (0: none). */
static void fill(float *x, int64_t n, double offset, double scale, int64_t stride) {
    for (int64_t i = 0; i < n; i++) x[i] = (float)(offset + scale * normal());
    if (!stride) return;
    for (int64_t i = stride / 2; i < n; i += stride) {
        switch (next_u64() % 7) {
        case 0: x[i] = NAN; break;
        case 1: x[i] = INFINITY; break;
        case 2: x[i] = -INFINITY; break;
        case 3: x[i] = 0.0f; break;
        case 4: x[i] = -0.0f; break;
        case 5: x[i] = 1e-40f; break; /* subnormal */
        default: x[i] = -FLT_MAX; break;
        }
    }
}

static void test_moments(void) {
    const int64_t n = 300007; /* not a multiple of any block size */
    float *x = malloc((size_t)n * sizeof *x);
    ts_summary *s = malloc(sizeof *s);
    ts_stats r;
    struct {
        const char *name;
        double offset, scale;
        int64_t stride;
    } cases[] = {
        {"N(0,1)", 0, 1, 0},
        {"1e4 + N(0,1)", 1e4, 1, 0},
        {"1e6 + N(0,1e-2)", 1e6, 1e-2, 0},
        {"gradient-sized 1e-3 N(0,1)", 0, 1e-3, 0},
        {"N(0,1e25) (squares beyond float)", 0, 1e25, 0},
        {"N(0,1) with NaN/Inf/zeros/subnormals/-FLT_MAX", 0, 1, 97},
        {"1e4 + N(0,1) with specials", 1e4, 1, 97},
        {"1e4 + N(0,1), a few specials (fast and slow blocks)", 1e4, 1, 40009},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        fill(x, n, cases[c].offset, cases[c].scale, cases[c].stride);
        ts_status st = ts_summarize_f32(x, n, TS_WATCH_STATS, s);
        CHECK(st == TS_OK, "%s: summarize ok", cases[c].name);
        reference(x, n, &r);
        compare_stats(cases[c].name, &s->stats, &r, 1e-6);
    }
    /* One huge value first (a padding row, a gradient's spike): not the
     * shift the others' deviations are taken from, or their float sums
     * round away the std (it was 2e-4 off) */
    fill(x, n, 0, 1, 0);
    x[0] = 1e6f;
    ts_summarize_f32(x, n, TS_WATCH_STATS, s);
    reference(x, n, &r);
    compare_stats("N(0,1) after an outlier 1e6 first", &s->stats, &r, 1e-6);
    /* A causal mask's scores: -inf above the diagonal of 64 x 64 tiles, a
     * few NaN, +inf and zeros, no finite value beyond float's squares: every
     * block takes the classifying vector pass, then an all-finite tail block
     * the fast one again. */
    for (int64_t i = 0; i < n; i++) {
        int64_t row = (i / 64) % 64, col = i % 64;
        x[i] = col > row && i < n - 20000 ? -INFINITY : (float)(3.0 + 0.5 * normal());
    }
    for (int64_t i = 1234; i < n - 20000; i += 9973) x[i] = (i / 9973) % 3 == 0 ? NAN : (i / 9973) % 3 == 1 ? INFINITY : 0.0f;
    ts_summarize_f32(x, n, TS_WATCH_STATS, s);
    reference(x, n, &r);
    compare_stats("masked scores (-inf upper triangles, NaN, +inf)", &s->stats, &r, 1e-6);
    /* The same masked with a finite -1e30 (the GPT's masked fill): every
     * square beyond float's range, each block after the first straight into
     * the pass in double lanes, with NaN, +inf and zeros among them. */
    for (int64_t i = 0; i < n; i++)
        if (isinf(x[i]) && x[i] < 0) x[i] = -1e30f;
    ts_summarize_f32(x, n, TS_WATCH_STATS, s);
    reference(x, n, &r);
    compare_stats("masked scores (-1e30 upper triangles, NaN, +inf)", &s->stats, &r, 1e-6);
    /* Edge cases: all zeros, all NaN, empty, one value. */
    memset(x, 0, 5000 * sizeof *x);
    ts_summarize_f32(x, 5000, TS_WATCH_STATS, s);
    reference(x, 5000, &r);
    compare_stats("all zeros", &s->stats, &r, 1e-12);
    for (int i = 0; i < 5000; i++) x[i] = NAN;
    ts_summarize_f32(x, 5000, TS_WATCH_STATS, s);
    CHECK(s->stats.nans == 5000 && isnan(s->stats.mean) && isnan(s->stats.min) &&
              s->stats.l2 == 0,
          "all NaN: nans=5000, mean/min NaN, l2 0");
    CHECK(ts_summarize_f32(NULL, 0, TS_WATCH_STATS, s) == TS_OK && s->stats.count == 0,
          "empty tensor is fine");
    x[0] = -3.5f;
    ts_summarize_f32(x, 1, TS_WATCH_STATS, s);
    CHECK(s->stats.mean == -3.5 && s->stats.std == 0 && s->stats.min == -3.5 &&
              s->stats.l2 == 3.5,
          "one value: mean -3.5 std 0 l2 3.5");
    /* Bad arguments are errors, not crashes. */
    CHECK(ts_summarize_f32(x, -1, TS_WATCH_STATS, s) == TS_ERR_INVALID_ARGUMENT,
          "n < 0 rejected: %s", ts_last_error());
    CHECK(ts_summarize_f32(NULL, 10, TS_WATCH_STATS, s) == TS_ERR_INVALID_ARGUMENT,
          "NULL data rejected");
    CHECK(ts_summarize_f32(x, 1, 0, s) == TS_ERR_INVALID_ARGUMENT, "what = 0 rejected");
    CHECK(ts_summarize_f32(x, 1, 64, s) == TS_ERR_INVALID_ARGUMENT, "unknown what bit rejected");
    CHECK(ts_summarize_f32(x, 1, TS_WATCH_STATS, NULL) == TS_ERR_INVALID_ARGUMENT,
          "NULL out rejected");
    free(x);
    free(s);
}

/* The fast pass counts a zero by its bits (twice the bits is 0 only for +0
 * and -0): blocks of only finite values (the fast pass) holding +0, -0 and
 * the subnormals next to them (1 and 0x80000001: not zeros), and blocks
 * all zero, all positive, all negative and with NaN and Inf, each against
 * the reference (zeros, min and max exact). */
static void test_zero_bits(void) {
    enum { N = 40000 }; /* two blocks and a ragged end */
    float *x = malloc(N * sizeof *x);
    ts_summary *s = malloc(sizeof *s);
    ts_stats r;
    static const char *const names[] = {"+0, -0 and the smallest subnormals among N(0,1)", "all +0 and -0", "all positive",
                                        "all negative with -0", "NaN and Inf with zeros of both signs"};
    for (int c = 0; c < 5; c++) {
        for (int64_t i = 0; i < N; i++) {
            float v = (float)normal();
            switch (c) {
            case 1: v = i % 3 ? 0.0f : -0.0f; break;
            case 2: v = fabsf(v) + 1e-3f; break;
            case 3: v = -fabsf(v) - 1e-3f; break;
            default: break;
            }
            if ((c == 0 || c == 3 || c == 4) && i % 37 == 5) v = i % 2 ? -0.0f : (c == 3 ? -0.0f : 0.0f);
            if (c == 0 && i % 101 == 7) v = ts_bits_float(i % 2 ? 1u : 0x80000001u); /* not zeros */
            if (c == 4 && i % 4099 == 11) v = i % 3 == 0 ? NAN : i % 3 == 1 ? INFINITY : -INFINITY;
            x[i] = v;
        }
        ts_summarize_f32(x, N, TS_WATCH_STATS, s);
        reference(x, N, &r);
        CHECK(r.zeros > 0 || c == 2, "%s: the case holds zeros (%lld)", names[c], (long long)r.zeros);
        compare_stats(names[c], &s->stats, &r, 1e-6);
    }
    free(x);
    free(s);
}

/* ---------------------------------------------------------------- log2 bins */

/* Agreement as compare_stats judges it, without a line per field. */
static bool stats_agree(const ts_stats *s, const ts_stats *r, double rel) {
    double mscale = fmax(r->std, fabs(r->mean) * 1e-3);
    return s->count == r->count && s->zeros == r->zeros && s->nans == r->nans &&
           s->pos_infs == r->pos_infs && s->neg_infs == r->neg_infs &&
           (isnan(r->mean) ? isnan(s->mean) : fabs(s->mean - r->mean) <= rel * mscale) &&
           close_rel(s->std, r->std, rel) && close_rel(s->l2, r->l2, rel) &&
           ((isnan(r->min) && isnan(s->min)) || (s->min == r->min && s->max == r->max));
}

/* Every length around the vector pass's stride (up to 32 values: 2
 * accumulators of 16-float vectors on AVX-512) and runs (16 strides), with
 * a NaN, a zero or an ordinary value last: the ragged end, taken value by
 * value, must count alike. One line; the first disagreement in detail. */
static void test_lengths(void) {
    float x[1100];
    ts_summary *s = malloc(sizeof *s);
    ts_stats r;
    int64_t tried = 0, bad = 0;
    for (int64_t n = 1; n <= 1100; n++)
        for (int last = 0; last < 3; last++) {
            fill(x, n, 3.0, 0.5, 0);
            if (last == 1) x[n - 1] = NAN;
            if (last == 2) x[n - 1] = 0.0f;
            ts_summarize_f32(x, n, TS_WATCH_STATS, s);
            reference(x, n, &r);
            tried++;
            if (stats_agree(&s->stats, &r, 1e-6)) continue;
            if (bad++ == 0) {
                char what[64];
                snprintf(what, sizeof what, "length %lld, last case %d", (long long)n, last);
                compare_stats(what, &s->stats, &r, 1e-6);
            }
        }
    CHECK(bad == 0, "lengths 1..1100 with a NaN, zero or normal last value: %lld of %lld summaries match the reference",
          (long long)(tried - bad), (long long)tried);
    free(s);
}

static void test_log2(void) {
    const int64_t n = 200003;
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) {
        double mag = ldexp(1.0 + uniform(), (int)(next_u64() % 300) - 160); /* subnormals too */
        x[i] = (float)((next_u64() & 1) ? mag : -mag);
        if (i % 50 == 0) x[i] = 0.0f;
        if (i % 501 == 0) x[i] = (i % 2) ? NAN : -INFINITY;
    }
    int64_t *want = calloc(TS_LOG2_BINS, sizeof *want), zeros = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) continue;
        if (x[i] == 0) {
            zeros++;
            continue;
        }
        int e;
        frexpf(x[i], &e); /* |x| in [2^(e-1), 2^e) */
        want[e + 126 > 0 ? e + 126 : 0]++;
    }
    ts_summary *s = malloc(sizeof *s);
    CHECK(ts_summarize_f32(x, n, TS_WATCH_HISTOGRAM, s) == TS_OK, "histogram ok");
    int bad = 0;
    for (int i = 0; i < TS_LOG2_BINS; i++) bad += s->log2_counts[i] != want[i];
    CHECK(bad == 0 && s->log2_zeros == zeros, "log2 bins match frexp (%d bins differ, zeros %lld/%lld)",
          bad, (long long)s->log2_zeros, (long long)zeros);
    CHECK(s->log2_counts[0] > 0 && s->log2_counts[127] > 0, "subnormal bin and [1,2) bin used");
    free(want);
    free(x);
    free(s);
}

/* ------------------------------------------------------- TensorBoard buckets */

static double *tf_limits(int *count) {
    /* TensorFlow's InitDefaultBucketsInner, written out again here. */
    double pos[1000];
    int k = 0;
    for (double v = 1.0e-12; v < 1.0e20; v *= 1.1) pos[k++] = v;
    double *l = malloc((size_t)(2 * k + 3) * sizeof *l);
    int i = 0;
    l[i++] = -DBL_MAX;
    for (int j = k - 1; j >= 0; j--) l[i++] = -pos[j];
    l[i++] = 0.0;
    for (int j = 0; j < k; j++) l[i++] = pos[j];
    l[i++] = DBL_MAX;
    *count = i;
    return l;
}

static int upper_bound(const double *l, int n, double x) {
    int i = 0;
    while (i < n && !(l[i] > x)) i++;
    return i;
}

static void test_tb(void) {
    int n_lim;
    double *lim = tf_limits(&n_lim);
    CHECK(n_lim == TS_TB_EDGES, "TensorFlow's default buckets: %d limits (TS_TB_EDGES %d)", n_lim,
          TS_TB_EDGES);
    CHECK(TS_TB_BINS == n_lim,
          "public TS_TB_BINS (%d) equals TensorFlow's %d limits (the header must say %d)",
          TS_TB_BINS, n_lim, n_lim);
    const double *got = ts_tb_bucket_limits();
    int diff = 0;
    for (int i = 0; i < n_lim; i++) diff += got[i] != lim[i];
    CHECK(diff == 0, "ts_tb_bucket_limits equals TensorFlow's table (%d differ)", diff);
    for (int i = 1; i < n_lim; i++)
        if (!(got[i] > got[i - 1])) diff++;
    CHECK(diff == 0, "limits strictly ascending");

    /* Exact limits as doubles (not representable in f32): internal lookup. */
    int bad = 0;
    for (int i = 0; i < n_lim - 1; i++) {
        double v[3] = {lim[i], nextafter(lim[i], -INFINITY), nextafter(lim[i], INFINITY)};
        for (int t = 0; t < 3; t++) /* finite only: -DBL_MAX's neighbour is -Inf */
            if (isfinite(v[t]) && ts_tb_bucket_index(v[t]) != upper_bound(lim, n_lim, v[t])) {
                printf("     limit %d: %.17g -> %d, upper_bound %d\n", i, v[t],
                       ts_tb_bucket_index(v[t]), upper_bound(lim, n_lim, v[t]));
                bad++;
            }
    }
    CHECK(bad == 0, "ts_tb_bucket_index == upper_bound at every limit and its neighbours (%d bad)",
          bad);

    /* Floats: random magnitudes, the f32 roundings of every limit and their
     * neighbours, zeros, extremes; counts against the brute force. */
    int64_t cap = 4 * n_lim + 400000, n = 0;
    float *x = malloc((size_t)cap * sizeof *x);
    for (int i = 1; i < n_lim - 1; i++) {
        float f = (float)lim[i];
        x[n++] = f;
        x[n++] = nextafterf(f, -INFINITY);
        x[n++] = nextafterf(f, INFINITY);
    }
    x[n++] = 0.0f;
    x[n++] = -0.0f;
    x[n++] = FLT_MAX;
    x[n++] = -FLT_MAX;
    x[n++] = FLT_TRUE_MIN;
    x[n++] = -FLT_TRUE_MIN;
    x[n++] = NAN;
    x[n++] = INFINITY;
    while (n < cap) {
        double mag = ldexp(1.0 + uniform(), (int)(next_u64() % 260) - 140);
        x[n++] = (float)((next_u64() & 1) ? mag : -mag);
    }
    int64_t *want = calloc((size_t)n_lim + 1, sizeof *want);
    for (int64_t i = 0; i < n; i++)
        if (isfinite(x[i])) want[upper_bound(lim, n_lim, x[i])]++;
    ts_summary *s = malloc(sizeof *s);
    CHECK(ts_summarize_f32(x, n, TS_WATCH_HISTOGRAM, s) == TS_OK, "histogram of %lld floats",
          (long long)n);
    bad = 0;
    int m = TS_TB_BINS < n_lim ? TS_TB_BINS : n_lim;
    for (int i = 0; i < m; i++) bad += s->tb_counts[i] != want[i];
    CHECK(bad == 0 && want[n_lim] == 0, "tb_counts == brute-force upper_bound counts (%d differ)",
          bad);
    free(want);
    free(x);
    free(s);
    free(lim);
}

/* ------------------------------------------------------------------ range */

/* Round-to-nearest-even of |x| to `mbits` mantissa bits (ignoring the
 * exponent's top): the reference for overflow. */
static double rne(double a, int mbits) {
    int e;
    frexp(a, &e);
    double ulp = ldexp(1.0, e - 1 - mbits);
    return nearbyint(a / ulp) * ulp;
}

typedef struct fmt {
    const char *name;
    int mbits;
    double max, min_normal;
    bool has_inf; /* e4m3 has no Inf: anything rounding above max overflows */
} fmt;

static void test_range(void) {
    const fmt f[4] = {
        {"fp16", 10, 65504.0, ldexp(1, -14), true},
        {"bf16", 7, ldexp(255.0 / 128.0, 127), ldexp(1, -126), true},
        {"e4m3", 3, 448.0, ldexp(1, -6), false},
        {"e5m2", 2, 57344.0, ldexp(1, -14), true},
    };
    for (int t = 0; t < 4; t++) {
        /* Values at each boundary: max, the half-ulp point and its float
         * neighbours, the min normal and its neighbour, zero, non-finite. */
        double top = f[t].max + ldexp(1.0, (int)log2(f[t].max) - f[t].mbits - 1);
        float v[16];
        int k = 0;
        v[k++] = (float)f[t].max;
        v[k++] = (float)top;
        v[k++] = nextafterf((float)top, 0);
        v[k++] = nextafterf((float)top, INFINITY);
        v[k++] = -(float)top;
        v[k++] = -nextafterf((float)top, INFINITY);
        v[k++] = (float)f[t].min_normal;
        v[k++] = nextafterf((float)f[t].min_normal, 0);
        v[k++] = -nextafterf((float)f[t].min_normal, 0);
        v[k++] = FLT_TRUE_MIN;
        v[k++] = 0.0f;
        v[k++] = -0.0f;
        v[k++] = NAN;
        v[k++] = INFINITY;
        v[k++] = 1.0f;
        int64_t under = 0, over = 0;
        for (int i = 0; i < k; i++) {
            if (!isfinite(v[i]) || v[i] == 0) continue;
            double a = fabs((double)v[i]);
            if (a < f[t].min_normal) under++;
            if (rne(a, f[t].mbits) > f[t].max) over++;
        }
        ts_summary s;
        CHECK(ts_summarize_f32(v, k, TS_WATCH_RANGE, &s) == TS_OK, "%s range ok", f[t].name);
        const double *got = &s.range.fp16_underflow + 2 * t;
        CHECK(fabs(got[0] - (double)under / k) < 1e-12 && fabs(got[1] - (double)over / k) < 1e-12,
              "%s: underflow %.4f (want %.4f) overflow %.4f (want %.4f, %lld values above the "
              "rounding boundary %.9g)",
              f[t].name, got[0], (double)under / k, got[1], (double)over / k, (long long)over, top);
        CHECK(over >= 2 && under >= 3, "%s: the boundary values do test both sides", f[t].name);
    }
}

/* ----------------------------------------------------------- partial + merge */

static void test_merge(void) {
    const int64_t n = 123457;
    float *x = malloc((size_t)n * sizeof *x);
    fill(x, n, 3.0, 2.0, 997);
    const int what = TS_WATCH_STATS | TS_WATCH_HISTOGRAM | TS_WATCH_RANGE;
    ts_summary *one = malloc(sizeof *one), *many = malloc(sizeof *many);
    ts_summarize_f32(x, n, what, one);
    ts_stats_partial *acc = malloc(sizeof *acc), *part = malloc(sizeof *part);
    ts_stats_partial_init(acc, what);
    const int64_t sizes[] = {1, 4095, 4096, 4097, 7000, 0, 33333, 2};
    int64_t at = 0;
    for (int c = 0; at < n; c++) {
        int64_t len = sizes[c % 8];
        if (len > n - at) len = n - at;
        ts_stats_partial_init(part, what);
        ts_stats_partial_add(part, x + at, len);
        ts_stats_merge(acc, part);
        at += len;
    }
    ts_stats_finish(acc, many);
    compare_stats("chunked merge vs one pass", &many->stats, &one->stats, 1e-9);
    /* the public form: finished summaries of records merged as they come */
    ts_summary *sum = calloc(1, sizeof *sum), *rec = malloc(sizeof *rec);
    int merged = 0;
    for (int64_t b = 0; b < n; b += 10000) {
        ts_summarize_f32(x + b, b + 10000 < n ? 10000 : n - b, TS_WATCH_STATS, rec);
        merged += ts_summary_merge(sum, rec) == TS_OK;
    }
    ts_summary *stats_only = malloc(sizeof *stats_only);
    ts_summarize_f32(x, n, TS_WATCH_STATS, stats_only);
    CHECK(merged == 13, "ts_summary_merge: 13 record summaries merged (the first into a zeroed one)");
    compare_stats("ts_summary_merge of 13 records vs one pass", &sum->stats, &stats_only->stats, 1e-9);
    CHECK(ts_summary_merge(sum, one) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "what"),
          "ts_summary_merge of summaries of different things: %s", ts_last_error());
    CHECK(ts_summary_merge(NULL, one) == TS_ERR_INVALID_ARGUMENT, "ts_summary_merge(NULL, ...): an error");
    free(sum);
    free(rec);
    free(stats_only);
    CHECK(memcmp(one->log2_counts, many->log2_counts, sizeof one->log2_counts) == 0 &&
              memcmp(one->tb_counts, many->tb_counts, sizeof one->tb_counts) == 0 &&
              one->log2_zeros == many->log2_zeros,
          "chunked histograms equal one pass");
    CHECK(memcmp(&one->range, &many->range, sizeof one->range) == 0, "chunked range equal");
    /* a summary another watch of the same memory shares: copied where it
     * computed something, its histograms only when it has them */
    ts_summary *copy = malloc(sizeof *copy);
    memset(copy, 0x5a, sizeof *copy);
    one->stored = TS_BF16, one->stored_underflow = 0.25, one->stored_overflow = 0.5;
    ts_summary_copy(copy, one);
    CHECK(memcmp(copy, one, offsetof(ts_summary, log2_counts)) == 0 && memcmp(copy->log2_counts, one->log2_counts, sizeof one->log2_counts) == 0 &&
              memcmp(copy->tb_counts, one->tb_counts, sizeof one->tb_counts) == 0 && memcmp(&copy->range, &one->range, sizeof one->range) == 0 &&
              copy->stored == TS_BF16 && copy->stored_underflow == 0.25 && copy->stored_overflow == 0.5,
          "ts_summary_copy: every field of a summary with histograms and ranges");
    ts_summary *plain = malloc(sizeof *plain);
    ts_summarize_f32(x, n, TS_WATCH_STATS, plain);
    memset(copy, 0x5a, sizeof *copy);
    ts_summary_copy(copy, plain);
    CHECK(memcmp(&copy->stats, &plain->stats, sizeof plain->stats) == 0 && copy->what == TS_WATCH_STATS &&
              ((const unsigned char *)copy->tb_counts)[0] == 0x5a,
          "ts_summary_copy of a stats summary: its stats, the histograms' bytes left alone");
    free(copy);
    free(plain);
    free(x);
    free(one);
    free(many);
    free(acc);
    free(part);
}

/* ------------------------------------------------------------- text forms */

static void test_text(void) {
    float v[] = {-2.0f, -1.0f, 0.0f, 1.0f, 2.0f, 3.5f, NAN, INFINITY};
    const int n = 8;
    ts_summary s;
    ts_summarize_f32(v, n, TS_WATCH_STATS, &s);
    ts_stats r;
    reference(v, n, &r);
    int64_t shape[2] = {2, 4};
    ts_array a = ts_array_f32(v, 2, shape);
    char line[256];
    ts_summary_line("fc1.weight", &a, &s.stats, line, sizeof line);
    printf("     line: %s\n", line);
    long long cnt = -1;
    double lo = 0, hi = 0, mu = 0, sd = 0;
    const char *p = strstr(line, " n=");
    const char *q = strstr(line, "x\u2208[");
    const char *m = strstr(line, "\u03bc=");
    const char *d = strstr(line, "\u03c3=");
    CHECK(strncmp(line, "fc1.weight f32[2,4] ", 20) == 0, "line starts with name and shape");
    CHECK(p && sscanf(p, " n=%lld", &cnt) == 1 && cnt == 8, "line n=%lld", cnt);
    CHECK(q && sscanf(q + strlen("x\u2208["), "%lf, %lf]", &lo, &hi) == 2 && lo == r.min &&
              hi == r.max,
          "line range [%g, %g] is the finite range [%g, %g]", lo, hi, r.min, r.max);
    CHECK(m && sscanf(m + strlen("\u03bc="), "%lf", &mu) == 1 && close_rel(mu, r.mean, 5e-3),
          "line mean %g ~ %g", mu, r.mean);
    CHECK(d && sscanf(d + strlen("\u03c3="), "%lf", &sd) == 1 && close_rel(sd, r.std, 5e-3),
          "line std %g ~ %g", sd, r.std);
    CHECK(strstr(line, " NaN!") && strstr(line, " +Inf!") && !strstr(line, "-Inf!") &&
              !strstr(line, "all zeros"),
          "line flags: NaN! +Inf!, no -Inf!, not all zeros");
    float z[4] = {0, 0, -0.0f, 0};
    ts_summarize_f32(z, 4, TS_WATCH_STATS, &s);
    ts_summary_line("b", NULL, &s.stats, line, sizeof line);
    CHECK(strstr(line, "all zeros") && !strstr(line, "NaN!"), "zeros: '%s'", line);
    float small[3] = {1.2e-5f, 1.2e-5f, 1.2e-5f};
    ts_summarize_f32(small, 3, TS_WATCH_STATS, &s);
    ts_summary_line("t", NULL, &s.stats, line, sizeof line);
    CHECK(strstr(line, "\u03bc=1.2e-05 "), "3 significant digits, trailing zeros dropped: '%s'",
          line);
    char tiny[12];
    ts_summary_line("a_very_long_tensor_name", &a, &s.stats, tiny, sizeof tiny);
    CHECK(strlen(tiny) == sizeof tiny - 1, "line truncates safely to the buffer");

    ts_summarize_f32(v, n, TS_WATCH_STATS, &s);
    char hdr[256], row[256];
    ts_stats_table_header(hdr, sizeof hdr);
    ts_stats_table_row(3, "fc2.bias", &s.stats, row, sizeof row);
    printf("     %s\n     %s\n", hdr, row);
    const char *cols[] = {"Index", "Name", "Mean", "Std", "Minimum", "Maximum", "NaNs", "infs"};
    const char *at = hdr;
    int inorder = 1;
    for (int i = 0; i < 8; i++) {
        const char *f = strstr(at, cols[i]);
        if (!f) inorder = 0;
        else at = f + strlen(cols[i]);
    }
    CHECK(inorder, "header has the columns in order");
    int idx = -1;
    char name[64] = "";
    double cm, cs, cmin, cmax;
    long long nn = -1, ni = -1;
    int got = sscanf(row, "%d %63s %lf %lf %lf %lf %lld %lld", &idx, name, &cm, &cs, &cmin, &cmax,
                     &nn, &ni);
    CHECK(got == 8 && idx == 3 && strcmp(name, "fc2.bias") == 0, "row parses back (%d fields)",
          got);
    CHECK(close_rel(cm, r.mean, 1e-4) && close_rel(cs, r.std, 1e-4) && cmin == r.min &&
              cmax == r.max && nn == 1 && ni == 1,
          "row numbers: mean %g std %g min %g max %g nans %lld infs %lld", cm, cs, cmin, cmax, nn,
          ni);
    CHECK(strlen(row) == strlen(hdr), "row aligned with header (%zu vs %zu chars)", strlen(row),
          strlen(hdr));
    ts_stats_table_row(1, "encoder.block0.attention.query.weight_and_more", &s.stats, row,
                       sizeof row);
    CHECK(strlen(row) == strlen(hdr) && strstr(row, "..."), "long name keeps alignment: %s", row);
}

/* ------------------------------------------------- a work item's rows */

/* ts_sums_rows over `rows` rows of n values, stride apart (the rows a
 * BatchNorm's channel is written in), taken `block` rows a call, and its
 * Relu's beside it: the summaries of both against the reference over the
 * rows' values and over their Relu (x < 0 ? 0 : x: NaN and -0 kept), for
 * rows shorter than a vector, with a tail, of whole vectors, longer than
 * a run, with and without awkward values (NaN, Inf, zeros of both signs,
 * subnormals, -FLT_MAX: the runs holding them summed from memory), and
 * with a zero every third value (a tail's first value a zero: the lanes
 * it fills are not counted). */
static void test_rows(void) {
    static const int64_t lens[] = {1, 15, 16, 17, 63, 64, 100, 784, 1023, 1024, 1025, 2500};
    static const int64_t row_counts[] = {1, 3, 40};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
        for (size_t ri = 0; ri < sizeof row_counts / sizeof row_counts[0]; ri++)
            for (int awkward = 0; awkward < 3; awkward++) /* 2: a zero of either sign every third value */
                for (int relu = 0; relu < 2; relu++) {
                    int64_t n = lens[li], rows = row_counts[ri], stride = n + 7, block = (rows + 1) / 2;
                    float *m = malloc(sizeof(float) * (size_t)(rows * stride)), *v = malloc(sizeof(float) * (size_t)(rows * n));
                    fill(m, rows * stride, awkward ? -0.5 : 3.0, 2.0, awkward == 1 ? 53 : 0);
                    for (int64_t i = 0; awkward == 2 && i < rows * stride; i += 3) m[i] = i % 2 ? -0.0f : 0.0f;
                    for (int64_t r = 0; r < rows; r++) memcpy(v + r * n, m + r * stride, sizeof(float) * (size_t)n);
                    ts_stats_sums a = {0}, ar = {0};
                    ts_sums_rows acc;
                    ts_sums_rows_start(&acc, &a, relu ? &ar : NULL);
                    for (int64_t r = 0; r < rows; r += block) ts_sums_rows_add(&acc, m + r * stride, rows - r < block ? rows - r : block, n, stride);
                    ts_sums_rows_finish(&acc);
                    for (int side = 0; side <= relu; side++) {
                        ts_stats_partial *p = malloc(sizeof *p);
                        ts_summary *got = malloc(sizeof *got);
                        ts_stats want;
                        ts_stats_partial_init(p, TS_WATCH_STATS);
                        ts_stats_sums_merge(p, side ? &ar : &a);
                        ts_stats_finish(p, got);
                        if (side)
                            for (int64_t i = 0; i < rows * n; i++) v[i] = v[i] < 0.0f ? 0.0f : v[i];
                        reference(v, rows * n, &want);
                        char what[96];
                        snprintf(what, sizeof what, "rows: %lld x %lld%s%s", (long long)rows, (long long)n, awkward == 1 ? ", awkward values" : awkward ? ", zeros" : "",
                                 side ? ", the Relu's" : "");
                        compare_stats(what, &got->stats, &want, 2e-6);
                        free(p);
                        free(got);
                    }
                    free(m);
                    free(v);
                }
}

int main(void) {
    test_moments();
    test_lengths();
    test_zero_bits();
    test_log2();
    test_tb();
    test_range();
    test_merge();
    test_rows();
    test_text();
    return check_summary("test_stats");
}
