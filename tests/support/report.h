/* report.h -- the metrics report (ts_metrics_report) read back: a field
 * of one block, and a duration as the report prints it in ns. */
#ifndef TS_TEST_REPORT_H
#define TS_TEST_REPORT_H

#include <stddef.h>

/* The value of the line "  <key>: ..." inside the block "<kind>: <name>"
 * (kind "Metric" or "Counter") copied into out, or NULL. */
const char *report_field(const char *report, const char *kind, const char *name, const char *key, char *out, size_t cap);

/* "01d02h03m04s005ms006.007us" (ts_format_duration_ns) in ns; -1 when it
 * is not such a duration. */
double report_ns(const char *duration);

/* Timing metric `name`'s TotalSamples and Accumulator (ns); false when the
 * report has no such metric. */
int report_timing(const char *report, const char *name, long long *samples, double *total_ns);

#endif
