/* trace.h -- the timeline's file (docs/trace.md): what the recorder
 * (core/trace.h) kept, written as one Chrome/Perfetto trace (Trace Event
 * Format JSON: "X" slices, "C" counters, "M" thread names). */
#ifndef TS_DIAG_TRACE_H
#define TS_DIAG_TRACE_H

#include "core/trace.h"

/* Stops recording, waits for the threads still writing an event, writes the
 * file atomically (core/atomic_file.c) and frees the events. Nothing when
 * `owner` does not hold the trace. */
ts_status ts_trace_finish(const void *owner);

#endif
