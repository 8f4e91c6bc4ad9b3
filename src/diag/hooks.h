/* hooks.h -- what the diagnostics layer does around compile and runs:
 * graph dumps (TS_SAVE_GRAPH_FILE), the metrics file (TS_METRICS_FILE) and
 * the per-step trace line at log level 5. Each is handed the model's runs
 * (observe/run.h), never the model. Internal. */
#ifndef TS_DIAG_HOOKS_H
#define TS_DIAG_HOOKS_H

#include "diag/backward_ops.h"
#include "observe/run.h"

/* After every successful compile (and recompile). A graph dump that cannot
 * be written is TS_ERR_IO (the compile itself stands). */
ts_status ts_diag_after_compile(const ts_run *run);
/* After every successful run; run_ns is its wall time. A metrics file that
 * cannot be written is TS_ERR_IO (the run itself counts). */
ts_status ts_diag_after_run(const ts_run *run, uint64_t run_ns);
/* op_observers.c: the diagnostics' observers on the op chain
 * (core/op_chain.h): the op a crash report names, before each call; each
 * op's label and slice on the timeline, where the model traces its steps
 * or another model's trace is open as the run starts. */
ts_status ts_diag_attach_crash(ts_run *run, ts_op_chain *c);
ts_status ts_diag_attach_trace(ts_run *run, ts_op_chain *c);
/* With log_layer_shapes: the layer output shapes of the last run, and those
 * a recompilation (for `cause`) changed, or a switch back to the program
 * compiled before (switched), in one info line each. */
void ts_layer_shapes_after_run(const ts_run *run);
void ts_layer_shapes_changed(const ts_run *run, const ts_prog *was, const ts_prog *now, const char *cause, bool switched);

#endif
