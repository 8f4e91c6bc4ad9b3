/* onnx_consts.c -- host constants of an ONNX import and the ops folded on
 * them. Shapes here are tiny (a handful of int64s, a [T,T] mask), so the
 * kernels are plain loops over a multi-index. */
#include "import/onnx_consts.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph/int_math.h" /* ts_int_arith_in, ts_int_wrap_bits: the integer graph ops' arithmetic */
#include "core/half.h"
#include "core/lowbits.h"

#define CONST_MAX_ELEMS ((int64_t)1 << 26) /* folded tensors stay small */
#define MAX_FOLD_INPUTS 64 /* Concat's most */

/* The bytes of folded constants alive in this thread's import, and the
 * most they may hold (ts_const_budget). */
static _Thread_local uint64_t budget_live, budget_limit = UINT64_MAX;

void ts_const_budget(uint64_t limit) {
    budget_live = 0;
    budget_limit = limit;
}

ts_status ts_const_charge(uint64_t bytes) {
    uint64_t need;
    if (__builtin_add_overflow(budget_live, bytes, &need) || need > budget_limit)
        return ts_limit_exceeded(TS_LIMIT_IMPORT_BYTES, "the constants folded at import (those still in use and this node's)",
                                 need < budget_live ? UINT64_MAX : need);
    budget_live = need;
    return TS_OK;
}

void ts_const_release(uint64_t bytes) { budget_live -= bytes <= budget_live ? bytes : budget_live; }

bool ts_onnx_int_value(double v, int64_t lo, int64_t hi, int64_t *out) {
    /* (double)hi may round up past hi: compare against 2^63 exactly */
    if (!(v >= (double)lo) || !(v < 9223372036854775808.0) || (int64_t)v > hi) return false;
    *out = (int64_t)v;
    return true;
}

size_t ts_onnx_dtype_size(int dt) {
    switch (dt) {
    case TS_ONNX_FLOAT: case TS_ONNX_INT32: case TS_ONNX_UINT32: return 4;
    case TS_ONNX_INT64: case TS_ONNX_DOUBLE: case TS_ONNX_UINT64: return 8;
    case TS_ONNX_UINT8: case TS_ONNX_INT8: case TS_ONNX_BOOL: return 1;
    case TS_ONNX_UINT16: case TS_ONNX_INT16: case TS_ONNX_FLOAT16: case TS_ONNX_BFLOAT16: return 2;
    default: return ts_lowbits_is(dt) ? 1 : 0;
    }
}

size_t ts_onnx_data_bytes(int dt, size_t n) {
    return ts_lowbits_is(dt) ? (n * (size_t)ts_lowbits_width(dt) + 7) / 8 : n * ts_onnx_dtype_size(dt);
}

const char *ts_onnx_dtype_name(int dt) {
    static const char *const names[] = {"undefined", "float", "uint8", "int8", "uint16", "int16", "int32", "int64", "string",
                                        "bool", "float16", "double", "uint32", "uint64", "complex64", "complex128", "bfloat16",
                                        "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "uint4", "int4",
                                        "float4e2m1", "float8e8m0", "uint2", "int2", "float6e2m3", "float6e3m2"};
    return dt >= 0 && dt < (int)TS_ARRAY_LEN(names) ? names[dt] : "unknown";
}

bool ts_onnx_dtype_is_float(int dt) {
    return dt == TS_ONNX_FLOAT || dt == TS_ONNX_DOUBLE || dt == TS_ONNX_FLOAT16 || dt == TS_ONNX_BFLOAT16 ||
           (ts_lowbits_is(dt) && dt != TS_LOWBITS_INT4 && dt != TS_LOWBITS_UINT4 && dt != TS_LOWBITS_INT2 && dt != TS_LOWBITS_UINT2);
}

static uint64_t le(const uint8_t *b, size_t n) {
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) x |= (uint64_t)b[i] << (8 * i);
    return x;
}

void ts_onnx_decode_raw(int dt, const uint8_t *b, size_t n, double *out) {
    if (ts_lowbits_is(dt)) {
        unsigned w = (unsigned)ts_lowbits_width(dt), per = 8u / w;
        for (size_t i = 0; i < n; i++)
            out[i] = ts_lowbits_to_f32(dt, (uint8_t)((b[i / per] >> (w * (unsigned)(i % per))) & ((1u << w) - 1u)));
        return;
    }
    size_t es = ts_onnx_dtype_size(dt);
    for (size_t i = 0; i < n; i++, b += es) {
        uint64_t x = le(b, es);
        switch (dt) {
        case TS_ONNX_FLOAT: out[i] = ts_bits_float((uint32_t)x); break;
        case TS_ONNX_DOUBLE: { double d; memcpy(&d, &x, 8); out[i] = d; break; }
        case TS_ONNX_FLOAT16: out[i] = ts_f16_to_f32((uint16_t)x); break;
        case TS_ONNX_BFLOAT16: out[i] = ts_bf16_to_f32((uint16_t)x); break;
        case TS_ONNX_INT8: out[i] = (int8_t)x; break;
        case TS_ONNX_INT16: out[i] = (int16_t)x; break;
        case TS_ONNX_INT32: out[i] = (int32_t)x; break;
        case TS_ONNX_INT64: out[i] = (double)(int64_t)x; break;
        case TS_ONNX_BOOL: out[i] = x != 0; break;
        default: out[i] = (double)x; break; /* unsigned */
        }
    }
}

void ts_const_free(ts_const *c) {
    if (!c) return;
    ts_free(c->v);
    c->v = NULL;
    ts_free(c->iv);
    c->iv = NULL;
    ts_const_release(c->bytes);
    c->bytes = 0;
}

ts_status ts_const_fill(const ts_shape *s, int dtype, double v, ts_const *out) {
    int64_t n = ts_shape_numel(s);
    if (n < 0 || n > CONST_MAX_ELEMS)
        return ts_error(TS_ERR_UNSUPPORTED, "a constant of %lld elements is too large to fold at import", (long long)n);
    uint64_t bytes = (uint64_t)(n ? n : 1) * sizeof *out->v;
    ts_status st = ts_const_charge(bytes);
    if (st) return st;
    out->dtype = dtype;
    out->shape = *s;
    out->bytes = bytes;
    out->iv = NULL;
    out->v = ts_malloc((size_t)bytes);
    if (!out->v) {
        budget_live -= bytes;
        out->bytes = 0;
        return TS_ERR_OUT_OF_MEMORY;
    }
    for (int64_t i = 0; i < n; i++) out->v[i] = v;
    return TS_OK;
}

ts_status ts_const_copy(const ts_const *a, ts_const *out) {
    ts_status st = ts_const_fill(&a->shape, a->dtype, 0, out);
    if (!st) memcpy(out->v, a->v, (size_t)ts_shape_numel(&a->shape) * sizeof *out->v);
    return st;
}

ts_status ts_const_copy_exact(const ts_const *a, ts_const *out) {
    ts_status st = ts_const_copy(a, out);
    if (!st && a->iv) st = ts_const_set_exact(out, a->iv, ts_shape_numel(&a->shape));
    if (st) ts_const_free(out);
    return st;
}

ts_status ts_const_set_exact(ts_const *c, const int64_t *x, int64_t n) {
    const int64_t limit = (int64_t)1 << 53;
    int64_t i = 0;
    while (i < n && x[i] >= -limit && x[i] <= limit && !(c->dtype == TS_ONNX_UINT64 && x[i] < 0)) i++; /* a uint64's bits past 2^63 */
    if (i == n) return TS_OK;
    uint64_t bytes = (uint64_t)n * sizeof *c->iv;
    ts_status st = ts_const_charge(bytes);
    if (st) return st;
    if (!(c->iv = ts_malloc((size_t)bytes))) {
        ts_const_release(bytes);
        return TS_ERR_OUT_OF_MEMORY;
    }
    memcpy(c->iv, x, (size_t)bytes);
    c->bytes += bytes;
    return TS_OK;
}

/* v rounded to f32 toward zero with the last bit set when inexact
 * ("round to odd"): rounding that to the 11 or 8 bits of f16 or bf16 to
 * nearest even gives the direct rounding of v, where (float)v then the
 * 16-bit rounding could make a tie of a value just off one. */
static float f32_round_to_odd(double v) {
    float f = (float)v;
    if (!isfinite(v) || (double)f == v || fabs(v) > FLT_MAX) return f;
    if (fabs((double)f) > fabs(v)) f = nextafterf(f, 0.0f);
    return ts_bits_float(ts_float_bits(f) | 1u);
}

/* v rounded to the nearest float16 (dt TS_ONNX_FLOAT16) or bfloat16 value,
 * ties to even, once (not through float32's rounding first). */
static double round_half(int dt, double v) {
    float f = f32_round_to_odd(v);
    return dt == TS_ONNX_FLOAT16 ? ts_f16_to_f32(ts_f32_to_f16(f)) : ts_bf16_to_f32(ts_f32_to_bf16(f));
}

/* A value as the type dt holds it: float32 rounding (float16, bfloat16:
 * to nearest even), integer truncation; the low-precision types by their
 * conversion (core/lowbits.h) with the flags `mode`. */
static double as_type_mode(int dt, double v, int mode) {
    if (ts_lowbits_is(dt)) return ts_lowbits_round(dt, f32_round_to_odd(v), mode);
    if (dt == TS_ONNX_FLOAT) return (double)(float)v;
    if (dt == TS_ONNX_FLOAT16 || dt == TS_ONNX_BFLOAT16) return round_half(dt, v);
    if (ts_onnx_dtype_is_float(dt)) return v;
    if (dt == TS_ONNX_BOOL) return v != 0;
    return isfinite(v) ? trunc(v) : 0;
}

static double as_type(int dt, double v) { return as_type_mode(dt, v, TS_LOWBITS_SATURATE); }

/* ---- integer constants: folded exactly in int64 (the graph's integer
 * arithmetic, backend/ew_math.h), wrapped to their type as ONNX's integer
 * ops wrap; a uint64 beyond int64 is held as its bits. */

static bool int_type(int dt) { return !ts_onnx_dtype_is_float(dt) && !ts_lowbits_is(dt) && dt != TS_ONNX_BOOL && ts_onnx_dtype_size(dt) != 0; }

/* Element i of an integer constant exactly: its exact values (iv) where
 * it has them, else v (NaN as INT64_MIN, beyond the range its end). */
static int64_t int_at(const ts_const *c, int64_t i) {
    int64_t k;
    if (c->iv) return c->iv[i];
    if (ts_onnx_int_value(c->v[i], INT64_MIN, INT64_MAX, &k)) return k;
    if (c->v[i] >= 9223372036854775808.0 && c->v[i] < 18446744073709551616.0) return (int64_t)(uint64_t)c->v[i]; /* a uint64's bits */
    return c->v[i] > 0 ? INT64_MAX : INT64_MIN;
}

/* x wrapped to the integer type dt: two's complement truncation */
static int64_t int_wrap(int dt, int64_t x) {
    bool uns = dt == TS_ONNX_UINT8 || dt == TS_ONNX_UINT16 || dt == TS_ONNX_UINT32 || dt == TS_ONNX_UINT64;
    return ts_int_wrap_bits(x, (int)ts_onnx_dtype_size(dt) * 8, uns);
}

/* out's n values, out's type's already: v (a uint64's from its bits) and,
 * where one is beyond 2^53, iv exactly. x is freed. */
static ts_status set_ints(ts_const *out, int64_t *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) out->v[i] = out->dtype == TS_ONNX_UINT64 ? (double)(uint64_t)x[i] : (double)x[i];
    ts_status st = ts_const_set_exact(out, x, n);
    ts_free(x);
    ts_const_release((uint64_t)(n ? n : 1) * sizeof *x);
    if (st) ts_const_free(out);
    return st;
}

/* Room for n exact values (charged until set_ints gives it back). */
static int64_t *int_room(int64_t n, ts_status *st) {
    uint64_t bytes = (uint64_t)(n ? n : 1) * sizeof(int64_t);
    if ((*st = ts_const_charge(bytes))) return NULL;
    int64_t *x = ts_malloc((size_t)bytes);
    if (!x) {
        ts_const_release(bytes);
        *st = TS_ERR_OUT_OF_MEMORY;
    }
    return x;
}

/* The ts_int_kind of an ONNX op folded on integers, -1 for none. */
static int int_kind(const char *op, int dt) {
    static const struct { const char *op; int kind; } kinds[] = {
        {"Add", TS_INT_ADD}, {"Sub", TS_INT_SUB}, {"Mul", TS_INT_MUL}, {"Div", TS_INT_DIV}, {"Mod", TS_INT_MOD}, {"FMod", TS_INT_FMOD},
        {"Min", TS_INT_MIN}, {"Max", TS_INT_MAX}, {"Equal", TS_INT_EQUAL}, {"Less", TS_INT_LESS}, {"LessOrEqual", TS_INT_LESS_EQUAL},
        {"Greater", TS_INT_GREATER}, {"GreaterOrEqual", TS_INT_GREATER_EQUAL}, {"Neg", TS_INT_NEG}, {"Abs", TS_INT_ABS},
    };
    for (size_t i = 0; int_type(dt) && i < TS_ARRAY_LEN(kinds); i++)
        if (strcmp(op, kinds[i].op) == 0) return kinds[i].kind;
    return -1;
}

/* ts_int_arith in int64 or, for a uint64 dt (ONNX's type), on the bits
 * read unsigned, as the graph ops compute it (ts_int_arith_in); the
 * caller wraps the result to dt (the narrower types' values are
 * non-negative or signed as int64 reads them) */
static int64_t int_arith(int dt, int kind, int64_t a, int64_t b) { return ts_int_arith_in(dt == TS_ONNX_UINT64 ? TS_U64 : TS_I64, kind, a, b); }

static const char *shape_s(const ts_shape *s, char *buf) { return ts_shape_str(s, buf, 96); }

/* NumPy broadcasting of a and b into out. */
static ts_status broadcast(const ts_shape *a, const ts_shape *b, ts_shape *out) {
    int n = a->ndim > b->ndim ? a->ndim : b->ndim;
    out->ndim = n;
    for (int i = 0; i < n; i++) {
        int ia = i - (n - a->ndim), ib = i - (n - b->ndim);
        int64_t da = ia >= 0 ? a->d[ia] : 1, db = ib >= 0 ? b->d[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            char x[96], y[96];
            return ts_error(TS_ERR_SHAPE, "shapes %s and %s do not broadcast", shape_s(a, x), shape_s(b, y));
        }
        out->d[i] = da == 1 ? db : da;
    }
    return TS_OK;
}

/* Flat index into `in` (broadcast to `out`) of out's multi-index idx. */
static int64_t bindex(const ts_shape *in, const ts_shape *out, const int64_t *idx) {
    int64_t k = 0;
    int off = out->ndim - in->ndim;
    for (int i = 0; i < in->ndim; i++) k = k * in->d[i] + (in->d[i] == 1 ? 0 : idx[i + off]);
    return k;
}

static void next_index(const ts_shape *s, int64_t *idx) {
    for (int i = s->ndim - 1; i >= 0; i--) {
        if (++idx[i] < s->d[i]) return;
        idx[i] = 0;
    }
}

/* x op y for the binary ops that fold (ONNX's names; FMod is Mod with
 * fmod=1), in double: floats, bools, and Pow (integers fold exactly by
 * int_kind); false for an op that does not fold. */
static bool apply_binary(const char *op, int dt, double x, double y, double *r) {
    if (strcmp(op, "Add") == 0) *r = x + y;
    else if (strcmp(op, "Sub") == 0) *r = x - y;
    else if (strcmp(op, "Mul") == 0) *r = x * y;
    else if (strcmp(op, "Div") == 0) *r = ts_onnx_dtype_is_float(dt) ? x / y : (y == 0 ? 0 : trunc(x / y));
    else if (strcmp(op, "Pow") == 0) *r = pow(x, y);
    else if (strcmp(op, "FMod") == 0) *r = !ts_onnx_dtype_is_float(dt) && y == 0 ? 0 : fmod(x, y);
    else if (strcmp(op, "Mod") == 0) { /* the sign of the divisor */
        *r = !ts_onnx_dtype_is_float(dt) && y == 0 ? 0 : fmod(x, y);
        if (*r != 0 && (*r < 0) != (y < 0)) *r += y;
    } else if (strcmp(op, "Equal") == 0) *r = x == y;
    else if (strcmp(op, "Greater") == 0) *r = x > y;
    else if (strcmp(op, "GreaterOrEqual") == 0) *r = x >= y;
    else if (strcmp(op, "Less") == 0) *r = x < y;
    else if (strcmp(op, "LessOrEqual") == 0) *r = x <= y;
    else if (strcmp(op, "And") == 0) *r = x != 0 && y != 0;
    else if (strcmp(op, "Or") == 0) *r = x != 0 || y != 0;
    else if (strcmp(op, "Xor") == 0) *r = (x != 0) != (y != 0);
    else return false;
    return true;
}

static bool bool_result(const char *op) {
    static const char *const ops[] = {"Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "And", "Or", "Xor"};
    for (size_t i = 0; i < TS_ARRAY_LEN(ops); i++)
        if (strcmp(op, ops[i]) == 0) return true;
    return false;
}

ts_status ts_const_binary(const char *op, const ts_const *a, const ts_const *b, ts_const *out) {
    double r;
    int kind = int_type(b->dtype) ? int_kind(op, a->dtype) : -1;
    if (kind < 0 && !apply_binary(op, a->dtype, 0, 1, &r)) return ts_error(TS_ERR_UNSUPPORTED, "%s cannot be folded", op);
    ts_shape s;
    ts_status st = broadcast(&a->shape, &b->shape, &s);
    if (st) return st;
    int dt = bool_result(op) ? TS_ONNX_BOOL : a->dtype;
    st = ts_const_fill(&s, dt, 0, out);
    if (st) return st;
    int64_t idx[TS_MAX_DIMS] = {0}, n = ts_shape_numel(&s);
    if (kind >= 0) { /* integers: exactly, wrapped to the type */
        int64_t *x = int_room(n, &st);
        if (!x) {
            ts_const_free(out);
            return st;
        }
        for (int64_t i = 0; i < n; i++, next_index(&s, idx)) {
            int64_t v = int_arith(a->dtype, kind, int_at(a, bindex(&a->shape, &s, idx)), int_at(b, bindex(&b->shape, &s, idx)));
            x[i] = dt == TS_ONNX_BOOL ? v : int_wrap(dt, v);
        }
        return set_ints(out, x, n);
    }
    for (int64_t i = 0; i < n; i++, next_index(&s, idx)) {
        apply_binary(op, a->dtype, a->v[bindex(&a->shape, &s, idx)], b->v[bindex(&b->shape, &s, idx)], &r);
        out->v[i] = as_type(dt, r);
    }
    return TS_OK;
}

ts_status ts_const_unary(const char *op, const ts_const *x, ts_const *out) {
    ts_status st = ts_const_copy(x, out);
    if (st) return st;
    if (strcmp(op, "Not") == 0) out->dtype = TS_ONNX_BOOL;
    int64_t n = ts_shape_numel(&x->shape);
    int kind = int_kind(op, x->dtype);
    if (kind == TS_INT_NEG || kind == TS_INT_ABS) { /* integers: exactly, wrapped (-INT64_MIN is INT64_MIN) */
        int64_t *y = int_room(n, &st);
        if (!y) {
            ts_const_free(out);
            return st;
        }
        for (int64_t i = 0; i < n; i++) y[i] = int_wrap(x->dtype, int_arith(x->dtype, kind, int_at(x, i), 0));
        return set_ints(out, y, n);
    }
    for (int64_t i = 0; i < n; i++) {
        double v = x->v[i];
        if (strcmp(op, "Abs") == 0) v = fabs(v);
        else if (strcmp(op, "Ceil") == 0) v = ceil(v);
        else if (strcmp(op, "Floor") == 0) v = floor(v);
        else if (strcmp(op, "Log") == 0) v = log(v);
        else if (strcmp(op, "Exp") == 0) v = exp(v);
        else if (strcmp(op, "Erf") == 0) v = erf(v);
        else if (strcmp(op, "Neg") == 0) v = -v;
        else if (strcmp(op, "Not") == 0) v = v == 0;
        else if (strcmp(op, "Reciprocal") == 0) v = 1.0 / v;
        else if (strcmp(op, "Relu") == 0) v = v > 0 ? v : 0;
        else if (strcmp(op, "Sqrt") == 0) v = sqrt(v);
        else if (strcmp(op, "Tanh") == 0) v = tanh(v);
        else if (strcmp(op, "Sigmoid") == 0) v = 1.0 / (1.0 + exp(-v));
        else if (strcmp(op, "Sin") == 0) v = sin(v);
        else if (strcmp(op, "Cos") == 0) v = cos(v);
        else if (strcmp(op, "Tan") == 0) v = tan(v);
        else if (strcmp(op, "Asin") == 0) v = asin(v);
        else if (strcmp(op, "Acos") == 0) v = acos(v);
        else if (strcmp(op, "Atan") == 0) v = atan(v);
        else if (strcmp(op, "Sinh") == 0) v = sinh(v);
        else if (strcmp(op, "Cosh") == 0) v = cosh(v);
        else if (strcmp(op, "Asinh") == 0) v = asinh(v);
        else if (strcmp(op, "Acosh") == 0) v = acosh(v);
        else if (strcmp(op, "Atanh") == 0) v = atanh(v);
        else {
            ts_const_free(out);
            return ts_error(TS_ERR_UNSUPPORTED, "%s cannot be folded", op);
        }
        out->v[i] = as_type(out->dtype, v);
    }
    return TS_OK;
}

ts_status ts_const_reshape_target(const ts_shape *in, const int64_t *want, int n, bool allowzero, ts_shape *out) {
    char a[96];
    if (n < 0 || n > TS_MAX_DIMS) return ts_error(TS_ERR_UNSUPPORTED, "a reshape to %d dimensions (at most %d)", n, TS_MAX_DIMS);
    out->ndim = n;
    int minus = -1;
    int64_t known = 1;
    for (int i = 0; i < n; i++) {
        int64_t d = want[i];
        if (d == 0 && !allowzero) {
            if (i >= in->ndim) return ts_error(TS_ERR_SHAPE, "reshape target dimension %d is 0 (copy) but the input %s has no such dimension", i, shape_s(in, a));
            d = in->d[i];
        }
        if (d == -1) {
            if (minus >= 0) return ts_error(TS_ERR_SHAPE, "reshape target has more than one -1");
            minus = i;
            continue;
        }
        if (d < 0) return ts_error(TS_ERR_SHAPE, "reshape target dimension %d is %lld", i, (long long)d);
        out->d[i] = d;
        if (__builtin_mul_overflow(known, d, &known) || known > TS_MAX_NUMEL)
            return ts_error(TS_ERR_SHAPE, "reshape target dimensions up to %d hold more than 2^34 elements", i);
    }
    int64_t numel = ts_shape_numel(in);
    if (minus >= 0) {
        if (known == 0 || numel % known) return ts_error(TS_ERR_SHAPE, "%s cannot be reshaped with a -1 over %lld known elements", shape_s(in, a), (long long)known);
        out->d[minus] = numel / known;
    }
    if (ts_shape_numel(out) != numel) {
        char b[96];
        return ts_error(TS_ERR_SHAPE, "%s cannot be reshaped to %s", shape_s(in, a), shape_s(out, b));
    }
    return TS_OK;
}

ts_status ts_const_squeeze_shape(const ts_shape *in, const int64_t *axes, int n, bool unsqueeze, ts_shape *out) {
    char a[96];
    if (unsqueeze) {
        if (n < 0) return ts_error(TS_ERR_FORMAT, "Unsqueeze needs axes");
        int r = in->ndim + n;
        if (r > TS_MAX_DIMS) return ts_error(TS_ERR_UNSUPPORTED, "Unsqueeze to %d dimensions (at most %d)", r, TS_MAX_DIMS);
        bool at[TS_MAX_DIMS] = {false};
        for (int i = 0; i < n; i++) {
            int64_t ax = axes[i] < 0 ? axes[i] + r : axes[i];
            if (ax < 0 || ax >= r || at[ax]) return ts_error(TS_ERR_SHAPE, "Unsqueeze axis %lld is out of range or repeated", (long long)axes[i]);
            at[ax] = true;
        }
        out->ndim = r;
        for (int i = 0, k = 0; i < r; i++) out->d[i] = at[i] ? 1 : in->d[k++];
        return TS_OK;
    }
    bool drop[TS_MAX_DIMS] = {false};
    for (int i = 0; i < in->ndim; i++) drop[i] = n < 0 && in->d[i] == 1;
    for (int i = 0; i < n; i++) {
        int64_t ax = axes[i] < 0 ? axes[i] + in->ndim : axes[i];
        if (ax < 0 || ax >= in->ndim || in->d[ax] != 1)
            return ts_error(TS_ERR_SHAPE, "Squeeze axis %lld of %s is not a dimension of size 1", (long long)axes[i], shape_s(in, a));
        drop[ax] = true;
    }
    out->ndim = 0;
    for (int i = 0; i < in->ndim; i++)
        if (!drop[i]) out->d[out->ndim++] = in->d[i];
    return TS_OK;
}

/* ---------------------------------------------------------- folded ops */

static ts_status need_inputs(const char *op, const ts_const *const *in, int n_in, int lo, int hi) {
    if (n_in < lo || n_in > hi) return ts_error(TS_ERR_FORMAT, "%s needs %d to %d inputs, has %d", op, lo, hi, n_in);
    for (int i = 0; i < lo; i++)
        if (!in[i]) return ts_error(TS_ERR_FORMAT, "%s: input %d is missing", op, i);
    return TS_OK;
}

static ts_status shape_from(const ts_const *c, ts_shape *s) {
    int64_t n = ts_shape_numel(&c->shape);
    if (c->shape.ndim > 1 || n > TS_MAX_DIMS) return ts_error(TS_ERR_UNSUPPORTED, "a shape of %lld dimensions (at most %d)", (long long)n, TS_MAX_DIMS);
    s->ndim = (int)n;
    for (int i = 0; i < s->ndim; i++) {
        if (!ts_onnx_int_value(c->v[i], 0, (int64_t)1 << 32, &s->d[i]))
            return ts_error(TS_ERR_SHAPE, "shape dimension %g is out of range (0 to 2^32)", c->v[i]);
    }
    return TS_OK;
}

static ts_status fold_cast(const ts_const *x, int to, int mode, ts_const *out) {
    if (!ts_onnx_dtype_size(to)) return ts_error(TS_ERR_UNSUPPORTED, "Cast to %s", ts_onnx_dtype_name(to));
    ts_status st = ts_const_copy(x, out);
    if (st) return st;
    out->dtype = to;
    int64_t n = ts_shape_numel(&x->shape);
    if (int_type(x->dtype) && int_type(to)) { /* integers: exactly, wrapped to the type (int64 300 as int8 is 44) */
        int64_t *y = int_room(n, &st);
        if (!y) {
            ts_const_free(out);
            return st;
        }
        for (int64_t i = 0; i < n; i++) y[i] = int_wrap(to, int_at(x, i));
        return set_ints(out, y, n);
    }
    for (int64_t i = 0; i < ts_shape_numel(&x->shape); i++) out->v[i] = as_type_mode(to, x->v[i], mode);
    return TS_OK;
}

static ts_status fold_concat(const ts_const *const *in, int n, int64_t axis, ts_const *out) {
    const ts_shape *s0 = &in[0]->shape;
    if (axis < -s0->ndim || axis >= s0->ndim) return ts_error(TS_ERR_SHAPE, "Concat axis %lld is out of range", (long long)axis);
    int ax = (int)(axis < 0 ? axis + s0->ndim : axis);
    ts_shape s = *s0;
    s.d[ax] = 0;
    for (int k = 0; k < n; k++) {
        if (!in[k] || in[k]->shape.ndim != s0->ndim) return ts_error(TS_ERR_SHAPE, "Concat of inputs with different ranks");
        for (int i = 0; i < s.ndim; i++)
            if (i != ax && in[k]->shape.d[i] != s0->d[i]) return ts_error(TS_ERR_SHAPE, "Concat: inputs differ off the axis");
        s.d[ax] += in[k]->shape.d[ax];
    }
    ts_status st = ts_const_fill(&s, in[0]->dtype, 0, out);
    if (st) return st;
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < ax; i++) outer *= s.d[i];
    for (int i = ax + 1; i < s.ndim; i++) inner *= s.d[i];
    double *p = out->v;
    for (int64_t o = 0; o < outer; o++)
        for (int k = 0; k < n; k++) {
            int64_t m = in[k]->shape.d[ax] * inner;
            memcpy(p, in[k]->v + o * m, (size_t)m * sizeof *p);
            p += m;
        }
    return TS_OK;
}

static ts_status fold_gather(const ts_const *data, const ts_const *idx, int64_t axis, ts_const *out) {
    const ts_shape *ds = &data->shape;
    if (axis < -ds->ndim || axis >= ds->ndim) return ts_error(TS_ERR_SHAPE, "Gather axis %lld is out of range", (long long)axis);
    int ax = (int)(axis < 0 ? axis + ds->ndim : axis);
    ts_shape s = {.ndim = ds->ndim - 1 + idx->shape.ndim};
    if (s.ndim > TS_MAX_DIMS) return ts_error(TS_ERR_UNSUPPORTED, "Gather result of %d dimensions", s.ndim);
    int k = 0;
    for (int i = 0; i < ax; i++) s.d[k++] = ds->d[i];
    for (int i = 0; i < idx->shape.ndim; i++) s.d[k++] = idx->shape.d[i];
    for (int i = ax + 1; i < ds->ndim; i++) s.d[k++] = ds->d[i];
    ts_status st = ts_const_fill(&s, data->dtype, 0, out);
    if (st) return st;
    int64_t outer = 1, inner = 1, ni = ts_shape_numel(&idx->shape), dim = ds->d[ax];
    for (int i = 0; i < ax; i++) outer *= ds->d[i];
    for (int i = ax + 1; i < ds->ndim; i++) inner *= ds->d[i];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < ni; j++) {
            int64_t x;
            if (!ts_onnx_int_value(idx->v[j], -dim, dim - 1, &x)) {
                ts_const_free(out);
                return ts_error(TS_ERR_SHAPE, "Gather index %g is out of range for a dimension of %lld", idx->v[j], (long long)dim);
            }
            if (x < 0) x += dim;
            memcpy(out->v + (o * ni + j) * inner, data->v + (o * dim + x) * inner, (size_t)inner * sizeof *out->v);
        }
    return TS_OK;
}

/* GatherElements: out[p] = data[p with idx[p] on the axis], out of
 * idx's shape (each of its dims at most data's). */
static ts_status fold_gather_elements(const ts_const *data, const ts_const *idx, int64_t axis, ts_const *out) {
    const ts_shape *ds = &data->shape, *is = &idx->shape;
    if (axis < -ds->ndim || axis >= ds->ndim) return ts_error(TS_ERR_SHAPE, "GatherElements axis %lld is out of range", (long long)axis);
    int ax = (int)(axis < 0 ? axis + ds->ndim : axis);
    if (is->ndim != ds->ndim) return ts_error(TS_ERR_SHAPE, "GatherElements indices of rank %d for data of rank %d", is->ndim, ds->ndim);
    for (int d = 0; d < ds->ndim; d++)
        if (d != ax && is->d[d] > ds->d[d])
            return ts_error(TS_ERR_SHAPE, "GatherElements indices' dim %d is %lld, data's %lld", d, (long long)is->d[d], (long long)ds->d[d]);
    ts_status st = ts_const_fill(is, data->dtype, 0, out);
    if (st) return st;
    int64_t n = ts_shape_numel(is), dim = ds->d[ax];
    for (int64_t j = 0; j < n; j++) {
        int64_t x, f = 0, rest = j, c[TS_MAX_DIMS];
        for (int d = is->ndim - 1; d >= 0; d--) {
            c[d] = rest % is->d[d];
            rest /= is->d[d];
        }
        if (!ts_onnx_int_value(idx->v[j], -dim, dim - 1, &x)) {
            ts_const_free(out);
            return ts_error(TS_ERR_SHAPE, "GatherElements index %g is out of range for a dimension of %lld", idx->v[j], (long long)dim);
        }
        c[ax] = x < 0 ? x + dim : x;
        for (int d = 0; d < ds->ndim; d++) f = f * ds->d[d] + c[d];
        out->v[j] = data->v[f];
    }
    return TS_OK;
}

/* Copies x broadcast to shape s (Expand, Where's operands). */
static ts_status fold_expand(const ts_const *x, const ts_shape *want, ts_const *out) {
    ts_shape s;
    ts_status st = broadcast(&x->shape, want, &s);
    if (!st) st = ts_const_fill(&s, x->dtype, 0, out);
    if (st) return st;
    int64_t idx[TS_MAX_DIMS] = {0}, n = ts_shape_numel(&s);
    for (int64_t i = 0; i < n; i++, next_index(&s, idx)) out->v[i] = x->v[bindex(&x->shape, &s, idx)];
    return TS_OK;
}

static ts_status fold_where(const ts_const *c, const ts_const *x, const ts_const *y, ts_const *out) {
    ts_shape s, s2;
    ts_status st = broadcast(&c->shape, &x->shape, &s2);
    if (!st) st = broadcast(&s2, &y->shape, &s);
    if (!st) st = ts_const_fill(&s, x->dtype, 0, out);
    if (st) return st;
    int64_t idx[TS_MAX_DIMS] = {0}, n = ts_shape_numel(&s);
    for (int64_t i = 0; i < n; i++, next_index(&s, idx))
        out->v[i] = c->v[bindex(&c->shape, &s, idx)] != 0 ? x->v[bindex(&x->shape, &s, idx)] : y->v[bindex(&y->shape, &s, idx)];
    return TS_OK;
}

/* Range of integers: exactly, start + i delta for i below
 * ceil((limit - start) / delta), computed in uint64 (the distance of two
 * int64s fits). */
static ts_status fold_range_int(const ts_const *a, const ts_const *b, const ts_const *d, ts_const *out) {
    int64_t start = int_at(a, 0), limit = int_at(b, 0), delta = int_at(d, 0);
    if (delta == 0) return ts_error(TS_ERR_SHAPE, "Range with delta 0");
    bool up = delta > 0;
    uint64_t span = up ? (limit > start ? (uint64_t)limit - (uint64_t)start : 0) : (start > limit ? (uint64_t)start - (uint64_t)limit : 0);
    uint64_t step = up ? (uint64_t)delta : 0 - (uint64_t)delta, cnt = span / step + (span % step != 0);
    if (cnt > (uint64_t)CONST_MAX_ELEMS)
        return ts_error(TS_ERR_UNSUPPORTED, "a Range from %lld to %lld by %lld is too large to fold at import", (long long)start, (long long)limit,
                        (long long)delta);
    ts_shape s = {.ndim = 1, .d = {(int64_t)cnt}};
    ts_status st = ts_const_fill(&s, a->dtype, 0, out);
    if (st) return st;
    int64_t *x = int_room(s.d[0], &st);
    if (!x) {
        ts_const_free(out);
        return st;
    }
    for (int64_t i = 0; i < s.d[0]; i++) x[i] = int_wrap(a->dtype, (int64_t)((uint64_t)start + (uint64_t)i * (uint64_t)delta));
    return set_ints(out, x, s.d[0]);
}

static ts_status fold_range(const ts_const *a, const ts_const *b, const ts_const *d, ts_const *out) {
    if (ts_shape_numel(&a->shape) != 1 || ts_shape_numel(&b->shape) != 1 || ts_shape_numel(&d->shape) != 1)
        return ts_error(TS_ERR_SHAPE, "Range needs scalar start, limit and delta");
    if (int_type(a->dtype) && int_type(b->dtype) && int_type(d->dtype)) return fold_range_int(a, b, d, out);
    double start = a->v[0], limit = b->v[0], delta = d->v[0];
    if (delta == 0) return ts_error(TS_ERR_SHAPE, "Range with delta 0");
    double cnt = ceil((limit - start) / delta);
    if (!(cnt <= (double)CONST_MAX_ELEMS))
        return ts_error(TS_ERR_UNSUPPORTED, "a Range from %g to %g by %g is too large to fold at import", start, limit, delta);
    ts_shape s = {.ndim = 1, .d = {cnt > 0 ? (int64_t)cnt : 0}};
    ts_status st = ts_const_fill(&s, a->dtype, 0, out);
    for (int64_t i = 0; !st && i < s.d[0]; i++) out->v[i] = as_type(a->dtype, start + (double)i * delta);
    return st;
}

ts_status ts_const_slice_range(int64_t size, double st, double en, int64_t step, int64_t *start, int64_t *count) {
    if (isnan(st) || isnan(en)) return ts_error(TS_ERR_SHAPE, "Slice start or end is not a number");
    double dim = (double)size;
    if (st < 0) st += dim;
    if (en < 0) en += dim;
    if (step > 0) {
        st = st < 0 ? 0 : st > dim ? dim : st;
        en = en < 0 ? 0 : en > dim ? dim : en;
    } else {
        st = st < 0 ? -1 : st > dim - 1 ? dim - 1 : st;
        en = en < -1 ? -1 : en > dim - 1 ? dim - 1 : en;
    }
    double cnt = ceil((en - st) / (double)step);
    *start = (int64_t)st;
    *count = cnt > 0 ? (int64_t)cnt : 0;
    return TS_OK;
}

static ts_status fold_slice(const ts_const *const *in, int n_in, ts_const *out) {
    const ts_const *x = in[0];
    int r = x->shape.ndim;
    int64_t start[TS_MAX_DIMS], step[TS_MAX_DIMS];
    ts_shape s = x->shape;
    for (int i = 0; i < r; i++) start[i] = 0, step[i] = 1;
    int64_t n = ts_shape_numel(&in[1]->shape);
    const ts_const *axes = n_in > 3 ? in[3] : NULL, *steps = n_in > 4 ? in[4] : NULL;
    if (n != ts_shape_numel(&in[2]->shape) || n > r || (axes && ts_shape_numel(&axes->shape) != n) ||
        (steps && ts_shape_numel(&steps->shape) != n))
        return ts_error(TS_ERR_SHAPE, "Slice: starts, ends, axes and steps differ in length or exceed the rank %d", r);
    ts_status st;
    for (int64_t k = 0; k < n; k++) {
        int64_t ax = k, sp = 1;
        if (axes && !ts_onnx_int_value(axes->v[k], -r, r - 1, &ax)) return ts_error(TS_ERR_SHAPE, "Slice axis %g is out of range", axes->v[k]);
        if (ax < 0) ax += r;
        if (steps && !ts_onnx_int_value(steps->v[k], INT64_MIN, INT64_MAX, &sp)) return ts_error(TS_ERR_SHAPE, "Slice step %g is out of range", steps->v[k]);
        if (sp == 0) return ts_error(TS_ERR_SHAPE, "Slice step 0");
        if ((st = ts_const_slice_range(x->shape.d[ax], in[1]->v[k], in[2]->v[k], sp, &start[ax], &s.d[ax]))) return st;
        step[ax] = sp;
    }
    st = ts_const_fill(&s, x->dtype, 0, out);
    if (st) return st;
    int64_t idx[TS_MAX_DIMS] = {0}, total = ts_shape_numel(&s);
    for (int64_t i = 0; i < total; i++, next_index(&s, idx)) {
        int64_t f = 0;
        for (int d = 0; d < r; d++) f = f * x->shape.d[d] + start[d] + idx[d] * step[d];
        out->v[i] = x->v[f];
    }
    return TS_OK;
}

static ts_status fold_transpose(const ts_const *x, const int64_t *perm, int64_t n_perm, ts_const *out) {
    int r = x->shape.ndim;
    int p[TS_MAX_DIMS];
    if (n_perm >= 0 && n_perm != r) return ts_error(TS_ERR_SHAPE, "Transpose perm has %lld entries for %d dimensions", (long long)n_perm, r);
    bool seen[TS_MAX_DIMS] = {false};
    ts_shape s = {.ndim = r};
    for (int i = 0; i < r; i++) {
        int64_t q = n_perm < 0 ? r - 1 - i : perm[i];
        if (q < 0 || q >= r || seen[q])
            return ts_error(TS_ERR_SHAPE, "Transpose perm entry %lld is out of range or repeated (a permutation of 0..%d)", (long long)q, r - 1);
        seen[q] = true;
        p[i] = (int)q;
        s.d[i] = x->shape.d[p[i]];
    }
    ts_status st = ts_const_fill(&s, x->dtype, 0, out);
    if (st) return st;
    int64_t idx[TS_MAX_DIMS] = {0}, n = ts_shape_numel(&s);
    for (int64_t i = 0; i < n; i++, next_index(&s, idx)) {
        int64_t src[TS_MAX_DIMS], f = 0;
        for (int d = 0; d < r; d++) src[p[d]] = idx[d];
        for (int d = 0; d < r; d++) f = f * x->shape.d[d] + src[d];
        out->v[i] = x->v[f];
    }
    return TS_OK;
}

static ts_status fold_op(const char *op, const ts_const *const *in, int n_in, const ts_const_attrs *at, ts_const *out) {
    ts_status st;
    ts_shape s;
    if (strcmp(op, "Cast") == 0) return (st = need_inputs(op, in, n_in, 1, 1)) ? st : fold_cast(in[0], at->to, at->lowbits_mode, out);
    if (strcmp(op, "Concat") == 0) return (st = need_inputs(op, in, n_in, 1, MAX_FOLD_INPUTS)) ? st : fold_concat(in, n_in, at->axis, out);
    if (strcmp(op, "ConstantOfShape") == 0) {
        if ((st = need_inputs(op, in, n_in, 1, 1)) || (st = shape_from(in[0], &s))) return st;
        st = ts_const_fill(&s, at->fill ? at->fill->dtype : TS_ONNX_FLOAT, at->fill && ts_shape_numel(&at->fill->shape) ? at->fill->v[0] : 0, out);
        if (st || !at->fill || !at->fill->iv) return st;
        int64_t n = ts_shape_numel(&s), *x = int_room(n, &st); /* an int64 fill beyond 2^53: exactly */
        if (!x) {
            ts_const_free(out);
            return st;
        }
        for (int64_t i = 0; i < n; i++) x[i] = at->fill->iv[0];
        return set_ints(out, x, n);
    }
    if (strcmp(op, "Expand") == 0) {
        if ((st = need_inputs(op, in, n_in, 2, 2)) || (st = shape_from(in[1], &s))) return st;
        return fold_expand(in[0], &s, out);
    }
    if (strcmp(op, "Gather") == 0) return (st = need_inputs(op, in, n_in, 2, 2)) ? st : fold_gather(in[0], in[1], at->axis, out);
    if (strcmp(op, "GatherElements") == 0)
        return (st = need_inputs(op, in, n_in, 2, 2)) ? st : fold_gather_elements(in[0], in[1], at->axis, out);
    if (strcmp(op, "Range") == 0) return (st = need_inputs(op, in, n_in, 3, 3)) ? st : fold_range(in[0], in[1], in[2], out);
    if (strcmp(op, "Slice") == 0) return (st = need_inputs(op, in, n_in, 3, 5)) ? st : fold_slice(in, n_in, out);
    if (strcmp(op, "Transpose") == 0) return (st = need_inputs(op, in, n_in, 1, 1)) ? st : fold_transpose(in[0], at->perm, at->n_perm, out);
    if (strcmp(op, "Where") == 0) return (st = need_inputs(op, in, n_in, 3, 3)) ? st : fold_where(in[0], in[1], in[2], out);
    return ts_error(TS_ERR_UNSUPPORTED, "%s cannot be folded", op);
}

/* Whether op moves the values of its input k (Concat's every input, the
 * data of the others, Where's two choices): an int64 constant's exact
 * values (iv) are moved too. */
static bool moves_input(const char *op, int k) {
    static const struct { const char *op; unsigned in; } ops[] = {
        {"Expand", 1u}, {"Gather", 1u}, {"GatherElements", 1u}, {"Slice", 1u}, {"Transpose", 1u}, {"Where", 6u},
    };
    if (strcmp(op, "Concat") == 0) return true;
    for (size_t i = 0; i < TS_ARRAY_LEN(ops); i++)
        if (strcmp(op, ops[i].op) == 0) return k < 32 && ((ops[i].in >> k) & 1u);
    return false;
}

/* x's exact int64 values' high (hi) or low 32 bits, each exact in a
 * double, as a constant of x's shape (the moving ops fold them twice). */
static ts_status exact_half(const ts_const *x, bool hi, ts_const *out) {
    ts_status st = ts_const_fill(&x->shape, TS_ONNX_INT64, 0, out);
    for (int64_t i = 0; !st && i < ts_shape_numel(&x->shape); i++) {
        int64_t v = 0;
        if (x->iv) v = x->iv[i];
        else if (!ts_onnx_int_value(x->v[i], INT64_MIN, INT64_MAX, &v)) v = x->v[i] > 0 ? INT64_MAX : INT64_MIN; /* NaN: INT64_MIN */
        out->v[i] = hi ? (double)(v >> 32) : (double)(uint32_t)(uint64_t)v;
    }
    return st;
}

ts_status ts_const_op(const char *op, const ts_const *const *in, int n_in, const ts_const_attrs *at, ts_const *out) {
    ts_status st = fold_op(op, in, n_in, at, out);
    if (st) return st;
    int64_t n = ts_shape_numel(&out->shape);
    if (out->iv) return TS_OK; /* folded exactly (integers) */
    bool exact = false;
    for (int k = 0; k < n_in; k++) exact = exact || (moves_input(op, k) && in[k] && in[k]->iv);
    if (!exact || (out->dtype != TS_ONNX_INT64 && out->dtype != TS_ONNX_UINT64)) return TS_OK;
    /* the values moved again as two halves, each exact in a double */
    ts_const half[2][MAX_FOLD_INPUTS] = {{{0}}}, res[2] = {{0}};
    const ts_const *hin[MAX_FOLD_INPUTS];
    for (int h = 0; !st && h < 2; h++) {
        for (int k = 0; !st && k < n_in; k++) {
            bool mine = moves_input(op, k) && in[k];
            if (mine) st = exact_half(in[k], h == 0, &half[h][k]);
            hin[k] = mine ? &half[h][k] : in[k];
        }
        if (!st) st = fold_op(op, hin, n_in, at, &res[h]);
    }
    int64_t *x = st ? NULL : ts_malloc((size_t)(n ? n : 1) * sizeof *x);
    if (!st && !x) st = TS_ERR_OUT_OF_MEMORY;
    for (int64_t i = 0; x && i < n; i++) x[i] = (int64_t)(((uint64_t)(int64_t)res[0].v[i] << 32) | (uint64_t)res[1].v[i]);
    if (x) st = ts_const_set_exact(out, x, n);
    ts_free(x);
    for (int h = 0; h < 2; h++) {
        ts_const_free(&res[h]);
        for (int k = 0; k < n_in; k++) ts_const_free(&half[h][k]);
    }
    if (st) ts_const_free(out);
    return st;
}
