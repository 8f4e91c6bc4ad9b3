/* dump_debug.h -- the offline debugger dump (ts_options_set_dump_debug,
 * docs/formats.md#debugger-dump): the tensors of chosen runs written as
 * .npy files with an index, through the run's hold (observe/hold.c). */
#ifndef TS_DUMP_DEBUG_H
#define TS_DUMP_DEBUG_H

#include "model/model.h"

/* Around a run (model/run.c): before it, with its program bound, the hold
 * armed when the run is one to dump (the plan checked against the limit at
 * the first); after it, the held tensors copied and handed to the writer
 * thread, which writes them while the next run goes on. */
ts_status ts_dump_before_run(ts_model *m);
ts_status ts_dump_after_run(ts_model *m);
/* Waits for the writer (ts_model_finish): its first failure. */
ts_status ts_dump_finish(ts_model *m);
/* ts_model_dump_debug_plan's work on a compiled model with a dump (model/exports.c checks). */
ts_status ts_dump_debug_plan(ts_model *m, int64_t last_run, int64_t *tensors, int64_t *steps, int64_t *bytes);
void ts_dump_free(ts_model *m);

#endif
