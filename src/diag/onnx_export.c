/* onnx_export.c -- a compiled model's graph as an ONNX file
 * (ts_model_save_graph, docs/onnx.md#the-graph-as-an-onnx-file): the
 * forward ops as the standard ops they are, then for a training model the
 * backward pass and the optimizer step from the walk the graph dump prints
 * (diag/backward_ops.h), every tensor under its own name. A backward op
 * with a standard form is written as that form; the rest, and the
 * optimizer's updates, are nodes of the domain `ai.tensorscope`. The
 * parameters, buffers, constants and optimizer state are initializers
 * holding their current values; the inputs are graph inputs at their
 * compiled shapes; the loss (or an inference model's outputs), the updated
 * parameters and the updated state are the outputs. Built with protobuf-c's
 * messages of src/import/proto/onnx.proto, written atomically. */
#include "diag/onnx_export.h"

#include "diag/backward_ops.h"
#include "graph/cnn_ops.h"
#include "graph/ops.h"
#include "core/atomic_file.h"
#include "onnx.pb-c.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef TensorscopeOnnx__NodeProto Node;
typedef TensorscopeOnnx__TensorProto Tensor;
typedef TensorscopeOnnx__ValueInfoProto Value;
typedef TensorscopeOnnx__AttributeProto Attr;

#define OX_DOMAIN "ai.tensorscope"
#define OX_OPSET 17 /* LayerNormalization's */
enum {
    ONNX_FLOAT = 1, ONNX_UINT8 = 2, ONNX_INT8 = 3, ONNX_UINT16 = 4, ONNX_INT16 = 5, ONNX_INT32 = 6, ONNX_INT64 = 7, ONNX_BOOL = 9,
    ONNX_FLOAT16 = 10, ONNX_UINT32 = 12, ONNX_UINT64 = 13, ONNX_BFLOAT16 = 16
};

/* A growing array of pointers. */
typedef struct ptrs {
    void **v;
    size_t n, cap;
} ptrs;

typedef struct ox {
    const ts_model_def *m;
    const ts_bwd_model *bm;
    const ts_prog *p;
    const ts_graph *g;
    ptrs nodes, inits, inputs, outputs, infos;
    ptrs own;        /* every allocation, freed at the end */
    bool failed;     /* out of memory */
    int *writers;    /* per entry: backward ops that add into it */
    ptrs *partials;  /* per entry with several writers: their contributions' names so far */
    bool *defined;   /* per entry: a node or an initializer gives it */
    const char *doc; /* the doc_string of the nodes made now: what they compute, and where it was built */
} ox;

/* ---- allocation, strings and the message arrays */

static void push(ox *x, ptrs *a, void *item) {
    if (x->failed || !item) return;
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        void **v = ts_realloc(a->v, cap * sizeof *v);
        if (!v) {
            x->failed = true;
            return;
        }
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = item;
}

static void *ox_new(ox *x, size_t bytes) {
    if (x->failed) return NULL;
    void *q = ts_calloc(1, bytes ? bytes : 1);
    if (!q) {
        x->failed = true;
        return NULL;
    }
    push(x, &x->own, q);
    if (x->failed) { /* not tracked: freed here */
        ts_free(q);
        return NULL;
    }
    return q;
}

static char *strf(ox *x, const char *fmt, ...) TS_PRINTF(2, 3);
static char *strf(ox *x, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n < 0 ? NULL : ox_new(x, (size_t)n + 1);
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* ---- nodes and attributes */

static Node *node(ox *x, const char *op, const char *domain, int n_in, const char *const *in, int n_out, const char *const *out) {
    for (int j = 0; j < n_in; j++)
        if (!in[j]) x->failed = true; /* a name not made: out of memory */
    for (int j = 0; j < n_out; j++)
        if (!out[j]) x->failed = true;
    if (x->failed) return NULL;
    Node *nd = ox_new(x, sizeof *nd);
    char **iv = ox_new(x, sizeof(char *) * (size_t)(n_in ? n_in : 1)), **ov = ox_new(x, sizeof(char *) * (size_t)n_out);
    if (!nd || !iv || !ov) return NULL;
    tensorscope_onnx__node_proto__init(nd);
    for (int j = 0; j < n_in; j++) iv[j] = (char *)in[j];
    for (int j = 0; j < n_out; j++) ov[j] = (char *)out[j];
    nd->n_input = (size_t)n_in, nd->input = iv;
    nd->n_output = (size_t)n_out, nd->output = ov;
    nd->op_type = (char *)op;
    nd->name = (char *)out[0]; /* each name is given once: its first output names the node */
    if (domain) nd->domain = (char *)domain;
    nd->doc_string = (char *)x->doc;
    push(x, &x->nodes, nd);
    return nd;
}

static Node *op1(ox *x, const char *op, const char *y, const char *a) { return node(x, op, NULL, 1, &a, 1, &y); }
static Node *op2(ox *x, const char *op, const char *y, const char *a, const char *b) {
    return node(x, op, NULL, 2, (const char *[]){a, b}, 1, &y);
}
static Node *op3(ox *x, const char *op, const char *y, const char *a, const char *b, const char *c) {
    return node(x, op, NULL, 3, (const char *[]){a, b, c}, 1, &y);
}

static Attr *attr(ox *x, Node *nd, const char *name, TensorscopeOnnx__AttributeProto__AttributeType type) {
    if (!nd) return NULL;
    Attr *a = ox_new(x, sizeof *a);
    Attr **v = ox_new(x, sizeof *v * (nd->n_attribute + 1));
    if (!a || !v) return NULL;
    tensorscope_onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = true, a->type = type;
    if (nd->n_attribute) memcpy(v, nd->attribute, sizeof *v * nd->n_attribute);
    v[nd->n_attribute++] = a;
    nd->attribute = v;
    return a;
}

static void attr_i(ox *x, Node *nd, const char *name, int64_t i) {
    Attr *a = attr(x, nd, name, TENSORSCOPE_ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (a) a->has_i = true, a->i = i;
}

static void attr_f(ox *x, Node *nd, const char *name, double f) {
    Attr *a = attr(x, nd, name, TENSORSCOPE_ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    if (a) a->has_f = true, a->f = (float)f;
}

static void attr_s(ox *x, Node *nd, const char *name, const char *s) {
    Attr *a = attr(x, nd, name, TENSORSCOPE_ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    if (a) a->has_s = true, a->s = (ProtobufCBinaryData){strlen(s), (uint8_t *)s};
}

static void attr_is(ox *x, Node *nd, const char *name, int n, const int64_t *v) {
    Attr *a = attr(x, nd, name, TENSORSCOPE_ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    int64_t *c = ox_new(x, sizeof *c * (size_t)(n ? n : 1));
    if (!a || !c) return;
    memcpy(c, v, sizeof *c * (size_t)n);
    a->n_ints = (size_t)n, a->ints = c;
}

static void attr_fs(ox *x, Node *nd, const char *name, int n, const float *v) {
    Attr *a = attr(x, nd, name, TENSORSCOPE_ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS);
    float *c = ox_new(x, sizeof *c * (size_t)(n ? n : 1));
    if (!a || !c) return;
    memcpy(c, v, sizeof *c * (size_t)n);
    a->n_floats = (size_t)n, a->floats = c;
}

/* ---- initializers and value infos */

/* The ONNX type of a tensor of dtype d (bool tensors are ONNX's bool, though
 * their cells hold 1.0 and 0.0), or of the integer types values are
 * declared of (ts_binary_typed, ts_cast) */
static int onnx_type(ts_dtype d) {
    switch (d) {
    case TS_I32: return ONNX_INT32;
    case TS_I64: return ONNX_INT64;
    case TS_BOOL: return ONNX_BOOL;
    case TS_I8: return ONNX_INT8;
    case TS_I16: return ONNX_INT16;
    case TS_U8: return ONNX_UINT8;
    case TS_U16: return ONNX_UINT16;
    case TS_U32: return ONNX_UINT32;
    case TS_U64: return ONNX_UINT64;
    default: return ONNX_FLOAT;
    }
}

/* An initializer over `bytes` (not copied: they outlive the packing). */
static Tensor *init(ox *x, const char *name, int type, const ts_shape *s, const void *bytes, size_t n) {
    Tensor *t = ox_new(x, sizeof *t);
    int64_t *dims = ox_new(x, sizeof *dims * (size_t)(s->ndim ? s->ndim : 1));
    if (!t || !dims) return NULL;
    tensorscope_onnx__tensor_proto__init(t);
    for (int i = 0; i < s->ndim; i++) dims[i] = s->d[i];
    t->n_dims = (size_t)s->ndim, t->dims = dims;
    t->has_data_type = true, t->data_type = type;
    t->name = (char *)name;
    t->has_raw_data = true, t->raw_data = (ProtobufCBinaryData){n, (uint8_t *)bytes}; /* little-endian, as ONNX's raw_data */
    push(x, &x->inits, t);
    return t;
}

/* A 1-D int64 constant (shapes, axes, slice bounds), named after its use. */
static const char *const_i64(ox *x, const char *name, int n, const int64_t *v) {
    int64_t *c = ox_new(x, sizeof *c * (size_t)(n ? n : 1));
    if (!c || !name) return name;
    memcpy(c, v, sizeof *c * (size_t)n);
    init(x, name, ONNX_INT64, &(ts_shape){.ndim = 1, .d = {n}}, c, sizeof *c * (size_t)n);
    return name;
}

/* A scalar f32 constant. */
static const char *const_f(ox *x, const char *name, double v) {
    float *c = ox_new(x, sizeof *c);
    if (!c || !name) return name;
    *c = (float)v;
    init(x, name, ONNX_FLOAT, &(ts_shape){0}, c, sizeof *c);
    return name;
}

static Value *value(ox *x, const char *name, int type, const ts_shape *s) {
    Value *v = ox_new(x, sizeof *v);
    TensorscopeOnnx__TypeProto *tp = ox_new(x, sizeof *tp);
    TensorscopeOnnx__TypeProto__Tensor *tt = ox_new(x, sizeof *tt);
    TensorscopeOnnx__TensorShapeProto *sp = ox_new(x, sizeof *sp);
    TensorscopeOnnx__TensorShapeProto__Dimension *d = ox_new(x, sizeof *d * (size_t)(s->ndim ? s->ndim : 1));
    TensorscopeOnnx__TensorShapeProto__Dimension **dv = ox_new(x, sizeof *dv * (size_t)(s->ndim ? s->ndim : 1));
    if (!v || !tp || !tt || !sp || !d || !dv) return NULL;
    tensorscope_onnx__value_info_proto__init(v);
    tensorscope_onnx__type_proto__init(tp);
    tensorscope_onnx__type_proto__tensor__init(tt);
    tensorscope_onnx__tensor_shape_proto__init(sp);
    for (int i = 0; i < s->ndim; i++) {
        tensorscope_onnx__tensor_shape_proto__dimension__init(&d[i]);
        d[i].has_dim_value = true, d[i].dim_value = s->d[i];
        dv[i] = &d[i];
    }
    sp->n_dim = (size_t)s->ndim, sp->dim = dv;
    tt->has_elem_type = true, tt->elem_type = type;
    tt->shape = sp;
    tp->tensor_type = tt;
    v->type = tp;
    v->name = (char *)name;
    return v;
}

/* ---- the forward ops */

static const ts_shape *shape_of(const ox *x, int node) { return &x->p->shape[node]; }
static const char *in_name(const ox *x, const ts_tensor *t, int j) { return x->g->t[t->in[j]]->name; }

/* A node of our own domain for an op ONNX has no standard op for: our
 * op's name, its inputs and output, its integer and float attributes. */
static Node *own_forward(ox *x, const ts_tensor *t) {
    const char *in[TS_MAX_INPUTS];
    for (int j = 0; j < t->n_in; j++) in[j] = in_name(x, t, j);
    Node *nd = node(x, ts_op_get(t->op)->name, OX_DOMAIN, t->n_in, in, 1, (const char *const *)&t->name);
    attr_is(x, nd, "attr", TS_MAX_ATTRS, t->attr);
    attr_fs(x, nd, "fattr", TS_MAX_ATTRS, t->fattr);
    attr_i(x, nd, "iparam", t->iparam);
    attr_f(x, nd, "fparam", (double)t->fparam);
    return nd;
}

/* y = op(inputs as bool) as f32 (CastInt's integers). */
static void as_float(ox *x, Node *nd, const char *y) {
    if (nd) attr_i(x, op1(x, "Cast", y, nd->output[0]), "to", ONNX_FLOAT);
}

/* Input j of `owner`, a, as ONNX's bool: a bool tensor as it is, an f32
 * one non-zero (And, Or, Xor, Not and Where read f32 so). */
static const char *to_bool(ox *x, const char *a, const char *owner, int j) {
    const ts_tensor *t = ts_graph_find(x->g, a);
    if (t && t->dtype == TS_BOOL) return a;
    const char *b = strf(x, "%s/bool%d", owner, j);
    attr_i(x, op1(x, "Cast", b, a), "to", ONNX_BOOL);
    return b;
}

/* Input j of `owner`, a, as ONNX's float where it is bool (ONNX's Less
 * and Greater take no bools; false is below true). */
static const char *bool_as_float(ox *x, const char *a, const char *owner, int j) {
    const ts_tensor *t = ts_graph_find(x->g, a);
    if (!t || t->dtype != TS_BOOL) return a;
    const char *f = strf(x, "%s/float%d", owner, j);
    attr_i(x, op1(x, "Cast", f, a), "to", ONNX_FLOAT);
    return f;
}

/* Cast a to `type` (an ONNX type) as `name`; a where it is that type */
static const char *cast_to(ox *x, const char *name, const char *a, int type) {
    attr_i(x, op1(x, "Cast", name, a), "to", type);
    return name;
}

/* An integer op (TS_OP_INT_ARITH) as ONNX's: computed in its declared
 * type (attr[1]: a uint64's bits as ONNX's uint64; a narrower type
 * wrapped by a Cast to it), the result in the tensor's dtype. FloorDiv
 * has no ONNX op: our own. */
static void int_arith(ox *x, const ts_tensor *t, const char *y, const char *a, const char *b) {
    static const char *const ops[TS_INT_COUNT] = {"Add", "Sub", "Mul", "Div", NULL, "Mod", "Mod", "Min", "Max", "Equal", "Less",
                                                  "LessOrEqual", "Greater", "GreaterOrEqual", "Neg", "Abs", "Pow"};
    int kind = (int)t->attr[0];
    ts_dtype type = (ts_dtype)t->attr[1], held = x->g->t[t->in[0]]->dtype;
    bool compare = kind >= TS_INT_EQUAL && kind <= TS_INT_GREATER_EQUAL, unary = kind == TS_INT_NEG || kind == TS_INT_ABS;
    if (kind < 0 || kind >= TS_INT_COUNT || !ops[kind]) {
        own_forward(x, t);
        return;
    }
    bool uns = type == TS_U64 && !unary && kind > TS_INT_MUL && kind != TS_INT_EQUAL; /* the others are the same bits */
    if (uns) a = cast_to(x, strf(x, "%s/a_u64", y), a, ONNX_UINT64), b = cast_to(x, strf(x, "%s/b_u64", y), b, ONNX_UINT64);
    bool wrap = !compare && type != held && (type == TS_I8 || type == TS_I16 || type == TS_I32 || type == TS_U8 || type == TS_U16 || type == TS_U32);
    const char *r = uns || wrap ? strf(x, "%s/%s", y, ops[kind]) : y;
    Node *nd = unary ? op1(x, ops[kind], r, a) : op2(x, ops[kind], r, a, b);
    if (kind == TS_INT_FMOD) attr_i(x, nd, "fmod", 1);
    if (wrap) r = cast_to(x, strf(x, "%s/wrapped", y), r, onnx_type(type));
    if (r != y) cast_to(x, y, r, compare ? ONNX_BOOL : onnx_type(t->dtype));
}

/* A Convert (TS_OP_CONVERT) as ONNX's Cast: to the declared type attr[0]
 * (wrapping), then to the dtype it is held in; from a uint64's bits
 * (attr[2]) through ONNX's uint64; indices (attr[1]) to int32. */
static void convert(ox *x, const ts_tensor *t, const char *y, const char *a) {
    ts_dtype to = (ts_dtype)t->attr[0], from = (ts_dtype)t->attr[2];
    if (t->attr[1]) { /* indices: toward zero in int32 */
        cast_to(x, y, a, ONNX_INT32);
        return;
    }
    if (from == TS_U64) a = cast_to(x, strf(x, "%s/u64", y), a, ONNX_UINT64);
    if (to != t->dtype && to != TS_F32 && to != TS_BOOL) a = cast_to(x, strf(x, "%s/%s", y, ts_dtype_name(to)), a, onnx_type(to));
    cast_to(x, y, a, onnx_type(t->dtype));
}

/* The permutation that moves the last two dims of a rank-n tensor. */
static void swap_last(int64_t *perm, int n) {
    for (int i = 0; i < n; i++) perm[i] = i;
    if (n >= 2) perm[n - 2] = n - 1, perm[n - 1] = n - 2;
}

static void forward(ox *x, const ts_tensor *t) {
    const char *y = t->name;
    const int i = t->id;
    const ts_shape *ys = shape_of(x, i);
    const char *a = t->n_in > 0 ? in_name(x, t, 0) : NULL, *b = t->n_in > 1 ? in_name(x, t, 1) : NULL;
    const ts_shape *as = t->n_in > 0 ? shape_of(x, t->in[0]) : NULL;
    int64_t v[2 * TS_MAX_DIMS];
    Node *nd;
    switch (t->op) {
    case TS_OP_MATMUL: op2(x, "MatMul", y, a, b); break;
    case TS_OP_MATMUL_T: {
        const char *bt = strf(x, "%s/b_T", y);
        attr_is(x, op1(x, "Transpose", bt, b), "perm", 2, (int64_t[]){1, 0});
        op2(x, "MatMul", y, a, bt);
        break;
    }
    case TS_OP_BATCH_MATMUL: {
        for (int j = 0; j < 2; j++)
            if (t->attr[j]) {
                const char *tr = strf(x, "%s/%c_T", y, j ? 'b' : 'a');
                int n = shape_of(x, t->in[j])->ndim;
                swap_last(v, n);
                attr_is(x, op1(x, "Transpose", tr, j ? b : a), "perm", n, v);
                if (j) b = tr;
                else a = tr;
            }
        op2(x, "MatMul", y, a, b);
        break;
    }
    case TS_OP_ADD: op2(x, "Add", y, a, b); break;
    case TS_OP_SUB: op2(x, "Sub", y, a, b); break;
    case TS_OP_MUL: op2(x, "Mul", y, a, b); break;
    case TS_OP_DIV: op2(x, "Div", y, a, b); break;
    case TS_OP_POWER: op2(x, "Pow", y, a, b); break;
    case TS_OP_MAX: op2(x, "Max", y, a, b); break;
    case TS_OP_MIN: op2(x, "Min", y, a, b); break;
    case TS_OP_FMOD: attr_i(x, op2(x, "Mod", y, a, b), "fmod", 1); break;
    case TS_OP_SCALE: op2(x, "Mul", y, a, const_f(x, strf(x, "%s/s", y), (double)t->fparam)); break;
    case TS_OP_POW: op2(x, "Pow", y, a, const_f(x, strf(x, "%s/exponent", y), (double)t->fattr[0])); break;
    case TS_OP_RELU: op1(x, "Relu", y, a); break;
    case TS_OP_LOG: op1(x, "Log", y, a); break;
    case TS_OP_EXP: op1(x, "Exp", y, a); break;
    case TS_OP_SQRT: op1(x, "Sqrt", y, a); break;
    case TS_OP_ERF: op1(x, "Erf", y, a); break;
    case TS_OP_TANH: op1(x, "Tanh", y, a); break;
    case TS_OP_SIGMOID: op1(x, "Sigmoid", y, a); break;
    case TS_OP_ABS: op1(x, "Abs", y, a); break;
    case TS_OP_SIN: op1(x, "Sin", y, a); break;
    case TS_OP_COS: op1(x, "Cos", y, a); break;
    case TS_OP_CEIL: op1(x, "Ceil", y, a); break;
    case TS_OP_FLOOR: op1(x, "Floor", y, a); break;
    case TS_OP_ROUND: op1(x, "Round", y, a); break;
    case TS_OP_SOFTPLUS: op1(x, "Softplus", y, a); break;
    case TS_OP_HARD_SWISH: op1(x, "HardSwish", y, a); break;
    case TS_OP_SILU: { /* x sigmoid(x) (opset 17 has no Swish) */
        const char *s = strf(x, "%s/sigmoid", y);
        op1(x, "Sigmoid", s, a);
        op2(x, "Mul", y, a, s);
        break;
    }
    case TS_OP_HARD_SIGMOID:
        nd = op1(x, "HardSigmoid", y, a);
        attr_f(x, nd, "alpha", (double)t->fattr[0]);
        attr_f(x, nd, "beta", (double)t->fattr[1]);
        break;
    case TS_OP_LEAKY_RELU: attr_f(x, op1(x, "LeakyRelu", y, a), "alpha", (double)t->fattr[0]); break;
    case TS_OP_ELU: attr_f(x, op1(x, "Elu", y, a), "alpha", (double)t->fattr[0]); break;
    case TS_OP_SELU:
        nd = op1(x, "Selu", y, a);
        attr_f(x, nd, "alpha", (double)t->fattr[0]);
        attr_f(x, nd, "gamma", (double)t->fattr[1]);
        break;
    case TS_OP_GELU: { /* opset 17 has no Gelu: 0.5 x (1 + erf(x / sqrt 2)), or its tanh form */
        const char *u = strf(x, "%s/u", y), *e = strf(x, "%s/e", y), *one = strf(x, "%s/1+e", y), *h = strf(x, "%s/x/2", y);
        if (t->attr[0]) { /* tanh(sqrt(2/pi) (x + 0.044715 x^3)) */
            const char *c = strf(x, "%s/x^3", y), *s = strf(x, "%s/x+cx^3", y);
            op2(x, "Pow", c, a, const_f(x, strf(x, "%s/3", y), 3.0));
            op2(x, "Mul", strf(x, "%s/cx^3", y), c, const_f(x, strf(x, "%s/c", y), 0.044715));
            op2(x, "Add", s, a, strf(x, "%s/cx^3", y));
            op2(x, "Mul", u, s, const_f(x, strf(x, "%s/sqrt(2/pi)", y), 0.7978845608028654));
            op1(x, "Tanh", e, u);
        } else {
            op2(x, "Mul", u, a, const_f(x, strf(x, "%s/1/sqrt2", y), 0.7071067811865476));
            op1(x, "Erf", e, u);
        }
        op2(x, "Add", one, e, const_f(x, strf(x, "%s/1", y), 1.0));
        op2(x, "Mul", h, a, const_f(x, strf(x, "%s/half", y), 0.5));
        op2(x, "Mul", y, h, one);
        break;
    }
    /* the comparisons, logical ops and predicates give ONNX's bool, as their tensors are bool */
    case TS_OP_EQUAL: op2(x, "Equal", y, a, b); break;
    case TS_OP_GREATER: op2(x, "Greater", y, bool_as_float(x, a, y, 0), bool_as_float(x, b, y, 1)); break;
    case TS_OP_GREATER_EQUAL: op2(x, "GreaterOrEqual", y, bool_as_float(x, a, y, 0), bool_as_float(x, b, y, 1)); break;
    case TS_OP_LESS: op2(x, "Less", y, bool_as_float(x, a, y, 0), bool_as_float(x, b, y, 1)); break;
    case TS_OP_LESS_EQUAL: op2(x, "LessOrEqual", y, bool_as_float(x, a, y, 0), bool_as_float(x, b, y, 1)); break;
    case TS_OP_AND: op2(x, "And", y, to_bool(x, a, y, 0), to_bool(x, b, y, 1)); break;
    case TS_OP_OR: op2(x, "Or", y, to_bool(x, a, y, 0), to_bool(x, b, y, 1)); break;
    case TS_OP_XOR: op2(x, "Xor", y, to_bool(x, a, y, 0), to_bool(x, b, y, 1)); break;
    case TS_OP_NOT: op1(x, "Not", y, to_bool(x, a, y, 0)); break;
    case TS_OP_CAST_BOOL: cast_to(x, y, a, ONNX_BOOL); break;
    case TS_OP_ISNAN: op1(x, "IsNaN", y, a); break;
    case TS_OP_ISINF:
        nd = op1(x, "IsInf", y, a);
        attr_i(x, nd, "detect_positive", t->fattr[0] != 0.0f);
        attr_i(x, nd, "detect_negative", t->fattr[1] != 0.0f);
        break;
    case TS_OP_INT_ARITH: int_arith(x, t, y, a, b); break;
    case TS_OP_CONVERT: convert(x, t, y, a); break;
    case TS_OP_CAST_INT: /* toward zero */
        attr_i(x, nd = op1(x, "Cast", strf(x, "%s/int", y), a), "to", ONNX_INT32);
        as_float(x, nd, y);
        break;
    case TS_OP_CAST_FLOAT: attr_i(x, op1(x, "Cast", y, a), "to", ONNX_FLOAT); break;
    case TS_OP_CAST:
        if (ts_dtype_is_half((ts_dtype)t->attr[0])) { /* onto the 16-bit grid and back: the values it holds */
            const char *h = strf(x, "%s/16bit", y);
            attr_i(x, op1(x, "Cast", h, a), "to", t->attr[0] == TS_BF16 ? ONNX_BFLOAT16 : ONNX_FLOAT16);
            attr_i(x, op1(x, "Cast", y, h), "to", ONNX_FLOAT);
        } else op1(x, "Identity", y, a);
        break;
    case TS_OP_PRINT:
    case TS_OP_STOP_GRADIENT: op1(x, "Identity", y, a); break;
    case TS_OP_ATTENTION: /* its unfused twin (the graph's ops, exported too) holds the same values */
        if (t->n_in == 5) op1(x, "Identity", y, in_name(x, t, 4));
        else own_forward(x, t);
        break;
    case TS_OP_RESHAPE:
    case TS_OP_FLATTEN:
        for (int d = 0; d < ys->ndim; d++) v[d] = ys->d[d];
        op2(x, "Reshape", y, a, const_i64(x, strf(x, "%s/shape", y), ys->ndim, v));
        break;
    case TS_OP_LOG_SOFTMAX: attr_i(x, op1(x, "LogSoftmax", y, a), "axis", t->iparam); break;
    case TS_OP_SOFTMAX: attr_i(x, op1(x, "Softmax", y, a), "axis", t->iparam); break;
    case TS_OP_NLL_LOSS: attr_s(x, op2(x, "NegativeLogLikelihoodLoss", y, a, b), "reduction", "mean"); break;
    case TS_OP_CROSS_ENTROPY:
        if (as->ndim > 2) { /* ONNX's classes are dim 1, ours the last */
            const char *tr = strf(x, "%s/classes_at_1", y);
            v[0] = 0, v[1] = as->ndim - 1;
            for (int d = 2; d < as->ndim; d++) v[d] = d - 1;
            attr_is(x, op1(x, "Transpose", tr, a), "perm", as->ndim, v);
            a = tr;
        }
        attr_s(x, nd = op2(x, "SoftmaxCrossEntropyLoss", y, a, b), "reduction", "mean");
        if (t->attr[0]) attr_i(x, nd, "ignore_index", t->attr[1]);
        break;
    case TS_OP_SUM: attr_i(x, op1(x, "ReduceSum", y, a), "keepdims", 0); break;
    case TS_OP_MEAN: attr_i(x, op1(x, "ReduceMean", y, a), "keepdims", 0); break;
    case TS_OP_REDUCE_SUM_AXES:
    case TS_OP_REDUCE_MEAN_AXES:
    case TS_OP_REDUCE_MAX_AXES: {
        int n = 0;
        for (int d = 0; d < as->ndim; d++)
            if ((t->attr[0] >> d) & 1) v[n++] = d;
        if (t->op == TS_OP_REDUCE_SUM_AXES) nd = op2(x, "ReduceSum", y, a, const_i64(x, strf(x, "%s/axes", y), n, v));
        else attr_is(x, nd = op1(x, t->op == TS_OP_REDUCE_MAX_AXES ? "ReduceMax" : "ReduceMean", y, a), "axes", n, v);
        attr_i(x, nd, "keepdims", t->attr[1] != 0);
        break;
    }
    case TS_OP_EMBEDDING: attr_i(x, op2(x, "Gather", y, a, b), "axis", 0); break;
    case TS_OP_GATHER: attr_i(x, op2(x, "Gather", y, a, b), "axis", t->attr[0]); break;
    case TS_OP_GATHER_ELEMENTS: attr_i(x, op2(x, "GatherElements", y, a, b), "axis", t->attr[0]); break;
    case TS_OP_LAYER_NORM:
        nd = node(x, "LayerNormalization", NULL, 3, (const char *[]){a, b, in_name(x, t, 2)}, 3,
                  (const char *[]){y, strf(x, "%s/mean", y), strf(x, "%s/inv_std", y)}); /* the statistics its backward reads */
        attr_i(x, nd, "axis", -t->attr[0]);
        attr_f(x, nd, "epsilon", (double)t->fattr[0]);
        break;
    case TS_OP_RMS_NORM: { /* x_hat = x / sqrt(mean(x^2) + eps), then * w */
        const char *sq = strf(x, "%s/x^2", y), *ms = strf(x, "%s/mean_x^2", y), *ve = strf(x, "%s/+eps", y), *rms = strf(x, "%s/rms", y);
        op2(x, "Mul", sq, a, a);
        attr_is(x, nd = op1(x, "ReduceMean", ms, sq), "axes", 1, (int64_t[]){as->ndim - 1});
        attr_i(x, nd, "keepdims", 1);
        op2(x, "Add", ve, ms, const_f(x, strf(x, "%s/eps", y), (double)t->fattr[0]));
        op1(x, "Sqrt", rms, ve);
        op1(x, "Reciprocal", strf(x, "%s/inv_rms", y), rms); /* beside x_hat: what the backward reads */
        op2(x, "Mul", b ? strf(x, "%s/x_hat", y) : y, a, strf(x, "%s/inv_rms", y));
        if (b) op2(x, "Mul", y, strf(x, "%s/x_hat", y), b);
        break;
    }
    case TS_OP_PERMUTE: attr_is(x, op1(x, "Transpose", y, a), "perm", as->ndim, t->attr); break;
    case TS_OP_SLICE: {
        const char *s = const_i64(x, strf(x, "%s/starts", y), 1, &t->attr[1]);
        int64_t end = t->attr[1] + t->attr[2];
        const char *e = const_i64(x, strf(x, "%s/ends", y), 1, &end), *ax = const_i64(x, strf(x, "%s/axes", y), 1, &t->attr[0]);
        node(x, "Slice", NULL, 4, (const char *[]){a, s, e, ax}, 1, &y);
        break;
    }
    case TS_OP_CONCAT: {
        const char *in[TS_MAX_INPUTS];
        for (int j = 0; j < t->n_in; j++) in[j] = in_name(x, t, j);
        attr_i(x, node(x, "Concat", NULL, t->n_in, in, 1, &y), "axis", t->attr[0]);
        break;
    }
    case TS_OP_WHERE:
    case TS_OP_SELECT: op3(x, "Where", y, to_bool(x, a, y, 0), b, in_name(x, t, 2)); break;
    case TS_OP_MASKED_FILL: op3(x, "Where", y, to_bool(x, b, y, 1), const_f(x, strf(x, "%s/fill", y), (double)t->fattr[0]), a); break;
    case TS_OP_CONV2D: {
        const char *in[3] = {a, b, t->n_in > 2 ? in_name(x, t, 2) : NULL};
        nd = node(x, "Conv", NULL, t->n_in, in, 1, &y);
        attr_is(x, nd, "strides", 2, (int64_t[]){t->attr[CA_SH], t->attr[CA_SW]});
        attr_is(x, nd, "pads", 4, (int64_t[]){t->attr[CA_PT], t->attr[CA_PL], t->attr[CA_PB], t->attr[CA_PR]});
        attr_is(x, nd, "dilations", 2, (int64_t[]){t->attr[CA_DH], t->attr[CA_DW]});
        attr_i(x, nd, "group", t->attr[CA_GROUPS]);
        break;
    }
    case TS_OP_MAX_POOL2D:
    case TS_OP_AVG_POOL2D:
        if (t->op == TS_OP_MAX_POOL2D && x->m->training) /* the winners' flat indices, for its backward */
            nd = node(x, "MaxPool", NULL, 1, &a, 2, (const char *[]){y, strf(x, "%s/indices", y)});
        else nd = op1(x, t->op == TS_OP_MAX_POOL2D ? "MaxPool" : "AveragePool", y, a);
        attr_is(x, nd, "kernel_shape", 2, (int64_t[]){t->attr[PA_KH], t->attr[PA_KW]});
        attr_is(x, nd, "strides", 2, (int64_t[]){t->attr[CA_SH], t->attr[CA_SW]});
        attr_is(x, nd, "pads", 4, (int64_t[]){t->attr[CA_PT], t->attr[CA_PL], t->attr[CA_PB], t->attr[CA_PR]});
        attr_i(x, nd, "ceil_mode", t->attr[PA_CEIL] != 0);
        if (t->op == TS_OP_MAX_POOL2D) attr_is(x, nd, "dilations", 2, (int64_t[]){t->attr[PA_DH] ? t->attr[PA_DH] : 1, t->attr[PA_DW] ? t->attr[PA_DW] : 1});
        else attr_i(x, nd, "count_include_pad", !t->attr[PA_EXCLUDE_PAD]);
        break;
    case TS_OP_GLOBAL_AVG_POOL: op1(x, "GlobalAveragePool", y, a); break;
    case TS_OP_BATCH_NORM: {
        if (x->m->training && !t->attr[0]) { /* the batch's statistics, in standard ops (the running ones' update is not written) */
            int n = 0;
            for (int d = 0; d < as->ndim; d++)
                if (d != 1) v[n++] = d;
            const char *mean = strf(x, "%s/mean", y), *dev = strf(x, "%s/x-mean", y), *sq = strf(x, "%s/(x-mean)^2", y),
                       *var = strf(x, "%s/var", y), *ve = strf(x, "%s/var+eps", y), *sd = strf(x, "%s/std", y),
                       *xn = strf(x, "%s/normalised", y), *w = strf(x, "%s/weight", y), *bb = strf(x, "%s/bias", y), *sc = strf(x, "%s/scaled", y);
            attr_i(x, nd = op1(x, "ReduceMean", mean, a), "keepdims", 1);
            attr_is(x, nd, "axes", n, v);
            op2(x, "Sub", dev, a, mean);
            op2(x, "Mul", sq, dev, dev);
            attr_i(x, nd = op1(x, "ReduceMean", var, sq), "keepdims", 1);
            attr_is(x, nd, "axes", n, v);
            op2(x, "Add", ve, var, const_f(x, strf(x, "%s/eps", y), (double)t->fattr[0]));
            op1(x, "Sqrt", sd, ve);
            op2(x, "Div", xn, dev, sd);
            for (int d = 0; d < as->ndim; d++) v[d] = d == 1 ? as->d[1] : 1;
            const char *cs = const_i64(x, strf(x, "%s/channel_shape", y), as->ndim, v);
            op2(x, "Reshape", w, b, cs);
            op2(x, "Reshape", bb, in_name(x, t, 2), cs);
            op2(x, "Mul", sc, xn, w);
            op2(x, "Add", y, sc, bb);
            break;
        }
        const char *in[5];
        for (int j = 0; j < 5; j++) in[j] = in_name(x, t, j);
        nd = node(x, "BatchNormalization", NULL, 5, in, 1, &y);
        attr_f(x, nd, "epsilon", (double)t->fattr[0]);
        attr_f(x, nd, "momentum", 1.0 - (double)t->fattr[1]); /* ONNX keeps this much of the running value */
        break;
    }
    case TS_OP_PAD:
        if (t->iparam == TS_PAD_WRAP) { /* opset 19 */
            own_forward(x, t);
            break;
        }
        for (int d = 0; d < as->ndim; d++) v[d] = t->attr[d], v[as->ndim + d] = t->attr[TS_MAX_DIMS + d];
        nd = node(x, "Pad", NULL, 3,
                  (const char *[]){a, const_i64(x, strf(x, "%s/pads", y), 2 * as->ndim, v), const_f(x, strf(x, "%s/value", y), (double)t->fparam)}, 1,
                  &y);
        attr_s(x, nd, "mode", t->iparam == TS_PAD_REFLECT ? "reflect" : t->iparam == TS_PAD_EDGE ? "edge" : "constant");
        break;
    default: own_forward(x, t); break; /* Mod with Python's sign, DropoutMask, CastLowbits, CastIndex, MaxPool2dIndices */
    }
}

/* ---- the backward pass
 *
 * Each gradient is given once: an op's contribution is the gradient itself
 * where it is the only one, else `<gradient>/from/<op's output>`, and the
 * last contribution is followed by their Sum. */

static const char *entry_name(const ox *x, int e) { return x->p->entries[e].name; }

static ts_status count_writers(ox *x, const ts_bwd_op *ops, int n) {
    int ne = x->p->n_entries;
    x->writers = ts_calloc((size_t)ne + 1, sizeof *x->writers);
    x->partials = ts_calloc((size_t)ne + 1, sizeof *x->partials);
    x->defined = ts_calloc((size_t)ne + 1, sizeof *x->defined);
    if (!x->writers || !x->partials || !x->defined) return TS_ERR_OUT_OF_MEMORY;
    for (int k = 0; k < n; k++)
        if (!ops[k].optimizer && ops[k].accumulates)
            for (int j = 0; j < ops[k].n_out; j++) x->writers[ops[k].out[j]]++;
    return TS_OK;
}

/* The name op `t`'s backward gives its contribution to entry e under. */
static const char *contribution(ox *x, int e, const ts_tensor *t) {
    if (x->writers[e] <= 1) return entry_name(x, e);
    const char *c = strf(x, "%s/from/%s", entry_name(x, e), t->name);
    push(x, &x->partials[e], (void *)c);
    return c;
}

/* After an op's backward: each gradient whose contributions are all in. */
static void finish(ox *x, const ts_bwd_op *o) {
    for (int j = 0; j < o->n_out; j++) {
        int e = o->out[j];
        x->defined[e] = true;
        if (x->writers[e] > 1 && x->partials[e].n != (size_t)x->writers[e]) continue;
        if (x->writers[e] > 1)
            node(x, "Sum", NULL, x->writers[e], (const char *const *)x->partials[e].v, 1, (const char *const *)&x->p->entries[e].name);
        push(x, &x->infos, value(x, entry_name(x, e), ONNX_FLOAT, &x->p->entries[e].shape));
    }
}

/* A gradient read before anything wrote it (nothing downstream gave one) is 0. */
static const char *grad_read(ox *x, int e) {
    if (!x->defined[e]) {
        const ts_shape *s = &x->p->entries[e].shape;
        int64_t v[TS_MAX_DIMS];
        for (int d = 0; d < s->ndim; d++) v[d] = s->d[d];
        op1(x, "ConstantOfShape", entry_name(x, e), const_i64(x, strf(x, "%s/shape", entry_name(x, e)), s->ndim, v));
        x->defined[e] = true; /* ConstantOfShape's default value is a float 0 */
    }
    return entry_name(x, e);
}

/* The gradient of input j of t, reduced over the dims the forward
 * broadcast it along (numpy's rules), into `out`. */
static void unbroadcast(ox *x, const char *dy, const ts_shape *ys, const ts_shape *s, const char *out) {
    int64_t axes[TS_MAX_DIMS], v[TS_MAX_DIMS];
    int n = 0, lead = ys->ndim - s->ndim;
    for (int d = 0; d < ys->ndim; d++)
        if (d < lead || (s->d[d - lead] == 1 && ys->d[d] != 1)) axes[n++] = d;
    if (!n) {
        op1(x, "Identity", out, dy);
        return;
    }
    const char *r = strf(x, "%s/summed", out);
    attr_i(x, op2(x, "ReduceSum", r, dy, const_i64(x, strf(x, "%s/axes", out), n, axes)), "keepdims", 1);
    for (int d = 0; d < s->ndim; d++) v[d] = s->d[d];
    op2(x, "Reshape", out, r, const_i64(x, strf(x, "%s/shape", out), s->ndim, v));
}

/* `<owner>/<what>` compared with a number c: a bool. */
static const char *cmp(ox *x, const char *op, const char *a, double c, const char *owner, const char *what) {
    const char *r = strf(x, "%s/%s", owner, what);
    op2(x, op, r, a, const_f(x, strf(x, "%s/%s_c", owner, what), c));
    return r;
}

/* d = f'(x) of an elementwise activation, as backend/ew_math.h's
 * ts_ewu_derivative gives it (its conventions at the kinks). */
static void elementwise_derivative(ox *x, const ts_tensor *t, const char *g, const char *d) {
    const char *a = in_name(x, t, 0);
    double alpha = (double)t->fattr[0], beta = (double)t->fattr[1];
    const char *e = strf(x, "%s/exp", g), *k = strf(x, "%s/k", g);
    switch (t->op) {
    case TS_OP_SIN: op1(x, "Cos", d, a); break;
    case TS_OP_COS:
        op1(x, "Sin", e, a); /* -sin x */
        op1(x, "Neg", d, e);
        break;
    case TS_OP_SOFTPLUS: op1(x, "Sigmoid", d, a); break;
    case TS_OP_LEAKY_RELU: op3(x, "Where", d, cmp(x, "Less", a, 0.0, g, "x<0"), const_f(x, strf(x, "%s/alpha", g), alpha), const_f(x, strf(x, "%s/1", g), 1.0)); break;
    case TS_OP_ELU:
    case TS_OP_SELU: /* x < 0 (ELU) or not x > 0 (SELU): alpha e^x, else 1; SELU's times its scale beta */
        op1(x, "Exp", e, a);
        op2(x, "Mul", k, e, const_f(x, strf(x, "%s/alpha", g), t->op == TS_OP_ELU ? alpha : alpha * beta));
        if (t->op == TS_OP_ELU) op3(x, "Where", d, cmp(x, "Less", a, 0.0, g, "x<0"), k, const_f(x, strf(x, "%s/1", g), 1.0));
        else op3(x, "Where", d, cmp(x, "Greater", a, 0.0, g, "x>0"), const_f(x, strf(x, "%s/beta", g), beta), k);
        break;
    case TS_OP_HARD_SIGMOID: { /* alpha where 0 < alpha x + beta < 1 */
        const char *z = strf(x, "%s/z", g), *ax = strf(x, "%s/alpha_x", g), *in = strf(x, "%s/inside", g);
        op2(x, "Mul", ax, a, const_f(x, strf(x, "%s/alpha", g), alpha));
        op2(x, "Add", z, ax, const_f(x, strf(x, "%s/beta", g), beta));
        op2(x, "And", in, cmp(x, "Greater", z, 0.0, g, "z>0"), cmp(x, "Less", z, 1.0, g, "z<1"));
        op3(x, "Where", d, in, const_f(x, strf(x, "%s/slope", g), alpha), const_f(x, strf(x, "%s/0", g), 0.0));
        break;
    }
    case TS_OP_HARD_SWISH: { /* 0 below -3, 1 above 3, x/3 + 1/2 between */
        const char *mid = strf(x, "%s/x/3+1/2", g), *x3 = strf(x, "%s/x/3", g), *hi = strf(x, "%s/upper", g);
        op2(x, "Mul", x3, a, const_f(x, strf(x, "%s/1/3", g), 1.0 / 3.0));
        op2(x, "Add", mid, x3, const_f(x, strf(x, "%s/1/2", g), 0.5));
        op3(x, "Where", hi, cmp(x, "Greater", a, 3.0, g, "x>3"), const_f(x, strf(x, "%s/1", g), 1.0), mid);
        op3(x, "Where", d, cmp(x, "Less", a, -3.0, g, "x<-3"), const_f(x, strf(x, "%s/0", g), 0.0), hi);
        break;
    }
    case TS_OP_SILU: { /* s (1 + x (1 - s)), s = sigmoid(x) */
        const char *s = strf(x, "%s/sigmoid", g), *r = strf(x, "%s/1-s", g), *xr = strf(x, "%s/x(1-s)", g), *p1 = strf(x, "%s/1+x(1-s)", g);
        op1(x, "Sigmoid", s, a);
        op2(x, "Sub", r, const_f(x, strf(x, "%s/1", g), 1.0), s);
        op2(x, "Mul", xr, a, r);
        op2(x, "Add", p1, xr, const_f(x, strf(x, "%s/one", g), 1.0));
        op2(x, "Mul", d, s, p1);
        break;
    }
    default: break;
    }
}

/* keepdims=1 on a reduction node; the node. */
static Node *nd_keep(ox *x, Node *nd) {
    attr_i(x, nd, "keepdims", 1);
    return nd;
}

/* Input j's contribution name, or NULL when its gradient is not asked. */
static const char *din(ox *x, const ts_bwd_op *o, const ts_tensor *t, int j) {
    for (int q = 0; q < o->n_out; q++)
        if (x->p->entries[o->out[q]].node == t->in[j]) return contribution(x, o->out[q], t);
    return NULL;
}

/* Whether op t's backward is written as standard ops (then written). */
/* A normalisation's backward (layer norm, batch norm with the batch's
 * statistics, RMS norm), xh the normalised input, w the weight (NULL:
 * none): dx = (g - mean(g) - xh mean(g xh)) `scale_op` scale, g = dY w,
 * the means over `axes` (not centred, RMS norm's: without mean(g)); dw =
 * sum dY xh and db = sum dY over `sum_axes`. */
static void norm_backward(ox *x, const ts_bwd_op *o, const ts_tensor *t, bool centred, const char *dy, const char *w, const char *xh, int n_axes,
                          const int64_t *axes, const char *scale_op, const char *scale, int n_sum, const int64_t *sum_axes) {
    const char *ga, *gb;
    if ((ga = din(x, o, t, 0))) {
        const char *g = w ? strf(x, "%s/dY_w", ga) : dy, *mg = strf(x, "%s/mean_g", ga), *gx = strf(x, "%s/g_xh", ga),
                   *mgx = strf(x, "%s/mean_g_xh", ga), *t1 = centred ? strf(x, "%s/g-mean_g", ga) : g, *t2 = strf(x, "%s/xh_mean_g_xh", ga),
                   *t3 = strf(x, "%s/inner", ga);
        if (w) op2(x, "Mul", g, dy, w);
        if (centred) attr_is(x, nd_keep(x, op1(x, "ReduceMean", mg, g)), "axes", n_axes, axes);
        op2(x, "Mul", gx, g, xh);
        attr_is(x, nd_keep(x, op1(x, "ReduceMean", mgx, gx)), "axes", n_axes, axes);
        if (centred) op2(x, "Sub", t1, g, mg);
        op2(x, "Mul", t2, xh, mgx);
        op2(x, "Sub", t3, t1, t2);
        op2(x, scale_op, ga, t3, scale);
    }
    if (t->n_in > 1 && (gb = din(x, o, t, 1))) {
        const char *p2 = strf(x, "%s/dY_xh", gb);
        op2(x, "Mul", p2, dy, xh);
        attr_i(x, op2(x, "ReduceSum", gb, p2, const_i64(x, strf(x, "%s/axes", gb), n_sum, sum_axes)), "keepdims", 0);
    }
    if (t->n_in > 2 && (gb = din(x, o, t, 2))) attr_i(x, op2(x, "ReduceSum", gb, dy, const_i64(x, strf(x, "%s/axes", gb), n_sum, sum_axes)), "keepdims", 0);
}

static bool standard_backward(ox *x, const ts_bwd_op *o, const ts_tensor *t) {
    for (int j = 0; j < t->n_in; j++)
        for (int q = 0; q < j; q++)
            if (t->in[j] == t->in[q]) return false; /* x op x: one gradient from two roles */
    const ts_prog *p = x->p;
    if (p->grad_entry[t->id] < 0) return false;
    const char *dy = grad_read(x, p->grad_entry[t->id]), *y = t->name;
    const ts_shape *ys = shape_of(x, t->id);
    const char *a = t->n_in > 0 ? in_name(x, t, 0) : NULL, *b = t->n_in > 1 ? in_name(x, t, 1) : NULL;
    const char *ga, *gb;
    int64_t v[TS_MAX_DIMS];
    switch (t->op) {
    case TS_OP_MATMUL: /* dA = dY B^T, dB = A^T dY */
    case TS_OP_MATMUL_T: /* y = A B^T: dA = dY B, dB = dY^T A */
        if ((ga = din(x, o, t, 0))) {
            if (t->op == TS_OP_MATMUL) {
                const char *bt = strf(x, "%s/B_T", ga);
                attr_is(x, op1(x, "Transpose", bt, b), "perm", 2, (int64_t[]){1, 0});
                op2(x, "MatMul", ga, dy, bt);
            } else op2(x, "MatMul", ga, dy, b);
        }
        if ((gb = din(x, o, t, 1))) {
            const char *l = strf(x, "%s/%s_T", gb, t->op == TS_OP_MATMUL ? "A" : "dY");
            attr_is(x, op1(x, "Transpose", l, t->op == TS_OP_MATMUL ? a : dy), "perm", 2, (int64_t[]){1, 0});
            op2(x, "MatMul", gb, l, t->op == TS_OP_MATMUL ? dy : a);
        }
        return true;
    case TS_OP_ADD:
    case TS_OP_SUB:
        if ((ga = din(x, o, t, 0))) unbroadcast(x, dy, ys, shape_of(x, t->in[0]), ga);
        if ((gb = din(x, o, t, 1))) {
            if (t->op == TS_OP_ADD) unbroadcast(x, dy, ys, shape_of(x, t->in[1]), gb);
            else {
                const char *neg = strf(x, "%s/neg", gb);
                op1(x, "Neg", neg, dy);
                unbroadcast(x, neg, ys, shape_of(x, t->in[1]), gb);
            }
        }
        return true;
    case TS_OP_RELU: /* where(y > 0, dY, 0) */
        if ((ga = din(x, o, t, 0))) {
            const char *pos = strf(x, "%s/y>0", ga);
            op2(x, "Greater", pos, y, const_f(x, strf(x, "%s/0", ga), 0.0));
            op3(x, "Where", ga, pos, dy, strf(x, "%s/0", ga));
        }
        return true;
    case TS_OP_SCALE:
        if ((ga = din(x, o, t, 0))) op2(x, "Mul", ga, dy, const_f(x, strf(x, "%s/s", ga), (double)t->fparam));
        return true;
    case TS_OP_RESHAPE:
    case TS_OP_FLATTEN:
    case TS_OP_PRINT:
    case TS_OP_CAST:
    case TS_OP_CAST_LOWBITS: /* the gradient as it is (straight through), at the input's shape */
        if ((ga = din(x, o, t, 0))) {
            const ts_shape *s = shape_of(x, t->in[0]);
            for (int d = 0; d < s->ndim; d++) v[d] = s->d[d];
            op2(x, "Reshape", ga, dy, const_i64(x, strf(x, "%s/shape", ga), s->ndim, v));
        }
        return true;
    case TS_OP_ATTENTION: /* with its twin: the gradient to the twin, which carries it to q, k, v; to them directly 0 */
        if (t->n_in != 5) return false;
        for (int j = 0; j < 3; j++)
            if ((ga = din(x, o, t, j))) op2(x, "Mul", ga, in_name(x, t, j), const_f(x, strf(x, "%s/0", ga), 0.0));
        if ((ga = din(x, o, t, 4))) op1(x, "Identity", ga, dy);
        return true;
    case TS_OP_PERMUTE: /* the inverse permutation */
        if ((ga = din(x, o, t, 0))) {
            int n = ys->ndim;
            for (int d = 0; d < n; d++) v[t->attr[d]] = d;
            attr_is(x, op1(x, "Transpose", ga, dy), "perm", n, v);
        }
        return true;
    case TS_OP_LOG_SOFTMAX: /* dY - exp(y) sum(dY) */
    case TS_OP_SOFTMAX:     /* y (dY - sum(dY y)) */
        if ((ga = din(x, o, t, 0))) {
            const char *s = strf(x, "%s/sum", ga), *ax = const_i64(x, strf(x, "%s/axis", ga), 1, (int64_t[]){t->iparam});
            if (t->op == TS_OP_LOG_SOFTMAX) {
                const char *e = strf(x, "%s/exp_y", ga), *es = strf(x, "%s/exp_y_sum", ga);
                attr_i(x, op2(x, "ReduceSum", s, dy, ax), "keepdims", 1);
                op1(x, "Exp", e, y);
                op2(x, "Mul", es, e, s);
                op2(x, "Sub", ga, dy, es);
            } else {
                const char *dyy = strf(x, "%s/dY_y", ga), *d = strf(x, "%s/dY-sum", ga);
                op2(x, "Mul", dyy, dy, y);
                attr_i(x, op2(x, "ReduceSum", s, dyy, ax), "keepdims", 1);
                op2(x, "Sub", d, dy, s);
                op2(x, "Mul", ga, y, d);
            }
        }
        return true;
    case TS_OP_SUM:
    case TS_OP_MEAN: /* dY spread over x (/ its size) */
        if ((ga = din(x, o, t, 0))) {
            const ts_shape *s = shape_of(x, t->in[0]);
            for (int d = 0; d < s->ndim; d++) v[d] = s->d[d];
            const char *g = dy;
            if (t->op == TS_OP_MEAN) {
                g = strf(x, "%s/dY/n", ga);
                op2(x, "Mul", g, dy, const_f(x, strf(x, "%s/1/n", ga), 1.0 / (double)ts_shape_numel(s)));
            }
            op2(x, "Expand", ga, g, const_i64(x, strf(x, "%s/shape", ga), s->ndim, v));
        }
        return true;
    case TS_OP_NLL_LOSS: /* -dY / B at each row's label: one-hot of the labels */
        if ((ga = din(x, o, t, 0))) {
            const ts_shape *s = shape_of(x, t->in[0]);
            const char *oh = strf(x, "%s/one_hot", ga);
            float *vals = ox_new(x, 2 * sizeof *vals);
            if (!vals) return true;
            vals[0] = 0.0f, vals[1] = -1.0f / (float)s->d[0];
            init(x, strf(x, "%s/values", ga), ONNX_FLOAT, &(ts_shape){.ndim = 1, .d = {2}}, vals, 2 * sizeof *vals);
            const char *l64 = strf(x, "%s/labels_i64", ga); /* the index type onnxruntime's OneHot takes with float values */
            attr_i(x, op1(x, "Cast", l64, b), "to", ONNX_INT64);
            attr_i(x, op3(x, "OneHot", oh, l64, const_i64(x, strf(x, "%s/depth", ga), 1, &s->d[1]), strf(x, "%s/values", ga)), "axis", -1);
            op2(x, "Mul", ga, oh, dy);
        }
        return true;
    case TS_OP_MUL:
    case TS_OP_DIV: /* d(a*b) = dY b, dY a; d(a/b) = dY / b, -dY a / b^2 */
        if ((ga = din(x, o, t, 0))) {
            const char *r = strf(x, "%s/full", ga);
            op2(x, t->op == TS_OP_MUL ? "Mul" : "Div", r, dy, b);
            unbroadcast(x, r, ys, shape_of(x, t->in[0]), ga);
        }
        if ((gb = din(x, o, t, 1))) {
            const char *r = strf(x, "%s/full", gb);
            if (t->op == TS_OP_MUL) op2(x, "Mul", r, dy, a);
            else {
                const char *q = strf(x, "%s/dY_y", gb), *nq = strf(x, "%s/-dY_y", gb);
                op2(x, "Mul", q, dy, y); /* -dY a / b^2 = -dY y / b */
                op1(x, "Neg", nq, q);
                op2(x, "Div", r, nq, b);
            }
            unbroadcast(x, r, ys, shape_of(x, t->in[1]), gb);
        }
        return true;
    case TS_OP_EXP: /* dY y */
        if ((ga = din(x, o, t, 0))) op2(x, "Mul", ga, dy, y);
        return true;
    case TS_OP_LOG: /* dY / x */
        if ((ga = din(x, o, t, 0))) op2(x, "Div", ga, dy, a);
        return true;
    case TS_OP_SQRT: /* dY / (2 y) */
        if ((ga = din(x, o, t, 0))) {
            const char *h = strf(x, "%s/dY/2", ga);
            op2(x, "Mul", h, dy, const_f(x, strf(x, "%s/half", ga), 0.5));
            op2(x, "Div", ga, h, y);
        }
        return true;
    case TS_OP_TANH:    /* dY (1 - y^2) */
    case TS_OP_SIGMOID: /* dY y (1 - y) */
        if ((ga = din(x, o, t, 0))) {
            const char *sq = strf(x, "%s/y^2", ga), *d = strf(x, "%s/derivative", ga);
            op2(x, "Mul", sq, y, y);
            if (t->op == TS_OP_TANH) op2(x, "Sub", d, const_f(x, strf(x, "%s/1", ga), 1.0), sq);
            else op2(x, "Sub", d, y, sq);
            op2(x, "Mul", ga, dy, d);
        }
        return true;
    case TS_OP_ABS: /* dY sign(x) */
        if ((ga = din(x, o, t, 0))) {
            const char *sg = strf(x, "%s/sign", ga);
            op1(x, "Sign", sg, a);
            op2(x, "Mul", ga, dy, sg);
        }
        return true;
    case TS_OP_GELU: /* erf form: dY (Phi(x) + x phi(x)), Phi(x) = (1 + erf(x / sqrt 2)) / 2 */
        if (t->attr[0]) return false;
        if ((ga = din(x, o, t, 0))) {
            const char *phi = strf(x, "%s/Phi", ga), *x2 = strf(x, "%s/x^2", ga), *e = strf(x, "%s/exp", ga), *ne = strf(x, "%s/-x^2/2", ga),
                       *pdf = strf(x, "%s/phi", ga), *xp = strf(x, "%s/x_phi", ga), *d = strf(x, "%s/derivative", ga);
            op2(x, "Mul", phi, strf(x, "%s/1+e", y), const_f(x, strf(x, "%s/half", ga), 0.5)); /* the forward's 1 + erf(x / sqrt 2) */
            op2(x, "Mul", x2, a, a);
            op2(x, "Mul", ne, x2, const_f(x, strf(x, "%s/-1/2", ga), -0.5));
            op1(x, "Exp", e, ne);
            op2(x, "Mul", pdf, e, const_f(x, strf(x, "%s/1/sqrt(2pi)", ga), 0.3989422804014327));
            op2(x, "Mul", xp, a, pdf);
            op2(x, "Add", d, phi, xp);
            op2(x, "Mul", ga, dy, d);
        }
        return true;
    case TS_OP_SLICE: /* dY in zeros at the slice's place */
        if ((ga = din(x, o, t, 0))) {
            const ts_shape *s = shape_of(x, t->in[0]);
            int64_t pads[2 * TS_MAX_DIMS] = {0};
            pads[t->attr[0]] = t->attr[1];
            pads[s->ndim + t->attr[0]] = s->d[t->attr[0]] - t->attr[1] - t->attr[2];
            op2(x, "Pad", ga, dy, const_i64(x, strf(x, "%s/pads", ga), 2 * s->ndim, pads));
        }
        return true;
    case TS_OP_MASKED_FILL: /* 0 where filled */
        if ((ga = din(x, o, t, 0))) op3(x, "Where", ga, strf(x, "%s/bool1", y), const_f(x, strf(x, "%s/0", ga), 0.0), dy);
        return true;
    case TS_OP_WHERE:
    case TS_OP_SELECT:
        for (int j = 1; j <= 2; j++)
            if ((ga = din(x, o, t, j))) {
                const char *r = strf(x, "%s/full", ga), *z = const_f(x, strf(x, "%s/0", ga), 0.0);
                op3(x, "Where", r, strf(x, "%s/bool0", y), j == 1 ? dy : z, j == 1 ? z : dy);
                unbroadcast(x, r, ys, shape_of(x, t->in[j]), ga);
            }
        return true;
    case TS_OP_CROSS_ENTROPY: /* (softmax(x) - one_hot(labels)) dY / (labels counted), 0 at an ignored label */
        if ((ga = din(x, o, t, 0))) {
            const ts_shape *s = shape_of(x, t->in[0]);
            int64_t V = s->d[s->ndim - 1];
            const char *sm = strf(x, "%s/softmax", ga), *l64 = strf(x, "%s/labels_i64", ga), *oh = strf(x, "%s/one_hot", ga),
                       *df = strf(x, "%s/p-one_hot", ga), *valid = strf(x, "%s/counted", ga), *vb = strf(x, "%s/counted_bool", ga),
                       *n = strf(x, "%s/count", ga), *n1 = strf(x, "%s/count>=1", ga), *sc = strf(x, "%s/dY/count", ga),
                       *v3 = strf(x, "%s/counted_rows", ga), *dm = strf(x, "%s/masked", ga);
            float *vals = ox_new(x, 2 * sizeof *vals);
            if (!vals) return true;
            vals[0] = 0.0f, vals[1] = 1.0f;
            attr_i(x, op1(x, "Softmax", sm, a), "axis", -1);
            attr_i(x, op1(x, "Cast", l64, b), "to", ONNX_INT64);
            int64_t ignore = t->attr[0] ? t->attr[1] : INT64_MIN, zero = 0; /* without one every label counts */
            const char *ig = strf(x, "%s/ignored", ga), *safe = strf(x, "%s/labels_in_range", ga);
            op2(x, "Equal", ig, l64, const_i64(x, strf(x, "%s/ignore_index", ga), 1, &ignore));
            op3(x, "Where", safe, ig, const_i64(x, strf(x, "%s/0", ga), 1, &zero), l64); /* an ignored label's row is masked below */
            init(x, strf(x, "%s/values", ga), ONNX_FLOAT, &(ts_shape){.ndim = 1, .d = {2}}, vals, 2 * sizeof *vals);
            attr_i(x, op3(x, "OneHot", oh, safe, const_i64(x, strf(x, "%s/depth", ga), 1, &V), strf(x, "%s/values", ga)), "axis", -1);
            op2(x, "Sub", df, sm, oh);
            op1(x, "Not", vb, ig);
            attr_i(x, op1(x, "Cast", valid, vb), "to", ONNX_FLOAT);
            attr_i(x, op1(x, "ReduceSum", n, valid), "keepdims", 0);
            op2(x, "Max", n1, n, const_f(x, strf(x, "%s/1", ga), 1.0));
            op2(x, "Div", sc, dy, n1);
            op2(x, "Unsqueeze", v3, valid, const_i64(x, strf(x, "%s/last", ga), 1, (int64_t[]){-1}));
            op2(x, "Mul", dm, df, v3);
            op2(x, "Mul", ga, dm, sc);
        }
        return true;
    case TS_OP_EMBEDDING: /* dY added at each index's row */
        if ((ga = din(x, o, t, 0))) {
            const ts_shape *s = shape_of(x, t->in[0]);
            const char *z = strf(x, "%s/zeros", ga), *i64 = strf(x, "%s/indices_i64", ga), *iu = strf(x, "%s/indices", ga);
            op1(x, "ConstantOfShape", z, const_i64(x, strf(x, "%s/shape", ga), 2, s->d));
            attr_i(x, op1(x, "Cast", i64, b), "to", ONNX_INT64);
            op2(x, "Unsqueeze", iu, i64, const_i64(x, strf(x, "%s/last", ga), 1, (int64_t[]){-1}));
            attr_s(x, op3(x, "ScatterND", ga, z, iu, dy), "reduction", "add");
        }
        return true;
    case TS_OP_BATCH_MATMUL: { /* y = A' B' (A' = A or A^T, B' likewise): dA' = dY B'^T, dB' = A'^T dY, summed over broadcast batch dims */
        const char *ap = t->attr[0] ? strf(x, "%s/a_T", y) : a, *bp = t->attr[1] ? strf(x, "%s/b_T", y) : b;
        for (int j = 0; j < 2; j++) {
            const char *g = din(x, o, t, j);
            if (!g) continue;
            const ts_shape *s = shape_of(x, t->in[j]);
            ts_shape sp = *s, full = *ys; /* op(input)'s shape; the product's before the batch sum */
            if (t->attr[j]) sp.d[s->ndim - 2] = s->d[s->ndim - 1], sp.d[s->ndim - 1] = s->d[s->ndim - 2];
            full.d[full.ndim - 2] = sp.d[sp.ndim - 2], full.d[full.ndim - 1] = sp.d[sp.ndim - 1];
            const char *other = j ? ap : bp, *ot = strf(x, "%s/other_T", g), *prod = strf(x, "%s/product", g), *red = t->attr[j] ? strf(x, "%s/of_T", g) : g;
            int n = shape_of(x, t->in[1 - j])->ndim;
            swap_last(v, n);
            attr_is(x, op1(x, "Transpose", ot, other), "perm", n, v);
            if (j) op2(x, "MatMul", prod, ot, dy);
            else op2(x, "MatMul", prod, dy, ot);
            unbroadcast(x, prod, &full, &sp, red);
            if (t->attr[j]) {
                swap_last(v, s->ndim);
                attr_is(x, op1(x, "Transpose", g, red), "perm", s->ndim, v);
            }
        }
        return true;
    }
    case TS_OP_LAYER_NORM: { /* xh = (x - mean) inv_std; dx = inv_std (g - mean(g) - xh mean(g xh)), g = dY w; dw = sum dY xh, db = sum dY */
        const ts_shape *s = shape_of(x, t->in[0]);
        int k = (int)t->attr[0], lead = s->ndim - k;
        int64_t norm[TS_MAX_DIMS], outer[TS_MAX_DIMS];
        for (int d = 0; d < k; d++) norm[d] = lead + d;
        for (int d = 0; d < lead; d++) outer[d] = d;
        const char *xh = strf(x, "%s/x_hat", y), *xc = strf(x, "%s/x-mean", y); /* beside the forward's statistics */
        op2(x, "Sub", xc, a, strf(x, "%s/mean", y));
        op2(x, "Mul", xh, xc, strf(x, "%s/inv_std", y));
        norm_backward(x, o, t, true, dy, b, xh, k, norm, "Mul", strf(x, "%s/inv_std", y), lead, outer);
        return true;
    }
    case TS_OP_RMS_NORM: { /* xh = x inv_rms; dx = inv_rms (g - xh mean(g xh)), g = dY w; dw = sum dY xh */
        const ts_shape *s = shape_of(x, t->in[0]);
        int64_t last = s->ndim - 1, outer[TS_MAX_DIMS];
        for (int d = 0; d < last; d++) outer[d] = d;
        norm_backward(x, o, t, false, dy, b, b ? strf(x, "%s/x_hat", y) : y, 1, &last, "Mul", strf(x, "%s/inv_rms", y), (int)last, outer);
        return true;
    }
    case TS_OP_BATCH_NORM: { /* with the batch's statistics: dx = (g - mean(g) - xh mean(g xh)) / std, g = dY w; dw = sum dY xh, db = sum dY */
        if (t->attr[0] || !x->m->training) return false;
        int n = 0;
        const ts_shape *s = shape_of(x, t->in[0]);
        for (int d = 0; d < s->ndim; d++)
            if (d != 1) v[n++] = d;
        const char *xh = strf(x, "%s/normalised", y);
        norm_backward(x, o, t, true, dy, strf(x, "%s/weight", y), xh, n, v, "Div", strf(x, "%s/std", y), n, v);
        return true;
    }
    case TS_OP_CONV2D: { /* dX = ConvTranspose(dY, W); dW = a conv of x by dY (stride and dilation swapped); db = sum dY */
        if (t->attr[CA_GROUPS] != 1) return false;
        const ts_shape *xs = shape_of(x, t->in[0]), *ws = shape_of(x, t->in[1]);
        int64_t pads[4] = {t->attr[CA_PT], t->attr[CA_PL], t->attr[CA_PB], t->attr[CA_PR]}, strides[2] = {t->attr[CA_SH], t->attr[CA_SW]},
                dil[2] = {t->attr[CA_DH], t->attr[CA_DW]}, perm[4] = {1, 0, 2, 3};
        if ((ga = din(x, o, t, 0))) {
            int64_t outpad[2];
            for (int d = 0; d < 2; d++)
                outpad[d] = xs->d[2 + d] - (strides[d] * (ys->d[2 + d] - 1) + (ws->d[2 + d] - 1) * dil[d] + 1 - pads[d] - pads[2 + d]);
            Node *nd = op2(x, "ConvTranspose", ga, dy, b);
            attr_is(x, nd, "strides", 2, strides);
            attr_is(x, nd, "pads", 4, pads);
            attr_is(x, nd, "dilations", 2, dil);
            attr_is(x, nd, "output_padding", 2, outpad);
        }
        if ((gb = din(x, o, t, 1))) {
            const char *xt = strf(x, "%s/x_T", gb), *dyt = strf(x, "%s/dY_T", gb), *c = strf(x, "%s/conv", gb), *sl = strf(x, "%s/kernel", gb);
            attr_is(x, op1(x, "Transpose", xt, a), "perm", 4, perm);
            attr_is(x, op1(x, "Transpose", dyt, dy), "perm", 4, perm);
            Node *nd = op2(x, "Conv", c, xt, dyt);
            attr_is(x, nd, "strides", 2, dil);
            attr_is(x, nd, "dilations", 2, strides);
            attr_is(x, nd, "pads", 4, pads);
            node(x, "Slice", NULL, 4,
                 (const char *[]){c, const_i64(x, strf(x, "%s/starts", gb), 2, (int64_t[]){0, 0}), const_i64(x, strf(x, "%s/ends", gb), 2, &ws->d[2]),
                                  const_i64(x, strf(x, "%s/axes", gb), 2, (int64_t[]){2, 3})},
                 1, &sl);
            attr_is(x, op1(x, "Transpose", gb, sl), "perm", 4, perm);
        }
        if (t->n_in > 2 && (gb = din(x, o, t, 2)))
            attr_i(x, op2(x, "ReduceSum", gb, dy, const_i64(x, strf(x, "%s/axes", gb), 3, (int64_t[]){0, 2, 3})), "keepdims", 0);
        return true;
    }
    case TS_OP_MAX_POOL2D: /* dY added at each window's winner (MaxPool's flat indices) */
        if ((ga = din(x, o, t, 0))) {
            const ts_shape *s = shape_of(x, t->in[0]);
            int64_t numel = ts_shape_numel(s), flat = -1;
            const char *z = strf(x, "%s/zeros", ga), *fi = strf(x, "%s/flat_indices", ga), *fd = strf(x, "%s/flat_dY", ga), *sc = strf(x, "%s/flat", ga);
            const char *minus1 = const_i64(x, strf(x, "%s/-1", ga), 1, &flat);
            op1(x, "ConstantOfShape", z, const_i64(x, strf(x, "%s/numel", ga), 1, &numel));
            op2(x, "Reshape", fi, strf(x, "%s/indices", y), minus1);
            op2(x, "Reshape", fd, dy, minus1);
            Node *nd = op3(x, "ScatterElements", sc, z, fi, fd);
            attr_i(x, nd, "axis", 0);
            attr_s(x, nd, "reduction", "add");
            for (int d = 0; d < s->ndim; d++) v[d] = s->d[d];
            op2(x, "Reshape", ga, sc, const_i64(x, strf(x, "%s/shape", ga), s->ndim, v));
        }
        return true;
    case TS_OP_SIN:
    case TS_OP_COS:
    case TS_OP_SOFTPLUS:
    case TS_OP_LEAKY_RELU:
    case TS_OP_ELU:
    case TS_OP_SELU:
    case TS_OP_HARD_SIGMOID:
    case TS_OP_SILU:
    case TS_OP_HARD_SWISH: /* dY f'(x), f' as the kernels take it (backend/ew_math.h) */
        if ((ga = din(x, o, t, 0))) {
            const char *d = strf(x, "%s/derivative", ga);
            elementwise_derivative(x, t, ga, d);
            op2(x, "Mul", ga, dy, d);
        }
        return true;
    case TS_OP_PAD: /* the input's part of dY */
        if (t->iparam != TS_PAD_CONSTANT) return false;
        if ((ga = din(x, o, t, 0))) {
            const ts_shape *s = shape_of(x, t->in[0]);
            int64_t st[TS_MAX_DIMS], en[TS_MAX_DIMS], ax[TS_MAX_DIMS];
            for (int d = 0; d < s->ndim; d++) st[d] = t->attr[d], en[d] = t->attr[d] + s->d[d], ax[d] = d;
            node(x, "Slice", NULL, 4,
                 (const char *[]){dy, const_i64(x, strf(x, "%s/starts", ga), s->ndim, st), const_i64(x, strf(x, "%s/ends", ga), s->ndim, en),
                                  const_i64(x, strf(x, "%s/axes", ga), s->ndim, ax)},
                 1, &ga);
        }
        return true;
    case TS_OP_ERF: /* dY 2/sqrt(pi) exp(-x^2) */
        if ((ga = din(x, o, t, 0))) {
            const char *x2 = strf(x, "%s/x^2", ga), *n2 = strf(x, "%s/-x^2", ga), *e = strf(x, "%s/exp", ga), *d = strf(x, "%s/derivative", ga);
            op2(x, "Mul", x2, a, a);
            op1(x, "Neg", n2, x2);
            op1(x, "Exp", e, n2);
            op2(x, "Mul", d, e, const_f(x, strf(x, "%s/2/sqrt(pi)", ga), 1.1283791670955126));
            op2(x, "Mul", ga, dy, d);
        }
        return true;
    case TS_OP_POW: /* dY p x^(p-1) */
        if ((ga = din(x, o, t, 0))) {
            const char *pw = strf(x, "%s/x^(p-1)", ga), *d = strf(x, "%s/derivative", ga);
            op2(x, "Pow", pw, a, const_f(x, strf(x, "%s/p-1", ga), (double)t->fattr[0] - 1.0));
            op2(x, "Mul", d, pw, const_f(x, strf(x, "%s/p", ga), (double)t->fattr[0]));
            op2(x, "Mul", ga, dy, d);
        }
        return true;
    case TS_OP_CONCAT: { /* each input's part of dY */
        int64_t at = 0, dim = t->attr[0];
        for (int j = 0; j < t->n_in; j++) {
            int64_t len = shape_of(x, t->in[j])->d[dim], end = at + len;
            if ((ga = din(x, o, t, j)))
                node(x, "Slice", NULL, 4,
                     (const char *[]){dy, const_i64(x, strf(x, "%s/starts", ga), 1, &at), const_i64(x, strf(x, "%s/ends", ga), 1, &end),
                                      const_i64(x, strf(x, "%s/axes", ga), 1, &dim)},
                     1, &ga);
            at = end;
        }
        return true;
    }
    case TS_OP_REDUCE_SUM_AXES:
    case TS_OP_REDUCE_MEAN_AXES:
    case TS_OP_GLOBAL_AVG_POOL: /* dY at the kept dims, spread over the reduced ones (/ their size) */
        if ((ga = din(x, o, t, 0))) {
            const ts_shape *s = shape_of(x, t->in[0]);
            int64_t kept[TS_MAX_DIMS], full[TS_MAX_DIMS], count = 1;
            for (int d = 0; d < s->ndim; d++) {
                bool reduced = t->op == TS_OP_GLOBAL_AVG_POOL ? d >= 2 : ((t->attr[0] >> d) & 1) != 0;
                kept[d] = reduced ? 1 : s->d[d];
                full[d] = s->d[d];
                if (reduced) count *= s->d[d];
            }
            const char *r = strf(x, "%s/kept", ga);
            op2(x, "Reshape", r, dy, const_i64(x, strf(x, "%s/kept_shape", ga), s->ndim, kept));
            if (t->op != TS_OP_REDUCE_SUM_AXES) {
                const char *m = strf(x, "%s/kept/n", ga);
                op2(x, "Mul", m, r, const_f(x, strf(x, "%s/1/n", ga), 1.0 / (double)count));
                r = m;
            }
            op2(x, "Expand", ga, r, const_i64(x, strf(x, "%s/shape", ga), s->ndim, full));
        }
        return true;
    default: return false;
    }
}

/* A backward op of our own domain: `<Op>Backward`, reading what its
 * kernel reads and giving its contributions to its inputs' gradients. */
static void own_backward(ox *x, const ts_bwd_op *o) {
    const char *in[TS_BWD_MAX_IN], *out[TS_BWD_MAX_OUT];
    for (int j = 0; j < o->n_in; j++) {
        const ts_entry *e = &x->p->entries[o->in[j]];
        in[j] = e->kind == TS_KIND_GRAD ? grad_read(x, o->in[j]) : e->name;
    }
    for (int j = 0; j < o->n_out; j++) out[j] = contribution(x, o->out[j], o->src);
    Node *nd = node(x, strf(x, "%s", o->op), OX_DOMAIN, o->n_in, in, o->n_out, out);
    attr_is(x, nd, "attr", TS_MAX_ATTRS, o->src->attr);
    attr_fs(x, nd, "fattr", TS_MAX_ATTRS, o->src->fattr);
    attr_i(x, nd, "iparam", o->src->iparam);
    attr_f(x, nd, "fparam", (double)o->src->fparam);
}

/* ---- the optimizer step */

static const ts_opt_state *state_of(const ts_model_def *m, int node_id) {
    for (int k = 0; k < *m->n_state; k++)
        if ((*m->state)[k].node == node_id) return &(*m->state)[k];
    return NULL;
}

/* Optimizer state as an initializer holding its value now. */
static void state_init(ox *x, int e) {
    const ts_entry *en = &x->p->entries[e];
    const ts_opt_state *s = state_of(x->m, en->node);
    const float *data = !s ? NULL : en->kind == TS_KIND_ACCL ? s->accl : en->kind == TS_KIND_ACCL1 ? s->accl1 : en->kind == TS_KIND_ACCL2 ? s->accl2 : &s->step;
    if (!data) { /* not made yet: zeros, as the first step finds them */
        data = ox_new(x, sizeof(float) * (size_t)(en->numel ? en->numel : 1));
        if (!data) return;
    }
    init(x, en->name, ONNX_FLOAT, &en->shape, data, sizeof(float) * (size_t)en->numel);
}

static void optimizer_op(ox *x, const ts_bwd_op *o) {
    const ts_prog *p = x->p;
    if (o->n_out == 1 && o->n_in == 1) { /* Alias or AccumulateMean: Gradient___ -> Accum___ */
        const char *g = grad_read(x, o->in[0]), *acc = entry_name(x, o->out[0]);
        push(x, &x->infos, value(x, acc, ONNX_FLOAT, &p->entries[o->out[0]].shape));
        if (!strcmp(o->op, "Alias")) op1(x, "Identity", acc, g);
        else {
            Node *nd = node(x, "AccumulateMean", OX_DOMAIN, 1, &g, 1, &acc);
            attr_i(x, nd, "micro_batches", x->m->opts->grad_accum);
            attr_i(x, nd, "over_replicas", ts_opts_replicas(x->m->opts) > 1);
        }
        return;
    }
    const char *in[TS_BWD_MAX_IN], *out[TS_BWD_MAX_OUT];
    for (int j = 0; j < o->n_in; j++) {
        in[j] = entry_name(x, o->in[j]);
        int kind = p->entries[o->in[j]].kind;
        if (kind != TS_KIND_VALUE && kind != TS_KIND_ACCUM) state_init(x, o->in[j]);
    }
    for (int j = 0; j < o->n_out; j++) {
        int kind = p->entries[o->out[j]].kind;
        out[j] = kind == TS_KIND_UPDATED ? entry_name(x, o->out[j]) : strf(x, "%s/next", entry_name(x, o->out[j]));
        push(x, &x->outputs, value(x, out[j], ONNX_FLOAT, &p->entries[o->out[j]].shape));
    }
    const ts_optimizer *opt = ts_param_optimizer(x->m->opt, o->src);
    Node *nd = node(x, ts_optimizer_name(opt->kind), OX_DOMAIN, o->n_in, in, o->n_out, out);
    attr_f(x, nd, "lr", (double)ts_bwd_lr(x->bm, o->src));
    if (opt->kind == TS_OPT_SGD) {
        attr_f(x, nd, "momentum", (double)opt->momentum);
        attr_f(x, nd, "dampening", (double)opt->dampening);
        attr_i(x, nd, "nesterov", opt->nesterov);
    } else {
        attr_f(x, nd, "beta1", (double)opt->beta1);
        attr_f(x, nd, "beta2", (double)opt->beta2);
        attr_f(x, nd, "epsilon", (double)opt->eps);
    }
    attr_f(x, nd, "weight_decay", (double)opt->weight_decay);
}

/* ---- the whole graph */

/* "<what> of <tensor> (<Op>), built at <file:line>": Netron shows it beside the node. */
static void set_doc(ox *x, const char *what, const ts_tensor *t) {
    char where[600];
    x->doc = strf(x, "%s of %s (%s), built at %s", what, t->name, ts_op_get(t->op)->name, ts_tensor_where(t, where, sizeof where));
}

/* An input, or an initializer of the values a leaf holds (a bool one's
 * 1.0 and 0.0 cells as ONNX's bytes). A uint32 or uint64 input (held in
 * i64) is ONNX's int64 tensor of the same values or bits. */
static void leaf(ox *x, const ts_tensor *t) {
    const ts_shape *s = shape_of(x, t->id);
    int64_t n = ts_shape_numel(s);
    if (t->op == TS_OP_INPUT) push(x, &x->inputs, value(x, t->name, onnx_type(t->dtype), s));
    else if (t->dtype == TS_BOOL) {
        uint8_t *b = ox_new(x, (size_t)(n ? n : 1));
        for (int64_t i = 0; b && i < n; i++) b[i] = t->value[i] != 0.0f;
        if (b) init(x, t->name, ONNX_BOOL, s, b, (size_t)n);
    } else init(x, t->name, onnx_type(t->dtype), s, t->value, 4 * (size_t)(n * ts_dtype_cells(t->dtype)));
}

static ts_status build(ox *x, TensorscopeOnnx__ModelProto *mp, TensorscopeOnnx__GraphProto *gp) {
    const ts_prog *p = x->p;
    const ts_graph *g = x->g;
    for (int r = 0; r < p->n_order; r++) {
        const ts_tensor *t = g->t[p->order[r]];
        if (t->op == TS_OP_INPUT || ts_op_holds_value(t->op)) leaf(x, t);
        else {
            set_doc(x, "forward", t);
            forward(x, t);
            push(x, &x->infos, value(x, t->name, onnx_type(ts_op_get(t->op)->int_output ? TS_I32 : t->dtype), shape_of(x, t->id)));
        }
    }
    if (x->m->training) {
        const ts_tensor *loss = g->t[x->m->loss];
        push(x, &x->outputs, value(x, loss->name, ONNX_FLOAT, shape_of(x, loss->id)));
        ts_bwd_op *ops = NULL;
        int n = 0;
        if (ts_backward_ops(x->bm, &ops, &n) || count_writers(x, ops, n)) {
            ts_free(ops);
            return TS_ERR_OUT_OF_MEMORY;
        }
        for (int k = 0; k < n && !x->failed; k++) {
            const ts_bwd_op *o = &ops[k];
            set_doc(x, o->optimizer ? "optimizer step" : "backward", o->src);
            if (o->optimizer) optimizer_op(x, o);
            else if (!o->accumulates) { /* OnesLike: d loss / d loss */
                const ts_shape *s = &p->entries[o->out[0]].shape;
                int64_t v[TS_MAX_DIMS];
                for (int d = 0; d < s->ndim; d++) v[d] = s->d[d];
                const char *one = strf(x, "%s/1", entry_name(x, o->out[0]));
                op2(x, "Expand", entry_name(x, o->out[0]), const_f(x, one, 1.0), const_i64(x, strf(x, "%s/shape", entry_name(x, o->out[0])), s->ndim, v));
                x->defined[o->out[0]] = true;
                continue;
            } else if (!standard_backward(x, o, o->src)) own_backward(x, o);
            if (!o->optimizer) finish(x, o);
        }
        ts_free(ops);
    } else
        for (int k = 0; k < x->m->n_outputs; k++) {
            const ts_tensor *t = g->t[x->m->outputs[k]];
            push(x, &x->outputs, value(x, t->name, onnx_type(t->dtype), shape_of(x, t->id)));
        }
    if (x->failed) return TS_ERR_OUT_OF_MEMORY;
    /* a value info may not repeat an output */
    size_t kept = 0;
    for (size_t k = 0; k < x->infos.n; k++) {
        bool is_out = false;
        for (size_t q = 0; q < x->outputs.n && !is_out; q++) is_out = !strcmp(((Value *)x->infos.v[k])->name, ((Value *)x->outputs.v[q])->name);
        if (!is_out) x->infos.v[kept++] = x->infos.v[k];
    }
    x->infos.n = kept;

    gp->n_node = x->nodes.n, gp->node = (Node **)x->nodes.v;
    gp->n_initializer = x->inits.n, gp->initializer = (Tensor **)x->inits.v;
    gp->n_input = x->inputs.n, gp->input = (Value **)x->inputs.v;
    gp->n_output = x->outputs.n, gp->output = (Value **)x->outputs.v;
    gp->n_value_info = x->infos.n, gp->value_info = (Value **)x->infos.v;
    gp->name = (char *)(x->m->training ? "tensorscope training step" : "tensorscope inference");
    mp->graph = gp;
    return TS_OK;
}

static void ox_free(ox *x) {
    for (size_t k = 0; k < x->own.n; k++) ts_free(x->own.v[k]);
    ts_free(x->own.v);
    ts_free(x->nodes.v), ts_free(x->inits.v), ts_free(x->inputs.v), ts_free(x->outputs.v), ts_free(x->infos.v);
    if (x->partials)
        for (int e = 0; e < x->p->n_entries; e++) ts_free(x->partials[e].v);
    ts_free(x->partials), ts_free(x->writers), ts_free(x->defined);
}

ts_status ts_onnx_export(const ts_model_def *m, const ts_bwd_model *bm, const char *path) {
    ts_status st;
    ox x = {.m = m, .bm = bm, .p = bm->prog, .g = m->g};
    TensorscopeOnnx__ModelProto mp;
    TensorscopeOnnx__GraphProto gp;
    TensorscopeOnnx__OperatorSetIdProto std_set, own_set, *sets[2] = {&std_set, &own_set};
    tensorscope_onnx__model_proto__init(&mp);
    tensorscope_onnx__graph_proto__init(&gp);
    tensorscope_onnx__operator_set_id_proto__init(&std_set);
    tensorscope_onnx__operator_set_id_proto__init(&own_set);
    std_set.domain = (char *)"", std_set.has_version = true, std_set.version = OX_OPSET;
    own_set.domain = (char *)OX_DOMAIN, own_set.has_version = true, own_set.version = 1;
    mp.has_ir_version = true, mp.ir_version = 8;
    mp.n_opset_import = 2, mp.opset_import = sets;
    mp.producer_name = (char *)"tensorscope";
    mp.producer_version = (char *)ts_version();
    if ((st = build(&x, &mp, &gp))) {
        ox_free(&x);
        return ts_error(st, "ts_model_save_graph: out of memory building %s", path);
    }
    size_t n = tensorscope_onnx__model_proto__get_packed_size(&mp);
    if (n > (size_t)INT32_MAX) {
        ox_free(&x);
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_save_graph: the graph with its values is %zu MiB, more than the 2 GiB one ONNX file holds",
                        n >> 20);
    }
    uint8_t *buf = ts_malloc(n ? n : 1);
    if (!buf) {
        ox_free(&x);
        return ts_error(TS_ERR_OUT_OF_MEMORY, "ts_model_save_graph: out of memory for %zu bytes", n);
    }
    tensorscope_onnx__model_proto__pack(&mp, buf);
    ox_free(&x);
    ts_atomic_file af;
    if ((st = ts_atomic_open(&af, path))) {
        ts_free(buf);
        return st;
    }
    if (fwrite(buf, 1, n, af.f) != n) {
        ts_atomic_abort(&af);
        ts_free(buf);
        return ts_error(TS_ERR_IO, "ts_model_save_graph: cannot write %s", path);
    }
    ts_free(buf);
    return ts_atomic_commit(&af);
}
