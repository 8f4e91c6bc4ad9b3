/* unwind.c -- the crash handler's stack walker with libunwind in local
 * mode (crash.h); unwind_none.c stands in without libunwind. */
#define UNW_LOCAL_ONLY
#include "diag/crash.h"

#include <libunwind.h>

int ts_crash_collect_frames(void *ucontext, uintptr_t *ips, int max) {
    unw_context_t ctx;
    unw_cursor_t cur;
    /* From a handler, start at the interrupted frame itself: the kernel's
     * ucontext is libunwind's context type on Linux. */
    int ok = ucontext && unw_init_local2(&cur, (unw_context_t *)ucontext, UNW_INIT_SIGNAL_FRAME) == 0;
    if (!ok) ok = unw_getcontext(&ctx) == 0 && unw_init_local(&cur, &ctx) == 0;
    if (!ok) return -1;
    int n = 0;
    while (n < max) {
        unw_word_t ip = 0;
        if (unw_get_reg(&cur, UNW_REG_IP, &ip) < 0 || ip == 0) break;
        ips[n++] = (uintptr_t)ip;
        if (unw_step(&cur) <= 0) break;
    }
    return n;
}

void ts_crash_unwind_prepare(void) {
    unw_context_t ctx;
    unw_cursor_t cur;
    if (unw_getcontext(&ctx) == 0) (void)unw_init_local(&cur, &ctx);
}
