/* crash.h -- internal side of the crash handler (docs/observation.md#diagnostics). */
#ifndef TS_DIAG_CRASH_H
#define TS_DIAG_CRASH_H

/* Tells the crash handler which op is executing, so a fatal signal report
 * names it: `while executing MatMul -> fc1/MatMul:0 (model.c:12)`. Only
 * stores the three pointers (cheap enough to call per op); the strings must
 * stay valid until the next call. Pass NULLs when no op runs. Process-wide,
 * not per-thread: a crash in a BLAS worker still names the executor's op. */
void ts_crash_set_current_op(const char *op_name, const char *tensor_name, const char *where);

/* Writes "  #N 0xIP function+0xoff" lines for a stack to fd: with the
 * ucontext an SA_SIGINFO handler got, the interrupted stack from the
 * interrupted frame on; with NULL, the caller's own stack. Async-signal-safe
 * (write(2) and libunwind in local mode). */
void ts_crash_write_backtrace(int fd, void *ucontext);

#endif
