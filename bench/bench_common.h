/* bench_common.h -- what the C benchmarks share: a clock, a small RNG,
 * argument defaults and the tutorial MLP they all time. Header-only because
 * each benchmark is one program of one .c file. */
#ifndef TS_BENCH_COMMON_H
#define TS_BENCH_COMMON_H

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "tensorscope.h"

enum { PIXELS = 784, CLASSES = 10 };

static inline double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
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
