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
    if (!m->compiled || !m->prog) return ts_error(TS_ERR_STATE, "tensor names are known after ts_model_compile; compile the model first");
    *names = m->prog->sorted_names;
    *n = (size_t)m->prog->n_entries;
    return TS_OK;
}

/* An anchor of a tensor with an output dtype (ts_tensor_set_output_dtype):
 * its values converted exactly into the anchor's typed buffer, or an error
 * that names the first value the dtype does not hold. */
static ts_status typed_copy(ts_anchor *a, const ts_tensor *t, ts_array *out) {
    int64_t n = ts_array_numel(out);
    if (!a->typed && !(a->typed = ts_malloc((size_t)(n ? n : 1) * ts_dtype_size(t->out_dtype)))) return TS_ERR_OUT_OF_MEMORY;
    ts_array typed = *out;
    typed.dtype = t->out_dtype;
    typed.data = a->typed;
    for (int64_t i = 0; i < n; i++) {
        double v = ts_array_value(out, i);
        if (!ts_dtype_holds(t->out_dtype, v))
            return ts_error(TS_ERR_INVALID_ARGUMENT, "output '%s' holds %.9g at [%lld], which its declared dtype %s does not hold exactly "
                            "(the model computes it as %s)", ts_tensor_alias(t) ? ts_tensor_alias(t) : t->name, v, (long long)i, ts_dtype_name(t->out_dtype), ts_dtype_name(out->dtype));
        ts_array_set_value(&typed, i, v);
    }
    *out = typed;
    return TS_OK;
}

ts_status ts_model_anchored(const ts_model *m, const char *short_name, ts_array *out) {
    if (!m || !short_name || !out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_anchored: NULL argument");
    const ts_prog *p = m->prog;
    int k = 0;
    while (p && k < p->n_anchors && strcmp(p->anchors[k].short_name, short_name) != 0) k++;
    if (!p || k == p->n_anchors) {
        char known[512] = "";
        size_t used = 0;
        for (int q = 0; p && q < p->n_anchors && used < sizeof known - 64; q++)
            used += (size_t)snprintf(known + used, sizeof known - used, "%s'%s'", q ? ", " : "", p->anchors[q].short_name);
        return ts_error(TS_ERR_NOT_FOUND, "no anchor named '%s'%s%s", short_name, used ? "; anchors: " : " (the model is not compiled)", known);
    }
    if (!m->has_run) return ts_error(TS_ERR_STATE, "anchor '%s' has no value yet: run the model first", short_name);
    ts_anchor *a = &p->anchors[k];
    const ts_entry *e = &p->entries[a->entry];
    memset(out, 0, sizeof *out);
    out->dtype = ts_entry_view_dtype(e);
    out->data = a->data;
    int d = 0;
    if (a->keeps_axis) out->shape[d++] = a->rows;
    if (ts_replicas(m) > 1) out->shape[d++] = ts_replicas(m);
    for (int i = 0; i < e->shape.ndim && d < TS_MAX_DIMS; i++) out->shape[d++] = e->shape.d[i];
    out->ndim = d;
    const ts_tensor *t = e->kind == TS_KIND_VALUE ? m->g->t[e->node] : NULL;
    return t && t->typed && t->out_dtype != ts_entry_view_dtype(e) ? typed_copy(a, t, out) : TS_OK;
}

ts_status ts_model_watch_results(const ts_model *m, const ts_watch_result **out, size_t *n) {
    if (!m || !out || !n) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_watch_results: NULL argument");
    if (!m->prog) return ts_error(TS_ERR_STATE, "watch results exist after compile and run");
    bool replicas = m->coll && m->prog->rep_results;
    ts_observe_device_results(m); /* a device's last run's: finished when read */
    const ts_stab *s = m->prog->stab;
    if (s) { /* the stability rows after the user's watches; the watches only they read are not rows */
        ts_stab_rows(m->prog, m->runs);
        *out = m->prog->watch_results + s->n_hidden;
        *n = (size_t)(m->prog->n_watch - s->n_hidden + s->n_rows);
        return TS_OK;
    }
    *out = replicas ? m->prog->rep_results : m->prog->watch_results;
    *n = (size_t)m->prog->n_watch * (replicas ? (size_t)ts_replicas(m) + 1 : 1);
    return TS_OK;
}

ts_status ts_model_lint(const ts_model *m, const char *const **warnings, size_t *n) {
    if (!m || !warnings || !n) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_lint: NULL argument");
    if (!m->compiled || !m->prog) return ts_error(TS_ERR_STATE, "lint warnings are known after ts_model_compile; compile the model first");
    *warnings = (const char *const *)m->prog->lint;
    *n = (size_t)m->prog->n_lint;
    return TS_OK;
}

/* A watch that matches nothing is a typo: say so, with the closest names
 * (compile.c's ts_prog_check_watches). */
ts_status ts_model_check_watches(const ts_model *m) {
    if (!m) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_check_watches: model is NULL");
    if (!m->prog) return ts_error(TS_ERR_STATE, "watches are resolved at compile; compile the model first");
    return ts_prog_check_watches(m->prog, &m->opts);
}

const char *ts_model_failed_tensor(const ts_model *m) {
    return m && m->prog && m->failed_entry >= 0 ? m->prog->entries[m->failed_entry].name : NULL;
}

ts_status ts_model_anchor_list(const ts_model *m, const char *const **short_names, size_t *n) {
    if (!m || !short_names || !n) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_anchor_list: NULL argument");
    if (!m->prog) return ts_error(TS_ERR_STATE, "anchors are resolved at compile; compile the model first");
    *short_names = m->prog->anchor_names;
    *n = (size_t)m->prog->n_anchors;
    return TS_OK;
}

int64_t ts_model_runs(const ts_model *m) { return m ? m->runs : 0; }
int64_t ts_model_steps(const ts_model *m) { return m ? m->steps : 0; }
ts_dtype ts_model_precision(const ts_model *m) { return m ? m->opts.precision : TS_F32; }

int ts_model_loss_scale(const ts_model *m, double *scale, int64_t *skipped_steps) {
    bool on = m && m->scaling;
    if (scale) *scale = on ? m->loss_scale : 1.0;
    if (skipped_steps) *skipped_steps = on ? m->skipped_steps : 0;
    return on;
}
double ts_model_flops_per_microbatch(const ts_model *m) { return m && m->prog ? m->prog->flops_mb : 0.0; }
