/* graph_dump.c -- the graph as text or Graphviz DOT (docs/observation.md#diagnostics): every
 * node with its op, inputs, shape, dtype and what observes it, optionally
 * where it was built. With a compiled model the shapes are the compiled
 * ones and the flags say what the program really does with each tensor. */
#include "compile/program.h"

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

static ts_status collect_flags(const ts_graph *g, const ts_model *m, node_flags **out) {
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
static const ts_shape *node_shape(const ts_tensor *t, const ts_model *m) {
    const ts_prog *p = m ? m->prog : NULL;
    return p && t->id < p->n_nodes && p->live[t->id] ? &p->shape[t->id] : &t->shape;
}

/* Flags, each as open + word + close: " [param] [grad] ..." in text. */
static void node_flag_text(dump_buf *b, const ts_tensor *t, const ts_model *m, const node_flags *f, const char *open,
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

/* Length of the valid UTF-8 sequence at s, 0 if invalid (Graphviz rejects
 * invalid UTF-8, and a tensor name may hold any bytes). */
static size_t utf8_len(const unsigned char *s) {
    if (s[0] < 0x80) return 1;
    size_t n = (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3 : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (n == 0 || (n == 2 && s[0] < 0xc2) || s[0] > 0xf4) return 0;
    for (size_t k = 1; k < n; k++)
        if ((s[k] & 0xc0) != 0x80) return 0;
    /* overlong forms, surrogates and code points past U+10FFFF */
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0) || (s[0] == 0xf0 && s[1] < 0x90) ||
        (s[0] == 0xf4 && s[1] >= 0x90))
        return 0;
    return n;
}

/* A C-style quoted string: quotes, backslashes, control bytes and bytes
 * that are not UTF-8 escaped, so a print title stays on one line. */
static void put_quoted(dump_buf *b, const char *s) {
    put(b, "\"");
    for (const unsigned char *u = (const unsigned char *)s; *u;) {
        size_t n = utf8_len(u);
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

static bool want_locations(int locations) {
    return locations || ts_env_flag("TS_IR_DEBUG");
}

/* ---- text */

static void dump_text(dump_buf *b, const ts_graph *g, const ts_model *m, const node_flags *flags, bool loc) {
    putf(b, "# tensorscope graph: %zu nodes, %s\n", g->n,
         !m || !m->prog ? "declared shapes"
                        : m->training ? "training model, compiled shapes" : "inference model, compiled shapes");
    for (size_t i = 0; i < g->n; i++) {
        const ts_tensor *t = g->t[i];
        char shape[160], where[600];
        putf(b, "%%%s = %s(", t->name, ts_op_get(t->op)->name);
        for (int j = 0; j < t->n_in; j++) putf(b, "%s%%%s", j ? ", " : "", g->t[t->in[j]]->name);
        node_attrs(b, t);
        putf(b, ") : %s%s", ts_dtype_name(t->dtype), ts_shape_str(node_shape(t, m), shape, sizeof shape));
        node_flag_text(b, t, m, &flags[i], " [", "]");
        if (loc) putf(b, " @ %s", ts_tensor_where(t, where, sizeof where));
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
            size_t n = utf8_len(u);
            if (n == 0) {
                put(b, "?");
                u++;
            } else {
                put_raw(b, (const char *)u, n);
                u += n;
            }
        }
    }
}

static void dump_dot(dump_buf *b, const ts_graph *g, const ts_model *m, const node_flags *flags, bool loc) {
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
        putf(&label, "\n%s%s", ts_dtype_name(t->dtype), ts_shape_str(node_shape(t, m), shape, sizeof shape));
        dump_buf fl = {0};
        node_flag_text(&fl, t, m, f, " ", "");
        if (fl.len) putf(&label, "\n%s", fl.p + 1);
        if (fl.failed) label.failed = true;
        ts_free(fl.p);
        if (loc) putf(&label, "\n%s", ts_tensor_where(t, where, sizeof where));
        if (label.failed) b->failed = true;

        const char *node_shape_attr = t->op == TS_OP_INPUT ? "ellipse" : "box";
        const char *style = ts_op_holds_value(t->op) || t->op == TS_OP_INPUT ? "filled" : "rounded,filled";
        /* anchored: amber; watched: blue; both: green; params grey */
        const char *fill = f->anchored && f->watched ? "#aed581"
                           : f->anchored             ? "#ffd54f"
                           : f->watched              ? "#81d4fa"
                           : ts_op_holds_value(t->op) ? "#e0e0e0"
                                                     : "#ffffff";
        putf(b, "  n%zu [label=\"", i);
        put_dot_escaped(b, label.p ? label.p : "");
        putf(b, "\", shape=%s, style=\"%s\", fillcolor=\"%s\"%s];\n", node_shape_attr, style, fill,
             f->anchored || f->watched || t->op == TS_OP_PRINT ? ", penwidth=2" : "");
        ts_free(label.p);
    }
    for (size_t i = 0; i < g->n; i++) {
        const ts_tensor *t = g->t[i];
        for (int j = 0; j < t->n_in; j++)
            putf(b, "  n%d -> n%zu%s;\n", t->in[j], i,
                 ts_op_int_input(t->op, j) ? " [style=dashed]" : "");
    }
    put(b, "}\n");
}

char *ts_graph_dump(const ts_graph *g, const ts_model *m, ts_dump_format fmt, int locations) {
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
    node_flags *flags;
    if (collect_flags(g, m, &flags)) return NULL;
    dump_buf b = {0};
    bool loc = want_locations(locations);
    if (fmt == TS_DUMP_DOT) dump_dot(&b, g, m, flags, loc);
    else dump_text(&b, g, m, flags, loc);
    ts_free(flags);
    if (b.failed || !b.p) {
        ts_free(b.p);
        ts_error(TS_ERR_OUT_OF_MEMORY, "ts_graph_dump: out of memory");
        return NULL;
    }
    return b.p;
}
