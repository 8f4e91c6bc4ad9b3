/* backend.c -- from the device a user names ("cpu", "cuda", "cuda:1") to
 * its backend table. */
#include "backend/backend.h"

ts_status ts_backend_for(const char *device, const ts_backend **out) {
    *out = NULL;
    ts_device_kind kind;
    int ordinal;
    ts_status st = ts_device_name_parse(device ? device : "cpu", &kind, &ordinal);
    if (st) return st;
    switch (kind) {
    case TS_DEVICE_CPU: *out = ts_backend_cpu(); return TS_OK;
    case TS_DEVICE_CPU_STAGED: *out = ts_backend_cpu_staged(); return TS_OK; /* the device path on the CPU, for tests */
    default: return ts_backend_cuda(ordinal, out);
    }
}

ts_status ts_device_check(const char *device) {
    const ts_backend *b;
    if (!device) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_device_check: device is NULL: write cpu, cuda or cuda:N");
    return ts_backend_for(device, &b);
}
