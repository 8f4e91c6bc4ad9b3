/* test_memory.c -- ts_memory_get: sane values that follow touched memory. */
#include "tensorscope.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static int failures;

static void check(int ok, const char *what) {
    printf("%s: %s\n", ok ? "ok" : "FAIL", what);
    if (!ok)
        failures++;
}

int main(void) {
    ts_memory_usage before, after;
    check(ts_memory_get(&before) == TS_OK, "ts_memory_get succeeds");
    printf("rss %lld pss %lld uss %lld\n", (long long)before.rss, (long long)before.pss,
           (long long)before.uss);
    check(before.rss > 0, "rss > 0");
    check(before.pss == -1 || (before.pss > 0 && before.pss <= before.rss), "0 < pss <= rss");
    check(before.uss == -1 || (before.uss > 0 && before.uss <= before.rss), "0 < uss <= rss");

    /* mmap rather than malloc so no allocator (or sanitizer) pool is reused. */
    size_t n = (size_t)64 << 20;
    char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    check(p != MAP_FAILED, "map 64 MiB");
    if (p == MAP_FAILED)
        return 1;
    memset(p, 1, n);
    check(ts_memory_get(&after) == TS_OK, "ts_memory_get after touching 64 MiB");
    printf("rss %lld pss %lld uss %lld\n", (long long)after.rss, (long long)after.pss,
           (long long)after.uss);
    long long grow = (long long)(after.rss - before.rss), want = (long long)(60 << 20);
    check(grow >= want, "rss grew by at least 60 MiB");
    check(after.uss == -1 || after.uss - before.uss >= want, "uss grew by at least 60 MiB");
    munmap(p, n);

    check(ts_memory_get(NULL) == TS_ERR_INVALID_ARGUMENT && *ts_last_error(),
          "NULL out is TS_ERR_INVALID_ARGUMENT with a message");
    printf("%s\n", failures ? "test_memory: FAILED" : "test_memory: all passed");
    return failures != 0;
}
