/* memwatch.c -- the memory watcher: a thread that samples this process's
 * memory and its descendants' (ts_memory_get_tree) every period, keeps the
 * peaks, feeds the metrics, a trace's counter track and a callback
 * (docs/observation.md#memory).
 * It allocates nothing while sampling; stop wakes it at once. RSS is read
 * every period (statm: microseconds); PSS and USS need smaps_rollup, which
 * walks every page table (about 4 ms per 100 MB resident), so they are read
 * with the first sample and then no more often than keeps that walk under
 * 1% of the time (FULL_DUTY): between walks a sample keeps the last ones. */
#include "diag/memory.h"
#include "core/memwatch_note.h"
#include "diag/metrics.h"
#include "diag/trace.h"

#include <pthread.h>
#include <time.h>

static struct {
    pthread_mutex_t mu;
    pthread_cond_t wake; /* on CLOCK_MONOTONIC: stop and a new period wake the thread */
    bool cond_ready, thread_on, stop;
    pthread_t thread;
    uint64_t start_ns;
    uint64_t next_full_ns; /* the sampler's own: when PSS and USS may be read again */
    ts_memwatch_stats stats; /* under mu */
    ts_memwatch_fn fn;
    void *fn_user;
    ts_process_memory procs[TS_MEMWATCH_PROCESSES], peak_procs[TS_MEMWATCH_PROCESSES]; /* under mu */
    int n_procs, n_peak_procs;
} W = {.mu = PTHREAD_MUTEX_INITIALIZER};

enum { FULL_DUTY = 100 }; /* at most one part in FULL_DUTY of the time walking page tables */

static void take_sample(void) {
    ts_memory_usage u;
    int processes = 0, n_procs = 0;
    static ts_process_memory procs[TS_MEMWATCH_PROCESSES]; /* the sampler thread's alone */
    uint64_t t = ts_now_ns();
    bool full = t >= W.next_full_ns;
    if (ts_memory_tree_procs(&u, &processes, full, procs, TS_MEMWATCH_PROCESSES, &n_procs) != TS_OK) return;
    uint64_t now = ts_now_ns();
    if (full) W.next_full_ns = now + FULL_DUTY * (now - t);
    ts_memwatch_stats copy;
    pthread_mutex_lock(&W.mu);
    ts_memwatch_stats *s = &W.stats;
    if (!full) u.pss = s->latest.pss, u.uss = s->latest.uss; /* the last walk's */
    for (int i = 0; !full && i < n_procs; i++) { /* each process's too */
        procs[i].usage.pss = procs[i].usage.uss = -1;
        for (int k = 0; k < W.n_procs; k++)
            if (W.procs[k].pid == procs[i].pid) procs[i].usage.pss = W.procs[k].usage.pss, procs[i].usage.uss = W.procs[k].usage.uss;
    }
    memcpy(W.procs, procs, (size_t)n_procs * sizeof *procs);
    W.n_procs = n_procs;
    s->latest = u;
    s->latest_s = (double)(now - W.start_ns) / 1e9;
    s->processes = processes;
    if (s->samples == 0 || u.rss > s->peak.rss) {
        s->peak.rss = u.rss;
        s->peak_rss_s = s->latest_s;
        memcpy(W.peak_procs, procs, (size_t)n_procs * sizeof *procs);
        W.n_peak_procs = n_procs;
    }
    if (s->samples == 0 || u.pss > s->peak.pss) s->peak.pss = u.pss;
    if (s->samples == 0 || u.uss > s->peak.uss) s->peak.uss = u.uss;
    s->samples++;
    copy = *s;
    ts_memwatch_note(&copy); /* for the layers below (core/memwatch_note.h) */
    ts_memwatch_fn fn = W.fn;
    void *user = W.fn_user;
    uint64_t start = W.start_ns;
    pthread_mutex_unlock(&W.mu);
    ts_metric_record_peak("MemoryRssBytes", (double)u.rss, start);
    if (full && u.pss >= 0) ts_metric_record_peak("MemoryPssBytes", (double)u.pss, start);
    if (full && u.uss >= 0) ts_metric_record_peak("MemoryUssBytes", (double)u.uss, start);
    if (ts_trace_live()) { /* --trace: a counter track beside the steps, and one per process */
        ts_trace_counter("memory RSS (MiB)", now, (double)u.rss / (1024.0 * 1024.0));
        for (int i = 0; i < n_procs; i++) {
            char track[96];
            snprintf(track, sizeof track, "memory RSS (MiB) pid %d (%s)", procs[i].pid, procs[i].command);
            ts_trace_counter(track, now, (double)procs[i].usage.rss / (1024.0 * 1024.0));
        }
    }
    if (fn) fn(user, &copy);
}

static void *watch(void *arg) {
    (void)arg;
    pthread_mutex_lock(&W.mu);
    while (!W.stop) {
        pthread_mutex_unlock(&W.mu);
        take_sample();
        pthread_mutex_lock(&W.mu);
        if (W.stop) break;
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        long long ns = until.tv_nsec + (long long)W.stats.period_ms * 1000000LL;
        until.tv_sec += (time_t)(ns / 1000000000LL);
        until.tv_nsec = (long)(ns % 1000000000LL);
        pthread_cond_timedwait(&W.wake, &W.mu, &until); /* a new period or stop wakes it early */
    }
    pthread_mutex_unlock(&W.mu);
    return NULL;
}

ts_status ts_memwatch_start(int period_ms) {
    if (period_ms < 0 || period_ms > 3600000)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "memory watcher: the period must be 1..3600000 ms (0: 100 ms), got %d", period_ms);
    ts_memory_usage probe;
    ts_status st = ts_memory_get(&probe); /* say now when /proc cannot be read */
    if (st) return ts_error_wrap(st, "memory watcher");
    pthread_mutex_lock(&W.mu);
    if (!W.cond_ready) {
        pthread_condattr_t a;
        pthread_condattr_init(&a);
        pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
        int rc = pthread_cond_init(&W.wake, &a);
        pthread_condattr_destroy(&a);
        if (rc) {
            pthread_mutex_unlock(&W.mu);
            return ts_error(TS_ERR_INTERNAL, "memory watcher: cannot make its condition variable");
        }
        W.cond_ready = true;
    }
    W.stats.period_ms = period_ms ? period_ms : 100;
    if (W.thread_on) { /* running: the new period applies from now */
        ts_memwatch_note(&W.stats);
        pthread_cond_signal(&W.wake);
        pthread_mutex_unlock(&W.mu);
        return TS_OK;
    }
    W.stats = (ts_memwatch_stats){.period_ms = period_ms ? period_ms : 100, .running = 1};
    W.n_procs = W.n_peak_procs = 0;
    W.stop = false;
    W.start_ns = ts_now_ns();
    W.next_full_ns = 0;
    if (pthread_create(&W.thread, NULL, watch, NULL) != 0) {
        W.stats.running = 0;
        pthread_mutex_unlock(&W.mu);
        return ts_error(TS_ERR_INTERNAL, "memory watcher: cannot start its thread (too many threads?)");
    }
    W.thread_on = true;
    ts_memwatch_note(&W.stats);
    pthread_mutex_unlock(&W.mu);
    return TS_OK;
}

void ts_memwatch_stop(void) {
    pthread_mutex_lock(&W.mu);
    if (!W.thread_on) {
        pthread_mutex_unlock(&W.mu);
        return;
    }
    W.stop = true;
    pthread_cond_signal(&W.wake);
    pthread_t t = W.thread;
    W.thread_on = false;
    pthread_mutex_unlock(&W.mu);
    pthread_join(t, NULL);
    pthread_mutex_lock(&W.mu);
    W.stats.running = 0;
    ts_memwatch_note(&W.stats);
    ts_memwatch_stats s = W.stats;
    ts_process_memory peak[TS_MEMWATCH_PROCESSES];
    int n_peak = W.n_peak_procs;
    memcpy(peak, W.peak_procs, (size_t)n_peak * sizeof *peak);
    pthread_mutex_unlock(&W.mu);
    char rss[32], pss[32], uss[32], at[64];
    ts_logf(TS_LOG_INFO,
            "memory watcher: peak RSS %s at %s after its start (peak PSS %s, USS %s); %lld sample%s every %d ms of this "
            "process and its descendants (%d in the last sample; under mpirun, per rank)",
            ts_format_bytes((double)s.peak.rss, rss, sizeof rss), ts_format_duration_ns(s.peak_rss_s * 1e9, at, sizeof at),
            s.peak.pss >= 0 ? ts_format_bytes((double)s.peak.pss, pss, sizeof pss) : "unknown",
            s.peak.uss >= 0 ? ts_format_bytes((double)s.peak.uss, uss, sizeof uss) : "unknown", (long long)s.samples,
            s.samples == 1 ? "" : "s", s.period_ms,
            s.processes);
    for (int i = 0; i < n_peak; i++) { /* each process at the RSS peak, in MiB */
        const ts_memory_usage *u = &peak[i].usage;
        const double MiB = 1024.0 * 1024.0;
        char p_pss[32] = "unknown", p_uss[32] = "unknown";
        if (u->pss >= 0) snprintf(p_pss, sizeof p_pss, "%.2f MiB", (double)u->pss / MiB);
        if (u->uss >= 0) snprintf(p_uss, sizeof p_uss, "%.2f MiB", (double)u->uss / MiB);
        ts_logf(TS_LOG_INFO, "memory watcher: at the peak, pid %d (%s): RSS %.2f MiB, PSS %s, USS %s", peak[i].pid, peak[i].command,
                (double)u->rss / MiB, p_pss, p_uss);
    }
}

ts_status ts_memwatch_processes(ts_process_memory *out, int cap, int *n) {
    if (!out || !n || cap < 0) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_memwatch_processes: NULL argument or a negative cap");
    pthread_mutex_lock(&W.mu);
    int k = W.n_procs < cap ? W.n_procs : cap;
    memcpy(out, W.procs, (size_t)k * sizeof *out);
    bool never = W.stats.period_ms == 0;
    pthread_mutex_unlock(&W.mu);
    *n = k;
    if (never) return ts_error(TS_ERR_STATE, "memory watcher: never started (ts_memwatch_start, --watch-memory)");
    return TS_OK;
}

ts_status ts_memwatch_latest(ts_memwatch_stats *out) {
    if (!out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_memwatch_latest: out is NULL");
    pthread_mutex_lock(&W.mu);
    *out = W.stats;
    pthread_mutex_unlock(&W.mu);
    if (out->period_ms == 0) return ts_error(TS_ERR_STATE, "memory watcher: never started (ts_memwatch_start, --watch-memory)");
    return TS_OK;
}

void ts_memwatch_set_callback(ts_memwatch_fn fn, void *user) {
    pthread_mutex_lock(&W.mu);
    W.fn = fn;
    W.fn_user = fn ? user : NULL;
    pthread_mutex_unlock(&W.mu);
}
