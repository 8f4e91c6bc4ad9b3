/* rerun.c -- ts_model_rerun, the inspector's `rerun`: the held run's
 * micro-batch again with one input or one parameter changed, on the side.
 * The hold kept every tensor the run made and each parameter as the run
 * read it (observe/hold.c); the executor runs the forward and backward
 * again from those (exec.c's ts_exec_again) while the hold compares each
 * tensor with its copy the moment it is final (ts_rerun_compare). The
 * parameters the model has now are set aside on the device first and put
 * back after: no step, no state, nothing observed or sent out. */
#include "model/model.h"

#include "exec/exec.h"
#include "graph/ops.h"
#include "observe/hold.h"

#include <math.h>
#include <string.h>

/* What must hold for a rerun; TS_OK or the error saying what is missing. */
static ts_status check_held(ts_model *m, const ts_hold *h) {
    const ts_prog *p = m->run.prog;
    if (!p || !h || !h->n || !h->prog)
        return ts_error(TS_ERR_STATE, "ts_model_rerun: nothing is held: arm ts_model_hold(m, 1) before the run to re-execute");
    if (h->prog != p)
        return ts_error(TS_ERR_STATE, "ts_model_rerun: the model was compiled again (another micro-batch size) since the held run; hold a run "
                        "of this size and rerun it");
    int A = m->run.training ? m->run.opts.grad_accum : 1;
    if (m->run.opts.device_iterations * A != 1 || ts_replicas(&m->run) > 1 || p->stage)
        return ts_error(TS_ERR_STATE, "ts_model_rerun: the held run has %d micro-batches%s; a rerun re-executes a run of one (one step per run, "
                        "no gradient accumulation, one process)", m->run.opts.device_iterations * A, ts_replicas(&m->run) > 1 || p->stage ? " on several ranks" : "");
    for (int k = 0; k < p->n_order; k++) {
        int i = p->order[k], e = p->value_entry[i];
        ts_op op = m->run.g->t[i]->op;
        if (op == TS_OP_INPUT && !(h->t[e].copy && ts_hold_current(h, e)))
            return ts_error(TS_ERR_STATE, "ts_model_rerun: input '%s' is not held by the held run", p->entries[e].name);
        if (op == TS_OP_PARAM && ts_dtype_is_half(p->entries[e].dtype))
            return ts_error(TS_ERR_UNSUPPORTED, "ts_model_rerun: parameter '%s' is kept in 16-bit cells; a rerun changes f32 parameters",
                            p->entries[e].name);
        if (op == TS_OP_PARAM && !h->t[e].before_captured)
            return ts_error(TS_ERR_STATE, "ts_model_rerun: parameter '%s' was not copied by the held run (it was held before this version)",
                            p->entries[e].name);
    }
    return TS_OK;
}

/* value in the entry's dtype (f32, i32 or i64) into a new host buffer */
static ts_status convert(const ts_entry *en, const ts_array *value, void **out) {
    char want[96], got[96];
    ts_array shape = {.dtype = en->dtype, .ndim = en->shape.ndim};
    for (int i = 0; i < en->shape.ndim; i++) shape.shape[i] = en->shape.d[i];
    bool same = value->ndim == shape.ndim;
    for (int i = 0; same && i < shape.ndim; i++) same = value->shape[i] == shape.shape[i];
    if (!same)
        return ts_error(TS_ERR_SHAPE, "ts_model_rerun: the new value of '%s' is %s; it must have the tensor's shape, %s", en->name,
                        ts_array_shape_str(value, got, sizeof got), ts_array_shape_str(&shape, want, sizeof want));
    int64_t n = en->numel;
    void *buf = ts_malloc((size_t)(n ? n : 1) * ts_dtype_cell_bytes(en->dtype));
    if (!buf) return ts_error(TS_ERR_OUT_OF_MEMORY, "ts_model_rerun: no memory for the new value of '%s'", en->name);
    if (en->dtype == TS_I64 && value->dtype == TS_I64) { /* exact, not through a double */
        memcpy(buf, value->data, (size_t)n * sizeof(int64_t));
        *out = buf;
        return TS_OK;
    }
    for (int64_t i = 0; i < n; i++) {
        double v = ts_array_value(value, i);
        if (en->dtype == TS_I64) {
            if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0) || v != floor(v)) {
                ts_free(buf);
                return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_rerun: '%s' holds integers (i64); the new value has %g at [%lld]", en->name, v,
                                (long long)i);
            }
            ((int64_t *)buf)[i] = (int64_t)v;
        } else if (en->dtype == TS_I32) {
            if (!(v >= INT32_MIN && v <= INT32_MAX) || v != floor(v)) {
                ts_free(buf);
                return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_rerun: '%s' holds integers (i32); the new value has %g at [%lld]", en->name, v,
                                (long long)i);
            }
            ((int32_t *)buf)[i] = (int32_t)v;
        } else if (en->dtype == TS_BOOL && v != 0.0 && v != 1.0) {
            ts_free(buf);
            return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_rerun: '%s' is bool; the new value has %g at [%lld] (give 0/1 or bool values)",
                            en->name, v, (long long)i);
        } else {
            ((float *)buf)[i] = (float)v; /* a bool's cells: 1.0 or 0.0 */
        }
    }
    *out = buf;
    return TS_OK;
}

ts_status ts_model_rerun(ts_model *m, const char *name, const ts_array *value, ts_rerun_result *out) {
    if (!m || !name || !value || !value->data || !out)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_rerun: NULL argument");
    ts_hold *h = m->run.hold;
    ts_status st = check_held(m, h);
    if (st) return st;
    ts_prog *p = m->run.prog;
    if (ts_prog_find(p, name) < 0 && (st = ts_prog_name_of(p, "ts_model_rerun", name, &name))) return st;
    int target = ts_prog_find(p, name);
    if (target < 0) return ts_prog_unknown_name(p, "ts_model_rerun", name);
    const ts_entry *te = &p->entries[target];
    const ts_tensor *tt = m->run.g->t[te->node];
    if (te->kind != TS_KIND_VALUE)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_rerun: a rerun changes an input or a parameter; '%s' is a gradient or optimizer "
                        "state", name);
    if (tt->op != TS_OP_INPUT && tt->op != TS_OP_PARAM)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_rerun: a rerun changes an input or a parameter; '%s' is computed by the graph (op %s): "
                        "change what it is made from", name, ts_op_get(tt->op)->name);
    void *host = NULL;
    if ((st = convert(te, value, &host))) return st;

    const ts_backend *be = m->run.dev.backend;
    size_t largest = 0;
    for (int e = 0; e < p->n_entries; e++) {
        size_t b = (size_t)p->entries[e].numel * ts_dtype_cell_bytes(h->t[e].dtype);
        if (b > largest) largest = b;
    }
    float **inputs = ts_calloc((size_t)p->n_nodes, sizeof *inputs);
    void **saved = ts_calloc((size_t)p->n_entries, sizeof *saved);
    bool *observed = ts_calloc((size_t)p->n_entries, sizeof *observed);
    ts_rerun_diff *d = ts_realloc(h->diffs, (size_t)h->n * sizeof *d);
    if (d) h->diffs = d;
    if (!be->host_addressable && !h->cmp_now) h->cmp_now = ts_malloc(largest ? largest : 1), h->cmp_was = ts_malloc(largest ? largest : 1);
    void *changed = NULL;
    size_t tbytes = (size_t)te->numel * ts_dtype_cell_bytes(te->dtype);
    if (!inputs || !saved || !observed || !d || (!be->host_addressable && (!h->cmp_now || !h->cmp_was)) ||
        (tt->op == TS_OP_INPUT && be->alloc(tbytes ? tbytes : 1, &changed)))
        st = ts_error(TS_ERR_OUT_OF_MEMORY, "ts_model_rerun: no memory");
    /* the parameters set aside, those the held run read put in their place */
    for (int k = 0; !st && k < p->n_order; k++) {
        int i = p->order[k], e = p->value_entry[i];
        ts_entry *en = &p->entries[e];
        if (m->run.g->t[i]->op == TS_OP_INPUT) inputs[i] = e == target ? changed : h->t[e].copy;
        if (m->run.g->t[i]->op != TS_OP_PARAM) continue;
        size_t bytes = (size_t)en->numel * ts_dtype_cell_bytes(en->dtype);
        if (be->alloc(bytes ? bytes : 1, &saved[e])) {
            st = ts_error(TS_ERR_OUT_OF_MEMORY, "ts_model_rerun: no memory on %s to set '%s' aside", be->name, en->name);
            break;
        }
        be->copy_on_device(m->run.dev.stream, saved[e], en->data, bytes);
        be->copy_on_device(m->run.dev.stream, en->data, h->t[e].before, bytes);
    }
    if (!st) be->copy_to_device(m->run.dev.stream, tt->op == TS_OP_INPUT ? changed : te->data, host, tbytes);
    ts_op_chain chain = m->run.chain;
    int64_t steps = m->run.steps;
    double scale = m->run.loss_scale;
    if (!st) {
        for (int e = 0; e < p->n_entries; e++) {
            observed[e] = p->entries[e].observed;
            if (h->t[e].before_captured || (h->t[e].copy && ts_hold_current(h, e))) p->entries[e].observed = true;
        }
        m->run.chain = (ts_op_chain){0};
        st = ts_observe_attach_watches(&m->run, &m->run.chain);
        m->run.steps = h->steps, m->run.loss_scale = h->loss_scale; /* as the held run's step saw them (dropout's draw, the loss scale) */
        h->comparing = true, h->cmp_failed = false;
        h->n_diffs = 0;
        h->loss = h->held_loss = NAN;
        if (be->host_addressable) m->run.g->values_gen++; /* what kernels keep derived from the weights is made again */
        if (!st) st = ts_exec_again(&m->run, inputs);
        h->comparing = false;
        m->run.steps = steps, m->run.loss_scale = scale;
        m->run.chain = chain;
        for (int e = 0; e < p->n_entries; e++) p->entries[e].observed = observed[e];
        if (!st && h->cmp_failed) st = ts_error(TS_ERR_INTERNAL, "ts_model_rerun: reading a tensor back from %s failed", be->name);
    }
    /* the model's parameters back */
    for (int e = 0; e < p->n_entries; e++)
        if (saved && saved[e]) {
            be->copy_on_device(m->run.dev.stream, p->entries[e].data, saved[e], (size_t)p->entries[e].numel * ts_dtype_cell_bytes(p->entries[e].dtype));
            be->synchronize(m->run.dev.stream);
            be->free(saved[e]);
        }
    if (be->host_addressable) m->run.g->values_gen++;
    if (changed) be->free(changed);
    ts_free(host);
    ts_free(inputs);
    ts_free(saved);
    ts_free(observed);
    if (st) return ts_error_wrap(st, "rerun of the held run with '%s' changed", name);
    *out = (ts_rerun_result){h->loss, h->held_loss, h->diffs, h->n_diffs};
    return TS_OK;
}
