/* check.h -- the tiny harness every test program shares.
 *
 *     CHECK(cond, "fmt", ...)      prints "ok   <msg>" or "FAIL <msg> (file:line)"
 *     CHECK_OK(expr, "fmt", ...)   expr is a ts_status; on failure prints its
 *                                  name and ts_last_error()
 *     CHECK_RESULT(failed, ...)    counts a check whose line was printed by a
 *                                  helper (ts_expect_close returns 0/1)
 *     return check_summary("test_name");   prints the totals, 0 iff none failed
 *
 * Header-only: the counters are per program (one test = one .c file). */
#ifndef TS_TEST_CHECK_H
#define TS_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorscope.h"
#include "backend/backend.h"

typedef struct check_counts {
    int checks, failures;
} check_counts;

static inline check_counts *check_counts_(void)
{
    static check_counts c;
    return &c;
}

/* Records one check; returns `ok` so callers can branch on it. */
static inline int check_record_(int ok)
{
    check_counts *c = check_counts_();
    c->checks++;
    if (!ok)
        c->failures++;
    return ok;
}

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        int check_ok_ = check_record_((cond) ? 1 : 0);                     \
        printf("%s ", check_ok_ ? "ok  " : "FAIL");                        \
        printf(__VA_ARGS__);                                               \
        if (!check_ok_)                                                    \
            printf(" (%s:%d)", __FILE__, __LINE__);                        \
        printf("\n");                                                      \
        fflush(stdout);                                                    \
    } while (0)

#define CHECK_OK(expr, ...)                                                \
    do {                                                                   \
        ts_status check_st_ = (expr);                                      \
        int check_ok_ = check_record_(check_st_ == TS_OK);                 \
        printf("%s ", check_ok_ ? "ok  " : "FAIL");                        \
        printf(__VA_ARGS__);                                               \
        if (!check_ok_)                                                    \
            printf(": %s: %s (%s:%d)", ts_status_name(check_st_),          \
                   ts_last_error(), __FILE__, __LINE__);                   \
        printf("\n");                                                      \
        fflush(stdout);                                                    \
    } while (0)

/* `failed` is a helper's 0 (match) / non-zero (mismatch) result. */
#define CHECK_RESULT(failed) ((void)check_record_((failed) == 0))

static inline int check_failures(void)
{
    return check_counts_()->failures;
}

static inline int check_summary(const char *test_name)
{
    /* the models on cpu-staged (TS_DEVICE: the NAME_staged tests) passed
     * their stream to every call through its table (backend.h's contract;
     * test_stream_contract goes through every path) */
    const char *device = getenv("TS_DEVICE");
    if (device && !strcmp(device, "cpu-staged")) {
        char seen[512];
        int n = ts_cpu_staged_stream_misuse(seen, sizeof seen);
        CHECK(n == 0, "every call on cpu-staged passed its model's stream (%d did not: %s)", n, seen);
    }
    const check_counts *c = check_counts_();
    printf("%s: %d checks, %d failed: %s\n", test_name, c->checks, c->failures,
           c->failures ? "FAIL" : "PASS");
    return c->failures ? 1 : 0;
}

#endif
