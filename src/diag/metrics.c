/* metrics.c -- the metrics report, PyTorch/XLA's style, of the registry
 * every layer records into (core/metrics.c), and its number formats. */
#include "diag/metrics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int k_percentiles[] = {1, 5, 10, 20, 50, 80, 90, 95, 99};

size_t ts_metric_percentile_index(int p, size_t n) {
    if (n == 0 || p <= 0)
        return 0;
    size_t i = (size_t)p * n / 100;
    return i < n ? i : n - 1;
}

/* ------------------------------------------------------------ formatting */

const char *ts_format_duration_ns(double ns, char *buf, size_t n) {
    if (!buf || n == 0)
        return "";
    if (isnan(ns)) {
        snprintf(buf, n, "nan");
        return buf;
    }
    const char *sign = ns < 0 ? "-" : "";
    double a = fabs(ns);
    /* Floor to whole ns once, then split with integer arithmetic so no unit
     * can round up into the next (59.9999999 s stays 59s999ms999.999us). */
    uint64_t t = a >= 1.8e19 ? UINT64_MAX : (uint64_t)floor(a);
    static const struct {
        const char *suffix;
        uint64_t scale;
        int width;
    } parts[] = {{"d", 86400000000000ull, 2}, {"h", 3600000000000ull, 2},
                 {"m", 60000000000ull, 2},    {"s", 1000000000ull, 2},
                 {"ms", 1000000ull, 3}};
    size_t len = 0;
    int started = 0;
    len += (size_t)snprintf(buf, n, "%s", sign);
    for (size_t i = 0; i < TS_ARRAY_LEN(parts); i++) {
        uint64_t q = t / parts[i].scale;
        if (q == 0 && !started)
            continue; /* leading zero units are omitted, like XLA */
        started = 1;
        if (len < n)
            len += (size_t)snprintf(buf + len, n - len, "%0*llu%s", parts[i].width,
                                    (unsigned long long)q, parts[i].suffix);
        t -= q * parts[i].scale;
    }
    if (len < n)
        snprintf(buf + len, n - len, "%03llu.%03lluus", (unsigned long long)(t / 1000),
                 (unsigned long long)(t % 1000));
    return buf;
}

const char *ts_format_bytes(double bytes, char *buf, size_t n) {
    static const char *const suffix[] = {"B", "KB", "MB", "GB", "TB", "PB"};
    size_t s = 0;
    while (s + 1 < TS_ARRAY_LEN(suffix) && bytes >= 1024.0) {
        bytes /= 1024.0;
        s++;
    }
    if (buf && n)
        snprintf(buf, n, "%.2f%s", bytes, suffix[s]);
    return buf ? buf : "";
}

static const char *metric_repr(ts_metric_kind kind, double v, char *buf, size_t n) {
    switch (kind) {
    case TS_METRIC_TIME:
        return ts_format_duration_ns(v, buf, n);
    case TS_METRIC_BYTES:
        return ts_format_bytes(v, buf, n);
    case TS_METRIC_VALUE:
        break;
    }
    snprintf(buf, n, "%.2f", v);
    return buf;
}

void ts_string_free(char *s) { ts_free(s); }

/* -------------------------------------------------------------- report */

typedef struct strbuf {
    char *p;
    size_t len, cap;
    int failed;
} strbuf;

static void sb_printf(strbuf *b, const char *fmt, ...) TS_PRINTF(2, 3);
static void sb_printf(strbuf *b, const char *fmt, ...) {
    if (b->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->failed = 1;
            return;
        }
        if (b->p && b->len + (size_t)k < b->cap) {
            b->len += (size_t)k;
            return;
        }
        if (ts_grow((void **)&b->p, &b->cap, b->len + (size_t)k + 1, 1) != TS_OK) {
            b->failed = 1;
            return;
        }
    }
}

static int cmp_sample_value(const void *a, const void *b) {
    double x = ((const ts_metric_sample *)a)->v, y = ((const ts_metric_sample *)b)->v;
    return (x > y) - (x < y);
}

/* One `Metric:` block; its samples in chronological order. */
static void emit_metric(void *ctx, const ts_metric_view *m) {
    strbuf *b = ctx;
    ts_metric_sample *s = m->samples;
    size_t n = m->n;
    char t[64], d[64];
    ts_metric_kind kind = m->kind;
    sb_printf(b, "Metric: %s\n  TotalSamples: %llu\n", m->name, (unsigned long long)m->count);
    sb_printf(b, "  Accumulator: %s\n", metric_repr(kind, m->acc, t, sizeof t));
    if (m->peaked)
        sb_printf(b, "  Peak: %s at %s\n", metric_repr(kind, m->peak, t, sizeof t),
                  ts_format_duration_ns((double)m->peak_after_ns, d, sizeof d));
    if (n > 0 && s[n - 1].t_ns > s[0].t_ns) {
        double total = 0, span_s = (double)(s[n - 1].t_ns - s[0].t_ns) / 1e9;
        for (size_t i = 0; i < n; i++)
            total += s[i].v;
        sb_printf(b, "  ValueRate: %s / second\n", metric_repr(kind, total / span_s, t, sizeof t));
        sb_printf(b, "  Rate: %g / second\n", (double)n / span_s);
    }
    qsort(s, n, sizeof(*s), cmp_sample_value);
    sb_printf(b, "  Percentiles: ");
    for (size_t i = 0; i < TS_ARRAY_LEN(k_percentiles); i++) {
        double v = s[ts_metric_percentile_index(k_percentiles[i], n)].v;
        sb_printf(b, "%s%d%%=%s", i ? "; " : "", k_percentiles[i], metric_repr(kind, v, t, sizeof t));
    }
    sb_printf(b, "\n");
}

static void emit_counter(void *ctx, const char *name, int64_t value) {
    sb_printf(ctx, "Counter: %s\n  Value: %lld\n", name, (long long)value);
}

char *ts_metrics_report(void) {
    strbuf b = {0};
    ts_metric_sample *s = ts_malloc(TS_METRIC_RING * sizeof(ts_metric_sample));
    if (!s)
        return NULL;
    sb_printf(&b, "%s", ""); /* an empty registry still yields "" */
    ts_metrics_walk(s, emit_metric, emit_counter, &b);
    ts_free(s);
    if (b.failed) {
        ts_free(b.p);
        return NULL;
    }
    return b.p;
}
