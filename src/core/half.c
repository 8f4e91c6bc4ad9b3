/* half.c -- bf16 and f16 by bits (core/half.h). */
#include "core/half.h"

#include <math.h>

#include <string.h>

uint16_t ts_f32_to_bf16(float x) {
    uint32_t u = ts_float_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* NaN: quiet, sign kept */
    u += 0x7fffu + ((u >> 16) & 1u);                                              /* to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

float ts_bf16_to_f32(uint16_t h) { return ts_bits_float((uint32_t)h << 16); }

uint16_t ts_f32_to_f16(float x) {
    uint32_t u = ts_float_bits(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 (the midpoint past 65504) and Inf */
    if (a < 0x38800000u) {                                   /* below 2^-14: an f16 subnormal or 0 */
        if (a < 0x33000000u) return sign;                    /* below 2^-25: rounds to 0 (2^-25 itself ties to 0) */
        uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e;                          /* 14..24: m >> shift is the subnormal's mantissa */
        uint32_t q = m >> shift, rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        q += rest > half || (rest == half && (q & 1u));
        return (uint16_t)(sign | q);
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u) - 0x38000000u; /* rebias 127 -> 15, round the 13 dropped bits */
    return (uint16_t)(sign | (r >> 13));
}

float ts_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1fu) /* Inf; a NaN comes back quiet with its payload, as from F16C and PyTorch */
        return ts_bits_float(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0u));
    if (e == 0) {                                                   /* 0 or subnormal: m * 2^-24, exact */
        float v = (float)m * 0x1p-24f;
        return sign ? -v : v;
    }
    return ts_bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

void ts_round_half(ts_dtype t, float *dst, const float *x, int64_t n, ts_half_loss *loss) {
    int64_t under = 0, over = 0;
    if (t == TS_BF16) {
        for (int64_t i = 0; i < n; i++) {
            float v = x[i], r = ts_bf16_to_f32(ts_f32_to_bf16(v));
            under += r == 0.0f && v != 0.0f;
            over += isinf(r) && !isinf(v) && !isnan(v);
            dst[i] = r;
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            float v = x[i], r = ts_f16_to_f32(ts_f32_to_f16(v));
            under += r == 0.0f && v != 0.0f;
            over += isinf(r) && !isinf(v) && !isnan(v);
            dst[i] = r;
        }
    }
    if (loss) {
        loss->underflow += under;
        loss->overflow += over;
    }
}
