/* memplan.c -- places buffers in one arena so that buffers whose lifetimes
 * do not overlap share bytes. Greedy by size, lowest fitting offset: simple
 * and near-optimal for the chain-shaped graphs we see. */
#include "compile/program.h"

#include <stdlib.h>

#define ALIGN 64

static int by_size_desc(const void *a, const void *b) {
    const ts_interval *x = *(ts_interval *const *)a, *y = *(ts_interval *const *)b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

static bool overlap_time(const ts_interval *a, const ts_interval *b) { return a->start <= b->end && b->start <= a->end; }

/* Returns the arena size; each interval gets an aligned offset. O(n^2 log n). */
size_t ts_memplan(ts_interval *iv, int n) {
    if (n <= 0) return 0;
    ts_interval **sorted = ts_malloc((size_t)n * sizeof *sorted);
    if (!sorted) return (size_t)-1;
    for (int i = 0; i < n; i++) {
        iv[i].bytes = (iv[i].bytes + ALIGN - 1) / ALIGN * ALIGN;
        sorted[i] = &iv[i];
    }
    qsort(sorted, (size_t)n, sizeof *sorted, by_size_desc);
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        ts_interval *cur = sorted[i];
        size_t offset = 0;
        /* bump past every placed, time-overlapping block we collide with,
         * until a pass finds no collision */
        for (bool moved = true; moved;) {
            moved = false;
            for (int j = 0; j < i; j++) {
                const ts_interval *o = sorted[j];
                if (!overlap_time(cur, o)) continue;
                if (offset < o->offset + o->bytes && o->offset < offset + cur->bytes) {
                    offset = o->offset + o->bytes;
                    moved = true;
                }
            }
        }
        cur->offset = offset;
        if (offset + cur->bytes > total) total = offset + cur->bytes;
    }
    ts_free(sorted);
    return total;
}
