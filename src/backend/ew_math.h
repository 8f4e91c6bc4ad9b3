/* ew_math.h -- the math of the elementwise families, written once for every
 * backend: the CPU's kernels (backend/cpu/kernels_tensor.c) call these
 * functions in their loops, the CUDA backend's (backend/cuda/) compile them
 * as __host__ __device__ functions. One unary family (x, two float
 * parameters alpha and beta from the node's fattr[0..1]: Exp, Sqrt, Pow
 * with a constant exponent, Erf, Abs, Gelu, Silu, the rounding ops, ...) and one binary
 * family (two operands broadcast by numpy's rules). Predicates (comparisons,
 * Not, And, IsNaN, ...) give 1 or 0 as floats, as the graph holds them;
 * they and the rounding ops have no gradient (the op table says so). */
#ifndef TS_EW_MATH_H
#define TS_EW_MATH_H

#include "graph/graph.h"

#include <math.h>

#include "backend/vmath.h"
#include "core/lowbits.h"
#include "graph/int_math.h"

#ifdef __CUDACC__
#define TS_EW static __host__ __device__ inline
#define TS_EW_KIND TS_EW
#else
#define TS_EW static inline
/* the formulas by kind: inlined into each loop, where the constant kind
 * leaves one case that vectorises (GCC otherwise kept the whole switch out
 * of line and called it per element: GELU's forward was 17% of the char
 * GPT's step) */
#define TS_EW_KIND static inline __attribute__((always_inline))
#endif

/* Phi(v), and *pdf = phi(v): CUDA's normcdff on a GPU, the vectorising
 * form of backend/vmath.h on the host (GELU's hot loop) */
TS_EW float ts_ew_normal_cdf(float v, float *pdf) {
#ifdef __CUDA_ARCH__
    *pdf = 0.39894228040143267794f * expf(-0.5f * v * v);
    return normcdff(v);
#else
    return ts_vnormal_cdf(v, pdf);
#endif
}

/* 1 / (1 + e^-x) from e^-|x| (never the exp of a large number): the
 * vectorising form of backend/vmath.h on the host (SiLU's hot loop) */
TS_EW float ts_ew_sigmoid(float x) {
#ifdef __CUDA_ARCH__
    float e = expf(-fabsf(x)), r = 1.0f / (1.0f + e);
    return x >= 0.0f ? r : e * r;
#else
    return ts_vsigmoid(x);
#endif
}

#define TS_EW_SQRT_2_PI 0.79788456080286535588f /* sqrt(2/pi), GELU's tanh form */
#define TS_EW_GELU_C 0.044715f

/* ---- unary: y = f(x; alpha, beta) */
enum {
    TS_EWU_NONE = -1,
    TS_EWU_EXP,
    TS_EWU_SQRT,
    TS_EWU_POW,       /* x^alpha (a constant exponent; a tensor's is binary) */
    TS_EWU_ERF,
    TS_EWU_ABS,
    TS_EWU_GELU,      /* x Phi(x) */
    TS_EWU_GELU_TANH, /* its tanh approximation (the node's attr[0]) */
    TS_EWU_CEIL,
    TS_EWU_FLOOR,
    TS_EWU_ROUND,     /* half to even, as ONNX and numpy */
    TS_EWU_TRUNC,     /* a cast to an integer type */
    TS_EWU_NONZERO,   /* a cast to bool */
    TS_EWU_SIN,
    TS_EWU_COS,
    TS_EWU_TAN,
    TS_EWU_ASIN,
    TS_EWU_ACOS,
    TS_EWU_ATAN,
    TS_EWU_SINH,
    TS_EWU_COSH,
    TS_EWU_ASINH,
    TS_EWU_ACOSH,
    TS_EWU_ATANH,
    TS_EWU_NOT,
    TS_EWU_ISNAN,
    TS_EWU_ISINF,     /* alpha: +inf counts, beta: -inf counts */
    TS_EWU_HARDSWISH,
    TS_EWU_HARDSIGMOID, /* max(0, min(1, alpha x + beta)) */
    TS_EWU_LEAKYRELU, /* alpha x below 0 */
    TS_EWU_ELU,       /* alpha (e^x - 1) below 0 */
    TS_EWU_SELU,      /* beta (x, or alpha (e^x - 1) at or below 0) */
    TS_EWU_SOFTPLUS,
    TS_EWU_LOWBITS, /* onto ONNX's low-precision type alpha with flags beta (core/lowbits.h); gradient 1 */
    TS_EWU_SILU       /* x sigmoid(x) */
};

/* The unary kind of a node of the family, TS_EWU_NONE for any other op. */
TS_EW int ts_ewu_kind(const ts_tensor *node) {
    switch (node->op) {
    case TS_OP_EXP: return TS_EWU_EXP;
    case TS_OP_SQRT: return TS_EWU_SQRT;
    case TS_OP_POW: return TS_EWU_POW;
    case TS_OP_ERF: return TS_EWU_ERF;
    case TS_OP_ABS: return TS_EWU_ABS;
    case TS_OP_GELU: return node->attr[0] ? TS_EWU_GELU_TANH : TS_EWU_GELU;
    case TS_OP_CEIL: return TS_EWU_CEIL;
    case TS_OP_FLOOR: return TS_EWU_FLOOR;
    case TS_OP_ROUND: return TS_EWU_ROUND;
    case TS_OP_CAST_INT: return TS_EWU_TRUNC;
    case TS_OP_CAST_BOOL: return TS_EWU_NONZERO;
    case TS_OP_SIN: return TS_EWU_SIN;
    case TS_OP_COS: return TS_EWU_COS;
    case TS_OP_TAN: return TS_EWU_TAN;
    case TS_OP_ASIN: return TS_EWU_ASIN;
    case TS_OP_ACOS: return TS_EWU_ACOS;
    case TS_OP_ATAN: return TS_EWU_ATAN;
    case TS_OP_SINH: return TS_EWU_SINH;
    case TS_OP_COSH: return TS_EWU_COSH;
    case TS_OP_ASINH: return TS_EWU_ASINH;
    case TS_OP_ACOSH: return TS_EWU_ACOSH;
    case TS_OP_ATANH: return TS_EWU_ATANH;
    case TS_OP_NOT: return TS_EWU_NOT;
    case TS_OP_ISNAN: return TS_EWU_ISNAN;
    case TS_OP_ISINF: return TS_EWU_ISINF;
    case TS_OP_HARD_SWISH: return TS_EWU_HARDSWISH;
    case TS_OP_HARD_SIGMOID: return TS_EWU_HARDSIGMOID;
    case TS_OP_LEAKY_RELU: return TS_EWU_LEAKYRELU;
    case TS_OP_ELU: return TS_EWU_ELU;
    case TS_OP_SELU: return TS_EWU_SELU;
    case TS_OP_SOFTPLUS: return TS_EWU_SOFTPLUS;
    case TS_OP_CAST_LOWBITS: return TS_EWU_LOWBITS;
    case TS_OP_SILU: return TS_EWU_SILU;
    default: return TS_EWU_NONE;
    }
}

TS_EW_KIND float ts_ewu_forward(int kind, float x, float alpha, float beta) {
    switch (kind) {
    case TS_EWU_EXP: return expf(x);
    case TS_EWU_SQRT: return sqrtf(x);
    case TS_EWU_POW: return powf(x, alpha);
    case TS_EWU_ERF:
#ifdef __CUDA_ARCH__
        return erff(x);
#else
        return ts_verf(x); /* vectorises (backend/vmath.h) */
#endif
    case TS_EWU_ABS: return fabsf(x);
    case TS_EWU_GELU: {
        float pdf;
        return x * ts_ew_normal_cdf(x, &pdf);
    }
    case TS_EWU_GELU_TANH: return 0.5f * x * (1.0f + tanhf(TS_EW_SQRT_2_PI * (x + TS_EW_GELU_C * x * x * x)));
    case TS_EWU_CEIL: return ceilf(x);
    case TS_EWU_FLOOR: return floorf(x);
    case TS_EWU_ROUND: return rintf(x);
    case TS_EWU_TRUNC: return truncf(x);
    case TS_EWU_NONZERO: return x != 0.0f ? 1.0f : 0.0f;
    case TS_EWU_SIN: return sinf(x);
    case TS_EWU_COS: return cosf(x);
    case TS_EWU_TAN: return tanf(x);
    case TS_EWU_ASIN: return asinf(x);
    case TS_EWU_ACOS: return acosf(x);
    case TS_EWU_ATAN: return atanf(x);
    case TS_EWU_SINH: return sinhf(x);
    case TS_EWU_COSH: return coshf(x);
    case TS_EWU_ASINH: return asinhf(x);
    case TS_EWU_ACOSH: return acoshf(x);
    case TS_EWU_ATANH: return atanhf(x);
    case TS_EWU_NOT: return x == 0.0f ? 1.0f : 0.0f;
    case TS_EWU_ISNAN: return x != x ? 1.0f : 0.0f;
    case TS_EWU_ISINF: return (x == INFINITY && alpha != 0.0f) || (x == -INFINITY && beta != 0.0f) ? 1.0f : 0.0f;
    case TS_EWU_HARDSWISH: return x * fminf(fmaxf(x / 6.0f + 0.5f, 0.0f), 1.0f);
    case TS_EWU_HARDSIGMOID: return fminf(fmaxf(alpha * x + beta, 0.0f), 1.0f);
    case TS_EWU_LEAKYRELU: return x < 0.0f ? alpha * x : x;
    case TS_EWU_ELU: return x < 0.0f ? alpha * expm1f(x) : x;
    case TS_EWU_SELU: return beta * (x > 0.0f ? x : alpha * expm1f(x));
    case TS_EWU_SOFTPLUS: return x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x));
    case TS_EWU_LOWBITS: return ts_lowbits_round((int)alpha, x, (int)beta);
    case TS_EWU_SILU: return x * ts_ew_sigmoid(x);
    default: return NAN;
    }
}

/* Whether the kind's backward reads its output y = f(x) instead of x:
 * Exp and Sqrt, whose op table rows let x's memory go after the forward
 * (graph/ops.c: bwd_unread_inputs, needs_output). */
TS_EW int ts_ewu_reads_output(int kind) { return kind == TS_EWU_EXP || kind == TS_EWU_SQRT; }

/* df/dx at v: v is x, or y = f(x) for the kinds ts_ewu_reads_output
 * names (0 for the kinds without a gradient) */
TS_EW_KIND float ts_ewu_derivative(int kind, float v, float alpha, float beta) {
    float x = v;
    switch (kind) {
    case TS_EWU_EXP: return v;           /* y */
    case TS_EWU_SQRT: return 0.5f / v;   /* 1 / (2 y) */
    case TS_EWU_POW: return alpha * powf(x, alpha - 1.0f);
    case TS_EWU_ERF: /* 2/sqrt(pi) e^(-x^2) */
#ifdef __CUDA_ARCH__
        return 1.12837916709551257390f * expf(-x * x);
#else
        return 1.12837916709551257390f * ts_vexp(-x * x);
#endif
    case TS_EWU_ABS: return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : 0.0f;
    case TS_EWU_GELU: { /* d/dx x Phi(x) = Phi(x) + x phi(x) */
        float pdf, cdf = ts_ew_normal_cdf(x, &pdf);
        return cdf + x * pdf;
    }
    case TS_EWU_GELU_TANH: {
        float t = tanhf(TS_EW_SQRT_2_PI * (x + TS_EW_GELU_C * x * x * x));
        return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * TS_EW_SQRT_2_PI * (1.0f + 3.0f * TS_EW_GELU_C * x * x);
    }
    case TS_EWU_SIN: return cosf(x);
    case TS_EWU_COS: return -sinf(x);
    case TS_EWU_TAN: { /* 1 + tan^2 x */
        float t = tanf(x);
        return 1.0f + t * t;
    }
    case TS_EWU_ASIN: return 1.0f / sqrtf(1.0f - x * x);
    case TS_EWU_ACOS: return -1.0f / sqrtf(1.0f - x * x);
    case TS_EWU_ATAN: return 1.0f / (1.0f + x * x);
    case TS_EWU_SINH: return coshf(x);
    case TS_EWU_COSH: return sinhf(x);
    case TS_EWU_ASINH: return 1.0f / sqrtf(x * x + 1.0f);
    case TS_EWU_ACOSH: return 1.0f / sqrtf(x * x - 1.0f);
    case TS_EWU_ATANH: return 1.0f / (1.0f - x * x);
    case TS_EWU_HARDSWISH: return x < -3.0f ? 0.0f : x > 3.0f ? 1.0f : x / 3.0f + 0.5f;
    case TS_EWU_HARDSIGMOID: {
        float t = alpha * x + beta;
        return t > 0.0f && t < 1.0f ? alpha : 0.0f;
    }
    case TS_EWU_LEAKYRELU: return x < 0.0f ? alpha : 1.0f;
    case TS_EWU_ELU: return x < 0.0f ? alpha * expf(x) : 1.0f;
    case TS_EWU_SELU: return beta * (x > 0.0f ? 1.0f : alpha * expf(x));
    case TS_EWU_SOFTPLUS: return 1.0f / (1.0f + expf(-x));
    case TS_EWU_LOWBITS: return 1.0f; /* straight through, as ts_cast's */
    case TS_EWU_SILU: { /* s (1 + x (1 - s)), s = sigmoid(x): 0 far below 0, 1 far above */
        float s = ts_ew_sigmoid(x);
        return s * (1.0f + x * (1.0f - s));
    }
    default: return 0.0f;
    }
}

/* ---- binary: y = a (op) b */
enum {
    TS_EWB_NONE = -1,
    TS_EWB_POW,
    TS_EWB_MAX,   /* NaN wins; a tie gives each operand half the gradient */
    TS_EWB_MIN,
    TS_EWB_MOD,   /* the sign of the divisor (integers, ONNX fmod=0) */
    TS_EWB_FMOD,  /* the sign of the dividend (C's fmod) */
    TS_EWB_EQUAL,
    TS_EWB_GREATER,
    TS_EWB_GREATER_EQUAL,
    TS_EWB_LESS,
    TS_EWB_LESS_EQUAL,
    TS_EWB_AND,
    TS_EWB_OR,
    TS_EWB_XOR
};

TS_EW int ts_ewb_kind(ts_op op) {
    switch (op) {
    case TS_OP_POWER: return TS_EWB_POW;
    case TS_OP_MAX: return TS_EWB_MAX;
    case TS_OP_MIN: return TS_EWB_MIN;
    case TS_OP_MOD: return TS_EWB_MOD;
    case TS_OP_FMOD: return TS_EWB_FMOD;
    case TS_OP_EQUAL: return TS_EWB_EQUAL;
    case TS_OP_GREATER: return TS_EWB_GREATER;
    case TS_OP_GREATER_EQUAL: return TS_EWB_GREATER_EQUAL;
    case TS_OP_LESS: return TS_EWB_LESS;
    case TS_OP_LESS_EQUAL: return TS_EWB_LESS_EQUAL;
    case TS_OP_AND: return TS_EWB_AND;
    case TS_OP_OR: return TS_EWB_OR;
    case TS_OP_XOR: return TS_EWB_XOR;
    default: return TS_EWB_NONE;
    }
}

TS_EW float ts_ewb_forward(int kind, float a, float b) {
    switch (kind) {
    case TS_EWB_POW: return powf(a, b);
    case TS_EWB_MAX: return a > b || a != a ? a : b;
    case TS_EWB_MIN: return a < b || a != a ? a : b;
    case TS_EWB_MOD: {
        float r = fmodf(a, b);
        return r != 0.0f && (r < 0.0f) != (b < 0.0f) ? r + b : r;
    }
    case TS_EWB_FMOD: return fmodf(a, b);
    case TS_EWB_EQUAL: return a == b ? 1.0f : 0.0f;
    case TS_EWB_GREATER: return a > b ? 1.0f : 0.0f;
    case TS_EWB_GREATER_EQUAL: return a >= b ? 1.0f : 0.0f;
    case TS_EWB_LESS: return a < b ? 1.0f : 0.0f;
    case TS_EWB_LESS_EQUAL: return a <= b ? 1.0f : 0.0f;
    case TS_EWB_AND: return a != 0.0f && b != 0.0f ? 1.0f : 0.0f;
    case TS_EWB_OR: return a != 0.0f || b != 0.0f ? 1.0f : 0.0f;
    case TS_EWB_XOR: return (a != 0.0f) != (b != 0.0f) ? 1.0f : 0.0f;
    default: return NAN;
    }
}

/* d(a op b)/da (which 0) or /db (which 1); 0 for the kinds without a
 * gradient */
TS_EW float ts_ewb_partial(int kind, int which, float a, float b) {
    switch (kind) {
    case TS_EWB_POW:
        if (which == 0) return b * powf(a, b - 1.0f);
        return a == 0.0f ? 0.0f : powf(a, b) * logf(a);
    case TS_EWB_MAX:
    case TS_EWB_MIN: {
        float mine = which == 0 ? a : b, other = which == 0 ? b : a;
        if (mine == other) return 0.5f;
        bool wins = kind == TS_EWB_MAX ? mine > other : mine < other;
        return wins || mine != mine ? 1.0f : 0.0f;
    }
    case TS_EWB_MOD: return which == 0 ? 1.0f : -floorf(a / b);
    case TS_EWB_FMOD: return which == 0 ? 1.0f : -truncf(a / b);
    default: return 0.0f;
    }
}

/* ---- GatherElements, elementwise over its indices: the offset in data
 * (shape sd) of index position p (of the indices' shape si) whose index
 * on `axis` is r (negative: from the end) */
TS_EW int64_t ts_gather_elements_offset(const ts_shape *sd, const ts_shape *si, int axis, int64_t p, int32_t r) {
    int64_t off = 0, stride = 1;
    for (int k = si->ndim - 1; k >= 0; k--) {
        int64_t c = p % si->d[k];
        p /= si->d[k];
        off += (k == axis ? (r < 0 ? r + sd->d[k] : r) : c) * stride;
        stride *= sd->d[k];
    }
    return off;
}

/* ---- Bitwise (TS_OP_BITWISE): ONNX's BitwiseAnd, Or, Xor, Not and
 * BitShift on integers held in i32 or i64, computed in the declared
 * integer type of `bits` bits (unsigned: `uns`) and wrapped to it. A shift
 * by a negative amount or by the width or more shifts every bit out (an
 * arithmetic right shift of a negative signed value leaves -1). */
TS_EW int64_t ts_ew_bitwise(int kind, int bits, int uns, int64_t a, int64_t b) {
    int64_t sa = ts_int_wrap_bits(a, bits, uns), sb = ts_int_wrap_bits(b, bits, uns);
    uint64_t ua = (uint64_t)sa, ub = (uint64_t)sb, r;
    bool out_of_width = uns ? ub >= (uint64_t)bits : sb < 0 || sb >= bits;
    switch (kind) {
    case TS_BITWISE_AND: r = ua & ub; break;
    case TS_BITWISE_OR: r = ua | ub; break;
    case TS_BITWISE_XOR: r = ua ^ ub; break;
    case TS_BITWISE_NOT: r = ~ua; break;
    case TS_BITWISE_SHIFT_LEFT: r = out_of_width ? 0 : ua << sb; break;
    default: /* right */
        if (!uns && sa < 0) r = (uint64_t)(out_of_width ? -1 : sa >> sb);
        else r = out_of_width ? 0 : ua >> sb;
        break;
    }
    return ts_int_wrap_bits((int64_t)r, bits, uns);
}

/* A float toward zero as an integer of `bits` (32 or 64) bits: NaN gives
 * 0, values beyond the range the range's nearest end */
TS_EW int64_t ts_float_to_int(float x, int bits) {
    double lo = bits == 32 ? -2147483648.0 : -9223372036854775808.0, v = (double)x;
    if (!(v == v)) return 0;
    if (v <= lo) return bits == 32 ? INT32_MIN : INT64_MIN;
    if (v >= -lo) return bits == 32 ? INT32_MAX : INT64_MAX;
    return (int64_t)v;
}

/* x toward zero as the integer type `type` holds it (TS_OP_CONVERT from
 * f32): in int32 for TS_I32 (saturated), else in int64 and wrapped to the
 * type (ts_int_as_type); a uint64 takes [2^63, 2^64) as those values'
 * bits, and 2^64 and beyond as 2^64-1 */
TS_EW int64_t ts_float_to_type(float x, int type) {
    if (type == TS_U64 && (double)x >= 9223372036854775808.0)
        return (double)x >= 18446744073709551616.0 ? -1 : (int64_t)(uint64_t)(double)x;
    return ts_int_as_type(type, ts_float_to_int(x, type == TS_I32 ? 32 : 64));
}

/* An index from a float or an i64 (TS_OP_CONVERT's attr[1]): i32,
 * saturated, NaN INT32_MIN (outside every range, for the run's check) */
TS_EW int32_t ts_index_of_float(float x) { return x == x ? (int32_t)ts_float_to_int(x, 32) : INT32_MIN; }
TS_EW int32_t ts_index_of_int(int64_t v) { return v < INT32_MIN ? INT32_MIN : v > INT32_MAX ? INT32_MAX : (int32_t)v; }

/* ---- numpy broadcasting: the offset in an input of shape `in` (aligned
 * on the right, its dims of 1 repeated) of the output's element p */
TS_EW int64_t ts_bcast_offset(const ts_shape *out, const ts_shape *in, int64_t p) {
    int64_t off = 0, stride = 1;
    for (int k = out->ndim - 1, j = in->ndim - 1; k >= 0; k--, j--) {
        int64_t c = p % out->d[k];
        p /= out->d[k];
        if (j < 0) continue;
        if (in->d[j] != 1) off += c * stride;
        stride *= in->d[j];
    }
    return off;
}

/* CastIndex: x toward zero, clamped to [lo, hi] (NaN: lo), so that an index
 * the graph computed never reads outside the tensor it gathers from */
TS_EW int32_t ts_ew_cast_index(float x, float lo, float hi) {
    if (!(x >= lo)) return (int32_t)lo;
    return (int32_t)(x > hi ? hi : x);
}

#endif
