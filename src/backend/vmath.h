/* vmath.h -- float exp and the normal distribution's cdf and pdf written so
 * that a loop calling them vectorises (no libm call, no branch; the Release
 * build's -fno-trapping-math lets the selects become blends): the GELU and
 * softmax kernels run 8 lanes at a time where glibc's expf and erff run
 * one. Accuracy: exp within 2 ulp of expf; the cdf within 2e-7
 * absolute (Abramowitz and Stegun 7.1.26 for erf, the form PyTorch's
 * vectorised erf uses). */
#ifndef TS_VMATH_H
#define TS_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* e^x for x <= 88.3 (the kernels pass x <= 0): 0 below -87.3 (exp(-inf) =
 * 0, a masked softmax entry), +inf above 88.3, NaN stays NaN. */
static inline float ts_vexp(float x) {
    float xc = x > 88.3f ? 88.3f : x; /* one select per statement: nested ones stay branches */
    xc = xc < -87.3f ? -87.3f : xc;
    xc = xc == xc ? xc : 0.0f; /* NaN: a defined conversion below, the NaN returned at the end */
    /* n = round(x / ln2) by the 1.5 * 2^23 trick (floorf does not vectorise
     * while floating-point exceptions are honoured) */
    float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = xc - n * 0.693359375f + n * 2.12194440e-4f; /* x - n ln2 in two parts (Cephes) */
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23; /* 2^n */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    float y = p * scale;
    y = x < -87.3f ? 0.0f : y;
    y = x > 88.3f ? INFINITY : y;
    return x != x ? x : y;
}

/* Phi(v) = (1 + erf(v / sqrt 2)) / 2, and *pdf = exp(-v^2 / 2) / sqrt(2 pi):
 * the exp of erf's formula is the pdf's, computed once for both (GELU and
 * its gradient). */
static inline float ts_vnormal_cdf(float v, float *pdf) {
    float z = fabsf(v) * 0.70710678118654752440f;
    float t = 1.0f / (1.0f + 0.3275911f * z);
    float poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    float e = ts_vexp(-0.5f * v * v);
    *pdf = 0.39894228040143267794f * e;
    float half_erfc = 0.5f * poly * e; /* (1 - erf(|v|/sqrt 2)) / 2 */
    return v < 0.0f ? half_erfc : 1.0f - half_erfc;
}

#endif
