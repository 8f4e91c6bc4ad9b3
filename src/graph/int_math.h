/* int_math.h -- what the integer graph ops compute, one definition for
 * every device and for the importer's folds of integer constants:
 * two's-complement wrapping to a type's width and the integer arithmetic of
 * TS_OP_INT_ARITH (kinds: graph.h's TS_INT_*). Plain C, readable by a
 * device compiler. */
#ifndef TS_INT_MATH_H
#define TS_INT_MATH_H

#include "graph/graph.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

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

/* ---- doubles inside the integer ops (the reductions L2, LogSum and
 * LogSumExp, Pow by a float exponent, Resize's interpolation): products
 * and sums rounded one at a time, never fused into an fma (a device
 * compiler fuses a * b + c unless told), so every device computes the
 * same doubles as onnxruntime's and numpy's */
#ifdef __CUDA_ARCH__
#define TS_DMUL(a, b) __dmul_rn((a), (b))
#define TS_DADD(a, b) __dadd_rn((a), (b))
#define TS_DSUB(a, b) __dsub_rn((a), (b))
#else
#define TS_DMUL(a, b) ((a) * (b))
#define TS_DADD(a, b) ((a) + (b))
#define TS_DSUB(a, b) ((a) - (b))
#endif

/* A double (an f32) from its bits held in an integer cell */
TS_INT_FN double ts_int_bits_double(int64_t b) {
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}
TS_INT_FN float ts_int_bits_float(int64_t b) {
    uint32_t u = (uint32_t)(uint64_t)b;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* d toward zero as an integer of 32 bits (bits32) or 64, as x86's
 * conversion (cvttsd2si: onnxruntime's static_cast, numpy's astype) gives
 * it: NaN, the infinities and values outside the type are its minimum */
TS_INT_FN int64_t ts_int_of_double(double d, int bits32) {
    if (bits32) return d > -2147483649.0 && d < 2147483648.0 ? (int64_t)(int32_t)d : INT32_MIN;
    return d >= -9223372036854775808.0 && d < 9223372036854775808.0 ? (int64_t)d : INT64_MIN;
}

/* d toward zero, saturated to the type's ends (onnxruntime's integer
 * ReduceL2, ReduceLogSum and ReduceLogSumExp: at or past the largest
 * value the largest, at or below the smallest the smallest) */
TS_INT_FN int64_t ts_int_saturate_double(double d, int bits32) {
    double hi = bits32 ? 2147483647.0 : 9223372036854775807.0, lo = bits32 ? -2147483648.0 : -9223372036854775808.0;
    if (d >= hi) return bits32 ? INT32_MAX : INT64_MAX;
    if (d <= lo) return bits32 ? INT32_MIN : INT64_MIN;
    return (int64_t)d;
}

/* a (of the declared integer type `type`) to the power e in double, as
 * onnxruntime's Pow of an integer base by a float exponent (std::pow,
 * then a cast to the base's type: ts_int_of_double in its width, int8
 * to uint16 held in i32 wrapped from int32, uint32 and uint64 from
 * int64, a uint64 base read unsigned) */
TS_INT_FN int64_t ts_int_pow_double(int type, int64_t a, double e) {
    double base = type == TS_U64 ? (double)(uint64_t)a : (double)a;
    bool narrow = type == TS_I32 || type == TS_I8 || type == TS_I16 || type == TS_U8 || type == TS_U16;
    return ts_int_as_type(type, ts_int_of_double(pow(base, e), narrow));
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
    case TS_INT_POW_F32: return ts_int_pow_double(TS_I64, a, (double)ts_int_bits_float(b));
    case TS_INT_POW_F64: return ts_int_pow_double(TS_I64, a, ts_int_bits_double(b));
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
    if (kind == TS_INT_POW_F32 || kind == TS_INT_POW_F64)
        return ts_int_pow_double(type, a, kind == TS_INT_POW_F32 ? (double)ts_int_bits_float(b) : ts_int_bits_double(b));
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
 * quotients v / m, rem that of the remainders, kept within (-m, m).
 * L2, LogSum and LogSumExp are onnxruntime's (1.32), in double: L2 and
 * LogSum sum v^2 and v as doubles (compensated, Kahan's, in s and c for
 * an i64 tensor; plainly for an i32 one), then sqrt or log; LogSumExp is
 * the maximum plus the log of how many elements equal it (exp(v - max)
 * of an integer truncates to 1 or 0: acc the maximum, rem the count);
 * each truncated toward zero and saturated to the type (a sum <= 0's
 * LogSum is the type's smallest). */
typedef struct ts_int_fold {
    int64_t acc, rem;
    double s, c;
} ts_int_fold;

TS_INT_FN ts_int_fold ts_int_reduce_first(int kind) {
    ts_int_fold f = {kind == TS_INT_RED_PROD ? 1 : kind == TS_INT_RED_MAX || kind == TS_INT_RED_LOG_SUM_EXP ? INT64_MIN : kind == TS_INT_RED_MIN ? INT64_MAX : 0,
                     0, 0.0, 0.0};
    return f;
}

/* f.s += y, Kahan-compensated in f.c where `kahan` */
TS_INT_FN ts_int_fold ts_int_fold_add(ts_int_fold f, double y, int kahan) {
    if (!kahan) {
        f.s = TS_DADD(f.s, y);
        return f;
    }
    double z = TS_DSUB(y, f.c), t = TS_DADD(f.s, z);
    f.c = TS_DSUB(TS_DSUB(t, f.s), z);
    f.s = t;
    return f;
}

TS_INT_FN ts_int_fold ts_int_reduce_step(int kind, ts_int_fold f, int64_t v, int64_t m, int bits32) {
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
    case TS_INT_RED_L2: return ts_int_fold_add(f, TS_DMUL((double)v, (double)v), !bits32);
    case TS_INT_RED_LOG_SUM: return ts_int_fold_add(f, (double)v, !bits32);
    case TS_INT_RED_LOG_SUM_EXP:
        if (v > f.acc || f.rem == 0) f.acc = v, f.rem = 0;
        if (v == f.acc) f.rem++;
        return f;
    default: f.acc = ts_int_arith(TS_INT_ADD, f.acc, v); return f; /* Sum */
    }
}

TS_INT_FN int64_t ts_int_reduce_last(int kind, ts_int_fold f, int bits32) {
    int64_t r = f.acc;
    if (kind == TS_INT_RED_MEAN) r += f.acc > 0 && f.rem < 0 ? -1 : f.acc < 0 && f.rem > 0 ? 1 : 0; /* toward zero */
    if (kind == TS_INT_RED_L2) return ts_int_saturate_double(sqrt(f.s), bits32);
    if (kind == TS_INT_RED_LOG_SUM) return f.s <= 0.0 ? (bits32 ? INT32_MIN : INT64_MIN) : ts_int_saturate_double(log(f.s), bits32);
    if (kind == TS_INT_RED_LOG_SUM_EXP) return ts_int_saturate_double(TS_DADD(log((double)f.rem), (double)f.acc), bits32);
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

/* ---- TS_OP_INT_RESIZE (graph.h): its levels unpacked from attr and the
 * output shape (offset: where level L's taps begin), and one output
 * element, as ONNX's reference Resize computes it: the input as doubles,
 * each level's sum over its taps of weight * the value below, in order,
 * then rounded half to even and clipped into the declared type `type`
 * (numpy's saturate_cast; an int64 at or past 2^63 converts to INT64_MIN,
 * as numpy's clipped 2^63 does) */
typedef struct ts_int_resize_plan {
    int levels, dim[TS_MAX_DIMS], taps[TS_MAX_DIMS];
    bool pairwise[TS_MAX_DIMS]; /* the level's sums are numpy's pairwise ones (its taps along the reference's last axis) */
    int64_t offset[TS_MAX_DIMS], stride[TS_MAX_DIMS]; /* stride: x's, per dim */
} ts_int_resize_plan;

TS_INT_FN ts_int_resize_plan ts_int_resize_plan_of(const int64_t *attr, const ts_shape *in, const ts_shape *out) {
    ts_int_resize_plan p;
    int64_t at = 0, st = 1;
    for (int d = in->ndim - 1; d >= 0; d--) p.stride[d] = st, st *= in->d[d];
    p.levels = 0;
    for (int L = 0; L < TS_MAX_DIMS && (attr[2 * L + 1] & 0xffff) != 0; L++) {
        p.dim[L] = (int)(attr[2 * L] & 255), p.pairwise[L] = (attr[2 * L] >> 8) & 1, p.taps[L] = (int)(attr[2 * L + 1] & 0xffff), p.offset[L] = at;
        at += out->d[p.dim[L]] * p.taps[L];
        p.levels = L + 1;
    }
    return p;
}

TS_INT_FN int64_t ts_int_resize_last(double d, int type) {
    double r = rint(d), lo, hi;
    switch (type) {
    case TS_I8: lo = -128.0, hi = 127.0; break;
    case TS_U8: lo = 0.0, hi = 255.0; break;
    case TS_I16: lo = -32768.0, hi = 32767.0; break;
    case TS_U16: lo = 0.0, hi = 65535.0; break;
    case TS_I32: lo = -2147483648.0, hi = 2147483647.0; break;
    case TS_U32: lo = 0.0, hi = 4294967295.0; break;
    default: return ts_int_of_double(r, 0);
    }
    return r != r ? (int64_t)lo : r <= lo ? (int64_t)lo : r >= hi ? (int64_t)hi : (int64_t)r;
}

/* Term i of a level's n into its sum: in order, or numpy's pairwise sum
 * (8 lanes over the first multiple of 8 terms, joined as a tree, then
 * the rest in order; more than 128 terms are split in halves there,
 * which this does not mirror) */
TS_INT_FN void ts_int_resize_add(double *acc, double *lane, bool pairwise, int i, int n, double term) {
    int m8 = n - n % 8;
    if (!pairwise || n < 8) *acc = i == 0 ? term : TS_DADD(*acc, term);
    else if (i < 8) lane[i] = term;
    else if (i < m8) lane[i % 8] = TS_DADD(lane[i % 8], term);
    else *acc = TS_DADD(*acc, term);
    if (pairwise && n >= 8 && i == m8 - 1)
        *acc = TS_DADD(TS_DADD(TS_DADD(lane[0], lane[1]), TS_DADD(lane[2], lane[3])), TS_DADD(TS_DADD(lane[4], lane[5]), TS_DADD(lane[6], lane[7])));
}

/* output element o (x: i64 cells where x64, else i32) */
TS_INT_FN int64_t ts_int_resize_at(const ts_int_resize_plan *p, const void *x, int x64, const int32_t *taps, const int64_t *w, const ts_shape *out,
                                   int64_t o, int type) {
    int64_t base[TS_MAX_DIMS], at = 0;
    int t[TS_MAX_DIMS], lo = 0;
    double acc[TS_MAX_DIMS], lane[TS_MAX_DIMS][8], leaf = 0.0;
    for (int d = out->ndim - 1; d >= 0; d--) {
        int64_t c = o % out->d[d];
        o /= out->d[d];
        bool resized = false;
        for (int L = 0; L < p->levels; L++) {
            if (p->dim[L] != d) continue;
            resized = true, base[L] = p->offset[L] + c * p->taps[L], t[L] = 0;
        }
        if (!resized) at += c * p->stride[d]; /* the dims no level resizes: the output's position, the input's */
    }
    for (int L = 0; L < p->levels; L++)
        if (taps[base[L]] < 0) lo = L + 1, leaf = ts_int_bits_double(w[base[L]]); /* extrapolated: the levels below are not read */
    for (int L = lo; L < p->levels; L++) at += taps[base[L]] * p->stride[p->dim[L]];
    for (;;) {
        double v = leaf;
        if (lo == 0) v = x64 ? (double)((const int64_t *)x)[at] : (double)((const int32_t *)x)[at];
        int L = lo;
        for (; L < p->levels; L++) { /* v into level L's sum; a level done passes its sum up */
            double term = TS_DMUL(v, ts_int_bits_double(w[base[L] + t[L]]));
            ts_int_resize_add(&acc[L], lane[L], p->pairwise[L], t[L], p->taps[L], term);
            int64_t from = taps[base[L] + t[L]];
            if (++t[L] < p->taps[L]) {
                at += (taps[base[L] + t[L]] - from) * p->stride[p->dim[L]];
                break;
            }
            t[L] = 0, at += (taps[base[L]] - from) * p->stride[p->dim[L]], v = acc[L];
        }
        if (L == p->levels) return ts_int_resize_last(v, type);
    }
}

#endif
