/* registry.c -- from the device a user names ("cpu", "cuda", "cuda:1") to
 * its backend table, and what each device is (registry.h). */
#include "backend/registry/registry.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

const ts_backend *ts_backend_host(void) { return ts_backend_cpu(); }

ts_status ts_device_check(const char *device) {
    const ts_backend *b;
    if (!device) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_device_check: device is NULL: write cpu, cuda or cuda:N");
    return ts_backend_for(device, &b);
}

ts_status ts_device_describe(const char *device, char *buf, size_t n) {
    if (!device || !buf || !n)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_device_describe: NULL argument: give a device (cpu, cuda or cuda:N) and a buffer");
    buf[0] = '\0';
    ts_device_kind kind;
    int ordinal;
    ts_status st = ts_device_name_parse(device, &kind, &ordinal);
    if (st) return st;
    if (kind == TS_DEVICE_CUDA) return ts_backend_cuda_describe(ordinal, buf, n);
    long threads = sysconf(_SC_NPROCESSORS_ONLN), pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    snprintf(buf, n, "%s: %ld threads, %.1f GiB memory%s", kind == TS_DEVICE_CPU ? "cpu" : "cpu-staged", threads,
             (double)pages * (double)page / (1024.0 * 1024.0 * 1024.0),
             kind == TS_DEVICE_CPU ? "" : " (the CPU run the way a GPU is, for tests)");
    return TS_OK;
}

ts_status ts_gpus_describe(char *buf, size_t n, int *count) {
    if (count) *count = 0;
    if (!buf || !n) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_gpus_describe: NULL buffer: give one of 4096 bytes");
    buf[0] = '\0';
    int gpus = 0;
    char line[1024];
    if (ts_backend_cuda_count(&gpus)) /* why none: "cuda:0: no usable GPU here (...)", or the build's refusal */
        snprintf(buf, n, "%s%s\n", ts_has_feature("cuda") ? "" : "cuda: ", ts_last_error());
    for (int i = 0; i < gpus; i++) {
        if (ts_backend_cuda_describe(i, line, sizeof line)) snprintf(line, sizeof line, "%s", ts_last_error());
        size_t used = strlen(buf);
        snprintf(buf + used, n - used, "%s\n", line);
    }
    if (count) *count = gpus;
    return TS_OK;
}
