/* stability.c -- the stability signals' rows (--watch-stability) over the
 * run: each run's values kept, and at the end one heat map per signal
 * (--plot-stability DIR: layers down, steps across). */
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cli_stability {
    char **names;   /* the rows' names, as the first run gave them */
    int n_rows;
    int64_t *steps; /* a column per run */
    double *v;      /* [n_cols][n_rows] */
    int n_cols, cap;
};

double cli_stability_value(const ts_summary *s) {
    const ts_stats *st = &s->stats;
    if (st->nans) return NAN;
    if (st->pos_infs) return INFINITY;
    if (st->neg_infs) return -INFINITY;
    return st->mean;
}

bool cli_stability_row(const char *name) { return strncmp(name, "stability/", 10) == 0; }

void cli_stability_free(cli_stability *h) {
    if (!h) return;
    for (int r = 0; r < h->n_rows; r++) free(h->names[r]);
    free(h->names);
    free(h->steps);
    free(h->v);
    free(h);
}

ts_status cli_stability_record(cli_stability **hp, const ts_model *m) {
    const ts_watch_result *w = NULL;
    size_t n = 0;
    ts_status st = ts_model_watch_results(m, &w, &n);
    if (st) return st;
    int64_t run = ts_model_runs(m) - 1;
    cli_stability *h = *hp;
    if (!h) { /* the rows, once: the same every run of one compiled model */
        if (!(h = *hp = calloc(1, sizeof *h))) return TS_ERR_OUT_OF_MEMORY;
        for (size_t i = 0; i < n; i++) h->n_rows += cli_stability_row(w[i].name);
        if (h->n_rows && !(h->names = calloc((size_t)h->n_rows, sizeof *h->names))) return TS_ERR_OUT_OF_MEMORY;
        for (size_t i = 0, r = 0; i < n; i++)
            if (cli_stability_row(w[i].name) && !(h->names[r++] = strdup(w[i].name))) return TS_ERR_OUT_OF_MEMORY;
    }
    bool any = false;
    for (size_t i = 0; i < n && !any; i++) any = cli_stability_row(w[i].name) && w[i].run == run;
    if (!any || !h->n_rows) return TS_OK; /* not due this run */
    if (h->n_cols == h->cap) {
        int cap = h->cap ? 2 * h->cap : 64;
        int64_t *steps = realloc(h->steps, (size_t)cap * sizeof *steps);
        if (steps) h->steps = steps;
        double *v = realloc(h->v, (size_t)cap * (size_t)h->n_rows * sizeof *v);
        if (v) h->v = v;
        if (!steps || !v) return TS_ERR_OUT_OF_MEMORY;
        h->cap = cap;
    }
    double *col = h->v + (size_t)h->n_cols * (size_t)h->n_rows;
    int r = 0;
    for (size_t i = 0; i < n && r < h->n_rows; i++) {
        if (!cli_stability_row(w[i].name)) continue;
        col[r] = w[i].run == run ? cli_stability_value(w[i].summary) : NAN;
        if (w[i].run == run) h->steps[h->n_cols] = w[i].step;
        r++;
    }
    h->n_cols++;
    return TS_OK;
}

/* "stability/blocks.0.attn/max_logit.h3": signal "max_logit", label "blocks.0.attn h3" */
static void split_row(const char *name, char *signal, size_t ns, char *label, size_t nl) {
    const char *layer = name + 10, *slash = strrchr(layer, '/');
    const char *sig = slash ? slash + 1 : layer, *head = strstr(sig, ".h");
    size_t sig_len = head ? (size_t)(head - sig) : strlen(sig);
    snprintf(signal, ns, "%.*s", (int)sig_len, sig);
    int layer_len = slash ? (int)(slash - layer) : 0;
    if (head) snprintf(label, nl, "%.*s h%s", layer_len, layer, head + 2);
    else snprintf(label, nl, "%.*s", layer_len, layer);
}

static const char *signal_words(const char *signal) {
    static const struct {
        const char *name, *words;
    } w[] = {{"rms", "RMS of each layer's output"},
             {"max_abs", "max |x| of each layer's output"},
             {"max_logit", "largest attention logit of each head"},
             {"lse", "log-sum-exp of the logits (mean over rows)"},
             {"grad_norm", "gradient L2 norm of each parameter"},
             {"update_ratio", "||w_after - w_before|| / ||w_before|| of each parameter"},
             {"adam_update_norm", "Adam's update norm ||m^/(sqrt(v^)+eps)|| of each parameter"}};
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        if (strcmp(w[i].name, signal) == 0) return w[i].words;
    return signal;
}

int cli_stability_plot(const cli_stability *h, const char *dir) {
    if (!h || !h->n_cols) {
        printf("No stability signals were taken: no heat maps written to %s\n", dir);
        return CLI_OK;
    }
    char (*sig)[64] = calloc((size_t)h->n_rows, sizeof *sig);
    char (*lab)[160] = calloc((size_t)h->n_rows, sizeof *lab);
    const char **labels = calloc((size_t)h->n_rows, sizeof *labels);
    bool *done = calloc((size_t)h->n_rows, sizeof *done);
    double *v = malloc((size_t)h->n_rows * (size_t)h->n_cols * sizeof *v);
    int rc = CLI_OK;
    if (!sig || !lab || !labels || !done || !v) rc = cli_runtime_error("--plot-stability: out of memory");
    for (int r = 0; r < h->n_rows && rc == CLI_OK; r++) split_row(h->names[r], sig[r], sizeof sig[r], lab[r], sizeof lab[r]);
    for (int r = 0; r < h->n_rows && rc == CLI_OK; r++) {
        if (done[r]) continue;
        int k = 0;
        for (int q = r; q < h->n_rows; q++) { /* the rows of this signal, in the model's order */
            if (done[q] || strcmp(sig[q], sig[r]) != 0) continue;
            done[q] = true;
            labels[k] = lab[q];
            for (int c = 0; c < h->n_cols; c++) v[(size_t)k * (size_t)h->n_cols + (size_t)c] = h->v[(size_t)c * (size_t)h->n_rows + (size_t)q];
            k++;
        }
        char path[1200], title[300];
        snprintf(path, sizeof path, "%s/stability_%s.png", dir, sig[r]);
        snprintf(title, sizeof title, "%s: %s", sig[r], signal_words(sig[r]));
        bool logs = strcmp(sig[r], "lse") != 0 && strcmp(sig[r], "max_logit") != 0; /* norms span decades; logits have a sign */
        if (ts_plot_heatmap(path, title, labels, k, h->steps, h->n_cols, v, logs)) rc = cli_runtime_error("--plot-stability");
        else printf("Saved the %s heat map (%d rows by %d steps) to %s\n", sig[r], k, h->n_cols, path);
    }
    free(sig);
    free(lab);
    free(labels);
    free(done);
    free(v);
    return rc;
}
