/* op_cases_broadcast.c -- the hand-written op cases of the broadcast
 * family (op_check.h), what the rows' generated samples (op_gen.c) do not
 * reach: Add, Sub, Mul and Div over each other way an operand broadcasts
 * (scalar, rank 0, leading rank, middle dims, both operands, gradients
 * gathered over many positions and over few), Where's conditions as f32
 * 1, 0 and -0, MaskedFill with -1e9 and -inf, ReduceSum, ReduceMean and
 * ReduceMax over several axes with and without keepdim, DropoutMask at
 * p 0 and 0.9 and of rank 0, RandomUniform compared bit for bit. */
#include "op_check.h"

#include "check.h"
#include "graph/graph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S(...) (int64_t[]){__VA_ARGS__}

/* A leaf named after its position in the graph (names are unique). */
static ts_tensor *leaf(ts_graph *g, ts_dtype dt, int ndim, const int64_t *shape) {
    char name[32];
    snprintf(name, sizeof name, "in%zu", g->n);
    return ts_input(g, name, dt, ndim, shape);
}

static void check_node(ts_op_checker *c, const char *label, ts_tensor *t, const ts_op_case_opts *o) {
    if (!t) {
        CHECK(0, "broadcast case %s: the graph does not build: %s", label, ts_last_error());
        return;
    }
    ts_op_check(c, label, t, o);
}

/* ------------------------------------------------------------ binary ops */

typedef struct bin_case {
    const char *label;
    int na, nb;
    int64_t a[4], b[4];
} bin_case;

static const bin_case bin_cases[] = {
    {"[300,257] . [257] (bias, 77100 elements)", 2, 1, {300, 257}, {257}},
    {"[5,9] . [1] (scalar b)", 2, 1, {5, 9}, {1}},
    {"[] . [4,6] (rank-0 a)", 0, 2, {0}, {4, 6}},
    {"[3,1,5] . [4,1] (both broadcast)", 3, 2, {3, 1, 5}, {4, 1}},
    {"[2,1,3] . [2,7,3] (middle dim)", 3, 3, {2, 1, 3}, {2, 7, 3}},
    {"[6,1] . [2,3,1,5] (leading rank)", 2, 4, {6, 1}, {2, 3, 1, 5}},
    {"[40,1] . [40,130] (innermost gathered)", 2, 2, {40, 1}, {40, 130}},
    {"[9000,1] . [1,8] (many elements, few positions)", 2, 2, {9000, 1}, {1, 8}},
    {"[1,1,3] . [5,2,1]", 3, 3, {1, 1, 3}, {5, 2, 1}},
};

static void binary_cases(ts_op_checker *c) {
    static const ts_op ops[] = {TS_OP_ADD, TS_OP_SUB, TS_OP_MUL, TS_OP_DIV};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        for (size_t j = 0; j < sizeof bin_cases / sizeof *bin_cases; j++) {
            const bin_case *bc = &bin_cases[j];
            ts_graph *g = ts_graph_new(7);
            ts_tensor *a = leaf(g, TS_F32, bc->na, bc->a), *b = leaf(g, TS_F32, bc->nb, bc->b), *t;
            switch (ops[i]) {
            case TS_OP_ADD: t = ts_add(g, a, b); break;
            case TS_OP_SUB: t = ts_sub(g, a, b); break;
            case TS_OP_MUL: t = ts_mul(g, a, b); break;
            default: t = ts_div(g, a, b); break;
            }
            /* division: b in [0.5, 2), far from 0 */
            ts_op_case_opts o = {.positive = ops[i] == TS_OP_DIV};
            check_node(c, bc->label, t, &o);
            ts_graph_free(g);
        }
    }
}

/* ------------------------------------------------------------------ where */

typedef struct where_case {
    const char *label;
    int nc, na, nb;
    int64_t c[3], a[3], b[3];
} where_case;

static const where_case where_cases[] = {
    {"[3,1,5] ? [4,1] : [3,4,5]", 3, 2, 3, {3, 1, 5}, {4, 1}, {3, 4, 5}},
    {"[1] ? [6,7] : [7]", 1, 2, 1, {1}, {6, 7}, {7}},
    {"[300,1] ? [1,257] : [300,257] (77100 elements)", 2, 2, 2, {300, 1}, {1, 257}, {300, 257}},
    {"[50,61] ? [50,61] : [] (scalar b)", 2, 2, 0, {50, 61}, {50, 61}, {0}},
    {"[5,1,1] ? [1,9,1] : [1,1,11]", 3, 3, 3, {5, 1, 1}, {1, 9, 1}, {1, 1, 11}},
};

static void where_cases_run(ts_op_checker *c) {
    for (size_t j = 0; j < sizeof where_cases / sizeof *where_cases; j++) {
        const where_case *w = &where_cases[j];
        ts_graph *g = ts_graph_new(7);
        ts_tensor *cond = leaf(g, TS_I32, w->nc, w->c);
        ts_tensor *a = leaf(g, TS_F32, w->na, w->a), *b = leaf(g, TS_F32, w->nb, w->b);
        check_node(c, w->label, ts_where(g, cond, a, b), NULL);
        /* an f32 condition (Select): a constant of 1, 0 and -0 */
        int64_t n = 1;
        for (int i = 0; i < w->nc; i++) n *= w->c[i];
        float *fc = malloc(sizeof(float) * (size_t)n);
        for (int64_t i = 0; fc && i < n; i++) fc[i] = i % 3 == 0 ? 1.0f : i % 3 == 1 ? 0.0f : -0.0f;
        ts_array fa = ts_array_f32(fc, w->nc, w->c);
        char label[160];
        snprintf(label, sizeof label, "f32 cond %s", w->label);
        check_node(c, label, fc ? ts_where(g, ts_constant(g, "fcond", &fa), a, b) : NULL, NULL);
        free(fc);
        ts_graph_free(g);
    }
}

/* ------------------------------------------------------------ masked fill */

typedef struct mask_case {
    const char *label;
    int nx, nm;
    int64_t x[3], m[3];
    float value;
} mask_case;

static const mask_case mask_cases[] = {
    {"[4,5,6] mask [5,1] value -1e9", 3, 2, {4, 5, 6}, {5, 1}, -1e9f},
    {"[4,5,6] mask [4,1,6] value -inf", 3, 3, {4, 5, 6}, {4, 1, 6}, -INFINITY},
    {"[3,7] mask [1] value 2", 2, 1, {3, 7}, {1}, 2.0f},
    {"[300,257] mask [257] value 0 (77100 elements)", 2, 1, {300, 257}, {257}, 0.0f},
};

static void masked_fill_cases(ts_op_checker *c) {
    for (size_t j = 0; j < sizeof mask_cases / sizeof *mask_cases; j++) {
        const mask_case *m = &mask_cases[j];
        ts_graph *g = ts_graph_new(7);
        ts_tensor *x = leaf(g, TS_F32, m->nx, m->x), *mask = leaf(g, TS_I32, m->nm, m->m);
        check_node(c, m->label, ts_masked_fill(g, x, mask, m->value), NULL);
        ts_graph_free(g);
    }
}

/* ---------------------------------------------------- reductions over axes */

typedef struct red_case {
    const char *label;
    int nx;
    int64_t x[4];
    int n_axes;
    int axes[4];
    int keepdim;
} red_case;

static const red_case red_cases[] = {
    {"[4,5,6] axis 1", 3, {4, 5, 6}, 1, {1}, 0},
    {"[4,5,6] axis 1 keepdim", 3, {4, 5, 6}, 1, {1}, 1},
    {"[4,5,6] axes 0,2", 3, {4, 5, 6}, 2, {0, 2}, 0},
    {"[4,5,6] axes 0,2 keepdim", 3, {4, 5, 6}, 2, {0, 2}, 1},
    {"[4,5,6] axis -1", 3, {4, 5, 6}, 1, {-1}, 0},
    {"[4,5,6] all axes", 3, {4, 5, 6}, 3, {0, 1, 2}, 0},
    {"[4,5,6] all axes keepdim", 3, {4, 5, 6}, 3, {2, 0, 1}, 1},
    {"[3,40000] axis 1 (120000 elements)", 2, {3, 40000}, 1, {1}, 0},
    {"[300,257] axis 0", 2, {300, 257}, 1, {0}, 1},
    {"[2,3,70,9] axes 1,3", 4, {2, 3, 70, 9}, 2, {1, 3}, 0},
    {"[9000,3] axis 1", 2, {9000, 3}, 1, {1}, 0},
    {"[1,7,1] axis 0 (a dim of 1)", 3, {1, 7, 1}, 1, {0}, 0},
};

static void reduce_cases(ts_op_checker *c) {
    static const ts_op ops[] = {TS_OP_REDUCE_SUM_AXES, TS_OP_REDUCE_MEAN_AXES, TS_OP_REDUCE_MAX_AXES};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        for (size_t j = 0; j < sizeof red_cases / sizeof *red_cases; j++) {
            const red_case *r = &red_cases[j];
            ts_graph *g = ts_graph_new(7);
            ts_tensor *x = leaf(g, TS_F32, r->nx, r->x), *t;
            switch (ops[i]) {
            case TS_OP_REDUCE_SUM_AXES: t = ts_reduce_sum(g, x, r->n_axes, r->axes, r->keepdim); break;
            case TS_OP_REDUCE_MEAN_AXES: t = ts_reduce_mean(g, x, r->n_axes, r->axes, r->keepdim); break;
            default: t = ts_reduce_max(g, x, r->n_axes, r->axes, r->keepdim); break;
            }
            check_node(c, r->label, t, NULL);
            ts_graph_free(g);
        }
    }
}

/* ------------------------------------------------------------ dropout mask */

typedef struct drop_case {
    const char *label;
    int nx;
    int64_t x[3];
    float p;
} drop_case;

static const drop_case drop_cases[] = {
    {"[1000] p 0", 1, {1000}, 0.0f},
    {"[3,5,7] p 0.9", 3, {3, 5, 7}, 0.9f},
    {"[] p 0.3", 0, {0}, 0.3f},
};

/* the mask node of ts_dropout (x * mask): bit-identical masks expected,
 * tolerance 0 */
static void dropout_cases(ts_op_checker *c) {
    for (size_t j = 0; j < sizeof drop_cases / sizeof *drop_cases; j++) {
        const drop_case *d = &drop_cases[j];
        ts_graph *g = ts_graph_new(11 + j);
        ts_tensor *x = leaf(g, TS_F32, d->nx, d->x);
        ts_tensor *y = ts_dropout(g, x, d->p);
        ts_tensor *mask = y ? g->t[y->in[1]] : NULL;
        ts_op_case_opts o = {.tol = 1e-30f};
        check_node(c, d->label, mask, &o);
        ts_graph_free(g);
    }
}

/* ts_random_uniform's values: bit-identical on every device (one
 * counter-based draw per element), past a block */
static void random_uniform_cases(ts_op_checker *c) {
    ts_graph *g = ts_graph_new(11);
    ts_tensor *like = leaf(g, TS_F32, 1, S(70000));
    ts_op_case_opts o = {.tol = 1e-30f};
    check_node(c, "[70000] bit for bit", ts_random_uniform(g, like), &o);
    ts_graph_free(g);
}

void ts_op_cases_broadcast(ts_op_checker *c) {
    binary_cases(c);
    where_cases_run(c);
    masked_fill_cases(c);
    reduce_cases(c);
    dropout_cases(c);
    random_uniform_cases(c);
}
