/* op_chain.h -- the observers around each op the executor runs: one list
 * of hooks called before the op, one called after it (the pattern of
 * ggml's per-node eval callback). The executor knows no observer: it runs
 * whatever the lists hold, and an observer joins by adding its pair of
 * hooks (docs/architecture.md#the-observer-chain). Internal: not API.
 *
 * The lists nest like brackets: an observer added earlier is further out,
 * so its before-hook runs earlier and its after-hook later than those of
 * an observer added after it. The model layer adds them in a fixed order
 * before each run (src/model/run.c); the innermost is the clock of
 * the op's time, so every other hook's cost stays out of it.
 *
 * An empty list costs the executor one loop that does not iterate. */
#ifndef TS_OP_CHAIN_H
#define TS_OP_CHAIN_H

#include "core/core.h"

struct ts_run;
struct ts_kctx;

/* The call the hooks are around. */
enum { TS_CALL_OPTIMIZER = -1 };
typedef struct ts_op_call {
    int node;                  /* the graph node whose kernel runs, or TS_CALL_OPTIMIZER: the optimizer's step over every parameter */
    bool backward;             /* its backward kernel (false: its forward) */
    int64_t mb;                /* the micro-batch of the run (the optimizer's step: the step of the run) */
    const struct ts_kctx *k;   /* the kernel's arguments (NULL for the optimizer's step) */
    uint64_t t0, t1;           /* the host's clock just before and after the call (set by the op-time observer, 0 without it) */
    bool traced;               /* made while the timeline records (the executor's call) */
} ts_op_call;

/* A hook; a status other than TS_OK stops the run with it (the after-hooks
 * still to run for this op do not run). ctx: what the observer gave
 * ts_op_chain_add; run: the model's runs (observe/run.h). */
typedef ts_status (*ts_op_hook)(void *ctx, struct ts_run *run, ts_op_call *c);

typedef struct ts_op_hook_at {
    ts_op_hook fn;
    void *ctx;
} ts_op_hook_at;

#define TS_OP_HOOKS 12 /* hooks a list holds: the library's observers use 7 */

typedef struct ts_op_chain {
    int n_before, n_after;
    ts_op_hook_at before[TS_OP_HOOKS], after[TS_OP_HOOKS];
} ts_op_chain;

/* Adds an observer's hooks (either may be NULL) inside those added before;
 * TS_ERR_INTERNAL when a list is full. */
static inline ts_status ts_op_chain_add(ts_op_chain *c, ts_op_hook before, ts_op_hook after, void *ctx) {
    if ((before && c->n_before == TS_OP_HOOKS) || (after && c->n_after == TS_OP_HOOKS))
        return ts_error(TS_ERR_INTERNAL, "run: more than %d observers around each op (raise TS_OP_HOOKS)", TS_OP_HOOKS);
    if (before) c->before[c->n_before++] = (ts_op_hook_at){before, ctx};
    if (after) { /* inner: first of the after-hooks */
        for (int i = c->n_after++; i > 0; i--) c->after[i] = c->after[i - 1];
        c->after[0] = (ts_op_hook_at){after, ctx};
    }
    return TS_OK;
}

/* Runs the n hooks of a list, in order, until one fails. */
static inline ts_status ts_op_chain_run(const ts_op_hook_at *h, int n, struct ts_run *run, ts_op_call *c) {
    for (int i = 0; i < n; i++) {
        ts_status st = h[i].fn(h[i].ctx, run, c);
        if (st) return st;
    }
    return TS_OK;
}

#endif
