/* array.c -- dtypes and the ts_array view: names, sizes, element counts. */
#include "core.h"
#include "core/half.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

const char *ts_dtype_name(ts_dtype t) {
    switch (t) {
    case TS_F32: return "f32";
    case TS_F64: return "f64";
    case TS_I32: return "i32";
    case TS_I64: return "i64";
    case TS_U8: return "u8";
    case TS_BOOL: return "bool";
    case TS_I8: return "i8";
    case TS_I16: return "i16";
    case TS_U16: return "u16";
    case TS_U32: return "u32";
    case TS_U64: return "u64";
    case TS_BF16: return "bf16";
    case TS_F16: return "f16";
    }
    return "?";
}

size_t ts_dtype_size(ts_dtype t) {
    switch (t) {
    case TS_F32: return 4;
    case TS_F64: return 8;
    case TS_I32: return 4;
    case TS_I64: return 8;
    case TS_U8: return 1;
    case TS_BOOL: return 1;
    case TS_I8: return 1;
    case TS_I16: return 2;
    case TS_U16: return 2;
    case TS_U32: return 4;
    case TS_U64: return 8;
    case TS_BF16: return 2;
    case TS_F16: return 2;
    }
    return 0;
}

/* The constructors cannot return a status: a bad rank gives ndim = -1, which
 * every consumer rejects, and the reason is left in the last error. */
static ts_array make_array(ts_dtype t, void *data, int ndim, const int64_t *shape) {
    ts_array a;
    memset(&a, 0, sizeof a);
    a.dtype = t;
    a.data = data;
    if (ndim < 0 || ndim > TS_MAX_DIMS || (ndim > 0 && !shape)) {
        ts_error(TS_ERR_INVALID_ARGUMENT, "array rank %d is outside 0..%d (or shape is NULL)",
                 ndim, TS_MAX_DIMS);
        a.ndim = -1;
        return a;
    }
    a.ndim = ndim;
    for (int i = 0; i < ndim; i++) a.shape[i] = shape[i];
    return a;
}

ts_array ts_array_f32(float *data, int ndim, const int64_t *shape) {
    return make_array(TS_F32, data, ndim, shape);
}

ts_array ts_array_i32(int32_t *data, int ndim, const int64_t *shape) {
    return make_array(TS_I32, data, ndim, shape);
}

/* -1 for an invalid array (bad rank, negative dim, or a count that overflows). */
int64_t ts_array_numel(const ts_array *a) {
    if (!a || a->ndim < 0 || a->ndim > TS_MAX_DIMS) return -1;
    int64_t n = 1;
    for (int i = 0; i < a->ndim; i++) {
        int64_t d = a->shape[i];
        if (d < 0) return -1;
        if (d != 0 && n > INT64_MAX / d) return -1;
        n *= d;
    }
    return n;
}

const char *ts_array_shape_str(const ts_array *a, char *buf, size_t n) {
    if (!buf || n == 0) return buf;
    buf[0] = '\0';
    if (!a) return buf;
    size_t used = 0;
    int w = snprintf(buf, n, "%s[", ts_dtype_name(a->dtype));
    for (int i = 0; w >= 0 && i < a->ndim && i < TS_MAX_DIMS; i++) {
        used += (size_t)w;
        if (used >= n) return buf; /* truncated; snprintf already terminated it */
        w = snprintf(buf + used, n - used, i ? ",%lld" : "%lld", (long long)a->shape[i]);
    }
    if (w >= 0 && (used += (size_t)w) < n) snprintf(buf + used, n - used, "]");
    return buf;
}

double ts_array_value(const ts_array *a, int64_t i) {
    switch (a->dtype) {
    case TS_F32: return ((const float *)a->data)[i];
    case TS_F64: return ((const double *)a->data)[i];
    case TS_I32: return ((const int32_t *)a->data)[i];
    case TS_I64: return (double)((const int64_t *)a->data)[i];
    case TS_U8: return ((const uint8_t *)a->data)[i];
    case TS_BOOL: return ((const uint8_t *)a->data)[i] != 0;
    case TS_I8: return ((const int8_t *)a->data)[i];
    case TS_I16: return ((const int16_t *)a->data)[i];
    case TS_U16: return ((const uint16_t *)a->data)[i];
    case TS_U32: return ((const uint32_t *)a->data)[i];
    case TS_U64: return (double)((const uint64_t *)a->data)[i];
    case TS_BF16: return ts_bf16_to_f32(((const uint16_t *)a->data)[i]);
    case TS_F16: return ts_f16_to_f32(((const uint16_t *)a->data)[i]);
    }
    return NAN;
}

bool ts_dtype_is_integer(ts_dtype t) { return t != TS_F32 && t != TS_F64 && !ts_dtype_is_half(t) && ts_dtype_size(t) != 0; }

/* The range of an integer dtype (bool: 0 and 1). */
static void int_range(ts_dtype t, double *lo, double *hi) {
    switch (t) {
    case TS_I32: *lo = INT32_MIN, *hi = INT32_MAX; return;
    case TS_I64: *lo = -9223372036854775808.0, *hi = 9223372036854775807.0; return;
    case TS_U8: *lo = 0, *hi = UINT8_MAX; return;
    case TS_BOOL: *lo = 0, *hi = 1; return;
    case TS_I8: *lo = INT8_MIN, *hi = INT8_MAX; return;
    case TS_I16: *lo = INT16_MIN, *hi = INT16_MAX; return;
    case TS_U16: *lo = 0, *hi = UINT16_MAX; return;
    case TS_U32: *lo = 0, *hi = UINT32_MAX; return;
    case TS_U64: *lo = 0, *hi = 18446744073709551615.0; return;
    case TS_F32: case TS_F64: case TS_BF16: case TS_F16: break;
    }
    *lo = -INFINITY, *hi = INFINITY;
}

int64_t ts_f32_nonfinite(const float *x, int64_t n) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += !isfinite(x[i]);
    return bad;
}

bool ts_dtype_holds(ts_dtype t, double v) {
    if (t == TS_F64 || isnan(v)) return t == TS_F64 || t == TS_F32 || ts_dtype_is_half(t);
    if (t == TS_F32) return !isfinite(v) || fabs(v) <= FLT_MAX;
    if (ts_dtype_is_half(t)) return true; /* rounded to nearest even (out of range: Inf), as a cast does */
    double lo, hi;
    int_range(t, &lo, &hi);
    /* the i64/u64 top is 2^63 / 2^64 as a double: one past the range */
    return v == floor(v) && v >= lo && (t == TS_I64 || t == TS_U64 ? v < hi : v <= hi);
}

void ts_array_set_value(ts_array *a, int64_t i, double v) {
    switch (a->dtype) {
    case TS_F32: ((float *)a->data)[i] = (float)v; return;
    case TS_F64: ((double *)a->data)[i] = v; return;
    case TS_I32: ((int32_t *)a->data)[i] = (int32_t)v; return;
    case TS_I64: ((int64_t *)a->data)[i] = (int64_t)v; return;
    case TS_U8: ((uint8_t *)a->data)[i] = (uint8_t)v; return;
    case TS_BOOL: ((uint8_t *)a->data)[i] = v != 0; return;
    case TS_I8: ((int8_t *)a->data)[i] = (int8_t)v; return;
    case TS_I16: ((int16_t *)a->data)[i] = (int16_t)v; return;
    case TS_U16: ((uint16_t *)a->data)[i] = (uint16_t)v; return;
    case TS_U32: ((uint32_t *)a->data)[i] = (uint32_t)v; return;
    case TS_U64: ((uint64_t *)a->data)[i] = (uint64_t)v; return;
    case TS_BF16: ((uint16_t *)a->data)[i] = ts_f32_to_bf16((float)v); return;
    case TS_F16: ((uint16_t *)a->data)[i] = ts_f32_to_f16((float)v); return;
    }
}
