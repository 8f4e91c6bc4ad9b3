/* metrics.h -- internal side of the metrics registry (docs/observation.md#diagnostics).
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
#ifndef TS_DIAG_METRICS_H
#define TS_DIAG_METRICS_H

#include <stdint.h>

#include "core/core.h"

#define TS_METRIC_RING 1024 /* recent samples kept per metric */

/* Percentile p (1..99) of n sorted samples is sorted[p * n / 100] (integer
 * division, XLA's rule `samples[size_t(p/100 * n)]`), clamped to n - 1. */
size_t ts_metric_percentile_index(int p, size_t n);

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

/* Formats bytes like XLA: "512.00B", "12.34MB" (1024-based). */
const char *ts_format_bytes(double bytes, char *buf, size_t n);

#endif
