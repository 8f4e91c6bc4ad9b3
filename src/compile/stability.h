/* stability.h -- stability signals as watch rows (ts_options_watch_stability,
 * docs/observation.md#stability-signals). Internal.
 *
 * Compile resolves the layers a pattern names into sources: a stats
 * watch on a tensor whose summary gives a signal (a layer's output: RMS
 * and max |x|; on a device, a parameter's Accum___: the gradient norm); a
 * job the host runs on a tensor as it is final, into summaries of its own
 * (attention scores: each head's max and whether a NaN was seen, from the
 * stats' vector extremes, core/stats_vec.h; logits: a partial summary,
 * core/stats.h, of the rows' log-sum-exp); or the sums of squares the
 * optimizer step adds from registers as it updates a parameter on the
 * host (ts_opt_update_norms: the gradient, w before, the update, Adam's
 * direction). The rows are derived from those when the watch results are
 * read. */
#ifndef TS_COMPILE_STABILITY_H
#define TS_COMPILE_STABILITY_H

#include "tensorscope.h"
#include "compile/program.h"

typedef enum ts_signal {
    TS_SIG_RMS,
    TS_SIG_MAX_ABS,
    TS_SIG_MAX_LOGIT,
    TS_SIG_LSE,
    TS_SIG_GRAD_NORM,
    TS_SIG_UPDATE_RATIO,
    TS_SIG_ADAM_UPDATE
} ts_signal;

typedef struct ts_stab_row {
    char *name;     /* stability/<layer>/<signal> */
    ts_signal sig;
    int entry;      /* the watched entry (rms, max_abs; grad_norm on a device), else -1 */
    int sum;        /* the stability summary it reads, or a parameter's index (param_of) */
} ts_stab_row;

/* A job on an entry as it is final: heads > 0: scores [B, heads, Tq, Tk],
 * a summary per head; heads 0: logits [..., V], one summary of the rows'
 * log-sum-exp. */
typedef struct ts_stab_job {
    int entry, heads, sum;
} ts_stab_job;

typedef struct ts_stab {
    int period;
    ts_stab_job *jobs;
    int n_jobs;
    int *param_of;              /* per node: its parameter index for the update's sums, -1: none */
    double (*norm2)[4];         /* per parameter: sums of squares of g, w before, w_after - w_before, Adam's direction */
    int64_t *norm_run, *norm_step;
    int n_params;
    double sq[TS_MAX_SLOTS][4]; /* the update's sums per slot of the walk (observe.c) */
    ts_summary *sums;           /* what the jobs summarised */
    int64_t *sum_run, *sum_step;
    int n_sums;
    ts_stab_row *rows;
    int n_rows;
    int n_hidden;               /* watches only the rows read: numbered first, not returned as rows */
    float *lse;                 /* a row's log-sum-exp each (the largest logits entry's rows) */
    int64_t rows_run;           /* the run the rows were last derived at */
} ts_stab;

/* At compile, before the watches are numbered: the stability program of
 * the options' layer patterns (p->stab; none without them), and in
 * want[e] the entries whose stats watch a row reads. */
ts_status ts_stab_resolve(const ts_model_def *m, ts_prog *p, bool *want);
/* At compile, after the watches are numbered: the rows' watches. */
void ts_stab_bind(ts_prog *p);
void ts_stab_free(ts_stab *s);
/* Whether entry's job is due now (its run's last micro-batch or step, on
 * the period); runs: the model's runs so far. */
bool ts_stab_due(const ts_prog *p, int64_t runs, const ts_entry *e, int64_t sample);
/* The job of entry e (host memory), due now, at the model's run and step. */
void ts_stab_observe(ts_prog *p, int64_t runs, int64_t steps, const ts_entry *e);
/* Of attention scores' job (heads > 0): head h's max mx (NaN not taken)
 * and whether a NaN was seen, found elsewhere (the one-pass attention's
 * summaries of its twin, observe.c). */
void ts_stab_head(ts_prog *p, int64_t runs, int64_t steps, const ts_entry *e, int64_t h, float mx, bool nan);
/* observe.c's walk, after a parameter's update (p->stab->param_of[node]
 * >= 0): the sums of squares it took (ts_opt_update_norms). */
void ts_stab_update_done(ts_prog *p, int64_t runs, int64_t steps, int node, const double sq[4]);
/* The rows, derived from the summaries of the model's run `runs`
 * (ts_model_watch_results). */
void ts_stab_rows(ts_prog *p, int64_t runs);

#endif
