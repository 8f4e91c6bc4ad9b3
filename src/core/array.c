/* array.c -- dtypes and the ts_array view: names, sizes, element counts. */
#include "core.h"

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
    }
    return NAN;
}
