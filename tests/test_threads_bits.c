/* test_threads_bits.c -- what the CPU splits over its threads gives the
 * same bits on 1 thread and on 2, and the same bits run after run
 * (docs/backend.md, "Threads").
 *
 * The pool: every slice of a job runs exactly once with the bounds a
 * job of that size always gets (whichever thread claims it), and
 * thousands of jobs in a row each see all their slices done before
 * ts_pool_for returns (the claim of a late worker never reaches the next
 * job). Items posted to it (ts_pool_post) run once each, a worker taking
 * one no one drains, jobs and drains coming between them.
 *
 * The kernels split over rows: layer norm forward and backward (its
 * weight and bias gradients summed over the rows),
 * GELU forward and backward, a bias Add's backward (the bias gradient's
 * sums over the rows): on a pool of 2 the bits of a pool of 1, and the
 * sums over the rows the bits of ts_sum_rows's fixed parts (each part's
 * rows added in order, the parts added in order).
 *
 * The model: a character GPT large enough that every op splits over 2
 * threads, trained with AdamW for a few steps. Twice on 2 threads: every
 * loss, every first gradient and every parameter the same bits. On 1
 * thread against 2: OpenBLAS rounds a product split into slices of rows or
 * columns differently from the whole (its kernels' blocking follows the
 * shape it is given), so there the losses agree to 2e-6 relative, the
 * first gradients to 1e-5 of each tensor's largest and the parameters to
 * a hundredth of the learning rate (the difference of a few roundings, not
 * of an algorithm). */
#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/kernels_tensor.h"
#include "backend/ew_math.h"
#include "backend/pool.h"

/* ---- the pool */

enum { MAX_SLICES = 2 };

typedef struct slice_log {
    int64_t n;
    _Atomic int runs[MAX_SLICES];
    int64_t begin[MAX_SLICES], end[MAX_SLICES];
    _Atomic int64_t sum;
} slice_log;

static void log_slice(void *ctx, int64_t b, int64_t e) {
    slice_log *l = ctx;
    int64_t s = 0;
    for (int64_t i = b; i < e; i++) s += i;
    atomic_fetch_add(&l->sum, s);
    int k = b == 0 ? 0 : 1; /* a pool of 2: the first slice or the second */
    atomic_fetch_add(&l->runs[k], 1);
    l->begin[k] = b, l->end[k] = e;
}

static void pool_cases(void) {
    ts_pool *p = NULL;
    CHECK_OK(ts_pool_new(&p, 2), "a pool of 2 threads");
    if (!p) return;
    slice_log l = {.n = 1001};
    ts_pool_for(p, l.n, 10, log_slice, &l);
    CHECK(atomic_load(&l.runs[0]) == 1 && atomic_load(&l.runs[1]) == 1, "each of the 2 slices ran once (%d, %d)", atomic_load(&l.runs[0]),
          atomic_load(&l.runs[1]));
    CHECK(l.begin[0] == 0 && l.end[0] == 500 && l.begin[1] == 500 && l.end[1] == 1001, "the slices' bounds: [0, 500) and [500, 1001)");
    CHECK(atomic_load(&l.sum) == l.n * (l.n - 1) / 2, "every item once");
    int bad = 0;
    for (int job = 0; job < 20000; job++) { /* small jobs back to back: a late worker meets a job already done */
        slice_log k = {.n = 2 + job % 7};
        ts_pool_for(p, k.n, 1, log_slice, &k);
        bad += atomic_load(&k.sum) != k.n * (k.n - 1) / 2 || atomic_load(&k.runs[0]) != 1 || atomic_load(&k.runs[1]) != 1;
    }
    CHECK(bad == 0, "20000 jobs in a row: every slice of each done once before it returned (%d jobs wrong)", bad);
    ts_pool_free(p);
}

/* Items (ts_pool_post): each posted item runs once, on an idle worker or
 * on the caller that drains them, whatever jobs come between; an item
 * posted and not drained is taken by a worker on its own. */
enum { ITEMS = 3000 };
typedef struct item_log {
    _Atomic int runs[ITEMS];
    _Atomic int on_worker;
} item_log;

static void log_item(void *ctx, uint64_t item, int thread) {
    item_log *l = ctx;
    if (thread > 0) atomic_fetch_add(&l->on_worker, 1); /* first: a waiter sees the run after it */
    atomic_fetch_add(&l->runs[item], 1);
}

static void sum_slice(void *ctx, int64_t b, int64_t e) {
    int64_t s = 0;
    for (int64_t i = b; i < e; i++) s += i;
    atomic_fetch_add((_Atomic int64_t *)ctx, s);
}

static void item_cases(void) {
    ts_pool *p = NULL;
    CHECK_OK(ts_pool_new(&p, 3), "a pool of 3 threads");
    if (!p) return;
    item_log *l = calloc(1, sizeof *l);
    CHECK(ts_pool_posted(p) == 0, "a new pool has posted no item");
    ts_pool_post(p, log_item, l); /* a worker takes it: wait for that, up to a minute */
    for (int k = 0; k < 60000000 && atomic_load(&l->runs[0]) == 0; k++)
        if (k % 64 == 0) sched_yield();
    CHECK(atomic_load(&l->runs[0]) == 1 && atomic_load(&l->on_worker) == 1, "an item posted and not drained: a worker ran it (runs %d, on a worker %d)",
          atomic_load(&l->runs[0]), atomic_load(&l->on_worker));
    ts_pool_drain(p);
    int bad = 0;
    for (int round = 0; ts_pool_posted(p) < ITEMS; round++) { /* items posted a few at a time, jobs and drains between */
        for (int k = 0; k <= round % 5 && ts_pool_posted(p) < ITEMS; k++) ts_pool_post(p, log_item, l);
        int64_t n = 2 + round % 7;
        _Atomic int64_t sum = 0;
        ts_pool_for(p, n, 1, sum_slice, (void *)&sum);
        bad += atomic_load(&sum) != n * (n - 1) / 2;
        if (round % 3 == 2) ts_pool_drain(p);
    }
    ts_pool_drain(p);
    int once = 0;
    for (int i = 0; i < ITEMS; i++) once += atomic_load(&l->runs[i]) == 1;
    CHECK(once == ITEMS && bad == 0, "%d items posted between %s jobs: each ran once (%d did), every job whole", ITEMS, "ts_pool_for", once);
    ts_pool_free(p);
    free(l);
}

/* ---- the kernels */

static void fill(float *x, int64_t n, unsigned seed) {
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = ((float)((seed >> 8) & 0xffff) / 16384.0f - 2.0f) * 1.1f; /* not a multiple of a power of 2: sums round */
    }
}

static bool same(const float *a, const float *b, int64_t n) { return memcmp(a, b, (size_t)n * sizeof *a) == 0; }

enum { ROWS = 2048, D = 128, WIDE = 512 };

/* out[j] += the sum over the rows of [ROWS, n] the way kernels.h's
 * ts_sum_rows says: each of TS_SUM_PARTS fixed parts of the rows summed
 * in order from 0, the parts added to out in order. x and stats set: of
 * dy * (x - mean) * rstd (layer norm's weight gradient), else of dy. */
static void sum_parts_ref(float *out, int64_t n, bool xhat, const float *x, const float *stats, const float *dy) {
    for (int64_t j = 0; j < n; j++) {
        float s = out[j];
        for (int k = 0; k < TS_SUM_PARTS; k++) {
            float part = 0.0f;
            for (int64_t r = ROWS * k / TS_SUM_PARTS; r < ROWS * (k + 1) / TS_SUM_PARTS; r++)
                part += xhat ? dy[r * n + j] * ((x[r * n + j] - stats[2 * r]) * stats[2 * r + 1]) : dy[r * n + j];
            s += part;
        }
        out[j] = s;
    }
}

static void kernel_cases(void) {
    ts_pool *p1 = NULL, *p2 = NULL;
    CHECK_OK(ts_pool_new(&p1, 1), "a pool of 1 thread");
    CHECK_OK(ts_pool_new(&p2, 2), "a pool of 2 threads");
    float *x = malloc(ROWS * WIDE * sizeof *x), *dy = malloc(ROWS * WIDE * sizeof *dy), *w = malloc(D * sizeof *w), *b = malloc(D * sizeof *b);
    float *y[2], *st[2], *dx[2], *dw[2], *db[2];
    for (int k = 0; k < 2; k++) {
        y[k] = malloc(ROWS * WIDE * sizeof(float)), st[k] = malloc(2 * ROWS * sizeof(float)), dx[k] = malloc(ROWS * WIDE * sizeof(float));
        dw[k] = malloc(WIDE * sizeof(float)), db[k] = malloc(WIDE * sizeof(float));
    }
    if (!p1 || !p2 || !x || !dy || !w || !b || !y[1] || !st[1] || !dx[1] || !dw[1] || !db[1]) {
        CHECK(0, "memory for the kernels' cases");
        return;
    }
    fill(x, ROWS * WIDE, 1), fill(dy, ROWS * WIDE, 2), fill(w, D, 3), fill(b, D, 4);
    ts_pool *pools[2] = {p1, p2};
    /* layer norm over [ROWS, D] */
    for (int k = 0; k < 2; k++) {
        ts_layer_norm_forward(pools[k], y[k], st[k], x, w, b, ROWS, D, 1e-5f, NULL);
        memset(dx[k], 0, ROWS * D * sizeof(float));
        fill(dw[k], D, 5), fill(db[k], D, 6); /* the gradients add to what is there */
        ts_layer_norm_backward(pools[k], dx[k], dw[k], db[k], dy, x, st[k], w, ROWS, D);
    }
    CHECK(same(y[0], y[1], ROWS * D) && same(st[0], st[1], 2 * ROWS), "layer norm forward: the same bits on 1 and 2 threads");
    CHECK(same(dx[0], dx[1], ROWS * D), "layer norm's input gradient: the same bits on 1 and 2 threads");
    CHECK(same(dw[0], dw[1], D) && same(db[0], db[1], D), "layer norm's weight and bias gradients: the same bits on 1 and 2 threads");
    float rw[D], rb[D];
    fill(rw, D, 5), fill(rb, D, 6);
    sum_parts_ref(rw, D, true, x, st[0], dy);
    sum_parts_ref(rb, D, false, x, st[0], dy);
    CHECK(same(rw, dw[1], D) && same(rb, db[1], D), "layer norm's weight and bias gradients: the bits of the rows' fixed parts added in order");
    /* GELU over [ROWS, WIDE] */
    for (int k = 0; k < 2; k++) {
        ts_ew_unary_forward(pools[k], TS_EWU_GELU, y[k], x, 0.0f, 0.0f, ROWS * WIDE);
        memset(dx[k], 0, ROWS * WIDE * sizeof(float));
        ts_ew_unary_backward(pools[k], TS_EWU_GELU, dx[k], dy, x, 0.0f, 0.0f, ROWS * WIDE, false);
    }
    CHECK(same(y[0], y[1], ROWS * WIDE) && same(dx[0], dx[1], ROWS * WIDE), "GELU forward and backward: the same bits on 1 and 2 threads");
    /* a bias Add's backward over [ROWS, n]: the input's gradient stored or
     * added to, the bias's summed over the rows */
    for (int64_t n = D; n <= WIDE; n *= 4)
        for (unsigned store = 0; store < 4; store++) {
            for (int k = 0; k < 2; k++) {
                fill(dx[k], ROWS * n, 7), fill(db[k], n, 8);
                ts_binary_backward_store(pools[k], TS_BIN_ADD, dx[k], db[k], dy, x, b, ROWS * n, n, store);
            }
            float ref[WIDE];
            fill(ref, n, 8);
            if (store & 2u) memset(ref, 0, sizeof ref);
            sum_parts_ref(ref, n, false, NULL, NULL, dy);
            CHECK(same(dx[0], dx[1], ROWS * n) && same(db[0], db[1], n) && same(ref, db[1], n),
                  "a bias Add's backward over %lld columns (store %u): the same bits on 1 and 2 threads, the bias's those of the rows' parts",
                  (long long)n, store);
        }
    for (int k = 0; k < 2; k++) free(y[k]), free(st[k]), free(dx[k]), free(dw[k]), free(db[k]);
    free(x), free(dy), free(w), free(b);
    ts_pool_free(p1), ts_pool_free(p2);
}

/* ---- the model */

enum { STEPS = 3 };
#define LR 1e-3f

static const ts_gpt_config cfg = {29, 32, 2, 2, 64, 32}; /* 1024 rows of 64 channels; the MLP's 256 */

enum { MAX_PARAMS = 64 };

typedef struct trained {
    ts_graph *g;
    float loss[STEPS];
    float *grad[MAX_PARAMS]; /* each parameter's first gradient, in the graph's order */
    int n_grads;
    bool ok;
} trained;

/* the Param tensors of g in its order, at most MAX_PARAMS */
static int params_of(ts_graph *g, ts_tensor **out) {
    int n = 0;
    for (size_t i = 0; i < ts_graph_tensor_count(g) && n < MAX_PARAMS; i++)
        if (strcmp(ts_tensor_op(ts_graph_tensor_at(g, i)), "Param") == 0) out[n++] = ts_graph_tensor_at(g, i);
    return n;
}

static int64_t numel(const ts_array *a) {
    int64_t n = 1;
    for (int d = 0; d < a->ndim; d++) n *= a->shape[d];
    return n;
}

static trained train(int threads) {
    trained r = {.g = ts_graph_new(3)};
    ts_gpt gpt;
    ts_status st = ts_gpt_build(r.g, &cfg, &gpt);
    ts_options *o = ts_options_new();
    ts_options_set_threads(o, threads);
    ts_options_anchor(o, "loss", "loss", TS_OUTPUT_ALL, 0);
    ts_tensor *ps[MAX_PARAMS];
    r.n_grads = st ? 0 : params_of(r.g, ps);
    for (int k = 0; k < r.n_grads; k++) {
        char name[300];
        snprintf(name, sizeof name, "Gradient___%s", ts_tensor_name(ps[k]));
        ts_options_anchor(o, ts_tensor_name(ps[k]), name, TS_OUTPUT_FINAL, 0);
    }
    ts_model *m = NULL;
    if (!st) st = ts_model_training(&m, r.g, gpt.loss, o, ts_adamw(LR, 0.01f));
    if (!st) st = ts_model_compile(m);
    CHECK_OK(st, "the GPT compiled for %d thread(s)", threads);
    int64_t n = cfg.batch * cfg.block_size;
    int32_t *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    for (int s = 0; s < STEPS && !st; s++) {
        for (int64_t i = 0; i < n; i++) {
            x[i] = (int32_t)((i * 7 + s * 13) % cfg.vocab);
            y[i] = (int32_t)((i * 11 + s * 5 + 1) % cfg.vocab);
        }
        const char *names[2] = {"tokens", "targets"};
        ts_array in[2] = {ts_array_i32(x, 2, (int64_t[]){cfg.batch, cfg.block_size}), ts_array_i32(y, 2, (int64_t[]){cfg.batch, cfg.block_size})};
        ts_array a;
        st = ts_model_run(m, names, in, 2);
        if (!st) st = ts_model_anchored(m, "loss", &a);
        if (!st) r.loss[s] = ((const float *)a.data)[0];
        for (int k = 0; k < r.n_grads && !st && s == 0; k++) {
            ts_array ga;
            st = ts_model_anchored(m, ts_tensor_name(ps[k]), &ga);
            if (!st && (r.grad[k] = malloc((size_t)numel(&ga) * sizeof(float)))) memcpy(r.grad[k], ga.data, (size_t)numel(&ga) * sizeof(float));
        }
        CHECK_OK(st, "step %d on %d thread(s)", s + 1, threads);
    }
    free(x), free(y);
    ts_model_free(m);
    ts_options_free(o);
    r.ok = !st;
    return r;
}

static bool close_to(float a, float b, double rtol) { return fabs((double)a - b) <= rtol * fabs((double)b) + 1e-7; }

/* Compares two trainings: bit for bit (exact), or each first gradient
 * within rtol of its tensor's largest value and each parameter within a
 * hundredth of the learning rate (AdamW's step m / sqrt(v) turns the
 * rounding of a gradient near 0 into a step of up to its full size).
 * Returns the number of parameters that differ. */
static int compare(const trained *a, const trained *b, bool exact, double rtol, const char *what) {
    ts_tensor *pa[MAX_PARAMS], *pb[MAX_PARAMS];
    int params = params_of(a->g, pa), differ = 0;
    CHECK(params > 20 && params == params_of(b->g, pb) && a->n_grads == params && b->n_grads == params, "%s: %d parameters on each side", what,
          params);
    for (int s = 0; s < STEPS; s++)
        CHECK(exact ? memcmp(&a->loss[s], &b->loss[s], sizeof(float)) == 0 : close_to(a->loss[s], b->loss[s], 2e-6),
              "%s: step %d's loss %.9g and %.9g", what, s + 1, (double)a->loss[s], (double)b->loss[s]);
    for (int k = 0; k < params && k < a->n_grads && k < b->n_grads; k++) {
        ts_array va, vb;
        if (ts_tensor_info(pa[k], &va) || ts_tensor_info(pb[k], &vb) || !va.data || !vb.data || !a->grad[k] || !b->grad[k]) {
            differ++;
            continue;
        }
        int64_t n = numel(&va);
        const float *x = va.data, *y = vb.data, *gx = a->grad[k], *gy = b->grad[k];
        double gmax = 0, pmax = 0, gdiff = 0, pdiff = 0; /* each tensor's differences against its largest value */
        for (int64_t i = 0; i < n; i++) {
            gmax = fmax(gmax, fabs((double)gy[i])), pmax = fmax(pmax, fabs((double)y[i]));
            gdiff = fmax(gdiff, fabs((double)gx[i] - gy[i])), pdiff = fmax(pdiff, fabs((double)x[i] - y[i]));
        }
        bool ok = exact ? memcmp(x, y, (size_t)n * sizeof *x) == 0 && memcmp(gx, gy, (size_t)n * sizeof *x) == 0
                        : gdiff <= rtol * gmax && pdiff <= 1e-2 * LR;
        if (!ok) {
            differ++;
            printf("     %s: %s differs (gradient by %.3g of %.3g, parameter by %.3g of %.3g)\n", what, ts_tensor_name(pa[k]), gdiff, gmax, pdiff,
                   pmax);
        }
    }
    return differ;
}

int main(void) {
    pool_cases();
    item_cases();
    kernel_cases();
    trained one = train(1), two = train(2), again = train(2);
    if (one.ok && two.ok && again.ok) {
        int d = compare(&two, &again, true, 0, "2 threads twice");
        CHECK(d == 0, "2 threads twice: every first gradient and every parameter after %d AdamW steps the same bits (%d differ)", STEPS, d);
        d = compare(&one, &two, false, 1e-5, "1 thread and 2");
        CHECK(d == 0, "1 thread and 2: every first gradient within 1e-5 of its largest, every parameter after %d AdamW steps within lr / 100 (%d differ)",
              STEPS, d);
    }
    trained *all[3] = {&one, &two, &again};
    for (int t = 0; t < 3; t++) {
        for (int k = 0; k < MAX_PARAMS; k++) free(all[t]->grad[k]);
        ts_graph_free(all[t]->g);
    }
    return check_summary("test_threads_bits");
}
