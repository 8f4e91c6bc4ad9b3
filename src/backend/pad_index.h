/* pad_index.h -- the index math of Pad (TS_OP_PAD), written once for every
 * backend: the CPU's kernels (backend/cpu/kernels_tensor.c) call these in
 * their loops, the CUDA backend's (backend/cuda/kernels_tensor.cu) compile
 * them as __host__ __device__ functions.
 *
 * Along one dim of n input elements padded by `before` and `after`, output
 * position o reads input position src(u) of u = o - before, by the mode
 * (numpy's np.pad, which ONNX's Pad follows): constant: u if inside [0, n),
 * else none (the constant value); edge: u clamped to [0, n); wrap: u mod n;
 * reflect: u mirrored at 0 and n-1 without repeating the edge, period
 * 2(n-1) (n = 1: that element). Negative pads crop. The gradient of input
 * position i is the sum over the u in the output's range [lo, hi) = [-before,
 * n + after) with src(u) = i: at most two arithmetic progressions of u
 * (ts_pad_sources), so each input element gathers its own gradient, one
 * writer per element. */
#ifndef TS_PAD_INDEX_H
#define TS_PAD_INDEX_H

#include "graph/graph.h"

#ifdef __CUDACC__
#define TS_PAD static __host__ __device__ inline
#else
#define TS_PAD static inline
#endif

TS_PAD int64_t ts_pad_mod(int64_t a, int64_t p) {
    int64_t r = a % p;
    return r < 0 ? r + p : r;
}

/* The input position output position u (before subtracted) reads, or -1
 * for the constant. */
TS_PAD int64_t ts_pad_src(int mode, int64_t u, int64_t n) {
    if (u >= 0 && u < n) return u;
    if (mode == TS_PAD_CONSTANT) return -1;
    if (mode == TS_PAD_EDGE || n == 1) return u < 0 ? 0 : n - 1;
    if (mode == TS_PAD_WRAP) return ts_pad_mod(u, n);
    int64_t p = 2 * (n - 1), m = ts_pad_mod(u, p);
    return m < n ? m : p - m;
}

/* The u in [lo, hi) with src(u) = i: count[k] values first[k] + j * step,
 * k = 0, 1. */
typedef struct ts_pad_run {
    int64_t first[2], count[2], step;
} ts_pad_run;

/* the u in [lo, hi) congruent to r modulo p */
TS_PAD void ts_pad_progression(int64_t r, int64_t p, int64_t lo, int64_t hi, int64_t *first, int64_t *count) {
    *first = lo + ts_pad_mod(r - lo, p);
    *count = *first < hi ? (hi - 1 - *first) / p + 1 : 0;
}

TS_PAD ts_pad_run ts_pad_sources(int mode, int64_t i, int64_t n, int64_t lo, int64_t hi) {
    ts_pad_run s = {{i, 0}, {i >= lo && i < hi, 0}, 1};
    if (mode == TS_PAD_CONSTANT) return s;
    if (mode == TS_PAD_EDGE || n == 1) { /* a run of u: all u <= 0 for the first, all u >= n-1 for the last */
        int64_t a = i == 0 ? lo : i, b = i == n - 1 ? hi : i + 1;
        if (a < lo) a = lo;
        if (b > hi) b = hi;
        s.first[0] = a, s.count[0] = b > a ? b - a : 0;
        return s;
    }
    s.step = mode == TS_PAD_WRAP ? n : 2 * (n - 1);
    ts_pad_progression(i, s.step, lo, hi, &s.first[0], &s.count[0]);
    if (mode == TS_PAD_REFLECT && i != 0 && i != n - 1) ts_pad_progression(s.step - i, s.step, lo, hi, &s.first[1], &s.count[1]);
    return s;
}

/* The shape of one Pad node as its kernels need it: dims, pads (attr[d]
 * before, attr[TS_MAX_DIMS + d] after) and the output's row-major strides. */
typedef struct ts_pad_geom {
    int nd, mode;
    float value;
    int64_t n[TS_MAX_DIMS], out[TS_MAX_DIMS], before[TS_MAX_DIMS], ostride[TS_MAX_DIMS];
} ts_pad_geom;

TS_PAD ts_pad_geom ts_pad_geom_of(const ts_tensor *node, const ts_shape *in, const ts_shape *out) {
    ts_pad_geom g;
    g.nd = in->ndim, g.mode = node->iparam, g.value = node->fparam;
    int64_t st = 1;
    for (int d = in->ndim - 1; d >= 0; d--) {
        g.n[d] = in->d[d], g.out[d] = out->d[d], g.before[d] = node->attr[d];
        g.ostride[d] = st;
        st *= out->d[d];
    }
    return g;
}

/* Forward: out[o] for flat output index o. */
TS_PAD float ts_pad_value_at(const ts_pad_geom *g, const float *x, int64_t o) {
    int64_t src = 0, xs = 1;
    for (int d = g->nd - 1; d >= 0; d--) {
        int64_t od = o % g->out[d];
        o /= g->out[d];
        int64_t s = ts_pad_src(g->mode, od - g->before[d], g->n[d]);
        if (s < 0) return g->value;
        src += s * xs;
        xs *= g->n[d];
    }
    return x[src];
}

/* Backward: the gradient of flat input index i, gathered from dout. */
TS_PAD float ts_pad_grad_at(const ts_pad_geom *g, const float *dout, int64_t i) {
    ts_pad_run r[TS_MAX_DIMS];
    int64_t total = 1, c[TS_MAX_DIMS];
    for (int d = g->nd - 1; d >= 0; d--) {
        int64_t id = i % g->n[d];
        i /= g->n[d];
        r[d] = ts_pad_sources(g->mode, id, g->n[d], -g->before[d], g->out[d] - g->before[d]);
        c[d] = r[d].count[0] + r[d].count[1];
        total *= c[d];
    }
    float sum = 0.0f;
    for (int64_t t = 0; t < total; t++) { /* every combination of each dim's sources */
        int64_t rest = t, off = 0;
        for (int d = g->nd - 1; d >= 0; d--) {
            int64_t k = rest % c[d];
            rest /= c[d];
            int64_t u = k < r[d].count[0] ? r[d].first[0] + k * r[d].step : r[d].first[1] + (k - r[d].count[0]) * r[d].step;
            off += (u + g->before[d]) * g->ostride[d];
        }
        sum += dout[off];
    }
    return sum;
}

#endif
