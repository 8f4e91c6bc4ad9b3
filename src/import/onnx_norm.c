/* onnx_norm.c -- normalizations: BatchNormalization (its running statistics
 * as buffers), LayerNormalization, GroupNormalization and
 * InstanceNormalization, LpNormalization, MeanVarianceNormalization,
 * RMSNormalization and LRN. */
#include "import/onnx_ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A running statistic (`stat`: running_mean, running_var): a buffer under
 * the initializer's name (or the name of a constant: an input bound at
 * import). PyTorch's exporters store initializers of equal values once: a
 * fresh BatchNorm's running_var is its weight's ones, its running_mean its
 * bias's zeros (an eval-mode export gives it as the parameter itself, or an
 * Identity of it, which made a parameter of its own): then the module's
 * own buffer `<module>.<stat>` with those values (the Identity's parameter
 * becomes that buffer). */
static ts_tensor *as_buffer(importer *im, value *v, const char *stat, bool training, ts_status *st) {
    if (v->t && v->t->op == TS_OP_BUFFER) return v->t;
    if (v->t && v->t->op != TS_OP_INPUT) {
        char scope[512], name[600];
        ts_graph_scope_path(im->g, scope, sizeof scope);
        snprintf(name, sizeof name, "%s%s%s", scope, *scope ? "." : "", stat);
        ts_tensor *have = ts_graph_find(im->g, name), *b;
        if (have && have->op == TS_OP_BUFFER) return have;
        if (have == v->t && have->op == TS_OP_PARAM) {
            have->op = TS_OP_BUFFER;
            return have;
        }
        /* the module's own statistic read through graph ops (InstanceNorm's
         * tiled over the batch, below): a PyTorch `running_mean` or
         * `running_var` is a buffer, never trained; the node's per-sample
         * one is `<stat>.tiled` */
        if (have && have->op == TS_OP_PARAM && have->value) {
            have->op = TS_OP_BUFFER;
            snprintf(name + strlen(name), sizeof name - strlen(name), ".tiled");
            have = ts_graph_find(im->g, name);
            if (have && have->op == TS_OP_BUFFER) return have;
        }
        /* computed in the graph (PyTorch's InstanceNorm with running
         * statistics tiles them over the batch into a BatchNormalization of
         * [1, N*C, ...], whose running outputs nothing reads): a training
         * node normalises by the batch's statistics, its running ones start
         * at 0 and 1 in a buffer of their own; an inference node would need
         * their values */
        if (!v->t->value && !training) {
            *st = ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its running statistic '%s' is computed in the graph ('%s'); an inference-mode "
                                     "BatchNormalization takes its running statistics as initializers", v->name, v->t->name);
            return NULL;
        }
        if (have || v->t->dtype != TS_F32 || !(b = ts_buffer(im->g, name, v->t->shape.ndim, v->t->shape.d))) {
            *st = have ? ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its running statistic '%s' shares the values of '%s', and '%s' is taken", v->name,
                                            v->t->name, name)
                       : ts_graph_status(im->g) ? ts_graph_status(im->g)
                                                : ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its running statistic '%s' is not float", v->name);
            return NULL;
        }
        int64_t n = ts_shape_numel(&b->shape);
        if (v->t->value) memcpy(b->value, v->t->value, (size_t)n * sizeof(float));
        else
            for (int64_t i = 0; i < n; i++) b->value[i] = strcmp(stat, "running_var") == 0 ? 1.0f : 0.0f;
        return b;
    }
    if (!v->param && !v->c.v) {
        *st = ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its running statistic '%s' must be an initializer%s", v->name, ts_onnx_bind_hint(v));
        return NULL;
    }
    ts_tensor *b = ts_buffer(im->g, v->name, v->c.shape.ndim, v->c.shape.d);
    if (!b || (*st = ts_onnx_decoded(im, v))) {
        if (!b) *st = ts_graph_status(im->g);
        return NULL;
    }
    int64_t n = ts_shape_numel(&v->c.shape);
    for (int64_t i = 0; i < n; i++) b->value[i] = (float)v->c.v[i];
    v->t = b;
    return b;
}

/* BatchNormalization: training_mode 1 (a training export) normalises with
 * batch statistics and updates the running buffers (ONNX's momentum m is
 * PyTorch's 1 - m); an inference export's node keeps using the running
 * values when trained (frozen). Without the attribute, a node with the
 * running outputs is a training one, as BatchNormalization-9 says (PyTorch
 * writes its InstanceNorm with running statistics so at every opset). */
ts_status ts_onnx_op_batch_norm(importer *im, node_io *io) {
    if (io->n_in < 5) return ts_onnx_node_error(im, TS_ERR_FORMAT, "needs 5 inputs");
    bool training;
    ts_status st = ts_onnx_attr_flag(im, "training_mode", &training);
    if (st) return st;
    if (!ts_onnx_attr(im, "training_mode") && io->n_out > 1 && im->node->output[1] && *im->node->output[1]) training = true;
    float eps = (float)ts_onnx_attr_f(im, "epsilon", 1e-5), momentum = (float)(1.0 - ts_onnx_attr_f(im, "momentum", 0.9));
    ts_tensor *x = ts_onnx_as_tensor(im, io->in[0], &st), *w = x ? ts_onnx_as_tensor(im, io->in[1], &st) : NULL,
              *b = w ? ts_onnx_as_tensor(im, io->in[2], &st) : NULL, *rm = b ? as_buffer(im, io->in[3], "running_mean", training, &st) : NULL,
              *rv = rm ? as_buffer(im, io->in[4], "running_var", training, &st) : NULL;
    if (!rv) return st;
    /* [N,C,L] and [N,C,D,H,W] as the op's [N,C,H,W]: [N,C,1,L], [N,C,D,H*W] (views) */
    const int64_t *d = x->shape.d;
    int nd = x->shape.ndim;
    ts_tensor *x4 = nd == 3 ? ts_reshape(im->g, x, 4, (int64_t[]){d[0], d[1], 1, d[2]})
                    : nd == 5 ? ts_reshape(im->g, x, 4, (int64_t[]){d[0], d[1], d[2], d[3] * d[4]}) : x;
    ts_tensor *y = x4 ? ts_batch_norm(im->g, x4, w, b, rm, rv, eps, momentum, !training) : NULL;
    return ts_onnx_built(im, y && x4 != x ? ts_reshape(im->g, y, nd, d) : y, &io->out[0]);
}

/* LayerNormalization (opset 17): over the dims from `axis` on, computed in
 * float (stash_type 1, the only one available); without its optional bias
 * B, a bias of zeros. */
ts_status ts_onnx_op_layer_norm(importer *im, node_io *io) {
    int stash;
    ts_status st = ts_onnx_attr_int32(im, "stash_type", 1, INT32_MIN, INT32_MAX, &stash);
    if (st) return st;
    if (stash != 1)
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "stash_type %d (statistics computed in %s) is not available; stash_type 1 (float) is", stash,
                                  ts_onnx_dtype_name(stash));
    ts_tensor *x = ts_onnx_as_tensor(im, io->in[0], &st), *w = x ? ts_onnx_as_tensor(im, io->in[1], &st) : NULL, *b = NULL;
    if (!w) return st;
    if (io->n_in > 2 && io->in[2] && !(b = ts_onnx_as_tensor(im, io->in[2], &st))) return st;
    if (!b) { /* B is optional (a layer norm without bias): zeros of the scale's shape */
        int64_t n = ts_shape_numel(&w->shape);
        if ((st = ts_const_charge((uint64_t)(n ? n : 1) * 4))) return ts_onnx_fold_result(im, st);
        float *zeros = ts_calloc((size_t)(n ? n : 1), sizeof *zeros);
        char *name = zeros ? ts_graph_op_output_name(im->g, "ZeroBias") : NULL;
        ts_array za = ts_array_f32(zeros, w->shape.ndim, w->shape.d);
        b = name ? ts_constant(im->g, name, &za) : NULL;
        ts_free(name);
        ts_free(zeros);
        if (!b) return ts_graph_status(im->g) ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
    }
    int axis;
    if ((st = ts_onnx_attr_axis(im, "axis", -1, x->shape.ndim, false, &axis))) return st;
    float eps = (float)ts_onnx_attr_f(im, "epsilon", 1e-5);
    st = ts_onnx_built(im, ts_layer_norm(im->g, x, w, b, x->shape.ndim - axis, eps), &io->out[0]);
    /* the optional Mean and InvStdDev outputs ([d0..d(axis-1), 1, ...]),
     * when read: from graph ops, 1 / sqrt(mean((x - mean)^2) + eps) */
    bool stats = false;
    for (int i = 1; i < io->n_out; i++) stats = stats || (im->node->output[i] && *im->node->output[i]);
    if (st || !stats) return st;
    int axes[TS_MAX_DIMS], n = 0;
    for (int d = axis; d < x->shape.ndim; d++) axes[n++] = d;
    ts_tensor *mean = ts_reduce_mean(im->g, x, n, axes, 1), *dev = mean ? ts_sub(im->g, x, mean) : NULL;
    ts_tensor *var = dev ? ts_reduce_mean(im->g, ts_mul(im->g, dev, dev), n, axes, 1) : NULL;
    ts_shape ts_onnx_scalar = {0};
    ts_tensor *inv = var ? ts_pow(im->g, ts_add(im->g, var, ts_onnx_f32_constant(im, "epsilon", &ts_onnx_scalar, &eps)), -0.5f) : NULL;
    if (!(st = ts_onnx_built(im, mean, &io->out[1])) && io->n_out > 2) st = ts_onnx_built(im, inv, &io->out[2]);
    return st;
}

/* An f32 graph constant [n] named `<scope>/<what>:<k>`: value i is
 * src's value i / every (a constant's values spread, each `every` times),
 * or v where src is NULL. */
ts_tensor *ts_onnx_spread_constant(importer *im, const char *what, int64_t n, const value *src, int64_t every, float v) {
    ts_status st = ts_const_charge((uint64_t)n * 4);
    if (st) {
        ts_onnx_fold_result(im, st);
        return NULL;
    }
    float *f = ts_malloc((size_t)n * sizeof *f);
    char *name = f ? ts_graph_op_output_name(im->g, what) : NULL;
    for (int64_t i = 0; name && i < n; i++) f[i] = src ? (float)src->c.v[i / every] : v;
    ts_tensor *t = name ? ts_onnx_f32_constant(im, name, &(ts_shape){.ndim = 1, .d = {n}}, f) : NULL;
    ts_free(name);
    ts_free(f);
    return t;
}

/* An f32 graph constant of n copies of v, named `<scope>/<what>:<k>`. */
static ts_tensor *filled_constant(importer *im, const char *what, int64_t n, float v) { return ts_onnx_spread_constant(im, what, n, NULL, 1, v); }

/* Whether v is a constant (not a parameter) whose every value is x. */
bool ts_onnx_const_filled(const value *v, double x) {
    if (!is_const(v) || v->param || !v->c.v) return false;
    for (int64_t i = 0, n = ts_shape_numel(&v->c.shape); i < n; i++)
        if (v->c.v[i] != x) return false;
    return true;
}

/* x [N,C,d1..] normalised over each sample's G groups of channels, then *
 * scale + B: per channel ([C]: one GroupNorm op), or per group ([G],
 * GroupNormalization before opset 21: a constant scale and B are spread
 * over each group's channels into that op; else the layer norm of x as
 * [N,G,L] over L, then the affine per group, where a constant unit scale
 * and zero B add no op). */
static ts_status group_norm(importer *im, node_io *io, int64_t G, bool per_group) {
    ts_status st = TS_OK;
    ts_tensor *x = ts_onnx_as_tensor(im, io->in[0], &st);
    if (!x) return st;
    const ts_shape *xs = &x->shape, *ss = shape_of(io->in[1]), *bs = shape_of(io->in[2]);
    char a[96], c[96], d[96];
    int64_t n_affine = per_group ? G : xs->ndim >= 3 ? xs->d[1] : 0;
    if (xs->ndim < 3 || ss->ndim != 1 || bs->ndim != 1 || ss->d[0] != n_affine || bs->d[0] != n_affine)
        return ts_onnx_node_error(im, TS_ERR_SHAPE, "normalises x [N,C,d1,...] with scale and B of [%s]; got %s, %s and %s", per_group ? "num_groups" : "C",
                                  ts_shape_str(xs, a, sizeof a), ts_shape_str(ss, c, sizeof c), ts_shape_str(bs, d, sizeof d));
    if (G < 1 || xs->d[1] % G)
        return ts_onnx_node_error(im, TS_ERR_SHAPE, "num_groups %lld must divide the %lld channels of %s", (long long)G, (long long)xs->d[1],
                                  ts_shape_str(xs, a, sizeof a));
    bool scaled = !ts_onnx_const_filled(io->in[1], 1.0), shifted = !ts_onnx_const_filled(io->in[2], 0.0);
    bool spread = per_group && (!scaled || (is_const(io->in[1]) && !io->in[1]->param)) &&
                  (!shifted || (is_const(io->in[2]) && !io->in[2]->param)); /* constants over each group's channels */
    ts_tensor *s = scaled && !spread ? as_f32(im, io->in[1], &st) : NULL, *b = shifted && !spread && !st ? as_f32(im, io->in[2], &st) : NULL;
    if (st) return st;
    float eps = (float)ts_onnx_attr_f(im, "epsilon", 1e-5);
    int64_t C = xs->d[1], Cg = C / G;
    if (!per_group || spread) {
        if (spread || !s) s = ts_onnx_spread_constant(im, "ScalePerChannel", C, scaled ? io->in[1] : NULL, Cg, 1.0f);
        if (s && (spread || !b)) b = ts_onnx_spread_constant(im, "BiasPerChannel", C, shifted ? io->in[2] : NULL, Cg, 0.0f);
        if (!b) return ts_graph_status(im->g) ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
        return ts_onnx_built(im, ts_group_norm(im->g, x, s, b, (int)G, eps), &io->out[0]);
    }
    int64_t L = ts_shape_numel(xs) / (xs->d[0] * G);
    ts_tensor *ones = filled_constant(im, "Ones", L, 1.0f), *zeros = ones ? filled_constant(im, "Zeros", L, 0.0f) : NULL;
    if (!zeros) return ts_graph_status(im->g) ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
    ts_tensor *y = ts_reshape(im->g, x, 3, (int64_t[]){xs->d[0], G, L});
    y = ts_layer_norm(im->g, y, ones, zeros, 1, eps);
    const ts_shape cs = {.ndim = 2, .d = {n_affine, 1}}; /* [G,1] against [N,G,L] */
    if (scaled) y = ts_mul(im->g, y, ts_reshape(im->g, s, cs.ndim, cs.d));
    if (shifted) y = ts_add(im->g, y, ts_reshape(im->g, b, cs.ndim, cs.d));
    y = ts_reshape(im->g, y, xs->ndim, xs->d);
    return ts_onnx_built(im, y, &io->out[0]);
}

/* InstanceNormalization: a group norm with a group per channel. nn.GroupNorm's
 * TorchScript export (a Reshape to [N,G,-1] around one, then Mul and Add by
 * the module's weight and bias) is then a group norm. */
ts_status ts_onnx_op_instance_norm(importer *im, node_io *io) {
    const ts_shape *xs = shape_of(io->in[0]);
    return group_norm(im, io, xs->ndim >= 2 ? xs->d[1] : 1, false);
}

/* GroupNormalization: scale and bias per group before opset 21 (which
 * deprecated that form), per channel from it; statistics in float. */
ts_status ts_onnx_op_group_norm(importer *im, node_io *io) {
    int64_t G;
    int stash;
    ts_status st = ts_onnx_attr_int(im, "num_groups", 0, 1, INT32_MAX, &G);
    if (!st) st = ts_onnx_attr_int32(im, "stash_type", 1, INT32_MIN, INT32_MAX, &stash);
    if (st) return st;
    if (!ts_onnx_attr(im, "num_groups")) return ts_onnx_node_error(im, TS_ERR_FORMAT, "its attribute 'num_groups' is missing");
    if (stash != 1)
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "stash_type %d (statistics computed in %s) is not available; stash_type 1 (float) is", stash,
                                  ts_onnx_dtype_name(stash));
    return group_norm(im, io, G, !since(im, 21));
}

/* LpNormalization: x / ||x||_p along `axis` (p 1 or 2; no epsilon, as
 * ONNX's), 0 where the norm is 0 (the norm + 1 there: x is all zeros). */
ts_status ts_onnx_op_lp_norm(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = as_f32(im, io->in[0], &st);
    int axis, p;
    if (!x || (st = ts_onnx_attr_axis(im, "axis", -1, x->shape.ndim, false, &axis)) || (st = ts_onnx_attr_int32(im, "p", 2, INT32_MIN, INT32_MAX, &p))) return st;
    if (p != 1 && p != 2) return ts_onnx_node_error(im, TS_ERR_FORMAT, "attribute 'p' is %d; LpNormalization takes 1 or 2", p);
    ts_graph *g = im->g;
    ts_tensor *norm = p == 1 ? ts_reduce_sum(g, ts_abs(g, x), 1, &axis, 1) : ts_sqrt(g, ts_reduce_sum(g, ts_mul(g, x, x), 1, &axis, 1));
    norm = ts_add(g, norm, num(g, ts_binary(g, "Equal", norm, ts_onnx_scalar_constant(im, "Zero", 0.0f))));
    return ts_onnx_built(im, ts_div(g, x, norm), &io->out[0]);
}

/* MeanVarianceNormalization: (x - E x) / (sqrt(E x^2 - (E x)^2) + 1e-9)
 * over `axes` (default [0,2,3]), ONNX's function body. */
ts_status ts_onnx_op_mvn(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = as_f32(im, io->in[0], &st);
    int64_t axes[TS_MAX_DIMS];
    int n = -1, ax[TS_MAX_DIMS];
    if (!x || (st = ts_onnx_attr_int_list(im, "axes", -TS_MAX_DIMS, TS_MAX_DIMS, axes, TS_MAX_DIMS, &n))) return st;
    if (n < 0) {
        static const int64_t def[3] = {0, 2, 3};
        n = 3;
        memcpy(axes, def, sizeof def);
    }
    for (int i = 0; i < n; i++) {
        if (axes[i] < -x->shape.ndim || axes[i] >= x->shape.ndim)
            return ts_onnx_node_error(im, TS_ERR_FORMAT, "axis %lld is out of range for %d dimensions", (long long)axes[i], x->shape.ndim);
        ax[i] = norm_axis(axes[i], x->shape.ndim);
    }
    ts_graph *g = im->g;
    ts_tensor *mean = ts_reduce_mean(g, x, n, ax, 1);
    ts_tensor *var = ts_sub(g, ts_reduce_mean(g, ts_mul(g, x, x), n, ax, 1), ts_mul(g, mean, mean));
    return ts_onnx_built(im, ts_div(g, ts_sub(g, x, mean), ts_add(g, ts_sqrt(g, var), ts_onnx_scalar_constant(im, "Epsilon", 1e-9f))), &io->out[0]);
}

/* RMSNormalization (opset 23): x / sqrt(mean(x^2) + epsilon) * scale,
 * the mean over the axes from `axis` on; statistics in float. Over the
 * last axis with a scale of its D values ([D], or [1,..,D]): one RMSNorm
 * op; else the ops it is made of. */
ts_status ts_onnx_op_rms_norm(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = as_f32(im, io->in[0], &st), *s = x ? as_f32(im, io->in[1], &st) : NULL;
    int axis, stash, ax[TS_MAX_DIMS], n = 0;
    if (!s || (st = ts_onnx_attr_axis(im, "axis", -1, x->shape.ndim, false, &axis)) || (st = ts_onnx_attr_int32(im, "stash_type", 1, INT32_MIN, INT32_MAX, &stash)))
        return st;
    if (stash != 1)
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "stash_type %d (statistics computed in %s) is not available; stash_type 1 (float) is", stash,
                                  ts_onnx_dtype_name(stash));
    int64_t D = x->shape.d[x->shape.ndim - 1];
    float eps = (float)ts_onnx_attr_f(im, "epsilon", 1e-5);
    if (axis == x->shape.ndim - 1 && s->shape.ndim >= 1 && s->shape.ndim <= x->shape.ndim && s->shape.d[s->shape.ndim - 1] == D &&
        ts_shape_numel(&s->shape) == D && eps >= 0.0f)
        return ts_onnx_built(im, ts_rms_norm(im->g, x, s->shape.ndim == 1 ? s : ts_reshape(im->g, s, 1, &D), eps), &io->out[0]);
    for (int d = axis; d < x->shape.ndim; d++) ax[n++] = d;
    ts_graph *g = im->g;
    ts_tensor *ms = ts_reduce_mean(g, ts_mul(g, x, x), n, ax, 1);
    ts_tensor *inv = ts_pow(g, ts_add(g, ms, ts_onnx_scalar_constant(im, "Epsilon", eps)), -0.5f);
    return ts_onnx_built(im, ts_mul(g, ts_mul(g, x, inv), s), &io->out[0]);
}

/* LRN over the channels of [N,C,...]: x / (bias + alpha / size * s)^beta,
 * s the sum of x^2 over the `size` channels around each (zeros past the
 * ends): `size` slices of the padded squares added. */
ts_status ts_onnx_op_lrn(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = as_f32(im, io->in[0], &st);
    int64_t size;
    if (!x || (st = ts_onnx_attr_int(im, "size", 0, 1, 4096, &size))) return st;
    if (!ts_onnx_attr(im, "size")) return ts_onnx_node_error(im, TS_ERR_FORMAT, "attribute 'size' is required");
    if (x->shape.ndim < 3) return ts_onnx_node_error(im, TS_ERR_SHAPE, "takes an input [N,C,d1,...] of at least 3 dimensions; it has %d", x->shape.ndim);
    ts_graph *g = im->g;
    int r = x->shape.ndim;
    int64_t C = x->shape.d[1], pads[2 * TS_MAX_DIMS] = {0};
    pads[1] = (size - 1) / 2, pads[r + 1] = size - 1 - (size - 1) / 2;
    ts_tensor *sq = ts_pad(g, ts_mul(g, x, x), pads, TS_PAD_CONSTANT, 0.0f), *sum = NULL;
    for (int64_t k = 0; sq && k < size; k++) {
        ts_tensor *part = ts_slice(g, sq, 1, k, C);
        sum = sum ? ts_add(g, sum, part) : part;
    }
    double alpha = ts_onnx_attr_f(im, "alpha", 1e-4), beta = ts_onnx_attr_f(im, "beta", 0.75), bias = ts_onnx_attr_f(im, "bias", 1.0);
    ts_tensor *den = sum ? ts_add(g, ts_scale(g, sum, (float)(alpha / (double)size)), ts_onnx_scalar_constant(im, "Bias", (float)bias)) : NULL;
    return ts_onnx_built(im, den ? ts_mul(g, x, ts_pow(g, den, (float)-beta)) : NULL, &io->out[0]);
}
