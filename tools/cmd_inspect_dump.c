/* cmd_inspect_dump.c -- `inspect DIR`: the inspector over an offline
 * debugger dump (train --dump-debug DIR, docs/inspector.md#a-debugger-dump-offline): its
 * index read, then the prompt's list, print and stats with numpy slices,
 * grad, where, save, and step / next / prev moving between the dumped
 * steps, diff comparing a tensor across them. The values are read from the
 * .npy files when asked. */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define INDEX_HEADER "step\tname\tkind\top\tsource\tposition\tdtype\tshape\tpath"

typedef struct row {
    long long step;
    char *name, *kind, *op, *source, *dtype, *shape, *file; /* in line */
    long position;
    char *line;
} row;

typedef struct dump {
    const char *dir;
    row *rows;
    int n, cap;
    long long *steps; /* sorted, distinct */
    int n_steps;
    long long cur;    /* the step shown */
} dump;

/* A field of the index in place: \t \n \\ unescaped. */
static char *unescape(char *s) {
    char *w = s;
    for (char *r = s; *r; r++) {
        if (*r == '\\' && r[1]) {
            r++;
            *w++ = *r == 't' ? '\t' : *r == 'n' ? '\n' : *r;
        } else {
            *w++ = *r;
        }
    }
    *w = 0;
    return s;
}

static void free_dump(dump *d) {
    for (int i = 0; i < d->n; i++) free(d->rows[i].line);
    free(d->rows);
    free(d->steps);
}

static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* DIR/index.tsv into d; false (said) when it cannot be read. */
static bool load_index(const char *dir, dump *d) {
    char path[4200];
    snprintf(path, sizeof path, "%s/index.tsv", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "tensorscope inspect: %s: %s; %s is not a debugger dump (write one with train --dump-debug DIR)\n", path, strerror(errno), dir);
        return false;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int lineno = 0;
    bool ok = true;
    while (ok && (len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (len && line[len - 1] == '\n') line[--len] = 0;
        if (lineno == 1) {
            if (strcmp(line, INDEX_HEADER) != 0) {
                fprintf(stderr, "tensorscope inspect: %s: not a debugger dump index (its first line is not the header of docs/formats.md#debugger-dump)\n", path);
                ok = false;
            }
            continue;
        }
        if (!len) continue;
        char *copy = strdup(line), *fields[9];
        int k = 0;
        for (char *p = copy; p && k < 9; k++) {
            fields[k] = p;
            p = strchr(p, '\t');
            if (p) *p++ = 0;
        }
        if (!copy || k != 9 || strchr(fields[8], '\t')) {
            fprintf(stderr, "tensorscope inspect: %s:%d: %d fields, expected 9 (docs/formats.md#debugger-dump)\n", path, lineno, k);
            free(copy);
            ok = false;
            break;
        }
        if (d->n == d->cap) {
            int c = d->cap ? 2 * d->cap : 64;
            row *r = realloc(d->rows, (size_t)c * sizeof *r);
            if (!r) {
                free(copy);
                fprintf(stderr, "tensorscope inspect: out of memory\n");
                ok = false;
                break;
            }
            d->rows = r, d->cap = c;
        }
        row *r = &d->rows[d->n++];
        r->line = copy;
        r->name = unescape(fields[1]);
        r->step = strtoll(fields[0], NULL, 10);
        r->kind = fields[2], r->op = fields[3], r->source = unescape(fields[4]);
        r->position = strtol(fields[5], NULL, 10);
        r->dtype = fields[6], r->shape = fields[7], r->file = fields[8];
    }
    free(line);
    fclose(f);
    if (!ok) return false;
    d->steps = malloc((d->n > 0 ? (size_t)d->n : 1) * sizeof *d->steps);
    if (!d->steps) return false;
    for (int i = 0; i < d->n; i++) d->steps[i] = d->rows[i].step;
    qsort(d->steps, (size_t)d->n, sizeof *d->steps, cmp_ll);
    for (int i = 0; i < d->n; i++)
        if (!d->n_steps || d->steps[d->n_steps - 1] != d->steps[i]) d->steps[d->n_steps++] = d->steps[i];
    d->cur = d->n_steps ? d->steps[0] : 0;
    return true;
}

static const row *find(const dump *d, const char *name, long long step) {
    for (int i = 0; i < d->n; i++)
        if (d->rows[i].step == step && strcmp(d->rows[i].name, name) == 0) return &d->rows[i];
    return NULL;
}

static bool known(const dump *d, const char *name) {
    for (int i = 0; i < d->n; i++)
        if (strcmp(d->rows[i].name, name) == 0) return true;
    return false;
}

/* An error line for a name the dump does not have at `step`. */
static void not_found(const dump *d, const char *name, long long step) {
    if (known(d, name)) {
        printf("error: '%s' was not dumped at step %lld; 'where %s' lists its steps\n", name, step, name);
        return;
    }
    const char **names = malloc((d->n > 0 ? (size_t)d->n : 1) * sizeof *names);
    size_t n = 0;
    for (int i = 0; names && i < d->n; i++)
        if (d->rows[i].step == step) names[n++] = d->rows[i].name;
    char near[512] = "";
    printf("error: no tensor '%s' in the dump; closest: %s\n", name, names ? ts_closest_words(name, names, n, near, sizeof near) : "");
    free(names);
}

/* NAME[SLICES] -> name and spec; a name that ends in ']' is taken whole when the dump has it. */
static bool cut(const dump *d, const char *arg, char *name, size_t n, char *spec, size_t ns) {
    const char *br = strrchr(arg, '[');
    size_t len = strlen(arg);
    bool sliced = br && len && arg[len - 1] == ']' && !known(d, arg);
    size_t name_len = sliced ? (size_t)(br - arg) : len, spec_len = sliced ? len - name_len - 2 : 0;
    if (name_len >= n || spec_len >= ns) {
        printf("error: the %s is too long\n", name_len >= n ? "name" : "slice spec");
        return false;
    }
    snprintf(name, n, "%.*s", (int)name_len, arg);
    snprintf(spec, ns, "%.*s", (int)spec_len, sliced ? br + 1 : "");
    return true;
}

/* NAME[SLICES] at `step` as a new array (data malloc'd). */
static bool values(const dump *d, const char *arg, long long step, ts_array *out) {
    char name[1024], spec[256], path[4200];
    if (!cut(d, arg, name, sizeof name, spec, sizeof spec)) return false;
    const row *r = find(d, name, step);
    if (!r) {
        not_found(d, name, step);
        return false;
    }
    snprintf(path, sizeof path, "%s/%s", d->dir, r->file);
    ts_array a;
    if (ts_npy_load(path, &a)) {
        printf("error: %s\n", ts_last_error());
        return false;
    }
    bool ok = cli_slice_values(name, &a, spec, out);
    ts_npy_free(&a);
    return ok;
}

static const struct command {
    const char *name, *args, *help;
} commands[] = {
    {"help", "[COMMAND]", "the commands, or one command's help"},
    {"list", "[PATTERN]", "the tensors of the step (a glob: 'list fc1*'), with dtype, shape and op"},
    {"stats", "NAME[SLICES]", "summary line, stats, counts of NaN/Inf, ranges and a histogram of log2|x|"},
    {"print", "NAME[SLICES]", "values, numpy slicing: print fc1/MatMul:0[0,:5], print x[-1,...,::2]"},
    {"grad", "NAME[SLICES]", "print the gradient of NAME (Gradient___NAME; dumped with --grads)"},
    {"diff", "NAME[SLICES] [A [B]]", "the change from step A (default: the previous dumped step) to B (default: this step)"},
    {"where", "NAME", "the op that made NAME, the source line that built it, its graph position and its steps"},
    {"save", "NAME[SLICES] FILE.npy", "write the values as a .npy file"},
    {"eval", "EXPR", "a numpy-style expression over the step's tensors: eval fc1.weight.T @ x[0], eval where(fc1.bias > 0)"},
    {"steps", "", "the dumped steps"},
    {"step", "K", "show step K"},
    {"next", "", "show the next dumped step"},
    {"prev", "", "show the previous dumped step"},
    {"quit", "", "leave the inspector"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void help(const char *what) {
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!*what || strcmp(what, commands[i].name) == 0) {
            char left[64];
            snprintf(left, sizeof left, "%s %s", commands[i].name, commands[i].args);
            printf("  %-30s %s\n", left, commands[i].help);
            if (*what) return;
        }
    if (*what) printf("error: no command '%s' ('help' lists them)\n", what);
}

static void list(const dump *d, const char *pattern) {
    int shown = 0;
    for (int i = 0; i < d->n; i++) {
        const row *r = &d->rows[i];
        if (r->step != d->cur || (*pattern && !ts_name_matches(pattern, r->name))) continue;
        char shape[128];
        snprintf(shape, sizeof shape, "%s%s", r->dtype, r->shape);
        printf("  %-40s %-24s %s\n", r->name, shape, r->op);
        shown++;
    }
    if (!shown) printf("error: no tensor of step %lld matches '%s'\n", d->cur, pattern);
}

static void where(const dump *d, const char *name) {
    const row *r = NULL;
    for (int i = 0; i < d->n && !r; i++)
        if (strcmp(d->rows[i].name, name) == 0) r = &d->rows[i];
    if (!r) {
        not_found(d, name, d->cur);
        return;
    }
    printf("%s '%s' (op %s), built at %s, graph position %ld; dumped at steps", strcmp(r->kind, "grad") == 0 ? "the gradient" : "tensor", name,
           r->op, r->source, r->position);
    for (int i = 0; i < d->n; i++)
        if (strcmp(d->rows[i].name, name) == 0) printf(" %lld", d->rows[i].step);
    printf("\n");
}

static bool parse_step(const char *s, long long *v) {
    char *end;
    errno = 0;
    *v = strtoll(s, &end, 10);
    return end != s && !*end && !errno;
}

static int step_index(const dump *d, long long step) {
    for (int i = 0; i < d->n_steps; i++)
        if (d->steps[i] == step) return i;
    return -1;
}

static void say_steps(const dump *d) {
    printf("steps:");
    for (int i = 0; i < d->n_steps; i++) printf(" %lld", d->steps[i]);
    printf(" (showing %lld)\n", d->cur);
}

/* diff NAME[SLICES] [A [B]]: the trailing words that are numbers are steps. */
static void diff(const dump *d, char *arg) {
    long long st[2];
    int n = 0;
    for (;;) {
        char *sp = strrchr(arg, ' ');
        long long v;
        if (!sp || n == 2 || !parse_step(sp + 1, &v)) break;
        memmove(st + 1, st, sizeof st[0]);
        st[0] = v, n++;
        *sp = 0;
        while (sp > arg && isspace((unsigned char)sp[-1])) *--sp = 0;
    }
    long long a, b = n == 2 ? st[1] : d->cur;
    if (n) {
        a = st[0];
    } else {
        int i = step_index(d, d->cur);
        if (i <= 0) {
            printf("error: step %lld is the first dumped step; give the steps to compare: diff NAME A B\n", d->cur);
            return;
        }
        a = d->steps[i - 1];
    }
    ts_array was, now;
    if (!values(d, arg, a, &was)) return;
    if (!values(d, arg, b, &now)) {
        free(was.data);
        return;
    }
    if (was.ndim != now.ndim || memcmp(was.shape, now.shape, sizeof was.shape) != 0) {
        printf("error: '%s' has another shape at step %lld than at step %lld; nothing to compare\n", arg, b, a);
    } else {
        char label[1200];
        snprintf(label, sizeof label, "%s@%lld - %s@%lld", arg, b, arg, a);
        cli_print_change(label, &was, &now);
    }
    free(was.data);
    free(now.data);
}

/* save NAME[SLICES] FILE.npy: the last word is the file. */
static void save(const dump *d, char *arg) {
    char *sp = strrchr(arg, ' ');
    if (!sp || !sp[1]) {
        printf("error: save NAME[SLICES] FILE.npy: give a tensor and a file\n");
        return;
    }
    *sp = 0;
    ts_array a;
    if (!values(d, arg, d->cur, &a)) return;
    if (ts_npy_save(sp + 1, &a)) printf("error: %s\n", ts_last_error());
    else printf("saved %s of step %lld to %s\n", arg, d->cur, sp + 1);
    free(a.data);
}

/* eval's tensors: the shown step's files, loaded as the expression names them */
typedef struct eval_files {
    const dump *d;
    ts_array *loaded;
    int n;
} eval_files;

static ts_status dump_lookup(void *ctx, const char *name, ts_array *out) {
    eval_files *f = ctx;
    const row *r = find(f->d, name, f->d->cur);
    ts_array *grown = r ? realloc(f->loaded, (size_t)(f->n + 1) * sizeof *grown) : NULL;
    if (!grown) return TS_ERR_OUT_OF_MEMORY;
    f->loaded = grown;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", f->d->dir, r->file);
    ts_status st = ts_npy_load(path, &f->loaded[f->n]);
    if (st) return st;
    *out = f->loaded[f->n++];
    return TS_OK;
}

static void eval(const dump *d, const char *expr) {
    const char **names = malloc((d->n > 0 ? (size_t)d->n : 1) * sizeof *names);
    if (!names) {
        printf("error: out of memory\n");
        return;
    }
    size_t n = 0;
    for (int i = 0; i < d->n; i++)
        if (d->rows[i].step == d->cur) names[n++] = d->rows[i].name;
    eval_files f = {.d = d};
    ts_array a;
    cli_print_eval(expr, ts_eval(expr, names, n, dump_lookup, &f, &a), &a);
    for (int i = 0; i < f.n; i++) ts_npy_free(&f.loaded[i]);
    free(f.loaded);
    free(names);
}

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
    return s;
}

int cli_inspect_dump(const char *dir) {
    dump d = {.dir = dir};
    if (!load_index(dir, &d)) {
        free_dump(&d);
        return CLI_RUNTIME;
    }
    printf("debugger dump %s: %d files, steps", dir, d.n);
    for (int i = 0; i < d.n_steps; i++) printf(" %lld", d.steps[i]);
    printf("; showing step %lld; 'help' lists the commands\n", d.cur);
    fflush(stdout);
    for (;;) {
        char *line = cli_read_command();
        if (!line) {
            printf("\n");
            break;
        }
        char *cmd = trim(line), *arg = cmd + strcspn(cmd, " \t");
        if (*arg) *arg++ = 0;
        arg = trim(arg);
        bool quit = false;
        ts_array a;
        if (!*cmd) {
        } else if (strcmp(cmd, "help") == 0 || strcmp(cmd, "h") == 0 || strcmp(cmd, "?") == 0) {
            help(arg);
        } else if (strcmp(cmd, "list") == 0 || strcmp(cmd, "ls") == 0) {
            list(&d, arg);
        } else if (strcmp(cmd, "where") == 0) {
            if (!*arg) printf("error: where NAME: give a tensor name\n");
            else where(&d, arg);
        } else if (strcmp(cmd, "stats") == 0 || strcmp(cmd, "print") == 0 || strcmp(cmd, "p") == 0 || strcmp(cmd, "grad") == 0) {
            char target[1100];
            int len = snprintf(target, sizeof target, "%s%s", strcmp(cmd, "grad") == 0 ? "Gradient___" : "", arg);
            if (!*arg) printf("error: %s NAME: give a tensor name ('list' shows them)\n", cmd);
            else if (len < 0 || (size_t)len >= sizeof target) printf("error: %s: the name is too long\n", cmd);
            else if (values(&d, target, d.cur, &a)) {
                char label[1200];
                snprintf(label, sizeof label, "%s@%lld", target, d.cur);
                if (strcmp(cmd, "stats") == 0) cli_print_summary(label, &a);
                else cli_print_values(label, &a);
                free(a.data);
            }
        } else if (strcmp(cmd, "diff") == 0) {
            if (!*arg) printf("error: diff NAME [A [B]]: give a tensor name\n");
            else diff(&d, arg);
        } else if (strcmp(cmd, "save") == 0) {
            save(&d, arg);
        } else if (strcmp(cmd, "eval") == 0 || strcmp(cmd, "e") == 0) {
            if (!*arg) printf("error: eval EXPR: give an expression (eval fc1.weight.T @ x[0]; 'help eval')\n");
            else eval(&d, arg);
        } else if (strcmp(cmd, "rerun") == 0) {
            printf("error: rerun re-executes a run `train` holds (its inspector: --break-at-step N); a dump is files, with no model to run\n");
        } else if (strcmp(cmd, "steps") == 0) {
            say_steps(&d);
        } else if (strcmp(cmd, "step") == 0 || strcmp(cmd, "s") == 0) {
            long long k;
            if (!*arg) say_steps(&d);
            else if (!parse_step(arg, &k) || step_index(&d, k) < 0) {
                printf("error: step K: K is a dumped step, got '%s'; ", arg);
                say_steps(&d);
            } else {
                d.cur = k;
                printf("showing step %lld\n", k);
            }
        } else if (strcmp(cmd, "next") == 0 || strcmp(cmd, "n") == 0 || strcmp(cmd, "prev") == 0) {
            int i = step_index(&d, d.cur) + (strcmp(cmd, "prev") == 0 ? -1 : 1);
            if (i < 0 || i >= d.n_steps) printf("error: step %lld is the %s dumped step\n", d.cur, i < 0 ? "first" : "last");
            else printf("showing step %lld\n", d.cur = d.steps[i]);
        } else if (strcmp(cmd, "quit") == 0 || strcmp(cmd, "q") == 0 || strcmp(cmd, "exit") == 0 || strcmp(cmd, "continue") == 0 ||
                   strcmp(cmd, "c") == 0) {
            quit = true;
        } else {
            const char *names[N_COMMANDS];
            for (size_t i = 0; i < N_COMMANDS; i++) names[i] = commands[i].name;
            char near[256];
            printf("error: unknown command '%s'; closest: %s ('help' lists them)\n", cmd, ts_closest_words(cmd, names, N_COMMANDS, near, sizeof near));
        }
        fflush(stdout);
        free(line);
        if (quit) break;
    }
    free_dump(&d);
    return CLI_OK;
}
