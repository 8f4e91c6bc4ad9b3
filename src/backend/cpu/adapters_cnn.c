/* adapters_cnn.c -- the CPU kernel rows of the convolutional ops: each
 * unpacks a node's context (ts_kctx) into the kernels of cnn.c; and the
 * workspace its convolutions take. */
#include "backend/cpu/adapters.h"

#include "backend/cpu/cnn.h"
#include "graph/cnn_ops.h"

static ts_conv_geom conv_geom_of(const ts_tensor *node, const ts_shape *in, const ts_shape *out) {
    const int64_t *at = node->attr;
    const ts_shape *x = &in[0], *w = &in[1], *y = out;
    return (ts_conv_geom){.N = x->d[0], .C = x->d[1], .H = x->d[2], .W = x->d[3], .OC = y->d[1], .OH = y->d[2], .OW = y->d[3],
                          .KH = w->d[2], .KW = w->d[3], .SH = at[CA_SH], .SW = at[CA_SW], .PT = at[CA_PT], .PL = at[CA_PL],
                          .DH = at[CA_DH], .DW = at[CA_DW], .groups = at[CA_GROUPS]};
}

static ts_conv_geom conv_geom(const ts_kctx *k) { return conv_geom_of(k->node, k->in_shape, &k->out_shape); }

static ts_conv_geom pool_geom(const ts_kctx *k) {
    const int64_t *at = k->node->attr;
    const ts_shape *x = &k->in_shape[0], *y = &k->out_shape;
    return (ts_conv_geom){.N = x->d[0], .C = x->d[1], .H = x->d[2], .W = x->d[3], .OC = x->d[1], .OH = y->d[2], .OW = y->d[3],
                          .KH = at[PA_KH], .KW = at[PA_KW], .SH = at[CA_SH], .SW = at[CA_SW], .PT = at[CA_PT], .PL = at[CA_PL],
                          .PB = at[CA_PB], .PR = at[CA_PR], .DH = at[PA_DH], .DW = at[PA_DW], .groups = 1};
}

/* The whole plane as one window. */
static ts_conv_geom global_geom(const ts_kctx *k) {
    const ts_shape *x = &k->in_shape[0];
    return (ts_conv_geom){.N = x->d[0], .C = x->d[1], .H = x->d[2], .W = x->d[3], .OC = x->d[1], .OH = 1, .OW = 1, .KH = x->d[2],
                          .KW = x->d[3], .SH = 1, .SW = 1, .DH = 1, .DW = 1, .groups = 1};
}

void ts_fwd_conv2d(const ts_kctx *k) {
    ts_kctx room;
    k = ts_cpu_widen(k, &room);
    ts_conv_geom g = conv_geom(k);
    const float *b = k->n_in == 3 ? k->in[2] : NULL;
    ts_conv_tail tail = {.res = k->residual, .sum = k->residual ? k->residual_out : NULL, .relu = k->relu_out, .sums = k->sums_out};
    /* a training model's weights change at every step: Winograd's
     * transformed weights are made at each call (no cache), and only where
     * that pays (ts_conv2d_winograd_tile); the others keep im2col's sums */
    if (k->training && !ts_conv2d_winograd_tile(&g, false))
        ts_conv2d_forward(k->pool, k->workspace, k->out, k->in[0], k->in[1], b, &g, &tail);
    else
        ts_conv2d_infer(k->pool, k->workspace, k->out, k->in[0], k->in[1], b, &g, k->training ? NULL : k->cache, k->values_gen, &tail);
}

void ts_bwd_conv2d(const ts_kctx *k) {
    ts_kctx room;
    k = ts_cpu_widen(k, &room);
    ts_conv_geom g = conv_geom(k);
    ts_conv2d_backward(k->pool, k->workspace, k->din[0], k->din[1], k->n_in == 3 ? k->din[2] : NULL, k->dout, k->in[0], k->in[1], &g,
                       k->din_store & 1u);
}

/* Conv3d and ConvTranspose3d: the geometry of the convolution (for the
 * transpose, the one it transposes) */
static ts_conv3d_geom conv3d_geom(const ts_kctx *k) {
    return ts_conv3d_geom_of(k->node->attr, &k->in_shape[0], &k->in_shape[1], &k->out_shape, k->node->op == TS_OP_CONV_TRANSPOSE3D);
}

void ts_fwd_conv3d(const ts_kctx *k) {
    ts_kctx room;
    k = ts_cpu_widen(k, &room);
    ts_conv3d_geom g = conv3d_geom(k);
    const float *b = k->n_in == 3 ? k->in[2] : NULL;
    if (k->node->op == TS_OP_CONV3D) ts_conv3d_forward(k->pool, k->out, k->in[0], k->in[1], b, &g);
    else ts_conv_transpose3d_forward(k->pool, k->out, k->in[0], k->in[1], b, &g);
}

void ts_bwd_conv3d(const ts_kctx *k) {
    ts_kctx room;
    k = ts_cpu_widen(k, &room);
    ts_conv3d_geom g = conv3d_geom(k);
    float *db = k->n_in == 3 ? k->din[2] : NULL;
    if (k->node->op == TS_OP_CONV3D) ts_conv3d_backward(k->pool, k->din[0], k->din[1], db, k->dout, k->in[0], k->in[1], &g);
    else ts_conv_transpose3d_backward(k->pool, k->din[0], k->din[1], db, k->dout, k->in[0], k->in[1], &g);
}

/* ConvTranspose2d x [N,C,H,W] -> y [N,OC,OH,OW] as the convolution it
 * transposes: y [N,OC,OH,OW] -> x's shape, by the same weight */
static ts_conv_geom transposed_geom(const ts_tensor *node, const ts_shape *in, const ts_shape *out) {
    const int64_t *at = node->attr;
    const ts_shape *x = &in[0], *w = &in[1], *y = out;
    return (ts_conv_geom){.N = x->d[0], .C = y->d[1], .H = y->d[2], .W = y->d[3], .OC = x->d[1], .OH = x->d[2], .OW = x->d[3],
                          .KH = w->d[2], .KW = w->d[3], .SH = at[CA_SH], .SW = at[CA_SW], .PT = at[CA_PT], .PL = at[CA_PL],
                          .DH = at[CA_DH], .DW = at[CA_DW], .groups = at[CA_GROUPS]};
}

void ts_fwd_conv_transpose2d(const ts_kctx *k) {
    ts_conv_geom g = transposed_geom(k->node, k->in_shape, &k->out_shape);
    ts_conv_transpose2d_forward(k->pool, k->workspace, k->out, k->in[0], k->in[1], k->n_in == 3 ? k->in[2] : NULL, &g);
}

void ts_bwd_conv_transpose2d(const ts_kctx *k) {
    ts_conv_geom g = transposed_geom(k->node, k->in_shape, &k->out_shape);
    ts_conv_transpose2d_backward(k->pool, k->workspace, k->din[0], k->din[1], k->n_in == 3 ? k->din[2] : NULL, k->dout, k->in[0], k->in[1],
                                 &g, k->din_store & 1u);
}

/* the winners' indices for the backward pass: none in an inference model;
 * the output's sums a sample at a time where a watch asks (sums_samples) */
void ts_fwd_max_pool2d(const ts_kctx *k) {
    ts_conv_geom g = pool_geom(k);
    ts_max_pool2d_forward(k->pool, k->out, k->training ? (int32_t *)(void *)k->scratch : NULL, k->in[0], &g, k->sums_out);
}
void ts_bwd_max_pool2d(const ts_kctx *k) {
    ts_conv_geom g = pool_geom(k);
    if (k->din[0]) ts_max_pool2d_backward(k->pool, k->din[0], k->dout, (const int32_t *)(const void *)k->scratch, &g);
}
/* The max pool into out, then each winner as its flat index into x. */
void ts_fwd_max_pool2d_indices(const ts_kctx *k) {
    ts_conv_geom g = pool_geom(k);
    const int32_t *at = (const int32_t *)(const void *)k->scratch;
    ts_max_pool2d_forward(k->pool, k->out, (int32_t *)(void *)k->scratch, k->in[0], &g, NULL);
    ts_max_pool_flat_indices(k->out, at, &g, k->node->attr[PA_COLUMN_MAJOR] != 0);
}
void ts_fwd_avg_pool2d(const ts_kctx *k) {
    ts_conv_geom g = pool_geom(k);
    ts_avg_pool2d_forward(k->pool, k->out, k->in[0], &g, k->node->attr[PA_EXCLUDE_PAD] == 0);
}
void ts_bwd_avg_pool2d(const ts_kctx *k) {
    ts_conv_geom g = pool_geom(k);
    if (k->din[0]) ts_avg_pool2d_backward(k->pool, k->din[0], k->dout, &g, k->node->attr[PA_EXCLUDE_PAD] == 0);
}
void ts_fwd_global_pool(const ts_kctx *k) {
    ts_conv_geom g = global_geom(k);
    ts_avg_pool2d_forward(k->pool, k->out, k->in[0], &g, true);
}
void ts_bwd_global_pool(const ts_kctx *k) {
    ts_conv_geom g = global_geom(k);
    if (k->din[0]) ts_avg_pool2d_backward(k->pool, k->din[0], k->dout, &g, true);
}

static void bn_dims(const ts_kctx *k, int64_t *N, int64_t *C, int64_t *inner) {
    const ts_shape *x = &k->in_shape[0];
    *N = x->d[0], *C = x->d[1], *inner = 1;
    for (int i = 2; i < x->ndim; i++) *inner *= x->d[i];
}

/* Batch statistics in a training model unless frozen. */
static bool bn_batch(const ts_kctx *k) { return k->training && !k->node->attr[0]; }

void ts_fwd_batch_norm(const ts_kctx *k) {
    int64_t N, C, inner;
    bn_dims(k, &N, &C, &inner);
    bool batch = bn_batch(k);
    /* the running buffers are graph-held state this op updates in place */
    float *rm = (float *)(uintptr_t)k->in[3], *rv = (float *)(uintptr_t)k->in[4];
    ts_batch_norm_forward_summed(k->pool, k->out, k->scratch, k->in[0], k->in[1], k->in[2], rm, rv, N, C, inner, k->node->fattr[0],
                                 k->node->fattr[1], batch, batch && k->update_state, k->relu_out, k->sums_out, k->sums_relu);
}

void ts_bwd_batch_norm(const ts_kctx *k) {
    int64_t N, C, inner;
    bn_dims(k, &N, &C, &inner);
    ts_batch_norm_backward(k->pool, k->din[0], k->din[1], k->din[2], k->dout, k->in[0], k->in[1], k->scratch, N, C, inner, bn_batch(k),
                           k->din_store & 1u);
}

void ts_fwd_dropout_mask(const ts_kctx *k) {
    int64_t n = ts_shape_numel(&k->out_shape);
    if (!k->training) {
        for (int64_t i = 0; i < n; i++) k->out[i] = 1.0f;
        return;
    }
    ts_dropout_mask(k->pool, k->out, n, k->node->fattr[0], (uint64_t)k->node->attr[0], k->iteration);
}

void ts_fwd_random_uniform(const ts_kctx *k) {
    ts_random_uniform_fill(k->pool, k->out, ts_shape_numel(&k->out_shape), (uint64_t)k->node->attr[0], k->iteration);
}

void ts_fwd_tanh(const ts_kctx *k) { ts_tanh_forward(k->pool, k->out, k->in[0], ts_shape_numel(&k->out_shape)); }
void ts_bwd_tanh(const ts_kctx *k) {
    if (k->din[0]) ts_tanh_backward(k->pool, k->din[0], k->dout, k->out, ts_shape_numel(&k->out_shape));
}
void ts_fwd_sigmoid(const ts_kctx *k) { ts_sigmoid_forward(k->pool, k->out, k->in[0], ts_shape_numel(&k->out_shape)); }
void ts_bwd_sigmoid(const ts_kctx *k) {
    if (k->din[0]) ts_sigmoid_backward(k->pool, k->din[0], k->dout, k->out, ts_shape_numel(&k->out_shape));
}

/* the weights in Winograd's domain, kept while the graph holds the weights */
size_t ts_cpu_cache_conv2d(const ts_tensor *node, const ts_shape *in, const bool *held, const ts_shape *out) {
    ts_conv_geom g = conv_geom_of(node, in, out);
    return held[1] ? ts_conv2d_cache_floats(&g) : 0;
}

size_t ts_cpu_workspace_conv2d(const ts_shape *in, const ts_dtype *in_dtype, const ts_shape *out, int threads) {
    (void)in_dtype;
    int64_t groups = in[0].d[1] / in[1].d[1]; /* w is [OC, C/groups, KH, KW] */
    ts_conv_geom g = {.N = in[0].d[0], .C = in[0].d[1], .H = in[0].d[2], .W = in[0].d[3], .KH = in[1].d[2], .KW = in[1].d[3], .OC = out->d[1],
                      .OH = out->d[2], .OW = out->d[3], .groups = groups};
    return ts_conv2d_workspace(&g, threads);
}

size_t ts_cpu_workspace_conv_transpose2d(const ts_shape *in, const ts_dtype *in_dtype, const ts_shape *out, int threads) {
    (void)in_dtype;
    int64_t groups = out->d[1] / in[1].d[1]; /* w is [C, OC/groups, KH, KW] */
    ts_conv_geom g = {.N = in[0].d[0], .C = out->d[1], .H = out->d[2], .W = out->d[3], .KH = in[1].d[2], .KW = in[1].d[3], .OC = in[0].d[1],
                      .OH = in[0].d[2], .OW = in[0].d[3], .groups = groups};
    return ts_conv_transpose2d_workspace(&g, threads);
}
