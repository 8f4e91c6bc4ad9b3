/* test_memwatch.c -- the memory watcher (docs/observation.md#memory):
 * - ts_memory_get_tree counts the children and grandchildren of this
 *   process: a child that touched 48 MiB and its child that touched
 *   32 MiB add at least that to this process's own RSS and USS;
 * - the watcher, sampling every 20 ms, sees a 64 MiB buffer this process
 *   held until two whole samples were taken: its peak RSS passes the RSS
 *   before it by 60 MiB, at a time after the buffer was touched, and stays
 *   after the buffer is freed; the metrics report's MemoryRssBytes block
 *   says the peak and when; the callback sees every sample; stopping logs
 *   the peak at info;
 * - while a model records a trace (during its steps), each sample is a
 *   point of the counter track `memory RSS (MiB)` in the trace file, at
 *   this process's RSS;
 * - stop returns long before the period ends, with a period of a minute;
 * - bad periods and a watcher never started are clear errors.
 * Each part waits for the samples it checks (at most a minute), never for a
 * slice of time: the test holds on a loaded machine. */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "diag/trace.h"
#include "mlp.h"
#include "tensorscope.h"

#define MiB (1024.0 * 1024.0)

static void sleep_ms(int ms) { nanosleep(&(struct timespec){ms / 1000, (long)(ms % 1000) * 1000000L}, NULL); }

#define WAIT_S 60.0 /* the most any wait below takes: far more than a loaded machine needs */

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Writes every page of p (volatile: the stores cannot be optimised away). */
static void touch(char *p, size_t n) {
    volatile char *v = p;
    for (size_t i = 0; i < n; i += 4096) v[i] = 1;
}

/* A child that touches `mb` MiB (and, when grand_mb > 0, forks a child of
 * its own that touches grand_mb), says so on `ready` and waits for the
 * parent to close go's write end (go_w, closed in the child). */
static bool wait_samples(int64_t n, ts_memwatch_stats *s);

static pid_t spawn(int mb, int grand_mb, int ready, int go, int go_w) {
    pid_t pid = fork();
    if (pid != 0) return pid;
    close(go_w);
    if (grand_mb > 0 && spawn(grand_mb, 0, ready, go, -1) < 0) _exit(1);
    char *p = malloc((size_t)mb << 20);
    if (!p) _exit(1);
    touch(p, (size_t)mb << 20);
    if (write(ready, "r", 1) != 1) _exit(1);
    char c;
    while (read(go, &c, 1) > 0) {}
    free(p);
    while (wait(NULL) > 0) {}
    _exit(0);
}

static void test_tree(void) {
    int ready[2], go[2];
    if (pipe(ready) || pipe(go)) return;
    pid_t child = spawn(48, 32, ready[1], go[0], go[1]);
    char c;
    int got = 0;
    while (got < 2 && read(ready[0], &c, 1) == 1) got++;
    ts_memory_usage self, tree;
    int n = 0;
    CHECK_OK(ts_memory_get(&self), "ts_memory_get");
    CHECK_OK(ts_memory_get_tree(&tree, &n), "ts_memory_get_tree");
    CHECK(got == 2 && n == 3, "a child and a grandchild counted: %d processes", n);
    CHECK(tree.rss - self.rss >= (int64_t)(80 * MiB), "their RSS is added: %.1f MiB above this process's own",
          (double)(tree.rss - self.rss) / MiB);
    /* USS counts only the pages each child owns alone: the 80 MiB they
     * touched, less what this process's own USS moved between the two reads
     * (a run measured 80.0 MiB, just under an exact bound): 90% of it */
    CHECK(tree.uss - self.uss >= (int64_t)(72 * MiB), "and their USS: %.1f MiB above (they touched 80)", (double)(tree.uss - self.uss) / MiB);
    ts_memwatch_stats s;
    CHECK_OK(ts_memwatch_start(20), "the watcher starts, every 20 ms");
    CHECK(wait_samples(1, &s), "a first sample");
    CHECK(s.processes == 3 && s.latest.rss - self.rss >= (int64_t)(80 * MiB),
          "the watcher counts the children too: %d processes, %.1f MiB above this one", s.processes,
          (double)(s.latest.rss - self.rss) / MiB);
    ts_memwatch_stop();
    close(go[1]);
    waitpid(child, NULL, 0);
    close(go[0]), close(ready[0]), close(ready[1]);
    CHECK_OK(ts_memory_get_tree(&tree, &n), "ts_memory_get_tree after they exit");
    CHECK(n == 1, "then this process alone: %d", n);
}

/* Until the watcher has taken `n` samples (false after WAIT_S); *s the latest stats. */
static bool wait_samples(int64_t n, ts_memwatch_stats *s) {
    double t0 = now_s();
    while (ts_memwatch_latest(s) == TS_OK && s->samples < n && now_s() - t0 < WAIT_S) sleep_ms(1);
    return s->samples >= n;
}

static int samples_seen;
static void on_sample(void *user, const ts_memwatch_stats *s) {
    (void)user;
    if (s->samples == samples_seen + 1) samples_seen++;
}

static char info_line[1024];
static void capture(void *user, int level, const char *msg) {
    (void)user;
    if (level == TS_LOG_INFO && strstr(msg, "memory watcher: peak RSS")) snprintf(info_line, sizeof info_line, "%s", msg);
}

/* The value of the `Peak:` line of the report's `Metric: name` block, in MiB; -1 if none. */
static double report_peak_mib(const char *report, const char *name, char *when, size_t n) {
    char head[128];
    snprintf(head, sizeof head, "Metric: %s\n", name);
    const char *b = strstr(report, head), *p = b ? strstr(b, "  Peak: ") : NULL;
    const char *next = b ? strstr(b + 1, "Metric: ") : NULL;
    if (!p || (next && p > next)) return -1;
    char *end;
    double v = strtod(p + 8, &end);
    double unit = strncmp(end, "GB", 2) == 0 ? 1024 : strncmp(end, "MB", 2) == 0 ? 1 : strncmp(end, "KB", 2) == 0 ? 1.0 / 1024 : 0;
    const char *at = strstr(end, " at ");
    if (at) snprintf(when, n, "%.*s", (int)strcspn(at + 4, "\n"), at + 4);
    return v * unit;
}

static void test_peak(void) {
    ts_memwatch_stats s;
    ts_memory_usage before;
    ts_metrics_reset();
    ts_set_log_callback(capture, NULL);
    ts_memwatch_set_callback(on_sample, NULL);
    samples_seen = 0;
    CHECK_OK(ts_memory_get_tree(&before, NULL), "RSS before");
    double start0 = now_s(); /* the watcher's times count from its start, between start0 and start1 */
    CHECK_OK(ts_memwatch_start(20), "the watcher starts, every 20 ms");
    double start1 = now_s();
    CHECK(wait_samples(2, &s), "two samples before the buffer");
    double t0 = now_s();
    size_t size = (size_t)(64 * MiB);
    char *big = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); /* munmap returns it at once */
    if (big != MAP_FAILED) touch(big, size);
    CHECK_OK(ts_memwatch_latest(&s), "ts_memwatch_latest");
    int64_t held_from = s.samples;
    CHECK(wait_samples(held_from + 2, &s), "two whole samples while the buffer is held"); /* the one in flight, and one after */
    int64_t held_to = s.samples;
    if (big != MAP_FAILED) munmap(big, size);
    CHECK(wait_samples(held_to + 2, &s), "two whole samples after it is freed");
    double t2 = now_s();
    CHECK(s.running == 1 && s.period_ms == 20, "running, every 20 ms");
    CHECK(s.peak.rss - before.rss >= (int64_t)(60 * MiB), "peak RSS %.1f MiB above the start (the 64 MiB buffer)",
          (double)(s.peak.rss - before.rss) / MiB);
    /* a sample that saw the buffer read /proc after it was touched (after
     * t0) and before the samples that ended after it was freed */
    CHECK(s.peak_rss_s >= t0 - start1 && s.peak_rss_s < s.latest_s,
          "the peak came while the buffer was held: %.3f s after the start, not before %.3f (touched) and before %.3f (freed)",
          s.peak_rss_s, t0 - start1, s.latest_s);
    CHECK(s.peak.rss - s.latest.rss >= (int64_t)(50 * MiB), "the buffer freed, the latest sample is lower and the peak stays");
    CHECK(s.peak.uss >= s.latest.uss && s.peak.pss >= s.latest.pss && s.peak.uss > 0, "PSS and USS peaks kept too");
    ts_memwatch_stop();
    CHECK_OK(ts_memwatch_latest(&s), "ts_memwatch_latest after stop");
    CHECK(s.running == 0 && samples_seen == s.samples, "stopped; the callback saw each of the %lld samples in order (%d)",
          (long long)s.samples, samples_seen);
    CHECK(strstr(info_line, "memory watcher: peak RSS") && strstr(info_line, "every 20 ms"), "stop logs the peak: %s", info_line);
    char *report = ts_metrics_report(), when[64] = "";
    double peak = report ? report_peak_mib(report, "MemoryRssBytes", when, sizeof when) : -1;
    CHECK(peak >= (double)before.rss / MiB + 60, "metrics: MemoryRssBytes Peak %.1f MiB, at %s", peak, when);
    CHECK(strstr(report ? report : "", "Metric: MemoryUssBytes") != NULL, "metrics: MemoryUssBytes too");
    int ms = -1;
    double us = 0;
    bool parsed = sscanf(when, "%dms%lfus", &ms, &us) == 2;
    CHECK(parsed && ms + us / 1000 >= (t0 - start1) * 1000 && ms + us / 1000 <= (t2 - start0) * 1000,
          "metrics: the peak's time (%s) is when the buffer was held", when);
    ts_string_free(report);
    ts_memwatch_set_callback(NULL, NULL);
    ts_set_log_callback(NULL, NULL);
}

/* Samples taken while the trace records (a step runs): each is a point of its counter track. */
static atomic_int live_samples;
static void count_live(void *user, const ts_memwatch_stats *s) {
    (void)user, (void)s;
    if (ts_trace_live()) atomic_fetch_add(&live_samples, 1);
}

static void test_trace_counter(void) {
    char path[] = "/tmp/test_memwatch_trace_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    mlp net;
    ts_options *o = ts_options_new();
    ts_model *m = NULL;
    static float x[8 * 784];
    static int32_t y[8];
    ts_array in[2] = {ts_array_f32(x, 4, (int64_t[]){8, 1, 28, 28}), ts_array_i32(y, 1, (int64_t[]){8})};
    const char *names[] = {"x", "labels"};
    ts_status st = test_mlp_build(&net, 8, 1);
    if (!st) st = ts_options_set_trace(o, path, 1, 1000000);
    if (!st) st = ts_model_training(&m, net.g, net.loss, o, ts_sgd(0.01f, 0.0f, 0.0f));
    if (!st) st = ts_model_compile(m);
    ts_memwatch_set_callback(count_live, NULL);
    if (!st) st = ts_memwatch_start(5);
    double t0 = now_s();
    int steps = 0; /* until the watcher has sampled during steps 6 times (3 points checked) */
    while (!st && (atomic_load(&live_samples) < 6 || steps < 3) && now_s() - t0 < WAIT_S) st = ts_model_run(m, names, in, 2), steps++;
    ts_memwatch_stop();
    ts_memwatch_set_callback(NULL, NULL);
    ts_memory_usage self;
    ts_memory_get(&self);
    ts_model_free(m); /* writes the trace */
    CHECK_OK(st, "%d traced steps with the watcher every 5 ms", steps);
    FILE *f = fopen(path, "r");
    static char text[1 << 22];
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = '\0';
    if (f) fclose(f);
    int points = 0;
    double max_mib = 0;
    const char *key = "\"ph\":\"C\",\"name\":\"memory RSS (MiB)\"";
    for (const char *p = strstr(text, key); p; p = strstr(p + 1, key)) {
        const char *v = strstr(p, "\"value\":");
        double mib = v ? strtod(v + 8, NULL) : 0;
        points++;
        if (mib > max_mib) max_mib = mib;
    }
    /* points only while the trace records (during steps, not between them) */
    CHECK(points >= 3, "the trace has points of the counter track 'memory RSS (MiB)': %d (%d samples during steps, %.2f s)", points,
          atomic_load(&live_samples), now_s() - t0);
    CHECK(max_mib > 1 && max_mib < (double)self.rss / MiB * 2, "its values are this process's RSS in MiB: up to %.1f (RSS now %.1f)",
          max_mib, (double)self.rss / MiB);
    ts_options_free(o);
    ts_graph_free(net.g);
    unlink(path);
}

static void test_stop_is_immediate(void) {
    ts_memwatch_stats s;
    CHECK_OK(ts_memwatch_start(60000), "a period of a minute");
    CHECK(wait_samples(1, &s), "its first sample: the watcher now waits for the next");
    double t = now_s();
    ts_memwatch_stop();
    t = now_s() - t;
    CHECK(t < 30, "stop wakes it, not waiting for the period's end: %.3f s", t);
    ts_memwatch_stop(); /* twice is fine */
}

/* A /proc/PID/smaps_rollup field in bytes (-1 when unreadable): read here,
 * independently of the library. */
static double rollup(int pid, const char *key) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/smaps_rollup", pid);
    FILE *f = fopen(path, "r");
    double kb = -1;
    size_t k = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, k) == 0 && line[k] == ':') kb = (kb < 0 ? 0 : kb) + strtod(line + k + 1, NULL);
    if (f) fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

static char log_text[1 << 16];
static void capture_log(void *user, int level, const char *msg) {
    (void)user, (void)level;
    size_t n = strlen(log_text);
    snprintf(log_text + n, sizeof log_text - n, "%s\n", msg);
}

/* Each process of the tree (ts_memwatch_processes, the log at stop): a child
 * holding 64 MiB it touched, checked against its /proc files. */
static void test_processes(void) {
    int ready[2], hold[2];
    if (pipe(ready) || pipe(hold)) return;
    pid_t child = fork();
    if (child == 0) {
        close(hold[1]); /* the parent's close ends the wait */
        size_t n = 64u << 20;
        char *b = malloc(n);
        for (size_t i = 0; b && i < n; i += 4096) b[i] = 1;
        char c = 1, d;
        if (write(ready[1], &c, 1) != 1 || read(hold[0], &d, 1) < 0) _exit(1);
        _exit(b ? 0 : 1);
    }
    close(hold[0]);
    close(ready[1]);
    char c;
    CHECK(read(ready[0], &c, 1) == 1, "a child touched 64 MiB");
    double rss = rollup(child, "Rss"), pss = rollup(child, "Pss"), uss = rollup(child, "Private_Clean") + rollup(child, "Private_Dirty");
    char comm[64] = "", path[64];
    snprintf(path, sizeof path, "/proc/%d/comm", (int)child);
    FILE *f = fopen(path, "r");
    if (f && fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = '\0';
    if (f) fclose(f);
    log_text[0] = '\0';
    ts_set_log_callback(capture_log, NULL);
    ts_process_memory procs[TS_MEMWATCH_PROCESSES];
    int n = 0, at = -1;
    CHECK_OK(ts_memwatch_start(5), "the watcher every 5 ms");
    for (int waited = 0; waited < 60000 && at < 0; waited += 5) { /* its first sample lists the child (60 s at most) */
        if (ts_memwatch_processes(procs, TS_MEMWATCH_PROCESSES, &n) == TS_OK)
            for (int i = 0; i < n; i++)
                if (procs[i].pid == child) at = i;
        if (at < 0) nanosleep(&(struct timespec){0, 5000000}, NULL);
    }
    ts_memwatch_stop();
    ts_set_log_callback(NULL, NULL);
    CHECK(at > 0 && procs[0].pid == getpid(), "the sample lists this process first (pid %d), then the child (pid %d, at %d)", (int)getpid(),
          (int)child, at);
    if (at > 0) {
        const ts_memory_usage *u = &procs[at].usage;
        CHECK(strcmp(procs[at].command, comm) == 0, "the child's command is /proc's: '%s' ('%s')", procs[at].command, comm);
        CHECK(u->rss > 64 * MiB && fabs((double)u->rss - rss) < 0.05 * rss, "its RSS %.1f MiB is /proc's %.1f MiB (5%%)", (double)u->rss / MiB,
              rss / MiB);
        CHECK(u->pss > 0 && fabs((double)u->pss - pss) < 0.05 * pss && u->uss > 0 && fabs((double)u->uss - uss) < 0.05 * uss,
              "its PSS %.1f and USS %.1f MiB are /proc's %.1f and %.1f (5%%)", (double)u->pss / MiB, (double)u->uss / MiB, pss / MiB, uss / MiB);
    }
    char want[128];
    snprintf(want, sizeof want, "memory watcher: at the peak, pid %d (%s): RSS ", (int)child, comm);
    CHECK(strstr(log_text, want) && strstr(strstr(log_text, want), " MiB, PSS "), "the log at stop lists it, in MiB: %s", want);
    close(hold[1]);
    close(ready[0]);
    waitpid(child, NULL, 0);
}

int main(void) {
    ts_memwatch_stats s;
    CHECK(ts_memwatch_latest(&s) == TS_ERR_STATE && strstr(ts_last_error(), "--watch-memory"), "never started: %s",
          ts_last_error());
    CHECK(ts_memwatch_start(-5) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "1..3600000 ms"), "a bad period: %s",
          ts_last_error());
    test_tree();
    test_peak();
    test_trace_counter();
    test_stop_is_immediate();
    test_processes();
    return check_summary("test_memwatch");
}
