/* int_math.h -- what the integer graph ops compute, one definition for
 * every device and for the importer's folds of integer constants:
 * two's-complement wrapping to a type's width and the integer arithmetic of
 * TS_OP_INT_ARITH (kinds: graph.h's TS_INT_*). Plain C, readable by a
 * device compiler. */
#ifndef TS_INT_MATH_H
#define TS_INT_MATH_H

#include "graph/graph.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#define TS_INT_FN static __host__ __device__ inline
#else
#define TS_INT_FN static inline
#endif

/* v wrapped to an integer type of `bits` bits (unsigned: `uns`), two's
 * complement, as a C cast to it does: int8 300 is 44, uint8 -1 is 255; a
 * uint64 value is held as its bits (2^64-1 as -1) */
TS_INT_FN int64_t ts_int_wrap_bits(int64_t v, int bits, int uns) {
    if (bits >= 64) return v;
    uint64_t mask = ((uint64_t)1 << bits) - 1, r = (uint64_t)v & mask;
    if (!uns && ((r >> (bits - 1)) & 1u)) r |= ~mask; /* sign-extend */
    return (int64_t)r;
}

/* v as the integer dtype `type` holds it (TS_I8, TS_I16, TS_I32, TS_U8,
 * TS_U16, TS_U32 wrapped, ts_int_wrap_bits; any other type: v) */
TS_INT_FN int64_t ts_int_as_type(int type, int64_t v) {
    switch (type) {
    case TS_I32: return ts_int_wrap_bits(v, 32, 0);
    case TS_I8: return ts_int_wrap_bits(v, 8, 0);
    case TS_I16: return ts_int_wrap_bits(v, 16, 0);
    case TS_U8: return ts_int_wrap_bits(v, 8, 1);
    case TS_U16: return ts_int_wrap_bits(v, 16, 1);
    case TS_U32: return ts_int_wrap_bits(v, 32, 1);
    default: return v;
    }
}

/* a^k by k >= 0 read unsigned: square and multiply, wrapping (numpy's
 * int64 `**`); at most 64 rounds */
TS_INT_FN int64_t ts_int_pow_bits(uint64_t a, uint64_t k) {
    uint64_t r = 1;
    for (; k; k >>= 1) {
        if (k & 1u) r *= a;
        a *= a;
    }
    return (int64_t)r;
}

/* ---- integer tensors (TS_OP_INT_ARITH, TS_OP_CONVERT, TS_OP_INT_CUMSUM):
 * computed in int64_t, the sums and products unsigned (so they wrap as
 * two's complement, never overflow), and wrapped to the tensor's width by
 * ts_int_wrap; a division or modulo by 0 gives 0 (numpy's), and
 * INT64_MIN / -1 wraps to INT64_MIN. Comparisons give 1 or 0. Pow by a
 * negative exponent is onnxruntime's (its double power turned back to an
 * integer): 1 and -1 give +-1, 0 gives INT64_MIN (the infinity's
 * conversion), any other base 0 (a fraction toward zero). */
TS_INT_FN int64_t ts_int_arith(int kind, int64_t a, int64_t b) {
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    bool zero = b == 0, minus1 = b == -1; /* minus1: a / -1 is -a (INT64_MIN / -1 would trap), the remainders 0 */
    switch (kind) {
    case TS_INT_ADD: return (int64_t)(ua + ub);
    case TS_INT_SUB: return (int64_t)(ua - ub);
    case TS_INT_MUL: return (int64_t)(ua * ub);
    case TS_INT_DIV: return zero ? 0 : minus1 ? (int64_t)(0 - ua) : a / b;
    case TS_INT_FLOOR_DIV:
        if (zero || minus1) return zero ? 0 : (int64_t)(0 - ua);
        return a / b - (a % b != 0 && (a < 0) != (b < 0));
    case TS_INT_MOD: {
        if (zero || minus1) return 0;
        int64_t r = a % b;
        return r != 0 && (r < 0) != (b < 0) ? r + b : r;
    }
    case TS_INT_FMOD: return zero || minus1 ? 0 : a % b;
    case TS_INT_MIN: return a < b ? a : b;
    case TS_INT_MAX: return a > b ? a : b;
    case TS_INT_EQUAL: return a == b;
    case TS_INT_LESS: return a < b;
    case TS_INT_LESS_EQUAL: return a <= b;
    case TS_INT_GREATER: return a > b;
    case TS_INT_GREATER_EQUAL: return a >= b;
    case TS_INT_NEG: return (int64_t)(0 - ua);
    case TS_INT_POW:
        if (b >= 0) return ts_int_pow_bits(ua, ub);
        return a == 1 ? 1 : a == -1 ? ((ub & 1u) ? -1 : 1) : a == 0 ? INT64_MIN : 0;
    default: return a < 0 ? (int64_t)(0 - ua) : a; /* Abs */
    }
}

/* ts_int_arith in the declared integer type `type` (a ts_dtype: the
 * values' type, as TS_OP_INT_ARITH's attr[1] gives it; TS_I64 or TS_F32,
 * 0, for none: the held values as they are). A uint64's bits are
 * read unsigned by Div, FloorDiv, Mod, FMod, Min, Max, the comparisons
 * and Pow's exponent (2^64-1 is past 2^63, not -1); Abs of an unsigned
 * type is the value; Pow of int32 0 by a negative exponent INT32_MIN
 * (onnxruntime's); every other result is ts_int_arith's, Add, Sub, Mul and Neg being the
 * same bits either way. A result that is no comparison is wrapped to the
 * type (uint32 Add past 2^32 wraps, int8 Mul past 127: ts_int_as_type). */
TS_INT_FN int64_t ts_int_arith_in(int type, int kind, int64_t a, int64_t b) {
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    if (type == TS_U64) switch (kind) {
        case TS_INT_DIV: case TS_INT_FLOOR_DIV: return ub == 0 ? 0 : (int64_t)(ua / ub);
        case TS_INT_MOD: case TS_INT_FMOD: return ub == 0 ? 0 : (int64_t)(ua % ub);
        case TS_INT_MIN: return ua < ub ? a : b;
        case TS_INT_MAX: return ua > ub ? a : b;
        case TS_INT_LESS: return ua < ub;
        case TS_INT_LESS_EQUAL: return ua <= ub;
        case TS_INT_GREATER: return ua > ub;
        case TS_INT_GREATER_EQUAL: return ua >= ub;
        case TS_INT_POW: return ts_int_pow_bits(ua, ub);
        default: break;
        }
    bool uns = type == TS_U8 || type == TS_U16 || type == TS_U32 || type == TS_U64;
    if (kind == TS_INT_ABS && uns) return a;
    if (kind == TS_INT_POW && b < 0 && a == 0 && type == TS_I32) return INT32_MIN; /* onnxruntime's int32 0^-k */
    int64_t r = ts_int_arith(kind, a, b);
    return kind >= TS_INT_EQUAL && kind <= TS_INT_GREATER_EQUAL ? r : ts_int_as_type(type, r);
}

/* v, of the declared integer type `type`, as the nearest float: a uint64's
 * bits as the unsigned value (2^64-1 is 1.8446744e19, not -1) */
TS_INT_FN float ts_int_to_float(int type, int64_t v) { return type == TS_U64 ? (float)(uint64_t)v : (float)v; }

/* v wrapped to i32 (two's complement), as a cast of an i64 to i32 does */
TS_INT_FN int32_t ts_int_wrap32(int64_t v) { return (int32_t)(uint32_t)(uint64_t)v; }

/* ---- TS_OP_INT_REDUCE: output element o folds the m input elements of
 * its reduced dims, in order, from ts_int_reduce_first: the sums and
 * products wrap in int64 (ts_int_arith), a SumSquare squares and an L1
 * takes |v| (wrapping: |INT64_MIN| is INT64_MIN) before adding, and the
 * result is wrapped to the tensor's width (i32: `bits32`), as numpy's and
 * ONNX's reference reductions in the type. Mean is the exact mean
 * truncated toward zero (onnxruntime's integer ReduceMean wherever its
 * double sum is exact), never overflowing: acc holds the sum of the
 * quotients v / m, rem that of the remainders, kept within (-m, m). */
typedef struct ts_int_fold {
    int64_t acc, rem;
} ts_int_fold;

TS_INT_FN ts_int_fold ts_int_reduce_first(int kind) {
    ts_int_fold f = {kind == TS_INT_RED_PROD ? 1 : kind == TS_INT_RED_MAX ? INT64_MIN : kind == TS_INT_RED_MIN ? INT64_MAX : 0, 0};
    return f;
}

TS_INT_FN ts_int_fold ts_int_reduce_step(int kind, ts_int_fold f, int64_t v, int64_t m) {
    switch (kind) {
    case TS_INT_RED_MEAN:
        f.acc += v / m, f.rem += v % m;
        f.acc += f.rem / m, f.rem %= m;
        return f;
    case TS_INT_RED_PROD: f.acc = ts_int_arith(TS_INT_MUL, f.acc, v); return f;
    case TS_INT_RED_MAX: f.acc = ts_int_arith(TS_INT_MAX, f.acc, v); return f;
    case TS_INT_RED_MIN: f.acc = ts_int_arith(TS_INT_MIN, f.acc, v); return f;
    case TS_INT_RED_SUM_SQUARE: f.acc = ts_int_arith(TS_INT_ADD, f.acc, ts_int_arith(TS_INT_MUL, v, v)); return f;
    case TS_INT_RED_L1: f.acc = ts_int_arith(TS_INT_ADD, f.acc, ts_int_arith(TS_INT_ABS, v, v)); return f;
    default: f.acc = ts_int_arith(TS_INT_ADD, f.acc, v); return f; /* Sum */
    }
}

TS_INT_FN int64_t ts_int_reduce_last(int kind, ts_int_fold f, int bits32) {
    int64_t r = f.acc;
    if (kind == TS_INT_RED_MEAN) r += f.acc > 0 && f.rem < 0 ? -1 : f.acc < 0 && f.rem > 0 ? 1 : 0; /* toward zero */
    return bits32 ? ts_int_wrap32(r) : r;
}

/* The flat input position of the j-th (row-major) of the elements that
 * output element o of the kept shape `kept` (in's, its reduced dims 1)
 * folds. */
TS_INT_FN int64_t ts_int_reduce_at(const ts_shape *in, const ts_shape *kept, int64_t o, int64_t j) {
    int64_t at = 0, stride = 1;
    for (int d = in->ndim - 1; d >= 0; d--) {
        int64_t c;
        if (kept->d[d] == 1) c = j % in->d[d], j /= in->d[d];
        else c = o % kept->d[d], o /= kept->d[d];
        at += c * stride;
        stride *= in->d[d];
    }
    return at;
}

#endif
