/* observe.h -- the observers of a run (docs/design.md#observation): the executor's one
 * hook per tensor, the optimizer step handed to the watches, numeric checks,
 * and a device's tensors observed where they live. */
#ifndef TS_OBSERVE_H
#define TS_OBSERVE_H

#include "observe/run.h"
#include "core/op_chain.h"
#include "core/stats.h"

/* observe.c: the executor's one hook */
ts_status ts_observe(ts_run *run, int entry, int64_t sample);
/* Around a forward pass: between the two, the summaries of its small
 * activations (ts_entry.deferrable) may be posted to the pool's idle
 * workers; at the end the pass waits for every one of them. Drain waits
 * for those posted so far (before anything reads what they write). */
void ts_observe_forward_begin(ts_run *run);
void ts_observe_forward_end(ts_run *run);
void ts_observe_drain(ts_run *run);
/* An attention's twin summarised by its one pass: the twin's tensors in
 * the roles the pass computes (ts_fusion.role) that a plain stats watch
 * alone observes do not keep the twin's ops running (exec.c's
 * choose_fusions asks ts_observe_twin_summarised of each); the pass takes
 * their summaries as it goes (backend.h's ts_att_sums). Begin fills *s
 * with those due at sample, or returns false; end publishes each as its
 * watch's result of this run, as ts_observe would have. */
bool ts_observe_twin_summarised(const ts_run *run, const struct ts_fusion *fu, int node);
bool ts_observe_twin_begin(ts_run *run, const struct ts_fusion *fu, int64_t sample, struct ts_att_sums *s);
void ts_observe_twin_end(ts_run *run, const struct ts_fusion *fu, int64_t sample, const struct ts_att_sums *s);
/* A kernel's summaries of what it writes (backend.h's ts_kctx.sums_out
 * and sums_relu): node's value, of kc's shape, is observed by a plain
 * stats watch alone. A kernel whose row says sums_channels (a BatchNorm)
 * takes it, and its fused Relu's, as it writes them
 * (ts_observe_kernel_sums): then no observer reads the value after the
 * kernel, and the executor may write the Relu over it (exec.c's
 * pass_fusable). One whose row says sums_samples (a Conv, a MaxPool) may
 * take it, where its path sums samples whole. Begin sets and zeroes kc's sums due
 * at sample (relu: the fused Relu's node, or -1), or returns false; end
 * publishes each summary the sums cover as its watch's result of this
 * run, as ts_observe would have, and ts_observe then leaves it alone. */
bool ts_observe_kernel_sums(const ts_run *run, int node, const struct ts_kctx *kc);
bool ts_observe_kernel_begin(ts_run *run, int node, int relu, int64_t sample, struct ts_kctx *kc);
void ts_observe_kernel_end(ts_run *run, int node, int relu, const struct ts_kctx *kc);
/* chain.c: the hook the executor calls as a tensor it makes outside a
 * kernel's call is final (entry's `observed` set): ts_observe, through a
 * host copy where the host cannot read it, timed on the timeline */
ts_status ts_observe_entry(ts_run *run, int entry, int64_t sample);
/* ... and the observe layer's observers on the op chain (core/op_chain.h),
 * each added only where the program has something for it: the watches
 * (a device's queue guarded before a kernel writes, a kernel's output
 * observed after its forward), the numeric checks after a backward
 * kernel, the print ops' lines. */
ts_status ts_observe_attach_watches(ts_run *run, ts_op_chain *c);
ts_status ts_observe_attach_checks(ts_run *run, ts_op_chain *c);
ts_status ts_observe_attach_prints(ts_run *run, ts_op_chain *c);
/* After the backward kernel of `node` (check_numerics on, and the op by op
 * replay): the checked gradients it added into, a NaN/Inf blamed on it with
 * the stats of what it read (alive until the next kernel). */
ts_status ts_check_backward(ts_run *run, int node, int64_t sample);
/* The optimizer step of parameter `node` in step d of the run: runs
 * update(ctx, begin, end) over [0, n) and, around each chunk of it while the
 * chunk is in cache, summarises the watched entries the step reads (its
 * gradient, Accum___) and writes (UpdatedVar___, optimizer state) -- one walk
 * over the parameter instead of one per summary. */
typedef void (*ts_update_fn)(void *ctx, int64_t begin, int64_t end);
/* The same update over [begin, end), summarising (and with sq, summing
 * squares) as ts_opt_update_summarised. */
typedef void (*ts_update_summarised_fn)(void *ctx, int64_t begin, int64_t end, struct ts_stats_stream *gs, struct ts_stats_partial *gp,
                                        struct ts_stats_stream *ps, struct ts_stats_partial *pp, double sq[4]);
/* One parameter's optimizer step as the executor hands it to the observer. */
typedef struct ts_step_update {
    ts_update_fn update;
    ts_update_summarised_fn summarised; /* NULL: summaries in separate passes */
    void *ctx;
    const float *grad, *param;          /* what `summarised` reads and writes */
    /* The same update over [begin, end), adding to sq the sums of squares
     * stability signals take (ts_opt_update_norms); NULL: not offered */
    void (*norms)(void *ctx, int64_t begin, int64_t end, double sq[4]);
} ts_step_update;
#define TS_REPORT_MAX 6144 /* bytes of one numeric-check report (observe.c), kept whole by its re-execution (exec.c) */
/* A device whose memory the host cannot read: entry's observers, on the
 * device where they can be: its anchors captured into the device's arena,
 * a due watch reduced into its slots (stats, and histograms and range
 * counts where it asks; published by ts_observe_device_finish), its outfeed
 * records captured into the run's rows (pushed by
 * ts_observe_device_outfeeds). False: the rest need its values on the host
 * (numeric checks, a value the host holds): the caller copies them there
 * and calls ts_observe, which leaves the anchors and outfeeds alone. */
bool ts_observe_device(ts_run *run, int entry, int64_t sample);
/* A device's watches wait (ts_observe_device queues them) and are
 * summarised together, up to TS_STATS_MANY tensors a launch, rather than
 * one launch each: the queue is flushed when it is full, before a write
 * to memory a queued tensor holds (ts_observe_device_guard: the memory
 * plan reuses a dead tensor's memory, an update writes its parameter),
 * around the optimizer's updates, and at the end of the step. */
void ts_observe_device_flush(ts_run *run);
/* Before the device writes [dst, dst + bytes): the queue flushed first if
 * a queued tensor lies there. The executor calls it at every write while
 * the queue is not empty (ts_observe_guard below). */
void ts_observe_device_guard(ts_run *run, const void *dst, size_t bytes);
/* The same for an entry the device is about to write: one test where the
 * queue is empty (always on the CPU). A view of an input shares its buffer
 * and writes nothing. */
static inline void ts_observe_guard(ts_run *run, const ts_entry *e) {
    if (run->prog->n_queued && !e->view) ts_observe_device_guard(run, e->data, (size_t)e->numel * ts_dtype_cell_bytes(e->dtype));
}
/* After the run's wait, its slots copied to the host (completed) or not
 * (a failed run's): they become the summaries to finish, when read
 * (ts_observe_device_results) or during the next run's device work, so
 * that turning a few hundred slots into summaries does not hold up each
 * step. The last run's are finished first if nothing read them. */
void ts_observe_device_finish(ts_run *run, bool completed);
/* The last run's summaries from the device, finished if they are not yet
 * (watch results read them through here: ts_model_watch_results). */
void ts_observe_device_results(const ts_run *run);
/* During a run, on a device: the summaries it reduced so far copied to the
 * host (after a wait) and published as its results now, for a reader
 * within the run (the spike detector, before each update); they stay
 * pending, and the run's end publishes the same again. TS_OK on the CPU. */
ts_status ts_observe_device_now(ts_run *run);
/* At a step's end: the outfeed records the device captured since the last
 * call on their way while the run goes, where the backend offers
 * copy_out_then and the records' rows are page-locked: their rows copied
 * to the host after the step's work and pushed by a host function, the
 * device going on meanwhile (a recorded run's graph holds these as a
 * branch). Else they wait for the run's end. */
void ts_observe_device_stream(ts_run *run);
/* After the run's work, before its wait: the rows of the records and
 * print lines that waited for its end (not streamed) queued for the host;
 * the bytes. */
uint64_t ts_observe_device_fetch_rows(ts_run *run);
/* After the run, with the rows of what waited for it copied to the host:
 * the records pushed and the print lines logged, in the order they were
 * made; the first failure of a streamed push. */
ts_status ts_observe_device_outfeeds(ts_run *run);
void ts_observe_step(ts_run *run, int node, int64_t d, const ts_step_update *u, int64_t n);
/* The optimizer steps of many parameters on the host as one job over the
 * pool (the executor's batch): each thread a run of their values, the
 * summaries the steps take (a gradient, Accum___ and UpdatedVar___ with
 * plain stats) fused into the updates as ts_observe_step's are, each
 * parameter's part in a thread's run kept as a few numbers and merged
 * once the job is done. Nothing per parameter waits for a hand-off of
 * its own, and small parameters share the threads. */
#define TS_STEP_BATCH 64
typedef struct ts_step_batch {
    int n;                                   /* parameters in the batch */
    ts_step_update u[TS_STEP_BATCH];
    int64_t start[TS_STEP_BATCH + 1];        /* each one's first value in the batch's numbering */
    /* each one's watched entries due this step: [0, n_read) the gradient's
     * (its summary), [n_read, n_watched) the parameter's */
    const ts_entry *watched[TS_STEP_BATCH][TS_STEP_WATCHES];
    int n_read[TS_STEP_BATCH], n_watched[TS_STEP_BATCH];
    bool any;                                /* some parameter is summarised */
    /* per parameter, thread and side (gradient, parameter): its part's sums */
    ts_device_stats sums[TS_STEP_BATCH][TS_MAX_SLOTS][2];
    /* per parameter: its node, whether its update sums the squares
     * stability signals take (ts_stab_update_done), and those squares by
     * thread slice, added in order once the job is done */
    int node[TS_STEP_BATCH];
    bool norms[TS_STEP_BATCH];
    bool any_norms;
    double sq[TS_STEP_BATCH][TS_MAX_SLOTS][4];
} ts_step_batch;
/* Whether parameter node's step d can join a batch: it takes no summary
 * other than those the update fuses (no optimizer state, histogram or
 * range watched in it), and the backend sums the squares of stability
 * signals due in it (opt_update_norms). */
bool ts_observe_step_batchable(ts_run *run, int node, int64_t d);
/* Adds node's step (batchable) of n values to b (not full). */
void ts_observe_step_add(ts_run *run, ts_step_batch *b, int node, int64_t d, const ts_step_update *u, int64_t n);
/* Runs b's updates and publishes their summaries as this run's results;
 * b keeps its members (the caller observes what they wrote, then sets n
 * to 0). */
void ts_observe_steps(ts_run *run, ts_step_batch *b);
/* A print op's line: node's value (its forward) or its gradient (its
 * backward) at micro-batch sample, logged now, or on a device in a
 * recorded run captured there and logged after the run in the order the
 * lines were made, with the outfeed records (ts_observe_device_outfeeds). */
void ts_observe_print(ts_run *run, int node, bool gradient, int64_t sample);
void ts_print_tensor(const char *title, const float *x, const ts_shape *s);

/* observe/observe.c: entry e's values on the host: e->data itself where
 * the host can read it, else a copy (valid until the next call). NULL:
 * the device failed. */
const float *ts_device_host_view(ts_run *run, const ts_entry *e);

/* observe/hold.c (ts_model_hold): before a run, copies of every tensor it
 * makes when a hold is armed; the hook's copy of entry e as it is final
 * (sample: its micro-batch, or step for a per-step entry);
 * at ts_model_free, the copies given back. */
ts_status ts_hold_prepare(ts_run *run);
void ts_hold_capture(ts_run *run, int entry, int64_t sample);
void ts_hold_free(ts_run *run);
/* Before the model's program is put aside (model.c's spare): its observed
 * flags as compile set them, so it runs without the hold's copies. */
void ts_hold_leave(ts_run *run);
/* observe/rerun.c (ts_model_rerun): entry e as the held run's re-execution
 * makes it final, compared with the held copy; whether a rerun is on (its
 * tensors are compared, nothing else observes them). */
void ts_rerun_compare(ts_run *run, int e);
bool ts_hold_comparing(const ts_run *run);
/* Whether the next run is held (its tensors copied as they are made). */
bool ts_hold_armed(const ts_run *run);
/* The hold's side of the public calls (the model layer's ts_model_hold,
 * ts_model_is_held, ts_model_held, ts_model_held_before,
 * ts_model_held_names, ts_model_tensor_origin; model/retrieve.c): the
 * same arguments and errors, on the model's runs. */
ts_status ts_hold_arm(ts_run *run, int on);
int ts_hold_is_held(const ts_run *run, const char *name);
ts_status ts_hold_read(ts_run *run, const char *name, ts_array *out);
ts_status ts_hold_read_before(ts_run *run, const char *name, ts_array *out);
ts_status ts_hold_names(ts_run *run, const char *const **names, size_t *n);
ts_status ts_tensor_origin(const ts_run *run, const char *name, char *buf, size_t n);

#endif
