/* test_op_chain.c -- the observer chain's lists (core/op_chain.h): hooks
 * nest like brackets (before-hooks in the order added, after-hooks in its
 * reverse), a failing hook stops its list with its status, a full list is
 * an error, and an empty list calls nothing. */
#include "core/op_chain.h"
#include "tensorscope.h"

#include <stdio.h>
#include <string.h>

static int failures;

static void check(int ok, const char *what) {
    printf("%s: %s\n", ok ? "ok" : "FAIL", what);
    if (!ok) failures++;
}

static char trail[64];

/* each hook appends its observer's letter (upper case before, lower after) */
static ts_status before(void *ctx, struct ts_run *run, ts_op_call *c) {
    (void)run;
    size_t n = strlen(trail);
    trail[n] = *(const char *)ctx, trail[n + 1] = 0;
    c->t0++;
    return TS_OK;
}

static ts_status after(void *ctx, struct ts_run *run, ts_op_call *c) {
    (void)run;
    size_t n = strlen(trail);
    trail[n] = (char)(*(const char *)ctx - 'A' + 'a'), trail[n + 1] = 0;
    c->t1++;
    return *(const char *)ctx == 'F' ? TS_ERR_NUMERICS : TS_OK;
}

static void run(const ts_op_chain *c, ts_op_call *call, ts_status *sb, ts_status *sa) {
    trail[0] = 0;
    *sb = ts_op_chain_run(c->before, c->n_before, NULL, call);
    *sa = ts_op_chain_run(c->after, c->n_after, NULL, call);
}

int main(void) {
    static const char A = 'A', B = 'B', C = 'C', F = 'F';
    ts_op_chain c = {0};
    ts_op_call call = {3, false, 0, NULL, 0, 0, false};
    ts_status sb, sa;

    run(&c, &call, &sb, &sa);
    check(!sb && !sa && trail[0] == 0 && call.t0 == 0 && call.t1 == 0, "an empty chain calls nothing");

    check(ts_op_chain_add(&c, before, after, (void *)&A) == TS_OK, "add A (both hooks)");
    check(ts_op_chain_add(&c, NULL, after, (void *)&B) == TS_OK, "add B (after only)");
    check(ts_op_chain_add(&c, before, after, (void *)&C) == TS_OK, "add C (both hooks)");
    check(c.n_before == 2 && c.n_after == 3, "the lists hold the hooks given (2 before, 3 after)");
    run(&c, &call, &sb, &sa);
    printf("trail %s\n", trail);
    check(!sb && !sa && strcmp(trail, "ACcba") == 0, "before-hooks outermost first, after-hooks innermost first");
    check(call.t0 == 2 && call.t1 == 3, "every hook saw the same call");

    ts_op_chain f = {0};
    ts_op_chain_add(&f, NULL, after, (void *)&A);
    ts_op_chain_add(&f, NULL, after, (void *)&F); /* inner: runs first, fails */
    run(&f, &call, &sb, &sa);
    check(sa == TS_ERR_NUMERICS && strcmp(trail, "f") == 0, "a failing hook stops its list with its status");

    ts_op_chain full = {0};
    ts_status st = TS_OK;
    for (int i = 0; i < TS_OP_HOOKS && !st; i++) st = ts_op_chain_add(&full, before, NULL, (void *)&A);
    check(!st && full.n_before == TS_OP_HOOKS, "a list holds TS_OP_HOOKS hooks");
    st = ts_op_chain_add(&full, before, NULL, (void *)&A);
    check(st == TS_ERR_INTERNAL && strstr(ts_last_error(), "TS_OP_HOOKS") && full.n_before == TS_OP_HOOKS,
          "one more is an error that says what to raise, and the list is unchanged");
    check(ts_op_chain_add(&full, NULL, after, (void *)&A) == TS_OK && full.n_after == 1, "its other list still takes hooks");

    printf("%s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
