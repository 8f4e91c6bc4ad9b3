/* stability.c -- stability signals as watch rows: compile's sources (a
 * layer's output, attention scores, logits, a parameter's gradient and
 * update), the host's jobs on scores and logits, and the rows derived
 * from the summaries (compile/stability.h). */
#include "compile/stability.h"

#include "backend/vmath.h"
#include "compile/program.h"
#include "core/stats.h"
#include "core/stats_vec.h"
#include "graph/graph.h"
#include "graph/optim.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const SIGNAL_NAME[] = {"rms", "max_abs", "max_logit", "lse", "grad_norm", "update_ratio", "adam_update_norm"};

/* The layer of an op's output: its scope (`blocks.0.attn` of
 * `blocks.0.attn/Softmax:0`), or its own name when it has none (a tensor
 * the user named, `logits`); into buf. */
static const char *layer_of(const char *name, char *buf, size_t n) {
    const char *slash = strrchr(name, '/');
    size_t len = slash ? (size_t)(slash - name) : strlen(name);
    snprintf(buf, n, "%.*s", (int)(len < n ? len : n - 1), name);
    return buf;
}

/* A parameter's layer: its name without the last `.part` (`fc1` of `fc1.weight`). */
static const char *param_layer(const char *name, char *buf, size_t n) {
    const char *dot = strrchr(name, '.');
    size_t len = dot ? (size_t)(dot - name) : strlen(name);
    snprintf(buf, n, "%.*s", (int)(len < n ? len : n - 1), name);
    return buf;
}

static bool wanted(const ts_model_def *m, const char *layer, const char *name) {
    for (size_t k = 0; k < m->opts->n_stability; k++)
        if (ts_name_matches(m->opts->stability[k].pattern, layer) || (name && ts_name_matches(m->opts->stability[k].pattern, name))) return true;
    return false;
}

static ts_status add_row(ts_stab *s, const char *layer, ts_signal sig, int head, int entry, int sum) {
    ts_stab_row *rows = ts_realloc(s->rows, (size_t)(s->n_rows + 1) * sizeof *rows);
    if (!rows) return TS_ERR_OUT_OF_MEMORY;
    s->rows = rows;
    char name[700];
    if (sig == TS_SIG_MAX_LOGIT) snprintf(name, sizeof name, "stability/%s/%s.h%d", layer, SIGNAL_NAME[sig], head);
    else snprintf(name, sizeof name, "stability/%s/%s", layer, SIGNAL_NAME[sig]);
    char *copy = ts_strdup(name);
    if (!copy) return TS_ERR_OUT_OF_MEMORY;
    s->rows[s->n_rows++] = (ts_stab_row){copy, sig, entry, sum};
    return TS_OK;
}

static ts_status add_job(ts_stab *s, int entry, int heads) {
    ts_stab_job *jobs = ts_realloc(s->jobs, (size_t)(s->n_jobs + 1) * sizeof *jobs);
    if (!jobs) return TS_ERR_OUT_OF_MEMORY;
    s->jobs = jobs;
    s->jobs[s->n_jobs++] = (ts_stab_job){entry, heads, s->n_sums};
    s->n_sums += heads > 0 ? heads : 1;
    return TS_OK;
}

/* The layers' outputs, in forward order: of the op outputs that leave
 * their scope (ts_prog_is_layer_output), the last of each scope. */
static ts_status layer_outputs(const ts_graph *g, const ts_prog *p, bool *out) {
    int *scope_len = ts_calloc((size_t)p->n_order + 1, sizeof *scope_len);
    if (!scope_len) return TS_ERR_OUT_OF_MEMORY;
    for (int k = 0; k < p->n_order; k++) {
        const ts_tensor *t = g->t[p->order[k]];
        const char *slash = strrchr(t->name, '/');
        out[k] = slash && t->op != TS_OP_INPUT && !ts_op_holds_value(t->op) && ts_prog_is_layer_output(g, p, p->order[k]);
        scope_len[k] = slash ? (int)(slash - t->name) : 0;
    }
    for (int k = 0; k < p->n_order; k++) /* a later output of the same scope takes its place */
        for (int j = k + 1; out[k] && j < p->n_order; j++)
            if (out[j] && scope_len[j] == scope_len[k] && strncmp(g->t[p->order[j]]->name, g->t[p->order[k]]->name, (size_t)scope_len[k]) == 0)
                out[k] = false;
    ts_free(scope_len);
    return TS_OK;
}

ts_status ts_stab_resolve(const ts_model_def *m, ts_prog *p, bool *want) {
    if (!m->opts->n_stability) return TS_OK;
    if (ts_opts_replicas(m->opts) > 1 || ts_opts_stages(m->opts) > 1)
        return ts_error(TS_ERR_UNSUPPORTED, "stability signals (ts_options_watch_stability, --watch-stability) run on one replica and one "
                                            "pipeline stage; drop the replicas or stages, or the stability watch");
    ts_stab *s = ts_calloc(1, sizeof *s);
    if (!s) return TS_ERR_OUT_OF_MEMORY;
    p->stab = s;
    s->rows_run = -1;
    s->period = m->opts->stability[0].period;
    for (size_t k = 1; k < m->opts->n_stability; k++)
        if (m->opts->stability[k].period < s->period) s->period = m->opts->stability[k].period;
    const ts_graph *g = m->g;
    char layer[600];
    int64_t max_rows = 0;
    bool *last = ts_calloc((size_t)p->n_order + 1, sizeof *last);
    if (!last) return TS_ERR_OUT_OF_MEMORY;
    ts_status lst = layer_outputs(g, p, last);
    for (int k = 0; k < p->n_order && !lst; k++) {
        const ts_tensor *t = g->t[p->order[k]];
        ts_status st = TS_OK;
        if (last[k] && wanted(m, layer_of(t->name, layer, sizeof layer), NULL)) { /* the layer's output */
            int e = p->value_entry[t->id];
            if (e >= 0 && ts_entry_view_dtype(&p->entries[e]) == TS_F32) {
                want[e] = true;
                if (!(st = add_row(s, layer, TS_SIG_RMS, 0, e, -1))) st = add_row(s, layer, TS_SIG_MAX_ABS, 0, e, -1);
            }
        }
        int in = t->n_in ? p->value_entry[t->in[0]] : -1;
        if (!st && in >= 0 && p->entries[in].dtype == TS_F32 && t->op == TS_OP_SOFTMAX && p->shape[t->in[0]].ndim == 4 &&
            wanted(m, layer_of(t->name, layer, sizeof layer), NULL)) { /* attention scores [B, H, Tq, Tk] */
            int H = (int)p->shape[t->in[0]].d[1];
            int sum = s->n_sums;
            st = add_job(s, in, H);
            for (int h = 0; h < H && !st; h++) st = add_row(s, layer, TS_SIG_MAX_LOGIT, h, -1, sum + h);
        }
        if (!st && in >= 0 && p->entries[in].dtype == TS_F32 && (t->op == TS_OP_LOG_SOFTMAX || t->op == TS_OP_CROSS_ENTROPY) &&
            wanted(m, layer_of(g->t[t->in[0]]->name, layer, sizeof layer), NULL)) { /* the logits */
            const ts_shape *x = &p->shape[t->in[0]];
            int64_t V = x->ndim ? x->d[x->ndim - 1] : 1, rows = V ? ts_shape_numel(x) / V : 0;
            int sum = s->n_sums;
            if (!(st = add_job(s, in, 0))) st = add_row(s, layer, TS_SIG_LSE, 0, -1, sum);
            max_rows = rows > max_rows ? rows : max_rows;
        }
        lst = st;
    }
    ts_free(last);
    if (lst) return lst;
    if (m->training) {
        if (!(s->param_of = ts_calloc((size_t)p->n_nodes, sizeof *s->param_of))) return TS_ERR_OUT_OF_MEMORY;
        for (int i = 0; i < p->n_nodes; i++) s->param_of[i] = -1;
        bool host = m->dev.backend->opt_update_norms != NULL; /* the update's sums taken as it goes (else a device's: the gradient's watch) */
        for (int k = 0; k < *m->n_state; k++) {
            int node = (*m->state)[k].node;
            const ts_tensor *t = g->t[node];
            if (!p->live[node] || !p->needs_grad[node] || t->frozen || !wanted(m, param_layer(t->name, layer, sizeof layer), t->name)) continue;
            int acc = ts_prog_entry_of(p, node, TS_KIND_ACCUM), idx = s->n_params;
            ts_status st = TS_OK;
            if (host) {
                s->param_of[node] = s->n_params++;
                st = add_row(s, t->name, TS_SIG_GRAD_NORM, 0, -1, idx);
                if (!st) st = add_row(s, t->name, TS_SIG_UPDATE_RATIO, 0, -1, idx);
                if (!st && ts_param_optimizer(m->opt, t)->kind != TS_OPT_SGD) st = add_row(s, t->name, TS_SIG_ADAM_UPDATE, 0, -1, idx);
            } else if (acc >= 0) {
                want[acc] = true;
                st = add_row(s, t->name, TS_SIG_GRAD_NORM, 0, acc, -1);
            }
            if (st) return st;
        }
    }
    if ((s->n_params && (!(s->norm2 = ts_calloc((size_t)s->n_params, sizeof *s->norm2)) || !(s->norm_run = ts_calloc((size_t)s->n_params, sizeof *s->norm_run)) ||
                         !(s->norm_step = ts_calloc((size_t)s->n_params, sizeof *s->norm_step)))))
        return TS_ERR_OUT_OF_MEMORY;
    for (int k = 0; k < s->n_params; k++) s->norm_run[k] = s->norm_step[k] = -1;
    if ((s->n_sums && (!(s->sums = ts_calloc((size_t)s->n_sums, sizeof *s->sums)) || !(s->sum_run = ts_calloc((size_t)s->n_sums, sizeof *s->sum_run)) ||
                       !(s->sum_step = ts_calloc((size_t)s->n_sums, sizeof *s->sum_step)))) ||
        (max_rows && !(s->lse = ts_calloc((size_t)max_rows, sizeof *s->lse))))
        return TS_ERR_OUT_OF_MEMORY;
    for (int k = 0; k < s->n_sums; k++) s->sum_run[k] = s->sum_step[k] = -1;
    for (int k = 0; k < s->n_jobs; k++) {
        ts_entry *e = &p->entries[s->jobs[k].entry];
        e->stab = k;
        e->observed = true;
    }
    return TS_OK;
}

void ts_stab_free(ts_stab *s) {
    if (!s) return;
    for (int r = 0; r < s->n_rows; r++) ts_free(s->rows[r].name);
    ts_free(s->rows);
    ts_free(s->jobs);
    ts_free(s->param_of);
    ts_free(s->norm2);
    ts_free(s->norm_run);
    ts_free(s->norm_step);
    ts_free(s->sums);
    ts_free(s->sum_run);
    ts_free(s->sum_step);
    ts_free(s->lse);
    ts_free(s);
}

bool ts_stab_due(const ts_prog *p, int64_t runs, const ts_entry *e, int64_t sample) {
    int64_t S = e->per_step ? p->samples_step : p->samples_mb;
    return p->stab && sample == S - 1 && runs % p->stab->period == 0;
}

static void finish(ts_stab *s, int64_t runs, int64_t steps, int sum, const ts_stats_partial *q) {
    ts_stats_finish(q, &s->sums[sum]);
    s->sum_run[sum] = runs;
    s->sum_step[sum] = steps;
}

/* The largest of x[0..n) into *mx, *nan set when one is NaN: the stats'
 * extremes in vector registers (core/stats_vec.h) without their sums. */
static void block_max(const float *x, int64_t n, float *mx, bool *nan) {
    enum { V = TS_STATS_VEC };
    ts_vfloat m = *mx - (ts_vfloat){0};
    ts_vint bad = {0};
    int64_t i = 0;
    for (; i + V <= n; i += V) {
        ts_vfloat v;
        memcpy(&v, x + i, sizeof v);
        bad |= v != v;
        m = TS_VMAX(v, m);
    }
    float r = *mx;
    for (int k = 0; k < V; k++) {
        r = m[k] > r ? m[k] : r;
        *nan = *nan || bad[k];
    }
    for (; i < n; i++) {
        r = x[i] > r ? x[i] : r;
        *nan = *nan || isnan(x[i]);
    }
    *mx = r;
}

/* The larger of a and m, NaN once either is (the max that a NaN wins). */
static inline float max_nan(float a, float m) { return a > m || a != a ? a : m; }

/* log(sum(exp(x))) of a row of n, from its max: ts_vexp's lanes (no libm
 * call; within 2 ulp of expf) summed in float over runs of LSE_RUN
 * columns (terms in [0, 1], a few dozen a lane), then in double. NaN when
 * the row has one, its max when that is infinite. */
#define LSE_RUN (32 * TS_STATS_VEC)
static float row_lse(const float *x, int64_t n) {
    enum { L = TS_STATS_VEC };
    int64_t whole = n / L * L;
    float m[L], mx = -INFINITY;
    for (int l = 0; l < L; l++) m[l] = -INFINITY;
    for (int64_t c = 0; c < whole; c += L)
        for (int l = 0; l < L; l++) m[l] = max_nan(x[c + l], m[l]);
    for (int l = 0; l < L; l++) mx = max_nan(m[l], mx);
    for (int64_t c = whole; c < n; c++) mx = max_nan(x[c], mx);
    if (!isfinite(mx)) return mx;
    double sum = 0;
    for (int64_t r = 0; r < whole; r += LSE_RUN) {
        int64_t end = whole - r < LSE_RUN ? whole : r + LSE_RUN;
        float part[L] = {0};
        for (int64_t c = r; c < end; c += L)
            for (int l = 0; l < L; l++) part[l] += ts_vexp(x[c + l] - mx);
        for (int l = 0; l < L; l++) sum += (double)part[l];
    }
    for (int64_t c = whole; c < n; c++) sum += (double)ts_vexp(x[c] - mx);
    return (float)((double)mx + log(sum));
}

/* row_lse of `rows` rows of n into out. Rows shorter than four vectors
 * (a classifier's few classes) go TS_STATS_VEC at a time, a row a lane,
 * the sums in double: a row's reductions across lanes would outweigh its
 * few values. */
static void rows_lse(const float *x, int64_t rows, int64_t n, float *out) {
    enum { L = TS_STATS_VEC };
    int64_t r = 0;
    for (; n < 4 * L && r + L <= rows; r += L) {
        const float *b = x + r * n;
        float m[L];
        double sum[L];
        for (int l = 0; l < L; l++) m[l] = -INFINITY, sum[l] = 0;
        for (int64_t c = 0; c < n; c++)
            for (int l = 0; l < L; l++) m[l] = max_nan(b[l * n + c], m[l]);
        for (int64_t c = 0; c < n; c++)
            for (int l = 0; l < L; l++) sum[l] += (double)ts_vexp(b[l * n + c] - m[l]); /* NaN where m is not finite: not used */
        for (int l = 0; l < L; l++) out[r + l] = isfinite(m[l]) ? (float)((double)m[l] + log(sum[l])) : m[l];
    }
    for (; r < rows; r++) out[r] = row_lse(x + r * n, n);
}

void ts_stab_head(ts_prog *p, int64_t runs, int64_t steps, const ts_entry *e, int64_t h, float mx, bool nan) {
    ts_stab *s = p->stab;
    const ts_stab_job *j = &s->jobs[e->stab];
    ts_summary *out = &s->sums[j->sum + h];
    out->what = TS_WATCH_STATS;
    out->stats = (ts_stats){.count = e->numel / j->heads, .nans = nan, .pos_infs = mx == INFINITY, .max = mx, .min = NAN, .mean = NAN, .std = NAN};
    s->sum_run[j->sum + h] = runs;
    s->sum_step[j->sum + h] = steps;
}

void ts_stab_observe(ts_prog *p, int64_t runs, int64_t steps, const ts_entry *e) {
    ts_stab *s = p->stab;
    const ts_stab_job *j = &s->jobs[e->stab];
    const float *x = e->data;
    if (j->heads > 0) { /* [B, H, Tq, Tk]: head h's logits are B blocks of Tq*Tk; its max, and whether a NaN is there */
        int64_t H = j->heads, block = e->shape.d[2] * e->shape.d[3], B = H && block ? e->numel / (H * block) : 0;
        for (int64_t h = 0; h < H; h++) {
            float mx = -INFINITY;
            bool nan = false;
            for (int64_t b = 0; b < B; b++) block_max(x + (b * H + h) * block, block, &mx, &nan);
            ts_stab_head(p, runs, steps, e, h, mx, nan);
        }
        return;
    }
    int64_t V = e->shape.ndim ? e->shape.d[e->shape.ndim - 1] : 1, rows = V ? e->numel / V : 0;
    rows_lse(x, rows, V, s->lse);
    ts_stats_partial q;
    ts_stats_partial_init(&q, TS_WATCH_STATS);
    ts_stats_partial_add(&q, s->lse, rows);
    finish(s, runs, steps, j->sum, &q);
}

void ts_stab_update_done(ts_prog *p, int64_t runs, int64_t steps, int node, const double sq[4]) {
    ts_stab *s = p->stab;
    int k = s->param_of[node];
    memcpy(s->norm2[k], sq, sizeof s->norm2[k]);
    s->norm_run[k] = runs;
    s->norm_step[k] = steps;
}

/* NaN when a NaN was summarised, Inf when an Inf was, else v. */
static double flagged(const ts_stats *st, double v) {
    if (st->nans) return NAN;
    if (st->pos_infs || st->neg_infs) return INFINITY;
    return v;
}

static double signal_value(const ts_stab_row *r, const ts_summary *src, const double *sq) {
    const ts_stats *st = src ? &src->stats : NULL;
    int64_t finite = st ? st->count - st->nans - st->pos_infs - st->neg_infs : 0;
    switch (r->sig) {
    case TS_SIG_RMS: return flagged(st, finite ? st->l2 / sqrt((double)finite) : 0.0);
    case TS_SIG_MAX_ABS: return flagged(st, finite ? fmax(fabs(st->min), fabs(st->max)) : 0.0);
    case TS_SIG_MAX_LOGIT: return st->nans ? NAN : st->pos_infs ? INFINITY : st->max;
    case TS_SIG_LSE: return st->nans ? NAN : st->pos_infs ? INFINITY : st->mean;
    case TS_SIG_GRAD_NORM: return st ? flagged(st, st->l2) : sqrt(sq[0]);
    case TS_SIG_UPDATE_RATIO: return sq[1] > 0 ? sqrt(sq[2] / sq[1]) : sq[2] > 0 ? INFINITY : isnan(sq[2]) ? NAN : 0.0; /* NaN/Inf carried by the sums */
    case TS_SIG_ADAM_UPDATE: return sqrt(sq[3]);
    }
    return NAN;
}

void ts_stab_rows(ts_prog *p, int64_t runs) {
    ts_stab *s = p->stab;
    if (!s || s->rows_run == runs) return;
    s->rows_run = runs;
    for (int r = 0; r < s->n_rows; r++) {
        const ts_stab_row *row = &s->rows[r];
        ts_watch_result *res = &p->watch_results[p->n_watch + r];
        ts_summary *out = &p->summaries[p->n_watch + r];
        const ts_summary *src = NULL;
        const double *sq = NULL;
        int64_t run, step;
        if (row->entry >= 0) {
            const ts_watch_result *w = &p->watch_results[p->entries[row->entry].watch];
            src = w->summary, run = w->run, step = w->step;
        } else if (row->sig >= TS_SIG_GRAD_NORM) { /* the update's sums */
            sq = s->norm2[row->sum], run = s->norm_run[row->sum], step = s->norm_step[row->sum];
        } else {
            src = &s->sums[row->sum], run = s->sum_run[row->sum], step = s->sum_step[row->sum];
        }
        if (run < 0 || run % s->period) continue; /* not taken, or taken for a watch of the user's between the rows' runs */
        double v = signal_value(row, src, sq);
        memset(out, 0, sizeof *out);
        out->what = TS_WATCH_STATS;
        out->stored = TS_F32;
        ts_stats *o = &out->stats;
        o->count = 1;
        o->nans = isnan(v);
        o->pos_infs = isinf(v) && v > 0;
        o->neg_infs = isinf(v) && v < 0;
        o->zeros = v == 0.0;
        o->mean = o->min = o->max = isfinite(v) ? v : NAN;
        o->std = isfinite(v) ? 0.0 : NAN;
        o->l2 = isfinite(v) ? fabs(v) : 0.0;
        res->run = run;
        res->step = step;
    }
}

void ts_stab_bind(ts_prog *p) {
    ts_stab *s = p->stab;
    for (int r = 0; s && r < s->n_rows; r++)
        p->watch_results[p->n_watch + r] = (ts_watch_result){s->rows[r].name, -1, -1, &p->summaries[p->n_watch + r], -1, -1, -1, -1};
}
