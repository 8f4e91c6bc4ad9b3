/* diff.c -- one tensor of run A against the same tensor of run B: bit
 * equality first (a hash of dtype, shape and bytes), then closeness with
 * ts_compare_arrays' rule; what `tensorscope diff` and ts.diff_runs report
 * per tensor (docs/observation.md#a-diff-of-two-runs). */
#include "core/core.h"

#include <string.h>

/* FNV-1a, 64 bits: stable across builds and machines, so a hash printed by
 * one run can be checked against another's. */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

ts_status ts_array_hash(const ts_array *a, uint64_t *out) {
    if (!a || !out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_array_hash: NULL argument");
    int64_t n = ts_array_numel(a);
    if (n < 0 || a->ndim < 0 || a->ndim > TS_MAX_DIMS) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_array_hash: bad shape");
    if (n > 0 && !a->data) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_array_hash: data is NULL");
    uint64_t h = 0xcbf29ce484222325ull;
    int32_t head[2] = {(int32_t)a->dtype, a->ndim};
    h = fnv(h, head, sizeof head);
    h = fnv(h, a->shape, (size_t)a->ndim * sizeof a->shape[0]);
    *out = fnv(h, a->data, (size_t)n * ts_dtype_size(a->dtype));
    return TS_OK;
}

ts_status ts_diff_arrays(const ts_array *a, const ts_array *b, double atol, double rtol, ts_diff_result *out) {
    if (!a || !b || !out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_diff_arrays: NULL argument");
    memset(out, 0, sizeof *out);
    ts_status st = ts_array_hash(a, &out->hash_a);
    if (!st) st = ts_array_hash(b, &out->hash_b);
    if (!st) st = ts_compare_arrays(a, b, atol, rtol, &out->cmp); /* shapes differ: its error */
    if (st) return st;
    int64_t n = ts_array_numel(a);
    bool bits = out->hash_a == out->hash_b && a->dtype == b->dtype &&
                (n == 0 || memcmp(a->data, b->data, (size_t)n * ts_dtype_size(a->dtype)) == 0);
    out->kind = bits ? TS_DIFF_BIT_EQUAL : out->cmp.pass ? TS_DIFF_CLOSE : TS_DIFF_DIFFERS;
    return TS_OK;
}
