/* trace.c -- the timeline recorder (trace.h, docs/trace.md); the file it
 * becomes is diag/trace.c's.
 *
 * Recording: a thread bumps `inflight`, checks that the trace is still on,
 * claims a slot of the event array with an atomic add, fills it and marks
 * it before it leaves. Finishing turns the trace off, waits until no thread
 * is inside a recording, hands every claimed event to the writer and frees
 * the array: no event is written half-filled and none is written into
 * freed memory. The array is allocated, not cleared: its pages are touched
 * as events fill them, so a trace sized for a million events costs what it
 * records. */
#include "core/trace.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

atomic_bool ts_trace_on_;

#define LABEL_MAX TS_TRACE_LABEL_MAX
#define MAX_THREADS TS_TRACE_TRACKS
#define THREAD_NAME_MAX TS_TRACE_TRACK_NAME_MAX

typedef ts_trace_event event;

static struct {
    pthread_mutex_t mu; /* start and finish */
    const void *owner;
    char *path;
    event *ev;
    int64_t cap;
    atomic_llong n; /* slots claimed (may pass cap: the rest are dropped) */
    atomic_int inflight;
    atomic_bool open; /* events may be recorded (the array exists) */
    atomic_ullong gen; /* which trace a thread's track number belongs to */
    atomic_int n_threads;
    uint64_t t_base;
    int rank;
    char thread_name[MAX_THREADS][THREAD_NAME_MAX];
    atomic_int thread_named[MAX_THREADS];
    _Atomic(const char *) op_now;
} R = {.mu = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local struct {
    unsigned long long gen;
    int tid;
    const char *role;
    int index;
    char detail[48];
} me;

void ts_trace_name_thread(const char *role, int index, const char *detail) {
    me.role = role;
    me.index = index;
    snprintf(me.detail, sizeof me.detail, "%s", detail ? detail : "");
    me.gen = 0; /* named anew in the next trace */
}

/* The calling thread's track in the current trace (registered on its first event). */
static int my_tid(void) {
    unsigned long long g = atomic_load_explicit(&R.gen, memory_order_relaxed);
    if (me.gen == g) return me.tid;
    int t = atomic_fetch_add(&R.n_threads, 1);
    if (t >= MAX_THREADS) t = MAX_THREADS - 1; /* the rest share the last track */
    else {
        const char *role = me.role ? me.role : "main"; /* a thread that never named itself: the one running the steps */
        char *n = R.thread_name[t];
        if (!me.role) snprintf(n, THREAD_NAME_MAX, "%s", role);
        else if (me.index >= 0 && me.detail[0]) snprintf(n, THREAD_NAME_MAX, "%s %d (%s)", role, me.index, me.detail);
        else if (me.index >= 0) snprintf(n, THREAD_NAME_MAX, "%s %d", role, me.index);
        else if (me.detail[0]) snprintf(n, THREAD_NAME_MAX, "%s (%s)", role, me.detail);
        else snprintf(n, THREAD_NAME_MAX, "%s", role);
        atomic_store(&R.thread_named[t], 1);
    }
    me.gen = g;
    me.tid = t;
    return t;
}

/* A track of its own named `name` for the calling thread in the current
 * trace (a device's kernels): registered on its first event, remembered
 * per thread for a few names. */
#define OWN_TRACKS 4
static _Thread_local struct {
    unsigned long long gen;
    int tid;
    char name[THREAD_NAME_MAX];
} own[OWN_TRACKS];

static int own_tid(const char *name) {
    unsigned long long g = atomic_load_explicit(&R.gen, memory_order_relaxed);
    int k = 0;
    for (int i = 0; i < OWN_TRACKS; i++) {
        if (own[i].gen == g && strncmp(own[i].name, name, THREAD_NAME_MAX - 1) == 0) return own[i].tid;
        if (own[i].gen != g) k = i; /* a slot of an earlier trace, free */
    }
    int t = atomic_fetch_add(&R.n_threads, 1);
    if (t >= MAX_THREADS) t = MAX_THREADS - 1; /* the rest share the last track */
    else {
        snprintf(R.thread_name[t], THREAD_NAME_MAX, "%s", name);
        atomic_store(&R.thread_named[t], 1);
    }
    own[k].gen = g;
    own[k].tid = t;
    snprintf(own[k].name, sizeof own[k].name, "%s", name);
    return t;
}

/* A slot for an event on track `track` (NULL: the calling thread's), or
 * NULL: the trace is closed or full. */
static event *claim(const char *track) {
    atomic_fetch_add(&R.inflight, 1);
    if (!atomic_load(&R.open)) {
        atomic_fetch_sub(&R.inflight, 1);
        return NULL;
    }
    int64_t i = atomic_fetch_add_explicit(&R.n, 1, memory_order_relaxed);
    if (i >= R.cap) {
        atomic_fetch_sub(&R.inflight, 1);
        return NULL;
    }
    event *e = &R.ev[i];
    e->tid = track ? own_tid(track) : my_tid();
    e->pass = 0;
    return e;
}

/* The event is whole: once inflight drops to 0, finishing may write it. */
static void publish(void) { atomic_fetch_sub(&R.inflight, 1); }

static void fill_slice(event *e, ts_trace_cat cat, const char *op, const char *label, const ts_shape *shape, double flops, int64_t number,
                       uint64_t t0_ns, uint64_t t1_ns) {
    e->cat = (uint8_t)cat;
    e->counter = false;
    e->t0 = t0_ns;
    e->dur = t1_ns > t0_ns ? t1_ns - t0_ns : 0;
    e->op = op;
    e->value = flops;
    e->number = number;
    e->ndim = shape ? shape->ndim : -1;
    if (shape) memcpy(e->d, shape->d, (size_t)shape->ndim * sizeof *e->d);
    size_t n = label ? strnlen(label, LABEL_MAX - 1) : 0;
    if (n == LABEL_MAX - 1)
        while (n > 0 && ((unsigned char)label[n] & 0xC0) == 0x80) n--; /* cut before a character, not inside one */
    if (n) memcpy(e->label, label, n);
    e->label[n] = 0;
}

void ts_trace_slice(ts_trace_cat cat, const char *op, const char *label, const ts_shape *shape, double flops, int64_t number,
                    uint64_t t0_ns, uint64_t t1_ns) {
    event *e = claim(NULL);
    if (!e) return;
    fill_slice(e, cat, op, label, shape, flops, number, t0_ns, t1_ns);
    publish();
}

void ts_trace_kernel(const char *track, ts_trace_pass pass, const char *op, const char *label, const ts_shape *shape, double flops,
                     int64_t number, uint64_t t0_ns, uint64_t t1_ns) {
    event *e = claim(track);
    if (!e) return;
    fill_slice(e, TS_TRACE_KERNEL, op, label, shape, flops, number, t0_ns, t1_ns);
    e->pass = (uint8_t)pass;
    publish();
}

void ts_trace_counter(const char *track, uint64_t t_ns, double value) {
    event *e = claim(NULL);
    if (!e) return;
    e->counter = true;
    e->t0 = t_ns;
    e->dur = 0;
    e->op = NULL;
    e->value = value;
    e->ndim = -1;
    snprintf(e->label, sizeof e->label, "%s", track); /* copied: a per-process track's name is the caller's buffer */
    publish();
}

void ts_trace_set_op(const char *label) { atomic_store_explicit(&R.op_now, label, memory_order_relaxed); }
const char *ts_trace_op(void) { return atomic_load_explicit(&R.op_now, memory_order_relaxed); }

bool ts_trace_owned_by(const void *owner) {
    pthread_mutex_lock(&R.mu);
    bool mine = owner && R.owner == owner;
    pthread_mutex_unlock(&R.mu);
    return mine;
}

/* rank r >= 1 of a job: <stem>.rank<r>.json beside the path given */
static char *rank_path(const char *path, int rank) {
    if (rank < 1) return ts_strdup(path);
    size_t n = strlen(path), stem = n >= 5 && strcmp(path + n - 5, ".json") == 0 ? n - 5 : n;
    size_t cap = n + 32;
    char *p = ts_malloc(cap);
    if (p) snprintf(p, cap, "%.*s.rank%d.json", (int)stem, path, rank);
    return p;
}

ts_status ts_trace_start(const void *owner, const char *path, int64_t capacity, int rank) {
    if (!owner || !path || !*path) return ts_error(TS_ERR_INVALID_ARGUMENT, "trace: no file to write");
    if (capacity < 1) capacity = 1;
    pthread_mutex_lock(&R.mu);
    if (R.owner) {
        ts_status st = R.owner == owner ? TS_OK
                                        : ts_error(TS_ERR_STATE, "trace %s: another model of this process is writing a trace (%s); trace one model at a time",
                                                   path, R.path);
        pthread_mutex_unlock(&R.mu);
        return st;
    }
    char *p = rank_path(path, rank);
    event *ev = (size_t)capacity > SIZE_MAX / sizeof *ev ? NULL : ts_malloc((size_t)capacity * sizeof *ev); /* not cleared: see above */
    if (!p || !ev) {
        ts_free(p);
        ts_free(ev);
        pthread_mutex_unlock(&R.mu);
        return ts_error(TS_ERR_OUT_OF_MEMORY, "trace %s: no memory for %lld events (%.1f MB); trace fewer steps (--trace-steps A:B)", path,
                        (long long)capacity, (double)capacity * (double)sizeof *ev / 1e6);
    }
    R.owner = owner;
    R.path = p;
    R.ev = ev;
    R.cap = capacity;
    R.rank = rank;
    atomic_store(&R.n, 0);
    atomic_store(&R.n_threads, 0);
    for (int t = 0; t < MAX_THREADS; t++) atomic_store(&R.thread_named[t], 0);
    atomic_fetch_add(&R.gen, 1);
    R.t_base = ts_now_ns();
    atomic_store(&R.open, true);
    pthread_mutex_unlock(&R.mu);
    return TS_OK;
}

static void set_on(const void *owner, bool on) {
    pthread_mutex_lock(&R.mu);
    if (owner && R.owner == owner) atomic_store(&ts_trace_on_, on);
    pthread_mutex_unlock(&R.mu);
}

void ts_trace_resume(const void *owner) { set_on(owner, true); }
void ts_trace_pause(const void *owner) { set_on(owner, false); }

ts_status ts_trace_end(const void *owner, ts_status (*write)(const ts_trace_record *r)) {
    pthread_mutex_lock(&R.mu);
    if (!owner || R.owner != owner) {
        pthread_mutex_unlock(&R.mu);
        return TS_OK;
    }
    atomic_store(&ts_trace_on_, false);
    atomic_store(&R.open, false);
    while (atomic_load(&R.inflight) > 0) sched_yield(); /* a thread inside a recording finishes it */
    const char *names[MAX_THREADS];
    int threads = atomic_load(&R.n_threads);
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    for (int t = 0; t < threads; t++) names[t] = atomic_load(&R.thread_named[t]) ? R.thread_name[t] : NULL;
    int64_t n = atomic_load(&R.n), kept = n < R.cap ? n : R.cap; /* each claimed slot below cap was filled */
    ts_status st = write(&(ts_trace_record){.path = R.path, .rank = R.rank, .t_base = R.t_base, .ev = R.ev, .kept = kept,
                                            .dropped = n - kept, .tracks = threads, .track_name = names});
    ts_free(R.ev);
    ts_free(R.path);
    R.ev = NULL;
    R.path = NULL;
    R.owner = NULL;
    atomic_store(&R.n, 0);
    pthread_mutex_unlock(&R.mu);
    return st;
}
