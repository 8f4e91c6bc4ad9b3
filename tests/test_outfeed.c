/* test_outfeed.c -- outfeed queues: no record lost or reordered under
 * backpressure (dequeue and sink), a sink flushed, filters, LAST mode,
 * counted drops, bad configs and oversize records. Run under TSan by `make test-tsan`. */
#include "check.h"
#include "observe/outfeed.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>



static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* ------------------------------------------------- generated records
 * Record i has run i / 100 and sample i % 100; its key, dtype, shape and
 * bytes all follow from (run, sample, key), so the consumer can check a
 * record without sharing state with the producer. */

enum { PER_RUN = 100, MAX_ELEMS = 7 * 5 * 4, MAX_BYTES = MAX_ELEMS * 8 };
static const char *const KEYS[] = {"conv1/act", "conv1/act_grad", "fc1.weight_grad", "fc2/out",
                                   "loss"};

static int64_t rec_index(int64_t run, int64_t sample) { return run * PER_RUN + sample; }
static const char *rec_key(int64_t i) { return KEYS[i % 5]; }

static void rec_layout(int64_t i, ts_array *a) {
    static const ts_dtype types[] = {TS_F32, TS_F64, TS_I32, TS_I64, TS_U8};
    memset(a, 0, sizeof *a);
    a->dtype = types[(i / 3) % 5];
    a->ndim = 1 + (int)(i % 3);
    int64_t dims[3] = {1 + i % 7, 1 + (i / 7) % 5, 1 + (i / 35) % 4};
    for (int d = 0; d < a->ndim; d++) a->shape[d] = dims[d];
}

static size_t rec_bytes(const ts_array *a) {
    return (size_t)ts_array_numel(a) * ts_dtype_size(a->dtype);
}

static unsigned char rec_byte(int64_t run, int64_t sample, const char *key, size_t k) {
    uint64_t h = 1469598103934665603ull;
    for (const char *c = key; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
    h ^= (uint64_t)run * 0x9e3779b97f4a7c15ull + (uint64_t)sample * 0xbf58476d1ce4e5b9ull;
    h += (uint64_t)k * 0x94d049bb133111ebull;
    h ^= h >> 29;
    return (unsigned char)(h >> 7);
}

static ts_status push_index(ts_outfeed *q, int64_t i, unsigned char *buf) {
    ts_array a;
    rec_layout(i, &a);
    int64_t run = i / PER_RUN, sample = i % PER_RUN;
    for (size_t k = 0; k < rec_bytes(&a); k++) buf[k] = rec_byte(run, sample, rec_key(i), k);
    a.data = buf;
    return ts_outfeed_push(q, run, sample, rec_key(i), &a);
}

/* 0 if the record is exactly what push_index(i) sent. */
static int rec_wrong(const ts_outfeed_record *r, int64_t i) {
    ts_array want;
    rec_layout(i, &want);
    if (rec_index(r->run, r->sample) != i || strcmp(r->key, rec_key(i)) != 0) return 1;
    if (r->array.dtype != want.dtype || r->array.ndim != want.ndim) return 2;
    for (int d = 0; d < want.ndim; d++)
        if (r->array.shape[d] != want.shape[d]) return 3;
    const unsigned char *b = r->array.data;
    for (size_t k = 0; k < rec_bytes(&want); k++)
        if (b[k] != rec_byte(r->run, r->sample, r->key, k)) return 4;
    return 0;
}

/* Checks records as they come: each must be the next one expected, or (in
 * drop mode) a later one. */
typedef struct tally {
    atomic_llong received;
    int64_t next; /* smallest index the next record may have */
    int64_t bad, out_of_order;
    int allow_gaps;
    long sleep_us;
    atomic_llong entered;   /* records the sink has started */
    int64_t hold_at;        /* > 0: the sink waits inside record hold_at until `release` */
    atomic_int release;
} tally;

static void tally_record(tally *t, const ts_outfeed_record *r) {
    int64_t i = rec_index(r->run, r->sample);
    atomic_fetch_add(&t->entered, 1);
    while (t->hold_at > 0 && i == t->hold_at && !atomic_load(&t->release)) sleep_us(50);
    if (i < t->next || (!t->allow_gaps && i != t->next)) t->out_of_order++;
    else if (rec_wrong(r, i)) t->bad++;
    t->next = i + 1;
    if (t->sleep_us) sleep_us(t->sleep_us);
    atomic_fetch_add(&t->received, 1);
}

typedef struct consumer {
    ts_outfeed *q;
    tally t;
    ts_status last;
} consumer;

static void *consumer_main(void *arg) {
    consumer *c = arg;
    ts_outfeed_record r;
    while ((c->last = ts_outfeed_dequeue(c->q, &r, -1)) == TS_OK) tally_record(&c->t, &r);
    return NULL;
}

static void sink_fn(void *user, const ts_outfeed_record *r) { tally_record(user, r); }

static void *release_later(void *arg) {
    tally *t = arg;
    sleep_us(2000);
    atomic_store(&t->release, 1);
    return NULL;
}

static ts_outfeed *make_queue(const char *name, ts_outfeed_mode mode, int depth, int drop,
                              const char *const *filters, int n) {
    ts_outfeed_config c = {name, mode, depth, filters, n, drop};
    ts_outfeed *q = NULL;
    ts_status st = ts_outfeed_new(&q, &c);
    if (st) printf("ts_outfeed_new(%s): %s\n", name, ts_last_error());
    return q;
}

/* ------------------------------------------------------------ (a) */

enum { N_RECORDS = 2000 };

static void test_backpressure_dequeue(void) {
    ts_outfeed *q = make_queue("slow", TS_OUTFEED_ALL, 1, 0, NULL, 0);
    CHECK(q && ts_outfeed_reserve(q, MAX_BYTES) == TS_OK, "(a) depth-1 queue reserved");
    if (!q) return;
    consumer c;
    memset(&c, 0, sizeof c);
    c.q = q;
    c.t.sleep_us = 20;
    pthread_t th;
    pthread_create(&th, NULL, consumer_main, &c);
    unsigned char buf[MAX_BYTES];
    int push_errors = 0;
    for (int64_t i = 0; i < N_RECORDS; i++) push_errors += push_index(q, i, buf) != TS_OK;
    ts_outfeed_close(q);
    pthread_join(th, NULL);
    ts_outfeed_counts n = ts_outfeed_get_counts(q);
    CHECK(push_errors == 0, "(a) %d pushes, %d failed", N_RECORDS, push_errors);
    CHECK(atomic_load(&c.t.received) == N_RECORDS && c.t.next == N_RECORDS,
          "(a) consumer got %lld of %d records", (long long)atomic_load(&c.t.received),
          N_RECORDS);
    CHECK(c.t.out_of_order == 0 && c.t.bad == 0, "(a) in order: %lld out of order, %lld corrupt",
          (long long)c.t.out_of_order, (long long)c.t.bad);
    CHECK(c.last == TS_ERR_NOT_FOUND, "(a) dequeue after close+drain: %s",
          ts_status_name(c.last));
    CHECK(n.enqueued == N_RECORDS && n.dequeued == N_RECORDS && n.dropped == 0,
          "(a) counts enqueued %lld dequeued %lld dropped %lld", (long long)n.enqueued,
          (long long)n.dequeued, (long long)n.dropped);
    CHECK(n.wait_ns > 0, "(a) producer waited %lld ns", (long long)n.wait_ns);
    ts_outfeed_free(q);
}

/* ------------------------------------------------------------ (b) */

static void test_sink(void) {
    ts_outfeed *q = make_queue("sink", TS_OUTFEED_ALL, 2, 0, NULL, 0);
    if (!q || ts_outfeed_reserve(q, MAX_BYTES) != TS_OK) {
        CHECK(0, "(b) queue");
        return;
    }
    tally t;
    memset(&t, 0, sizeof t);
    t.sleep_us = 20;
    CHECK(ts_outfeed_set_sink(q, sink_fn, &t) == TS_OK, "(b) sink started");
    CHECK(ts_outfeed_set_sink(q, sink_fn, &t) == TS_ERR_STATE, "(b) second sink: %s",
          ts_last_error());
    ts_outfeed_record r;
    CHECK(ts_outfeed_dequeue(q, &r, 0) == TS_ERR_STATE, "(b) dequeue with a sink: %s",
          ts_last_error());
    unsigned char buf[MAX_BYTES];
    int push_errors = 0;
    for (int64_t i = 0; i < N_RECORDS; i++) push_errors += push_index(q, i, buf) != TS_OK;
    for (int ms = 0; ms < 30000 && atomic_load(&t.received) < N_RECORDS; ms++) sleep_us(1000);
    ts_outfeed_counts n = ts_outfeed_get_counts(q);
    CHECK(push_errors == 0 && atomic_load(&t.received) == N_RECORDS,
          "(b) sink got %lld of %d records", (long long)atomic_load(&t.received), N_RECORDS);
    CHECK(n.enqueued == N_RECORDS && n.dequeued == N_RECORDS && n.dropped == 0 && n.wait_ns > 0,
          "(b) counts enqueued %lld dequeued %lld dropped %lld wait %lld ns",
          (long long)n.enqueued, (long long)n.dequeued, (long long)n.dropped,
          (long long)n.wait_ns);
    ts_outfeed_free(q);
    CHECK(t.out_of_order == 0 && t.bad == 0, "(b) in order: %lld out of order, %lld corrupt",
          (long long)t.out_of_order, (long long)t.bad);

    /* Flush: returns once the sink has returned from every record pushed
     * before it (a slow sink, records still waiting when it is called). */
    q = make_queue("sink-flush", TS_OUTFEED_ALL, 8, 0, NULL, 0);
    if (!q || ts_outfeed_reserve(q, MAX_BYTES) != TS_OK) return;
    CHECK(ts_outfeed_flush(q) == TS_ERR_STATE, "(b) flush without a sink: %s", ts_last_error());
    memset(&t, 0, sizeof t);
    t.sleep_us = 500;
    ts_outfeed_set_sink(q, sink_fn, &t);
    CHECK(ts_outfeed_flush(q) == TS_OK, "(b) flush of an empty queue returns");
    for (int round = 1; round <= 3; round++) {
        for (int64_t i = 0; i < 20; i++) push_index(q, (round - 1) * 20 + i, buf);
        ts_status fst = ts_outfeed_flush(q);
        long long got = atomic_load(&t.received);
        CHECK(fst == TS_OK && got == 20LL * round, "(b) flush after %d pushes: the sink had returned from %lld", 20 * round, got);
    }
    /* On a closed queue too: the sink is still inside the last record, none
     * waiting, when the queue closes; flush waits for it. */
    t.hold_at = 61;
    push_index(q, 60, buf);
    push_index(q, 61, buf);
    for (int ms = 0; ms < 60000 && atomic_load(&t.entered) < 62; ms++) sleep_us(1000); /* the sink is inside 61 */
    ts_outfeed_close(q);
    pthread_t opener;
    pthread_create(&opener, NULL, release_later, &t); /* lets 61 finish while flush waits (or before: flush is right either way) */
    ts_status fst = ts_outfeed_flush(q);
    long long got = atomic_load(&t.received);
    pthread_join(opener, NULL);
    CHECK(fst == TS_OK && got == 62, "(b) flush after close: the sink had returned from %lld of 62", got);
    ts_outfeed_free(q);
    CHECK(t.out_of_order == 0 && t.bad == 0, "(b) flushed records in order and intact");

    /* Free with records still waiting: the sink gets every one first. */
    q = make_queue("sink-drain", TS_OUTFEED_ALL, 8, 0, NULL, 0);
    if (!q || ts_outfeed_reserve(q, MAX_BYTES) != TS_OK) return;
    memset(&t, 0, sizeof t);
    t.sleep_us = 200;
    ts_outfeed_set_sink(q, sink_fn, &t);
    for (int64_t i = 0; i < 50; i++) push_index(q, i, buf);
    ts_outfeed_free(q);
    CHECK(atomic_load(&t.received) == 50 && t.out_of_order == 0 && t.bad == 0,
          "(b) free drains: sink got %lld of 50 records", (long long)atomic_load(&t.received));
}

/* ------------------------------------------------------------ (c) */

static void test_filters(void) {
    const char *const sub[] = {"*grad"};
    const char *const glob[] = {"conv*/act", "fc?.weight_grad"};
    const char *const caseful[] = {"fc1.Grad"};
    const char *const none[] = {"unused"};
    ts_outfeed *qs = make_queue("sub", TS_OUTFEED_ALL, 4, 0, sub, 1);
    ts_outfeed *qg = make_queue("glob", TS_OUTFEED_ALL, 4, 0, glob, 2);
    ts_outfeed *qc = make_queue("case", TS_OUTFEED_ALL, 4, 0, caseful, 1);
    ts_outfeed *qa = make_queue("all", TS_OUTFEED_ALL, 4, 0, NULL, 0);
    ts_outfeed *qn = make_queue("none", TS_OUTFEED_ALL, 4, 0, none, 0);
    if (!qs || !qg || !qc || !qa || !qn) {
        CHECK(0, "(c) queues");
        return;
    }
    CHECK(ts_outfeed_accepts(qs, "conv1/act_grad") && ts_outfeed_accepts(qs, "fc1.weight_grad") &&
              !ts_outfeed_accepts(qs, "conv1/act") && !ts_outfeed_accepts(qs, "loss") && !ts_outfeed_accepts(qs, "grad_norm"),
          "(c) glob '*grad' matches the whole key");
    CHECK(ts_outfeed_accepts(qg, "conv1/act") && ts_outfeed_accepts(qg, "conv22/act") &&
              !ts_outfeed_accepts(qg, "conv1/act_grad") &&
              ts_outfeed_accepts(qg, "fc2.weight_grad") &&
              !ts_outfeed_accepts(qg, "fc12.weight_grad") && !ts_outfeed_accepts(qg, "loss"),
          "(c) globs match the whole key");
    CHECK(!ts_outfeed_accepts(qc, "fc1.grad") && ts_outfeed_accepts(qc, "fc1.Grad") && !ts_outfeed_accepts(qc, "fc1.Grad2") &&
              !ts_outfeed_accepts(qc, "xfc1.Grad"),
          "(c) a name without glob characters: exact and case-sensitive");
    CHECK(ts_outfeed_accepts(qa, "loss") && ts_outfeed_accepts(qa, ""), "(c) NULL list: all");
    CHECK(!ts_outfeed_accepts(qn, "loss") && !ts_outfeed_accepts(qn, "unused"),
          "(c) empty list: none");

    /* Pushing: rejected keys return TS_OK and enqueue nothing. */
    ts_outfeed_reserve(qs, MAX_BYTES);
    ts_outfeed_reserve(qn, MAX_BYTES);
    unsigned char buf[MAX_BYTES];
    int ok = 1;
    for (int64_t i = 0; i < 5; i++) ok &= push_index(qs, i, buf) == TS_OK;
    for (int64_t i = 0; i < 5; i++) ok &= push_index(qn, i, buf) == TS_OK;
    ts_outfeed_counts cs = ts_outfeed_get_counts(qs), cn = ts_outfeed_get_counts(qn);
    ts_outfeed_record r;
    int got = 0, right = 1;
    while (ts_outfeed_dequeue(qs, &r, 0) == TS_OK) {
        got++;
        right &= strstr(r.key, "grad") != NULL && !rec_wrong(&r, rec_index(r.run, r.sample));
    }
    CHECK(ok && cs.enqueued == 2 && got == 2 && right && cs.dropped == 0,
          "(c) push through '*grad': %lld enqueued, %d dequeued (want 2)", (long long)cs.enqueued,
          got);
    CHECK(cn.enqueued == 0 && cn.dropped == 0 && ts_outfeed_dequeue(qn, &r, 0) == TS_ERR_NOT_FOUND,
          "(c) push through none: nothing enqueued");
    ts_outfeed_free(qs);
    ts_outfeed_free(qg);
    ts_outfeed_free(qc);
    ts_outfeed_free(qa);
    ts_outfeed_free(qn);
}

/* ------------------------------------------------------------ (d) */

static ts_status push_i32(ts_outfeed *q, int64_t run, int64_t sample, const char *key,
                          int32_t v) {
    int64_t shape[1] = {1};
    ts_array a = ts_array_i32(&v, 1, shape);
    return ts_outfeed_push(q, run, sample, key, &a);
}

static void test_last(void) {
    ts_outfeed *q = make_queue("last", TS_OUTFEED_LAST, 4, 0, NULL, 0);
    if (!q || ts_outfeed_reserve(q, 64) != TS_OK) {
        CHECK(0, "(d) queue");
        return;
    }
    /* a b a c b a: survivors in push order are c(3) b(4) a(5). */
    const char *keys[] = {"a", "b", "a", "c", "b", "a"};
    for (int i = 0; i < 6; i++) push_i32(q, 0, i, keys[i], 100 + i);
    ts_outfeed_record r;
    char got[64] = "";
    int values_ok = 1;
    while (ts_outfeed_dequeue(q, &r, 0) == TS_OK) {
        size_t n = strlen(got);
        snprintf(got + n, sizeof got - n, "%s%lld ", r.key, (long long)r.sample);
        values_ok &= *(int32_t *)r.array.data == 100 + r.sample;
    }
    ts_outfeed_counts n = ts_outfeed_get_counts(q);
    CHECK(strcmp(got, "c3 b4 a5 ") == 0 && values_ok, "(d) latest per key in push order: '%s'",
          got);
    CHECK(n.enqueued == 6 && n.dequeued == 3 && n.dropped == 0,
          "(d) replaced records are not drops: enqueued %lld dequeued %lld dropped %lld",
          (long long)n.enqueued, (long long)n.dequeued, (long long)n.dropped);
    ts_outfeed_free(q);

    /* More distinct keys than depth: the oldest is evicted and counted. */
    q = make_queue("last2", TS_OUTFEED_LAST, 2, 0, NULL, 0);
    ts_outfeed_reserve(q, 64);
    int64_t before = ts_counter_get("OutfeedDropped");
    push_i32(q, 1, 0, "x", 1);
    push_i32(q, 1, 1, "y", 2);
    push_i32(q, 1, 2, "z", 3);
    got[0] = '\0';
    while (ts_outfeed_dequeue(q, &r, 0) == TS_OK) {
        size_t m = strlen(got);
        snprintf(got + m, sizeof got - m, "%s ", r.key);
    }
    n = ts_outfeed_get_counts(q);
    CHECK(strcmp(got, "y z ") == 0 && n.dropped == 1 &&
              ts_counter_get("OutfeedDropped") - before == 1,
          "(d) eviction beyond depth: got '%s', dropped %lld", got, (long long)n.dropped);
    ts_outfeed_free(q);
}

/* ------------------------------------------------------------ (e) */

static void test_drop(void) {
    ts_outfeed *q = make_queue("drop", TS_OUTFEED_ALL, 3, 1, NULL, 0);
    if (!q || ts_outfeed_reserve(q, MAX_BYTES) != TS_OK) {
        CHECK(0, "(e) queue");
        return;
    }
    unsigned char buf[MAX_BYTES];
    int64_t before = ts_counter_get("OutfeedDropped");
    int ok = 1;
    for (int64_t i = 0; i < 10; i++) ok &= push_index(q, i, buf) == TS_OK;
    ts_outfeed_counts n = ts_outfeed_get_counts(q);
    ts_outfeed_record r;
    int64_t want = 0, got = 0;
    while (ts_outfeed_dequeue(q, &r, 0) == TS_OK) got += !rec_wrong(&r, want++);
    CHECK(ok && n.enqueued == 3 && n.dropped == 7 && got == 3,
          "(e) full queue without consumer: enqueued %lld, dropped %lld, delivered %lld "
          "(want 3, 7, 3)",
          (long long)n.enqueued, (long long)n.dropped, (long long)got);
    CHECK(ts_counter_get("OutfeedDropped") - before == 7, "(e) OutfeedDropped counter +%lld",
          (long long)(ts_counter_get("OutfeedDropped") - before));
    ts_outfeed_free(q);

    /* With a slow consumer: whatever is not dropped arrives, in order. */
    q = make_queue("drop2", TS_OUTFEED_ALL, 2, 1, NULL, 0);
    ts_outfeed_reserve(q, MAX_BYTES);
    consumer c;
    memset(&c, 0, sizeof c);
    c.q = q;
    c.t.sleep_us = 200;
    c.t.allow_gaps = 1;
    pthread_t th;
    pthread_create(&th, NULL, consumer_main, &c);
    for (int64_t i = 0; i < 500; i++) ok &= push_index(q, i, buf) == TS_OK;
    ts_outfeed_close(q);
    pthread_join(th, NULL);
    n = ts_outfeed_get_counts(q);
    long long recv = (long long)atomic_load(&c.t.received);
    CHECK(ok && n.enqueued + n.dropped == 500 && n.dropped > 0 && recv == n.enqueued &&
              n.dequeued == n.enqueued,
          "(e) concurrent: enqueued %lld + dropped %lld == 500, delivered %lld",
          (long long)n.enqueued, (long long)n.dropped, recv);
    CHECK(c.t.out_of_order == 0 && c.t.bad == 0 && n.wait_ns == 0,
          "(e) delivered in order and intact, producer never waited");
    ts_outfeed_free(q);
}

/* ------------------------------------------------------------ (f) */

static void expect_bad(const ts_outfeed_config *c, const char *what, const char *needle) {
    ts_outfeed *q = (ts_outfeed *)&q; /* must be reset to NULL */
    ts_clear_error();
    ts_status st = ts_outfeed_new(&q, c);
    const char *msg = ts_last_error();
    CHECK(st == TS_ERR_INVALID_ARGUMENT && q == NULL && strstr(msg, needle),
          "(f) %s: %s \"%s\"", what, ts_status_name(st), msg);
    if (st == TS_OK) ts_outfeed_free(q);
}

static void test_bad_config(void) {
    const char *const filters[] = {"a", NULL};
    ts_outfeed_config ok = {"q", TS_OUTFEED_ALL, 4, NULL, 0, 0}, c;
    expect_bad(NULL, "NULL config", "config");
    c = ok, c.name = NULL;
    expect_bad(&c, "NULL name", "name");
    c = ok, c.name = "";
    expect_bad(&c, "empty name", "name");
    c = ok, c.depth = 0;
    expect_bad(&c, "depth 0", "depth 0");
    c = ok, c.depth = -3;
    expect_bad(&c, "depth -3", "depth -3");
    c = ok, c.mode = (ts_outfeed_mode)7;
    expect_bad(&c, "mode 7", "mode 7");
    c = ok, c.n_filters = -1, c.filters = filters;
    expect_bad(&c, "n_filters -1", "n_filters");
    c = ok, c.n_filters = 2;
    expect_bad(&c, "n_filters without list", "filters is NULL");
    c = ok, c.n_filters = 2, c.filters = filters;
    expect_bad(&c, "NULL filter", "filter 1");
    c = ok, c.drop_when_full = 5;
    expect_bad(&c, "drop_when_full 5", "drop_when_full");
    CHECK(ts_outfeed_new(NULL, &ok) == TS_ERR_INVALID_ARGUMENT, "(f) NULL out");
    ts_outfeed *q = NULL;
    CHECK(ts_outfeed_new(&q, &ok) == TS_OK && q && strcmp(ts_outfeed_name(q), "q") == 0,
          "(f) a good config works");
    ts_outfeed_free(q);
    ts_outfeed_free(NULL); /* no-op */
}

/* ------------------------------------------------------------ (g) */

typedef struct blocked {
    ts_outfeed *q;
    ts_status st;
} blocked;

static void *blocked_push(void *arg) {
    blocked *b = arg;
    b->st = push_i32(b->q, 0, 9, "k", 9);
    return NULL;
}

static void *blocked_take(void *arg) {
    blocked *b = arg;
    ts_outfeed_record r;
    b->st = ts_outfeed_dequeue(b->q, &r, -1);
    return NULL;
}

static void test_sizes_and_state(void) {
    ts_outfeed *q = make_queue("sizes", TS_OUTFEED_ALL, 2, 0, NULL, 0);
    if (!q) return;
    float big[65] = {0};
    int64_t shape[1] = {65};
    ts_array a = ts_array_f32(big, 1, shape);
    CHECK(ts_outfeed_push(q, 0, 0, "k", &a) == TS_ERR_STATE, "(g) push before reserve: %s",
          ts_last_error());
    ts_outfeed_reserve(q, 64 * sizeof(float));
    ts_status st = ts_outfeed_push(q, 0, 0, "k", &a);
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "260 bytes"),
          "(g) 260 bytes into 256-byte slots: %s \"%s\"", ts_status_name(st), ts_last_error());
    shape[0] = 64;
    a = ts_array_f32(big, 1, shape);
    CHECK(ts_outfeed_push(q, 0, 1, "k", &a) == TS_OK, "(g) 256 bytes fit");
    char longkey[TS_OUTFEED_KEY_MAX + 8];
    memset(longkey, 'k', sizeof longkey - 1);
    longkey[sizeof longkey - 1] = '\0';
    CHECK(ts_outfeed_push(q, 0, 2, longkey, &a) == TS_ERR_INVALID_ARGUMENT,
          "(g) key too long: %s", ts_last_error());
    ts_array bad = a;
    bad.shape[0] = -1;
    CHECK(ts_outfeed_push(q, 0, 3, "k", &bad) == TS_ERR_INVALID_ARGUMENT,
          "(g) negative dim: %s", ts_last_error());
    bad = a;
    bad.data = NULL;
    CHECK(ts_outfeed_push(q, 0, 4, "k", &bad) == TS_ERR_INVALID_ARGUMENT, "(g) NULL data: %s",
          ts_last_error());

    /* Growing at recompile keeps what waits and admits larger records. */
    CHECK(ts_outfeed_reserve(q, 65 * sizeof(float)) == TS_OK, "(g) reserve grows");
    shape[0] = 65;
    a = ts_array_f32(big, 1, shape);
    big[64] = 7.5f;
    CHECK(ts_outfeed_push(q, 0, 5, "k", &a) == TS_OK, "(g) 260 bytes fit after growing");
    ts_outfeed_record r;
    int64_t s1 = -1, s2 = -1;
    float last = 0;
    if (ts_outfeed_dequeue(q, &r, 0) == TS_OK) s1 = r.sample;
    if (ts_outfeed_dequeue(q, &r, 0) == TS_OK) {
        s2 = r.sample;
        last = ((float *)r.array.data)[64];
    }
    CHECK(s1 == 1 && s2 == 5 && last == 7.5f, "(g) records across the grow: samples %lld %lld",
          (long long)s1, (long long)s2);

    /* The record a consumer holds stays intact while the producer pushes. */
    ts_outfeed *h = make_queue("held", TS_OUTFEED_ALL, 1, 0, NULL, 0);
    ts_outfeed_reserve(h, 16);
    push_i32(h, 0, 0, "k", 111);
    ts_outfeed_dequeue(h, &r, 0);
    push_i32(h, 0, 1, "k", 222);
    CHECK(*(int32_t *)r.array.data == 111 && strcmp(r.key, "k") == 0,
          "(g) held record intact after the next push");

    /* Timeouts and close. */
    uint64_t t0 = ts_now_ns();
    ts_outfeed_dequeue(h, &r, 0); /* takes 222 */
    st = ts_outfeed_dequeue(h, &r, 50);
    double ms = (double)(ts_now_ns() - t0) / 1e6;
    CHECK(st == TS_ERR_NOT_FOUND && ms >= 45 && ts_last_error()[0],
          "(g) empty queue, 50 ms timeout: %s after %.1f ms \"%s\"", ts_status_name(st), ms,
          ts_last_error());
    CHECK(ts_outfeed_dequeue(h, &r, -2) == TS_ERR_INVALID_ARGUMENT, "(g) timeout -2 rejected");

    blocked bc = {h, TS_OK};
    pthread_t tc;
    pthread_create(&tc, NULL, blocked_take, &bc);
    sleep_us(20000);
    ts_outfeed_close(h);
    pthread_join(tc, NULL);
    CHECK(bc.st == TS_ERR_NOT_FOUND, "(g) close wakes a waiting consumer: %s",
          ts_status_name(bc.st));
    ts_outfeed_free(h);

    h = make_queue("closing", TS_OUTFEED_ALL, 1, 0, NULL, 0);
    ts_outfeed_reserve(h, 16);
    push_i32(h, 0, 0, "k", 1);
    blocked bp = {h, TS_OK};
    pthread_t tp;
    pthread_create(&tp, NULL, blocked_push, &bp);
    sleep_us(20000);
    ts_outfeed_close(h);
    pthread_join(tp, NULL);
    CHECK(bp.st == TS_ERR_STATE, "(g) close wakes a blocked producer: %s",
          ts_status_name(bp.st));
    CHECK(push_i32(h, 0, 2, "k", 2) == TS_ERR_STATE, "(g) push after close: %s",
          ts_last_error());
    int drained = ts_outfeed_dequeue(h, &r, -1) == TS_OK && r.sample == 0;
    CHECK(drained && ts_outfeed_dequeue(h, &r, -1) == TS_ERR_NOT_FOUND,
          "(g) after close: drains the waiting record, then NOT_FOUND without waiting");
    CHECK(ts_outfeed_set_sink(h, sink_fn, NULL) == TS_ERR_STATE, "(g) sink on a closed queue");
    ts_outfeed_free(h);
    ts_outfeed_free(q);
}

/* ------------------------------------------------------------ (h) */

/* Several producers at once (the header allows it): each producer's records
 * arrive complete and in its own order, in ALL mode and in LAST mode with
 * more producers filling than depth. */
enum { PRODUCERS = 4, PER_PRODUCER = 500 };

typedef struct producer {
    ts_outfeed *q;
    int id, errors;
    atomic_int *finished;
} producer;

static void *producer_main(void *arg) {
    producer *p = arg;
    char key[16];
    snprintf(key, sizeof key, "p%d", p->id);
    for (int i = 0; i < PER_PRODUCER; i++)
        p->errors += push_i32(p->q, p->id, i, key, p->id * 100000 + i) != TS_OK;
    atomic_fetch_add(p->finished, 1);
    return NULL;
}

static void run_producers(ts_outfeed_mode mode, const char *what) {
    ts_outfeed *q = make_queue(what, mode, mode == TS_OUTFEED_ALL ? 3 : 1, 0, NULL, 0);
    if (!q || ts_outfeed_reserve(q, 16) != TS_OK) {
        CHECK(0, "(h) queue");
        return;
    }
    atomic_int finished = 0;
    producer ps[PRODUCERS];
    pthread_t th[PRODUCERS];
    for (int p = 0; p < PRODUCERS; p++) {
        ps[p] = (producer){q, p, 0, &finished};
        pthread_create(&th[p], NULL, producer_main, &ps[p]);
    }
    int64_t next[PRODUCERS] = {0}, got = 0, disorder = 0, errors = 0;
    ts_outfeed_record r;
    for (;;) {
        /* Read before dequeuing: if every push had returned, an empty
         * dequeue means the queue is drained. */
        int all_done = atomic_load(&finished) == PRODUCERS;
        if (ts_outfeed_dequeue(q, &r, 10) != TS_OK) {
            if (all_done) break;
            continue;
        }
        int64_t p = r.run, v = *(int32_t *)r.array.data;
        int valid = p >= 0 && p < PRODUCERS;
        if (!valid || r.sample < next[p] || (mode == TS_OUTFEED_ALL && r.sample != next[p]) ||
            v != p * 100000 + r.sample || r.key[0] != 'p' || r.key[1] != '0' + p)
            disorder++;
        if (valid) next[p] = r.sample + 1;
        got++;
    }
    for (int p = 0; p < PRODUCERS; p++) {
        pthread_join(th[p], NULL);
        errors += ps[p].errors;
    }
    ts_outfeed_counts n = ts_outfeed_get_counts(q);
    CHECK(errors == 0 && disorder == 0 && n.dequeued == got && n.enqueued >= got,
          "(h) %s: %d producers, %lld records delivered, %lld out of order or corrupt", what,
          PRODUCERS, (long long)got, (long long)disorder);
    if (mode == TS_OUTFEED_ALL)
        CHECK(got == PRODUCERS * PER_PRODUCER && n.dropped == 0, "(h) %s: none lost", what);
    else
        CHECK(n.enqueued == PRODUCERS * PER_PRODUCER && got >= 1 && got + n.dropped <= n.enqueued,
              "(h) %s: enqueued %lld, delivered %lld, evicted %lld", what, (long long)n.enqueued,
              (long long)got, (long long)n.dropped);
    ts_outfeed_free(q);
}

static void test_many_producers(void) {
    run_producers(TS_OUTFEED_ALL, "many-all");
    run_producers(TS_OUTFEED_LAST, "many-last");
}

int main(void) {
    ts_set_log_level(TS_LOG_ERROR); /* the drop warnings are expected */
    test_backpressure_dequeue();
    test_sink();
    test_filters();
    test_last();
    test_drop();
    test_bad_config();
    test_sizes_and_state();
    test_many_producers();
    return check_summary("test_outfeed");
}
