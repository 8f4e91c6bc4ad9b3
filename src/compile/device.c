/* device.c -- a program on a device whose memory the host cannot read (a
 * GPU): at compile, device copies of everything the program's entries
 * point at on the host (parameters, buffers, constants, optimizer
 * moments), the device's buffers for the run's inputs, anchors and
 * summaries; and the optimizer state brought back to the host for a
 * checkpoint or a recompile. What moves at run time is exec/device.c's;
 * docs/backend.md tells the whole path. */
#include "backend/backend.h"
#include "compile/program.h"

#include <stdint.h>

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

/* Whether entry's rows also hold the lines of a print op (its value, and
 * its gradient in training). A print op's tensor of up to
 * TS_PRINT_ROWS_MAX bytes a run (or one outfed, which has rows) is
 * captured on the device and printed after the run; a bigger one is
 * printed as it is made, from a copy, and the run is not recorded
 * (exec/replay.c). */
#define TS_PRINT_ROWS_MAX ((size_t)64 << 20)
static bool print_lines(const ts_model_def *m, const ts_prog *p, int entry) {
    const ts_entry *e = &p->entries[entry];
    if (m->g->t[e->node]->op != TS_OP_PRINT || e->on_host || (e->kind != TS_KIND_VALUE && e->kind != TS_KIND_GRAD)) return false;
    return e->n_outfeeds || (size_t)p->samples_mb * (size_t)e->numel * sizeof(float) <= TS_PRINT_ROWS_MAX; /* an outfed one has rows */
}

/* Rows for a run's outfeed records and print lines on the device: S per
 * outfed entry (a value the host holds is pushed from there) and per
 * printed one. */
static ts_status bind_outfeeds(const ts_model_def *m, ts_prog *p) {
    if (!(p->outfeed_off = ts_malloc((size_t)p->n_entries * sizeof *p->outfeed_off))) return TS_ERR_OUT_OF_MEMORY;
    size_t total = 0;
    int rows = 0;
    for (int i = 0; i < p->n_entries; i++) {
        const ts_entry *e = &p->entries[i];
        p->outfeed_off[i] = SIZE_MAX;
        int lines = print_lines(m, p, i), feeds = e->n_outfeeds && !e->on_host;
        if (!lines && !feeds) continue;
        int64_t S = e->per_step ? p->samples_step : p->samples_mb;
        p->outfeed_off[i] = total;
        total += (size_t)S * (size_t)e->numel * ts_dtype_cell_bytes(e->dtype);
        rows += (int)S * (lines + feeds);
    }
    if (!total) {
        ts_free(p->outfeed_off);
        p->outfeed_off = NULL;
        return TS_OK;
    }
    p->host_outfeed = ts_malloc(total);
    p->outfed = ts_calloc((size_t)rows, sizeof *p->outfed);
    p->points_cap = (int)p->samples_step; /* a point a step */
    p->points = ts_calloc((size_t)p->points_cap, sizeof *p->points);
    p->copies = ts_calloc((size_t)rows, sizeof *p->copies);
    if (!p->host_outfeed || !p->outfed || !p->points || !p->copies) return TS_ERR_OUT_OF_MEMORY;
    void *d = NULL;
    ts_status st = p->backend->alloc(total, &d);
    if (st) return st;
    p->dev_outfeed = d;
    p->outfeed_bytes = total;
    p->outfed_cap = rows;
    return TS_OK;
}

/* A set of n watches' slots on the host (its hist apart: n_hist). */
static ts_status alloc_slot_set(ts_slot_set *s, int n) {
    s->stats = ts_calloc((size_t)n, sizeof *s->stats);
    s->pending = ts_calloc((size_t)n, sizeof *s->pending);
    s->step = ts_calloc((size_t)n, sizeof *s->step);
    s->entry = ts_calloc((size_t)n, sizeof *s->entry);
    s->same = ts_calloc((size_t)n, sizeof *s->same);
    return s->stats && s->pending && s->step && s->entry && s->same ? TS_OK : TS_ERR_OUT_OF_MEMORY;
}

ts_status ts_device_bind(const ts_model_def *m, ts_prog *p) {
    if (p->backend->host_addressable) return TS_OK;
    if (m->opts->replicas > 1 || m->opts->stages > 1)
        return ts_error(TS_ERR_UNSUPPORTED, "compile: replicas and pipeline stages run on the CPU only for now (--device cpu)");
    ts_graph *g = m->g;
    int64_t biggest = 1, host_held = 1;
    for (int e = 0; e < p->n_entries; e++) {
        ts_entry *en = &p->entries[e];
        if (ts_entry_cells(en) > biggest) biggest = ts_entry_cells(en);
        if (!en->data) continue;
        const ts_tensor *t = g->t[en->node];
        bool held = (en->kind == TS_KIND_VALUE || en->kind == TS_KIND_UPDATED) && en->data == t->value && t->value;
        if (en->kind == TS_KIND_STEP) {
            en->on_host = true;
            if (en->numel > host_held) host_held = en->numel;
            continue;
        }
        if (!held && en->kind != TS_KIND_ACCL && en->kind != TS_KIND_ACCL1 && en->kind != TS_KIND_ACCL2) continue;
        /* a run changes parameters and buffers: back when the host reads them; the
         * optimizer's moments (entries of a parameter too) only on demand */
        bool state = en->kind >= TS_KIND_ACCL, changes = !state && (t->op == TS_OP_PARAM || t->op == TS_OP_BUFFER);
        ts_status st = copy_of(p, en->data, ts_entry_cells(en), changes, state, &en->data); /* numel: 4-byte cells */
        if (st) return st;
    }
    int n_state = *m->n_state;
    if (n_state) {
        p->dev_state = ts_calloc((size_t)n_state, sizeof *p->dev_state);
        if (!p->dev_state) return TS_ERR_OUT_OF_MEMORY;
    }
    for (int s = 0; s < n_state; s++) {
        const ts_opt_state *h = &(*m->state)[s];
        ts_opt_state *d = &p->dev_state[s];
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
    p->host_inputs = ts_calloc((size_t)p->n_nodes, sizeof *p->host_inputs);
    p->dev_input_bytes = ts_calloc((size_t)p->n_nodes, sizeof *p->dev_input_bytes);
    p->pinned = ts_calloc((size_t)p->n_dev_copies + TS_LANDINGS, sizeof *p->pinned); /* exec/device.c pin_landings' */
    p->host_view = ts_malloc((size_t)biggest * sizeof(float));
    if (!p->dev_inputs || !p->host_inputs || !p->dev_input_bytes || !p->pinned || !p->host_view) return TS_ERR_OUT_OF_MEMORY;
    p->host_view_floats = biggest;
    void *stage = NULL;
    ts_status sst = p->backend->alloc((size_t)host_held * sizeof(float), &stage);
    if (sst) return sst;
    p->dev_stage = stage;
    bool half = false;
    for (int i = 0; i < p->n_entries; i++) half = half || p->entries[i].grid != TS_F32;
    if (half) { /* what rounding onto a 16-bit grid loses, counted where it happens */
        void *d = NULL;
        ts_status st = p->backend->alloc((size_t)p->n_entries * sizeof(ts_half_loss), &d);
        if (st) return st;
        p->dev_lost = d;
        p->host_lost = ts_calloc((size_t)p->n_entries, sizeof *p->host_lost);
        if (!p->host_lost) return TS_ERR_OUT_OF_MEMORY;
    }
    if (p->anchor_local > 0) {
        void *d = NULL;
        ts_status st = p->backend->alloc((size_t)p->anchor_local * sizeof(float), &d);
        if (st) return st;
        p->dev_anchors = d;
    }
    ts_status ost = bind_outfeeds(m, p);
    if (ost) return ost;
    if (p->n_watch > 0) {
        size_t bytes = (size_t)p->n_watch * sizeof(ts_device_stats);
        p->queued = ts_calloc((size_t)p->n_watch, sizeof *p->queued);
        if (!p->queued || alloc_slot_set(&p->run_slots, p->n_watch) || alloc_slot_set(&p->done_slots, p->n_watch)) return TS_ERR_OUT_OF_MEMORY;
        void *d = NULL;
        ts_status st = p->backend->stats_reduce_many ? p->backend->alloc(bytes, &d) : TS_OK;
        if (st) return st;
        p->dev_slots = d;
        /* the watches with histograms or ranges: a slot of counts each */
        p->hist_slot = ts_calloc((size_t)p->n_watch, sizeof *p->hist_slot);
        if (!p->hist_slot) return TS_ERR_OUT_OF_MEMORY;
        for (int w = 0; w < p->n_watch; w++) p->hist_slot[w] = p->watch_what[w] & (TS_WATCH_HISTOGRAM | TS_WATCH_RANGE) ? p->n_hist++ : -1;
        if (p->dev_slots && p->n_hist > 0) {
            p->run_slots.hist = ts_calloc((size_t)p->n_hist, sizeof *p->run_slots.hist);
            p->done_slots.hist = ts_calloc((size_t)p->n_hist, sizeof *p->done_slots.hist);
            if (!p->run_slots.hist || !p->done_slots.hist) return TS_ERR_OUT_OF_MEMORY;
            if ((st = p->backend->alloc((size_t)p->n_hist * sizeof(ts_device_hist), &d))) return st;
            p->dev_hist = d;
        }
    }
    return TS_OK;
}

ts_status ts_device_fetch_state(const ts_prog *p, ts_device dev) {
    if (!p || dev.backend->host_addressable) return TS_OK;
    for (int i = 0; i < p->n_dev_copies; i++) {
        const ts_device_copy *c = &p->dev_copies[i];
        if (c->state) dev.backend->copy_to_host(dev.stream, c->host, c->dev, (size_t)c->numel * sizeof(float));
    }
    return dev.backend->synchronize(dev.stream);
}

