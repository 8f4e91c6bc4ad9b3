/* onnx_reduce.c -- reductions and scans along an axis: the Reduce ops (an
 * empty constant's folded), ArgMax and ArgMin, TopK, CumSum and CumProd. */
#include "import/onnx_ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The product of x along `axis`, kept as 1: halves multiplied together
 * (the odd one out carried), log2(n) Muls whose gradients are theirs. */
static ts_tensor *product_along(ts_graph *g, ts_tensor *x, int axis) {
    while (x && x->shape.d[axis] > 1) {
        int64_t n = x->shape.d[axis], h = n / 2;
        ts_tensor *m = ts_mul(g, ts_slice(g, x, axis, 0, h), ts_slice(g, x, axis, h, h));
        x = n % 2 ? ts_concat(g, (ts_tensor *[]){m, ts_slice(g, x, axis, n - 1, 1)}, 2, axis) : m;
    }
    return x;
}

/* A reduction of an empty constant (a bound input with a dimension of 0:
 * it holds no values, so it is known at import), folded to the op's value
 * over no elements, as numpy's and ONNX's reference: 0 for the sums and
 * norms, 1 for the product, -inf for the maximum, the log-sum and the
 * log-sum-exp, +inf for the minimum (a bool's: false and true), NaN for
 * the mean. n < 0: every axis. */
static ts_status reduce_empty(importer *im, node_io *io, const int64_t *axes, int n, bool keep) {
    const char *op = im->node->op_type;
    const ts_const *x = &io->in[0]->c;
    bool boolean = x->dtype == TS_ONNX_BOOL;
    if (!boolean && !ts_onnx_dtype_is_float(x->dtype))
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "%s of an empty %s tensor has no value in its type", op, ts_onnx_dtype_name(x->dtype));
    bool reduced[TS_MAX_DIMS] = {false};
    for (int i = 0; i < (n < 0 ? x->shape.ndim : n); i++) {
        int64_t a = n < 0 ? i : axes[i];
        if (a < -x->shape.ndim || a >= x->shape.ndim)
            return ts_onnx_node_error(im, TS_ERR_FORMAT, "axis %lld is out of range for %d dimensions", (long long)a, x->shape.ndim);
        reduced[norm_axis(a, x->shape.ndim)] = true;
    }
    ts_shape s = {0};
    for (int d = 0; d < x->shape.ndim; d++)
        if (!reduced[d] || keep) s.d[s.ndim++] = reduced[d] ? 1 : x->shape.d[d];
    double v = strcmp(op, "ReduceProd") == 0 ? 1.0
               : strcmp(op, "ReduceMax") == 0 ? (boolean ? 0.0 : -INFINITY)
               : strcmp(op, "ReduceMin") == 0 ? (boolean ? 1.0 : INFINITY)
               : strcmp(op, "ReduceLogSum") == 0 || strcmp(op, "ReduceLogSumExp") == 0 ? -INFINITY
               : strcmp(op, "ReduceMean") == 0 ? NAN : 0.0;
    return ts_onnx_fold_result(im, ts_const_fill(&s, x->dtype, v, &io->out[0].c));
}

/* The Reduce ops over their axes: the attribute before the opset that
 * made them input 1 (ReduceSum 13, the others 18), the input from then on;
 * absent (or, from then on, an empty list) means every axis, or none with
 * noop_with_empty_axes=1: the identity. keepdims. ReduceMean, ReduceSum
 * and ReduceMax are graph ops; the others are composed of them: ReduceMin
 * -max(-x), ReduceL1 sum|x|, ReduceL2 sqrt(sum x^2), ReduceSumSquare
 * sum x^2, ReduceLogSum log(sum x), ReduceProd product_along each axis,
 * ReduceLogSumExp m + log(sum e^(x-m))
 * with m the maximum (no gradient through m: its terms cancel). Of an
 * integer tensor, Sum, Mean, Max, Min, Prod, SumSquare and L1 are
 * ts_reduce_int, exactly in its dtype; L2, LogSum and LogSumExp are
 * ts_reduce_int's too, in double as onnxruntime's (graph/int_math.h). */
ts_status ts_onnx_op_reduce(importer *im, node_io *io) {
    const char *op = im->node->op_type;
    int input_since = strcmp(op, "ReduceSum") == 0 ? 13 : 18; /* ReduceProd's too: 18 */
    int64_t axes[TS_MAX_DIMS];
    int n = 0, keepdims, noop = 0;
    ts_status st = ts_onnx_axes_of(im, io, 1, input_since, axes, &n);
    if (!st) st = ts_onnx_attr_int32(im, "keepdims", 1, 0, 1, &keepdims);
    if (!st) st = ts_onnx_attr_int32(im, "noop_with_empty_axes", 0, 0, 1, &noop);
    if (st) return st;
    bool all = n < 0 || (n == 0 && since(im, input_since));
    if (all && noop) return ts_onnx_op_identity(im, io);
    value *in = io->in[0];
    if (is_const(in) && !in->param && ts_shape_numel(&in->c.shape) == 0) return reduce_empty(im, io, axes, all ? -1 : n, keepdims != 0);
    ts_tensor *x = ts_onnx_as_tensor(im, in, &st);
    /* integers: every reduction in their dtype (ts_reduce_int: exactly,
     * and L2, LogSum and LogSumExp in double as onnxruntime's); bools
     * reduced as f32 */
    static const char *const int_ops[][2] = {{"ReduceSum", "Sum"}, {"ReduceMean", "Mean"}, {"ReduceMax", "Max"}, {"ReduceMin", "Min"},
                                             {"ReduceProd", "Prod"}, {"ReduceSumSquare", "SumSquare"}, {"ReduceL1", "L1"},
                                             {"ReduceL2", "L2"}, {"ReduceLogSum", "LogSum"}, {"ReduceLogSumExp", "LogSumExp"}};
    const char *int_op = NULL;
    for (size_t i = 0; x && is_int_tensor(x) && i < sizeof int_ops / sizeof int_ops[0]; i++)
        if (strcmp(op, int_ops[i][0]) == 0) int_op = int_ops[i][1];
    if (!int_op) x = ts_onnx_f32_of(im, x, &st);
    if (!x) return st;
    int ax[TS_MAX_DIMS];
    if (all) n = x->shape.ndim;
    if (n == 0) return ts_onnx_op_identity(im, io); /* no axis to reduce (a scalar): the identity */
    for (int i = 0; i < n; i++) {
        if (!all && (axes[i] < -x->shape.ndim || axes[i] >= x->shape.ndim))
            return ts_onnx_node_error(im, TS_ERR_FORMAT, "axis %lld is out of range for %d dimensions", (long long)axes[i], x->shape.ndim);
        ax[i] = all ? i : norm_axis(axes[i], x->shape.ndim);
    }
    ts_graph *g = im->g;
    int keep = keepdims != 0;
    ts_tensor *y;
    if (int_op) y = ts_reduce_int(g, int_op, x, n, ax, keep);
    else if (strcmp(op, "ReduceSum") == 0) y = ts_reduce_sum(g, x, n, ax, keep);
    else if (strcmp(op, "ReduceMax") == 0) y = ts_reduce_max(g, x, n, ax, keep);
    else if (strcmp(op, "ReduceMean") == 0) y = ts_reduce_mean(g, x, n, ax, keep);
    else if (strcmp(op, "ReduceMin") == 0) y = ts_scale(g, ts_reduce_max(g, ts_scale(g, x, -1.0f), n, ax, keep), -1.0f);
    else if (strcmp(op, "ReduceL1") == 0) y = ts_reduce_sum(g, ts_abs(g, x), n, ax, keep);
    else if (strcmp(op, "ReduceL2") == 0) y = ts_sqrt(g, ts_reduce_sum(g, ts_mul(g, x, x), n, ax, keep));
    else if (strcmp(op, "ReduceSumSquare") == 0) y = ts_reduce_sum(g, ts_mul(g, x, x), n, ax, keep);
    else if (strcmp(op, "ReduceLogSum") == 0) y = ts_log(g, ts_reduce_sum(g, x, n, ax, keep));
    else if (strcmp(op, "ReduceProd") == 0) {
        y = x;
        for (int i = 0; i < n && y; i++) y = product_along(g, y, ax[i]);
        if (y && !keep) {
            ts_shape s = {0};
            for (int d = 0; d < y->shape.ndim; d++) {
                bool reduced = false;
                for (int i = 0; i < n; i++) reduced = reduced || ax[i] == d;
                if (!reduced) s.d[s.ndim++] = y->shape.d[d];
            }
            y = ts_reshape(g, y, s.ndim, s.d);
        }
    }
    else { /* ReduceLogSumExp */
        ts_tensor *m = ts_stop_gradient(g, ts_reduce_max(g, x, n, ax, 1));
        ts_tensor *mo = keep ? m : ts_stop_gradient(g, ts_reduce_max(g, x, n, ax, 0));
        y = ts_add(g, ts_log(g, ts_reduce_sum(g, ts_exp(g, ts_sub(g, x, m)), n, ax, keep)), mo);
    }
    return ts_onnx_built(im, y, &io->out[0]);
}

typedef struct iota_ctx {
    int64_t n;
} iota_ctx;
static void fill_iota(const void *ctx, float *v) {
    for (int64_t i = 0; i < ((const iota_ctx *)ctx)->n; i++) v[i] = (float)i;
}

/* 0, 1, ..., n-1 along `axis` of a rank-`ndim` tensor ([n,1,...,1] from
 * that axis on), broadcasting against it. */
ts_tensor *ts_onnx_iota_along(importer *im, int64_t n, int axis, int ndim, ts_status *st) {
    ts_shape s = {.ndim = ndim - axis, .d = {n}};
    for (int d = 1; d < s.ndim; d++) s.d[d] = 1;
    return ts_onnx_computed_constant(im, "Positions", &s, fill_iota, &(iota_ctx){n}, st);
}

/* The position (in f32) along `axis` of the first (last: the last) of
 * the true elements of the bool `at` (of n positions along it), the axis
 * kept as 1: where at is true the position, elsewhere out of range,
 * reduced by max. */
static ts_tensor *first_true(importer *im, ts_tensor *at, int axis, int64_t n, bool last, ts_status *st) {
    ts_graph *g = im->g;
    ts_tensor *pos = at ? ts_onnx_iota_along(im, n, axis, at->shape.ndim, st) : NULL, *y;
    if (!pos) return NULL;
    if (last) y = ts_reduce_max(g, ts_where(g, at, pos, ts_onnx_scalar_constant(im, "Before", -1.0f)), 1, &axis, 1);
    else y = ts_scale(g, ts_reduce_max(g, ts_where(g, at, ts_scale(g, pos, -1.0f), ts_onnx_scalar_constant(im, "After", (float)-n)), 1, &axis, 1), -1.0f);
    if (!y && !*st) *st = ts_graph_status(im->g);
    return y;
}

/* The position (in f32) along `axis` of x's maximum (min: minimum),
 * the first one (last: the last one), the axis kept as 1: where x equals
 * its maximum. An integer x is compared exactly, in its dtype. */
ts_tensor *ts_onnx_arg_extreme(importer *im, ts_tensor *x, int axis, bool min, bool last, ts_status *st) {
    ts_graph *g = im->g;
    ts_tensor *at;
    if (is_int_tensor(x)) at = ts_binary(g, "Equal", x, ts_reduce_int(g, min ? "Min" : "Max", x, 1, &axis, 1));
    else {
        ts_tensor *xs = min ? ts_scale(g, x, -1.0f) : x;
        at = ts_binary(g, "Equal", xs, ts_reduce_max(g, xs, 1, &axis, 1));
    }
    if (!at) *st = ts_graph_status(g);
    return first_true(im, at, axis, x->shape.d[axis], last, st);
}

/* An axis of n positions whose indices come out of ArgMax, ArgMin or
 * TopK: the positions are compared in f32, exact below 2^24. */
static ts_status index_axis_fits(importer *im, int64_t n) {
    if (n <= (int64_t)1 << 24) return TS_OK;
    return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its axis has %lld positions; the positions it returns are exact up to 2^24 (16777216): "
                              "split the axis, or reduce it in parts", (long long)n);
}

/* ArgMax and ArgMin along `axis` (default 0): the first position of the
 * maximum (minimum), or the last with select_last_index; keepdims. The
 * indices are an i64 graph tensor (ONNX's int64), exact: Gather, integer
 * arithmetic and comparisons read them as they are; no gradient. */
ts_status ts_onnx_op_arg_extreme(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = ts_onnx_as_tensor(im, io->in[0], &st);
    if (x && !is_int_tensor(x)) x = ts_onnx_f32_of(im, x, &st);
    int axis, keep, last;
    if (!x || (st = ts_onnx_attr_axis(im, "axis", 0, x->shape.ndim, false, &axis)) || (st = ts_onnx_attr_int32(im, "keepdims", 1, 0, 1, &keep)) ||
        (st = ts_onnx_attr_int32(im, "select_last_index", 0, 0, 1, &last)))
        return st;
    if (x->shape.ndim == 0) return ts_onnx_node_error(im, TS_ERR_SHAPE, "takes an input of at least 1 dimension; it is a scalar");
    if ((st = index_axis_fits(im, x->shape.d[axis]))) return st;
    ts_tensor *y = ts_onnx_arg_extreme(im, x, axis, strcmp(im->node->op_type, "ArgMin") == 0, last != 0, &st);
    if (!y) return st;
    if (!keep) {
        ts_shape s = y->shape;
        for (int d = axis; d + 1 < s.ndim; d++) s.d[d] = s.d[d + 1];
        s.ndim--;
        y = ts_reshape(im->g, y, s.ndim, s.d);
    }
    return ts_onnx_built(im, ts_cast(im->g, y, TS_I64), &io->out[0]);
}

typedef struct cumsum_ctx {
    int64_t n;
    int exclusive, reverse;
} cumsum_ctx;
/* M[i][j] = 1 where x[i] adds into y[j]: i <= j (reverse: i >= j), i != j when exclusive */
static void fill_cumsum(const void *ctx, float *v) {
    const cumsum_ctx *c = ctx;
    for (int64_t i = 0; i < c->n; i++)
        for (int64_t j = 0; j < c->n; j++) v[i * c->n + j] = (c->reverse ? i >= j : i <= j) && !(c->exclusive && i == j);
}

/* CumSum's and CumProd's inputs: x (as f32; x0 as given), the constant
 * axis (input 1, normalised), exclusive and reverse. */
static ts_status cum_args(importer *im, node_io *io, ts_tensor **x0, ts_tensor **x, int *axis, int *exclusive, int *reverse) {
    ts_status st = TS_OK;
    *axis = 0;
    *x0 = ts_onnx_as_tensor(im, io->in[0], &st), *x = ts_onnx_f32_of(im, *x0, &st);
    double a = 0;
    if (!*x || (st = ts_onnx_attr_int32(im, "exclusive", 0, 0, 1, exclusive)) || (st = ts_onnx_attr_int32(im, "reverse", 0, 0, 1, reverse)))
        return st ? st : TS_ERR_INTERNAL;
    if (!ts_onnx_setting_scalar(im, io->in[1], &a, &st))
        return st ? st : ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its axis ('%s') must be a constant%s", io->in[1]->name, ts_onnx_bind_hint(io->in[1]));
    int nd = (*x)->shape.ndim;
    if (nd == 0 || !(a >= -nd && a < nd) || a != floor(a))
        return ts_onnx_node_error(im, TS_ERR_FORMAT, "axis %g is out of range for %d dimensions", a, nd);
    *axis = norm_axis((int64_t)a, nd);
    return TS_OK;
}

/* CumSum along the constant axis (input 1): x, its axis moved last, times
 * the [N,N] matrix of which elements add into which (exclusive, reverse),
 * so the gradient is the matmul's. Integer graph tensors: ts_cumsum, in
 * int64. */
ts_status ts_onnx_op_cumsum(importer *im, node_io *io) {
    ts_tensor *x0, *x;
    int axis = 0, exclusive, reverse;
    ts_status st = cum_args(im, io, &x0, &x, &axis, &exclusive, &reverse);
    if (st) return st;
    if (x0->dtype == TS_I32 || x0->dtype == TS_I64) /* integers (a mask's running count): exactly, in int64 */
        return ts_onnx_built(im, ts_cumsum(im->g, x0->dtype == TS_I64 ? x0 : ts_cast(im->g, x0, TS_I64), axis, exclusive, reverse), &io->out[0]);
    int nd = x->shape.ndim, last = nd - 1;
    int64_t n = x->shape.d[axis];
    ts_tensor *m = ts_onnx_computed_constant(im, "Sums", &(ts_shape){.ndim = 2, .d = {n, n}}, fill_cumsum, &(cumsum_ctx){n, exclusive, reverse}, &st);
    if (!m) return st;
    ts_tensor *t = axis == last ? x : ts_transpose(im->g, x, axis, last);
    if (t && nd == 1) t = ts_reshape(im->g, t, 2, (int64_t[]){1, n});
    ts_tensor *y = t ? ts_onnx_matmul_2d(im, t, m, false, &st) : NULL;
    if (!y) return st ? st : ts_graph_status(im->g);
    if (nd == 1) y = ts_reshape(im->g, y, 1, (int64_t[]){n});
    if (axis != last) y = ts_transpose(im->g, y, axis, last);
    return ts_onnx_built(im, ts_onnx_as_dtype_of(im, y, x0), &io->out[0]);
}

void ts_onnx_fill_value(const void *ctx, float *v) {
    for (int64_t i = 0; i < ((const value_ctx *)ctx)->n; i++) v[i] = ((const value_ctx *)ctx)->v;
}

/* CumProd (opset 26) along the constant axis (input 1): log2(N) steps,
 * each multiplying in the products `shift` places back (ones shifted in),
 * after x is shifted by one (exclusive) and flipped (reverse, a Gather of
 * the reversed positions, flipped back after). Muls, slices and concats:
 * the gradient is theirs. An integer x: the same with integer Muls,
 * exactly, wrapping as its type does. */
ts_status ts_onnx_op_cumprod(importer *im, node_io *io) {
    ts_tensor *x0, *x;
    int axis = 0, exclusive, reverse;
    ts_status st = cum_args(im, io, &x0, &x, &axis, &exclusive, &reverse);
    if (st) return st;
    bool integer = is_int_tensor(x0); /* integers: exactly, wrapping in their dtype (integer Muls, ones of it) */
    if (integer) x = x0;
    int64_t n = x->shape.d[axis];
    ts_graph *g = im->g;
    ts_shape os = x->shape;
    os.d[axis] = n;
    ts_tensor *one = integer ? ts_onnx_int_scalar_like(im, x, 1, &st) : NULL;
    ts_tensor *ones = integer ? (one ? ts_binary(g, "Add", ts_binary(g, "Sub", x, x), one) : NULL)
                              : ts_onnx_computed_constant(im, "Ones", &os, ts_onnx_fill_value, &(value_ctx){ts_shape_numel(&os), 1.0f}, &st);
    if (!ones) return st ? st : ts_graph_status(g);
    if (reverse && n > 1 && !(x = ts_onnx_strided(im, x, axis, n - 1, n, -1, &st))) return st;
    if (exclusive) x = n == 1 ? ones : ts_concat(g, (ts_tensor *[]){ts_slice(g, ones, axis, 0, 1), ts_slice(g, x, axis, 0, n - 1)}, 2, axis);
    for (int64_t shift = 1; x && shift < n; shift *= 2) {
        ts_tensor *back = ts_concat(g, (ts_tensor *[]){ts_slice(g, ones, axis, 0, shift), ts_slice(g, x, axis, 0, n - shift)}, 2, axis);
        x = integer ? ts_binary(g, "Mul", x, back) : ts_mul(g, x, back);
    }
    if (!x) return ts_graph_status(g);
    if (reverse && n > 1 && !(x = ts_onnx_strided(im, x, axis, n - 1, n, -1, &st))) return st;
    return ts_onnx_built(im, integer ? x : ts_onnx_as_dtype_of(im, x, x0), &io->out[0]);
}

/* TopK with a constant k (input 1; opset 1's attribute): along `axis`
 * (default -1) the k largest (largest=0: smallest) values, sorted, the
 * lower position first among equal ones, and their positions: k rounds of
 * ts_onnx_arg_extreme, each taking its pick out of the next; the values gathered
 * at the positions (GatherElements: the gradient reaches x there), the
 * positions an i64 graph tensor (ONNX's int64), exact. An integer x is
 * compared exactly, each pick left out of the next by a bool mask (a
 * value equal to the lowest one is never taken twice). */
ts_status ts_onnx_op_topk(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = ts_onnx_as_tensor(im, io->in[0], &st);
    if (x && !is_int_tensor(x)) x = ts_onnx_f32_of(im, x, &st);
    int axis, largest;
    if (!x || (st = ts_onnx_attr_axis(im, "axis", -1, x->shape.ndim, false, &axis)) || (st = ts_onnx_attr_int32(im, "largest", 1, 0, 1, &largest))) return st;
    double kd = (double)ts_onnx_attr_i(im, "k", 0);
    if (since(im, 10) && (io->n_in < 2 || !io->in[1] || !ts_onnx_setting_scalar(im, io->in[1], &kd, &st)))
        return st ? st : ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its k must be a constant%s", io->n_in > 1 ? ts_onnx_bind_hint(io->in[1]) : "");
    int64_t n = x->shape.d[axis], k = (int64_t)kd;
    if (kd != floor(kd) || k < 1 || k > n) return ts_onnx_node_error(im, TS_ERR_FORMAT, "k is %g; it takes 1 to the axis' %lld", kd, (long long)n);
    if ((st = index_axis_fits(im, n))) return st;
    ts_graph *g = im->g;
    bool integer = is_int_tensor(x);
    int64_t low = x->dtype == TS_I32 ? (largest ? INT32_MIN : INT32_MAX) : largest ? INT64_MIN : INT64_MAX;
    ts_tensor *pos = ts_onnx_iota_along(im, n, axis, x->shape.ndim, &st);
    ts_tensor *gone = !pos ? NULL : integer ? ts_onnx_int_scalar_like(im, x, low, &st) : ts_onnx_scalar_constant(im, "Taken", largest ? -INFINITY : INFINITY);
    if (!pos || !gone) return st ? st : ts_graph_status(g);
    ts_tensor **picks = ts_malloc((size_t)k * sizeof *picks), *xm = integer ? x : ts_stop_gradient(g, x), *left = NULL;
    if (!picks) return TS_ERR_OUT_OF_MEMORY;
    for (int64_t t = 0; t < k && xm; t++) {
        if (!integer) picks[t] = ts_onnx_arg_extreme(im, xm, axis, !largest, false, &st);
        else { /* integers: the extreme of the positions left (the others the lowest value), exactly; a position taken is out even where it equals it */
            ts_tensor *at = ts_binary(g, "Equal", xm, ts_reduce_int(g, largest ? "Max" : "Min", xm, 1, &axis, 1));
            picks[t] = first_true(im, left ? ts_binary(g, "And", at, left) : at, axis, n, false, &st);
        }
        if (!picks[t]) break;
        if (t + 1 < k && integer) {
            ts_tensor *kept = ts_unary(g, "Not", ts_binary(g, "Equal", pos, picks[t]), 0.0f, 0.0f);
            left = left ? ts_binary(g, "And", left, kept) : kept;
            xm = ts_where(g, left, x, gone);
        } else if (t + 1 < k) xm = ts_where(g, ts_binary(g, "Equal", pos, picks[t]), gone, xm);
    }
    ts_tensor *idx = st || !xm ? NULL : k == 1 ? picks[0] : ts_concat(g, picks, (int)k, axis);
    ts_free(picks);
    if (!idx) return st ? st : ts_graph_status(g);
    /* the positions (each in [0, n) by construction: CastIndex moves none, and no run checks them) pick the values */
    if ((st = ts_onnx_built(im, ts_gather_elements(g, x, ts_unary(g, "CastIndex", idx, 0.0f, (float)(n - 1)), axis), &io->out[0]))) return st;
    return io->n_out > 1 ? ts_onnx_built(im, ts_cast(g, idx, TS_I64), &io->out[1]) : TS_OK;
}
