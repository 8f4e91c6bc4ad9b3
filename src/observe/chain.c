/* chain.c -- the observers' hook for each tensor the moment it is final,
 * and the observe layer's observers on the op chain (core/op_chain.h):
 * the watches (the device's queue guarded before a kernel writes, a
 * kernel's output observed after it), the numeric checks of a backward
 * kernel's gradients, and the print ops' lines. Each joins a run's chain
 * only where the program has something for it to do. */
#include "observe/observe.h"

#include "backend/backend.h"
#include "core/trace.h"
#include "graph/ops.h"

#include <stdint.h>

/* Entry e's observers. On a device whose memory the host cannot read:
 * on the device what can be (ts_observe_device), the rest on a host copy
 * (ts_device_host_view). */
static ts_status observe_entry_now(ts_run *run, int e, int64_t sample) {
    ts_entry *en = &run->prog->entries[e];
    if (ts_dtype_is_half(en->dtype)) { /* 16-bit cells (the CPU's): observed through an f32 view, widened exactly */
        void *cells = en->data;
        ts_dtype t = en->dtype;
        run->dev.backend->unpack_half(run->dev.stream, t, run->prog->stage16, cells, en->numel);
        en->data = run->prog->stage16, en->dtype = TS_F32;
        ts_hold_capture(run, e, sample);
        ts_status st = ts_hold_comparing(run) ? TS_OK : ts_observe(run, e, sample);
        en->data = cells, en->dtype = t;
        return st;
    }
    ts_hold_capture(run, e, sample); /* before its check: a held run keeps the NaN it stops at */
    if (ts_hold_comparing(run)) return TS_OK; /* ts_model_rerun: compared, nothing else observes it */
    if (run->dev.backend->host_addressable) return ts_observe(run, e, sample);
    if (ts_observe_device(run, e, sample)) return TS_OK; /* nothing the host must read */
    if (en->on_host) return ts_observe(run, e, sample);
    float *dev = en->data;
    const float *h = ts_device_host_view(run, en);
    if (!h) return ts_error_wrap(TS_ERR_INTERNAL, "run: reading '%s' from %s", en->name, run->dev.backend->name);
    en->data = (float *)(uintptr_t)h;
    ts_status st = ts_observe(run, e, sample);
    en->data = dev;
    return st;
}

/* ... and its slice on the timeline while tracing (core/trace.h). */
ts_status ts_observe_entry(ts_run *run, int e, int64_t sample) {
    if (!ts_trace_live()) return observe_entry_now(run, e, sample);
    uint64_t t0 = ts_now_ns();
    ts_status st = observe_entry_now(run, e, sample);
    ts_trace_slice(TS_TRACE_OBSERVE, NULL, run->prog->entries[e].name, NULL, 0, sample, t0, ts_now_ns());
    return st;
}

/* ---- the watches: a device's queue guarded before a kernel writes (a
 * forward its output, unless a view that writes nothing; a backward its
 * inputs' gradients), and the kernel's output observed after its forward */

static ts_status guard_writes(void *ctx, ts_run *run, ts_op_call *c) {
    (void)ctx;
    const ts_prog *p = run->prog;
    if (c->node < 0 || !p->n_queued) return TS_OK;
    const ts_tensor *t = run->g->t[c->node];
    if (!c->backward) {
        if (!(ts_op_get(t->op)->view && c->k->out == c->k->in[0])) ts_observe_guard(run, &p->entries[p->value_entry[c->node]]);
        return TS_OK;
    }
    for (int j = 0; p->n_queued && j < t->n_in; j++)
        if (p->grad_entry[t->in[j]] >= 0) ts_observe_guard(run, &p->entries[p->grad_entry[t->in[j]]]);
    return TS_OK;
}

static ts_status observe_output(void *ctx, ts_run *run, ts_op_call *c) {
    (void)ctx;
    if (c->node < 0 || c->backward) return TS_OK;
    int e = run->prog->value_entry[c->node];
    return run->prog->entries[e].observed ? ts_observe_entry(run, e, c->mb) : TS_OK;
}

ts_status ts_observe_attach_watches(ts_run *run, ts_op_chain *c) {
    const ts_prog *p = run->prog;
    bool observed = run->opts.check != TS_CHECK_OFF; /* an op by op re-execution observes every tensor */
    for (int e = 0; e < p->n_entries && !observed; e++) observed = p->entries[e].observed;
    return ts_op_chain_add(c, p->queued ? guard_writes : NULL, observed ? observe_output : NULL, NULL);
}

/* ---- the numeric checks: after a backward kernel, the gradients it added
 * into, a NaN/Inf blamed on it while what it read is alive */

static ts_status check_gradients(void *ctx, ts_run *run, ts_op_call *c) {
    (void)ctx;
    return c->node >= 0 && c->backward ? ts_check_backward(run, c->node, c->mb) : TS_OK;
}

/* on where the checks are (the op by op re-execution comes after a check failed) */
ts_status ts_observe_attach_checks(ts_run *run, ts_op_chain *c) {
    return run->opts.check != TS_CHECK_OFF ? ts_op_chain_add(c, NULL, check_gradients, NULL) : TS_OK;
}

/* ---- the print ops: a line of the value after the forward, of the
 * gradient after the backward */

static ts_status print_line(void *ctx, ts_run *run, ts_op_call *c) {
    (void)ctx;
    if (c->node >= 0 && run->g->t[c->node]->op == TS_OP_PRINT) ts_observe_print(run, c->node, c->backward, c->mb);
    return TS_OK;
}

ts_status ts_observe_attach_prints(ts_run *run, ts_op_chain *c) {
    const ts_prog *p = run->prog;
    for (int k = 0; k < p->n_order; k++)
        if (run->g->t[p->order[k]]->op == TS_OP_PRINT) return ts_op_chain_add(c, NULL, print_line, NULL);
    return TS_OK;
}
