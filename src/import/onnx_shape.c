/* onnx_shape.c -- shapes and tensor movement: Shape and Size, Reshape,
 * Flatten, Squeeze and Unsqueeze, Transpose, Split, Slice, Concat, Expand,
 * Pad, Tile, DepthToSpace and SpaceToDepth, CenterCropPad, Trilu, Identity
 * and StopGradient, Dropout. */
#include "import/onnx_ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* x, through which no gradient flows (a constant or integers have none). */
ts_status ts_onnx_op_stop_gradient(importer *im, node_io *io) {
    value *x = io->in[0];
    if ((is_const(x) && !x->param) || (x->t && x->t->dtype != TS_F32)) return ts_onnx_op_identity(im, io);
    ts_status st = TS_OK;
    ts_tensor *t = ts_onnx_as_tensor(im, x, &st);
    return t ? ts_onnx_built(im, ts_stop_gradient(im->g, t), &io->out[0]) : st;
}

/* The same tensor under a second name (a parameter stays one tensor). */
ts_status ts_onnx_op_identity(importer *im, node_io *io) {
    ts_status st = TS_OK;
    value *x = io->in[0];
    /* PyTorch's exporter stores parameters of equal values once and gives
     * the others as Identity of it (the layer norms' ones and zeros): a
     * parameter of its own under the output's name, with its own gradient
     * (a tied weight is one initializer, read by name, never an Identity) */
    if (x->param && im->node->output[0] && *im->node->output[0]) {
        value twin = {.name = im->node->output[0], .param = x->param};
        twin.c.shape = x->c.shape;
        twin.c.dtype = x->c.dtype;
        ts_tensor *t = ts_onnx_as_tensor(im, &twin, &st);
        ts_const_free(&twin.c);
        return t ? ts_onnx_built(im, t, &io->out[0]) : st;
    }
    if (x->param && !ts_onnx_as_tensor(im, x, &st)) return st;
    if (is_const(io->in[0])) return ts_onnx_fold_result(im, ts_const_copy_exact(&io->in[0]->c, &io->out[0].c));
    io->out[0] = (value){.t = io->in[0]->t};
    return TS_OK;
}

/* Dropout: the identity in an inference export (no training_mode input, or
 * a constant false), its mask output all ones; in a training export
 * ts_dropout, whose mask output is where the drawn mask keeps a value. */
ts_status ts_onnx_op_dropout(importer *im, node_io *io) {
    double train = 0, ratio = 0.5;
    if (io->n_in >= 3 && io->in[2] && !(is_const(io->in[2]) && ts_onnx_const_scalar(io->in[2], &train)))
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "a Dropout whose training_mode is computed by the graph is not available%s",
                                  ts_onnx_bind_hint(io->in[2]));
    if (io->n_in >= 2 && io->in[1] && !ts_onnx_const_scalar(io->in[1], &ratio))
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "a Dropout whose ratio is not a constant is not available%s", ts_onnx_bind_hint(io->in[1]));
    if (train != 0) {
        ts_status st = TS_OK;
        ts_tensor *x = ts_onnx_as_tensor(im, io->in[0], &st), *y = x ? ts_dropout(im->g, x, (float)ratio) : NULL;
        if (!x) return st;
        st = ts_onnx_built(im, y, &io->out[0]);
        /* y = x * mask, the mask 0 or 1/(1-ratio); only where a node or the
         * graph's outputs read it (training exports name it and never read
         * it: made anyway, it would be the last tensor of the Dropout's
         * module, which `compare` pairs with PyTorch's module output) */
        if (!st && io->n_out > 1 && *im->node->output[1] && ts_strmap_get(&im->uses, im->node->output[1]) > 0)
            st = ts_onnx_built(im, ts_unary(im->g, "CastBool", ts_tensor_input(y, 1), 0.0f, 0.0f), &io->out[1]);
        return st;
    }
    ts_status st = ts_onnx_op_identity(im, io);
    if (!st && io->n_out > 1) st = ts_onnx_fold_result(im, ts_const_fill(shape_of(io->in[0]), TS_ONNX_BOOL, 1.0, &io->out[1].c));
    return st;
}

/* Shape of anything whose shape is known (every value here). */
ts_status ts_onnx_op_shape(importer *im, node_io *io) {
    const ts_shape *s = shape_of(io->in[0]);
    int64_t start = ts_onnx_attr_i(im, "start", 0), end = ts_onnx_attr_i(im, "end", s->ndim);
    if (start < 0) start += s->ndim;
    if (end < 0) end += s->ndim;
    start = start < 0 ? 0 : start > s->ndim ? s->ndim : start;
    end = end < start ? start : end > s->ndim ? s->ndim : end;
    ts_const *c = &io->out[0].c;
    ts_status st = ts_const_fill(&(ts_shape){.ndim = 1, .d = {end - start}}, TS_ONNX_INT64, 0, c);
    for (int64_t i = start; !st && i < end; i++) c->v[i - start] = (double)s->d[i];
    return ts_onnx_fold_result(im, st);
}

ts_status ts_onnx_op_size(importer *im, node_io *io) {
    return ts_onnx_fold_result(im, ts_const_fill(&(ts_shape){0}, TS_ONNX_INT64, (double)ts_shape_numel(shape_of(io->in[0])), &io->out[0].c));
}

static ts_status reshape_to(importer *im, value *x, const ts_shape *s, value *out) {
    if (is_const(x) && !x->param) {
        ts_status st = ts_const_copy_exact(&x->c, &out->c);
        if (!st) out->c.shape = *s;
        return ts_onnx_fold_result(im, st);
    }
    ts_status st = TS_OK;
    ts_tensor *t = ts_onnx_as_tensor(im, x, &st);
    if (!t) return st;
    if (ts_shape_equal(&t->shape, s)) {
        *out = (value){.t = t};
        return TS_OK;
    }
    return ts_onnx_built(im, ts_reshape(im->g, t, s->ndim, s->d), out);
}

ts_status ts_onnx_op_reshape(importer *im, node_io *io) {
    if (io->n_in != 2) return ts_onnx_node_error(im, TS_ERR_FORMAT, "needs 2 inputs");
    int64_t want[TS_MAX_DIMS];
    int n = 0;
    bool allowzero = false;
    ts_status st = ts_onnx_const_ints(im, io->in[1], want, &n, "target shape", -1, TS_MAX_NUMEL, false);
    if (!st) st = ts_onnx_attr_flag(im, "allowzero", &allowzero);
    if (st) return st;
    ts_shape s;
    st = ts_const_reshape_target(shape_of(io->in[0]), want, n, allowzero, &s);
    if (st) return ts_onnx_fold_result(im, st);
    return reshape_to(im, io->in[0], &s, &io->out[0]);
}

ts_status ts_onnx_op_flatten(importer *im, node_io *io) {
    const ts_shape *in = shape_of(io->in[0]);
    int axis;
    ts_status st = ts_onnx_attr_axis(im, "axis", 1, in->ndim, true, &axis);
    if (st) return st;
    if (axis == 1 && in->ndim >= 2 && io->in[0]->t) return ts_onnx_built(im, ts_flatten(im->g, io->in[0]->t, 1), &io->out[0]);
    ts_shape s = {.ndim = 2, .d = {1, 1}};
    for (int i = 0; i < in->ndim; i++) s.d[i < axis ? 0 : 1] *= in->d[i];
    return reshape_to(im, io->in[0], &s, &io->out[0]);
}

ts_status ts_onnx_op_squeeze_unsqueeze(importer *im, node_io *io) {
    int64_t axes[TS_MAX_DIMS];
    int n = 0;
    ts_status st = ts_onnx_axes_of(im, io, 1, 13, axes, &n);
    if (st) return st;
    ts_shape s;
    st = ts_const_squeeze_shape(shape_of(io->in[0]), axes, n, strcmp(im->node->op_type, "Unsqueeze") == 0, &s);
    if (st) return ts_onnx_fold_result(im, st);
    return reshape_to(im, io->in[0], &s, &io->out[0]);
}

/* Pad: PyTorch writes one with zero pads before an avg_pool2d; that is
 * the identity, whatever the mode and constant value. Its pads are input 1
 * (2 per padded axis: all the starts, then all the ends), over every axis,
 * or from opset 18 on over the axes of input 3; the modes are constant
 * (the constant_value input 2, default 0), reflect and edge, and wrap from
 * opset 19 on: ts_pad (negative pads crop). */
ts_status ts_onnx_op_pad(importer *im, node_io *io) {
    if (io->n_in < 2 || !io->in[1]) return ts_onnx_node_error(im, TS_ERR_FORMAT, "input 1 (pads) is required");
    if (io->n_in > 3 && !since(im, 18)) return ts_onnx_node_error(im, TS_ERR_FORMAT, "input 3 (axes) is part of Pad from opset 18 on");
    const Attr *mode = ts_onnx_attr(im, "mode");
    int k = 0; /* modes[k]: ts_pad_mode k */
    if (mode) {
        static const char *const modes[] = {"constant", "reflect", "edge", "wrap"};
        int known = since(im, 19) ? 4 : 3;
        if ((k = ts_onnx_attr_choice(mode, modes, known)) == known)
            return ts_onnx_node_error(im, TS_ERR_FORMAT, "mode '%.*s' is not one of Pad's at this opset: constant, reflect, edge%s",
                                      mode->has_s ? (int)mode->s.len : 0, mode->has_s ? (const char *)mode->s.data : "", since(im, 19) ? ", wrap" : "");
    }
    int ndim = shape_of(io->in[0])->ndim, n = 0, n_axes = ndim;
    int64_t pads[2 * TS_MAX_DIMS], axes[TS_MAX_DIMS];
    ts_status st = ts_onnx_decoded(im, io->in[1]);
    if (st) return st;
    if (!is_const(io->in[1]) || io->in[1]->c.shape.ndim > 1 || ts_shape_numel(&io->in[1]->c.shape) > 2 * TS_MAX_DIMS)
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its pads ('%s') must be a constant list of at most %d values%s", io->in[1]->name,
                                  2 * TS_MAX_DIMS, ts_onnx_bind_hint(io->in[1]));
    n = (int)ts_shape_numel(&io->in[1]->c.shape);
    for (int i = 0; i < n; i++)
        if (!ts_onnx_int_value(io->in[1]->c.v[i], INT64_MIN, INT64_MAX, &pads[i]))
            return ts_onnx_node_error(im, TS_ERR_FORMAT, "its pads ('%s') hold %g at %d; pads are integers", io->in[1]->name, io->in[1]->c.v[i], i);
    if (io->n_in > 3 && io->in[3]) {
        if ((st = ts_onnx_const_ints(im, io->in[3], axes, &n_axes, "axes", -ndim, ndim - 1, false))) return st;
        bool seen[TS_MAX_DIMS] = {false};
        for (int i = 0; i < n_axes; i++) {
            int ax = norm_axis(axes[i], ndim);
            if (seen[ax]) return ts_onnx_node_error(im, TS_ERR_FORMAT, "axis %lld is given twice", (long long)axes[i]);
            seen[ax] = true;
        }
    }
    if (n != 2 * n_axes)
        return ts_onnx_node_error(im, TS_ERR_FORMAT, "its pads hold %d values; Pad takes 2 per padded axis (%d)", n, 2 * n_axes);
    bool zero = true;
    for (int i = 0; i < n; i++) zero = zero && pads[i] == 0;
    if (zero) return ts_onnx_op_identity(im, io);
    /* the pads of every dim, ONNX's order: all befores, then all afters */
    int64_t all[2 * TS_MAX_DIMS] = {0};
    for (int i = 0; i < n_axes; i++) {
        int ax = io->n_in > 3 && io->in[3] ? norm_axis(axes[i], ndim) : i;
        all[ax] = pads[i], all[ndim + ax] = pads[n_axes + i];
    }
    double fill = 0;
    if (io->n_in > 2 && io->in[2] && !ts_onnx_const_scalar(io->in[2], &fill))
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its constant_value ('%s') must be a constant of one value%s", io->in[2]->name,
                                  ts_onnx_bind_hint(io->in[2]));
    ts_tensor *x = ts_onnx_as_tensor(im, io->in[0], &st);
    if (x && is_int_tensor(x)) { /* integers padded exactly: a constant v other than 0 as Pad(x - v) + v, which wrap back */
        ts_graph *g = im->g;
        ts_tensor *v = k == TS_PAD_CONSTANT && fill != 0 ? ts_onnx_int_like(im, io->in[2], x, &st) : NULL;
        if (st) return st;
        if (k == TS_PAD_CONSTANT && fill != 0 && !v)
            return ts_onnx_node_error(im, TS_ERR_FORMAT, "its constant_value ('%s') is %g, no integer; an integer input is padded with an "
                                      "integer", io->in[2]->name, fill);
        ts_tensor *y = ts_pad(g, v ? ts_binary(g, "Sub", x, v) : x, all, (ts_pad_mode)k, 0.0f);
        return ts_onnx_built(im, v ? ts_binary(g, "Add", y, v) : y, &io->out[0]);
    }
    x = ts_onnx_f32_of(im, x, &st);
    return x ? ts_onnx_built(im, ts_pad(im->g, x, all, (ts_pad_mode)k, (float)fill), &io->out[0]) : st;
}

ts_status ts_onnx_op_transpose(importer *im, node_io *io) {
    if (is_const(io->in[0]) && !io->in[0]->param) return ts_onnx_op_fold(im, io);
    ts_status st = TS_OK;
    ts_tensor *x = ts_onnx_as_tensor(im, io->in[0], &st);
    if (!x) return st;
    int64_t p[TS_MAX_DIMS];
    int np, perm[TS_MAX_DIMS];
    if ((st = ts_onnx_attr_int_list(im, "perm", 0, x->shape.ndim - 1, p, TS_MAX_DIMS, &np))) return st;
    if (np >= 0 && np != x->shape.ndim)
        return ts_onnx_node_error(im, TS_ERR_SHAPE, "perm has %d entries for %d dimensions", np, x->shape.ndim);
    for (int i = 0; i < x->shape.ndim; i++) perm[i] = np < 0 ? x->shape.ndim - 1 - i : (int)p[i];
    return ts_onnx_built(im, ts_permute(im->g, x, perm), &io->out[0]);
}

/* Split into the sizes of the constant 'split' input, or (opset 18 on)
 * into 'num_outputs' parts of ceil(dim / num_outputs), the last one
 * smaller; with neither, equal parts, one per output. */
ts_status ts_onnx_op_split(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = ts_onnx_as_tensor(im, io->in[0], &st);
    if (!x) return st;
    int axis;
    if ((st = ts_onnx_attr_axis(im, "axis", 0, x->shape.ndim, false, &axis))) return st;
    int64_t sizes[MAX_NODE_IO], dim = x->shape.d[axis], parts = 0;
    int n = io->n_out;
    bool has_split = io->n_in > 1 && io->in[1];
    if ((st = ts_onnx_attr_int(im, "num_outputs", io->n_out, 1, MAX_NODE_IO, &parts))) return st;
    if (ts_onnx_attr(im, "num_outputs") && has_split)
        return ts_onnx_node_error(im, TS_ERR_FORMAT, "gives both the 'split' input and the 'num_outputs' attribute; ONNX allows one of them");
    if (parts != io->n_out) return ts_onnx_node_error(im, TS_ERR_FORMAT, "num_outputs is %lld for %d outputs", (long long)parts, io->n_out);
    if (has_split) {
        if ((st = ts_onnx_decoded(im, io->in[1]))) return st;
        if (!is_const(io->in[1]) || ts_shape_numel(&io->in[1]->c.shape) != io->n_out)
            return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its split sizes ('%s') must be a constant list of one size per output%s",
                                      io->in[1]->name, ts_onnx_bind_hint(io->in[1]));
        for (int i = 0; i < n; i++)
            if (!ts_onnx_int_value(io->in[1]->c.v[i], 0, dim, &sizes[i]))
                return ts_onnx_node_error(im, TS_ERR_FORMAT, "split size %d is %g; the axis has %lld", i, io->in[1]->c.v[i], (long long)dim);
    } else if (ts_onnx_attr(im, "num_outputs")) { /* ceil-sized parts, the rest in the last */
        int64_t part = (dim + parts - 1) / parts;
        if (part * (parts - 1) > dim)
            return ts_onnx_node_error(im, TS_ERR_SHAPE, "an axis of %lld does not split into %lld parts of %lld (the last one smaller)",
                                      (long long)dim, (long long)parts, (long long)part);
        for (int i = 0; i < n; i++) sizes[i] = i < n - 1 ? part : dim - part * (parts - 1);
    } else {
        if (dim % n)
            return ts_onnx_node_error(im, TS_ERR_SHAPE, "an axis of %lld does not split into %d equal parts; give the sizes (input 1)%s",
                                      (long long)dim, n, since(im, 18) ? " or num_outputs" : "");
        for (int i = 0; i < n; i++) sizes[i] = dim / n;
    }
    int64_t start = 0;
    for (int i = 0; i < n && !st; i++) {
        if (sizes[i] == 0) { /* an empty part: a constant of no values, which a Concat skips */
            ts_shape es = x->shape;
            es.d[axis] = 0;
            st = ts_onnx_fold_result(im, ts_const_fill(&es, TS_ONNX_FLOAT, 0.0, &io->out[i].c));
            continue;
        }
        st = ts_onnx_built(im, ts_slice(im->g, x, axis, start, sizes[i]), &io->out[i]);
        start += sizes[i];
    }
    if (!st && start != x->shape.d[axis])
        return ts_onnx_node_error(im, TS_ERR_SHAPE, "split sizes add up to %lld, the axis has %lld", (long long)start, (long long)x->shape.d[axis]);
    return st;
}

/* The `count` positions start, start + step, ... of axis `ax` of x (a step
 * other than 1: negative walks backward): a Gather by constant indices,
 * whose gradient adds back into the positions taken. */
ts_tensor *ts_onnx_strided(importer *im, ts_tensor *x, int ax, int64_t start, int64_t count, int64_t step, ts_status *st) {
    if ((*st = ts_const_charge((uint64_t)count * 4))) {
        *st = ts_onnx_fold_result(im, *st);
        return NULL;
    }
    int32_t *idx = ts_malloc((size_t)count * sizeof *idx);
    char *name = idx ? ts_graph_op_output_name(im->g, "SliceSteps") : NULL;
    for (int64_t i = 0; name && i < count; i++) idx[i] = (int32_t)(start + i * step);
    ts_array a = ts_array_i32(idx, 1, (int64_t[]){count});
    ts_tensor *c = name ? ts_constant(im->g, name, &a) : NULL, *t = c ? ts_gather(im->g, x, c, ax) : NULL;
    ts_free(name);
    ts_free(idx);
    if (!t) *st = ts_graph_status(im->g) ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
    return t;
}

/* Slice of a graph tensor: ts_slice per axis for step 1, a Gather of the
 * positions taken for other steps; folded on constants. */
ts_status ts_onnx_op_slice(importer *im, node_io *io) {
    if (is_const(io->in[0]) && !io->in[0]->param) return ts_onnx_op_fold(im, io);
    ts_status st = TS_OK;
    /* integers (an EmbeddingBag's bag of ids) and bools sliced as they are */
    ts_tensor *x = ts_onnx_as_tensor(im, io->in[0], &st);
    if (!x) return st;
    int64_t starts[TS_MAX_DIMS], ends[TS_MAX_DIMS], axes[TS_MAX_DIMS], steps[TS_MAX_DIMS];
    int n = 0, ne = 0, na = 0, ns = 0;
    if ((st = ts_onnx_const_ints(im, io->in[1], starts, &n, "starts", INT64_MIN, INT64_MAX, true)) ||
        (st = ts_onnx_const_ints(im, io->in[2], ends, &ne, "ends", INT64_MIN, INT64_MAX, true)))
        return st;
    if (io->n_in > 3 && io->in[3] && (st = ts_onnx_const_ints(im, io->in[3], axes, &na, "axes", -TS_MAX_DIMS, TS_MAX_DIMS, false))) return st;
    if (io->n_in > 4 && io->in[4] && (st = ts_onnx_const_ints(im, io->in[4], steps, &ns, "steps", INT64_MIN, INT64_MAX, true))) return st;
    if (ne != n || (na && na != n) || (ns && ns != n)) return ts_onnx_node_error(im, TS_ERR_SHAPE, "starts, ends, axes and steps differ in length");
    for (int k = 0; k < n; k++) {
        int64_t step = ns ? steps[k] : 1;
        if (step == 0) return ts_onnx_node_error(im, TS_ERR_FORMAT, "a Slice step is 0 (at position %d); ONNX's steps are non-zero", k);
        int ax = norm_axis(na ? axes[k] : k, x->shape.ndim);
        if (ax < 0 || ax >= x->shape.ndim) return ts_onnx_node_error(im, TS_ERR_SHAPE, "axis out of range for %d dimensions", x->shape.ndim);
        int64_t start, count;
        if ((st = ts_const_slice_range(x->shape.d[ax], (double)starts[k], (double)ends[k], step, &start, &count)))
            return ts_onnx_fold_result(im, st);
        if (count == 0)
            return ts_onnx_node_error(im, TS_ERR_SHAPE, "[%lld, %lld) step %lld of an axis of %lld is empty; tensorscope's dimensions are positive",
                                      (long long)starts[k], (long long)ends[k], (long long)step, (long long)x->shape.d[ax]);
        if (step != 1) x = ts_onnx_strided(im, x, ax, start, count, step, &st);
        else if (start != 0 || count != x->shape.d[ax]) x = ts_slice(im->g, x, ax, start, count);
        if (!x) return st ? st : ts_graph_status(im->g);
    }
    return ts_onnx_built(im, x, &io->out[0]);
}

/* Concat: folded on constants, else ts_concat of the graph tensors (an
 * int64 tensor with a small int64 constant, held in i32: both in i64). */
ts_status ts_onnx_op_concat(importer *im, node_io *io) {
    bool all_const = true;
    for (int i = 0; i < io->n_in; i++) all_const = all_const && io->in[i] && is_const(io->in[i]) && !io->in[i]->param;
    if (all_const) return ts_onnx_op_fold(im, io);
    ts_tensor *xs[MAX_NODE_IO];
    ts_status st = TS_OK;
    int n = 0;
    for (int i = 0; i < io->n_in; i++) {
        if (io->in[i] && is_const(io->in[i]) && !io->in[i]->param && ts_shape_numel(&io->in[i]->c.shape) == 0) continue; /* an empty part (a Split's) adds nothing */
        if (!io->in[i] || !(xs[n++] = ts_onnx_as_tensor(im, io->in[i], &st))) return st ? st : ts_onnx_node_error(im, TS_ERR_FORMAT, "input %d is missing", i);
    }
    int axis;
    if ((st = ts_onnx_attr_axis(im, "axis", 0, xs[0]->shape.ndim, false, &axis))) return st;
    bool mixed = false, ints = true; /* parts of several dtypes: integers of both widths joined in i64 (exactly), else as f32 */
    for (int i = 0; i < n; i++) mixed = mixed || xs[i]->dtype != xs[0]->dtype, ints = ints && is_int_tensor(xs[i]);
    for (int i = 0; mixed && i < n; i++) {
        if (ints && xs[i]->dtype == TS_I64) continue;
        if (!(xs[i] = ints ? ts_cast(im->g, xs[i], TS_I64) : ts_onnx_f32_of(im, xs[i], &st))) return st ? st : ts_graph_status(im->g);
    }
    return ts_onnx_built(im, n == 1 ? xs[0] : ts_concat(im->g, xs, n, axis), &io->out[0]);
}

/* Expand: folded on constants; on a graph tensor, x broadcast to the
 * shape (numpy's rules, both ways; ts_onnx_broadcast_to); along dim 0 too (ViT's
 * class token to the example's batch), its first sample repeated to the
 * batch (repeated), which follows the batch of the graph input of that
 * size. An i32 tensor (ids, bools) is expanded in f32, as the binary ops
 * compute it. */
ts_status ts_onnx_op_expand(importer *im, node_io *io) {
    value *x = io->in[0];
    if (is_const(x) && !x->param) return ts_onnx_op_fold(im, io);
    int64_t dims[TS_MAX_DIMS];
    int n;
    ts_status st = ts_onnx_const_ints(im, io->in[1], dims, &n, "shape", 0, INT32_MAX, false);
    if (st) return st;
    ts_shape want = {.ndim = n}, out;
    for (int i = 0; i < n; i++) want.d[i] = dims[i];
    const ts_shape *xs = shape_of(x);
    char b1[128], b2[128];
    if (!ts_broadcast_shape(xs, &want, &out))
        return ts_onnx_node_error(im, TS_ERR_SHAPE, "input '%s' of shape %s does not broadcast to the shape %s (numpy's rules: aligned on the right, "
                                  "each pair of dims equal or one of them 1)", x->name, ts_shape_str(xs, b1, sizeof b1), ts_shape_str(&want, b2, sizeof b2));
    /* a parameter expanded to its own shape is itself (ts_onnx_op_identity would
     * make it a parameter of its own: the TorchScript exporter's marker) */
    if (ts_shape_equal(xs, &out) && !x->param) return ts_onnx_op_identity(im, io);
    if (ts_shape_equal(xs, &out)) {
        ts_tensor *t = ts_onnx_as_tensor(im, x, &st);
        if (t) io->out[0] = (value){.t = t};
        return st;
    }
    ts_shape one = out;
    one.d[0] = 1;
    bool along0 = out.d[0] > 1 && (xs->ndim < out.ndim || xs->d[0] == 1);
    ts_tensor *t = x->t && (is_int_tensor(x->t) || x->t->dtype == TS_BOOL) ? x->t : as_f32(im, x, &st); /* integers and bools exactly, in their dtype */
    if (t && along0 && !ts_shape_equal(&t->shape, &one)) t = ts_onnx_broadcast_to(im, t, &one, &st);
    if (t) t = along0 ? ts_onnx_repeated(im, t, &out, &st) : ts_onnx_broadcast_to(im, t, &out, &st);
    return t ? ts_onnx_built(im, t, &io->out[0]) : st;
}

/* Trilu: the upper (upper=1) or lower triangle of the last two axes, from
 * the diagonal k (constant input 1, default 0) on: where(mask, x, 0), the
 * mask a graph constant [M,N]; of a constant, the constant folded. */
ts_status ts_onnx_op_trilu(importer *im, node_io *io) {
    ts_status st = TS_OK;
    double k = 0.0;
    int upper;
    if ((st = ts_onnx_attr_int32(im, "upper", 1, 0, 1, &upper))) return st;
    if (io->n_in > 1 && io->in[1] && !ts_onnx_setting_scalar(im, io->in[1], &k, &st))
        return st ? st : ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its k ('%s') must be a constant%s", io->in[1]->name, ts_onnx_bind_hint(io->in[1]));
    const value *c = io->in[0];
    if (is_const(c) && !c->param && c->c.v && c->c.shape.ndim >= 2) { /* a constant's triangle, folded (a causal mask made in forward) */
        if ((st = ts_const_copy_exact(&c->c, &io->out[0].c))) return ts_onnx_fold_result(im, st);
        ts_const *o = &io->out[0].c;
        int64_t M = o->shape.d[o->shape.ndim - 2], N = o->shape.d[o->shape.ndim - 1], n = ts_shape_numel(&o->shape);
        for (int64_t e = 0; e < n; e++) {
            int64_t i = e / N % M, j = e % N;
            if (upper ? (double)(j - i) >= k : (double)(j - i) <= k) continue;
            o->v[e] = 0.0;
            if (o->iv) o->iv[e] = 0;
        }
        return TS_OK;
    }
    ts_tensor *x0 = ts_onnx_as_tensor(im, io->in[0], &st), *x = x0 && is_int_tensor(x0) ? x0 : ts_onnx_f32_of(im, x0, &st);
    if (!x) return st;
    if (x->shape.ndim < 2) return ts_onnx_node_error(im, TS_ERR_SHAPE, "takes an input of at least 2 dimensions; it has %d", x->shape.ndim);
    int64_t M = x->shape.d[x->shape.ndim - 2], N = x->shape.d[x->shape.ndim - 1];
    if (!(fabs(k) <= 2.0 * (double)(M + N))) k = k < 0 ? -2.0 * (double)(M + N) : 2.0 * (double)(M + N); /* beyond the matrix: all or none */
    if ((st = ts_const_charge((uint64_t)(M * N) * 4))) return ts_onnx_fold_result(im, st);
    float *mask = ts_malloc((size_t)(M * N) * sizeof *mask);
    char *name = mask ? ts_graph_op_output_name(im->g, "Mask") : NULL;
    for (int64_t i = 0; name && i < M; i++)
        for (int64_t j = 0; j < N; j++) mask[i * N + j] = upper ? (double)(j - i) >= k : (double)(j - i) <= k;
    ts_tensor *m = name ? ts_onnx_f32_constant(im, name, &(ts_shape){.ndim = 2, .d = {M, N}}, mask) : NULL;
    ts_free(name);
    ts_free(mask);
    ts_const_release((uint64_t)(M * N) * 4);
    if (!m) return ts_graph_status(im->g) ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
    if (is_int_tensor(x)) { /* integers kept, exactly: a bool mask chooses them or 0 of their dtype */
        ts_tensor *zero = ts_onnx_int_scalar_like(im, x, 0, &st);
        return zero ? ts_onnx_built(im, ts_where(im->g, ts_cast(im->g, m, TS_BOOL), x, zero), &io->out[0]) : st;
    }
    return ts_onnx_built(im, ts_onnx_as_dtype_of(im, ts_where(im->g, m, x, ts_onnx_scalar_constant(im, "Zero", 0.0f)), x0), &io->out[0]);
}

/* Tile with constant repeats (input 1): along each axis, the input's
 * copies concatenated; the gradient sums them. */
ts_status ts_onnx_op_tile(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = ts_onnx_as_tensor(im, io->in[0], &st);
    int64_t rep[TS_MAX_DIMS];
    int n;
    if (!x || (st = ts_onnx_const_ints(im, io->in[1], rep, &n, "repeats", 1, INT32_MAX, false))) return st;
    if (n != x->shape.ndim) return ts_onnx_node_error(im, TS_ERR_SHAPE, "has %d repeats for an input of %d dimensions; it needs one per dimension", n,
                                                      x->shape.ndim);
    for (int d = 0; d < n && x; d++) {
        if (rep[d] == 1) continue;
        if ((double)rep[d] * (double)ts_shape_numel(&x->shape) > (double)TS_MAX_NUMEL)
            return ts_onnx_node_error(im, TS_ERR_SHAPE, "repeats %lld along axis %d make more than 2^34 elements", (long long)rep[d], d);
        ts_tensor **xs = ts_malloc((size_t)rep[d] * sizeof *xs);
        if (!xs) return TS_ERR_OUT_OF_MEMORY;
        for (int64_t r = 0; r < rep[d]; r++) xs[r] = x;
        x = ts_concat(im->g, xs, (int)rep[d], d);
        ts_free(xs);
    }
    return ts_onnx_built(im, x, &io->out[0]);
}

/* DepthToSpace and SpaceToDepth on [N,C,H,W] by `blocksize`: a reshape to
 * 6 dims, a permutation, a reshape back; the modes DCR (the default: the
 * block's offsets before the channels) and CRD (after them). */
ts_status ts_onnx_op_depth_space(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = ts_onnx_as_tensor(im, io->in[0], &st);
    int64_t b;
    if (!x || (st = ts_onnx_attr_int(im, "blocksize", 0, 1, INT32_MAX, &b))) return st;
    if (!ts_onnx_attr(im, "blocksize")) return ts_onnx_node_error(im, TS_ERR_FORMAT, "attribute 'blocksize' is required");
    if (x->shape.ndim != 4) return ts_onnx_node_error(im, TS_ERR_SHAPE, "takes an input [N,C,H,W]; it has %d dimensions", x->shape.ndim);
    int64_t N = x->shape.d[0], C = x->shape.d[1], H = x->shape.d[2], W = x->shape.d[3];
    bool to_space = strcmp(im->node->op_type, "DepthToSpace") == 0;
    static const char *const modes[] = {"DCR", "CRD"};
    const Attr *ma = ts_onnx_attr(im, "mode");
    int crd = ma ? ts_onnx_attr_choice(ma, modes, 2) : 0;
    if (crd == 2) return ts_onnx_node_error(im, TS_ERR_FORMAT, "mode '%.*s' is not DCR or CRD", (int)ma->s.len, (const char *)ma->s.data);
    int64_t six[6], out[4];
    const int *perm;
    if (to_space) {
        if (C % (b * b)) return ts_onnx_node_error(im, TS_ERR_SHAPE, "%lld channels are not a multiple of blocksize^2 = %lld", (long long)C, (long long)(b * b));
        static const int dcr[6] = {0, 3, 4, 1, 5, 2}, crdp[6] = {0, 1, 4, 2, 5, 3};
        int64_t c = C / (b * b);
        if (crd) memcpy(six, (int64_t[]){N, c, b, b, H, W}, sizeof six);
        else memcpy(six, (int64_t[]){N, b, b, c, H, W}, sizeof six);
        perm = crd ? crdp : dcr;
        memcpy(out, (int64_t[]){N, c, H * b, W * b}, sizeof out);
    } else {
        if (H % b || W % b)
            return ts_onnx_node_error(im, TS_ERR_SHAPE, "H %lld and W %lld must be multiples of blocksize %lld", (long long)H, (long long)W, (long long)b);
        static const int dcr[6] = {0, 3, 5, 1, 2, 4}, crdp[6] = {0, 1, 3, 5, 2, 4};
        memcpy(six, (int64_t[]){N, C, H / b, b, W / b, b}, sizeof six);
        perm = crd ? crdp : dcr;
        memcpy(out, (int64_t[]){N, C * b * b, H / b, W / b}, sizeof out);
    }
    return ts_onnx_built(im, ts_reshape(im->g, ts_permute(im->g, ts_reshape(im->g, x, 6, six), perm), 4, out), &io->out[0]);
}

/* CenterCropPad (opset 18): each of `axes` (default all) cropped to the
 * size of the constant `shape` input around its centre, or zero-padded
 * to it with the input centred (the odd one after). */
ts_status ts_onnx_op_center_crop_pad(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = ts_onnx_as_tensor(im, io->in[0], &st);
    if (!x) return st;
    int r = x->shape.ndim, n, na;
    int64_t size[TS_MAX_DIMS], axes[TS_MAX_DIMS];
    if ((st = ts_onnx_const_ints(im, io->in[1], size, &n, "shape", 1, TS_MAX_NUMEL, false)) ||
        (st = ts_onnx_attr_int_list(im, "axes", -r, r - 1, axes, TS_MAX_DIMS, &na)))
        return st;
    if (na < 0) {
        na = r;
        for (int i = 0; i < r; i++) axes[i] = i;
    }
    if (n != na) return ts_onnx_node_error(im, TS_ERR_SHAPE, "its shape holds %d sizes for %d axes", n, na);
    int64_t pads[2 * TS_MAX_DIMS] = {0};
    bool pad = false;
    for (int i = 0; i < na && x; i++) {
        int ax = norm_axis(axes[i], r);
        int64_t dim = x->shape.d[ax];
        if (size[i] < dim) x = ts_slice(im->g, x, ax, (dim - size[i]) / 2, size[i]);
        else if (size[i] > dim) {
            pads[ax] = (size[i] - dim) / 2, pads[r + ax] = size[i] - dim - pads[ax];
            pad = true;
        }
    }
    if (x && pad) x = ts_pad(im->g, x, pads, TS_PAD_CONSTANT, 0.0f);
    if (!x) return ts_graph_status(im->g);
    return ts_onnx_built(im, x, &io->out[0]);
}
