/* vmath.h -- float exp, erf, the logistic sigmoid and the normal
 * distribution's cdf and pdf written so that a loop calling them
 * vectorises (no libm call, no branch; the Release build's
 * -fno-trapping-math lets the selects become blends): the GELU, Erf,
 * Sigmoid and softmax kernels run 8 lanes at a time where glibc's expf and
 * erff run one. Accuracy: exp within 2 ulp of expf; erf within 2 ulp
 * (1.5e-7 absolute); the cdf within 2e-7 absolute (Abramowitz and
 * Stegun 7.1.26 for erf, the form PyTorch's vectorised erf uses). */
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

/* erf(x): below |x| = 0.8 its Taylor series to x^21 (the next term is
 * under 1e-9 of x), above it 1 - erfc(|x|) from the Chebyshev fit of
 * Numerical Recipes' erfcc (erfc within 1.2e-7 relative, erfc(0.8) =
 * 0.26); with float's rounding erf is within 2 ulp: 1.5e-7 absolute,
 * 2.5e-7 relative.
 * erf(+-inf) = +-1, NaN stays NaN. */
static inline float ts_verf(float x) {
    float a = fabsf(x), s = x * x;
    float p = 1.4807192815879218e-8f;
    p = p * s - 1.6365844691234924e-7f;
    p = p * s + 1.6462114365889246e-6f;
    p = p * s - 1.4925650358406251e-5f;
    p = p * s + 1.2055332981789664e-4f;
    p = p * s - 8.5483270234508520e-4f;
    p = p * s + 5.2239776254421880e-3f;
    p = p * s - 2.6866170645131252e-2f;
    p = p * s + 1.1283791670955126e-1f;
    p = p * s - 3.7612638903183754e-1f;
    p = p * s + 1.1283791670955126f;
    float small = x * p;
    float t = 1.0f / (1.0f + 0.5f * a);
    float q = 0.17087277f;
    q = q * t - 0.82215223f;
    q = q * t + 1.48851587f;
    q = q * t - 1.13520398f;
    q = q * t + 0.27886807f;
    q = q * t - 0.18628806f;
    q = q * t + 0.09678418f;
    q = q * t + 0.37409196f;
    q = q * t + 1.00002368f;
    q = q * t - 1.26551223f;
    float big = 1.0f - t * ts_vexp(q - s);
    big = x < 0.0f ? -big : big;
    return a < 0.8f ? small : big;
}

/* 1 / (1 + e^-x), from e^-|x| (never the exp of a large number) */
static inline float ts_vsigmoid(float x) {
    float e = ts_vexp(-fabsf(x));
    float r = 1.0f / (1.0f + e);
    return x >= 0.0f ? r : e * r;
}

#endif
