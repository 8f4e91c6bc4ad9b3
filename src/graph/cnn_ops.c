/* cnn_ops.c -- the convolutional ops' shape rules (each error names the
 * layer and the sizes, and says what would fit), costs and scratch sizes;
 * the kernels are each backend's (backend/cpu/adapters_cnn.c). */
#include "graph/cnn_ops.h"

#include <stdio.h>
#include <string.h>

#define SHAPE_ERR(...) ts_error(TS_ERR_SHAPE, __VA_ARGS__)

static const char *sh(const ts_shape *s, char *buf) { return ts_shape_str(s, buf, 96); }

/* The layer a node belongs to: its scope ("conv1"), or "(top level)".
 * While building the node has no name yet: the graph's scope stack says. */
static const char *layer_of(const ts_tensor *n, char *buf, size_t len) {
    if (n->name) {
        const char *slash = strchr(n->name, '/');
        if (!slash) snprintf(buf, len, "(top level)");
        else snprintf(buf, len, "%.*s", (int)(slash - n->name), n->name);
    } else {
        ts_graph_scope_path(n->g, buf, len);
        if (!buf[0]) snprintf(buf, len, "(top level)");
    }
    return buf;
}

/* ---------------------------------------------------------- shape rules */

static ts_status need_4d(const ts_tensor *n, const char *op, const ts_shape *x) {
    char l[256], a[96];
    if (x->ndim == 4) return TS_OK;
    return SHAPE_ERR("%s in layer '%s': input %s is %d-D; it takes 4-D NCHW input [N,C,H,W] (for a single image add the batch axis, "
                     "for [N,H,W] add a channel axis, with ts_reshape)",
                     op, layer_of(n, l, sizeof l), sh(x, a), x->ndim);
}

/* Output size of one axis, or -1 when the window does not fit. */
static int64_t out_size(int64_t in, int64_t pad, int64_t k_eff, int64_t stride) {
    return in + pad < k_eff ? -1 : (in + pad - k_eff) / stride + 1;
}

/* A pooling axis' output size; ceil rounds up (PyTorch's and ONNX's
 * ceil_mode) but drops a last window that starts in the after-padding. */
static int64_t pool_out_size(int64_t in, int64_t before, int64_t after, int64_t k_eff, int64_t stride, bool ceil) {
    int64_t n = out_size(in, before + after, k_eff, stride);
    if (n < 1 || !ceil) return n;
    n = (in + before + after - k_eff + stride - 1) / stride + 1;
    return (n - 1) * stride >= in + before ? n - 1 : n;
}

ts_status ts_shape_conv2d(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    char l[256], a[96], b[96];
    const ts_shape *x = &in[0], *w = &in[1];
    const int64_t *at = n->attr;
    if (n->n_in < 2 || n->n_in > 3) return SHAPE_ERR("Conv2d takes an input, a weight and an optional bias, got %d inputs", n->n_in);
    ts_status st = need_4d(n, "Conv2d", x);
    if (st) return st;
    layer_of(n, l, sizeof l);
    if (w->ndim != 4)
        return SHAPE_ERR("Conv2d in layer '%s': weight %s must be 4-D [out_channels, in_channels/groups, kernel_h, kernel_w]", l, sh(w, a));
    int64_t C = x->d[1], OC = w->d[0], G = at[CA_GROUPS];
    if (G < 1 || C % G || OC % G)
        return SHAPE_ERR("Conv2d in layer '%s': groups=%lld must divide both the input channels (%lld, input %s) and the output channels "
                         "(%lld, weight %s)",
                         l, (long long)G, (long long)C, sh(x, a), (long long)OC, sh(w, b));
    if (w->d[1] * G != C)
        return SHAPE_ERR("Conv2d in layer '%s': channel mismatch: the input %s has %lld channels but the weight %s takes %lld "
                         "(in_channels/groups = %lld, groups = %lld)",
                         l, sh(x, a), (long long)C, sh(w, b), (long long)(w->d[1] * G), (long long)w->d[1], (long long)G);
    if (n->n_in == 3 && (in[2].ndim != 1 || in[2].d[0] != OC))
        return SHAPE_ERR("Conv2d in layer '%s': bias %s must be [%lld], one value per output channel", l, sh(&in[2], a), (long long)OC);
    int64_t ekh = (w->d[2] - 1) * at[CA_DH] + 1, ekw = (w->d[3] - 1) * at[CA_DW] + 1;
    int64_t OH = out_size(x->d[2], at[CA_PT] + at[CA_PB], ekh, at[CA_SH]);
    int64_t OW = out_size(x->d[3], at[CA_PL] + at[CA_PR], ekw, at[CA_SW]);
    if (OH < 1 || OW < 1)
        return SHAPE_ERR("Conv2d in layer '%s': the kernel %lldx%lld (%lldx%lld with dilation %lld,%lld) is larger than the padded input "
                         "%lldx%lld (input %s, padding top %lld bottom %lld left %lld right %lld): pad more or use a smaller kernel",
                         l, (long long)w->d[2], (long long)w->d[3], (long long)ekh, (long long)ekw, (long long)at[CA_DH],
                         (long long)at[CA_DW], (long long)(x->d[2] + at[CA_PT] + at[CA_PB]),
                         (long long)(x->d[3] + at[CA_PL] + at[CA_PR]), sh(x, a), (long long)at[CA_PT], (long long)at[CA_PB],
                         (long long)at[CA_PL], (long long)at[CA_PR]);
    *out = (ts_shape){.ndim = 4, .d = {x->d[0], OC, OH, OW}};
    return TS_OK;
}

/* The transpose of Conv2d: x [N,C,H,W] by w [C, OC/groups, KH, KW] gives
 * [N, OC, (H-1) SH - PT - PB + DH (KH-1) + OPH + 1, likewise W]. */
ts_status ts_shape_conv_transpose2d(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    char l[256], a[96], b[96];
    const ts_shape *x = &in[0], *w = &in[1];
    const int64_t *at = n->attr;
    if (n->n_in < 2 || n->n_in > 3)
        return SHAPE_ERR("ConvTranspose2d takes an input, a weight and an optional bias, got %d inputs", n->n_in);
    ts_status st = need_4d(n, "ConvTranspose2d", x);
    if (st) return st;
    layer_of(n, l, sizeof l);
    if (w->ndim != 4)
        return SHAPE_ERR("ConvTranspose2d in layer '%s': weight %s must be 4-D [in_channels, out_channels/groups, kernel_h, kernel_w]", l,
                         sh(w, a));
    int64_t C = x->d[1], G = at[CA_GROUPS], OC = w->d[1] * G;
    if (G < 1 || C % G)
        return SHAPE_ERR("ConvTranspose2d in layer '%s': groups=%lld must divide the input channels (%lld, input %s)", l, (long long)G,
                         (long long)C, sh(x, a));
    if (w->d[0] != C)
        return SHAPE_ERR("ConvTranspose2d in layer '%s': channel mismatch: the input %s has %lld channels but the weight %s takes %lld "
                         "(its first dimension)", l, sh(x, a), (long long)C, sh(w, b), (long long)w->d[0]);
    if (n->n_in == 3 && (in[2].ndim != 1 || in[2].d[0] != OC))
        return SHAPE_ERR("ConvTranspose2d in layer '%s': bias %s must be [%lld], one value per output channel", l, sh(&in[2], a), (long long)OC);
    int64_t OH = (x->d[2] - 1) * at[CA_SH] - at[CA_PT] - at[CA_PB] + at[CA_DH] * (w->d[2] - 1) + at[CA_OPH] + 1;
    int64_t OW = (x->d[3] - 1) * at[CA_SW] - at[CA_PL] - at[CA_PR] + at[CA_DW] * (w->d[3] - 1) + at[CA_OPW] + 1;
    if (OH < 1 || OW < 1)
        return SHAPE_ERR("ConvTranspose2d in layer '%s': the padding (top %lld bottom %lld left %lld right %lld) removes the whole "
                         "output (%lldx%lld before it; input %s, weight %s): pad less", l, (long long)at[CA_PT], (long long)at[CA_PB],
                         (long long)at[CA_PL], (long long)at[CA_PR], (long long)(OH + at[CA_PT] + at[CA_PB]),
                         (long long)(OW + at[CA_PL] + at[CA_PR]), sh(x, a), sh(w, b));
    *out = (ts_shape){.ndim = 4, .d = {x->d[0], OC, OH, OW}};
    return TS_OK;
}

/* Conv3d and ConvTranspose3d: x [N,C,D,H,W]; Conv3d's weight
 * [OC,C/groups,KD,KH,KW], ConvTranspose3d's [C,OC/groups,KD,KH,KW]. */
ts_status ts_shape_conv3d(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    char l[256], a[96], b[96];
    const ts_shape *x = &in[0], *w = &in[1];
    const int64_t *at = n->attr;
    bool tr = n->op == TS_OP_CONV_TRANSPOSE3D;
    const char *op = tr ? "ConvTranspose3d" : "Conv3d";
    if (n->n_in < 2 || n->n_in > 3) return SHAPE_ERR("%s takes an input, a weight and an optional bias, got %d inputs", op, n->n_in);
    layer_of(n, l, sizeof l);
    if (x->ndim != 5)
        return SHAPE_ERR("%s in layer '%s': input %s is %d-D; it takes 5-D input [N,C,D,H,W] (for a single volume add the batch axis, "
                         "with ts_reshape)", op, l, sh(x, a), x->ndim);
    if (w->ndim != 5)
        return SHAPE_ERR("%s in layer '%s': weight %s must be 5-D [%s, kernel_d, kernel_h, kernel_w]", op, l, sh(w, a),
                         tr ? "in_channels, out_channels/groups" : "out_channels, in_channels/groups");
    int64_t C = x->d[1], G = at[C3_GROUPS], OC = tr ? w->d[1] * G : w->d[0];
    if (G < 1 || C % G || OC % G)
        return SHAPE_ERR("%s in layer '%s': groups=%lld must divide both the input channels (%lld, input %s) and the output channels "
                         "(%lld, weight %s)", op, l, (long long)G, (long long)C, sh(x, a), (long long)OC, sh(w, b));
    if ((tr ? w->d[0] : w->d[1] * G) != C)
        return SHAPE_ERR("%s in layer '%s': channel mismatch: the input %s has %lld channels but the weight %s takes %lld", op, l, sh(x, a),
                         (long long)C, sh(w, b), (long long)(tr ? w->d[0] : w->d[1] * G));
    if (n->n_in == 3 && (in[2].ndim != 1 || in[2].d[0] != OC))
        return SHAPE_ERR("%s in layer '%s': bias %s must be [%lld], one value per output channel", op, l, sh(&in[2], a), (long long)OC);
    *out = (ts_shape){.ndim = 5, .d = {x->d[0], OC}};
    for (int i = 0; i < 3; i++) {
        int64_t ek = (w->d[2 + i] - 1) * at[C3_D + i] + 1, pads = at[C3_P0 + i] + at[C3_P1 + i];
        int64_t o = tr ? (x->d[2 + i] - 1) * at[C3_S + i] - pads + ek + at[C3_OP + i] : out_size(x->d[2 + i], pads, ek, at[C3_S + i]);
        if (o < 1)
            return SHAPE_ERR("%s in layer '%s': along spatial axis %d the %s (input %s, weight %s, padding %lld and %lld, dilation "
                             "%lld): %s", op, l, i, tr ? "padding removes the whole output" : "kernel is larger than the padded input",
                             sh(x, a), sh(w, b), (long long)at[C3_P0 + i], (long long)at[C3_P1 + i], (long long)at[C3_D + i],
                             tr ? "pad less" : "pad more or use a smaller kernel");
        out->d[2 + i] = o;
    }
    return TS_OK;
}

ts_status ts_shape_pool2d(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    char l[256], a[96];
    const char *op = ts_op_get(n->op)->name;
    const ts_shape *x = &in[0];
    const int64_t *at = n->attr;
    ts_status st = need_4d(n, op, x);
    if (st) return st;
    layer_of(n, l, sizeof l);
    int64_t ekh = (at[PA_KH] - 1) * at[PA_DH] + 1, ekw = (at[PA_KW] - 1) * at[PA_DW] + 1;
    if (at[CA_PT] >= ekh || at[CA_PB] >= ekh || at[CA_PL] >= ekw || at[CA_PR] >= ekw)
        return SHAPE_ERR("%s in layer '%s': padding (top %lld bottom %lld left %lld right %lld) must be smaller than the window %lldx%lld "
                         "(dilation included): a window of padding only has no value; pad less",
                         op, l, (long long)at[CA_PT], (long long)at[CA_PB], (long long)at[CA_PL], (long long)at[CA_PR], (long long)ekh,
                         (long long)ekw);
    int64_t OH = pool_out_size(x->d[2], at[CA_PT], at[CA_PB], ekh, at[CA_SH], at[PA_CEIL] != 0);
    int64_t OW = pool_out_size(x->d[3], at[CA_PL], at[CA_PR], ekw, at[CA_SW], at[PA_CEIL] != 0);
    if (OH < 1 || OW < 1)
        return SHAPE_ERR("%s in layer '%s': the window %lldx%lld (dilation included) is larger than the padded input %lldx%lld (input %s)",
                         op, l, (long long)ekh, (long long)ekw, (long long)(x->d[2] + at[CA_PT] + at[CA_PB]),
                         (long long)(x->d[3] + at[CA_PL] + at[CA_PR]), sh(x, a));
    *out = (ts_shape){.ndim = 4, .d = {x->d[0], x->d[1], OH, OW}};
    return TS_OK;
}

ts_status ts_shape_global_pool(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    ts_status st = need_4d(n, "GlobalAvgPool", &in[0]);
    if (st) return st;
    *out = (ts_shape){.ndim = 4, .d = {in[0].d[0], in[0].d[1], 1, 1}};
    return TS_OK;
}

ts_status ts_shape_batch_norm(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    char l[256], a[96], b[96];
    static const char *const what[5] = {"input", "weight", "bias", "running_mean", "running_var"};
    layer_of(n, l, sizeof l);
    if (in[0].ndim != 2 && in[0].ndim != 4)
        return SHAPE_ERR("BatchNorm in layer '%s': input %s is %d-D; it normalises axis 1 of [N,C] or [N,C,H,W]", l, sh(&in[0], a),
                         in[0].ndim);
    for (int j = 1; j < 5; j++)
        if (in[j].ndim != 1 || in[j].d[0] != in[0].d[1])
            return SHAPE_ERR("BatchNorm in layer '%s': %s %s must be [%lld], one value per channel of the input %s", l, what[j],
                             sh(&in[j], b), (long long)in[0].d[1], sh(&in[0], a));
    *out = in[0];
    return TS_OK;
}

ts_status ts_shape_dropout_mask(const ts_tensor *n, const ts_shape *in, ts_shape *out) {
    (void)n;
    *out = in[0];
    return TS_OK;
}

/* ---------------------------------------------------------------- costs */

double ts_flops_conv2d(const ts_shape *in, const ts_shape *out) {
    return 2.0 * (double)ts_shape_numel(out) * (double)(in[1].d[1] * in[1].d[2] * in[1].d[3]);
}
double ts_flops_conv_transpose2d(const ts_shape *in, const ts_shape *out) { /* each input element meets OC/groups*KH*KW weights */
    (void)out;
    return 2.0 * (double)ts_shape_numel(&in[0]) * (double)(in[1].d[1] * in[1].d[2] * in[1].d[3]);
}
double ts_flops_conv3d(const ts_shape *in, const ts_shape *out) {
    /* every weight meets each position of the convolution's output (the
     * transpose's input), of the two the side with fewer positions where
     * padding does not make it larger: a cost estimate */
    int64_t s_in = in[0].d[2] * in[0].d[3] * in[0].d[4], s_out = out->d[2] * out->d[3] * out->d[4];
    return 2.0 * (double)ts_shape_numel(&in[1]) * (double)in[0].d[0] * (double)(s_in < s_out ? s_in : s_out);
}
double ts_flops_pool2d(const ts_shape *in, const ts_shape *out) {
    (void)out;
    return (double)ts_shape_numel(&in[0]);
}
size_t ts_scratch_max_pool2d(const ts_shape *in, const ts_shape *out) { /* the winners, int32 */
    (void)in;
    return (size_t)ts_shape_numel(out) * sizeof(int32_t) / sizeof(float);
}
size_t ts_scratch_batch_norm(const ts_shape *in, const ts_shape *out) {
    (void)out;
    return 2 * (size_t)in[0].d[1];
}
