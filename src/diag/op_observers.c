/* op_observers.c -- the diagnostics' observers on the op chain
 * (core/op_chain.h): the op a crash report names (diag/crash.c), and each
 * op's label and slice on the timeline (core/trace.h). */
#include "diag/hooks.h"

#include "core/crash_note.h"
#include "diag/trace.h"
#include "graph/ops.h"

/* ---- the crash report's current op, noted before each call */

static ts_status note_op(void *ctx, ts_run *run, ts_op_call *c) {
    (void)ctx;
    if (c->node < 0) {
        ts_crash_set_current_op("Optimizer", "(all parameters)", NULL);
        return TS_OK;
    }
    const ts_tensor *t = run->g->t[c->node];
    ts_crash_set_current_op(ts_op_get(t->op)->name, t->name, t->file);
    return TS_OK;
}

ts_status ts_diag_attach_crash(ts_run *run, ts_op_chain *c) {
    (void)run;
    return ts_op_chain_add(c, note_op, NULL, NULL);
}

/* ---- the timeline: before a kernel's call, its label for the workers'
 * slices; after it, its forward or backward slice with its name, shape
 * and FLOPs, over the op-time observer's clock reads (the optimizer's
 * step is the executor's own slice) */

static ts_status label_op(void *ctx, ts_run *run, ts_op_call *c) {
    (void)ctx;
    if (c->node >= 0 && ts_trace_live()) ts_trace_set_op(run->g->t[c->node]->name);
    return TS_OK;
}

static ts_status slice_op(void *ctx, ts_run *run, ts_op_call *c) {
    (void)ctx;
    if (c->node < 0 || !ts_trace_live()) return TS_OK;
    const ts_tensor *t = run->g->t[c->node];
    double f = ts_prog_op_flops(run->prog, t);
    ts_trace_slice(c->backward ? TS_TRACE_BACKWARD : TS_TRACE_FORWARD, ts_op_get(t->op)->name, t->name, &run->prog->shape[c->node],
                   c->backward ? 2 * f : f, c->mb, c->t0, c->t1);
    return TS_OK;
}

/* on for a model that traces its steps, or while another's trace is open */
ts_status ts_diag_attach_trace(ts_run *run, ts_op_chain *c) {
    return run->opts.trace_path || ts_trace_live() ? ts_op_chain_add(c, label_op, slice_op, NULL) : TS_OK;
}
