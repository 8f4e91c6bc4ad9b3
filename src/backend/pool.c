/* pool.c -- fork-join over slices; the caller runs slice 0 itself.
 *
 * Waiting (a worker for the next job, the caller for the workers) first
 * yields the CPU for a while, then sleeps on a condition variable. A step
 * hands out jobs every few microseconds and a sleeping thread takes ~10-20
 * us to wake (longer in a VM): yielding keeps the hand-off cheap without
 * taking the core from anyone who has work -- OpenBLAS's threads wait the
 * same way. The job itself is always read under the mutex; the atomics only
 * say when to stop yielding. */
#include "backend/pool.h"
#include "core/trace.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

/* sched_yield calls before sleeping: about a millisecond */
#define YIELDS 2000

typedef struct worker_arg worker_arg;
struct ts_pool {
    int n;                 /* threads including the caller */
    pthread_t *threads;
    worker_arg *args;      /* each worker's (pool, index), one per thread */
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    _Atomic uint64_t generation; /* bumped for every job */
    _Atomic int pending;   /* workers still running the current job */
    bool stop;
    ts_pool_fn fn;
    void *ctx;
    int64_t n_items;
    int slices;
};

struct worker_arg {
    ts_pool *p;
    int index;
};

static void slice_bounds(int64_t n, int slices, int i, int64_t *b, int64_t *e) {
    *b = n * i / slices;
    *e = n * (i + 1) / slices;
}

static void *worker_main(void *arg) {
    const worker_arg *w = arg; /* the pool's own: a worker frees nothing, so a later ts_set_allocator never meets it */
    ts_pool *p = w->p;
    int me = w->index;
    ts_trace_name_thread("cpu worker", me, NULL);
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        pthread_mutex_unlock(&p->mu);
        for (int y = 0; y < YIELDS && atomic_load_explicit(&p->generation, memory_order_relaxed) == seen; y++) sched_yield();
        pthread_mutex_lock(&p->mu);
        while (!p->stop && p->generation == seen) pthread_cond_wait(&p->go, &p->mu);
        if (p->stop) break;
        seen = p->generation;
        ts_pool_fn fn = p->fn;
        void *ctx = p->ctx;
        int slices = p->slices;
        int64_t n = p->n_items;
        pthread_mutex_unlock(&p->mu);
        if (me < slices) {
            int64_t b, e;
            slice_bounds(n, slices, me, &b, &e);
            if (e > b && ts_trace_live()) { /* its slice of the op, on its own track */
                uint64_t t0 = ts_now_ns();
                fn(ctx, b, e);
                ts_trace_slice(TS_TRACE_WORKER, NULL, ts_trace_op(), NULL, 0, 0, t0, ts_now_ns());
            } else if (e > b) {
                fn(ctx, b, e);
            }
        }
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

ts_status ts_pool_new(ts_pool **out, int n_threads) {
    *out = NULL;
    if (n_threads < 1) n_threads = 1;
    ts_pool *p = ts_calloc(1, sizeof *p);
    if (!p) return TS_ERR_OUT_OF_MEMORY;
    p->n = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    if (n_threads > 1) {
        p->threads = ts_calloc((size_t)n_threads - 1, sizeof *p->threads);
        p->args = ts_calloc((size_t)n_threads - 1, sizeof *p->args);
        if (!p->threads || !p->args) {
            p->n = 1; /* no workers to join */
            ts_pool_free(p);
            return TS_ERR_OUT_OF_MEMORY;
        }
        for (int i = 1; i < n_threads; i++) {
            p->args[i - 1] = (worker_arg){p, i};
            if (pthread_create(&p->threads[i - 1], NULL, worker_main, &p->args[i - 1]) != 0) {
                p->n = i; /* free joins the ones that started */
                ts_pool_free(p);
                return ts_error(TS_ERR_INTERNAL, "could not start worker thread %d", i);
            }
        }
    }
    *out = p;
    return TS_OK;
}

void ts_pool_free(ts_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i - 1], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    ts_free(p->threads);
    ts_free(p->args);
    ts_free(p);
}

int ts_pool_threads(const ts_pool *p) { return p ? p->n : 1; }

void ts_pool_for(ts_pool *p, int64_t n, int64_t grain, ts_pool_fn fn, void *ctx) {
    if (n <= 0) return;
    int slices = p ? p->n : 1;
    if (grain < 1) grain = 1;
    if (n / grain < slices) slices = (int)(n / grain);
    if (slices <= 1) {
        fn(ctx, 0, n);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n_items = n;
    p->slices = slices;
    p->pending = p->n - 1;
    p->generation++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    int64_t b, e;
    slice_bounds(n, slices, 0, &b, &e);
    fn(ctx, b, e);
    for (int y = 0; y < YIELDS && atomic_load_explicit(&p->pending, memory_order_relaxed) > 0; y++) sched_yield();
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
