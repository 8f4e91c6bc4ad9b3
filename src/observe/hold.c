/* hold.c -- a run's tensors held for reading after it (ts_model_hold): what
 * the inspector shows when training pauses. Activations share memory (the
 * memory plan reuses a buffer once its tensor is dead), so a held run copies
 * every activation, input and gradient on the model's device the moment the
 * executor's hook sees it final; parameters, optimizer state and the
 * updated weights persist between runs and are read where they live. The
 * copies are allocated when a run is armed, outside the step loop. */
#include "observe/hold.h"

#include "backend/backend.h"
#include "graph/ops.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* A tensor that persists between runs where the model keeps it: parameters,
 * buffers, constants, the updated weights and the optimizer state. */
static bool lives_on(const ts_run *run, const ts_entry *e) {
    if (e->kind == TS_KIND_VALUE) {
        ts_op op = run->g->t[e->node]->op;
        return op == TS_OP_PARAM || op == TS_OP_BUFFER || op == TS_OP_CONST;
    }
    return e->kind != TS_KIND_GRAD && e->kind != TS_KIND_ACCUM;
}

static void release(ts_hold *h) {
    for (int e = 0; e < h->n; e++) {
        if (h->t[e].copy && h->be->free) h->be->free(h->t[e].copy);
        if (h->t[e].before && h->be->free) h->be->free(h->t[e].before);
        ts_free(h->t[e].host);
        ts_free(h->t[e].name);
    }
    ts_free(h->t);
    ts_free(h->observed);
    ts_free(h->names);
    ts_free(h->diffs);
    ts_free(h->cmp_now);
    ts_free(h->cmp_was);
    h->cmp_now = h->cmp_was = NULL;
    h->t = NULL, h->observed = NULL, h->names = NULL, h->diffs = NULL;
    h->n_diffs = 0;
    h->n = 0, h->n_names = 0;
}

void ts_hold_free(ts_run *run) {
    if (!run || !run->hold) return;
    release(run->hold);
    ts_free(run->hold);
    run->hold = NULL;
}

/* The program's observed flags as compile set them. */
static void restore_flags(ts_run *run) {
    ts_hold *h = run->hold;
    ts_prog *p = run->prog;
    if (!p || !p->hold_ready || !h->observed || h->prog != p) return;
    for (int e = 0; e < p->n_entries && e < h->n; e++) p->entries[e].observed = h->observed[e];
    p->hold_ready = false;
}

void ts_hold_leave(ts_run *run) {
    if (run->hold) restore_flags(run);
}

ts_status ts_hold_arm(ts_run *run, int on) {
    if (!run) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_hold: model is NULL");
    if (!run->hold && !(run->hold = ts_calloc(1, sizeof *run->hold))) return ts_error(TS_ERR_OUT_OF_MEMORY, "ts_model_hold: no memory");
    if (!on) restore_flags(run);
    run->hold->armed = on != 0;
    return TS_OK;
}

/* Before a run, its program compiled: copies for every tensor the run
 * makes, and the hook turned on for each. */
ts_status ts_hold_prepare(ts_run *run) {
    ts_hold *h = run->hold;
    ts_prog *p = run->prog;
    if (!h || !h->armed) return TS_OK;
    if (!p->hold_ready || h->prog != p) {
        release(h);
        h->be = run->dev.backend, h->prog = p;
        h->t = ts_calloc((size_t)p->n_entries, sizeof *h->t);
        h->observed = ts_calloc((size_t)p->n_entries, sizeof *h->observed);
        if (!h->t || !h->observed) return ts_error(TS_ERR_OUT_OF_MEMORY, "ts_model_hold: no memory for %d tensors", p->n_entries);
        h->n = p->n_entries;
        for (int e = 0; e < p->n_entries; e++) {
            ts_entry *en = &p->entries[e];
            held *t = &h->t[e];
            t->dtype = ts_dtype_is_half(en->dtype) ? TS_F32 : en->dtype; /* 16-bit cells are captured through their f32 view */
            t->shape = en->shape, t->numel = en->numel, t->per_step = en->per_step;
            if (!(t->name = ts_strdup(en->name))) return ts_error(TS_ERR_OUT_OF_MEMORY, "ts_model_hold: no memory");
            h->observed[e] = en->observed;
            if (!ts_in_stage(run, en->node)) continue;
            /* a parameter as the run's first step reads it, for ts_model_rerun (its copy in 16-bit cells is not one) */
            bool param = en->kind == TS_KIND_VALUE && run->g->t[en->node]->op == TS_OP_PARAM && !ts_dtype_is_half(en->dtype);
            if (lives_on(run, en) && !param) continue;
            size_t bytes = (size_t)(en->numel ? en->numel : 1) * ts_dtype_cell_bytes(t->dtype);
            if (run->dev.backend->alloc(bytes, param ? &t->before : &t->copy))
                return ts_error(TS_ERR_OUT_OF_MEMORY, "ts_model_hold: no memory on %s for a copy of '%s' (%zu bytes)", run->dev.backend->name,
                                en->name, bytes);
            en->observed = true;
        }
        p->hold_ready = true;
    }
    for (int e = 0; e < h->n; e++) h->t[e].captured = h->t[e].before_captured = false;
    h->last_mb = 0;
    h->steps = run->steps, h->loss_scale = run->loss_scale;
    return TS_OK;
}

bool ts_hold_armed(const ts_run *run) { return run->hold && run->hold->armed; }

void ts_hold_capture(ts_run *run, int entry, int64_t sample) {
    ts_hold *h = run->hold;
    if (h && h->comparing) {
        ts_rerun_compare(run, entry);
        return;
    }
    if (!h || !h->armed || !run->prog->hold_ready || h->prog != run->prog || entry >= h->n) return;
    const ts_entry *en = &run->prog->entries[entry];
    if (h->t[entry].before && en->data && !h->t[entry].before_captured) { /* the first step's, before its update */
        run->dev.backend->copy_on_device(run->dev.stream, h->t[entry].before, en->data, (size_t)en->numel * ts_dtype_cell_bytes(en->dtype));
        h->t[entry].before_captured = true;
    }
    if (!h->t[entry].copy || !en->data) return;
    run->dev.backend->copy_on_device(run->dev.stream, h->t[entry].copy, en->data, (size_t)en->numel * ts_dtype_cell_bytes(en->dtype));
    h->t[entry].captured = true;
    h->t[entry].sample = sample;
    if (!en->per_step && sample > h->last_mb) h->last_mb = sample;
}

bool ts_hold_comparing(const ts_run *run) { return run->hold && run->hold->comparing; }

void ts_rerun_compare(ts_run *run, int e) {
    ts_hold *h = run->hold;
    if (e >= h->n) return;
    held *t = &h->t[e];
    const ts_entry *en = &run->prog->entries[e];
    const void *ref = t->before_captured ? t->before : t->copy && ts_hold_current(h, e) ? t->copy : NULL;
    if (!ref || !en->data) return;
    const void *now = en->data, *was = ref;
    if (!run->dev.backend->host_addressable) { /* both to the host */
        size_t bytes = (size_t)en->numel * ts_dtype_cell_bytes(t->dtype);
        if (!en->on_host) run->dev.backend->copy_to_host(run->dev.stream, h->cmp_now, en->data, bytes), now = h->cmp_now;
        run->dev.backend->copy_to_host(run->dev.stream, h->cmp_was, ref, bytes);
        was = h->cmp_was;
        if (run->dev.backend->synchronize(run->dev.stream)) {
            h->cmp_failed = true;
            return;
        }
    }
    ts_array a = {.dtype = t->dtype, .data = (void *)(uintptr_t)now}, b = {.dtype = t->dtype, .data = (void *)(uintptr_t)was};
    if (run->training && e == run->prog->value_entry[run->loss] && en->numel) h->loss = ts_array_value(&a, 0), h->held_loss = ts_array_value(&b, 0);
    double max_abs = 0;
    int64_t changed = 0;
    for (int64_t i = 0; i < en->numel; i++) {
        double x = ts_array_value(&a, i), y = ts_array_value(&b, i);
        if (x == y || (isnan(x) && isnan(y))) continue;
        changed++;
        double d = fabs(x - y);
        if (isnan(d) || isnan(max_abs)) max_abs = NAN; /* a NaN on one side only */
        else if (d > max_abs) max_abs = d;
    }
    if (changed && h->n_diffs < (size_t)h->n) h->diffs[h->n_diffs++] = (ts_rerun_diff){t->name, max_abs, changed, en->numel};
}

/* Made by the micro-batch the held run ended in (a run stopped by a
 * numeric check leaves the earlier micro-batches' values of the tensors
 * after the one it stopped at: not shown as if they were this one's). */
bool ts_hold_current(const ts_hold *h, int e) {
    return h->t[e].captured && (h->t[e].per_step || h->t[e].sample == h->last_mb);
}

static int find_held(const ts_hold *h, const char *name) {
    for (int e = 0; h && e < h->n; e++)
        if (strcmp(h->t[e].name, name) == 0) return e;
    return -1;
}

/* A tensor read where it lives now: the program's entry of that name. */
static const ts_entry *live_entry(const ts_run *run, const char *name) {
    if (!run->prog || !(run->has_run || run->dev.backend->host_addressable)) return NULL; /* a device's copies are sent at the first run */
    int e = ts_prog_find(run->prog, name);
    return e >= 0 && lives_on(run, &run->prog->entries[e]) && ts_in_stage(run, run->prog->entries[e].node) ? &run->prog->entries[e] : NULL;
}

int ts_hold_is_held(const ts_run *run, const char *name) {
    if (!run || !name) return 0;
    if (live_entry(run, name)) return 1;
    int e = find_held(run->hold, name);
    return e >= 0 && ts_hold_current(run->hold, e);
}

static void to_array(const ts_dtype dtype, const ts_shape *s, const void *data, ts_array *out) {
    memset(out, 0, sizeof *out);
    out->dtype = dtype == TS_BOOL ? TS_F32 : dtype; /* a bool's cells: f32 1.0 or 0.0 */
    out->ndim = s->ndim;
    for (int i = 0; i < s->ndim; i++) out->shape[i] = s->d[i];
    out->data = (void *)(uintptr_t)data;
}

/* The host's copy of n bytes of device memory `src` in *host (allocated
 * once, outside the step loop: reading happens between runs). */
static ts_status to_host(ts_run *run, float **host, const void *src, size_t bytes, const char *name) {
    if (!*host && !(*host = ts_malloc(bytes ? bytes : 1))) return ts_error(TS_ERR_OUT_OF_MEMORY, "reading '%s': no memory", name);
    run->dev.backend->copy_to_host(run->dev.stream, *host, src, bytes);
    if (run->dev.backend->synchronize(run->dev.stream)) return ts_error_wrap(TS_ERR_INTERNAL, "reading '%s' from %s", name, run->dev.backend->name);
    return TS_OK;
}

ts_status ts_hold_read(ts_run *run, const char *name, ts_array *out) {
    if (!run || !name || !out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_held: NULL argument");
    ts_hold *h = run->hold;
    if (run->prog && ts_prog_find(run->prog, name) < 0 && find_held(h, name) < 0) { /* a name but for a module prefix */
        ts_status st = ts_prog_name_of(run->prog, "ts_model_held", name, &name);
        if (st) return st;
    }
    const ts_entry *live = live_entry(run, name);
    int e = find_held(h, name);
    if (live) { /* the current value, after the last run */
        if (run->dev.backend->host_addressable || live->on_host) {
            to_array(live->dtype, &live->shape, live->data, out);
            return TS_OK;
        }
        int k = ts_prog_find(run->prog, name);
        if (!h || k >= h->n || strcmp(h->t[k].name, name) != 0)
            return ts_error(TS_ERR_STATE, "'%s' lives on %s; arm ts_model_hold before a run to read it", name, run->dev.backend->name);
        ts_status st = to_host(run, &h->t[k].host, live->data, (size_t)live->numel * ts_dtype_cell_bytes(live->dtype), name);
        if (st) return st;
        to_array(live->dtype, &live->shape, h->t[k].host, out);
        return TS_OK;
    }
    if (e >= 0 && ts_hold_current(h, e)) {
        held *t = &h->t[e];
        if (h->be->host_addressable) {
            to_array(t->dtype, &t->shape, t->copy, out);
            return TS_OK;
        }
        ts_status st = to_host(run, &t->host, t->copy, (size_t)t->numel * ts_dtype_cell_bytes(t->dtype), name);
        if (st) return st;
        to_array(t->dtype, &t->shape, t->host, out);
        return TS_OK;
    }
    if (e >= 0 && h->t[e].copy)
        return ts_error(TS_ERR_NOT_FOUND, "'%s' was not computed by micro-batch %lld of the held run: the run stopped before it (a numeric "
                        "check)", name, (long long)h->last_mb);
    if (!run->prog) return ts_error(TS_ERR_STATE, "ts_model_held: compile and run the model first");
    if (ts_prog_find(run->prog, name) < 0) return ts_prog_unknown_name(run->prog, "ts_model_held", name);
    if (!h || !h->n) return ts_error(TS_ERR_STATE, "'%s' is not held: arm ts_model_hold(m, 1) before the run whose tensors you want to read", name);
    return ts_error(TS_ERR_NOT_FOUND, "'%s' is not held: this rank does not run it (another pipeline stage)", name);
}

ts_status ts_hold_read_before(ts_run *run, const char *name, ts_array *out) {
    if (!run || !name || !out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_held_before: NULL argument");
    ts_hold *h = run->hold;
    int e = run->prog && h && h->prog == run->prog ? ts_prog_find(run->prog, name) : -1;
    if (e < 0 || e >= h->n || !h->t[e].before_captured) return ts_hold_read(run, name, out);
    held *t = &h->t[e];
    if (!h->be->host_addressable) {
        ts_status st = to_host(run, &t->host, t->before, (size_t)t->numel * ts_dtype_cell_bytes(t->dtype), name);
        if (st) return st;
    }
    to_array(t->dtype, &t->shape, h->be->host_addressable ? t->before : t->host, out);
    return TS_OK;
}

ts_status ts_hold_names(ts_run *run, const char *const **names, size_t *n) {
    if (!run || !names || !n) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_held_names: NULL argument");
    if (!run->prog) return ts_error(TS_ERR_STATE, "ts_model_held_names: compile and run the model first");
    if (!run->hold && !(run->hold = ts_calloc(1, sizeof *run->hold))) return ts_error(TS_ERR_OUT_OF_MEMORY, "ts_model_held_names: no memory");
    ts_hold *h = run->hold;
    const ts_prog *p = run->prog;
    size_t cap = (size_t)p->n_entries + (size_t)h->n;
    const char **out = ts_realloc(h->names, (cap ? cap : 1) * sizeof *out);
    if (!out) return ts_error(TS_ERR_OUT_OF_MEMORY, "ts_model_held_names: no memory");
    h->names = out;
    size_t k = 0;
    for (int i = 0; i < p->n_entries; i++) /* sorted, as ts_model_tensor_names */
        if (ts_hold_is_held(run, p->sorted_names[i])) out[k++] = p->sorted_names[i];
    h->n_names = k;
    *names = out;
    *n = k;
    return TS_OK;
}

ts_status ts_tensor_origin(const ts_run *run, const char *name, char *buf, size_t n) {
    if (!run || !name || !buf || !n) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_tensor_origin: NULL argument");
    if (!run->prog) return ts_error(TS_ERR_STATE, "ts_model_tensor_origin: compile the model first");
    ts_status st = ts_prog_name_of(run->prog, "ts_model_tensor_origin", name, &name);
    if (st) return st;
    int e = ts_prog_find(run->prog, name);
    const ts_entry *en = &run->prog->entries[e];
    const ts_tensor *t = run->g->t[en->node];
    static const char *const kinds[] = {"", "the gradient of ", "the step's mean gradient of ", "the updated value of ",
                                        "the momentum of ", "the first moment of ", "the second moment of ", "the step count of "};
    char where[600];
    snprintf(buf, n, "%s%s '%s' (op %s), built at %s", kinds[en->kind], t->op == TS_OP_PARAM ? "parameter" : t->op == TS_OP_INPUT ? "input" : "tensor",
             t->name, ts_op_get(t->op)->name, ts_tensor_where(t, where, sizeof where));
    return TS_OK;
}
