/* held.h -- what a device backend holds of its memory: each allocation's
 * size by address (noted at compile, not in the step loop), their sum and
 * its peak, for the backend's memory_info (backend.h). Thread-safe: models
 * on other threads allocate from the same backend. Internal: not API. */
#ifndef TS_BACKEND_HELD_H
#define TS_BACKEND_HELD_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ts_held_block {
    void *p;
    size_t bytes;
} ts_held_block;

typedef struct ts_held {
    pthread_mutex_t mu;
    ts_held_block *at;
    size_t n, cap;
    uint64_t in_use, peak;
} ts_held;

#define TS_HELD_INIT {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0, 0}

/* p's `bytes` counted as held; false: no host memory to note it (p is not
 * counted, the caller gives it back). */
bool ts_held_note(ts_held *h, void *p, size_t bytes);
/* p no longer held (an address never noted: nothing). */
void ts_held_forget(ts_held *h, void *p);
/* What is held now and at most since the process started. */
void ts_held_get(ts_held *h, uint64_t *in_use, uint64_t *peak);

#endif
