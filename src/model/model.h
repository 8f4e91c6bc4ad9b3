/* model.h -- a model as the model layer (src/model/) holds it: its runs'
 * state (ts_run, observe/run.h), which it hands to the executor, the
 * observers, the job's ranks and the diagnostics' hooks, and what only the
 * model layer reads: the input shapes a new micro-batch size asks for, the
 * program kept for the other size, the bookkeeping of compiles, the start
 * hook, the debugger dump and the spike detector. No layer below the model
 * layer includes this header (docs/design.md#the-model-object-by-owner).
 * Compile reads none of it: it is handed a ts_model_def
 * (compile/program.h, ts_model_definition). */
#ifndef TS_MODEL_H
#define TS_MODEL_H

#include "compile/program.h"
#include "diag/backward_ops.h"
#include "observe/run.h"

#include <stddef.h>

struct ts_model {
    ts_run run;          /* what runs and the state of its runs (observe/run.h) */
    ts_shape *input_override; /* per node, ndim -1 = as declared */
    int n_override;
    /* the program of the other micro-batch size, kept when a new size
     * recompiled (an epoch's last, smaller batch): switching back to it
     * is no compilation, so each size compiles once a run. Any other
     * compile (options, anchors, the graph) drops it. */
    ts_prog *spare;
    bool compiled, stale;
    bool recompile_logged; /* the first recompilation is logged at info */
    const char *stale_cause;
    bool started, in_start; /* the on_start hook has returned TS_OK / is running */
    struct ts_dump *dump; /* ts_options_set_dump_debug: what the dump wrote so far (model/dump_debug.c) */
    /* the spike detector (ts_options_detect_spikes, model/spike_watch.c) */
    struct ts_spike_watch *spikes;
};

/* model.c: what compile reads of m (compile/program.h), all it is handed. */
ts_model_def ts_model_definition(ts_model *m);

/* The model a run belongs to (every ts_run is a model's). */
static inline ts_model *ts_model_of(ts_run *run) { return (ts_model *)(void *)((char *)run - offsetof(ts_model, run)); }

/* spike_watch.c: the spike detector (ts_options_detect_spikes) before each
 * optimizer step of a training model, an observer on the op chain; before
 * a run, the hold armed for the actions that keep the step; after a run it
 * stopped (TS_ERR_SPIKE), the held tensors written to the .npz (its
 * status: TS_ERR_SPIKE, or why the file could not be written); freed with
 * the model. */
ts_status ts_spike_watch_attach(ts_run *run, ts_op_chain *c);
ts_status ts_spike_watch_before_run(ts_model *m);
ts_status ts_spike_watch_after_stop(ts_model *m);
void ts_spike_watch_free(ts_model *m);

/* memory.c: after a compile, the memory plan's peak (the most bytes live
 * at one point of the step, ts_model_memory_plan) as the metric
 * MemoryPlanPeakBytes. */
void ts_memory_plan_metrics(const ts_model *m);

/* model/model.c: the program for the inputs' new micro-batch size (the
 * shapes m->input_override asks for): the spare when it was compiled for
 * them (switched to, no compilation), else a new one, the current kept
 * as the spare. why: what changed, for the log line. */
ts_status ts_model_compile_for_shape(ts_model *m, const char *why);

#endif
