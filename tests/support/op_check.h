/* op_check.h -- one op on a device against the CPU backend: the same
 * random inputs through both kernel tables, the output, the float inputs
 * after the forward (buffers a forward updates) and the input gradients
 * (accumulated into the same random starting values) compared. Used by
 * tests/test_backend_ops.c with every op's generated cases
 * (tests/support/op_gen.c) and the hand-written ones of tests/support/op_cases_*.c.
 *
 *     ts_op_checker c = {.dev = dev, .stream = stream};
 *     ts_graph *g = ts_graph_new(); ...build one node t on leaf inputs...
 *     ts_op_check(&c, "relu [4,5]", t, NULL);
 *     ts_graph_free(g);
 */
#ifndef TS_TEST_OP_CHECK_H
#define TS_TEST_OP_CHECK_H

#include "backend/registry/registry.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct ts_op_checker {
    const ts_backend *dev; /* the device under test */
    void *stream;          /* its stream (NULL for the CPU) */
    uint64_t seed;
    int checked;           /* cases run */
    int failures;          /* comparisons that failed (check.h's counters are per file: main checks this) */
    bool ops_fd[TS_OP_COUNT];   /* ops with a case whose gradient was checked against finite differences */
    bool ops_no_fd[TS_OP_COUNT]; /* ops with a case that says why it is not (ts_op_case_opts.no_fd) */
    bool ops_generated[TS_OP_COUNT]; /* ops with a generated case (ts_op_cases_generated) */
} ts_op_checker;

typedef struct ts_op_case_opts {
    int32_t int_hi;   /* i32 inputs uniform in [0, int_hi) (0: 2) */
    int i64_bits;     /* i64 inputs uniform over +-2^i64_bits (0: all of int64), with 0, -1 and the ends among them */
    bool positive;    /* float inputs in [0.5, 2) instead of [-1, 1) */
    float spread;     /* float inputs in [-spread, spread) instead (0: 1) */
    float shift;      /* added to every float input (a domain such as acosh's x >= 1) */
    float tol;        /* relative tolerance (0: 1e-4), on max |a-b| / (max |cpu| + 1e-3) */
    bool no_backward; /* check the forward only */
    /* why the CPU's gradient is not the forward's derivative (a straight-
     * through or stopped gradient): the finite-difference check is skipped
     * and the reason printed; NULL: checked */
    const char *no_fd;
} ts_op_case_opts;

/* Runs node t (a node whose inputs are all leaves: ts_input, ts_param,
 * ts_constant) on the CPU and on c->dev and CHECKs each comparison (one
 * line per case). opts may be NULL. An op with a backward is also checked
 * against central finite differences of the CPU's forward: the loss
 * L = sum(out * dout), up to 12 elements of each float input moved by
 * +-eps, each difference against the CPU backward's gradient. L's change
 * is summed over the outputs that moved only (the others cancel exactly),
 * so the float32 rounding allowed for is theirs, not the whole output's:
 * an elementwise op's wrong gradient fails at 70001 elements as at 20. An element
 * where the two one-sided differences disagree sits on a kink (relu's 0, a
 * pool's tie, a rounding step) and is not counted; a case with every
 * element on one fails. Buffers and constants get no gradient by contract
 * and are not moved; outputs that are not finite are left out of L. */
void ts_op_check(ts_op_checker *c, const char *label, const ts_tensor *t, const ts_op_case_opts *opts);

/* Every op of the table that computes, from its row's sample (ops.h's
 * ts_op_sample) at a sweep of sizes (tests/support/op_gen.c); a row none
 * of whose sizes builds fails, named. A new op needs no case of its own. */
void ts_op_cases_generated(ts_op_checker *c);
/* The hand-written cases, one function per family (tests/support/op_cases_*.c):
 * what the generated ones do not reach (special values, edge attributes
 * and shapes), each built and run through ts_op_check. */
void ts_op_cases_core(ts_op_checker *c);
void ts_op_cases_broadcast(ts_op_checker *c);
void ts_op_cases_tensor(ts_op_checker *c);
void ts_op_cases_cnn(ts_op_checker *c);
/* Each optimizer's step (SGD, momentum, dampening, Nesterov, weight decay,
 * Adam, AdamW; a first step and a later one) through both tables' opt_update. */
void ts_opt_cases(ts_op_checker *c);
/* The device's stats summaries against the CPU's (tests/support/stats_cases.c). */
void ts_stats_cases(ts_op_checker *c);

#endif
