/* test_backend_ops.c -- every op's forward and backward on a device
 * against the CPU backend (tests/support/op_check.h): every row of the op
 * table built from its sample at a sweep of sizes (tests/support/op_gen.c),
 * then the hand-written edge cases, the same random
 * inputs through both kernel tables, the CPU's gradients against finite
 * differences of its forward, every optimizer's step and the stats
 * summaries (tests/support/stats_cases.c). The device is TS_TEST_DEVICE
 * ("cuda" unless set; "cpu" checks the cases and the harness themselves).
 * No such device here: exits 77 (ctest's skip) saying why.
 */
/* labels: gpu */
#include "check.h"
#include "graph/ops.h"
#include "op_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* test_backend_ops --probe: exits 0 when the device is here, else 77
 * saying why (tests/on_device.sh asks before running a test there). */
int main(int argc, char **argv) {
    const char *device = getenv("TS_TEST_DEVICE");
    if (!device || !*device) device = "cuda";
    const ts_backend *dev;
    if (ts_backend_for(device, &dev) != TS_OK) {
        printf("skipped: no %s device: %s\n", device, ts_last_error());
        return 77;
    }
    if (argc > 1 && !strcmp(argv[1], "--probe")) return 0;
    ts_op_checker c = {.dev = dev};
    if (dev->stream_create && dev->stream_create(&c.stream)) {
        printf("FAIL %s: no stream: %s\n", device, ts_last_error());
        return 1;
    }
    ts_op_cases_generated(&c);
    ts_op_cases_core(&c);
    ts_op_cases_broadcast(&c);
    ts_op_cases_tensor(&c);
    ts_op_cases_cnn(&c);
    ts_opt_cases(&c);
    ts_stats_cases(&c);
    /* every op of the table that computes has a generated case (its row's
     * sample: a new op fails here, named, until its row says how to build
     * one) and every one with a gradient a case checked against finite
     * differences (or one saying why not) */
    const ts_backend *cpu = ts_backend_cpu();
    char no_case[2048] = "", no_fd[2048] = "";
    for (int op = 0; op < TS_OP_COUNT; op++) {
        const ts_op_def *def = ts_op_get((ts_op)op);
        if (!cpu->kernels[op].forward) continue;
        if (!c.ops_generated[op])
            snprintf(no_case + strlen(no_case), sizeof no_case - strlen(no_case), " %s", def->name);
        else if (def->has_backward && cpu->kernels[op].backward && !c.ops_fd[op] && !c.ops_no_fd[op])
            snprintf(no_fd + strlen(no_fd), sizeof no_fd - strlen(no_fd), " %s", def->name);
    }
    CHECK(!*no_case, "every op of the op table has a generated case%s%s", *no_case ? "; fill the row's .sample (src/graph/ops.c) of:" : "", no_case);
    CHECK(!*no_fd, "every op with a gradient has a case against finite differences%s%s", *no_fd ? "; none for:" : "", no_fd);
    CHECK(c.failures == 0, "%d cases on %s: %d comparisons failed", c.checked, dev->name, c.failures);
    if (dev->stream_destroy) dev->stream_destroy(c.stream);
    return check_summary("test_backend_ops");
}
