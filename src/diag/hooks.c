/* hooks.c -- diagnostics around compile and runs (docs/observation.md#diagnostics): the graph
 * dump of TS_SAVE_GRAPH_FILE, the metrics report appended to
 * TS_METRICS_FILE, and the per-step trace line at log level 5. Diagnostics
 * never fail a compile or a run: problems are logged as warnings. */
#include "diag/hooks.h"

#include "diag/graph_dump.h"

#include "core/collective.h"
#include "diag/metrics.h"
#include "core/atomic_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *env_or_null(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* In an MPI job, rank 0 alone writes files: this process's rank (0 outside a job). */
static int job_rank(void) {
    const ts_collective *c = ts_collective_get();
    return c ? c->rank : 0;
}

/* ---- after compile: the graph dump */

/* "x f32[16,1,28,28], labels i32[16]": the compiled inputs. */
static void input_shapes(const ts_run *run, char *buf, size_t n) {
    const ts_prog *p = run->prog;
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k < p->n_order && used < n; k++) {
        const ts_tensor *t = run->g->t[p->order[k]];
        if (t->op != TS_OP_INPUT) continue;
        char shape[160];
        used += (size_t)snprintf(buf + used, n - used, "%s%s %s%s", used ? ", " : "", t->name, ts_dtype_name(t->dtype),
                                 ts_shape_str(&p->shape[t->id], shape, sizeof shape));
    }
}

/* Appends one block (a header line naming the compile, the kind of model
 * and its input shapes, then the dump) with a single write, so each
 * compile's graph is whole and none hides another. */
static ts_status append_dump(const char *path, const ts_run *run, ts_dump_format fmt, const char *dump) {
    FILE *f = fopen(path, "a");
    if (!f) return ts_error(TS_ERR_IO, "cannot open %s for appending: %s", path, strerror(errno));
    const char *c = fmt == TS_DUMP_DOT ? "//" : "#";
    char inputs[1024];
    input_shapes(run, inputs, sizeof inputs);
    bool ok = fprintf(f, "%s ---- compile %lld: %s model, inputs %s\n%s", c, (long long)ts_counter_get("Compilations"),
                      run->training ? "training" : "inference", inputs[0] ? inputs : "(none)", dump) >= 0 && fflush(f) == 0;
    int err = errno;
    ok = fclose(f) == 0 && ok;
    return ok ? TS_OK : ts_error(TS_ERR_IO, "cannot write %s: %s", path, strerror(err ? err : errno));
}

ts_status ts_diag_after_compile(const ts_run *run) {
    const char *path = env_or_null("TS_SAVE_GRAPH_FILE");
    if (!run || !path || job_rank() != 0) return TS_OK;
    const char *fmt_name = env_or_null("TS_SAVE_GRAPH_FMT");
    ts_dump_format fmt = TS_DUMP_TEXT;
    if (fmt_name && strcasecmp(fmt_name, "dot") == 0) fmt = TS_DUMP_DOT;
    else if (fmt_name && strcasecmp(fmt_name, "text") != 0)
        ts_logf(TS_LOG_WARN, "TS_SAVE_GRAPH_FMT='%s' is not text or dot; writing text", fmt_name);
    /* locations: ts_graph_dump reads TS_IR_DEBUG itself */
    int flags = run->training && ts_env_flag("TS_SAVE_GRAPH_BACKWARD") ? TS_DUMP_BACKWARD : 0;
    ts_bwd_model bm = ts_bwd_of(run);
    char *dump = ts_graph_dump_of(run->g, &bm, fmt, flags);
    if (!dump) return ts_error_wrap(TS_ERR_IO, "TS_SAVE_GRAPH_FILE: no graph dump written");
    ts_status st = append_dump(path, run, fmt, dump);
    ts_string_free(dump);
    if (st) return ts_error_wrap(st, "TS_SAVE_GRAPH_FILE");
    ts_logf(TS_LOG_DEBUG, "graph dump (%s) appended to %s", fmt == TS_DUMP_DOT ? "dot" : "text", path);
    return TS_OK;
}

/* ---- after run: the metrics file and the trace line */

static ts_status append_metrics(const ts_run *run, const char *path) {
    char *report = ts_metrics_report();
    if (!report) return ts_error(TS_ERR_OUT_OF_MEMORY, "TS_METRICS_FILE: no report (out of memory)");
    /* appended, not atomic: each run adds one block to the same file */
    ts_status st = TS_OK;
    FILE *f = fopen(path, "a");
    if (!f) {
        st = ts_error(TS_ERR_IO, "TS_METRICS_FILE: cannot open %s for appending: %s", path, strerror(errno));
    } else {
        long long n = (long long)(run->training ? run->steps : run->runs);
        bool ok = fprintf(f, "[MetricsData; %s=%lld]\n%s", run->training ? "step" : "eval_run", n, report) >= 0 && fflush(f) == 0;
        int err = errno;
        ok = fclose(f) == 0 && ok;
        if (!ok) st = ts_error(TS_ERR_IO, "TS_METRICS_FILE: cannot write %s: %s", path, strerror(err ? err : errno));
    }
    ts_string_free(report);
    return st;
}

/* The loss of the last micro-batch from its anchor (any anchor of the loss
 * entry: FINAL, ALL, EVERY_N keep it last; SUM gives the sum, so the mean
 * is shown). false when the model has no anchored loss. */
static bool anchored_loss(const ts_run *run, double *out) {
    const ts_prog *p = run->prog;
    if (!run->training || run->loss < 0 || run->loss >= p->n_nodes) return false;
    int e = p->value_entry[run->loss];
    const char *name = run->g->t[run->loss]->name;
    const ts_anchor *best = NULL;
    for (int k = 0; k < p->n_anchors; k++) {
        const ts_anchor *a = &p->anchors[k];
        if (a->entry != e) continue;
        if (!best || strcmp(a->short_name, name) == 0) best = a; /* prefer the loss's own name */
    }
    if (!best || !best->local || best->rows < 1) return false;
    const ts_entry *en = &p->entries[e];
    double v = best->local[(best->rows - 1) * en->numel]; /* this replica's */
    if (best->mode == TS_OUTPUT_SUM && p->samples_mb > 0) v /= (double)p->samples_mb;
    *out = v;
    return true;
}

/* Micro-batch size: the first dimension of the first compiled input. */
static int64_t micro_batch(const ts_run *run) {
    const ts_prog *p = run->prog;
    for (int k = 0; k < p->n_order; k++) {
        int i = p->order[k];
        if (run->g->t[i]->op == TS_OP_INPUT && p->shape[i].ndim > 0) return p->shape[i].d[0];
    }
    return 1;
}

static void trace_line(const ts_run *run, uint64_t run_ns) {
    const ts_prog *p = run->prog;
    int64_t steps = p->samples_step > 0 ? p->samples_step : 1; /* optimizer steps (or inference batches) per run */
    int64_t B = micro_batch(run);
    double sec = (double)run_ns * 1e-9;
    double samples = (double)(B * p->samples_mb);
    ts_memory_usage mem = {-1, -1, -1};
    if (ts_memory_get(&mem)) mem.rss = -1;
    char loss[32] = "n/a";
    double l;
    if (anchored_loss(run, &l)) snprintf(loss, sizeof loss, "%.9g", l);
    char lr[32] = "";
    if (run->training) snprintf(lr, sizeof lr, " lr %.9g", (double)run->opt.lr);
    ts_logf(TS_LOG_TRACE, "%s %lld loss %s%s batch %lld ms/step %.3f samples/s %.1f RSS %.1f MB GFLOP/s %.3f",
            run->training ? "step" : "eval run", (long long)(run->training ? run->steps : run->runs), loss, lr, (long long)B, (double)run_ns * 1e-6 / (double)steps,
            sec > 0 ? samples / sec : 0.0, mem.rss >= 0 ? (double)mem.rss / (1024.0 * 1024.0) : -1.0,
            sec > 0 ? p->flops_mb * (double)p->samples_mb / sec * 1e-9 : 0.0);
}

ts_status ts_diag_after_run(const ts_run *run, uint64_t run_ns) {
    if (!run || !run->prog) return TS_OK;
    if (ts_log_enabled(TS_LOG_TRACE)) trace_line(run, run_ns);
    ts_layer_shapes_after_run(run);
    const char *path = env_or_null("TS_METRICS_FILE");
    return path && job_rank() == 0 ? append_metrics(run, path) : TS_OK;
}
