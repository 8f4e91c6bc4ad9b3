/* cmd_inspect.c -- `inspect FILE.npy`: what is in a dump, at a glance;
 * `inspect DIR`: a debugger dump in the inspector (cmd_inspect_dump.c). */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Text histogram over log2|x| from the summary's exponent buckets. */
static void text_histogram(const ts_summary *s) {
    int lo = -1, hi = -1;
    int64_t peak = s->log2_zeros;
    for (int i = 0; i < TS_LOG2_BINS; i++)
        if (s->log2_counts[i]) {
            if (lo < 0) lo = i;
            hi = i;
            if (s->log2_counts[i] > peak) peak = s->log2_counts[i];
        }
    printf("histogram of log2|x|:\n");
    if (s->log2_zeros) printf("  %12s %-40.*s %lld\n", "zero", (int)(40 * s->log2_zeros / (peak ? peak : 1)),
                              "########################################", (long long)s->log2_zeros);
    for (int i = lo; i >= 0 && i <= hi; i++) {
        char label[32];
        if (i == 0) snprintf(label, sizeof label, "subnormal");
        else snprintf(label, sizeof label, "[2^%d,2^%d)", i - 127, i - 126);
        int w = (int)(40 * s->log2_counts[i] / (peak ? peak : 1));
        printf("  %12s %-40.*s %lld\n", label, w, "########################################", (long long)s->log2_counts[i]);
    }
}

int cmd_inspect(int argc, char **argv) {
    const cli_flag flags[] = {{NULL, FLAG_BOOL, NULL, NULL, NULL}};
    const char *path = NULL;
    int first = 2;
    if (argc > 2 && strncmp(argv[2], "--", 2) != 0) path = argv[2], first = 3;
    bool help;
    int rc = cli_parse("inspect", "FILE.npy|DIR", flags, argc, argv, first, NULL, &help);
    if (rc || help) return rc;
    if (!path) return cli_usage_error("inspect", "give a .npy file to inspect, or a directory written by train --dump-debug");
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return cli_inspect_dump(path); /* the offline inspector */
    ts_array a;
    if (ts_npy_load(path, &a)) return cli_runtime_error("inspect"); /* the message names the file */
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    int rc2 = cli_print_summary(base, &a);
    ts_npy_free(&a);
    return rc2;
}

ts_status cli_summarize(const ts_array *a, int what, ts_summary *out) {
    int64_t n = ts_array_numel(a);
    float *f = NULL;
    const float *x = a->data;
    if (a->dtype != TS_F32) { /* summarise other dtypes as f32 values */
        f = n ? malloc((size_t)n * sizeof *f) : NULL;
        if (n && !f) return TS_ERR_OUT_OF_MEMORY; /* the caller says so */
        for (int64_t i = 0; i < n; i++) f[i] = (float)cli_array_value(a, i);
        x = f;
    }
    ts_status st = ts_summarize_f32(x, n, what, out);
    free(f);
    return st;
}

double cli_array_value(const ts_array *a, int64_t i) {
    switch (a->dtype) {
    case TS_F32: return (double)((const float *)a->data)[i];
    case TS_F64: return ((const double *)a->data)[i];
    case TS_I32: return (double)((const int32_t *)a->data)[i];
    case TS_I64: return (double)((const int64_t *)a->data)[i];
    default: return (double)((const uint8_t *)a->data)[i];
    }
}

int cli_print_summary(const char *name, const ts_array *a) {
    ts_summary *s = malloc(sizeof *s);
    ts_status st = s ? cli_summarize(a, TS_WATCH_STATS | TS_WATCH_HISTOGRAM | TS_WATCH_RANGE, s) : TS_ERR_OUT_OF_MEMORY;
    if (st) {
        free(s);
        if (st != TS_ERR_OUT_OF_MEMORY) return cli_runtime_error("summarising");
        fprintf(stderr, "tensorscope: out of memory\n");
        return CLI_RUNTIME;
    }
    char line[512], row[512];
    printf("%s\n\n", ts_summary_line(name, a, &s->stats, line, sizeof line));
    printf("%s\n%s\n\n", ts_stats_table_header(line, sizeof line), ts_stats_table_row(0, name, &s->stats, row, sizeof row));
    printf("count %lld  zeros %lld  NaN %lld  +Inf %lld  -Inf %lld  L2 %.6g\n", (long long)s->stats.count, (long long)s->stats.zeros,
           (long long)s->stats.nans, (long long)s->stats.pos_infs, (long long)s->stats.neg_infs, s->stats.l2);
    printf("would underflow/overflow: fp16 %.2f%%/%.2f%%  bf16 %.2f%%/%.2f%%  e4m3 %.2f%%/%.2f%%  e5m2 %.2f%%/%.2f%%\n\n",
           100 * s->range.fp16_underflow, 100 * s->range.fp16_overflow, 100 * s->range.bf16_underflow, 100 * s->range.bf16_overflow,
           100 * s->range.e4m3_underflow, 100 * s->range.e4m3_overflow, 100 * s->range.e5m2_underflow, 100 * s->range.e5m2_overflow);
    text_histogram(s);
    free(s);
    return CLI_OK;
}
