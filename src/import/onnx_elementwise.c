/* onnx_elementwise.c -- elementwise ops and activations: the binary and unary
 * families (folded on constants), Max/Min/Sum/Mean, the activations composed
 * of them, Clip, PRelu, Swish and SwiGLU, Softmax, LogSoftmax and Hardmax,
 * Where, the bitwise ops. */
#include "import/onnx_ops.h"
#include "core/lowbits.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An operand of an elementwise op, as a graph tensor: its first sample
 * (ts_onnx_sample_of) where it is equal samples of the other operand's rank and
 * dim 0 (GPT-2's attention mask [B,1,T,T]), which then broadcasts over
 * any batch the model is compiled at; otherwise as_f32's tensor. */
static ts_tensor *as_f32_per_sample(importer *im, value *v, const ts_tensor *other, ts_status *st) {
    ts_tensor *s = other && other->shape.ndim == v->c.shape.ndim ? ts_onnx_sample_of(im, v, other->shape.d[0], st) : NULL;
    return s ? ts_onnx_f32_of(im, s, st) : *st ? NULL : as_f32(im, v, st);
}

/* An integer operand whose type has 32 bits or fewer: an i32 graph
 * tensor of such a declared type (a graph input's, a Cast's), or a
 * constant of one. */
static bool narrow_int(const value *v) {
    int t = v->c.dtype;
    bool narrow = t == TS_ONNX_INT32 || t == TS_ONNX_INT16 || t == TS_ONNX_INT8 || t == TS_ONNX_UINT16 || t == TS_ONNX_UINT8 || t == TS_ONNX_BOOL;
    return narrow && (!v->t || v->t->dtype == TS_I32);
}

/* The declared integer type of an integer op's operands, ONNX's (a's,
 * else b's: a graph input's, a Cast's, an integer op's result or a
 * constant's), into *dt as a ts_dtype; int64 where neither is known. */
static int declared_int(const value *a, const value *b, ts_dtype *dt) {
    for (int k = 0; k < 2; k++) {
        int t = (k ? b : a)->c.dtype;
        if (t && !ts_onnx_dtype_is_float(t) && t != TS_ONNX_BOOL && !ts_lowbits_is(t) && ts_onnx_array_dtype(t, dt)) return t;
    }
    *dt = TS_I64;
    return TS_ONNX_INT64;
}

/* The integer op `op` of a and b, i64 graph tensors of values of the
 * declared type of the operands va, vb (declared_int): ts_binary_typed,
 * the result wrapped to the type; int32 and narrower operands' result an
 * i32 tensor, as they are held. The result's value records the type. */
static ts_status int_binary(importer *im, const char *op, value *va, value *vb, ts_tensor *a, ts_tensor *b, value *out) {
    ts_dtype dt;
    int type = declared_int(va, vb, &dt);
    bool compare = strcmp(op, "Equal") == 0 || strncmp(op, "Less", 4) == 0 || strncmp(op, "Greater", 7) == 0;
    ts_tensor *r = ts_binary_typed(im->g, op, a, b, dt);
    if (r && !compare && narrow_int(va) && narrow_int(vb)) r = ts_cast(im->g, r, TS_I32);
    ts_status st = ts_onnx_built(im, r, out);
    if (!st && !compare) out->c.dtype = type;
    return st;
}

/* The elementwise binary family on graph tensors (ts_binary), by the op
 * table's name of the ONNX op type; Sum's links are Adds. Max and Min of
 * integers (exact_int): exactly, in int64, folded on constants (out may
 * be a, a constant the loop folded before). Two bools are compared and
 * combined as they are (And, Or, Xor, Equal); else the operands' values
 * in f32. */
static ts_status binary_family(importer *im, const char *op, value *a, value *b, value *out, bool exact_int) {
    ts_status st = TS_OK;
    const char *iop = strcmp(op, "Sum") == 0 ? "Add" : op;
    if (exact_int && ts_onnx_int_operand(a) && ts_onnx_int_operand(b) && !a->t && !b->t) {
        ts_const r = {0};
        if ((st = ts_const_binary(iop, &a->c, &b->c, &r))) return ts_onnx_fold_result(im, st);
        ts_const_free(&out->c);
        out->c = r;
        out->made = NULL; /* a graph constant of what it held before */
        return TS_OK;
    }
    if (exact_int && ts_onnx_int_operand(a) && ts_onnx_int_operand(b)) {
        ts_tensor *ia = ts_onnx_i64_of(im, a, &st), *ib = ia ? ts_onnx_i64_of(im, b, &st) : NULL;
        if (ib) return int_binary(im, iop, a, b, ia, ib, out); /* int32 operands: int32's result */
        if (st) return st;
    }
    ts_tensor *ta = ts_onnx_as_tensor(im, a, &st), *tb = ta ? ts_onnx_as_tensor(im, b, &st) : NULL;
    if (tb && (ta->dtype != TS_BOOL || tb->dtype != TS_BOOL || strcmp(op, "Sum") == 0)) {
        ta = ts_onnx_f32_of(im, ta, &st);
        tb = ta ? ts_onnx_f32_of(im, tb, &st) : NULL;
    }
    if (!tb) return st;
    return ts_onnx_built(im, strcmp(op, "Sum") == 0 ? ts_add(im->g, ta, tb) : ts_binary(im->g, op, ta, tb), out);
}

/* Whether Pow's exponent e is of a float type (a graph tensor's or a
 * constant's) */
static bool float_exponent(const value *e) { return e->t ? e->t->dtype == TS_F32 : ts_onnx_dtype_is_float(e->c.dtype) || ts_lowbits_is(e->c.dtype); }

/* onnxruntime's Pow of an integer tensor by a one-element float exponent
 * that is 2 or 3 squares or cubes in the integer type (wrapping), not in
 * double: r (the double power) where e is neither, else x*x or x*x*x in
 * type dt, chosen by the fed value at the run. */
static ts_tensor *fed_square_cube(importer *im, ts_tensor *x, ts_tensor *e, ts_tensor *r, ts_dtype dt) {
    ts_graph *g = im->g;
    ts_tensor *two = ts_onnx_scalar(g, "PowTwo", 2.0f), *three = ts_onnx_scalar(g, "PowThree", 3.0f);
    ts_tensor *sq = ts_binary_typed(g, "Mul", x, x, dt);
    ts_tensor *cube = sq ? ts_binary_typed(g, "Mul", sq, x, dt) : NULL;
    ts_tensor *is3 = three && cube ? ts_binary(g, "Equal", e, three) : NULL;
    ts_tensor *r3 = is3 ? ts_where(g, is3, cube, r) : NULL;
    ts_tensor *is2 = two && r3 ? ts_binary(g, "Equal", e, two) : NULL;
    return is2 ? ts_where(g, is2, sq, r3) : NULL;
}

/* x^e of an integer graph tensor x (its value vx) by a float exponent e,
 * as onnxruntime's: std::pow in double, cast to x's type (INT64_MIN,
 * int32's INT32_MIN, where the power is NaN, infinite or out of it): an
 * f32 graph tensor's values widened exactly (ts_binary_typed's Pow of an
 * integer tensor by an f32 one), a constant's as doubles (an i64 tensor
 * of their bits, ts_graph_int_pow_double). The result's value records
 * x's declared type. */
static ts_status float_pow(importer *im, value *vx, value *e, value *out) {
    ts_status st = TS_OK;
    ts_dtype dt;
    int type = declared_int(vx, vx, &dt);
    ts_tensor *x = vx->t, *r = NULL;
    if (x->dtype == TS_I32 && (dt == TS_I64 || dt == TS_U32 || dt == TS_U64)) dt = TS_I32;
    if (e->t) {
        ts_tensor *f = ts_onnx_f32_of(im, e->t, &st);
        if (!f) return st;
        r = ts_binary_typed(im->g, "Pow", x, f, dt);
        if (r && ts_shape_numel(&f->shape) == 1) r = fed_square_cube(im, x, f, r, dt);
    } else {
        if ((st = ts_onnx_decoded(im, e))) return st;
        int64_t n = ts_shape_numel(&e->c.shape);
        int64_t *bits = ts_malloc((size_t)(n ? n : 1) * sizeof *bits);
        char *name = bits ? ts_graph_op_output_name(im->g, "Exponent") : NULL;
        for (int64_t i = 0; name && i < n; i++) memcpy(&bits[i], &e->c.v[i], sizeof bits[i]);
        ts_array arr = {.dtype = TS_I64, .ndim = e->c.shape.ndim, .data = bits};
        for (int d = 0; d < e->c.shape.ndim; d++) arr.shape[d] = e->c.shape.d[d];
        ts_tensor *b = name ? ts_constant(im->g, name, &arr) : NULL;
        ts_free(name);
        ts_free(bits);
        if (!b) return ts_graph_status(im->g) ? ts_graph_status(im->g) : ts_onnx_node_error(im, TS_ERR_OUT_OF_MEMORY, "out of memory");
        r = ts_graph_int_pow_double(im->g, x, b, dt);
    }
    if ((st = ts_onnx_built(im, r, out))) return st;
    out->c.dtype = type;
    return TS_OK;
}

/* x^e of an integer graph tensor x by a constant whole exponent e >= 0
 * (a one-element initializer too, a setting), exactly in x's dtype, wrapping as onnxruntime's and numpy's integer
 * power: square and multiply, log2(e) integer Muls. NULL (no error) where
 * e is none such. */
static ts_tensor *int_pow(importer *im, ts_tensor *x, value *e, ts_status *st) {
    double d;
    if (!is_int_tensor(x) || !ts_onnx_setting_scalar(im, e, &d, st) || !(d >= 0 && d <= 0x1p62 && d == floor(d))) return NULL;
    if (float_exponent(e) && d != 2 && d != 3) return NULL; /* onnxruntime's std::pow in double (float_pow) but for x*x and x*x*x */
    ts_graph *g = im->g;
    ts_tensor *y = ts_onnx_int_scalar_like(im, x, 1, st), *sq = x;
    for (uint64_t k = (uint64_t)d; y && sq && k; k >>= 1) {
        if (k & 1u) y = ts_binary(g, "Mul", y, sq);
        if (k > 1) sq = ts_binary(g, "Mul", sq, sq);
    }
    if (y && y->shape.ndim < x->shape.ndim) y = ts_binary(g, "Add", y, ts_binary(g, "Sub", x, x)); /* x^0: ones of x's shape */
    if ((!y || !sq) && !*st) *st = ts_graph_status(g);
    return y;
}

/* Elementwise binary ops: folded on constants; Add/Sub/Mul on graph
 * tensors when one side's shape is a suffix of the other's (the rest of
 * NumPy broadcasting comes with the broadcasting ops). */
ts_status ts_onnx_op_binary(importer *im, node_io *io) {
    const char *op = im->node->op_type;
    if (io->n_in != 2) return ts_onnx_node_error(im, TS_ERR_FORMAT, "needs 2 inputs, has %d", io->n_in);
    value *a = io->in[0], *b = io->in[1];
    ts_status st = TS_OK;
    int fmod_ = 0;
    if (strcmp(op, "Mod") == 0 && (st = ts_onnx_attr_int32(im, "fmod", 0, 0, 1, &fmod_))) return st;
    if (fmod_) op = "FMod";
    if (is_const(a) && is_const(b) && !a->param && !b->param)
        return ts_onnx_fold_result(im, ts_const_binary(op, &a->c, &b->c, &io->out[0].c));
    /* integer Div truncates toward zero (ids, counts: i32 tensors and integer constants) */
    bool int_a = a->t ? is_int_tensor(a->t) : !a->param && !ts_onnx_dtype_is_float(a->c.dtype);
    bool int_b = b->t ? is_int_tensor(b->t) : !b->param && !ts_onnx_dtype_is_float(b->c.dtype);
    /* integer arithmetic and comparisons of graph tensors (position ids
     * from a mask, ids against a limit), exactly in int64 */
    static const char *const int_ops[] = {"Add", "Sub", "Mul", "Div", "Mod", "FMod", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"};
    bool int_op = false;
    for (size_t k = 0; k < sizeof int_ops / sizeof *int_ops; k++) int_op = int_op || strcmp(op, int_ops[k]) == 0;
    if (int_a && int_b && int_op && (a->t || b->t)) {
        ts_tensor *ia = ts_onnx_i64_of(im, a, &st), *ib = ia ? ts_onnx_i64_of(im, b, &st) : NULL;
        if (st) return st;
        /* in the operands' declared type (a uint64 unsigned), wrapped to it as ONNX's integer arithmetic
         * wraps; int32 operands: an i32 result */
        if (ib) return int_binary(im, op, a, b, ia, ib, &io->out[0]);
    }
    if (strcmp(op, "Div") == 0 && int_a && int_b) {
        ts_tensor *ta = as_f32(im, a, &st), *tb = ta ? as_f32(im, b, &st) : NULL;
        return tb ? ts_onnx_built(im, ts_unary(im->g, "CastInt", ts_div(im->g, ta, tb), 0.0f, 0.0f), &io->out[0]) : st;
    }
    double s;
    /* x * c, c * x, x / c: a scale */
    if (strcmp(op, "Mul") == 0 && ts_onnx_const_scalar(b, &s) && a->t) return ts_onnx_built(im, ts_scale(im->g, a->t, (float)s), &io->out[0]);
    if (strcmp(op, "Mul") == 0 && ts_onnx_const_scalar(a, &s) && b->t) return ts_onnx_built(im, ts_scale(im->g, b->t, (float)s), &io->out[0]);
    if (strcmp(op, "Div") == 0 && ts_onnx_const_scalar(b, &s) && a->t && s != 0.0)
        return ts_onnx_built(im, ts_scale(im->g, a->t, (float)(1.0 / s)), &io->out[0]);
    ts_tensor *p = strcmp(op, "Pow") == 0 && a->t ? int_pow(im, a->t, b, &st) : NULL;
    if (p || st) return p ? ts_onnx_built(im, p, &io->out[0]) : st;
    /* an integer graph tensor by a float exponent: in double, as onnxruntime's */
    if (strcmp(op, "Pow") == 0 && a->t && is_int_tensor(a->t) && float_exponent(b)) return float_pow(im, a, b, &io->out[0]);
    /* an integer base by an integer graph-tensor or negative exponent: the
     * integer Pow (wrapping; a negative exponent as onnxruntime's), in the
     * base's type, which is the result's (the exponent's may differ) */
    if (strcmp(op, "Pow") == 0 && int_a && int_b && (a->t || b->t)) {
        ts_tensor *ia = ts_onnx_i64_of(im, a, &st), *ib = ia ? ts_onnx_i64_of(im, b, &st) : NULL;
        return ib ? int_binary(im, op, a, a, ia, ib, &io->out[0]) : st;
    }
    if (strcmp(op, "Pow") == 0 && ts_onnx_const_scalar(b, &s) && a->t && a->t->dtype == TS_F32)
        return ts_onnx_built(im, ts_pow(im->g, a->t, (float)s), &io->out[0]);
    /* x ** c with c a one-element float initializer: a constant exponent,
     * not a parameter (PyTorch's dynamo exporter stores its constants as
     * initializers; a trained exponent's gradient x^c log x is NaN for
     * every negative x, GPT-2's tanh Gelu) */
    if (strcmp(op, "Pow") == 0 && b->param && ts_shape_numel(&b->c.shape) == 1) {
        ts_tensor *ta = as_f32(im, a, &st);
        if (!ta || (st = ts_onnx_decoded(im, b))) return st;
        return ts_onnx_built(im, ts_pow(im->g, ta, (float)b->c.v[0]), &io->out[0]);
    }
    if (strcmp(op, "Add") && strcmp(op, "Sub") && strcmp(op, "Mul") && strcmp(op, "Div")) return binary_family(im, op, a, b, &io->out[0], false);
    ts_tensor *ta = as_f32_per_sample(im, a, b->t, &st), *tb = ta ? as_f32_per_sample(im, b, a->t, &st) : NULL;
    if (!tb) return st;
    if (strcmp(op, "Div") == 0) return ts_onnx_built(im, ts_div(im->g, ta, tb), &io->out[0]);
    bool swap = ta->shape.ndim < tb->shape.ndim || (ta->shape.ndim == tb->shape.ndim && ts_shape_numel(&ta->shape) < ts_shape_numel(&tb->shape));
    ts_tensor *r;
    if (!swap) r = strcmp(op, "Add") == 0 ? ts_add(im->g, ta, tb) : strcmp(op, "Sub") == 0 ? ts_sub(im->g, ta, tb) : ts_mul(im->g, ta, tb);
    else if (strcmp(op, "Sub") == 0) r = ts_scale(im->g, ts_sub(im->g, tb, ta), -1.0f);
    else r = strcmp(op, "Add") == 0 ? ts_add(im->g, tb, ta) : ts_mul(im->g, tb, ta);
    return ts_onnx_built(im, r, &io->out[0]);
}

/* Unary ops: folded on constants; on graph tensors those the op table has. */
ts_status ts_onnx_op_unary(importer *im, node_io *io) {
    const char *op = im->node->op_type;
    value *x = io->in[0];
    if (is_const(x) && !x->param) return ts_onnx_fold_result(im, ts_const_unary(op, &x->c, &io->out[0].c));
    ts_status st = TS_OK;
    ts_tensor *t = ts_onnx_as_tensor(im, x, &st);
    /* integers: Neg, Abs (wrapping: -INT64_MIN is INT64_MIN) and Relu
     * (Max with 0) exactly, in their dtype */
    if (t && is_int_tensor(t) && (strcmp(op, "Neg") == 0 || strcmp(op, "Abs") == 0))
        return ts_onnx_built(im, ts_unary(im->g, op, t, 0.0f, 0.0f), &io->out[0]);
    if (t && is_int_tensor(t) && strcmp(op, "Relu") == 0) {
        ts_tensor *zero = ts_onnx_int_scalar_like(im, t, 0, &st);
        return zero ? ts_onnx_built(im, ts_binary(im->g, "Max", t, zero), &io->out[0]) : st;
    }
    if (t && !(t->dtype == TS_BOOL && strcmp(op, "Not") == 0)) t = ts_onnx_f32_of(im, t, &st); /* Not of a bool: as it is */
    if (!t) return st;
    if (strcmp(op, "Relu") == 0) return ts_onnx_built(im, ts_relu(im->g, t), &io->out[0]);
    if (strcmp(op, "Log") == 0) return ts_onnx_built(im, ts_log(im->g, t), &io->out[0]);
    if (strcmp(op, "Exp") == 0) return ts_onnx_built(im, ts_exp(im->g, t), &io->out[0]);
    if (strcmp(op, "Reciprocal") == 0) return ts_onnx_built(im, ts_pow(im->g, t, -1.0f), &io->out[0]); /* 1/x, gradient -1/x^2 */
    if (strcmp(op, "Neg") == 0) return ts_onnx_built(im, ts_scale(im->g, t, -1.0f), &io->out[0]);
    if (strcmp(op, "Tanh") == 0) return ts_onnx_built(im, ts_tanh(im->g, t), &io->out[0]);
    if (strcmp(op, "Sigmoid") == 0) return ts_onnx_built(im, ts_sigmoid(im->g, t), &io->out[0]);
    if (strcmp(op, "Sqrt") == 0) return ts_onnx_built(im, ts_sqrt(im->g, t), &io->out[0]);
    if (strcmp(op, "Erf") == 0) return ts_onnx_built(im, ts_erf(im->g, t), &io->out[0]);
    if (strcmp(op, "Abs") == 0) return ts_onnx_built(im, ts_abs(im->g, t), &io->out[0]);
    /* the unary family (ts_unary): the op table's names are ONNX's, with
     * the attributes' defaults of the ONNX op */
    float alpha = 0.0f, beta = 0.0f;
    if (strcmp(op, "IsInf") == 0) {
        alpha = (float)ts_onnx_attr_i(im, "detect_positive", 1);
        beta = (float)ts_onnx_attr_i(im, "detect_negative", 1);
    } else if (strcmp(op, "HardSigmoid") == 0) {
        alpha = (float)ts_onnx_attr_f(im, "alpha", 0.2);
        beta = (float)ts_onnx_attr_f(im, "beta", 0.5);
    } else if (strcmp(op, "LeakyRelu") == 0) {
        alpha = (float)ts_onnx_attr_f(im, "alpha", 0.01);
    } else if (strcmp(op, "Elu") == 0) {
        alpha = (float)ts_onnx_attr_f(im, "alpha", 1.0);
    } else if (strcmp(op, "Selu") == 0) {
        alpha = (float)ts_onnx_attr_f(im, "alpha", 1.67326319217681884765625);
        beta = (float)ts_onnx_attr_f(im, "gamma", 1.05070102214813232421875);
    } else if (strcmp(op, "Gelu") == 0) {
        static const char *const approximations[] = {"none", "tanh"};
        const Attr *ap = ts_onnx_attr(im, "approximate");
        int k = ap && ap->has_s ? ts_onnx_attr_choice(ap, approximations, 2) : 0;
        if (k == 2)
            return ts_onnx_node_error(im, TS_ERR_FORMAT, "attribute 'approximate' is '%.*s'; Gelu takes 'none' or 'tanh'", (int)ap->s.len,
                                      (const char *)ap->s.data);
        return ts_onnx_built(im, ts_gelu(im->g, t, k == 1), &io->out[0]);
    }
    return ts_onnx_built(im, ts_unary(im->g, op, t, alpha, beta), &io->out[0]);
}

/* Max, Min, Sum and Mean of any number of inputs (at least one),
 * broadcast: a chain of the binary op (Mean's links are Sum's), each link
 * a named tensor; Mean then scales the sum by 1/n. */
ts_status ts_onnx_op_variadic(importer *im, node_io *io) {
    value *acc = io->in[0];
    bool mean = strcmp(im->node->op_type, "Mean") == 0;
    if (!acc) return ts_onnx_node_error(im, TS_ERR_FORMAT, "input 0 is empty; %s needs at least one input", im->node->op_type);
    if (io->n_in == 1) return ts_onnx_op_identity(im, io);
    value tmp = {0};
    for (int i = 1; i < io->n_in; i++) {
        if (!io->in[i]) return ts_onnx_node_error(im, TS_ERR_FORMAT, "input %d is empty", i);
        value *out = i + 1 == io->n_in && !mean ? &io->out[0] : &tmp;
        ts_status st = binary_family(im, mean ? "Sum" : im->node->op_type, acc, io->in[i], out, !mean);
        if (st) {
            ts_const_free(&tmp.c);
            return st;
        }
        acc = &tmp;
    }
    ts_const_free(&tmp.c); /* a folded link's */
    return mean ? ts_onnx_built(im, ts_scale(im->g, tmp.t, 1.0f / (float)io->n_in), &io->out[0]) : TS_OK;
}

/* Softmax and LogSoftmax over `axis`; before opset 13 (versions 1 and 11)
 * over the input coerced to 2-D at axis (default 1): every dim from axis
 * on at once, the same where the dims after axis are 1 (the last axis, a
 * 2-D input's default). */
ts_status ts_onnx_op_softmax(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *t = ts_onnx_as_tensor(im, io->in[0], &st);
    if (!t) return st;
    int axis;
    if ((st = ts_onnx_attr_axis(im, "axis", since(im, 13) ? -1 : 1, t->shape.ndim, false, &axis))) return st;
    for (int d = axis + 1; !since(im, 13) && d < t->shape.ndim; d++)
        if (t->shape.d[d] != 1)
            return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "before opset 13, %s normalizes over every dim from axis %d on at once (the input "
                                      "coerced to 2-D), which is available only where the dims after the axis are 1 (here dim %d is %lld); "
                                      "re-export with opset 13 or later", im->node->op_type, axis, d, (long long)t->shape.d[d]);
    bool log = strcmp(im->node->op_type, "LogSoftmax") == 0;
    return ts_onnx_built(im, log ? ts_log_softmax(im->g, t, axis) : ts_softmax(im->g, t, axis), &io->out[0]);
}

/* Where: folded on constants; a constant condition choosing a constant
 * scalar is a masked fill (attention's causal mask); else ts_where (an
 * f32 condition computed by the graph: Select). */
ts_status ts_onnx_op_where(importer *im, node_io *io) {
    value *c = io->in[0], *a = io->in[1], *b = io->in[2];
    if (is_const(c) && !c->param && is_const(a) && !a->param && is_const(b) && !b->param) return ts_onnx_op_fold(im, io);
    double s;
    ts_status st = TS_OK;
    if (is_const(c) && !c->param && ts_onnx_const_scalar(a, &s) && b->t) {
        ts_tensor *mask = ts_onnx_as_tensor(im, c, &st);
        return mask ? ts_onnx_built(im, ts_masked_fill(im->g, b->t, mask, (float)s), &io->out[0]) : st;
    }
    ts_tensor *tc = ts_onnx_as_tensor(im, c, &st);
    if (!tc) return st;
    /* bools (masks combined): chosen as they are */
    bool bool_a = a->t ? a->t->dtype == TS_BOOL : !a->param && a->c.dtype == TS_ONNX_BOOL;
    bool bool_b = b->t ? b->t->dtype == TS_BOOL : !b->param && b->c.dtype == TS_ONNX_BOOL;
    if (bool_a && bool_b && (a->t || b->t)) {
        ts_tensor *ta = ts_onnx_as_tensor(im, a, &st), *tb = ta ? ts_onnx_as_tensor(im, b, &st) : NULL;
        if (tb && tc->dtype != TS_BOOL && tc->dtype != TS_I32) tc = ts_cast(im->g, tc, TS_BOOL);
        return tb ? ts_onnx_built(im, ts_where(im->g, tc, ta, tb), &io->out[0]) : st;
    }
    /* integer values (ids, positions, a mask's counts): chosen exactly, in
     * i32 where both are, else in i64, by an i32 condition */
    bool int_a = a->t ? is_int_tensor(a->t) : !a->param && !ts_onnx_dtype_is_float(a->c.dtype);
    bool int_b = b->t ? is_int_tensor(b->t) : !b->param && !ts_onnx_dtype_is_float(b->c.dtype);
    if (int_a && int_b && (a->t || b->t)) {
        ts_tensor *ia = ts_onnx_i64_of(im, a, &st), *ib = ia ? ts_onnx_i64_of(im, b, &st) : NULL;
        if (st) return st;
        if (ib) {
            bool i32 = a->t && b->t && a->t->dtype == TS_I32 && b->t->dtype == TS_I32;
            if (i32) ia = a->t, ib = b->t;
            ts_graph *g = im->g;
            if (tc->dtype == TS_F32) tc = ts_cast(g, tc, TS_BOOL);
            if (tc && tc->dtype == TS_I64) { /* where(c == 0, b, a): non-zero is true */
                ts_tensor *z = ts_onnx_i64_scalar(im, 0, &st);
                if (!z) return st;
                return ts_onnx_built(im, ts_where(g, ts_binary(g, "Equal", tc, z), ib, ia), &io->out[0]);
            }
            return ts_onnx_built(im, ts_where(g, tc, ia, ib), &io->out[0]);
        }
    }
    /* the condition as it is (a bool, a comparison's); the values in f32 */
    ts_tensor *ta = as_f32(im, a, &st), *tb = ta ? as_f32(im, b, &st) : NULL;
    if (tc->dtype == TS_I64) tc = ts_onnx_f32_of(im, tc, &st); /* non-zero stays non-zero */
    return tb ? ts_onnx_built(im, ts_where(im->g, tc, ta, tb), &io->out[0]) : st;
}

/* ------------------------------------------------- ops composed at import
 * The ONNX ops below are built from graph ops that have their gradients,
 * devices and names already: each tensor they make is named in the node's
 * scope, its constants `<scope>/<what>:<k>`, the result after the op type
 * (ts_onnx_import_node). */
/* Activations composed of the unary and binary families: Celu alpha
 * Elu(x / alpha), Mish x tanh(softplus x), Softsign x / (1 + |x|),
 * ThresholdedRelu x where x > alpha else 0, Shrink x + bias below -lambd,
 * x - bias above lambd, else 0, Sign (x > 0) - (x < 0), NaN where x is
 * (no gradient). */
ts_status ts_onnx_op_composed_unary(importer *im, node_io *io) {
    const char *op = im->node->op_type;
    ts_status st = TS_OK;
    ts_graph *g = im->g;
    ts_tensor *x = ts_onnx_as_tensor(im, io->in[0], &st), *y;
    if (x && is_int_tensor(x) && strcmp(op, "Sign") == 0) { /* integers: (x > 0) - (x < 0) in their dtype */
        ts_tensor *zero = ts_onnx_int_scalar_like(im, x, 0, &st);
        if (!zero) return st;
        y = ts_binary(g, "Sub", ts_cast(g, ts_binary(g, "Greater", x, zero), x->dtype), ts_cast(g, ts_binary(g, "Less", x, zero), x->dtype));
        return ts_onnx_built(im, y, &io->out[0]);
    }
    x = ts_onnx_f32_of(im, x, &st);
    if (!x) return st;
    if (strcmp(op, "Celu") == 0) {
        float a = (float)ts_onnx_attr_f(im, "alpha", 1.0);
        if (!(a != 0.0f) || !isfinite(a)) return ts_onnx_node_error(im, TS_ERR_FORMAT, "attribute 'alpha' is %g; Celu needs a finite non-zero alpha", a);
        y = ts_scale(g, ts_unary(g, "Elu", ts_scale(g, x, 1.0f / a), 1.0f, 0.0f), a);
    } else if (strcmp(op, "Mish") == 0) {
        y = ts_mul(g, x, ts_tanh(g, ts_unary(g, "Softplus", x, 0.0f, 0.0f)));
    } else if (strcmp(op, "Softsign") == 0) {
        y = ts_div(g, x, ts_add(g, ts_abs(g, x), ts_onnx_scalar_constant(im, "One", 1.0f)));
    } else if (strcmp(op, "ThresholdedRelu") == 0) {
        ts_tensor *alpha = ts_onnx_scalar_constant(im, "Alpha", (float)ts_onnx_attr_f(im, "alpha", 1.0));
        y = ts_where(g, ts_binary(g, "Greater", x, alpha), x, ts_onnx_scalar_constant(im, "Zero", 0.0f));
    } else if (strcmp(op, "Shrink") == 0) {
        float lambd = (float)ts_onnx_attr_f(im, "lambd", 0.5), bias = (float)ts_onnx_attr_f(im, "bias", 0.0);
        ts_tensor *b = ts_onnx_scalar_constant(im, "Bias", bias);
        ts_tensor *above = ts_where(g, ts_binary(g, "Greater", x, ts_onnx_scalar_constant(im, "Lambd", lambd)), ts_sub(g, x, b),
                                    ts_onnx_scalar_constant(im, "Zero", 0.0f));
        y = ts_where(g, ts_binary(g, "Less", x, ts_onnx_scalar_constant(im, "NegLambd", -lambd)), ts_add(g, x, b), above);
    } else { /* Sign */
        ts_tensor *zero = ts_onnx_scalar_constant(im, "Zero", 0.0f);
        y = ts_sub(g, num(g, ts_binary(g, "Greater", x, zero)), num(g, ts_binary(g, "Less", x, zero)));
        y = ts_where(g, ts_unary(g, "IsNaN", x, 0.0f, 0.0f), x, y); /* NaN stays NaN, as torch.sign's */
    }
    return ts_onnx_built(im, y, &io->out[0]);
}

/* Clip: x within [min, max] (min first, so min > max gives max), the
 * bounds the attributes before opset 11, the optional inputs 1 and 2 from
 * then on (a graph tensor bound broadcasts and takes its gradient where it
 * is the result, as torch.clamp's). x's gradient passes where it is within
 * the bounds, ends included. */
ts_status ts_onnx_op_clip(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *y = ts_onnx_as_tensor(im, io->in[0], &st), *b[2] = {NULL, NULL};
    static const char *const names[2] = {"min", "max"};
    if (y && is_int_tensor(y) && since(im, 11)) { /* integers within integer bounds (Max, then Min), exactly in their dtype */
        for (int k = 0; k < 2 && y; k++) {
            if (io->n_in <= k + 1 || !io->in[k + 1]) continue;
            if (!(b[k] = ts_onnx_int_like(im, io->in[k + 1], y, &st)))
                return st ? st : ts_onnx_node_error(im, TS_ERR_FORMAT, "its %s ('%s') is no integer; an integer input takes bounds of its type",
                                                    names[k], io->in[k + 1]->name);
            y = ts_binary(im->g, k ? "Min" : "Max", y, b[k]);
        }
        return ts_onnx_built(im, y, &io->out[0]);
    }
    y = ts_onnx_f32_of(im, y, &st);
    if (!y) return st;
    for (int k = 0; k < 2; k++) {
        double v;
        if (!since(im, 11)) {
            if (ts_onnx_attr(im, names[k])) b[k] = ts_onnx_scalar_constant(im, k ? "Max" : "Min", (float)ts_onnx_attr_f(im, names[k], 0.0));
        } else if (io->n_in > k + 1 && io->in[k + 1]) {
            b[k] = ts_onnx_setting_scalar(im, io->in[k + 1], &v, &st) ? ts_onnx_scalar_constant(im, k ? "Max" : "Min", (float)v)
                   : st                                         ? NULL
                                                                : as_f32(im, io->in[k + 1], &st);
            if (st) return st;
        } else continue;
        if (!b[k]) return ts_graph_status(im->g) ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
        y = ts_where(im->g, ts_binary(im->g, k ? "Greater" : "Less", y, b[k]), b[k], y);
    }
    return ts_onnx_built(im, y, &io->out[0]);
}

/* PRelu: relu(x) - slope relu(-x), slope broadcast to x (numpy's rules);
 * an initializer slope is a parameter that trains. An integer x with an
 * integer slope: Max(x, 0) + Min(x, 0) * slope, exactly in its dtype. */
ts_status ts_onnx_op_prelu(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_graph *g = im->g;
    ts_tensor *x = ts_onnx_as_tensor(im, io->in[0], &st), *slope = NULL;
    if (x && is_int_tensor(x) && !io->in[1]->param && (slope = ts_onnx_int_like(im, io->in[1], x, &st))) {
        ts_tensor *zero = ts_onnx_int_scalar_like(im, x, 0, &st);
        if (!zero) return st;
        return ts_onnx_built(im, ts_binary(g, "Add", ts_binary(g, "Max", x, zero), ts_binary(g, "Mul", ts_binary(g, "Min", x, zero), slope)),
                             &io->out[0]);
    }
    if (st) return st;
    x = ts_onnx_f32_of(im, x, &st), slope = x ? as_f32(im, io->in[1], &st) : NULL;
    if (!slope) return st;
    return ts_onnx_built(im, ts_sub(g, ts_relu(g, x), ts_mul(g, ts_relu(g, ts_scale(g, x, -1.0f)), slope)), &io->out[0]);
}

/* Hardmax: 1 at the first maximum along `axis` (default -1; before opset
 * 13, 1, over the input coerced to 2-D there: available where the dims
 * after it are 1), 0 elsewhere. Piecewise constant: no gradient. */
ts_status ts_onnx_op_hardmax(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = as_f32(im, io->in[0], &st);
    int axis;
    if (!x || (st = ts_onnx_attr_axis(im, "axis", since(im, 13) ? -1 : 1, x->shape.ndim, false, &axis))) return st;
    for (int d = axis + 1; !since(im, 13) && d < x->shape.ndim; d++)
        if (x->shape.d[d] != 1)
            return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "before opset 13, Hardmax works over every dim from axis %d on at once (the input "
                                      "coerced to 2-D), which is available only where the dims after the axis are 1 (here dim %d is %lld); "
                                      "re-export with opset 13 or later", axis, d, (long long)x->shape.d[d]);
    ts_tensor *at = ts_onnx_arg_extreme(im, x, axis, false, false, &st), *pos = at ? ts_onnx_iota_along(im, x->shape.d[axis], axis, x->shape.ndim, &st) : NULL;
    return pos ? ts_onnx_built(im, num(im->g, ts_binary(im->g, "Equal", pos, at)), &io->out[0]) : st;
}

/* Swish (opset 24): x sigmoid(alpha x), one Silu op where alpha is 1;
 * SwiGLU (opset 28): Swish(A) * B, A and B of one shape. */
ts_status ts_onnx_op_swish(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = as_f32(im, io->in[0], &st), *b = NULL;
    if (!x) return st;
    bool glu = strcmp(im->node->op_type, "SwiGLU") == 0;
    if (glu && (io->n_in < 2 || !io->in[1])) return ts_onnx_node_error(im, TS_ERR_FORMAT, "input 1 (B) is required");
    if (glu && !(b = as_f32(im, io->in[1], &st))) return st;
    if (b && !ts_shape_equal(&x->shape, &b->shape)) {
        char sa[96], sb[96];
        return ts_onnx_node_error(im, TS_ERR_SHAPE, "A %s and B %s must have one shape (SwiGLU does not broadcast)", ts_shape_str(&x->shape, sa, sizeof sa),
                                  ts_shape_str(&b->shape, sb, sizeof sb));
    }
    float alpha = (float)ts_onnx_attr_f(im, "alpha", 1.0);
    ts_tensor *y = alpha == 1.0f ? ts_silu(im->g, x) : ts_mul(im->g, x, ts_sigmoid(im->g, ts_scale(im->g, x, alpha)));
    return ts_onnx_built(im, b ? ts_mul(im->g, y, b) : y, &io->out[0]);
}

/* An integer operand as an i32 graph tensor: an i32 one as it is, one
 * carried in f32 (integer arithmetic) toward zero in int32's range. */
ts_tensor *ts_onnx_as_i32(importer *im, value *v, ts_status *st) {
    ts_tensor *t = ts_onnx_as_tensor(im, v, st);
    if (!t || t->dtype == TS_I32) return t;
    if (t->dtype == TS_BOOL) return ts_cast(im->g, t, TS_I32); /* 1 or 0 */
    if (t->dtype == TS_I64) return ts_cast(im->g, t, TS_I32); /* its low 32 bits */
    return ts_unary(im->g, "CastIndex", t, -2147483648.0f, 2147483520.0f); /* the largest float below 2^31 */
}

/* BitwiseAnd, BitwiseOr, BitwiseXor, BitwiseNot (opset 18) and BitShift
 * (opset 11) on integer tensors (ts_bitwise), computed in the declared
 * integer type of input 0 (a graph input's, a Cast's or a constant's) and
 * wrapped to it; an int64 exactly (uint64 values held as their bits). */
ts_status ts_onnx_op_bitwise(importer *im, node_io *io) {
    const char *op = im->node->op_type;
    bool shift = strcmp(op, "BitShift") == 0, not_ = strcmp(op, "BitwiseNot") == 0;
    if (io->n_in != (not_ ? 1 : 2)) return ts_onnx_node_error(im, TS_ERR_FORMAT, "needs %d input%s, has %d", not_ ? 1 : 2, not_ ? "" : "s", io->n_in);
    const char *kind = not_ ? "Not" : op + strlen("Bitwise");
    if (shift) {
        static const char *const dirs[] = {"LEFT", "RIGHT"};
        const Attr *a = ts_onnx_attr(im, "direction");
        int d = a ? ts_onnx_attr_choice(a, dirs, 2) : 2;
        if (d == 2) return ts_onnx_node_error(im, TS_ERR_FORMAT, "attribute 'direction' must be \"LEFT\" or \"RIGHT\"");
        kind = d ? "ShiftRight" : "ShiftLeft";
    }
    int type = io->in[0]->c.dtype;
    ts_dtype dt;
    if (!type || ts_onnx_dtype_is_float(type) || type == TS_ONNX_BOOL || !ts_onnx_array_dtype(type, &dt))
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "takes integer tensors whose type is known at import (a graph input's, a Cast's or a "
                                  "constant's); input 0 '%s' is %s", io->in[0]->name ? io->in[0]->name : "", type ? ts_onnx_dtype_name(type) : "of a type not known here");
    ts_status st = TS_OK;
    /* in i64 where an operand is i64 or the result can leave i32 (Not of
     * an unsigned 32- or 64-bit type, a left shift in a 64-bit or unsigned
     * 32-bit one): exactly in the type's whole range; else in i32 */
    bool uns = dt == TS_U32 || dt == TS_U64, wide = ts_dtype_size(dt) == 8 || (uns && ts_dtype_size(dt) == 4);
    wide = wide && (not_ ? uns : strcmp(kind, "ShiftLeft") == 0);
    for (int i = 0; i < io->n_in; i++) wide = wide || (io->in[i] && io->in[i]->t && io->in[i]->t->dtype == TS_I64) || (io->in[i] && io->in[i]->c.iv);
    ts_tensor *a = wide ? ts_onnx_i64_of(im, io->in[0], &st) : ts_onnx_as_i32(im, io->in[0], &st);
    ts_tensor *b = not_ || !a ? NULL : wide ? ts_onnx_i64_of(im, io->in[1], &st) : ts_onnx_as_i32(im, io->in[1], &st);
    if (!a || (!not_ && !b)) return st ? st : ts_graph_status(im->g) ? ts_graph_status(im->g) :
                               ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "takes integer tensors and integer constants");
    st = ts_onnx_built(im, ts_bitwise(im->g, kind, a, b, dt), &io->out[0]);
    io->out[0].c.dtype = type;
    return st;
}
