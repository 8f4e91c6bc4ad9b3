/* memory.h -- process memory from /proc, inside the library (memory.c). */
#ifndef TS_DIAG_MEMORY_H
#define TS_DIAG_MEMORY_H

#include "core/core.h"

/* ts_memory_get_tree; not `full`: RSS alone (from statm, microseconds a
 * process), PSS and USS -1 (smaps_rollup walks every page table: about
 * 4 ms per 100 MB resident). */
ts_status ts_memory_tree(ts_memory_usage *out, int *processes, bool full);
/* The same, with each process (this one first) into procs: up to cap of
 * them, *n_procs how many. */
ts_status ts_memory_tree_procs(ts_memory_usage *out, int *processes, bool full, ts_process_memory *procs, int cap, int *n_procs);

#endif
