/* vk_body.h -- the kernels of vk.h, included once by each vk_<level>.c
 * with TS_VK_TABLE naming its table: the same C compiled for each
 * instruction set, so every level computes the same thing. */
#include "backend/cpu/vk.h"

#include "backend/ew_math.h"
#include "backend/vmath.h"

#include <math.h>
#include <string.h>

/* A loop per kind for the ones models spend time in (GELU, Erf, Exp,
 * Sqrt, Abs, SiLU): the kind is a constant there, so the math inlines and the
 * loop vectorises; the rest share one loop. Pow 2 (RMSNorm's square, as
 * exported) is x * x: powf's call per element was the dearest pass of a
 * small Llama's step. */
#define EWU_HOT_KINDS(X) X(TS_EWU_GELU) X(TS_EWU_GELU_TANH) X(TS_EWU_ERF) X(TS_EWU_EXP) X(TS_EWU_SQRT) X(TS_EWU_ABS) X(TS_EWU_SILU)

static void unary_forward(int kind, float *restrict y, const float *restrict x, float pw, float pb, int64_t n) {
    if (kind == TS_EWU_POW && pw == 2.0f) {
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * x[i];
        return;
    }
    switch (kind) {
#define FWD(K) \
    case K: for (int64_t i = 0; i < n; i++) y[i] = ts_ewu_forward(K, x[i], pw, pb); break;
        EWU_HOT_KINDS(FWD)
#undef FWD
    default: for (int64_t i = 0; i < n; i++) y[i] = ts_ewu_forward(kind, x[i], pw, pb); break;
    }
}

static void unary_backward(int kind, float *restrict dx, const float *restrict d, const float *restrict x, float pw, float pb, int64_t n,
                           bool store) {
    if (kind == TS_EWU_POW && pw == 2.0f) {
        if (store)
            for (int64_t i = 0; i < n; i++) dx[i] = d[i] * (2.0f * x[i]);
        else
            for (int64_t i = 0; i < n; i++) dx[i] += d[i] * (2.0f * x[i]);
        return;
    }
    switch (kind) {
#define BWD(K) \
    case K: \
        if (store) \
            for (int64_t i = 0; i < n; i++) dx[i] = d[i] * ts_ewu_derivative(K, x[i], pw, pb); \
        else \
            for (int64_t i = 0; i < n; i++) dx[i] += d[i] * ts_ewu_derivative(K, x[i], pw, pb); \
        break;
        EWU_HOT_KINDS(BWD)
#undef BWD
    default:
        if (store) memset(dx, 0, (size_t)n * sizeof *dx);
        for (int64_t i = 0; i < n; i++) dx[i] += d[i] * ts_ewu_derivative(kind, x[i], pw, pb);
        break;
    }
}

static void softmax_row(float *restrict y, const float *restrict x, int64_t n, bool log) {
    float mx = -INFINITY;
    for (int64_t j = 0; j < n; j++) mx = x[j] > mx ? x[j] : mx;
    if (mx == -INFINITY) { /* fully masked row */
        for (int64_t j = 0; j < n; j++) y[j] = log ? -INFINITY : 0.0f;
        return;
    }
    float s = 0;
    if (log) {
        for (int64_t j = 0; j < n; j++) s += ts_vexp(x[j] - mx);
        float lse = mx + logf(s);
        for (int64_t j = 0; j < n; j++) y[j] = x[j] - lse;
    } else {
        for (int64_t j = 0; j < n; j++) s += (y[j] = ts_vexp(x[j] - mx));
        float inv = 1.0f / s;
        for (int64_t j = 0; j < n; j++) y[j] *= inv;
    }
}

static void silu_mul(float *s, float *y, const float *x, const float *u, int64_t n) { /* y may be x or u (in place) */
    if (s)
        for (int64_t i = 0; i < n; i++) {
            float v = ts_ewu_forward(TS_EWU_SILU, x[i], 0.0f, 0.0f);
            s[i] = v;
            y[i] = v * u[i];
        }
    else
        for (int64_t i = 0; i < n; i++) y[i] = ts_ewu_forward(TS_EWU_SILU, x[i], 0.0f, 0.0f) * u[i];
}

/* The backward of silu(x) * u in one pass (the Mul's and the Silu's, the
 * Silu's value s kept): per element ds = zs + dy u (zs -0 or +0: dy u as
 * the Mul's kernel leaves s's gradient, 0 + dy u where it adds to zeros),
 * dx = ds silu'(x) (store) or dx += that, du = zu + dy s (du_store) or
 * du += dy s; dx or du NULL: not wanted. A block's inputs are all read
 * before its outputs are written, so du may be dy, u or s (in place). */
static void silu_mul_backward(float *dx, float *du, const float *dy, const float *u, const float *s, const float *x, int64_t n, bool plus,
                              bool store, bool du_store, bool du_plus) {
    enum { B = 256 };
    float zs = plus ? 0.0f : -0.0f, zu = du_plus ? 0.0f : -0.0f, g[B], h[B];
    for (int64_t i = 0; i < n; i += B) {
        int64_t m = n - i < B ? n - i : B;
        if (dx)
            for (int64_t k = 0; k < m; k++) g[k] = (zs + dy[i + k] * u[i + k]) * ts_ewu_derivative(TS_EWU_SILU, x[i + k], 0.0f, 0.0f);
        if (du)
            for (int64_t k = 0; k < m; k++) h[k] = dy[i + k] * s[i + k];
        if (du && du_store)
            for (int64_t k = 0; k < m; k++) du[i + k] = zu + h[k];
        else if (du)
            for (int64_t k = 0; k < m; k++) du[i + k] += h[k];
        if (dx && store)
            for (int64_t k = 0; k < m; k++) dx[i + k] = g[k];
        else if (dx)
            for (int64_t k = 0; k < m; k++) dx[i + k] += g[k];
    }
}

extern const ts_vk TS_VK_TABLE;
const ts_vk TS_VK_TABLE = {
    .name = TS_VK_NAME,
    .unary_forward = unary_forward,
    .unary_backward = unary_backward,
    .softmax_row = softmax_row,
    .silu_mul = silu_mul,
    .silu_mul_backward = silu_mul_backward,
};
