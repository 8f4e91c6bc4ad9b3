/* run.c -- one run of a model: compile when it has not been or is stale,
 * bind the user's arrays to the inputs (a new micro-batch size recompiles
 * once; the program of the size before is kept and switched back to),
 * then hand the compiled program to the executor. */
#include "model/model.h"
#include "core/half.h"
#include "parallel/parallel.h"

#include "model/dump_debug.h"
#include "diag/hooks.h"
#include "diag/metrics.h"
#include "diag/trace.h"
#include "exec/exec.h"
#include "graph/ops.h"
#include "observe/observe.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Element i of an integer array exactly (u64 beyond int64's range: false). */
static bool exact_int(const ts_array *a, int64_t i, int64_t *v) {
    switch (a->dtype) {
    case TS_I64: *v = ((const int64_t *)a->data)[i]; return true;
    case TS_U64: {
        uint64_t u = ((const uint64_t *)a->data)[i];
        *v = (int64_t)u;
        return u <= (uint64_t)INT64_MAX;
    }
    case TS_U32: *v = ((const uint32_t *)a->data)[i]; return true;
    default: *v = (int64_t)ts_array_value(a, i); return true; /* 32 bits or fewer: exact in a double */
    }
}

/* An array of another dtype for an input (int64 token ids or labels, bools
 * as uint8, numpy bools for a bool input (held in f32 cells), f64 and 16-bit float values, integers of any width for an i32,
 * i64 or f32 input) converted to the input's dtype into the program's
 * buffer for the node: every value must be representable (an integer in
 * i32's or i64's range; for f32 a finite f64 within f32's range, an
 * infinity or NaN, an integer within 2^24), else an error that names the
 * first one; never wrapped. */
static ts_status convert_input(ts_prog *p, const ts_tensor *t, const ts_array *a, const ts_array **out) {
    bool to_bool = t->dtype == TS_BOOL && ts_dtype_is_integer(a->dtype);
    bool to_int = (t->dtype == TS_I32 || t->dtype == TS_I64 || to_bool) && ts_dtype_is_integer(a->dtype);
    bool to_f32 = t->dtype == TS_F32 && (a->dtype == TS_F64 || ts_dtype_is_half(a->dtype) || ts_dtype_is_integer(a->dtype));
    if (!to_int && !to_f32)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "run: input '%s' must be %s data, got %s%s", t->name, ts_dtype_name(t->dtype),
                        ts_dtype_name(a->dtype), t->dtype == TS_BOOL ? " (bool inputs also take integer data holding only 0 and 1)"
                                                 : t->dtype != TS_F32 ? " (integer inputs also take integer and bool data of any width)"
                                                                      : " (f32 inputs also take f64, f16, bf16 and integer data)");
    if (!p->converted && !(p->converted = ts_calloc((size_t)p->n_nodes, sizeof *p->converted))) return TS_ERR_OUT_OF_MEMORY;
    ts_array *c = &p->converted[t->id];
    ts_dtype held = t->dtype == TS_BOOL ? TS_F32 : t->dtype; /* a bool input's cells: f32 1.0 or 0.0 */
    int64_t n = ts_array_numel(a);
    if (ts_array_numel(c) < n || !c->data || c->dtype != held) {
        ts_free(c->data);
        c->data = ts_malloc((size_t)(n ? n : 1) * ts_dtype_size(held));
        if (!c->data) return TS_ERR_OUT_OF_MEMORY;
    }
    void *data = c->data;
    *c = *a;
    c->dtype = held;
    c->data = data;
    ts_dtype uns = ts_input_unsigned(t); /* a uint32 or uint64 input, held in i64 */
    for (int64_t i = 0; i < n; i++) {
        int64_t iv;
        if (uns && to_int) { /* every value of its type, a uint64 as its bits; none other */
            bool bits = a->dtype == TS_U64 && uns == TS_U64;
            if (!bits && (!exact_int(a, i, &iv) || iv < 0 || (uns == TS_U32 && iv > (int64_t)UINT32_MAX)))
                return ts_error(TS_ERR_INVALID_ARGUMENT, "run: input '%s' holds %.17g at [%lld]; this %s input takes integers from 0 to %s "
                                "(not wrapped)", t->name, ts_array_value(a, i), (long long)i, ts_dtype_name(uns),
                                uns == TS_U32 ? "4294967295" : "18446744073709551615");
            ((int64_t *)data)[i] = bits ? (int64_t)((const uint64_t *)a->data)[i] : iv;
            continue;
        }
        if (to_bool) {
            if (!exact_int(a, i, &iv) || (iv != 0 && iv != 1))
                return ts_error(TS_ERR_INVALID_ARGUMENT, "run: input '%s' holds %.17g at [%lld]; this bool input takes bool data, or integers "
                                "0 and 1 (give x != 0 for a truth value)", t->name, ts_array_value(a, i), (long long)i);
            ((float *)data)[i] = (float)iv;
            continue;
        }
        if (to_int && !exact_int(a, i, &iv))
            return ts_error(TS_ERR_INVALID_ARGUMENT, "run: input '%s' holds %llu at [%lld]; this i64 input takes integers up to 2^63-1 "
                            "(not wrapped)", t->name, (unsigned long long)((const uint64_t *)a->data)[i], (long long)i);
        if (to_int && t->dtype == TS_I64) {
            ((int64_t *)data)[i] = iv;
        } else if (to_int) {
            if (!(iv >= INT32_MIN && iv <= INT32_MAX))
                return ts_error(TS_ERR_INVALID_ARGUMENT, "run: input '%s' holds %lld at [%lld]; this i32 input takes integers from %d to %d "
                                "(ids and labels beyond are not wrapped; an i64 input holds them)", t->name, (long long)iv, (long long)i, INT32_MIN, INT32_MAX);
            ((int32_t *)data)[i] = (int32_t)iv;
        } else {
            double v = ts_array_value(a, i);
            if (isfinite(v) && fabs(v) > FLT_MAX)
                return ts_error(TS_ERR_INVALID_ARGUMENT, "run: input '%s' holds %g at [%lld], beyond f32's range (+-%g)", t->name, v,
                                (long long)i, (double)FLT_MAX);
            if (ts_dtype_is_integer(a->dtype) && fabs(v) > 16777216.0)
                return ts_error(TS_ERR_INVALID_ARGUMENT, "run: input '%s' holds the integer %.0f at [%lld], which f32 does not hold exactly "
                                "(|x| <= 2^24); give float data", t->name, v, (long long)i);
            ((float *)data)[i] = (float)v;
        }
    }
    *out = c;
    return TS_OK;
}

/* Matches the user's arrays to the model's inputs; a new micro-batch size
 * recompiles. */
static ts_status bind_inputs(ts_model *m, const char *const *names, const ts_array *inputs, int n) {
    ts_graph *g = m->run.g;
    const ts_array **bound = m->run.prog->bound;
    memset(bound, 0, (size_t)m->run.prog->n_nodes * sizeof *bound);
    int64_t S = m->run.training ? (int64_t)m->run.opts.device_iterations * m->run.opts.grad_accum : m->run.opts.device_iterations;
    S *= ts_replicas(&m->run); /* every micro-batch holds one slice per replica */
    for (int k = 0; k < n; k++) {
        if (!names || !names[k] || !inputs) return ts_error(TS_ERR_INVALID_ARGUMENT, "run: input %d has no name or array", k);
        const ts_tensor *t = ts_graph_find(g, names[k]);
        if (!t || t->op != TS_OP_INPUT) return ts_error(TS_ERR_NOT_FOUND, "run: '%s' is not an input of this graph", names[k]);
        if (bound[t->id]) return ts_error(TS_ERR_INVALID_ARGUMENT, "run: input '%s' given twice", names[k]);
        bound[t->id] = &inputs[k];
    }
    bool changed = false;
    char why[256] = "";
    for (size_t i = 0; i < g->n; i++) {
        const ts_tensor *t = g->t[i];
        if (t->op != TS_OP_INPUT || !m->run.prog->live[i]) continue;
        const ts_array *a = bound[i];
        if (!a) return ts_error(TS_ERR_INVALID_ARGUMENT, "run: input '%s' is missing", t->name);
        if (!a->data)
            return ts_error(TS_ERR_INVALID_ARGUMENT, "run: input '%s' must be %s data, got %s with no data", t->name, ts_dtype_name(t->dtype),
                            ts_dtype_name(a->dtype));
        if (a->dtype != t->dtype || t->dtype == TS_BOOL || ts_input_unsigned(t)) { /* a bool input's bytes become f32 cells */
            ts_status st = convert_input(m->run.prog, t, a, &bound[i]);
            if (st) return st;
            a = bound[i];
        }
        const ts_shape *cur = &m->run.prog->shape[i];
        int want_ndim = t->shape.ndim == 0 ? 1 : t->shape.ndim;
        bool ok = a->ndim == want_ndim && a->shape[0] > 0 && a->shape[0] % S == 0;
        for (int j = 1; ok && j < a->ndim; j++) ok = a->shape[j] == cur->d[j];
        if (!ok) {
            char b[96], c[128];
            ts_array_shape_str(a, c, sizeof c);
            return ts_error(TS_ERR_SHAPE, "run: input '%s' is %s; expected [%lld*B%s] (the %lld micro-batches%s of the run stacked on axis 0, B the micro-batch size), declared %s",
                            t->name, c, (long long)S, t->shape.ndim > 1 ? ",..." : "", (long long)S,
                            ts_replicas(&m->run) > 1 ? " x replicas" : "", ts_shape_str(&t->shape, b, sizeof b));
        }
        int64_t B = a->shape[0] / S;
        if (t->shape.ndim > 0 && B != cur->d[0]) {
            if (!m->input_override) {
                m->input_override = ts_calloc(g->n, sizeof *m->input_override);
                if (!m->input_override) return TS_ERR_OUT_OF_MEMORY;
                for (size_t q = 0; q < g->n; q++) m->input_override[q].ndim = -1;
                m->n_override = (int)g->n;
            }
            if (!changed) { /* the log line names the first input that changed */
                char was[96], now[96];
                ts_shape_str(cur, was, sizeof was);
                m->input_override[i] = *cur;
                m->input_override[i].d[0] = B;
                ts_shape_str(&m->input_override[i], now, sizeof now);
                snprintf(why, sizeof why, "input '%s' changed from %s to %s", t->name, was, now);
            }
            m->input_override[i] = *cur;
            m->input_override[i].d[0] = B;
            changed = true;
        }
    }
    if (changed) {
        m->stale_cause = "InputShapeChanged";
        ts_status st = ts_model_compile_for_shape(m, why);
        if (st) { /* keep the shapes the current program was built for */
            for (int q = 0; q < m->n_override && q < m->run.prog->n_nodes; q++)
                if (m->input_override[q].ndim >= 0) m->input_override[q] = m->run.prog->shape[q];
            return st;
        }
        return bind_inputs(m, names, inputs, n); /* into the new program */
    }
    return TS_OK;
}

/* Debug level: the shapes each run is given ("run 3 (training): x
 * f32[128,1,28,28], labels i32[128]"), as the layer template is at compile. */
static void log_run_shapes(const ts_model *m, const char *const *names, const ts_array *inputs, int n) {
    char line[1024], shape[128];
    size_t used = (size_t)snprintf(line, sizeof line, "run %lld (%s):", (long long)m->run.runs + 1, m->run.training ? "training" : "inference");
    for (int i = 0; i < n && used < sizeof line; i++)
        used += (size_t)snprintf(line + used, sizeof line - used, "%s %s %s", i ? "," : "", names[i],
                                 ts_array_shape_str(&inputs[i], shape, sizeof shape));
    ts_log_message(TS_LOG_DEBUG, line);
}

ts_status ts_model_cancel(ts_model *m) {
    if (!m) return TS_ERR_INVALID_ARGUMENT; /* no message: a signal handler may call this */
    atomic_store_explicit(&m->run.cancel, 1, memory_order_relaxed);
    return TS_OK;
}

/* A cancelled run's anchors: NaN (0 for integers) in every row of a sample
 * the run did not complete (see ts_model_cancel). */
static void blank_unreached_anchors(ts_model *m, int64_t mbs_done) {
    ts_prog *p = m->run.prog;
    int A = m->run.training ? m->run.opts.grad_accum : 1;
    for (int k = 0; k < p->n_anchors; k++) {
        const ts_anchor *an = &p->anchors[k];
        const ts_entry *e = &p->entries[an->entry];
        int64_t S = e->per_step ? p->samples_step : p->samples_mb, done = e->per_step ? mbs_done / A : mbs_done;
        int64_t first; /* the first row to blank */
        switch (an->mode) {
        case TS_OUTPUT_ALL: first = done; break;
        case TS_OUTPUT_EVERY_N: first = done / an->period; break;
        case TS_OUTPUT_SUM: first = done > 0 ? 1 : 0; break;
        default: first = done == S ? 1 : 0; break;
        }
        float blank = ts_entry_view_dtype(e) == TS_F32 && e->dtype != TS_BOOL ? NAN : 0.0f; /* 0.0f has the bits of integer 0, and is false */
        for (int64_t i = first * e->numel; i < an->rows * e->numel; i++) an->local[i] = blank;
    }
}

/* The observers around each op (core/op_chain.h), outermost first: each
 * adds its hooks to the run's chain where it has something to do, so the
 * executor runs only those. The clock of the op's time is innermost; the
 * after-hooks run from the inside out (op time, timeline, print, checks
 * and watches). A new observer is a row here and its own file's hooks. */
static ts_status (*const observers[])(ts_run *run, ts_op_chain *c) = {
    ts_diag_attach_crash,      /* diag/op_observers.c: the op a crash report names */
    ts_observe_attach_watches, /* observe/chain.c: a device's queue guarded, each output observed */
    ts_observe_attach_checks,  /* observe/chain.c: a backward kernel's gradients checked */
    ts_spike_watch_attach,     /* model/spike_watch.c: the step's signals judged before its update */
    ts_observe_attach_prints,  /* observe/chain.c: the print ops' lines */
    ts_diag_attach_trace,      /* diag/op_observers.c: each op's label and slice on the timeline */
    ts_exec_attach_op_times,   /* exec/op_times.c: each call's time (t0, t1) */
};

/* A traced run's kernel calls on the device's own timeline track
 * ("kernels (cuda:0)"), one slice each: their times on the device's clock
 * (the executor's events, exec/op_times.c), placed on the host's by the
 * run's last mark, which the host saw passed at p->marks_end_ns. */
static void draw_kernel_track(ts_model *m) {
    ts_prog *p = m->run.prog;
    uint64_t t_end = p ? p->marks_end_ns : 0;
    if (!t_end || !p->op_events) return;
    p->marks_end_ns = 0;
    if (!m->run.opts.trace_path || !ts_trace_owned_by(&m->run)) return;
    const ts_backend *be = p->backend;
    char track[96];
    snprintf(track, sizeof track, strcmp(be->name, "cuda") == 0 ? "kernels (%s:%d)" : "kernels (%s)", be->name, be->ordinal);
    int n = p->n_nodes + 1;
    for (int i = 0; i < n; i++)
        for (int64_t r = 0; r < p->op_calls[i] && r < p->op_rounds; r++) {
            const ts_op_event *e = &p->op_events[r * n + i];
            if (!e->traced) continue;
            uint64_t t0 = t_end - be->event_elapsed_ns(&e->start, &p->marks[3]), t1 = t_end - be->event_elapsed_ns(&e->end, &p->marks[3]);
            if (i == p->n_nodes) {
                ts_trace_kernel(track, TS_PASS_OPTIMIZER, NULL, NULL, NULL, 0, e->mb, t0, t1);
                continue;
            }
            const ts_tensor *t = m->run.g->t[i];
            double f = ts_prog_op_flops(p, t);
            ts_trace_kernel(track, e->backward ? TS_PASS_BACKWARD : TS_PASS_FORWARD, ts_op_get(t->op)->name, t->name, &p->shape[i],
                            e->backward ? 2 * f : f, e->mb, t0, t1);
        }
}

static ts_status attach_observers(ts_model *m) {
    m->run.chain = (ts_op_chain){0};
    for (size_t i = 0; i < sizeof observers / sizeof observers[0]; i++) {
        ts_status st = observers[i](&m->run, &m->run.chain);
        if (st) return st;
    }
    return TS_OK;
}

/* The on_start hook, once it succeeds; its failure stops the run. */
static ts_status run_on_start(ts_model *m) {
    m->in_start = true;
    ts_clear_error();
    ts_status st = m->run.opts.on_start(m, m->run.opts.on_start_user);
    m->in_start = false;
    if (!st) {
        m->started = true;
        return TS_OK;
    }
    char why[1024];
    snprintf(why, sizeof why, "%s", *ts_last_error() ? ts_last_error() : ts_status_name(st));
    return ts_error(st, "the on_start hook stopped the run before its first step: %s", why);
}

ts_status ts_model_run(ts_model *m, const char *const *names, const ts_array *inputs, int n) {
    if (!m) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_run: model is NULL");
    if (m->in_start) return ts_error(TS_ERR_STATE, "ts_model_run: called from the on_start hook; the hook must not run the model");
    if (n < 0) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_run: negative input count");
    if (m->run.opts.plan_only)
        return ts_error(TS_ERR_STATE, "ts_model_run: this model was compiled to plan only (ts_options_set_plan_only): it has no buffers to run "
                        "in; make it with options that leave plan_only 0");
    atomic_store_explicit(&m->run.cancel, 0, memory_order_relaxed); /* a cancel stops the run in progress only */
    ts_status st = TS_OK;
    if (!m->compiled || m->stale) st = ts_model_compile(m);
    if (st) return st;
    uint64_t t0 = ts_now_ns();
    int64_t steps0 = m->run.steps;
    st = bind_inputs(m, names, inputs, n);
    if (!st) st = ts_dist_agree(&m->run, m->run.prog); /* again after a new schedule */
    if (!st) st = ts_dump_before_run(m); /* arms the hold for a run it dumps */
    if (!st) st = ts_spike_watch_before_run(m); /* arms it for a spike's step */
    if (!st) st = ts_hold_prepare(&m->run);
    if (!st) st = ts_replicas_before_run(&m->run);
    if (!st && ts_log_enabled(TS_LOG_DEBUG)) log_run_shapes(m, names, inputs, n);
    if (!st) st = attach_observers(m);
    if (!st && !m->started && m->run.opts.on_start) st = run_on_start(m);
    if (!st) st = ts_exec_run(&m->run);
    draw_kernel_track(m);
    if (m->run.trace_done) { /* the last traced step's file (exec.c's trace_step_end), a device's with its kernels */
        ts_status tst = ts_trace_finish(&m->run);
        if (!st) st = tst;
    }
    if (st == TS_ERR_SPIKE) st = ts_spike_watch_after_stop(m);
    /* a cancelled run stopped on every rank at the same point: what it
     * computed is gathered and kept as after any run */
    bool cancelled = st == TS_ERR_CANCELLED;
    if (cancelled) {
        blank_unreached_anchors(m, m->run.cancel_at);
        st = TS_OK;
    }
    if (!st) st = ts_replicas_after_run(&m->run);
    if (!st) st = ts_pipeline_after_run(&m->run, ts_now_ns() - t0);
    if (!st) st = ts_outfeeds_after_run(&m->run);
    /* a failure of this rank alone: the other ranks wait for it in vain, so
     * they are told, and stop at their next wait with its report (a
     * TS_ERR_DIST is either seen by every rank or has marked the job) */
    if (st && st != TS_ERR_DIST && m->run.coll) m->run.coll->mark_failed(st, ts_last_error());
    if (st) return st;
    m->run.runs++;
    m->run.has_run = true;
    uint64_t run_ns = ts_now_ns() - t0;
    ts_metric_record("ExecuteTime", (double)run_ns);
    ts_counter_add("Runs", 1);
    st = ts_dump_after_run(m);
    if (!st) st = ts_diag_after_run(&m->run, run_ns);
    if (st || !cancelled) return st;
    ts_counter_add("RunsCancelled", 1);
    int D = m->run.opts.device_iterations, A = m->run.training ? m->run.opts.grad_accum : 1;
    if (!m->run.training)
        return ts_error(TS_ERR_CANCELLED, "run %lld cancelled after %lld of %d batches; anchors hold the completed ones (other rows NaN)",
                        (long long)m->run.runs, (long long)m->run.cancel_at, D);
    return ts_error(TS_ERR_CANCELLED,
                    "run %lld cancelled after %lld of %d micro-batches (%lld of %d optimizer steps completed); the weights are those of the "
                    "last completed step, anchors hold the completed samples (other rows NaN)",
                    (long long)m->run.runs, (long long)m->run.cancel_at, D * A, (long long)(m->run.steps - steps0), D);
}
