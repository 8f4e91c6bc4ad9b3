/* error.c -- status names and the per-thread last-error message. */
#include "core.h"

#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[8192]; /* a numeric check and its op-by-op replay fit whole */

const char *ts_version(void) { return TS_VERSION_STRING; }

const char *ts_status_name(ts_status s) {
    switch (s) {
    case TS_OK: return "TS_OK";
    case TS_ERR_INVALID_ARGUMENT: return "TS_ERR_INVALID_ARGUMENT";
    case TS_ERR_OUT_OF_MEMORY: return "TS_ERR_OUT_OF_MEMORY";
    case TS_ERR_IO: return "TS_ERR_IO";
    case TS_ERR_FORMAT: return "TS_ERR_FORMAT";
    case TS_ERR_SHAPE: return "TS_ERR_SHAPE";
    case TS_ERR_NOT_FOUND: return "TS_ERR_NOT_FOUND";
    case TS_ERR_STATE: return "TS_ERR_STATE";
    case TS_ERR_NUMERICS: return "TS_ERR_NUMERICS";
    case TS_ERR_UNSUPPORTED: return "TS_ERR_UNSUPPORTED";
    case TS_ERR_INTERNAL: return "TS_ERR_INTERNAL";
    case TS_ERR_DIST: return "TS_ERR_DIST";
    case TS_ERR_CANCELLED: return "TS_ERR_CANCELLED";
    case TS_ERR_SPIKE: return "TS_ERR_SPIKE";
    }
    return "TS_ERR_UNKNOWN";
}

const char *ts_last_error(void) { return last_error; }
void ts_clear_error(void) { last_error[0] = '\0'; }

ts_status ts_set_error(ts_status code, const char *message) { return ts_error(code, "%s", message ? message : ""); }

/* Every message is escaped (ts_escape_text) as it is stored: the names it
 * quotes may come from a model file. */
ts_status ts_error(ts_status code, const char *fmt, ...) {
    char raw[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    ts_escape_text(last_error, sizeof last_error, raw);
    return code;
}

ts_status ts_error_wrap(ts_status code, const char *fmt, ...) {
    char raw[512], prefix[4 * sizeof raw], old[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    ts_escape_text(prefix, sizeof prefix, raw);
    memcpy(old, last_error, sizeof old); /* escaped when it was stored */
    size_t n = strlen(prefix);
    memcpy(last_error, prefix, n);
    last_error[n] = ':';
    last_error[n + 1] = ' ';
    size_t room = sizeof last_error - n - 3, m = strlen(old);
    if (m > room) m = room;
    memcpy(last_error + n + 2, old, m);
    last_error[n + 2 + m] = '\0';
    return code;
}
