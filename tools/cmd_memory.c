/* cmd_memory.c -- `memory`: where a model's memory goes over one step
 * (docs/observation.md#where-memory-goes). Compile's memory plan as a
 * liveness report: at each point of the step (each forward op, each
 * backward op, the update) the planned buffers live, their sizes, owner op
 * and source line; the peak and what is live at it, largest first; with
 * --plot-memory the timeline as a stacked area per class; with --measure
 * one step on zero inputs and the process's RSS growth against the plan. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static const char *const CLASS_NAME[TS_MEM_CLASSES] = {"activations", "gradients", "optimizer state", "parameters", "workspace"};

static const char *human(double b, char *buf, size_t n) {
    if (b >= 1e9) snprintf(buf, n, "%.2f GB", b / 1e9);
    else if (b >= 1e6) snprintf(buf, n, "%.2f MB", b / 1e6);
    else if (b >= 1e3) snprintf(buf, n, "%.1f kB", b / 1e3);
    else snprintf(buf, n, "%.0f B", b);
    return buf;
}

static void buffer_name(const ts_memory_buffer *b, char *buf, size_t n) {
    if (!b->tensor) snprintf(buf, n, "(kernel workspace)");
    else snprintf(buf, n, "%s%s", b->gradient ? "Gradient___" : "", ts_tensor_name(b->tensor));
}

static void point_name(ts_model *m, int64_t p, char *buf, size_t n) {
    int phase;
    const ts_tensor *t = ts_model_memory_point(m, p, &phase);
    char loc[256] = "";
    if (t) ts_tensor_location(t, loc, sizeof loc);
    if (!t) snprintf(buf, n, "update");
    else snprintf(buf, n, "%s %s (%s%s%s)", phase ? "backward of" : "forward", ts_tensor_name(t), ts_tensor_op(t), *loc ? " at " : "", loc);
}

static int cmp_size(const void *x, const void *y) {
    const ts_memory_buffer *a = *(const ts_memory_buffer *const *)x, *b = *(const ts_memory_buffer *const *)y;
    return (a->bytes < b->bytes) - (a->bytes > b->bytes);
}

/* One step on zero inputs (ids and labels 0); the bytes of inputs fed and
 * the process's memory after the step, the inputs still held. */
static int run_zero_step(ts_model *m, ts_graph *g, int64_t *input_bytes, ts_memory_usage *after, bool *measured) {
    const char *names[16];
    ts_array arrays[16];
    int n = 0, rc = CLI_OK;
    *input_bytes = 0;
    for (size_t i = 0; i < ts_graph_tensor_count(g) && n < 16; i++) {
        ts_tensor *t = ts_graph_tensor_at(g, i);
        if (strcmp(ts_tensor_op(t), "Input") != 0) continue;
        ts_tensor_info(t, &arrays[n]);
        size_t bytes = (size_t)ts_array_numel(&arrays[n]) * ts_dtype_size(arrays[n].dtype);
        if (!(arrays[n].data = malloc(bytes ? bytes : 1))) rc = cli_runtime_error("out of memory");
        else { /* zeros, every page written (resident, as the RSS taken out for them; a compiler may make memset a calloc) */
            memset(arrays[n].data, 0, bytes);
            for (size_t k = 0; k < bytes; k += 4096) ((volatile unsigned char *)arrays[n].data)[k] = 0;
        }
        *input_bytes += (int64_t)bytes;
        names[n++] = ts_tensor_name(t);
    }
    if (!rc && ts_model_run(m, names, arrays, n)) rc = cli_runtime_error("running one step on zero inputs");
    *measured = !rc && ts_memory_get(after) == TS_OK;
    for (int i = 0; i < n; i++) free(arrays[i].data);
    return rc;
}

int cmd_memory(int argc, char **argv) {
    const char *plot = NULL;
    long top = 10;
    bool measure = false, quiet = false;
    const cli_flag flags[] = {
        {"--plot-memory", FLAG_STRING, &plot, "FILE.png", "draw the live bytes over the step, a stacked area per class (PNG or .svg)"},
        {"--top", FLAG_INT, &top, "N", "buffers listed live at the peak, largest first (default 10; 0: all)"},
        {"--measure", FLAG_BOOL, &measure, NULL, "run one step on zero inputs and set the process's RSS growth beside the plan"},
        {"--summary", FLAG_BOOL, &quiet, NULL, "the totals and the peak only, not every point of the step"},
        {NULL, FLAG_BOOL, NULL, NULL, NULL}};
    ts_memory_usage before = {0}, after = {0};
    bool have_before = ts_memory_get(&before) == TS_OK; /* before the model: its parameters count too */
    cli_model cm = {0};
    ts_model *m = NULL;
    bool help = false;
    int rc = cli_model_command("memory", "[--model mlp] [model flags] [--plot-memory FILE.png] [--measure] [--top N]", flags, argc, argv,
                               &cm, &m, &help);
    ts_memory_buffer *b = NULL;
    const ts_memory_buffer **live = NULL;
    double *area = NULL;
    if (rc || help) goto done;
    if (top < 0) {
        rc = cli_usage_error("memory", "--top must be >= 0, got %ld", top);
        goto done;
    }
    if (plot && !*plot) {
        rc = cli_usage_error("memory", "--plot-memory needs a file name");
        goto done;
    }
    const cli_need needs[] = {{"--plot-memory", plot ? "plots" : NULL}};
    if ((rc = cli_need_features("memory", needs, 1))) goto done;
    size_t n = 0;
    int64_t P = 0;
    if (ts_model_memory_plan(m, NULL, 0, &n, &P) || !(b = calloc(n + 1, sizeof *b)) || ts_model_memory_plan(m, b, n, &n, &P) ||
        !(live = calloc(n + 1, sizeof *live)) || !(area = calloc((size_t)(TS_MEM_CLASSES * P) + 1, sizeof *area))) {
        rc = cli_runtime_error("the memory plan");
        goto done;
    }
    double total[TS_MEM_CLASSES] = {0};
    for (size_t i = 0; i < n; i++)
        for (int64_t p = b[i].start; p <= b[i].end && p < P; p++) area[(size_t)b[i].mclass * (size_t)P + (size_t)p] += (double)b[i].bytes;
    int64_t peak = 0;
    double peak_bytes = -1;
    for (int64_t p = 0; p < P; p++) {
        double s = 0;
        for (int k = 0; k < TS_MEM_CLASSES; k++) s += area[(size_t)k * (size_t)P + (size_t)p];
        if (s > peak_bytes) peak_bytes = s, peak = p;
    }
    for (int k = 0; k < TS_MEM_CLASSES; k++) total[k] = area[(size_t)k * (size_t)P + (size_t)peak];
    ts_model_memory mm;
    if (ts_model_memory_get(m, &mm)) {
        rc = cli_runtime_error("the model's memory");
        goto done;
    }
    char h[6][32], where[768];
    int L = 0;
    for (int64_t p = 0; p < P; p++) {
        int phase;
        ts_model_memory_point(m, p, &phase);
        L += phase == 0;
    }
    printf("memory plan: %zu buffers over %lld points of the step (forward ops 0..%d%s)\n", n, (long long)P, L - 1,
           P > L ? ", backward ops after, the update last" : "");
    double allocated = (double)(mm.activations + mm.gradients + mm.optimizer_state + mm.parameters) + area[(size_t)TS_MEM_WORKSPACE * (size_t)P];
    printf("allocated: %s (activations arena %s, %s without reuse; parameter gradients %s; optimizer state %s; "
           "workspace %s)\n",
           human(allocated, h[0], sizeof h[0]), human((double)mm.activations, h[1], sizeof h[1]),
           human((double)mm.activations_without_reuse, h[2], sizeof h[2]), human((double)mm.gradients, h[3], sizeof h[3]),
           human((double)mm.optimizer_state, h[4], sizeof h[4]), human(area[(size_t)TS_MEM_WORKSPACE * (size_t)P], h[5], sizeof h[5]));
    printf("  (parameters %s of them; anchors %s besides)\n", human((double)mm.parameters, h[0], sizeof h[0]), human((double)mm.anchors, h[1], sizeof h[1]));
    if (!quiet) {
        printf("\n%5s  %-11s %-11s %-11s %-11s  %s\n", "point", "live", "activations", "gradients", "other", "op; planned buffers live (bytes)");
        for (int64_t p = 0; p < P; p++) {
            double s = 0;
            for (int k = 0; k < TS_MEM_CLASSES; k++) s += area[(size_t)k * (size_t)P + (size_t)p];
            point_name(m, p, where, sizeof where);
            double act = area[(size_t)p], grad = area[(size_t)TS_MEM_GRADIENTS * (size_t)P + (size_t)p];
            printf("%5lld  %-11s %-11s %-11s %-11s  %s%s;", (long long)p, human(s, h[0], sizeof h[0]), human(act, h[1], sizeof h[1]),
                   human(grad, h[2], sizeof h[2]), human(s - act - grad, h[3], sizeof h[3]), where, p == peak ? " <- peak" : "");
            for (size_t i = 0; i < n; i++) {
                if (b[i].start > p || b[i].end < p || (b[i].start == 0 && b[i].end == P - 1 && b[i].mclass != TS_MEM_ACTIVATIONS)) continue;
                char nm[512];
                buffer_name(&b[i], nm, sizeof nm);
                printf(" %s (%s)", nm, human((double)b[i].bytes, h[0], sizeof h[0]));
            }
            printf("\n");
        }
    }
    point_name(m, peak, where, sizeof where);
    printf("\npeak: %s (%.0f bytes) live at point %lld, %s\n", human(peak_bytes, h[0], sizeof h[0]), peak_bytes, (long long)peak, where);
    printf("  by class:");
    for (int k = 0; k < TS_MEM_CLASSES; k++) printf("%s %s %s", k ? "," : "", CLASS_NAME[k], human(total[k], h[0], sizeof h[0]));
    printf("\n");
    size_t nl = 0;
    for (size_t i = 0; i < n; i++)
        if (b[i].start <= peak && b[i].end >= peak) live[nl++] = &b[i];
    qsort(live, nl, sizeof *live, cmp_size);
    printf("  live at the peak, largest first (%zu buffers):\n", nl);
    printf("  %-11s %-16s %-36s %-10s %-28s %s\n", "bytes", "class", "tensor", "op", "source line", "live over points");
    for (size_t i = 0; i < nl && (top == 0 || (long)i < top); i++) {
        char nm[512], loc[256] = "";
        buffer_name(live[i], nm, sizeof nm);
        if (live[i]->tensor) ts_tensor_location(live[i]->tensor, loc, sizeof loc);
        printf("  %-11lld %-16s %-36s %-10s %-28s %lld..%lld\n", (long long)live[i]->bytes, CLASS_NAME[live[i]->mclass], nm,
               live[i]->tensor ? ts_tensor_op(live[i]->tensor) : "-", *loc ? loc : "-", (long long)live[i]->start, (long long)live[i]->end);
    }
    if (top && nl > (size_t)top) printf("  ... %zu more (--top 0 lists all)\n", nl - (size_t)top);
    if (plot) {
        ts_status st = ts_plot_memory(plot, "live memory over one step", area, CLASS_NAME, TS_MEM_CLASSES, (int)P, P > L ? L : -1, (int)peak);
        if (st) {
            rc = cli_runtime_error("--plot-memory");
            goto done;
        }
        printf("Saved plot to %s\n", plot);
    }
    if (measure) {
        int64_t fed = 0;
        bool measured = false;
        if ((rc = run_zero_step(m, cm.g, &fed, &after, &measured))) goto done;
        if (!have_before || !measured || before.rss < 0 || after.rss < 0) {
            printf("\nmeasured: unavailable (no RSS on this system)\n");
        } else {
            double grown = (double)(after.rss - before.rss) - (double)fed;
            printf("\nmeasured: the process's RSS grew %s over building, compiling and one step (the %s of inputs fed taken out): %.2fx "
                   "the %s allocated (grew %.0f bytes, allocated %.0f)\n", human(grown, h[0], sizeof h[0]), human((double)fed, h[1], sizeof h[1]),
                   grown / allocated, human(allocated, h[2], sizeof h[2]), grown, allocated);
        }
    }
done:
    free(b);
    free(live);
    free(area);
    ts_model_free(m);
    ts_graph_free(cm.g);
    return rc;
}
