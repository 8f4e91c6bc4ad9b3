/* bench_common.h -- what the C benchmarks share: a clock, a small RNG,
 * argument defaults and the tutorial MLP they all time. Header-only because
 * each benchmark is one program of one .c file. */
#ifndef TS_BENCH_COMMON_H
#define TS_BENCH_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tensorscope.h"

enum { PIXELS = 784, CLASSES = 10 };

/* Seconds: wall time, or with TS_BENCH_CLOCK=cpu the CPU time of the
 * whole process (every thread): on a machine other processes load, what
 * a side costs without the time it waits for a core (cache and frequency
 * effects remain). */
static inline double now_s(void)
{
    static int cpu = -1;
    if (cpu < 0) {
        const char *c = getenv("TS_BENCH_CLOCK");
        cpu = c && strcmp(c, "cpu") == 0;
    }
    struct timespec t;
    clock_gettime(cpu ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static inline long arg_or(int argc, char **argv, int i, long def)
{
    return argc > i ? strtol(argv[i], NULL, 10) : def;
}

/* x ~ U(-1,1) [nx] and labels 0..9 [ny] from a fixed seed, x first: the
 * random inputs every benchmark trains on. Returns 0 when out of memory
 * (the caller frees both). */
static inline int bench_random_data(size_t nx, size_t ny, float **x, int32_t **y)
{
    *x = malloc(sizeof(float) * nx);
    *y = malloc(sizeof(int32_t) * ny);
    if (!*x || !*y)
        return 0;
    uint64_t seed = 0x9E3779B97F4A7C15u;
    for (size_t i = 0; i < nx; i++)
        (*x)[i] = (float)(xorshift(&seed) >> 11) * (2.0f / 9007199254740992.0f) - 1.0f;
    for (size_t i = 0; i < ny; i++)
        (*y)[i] = (int32_t)(xorshift(&seed) % CLASSES);
    return 1;
}

/* The pool of `pool` random batches the MLP benchmarks cycle through step
 * by step, as bench/torch_mlp.py makes it (seeded; x ~ U(-1,1) as
 * [pool*batch, 784], labels 0..9). Returns 0 when out of memory. */
static inline int bench_data_pool(long batch, int pool, float **x, int32_t **y)
{
    return bench_random_data((size_t)batch * PIXELS * (size_t)pool, (size_t)batch * (size_t)pool, x, y);
}

/* Trains m (inputs "x" [batch*A,1,28,28] and "labels") for warmup + steps
 * runs through a pool of `pool` random batches, and returns the seconds the
 * timed runs took (the metrics registry is reset when they start), or -1
 * when out of memory or a run fails (ts_last_error says why). */
static inline double bench_timed_runs(ts_model *m, long batch, int pool, long warmup, long steps)
{
    float *x;
    int32_t *y;
    if (!bench_data_pool(batch, pool, &x, &y)) {
        free(x);
        free(y);
        return -1;
    }
    const char *names[2] = {"x", "labels"};
    int64_t xs[] = {batch, 1, 28, 28}, ys[] = {batch};
    double t0 = 0;
    for (long s = 0; s < warmup + steps; s++) {
        if (s == warmup) {
            ts_metrics_reset();
            t0 = now_s();
        }
        size_t k = (size_t)s % (size_t)pool;
        ts_array in[2] = {ts_array_f32(x + k * (size_t)batch * PIXELS, 4, xs), ts_array_i32(y + k * (size_t)batch, 1, ys)};
        if (ts_model_run(m, names, in, 2)) {
            t0 = -1;
            break;
        }
    }
    double secs = t0 < 0 ? -1 : now_s() - t0;
    free(x);
    free(y);
    return secs;
}

/* The precision a benchmark trains in (docs/precision.md):
 * $TS_BENCH_PRECISION, f32 (also when unset), bf16 or f16 (with its
 * default dynamic loss scaling), set on o; *name gets the dtype's name for
 * the result line. Returns 0 with the reason on stderr for another name. */
static inline int bench_precision(ts_options *o, const char **name)
{
    static const ts_dtype known[] = {TS_F32, TS_BF16, TS_F16};
    const char *want = getenv("TS_BENCH_PRECISION");
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (want && *want ? strcmp(want, ts_dtype_name(known[i])) == 0 : known[i] == TS_F32) {
            *name = ts_dtype_name(known[i]);
            if (ts_options_set_precision(o, known[i]) == TS_OK)
                return 1;
            fprintf(stderr, "TS_BENCH_PRECISION=%s: %s\n", *name, ts_last_error());
            return 0;
        }
    fprintf(stderr, "TS_BENCH_PRECISION=%s: not a precision; use f32, bf16 or f16\n", want);
    return 0;
}

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v[0..n) and returns its median. */
static inline double median(double *v, long n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The overhead line of an interleaved comparison: ratio[r] = cand / base
 * seconds of pair r (sorted here), best_base and best_cand each side's best
 * seconds per step. Prints
 *   overhead pct=.. best_pct=.. min_pct=.. max_pct=.. q1_pct=.. q3_pct=.. ci_lo_pct=.. ci_hi_pct=..
 * pct: the median pair's overhead, the verdict's figure; q1..q3 the middle
 * half of the pairs; ci_lo..ci_hi a 95% confidence interval of the median
 * (the order statistics at ranks n/2 -+ 0.98 sqrt(n), distribution-free). A pair is a
 * short stretch of each side back to back, so many pairs share the machine's
 * slow and fast moments evenly; the interval says how sure the median is. */
static inline void overhead_report(double *ratio, long n, double best_base, double best_cand)
{
    double med = median(ratio, n); /* sorts */
    /* 1-based ranks floor(n/2 - 0.98 sqrt(n)) and ceil(1 + n/2 + 0.98 sqrt(n)) */
    double h = 0.98 * __builtin_sqrt((double)n);
    long lo = (long)__builtin_floor((double)n / 2 - h) - 1, hi = (long)__builtin_ceil(1 + (double)n / 2 + h) - 1;
    lo = lo < 0 ? 0 : lo;
    hi = hi > n - 1 ? n - 1 : hi;
#define TS_PCT(r) (((r) - 1) * 100)
    printf("overhead pct=%.2f best_pct=%.2f min_pct=%.2f max_pct=%.2f q1_pct=%.2f q3_pct=%.2f ci_lo_pct=%.2f ci_hi_pct=%.2f\n",
           TS_PCT(med), TS_PCT(best_cand / best_base), TS_PCT(ratio[0]), TS_PCT(ratio[n - 1]), TS_PCT(ratio[n / 4]),
           TS_PCT(ratio[(3 * n) / 4]), TS_PCT(ratio[lo]), TS_PCT(ratio[hi]));
#undef TS_PCT
}

/* Watches with TS_WATCH_STATS every run what PyTorch's hooks see: every
 * activation (each op's output but inputs, constants, parameters and
 * buffers; with skip_prebias, not the product inside a linear layer before
 * its bias, which nn.Linear's hook does not see either), every parameter's
 * gradient and its update. Each pattern is a glob ("[c]rest") that matches
 * exactly one name. */
static inline ts_status bench_watch_all(ts_graph *g, ts_options *o, int skip_prebias)
{
    ts_status st = TS_OK;
    for (size_t i = 0; i < ts_graph_tensor_count(g) && !st; i++) {
        ts_tensor *t = ts_graph_tensor_at(g, i);
        const char *name = ts_tensor_name(t), *op = ts_tensor_op(t), *slash = strrchr(name, '/');
        char pat[512];
        if (skip_prebias && strcmp(op, "MatMul") == 0 && slash) { /* `<layer>/MatMul:0` of a layer with `<layer>.bias` */
            snprintf(pat, sizeof pat, "%.*s.bias", (int)(slash - name), name);
            if (ts_graph_find(g, pat))
                continue;
        }
        if (strcmp(op, "Param") == 0) {
            snprintf(pat, sizeof pat, "[G]radient___%s", name);
            st = ts_options_watch(o, pat, TS_WATCH_STATS, 1);
            snprintf(pat, sizeof pat, "[U]pdatedVar___%s", name);
            if (!st)
                st = ts_options_watch(o, pat, TS_WATCH_STATS, 1);
        } else if (strcmp(op, "Input") && strcmp(op, "Const") && strcmp(op, "Buffer")) {
            snprintf(pat, sizeof pat, "[%c]%s", name[0], name + 1);
            st = ts_options_watch(o, pat, TS_WATCH_STATS, 1);
        }
    }
    return st;
}

/* The tutorial MLP (784-320-100-10) at micro-batch `batch` into a new graph;
 * *loss gets the loss tensor, named "loss". Check ts_graph_status(g). */
static inline ts_graph *bench_mlp_graph(long batch, ts_tensor **loss)
{
    ts_graph *g = ts_graph_new(0);
    int64_t xs[] = {batch, 1, 28, 28}, ys[] = {batch};
    ts_tensor *x = ts_input(g, "x", TS_F32, 4, xs);
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, ys);
    ts_tensor *h = ts_flatten(g, x, 1);
    h = ts_relu(g, ts_linear(g, h, 320, "fc1"));
    h = ts_relu(g, ts_linear(g, h, 100, "fc2"));
    h = ts_log_softmax(g, ts_linear(g, h, CLASSES, "fc3"), 1);
    *loss = ts_nll_loss(g, h, y);
    ts_tensor_set_name(*loss, "loss");
    return g;
}

#endif
