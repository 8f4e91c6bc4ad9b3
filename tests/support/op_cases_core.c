/* op_cases_core.c -- the hand-written op cases of the core family
 * (op_check.h), what the rows' generated samples (op_gen.c) do not reach:
 * matmuls with a dim of 1, scale by 0, pow's other exponents, gelu's tanh
 * approximation, the other low-precision formats, Bitwise's other kinds
 * and widths, Cast to f16 and f32, reshape with an inferred dim, flatten
 * from each start, one-element reductions, softmax and log-softmax over
 * inner axes and many rows, losses with one class, many rows and
 * ignore_index, and the integer ops' kinds, ends and moves of i64 and i32
 * tensors (compared exactly; no gradient). */
#include "check.h"
#include "op_check.h"

#include "graph/graph.h"

#include <stdio.h>
#include <string.h>

/* A float leaf of the given shape, named x0, x1, ... */
static ts_tensor *leaf(ts_graph *g, int ndim, const int64_t *d) {
    static int id;
    char name[24];
    snprintf(name, sizeof name, "x%d", id++);
    return ts_input(g, name, TS_F32, ndim, d);
}

/* An i32 leaf (labels) */
static ts_tensor *labels(ts_graph *g, int ndim, const int64_t *d) {
    static int id;
    char name[24];
    snprintf(name, sizeof name, "labels%d", id++);
    return ts_input(g, name, TS_I32, ndim, d);
}

#define SHAPE(...) (sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]){__VA_ARGS__}

static void check(ts_op_checker *c, const char *label, const ts_tensor *t, const ts_op_case_opts *o) {
    if (!t) {
        CHECK(0, "core case %s builds: %s", label, ts_last_error());
        return;
    }
    ts_op_check(c, label, t, o);
}

static void cases_matmul(ts_op_checker *c) {
    ts_graph *g = ts_graph_new(1);
    check(c, "[1,1]x[1,1]", ts_matmul(g, leaf(g, SHAPE(1, 1)), leaf(g, SHAPE(1, 1))), NULL);
    check(c, "[1,9]x[9,1]", ts_matmul(g, leaf(g, SHAPE(1, 9)), leaf(g, SHAPE(9, 1))), NULL);
    check(c, "T [2,257]x[1,257]^T", ts_matmul_t(g, leaf(g, SHAPE(2, 257)), leaf(g, SHAPE(1, 257))), NULL);
    ts_graph_free(g);
}

static void cases_scale(ts_op_checker *c) {
    ts_graph *g = ts_graph_new(2);
    check(c, "scale 0 [3,7,11]", ts_scale(g, leaf(g, SHAPE(3, 7, 11)), 0.0f), NULL);
    ts_graph_free(g);
}

/* pow's exponents besides its sample's 1.5: integers on negative bases,
 * a negative one, 1; gelu's tanh approximation */
static void cases_unary_math(ts_op_checker *c) {
    ts_graph *g = ts_graph_new(3);
    ts_op_case_opts pos = {.positive = true};
    check(c, "pow 2 [4,5]", ts_pow(g, leaf(g, SHAPE(4, 5)), 2.0f), NULL);
    check(c, "pow 3 [3,7,11]", ts_pow(g, leaf(g, SHAPE(3, 7, 11)), 3.0f), NULL);
    check(c, "pow -1.5 [3,7,11]", ts_pow(g, leaf(g, SHAPE(3, 7, 11)), -1.5f), &pos);
    check(c, "pow 1 [4,5]", ts_pow(g, leaf(g, SHAPE(4, 5)), 1.0f), NULL);
    check(c, "gelu tanh [4,5]", ts_gelu(g, leaf(g, SHAPE(4, 5)), 1), NULL);
    check(c, "gelu tanh [70001]", ts_gelu(g, leaf(g, SHAPE(70001)), 1), NULL);
    ts_graph_free(g);
}

/* The casts and Bitwise besides their samples': CastLowbits to the
 * formats besides float8 e4m3fn saturating (float8 e5m2, int4, float8 e8m0
 * rounding to nearest: core/lowbits.h), Bitwise's other kinds and widths,
 * Cast to f16 and f32 */
static void cases_casts(ts_op_checker *c) {
    static const float formats[][2] = {{19, 0}, {22, 0}, {24, 4}};
    ts_graph *g = ts_graph_new(5);
    ts_op_case_opts through = {.no_fd = "rounding whose gradient passes straight through"};
    for (size_t i = 0; i < sizeof formats / sizeof *formats; i++) {
        char label[64];
        snprintf(label, sizeof label, "CastLowbits %g, %g [4,5]", (double)formats[i][0], (double)formats[i][1]);
        check(c, label, ts_unary(g, "CastLowbits", leaf(g, SHAPE(4, 5)), formats[i][0], formats[i][1]), &through);
    }
    /* Bitwise: values and shift amounts past every width (8 to 64 bits), wrapped to the type */
    ts_op_case_opts wide_ints = {.int_hi = 70000}, shifts = {.int_hi = 70};
    check(c, "Bitwise Or u16 [70001] by [1]", ts_bitwise(g, "Or", labels(g, SHAPE(70001)), labels(g, SHAPE(1)), TS_U16), &wide_ints);
    check(c, "Bitwise Xor i64 [5,1] by [1,9]", ts_bitwise(g, "Xor", labels(g, SHAPE(5, 1)), labels(g, SHAPE(1, 9)), TS_I64), &wide_ints);
    check(c, "Bitwise Not u8 [70001]", ts_bitwise(g, "Not", labels(g, SHAPE(70001)), NULL, TS_U8), &wide_ints);
    check(c, "Bitwise ShiftLeft i8 [3,7,11]", ts_bitwise(g, "ShiftLeft", labels(g, SHAPE(3, 7, 11)), labels(g, SHAPE(3, 7, 11)), TS_I8), &shifts);
    check(c, "Bitwise ShiftRight i16 [70001]", ts_bitwise(g, "ShiftRight", labels(g, SHAPE(70001)), labels(g, SHAPE(70001)), TS_I16), &shifts);
    check(c, "Cast f16 [70001]", ts_cast(g, leaf(g, SHAPE(70001)), TS_F16), &through);
    check(c, "Cast f32 [3,7,11]", ts_cast(g, leaf(g, SHAPE(3, 7, 11)), TS_F32), NULL);
    ts_graph_free(g);
}

static void cases_copy(ts_op_checker *c) {
    ts_graph *g = ts_graph_new(4);
    check(c, "reshape [3,5,7]->[-1,7]", ts_reshape(g, leaf(g, SHAPE(3, 5, 7)), SHAPE(-1, 7)), NULL);
    check(c, "flatten [2,3,4,5] from 1", ts_flatten(g, leaf(g, SHAPE(2, 3, 4, 5)), 1), NULL);
    check(c, "flatten [2,3,4,5] from 2", ts_flatten(g, leaf(g, SHAPE(2, 3, 4, 5)), 2), NULL);
    check(c, "flatten [2,3,4,5] from -1", ts_flatten(g, leaf(g, SHAPE(2, 3, 4, 5)), -1), NULL);
    ts_graph_free(g);
}

static void cases_reduce(ts_op_checker *c) {
    ts_graph *g = ts_graph_new(5);
    check(c, "sum [1]", ts_sum(g, leaf(g, SHAPE(1))), NULL);
    check(c, "mean [1]", ts_mean(g, leaf(g, SHAPE(1))), NULL);
    ts_graph_free(g);
}

/* softmax and log-softmax over the axes besides their samples' last one
 * (the columns path: an inner axis) and over many rows */
static void cases_softmax(ts_op_checker *c) {
    static const struct {
        int nd, dim;
        int64_t d[4];
    } cases[] = {{2, 0, {4, 10}}, {4, 1, {2, 3, 5, 7}}, {4, -2, {2, 3, 5, 7}}, {2, 1, {1000, 70}}, {2, 0, {70, 1000}}};
    ts_graph *g = ts_graph_new(6);
    for (int log = 0; log < 2; log++) {
        ts_tensor *(*f)(ts_graph *, ts_tensor *, int) = log ? ts_log_softmax : ts_softmax;
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            char l[96];
            int o = snprintf(l, sizeof l, "%s [", log ? "log_softmax" : "softmax");
            for (int k = 0; k < cases[i].nd; k++) o += snprintf(l + o, sizeof l - (size_t)o, k ? ",%lld" : "%lld", (long long)cases[i].d[k]);
            snprintf(l + o, sizeof l - (size_t)o, "] dim %d", cases[i].dim);
            check(c, l, f(g, leaf(g, cases[i].nd, cases[i].d), cases[i].dim), NULL);
        }
    }
    ts_graph_free(g);
}

static void cases_losses(ts_op_checker *c) {
    ts_graph *g = ts_graph_new(7);
    check(c, "nll [300,3]", ts_nll_loss(g, leaf(g, SHAPE(300, 3)), labels(g, SHAPE(300))), &(ts_op_case_opts){.int_hi = 3});
    check(c, "nll [1,1]", ts_nll_loss(g, leaf(g, SHAPE(1, 1)), labels(g, SHAPE(1))), &(ts_op_case_opts){.int_hi = 1});

    check(c, "cross_entropy [1,1]", ts_cross_entropy(g, leaf(g, SHAPE(1, 1)), labels(g, SHAPE(1))), &(ts_op_case_opts){.int_hi = 1});
    check(c, "cross_entropy [1500,300]", ts_cross_entropy(g, leaf(g, SHAPE(1500, 300)), labels(g, SHAPE(1500))),
          &(ts_op_case_opts){.int_hi = 300});
    /* ignore_index: some rows ignored, none (an index no label takes), all */
    check(c, "cross_entropy ignore 0 [40,5]", ts_cross_entropy_ignore(g, leaf(g, SHAPE(40, 5)), labels(g, SHAPE(40)), 0),
          &(ts_op_case_opts){.int_hi = 3});
    check(c, "cross_entropy ignore 2 [2,33,5]", ts_cross_entropy_ignore(g, leaf(g, SHAPE(2, 33, 5)), labels(g, SHAPE(2, 33)), 2),
          &(ts_op_case_opts){.int_hi = 5});
    check(c, "cross_entropy ignore -100 [6,11]", ts_cross_entropy_ignore(g, leaf(g, SHAPE(6, 11)), labels(g, SHAPE(6)), -100),
          &(ts_op_case_opts){.int_hi = 11});
    check(c, "cross_entropy ignore 0, all ignored [8,4]", ts_cross_entropy_ignore(g, leaf(g, SHAPE(8, 4)), labels(g, SHAPE(8)), 0),
          &(ts_op_case_opts){.int_hi = 1});
    check(c, "cross_entropy ignore 1 [3000,7]", ts_cross_entropy_ignore(g, leaf(g, SHAPE(3000, 7)), labels(g, SHAPE(3000)), 1),
          &(ts_op_case_opts){.int_hi = 7});
    ts_graph_free(g);
}

/* An i64 leaf (values over all of int64 unless the case says, 0, -1 and
 * the ends among them) */
static ts_tensor *ids64(ts_graph *g, int ndim, const int64_t *d) {
    static int id;
    char name[24];
    snprintf(name, sizeof name, "ids%d", id++);
    return ts_input(g, name, TS_I64, ndim, d);
}

/* The integer ops that compute in double: Pow by f32 tensors and by
 * i64 tensors of doubles' bits (PowF32, PowF64), and a Resize of two
 * levels (4 taps in order, 8 pairwise) of i64 values and of i32 ones
 * clipped to int16 (the checker fills every leaf, the constants too:
 * the i32 taps with positions below int_hi, the i64 weights and
 * exponents with doubles of random bits) */
static void cases_integer_doubles(ts_op_checker *c, ts_graph *g) {
    ts_op_case_opts base = {.i64_bits = 12, .spread = 3.0f}, ints_pow = {.int_hi = 70000, .spread = 2.0f};
    check(c, "IntArith PowF32 i64 [3,7,11] by f32 [11]", ts_binary(g, "Pow", ids64(g, SHAPE(3, 7, 11)), leaf(g, SHAPE(11))), &base);
    check(c, "IntArith PowF32 i32 [4,70001] by f32 [70001]", ts_binary(g, "Pow", labels(g, SHAPE(4, 70001)), leaf(g, SHAPE(70001))), &ints_pow);
    static const double e[8] = {0.5, 1.5, 2.0, 1.0 / 3, -0.5, 2.5, 0.0, 1.0};
    int64_t eb[8];
    memcpy(eb, e, sizeof eb);
    ts_tensor *ebits = ts_constant(g, "exponent_bits", &(ts_array){.dtype = TS_I64, .ndim = 1, .shape = {8}, .data = eb});
    check(c, "IntArith PowF64 i64 [3,7,8] by double constants [8]", ts_graph_int_pow_double(g, ids64(g, SHAPE(3, 7, 8)), ebits, TS_I64), &base);
    /* x [3,6,10]: dim 2 to 7 positions of 4 taps, then dim 1 to 5 positions of 8 taps (pairwise), position 3 extrapolated */
    int32_t at[7 * 4 + 5 * 8];
    int64_t w[7 * 4 + 5 * 8];
    for (int i = 0; i < 7 * 4 + 5 * 8; i++) {
        bool first = i < 7 * 4;
        int j = first ? i : i - 7 * 4;
        double v = (double)((j * 37) % 11) / 7.0 - 0.4;
        at[i] = (int32_t)(first ? (j / 4 + j % 4) % 10 : (j / 8 + j % 8) % 6);
        if (!first && j / 8 == 3) at[i] = j % 8 == 0 ? -1 : 0, v = j % 8 == 0 ? -7.5 : 0.0;
        memcpy(&w[i], &v, sizeof v);
    }
    ts_tensor *taps = ts_constant(g, "resize_taps", &(ts_array){.dtype = TS_I32, .ndim = 1, .shape = {7 * 4 + 5 * 8}, .data = at});
    ts_tensor *wts = ts_constant(g, "resize_weights", &(ts_array){.dtype = TS_I64, .ndim = 1, .shape = {7 * 4 + 5 * 8}, .data = w});
    const int dims[2] = {2, 1}, n_taps[2] = {4, 8};
    const bool pairwise[2] = {false, true};
    const int64_t out[2] = {7, 5};
    check(c, "IntResize i64 [3,6,10] to [3,5,7]", ts_graph_int_resize(g, ids64(g, SHAPE(3, 6, 10)), taps, wts, 2, dims, pairwise, n_taps, out, TS_I64),
          &(ts_op_case_opts){.i64_bits = 60});
    check(c, "IntResize i32 [3,6,10] to [3,5,7] as int16 (clipped)",
          ts_graph_int_resize(g, labels(g, SHAPE(3, 6, 10)), taps, wts, 2, dims, pairwise, n_taps, out, TS_I16),
          &(ts_op_case_opts){.int_hi = 6, .i64_bits = 62});
}

/* Integer tensors: the casts between f32, i32 and i64, the integer
 * arithmetic and comparisons (broadcast, every kind, values beyond 2^53
 * and at the ends), running sums, the casts to the narrow integer types
 * and the bitwise ops on i64, the ops that move i64 and i32 values
 * (Pad and GatherElements too) and the integer reductions (compared
 * exactly; no gradient) */
static void cases_integer(ts_op_checker *c) {
    ts_graph *g = ts_graph_new(9);
    ts_op_case_opts huge = {.spread = 6e18f}, ints = {.int_hi = 70000}, small = {.i64_bits = 20};
    check(c, "Convert f32 [70001] to i64 (beyond i32)", ts_cast(g, leaf(g, SHAPE(70001)), TS_I64), &huge);
    check(c, "Convert f32 [3,7,11] to i32 (saturated)", ts_cast(g, leaf(g, SHAPE(3, 7, 11)), TS_I32), &huge);
    check(c, "Convert i32 [3,7,11] to i64", ts_cast(g, labels(g, SHAPE(3, 7, 11)), TS_I64), &ints);
    check(c, "Convert i64 [70001] to i32 (wrapped)", ts_cast(g, ids64(g, SHAPE(70001)), TS_I32), NULL);
    check(c, "Convert i64 [3,7,11] to f32", ts_cast(g, ids64(g, SHAPE(3, 7, 11)), TS_F32), NULL);
    /* the narrow integer types: wrapped (i8 and u16 held in i32, u32 in i64) */
    check(c, "Convert i64 [70001] to i8 (wrapped)", ts_cast(g, ids64(g, SHAPE(70001)), TS_I8), NULL);
    check(c, "Convert i64 [3,7,11] to u16 (wrapped)", ts_cast(g, ids64(g, SHAPE(3, 7, 11)), TS_U16), NULL);
    check(c, "Convert i64 [3,7,11] to u32 (wrapped)", ts_cast(g, ids64(g, SHAPE(3, 7, 11)), TS_U32), NULL);
    check(c, "Convert i32 [3,7,11] to u8 (wrapped)", ts_cast(g, labels(g, SHAPE(3, 7, 11)), TS_U8), &ints);
    check(c, "Convert f32 [70001] to i16 (toward zero, wrapped)", ts_cast(g, leaf(g, SHAPE(70001)), TS_I16), &huge);
    /* Bitwise on i64: every bit, and shifts by amounts around the widths */
    ts_op_case_opts shift64 = {.i64_bits = 7};
    check(c, "Bitwise And u64 i64 [5,1] by [1,9]", ts_bitwise(g, "And", ids64(g, SHAPE(5, 1)), ids64(g, SHAPE(1, 9)), TS_U64), NULL);
    check(c, "Bitwise Not u64 i64 [70001]", ts_bitwise(g, "Not", ids64(g, SHAPE(70001)), NULL, TS_U64), NULL);
    check(c, "Bitwise ShiftLeft i64 [3,7,11]", ts_bitwise(g, "ShiftLeft", ids64(g, SHAPE(3, 7, 11)), ids64(g, SHAPE(3, 7, 11)), TS_I64), &shift64);
    check(c, "Bitwise ShiftRight i64 [70001]", ts_bitwise(g, "ShiftRight", ids64(g, SHAPE(70001)), ids64(g, SHAPE(70001)), TS_I64), &shift64);
    check(c, "Bitwise ShiftLeft u32 i64 [3,7,11]", ts_bitwise(g, "ShiftLeft", ids64(g, SHAPE(3, 7, 11)), ids64(g, SHAPE(3, 7, 11)), TS_U32), &shift64);
    static const char *const kinds[] = {"Add", "Sub", "Mul", "Div", "FloorDiv", "Mod", "FMod", "Min", "Max",
                                        "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"};
    char label[96];
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        snprintf(label, sizeof label, "IntArith %s i64 [5,1,9] by [7,1]", kinds[k]);
        check(c, label, ts_binary(g, kinds[k], ids64(g, SHAPE(5, 1, 9)), ids64(g, SHAPE(7, 1))), NULL);
        snprintf(label, sizeof label, "IntArith %s i64 small [70001] by [1]", kinds[k]);
        check(c, label, ts_binary(g, kinds[k], ids64(g, SHAPE(70001)), ids64(g, SHAPE(1))), &small);
    }
    check(c, "IntArith Div i32 [3,7,11] by [7,11]", ts_binary(g, "Div", labels(g, SHAPE(3, 7, 11)), labels(g, SHAPE(7, 11))), &ints);
    check(c, "IntArith Mul i32 [70001] (wrapped)", ts_binary(g, "Mul", labels(g, SHAPE(70001)), labels(g, SHAPE(70001))), &ints);
    check(c, "IntArith Neg i64 [70001]", ts_unary(g, "Neg", ids64(g, SHAPE(70001)), 0, 0), NULL);
    check(c, "IntArith Abs i64 [3,7,11]", ts_unary(g, "Abs", ids64(g, SHAPE(3, 7, 11)), 0, 0), NULL);
    check(c, "CumSum i64 [3,7,11] axis 1", ts_cumsum(g, ids64(g, SHAPE(3, 7, 11)), 1, 0, 0), NULL);
    check(c, "CumSum i64 [3,7,11] axis -1 exclusive reverse", ts_cumsum(g, ids64(g, SHAPE(3, 7, 11)), -1, 1, 1), NULL);
    check(c, "CumSum i32 [4,70001] axis 1", ts_cumsum(g, labels(g, SHAPE(4, 70001)), 1, 0, 0), &ints);
    check(c, "reshape i64 [4,6]->[2,12]", ts_reshape(g, ids64(g, SHAPE(4, 6)), SHAPE(2, 12)), NULL);
    check(c, "flatten i64 [2,3,4,5] from 1", ts_flatten(g, ids64(g, SHAPE(2, 3, 4, 5)), 1), NULL);
    check(c, "transpose i64 [3,5,7] 0<->2", ts_transpose(g, ids64(g, SHAPE(3, 5, 7)), 0, 2), NULL);
    check(c, "slice i64 [5,9] dim 1 [2,7)", ts_slice(g, ids64(g, SHAPE(5, 9)), 1, 2, 5), NULL);
    check(c, "slice i32 [5,9] dim 0 [1,4)", ts_slice(g, labels(g, SHAPE(5, 9)), 0, 1, 3), &ints);
    check(c, "concat i64 [2,3]+[2,5] dim 1", ts_concat(g, (ts_tensor *[]){ids64(g, SHAPE(2, 3)), ids64(g, SHAPE(2, 5))}, 2, 1), NULL);
    check(c, "concat i32 [2,3]+[4,3] dim 0", ts_concat(g, (ts_tensor *[]){labels(g, SHAPE(2, 3)), labels(g, SHAPE(4, 3))}, 2, 0), &ints);
    ts_op_case_opts rows = {.int_hi = 7};
    check(c, "gather i64 [7,5] rows by [3,4]", ts_gather(g, ids64(g, SHAPE(7, 5)), labels(g, SHAPE(3, 4)), 0), &rows);
    check(c, "gather i64 [4,7] axis 1 by [9]", ts_gather(g, ids64(g, SHAPE(4, 7)), labels(g, SHAPE(9)), 1), &rows);
    check(c, "gather i32 [7,5] rows by [6]", ts_gather(g, labels(g, SHAPE(7, 5)), labels(g, SHAPE(6)), 0), &rows);
    check(c, "where i64 [3,1] ? [3,8] : [8]", ts_where(g, labels(g, SHAPE(3, 1)), ids64(g, SHAPE(3, 8)), ids64(g, SHAPE(8))), NULL);
    check(c, "where i32 [70001] ? [70001] : [1]", ts_where(g, labels(g, SHAPE(70001)), labels(g, SHAPE(70001)), labels(g, SHAPE(1))), &ints);
    check(c, "gather_elements i64 [7,5] axis 0 by [3,5]", ts_gather_elements(g, ids64(g, SHAPE(7, 5)), labels(g, SHAPE(3, 5)), 0), &rows);
    check(c, "gather_elements i32 [4,7] axis 1 by [4,9]", ts_gather_elements(g, labels(g, SHAPE(4, 7)), labels(g, SHAPE(4, 9)), 1), &rows);
    static const int64_t pads[] = {1, 0, 2, 3, 2, 0}; /* [3,5,7]: before 1, 0, 2; after 3, 2, 0 */
    check(c, "pad i64 [3,5,7] constant 0", ts_pad(g, ids64(g, SHAPE(3, 5, 7)), pads, TS_PAD_CONSTANT, 0.0f), NULL);
    check(c, "pad i64 [3,5,7] reflect", ts_pad(g, ids64(g, SHAPE(3, 5, 7)), pads, TS_PAD_REFLECT, 0.0f), NULL);
    check(c, "pad i32 [3,5,7] edge", ts_pad(g, labels(g, SHAPE(3, 5, 7)), pads, TS_PAD_EDGE, 0.0f), &ints);
    static const char *const reductions[] = {"Sum", "Mean", "Max", "Min", "Prod", "SumSquare", "L1", "L2", "LogSum", "LogSumExp"};
    for (size_t k = 0; k < sizeof reductions / sizeof reductions[0]; k++) {
        snprintf(label, sizeof label, "IntReduce %s i64 [5,7,9] axes 0,2", reductions[k]);
        check(c, label, ts_reduce_int(g, reductions[k], ids64(g, SHAPE(5, 7, 9)), 2, (const int[]){0, 2}, 0), NULL);
        snprintf(label, sizeof label, "IntReduce %s i32 [3,70001] axis 1 kept", reductions[k]);
        check(c, label, ts_reduce_int(g, reductions[k], labels(g, SHAPE(3, 70001)), 1, (const int[]){1}, 1), &ints);
    }
    check(c, "IntReduce Sum i64 [70001] (ts_reduce_sum)", ts_reduce_sum(g, ids64(g, SHAPE(70001)), 1, (const int[]){0}, 0), NULL);
    cases_integer_doubles(c, g);
    ts_graph_free(g);
}

/* IntMatMul: batch dims broadcast both ways, operands stored transposed,
 * i32 sums wrapping, and Gemm's alpha AB + beta C in double with C of
 * either integer dtype broadcast (values at the ends of int64: saturated) */
static void cases_int_matmul(ts_op_checker *c) {
    ts_graph *g = ts_graph_new(9);
    ts_op_case_opts ints = {.int_hi = 70000}, small = {.i64_bits = 20};
    check(c, "IntMatMul i64 [2,1,5,7] by [3,7,9] (batch dims broadcast)", ts_matmul_int(g, ids64(g, SHAPE(2, 1, 5, 7)), ids64(g, SHAPE(3, 7, 9))), NULL);
    check(c, "IntMatMul i64 [3,2,300] by [300,5] (b broadcast)", ts_matmul_int(g, ids64(g, SHAPE(3, 2, 300)), ids64(g, SHAPE(300, 5))), NULL);
    check(c, "IntMatMul i32 [4,300] by [300,6] (wrapped)", ts_matmul_int(g, labels(g, SHAPE(4, 300)), labels(g, SHAPE(300, 6))), &ints);
    check(c, "IntMatMul Gemm i64 [7,5]^T by [9,7]^T + [9], alpha 0.3, beta -1.5",
          ts_graph_int_gemm(g, ids64(g, SHAPE(7, 5)), ids64(g, SHAPE(9, 7)), ids64(g, SHAPE(9)), 1, 1, 0.3, -1.5), &small);
    check(c, "IntMatMul Gemm i64 [5,7] by [7,9] + [5,1] at the ends (saturated)",
          ts_graph_int_gemm(g, ids64(g, SHAPE(5, 7)), ids64(g, SHAPE(7, 9)), ids64(g, SHAPE(5, 1)), 0, 0, 0.5, 2.0), NULL);
    check(c, "IntMatMul Gemm i32 [3,33] by [33,4] + i32 [4], alpha 0.25",
          ts_graph_int_gemm(g, labels(g, SHAPE(3, 33)), labels(g, SHAPE(33, 4)), labels(g, SHAPE(4)), 0, 0, 0.25, 1.0), &ints);
    ts_graph_free(g);
}

void ts_op_cases_core(ts_op_checker *c) {
    cases_integer(c);
    cases_int_matmul(c);
    cases_matmul(c);
    cases_scale(c);
    cases_unary_math(c);
    cases_casts(c);
    cases_copy(c);
    cases_reduce(c);
    cases_softmax(c);
    cases_losses(c);
}
