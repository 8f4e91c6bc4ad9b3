/* outfeed.c -- bounded queues of tensor records from the executor to the
 * host (docs/observation.md#outfeed-queues): filters, ALL/LAST modes, backpressure or counted
 * drops, dequeue with timeout or a sink on a consumer thread.
 *
 * One mutex guards the queue state; array data is copied outside it, into a
 * slot the producer owns while filling, so a large record does not stall the
 * consumer. */
#include "observe/outfeed.h"
#include "core/trace.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

typedef struct outfeed_slot {
    int64_t run, sample;
    int replica, stage;
    char key[TS_OUTFEED_KEY_MAX];
    ts_array array; /* array.data points at buf */
    unsigned char *buf;
    size_t cap;
} outfeed_slot;

struct ts_outfeed {
    char *name;
    ts_outfeed_mode mode;
    int depth;
    bool drop_when_full;
    bool all_keys; /* config.filters == NULL */
    char **filters;
    int n_filters;

    pthread_mutex_t mu;
    pthread_cond_t can_take; /* a record arrived, or closed */
    pthread_cond_t can_put;  /* room for one more record, or closed */
    pthread_cond_t drained;  /* the sink returned with nothing waiting, or closed */

    outfeed_slot *slots; /* depth + 1 */
    int n_slots;
    int *free_idx; /* stack of free slot indices */
    int n_free;
    int *ring; /* waiting records, oldest first; capacity depth */
    int head, count;
    int filling; /* slots producers are copying into */
    int held;    /* slot the consumer holds, or -1 */
    int dequeuers;

    bool reserved_once;
    size_t reserved;
    bool closed;
    ts_outfeed_counts counts;
    bool warned;
    int64_t warned_run;

    bool has_sink;
    bool sink_busy; /* the sink function is running on a record */
    bool sink_done; /* the sink thread has delivered everything of a closed queue */
    pthread_t sink_thread;
    ts_outfeed_sink sink_fn;
    void *sink_user;
};

/* ------------------------------------------------------------- config */

static ts_status check_config(const ts_outfeed_config *c) {
    if (!c) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_outfeed_new: config is NULL");
    if (!c->name || !c->name[0])
        return ts_error(TS_ERR_INVALID_ARGUMENT,
                        "ts_outfeed_new: the queue needs a name (config.name is %s)",
                        c->name ? "empty" : "NULL");
    if (c->mode != TS_OUTFEED_ALL && c->mode != TS_OUTFEED_LAST)
        return ts_error(TS_ERR_INVALID_ARGUMENT,
                        "outfeed '%s': mode %d is not TS_OUTFEED_ALL or TS_OUTFEED_LAST", c->name,
                        (int)c->mode);
    if (c->depth < 1 || c->depth > TS_OUTFEED_MAX_DEPTH)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "outfeed '%s': depth %d is outside 1..%d",
                        c->name, c->depth, TS_OUTFEED_MAX_DEPTH);
    if (c->drop_when_full != 0 && c->drop_when_full != 1)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "outfeed '%s': drop_when_full is %d, not 0 or 1",
                        c->name, c->drop_when_full);
    if (c->n_filters < 0)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "outfeed '%s': n_filters is %d (negative)",
                        c->name, c->n_filters);
    if (!c->filters && c->n_filters > 0)
        return ts_error(TS_ERR_INVALID_ARGUMENT,
                        "outfeed '%s': n_filters is %d but filters is NULL (NULL means all keys; "
                        "set n_filters to 0)",
                        c->name, c->n_filters);
    for (int i = 0; c->filters && i < c->n_filters; i++)
        if (!c->filters[i])
            return ts_error(TS_ERR_INVALID_ARGUMENT, "outfeed '%s': filter %d is NULL", c->name,
                            i);
    return TS_OK;
}

static ts_status init_sync(ts_outfeed *q) {
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0) goto fail;
    /* Timeouts must not jump with the wall clock. */
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc_take = pthread_cond_init(&q->can_take, &ca);
    int rc_put = pthread_cond_init(&q->can_put, &ca);
    int rc_drained = pthread_cond_init(&q->drained, &ca);
    pthread_condattr_destroy(&ca);
    if (rc_take == 0 && rc_put == 0 && rc_drained == 0 && pthread_mutex_init(&q->mu, NULL) == 0)
        return TS_OK;
    if (rc_take == 0) pthread_cond_destroy(&q->can_take);
    if (rc_put == 0) pthread_cond_destroy(&q->can_put);
    if (rc_drained == 0) pthread_cond_destroy(&q->drained);
fail:
    return ts_error(TS_ERR_INTERNAL, "outfeed '%s': could not create its mutex or conditions",
                    q->name);
}

static void free_fields(ts_outfeed *q) {
    for (int i = 0; q->filters && i < q->n_filters; i++) ts_free(q->filters[i]);
    ts_free(q->filters);
    for (int i = 0; q->slots && i < q->n_slots; i++) ts_free(q->slots[i].buf);
    ts_free(q->slots);
    ts_free(q->free_idx);
    ts_free(q->ring);
    ts_free(q->name);
    ts_free(q);
}

ts_status ts_outfeed_new(ts_outfeed **out, const ts_outfeed_config *c) {
    if (!out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_outfeed_new: out is NULL");
    *out = NULL;
    ts_status st = check_config(c);
    if (st) return st;
    ts_outfeed *q = ts_calloc(1, sizeof *q);
    if (!q) return TS_ERR_OUT_OF_MEMORY;
    q->mode = c->mode;
    q->depth = c->depth;
    q->drop_when_full = c->drop_when_full != 0;
    q->all_keys = c->filters == NULL;
    q->n_slots = c->depth + 1;
    q->held = -1;
    q->name = ts_strdup(c->name);
    q->slots = ts_calloc((size_t)q->n_slots, sizeof *q->slots);
    q->free_idx = ts_calloc((size_t)q->n_slots, sizeof *q->free_idx);
    q->ring = ts_calloc((size_t)q->depth, sizeof *q->ring);
    bool ok = q->name && q->slots && q->free_idx && q->ring;
    if (ok && c->filters && c->n_filters > 0) {
        q->filters = ts_calloc((size_t)c->n_filters, sizeof *q->filters);
        ok = q->filters != NULL;
        for (int i = 0; ok && i < c->n_filters; i++, q->n_filters++)
            ok = (q->filters[i] = ts_strdup(c->filters[i])) != NULL;
    }
    if (!ok) {
        free_fields(q);
        return TS_ERR_OUT_OF_MEMORY;
    }
    for (int i = 0; i < q->n_slots; i++) q->free_idx[q->n_free++] = q->n_slots - 1 - i;
    st = init_sync(q);
    if (st) {
        free_fields(q);
        return st;
    }
    *out = q;
    return TS_OK;
}

void ts_outfeed_close(ts_outfeed *q) {
    if (!q) return;
    pthread_mutex_lock(&q->mu);
    q->closed = true;
    pthread_cond_broadcast(&q->can_take);
    pthread_cond_broadcast(&q->can_put);
    pthread_cond_broadcast(&q->drained);
    pthread_mutex_unlock(&q->mu);
}

void ts_outfeed_free(ts_outfeed *q) {
    if (!q) return;
    ts_outfeed_close(q);
    /* has_sink is only set by set_sink, which the caller may not race with free. */
    if (q->has_sink) pthread_join(q->sink_thread, NULL);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->can_take);
    pthread_cond_destroy(&q->can_put);
    pthread_cond_destroy(&q->drained);
    free_fields(q);
}

const char *ts_outfeed_name(const ts_outfeed *q) { return q ? q->name : ""; }

int ts_outfeed_accepts(const ts_outfeed *q, const char *key) {
    if (!q || !key) return 0;
    if (q->all_keys) return 1;
    for (int i = 0; i < q->n_filters; i++)
        if (ts_name_matches(q->filters[i], key)) return 1;
    return 0;
}

ts_outfeed_counts ts_outfeed_get_counts(const ts_outfeed *q) {
    ts_outfeed_counts c = {0, 0, 0, 0};
    if (!q) return c;
    ts_outfeed *m = (ts_outfeed *)q; /* locking is not a logical change */
    pthread_mutex_lock(&m->mu);
    c = m->counts;
    pthread_mutex_unlock(&m->mu);
    return c;
}

/* ------------------------------------------------------ slots (locked) */

/* Makes slot i hold at least the reserved size. Only for slots nobody uses. */
static ts_status grow_slot_locked(ts_outfeed *q, int i) {
    outfeed_slot *s = &q->slots[i];
    if (s->cap >= q->reserved) return TS_OK;
    unsigned char *b = ts_malloc(q->reserved);
    if (!b) return TS_ERR_OUT_OF_MEMORY;
    ts_free(s->buf);
    s->buf = b;
    s->cap = q->reserved;
    return TS_OK;
}

static void release_locked(ts_outfeed *q, int i) {
    /* Grows a slot that was in use at a later reserve; if that fails, the
     * push that gets it reports the error. */
    if (grow_slot_locked(q, i) != TS_OK)
        ts_logf(TS_LOG_WARN, "outfeed '%s': could not grow a slot to %zu bytes", q->name,
                q->reserved);
    q->free_idx[q->n_free++] = i;
}

/* Removes the waiting record at ring position pos (0 = oldest), which makes
 * room for a producer: depth records wait, and a free slot exists whenever
 * fewer do (slots = depth + 1, one held by the consumer). */
static int ring_remove_locked(ts_outfeed *q, int pos) {
    int d = q->depth;
    int slot = q->ring[(q->head + pos) % d];
    if (pos == 0) { /* the common case: the oldest */
        q->head = (q->head + 1) % d;
    } else {
        for (int p = pos; p + 1 < q->count; p++)
            q->ring[(q->head + p) % d] = q->ring[(q->head + p + 1) % d];
    }
    q->count--;
    pthread_cond_signal(&q->can_put);
    return slot;
}

/* The waiting record of `key` from the same replica and stage (in an MPI
 * job rank 0 gets every rank's records: LAST keeps the latest of each). */
static int ring_find_key_locked(const ts_outfeed *q, const char *key, int replica, int stage) {
    for (int p = 0; p < q->count; p++) {
        const outfeed_slot *s = &q->slots[q->ring[(q->head + p) % q->depth]];
        if (strcmp(s->key, key) == 0 && s->replica == replica && s->stage == stage) return p;
    }
    return -1;
}

ts_status ts_outfeed_reserve(ts_outfeed *q, size_t max_record_bytes) {
    if (!q) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_outfeed_reserve: queue is NULL");
    pthread_mutex_lock(&q->mu);
    ts_status st = TS_OK;
    if (q->closed) {
        st = ts_error(TS_ERR_STATE, "outfeed '%s' is closed: it cannot be attached to a graph",
                      q->name);
    } else {
        q->reserved_once = true;
        if (max_record_bytes > q->reserved) q->reserved = max_record_bytes;
        for (int k = 0; k < q->n_free && st == TS_OK; k++) st = grow_slot_locked(q, q->free_idx[k]);
        if (st)
            ts_error_wrap(st, "outfeed '%s': reserving %d slots of %zu bytes", q->name,
                          q->n_slots, q->reserved);
    }
    pthread_mutex_unlock(&q->mu);
    return st;
}

/* --------------------------------------------------------------- push */

/* What a push decided under the lock and reports after it (the metrics and
 * the log call user code and other locks). */
typedef struct push_note {
    uint64_t waited_ns;
    int dropped;
    bool warn;
    char dropped_key[TS_OUTFEED_KEY_MAX];
} push_note;

static ts_status array_bytes(const ts_outfeed *q, const char *key, const ts_array *a,
                             size_t *out) {
    int64_t n = ts_array_numel(a);
    size_t es = ts_dtype_size(a->dtype);
    if (n < 0 || es == 0)
        return ts_error(TS_ERR_INVALID_ARGUMENT,
                        "outfeed '%s', key '%s': invalid array (rank %d, dtype %d)", q->name, key,
                        a->ndim, (int)a->dtype);
    if ((uint64_t)n > SIZE_MAX / es)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "outfeed '%s', key '%s': array too large",
                        q->name, key);
    *out = (size_t)n * es;
    if (*out && !a->data)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "outfeed '%s', key '%s': array data is NULL",
                        q->name, key);
    return TS_OK;
}

static void note_drop_locked(ts_outfeed *q, push_note *note, int64_t run, const char *key) {
    q->counts.dropped++;
    note->dropped++;
    size_t n = strnlen(key, TS_OUTFEED_KEY_MAX - 1); /* keys were checked; stay bounded */
    memcpy(note->dropped_key, key, n);
    note->dropped_key[n] = '\0';
    if (!q->warned || q->warned_run != run) {
        q->warned = true;
        q->warned_run = run;
        note->warn = true;
    }
}

/* Frees room for one more record, or says the record is dropped. Returns
 * TS_OK with *drop set, or TS_ERR_STATE if the queue closed meanwhile. */
static ts_status make_room_locked(ts_outfeed *q, const char *key, int replica, int stage, int64_t run, push_note *note,
                                  bool *drop) {
    *drop = false;
    if (q->mode == TS_OUTFEED_LAST) {
        int p = ring_find_key_locked(q, key, replica, stage);
        if (p >= 0) {
            release_locked(q, ring_remove_locked(q, p)); /* superseded, not a loss */
        } else if (q->count > 0 && q->count + q->filling >= q->depth) {
            int s = ring_remove_locked(q, 0);
            note_drop_locked(q, note, run, q->slots[s].key);
            release_locked(q, s);
        }
    } else if (q->count + q->filling >= q->depth && q->drop_when_full) {
        note_drop_locked(q, note, run, key);
        *drop = true;
        return TS_OK;
    }
    /* ALL mode backpressure; in LAST mode only reached with more producers
     * filling at once than depth. */
    if (q->count + q->filling >= q->depth && !q->closed) {
        uint64_t t0 = ts_now_ns();
        while (q->count + q->filling >= q->depth && !q->closed)
            pthread_cond_wait(&q->can_put, &q->mu);
        note->waited_ns = ts_now_ns() - t0;
        q->counts.wait_ns += (int64_t)note->waited_ns;
    }
    if (q->closed)
        return ts_error(TS_ERR_STATE,
                        "outfeed '%s' was closed while record '%s' of run %lld waited for "
                        "room: not delivered",
                        q->name, key, (long long)run);
    return TS_OK;
}

static void report(const ts_outfeed *q, const push_note *note, int64_t run) {
    if (note->waited_ns) ts_metric_record("OutfeedWait", (double)note->waited_ns);
    if (note->dropped) ts_counter_add("OutfeedDropped", note->dropped);
    if (note->warn)
        ts_logf(TS_LOG_WARN,
                "outfeed '%s' (depth %d, %s): dropping records in run %lld, first '%s'; "
                "ts_outfeed_get_counts reports how many (%s)",
                q->name, q->depth, q->mode == TS_OUTFEED_LAST ? "LAST" : "ALL", (long long)run,
                note->dropped_key,
                q->mode == TS_OUTFEED_LAST ? "more keys wait than depth: raise depth"
                                           : "drop_when_full is set: consume faster, raise "
                                             "depth or unset it");
}

ts_status ts_outfeed_push(ts_outfeed *q, int64_t run, int64_t sample, const char *key,
                          const ts_array *a) {
    return ts_outfeed_push_from(q, run, sample, key, a, 0, 0);
}

ts_status ts_outfeed_push_from(ts_outfeed *q, int64_t run, int64_t sample, const char *key,
                               const ts_array *a, int replica, int stage) {
    if (!q || !key || !a)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_outfeed_push: %s is NULL",
                        !q ? "queue" : !key ? "key" : "array");
    if (!ts_outfeed_accepts(q, key)) return TS_OK;
    size_t key_len = strlen(key);
    if (key_len >= TS_OUTFEED_KEY_MAX)
        return ts_error(TS_ERR_INVALID_ARGUMENT,
                        "outfeed '%s': key '%.40s...' is %zu bytes; keys are at most %d",
                        q->name, key, key_len, TS_OUTFEED_KEY_MAX - 1);
    size_t bytes = 0;
    ts_status st = array_bytes(q, key, a, &bytes);
    if (st) return st;

    push_note note;
    memset(&note, 0, sizeof note);
    bool drop = false;
    int slot = -1;
    pthread_mutex_lock(&q->mu);
    if (q->closed)
        st = ts_error(TS_ERR_STATE, "outfeed '%s' is closed: cannot push '%s'", q->name, key);
    else if (!q->reserved_once)
        st = ts_error(TS_ERR_STATE,
                      "outfeed '%s': no slots reserved; push happens while running a compiled "
                      "graph (ts_outfeed_reserve at compile)",
                      q->name);
    else if (bytes > q->reserved)
        st = ts_error(TS_ERR_INVALID_ARGUMENT,
                      "outfeed '%s': record '%s' has %zu bytes but slots hold %zu (reserved at "
                      "compile); recompile after the shape changed",
                      q->name, key, bytes, q->reserved);
    else
        st = make_room_locked(q, key, replica, stage, run, &note, &drop);
    if (st == TS_OK && !drop) {
        slot = q->free_idx[--q->n_free];
        if (q->slots[slot].cap < bytes) {
            q->free_idx[q->n_free++] = slot;
            slot = -1;
            st = ts_error(TS_ERR_OUT_OF_MEMORY,
                          "outfeed '%s': a slot could not be grown to %zu bytes earlier (out of "
                          "memory); call ts_outfeed_reserve again",
                          q->name, q->reserved);
        } else {
            q->filling++;
        }
    }
    pthread_mutex_unlock(&q->mu);

    if (slot >= 0) {
        /* The slot is ours alone until it is in the ring. */
        outfeed_slot *s = &q->slots[slot];
        s->run = run;
        s->sample = sample;
        s->replica = replica;
        s->stage = stage;
        memcpy(s->key, key, key_len + 1);
        s->array = *a;
        s->array.data = s->buf;
        if (bytes) memcpy(s->buf, a->data, bytes);

        pthread_mutex_lock(&q->mu);
        q->filling--;
        q->ring[(q->head + q->count) % q->depth] = slot;
        q->count++;
        q->counts.enqueued++;
        pthread_cond_signal(&q->can_take);
        pthread_mutex_unlock(&q->mu);
    }
    report(q, &note, run);
    return st;
}

/* -------------------------------------------------------------- take */

static void deadline_after(struct timespec *ts, int timeout_ms) {
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += timeout_ms / 1000;
    ts->tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* The consumer's step: releases the record it held, waits for the next.
 * Called with the lock held and dequeuers counted. */
static ts_status take_locked(ts_outfeed *q, ts_outfeed_record *rec, int timeout_ms) {
    if (q->held >= 0) {
        release_locked(q, q->held);
        q->held = -1;
    }
    struct timespec until;
    if (timeout_ms > 0) deadline_after(&until, timeout_ms);
    /* A closed queue still delivers what producers are filling. */
    while (q->count == 0 && !(q->closed && q->filling == 0) && timeout_ms != 0) {
        if (timeout_ms < 0)
            pthread_cond_wait(&q->can_take, &q->mu);
        else if (pthread_cond_timedwait(&q->can_take, &q->mu, &until) == ETIMEDOUT)
            break;
    }
    if (q->count == 0) {
        if (q->closed)
            return ts_error(TS_ERR_NOT_FOUND, "outfeed '%s' is closed and drained", q->name);
        return ts_error(TS_ERR_NOT_FOUND, "outfeed '%s': no record within %d ms", q->name,
                        timeout_ms);
    }
    int s = ring_remove_locked(q, 0);
    q->held = s;
    q->counts.dequeued++;
    rec->run = q->slots[s].run;
    rec->sample = q->slots[s].sample;
    rec->replica = q->slots[s].replica;
    rec->stage = q->slots[s].stage;
    rec->key = q->slots[s].key;
    rec->array = q->slots[s].array;
    return TS_OK;
}

ts_status ts_outfeed_dequeue(ts_outfeed *q, ts_outfeed_record *rec, int timeout_ms) {
    if (!q || !rec)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_outfeed_dequeue: %s is NULL",
                        !q ? "queue" : "record");
    if (timeout_ms < -1)
        return ts_error(TS_ERR_INVALID_ARGUMENT,
                        "outfeed '%s': timeout %d ms; use -1 (forever), 0 (poll) or more",
                        q->name, timeout_ms);
    ts_status st;
    pthread_mutex_lock(&q->mu);
    if (q->has_sink)
        st = ts_error(TS_ERR_STATE, "outfeed '%s' has a sink: records go to it, not to dequeue",
                      q->name);
    else if (q->dequeuers > 0)
        st = ts_error(TS_ERR_STATE,
                      "outfeed '%s': another thread is dequeuing; a queue has one consumer",
                      q->name);
    else {
        q->dequeuers++;
        st = take_locked(q, rec, timeout_ms);
        q->dequeuers--;
    }
    pthread_mutex_unlock(&q->mu);
    return st;
}

/* -------------------------------------------------------------- sink */

static void *sink_main(void *arg) {
    ts_outfeed *q = arg;
    ts_outfeed_record rec;
    ts_trace_name_thread("outfeed consumer", -1, q->name);
    pthread_mutex_lock(&q->mu);
    while (take_locked(q, &rec, -1) == TS_OK) {
        q->sink_busy = true;
        pthread_mutex_unlock(&q->mu);
        uint64_t t0 = ts_trace_live() ? ts_now_ns() : 0;
        q->sink_fn(q->sink_user, &rec);
        if (t0) ts_trace_slice(TS_TRACE_SINK, NULL, rec.key, NULL, 0, rec.sample, t0, ts_now_ns());
        pthread_mutex_lock(&q->mu);
        q->sink_busy = false;
        if (q->count == 0 && q->filling == 0) pthread_cond_broadcast(&q->drained);
    }
    if (q->held >= 0) {
        release_locked(q, q->held);
        q->held = -1;
    }
    q->sink_done = true;
    pthread_cond_broadcast(&q->drained);
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

ts_status ts_outfeed_set_sink(ts_outfeed *q, ts_outfeed_sink fn, void *user) {
    if (!q || !fn)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_outfeed_set_sink: %s is NULL",
                        !q ? "queue" : "sink function");
    ts_status st = TS_OK;
    pthread_mutex_lock(&q->mu);
    if (q->has_sink)
        st = ts_error(TS_ERR_STATE, "outfeed '%s' already has a sink", q->name);
    else if (q->closed)
        st = ts_error(TS_ERR_STATE, "outfeed '%s' is closed", q->name);
    else if (q->dequeuers > 0)
        st = ts_error(TS_ERR_STATE, "outfeed '%s': a thread is dequeuing; a queue has one "
                                    "consumer",
                      q->name);
    else {
        q->has_sink = true;
        q->sink_fn = fn;
        q->sink_user = user;
        if (pthread_create(&q->sink_thread, NULL, sink_main, q) != 0) {
            q->has_sink = false;
            st = ts_error(TS_ERR_INTERNAL, "outfeed '%s': could not start the sink thread",
                          q->name);
        }
    }
    pthread_mutex_unlock(&q->mu);
    return st;
}

ts_status ts_outfeed_flush(ts_outfeed *q) {
    if (!q) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_outfeed_flush: queue is NULL");
    ts_status st = TS_OK;
    pthread_mutex_lock(&q->mu);
    if (!q->has_sink)
        st = ts_error(TS_ERR_STATE,
                      "outfeed '%s' has no sink: nothing drains it but ts_outfeed_dequeue",
                      q->name);
    else /* a closed queue's sink still delivers what is waiting or being filled, then stops */
        while ((q->count > 0 || q->filling > 0 || q->sink_busy) && !q->sink_done)
            pthread_cond_wait(&q->drained, &q->mu);
    pthread_mutex_unlock(&q->mu);
    return st;
}
