/* args.c -- flag parsing with usage errors that say what to do. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

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

void cli_print_help(FILE *f, const char *cmd, const char *usage, const cli_flag *flags) {
    fprintf(f, "usage: tensorscope %s %s\n\n", cmd, usage);
    for (const cli_flag *fl = flags; fl->name; fl++) {
        char left[64];
        snprintf(left, sizeof left, "%s%s%s", fl->name, fl->metavar ? " " : "", fl->metavar ? fl->metavar : "");
        fprintf(f, "  %-36s %s\n", left, fl->help);
    }
    fprintf(f, "  %-36s %s\n", "--help", "show this help");
}

static int set_value(const char *cmd, const cli_flag *fl, const char *v) {
    char *end;
    switch (fl->kind) {
    case FLAG_INT: {
        errno = 0;
        long x = strtol(v, &end, 10);
        if (errno || end == v || *end) return cli_usage_error(cmd, "%s expects an integer, got '%s'", fl->name, v);
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
    case FLAG_STRING: *(const char **)fl->dest = v; return CLI_OK;
    case FLAG_LIST: {
        cli_list *l = fl->dest;
        if (l->n == (int)(sizeof l->items / sizeof l->items[0])) return cli_usage_error(cmd, "too many %s flags (at most 64)", fl->name);
        l->items[l->n++] = v;
        return CLI_OK;
    }
    default: return CLI_OK;
    }
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
            if (strlen(f->name) == len && strncmp(f->name, a, len) == 0) fl = f;
        if (!fl) return cli_usage_error(cmd, "unknown flag '%.*s'", (int)len, a);
        if (fl->kind == FLAG_BOOL) {
            if (eq) return cli_usage_error(cmd, "%s takes no value", fl->name);
            *(bool *)fl->dest = true;
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
