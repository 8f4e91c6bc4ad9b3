/* device.c -- a model on a device whose memory the host cannot read (a
 * GPU): the host keeps every parameter, buffer, constant and optimizer
 * state and the device works on copies of them, sent before a run when the
 * host wrote them since (the graph's values_gen: ts_param_set, a restored
 * checkpoint, another model's run) and, for what a run changes, brought
 * back after it, so everything that reads them on the host (weights,
 * checkpoints, parameter views) sees them current. The run's inputs go to device buffers; an entry an observer
 * reads on the host comes back through one host buffer.
 *
 * This is the first slice of DESIGN.md section 17: anchors are captured on
 * the device into a copy of the anchors arena and stats watches reduce
 * there into one slot per watch, both copied to the host once after the
 * run; other observers (outfeeds, histograms, the print op) read a host
 * copy of the tensor, and the parameters move every run (docs/backend.md
 * says what is next). */
#include "backend/backend.h"
#include "compile/program.h"

#include <string.h>

/* The device copy of the host storage at `host` (numel floats), made once
 * per program; the same host storage gets the same copy. */
static ts_status copy_of(ts_prog *p, float *host, int64_t numel, bool download, bool state, float **dev) {
    for (int i = 0; i < p->n_dev_copies; i++)
        if (p->dev_copies[i].host == host) {
            p->dev_copies[i].download |= download;
            *dev = p->dev_copies[i].dev;
            return TS_OK;
        }
    ts_device_copy *grown = ts_realloc(p->dev_copies, (size_t)(p->n_dev_copies + 1) * sizeof *grown);
    if (!grown) return TS_ERR_OUT_OF_MEMORY;
    p->dev_copies = grown;
    void *d = NULL;
    ts_status st = p->backend->alloc((size_t)(numel ? numel : 1) * sizeof(float), &d);
    if (st) return st;
    p->dev_copies[p->n_dev_copies++] = (ts_device_copy){.host = host, .dev = d, .numel = numel, .download = download, .state = state};
    *dev = d;
    return TS_OK;
}

ts_status ts_device_bind(ts_model *m, ts_prog *p) {
    if (p->backend->host_addressable) return TS_OK;
    if (ts_replicas(m) > 1 || p->stage)
        return ts_error(TS_ERR_UNSUPPORTED, "compile: replicas and pipeline stages run on the CPU only for now (--device cpu)");
    ts_graph *g = m->g;
    int64_t biggest = 1, host_held = 1;
    for (int e = 0; e < p->n_entries; e++) {
        ts_entry *en = &p->entries[e];
        if (en->numel > biggest) biggest = en->numel;
        en->watch_in_step = false; /* observed after the step, on the device or from the host copy */
        en->relu_out = -1;         /* each summarised from its own values */
        en->relu_derived = false;
        if (!en->data) continue;
        const ts_tensor *t = g->t[en->node];
        bool held = (en->kind == TS_KIND_VALUE || en->kind == TS_KIND_UPDATED) && en->data == t->value && t->value;
        if (en->kind == TS_KIND_STEP) {
            en->on_host = true;
            if (en->numel > host_held) host_held = en->numel;
            continue;
        }
        if (!held && en->kind != TS_KIND_ACCL && en->kind != TS_KIND_ACCL1 && en->kind != TS_KIND_ACCL2) continue;
        bool state = en->kind >= TS_KIND_ACCL, changes = t->op == TS_OP_PARAM || t->op == TS_OP_BUFFER;
        ts_status st = copy_of(p, en->data, en->numel, changes, state, &en->data);
        if (st) return st;
    }
    if (m->n_state) {
        p->dev_state = ts_calloc((size_t)m->n_state, sizeof *p->dev_state);
        if (!p->dev_state) return TS_ERR_OUT_OF_MEMORY;
    }
    for (int s = 0; s < m->n_state; s++) {
        ts_opt_state *h = &m->state[s], *d = &p->dev_state[s];
        *d = *h;
        int64_t n = ts_shape_numel(&g->t[h->node]->shape);
        float **arrays[3] = {&d->accl, &d->accl1, &d->accl2};
        for (int k = 0; k < 3; k++) {
            if (!*arrays[k]) continue;
            ts_status st = copy_of(p, *arrays[k], n, false, true, arrays[k]);
            if (st) return st;
        }
    }
    p->dev_inputs = ts_calloc((size_t)p->n_nodes, sizeof *p->dev_inputs);
    p->dev_input_bytes = ts_calloc((size_t)p->n_nodes, sizeof *p->dev_input_bytes);
    p->host_view = ts_malloc((size_t)biggest * sizeof(float));
    if (!p->dev_inputs || !p->dev_input_bytes || !p->host_view) return TS_ERR_OUT_OF_MEMORY;
    p->host_view_floats = biggest;
    void *stage = NULL;
    ts_status sst = p->backend->alloc((size_t)host_held * sizeof(float), &stage);
    if (sst) return sst;
    p->dev_stage = stage;
    if (p->anchor_local > 0) {
        void *d = NULL;
        ts_status st = p->backend->alloc((size_t)p->anchor_local * sizeof(float), &d);
        if (st) return st;
        p->dev_anchors = d;
    }
    if (p->n_watch > 0) {
        size_t bytes = (size_t)p->n_watch * sizeof(ts_device_stats);
        p->host_slots = ts_calloc((size_t)p->n_watch, sizeof *p->host_slots);
        p->slot_step = ts_calloc((size_t)p->n_watch, sizeof *p->slot_step);
        p->slot_pending = ts_calloc((size_t)p->n_watch, sizeof *p->slot_pending);
        if (!p->host_slots || !p->slot_step || !p->slot_pending) return TS_ERR_OUT_OF_MEMORY;
        void *d = NULL;
        ts_status st = p->backend->stats_reduce ? p->backend->alloc(bytes, &d) : TS_OK;
        if (st) return st;
        p->dev_slots = d;
    }
    return TS_OK;
}

ts_status ts_device_before_run(ts_model *m) {
    ts_prog *p = m->prog;
    const ts_backend *be = p->backend;
    if (be->host_addressable) return TS_OK;
    if (!p->sent || p->sent_gen != m->g->values_gen) { /* the host wrote them since: send them again */
        for (int i = 0; i < p->n_dev_copies; i++) {
            const ts_device_copy *c = &p->dev_copies[i];
            be->copy_to_device(m->stream, c->dev, c->host, (size_t)c->numel * sizeof(float));
        }
        p->sent = true;
        p->sent_gen = m->g->values_gen;
    }
    for (int k = 0; k < p->n_order; k++) {
        int i = p->order[k];
        if (m->g->t[i]->op != TS_OP_INPUT || !p->bound[i]) continue;
        size_t bytes = (size_t)ts_array_numel(p->bound[i]) * ts_dtype_size(p->bound[i]->dtype);
        if (bytes > p->dev_input_bytes[i]) { /* the first run, or bigger inputs */
            be->free(p->dev_inputs[i]);
            p->dev_inputs[i] = NULL;
            p->dev_input_bytes[i] = 0;
            void *d = NULL;
            ts_status st = be->alloc(bytes, &d);
            if (st) return ts_error_wrap(st, "run: no device memory for input '%s'", m->g->t[i]->name);
            p->dev_inputs[i] = d;
            p->dev_input_bytes[i] = bytes;
        }
        be->copy_to_device(m->stream, p->dev_inputs[i], p->bound[i]->data, bytes);
    }
    return TS_OK;
}

ts_status ts_device_after_run(ts_model *m) {
    ts_prog *p = m->prog;
    const ts_backend *be = p->backend;
    if (be->host_addressable) return TS_OK;
    for (int i = 0; i < p->n_dev_copies; i++) {
        const ts_device_copy *c = &p->dev_copies[i];
        if (c->download) be->copy_to_host(m->stream, c->host, c->dev, (size_t)c->numel * sizeof(float));
    }
    if (p->dev_anchors) { /* the anchors the run captured on the device: one copy */
        be->copy_to_host(m->stream, p->arena_anchors, p->dev_anchors, (size_t)p->anchor_local * sizeof(float));
        p->anchor_bytes += (uint64_t)p->anchor_local * sizeof(float);
    }
    if (p->any_pending) /* the summaries the run reduced on the device: one copy */
        be->copy_to_host(m->stream, p->host_slots, p->dev_slots, (size_t)p->n_watch * sizeof(ts_device_stats));
    ts_status st = be->synchronize(m->stream);
    /* the host's copies moved: another model of the graph sends them again, not this one */
    m->g->values_gen++;
    p->sent_gen = m->g->values_gen;
    if (!st) ts_observe_device_finish(m);
    else p->any_pending = false;
    return st;
}

ts_status ts_device_fetch_state(const ts_model *m) {
    const ts_prog *p = m->prog;
    if (!p || p->backend->host_addressable) return TS_OK;
    for (int i = 0; i < p->n_dev_copies; i++) {
        const ts_device_copy *c = &p->dev_copies[i];
        if (c->state) p->backend->copy_to_host(m->stream, c->host, c->dev, (size_t)c->numel * sizeof(float));
    }
    return p->backend->synchronize(m->stream);
}

const float *ts_device_host_view(ts_model *m, const ts_entry *e) {
    ts_prog *p = m->prog;
    const ts_backend *be = p->backend;
    if (be->host_addressable || e->on_host || !e->data) return e->data;
    if (e->numel > p->host_view_floats) return NULL;
    be->copy_to_host(m->stream, p->host_view, e->data, (size_t)e->numel * ts_dtype_size(e->dtype));
    return be->synchronize(m->stream) ? NULL : p->host_view;
}
