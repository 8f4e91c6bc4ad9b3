/* test_ops_grad.c -- every op's gradient against central finite differences.
 *
 * Method: for an op y = op(params...), the graph ends in the scalar loss
 * L = sum(y * R) with R a fixed random input, so dL/dparam is the op's
 * vector-Jacobian product with R. A training model with SGD lr = 0 (the
 * parameters never move) anchors Gradient___<param>; one run gives the
 * analytic gradient. Then every element of every parameter is moved by
 * +-eps with ts_param_set and the same model is run again reading the
 * anchored loss: fd = (L(x+eps) - L(x-eps)) / (2 eps), differenced in
 * double. An element passes when |fd - analytic| <= atol + rtol * max(|fd|,
 * |analytic|). The loss itself is float32, so its rounding (~1e-7 |L|) is
 * divided by 2 eps: ops linear in each parameter (matmul, add, sub, mul,
 * scale, reshape, sum, mean, nll_loss) have no truncation error and use a
 * large eps (0.1); smooth nonlinear ops (log, softmax family, cross entropy)
 * use eps 1e-2..1e-3 where the O(eps^2) truncation stays under rtol.
 *
 * The relu kink: sampled relu inputs are kept at |x| >= 0.1 > eps, so a
 * difference never straddles 0. The kink is checked apart: at exactly 0 (and
 * -0) the gradient must be the subgradient 0, as PyTorch's; just above it
 * (1e-30, 1e-7) it must be R exactly, just below 0 exactly.
 *
 * Convolutional ops: conv2d over strides, asymmetric and "same" padding,
 * dilation, groups and depthwise; pooling (max over values spaced 0.05
 * apart, so eps 0.02 never changes a window's winner; its ties and NaN are
 * checked exactly apart, as relu's kink); batch norm with batch statistics
 * (2-D and 4-D) and frozen (running statistics); tanh and sigmoid.
 *
 * One line per op with max abs/rel error. Gradients of activations are
 * checked on one chain (Gradient___fc1/Add:0, Gradient___Relu:0) by
 * differencing a copy of the chain that starts from that activation as a
 * parameter. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tensorscope.h"

#define MAX_PARAMS 8

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static double urand(void) /* [0, 1) */
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * 0x1.0p-53;
}

/* Parameter value distributions. */
typedef enum dist { D_SYM = 0, D_AWAY, D_POS } dist;

static float sample(dist d)
{
    switch (d) {
    case D_AWAY: /* |x| in [0.1, 1], either sign: away from relu's kink */
        return (float)((0.1 + 0.9 * urand()) * (urand() < 0.5 ? -1.0 : 1.0));
    case D_POS: /* [0.5, 2]: log's domain, well inside */
        return (float)(0.5 + 1.5 * urand());
    default:
        return (float)(2.0 * urand() - 1.0);
    }
}

static void fill(ts_tensor *p, dist d)
{
    ts_array info;
    if (!p || ts_tensor_info(p, &info) != TS_OK || !info.data)
        return;
    int64_t n = ts_array_numel(&info);
    float *tmp = malloc(sizeof(float) * (size_t)n);
    if (!tmp)
        return;
    for (int64_t i = 0; i < n; i++)
        tmp[i] = sample(d);
    ts_array a = ts_array_f32(tmp, info.ndim, info.shape);
    ts_param_set(p, &a);
    free(tmp);
}

static ts_tensor *rparam(ts_graph *g, const char *name, int ndim, const int64_t *shape, dist d)
{
    ts_tensor *p = ts_param(g, name, ndim, shape);
    fill(p, d);
    return p;
}

/* ---------------------------------------------------------------- harness */

typedef struct op_case {
    const char *label;
    ts_tensor *(*build)(ts_graph *g, const struct op_case *c);
    double eps, rtol, atol;
    int iarg;            /* dim / start_dim / variant */
    int ndim_b;          /* broadcast operand's rank, or -1 for "same tensor" */
    int64_t shape_b[4];
} op_case;

enum { NB = 4, NC = 5 };
static const int32_t LABELS[NB] = {0, 3, 4, 1};

typedef struct param_ref {
    ts_tensor *t;
    char name[128];
    int64_t n;
    ts_array info;
    float *grad; /* analytic, copied after the first run */
} param_ref;

static int find_params(ts_graph *g, param_ref *ps)
{
    int n = 0;
    for (size_t i = 0; i < ts_graph_tensor_count(g) && n < MAX_PARAMS; i++) {
        ts_tensor *t = ts_graph_tensor_at(g, i);
        ts_array info;
        if (ts_tensor_info(t, &info) != TS_OK || !info.data || ts_tensor_is_buffer(t) || info.dtype != TS_F32)
            continue; /* parameters expose values; buffers get no gradient; i32 constants (masks, indices) neither */
        ps[n].t = t;
        snprintf(ps[n].name, sizeof ps[n].name, "%s", ts_tensor_name(t));
        ps[n].info = info;
        ps[n].n = ts_array_numel(&info);
        ps[n].grad = NULL;
        n++;
    }
    return n;
}

typedef struct loss_model {
    ts_graph *g;
    ts_model *m;
    ts_options *o;
    float *r;
    ts_array in[2];
    int n_in;
} loss_model;

static void loss_model_free(loss_model *lm)
{
    ts_model_free(lm->m);
    ts_options_free(lm->o);
    ts_graph_free(lm->g);
    free(lm->r);
    memset(lm, 0, sizeof *lm);
}

/* L = sum(y * R) named "loss", a training model with SGD lr 0 anchoring
 * Gradient___<p> for every parameter and every name in `extra`. */
static int loss_model_new(loss_model *lm, ts_graph *g, ts_tensor *y, const param_ref *ps, int np,
                          const char *const *extra, int n_extra, const char *label)
{
    memset(lm, 0, sizeof *lm);
    lm->g = g;
    ts_array yi;
    if (!y || ts_tensor_info(y, &yi) != TS_OK) {
        CHECK_OK(ts_graph_status(g), "%s: build", label);
        return 0;
    }
    int64_t rshape[TS_MAX_DIMS] = {1};
    int rnd = yi.ndim ? yi.ndim : 1;
    for (int i = 0; i < yi.ndim; i++)
        rshape[i] = yi.shape[i];
    ts_tensor *R = ts_input(g, "R", TS_F32, yi.ndim, yi.shape);
    ts_tensor *loss = ts_sum(g, ts_mul(g, y, R));
    if (!loss || ts_tensor_set_name(loss, "loss") != TS_OK) {
        CHECK_OK(ts_graph_status(g), "%s: loss", label);
        return 0;
    }
    int64_t nr = ts_array_numel(&yi);
    lm->r = malloc(sizeof(float) * (size_t)nr);
    for (int64_t i = 0; lm->r && i < nr; i++)
        lm->r[i] = (float)(2.0 * urand() - 1.0);
    lm->in[0] = ts_array_f32(lm->r, rnd, rshape);
    lm->n_in = 1;
    if (ts_graph_find(g, "labels")) {
        lm->in[1] = ts_array_i32((int32_t *)LABELS, 1, (int64_t[]){NB});
        lm->n_in = 2;
    }
    lm->o = ts_options_new();
    char name[160];
    for (int i = 0; i < np; i++) {
        snprintf(name, sizeof name, "Gradient___%s", ps[i].name);
        ts_options_anchor(lm->o, name, name, TS_OUTPUT_FINAL, 0);
    }
    for (int i = 0; i < n_extra; i++)
        ts_options_anchor(lm->o, extra[i], extra[i], TS_OUTPUT_FINAL, 0);
    ts_status st = ts_model_training(&lm->m, g, loss, lm->o, ts_sgd(0.0f, 0.0f, 0.0f));
    if (!st)
        st = ts_model_compile(lm->m);
    if (st) {
        CHECK_OK(st, "%s: compile", label);
        return 0;
    }
    return 1;
}

static int loss_run(loss_model *lm, double *loss)
{
    static const char *const names[2] = {"R", "labels"};
    ts_status st = ts_model_run(lm->m, names, lm->in, lm->n_in);
    ts_array a;
    if (!st)
        st = ts_model_anchored(lm->m, "loss", &a);
    if (st) {
        CHECK_OK(st, "run for the loss");
        return 0;
    }
    *loss = ((const float *)a.data)[0];
    return 1;
}

typedef struct err_stats {
    double max_abs, max_rel;
    int64_t n, bad;
} err_stats;

static void compare(err_stats *s, double fd, double an, double rtol, double atol)
{
    double d = fabs(fd - an), mag = fmax(fabs(fd), fabs(an));
    if (!(d <= atol + rtol * mag))
        s->bad++;
    if (d > s->max_abs)
        s->max_abs = d;
    if (mag > atol && d / mag > s->max_rel)
        s->max_rel = d / mag;
    s->n++;
}

/* Central differences over every element of every parameter in ps. */
static void fd_params(loss_model *lm, param_ref *ps, int np, double eps, double rtol, double atol,
                      err_stats *s)
{
    for (int i = 0; i < np; i++) {
        float *v = malloc(sizeof(float) * (size_t)ps[i].n);
        if (!v)
            return;
        memcpy(v, ps[i].info.data, sizeof(float) * (size_t)ps[i].n);
        ts_array a = ts_array_f32(v, ps[i].info.ndim, ps[i].info.shape);
        for (int64_t k = 0; k < ps[i].n; k++) {
            float x = v[k];
            double lp, lmn;
            v[k] = (float)(x + eps);
            double up = (double)v[k] - x;
            ts_param_set(ps[i].t, &a);
            int ok = loss_run(lm, &lp);
            v[k] = (float)(x - eps);
            double down = x - (double)v[k];
            ts_param_set(ps[i].t, &a);
            ok = ok && loss_run(lm, &lmn);
            v[k] = x;
            ts_param_set(ps[i].t, &a);
            if (!ok) {
                free(v);
                return;
            }
            compare(s, (lp - lmn) / (up + down), ps[i].grad[k], rtol, atol);
        }
        free(v);
    }
}

static int copy_grads(loss_model *lm, param_ref *ps, int np, const char *label)
{
    char name[160];
    for (int i = 0; i < np; i++) {
        ts_array a;
        snprintf(name, sizeof name, "Gradient___%s", ps[i].name);
        ts_status st = ts_model_anchored(lm->m, name, &a);
        if (st || ts_array_numel(&a) != ps[i].n) {
            CHECK(0, "%s: %s anchored with %lld elements: %s", label, name,
                  st ? -1LL : (long long)ts_array_numel(&a), st ? ts_last_error() : "count");
            return 0;
        }
        ps[i].grad = malloc(sizeof(float) * (size_t)ps[i].n);
        if (!ps[i].grad)
            return 0;
        memcpy(ps[i].grad, a.data, sizeof(float) * (size_t)ps[i].n);
    }
    return 1;
}

static void gradcheck(const op_case *c)
{
    ts_graph *g = ts_graph_new(7);
    ts_tensor *y = c->build(g, c);
    param_ref ps[MAX_PARAMS];
    int np = find_params(g, ps);
    loss_model lm = {.g = g};
    double l0;
    err_stats s = {0};
    if (loss_model_new(&lm, g, y, ps, np, NULL, 0, c->label) && loss_run(&lm, &l0) &&
        copy_grads(&lm, ps, np, c->label)) {
        fd_params(&lm, ps, np, c->eps, c->rtol, c->atol, &s);
        CHECK(s.bad == 0 && s.n > 0 && isfinite(l0),
              "%-28s %3lld elements, eps %-6g max_abs=%.3g max_rel=%.3g (rtol %g, atol %g)%s",
              c->label, (long long)s.n, c->eps, s.max_abs, s.max_rel, c->rtol, c->atol,
              s.bad ? " MISMATCH" : "");
    }
    for (int i = 0; i < np; i++)
        free(ps[i].grad);
    loss_model_free(&lm);
}

/* ------------------------------------------------------------ op builders */

static const int64_t S234[3] = {2, 3, 4};

static ts_tensor *b_matmul(ts_graph *g, const op_case *c)
{
    (void)c;
    ts_tensor *a = rparam(g, "a", 2, (int64_t[]){3, 4}, D_SYM);
    ts_tensor *b = rparam(g, "b", 2, (int64_t[]){4, 5}, D_SYM);
    return ts_matmul(g, a, b);
}

static ts_tensor *b_matmul_t(ts_graph *g, const op_case *c)
{
    (void)c;
    ts_tensor *a = rparam(g, "a", 2, (int64_t[]){3, 4}, D_SYM);
    ts_tensor *b = rparam(g, "b", 2, (int64_t[]){5, 4}, D_SYM);
    return ts_matmul_t(g, a, b);
}

static ts_tensor *b_linear(ts_graph *g, const op_case *c)
{
    (void)c;
    ts_tensor *x = rparam(g, "x", 2, (int64_t[]){3, 4}, D_SYM);
    ts_tensor *y = ts_linear(g, x, 5, "fc");
    fill(ts_graph_find(g, "fc.weight"), D_SYM);
    fill(ts_graph_find(g, "fc.bias"), D_SYM);
    return y;
}

/* add/sub/mul: iarg 0/1/2, b of rank ndim_b (shape_b) or a itself (-1) */
static ts_tensor *b_binary(ts_graph *g, const op_case *c)
{
    ts_tensor *a = rparam(g, "a", 3, S234, D_SYM);
    ts_tensor *b = c->ndim_b < 0 ? a : rparam(g, "b", c->ndim_b, c->shape_b, D_SYM);
    return c->iarg == 0 ? ts_add(g, a, b) : c->iarg == 1 ? ts_sub(g, a, b) : ts_mul(g, a, b);
}

static ts_tensor *b_scale(ts_graph *g, const op_case *c)
{
    (void)c;
    return ts_scale(g, rparam(g, "x", 3, S234, D_SYM), -1.7f);
}

static ts_tensor *b_relu(ts_graph *g, const op_case *c)
{
    (void)c;
    return ts_relu(g, rparam(g, "x", 3, S234, D_AWAY));
}

static ts_tensor *b_log(ts_graph *g, const op_case *c)
{
    (void)c;
    return ts_log(g, rparam(g, "x", 2, (int64_t[]){2, 3}, D_POS));
}

static ts_tensor *b_reshape(ts_graph *g, const op_case *c)
{
    ts_tensor *x = rparam(g, "x", 3, S234, D_SYM);
    if (c->iarg == 0)
        return ts_reshape(g, x, 2, (int64_t[]){4, -1});
    return ts_reshape(g, x, 1, (int64_t[]){24});
}

static ts_tensor *b_flatten(ts_graph *g, const op_case *c)
{
    return ts_flatten(g, rparam(g, "x", 3, S234, D_SYM), c->iarg);
}

static ts_tensor *b_log_softmax(ts_graph *g, const op_case *c)
{
    return ts_log_softmax(g, rparam(g, "x", 3, S234, D_SYM), c->iarg);
}

static ts_tensor *b_softmax(ts_graph *g, const op_case *c)
{
    return ts_softmax(g, rparam(g, "x", 3, S234, D_SYM), c->iarg);
}

static ts_tensor *labels_input(ts_graph *g)
{
    return ts_input(g, "labels", TS_I32, 1, (int64_t[]){NB});
}

static ts_tensor *b_nll(ts_graph *g, const op_case *c)
{
    (void)c;
    ts_tensor *lp = rparam(g, "logp", 2, (int64_t[]){NB, NC}, D_SYM);
    return ts_nll_loss(g, lp, labels_input(g));
}

static ts_tensor *b_nll_chain(ts_graph *g, const op_case *c)
{
    (void)c;
    ts_tensor *x = rparam(g, "logits", 2, (int64_t[]){NB, NC}, D_SYM);
    return ts_nll_loss(g, ts_log_softmax(g, x, 1), labels_input(g));
}

static ts_tensor *b_ce(ts_graph *g, const op_case *c)
{
    (void)c;
    ts_tensor *x = rparam(g, "logits", 2, (int64_t[]){NB, NC}, D_SYM);
    return ts_cross_entropy(g, x, labels_input(g));
}

static ts_tensor *b_sum(ts_graph *g, const op_case *c)
{
    (void)c;
    return ts_sum(g, rparam(g, "x", 3, S234, D_SYM));
}

static ts_tensor *b_mean(ts_graph *g, const op_case *c)
{
    (void)c;
    return ts_mean(g, rparam(g, "x", 3, S234, D_SYM));
}

static ts_tensor *b_print(ts_graph *g, const op_case *c)
{
    ts_tensor *x = rparam(g, "x", 2, (int64_t[]){2, 3}, D_SYM);
    /* a print in the middle of a chain, its value used twice downstream */
    ts_tensor *p = ts_print(g, ts_scale(g, x, 2.0f), c->iarg ? "" : "probe");
    return ts_mul(g, p, p);
}


/* ------------------------------------------------ tensor/transformer ops */

static ts_tensor *iconst(ts_graph *g, const char *name, int ndim, const int64_t *shape, const int32_t *v)
{
    ts_array a = ts_array_i32((int32_t *)v, ndim, shape);
    return ts_constant(g, name, &a);
}

/* numpy broadcasting of both operands: iarg op (0 add, 1 sub, 2 mul, 3 div),
 * a [3,1] or [2,3,4] against b of shape_b */
static ts_tensor *b_bcast(ts_graph *g, const op_case *c)
{
    int a_small = c->ndim_b >= 3;
    ts_tensor *a = a_small ? rparam(g, "a", 2, (int64_t[]){3, 1}, D_SYM) : rparam(g, "a", 3, S234, D_SYM);
    ts_tensor *b = rparam(g, "b", c->ndim_b, c->shape_b, c->iarg == 3 ? D_POS : D_SYM);
    switch (c->iarg) {
    case 0: return ts_add(g, a, b);
    case 1: return ts_sub(g, a, b);
    case 2: return ts_mul(g, a, b);
    default: return ts_div(g, a, b);
    }
}

/* a [2,64] op b [64]: a row of b wide enough (>= 64) for ts_binary_backward's
 * column-split path; iarg as in b_bcast */
static ts_tensor *b_bcast_wide(ts_graph *g, const op_case *c)
{
    ts_tensor *a = rparam(g, "a", 2, (int64_t[]){2, 64}, D_SYM);
    ts_tensor *b = rparam(g, "b", 1, (int64_t[]){64}, c->iarg == 3 ? D_POS : D_SYM);
    switch (c->iarg) {
    case 0: return ts_add(g, a, b);
    case 1: return ts_sub(g, a, b);
    case 2: return ts_mul(g, a, b);
    default: return ts_div(g, a, b);
    }
}

/* iarg: 0 exp, 1 sqrt, 2 pow 3, 3 pow 0.5, 4 erf, 5 gelu, 6 gelu tanh, 7 abs, 8 silu */
static ts_tensor *b_unary_math(ts_graph *g, const op_case *c)
{
    dist d = c->iarg == 1 || c->iarg == 3 ? D_POS : D_SYM;
    ts_tensor *x = rparam(g, "x", 3, S234, d);
    switch (c->iarg) {
    case 0: return ts_exp(g, x);
    case 1: return ts_sqrt(g, x);
    case 2: return ts_pow(g, x, 3.0f);
    case 3: return ts_pow(g, x, 0.5f);
    case 4: return ts_erf(g, ts_scale(g, x, 2.0f));
    case 5: return ts_gelu(g, ts_scale(g, x, 3.0f), 0);
    case 7: return ts_abs(g, x);
    case 8: return ts_silu(g, ts_scale(g, x, 4.0f));
    default: return ts_gelu(g, ts_scale(g, x, 3.0f), 1);
    }
}

/* The differentiable ops of the unary family (ts_unary) with their ONNX
 * defaults; iarg indexes EW_UNARY. The input is scaled by `scale` so the
 * piecewise ops meet every piece (HardSwish's and HardSigmoid's clamps);
 * x stays at |x| >= 0.1 so no difference straddles a kink at 0. */
static const struct {
    const char *op;
    float alpha, beta, scale;
} EW_UNARY[] = {
    {"Sin", 0, 0, 3.0f},        {"Cos", 0, 0, 3.0f},      {"HardSwish", 0, 0, 4.5f},      {"HardSigmoid", 0.2f, 0.5f, 4.0f},
    {"LeakyRelu", 0.01f, 0, 2.0f}, {"Elu", 0.7f, 0, 2.0f}, {"Selu", 1.6732632f, 1.0507010f, 2.0f}, {"Softplus", 0, 0, 5.0f},
    {"Tan", 0, 0, 1.4f},        {"Asin", 0, 0, 0.9f},     {"Acos", 0, 0, 0.9f},          {"Atan", 0, 0, 3.0f},
    {"Sinh", 0, 0, 2.0f},       {"Cosh", 0, 0, 2.0f},     {"Asinh", 0, 0, 3.0f},         {"Acosh", 0, 0, 1.0f},
    {"Atanh", 0, 0, 0.9f},
};

static ts_tensor *b_ew_unary(ts_graph *g, const op_case *c)
{
    ts_tensor *x = rparam(g, "x", 3, S234, D_AWAY);
    if (strcmp(EW_UNARY[c->iarg].op, "Acosh") == 0) /* its domain: x >= 1, here e^|x| in [1.1, 2.7] */
        x = ts_exp(g, ts_abs(g, x));
    return ts_unary(g, EW_UNARY[c->iarg].op, ts_scale(g, x, EW_UNARY[c->iarg].scale), EW_UNARY[c->iarg].alpha,
                    EW_UNARY[c->iarg].beta);
}

/* The differentiable ops of the binary family (ts_binary), a [2,3,4] by b
 * of shape_b (broadcast, its gradient summed): iarg 0 Pow (a in [0.5,2]),
 * 1 Max, 2 Min, 3 Mod, 4 FMod (a in [-3,3), b in [0.5,2]). */
static ts_tensor *b_ew_binary(ts_graph *g, const op_case *c)
{
    static const char *const ops[] = {"Pow", "Max", "Min", "Mod", "FMod"};
    ts_tensor *a = rparam(g, "a", 3, S234, c->iarg == 0 ? D_POS : D_SYM);
    ts_tensor *b = rparam(g, "b", c->ndim_b, c->shape_b, c->iarg >= 3 ? D_POS : D_SYM);
    if (c->iarg >= 3)
        a = ts_scale(g, a, 3.0f);
    return ts_binary(g, ops[c->iarg], a, b);
}

static const int32_t IDX6[6] = {4, 0, 2, 4, 4, 1}; /* repeats: the scatter-add sums them */

/* iarg 0: embedding [5,3] gathered by [2,3]; 1: tied, the same weight used
 * again as the output projection (one parameter, one gradient) */
static ts_tensor *b_embedding(ts_graph *g, const op_case *c)
{
    ts_tensor *w = rparam(g, "wte.weight", 2, (int64_t[]){5, 3}, D_SYM);
    ts_tensor *idx = iconst(g, "idx", 2, (int64_t[]){2, 3}, IDX6);
    ts_tensor *e = ts_embedding(g, w, idx);
    if (c->iarg == 0)
        return e;
    return ts_matmul_t(g, ts_reshape(g, e, 2, (int64_t[]){6, 3}), w);
}

/* gather x [2,5,3] along iarg (0, 1 or 2) by [2,2] constant indices with
 * repeats and negative ones (the scatter-add sums them) */
static ts_tensor *b_gather(ts_graph *g, const op_case *c)
{
    ts_tensor *x = rparam(g, "x", 3, (int64_t[]){2, 5, 3}, D_SYM);
    static const int32_t idx[3][4] = {{1, -1, 0, 1}, {4, -1, 0, 2}, {2, -3, 2, 0}};
    return ts_gather(g, x, iconst(g, "idx", 2, (int64_t[]){2, 2}, idx[c->iarg]), c->iarg);
}

/* gather_elements of x [3,4] along iarg by [3,5] (axis 1) or [5,2]
 * (axis 0) constant indices with repeats and negative ones */
static ts_tensor *b_gather_elements(ts_graph *g, const op_case *c)
{
    ts_tensor *x = rparam(g, "x", 2, (int64_t[]){3, 4}, D_SYM);
    static const int32_t i1[15] = {0, 3, 3, -1, 1, 2, 2, 0, -4, 1, 1, 1, 1, 3, 0};
    static const int32_t i0[10] = {0, 2, -1, 1, 1, 1, -3, 0, 2, 2};
    ts_tensor *idx = c->iarg ? iconst(g, "idx", 2, (int64_t[]){3, 5}, i1) : iconst(g, "idx", 2, (int64_t[]){5, 2}, i0);
    return ts_gather_elements(g, x, idx, c->iarg);
}

/* iarg: normalised trailing dims (1 or 2) */
static ts_tensor *b_layer_norm(ts_graph *g, const op_case *c)
{
    ts_tensor *x = rparam(g, "x", 3, S234, D_SYM);
    const int64_t *ws = c->iarg == 1 ? (int64_t[]){4} : (int64_t[]){3, 4};
    ts_tensor *w = rparam(g, "ln.weight", c->iarg, ws, D_SYM);
    ts_tensor *b = rparam(g, "ln.bias", c->iarg, ws, D_SYM);
    return ts_layer_norm(g, x, w, b, c->iarg, 1e-5f);
}

/* iarg: 1 with a weight, 0 without */
static ts_tensor *b_rms_norm(ts_graph *g, const op_case *c)
{
    ts_tensor *x = rparam(g, "x", 3, S234, D_SYM);
    ts_tensor *w = c->iarg ? rparam(g, "rms.weight", 1, (int64_t[]){4}, D_SYM) : NULL;
    return ts_rms_norm(g, x, w, 1e-5f);
}

/* iarg bits: 1 a transposed, 2 b transposed, 4 broadcast batch dims
 * ([2,1,3,4] x [3,4,5]) */
static ts_tensor *b_bmm(ts_graph *g, const op_case *c)
{
    int ta = c->iarg & 1, tb = (c->iarg >> 1) & 1, bc = c->iarg & 4;
    int64_t sa[4], sb[4];
    int na, nb;
    if (bc) {
        na = 4, sa[0] = 2, sa[1] = 1, sa[2] = ta ? 4 : 3, sa[3] = ta ? 3 : 4;
        nb = 3, sb[0] = 3, sb[1] = tb ? 5 : 4, sb[2] = tb ? 4 : 5;
    } else {
        na = 3, sa[0] = 2, sa[1] = ta ? 4 : 3, sa[2] = ta ? 3 : 4;
        nb = 3, sb[0] = 2, sb[1] = tb ? 5 : 4, sb[2] = tb ? 4 : 5;
    }
    ts_tensor *a = rparam(g, "a", na, sa, D_SYM);
    ts_tensor *b = rparam(g, "b", nb, sb, D_SYM);
    return ts_matmul_batched(g, a, b, ta, tb);
}

/* Pad of x [2,3,4] in mode iarg (ts_pad_mode); ndim_b 1: pads wider than
 * the dims (reflected and wrapped more than once), 2: a crop on one side */
static ts_tensor *b_pad(ts_graph *g, const op_case *c)
{
    ts_tensor *x = rparam(g, "x", 3, S234, D_SYM);
    static const int64_t pads[3][6] = {{0, 2, 1, 1, 1, 3}, {1, 5, 7, 2, 4, 9}, {0, -1, 2, 1, 3, -2}};
    return ts_pad(g, x, pads[c->ndim_b], (ts_pad_mode)c->iarg, 0.75f);
}

/* iarg 0: permute (2,0,1); 1: transpose(-1,-2) then a view; 2: slice; 3:
 * split into 2 and concat reversed; 4: concat of two parameters on dim 2 */
static ts_tensor *b_layout(ts_graph *g, const op_case *c)
{
    ts_tensor *x = rparam(g, "x", 3, S234, D_SYM);
    switch (c->iarg) {
    case 0: return ts_permute(g, x, (const int[]){2, 0, 1});
    case 1: return ts_reshape(g, ts_transpose(g, x, -1, -2), 2, (int64_t[]){8, 3});
    case 2: return ts_slice(g, x, 1, 1, 2);
    case 3: {
        ts_tensor *p[2];
        if (ts_split(g, x, -1, 2, p))
            return NULL;
        return ts_concat(g, (ts_tensor *[]){p[1], p[0]}, 2, -1);
    }
    default: {
        ts_tensor *y = rparam(g, "y", 3, (int64_t[]){2, 3, 2}, D_SYM);
        return ts_concat(g, (ts_tensor *[]){x, y}, 2, 2);
    }
    }
}

/* a causal mask [4,4] (1 above the diagonal); row 3 of the second variant
 * fully masked */
static const int32_t CAUSAL[16] = {0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0};
static const int32_t CAUSAL_FULL_ROW[16] = {0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1};

/* iarg 0: softmax(masked_fill(x, causal, -inf)) over x [2,4,4]; 1: same
 * with a fully masked row; 2: log_softmax of the causal case on rows that
 * keep something (masked entries are -inf, so read through a where); 3:
 * where(cond [4,1], a [2,4,4], b [4]); 4: the same with the f32 condition
 * Greater(s, 0) of a parameter s [4,1] (no gradient reaches s: its
 * differences are 0 while |s| >= 0.1 > eps) */
static ts_tensor *b_masked(ts_graph *g, const op_case *c)
{
    ts_tensor *x = rparam(g, "x", 3, (int64_t[]){2, 4, 4}, D_SYM);
    if (c->iarg >= 3) {
        ts_tensor *cond = c->iarg == 3 ? iconst(g, "cond", 2, (int64_t[]){4, 1}, (const int32_t[]){1, 0, 0, 1})
                                       : ts_binary(g, "Greater", rparam(g, "s", 2, (int64_t[]){4, 1}, D_AWAY),
                                                   ts_scale(g, rparam(g, "s0", 0, NULL, D_POS), 0.0f));
        ts_tensor *b = rparam(g, "b", 1, (int64_t[]){4}, D_SYM);
        return ts_where(g, cond, x, b);
    }
    ts_tensor *m = iconst(g, "mask", 2, (int64_t[]){4, 4}, c->iarg == 1 ? CAUSAL_FULL_ROW : CAUSAL);
    ts_tensor *f = ts_masked_fill(g, x, m, -INFINITY);
    if (c->iarg < 2)
        return ts_softmax(g, f, -1);
    ts_tensor *zero = ts_param(g, "zero", 0, NULL); /* 0; a parameter, so its gradient is checked too */
    return ts_where(g, m, zero, ts_log_softmax(g, f, -1));
}

/* iarg: 0 sum, 1 mean, 2 max over axes (0, 2); ndim_b: keepdim */
static ts_tensor *b_reduce(ts_graph *g, const op_case *c)
{
    ts_tensor *x = rparam(g, "x", 3, S234, D_SYM);
    const int axes[2] = {0, -1};
    if (c->iarg == 0)
        return ts_reduce_sum(g, x, 2, axes, c->ndim_b);
    if (c->iarg == 1)
        return ts_reduce_mean(g, x, 2, axes, c->ndim_b);
    return ts_reduce_max(g, x, 1, (const int[]){1}, c->ndim_b);
}

/* cross entropy over [2,3,5] logits, labels [2,3] with two ignored (-100) */
static ts_tensor *b_ce_ignore(ts_graph *g, const op_case *c)
{
    (void)c;
    ts_tensor *x = rparam(g, "logits", 3, (int64_t[]){2, 3, 5}, D_SYM);
    ts_tensor *y = iconst(g, "targets", 2, (int64_t[]){2, 3}, (const int32_t[]){1, -100, 4, 0, 2, -100});
    return ts_cross_entropy_ignore(g, x, y, -100);
}

/* ------------------------------------------------- convolutional networks */

/* conv2d variants by iarg: the input [2,C,H,W] and weight shapes and the
 * geometry, with bias when has_bias. */
typedef struct conv_variant {
    int64_t C, H, W, OC, KH, KW;
    ts_conv2d_params p;
    int has_bias;
} conv_variant;

static const conv_variant CONV_VARIANTS[] = {
    {1, 5, 5, 2, 3, 3, {0}, 1},                                         /* plain, odd sizes */
    {3, 7, 6, 4, 3, 2, {.stride_h = 2, .stride_w = 3}, 1},              /* stride > 1, non-square kernel */
    {2, 5, 6, 3, 3, 3, {.pad_top = 1, .pad_bottom = 2, .pad_left = 0, .pad_right = 1}, 0}, /* asymmetric padding, no bias */
    {2, 7, 7, 2, 3, 3, {.dilation_h = 2, .dilation_w = 2, .pad_top = 1, .pad_bottom = 1, .pad_left = 2, .pad_right = 2}, 1},
    {4, 5, 5, 6, 3, 3, {.groups = 2, .pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1}, 1}, /* groups */
    {3, 6, 5, 3, 3, 3, {.groups = 3, .stride_h = 2, .stride_w = 2, .pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1}, 1},
    {2, 5, 4, 3, 2, 4, {.same = 1}, 1},                                 /* "same", even kernel: extra padding bottom/right */
};

static ts_tensor *b_conv2d(ts_graph *g, const op_case *c)
{
    const conv_variant *v = &CONV_VARIANTS[c->iarg];
    int64_t G = v->p.groups ? v->p.groups : 1;
    ts_tensor *x = rparam(g, "x", 4, (int64_t[]){2, v->C, v->H, v->W}, D_SYM);
    ts_tensor *w = rparam(g, "w", 4, (int64_t[]){v->OC, v->C / G, v->KH, v->KW}, D_SYM);
    ts_tensor *b = v->has_bias ? rparam(g, "b", 1, (int64_t[]){v->OC}, D_SYM) : NULL;
    return ts_conv2d(g, x, w, b, &v->p);
}

/* conv_transpose2d variants by iarg: x [2,C,H,W], w [C,OC/groups,KH,KW]
 * and the geometry, with bias when has_bias. */
typedef struct convt_variant {
    int64_t C, H, W, OC, KH, KW;
    ts_conv_transpose2d_params p;
    int has_bias;
} convt_variant;

static const convt_variant CONVT_VARIANTS[] = {
    {2, 3, 4, 3, 3, 3, {0}, 1},                                                        /* plain */
    {2, 3, 3, 2, 3, 2, {.stride_h = 2, .stride_w = 3, .output_pad_h = 1, .output_pad_w = 2}, 1}, /* strides, output padding */
    {3, 4, 4, 2, 3, 3, {.pad_top = 1, .pad_bottom = 0, .pad_left = 2, .pad_right = 1, .stride_h = 2, .stride_w = 2}, 0},
    {2, 3, 3, 2, 2, 3, {.dilation_h = 2, .dilation_w = 3, .pad_top = 1, .pad_left = 1, .pad_bottom = 1, .pad_right = 1}, 1},
    {4, 3, 3, 6, 3, 3, {.groups = 2, .stride_h = 2, .stride_w = 2, .pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1}, 1},
    {2, 3, 3, 2, 2, 2, {.stride_h = 1, .stride_w = 1, .dilation_h = 2, .dilation_w = 2, .output_pad_h = 1, .output_pad_w = 1}, 1},
};

static ts_tensor *b_conv_transpose2d(ts_graph *g, const op_case *c)
{
    const convt_variant *v = &CONVT_VARIANTS[c->iarg];
    int64_t G = v->p.groups ? v->p.groups : 1;
    ts_tensor *x = rparam(g, "x", 4, (int64_t[]){2, v->C, v->H, v->W}, D_SYM);
    ts_tensor *w = rparam(g, "w", 4, (int64_t[]){v->C, v->OC / G, v->KH, v->KW}, D_SYM);
    ts_tensor *b = v->has_bias ? rparam(g, "b", 1, (int64_t[]){v->OC}, D_SYM) : NULL;
    return ts_conv_transpose2d(g, x, w, b, &v->p);
}

/* x [2,2,H,W] with distinct values 0.05 apart (a shuffled grid), so that a
 * difference of 0.02 never changes a window's winner. */
static ts_tensor *distinct_param(ts_graph *g, int64_t H, int64_t W)
{
    int64_t n = 4 * H * W;
    ts_tensor *x = ts_param(g, "x", 4, (int64_t[]){2, 2, H, W});
    float *v = malloc(sizeof(float) * (size_t)n);
    if (!v)
        return x;
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)(0.05 * (double)(i - n / 2));
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(urand() * (double)(i + 1));
        float t = v[i];
        v[i] = v[j], v[j] = t;
    }
    ts_array a = ts_array_f32(v, 4, (int64_t[]){2, 2, H, W});
    ts_param_set(x, &a);
    free(v);
    return x;
}

static const ts_pool2d_params POOL_VARIANTS[] = {
    {.kernel_h = 2, .kernel_w = 2},                                                          /* LeNet's */
    {.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1},
    {.kernel_h = 3, .kernel_w = 2, .stride_h = 1, .stride_w = 2, .pad_top = 0, .pad_bottom = 1, .pad_left = 1, .pad_right = 0},
    {.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 1, .pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1,
     .exclude_pad = 1},
    /* dilated 3x4 windows; ceil_mode adds a third column clipped to the input */
    {.kernel_h = 2, .kernel_w = 2, .stride_h = 1, .stride_w = 2, .dilation_h = 2, .dilation_w = 3, .ceil_mode = 1},
    /* padding past half the window, ceil_mode's last row partly beyond the
     * padded input: divided by the taps inside it (5), then inside the input */
    {.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 3, .pad_top = 2, .pad_bottom = 1, .pad_left = 2, .ceil_mode = 1},
    {.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 3, .pad_top = 2, .pad_bottom = 1, .pad_left = 2, .ceil_mode = 1,
     .exclude_pad = 1},
};

static ts_tensor *b_max_pool(ts_graph *g, const op_case *c)
{
    return ts_max_pool2d(g, distinct_param(g, 5, 7), &POOL_VARIANTS[c->iarg]);
}

static ts_tensor *b_avg_pool(ts_graph *g, const op_case *c)
{
    return ts_avg_pool2d(g, rparam(g, "x", 4, (int64_t[]){2, 2, 5, 7}, D_SYM), &POOL_VARIANTS[c->iarg]);
}

static ts_tensor *b_global_pool(ts_graph *g, const op_case *c)
{
    (void)c;
    return ts_global_avg_pool2d(g, rparam(g, "x", 4, (int64_t[]){2, 3, 3, 5}, D_SYM));
}

/* batch norm: iarg 0 = 4-D batch statistics, 1 = 2-D batch statistics,
 * 2 = 4-D frozen (running statistics, as in inference) */
static ts_tensor *b_batch_norm(ts_graph *g, const op_case *c)
{
    ts_tensor *x = c->iarg == 1 ? rparam(g, "x", 2, (int64_t[]){5, 3}, D_SYM) : rparam(g, "x", 4, (int64_t[]){3, 2, 3, 2}, D_SYM);
    int64_t C = c->iarg == 1 ? 3 : 2;
    ts_tensor *w = rparam(g, "bn.weight", 1, &C, D_AWAY), *b = rparam(g, "bn.bias", 1, &C, D_SYM);
    ts_tensor *rm = ts_buffer(g, "bn.running_mean", 1, &C), *rv = ts_buffer(g, "bn.running_var", 1, &C);
    fill(rm, D_SYM);
    fill(rv, D_POS);
    return ts_batch_norm(g, x, w, b, rm, rv, 1e-5f, 0.1f, c->iarg == 2);
}

static ts_tensor *b_tanh(ts_graph *g, const op_case *c)
{
    (void)c;
    return ts_tanh(g, rparam(g, "x", 3, S234, D_SYM));
}

static ts_tensor *b_sigmoid(ts_graph *g, const op_case *c)
{
    (void)c;
    ts_tensor *x = rparam(g, "x", 3, S234, D_SYM);
    return ts_sigmoid(g, ts_scale(g, x, 4.0f));
}

/* Max pooling's ties and NaN, as PyTorch's CPU kernel: the first maximum of
 * the window (row-major) takes the gradient; a NaN in the window makes the
 * output NaN. */
static void pool_ties(void)
{
    /* [1,1,4,4]: window (0,0) all 1; (0,1) 2 at (0,3) and (1,2); (1,0) NaN; (1,1) -inf and 5, 5 */
    const float xs[16] = {1, 1, 0, 2, 1, 1, 2, 0, 3, NAN, -INFINITY, 5, 0, 3, 5, 5};
    ts_graph *g = ts_graph_new(1);
    ts_tensor *x = ts_param(g, "x", 4, (int64_t[]){1, 1, 4, 4});
    ts_array xa = ts_array_f32((float *)xs, 4, (int64_t[]){1, 1, 4, 4});
    ts_param_set(x, &xa);
    ts_tensor *y = ts_max_pool2d(g, x, &(ts_pool2d_params){.kernel_h = 2, .kernel_w = 2});
    param_ref ps[MAX_PARAMS];
    int np = find_params(g, ps);
    loss_model lm = {.g = g};
    const char *extra[1] = {"MaxPool2d:0"};
    double l0;
    if (loss_model_new(&lm, g, y, ps, np, extra, 1, "pool ties") && loss_run(&lm, &l0) && copy_grads(&lm, ps, np, "pool ties")) {
        ts_array ya;
        ts_model_anchored(lm.m, "MaxPool2d:0", &ya);
        const float *yv = ya.data;
        CHECK(yv[0] == 1 && yv[1] == 2 && isnan(yv[2]) && yv[3] == 5, "max_pool2d ties and NaN: outputs %g %g %g %g (want 1 2 nan 5)",
              (double)yv[0], (double)yv[1], (double)yv[2], (double)yv[3]);
        /* winners: (0,0), (0,3), the NaN at (2,1), (2,3) */
        float want[16] = {0};
        want[0] = lm.r[0], want[3] = lm.r[1], want[9] = lm.r[2], want[11] = lm.r[3];
        int exact = 1;
        for (int i = 0; i < 16; i++)
            exact = exact && ps[0].grad[i] == want[i];
        CHECK(exact, "max_pool2d ties: the gradient goes to the first maximum of each window (row-major), to the NaN in a window with one");
    }
    free(ps[0].grad);
    loss_model_free(&lm);
}

/* ------------------------------------------------------------ print capture */

typedef struct log_capture {
    int values, gradients, grad_default;
} log_capture;

static void capture_log(void *user, int level, const char *msg)
{
    log_capture *c = user;
    (void)level;
    if (strncmp(msg, "probe: ", 7) == 0)
        c->values++;
    if (strncmp(msg, "probe_gradient: ", 16) == 0)
        c->gradients++;
    if (strncmp(msg, "Gradient___Print:0: ", 20) == 0)
        c->grad_default++;
}

/* ---------------------------------------------------------- relu's kink */

static void relu_kink(void)
{
    const float xs[8] = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-7f, -1e-7f, 0.5f, -0.5f};
    ts_graph *g = ts_graph_new(1);
    ts_tensor *x = ts_param(g, "x", 1, (int64_t[]){8});
    ts_array xa = ts_array_f32((float *)xs, 1, (int64_t[]){8});
    ts_param_set(x, &xa);
    param_ref ps[MAX_PARAMS];
    ts_tensor *y = ts_relu(g, x);
    int np = find_params(g, ps);
    loss_model lm = {.g = g};
    double l0;
    if (loss_model_new(&lm, g, y, ps, np, NULL, 0, "relu kink") && loss_run(&lm, &l0) &&
        copy_grads(&lm, ps, np, "relu kink")) {
        int exact = 1;
        for (int i = 0; i < 8; i++) {
            float want = xs[i] > 0.0f ? lm.r[i] : 0.0f;
            if (ps[0].grad[i] != want) {
                printf("     x=%g: gradient %g, want %g\n", (double)xs[i], (double)ps[0].grad[i],
                       (double)want);
                exact = 0;
            }
        }
        CHECK(exact, "relu kink: gradient exactly 0 at x = 0 and -0 (subgradient, as PyTorch), "
                     "R at 1e-30 and 1e-7, 0 at -1e-30 and -1e-7");
    }
    free(ps[0].grad);
    loss_model_free(&lm);
}

/* ------------------------------------------------- gradients of activations */

enum { CB = 3, CIN = 4, CH = 6 };

/* The chain from stage `from`: 0 = input x -> fc1 -> Relu -> fc2 ->
 * log_softmax; 1 = starts at a parameter z (fc1/Add:0's value);
 * 2 = starts at a parameter h (Relu:0's value). Weights come from w (if
 * given) so every copy computes the same function. */
static ts_tensor *chain(ts_graph *g, int from, const float *start, const float *const *w)
{
    ts_tensor *h = NULL;
    if (from == 0) {
        ts_tensor *x = rparam(g, "x", 2, (int64_t[]){CB, CIN}, D_SYM);
        ts_tensor *z = ts_linear(g, x, CH, "fc1");
        h = ts_relu(g, z);
    } else {
        ts_tensor *p = ts_param(g, from == 1 ? "z" : "h", 2, (int64_t[]){CB, CH});
        ts_array a = ts_array_f32((float *)start, 2, (int64_t[]){CB, CH});
        ts_param_set(p, &a);
        h = from == 1 ? ts_relu(g, p) : p;
    }
    ts_tensor *o = ts_linear(g, h, NC, "fc2");
    if (w) {
        ts_array wa = ts_array_f32((float *)w[0], 2, (int64_t[]){NC, CH});
        ts_array ba = ts_array_f32((float *)w[1], 1, (int64_t[]){NC});
        ts_param_set(ts_graph_find(g, "fc2.weight"), &wa);
        ts_param_set(ts_graph_find(g, "fc2.bias"), &ba);
    }
    return ts_log_softmax(g, o, 1);
}

/* FD of a copy of the chain from `from` against the analytic gradient. */
static void activation_fd(int from, const float *start, const float *const *w, const float *r,
                          const float *grad, double eps, const char *label)
{
    ts_graph *g = ts_graph_new(3);
    ts_tensor *lp = chain(g, from, start, w);
    param_ref ps[MAX_PARAMS];
    int np = find_params(g, ps);
    int which = -1;
    for (int i = 0; i < np; i++)
        if (strcmp(ps[i].name, from == 1 ? "z" : "h") == 0)
            which = i;
    loss_model lm = {.g = g};
    double l0;
    err_stats s = {0};
    /* the same R: y = log_softmax, so R has its shape */
    if (which >= 0 && loss_model_new(&lm, g, lp, ps, np, NULL, 0, label)) {
        memcpy(lm.r, r, sizeof(float) * CB * NC);
        ps[which].grad = (float *)grad;
        if (loss_run(&lm, &l0))
            fd_params(&lm, &ps[which], 1, eps, 1e-2, 1e-3, &s);
        ps[which].grad = NULL;
        CHECK(s.bad == 0 && s.n == CB * CH, "%-28s %3lld elements, eps %-6.2g max_abs=%.3g max_rel=%.3g (rtol 0.01, atol 0.001)%s",
              label, (long long)s.n, eps, s.max_abs, s.max_rel, s.bad ? " MISMATCH" : "");
    } else {
        CHECK(0, "%s: build the chain copy", label);
    }
    loss_model_free(&lm);
}

static void activation_gradients(void)
{
    ts_graph *g = ts_graph_new(5);
    ts_tensor *lp = chain(g, 0, NULL, NULL);
    param_ref ps[MAX_PARAMS];
    const char *extra[] = {"fc1/Add:0", "Relu:0", "Gradient___fc1/Add:0", "Gradient___Relu:0"};
    loss_model lm = {.g = g};
    double l0;
    CHECK(lp != NULL, "activation chain built");
    if (!lp || !loss_model_new(&lm, g, lp, ps, 0, extra, 4, "activation chain") || !loss_run(&lm, &l0)) {
        loss_model_free(&lm);
        return;
    }
    ts_array z, h, gz, gh;
    ts_status st = ts_model_anchored(lm.m, "fc1/Add:0", &z);
    if (!st)
        st = ts_model_anchored(lm.m, "Relu:0", &h);
    if (!st)
        st = ts_model_anchored(lm.m, "Gradient___fc1/Add:0", &gz);
    if (!st)
        st = ts_model_anchored(lm.m, "Gradient___Relu:0", &gh);
    CHECK_OK(st, "activations and their gradients anchored");
    if (!st) {
        /* the relu between them: dL/dz = dL/dh where z > 0, else 0 */
        const float *zv = z.data, *ghv = gh.data, *gzv = gz.data;
        int ok = 1, kept = 0;
        for (int i = 0; i < CB * CH; i++) {
            ok = ok && gzv[i] == (zv[i] > 0 ? ghv[i] : 0.0f);
            kept += zv[i] > 0;
        }
        CHECK(ok && kept > 0 && kept < CB * CH,
              "Gradient___fc1/Add:0 = Gradient___Relu:0 masked by fc1/Add:0 > 0 (%d of %d kept)", kept,
              CB * CH);
        ts_tensor *w2 = ts_graph_find(g, "fc2.weight"), *b2 = ts_graph_find(g, "fc2.bias");
        ts_array wi, bi;
        ts_tensor_info(w2, &wi);
        ts_tensor_info(b2, &bi);
        const float *w[2] = {wi.data, bi.data};
        /* a difference of z must not straddle the relu kink: eps stays
         * below the smallest |z| (and a zero z would have no derivative) */
        double zmin = 1e9;
        for (int i = 0; i < CB * CH; i++)
            zmin = fmin(zmin, fabs(((const float *)z.data)[i]));
        CHECK(zmin > 1e-4, "fc1/Add:0 stays %.3g away from the relu kink", zmin);
        activation_fd(2, h.data, w, lm.r, gh.data, 1e-2, "Gradient___Relu:0");
        activation_fd(1, z.data, w, lm.r, gz.data, fmin(1e-2, 0.5 * zmin), "Gradient___fc1/Add:0");
    }
    loss_model_free(&lm);
}

/* ------------------------------------------------------------------- main */

int main(void)
{
    log_capture cap = {0};
    ts_set_log_callback(capture_log, &cap);

    const double LIN = 0.1; /* eps for ops linear in each parameter */
    op_case cases[] = {
        {"matmul [3,4]x[4,5]", b_matmul, LIN, 1e-3, 1e-4, 0, 0, {0}},
        {"matmul_t [3,4]x[5,4]^T", b_matmul_t, LIN, 1e-3, 1e-4, 0, 0, {0}},
        {"linear 4->5 (x, W, b)", b_linear, LIN, 1e-3, 1e-4, 0, 0, {0}},
        {"add same shape", b_binary, LIN, 1e-3, 1e-4, 0, 3, {2, 3, 4}},
        {"add bias [4]", b_binary, LIN, 1e-3, 1e-4, 0, 1, {4}},
        {"add suffix [3,4]", b_binary, LIN, 1e-3, 1e-4, 0, 2, {3, 4}},
        {"add [1,4]", b_binary, LIN, 1e-3, 1e-4, 0, 2, {1, 4}},
        {"add scalar []", b_binary, LIN, 1e-3, 1e-4, 0, 0, {0}},
        {"add a+a", b_binary, LIN, 1e-3, 1e-4, 0, -1, {0}},
        {"sub same shape", b_binary, LIN, 1e-3, 1e-4, 1, 3, {2, 3, 4}},
        {"sub bias [4]", b_binary, LIN, 1e-3, 1e-4, 1, 1, {4}},
        {"sub suffix [3,4]", b_binary, LIN, 1e-3, 1e-4, 1, 2, {3, 4}},
        {"sub scalar []", b_binary, LIN, 1e-3, 1e-4, 1, 0, {0}},
        {"sub a-a", b_binary, LIN, 1e-3, 1e-4, 1, -1, {0}},
        {"mul same shape", b_binary, LIN, 1e-3, 1e-4, 2, 3, {2, 3, 4}},
        {"mul bias [4]", b_binary, LIN, 1e-3, 1e-4, 2, 1, {4}},
        {"mul suffix [3,4]", b_binary, LIN, 1e-3, 1e-4, 2, 2, {3, 4}},
        {"mul [1,4]", b_binary, LIN, 1e-3, 1e-4, 2, 2, {1, 4}},
        {"mul scalar []", b_binary, LIN, 1e-3, 1e-4, 2, 0, {0}},
        {"mul a*a", b_binary, LIN, 1e-3, 1e-4, 2, -1, {0}},
        {"scale -1.7", b_scale, LIN, 1e-3, 1e-4, 0, 0, {0}},
        {"relu (|x| >= 0.1)", b_relu, 1e-2, 1e-3, 1e-4, 0, 0, {0}},
        {"log (x in [0.5,2])", b_log, 1e-3, 1e-2, 1e-4, 0, 0, {0}},
        {"reshape [2,3,4]->[4,-1]", b_reshape, LIN, 1e-3, 1e-4, 0, 0, {0}},
        {"reshape [2,3,4]->[24]", b_reshape, LIN, 1e-3, 1e-4, 1, 0, {0}},
        {"flatten(1) [2,3,4]", b_flatten, LIN, 1e-3, 1e-4, 1, 0, {0}},
        {"flatten(0) [2,3,4]", b_flatten, LIN, 1e-3, 1e-4, 0, 0, {0}},
        {"log_softmax dim 0", b_log_softmax, 1e-2, 1e-2, 1e-4, 0, 0, {0}},
        {"log_softmax dim 1", b_log_softmax, 1e-2, 1e-2, 1e-4, 1, 0, {0}},
        {"log_softmax dim 2", b_log_softmax, 1e-2, 1e-2, 1e-4, 2, 0, {0}},
        {"log_softmax dim -1", b_log_softmax, 1e-2, 1e-2, 1e-4, -1, 0, {0}},
        {"softmax dim 0", b_softmax, 1e-2, 1e-2, 1e-4, 0, 0, {0}},
        {"softmax dim 1", b_softmax, 1e-2, 1e-2, 1e-4, 1, 0, {0}},
        {"softmax dim 2", b_softmax, 1e-2, 1e-2, 1e-4, 2, 0, {0}},
        {"softmax dim -1", b_softmax, 1e-2, 1e-2, 1e-4, -1, 0, {0}},
        {"nll_loss [4,5]", b_nll, LIN, 1e-3, 1e-4, 0, 0, {0}},
        {"nll_loss(log_softmax)", b_nll_chain, 1e-2, 1e-2, 1e-4, 0, 0, {0}},
        {"cross_entropy [4,5]", b_ce, 1e-2, 1e-2, 1e-4, 0, 0, {0}},
        {"sum [2,3,4]", b_sum, LIN, 1e-3, 1e-4, 0, 0, {0}},
        {"mean [2,3,4]", b_mean, LIN, 1e-3, 1e-4, 0, 0, {0}},
        {"print 'probe' (x2, used twice)", b_print, 1e-2, 1e-3, 1e-4, 0, 0, {0}},
        {"print '' (x2, used twice)", b_print, 1e-2, 1e-3, 1e-4, 1, 0, {0}},
        {"add [2,3,4]+[2,1,4]", b_bcast, LIN, 1e-3, 1e-4, 0, 3, {2, 1, 4}},
        {"add [3,1]+[2,1,4] (both)", b_bcast, LIN, 1e-3, 1e-4, 0, 3, {2, 1, 4}},
        {"sub [2,3,4]-[3,1]", b_bcast, LIN, 1e-3, 1e-4, 1, 2, {3, 1}},
        {"mul [2,3,4]*[2,1,1]", b_bcast, LIN, 1e-3, 1e-4, 2, 3, {2, 1, 1}},
        {"div [2,3,4]/[2,3,4]", b_bcast, 1e-3, 1e-2, 1e-4, 3, 2, {3, 4}},
        {"div [3,1]/[2,1,4]", b_bcast, 1e-3, 1e-2, 1e-4, 3, 3, {2, 1, 4}},
        {"div [2,3,4]/[1]", b_bcast, 1e-3, 1e-2, 1e-4, 3, 1, {1}},
        {"add [2,64]+[64]", b_bcast_wide, LIN, 1e-3, 1e-4, 0, 0, {0}},
        {"sub [2,64]-[64]", b_bcast_wide, LIN, 1e-3, 1e-4, 1, 0, {0}},
        {"mul [2,64]*[64]", b_bcast_wide, LIN, 1e-3, 1e-4, 2, 0, {0}},
        {"div [2,64]/[64]", b_bcast_wide, 1e-3, 1e-2, 1e-4, 3, 0, {0}},
        {"exp", b_unary_math, 1e-3, 1e-2, 1e-4, 0, 0, {0}},
        {"sqrt (x in [0.5,2])", b_unary_math, 1e-3, 1e-2, 1e-4, 1, 0, {0}},
        {"pow 3", b_unary_math, 1e-3, 1e-2, 1e-4, 2, 0, {0}},
        {"pow 0.5 (x in [0.5,2])", b_unary_math, 1e-3, 1e-2, 1e-4, 3, 0, {0}},
        {"erf(2x)", b_unary_math, 1e-3, 1e-2, 1e-4, 4, 0, {0}},
        {"gelu erf (3x)", b_unary_math, 1e-3, 1e-2, 1e-4, 5, 0, {0}},
        {"gelu tanh (3x)", b_unary_math, 1e-3, 1e-2, 1e-4, 6, 0, {0}},
        {"abs", b_unary_math, 1e-3, 1e-2, 1e-4, 7, 0, {0}},
        {"sin (3x)", b_ew_unary, 1e-3, 1e-2, 1e-4, 0, 0, {0}},
        {"cos (3x)", b_ew_unary, 1e-3, 1e-2, 1e-4, 1, 0, {0}},
        {"hardswish (4.5x)", b_ew_unary, 1e-3, 1e-2, 1e-4, 2, 0, {0}},
        {"hardsigmoid (4x)", b_ew_unary, 1e-3, 1e-2, 1e-4, 3, 0, {0}},
        {"leakyrelu (2x)", b_ew_unary, 1e-3, 1e-2, 1e-4, 4, 0, {0}},
        {"elu alpha 0.7 (2x)", b_ew_unary, 1e-3, 1e-2, 1e-4, 5, 0, {0}},
        {"selu (2x)", b_ew_unary, 1e-3, 1e-2, 1e-4, 6, 0, {0}},
        {"softplus (5x)", b_ew_unary, 1e-3, 1e-2, 1e-4, 7, 0, {0}},
        {"tan (1.4x)", b_ew_unary, 1e-3, 1e-2, 1e-4, 8, 0, {0}},
        {"asin (0.9x)", b_ew_unary, 1e-3, 1e-2, 1e-4, 9, 0, {0}},
        {"acos (0.9x)", b_ew_unary, 1e-3, 1e-2, 1e-4, 10, 0, {0}},
        {"atan (3x)", b_ew_unary, 1e-3, 1e-2, 1e-4, 11, 0, {0}},
        {"sinh (2x)", b_ew_unary, 1e-3, 1e-2, 1e-4, 12, 0, {0}},
        {"cosh (2x)", b_ew_unary, 1e-3, 1e-2, 1e-4, 13, 0, {0}},
        {"asinh (3x)", b_ew_unary, 1e-3, 1e-2, 1e-4, 14, 0, {0}},
        {"acosh (e^x)", b_ew_unary, 1e-3, 1e-2, 1e-4, 15, 0, {0}},
        {"atanh (0.9x)", b_ew_unary, 1e-3, 1e-2, 1e-4, 16, 0, {0}},
        {"pow [2,3,4]**[3,4] (tensor)", b_ew_binary, 1e-3, 1e-2, 1e-4, 0, 2, {3, 4}},
        {"pow [2,3,4]**[2,3,4]", b_ew_binary, 1e-3, 1e-2, 1e-4, 0, 3, {2, 3, 4}},
        {"max [2,3,4],[2,1,4]", b_ew_binary, 1e-3, 1e-2, 1e-4, 1, 3, {2, 1, 4}},
        {"min [2,3,4],[4]", b_ew_binary, 1e-3, 1e-2, 1e-4, 2, 1, {4}},
        {"mod [2,3,4],[3,1]", b_ew_binary, 1e-3, 1e-2, 1e-4, 3, 2, {3, 1}},
        {"fmod [2,3,4],[1]", b_ew_binary, 1e-3, 1e-2, 1e-4, 4, 1, {1}},
        {"embedding [5,3] by [2,3]", b_embedding, LIN, 1e-3, 1e-4, 0, 0, {0}},
        {"embedding tied (wte twice)", b_embedding, 1e-2, 1e-2, 1e-4, 1, 0, {0}},
        {"gather axis 0 (repeats, -1)", b_gather, LIN, 1e-3, 1e-4, 0, 0, {0}},
        {"gather axis 1 (repeats, -1)", b_gather, LIN, 1e-3, 1e-4, 1, 0, {0}},
        {"gather axis 2 (repeats, -3)", b_gather, LIN, 1e-3, 1e-4, 2, 0, {0}},
        {"gather_elements axis 0", b_gather_elements, LIN, 1e-3, 1e-4, 0, 0, {0}},
        {"gather_elements axis 1", b_gather_elements, LIN, 1e-3, 1e-4, 1, 0, {0}},
        {"layer_norm last dim", b_layer_norm, 1e-3, 1e-2, 1e-4, 1, 0, {0}},
        {"layer_norm last 2 dims", b_layer_norm, 1e-3, 1e-2, 1e-4, 2, 0, {0}},
        {"rms_norm with a weight", b_rms_norm, 1e-3, 1e-2, 1e-4, 1, 0, {0}},
        {"rms_norm without", b_rms_norm, 1e-3, 1e-2, 1e-4, 0, 0, {0}},
        {"bmm [2,3,4]x[2,4,5]", b_bmm, LIN, 1e-3, 1e-4, 0, 0, {0}},
        {"bmm a^T", b_bmm, LIN, 1e-3, 1e-4, 1, 0, {0}},
        {"bmm b^T", b_bmm, LIN, 1e-3, 1e-4, 2, 0, {0}},
        {"bmm a^T b^T", b_bmm, LIN, 1e-3, 1e-4, 3, 0, {0}},
        {"bmm broadcast [2,1,3,4]x[3,4,5]", b_bmm, LIN, 1e-3, 1e-4, 4, 0, {0}},
        {"bmm broadcast b^T", b_bmm, LIN, 1e-3, 1e-4, 6, 0, {0}},
        {"permute (2,0,1)", b_layout, LIN, 1e-3, 1e-4, 0, 0, {0}},
        {"transpose(-1,-2) + reshape", b_layout, LIN, 1e-3, 1e-4, 1, 0, {0}},
        {"slice dim 1 [1:3]", b_layout, LIN, 1e-3, 1e-4, 2, 0, {0}},
        {"split 2 + concat reversed", b_layout, LIN, 1e-3, 1e-4, 3, 0, {0}},
        {"concat dim 2", b_layout, LIN, 1e-3, 1e-4, 4, 0, {0}},
        {"softmax(causal -inf fill)", b_masked, 1e-2, 1e-2, 1e-4, 0, 0, {0}},
        {"softmax fully masked row", b_masked, 1e-2, 1e-2, 1e-4, 1, 0, {0}},
        {"log_softmax(causal fill)", b_masked, 1e-2, 1e-2, 1e-4, 2, 0, {0}},
        {"where([4,1], [2,4,4], [4])", b_masked, LIN, 1e-3, 1e-4, 3, 0, {0}},
        {"where(s > 0 (f32), [2,4,4], [4])", b_masked, LIN, 1e-3, 1e-4, 4, 0, {0}},
        {"reduce_sum axes (0,-1)", b_reduce, LIN, 1e-3, 1e-4, 0, 0, {0}},
        {"reduce_sum keepdim", b_reduce, LIN, 1e-3, 1e-4, 0, 1, {0}},
        {"reduce_mean axes (0,-1)", b_reduce, LIN, 1e-3, 1e-4, 1, 0, {0}},
        {"reduce_mean keepdim", b_reduce, LIN, 1e-3, 1e-4, 1, 1, {0}},
        {"reduce_max axis 1", b_reduce, 1e-3, 1e-3, 1e-4, 2, 0, {0}},
        {"reduce_max keepdim", b_reduce, 1e-3, 1e-3, 1e-4, 2, 1, {0}},
        {"cross_entropy [2,3,5] ignore", b_ce_ignore, 1e-2, 1e-2, 1e-4, 0, 0, {0}},
        {"conv2d 1->2 k3 5x5", b_conv2d, LIN, 1e-3, 1e-4, 0, 0, {0}},
        {"conv2d stride 2,3 k3x2 7x6", b_conv2d, LIN, 1e-3, 1e-4, 1, 0, {0}},
        {"conv2d pad 1,2,0,1 no bias", b_conv2d, LIN, 1e-3, 1e-4, 2, 0, {0}},
        {"conv2d dilation 2 pad 1,2", b_conv2d, LIN, 1e-3, 1e-4, 3, 0, {0}},
        {"conv2d groups 2", b_conv2d, LIN, 1e-3, 1e-4, 4, 0, {0}},
        {"conv2d depthwise stride 2", b_conv2d, LIN, 1e-3, 1e-4, 5, 0, {0}},
        {"conv2d same, k2x4", b_conv2d, LIN, 1e-3, 1e-4, 6, 0, {0}},
        {"conv_transpose2d k3 3x4", b_conv_transpose2d, LIN, 1e-3, 1e-4, 0, 0, {0}},
        {"conv_transpose2d stride 2,3 output pad 1,2", b_conv_transpose2d, LIN, 1e-3, 1e-4, 1, 0, {0}},
        {"conv_transpose2d stride 2 pad 1,0,2,1 no bias", b_conv_transpose2d, LIN, 1e-3, 1e-4, 2, 0, {0}},
        {"conv_transpose2d dilation 2,3 pad 1", b_conv_transpose2d, LIN, 1e-3, 1e-4, 3, 0, {0}},
        {"conv_transpose2d groups 2 stride 2 pad 1", b_conv_transpose2d, LIN, 1e-3, 1e-4, 4, 0, {0}},
        {"conv_transpose2d dilation 2 output pad 1", b_conv_transpose2d, LIN, 1e-3, 1e-4, 5, 0, {0}},
        {"max_pool2d k2", b_max_pool, 2e-2, 1e-3, 1e-4, 0, 0, {0}},
        {"max_pool2d k3 s2 pad 1", b_max_pool, 2e-2, 1e-3, 1e-4, 1, 0, {0}},
        {"max_pool2d k3x2 s1,2 pad 0,1,1,0", b_max_pool, 2e-2, 1e-3, 1e-4, 2, 0, {0}},
        {"avg_pool2d k2", b_avg_pool, LIN, 1e-3, 1e-4, 0, 0, {0}},
        {"avg_pool2d k3 s2 pad 1 (incl pad)", b_avg_pool, LIN, 1e-3, 1e-4, 1, 0, {0}},
        {"avg_pool2d k3x2 pad 0,1,1,0", b_avg_pool, LIN, 1e-3, 1e-4, 2, 0, {0}},
        {"avg_pool2d k3 pad 1 (excl pad)", b_avg_pool, LIN, 1e-3, 1e-4, 3, 0, {0}},
        {"max_pool2d k2 dilation 2,3 s1,2 ceil", b_max_pool, 2e-2, 1e-3, 1e-4, 4, 0, {0}},
        {"max_pool2d k3 s2,3 pad 2,2,1,0 ceil", b_max_pool, 2e-2, 1e-3, 1e-4, 5, 0, {0}},
        {"avg_pool2d k2 dilation 2,3 s1,2 ceil", b_avg_pool, LIN, 1e-3, 1e-4, 4, 0, {0}},
        {"avg_pool2d k3 s2,3 pad 2,2,1,0 ceil (incl pad)", b_avg_pool, LIN, 1e-3, 1e-4, 5, 0, {0}},
        {"avg_pool2d k3 s2,3 pad 2,2,1,0 ceil (excl pad)", b_avg_pool, LIN, 1e-3, 1e-4, 6, 0, {0}},
        {"global_avg_pool2d [2,3,3,5]", b_global_pool, LIN, 1e-3, 1e-4, 0, 0, {0}},
        {"batch_norm 4-D batch stats", b_batch_norm, 1e-2, 1e-2, 2e-4, 0, 0, {0}},
        {"batch_norm 2-D batch stats", b_batch_norm, 1e-2, 1e-2, 2e-4, 1, 0, {0}},
        {"batch_norm 4-D frozen", b_batch_norm, 1e-2, 1e-2, 1e-4, 2, 0, {0}},
        {"tanh", b_tanh, 1e-2, 1e-2, 1e-4, 0, 0, {0}},
        {"sigmoid(4x)", b_sigmoid, 1e-3, 1e-2, 1e-4, 0, 0, {0}},
        /* last, so the cases above keep their random draws */
        {"pad constant 0.75", b_pad, LIN, 1e-3, 1e-4, TS_PAD_CONSTANT, 0, {0}},
        {"pad constant, a crop", b_pad, LIN, 1e-3, 1e-4, TS_PAD_CONSTANT, 2, {0}},
        {"pad reflect", b_pad, LIN, 1e-3, 1e-4, TS_PAD_REFLECT, 0, {0}},
        {"pad reflect wider than the dims", b_pad, LIN, 1e-3, 1e-4, TS_PAD_REFLECT, 1, {0}},
        {"pad reflect, a crop", b_pad, LIN, 1e-3, 1e-4, TS_PAD_REFLECT, 2, {0}},
        {"pad edge", b_pad, LIN, 1e-3, 1e-4, TS_PAD_EDGE, 0, {0}},
        {"pad edge wider than the dims", b_pad, LIN, 1e-3, 1e-4, TS_PAD_EDGE, 1, {0}},
        {"pad edge, a crop", b_pad, LIN, 1e-3, 1e-4, TS_PAD_EDGE, 2, {0}},
        {"pad wrap", b_pad, LIN, 1e-3, 1e-4, TS_PAD_WRAP, 0, {0}},
        {"pad wrap wider than the dims", b_pad, LIN, 1e-3, 1e-4, TS_PAD_WRAP, 1, {0}},
        /* last: the cases draw their values in turn, a new one before would move the later ones' */
        {"silu (4x)", b_unary_math, 1e-3, 1e-2, 1e-4, 8, 0, {0}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        gradcheck(&cases[i]);
    relu_kink();
    pool_ties();
    activation_gradients();

    ts_set_log_callback(NULL, NULL);
    CHECK(cap.values > 0 && cap.gradients > 0 && cap.grad_default > 0,
          "print op logged its value (%d), its gradient as 'probe_gradient' (%d) and, untitled, as "
          "'Gradient___Print:0' (%d) on each run",
          cap.values, cap.gradients, cap.grad_default);
    return check_summary("test_ops_grad");
}
