/* pool.h -- the host's worker threads: a small fork-join thread pool.
 * The CPU backend takes a model's pool as its stream (its elementwise ops,
 * reductions and products split over it); the other layers split their own
 * host work over it (a device's input staging, the observers' walks over
 * host memory). Made by ts_backend_host_pool (backend.h). Between jobs workers yield the CPU for about a millisecond,
 * then sleep on a condition variable: cheap hand-offs within a step, no
 * fight with OpenBLAS's own threads during GEMM, no spinning when idle. */
#ifndef TS_POOL_H
#define TS_POOL_H

#include "core/core.h"

typedef struct ts_pool ts_pool;
/* fn(ctx, begin, end) over a slice of [0, n). */
typedef void (*ts_pool_fn)(void *ctx, int64_t begin, int64_t end);

/* n_threads total including the caller; 1 = no workers. */
ts_status ts_pool_new(ts_pool **out, int n_threads);
void ts_pool_free(ts_pool *p);
int ts_pool_threads(const ts_pool *p);
/* Splits [0, n) into one contiguous slice per thread (fewer when n is below
 * `grain` per thread) and waits for all of them. p may be NULL. */
void ts_pool_for(ts_pool *p, int64_t n, int64_t grain, ts_pool_fn fn, void *ctx);

/* Items: work the caller hands to the workers and goes on without waiting
 * for (the observers' summaries of a forward pass's activations). Items
 * are numbered from 0 over the pool's life; fn(ctx, item, thread) runs
 * each once, on a worker between two jobs of ts_pool_for (thread 1..n-1;
 * a job comes first), or on the caller in ts_pool_drain (thread 0).
 * ts_pool_posted is the next item's number (what the caller prepares for
 * it, it writes before posting); ts_pool_post makes it ready. p has
 * workers; the thread that calls ts_pool_for posts and drains. */
typedef void (*ts_pool_item_fn)(void *ctx, uint64_t item, int thread);
uint64_t ts_pool_posted(const ts_pool *p);
void ts_pool_post(ts_pool *p, ts_pool_item_fn fn, void *ctx);
/* Runs the posted items no worker has taken, then waits for the ones a
 * worker is running: every posted item is done on return. */
void ts_pool_drain(ts_pool *p);

#endif
