/* onnx_torch.c -- PyTorch's parameter names in a dynamo export's metadata
 * (onnx_torch.h says which keys, and what the exporter's optimizer did
 * that they undo). Every fix is one the file states: a placeholder of the
 * signature that no initializer holds, and a node whose FX call reads it.
 * What the metadata does not state (BatchNorm fused into a Conv, the
 * LSTM's gates reordered, a class token expanded to the batch) stays as
 * the file has it. */
#include "import/onnx_torch.h"

#include "onnx.pb-c.h"

#include <stdio.h>
#include <string.h>

typedef TensorscopeOnnx__NodeProto Node;
typedef TensorscopeOnnx__StringStringEntryProto Prop;

#define MAX_FX_PARAMS 16 /* placeholders read per FX call (aten.lstm: 4 per layer and direction) */

static const char *prop(Prop *const *p, size_t n, const char *key) {
    for (size_t i = 0; i < n; i++)
        if (p[i]->key && p[i]->value && strcmp(p[i]->key, key) == 0) return p[i]->value;
    return NULL;
}

typedef struct plan {
    char *sig;         /* the signature's text, its names cut out in place */
    char **ph, **target;
    size_t n_sig, cap_sig, cap_target;
    ts_strmap by_ph, by_target, by_init;
    bool *taken;       /* placeholder: some initializer is that parameter, or a fix makes it */
    bool *held;        /* placeholder: some initializer is that parameter */
    const char **orig; /* initializer: its placeholder, or NULL */
    const char **folded;
    int (*params)[MAX_FX_PARAMS]; /* node: the placeholders its FX call reads */
    int *n_params;
    ts_torch_fix *fix;
    size_t n_fix, cap_fix;
} plan;

/* `p_x: PARAMETER target='x'` lines of the signature's inputs. */
static ts_status read_signature(plan *p, const char *text) {
    if (!(p->sig = ts_strdup(text))) return TS_ERR_OUT_OF_MEMORY;
    static const char kind[] = ": PARAMETER target='";
    for (char *line = p->sig; line && *line;) {
        char *end = strchr(line, '\n');
        if (end) *end = '\0';
        char *k = strstr(line, kind), *t = k ? k + sizeof kind - 1 : NULL, *q = t ? strchr(t, '\'') : NULL;
        if (q && k > line && q > t) { /* an empty name is none */
            *k = '\0', *q = '\0';
            if (ts_grow((void **)&p->ph, &p->cap_sig, p->n_sig + 1, sizeof *p->ph) ||
                ts_grow((void **)&p->target, &p->cap_target, p->n_sig + 1, sizeof *p->target))
                return TS_ERR_OUT_OF_MEMORY;
            p->ph[p->n_sig] = line, p->target[p->n_sig] = t;
            if (ts_strmap_put(&p->by_ph, line, (int)p->n_sig) || ts_strmap_put(&p->by_target, t, (int)p->n_sig))
                return TS_ERR_OUT_OF_MEMORY;
            p->n_sig++;
        }
        line = end ? end + 1 : NULL;
    }
    return TS_OK;
}

/* The placeholders of the signature that an FX call's text reads
 * (`%p_encoder_layers_0_norm2_weight`), in order. */
static int fx_params(const plan *p, const char *fx, int *out) {
    int n = 0;
    for (const char *s = fx ? strchr(fx, '%') : NULL; s && n < MAX_FX_PARAMS; s = strchr(s, '%')) {
        s++;
        size_t len = 0;
        while (s[len] == '_' || (s[len] >= '0' && s[len] <= '9') || ((s[len] | 32) >= 'a' && (s[len] | 32) <= 'z')) len++;
        char name[256];
        if (len && len < sizeof name) {
            memcpy(name, s, len);
            name[len] = '\0';
            int e = ts_strmap_get(&p->by_ph, name);
            if (e >= 0) out[n++] = e;
        }
        s += len;
    }
    return n;
}

/* The op an FX call applies (`torch.ops.aten.linear.default`), as a span. */
static const char *fx_target(const char *fx, size_t *len) {
    const char *t = fx ? strstr(fx, "[target=") : NULL;
    if (!t) return NULL;
    t += 8;
    *len = strcspn(t, "]");
    return t;
}

static bool same_target(const char *a, const char *b) {
    size_t la = 0, lb = 0;
    const char *ta = fx_target(a, &la), *tb = fx_target(b, &lb);
    return ta && tb && la == lb && memcmp(ta, tb, la) == 0;
}

static int index_of(const int *v, int n, int x) {
    for (int i = 0; i < n; i++)
        if (v[i] == x) return i;
    return -1;
}

static ts_status add_fix(plan *p, ts_torch_fix_kind kind, size_t node, size_t input, size_t init, int64_t length, const char *name) {
    if (ts_grow((void **)&p->fix, &p->cap_fix, p->n_fix + 1, sizeof *p->fix)) return TS_ERR_OUT_OF_MEMORY;
    ts_torch_fix *f = &p->fix[p->n_fix];
    *f = (ts_torch_fix){kind, node, input, init, length, ts_strdup(name)};
    if (!f->name) return TS_ERR_OUT_OF_MEMORY;
    p->n_fix++;
    return TS_OK;
}

static const char *fx_of(const Node *n) { return prop(n->metadata_props, n->n_metadata_props, "pkg.torch.onnx.fx_node"); }

/* The placeholder of the one parameter a fold was made of (`['x']`). */
static int folded_single(const plan *p, const char *folded) {
    size_t n = folded ? strlen(folded) : 0;
    if (n < 5 || strncmp(folded, "['", 2) != 0 || strcmp(folded + n - 2, "']") != 0) return -1;
    char name[256];
    if (n - 4 >= sizeof name) return -1;
    memcpy(name, folded + 2, n - 4);
    name[n - 4] = '\0';
    return strchr(name, '\'') ? -1 : ts_strmap_get(&p->by_target, name);
}

/* The one parameter of the signature among a fold's sources (the others
 * constants), or -1. */
static int folded_param(const plan *p, const char *folded) {
    int found = -1;
    for (const char *q = folded ? strchr(folded, '\'') : NULL; q; q = strchr(q, '\'')) {
        const char *end = strchr(++q, '\'');
        if (!end) return -1;
        char name[256];
        size_t len = (size_t)(end - q);
        int e = -1;
        if (len < sizeof name) {
            memcpy(name, q, len);
            name[len] = '\0';
            e = ts_strmap_get(&p->by_target, name);
        }
        if (e >= 0 && found >= 0) return -1;
        if (e >= 0) found = e;
        q = end + 1;
    }
    return found;
}

/* Whether a fold's sources (`['val_3', 'encoder.pos_embedding']`) name
 * a parameter of the signature. */
static bool folded_from_param(const plan *p, const char *folded) {
    for (const char *q = folded ? strchr(folded, '\'') : NULL; q; q = strchr(q, '\'')) {
        const char *end = strchr(++q, '\'');
        if (!end) return false;
        char name[256];
        size_t len = (size_t)(end - q);
        if (len < sizeof name) {
            memcpy(name, q, len);
            name[len] = '\0';
            if (ts_strmap_get(&p->by_target, name) >= 0) return true;
        }
        q = end + 1;
    }
    return false;
}

/* A merged initializer `k`, read by node i in place of its own parameter:
 * the one at the place among i's placeholders that k's own has among
 * those of a node of the same FX op that reads k as itself. */
static int merged_into(const plan *p, const struct TensorscopeOnnx__GraphProto *gp, size_t i, int own, const char *init) {
    for (size_t m = 0; m < gp->n_node; m++) {
        int r = index_of(p->params[m], p->n_params[m], own);
        if (r < 0 || !same_target(fx_of(gp->node[m]), fx_of(gp->node[i]))) continue;
        bool reads = false;
        for (size_t j = 0; j < gp->node[m]->n_input && !reads; j++) reads = gp->node[m]->input[j] && strcmp(gp->node[m]->input[j], init) == 0;
        if (!reads) continue;
        if (r >= p->n_params[i]) return -1;
        int e = p->params[i][r];
        return p->taken[e] ? -1 : e;
    }
    return -1;
}

/* Whether every reader of initializer k is a MatMul's B from aten.linear
 * whose FX call reads placeholder e, or whose call's weight (its first
 * placeholder) the file holds nowhere (merged into k: equal values). */
static bool only_linear_weight(const plan *p, const struct TensorscopeOnnx__GraphProto *gp, const char *init, int e) {
    int readers = 0;
    for (size_t i = 0; i < gp->n_node; i++) {
        const Node *n = gp->node[i];
        for (size_t j = 0; j < n->n_input; j++) {
            if (!n->input[j] || strcmp(n->input[j], init) != 0) continue;
            size_t len = 0;
            const char *t = fx_target(fx_of(n), &len);
            static const char linear[] = "torch.ops.aten.linear.default";
            if (j != 1 || !n->op_type || strcmp(n->op_type, "MatMul") != 0 || !t || len != sizeof linear - 1 ||
                memcmp(t, linear, len) != 0 || (index_of(p->params[i], p->n_params[i], e) < 0 && (p->n_params[i] < 1 || p->held[p->params[i][0]])))
                return false;
            readers++;
        }
    }
    for (size_t i = 0; i < gp->n_output; i++)
        if (gp->output[i]->name && strcmp(gp->output[i]->name, init) == 0) return false;
    return readers > 0;
}

static int64_t attr_int(const Node *n, const char *name) {
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && strcmp(n->attribute[i]->name, name) == 0) return n->attribute[i]->i;
    return 0;
}

/* The one placeholder of node i's FX call that nothing holds yet, or -1. */
static int untaken(const plan *p, size_t i) {
    int found = -1, left = 0;
    for (int k = 0; k < p->n_params[i]; k++)
        if (!p->taken[p->params[i][k]]) found = p->params[i][k], left++;
    return left == 1 ? found : -1;
}

/* A Gemm or Conv whose zero bias the optimizer dropped (its rule says so):
 * the one placeholder of its FX call that nothing holds, and its length. */
static ts_status zero_bias(plan *p, const struct TensorscopeOnnx__GraphProto *gp, size_t i) {
    const Node *n = gp->node[i];
    const char *rule = prop(n->metadata_props, n->n_metadata_props, "pkg.onnxscript.rewriter.rule_name");
    bool gemm = n->op_type && strcmp(n->op_type, "Gemm") == 0, conv = n->op_type && strcmp(n->op_type, "Conv") == 0;
    if (!rule || !strstr(rule, "RemoveOptionalBias") || !(gemm || conv) || n->n_input != 2 || !n->input[1]) return TS_OK;
    int w = ts_strmap_get(&p->by_init, n->input[1]), bias = untaken(p, i);
    if (w < 0 || bias < 0) return TS_OK;
    const TensorscopeOnnx__TensorProto *tp = gp->initializer[w];
    if (tp->n_dims != (gemm ? 2u : 4u)) return TS_OK;
    int64_t len = gemm ? tp->dims[attr_int(n, "transB") ? 0 : 1] : tp->dims[0];
    if (len <= 0) return TS_OK;
    p->taken[bias] = true;
    return add_fix(p, TS_TORCH_ZERO_BIAS, i, 2, 0, len, p->target[bias]);
}

/* Node i's initializer inputs: a Linear weight stored transposed (pass 0;
 * where the file holds the weight too, a tied one, the MatMul reads that;
 * another Linear's weight merged into it, its own transposed copy),
 * a merged initializer read in place of the node's own parameter (pass 1):
 * by its place among the FX call's placeholders, or as the one placeholder
 * of the call that nothing else holds. */
static ts_status plan_inputs(plan *p, const struct TensorscopeOnnx__GraphProto *gp, size_t i, int pass) {
    const Node *n = gp->node[i];
    for (size_t j = 0; j < n->n_input; j++) {
        int k = n->input[j] ? ts_strmap_get(&p->by_init, n->input[j]) : -1;
        if (k < 0) continue;
        int own = p->orig[k] ? ts_strmap_get(&p->by_ph, p->orig[k]) : -1, e;
        if (own >= 0 && index_of(p->params[i], p->n_params[i], own) >= 0) continue;
        if (pass == 0 && own < 0 && (e = folded_single(p, p->folded[k])) >= 0 && gp->initializer[k]->n_dims == 2 &&
            only_linear_weight(p, gp, n->input[j], e)) {
            int w = index_of(p->params[i], p->n_params[i], e) >= 0 ? e : p->params[i][0]; /* the weight this MatMul's call reads */
            ts_status st = TS_OK;
            if (w == e && (!p->taken[e] || p->held[e])) { /* one fix per initializer, however many MatMuls read it */
                p->taken[e] = true;
                st = add_fix(p, TS_TORCH_TRANSPOSED, i, j, (size_t)k, 0, p->target[e]);
            } else if (w != e && !p->taken[w]) { /* another Linear's weight of equal values, merged into k */
                p->taken[w] = true;
                st = add_fix(p, TS_TORCH_TRANSPOSED_COPY, i, j, (size_t)k, 0, p->target[w]);
            }
            if (st) return st;
        }
        if (pass == 1 && own >= 0 && ((e = merged_into(p, gp, i, own, n->input[j])) >= 0 || (e = untaken(p, i)) >= 0)) {
            p->taken[e] = true;
            ts_status st = add_fix(p, TS_TORCH_COPY, i, j, (size_t)k, 0, p->target[e]);
            if (st) return st;
        }
    }
    return TS_OK;
}

/* A Conv the optimizer fused a BatchNorm into (its rule_name says so)
 * reads W * gamma / sqrt(var + eps) under the Conv weight's name: not
 * PyTorch's weight, whose values a state dict would load into it. It is
 * named `<weight>.fused` (the initializer's name, or its rename's). */
static ts_status fused_weight(plan *p, const struct TensorscopeOnnx__GraphProto *gp, size_t i) {
    const Node *n = gp->node[i];
    const char *rule = prop(n->metadata_props, n->n_metadata_props, "pkg.onnxscript.rewriter.rule_name");
    if (!n->op_type || strcmp(n->op_type, "Conv") != 0 || n->n_input < 2 || !rule || !strstr(rule, "FuseBatchNormIntoConv")) return TS_OK;
    int k = ts_strmap_get(&p->by_init, n->input[1]);
    if (k < 0) return TS_OK;
    const char *name = gp->initializer[k]->name;
    ts_torch_fix *f = NULL;
    for (size_t j = 0; j < p->n_fix && !f; j++)
        if (p->fix[j].kind == TS_TORCH_RENAME && p->fix[j].init == (size_t)k) f = &p->fix[j];
    const char *was = f ? f->name : name;
    static const char sfx[] = ".fused";
    size_t len = strlen(was);
    if (len >= sizeof sfx - 1 && strcmp(was + len - (sizeof sfx - 1), sfx) == 0) return TS_OK; /* read by two fused Convs */
    char *to = ts_malloc(len + sizeof sfx);
    if (!to) return TS_ERR_OUT_OF_MEMORY;
    memcpy(to, was, len), memcpy(to + len, sfx, sizeof sfx);
    ts_status st = TS_OK;
    if (f) ts_free(f->name), f->name = to, f->kind = TS_TORCH_FUSED;
    else st = add_fix(p, TS_TORCH_FUSED, 0, 0, (size_t)k, 0, to), ts_free(to);
    return st;
}

static ts_status plan_graph(plan *p, const struct TensorscopeOnnx__GraphProto *gp) {
    size_t ni = gp->n_initializer, nn = gp->n_node;
    p->taken = ts_calloc(p->n_sig ? p->n_sig : 1, sizeof *p->taken);
    p->held = ts_calloc(p->n_sig ? p->n_sig : 1, sizeof *p->held);
    p->orig = ts_calloc(ni ? ni : 1, sizeof *p->orig);
    p->folded = ts_calloc(ni ? ni : 1, sizeof *p->folded);
    p->params = ts_calloc(nn ? nn : 1, sizeof *p->params);
    p->n_params = ts_calloc(nn ? nn : 1, sizeof *p->n_params);
    if (!p->taken || !p->held || !p->orig || !p->folded || !p->params || !p->n_params) return TS_ERR_OUT_OF_MEMORY;
    for (size_t k = 0; k < ni; k++)
        if (gp->initializer[k]->name && ts_strmap_put(&p->by_init, gp->initializer[k]->name, (int)k)) return TS_ERR_OUT_OF_MEMORY;
    for (size_t s = 0; s < 2; s++) { /* what the initializers' value_info (or graph inputs, IR < 4) says of them */
        TensorscopeOnnx__ValueInfoProto **vi = s ? gp->input : gp->value_info;
        for (size_t i = 0, n = s ? gp->n_input : gp->n_value_info; i < n; i++) {
            int k = vi[i]->name ? ts_strmap_get(&p->by_init, vi[i]->name) : -1;
            if (k < 0) continue;
            const char *o = prop(vi[i]->metadata_props, vi[i]->n_metadata_props, "pkg.torch.onnx.original_node_name");
            const char *f = prop(vi[i]->metadata_props, vi[i]->n_metadata_props, "pkg.onnxscript.optimizer.folded_from");
            if (o) p->orig[k] = o;
            if (f) p->folded[k] = f;
        }
    }
    for (size_t k = 0; k < ni; k++) {
        const char *name = gp->initializer[k]->name;
        int e = p->orig[k] ? ts_strmap_get(&p->by_ph, p->orig[k]) : -1;
        if (e < 0 && name) e = ts_strmap_get(&p->by_target, name);
        if (e < 0 && name) e = ts_strmap_get(&p->by_ph, name); /* named by its placeholder (p_fc_weight) */
        if (e < 0 && !p->orig[k]) {
            ts_status st = add_fix(p, folded_from_param(p, p->folded[k]) ? TS_TORCH_FOLDED : TS_TORCH_CONSTANT, 0, 0, k, 0, name ? name : "");
            if (st) return st;
        }
        if (e < 0) continue;
        p->taken[e] = p->held[e] = true;
        if (name && strcmp(name, p->target[e]) != 0 && ts_strmap_get(&p->by_init, p->target[e]) < 0) {
            ts_status st = add_fix(p, TS_TORCH_RENAME, 0, 0, k, 0, p->target[e]);
            if (st) return st;
        }
    }
    for (size_t i = 0; i < nn; i++) p->n_params[i] = fx_params(p, fx_of(gp->node[i]), p->params[i]);
    ts_status st = TS_OK;
    for (int pass = 0; pass < 3; pass++)
        for (size_t i = 0; i < nn && !st; i++) st = pass < 2 ? plan_inputs(p, gp, i, pass) : zero_bias(p, gp, i);
    for (size_t i = 0; i < nn && !st; i++) st = fused_weight(p, gp, i);
    for (size_t e = 0; e < p->n_sig && !st; e++) {
        bool folded = false; /* it trains as a fold of it and constants (GroupNorm's weight unsqueezed) */
        for (size_t k = 0; k < ni && !folded && !p->taken[e]; k++) folded = !p->orig[k] && folded_param(p, p->folded[k]) == (int)e;
        if (!p->taken[e] && !folded) st = add_fix(p, TS_TORCH_LOST, 0, 0, 0, 0, p->target[e]);
    }
    return st;
}

bool ts_torch_scope(const Node *n, char *buf, size_t cap) {
    const char *s = prop(n->metadata_props, n->n_metadata_props, "pkg.torch.onnx.name_scopes");
    const char *item[2] = {NULL, NULL}, *end[2] = {NULL, NULL}; /* the last two of ['', 'a', 'a.b', 'node'] */
    for (const char *q = s ? strchr(s, '\'') : NULL; q; q = strchr(q, '\'')) {
        const char *e = strchr(++q, '\'');
        if (!e) return false;
        item[0] = item[1], end[0] = end[1];
        item[1] = q, end[1] = e;
        q = e + 1;
    }
    if (!item[0] || cap == 0) return false;
    size_t used = 0;
    for (const char *c = item[0]; c < end[0] && used + 1 < cap; c++)
        buf[used++] = (*c == ':' || *c == '/' || *c == '"' || *c == '\\' || (unsigned char)*c < 0x20) ? '_' : *c;
    buf[used] = '\0';
    return true;
}

ts_status ts_torch_fixes(const struct TensorscopeOnnx__GraphProto *gp, ts_torch_fix **out, size_t *n) {
    *out = NULL, *n = 0;
    const char *sig = prop(gp->metadata_props, gp->n_metadata_props, "pkg.torch.export.ExportedProgram.graph_signature");
    if (!sig) return TS_OK;
    plan p = {0};
    ts_status st = read_signature(&p, sig);
    if (!st && p.n_sig) st = plan_graph(&p, gp);
    if (!st) {
        *out = p.fix, *n = p.n_fix;
        p.fix = NULL, p.n_fix = 0;
    }
    ts_torch_fixes_free(p.fix, p.n_fix);
    ts_strmap_free(&p.by_ph);
    ts_strmap_free(&p.by_target);
    ts_strmap_free(&p.by_init);
    ts_free(p.sig), ts_free(p.ph), ts_free(p.target), ts_free(p.taken), ts_free(p.held), ts_free(p.orig), ts_free(p.folded);
    ts_free(p.params), ts_free(p.n_params);
    return st;
}

/* Whether the node's value attribute `name` is the integer v. */
static bool attr_is(const Node *n, const char *name, int64_t v) {
    for (size_t a = 0; a < n->n_attribute; a++)
        if (n->attribute[a]->name && strcmp(n->attribute[a]->name, name) == 0) return n->attribute[a]->i == v;
    return false;
}

size_t ts_torch_frozen_batch_norms(const struct TensorscopeOnnx__GraphProto *gp, char *first, size_t cap) {
    static const char call[] = "aten._native_batch_norm_legit_functional.default](args = (";
    size_t count = 0;
    for (size_t i = 0; i < gp->n_node; i++) {
        const Node *n = gp->node[i];
        const char *fx = fx_of(n), *args = fx ? strstr(fx, call) : NULL;
        if (!args || !n->op_type) continue;
        bool bn = strcmp(n->op_type, "BatchNormalization") == 0;
        if (!(bn || strcmp(n->op_type, "Conv") == 0) || (bn && attr_is(n, "training_mode", 1))) continue;
        /* (input, weight, bias, running_mean, running_var, training, momentum, eps) */
        const char *q = args + sizeof call - 1;
        for (int k = 0; k < 5 && q; k++) q = strchr(q, ','), q = q ? q + 1 : NULL;
        if (!q || strncmp(q, " True,", 6) != 0) continue;
        if (!count++ && cap && !ts_torch_scope(n, first, cap)) snprintf(first, cap, "%s", n->name ? n->name : "?");
    }
    return count;
}

void ts_torch_fixes_free(ts_torch_fix *f, size_t n) {
    for (size_t i = 0; i < n; i++) ts_free(f[i].name);
    ts_free(f);
}
