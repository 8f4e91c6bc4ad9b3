/* memory.c -- process memory from /proc (docs/observation.md#diagnostics). */
#include "core/core.h"

#include <stdio.h>
#include <string.h>

/* Sums the "<key> N kB" lines of a /proc file; -1 if no key line is found. */
static int read_kb_fields(const char *path, const char *const *keys, size_t nkeys,
                          int64_t *out_kb) {
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    for (size_t i = 0; i < nkeys; i++)
        out_kb[i] = -1;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        for (size_t i = 0; i < nkeys; i++) {
            size_t k = strlen(keys[i]);
            long long v;
            if (strncmp(line, keys[i], k) == 0 && line[k] == ':' &&
                sscanf(line + k + 1, "%lld", &v) == 1)
                out_kb[i] = v;
        }
    }
    fclose(f);
    return 0;
}

ts_status ts_memory_get(ts_memory_usage *out) {
    if (!out)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_memory_get: out is NULL");
    static const char *const rollup[] = {"Rss", "Pss", "Private_Clean", "Private_Dirty"};
    int64_t kb[4];
    if (read_kb_fields("/proc/self/smaps_rollup", rollup, 4, kb) == 0 && kb[0] >= 0) {
        out->rss = kb[0] * 1024;
        out->pss = kb[1] >= 0 ? kb[1] * 1024 : -1;
        out->uss = kb[2] >= 0 && kb[3] >= 0 ? (kb[2] + kb[3]) * 1024 : -1;
        return TS_OK;
    }
    /* Kernels before 4.14 have no smaps_rollup: RSS only, the rest unknown. */
    static const char *const status[] = {"VmRSS"};
    if (read_kb_fields("/proc/self/status", status, 1, kb) == 0 && kb[0] >= 0) {
        out->rss = kb[0] * 1024;
        out->pss = out->uss = -1;
        return TS_OK;
    }
    return ts_error(TS_ERR_IO,
                    "ts_memory_get: cannot read /proc/self/smaps_rollup or /proc/self/status "
                    "(is /proc mounted?)");
}
