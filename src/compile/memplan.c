/* memplan.c -- places buffers in one arena so that buffers whose lifetimes
 * do not overlap share bytes. Up to GREEDY_MAX buffers: greedy by size,
 * lowest fitting offset (near-optimal for the chain-shaped graphs we see,
 * but quadratic). Beyond: a linear scan in time order with a best-fit free
 * list (O(n log n) plus the free list's length), so a graph of 100,000
 * tensors plans in milliseconds. */
#include "compile/program.h"

#include <stdlib.h>
#include <string.h>

#define ALIGN 64

static int by_size_desc(const void *a, const void *b) {
    const ts_interval *x = *(ts_interval *const *)a, *y = *(ts_interval *const *)b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

static bool overlap_time(const ts_interval *a, const ts_interval *b) { return a->start <= b->end && b->start <= a->end; }

#define GREEDY_MAX 4096

static int by_start(const void *a, const void *b) {
    const ts_interval *x = *(ts_interval *const *)a, *y = *(ts_interval *const *)b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

typedef struct block {
    size_t offset, bytes;
} block;

/* returns a block to the free list (sorted by offset), merged with neighbours */
static void release(block *fl, int *nf, size_t offset, size_t bytes) {
    int i = 0;
    while (i < *nf && fl[i].offset < offset) i++;
    bool left = i > 0 && fl[i - 1].offset + fl[i - 1].bytes == offset;
    bool right = i < *nf && offset + bytes == fl[i].offset;
    if (left && right) {
        fl[i - 1].bytes += bytes + fl[i].bytes;
        memmove(fl + i, fl + i + 1, (size_t)(*nf - i - 1) * sizeof *fl);
        (*nf)--;
    } else if (left) {
        fl[i - 1].bytes += bytes;
    } else if (right) {
        fl[i].offset = offset, fl[i].bytes += bytes;
    } else {
        memmove(fl + i + 1, fl + i, (size_t)(*nf - i) * sizeof *fl);
        fl[i] = (block){offset, bytes};
        (*nf)++;
    }
}

/* min-heap of live intervals by end */
static void heap_push(ts_interval **h, int *n, ts_interval *v) {
    int i = (*n)++;
    while (i > 0 && h[(i - 1) / 2]->end > v->end) h[i] = h[(i - 1) / 2], i = (i - 1) / 2;
    h[i] = v;
}
static ts_interval *heap_pop(ts_interval **h, int *n) {
    ts_interval *top = h[0], *last = h[--(*n)];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1]->end < h[c]->end) c++;
        if (h[c]->end >= last->end) break;
        h[i] = h[c], i = c;
    }
    if (*n) h[i] = last;
    return top;
}

static size_t linear_scan(ts_interval **sorted, int n) {
    ts_interval **heap = ts_malloc((size_t)n * sizeof *heap);
    block *fl = ts_malloc(((size_t)n + 1) * sizeof *fl);
    if (!heap || !fl) {
        ts_free(heap), ts_free(fl);
        return (size_t)-1;
    }
    qsort(sorted, (size_t)n, sizeof *sorted, by_start);
    int nh = 0, nf = 0;
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        ts_interval *cur = sorted[i];
        while (nh && heap[0]->end < cur->start) {
            ts_interval *done = heap_pop(heap, &nh);
            release(fl, &nf, done->offset, done->bytes);
        }
        int best = -1;
        for (int k = 0; k < nf; k++)
            if (fl[k].bytes >= cur->bytes && (best < 0 || fl[k].bytes < fl[best].bytes)) best = k;
        if (best >= 0) {
            cur->offset = fl[best].offset;
            fl[best].offset += cur->bytes, fl[best].bytes -= cur->bytes;
            if (!fl[best].bytes) memmove(fl + best, fl + best + 1, (size_t)(nf - best - 1) * sizeof *fl), nf--;
        } else if (nf && fl[nf - 1].offset + fl[nf - 1].bytes == total) { /* grow the top free block */
            cur->offset = fl[nf - 1].offset;
            total = cur->offset + cur->bytes;
            nf--;
        } else {
            cur->offset = total;
            total += cur->bytes;
        }
        heap_push(heap, &nh, cur);
    }
    ts_free(heap), ts_free(fl);
    return total;
}

/* Returns the arena size; each interval gets an aligned offset. */
size_t ts_memplan(ts_interval *iv, int n) {
    if (n <= 0) return 0;
    ts_interval **sorted = ts_malloc((size_t)n * sizeof *sorted);
    if (!sorted) return (size_t)-1;
    for (int i = 0; i < n; i++) {
        iv[i].bytes = (iv[i].bytes + ALIGN - 1) / ALIGN * ALIGN;
        sorted[i] = &iv[i];
    }
    if (n > GREEDY_MAX) {
        size_t total = linear_scan(sorted, n);
        ts_free(sorted);
        return total;
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
