/* format.c -- text forms of a summary: the one-line summary (lovely-tensors
 * style, 3 significant digits) and the fixed-width stats table of
 * Graphcore's outfeed example (docs/observation.md#summaries). */
#include "core/core.h"

#include <stdio.h>
#include <string.h>

#define TS_TABLE_NAME_WIDTH 32

/* Appends to buf[0..n) at *used; stops quietly at the end (snprintf
 * truncates and terminates). */
static void append(char *buf, size_t n, size_t *used, const char *fmt, ...) TS_PRINTF(4, 5);
static void append(char *buf, size_t n, size_t *used, const char *fmt, ...) {
    if (*used >= n) return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *used, n - *used, fmt, ap);
    va_end(ap);
    if (w > 0) *used += (size_t)w;
}

const char *ts_summary_line(const char *name, const ts_array *shape, const ts_stats *s, char *buf,
                            size_t n) {
    if (!buf || n == 0) return buf;
    buf[0] = '\0';
    size_t used = 0;
    char shown[1700]; /* a name of 400 bytes, escaped (ts_escape_text): a model's names may hold control sequences */
    ts_escape_text(shown, sizeof shown, name ? name : "?");
    append(buf, n, &used, "%s", shown);
    if (shape) {
        char sh[160];
        append(buf, n, &used, " %s", ts_array_shape_str(shape, sh, sizeof sh));
    }
    if (!s) return buf;
    append(buf, n, &used, " n=%lld", (long long)s->count);
    if (s->count == 0) {
        append(buf, n, &used, " empty");
        return buf;
    }
    int64_t finite = s->count - s->nans - s->pos_infs - s->neg_infs;
    if (finite > 0)
        append(buf, n, &used, " x\u2208[%.3g, %.3g] \u03bc=%.3g \u03c3=%.3g", s->min, s->max, s->mean,
               s->std);
    if (s->nans) append(buf, n, &used, " NaN!");
    if (s->pos_infs) append(buf, n, &used, " +Inf!");
    if (s->neg_infs) append(buf, n, &used, " -Inf!");
    if (s->zeros == s->count) append(buf, n, &used, " all zeros");
    return buf;
}

const char *ts_stats_table_header(char *buf, size_t n) {
    if (!buf || n == 0) return buf;
    snprintf(buf, n, "%5s  %-*s %12s %12s %12s %12s %6s %6s", "Index", TS_TABLE_NAME_WIDTH, "Name",
             "Mean", "Std", "Minimum", "Maximum", "NaNs", "infs");
    return buf;
}

const char *ts_stats_table_row(int index, const char *name, const ts_stats *s, char *buf,
                               size_t n) {
    if (!buf || n == 0) return buf;
    buf[0] = '\0';
    if (!s) return buf;
    /* Long names keep their tail (the layer and the tensor) and stay aligned. */
    char nm[1700]; /* escaped, as in ts_summary_line */
    ts_escape_text(nm, sizeof nm, name ? name : "?");
    char shown[TS_TABLE_NAME_WIDTH + 1];
    size_t len = strlen(nm);
    if (len > TS_TABLE_NAME_WIDTH)
        snprintf(shown, sizeof shown, "...%.*s", TS_TABLE_NAME_WIDTH - 3, nm + len - (TS_TABLE_NAME_WIDTH - 3));
    else
        snprintf(shown, sizeof shown, "%.*s", TS_TABLE_NAME_WIDTH, nm);
    snprintf(buf, n, "%5d  %-*s %12.5g %12.5g %12.5g %12.5g %6lld %6lld", index,
             TS_TABLE_NAME_WIDTH, shown, s->mean, s->std, s->min, s->max, (long long)s->nans,
             (long long)(s->pos_infs + s->neg_infs));
    return buf;
}

const char *ts_watch_result_replicas(const ts_watch_result *w, char *buf, size_t n) {
    if (!buf || n == 0) return buf;
    buf[0] = '\0';
    if (!w || !w->summary || w->replica >= 0) return buf;
    size_t used = 0;
    const ts_stats *s = &w->summary->stats;
    if (w->min_replica >= 0) append(buf, n, &used, "[replica %d] min %.5g", w->min_replica, s->min);
    if (w->max_replica >= 0) append(buf, n, &used, "%s[replica %d] max %.5g", used ? "  " : "", w->max_replica, s->max);
    if (w->nonfinite_replica >= 0) append(buf, n, &used, "%s[replica %d] NaN/Inf", used ? "  " : "", w->nonfinite_replica);
    return buf;
}
