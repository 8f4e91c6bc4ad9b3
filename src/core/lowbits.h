/* lowbits.h -- ONNX's low-precision types by bits: float8 (e4m3fn,
 * e4m3fnuz, e5m2, e5m2fnuz, e8m0), float4 (e2m1), int4, uint4, int2 and
 * uint2, converted from and to f32 exactly as the onnx package's reference
 * Cast does (ml_dtypes' conversions; with `saturate`, a clamp to the
 * largest finite value first; e8m0 by its round mode). They are import
 * types, not ts_dtypes: the graph holds their values in f32, and a Cast
 * rounds onto their grid (docs/onnx.md). Written once for every device:
 * the CUDA kernels compile these as __host__ __device__ functions. */
#ifndef TS_LOWBITS_H
#define TS_LOWBITS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define TS_LB static __host__ __device__ inline
#else
#define TS_LB static inline
#endif

/* The types, numbered as ONNX's TensorProto.DataType. */
enum {
    TS_LOWBITS_F8E4M3FN = 17, TS_LOWBITS_F8E4M3FNUZ = 18, TS_LOWBITS_F8E5M2 = 19, TS_LOWBITS_F8E5M2FNUZ = 20,
    TS_LOWBITS_UINT4 = 21, TS_LOWBITS_INT4 = 22, TS_LOWBITS_F4E2M1 = 23, TS_LOWBITS_F8E8M0 = 24,
    TS_LOWBITS_UINT2 = 25, TS_LOWBITS_INT2 = 26
};

/* How a conversion rounds (flags): saturate (float8: a value past the
 * largest finite one, Inf included, clamps to it; else it becomes Inf or
 * NaN as the type has; e8m0: stays below NaN), and e8m0's round mode
 * (ONNX's round_mode: "up" by default, "down", "nearest"). */
enum { TS_LOWBITS_SATURATE = 1, TS_LOWBITS_ROUND_DOWN = 2, TS_LOWBITS_ROUND_NEAREST = 4 };

/* Whether t is one of the types above. */
TS_LB bool ts_lowbits_is(int t) { return t >= TS_LOWBITS_F8E4M3FN && t <= TS_LOWBITS_INT2; }
/* Bits per element: 8, 4 (uint4, int4, float4e2m1; two per byte, the
 * first in the low nibble) or 2 (uint2, int2; four per byte, from the low
 * bits up). */
TS_LB int ts_lowbits_width(int t) {
    return t == TS_LOWBITS_UINT4 || t == TS_LOWBITS_INT4 || t == TS_LOWBITS_F4E2M1 ? 4 : t == TS_LOWBITS_UINT2 || t == TS_LOWBITS_INT2 ? 2 : 8;
}

TS_LB uint32_t ts_lb_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
TS_LB float ts_lb_float(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* A small float's layout: mantissa bits, exponent bias, its largest
 * finite code (sign off), whether it has Inf (e5m2), whether it is "fnuz"
 * (no -0, NaN is 0x80), whether it has no NaN (float4). */
typedef struct ts_lb_format {
    int mant, bias;
    uint32_t max_code;
    bool inf, fnuz, no_nan;
} ts_lb_format;

TS_LB ts_lb_format ts_lb_format_of(int t) {
    ts_lb_format f = {3, 7, 0x7e, false, false, false}; /* e4m3fn: 448 */
    if (t == TS_LOWBITS_F8E4M3FNUZ) f = (ts_lb_format){3, 8, 0x7f, false, true, false};       /* 240 */
    else if (t == TS_LOWBITS_F8E5M2) f = (ts_lb_format){2, 15, 0x7b, true, false, false};     /* 57344 */
    else if (t == TS_LOWBITS_F8E5M2FNUZ) f = (ts_lb_format){2, 16, 0x7f, false, true, false}; /* 57344 */
    else if (t == TS_LOWBITS_F4E2M1) f = (ts_lb_format){1, 1, 0x7, false, false, true};       /* 6 */
    return f;
}

/* A small float's code (sign off) as f32. */
TS_LB float ts_lb_small_value(ts_lb_format f, uint32_t a) {
    uint32_t e = a >> f.mant, m = a & ((1u << f.mant) - 1u);
    if (e == 0) return ldexpf((float)m, 1 - f.bias - f.mant);
    return ldexpf((float)((1u << f.mant) | m), (int)e - f.bias - f.mant);
}

/* f32 -> a small float's code, to nearest even. */
TS_LB uint32_t ts_lb_small_from_f32(ts_lb_format f, float x, bool saturate) {
    uint32_t u = ts_lb_bits(x), a = u & 0x7fffffffu;
    int bits = f.no_nan ? 4 : 8;
    uint32_t sign = (u >> 31) << (bits - 1);
    /* NaN: fnuz's 0x80; e4m3fn's all ones; e5m2's quiet one (0x7e), sign kept */
    uint32_t nan = f.fnuz ? 0x80u : f.inf ? (sign | (f.max_code + 1u) | (1u << (f.mant - 1))) : (sign | ((1u << (bits - 1)) - 1u));
    if (a > 0x7f800000u) return f.no_nan ? (sign ^ (1u << (bits - 1))) : nan; /* float4 has none: ml_dtypes' -0 or 0 */
    float maxv = ts_lb_small_value(f, f.max_code);
    if (saturate && fabsf(x) > maxv) return sign | f.max_code;
    if (a == 0x7f800000u) return f.no_nan ? (sign | f.max_code) : f.inf ? (sign | (f.max_code + 1u)) : nan;
    uint32_t code;
    float min_normal = ldexpf(1.0f, 1 - f.bias);
    if (ts_lb_float(a) < min_normal) {
        code = (uint32_t)rintf(ldexpf(ts_lb_float(a), f.bias - 1 + f.mant)); /* exact scaling, then ties to even */
    } else {
        uint32_t drop = (uint32_t)(23 - f.mant);
        uint32_t r = a - ((uint32_t)(127 - f.bias) << 23);
        r += (1u << (drop - 1u)) - 1u + ((r >> drop) & 1u);
        code = r >> drop;
    }
    if (code > f.max_code) return f.no_nan ? (sign | f.max_code) : f.inf ? (sign | (f.max_code + 1u)) : nan;
    if (f.fnuz && code == 0) return 0;
    return sign | code;
}

/* f32 -> e8m0's code (2^(code - 127); 0xff NaN), as onnx.numpy_helper's
 * to_float8e8m0: the sign dropped, Inf and NaN to 0xff. */
TS_LB uint32_t ts_lb_e8m0_from_f32(float x, int mode) {
    uint32_t u = ts_lb_bits(x), e = (u >> 23) & 0xffu;
    if (e == 0xffu) return 0xffu;
    bool up;
    if (mode & TS_LOWBITS_ROUND_NEAREST) /* guard bit, and round, sticky or an exponent above 0 */
        up = (u & 0x400000u) && ((u & 0x200000u) || (u & 0x1fffffu) || e > 0);
    else if (mode & TS_LOWBITS_ROUND_DOWN) up = false;
    else up = (u & 0x7fffffu) != 0;
    if (up && e == 0xfeu && (mode & TS_LOWBITS_SATURATE)) up = false;
    return e + (up ? 1u : 0u);
}

/* f32 -> t's code (in the low ts_lowbits_width(t) bits). */
TS_LB uint8_t ts_lowbits_from_f32(int t, float x, int mode) {
    switch (t) {
    case TS_LOWBITS_F8E8M0: return (uint8_t)ts_lb_e8m0_from_f32(x, mode);
    case TS_LOWBITS_UINT4: case TS_LOWBITS_INT4: case TS_LOWBITS_UINT2: case TS_LOWBITS_INT2: {
        /* as ml_dtypes: toward zero through int32 (NaN, Inf and what is
         * out of its range give INT32_MIN, whose low bits are 0), the
         * low bits kept */
        int32_t i = x > -2147483648.0f && x < 2147483648.0f ? (int32_t)x : INT32_MIN;
        return (uint8_t)((uint32_t)i & ((1u << ts_lowbits_width(t)) - 1u));
    }
    default: return (uint8_t)ts_lb_small_from_f32(ts_lb_format_of(t), x, (mode & TS_LOWBITS_SATURATE) != 0);
    }
}

/* t's code -> f32, exactly (a NaN comes back as f32's quiet NaN, sign kept). */
TS_LB float ts_lowbits_to_f32(int t, uint8_t c) {
    switch (t) {
    case TS_LOWBITS_F8E8M0: return c == 0xffu ? ts_lb_float(0x7fc00000u) : ldexpf(1.0f, (int)c - 127);
    case TS_LOWBITS_UINT4: return (float)(c & 0xfu);
    case TS_LOWBITS_INT4: return (float)((int)(c & 0xfu) - ((c & 0x8u) ? 16 : 0));
    case TS_LOWBITS_UINT2: return (float)(c & 0x3u);
    case TS_LOWBITS_INT2: return (float)((int)(c & 0x3u) - ((c & 0x2u) ? 4 : 0));
    default: break;
    }
    ts_lb_format f = ts_lb_format_of(t);
    int bits = f.no_nan ? 4 : 8;
    uint32_t sign = (c >> (bits - 1)) & 1u, a = c & ((1u << (bits - 1)) - 1u);
    if (f.fnuz && c == 0x80u) return ts_lb_float(0xffc00000u);
    if (!f.fnuz && !f.no_nan && a > f.max_code) { /* e4m3fn's 0x7f; e5m2's Inf and NaNs */
        if (f.inf && a == f.max_code + 1u) return sign ? -INFINITY : INFINITY;
        return ts_lb_float((sign << 31) | 0x7fc00000u);
    }
    float v = ts_lb_small_value(f, a);
    return sign ? -v : v;
}

/* x rounded onto t's grid, held in f32 (what a Cast to t and back gives). */
TS_LB float ts_lowbits_round(int t, float x, int mode) { return ts_lowbits_to_f32(t, ts_lowbits_from_f32(t, x, mode)); }

#endif
