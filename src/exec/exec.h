/* exec.h -- the executor of a compiled program. It runs what compile built
 * (run->prog) and never compiles: binding the inputs, recompiling for a new
 * micro-batch size and the run's bookkeeping belong to the model layer. */
#ifndef TS_EXEC_H
#define TS_EXEC_H

#include "observe/run.h"

/* One run over the inputs bound in run->prog->bound (one array per input
 * node, each the run's S micro-batches stacked on axis 0): checks class
 * labels, then D x A micro-batches of forward, backward and optimizer steps
 * with the observers; records the per-op times. On a numeric-check failure
 * run->failed_entry names the tensor. */
ts_status ts_exec_run(ts_run *run);
/* Whether node t reads indices (labels, ids, a gather's) that the graph
 * computes (not an input's, a constant's or a CastIndex's): the run
 * checks them before t's kernel, on the host (a device's copied there). */
bool ts_exec_computed_indices(const ts_run *run, const ts_tensor *t);
/* ts_model_rerun: the first micro-batch's forward (and a training model's
 * backward) again, its inputs' data per node in `inputs` (on the model's
 * device), with no state updated and the program's observers as they are
 * flagged; the parameters observed first. Waits for the device. */
ts_status ts_exec_again(ts_run *run, float *const *inputs);

/* replay.c: the run's D steps (`step`: step d's micro-batches, as the
 * executor makes them), the whole run recorded once and replayed in one
 * launch where the device records (ts_backend.capture_begin) and the run's
 * work does not depend on what the host reads during it; else each `step`
 * as it is. */
ts_status ts_exec_recorded(ts_run *run, ts_status (*step)(ts_run *run, int64_t d));

/* device.c: a run on a device whose memory the host cannot read */
/* Before a run: the host's values and the run's inputs to the device. */
ts_status ts_device_before_run(ts_run *run);
/* After a run: what it changed back to the host (the parameters and
 * buffers); the first device error. */
ts_status ts_device_after_run(ts_run *run);

/* op_times.c: each kernel call's time for OpTime.<Op> (per node in
 * p->op_ns, the optimizer's steps in p->opt_ns): the host's clock on the
 * CPU, a pair of events on a device for a step launched call by call.
 * Before a run: its observer on the op chain (the innermost: the call's
 * t0 and t1), and a device's events (made at its first run). */
ts_status ts_exec_attach_op_times(ts_run *run, ts_op_chain *c);
/* After the run's synchronize on a device: the events' times into
 * p->op_ns and p->opt_ns; while the model traces, its traced calls'
 * slices on the device's track, placed by `last`, the run's last event,
 * which the host saw passed at t_end (ts_now_ns). */
void ts_exec_op_times(ts_run *run, uint64_t t_end);

#endif
