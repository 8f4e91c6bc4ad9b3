/* onnx_loss.c -- the file's own losses: NegativeLogLikelihoodLoss and
 * SoftmaxCrossEntropyLoss (class weights, ignore_index, the reductions). */
#include "import/onnx_ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The composed loss compares its labels y with the classes, which would
 * pass a label out of range as none: a CrossEntropy of zero scores [M,C]
 * (the one-hot picks [N,C,d1..] times 0, any layout being zeros) reads
 * them too, so the run checks them as the fused loss's labels (in [0, C)
 * or ignore_index; one outside is an error naming the labels and the
 * value, as PyTorch's and onnxruntime's), and its value is selected away
 * (a Where of a false constant): the loss is unchanged, and so is its
 * gradient. */
static ts_tensor *labels_checked(importer *im, ts_tensor *loss, ts_tensor *pick, ts_tensor *y, bool has_ii, int64_t ii, ts_status *st) {
    ts_graph *g = im->g;
    int64_t M = ts_shape_numel(&y->shape), C = ts_shape_numel(&pick->shape) / M;
    ts_tensor *zeros = ts_reshape(g, ts_scale(g, ts_stop_gradient(g, pick), 0.0f), 2, (int64_t[]){M, C});
    ts_tensor *yr = ts_reshape(g, y, 1, (int64_t[]){M}), *ce;
    ce = has_ii && ii >= INT32_MIN && ii <= INT32_MAX ? ts_cross_entropy_ignore(g, zeros, yr, (int32_t)ii) : ts_cross_entropy(g, zeros, yr);
    char *name = ce ? ts_graph_op_output_name(g, "LabelCheck") : NULL; /* what the run's error names */
    if (ce && (*st = name ? ts_tensor_set_name(ce, name) : TS_ERR_OUT_OF_MEMORY)) ce = NULL;
    ts_free(name);
    ts_shape ones = {.ndim = loss->shape.ndim};
    for (int d = 0; d < ones.ndim; d++) ones.d[d] = 1;
    ts_tensor *never = ce ? ts_onnx_scalar_constant(im, "Never", 0.0f) : NULL;
    return never ? ts_where(g, ts_reshape(g, never, ones.ndim, ones.d), ts_reshape(g, ce, ones.ndim, ones.d), loss) : NULL;
}

/* NegativeLogLikelihoodLoss on log-probabilities [N,C,d1..dk] and labels
 * [N,d1..dk] as ONNX defines it, from graph ops (so its gradient is theirs):
 * each element's loss is -logp[n, y, d] * weight[y], 0 where y is
 * ignore_index; reduction none keeps them, sum adds them, mean divides the
 * sum by the weights of the elements counted. */
static ts_tensor *nll_composed(importer *im, ts_tensor *logp, ts_tensor *y, ts_tensor *w, bool has_ii, int64_t ii, int reduction,
                               ts_status *st) {
    ts_graph *g = im->g;
    const ts_shape *xs = &logp->shape;
    bool fits = xs->ndim >= 2 && y->shape.ndim == xs->ndim - 1 && y->shape.d[0] == xs->d[0];
    for (int d = 1; fits && d < y->shape.ndim; d++) fits = y->shape.d[d] == xs->d[d + 1];
    if (!fits) {
        char a[96], b[96];
        *st = ts_onnx_node_error(im, TS_ERR_SHAPE, "expects scores [N,C,d1,...] and labels [N,d1,...], got %s and %s", ts_shape_str(xs, a, sizeof a),
                                 ts_shape_str(&y->shape, b, sizeof b));
        return NULL;
    }
    int64_t C = xs->d[1];
    ts_shape ys = *xs, cs = {.ndim = xs->ndim};
    ys.d[1] = 1; /* labels as [N,1,d1..] */
    for (int d = 0; d < cs.ndim; d++) cs.d[d] = d == 1 ? C : 1;
    float *cls = ts_malloc((size_t)C * sizeof *cls);
    if (!cls) {
        *st = TS_ERR_OUT_OF_MEMORY;
        return NULL;
    }
    for (int64_t c = 0; c < C; c++) cls[c] = (float)c;
    ts_tensor *classes = ts_onnx_f32_constant(im, "classes", &cs, cls);
    ts_free(cls);
    ts_tensor *yf = ts_onnx_f32_of(im, y, st);
    ts_tensor *yu = ts_reshape(g, yf, ys.ndim, ys.d);
    ts_tensor *pick = num(g, ts_binary(g, "Equal", yu, classes)); /* one-hot [N,C,d1..] */
    if (pick && w) {
        ts_tensor *wr = ts_reshape(g, w, cs.ndim, cs.d);
        pick = wr ? ts_mul(g, pick, wr) : NULL;
    }
    if (pick && has_ii) {
        const float one = 1.0f, ignored = (float)ii;
        ts_shape ts_onnx_scalar = {0};
        ts_tensor *is_ii = num(g, ts_binary(g, "Equal", yu, ts_onnx_f32_constant(im, "ignore_index", &ts_onnx_scalar, &ignored)));
        ts_tensor *keep = is_ii ? ts_sub(g, ts_onnx_f32_constant(im, "one", &ts_onnx_scalar, &one), is_ii) : NULL;
        pick = keep ? ts_mul(g, pick, keep) : NULL;
    }
    int axis1 = 1, all[TS_MAX_DIMS];
    ts_tensor *loss = pick ? ts_reduce_sum(g, ts_mul(g, pick, logp), 1, &axis1, 0) : NULL;
    loss = loss ? ts_scale(g, loss, -1.0f) : NULL;
    for (int d = 0; d < y->shape.ndim; d++) all[d] = d;
    if (loss && reduction > 0) loss = ts_reduce_sum(g, loss, y->shape.ndim, all, 0);
    if (loss && reduction == 2) {
        ts_tensor *counted = ts_reduce_sum(g, ts_reduce_sum(g, pick, 1, &axis1, 0), y->shape.ndim, all, 0);
        loss = counted ? ts_div(g, loss, counted) : NULL;
    }
    if (loss) loss = labels_checked(im, loss, pick, y, has_ii, ii, st);
    if (!loss) *st = ts_graph_status(g);
    return loss;
}

/* A loss's class weights: a graph tensor when computed, else a constant
 * under the initializer's name (the dynamo exporter writes a loss
 * module's weight buffer as an initializer: never a trained parameter). */
static ts_tensor *class_weights(importer *im, value *v, ts_status *st) {
    if (v->t || !v->param) return as_f32(im, v, st);
    if ((*st = ts_onnx_decoded(im, v))) return NULL;
    int64_t n = ts_shape_numel(&v->c.shape);
    float *f = ts_malloc((size_t)(n ? n : 1) * sizeof *f);
    for (int64_t i = 0; f && i < n; i++) f[i] = (float)v->c.v[i];
    ts_tensor *t = f ? ts_onnx_f32_constant(im, v->name, &v->c.shape, f) : NULL;
    ts_free(f);
    if (!t) *st = f ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
    return v->t = t;
}

/* The file's own loss: NegativeLogLikelihoodLoss (after a LogSoftmax) and
 * SoftmaxCrossEntropyLoss on scores [N,C,d1..] and integer labels [N,d1..],
 * with class weights and ignore_index, reduced by none, sum or mean; the
 * second output of SoftmaxCrossEntropyLoss is the log-probabilities. */
ts_status ts_onnx_op_loss(importer *im, node_io *io) {
    bool ce = strcmp(im->node->op_type, "SoftmaxCrossEntropyLoss") == 0;
    static const char *const reductions[] = {"mean", "sum", "none"};
    const Attr *red = ts_onnx_attr(im, "reduction");
    int k = red && red->has_s ? ts_onnx_attr_choice(red, reductions, 3) : 0;
    if (k == 3)
        return ts_onnx_node_error(im, TS_ERR_FORMAT, "reduction '%.*s' is not one of ONNX's: none, sum, mean", (int)red->s.len, (const char *)red->s.data);
    bool sum = k == 1, none = k == 2;
    bool has_w = io->n_in > 2 && io->in[2], has_ii = ts_onnx_attr(im, "ignore_index") != NULL;
    ts_status st = TS_OK;
    ts_tensor *x = ts_onnx_as_tensor(im, io->in[0], &st), *y = x ? ts_onnx_as_tensor(im, io->in[1], &st) : NULL;
    /* labels the graph computed (in f32 or i64): checked before the loss reads them (an ignore_index allowed) */
    if (y && y->dtype != TS_I32 && !(y = ts_graph_indices(im->g, y))) return ts_graph_status(im->g);
    ts_tensor *w = y && has_w ? class_weights(im, io->in[2], &st) : NULL;
    if (!y || (has_w && !w)) return st;
    ts_tensor *logp = ce ? ts_log_softmax(im->g, x, 1) : x, *loss;
    /* the fused ops for [N,C] scores, unweighted, mean or sum; with an
     * ignore_index (PyTorch writes -100), CrossEntropy's mean, over the
     * labels not ignored; the graph ops otherwise */
    int64_t ii = ts_onnx_attr_i(im, "ignore_index", 0);
    if (x->shape.ndim == 2 && !has_w && !none && !has_ii) {
        loss = ce ? ts_cross_entropy(im->g, x, y) : ts_nll_loss(im->g, x, y);
        if (loss && sum) loss = ts_scale(im->g, loss, (float)x->shape.d[0]);
    } else if (x->shape.ndim == 2 && !has_w && ce && !sum && !none && ii >= INT32_MIN && ii <= INT32_MAX) {
        loss = ts_cross_entropy_ignore(im->g, x, y, (int32_t)ii);
    } else {
        loss = logp ? nll_composed(im, logp, y, w, has_ii, ii, none ? 0 : sum ? 1 : 2, &st) : NULL;
        if (!loss) return st ? st : ts_graph_status(im->g);
    }
    st = ts_onnx_built(im, loss, &io->out[0]);
    if (!st && ce && io->n_out > 1) st = ts_onnx_built(im, logp, &io->out[1]);
    return st;
}
