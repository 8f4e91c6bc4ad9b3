/* compare.c -- one tensor against its reference, element by element, with
 * torch.isclose's rule; what `tensorscope compare` reports per tensor
 * (docs/observation.md#comparing-against-a-reference); and where a list of
 * such errors first jumps (`compare --rank`, docs/observation.md#where-precision-is-lost). */
#include "core/core.h"

#include <math.h>
#include <string.h>

/* The summary of any array, through the f32 summary kernel. */
static ts_status summarize(const ts_array *a, int64_t n, ts_stats *out) {
    ts_summary *s = ts_malloc(sizeof *s);
    float *tmp = a->dtype == TS_F32 ? NULL : ts_malloc((size_t)(n ? n : 1) * sizeof *tmp);
    if (!s || (a->dtype != TS_F32 && !tmp)) {
        ts_free(s);
        ts_free(tmp);
        return ts_error(TS_ERR_OUT_OF_MEMORY, "ts_compare_arrays: out of memory");
    }
    for (int64_t i = 0; tmp && i < n; i++) tmp[i] = (float)ts_array_value(a, i);
    ts_status st = ts_summarize_f32(tmp ? tmp : a->data, n, TS_WATCH_STATS, s);
    if (!st) *out = s->stats;
    ts_free(s);
    ts_free(tmp);
    return st;
}

ts_status ts_compare_arrays(const ts_array *a, const ts_array *ref, double atol, double rtol, ts_compare_result *out) {
    if (!a || !ref || !out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_compare_arrays: NULL argument");
    memset(out, 0, sizeof *out);
    out->max_abs_index = -1;
    if (!(atol >= 0) || !(rtol >= 0) || isinf(atol) || isinf(rtol))
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_compare_arrays: atol and rtol must be finite and >= 0 (got %g, %g)", atol, rtol);
    int64_t n = ts_array_numel(a);
    bool same = a->ndim == ref->ndim && n >= 0 && n == ts_array_numel(ref);
    for (int i = 0; same && i < a->ndim; i++) same = a->shape[i] == ref->shape[i];
    if (!same) {
        char sa[160], sr[160];
        return ts_error(TS_ERR_SHAPE, "shapes differ: %s vs reference %s", ts_array_shape_str(a, sa, sizeof sa),
                        ts_array_shape_str(ref, sr, sizeof sr));
    }
    if (n > 0 && (!a->data || !ref->data)) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_compare_arrays: data is NULL");
    out->count = n;
    double sq_diff = 0, sq_ref = 0;
    bool nonfinite_differs = false;
    for (int64_t i = 0; i < n; i++) {
        double x = ts_array_value(a, i), r = ts_array_value(ref, i);
        bool ok;
        if (isfinite(x) && isfinite(r)) {
            double d = fabs(x - r), lim = rtol * fabs(r);
            sq_diff += d * d, sq_ref += r * r;
            ok = d <= atol + lim;
            if (d > out->max_abs || out->max_abs_index < 0) out->max_abs = d, out->max_abs_index = i;
            double rel = r != 0 ? d / fabs(r) : (d > 0 ? INFINITY : 0);
            if (rel > out->max_rel) out->max_rel = rel;
            if (d - lim > out->min_atol) out->min_atol = d - lim;
        } else {
            ok = (isnan(x) && isnan(r)) || (isinf(x) && x == r);
            if (!ok) out->min_atol = INFINITY;
            nonfinite_differs |= !ok;
        }
        out->mismatches += !ok;
    }
    out->pass = out->mismatches == 0;
    out->rel_error = nonfinite_differs ? INFINITY : sq_ref > 0 ? sqrt(sq_diff / sq_ref) : sq_diff > 0 ? INFINITY : 0;
    ts_status st = summarize(a, n, &out->a);
    return st ? st : summarize(ref, n, &out->ref);
}

ts_status ts_compare_first_jump(const double *rel_error, int n, double factor, double min_error, int *index,
                                double *median_before, double *threshold) {
    if (!index || n < 0 || (n > 0 && !rel_error))
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_compare_first_jump: NULL argument or negative count %d", n);
    if (!(factor >= 1) || isinf(factor) || !(min_error >= 0) || isinf(min_error))
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_compare_first_jump: factor must be finite and >= 1 (got %g), min_error finite and "
                        ">= 0 (got %g)", factor, min_error);
    double *sorted = ts_malloc((size_t)(n ? n : 1) * sizeof *sorted);
    if (!sorted) return ts_error(TS_ERR_OUT_OF_MEMORY, "ts_compare_first_jump: out of memory");
    *index = -1;
    if (median_before) *median_before = 0;
    for (int i = 0; i < n; i++) {
        double med = i == 0 ? 0 : i % 2 ? sorted[i / 2] : 0.5 * (sorted[i / 2 - 1] + sorted[i / 2]);
        double bar = fmax(min_error, factor * med), e = isnan(rel_error[i]) ? INFINITY : rel_error[i];
        if (threshold) threshold[i] = bar;
        if (*index < 0 && e > bar) {
            *index = i;
            if (median_before) *median_before = med;
        }
        /* insert e into the sorted errors before the next tensor */
        int k = i;
        while (k > 0 && sorted[k - 1] > e) sorted[k] = sorted[k - 1], k--;
        sorted[k] = e;
    }
    ts_free(sorted);
    return TS_OK;
}
