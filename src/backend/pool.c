/* pool.c -- fork-join over slices; the caller runs slice 0 itself, then
 * any slice no worker has claimed yet.
 *
 * Slices are claimed, not assigned: a worker takes the next unclaimed
 * slice of the current job (a compare-and-swap on the job's generation and
 * slice number), and so does the caller once its own slice is done. On a
 * loaded machine a worker the scheduler has not run yet no longer holds up
 * the step: the caller runs its slice too, and waits only for slices a
 * worker has started. The slices' bounds depend only on n, grain and the
 * pool's size, never on who runs them, so the results are the same bits
 * either way.
 *
 * Waiting (a worker for the next job, the caller for the workers' slices)
 * first spins for SPIN_NS, then yields the CPU for a while, then sleeps on
 * a condition variable. A step hands out jobs every few microseconds and a
 * sleeping thread takes ~10-20 us to wake (longer in a VM): yielding keeps
 * the hand-off cheap without taking the core from anyone who has work --
 * OpenBLAS's threads wait the same way. The short spin comes first as a
 * yield is a system call (with ResNet-18 at batch 1 the yields and the
 * scheduler took about an eighth of the step) and, where another
 * process's real-time thread shares the core, hands it the core until that
 * thread blocks; a longer spin (20 us) kept the core from OpenBLAS's own
 * threads (ResNet-18 at batch 8 slower). The job itself is always read
 * under the mutex; the atomics say which slices are claimed and done, and
 * when to stop yielding.
 *
 * Items (ts_pool_post) fill a worker's time between jobs: a worker takes
 * the next posted item (a compare-and-swap on the count taken) whenever
 * no job is waiting for it, and the caller takes the rest itself when it
 * drains them. The counts only grow, so a worker's stale view can never
 * take an item twice or one not yet posted. */
#include "backend/pool.h"
#include "core/trace.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

/* sched_yield calls before sleeping: about a millisecond */
#define YIELDS 2000
/* spinning before the yields: a hand-off inside a step comes sooner */
#ifndef SPIN_NS
#define SPIN_NS 3000
#endif

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* the claim word: a job's generation above, its next unclaimed slice below */
#define SLICE_BITS 16
#define SLICE_MASK ((1u << SLICE_BITS) - 1u)

typedef struct worker_arg worker_arg;
struct ts_pool {
    int n;                 /* threads including the caller */
    pthread_t *threads;
    worker_arg *args;      /* each worker's (pool, index), one per thread */
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    _Atomic uint64_t generation; /* bumped for every job */
    _Atomic uint64_t claim;      /* generation << SLICE_BITS | next slice to claim */
    _Atomic int finished;        /* slices of the current job done */
    bool stop;
    ts_pool_fn fn;
    void *ctx;
    int64_t n_items;
    int slices;
    /* items: posted, taken and done so far; what runs them */
    _Atomic uint64_t posted, taken, items_done;
    _Atomic(ts_pool_item_fn) item_fn;
    _Atomic(void *) item_ctx;
};

struct worker_arg {
    ts_pool *p;
    int index;
};

static bool items_waiting(ts_pool *p) {
    return atomic_load_explicit(&p->taken, memory_order_relaxed) < atomic_load_explicit(&p->posted, memory_order_relaxed);
}

/* A worker's wait is over: the job after generation `seen` is given out,
 * or an item is posted. */
static bool worker_woken(ts_pool *p, uint64_t seen) {
    return atomic_load_explicit(&p->generation, memory_order_relaxed) != seen || items_waiting(p);
}

/* Spins for at most SPIN_NS until the job after generation `seen` is
 * given out or an item posted (slices 0: a worker's wait) or `slices`
 * slices of the current job are done (the caller's). */
static void spin(ts_pool *p, uint64_t seen, int slices) {
    uint64_t t0 = ts_now_ns();
    for (unsigned k = 1;; k++) {
        if (slices ? atomic_load_explicit(&p->finished, memory_order_acquire) >= slices : worker_woken(p, seen))
            return;
        if (k % 16 == 0 && ts_now_ns() - t0 >= SPIN_NS) return;
        cpu_relax();
    }
}

static void slice_bounds(int64_t n, int slices, int i, int64_t *b, int64_t *e) {
    *b = n * i / slices;
    *e = n * (i + 1) / slices;
}

/* The next unclaimed slice of job `gen`, or -1 when none is left (or the
 * pool has moved on to a later job). */
static int claim_slice(ts_pool *p, uint64_t gen, int slices) {
    uint64_t c = atomic_load(&p->claim);
    for (;;) {
        if (c >> SLICE_BITS != gen || (int)(c & SLICE_MASK) >= slices) return -1;
        if (atomic_compare_exchange_weak(&p->claim, &c, c + 1)) return (int)(c & SLICE_MASK);
    }
}

/* Runs slice i of the job and counts it done; the last one wakes a
 * sleeping caller. */
static void run_slice(ts_pool *p, ts_pool_fn fn, void *ctx, int64_t n, int slices, int i, bool worker) {
    int64_t b, e;
    slice_bounds(n, slices, i, &b, &e);
    if (e > b && worker && ts_trace_live()) { /* a worker's slice of the op, on its own track */
        uint64_t t0 = ts_now_ns();
        fn(ctx, b, e);
        ts_trace_slice(TS_TRACE_WORKER, NULL, ts_trace_op(), NULL, 0, 0, t0, ts_now_ns());
    } else if (e > b) {
        fn(ctx, b, e);
    }
    if (atomic_fetch_add(&p->finished, 1) + 1 == slices && worker) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_signal(&p->done);
        pthread_mutex_unlock(&p->mu);
    }
}

/* Takes the next posted item and runs it on `thread`; false when none is
 * left. */
static bool run_item(ts_pool *p, int thread) {
    uint64_t t = atomic_load_explicit(&p->taken, memory_order_relaxed);
    do {
        if (t >= atomic_load_explicit(&p->posted, memory_order_acquire)) return false;
    } while (!atomic_compare_exchange_weak(&p->taken, &t, t + 1));
    ts_pool_item_fn fn = atomic_load_explicit(&p->item_fn, memory_order_relaxed);
    fn(atomic_load_explicit(&p->item_ctx, memory_order_relaxed), t, thread);
    atomic_fetch_add_explicit(&p->items_done, 1, memory_order_release);
    return true;
}

static void *worker_main(void *arg) {
    const worker_arg *w = arg; /* the pool's own: a worker frees nothing, so a later ts_set_allocator never meets it */
    ts_pool *p = w->p;
    ts_trace_name_thread("cpu worker", w->index, NULL);
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        pthread_mutex_unlock(&p->mu);
        while (atomic_load_explicit(&p->generation, memory_order_relaxed) == seen && run_item(p, w->index)) {
        }
        spin(p, seen, 0);
        for (int y = 0; y < YIELDS && !worker_woken(p, seen); y++) sched_yield();
        pthread_mutex_lock(&p->mu);
        while (!p->stop && p->generation == seen && !items_waiting(p)) pthread_cond_wait(&p->go, &p->mu);
        if (p->stop) break;
        if (p->generation == seen) continue; /* an item: taken at the top */
        seen = p->generation;
        ts_pool_fn fn = p->fn;
        void *ctx = p->ctx;
        int slices = p->slices;
        int64_t n = p->n_items;
        pthread_mutex_unlock(&p->mu);
        for (int i; (i = claim_slice(p, seen, slices)) >= 0;) run_slice(p, fn, ctx, n, slices, i, true);
        pthread_mutex_lock(&p->mu);
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
    atomic_store(&p->finished, 0);
    uint64_t gen = atomic_load(&p->generation) + 1;
    atomic_store(&p->claim, gen << SLICE_BITS | 1u); /* slice 0 is the caller's */
    atomic_store(&p->generation, gen);
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    run_slice(p, fn, ctx, n, slices, 0, false);
    for (int i; (i = claim_slice(p, gen, slices)) >= 0;) run_slice(p, fn, ctx, n, slices, i, false); /* the ones no worker took yet */
    spin(p, 0, slices);
    for (int y = 0; y < YIELDS && atomic_load_explicit(&p->finished, memory_order_acquire) < slices; y++) sched_yield();
    pthread_mutex_lock(&p->mu);
    while (atomic_load(&p->finished) < slices) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

uint64_t ts_pool_posted(const ts_pool *p) { return atomic_load_explicit(&p->posted, memory_order_relaxed); }

void ts_pool_post(ts_pool *p, ts_pool_item_fn fn, void *ctx) {
    atomic_store_explicit(&p->item_fn, fn, memory_order_relaxed);
    atomic_store_explicit(&p->item_ctx, ctx, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->posted, 1, memory_order_release);
    pthread_mutex_lock(&p->mu); /* a worker asleep on `go` */
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
}

void ts_pool_drain(ts_pool *p) {
    while (run_item(p, 0)) {
    }
    uint64_t posted = atomic_load_explicit(&p->posted, memory_order_relaxed);
    for (unsigned k = 1; atomic_load_explicit(&p->items_done, memory_order_acquire) < posted; k++)
        if (k % 64 == 0) sched_yield(); /* a worker runs the last ones: a few microseconds */
        else cpu_relax();
}
