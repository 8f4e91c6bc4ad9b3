/* args.c -- flag parsing with usage errors that say what to do. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tensorscope %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'tensorscope %s --help'.\n", cmd);
    return CLI_USAGE;
}

int cli_runtime_error(const char *what) {
    fprintf(stderr, "tensorscope: %s: %s\n", what, ts_last_error());
    return CLI_RUNTIME;
}

int cli_need_features(const char *cmd, const cli_need *needs, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (needs[i].feature && ts_require_feature(needs[i].feature) != TS_OK) {
            fprintf(stderr, "tensorscope %s: %s: %s\n", cmd, needs[i].flag, ts_last_error());
            return CLI_RUNTIME;
        }
    return CLI_OK;
}

const char *cli_file_feature(const char *path) {
    size_t n = path ? strlen(path) : 0;
    if (n > 5 && strcmp(path + n - 5, ".onnx") == 0) return "onnx";
    if (n > 4 && strcmp(path + n - 4, ".npz") == 0) return "npz";
    return NULL;
}

void cli_print_help(FILE *f, const char *cmd, const char *usage, const cli_flag *flags) {
    fprintf(f, "usage: tensorscope %s %s\n\n", cmd, usage);
    bool help_shown = false; /* --help ends the command's own flags, before the models' sections */
    for (const cli_flag *fl = flags; fl->name; fl++) {
        if (fl->kind == FLAG_SECTION) {
            if (!help_shown) fprintf(f, "  %-36s %s\n", "--help", "show this help");
            help_shown = true;
            fprintf(f, "\n%s:\n", fl->help);
            continue;
        }
        char left[64];
        snprintf(left, sizeof left, "%s%s%s", fl->name, fl->metavar && fl->kind != FLAG_OPT_INT && fl->kind != FLAG_OPT_FLOAT ? " " : "",
                 fl->metavar ? fl->metavar : "");
        fprintf(f, "  %-36s %s\n", left, fl->help);
    }
    if (!help_shown) fprintf(f, "  %-36s %s\n", "--help", "show this help");
}

static int set_value(const char *cmd, const cli_flag *fl, const char *v) {
    char *end;
    switch (fl->kind) {
    case FLAG_INT:
    case FLAG_INT64: {
        errno = 0;
        long x = strtol(v, &end, 10);
        if (end == v || *end) return cli_usage_error(cmd, "%s expects an integer, got '%s'", fl->name, v);
        long lo = fl->kind == FLAG_INT ? INT_MIN : LONG_MIN, hi = fl->kind == FLAG_INT ? INT_MAX : LONG_MAX;
        if (errno == ERANGE || x < lo || x > hi)
            return cli_usage_error(cmd, "%s %s is out of range: give an integer from %ld to %ld", fl->name, v, lo, hi);
        *(long *)fl->dest = x;
        return CLI_OK;
    }
    case FLAG_FLOAT: {
        errno = 0;
        double x = strtod(v, &end);
        if (errno || end == v || *end || !isfinite(x)) return cli_usage_error(cmd, "%s expects a number, got '%s'", fl->name, v);
        *(double *)fl->dest = x;
        return CLI_OK;
    }
    case FLAG_STRING:
        if (!*v) return cli_usage_error(cmd, "%s needs a non-empty value (%s)", fl->name, fl->metavar ? fl->metavar : "VALUE");
        *(const char **)fl->dest = v;
        return CLI_OK;
    case FLAG_LIST: {
        cli_list *l = fl->dest;
        if (!*v) return cli_usage_error(cmd, "%s needs a non-empty value (%s)", fl->name, fl->metavar ? fl->metavar : "VALUE");
        if (l->n == (int)(sizeof l->items / sizeof l->items[0])) return cli_usage_error(cmd, "too many %s flags (at most 64)", fl->name);
        l->items[l->n++] = v;
        return CLI_OK;
    }
    default: return CLI_OK;
    }
}

/* An unknown flag, with the closest of the table's ("did you mean"). */
static int unknown_flag(const char *cmd, const cli_flag *flags, const char *arg, size_t len) {
    const char *names[256];
    size_t n = 0;
    for (const cli_flag *f = flags; f->name && n < 256; f++)
        if (f->kind != FLAG_SECTION) names[n++] = f->name;
    char word[128], close[512];
    snprintf(word, sizeof word, "%.*s", (int)(len < sizeof word ? len : sizeof word - 1), arg);
    ts_closest_words(word, names, n, close, sizeof close);
    return cli_usage_error(cmd, "unknown flag '%s'; did you mean %s?", word, close);
}

int cli_parse(const char *cmd, const char *usage, const cli_flag *flags, int argc, char **argv, int first, int *rest,
              bool *help_shown) {
    *help_shown = false;
    if (rest) *rest = argc;
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            if (!rest) return cli_usage_error(cmd, "unexpected '--'");
            *rest = i + 1;
            return CLI_OK;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            cli_print_help(stdout, cmd, usage, flags);
            *help_shown = true;
            return CLI_OK;
        }
        if (strncmp(a, "--", 2) != 0) return cli_usage_error(cmd, "unexpected argument '%s'", a);
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const cli_flag *fl = NULL;
        for (const cli_flag *f = flags; f->name; f++)
            if (f->kind != FLAG_SECTION && strlen(f->name) == len && strncmp(f->name, a, len) == 0) fl = f;
        if (!fl) return unknown_flag(cmd, flags, a, len);
        if (fl->kind == FLAG_BOOL) {
            if (eq) return cli_usage_error(cmd, "%s takes no value", fl->name);
            *(bool *)fl->dest = true;
            continue;
        }
        if (fl->kind == FLAG_OPT_INT) { /* the value only after '=': --flag alone is 0 */
            char *end;
            errno = 0;
            long x = eq ? strtol(eq + 1, &end, 10) : 0;
            if (eq && (errno || end == eq + 1 || *end || x < 1 || x > INT_MAX))
                return cli_usage_error(cmd, "%s=%s: give a whole number from 1 to %d, or %s alone", fl->name, eq + 1, INT_MAX, fl->name);
            *(long *)fl->dest = x;
            continue;
        }
        if (fl->kind == FLAG_OPT_STRING) { /* the value after '=', or the next argument unless it is a flag */
            *(const char **)fl->dest = eq ? eq + 1 : i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0 ? argv[++i] : "";
            continue;
        }
        if (fl->kind == FLAG_OPT_FLOAT) { /* as FLAG_OPT_INT, a number > 0 */
            char *end;
            errno = 0;
            double x = eq ? strtod(eq + 1, &end) : 0;
            if (eq && (errno || end == eq + 1 || *end || !(x > 0) || !isfinite(x)))
                return cli_usage_error(cmd, "%s=%s: give a number > 0, or %s alone", fl->name, eq + 1, fl->name);
            *(double *)fl->dest = x;
            continue;
        }
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v) return cli_usage_error(cmd, "%s needs a value (%s)", fl->name, fl->metavar ? fl->metavar : "VALUE");
        int rc = set_value(cmd, fl, v);
        if (rc) return rc;
    }
    return CLI_OK;
}

bool cli_list_matches(const cli_list *l, const char *name) {
    for (int i = 0; l && i < l->n; i++)
        if (ts_name_matches(l->items[i], name)) return true;
    return false;
}

bool cli_graph_has_match(const ts_graph *g, const char *pattern) {
    for (size_t i = 0; i < ts_graph_tensor_count(g); i++)
        if (ts_name_matches(pattern, ts_tensor_name(ts_graph_tensor_at(g, i)))) return true;
    return false;
}

int cli_no_match_error(const char *cmd, const char *flag, const char *pattern, const ts_graph *g) {
    char close[512];
    ts_graph_closest_names(g, pattern, close, sizeof close);
    bool glob = strpbrk(pattern, "*?[") != NULL;
    return cli_usage_error(cmd, "%s %s matches no tensor%s; closest: %s (list them all with 'tensorscope names')", flag, pattern,
                           glob ? "" : " (a name without *, ? or [ must match exactly)", close);
}

/* A period after a mode: 1..INT_MAX, all of the text (no silent truncation:
 * 4294967297 is not 1). */
static int parse_period(const char *cmd, const char *what, const char *text, int *period) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end)
        return cli_usage_error(cmd, "%s: the period must be an integer, got '%s'", what, text);
    if (errno == ERANGE || v < 1 || v > INT_MAX)
        return cli_usage_error(cmd, "%s: the period must be 1..%d, got %s", what, INT_MAX, text);
    *period = (int)v;
    return CLI_OK;
}

static bool is_word(const char *s) { return *s && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_") == strlen(s); }

/* NAME[:MODE[:N]]. Tensor names hold ':' themselves (Relu:0,
 * Flatten:0@bf16) and globs may (Relu:*), so the spec is split at its last
 * ':' only when what follows is a mode (or a period after a mode);
 * otherwise all of it is the name. A last field of letters only that
 * is no mode (fc1.weight:fnal, or x:bogus:3 before a period) names no
 * tensor -- ours end in :<k> -- so it is reported as the bad mode it was
 * meant to be. */
int cli_parse_anchor(const char *cmd, const char *spec, char *name, size_t n, ts_output_mode *mode, int *period) {
    *mode = TS_OUTPUT_DEFAULT;
    *period = 0;
    if (!*spec) return cli_usage_error(cmd, "--anchor needs a tensor name");
    if (strlen(spec) >= n) return cli_usage_error(cmd, "--anchor: the spec is longer than %zu characters", n - 1);
    memcpy(name, spec, strlen(spec) + 1);
    char *last = strrchr(name, ':');
    if (!last) return CLI_OK;
    ts_output_mode m;
    const char *tail = last + 1;
    *last = '\0';
    char *prev = strrchr(name, ':');
    if (ts_output_mode_parse(tail, &m) == TS_OK) { /* NAME:MODE */
        *mode = m;
    } else if (prev && ts_output_mode_parse(prev + 1, &m) == TS_OK) { /* NAME:MODE:N */
        int rc = parse_period(cmd, spec, tail, period);
        if (rc) return rc;
        *prev = '\0';
        *mode = m;
    } else if (is_word(tail) || (prev && is_word(prev + 1) && *tail && strspn(tail, "0123456789") == strlen(tail))) {
        return cli_usage_error(cmd, "--anchor %s: '%s' is not an output mode: give NAME[:MODE[:N]] with MODE final, every_n, all, sum or default",
                               spec, is_word(tail) ? tail : prev + 1);
    } else {
        *last = ':'; /* part of the name: Relu:0, Flatten:0@bf16, Relu:* */
        return CLI_OK;
    }
    if (!*name) return cli_usage_error(cmd, "--anchor %s: the tensor name before ':' is empty", spec);
    return CLI_OK;
}

int cli_parse_output_mode(const char *cmd, const char *spec, ts_output_mode *mode, int *period) {
    *period = 0;
    const char *colon = strchr(spec, ':');
    size_t n = colon ? (size_t)(colon - spec) : strlen(spec);
    char buf[32];
    if (n >= sizeof buf) return cli_usage_error(cmd, "--output-mode '%s' is not final, every_n, all, sum or default", spec);
    memcpy(buf, spec, n);
    buf[n] = '\0';
    if (ts_output_mode_parse(buf, mode)) return cli_usage_error(cmd, "--output-mode: %s", ts_last_error());
    return colon ? parse_period(cmd, "--output-mode", colon + 1, period) : CLI_OK;
}

bool cli_parse_picture_spec(const ts_graph *g, const char *spec, char *name, size_t n, long *sample) {
    *sample = 0;
    snprintf(name, n, "%s", spec);
    if (ts_graph_find(g, name)) return true;
    char *colon = strrchr(name, ':');
    if (!colon) return false;
    char *end;
    errno = 0;
    long s = strtol(colon + 1, &end, 10);
    if (errno || end == colon + 1 || *end || s < 0) return false;
    *colon = '\0';
    if (!ts_graph_find(g, name)) return false;
    *sample = s;
    return true;
}

void cli_file_safe(const char *in, char *out, size_t n) {
    size_t i = 0;
    for (; in[i] && i + 1 < n; i++) out[i] = (in[i] == '/' || in[i] == ':' || in[i] == ' ') ? '_' : in[i];
    out[i] = '\0';
}

char *cli_path(const char *dir, const char *name, const char *suffix) {
    size_t n = strlen(dir) + strlen(name) + strlen(suffix) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s%s", dir, name, suffix);
    return p;
}

/* mkdir -p */
static int make_dirs(const char *dir) {
    char *p = strdup(dir);
    if (!p) return -1;
    int rc = 0;
    for (char *c = p + 1; rc == 0; c++) {
        if (*c != '/' && *c != '\0') continue;
        char saved = *c;
        *c = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST) rc = -1;
        *c = saved;
        if (!saved) break;
    }
    free(p);
    return rc;
}

int cli_check_output(const char *cmd, const char *flag, const char *path, bool is_dir) {
    struct stat sb;
    if (!*path) return cli_usage_error(cmd, "%s needs a non-empty path", flag);
    if (is_dir) {
        if (make_dirs(path) != 0 || stat(path, &sb) != 0)
            return cli_usage_error(cmd, "%s %s: cannot create the directory: %s", flag, path, strerror(errno));
        if (!S_ISDIR(sb.st_mode)) return cli_usage_error(cmd, "%s %s: not a directory", flag, path);
        if (access(path, W_OK | X_OK) != 0) return cli_usage_error(cmd, "%s %s: the directory is not writable", flag, path);
        return CLI_OK;
    }
    if (stat(path, &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) return cli_usage_error(cmd, "%s %s: is a directory; give a file name", flag, path);
        if (access(path, W_OK) != 0) return cli_usage_error(cmd, "%s %s: the file is not writable", flag, path);
        if (!S_ISREG(sb.st_mode)) return CLI_OK; /* a device or FIFO is written through */
    }
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) return cli_usage_error(cmd, "out of memory");
    int rc = CLI_OK;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        rc = cli_usage_error(cmd, "%s %s: the directory %s does not exist", flag, path, dir);
    else if (access(dir, W_OK | X_OK) != 0)
        rc = cli_usage_error(cmd, "%s %s: the directory %s is not writable", flag, path, dir);
    free(dir);
    return rc;
}

int cli_check_output_file_mkdir(const char *cmd, const char *flag, const char *path) {
    const char *slash = strrchr(path, '/');
    if (slash && slash != path) {
        char *dir = strndup(path, (size_t)(slash - path));
        if (!dir) return cli_usage_error(cmd, "out of memory");
        int rc = cli_check_output(cmd, flag, dir, true);
        free(dir);
        if (rc) return rc;
    }
    return cli_check_output(cmd, flag, path, false);
}

int cli_parse_step_range(const char *cmd, const char *flag, const char *text, int64_t *first, int64_t *last) {
    char *end;
    errno = 0;
    long long a = strtoll(text, &end, 10), b = a;
    bool open = false;
    if (end != text && *end == ':') {
        const char *rest = end + 1;
        open = !*rest;
        if (!open) b = strtoll(rest, &end, 10);
        else end = (char *)rest;
    }
    if (end == text || *end || errno || a < 1 || b < 1)
        return cli_usage_error(cmd, "%s %s: give FIRST:LAST optimizer steps counted from 1 (e.g. 5:8), FIRST: for every step from FIRST on, or one step N",
                               flag, text);
    if (b < a) return cli_usage_error(cmd, "%s %s: the last step comes before the first; give FIRST:LAST with FIRST <= LAST", flag, text);
    *first = a;
    *last = open ? 0 : b;
    return CLI_OK;
}

int cli_parse_size(const char *text, long long *bytes) {
    uint64_t v;
    if (ts_parse_size(text, &v) != TS_OK) return -1;
    *bytes = (long long)v;
    return 0;
}
