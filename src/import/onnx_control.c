/* onnx_control.c -- control flow: If (its branch chosen at import), Loop and
 * Scan (their body imported once per iteration, the carried values threaded,
 * the scan outputs stacked), and the sequences a Loop builds (SequenceEmpty,
 * SequenceInsert, ConcatFromSequence, ...), lists known at import. */
#include "import/onnx_ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------- control flow */

/* One static graph holds no control flow: an If whose condition is known
 * at import is its chosen branch, imported inline (its nodes read the
 * names of the graph around it); a Loop whose trip count and condition
 * fold at import, and a Scan (its sequence length is static), are their
 * body imported once per iteration, the loop-carried values threaded from
 * one to the next and the scan outputs stacked (docs/onnx.md). The body's
 * ops are ordinary graph ops: gradients flow through them. */

static const TensorscopeOnnx__GraphProto *attr_graph(const importer *im, const char *name) {
    const Attr *a = ts_onnx_attr(im, name);
    return a ? a->g : NULL;
}

/* v as a value of its own, which outlives the names of the body that made
 * it: a graph tensor (a parameter's, made now) or a copy of a constant. */
static ts_status carried(importer *im, value *v, value *out) {
    memset(out, 0, sizeof *out);
    if (v->seq) { /* a sequence never changes: the same one */
        out->seq = v->seq;
        return TS_OK;
    }
    if (v->t || v->param) {
        ts_status st = TS_OK;
        out->t = ts_onnx_as_tensor(im, v, &st);
        return out->t ? TS_OK : st;
    }
    return ts_onnx_fold_result(im, ts_const_copy_exact(&v->c, &out->c));
}

static void free_values(value *v, int n) {
    for (int i = 0; i < n; i++) ts_const_free(&v[i].c);
}

/* A scalar constant of ONNX type dtype (Loop's iteration number, its
 * condition) as a value. */
static ts_status scalar_value(importer *im, int dtype, double x, value *out) {
    memset(out, 0, sizeof *out);
    ts_shape s = {.ndim = 0};
    return ts_onnx_fold_result(im, ts_const_fill(&s, dtype, x, &out->c));
}

/* Imports the graph `gp` of the current node inline: its inputs bound to
 * in[0..n_in), its outputs into out[0..gp->n_output) (values of their own,
 * freed by the caller). `what` names the branch or iteration in errors,
 * which name the node that holds the graph. */
static ts_status import_body(importer *im, const TensorscopeOnnx__GraphProto *gp, value **in, int n_in, value *out, const char *what) {
    const Node *node = im->node;
    int index = im->node_index;
    if (gp->n_input != (size_t)n_in)
        return ts_onnx_node_error(im, TS_ERR_FORMAT, "its %s has %zu inputs where %s gives it %d", what, gp->n_input, node->op_type, n_in);
    if (im->depth >= MAX_GRAPH_DEPTH)
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its %s nests graphs more than %d deep (tensorscope's limit)", what, MAX_GRAPH_DEPTH);
    if (gp->n_node + 1 > MAX_UNROLLED_NODES - im->unrolled)
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "importing its %s would bring the nodes imported from If branches and Loop and Scan "
                                  "bodies past %d, tensorscope's limit on unrolled nodes (a body counts once per iteration, and one more): "
                                  "shorten the loop, or write the computation without it (a batched op over the sequence)",
                                  what, MAX_UNROLLED_NODES);
    im->unrolled += gp->n_node + 1;
    ts_status st = TS_OK;
    for (size_t i = 0; !st && i < gp->n_initializer; i++) { /* constants of the body */
        const TensorProto *tp = gp->initializer[i];
        char w[600];
        snprintf(w, sizeof w, "initializer '%s' of its %s", tp->name ? tp->name : "", what);
        value v = {0};
        st = tp->name && *tp->name ? ts_onnx_tensor_check(im, tp, w, &v.c) : ts_onnx_node_error(im, TS_ERR_FORMAT, "an initializer of its %s has no name", what);
        if (!st) st = ts_onnx_tensor_decode(im, tp, w, &v.c);
        if (!st) st = ts_onnx_define(im, tp->name, &v);
        if (st) ts_const_free(&v.c);
    }
    for (int i = 0; !st && i < n_in; i++) {
        const char *name = gp->input[i]->name;
        if (!name || !*name) return ts_onnx_node_error(im, TS_ERR_FORMAT, "input %d of its %s has no name", i, what);
        if (!in[i]) continue; /* an input left out: a node that reads it fails */
        value v;
        st = carried(im, in[i], &v);
        if (!st && (st = ts_onnx_define(im, name, &v))) ts_const_free(&v.c);
    }
    im->depth++;
    for (size_t k = 0; !st && k < gp->n_node; k++) st = ts_onnx_import_node(im, gp->node[k], (int)k);
    im->depth--;
    im->node = node;
    im->node_index = index;
    ts_graph_at(im->g, im->file, im->top_index);
    if (st) {
        char msg[900];
        const char *e = ts_last_error();
        if (strncmp(e, im->path, strlen(im->path)) == 0 && e[strlen(im->path)] == ':') e += strlen(im->path) + 2;
        snprintf(msg, sizeof msg, "%s", e);
        return ts_onnx_node_error(im, st, "in its %s, %s", what, msg);
    }
    for (size_t o = 0; o < gp->n_output; o++) {
        const char *name = gp->output[o]->name;
        value *v = name && *name ? ts_onnx_lookup(im, name) : NULL;
        if (!v || (!v->t && !v->param && !v->seq && !v->c.v && ts_shape_numel(&v->c.shape) > 0))
            st = ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "output %zu '%s' of its %s is computed by no node tensorscope imports", o,
                                    name ? name : "", what);
        else st = carried(im, v, &out[o]);
        if (st) {
            free_values(out, (int)o);
            return st;
        }
    }
    return TS_OK;
}

/* The refusal of control flow that depends on the graph's tensors. */
static ts_status refuse_dynamic(importer *im, const value *v, int input, const char *what) {
    const char *name = im->node->input[input];
    return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its %s '%s' is computed from the graph's tensors, not known at import%s: tensorscope "
                              "trains one static graph, and imports control flow whose %s folds to a constant. Write the model without Python "
                              "control flow on tensor values (torch.where on both results for an if; a loop over a fixed range)",
                              what, name, ts_onnx_bind_hint(v), what);
}

/* parts[0..n) (one shape, one type) stacked along a new axis `axis`, in
 * reverse order when `reverse`: Loop's and Scan's scan outputs. */
static ts_status stack(importer *im, value *parts, int64_t n, int64_t axis, bool reverse, const char *what, value *out) {
    const ts_shape *p = shape_of(&parts[0]);
    if (axis < -(p->ndim + 1) || axis > p->ndim)
        return ts_onnx_node_error(im, TS_ERR_FORMAT, "the axis %lld of %s is outside its %d dimensions", (long long)axis, what, p->ndim + 1);
    if (p->ndim + 1 > TS_MAX_DIMS) return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "%s would have more than %d dimensions", what, TS_MAX_DIMS);
    int ax = (int)(axis < 0 ? axis + p->ndim + 1 : axis);
    ts_shape one = {.ndim = p->ndim + 1}, all;
    for (int d = 0, k = 0; d < one.ndim; d++) one.d[d] = d == ax ? 1 : p->d[k++];
    all = one;
    all.d[ax] = n;
    bool consts = true;
    for (int64_t i = 0; i < n; i++) {
        if (!ts_shape_equal(shape_of(&parts[i]), p))
            return ts_onnx_node_error(im, TS_ERR_SHAPE, "%s has parts of different shapes (iteration %lld); tensorscope stacks equal ones", what,
                                      (long long)i);
        consts = consts && is_const(&parts[i]) && parts[i].c.dtype == parts[0].c.dtype;
    }
    memset(out, 0, sizeof *out);
    if (consts) { /* outer x n x inner values */
        int64_t inner = ts_shape_numel(p), outer = 1;
        for (int d = 0; d < ax; d++) outer *= p->d[d];
        inner /= outer ? outer : 1;
        ts_status st = ts_const_fill(&all, parts[0].c.dtype, 0, &out->c);
        for (int64_t i = 0; !st && i < n; i++) {
            const double *src = parts[reverse ? n - 1 - i : i].c.v;
            for (int64_t o = 0; o < outer; o++) memcpy(out->c.v + (o * n + i) * inner, src + o * inner, (size_t)inner * sizeof(double));
        }
        return ts_onnx_fold_result(im, st);
    }
    ts_tensor **xs = ts_malloc((size_t)n * sizeof *xs);
    if (!xs) return TS_ERR_OUT_OF_MEMORY;
    ts_status st = TS_OK;
    for (int64_t i = 0; !st && i < n; i++) {
        ts_tensor *t = ts_onnx_as_tensor(im, &parts[reverse ? n - 1 - i : i], &st);
        xs[i] = t ? ts_reshape(im->g, t, one.ndim, one.d) : NULL;
        if (t && !xs[i]) st = ts_graph_status(im->g);
    }
    if (!st) st = ts_onnx_built(im, n == 1 ? xs[0] : ts_concat(im->g, xs, (int)n, ax), out);
    ts_free(xs);
    return st;
}

/* x's `len` slices from `at` along `axis`, that axis kept (`keep`) or, of
 * one slice, dropped: Scan's inputs, SplitToSequence's parts. */
static ts_status slice_along(importer *im, value *x, int axis, int64_t at, int64_t len, bool keep, value *out) {
    const ts_shape *s = shape_of(x);
    ts_shape r = {.ndim = keep ? s->ndim : s->ndim - 1};
    for (int d = 0, k = 0; d < s->ndim; d++)
        if (keep || d != axis) r.d[k++] = d == axis ? len : s->d[d];
    memset(out, 0, sizeof *out);
    if (is_const(x) && !x->param) {
        int64_t inner = 1, outer = 1;
        for (int d = 0; d < s->ndim; d++) {
            if (d < axis) outer *= s->d[d];
            if (d > axis) inner *= s->d[d];
        }
        ts_status st = ts_const_fill(&r, x->c.dtype, 0, &out->c);
        for (int64_t o = 0; !st && o < outer; o++)
            memcpy(out->c.v + o * len * inner, x->c.v + (o * s->d[axis] + at) * inner, (size_t)(len * inner) * sizeof(double));
        return ts_onnx_fold_result(im, st);
    }
    ts_status st = TS_OK;
    ts_tensor *t = ts_onnx_as_tensor(im, x, &st), *part = t ? ts_slice(im->g, t, axis, at, len) : NULL;
    if (t && !part) st = ts_graph_status(im->g);
    return part ? ts_onnx_built(im, keep ? part : ts_reshape(im->g, part, r.ndim, r.d), out) : st;
}

ts_status ts_onnx_op_if(importer *im, node_io *io) {
    double c = 0;
    if (!ts_onnx_const_scalar(io->in[0], &c)) return refuse_dynamic(im, io->in[0], 0, "condition");
    const char *which = c != 0 ? "then_branch" : "else_branch";
    const TensorscopeOnnx__GraphProto *gp = attr_graph(im, which);
    if (!gp) return ts_onnx_node_error(im, TS_ERR_FORMAT, "it has no graph attribute '%s'", which);
    if (gp->n_output != (size_t)io->n_out)
        return ts_onnx_node_error(im, TS_ERR_FORMAT, "its %s has %zu outputs where the node has %d", which, gp->n_output, io->n_out);
    return import_body(im, gp, NULL, 0, io->out, which);
}

/* Loop's and Scan's scan outputs: each iteration's value of each, grown. */
typedef struct scans {
    value *v[MAX_NODE_IO];
    int64_t n, cap;
    int k;
} scans;

static ts_status scans_add(importer *im, scans *s, value *outs) {
    if (s->n == s->cap) {
        int64_t cap = s->cap ? s->cap * 2 : 16;
        for (int j = 0; j < s->k; j++) {
            value *v = ts_realloc(s->v[j], (size_t)cap * sizeof *v);
            if (!v) return ts_onnx_node_error(im, TS_ERR_OUT_OF_MEMORY, "out of memory unrolling its body");
            s->v[j] = v;
        }
        s->cap = cap;
    }
    for (int j = 0; j < s->k; j++) s->v[j][s->n] = outs[j];
    s->n++;
    return TS_OK;
}

static void scans_free(scans *s) {
    for (int j = 0; j < s->k; j++) {
        for (int64_t i = 0; i < s->n; i++) ts_const_free(&s->v[j][i].c);
        ts_free(s->v[j]);
    }
}

/* The stacked scan outputs into out[0..s->k), axes[j] and reverse[j] each
 * (NULL: 0 and forward). */
static ts_status scans_stack(importer *im, scans *s, const int64_t *axes, const int64_t *reverse, value *out) {
    for (int j = 0; j < s->k; j++) {
        char what[64];
        snprintf(what, sizeof what, "scan output %d", j);
        if (s->n == 0)
            return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its body runs no iteration, so the shape of %s is not known at import", what);
        ts_status st = stack(im, s->v[j], s->n, axes ? axes[j] : 0, reverse && reverse[j], what, &out[j]);
        if (st) {
            free_values(out, j);
            return st;
        }
    }
    return TS_OK;
}

ts_status ts_onnx_op_loop(importer *im, node_io *io) {
    const TensorscopeOnnx__GraphProto *gp = attr_graph(im, "body");
    if (!gp) return ts_onnx_node_error(im, TS_ERR_FORMAT, "it has no graph attribute 'body'");
    int n_carried = io->n_in - 2, n_scan = io->n_out - (io->n_in - 2);
    if (n_carried < 0 || n_scan < 0 || gp->n_input != (size_t)n_carried + 2 || gp->n_output != (size_t)(n_carried + n_scan) + 1)
        return ts_onnx_node_error(im, TS_ERR_FORMAT, "its body has %zu inputs and %zu outputs; a Loop of %d inputs and %d outputs has %d and %d",
                                  gp->n_input, gp->n_output, io->n_in, io->n_out, n_carried + 2, n_carried + n_scan + 1);
    double m = -1, c = 1;
    if (io->in[0] && !ts_onnx_const_scalar(io->in[0], &m)) return refuse_dynamic(im, io->in[0], 0, "trip count M");
    if (io->in[1] && !ts_onnx_const_scalar(io->in[1], &c)) return refuse_dynamic(im, io->in[1], 1, "condition");
    if (io->in[0] && !(m >= 0)) return ts_onnx_node_error(im, TS_ERR_FORMAT, "its trip count M is %g", m);
    value carry[MAX_NODE_IO], outs[2 * MAX_NODE_IO + 1];
    scans sc = {.k = n_scan};
    ts_status st = TS_OK;
    int made = 0;
    for (; !st && made < n_carried; made++) {
        if (!io->in[2 + made]) st = ts_onnx_node_error(im, TS_ERR_FORMAT, "its loop-carried input %d is missing", made);
        else st = carried(im, io->in[2 + made], &carry[made]);
    }
    if (st) made--;
    for (int64_t it = 0; !st && (m < 0 || (double)it < m) && c != 0; it++) {
        value iter, cond, *in[MAX_NODE_IO + 2] = {&iter, &cond};
        for (int i = 0; i < n_carried; i++) in[2 + i] = &carry[i];
        char what[64];
        snprintf(what, sizeof what, "body (iteration %lld)", (long long)it);
        st = scalar_value(im, TS_ONNX_INT64, (double)it, &iter);
        if (!st && !(st = scalar_value(im, TS_ONNX_BOOL, 1, &cond))) {
            st = import_body(im, gp, in, n_carried + 2, outs, what);
            ts_const_free(&cond.c);
        }
        ts_const_free(&iter.c);
        if (st) break;
        if (!ts_onnx_const_scalar(&outs[0], &c))
            st = ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "the condition its body computes at iteration %lld ('%s') is computed from the graph's "
                                    "tensors, not known at import: tensorscope trains one static graph and unrolls a Loop whose trip count and "
                                    "condition fold to constants. Write the model without a loop whose end depends on tensor values",
                                    (long long)it, gp->output[0]->name ? gp->output[0]->name : "");
        for (int i = 0; !st && i < n_carried; i++) {
            ts_const_free(&carry[i].c);
            carry[i] = outs[1 + i];
            outs[1 + i] = (value){0};
        }
        if (!st && !(st = scans_add(im, &sc, outs + 1 + n_carried)))
            for (int j = 0; j < n_scan; j++) outs[1 + n_carried + j] = (value){0};
        free_values(outs, n_carried + n_scan + 1);
    }
    if (!st) st = scans_stack(im, &sc, NULL, NULL, io->out + n_carried);
    for (int i = 0; !st && i < n_carried; i++) io->out[i] = carry[i], carry[i] = (value){0};
    free_values(carry, st ? made : 0);
    scans_free(&sc);
    return st;
}

/* -------------------------------------------------------------- sequences */

/* ONNX's sequences hold the values a Loop's body adds one per iteration
 * (the dynamo exporter's EmbeddingBag: SequenceEmpty, SequenceInsert in
 * the body, ConcatFromSequence after). The Loop unrolled, each is a list
 * known at import: its values are graph tensors or constants, and
 * ConcatFromSequence is a Concat (or stack) of them. */

bool ts_onnx_takes_sequences(const char *op_type) {
    return strncmp(op_type, "Sequence", 8) == 0 || strcmp(op_type, "ConcatFromSequence") == 0 || strcmp(op_type, "Loop") == 0;
}

void ts_onnx_seqs_free(importer *im) {
    for (size_t i = 0; i < im->n_seqs; i++) {
        free_values(im->seqs[i].items, (int)im->seqs[i].n);
        ts_free(im->seqs[i].items);
    }
    ts_free(im->seqs);
    im->seqs = NULL;
    im->n_seqs = im->cap_seqs = 0;
}

/* The sequence input `i` is, or an error. */
static ts_status seq_in(importer *im, node_io *io, int i, ts_onnx_seq **out) {
    value *v = io->in[i];
    if (!v || !v->seq || v->seq > im->n_seqs)
        return ts_onnx_node_error(im, TS_ERR_FORMAT, "its input %d ('%s') is %s; %s takes a sequence there", i, im->node->input[i],
                                  v ? "a tensor" : "missing", im->node->op_type);
    *out = &im->seqs[v->seq - 1];
    return TS_OK;
}

/* A position in a sequence of n values (input i, a constant scalar;
 * negative: from the end), in [0, n] where `end` (an insert), [0, n)
 * otherwise; absent: `def`. */
static ts_status seq_position(importer *im, node_io *io, int i, int64_t n, bool end, int64_t def, int64_t *out) {
    *out = def;
    if (io->n_in <= i || !io->in[i]) return TS_OK;
    double p;
    ts_status st = TS_OK;
    if (!ts_onnx_setting_scalar(im, io->in[i], &p, &st))
        return st ? st : ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its position ('%s') is computed from the graph's tensors; tensorscope "
                                            "builds sequences at import, at constant positions", im->node->input[i]);
    int64_t at = p != floor(p) || !(fabs(p) <= (double)n) ? -1 : p < 0 ? (int64_t)p + n : (int64_t)p;
    if (at < 0 || at > (end ? n : n - 1))
        return ts_onnx_node_error(im, TS_ERR_FORMAT, "its position %g is outside the sequence of %lld values", p, (long long)n);
    *out = at;
    return TS_OK;
}

/* A new sequence into *out: the values from[0..n) but for the one at
 * `skip` (-1: none), `extra` (NULL: none) placed at `at`. */
static ts_status seq_make(importer *im, const value *from, int64_t n, int64_t skip, value *extra, int64_t at, value *out) {
    if (ts_grow((void **)&im->seqs, &im->cap_seqs, im->n_seqs + 1, sizeof *im->seqs)) return TS_ERR_OUT_OF_MEMORY;
    int64_t total = n - (skip >= 0) + (extra != NULL), k = 0;
    value *items = ts_malloc((size_t)(total ? total : 1) * sizeof *items);
    if (!items) return TS_ERR_OUT_OF_MEMORY;
    ts_status st = TS_OK;
    for (int64_t i = 0; !st && i <= n; i++) {
        if (extra && i == at) st = carried(im, extra, &items[k++]);
        if (!st && i < n && i != skip) st = carried(im, (value *)&from[i], &items[k++]);
    }
    if (st) {
        free_values(items, (int)k);
        ts_free(items);
        return st;
    }
    im->seqs[im->n_seqs++] = (ts_onnx_seq){items, total};
    memset(out, 0, sizeof *out);
    out->seq = im->n_seqs;
    return TS_OK;
}

/* SequenceEmpty, SequenceConstruct, SequenceInsert, SequenceErase,
 * SequenceAt and SequenceLength. */
ts_status ts_onnx_op_sequence(importer *im, node_io *io) {
    const char *op = im->node->op_type + 8;
    ts_onnx_seq *s = NULL;
    int64_t at;
    ts_status st;
    if (strcmp(op, "Empty") == 0) return seq_make(im, NULL, 0, -1, NULL, 0, &io->out[0]);
    if (strcmp(op, "Construct") == 0) {
        value parts[MAX_NODE_IO];
        for (int i = 0; i < io->n_in; i++) {
            if (!io->in[i] || io->in[i]->seq) return ts_onnx_node_error(im, TS_ERR_FORMAT, "its input %d is %s; it takes tensors", i, io->in[i] ? "a sequence" : "missing");
            parts[i] = *io->in[i];
        }
        return seq_make(im, parts, io->n_in, -1, NULL, 0, &io->out[0]);
    }
    if ((st = seq_in(im, io, 0, &s))) return st;
    if (strcmp(op, "Length") == 0) return scalar_value(im, TS_ONNX_INT64, (double)s->n, &io->out[0]);
    if (strcmp(op, "Insert") == 0) {
        if (io->in[1]->seq) return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its input 1 is a sequence; tensorscope inserts tensors");
        return (st = seq_position(im, io, 2, s->n, true, s->n, &at)) ? st : seq_make(im, s->items, s->n, -1, io->in[1], at, &io->out[0]);
    }
    if (s->n == 0) return ts_onnx_node_error(im, TS_ERR_FORMAT, "its sequence is empty");
    if (strcmp(op, "Erase") == 0) return (st = seq_position(im, io, 1, s->n, false, s->n - 1, &at)) ? st : seq_make(im, s->items, s->n, at, NULL, 0, &io->out[0]);
    if ((st = seq_position(im, io, 1, s->n, false, 0, &at))) return st; /* SequenceAt */
    return carried(im, &s->items[at], &io->out[0]);
}

/* SplitToSequence: x's parts along `axis`, of the sizes `split` gives (a
 * constant: a scalar, every part that long but the last, or a list), or
 * each one long, the axis dropped unless keepdims. */
ts_status ts_onnx_op_split_to_sequence(importer *im, node_io *io) {
    value *x = io->in[0], *sv = io->n_in > 1 ? io->in[1] : NULL;
    const ts_shape *s = shape_of(x);
    int axis, keep;
    ts_status st = ts_onnx_attr_axis(im, "axis", 0, s->ndim, false, &axis);
    if (st || (st = ts_onnx_attr_int32(im, "keepdims", 1, 0, 1, &keep))) return st;
    if (sv && (st = ts_onnx_decoded(im, sv))) return st;
    if (sv && (!is_const(sv) || sv->seq || sv->c.shape.ndim > 1))
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its split ('%s') must be a constant scalar or list%s", im->node->input[1], ts_onnx_bind_hint(sv));
    int64_t dim = s->d[axis], n = sv ? (sv->c.shape.ndim ? sv->c.shape.d[0] : 0) : dim, chunk = 1;
    if (sv && !sv->c.shape.ndim) { /* a scalar: parts of that length, the last what is left */
        double c = sv->c.v[0];
        if (!(c >= 1) || c != floor(c)) return ts_onnx_node_error(im, TS_ERR_FORMAT, "its split %g is not a positive length", c);
        chunk = c < (double)dim ? (int64_t)c : dim;
        n = (dim + chunk - 1) / chunk;
    }
    value *parts = ts_malloc((size_t)(n ? n : 1) * sizeof *parts);
    if (!parts) return TS_ERR_OUT_OF_MEMORY;
    int64_t at = 0, made = 0;
    for (; !st && made < n; made++) {
        double want = sv && sv->c.shape.ndim ? sv->c.v[made] : (double)(chunk < dim - at ? chunk : dim - at);
        int64_t len = want >= 1 && want <= (double)(dim - at) && want == floor(want) ? (int64_t)want : -1;
        if (len < 1)
            st = ts_onnx_node_error(im, TS_ERR_FORMAT, "its split does not cut the %lld along axis %d into positive parts", (long long)dim, axis);
        else st = slice_along(im, x, axis, at, len, sv || keep, &parts[made]);
        at += len;
    }
    if (!st && at != dim)
        st = ts_onnx_node_error(im, TS_ERR_FORMAT, "its split sums to %lld, not the %lld along axis %d", (long long)at, (long long)dim, axis);
    if (!st) st = seq_make(im, parts, n, -1, NULL, 0, &io->out[0]);
    free_values(parts, (int)made);
    ts_free(parts);
    return st;
}

/* ConcatFromSequence: the values joined along `axis`, or stacked along a
 * new one (new_axis 1); values of one shape through stack (constants
 * folded), others a Concat of graph tensors. */
ts_status ts_onnx_op_concat_from_sequence(importer *im, node_io *io) {
    ts_onnx_seq *s = NULL;
    int new_axis;
    ts_status st = seq_in(im, io, 0, &s);
    if (st || (st = ts_onnx_attr_int32(im, "new_axis", 0, 0, 1, &new_axis))) return st;
    if (!ts_onnx_attr(im, "axis")) return ts_onnx_node_error(im, TS_ERR_FORMAT, "its attribute 'axis' is missing");
    if (s->n == 0) return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its sequence is empty, so the shape of its result is not known at import");
    const ts_shape *p = shape_of(&s->items[0]);
    int axis;
    if ((st = ts_onnx_attr_axis(im, "axis", 0, p->ndim + new_axis, false, &axis))) return st;
    if (new_axis) return stack(im, s->items, s->n, axis, false, "its result", &io->out[0]);
    bool alike = true;
    for (int64_t i = 1; alike && i < s->n; i++) alike = ts_shape_equal(shape_of(&s->items[i]), p);
    if (alike) { /* stacked at axis, that axis and the next merged */
        ts_shape to = *p;
        to.d[axis] *= s->n;
        value *out = &io->out[0];
        if ((st = stack(im, s->items, s->n, axis, false, "its result", out))) return st;
        if (!out->t) {
            out->c.shape = to;
            return TS_OK;
        }
        out->t = ts_reshape(im->g, out->t, to.ndim, to.d);
        return out->t ? TS_OK : ts_graph_status(im->g);
    }
    ts_tensor **xs = ts_malloc((size_t)s->n * sizeof *xs);
    if (!xs) return TS_ERR_OUT_OF_MEMORY;
    for (int64_t i = 0; !st && i < s->n; i++) xs[i] = ts_onnx_as_tensor(im, &s->items[i], &st);
    if (!st) st = ts_onnx_built(im, ts_concat(im->g, xs, (int)s->n, axis), &io->out[0]);
    ts_free(xs);
    return st;
}

/* Scan's iterations over seq[0..n_seq) (their sequences along in_axes,
 * from the end where in_rev), the states state[0..n_state) threaded:
 * out[0..n_state) the final states, then n_scan_out scan outputs stacked
 * along out_axes (reversed where out_rev). */
static ts_status scan_unrolled(importer *im, const TensorscopeOnnx__GraphProto *gp, value **state_in, int n_state, value **seq, int n_seq,
                               const int64_t *in_axes, const int64_t *in_rev, int n_scan_out, const int64_t *out_axes,
                               const int64_t *out_rev, value *out) {
    int64_t len = -1, axes[MAX_NODE_IO];
    for (int j = 0; j < n_seq; j++) {
        const ts_shape *s = shape_of(seq[j]);
        if (in_axes[j] < -s->ndim || in_axes[j] >= s->ndim)
            return ts_onnx_node_error(im, TS_ERR_FORMAT, "the scan axis %lld of scan input %d is outside its %d dimensions", (long long)in_axes[j],
                                      j, s->ndim);
        axes[j] = in_axes[j] < 0 ? in_axes[j] + s->ndim : in_axes[j];
        int64_t l = s->d[axes[j]];
        if (len >= 0 && l != len)
            return ts_onnx_node_error(im, TS_ERR_SHAPE, "its scan inputs have sequence lengths %lld and %lld; they must be equal", (long long)len,
                                      (long long)l);
        len = l;
    }
    value state[MAX_NODE_IO], slices[MAX_NODE_IO], outs[MAX_NODE_IO];
    scans sc = {.k = n_scan_out};
    ts_status st = TS_OK;
    int made = 0;
    for (; !st && made < n_state; made++) st = carried(im, state_in[made], &state[made]);
    if (st) made--;
    for (int64_t t = 0; !st && t < len; t++) {
        value *in[MAX_NODE_IO];
        int sliced = 0;
        for (int i = 0; i < n_state; i++) in[i] = &state[i];
        for (; !st && sliced < n_seq; sliced++) {
            in[n_state + sliced] = &slices[sliced];
            st = slice_along(im, seq[sliced], (int)axes[sliced], in_rev[sliced] ? len - 1 - t : t, 1, false, &slices[sliced]);
        }
        char what[64];
        snprintf(what, sizeof what, "body (iteration %lld)", (long long)t);
        if (!st) st = import_body(im, gp, in, n_state + n_seq, outs, what);
        free_values(slices, sliced); /* a slice that failed is zeroed */
        if (st) break;
        for (int i = 0; i < n_state; i++) {
            ts_const_free(&state[i].c);
            state[i] = outs[i];
            outs[i] = (value){0};
        }
        if (!(st = scans_add(im, &sc, outs + n_state)))
            for (int j = 0; j < n_scan_out; j++) outs[n_state + j] = (value){0};
        free_values(outs, n_state + n_scan_out);
    }
    if (!st) st = scans_stack(im, &sc, out_axes, out_rev, out + n_state);
    for (int i = 0; !st && i < n_state; i++) out[i] = state[i], state[i] = (value){0};
    free_values(state, st ? made : 0);
    scans_free(&sc);
    return st;
}

/* Scan: from opset 9 its inputs are the states, then num_scan_inputs
 * sequences along scan_input_axes; opset 8's are sequence_lens (absent, or
 * every length the sequence's), then states and sequences of a batch
 * (dim 0; the sequence is dim 1): each batch row scanned on its own, the
 * results stacked along dim 0. */
ts_status ts_onnx_op_scan(importer *im, node_io *io) {
    const TensorscopeOnnx__GraphProto *gp = attr_graph(im, "body");
    if (!gp) return ts_onnx_node_error(im, TS_ERR_FORMAT, "it has no graph attribute 'body'");
    bool batched = !since(im, 9);
    int first = batched, n_in_scan;
    ts_status st = ts_onnx_attr_int32(im, "num_scan_inputs", 0, 1, io->n_in - first, &n_in_scan);
    if (st) return st;
    int n_state = io->n_in - first - n_in_scan, n_out_scan = io->n_out - n_state;
    if (n_out_scan < 0 || gp->n_input != (size_t)(io->n_in - first) || gp->n_output != (size_t)io->n_out)
        return ts_onnx_node_error(im, TS_ERR_FORMAT, "its body has %zu inputs and %zu outputs; this Scan needs %d and %d", gp->n_input,
                                  gp->n_output, io->n_in - first, io->n_out);
    int64_t in_axes[MAX_NODE_IO] = {0}, in_rev[MAX_NODE_IO] = {0}, out_axes[MAX_NODE_IO] = {0}, out_rev[MAX_NODE_IO] = {0};
    int n;
    if ((st = ts_onnx_attr_int_list(im, batched ? "directions" : "scan_input_directions", 0, 1, in_rev, n_in_scan, &n)) ||
        (!batched && (st = ts_onnx_attr_int_list(im, "scan_input_axes", -TS_MAX_DIMS, TS_MAX_DIMS - 1, in_axes, n_in_scan, &n))) ||
        (!batched && (st = ts_onnx_attr_int_list(im, "scan_output_axes", -TS_MAX_DIMS, TS_MAX_DIMS - 1, out_axes, n_out_scan, &n))) ||
        (!batched && (st = ts_onnx_attr_int_list(im, "scan_output_directions", 0, 1, out_rev, n_out_scan, &n))))
        return st;
    for (int j = first; j < io->n_in; j++)
        if (!io->in[j]) return ts_onnx_node_error(im, TS_ERR_FORMAT, "its input %d is missing", j);
    value **states = io->in + first, **seqs = io->in + first + n_state;
    if (!batched) return scan_unrolled(im, gp, states, n_state, seqs, n_in_scan, in_axes, in_rev, n_out_scan, out_axes, out_rev, io->out);
    const ts_shape *s0 = shape_of(io->in[first]);
    int64_t rows = s0->ndim ? s0->d[0] : 0, len = -1;
    for (int j = first; j < io->n_in; j++) {
        const ts_shape *s = shape_of(io->in[j]);
        if (s->ndim < (j >= first + n_state ? 2 : 1) || s->d[0] != rows)
            return ts_onnx_node_error(im, TS_ERR_SHAPE, "its input %d is not [batch%s] of the batch %lld of its first", j,
                                      j >= first + n_state ? ", sequence, ..." : ", ...", (long long)rows);
        if (j >= first + n_state) len = s->d[1];
    }
    double l;
    for (int64_t i = 0; io->in[0] && i < ts_shape_numel(shape_of(io->in[0])); i++)
        if (!is_const(io->in[0]) || io->in[0]->param || (l = io->in[0]->c.v[i]) != (double)len)
            return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its sequence_lens %s; tensorscope scans every row's whole sequence (%lld steps): "
                                      "leave sequence_lens out", is_const(io->in[0]) ? "differ from the sequence's length" : "are computed from "
                                      "the graph's tensors", (long long)len);
    for (int j = 0; j < n_in_scan; j++) in_axes[j] = 0; /* the sequence of a row */
    value part[MAX_NODE_IO], outs[MAX_NODE_IO], *row_in[MAX_NODE_IO];
    scans per_row = {.k = io->n_out};
    for (int64_t b = 0; !st && b < rows; b++) {
        int k = 0;
        for (; !st && k < io->n_in - first; k++) {
            row_in[k] = &part[k];
            st = slice_along(im, io->in[first + k], 0, b, 1, false, &part[k]);
        }
        if (!st) st = scan_unrolled(im, gp, row_in, n_state, row_in + n_state, n_in_scan, in_axes, in_rev, n_out_scan, out_axes, out_rev, outs);
        free_values(part, k);
        if (!st && (st = scans_add(im, &per_row, outs))) free_values(outs, io->n_out);
    }
    if (!st) st = scans_stack(im, &per_row, NULL, NULL, io->out);
    scans_free(&per_row);
    return st;
}
