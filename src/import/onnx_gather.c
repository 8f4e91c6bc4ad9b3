/* onnx_gather.c -- indexing: Gather and GatherElements, GatherND, Compress,
 * OneHot, the Scatter ops and TensorScatter. */
#include "import/onnx_ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Element p of the constant indices iv (decoded) as the file holds it:
 * an integer exactly (beyond 2^53 too), else as %g. */
static const char *index_shown(const value *iv, int64_t p, char *buf, size_t n) {
    double v = iv->c.v[p];
    if (iv->c.iv) snprintf(buf, n, "%lld", (long long)iv->c.iv[p]);
    else if (v == floor(v) && fabs(v) < 0x1p63) snprintf(buf, n, "%lld", (long long)v);
    else snprintf(buf, n, "%g", v);
    return buf;
}

/* The constant indices iv of this node (decoded), element p in
 * [-dim, dim) for dim = dims[p % q] (GatherND's and ScatterND's index rows
 * name q dims, the other ops' indices one axis: q = 1), else an error
 * naming the node, the tensor, the element and its value: ONNX refuses
 * an index out of range, and none is clamped. */
static ts_status const_indices_in_range(importer *im, const value *iv, int q, const int64_t *dims) {
    int64_t n = ts_shape_numel(&iv->c.shape);
    for (int64_t p = 0; p < n; p++) {
        double v = iv->c.v[p], d = (double)dims[p % q];
        if (v == floor(v) && v >= -d && v < d) continue;
        char shown[32];
        return ts_onnx_node_error(im, TS_ERR_FORMAT, "its indices '%s'[%lld] = %s are out of range: that dim takes [%lld, %lld) (an index "
                                  "is never clamped; fix the indices)", iv->name, (long long)p, index_shown(iv, p, shown, sizeof shown),
                                  (long long)-dims[p % q], (long long)dims[p % q]);
    }
    return TS_OK;
}

/* Gather: of rows of a 2-D table by integer ids an embedding (the table is
 * the parameter under its own name, so a tied weight stays one), along any
 * other axis ts_gather; GatherElements: ts_gather_elements; folded when
 * both are constants. */
ts_status ts_onnx_op_gather(importer *im, node_io *io) {
    value *data = io->in[0], *idx = io->in[1];
    bool elements = strcmp(im->node->op_type, "GatherElements") == 0;
    if (is_const(data) && !data->param && is_const(idx)) return ts_onnx_op_fold(im, io);
    int axis;
    ts_status st = ts_onnx_attr_axis(im, "axis", 0, shape_of(data)->ndim, false, &axis);
    if (st) return st;
    if (is_const(idx) && ((st = ts_onnx_decoded(im, idx)) || (st = const_indices_in_range(im, idx, 1, &shape_of(data)->d[axis])))) return st;
    ts_tensor *w = ts_onnx_as_tensor(im, data, &st), *i = NULL; /* integers and bools (a mask's rows) gathered as they are */
    if (w) i = ts_onnx_as_tensor(im, idx, &st);
    if (!i) return st;
    bool computed = i->dtype != TS_I32;
    /* integer values the graph computed in f32 (or i64): indices, checked
     * before the gather reads them (one outside the axis is an error naming
     * it, as ONNX says, never clamped into it) */
    if (computed && !(i = ts_graph_indices(im->g, i))) return ts_graph_status(im->g);
    if (elements) return ts_onnx_built(im, ts_gather_elements(im->g, w, i, axis), &io->out[0]);
    if (axis == 0 && w->shape.ndim == 2 && !computed && w->dtype == TS_F32) return ts_onnx_built(im, ts_embedding(im->g, w, i), &io->out[0]);
    return ts_onnx_built(im, ts_gather(im->g, w, i, axis), &io->out[0]);
}

/* OneHot: along `axis` (default -1, a new axis), 1 (values[1]) where
 * the position equals the index (a negative one counted from depth, a
 * constant), values[0] elsewhere: Where(Equal(indices, positions), on,
 * off), so a graph-tensor `values` takes its gradient. */
ts_status ts_onnx_op_one_hot(importer *im, node_io *io) {
    ts_status st = TS_OK;
    double depth = 0;
    if (!ts_onnx_setting_scalar(im, io->in[1], &depth, &st))
        return st ? st : ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its depth ('%s') must be a constant%s", io->in[1]->name, ts_onnx_bind_hint(io->in[1]));
    if (!(depth >= 1 && depth <= (double)INT32_MAX))
        return ts_onnx_node_error(im, TS_ERR_FORMAT, "its depth is %g; OneHot takes a positive depth", depth);
    int64_t n = (int64_t)depth;
    /* integer indices compared, and integer values chosen, exactly in int64 */
    value *iv = io->in[0], *vv = io->in[2];
    bool int_idx = iv->t ? is_int_tensor(iv->t) : !iv->param && !ts_onnx_dtype_is_float(iv->c.dtype);
    bool int_val = vv->t ? is_int_tensor(vv->t) : !vv->param && !ts_onnx_dtype_is_float(vv->c.dtype);
    ts_tensor *idx = int_idx ? ts_onnx_i64_of(im, iv, &st) : NULL, *v0 = NULL, *v = NULL;
    if (!idx && !st) idx = as_f32(im, iv, &st), int_idx = false;
    int_val = int_val && int_idx; /* chosen by the i32 mask of integer indices */
    if (idx && int_val && !(v = ts_onnx_i64_of(im, vv, &st)) && !st) int_val = false;
    if (idx && !int_val) v0 = ts_onnx_as_tensor(im, vv, &st), v = ts_onnx_f32_of(im, v0, &st);
    if (!v) return st;
    if (ts_shape_numel(&v->shape) != 2) return ts_onnx_node_error(im, TS_ERR_SHAPE, "its values hold %lld elements; OneHot takes two, [off, on]",
                                                         (long long)ts_shape_numel(&v->shape));
    int r = idx->shape.ndim, axis;
    if (r + 1 > TS_MAX_DIMS) return ts_onnx_node_error(im, TS_ERR_SHAPE, "its output would have more than %d dimensions", TS_MAX_DIMS);
    if ((st = ts_onnx_attr_axis(im, "axis", -1, r + 1, false, &axis))) return st;
    ts_graph *g = im->g;
    ts_tensor *zero = int_idx ? ts_onnx_i64_scalar(im, 0, &st) : ts_onnx_scalar_constant(im, "Zero", 0.0f);
    ts_tensor *wrap = !zero ? NULL : int_idx ? ts_onnx_i64_scalar(im, n, &st) : ts_onnx_scalar_constant(im, "Depth", (float)n);
    if (!zero || !wrap) return st ? st : ts_graph_status(g);
    if (int_idx) idx = ts_binary(g, "Add", idx, ts_binary(g, "Mul", ts_cast(g, ts_binary(g, "Less", idx, zero), TS_I64), wrap));
    else idx = ts_add(g, idx, ts_mul(g, num(g, ts_binary(g, "Less", idx, zero)), wrap));
    if (!idx) return ts_graph_status(g);
    ts_shape s = {.ndim = r + 1};
    for (int d = 0, k = 0; d <= r; d++) s.d[d] = d == axis ? 1 : idx->shape.d[k++];
    ts_tensor *pos = ts_onnx_iota_along(im, n, axis, r + 1, &st);
    if (!pos) return st;
    if (int_idx) pos = ts_cast(g, pos, TS_I64);
    v = ts_reshape(g, v, 1, (int64_t[]){2});
    ts_tensor *y = ts_where(g, ts_binary(g, "Equal", ts_reshape(g, idx, s.ndim, s.d), pos), ts_slice(g, v, 0, 1, 1), ts_slice(g, v, 0, 0, 1));
    return ts_onnx_built(im, v0 ? ts_onnx_as_dtype_of(im, y, v0) : y, &io->out[0]);
}

/* An i32 constant of n values from fill(ctx, i) under an op output name
 * of `what`. */
static ts_tensor *i32_constant(importer *im, const char *what, const ts_shape *s, int32_t (*fill)(const void *, int64_t), const void *ctx,
                               ts_status *st) {
    int64_t n = ts_shape_numel(s);
    if ((*st = ts_const_charge((uint64_t)n * 4))) return NULL;
    int32_t *v = ts_malloc((size_t)(n ? n : 1) * sizeof *v);
    char *name = v ? ts_graph_op_output_name(im->g, what) : NULL;
    for (int64_t i = 0; name && i < n; i++) v[i] = fill(ctx, i);
    ts_array a = ts_array_i32(v, s->ndim, s->d);
    ts_tensor *t = name ? ts_constant(im->g, name, &a) : NULL;
    ts_free(name);
    ts_free(v);
    ts_const_release((uint64_t)n * 4);
    if (!t) *st = ts_graph_status(im->g) ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
    return t;
}
typedef struct affine_ctx {
    int64_t a, b;
} affine_ctx;
static int32_t fill_affine(const void *ctx, int64_t i) { /* a + b * i */
    const affine_ctx *c = ctx;
    return (int32_t)(c->a + c->b * i);
}
typedef struct nd_ctx {
    const double *v; /* the constant index rows */
    int q;
    const int64_t *d; /* the q indexed dims */
    int64_t per_batch, m; /* rows per batch, positions per batch */
} nd_ctx;
static int32_t fill_nd_flat(const void *ctx, int64_t row) {
    const nd_ctx *c = ctx;
    int64_t flat = 0;
    for (int j = 0; j < c->q; j++) {
        int64_t at = (int64_t)c->v[row * c->q + j];
        flat = flat * c->d[j] + (at < 0 ? at + c->d[j] : at);
    }
    return (int32_t)(row / c->per_batch * c->m + flat);
}

/* GatherND with batch_dims b: data [B..., D_b..D_{b+q-1}, tail...] seen as
 * [prod(B) * prod(D), tail...] and gathered along its first axis at each
 * index row's flat position. Constant indices: each checked at import
 * (negative ones counted from their dim, one out of range an error naming
 * the node) and the positions an i32 constant. Indices the graph computes:
 * each column j a Gather of the positions 0..D_j-1 (that Gather's run
 * check makes one outside [-D_j, D_j) an error naming the tensor and the
 * value, never clamped, and counts a negative one from the end), times its
 * stride, added in i32 with the batch's offset. Gather's gradient reaches
 * the data. */
ts_status ts_onnx_op_gather_nd(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_graph *g = im->g;
    value *iv = io->in[1];
    ts_tensor *data = ts_onnx_as_tensor(im, io->in[0], &st); /* integers and bools gathered as they are */
    int64_t b;
    if (!data || (st = ts_onnx_attr_int(im, "batch_dims", 0, 0, TS_MAX_DIMS, &b))) return st;
    const ts_shape *is = shape_of(iv);
    int r = data->shape.ndim, mr = is->ndim;
    int q = mr ? (int)is->d[mr - 1] : 0;
    if (mr < 1 || q < 1 || b >= mr || b + q > r)
        return ts_onnx_node_error(im, TS_ERR_SHAPE, "indices of %d dims whose last is %d do not index data of %d dims after %lld batch dims", mr, q, r,
                                  (long long)b);
    int64_t B = 1, M = 1, rows = ts_shape_numel(is) / q;
    for (int d = 0; d < b; d++) {
        if (is->d[d] != data->shape.d[d]) return ts_onnx_node_error(im, TS_ERR_SHAPE, "batch dim %d is %lld in the indices, %lld in the data", d,
                                                                    (long long)is->d[d], (long long)data->shape.d[d]);
        B *= data->shape.d[d];
    }
    for (int d = (int)b; d < b + q; d++) M *= data->shape.d[d];
    if (B * M > INT32_MAX)
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "it indexes %lld positions; a GatherND takes at most 2^31 - 1", (long long)(B * M));
    const int64_t *dd = data->shape.d + b;
    ts_shape fs = *is; /* the index rows' shape */
    fs.ndim--;
    if (fs.ndim == 0) fs = (ts_shape){.ndim = 1, .d = {1}};
    ts_tensor *flat;
    if (is_const(iv)) {
        if ((st = ts_onnx_decoded(im, iv)) || (st = const_indices_in_range(im, iv, q, dd))) return st;
        flat = i32_constant(im, "Positions", &fs, fill_nd_flat, &(nd_ctx){iv->c.v, q, dd, rows / B, M}, &st);
    } else {
        ts_tensor *it = ts_onnx_as_tensor(im, iv, &st);
        flat = NULL;
        for (int j = 0; it && j < q; j++) {
            ts_tensor *col = ts_reshape(g, ts_slice(g, it, mr - 1, j, 1), fs.ndim, fs.d);
            if (col && col->dtype != TS_I32) col = ts_graph_indices(g, col); /* f32 or i64: checked as indices */
            ts_tensor *pos = col ? i32_constant(im, "Positions", &(ts_shape){.ndim = 1, .d = {dd[j]}}, fill_affine, &(affine_ctx){0, 1}, &st) : NULL;
            ts_tensor *at = pos ? ts_gather(g, pos, col, 0) : NULL; /* in [0, D_j): the run checks col */
            int64_t stride = 1;
            for (int k = j + 1; k < q; k++) stride *= dd[k];
            if (at && stride > 1) {
                ts_tensor *sc = i32_constant(im, "Stride", &(ts_shape){.ndim = 1, .d = {1}}, fill_affine, &(affine_ctx){stride, 0}, &st);
                at = sc ? ts_binary(g, "Mul", at, sc) : NULL;
            }
            flat = !at ? NULL : flat ? ts_binary(g, "Add", flat, at) : at;
            if (!flat) break;
        }
        if (flat && b > 0) { /* each batch's first row of the flattened data */
            ts_shape os = {.ndim = fs.ndim};
            for (int d = 0; d < os.ndim; d++) os.d[d] = d < b ? fs.d[d] : 1;
            ts_tensor *off = i32_constant(im, "BatchOffsets", &(ts_shape){.ndim = 1, .d = {B}}, fill_affine, &(affine_ctx){0, M}, &st);
            flat = off ? ts_binary(g, "Add", flat, ts_reshape(g, off, os.ndim, os.d)) : NULL;
        }
    }
    if (!flat) return st ? st : ts_graph_status(g);
    ts_shape ds = {.ndim = 1 + r - (int)(b + q), .d = {B * M}};
    for (int d = (int)(b + q); d < r; d++) ds.d[d - (b + q) + 1] = data->shape.d[d];
    ts_tensor *y = ts_gather(g, ts_reshape(g, data, ds.ndim, ds.d), flat, 0);
    if (y && mr == 1) { /* one index row: the row's own dim goes */
        ts_shape ys = y->shape;
        for (int d = 0; d + 1 < ys.ndim; d++) ys.d[d] = ys.d[d + 1];
        ys.ndim--;
        y = ys.ndim ? ts_reshape(g, y, ys.ndim, ys.d) : ts_reshape(g, y, 0, ys.d);
    }
    return ts_onnx_built(im, y, &io->out[0]);
}

/* Compress with a constant condition (input 1): along `axis` (absent: of
 * the flattened input) the positions where it is true, a Gather of
 * constant indices (its gradient adds back into them). */
ts_status ts_onnx_op_compress(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = ts_onnx_as_tensor(im, io->in[0], &st);
    if (!x || (st = ts_onnx_decoded(im, io->in[1]))) return st;
    if (!is_const(io->in[1]) || io->in[1]->c.shape.ndim != 1)
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its condition ('%s') must be a constant 1-D list%s", io->in[1]->name, ts_onnx_bind_hint(io->in[1]));
    const Attr *a = ts_onnx_attr(im, "axis");
    int axis = 0;
    if (a && (st = ts_onnx_attr_axis(im, "axis", 0, x->shape.ndim, false, &axis))) return st;
    if (!a) x = ts_reshape(im->g, x, 1, (int64_t[]){ts_shape_numel(&x->shape)});
    if (!x) return ts_graph_status(im->g);
    int64_t n = ts_shape_numel(&io->in[1]->c.shape), dim = x->shape.d[axis], count = 0;
    if (n > dim) n = dim;
    if ((st = ts_const_charge((uint64_t)(n ? n : 1) * 4))) return ts_onnx_fold_result(im, st);
    int32_t *pos = ts_malloc((size_t)(n ? n : 1) * sizeof *pos);
    for (int64_t i = 0; pos && i < n; i++)
        if (io->in[1]->c.v[i] != 0) pos[count++] = (int32_t)i;
    char *name = pos && count ? ts_graph_op_output_name(im->g, "Kept") : NULL;
    ts_array pa = ts_array_i32(pos, 1, (int64_t[]){count});
    ts_tensor *c = name ? ts_constant(im->g, name, &pa) : NULL;
    ts_free(name);
    ts_free(pos);
    ts_const_release((uint64_t)(n ? n : 1) * 4);
    if (!count) return ts_onnx_node_error(im, TS_ERR_SHAPE, "its condition keeps nothing; tensorscope's dimensions are positive");
    if (!c) return ts_graph_status(im->g) ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
    return ts_onnx_built(im, ts_gather(im->g, x, c, axis), &io->out[0]);
}

void ts_onnx_fill_scatter_mask(const void *ctx, float *v) {
    const scatter_layer_ctx *c = ctx;
    for (int64_t i = 0; i < c->n; i++) v[i] = c->src[i] >= 0;
}

/* ScatterND's computed rows: the strides of the q indexed dims as a [q, 1]
 * column (their flat position a MatMul away), or the dims themselves */
typedef struct strides_ctx {
    int q;
    const int64_t *d; /* the q indexed dims */
    bool dims;        /* the dims themselves, not their strides */
} strides_ctx;
static void fill_strides(const void *ctx, float *v) {
    const strides_ctx *c = ctx;
    double stride = 1;
    for (int j = c->q - 1; j >= 0; j--) {
        v[j] = c->dims ? (float)c->d[j] : (float)stride;
        stride *= (double)c->d[j];
    }
}

/* [n, n]: 1 where the column's index is past the row's */
static void fill_later(const void *ctx, float *v) {
    int64_t n = *(const int64_t *)ctx;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) v[i * n + j] = j > i;
}

/* The most elements of the [index rows, positions] comparison by which
 * ScatterND writes indices the graph computes (256 MiB of f32). */
#define SCATTER_COMPUTED_MAX ((int64_t)1 << 26)

/* ScatterND of indices the graph computes (MaxUnpool's, from MaxPool's
 * winners), reduction none or add: each index row's flat position among
 * the q indexed dims (negative ones counted from their dim; the rows times
 * the constant strides, exact below 2^24) compared with every position,
 * hit [rows, M]; with reduction none a row that a later row writes over
 * is dropped (the last write stays, as with constant indices). The
 * updates reach the positions by hit^T x updates [rows, inner] (the
 * gradient flows back to them), the data stays where no row writes (none)
 * or takes their sum (add). Integer data and updates move exactly, in
 * their dtype: hit as integers, the product ts_matmul_int's (in the
 * output's memory, of any size). An index outside its dim is an error at
 * run, as in a Gather. */
static ts_status scatter_nd_computed(importer *im, node_io *io, int red, ts_tensor *x, ts_tensor *u, ts_tensor **out) {
    ts_status st = TS_OK;
    ts_graph *g = im->g;
    bool integer = is_int_tensor(x);
    if (red > 1)
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its indices ('%s') are computed from the graph's tensors: tensorscope writes those with "
                                  "reduction none or add, not mul, max or min (constant indices take every reduction)", io->in[1]->name);
    ts_tensor *idx = as_f32(im, io->in[1], &st);
    if (!idx) return st;
    const ts_shape *xs = &x->shape, *is = &idx->shape, *us = &u->shape;
    int r = xs->ndim, mr = is->ndim, q = mr ? (int)is->d[mr - 1] : 0;
    bool fits = mr >= 1 && q >= 1 && q <= r && us->ndim == mr - 1 + r - q;
    for (int d = 0; fits && d < us->ndim; d++) fits = us->d[d] == (d < mr - 1 ? is->d[d] : xs->d[d - (mr - 1) + q]);
    if (!fits) return ts_onnx_node_error(im, TS_ERR_SHAPE, "its indices, updates and data do not fit together (ScatterND: updates are indices.shape[:-1] + data.shape[q:])");
    int64_t M = 1, inner = 1, rows = ts_shape_numel(is) / q;
    for (int d = 0; d < r; d++) *(d < q ? &M : &inner) *= xs->d[d];
    if ((double)rows * (double)(M + (red ? 0 : rows)) > (double)SCATTER_COMPUTED_MAX)
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its indices ('%s') are computed from the graph's tensors, which tensorscope writes by "
                                  "comparing each of the %lld index rows with each of the %lld positions; that is more than %lld comparisons: "
                                  "compute the indices at export (constants), or scatter fewer rows", io->in[1]->name, (long long)rows,
                                  (long long)M, (long long)SCATTER_COMPUTED_MAX);
    ts_tensor *strides = ts_onnx_computed_constant(im, "Strides", &(ts_shape){.ndim = 2, .d = {q, 1}}, fill_strides, &(strides_ctx){q, xs->d, false}, &st);
    ts_tensor *dims = strides ? ts_onnx_computed_constant(im, "Dims", &(ts_shape){.ndim = 1, .d = {q}}, fill_strides, &(strides_ctx){q, xs->d, true}, &st) : NULL;
    ts_tensor *pos = dims ? ts_onnx_iota_along(im, M, 0, 1, &st) : NULL, *zero = pos ? ts_onnx_scalar_constant(im, "Zero", 0.0f) : NULL;
    if (!zero) return st ? st : ts_graph_status(g);
    idx = ts_reshape(g, idx, 2, (int64_t[]){rows, q});
    idx = ts_add(g, idx, ts_mul(g, num(g, ts_binary(g, "Less", idx, zero)), dims));
    ts_tensor *flat = idx ? ts_onnx_matmul_2d(im, idx, strides, false, &st) : NULL; /* [rows, 1] */
    if (!flat) return st ? st : ts_graph_status(g);
    /* a row with an index outside its dim goes to M, past the positions, which the Gather of
     * the positions there refuses at run as it refuses any index outside its table */
    int one = 1;
    ts_tensor *outside = ts_reduce_max(g, num(g, ts_binary(g, "Or", ts_binary(g, "Less", idx, zero), ts_binary(g, "GreaterOrEqual", idx, dims))), 1, &one, 1);
    flat = ts_where(g, outside, ts_onnx_scalar_constant(im, "Past", (float)M), flat);
    flat = flat ? ts_graph_indices(g, ts_reshape(g, flat, 1, (int64_t[]){rows})) : NULL;
    flat = flat ? ts_reshape(g, ts_gather(g, pos, flat, 0), 2, (int64_t[]){rows, 1}) : NULL;
    if (!flat) return ts_graph_status(g);
    ts_tensor *hit = num(g, ts_binary(g, "Equal", flat, ts_reshape(g, pos, 2, (int64_t[]){1, M})));
    if (!red) { /* drop a row that a later one writes over */
        ts_tensor *later = ts_onnx_computed_constant(im, "Later", &(ts_shape){.ndim = 2, .d = {rows, rows}}, fill_later, &rows, &st);
        if (!later) return st;
        ts_tensor *same = ts_binary(g, "Equal", flat, ts_reshape(g, flat, 2, (int64_t[]){1, rows}));
        ts_tensor *over = ts_reduce_max(g, ts_mul(g, num(g, same), later), 1, &one, 1);
        hit = ts_where(g, over, zero, hit);
    }
    int first = 0;
    ts_tensor *written = ts_reshape(g, ts_reduce_max(g, hit, 1, &first, 1), 2, (int64_t[]){M, 1});
    ts_tensor *u2 = ts_reshape(g, u, 2, (int64_t[]){rows, inner}), *moved = NULL; /* moved: [M, inner] */
    if (integer) moved = ts_matmul_int(g, ts_cast(g, ts_transpose(g, hit, 0, 1), x->dtype), u2);
    else moved = ts_matmul_batched(g, hit, u2, 1, 0);
    ts_tensor *y = ts_reshape(g, x, 2, (int64_t[]){M, inner});
    if (integer) y = red ? ts_binary(g, "Add", y, moved) : ts_where(g, ts_cast(g, written, TS_BOOL), moved, y);
    else y = red ? ts_add(g, y, moved) : ts_where(g, written, moved, y);
    if ((st = ts_onnx_graph_status(g, y))) return st;
    *out = y;
    return TS_OK;
}

/* ScatterND and ScatterElements (and the old Scatter) with constant
 * indices (input 1; ScatterND's computed ones: scatter_nd_computed): the flat data position each update element goes to
 * is computed at import; the updates then reach the data in layers, each
 * a Gather of the updates at the positions it writes and a Where of its
 * mask, a position written k times in k layers: reduction none keeps the
 * last write (one layer), add, mul, max and min combine each layer with
 * the data so far. Gather, Where and the binary ops carry the gradient to
 * the data and the updates. */
ts_status ts_onnx_op_scatter(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_graph *g = im->g;
    bool nd = strcmp(im->node->op_type, "ScatterND") == 0;
    ts_tensor *x0 = ts_onnx_as_tensor(im, io->in[0], &st), *x = x0, *u = NULL;
    /* integer data and updates at constant indices: moved and combined
     * exactly, in the data's dtype; else in f32 */
    bool nd_computed = nd && !is_const(io->in[1]);
    bool integer = x0 && is_int_tensor(x0) && (is_const(io->in[1]) || nd_computed) && (u = ts_onnx_int_like(im, io->in[2], x0, &st)) != NULL;
    if (!integer && !st) x = ts_onnx_f32_of(im, x0, &st), u = x ? as_f32(im, io->in[2], &st) : NULL;
    if (!u || (st = ts_onnx_decoded(im, io->in[1]))) return st;
    value *iv = io->in[1];
    static const char *const reductions[] = {"none", "add", "mul", "max", "min"};
    const Attr *ra = ts_onnx_attr(im, "reduction");
    int red = ra ? ts_onnx_attr_choice(ra, reductions, 5) : 0, axis = 0;
    if (red == 5) return ts_onnx_node_error(im, TS_ERR_FORMAT, "reduction '%.*s' is not none, add, mul, max or min", (int)ra->s.len, (const char *)ra->s.data);
    if (!is_const(iv) && nd) {
        ts_tensor *y = NULL;
        if ((st = scatter_nd_computed(im, io, red, x, u, &y))) return st;
        y = ts_reshape(g, y, x->shape.ndim, x->shape.d); /* integer data: in its dtype already */
        return ts_onnx_built(im, integer ? y : ts_onnx_as_dtype_of(im, y, x0), &io->out[0]);
    }
    if (!is_const(iv))
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its indices ('%s') must be a constant%s", iv->name, ts_onnx_bind_hint(iv));
    const ts_shape *xs = &x->shape, *is = &iv->c.shape, *us = &u->shape;
    int r = xs->ndim;
    if (!nd && (st = ts_onnx_attr_axis(im, "axis", 0, r, false, &axis))) return st;
    int64_t N = ts_shape_numel(xs), U = ts_shape_numel(us);
    int q = nd ? (is->ndim ? (int)is->d[is->ndim - 1] : 0) : 0;
    if (nd ? (is->ndim < 1 || q < 1 || q > r || us->ndim != is->ndim - 1 + r - q) : !ts_shape_equal(is, us) || is->ndim != r)
        return ts_onnx_node_error(im, TS_ERR_SHAPE, "its indices, updates and data do not fit together (%s)", nd ? "ScatterND: updates are indices.shape[:-1] + data.shape[q:]"
                                                                                                    : "ScatterElements: indices and updates alike, of the data's rank");
    if ((st = const_indices_in_range(im, iv, nd ? q : 1, nd ? xs->d : &xs->d[axis]))) return st;
    int64_t inner = 1; /* ScatterND: elements of each indexed slice */
    for (int d = q; nd && d < r; d++) inner *= xs->d[d];
    int64_t bytes = (N + 2 * U) * (int64_t)sizeof(int64_t);
    if ((st = ts_const_charge((uint64_t)bytes))) return ts_onnx_fold_result(im, st);
    int64_t *dst = ts_malloc((size_t)(U ? U : 1) * sizeof *dst), *src = ts_malloc((size_t)(N ? N : 1) * sizeof *src);
    int64_t *occ = ts_malloc((size_t)(U ? U : 1) * sizeof *occ); /* update k is the occ[k]-th write to its position */
    for (int64_t k = 0; dst && src && occ && k < U && !st; k++) { /* where update k goes */
        int64_t flat = 0, rest = k;
        if (nd) {
            int64_t row = k / inner;
            for (int j = 0; j < q; j++) {
                int64_t dim = xs->d[j], at = (int64_t)iv->c.v[row * q + j];
                flat = flat * dim + (at < 0 ? at + dim : at);
            }
            flat = flat * inner + k % inner;
        } else {
            int64_t coord[TS_MAX_DIMS];
            for (int d = r - 1; d >= 0; d--) coord[d] = rest % us->d[d], rest /= us->d[d];
            int64_t dim = xs->d[axis], at = (int64_t)iv->c.v[k];
            coord[axis] = at < 0 ? at + dim : at;
            for (int d = 0; d < r; d++) flat = flat * xs->d[d] + coord[d];
        }
        dst[k] = flat;
    }
    for (int64_t i = 0; dst && src && occ && !st && i < N; i++) src[i] = 0;
    for (int64_t k = 0; dst && src && occ && !st && k < U; k++) occ[k] = src[dst[k]]++;
    ts_tensor *y = dst && src && occ && !st ? ts_reshape(g, x, 1, (int64_t[]){N}) : NULL, *uf = y ? ts_reshape(g, u, 1, (int64_t[]){U}) : NULL;
    /* layer l writes the l-th update to each position (none: the last only) */
    for (int layer = 0; uf && y && !st; layer++) {
        bool any = false;
        for (int64_t i = 0; i < N; i++) src[i] = -1;
        for (int64_t k = 0; k < U; k++)
            if (red ? occ[k] == layer : layer == 0) src[dst[k]] = k, any = true;
        if (!any) break;
        int32_t *idx = ts_malloc((size_t)N * sizeof *idx);
        char *name = idx ? ts_graph_op_output_name(g, "Sources") : NULL;
        for (int64_t i = 0; name && i < N; i++) idx[i] = (int32_t)(src[i] < 0 ? 0 : src[i]);
        ts_array ia = ts_array_i32(idx, 1, (int64_t[]){N});
        ts_tensor *ic = name ? ts_constant(g, name, &ia) : NULL;
        ts_free(name);
        ts_free(idx);
        ts_tensor *mask = ic ? ts_onnx_computed_constant(im, "Written", &(ts_shape){.ndim = 1, .d = {N}}, ts_onnx_fill_scatter_mask, &(scatter_layer_ctx){src, N}, &st) : NULL;
        if (!mask) {
            if (!st) st = ts_graph_status(g) ? ts_graph_status(g) : TS_ERR_OUT_OF_MEMORY;
            break;
        }
        ts_tensor *v = ts_gather(g, uf, ic, 0);
        if (integer) { /* a bool mask; add and mul combine with 0 and 1 where the layer writes nothing */
            ts_tensor *written = ts_cast(g, mask, TS_BOOL), *none = red == 1 || red == 2 ? ts_onnx_int_scalar_like(im, x, red == 2, &st) : NULL;
            if (red == 0 || red == 3 || red == 4) y = ts_where(g, written, red == 0 ? v : ts_binary(g, red == 3 ? "Max" : "Min", y, v), y);
            else y = ts_binary(g, red == 1 ? "Add" : "Mul", y, ts_where(g, written, v, none));
        } else if (red == 0 || red == 3 || red == 4) y = ts_where(g, mask, red == 0 ? v : ts_binary(g, red == 3 ? "Max" : "Min", y, v), y);
        else y = red == 1 ? ts_add(g, y, ts_mul(g, v, mask)) : ts_mul(g, y, ts_where(g, mask, v, ts_onnx_scalar_constant(im, "One", 1.0f)));
        if (!red) break;
    }
    ts_free(dst);
    ts_free(src);
    ts_free(occ);
    ts_const_release((uint64_t)bytes);
    if (st) return st;
    if (!y) return ts_graph_status(g) ? ts_graph_status(g) : TS_ERR_OUT_OF_MEMORY;
    y = ts_reshape(g, y, xs->ndim, xs->d);
    return ts_onnx_built(im, integer ? y : ts_onnx_as_dtype_of(im, y, x0), &io->out[0]);
}

/* ---------------------------------------------------------- TensorScatter */

/* TensorScatter (opset 24): past_cache with the update written along axis
 * (after the batch axis) from write_indices[b] on (NULL: 0) in each batch
 * row, wrapping around in `circular` mode: a Where of a GatherElements of
 * the update at the positions it lands on; the gradient reaches both.
 * ONNX's linear mode requires write_indices + sequence_length <=
 * max_sequence_length: each write index is read as a row of the S - L + 1
 * starts that fit (an Embedding of the positions), so the run's index
 * check makes one outside [0, S - L] an error naming write_indices and
 * the value; none is masked or clamped into the cache. */
static ts_status ts_onnx_tensor_scatter(ts_graph *g, ts_tensor *past, ts_tensor *update, ts_tensor *index, int axis, bool circular, ts_tensor **out) {
    *out = NULL;
    const ts_shape *ps = &past->shape, *us = &update->shape;
    bool fits = ps->ndim == us->ndim && axis > 0 && axis < ps->ndim;
    for (int i = 0; fits && i < ps->ndim; i++) fits = i == axis ? us->d[i] <= ps->d[i] : us->d[i] == ps->d[i];
    if (!fits)
        return ts_error(TS_ERR_SHAPE, "the update must have past_cache's shape but along axis %d (after the batch axis), where it is no longer", axis);
    if (index && (index->shape.ndim != 1 || index->shape.d[0] != ps->d[0]))
        return ts_error(TS_ERR_SHAPE, "write_indices must be [%lld], one per batch row", (long long)ps->d[0]);
    int64_t S = ps->d[axis], L = us->d[axis];
    /* rel = s - write_indices[b] over [B,1..S..1] (mod S when circular): where update position rel lands */
    ts_shape one = {.ndim = ps->ndim};
    for (int i = 0; i < ps->ndim; i++) one.d[i] = i == axis ? S : 1;
    float *pos = ts_malloc((size_t)S * sizeof *pos);
    if (!pos) return ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory");
    for (int64_t s = 0; s < S; s++) pos[s] = (float)s;
    char *name = ts_graph_op_output_name(g, "Positions");
    ts_array pa = {.dtype = TS_F32, .ndim = one.ndim, .data = pos};
    for (int i = 0; i < one.ndim; i++) pa.shape[i] = one.d[i];
    ts_tensor *rel = name ? ts_constant(g, name, &pa) : NULL;
    ts_free(name);
    ts_free(pos);
    if (index) {
        ts_shape bs = {.ndim = ps->ndim};
        for (int i = 0; i < ps->ndim; i++) bs.d[i] = i ? 1 : ps->d[0];
        ts_tensor *at = index->dtype == TS_F32 ? index : ts_cast(g, index, TS_F32); /* i32 or i64 positions */
        if (!circular) {
            ts_tensor *starts = ts_slice(g, ts_reshape(g, rel, 2, (int64_t[]){S, 1}), 0, 0, S - L + 1);
            ts_tensor *rows = index->dtype == TS_I32 ? index : ts_graph_indices(g, index);
            char *rn = rows && rows != index ? ts_graph_op_output_name(g, "WriteIndices") : NULL;
            if (rn) ts_tensor_set_name(rows, rn);
            ts_free(rn);
            at = ts_embedding(g, starts, rows);
        }
        rel = ts_sub(g, rel, ts_reshape(g, at, bs.ndim, bs.d));
        if (circular) rel = ts_binary(g, "Mod", rel, ts_onnx_scalar(g, "Length", (float)S));
    }
    ts_tensor *written = ts_binary(g, "Less", rel, ts_onnx_scalar(g, "Count", (float)L));
    if (index && !circular) written = ts_binary(g, "And", written, ts_binary(g, "GreaterOrEqual", rel, ts_onnx_scalar(g, "Zero", 0.0f)));
    /* the update at rel, on past's shape (rel broadcast by adding past times 0, which has no gradient here) */
    ts_tensor *at = ts_add(g, rel, ts_scale(g, past->dtype == TS_F32 ? ts_stop_gradient(g, past) : ts_cast(g, past, TS_F32), 0.0f));
    ts_tensor *from = ts_gather_elements(g, update, ts_unary(g, "CastIndex", at, 0.0f, (float)(L - 1)), axis);
    ts_tensor *y = ts_where(g, written, from, past);
    ts_status st = ts_onnx_graph_status(g, y);
    if (!st) *out = y;
    return st;
}

/* TensorScatter (opset 24): ts_onnx_tensor_scatter above. */
ts_status ts_onnx_op_tensor_scatter(importer *im, node_io *io) {
    static const char *const modes[] = {"linear", "circular"};
    const Attr *ma = ts_onnx_attr(im, "mode");
    int mode = ma ? ts_onnx_attr_choice(ma, modes, 2) : 0, axis;
    if (mode == 2) return ts_onnx_node_error(im, TS_ERR_FORMAT, "mode '%.*s' is not linear or circular", (int)ma->s.len, (const char *)ma->s.data);
    ts_status st = TS_OK;
    /* integers (a cache of ids) written exactly, in their dtype; else in f32 */
    ts_tensor *past = ts_onnx_as_tensor(im, io->in[0], &st), *update = past ? ts_onnx_as_tensor(im, io->in[1], &st) : NULL;
    if (update && !(is_int_tensor(past) && update->dtype == past->dtype))
        past = ts_onnx_f32_of(im, past, &st), update = past ? ts_onnx_f32_of(im, update, &st) : NULL;
    ts_tensor *index = update && io->n_in > 2 && io->in[2] ? ts_onnx_as_tensor(im, io->in[2], &st) : NULL, *y;
    if (!update || st || (st = ts_onnx_attr_axis(im, "axis", -2, past->shape.ndim, false, &axis))) return st;
    value *wi = io->n_in > 2 ? io->in[2] : NULL;
    int64_t S = past->shape.d[axis], L = update->shape.ndim > axis ? update->shape.d[axis] : 0;
    if (mode == 0 && wi && is_const(wi) && L <= S) { /* ONNX's linear mode: write_indices + sequence_length <= max_sequence_length */
        if ((st = ts_onnx_decoded(im, wi))) return st;
        for (int64_t p = 0, n = ts_shape_numel(&wi->c.shape); p < n; p++) {
            double v = wi->c.v[p];
            if (v == floor(v) && v >= 0 && v <= (double)(S - L) && (!wi->c.iv || wi->c.iv[p] <= S - L)) continue;
            char shown[32];
            return ts_onnx_node_error(im, TS_ERR_FORMAT, "its write_indices '%s'[%lld] = %s are out of range: in linear mode an update of %lld "
                                      "along an axis of %lld is written from [0, %lld] (ONNX requires write_indices + sequence_length <= "
                                      "max_sequence_length; a write index is never clamped or its update cut: fix the indices, or "
                                      "use mode 'circular' to wrap around)", wi->name, (long long)p, index_shown(wi, p, shown, sizeof shown),
                                      (long long)L, (long long)S, (long long)(S - L));
        }
    }
    if ((st = ts_onnx_tensor_scatter(im->g, past, update, index, axis, mode == 1, &y))) return ts_onnx_fold_result(im, st);
    return ts_onnx_built(im, y, &io->out[0]);
}
