/* test_metrics.c -- the metrics registry: report layout parsed back,
 * percentiles by sorted index, the duration formatter, two threads. */
#include "diag/metrics.h"
#include "report.h"
#include "tensorscope.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int failures;

static void check(int ok, const char *what) {
    printf("%s: %s\n", ok ? "ok" : "FAIL", what);
    if (!ok)
        failures++;
}

static void check_duration(double ns, const char *want) {
    char buf[64], what[160];
    ts_format_duration_ns(ns, buf, sizeof buf);
    snprintf(what, sizeof what, "duration %.4f ns -> %s (got %s)", ns, want, buf);
    check(strcmp(buf, want) == 0, what);
}

/* Checks that blocks come as all Metric then all Counter, each by name. */
static int blocks_sorted(const char *report, int *nmetric, int *ncounter) {
    char prev[128] = "", prev_kind[16] = "Metric";
    *nmetric = *ncounter = 0;
    for (const char *p = report; *p;) {
        const char *eol = strchr(p, '\n');
        if (!eol)
            return 0;
        if (strncmp(p, "  ", 2) != 0) {
            char kind[16], name[128];
            if (sscanf(p, "%15[^:]: %127[^\n]", kind, name) != 2)
                return 0;
            int is_metric = strcmp(kind, "Metric") == 0;
            if (!is_metric && strcmp(kind, "Counter") != 0)
                return 0;
            if (is_metric && strcmp(prev_kind, "Counter") == 0)
                return 0; /* a Metric after a Counter */
            if (strcmp(kind, prev_kind) == 0 && *prev && strcmp(prev, name) >= 0)
                return 0;
            if (strcmp(kind, prev_kind) != 0)
                *prev = 0;
            snprintf(prev, sizeof prev, "%s", name);
            snprintf(prev_kind, sizeof prev_kind, "%s", kind);
            (is_metric ? (*nmetric)++ : (*ncounter)++);
        }
        p = eol + 1;
    }
    return 1;
}

static void *hammer(void *arg) {
    (void)arg;
    for (int i = 0; i < 50000; i++) {
        ts_counter_add("ThreadHits", 1);
        ts_metric_record("ThreadTime", 1000.0);
    }
    return NULL;
}

int main(void) {
    /* ---- the duration formatter: expectations worked out by hand */
    check_duration(369401746001.0, "06m09s401ms746.001us");
    check_duration(124211470230.0, "02m04s211ms470.230us");
    check_duration(8389404.0, "008ms389.404us");
    check_duration(1500000.0, "001ms500.000us");
    check_duration(500.0, "000.500us");
    check_duration(0.0, "000.000us");
    check_duration(999.9999, "000.999us");              /* floored, not 001.000us */
    check_duration(59999999.9, "059ms999.999us");       /* 59999.9999 us */
    check_duration(59999999999.9, "59s999ms999.999us"); /* not 60s000ms... */
    check_duration(3599999999999.0, "59m59s999ms999.999us");
    check_duration(86400e9 + 1.0, "01d00h00m00s000ms000.001us");
    check_duration(-1500000.0, "-001ms500.000us");
    /* ... and read back from the report's text (tests/support/report.c) */
    check(report_ns("06m09s401ms746.001us") == 369401746001.0 && report_ns("01d00h00m00s000ms000.001us") == 86400e9 + 1.0 &&
              report_ns("000.500us") == 500.0 && report_ns("5 bogus") < 0 && report_ns("") < 0,
          "durations read back in ns");
    char small[8];
    ts_format_duration_ns(369401746001.0, small, sizeof small);
    check(strlen(small) == 7 && strncmp(small, "06m09s4", 7) == 0, "a short buffer truncates safely");

    /* ---- percentile rule: sorted[p * n / 100] */
    check(ts_metric_percentile_index(50, 200) == 100 && ts_metric_percentile_index(99, 10) == 9 &&
              ts_metric_percentile_index(1, 1) == 0 && ts_metric_percentile_index(1, 0) == 0,
          "percentile index rule");

    ts_metrics_reset();
    /* 1..200 in a scrambled order (7 is coprime with 200). */
    for (int i = 0; i < 200; i++)
        ts_metric_record_value("Zeta", (double)((i * 7) % 200 + 1));
    for (int i = 1; i <= 1500; i++) /* overflows the 1024-sample ring */
        ts_metric_record("Alpha", (double)i);
    ts_metric_record_value("TransferToHostBytes", 12.34 * 1024 * 1024);
    struct timespec m0, m1;
    clock_gettime(CLOCK_MONOTONIC, &m0);
    for (int i = 0; i < 10; i++) {
        ts_metric_record("Mid", 2e6);
        if (i == 9) clock_gettime(CLOCK_MONOTONIC, &m1);
        struct timespec ms10 = {0, 10000000};
        nanosleep(&ms10, NULL);
    }
    ts_counter_add("Runs", 3);
    ts_counter_add("AnchorsCopied", 7);
    ts_counter_add("Zero", 5);
    ts_counter_add("Zero", -5);
    ts_counter_add_cause("Recompilations", "AnchorsChanged", 1);
    ts_counter_add_cause("Recompilations", "ShapeChanged", 2);

    char *r = ts_metrics_report();
    check(r != NULL, "report built");
    if (!r)
        return 1;
    printf("--- report ---\n%s---\n", r);
    int nm, nc;
    check(blocks_sorted(r, &nm, &nc), "Metric blocks then Counter blocks, each sorted by name");
    check(nm == 4, "four metrics");
    check(nc == 5, "five non-zero counters");
    check(strstr(r, "Counter: Zero\n") == NULL, "zero counter skipped");

    char v[512];
    check(report_field(r, "Metric", "Zeta", "TotalSamples", v, sizeof v) && strcmp(v, "200") == 0,
          "Zeta TotalSamples 200");
    check(report_field(r, "Metric", "Zeta", "Accumulator", v, sizeof v) && strcmp(v, "20100.00") == 0,
          "value Accumulator is the plain sum (20100.00)");
    /* n = 200: index p*2, so the value is 2p + 1. */
    check(report_field(r, "Metric", "Zeta", "Percentiles", v, sizeof v) &&
              strcmp(v, "1%=3.00; 5%=11.00; 10%=21.00; 20%=41.00; 50%=101.00; 80%=161.00; "
                        "90%=181.00; 95%=191.00; 99%=199.00") == 0,
          "percentiles by sorted index on 1..200");
    check(report_field(r, "Metric", "Alpha", "TotalSamples", v, sizeof v) && strcmp(v, "1500") == 0,
          "Alpha TotalSamples counts past the ring");
    /* sum 1..1500 = 1125750 ns */
    check(report_field(r, "Metric", "Alpha", "Accumulator", v, sizeof v) &&
              strcmp(v, "001ms125.750us") == 0, "time Accumulator formatted");
    /* ring keeps 477..1500 (1024 samples): 50% is sorted[512] = 989 ns,
     * 1% is sorted[10] = 487 ns */
    check(report_field(r, "Metric", "Alpha", "Percentiles", v, sizeof v) &&
              strncmp(v, "1%=000.487us; ", 14) == 0 && strstr(v, "; 50%=000.989us; "),
          "percentiles over the most recent 1024 samples");
    check(report_field(r, "Metric", "TransferToHostBytes", "Accumulator", v, sizeof v) &&
              strcmp(v, "12.34MB") == 0, "byte metric humanized (12.34MB)");
    double rate = 0, mid_span = (double)(m1.tv_sec - m0.tv_sec) + (double)(m1.tv_nsec - m0.tv_nsec) * 1e-9;
    check(report_field(r, "Metric", "Mid", "Rate", v, sizeof v) && sscanf(v, "%lf / second", &rate) == 1 &&
              rate >= 10 / mid_span * (1 - 1e-5) && rate <= 10 / 0.09 * (1 + 1e-5), /* %g prints 6 digits: rounded within 5e-6 */
          "Rate = samples / ring time span (10 per >= 90 ms, and per at most the time the test took)");
    check(report_field(r, "Metric", "Mid", "ValueRate", v, sizeof v) && strstr(v, " / second"),
          "ValueRate printed as a time per second");
    check(report_field(r, "Counter", "Recompilations", "Value", v, sizeof v) && strcmp(v, "3") == 0 &&
              report_field(r, "Counter", "Recompilations.AnchorsChanged", "Value", v, sizeof v) &&
              strcmp(v, "1") == 0, "counter with causes");
    check(ts_counter_get("Runs") == 3 && ts_counter_get("NoSuchCounter") == 0, "ts_counter_get");
    ts_string_free(r);

    ts_metrics_reset();
    r = ts_metrics_report();
    check(r && *r == 0, "report empty after reset");
    ts_string_free(r);

    pthread_t t1, t2;
    pthread_create(&t1, NULL, hammer, NULL);
    pthread_create(&t2, NULL, hammer, NULL);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    check(ts_counter_get("ThreadHits") == 100000, "two threads: counter exact");
    r = ts_metrics_report();
    check(r && report_field(r, "Metric", "ThreadTime", "TotalSamples", v, sizeof v) &&
              strcmp(v, "100000") == 0, "two threads: TotalSamples exact");
    check(r && report_field(r, "Metric", "ThreadTime", "Accumulator", v, sizeof v) &&
              strcmp(v, "100ms000.000us") == 0, "two threads: Accumulator exact");
    ts_string_free(r);

    printf("%s\n", failures ? "test_metrics: FAILED" : "test_metrics: all passed");
    return failures != 0;
}
