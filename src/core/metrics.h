/* metrics.h -- the metrics registry every layer records into
 * (docs/observation.md#diagnostics): a sink, nothing read back but by the
 * report (diag/metrics.c) and ts_counter_get.
 *
 * Names: timing metrics via ts_metric_record (nanoseconds), value metrics
 * via ts_metric_record_value. A value metric whose name contains "Bytes"
 * (e.g. "TransferToHostBytes") prints humanized bytes (12.34MB, XLA's
 * MetricFnBytes); other value metrics print "%.2f" (XLA's MetricFnValue).
 * A name keeps the kind of its first sample.
 *
 * Counters with a cause: count the total and the cause separately, e.g.
 *     ts_counter_add_cause("Recompilations", "AnchorsChanged", 1);
 * adds 1 to "Recompilations" and to "Recompilations.AnchorsChanged".
 *
 * Cost: the first sample of a name allocates its entry and its ring of
 * TS_METRIC_RING samples; later samples take the registry mutex, find the
 * name by binary search and store into the ring, without allocating. */
#ifndef TS_CORE_METRICS_H
#define TS_CORE_METRICS_H

#include "core/core.h"

#include <stdint.h>

#define TS_METRIC_RING 1024 /* recent samples kept per metric */

/* Times a region: `uint64_t t = ts_metric_timer_start(); ...;
 * ts_metric_timer_stop("ExecuteTime", t);` records the elapsed ns. */
uint64_t ts_metric_timer_start(void);
void ts_metric_timer_stop(const char *name, uint64_t start_ns);

/* A value sample that also keeps the metric's peak and when it came, as
 * the time after start_ns (ts_now_ns clock): the report adds `Peak: 1.23GB
 * at 00m02s...` to its block. A reset starts the peak afresh. */
void ts_metric_record_peak(const char *name, double value, uint64_t start_ns);

/* Adds `delta` to `name` and to `name.cause` (cause may be NULL). */
void ts_counter_add_cause(const char *name, const char *cause, int64_t delta);

/* ---- what the report reads (diag/metrics.c) */

typedef enum ts_metric_kind { TS_METRIC_TIME, TS_METRIC_VALUE, TS_METRIC_BYTES } ts_metric_kind;

typedef struct ts_metric_sample {
    uint64_t t_ns;
    double v;
} ts_metric_sample;

/* One metric with samples since the last reset, as the report shows it. */
typedef struct ts_metric_view {
    const char *name;
    ts_metric_kind kind;
    uint64_t count; /* samples since the last reset */
    double acc;     /* their sum */
    bool peaked;    /* recorded by ts_metric_record_peak */
    double peak;
    uint64_t peak_after_ns;
    ts_metric_sample *samples; /* the ring's, oldest first (the walker's buffer: the callback may sort it) */
    size_t n;
} ts_metric_view;

/* Under the registry's lock, in name order: metric(ctx, v) for every
 * metric with a sample since the last reset (its ring unrolled into
 * `ring`, TS_METRIC_RING samples of the caller's), then counter(ctx, name,
 * value) for every counter that is not 0. The callbacks must not record. */
void ts_metrics_walk(ts_metric_sample *ring, void (*metric)(void *ctx, const ts_metric_view *v),
                     void (*counter)(void *ctx, const char *name, int64_t value), void *ctx);

#endif
