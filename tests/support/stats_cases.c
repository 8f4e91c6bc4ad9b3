/* stats_cases.c -- the device's stats summaries (stats_reduce_many, else
 * stats_reduce) against the same values' stats taken in two passes in
 * double: sizes around the launch's runs and chunks, values that
 * make a summary's arithmetic hard (a large mean with a small spread, one
 * huge outlier first, squares past float's range, NaN, +-Inf, signed
 * zeros), and more tensors than one launch takes, with a tensor big enough
 * that the launch makes its chunks bigger. Counts, min and max must be
 * equal; the mean within 1e-6 of the spread (and of its magnitude), the
 * squared deviations within 1e-5. The histograms and range counts (where a
 * job asks for them) must equal the CPU's, bin for bin. */
#include "op_check.h"

#include "check.h"
#include "core/stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum fill_kind {
    UNIFORM,      /* [-1, 1) */
    FAR_MEAN,     /* 1000 +- 0.01 */
    OUTLIER_FIRST,/* uniform, x[0] = 1e6 */
    NAN_FIRST,    /* uniform, x[0] NaN */
    NONFINITE,    /* uniform with NaN, +Inf, -Inf sprinkled */
    HUGE_SQUARES, /* 1 and +-3e19 (d^2 past float's range) */
    ZEROS,        /* 0 and -0 */
    FILL_KINDS
} fill_kind;

static const char *const fill_name[FILL_KINDS] = {"uniform", "mean 1000 spread 0.01", "outlier 1e6 first", "NaN first",
                                                   "NaN/Inf sprinkled", "squares past float's range", "signed zeros"};

static float next_uniform(uint64_t *s) { /* [-1, 1) */
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*s >> 11) * 0x1.0p-52 - 1.0);
}

static void fill(float *x, int64_t n, fill_kind k, uint64_t seed) {
    for (int64_t i = 0; i < n; i++) {
        float u = next_uniform(&seed);
        switch (k) {
        case FAR_MEAN: x[i] = 1000.0f + 0.01f * u; break;
        case NONFINITE: x[i] = i % 997 == 3 ? NAN : i % 1009 == 5 ? INFINITY : i % 1013 == 7 ? -INFINITY : u; break;
        case HUGE_SQUARES: x[i] = i % 5 == 1 ? (u < 0 ? -3e19f : 3e19f) : 1.0f; break;
        case ZEROS: x[i] = u < 0 ? -0.0f : 0.0f; break;
        default: x[i] = u; break;
        }
    }
    if (n > 0 && k == OUTLIER_FIRST) x[0] = 1e6f;
    if (n > 0 && k == NAN_FIRST) x[0] = NAN;
}

static bool near(double a, double b, double tol) { return fabs(a - b) <= tol; }

/* x's stats in two passes, in double: the reference */
static void exact(const float *x, int64_t n, ts_device_stats *r) {
    *r = (ts_device_stats){(double)n, 0, 0, 0, 0, 0, 0.0, 0.0, INFINITY, -INFINITY};
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(x[i])) r->nans++;
        else if (isinf(x[i])) *(x[i] > 0 ? &r->pos_infs : &r->neg_infs) += 1;
        else {
            r->finite++, r->zeros += x[i] == 0.0f, sum += x[i];
            r->min = fmin(r->min, x[i]), r->max = fmax(r->max, x[i]);
        }
    }
    if (r->finite == 0) return;
    r->mean = sum / r->finite;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(x[i])) r->m2 += ((double)x[i] - r->mean) * ((double)x[i] - r->mean);
}

/* one summary against the reference: the failures' count */
static int compare(const char *label, const ts_device_stats *d, const ts_device_stats *r) {
    bool counts = d->count == r->count && d->zeros == r->zeros && d->nans == r->nans && d->pos_infs == r->pos_infs &&
                  d->neg_infs == r->neg_infs && d->finite == r->finite;
    bool range = r->finite == 0 || (d->min == r->min && d->max == r->max);
    double var = r->finite > 0 ? r->m2 / r->finite : 0.0;
    bool mean = near(d->mean, r->mean, 1e-6 * (sqrt(var) + fabs(r->mean)) + 1e-30);
    bool m2 = near(d->m2, r->m2, 1e-5 * r->m2 + 1e-30);
    bool ok = counts && range && mean && m2;
    CHECK(ok, "stats of %s: count %.0f/%.0f zeros %.0f/%.0f nan %.0f/%.0f +inf %.0f/%.0f -inf %.0f/%.0f min %g/%g max %g/%g mean %.9g/%.9g m2 %.9g/%.9g",
          label, d->count, r->count, d->zeros, r->zeros, d->nans, r->nans, d->pos_infs, r->pos_infs, d->neg_infs, r->neg_infs, d->min,
          r->min, d->max, r->max, d->mean, r->mean, d->m2, r->m2);
    return !ok;
}

#define MAX_JOBS 80

/* job j's histograms and range counts, against the CPU's: the failures' count */
static int compare_hist(const char *label, int what, const ts_device_hist *d, const float *x, int64_t n) {
    ts_stats_partial *p = malloc(sizeof *p);
    ts_device_hist *r = malloc(sizeof *r);
    ts_device_stats unused;
    bool ok = p && r;
    if (ok) {
        ts_stats_partial_init(p, TS_WATCH_HISTOGRAM | TS_WATCH_RANGE);
        ts_stats_partial_add(p, x, n);
        ts_stats_to_device(p, &unused, r);
    }
    bool hist = !(what & TS_WATCH_HISTOGRAM) || (ok && d->log2_zeros == r->log2_zeros && !memcmp(d->log2_counts, r->log2_counts, sizeof r->log2_counts) &&
                                                 !memcmp(d->tb_counts, r->tb_counts, sizeof r->tb_counts));
    bool range = !(what & TS_WATCH_RANGE) || (ok && !memcmp(d->under, r->under, sizeof r->under) && !memcmp(d->over, r->over, sizeof r->over));
    int first_tb = -1;
    for (int i = 0; ok && !hist && first_tb < 0 && i < TS_TB_BINS; i++)
        if (d->tb_counts[i] != r->tb_counts[i]) first_tb = i;
    CHECK(ok && hist && range, "counts of %s (%s%s): log2 zeros %llu/%llu, first TensorBoard bucket that differs %d, fp16 under %llu/%llu over %llu/%llu", label,
          what & TS_WATCH_HISTOGRAM ? "histograms" : "", what & TS_WATCH_RANGE ? " range" : "", d->log2_zeros, ok ? r->log2_zeros : 0, first_tb,
          d->under[0], ok ? r->under[0] : 0, d->over[0], ok ? r->over[0] : 0);
    free(p);
    free(r);
    return !(ok && hist && range);
}

/* n_jobs tensors of the given sizes and kinds summarised in one call on
 * the device, each compared with the reference; with histograms and range
 * counts as hist_what[j] asks (0: stats alone) */
static void check_batch(ts_op_checker *c, const char *what, int n_jobs, const int64_t *sizes, const fill_kind *kinds, const int *hist_what) {
    const ts_backend *be = c->dev;
    ts_stats_job jobs[MAX_JOBS];
    float *host[MAX_JOBS] = {0};
    void *dev[MAX_JOBS] = {0}, *slots = NULL, *hists = NULL;
    ts_device_stats got[MAX_JOBS], want[MAX_JOBS];
    ts_device_hist *got_hist = malloc(sizeof *got_hist * MAX_JOBS);
    bool ok = got_hist && be->alloc(sizeof got, &slots) == TS_OK && be->alloc(sizeof *got_hist * MAX_JOBS, &hists) == TS_OK;
    for (int j = 0; ok && j < n_jobs; j++) {
        size_t bytes = (size_t)(sizes[j] ? sizes[j] : 1) * sizeof(float);
        host[j] = malloc(bytes);
        ok = host[j] && be->alloc(bytes, &dev[j]) == TS_OK;
        if (!ok) break;
        fill(host[j], sizes[j], kinds[j], 0x9E3779B97F4A7C15ull + (uint64_t)j);
        be->copy_to_device(c->stream, dev[j], host[j], (size_t)sizes[j] * sizeof(float));
        jobs[j] = (ts_stats_job){dev[j], sizes[j], (ts_device_stats *)slots + j, hist_what[j] ? (ts_device_hist *)hists + j : NULL, hist_what[j]};
        exact(host[j], sizes[j], &want[j]);
    }
    CHECK(ok, "%s: memory for the batch", what);
    c->failures += !ok;
    if (ok) {
        be->stats_reduce_many(c->stream, jobs, n_jobs);
        be->copy_to_host(c->stream, got, slots, (size_t)n_jobs * sizeof *got);
        be->copy_to_host(c->stream, got_hist, hists, (size_t)n_jobs * sizeof *got_hist);
        ok = be->synchronize(c->stream) == TS_OK;
        CHECK(ok, "%s: the summaries ran on %s", what, be->name);
        c->failures += !ok;
    }
    for (int j = 0; ok && j < n_jobs; j++) {
        char label[160];
        snprintf(label, sizeof label, "%s: %lld values, %s", what, (long long)sizes[j], fill_name[kinds[j]]);
        c->failures += compare(label, &got[j], &want[j]);
        if (hist_what[j]) c->failures += compare_hist(label, hist_what[j], &got_hist[j], host[j], sizes[j]);
        c->checked++;
    }
    for (int j = 0; j < n_jobs; j++) {
        free(host[j]);
        if (dev[j]) be->free(dev[j]);
    }
    if (slots) be->free(slots);
    if (hists) be->free(hists);
    free(got_hist);
}

void ts_stats_cases(ts_op_checker *c) {
    if (!c->dev->stats_reduce_many) {
        printf("stats summaries: %s reduces none (the host summarises its tensors)\n", c->dev->name);
        return;
    }
    /* every kind at sizes about a thread's run (8), a block's row (256), a
     * chunk (16384) */
    static const int64_t sizes[] = {0, 1, 7, 8, 9, 255, 256, 2047, 16383, 16384, 16385, 100003, 1000037};
    enum { N_SIZES = sizeof sizes / sizeof sizes[0] };
    for (int k = 0; k < FILL_KINDS; k++) {
        int64_t sz[N_SIZES];
        fill_kind kd[N_SIZES];
        int hw[N_SIZES];
        for (int i = 0; i < N_SIZES; i++) sz[i] = sizes[i], kd[i] = (fill_kind)k, hw[i] = TS_WATCH_HISTOGRAM | TS_WATCH_RANGE;
        check_batch(c, "one launch", N_SIZES, sz, kd, hw);
    }
    /* more tensors than a launch takes, and 2^26 + 12345 values in one of
     * them: past the launch's records at its first chunk size */
    int64_t sz[MAX_JOBS];
    fill_kind kd[MAX_JOBS];
    int hw[MAX_JOBS], n = TS_STATS_MANY + 9;
    static const int modes[4] = {0, TS_WATCH_HISTOGRAM, TS_WATCH_RANGE, TS_WATCH_HISTOGRAM | TS_WATCH_RANGE};
    for (int j = 0; j < n; j++) sz[j] = 1 + (int64_t)j * 5003, kd[j] = (fill_kind)(j % FILL_KINDS), hw[j] = modes[j % 4];
    sz[5] = ((int64_t)1 << 26) + 12345, kd[5] = UNIFORM;
    check_batch(c, "many tensors", n, sz, kd, hw);
}
