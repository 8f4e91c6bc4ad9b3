/* half.h -- the 16-bit floats (bf16, f16): conversions from and to f32 by
 * bits, rounding to nearest even as PyTorch and the hardware do, and the
 * rounding of f32 values onto a 16-bit grid that counts what it loses. */
#ifndef TS_HALF_H
#define TS_HALF_H

#include "core/core.h"

/* f32 -> bf16 bits, round to nearest even; a NaN stays a (quiet) NaN with its sign. */
uint16_t ts_f32_to_bf16(float x);
float ts_bf16_to_f32(uint16_t h); /* exact */
/* f32 -> f16 bits, round to nearest even, subnormals kept, |x| >= 65520 -> Inf. */
uint16_t ts_f32_to_f16(float x);
float ts_f16_to_f32(uint16_t h); /* exact (a signalling NaN comes back quiet) */

/* Whether `t` is a 16-bit float (TS_BF16, TS_F16). */
static inline bool ts_dtype_is_half(ts_dtype t) { return t == TS_BF16 || t == TS_F16; }

/* What rounding onto a 16-bit grid lost: values that were finite and
 * non-zero and became 0, and finite values that became +-Inf. */
typedef struct ts_half_loss {
    int64_t underflow, overflow;
} ts_half_loss;

/* dst[i] = x[i] rounded to the nearest `t` value (TS_BF16 or TS_F16), held
 * in f32 (dst may be x); adds what was lost to *loss (NULL: not counted). */
void ts_round_half(ts_dtype t, float *dst, const float *x, int64_t n, ts_half_loss *loss);

#endif
