/* graph.c -- the graph builder: nodes, names, scopes, parameters and the
 * shape checks made as each node is added. Errors are sticky so a model can
 * be written without a check per line; compile reports the first one. */
#include "graph/graph.h"

#include "graph/ops.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

bool ts_shape_equal(const ts_shape *a, const ts_shape *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->d[i] != b->d[i]) return false;
    return true;
}

bool ts_broadcast_shape(const ts_shape *a, const ts_shape *b, ts_shape *out) {
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    ts_shape s = {.ndim = nd};
    for (int i = 0; i < nd; i++) {
        int ia = i - (nd - a->ndim), ib = i - (nd - b->ndim);
        int64_t da = ia >= 0 ? a->d[ia] : 1, db = ib >= 0 ? b->d[ib] : 1;
        if (da != db && da != 1 && db != 1) return false;
        s.d[i] = da == 1 ? db : da;
    }
    *out = s;
    return true;
}

const char *ts_shape_str(const ts_shape *s, char *buf, size_t n) {
    size_t used = 0;
    used += (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < s->ndim && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%lld", i ? "," : "", (long long)s->d[i]);
    if (used < n) snprintf(buf + used, n - used, "]");
    return buf;
}

double ts_graph_uniform(ts_graph *g) { return (double)(ts_splitmix64(&g->rng) >> 11) * 0x1.0p-53; }

ts_graph *ts_graph_new(uint64_t seed) {
    ts_graph *g = ts_calloc(1, sizeof *g);
    if (g) g->rng = seed;
    return g;
}

void ts_graph_free(ts_graph *g) {
    if (!g) return;
    for (size_t i = 0; i < g->n; i++) {
        ts_free(g->t[i]->name);
        ts_free(g->t[i]->title);
        ts_free(g->t[i]->value);
        ts_free(g->t[i]);
    }
    for (int i = 0; i < g->n_scope; i++) ts_free(g->scope[i]);
    for (size_t i = 0; i < g->n_op_counts; i++) ts_free(g->op_counts[i].prefix);
    for (size_t i = 0; i < g->n_marks; i++) ts_free(g->marks[i].key);
    for (size_t i = 0; i < g->n_aliases; i++) ts_free(g->aliases[i].name);
    for (size_t i = 0; i < g->n_strings; i++) ts_free(g->strings[i]);
    ts_free(g->aliases);
    ts_free(g->outputs);
    ts_free(g->strings);
    ts_free(g->marks);
    ts_free(g->op_counts);
    ts_strmap_free(&g->names);
    ts_strmap_free(&g->prefixes);
    ts_free(g->t);
    ts_free(g);
}

ts_status ts_graph_status(const ts_graph *g) {
    if (!g) return ts_error(TS_ERR_INVALID_ARGUMENT, "graph is NULL");
    if (g->sticky) ts_error(g->sticky, "%s", g->sticky_msg);
    return g->sticky;
}

ts_tensor *ts_graph_fail(ts_graph *g, ts_status code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (g->file) {
        char where[1200];
        snprintf(where, sizeof where, "%s (at %s:%d)", msg, g->file, g->line);
        ts_error(code, "%s", where);
    } else {
        ts_error(code, "%s", msg);
    }
    if (!g->sticky) {
        g->sticky = code;
        snprintf(g->sticky_msg, sizeof g->sticky_msg, "%s", ts_last_error());
    }
    return NULL;
}

static bool valid_name(const char *name);

ts_graph *ts_graph_at(ts_graph *g, const char *file, int line) {
    if (g) {
        g->file = file;
        g->line = line;
        g->origin = NULL;
    }
    return g;
}

const char *ts_tensor_where(const ts_tensor *t, char *buf, size_t n) {
    if (t->origin)
        snprintf(buf, n, "%s:%d (%s)", t->file ? t->file : "?", t->line, t->origin);
    else
        snprintf(buf, n, "%s:%d", t->file ? t->file : "?", t->line);
    return buf;
}

const char *ts_graph_keep_string(ts_graph *g, const char *s) {
    if (ts_grow((void **)&g->strings, &g->cap_strings, g->n_strings + 1, sizeof *g->strings)) return NULL;
    char *d = ts_strdup(s);
    if (d) g->strings[g->n_strings++] = d;
    return d;
}

ts_status ts_graph_add_alias(ts_graph *g, const char *alias, const ts_tensor *t) {
    if (!valid_name(alias) || strcmp(alias, t->name) == 0) return TS_OK; /* nothing to find */
    for (size_t i = 0; i < g->n_aliases; i++)
        if (strcmp(g->aliases[i].name, alias) == 0) return TS_OK;
    if (ts_grow((void **)&g->aliases, &g->cap_aliases, g->n_aliases + 1, sizeof *g->aliases)) return TS_ERR_OUT_OF_MEMORY;
    char *d = ts_strdup(alias);
    if (!d) return TS_ERR_OUT_OF_MEMORY;
    g->aliases[g->n_aliases].name = d;
    g->aliases[g->n_aliases++].tensor = t->id;
    return TS_OK;
}

const char *ts_graph_alias_of(const ts_graph *g, const ts_tensor *t) {
    for (size_t i = 0; g && t && i < g->n_aliases; i++)
        if (g->aliases[i].tensor == t->id) return g->aliases[i].name;
    return NULL;
}

const char *ts_tensor_alias(const ts_tensor *t) { return t ? ts_graph_alias_of(t->g, t) : NULL; }

ts_status ts_graph_add_output(ts_graph *g, const ts_tensor *t) {
    if (ts_grow((void **)&g->outputs, &g->cap_outputs, g->n_outputs + 1, sizeof *g->outputs)) return TS_ERR_OUT_OF_MEMORY;
    g->outputs[g->n_outputs++] = t->id;
    return TS_OK;
}

size_t ts_graph_output_count(const ts_graph *g) { return g ? g->n_outputs : 0; }
ts_tensor *ts_graph_output_at(const ts_graph *g, size_t i) { return g && i < g->n_outputs ? g->t[g->outputs[i]] : NULL; }

ts_status ts_scope_push(ts_graph *g, const char *name) {
    if (!g || !name || !*name) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_scope_push needs a graph and a non-empty name");
    if (g->n_scope == (int)TS_ARRAY_LEN(g->scope))
        return ts_error(TS_ERR_INVALID_ARGUMENT, "scopes nest at most %d deep", (int)TS_ARRAY_LEN(g->scope));
    if (strpbrk(name, "/:"))
        return ts_error(TS_ERR_INVALID_ARGUMENT, "scope name '%s' may not contain '/' or ':'", name);
    char *s = ts_strdup(name);
    if (!s) return TS_ERR_OUT_OF_MEMORY;
    g->scope[g->n_scope++] = s;
    return TS_OK;
}

ts_status ts_scope_pop(ts_graph *g) {
    if (!g || g->n_scope == 0) return ts_error(TS_ERR_STATE, "ts_scope_pop without a matching ts_scope_push");
    ts_free(g->scope[--g->n_scope]);
    return TS_OK;
}

void ts_graph_scope_path(const ts_graph *g, char *buf, size_t n) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < g->n_scope && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? "." : "", g->scope[i]);
}

/* `<scope>/<Op>:<k>` with k counting that op within the scope. */
char *ts_graph_op_output_name(ts_graph *g, const char *opname) {
    char scope[512], prefix[600], name[640];
    ts_graph_scope_path(g, scope, sizeof scope);
    if (scope[0])
        snprintf(prefix, sizeof prefix, "%s/%s", scope, opname);
    else
        snprintf(prefix, sizeof prefix, "%s", opname);
    int found = ts_strmap_get(&g->prefixes, prefix);
    size_t i = found >= 0 ? (size_t)found : g->n_op_counts;
    if (found < 0) {
        if (ts_grow((void **)&g->op_counts, &g->cap_op_counts, i + 1, sizeof *g->op_counts)) return NULL;
        g->op_counts[i].prefix = ts_strdup(prefix);
        if (!g->op_counts[i].prefix) return NULL;
        if (ts_strmap_put(&g->prefixes, g->op_counts[i].prefix, (int)i)) {
            ts_free(g->op_counts[i].prefix);
            return NULL;
        }
        g->op_counts[i].count = 0;
        g->n_op_counts++;
    }
    snprintf(name, sizeof name, "%s:%d", prefix, g->op_counts[i].count++);
    return ts_strdup(name);
}

static bool name_taken(const ts_graph *g, const char *name) { return ts_strmap_get(&g->names, name) >= 0; }

static bool valid_name(const char *name) {
    if (!name || !*name || strlen(name) > 400) return false;
    for (const char *p = name; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == '"' || *p == '\\') return false;
    return true;
}

ts_tensor *ts_graph_find(const ts_graph *g, const char *name) {
    if (!g || !name) return NULL;
    int id = ts_strmap_get(&g->names, name);
    if (id >= 0) return g->t[id];
    for (size_t i = 0; i < g->n_aliases; i++)
        if (strcmp(g->aliases[i].name, name) == 0) return g->t[g->aliases[i].tensor];
    return NULL;
}

static const char *tensor_name_at(const void *g, size_t i) { return ((const ts_graph *)g)->t[i]->name; }

const char *ts_graph_closest_names(const ts_graph *g, const char *name, char *buf, size_t n) {
    if (!buf || !n) return buf;
    buf[0] = '\0';
    if (!g || !name) return buf;
    return ts_closest_names(name, tensor_name_at, g, g->n, buf, n);
}

static bool owned(const ts_graph *g, const ts_tensor *t) { return t && t->g == g && t->id >= 0 && (size_t)t->id < g->n && g->t[t->id] == t; }

/* Adds a node with n inputs: checks them (ownership, dtype: f32 except the
 * op's integer inputs, which are i32, and input 0 of the ops that keep it,
 * which is either; bool where the op takes it, a bool mask converted to
 * i32 first), infers its shape by the op table's rule, names it. */
ts_tensor *ts_graph_add_node(ts_graph *g, ts_op op, const ts_tensor *const *given, int n, const char *name,
                             void (*setup)(ts_tensor *, const void *), const void *arg) {
    if (!g) return NULL;
    if (g->sticky) return NULL;
    const ts_op_def *def = ts_op_get(op);
    if (n < 0 || n > TS_MAX_INPUTS || (def->arity != TS_ARITY_VARIADIC && n != def->arity) ||
        (def->arity == TS_ARITY_VARIADIC && n < 1))
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "%s: takes %d inputs, got %d", def->name, def->arity, n);
    const ts_tensor *ins[TS_MAX_INPUTS];
    int data = -1; /* the first data input of an op that keeps integers: the output's dtype */
    for (int i = 0; i < n; i++) {
        ins[i] = given[i];
        if (!ins[i]) return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "%s: input %d is NULL (an earlier builder call failed?)", def->name, i + 1);
        if (!owned(g, ins[i])) return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "%s: input %d belongs to another graph", def->name, i + 1);
        if (def->any_dtype) continue;
        bool moved = def->keeps_int && !ts_op_int_input(op, i);
        if (moved && data >= 0 && ins[i]->dtype != ins[data]->dtype)
            return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "%s: input %d '%s' is %s and input %d '%s' is %s; they must be of one dtype "
                                 "(convert one with ts_cast)", def->name, data + 1, ins[data]->name, ts_dtype_name(ins[data]->dtype), i + 1,
                                 ins[i]->name, ts_dtype_name(ins[i]->dtype));
        if (moved && data < 0) data = i;
        ts_dtype want = ts_op_int_input(op, i) ? TS_I32 : TS_F32;
        bool takes_bool = (def->bool_inputs >> i) & 1u;
        if (ins[i]->dtype == TS_BOOL && takes_bool && want == TS_I32 && !(ins[i] = ts_graph_convert(g, ins[i], TS_I32))) return NULL;
        if (ins[i]->dtype == TS_BOOL && !takes_bool && !moved)
            return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "%s: input %d '%s' is bool; this input takes %s tensors (bool tensors take "
                                 "comparisons, And, Or, Xor, Not, Where and the ops that move values; ts_cast it to %s first)", def->name,
                                 i + 1, ins[i]->name, ts_dtype_name(want), ts_dtype_name(want));
        if (ins[i]->dtype != want && !(takes_bool && ins[i]->dtype == TS_BOOL) &&
            !(moved && (ins[i]->dtype == TS_I32 || ins[i]->dtype == TS_I64 || ins[i]->dtype == TS_BOOL)))
            return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "%s: input %d '%s' is %s; this input takes %s tensors%s", def->name, i + 1,
                                 ins[i]->name, ts_dtype_name(ins[i]->dtype), ts_dtype_name(want),
                                 want == TS_F32 ? " (integer tensors such as labels or token ids cannot be used here; ts_cast converts them)" : "");
    }
    if (ts_grow((void **)&g->t, &g->cap, g->n + 1, sizeof *g->t)) return ts_graph_fail(g, TS_ERR_OUT_OF_MEMORY, "out of memory adding %s", def->name);
    ts_tensor *t = ts_calloc(1, sizeof *t);
    if (!t) return ts_graph_fail(g, TS_ERR_OUT_OF_MEMORY, "out of memory adding %s", def->name);
    t->g = g;
    t->id = (int)g->n;
    t->op = op;
    t->n_in = n;
    t->dtype = data >= 0 ? ins[data]->dtype : def->int_output ? TS_I32 : def->bool_output ? TS_BOOL : TS_F32;
    t->file = g->file;
    t->line = g->line;
    t->origin = g->origin;
    ts_shape in_shapes[TS_MAX_INPUTS];
    for (int i = 0; i < n; i++) {
        t->in[i] = ins[i]->id;
        in_shapes[i] = ins[i]->shape;
    }
    if (setup) setup(t, arg);
    if (op == TS_OP_PRINT && !t->title) {
        ts_free(t);
        return ts_graph_fail(g, TS_ERR_OUT_OF_MEMORY, "out of memory adding %s", def->name);
    }
    ts_status st = def->shape ? def->shape(t, in_shapes, &t->shape) : TS_OK;
    if (st) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ts_last_error());
        ts_free(t->title);
        ts_free(t);
        return ts_graph_fail(g, st, "%s", msg);
    }
    t->name = name ? ts_strdup(name) : ts_graph_op_output_name(g, def->name);
    while (!name && t->name && name_taken(g, t->name)) { /* a name given by ts_tensor_set_name: the next k */
        ts_free(t->name);
        t->name = ts_graph_op_output_name(g, def->name);
    }
    if (t->name && ts_strmap_get(&g->names, t->name) < 0 && ts_strmap_put(&g->names, t->name, t->id)) {
        ts_free(t->name);
        t->name = NULL;
    }
    if (!t->name) {
        ts_free(t->title);
        ts_free(t);
        return ts_graph_fail(g, TS_ERR_OUT_OF_MEMORY, "out of memory naming %s", def->name);
    }
    g->t[g->n++] = t;
    return t;
}

static void set_node_attrs(ts_tensor *t, const void *arg) {
    const ts_node_attrs *a = arg;
    memcpy(t->attr, a->attr, sizeof t->attr);
    memcpy(t->fattr, a->fattr, sizeof t->fattr);
    t->iparam = a->iparam, t->fparam = a->fparam, t->sparam = a->sparam;
    if (t->op == TS_OP_PRINT) t->title = ts_strdup(a->title ? a->title : "");
    if (ts_op_get(t->op)->any_dtype) t->dtype = a->dtype;
}

ts_tensor *ts_graph_node(ts_graph *g, ts_op op, const ts_tensor *const *ins, int n, const ts_node_attrs *a) {
    return ts_graph_add_node(g, op, ins, n, NULL, a ? set_node_attrs : NULL, a);
}

/* A node of arity 0, 1 or 2 (b NULL for unary ops, both NULL for leaves). */
static ts_tensor *add_node(ts_graph *g, ts_op op, const ts_tensor *a, const ts_tensor *b, const char *name,
                           void (*setup)(ts_tensor *, const void *), const void *arg) {
    const ts_tensor *ins[2] = {a, b};
    int arity = ts_op_get(op)->arity;
    return ts_graph_add_node(g, op, ins, arity < 0 ? 0 : arity, name, setup, arg);
}

static void set_shape(ts_tensor *t, const void *arg) { t->shape = *(const ts_shape *)arg; }

static ts_tensor *add_leaf(ts_graph *g, ts_op op, const char *name, ts_dtype dtype, int ndim,
                           const int64_t *shape) {
    if (!g) return NULL;
    if (g->sticky) return NULL;
    const char *what = op == TS_OP_INPUT ? "ts_input" : op == TS_OP_PARAM ? "ts_param" : op == TS_OP_CONST ? "ts_constant" : "ts_buffer";
    if (!valid_name(name)) return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "%s: a name of 1-400 printable characters (no quotes or backslashes) is required", what);
    if (name_taken(g, name)) return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "%s: the name '%s' is already used in this graph", what, name);
    if (ndim < 0 || ndim > TS_MAX_DIMS || (ndim > 0 && !shape))
        return ts_graph_fail(g, TS_ERR_SHAPE, "%s '%s': ndim must be 0..%d with a shape array", what, name, TS_MAX_DIMS);
    ts_shape s = {.ndim = ndim};
    for (int i = 0; i < ndim; i++) {
        if (shape[i] <= 0 || shape[i] > (int64_t)1 << 32)
            return ts_graph_fail(g, TS_ERR_SHAPE, "%s '%s': dimension %d is %lld; dimensions must be positive", what, name, i, (long long)shape[i]);
        s.d[i] = shape[i];
    }
    if (ts_shape_numel(&s) > TS_MAX_NUMEL)
        return ts_graph_fail(g, TS_ERR_SHAPE, "%s '%s' has more than 2^34 elements", what, name);
    bool ints = op == TS_OP_INPUT || op == TS_OP_CONST, uns = op == TS_OP_INPUT && (dtype == TS_U32 || dtype == TS_U64);
    if (dtype != TS_F32 && !uns && !(ints && (dtype == TS_I32 || dtype == TS_I64 || dtype == TS_BOOL)))
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "%s '%s': dtype must be f32%s", what, name,
                             op == TS_OP_INPUT ? ", i32, i64, u32, u64 or bool" : ints ? ", i32, i64 or bool" : "");
    ts_tensor *t = add_node(g, op, NULL, NULL, name, set_shape, &s);
    if (!t) return NULL;
    t->dtype = uns ? TS_I64 : dtype; /* uint32 and uint64 values are held in i64 (a uint64 as its bits) */
    if (uns) t->feed_dtype = dtype, t->typed = true, t->out_dtype = dtype;
    if (ts_op_holds_value(op)) {
        t->value = ts_calloc((size_t)(ts_shape_numel(&s) * ts_dtype_cells(dtype)), sizeof(float));
        if (!t->value) return ts_graph_fail(g, TS_ERR_OUT_OF_MEMORY, "out of memory for parameter '%s'", name);
    }
    return t;
}

ts_tensor *ts_input(ts_graph *g, const char *name, ts_dtype dtype, int ndim, const int64_t *shape) {
    return add_leaf(g, TS_OP_INPUT, name, dtype, ndim, shape);
}

ts_tensor *ts_param(ts_graph *g, const char *name, int ndim, const int64_t *shape) {
    return add_leaf(g, TS_OP_PARAM, name, TS_F32, ndim, shape);
}

ts_tensor *ts_constant(ts_graph *g, const char *name, const ts_array *value) {
    if (!g || g->sticky) return NULL;
    if (!value || !value->data || value->ndim < 0 || value->ndim > TS_MAX_DIMS)
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_constant '%s': a value array with data is required", name ? name : "?");
    ts_tensor *t = add_leaf(g, TS_OP_CONST, name, value->dtype, value->ndim, value->shape);
    if (t && value->dtype == TS_BOOL) /* a byte an element, held in f32 cells */
        for (int64_t i = 0; i < ts_tensor_cells(t); i++) t->value[i] = ((const uint8_t *)value->data)[i] ? 1.0f : 0.0f;
    else if (t) memcpy(t->value, value->data, (size_t)ts_tensor_cells(t) * sizeof(float));
    return t;
}

ts_tensor *ts_buffer(ts_graph *g, const char *name, int ndim, const int64_t *shape) {
    return add_leaf(g, TS_OP_BUFFER, name, TS_F32, ndim, shape);
}

ts_tensor *ts_linear(ts_graph *g, ts_tensor *x, int64_t out_features, const char *name) {
    if (!g || g->sticky) return NULL;
    if (!x) return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_linear '%s': input is NULL", name ? name : "?");
    if (!valid_name(name) || strpbrk(name, "/:"))
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_linear: a layer name without '/' or ':' is required");
    if (x->shape.ndim != 2)
        return ts_graph_fail(g, TS_ERR_SHAPE, "ts_linear '%s': input '%s' must be 2-D [batch, features], not %d-D (use ts_flatten first)", name, x->name, x->shape.ndim);
    if (out_features <= 0) return ts_graph_fail(g, TS_ERR_SHAPE, "ts_linear '%s': out_features must be positive", name);
    int64_t in = x->shape.d[1];
    char scope[512], wname[640], bname[640];
    ts_graph_scope_path(g, scope, sizeof scope);
    snprintf(wname, sizeof wname, "%s%s%s.weight", scope, scope[0] ? "." : "", name);
    snprintf(bname, sizeof bname, "%s%s%s.bias", scope, scope[0] ? "." : "", name);
    ts_tensor *w = ts_param(g, wname, 2, (int64_t[]){out_features, in});
    ts_tensor *b = ts_param(g, bname, 1, (int64_t[]){out_features});
    if (!w || !b) return NULL;
    /* PyTorch's default: kaiming_uniform(a=sqrt(5)) on W and U(-1/sqrt(in), 1/sqrt(in))
     * on b, both of which come to the bound 1/sqrt(in). */
    double bound = 1.0 / sqrt((double)in);
    for (int64_t i = 0; i < out_features * in; i++) w->value[i] = (float)((2.0 * ts_graph_uniform(g) - 1.0) * bound);
    for (int64_t i = 0; i < out_features; i++) b->value[i] = (float)((2.0 * ts_graph_uniform(g) - 1.0) * bound);
    ts_status pst = ts_scope_push(g, name);
    if (pst) return ts_graph_fail(g, pst, "%s", ts_last_error());
    ts_tensor *y = ts_add(g, ts_matmul_t(g, x, w), b);
    ts_scope_pop(g);
    return y;
}

static void set_f(ts_tensor *t, const void *arg) { t->fparam = *(const float *)arg; }
static void set_i(ts_tensor *t, const void *arg) { t->iparam = *(const int *)arg; }
static void set_reshape(ts_tensor *t, const void *arg) { t->sparam = *(const ts_shape *)arg; }
typedef struct flatten_arg {
    ts_shape target;
    int start_dim;
} flatten_arg;
static void set_flatten(ts_tensor *t, const void *arg) {
    t->sparam = ((const flatten_arg *)arg)->target;
    t->iparam = ((const flatten_arg *)arg)->start_dim;
}
static void set_title(ts_tensor *t, const void *arg) { t->title = ts_strdup(arg ? arg : ""); }

ts_tensor *ts_matmul(ts_graph *g, ts_tensor *a, ts_tensor *b) { return add_node(g, TS_OP_MATMUL, a, b, NULL, NULL, NULL); }
ts_tensor *ts_matmul_t(ts_graph *g, ts_tensor *a, ts_tensor *b) { return add_node(g, TS_OP_MATMUL_T, a, b, NULL, NULL, NULL); }
ts_tensor *ts_add(ts_graph *g, ts_tensor *a, ts_tensor *b) { return add_node(g, TS_OP_ADD, a, b, NULL, NULL, NULL); }
ts_tensor *ts_sub(ts_graph *g, ts_tensor *a, ts_tensor *b) { return add_node(g, TS_OP_SUB, a, b, NULL, NULL, NULL); }
ts_tensor *ts_mul(ts_graph *g, ts_tensor *a, ts_tensor *b) { return add_node(g, TS_OP_MUL, a, b, NULL, NULL, NULL); }
ts_tensor *ts_scale(ts_graph *g, ts_tensor *x, float s) { return add_node(g, TS_OP_SCALE, x, NULL, NULL, set_f, &s); }
ts_tensor *ts_relu(ts_graph *g, ts_tensor *x) { return add_node(g, TS_OP_RELU, x, NULL, NULL, NULL, NULL); }
ts_tensor *ts_log(ts_graph *g, ts_tensor *x) { return add_node(g, TS_OP_LOG, x, NULL, NULL, NULL, NULL); }
ts_tensor *ts_log_softmax(ts_graph *g, ts_tensor *x, int dim) { return add_node(g, TS_OP_LOG_SOFTMAX, x, NULL, NULL, set_i, &dim); }
ts_tensor *ts_softmax(ts_graph *g, ts_tensor *x, int dim) { return add_node(g, TS_OP_SOFTMAX, x, NULL, NULL, set_i, &dim); }
ts_tensor *ts_nll_loss(ts_graph *g, ts_tensor *logp, ts_tensor *labels) { return add_node(g, TS_OP_NLL_LOSS, logp, labels, NULL, NULL, NULL); }
ts_tensor *ts_cross_entropy(ts_graph *g, ts_tensor *logits, ts_tensor *labels) { return add_node(g, TS_OP_CROSS_ENTROPY, logits, labels, NULL, NULL, NULL); }
ts_tensor *ts_sum(ts_graph *g, ts_tensor *x) { return add_node(g, TS_OP_SUM, x, NULL, NULL, NULL, NULL); }
ts_tensor *ts_mean(ts_graph *g, ts_tensor *x) { return add_node(g, TS_OP_MEAN, x, NULL, NULL, NULL, NULL); }
ts_tensor *ts_print(ts_graph *g, ts_tensor *x, const char *title) { return add_node(g, TS_OP_PRINT, x, NULL, NULL, set_title, title); }
static void set_title_beside(ts_tensor *t, const void *arg) {
    set_title(t, arg);
    t->attr[0] = 1; /* nothing is meant to read it (lint.c) */
}
ts_tensor *ts_print_beside(ts_graph *g, ts_tensor *x, const char *title) {
    return add_node(g, TS_OP_PRINT, x, NULL, NULL, set_title_beside, title);
}

ts_tensor *ts_reshape(ts_graph *g, ts_tensor *x, int ndim, const int64_t *shape) {
    if (!g || g->sticky) return NULL;
    if (ndim < 0 || ndim > TS_MAX_DIMS || (ndim && !shape)) return ts_graph_fail(g, TS_ERR_SHAPE, "ts_reshape: ndim must be 0..%d with a shape array", TS_MAX_DIMS);
    ts_shape s = {.ndim = ndim};
    for (int i = 0; i < ndim; i++) s.d[i] = shape[i];
    return add_node(g, TS_OP_RESHAPE, x, NULL, NULL, set_reshape, &s);
}

ts_tensor *ts_flatten(ts_graph *g, ts_tensor *x, int start_dim) {
    if (!g || g->sticky) return NULL;
    if (!x) return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_flatten: input is NULL");
    /* A reshape whose target stays symbolic (sparam.ndim = -1, iparam =
     * start_dim) so that a new batch size re-infers it. */
    ts_shape s = {.ndim = -1};
    ts_tensor *t = add_node(g, TS_OP_FLATTEN, x, NULL, NULL, set_flatten, &(flatten_arg){s, start_dim});
    return t;
}

ts_status ts_tensor_set_output_dtype(ts_tensor *t, ts_dtype dtype) {
    if (!t) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_tensor_set_output_dtype: tensor is NULL");
    if (!ts_dtype_size(dtype)) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_tensor_set_output_dtype: %d is no ts_dtype", (int)dtype);
    t->typed = dtype != t->dtype;
    t->out_dtype = dtype;
    return TS_OK;
}

int ts_tensor_onnx_type(const ts_tensor *t) { return t ? t->onnx_type : 0; }

ts_status ts_tensor_set_name(ts_tensor *t, const char *name) {
    if (!t) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_tensor_set_name: tensor is NULL");
    if (!valid_name(name)) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_tensor_set_name: a name of 1-400 printable characters (no quotes or backslashes) is required");
    if (strcmp(t->name, name) == 0) return TS_OK;
    if (name_taken(t->g, name)) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_tensor_set_name: '%s' is already the name of another tensor", name);
    if (strncmp(name, "Gradient___", 11) == 0 || strncmp(name, "Accum___", 8) == 0 || strncmp(name, "UpdatedVar___", 13) == 0 ||
        strncmp(name, "Accl", 4) == 0 || strncmp(name, "Step___", 7) == 0)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_tensor_set_name: '%s' uses a prefix reserved for derived tensors", name);
    char *d = ts_strdup(name);
    if (!d) return TS_ERR_OUT_OF_MEMORY;
    if (ts_strmap_put(&t->g->names, d, t->id)) {
        ts_free(d);
        return TS_ERR_OUT_OF_MEMORY;
    }
    if (ts_strmap_get(&t->g->names, t->name) == t->id) ts_strmap_del(&t->g->names, t->name);
    ts_free(t->name);
    t->name = d;
    return TS_OK;
}

const char *ts_tensor_name(const ts_tensor *t) { return t ? t->name : NULL; }

ts_status ts_graph_values_current(ts_graph *g) {
    if (!g || !g->values_fetch) return TS_OK;
    ts_status (*fetch)(void *) = g->values_fetch;
    g->values_fetch = NULL; /* taken first: the fetch reads them through here too */
    ts_status st = fetch(g->values_owner);
    if (st) g->values_fetch = fetch; /* still on the device: the next reader tries again */
    else g->values_owner = NULL;
    return st;
}

ts_status ts_tensor_info(const ts_tensor *t, ts_array *out) {
    if (!t || !out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_tensor_info: NULL argument");
    if (t->value) { /* a device's newer values first */
        ts_status st = ts_graph_values_current(t->g);
        if (st) return st;
    }
    memset(out, 0, sizeof *out);
    out->dtype = t->dtype;
    out->ndim = t->shape.ndim;
    for (int i = 0; i < t->shape.ndim; i++) out->shape[i] = t->shape.d[i];
    out->data = t->dtype == TS_BOOL ? NULL : t->value; /* a bool constant's f32 cells are no bool array */
    return TS_OK;
}

ts_status ts_param_set(ts_tensor *p, const ts_array *v) {
    if (!p || !v) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_param_set: NULL argument");
    if (!ts_op_holds_value(p->op)) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_param_set: '%s' is not a parameter or buffer", p->name);
    ts_shape s = {.ndim = v->ndim};
    if (v->ndim < 0 || v->ndim > TS_MAX_DIMS) return ts_error(TS_ERR_SHAPE, "ts_param_set: bad ndim %d", v->ndim);
    for (int i = 0; i < v->ndim; i++) s.d[i] = v->shape[i];
    if (v->dtype != TS_F32 || !ts_shape_equal(&s, &p->shape) || !v->data) {
        char a[128], b[128];
        return ts_error(TS_ERR_SHAPE, "ts_param_set: '%s' is f32%s, values are %s%s", p->name,
                        ts_shape_str(&p->shape, a, sizeof a), ts_dtype_name(v->dtype), ts_shape_str(&s, b, sizeof b));
    }
    ts_status st = ts_graph_values_current(p->g); /* the others, as a device left them */
    if (st) return st;
    memcpy(p->value, v->data, (size_t)ts_shape_numel(&s) * sizeof(float));
    p->g->values_gen++;
    return TS_OK;
}

ts_status ts_outfeed_add(ts_graph *g, ts_outfeed *q, const char *key, ts_tensor *t) {
    if (!g || !q || !key || !*key) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_outfeed_add needs a graph, a queue and a key");
    if (!owned(g, t)) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_outfeed_add '%s': the tensor is NULL or not of this graph", key);
    if (t->dtype != TS_F32 && t->dtype != TS_I32 && t->dtype != TS_I64 && t->dtype != TS_BOOL) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_outfeed_add '%s': unsupported dtype", key);
    for (size_t i = 0; i < g->n_marks; i++)
        if (g->marks[i].q == q && strcmp(g->marks[i].key, key) == 0)
            return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_outfeed_add: key '%s' is already used on this queue", key);
    if (ts_grow((void **)&g->marks, &g->cap_marks, g->n_marks + 1, sizeof *g->marks)) return TS_ERR_OUT_OF_MEMORY;
    char *k = ts_strdup(key);
    if (!k) return TS_ERR_OUT_OF_MEMORY;
    g->marks[g->n_marks++] = (ts_outfeed_mark){q, k, t->id};
    return TS_OK;
}

size_t ts_graph_tensor_count(const ts_graph *g) { return g ? g->n : 0; }
ts_tensor *ts_graph_tensor_at(const ts_graph *g, size_t i) { return g && i < g->n ? g->t[i] : NULL; }

const char *ts_tensor_op(const ts_tensor *t) { return t ? ts_op_get(t->op)->name : NULL; }
int ts_tensor_input_count(const ts_tensor *t) { return t ? t->n_in : 0; }
ts_tensor *ts_tensor_input(const ts_tensor *t, int i) { return t && i >= 0 && i < t->n_in ? t->g->t[t->in[i]] : NULL; }

const char *ts_tensor_location(const ts_tensor *t, char *buf, size_t n) {
    if (!buf || !n) return "";
    if (t && t->file) snprintf(buf, n, "%s:%d", t->file, t->line);
    else buf[0] = '\0';
    return buf;
}
