/* limits.c -- what reading one untrusted file, or compiling one model, may
 * cost (ts_set_limit): process-wide values, set by the API or read once
 * from the environment. */
#include "core.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

static const struct {
    const char *env, *api;
    uint64_t fallback; /* 0: the machine's physical memory */
    const char *raise; /* when raising it is right */
} limit_info[] = {
    [TS_LIMIT_IMPORT_BYTES] = {"TS_MAX_IMPORT_BYTES", "TS_LIMIT_IMPORT_BYTES", (uint64_t)1 << 30, "if the file is trusted"},
    [TS_LIMIT_ARCHIVE_BYTES] = {"TS_MAX_ARCHIVE_BYTES", "TS_LIMIT_ARCHIVE_BYTES", (uint64_t)2 << 30, "if the file is trusted"},
    [TS_LIMIT_COMPILE_BYTES] = {"TS_MAX_COMPILE_BYTES", "TS_LIMIT_COMPILE_BYTES", 0, "if the model is meant to be this large"},
};

static uint64_t physical_memory(void) {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : (uint64_t)16 << 30;
}
/* 0 = not decided yet (the environment is read at first use) */
static _Atomic uint64_t limit_value[TS_ARRAY_LEN(limit_info)];

static bool parse_size(const char *text, uint64_t *bytes) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || errno || !(v >= 0)) return false;
    double mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1024.0, end++; break;
    case 'm': case 'M': mult = 1048576.0, end++; break;
    case 'g': case 'G': mult = 1073741824.0, end++; break;
    case 't': case 'T': mult = 1099511627776.0, end++; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b') end++;
    if (*end || v * mult > 9e18) return false;
    *bytes = (uint64_t)(v * mult);
    return true;
}

ts_status ts_parse_size(const char *text, uint64_t *bytes) {
    if (!text || !bytes) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_parse_size: NULL argument");
    if (!parse_size(text, bytes))
        return ts_error(TS_ERR_INVALID_ARGUMENT, "'%s' is not a size (a number with an optional K, M, G or T suffix)", text);
    return TS_OK;
}

static bool limit_known(ts_limit which) {
    return (unsigned)which < TS_ARRAY_LEN(limit_info);
}

ts_status ts_set_limit(ts_limit which, uint64_t bytes) {
    if (!limit_known(which)) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_set_limit: unknown limit %d", (int)which);
    if (bytes == 0) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_set_limit: a limit of 0 bytes would refuse every file");
    atomic_store(&limit_value[which], bytes);
    return TS_OK;
}

uint64_t ts_get_limit(ts_limit which) {
    if (!limit_known(which)) return 0;
    uint64_t v = atomic_load(&limit_value[which]);
    if (v) return v;
    v = limit_info[which].fallback ? limit_info[which].fallback : physical_memory();
    const char *e = getenv(limit_info[which].env);
    uint64_t parsed = 0;
    if (e && *e) {
        if (parse_size(e, &parsed) && parsed > 0)
            v = parsed;
        else
            ts_logf(TS_LOG_WARN, "%s='%s' is not a size above 0 (say 512M or 4G); the default is used", limit_info[which].env, e);
    }
    uint64_t expected = 0; /* a concurrent ts_set_limit wins */
    atomic_compare_exchange_strong(&limit_value[which], &expected, v);
    return atomic_load(&limit_value[which]);
}

ts_status ts_limit_exceeded(ts_limit which, const char *what, uint64_t need) {
    if (!limit_known(which)) return ts_error(TS_ERR_INTERNAL, "unknown limit %d", (int)which);
    return ts_error(TS_ERR_FORMAT,
                    "%s would need %llu bytes, over the limit of %llu bytes; %s, raise it "
                    "with %s=SIZE (e.g. 8G) or ts_set_limit(%s, bytes)",
                    what, (unsigned long long)need, (unsigned long long)ts_get_limit(which), limit_info[which].raise,
                    limit_info[which].env, limit_info[which].api);
}
