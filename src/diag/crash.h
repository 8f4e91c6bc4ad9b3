/* crash.h -- internal side of the crash handler (docs/observation.md#diagnostics).
 * The op it names is noted in core (core/crash_note.h). */
#ifndef TS_DIAG_CRASH_H
#define TS_DIAG_CRASH_H

#include <stdint.h>

/* Writes "  #N 0xIP function+0xoff" lines for a stack to fd: with the
 * ucontext an SA_SIGINFO handler got, the interrupted stack from the
 * interrupted frame on; with NULL, the caller's own stack. Async-signal-safe
 * (write(2) and ts_crash_collect_frames). */
void ts_crash_write_backtrace(int fd, void *ucontext);

/* The stack walker, one of two sources picked at configure: unwind.c
 * (libunwind in local mode) or unwind_none.c (glibc's backtrace(), for a
 * build without libunwind). Up to max return addresses into ips, from the
 * interrupted frame of ucontext (an SA_SIGINFO handler's third argument)
 * or, with NULL, from the caller's frame; -1 when no stack can be walked.
 * Async-signal-safe once ts_crash_unwind_prepare has run. */
int ts_crash_collect_frames(void *ucontext, uintptr_t *ips, int max);
/* Resolves the walker's lazy state (libunwind's caches, the loading of
 * libgcc_s behind backtrace()) outside any handler: at install. */
void ts_crash_unwind_prepare(void);

#endif
