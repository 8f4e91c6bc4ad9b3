/* memwatch_note.h -- the memory watcher's latest sample (diag/memwatch.c
 * notes it as it starts, samples and stops), for the layers below the
 * watcher: the micro-batch trace line shows it. */
#ifndef TS_CORE_MEMWATCH_NOTE_H
#define TS_CORE_MEMWATCH_NOTE_H

#include "core/core.h"

/* The watcher's state now (its latest sample, running or not). */
void ts_memwatch_note(const ts_memwatch_stats *s);
/* The watcher's latest sample into *out while it runs (true); false, and
 * no error set, when it does not. */
bool ts_memwatch_running_sample(ts_memwatch_stats *out);

#endif
