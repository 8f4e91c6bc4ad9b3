/* device.c -- a run on a device whose memory the host cannot read (a
 * GPU). The host keeps every parameter, buffer, constant and optimizer
 * state; the device works on copies of them (made at compile,
 * compile/device.c), sent before a run when the host wrote them since (the
 * graph's values_gen: ts_param_set, a restored checkpoint, another model's
 * run). The parameters and buffers a training run changes stay on the
 * device until the host reads or writes them (fetch_values, through the
 * graph's ts_graph_values_current), so a loop that reads no weights moves
 * none. The run's inputs go to device buffers. Anchors captured on the
 * device and the watches reduced there (stats, histograms, range counts)
 * come back in one copy each after the run, as do the outfeed records
 * captured there (pushed to their queues then); other observers read a
 * host copy of their tensor (observe/'s ts_device_host_view).
 * docs/backend.md tells the whole path and what is next. */
#include "backend/backend.h"
#include "observe/run.h"
#include "exec/exec.h"
#include "observe/observe.h"

#include "backend/pool.h"
#include "core/metrics.h"

#include <string.h>

/* What the copies after each run land in, page-locked once (the first
 * run, when a recompiled model's old program has let go of them): the
 * parameters and buffers a run changes, the summaries' slots, the 16-bit
 * roundings' losses and the anchors. The device then writes them directly
 * and asynchronously, rather than each copy waiting on the driver's
 * staging through pageable memory. What cannot be locked (another model of
 * the graph holds it) is copied as before. */
static void pin_landings(ts_prog *p) {
    const ts_backend *be = p->backend;
    p->pins_tried = true;
    if (!be->host_pin) return;
    for (int i = 0; i < p->n_dev_copies; i++) {
        const ts_device_copy *c = &p->dev_copies[i];
        if (c->download && be->host_pin(c->host, (size_t)c->numel * sizeof(float))) p->pinned[p->n_pinned++] = c->host;
    }
    void *landing[TS_LANDINGS] = {p->dev_slots ? p->run_slots.stats : NULL, p->dev_slots ? p->done_slots.stats : NULL,
                                  p->dev_lost ? p->host_lost : NULL,      p->dev_anchors ? p->arena_anchors : NULL,
                                  p->dev_hist ? p->run_slots.hist : NULL, p->dev_hist ? p->done_slots.hist : NULL,
                                  p->host_outfeed};
    size_t bytes[TS_LANDINGS] = {(size_t)p->n_watch * sizeof(ts_device_stats), (size_t)p->n_watch * sizeof(ts_device_stats),
                                 (size_t)p->n_entries * sizeof(ts_half_loss),  (size_t)p->anchor_local * sizeof(float),
                                 (size_t)p->n_hist * sizeof(ts_device_hist),   (size_t)p->n_hist * sizeof(ts_device_hist),
                                 p->outfeed_bytes};
    for (int k = 0; k < TS_LANDINGS; k++)
        if (landing[k] && be->host_pin(landing[k], bytes[k])) {
            p->pinned[p->n_pinned++] = landing[k];
            p->outfeed_pinned |= landing[k] == p->host_outfeed; /* the device copies records there while the run goes */
        }
}

typedef struct copy_job {
    char *dst;
    const char *src;
} copy_job;

static void copy_part(void *ctx, int64_t begin, int64_t end) {
    const copy_job *j = ctx;
    memcpy(j->dst + begin, j->src + begin, (size_t)(end - begin));
}

/* Input i's bytes sent to dst on the device: through its page-locked
 * staging (made, or made bigger, when it does not hold them) a piece at a
 * time, the model's threads copying the next piece in while the device
 * reads the last, the transfer then going on while the host walks the run;
 * without staging (not locked), from the caller's memory through the
 * driver's (counted: InputsNotStaged). Returns the ns the host spent
 * copying into the staging. */
#define STAGE_PIECE ((size_t)1 << 20)
static uint64_t send_input(ts_run *run, int i, void *dst, const void *src, size_t bytes, bool grown) {
    ts_prog *p = run->prog;
    const ts_backend *be = p->backend;
    if (grown && p->host_inputs[i]) {
        be->host_unpin(p->host_inputs[i]);
        ts_free(p->host_inputs[i]);
        p->host_inputs[i] = NULL;
    }
    if (grown && be->host_pin) {
        void *h = ts_malloc(bytes);
        if (h && be->host_pin(h, bytes)) p->host_inputs[i] = h;
        else ts_free(h);
    }
    if (!p->host_inputs[i]) {
        ts_counter_add("InputsNotStaged", 1);
        be->copy_to_device(run->dev.stream, dst, src, bytes);
        return 0;
    }
    uint64_t staging = 0;
    for (size_t at = 0; at < bytes; at += STAGE_PIECE) {
        size_t n = bytes - at < STAGE_PIECE ? bytes - at : STAGE_PIECE;
        copy_job j = {(char *)p->host_inputs[i] + at, (const char *)src + at};
        uint64_t t0 = ts_now_ns();
        ts_pool_for(run->pool, (int64_t)n, (int64_t)1 << 18, copy_part, &j);
        staging += ts_now_ns() - t0;
        be->copy_to_device(run->dev.stream, (char *)dst + at, (char *)p->host_inputs[i] + at, n);
    }
    return staging;
}

/* values_fetch (graph.h) for a model that trained on a device: the
 * parameters and buffers its runs changed, brought back to the host when
 * something there reads or writes them, not after every run (what crosses
 * to the host is what the user asks for). */
static ts_status fetch_values(void *owner) {
    ts_run *run = owner;
    ts_prog *p = run->prog;
    const ts_backend *be = p->backend;
    uint64_t t0 = ts_now_ns(), bytes = 0;
    for (int i = 0; i < p->n_dev_copies; i++) {
        const ts_device_copy *c = &p->dev_copies[i];
        if (c->download) {
            be->copy_to_host(run->dev.stream, c->host, c->dev, (size_t)c->numel * sizeof(float));
            bytes += (uint64_t)c->numel * sizeof(float);
        }
    }
    ts_status st = be->synchronize(run->dev.stream);
    if (st) return ts_error_wrap(st, "bringing the parameters back from %s", be->name);
    ts_metric_record("ValuesToHost", (double)(ts_now_ns() - t0));
    ts_metric_record_value("ValuesToHostBytes", (double)bytes);
    return TS_OK;
}

ts_status ts_device_before_run(ts_run *run) {
    ts_prog *p = run->prog;
    const ts_backend *be = p->backend;
    if (run->g->values_owner != run) { /* another model's device holds newer values: back first, then sent again */
        ts_status st = ts_graph_values_current(run->g);
        if (st) return st;
    }
    if (be->host_addressable) return TS_OK;
    uint64_t t0 = ts_now_ns(), sent = 0, staging = 0;
    be->event_record(run->dev.stream, &p->marks[0]);
    if (!p->pins_tried) pin_landings(p);
    /* what the host wrote since the device's copies were sent: the values
     * (ts_param_set, a restored checkpoint, another model's run), the
     * optimizer state (a restored checkpoint); all of it before the
     * program's first run */
    bool values = !p->sent || p->sent_gen != run->g->values_gen, state = !p->sent || p->state_sent_gen != run->state_gen;
    for (int i = 0; i < p->n_dev_copies && (values || state); i++) {
        const ts_device_copy *c = &p->dev_copies[i];
        if (c->state ? state : values) {
            be->copy_to_device(run->dev.stream, c->dev, c->host, (size_t)c->numel * sizeof(float));
            sent += (uint64_t)c->numel * sizeof(float);
        }
    }
    p->sent = true;
    p->sent_gen = run->g->values_gen;
    p->state_sent_gen = run->state_gen;
    for (int k = 0; k < p->n_order; k++) {
        int i = p->order[k];
        if (run->g->t[i]->op != TS_OP_INPUT || !p->bound[i]) continue;
        size_t bytes = (size_t)ts_array_numel(p->bound[i]) * ts_dtype_size(p->bound[i]->dtype);
        bool grown = bytes > p->dev_input_bytes[i];
        if (grown) { /* the first run, or bigger inputs */
            be->free(p->dev_inputs[i]);
            p->dev_inputs[i] = NULL;
            p->dev_input_bytes[i] = 0;
            void *d = NULL;
            ts_status st = be->alloc(bytes, &d);
            if (st) return ts_error_wrap(st, "run: no device memory for input '%s'", run->g->t[i]->name);
            p->dev_inputs[i] = d;
            p->dev_input_bytes[i] = bytes;
        }
        staging += send_input(run, i, p->dev_inputs[i], p->bound[i]->data, bytes, grown);
        sent += bytes;
    }
    be->event_record(run->dev.stream, &p->marks[1]);
    /* the copies are queued: one from page-locked staging overlaps the
     * host's walk of the run (exec/replay.c); one from the caller's memory
     * is done when the call returns */
    ts_metric_record("TransferToDevice", (double)(ts_now_ns() - t0));
    ts_metric_record("InputStaging", (double)staging); /* of it, the host's copies into the page-locked staging */
    ts_metric_record_value("TransferToDeviceBytes", (double)sent);
    return TS_OK;
}

ts_status ts_device_after_run(ts_run *run) {
    ts_prog *p = run->prog;
    const ts_backend *be = p->backend;
    if (be->host_addressable) {
        /* a training run wrote the parameters in place: what another model
         * keeps derived from them (an inference model's transformed weights,
         * kctx.cache) or a device's copies of them are made again */
        if (run->training) run->g->values_gen++;
        return TS_OK;
    }
    ts_observe_device_flush(run); /* what a run that stopped early left queued */
    be->event_record(run->dev.stream, &p->marks[2]);
    uint64_t t0 = ts_now_ns(), fetched = 0;
    if (p->dev_anchors) { /* the anchors the run captured on the device: one copy */
        be->copy_to_host(run->dev.stream, p->arena_anchors, p->dev_anchors, (size_t)p->anchor_local * sizeof(float));
        p->anchor_bytes += (uint64_t)p->anchor_local * sizeof(float);
        fetched += (uint64_t)p->anchor_local * sizeof(float);
    }
    if (p->dev_lost) { /* what the 16-bit roundings lost: one copy */
        be->copy_to_host(run->dev.stream, p->host_lost, p->dev_lost, (size_t)p->n_entries * sizeof(ts_half_loss));
        fetched += (uint64_t)p->n_entries * sizeof(ts_half_loss);
    }
    if (p->run_slots.any) { /* the summaries the run reduced on the device: one copy */
        be->copy_to_host(run->dev.stream, p->run_slots.stats, p->dev_slots, (size_t)p->n_watch * sizeof(ts_device_stats));
        fetched += (uint64_t)p->n_watch * sizeof(ts_device_stats);
    }
    fetched += ts_observe_device_fetch_rows(run); /* the outfeed records and print lines it captured there, not streamed */
    if (p->run_slots.any_hist) { /* and their histograms and range counts */
        be->copy_to_host(run->dev.stream, p->run_slots.hist, p->dev_hist, (size_t)p->n_hist * sizeof(ts_device_hist));
        fetched += (uint64_t)p->n_hist * sizeof(ts_device_hist);
    }
    be->event_record(run->dev.stream, &p->marks[3]);
    ts_observe_device_results(run); /* the last run's summaries, if nothing read them, while the device works on this one */
    ts_status st = be->synchronize(run->dev.stream);
    uint64_t t_end = ts_now_ns(); /* marks[3] passed: the kernels' slices on the timeline placed by it */
    /* the host's wait for the run's last work and the copies behind it */
    for (int i = 0; p->dev_lost && !st && i < p->n_entries; i++)
        if (p->entries[i].grid != TS_F32) p->entries[i].lost = p->host_lost[i];
    ts_metric_record("DeviceWait", (double)(ts_now_ns() - t0));
    ts_metric_record_value("TransferFromDeviceBytes", (double)fetched);
    if (!st) { /* the same on the device's clock: where the run's time went there */
        static const char *const spans[3] = {"DeviceTime.CopyToDevice", "DeviceTime.Run", "DeviceTime.CopyToHost"};
        for (int i = 0; i < 3; i++) ts_metric_record(spans[i], (double)be->event_elapsed_ns(&p->marks[i], &p->marks[i + 1]));
        ts_exec_op_times(run, t_end); /* each kernel's, for OpTime.<Op> (and the timeline's device track: model/run.c) */
    }
    if (be->memory_info) {
        ts_device_memory mem;
        be->memory_info(&mem);
        ts_metric_record_value("DeviceMemoryInUseBytes", (double)mem.in_use);
        ts_metric_record_value("DeviceMemoryPeakBytes", (double)mem.peak);
        ts_metric_record_value("DeviceMemoryFreeBytes", (double)mem.free);
    }
    if (run->training) { /* the parameters moved on the device: the host's come back when read, another model sends them again */
        run->g->values_gen++;
        run->g->values_fetch = fetch_values;
        run->g->values_owner = run;
        p->sent_gen = run->g->values_gen;
    }
    ts_observe_device_finish(run, !st);
    if (!st) st = ts_observe_device_outfeeds(run); /* its records, in the order they were made */
    p->n_outfed = p->streamed = p->n_points = 0; /* the next run's fill the rows again (a failed run's go with it) */
    p->stream_st = TS_OK;
    return st;
}
