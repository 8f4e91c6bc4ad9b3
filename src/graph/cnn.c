/* cnn.c -- builders of the convolutional ops and their layers (conv, batch
 * norm) with PyTorch's default initialisation. */
#include "graph/cnn_ops.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void set_attrs(ts_tensor *t, const void *arg) { memcpy(t->attr, arg, sizeof t->attr); }

/* "<scope>.<name>.<suffix>" */
static void layer_param_name(ts_graph *g, const char *layer, const char *suffix, char *buf, size_t n) {
    char scope[512];
    ts_graph_scope_path(g, scope, sizeof scope);
    snprintf(buf, n, "%s%s%s.%s", scope, scope[0] ? "." : "", layer, suffix);
}

static bool bad_layer_name(const char *name) { return !name || !*name || strlen(name) > 200 || strpbrk(name, "/:\"\\"); }

ts_tensor *ts_conv2d(ts_graph *g, ts_tensor *x, ts_tensor *w, ts_tensor *b, const ts_conv2d_params *p) {
    if (!g || g->sticky) return NULL;
    ts_conv2d_params d = p ? *p : (ts_conv2d_params){0};
    int64_t at[TS_MAX_ATTRS] = {0};
    at[CA_SH] = d.stride_h ? d.stride_h : 1, at[CA_SW] = d.stride_w ? d.stride_w : 1;
    at[CA_DH] = d.dilation_h ? d.dilation_h : 1, at[CA_DW] = d.dilation_w ? d.dilation_w : 1;
    at[CA_GROUPS] = d.groups ? d.groups : 1;
    at[CA_PT] = d.pad_top, at[CA_PB] = d.pad_bottom, at[CA_PL] = d.pad_left, at[CA_PR] = d.pad_right;
    if (at[CA_SH] < 0 || at[CA_SW] < 0 || at[CA_DH] < 0 || at[CA_DW] < 0 || at[CA_GROUPS] < 0 || d.pad_top < 0 || d.pad_bottom < 0 ||
        d.pad_left < 0 || d.pad_right < 0)
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_conv2d: stride, dilation, groups and padding must not be negative");
    if (d.same) {
        if (at[CA_SH] != 1 || at[CA_SW] != 1)
            return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_conv2d: 'same' padding needs stride 1 (got %lld,%lld), as in PyTorch",
                                 (long long)at[CA_SH], (long long)at[CA_SW]);
        if (w && w->shape.ndim == 4) {
            int64_t th = at[CA_DH] * (w->shape.d[2] - 1), tw = at[CA_DW] * (w->shape.d[3] - 1);
            at[CA_PT] = th / 2, at[CA_PB] = th - th / 2, at[CA_PL] = tw / 2, at[CA_PR] = tw - tw / 2;
        }
    }
    const ts_tensor *ins[3] = {x, w, b};
    return ts_graph_add_node(g, TS_OP_CONV2D, ins, b ? 3 : 2, NULL, set_attrs, at);
}

ts_tensor *ts_conv_transpose2d(ts_graph *g, ts_tensor *x, ts_tensor *w, ts_tensor *b, const ts_conv_transpose2d_params *p) {
    if (!g || g->sticky) return NULL;
    ts_conv_transpose2d_params d = p ? *p : (ts_conv_transpose2d_params){0};
    if (d.stride_h < 0 || d.stride_w < 0 || d.dilation_h < 0 || d.dilation_w < 0 || d.groups < 0 || d.pad_top < 0 || d.pad_bottom < 0 ||
        d.pad_left < 0 || d.pad_right < 0 || d.output_pad_h < 0 || d.output_pad_w < 0)
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_conv_transpose2d: stride, dilation, groups, padding and output padding must "
                             "not be negative");
    int64_t at[TS_MAX_ATTRS] = {0};
    at[CA_SH] = d.stride_h ? d.stride_h : 1, at[CA_SW] = d.stride_w ? d.stride_w : 1;
    at[CA_DH] = d.dilation_h ? d.dilation_h : 1, at[CA_DW] = d.dilation_w ? d.dilation_w : 1;
    at[CA_GROUPS] = d.groups ? d.groups : 1;
    at[CA_PT] = d.pad_top, at[CA_PB] = d.pad_bottom, at[CA_PL] = d.pad_left, at[CA_PR] = d.pad_right;
    at[CA_OPH] = d.output_pad_h, at[CA_OPW] = d.output_pad_w;
    const ts_tensor *ins[3] = {x, w, b};
    return ts_graph_add_node(g, TS_OP_CONV_TRANSPOSE2D, ins, b ? 3 : 2, NULL, set_attrs, at);
}

_Static_assert(C3_OP + 3 <= TS_MAX_ATTRS, "Conv3d's attributes fit in a node's");

/* Conv3d (transposed false) or ConvTranspose3d */
static ts_tensor *conv3d(ts_graph *g, ts_tensor *x, ts_tensor *w, ts_tensor *b, const ts_conv3d_params *p, bool transposed) {
    if (!g || g->sticky) return NULL;
    const char *fn = transposed ? "ts_conv_transpose3d" : "ts_conv3d";
    ts_conv3d_params d = p ? *p : (ts_conv3d_params){0};
    const int v[] = {d.stride_d, d.stride_h, d.stride_w, d.dilation_d, d.dilation_h, d.dilation_w, d.pad_front, d.pad_top, d.pad_left,
                     d.pad_back, d.pad_bottom, d.pad_right, d.groups, d.output_pad_d, d.output_pad_h, d.output_pad_w};
    int64_t at[TS_MAX_ATTRS] = {0};
    for (int i = 0; i < (int)TS_ARRAY_LEN(v); i++) {
        if (v[i] < 0)
            return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "%s: stride, dilation, groups, padding and output padding must not be negative",
                                 fn);
        at[i] = v[i] == 0 && (i < C3_P0 || i == C3_GROUPS) ? 1 : v[i]; /* stride, dilation and groups: 0 means 1 */
    }
    if (!transposed && (d.output_pad_d || d.output_pad_h || d.output_pad_w))
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_conv3d: output padding is the transposed convolution's (ts_conv_transpose3d)");
    const ts_tensor *ins[3] = {x, w, b};
    return ts_graph_add_node(g, transposed ? TS_OP_CONV_TRANSPOSE3D : TS_OP_CONV3D, ins, b ? 3 : 2, NULL, set_attrs, at);
}

ts_tensor *ts_conv3d(ts_graph *g, ts_tensor *x, ts_tensor *w, ts_tensor *b, const ts_conv3d_params *p) { return conv3d(g, x, w, b, p, false); }

ts_tensor *ts_conv_transpose3d(ts_graph *g, ts_tensor *x, ts_tensor *w, ts_tensor *b, const ts_conv3d_params *p) {
    return conv3d(g, x, w, b, p, true);
}

ts_tensor *ts_conv2d_layer(ts_graph *g, ts_tensor *x, int64_t out_channels, int kernel_h, int kernel_w, const ts_conv2d_params *p, int bias,
                           const char *name) {
    if (!g || g->sticky) return NULL;
    if (bad_layer_name(name)) return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_conv2d_layer: a layer name without '/' or ':' is required");
    if (!x) return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_conv2d_layer '%s': input is NULL", name);
    char xs[96];
    if (x->shape.ndim != 4)
        return ts_graph_fail(g, TS_ERR_SHAPE, "Conv2d in layer '%s': input '%s' %s is %d-D; it takes 4-D NCHW input [N,C,H,W] (add the missing "
                             "axis with ts_reshape)", name, x->name, ts_shape_str(&x->shape, xs, sizeof xs), x->shape.ndim);
    int64_t C = x->shape.d[1], G = p && p->groups ? p->groups : 1;
    if (out_channels <= 0 || kernel_h <= 0 || kernel_w <= 0)
        return ts_graph_fail(g, TS_ERR_SHAPE, "Conv2d in layer '%s': out_channels (%lld) and the kernel (%dx%d) must be positive", name,
                             (long long)out_channels, kernel_h, kernel_w);
    if (G < 1 || C % G || out_channels % G)
        return ts_graph_fail(g, TS_ERR_SHAPE, "Conv2d in layer '%s': groups=%lld must divide both the input channels (%lld, input %s) and "
                             "out_channels (%lld)", name, (long long)G, (long long)C, ts_shape_str(&x->shape, xs, sizeof xs),
                             (long long)out_channels);
    char wname[640], bname[640];
    layer_param_name(g, name, "weight", wname, sizeof wname);
    layer_param_name(g, name, "bias", bname, sizeof bname);
    ts_tensor *w = ts_param(g, wname, 4, (int64_t[]){out_channels, C / G, kernel_h, kernel_w});
    ts_tensor *b = bias ? ts_param(g, bname, 1, (int64_t[]){out_channels}) : NULL;
    if (!w || (bias && !b)) return NULL;
    /* PyTorch: kaiming_uniform(a=sqrt(5)) on W and U(+-1/sqrt(fan_in)) on b: both bound 1/sqrt(fan_in) */
    int64_t fan_in = C / G * kernel_h * kernel_w, nw = out_channels * fan_in;
    double bound = 1.0 / sqrt((double)fan_in);
    for (int64_t i = 0; i < nw; i++) w->value[i] = (float)((2.0 * ts_graph_uniform(g) - 1.0) * bound);
    for (int64_t i = 0; b && i < out_channels; i++) b->value[i] = (float)((2.0 * ts_graph_uniform(g) - 1.0) * bound);
    ts_status st = ts_scope_push(g, name);
    if (st) return ts_graph_fail(g, st, "%s", ts_last_error());
    ts_tensor *y = ts_conv2d(g, x, w, b, p);
    ts_scope_pop(g);
    return y;
}

static ts_tensor *pool(ts_graph *g, ts_op op, ts_tensor *x, const ts_pool2d_params *p, bool column_major) {
    if (!g || g->sticky) return NULL;
    const char *what = op == TS_OP_MAX_POOL2D ? "ts_max_pool2d" : op == TS_OP_AVG_POOL2D ? "ts_avg_pool2d" : "ts_max_pool2d_indices";
    if (!p || p->kernel_h <= 0 || p->kernel_w <= 0 || p->stride_h < 0 || p->stride_w < 0 || p->pad_top < 0 || p->pad_bottom < 0 ||
        p->pad_left < 0 || p->pad_right < 0 || p->dilation_h < 0 || p->dilation_w < 0)
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "%s: give a positive kernel, and strides, dilations and padding >= 0", what);
    int64_t at[TS_MAX_ATTRS] = {0};
    at[PA_KH] = p->kernel_h, at[PA_KW] = p->kernel_w;
    at[CA_SH] = p->stride_h ? p->stride_h : p->kernel_h, at[CA_SW] = p->stride_w ? p->stride_w : p->kernel_w;
    at[CA_PT] = p->pad_top, at[CA_PB] = p->pad_bottom, at[CA_PL] = p->pad_left, at[CA_PR] = p->pad_right;
    at[PA_EXCLUDE_PAD] = p->exclude_pad != 0;
    at[PA_DH] = p->dilation_h ? p->dilation_h : 1, at[PA_DW] = p->dilation_w ? p->dilation_w : 1;
    at[PA_CEIL] = p->ceil_mode != 0, at[PA_COLUMN_MAJOR] = column_major;
    const ts_tensor *ins[1] = {x};
    return ts_graph_add_node(g, op, ins, 1, NULL, set_attrs, at);
}

ts_tensor *ts_max_pool2d(ts_graph *g, ts_tensor *x, const ts_pool2d_params *p) { return pool(g, TS_OP_MAX_POOL2D, x, p, false); }

ts_tensor *ts_max_pool2d_indices(ts_graph *g, ts_tensor *x, const ts_pool2d_params *p, int column_major) {
    if (!g || g->sticky) return NULL;
    if (x && ts_shape_numel(&x->shape) > ((int64_t)1 << 24))
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT,
                             "ts_max_pool2d_indices: x has %lld elements; indices are exact in float up to 2^24 (16777216): pool a smaller "
                             "tensor", (long long)ts_shape_numel(&x->shape));
    return pool(g, TS_OP_MAX_POOL2D_INDICES, x, p, column_major != 0);
}
ts_tensor *ts_avg_pool2d(ts_graph *g, ts_tensor *x, const ts_pool2d_params *p) { return pool(g, TS_OP_AVG_POOL2D, x, p, false); }

ts_tensor *ts_global_avg_pool2d(ts_graph *g, ts_tensor *x) {
    const ts_tensor *ins[1] = {x};
    return ts_graph_add_node(g, TS_OP_GLOBAL_AVG_POOL, ins, 1, NULL, NULL, NULL);
}

typedef struct bn_arg {
    float eps, momentum;
    int frozen;
} bn_arg;
static void set_bn(ts_tensor *t, const void *arg) {
    const bn_arg *a = arg;
    t->fattr[0] = a->eps, t->fattr[1] = a->momentum, t->attr[0] = a->frozen != 0;
}

ts_tensor *ts_batch_norm(ts_graph *g, ts_tensor *x, ts_tensor *weight, ts_tensor *bias, ts_tensor *running_mean, ts_tensor *running_var,
                         float eps, float momentum, int frozen) {
    if (!g || g->sticky) return NULL;
    if (!(eps > 0.0f) || !(momentum >= 0.0f && momentum <= 1.0f))
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_batch_norm: eps must be > 0 and momentum in [0, 1] (got %g, %g)", (double)eps,
                             (double)momentum);
    for (int j = 0; j < 2; j++) {
        const ts_tensor *r = j ? running_var : running_mean;
        if (r && r->op != TS_OP_BUFFER)
            return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_batch_norm: '%s' must be a buffer made with ts_buffer (the op updates it)",
                                 r->name);
    }
    const ts_tensor *ins[5] = {x, weight, bias, running_mean, running_var};
    return ts_graph_add_node(g, TS_OP_BATCH_NORM, ins, 5, NULL, set_bn, &(bn_arg){eps, momentum, frozen});
}

ts_tensor *ts_batch_norm_layer(ts_graph *g, ts_tensor *x, const char *name) {
    if (!g || g->sticky) return NULL;
    if (bad_layer_name(name)) return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_batch_norm_layer: a layer name without '/' or ':' is required");
    if (!x) return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_batch_norm_layer '%s': input is NULL", name);
    char xs[96];
    if (x->shape.ndim != 2 && x->shape.ndim != 4)
        return ts_graph_fail(g, TS_ERR_SHAPE, "BatchNorm in layer '%s': input '%s' %s is %d-D; it normalises axis 1 of [N,C] or [N,C,H,W]",
                             name, x->name, ts_shape_str(&x->shape, xs, sizeof xs), x->shape.ndim);
    int64_t C = x->shape.d[1];
    static const char *const suffix[4] = {"weight", "bias", "running_mean", "running_var"};
    ts_tensor *t[4];
    for (int j = 0; j < 4; j++) {
        char pname[640];
        layer_param_name(g, name, suffix[j], pname, sizeof pname);
        t[j] = j < 2 ? ts_param(g, pname, 1, &C) : ts_buffer(g, pname, 1, &C);
        if (!t[j]) return NULL;
    }
    for (int64_t c = 0; c < C; c++) t[0]->value[c] = 1.0f, t[3]->value[c] = 1.0f;
    ts_status st = ts_scope_push(g, name);
    if (st) return ts_graph_fail(g, st, "%s", ts_last_error());
    ts_tensor *y = ts_batch_norm(g, x, t[0], t[1], t[2], t[3], 1e-5f, 0.1f, 0);
    ts_scope_pop(g);
    return y;
}

typedef struct mask_arg {
    float p;
    int64_t seed;
} mask_arg;
static void set_mask(ts_tensor *t, const void *arg) {
    const mask_arg *a = arg;
    t->fattr[0] = a->p, t->attr[0] = a->seed;
}

ts_tensor *ts_dropout(ts_graph *g, ts_tensor *x, float p) {
    if (!g || g->sticky) return NULL;
    if (!(p >= 0.0f && p < 1.0f)) return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_dropout: p must be in [0, 1), got %g", (double)p);
    mask_arg a = {p, (int64_t)(ts_graph_uniform(g) * 0x1.0p53)};
    const ts_tensor *ins[1] = {x};
    ts_tensor *mask = ts_graph_add_node(g, TS_OP_DROPOUT_MASK, ins, 1, NULL, set_mask, &a);
    return ts_mul(g, x, mask);
}

ts_tensor *ts_random_uniform(ts_graph *g, ts_tensor *like) {
    if (!g || g->sticky) return NULL;
    mask_arg a = {0.0f, (int64_t)(ts_graph_uniform(g) * 0x1.0p53)};
    const ts_tensor *ins[1] = {like};
    return ts_graph_add_node(g, TS_OP_RANDOM_UNIFORM, ins, 1, NULL, set_mask, &a);
}

ts_tensor *ts_tanh(ts_graph *g, ts_tensor *x) {
    const ts_tensor *ins[1] = {x};
    return ts_graph_add_node(g, TS_OP_TANH, ins, 1, NULL, NULL, NULL);
}

ts_tensor *ts_sigmoid(ts_graph *g, ts_tensor *x) {
    const ts_tensor *ins[1] = {x};
    return ts_graph_add_node(g, TS_OP_SIGMOID, ins, 1, NULL, NULL, NULL);
}

int ts_tensor_is_buffer(const ts_tensor *t) { return t && t->op == TS_OP_BUFFER; }
