/* layer_shapes.c -- each layer's output shape in the log, after each run and
 * where a recompilation changed it (ts_options_set_log_layer_shapes, the
 * CLI's --log-layer-shapes; RETURNN's debug_print_layer_output_shape). */
#include "diag/hooks.h"

#include <stdio.h>
#include <string.h>

#include "compile/program.h"

/* Appends printf-style text to a growing string; false when out of memory. */
static bool append(char **buf, size_t *used, size_t *cap, const char *fmt, const char *a, const char *b, const char *c) {
    int need = snprintf(NULL, 0, fmt, a, b, c);
    if (need < 0 || ts_grow((void **)buf, cap, *used + (size_t)need + 1, 1)) return false;
    snprintf(*buf + *used, *cap - *used, fmt, a, b, c);
    *used += (size_t)need;
    return true;
}

static void shape_of(const ts_run *run, const ts_prog *p, int node, char *out, size_t n) {
    char s[96];
    snprintf(out, n, "%s%s", ts_dtype_name(run->g->t[node]->dtype), ts_shape_str(&p->shape[node], s, sizeof s));
}

void ts_layer_shapes_after_run(const ts_run *run) {
    const ts_prog *p = run->prog;
    if (!run->opts.log_layer_shapes || !p || !ts_log_enabled(TS_LOG_INFO)) return;
    char *buf = NULL, head[64], shape[128];
    size_t used = 0, cap = 0;
    if (run->training) snprintf(head, sizeof head, "step %lld", (long long)run->steps);
    else snprintf(head, sizeof head, "eval run %lld", (long long)run->runs);
    bool ok = append(&buf, &used, &cap, "%s: layer output shapes:%s%s", head, "", "");
    for (int k = 0; ok && k < p->n_layer_outs; k++) {
        shape_of(run, p, p->layer_outs[k], shape, sizeof shape);
        ok = append(&buf, &used, &cap, "%s %s %s", k ? "," : "", run->g->t[p->layer_outs[k]]->name, shape);
    }
    if (ok) ts_log_message(TS_LOG_INFO, buf);
    ts_free(buf);
}

void ts_layer_shapes_changed(const ts_run *run, const ts_prog *was, const ts_prog *now, const char *cause, bool switched) {
    if (!run->opts.log_layer_shapes || !was || !now || !ts_log_enabled(TS_LOG_INFO)) return;
    char *buf = NULL, a[128], b[128];
    size_t used = 0, cap = 0;
    int changed = 0;
    bool ok = append(&buf, &used, &cap, "%s (%s): layer output shapes changed:%s", switched ? "switched to the program compiled before" : "recompiled",
                     cause ? cause : "Requested", "");
    for (int k = 0; ok && k < now->n_layer_outs; k++) {
        int node = now->layer_outs[k];
        if (node >= was->n_nodes) continue; /* a node the old program did not have */
        shape_of(run, was, node, a, sizeof a);
        shape_of(run, now, node, b, sizeof b);
        if (strcmp(a, b) == 0) continue;
        ok = append(&buf, &used, &cap, "%s %s %s", changed++ ? "," : "", run->g->t[node]->name, a) &&
             append(&buf, &used, &cap, " -> %s%s%s", b, "", "");
    }
    if (ok && !changed) ok = append(&buf, &used, &cap, " none%s%s%s", "", "", "");
    if (ok) ts_log_message(TS_LOG_INFO, buf);
    ts_free(buf);
}
