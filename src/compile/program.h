/* program.h -- what compile produces and the executor runs: the ordered
 * nodes of a model, every named tensor (an "entry") with its buffer, and the
 * observers attached to each entry. */
#ifndef TS_PROGRAM_H
#define TS_PROGRAM_H

#include "core/collective.h"
#include "backend/cpu/pool.h"
#include "graph/graph.h"
#include "graph/optim.h"
#include "graph/options.h"

#include <stdatomic.h>

typedef enum ts_entry_kind {
    TS_KIND_VALUE = 0, /* op output, input or parameter */
    TS_KIND_GRAD,      /* Gradient___ (per micro-batch) */
    TS_KIND_ACCUM,     /* Accum___ (per step) */
    TS_KIND_UPDATED,   /* UpdatedVar___ (per step) */
    TS_KIND_ACCL,      /* Accl___ SGD momentum */
    TS_KIND_ACCL1,     /* Accl1___ Adam first moment */
    TS_KIND_ACCL2,     /* Accl2___ Adam second moment */
    TS_KIND_STEP       /* Step___ Adam step count */
} ts_entry_kind;


typedef struct ts_anchor { /* resolved at compile */
    char *short_name;
    int entry;
    ts_output_mode mode; /* never DEFAULT here */
    int period;
    int64_t rows;        /* samples kept (ALL: S, EVERY_N: S/N, else 1) */
    bool keeps_axis;     /* ALL and EVERY_N return [rows, *T] */
    float *local;        /* rows * numel this replica captures, in the anchors arena */
    float *data;         /* [rows, R, *T] returned (R = 1: the same as local) */
} ts_anchor;

typedef struct ts_outfeed_link {
    ts_outfeed *q;
    const char *key;     /* owned by the graph mark or the program */
} ts_outfeed_link;

typedef struct ts_entry {
    char *name;
    ts_entry_kind kind;
    int node;            /* graph tensor id */
    ts_dtype dtype;
    ts_shape shape;
    int64_t numel;
    bool per_step;       /* else per micro-batch */
    float *data;         /* current buffer (inputs: re-pointed each micro-batch) */
    bool view;           /* a view (Reshape, Flatten) of a model input: shares and follows its buffer */
    /* observers; `observed` is the one flag the executor tests */
    bool observed;
    int *anchors;
    int n_anchors;
    int watch;           /* index into prog->watch_results, -1 = none */
    bool watch_in_step;  /* summarised inside the optimizer step (ts_observe_step) */
    int relu_out;        /* a watched Relu of this value, summarised from this one's data in the same pass (-1: none) */
    bool relu_derived;   /* this Relu's summary comes from its input's pass (relu_out) */
    ts_outfeed_link *outfeeds;
    int n_outfeeds;
    bool check;          /* numeric check after it is produced */
    bool checked;        /* a gradient scanned clean after the last backward kernel that wrote it (ts_check_backward): its observation need not scan it again */
    bool on_host;        /* data is host memory on every device (an optimizer's step count) */
} ts_entry;

/* A tensor the host keeps and a device works on (model/device.c): the
 * parameters, buffers, constants and optimizer state. */
typedef struct ts_device_copy {
    float *host, *dev;
    int64_t numel;
    bool download; /* the run changes it: back to the host after each run */
    bool state;    /* optimizer state: back to the host only for a checkpoint */
} ts_device_copy;

typedef struct ts_prog {
    const struct ts_backend *backend; /* holds the arenas, scratch and workspace */
    /* a device whose memory the host cannot read (exec/device.c); all
     * NULL on the CPU */
    ts_device_copy *dev_copies;
    int n_dev_copies;
    uint64_t sent_gen;        /* the graph's values_gen the device's copies hold */
    bool sent;
    ts_opt_state *dev_state;  /* per m->state: the device's moments */
    float **dev_inputs;       /* per node: the run's inputs on the device */
    size_t *dev_input_bytes;
    float *host_view;         /* an entry copied to the host for its observers */
    int64_t host_view_floats;
    struct ts_device_stats *dev_slots, *host_slots; /* per watch: stats reduced on the device this run */
    int64_t *slot_step;       /* the step each pending slot was taken at */
    bool *slot_pending;
    bool any_pending;
    float *dev_anchors;       /* the anchors arena's device copy: captured there, copied back after each run */
    float *dev_stage;         /* an entry the host holds (on_host), sent for its observers on the device */
    int n_nodes;         /* graph size at compile */
    ts_shape *shape;     /* per node: compiled shape */
    int *order;          /* live nodes, topological (forward) order */
    int n_order;
    bool *live, *needs_grad, *reaches;
    int *value_entry;    /* per node */
    int *grad_entry;     /* per node, -1 if no gradient */
    int **zero_before;   /* per node: grads to zero before its backward */
    int *n_zero_before;
    float **scratch;     /* per node */
    float *workspace;    /* transient scratch of the largest need, shared by all nodes */
    ts_entry *entries;
    int n_entries;
    ts_strmap entry_index; /* entry name -> index */
    const char **sorted_names;
    ts_anchor *anchors;
    int n_anchors;
    const char **anchor_names;
    char **keys;         /* outfeed keys the program made (`<param>_grad`) */
    int n_keys;
    ts_watch_result *watch_results;
    ts_summary *summaries;
    int *watch_what, *watch_period;
    int n_watch;
    struct ts_stats_partial *parts; /* n_slots * TS_STEP_WATCHES partial summaries */
    int n_slots;                    /* threads a summary is split over */
    /* arenas by lifetime class */
    float *arena_activations; size_t bytes_activations;
    float *arena_grads;       size_t bytes_grads;
    float *arena_anchors;     size_t bytes_anchors;
    size_t bytes_activations_unplanned; /* what it would take without reuse */
    int64_t samples_mb, samples_step;   /* S per run for each kind */
    double flops_mb;
    uint64_t *op_ns;     /* per node, this run */
    uint64_t opt_ns;     /* optimizer steps, this run */
    const ts_array **bound; /* per node: the run's input arrays */
    uint64_t anchor_ns, anchor_bytes, anchor_copies; /* this run, reported once after it */
    /* the optimizer step clears the gradients it consumed (A = 1) chunk by
     * chunk while they are in cache, so the next backward need not */
    bool param_grads_zero;
    int n_param_grads;   /* parameter gradients the backward clears */
    char **lint;         /* model lint warnings (lint.c) */
    int n_lint;
    /* replicas (R > 1, model/replicas.c): what the ranks exchange */
    size_t anchor_local;          /* floats of all anchors' local rows, contiguous */
    float *anchor_gathered;       /* R * anchor_local: every replica's rows, by rank */
    ts_summary *rep_gathered;     /* R * n_watch summaries, by rank */
    ts_summary *rep_summaries;    /* n_watch * (R + 1): per replica, then reduced */
    ts_watch_result *rep_results; /* the rows ts_model_watch_results returns */
    int *rep_nodes, n_rep_nodes;  /* the trained parameters, then the buffers, checked by checksum */
    int rep_first_buffer;         /* index of the first buffer in rep_nodes */
    uint32_t *rep_sums;           /* (R + 1) * n_rep_nodes: their checksums */
    size_t allreduce_bytes;       /* this step's all-reduces, started in the backward */
    /* pipeline stages (K > 1, model/pipeline.c) */
    int *stage;                   /* per node: its stage (-1 unused); NULL without a pipeline */
    int *bnd_in, n_bnd_in;        /* tensors the previous stage sends, node ids in order */
    int *bnd_out, n_bnd_out;      /* tensors sent to the next stage */
    int64_t len_in, len_out;      /* floats of one micro-batch's message each way */
    float *inbox;                 /* one received message */
    float *outbox;                /* A messages forward (len_out), then A backward (len_in) */
    float *slots;                 /* n_keep copies of the activations between forward and backward */
    int n_keep;
    float *param_sync;            /* (K + 1) * (parameters + 1) floats exchanged after a run */
    int64_t param_floats;
    uint64_t wait_ns;             /* this run: time blocked receiving (the bubble) */
    /* outfeed records to rank 0 (model/outfeeds.c) */
    unsigned char *fwd;           /* ranks > 0: this run's records, packed; rank 0: every other rank's */
    size_t fwd_cap, fwd_used;
    size_t *fwd_at, *fwd_got;     /* rank 0: where rank r's records go (size + 1), and how many bytes came */
} ts_prog;

struct ts_model {
    ts_graph *g;
    bool training;
    int loss;            /* node id (training) */
    int *outputs;        /* node ids (inference) */
    int n_outputs;
    ts_options opts;     /* a private copy */
    ts_optimizer opt;      /* opt.lr: the rate of the current step */
    float base_lr;         /* the rate the schedule scales */
    ts_lr_schedule sched;
    ts_shape *input_override; /* per node, ndim -1 = as declared */
    int n_override;
    ts_prog *prog;
    bool compiled, stale;
    bool recompile_logged; /* the first recompilation is logged at info */
    const char *stale_cause;
    ts_opt_state *state;
    int n_state;
    const struct ts_backend *backend; /* the device it runs on */
    ts_pool *pool;       /* the CPU backend's stream: its worker threads */
    void *stream;        /* another device's stream (NULL on the CPU) */
    int64_t runs, steps;
    bool has_run;
    /* failure of the last run (numeric check) */
    int failed_entry;
    int failed_op;       /* node whose backward wrote the failed gradient, -1 otherwise */
    bool rerun;          /* re-executing op by op: checks only, no observers */
    /* replicas: the job's collectives (NULL without replicas) */
    const ts_collective *coll;
    int64_t next_check;  /* step of the next weight checksum */
    /* cancelling (ts_model_cancel): the flag, set from any thread or a
     * signal handler; every rank's flag (MPI jobs); the micro-batches a
     * cancelled run completed */
    atomic_int cancel;
    int *cancel_votes;
    int64_t cancel_at;
    bool dist_agreed;    /* the ranks' options compared equal (agree.c); cleared by a compile or a new schedule */
};


/* compile.c */
ts_status ts_prog_build(ts_model *m, ts_prog **out);
void ts_prog_free(ts_prog *p);
int ts_prog_find(const ts_prog *p, const char *name);
/* A parameter's derived entry of one kind (Accum___, ...), -1 if none. */
int ts_prog_entry_of(const ts_prog *p, int node, ts_entry_kind kind);
/* What the backward kernel of node t reads: the gradient of its output,
 * the forward inputs it keeps (all but bwd_unread_inputs) and its output
 * when it needs it, in that order; and what it adds into: the gradients
 * of its float inputs. Entries that do not exist are left out; a repeated
 * input (x * x) appears twice. Returns how many. */
int ts_prog_backward_reads(const ts_prog *p, const ts_tensor *t, int reads[TS_MAX_INPUTS + 2]);
int ts_prog_backward_writes(const ts_prog *p, const ts_tensor *t, int writes[TS_MAX_INPUTS]);

/* lint.c: fills p->lint (and logs each warning) */
void ts_lint(const ts_model *m, ts_prog *p);

/* memplan.c: offsets for buffers live over [start, end] (inclusive). */
typedef struct ts_interval {
    int64_t start, end;
    size_t bytes;
    size_t offset; /* out */
} ts_interval;
size_t ts_memplan(ts_interval *iv, int n);

/* state.c: each parameter's optimizer state, made at the first compile
 * (the update itself: graph/optim.h) */
ts_status ts_opt_state_init(ts_model *m);
void ts_opt_state_free(ts_model *m);

/* A model on a device whose memory the host cannot read
 * (m->backend->host_addressable false). The host keeps every parameter,
 * buffer, constant and optimizer state, current after each run; the device
 * works on its copies. compile/device.c: */
/* At compile: device copies of what the entries point at on the host. */
ts_status ts_device_bind(ts_model *m, ts_prog *p);
/* The optimizer state to the host (for a checkpoint or a recompile): it
 * stays on the device between runs. TS_OK at once on the CPU. */
ts_status ts_device_fetch_state(const ts_model *m);
/* exec/device.c: */
/* Before a run: the host's values and the run's inputs to the device. */
ts_status ts_device_before_run(ts_model *m);
/* After a run: what it changed back to the host (the parameters and
 * buffers); the first device error. */
ts_status ts_device_after_run(ts_model *m);
/* observe/observe.c: entry e's values on the host: e->data itself where
 * the host can read it, else a copy (valid until the next call). NULL:
 * the device failed. */
const float *ts_device_host_view(ts_model *m, const ts_entry *e);

/* model/replicas.c: a replica's part of a run (DESIGN.md §15) */
int ts_replicas(const ts_model *m); /* R, 1 without replicas */
/* Joins the job's collectives and sizes what the ranks exchange (compile). */
ts_status ts_replicas_compile(ts_model *m, ts_prog *p);
/* Before a run: the weight checksum when due. */
ts_status ts_replicas_before_run(ts_model *m);
/* The backward has finished parameter `node`'s gradient of micro-batch mb:
 * adds it to Accum___ (A > 1) and, at the step's last micro-batch, starts
 * averaging Accum___ over the replicas while the backward goes on. */
ts_status ts_replicas_grad_ready(ts_model *m, int node, int64_t mb);
/* Completes every parameter's average (before the step). */
ts_status ts_replicas_allreduce(ts_model *m);
/* After a step: every buffer (running statistics) becomes its mean over
 * the replicas. */
ts_status ts_replicas_sync_buffers(ts_model *m);
/* After a run: anchors and watch results of every replica, on every rank. */
ts_status ts_replicas_after_run(ts_model *m);

/* model/pipeline.c: a pipeline stage's part of a run (DESIGN.md §15) */
int ts_stages(const ts_model *m); /* K, 1 without a pipeline */
/* Stages of the nodes, the tensors crossing them, the buffers (compile). */
ts_status ts_pipeline_compile(ts_model *m, ts_prog *p);
/* agree.c: with replicas or stages, every rank's options and graph compared
 * (a collective): TS_ERR_DIST naming the first that differs and both
 * values. Once per compile and after a new learning-rate schedule; a no-op
 * without a job or once agreed. */
ts_status ts_dist_agree(ts_model *m, const ts_prog *p);
/* Whether this rank runs `node` (every node without a pipeline). */
static inline bool ts_in_stage(const ts_model *m, int node) { return !m->prog->stage || m->prog->stage[node] == m->coll->rank; }
/* Micro-batch a of the step: activations from the previous stage, to the
 * next one; gradients from the next stage, to the previous one. */
ts_status ts_pipeline_recv_forward(ts_model *m, int a);
ts_status ts_pipeline_send_forward(ts_model *m, int a);
ts_status ts_pipeline_recv_backward(ts_model *m, int a);
ts_status ts_pipeline_send_backward(ts_model *m, int a);
/* Op k (0 .. 2A - 1 training, A - 1 inference) of a step of this rank's
 * stage under the model's schedule: the forward or the backward of
 * micro-batch *a. */
void ts_pipeline_op(const ts_model *m, int stage, int k, bool *backward, int *a);
/* Keeps micro-batch a's activations until its backward (restore = back). */
void ts_pipeline_keep(ts_model *m, int a, bool restore);
/* After a run: every stage's parameters, anchors and watch results on every
 * rank; the bubble metric. */
ts_status ts_pipeline_after_run(ts_model *m, uint64_t run_ns);

/* model/run.c: before micro-batch mb (the a-th of its step) of a run:
 * TS_ERR_CANCELLED (no message yet) when ts_model_cancel asked to stop.
 * In an MPI job every rank decides together before each step (a = 0), so
 * every rank must call it at the same points. */

/* model/outfeeds.c: every rank's outfeed records on rank 0 (DESIGN.md §15) */
/* Sizes the buffer of one run's records (compile, after the two above). */
ts_status ts_outfeeds_compile(ts_model *m, ts_prog *p);
/* The replica and the stage this rank's records carry. */
int ts_outfeeds_replica(const ts_model *m);
int ts_outfeeds_stage(const ts_model *m);
/* A record of link `link` of `entry` this rank pushed: kept for rank 0. */
ts_status ts_outfeeds_keep(ts_model *m, int entry, int link, int64_t sample, const ts_array *a);
/* After a run: ranks > 0 send their records, rank 0 pushes them. */
ts_status ts_outfeeds_after_run(ts_model *m);

/* observe.c: the executor's one hook */
ts_status ts_observe(ts_model *m, int entry, int64_t sample);
/* After the backward kernel of `node` (check_numerics on, and the op by op
 * replay): the checked gradients it added into, a NaN/Inf blamed on it with
 * the stats of what it read (alive until the next kernel). */
ts_status ts_check_backward(ts_model *m, int node, int64_t sample);
/* The optimizer step of parameter `node` in step d of the run: runs
 * update(ctx, begin, end) over [0, n) and, around each chunk of it while the
 * chunk is in cache, summarises the watched entries the step reads (its
 * gradient, Accum___) and writes (UpdatedVar___, optimizer state) -- one walk
 * over the parameter instead of one per summary. */
typedef void (*ts_update_fn)(void *ctx, int64_t begin, int64_t end);
/* The same update over [begin, end), summarising as ts_opt_update_summarised. */
typedef void (*ts_update_summarised_fn)(void *ctx, int64_t begin, int64_t end, struct ts_stats_stream *gs, struct ts_stats_partial *gp,
                                        struct ts_stats_stream *ps, struct ts_stats_partial *pp);
/* One parameter's optimizer step as the executor hands it to the observer. */
typedef struct ts_step_update {
    ts_update_fn update;
    ts_update_summarised_fn summarised; /* NULL: summaries in separate passes */
    void *ctx;
    const float *grad, *param;          /* what `summarised` reads and writes */
} ts_step_update;
#define TS_REPORT_MAX 6144 /* bytes of one numeric-check report (observe.c), kept whole by its re-execution (exec.c) */
#define TS_STEP_WATCHES 5 /* Gradient___, Accum___, UpdatedVar___, two optimizer states */
#define TS_MAX_SLOTS 4    /* threads one summary is split over, at most */
/* A device whose memory the host cannot read: entry's observers, on the
 * device where they can be: its anchors captured into the device's arena,
 * a due stats watch reduced into its slot (published by
 * ts_observe_device_finish). False: the rest need its values on the host
 * (outfeeds, numeric checks, histograms and ranges): the caller copies
 * them there and calls ts_observe, which leaves the anchors alone. */
bool ts_observe_device(ts_model *m, int entry, int64_t sample);
/* After the run, with the slots copied to the host: the summaries. */
void ts_observe_device_finish(ts_model *m);
void ts_observe_step(ts_model *m, int node, int64_t d, const ts_step_update *u, int64_t n);
void ts_print_tensor(const char *title, const float *x, const ts_shape *s);

#endif
