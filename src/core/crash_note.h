/* crash_note.h -- the op executing now, which a crash report names
 * (diag/crash.c): noted around each kernel call, read by the fatal-signal
 * handler. A sink every layer may write; nothing else reads it. */
#ifndef TS_CORE_CRASH_NOTE_H
#define TS_CORE_CRASH_NOTE_H

/* Tells the crash handler which op is executing, so a fatal signal report
 * names it: `while executing MatMul -> fc1/MatMul:0 (model.c:12)`. Only
 * stores the three pointers (cheap enough to call per op); the strings must
 * stay valid until the next call. Pass NULLs when no op runs. Process-wide,
 * not per-thread: a crash in a BLAS worker still names the executor's op. */
void ts_crash_set_current_op(const char *op_name, const char *tensor_name, const char *where);
/* The three pointers as last set (async-signal-safe: three loads). */
void ts_crash_current_op(const char **op_name, const char **tensor_name, const char **where);

#endif
