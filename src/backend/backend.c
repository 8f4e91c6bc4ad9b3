/* backend.c -- from the device a user names ("cpu", "cuda", "cuda:1") to
 * its backend table. */
#include "backend/backend.h"

#include <stdlib.h>
#include <string.h>

ts_status ts_backend_for(const char *device, const ts_backend **out) {
    *out = NULL;
    if (!device || !strcmp(device, "cpu")) {
        *out = ts_backend_cpu();
        return TS_OK;
    }
    if (!strcmp(device, "cpu-staged")) { /* the device path on the CPU, for tests */
        *out = ts_backend_cpu_staged();
        return TS_OK;
    }
    if (!strncmp(device, "cuda", 4) && (device[4] == 0 || device[4] == ':')) {
        long ordinal = 0;
        if (device[4] == ':') {
            char *end = NULL;
            ordinal = strtol(device + 5, &end, 10);
            if (end == device + 5 || *end || ordinal < 0 || ordinal > 1023)
                return ts_error(TS_ERR_INVALID_ARGUMENT, "device '%s': write cuda:N with N a GPU's number (0 for the first)", device);
        }
        return ts_backend_cuda((int)ordinal, out);
    }
    return ts_error(TS_ERR_INVALID_ARGUMENT, "device '%s' is not one tensorscope knows: the choices are cpu, cuda and cuda:N", device);
}

ts_status ts_device_check(const char *device) {
    const ts_backend *b;
    if (!device) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_device_check: device is NULL: write cpu, cuda or cuda:N");
    return ts_backend_for(device, &b);
}
