/* retrieve.c -- what a user reads back from a model: tensor names, anchored
 * values, watch results, lint warnings, watches that match nothing, the
 * tensor a numeric check stopped at, counters. */
#include "model/model.h"
#include "compile/stability.h"
#include "observe/observe.h"

#include <stdio.h>
#include <string.h>

ts_status ts_model_tensor_names(const ts_model *m, const char *const **names, size_t *n) {
    if (!m || !names || !n) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_tensor_names: NULL argument");
    if (!m->compiled || !m->run.prog) return ts_error(TS_ERR_STATE, "tensor names are known after ts_model_compile; compile the model first");
    *names = m->run.prog->sorted_names;
    *n = (size_t)m->run.prog->n_entries;
    return TS_OK;
}

/* An anchor of a tensor with an output dtype (ts_tensor_set_output_dtype)
 * or of a bool tensor (its f32 cells): its values converted exactly into
 * the anchor's typed buffer as `dtype`, or an error that names the first
 * value the dtype does not hold; an i64 tensor's values as u64 are their
 * bits (uint64 values are held so). */
static ts_status typed_copy(ts_anchor *a, const ts_tensor *t, ts_dtype dtype, ts_array *out) {
    int64_t n = ts_array_numel(out);
    if (!a->typed && !(a->typed = ts_malloc((size_t)(n ? n : 1) * ts_dtype_size(dtype)))) return TS_ERR_OUT_OF_MEMORY;
    ts_array typed = *out;
    typed.dtype = dtype;
    typed.data = a->typed;
    for (int64_t i = 0; i < n; i++) {
        if (out->dtype == TS_I64 && dtype == TS_U64) { /* a uint64 is held in i64 as its bits (ts_cast) */
            ((uint64_t *)typed.data)[i] = (uint64_t)((const int64_t *)out->data)[i];
            continue;
        }
        double v = ts_array_value(out, i);
        if (!ts_dtype_holds(dtype, v))
            return ts_error(TS_ERR_INVALID_ARGUMENT, "output '%s' holds %.9g at [%lld], which its declared dtype %s does not hold exactly "
                            "(the model computes it as %s)", ts_tensor_alias(t) ? ts_tensor_alias(t) : t->name, v, (long long)i, ts_dtype_name(dtype), ts_dtype_name(out->dtype));
        ts_array_set_value(&typed, i, v);
    }
    *out = typed;
    return TS_OK;
}

ts_status ts_model_anchored(const ts_model *m, const char *short_name, ts_array *out) {
    if (!m || !short_name || !out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_anchored: NULL argument");
    const ts_prog *p = m->run.prog;
    int k = 0;
    while (p && k < p->n_anchors && strcmp(p->anchors[k].short_name, short_name) != 0) k++;
    if (!p || k == p->n_anchors) {
        char known[512] = "";
        size_t used = 0;
        for (int q = 0; p && q < p->n_anchors && used < sizeof known - 64; q++)
            used += (size_t)snprintf(known + used, sizeof known - used, "%s'%s'", q ? ", " : "", p->anchors[q].short_name);
        return ts_error(TS_ERR_NOT_FOUND, "no anchor named '%s'%s%s", short_name, used ? "; anchors: " : " (the model is not compiled)", known);
    }
    if (!m->run.has_run) return ts_error(TS_ERR_STATE, "anchor '%s' has no value yet: run the model first", short_name);
    ts_anchor *a = &p->anchors[k];
    const ts_entry *e = &p->entries[a->entry];
    memset(out, 0, sizeof *out);
    out->dtype = ts_entry_view_dtype(e);
    out->data = a->data;
    int d = 0;
    if (a->keeps_axis) out->shape[d++] = a->rows;
    if (ts_replicas(&m->run) > 1) out->shape[d++] = ts_replicas(&m->run);
    for (int i = 0; i < e->shape.ndim && d < TS_MAX_DIMS; i++) out->shape[d++] = e->shape.d[i];
    out->ndim = d;
    const ts_tensor *t = e->kind == TS_KIND_VALUE ? m->run.g->t[e->node] : NULL;
    ts_dtype dtype = !t ? out->dtype : t->typed ? t->out_dtype : t->dtype == TS_BOOL ? TS_BOOL : out->dtype;
    return dtype != out->dtype ? typed_copy(a, t, dtype, out) : TS_OK;
}

ts_status ts_model_watch_results(const ts_model *m, const ts_watch_result **out, size_t *n) {
    if (!m || !out || !n) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_watch_results: NULL argument");
    if (!m->run.prog) return ts_error(TS_ERR_STATE, "watch results exist after compile and run");
    bool replicas = m->run.coll && m->run.prog->rep_results;
    ts_observe_device_results(&m->run); /* a device's last run's: finished when read */
    const ts_stab *s = m->run.prog->stab;
    if (s) { /* the stability rows after the user's watches; the watches only they read are not rows */
        ts_stab_rows(m->run.prog, m->run.runs);
        *out = m->run.prog->watch_results + s->n_hidden;
        *n = (size_t)(m->run.prog->n_watch - s->n_hidden + s->n_rows);
        return TS_OK;
    }
    *out = replicas ? m->run.prog->rep_results : m->run.prog->watch_results;
    *n = (size_t)m->run.prog->n_watch * (replicas ? (size_t)ts_replicas(&m->run) + 1 : 1);
    return TS_OK;
}

ts_status ts_model_lint(const ts_model *m, const char *const **warnings, size_t *n) {
    if (!m || !warnings || !n) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_lint: NULL argument");
    if (!m->compiled || !m->run.prog) return ts_error(TS_ERR_STATE, "lint warnings are known after ts_model_compile; compile the model first");
    *warnings = (const char *const *)m->run.prog->lint;
    *n = (size_t)m->run.prog->n_lint;
    return TS_OK;
}

/* A watch that matches nothing is a typo: say so, with the closest names
 * (compile.c's ts_prog_check_watches). */
ts_status ts_model_check_watches(const ts_model *m) {
    if (!m) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_check_watches: model is NULL");
    if (!m->run.prog) return ts_error(TS_ERR_STATE, "watches are resolved at compile; compile the model first");
    return ts_prog_check_watches(m->run.prog, &m->run.opts);
}

const char *ts_model_failed_tensor(const ts_model *m) {
    return m && m->run.prog && m->run.failed_entry >= 0 ? m->run.prog->entries[m->run.failed_entry].name : NULL;
}

ts_status ts_model_anchor_list(const ts_model *m, const char *const **short_names, size_t *n) {
    if (!m || !short_names || !n) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_anchor_list: NULL argument");
    if (!m->run.prog) return ts_error(TS_ERR_STATE, "anchors are resolved at compile; compile the model first");
    *short_names = m->run.prog->anchor_names;
    *n = (size_t)m->run.prog->n_anchors;
    return TS_OK;
}

int64_t ts_model_runs(const ts_model *m) { return m ? m->run.runs : 0; }
int64_t ts_model_steps(const ts_model *m) { return m ? m->run.steps : 0; }
ts_dtype ts_model_precision(const ts_model *m) { return m ? m->run.opts.precision : TS_F32; }

int ts_model_loss_scale(const ts_model *m, double *scale, int64_t *skipped_steps) {
    bool on = m && m->run.scaling;
    if (scale) *scale = on ? m->run.loss_scale : 1.0;
    if (skipped_steps) *skipped_steps = on ? m->run.skipped_steps : 0;
    return on;
}
double ts_model_flops_per_microbatch(const ts_model *m) { return m && m->run.prog ? m->run.prog->flops_mb : 0.0; }

/* A held run's tensors (observe/hold.c keeps them on the model's runs). */
ts_status ts_model_hold(ts_model *m, int on) {
    if (!m) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_hold: model is NULL");
    return ts_hold_arm(&m->run, on);
}

int ts_model_is_held(const ts_model *m, const char *name) { return m ? ts_hold_is_held(&m->run, name) : 0; }

ts_status ts_model_held(ts_model *m, const char *name, ts_array *out) {
    if (!m) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_held: NULL argument");
    return ts_hold_read(&m->run, name, out);
}

ts_status ts_model_held_before(ts_model *m, const char *name, ts_array *out) {
    if (!m) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_held_before: NULL argument");
    return ts_hold_read_before(&m->run, name, out);
}

ts_status ts_model_held_names(ts_model *m, const char *const **names, size_t *n) {
    if (!m) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_held_names: NULL argument");
    return ts_hold_names(&m->run, names, n);
}

ts_status ts_model_tensor_origin(const ts_model *m, const char *name, char *buf, size_t n) {
    if (!m) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_tensor_origin: NULL argument");
    return ts_tensor_origin(&m->run, name, buf, n);
}

static ts_status held_lookup(void *ctx, const char *name, ts_array *out) { return ts_hold_read(ctx, name, out); }

ts_status ts_model_held_eval(ts_model *m, const char *expr, ts_array *out) {
    if (!m || !expr || !out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_held_eval: NULL argument");
    const char *const *names;
    size_t n;
    ts_status st = ts_hold_names(&m->run, &names, &n);
    if (st) return st;
    return ts_eval(expr, names, n, held_lookup, &m->run, out);
}
