/* log.c -- the library speaks only through this callback. */
#include "core.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static _Thread_local bool printing; /* the line is a print op's (ts_log_print) */

static void default_sink(void *u, int level, const char *msg) {
    (void)u;
    static const char *tag[] = {"", "E", "W", "I", "D", "T"};
    fprintf(stderr, "[tensorscope %s] %s\n", printing ? "print" : tag[level < 0 ? 0 : level > 5 ? 5 : level], msg);
}

static ts_log_fn sink = default_sink;
static void *sink_user;
static int level_now = -1; /* -1: not yet read from TS_LOG_LEVEL */

/* Every line reaches the sink escaped (ts_escape_text): what it quotes may
 * come from a model file. A clean line goes as it is; a long one that needs
 * escapes gets a buffer of its size, or is cut when none can be had. */
static void emit(int level, const char *msg) {
    if (!ts_text_needs_escape(msg)) {
        sink(sink_user, level, msg);
        return;
    }
    char small[4096], *buf = small;
    size_t need = ts_escape_text(small, sizeof small, msg);
    if (need >= sizeof small && (buf = ts_malloc(need + 1)) != NULL) ts_escape_text(buf, need + 1, msg);
    else if (!buf) buf = small;
    sink(sink_user, level, buf);
    if (buf != small) ts_free(buf);
}

void ts_set_log_callback(ts_log_fn fn, void *user) {
    sink = fn ? fn : default_sink;
    sink_user = fn ? user : NULL;
}

void ts_set_log_level(int level) { level_now = level < 0 ? 0 : level > 5 ? 5 : level; }

int ts_get_log_level(void) {
    if (level_now < 0) {
        const char *e = getenv("TS_LOG_LEVEL");
        int l = TS_LOG_INFO;
        bool bad = e && *e && !ts_parse_log_level(e, &l);
        level_now = l;
        if (bad) { /* said once, at the level that stays in force */
            char msg[256];
            snprintf(msg, sizeof msg, "TS_LOG_LEVEL='%.80s' is not a level (0-5 or off, error, warn, info, debug, trace); using info", e);
            emit(TS_LOG_WARN, msg);
        }
    }
    return level_now;
}

bool ts_log_enabled(int level) { return level <= ts_get_log_level() && level > 0; }

void ts_logf(int level, const char *fmt, ...) {
    if (!ts_log_enabled(level)) return;
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    emit(level, buf);
}

uint64_t ts_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void ts_log_message(int level, const char *msg) {
    if (ts_log_enabled(level)) emit(level, msg);
}

void ts_log_print(const char *msg) {
    if (!ts_log_enabled(TS_LOG_ERROR)) return;
    printing = true;
    emit(TS_LOG_ERROR, msg);
    printing = false;
}
