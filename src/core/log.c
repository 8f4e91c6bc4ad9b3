/* log.c -- the library speaks only through this callback. */
#include "core.h"

#include <fnmatch.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ---- modules: a log call's module is the source directory of its file
 * (ts_logf passes __FILE__), as users name it in TS_LOG_VMODULE */
static const char *const module_names[TS_LOG_MODULES] = {"core",    "graph", "compile", "exec", "backend", "cuda", "observe",
                                                         "diag",    "parallel", "onnx",    "io",   "model",   "data"};

int ts_log_module_of(const char *file) {
    const char *src = NULL;
    for (const char *p = strstr(file, "src/"); p; p = strstr(p + 1, "src/"))
        if (p == file || p[-1] == '/') src = p + 4;
    if (!src) return -1;
    const char *slash = strchr(src, '/');
    size_t n = slash ? (size_t)(slash - src) : 0;
    if (n == 7 && strncmp(src, "backend", 7) == 0 && strncmp(slash + 1, "cuda/", 5) == 0) return 5;
    if (n == 6 && strncmp(src, "import", 6) == 0) return 9;
    for (int i = 0; i < TS_LOG_MODULES; i++)
        if (strlen(module_names[i]) == n && strncmp(src, module_names[i], n) == 0) return i;
    return -1;
}

const char *ts_log_module_name(int module) { return module >= 0 && module < TS_LOG_MODULES ? module_names[module] : "?"; }

/* The source files' names (CMake lists them); TS_LOG_VMODULE takes them
 * beside the modules, as TensorFlow's TF_CPP_VMODULE does. */
#ifndef TS_SOURCE_STEMS
#define TS_SOURCE_STEMS ""
#endif
#define MAX_STEMS 512

/* The names of TS_SOURCE_STEMS into words (pointing into buf); their count. */
static size_t source_stems(const char **words, char *buf, size_t cap) {
    snprintf(buf, cap, "%s", TS_SOURCE_STEMS);
    size_t n = 0;
    for (char *p = buf, *save = NULL, *w; n < MAX_STEMS && (w = strtok_r(p, ",", &save)) != NULL; p = NULL) words[n++] = w;
    return n;
}

/* A file's name without its folder and extension: src/import/onnx.c -> onnx. */
static void stem_of(const char *file, char *out, size_t n) {
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    size_t len = strcspn(base, ".");
    snprintf(out, n, "%.*s", (int)(len < n ? len : n - 1), base);
}

static atomic_int thread_id_state = -1; /* TS_LOG_THREAD_ID: -1 not yet read, 0 off, 1 on */
static atomic_int prefix_state = -1;    /* TS_LOG_PREFIX: the same */

/* An opt-in variable, read once (off while it is read: ts_env_flag may warn through the log). */
static int env_once(atomic_int *state, const char *name) {
    int on = atomic_load_explicit(state, memory_order_relaxed);
    if (on < 0) {
        atomic_store(state, 0);
        on = ts_env_flag(name);
        atomic_store(state, on);
    }
    return on;
}

static void default_sink(void *u, int level, const char *msg) {
    (void)u;
    static const char *tag[] = {"", "E", "W", "I", "D", "T", "print"};
    const char *t = tag[level < 0 ? 0 : level > 6 ? 6 : level];
    if (env_once(&thread_id_state, "TS_LOG_THREAD_ID")) fprintf(stderr, "[tensorscope %s tid %ld] %s\n", t, (long)syscall(SYS_gettid), msg);
    else fprintf(stderr, "[tensorscope %s] %s\n", t, msg);
}

static ts_log_fn sink = default_sink;
static void *sink_user;
static atomic_int level_now = -1; /* -1: not yet read from TS_LOG_LEVEL */
/* TS_LOG_VMODULE / ts_set_log_vmodule: a module's level when raised above
 * the global one (0: not raised); vmodule_max the highest of them */
static atomic_int module_level[TS_LOG_MODULES];
static atomic_int vmodule_max;
static atomic_int vmodule_state; /* 0: TS_LOG_VMODULE not yet read, 1: being read, 2: read */
/* and the source files it names (a name or a glob of names), with their levels */
#define MAX_FILES 16
typedef struct file_level {
    char name[48];
    int level;
} file_level;
static file_level file_levels[MAX_FILES];
static atomic_int n_file_levels;

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

void ts_set_log_level(int level) { atomic_store(&level_now, level < 0 ? 0 : level > 5 ? 5 : level); }

int ts_get_log_level(void) {
    int now = atomic_load_explicit(&level_now, memory_order_relaxed);
    if (now >= 0) return now;
    const char *e = getenv("TS_LOG_LEVEL");
    int l = TS_LOG_INFO;
    bool bad = e && *e && !ts_parse_log_level(e, &l);
    int unread = -1;
    if (!atomic_compare_exchange_strong(&level_now, &unread, l)) return atomic_load(&level_now); /* set meanwhile */
    if (bad) { /* said once, at the level that stays in force */
        char msg[256];
        snprintf(msg, sizeof msg, "TS_LOG_LEVEL='%.80s' is not a level (0-5 or off, error, warn, info, debug, trace); using info", e);
        emit(TS_LOG_WARN, msg);
    }
    return l;
}

/* Parses "onnx=5,exec=4,memwatch=4" into levels[] (0 where not named) and
 * files[] (*n_files of them: names that are no module but a source file's,
 * or a glob of them). Returns false at the first entry that is not
 * NAME=LEVEL with a known name, with what is wrong in why; the entries
 * before it are in levels and files. */
static bool parse_vmodule(const char *spec, int *levels, file_level *files, int *n_files, char *why, size_t n) {
    for (int i = 0; i < TS_LOG_MODULES; i++) levels[i] = 0;
    *n_files = 0;
    char stem_buf[sizeof TS_SOURCE_STEMS + 1];
    const char *stems[MAX_STEMS];
    size_t n_stems = source_stems(stems, stem_buf, sizeof stem_buf);
    const char *p = spec;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        char name[32], lv[16];
        int m = -1, l = 0;
        if (eq && (size_t)(eq - p) < sizeof name && len - (size_t)(eq - p) - 1 < sizeof lv) {
            snprintf(name, sizeof name, "%.*s", (int)(eq - p), p);
            snprintf(lv, sizeof lv, "%.*s", (int)(len - (size_t)(eq - p) - 1), eq + 1);
            for (int i = 0; i < TS_LOG_MODULES; i++)
                if (strcmp(name, module_names[i]) == 0) m = i;
            bool file = false; /* a source file's name, or a glob that matches one */
            for (size_t i = 0; m < 0 && !file && i < n_stems; i++) file = fnmatch(name, stems[i], 0) == 0;
            if (m < 0 && !file) {
                char close[256], all[256] = "", fclose_[256];
                ts_closest_words(name, module_names, TS_LOG_MODULES, close, sizeof close);
                ts_closest_words(name, stems, n_stems, fclose_, sizeof fclose_);
                for (int i = 0; i < TS_LOG_MODULES; i++)
                    snprintf(all + strlen(all), sizeof all - strlen(all), "%s%s", i ? ", " : "", module_names[i]);
                snprintf(why, n, "'%s' is not a module (did you mean %s?) or a source file (%s?); the modules are %s, and a source "
                         "file is named without its folder and .c (onnx_torch, memwatch)", name, close, fclose_, all);
                return false;
            }
            if (!ts_parse_log_level(lv, &l)) {
                snprintf(why, n, "'%s' is not a level for %s (0-5 or off, error, warn, info, debug, trace)", lv, name);
                return false;
            }
            if (m >= 0) levels[m] = l;
            else if (*n_files == MAX_FILES) {
                snprintf(why, n, "'%s': at most %d source files", name, MAX_FILES);
                return false;
            } else {
                snprintf(files[*n_files].name, sizeof files[*n_files].name, "%s", name);
                files[(*n_files)++].level = l;
            }
        } else {
            snprintf(why, n, "'%.*s' is not MODULE=LEVEL (e.g. onnx=5,exec=4)", (int)(len < 64 ? len : 64), p);
            return false;
        }
        p += len + (end ? 1 : 0);
    }
    return true;
}

static void apply_vmodule(const int *levels, const file_level *files, int n_files) {
    int max = 0;
    for (int i = 0; i < TS_LOG_MODULES; i++) {
        atomic_store(&module_level[i], levels[i]);
        if (levels[i] > max) max = levels[i];
    }
    atomic_store_explicit(&n_file_levels, 0, memory_order_release);
    for (int i = 0; i < n_files; i++) {
        file_levels[i] = files[i];
        if (files[i].level > max) max = files[i].level;
    }
    atomic_store_explicit(&n_file_levels, n_files, memory_order_release);
    atomic_store(&vmodule_max, max);
}

/* TS_LOG_VMODULE, read at the first log call that needs it; what it names
 * wrongly is warned about once and the rest of it is used. */
static void read_vmodule_env(void) {
    int unread = 0;
    if (!atomic_compare_exchange_strong(&vmodule_state, &unread, 1)) return;
    const char *e = getenv("TS_LOG_VMODULE");
    int levels[TS_LOG_MODULES], n_files = 0;
    file_level files[MAX_FILES];
    char why[768] = "";
    bool ok = !e || parse_vmodule(e, levels, files, &n_files, why, sizeof why);
    if (e) apply_vmodule(levels, files, n_files);
    atomic_store(&vmodule_state, 2);
    if (!ok) ts_logf(TS_LOG_WARN, "TS_LOG_VMODULE='%.200s': %s; the entries before it are used", e, why);
}

ts_status ts_set_log_vmodule(const char *spec) {
    read_vmodule_env(); /* what is set here wins over the environment */
    int levels[TS_LOG_MODULES], n_files = 0;
    file_level files[MAX_FILES];
    char why[768];
    if (!parse_vmodule(spec ? spec : "", levels, files, &n_files, why, sizeof why))
        return ts_error(TS_ERR_INVALID_ARGUMENT, "log vmodule '%s': %s", spec, why);
    apply_vmodule(levels, files, n_files);
    return TS_OK;
}

bool ts_log_enabled_in(const char *file, int level) {
    if (level <= 0) return false;
    if (level <= ts_get_log_level()) return true;
    if (atomic_load_explicit(&vmodule_state, memory_order_relaxed) != 2) read_vmodule_env();
    if (level > atomic_load_explicit(&vmodule_max, memory_order_relaxed)) return false;
    int m = ts_log_module_of(file);
    if (m >= 0 && level <= atomic_load_explicit(&module_level[m], memory_order_relaxed)) return true;
    int nf = atomic_load_explicit(&n_file_levels, memory_order_acquire);
    char stem[64];
    if (nf) stem_of(file, stem, sizeof stem);
    for (int i = 0; i < nf; i++)
        if (level <= file_levels[i].level && fnmatch(file_levels[i].name, stem, 0) == 0) return true;
    return false;
}

/* TS_LOG_PREFIX=1: TensorFlow's `2026-12-06 05:41:45.123456: src/import/onnx.c:2153] ` before each line (local time). */
static size_t line_prefix(const char *file, int line, char *buf, size_t n) {
    if (!env_once(&prefix_state, "TS_LOG_PREFIX") || !file || n < 64) return 0;
    struct timespec now;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &now);
    localtime_r(&now.tv_sec, &tm);
    size_t used = strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm);
    const char *src = NULL;
    for (const char *p = strstr(file, "src/"); p; p = strstr(p + 1, "src/"))
        if (p == file || p[-1] == '/') src = p;
    const char *shown = src ? src : strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    int k = snprintf(buf + used, n - used, ".%06ld: %s:%d] ", (long)(now.tv_nsec / 1000), shown, line);
    used += k > 0 ? (size_t)k : 0;
    return used < n ? used : n - 1;
}

static void vlog(const char *file, int line, int level, const char *fmt, va_list ap) {
    char buf[4096];
    size_t pre = line_prefix(file, line, buf, 512);
    vsnprintf(buf + pre, sizeof buf - pre, fmt, ap);
    emit(level, buf);
}

void ts_logf_at(const char *file, int line, int level, const char *fmt, ...) {
    if (!ts_log_enabled_in(file, level)) return;
    va_list ap;
    va_start(ap, fmt);
    vlog(file, line, level, fmt, ap);
    va_end(ap);
}

void ts_logf_in(const char *file, int level, const char *fmt, ...) {
    if (!ts_log_enabled_in(file, level)) return;
    va_list ap;
    va_start(ap, fmt);
    vlog(file, 0, level, fmt, ap);
    va_end(ap);
}

uint64_t ts_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void ts_log_message_at(const char *file, int line, int level, const char *msg) {
    if (!ts_log_enabled_in(file, level)) return;
    char pre[512];
    size_t n = line_prefix(file, line, pre, sizeof pre), len = strlen(msg);
    char *buf = n ? ts_malloc(n + len + 1) : NULL;
    if (!buf) {
        emit(level, msg);
        return;
    }
    memcpy(buf, pre, n);
    memcpy(buf + n, msg, len + 1);
    emit(level, buf);
    ts_free(buf);
}

void ts_log_message_in(const char *file, int level, const char *msg) { ts_log_message_at(file, 0, level, msg); }

void ts_log_write(int level, const char *message) {
    if (message && level >= TS_LOG_ERROR && level <= TS_LOG_TRACE) ts_log_message_in("src/model/", level, message);
}

void ts_log_print(const char *msg) {
    if (ts_get_log_level() == TS_LOG_OFF) return;
    emit(TS_LOG_PRINT, msg);
}
