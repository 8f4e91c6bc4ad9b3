/* metrics.c -- the metrics registry (metrics.h): what every layer
 * records; the report that reads it is diag/metrics.c. */
#include "core/metrics.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

typedef struct ts_metric {
    char *name;
    ts_metric_kind kind;
    uint64_t count; /* total samples since the last reset */
    double acc;
    ts_metric_sample *ring; /* TS_METRIC_RING; slot count % TS_METRIC_RING is next */
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
    m->ring = ts_malloc(TS_METRIC_RING * sizeof(ts_metric_sample));
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
        m->ring[m->count % TS_METRIC_RING] = (ts_metric_sample){now, v};
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

void ts_metrics_walk(ts_metric_sample *ring, void (*metric)(void *ctx, const ts_metric_view *v),
                     void (*counter)(void *ctx, const char *name, int64_t value), void *ctx) {
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_nmetrics; i++) {
        const ts_metric *m = g_metrics[i];
        if (m->count == 0)
            continue;
        /* Unroll the ring oldest-first. */
        size_t n = m->count < TS_METRIC_RING ? (size_t)m->count : TS_METRIC_RING;
        size_t start = m->count <= TS_METRIC_RING ? 0 : (size_t)(m->count % TS_METRIC_RING);
        for (size_t k = 0; k < n; k++)
            ring[k] = m->ring[(start + k) % TS_METRIC_RING];
        metric(ctx, &(ts_metric_view){.name = m->name, .kind = m->kind, .count = m->count, .acc = m->acc, .peaked = m->peaked,
                                      .peak = m->peak, .peak_after_ns = m->peak_after_ns, .samples = ring, .n = n});
    }
    for (size_t i = 0; i < g_ncounters; i++)
        if (g_counters[i]->value != 0)
            counter(ctx, g_counters[i]->name, g_counters[i]->value);
    pthread_mutex_unlock(&g_lock);
}
