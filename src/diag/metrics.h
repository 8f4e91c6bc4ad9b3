/* metrics.h -- the metrics report's side (docs/observation.md#diagnostics):
 * its percentile rule and number formats. What is recorded, and how, is
 * core/metrics.h. */
#ifndef TS_DIAG_METRICS_H
#define TS_DIAG_METRICS_H

#include "core/metrics.h"

/* Percentile p (1..99) of n sorted samples is sorted[p * n / 100] (integer
 * division, XLA's rule `samples[size_t(p/100 * n)]`), clamped to n - 1. */
size_t ts_metric_percentile_index(int p, size_t n);

/* Formats bytes like XLA: "512.00B", "12.34MB" (1024-based). */
const char *ts_format_bytes(double bytes, char *buf, size_t n);

#endif
