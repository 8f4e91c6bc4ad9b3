/* metrics.c -- the metrics registry and its PyTorch/XLA-style report. */
#include "diag/metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ts_sample {
    uint64_t t_ns;
    double v;
} ts_sample;

typedef enum { TS_METRIC_TIME, TS_METRIC_VALUE, TS_METRIC_BYTES } ts_metric_kind;

typedef struct ts_metric {
    char *name;
    ts_metric_kind kind;
    uint64_t count; /* total samples since the last reset */
    double acc;
    ts_sample *ring; /* TS_METRIC_RING; slot count % TS_METRIC_RING is next */
    bool peaked;     /* recorded by ts_metric_record_peak: the report shows the peak */
    double peak;
    uint64_t peak_after_ns; /* when the peak came, after the start the caller gave */
} ts_metric;

typedef struct ts_counter {
    char *name;
    int64_t value;
} ts_counter;

/* Both tables are arrays of pointers sorted by name: binary search for the
 * hot path, and the report walks them in order. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static ts_metric **g_metrics;
static size_t g_nmetrics, g_capmetrics;
static ts_counter **g_counters;
static size_t g_ncounters, g_capcounters;

static const int k_percentiles[] = {1, 5, 10, 20, 50, 80, 90, 95, 99};

/* Index of `name` in the sorted table of entries whose first field is the
 * name; *found tells whether it is there (else it is the insertion point). */
static size_t find_slot(void *const *table, size_t n, const char *name, int *found) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(*(char *const *)table[mid], name);
        if (c == 0) {
            *found = 1;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = 0;
    return lo;
}

static int insert_at(void ***table, size_t *n, size_t *cap, size_t at, void *entry) {
    if (ts_grow((void **)table, cap, *n + 1, sizeof(void *)) != TS_OK)
        return -1;
    memmove(*table + at + 1, *table + at, (*n - at) * sizeof(void *));
    (*table)[at] = entry;
    (*n)++;
    return 0;
}

/* Caller holds g_lock. NULL when out of memory (the sample is dropped). */
static ts_metric *metric_lookup(const char *name, ts_metric_kind kind) {
    int found;
    size_t at = find_slot((void *const *)g_metrics, g_nmetrics, name, &found);
    if (found)
        return g_metrics[at];
    ts_metric *m = ts_calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->name = ts_strdup(name);
    m->ring = ts_malloc(TS_METRIC_RING * sizeof(ts_sample));
    m->kind = kind;
    if (!m->name || !m->ring ||
        insert_at((void ***)&g_metrics, &g_nmetrics, &g_capmetrics, at, m) != 0) {
        ts_free(m->name);
        ts_free(m->ring);
        ts_free(m);
        return NULL;
    }
    return m;
}

static ts_counter *counter_lookup(const char *name, int create) {
    int found;
    size_t at = find_slot((void *const *)g_counters, g_ncounters, name, &found);
    if (found)
        return g_counters[at];
    if (!create)
        return NULL;
    ts_counter *c = ts_calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->name = ts_strdup(name);
    if (!c->name ||
        insert_at((void ***)&g_counters, &g_ncounters, &g_capcounters, at, c) != 0) {
        ts_free(c->name);
        ts_free(c);
        return NULL;
    }
    return c;
}

/* start_ns: keep the peak, timed from then (0: a plain sample). */
static void metric_add(const char *name, ts_metric_kind kind, double v, uint64_t start_ns) {
    if (!name || !*name)
        return;
    uint64_t now = ts_now_ns();
    pthread_mutex_lock(&g_lock);
    ts_metric *m = metric_lookup(name, kind);
    if (m) {
        m->ring[m->count % TS_METRIC_RING] = (ts_sample){now, v};
        if (start_ns && (!m->peaked || m->count == 0 || v > m->peak)) {
            m->peak = v;
            m->peak_after_ns = now > start_ns ? now - start_ns : 0;
        }
        m->peaked |= start_ns != 0;
        m->count++;
        m->acc += v;
    }
    pthread_mutex_unlock(&g_lock);
}

void ts_metric_record(const char *name, double value_ns) {
    metric_add(name, TS_METRIC_TIME, value_ns, 0);
}

void ts_metric_record_value(const char *name, double value) {
    metric_add(name, name && strstr(name, "Bytes") ? TS_METRIC_BYTES : TS_METRIC_VALUE, value, 0);
}

void ts_metric_record_peak(const char *name, double value, uint64_t start_ns) {
    metric_add(name, name && strstr(name, "Bytes") ? TS_METRIC_BYTES : TS_METRIC_VALUE, value, start_ns ? start_ns : 1);
}

uint64_t ts_metric_timer_start(void) { return ts_now_ns(); }

void ts_metric_timer_stop(const char *name, uint64_t start_ns) {
    ts_metric_record(name, (double)(ts_now_ns() - start_ns));
}

void ts_counter_add(const char *name, int64_t delta) {
    if (!name || !*name)
        return;
    pthread_mutex_lock(&g_lock);
    ts_counter *c = counter_lookup(name, 1);
    if (c)
        c->value += delta;
    pthread_mutex_unlock(&g_lock);
}

void ts_counter_add_cause(const char *name, const char *cause, int64_t delta) {
    ts_counter_add(name, delta);
    if (!name || !cause || !*cause)
        return;
    char full[256]; /* on the stack: no allocation once both names exist */
    int len = snprintf(full, sizeof(full), "%s.%s", name, cause);
    if (len > 0 && (size_t)len < sizeof(full))
        ts_counter_add(full, delta);
}

int64_t ts_counter_get(const char *name) {
    if (!name)
        return 0;
    pthread_mutex_lock(&g_lock);
    ts_counter *c = counter_lookup(name, 0);
    int64_t v = c ? c->value : 0;
    pthread_mutex_unlock(&g_lock);
    return v;
}

/* Keeps the registrations (and their rings) so later samples stay
 * allocation-free; zeroed metrics and counters drop out of the report. */
void ts_metrics_reset(void) {
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_nmetrics; i++) {
        g_metrics[i]->count = 0;
        g_metrics[i]->acc = 0;
    }
    for (size_t i = 0; i < g_ncounters; i++)
        g_counters[i]->value = 0;
    pthread_mutex_unlock(&g_lock);
}

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
    double x = ((const ts_sample *)a)->v, y = ((const ts_sample *)b)->v;
    return (x > y) - (x < y);
}

/* One `Metric:` block. `s` holds the ring in chronological order. */
static void emit_metric(strbuf *b, const ts_metric *m, ts_sample *s, size_t n) {
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

char *ts_metrics_report(void) {
    strbuf b = {0};
    ts_sample *s = ts_malloc(TS_METRIC_RING * sizeof(ts_sample));
    if (!s)
        return NULL;
    sb_printf(&b, "%s", ""); /* an empty registry still yields "" */
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_nmetrics; i++) {
        const ts_metric *m = g_metrics[i];
        if (m->count == 0)
            continue;
        /* Unroll the ring oldest-first. */
        size_t n = m->count < TS_METRIC_RING ? (size_t)m->count : TS_METRIC_RING;
        size_t start = m->count <= TS_METRIC_RING ? 0 : (size_t)(m->count % TS_METRIC_RING);
        for (size_t k = 0; k < n; k++)
            s[k] = m->ring[(start + k) % TS_METRIC_RING];
        emit_metric(&b, m, s, n);
    }
    for (size_t i = 0; i < g_ncounters; i++)
        if (g_counters[i]->value != 0)
            sb_printf(&b, "Counter: %s\n  Value: %lld\n", g_counters[i]->name,
                      (long long)g_counters[i]->value);
    pthread_mutex_unlock(&g_lock);
    ts_free(s);
    if (b.failed) {
        ts_free(b.p);
        return NULL;
    }
    return b.p;
}
