/* model.c -- training and inference models: creation, compile and
 * recompile, anchors added after compile. The model layer is the one that
 * drives compile/ and exec/ (run.c) and reads results back (retrieve.c). */
#include "model/model.h"
#include "parallel/parallel.h"

#include "backend/registry/registry.h"
#include "observe/observe.h"
#include "observe/outfeed.h"
#include "model/dump_debug.h"
#include "diag/hooks.h"
#include "diag/memory.h"
#include "diag/metrics.h"
#include "diag/trace.h"
#include "graph/ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The run's device handle, made once with the model: the backend the
 * device string names, the host's worker threads, and the stream the
 * model's work goes on (the backend's own; where it makes none, the CPU,
 * those threads). */
static ts_status open_device(ts_run *run, const char *device) {
    const ts_backend *be;
    ts_status st = ts_backend_for(device, &be);
    if (st) return st;
    int n = run->opts.threads ? run->opts.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if ((st = ts_backend_host_pool(n < 1 ? 1 : n, &run->pool))) return st;
    void *stream = run->pool;
    if (be->stream_create && (st = be->stream_create(&stream))) {
        ts_pool_free(run->pool);
        run->pool = NULL;
        return st;
    }
    run->dev = (ts_device){.backend = be, .stream = stream};
    return TS_OK;
}

static void close_device(ts_run *run) {
    if (run->dev.backend->stream_create) run->dev.backend->stream_destroy(run->dev.stream); /* its work completed first */
    ts_pool_free(run->pool);
}

static ts_status model_new(ts_model **out, ts_graph *g, const ts_options *o) {
    *out = NULL;
    if (!g) return ts_error(TS_ERR_INVALID_ARGUMENT, "model: graph is NULL");
    ts_status st = ts_graph_status(g);
    if (st) return ts_error_wrap(st, "model: the graph has an error from building it");
    ts_model *m = ts_calloc(1, sizeof *m);
    if (!m) return TS_ERR_OUT_OF_MEMORY;
    m->run.g = g;
    m->run.par = ts_dist_parallel();
    m->run.loss = -1;
    m->run.failed_entry = m->run.failed_op = -1;
    if (o) st = ts_options_copy(&m->run.opts, o);
    else {
        ts_options *d = ts_options_new();
        st = d ? ts_options_copy(&m->run.opts, d) : TS_ERR_OUT_OF_MEMORY;
        ts_options_free(d);
    }
    if (st) {
        ts_free(m);
        return st;
    }
    const char *env = getenv("TS_CHECK_NUMERICS");
    if (env && *env) {
        if (ts_check_numerics_parse(env, &m->run.opts.check)) ts_logf(TS_LOG_WARN, "TS_CHECK_NUMERICS: %s; ignored", ts_last_error());
    }
    if (ts_env_flag("TS_OPBYOP")) m->run.opts.check = TS_CHECK_OP; /* every op, checked as it runs */
    if (!m->run.opts.precision_set && ts_env_flag("TS_USE_BF16")) m->run.opts.precision = TS_BF16; /* autocast, not XLA_USE_BF16's storage */
    m->run.scaling = m->run.opts.loss_scaling == 1 || (m->run.opts.loss_scaling == -1 && m->run.opts.precision == TS_F16);
    m->run.loss_scale = m->run.opts.scale_init;
    if ((st = ts_graph_autocast(g, m->run.opts.precision))) {
        ts_options_clear(&m->run.opts);
        ts_free(m);
        return ts_error_wrap(st, "model");
    }
    const char *device = m->run.opts.device[0] ? m->run.opts.device : getenv("TS_DEVICE");
    st = open_device(&m->run, device && *device ? device : "cpu");
    if (st) {
        st = ts_error_wrap(st, "model: device %s%s", device && *device ? device : "cpu",
                           m->run.opts.device[0] ? "" : " (from TS_DEVICE)");
        ts_options_clear(&m->run.opts);
        ts_free(m);
        return st;
    }
    g->n_models++;
    *out = m;
    return TS_OK;
}

static bool in_graph(const ts_graph *g, const ts_tensor *t) { return t && t->g == g && t->id >= 0 && (size_t)t->id < g->n && g->t[t->id] == t; }

ts_status ts_model_training(ts_model **out, ts_graph *g, ts_tensor *loss, const ts_options *o, ts_optimizer opt) {
    if (!out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_training: out is NULL");
    *out = NULL;
    if (g && !in_graph(g, loss)) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_training: the loss is NULL or not a tensor of this graph");
    ts_status st = ts_optimizer_check(&opt);
    if (st) return st;
    ts_model *m;
    if ((st = model_new(&m, g, o))) return st;
    m->run.training = true;
    m->run.loss = loss->id;
    m->run.opt = opt;
    m->run.base_lr = opt.lr;
    *out = m;
    return TS_OK;
}

ts_status ts_model_inference(ts_model **out, ts_graph *g, ts_tensor *const *outputs, int n_outputs, const ts_options *o) {
    if (!out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_inference: out is NULL");
    *out = NULL;
    if (n_outputs < 1 || n_outputs > 64 || !outputs) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_inference: give 1 to 64 outputs");
    for (int i = 0; g && i < n_outputs; i++)
        if (!in_graph(g, outputs[i])) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_inference: output %d is NULL or not a tensor of this graph", i);
    if (o && o->grad_accum != 1)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_inference: gradient accumulation (%d) only applies to training", o->grad_accum);
    ts_model *m;
    ts_status st = model_new(&m, g, o);
    if (st) return st;
    m->run.outputs = ts_calloc((size_t)n_outputs, sizeof *m->run.outputs);
    if (!m->run.outputs) {
        ts_model_free(m);
        return TS_ERR_OUT_OF_MEMORY;
    }
    for (int i = 0; i < n_outputs; i++) m->run.outputs[i] = outputs[i]->id;
    m->run.n_outputs = n_outputs;
    *out = m;
    return TS_OK;
}

ts_status ts_model_finish(ts_model *m) {
    if (!m) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_finish: no model");
    m->run.trace_done = true;
    ts_status st = ts_dump_finish(m); /* the debugger dump's last files */
    ts_status tr = ts_trace_finish(&m->run);
    return st ? st : tr;
}

void ts_model_free(ts_model *m) {
    if (!m) return;
    if (ts_trace_finish(&m->run)) /* a trace still open: a cancelled or failed run, or steps to the end */
        ts_logf(TS_LOG_WARN, "%s", ts_last_error());
    if (m->run.g && m->run.g->values_owner == &m->run && ts_graph_values_current(m->run.g)) /* the device's values, kept before its copies go */
        ts_logf(TS_LOG_ERROR, "model freed: %s", ts_last_error());
    ts_prog_free(m->run.prog);
    ts_prog_free(m->spare);
    ts_hold_free(&m->run);
    ts_spike_watch_free(m);
    ts_dump_free(m);
    ts_opt_state_free(&m->run.state, &m->run.n_state);
    close_device(&m->run);
    ts_options_clear(&m->run.opts);
    if (m->run.g) m->run.g->n_models--;
    ts_free(m->run.outputs);
    ts_free(m->input_override);
    ts_free(m->run.votes);
    ts_free(m);
}

static void log_template(const ts_model *m, const ts_prog *p) {
    if (!ts_log_enabled(TS_LOG_DEBUG)) return;
    ts_logf(TS_LOG_DEBUG, "layer template (%d ops, %s model):", p->n_order, m->run.training ? "training" : "inference");
    ts_logf(TS_LOG_DEBUG, "  %-28s %-12s %-18s %-5s %12s", "name", "op", "shape", "dtype", "bytes");
    for (int k = 0; k < p->n_order; k++) {
        const ts_tensor *t = m->run.g->t[p->order[k]];
        char b[96];
        ts_logf(TS_LOG_DEBUG, "  %-28s %-12s %-18s %-5s %12lld", t->name, ts_op_get(t->op)->name,
                ts_shape_str(&p->shape[t->id], b, sizeof b), ts_dtype_name(t->dtype),
                (long long)ts_shape_numel(&p->shape[t->id]) * (long long)ts_dtype_cell_bytes(t->dtype));
    }
    ts_logf(TS_LOG_DEBUG, "arenas: activations %zu bytes (%zu without reuse), gradients %zu, anchors %zu", p->bytes_activations,
            p->bytes_activations_unplanned, p->bytes_grads, p->bytes_anchors);
}

/* The job's ranks' part of a compile (ts_model_def's ranks). */
static ts_status compile_ranks(void *model, ts_prog *p) {
    ts_model *m = model;
    return m->run.par->compile(&m->run, p);
}

ts_model_def ts_model_definition(ts_model *m) {
    return (ts_model_def){.g = m->run.g, .opts = &m->run.opts, .opt = &m->run.opt, .training = m->run.training, .loss = m->run.loss, .outputs = m->run.outputs,
                          .n_outputs = m->run.n_outputs, .input_override = m->input_override, .n_override = m->n_override, .scaling = m->run.scaling,
                          .dev = m->run.dev, .threads = ts_pool_threads(m->run.pool), .state = &m->run.state, .n_state = &m->run.n_state,
                          .ranks = compile_ranks, .ranks_ctx = m};
}

/* Compiles the model's program; keep: the current one becomes the spare
 * (a new micro-batch size), else it and the spare go. */
static ts_status compile_program(ts_model *m, bool keep) {
    uint64_t t0 = ts_now_ns();
    ts_model_def def = ts_model_definition(m);
    ts_prog *p;
    ts_status st = ts_prog_build(&def, &p);
    for (int e = 0; !st && e < p->n_entries; e++) /* slots of the size of the records each queue takes */
        for (int k = 0; !st && k < p->entries[e].n_outfeeds; k++)
            st = ts_outfeed_reserve(p->entries[e].outfeeds[k].q, (size_t)ts_entry_cells(&p->entries[e]) * sizeof(float));
    if (!st && !m->run.opts.plan_only) st = ts_device_bind(&def, p); /* a plan-only program has no buffers to bind */
    if (st) {
        if (p) ts_prog_free(p);
        return st;
    }
    if (m->run.prog) st = ts_device_fetch_state(m->run.prog, m->run.dev); /* the new program sends it again */
    if (!st && m->run.prog && m->run.g->values_owner == &m->run) st = ts_graph_values_current(m->run.g); /* the parameters too */
    if (st) {
        ts_prog_free(p);
        return st;
    }
    p->recompiled = m->run.prog && m->run.prog->recs[0].key; /* the old program replayed runs: this one records them again */
    ts_layer_shapes_changed(&m->run, m->run.prog, p, m->stale_cause, false);
    ts_prog_free(m->spare);
    m->spare = NULL;
    if (keep && m->run.prog) {
        ts_hold_leave(&m->run);
        m->spare = m->run.prog;
    } else {
        ts_prog_free(m->run.prog);
    }
    m->run.prog = p;
    bool recompile = m->compiled;
    m->compiled = true;
    m->stale = false;
    m->run.has_run = false;
    ts_metric_record("CompileTime", (double)(ts_now_ns() - t0));
    ts_memory_plan_metrics(m);
    ts_counter_add("Compilations", 1);
    if (recompile) ts_counter_add_cause("Recompilations", m->stale_cause ? m->stale_cause : "Requested", 1);
    if (recompile && m->run.opts.trace_path && ts_trace_owned_by(&m->run)) /* between steps: recorded while paused */
        ts_trace_slice(TS_TRACE_RECOMPILE, NULL, m->stale_cause ? m->stale_cause : "Requested", NULL, 0, 0, t0, ts_now_ns());
    m->stale_cause = NULL;
    log_template(m, p);
    return ts_diag_after_compile(&m->run);
}

ts_status ts_model_compile(ts_model *m) {
    if (!m) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_compile: model is NULL");
    return compile_program(m, false);
}

/* Whether p was compiled for the input shapes the model asks for now. */
static bool fits(const ts_model *m, const ts_prog *p) {
    if (!p || p->n_nodes != (int)m->run.g->n) return false;
    for (int i = 0; i < p->n_nodes && i < m->n_override; i++)
        if (m->input_override[i].ndim >= 0 && !ts_shape_equal(&m->input_override[i], &p->shape[i])) return false;
    return true;
}

ts_status ts_model_compile_for_shape(ts_model *m, const char *why) {
    const char *kind = m->run.training ? "training" : "inference";
    if (!fits(m, m->spare)) {
        /* said at info the first time, at debug after */
        ts_logf(m->recompile_logged ? TS_LOG_DEBUG : TS_LOG_INFO, "recompiling the %s model: %s (micro-batch size); the program for the "
                "size before is kept, so going back to it compiles nothing%s", kind, why,
                m->recompile_logged ? "" : "; later recompilations are logged at debug level");
        m->recompile_logged = true;
        return compile_program(m, true);
    }
    ts_logf(TS_LOG_DEBUG, "switching the %s model to its program compiled before: %s (micro-batch size)", kind, why);
    /* the state the current program's device holds back on the host, then
     * the spare sends all of it again before its first run */
    ts_status st = ts_device_fetch_state(m->run.prog, m->run.dev);
    if (!st && m->run.g->values_owner == &m->run) st = ts_graph_values_current(m->run.g);
    if (st) return st;
    ts_layer_shapes_changed(&m->run, m->run.prog, m->spare, m->stale_cause, true);
    ts_hold_leave(&m->run);
    ts_prog *p = m->spare;
    m->spare = m->run.prog;
    m->run.prog = p;
    p->sent = false;
    m->run.has_run = false;
    ts_counter_add_cause("ProgramSwitches", m->stale_cause ? m->stale_cause : "Requested", 1);
    m->stale_cause = NULL;
    return TS_OK;
}

ts_status ts_model_anchor(ts_model *m, const char *short_name, const char *tensor_name, ts_output_mode mode, int period) {
    if (!m) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_anchor: model is NULL");
    ts_status st = ts_anchor_spec_add(&m->run.opts.anchors, &m->run.opts.n_anchors, &m->run.opts.cap_anchors, short_name, tensor_name, mode, period);
    if (st || !m->compiled) return st;
    /* recompile now, so a bad name fails here and the old program stays */
    m->stale_cause = "AnchorsChanged";
    st = ts_model_compile(m);
    if (st) {
        ts_anchor_spec *a = &m->run.opts.anchors[--m->run.opts.n_anchors];
        ts_free(a->short_name);
        ts_free(a->tensor_name);
        m->stale_cause = NULL;
    }
    return st;
}

/* ---- the learning rate between runs */

ts_status ts_model_set_lr_schedule(ts_model *m, const ts_lr_schedule *s) {
    if (!m) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_set_lr_schedule: model is NULL");
    if (!m->run.training) return ts_error(TS_ERR_STATE, "ts_model_set_lr_schedule: an inference model has no optimizer");
    ts_lr_schedule c = s ? *s : (ts_lr_schedule){.kind = TS_LR_CONSTANT};
    if (c.kind < TS_LR_CONSTANT || c.kind > TS_LR_COSINE) return ts_error(TS_ERR_INVALID_ARGUMENT, "unknown learning-rate schedule kind %d", (int)c.kind);
    if (c.warmup_steps < 0) return ts_error(TS_ERR_INVALID_ARGUMENT, "warmup steps must be >= 0, got %lld", (long long)c.warmup_steps);
    if (c.kind == TS_LR_STEP && (c.step_size < 1 || !(c.gamma >= 0) || c.gamma > 1e6))
        return ts_error(TS_ERR_INVALID_ARGUMENT, "step schedule: step size must be >= 1 and gamma a finite value >= 0 (got %lld, %g)",
                        (long long)c.step_size, c.gamma);
    if (c.kind == TS_LR_COSINE && (c.total_steps < 1 || !(c.min_lr >= 0) || c.min_lr > 1e6))
        return ts_error(TS_ERR_INVALID_ARGUMENT, "cosine schedule: total steps must be >= 1 and the minimum rate a finite value >= 0 (got %lld, %g)",
                        (long long)c.total_steps, c.min_lr);
    m->run.sched = c;
    m->run.dist_agreed = false; /* the ranks compare it before the next run */
    m->run.opt.lr = (float)ts_lr_at(&m->run.sched, m->run.base_lr, m->run.steps);
    return TS_OK;
}

double ts_model_learning_rate(const ts_model *m) { return m ? (double)m->run.opt.lr : 0.0; }

ts_status ts_model_set_base_lr(ts_model *m, double lr) {
    if (!m) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_set_base_lr: model is NULL");
    if (!m->run.training) return ts_error(TS_ERR_STATE, "ts_model_set_base_lr: an inference model has no optimizer");
    if (!(lr >= 0) || lr > 1e6) return ts_error(TS_ERR_INVALID_ARGUMENT, "the learning rate must be a finite value in [0, 1e6], got %g", lr);
    m->run.base_lr = (float)lr;
    m->run.dist_agreed = false; /* the ranks compare it before the next run */
    m->run.opt.lr = (float)ts_lr_at(&m->run.sched, m->run.base_lr, m->run.steps);
    return TS_OK;
}

double ts_model_base_lr(const ts_model *m) { return m ? (double)m->run.base_lr : 0.0; }
