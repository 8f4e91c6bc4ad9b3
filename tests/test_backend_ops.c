/* test_backend_ops.c -- every op's forward and backward on a device
 * against the CPU backend (tests/support/op_check.h), the same random
 * inputs through both kernel tables, every optimizer's step and the stats
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
    ts_op_cases_core(&c);
    ts_op_cases_broadcast(&c);
    ts_op_cases_tensor(&c);
    ts_op_cases_cnn(&c);
    ts_opt_cases(&c);
    ts_stats_cases(&c);
    /* every op that computes has a case */
    const ts_backend *cpu = ts_backend_cpu();
    for (int op = 0; op < TS_OP_COUNT; op++)
        if (cpu->kernels[op].forward) CHECK(c.ops_seen[op], "op %s has a case", ts_op_get((ts_op)op)->name);
    CHECK(c.failures == 0, "%d cases on %s: %d comparisons failed", c.checked, dev->name, c.failures);
    if (dev->stream_destroy) dev->stream_destroy(c.stream);
    return check_summary("test_backend_ops");
}
