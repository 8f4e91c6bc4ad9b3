/* report.c -- the metrics report read back (report.h). */
#include "report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *report_field(const char *report, const char *kind, const char *name, const char *key, char *out, size_t cap) {
    char head[128];
    snprintf(head, sizeof head, "%s: %s\n", kind, name);
    const char *p = report;
    while ((p = strstr(p, head)) != NULL && p != report && p[-1] != '\n') p++;
    if (!p) return NULL;
    p += strlen(head);
    size_t k = strlen(key);
    while (strncmp(p, "  ", 2) == 0) {
        const char *eol = strchr(p, '\n');
        if (!eol) return NULL;
        if (strncmp(p + 2, key, k) == 0 && p[2 + k] == ':') {
            size_t n = (size_t)(eol - (p + 4 + k));
            if (n >= cap) n = cap - 1;
            memcpy(out, p + 4 + k, n);
            out[n] = 0;
            return out;
        }
        p = eol + 1;
    }
    return NULL;
}

double report_ns(const char *s) {
    static const struct {
        const char *unit;
        double ns;
    } units[] = {{"ms", 1e6}, {"us", 1e3}, {"d", 86400e9}, {"h", 3600e9}, {"m", 60e9}, {"s", 1e9}}; /* "ms" before "m" */
    double ns = 0;
    int parts = 0;
    while (*s) {
        char *end;
        double v = strtod(s, &end);
        if (end == s) return -1;
        size_t u = 0, n = sizeof units / sizeof units[0];
        while (u < n && strncmp(end, units[u].unit, strlen(units[u].unit)) != 0) u++;
        if (u == n) return -1;
        ns += v * units[u].ns;
        s = end + strlen(units[u].unit);
        parts++;
    }
    return parts ? ns : -1;
}

int report_timing(const char *report, const char *name, long long *samples, double *total_ns) {
    char n[64], acc[64];
    if (!report_field(report, "Metric", name, "TotalSamples", n, sizeof n) || !report_field(report, "Metric", name, "Accumulator", acc, sizeof acc))
        return 0;
    *samples = atoll(n);
    *total_ns = report_ns(acc);
    return *total_ns >= 0;
}
