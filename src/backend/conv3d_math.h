/* conv3d_math.h -- the 3-D convolution, one output element at a time,
 * written once for every backend: the CPU's kernels (backend/cpu/cnn.c)
 * loop over these functions, the CUDA backend's (cuda/kernels_cnn.cu)
 * compile them as __host__ __device__ functions, one thread an element.
 * Each element is a gather (no two threads write one place), summed in
 * double. ConvTranspose3d is the convolution read the other way round: its
 * forward pass is the convolution's input gradient, its input gradient the
 * convolution's forward pass (ts_conv3d_geom describes that convolution).
 * Conv3d and ConvTranspose3d hold their geometry in cnn_ops.h's C3_*
 * attributes. */
#ifndef TS_CONV3D_MATH_H
#define TS_CONV3D_MATH_H

#include "graph/cnn_ops.h"

#ifdef __CUDACC__
#define TS_C3 static __host__ __device__ inline
#else
#define TS_C3 static inline
#endif

/* The convolution x [N,C,in] (*) w [OC,C/G,k] -> y [N,OC,out], `pad` the
 * padding before each axis. */
typedef struct ts_conv3d_geom {
    int64_t N, C, OC, G;
    int64_t in[3], out[3], k[3], stride[3], dil[3], pad[3];
} ts_conv3d_geom;

/* The convolution of a Conv3d node (x, w, its output y) or of a
 * ConvTranspose3d node (x is that convolution's output, y its input). */
TS_C3 ts_conv3d_geom ts_conv3d_geom_of(const int64_t *attr, const ts_shape *x, const ts_shape *w, const ts_shape *y, bool transposed) {
    const ts_shape *ci = transposed ? y : x, *co = transposed ? x : y;
    ts_conv3d_geom g;
    g.N = x->d[0], g.C = ci->d[1], g.OC = co->d[1], g.G = attr[C3_GROUPS];
    for (int i = 0; i < 3; i++) {
        g.in[i] = ci->d[2 + i], g.out[i] = co->d[2 + i], g.k[i] = w->d[2 + i];
        g.stride[i] = attr[C3_S + i], g.dil[i] = attr[C3_D + i], g.pad[i] = attr[C3_P0 + i];
    }
    return g;
}

/* y[i] without the bias: i over [N, OC, out] */
TS_C3 float ts_conv3d_y_at(const ts_conv3d_geom *g, const float *x, const float *w, int64_t i) {
    int64_t o[3], r = i;
    for (int a = 2; a >= 0; a--) o[a] = r % g->out[a], r /= g->out[a];
    int64_t oc = r % g->OC, n = r / g->OC, Cg = g->C / g->G, c0 = oc / (g->OC / g->G) * Cg;
    double acc = 0;
    for (int64_t c = 0; c < Cg; c++)
        for (int64_t kd = 0; kd < g->k[0]; kd++) {
            int64_t id = o[0] * g->stride[0] - g->pad[0] + kd * g->dil[0];
            if (id < 0 || id >= g->in[0]) continue;
            for (int64_t kh = 0; kh < g->k[1]; kh++) {
                int64_t ih = o[1] * g->stride[1] - g->pad[1] + kh * g->dil[1];
                if (ih < 0 || ih >= g->in[1]) continue;
                const float *xr = x + (((n * g->C + c0 + c) * g->in[0] + id) * g->in[1] + ih) * g->in[2];
                const float *wr = w + (((oc * Cg + c) * g->k[0] + kd) * g->k[1] + kh) * g->k[2];
                for (int64_t kw = 0; kw < g->k[2]; kw++) {
                    int64_t iw = o[2] * g->stride[2] - g->pad[2] + kw * g->dil[2];
                    if (iw >= 0 && iw < g->in[2]) acc += (double)xr[iw] * wr[kw];
                }
            }
        }
    return (float)acc;
}

/* The taps of an axis that reach input position `at` from an output
 * position: *o the output position of tap t, or false */
TS_C3 bool ts_conv3d_tap(const ts_conv3d_geom *g, int a, int64_t at, int64_t t, int64_t *o) {
    int64_t p = at + g->pad[a] - t * g->dil[a];
    if (p < 0 || p % g->stride[a]) return false;
    *o = p / g->stride[a];
    return *o < g->out[a];
}

/* the convolution's input gradient dx[i] from dy: i over [N, C, in] */
TS_C3 float ts_conv3d_dx_at(const ts_conv3d_geom *g, const float *dy, const float *w, int64_t i) {
    int64_t p[3], r = i;
    for (int a = 2; a >= 0; a--) p[a] = r % g->in[a], r /= g->in[a];
    int64_t c = r % g->C, n = r / g->C, Cg = g->C / g->G, OCg = g->OC / g->G, oc0 = c / Cg * OCg;
    double acc = 0;
    for (int64_t oc = oc0; oc < oc0 + OCg; oc++)
        for (int64_t kd = 0, od; kd < g->k[0]; kd++) {
            if (!ts_conv3d_tap(g, 0, p[0], kd, &od)) continue;
            for (int64_t kh = 0, oh; kh < g->k[1]; kh++) {
                if (!ts_conv3d_tap(g, 1, p[1], kh, &oh)) continue;
                const float *dyr = dy + (((n * g->OC + oc) * g->out[0] + od) * g->out[1] + oh) * g->out[2];
                const float *wr = w + (((oc * Cg + c % Cg) * g->k[0] + kd) * g->k[1] + kh) * g->k[2];
                for (int64_t kw = 0, ow; kw < g->k[2]; kw++)
                    if (ts_conv3d_tap(g, 2, p[2], kw, &ow)) acc += (double)dyr[ow] * wr[kw];
            }
        }
    return (float)acc;
}

/* the weight gradient dw[i] from dy and x: i over [OC, C/G, k] */
TS_C3 float ts_conv3d_dw_at(const ts_conv3d_geom *g, const float *dy, const float *x, int64_t i) {
    int64_t t[3], r = i, Cg = g->C / g->G;
    for (int a = 2; a >= 0; a--) t[a] = r % g->k[a], r /= g->k[a];
    int64_t c = r % Cg, oc = r / Cg, cx = oc / (g->OC / g->G) * Cg + c;
    double acc = 0;
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t od = 0; od < g->out[0]; od++) {
            int64_t id = od * g->stride[0] - g->pad[0] + t[0] * g->dil[0];
            if (id < 0 || id >= g->in[0]) continue;
            for (int64_t oh = 0; oh < g->out[1]; oh++) {
                int64_t ih = oh * g->stride[1] - g->pad[1] + t[1] * g->dil[1];
                if (ih < 0 || ih >= g->in[1]) continue;
                const float *dyr = dy + (((n * g->OC + oc) * g->out[0] + od) * g->out[1] + oh) * g->out[2];
                const float *xr = x + (((n * g->C + cx) * g->in[0] + id) * g->in[1] + ih) * g->in[2];
                for (int64_t ow = 0; ow < g->out[2]; ow++) {
                    int64_t iw = ow * g->stride[2] - g->pad[2] + t[2] * g->dil[2];
                    if (iw >= 0 && iw < g->in[2]) acc += (double)dyr[ow] * xr[iw];
                }
            }
        }
    return (float)acc;
}

/* sum over n and the positions of channel c of t [N, C, S] (a bias's gradient) */
TS_C3 float ts_conv3d_channel_sum(const float *t, int64_t N, int64_t C, int64_t S, int64_t c) {
    double acc = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t s = 0; s < S; s++) acc += t[(n * C + c) * S + s];
    return (float)acc;
}

#endif
