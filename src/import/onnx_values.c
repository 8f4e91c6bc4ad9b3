/* onnx_values.c -- the importer's values: the table of the file's value names
 * (graph tensors or host constants), node errors, node attributes, values
 * made graph tensors (parameters, constants, samples repeated to the batch),
 * and the small graph constants the ops compose with. */
#include "import/onnx_ops.h"
#include "core/lowbits.h"
#include "graph/int_math.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------------- values */

static size_t hash_str(const char *s) {
    size_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

value *ts_onnx_lookup(const importer *im, const char *name) {
    if (!im->hcap) return NULL;
    for (size_t i = hash_str(name) & (im->hcap - 1);; i = (i + 1) & (im->hcap - 1)) {
        size_t k = im->hash[i];
        if (!k) return NULL;
        if (strcmp(im->v[k - 1]->name, name) == 0) return im->v[k - 1];
    }
}

static ts_status rehash(importer *im, size_t cap) {
    size_t *h = ts_calloc(cap, sizeof *h);
    if (!h) return TS_ERR_OUT_OF_MEMORY;
    for (size_t k = 0; k < im->nv; k++) {
        size_t i = hash_str(im->v[k]->name) & (cap - 1);
        while (h[i]) i = (i + 1) & (cap - 1);
        h[i] = k + 1;
    }
    ts_free(im->hash);
    im->hash = h;
    im->hcap = cap;
    return TS_OK;
}

/* Defines `name` (a later definition of the same name replaces the first). */
ts_status ts_onnx_define(importer *im, const char *name, const value *val) {
    value *old = ts_onnx_lookup(im, name);
    if (old) {
        ts_const_free(&old->c);
        *old = *val;
        old->name = name;
        return TS_OK;
    }
    if ((im->nv + 1) * 2 > im->hcap && rehash(im, im->hcap ? im->hcap * 2 : 256)) return TS_ERR_OUT_OF_MEMORY;
    if (ts_grow((void **)&im->v, &im->capv, im->nv + 1, sizeof *im->v)) return TS_ERR_OUT_OF_MEMORY;
    value *v = ts_malloc(sizeof *v);
    if (!v) return TS_ERR_OUT_OF_MEMORY;
    *v = *val;
    v->name = name;
    im->v[im->nv] = v;
    size_t i = hash_str(name) & (im->hcap - 1);
    while (im->hash[i]) i = (i + 1) & (im->hcap - 1);
    im->hash[i] = ++im->nv;
    return TS_OK;
}

/* ----------------------------------------------------------------- errors */

static const char *node_name(const importer *im) {
    return im->node && im->node->name && *im->node->name ? im->node->name : "(unnamed)";
}

ts_status ts_onnx_node_error(const importer *im, ts_status code, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!im->node) return ts_error(code, "%s: %s", im->path, msg); /* after the nodes: a graph output's */
    return ts_error(code, "%s: node %d '%s' (%s, opset %lld): %s", im->path, im->node_index, node_name(im),
                    im->node->op_type ? im->node->op_type : "?", (long long)im->opset, msg);
}

/* A kernel's error (onnx_consts.c, the graph builders) as the node's. */
ts_status ts_onnx_fold_result(importer *im, ts_status st) {
    if (st == TS_OK) return TS_OK;
    char msg[600];
    snprintf(msg, sizeof msg, "%s", ts_last_error());
    return ts_onnx_node_error(im, st, "%s", msg);
}

/* ------------------------------------------------------------ attributes */

const Attr *ts_onnx_attr(const importer *im, const char *name) {
    for (size_t i = 0; i < im->node->n_attribute; i++)
        if (im->node->attribute[i]->name && strcmp(im->node->attribute[i]->name, name) == 0) return im->node->attribute[i];
    return NULL;
}
/* The index of string attribute a's value among choices[0..n); n where it
 * is none of them or holds no string. */
int ts_onnx_attr_choice(const Attr *a, const char *const *choices, int n) {
    int k = 0;
    while (k < n && !(a->has_s && a->s.len == strlen(choices[k]) && memcmp(a->s.data, choices[k], a->s.len) == 0)) k++;
    return k;
}
int64_t ts_onnx_attr_i(const importer *im, const char *name, int64_t def) {
    const Attr *a = ts_onnx_attr(im, name);
    return a && a->has_i ? a->i : def;
}
/* An INT attribute (def when absent) range-checked into [lo, hi], the
 * values the op allows: every int64 attribute that ends up in an int or
 * an index is read here, never truncated. */
ts_status ts_onnx_attr_int(const importer *im, const char *name, int64_t def, int64_t lo, int64_t hi, int64_t *out) {
    int64_t v = ts_onnx_attr_i(im, name, def);
    if (v < lo || v > hi)
        return ts_onnx_node_error(im, TS_ERR_FORMAT, "attribute '%s' is %lld; %s takes %lld to %lld", name, (long long)v, im->node->op_type,
                                  (long long)lo, (long long)hi);
    *out = v;
    return TS_OK;
}
ts_status ts_onnx_attr_int32(const importer *im, const char *name, int64_t def, int64_t lo, int64_t hi, int *out) {
    int64_t v = 0;
    ts_status st = ts_onnx_attr_int(im, name, def, lo, hi, &v);
    *out = (int)v;
    return st;
}
ts_status ts_onnx_attr_flag(const importer *im, const char *name, bool *out) {
    int v = 0;
    ts_status st = ts_onnx_attr_int32(im, name, 0, 0, 1, &v);
    *out = v != 0;
    return st;
}
/* An axis of a tensor of ndim dimensions, -ndim to ndim - 1 (to ndim when
 * `end` is), made non-negative. */
ts_status ts_onnx_attr_axis(const importer *im, const char *name, int64_t def, int ndim, bool end, int *out) {
    int64_t v = 0;
    ts_status st = ts_onnx_attr_int(im, name, def, -(int64_t)ndim, end ? ndim : ndim - 1, &v);
    *out = (int)(v < 0 ? v + ndim : v);
    return st;
}
double ts_onnx_attr_f(const importer *im, const char *name, double def) {
    const Attr *a = ts_onnx_attr(im, name);
    return a && a->has_f ? a->f : def;
}
/* An INTS attribute, or *n = -1 when absent. */
void ts_onnx_attr_ints(const importer *im, const char *name, const int64_t **v, int64_t *n) {
    const Attr *a = ts_onnx_attr(im, name);
    *v = a ? a->ints : NULL;
    *n = a ? (int64_t)a->n_ints : -1;
}
/* An INTS attribute of at most `cap` values, each range-checked into
 * [lo, hi] (as ts_onnx_attr_int), into out; *n = -1 when absent. */
ts_status ts_onnx_attr_int_list(const importer *im, const char *name, int64_t lo, int64_t hi, int64_t *out, int cap, int *n) {
    const int64_t *v;
    int64_t nv;
    ts_onnx_attr_ints(im, name, &v, &nv);
    if (nv > cap) return ts_onnx_node_error(im, TS_ERR_FORMAT, "attribute '%s' has %lld values; %s takes at most %d", name, (long long)nv, im->node->op_type, cap);
    *n = (int)nv;
    for (int i = 0; i < *n; i++) {
        if (v[i] < lo || v[i] > hi)
            return ts_onnx_node_error(im, TS_ERR_FORMAT, "attribute '%s' value %d is %lld; %s takes %lld to %lld", name, i, (long long)v[i],
                                      im->node->op_type, (long long)lo, (long long)hi);
        out[i] = v[i];
    }
    return TS_OK;
}

/* ---------------------------------------------------------- graph tensors */

static bool host_little_endian(void) {
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

/* An integer constant's values exactly as an i64 graph constant `name`;
 * NULL without an error where one is no integer. */
static ts_tensor *i64_constant(importer *im, value *v, const char *name, ts_status *st) {
    int64_t n = ts_shape_numel(&v->c.shape);
    uint64_t bytes = (uint64_t)(n ? n : 1) * sizeof(int64_t);
    if ((*st = ts_const_charge(2 * bytes))) { /* the graph's copy, which stays, and the one it is made from */
        *st = ts_onnx_fold_result(im, *st);
        return NULL;
    }
    int64_t *k = ts_malloc((size_t)bytes);
    bool oom = !k, exact = !oom;
    for (int64_t i = 0; exact && i < n; i++)
        exact = v->c.iv ? (k[i] = v->c.iv[i], true) : ts_onnx_int_value(v->c.v[i], INT64_MIN, INT64_MAX, &k[i]) && (double)k[i] == v->c.v[i];
    ts_array a = {.dtype = TS_I64, .ndim = v->c.shape.ndim, .data = k};
    for (int d = 0; d < a.ndim; d++) a.shape[d] = v->c.shape.d[d];
    ts_tensor *t = exact ? ts_constant(im->g, name, &a) : NULL;
    ts_free(k);
    ts_const_release(bytes);
    if (!t && exact) *st = ts_graph_status(im->g) ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
    if (oom) *st = TS_ERR_OUT_OF_MEMORY;
    if (!t) ts_const_release(bytes);
    return t;
}

/* A graph tensor of v's values (ts_onnx_as_tensor): float initializers become
 * parameters under their own names the first time a graph op reads them
 * (float32 raw data is copied as it is, the rest converted). */
static ts_tensor *made_tensor(importer *im, value *v, ts_status *st) {
    if (v->t) return v->t;
    if (v->param) {
        ts_tensor *p = ts_param(im->g, v->pname ? v->pname : v->name, v->c.shape.ndim, v->c.shape.d);
        if (!p || (v->pname && !v->fused && ts_graph_add_alias(im->g, v->name, p))) {
            *st = ts_graph_status(im->g);
            return NULL;
        }
        int64_t n = ts_shape_numel(&v->c.shape);
        const TensorProto *tp = v->param;
        if (!v->c.v && tp->has_raw_data && !ts_onnx_external(tp) && v->c.dtype == TS_ONNX_FLOAT && host_little_endian()) {
            memcpy(p->value, tp->raw_data.data, (size_t)n * sizeof(float));
        } else {
            if ((*st = ts_onnx_decoded(im, v))) return NULL;
            for (int64_t i = 0; i < n; i++) p->value[i] = (float)v->c.v[i];
        }
        v->t = p;
        return p;
    }
    /* a constant computed at import (a mask, position ids): a graph
     * constant, bool for bool data, i32 for integers (i64 where int32 does
     * not hold them: exactly), else f32; never cached in
     * v->t, so later folds still see the host constant, but in v->made:
     * the second graph op that reads it reads the same tensor */
    if (v->made) return v->made;
    int64_t n = ts_shape_numel(&v->c.shape);
    bool integer = !ts_onnx_dtype_is_float(v->c.dtype), boolean = v->c.dtype == TS_ONNX_BOOL, wide = false;
    char name[512];
    size_t used = 0;
    for (const char *p = v->name; *p && used + 1 < sizeof name; p++)
        if (!(used == 0 && *p == '/')) name[used++] = *p == '/' ? '.' : *p;
    name[used] = '\0';
    /* a name already taken (a Loop body's constant, made again each iteration): the scope's next free one */
    char *again = ts_graph_find(im->g, used ? name : "constant") ? ts_graph_op_output_name(im->g, used ? name : "constant") : NULL;
    const char *cname = again ? again : used ? name : "constant";
    for (int64_t i = 0; integer && !boolean && !wide && i < n; i++) wide = v->c.iv || !(v->c.v[i] >= INT32_MIN && v->c.v[i] <= INT32_MAX);
    if (wide) {
        v->made = i64_constant(im, v, cname, st);
        ts_free(again);
        if (!v->made && !*st) *st = ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "constant '%s' holds a value that is no integer", v->name);
        return v->made;
    }
    uint64_t bytes = (uint64_t)(n ? n : 1) * 4;
    /* the graph's copy, which stays, and the f32/i32 values it is made from, while both are alive */
    if ((*st = ts_const_charge(2 * bytes))) {
        *st = ts_onnx_fold_result(im, *st);
        return NULL;
    }
    void *data = ts_malloc((size_t)bytes);
    if (!data) {
        *st = TS_ERR_OUT_OF_MEMORY;
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t k = 0;
        if (boolean) {
            ((uint8_t *)data)[i] = v->c.v[i] != 0.0;
        } else if (!integer) {
            ((float *)data)[i] = (float)v->c.v[i];
        } else if (ts_onnx_int_value(v->c.v[i], INT32_MIN, INT32_MAX, &k)) {
            ((int32_t *)data)[i] = (int32_t)k;
        } else { /* never wrapped (not reached: such constants are i64) */
            ts_free(data);
            ts_free(again);
            *st = ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "constant '%s' holds %.17g at element %lld, no integer", v->name, v->c.v[i], (long long)i);
            return NULL;
        }
    }
    ts_array a = integer ? ts_array_i32(data, v->c.shape.ndim, v->c.shape.d) : ts_array_f32(data, v->c.shape.ndim, v->c.shape.d);
    if (boolean) a.dtype = TS_BOOL; /* a byte an element */
    ts_tensor *t = ts_constant(im->g, cname, &a);
    ts_free(again);
    ts_free(data);
    ts_const_release(bytes);
    if (!t) *st = ts_graph_status(im->g);
    v->made = t;
    return t;
}

/* A graph tensor of f32 values: an i32 one through CastFloat, an i64 or
 * bool one (1 or 0) through ts_cast. */
ts_tensor *ts_onnx_f32_of(importer *im, ts_tensor *t, ts_status *st) {
    if (t && t->dtype == TS_I32 && !(t = ts_unary(im->g, "CastFloat", t, 0.0f, 0.0f))) *st = ts_graph_status(im->g);
    if (t && (t->dtype == TS_I64 || t->dtype == TS_BOOL) && !(t = ts_cast(im->g, t, TS_F32))) *st = ts_graph_status(im->g);
    return t;
}

/* An integer operand as an i64 graph tensor: an i32 or i64 graph tensor,
 * or an integer constant of any shape, exactly (one beyond 2^53, of the
 * file or folded, from its exact values, c.iv; a uint64 as its bits);
 * NULL where it is neither (no error: the caller computes as before). */
ts_tensor *ts_onnx_i64_of(importer *im, value *v, ts_status *st) {
    if (v->t) {
        if (v->t->dtype == TS_I64) return v->t;
        ts_tensor *t = v->t->dtype == TS_I32 ? ts_cast(im->g, v->t, TS_I64) : NULL;
        if (v->t->dtype == TS_I32 && !t) *st = ts_graph_status(im->g);
        return t;
    }
    if (v->param || ts_onnx_dtype_is_float(v->c.dtype) || ts_lowbits_is(v->c.dtype) || (*st = ts_onnx_decoded(im, v))) return NULL;
    char *name = ts_graph_op_output_name(im->g, "Int64");
    ts_tensor *t = name ? i64_constant(im, v, name, st) : NULL;
    if (!name) *st = TS_ERR_OUT_OF_MEMORY;
    ts_free(name);
    return t;
}

/* A scalar i64 graph constant `<scope>/Int64:<k>` holding k. */
ts_tensor *ts_onnx_i64_scalar(importer *im, int64_t k, ts_status *st) {
    char *name = ts_graph_op_output_name(im->g, "Int64");
    ts_tensor *t = name ? ts_constant(im->g, name, &(ts_array){.dtype = TS_I64, .ndim = 0, .data = &k}) : NULL;
    ts_free(name);
    if (!t) *st = ts_graph_status(im->g) ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
    return t;
}

/* The integer k as a graph scalar of like's dtype (i32 or i64). */
ts_tensor *ts_onnx_int_scalar_like(importer *im, const ts_tensor *like, int64_t k, ts_status *st) {
    if (like->dtype == TS_I64) return ts_onnx_i64_scalar(im, k, st);
    int32_t k32 = ts_int_wrap32(k);
    char *name = ts_graph_op_output_name(im->g, "Int32");
    ts_tensor *t = name ? ts_constant(im->g, name, &(ts_array){.dtype = TS_I32, .ndim = 0, .data = &k32}) : NULL;
    ts_free(name);
    if (!t) *st = ts_graph_status(im->g) ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
    return t;
}

/* An integer operand v (a graph tensor or constant; a scalar bound, say)
 * of like's dtype, exactly: ts_onnx_i64_of, an i32 like's cast to i32
 * (ONNX gives the operands one type); NULL where v is no integer. */
ts_tensor *ts_onnx_int_like(importer *im, value *v, const ts_tensor *like, ts_status *st) {
    if (like->dtype == TS_I32 && v->t && v->t->dtype == TS_I32) return v->t;
    ts_tensor *t = ts_onnx_i64_of(im, v, st);
    if (t && like->dtype == TS_I32 && !(t = ts_cast(im->g, t, TS_I32))) *st = ts_graph_status(im->g);
    return t;
}

/* x broadcast to the shape `to` (numpy's rules, both ways) as x + zeros,
 * the zeros spanning only the broadcast dims: the binary ops' broadcasting
 * gives the forward and their reduce-to-shape the backward (the gradient
 * summed over the broadcast dims). */
ts_tensor *ts_onnx_broadcast_to(importer *im, ts_tensor *x, const ts_shape *to, ts_status *st) {
    ts_shape zs = {.ndim = to->ndim};
    int64_t nz = 1;
    for (int i = 0; i < to->ndim; i++) {
        int j = i - (to->ndim - x->shape.ndim); /* x's dim aligned with to's i-th */
        zs.d[i] = j < 0 || x->shape.d[j] == 1 ? to->d[i] : 1;
        nz *= zs.d[i];
    }
    /* an integer x: its dtype's zeros, added exactly (ts_binary); a bool
     * one: falses, or-ed */
    bool integer = x->dtype == TS_I32 || x->dtype == TS_I64, boolean = x->dtype == TS_BOOL;
    size_t es = integer ? ts_dtype_size(x->dtype) : 4;
    uint64_t bytes = (uint64_t)(nz ? nz : 1) * es;
    if ((*st = ts_const_charge(2 * bytes))) { /* the graph's zeros and the copy they are made from */
        *st = ts_onnx_fold_result(im, *st);
        return NULL;
    }
    void *zeros = ts_calloc((size_t)(nz ? nz : 1), es);
    char *name = zeros ? ts_graph_op_output_name(im->g, "ExpandZeros") : NULL;
    ts_array za = {.dtype = integer ? x->dtype : boolean ? TS_BOOL : TS_F32, .ndim = zs.ndim, .data = zeros};
    for (int d = 0; d < zs.ndim; d++) za.shape[d] = zs.d[d];
    ts_tensor *z = name ? ts_constant(im->g, name, &za) : NULL;
    ts_free(name);
    ts_free(zeros);
    ts_const_release(bytes);
    ts_tensor *t = !z ? NULL : integer ? ts_binary(im->g, "Add", x, z) : boolean ? ts_binary(im->g, "Or", x, z) : ts_add(im->g, x, z);
    if (!t) *st = ts_graph_status(im->g) ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
    return t;
}

/* The first graph input of the file whose dim 0 is `batch`, or NULL. */
static ts_tensor *input_of_batch(const importer *im, int64_t batch) {
    for (size_t i = im->inputs_from; i < im->inputs_to; i++) {
        ts_tensor *t = ts_graph_tensor_at(im->g, i);
        if (t->op == TS_OP_INPUT && t->shape.ndim > 0 && t->shape.d[0] == batch) return t;
    }
    return NULL;
}

/* sample ([1,...]) repeated along dim 0 to the shape `to`, whose dim 0 is
 * the example's batch: sample + zeros [B,1,...], the zeros made from dim 0
 * of the graph input of that batch (a CastIndex clamped to 0 reads none of
 * its values, NaN included), so that the compile gives them the batch
 * that input has at the run; ts_onnx_broadcast_to's constant zeros where no input
 * has that batch. The gradient reaching the sample is summed over the
 * batch. An i32, i64 or bool sample (ids, masks) is repeated exactly, in
 * its dtype. */
ts_tensor *ts_onnx_repeated(importer *im, ts_tensor *sample, const ts_shape *to, ts_status *st) {
    bool integer = sample->dtype == TS_I32 || sample->dtype == TS_I64, boolean = sample->dtype == TS_BOOL; /* exactly, in its dtype */
    ts_tensor *in = input_of_batch(im, to->d[0]), *z = in ? ts_onnx_f32_of(im, in, st) : NULL,
              *x = integer || boolean ? sample : ts_onnx_f32_of(im, sample, st), *t;
    for (int d = 1; z && d < in->shape.ndim; d++)
        if (z->shape.d[d] != 1) z = ts_slice(im->g, z, d, 0, 1);
    z = z ? ts_unary(im->g, "CastIndex", z, 0.0f, 0.0f) : NULL;
    z = z ? ts_unary(im->g, "CastFloat", z, 0.0f, 0.0f) : NULL;
    ts_shape zs = {.ndim = to->ndim, .d = {to->d[0]}};
    for (int d = 1; d < to->ndim; d++) zs.d[d] = 1;
    if (z && !ts_shape_equal(&z->shape, &zs)) z = ts_reshape(im->g, z, zs.ndim, zs.d);
    if (!x) return NULL;
    if ((integer || boolean) && z) z = ts_cast(im->g, z, sample->dtype); /* bool: false */
    t = !in       ? ts_onnx_broadcast_to(im, x, to, st)
        : !z      ? NULL
        : integer ? ts_binary(im->g, "Add", x, z)
        : boolean ? ts_binary(im->g, "Or", x, z)
                  : ts_add(im->g, x, z);
    if (!t && !*st) *st = ts_graph_status(im->g);
    return t;
}

/* The value's first sample, where it is `batch` (above 1) equal samples
 * along dim 0 (exporters make masks, ids and tokens for their example's
 * batch): a constant's (GPT-2's attention mask [B,1,T,T], BERT's
 * token-type ids [B,T]; of integers f32 holds exactly), or a parameter's
 * that the exporter folded from one with constants (ViT's class token
 * expanded to the batch, the dynamo export's `expand`), which is then
 * made a parameter of that one sample under its name and trains as the
 * module's one token does. NULL where it is neither, or after an error
 * (*st). */
ts_tensor *ts_onnx_sample_of(importer *im, value *v, int64_t batch, ts_status *st) {
    const ts_shape *s = &v->c.shape;
    if (batch < 2 || v->t || s->ndim < 1 || s->d[0] != batch) return NULL;
    if (v->sample) return v->sample;
    if (v->param && (!v->folded || (*st = ts_onnx_decoded(im, v)))) return NULL;
    if (!v->c.v) return NULL;
    int64_t n = ts_shape_numel(s), row = n / batch;
    bool integer = !ts_onnx_dtype_is_float(v->c.dtype);
    for (int64_t i = 0; i < n; i++)
        if (v->c.v[i] != v->c.v[i % row] || (integer && (double)(float)v->c.v[i] != v->c.v[i])) return NULL;
    char name[512];
    snprintf(name, sizeof name, "%s.sample", v->name);
    value first = *v; /* the first sample's values, which c.v begins with */
    first.name = v->param ? v->name : name;
    first.c.shape.d[0] = 1;
    first.made = NULL;
    return v->sample = made_tensor(im, &first, st);
}

/* A graph tensor for v (made_tensor's) -- but where v is equal samples
 * along dim 0 (ts_onnx_sample_of) as many as the batch of a graph input (or
 * already read as its sample), its first sample repeated to that input's
 * batch: it then follows the batch the model is compiled at (the example's
 * class token, token-type ids). */
ts_tensor *ts_onnx_as_tensor(importer *im, value *v, ts_status *st) {
    if (v->t) return v->t;
    if (v->seq) {
        *st = ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "'%s' is a sequence where a tensor is read; tensorscope reads sequences in the Sequence "
                                 "ops, ConcatFromSequence and Loop (ConcatFromSequence makes one a tensor)", v->name ? v->name : "");
        return NULL;
    }
    if (v->made) return v->made;
    const ts_shape *s = &v->c.shape;
    ts_tensor *one = v->sample || (s->ndim > 1 && input_of_batch(im, s->d[0])) ? ts_onnx_sample_of(im, v, s->d[0], st) : NULL;
    if (!one) return *st ? NULL : made_tensor(im, v, st);
    ts_tensor *t = ts_onnx_repeated(im, one, s, st);
    if (v->param) v->t = t;
    else v->made = t;
    return t;
}

/* For an error on a value that must be a constant: how to make a graph
 * input one (bind it at import), or "". */
const char *ts_onnx_bind_hint(const value *x) {
    return x && x->t && x->t->op == TS_OP_INPUT ? "; it is a graph input: bind its value at import (ts_onnx_input.value, in Python "
                                                  "Graph.from_onnx(path, input_values={name: array}))"
                                                : "";
}

/* Whether v is a constant scalar (any shape of one element), into *s. */
bool ts_onnx_const_scalar(const value *v, double *s) {
    if (!is_const(v) || v->param || v->seq || ts_shape_numel(&v->c.shape) != 1) return false;
    *s = v->c.v[0];
    return true;
}

ts_status ts_onnx_built(importer *im, ts_tensor *t, value *out) {
    if (!t) return ts_graph_status(im->g) ? ts_graph_status(im->g) : ts_onnx_node_error(im, TS_ERR_INTERNAL, "a builder returned NULL");
    memset(out, 0, sizeof *out);
    out->t = t;
    return TS_OK;
}

/* Ops that exist only folded here: every input must be a constant. */
ts_status ts_onnx_need_consts(importer *im, node_io *io) {
    for (int i = 0; i < io->n_in; i++) {
        ts_status st = ts_onnx_decoded(im, io->in[i]);
        if (st) return st;
    }
    for (int i = 0; i < io->n_in; i++)
        if (io->in[i] && !is_const(io->in[i]))
            return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "%s is folded when its inputs are constants, but input %d ('%s') is computed by "
                                      "the graph; %s on graph tensors is not available yet%s", im->node->op_type, i, io->in[i]->name,
                                      im->node->op_type, ts_onnx_bind_hint(io->in[i]));
    return TS_OK;
}

/* An int64 list from a constant input (axes, shape, ...) into v[0..*n),
 * each value in [lo, hi]: outside it an error, or with `clamp` the nearest
 * end (Slice's starts and ends, which ONNX clamps anyway). */
ts_status ts_onnx_const_ints(importer *im, value *x, int64_t *v, int *n, const char *what, int64_t lo, int64_t hi, bool clamp) {
    ts_status st = ts_onnx_decoded(im, x);
    if (st) return st;
    if (!is_const(x) || x->c.shape.ndim > 1 || ts_shape_numel(&x->c.shape) > TS_MAX_DIMS)
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its %s ('%s') must be a constant list of at most %d values%s", what, x ? x->name : "?",
                                  TS_MAX_DIMS, ts_onnx_bind_hint(x));
    *n = (int)ts_shape_numel(&x->c.shape);
    for (int i = 0; i < *n; i++) {
        double d = x->c.v[i];
        bool ok = ts_onnx_int_value(d, lo, hi, &v[i]);
        if (!ok && clamp && !isnan(d)) {
            v[i] = d < 0 ? lo : hi;
            ok = true;
        }
        if (!ok)
            return ts_onnx_node_error(im, TS_ERR_FORMAT, "its %s ('%s') holds %g at %d; it takes integers from %lld to %lld", what, x->name,
                                      x->c.v[i], i, (long long)lo, (long long)hi);
    }
    return TS_OK;
}

/* The axes of Squeeze, Unsqueeze and the Reduce ops: the attribute 'axes'
 * before version `input_since` of the op (attr_versions refuses it from
 * then on), from then on the (constant) input `input`, refused before.
 * *n = -1 when absent. */
ts_status ts_onnx_axes_of(importer *im, node_io *io, int input, int input_since, int64_t *axes, int *n) {
    if (since(im, input_since)) {
        *n = -1;
        return io->n_in > input && io->in[input] ? ts_onnx_const_ints(im, io->in[input], axes, n, "axes", -TS_MAX_DIMS, TS_MAX_DIMS, false) : TS_OK;
    }
    if (io->n_in > input)
        return ts_onnx_node_error(im, TS_ERR_FORMAT, "%s takes its axes as the attribute 'axes' before opset %d, not as input %d", im->node->op_type,
                                  input_since, input);
    return ts_onnx_attr_int_list(im, "axes", -TS_MAX_DIMS, TS_MAX_DIMS, axes, TS_MAX_DIMS, n);
}

/* An f32 graph constant of `shape` holding v[0..numel). */
ts_tensor *ts_onnx_f32_constant(importer *im, const char *name, const ts_shape *shape, const float *v) {
    return ts_constant(im->g, name, &(ts_array){.dtype = TS_F32, .ndim = shape->ndim, .shape = {shape->d[0], shape->d[1], shape->d[2],
                       shape->d[3], shape->d[4], shape->d[5], shape->d[6], shape->d[7]}, .data = (void *)v});
}

/* An f32 scalar graph constant holding v, named `<scope>/<what>:<k>`. */
ts_tensor *ts_onnx_scalar_constant(importer *im, const char *what, float v) {
    char *name = ts_graph_op_output_name(im->g, what);
    ts_tensor *t = name ? ts_onnx_f32_constant(im, name, &(ts_shape){0}, &v) : NULL;
    ts_free(name);
    return t;
}

/* A one-element input read as a setting (Clip's bounds, Trilu's k): a
 * constant, or an initializer of one element (the dynamo exporter stores
 * its constants so), never a trained parameter. false where it is neither. */
bool ts_onnx_setting_scalar(importer *im, value *v, double *out, ts_status *st) {
    if (!v || v->t || v->seq || ts_shape_numel(&v->c.shape) != 1) return false;
    if (v->param && (*st = ts_onnx_decoded(im, v))) return false;
    *out = v->c.v[0];
    return true;
}

/* x in f32 (an i32 one through CastFloat), and the i32 result back from
 * such an f32 one (Trilu's of integers). */
ts_tensor *ts_onnx_as_dtype_of(importer *im, ts_tensor *y, const ts_tensor *like) {
    return y && like->dtype == TS_I32 ? ts_unary(im->g, "CastIndex", y, (float)INT32_MIN, 2147483520.0f) : y;
}

/* A graph constant `<scope>/<what>:<k>` of `shape` whose n values
 * fill(ctx, v) writes (the host copy charged while it lives). */
ts_tensor *ts_onnx_computed_constant(importer *im, const char *what, const ts_shape *shape, void (*fill)(const void *, float *),
                                   const void *ctx, ts_status *st) {
    int64_t n = ts_shape_numel(shape);
    uint64_t bytes = (uint64_t)(n ? n : 1) * 4;
    if ((*st = ts_const_charge(bytes))) {
        *st = ts_onnx_fold_result(im, *st);
        return NULL;
    }
    float *v = ts_malloc((size_t)bytes);
    char *name = v ? ts_graph_op_output_name(im->g, what) : NULL;
    if (name) fill(ctx, v);
    ts_tensor *t = name ? ts_onnx_f32_constant(im, name, shape, v) : NULL;
    ts_free(name);
    ts_free(v);
    ts_const_release(bytes);
    if (!t) *st = ts_graph_status(im->g) ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
    return t;
}

/* Optional input k as an f32 graph tensor, NULL where absent (or on an error, in *st). */
ts_tensor *ts_onnx_optional_f32(importer *im, node_io *io, int k, ts_status *st) {
    return io->n_in > k && io->in[k] ? as_f32(im, io->in[k], st) : NULL;
}

/* Whether the node names output k and a later node or the graph reads it. */
bool ts_onnx_output_wanted(const importer *im, const node_io *io, int k) {
    return io->n_out > k && im->node->output[k] && *im->node->output[k];
}

/* An INTS attribute of n values into v, def where absent. */
ts_status ts_onnx_attr_ints_n(importer *im, const char *name, int n, int64_t def, int64_t *v) {
    const int64_t *a;
    int64_t na;
    ts_onnx_attr_ints(im, name, &a, &na);
    if (a && na != n) return ts_onnx_node_error(im, TS_ERR_FORMAT, "attribute '%s' has %lld values where %d are needed", name, (long long)na, n);
    for (int i = 0; i < n; i++) v[i] = a ? a[i] : def;
    return TS_OK;
}

/* The graph's first error when a builder returned NULL, else TS_OK. */
ts_status ts_onnx_graph_status(ts_graph *g, const ts_tensor *t) {
    if (t) return TS_OK;
    ts_status st = ts_graph_status(g);
    return st ? st : ts_error(TS_ERR_INTERNAL, "a graph builder returned NULL");
}

/* A scalar f32 constant named after `what` in the current scope. */
ts_tensor *ts_onnx_scalar(ts_graph *g, const char *what, float v) {
    char *name = ts_graph_op_output_name(g, what);
    ts_tensor *t = name ? ts_constant(g, name, &(ts_array){.dtype = TS_F32, .ndim = 0, .data = &v}) : NULL;
    ts_free(name);
    return t;
}
