/* device.c -- a run on a device whose memory the host cannot read (a
 * GPU). The host keeps every parameter, buffer, constant and optimizer
 * state; the device works on copies of them (made at compile,
 * compile/device.c), sent before a run when the host wrote them since (the
 * graph's values_gen: ts_param_set, a restored checkpoint, another model's
 * run) and, for the parameters and buffers a run changes, brought back
 * after it, so everything that reads them on the host (weights,
 * checkpoints, parameter views) sees them current. The run's inputs go to
 * device buffers. Anchors captured on the device and the stats watches
 * reduced there come back in one copy each after the run; other observers
 * read a host copy of their tensor (observe/'s ts_device_host_view).
 * docs/backend.md tells the whole path and what is next. */
#include "backend/backend.h"
#include "compile/model.h"
#include "exec/exec.h"
#include "observe/observe.h"

#include "diag/metrics.h"


ts_status ts_device_before_run(ts_model *m) {
    ts_prog *p = m->prog;
    const ts_backend *be = p->backend;
    if (be->host_addressable) return TS_OK;
    uint64_t t0 = ts_now_ns(), sent = 0;
    be->event_record(m->stream, &p->marks[0]);
    /* what the host wrote since the device's copies were sent: the values
     * (ts_param_set, a restored checkpoint, another model's run), the
     * optimizer state (a restored checkpoint); all of it before the
     * program's first run */
    bool values = !p->sent || p->sent_gen != m->g->values_gen, state = !p->sent || p->state_sent_gen != m->state_gen;
    for (int i = 0; i < p->n_dev_copies && (values || state); i++) {
        const ts_device_copy *c = &p->dev_copies[i];
        if (c->state ? state : values) {
            be->copy_to_device(m->stream, c->dev, c->host, (size_t)c->numel * sizeof(float));
            sent += (uint64_t)c->numel * sizeof(float);
        }
    }
    p->sent = true;
    p->sent_gen = m->g->values_gen;
    p->state_sent_gen = m->state_gen;
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
        sent += bytes;
    }
    be->event_record(m->stream, &p->marks[1]);
    /* the copies are queued: a copy from the host's pageable memory is done
     * when the call returns, the rest overlaps the run */
    ts_metric_record("TransferToDevice", (double)(ts_now_ns() - t0));
    ts_metric_record_value("TransferToDeviceBytes", (double)sent);
    return TS_OK;
}

ts_status ts_device_after_run(ts_model *m) {
    ts_prog *p = m->prog;
    const ts_backend *be = p->backend;
    if (be->host_addressable) {
        /* a training run wrote the parameters in place: what another model
         * keeps derived from them (an inference model's transformed weights,
         * kctx.cache) or a device's copies of them are made again */
        if (m->training) m->g->values_gen++;
        return TS_OK;
    }
    ts_observe_device_flush(m); /* what a run that stopped early left queued */
    be->event_record(m->stream, &p->marks[2]);
    uint64_t t0 = ts_now_ns(), fetched = 0;
    for (int i = 0; i < p->n_dev_copies; i++) {
        const ts_device_copy *c = &p->dev_copies[i];
        if (c->download) {
            be->copy_to_host(m->stream, c->host, c->dev, (size_t)c->numel * sizeof(float));
            fetched += (uint64_t)c->numel * sizeof(float);
        }
    }
    if (p->dev_anchors) { /* the anchors the run captured on the device: one copy */
        be->copy_to_host(m->stream, p->arena_anchors, p->dev_anchors, (size_t)p->anchor_local * sizeof(float));
        p->anchor_bytes += (uint64_t)p->anchor_local * sizeof(float);
        fetched += (uint64_t)p->anchor_local * sizeof(float);
    }
    if (p->dev_lost) { /* what the 16-bit roundings lost: one copy */
        be->copy_to_host(m->stream, p->host_lost, p->dev_lost, (size_t)p->n_entries * sizeof(ts_half_loss));
        fetched += (uint64_t)p->n_entries * sizeof(ts_half_loss);
    }
    if (p->any_pending) { /* the summaries the run reduced on the device: one copy */
        be->copy_to_host(m->stream, p->host_slots, p->dev_slots, (size_t)p->n_watch * sizeof(ts_device_stats));
        fetched += (uint64_t)p->n_watch * sizeof(ts_device_stats);
    }
    be->event_record(m->stream, &p->marks[3]);
    ts_status st = be->synchronize(m->stream);
    /* the host's wait for the run's last work and the copies behind it */
    for (int i = 0; p->dev_lost && !st && i < p->n_entries; i++)
        if (p->entries[i].grid != TS_F32) p->entries[i].lost = p->host_lost[i];
    ts_metric_record("DeviceWait", (double)(ts_now_ns() - t0));
    ts_metric_record_value("TransferFromDeviceBytes", (double)fetched);
    if (!st) { /* the same on the device's clock: where the run's time went there */
        static const char *const spans[3] = {"DeviceTime.CopyToDevice", "DeviceTime.Run", "DeviceTime.CopyToHost"};
        for (int i = 0; i < 3; i++) ts_metric_record(spans[i], (double)be->event_elapsed_ns(&p->marks[i], &p->marks[i + 1]));
        ts_exec_op_times(m); /* each kernel's, for OpTime.<Op> */
    }
    if (be->memory_info) {
        ts_device_memory mem;
        be->memory_info(&mem);
        ts_metric_record_value("DeviceMemoryInUseBytes", (double)mem.in_use);
        ts_metric_record_value("DeviceMemoryPeakBytes", (double)mem.peak);
        ts_metric_record_value("DeviceMemoryFreeBytes", (double)mem.free);
    }
    /* the host's copies moved: another model of the graph sends them again, not this one */
    m->g->values_gen++;
    p->sent_gen = m->g->values_gen;
    if (!st) ts_observe_device_finish(m);
    else p->any_pending = false;
    return st;
}
