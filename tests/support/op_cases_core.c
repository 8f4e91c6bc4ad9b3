/* op_cases_core.c -- the op cases of the core family (op_check.h): matmul
 * (plain and B transposed), scale, relu, log, reshape, flatten, print, NLL
 * loss, sum, mean, softmax and log-softmax over each kind of axis, cross
 * entropy with and without ignore_index, exp, sqrt, pow, erf, gelu (exact
 * and tanh), tanh, sigmoid, the unary family (Sin, Elu, IsNaN, ...) and
 * CastFloat, CastIndex and Bitwise (compared exactly), Cast to bf16, f16 and f32, the
 * integer ops (Convert, IntArith, CumSum) and the moves of i64 and i32 tensors. Sizes include odd ones (not multiples of 32 or
 * 256), rows longer than a block, and tensors over 65536 elements. */
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
    check(c, "[3,5]x[5,7]", ts_matmul(g, leaf(g, SHAPE(3, 5)), leaf(g, SHAPE(5, 7))), NULL);
    check(c, "[1,1]x[1,1]", ts_matmul(g, leaf(g, SHAPE(1, 1)), leaf(g, SHAPE(1, 1))), NULL);
    check(c, "[33,17]x[17,65]", ts_matmul(g, leaf(g, SHAPE(33, 17)), leaf(g, SHAPE(17, 65))), NULL);
    check(c, "[64,300]x[300,129]", ts_matmul(g, leaf(g, SHAPE(64, 300)), leaf(g, SHAPE(300, 129))), NULL);
    check(c, "[1,9]x[9,1]", ts_matmul(g, leaf(g, SHAPE(1, 9)), leaf(g, SHAPE(9, 1))), NULL);
    check(c, "T [3,5]x[7,5]^T", ts_matmul_t(g, leaf(g, SHAPE(3, 5)), leaf(g, SHAPE(7, 5))), NULL);
    check(c, "T [33,17]x[65,17]^T", ts_matmul_t(g, leaf(g, SHAPE(33, 17)), leaf(g, SHAPE(65, 17))), NULL);
    check(c, "T [2,257]x[1,257]^T", ts_matmul_t(g, leaf(g, SHAPE(2, 257)), leaf(g, SHAPE(1, 257))), NULL);
    ts_graph_free(g);
}

static void cases_elementwise(ts_op_checker *c) {
    ts_graph *g = ts_graph_new(2);
    ts_op_case_opts pos = {.positive = true};
    check(c, "scale 2.5 [4,5]", ts_scale(g, leaf(g, SHAPE(4, 5)), 2.5f), NULL);
    check(c, "scale -0.5 [70001]", ts_scale(g, leaf(g, SHAPE(70001)), -0.5f), NULL);
    check(c, "scale 0 [3,7,11]", ts_scale(g, leaf(g, SHAPE(3, 7, 11)), 0.0f), NULL);
    check(c, "relu [4,5]", ts_relu(g, leaf(g, SHAPE(4, 5))), NULL);
    check(c, "relu [3,7,11]", ts_relu(g, leaf(g, SHAPE(3, 7, 11))), NULL);
    check(c, "relu [70001]", ts_relu(g, leaf(g, SHAPE(70001))), NULL);
    check(c, "log [4,5]", ts_log(g, leaf(g, SHAPE(4, 5))), &pos);
    check(c, "log [300,257]", ts_log(g, leaf(g, SHAPE(300, 257))), &pos);
    check(c, "tanh [4,5]", ts_tanh(g, leaf(g, SHAPE(4, 5))), NULL);
    check(c, "tanh [70001]", ts_tanh(g, leaf(g, SHAPE(70001))), NULL);
    check(c, "tanh positive [3,7,11]", ts_tanh(g, leaf(g, SHAPE(3, 7, 11))), &pos);
    check(c, "sigmoid [4,5]", ts_sigmoid(g, leaf(g, SHAPE(4, 5))), NULL);
    check(c, "sigmoid [70001]", ts_sigmoid(g, leaf(g, SHAPE(70001))), NULL);
    check(c, "sigmoid positive [3,7,11]", ts_sigmoid(g, leaf(g, SHAPE(3, 7, 11))), &pos);
    ts_graph_free(g);
}

static void cases_unary_math(ts_op_checker *c) {
    ts_graph *g = ts_graph_new(3);
    ts_op_case_opts pos = {.positive = true};
    check(c, "exp [4,5]", ts_exp(g, leaf(g, SHAPE(4, 5))), NULL);
    check(c, "exp [70001]", ts_exp(g, leaf(g, SHAPE(70001))), NULL);
    check(c, "sqrt [4,5]", ts_sqrt(g, leaf(g, SHAPE(4, 5))), &pos);
    check(c, "sqrt [3,7,11]", ts_sqrt(g, leaf(g, SHAPE(3, 7, 11))), &pos);
    check(c, "pow 2 [4,5]", ts_pow(g, leaf(g, SHAPE(4, 5)), 2.0f), NULL);
    check(c, "pow 3 [3,7,11]", ts_pow(g, leaf(g, SHAPE(3, 7, 11)), 3.0f), NULL);
    check(c, "pow 0.5 [4,5]", ts_pow(g, leaf(g, SHAPE(4, 5)), 0.5f), &pos);
    check(c, "pow -1.5 [3,7,11]", ts_pow(g, leaf(g, SHAPE(3, 7, 11)), -1.5f), &pos);
    check(c, "pow 1 [70001]", ts_pow(g, leaf(g, SHAPE(70001)), 1.0f), NULL);
    check(c, "erf [4,5]", ts_erf(g, leaf(g, SHAPE(4, 5))), NULL);
    check(c, "erf [70001]", ts_erf(g, leaf(g, SHAPE(70001))), NULL);
    check(c, "abs [4,5]", ts_abs(g, leaf(g, SHAPE(4, 5))), NULL);
    check(c, "abs [70001]", ts_abs(g, leaf(g, SHAPE(70001))), NULL);
    check(c, "gelu [4,5]", ts_gelu(g, leaf(g, SHAPE(4, 5)), 0), NULL);
    check(c, "gelu [70001]", ts_gelu(g, leaf(g, SHAPE(70001)), 0), NULL);
    check(c, "gelu positive [3,7,11]", ts_gelu(g, leaf(g, SHAPE(3, 7, 11)), 0), &pos);
    check(c, "gelu tanh [4,5]", ts_gelu(g, leaf(g, SHAPE(4, 5)), 1), NULL);
    check(c, "gelu tanh [70001]", ts_gelu(g, leaf(g, SHAPE(70001)), 1), NULL);
    check(c, "gelu tanh positive [3,7,11]", ts_gelu(g, leaf(g, SHAPE(3, 7, 11)), 1), &pos);
    ts_graph_free(g);
}

/* The unary family of backend/ew_math.h (ts_unary), with the ONNX
 * defaults of the ops' alpha and beta, and CastFloat of i32 ids. */
static void cases_ew_unary(ts_op_checker *c) {
    static const struct {
        const char *op;
        float alpha, beta;
    } ops[] = {{"Ceil", 0, 0}, {"Floor", 0, 0}, {"Round", 0, 0}, {"CastInt", 0, 0}, {"CastBool", 0, 0}, {"Sin", 0, 0},
               {"Cos", 0, 0}, {"Not", 0, 0}, {"IsNaN", 0, 0}, {"IsInf", 1, 1}, {"HardSwish", 0, 0}, {"HardSigmoid", 0.2f, 0.5f},
               {"LeakyRelu", 0.01f, 0}, {"Elu", 1.0f, 0}, {"Selu", 1.6732632f, 1.0507010f}, {"Softplus", 0, 0},
               {"CastLowbits", 17, 1}, {"CastLowbits", 19, 0}, {"CastLowbits", 22, 0}, {"CastLowbits", 24, 4},
               {"Tan", 0, 0},   {"Atan", 0, 0}, {"Sinh", 0, 0},  {"Cosh", 0, 0}, {"Asinh", 0, 0}};
    ts_graph *g = ts_graph_new(5);
    ts_op_case_opts through = {.no_fd = "rounding whose gradient passes straight through"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        char label[64];
        const ts_op_case_opts *o = strcmp(ops[i].op, "CastLowbits") ? NULL : &through;
        snprintf(label, sizeof label, "%s [4,5]", ops[i].op);
        check(c, label, ts_unary(g, ops[i].op, leaf(g, SHAPE(4, 5)), ops[i].alpha, ops[i].beta), o);
        snprintf(label, sizeof label, "%s [70001]", ops[i].op);
        check(c, label, ts_unary(g, ops[i].op, leaf(g, SHAPE(70001)), ops[i].alpha, ops[i].beta), o);
    }
    /* the inverse functions inside their domains: |x| < 1, x >= 1 */
    static const char *const inverses[] = {"Asin", "Acos", "Atanh", "Acosh"};
    ts_op_case_opts inside = {.spread = 0.95f}, above = {.positive = true, .shift = 0.75f};
    for (size_t i = 0; i < sizeof inverses / sizeof *inverses; i++) {
        char label[64];
        const ts_op_case_opts *o = i == 3 ? &above : &inside;
        snprintf(label, sizeof label, "%s [4,5]", inverses[i]);
        check(c, label, ts_unary(g, inverses[i], leaf(g, SHAPE(4, 5)), 0, 0), o);
        snprintf(label, sizeof label, "%s [70001]", inverses[i]);
        check(c, label, ts_unary(g, inverses[i], leaf(g, SHAPE(70001)), 0, 0), o);
    }
    ts_op_case_opts ids = {.int_hi = 1000};
    check(c, "CastFloat i32 [3,7,11]", ts_unary(g, "CastFloat", labels(g, SHAPE(3, 7, 11)), 0, 0), &ids);
    ts_op_case_opts wide = {.spread = 8.0f}; /* indices -7..7 before the clamp to [-5, 5] */
    check(c, "CastIndex [70001] to [-5, 5]", ts_unary(g, "CastIndex", leaf(g, SHAPE(70001)), -5.0f, 5.0f), &wide);
    /* Bitwise: values and shift amounts past every width (8 to 64 bits), wrapped to the type */
    ts_op_case_opts wide_ints = {.int_hi = 70000}, shifts = {.int_hi = 70};
    check(c, "Bitwise And i32 [3,7,11] by [7,11]", ts_bitwise(g, "And", labels(g, SHAPE(3, 7, 11)), labels(g, SHAPE(7, 11)), TS_I32), &wide_ints);
    check(c, "Bitwise Or u16 [70001] by [1]", ts_bitwise(g, "Or", labels(g, SHAPE(70001)), labels(g, SHAPE(1)), TS_U16), &wide_ints);
    check(c, "Bitwise Xor i64 [5,1] by [1,9]", ts_bitwise(g, "Xor", labels(g, SHAPE(5, 1)), labels(g, SHAPE(1, 9)), TS_I64), &wide_ints);
    check(c, "Bitwise Not u8 [70001]", ts_bitwise(g, "Not", labels(g, SHAPE(70001)), NULL, TS_U8), &wide_ints);
    check(c, "Bitwise ShiftLeft i8 [3,7,11]", ts_bitwise(g, "ShiftLeft", labels(g, SHAPE(3, 7, 11)), labels(g, SHAPE(3, 7, 11)), TS_I8), &shifts);
    check(c, "Bitwise ShiftRight i16 [70001]", ts_bitwise(g, "ShiftRight", labels(g, SHAPE(70001)), labels(g, SHAPE(70001)), TS_I16), &shifts);
    check(c, "Cast bf16 [4,5]", ts_cast(g, leaf(g, SHAPE(4, 5)), TS_BF16), &through);
    check(c, "Cast f16 [70001]", ts_cast(g, leaf(g, SHAPE(70001)), TS_F16), &through);
    check(c, "Cast f32 [3,7,11]", ts_cast(g, leaf(g, SHAPE(3, 7, 11)), TS_F32), NULL);
    ts_graph_free(g);
}

static void cases_copy(ts_op_checker *c) {
    ts_graph *g = ts_graph_new(4);
    check(c, "reshape [4,6]->[2,12]", ts_reshape(g, leaf(g, SHAPE(4, 6)), SHAPE(2, 12)), NULL);
    check(c, "reshape [3,5,7]->[-1,7]", ts_reshape(g, leaf(g, SHAPE(3, 5, 7)), SHAPE(-1, 7)), NULL);
    check(c, "reshape [70001]->[1,70001]", ts_reshape(g, leaf(g, SHAPE(70001)), SHAPE(1, 70001)), NULL);
    check(c, "flatten [2,3,4,5] from 1", ts_flatten(g, leaf(g, SHAPE(2, 3, 4, 5)), 1), NULL);
    check(c, "flatten [2,3,4,5] from 2", ts_flatten(g, leaf(g, SHAPE(2, 3, 4, 5)), 2), NULL);
    check(c, "flatten [2,3,4,5] from -1", ts_flatten(g, leaf(g, SHAPE(2, 3, 4, 5)), -1), NULL);
    check(c, "flatten [7,9] from 0", ts_flatten(g, leaf(g, SHAPE(7, 9)), 0), NULL);
    check(c, "print [5,3]", ts_print(g, leaf(g, SHAPE(5, 3)), "op case"), NULL);
    check(c, "stop gradient [4,6]", ts_stop_gradient(g, leaf(g, SHAPE(4, 6))), NULL);
    check(c, "stop gradient [70001]", ts_stop_gradient(g, leaf(g, SHAPE(70001))), NULL);
    ts_graph_free(g);
}

static void cases_reduce(ts_op_checker *c) {
    ts_graph *g = ts_graph_new(5);
    check(c, "sum [4,5]", ts_sum(g, leaf(g, SHAPE(4, 5))), NULL);
    check(c, "sum [1]", ts_sum(g, leaf(g, SHAPE(1))), NULL);
    check(c, "sum [3,7,11]", ts_sum(g, leaf(g, SHAPE(3, 7, 11))), NULL);
    check(c, "sum [70001]", ts_sum(g, leaf(g, SHAPE(70001))), NULL);
    check(c, "mean [4,5]", ts_mean(g, leaf(g, SHAPE(4, 5))), NULL);
    check(c, "mean [1]", ts_mean(g, leaf(g, SHAPE(1))), NULL);
    check(c, "mean [3,7,11]", ts_mean(g, leaf(g, SHAPE(3, 7, 11))), NULL);
    check(c, "mean [70001]", ts_mean(g, leaf(g, SHAPE(70001))), NULL);
    ts_graph_free(g);
}

/* the rows path (softmax over the last axis) and the columns path (an
 * inner axis), each for softmax and log-softmax */
static void cases_softmax(ts_op_checker *c) {
    ts_graph *g = ts_graph_new(6);
    for (int log = 0; log < 2; log++) {
        ts_tensor *(*f)(ts_graph *, ts_tensor *, int) = log ? ts_log_softmax : ts_softmax;
        char l[96];
        const char *n = log ? "log_softmax" : "softmax";
        snprintf(l, sizeof l, "%s [4,10] dim 1", n);
        check(c, l, f(g, leaf(g, SHAPE(4, 10)), 1), NULL);
        snprintf(l, sizeof l, "%s [4,10] dim -1", n);
        check(c, l, f(g, leaf(g, SHAPE(4, 10)), -1), NULL);
        snprintf(l, sizeof l, "%s [4,10] dim 0", n);
        check(c, l, f(g, leaf(g, SHAPE(4, 10)), 0), NULL);
        snprintf(l, sizeof l, "%s [2,3,5,7] dim 1", n);
        check(c, l, f(g, leaf(g, SHAPE(2, 3, 5, 7)), 1), NULL);
        snprintf(l, sizeof l, "%s [2,3,5,7] dim -2", n);
        check(c, l, f(g, leaf(g, SHAPE(2, 3, 5, 7)), -2), NULL);
        snprintf(l, sizeof l, "%s [2,3,5,7] dim 3", n);
        check(c, l, f(g, leaf(g, SHAPE(2, 3, 5, 7)), 3), NULL);
        snprintf(l, sizeof l, "%s [5] dim 0", n);
        check(c, l, f(g, leaf(g, SHAPE(5)), 0), NULL);
        snprintf(l, sizeof l, "%s [3,300] dim 1", n);
        check(c, l, f(g, leaf(g, SHAPE(3, 300)), 1), NULL);
        snprintf(l, sizeof l, "%s [2,9001] dim 1", n);
        check(c, l, f(g, leaf(g, SHAPE(2, 9001)), 1), NULL);
        snprintf(l, sizeof l, "%s [70001] dim 0", n);
        check(c, l, f(g, leaf(g, SHAPE(70001)), 0), NULL);
        snprintf(l, sizeof l, "%s [1000,70] dim 1", n);
        check(c, l, f(g, leaf(g, SHAPE(1000, 70)), 1), NULL);
        snprintf(l, sizeof l, "%s [70,1000] dim 0", n);
        check(c, l, f(g, leaf(g, SHAPE(70, 1000)), 0), NULL);
    }
    ts_graph_free(g);
}

static void cases_losses(ts_op_checker *c) {
    ts_graph *g = ts_graph_new(7);
    check(c, "nll [4,10]", ts_nll_loss(g, leaf(g, SHAPE(4, 10)), labels(g, SHAPE(4))), &(ts_op_case_opts){.int_hi = 10});
    check(c, "nll [300,3]", ts_nll_loss(g, leaf(g, SHAPE(300, 3)), labels(g, SHAPE(300))), &(ts_op_case_opts){.int_hi = 3});
    check(c, "nll [1,1]", ts_nll_loss(g, leaf(g, SHAPE(1, 1)), labels(g, SHAPE(1))), &(ts_op_case_opts){.int_hi = 1});
    check(c, "nll [2000,37]", ts_nll_loss(g, leaf(g, SHAPE(2000, 37)), labels(g, SHAPE(2000))), &(ts_op_case_opts){.int_hi = 37});

    check(c, "cross_entropy [4,10]", ts_cross_entropy(g, leaf(g, SHAPE(4, 10)), labels(g, SHAPE(4))), &(ts_op_case_opts){.int_hi = 10});
    check(c, "cross_entropy [2,3,7]", ts_cross_entropy(g, leaf(g, SHAPE(2, 3, 7)), labels(g, SHAPE(2, 3))), &(ts_op_case_opts){.int_hi = 7});
    check(c, "cross_entropy [1,1]", ts_cross_entropy(g, leaf(g, SHAPE(1, 1)), labels(g, SHAPE(1))), &(ts_op_case_opts){.int_hi = 1});
    check(c, "cross_entropy [3,9001]", ts_cross_entropy(g, leaf(g, SHAPE(3, 9001)), labels(g, SHAPE(3))),
          &(ts_op_case_opts){.int_hi = 9001});
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

/* Integer tensors: the casts between f32, i32 and i64, the integer
 * arithmetic and comparisons (broadcast, every kind, values beyond 2^53
 * and at the ends), running sums, and the ops that move i64 and i32
 * values (compared exactly; no gradient) */
static void cases_integer(ts_op_checker *c) {
    ts_graph *g = ts_graph_new(9);
    ts_op_case_opts huge = {.spread = 6e18f}, ints = {.int_hi = 70000}, small = {.i64_bits = 20};
    check(c, "Convert f32 [70001] to i64 (beyond i32)", ts_cast(g, leaf(g, SHAPE(70001)), TS_I64), &huge);
    check(c, "Convert f32 [3,7,11] to i32 (saturated)", ts_cast(g, leaf(g, SHAPE(3, 7, 11)), TS_I32), &huge);
    check(c, "Convert i32 [3,7,11] to i64", ts_cast(g, labels(g, SHAPE(3, 7, 11)), TS_I64), &ints);
    check(c, "Convert i64 [70001] to i32 (wrapped)", ts_cast(g, ids64(g, SHAPE(70001)), TS_I32), NULL);
    check(c, "Convert i64 [3,7,11] to f32", ts_cast(g, ids64(g, SHAPE(3, 7, 11)), TS_F32), NULL);
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
    ts_graph_free(g);
}

void ts_op_cases_core(ts_op_checker *c) {
    cases_integer(c);
    cases_matmul(c);
    cases_elementwise(c);
    cases_unary_math(c);
    cases_ew_unary(c);
    cases_copy(c);
    cases_reduce(c);
    cases_softmax(c);
    cases_losses(c);
}
