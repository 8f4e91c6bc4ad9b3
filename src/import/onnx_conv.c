/* onnx_conv.c -- convolutions and pooling: the window attributes (kernel,
 * strides, dilations, pads, auto_pad), Conv and ConvTranspose in 1 to 3 dims,
 * Col2Im and CausalConvWithState, the max, average and Lp pools, the global
 * pools and MaxUnpool. */
#include "import/onnx_ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The window attributes of Conv, ConvTranspose and the pools:
 * kernel_shape, strides (ONNX's default 1), dilations, pads [begins...,
 * ends...], each range-checked, over `rank` spatial axes (0: the length of
 * kernel_shape, 1 to 3, for the pools; a convolution's is its weight's,
 * 1 to 3, its kernel taken from the weight when absent); and auto_pad
 * resolved into pads from the input's spatial sizes. */
typedef struct window {
    int rank;
    int kernel[3], stride[3], dilation[3], pad[6];
    bool has_kernel;
} window;

static ts_status window_attrs(const importer *im, window *w, int rank) {
    static const struct {
        const char *name;
        int64_t lo;
        int per_axis;
    } lists[] = {{"kernel_shape", 1, 1}, {"strides", 1, 1}, {"dilations", 1, 1}, {"pads", 0, 2}};
    int *dst[] = {w->kernel, w->stride, w->dilation, w->pad};
    bool pool = rank == 0;
    *w = (window){.rank = pool ? 2 : rank, .stride = {1, 1, 1}, .dilation = {1, 1, 1}};
    for (size_t k = 0; k < TS_ARRAY_LEN(lists); k++) {
        int64_t v[6];
        int n;
        ts_status st = ts_onnx_attr_int_list(im, lists[k].name, lists[k].lo, INT32_MAX, v, 6, &n);
        if (st) return st;
        if (k == 0 && pool && n >= 1 && n <= 3) w->rank = n;
        int len = w->rank * lists[k].per_axis;
        if (n >= 0 && n != len)
            return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "attribute '%s' has %d values where %d are needed (tensorscope imports %s%s%s)", lists[k].name, n,
                                      len, pool ? "" : "1-D, 2-D and 3-D ", im->node->op_type,
                                      pool ? " over 1, 2 or 3 axes, as many as kernel_shape has" : ", as many values as the weight has spatial axes");
        for (int i = 0; i < n; i++) dst[k][i] = (int)v[i];
        if (k == 0) w->has_kernel = n == len;
    }
    return TS_OK;
}

/* auto_pad: NOTSET keeps the pads, VALID drops them, SAME_UPPER and
 * SAME_LOWER pad each axis of `in` (x's spatial sizes) so that the output is
 * ceil(in / stride), the odd one at the end (UPPER) or at the start. */
static ts_status window_auto_pad(importer *im, window *w, const int64_t *in) {
    static const char *const modes[] = {"NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"};
    const Attr *ap = ts_onnx_attr(im, "auto_pad");
    int k = ap && ap->has_s ? ts_onnx_attr_choice(ap, modes, 4) : 0;
    if (k == 0) return TS_OK;
    bool valid = k == 1, upper = k == 2;
    if (k == 4)
        return ts_onnx_node_error(im, TS_ERR_FORMAT, "auto_pad '%.*s' is not one of NOTSET, VALID, SAME_UPPER and SAME_LOWER", (int)ap->s.len,
                                  (const char *)ap->s.data);
    for (int i = 0; i < w->rank; i++) {
        int64_t out = (in[i] + w->stride[i] - 1) / w->stride[i], ek = (int64_t)(w->kernel[i] - 1) * w->dilation[i] + 1;
        int64_t total = valid ? 0 : (out - 1) * w->stride[i] + ek - in[i];
        if (total < 0) total = 0;
        w->pad[i] = (int)(upper ? total / 2 : total - total / 2), w->pad[w->rank + i] = (int)(total - w->pad[i]);
    }
    return TS_OK;
}

/* x [N,C,L] as [N,C,1,L] (unit), or back: the 1-D convolutions are the
 * 2-D ones over a unit axis (views, no copy). */
static ts_tensor *unit_axis(importer *im, ts_tensor *x, bool unit) {
    const int64_t *d = x->shape.d;
    return unit ? ts_reshape(im->g, x, 4, (int64_t[]){d[0], d[1], 1, d[2]}) : ts_reshape(im->g, x, 3, (int64_t[]){d[0], d[1], d[3]});
}

/* A convolution's input and weight (NCL, NCHW or NCDHW as PyTorch exports
 * them) and its window over the weight's 1 to 3 spatial axes, auto_pad
 * resolved for the input's sizes; 1-D ones as 2-D over a unit first axis
 * (*one). */
static ts_status conv_operands(importer *im, node_io *io, window *win, ts_tensor **x, ts_tensor **w, bool *one) {
    ts_status st = TS_OK;
    if (!(*x = ts_onnx_as_tensor(im, io->in[0], &st)) || !(*w = ts_onnx_as_tensor(im, io->in[1], &st))) return st;
    int r = (*w)->shape.ndim - 2;
    if (r < 1 || r > 3 || (*x)->shape.ndim != r + 2)
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "a convolution of a %d-D input by a %d-D weight is not available; 1-D, 2-D and 3-D ones "
                                  "([N,C,L] by a 3-D weight, [N,C,H,W] by a 4-D one, [N,C,D,H,W] by a 5-D one) are", (*x)->shape.ndim,
                                  (*w)->shape.ndim);
    if ((st = window_attrs(im, win, r))) return st;
    for (int i = 0; !win->has_kernel && i < r; i++) win->kernel[i] = (int)(*w)->shape.d[2 + i];
    if (strcmp(im->node->op_type, "Conv") == 0 && (st = window_auto_pad(im, win, (*x)->shape.d + 2))) return st;
    if ((*one = r == 1)) { /* the window's one axis becomes W, H a unit axis */
        *win = (window){.rank = 2, .kernel = {1, win->kernel[0]}, .stride = {1, win->stride[0]}, .dilation = {1, win->dilation[0]},
                        .pad = {0, win->pad[0], 0, win->pad[1]}, .has_kernel = true};
        *x = unit_axis(im, *x, true), *w = *x ? unit_axis(im, *w, true) : NULL;
        if (!*w) return ts_graph_status(im->g);
    }
    return TS_OK;
}

/* A 3-D window, its group count and output padding op as ts_conv3d_params */
static ts_conv3d_params conv3d_params(const window *win, int groups, const int64_t *op) {
    return (ts_conv3d_params){.stride_d = win->stride[0], .stride_h = win->stride[1], .stride_w = win->stride[2],
                              .pad_front = win->pad[0], .pad_top = win->pad[1], .pad_left = win->pad[2], .pad_back = win->pad[3],
                              .pad_bottom = win->pad[4], .pad_right = win->pad[5], .dilation_d = win->dilation[0],
                              .dilation_h = win->dilation[1], .dilation_w = win->dilation[2], .groups = groups, .output_pad_d = (int)op[0],
                              .output_pad_h = (int)op[1], .output_pad_w = (int)op[2]};
}

/* Conv, 1-D to 3-D: pads [begins..., ends...], strides, dilations,
 * group, auto_pad. */
ts_status ts_onnx_op_conv(importer *im, node_io *io) {
    window win;
    ts_conv2d_params p = {0};
    ts_status st = ts_onnx_attr_int32(im, "group", 1, 1, INT32_MAX, &p.groups);
    ts_tensor *x, *w, *b = NULL, *y;
    bool one;
    if (st || (st = conv_operands(im, io, &win, &x, &w, &one))) return st;
    if (io->n_in > 2 && io->in[2] && !(b = ts_onnx_as_tensor(im, io->in[2], &st))) return st;
    if (win.rank == 3) {
        ts_conv3d_params p3 = conv3d_params(&win, p.groups, (const int64_t[3]){0});
        return ts_onnx_built(im, ts_conv3d(im->g, x, w, b, &p3), &io->out[0]);
    }
    p.stride_h = win.stride[0], p.stride_w = win.stride[1], p.dilation_h = win.dilation[0], p.dilation_w = win.dilation[1];
    p.pad_top = win.pad[0], p.pad_left = win.pad[1], p.pad_bottom = win.pad[2], p.pad_right = win.pad[3];
    y = ts_conv2d(im->g, x, w, b, &p);
    return ts_onnx_built(im, one && y ? unit_axis(im, y, false) : y, &io->out[0]);
}

/* ConvTranspose, 1-D to 3-D: strides, pads, output_padding, dilations,
 * group; output_shape (or auto_pad SAME_*: the input's size times the
 * stride) sets the pads, the odd one at the start unless SAME_UPPER, as
 * ONNX says (an output_shape past what the transpose gives adds output
 * padding). */
ts_status ts_onnx_op_conv_transpose(importer *im, node_io *io) {
    window win;
    ts_conv_transpose2d_params p = {0};
    int64_t opad[3] = {0}, oshape[3], op_axis[3] = {0}; /* op_axis: the output padding of each window axis */
    int n_opad = -1, n_oshape = -1, r;
    ts_status st = ts_onnx_attr_int32(im, "group", 1, 1, INT32_MAX, &p.groups);
    ts_tensor *x, *w, *b = NULL, *y;
    bool one;
    if (!st) st = ts_onnx_attr_int_list(im, "output_padding", 0, INT32_MAX, opad, 3, &n_opad);
    if (!st) st = ts_onnx_attr_int_list(im, "output_shape", 1, INT32_MAX, oshape, 3, &n_oshape);
    if (st || (st = conv_operands(im, io, &win, &x, &w, &one))) return st;
    r = one ? 1 : win.rank;
    int lo = one ? 1 : 0; /* the window's first real axis */
    if ((n_opad >= 0 && n_opad != r) || (n_oshape >= 0 && n_oshape != r))
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "attributes 'output_padding' and 'output_shape' need %d values, one per spatial axis", r);
    static const char *const modes[] = {"NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"};
    const Attr *ap = ts_onnx_attr(im, "auto_pad");
    int mode = ap && ap->has_s ? ts_onnx_attr_choice(ap, modes, 4) : 0;
    if (mode == 4)
        return ts_onnx_node_error(im, TS_ERR_FORMAT, "auto_pad '%.*s' is not one of NOTSET, VALID, SAME_UPPER and SAME_LOWER", (int)ap->s.len,
                                  (const char *)ap->s.data);
    for (int i = 0; i < r; i++) {
        int a = lo + i;
        int64_t in = x->shape.d[2 + a], ek = (int64_t)(win.kernel[a] - 1) * win.dilation[a] + 1, op = n_opad > 0 ? opad[i] : 0;
        if (mode == 1) win.pad[a] = win.pad[win.rank + a] = 0;
        if (n_oshape > 0 || mode >= 2) {
            int64_t want = n_oshape > 0 ? oshape[i] : in * win.stride[a], total = win.stride[a] * (in - 1) + op + ek - want;
            if (total < 0) /* larger than the transpose gives: the rows past it at the end, as output padding */
                op -= total, total = 0;
            bool upper = mode == 2;
            win.pad[a] = (int)(upper ? total / 2 : total - total / 2), win.pad[win.rank + a] = (int)(total - win.pad[a]);
        }
        op_axis[a] = op;
    }
    if (io->n_in > 2 && io->in[2] && !(b = ts_onnx_as_tensor(im, io->in[2], &st))) return st;
    if (win.rank == 3) {
        ts_conv3d_params p3 = conv3d_params(&win, p.groups, op_axis);
        return ts_onnx_built(im, ts_conv_transpose3d(im->g, x, w, b, &p3), &io->out[0]);
    }
    p.output_pad_h = (int)op_axis[0], p.output_pad_w = (int)op_axis[1];
    p.stride_h = win.stride[0], p.stride_w = win.stride[1], p.dilation_h = win.dilation[0], p.dilation_w = win.dilation[1];
    p.pad_top = win.pad[0], p.pad_left = win.pad[1], p.pad_bottom = win.pad[2], p.pad_right = win.pad[3];
    y = ts_conv_transpose2d(im->g, x, w, b, &p);
    return ts_onnx_built(im, one && y ? unit_axis(im, y, false) : y, &io->out[0]);
}

/* One 2-D pool of x [N,C,H,W] over window axes a0 and a1 of `win` (-1: a
 * unit axis); with `indices` (0 none, 1 row-major, 2 column-major) *indices
 * gets the max pool's winners. */
static ts_tensor *pool_axes(importer *im, ts_tensor *x, const window *win, int a0, int a1, bool max, bool exclude_pad, bool ceil_mode,
                            int indices, ts_tensor **idx) {
    const int r = win->rank, ax[2] = {a0, a1};
    int k[2], s[2], d[2], pb[2], pa[2];
    for (int i = 0; i < 2; i++) {
        bool unit = ax[i] < 0;
        k[i] = unit ? 1 : win->kernel[ax[i]], s[i] = unit ? 1 : win->stride[ax[i]], d[i] = unit ? 1 : win->dilation[ax[i]];
        pb[i] = unit ? 0 : win->pad[ax[i]], pa[i] = unit ? 0 : win->pad[r + ax[i]];
    }
    ts_pool2d_params p = {.kernel_h = k[0], .kernel_w = k[1], .stride_h = s[0], .stride_w = s[1], .pad_top = pb[0], .pad_bottom = pa[0],
                          .pad_left = pb[1], .pad_right = pa[1], .exclude_pad = exclude_pad, .dilation_h = d[0], .dilation_w = d[1],
                          .ceil_mode = ceil_mode};
    if (indices && !(*idx = ts_max_pool2d_indices(im->g, x, &p, indices == 2))) return NULL;
    return max ? ts_max_pool2d(im->g, x, &p) : ts_avg_pool2d(im->g, x, &p);
}

/* x pooled by the window win (1, 2 or 3 axes; auto_pad resolved here)
 * into *y, MaxPool's indices into *idx where `indices` asks (1 row-major,
 * 2 column-major). */
static ts_status pool_window(importer *im, ts_tensor *x, window *w, bool max, bool exclude, bool ceil_mode, int indices, ts_tensor **out,
                             ts_tensor **out_idx) {
    window win = *w;
    ts_status st;
    const int r = win.rank;
    if (x->shape.ndim != r + 2)
        return ts_onnx_node_error(im, TS_ERR_SHAPE, "a %d-D window pools %s inputs; this one has %d dimensions", r,
                                  (const char *[]){"[N,C,L]", "[N,C,H,W]", "[N,C,D,H,W]"}[r - 1], x->shape.ndim);
    if ((st = window_auto_pad(im, &win, x->shape.d + 2))) return st;
    const int64_t *d = x->shape.d;
    ts_tensor *y, *idx = NULL;
    if (r == 1) { /* a 1-D index q*L + l is the [N,C,1,L] pool's, in either storage order */
        y = ts_reshape(im->g, x, 4, (int64_t[]){d[0], d[1], 1, d[2]});
        y = y ? pool_axes(im, y, &win, -1, 0, max, exclude, ceil_mode, indices ? 1 : 0, &idx) : NULL;
        int64_t s3[3] = {d[0], d[1], y ? y->shape.d[3] : 0};
        if (y) y = ts_reshape(im->g, y, 3, s3);
        if (y && idx) idx = ts_reshape(im->g, idx, 3, s3);
    } else if (r == 2) {
        y = pool_axes(im, x, &win, 0, 1, max, exclude, ceil_mode, indices, &idx);
    } else { /* indices: each row's winner (its flat position in x, [N,C*D,H,W] being x), then D's winner among the rows', read there */
        ts_tensor *rows = NULL, *at = NULL;
        y = ts_reshape(im->g, x, 4, (int64_t[]){d[0], d[1] * d[2], d[3], d[4]});
        y = y ? pool_axes(im, y, &win, 1, 2, max, exclude, ceil_mode, indices ? 1 : 0, &rows) : NULL;
        int64_t OH = y ? y->shape.d[2] : 0, OW = y ? y->shape.d[3] : 0;
        if (y) y = ts_reshape(im->g, y, 4, (int64_t[]){d[0], d[1], d[2], OH * OW});
        y = y ? pool_axes(im, y, &win, 0, -1, max, exclude, ceil_mode, indices ? 1 : 0, &at) : NULL;
        int64_t s5[5] = {d[0], d[1], y ? y->shape.d[2] : 0, OH, OW};
        if (y) y = ts_reshape(im->g, y, 5, s5);
        if (y && indices) { /* a window of padding only (-1) stays -1 */
            ts_graph *g = im->g;
            ts_tensor *none = ts_onnx_scalar_constant(im, "NoWinner", -1.0f);
            int64_t n = ts_shape_numel(&rows->shape);
            ts_tensor *from = ts_gather(g, ts_reshape(g, rows, 1, (int64_t[]){n}), ts_unary(g, "CastIndex", at, 0.0f, (float)(n - 1)), 0);
            idx = none ? ts_where(g, ts_binary(g, "Less", at, ts_onnx_scalar_constant(im, "Zero", 0.0f)), none, from) : NULL;
            if (idx) idx = ts_reshape(g, idx, 5, s5);
            if (!idx) y = NULL;
        }
    }
    *out = y;
    if (out_idx) *out_idx = idx;
    return y ? TS_OK : ts_graph_status(im->g);
}

/* MaxPool and AveragePool over 1, 2 or 3 spatial axes, MaxPool's Indices
 * (storage_order 0 or 1 over 1 or 2 axes, 0 over 3).
 * 1-D pools [N,C,L] as [N,C,1,L]; 3-D pools H,W of [N,C*D,H,W], then D of
 * [N,C,D,OH*OW]: a box's max is the max of its rows' maxes, and its mean
 * the mean of theirs, the divisors (taps inside the padded input, or inside
 * the input) being products over the axes; its winner is the first row's
 * (in D) holding the max, at that row's own winner (the first in H, W). */
ts_status ts_onnx_op_pool(importer *im, node_io *io) {
    bool max = strcmp(im->node->op_type, "MaxPool") == 0, ceil_mode = false, include_pad = false;
    window win;
    ts_status st = window_attrs(im, &win, 0);
    if (!st) st = ts_onnx_attr_flag(im, "ceil_mode", &ceil_mode);
    if (!st) st = ts_onnx_attr_flag(im, "count_include_pad", &include_pad);
    if (st) return st;
    if (!win.has_kernel) return ts_onnx_node_error(im, TS_ERR_FORMAT, "its attribute 'kernel_shape' is missing");
    int indices = 0;
    if (max && io->n_out > 1 && im->node->output[1] && *im->node->output[1]) {
        bool column_major;
        if ((st = ts_onnx_attr_flag(im, "storage_order", &column_major))) return st;
        if (win.rank == 3 && column_major)
            return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "MaxPool's indices of a 3-D window are available in storage_order 0 (row-major), not 1");
        indices = column_major ? 2 : 1;
    }
    ts_tensor *x = as_f32(im, io->in[0], &st), *y = NULL, *idx = NULL; /* integers pooled as f32 */
    if (!x || (st = pool_window(im, x, &win, max, !max && !include_pad, ceil_mode, indices, &y, &idx))) return st;
    if (indices && (st = ts_onnx_built(im, idx, &io->out[1]))) return st;
    return ts_onnx_built(im, y, &io->out[0]);
}

/* LpPool: (sum over the window of |x|^p)^(1/p), the padding zeros: the
 * average pool of |x|^p counting the padding, times the window's size;
 * ceil_mode's partial last windows are not available. */
ts_status ts_onnx_op_lp_pool(importer *im, node_io *io) {
    window win;
    bool ceil_mode = false;
    int p;
    ts_status st = window_attrs(im, &win, 0);
    if (!st) st = ts_onnx_attr_flag(im, "ceil_mode", &ceil_mode);
    if (!st) st = ts_onnx_attr_int32(im, "p", 2, 1, 64, &p);
    if (st) return st;
    if (!win.has_kernel) return ts_onnx_node_error(im, TS_ERR_FORMAT, "its attribute 'kernel_shape' is missing");
    if (ceil_mode) return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "ceil_mode 1 is not available for LpPool; ceil_mode 0 is");
    ts_tensor *x = as_f32(im, io->in[0], &st), *y = NULL;
    if (!x) return st;
    ts_graph *g = im->g;
    ts_tensor *a = p == 2 ? ts_mul(g, x, x) : p == 1 ? ts_abs(g, x) : ts_pow(g, ts_abs(g, x), (float)p);
    if (!a || (st = pool_window(im, a, &win, false, false, false, 0, &y, NULL))) return st ? st : ts_graph_status(g);
    double k = 1;
    for (int i = 0; i < win.rank; i++) k *= win.kernel[i];
    y = ts_scale(g, y, (float)k);
    y = p == 1 ? y : p == 2 ? ts_sqrt(g, y) : ts_pow(g, y, 1.0f / (float)p);
    return ts_onnx_built(im, y, &io->out[0]);
}

/* The global pools' axes: every one after [N,C] (their count; 0 when x
 * has none), and the error for an input without spatial axes. */
static int global_pool_axes(const ts_tensor *x, int ax[TS_MAX_DIMS]) {
    int n = 0;
    for (int d = 2; d < x->shape.ndim; d++) ax[n++] = d;
    return n;
}
static ts_status global_pool_rank_error(importer *im, const ts_tensor *x) {
    return ts_onnx_node_error(im, TS_ERR_SHAPE, "pools an input [N,C,d1,...] of at least 3 dimensions; it has %d", x->shape.ndim);
}

/* GlobalAveragePool: [N,C,H,W] is the GlobalAvgPool op; [N,C,L] and
 * [N,C,D,H,W] (AdaptiveAvgPool1d(1), AdaptiveAvgPool3d(1)) the mean over
 * the spatial axes, kept. */
ts_status ts_onnx_op_global_avg_pool(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = ts_onnx_as_tensor(im, io->in[0], &st);
    if (!x) return st;
    if (x->shape.ndim == 4) return ts_onnx_built(im, ts_global_avg_pool2d(im->g, x), &io->out[0]);
    int ax[TS_MAX_DIMS], n = global_pool_axes(x, ax);
    if (n == 0) return global_pool_rank_error(im, x);
    return ts_onnx_built(im, ts_reduce_mean(im->g, x, n, ax, 1), &io->out[0]);
}

/* GlobalMaxPool: the maximum over every axis after [N,C], kept as 1. */
ts_status ts_onnx_op_global_max_pool(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = as_f32(im, io->in[0], &st);
    if (!x) return st;
    int ax[TS_MAX_DIMS], n = global_pool_axes(x, ax);
    if (n == 0) return global_pool_rank_error(im, x);
    return ts_onnx_built(im, ts_reduce_max(im->g, x, n, ax, 1), &io->out[0]);
}

/* MaxUnpool with constant indices (input 1, MaxPool's flat positions in
 * the whole output): zeros but at those positions, X's values there (a
 * Gather of X and a Where, so X takes its gradient); the output shape the
 * constant input 2, or (in - 1) * stride - pads + kernel per spatial axis. */
ts_status ts_onnx_op_max_unpool(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_graph *g = im->g;
    ts_tensor *x = as_f32(im, io->in[0], &st);
    window win;
    if (!x || (st = window_attrs(im, &win, 0)) || (st = ts_onnx_decoded(im, io->in[1]))) return st;
    if (!win.has_kernel) return ts_onnx_node_error(im, TS_ERR_FORMAT, "its attribute 'kernel_shape' is missing");
    value *iv = io->in[1];
    if (!is_const(iv) || !ts_shape_equal(&iv->c.shape, &x->shape))
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its indices ('%s') must be a constant of X's shape%s", iv->name, ts_onnx_bind_hint(iv));
    if (x->shape.ndim != win.rank + 2) return ts_onnx_node_error(im, TS_ERR_SHAPE, "a %d-D window unpools inputs of %d dims; X has %d", win.rank, win.rank + 2, x->shape.ndim);
    ts_shape ds = x->shape, os; /* the default output shape, which the indices are positions in; the one asked for */
    for (int i = 0; i < win.rank; i++) ds.d[2 + i] = (x->shape.d[2 + i] - 1) * win.stride[i] - win.pad[i] - win.pad[win.rank + i] + win.kernel[i];
    os = ds;
    if (io->n_in > 2 && io->in[2]) { /* a larger output: the same coordinates, the rest zeros */
        int64_t want[TS_MAX_DIMS];
        int n;
        if ((st = ts_onnx_const_ints(im, io->in[2], want, &n, "output_shape", 1, TS_MAX_NUMEL, false))) return st;
        if (n != os.ndim) return ts_onnx_node_error(im, TS_ERR_SHAPE, "its output_shape has %d dims; X has %d", n, os.ndim);
        for (int d = 0; d < n; d++) {
            if (want[d] < ds.d[d]) return ts_onnx_node_error(im, TS_ERR_SHAPE, "its output_shape's dim %d, %lld, is below the unpooled %lld", d, (long long)want[d], (long long)ds.d[d]);
            os.d[d] = want[d];
        }
    }
    int64_t N = ts_shape_numel(&os), U = ts_shape_numel(&x->shape), ND = ts_shape_numel(&ds);
    if ((st = ts_const_charge((uint64_t)N * 12))) return ts_onnx_fold_result(im, st);
    int64_t *src = ts_malloc((size_t)N * sizeof *src);
    int32_t *idx = src ? ts_malloc((size_t)N * sizeof *idx) : NULL;
    for (int64_t i = 0; idx && i < N; i++) src[i] = -1;
    for (int64_t k = 0; idx && k < U && !st; k++) {
        double v = iv->c.v[k];
        if (v != floor(v) || v < 0 || v >= (double)ND) {
            st = ts_onnx_node_error(im, TS_ERR_FORMAT, "index %g is outside the unpooled output's %lld elements", v, (long long)ND);
            break;
        }
        int64_t rest = (int64_t)v, at = 0, stride = 1;
        for (int d = ds.ndim - 1; d >= 0; d--) { /* its coordinates in the default shape, placed in the output's */
            at += rest % ds.d[d] * stride;
            rest /= ds.d[d], stride *= os.d[d];
        }
        src[at] = k;
    }
    char *name = idx && !st ? ts_graph_op_output_name(g, "Sources") : NULL;
    for (int64_t i = 0; name && i < N; i++) idx[i] = (int32_t)(src[i] < 0 ? 0 : src[i]);
    ts_array ia = ts_array_i32(idx, 1, (int64_t[]){N});
    ts_tensor *ic = name ? ts_constant(g, name, &ia) : NULL;
    ts_tensor *mask = ic ? ts_onnx_computed_constant(im, "Written", &(ts_shape){.ndim = 1, .d = {N}}, ts_onnx_fill_scatter_mask, &(scatter_layer_ctx){src, N}, &st) : NULL;
    ts_free(name);
    ts_free(idx);
    ts_free(src);
    ts_const_release((uint64_t)N * 12);
    if (!mask) return st ? st : ts_graph_status(g) ? ts_graph_status(g) : TS_ERR_OUT_OF_MEMORY;
    ts_tensor *y = ts_where(g, mask, ts_gather(g, ts_reshape(g, x, 1, (int64_t[]){U}), ic, 0), ts_onnx_scalar_constant(im, "Zero", 0.0f));
    return ts_onnx_built(im, y ? ts_reshape(g, y, os.ndim, os.d) : NULL, &io->out[0]);
}

/* ---------------------------------------------------- CausalConvWithState */

/* CausalConvWithState: x [B,C,L] convolved depthwise and causally by w
 * [C,1,K] after past [B,C,K-1] (NULL: zeros), plus bias [C] (NULL: none),
 * then SiLU where `silu`. out[0]: [B,C,L]; out[1]: the last K-1 steps of
 * past and x, NULL when K is 1 (it would be empty). An error (ts_error)
 * for shapes that do not fit. */
static ts_status ts_onnx_causal_conv(ts_graph *g, ts_tensor *x, ts_tensor *w, ts_tensor *bias, ts_tensor *past, bool silu, ts_tensor *out[2]) {
    out[0] = out[1] = NULL;
    if (x->shape.ndim != 3 || w->shape.ndim != 3 || w->shape.d[0] != x->shape.d[1] || w->shape.d[1] != 1)
        return ts_error(TS_ERR_SHAPE, "takes an input [B,C,L] and a depthwise weight [C,1,K]; they are %d-D and %d-D with %lld and %lld "
                        "channels", x->shape.ndim, w->shape.ndim, (long long)(x->shape.ndim > 1 ? x->shape.d[1] : 0), (long long)w->shape.d[0]);
    int64_t B = x->shape.d[0], C = x->shape.d[1], L = x->shape.d[2], K = w->shape.d[2];
    if (bias && (bias->shape.ndim != 1 || bias->shape.d[0] != C))
        return ts_error(TS_ERR_SHAPE, "bias must be [%lld], one per channel", (long long)C);
    if (past && (past->shape.ndim != 3 || past->shape.d[0] != B || past->shape.d[1] != C || past->shape.d[2] != K - 1))
        return ts_error(TS_ERR_SHAPE, "past_state must be [%lld,%lld,%lld] ([B,C,K-1])", (long long)B, (long long)C, (long long)(K - 1));
    /* the causal sequence: the past (or K-1 zeros) then x */
    ts_tensor *seq = x;
    if (K > 1) {
        int64_t pads[6] = {0, 0, K - 1, 0, 0, 0};
        seq = past ? ts_concat(g, (ts_tensor *[]){past, x}, 2, 2) : ts_pad(g, x, pads, TS_PAD_CONSTANT, 0.0f);
    }
    /* y[:, c, t] = sum_j w[c, 0, j] seq[:, c, t + j] */
    ts_tensor *y = NULL;
    for (int64_t j = 0; j < K; j++) {
        ts_tensor *wj = ts_reshape(g, ts_slice(g, w, 2, j, 1), 2, (int64_t[]){C, 1});
        ts_tensor *term = ts_mul(g, ts_slice(g, seq, 2, j, L), wj);
        y = y ? ts_add(g, y, term) : term;
    }
    if (bias) y = ts_add(g, y, ts_reshape(g, bias, 2, (int64_t[]){C, 1}));
    if (silu) y = ts_mul(g, y, ts_sigmoid(g, y));
    ts_status st = ts_onnx_graph_status(g, y);
    if (st) return st;
    out[0] = y;
    if (K > 1) {
        out[1] = ts_slice(g, seq, 2, L, K - 1);
        if ((st = ts_onnx_graph_status(g, out[1]))) return st;
    }
    return TS_OK;
}

/* CausalConvWithState (opset 27): ts_onnx_causal_conv above. */
ts_status ts_onnx_op_causal_conv(importer *im, node_io *io) {
    static const char *const acts[] = {"none", "silu", "swish"};
    const Attr *a = ts_onnx_attr(im, "activation");
    int act = a ? ts_onnx_attr_choice(a, acts, 3) : 0;
    if (act == 3) return ts_onnx_node_error(im, TS_ERR_FORMAT, "activation '%.*s' is not none, silu or swish", (int)a->s.len, (const char *)a->s.data);
    ts_status st = TS_OK;
    ts_tensor *x = as_f32(im, io->in[0], &st), *w = x ? as_f32(im, io->in[1], &st) : NULL;
    ts_tensor *bias = w ? ts_onnx_optional_f32(im, io, 2, &st) : NULL, *past = w && !st ? ts_onnx_optional_f32(im, io, 3, &st) : NULL, *out[2];
    if (!w || st) return st;
    if ((st = ts_onnx_causal_conv(im->g, x, w, bias, past, act != 0, out))) return ts_onnx_fold_result(im, st);
    if ((st = ts_onnx_built(im, out[0], &io->out[0]))) return st;
    if (!ts_onnx_output_wanted(im, io, 1)) return TS_OK;
    if (!out[1]) return ts_onnx_node_error(im, TS_ERR_SHAPE, "present_state of a kernel of size 1 has 0 steps; tensorscope's dimensions are positive: "
                                           "leave the output unnamed");
    return ts_onnx_built(im, out[1], &io->out[1]);
}

/* ----------------------------------------------------------------- Col2Im */

/* Col2Im with 2 spatial dims: x [N, C*KH*KW, L] summed into the image
 * img[0] x img[1] (pads in ONNX's order: top, left, bottom, right), as one
 * ConvTranspose2d per channel by a one-hot constant kernel; the gradient
 * reaches x. *out: [N,C,H,W]. */
static ts_status ts_onnx_col2im(ts_graph *g, ts_tensor *x, const int64_t img[2], const int64_t block[2], const int64_t strides[2], const int64_t pads[4],
                                const int64_t dil[2], ts_tensor **out) {
    *out = NULL;
    int64_t kk = block[0] * block[1], L[2];
    for (int i = 0; i < 2; i++) {
        if (img[i] < 1 || block[i] < 1 || strides[i] < 1 || dil[i] < 1 || pads[i] < 0 || pads[2 + i] < 0)
            return ts_error(TS_ERR_FORMAT, "image_shape, block_shape, strides and dilations must be positive and pads not negative");
        int64_t span = img[i] + pads[i] + pads[2 + i] - dil[i] * (block[i] - 1) - 1;
        if (span < 0) return ts_error(TS_ERR_SHAPE, "a block of %lld (dilation %lld) does not fit the padded image's %lld", (long long)block[i],
                                      (long long)dil[i], (long long)(img[i] + pads[i] + pads[2 + i]));
        L[i] = span / strides[i] + 1;
    }
    if (x->shape.ndim != 3 || x->shape.d[1] % kk || x->shape.d[2] != L[0] * L[1])
        return ts_error(TS_ERR_SHAPE, "takes an input [N, C*%lld, %lld] (the block's %lld positions per channel, %lldx%lld blocks); it is %d-D",
                        (long long)kk, (long long)(L[0] * L[1]), (long long)kk, (long long)L[0], (long long)L[1], x->shape.ndim);
    int64_t N = x->shape.d[0], CK = x->shape.d[1], C = CK / kk;
    if (C > INT32_MAX || strides[0] > INT32_MAX || strides[1] > INT32_MAX || dil[0] > INT32_MAX || dil[1] > INT32_MAX || pads[0] > INT32_MAX ||
        pads[1] > INT32_MAX || pads[2] > INT32_MAX || pads[3] > INT32_MAX)
        return ts_error(TS_ERR_UNSUPPORTED, "a geometry past int32's range is not available");
    /* the transposed convolution, per channel (groups C), by the one-hot kernel that puts block position b at (b / KW, b % KW) */
    float *w = ts_calloc((size_t)(CK * kk), sizeof *w);
    if (!w) return ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory for a [%lld,1,%lld,%lld] kernel", (long long)CK, (long long)block[0], (long long)block[1]);
    for (int64_t ch = 0; ch < CK; ch++) w[ch * kk + ch % kk] = 1.0f;
    char *name = ts_graph_op_output_name(g, "Kernel");
    ts_tensor *k = name ? ts_constant(g, name, &(ts_array){.dtype = TS_F32, .ndim = 4, .shape = {CK, 1, block[0], block[1]}, .data = w}) : NULL;
    ts_free(name);
    ts_free(w);
    ts_conv_transpose2d_params p = {.stride_h = (int)strides[0], .stride_w = (int)strides[1], .pad_top = (int)pads[0], .pad_left = (int)pads[1],
                                    .pad_bottom = (int)pads[2], .pad_right = (int)pads[3], .dilation_h = (int)dil[0], .dilation_w = (int)dil[1],
                                    .groups = (int)C};
    ts_tensor *y = k ? ts_conv_transpose2d(g, ts_reshape(g, x, 4, (int64_t[]){N, CK, L[0], L[1]}), k, NULL, &p) : NULL;
    ts_status st = ts_onnx_graph_status(g, y);
    if (!st && (y->shape.d[2] != img[0] || y->shape.d[3] != img[1]))
        st = ts_error(TS_ERR_SHAPE, "the blocks cover %lldx%lld, not the image's %lldx%lld (the last stride does not reach its border)",
                      (long long)y->shape.d[2], (long long)y->shape.d[3], (long long)img[0], (long long)img[1]);
    if (!st) *out = y;
    return st;
}

/* Col2Im (opset 18) with 2 spatial dims, image_shape and block_shape
 * constants (bound inputs): ts_onnx_col2im above. */
ts_status ts_onnx_op_col2im(importer *im, node_io *io) {
    int64_t img[TS_MAX_DIMS], block[TS_MAX_DIMS], strides[2], pads[4], dil[2];
    int n_img, n_block;
    ts_status st;
    if ((st = ts_onnx_const_ints(im, io->in[1], img, &n_img, "image_shape", 1, INT32_MAX, false)) ||
        (st = ts_onnx_const_ints(im, io->in[2], block, &n_block, "block_shape", 1, INT32_MAX, false)))
        return st;
    if (n_img != 2 || n_block != 2)
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "a %d-D image is not available; Col2Im of 2-D images is", n_img);
    if ((st = ts_onnx_attr_ints_n(im, "strides", 2, 1, strides)) || (st = ts_onnx_attr_ints_n(im, "pads", 4, 0, pads)) || (st = ts_onnx_attr_ints_n(im, "dilations", 2, 1, dil)))
        return st;
    ts_tensor *x = as_f32(im, io->in[0], &st), *y;
    if (!x) return st;
    if ((st = ts_onnx_col2im(im->g, x, img, block, strides, pads, dil, &y))) return ts_onnx_fold_result(im, st);
    return ts_onnx_built(im, y, &io->out[0]);
}
