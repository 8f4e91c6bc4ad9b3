/* replay.c -- a run's device work recorded once and replayed as one
 * launch (docs/design.md#the-run-recorded-as-one-launch: the compiled run as
 * one CUDA graph).
 *
 * A small model on a GPU waits on its launches: a few microseconds of host
 * time per kernel, for kernels that take less. A compiled program makes
 * the same calls every run, so the first run of a kind is recorded (the
 * backend's capture_begin / capture_end) and every later run of that kind
 * replays the recording in one launch. The host still walks each run the
 * way the executor always does, for its bookkeeping (step counts, the
 * learning rate and Adam's bias corrections, which watches are due and
 * their slots, the anchors' rows), but through a table that drops the
 * work (walk_backend); the optimizer's step constants alone reach the
 * device, in one copy before the launch.
 *
 * The whole run is one recording: its D steps of A micro-batches each, the
 * optimizer steps and the observers' kernels. A run of more steps than
 * TS_RECORDED_STEPS is recorded in groups of that many, a launch each, so
 * a recording's size stays bounded. Recorded steps are done whole or not
 * at all: a cancel is heard before each launch, not between its steps.
 *
 * The kind of a run is its key (run_key): what decides which calls it
 * makes with which pointers (training, D x A, the watches due, the input
 * buffers, whether the last step left the gradients cleared). A run whose
 * host decides on values the device computes, or whose observers read a
 * tensor on the host, is not recorded (refusal). Every call a recorded
 * run makes, with its arguments, goes into a fingerprint; a walk whose
 * fingerprint differs from its recording's would replay other work than
 * it asked for, so it is an error, never a silent replay. */
#include "exec/exec.h"
#include "observe/observe.h"

#include "backend/backend.h"
#include "core/core.h"
#include "core/metrics.h"
#include "core/trace.h"
#include "graph/ops.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

/* ---- the walk's table: every call fingerprinted, the work done only
 * while recording (one run at a time per thread) */

static _Thread_local struct {
    const ts_backend *real;
    bool work;     /* recording: the calls go on to the real table */
    uint64_t hash; /* the fingerprint of the calls so far */
} w;

/* h and v mixed: FNV-1a's step a word at a time, the high bits folded down */
static uint64_t key_mix(uint64_t h, uint64_t v) {
    h ^= v;
    h *= 0x100000001b3ull;
    return h ^ (h >> 29);
}

static void mix(uint64_t v) { w.hash = key_mix(w.hash, v); }

#define P(x) ((uint64_t)(uintptr_t)(x))

static void w_copy_to_device(void *s, void *dst, const void *src, size_t bytes) {
    mix(1), mix(P(dst)), mix(P(src)), mix(bytes);
    if (w.work) w.real->copy_to_device(s, dst, src, bytes);
}

static void w_copy_to_host(void *s, void *dst, const void *src, size_t bytes) {
    mix(2), mix(P(dst)), mix(P(src)), mix(bytes);
    if (w.work) w.real->copy_to_host(s, dst, src, bytes);
}

static void w_copy_on_device(void *s, void *dst, const void *src, size_t bytes) {
    mix(3), mix(P(dst)), mix(P(src)), mix(bytes);
    if (w.work) w.real->copy_on_device(s, dst, src, bytes);
}

static ts_status w_synchronize(void *s) {
    mix(4);
    return w.work ? w.real->synchronize(s) : TS_OK;
}

static void w_fill(void *s, float *dst, float value, int64_t n) {
    mix(5), mix(P(dst)), mix(ts_float_bits(value)), mix((uint64_t)n);
    if (w.work) w.real->fill(s, dst, value, n);
}

static void w_zero(void *s, float *dst, int64_t n) {
    mix(6), mix(P(dst)), mix((uint64_t)n);
    if (w.work) w.real->zero(s, dst, n);
}

static void w_accumulate(void *s, float *dst, const float *src, int64_t n) {
    mix(7), mix(P(dst)), mix(P(src)), mix((uint64_t)n);
    if (w.work) w.real->accumulate(s, dst, src, n);
}

static void w_scale(void *s, float *dst, const float *x, float f, int64_t n) {
    mix(8), mix(P(dst)), mix(P(x)), mix(ts_float_bits(f)), mix((uint64_t)n);
    if (w.work) w.real->scale(s, dst, x, f, n);
}

static void w_round_half(void *s, ts_dtype t, float *x, int64_t n, ts_half_loss *lost) {
    mix(9), mix((uint64_t)t), mix(P(x)), mix((uint64_t)n), mix(P(lost));
    if (w.work) w.real->round_half(s, t, x, n, lost);
}

static void mix_ctx(const ts_kctx *k) {
    mix((uint64_t)k->node->op), mix(P(k->node)), mix(P(k->out)), mix(P(k->dout)), mix(P(k->scratch)), mix(P(k->workspace));
    mix(P(k->lost)), mix(P(k->widen)), mix(k->training), mix(k->update_state), mix((uint64_t)k->out_dtype), mix(k->din_store);
    if (k->node->op == TS_OP_DROPOUT_MASK || k->node->op == TS_OP_RANDOM_UNIFORM) mix(k->iteration); /* the kernels that read the micro-batch's number */
    for (int j = 0; j < k->n_in; j++) mix(P(k->in[j])), mix(P(k->in_int[j])), mix(P(k->din[j])), mix((uint64_t)k->in_dtype[j]);
}

static void w_forward(const ts_kctx *k) {
    mix(10), mix_ctx(k);
    if (w.work) w.real->kernels[k->node->op].forward(k);
}

static void w_backward(const ts_kctx *k) {
    mix(11), mix_ctx(k);
    if (w.work) w.real->kernels[k->node->op].backward(k);
}

/* The update itself is recorded; its step constants are not part of the
 * fingerprint: a recorded update reads them from the recording's table,
 * which the real table fills on every walk too. */
static void w_opt_update(void *st, const ts_optimizer *o, const struct ts_opt_consts *c, struct ts_opt_state *s, float *param,
                         const float *grad, int64_t begin, int64_t end) {
    mix(12), mix((uint64_t)o->kind), mix(P(s)), mix(P(param)), mix(P(grad)), mix((uint64_t)begin), mix((uint64_t)end);
    w.real->opt_update(st, o, c, s, param, grad, begin, end);
}

static void w_opt_update_summarised(const ts_optimizer *o, const struct ts_opt_consts *c, struct ts_opt_state *s, float *param,
                                    float *grad, int64_t begin, int64_t end, bool clear, struct ts_stats_stream *gs,
                                    struct ts_stats_partial *gp, struct ts_stats_stream *ps, struct ts_stats_partial *pp, double sq[4]) {
    mix(13), mix(P(param)), mix(P(grad)); /* summaries read on the host: refused before (a mismatch if reached) */
    mix(P(gp) ^ P(pp) ^ P(sq) ^ 0x5bd1e995u);
    if (w.work) w.real->opt_update_summarised(o, c, s, param, grad, begin, end, clear, gs, gp, ps, pp, sq);
}

static void w_stats_reduce_many(void *s, const ts_stats_job *jobs, int n) {
    mix(18), mix((uint64_t)n);
    for (int i = 0; i < n; i++)
        mix(P(jobs[i].x)), mix((uint64_t)jobs[i].n), mix(P(jobs[i].slot)), mix(P(jobs[i].hist)), mix((uint64_t)jobs[i].hist_what);
    if (w.work) w.real->stats_reduce_many(s, jobs, n);
}

static void w_copy_out_then(void *s, const ts_copy_out *c, int n, void (*fn)(void *), void *arg) {
    mix(19), mix((uint64_t)n), mix(P(fn)), mix(P(arg));
    for (int i = 0; i < n; i++) mix(P(c[i].dst)), mix(P(c[i].src)), mix(c[i].bytes);
    if (w.work) w.real->copy_out_then(s, c, n, fn, arg);
}

static bool w_has_nonfinite(void *s, const float *x, int64_t n) {
    mix(16), mix(P(x)), mix((uint64_t)n);
    return w.work && w.real->has_nonfinite(s, x, n);
}

static void w_event_record(void *s, ts_event *e) {
    mix(17);
    if (w.work) w.real->event_record(s, e);
}

static ts_kernel_row walk_rows[TS_OP_COUNT];
static pthread_once_t walk_rows_once = PTHREAD_ONCE_INIT;

static void walk_rows_init(void) {
    for (int op = 0; op < TS_OP_COUNT; op++) walk_rows[op] = (ts_kernel_row){.forward = w_forward, .backward = w_backward};
}

/* The real table with every call that works replaced by its walk twin. */
static void walk_backend(const ts_backend *real, ts_backend *out) {
    pthread_once(&walk_rows_once, walk_rows_init);
    *out = *real;
    out->copy_to_device = w_copy_to_device;
    out->copy_to_host = w_copy_to_host;
    out->copy_on_device = w_copy_on_device;
    out->synchronize = w_synchronize;
    out->fill = w_fill;
    out->zero = w_zero;
    out->accumulate = w_accumulate;
    out->scale = w_scale;
    out->round_half = w_round_half;
    out->kernels = walk_rows;
    out->opt_update = w_opt_update;
    out->opt_update_summarised = real->opt_update_summarised ? w_opt_update_summarised : NULL;
    if (real->stats_reduce_many) out->stats_reduce_many = w_stats_reduce_many;
    out->has_nonfinite = w_has_nonfinite;
    if (real->copy_out_then) out->copy_out_then = w_copy_out_then;
    out->event_record = w_event_record;
}

/* ---- which runs are recorded */

/* Why no step of this program can be recorded, for what it observes or
 * computes; NULL: its steps can be. */
static const char *program_refusal(const ts_run *run) {
    const ts_prog *p = run->prog;
    for (int i = 0; i < p->n_entries; i++) {
        const ts_entry *e = &p->entries[i];
        if (!e->observed) continue;
        if (e->n_outfeeds && (!p->dev_outfeed || e->on_host)) return "Outfeed"; /* records of a value the host holds, pushed as they are made */
        if (e->check) return "NumericChecks";
        if (e->on_host && e->n_anchors) return "HostValue"; /* a step count the host holds, sent for its anchor */
        if (e->n_anchors && !p->dev_anchors) return "HostAnchor";
        if (e->watch >= 0 && !p->dev_slots) return "HostSummary"; /* a device that reduces no summary */
    }
    for (int k = 0; k < p->n_order; k++) {
        int node = p->order[k];
        ts_op op = run->g->t[node]->op;
        if (op == TS_OP_PRINT && !(p->outfeed_off && p->outfeed_off[p->value_entry[node]] != SIZE_MAX)) return "Print"; /* too big to keep */
        if (op == TS_OP_DROPOUT_MASK && run->training) return "Dropout"; /* its mask drawn from the step number */
        if (op == TS_OP_RANDOM_UNIFORM) return "Random"; /* its values drawn from the step number */
        if (ts_exec_computed_indices(run, run->g->t[node])) return "ComputedIndices"; /* checked on the host before the op reads them */
    }
    return NULL;
}

/* TS_CUDA_GRAPHS: on unless set off (read each step: a process may switch
 * it between runs); a value not understood is warned about once and taken
 * as on, the default. */
static bool recording_wanted(void) {
    static atomic_bool warned;
    const char *v = getenv("TS_CUDA_GRAPHS");
    bool on = true;
    if (v && *v && !ts_parse_bool(v, &on) && !atomic_exchange(&warned, true))
        ts_logf(TS_LOG_WARN, "TS_CUDA_GRAPHS='%s' is not a boolean (use 1/0, true/false, yes/no or on/off); taken as on", v);
    return on;
}

/* Why this run is launched call by call, as a metrics cause; NULL: it is
 * recorded. */
static const char *refusal(const ts_run *run) {
    ts_prog *p = run->prog;
    if (!p->backend->capture_begin) return NULL; /* not asked (the CPU): the caller checks first */
    if (p->replay_off) return p->replay_off;
    if (!recording_wanted()) return "SwitchedOff";
    if (run->rerun) return "OpByOp";
    if (run->opts.check != TS_CHECK_OFF) return "NumericChecks"; /* each tensor scanned as it is made, the run stopped at the first */
    if (run->scaling) return "LossScaling";                      /* the host decides after each step whether it is taken */
    if (run->opts.spike_k > 0 && run->training) return "SpikeDetector"; /* the host judges each step's signals before its update */
    if (ts_trace_live() || run->opts.trace_path) return "Timeline"; /* each op timed */
    if (run->training && ts_log_enabled(TS_LOG_TRACE)) return "TraceLog"; /* each micro-batch's loss read */
    if (ts_hold_armed(run)) return "Hold";
    if (ts_replicas(run) > 1 || p->stage) return "Replicas";
    if (!p->replay_scanned) { /* what the program observes and computes is fixed at compile: scanned once */
        p->replay_scanned = true;
        p->replay_never = program_refusal(run);
    }
    return p->replay_never;
}

/* What decides the calls steps [d0, d0 + n) of a run make and their
 * pointers (their inputs' slices and observers' rows follow from d0). */
static uint64_t run_key(const ts_run *run, int64_t d0, int64_t n) {
    const ts_prog *p = run->prog;
    uint64_t h = 0xcbf29ce484222325ull;
    h = key_mix(h, run->training);
    h = key_mix(h, (uint64_t)run->opts.device_iterations);
    h = key_mix(h, (uint64_t)(run->training ? run->opts.grad_accum : 1));
    h = key_mix(h, p->param_grads_zero);
    h = key_mix(h, (uint64_t)d0);
    h = key_mix(h, (uint64_t)n);
    if (d0 + n == run->opts.device_iterations) /* watches are taken at the run's last micro-batch */
        for (int i = 0; i < p->n_watch; i++) h = key_mix(h, run->runs % p->watch_period[i] == 0);
    for (int k = 0; k < p->n_order; k++)
        if (run->g->t[p->order[k]]->op == TS_OP_INPUT) h = key_mix(h, P(p->dev_inputs[p->order[k]]));
    return h | 1; /* 0 marks an empty slot */
}

/* Steps [d0, d0 + n) of the run, stopping at the first error. */
static ts_status run_steps(ts_run *run, int64_t d0, int64_t n, ts_status (*step)(ts_run *, int64_t)) {
    for (int64_t d = d0; d < d0 + n; d++) {
        ts_status st = step(run, d);
        if (st) return st;
    }
    return TS_OK;
}

/* Those steps walked with the table `walk` in place of the real one. */
static ts_status walk_steps(ts_run *run, int64_t d0, int64_t n, ts_status (*step)(ts_run *, int64_t), const ts_backend *walk) {
    ts_prog *p = run->prog;
    const ts_backend *real = run->dev.backend;
    run->dev.backend = p->backend = walk;
    p->recorded = true;
    p->recorded_from = d0 * (run->training ? run->opts.grad_accum : 1);
    w.hash = 0xcbf29ce484222325ull;
    ts_status st = run_steps(run, d0, n, step);
    p->recorded = false;
    run->dev.backend = p->backend = real;
    return st;
}

static ts_recording *find(ts_prog *p, uint64_t key) {
    for (int i = 0; i < TS_RECORDINGS; i++)
        if (p->recs[i].key == key) return &p->recs[i];
    return NULL;
}

/* An empty slot, or the least recently used one, emptied; NULL when each
 * was used by this run (a run of more groups of steps than there are
 * slots: the later ones go call by call rather than record over the
 * earlier). */
static ts_recording *make_room(ts_prog *p, int64_t run) {
    ts_recording *r = &p->recs[0];
    for (int i = 0; i < TS_RECORDINGS; i++) {
        if (!p->recs[i].key) return &p->recs[i];
        if (p->recs[i].used < r->used) r = &p->recs[i];
    }
    if (r->used == run) return NULL;
    p->backend->recording_free(r->rec);
    *r = (ts_recording){0};
    return r;
}

/* Steps [d0, d0 + n): replayed from their recording, else recorded and
 * launched. */
static ts_status recorded_steps(ts_run *run, int64_t d0, int64_t n, ts_status (*step)(ts_run *, int64_t)) {
    ts_prog *p = run->prog;
    const ts_backend *real = p->backend;
    ts_backend walk;
    walk_backend(real, &walk);
    w.real = real;
    uint64_t key = run_key(run, d0, n);
    ts_recording *r = find(p, key);
    ts_status st;
    if (r) { /* replay: the host's walk, then one launch */
        w.work = false;
        real->walk_begin(run->dev.stream, r->rec);
        uint64_t t0 = ts_now_ns();
        st = walk_steps(run, d0, n, step, &walk);
        ts_metric_record("ReplayWalk", (double)(ts_now_ns() - t0)); /* the host's share of a replayed launch */
        bool same = w.hash == r->calls;
        ts_status rst = real->replay(run->dev.stream, r->rec, !st && same);
        if (st) return st; /* cancelled before its first micro-batch: nothing to do */
        if (!same) {
            p->replay_off = "RecordingMismatch";
            return ts_error(TS_ERR_INTERNAL, "run %lld, steps %lld to %lld on %s: their calls differ from those of the recording they "
                                             "would replay, so they did not run; later steps of this model launch call by call (a bug in "
                                             "tensorscope: please report it, and set TS_CUDA_GRAPHS=0 meanwhile)", (long long)run->runs,
                            (long long)d0, (long long)(d0 + n - 1), real->name);
        }
        r->used = run->runs;
        ts_counter_add("GraphReplays", 1);
        ts_counter_add("StepsReplayed", n);
        return rst;
    }
    r = make_room(p, run->runs);
    if (!r) {
        ts_counter_add_cause("StepsNotRecorded", "MoreStepsThanRecordings", n);
        return run_steps(run, d0, n, step);
    }
    void *rec = NULL;
    st = real->capture_begin(run->dev.stream, (int)n * run->n_state, &rec);
    if (st) { /* nothing was recorded: these steps and the later ones call by call */
        p->replay_off = "RecordingFailed";
        ts_logf(TS_LOG_WARN, "%s: steps launched call by call: %s", real->name, ts_last_error());
        return run_steps(run, d0, n, step);
    }
    w.work = true;
    st = walk_steps(run, d0, n, step, &walk);
    ts_status cst = real->capture_end(run->dev.stream, rec);
    if (st || cst) real->recording_free(rec);
    if (st) return st; /* cancelled before its first micro-batch: the recording is of nothing */
    if (cst) {
        p->replay_off = "RecordingFailed";
        return ts_error_wrap(cst, "run %lld, steps %lld to %lld on %s: recording them for replay failed, so their work was not done; "
                                  "later steps of this model launch call by call (TS_CUDA_GRAPHS=0 skips the recording)",
                             (long long)run->runs, (long long)d0, (long long)(d0 + n - 1), real->name);
    }
    bool first = true;
    for (int i = 0; i < TS_RECORDINGS; i++) first = first && !p->recs[i].key;
    *r = (ts_recording){key, w.hash, run->runs, rec};
    ts_counter_add_cause("GraphCaptures", !first ? "AnotherKind" : p->recompiled ? "Recompiled" : "FirstRun", 1);
    ts_counter_add("StepsReplayed", n);
    return real->replay(run->dev.stream, rec, true);
}

ts_status ts_exec_recorded(ts_run *run, ts_status (*step)(ts_run *, int64_t)) {
    int64_t D = run->opts.device_iterations;
    if (!run->prog->backend->capture_begin) return run_steps(run, 0, D, step);
    const char *why = refusal(run);
    if (why) {
        ts_counter_add_cause("StepsNotRecorded", why, D);
        return run_steps(run, 0, D, step);
    }
    /* the run in one launch; a longer one in launches of TS_RECORDED_STEPS
     * steps (a recording's size bounded, and a cancel heard between them) */
    for (int64_t d0 = 0; d0 < D; d0 += TS_RECORDED_STEPS) {
        ts_status st = recorded_steps(run, d0, D - d0 < TS_RECORDED_STEPS ? D - d0 : TS_RECORDED_STEPS, step);
        if (st) return st;
    }
    return TS_OK;
}
