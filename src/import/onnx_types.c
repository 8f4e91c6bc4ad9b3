/* onnx_types.c -- constants and types: Constant, the folded-only ops
 * (ConstantOfShape, Range), EyeLike, Cast and CastLike (the low-precision
 * types' rounding), BitCast. */
#include "import/onnx_ops.h"
#include "core/lowbits.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ts_status ts_onnx_op_constant(importer *im, node_io *io) {
    const Attr *a;
    ts_const *c = &io->out[0].c;
    if ((a = ts_onnx_attr(im, "value")) && a->t) return ts_onnx_tensor_to_const(im, a->t, "the Constant's value", c);
    if ((a = ts_onnx_attr(im, "value_float")) && a->has_f) return ts_onnx_fold_result(im, ts_const_fill(&(ts_shape){0}, TS_ONNX_FLOAT, a->f, c));
    if ((a = ts_onnx_attr(im, "value_int")) && a->has_i) {
        ts_status st = ts_const_fill(&(ts_shape){0}, TS_ONNX_INT64, (double)a->i, c);
        return ts_onnx_fold_result(im, st ? st : ts_const_set_exact(c, &a->i, 1));
    }
    if ((a = ts_onnx_attr(im, "value_floats")) || (a = ts_onnx_attr(im, "value_ints"))) {
        bool fl = a->n_floats > 0 || strcmp(a->name, "value_floats") == 0;
        size_t n = fl ? a->n_floats : a->n_ints;
        ts_status st = ts_const_fill(&(ts_shape){.ndim = 1, .d = {(int64_t)n}}, fl ? TS_ONNX_FLOAT : TS_ONNX_INT64, 0, c);
        for (size_t i = 0; !st && i < n; i++) c->v[i] = fl ? a->floats[i] : (double)a->ints[i];
        if (!st && !fl) st = ts_const_set_exact(c, a->ints, (int64_t)n);
        return ts_onnx_fold_result(im, st);
    }
    if ((a = ts_onnx_attr(im, "sparse_value")) || (a = ts_onnx_attr(im, "value_string")) || (a = ts_onnx_attr(im, "value_strings")))
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "a Constant given as '%s' is not available (%s); 'value', 'value_float(s)' and "
                                  "'value_int(s)' are", a->name, a->name[0] == 's' ? "sparse tensors" : "strings");
    return ts_onnx_node_error(im, TS_ERR_FORMAT, "a Constant needs one of the attributes 'value', 'value_float(s)', 'value_int(s)'");
}

/* Folded-only ops: a thin row each over the constant kernels. */
ts_status ts_onnx_op_fold(importer *im, node_io *io) {
    ts_status st = ts_onnx_need_consts(im, io);
    if (st) return st;
    const ts_const *in[MAX_NODE_IO];
    for (int i = 0; i < io->n_in; i++) in[i] = io->in[i] ? &io->in[i]->c : NULL;
    ts_const_attrs at = {0};
    at.axis = ts_onnx_attr_i(im, "axis", 0); /* range-checked by the kernels */
    if ((st = ts_onnx_attr_int32(im, "to", 0, 0, TS_ONNX_BFLOAT16, &at.to))) return st;
    ts_onnx_attr_ints(im, "perm", &at.perm, &at.n_perm);
    const Attr *v = ts_onnx_attr(im, "value");
    ts_const fillv = {0};
    if (v && v->t) {
        st = ts_onnx_tensor_to_const(im, v->t, "the fill value", &fillv);
        if (st) return st;
        at.fill = &fillv;
    }
    st = ts_const_op(im->node->op_type, in, io->n_in, &at, &io->out[0].c);
    ts_const_free(&fillv);
    return ts_onnx_fold_result(im, st);
}

/* The TS_LOWBITS_ flags of a Cast's opset-19 `saturate` (default 1: a
 * float8 value past the largest finite one clamps to it) and opset-24
 * `round_mode` (float8e8m0: "up", the default, "down" or "nearest"). */
static ts_status lowbits_mode(importer *im, int *mode) {
    int64_t sat = ts_onnx_attr_i(im, "saturate", 1);
    if (sat != 0 && sat != 1) return ts_onnx_node_error(im, TS_ERR_FORMAT, "attribute saturate is %lld; it is 0 or 1", (long long)sat);
    *mode = sat ? TS_LOWBITS_SATURATE : 0;
    static const char *const modes[] = {"up", "down", "nearest"};
    const Attr *rm = ts_onnx_attr(im, "round_mode");
    int k = rm && rm->has_s ? ts_onnx_attr_choice(rm, modes, 3) : 0;
    if (k == 3)
        return ts_onnx_node_error(im, TS_ERR_FORMAT, "round_mode '%.*s' is not one of up, down, nearest", (int)rm->s.len, (const char *)rm->s.data);
    *mode |= k == 1 ? TS_LOWBITS_ROUND_DOWN : k == 2 ? TS_LOWBITS_ROUND_NEAREST : 0;
    return TS_OK;
}

/* Cast: on graph tensors, or folded; to one of the types read here. The
 * low-precision types (float8, float4, e8m0, int4, uint4, int2, uint2)
 * are held in f32: a cast rounds the values onto their grid (CastLowbits,
 * the gradient straight through) by `saturate` and `round_mode`. */
static ts_status cast_to(importer *im, node_io *io, int to) {
    ts_status st = TS_OK;
    if (!ts_onnx_dtype_size(to) || (to > TS_ONNX_BFLOAT16 && !ts_lowbits_is(to)))
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "Cast to %s (ONNX data type %d) is not available: tensorscope casts to float, double, "
                                  "float16, bfloat16, bool, the integer types and ONNX's float8, float4, int4 and int2 types",
                                  ts_onnx_dtype_name(to), to);
    int mode = 0;
    if (ts_lowbits_is(to) && (st = lowbits_mode(im, &mode))) return st;
    /* a graph tensor keeps its values: f32 carries float and double, i32
     * the integer ids (LayerNormalization's stash cast, index casts) */
    const ts_tensor *t = io->in[0] ? io->in[0]->t : NULL;
    /* an i64 tensor of another declared type (uint32 or uint64 to int64,
     * int64 to uint64: the same values or bits) is copied, a tensor of
     * its own, returned in its own type where both are outputs */
    int from = io->in[0] ? io->in[0]->c.dtype : 0;
    if (t && t->dtype == TS_I64 && from && from != to && (to == TS_ONNX_INT64 || to == TS_ONNX_UINT64)) {
        st = ts_onnx_built(im, ts_graph_convert(im->g, t, t->dtype), &io->out[0]);
        io->out[0].c.dtype = to;
        return st;
    }
    if (t && ((t->dtype == TS_F32 && (to == TS_ONNX_FLOAT || to == TS_ONNX_DOUBLE)) ||
              (t->dtype == TS_I32 && (to == TS_ONNX_INT32 || to == TS_ONNX_INT64)) || (t->dtype == TS_I64 && to == TS_ONNX_INT64) ||
              (t->dtype == TS_BOOL && to == TS_ONNX_BOOL)))
        return ts_onnx_op_identity(im, io);
    /* to bool (ts_cast): true where non-zero, NaN included */
    if (t && to == TS_ONNX_BOOL && (t->dtype == TS_F32 || t->dtype == TS_I32 || t->dtype == TS_I64))
        return ts_onnx_built(im, ts_cast(im->g, io->in[0]->t, TS_BOOL), &io->out[0]);
    /* to the integer types in integers (ts_cast): an integer tensor's
     * values exactly, wrapped to the type as ONNX's Cast does (int64 300
     * as int8 is 44, -1 as uint32 4294967295, held in i64); a float
     * toward zero to int64 and int32; a bool 1 or 0 */
    ts_dtype int_dt;
    bool int_type = !ts_onnx_dtype_is_float(to) && !ts_lowbits_is(to) && to != TS_ONNX_BOOL && ts_onnx_array_dtype(to, &int_dt);
    if (t && (((is_int_tensor(t) || t->dtype == TS_BOOL) && int_type) || (t->dtype == TS_F32 && (to == TS_ONNX_INT64 || to == TS_ONNX_INT32)))) {
        st = ts_onnx_built(im, ts_cast(im->g, io->in[0]->t, t->dtype == TS_F32 ? (to == TS_ONNX_INT64 ? TS_I64 : TS_I32) : int_dt), &io->out[0]);
        io->out[0].c.dtype = to; /* the integer type the bitwise ops compute in */
        return st;
    }
    /* between kinds, the values carried in f32: integers toward zero,
     * bools as 1 where non-zero, integers and bools as floats */
    bool to_int = !ts_onnx_dtype_is_float(to) && !ts_lowbits_is(to) && to != TS_ONNX_BOOL, to_bool = to == TS_ONNX_BOOL, to_float = to == TS_ONNX_FLOAT || to == TS_ONNX_DOUBLE;
    bool to_half = to == TS_ONNX_FLOAT16 || to == TS_ONNX_BFLOAT16;
    if (t && (to_int || to_bool || to_float || to_half || ts_lowbits_is(to))) {
        ts_tensor *f = as_f32(im, io->in[0], &st);
        if (!f) return st;
        if (to_float) return ts_onnx_built(im, f, &io->out[0]);
        if (ts_lowbits_is(to)) {
            st = ts_onnx_built(im, ts_unary(im->g, "CastLowbits", f, (float)to, (float)mode), &io->out[0]);
            io->out[0].c.dtype = to; /* the type a CastLike reads */
            return st;
        }
        /* float16, bfloat16: rounded onto its values, held in f32, which
         * the ops after compute in (as onnxruntime's CPU provider does
         * where it has no 16-bit kernel) */
        if (to_half) return ts_onnx_built(im, ts_cast(im->g, f, to == TS_ONNX_FLOAT16 ? TS_F16 : TS_BF16), &io->out[0]);
        st = ts_onnx_built(im, ts_unary(im->g, to_int ? "CastInt" : "CastBool", f, 0.0f, 0.0f), &io->out[0]);
        io->out[0].c.dtype = to; /* the integer type the bitwise ops compute in */
        return st;
    }
    node_io one = *io; /* CastLike's target is read for its type only */
    one.n_in = 1;
    if ((st = ts_onnx_need_consts(im, &one))) return st;
    ts_const_attrs at = {.to = to, .lowbits_mode = mode};
    const ts_const *in[1] = {&io->in[0]->c};
    return ts_onnx_fold_result(im, ts_const_op("Cast", in, 1, &at, &io->out[0].c));
}

ts_status ts_onnx_op_cast(importer *im, node_io *io) {
    int to;
    ts_status st = ts_onnx_attr_int32(im, "to", 0, 0, INT32_MAX, &to);
    if (st) return st;
    if (!ts_onnx_attr(im, "to")) return ts_onnx_node_error(im, TS_ERR_FORMAT, "attribute 'to' is required");
    return cast_to(im, io, to);
}

/* CastLike: a Cast to the type of input 1 (a graph tensor's: float16 or
 * bfloat16 for a cast's output of those, float for f32, int64 for i32). */
ts_status ts_onnx_op_cast_like(importer *im, node_io *io) {
    const value *like = io->in[1];
    if (!like) return ts_onnx_node_error(im, TS_ERR_FORMAT, "input 1 (target_type) is empty");
    if (!like->t || ts_lowbits_is(like->c.dtype)) return cast_to(im, io, like->c.dtype);
    ts_dtype p = ts_tensor_precision(like->t);
    if (is_int_tensor(like->t) && like->c.dtype) return cast_to(im, io, like->c.dtype); /* its declared integer type */
    return cast_to(im, io, p == TS_F16 ? TS_ONNX_FLOAT16 : p == TS_BF16 ? TS_ONNX_BFLOAT16 : like->t->dtype == TS_F32 ? TS_ONNX_FLOAT
                                                                                  : like->t->dtype == TS_BOOL ? TS_ONNX_BOOL : TS_ONNX_INT64);
}

/* Range (folded): from opset 27 on, a stash_type other than 1 (float)
 * asks a float16 or bfloat16 range to be summed in another type, which
 * folding (in double) does not do: refused for them. */
ts_status ts_onnx_op_range(importer *im, node_io *io) {
    int stash = 1;
    ts_status st = ts_onnx_attr_int32(im, "stash_type", 1, INT32_MIN, INT32_MAX, &stash);
    if (st) return st;
    int dt = is_const(io->in[0]) ? io->in[0]->c.dtype : 0;
    if (stash != 1 && (dt == TS_ONNX_FLOAT16 || dt == TS_ONNX_BFLOAT16))
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "stash_type %d (a %s range summed in %s) is not available; stash_type 1 (float) is",
                                  stash, ts_onnx_dtype_name(dt), ts_onnx_dtype_name(stash));
    return ts_onnx_op_fold(im, io);
}

/* EyeLike: a constant of the input's (static) 2-D shape, ones on the
 * diagonal k, in `dtype` (default the input's type). */
ts_status ts_onnx_op_eye_like(importer *im, node_io *io) {
    const ts_shape *s = shape_of(io->in[0]);
    int64_t k;
    int dt;
    ts_status st = ts_onnx_attr_int(im, "k", 0, INT64_MIN / 2, INT64_MAX / 2, &k);
    if (st) return st;
    if (s->ndim != 2) return ts_onnx_node_error(im, TS_ERR_SHAPE, "takes a 2-D input; it has %d dimensions", s->ndim);
    int like = io->in[0]->t ? (io->in[0]->t->dtype == TS_F32 ? TS_ONNX_FLOAT : TS_ONNX_INT64) : io->in[0]->c.dtype;
    if ((st = ts_onnx_attr_int32(im, "dtype", like, 0, INT32_MAX, &dt))) return st;
    if (!ts_onnx_dtype_size(dt)) return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "dtype %d (%s) is not one tensorscope reads", dt, ts_onnx_dtype_name(dt));
    ts_const *c = &io->out[0].c;
    if ((st = ts_const_fill(s, dt, 0.0, c))) return ts_onnx_fold_result(im, st);
    for (int64_t i = 0; i < s->d[0]; i++)
        if (i + k >= 0 && i + k < s->d[1]) c->v[i * s->d[1] + i + k] = 1.0;
    return TS_OK;
}

/* BitCast (opset 26) between integer (and bool) types of one width: the
 * bits read in the target type, a Bitwise Or of the value with itself
 * wrapped to it (int8 -1 is uint8 255). Between floats and integers the
 * bits are not those of a value held in f32 or i32: refused. */
ts_status ts_onnx_op_bitcast(importer *im, node_io *io) {
    int to, from = io->in[0]->c.dtype;
    ts_status st = ts_onnx_attr_int32(im, "to", 0, 0, INT32_MAX, &to);
    if (st) return st;
    if (!ts_onnx_attr(im, "to")) return ts_onnx_node_error(im, TS_ERR_FORMAT, "attribute 'to' is required");
    ts_dtype dt_from, dt_to;
    bool int_from = from && !ts_onnx_dtype_is_float(from) && ts_onnx_array_dtype(from, &dt_from);
    bool int_to = !ts_onnx_dtype_is_float(to) && to != TS_ONNX_BOOL && ts_onnx_array_dtype(to, &dt_to);
    if (!int_from || !int_to)
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "a bit cast from %s to %s is not available; between integer and bool types of one width it is "
                                  "(float bits are not those of the values tensorscope holds)",
                                  from ? ts_onnx_dtype_name(from) : io->in[0]->t && io->in[0]->t->dtype == TS_F32 ? "a float type" : "a type not known here",
                                  ts_onnx_dtype_name(to));
    if ((dt_from == TS_BOOL ? 1 : ts_dtype_size(dt_from)) != ts_dtype_size(dt_to))
        return ts_onnx_node_error(im, TS_ERR_FORMAT, "%s and %s differ in width; BitCast keeps the bits", ts_onnx_dtype_name(from), ts_onnx_dtype_name(to));
    bool wide = (io->in[0]->t && io->in[0]->t->dtype == TS_I64) || io->in[0]->c.iv; /* every bit of an int64 */
    ts_tensor *a = wide ? ts_onnx_i64_of(im, io->in[0], &st) : ts_onnx_as_i32(im, io->in[0], &st);
    if (!a) return st ? st : ts_graph_status(im->g);
    st = ts_onnx_built(im, ts_bitwise(im->g, "Or", a, a, dt_to), &io->out[0]);
    io->out[0].c.dtype = to;
    return st;
}
