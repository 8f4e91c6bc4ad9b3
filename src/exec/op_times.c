/* op_times.c -- each kernel call's time, per node, for the metrics'
 * OpTime.<Op> (summed per op type after the run, exec.c).
 *
 * On the CPU a call is done when it returns: the host's clock around it is
 * its time. On a device whose memory the host cannot read a call only
 * launches its kernel, so the host's clock would measure the launch, and
 * in a replayed step (exec/replay.c) the host's walk of it: there a pair
 * of events on the model's stream goes around each call of a step
 * launched call by call, read after the run's one synchronize
 * (ts_device_after_run). A replayed step's kernels are not timed one by
 * one (its whole time is DeviceTime.Run).
 *
 * A program keeps op_rounds pairs per node, made at its first such run:
 * the first calls of each node in a run are timed (at least its forward
 * and backward of the first micro-batch); a node called more often (many
 * micro-batches of a large model) has its total estimated from them, as
 * its calls times their mean. The counters OpCallsTimed and
 * OpCallsEstimated say how many of each.
 *
 * A model that traces (ts_options_set_trace) keeps a pair for every call
 * of a run where they fit (TS_OP_EVENT_PAIRS_TRACED), and its traced
 * steps' calls go on the timeline on a track of the device's own
 * ("kernels (cuda:0)"), one slice per kernel call: its time on the
 * device's clock, placed on the host's by the run's last mark, which the
 * device passed just before the run's synchronize returned.
 *
 * It is the innermost observer on the op chain (core/op_chain.h): its
 * clock is read last before the call and first after it, and its reads
 * are the call's t0 and t1 for the other observers (the timeline's). */
#include "exec/exec.h"

#include "backend/backend.h"
#include "core/metrics.h"
#include "graph/ops.h"

#include <stdio.h>
#include <string.h>

/* Before a run: a device's events (made at its first run). */
static ts_status prepare(ts_run *run) {
    ts_prog *p = run->prog;
    if (p->backend->host_addressable) return TS_OK;
    int n = p->n_nodes + 1;
    if (!p->op_events) {
        int rounds = (TS_OP_EVENT_PAIRS / n) & ~1;
        p->op_rounds = rounds > 2 ? rounds : 2; /* a forward and a backward */
        int64_t calls = 2 * run->opts.device_iterations * (run->training ? run->opts.grad_accum : 1); /* a node's in a run, at most */
        if (run->opts.trace_path && calls > p->op_rounds && calls * n <= TS_OP_EVENT_PAIRS_TRACED) p->op_rounds = (int)calls;
        p->op_events = ts_calloc((size_t)p->op_rounds * (size_t)n, sizeof *p->op_events);
        p->op_calls = ts_calloc((size_t)n, sizeof *p->op_calls);
        if (!p->op_events || !p->op_calls) {
            ts_free(p->op_events), ts_free(p->op_calls);
            p->op_events = NULL, p->op_calls = NULL;
            return ts_error(TS_ERR_OUT_OF_MEMORY, "run: no memory for the events that time %d nodes' kernels on %s", n - 1, p->backend->name);
        }
    }
    memset(p->op_calls, 0, (size_t)n * sizeof *p->op_calls);
    return TS_OK;
}

/* The pair for node's next call (-1: the optimizer's step), or NULL: not
 * timed by events (the CPU, a replayed step, past the node's rounds). */
static ts_op_event *next_pair(const ts_prog *p, int node) {
    if (!p->op_events || p->recorded) return NULL;
    int i = node < 0 ? p->n_nodes : node;
    int64_t r = p->op_calls[i];
    return r < p->op_rounds ? &p->op_events[r * (p->n_nodes + 1) + i] : NULL;
}

static ts_status op_begin(void *ctx, ts_run *run, ts_op_call *c) {
    (void)ctx;
    ts_op_event *e = next_pair(run->prog, c->node);
    if (e) {
        e->mb = c->mb, e->backward = c->backward, e->traced = c->traced;
        run->dev.backend->event_record(run->dev.stream, &e->start);
    }
    c->t0 = ts_now_ns();
    return TS_OK;
}

static ts_status op_end(void *ctx, ts_run *run, ts_op_call *c) {
    (void)ctx;
    ts_prog *p = run->prog;
    int node = c->node;
    c->t1 = ts_now_ns();
    if (p->backend->host_addressable) {
        *(node < 0 ? &p->opt_ns : &p->op_ns[node]) += c->t1 - c->t0;
        return TS_OK;
    }
    ts_op_event *e = next_pair(p, node);
    if (e) run->dev.backend->event_record(run->dev.stream, &e->end);
    if (p->op_events && !p->recorded) p->op_calls[node < 0 ? p->n_nodes : node]++;
    return TS_OK;
}

ts_status ts_exec_attach_op_times(ts_run *run, ts_op_chain *c) {
    ts_status st = prepare(run);
    return st ? st : ts_op_chain_add(c, op_begin, op_end, NULL);
}

void ts_exec_op_times(ts_run *run, uint64_t t_end) {
    ts_prog *p = run->prog;
    if (!p->op_events) return;
    const ts_backend *be = p->backend;
    int n = p->n_nodes + 1;
    int64_t timed = 0, estimated = 0;
    p->marks_end_ns = t_end; /* the traced calls' slices are drawn from the events by the model layer (model/kernel_track.c) */
    for (int i = 0; i < n; i++) {
        int64_t calls = p->op_calls[i], k = calls < p->op_rounds ? calls : p->op_rounds;
        if (!calls) continue;
        uint64_t ns = 0;
        for (int64_t r = 0; r < k; r++) {
            const ts_op_event *e = &p->op_events[r * n + i];
            ns += be->event_elapsed_ns(&e->start, &e->end);
        }
        if (calls > k) ns = (uint64_t)((double)ns * (double)calls / (double)k); /* the calls past its events: their mean each */
        *(i == n - 1 ? &p->opt_ns : &p->op_ns[i]) += ns;
        timed += k;
        estimated += calls - k;
    }
    if (timed) ts_counter_add("OpCallsTimed", timed);
    if (estimated) ts_counter_add("OpCallsEstimated", estimated);
}
