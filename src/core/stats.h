/* stats.h -- summaries of f32 tensors in parts (docs/observation.md#summaries). Internal.
 *
 * ts_summarize_f32 is one call; the executor's thread pool splits a big
 * tensor into chunks instead:
 *
 *     ts_stats_partial p[T];                     // one per thread
 *     ts_stats_partial_init(&p[t], what);        // each thread
 *     ts_stats_partial_add(&p[t], x + b, e - b); // chunk [b, e), any size
 *     for (t = 1; t < T; t++) ts_stats_merge(&p[0], &p[t]);
 *     ts_stats_finish(&p[0], &summary);
 *
 * Merging is exact for the counts and Chan's parallel update for the moments,
 * so any split gives what one pass gives (to rounding).
 *
 * Rules the numbers follow:
 * - mean, std (population), min, max and l2 cover the finite values. With no
 *   finite value, mean/std/min/max are NaN and l2 is 0.
 * - log2 histogram: finite non-zero x go to bin = the float exponent field of
 *   x (bin 0 = subnormals); +-0 are counted in log2_zeros; NaN/Inf nowhere.
 * - TensorBoard buckets: exactly TensorFlow's Histogram::Add: the bucket of x
 *   is std::upper_bound(limits, x), i.e. the first limit > x; NaN/Inf skipped.
 * - range: fractions over all `count` elements. Zeros and non-finite values
 *   are neither. underflow: 0 < |x| < the target's smallest normal.
 *   overflow: round-to-nearest-even of |x| to the target's precision exceeds
 *   its largest finite value, i.e.
 *     fp16 |x| >= 65520        (65504 + half an ulp; the tie goes up)
 *     bf16 |x| >= 0x1.ffp127   (3.3961e38, the same rule)
 *     e5m2 |x| >= 61440        (57344 + half an ulp; the tie goes up)
 *     e4m3 |x| >  464          (448 + half an ulp; the tie goes down to 448,
 *                               e4m3 has no Inf: above it is NaN/saturation) */
#ifndef TS_OBSERVE_STATS_H
#define TS_OBSERVE_STATS_H

#include "core/core.h"

#include <math.h>

/* Positive TensorBoard limits 1e-12 * 1.1^k below 1e20 (k = 0..773). */
#define TS_TB_SIDE 774
/* Limits in TensorFlow's table: -DBL_MAX, the negatives, 0, the positives,
 * DBL_MAX. The public TS_TB_BINS must equal it. */
#define TS_TB_EDGES (2 * TS_TB_SIDE + 3)

#define TS_STATS_WIDE 2
typedef struct ts_stats_partial {
    int what;
    int masked;           /* 1: the last block held NaN or Inf, the next one starts with the classifying pass;
                           * TS_STATS_WIDE: its squares overflowed a float, the next ones take the double pass */
    int64_t count, zeros, nans, pos_infs, neg_infs;
    int64_t finite;       /* finite values seen: the moments' n */
    double mean, m2;      /* running mean and sum of squared deviations */
    double min, max;      /* of finite values; +-Inf while finite == 0 */
    int64_t log2_zeros;
    int64_t log2_counts[TS_LOG2_BINS];
    int64_t tb_counts[TS_TB_BINS];
    int64_t under[4], over[4]; /* fp16, bf16, e4m3, e5m2 */
} ts_stats_partial;

void ts_stats_partial_init(ts_stats_partial *p, int what);
/* Adds x[0..n) (n >= 0; x may be NULL when n == 0). */
void ts_stats_partial_add(ts_stats_partial *p, const float *x, int64_t n);
/* into += from (both initialised with the same `what`). */
void ts_stats_merge(ts_stats_partial *into, const ts_stats_partial *from);
void ts_stats_finish(const ts_stats_partial *p, ts_summary *out);
/* *dst = *src where src computed it (src->what): the stats, and the
 * histograms' 14 KB only where it has them (a summary another watch of the
 * same memory shares). */
void ts_summary_copy(ts_summary *dst, const ts_summary *src);
/* Summing a tensor's values around one shift while a kernel produces or
 * consumes them, then merging them into a partial once: the optimizer step
 * (ts_opt_update_summarised) sums the gradient it reads and the parameter
 * it writes from registers (stats_vec.h's ts_vacc, folded in with
 * ts_vacc_finish) and odd values with ts_stats_stream_add:
 *
 *     ts_stats_stream s = {0};
 *     ... ts_vacc_finish(&acc, &s, &p); ts_stats_stream_add(&s, &p, x, n); ...
 *     ts_stats_stream_flush(&s, &p);
 *
 * The result is what ts_stats_partial_add over the same values gives (to
 * rounding); values holding NaN or Inf go straight to the partial. Flush
 * every few thousand values so the shift follows the running mean. Stats
 * only: p's `what` is TS_WATCH_STATS (no histogram or range). */
typedef struct ts_stats_stream {
    int64_t n, zeros;     /* finite values summed here, and the zeros among them */
    double s, q;          /* sums of x - c and (x - c)^2 */
    double min, max;
    float c;              /* the shift, chosen at the first values */
    bool shifted;         /* c is chosen */
} ts_stats_stream;

void ts_stats_stream_add(ts_stats_stream *s, ts_stats_partial *p, const float *x, int64_t n);
void ts_stats_stream_flush(ts_stats_stream *s, ts_stats_partial *p);
/* The shift of a block of values x[0..n): 0 once p's mean is within a std
 * of 0, else p's running mean or, before any value, ts_stats_typical of
 * the block. */
float ts_stats_shift(const ts_stats_partial *p, const float *x, int64_t n);
/* A typical value of x[0..n), to take the others' deviations from: the
 * median of the first, middle and last values, of those that are finite
 * (0 when none is; a single one of them an outlier, as a padding row or a
 * gradient's spike may be, is not chosen). The rounding of the sums grows
 * with (shift - mean)^2 / variance. One function for the host and a
 * device's kernels (backend/cuda/stats.cu takes each tensor's shift so). */
#ifdef __CUDACC__
#define TS_HOST_DEVICE __host__ __device__
#else
#define TS_HOST_DEVICE
#endif
static inline TS_HOST_DEVICE float ts_stats_typical(const float *x, int64_t n) {
    if (n <= 0) return 0.0f;
    float v[3] = {x[0], x[n / 2], x[n - 1]}, f[3];
    int k = 0;
    for (int i = 0; i < 3; i++)
        if (isfinite(v[i])) f[k++] = v[i];
    if (k < 3) return k ? f[0] : 0.0f;
    float lo = f[0] < f[1] ? f[0] : f[1], hi = f[0] < f[1] ? f[1] : f[0];
    return f[2] < lo ? lo : f[2] > hi ? hi : f[2];
}
/* Plain stats in a few words: one per work item of a kernel that
 * summarises values it computes but never stores (the one-pass attention's
 * scores and probabilities, backend.h's ts_att_sums: one per (batch, head)
 * pair, its threads' unit of work), merged into a partial in the items'
 * order afterwards, so the summary's bits do not depend on the threads.
 * A ts_stats_partial is 14 KB with its histograms; this is what its stats
 * need. Zero it to start. ts_stats_sums_add sums blocks around the shift
 * its first block chose, as ts_stats_partial_add does (what that gives
 * over the same values, to rounding); ts_stats_sums_repeat adds k copies
 * of one value (masked keys' fill, probabilities of keys past a row's
 * last) as their moments, apart from the sums: a fill of -1e30 leaves the
 * others' spread intact. Stats only (TS_WATCH_STATS). */
typedef struct ts_stats_sums {
    int64_t count, n, zeros, nans, pos_infs, neg_infs; /* n: the finite values in s and q */
    double s, q;          /* sums of x - c and (x - c)^2 */
    int64_t rn;           /* finite values added by ts_stats_sums_repeat: their mean and m2 */
    double rmean, rm2;
    double min, max;      /* of the finite values, while n + rn > 0 */
    float c;
    int masked;           /* as ts_stats_partial's */
    bool shifted;
} ts_stats_sums;
void ts_stats_sums_add(ts_stats_sums *a, const float *x, int64_t n);
void ts_stats_sums_repeat(ts_stats_sums *a, float v, int64_t k);
/* p += a (p initialised with TS_WATCH_STATS) */
void ts_stats_sums_merge(ts_stats_partial *p, const ts_stats_sums *a);
/* p's stats become those of its values times k (finite, non-zero): each
 * value's product rounded to a float aside, which a summary's rounding
 * covers. */
void ts_stats_partial_scale(ts_stats_partial *p, double k);

/* Adds x[0..n) to px and Relu(x) (x < 0 ? 0 : x, as the Relu kernel) to py,
 * in one read of x: the summary of a watched Relu taken in its input's
 * pass. Both stats only (TS_WATCH_STATS). A block at a time as one row of
 * stats_vec.h's ts_sums_rows: the Relu's own lanes sum its values and
 * squares and count its zeros; its min and max follow from x's (x's where
 * that is positive, else 0). */
void ts_stats_partial_add_relu(ts_stats_partial *px, ts_stats_partial *py, const float *x, int64_t n);

/* A stats summary (TS_WATCH_STATS) a device reduced, in the terms of the
 * host's partial summaries (core/stats.h): counts, and the moments and
 * extremes of the finite values (min/max +-Inf while finite == 0). */
typedef struct ts_device_stats {
    double count, zeros, nans, pos_infs, neg_infs, finite;
    double mean, m2, min, max;
} ts_device_stats;
/* The histograms and range counts (TS_WATCH_HISTOGRAM, TS_WATCH_RANGE) a
 * device reduced: the partial's counts, as 64-bit integers a device adds
 * to atomically (any order gives the same counts). */
typedef struct ts_device_hist {
    unsigned long long log2_zeros, log2_counts[TS_LOG2_BINS], tb_counts[TS_TB_BINS], under[4], over[4];
} ts_device_hist;
/* A partial's stats (and its histograms and range counts, where h is not
 * NULL) as a device's records; and back, into a partial computing `what`
 * (h NULL: none of TS_WATCH_HISTOGRAM and TS_WATCH_RANGE). */
void ts_stats_to_device(const ts_stats_partial *p, ts_device_stats *out, ts_device_hist *h);
void ts_stats_from_device(const ts_device_stats *d, const ts_device_hist *h, int what, ts_stats_partial *out);

/* The partial a finished summary came from (to rounding), so summaries
 * taken apart (one per replica) merge into one. */
void ts_stats_from_summary(const ts_summary *s, ts_stats_partial *p);

/* TensorFlow's bucket index of a finite x: upper_bound over the limits. */
int ts_tb_bucket_index(double x);
/* The table a device's bucket index starts from (TS_TB_CELLS entries):
 * the positive limits <= the lower edge of each cell of |x|'s float bits
 * >> 16 (a cell spans under 1%, so at most one limit lies inside it). The
 * positive limits themselves are ts_tb_bucket_limits() + TS_TB_SIDE + 2. */
#define TS_TB_CELLS (1 << 15)
const int16_t *ts_tb_cells(void);
/* The range counts' thresholds on |x|'s float bits, per target (fp16,
 * bf16, e4m3, e5m2): underflow when 0 < bits < ts_range_min_normal[t],
 * overflow when ts_range_over_from[t] <= bits < Inf's. */
extern const uint32_t ts_range_min_normal[4], ts_range_over_from[4];

#endif
