/* dump_debug.h -- the offline debugger dump (ts_options_set_dump_debug,
 * docs/formats.md#debugger-dump): the tensors of chosen runs written as
 * .npy files with an index, through the run's hold (observe/hold.c). */
#ifndef TS_DUMP_DEBUG_H
#define TS_DUMP_DEBUG_H

#include "compile/model.h"

/* What the user asked for (in ts_options). */
typedef struct ts_dump_spec {
    char *dir;
    char *ops;            /* a glob over tensor names or op types; NULL: every one */
    int64_t first, last;  /* runs, 1-based, inclusive; last 0: to the end */
    bool grads;           /* the gradients too */
    int64_t limit;        /* bytes; 0: no limit */
} ts_dump_spec;

ts_status ts_dump_spec_copy(ts_dump_spec **dst, const ts_dump_spec *src);
void ts_dump_spec_free(ts_dump_spec *s);

/* Around a run (model/run.c): before it, with its program bound, the hold
 * armed when the run is one to dump (the plan checked against the limit at
 * the first); after it, the held tensors copied and handed to the writer
 * thread, which writes them while the next run goes on. */
ts_status ts_dump_before_run(ts_model *m);
ts_status ts_dump_after_run(ts_model *m);
/* Waits for the writer (ts_model_finish): its first failure. */
ts_status ts_dump_finish(ts_model *m);
void ts_dump_free(ts_model *m);

#endif
