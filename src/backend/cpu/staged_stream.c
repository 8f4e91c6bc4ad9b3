/* staged_stream.c -- "cpu-staged" streams: its stream_create makes a real
 * one (an object of its own, as a GPU's stream is), and every entry that
 * takes a stream checks that it was given one of those, alive: a caller
 * that passes anything else (NULL, the host's thread pool, a stream
 * already destroyed) would put its work on another queue than the
 * model's on a GPU, out of order with the rest of the run. The call is
 * still done (on the calling thread, as before), and counted with the
 * entry that got it, for the tests (ts_cpu_staged_stream_misuse). */
#include "backend/backend.h"
#include "backend/cpu/cpu.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

typedef struct staged_stream {
    struct staged_stream *next;
} staged_stream;

static ts_backend inner; /* the staged table before the checks joined it (set once) */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static staged_stream *live; /* the streams made and not yet destroyed */
static int misuse;      /* under lock: the calls given a wrong stream since the last read */
static char seen[512];  /* under lock: each kind of them once, "fill given NULL; ..." */

/* Whether s is a live stream of this backend; if not, counted. Compared
 * by address only: a foreign pointer is never read. */
static void check(void *s, const char *entry) {
    pthread_mutex_lock(&lock);
    const staged_stream *x = live;
    while (x && (const void *)x != s) x = x->next;
    if (!x) {
        misuse++;
        char one[96];
        snprintf(one, sizeof one, "%s given %s", entry,
                 !s ? "NULL" : s == TS_STREAM_THIS_THREAD ? "TS_STREAM_THIS_THREAD" : "a stream it did not make");
        size_t used = strlen(seen);
        if (!strstr(seen, one) && used + strlen(one) + 3 < sizeof seen) snprintf(seen + used, sizeof seen - used, "%s%s", used ? "; " : "", one);
    }
    pthread_mutex_unlock(&lock);
}

int ts_cpu_staged_stream_misuse(char *buf, size_t n) {
    pthread_mutex_lock(&lock);
    int k = misuse;
    if (buf && n) snprintf(buf, n, "%s", seen);
    misuse = 0, seen[0] = 0;
    pthread_mutex_unlock(&lock);
    return k;
}

static ts_status st_create(void **out) {
    staged_stream *s = ts_calloc(1, sizeof *s);
    *out = s;
    if (!s) return ts_error(TS_ERR_OUT_OF_MEMORY, "cpu-staged: no memory for a stream");
    pthread_mutex_lock(&lock);
    s->next = live;
    live = s;
    pthread_mutex_unlock(&lock);
    return TS_OK;
}

static void st_destroy(void *p) {
    check(p, "stream_destroy");
    pthread_mutex_lock(&lock);
    for (staged_stream **at = &live; *at; at = &(*at)->next)
        if ((void *)*at == p) {
            *at = (*at)->next;
            ts_free(p);
            break;
        }
    pthread_mutex_unlock(&lock);
}

/* Each entry: the stream checked, then the inner one's work on the
 * calling thread (the staged device has no queue of its own). */
static void st_copy_to_device(void *s, void *dst, const void *src, size_t bytes) {
    check(s, "copy_to_device");
    inner.copy_to_device(TS_STREAM_THIS_THREAD, dst, src, bytes);
}
static void st_copy_to_host(void *s, void *dst, const void *src, size_t bytes) {
    check(s, "copy_to_host");
    inner.copy_to_host(TS_STREAM_THIS_THREAD, dst, src, bytes);
}
static void st_copy_on_device(void *s, void *dst, const void *src, size_t bytes) {
    check(s, "copy_on_device");
    inner.copy_on_device(TS_STREAM_THIS_THREAD, dst, src, bytes);
}
static ts_status st_synchronize(void *s) {
    check(s, "synchronize");
    return inner.synchronize(TS_STREAM_THIS_THREAD);
}
static void st_fill(void *s, float *dst, float value, int64_t n) {
    check(s, "fill");
    inner.fill(TS_STREAM_THIS_THREAD, dst, value, n);
}
static void st_zero(void *s, float *dst, int64_t n) {
    check(s, "zero");
    inner.zero(TS_STREAM_THIS_THREAD, dst, n);
}
static void st_accumulate(void *s, float *dst, const float *src, int64_t n) {
    check(s, "accumulate");
    inner.accumulate(TS_STREAM_THIS_THREAD, dst, src, n);
}
static void st_scale(void *s, float *dst, const float *x, float f, int64_t n) {
    check(s, "scale");
    inner.scale(TS_STREAM_THIS_THREAD, dst, x, f, n);
}
static void st_round_half(void *s, ts_dtype t, float *x, int64_t n, ts_half_loss *lost) {
    check(s, "round_half");
    inner.round_half(TS_STREAM_THIS_THREAD, t, x, n, lost);
}
static void st_unpack_half(void *s, ts_dtype t, float *dst, const void *src, int64_t n) {
    check(s, "unpack_half");
    inner.unpack_half(TS_STREAM_THIS_THREAD, t, dst, src, n);
}
static void st_opt_update(void *s, const ts_optimizer *o, const struct ts_opt_consts *c, struct ts_opt_state *st, float *param,
                          const float *grad, int64_t begin, int64_t end) {
    check(s, "opt_update");
    inner.opt_update(TS_STREAM_THIS_THREAD, o, c, st, param, grad, begin, end);
}
static void st_stats_reduce_many(void *s, const ts_stats_job *jobs, int n) {
    check(s, "stats_reduce_many");
    inner.stats_reduce_many(TS_STREAM_THIS_THREAD, jobs, n);
}
static bool st_has_nonfinite(void *s, const float *x, int64_t n) {
    check(s, "has_nonfinite");
    return inner.has_nonfinite(TS_STREAM_THIS_THREAD, x, n);
}
static void st_copy_out_then(void *s, const ts_copy_out *c, int n, void (*fn)(void *), void *arg) {
    check(s, "copy_out_then");
    inner.copy_out_then(TS_STREAM_THIS_THREAD, c, n, fn, arg);
}
static ts_status st_capture_begin(void *s, int updates, void **rec) {
    check(s, "capture_begin");
    return inner.capture_begin(TS_STREAM_THIS_THREAD, updates, rec);
}
static ts_status st_capture_end(void *s, void *rec) {
    check(s, "capture_end");
    return inner.capture_end(TS_STREAM_THIS_THREAD, rec);
}
static void st_walk_begin(void *s, void *rec) {
    check(s, "walk_begin");
    inner.walk_begin(TS_STREAM_THIS_THREAD, rec);
}
static ts_status st_replay(void *s, void *rec, bool launch) {
    check(s, "replay");
    return inner.replay(TS_STREAM_THIS_THREAD, rec, launch);
}
static void st_event_record(void *s, ts_event *e) {
    check(s, "event_record");
    inner.event_record(TS_STREAM_THIS_THREAD, e);
}

/* A kernel's stream is its context's; the CPU's kernels split their work
 * over kctx.pool, as before. */
static void st_forward(const ts_kctx *k) {
    check(k->stream, "a kernel's forward");
    inner.kernels[k->node->op].forward(k);
}
static void st_backward(const ts_kctx *k) {
    check(k->stream, "a kernel's backward");
    inner.kernels[k->node->op].backward(k);
}

static ts_kernel_row rows[TS_OP_COUNT];

void ts_cpu_staged_streams(ts_backend *be) {
    inner = *be;
    for (int op = 0; op < TS_OP_COUNT; op++) {
        rows[op] = inner.kernels[op];
        if (rows[op].forward) rows[op].forward = st_forward;
        if (rows[op].backward) rows[op].backward = st_backward;
    }
    be->kernels = rows;
    be->stream_create = st_create;
    be->stream_destroy = st_destroy;
    be->copy_to_device = st_copy_to_device;
    be->copy_to_host = st_copy_to_host;
    be->copy_on_device = st_copy_on_device;
    be->synchronize = st_synchronize;
    be->fill = st_fill;
    be->zero = st_zero;
    be->accumulate = st_accumulate;
    be->scale = st_scale;
    be->round_half = st_round_half;
    be->unpack_half = st_unpack_half;
    be->opt_update = st_opt_update;
    be->stats_reduce_many = st_stats_reduce_many;
    be->has_nonfinite = st_has_nonfinite;
    be->copy_out_then = st_copy_out_then;
    be->capture_begin = st_capture_begin;
    be->capture_end = st_capture_end;
    be->walk_begin = st_walk_begin;
    be->replay = st_replay;
    be->event_record = st_event_record;
}
