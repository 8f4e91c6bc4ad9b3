/* memplan.c -- places buffers in one arena so that buffers whose lifetimes
 * do not overlap share bytes. Up to GREEDY_MAX buffers: greedy by size,
 * lowest fitting offset (near-optimal for the chain-shaped graphs we see,
 * but quadratic). Beyond: a linear scan in time order with a best-fit free
 * list (O(n log n) plus the free list's length), so a graph of 100,000
 * tensors plans in milliseconds. */
#include "compile/program.h"

#include "backend/ew_math.h"

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

/* The interval whose cell interval i takes, through a chain (itself if none). */
static int cell_of(const ts_interval *iv, int i) {
    while (iv[i].same_as) i = iv[i].same_as - 1;
    return i;
}

static size_t place(ts_interval **sorted, int n);

/* Returns the arena size; each interval gets an aligned offset. One that
 * takes another's cell (same_as) gets that one's: the cell is planned over
 * both lifetimes. */
size_t ts_memplan(ts_interval *iv, int n) {
    if (n <= 0) return 0;
    ts_interval **sorted = ts_malloc((size_t)n * sizeof *sorted);
    int64_t *ends = ts_malloc((size_t)n * sizeof *ends);
    if (!sorted || !ends) {
        ts_free(sorted), ts_free(ends);
        return (size_t)-1;
    }
    int m = 0;
    for (int i = 0; i < n; i++) {
        iv[i].bytes = (iv[i].bytes + ALIGN - 1) / ALIGN * ALIGN;
        ends[i] = iv[i].end;
        if (!iv[i].same_as) sorted[m++] = &iv[i];
    }
    for (int i = 0; i < n; i++) {
        ts_interval *c = &iv[cell_of(iv, i)];
        if (c->end < ends[i]) c->end = ends[i];
    }
    size_t total = place(sorted, m);
    for (int i = 0; i < n; i++) {
        iv[i].offset = iv[cell_of(iv, i)].offset;
        iv[i].end = ends[i];
    }
    ts_free(sorted), ts_free(ends);
    return total;
}

/* The intervals' offsets, sorted's order their own; the arena's size. */
static size_t place(ts_interval **sorted, int n) {
    if (n > GREEDY_MAX) return linear_scan(sorted, n);
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
    return total;
}

/* Node b's compiled shape is node a's. */
static bool same_shape(const ts_prog *p, int a, int b) {
    const ts_shape *x = &p->shape[a], *y = &p->shape[b];
    return x->ndim == y->ndim && memcmp(x->d, y->d, (size_t)x->ndim * sizeof x->d[0]) == 0;
}

/* Node a, of n_in inputs, node i's value its input j and no other, where
 * neither rounds to 16 bits and both hold float32: what an output pass may
 * take over. */
static bool follows(const ts_graph *g, int i, int a, int n_in, int j) {
    const ts_tensor *t = g->t[a], *x = g->t[i];
    return t->n_in == n_in && t->in[j] == i && (n_in == 1 || t->in[1 - j] != i) && t->dtype == TS_F32 && x->dtype == TS_F32 &&
           !ts_dtype_is_half(x->grid) && !ts_dtype_is_half(t->grid);
}

ts_pass_kind ts_pass_takes(const ts_prog *p, const ts_graph *g, const ts_kernel_row *rows, int k, int took[2]) {
    took[0] = took[1] = -1;
    if (k + 1 >= p->n_order) return TS_PASS_NONE;
    int i = p->order[k], a = p->order[k + 1];
    const ts_kernel_row *row = &rows[g->t[i]->op];
    const ts_tensor *t = g->t[a];
    if (row->fuses_bias && t->op == TS_OP_ADD && follows(g, i, a, 2, 0)) { /* [M, N] + a row [N] or [1, N] */
        const ts_shape *o = &p->shape[a], *b = &p->shape[t->in[1]];
        int64_t N = o->d[o->ndim - 1];
        if (o->ndim == 2 && same_shape(p, i, a) && ((b->ndim == 1 && b->d[0] == N) || (b->ndim == 2 && b->d[0] == 1 && b->d[1] == N))) {
            took[0] = a;
            int u = k + 2 < p->n_order ? p->order[k + 2] : -1; /* the Linear's activation, of the sum alone */
            if (u >= 0 && row->fuses_bias_act && (g->t[u]->op == TS_OP_RELU || ts_ewu_kind(g->t[u]) != TS_EWU_NONE) && follows(g, a, u, 1, 0)) {
                took[1] = u;
                return TS_PASS_BIAS_ACT;
            }
            return TS_PASS_BIAS;
        }
    }
    if (row->fuses_add_relu && t->op == TS_OP_ADD && k + 2 < p->n_order && (follows(g, i, a, 2, 0) || follows(g, i, a, 2, 1))) {
        int r = p->order[k + 2]; /* the Conv's value either input of the Add, the residual the other, all of one shape */
        if (g->t[r]->op == TS_OP_RELU && follows(g, a, r, 1, 0) && same_shape(p, i, a) && same_shape(p, t->in[0], t->in[1])) {
            took[0] = a, took[1] = r;
            return TS_PASS_ADD_RELU;
        }
    }
    if ((row->fuses_relu && t->op == TS_OP_RELU) || (row->fuses_unary && ts_ewu_kind(t) != TS_EWU_NONE)) {
        if (follows(g, i, a, 1, 0)) {
            took[0] = a;
            return t->op == TS_OP_RELU ? TS_PASS_RELU : TS_PASS_UNARY;
        }
    }
    return TS_PASS_NONE;
}

bool ts_pass_over_input(const ts_prog *p, const ts_graph *g, const ts_kernel_row *rows, int k, ts_pass_kind kind, int op) {
    const ts_tensor *t = g->t[p->order[k]];
    if ((kind != TS_PASS_RELU && kind != TS_PASS_UNARY) || !rows[t->op].pass_over_in0 || t->n_in < 1) return false;
    const ts_tensor *x = g->t[t->in[0]];
    return x->dtype == TS_F32 && !ts_dtype_is_half(x->grid) && same_shape(p, x->id, op);
}
