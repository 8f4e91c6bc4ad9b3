/* onnx_fuse.c -- the node chains an exporter writes for one PyTorch op
 * (onnx_fuse.h), found by the file's structure alone: what each value is
 * (a constant of ones, a shape equal to x's) is checked by the import when
 * it reaches the chain's last node. */
#include "import/onnx_fuse.h"

#include "onnx.pb-c.h"

#include <string.h>

typedef TensorscopeOnnx__NodeProto Node;

typedef struct scan {
    const struct TensorscopeOnnx__GraphProto *gp;
    ts_strmap producer; /* value -> the node that makes it */
    ts_strmap readers;  /* value -> how many node inputs and graph outputs read it */
    ts_strmap init;     /* initializer -> index */
} scan;

static bool is_op(const Node *n, const char *op) { return n && n->op_type && strcmp(n->op_type, op) == 0 && (!n->domain || !*n->domain); }

static bool named(const char *s) { return s && *s; }

/* The node that makes value `name` when that node is `op` and the value
 * is read once (by the chain's next node), else NULL. */
static const Node *sole(const scan *s, const char *name, const char *op, size_t *index) {
    int k = named(name) ? ts_strmap_get(&s->producer, name) : -1;
    if (k < 0 || ts_strmap_get(&s->readers, name) != 1 || !is_op(s->gp->node[k], op)) return NULL;
    *index = (size_t)k;
    return s->gp->node[k];
}

/* The per-channel operand of the Mul or Add: an Unsqueeze's input (the
 * Unsqueeze joins the chain), or an initializer. */
static const char *per_channel(const scan *s, const char *name, ts_onnx_chain *c) {
    size_t k;
    const Node *u = sole(s, name, "Unsqueeze", &k);
    if (u && u->n_input >= 1 && named(u->input[0])) {
        c->node[c->n_node++] = k;
        return u->input[0];
    }
    return named(name) && ts_strmap_get(&s->init, name) >= 0 ? name : NULL;
}

static float eps_of(const Node *n) {
    for (size_t a = 0; a < n->n_attribute; a++)
        if (n->attribute[a]->name && strcmp(n->attribute[a]->name, "epsilon") == 0) return n->attribute[a]->f;
    return 1e-5f;
}

/* The chain ending at Add node `i`, or false. */
static bool chain_at(const scan *s, size_t i, ts_onnx_chain *c) {
    const Node *add = s->gp->node[i], *mul = NULL, *r2 = NULL, *in = NULL, *r1 = NULL;
    memset(c, 0, sizeof *c);
    if (!is_op(add, "Add") || add->n_input != 2 || add->n_output != 1) return false;
    size_t km = 0, k2, kn, k1;
    int side = 0;
    for (; side < 2 && !mul; side++) mul = sole(s, add->input[side], "Mul", &km);
    if (!mul || mul->n_input != 2) return false;
    const char *shift_in = add->input[2 - side];
    int mside = 0;
    for (; mside < 2 && !r2; mside++) r2 = sole(s, mul->input[mside], "Reshape", &k2);
    if (!r2 || r2->n_input < 2 || !(in = sole(s, r2->input[0], "InstanceNormalization", &kn)) || in->n_input != 3 ||
        !(r1 = sole(s, in->input[0], "Reshape", &k1)) || r1->n_input < 2)
        return false;
    c->node[c->n_node++] = k1, c->node[c->n_node++] = kn, c->node[c->n_node++] = k2, c->node[c->n_node++] = km;
    c->weight = per_channel(s, mul->input[2 - mside], c);
    c->shift = per_channel(s, shift_in, c);
    if (!c->weight || !c->shift) return false;
    c->node[c->n_node++] = i;
    c->last = i;
    c->x = r1->input[0], c->shape_in = r1->input[1], c->scale = in->input[1], c->bias = in->input[2], c->shape_out = r2->input[1];
    c->eps = eps_of(in);
    return named(c->x) && named(c->shape_in) && named(c->scale) && named(c->bias) && named(c->shape_out);
}

/* The other operand of a two-input node than `name` (NULL where neither
 * is `name`) */
static const char *other_input(const Node *n, const char *name) {
    if (n->n_input != 2 || !named(n->input[0]) || !named(n->input[1])) return NULL;
    return strcmp(n->input[0], name) == 0 ? n->input[1] : strcmp(n->input[1], name) == 0 ? n->input[0] : NULL;
}

/* GELU's chain ending at Mul node `i` (by 0.5), or false:
 * Mul(Mul(x, Add(Erf(Div(x, root2)), one)), half), each Mul's and the
 * Add's operands in either order. */
static bool gelu_at(const scan *s, size_t i, ts_onnx_chain *c) {
    const Node *last = s->gp->node[i], *mul = NULL, *add = NULL, *erf = NULL, *div = NULL;
    memset(c, 0, sizeof *c);
    c->kind = TS_ONNX_CHAIN_GELU;
    if (!is_op(last, "Mul") || last->n_input != 2 || last->n_output != 1) return false;
    size_t km = 0, ka = 0, ke = 0, kd = 0;
    int side = 0;
    for (; side < 2 && !mul; side++) mul = sole(s, last->input[side], "Mul", &km);
    if (!mul || mul->n_input != 2 || !named(c->half = last->input[2 - side])) return false;
    int mside = 0;
    for (; mside < 2 && !add; mside++) add = sole(s, mul->input[mside], "Add", &ka);
    if (!add || add->n_input != 2 || !named(c->x = mul->input[2 - mside])) return false;
    int aside = 0;
    for (; aside < 2 && !erf; aside++) erf = sole(s, add->input[aside], "Erf", &ke);
    if (!erf || erf->n_input != 1 || !named(c->one = add->input[2 - aside])) return false;
    if (!(div = sole(s, erf->input[0], "Div", &kd)) || div->n_input != 2 || !named(div->input[0]) || strcmp(div->input[0], c->x) != 0)
        return false;
    c->root2 = div->input[1];
    c->node[c->n_node++] = kd, c->node[c->n_node++] = ke, c->node[c->n_node++] = ka, c->node[c->n_node++] = km;
    c->node[c->n_node++] = i;
    c->last = i;
    return named(c->root2) && other_input(mul, c->x) != NULL;
}

/* SiLU's chain ending at Mul node `i`, or false: Mul(x, Sigmoid(x)),
 * the Mul's operands in either order, the Sigmoid's value read by the Mul
 * alone. */
static bool silu_at(const scan *s, size_t i, ts_onnx_chain *c) {
    const Node *last = s->gp->node[i], *sig = NULL;
    memset(c, 0, sizeof *c);
    c->kind = TS_ONNX_CHAIN_SILU;
    if (!is_op(last, "Mul") || last->n_input != 2 || last->n_output != 1) return false;
    size_t ks = 0;
    int side = 0;
    for (; side < 2 && !sig; side++) {
        sig = sole(s, last->input[side], "Sigmoid", &ks);
        if (sig && (sig->n_input != 1 || !named(sig->input[0]) || !named(last->input[1 - side]) || strcmp(sig->input[0], last->input[1 - side]) != 0))
            sig = NULL;
    }
    if (!sig) return false;
    c->x = sig->input[0];
    c->node[c->n_node++] = ks, c->node[c->n_node++] = i;
    c->last = i;
    return true;
}

/* Node n's int attribute `name`, or def */
static int64_t int_attr(const Node *n, const char *name, int64_t def) {
    for (size_t a = 0; a < n->n_attribute; a++)
        if (n->attribute[a]->name && strcmp(n->attribute[a]->name, name) == 0) return n->attribute[a]->i;
    return def;
}

/* RMSNorm's chain ending at Mul node `i` (by the weight), or false:
 * Mul(w, Mul(x, Reciprocal(Sqrt(Add(ReduceMean(Pow(x, 2)), eps))))), the
 * Reciprocal a Div(1, .) or the inner Mul a Div(x, Sqrt(.)), the Pow a
 * Mul(x, x), each Mul's and the Add's operands in either order; the inner
 * Mul's value may pass a Cast to float first (transformers' LlamaRMSNorm,
 * `.to(input_dtype)`). */
static bool rms_norm_at(const scan *s, size_t i, ts_onnx_chain *c) {
    const Node *last = s->gp->node[i], *xm = NULL, *inv = NULL, *sq, *add = NULL, *rm = NULL, *p;
    memset(c, 0, sizeof *c);
    c->kind = TS_ONNX_CHAIN_RMS_NORM;
    if (!is_op(last, "Mul") || last->n_input != 2 || last->n_output != 1) return false;
    size_t kx = 0, ki = 0, ks = 0, ka = 0, kr = 0, kp = 0, kc = 0;
    const Node *cast = NULL;
    int side = 0;
    for (; side < 2 && !xm; side++) {
        const char *in = last->input[side];
        cast = sole(s, in, "Cast", &kc);
        if (cast && cast->n_input == 1 && int_attr(cast, "to", 0) == 1) in = cast->input[0]; /* to FLOAT */
        else cast = NULL;
        if (!(xm = sole(s, in, "Mul", &kx))) xm = sole(s, in, "Div", &kx);
    }
    if (!xm || xm->n_input != 2 || !named(c->weight = last->input[2 - side])) return false;
    if (is_op(xm, "Div")) { /* x / Sqrt(.) */
        if (!(sq = sole(s, xm->input[1], "Sqrt", &ks))) return false;
        c->x = xm->input[0];
    } else {
        int xside = 0;
        for (; xside < 2 && !inv; xside++)
            if (!(inv = sole(s, xm->input[xside], "Reciprocal", &ki))) inv = sole(s, xm->input[xside], "Div", &ki);
        if (!inv || !named(c->x = xm->input[2 - xside])) return false;
        if (inv->n_input != (is_op(inv, "Div") ? 2u : 1u) || (is_op(inv, "Div") && !named(c->one = inv->input[0]))) return false;
        if (!(sq = sole(s, inv->input[is_op(inv, "Div") ? 1 : 0], "Sqrt", &ks))) return false;
    }
    if (!named(c->x) || sq->n_input != 1) return false;
    if (!(add = sole(s, sq->input[0], "Add", &ka)) || add->n_input != 2) return false;
    int aside = 0;
    for (; aside < 2 && !rm; aside++) rm = sole(s, add->input[aside], "ReduceMean", &kr);
    if (!rm || rm->n_input < 1 || !named(c->eps_in = add->input[2 - aside]) || int_attr(rm, "keepdims", 1) != 1) return false;
    c->axes_in = rm->n_input > 1 && named(rm->input[1]) ? rm->input[1] : NULL;
    for (size_t a = 0; a < rm->n_attribute && !c->axes_in; a++) {
        const TensorscopeOnnx__AttributeProto *at = rm->attribute[a];
        if (!at->name || strcmp(at->name, "axes") != 0) continue;
        if (at->n_ints != 1) return false;
        c->axis = at->ints[0], c->has_axis = true;
    }
    if (!c->axes_in && !c->has_axis) return false; /* every axis */
    if ((p = sole(s, rm->input[0], "Pow", &kp))) {
        if (p->n_input != 2 || !named(p->input[0]) || strcmp(p->input[0], c->x) != 0 || !named(c->two = p->input[1])) return false;
    } else if ((p = sole(s, rm->input[0], "Mul", &kp))) {
        if (p->n_input != 2 || !named(p->input[0]) || !named(p->input[1]) || strcmp(p->input[0], c->x) != 0 || strcmp(p->input[1], c->x) != 0)
            return false;
    } else {
        return false;
    }
    c->node[c->n_node++] = kp, c->node[c->n_node++] = kr, c->node[c->n_node++] = ka, c->node[c->n_node++] = ks;
    if (inv) c->node[c->n_node++] = ki;
    c->node[c->n_node++] = kx;
    if (cast) c->node[c->n_node++] = kc;
    c->node[c->n_node++] = i;
    c->last = i;
    return true;
}

/* Whether node n's attribute `name` is the ints want[0..k) */
static bool ints_attr_is(const Node *n, const char *name, const int64_t *want, size_t k) {
    for (size_t a = 0; a < n->n_attribute; a++) {
        const TensorscopeOnnx__AttributeProto *at = n->attribute[a];
        if (!at->name || strcmp(at->name, name) != 0) continue;
        if (at->n_ints != k) return false;
        for (size_t j = 0; j < k; j++)
            if (at->ints[j] != want[j]) return false;
        return true;
    }
    return false;
}

/* Softmax's axis attribute is the last of 4 dims (-1 or 3; checked
 * against the opset at import) */
static bool last_axis(const Node *n) {
    for (size_t a = 0; a < n->n_attribute; a++)
        if (n->attribute[a]->name && strcmp(n->attribute[a]->name, "axis") == 0) return n->attribute[a]->i == -1 || n->attribute[a]->i == 3;
    return false;
}

/* Whether value `name` (k or v, side 0 or 1) is another's repeated for
 * the query heads, Reshape(Expand(Unsqueeze(x))), each read once: its
 * nodes join c (the shapes are checked at import). */
static void repeated_heads(const scan *s, const char *name, int side, ts_onnx_chain *c) {
    size_t kr, ke, ku;
    const Node *r = sole(s, name, "Reshape", &kr), *e = r && r->n_input == 2 ? sole(s, r->input[0], "Expand", &ke) : NULL;
    const Node *u = e && e->n_input == 2 ? sole(s, e->input[0], "Unsqueeze", &ku) : NULL;
    if (!u || u->n_input < 1 || !named(u->input[0])) return;
    c->kv_src[side] = u->input[0], c->kv_unsq[side] = e->input[0], c->kv_exp[side] = r->input[0];
    c->node[c->n_node++] = ku, c->node[c->n_node++] = ke, c->node[c->n_node++] = kr;
}

/* Attention's chain ending at MatMul node `i` (by v), or false:
 * MatMul(Softmax(Add(Mul(MatMul(q, Transpose(k)), scale), mask)), v), the
 * Mul a Div by the scale, the Add a Where(mask, fill, scores), the Mul and
 * the Add each optional, the Mul's and the Add's operands in either
 * order. */
static bool attention_at(const scan *s, size_t i, ts_onnx_chain *c) {
    const Node *out = s->gp->node[i], *sm, *x, *scores, *tr;
    memset(c, 0, sizeof *c);
    c->kind = TS_ONNX_CHAIN_ATTENTION;
    if (out->n_input != 2 || out->n_output != 1 || !named(c->v = out->input[1])) return false;
    size_t ks = 0, kx = 0, km = 0, kt = 0;
    if (!(sm = sole(s, out->input[0], "Softmax", &ks)) || sm->n_input != 1 || !last_axis(sm)) return false;
    c->node[c->n_node++] = ks;
    const char *in = sm->input[0];
    int side = 0;
    if ((x = sole(s, in, "Add", &kx)) && x->n_input == 2) { /* the mask: the other operand than the scaled scores */
        const Node *y = NULL;
        for (; side < 2 && !y; side++)
            if ((y = sole(s, x->input[side], "Mul", &km)) || (y = sole(s, x->input[side], "Div", &km)) || (y = sole(s, x->input[side], "MatMul", &km)))
                break;
        if (!y || !named(c->mask = x->input[1 - side])) return false;
        c->node[c->n_node++] = c->mask_node = kx;
        in = x->input[side];
    } else if ((x = sole(s, in, "Where", &kx)) && x->n_input == 3 && named(x->input[0]) && named(x->input[1]) && named(x->input[2])) {
        c->mask = x->input[0], c->fill = x->input[1]; /* masked_fill(mask, fill) */
        c->node[c->n_node++] = c->mask_node = kx;
        in = x->input[2];
    }
    if ((x = sole(s, in, "Mul", &km)) || (x = sole(s, in, "Div", &km))) { /* the scale */
        if (x->n_input != 2) return false;
        c->scale_div = is_op(x, "Div");
        const Node *y = NULL;
        for (side = 0; side < (c->scale_div ? 1 : 2) && !y; side++)
            if ((y = sole(s, x->input[side], "MatMul", &kx))) break;
        if (!y || !named(c->scale_by = x->input[1 - side])) return false;
        c->node[c->n_node++] = c->scale_node = km;
        in = x->input[side];
    }
    if (!(scores = sole(s, in, "MatMul", &kx)) || scores->n_input != 2 || !named(c->q = scores->input[0])) return false;
    if (!(tr = sole(s, scores->input[1], "Transpose", &kt)) || tr->n_input != 1 || !named(c->k = tr->input[0]) ||
        !ints_attr_is(tr, "perm", (const int64_t[]){0, 1, 3, 2}, 4))
        return false;
    c->node[c->n_node++] = kx, c->node[c->n_node++] = kt;
    repeated_heads(s, c->k, 0, c);
    repeated_heads(s, c->v, 1, c);
    c->node[c->n_node++] = i;
    c->last = i;
    return true;
}

static ts_status index_graph(scan *s) {
    const struct TensorscopeOnnx__GraphProto *gp = s->gp;
    for (size_t k = 0; k < gp->n_initializer; k++)
        if (named(gp->initializer[k]->name) && ts_strmap_put(&s->init, gp->initializer[k]->name, (int)k)) return TS_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < gp->n_node; i++) {
        const Node *n = gp->node[i];
        for (size_t j = 0; j < n->n_output; j++)
            if (named(n->output[j]) && ts_strmap_put(&s->producer, n->output[j], (int)i)) return TS_ERR_OUT_OF_MEMORY;
        for (size_t j = 0; j < n->n_input; j++) {
            int r = named(n->input[j]) ? ts_strmap_get(&s->readers, n->input[j]) : -2;
            if (r > -2 && ts_strmap_put(&s->readers, n->input[j], r < 0 ? 1 : r + 1)) return TS_ERR_OUT_OF_MEMORY;
        }
    }
    for (size_t o = 0; o < gp->n_output; o++) { /* a graph output is read by the user: never inside a chain */
        const char *name = gp->output[o]->name;
        int r = named(name) ? ts_strmap_get(&s->readers, name) : -2;
        if (r > -2 && ts_strmap_put(&s->readers, name, r < 0 ? 1 : r + 1)) return TS_ERR_OUT_OF_MEMORY;
    }
    return TS_OK;
}

ts_status ts_onnx_chains(const struct TensorscopeOnnx__GraphProto *gp, ts_onnx_chain **out, size_t *n) {
    *out = NULL, *n = 0;
    scan s = {.gp = gp};
    ts_status st = index_graph(&s);
    size_t cap = 0;
    for (size_t i = 0; i < gp->n_node && !st; i++) {
        ts_onnx_chain c;
        if (!(is_op(gp->node[i], "Add") && chain_at(&s, i, &c)) && !(is_op(gp->node[i], "Mul") && gelu_at(&s, i, &c)) &&
            !(is_op(gp->node[i], "Mul") && silu_at(&s, i, &c)) &&
            !(is_op(gp->node[i], "MatMul") && attention_at(&s, i, &c)) && !(is_op(gp->node[i], "Mul") && rms_norm_at(&s, i, &c)))
            continue;
        if ((st = ts_grow((void **)out, &cap, *n + 1, sizeof **out))) break;
        (*out)[(*n)++] = c;
    }
    ts_strmap_free(&s.producer);
    ts_strmap_free(&s.readers);
    ts_strmap_free(&s.init);
    if (st) ts_free(*out), *out = NULL, *n = 0;
    return st;
}
