/* graph_tensor.c -- builders of the tensor and transformer ops: argument
 * checks that need the caller's view (negative dims, axis lists), then one
 * node through ts_graph_add_node whose shape rule does the rest. */
#include "graph/graph.h"
#include "core/lowbits.h"
#include "graph/ops.h"

#include <stdio.h>
#include <string.h>

typedef ts_node_attrs attrs;

static ts_tensor *node(ts_graph *g, ts_op op, int n, const ts_tensor *const *ins, const attrs *a) { return ts_graph_node(g, op, ins, n, a); }
static ts_tensor *unary(ts_graph *g, ts_op op, ts_tensor *x, const attrs *a) { return node(g, op, 1, (const ts_tensor *[]){x}, a); }

/* dim (may be negative) of x normalised to 0..ndim-1, or -1 after recording an error */
static int norm_dim(ts_graph *g, const char *what, const ts_tensor *x, int dim) {
    if (!g || g->sticky) return -1;
    if (!x) {
        ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "%s: input is NULL (an earlier builder call failed?)", what);
        return -1;
    }
    int d = dim < 0 ? dim + x->shape.ndim : dim;
    if (d < 0 || d >= x->shape.ndim) {
        ts_graph_fail(g, TS_ERR_SHAPE, "%s: dim %d is out of range for '%s' (%d dims)", what, dim, x->name, x->shape.ndim);
        return -1;
    }
    return d;
}

ts_tensor *ts_div(ts_graph *g, ts_tensor *a, ts_tensor *b) { return node(g, TS_OP_DIV, 2, (const ts_tensor *[]){a, b}, NULL); }
ts_tensor *ts_exp(ts_graph *g, ts_tensor *x) { return unary(g, TS_OP_EXP, x, NULL); }
ts_tensor *ts_sqrt(ts_graph *g, ts_tensor *x) { return unary(g, TS_OP_SQRT, x, NULL); }
ts_tensor *ts_erf(ts_graph *g, ts_tensor *x) { return unary(g, TS_OP_ERF, x, NULL); }
ts_tensor *ts_abs(ts_graph *g, ts_tensor *x) { return unary(g, TS_OP_ABS, x, NULL); }
ts_tensor *ts_pow(ts_graph *g, ts_tensor *x, float exponent) { return unary(g, TS_OP_POW, x, &(attrs){.fattr = {exponent}}); }
ts_tensor *ts_gelu(ts_graph *g, ts_tensor *x, int tanh_approx) { return unary(g, TS_OP_GELU, x, &(attrs){.attr = {tanh_approx != 0}}); }
ts_tensor *ts_silu(ts_graph *g, ts_tensor *x) { return unary(g, TS_OP_SILU, x, NULL); }

/* The op of the family [first, last] named `op` (the op table's name), or
 * TS_OP_COUNT after recording an error that lists the family's names. */
static ts_op family_op(ts_graph *g, const char *what, const char *op, ts_op first, ts_op last) {
    if (!g || g->sticky) return TS_OP_COUNT;
    for (int o = first; op && o <= (int)last; o++)
        if (strcmp(ts_op_get((ts_op)o)->name, op) == 0) return (ts_op)o;
    char names[512];
    size_t used = 0;
    for (int o = first; o <= (int)last && used < sizeof names; o++)
        used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", o > (int)first ? ", " : "", ts_op_get((ts_op)o)->name);
    ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "%s: '%s' is no op of the family; it has %s", what, op ? op : "(null)", names);
    return TS_OP_COUNT;
}

/* ---- integer tensors (i32, i64): TS_OP_INT_ARITH, TS_OP_CONVERT, TS_OP_INT_CUMSUM */

static bool is_int(const ts_tensor *t) { return t && (t->dtype == TS_I32 || t->dtype == TS_I64); }

static const char *const int_kinds[TS_INT_COUNT] = {"Add", "Sub", "Mul", "Div", "FloorDiv", "Mod", "FMod", "Min", "Max",
                                                    "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Neg", "Abs", "Pow",
                                                    "PowF32", "PowF64"}; /* the last two by float exponents: not looked up by name */

static void set_int_node(ts_tensor *t, const void *arg) {
    const int64_t *a = arg; /* attr[0..2], then the output dtype */
    for (int i = 0; i < 3; i++) t->attr[i] = a[i];
    t->dtype = (ts_dtype)a[3];
}

/* Whether `type` is an integer type values can be declared of (i8 to
 * u64), as ts_bitwise, ts_binary_typed and ts_cast_typed take it; else an
 * error that says which. On i32 tensors a uint32 or uint64 is refused:
 * their values are held in i64 (ts_cast to TS_U32, TS_U64). */
static bool declared_type(ts_graph *g, const char *what, ts_dtype type, const ts_tensor *x) {
    bool uns = type == TS_U8 || type == TS_U16 || type == TS_U32 || type == TS_U64;
    if (!uns && type != TS_I8 && type != TS_I16 && type != TS_I32 && type != TS_I64) {
        ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "%s: type %s is no integer type; give the values' declared type (i8, i16, i32, i64, u8, "
                      "u16, u32 or u64)", what, ts_dtype_name(type));
        return false;
    }
    if (x && x->dtype == TS_I32 && (type == TS_U32 || type == TS_U64)) {
        ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "%s: '%s' is i32, which holds no %s values; they are held in i64 (ts_cast the tensor to %s)",
                      what, x->name, ts_dtype_name(type), ts_dtype_name(type));
        return false;
    }
    return true;
}

/* The integer op `op` (int_kinds) of a, b (b: a for Neg and Abs), both of
 * one integer dtype, computed in the declared integer type `type` (a's
 * dtype: as held); NULL where op is none of them (the caller's family
 * then says which names it has). */
static ts_tensor *int_arith(ts_graph *g, const char *what, const char *op, ts_tensor *a, ts_tensor *b, bool unary_op, ts_dtype type) {
    int kind = 0;
    while (kind < TS_INT_POW_F32 && (!op || strcmp(op, int_kinds[kind]) != 0)) kind++;
    bool unary_kind = kind == TS_INT_NEG || kind == TS_INT_ABS;
    if (kind == TS_INT_POW_F32 || unary_kind != unary_op) {
        char names[256];
        size_t used = 0;
        for (int k = 0; k < TS_INT_POW_F32 && used < sizeof names; k++)
            if ((k == TS_INT_NEG || k == TS_INT_ABS) == unary_op) used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "", int_kinds[k]);
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "%s: '%s' is no op on integer tensors; they take %s", what, op ? op : "(null)", names);
    }
    if (kind == TS_INT_POW && b && b->dtype == TS_F32) { /* by a float exponent: in double, the base's dtype out */
        int64_t arg[4] = {TS_INT_POW_F32, type, 0, a->dtype};
        return ts_graph_add_node(g, TS_OP_INT_ARITH, (const ts_tensor *[]){a, b}, 2, NULL, set_int_node, arg);
    }
    if (!is_int(b))
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "%s %s: '%s' is %s and '%s' is %s; integer ops take two integer tensors of one dtype "
                             "(convert one with ts_cast)", what, op, a->name, ts_dtype_name(a->dtype), b ? b->name : "(null)", b ? ts_dtype_name(b->dtype) : "none");
    if (a->dtype != b->dtype)
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "%s %s: '%s' is %s and '%s' is %s; convert one with ts_cast (integers of two widths "
                             "are not mixed silently)", what, op, a->name, ts_dtype_name(a->dtype), b->name, ts_dtype_name(b->dtype));
    bool compare = kind >= TS_INT_EQUAL && kind <= TS_INT_GREATER_EQUAL;
    int64_t arg[4] = {kind, type, 0, compare ? TS_BOOL : a->dtype};
    return ts_graph_add_node(g, TS_OP_INT_ARITH, (const ts_tensor *[]){a, b}, 2, NULL, set_int_node, arg);
}

ts_tensor *ts_graph_int_pow_double(ts_graph *g, ts_tensor *a, ts_tensor *bits, ts_dtype type) {
    if (!g || g->sticky) return NULL;
    if (!is_int(a) || !bits || bits->dtype != TS_I64)
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "an integer Pow by double exponents takes an i32 or i64 base and the exponents' bits in i64");
    int64_t arg[4] = {TS_INT_POW_F64, type, 0, a->dtype};
    return ts_graph_add_node(g, TS_OP_INT_ARITH, (const ts_tensor *[]){a, bits}, 2, NULL, set_int_node, arg);
}

ts_tensor *ts_graph_int_resize(ts_graph *g, ts_tensor *x, ts_tensor *taps, ts_tensor *weights, int levels, const int *dims, const bool *pairwise,
                               const int *n_taps, const int64_t *out, ts_dtype type) {
    if (!g || g->sticky) return NULL;
    if (levels < 1 || levels > TS_MAX_DIMS) return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "an integer Resize takes 1 to %d levels, not %d", TS_MAX_DIMS, levels);
    if (!x || (x->dtype != TS_I32 && x->dtype != TS_I64) || !taps || taps->dtype != TS_I32 || !weights || weights->dtype != TS_I64)
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "an integer Resize takes an i32 or i64 x, i32 taps and i64 weights");
    ts_node_attrs a = {.iparam = (int)type, .dtype = x->dtype};
    for (int L = 0; L < levels; L++) {
        if (n_taps[L] < 1 || n_taps[L] > 0xffff || out[L] < 1)
            return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "an integer Resize level takes 1 to 65535 taps and a positive size, not %d and %lld", n_taps[L],
                                 (long long)out[L]);
        a.attr[2 * L] = dims[L] | (pairwise[L] ? 256 : 0), a.attr[2 * L + 1] = n_taps[L] | out[L] << 16;
    }
    return ts_graph_node(g, TS_OP_INT_RESIZE, (const ts_tensor *[]){x, taps, weights}, 3, &a);
}

ts_tensor *ts_graph_indices(ts_graph *g, ts_tensor *x) {
    if (!g || g->sticky) return NULL;
    if (!x || (x->dtype != TS_F32 && x->dtype != TS_I64))
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "indices of '%s': f32 or i64 values are made indices", x ? x->name : "(null)");
    int64_t arg[4] = {TS_I32, 1, 0, TS_I32};
    return ts_graph_add_node(g, TS_OP_CONVERT, (const ts_tensor *[]){x}, 1, NULL, set_int_node, arg);
}

ts_tensor *ts_graph_convert(ts_graph *g, const ts_tensor *x, ts_dtype to) {
    int64_t arg[4] = {to, 0, 0, to};
    return ts_graph_add_node(g, TS_OP_CONVERT, &x, 1, NULL, set_int_node, arg);
}

ts_tensor *ts_cumsum(ts_graph *g, ts_tensor *x, int axis, int exclusive, int reverse) {
    int d = norm_dim(g, "ts_cumsum", x, axis);
    if (d < 0) return NULL;
    if (!is_int(x))
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_cumsum: '%s' is %s; ts_cumsum sums i32 and i64 tensors (exactly, wrapping as "
                             "the integer type does)", x->name, ts_dtype_name(x->dtype));
    int64_t arg[4] = {d, exclusive != 0, reverse != 0, x->dtype};
    return ts_graph_add_node(g, TS_OP_INT_CUMSUM, (const ts_tensor *[]){x}, 1, NULL, set_int_node, arg);
}

ts_tensor *ts_unary(ts_graph *g, const char *op, ts_tensor *x, float alpha, float beta) {
    if (g && !g->sticky && is_int(x) && op && (strcmp(op, "Neg") == 0 || strcmp(op, "Abs") == 0)) return int_arith(g, "ts_unary", op, x, x, true, x->dtype);
    ts_op o = family_op(g, "ts_unary", op, TS_OP_CEIL, TS_OP_CAST_INDEX);
    if (o == TS_OP_CAST_LOWBITS && (!ts_lowbits_is((int)alpha) || alpha != (float)(int)alpha || !(beta >= 0.0f && beta <= 7.0f) ||
                                    beta != (float)(int)beta))
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_unary: CastLowbits takes the ONNX type number as alpha (17 to 26: "
                             "float8e4m3fn ... int2) and its rounding flags as beta (0 to 7), not %g and %g", (double)alpha, (double)beta);
    if (o == TS_OP_CAST_INDEX && !(alpha >= -2147483648.0f && beta < 2147483648.0f && alpha <= beta && alpha == (float)(int64_t)alpha &&
                                   beta == (float)(int64_t)beta))
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_unary: CastIndex clamps to [alpha, beta], two integers in int32's range with "
                             "alpha <= beta, not %g and %g", (double)alpha, (double)beta);
    return o == TS_OP_COUNT ? NULL : unary(g, o, x, &(attrs){.fattr = {alpha, beta}});
}

ts_tensor *ts_binary(ts_graph *g, const char *op, ts_tensor *a, ts_tensor *b) {
    if (g && !g->sticky && is_int(a)) return int_arith(g, "ts_binary", op, a, b, false, a->dtype);
    ts_op o = family_op(g, "ts_binary", op, TS_OP_POWER, TS_OP_XOR);
    return o == TS_OP_COUNT ? NULL : node(g, o, 2, (const ts_tensor *[]){a, b}, NULL);
}

ts_tensor *ts_binary_typed(ts_graph *g, const char *op, ts_tensor *a, ts_tensor *b, ts_dtype type) {
    if (!g || g->sticky) return NULL;
    if (!is_int(a))
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_binary_typed %s: '%s' is %s; it takes integer tensors (i32 or i64; ts_binary "
                             "takes the others)", op ? op : "(null)", a ? a->name : "(null)", a ? ts_dtype_name(a->dtype) : "none");
    return declared_type(g, "ts_binary_typed", type, a) ? int_arith(g, "ts_binary_typed", op, a, b, false, type) : NULL;
}

ts_tensor *ts_bitwise(ts_graph *g, const char *op, ts_tensor *a, ts_tensor *b, ts_dtype type) {
    static const char *const kinds[TS_BITWISE_COUNT] = {"And", "Or", "Xor", "Not", "ShiftLeft", "ShiftRight"};
    if (!g || g->sticky) return NULL;
    int kind = 0;
    while (kind < TS_BITWISE_COUNT && (!op || strcmp(op, kinds[kind]) != 0)) kind++;
    if (kind == TS_BITWISE_COUNT)
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_bitwise: '%s' is no bitwise op; use And, Or, Xor, Not, ShiftLeft or ShiftRight",
                             op ? op : "(null)");
    bool uns = type == TS_U8 || type == TS_U16 || type == TS_U32 || type == TS_U64;
    if (!declared_type(g, "ts_bitwise", type, NULL)) return NULL;
    if ((kind == TS_BITWISE_NOT) != (b == NULL))
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_bitwise: %s takes %s", op, kind == TS_BITWISE_NOT ? "one tensor (b NULL)" : "two tensors");
    if (!b) b = a;
    if (!is_int(a) || !is_int(b) || a->dtype != b->dtype)
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_bitwise %s: '%s' is %s and '%s' is %s; bitwise ops take i32 or i64 tensors of one dtype "
                             "(convert one with ts_cast)", op, a ? a->name : "(null)", a ? ts_dtype_name(a->dtype) : "none", b ? b->name : "(null)",
                             b ? ts_dtype_name(b->dtype) : "none");
    int bits = (int)ts_dtype_size(type) * 8;
    if (a->dtype == TS_I32 && ((kind == TS_BITWISE_NOT && uns && bits >= 32) || (kind == TS_BITWISE_SHIFT_LEFT && (bits == 64 || (uns && bits == 32)))))
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_bitwise: %s in %s can give values an i32 tensor does not hold; give i64 tensors "
                             "(ts_cast), whose results are exact in every integer type", op, ts_dtype_name(type));
    int64_t arg[4] = {kind, bits, uns, a->dtype};
    return ts_graph_add_node(g, TS_OP_BITWISE, (const ts_tensor *[]){a, b}, 2, NULL, set_int_node, arg);
}

ts_tensor *ts_embedding(ts_graph *g, ts_tensor *weight, ts_tensor *indices) {
    return node(g, TS_OP_EMBEDDING, 2, (const ts_tensor *[]){weight, indices}, NULL);
}

ts_tensor *ts_gather(ts_graph *g, ts_tensor *data, ts_tensor *indices, int axis) {
    int d = norm_dim(g, "ts_gather", data, axis);
    if (d < 0) return NULL;
    return node(g, TS_OP_GATHER, 2, (const ts_tensor *[]){data, indices}, &(attrs){.attr = {d}});
}

ts_tensor *ts_gather_elements(ts_graph *g, ts_tensor *data, ts_tensor *indices, int axis) {
    int d = norm_dim(g, "ts_gather_elements", data, axis);
    if (d < 0) return NULL;
    return node(g, TS_OP_GATHER_ELEMENTS, 2, (const ts_tensor *[]){data, indices}, &(attrs){.attr = {d}});
}

static void set_grid(ts_tensor *t, const void *arg) {
    t->attr[0] = *(const ts_dtype *)arg;
    t->grid = *(const ts_dtype *)arg;
}

ts_tensor *ts_graph_cast_named(ts_graph *g, const ts_tensor *x, ts_dtype dtype, const char *name) {
    return ts_graph_add_node(g, TS_OP_CAST, &x, 1, name, set_grid, &dtype);
}

ts_tensor *ts_cast(ts_graph *g, ts_tensor *x, ts_dtype dtype) {
    if (!g || g->sticky) return NULL;
    /* the narrow integer types: wrapped, held in i32 (8 and 16 bits) or i64 (u32, u64) */
    bool narrow = dtype == TS_I8 || dtype == TS_I16 || dtype == TS_U8 || dtype == TS_U16 || dtype == TS_U32 || dtype == TS_U64;
    if (dtype != TS_BF16 && dtype != TS_F16 && dtype != TS_F32 && dtype != TS_I32 && dtype != TS_I64 && !narrow && dtype != TS_BOOL)
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_cast: casts to bf16, f16, f32, i32, i64, i8, i16, u8, u16, u32, u64 or bool, not %s",
                             ts_dtype_name(dtype));
    /* bool: 1 where non-zero (NaN too), and from bool 1 or 0 */
    if (x && x->dtype == TS_F32 && dtype == TS_BOOL) return unary(g, TS_OP_CAST_BOOL, x, NULL);
    if (x && x->dtype == TS_BOOL && (dtype == TS_BF16 || dtype == TS_F16)) x = ts_cast(g, x, TS_F32);
    if (x && (is_int(x) || x->dtype == TS_BOOL || dtype == TS_I32 || dtype == TS_I64 || narrow || dtype == TS_BOOL)) {
        if (x->dtype != TS_F32 && x->dtype != TS_BOOL && !is_int(x))
            return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_cast: '%s' is %s; integer and bool casts take f32, i32, i64 or bool tensors",
                                 x->name, ts_dtype_name(x->dtype));
        if (dtype == TS_BF16 || dtype == TS_F16) x = ts_cast(g, x, TS_F32); /* the integers' values, then rounded */
        if (!x || x->dtype == dtype) return x;
        if (x->dtype == TS_F32 && (dtype == TS_BF16 || dtype == TS_F16)) return ts_graph_cast_named(g, x, dtype, NULL);
        ts_dtype held = !narrow ? dtype : dtype == TS_U32 || dtype == TS_U64 ? TS_I64 : TS_I32;
        if (dtype == TS_U64 && x->dtype == TS_I64) return x; /* the same bits */
        int64_t arg[4] = {dtype, 0, 0, held};
        return ts_graph_add_node(g, TS_OP_CONVERT, (const ts_tensor *[]){x}, 1, NULL, set_int_node, arg);
    }
    return ts_graph_cast_named(g, x, dtype, NULL);
}

ts_tensor *ts_cast_typed(ts_graph *g, ts_tensor *x, ts_dtype from, ts_dtype dtype) {
    if (!g || g->sticky) return NULL;
    if (!is_int(x))
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_cast_typed: '%s' is %s; it casts integer tensors (i32 or i64; ts_cast casts "
                             "the others)", x ? x->name : "(null)", x ? ts_dtype_name(x->dtype) : "none");
    if (!declared_type(g, "ts_cast_typed", from, x)) return NULL;
    bool to_float = dtype == TS_F32 || dtype == TS_BF16 || dtype == TS_F16;
    if (from != TS_U64 || !to_float) return ts_cast(g, x, dtype); /* the values as held are the values */
    int64_t arg[4] = {TS_F32, 0, from, TS_F32}; /* a uint64's bits read unsigned */
    ts_tensor *f = ts_graph_add_node(g, TS_OP_CONVERT, (const ts_tensor *[]){x}, 1, NULL, set_int_node, arg);
    return dtype == TS_F32 || !f ? f : ts_cast(g, f, dtype);
}

ts_dtype ts_tensor_precision(const ts_tensor *t) { return t ? t->grid : TS_F32; }

ts_tensor *ts_group_norm(ts_graph *g, ts_tensor *x, ts_tensor *weight, ts_tensor *bias, int groups, float eps) {
    if (g && !g->sticky && !(eps >= 0.0f)) return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_group_norm: eps must be >= 0");
    if (g && !g->sticky && groups < 1) return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_group_norm: groups must be >= 1 (got %d)", groups);
    return node(g, TS_OP_GROUP_NORM, 3, (const ts_tensor *[]){x, weight, bias}, &(attrs){.attr = {groups}, .fattr = {eps}});
}

ts_tensor *ts_layer_norm(ts_graph *g, ts_tensor *x, ts_tensor *weight, ts_tensor *bias, int ndims, float eps) {
    if (g && !g->sticky && !(eps >= 0.0f)) return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_layer_norm: eps must be >= 0");
    return node(g, TS_OP_LAYER_NORM, 3, (const ts_tensor *[]){x, weight, bias}, &(attrs){.attr = {ndims}, .fattr = {eps}});
}

ts_tensor *ts_rms_norm(ts_graph *g, ts_tensor *x, ts_tensor *weight, float eps) {
    if (g && !g->sticky && !(eps >= 0.0f)) return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_rms_norm: eps must be >= 0");
    return node(g, TS_OP_RMS_NORM, weight ? 2 : 1, (const ts_tensor *[]){x, weight}, &(attrs){.fattr = {eps}});
}

ts_tensor *ts_matmul_batched(ts_graph *g, ts_tensor *a, ts_tensor *b, int transpose_a, int transpose_b) {
    return node(g, TS_OP_BATCH_MATMUL, 2, (const ts_tensor *[]){a, b}, &(attrs){.attr = {transpose_a != 0, transpose_b != 0}});
}

ts_tensor *ts_permute(ts_graph *g, ts_tensor *x, const int *perm) {
    if (!g || g->sticky) return NULL;
    if (!x || !perm) return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_permute: input and permutation are required");
    attrs a = {.attr = {0}};
    for (int i = 0; i < x->shape.ndim; i++) a.attr[i] = perm[i] < 0 ? perm[i] + x->shape.ndim : perm[i];
    return unary(g, TS_OP_PERMUTE, x, &a);
}

ts_tensor *ts_transpose(ts_graph *g, ts_tensor *x, int dim0, int dim1) {
    int d0 = norm_dim(g, "ts_transpose", x, dim0), d1 = d0 < 0 ? -1 : norm_dim(g, "ts_transpose", x, dim1);
    if (d1 < 0) return NULL;
    int perm[TS_MAX_DIMS];
    for (int i = 0; i < x->shape.ndim; i++) perm[i] = i == d0 ? d1 : i == d1 ? d0 : i;
    return ts_permute(g, x, perm);
}

ts_tensor *ts_pad(ts_graph *g, ts_tensor *x, const int64_t *pads, ts_pad_mode mode, float value) {
    if (!g || g->sticky) return NULL;
    if (!x || !pads) return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_pad: %s is NULL", x ? "pads" : "input (an earlier builder call failed?)");
    /* an integer tensor's cells are moved as they are, the border's too: its constant is 0 */
    if ((is_int(x) || x->dtype == TS_BOOL) && mode == TS_PAD_CONSTANT && value != 0.0f)
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_pad: '%s' is %s, whose constant border is 0, not %g (pad x - v and add v "
                             "back with ts_binary: exact, as the integer type wraps)", x->name, ts_dtype_name(x->dtype), (double)value);
    attrs p = {.iparam = (int)mode, .fparam = value};
    for (int d = 0; d < x->shape.ndim; d++) {
        int64_t b = pads[d], e = pads[x->shape.ndim + d];
        if (b < -x->shape.d[d] || b > TS_MAX_NUMEL || e < -x->shape.d[d] || e > TS_MAX_NUMEL)
            return ts_graph_fail(g, TS_ERR_SHAPE, "ts_pad: pads %lld before and %lld after dim %d of '%s' are out of range", (long long)b,
                                 (long long)e, d, x->name);
        p.attr[d] = b, p.attr[TS_MAX_DIMS + d] = e;
    }
    return unary(g, TS_OP_PAD, x, &p);
}

ts_tensor *ts_slice(ts_graph *g, ts_tensor *x, int dim, int64_t start, int64_t length) {
    int d = norm_dim(g, "ts_slice", x, dim);
    if (d < 0) return NULL;
    return unary(g, TS_OP_SLICE, x, &(attrs){.attr = {d, start, length}});
}

ts_status ts_split(ts_graph *g, ts_tensor *x, int dim, int n, ts_tensor **out) {
    int d = norm_dim(g, "ts_split", x, dim);
    if (d < 0) return ts_graph_status(g);
    if (n < 1 || !out || x->shape.d[d] % n) {
        ts_graph_fail(g, TS_ERR_SHAPE, "ts_split: dim %d of '%s' (%lld) does not split into %d equal parts", dim, x->name,
                      (long long)x->shape.d[d], n);
        return ts_graph_status(g);
    }
    int64_t len = x->shape.d[d] / n;
    for (int k = 0; k < n; k++)
        if (!(out[k] = ts_slice(g, x, d, k * len, len))) return ts_graph_status(g);
    return TS_OK;
}

ts_tensor *ts_concat(ts_graph *g, ts_tensor *const *xs, int n, int dim) {
    if (!g || g->sticky) return NULL;
    if (!xs || n < 1 || n > TS_MAX_INPUTS)
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_concat: takes 1 to %d tensors, got %d", TS_MAX_INPUTS, n);
    int d = norm_dim(g, "ts_concat", xs[0], dim);
    if (d < 0) return NULL;
    return node(g, TS_OP_CONCAT, n, (const ts_tensor *const *)xs, &(attrs){.attr = {d}});
}

ts_tensor *ts_where(ts_graph *g, ts_tensor *cond, ts_tensor *a, ts_tensor *b) {
    /* an f32 condition, or a bool one choosing f32 values: Select reads its cells; else Where (a bool condition made i32) */
    bool select = cond && (cond->dtype == TS_F32 || (cond->dtype == TS_BOOL && a && a->dtype == TS_F32));
    return node(g, select ? TS_OP_SELECT : TS_OP_WHERE, 3, (const ts_tensor *[]){cond, a, b}, NULL);
}

ts_tensor *ts_masked_fill(ts_graph *g, ts_tensor *x, ts_tensor *mask, float value) {
    return node(g, TS_OP_MASKED_FILL, 2, (const ts_tensor *[]){x, mask}, &(attrs){.fattr = {value}});
}

ts_tensor *ts_attention(ts_graph *g, ts_tensor *q, ts_tensor *k, ts_tensor *v, ts_tensor *mask, float scale, ts_tensor *unfused) {
    return node(g, TS_OP_ATTENTION, unfused ? 5 : 4, (const ts_tensor *[]){q, k, v, mask, unfused}, &(attrs){.fattr = {scale}});
}

static const char *const int_reduce_kinds[TS_INT_RED_COUNT] = {"Sum", "Mean", "Max", "Min", "Prod", "SumSquare", "L1", "L2", "LogSum", "LogSumExp"};

/* op over the axes (bit d of the mask: dim d); an i32 or i64 x:
 * TS_OP_INT_REDUCE of `kind` (ts_int_reduce_kind) */
static ts_tensor *reduce(ts_graph *g, ts_op op, int kind, const char *what, ts_tensor *x, int n_axes, const int *axes, int keepdim) {
    if (!g || g->sticky) return NULL;
    if (n_axes < 1 || !axes) return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "%s: give at least one axis (ts_sum / ts_mean reduce everything)", what);
    int64_t mask = 0;
    for (int i = 0; i < n_axes; i++) {
        int d = norm_dim(g, what, x, axes[i]);
        if (d < 0) return NULL;
        if ((mask >> d) & 1) return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "%s: axis %d is given twice", what, axes[i]);
        mask |= (int64_t)1 << d;
    }
    if (is_int(x)) {
        int64_t arg[4] = {mask, keepdim != 0, kind, x->dtype};
        return ts_graph_add_node(g, TS_OP_INT_REDUCE, (const ts_tensor *[]){x}, 1, NULL, set_int_node, arg);
    }
    if (op == TS_OP_COUNT)
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "%s: '%s' is %s; %s reduces i32 and i64 tensors (ts_reduce_sum, ts_reduce_mean "
                             "and ts_reduce_max take f32)", what, x->name, ts_dtype_name(x->dtype), what);
    return unary(g, op, x, &(attrs){.attr = {mask, keepdim != 0}});
}

ts_tensor *ts_reduce_sum(ts_graph *g, ts_tensor *x, int n, const int *axes, int keepdim) {
    return reduce(g, TS_OP_REDUCE_SUM_AXES, TS_INT_RED_SUM, "ts_reduce_sum", x, n, axes, keepdim);
}
ts_tensor *ts_reduce_mean(ts_graph *g, ts_tensor *x, int n, const int *axes, int keepdim) {
    return reduce(g, TS_OP_REDUCE_MEAN_AXES, TS_INT_RED_MEAN, "ts_reduce_mean", x, n, axes, keepdim);
}
ts_tensor *ts_reduce_max(ts_graph *g, ts_tensor *x, int n, const int *axes, int keepdim) {
    return reduce(g, TS_OP_REDUCE_MAX_AXES, TS_INT_RED_MAX, "ts_reduce_max", x, n, axes, keepdim);
}
ts_tensor *ts_reduce_int(ts_graph *g, const char *op, ts_tensor *x, int n, const int *axes, int keepdim) {
    if (!g || g->sticky) return NULL;
    int kind = 0;
    while (kind < TS_INT_RED_COUNT && (!op || strcmp(op, int_reduce_kinds[kind]) != 0)) kind++;
    if (kind == TS_INT_RED_COUNT)
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_reduce_int: '%s' is no integer reduction; use Sum, Mean, Max, Min, Prod, "
                             "SumSquare, L1, L2, LogSum or LogSumExp", op ? op : "(null)");
    if (!x) return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_reduce_int: input is NULL (an earlier builder call failed?)");
    return reduce(g, TS_OP_COUNT, kind, "ts_reduce_int", x, n, axes, keepdim);
}

ts_tensor *ts_cross_entropy_ignore(ts_graph *g, ts_tensor *logits, ts_tensor *labels, int32_t ignore_index) {
    return node(g, TS_OP_CROSS_ENTROPY, 2, (const ts_tensor *[]){logits, labels}, &(attrs){.attr = {1, ignore_index}});
}
