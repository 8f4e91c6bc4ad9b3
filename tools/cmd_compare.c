/* cmd_compare.c -- `compare`: bad scores without a crash or a NaN
 * (docs/observation.md#comparing-against-a-reference). `compare` runs one forward (and backward) of a model on
 * given weights and inputs and compares every tensor a reference dump holds,
 * in topological order, naming the first divergence and whether its inputs
 * already differed; or compares two dumps, and with --rank ranks a
 * low-precision run's tensors by the precision they lost against its f32
 * twin (docs/observation.md#where-precision-is-lost). */
#include "cli.h"

#include <dirent.h>
#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ------------------------------------------------------------ named arrays */

/* Dumps (cli_dump in cli.h). */
typedef cli_dump dump;

/* A dump directory's order: lines `FILE<TAB>TENSOR NAME`, FILE.npy holding
 * TENSOR NAME (escaped by cli_file_safe). */
#define DUMP_ORDER "order.txt"

void cli_dump_free(dump *d) {
    ts_npz_free(d->z);
    for (size_t i = 0; d->names && i < d->n; i++) {
        free(d->names[i]);
        ts_npy_free(&d->arrays[i]);
    }
    free(d->names);
    free(d->arrays);
    memset(d, 0, sizeof *d);
}

size_t cli_dump_count(const dump *d) { return d->z ? ts_npz_count(d->z) : d->n; }
const char *cli_dump_name(const dump *d, size_t i) { return d->z ? ts_npz_name(d->z, i) : d->names[i]; }
const ts_array *cli_dump_array(const dump *d, size_t i) { return d->z ? ts_npz_array(d->z, i) : &d->arrays[i]; }
const ts_array *cli_dump_find(const dump *d, const char *name) {
    for (size_t i = 0; i < cli_dump_count(d); i++)
        if (strcmp(cli_dump_name(d, i), name) == 0) return cli_dump_array(d, i);
    return NULL;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int cli_dump_order_write(const char *dir, const char *const *names, size_t n) {
    char *path = cli_path(dir, DUMP_ORDER, ""), *tmp = cli_path(dir, DUMP_ORDER, ".tmp");
    FILE *f = path && tmp ? fopen(tmp, "w") : NULL;
    int rc = f ? CLI_OK : CLI_RUNTIME;
    for (size_t i = 0; f && i < n; i++) {
        char stem[512];
        cli_file_safe(names[i], stem, sizeof stem);
        char *npy = cli_path(dir, stem, ".npy");
        struct stat sb;
        if (npy && !strpbrk(names[i], "\t\n") && stat(npy, &sb) == 0) fprintf(f, "%s\t%s\n", stem, names[i]);
        free(npy);
    }
    if (f && (fclose(f) != 0 || rename(tmp, path) != 0)) rc = CLI_RUNTIME;
    if (rc) {
        if (tmp) remove(tmp);
        fprintf(stderr, "tensorscope: cannot write %s/%s (the order of the dumped arrays)\n", dir, DUMP_ORDER);
    }
    free(path), free(tmp);
    return rc;
}

/* Puts a directory's file stems (sorted) in DUMP_ORDER's order under the
 * tensor names it gives; stems it does not list follow, sorted. */
static ts_status apply_order(const char *dir, char **stems, size_t n, char **names, bool *ordered) {
    char *path = cli_path(dir, DUMP_ORDER, "");
    FILE *f = path ? fopen(path, "r") : NULL;
    free(path);
    bool *used = calloc(n + 1, sizeof *used);
    char **order = calloc(n + 1, sizeof *order);
    size_t k = 0;
    ts_status st = used && order ? TS_OK : TS_ERR_OUT_OF_MEMORY;
    char line[2048];
    while (!st && f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        char *tab = strchr(line, '\t');
        if (!tab) continue;
        *tab = '\0';
        char *key = line, **hit = bsearch(&key, stems, n, sizeof *stems, cmp_str);
        size_t j = hit ? (size_t)(hit - stems) : n;
        if (j == n || used[j]) continue;
        used[j] = true;
        order[k] = stems[j];
        if (!(names[k++] = strdup(tab + 1))) st = TS_ERR_OUT_OF_MEMORY;
    }
    if (f) fclose(f);
    *ordered = f != NULL;
    for (size_t j = 0; !st && j < n; j++)
        if (!used[j]) {
            order[k] = stems[j];
            if (!(names[k++] = strdup(stems[j]))) st = TS_ERR_OUT_OF_MEMORY;
        }
    if (!st) memcpy(stems, order, n * sizeof *stems);
    free(used);
    free(order);
    return st;
}

ts_status cli_dump_load(const char *path, dump *d) {
    memset(d, 0, sizeof *d);
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
        /* every array is compared: a member that cannot be read is an error here */
        ts_status st = ts_npz_load(path, &d->z);
        const ts_array *v;
        for (size_t i = 0; !st && i < ts_npz_count(d->z); i++) st = ts_npz_get(d->z, ts_npz_name(d->z, i), &v);
        if (st) cli_dump_free(d);
        d->ordered = !st;
        return st;
    }
    DIR *dir = opendir(path);
    if (!dir) {
        fprintf(stderr, "tensorscope: cannot open %s (an .npz file or a directory of .npy files)\n", path);
        return TS_ERR_IO;
    }
    size_t cap = 0, n = 0;
    char **stems = NULL;
    ts_status st = TS_OK;
    for (struct dirent *e; !st && (e = readdir(dir));) {
        size_t len = strlen(e->d_name);
        if (len <= 4 || strcmp(e->d_name + len - 4, ".npy") != 0) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **ns = realloc(stems, cap * sizeof *ns);
            if (!ns) {
                st = TS_ERR_OUT_OF_MEMORY;
                break;
            }
            stems = ns;
        }
        stems[n] = strndup(e->d_name, len - 4);
        n += stems[n] != NULL;
    }
    closedir(dir);
    if (!st) {
        qsort(stems, n, sizeof *stems, cmp_str);
        d->names = calloc(n + 1, sizeof *d->names);
        d->arrays = calloc(n + 1, sizeof *d->arrays);
        st = d->names && d->arrays ? apply_order(path, stems, n, d->names, &d->ordered) : TS_ERR_OUT_OF_MEMORY;
    }
    for (size_t i = 0; !st && i < n; i++) {
        char *p = cli_path(path, stems[i], ".npy");
        st = p ? ts_npy_load(p, &d->arrays[i]) : TS_ERR_OUT_OF_MEMORY;
        free(p);
        d->n = i + !st; /* free what was loaded */
    }
    for (size_t i = 0; i < n; i++) free(stems[i]);
    free(stems);
    if (st) {
        for (size_t i = d->n; d->names && i < n; i++) free(d->names[i]); /* names past the arrays loaded */
        cli_dump_free(d);
    }
    return st;
}

/* ------------------------------------------------------------- tolerances */

typedef struct tol_rule {
    const char *glob;
    double atol, rtol;
} tol_rule;

typedef struct compare_args {
    const char *model, *weights, *inputs, *reference, *map, *report, *plot, *a, *b;
    double atol, rtol, jump;
    bool grads, fail_fast, rank;
    cli_list tols;
    tol_rule rules[64];
    int n_rules;
    cli_list model_inputs; /* --input NAME:SHAPE */
    cli_list model_values; /* --input-value NAME=V,... */
    cli_import imp;        /* the model flags */
} compare_args;

/* The model flags, with the gpt's block size from the `tokens` it is fed
 * when no flag gives it. */
static cli_import model_import(const compare_args *a, const dump *inputs) {
    cli_import imp = a->imp;
    imp.inputs = &a->model_inputs, imp.values = &a->model_values;
    imp.arrays = true; /* labels from --inputs; forward only, a model needs no loss */
    const ts_array *tok = cli_dump_find(inputs, "tokens");
    if (!imp.block_size && !a->model_inputs.n && tok && tok->ndim == 2) imp.block_size = (long)tok->shape[1];
    return imp;
}

static void tol_for(const compare_args *a, const char *name, double *atol, double *rtol) {
    *atol = a->atol, *rtol = a->rtol;
    for (int i = 0; i < a->n_rules; i++) /* the last matching rule wins */
        if (fnmatch(a->rules[i].glob, name, 0) == 0) *atol = a->rules[i].atol, *rtol = a->rules[i].rtol;
}

/* NAME_GLOB:ATOL:RTOL (the glob may itself hold ':'; the numbers are last). */
static int parse_tol(compare_args *a, const char *spec) {
    const char *r = strrchr(spec, ':');
    const char *q = r && r > spec ? r - 1 : NULL;
    while (q && q > spec && *q != ':') q--;
    char *end1, *end2;
    if (!r || !q || *q != ':' || q == spec) return cli_usage_error("compare", "--tol wants NAME_GLOB:ATOL:RTOL, got '%s'", spec);
    double at = strtod(q + 1, &end1), rt = strtod(r + 1, &end2);
    if (end1 != r || *end2 || !(at >= 0) || !(rt >= 0) || isinf(at) || isinf(rt))
        return cli_usage_error("compare", "--tol '%s': ATOL and RTOL must be numbers >= 0", spec);
    char *glob = strndup(spec, (size_t)(q - spec));
    if (!glob) return cli_runtime_error("--tol");
    a->rules[a->n_rules++] = (tol_rule){glob, at, rt};
    return CLI_OK;
}

/* ---------------------------------------------------------------- results */

typedef enum { R_PASS, R_FAIL, R_SHAPE, R_MISSING, R_SKIP } row_status;

typedef struct row {
    const char *ref_name;  /* as in the reference */
    char *ts_name;         /* tensorscope's name (NULL: no counterpart) */
    long order;            /* topological position */
    row_status status;
    ts_compare_result r;
    double atol, rtol;
    char shape[96], ref_shape[96];
    char why[256];
} row;

static const char *status_word(row_status s) {
    return s == R_PASS ? "PASS" : s == R_FAIL ? "FAIL" : s == R_SHAPE ? "SHAPE" : s == R_SKIP ? "SKIPPED" : "NO-MATCH";
}

static void index_str(const ts_array *a, int64_t flat, char *buf, size_t n) {
    if (flat < 0) {
        snprintf(buf, n, "-");
        return;
    }
    int64_t idx[TS_MAX_DIMS];
    for (int i = a->ndim - 1; i >= 0; i--) {
        idx[i] = a->shape[i] ? flat % a->shape[i] : 0;
        flat = a->shape[i] ? flat / a->shape[i] : 0;
    }
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < a->ndim && k < n; i++) k += (size_t)snprintf(buf + k, n - k, i ? ",%lld" : "%lld", (long long)idx[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

static void compare_one(const compare_args *a, row *rw, const ts_array *mine, const ts_array *ref) {
    tol_for(a, rw->ts_name ? rw->ts_name : rw->ref_name, &rw->atol, &rw->rtol);
    ts_array_shape_str(ref, rw->ref_shape, sizeof rw->ref_shape);
    ts_array_shape_str(mine, rw->shape, sizeof rw->shape);
    ts_status st = ts_compare_arrays(mine, ref, rw->atol, rw->rtol, &rw->r);
    if (st) {
        rw->status = R_SHAPE;
        snprintf(rw->why, sizeof rw->why, "%s", ts_last_error());
        return;
    }
    rw->status = rw->r.pass ? R_PASS : R_FAIL;
    index_str(ref, rw->r.max_abs_index, rw->why, sizeof rw->why);
}

static void print_row(const row *rw) {
    if (rw->status == R_MISSING || rw->status == R_SHAPE || rw->status == R_SKIP) {
        printf("%-8s %-40s %s\n", status_word(rw->status), rw->ref_name, rw->why);
        return;
    }
    const ts_compare_result *r = &rw->r;
    double frac = r->count ? 100.0 * (double)r->mismatches / (double)r->count : 0;
    printf("%-8s %-32s %-14s max_abs %-9.3g at %-10s max_rel %-9.3g mismatched %6.2f%%  atol needed %.3g", status_word(rw->status),
           rw->ts_name, rw->shape, r->max_abs, rw->why, r->max_rel, frac, r->min_atol);
    if (strcmp(rw->ts_name, rw->ref_name) != 0) printf("  (reference '%s')", rw->ref_name);
    printf("\n         %-32s mean %11.5g / %-11.5g std %11.5g / %-11.5g min %11.5g / %-11.5g max %11.5g / %.5g\n", "  ours / reference:",
           r->a.mean, r->ref.mean, r->a.std, r->ref.std, r->a.min, r->ref.min, r->a.max, r->ref.max);
    int64_t nf_a = r->a.nans + r->a.pos_infs + r->a.neg_infs, nf_r = r->ref.nans + r->ref.pos_infs + r->ref.neg_infs;
    if (nf_a || nf_r)
        printf("         non-finite: ours %lld NaN %lld +Inf %lld -Inf, reference %lld NaN %lld +Inf %lld -Inf\n", (long long)r->a.nans,
               (long long)r->a.pos_infs, (long long)r->a.neg_infs, (long long)r->ref.nans, (long long)r->ref.pos_infs,
               (long long)r->ref.neg_infs);
}

/* JSON string body with escapes. */
static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void json_num(FILE *f, double v) {
    if (isnan(v)) fputs("\"NaN\"", f);
    else if (isinf(v)) fputs(v > 0 ? "\"Infinity\"" : "\"-Infinity\"", f);
    else fprintf(f, "%.9g", v);
}

static void json_stats(FILE *f, const char *key, const ts_stats *s) {
    fprintf(f, "\"%s\": {\"mean\": ", key);
    json_num(f, s->mean);
    fputs(", \"std\": ", f);
    json_num(f, s->std);
    fputs(", \"min\": ", f);
    json_num(f, s->min);
    fputs(", \"max\": ", f);
    json_num(f, s->max);
    fprintf(f, ", \"nans\": %lld, \"pos_infs\": %lld, \"neg_infs\": %lld}", (long long)s->nans, (long long)s->pos_infs,
            (long long)s->neg_infs);
}

static int write_report(const char *path, const row *rows, int n, const char *first, const char *first_detail,
                        const char *const *unreferenced, int n_unref) {
    if (!*path) return cli_usage_error("compare", "--report needs a file name");
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "tensorscope compare: cannot write %s\n", path);
        return CLI_RUNTIME;
    }
    fputs("{\n  \"tensors\": [\n", f);
    for (int i = 0; i < n; i++) {
        const row *rw = &rows[i];
        fputs("    {\"name\": ", f);
        json_str(f, rw->ts_name ? rw->ts_name : "");
        fputs(", \"reference\": ", f);
        json_str(f, rw->ref_name);
        fprintf(f, ", \"status\": \"%s\"", status_word(rw->status));
        if (rw->status == R_PASS || rw->status == R_FAIL) {
            fputs(", \"shape\": ", f);
            json_str(f, rw->shape);
            fputs(", \"max_abs\": ", f);
            json_num(f, rw->r.max_abs);
            fputs(", \"max_abs_index\": ", f);
            json_str(f, rw->why);
            fputs(", \"max_rel\": ", f);
            json_num(f, rw->r.max_rel);
            fputs(", \"rel_error\": ", f);
            json_num(f, rw->r.rel_error);
            fprintf(f, ", \"mismatched\": %lld, \"count\": %lld, \"atol\": ", (long long)rw->r.mismatches, (long long)rw->r.count);
            json_num(f, rw->atol);
            fputs(", \"rtol\": ", f);
            json_num(f, rw->rtol);
            fputs(", \"atol_needed\": ", f);
            json_num(f, rw->r.min_atol);
            fputs(", ", f);
            json_stats(f, "ours", &rw->r.a);
            fputs(", ", f);
            json_stats(f, "reference_stats", &rw->r.ref);
        } else {
            fputs(", \"error\": ", f);
            json_str(f, rw->why);
        }
        fprintf(f, "}%s\n", i + 1 < n ? "," : "");
    }
    fputs("  ],\n  \"first_divergence\": ", f);
    if (first) {
        fputs("{\"name\": ", f);
        json_str(f, first);
        fputs(", \"detail\": ", f);
        json_str(f, first_detail);
        fputs("}", f);
    } else fputs("null", f);
    fputs(",\n  \"unreferenced\": [", f);
    for (int i = 0; i < n_unref; i++) {
        if (i) fputs(", ", f);
        json_str(f, unreferenced[i]);
    }
    fputs("]\n}\n", f);
    if (fclose(f) != 0) {
        fprintf(stderr, "tensorscope compare: writing %s failed\n", path);
        return CLI_RUNTIME;
    }
    return CLI_OK;
}

static int write_plot(const char *path, const row *rows, int n, int first_fail) {
    double *x = calloc((size_t)n + 1, sizeof *x), *y = calloc((size_t)n + 1, sizeof *y);
    const char **labels = calloc((size_t)n + 1, sizeof *labels);
    double *tol = calloc((size_t)n + 1, sizeof *tol);
    int *pass = calloc((size_t)n + 1, sizeof *pass);
    int k = 0, mark = -1;
    for (int i = 0; x && y && labels && tol && pass && i < n; i++) {
        if (rows[i].status != R_PASS && rows[i].status != R_FAIL) continue;
        if (i == first_fail) mark = k;
        x[k] = k;
        y[k] = rows[i].r.max_rel;
        /* the rule's relative bound for the largest reference value */
        double big = fmax(fabs(rows[i].r.ref.min), fabs(rows[i].r.ref.max));
        tol[k] = rows[i].rtol + (big > 0 ? rows[i].atol / big : 0);
        pass[k] = rows[i].status == R_PASS;
        labels[k++] = rows[i].ts_name;
    }
    ts_status st = x && y && labels && tol && pass ? ts_plot_errors(path, labels, y, tol, pass, k, mark) : TS_ERR_OUT_OF_MEMORY;
    free(x), free(y), free(labels), free(tol), free(pass);
    return st ? cli_runtime_error("--plot") : CLI_OK;
}

/* ------------------------------------------ precision ranking (--rank) */

/* Where a low-precision run loses precision against its f32 twin: each
 * tensor in both dumps, its relative error ||a - b|| / ||b||, values in
 * graph order, gradients apart in backward order, and the first tensor of
 * each whose error jumps (ts_compare_first_jump). */
typedef enum { G_VALUES, G_GRADIENTS, G_STATE, G_COUNT } group_kind;

static const char *const GROUP_TITLE[G_COUNT] = {"values, in graph order", "gradients, in backward order (the recorded order reversed)",
                                                 "optimizer state, in recorded order"};
static const char *const GROUP_WHERE[G_COUNT] = {"", "in the backward, ", "in the optimizer state, "};

static group_kind group_of(const char *name) {
    if (strncmp(name, "Gradient___", 11) == 0) return G_GRADIENTS;
    return strstr(name, "___") ? G_STATE : G_VALUES; /* Accum___, UpdatedVar___, ... */
}

typedef struct rank_group {
    const row **rows; /* the group's tensors in its order, and their figures */
    double *err, *bar;
    int *rank;
    int n, jump;
    double median;
} rank_group;

static void print_group(const rank_group *g, group_kind k) {
    printf("\n%s:\n  %4s  %-10s %-10s %s\n", GROUP_TITLE[k], "rank", "rel.error", "max abs", "tensor");
    for (int i = 0; i < g->n; i++)
        printf("  %4d  %-10.3g %-10.3g %s%s\n", g->rank[i], g->err[i], g->rows[i]->r.max_abs, g->rows[i]->ts_name,
               i == g->jump ? "   <- precision first lost here" : "");
}

static void print_verdict(const rank_group *g, group_kind k) {
    if (!g->n) return;
    int top = 0;
    for (int i = 1; i < g->n; i++)
        if (g->rank[i] < g->rank[top]) top = i;
    if (g->err[top] == 0) printf("%severy tensor agrees exactly\n", GROUP_WHERE[k]);
    else if (g->jump < 0) /* the optimizer state is no chain of computations: no jump there */
        printf("%s%s %.2e at '%s'\n", GROUP_WHERE[k], k == G_STATE ? "the largest error:" : "no tensor's error jumps; the largest:",
               g->err[top], g->rows[top]->ts_name);
    if (g->jump < 0) return;
    printf("%sprecision is first lost at '%s' (rel. error %.2e, ", GROUP_WHERE[k], g->rows[g->jump]->ts_name, g->err[g->jump]);
    if (g->jump == 0) printf("the first tensor)\n");
    else if (g->median == 0) printf("the %d tensor%s before it agree%s exactly)\n", g->jump, g->jump == 1 ? "" : "s", g->jump == 1 ? "s" : "");
    else printf("%.0fx the median of the %d tensor%s before it)\n", g->err[g->jump] / g->median, g->jump, g->jump == 1 ? "" : "s");
}

static int rank_plot(const char *path, rank_group *groups) {
    int n = 0, mark = -1;
    for (int k = 0; k < G_COUNT; k++) n += groups[k].n;
    const char **names = calloc((size_t)n + 1, sizeof *names);
    double *err = calloc((size_t)n + 1, sizeof *err), *bar = calloc((size_t)n + 1, sizeof *bar);
    int at = 0;
    for (int k = 0; names && err && bar && k < G_COUNT; k++)
        for (int i = 0; i < groups[k].n; i++, at++) {
            if (mark < 0 && i == groups[k].jump) mark = at;
            names[at] = groups[k].rows[i]->ts_name, err[at] = groups[k].err[i], bar[at] = groups[k].bar[i];
        }
    ts_status st = names && err && bar ? ts_plot_precision(path, names, err, bar, n, mark) : TS_ERR_OUT_OF_MEMORY;
    free(names), free(err), free(bar);
    if (st) return cli_runtime_error("--plot");
    printf("Saved plot to %s\n", path);
    return CLI_OK;
}

static int rank_print(const char *plot, double factor, rank_group *groups, int both, const char *order_note, const char *const *only_a,
                      int n_only_a, const char *const *only_b, int n_only_b) {
    printf("compare --rank: %d tensors in both dumps, %s; relative error ||a - b|| / ||b||; precision is first lost where a tensor's "
           "error exceeds %gx the median of those before it (and %g)\n", both, order_note, factor, TS_JUMP_FLOOR);
    const char *const *only[2] = {only_a, only_b};
    int n_only[2] = {n_only_a, n_only_b};
    for (int s = 0; s < 2; s++) {
        if (!n_only[s]) continue;
        printf("%d only in --%c (not ranked):", n_only[s], s ? 'b' : 'a');
        for (int i = 0; i < n_only[s] && i < 12; i++) printf(" %s", only[s][i]);
        printf("%s\n", n_only[s] > 12 ? " ..." : "");
    }
    for (int k = 0; k < G_COUNT; k++) {
        rank_group *g = &groups[k];
        if (k == G_GRADIENTS) /* recorded beside their values: the backward computes them in reverse */
            for (int i = 0; i < g->n / 2; i++) {
                const row *t = g->rows[i];
                g->rows[i] = g->rows[g->n - 1 - i], g->rows[g->n - 1 - i] = t;
            }
        for (int i = 0; i < g->n; i++) g->err[i] = g->rows[i]->r.rel_error;
        if (ts_compare_first_jump(g->err, g->n, factor, TS_JUMP_FLOOR, &g->jump, &g->median, g->bar)) return cli_runtime_error("--rank");
        if (k == G_STATE) g->jump = -1;
        for (int i = 0; i < g->n; i++) { /* 1: the largest error; NaN as the largest */
            g->rank[i] = 1;
            double e = isnan(g->err[i]) ? INFINITY : g->err[i];
            for (int j = 0; j < g->n; j++) {
                double f = isnan(g->err[j]) ? INFINITY : g->err[j];
                g->rank[i] += f > e || (f == e && j < i);
            }
        }
        if (g->n) print_group(g, (group_kind)k);
    }
    printf("\n");
    for (int k = 0; k < G_COUNT; k++) {
        const rank_group *g = &groups[k];
        if (!g->n) continue;
        printf("ranked by relative error (%s):", k == G_VALUES ? "values" : k == G_GRADIENTS ? "gradients" : "optimizer state");
        for (int r = 1; r <= 5 && r <= g->n; r++)
            for (int i = 0; i < g->n; i++)
                if (g->rank[i] == r) printf("%s %s %.2e", r > 1 ? "," : "", g->rows[i]->ts_name, g->err[i]);
        printf("%s\n", g->n > 5 ? ", ..." : "");
    }
    for (int k = 0; k < G_COUNT; k++) print_verdict(&groups[k], (group_kind)k);
    return plot ? rank_plot(plot, groups) : CLI_OK;
}

/* rows: the tensors of `order`'s dump in its order, compared (a against b);
 * only_a/only_b: names in one dump only. */
static int rank_report(const char *plot, double factor, const row *rows, int n_rows, const char *order_note, const char *const *only_a,
                       int n_only_a, const char *const *only_b, int n_only_b) {
    rank_group groups[G_COUNT] = {0};
    int rc = CLI_OK, both = 0, problems = 0;
    for (int k = 0; k < G_COUNT; k++) {
        rank_group *g = &groups[k];
        g->rows = calloc((size_t)n_rows + 1, sizeof *g->rows), g->rank = calloc((size_t)n_rows + 1, sizeof *g->rank);
        g->err = calloc((size_t)n_rows + 1, sizeof *g->err), g->bar = calloc((size_t)n_rows + 1, sizeof *g->bar);
        if (!g->rows || !g->rank || !g->err || !g->bar) rc = cli_runtime_error("out of memory");
    }
    for (int i = 0; !rc && i < n_rows; i++) {
        const row *rw = &rows[i];
        if (rw->status == R_MISSING) continue;
        both++;
        if (rw->status == R_SHAPE) {
            printf("SHAPE    %-40s %s\n", rw->ref_name, rw->why);
            problems++;
            continue;
        }
        rank_group *g = &groups[group_of(rw->ts_name)];
        g->rows[g->n++] = rw;
    }
    if (!rc && !both) rc = cli_usage_error("compare", "--rank: no tensor name is in both dumps (are they dumps of the same model?)");
    if (!rc) rc = rank_print(plot, factor, groups, both, order_note, only_a, n_only_a, only_b, n_only_b);
    for (int k = 0; k < G_COUNT; k++) free(groups[k].rows), free(groups[k].rank), free(groups[k].err), free(groups[k].bar);
    return rc ? rc : problems ? CLI_RUNTIME : CLI_OK;
}

/* ---------------------------------------------------------- the verdict */

static const row *find_row(const row *rows, int n, const char *ts_name) {
    for (int i = 0; i < n; i++)
        if (rows[i].ts_name && strcmp(rows[i].ts_name, ts_name) == 0) return &rows[i];
    return NULL;
}

/* What `name`'s computation read, as far as the reference can tell: a
 * value's op inputs, looking through intermediates the reference does not
 * hold (fc2/MatMul:0 on the way to fc2/Add:0) down to referenced tensors,
 * parameters and inputs; for a gradient, the gradients of the value's
 * consumers and the value itself. */
typedef struct source_list {
    char name[TS_MAX_DIMS * 4][512];
    int n;
} source_list;

static void add_source(source_list *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->name[i], name) == 0) return;
    if (s->n < (int)(sizeof s->name / sizeof s->name[0]) && strlen(name) < sizeof s->name[0]) strcpy(s->name[s->n++], name);
}

static void value_sources(ts_graph *g, cli_held_fn held, void *ctx, ts_tensor *t, source_list *s, int depth) {
    for (int j = 0; j < ts_tensor_input_count(t); j++) {
        ts_tensor *in = ts_tensor_input(t, j);
        const char *op = ts_tensor_op(in);
        if (depth < 8 && held(ctx, ts_tensor_name(in), NULL) < 0 && strcmp(op, "Param") != 0 && strcmp(op, "Input") != 0)
            value_sources(g, held, ctx, in, s, depth + 1);
        else add_source(s, ts_tensor_name(in));
    }
}

static void sources(ts_graph *g, cli_held_fn held, void *ctx, const char *name, source_list *s) {
    s->n = 0;
    if (strncmp(name, "Gradient___", 11) == 0) {
        ts_tensor *t = ts_graph_find(g, name + 11);
        char buf[600];
        for (size_t i = 0; t && i < ts_graph_tensor_count(g); i++) {
            ts_tensor *c = ts_graph_tensor_at(g, i);
            for (int j = 0; j < ts_tensor_input_count(c); j++)
                if (ts_tensor_input(c, j) == t) {
                    snprintf(buf, sizeof buf, "Gradient___%s", ts_tensor_name(c));
                    add_source(s, buf);
                    break;
                }
        }
        if (t) add_source(s, name + 11);
        return;
    }
    ts_tensor *t = ts_graph_find(g, name);
    if (t) value_sources(g, held, ctx, t, s, 0);
}

/* The tensor a gradient's name is of (Gradient___fc1.weight -> fc1.weight);
 * any other name itself. */
static const char *value_name(const char *name) { return strncmp(name, "Gradient___", 11) == 0 ? name + 11 : name; }

void cli_explain(ts_graph *g, const char *name, cli_held_fn held, void *ctx, char *detail, size_t dn) {
    const char *base = value_name(name);
    ts_tensor *t = g ? ts_graph_find(g, base) : NULL;
    char loc[512] = "";
    size_t k = 0;
    detail[0] = '\0';
    if (t) {
        ts_tensor_location(t, loc, sizeof loc);
        k += (size_t)snprintf(detail + k, dn - k, "op %s%s%s%s", ts_tensor_op(t), name != base ? " (its backward)" : "",
                              *loc ? " built at " : "", loc);
    }
    if (!g) {
        snprintf(detail, dn, "two dumps: no graph to say what it was computed from");
        return;
    }
    static source_list src;
    sources(g, held, ctx, name, &src);
    int differ = 0, unknown = 0;
    const char *first_bad = NULL;
    char unchecked[1024] = "";
    size_t u = 0;
    for (int i = 0; i < src.n && k < dn; i++) {
        const char *word = NULL;
        int h = held(ctx, src.name[i], &word);
        if (!word) word = h < 0 ? "not in the reference" : h == 0 ? "matches" : "differs";
        if (h < 0) {
            unknown++;
            if (u < sizeof unchecked) u += (size_t)snprintf(unchecked + u, sizeof unchecked - u, "%s%s", u ? ", " : "", src.name[i]);
        } else if (h > 0) {
            differ++;
            if (!first_bad) first_bad = src.name[i];
        }
        k += (size_t)snprintf(detail + k, dn - k, "%s%s %s", i ? "; " : "; computed from: ", src.name[i], word);
    }
    if (k >= dn) return;
    if (differ) snprintf(detail + k, dn - k, ". An input already differs (%s): look upstream", first_bad);
    else if (src.n && !unknown) snprintf(detail + k, dn - k, ". Inputs match, output differs: the op itself differs");
    else if (src.n && unknown < src.n)
        snprintf(detail + k, dn - k, ". Inputs match, output differs: the op itself differs, or what the reference does not hold (%s)",
                 unchecked);
    else if (src.n) snprintf(detail + k, dn - k, ". None of its inputs is in the reference: cannot say more");
    else snprintf(detail + k, dn - k, ". It has no inputs: the value itself differs (weights or data)");
}

/* compare's rows as cli_explain sees them: PASS matches. */
typedef struct rows_view {
    const row *rows;
    int n;
} rows_view;

static int row_state(void *ctx, const char *name, const char **word) {
    const rows_view *v = ctx;
    const row *r = find_row(v->rows, v->n, name);
    (void)word;
    return !r ? -1 : r->status == R_PASS ? 0 : 1;
}

static void explain(ts_graph *g, const row *rows, int n, const row *bad, char *detail, size_t dn) {
    rows_view v = {rows, n};
    cli_explain(g, bad->ts_name, row_state, &v, detail, dn);
}

/* ------------------------------------------------- model side of the run */

/* Whether scope (of length sl) is `base` or inside it (`base.` prefix). */
static bool in_module(const char *scope, size_t sl, const char *base, size_t len) {
    return sl >= len && strncmp(scope, base, len) == 0 && (sl == len || scope[len] == '.');
}

/* The length of a scope's occurrence of module `base` (len characters):
 * `base` itself or an exporter's numbered twin `base_N` (the second call
 * of a module, `relu_1`), nested scopes below either included; 0 if the
 * scope is neither. */
static size_t occurrence_len(const char *scope, size_t sl, const char *base, size_t len) {
    if (sl < len || strncmp(scope, base, len) != 0) return 0;
    size_t e = len;
    if (e < sl && scope[e] == '_') {
        size_t d = e + 1;
        while (d < sl && scope[d] >= '0' && scope[d] <= '9') d++;
        if (d > e + 1) e = d;
    }
    return e == sl || scope[e] == '.' ? e : 0;
}

/* The k-th call of module `base`: the last op output of the k-th
 * occurrence of the module in graph order, as a reference dump names it
 * (`base#k`, the first call `base`); NULL if the model has fewer. An
 * occurrence is a run of op outputs inside `base` or inside an
 * exporter's numbered twin of it (`relu`, `relu_1`, ...: the TorchScript
 * exporter's scopes of successive calls) that no op output of another
 * module interrupts (the dynamo exporter scopes every call `relu`). */
static const char *kth_call(ts_graph *g, const char *base, size_t len, long k) {
    const char *cur = NULL, *last = NULL;
    size_t cur_len = 0;
    long seen = 0;
    bool left = false; /* an op output outside the occurrence came since */
    for (size_t i = 0; i < ts_graph_tensor_count(g); i++) {
        const char *nm = ts_tensor_name(ts_graph_tensor_at(g, i)), *slash = strrchr(nm, '/');
        size_t e = slash ? occurrence_len(nm, (size_t)(slash - nm), base, len) : 0;
        if (!e) {
            left = left || slash;
            continue;
        }
        if (!cur || left || e != cur_len || strncmp(nm, cur, e) != 0) { /* a new occurrence */
            if (seen == k) break;
            seen++, cur = nm, cur_len = e;
        }
        left = false;
        last = nm;
    }
    return seen == k ? last : NULL;
}

/* Reference names map to tensorscope names: --map pairs first, then the
 * exact name, then a module path: the last op output built inside that
 * module (`fc1` -> `fc1/Add:0`; `h.0.attn` -> its c_proj's output, the
 * module's result), or inside the one module whose scope ends with it,
 * with `Gradient___` carried over. `PATH#k` (a module's k-th call in a
 * reference dump) is the k-th occurrence of the module in graph order,
 * and `PATH` of a module called more than once its first. */
static char *resolve_name(ts_graph *g, const char *ref, char *const *map, int n_map) {
    for (int i = 0; i + 1 < n_map; i += 2)
        if (strcmp(map[i], ref) == 0) return strdup(map[i + 1]);
    const char *base = value_name(ref);
    bool grad = base != ref;
    if (ts_graph_find(g, base)) return strdup(ref);
    size_t len = strlen(base);
    const char *hash = strrchr(base, '#');
    char *k_end = NULL;
    long k = hash ? strtol(hash + 1, &k_end, 10) : 0;
    bool kth = hash && k_end && !*k_end && k_end > hash + 1 && k >= 2;
    if (kth || (!hash && kth_call(g, base, len, 2))) { /* a call of a module called more than once */
        const char *nm = kth ? kth_call(g, base, (size_t)(hash - base), k) : kth_call(g, base, len, 1);
        size_t n = nm ? strlen(nm) + 12 : 0;
        char *s = nm ? malloc(n) : NULL;
        if (s) snprintf(s, n, "%s%s", grad ? "Gradient___" : "", nm);
        return s;
    }
    const char *inside = NULL, *suffix = NULL;
    size_t suffix_end = 0;
    bool ambiguous = false;
    for (size_t i = 0; i < ts_graph_tensor_count(g); i++) {
        const char *nm = ts_tensor_name(ts_graph_tensor_at(g, i));
        const char *slash = strrchr(nm, '/');
        if (!slash) continue;
        size_t sl = (size_t)(slash - nm);
        if (in_module(nm, sl, base, len)) {
            inside = nm;
            continue;
        }
        /* `.base` ending a component of the scope: a module nested under
         * a prefix the reference does not name */
        for (const char *q = nm; q && q < slash; q = memchr(q + 1, '.', (size_t)(slash - q - 1))) {
            if (*q != '.' || !in_module(q + 1, (size_t)(slash - q - 1), base, len)) continue;
            size_t end = (size_t)(q + 1 - nm) + len;
            if (suffix && (suffix_end != end || strncmp(suffix, nm, end) != 0)) ambiguous = true;
            suffix = nm, suffix_end = end;
            break;
        }
    }
    const char *last = inside ? inside : ambiguous ? NULL : suffix;
    if (!last) return NULL;
    size_t n = strlen(last) + 12;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s%s", grad ? "Gradient___" : "", last);
    return s;
}

static long topo_position(ts_graph *g, const char *name) {
    bool grad = strncmp(name, "Gradient___", 11) == 0;
    const char *base = grad ? name + 11 : name;
    long n = (long)ts_graph_tensor_count(g);
    for (long i = 0; i < n; i++)
        if (strcmp(ts_tensor_name(ts_graph_tensor_at(g, (size_t)i)), base) == 0) return grad ? 2 * n - i : i;
    return 3 * n;
}

static int cmp_rows(const void *a, const void *b) {
    const row *x = a, *y = b;
    return (x->order > y->order) - (x->order < y->order);
}

/* Reads the --map file: lines `REFERENCE_NAME TENSORSCOPE_NAME`. */
static int read_map(const char *path, char ***out, int *n) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "tensorscope compare: cannot open --map %s\n", path);
        return CLI_RUNTIME;
    }
    char line[2048];
    int cap = 0, lineno = 0;
    *out = NULL, *n = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char a[1024], b[1024];
        if (line[0] == '#' || strspn(line, " \t\r\n") == strlen(line)) continue;
        if (sscanf(line, "%1023s %1023s", a, b) != 2) {
            fclose(f);
            return cli_usage_error("compare", "--map %s line %d: want 'REFERENCE_NAME TENSORSCOPE_NAME'", path, lineno);
        }
        if (*n + 2 > cap) {
            cap = cap ? 2 * cap : 32;
            char **nn = realloc(*out, (size_t)cap * sizeof *nn);
            if (!nn) break;
            *out = nn;
        }
        (*out)[(*n)++] = strdup(a);
        (*out)[(*n)++] = strdup(b);
    }
    fclose(f);
    return CLI_OK;
}

/* Converts a NumPy array to what an input of `dtype` takes (f32 or i32);
 * for i32 every value must be an integer within int32, else
 * TS_ERR_INVALID_ARGUMENT with the first other one at *bad, its value *bad_v.
 * An i64 input takes integer arrays as they are, and a bool input every
 * array (the run converts them exactly, naming a value it does not hold). */
static ts_status convert_input(const ts_array *src, ts_dtype dtype, ts_array *dst, void **buf, int64_t *bad, double *bad_v) {
    int64_t n = ts_array_numel(src);
    *dst = *src;
    *buf = NULL;
    if (src->dtype == dtype || dtype == TS_BOOL || (dtype == TS_I64 && src->dtype != TS_F32 && src->dtype != TS_F64)) return TS_OK;
    void *b = malloc((size_t)(n ? n : 1) * ts_dtype_size(dtype));
    if (!b) return TS_ERR_OUT_OF_MEMORY;
    for (int64_t i = 0; i < n; i++) {
        double v;
        switch (src->dtype) {
        case TS_F32: v = ((const float *)src->data)[i]; break;
        case TS_F64: v = ((const double *)src->data)[i]; break;
        case TS_I32: v = ((const int32_t *)src->data)[i]; break;
        case TS_I64: v = (double)((const int64_t *)src->data)[i]; break;
        default: v = ((const uint8_t *)src->data)[i]; break;
        }
        bool fits = dtype == TS_I32 ? v >= INT32_MIN && v <= INT32_MAX : v >= -9223372036854775808.0 && v < 9223372036854775808.0;
        if (dtype != TS_F32 && !(v == floor(v) && fits)) { /* ids and labels are never wrapped */
            free(b);
            *bad = i, *bad_v = v;
            return TS_ERR_INVALID_ARGUMENT;
        }
        if (dtype == TS_F32) ((float *)b)[i] = (float)v;
        else if (dtype == TS_I64) ((int64_t *)b)[i] = (int64_t)v;
        else ((int32_t *)b)[i] = (int32_t)v;
    }
    dst->dtype = dtype;
    dst->data = b;
    *buf = b;
    return TS_OK;
}

/* What --weights did not pair with the model by name: a reference's
 * weights against an export that fused some parameters away (a BatchNorm
 * into its Conv) or holds folded values under names of its own. Counted,
 * with the first few names, for the note under the header. */
typedef struct weights_note {
    size_t loaded;
    char **names[2]; /* TS_WEIGHT_MISSING - 1: the model's the file lacks; TS_WEIGHT_UNEXPECTED - 1: the file's the model lacks */
    int n[2];
    bool oom;
} weights_note;

static void note_skipped(void *ctx, const char *name, ts_weight_skip why) {
    weights_note *w = ctx;
    int k = why == TS_WEIGHT_MISSING ? 0 : 1;
    char **l = realloc(w->names[k], (size_t)(w->n[k] + 1) * sizeof *l);
    if (l) w->names[k] = l;
    if (!l || !(l[w->n[k]] = strdup(name))) {
        w->oom = true;
        return;
    }
    w->n[k]++;
}

static void weights_note_free(weights_note *w) {
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < w->n[k]; i++) free(w->names[k][i]);
        free(w->names[k]);
    }
}

/* The parameter of --weights the model does not have that a reference
 * tensor without a counterpart stands for (`base`, len characters, without
 * Gradient___ and #k): its gradient (Gradient___lstm.weight_ih_l0), or the
 * output of the module that owns it (an embedding of the positions,
 * folded by the exporter into a constant). NULL if none. */
static const char *folded_param(const weights_note *w, const char *base, size_t len) {
    for (int i = 0; i < w->n[1]; i++) {
        const char *p = w->names[1][i];
        if (strncmp(p, base, len) == 0 && (p[len] == '\0' || p[len] == '.')) return p;
    }
    return NULL;
}

/* "(a, b, c, ...)": the first three of n names. */
static void print_first_names(char *const *names, int n) {
    printf(" (");
    for (int i = 0; i < n && i < 3; i++) printf("%s%s", i ? ", " : "", names[i]);
    printf("%s)", n > 3 ? ", ..." : "");
}

static void print_weights_note(const char *path, const weights_note *w) {
    printf("weights: %zu parameters set from %s", w->loaded, path);
    if (w->n[0]) {
        printf("; %d of the model's %s not there and keep%s the file's values", w->n[0], w->n[0] == 1 ? "is" : "are", w->n[0] == 1 ? "s" : "");
        print_first_names(w->names[0], w->n[0]);
    }
    if (w->n[1]) {
        printf("; %d %s no parameter of the model, skipped (an exporter fused or folded %s, or they are another model's)", w->n[1],
               w->n[1] == 1 ? "is" : "are", w->n[1] == 1 ? "it" : "them");
        print_first_names(w->names[1], w->n[1]);
    }
    printf("\n");
}

/* The op of the model that reads a parameter of module `base` (len
 * characters) from outside that module: the module's op fused into
 * another's (a Conv scoped by the BatchNorm the exporter fused into it);
 * NULL if none. */
static const char *fused_reader(ts_graph *g, const char *base, size_t len) {
    size_t n = ts_graph_tensor_count(g);
    for (size_t i = 0; i < n; i++) {
        ts_tensor *p = ts_graph_tensor_at(g, i);
        const char *pn = ts_tensor_name(p);
        if (strcmp(ts_tensor_op(p), "Param") != 0 || strncmp(pn, base, len) != 0 || pn[len] != '.') continue;
        for (size_t j = 0; j < n; j++) {
            ts_tensor *t = ts_graph_tensor_at(g, j);
            const char *nm = ts_tensor_name(t), *slash = strrchr(nm, '/');
            for (int k = 0; slash && k < ts_tensor_input_count(t); k++)
                if (ts_tensor_input(t, k) == p && !in_module(nm, (size_t)(slash - nm), base, len)) return nm;
        }
    }
    return NULL;
}

/* A reference tensor that has no counterpart because the exporter left
 * it out of the file, skipped with why: the gradient of a parameter it
 * folded (Gradient___lstm.weight_ih_l0, the gates reordered into a
 * constant of the file's own), the output of a module whose parameter it
 * folded (an embedding of the positions, a constant), or of a module
 * whose op it fused into the next module's (a Conv and its BatchNorm:
 * that op is compared as the BatchNorm's output). Otherwise left as it is. */
static void gone_by_export(ts_graph *g, const weights_note *wn, row *rw) {
    const char *base = value_name(rw->ref_name);
    size_t len = strcspn(base, "#");
    const char *fused = fused_reader(g, base, len), *p = fused ? NULL : folded_param(wn, base, len);
    if (p && strcmp(p, base) == 0)
        snprintf(rw->why, sizeof rw->why, "the model does not have this parameter: the exporter folded or fused it");
    else if (p)
        snprintf(rw->why, sizeof rw->why, "the model does not have this module's parameter '%s': the exporter folded it into a constant", p);
    else if (fused)
        snprintf(rw->why, sizeof rw->why, "no output of its own in the model: the exporter fused this module's op with the next module's, "
                 "compared as '%s'", fused);
    else
        return;
    rw->status = R_SKIP;
}

/* The run's batch: dim 0 of the first array of the inputs that has dims;
 * 1 where none has (a model of scalar inputs, or of none). */
static long batch_of(dump *inputs) {
    for (size_t i = 0; i < cli_dump_count(inputs); i++) {
        const ts_array *v = cli_dump_array(inputs, i);
        if (v && v->ndim >= 1) return (long)v->shape[0];
    }
    return 1;
}

/* Runs the model once on the inputs with every resolved row anchored;
 * fills each row's comparison. */
static int run_model(const compare_args *a, dump *inputs, dump *ref, row *rows, int n_rows, cli_model *cm, ts_model **mp, weights_note *wn) {
    long batch = batch_of(inputs);
    if (batch < 1) return cli_usage_error("compare", "--inputs %s: the batch (dim 0 of its first array that has dims) is empty", a->inputs);
    cli_import imp = model_import(a, inputs);
    ts_status st = cli_model_open(a->model, batch, 0, NULL, &imp, cm);
    if (cm->unknown) return cli_unknown_model("compare", a->model);
    if (st) return cm->error[0] ? cli_usage_error("compare", "%s", cm->error) : cli_runtime_error("building the model");
    if (a->weights && ts_graph_load_weights_matching(cm->g, a->weights, note_skipped, wn, &wn->loaded))
        return cli_runtime_error("loading --weights");
    if (wn->oom) return cli_runtime_error("out of memory");
    for (int i = 0; i < n_rows; i++)
        if (!rows[i].ts_name && rows[i].status == R_MISSING) gone_by_export(cm->g, wn, &rows[i]);
    /* forward only: the model's outputs, and the loss when it has one and its labels are given */
    bool labels_given = cm->labels && cli_dump_find(inputs, ts_tensor_name(cm->labels));
    bool with_loss = cm->loss && (!cm->labels || labels_given);
    if (a->grads && !cm->loss)
        return cli_usage_error("compare", "--grads: %s gives no loss to differentiate: give --loss mse (and an array 'labels' of the "
                               "output's shape in --inputs), --loss cross_entropy|nll for scores, or --labels-input NAME for a file "
                               "that computes its own loss", a->model);
    if (a->grads && !with_loss)
        return cli_usage_error("compare", "--grads: --inputs %s has no array '%s' (the loss's labels)", a->inputs, ts_tensor_name(cm->labels));
    for (int i = 0; cm->loss && !with_loss && i < n_rows; i++)
        if (rows[i].ts_name && ts_graph_find(cm->g, rows[i].ts_name) == cm->loss) {
            free(rows[i].ts_name);
            rows[i].ts_name = NULL;
            rows[i].status = R_SKIP;
            snprintf(rows[i].why, sizeof rows[i].why, "the loss: add its labels '%s' to --inputs to compare it", ts_tensor_name(cm->labels));
        }
    size_t n_file = ts_graph_output_count(cm->g);
    ts_tensor **outs = calloc(n_file + 2, sizeof *outs);
    if (!outs) return cli_runtime_error("out of memory");
    int n_outs = 0;
    for (size_t i = 0; i < n_file + 2; i++) { /* the file's outputs, the scores, the loss; each once */
        ts_tensor *t = i < n_file ? ts_graph_output_at(cm->g, i) : i == n_file ? cm->logp : cm->loss;
        bool skip = !t || (t == cm->loss && !with_loss);
        for (int j = 0; j < n_outs && !skip; j++) skip = outs[j] == t;
        if (!skip) outs[n_outs++] = t;
    }
    ts_options *o = n_outs ? ts_options_new() : NULL;
    if (!o) {
        free(outs);
        return n_outs ? cli_runtime_error("options")
                      : cli_usage_error("compare", "--inputs %s has no array '%s': the model's only output is its loss, which needs it",
                                        a->inputs, ts_tensor_name(cm->labels));
    }
    for (int i = 0; i < n_rows; i++) {
        bool again = false; /* two module paths may name one tensor (attn and its c_proj) */
        for (int j = 0; j < i && !again && rows[i].ts_name; j++) again = rows[j].ts_name && strcmp(rows[j].ts_name, rows[i].ts_name) == 0;
        if (rows[i].ts_name && !again && ts_options_anchor(o, rows[i].ts_name, rows[i].ts_name, TS_OUTPUT_FINAL, 0)) {
            ts_options_free(o);
            free(outs);
            return cli_runtime_error("anchoring");
        }
    }
    st = a->grads ? ts_model_training(mp, cm->g, cm->loss, o, ts_sgd(0.0f, 0.0f, 0.0f))
                  : ts_model_inference(mp, cm->g, outs, n_outs, o);
    ts_options_free(o);
    free(outs);
    if (st || ts_model_compile(*mp)) return cli_runtime_error("compiling the model");
    /* the graph's inputs, by name, from --inputs */
    const char *names[16];
    ts_array arrays[16];
    void *bufs[16] = {0};
    int n_in = 0;
    for (size_t i = 0; i < ts_graph_tensor_count(cm->g) && n_in < 16; i++) {
        ts_tensor *t = ts_graph_tensor_at(cm->g, i);
        if (strcmp(ts_tensor_op(t), "Input") != 0) continue;
        const ts_array *v = cli_dump_find(inputs, ts_tensor_name(t));
        ts_array info;
        ts_tensor_info(t, &info);
        if (!v) {
            if (!with_loss && t == cm->labels) continue; /* labels are not needed for the forward */
            return cli_usage_error("compare", "--inputs %s has no array '%s' (an input of the model)", a->inputs, ts_tensor_name(t));
        }
        int64_t bad = -1;
        double bad_v = 0;
        if (convert_input(v, info.dtype, &arrays[n_in], &bufs[n_in], &bad, &bad_v)) {
            for (int k = 0; k < n_in; k++) free(bufs[k]);
            if (bad < 0) return cli_runtime_error("converting inputs");
            return cli_usage_error("compare", "--inputs %s: '%s' holds %.17g at [%lld]; the model's input takes %s ids or labels (they are "
                                   "not wrapped)", a->inputs, ts_tensor_name(t), bad_v, (long long)bad, info.dtype == TS_I64 ? "int64" : "int32");
        }
        if (info.ndim == 0 && arrays[n_in].ndim == 0) { /* a scalar input: the run's one micro-batch of it */
            arrays[n_in].ndim = 1;
            arrays[n_in].shape[0] = 1;
        }
        names[n_in++] = ts_tensor_name(t);
    }
    st = ts_model_run(*mp, names, arrays, n_in);
    for (int i = 0; i < n_in; i++) free(bufs[i]);
    if (st && st != TS_ERR_NUMERICS) return cli_runtime_error("running the model");
    for (int i = 0; i < n_rows; i++) {
        if (!rows[i].ts_name) continue;
        ts_array mine;
        if (ts_model_anchored(*mp, rows[i].ts_name, &mine)) {
            rows[i].status = R_MISSING;
            snprintf(rows[i].why, sizeof rows[i].why, "%s", ts_last_error());
            continue;
        }
        compare_one(a, &rows[i], &mine, cli_dump_find(ref, rows[i].ref_name));
    }
    return CLI_OK;
}

int cmd_compare(int argc, char **argv) {
    compare_args a = {.atol = 1e-5, .rtol = 1e-4, .jump = TS_JUMP_FACTOR};
    const cli_flag flags[] = {
        {"--model", FLAG_STRING, &a.model, "NAME|FILE.onnx", "built-in model to run (mlp, cnn, gpt) or an ONNX file"},
        {"--input", FLAG_LIST, &a.model_inputs, "NAME:SHAPE", "static shape of a model input, e.g. x:64x1x28x28 or tokens:4x64 (dim 0: the batch of --inputs)"},
        {"--weights", FLAG_STRING, &a.weights, "W", "parameters: an .npz or a directory of .npy files"},
        {"--inputs", FLAG_STRING, &a.inputs, "NPZ", "the model's inputs by name (x, labels), batch on axis 0"},
        {"--reference", FLAG_STRING, &a.reference, "NPZ", "reference tensors by name (.npz or directory of .npy)"},
        {"--grads", FLAG_BOOL, &a.grads, NULL, "also run the backward and compare gradients (Gradient___*)"},
        {"--atol", FLAG_FLOAT, &a.atol, "A", "absolute tolerance (default 1e-5)"},
        {"--rtol", FLAG_FLOAT, &a.rtol, "R", "relative tolerance (default 1e-4): |a-r| <= atol + rtol*|r|"},
        {"--tol", FLAG_LIST, &a.tols, "GLOB:A:R", "tolerances for tensors matching GLOB (the last match wins)"},
        {"--fail-fast", FLAG_BOOL, &a.fail_fast, NULL, "stop at the first tensor that differs"},
        {"--map", FLAG_STRING, &a.map, "FILE", "lines 'REFERENCE_NAME TENSORSCOPE_NAME' where names differ"},
        {"--report", FLAG_STRING, &a.report, "FILE.json", "write every figure as JSON"},
        {"--plot", FLAG_STRING, &a.plot, "FILE.png", "max relative error per tensor, log scale, tolerance line"},
        {"--a", FLAG_STRING, &a.a, "DUMP", "compare two dumps: this one ..."},
        {"--b", FLAG_STRING, &a.b, "DUMP", "... against this reference (.npz or directory of .npy)"},
        {"--rank", FLAG_BOOL, &a.rank, NULL, "with --a/--b: rank the tensors by the precision --a lost against --b (e.g. bf16 against "
                                              "f32): relative error, graph order, where it first jumps"},
        {"--jump", FLAG_FLOAT, &a.jump, "K", "with --rank: a jump is an error above K x the median before it (default 10)"},
        {"--input-value", FLAG_LIST, &a.model_values, "NAME=V,..|NAME=F.npy", "an ONNX input's value, bound at import (a shape input: shape=4,-1)"},
        CLI_ONNX_FLAGS(a.imp),
        CLI_GPT_FLAGS(a.imp),
        {NULL, FLAG_BOOL, NULL, NULL, NULL}};
    bool help;
    int rc = cli_parse("compare", "--model M --inputs IN.npz --reference REF.npz [--weights W] [--grads] [flags]\n"
                                  "       tensorscope compare --a DUMP --b DUMP [--rank] [flags]",
                       flags, argc, argv, 2, NULL, &help);
    if (rc || help) return rc;
    if (!(a.atol >= 0) || !(a.rtol >= 0)) return cli_usage_error("compare", "--atol and --rtol must be >= 0");
    for (int i = 0; i < a.tols.n; i++)
        if ((rc = parse_tol(&a, a.tols.items[i]))) return rc;
    bool two_dumps = a.a || a.b;
    if (two_dumps && (!a.a || !a.b)) return cli_usage_error("compare", "--a and --b go together");
    if (two_dumps && (a.model || a.inputs || a.reference || a.grads || a.weights))
        return cli_usage_error("compare", "--a/--b compare two dumps; --model, --inputs, --reference, --weights and --grads run a model");
    if ((a.rank || a.jump != TS_JUMP_FACTOR) && !two_dumps)
        return cli_usage_error("compare", "--rank and --jump rank two dumps: give --a DUMP --b DUMP (e.g. a bf16 run's and its f32 twin's)");
    if (a.rank && (a.report || a.fail_fast))
        return cli_usage_error("compare", "--rank prints its ranking (and --plot draws it); --report and --fail-fast go with the tolerance check");
    if (a.jump != TS_JUMP_FACTOR && !a.rank) return cli_usage_error("compare", "--jump goes with --rank");
    if (!(a.jump >= 1) || isinf(a.jump)) return cli_usage_error("compare", "--jump must be a number >= 1, got %g", a.jump);
    if (!two_dumps && (!a.inputs || !a.reference))
        return cli_usage_error("compare", "give --model M --inputs IN.npz --reference REF.npz, or --a DUMP --b DUMP");
    if (!two_dumps && !a.model) a.model = "mlp";
    if (a.report && !*a.report) return cli_usage_error("compare", "--report needs a file name");
    if (a.plot && !*a.plot) return cli_usage_error("compare", "--plot needs a file name");
    const cli_need needs[] = {{"--plot", a.plot ? "plots" : NULL},          {"--model", cli_file_feature(a.model)},
                              {"--weights", cli_file_feature(a.weights)}, {"--inputs", cli_file_feature(a.inputs)},
                              {"--reference", cli_file_feature(a.reference)}, {"--a", cli_file_feature(a.a)},
                              {"--b", cli_file_feature(a.b)}};
    if ((rc = cli_need_features("compare", needs, sizeof needs / sizeof needs[0]))) return rc;

    dump ref = {0}, inputs = {0}, mine = {0};
    char **map = NULL;
    int n_map = 0;
    cli_model cm = {0};
    ts_model *m = NULL;
    row *rows = NULL;
    int n_rows = 0;
    const char **unref = NULL;
    int n_unref = 0;
    weights_note wn = {0};
    if (cli_dump_load(two_dumps ? a.b : a.reference, &ref)) {
        rc = cli_runtime_error("reading the reference");
        goto done;
    }
    if (two_dumps ? cli_dump_load(a.a, &mine) != TS_OK : cli_dump_load(a.inputs, &inputs) != TS_OK) {
        rc = cli_runtime_error(two_dumps ? "reading --a" : "reading --inputs");
        goto done;
    }
    if (a.map && (rc = read_map(a.map, &map, &n_map))) goto done;
    /* rows in the reference's order; ranking, in the order either dump records */
    const dump *od = a.rank && !ref.ordered && mine.ordered ? &mine : &ref;
    n_rows = (int)cli_dump_count(od);
    rows = calloc((size_t)n_rows + 1, sizeof *rows);
    if (!rows) {
        rc = cli_runtime_error("out of memory");
        goto done;
    }
    if (two_dumps) {
        for (int i = 0; i < n_rows; i++) {
            row *rw = &rows[i];
            rw->ref_name = cli_dump_name(od, (size_t)i);
            rw->order = i;
            const ts_array *x = cli_dump_find(&mine, rw->ref_name), *r = cli_dump_find(&ref, rw->ref_name);
            if (!x || !r) {
                rw->status = R_MISSING;
                snprintf(rw->why, sizeof rw->why, "not in %s", x ? a.b : a.a);
                continue;
            }
            rw->ts_name = strdup(rw->ref_name);
            compare_one(&a, rw, x, r);
        }
        unref = calloc(cli_dump_count(&mine) + 1, sizeof *unref);
        for (size_t i = 0; unref && i < cli_dump_count(&mine); i++)
            if (!cli_dump_find(&ref, cli_dump_name(&mine, i))) unref[n_unref++] = cli_dump_name(&mine, i);
        if (a.rank) {
            const char **only_b = calloc(cli_dump_count(&ref) + 1, sizeof *only_b);
            int n_only_b = 0;
            for (size_t i = 0; only_b && i < cli_dump_count(&ref); i++)
                if (!cli_dump_find(&mine, cli_dump_name(&ref, i))) only_b[n_only_b++] = cli_dump_name(&ref, i);
            char note[1024];
            if (!od->ordered)
                snprintf(note, sizeof note, "by name (neither dump records its order: `tensorscope train --dump-npy` writes %s beside the "
                         "arrays)", DUMP_ORDER);
            else snprintf(note, sizeof note, "in the order %s records", od == &ref ? a.b : a.a);
            rc = unref && only_b ? rank_report(a.plot, a.jump, rows, n_rows, note, unref, n_unref, only_b, n_only_b)
                                 : cli_runtime_error("out of memory");
            free(only_b);
            goto done;
        }
    } else {
        /* resolve names on a throwaway build (batch 1) to know what to anchor */
        cli_model probe = {0};
        /* the run's batch size: an export may have it folded into reshapes */
        long probe_batch = batch_of(&inputs);
        cli_import imp = model_import(&a, &inputs);
        ts_status pst = cli_model_open(a.model, probe_batch, 0, NULL, &imp, &probe);
        if (pst && (probe.error[0] || probe.unknown)) {
            rc = probe.error[0] ? cli_usage_error("compare", "%s", probe.error) : cli_unknown_model("compare", a.model);
            goto done;
        }
        for (int i = 0; i < n_rows; i++) {
            row *rw = &rows[i];
            rw->ref_name = cli_dump_name(&ref, (size_t)i);
            rw->ts_name = probe.g ? resolve_name(probe.g, rw->ref_name, map, n_map) : NULL;
            bool is_grad = rw->ts_name && strncmp(rw->ts_name, "Gradient___", 11) == 0;
            rw->order = rw->ts_name && probe.g ? topo_position(probe.g, rw->ts_name) : 4L * n_rows + i;
            if (!rw->ts_name) {
                rw->status = R_MISSING;
                snprintf(rw->why, sizeof rw->why, "no tensor of the model has this name or scope (give --map REFERENCE_NAME NAME)");
            } else if (is_grad && !a.grads) {
                free(rw->ts_name);
                rw->ts_name = NULL;
                rw->status = R_SKIP;
                snprintf(rw->why, sizeof rw->why, "a gradient: add --grads to run the backward and compare it");
            }
        }
        ts_graph_free(probe.g);
        qsort(rows, (size_t)n_rows, sizeof *rows, cmp_rows);
        if ((rc = run_model(&a, &inputs, &ref, rows, n_rows, &cm, &m, &wn))) goto done;
        /* layer outputs and parameter gradients of the model that the reference lacks */
        unref = calloc(ts_graph_tensor_count(cm.g) * 2 + 1, sizeof *unref);
        for (size_t i = 0; unref && i < ts_graph_tensor_count(cm.g); i++) {
            const char *nm = ts_tensor_name(ts_graph_tensor_at(cm.g, i));
            const char *op = ts_tensor_op(ts_graph_tensor_at(cm.g, i));
            if (strcmp(op, "Input") == 0 || strcmp(op, "Param") == 0 || find_row(rows, n_rows, nm)) continue;
            unref[n_unref++] = nm;
        }
    }

    int first = -1, fails = 0, passes = 0, problems = 0, skipped = 0;
    char detail[4096] = "";
    for (int i = 0; i < n_rows; i++) {
        if (rows[i].status == R_FAIL && first < 0) first = i;
        fails += rows[i].status == R_FAIL;
        passes += rows[i].status == R_PASS;
        problems += rows[i].status == R_SHAPE || rows[i].status == R_MISSING;
        skipped += rows[i].status == R_SKIP;
    }
    printf("%s: %d tensors in the reference, compared in topological order; element rule |a - r| <= atol + rtol*|r| "
           "(atol %g, rtol %g)\n",
           two_dumps ? "compare two dumps" : a.model, n_rows, a.atol, a.rtol);
    if (a.weights) print_weights_note(a.weights, &wn);
    for (int i = 0; i < n_rows; i++) {
        print_row(&rows[i]);
        if (a.fail_fast && i == first) {
            printf("(--fail-fast: stopped at the first tensor that differs)\n");
            break;
        }
    }
    if (n_unref) {
        printf("%d tensor%s of the model %s no reference:", n_unref, n_unref == 1 ? "" : "s", n_unref == 1 ? "has" : "have");
        for (int i = 0; i < n_unref && i < 12; i++) printf(" %s", unref[i]);
        printf("%s\n", n_unref > 12 ? " ..." : "");
    }
    if (first >= 0) {
        explain(two_dumps ? NULL : cm.g, rows, n_rows, &rows[first], detail, sizeof detail);
        printf("\nfirst divergence: %s\n  %s\n", rows[first].ts_name, detail);
    }
    printf("\ncompared: %d passed, %d failed; %d without a counterpart or with another shape; %d skipped\n", passes, fails,
           problems, skipped);
    rc = fails || problems ? CLI_RUNTIME : CLI_OK;
    int wrc = CLI_OK;
    if (a.report) wrc = write_report(a.report, rows, n_rows, first >= 0 ? rows[first].ts_name : NULL, detail, unref, n_unref);
    if (!wrc && a.plot) wrc = write_plot(a.plot, rows, n_rows, first);
    if (wrc) rc = wrc;
done:
    for (int i = 0; rows && i < n_rows; i++) free(rows[i].ts_name);
    free(rows);
    free(unref);
    for (int i = 0; i < n_map; i++) free(map[i]);
    free(map);
    for (int i = 0; i < a.n_rules; i++) free((char *)a.rules[i].glob);
    ts_model_free(m);
    ts_graph_free(cm.g);
    weights_note_free(&wn);
    cli_dump_free(&ref);
    cli_dump_free(&inputs);
    cli_dump_free(&mine);
    return rc;
}
