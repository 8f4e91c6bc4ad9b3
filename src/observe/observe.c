/* observe.c -- the one hook the executor calls when a tensor is final:
 * anchors copy it by their output mode, watches summarise it where it lives,
 * outfeeds stream it, numeric checks stop the run at the first NaN/Inf. */
#include "observe/run.h"
#include "observe/observe.h"

#include "backend/registry/registry.h"
#include "core/metrics.h"
#include "graph/ops.h"
#include "observe/outfeed.h"
#include "compile/stability.h"
#include "core/stats.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- anchors: rows by output mode (docs/architecture.md#output-modes) */

/* Sample `sample` of x (entry e's values where the anchors' rows are: the
 * host's arena, or a device's copy of it) into anchor a's rows, through
 * the backend's copies (the CPU's: memcpy and a plain sum). */
static void capture_anchor(ts_run *run, const ts_anchor *a, const ts_entry *e, const float *x, int64_t sample, int64_t S) {
    const ts_prog *p = run->prog;
    const ts_backend *be = p->backend;
    size_t n = (size_t)ts_entry_cells(e);
    float *rows = p->dev_anchors ? p->dev_anchors + (a->local - p->arena_anchors) : a->local;
    switch (a->mode) {
    case TS_OUTPUT_ALL: be->copy_on_device(run->dev.stream, rows + (size_t)sample * n, x, n * sizeof(float)); break;
    case TS_OUTPUT_EVERY_N:
        if ((sample + 1) % a->period == 0)
            be->copy_on_device(run->dev.stream, rows + (size_t)((sample + 1) / a->period - 1) * n, x, n * sizeof(float));
        break;
    case TS_OUTPUT_SUM:
        if (sample == 0) be->copy_on_device(run->dev.stream, rows, x, n * sizeof(float));
        else be->accumulate(run->dev.stream, rows, x, (int64_t)n);
        break;
    default:
        if (sample == S - 1) be->copy_on_device(run->dev.stream, rows, x, n * sizeof(float));
        break;
    }
}

/* ---- watches: split big tensors over the pool, merge partial stats */

/* Below this many values one thread summarises or scans: a hand-off to the
 * pool costs more than it saves. It is a few microseconds on a quiet
 * machine, but tens when the worker has yielded its core to another
 * process (25k activations of the MLP at batch 32: 8 us on one thread,
 * 57 us split, on average on a loaded 2-core machine). */
#define SPLIT_MIN TS_SUMMARY_SPLIT_MIN
/* The optimizer step summarises the gradient and the updated parameter
 * from registers as it updates them (ts_opt_update_summarised): the
 * summaries' arithmetic hides under the update's memory traffic. At batch
 * 32 the MLP's fc1 step took about 65 us a thread with separate passes, 40
 * fused, 38 with no summaries. Its sums merge into the partial summaries
 * every STEP_FLUSH values, so the shift follows the running mean. */
#define STEP_FLUSH (1 << 14)
/* Otherwise (other watches on the step: optimizer state, histograms) it
 * walks the parameter in chunks this size: each chunk is summarised before
 * and after its update while it sits in L1. */
#define STEP_CHUNK 4096

static bool watch_due(const ts_run *run, const ts_entry *e, int64_t sample) {
    const ts_prog *p = run->prog;
    int64_t S = e->per_step ? p->samples_step : p->samples_mb;
    return e->watch >= 0 && sample == S - 1 && run->runs % p->watch_period[e->watch] == 0;
}

/* One walk over entries of the same size, split into one slice per thread:
 * summaries of the entries, and optionally an update between those it reads
 * and those it writes. Slot s of summary k is parts[s * TS_STEP_WATCHES + k]. */
typedef struct walk_job {
    ts_prog *p;
    const ts_entry *entries[TS_STEP_WATCHES];
    int part[TS_STEP_WATCHES]; /* summary each entry adds to (shared by aliases) */
    int n_read, n;             /* entries [0, n_read) are read by the update, the rest written */
    int64_t numel;
    int slots;
    ts_stats_partial *parts;    /* slot s of summary k: parts[s * TS_STEP_WATCHES + k] (p->parts, a deferred one's its thread's) */
    const ts_step_update *step; /* NULL: summaries only */
    bool fused;                 /* the step summarises the gradient and the parameter as it updates */
    bool relu;                  /* summaries only: entry 1 is the Relu of entry 0, summarised from entry 0's values */
    double (*sq)[4];            /* with a step: per slot, the sums of squares stability signals take (step->norms); NULL: none */
} walk_job;

static void walk_slots(void *ctx, int64_t s0, int64_t s1) {
    const walk_job *j = ctx;
    for (int64_t s = s0; s < s1; s++) {
        int64_t b = j->numel * s / j->slots, e = j->numel * (s + 1) / j->slots;
        ts_stats_partial *parts = &j->parts[s * TS_STEP_WATCHES];
        if (j->relu) {
            ts_stats_partial_add_relu(&parts[0], &parts[1], j->entries[0]->data + b, e - b);
            continue;
        }
        if (!j->step) { /* summaries only: one pass */
            for (int k = 0; k < j->n; k++)
                if (j->part[k] == k) ts_stats_partial_add(&parts[k], j->entries[k]->data + b, e - b);
            continue;
        }
        if (j->fused) { /* the gradient (entry 0 and its aliases) and the parameter (entry n_read), and the squares */
            ts_stats_partial *gp = j->n_read ? &parts[0] : NULL, *pp = j->n > j->n_read ? &parts[j->n_read] : NULL;
            for (int64_t c = b; c < e; c += STEP_FLUSH) {
                ts_stats_stream gs = {0}, ps = {0};
                j->step->summarised(j->step->ctx, c, e - c < STEP_FLUSH ? e : c + STEP_FLUSH, &gs, gp, &ps, pp, j->sq ? j->sq[s] : NULL);
                if (gp) ts_stats_stream_flush(&gs, gp);
                if (pp) ts_stats_stream_flush(&ps, pp);
            }
            continue;
        }
        for (int64_t c = b; c < e; c += STEP_CHUNK) {
            int64_t len = e - c < STEP_CHUNK ? e - c : STEP_CHUNK;
            for (int k = 0; k < j->n_read; k++)
                if (j->part[k] == k) ts_stats_partial_add(&parts[k], j->entries[k]->data + c, len);
            if (j->sq) j->step->norms(j->step->ctx, c, c + len, j->sq[s]);
            else j->step->update(j->step->ctx, c, c + len);
            for (int k = j->n_read; k < j->n; k++) ts_stats_partial_add(&parts[k], j->entries[k]->data + c, len);
        }
    }
}

/* The step can summarise as it updates when what is watched is the
 * gradient it reads and the parameter it writes, with plain stats. */
static bool entries_fusable(const walk_job *j) {
    const ts_step_update *u = j->step;
    for (int k = 0; k < j->n; k++) {
        const ts_entry *e = j->entries[k];
        bool read = k < j->n_read;
        if (j->p->watch_what[e->watch] != TS_WATCH_STATS || e->data != (read ? u->grad : u->param)) return false;
        if (j->part[k] != (read ? 0 : j->n_read)) return false; /* aliases of entry 0 and of entry n_read */
    }
    return true;
}

static bool step_fusable(const walk_job *j) { return j->step->summarised && entries_fusable(j); }

/* Each entry's summary, from its partial, as the result of run `runs` at
 * step `steps`. */
static void publish(const walk_job *j, int64_t runs, int64_t steps) {
    ts_prog *p = j->p;
    for (int k = 0; k < j->n; k++) {
        int w = j->entries[k]->watch;
        ts_stats_finish(&j->parts[j->part[k]], &p->summaries[w]);
        p->watch_results[w].run = runs;
        p->watch_results[w].step = steps;
    }
}

/* Runs the walk and publishes each entry's summary as this run's result. */
static void walk(ts_run *run, walk_job *j) {
    ts_prog *p = run->prog;
    j->slots = j->numel >= SPLIT_MIN ? p->n_slots : 1;
    j->parts = p->parts;
    for (int s = 0; s < j->slots; s++) {
        for (int k = 0; k < j->n; k++) ts_stats_partial_init(&p->parts[s * TS_STEP_WATCHES + k], p->watch_what[j->entries[k]->watch]);
        if (j->sq) memset(j->sq[s], 0, sizeof j->sq[s]);
    }
    ts_pool_for(j->slots > 1 ? run->pool : NULL, j->slots, 1, walk_slots, j);
    for (int k = 0; k < j->n; k++)
        if (j->part[k] == k)
            for (int s = 1; s < j->slots; s++) ts_stats_merge(&p->parts[k], &p->parts[s * TS_STEP_WATCHES + k]);
    for (int s = 1; j->sq && s < j->slots; s++)
        for (int k = 0; k < 4; k++) j->sq[0][k] += j->sq[s][k];
    publish(j, run->runs, run->steps);
}

/* With a watched Relu of e due now (relu_out), both in one pass over e. */
/* A 16-bit tensor's summary: what the rounding that made it lost, as the
 * kernel counted it (NaN on a device that does not count). */
static void note_stored(const ts_run *run, const ts_entry *e, ts_summary *s) {
    s->stored = e->grid;
    if (e->grid == TS_F32) return;
    bool counted = run->dev.backend->counts_half_loss && e->numel > 0;
    s->stored_underflow = counted ? (double)e->lost.underflow / (double)e->numel : NAN;
    s->stored_overflow = counted ? (double)e->lost.overflow / (double)e->numel : NAN;
}

/* e's summary, and y's (its Relu's, taken from e's values) unless NULL. */
static walk_job pair_job(ts_prog *p, const ts_entry *e, const ts_entry *y) {
    walk_job j = {.p = p, .entries = {e, y}, .part = {0, 1}, .n_read = y ? 2 : 1, .n = y ? 2 : 1, .numel = e->numel, .relu = y != NULL};
    return j;
}

/* e's summary, and its watched Relu's where that one is due now. */
static walk_job summary_job(ts_run *run, const ts_entry *e, int64_t sample) {
    const ts_entry *y = e->relu_out >= 0 ? &run->prog->entries[e->relu_out] : NULL;
    return pair_job(run->prog, e, y && watch_due(run, y, sample) && ts_in_stage(run, y->node) ? y : NULL);
}

static void summarize(ts_run *run, const ts_entry *e, int64_t sample) {
    walk_job j = summary_job(run, e, sample);
    walk(run, &j);
    for (int k = 0; k < j.n; k++) note_stored(run, j.entries[k], &run->prog->summaries[j.entries[k]->watch]);
}

/* ---- deferred summaries: a forward pass's small activations summarised
 * by a worker the pass leaves idle (between its jobs: the steps of a small
 * model that one thread runs), while the pass goes on. The plan keeps each
 * one's memory to the forward's end (compile.c's mark_deferrable), and the
 * pass waits for them there (ts_observe_forward_end), so every result is
 * there when the run ends and nothing reads a summary a worker is still
 * making. The same one-thread pass as summarize's: the same bits. */

/* Item k of the ring on pool thread `thread`, into that thread's partials. */
static void deferred_item(void *ctx, uint64_t item, int thread) {
    ts_run *run = ctx;
    ts_prog *p = run->prog;
    const int *d = &p->defer_ring[2 * (item % TS_DEFER_RING)];
    walk_job j = pair_job(p, &p->entries[d[0]], d[1] >= 0 ? &p->entries[d[1]] : NULL);
    j.slots = 1, j.parts = &p->defer_parts[2 * thread];
    for (int k = 0; k < j.n; k++) ts_stats_partial_init(&j.parts[k], TS_WATCH_STATS);
    walk_slots(&j, 0, 1);
    publish(&j, p->defer_runs, p->defer_steps);
    for (int k = 0; k < j.n; k++) note_stored(run, j.entries[k], &p->summaries[j.entries[k]->watch]);
}

/* e's summary (and its Relu's) posted to the pool; false where it is taken now instead. */
static bool defer_summary(ts_run *run, ts_entry *e, int64_t sample) {
    ts_prog *p = run->prog;
    if (!p->deferring || !e->deferrable) return false;
    if (p->n_pending == TS_DEFER_RING) ts_observe_drain(run); /* the ring's slots are the ones waiting */
    walk_job j = summary_job(run, e, sample);
    int *d = &p->defer_ring[2 * (ts_pool_posted(run->pool) % TS_DEFER_RING)];
    d[0] = (int)(e - p->entries);
    d[1] = j.n == 2 ? (int)(j.entries[1] - p->entries) : -1;
    e->deferred_run = run->runs;
    if (d[1] >= 0) p->entries[d[1]].deferred_run = run->runs;
    p->n_pending++;
    ts_pool_post(run->pool, deferred_item, run);
    return true;
}

void ts_observe_drain(ts_run *run) {
    ts_prog *p = run->prog;
    if (!p->n_pending) return;
    ts_pool_drain(run->pool);
    ts_counter_add("SummariesDeferred", p->n_pending);
    p->n_pending = 0;
}

void ts_observe_forward_begin(ts_run *run) {
    ts_prog *p = run->prog;
    p->deferring = p->defer_ring && !run->rerun && ts_pool_threads(run->pool) > 1;
    p->defer_runs = run->runs;
    p->defer_steps = run->steps;
}

void ts_observe_forward_end(ts_run *run) {
    ts_observe_drain(run);
    run->prog->deferring = false;
}

/* ---- an attention's twin summarised by its one pass */

/* The kernel's role (ts_att_sums) a twin role's summary comes from: the
 * scaled scores' from the raw ones. */
static const int twin_kernel_role[TS_TWIN_ROLES] = {TS_ATT_RAW, TS_ATT_RAW, TS_ATT_MASKED, TS_ATT_PROB, TS_ATT_OUT};

/* The role of node in fu's twin, else -1. */
static int twin_role(const ts_fusion *fu, int node) {
    for (int r = 0; r < TS_TWIN_ROLES; r++)
        if (fu->role[r] == node && node >= 0) return r;
    return -1;
}

/* Whether e, of role r, has the stability job the pass's summaries give:
 * the scores' per-head max (the masked scores the softmax reads) */
static bool twin_stab(const ts_prog *p, const ts_entry *e, int r) {
    return e->stab >= 0 && r == TS_TWIN_MASKED && p->stab->jobs[e->stab].heads > 0;
}

bool ts_observe_twin_summarised(const ts_run *run, const ts_fusion *fu, int node) {
    const ts_prog *p = run->prog;
    const ts_entry *e = &p->entries[p->value_entry[node]];
    int r = twin_role(fu, node);
    bool watch = e->watch >= 0 && p->watch_what[e->watch] == TS_WATCH_STATS && !e->watch_in_step;
    bool stab = r >= 0 && twin_stab(p, e, r);
    /* a held run copies every tensor, a rerun compares them: the twin's ops run */
    return r >= 0 && !p->hold_ready && !run->rerun && (watch || e->watch < 0) && (stab || e->stab < 0) && (e->watch >= 0 || stab) &&
           !e->n_anchors && !e->n_outfeeds && !e->check && e->dtype == TS_F32;
}

/* The entry of role r of fu's twin when the pass takes its summary (*watch)
 * or its stability job (*stab) at sample, else NULL. */
static const ts_entry *twin_due(const ts_run *run, const ts_fusion *fu, int r, int64_t sample, bool *watch, bool *stab) {
    int node = fu->role[r];
    if (node < 0 || !ts_observe_twin_summarised(run, fu, node)) return NULL;
    const ts_prog *p = run->prog;
    const ts_entry *e = &p->entries[p->value_entry[node]];
    *watch = watch_due(run, e, sample);
    *stab = twin_stab(p, e, r) && ts_stab_due(p, run->runs, e, sample);
    return *watch || *stab ? e : NULL;
}

/* The shape of fu's queries, [B, H, T, D]: its (batch, head) pairs */
static const ts_shape *twin_q(const ts_run *run, const ts_fusion *fu) { return &run->prog->shape[run->g->t[fu->node]->in[0]]; }

/* The stability job of e (the scores the softmax reads) from the pairs'
 * sums of them: each head's max over the batch, and whether a NaN was
 * seen. */
static void twin_stab_heads(ts_run *run, const ts_fusion *fu, const ts_entry *e, const ts_att_sums *s) {
    const ts_shape *q = twin_q(run, fu);
    int64_t B = q->d[0], H = q->d[1];
    for (int64_t h = 0; h < H; h++) {
        float mx = -INFINITY;
        bool nan = false;
        for (int64_t b = 0; b < B; b++) {
            const ts_stats_sums *a = &s->pairs[(b * H + h) * TS_ATT_ROLES + TS_ATT_MASKED];
            float m = a->pos_infs ? INFINITY : a->n + a->rn > 0 ? (float)a->max : -INFINITY;
            mx = m > mx ? m : mx;
            nan = nan || a->nans;
        }
        ts_stab_head(run->prog, run->runs, run->steps, e, h, mx, nan);
    }
}

static int64_t twin_pairs(const ts_run *run, const ts_fusion *fu) {
    const ts_shape *q = twin_q(run, fu);
    return q->d[0] * q->d[1];
}

bool ts_observe_twin_begin(ts_run *run, const ts_fusion *fu, int64_t sample, ts_att_sums *s) {
    ts_prog *p = run->prog;
    *s = (ts_att_sums){.fill = fu->fill, .pairs = p->twin_sums};
    bool watch, stab;
    for (int r = 0; r < TS_TWIN_ROLES; r++)
        if (twin_due(run, fu, r, sample, &watch, &stab)) s->want |= 1u << twin_kernel_role[r];
    if (s->want) memset(p->twin_sums, 0, (size_t)(twin_pairs(run, fu) * TS_ATT_ROLES) * sizeof *p->twin_sums);
    return s->want != 0;
}

void ts_observe_twin_end(ts_run *run, const ts_fusion *fu, int64_t sample, const ts_att_sums *s) {
    ts_prog *p = run->prog;
    int64_t pairs = twin_pairs(run, fu);
    ts_stats_partial *part = &p->parts[0]; /* the calling thread's, between walks */
    for (int r = 0; r < TS_TWIN_ROLES; r++) {
        int kr = twin_kernel_role[r];
        bool watch, stab;
        const ts_entry *e = twin_due(run, fu, r, sample, &watch, &stab); /* as begin found it: nothing changes the flags between */
        if (!e || !(s->want >> kr & 1u)) continue;
        if (stab) twin_stab_heads(run, fu, e, s);
        if (!watch) continue;
        ts_stats_partial_init(part, TS_WATCH_STATS);
        for (int64_t q = 0; q < pairs; q++) ts_stats_sums_merge(part, &s->pairs[q * TS_ATT_ROLES + kr]);
        if (r == TS_TWIN_SCALED) ts_stats_partial_scale(part, run->g->t[fu->role[r]]->fparam);
        ts_stats_finish(part, &p->summaries[e->watch]);
        p->watch_results[e->watch].run = run->runs;
        p->watch_results[e->watch].step = run->steps;
        note_stored(run, e, &p->summaries[e->watch]);
    }
}

/* ---- summaries a kernel takes as it writes its values */

/* A kernel's rows (the values of one channel of one sample) shorter than
 * this take the watch's own pass: each row is summed apart, a call each. */
#define KERNEL_SUMS_ROW 64

/* Whether e's only observer is a plain stats watch a kernel may take: no
 * anchor, outfeed, check or stability job reads its values, and no held
 * run or rerun copies or compares them. */
static bool kernel_may_sum(const ts_run *run, const ts_entry *e) {
    const ts_prog *p = run->prog;
    return e->kind == TS_KIND_VALUE && e->watch >= 0 && p->watch_what[e->watch] == TS_WATCH_STATS && !e->watch_in_step && e->stab < 0 &&
           !e->n_anchors && !e->n_outfeeds && !e->check && e->dtype == TS_F32 && !p->hold_ready && !run->rerun;
}

/* The dimension of node's value whose items its kernel sums, where the
 * kernel may take the value's plain stats: 1, channels (its row
 * sums_channels; rows of at least KERNEL_SUMS_ROW values), or 0, samples
 * (sums_samples, which the executor checks afterwards); -1: it may not. */
static int kernel_items(const ts_run *run, int node, const ts_kctx *kc) {
    const ts_prog *p = run->prog;
    const ts_shape *s = &kc->out_shape;
    int v = p->value_entry[node], dim = ts_kernel_sums_dim(&run->dev.backend->kernels[run->g->t[node]->op]);
    if (dim < 0 || v < 0 || !p->chan_sums || !run->dev.backend->host_addressable || s->ndim < 2 || s->d[0] < 1 || s->d[1] < 1 ||
        s->d[dim] > p->chan_sums_n || !kernel_may_sum(run, &p->entries[v]))
        return -1;
    return dim == 1 && ts_shape_numel(s) / (s->d[0] * s->d[1]) < KERNEL_SUMS_ROW ? -1 : dim;
}

bool ts_observe_kernel_sums(const ts_run *run, int node, const ts_kctx *kc) { return kernel_items(run, node, kc) == 1; }

bool ts_observe_kernel_begin(ts_run *run, int node, int relu, int64_t sample, ts_kctx *kc) {
    ts_prog *p = run->prog;
    int dim = kernel_items(run, node, kc);
    if (dim < 0) return false;
    size_t W = (size_t)kc->out_shape.d[dim];
    const ts_entry *y = &p->entries[p->value_entry[node]], *r = dim == 1 && relu >= 0 && kc->relu_out ? &p->entries[p->value_entry[relu]] : NULL;
    kc->sums_out = watch_due(run, y, sample) ? p->chan_sums : NULL;
    /* a norm's Relu's beside its value's (its sums follow x's lanes) */
    kc->sums_relu = kc->sums_out && r && r->numel == y->numel && kernel_may_sum(run, r) && watch_due(run, r, sample) ? p->chan_sums + W : NULL;
    if (kc->sums_out) memset(kc->sums_out, 0, W * sizeof *kc->sums_out);
    if (kc->sums_relu) memset(kc->sums_relu, 0, W * sizeof *kc->sums_relu);
    return kc->sums_out || kc->sums_relu;
}

/* e's summary from the work items' sums, merged in their order (the same
 * bits on any number of threads), as this run's result */
static void kernel_publish(ts_run *run, ts_entry *e, const ts_stats_sums *sums, int64_t W) {
    ts_prog *p = run->prog;
    ts_stats_partial *part = &p->parts[0]; /* the calling thread's, between walks */
    ts_stats_partial_init(part, TS_WATCH_STATS);
    for (int64_t w = 0; w < W; w++) ts_stats_sums_merge(part, &sums[w]);
    ts_stats_finish(part, &p->summaries[e->watch]);
    p->watch_results[e->watch].run = run->runs;
    p->watch_results[e->watch].step = run->steps;
    note_stored(run, e, &p->summaries[e->watch]);
    e->kernel_run = run->runs;
}

void ts_observe_kernel_end(ts_run *run, int node, int relu, const ts_kctx *kc) {
    ts_prog *p = run->prog;
    ts_entry *y = &p->entries[p->value_entry[node]];
    bool samples = ts_kernel_sums_dim(&run->dev.backend->kernels[run->g->t[node]->op]) == 0;
    int64_t W = kc->out_shape.d[samples ? 0 : 1], count = 0;
    for (int64_t w = 0; samples && w < W; w++) count += kc->sums_out[w].count;
    if (samples && count != y->numel) return; /* its path does not sum: ts_observe summarises it */
    if (kc->sums_out) kernel_publish(run, y, kc->sums_out, W);
    if (kc->sums_relu) kernel_publish(run, &p->entries[p->value_entry[relu]], kc->sums_relu, W);
    ts_counter_add("SummariesInKernel", (kc->sums_out != NULL) + (kc->sums_relu != NULL));
}

/* An entry whose values are another's (same_values: a reshape or a
 * transpose of it, a gradient an Add passed on): when that one was
 * summarised this run for the same `what`, its summary is this one's too
 * (no second pass over the data). True when it was reused. */
static bool reuse_same_summary(ts_run *run, const ts_entry *e) {
    ts_prog *p = run->prog;
    if (e->same_values < 0) return false;
    const ts_entry *in = &p->entries[e->same_values];
    if (in->deferred_run == run->runs) ts_observe_drain(run); /* its summary may be a worker's still */
    int w = e->watch, wi = in->watch;
    if (wi < 0 || p->watch_what[wi] != p->watch_what[w] || p->watch_results[wi].run != run->runs || in->numel != e->numel) return false;
    ts_summary_copy(&p->summaries[w], &p->summaries[wi]);
    p->watch_results[w].run = run->runs;
    p->watch_results[w].step = run->steps;
    return true;
}

/* The entries of node's step d summarised in it (watched there, due now)
 * into j: those the update reads first, then those it writes; an entry
 * holding another's memory with the same `what` shares its summary. */
static void step_entries(const ts_run *run, int node, int64_t d, walk_job *j) {
    const ts_prog *p = run->prog;
    int A = run->opts.grad_accum;
    for (int pass = 0; pass < 2; pass++) {
        for (int e = p->grad_entry[node]; e >= 0 && e < p->n_entries && p->entries[e].node == node; e++) {
            const ts_entry *en = &p->entries[e];
            bool read = en->kind == TS_KIND_GRAD || en->kind == TS_KIND_ACCUM;
            if (!en->watch_in_step || read != (pass == 0)) continue;
            if (!watch_due(run, en, en->per_step ? d : d * A + A - 1)) continue;
            int k = j->n++;
            j->entries[k] = en;
            j->part[k] = k;
            for (int q = 0; q < k; q++) /* Accum___ is the gradient's buffer without accumulation */
                if (j->entries[q]->data == en->data && p->watch_what[j->entries[q]->watch] == p->watch_what[en->watch]) j->part[k] = q;
        }
        if (pass == 0) j->n_read = j->n;
    }
}

/* Whether parameter node's step d sums the squares its stability signals
 * take (the update sums them as it goes). */
static bool norms_due(const ts_run *run, int node, int64_t d) {
    const ts_prog *p = run->prog;
    const ts_stab *st = p->stab;
    return st && st->param_of && st->param_of[node] >= 0 && d == p->samples_step - 1 && run->runs % st->period == 0;
}

void ts_observe_step(ts_run *run, int node, int64_t d, const ts_step_update *u, int64_t n) {
    ts_prog *p = run->prog;
    walk_job j = {.p = p, .numel = n, .step = u};
    step_entries(run, node, d, &j);
    ts_stab *st = p->stab;
    bool norms = u->norms && norms_due(run, node, d);
    if (j.n == 0 && !norms) {
        ts_pool_for(n >= SPLIT_MIN ? run->pool : NULL, n, SPLIT_MIN / 2, u->update, u->ctx); /* unwatched: split big ones */
        return;
    }
    j.sq = norms ? st->sq : NULL;
    j.fused = j.n > 0 && step_fusable(&j); /* with norms: the squares summed in the same pass */
    walk(run, &j);
    if (norms) ts_stab_update_done(run->prog, run->runs, run->steps, node, st->sq[0]);
}

/* ---- many parameters' steps as one job */

/* The step's entries as a batch takes them: the ones the update reads and
 * writes, from registers (step_fusable, on the parameter's own buffers). */
static bool step_batch_entries(ts_run *run, int node, int64_t d, walk_job *j, ts_step_update *u) {
    ts_prog *p = run->prog;
    u->grad = p->entries[ts_prog_entry_of(p, node, TS_KIND_ACCUM)].data;
    u->param = p->entries[p->value_entry[node]].data;
    *j = (walk_job){.p = p, .step = u};
    step_entries(run, node, d, j);
    if (j->n == 0) return !norms_due(run, node, d) || run->dev.backend->opt_update_norms; /* the squares alone: ts_opt_update_norms */
    return run->dev.backend->opt_update_summarised && entries_fusable(j); /* the squares, if due, in the same pass */
}

bool ts_observe_step_batchable(ts_run *run, int node, int64_t d) {
    walk_job j;
    ts_step_update u = {0};
    return step_batch_entries(run, node, d, &j, &u);
}

void ts_observe_step_add(ts_run *run, ts_step_batch *b, int node, int64_t d, const ts_step_update *u, int64_t n) {
    walk_job j;
    ts_step_update probe = {0};
    step_batch_entries(run, node, d, &j, &probe);
    int k = b->n++;
    if (k == 0) b->start[0] = 0, b->any = b->any_norms = false;
    b->u[k] = *u;
    b->node[k] = node;
    b->norms[k] = u->norms && norms_due(run, node, d);
    b->any_norms |= b->norms[k];
    b->start[k + 1] = b->start[k] + n;
    b->n_read[k] = j.n_read;
    b->n_watched[k] = j.n;
    for (int q = 0; q < j.n; q++) b->watched[k][q] = j.entries[q];
    b->any |= j.n > 0;
}

typedef struct steps_job {
    ts_prog *p;
    ts_step_batch *b;
    int slices;
} steps_job;

/* Parameter k's values in thread slice s of the batch: [*lo, *hi) of its
 * own numbering; false where the slice holds none of them. */
static bool slice_part(const ts_step_batch *b, int slices, int64_t s, int k, int64_t *lo, int64_t *hi) {
    int64_t N = b->start[b->n], a = N * s / slices, e = N * (s + 1) / slices;
    *lo = (a > b->start[k] ? a : b->start[k]) - b->start[k];
    *hi = (e < b->start[k + 1] ? e : b->start[k + 1]) - b->start[k];
    return *lo < *hi;
}

static void steps_slice(void *ctx, int64_t s0, int64_t s1) {
    const steps_job *j = ctx;
    ts_step_batch *b = j->b;
    for (int64_t s = s0; s < s1; s++)
        for (int k = 0; k < b->n; k++) {
            int64_t lo, hi;
            if (!slice_part(b, j->slices, s, k, &lo, &hi)) continue;
            const ts_step_update *u = &b->u[k];
            double *sq = b->norms[k] ? b->sq[k][s] : NULL;
            if (sq) memset(sq, 0, sizeof b->sq[k][s]);
            if (!b->n_watched[k]) {
                if (sq) u->norms(u->ctx, lo, hi, sq);
                else u->update(u->ctx, lo, hi);
                continue;
            }
            /* as walk_slots' fused pass, into the thread's partials, kept as the parameter's part */
            ts_stats_partial *gp = b->n_read[k] ? &j->p->parts[s * TS_STEP_WATCHES] : NULL;
            ts_stats_partial *pp = b->n_watched[k] > b->n_read[k] ? &j->p->parts[s * TS_STEP_WATCHES + 1] : NULL;
            if (gp) ts_stats_partial_init(gp, TS_WATCH_STATS);
            if (pp) ts_stats_partial_init(pp, TS_WATCH_STATS);
            for (int64_t c = lo; c < hi; c += STEP_FLUSH) {
                ts_stats_stream gs = {0}, ps = {0};
                u->summarised(u->ctx, c, hi - c < STEP_FLUSH ? hi : c + STEP_FLUSH, &gs, gp, &ps, pp, sq);
                if (gp) ts_stats_stream_flush(&gs, gp);
                if (pp) ts_stats_stream_flush(&ps, pp);
            }
            if (gp) ts_stats_to_device(gp, &b->sums[k][s][0], NULL);
            if (pp) ts_stats_to_device(pp, &b->sums[k][s][1], NULL);
        }
}

void ts_observe_steps(ts_run *run, ts_step_batch *b) {
    ts_prog *p = run->prog;
    if (!b->n) return;
    int64_t N = b->start[b->n];
    int64_t most = b->any || b->any_norms ? p->n_slots : ts_pool_threads(run->pool); /* the partials' slots where it summarises */
    int slices = (int)(N / STEP_CHUNK < most ? N / STEP_CHUNK : most);
    if (slices < 1) slices = 1;
    steps_job j = {p, b, slices};
    ts_pool_for(slices > 1 ? run->pool : NULL, slices, 1, steps_slice, &j);
    for (int k = 0; b->any_norms && k < b->n; k++) { /* each parameter's squares: its slices' added in order, as walk's */
        if (!b->norms[k]) continue;
        double sq[4] = {0, 0, 0, 0};
        for (int s = 0; s < slices; s++) {
            int64_t lo, hi;
            if (!slice_part(b, slices, s, k, &lo, &hi)) continue;
            for (int q = 0; q < 4; q++) sq[q] += b->sq[k][s][q];
        }
        ts_stab_update_done(p, run->runs, run->steps, b->node[k], sq);
    }
    if (!b->any) return;
    ts_stats_partial *q = &p->parts[0], *r = &p->parts[1];
    for (int k = 0; k < b->n; k++)
        for (int side = 0; side < 2; side++) {
            int from = side ? b->n_read[k] : 0, to = side ? b->n_watched[k] : b->n_read[k];
            if (from == to) continue;
            ts_stats_partial_init(q, TS_WATCH_STATS); /* the threads' parts merged in order, as walk's */
            bool first = true;
            for (int s = 0; s < slices; s++) {
                int64_t lo, hi;
                if (!slice_part(b, slices, s, k, &lo, &hi)) continue;
                ts_stats_from_device(&b->sums[k][s][side], NULL, TS_WATCH_STATS, first ? q : r);
                if (!first) ts_stats_merge(q, r);
                first = false;
            }
            for (int e = from; e < to; e++) {
                int w = b->watched[k][e]->watch;
                ts_stats_finish(q, &p->summaries[w]);
                p->watch_results[w].run = run->runs;
                p->watch_results[w].step = run->steps;
            }
        }
}

/* ---- numeric checks */

/* One numeric-check report, built in place; the first truncation sticks. */
typedef struct report {
    char text[TS_REPORT_MAX];
    size_t used;
} report;

static void add(report *r, const char *fmt, ...) TS_PRINTF(2, 3);
static void add(report *r, const char *fmt, ...) {
    if (r->used >= sizeof r->text) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(r->text + r->used, sizeof r->text - r->used, fmt, ap);
    va_end(ap);
    r->used = n < 0 ? sizeof r->text : r->used + (size_t)n;
}

/* Queues the copy of entry e's count of what its 16-bit rounding lost
 * from the device's slot into the entry (valid once the stream is
 * synchronised); false where nothing is counted on a device. */
static bool queue_lost(ts_run *run, int e) {
    ts_prog *p = run->prog;
    if (!p->dev_lost || p->entries[e].grid == TS_F32) return false;
    p->backend->copy_to_host(run->dev.stream, &p->entries[e].lost, &p->dev_lost[e], sizeof(ts_half_loss));
    return true;
}

const float *ts_device_host_view(ts_run *run, const ts_entry *e) {
    ts_prog *p = run->prog;
    const ts_backend *be = p->backend;
    if (be->host_addressable || e->on_host || !e->data) return e->data;
    if (ts_entry_cells(e) > p->host_view_floats) return NULL;
    queue_lost(run, (int)(e - p->entries)); /* for its summary's columns of what rounding lost */
    be->copy_to_host(run->dev.stream, p->host_view, e->data, (size_t)e->numel * ts_dtype_cell_bytes(e->dtype));
    return be->synchronize(run->dev.stream) ? NULL : p->host_view;
}

/* Whether the host reads e->data where it is: memory the host addresses,
 * a value the host holds, or the host copy ts_observe_entry made of it. */
static bool host_readable(const ts_prog *p, const ts_entry *e) {
    return p->backend->host_addressable || e->on_host || e->data == p->host_view;
}

/* e's values where the host can read them: e->data, or a device's copy
 * of them (valid until the next call); NULL when the device failed. */
static const float *entry_values(ts_run *run, const ts_entry *e) {
    return host_readable(run->prog, e) ? e->data : ts_device_host_view(run, e);
}

/* "\n  <label> <name> f32[4,6] n=24 x∈[...] ..." */
static void add_stats(ts_run *run, report *r, const char *label, const ts_entry *e) {
    ts_summary sum;
    const float *x = entry_values(run, e);
    if (!x) return;
    ts_summarize_f32(x, e->numel, TS_WATCH_STATS, &sum);
    ts_array shape = {.dtype = TS_F32, .ndim = e->shape.ndim};
    for (int i = 0; i < e->shape.ndim; i++) shape.shape[i] = e->shape.d[i];
    char line[512];
    add(r, "\n  %s %s", label, ts_summary_line(e->name, &shape, &sum.stats, line, sizeof line));
}

/* A scan where the entry lives: the host's threads, or its device. */
static bool entry_nonfinite(ts_run *run, const ts_entry *e) {
    const ts_prog *p = run->prog;
    if (e->dtype != TS_F32 || !e->data) return false;
    if (host_readable(p, e)) /* host memory: the host's table, whose stream is the run's thread pool (the scan split over it) */
        return ts_backend_host()->has_nonfinite(run->pool, e->data, e->numel);
    return p->backend->has_nonfinite(run->dev.stream, e->data, e->numel);
}

/* "op Log 'block/Log:0', built at file:line" */
static const char *op_words(const ts_tensor *t, char *buf, size_t n) {
    char where[600];
    snprintf(buf, n, "op %s '%s', built at %s", ts_op_get(t->op)->name, t->name, ts_tensor_where(t, where, sizeof where));
    return buf;
}

/* What a backward kernel reads (ts_prog_backward_reads), all alive right
 * after it ran -- not the inputs it does not keep, whose buffers the
 * backward reuses. */
static int backward_reads(const ts_prog *p, const ts_tensor *c, const ts_entry **v) {
    int e[TS_MAX_INPUTS + 2], n = ts_prog_backward_reads(p, c, e);
    for (int k = 0; k < n; k++) v[k] = &p->entries[e[k]];
    return n;
}

/* "the input 'fc3/MatMul:0' is already non-finite: the origin is upstream
 * of the " when one of what the producer read holds a NaN/Inf already. */
static void add_origin_upstream(ts_run *run, report *r, const ts_entry *const *read, int n, bool backward) {
    int bad = 0;
    for (int k = 0; k < n; k++) bad += entry_nonfinite(run, read[k]);
    if (!bad) return;
    add(r, "the %s", bad > 1 ? "inputs " : "");
    for (int k = 0, seen = 0; k < n; k++) {
        if (!entry_nonfinite(run, read[k])) continue;
        bool grad = backward && read[k]->kind == TS_KIND_GRAD && k == 0;
        add(r, "%s%s'%s'", seen ? ", " : "", bad == 1 ? (grad ? "incoming gradient " : "input ") : "", read[k]->name);
        seen++;
    }
    add(r, " %s already non-finite: the origin is %s of the ", bad > 1 ? "are" : "is", backward ? "earlier in the backward pass, upstream" : "upstream");
}

/* Entry e's count of what its 16-bit rounding lost, brought from the
 * device that counted it (a report's: the host waits). */
static void fetch_lost(ts_run *run, int e) {
    if (queue_lost(run, e) && run->prog->backend->synchronize(run->dev.stream)) run->prog->entries[e].lost = (ts_half_loss){0, 0};
}

/* `producer`: the op whose backward kernel just wrote the gradient entry
 * (ts_check_backward), or -1. */
static ts_status numerics_report(ts_run *run, int entry, int64_t sample, int producer) {
    ts_prog *p = run->prog;
    const ts_entry *e = &p->entries[entry];
    const ts_tensor *t = run->g->t[e->node];
    report r = {.used = 0};
    char op[800], when[160];
    snprintf(when, sizeof when, "run %lld, %s %lld, %s pass", (long long)run->runs, e->per_step ? "step" : "micro-batch", (long long)sample,
             e->kind == TS_KIND_GRAD ? "backward" : e->kind == TS_KIND_VALUE ? "forward" : "optimizer step");
    const ts_entry *read[TS_MAX_INPUTS + 2] = {NULL};
    if (run->coll) /* a job: which rank, at which step (every rank stops at it, parallel/mpi.c) */
        add(&r, "numeric check on rank %d of %d at %s %lld: ", run->coll->rank, run->coll->size, run->training ? "step" : "batch",
            (long long)(run->training ? run->steps + 1 : run->runs * run->opts.device_iterations + sample + 1));
    else add(&r, "numeric check: ");
    if (e->kind == TS_KIND_VALUE) {
        int n = 0;
        for (int j = 0; j < t->n_in; j++) read[n++] = &p->entries[p->value_entry[t->in[j]]];
        add_origin_upstream(run, &r, read, n, false);
        add(&r, "first non-finite value in '%s' (output of %s), %s", e->name, op_words(t, op, sizeof op), when);
        fetch_lost(run, entry);
        if (e->lost.overflow > 0) /* a 16-bit cast: finite values beyond its range */
            add(&r, "; a %s overflow: %lld finite values beyond %s's largest (%g) became Inf when rounded to %s", ts_dtype_name(e->grid),
                (long long)e->lost.overflow, ts_dtype_name(e->grid), e->grid == TS_F16 ? 65504.0 : 3.3895313892515355e38, ts_dtype_name(e->grid));
        add_stats(run, &r, "value:", e);
        for (int j = 0; j < n; j++) {
            if (read[j]->dtype != TS_F32) continue;
            char label[32];
            snprintf(label, sizeof label, "input %d:", j);
            add_stats(run, &r, label, read[j]);
        }
    } else if (e->kind == TS_KIND_GRAD && producer >= 0) {
        const ts_tensor *c = run->g->t[producer];
        int n = backward_reads(p, c, read);
        add_origin_upstream(run, &r, read, n, true);
        add(&r, "first non-finite value in '%s', produced by %s's backward (%s), %s", e->name, ts_op_get(c->op)->name,
            op_words(c, op, sizeof op), when);
        add_stats(run, &r, "value:", e);
        for (int k = 0; k < n; k++) {
            char label[48] = "read:";
            if (read[k]->kind == TS_KIND_GRAD) snprintf(label, sizeof label, "incoming gradient:");
            else if (read[k]->node == c->id) snprintf(label, sizeof label, "forward output:");
            else
                for (int j = 0; j < c->n_in; j++)
                    if (read[k]->node == c->in[j]) snprintf(label, sizeof label, "forward input %d:", j);
            if (read[k]->dtype == TS_F32) add_stats(run, &r, label, read[k]);
        }
    } else { /* optimizer state, or a gradient no kernel here wrote (received from another pipeline stage) */
        add(&r, "first non-finite value in '%s' (derived tensor of %s), %s", e->name, op_words(t, op, sizeof op), when);
        add_stats(run, &r, "value:", e);
    }
    if (!run->rerun) ts_counter_add("NonFiniteFound", 1); /* the op-by-op replay finds the same one */
    for (int k = 0; k < p->n_entries; k++) p->entries[k].checked = false; /* the run stops here: no scan carried into the next */
    run->failed_entry = entry;
    run->failed_op = e->kind == TS_KIND_GRAD ? producer : -1;
    return ts_error(TS_ERR_NUMERICS, "%s", r.text); /* logged once, when the run stops (ts_exec_run) */
}

ts_status ts_check_backward(ts_run *run, int node, int64_t sample) {
    ts_prog *p = run->prog;
    int writes[TS_MAX_INPUTS], n = ts_prog_backward_writes(p, run->g->t[node], writes);
    for (int k = 0; k < n; k++) {
        int ge = writes[k];
        if (!p->entries[ge].check) continue;
        if (entry_nonfinite(run, &p->entries[ge])) {
            ts_hold_capture(run, ge, sample); /* a held run keeps the gradient it stops at */
            return numerics_report(run, ge, sample, node);
        }
        p->entries[ge].checked = true;
    }
    return TS_OK;
}

void ts_observe_device_guard(ts_run *run, const void *dst, size_t bytes) {
    ts_prog *p = run->prog;
    const char *lo = dst, *hi = lo + bytes;
    for (int i = 0; i < p->n_queued; i++) {
        const char *x = (const char *)(const void *)p->queued[i].x;
        if (x < hi && lo < x + (size_t)p->queued[i].n * sizeof(float)) {
            ts_observe_device_flush(run);
            return;
        }
    }
}

void ts_observe_device_flush(ts_run *run) {
    ts_prog *p = run->prog;
    if (!p->n_queued) return;
    ts_counter_add("SummaryLaunches", (p->n_queued + TS_STATS_MANY - 1) / TS_STATS_MANY);
    ts_counter_add("SummaryTensors", p->n_queued);
    int64_t floats = 0;
    for (int i = 0; i < p->n_queued; i++) floats += p->queued[i].n;
    ts_counter_add("SummaryBytes", floats * (int64_t)sizeof(float)); /* what the device reads for them */
    p->backend->stats_reduce_many(run->dev.stream, p->queued, p->n_queued); /* queued only where the device reduces (dev_slots) */
    p->n_queued = 0;
}

/* Where entry's record of sample lies in a run's outfeed rows (bytes in),
 * and its size */
static size_t outfeed_row(const ts_prog *p, int entry, int64_t sample, size_t *bytes) {
    const ts_entry *e = &p->entries[entry];
    *bytes = (size_t)e->numel * ts_dtype_cell_bytes(e->dtype);
    return p->outfeed_off[entry] + (size_t)sample * *bytes;
}

bool ts_observe_device(ts_run *run, int entry, int64_t sample) {
    ts_prog *p = run->prog;
    const ts_entry *e = &p->entries[entry];
    if (run->rerun) return false;
    bool due = watch_due(run, e, sample), anchors = e->n_anchors && p->dev_anchors;
    /* a value the host holds (a step count) is summarised there */
    bool reduce = due && p->dev_slots && !e->on_host;
    const float *x = e->data;
    if (e->on_host && anchors) { /* sent first, for the anchors arena the device fills */
        p->backend->copy_to_device(run->dev.stream, p->dev_stage, e->data, (size_t)ts_entry_cells(e) * sizeof(float));
        x = p->dev_stage;
    }
    if (anchors) { /* into the device's arena, copied to the host once after the run */
        int64_t S = e->per_step ? p->samples_step : p->samples_mb;
        for (int k = 0; k < e->n_anchors; k++) capture_anchor(run, &p->anchors[e->anchors[k]], e, x, sample, S);
        p->anchor_copies += (uint64_t)e->n_anchors;
    }
    bool feeds = e->n_outfeeds && p->dev_outfeed && !e->on_host;
    if (feeds && p->n_outfed < p->outfed_cap) { /* its record into the run's rows there, copied to the host once after the run and
                                                 * pushed then (an entry's sample comes once a run: the rows hold them all) */
        size_t bytes, at = outfeed_row(p, entry, sample, &bytes);
        p->backend->copy_on_device(run->dev.stream, p->dev_outfeed + at, x, bytes);
        p->outfed[p->n_outfed++] = (struct ts_outfed){entry, sample, false};
    }
    if (reduce) { /* queued for one launch with the others, into its slot, copied to the host once after the run */
        ts_slot_set *s = &p->run_slots;
        int w = e->watch, same = -1;
        int wv = e->same_values >= 0 ? p->entries[e->same_values].watch : -1; /* the same values' slot, at this step: one read */
        if (wv >= 0 && p->watch_what[wv] == p->watch_what[w] && s->pending[wv] && s->step[wv] == run->steps)
            same = s->same[wv] >= 0 ? s->same[wv] : wv; /* the slot reduced, not another sharer */
        s->same[w] = same;
        if (same < 0) {
            if (p->n_queued == p->n_watch || p->n_queued == TS_STATS_MANY) ts_observe_device_flush(run);
            int h = p->hist_slot[w];
            ts_device_hist *hist = h >= 0 ? &p->dev_hist[h] : NULL;
            p->queued[p->n_queued++] = (ts_stats_job){x, e->numel, &p->dev_slots[w], hist, p->watch_what[w] & ~TS_WATCH_STATS};
            s->any_hist |= hist != NULL;
        } else {
            ts_counter_add("SummariesShared", 1);
        }
        s->pending[w] = s->any = true;
        s->step[w] = run->steps;
        s->entry[w] = (int)(e - p->entries);
    }
    /* what only the host does: checks, a value the host holds */
    bool stab = e->stab >= 0 && ts_stab_due(run->prog, run->runs, e, sample); /* the stability signals' jobs run on the host */
    return !((e->n_outfeeds && !feeds) || e->check || (e->n_anchors && !anchors) || (due && !reduce) || stab);
}

/* Slot set s's pending summaries published as run `at`'s results;
 * `keep`: left pending (published again, the same, when the run ends). */
static void publish_slots(const ts_run *run, ts_slot_set *s, int64_t at, bool keep) {
    ts_prog *p = run->prog;
    for (int pass = 0; pass < 2; pass++) /* the slots reduced, then the summaries they share */
        for (int w = 0; w < p->n_watch; w++) {
            if (!s->pending[w] || (s->same[w] >= 0) != (pass == 1)) continue;
            if (pass == 0) {
                ts_stats_partial q;
                int h = p->hist_slot[w];
                ts_stats_from_device(&s->stats[w], h >= 0 ? &s->hist[h] : NULL, p->watch_what[w], &q);
                ts_stats_finish(&q, &p->summaries[w]);
            } else {
                ts_summary_copy(&p->summaries[w], &p->summaries[s->same[w]]);
            }
            note_stored(run, &p->entries[s->entry[w]], &p->summaries[w]); /* its rounding's count: complete once the run is */
            p->watch_results[w].run = at;
            p->watch_results[w].step = s->step[w];
            s->pending[w] = keep;
        }
    if (!keep) s->any = s->any_hist = false;
}

void ts_observe_device_results(const ts_run *run) {
    ts_prog *p = run->prog;
    if (!p->dev_slots || !p->done_slots.any) return;
    publish_slots(run, &p->done_slots, p->done_slots.run, false);
}

ts_status ts_observe_device_now(ts_run *run) {
    ts_prog *p = run->prog;
    ts_slot_set *s = &p->run_slots;
    if (!p->dev_slots) return TS_OK;
    ts_observe_device_flush(run);
    if (!s->any) return TS_OK;
    ts_observe_device_results(run); /* the last run's first: they must not later overwrite these */
    p->backend->copy_to_host(run->dev.stream, s->stats, p->dev_slots, (size_t)p->n_watch * sizeof(ts_device_stats));
    if (s->any_hist) p->backend->copy_to_host(run->dev.stream, s->hist, p->dev_hist, (size_t)p->n_hist * sizeof(ts_device_hist));
    if (p->backend->synchronize(run->dev.stream)) return ts_error_wrap(TS_ERR_INTERNAL, "reading the step's summaries from %s", p->backend->name);
    publish_slots(run, s, run->runs, true);
    return TS_OK;
}

void ts_observe_device_finish(ts_run *run, bool completed) {
    ts_prog *p = run->prog;
    if (!p->dev_slots) return;
    ts_observe_device_results(run); /* the last run's, if nothing read them: done is free */
    ts_slot_set *s = &p->run_slots;
    if (!completed) { /* a failed run's: none */
        memset(s->pending, 0, (size_t)p->n_watch * sizeof *s->pending);
        s->any = s->any_hist = false;
        return;
    }
    s->run = run->runs;
    ts_slot_set t = p->done_slots;
    p->done_slots = *s;
    *s = t;
}

/* Entry's outfeed records of sample, its values at `data` (host memory). */
static ts_status push_outfeeds(ts_run *run, int entry, int64_t sample, void *data) {
    const ts_entry *e = &run->prog->entries[entry];
    ts_array a = {.dtype = e->dtype, .ndim = e->shape.ndim, .data = data};
    for (int i = 0; i < e->shape.ndim; i++) a.shape[i] = e->shape.d[i];
    uint8_t *bools = NULL; /* a bool tensor's f32 cells as numpy's bools, a byte each */
    if (e->dtype == TS_BOOL && !(a.data = bools = ts_malloc((size_t)(e->numel ? e->numel : 1)))) return TS_ERR_OUT_OF_MEMORY;
    for (int64_t i = 0; bools && i < e->numel; i++) bools[i] = ((const float *)data)[i] != 0.0f;
    ts_status st = TS_OK;
    for (int k = 0; k < e->n_outfeeds && !st; k++) {
        st = ts_outfeed_push_from(e->outfeeds[k].q, run->runs, sample, e->outfeeds[k].key, &a, run->par->outfeed_replica(run), run->par->outfeed_stage(run));
        if (!st) st = run->par->outfeed_keep(run, entry, k, sample, &a);
    }
    ts_free(bools);
    return st;
}

ts_status ts_observe(ts_run *run, int entry, int64_t sample) {
    ts_prog *p = run->prog;
    ts_entry *e = &p->entries[entry];
    int64_t S = e->per_step ? p->samples_step : p->samples_mb;
    bool checked = e->checked; /* its last writer's check scanned it: not twice */
    e->checked = false;
    if (e->check && !checked && entry_nonfinite(run, e)) return numerics_report(run, entry, sample, -1);
    if (run->rerun) return TS_OK;
    if (e->n_anchors && !p->dev_anchors) { /* a device's: captured there (ts_observe_device) */
        uint64_t t0 = ts_now_ns();
        for (int k = 0; k < e->n_anchors; k++) capture_anchor(run, &p->anchors[e->anchors[k]], e, e->data, sample, S);
        p->anchor_ns += ts_now_ns() - t0; /* to the metrics once per run, not per copy */
        p->anchor_bytes += (uint64_t)e->n_anchors * (uint64_t)ts_entry_cells(e) * sizeof(float);
        p->anchor_copies += (uint64_t)e->n_anchors;
    }
    /* taken in its input's pass (summarize), or posted with it (deferred_item), or by its kernel */
    bool derived = e->relu_derived && (e->deferred_run == run->runs || p->watch_results[e->watch].run == run->runs);
    bool taken = derived || e->kernel_run == run->runs;
    if (!e->watch_in_step && !taken && watch_due(run, e, sample) && !reuse_same_summary(run, e) && !defer_summary(run, e, sample))
        summarize(run, e, sample);
    if (e->stab >= 0 && ts_stab_due(run->prog, run->runs, e, sample)) ts_stab_observe(run->prog, run->runs, run->steps, e); /* stability signals' scores or logits */
    bool fed = p->dev_outfeed && !e->on_host; /* a device's: captured there (ts_observe_device), pushed after the run */
    return fed ? TS_OK : push_outfeeds(run, entry, sample, e->data);
}

/* A print op's line for entry (its value, or its gradient) from x on the
 * host: titled with the op's title, `<title>_gradient` for the gradient,
 * or the tensor's name (`Gradient___<name>`) without a title. */
static void print_entry(const ts_run *run, const ts_entry *e, const float *x) {
    const ts_tensor *t = run->g->t[e->node];
    char title[512];
    if (e->kind != TS_KIND_GRAD) snprintf(title, sizeof title, "%s", t->title[0] ? t->title : t->name);
    else if (t->title[0]) snprintf(title, sizeof title, "%s_gradient", t->title);
    else snprintf(title, sizeof title, "Gradient___%s", t->name);
    ts_print_tensor(title, x, &e->shape);
}

void ts_observe_print(ts_run *run, int node, bool gradient, int64_t sample) {
    ts_prog *p = run->prog;
    int entry = gradient ? p->grad_entry[node] : p->value_entry[node];
    const ts_entry *e = &p->entries[entry];
    if (p->recorded && p->outfeed_off && p->outfeed_off[entry] != SIZE_MAX && p->n_outfed < p->outfed_cap) {
        size_t bytes, at = outfeed_row(p, entry, sample, &bytes); /* printed after the run (ts_observe_device_outfeeds) */
        p->backend->copy_on_device(run->dev.stream, p->dev_outfeed + at, e->data, bytes);
        p->outfed[p->n_outfed++] = (struct ts_outfed){entry, sample, true};
        return;
    }
    const float *x = ts_device_host_view(run, e);
    if (x) print_entry(run, e, x);
}

/* A point's host function: its records pushed, once their rows have
 * landed (on a thread of the device's; the first failure kept for the
 * run's end). */
static void push_point(void *arg) {
    const struct ts_outfeed_point *pt = arg;
    ts_run *run = pt->run;
    ts_prog *p = run->prog;
    for (int i = pt->from; i < pt->to && !p->stream_st; i++) {
        const struct ts_outfed *o = &p->outfed[i];
        if (o->print) continue;
        size_t bytes, at = outfeed_row(p, o->entry, o->sample, &bytes);
        ts_status st = push_outfeeds(run, o->entry, o->sample, p->host_outfeed + at);
        if (st) {
            snprintf(p->stream_error, sizeof p->stream_error, "%s", ts_last_error());
            p->stream_st = st;
        } else {
            ts_counter_add("OutfeedsStreamed", 1); /* an entry's records of a micro-batch or step */
        }
    }
}

void ts_observe_device_stream(ts_run *run) {
    ts_prog *p = run->prog;
    int from = p->streamed, to = p->n_outfed, n = 0;
    if (!p->outfeed_pinned || !p->backend->copy_out_then || from == to || p->n_points == p->points_cap) return;
    for (int i = from; i < to; i++) {
        const struct ts_outfed *o = &p->outfed[i];
        if (o->print) continue;
        size_t bytes, at = outfeed_row(p, o->entry, o->sample, &bytes);
        p->copies[n++] = (ts_copy_out){p->host_outfeed + at, p->dev_outfeed + at, bytes};
    }
    p->streamed = to;
    if (!n) return;
    struct ts_outfeed_point *pt = &p->points[p->n_points++];
    *pt = (struct ts_outfeed_point){run, from, to};
    p->backend->copy_out_then(run->dev.stream, p->copies, n, push_point, pt);
}

/* Whether the run's i-th captured record or line waits for the run's
 * end: a print line, or a record not streamed. */
static bool waits_for_end(const ts_prog *p, int i) { return p->outfed[i].print || i >= p->streamed; }

uint64_t ts_observe_device_fetch_rows(ts_run *run) {
    ts_prog *p = run->prog;
    if (!p->n_outfed) return 0;
    if (!p->streamed) { /* none went while the run did: one copy */
        p->backend->copy_to_host(run->dev.stream, p->host_outfeed, p->dev_outfeed, p->outfeed_bytes);
        return p->outfeed_bytes;
    }
    uint64_t fetched = 0;
    for (int i = 0; i < p->n_outfed; i++)
        if (waits_for_end(p, i)) {
            size_t bytes, at = outfeed_row(p, p->outfed[i].entry, p->outfed[i].sample, &bytes);
            p->backend->copy_to_host(run->dev.stream, p->host_outfeed + at, p->dev_outfeed + at, bytes);
            fetched += bytes;
        }
    return fetched;
}

ts_status ts_observe_device_outfeeds(ts_run *run) {
    ts_prog *p = run->prog;
    ts_status st = p->stream_st ? ts_error(p->stream_st, "%s", p->stream_error) : TS_OK; /* what a host function failed */
    for (int i = 0; i < p->n_outfed && !st; i++) {
        const struct ts_outfed *o = &p->outfed[i];
        if (!waits_for_end(p, i)) continue; /* pushed while the run went */
        size_t bytes, at = outfeed_row(p, o->entry, o->sample, &bytes);
        if (o->print) print_entry(run, &p->entries[o->entry], (const float *)(const void *)(p->host_outfeed + at));
        else st = push_outfeeds(run, o->entry, o->sample, p->host_outfeed + at);
    }
    return st;
}

/* ---- print op: PyTorch-like, summarised past 1000 values with 3 edge items */

#define PRINT_THRESHOLD 1000
#define PRINT_EDGE 3

static void print_dim(char *buf, size_t n, size_t *used, const float *x, const ts_shape *s, int dim, int64_t offset, bool summarise) {
    int64_t size = s->d[dim], stride = 1;
    for (int i = dim + 1; i < s->ndim; i++) stride *= s->d[i];
    if (*used < n) *used += (size_t)snprintf(buf + *used, n - *used, "[");
    for (int64_t i = 0; i < size && *used < n; i++) {
        if (summarise && size > 2 * PRINT_EDGE && i == PRINT_EDGE) {
            *used += (size_t)snprintf(buf + *used, n - *used, "..., ");
            i = size - PRINT_EDGE - 1;
            continue;
        }
        if (dim == s->ndim - 1) *used += (size_t)snprintf(buf + *used, n - *used, "%.4f", (double)x[offset + i]);
        else print_dim(buf, n, used, x, s, dim + 1, offset + i * stride, summarise);
        if (i + 1 < size && *used < n) *used += (size_t)snprintf(buf + *used, n - *used, dim == s->ndim - 1 ? ", " : ",\n ");
    }
    if (*used < n) *used += (size_t)snprintf(buf + *used, n - *used, "]");
}

void ts_print_tensor(const char *title, const float *x, const ts_shape *s) {
    if (!ts_log_enabled(TS_LOG_ERROR)) return;
    /* room for 1000 values, or the edge items of 8 dims; no allocation */
    static _Thread_local char buf[1 << 17];
    char shape[96];
    size_t used = (size_t)snprintf(buf, sizeof buf, "%.400s: f32%s ", title, ts_shape_str(s, shape, sizeof shape));
    if (s->ndim == 0) snprintf(buf + used, sizeof buf - used, "%.4f", (double)x[0]);
    else print_dim(buf, sizeof buf, &used, x, s, 0, 0, ts_shape_numel(s) > PRINT_THRESHOLD);
    ts_log_print(buf);
}
