/* trace.h -- the timeline recorder behind ts_options_set_trace
 * (docs/trace.md): slices and counters every layer records in memory while
 * the traced steps run (a sink, nothing read back), written at the end as
 * one Chrome/Perfetto trace by diag/trace.c (ts_trace_finish).
 *
 * One trace at a time in a process, owned by the model that started it.
 * Its events go into one array allocated when tracing starts; recording an
 * event claims a slot with an atomic add and copies a few words into it: no
 * lock, no allocation, no formatting. Any thread may record; each gets its
 * own track, named by ts_trace_name_thread. When the array is full, later
 * events are counted as dropped (logged and written into the file). While
 * nothing is traced, a call site costs one predictable branch:
 *
 *     if (ts_trace_live()) ts_trace_slice(...);
 */
#ifndef TS_CORE_TRACE_H
#define TS_CORE_TRACE_H

#include "core/core.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

extern atomic_bool ts_trace_on_;

/* Whether a trace is recording now (a relaxed load): between its owner's
 * ts_trace_resume and ts_trace_pause (its steps). */
static inline bool ts_trace_live(void) { return atomic_load_explicit(&ts_trace_on_, memory_order_relaxed); }

/* Starts recording for `owner` into at most `capacity` events; the file
 * goes to `path` (rank >= 1 of an MPI job: `<stem>.rank<r>.json`, rank -1
 * outside a job). TS_ERR_STATE while another owner traces. */
ts_status ts_trace_start(const void *owner, const char *path, int64_t capacity, int rank);
/* Whether `owner` holds the trace now. */
bool ts_trace_owned_by(const void *owner);
/* Records every thread's events (resume) or none but those given to
 * ts_trace_slice directly by the owner (pause); started paused. */
void ts_trace_resume(const void *owner);
void ts_trace_pause(const void *owner);

/* Names the calling thread's track ("cpu worker", 3 -> "cpu worker 3";
 * index < 0: no number). `role` must outlive the thread (a literal);
 * `detail` (may be NULL) is copied when the thread first records. */
void ts_trace_name_thread(const char *role, int index, const char *detail);

/* Event kinds, the "cat" of the file's slices. */
typedef enum ts_trace_cat {
    TS_TRACE_STEP = 0, /* "step N": number = N */
    TS_TRACE_FORWARD,  /* a micro-batch's forward, or one op's (op set); number = micro-batch */
    TS_TRACE_BACKWARD, /* the same for the backward */
    TS_TRACE_OPTIMIZER,
    TS_TRACE_ACCUMULATE,
    TS_TRACE_OBSERVE,  /* the observers of one tensor (label) */
    TS_TRACE_WORKER,   /* a worker's slice of the op in label */
    TS_TRACE_SINK,     /* an outfeed consumer delivering one record (label: its key) */
    TS_TRACE_RECOMPILE,/* label: the cause */
    TS_TRACE_COMM,     /* all-reduces, pipeline sends and receives (label says which) */
    TS_TRACE_KERNEL,   /* a device's kernel of the op in label (the optimizer's step: no label), on the device's track */
    TS_TRACE_CAT_COUNT
} ts_trace_cat;

/* One slice [t0_ns, t1_ns) of ts_now_ns on the calling thread's track,
 * recorded while the trace is open, paused or not (call sites test
 * ts_trace_live, or ts_trace_owned_by outside the steps).
 * `label` is copied (truncated to 95 bytes); `op`, when not NULL, must be a
 * literal or outlive the trace (an op table name); `shape` may be NULL. */
void ts_trace_slice(ts_trace_cat cat, const char *op, const char *label, const ts_shape *shape, double flops, int64_t number,
                    uint64_t t0_ns, uint64_t t1_ns);
/* The passes of a kernel's slice (ts_trace_kernel). */
typedef enum ts_trace_pass { TS_PASS_FORWARD = 1, TS_PASS_BACKWARD, TS_PASS_OPTIMIZER } ts_trace_pass;

/* A device's kernel [t0_ns, t1_ns) on a track of its own named `track`
 * (copied, up to 95 bytes; the same name from one thread: the same track),
 * not the calling thread's: its times are the device's, placed on
 * ts_now_ns's clock by the caller. `number`: the micro-batch (the
 * optimizer's step: the step); the rest as ts_trace_slice's. */
void ts_trace_kernel(const char *track, ts_trace_pass pass, const char *op, const char *label, const ts_shape *shape, double flops,
                     int64_t number, uint64_t t0_ns, uint64_t t1_ns);
/* A counter track's value at t_ns; thread-safe. `track` is copied (up to
 * 95 bytes). */
void ts_trace_counter(const char *track, uint64_t t_ns, double value);

/* The op whose kernel runs now, for the workers' slices (set by the
 * timeline's observer on the op chain while tracing). */
void ts_trace_set_op(const char *label);
const char *ts_trace_op(void);

/* ---- what the writer of a finished trace reads (ts_trace_end) */

#define TS_TRACE_LABEL_MAX 96
#define TS_TRACE_TRACKS 256
#define TS_TRACE_TRACK_NAME_MAX 96

typedef struct ts_trace_event {
    uint8_t cat;
    bool counter;
    uint8_t pass;   /* a kernel's ts_trace_pass (0: not a kernel) */
    int tid;        /* its track */
    int ndim;       /* -1: no shape */
    uint64_t t0, dur;
    const char *op; /* an op table name, or NULL */
    double value;   /* FLOPs, or the counter's value */
    int64_t number; /* step or micro-batch */
    int64_t d[TS_MAX_DIMS];
    char label[TS_TRACE_LABEL_MAX]; /* a counter's: its track */
} ts_trace_event;

typedef struct ts_trace_record {
    const char *path;   /* the file (a rank's own name in a job) */
    int rank;           /* -1 outside a job */
    uint64_t t_base;    /* ts_now_ns at the start: the file's 0 */
    const ts_trace_event *ev;
    int64_t kept;       /* events recorded */
    int64_t dropped;    /* events that did not fit */
    int tracks;
    const char *const *track_name; /* [tracks]: each track's name, NULL when never named */
} ts_trace_record;

/* Stops recording, waits for the threads still writing an event, hands
 * what was recorded to write(r) and frees it: write's status. Nothing when
 * `owner` does not hold the trace. */
ts_status ts_trace_end(const void *owner, ts_status (*write)(const ts_trace_record *r));

#endif
