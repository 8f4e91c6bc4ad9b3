/* unwind_none.c -- the crash handler's stack walker in a build without
 * libunwind (crash.h): glibc's backtrace(), which steps through the signal
 * frame with libgcc's unwinder, cut to start at the interrupted
 * instruction. Without <execinfo.h> (not glibc) only that instruction's
 * address is known. The report is otherwise the same: names from the
 * symbol tables, file:line from addr2line. */
#define _GNU_SOURCE /* REG_RIP */
#include "diag/crash.h"

#include <signal.h>
#include <stddef.h>
#include <ucontext.h>
#if defined(__has_include)
#if __has_include(<execinfo.h>)
#include <execinfo.h>
#define TS_HAVE_EXECINFO 1
#endif
#endif

enum { HANDLER_FRAMES = 16 }; /* room for the handler's own frames above the interrupted one */

static uintptr_t interrupted_pc(void *ucontext) {
    if (!ucontext) return 0;
    const ucontext_t *uc = ucontext;
#if defined(__x86_64__)
    return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    return (uintptr_t)uc->uc_mcontext.pc;
#else
    (void)uc;
    return 0;
#endif
}

int ts_crash_collect_frames(void *ucontext, uintptr_t *ips, int max) {
    uintptr_t pc = interrupted_pc(ucontext);
    if (max <= 0) return 0;
#ifdef TS_HAVE_EXECINFO
    void *raw[64 + HANDLER_FRAMES];
    int cap = max + HANDLER_FRAMES < (int)(sizeof raw / sizeof raw[0]) ? max + HANDLER_FRAMES : (int)(sizeof raw / sizeof raw[0]);
    int n = backtrace(raw, cap), first = 1, k = 0; /* raw[0] is this function */
    if (pc) {
        int at = -1;
        for (int i = 0; i < n && at < 0; i++)
            if ((uintptr_t)raw[i] == pc) at = i;
        if (at >= 0) first = at;
        else ips[k++] = pc; /* the signal frame was not crossed: the pc, then all that was seen */
    }
    for (int i = first; i < n && k < max; i++) ips[k++] = (uintptr_t)raw[i];
    return k;
#else
    if (!pc) return -1;
    ips[0] = pc;
    return 1;
#endif
}

void ts_crash_unwind_prepare(void) {
#ifdef TS_HAVE_EXECINFO
    void *one[1];
    (void)backtrace(one, 1); /* loads libgcc_s now, not first inside a handler */
#endif
}
