/* held.c -- a device backend's allocations, counted (held.h). */
#include "backend/held.h"

#include <stdlib.h>

bool ts_held_note(ts_held *h, void *p, size_t bytes) {
    pthread_mutex_lock(&h->mu);
    bool ok = true;
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 64;
        ts_held_block *at = realloc(h->at, cap * sizeof *at); /* the host's own bookkeeping, outside ts_malloc's accounting */
        if (at) h->at = at, h->cap = cap;
        else ok = false;
    }
    if (ok) {
        h->at[h->n++] = (ts_held_block){p, bytes};
        h->in_use += bytes;
        if (h->in_use > h->peak) h->peak = h->in_use;
    }
    pthread_mutex_unlock(&h->mu);
    return ok;
}

void ts_held_forget(ts_held *h, void *p) {
    pthread_mutex_lock(&h->mu);
    for (size_t i = h->n; i-- > 0;)
        if (h->at[i].p == p) {
            h->in_use -= h->at[i].bytes;
            h->at[i] = h->at[--h->n];
            break;
        }
    pthread_mutex_unlock(&h->mu);
}

void ts_held_get(ts_held *h, uint64_t *in_use, uint64_t *peak) {
    pthread_mutex_lock(&h->mu);
    *in_use = h->in_use;
    *peak = h->peak;
    pthread_mutex_unlock(&h->mu);
}
