/* onnx_rnn.c -- ONNX's LSTM, GRU and RNN, unrolled over the sequence.
 *
 * Shapes are static, so a recurrent node becomes, per direction, one
 * projection of the whole sequence (X W^T + bias, [T*B, G*H]) and per time
 * step a MatMul of the previous state with R, the gates as slices of the
 * sum, their activations and the state update: ops that have gradients
 * already. Every gate of every step is a named tensor
 * `<scope>/<node>/t<k>/<gate>` (k is the time index of the input it
 * reads; a bidirectional node's directions are `forward/` and `reverse/`):
 * LSTM's i, f, g (the candidate cell), o, c (the cell) and h, GRU's z, r,
 * n (the candidate state) and h, RNN's h. The equations are ONNX's (operator docs,
 * opset 14 on): gate order i, o, f, c in W, R and B for LSTM (PyTorch's is
 * i, f, g, o; the exporters reorder), z, r, h for GRU. */
#include "import/onnx_rnn.h"

#include "onnx.pb-c.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef TensorscopeOnnx__AttributeProto Attr;

enum { X_, W_, R_, B_, SEQ_, H0_, C0_, P_ };
#define RNN_OPS_PER_STEP 32 /* about the most, per direction: an LSTM with peepholes and sequence_lens */
enum act { ACT_SIGMOID, ACT_TANH, ACT_RELU };

typedef struct rnn {
    ts_graph *g;
    const ts_onnx_rnn_node *n;
    bool lstm, plain; /* LSTM; RNN (plain: one gate, h = f(x W^T + h R^T + b)) */
    const char *op;  /* the op type */
    int gates;       /* 4 (LSTM), 3 (GRU) or 1 (RNN) */
    int dirs;        /* 1 or 2 */
    bool reverse;    /* direction "reverse" (dirs 1) */
    bool batch_first;/* layout 1 */
    bool lbr;        /* GRU's linear_before_reset */
    int64_t T, B, I, H;
    ts_tensor *w, *r, *b, *p; /* W, R and the optional B and P, once */
    ts_tensor *mask;          /* [T*B, 1]: 1 where step t is within row b's length (sequence_lens), else NULL */
    enum act act[2][3]; /* per direction: f, g (and LSTM's h) */
    char prefix[512];
} rnn;

static const Attr *find_attr(const rnn *r, const char *name) {
    const TensorscopeOnnx__NodeProto *node = r->n->node;
    for (size_t i = 0; i < node->n_attribute; i++)
        if (node->attribute[i]->name && strcmp(node->attribute[i]->name, name) == 0) return node->attribute[i];
    return NULL;
}

static bool bytes_are(const ProtobufCBinaryData *b, const char *s) {
    return b->len == strlen(s) && strncasecmp((const char *)b->data, s, b->len) == 0;
}

static ts_status failed(ts_graph *g) {
    ts_status st = ts_graph_status(g);
    return st ? st : ts_error(TS_ERR_INTERNAL, "a graph builder returned NULL without an error");
}

/* ------------------------------------------------------------- attributes */

static ts_status read_attrs(rnn *r) {
    const char *op = r->op;
    const Attr *a;
    if ((a = find_attr(r, "clip")))
        return ts_error(TS_ERR_UNSUPPORTED, "attribute 'clip' (%g) is not available: tensorscope's %s applies no cell clipping; "
                        "export without it", (double)a->f, op);
    if (r->lstm && (a = find_attr(r, "input_forget")) && a->i != 0)
        return ts_error(TS_ERR_UNSUPPORTED, "input_forget=1 (coupled input and forget gates) is not available; input_forget=0 is");
    a = find_attr(r, "direction");
    if (!a || bytes_are(&a->s, "forward")) r->dirs = 1;
    else if (bytes_are(&a->s, "reverse")) r->dirs = 1, r->reverse = true;
    else if (bytes_are(&a->s, "bidirectional")) r->dirs = 2;
    else
        return ts_error(TS_ERR_FORMAT, "attribute 'direction' is '%.*s'; %s takes forward, reverse or bidirectional", (int)a->s.len,
                        (const char *)a->s.data, op);
    a = find_attr(r, "layout");
    if (a && a->i != 0 && a->i != 1) return ts_error(TS_ERR_FORMAT, "attribute 'layout' is %lld; %s takes 0 or 1", (long long)a->i, op);
    r->batch_first = a && a->i == 1;
    a = find_attr(r, "linear_before_reset");
    if (a && (r->lstm || r->plain)) return ts_error(TS_ERR_FORMAT, "attribute 'linear_before_reset' belongs to GRU, not %s", op);
    r->lbr = a && a->i != 0;
    /* activations: f, g (and h) per direction, the defaults Sigmoid, Tanh
     * (Tanh); RNN's one, f, Tanh; Relu too (no alpha or beta) */
    int per_dir = r->lstm ? 3 : r->plain ? 1 : 2;
    for (int d = 0; d < 2; d++) {
        r->act[d][0] = r->plain ? ACT_TANH : ACT_SIGMOID;
        r->act[d][1] = r->act[d][2] = ACT_TANH;
    }
    a = find_attr(r, "activations");
    if (a) {
        if ((int)a->n_strings != per_dir * r->dirs)
            return ts_error(TS_ERR_FORMAT, "attribute 'activations' lists %zu functions; a %s %s takes %d (%s per direction)",
                            a->n_strings, r->dirs == 2 ? "bidirectional" : "one-direction", op, per_dir * r->dirs,
                            r->lstm ? "f, g, h" : r->plain ? "f" : "f, g");
        for (int k = 0; k < per_dir * r->dirs; k++) {
            const ProtobufCBinaryData *s = &a->strings[k];
            enum act *slot = &r->act[k / per_dir][k % per_dir];
            if (bytes_are(s, "Sigmoid")) *slot = ACT_SIGMOID;
            else if (bytes_are(s, "Tanh")) *slot = ACT_TANH;
            else if (bytes_are(s, "Relu")) *slot = ACT_RELU;
            else
                return ts_error(TS_ERR_UNSUPPORTED, "activation '%.*s' is not available in %s; Sigmoid, Tanh and Relu are", (int)s->len,
                                (const char *)s->data, op);
        }
    }
    return TS_OK;
}

/* ----------------------------------------------------------------- shapes */

static bool all_zero(const ts_const *c) {
    int64_t n = ts_shape_numel(&c->shape);
    for (int64_t i = 0; i < n; i++)
        if (c->v[i] != 0.0) return false;
    return true;
}

/* A constant initial state of zeros, whatever its batch: absent (PyTorch's
 * exports write one for the example's batch). */
static bool zero_state(const rnn *r, int input) {
    return (input == H0_ || input == C0_) && !r->n->t[input] && r->n->c[input] && all_zero(r->n->c[input]);
}

static ts_status check_shape(const rnn *r, int input, const char *what, int ndim, const int64_t *want) {
    const ts_shape *s = r->n->t[input] ? &r->n->t[input]->shape : r->n->c[input] ? &r->n->c[input]->shape : NULL;
    if (!s || zero_state(r, input)) return TS_OK;
    bool ok = s->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = s->d[i] == want[i];
    if (ok) return TS_OK;
    char have[96], need[96];
    ts_shape w = {.ndim = ndim};
    memcpy(w.d, want, (size_t)ndim * sizeof *want);
    return ts_error(TS_ERR_SHAPE, "input %d (%s) has the shape %s; the %s's other inputs and attributes make it %s", input, what,
                    ts_shape_str(s, have, sizeof have), r->op, ts_shape_str(&w, need, sizeof need));
}

static ts_status read_shapes(rnn *r) {
    const ts_onnx_rnn_node *n = r->n;
    const char *op = r->op;
    for (int i = X_; i <= R_; i++)
        if (!n->t[i] && !n->c[i]) return ts_error(TS_ERR_FORMAT, "input %d (%s) is required", i, i == X_ ? "X" : i == W_ ? "W" : "R");
    const ts_shape *x = n->t[X_] ? &n->t[X_]->shape : &n->c[X_]->shape;
    const ts_shape *w = n->t[W_] ? &n->t[W_]->shape : &n->c[W_]->shape;
    const ts_shape *rr = n->t[R_] ? &n->t[R_]->shape : &n->c[R_]->shape;
    if (x->ndim != 3) return ts_error(TS_ERR_SHAPE, "input 0 (X) has %d dimensions; %s takes [seq_length, batch, input_size] (layout 0) "
                                      "or [batch, seq_length, input_size] (layout 1)", x->ndim, op);
    r->T = x->d[r->batch_first ? 1 : 0];
    r->B = x->d[r->batch_first ? 0 : 1];
    r->I = x->d[2];
    if (rr->ndim != 3 || rr->d[1] % r->gates) {
        char have[96];
        return ts_error(TS_ERR_SHAPE, "input 2 (R) has the shape %s; %s takes [num_directions, %d*hidden_size, hidden_size]",
                        ts_shape_str(rr, have, sizeof have), op, r->gates);
    }
    r->H = rr->d[1] / r->gates;
    const Attr *hs = find_attr(r, "hidden_size");
    if (hs && hs->i != r->H)
        return ts_error(TS_ERR_SHAPE, "attribute 'hidden_size' is %lld but R holds %lld gates of %lld: the file is inconsistent "
                        "(re-export it)", (long long)hs->i, (long long)r->gates, (long long)r->H);
    if (r->T < 1 || r->B < 1 || r->H < 1 || r->I < 1 || w->ndim != 3)
        return ts_error(TS_ERR_SHAPE, "X, W and R must be non-empty and 3-D");
    int64_t D = r->dirs, G = r->gates, H = r->H, B = r->B;
    int64_t state[3] = {r->batch_first ? B : D, r->batch_first ? D : B, H};
    ts_status st = check_shape(r, W_, "W", 3, (int64_t[]){D, G * H, r->I});
    if (!st) st = check_shape(r, R_, "R", 3, (int64_t[]){D, G * H, H});
    if (!st) st = check_shape(r, B_, "B", 2, (int64_t[]){D, 2 * G * H});
    if (!st) st = check_shape(r, H0_, "initial_h", 3, state);
    if (!st && r->lstm) st = check_shape(r, C0_, "initial_c", 3, state);
    if (!st && r->lstm) st = check_shape(r, P_, "P", 2, (int64_t[]){D, 3 * H});
    if (!st && !r->lstm && (n->t[C0_] || n->c[C0_] || n->t[P_] || n->c[P_]))
        return ts_error(TS_ERR_FORMAT, "%s has 6 inputs; this node gives %s", r->op, n->t[P_] || n->c[P_] ? "a seventh and eighth" : "a seventh");
    return st;
}

/* sequence_lens: absent, a constant of B lengths from 0 to T, or a graph
 * tensor (fed) of B lengths. *masked unless absent or every length is T:
 * the steps past a row's length then leave its state as it is and give
 * zeros in Y (ONNX's semantics, for either direction). */
static ts_status check_lengths(const rnn *r, bool *masked) {
    const ts_onnx_rnn_node *n = r->n;
    *masked = false;
    const ts_shape *s = n->t[SEQ_] ? &n->t[SEQ_]->shape : n->c[SEQ_] ? &n->c[SEQ_]->shape : NULL;
    if (!s) return TS_OK;
    if (s->ndim != 1 || s->d[0] != r->B)
        return ts_error(TS_ERR_SHAPE, "its sequence_lens holds %lld values; it takes one per batch row (%lld)",
                        (long long)ts_shape_numel(s), (long long)r->B);
    if (n->t[SEQ_]) {
        *masked = true;
        return TS_OK;
    }
    const ts_const *c = n->c[SEQ_];
    for (int64_t i = 0; i < r->B; i++) {
        int64_t len;
        if (!ts_onnx_int_value(c->v[i], 0, r->T, &len) || (double)len != c->v[i])
            return ts_error(TS_ERR_FORMAT, "sequence_lens[%lld] is %g; lengths are integers from 0 to seq_length (%lld)", (long long)i,
                            c->v[i], (long long)r->T);
        *masked = *masked || len != r->T;
    }
    return TS_OK;
}

/* --------------------------------------------------------------- tensors */

/* A graph constant of c's values (a Constant node's weights or initial
 * state), named `<prefix>/<what>`. */
static ts_tensor *const_tensor(rnn *r, const ts_const *c, const char *what, ts_status *st) {
    int64_t n = ts_shape_numel(&c->shape);
    if ((*st = ts_const_charge((uint64_t)(n ? n : 1) * sizeof(float)))) return NULL;
    float *v = ts_malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) {
        *st = TS_ERR_OUT_OF_MEMORY;
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) v[i] = c->v ? (float)c->v[i] : 0.0f;
    char name[700];
    snprintf(name, sizeof name, "%s/%s", r->prefix, what);
    ts_array a = ts_array_f32(v, c->shape.ndim, c->shape.d);
    ts_tensor *t = ts_constant(r->g, name, &a);
    ts_free(v);
    if (!t) *st = failed(r->g);
    return t;
}

/* Input i as a graph tensor, or NULL (absent, or a zero initial state;
 * *st stays TS_OK). */
static ts_tensor *input(rnn *r, int i, const char *what, ts_status *st) {
    const ts_onnx_rnn_node *n = r->n;
    if (n->t[i]) return n->t[i];
    if (!n->c[i] || zero_state(r, i)) return NULL;
    return const_tensor(r, n->c[i], what, st);
}

static ts_tensor *named(rnn *r, ts_tensor *t, int dir, int64_t step, const char *gate, ts_status *st) {
    if (!t) {
        *st = failed(r->g);
        return NULL;
    }
    char name[700];
    snprintf(name, sizeof name, "%s/%st%lld/%s", r->prefix, r->dirs == 1 ? "" : dir ? "reverse/" : "forward/", (long long)step, gate);
    if ((*st = ts_tensor_set_name(t, name))) return NULL;
    return t;
}

static ts_tensor *activate(ts_graph *g, enum act a, ts_tensor *x) {
    if (!x) return NULL;
    return a == ACT_SIGMOID ? ts_sigmoid(g, x) : a == ACT_TANH ? ts_tanh(g, x) : ts_relu(g, x);
}

/* Direction d's slice of a [D, ...] tensor, as the given shape. */
static ts_tensor *per_dir(rnn *r, ts_tensor *t, int d, int ndim, const int64_t *shape) {
    if (!t) return NULL;
    if (r->dirs > 1) t = ts_slice(r->g, t, 0, d, 1);
    return t ? ts_reshape(r->g, t, ndim, shape) : NULL;
}

/* Concatenation of n tensors along `axis`, in ts_concat's groups of at most
 * TS_MAX_INPUTS (a tree for long sequences). xs is overwritten. */
static ts_tensor *concat_all(ts_graph *g, ts_tensor **xs, int n, int axis) {
    while (n > 1) {
        int k = 0;
        for (int i = 0; i < n; i += TS_MAX_INPUTS, k++) {
            int m = n - i < TS_MAX_INPUTS ? n - i : TS_MAX_INPUTS;
            xs[k] = m == 1 ? xs[i] : ts_concat(g, xs + i, m, axis);
            if (!xs[k]) return NULL;
        }
        n = k;
    }
    return xs[0];
}

/* The mask [T*B, 1] of sequence_lens: M[t*B + b] = lengths[b] > t. */
static ts_tensor *length_mask(rnn *r, ts_status *st) {
    ts_graph *g = r->g;
    ts_tensor *len = r->n->t[SEQ_];
    if (len && len->dtype == TS_I32) len = ts_unary(g, "CastFloat", len, 0.0f, 0.0f);
    if (!len && !(len = const_tensor(r, r->n->c[SEQ_], "sequence_lens", st))) return NULL;
    ts_const steps = {0};
    if ((*st = ts_const_fill(&(ts_shape){.ndim = 2, .d = {r->T, 1}}, TS_ONNX_FLOAT, 0.0, &steps))) return NULL;
    for (int64_t t = 0; t < r->T; t++) steps.v[t] = (double)t;
    ts_tensor *tcol = const_tensor(r, &steps, "steps", st);
    ts_const_free(&steps);
    if (!tcol) return NULL;
    ts_tensor *row = ts_reshape(g, len, 2, (int64_t[]){1, r->B});
    ts_tensor *m = row ? ts_cast(g, ts_binary(g, "Greater", row, tcol), TS_F32) : NULL; /* [T, B]: 1 or 0 */
    m = m ? ts_reshape(g, m, 2, (int64_t[]){r->T * r->B, 1}) : NULL;
    if (!m) *st = failed(g);
    return m;
}

/* A state past a row's length keeps its value: prev + m (next - prev);
 * from a zero state, m next. */
static ts_tensor *masked_state(ts_graph *g, ts_tensor *m, ts_tensor *prev, ts_tensor *next) {
    if (!m || !next) return next;
    return prev ? ts_add(g, prev, ts_mul(g, m, ts_sub(g, next, prev))) : ts_mul(g, m, next);
}

/* ---------------------------------------------------------------- unroll */

typedef struct dir_out {
    ts_tensor **h;  /* [T] states by time index, each [B, H] */
    ts_tensor *h_last, *c_last;
} dir_out;

/* One direction: the projection of the sequence, then the steps. */
static ts_status run_dir(rnn *r, int d, ts_tensor *x2, ts_tensor *h0, ts_tensor *c0, dir_out *out) {
    ts_graph *g = r->g;
    ts_status st = TS_OK;
    int64_t G = r->gates, H = r->H, B = r->B;
    ts_tensor *w = per_dir(r, r->w, d, 2, (int64_t[]){G * H, r->I});
    ts_tensor *rw = per_dir(r, r->r, d, 2, (int64_t[]){G * H, H});
    if (!w || !rw) return failed(g);
    ts_tensor *bias = r->b, *p = r->p;
    /* X W^T + Wb (+ Rb where it adds outside the reset gate: LSTM, and
     * GRU unless linear_before_reset), [T*B, G*H] */
    ts_tensor *xw = ts_matmul_t(g, x2, w), *rb = NULL;
    if (bias) {
        ts_tensor *bd = per_dir(r, bias, d, 1, (int64_t[]){2 * G * H});
        ts_tensor *wb = bd ? ts_slice(g, bd, 0, 0, G * H) : NULL;
        rb = bd ? ts_slice(g, bd, 0, G * H, G * H) : NULL;
        if (!r->lbr) wb = wb && rb ? ts_add(g, wb, rb) : NULL;
        xw = xw && wb ? ts_add(g, xw, wb) : NULL;
    }
    /* [T, B, G*H]: a step is a slice of the time dim, so that at another
     * batch size (compile scales the B of this Reshape) it reads its rows */
    xw = xw ? ts_reshape(g, xw, 3, (int64_t[]){r->T, B, G * H}) : NULL;
    if (!xw) return failed(g);
    ts_tensor *pi = NULL, *po = NULL, *pf = NULL;
    if (p) {
        ts_tensor *pd = per_dir(r, p, d, 1, (int64_t[]){3 * H});
        pi = pd ? ts_slice(g, pd, 0, 0, H) : NULL;
        po = pd ? ts_slice(g, pd, 0, H, H) : NULL;
        pf = pd ? ts_slice(g, pd, 0, 2 * H, H) : NULL;
        if (!pf) return failed(g);
    }
    /* GRU without linear_before_reset: R's z and r rows act on h, its h
     * rows on r * h */
    bool gru = !r->lstm && !r->plain;
    ts_tensor *r_zr = gru && !r->lbr ? ts_slice(g, rw, 0, 0, 2 * H) : NULL;
    ts_tensor *r_h = gru && !r->lbr ? ts_slice(g, rw, 0, 2 * H, H) : NULL;
    if (gru && !r->lbr && !r_h) return failed(g);
    ts_tensor *h = h0, *c = c0;
    const enum act *act = r->act[d];
    bool rev = r->reverse || d == 1;
    for (int64_t k = 0; k < r->T && !st; k++) {
        int64_t t = rev ? r->T - 1 - k : k;
        ts_tensor *xt = ts_reshape(g, ts_slice(g, xw, 0, t, 1), 2, (int64_t[]){B, G * H}), *mt = r->mask ? ts_slice(g, r->mask, 0, t * B, B) : NULL, *y;
        if (!xt || (r->mask && !mt)) return failed(g);
        if (r->plain) { /* h = f(x W^T + h R^T + Wb + Rb) */
            ts_tensor *hn = named(r, activate(g, act[0], h ? ts_add(g, xt, ts_matmul_t(g, h, rw)) : xt), d, t, "h", &st);
            if (!hn) return st ? st : failed(g);
            y = mt ? ts_mul(g, mt, hn) : hn;
            h = masked_state(g, mt, h, hn);
        } else if (r->lstm) {
            ts_tensor *gates = h ? ts_add(g, xt, ts_matmul_t(g, h, rw)) : xt;
            ts_tensor *ip = gates ? ts_slice(g, gates, 1, 0, H) : NULL, *op = gates ? ts_slice(g, gates, 1, H, H) : NULL;
            ts_tensor *fp = gates ? ts_slice(g, gates, 1, 2 * H, H) : NULL, *cp = gates ? ts_slice(g, gates, 1, 3 * H, H) : NULL;
            if (pi && c && cp) {
                ip = ts_add(g, ip, ts_mul(g, c, pi));
                fp = ts_add(g, fp, ts_mul(g, c, pf));
            }
            ts_tensor *i = named(r, activate(g, act[0], ip), d, t, "i", &st);
            ts_tensor *f = i ? named(r, activate(g, act[0], fp), d, t, "f", &st) : NULL;
            ts_tensor *gg = f ? named(r, activate(g, act[1], cp), d, t, "g", &st) : NULL;
            ts_tensor *ig = gg ? ts_mul(g, i, gg) : NULL;
            ts_tensor *cn = ig ? named(r, c ? ts_add(g, ts_mul(g, f, c), ig) : ig, d, t, "c", &st) : NULL;
            if (cn && pi) op = ts_add(g, op, ts_mul(g, cn, po));
            ts_tensor *o = cn ? named(r, activate(g, act[0], op), d, t, "o", &st) : NULL;
            ts_tensor *hn = o ? named(r, ts_mul(g, o, activate(g, act[2], cn)), d, t, "h", &st) : NULL;
            if (!hn) return st ? st : failed(g);
            y = mt ? ts_mul(g, mt, hn) : hn;
            h = masked_state(g, mt, h, hn), c = masked_state(g, mt, c, cn);
        } else {
            ts_tensor *xz = ts_slice(g, xt, 1, 0, H), *xr = ts_slice(g, xt, 1, H, H), *xh = ts_slice(g, xt, 1, 2 * H, H);
            ts_tensor *zp = xz, *rp = xr, *hr = NULL;
            if (h || r->lbr) { /* h R^T (+ Rb): z, r and, with linear_before_reset, h's rows */
                hr = h ? ts_matmul_t(g, h, r->lbr ? rw : r_zr) : NULL;
                if (r->lbr && rb) hr = h ? ts_add(g, hr, rb) : ts_reshape(g, rb, 2, (int64_t[]){1, G * H});
            }
            if (hr) {
                zp = ts_add(g, xz, ts_slice(g, hr, 1, 0, H));
                rp = ts_add(g, xr, ts_slice(g, hr, 1, H, H));
            }
            ts_tensor *z = named(r, activate(g, act[0], zp), d, t, "z", &st);
            ts_tensor *rg = z ? named(r, activate(g, act[0], rp), d, t, "r", &st) : NULL;
            if (!rg) return st ? st : failed(g);
            ts_tensor *np = xh;
            if (r->lbr && hr) np = ts_add(g, xh, ts_mul(g, rg, ts_slice(g, hr, 1, 2 * H, H)));
            else if (!r->lbr && h) np = ts_add(g, xh, ts_matmul_t(g, ts_mul(g, rg, h), r_h));
            ts_tensor *nn = named(r, activate(g, act[1], np), d, t, "n", &st);
            /* h' = (1 - z) n + z h = n + z (h - n) */
            ts_tensor *mix = !nn ? NULL : h ? ts_add(g, nn, ts_mul(g, z, ts_sub(g, h, nn))) : ts_sub(g, nn, ts_mul(g, z, nn));
            ts_tensor *hn = mix ? named(r, mix, d, t, "h", &st) : NULL;
            if (!hn) return st ? st : failed(g);
            y = mt ? ts_mul(g, mt, hn) : hn;
            h = masked_state(g, mt, h, hn);
        }
        if (!y || !h) return failed(g);
        if (out->h) out->h[t] = y;
    }
    out->h_last = h, out->c_last = c;
    return st;
}

static void make_prefix(rnn *r) {
    const char *name = r->n->node->name;
    const char *last = name && *name ? strrchr(name, '/') : NULL;
    last = last ? last + 1 : name;
    if (!last || !*last) { /* an unnamed node: `<scope>/LSTM:<k>` */
        char *auto_name = ts_graph_op_output_name(r->g, r->op);
        snprintf(r->prefix, sizeof r->prefix, "%s", auto_name ? auto_name : r->op);
        ts_free(auto_name);
        return;
    }
    char scope[256];
    ts_graph_scope_path(r->g, scope, sizeof scope);
    size_t used = (size_t)snprintf(r->prefix, sizeof r->prefix, "%s%s", scope, scope[0] ? "/" : "");
    for (const char *q = last; *q && used + 1 < sizeof r->prefix; q++)
        r->prefix[used++] = (*q == '"' || *q == '\\' || (unsigned char)*q < 0x20) ? '_' : *q;
    r->prefix[used] = '\0';
}

/* The state of a [D, B, H] (layout 1: [B, D, H]) input for direction d. */
static ts_tensor *state_of(rnn *r, ts_tensor *s, int d) {
    if (!s) return NULL;
    if (r->batch_first) s = ts_permute(r->g, s, (int[]){1, 0, 2});
    return per_dir(r, s, d, 2, (int64_t[]){r->B, r->H});
}

/* [D, B, H] (layout 1: [B, D, H]) from each direction's [B, H]. */
static ts_tensor *stack_dirs(rnn *r, ts_tensor **per) {
    ts_tensor *xs[2];
    for (int d = 0; d < r->dirs; d++)
        if (!(xs[d] = ts_reshape(r->g, per[d], 3, (int64_t[]){1, r->B, r->H}))) return NULL;
    ts_tensor *y = r->dirs == 1 ? xs[0] : ts_concat(r->g, xs, 2, 0);
    return y && r->batch_first ? ts_permute(r->g, y, (int[]){1, 0, 2}) : y;
}

ts_status ts_onnx_rnn(ts_graph *g, const ts_onnx_rnn_node *n, ts_tensor *out[3]) {
    out[0] = out[1] = out[2] = NULL;
    rnn r = {.g = g, .n = n};
    r.lstm = strcmp(n->node->op_type, "LSTM") == 0;
    r.plain = strcmp(n->node->op_type, "RNN") == 0;
    r.op = r.lstm ? "LSTM" : r.plain ? "RNN" : "GRU";
    r.gates = r.lstm ? 4 : r.plain ? 1 : 3;
    ts_status st = read_attrs(&r);
    if (!st) st = read_shapes(&r);
    bool masked = false;
    if (!st) st = check_lengths(&r, &masked);
    if (st) return st;
    /* the unrolled graph is memory the file does not hold (up to some 30 ops a
     * step and direction): bounded by the import's limit */
    uint64_t unrolled = (uint64_t)r.T * (uint64_t)r.dirs * RNN_OPS_PER_STEP * (sizeof(ts_tensor) + 64);
    if (unrolled > ts_get_limit(TS_LIMIT_IMPORT_BYTES)) {
        char what[160];
        snprintf(what, sizeof what, "unrolling the %s over its %lld steps (some %d graph ops a step)", r.op,
                 (long long)r.T, RNN_OPS_PER_STEP * r.dirs);
        return ts_limit_exceeded(TS_LIMIT_IMPORT_BYTES, what, unrolled);
    }
    make_prefix(&r);
    const TensorscopeOnnx__NodeProto *node = n->node;
    bool want[3];
    for (int i = 0; i < 3; i++) want[i] = (size_t)i < node->n_output && node->output[i] && *node->output[i];
    if (!r.lstm && want[2]) return ts_error(TS_ERR_FORMAT, "%s has 2 outputs (Y, Y_h); this node names a third", r.op);
    /* the sequence as [T*B, I] rows, time-major */
    ts_tensor *x = input(&r, X_, "X", &st);
    if (!x) return st ? st : failed(g);
    if (r.batch_first) x = ts_permute(g, x, (int[]){1, 0, 2});
    ts_tensor *x2 = x ? ts_reshape(g, x, 2, (int64_t[]){r.T * r.B, r.I}) : NULL;
    if (!x2) return failed(g);
    ts_tensor *h0 = input(&r, H0_, "initial_h", &st), *c0 = st ? NULL : input(&r, C0_, "initial_c", &st);
    if (!st) r.w = input(&r, W_, "W", &st);
    if (!st) r.r = input(&r, R_, "R", &st);
    if (!st) r.b = input(&r, B_, "B", &st);
    if (!st) r.p = input(&r, P_, "P", &st);
    if (!st && masked) r.mask = length_mask(&r, &st);
    if (st) return st;
    ts_tensor **hs = want[0] ? ts_calloc((size_t)(r.T * r.dirs), sizeof *hs) : NULL;
    if (want[0] && !hs) return TS_ERR_OUT_OF_MEMORY;
    dir_out res[2] = {{0}};
    for (int d = 0; d < r.dirs && !st; d++) {
        res[d].h = hs ? hs + d * r.T : NULL;
        ts_tensor *hd = state_of(&r, h0, d), *cd = state_of(&r, c0, d);
        if ((h0 && !hd) || (c0 && !cd)) st = failed(g);
        else st = run_dir(&r, d, x2, hd, cd, &res[d]);
    }
    /* Y: [T, D, B, H] (layout 1: [B, T, D, H]) */
    if (!st && want[0]) {
        ts_tensor *dirs[2] = {NULL, NULL};
        for (int d = 0; d < r.dirs && !st; d++) {
            ts_tensor **steps = hs + d * r.T;
            for (int64_t t = 0; t < r.T && !st; t++)
                if (!(steps[t] = ts_reshape(g, steps[t], 4, (int64_t[]){1, 1, r.B, r.H}))) st = failed(g);
            if (!st && !(dirs[d] = concat_all(g, steps, (int)r.T, 0))) st = failed(g);
        }
        ts_tensor *y = st ? NULL : r.dirs == 1 ? dirs[0] : ts_concat(g, dirs, 2, 1);
        if (y && r.batch_first) y = ts_permute(g, y, (int[]){2, 0, 1, 3});
        if (!st && !y) st = failed(g);
        out[0] = y;
    }
    ts_free(hs);
    ts_tensor *last_h[2] = {res[0].h_last, res[1].h_last}, *last_c[2] = {res[0].c_last, res[1].c_last};
    if (!st && want[1] && !(out[1] = stack_dirs(&r, last_h))) st = failed(g);
    if (!st && want[2] && !(out[2] = stack_dirs(&r, last_c))) st = failed(g);
    return st;
}
