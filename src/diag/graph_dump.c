/* graph_dump.c -- the graph as text or Graphviz DOT (docs/observation.md#diagnostics): every
 * node with its op, inputs, shape, dtype and what observes it, optionally
 * where it was built. With a compiled model the shapes are the compiled
 * ones and the flags say what the program really does with each tensor. */
#include "diag/graph_dump.h"

#include "graph/ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a growing string; the first failed allocation sticks */

typedef struct dump_buf {
    char *p;
    size_t len, cap;
    bool failed;
} dump_buf;

static void put_raw(dump_buf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (b->len + n + 1 > cap) cap *= 2;
        char *p = ts_realloc(b->p, cap);
        if (!p) {
            b->failed = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void put(dump_buf *b, const char *s) { put_raw(b, s, strlen(s)); }

static void putf(dump_buf *b, const char *fmt, ...) TS_PRINTF(2, 3);
static void putf(dump_buf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        put_raw(b, tmp, (size_t)n);
        return;
    }
    char *big = ts_malloc((size_t)n + 1);
    if (!big) {
        b->failed = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    put_raw(b, big, (size_t)n);
    ts_free(big);
}

/* ---- what the model does with each node */

/* Entry kinds of a node that are anchored / watched, as bit masks. */
typedef struct node_flags {
    unsigned anchored, watched;
    bool outfeed;
} node_flags;

static const char *const kind_word[] = {"value", "grad", "accum", "updated", "accl", "accl1", "accl2", "step"};

static ts_status collect_flags(const ts_graph *g, const ts_bwd_model *m, node_flags **out) {
    node_flags *f = ts_calloc(g->n ? g->n : 1, sizeof *f);
    if (!f) return TS_ERR_OUT_OF_MEMORY;
    for (size_t k = 0; k < g->n_marks; k++)
        if (g->marks[k].tensor >= 0 && (size_t)g->marks[k].tensor < g->n) f[g->marks[k].tensor].outfeed = true;
    const ts_prog *p = m ? m->prog : NULL;
    for (int e = 0; p && e < p->n_entries; e++) {
        const ts_entry *en = &p->entries[e];
        if (en->node < 0 || (size_t)en->node >= g->n) continue;
        node_flags *nf = &f[en->node];
        if (en->n_anchors) nf->anchored |= 1u << en->kind;
        if (en->watch >= 0) nf->watched |= 1u << en->kind;
        if (en->n_outfeeds) nf->outfeed = true;
    }
    *out = f;
    return TS_OK;
}

/* "anchored" when only the value is; "anchored(grad,updated)" otherwise. */
static void flag_words(char *buf, size_t n, const char *word, unsigned mask) {
    if (mask == 1u) {
        snprintf(buf, n, "%s", word);
        return;
    }
    size_t used = (size_t)snprintf(buf, n, "%s(", word);
    bool first = true;
    for (unsigned k = 0; k < TS_ARRAY_LEN(kind_word) && used < n; k++)
        if (mask & (1u << k)) {
            used += (size_t)snprintf(buf + used, n - used, "%s%s", first ? "" : ",", kind_word[k]);
            first = false;
        }
    if (used < n) snprintf(buf + used, n - used, ")");
}

/* Shape the model computes for a node; the declared one without a model,
 * for nodes the model does not run, or added after compile. */
static const ts_shape *node_shape(const ts_tensor *t, const ts_bwd_model *m) {
    const ts_prog *p = m ? m->prog : NULL;
    return p && t->id < p->n_nodes && p->live[t->id] ? &p->shape[t->id] : &t->shape;
}

/* Flags, each as open + word + close: " [param] [grad] ..." in text. */
static void node_flag_text(dump_buf *b, const ts_tensor *t, const ts_bwd_model *m, const node_flags *f, const char *open,
                           const char *close) {
    const ts_prog *p = m ? m->prog : NULL;
    bool known = p && t->id < p->n_nodes;
    char w[160];
    if (t->op == TS_OP_PARAM) putf(b, "%sparam%s", open, close);
    if (t->op == TS_OP_BUFFER) putf(b, "%sbuffer%s", open, close);
    if (known && p->needs_grad[t->id]) putf(b, "%sgrad%s", open, close);
    if (f->anchored) {
        flag_words(w, sizeof w, "anchored", f->anchored);
        putf(b, "%s%s%s", open, w, close);
    }
    if (t->op == TS_OP_PRINT) putf(b, "%sprinted%s", open, close);
    if (f->watched) {
        flag_words(w, sizeof w, "watched", f->watched);
        putf(b, "%s%s%s", open, w, close);
    }
    if (f->outfeed) putf(b, "%soutfeed%s", open, close);
    if (m && m->training && t->id == m->loss) putf(b, "%sloss%s", open, close);
    if (known && !p->live[t->id]) putf(b, "%sunused%s", open, close);
}

/* A C-style quoted string: quotes, backslashes, control bytes and bytes
 * that are not UTF-8 escaped, so a print title stays on one line. */
static void put_quoted(dump_buf *b, const char *s) {
    put(b, "\"");
    for (const unsigned char *u = (const unsigned char *)s; *u;) {
        size_t n = ts_utf8_len((const char *)u);
        if (*u == '"' || *u == '\\') putf(b, "\\%c", *u);
        else if (*u == '\n') put(b, "\\n");
        else if (*u < 0x20 || *u == 0x7f || n == 0) putf(b, "\\x%02x", *u);
        else put_raw(b, (const char *)u, n);
        u += n ? n : 1;
    }
    put(b, "\"");
}

/* Op attributes that are not inputs: ", s=0.5", ", dim=1", ... */
static void node_attrs(dump_buf *b, const ts_tensor *t) {
    char s[96];
    switch (t->op) {
    case TS_OP_MATMUL_T: put(b, ", transpose_b=true"); break;
    case TS_OP_SCALE: putf(b, ", s=%g", (double)t->fparam); break;
    case TS_OP_LOG_SOFTMAX:
    case TS_OP_SOFTMAX: putf(b, ", dim=%d", t->iparam); break;
    case TS_OP_FLATTEN: putf(b, ", start_dim=%d", t->iparam); break;
    case TS_OP_RESHAPE: {
        size_t used = (size_t)snprintf(s, sizeof s, "[");
        for (int i = 0; i < t->sparam.ndim && used < sizeof s; i++)
            used += (size_t)snprintf(s + used, sizeof s - used, "%s%lld", i ? "," : "", (long long)t->sparam.d[i]);
        if (used < sizeof s) snprintf(s + used, sizeof s - used, "]");
        putf(b, ", shape=%s", s);
        break;
    }
    case TS_OP_PRINT:
        if (t->title && t->title[0]) {
            put(b, ", title=");
            put_quoted(b, t->title);
        }
        break;
    default: break;
    }
}

static bool want_locations(int flags) {
    return (flags & TS_DUMP_LOCATIONS) || ts_env_flag("TS_IR_DEBUG");
}

/* Flags of a derived entry: " [anchored] [watched] [outfeed]" in text. */
static void entry_flag_text(dump_buf *b, const ts_entry *e, const char *open, const char *close) {
    if (e->n_anchors) putf(b, "%sanchored%s", open, close);
    if (e->watch >= 0) putf(b, "%swatched%s", open, close);
    if (e->n_outfeeds) putf(b, "%soutfeed%s", open, close);
}

static const char *backward_heading(const ts_bwd_model *m, char *buf, size_t n) {
    int A = m->grad_accum;
    if (A == 1) snprintf(buf, n, "optimizer step, after every micro-batch%s", m->replicas > 1 ? " of every replica" : "");
    else snprintf(buf, n, "optimizer step, after every %d micro-batches%s", A, m->replicas > 1 ? " of every replica" : "");
    return buf;
}

/* ---- text */

static void dump_text(dump_buf *b, const ts_graph *g, const ts_bwd_model *m, const node_flags *flags, bool loc) {
    putf(b, "# tensorscope graph: %zu nodes, %s\n", g->n,
         !m || !m->prog ? "declared shapes"
                        : m->training ? "training model, compiled shapes" : "inference model, compiled shapes");
    for (size_t i = 0; i < g->n; i++) {
        const ts_tensor *t = g->t[i];
        char shape[160], where[600];
        putf(b, "%%%s = %s(", t->name, ts_op_get(t->op)->name);
        for (int j = 0; j < t->n_in; j++) putf(b, "%s%%%s", j ? ", " : "", g->t[t->in[j]]->name);
        node_attrs(b, t);
        putf(b, ") : %s%s", ts_dtype_name(t->grid != TS_F32 ? t->grid : t->dtype), ts_shape_str(node_shape(t, m), shape, sizeof shape));
        node_flag_text(b, t, m, &flags[i], " [", "]");
        if (loc) putf(b, " @ %s", ts_tensor_where(t, where, sizeof where));
        put(b, "\n");
    }
}

/* `%Gradient___a, %Gradient___b += AddBackward(%Gradient___c) : f32[..], f32[..]` */
static void dump_text_backward(dump_buf *b, const ts_bwd_model *m, const ts_bwd_op *ops, int n, bool loc) {
    const ts_prog *p = m->prog;
    char shape[160], where[600], heading[96];
    put(b, "# backward, once per micro-batch: each op's backward reads the gradient of its output and the forward\n"
           "# tensors it keeps, and adds (+=) into the gradients of its inputs\n");
    bool in_step = false;
    for (int k = 0; k < n; k++) {
        const ts_bwd_op *o = &ops[k];
        if (o->optimizer && !in_step) putf(b, "# %s\n", backward_heading(m, heading, sizeof heading));
        in_step = o->optimizer;
        for (int j = 0; j < o->n_out; j++) putf(b, "%s%%%s", j ? ", " : "", p->entries[o->out[j]].name);
        putf(b, " %s %s(", o->accumulates ? "+=" : "=", o->op);
        for (int j = 0; j < o->n_in; j++) putf(b, "%s%%%s", j ? ", " : "", p->entries[o->in[j]].name);
        putf(b, "%s) :", o->attrs);
        for (int j = 0; j < o->n_out; j++) { /* each output's flags after its shape */
            const ts_entry *e = &p->entries[o->out[j]];
            putf(b, "%s %s%s", j ? "," : "", ts_dtype_name(e->grid != TS_F32 ? e->grid : e->dtype), ts_shape_str(&e->shape, shape, sizeof shape));
            entry_flag_text(b, e, " [", "]");
        }
        if (loc) putf(b, " @ %s", ts_tensor_where(o->src, where, sizeof where));
        put(b, "\n");
    }
}

/* ---- DOT */

/* Text inside a DOT "..." label: quotes and backslashes escaped (Graphviz
 * reads \\ as a backslash in labels), newlines as \n, other control bytes
 * and invalid UTF-8 as '?'. */
static void put_dot_escaped(dump_buf *b, const char *s) {
    const unsigned char *u = (const unsigned char *)s;
    while (*u) {
        if (*u == '"' || *u == '\\') {
            char esc[2] = {'\\', (char)*u};
            put_raw(b, esc, 2);
            u++;
        } else if (*u == '\n') {
            put(b, "\\n");
            u++;
        } else if (*u < 0x20 || *u == 0x7f) {
            put(b, "?");
            u++;
        } else {
            size_t n = ts_utf8_len((const char *)u);
            if (n == 0 || (u[0] == 0xc2 && u[1] <= 0x9f)) { /* not UTF-8, or a C1 control */
                put(b, "?");
                u++;
            } else {
                put_raw(b, (const char *)u, n);
                u += n;
            }
        }
    }
}

/* label="...": the label built unescaped, escaped whole, then freed */
static void put_dot_label(dump_buf *b, dump_buf *label) {
    put(b, "label=\"");
    put_dot_escaped(b, label->p ? label->p : "");
    put(b, "\"");
    if (label->failed) b->failed = true;
    ts_free(label->p);
}

static void dump_dot(dump_buf *b, const ts_graph *g, const ts_bwd_model *m, const node_flags *flags, bool loc) {
    put(b, "digraph tensorscope {\n");
    put(b, "  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n  edge [color=\"#555555\"];\n");
    for (size_t i = 0; i < g->n; i++) {
        const ts_tensor *t = g->t[i];
        const node_flags *f = &flags[i];
        char shape[160], where[600];
        /* build the label unescaped, then escape it whole */
        dump_buf label = {0};
        put(&label, t->name);
        put(&label, "\n");
        put(&label, ts_op_get(t->op)->name);
        if (t->op != TS_OP_INPUT && !ts_op_holds_value(t->op)) {
            dump_buf attrs = {0};
            node_attrs(&attrs, t);
            if (attrs.len) putf(&label, "(%s)", attrs.p + 2); /* drop the leading ", " */
            if (attrs.failed) label.failed = true;
            ts_free(attrs.p);
        }
        putf(&label, "\n%s%s", ts_dtype_name(t->grid != TS_F32 ? t->grid : t->dtype), ts_shape_str(node_shape(t, m), shape, sizeof shape));
        dump_buf fl = {0};
        node_flag_text(&fl, t, m, f, " ", "");
        if (fl.len) putf(&label, "\n%s", fl.p + 1);
        if (fl.failed) label.failed = true;
        ts_free(fl.p);
        if (loc) putf(&label, "\n%s", ts_tensor_where(t, where, sizeof where));

        const char *node_shape_attr = t->op == TS_OP_INPUT ? "ellipse" : "box";
        const char *style = ts_op_holds_value(t->op) || t->op == TS_OP_INPUT ? "filled" : "rounded,filled";
        /* anchored: amber; watched: blue; both: green; params grey */
        const char *fill = f->anchored && f->watched ? "#aed581"
                           : f->anchored             ? "#ffd54f"
                           : f->watched              ? "#81d4fa"
                           : ts_op_holds_value(t->op) ? "#e0e0e0"
                                                     : "#ffffff";
        putf(b, "  n%zu [", i);
        put_dot_label(b, &label);
        putf(b, ", shape=%s, style=\"%s\", fillcolor=\"%s\"%s];\n", node_shape_attr, style, fill,
             f->anchored || f->watched || t->op == TS_OP_PRINT ? ", penwidth=2" : "");
    }
    for (size_t i = 0; i < g->n; i++) {
        const ts_tensor *t = g->t[i];
        for (int j = 0; j < t->n_in; j++)
            putf(b, "  n%d -> n%zu%s;\n", t->in[j], i,
                 ts_op_int_input(t->op, j) ? " [style=dashed]" : "");
    }
}

/* A DOT node id for an entry: forward values are the graph's nodes. */
static void put_dot_ref(dump_buf *b, const ts_prog *p, int e) {
    if (p->entries[e].kind == TS_KIND_VALUE) putf(b, "n%d", p->entries[e].node);
    else putf(b, "e%d", e);
}

/* The derived tensors (gradients in the backward cluster, the rest in the
 * optimizer's) as notes, each op as a rounded box, edges from what it reads
 * (forward values included) to what it writes; optimizer state is read and
 * written: one edge with arrows both ways. */
static void dump_dot_backward(dump_buf *b, const ts_bwd_model *m, const ts_bwd_op *ops, int n, bool loc) {
    const ts_prog *p = m->prog;
    bool *drawn = ts_calloc((size_t)p->n_entries + 1, sizeof *drawn);
    if (!drawn) {
        b->failed = true;
        return;
    }
    char shape[160], where[600], heading[96];
    for (int cluster = 0; cluster < 2; cluster++) {
        putf(b, "  subgraph cluster_%s {\n    label=\"%s\";\n    style=dashed;\n    color=\"#888888\";\n",
             cluster ? "optimizer" : "backward", cluster ? backward_heading(m, heading, sizeof heading) : "backward, once per micro-batch");
        for (int k = 0; k < n; k++) {
            const ts_bwd_op *o = &ops[k];
            if (o->optimizer != (cluster == 1)) continue;
            for (int side = 0; side < 2; side++)
                for (int j = 0; j < (side ? o->n_out : o->n_in); j++) {
                    int e = side ? o->out[j] : o->in[j];
                    const ts_entry *en = &p->entries[e];
                    if (en->kind == TS_KIND_VALUE || drawn[e] || (en->kind == TS_KIND_GRAD) != (cluster == 0)) continue;
                    drawn[e] = true;
                    dump_buf label = {0};
                    putf(&label, "%s\n%s%s", en->name, ts_dtype_name(en->grid != TS_F32 ? en->grid : en->dtype), ts_shape_str(&en->shape, shape, sizeof shape));
                    dump_buf fl = {0};
                    entry_flag_text(&fl, en, " ", "");
                    if (fl.len) putf(&label, "\n%s", fl.p + 1);
                    if (fl.failed) label.failed = true;
                    ts_free(fl.p);
                    put(b, "    ");
                    put_dot_ref(b, p, e);
                    put(b, " [");
                    put_dot_label(b, &label);
                    putf(b, ", shape=note, style=filled, fillcolor=\"%s\"%s];\n",
                         en->n_anchors && en->watch >= 0 ? "#aed581" : en->n_anchors ? "#ffd54f" : en->watch >= 0 ? "#81d4fa"
                         : cluster ? "#ede7f6" : "#fce4ec",
                         en->n_anchors || en->watch >= 0 ? ", penwidth=2" : "");
                }
            dump_buf label = {0};
            put(&label, o->op);
            if (o->attrs[0]) putf(&label, "(%s)", o->attrs + 2);
            if (loc) putf(&label, "\n%s", ts_tensor_where(o->src, where, sizeof where));
            putf(b, "    b%d [", k);
            put_dot_label(b, &label);
            putf(b, ", shape=box, style=\"rounded,filled\", fillcolor=\"%s\"];\n", cluster ? "#d1c4e9" : "#f8bbd0");
        }
        put(b, "  }\n");
    }
    ts_free(drawn);
    for (int k = 0; k < n; k++) {
        const ts_bwd_op *o = &ops[k];
        for (int j = 0; j < o->n_in; j++) {
            bool both = false;
            for (int q = 0; q < o->n_out; q++) both |= o->out[q] == o->in[j];
            put(b, "  ");
            put_dot_ref(b, p, o->in[j]);
            putf(b, " -> b%d%s;\n", k,
                 both ? " [dir=both, color=\"#7e57c2\"]" : p->entries[o->in[j]].kind == TS_KIND_VALUE ? " [color=\"#1e88e5\", style=dashed]" : "");
        }
        for (int j = 0; j < o->n_out; j++) {
            bool both = false;
            for (int q = 0; q < o->n_in; q++) both |= o->in[q] == o->out[j];
            if (both) continue;
            putf(b, "  b%d -> ", k);
            put_dot_ref(b, p, o->out[j]);
            put(b, o->accumulates ? " [color=\"#c2185b\"];\n" : ";\n");
        }
        /* the parameters' updates one under the other, not side by side */
        if (o->optimizer && k + 1 < n && ops[k + 1].optimizer && ops[k + 1].src != o->src) putf(b, "  b%d -> b%d [style=invis];\n", k, k + 1);
    }
}

char *ts_graph_dump_of(const ts_graph *g, const ts_bwd_model *m, ts_dump_format fmt, int flags) {
    if (!g) {
        ts_error(TS_ERR_INVALID_ARGUMENT, "ts_graph_dump: graph is NULL");
        return NULL;
    }
    if (m && m->g != g) {
        ts_error(TS_ERR_INVALID_ARGUMENT, "ts_graph_dump: the model was built from another graph");
        return NULL;
    }
    if (fmt != TS_DUMP_TEXT && fmt != TS_DUMP_DOT) {
        ts_error(TS_ERR_INVALID_ARGUMENT, "ts_graph_dump: unknown format %d (TS_DUMP_TEXT or TS_DUMP_DOT)", (int)fmt);
        return NULL;
    }
    if (flags & ~(TS_DUMP_LOCATIONS | TS_DUMP_BACKWARD)) {
        ts_error(TS_ERR_INVALID_ARGUMENT, "ts_graph_dump: unknown flags 0x%x (TS_DUMP_LOCATIONS, TS_DUMP_BACKWARD)", (unsigned)flags);
        return NULL;
    }
    bool backward = flags & TS_DUMP_BACKWARD;
    if (backward && (!m || !m->training || !m->prog)) {
        ts_error(TS_ERR_INVALID_ARGUMENT, "ts_graph_dump: TS_DUMP_BACKWARD needs a compiled training model (%s)",
                 !m ? "no model given" : !m->training ? "an inference model runs no backward pass" : "compile it first");
        return NULL;
    }
    node_flags *nf;
    if (collect_flags(g, m, &nf)) return NULL;
    ts_bwd_op *ops = NULL;
    int n_ops = 0;
    if (backward && ts_backward_ops(m, &ops, &n_ops)) {
        ts_free(nf);
        ts_error(TS_ERR_OUT_OF_MEMORY, "ts_graph_dump: out of memory");
        return NULL;
    }
    dump_buf b = {0};
    bool loc = want_locations(flags);
    if (fmt == TS_DUMP_DOT) {
        dump_dot(&b, g, m, nf, loc);
        if (backward) dump_dot_backward(&b, m, ops, n_ops, loc);
        put(&b, "}\n");
    } else {
        dump_text(&b, g, m, nf, loc);
        if (backward) dump_text_backward(&b, m, ops, n_ops, loc);
    }
    ts_free(nf);
    ts_free(ops);
    if (fmt == TS_DUMP_TEXT && !b.failed && b.p && ts_text_needs_escape(b.p)) { /* file names of imported nodes, say: shown, not obeyed */
        size_t need = ts_escape_text(NULL, 0, b.p);
        char *shown = ts_malloc(need + 1);
        if (shown) ts_escape_text(shown, need + 1, b.p);
        ts_free(b.p);
        b.p = shown;
    }
    if (b.failed || !b.p) {
        ts_free(b.p);
        ts_error(TS_ERR_OUT_OF_MEMORY, "ts_graph_dump: out of memory");
        return NULL;
    }
    return b.p;
}
