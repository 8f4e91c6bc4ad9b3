/* program.h -- what compile produces and the executor runs: the ordered
 * nodes of a model, every named tensor (an "entry") with its buffer, and the
 * observers attached to each entry. */
#ifndef TS_PROGRAM_H
#define TS_PROGRAM_H

#include "backend/backend.h"
#include "core/half.h"
#include "graph/graph.h"
#include "graph/optim.h"
#include "graph/options.h"

/* Below this many values a tensor's summary is one thread's pass (more
 * are split over the pool, observe.c), and may be deferred to an idle
 * worker (ts_entry.deferrable). */
#define TS_SUMMARY_SPLIT_MIN (1 << 16)
/* Deferred summaries posted before a forward pass waits for them. */
#define TS_DEFER_RING 64
/* Activations' bytes the plan keeps to the forward's end for deferred summaries. */
#define TS_DEFER_KEEP ((size_t)16 << 20)
/* The observers' partial summaries a program holds (p->parts). */
#define TS_STEP_WATCHES 8 /* Gradient___, Accum___, UpdatedVar___, two optimizer states; the update's stability summaries (w, dw, u) */
#define TS_MAX_SLOTS 4    /* threads one summary is split over, at most */

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
    void *typed;         /* data converted to the tensor's output dtype, made when read */
} ts_anchor;

typedef struct ts_outfeed_link {
    ts_outfeed *q;
    const char *key;     /* owned by the graph mark or the program */
} ts_outfeed_link;

typedef struct ts_entry {
    char *name;
    ts_entry_kind kind;
    int node;            /* graph tensor id */
    ts_dtype dtype;      /* TS_BF16 / TS_F16: held in 16-bit cells (compile.c's half_storage) */
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
    int stab;            /* its stability job (compile/stability.h: attention scores, logits), -1 = none */
    int same_values;     /* an entry whose summary this one's is at every sample (a view or transpose of it, the
                          * gradient an Add passes on to an input it alone reads): shared, not taken again (-1: none) */
    ts_outfeed_link *outfeeds;
    int n_outfeeds;
    bool check;          /* numeric check after it is produced */
    bool checked;        /* a gradient scanned clean after the last backward kernel that wrote it (ts_check_backward): its observation need not scan it again */
    bool on_host;        /* data is host memory on every device (an optimizer's step count) */
    bool deferrable;     /* its summary may be taken by an idle worker later in the forward pass (observe.c's deferral;
                          * the plan keeps it to the forward's end) */
    int64_t deferred_run; /* the run whose summary of it (or, a Relu, its input's pass) a worker took: not taken again */
    int64_t kernel_run;  /* the run whose summary of it its producer's kernel took as it wrote it (observe.c's kernel
                          * summaries): not taken again */
    ts_dtype grid;       /* the 16-bit float its values are rounded to (graph.h's grid), else TS_F32 */
    ts_half_loss lost;   /* what that rounding lost the last time it ran (a micro-batch) */
} ts_entry;

/* The dtype e's observers, anchors and outfeeds see: f32 for a tensor
 * held in 16-bit cells (they read it widened), else its own. */
static inline ts_dtype ts_entry_view_dtype(const ts_entry *e) { return ts_dtype_is_half(e->dtype) || e->dtype == TS_BOOL ? TS_F32 : e->dtype; }
/* The 4-byte cells e's values take in a program's memory and in its
 * anchors and outfeeds (i64: two per element; 16-bit cells count whole,
 * as the host's f32 views of them do). */
static inline int64_t ts_entry_cells(const ts_entry *e) { return e->numel * ts_dtype_cells(e->dtype); }

/* A tensor the host keeps and a device works on (model/device.c): the
 * parameters, buffers, constants and optimizer state. */
typedef struct ts_device_copy {
    float *host, *dev;
    int64_t numel;
    bool download; /* the run changes it: back to the host after each run */
    bool state;    /* optimizer state: back to the host only for a checkpoint */
} ts_device_copy;

/* A kernel call timed on the device's clock (exec/op_times.c). */
typedef struct ts_op_event {
    ts_event start, end;
    int64_t mb;    /* the call's micro-batch (the optimizer's step: the step of the run) */
    bool backward; /* its backward kernel */
    bool traced;   /* made while the timeline recorded: its slice goes on the device's track */
} ts_op_event;
#define TS_OP_EVENT_PAIRS 8192 /* event pairs a program keeps, at most: a node's first calls of a run are timed, the rest estimated */
#define TS_OP_EVENT_PAIRS_TRACED (1 << 16) /* at most, for a model that traces: every call of a run, when they fit (a GPU makes two events a pair) */

/* A run recorded on a device and replayed (exec/replay.c). */
#define TS_RECORDINGS 8       /* kept per program: runs whose work differs (the first, watches due, a long run's groups of steps) */
#define TS_RECORDED_STEPS 64 /* steps a recording holds at most: a longer run is replayed in launches of this many (a cancel heard between) */
typedef struct ts_recording {
    uint64_t key;   /* what the run's work depends on (replay.c's run_key); 0: empty */
    uint64_t calls; /* fingerprint of the device calls the recorded run made */
    int64_t used;   /* the model's run that last replayed it: the least recent makes room */
    void *rec;      /* the backend's recording */
} ts_recording;

/* A run's summaries from a device: per watch whether the run's walk
 * queued it, at which step, of which entry, sharing which watch's slot
 * (the same memory queued, or -1), and the host's copies of the slots
 * (stats, histograms and range counts). */
typedef struct ts_slot_set {
    struct ts_device_stats *stats;
    struct ts_device_hist *hist;
    bool *pending;
    int64_t *step;
    int *entry, *same;
    bool any, any_hist; /* a pending slot; one with counts */
    int64_t run;        /* the model's run they are of */
} ts_slot_set;

#define TS_FUSION_MAX 16 /* the twin's ops an attention node may stand for */
/* The tensors of a twin built as ts_attention describes it that its one
 * pass summarises for a stats watch (observe.c's twin summaries): the raw
 * scores q k^T, their Scale, its MaskedFill, the Softmax, the product with
 * v. */
enum { TS_TWIN_RAW, TS_TWIN_SCALED, TS_TWIN_MASKED, TS_TWIN_PROB, TS_TWIN_OUT, TS_TWIN_ROLES };
typedef struct ts_fusion {
    int node;                  /* the attention node */
    int chain[TS_FUSION_MAX];  /* the twin's ops: what only the twin reads, back to the node's inputs */
    int n_chain;
    const char *why_not;       /* why the one pass never runs here (a static string), else NULL */
    bool logged;               /* the log said once that observation keeps the unfused ops */
    int role[TS_TWIN_ROLES];   /* the twin's node of each role the pass can summarise, else -1 */
    float fill;                /* the MaskedFill's value */
} ts_fusion;

typedef struct ts_prog {
    const struct ts_backend *backend; /* holds the arenas, scratch and workspace */
    /* a device whose memory the host cannot read (exec/device.c); all
     * NULL on the CPU */
    ts_device_copy *dev_copies;
    int n_dev_copies;
    uint64_t sent_gen;        /* the graph's values_gen the device's copies hold */
    uint64_t state_sent_gen;  /* the model's state_gen the device's optimizer state holds */
    bool sent;
    ts_opt_state *dev_state;  /* per m->state: the device's moments */
    float **dev_inputs;       /* per node: the run's inputs on the device */
    void **host_inputs;       /* per node: their page-locked staging on the host (backend host_pin), else NULL */
    size_t *dev_input_bytes;
    void **pinned;            /* host memory this program page-locked (host_pin), unlocked when it is freed */
#define TS_LANDINGS 7         /* and beside the copies', the buffers the copies after a run land in (exec/device.c's pin_landings) */
    int n_pinned;
    bool pins_tried;          /* the first run locked what the copies after each run land in */
    float *host_view;         /* an entry copied to the host for its observers, or the indices a graph computed for their check */
    int64_t host_view_floats;
    struct ts_device_stats *dev_slots; /* per watch: stats reduced on the device this run */
    struct ts_device_hist *dev_hist;   /* per watch with histograms or ranges: their counts, the same way */
    int *hist_slot;           /* per watch: its dev_hist slot, or -1 (stats alone) */
    int n_hist;
    /* the summaries as they come back: this run's (its walk queues them,
     * its copies land there) and the last run's, finished into the
     * summaries when read or while the device works on the next run
     * (observe.c's ts_observe_device_results) */
    ts_slot_set run_slots, done_slots;
    /* per entry: what the rounding onto its 16-bit grid lost (ts_entry.lost),
     * counted on the device and brought back after the run; NULL without
     * a 16-bit grid */
    ts_half_loss *dev_lost, *host_lost;
    struct ts_stats_job *queued; /* n_watch: stats watches waiting for the step's next flush (ts_observe_device_flush) */
    int n_queued;
    float *dev_anchors;       /* the anchors arena's device copy: captured there, copied back after each run */
    float *dev_stage;         /* an entry the host holds (on_host), sent for its observers on the device */
    /* a run's outfeed records on a device: each outfed entry's S rows
     * (outfeed_off[entry] bytes in, SIZE_MAX where none), captured there
     * and copied back once after the run, then pushed in the order they
     * were made (outfed) */
    char *dev_outfeed, *host_outfeed;
    size_t outfeed_bytes, *outfeed_off;
    struct ts_outfed { int entry; int64_t sample; bool print; } *outfed; /* print: a print op's line, else outfeed records */
    int n_outfed, outfed_cap;
    /* outfeed records on their way while the run goes (observe.c's
     * ts_observe_device_stream), where the backend offers copy_out_then and
     * host_outfeed is page-locked: per step a point, the outfed range its
     * host function pushes */
    struct ts_outfeed_point { struct ts_run *run; int from, to; } *points;
    int n_points, points_cap;
    int streamed;             /* outfed[0, streamed) went that way (their print lines apart) */
    bool outfeed_pinned;
    struct ts_copy_out *copies; /* one point's copies (outfed_cap) */
    ts_status stream_st;      /* the first push a host function failed, and its message */
    char stream_error[512];
    /* the run's points on the device's clock (exec/device.c): before its
     * uploads, after them, after its work, after its downloads */
    ts_event marks[4];
    /* each kernel call's time on the device's clock (exec/op_times.c), in a
     * run launched call by call: the pair of call r of node i (n_nodes: the
     * optimizer's step) is op_events[r * (n_nodes + 1) + i], for r below
     * op_rounds; made at the first such run, read after its synchronize */
    ts_op_event *op_events;
    int op_rounds;
    int64_t *op_calls;        /* per node and the optimizer: its calls this run */
    uint64_t marks_end_ns;    /* the host's clock when it saw marks[3] passed, after a run whose op_events were read; 0: none to draw */
    ts_recording recs[TS_RECORDINGS]; /* runs recorded as one launch (exec/replay.c) */
    bool recorded;            /* this run's work goes through a recording (exec/replay.c): the host walks it, the device replays it */
    bool recompiled;          /* the model's program before this one recorded too: its first recording counts as a recapture */
    int64_t recorded_from;    /* the first micro-batch of the steps recorded or walked: a cancel is heard there only */
    const char *replay_off;   /* why this program's runs are no longer recorded (a recording failed), else NULL */
    bool replay_scanned;      /* replay_never is known (exec/replay.c scans the program once) */
    const char *replay_never; /* why none of its steps can be recorded (what it observes or computes), else NULL */
    int n_nodes;         /* graph size at compile */
    ts_shape *shape;     /* per node: compiled shape */
    int *order;          /* live nodes, topological (forward) order */
    int n_order;
    int *layer_outs;     /* with log_layer_shapes: the layer outputs, in order */
    int n_layer_outs;
    bool *live, *needs_grad, *reaches;
    bool *grad_shared;   /* per node: a view (Reshape, Flatten) or a bias Add whose input's (in[0]'s) gradient is its own gradient's buffer, so its backward does nothing (a bias Add's: the bias's gradient only) (plan_memory) */
    int *value_entry;    /* per node */
    int *grad_entry;     /* per node, -1 if no gradient */
    /* Attention nodes that carry their unfused twin (TS_OP_ATTENTION with 5
     * inputs, compile.c's find_fusions): each run's forward (exec.c) skips
     * the twin's ops and runs the node's one pass when nothing observes
     * them, else runs them and the node copies the twin */
    struct ts_fusion *fusions;
    int n_fusions;
    struct ts_stats_sums *twin_sums; /* the one passes' twin summaries: TS_ATT_ROLES per (batch, head) pair of the largest */
    int64_t twin_pairs;
    struct ts_stats_sums *chan_sums; /* the kernels' summaries (ts_kctx.sums_out, sums_relu), per channel or per sample:
                                      * two of the largest count among the nodes whose kernels may take them */
    int64_t chan_sums_n;             /* that count (0: none) */
    bool *skip;          /* per node: the current micro-batch's forward and backward skip it (a fused twin's op) */
    int *pass;           /* per order position k: ts_pass_takes' kind, took[0], took[1] (plan_memory; the executor reads it each forward) */
    int *readers;        /* per node: the input slots of the order's nodes that read its output (exec.c: a fused Linear's product read by its Add alone is not kept) */
    int **zero_before;   /* per node: grads to zero before its backward */
    int *n_zero_before;
    float **scratch;     /* per node */
    /* per node: an op that moves an i64 tensor's cells (ts_op_def.keeps_int)
     * as the same op on pairs of 4-byte cells (a trailing dim of 2: exec.c's
     * make_ctx), its node as the kernels then read it; else NULL */
    ts_tensor **cells_node;
    float **cache;       /* per node: what its kernel keeps from run to run (an inference model's), else NULL */
    float *workspace;    /* transient scratch of the largest need, shared by all nodes */
    float *widen;        /* f32 copies of the 16-bit operands of the op running (transient, shared) */
    float *stage16;      /* a 16-bit entry widened to f32 for its observers (host memory) */
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
    int n_watch;                    /* watches; the stability rows follow them in watch_results and summaries */
    struct ts_stab *stab;           /* stability signals (compile/stability.h), NULL: none */
    struct ts_stats_partial *parts; /* n_slots * TS_STEP_WATCHES partial summaries */
    int n_slots;                    /* threads a summary is split over */
    /* deferred summaries (observe.c): a ring of TS_DEFER_RING (entry, its
     * Relu's or -1) by the pool's item number, posted to its idle workers
     * during a forward pass, the run and step they are the results of,
     * how many wait (posted since the last drain), two partials for each
     * pool thread; `deferring` while a forward pass may post */
    int *defer_ring;
    int64_t defer_runs, defer_steps;
    int n_pending;
    struct ts_stats_partial *defer_parts;
    bool deferring;
    /* arenas by lifetime class */
    float *arena_activations; size_t bytes_activations;
    float *arena_grads;       size_t bytes_grads;
    float *arena_anchors;     size_t bytes_anchors;
    size_t bytes_activations_unplanned; /* what it would take without reuse */
    size_t bytes_budgeted; /* every buffer above and below, against TS_LIMIT_COMPILE_BYTES (compile.c's budget) */
    /* the activations arena's plan, kept for the liveness report
     * (model/memory.c): plan[k] holds entries[plan_entry[k]], live over
     * points [start, end] (forward ops 0..L-1, backward L..2L-1, the update 2L) */
    struct ts_interval *plan;
    int *plan_entry, n_plan;
    size_t bytes_workspace; /* kernel scratch, workspace and the f32 views of 16-bit cells */
    int64_t samples_mb, samples_step;   /* S per run for each kind */
    double flops_mb;
    uint64_t *op_ns;     /* per node, this run: its kernels' time (exec/op_times.c) */
    uint64_t opt_ns;     /* optimizer steps, this run */
    const ts_array **bound; /* per node: the run's input arrays */
    /* per node: an input given in another dtype (int64 ids, bools, f64),
     * converted to the input's for the run (data owned, kept for reuse) */
    ts_array *converted;
    uint64_t anchor_ns, anchor_bytes, anchor_copies; /* this run, reported once after it */
    /* the optimizer step clears the gradients it consumed (A = 1) chunk by
     * chunk while they are in cache, so the next backward need not */
    bool param_grads_zero;
    int n_param_grads;   /* parameter gradients the backward clears */
    char **lint;         /* model lint warnings (lint.c) */
    int n_lint;
    /* replicas (R > 1, parallel/replicas.c): what the ranks exchange */
    size_t anchor_local;          /* floats of all anchors' local rows, contiguous */
    float *anchor_gathered;       /* R * anchor_local: every replica's rows, by rank */
    ts_summary *rep_gathered;     /* R * n_watch summaries, by rank */
    ts_summary *rep_summaries;    /* n_watch * (R + 1): per replica, then reduced */
    ts_watch_result *rep_results; /* the rows ts_model_watch_results returns */
    int *rep_nodes, n_rep_nodes;  /* the trained parameters, then the buffers, checked by checksum */
    int rep_first_buffer;         /* index of the first buffer in rep_nodes */
    uint32_t *rep_sums;           /* (R + 1) * n_rep_nodes: their checksums */
    size_t allreduce_bytes;       /* this step's all-reduces, started in the backward */
    /* pipeline stages (K > 1, parallel/pipeline.c) */
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
    /* outfeed records to rank 0 (parallel/outfeeds.c) */
    unsigned char *fwd;           /* ranks > 0: this run's records, packed; rank 0: every other rank's */
    size_t fwd_cap, fwd_used;
    size_t *fwd_at, *fwd_got;     /* rank 0: where rank r's records go (size + 1), and how many bytes came */
    bool hold_ready;              /* the hook copies every tensor for ts_model_hold (observe/hold.c) */
} ts_prog;

/* Where the kernel that rounds entry e onto its 16-bit grid counts what
 * it loses: the device's slot where the device counts, else the entry's. */
static inline ts_half_loss *ts_lost_slot(const ts_prog *p, int e) { return p->dev_lost ? &p->dev_lost[e] : &p->entries[e].lost; }

/* What compile reads of a model, and all it reads: the model layer fills it
 * from its model before each compile. Compile writes nothing here but the
 * optimizer state, which it makes at the first compile (state.c) and which
 * outlives every program. */
typedef struct ts_model_def {
    ts_graph *g;
    const ts_options *opts;
    const ts_optimizer *opt;  /* the default optimizer (a parameter may have its own) */
    bool training;
    int loss;                 /* node id (training) */
    const int *outputs;       /* node ids (inference) */
    int n_outputs;
    const ts_shape *input_override; /* per node, ndim -1 = as declared */
    int n_override;
    bool scaling;             /* dynamic loss scaling on */
    ts_device dev;            /* the device it runs on */
    int threads;              /* the host's worker threads (the CPU backend's pool) */
    ts_opt_state **state;     /* per parameter with an optimizer: made at the first compile */
    int *n_state;
    /* the job's ranks (parallel/: replicas, stages, then outfeeds), run on
     * the program once its entries, plan, anchors and outfeeds are made */
    ts_status (*ranks)(void *ctx, ts_prog *p);
    void *ranks_ctx;
} ts_model_def;

/* R replicas, 1 without; K pipeline stages, 1 without (the options'). */
static inline int ts_opts_replicas(const ts_options *o) { return o->replicas > 1 ? o->replicas : 1; }
static inline int ts_opts_stages(const ts_options *o) { return o->stages > 1 ? o->stages : 1; }

/* compile.c */
ts_status ts_prog_build(const ts_model_def *m, ts_prog **out);
/* TS_ERR_NOT_FOUND when one of o's watches matches no entry of p (a typo),
 * with the closest names */
ts_status ts_prog_check_watches(const ts_prog *p, const ts_options *o);
/* lint.c: fills p->lint (and logs each warning) */
void ts_lint(const ts_model_def *m, ts_prog *p);
/* state.c: each parameter's optimizer state, made at the first compile
 * (the update itself: graph/optim.h) */
ts_status ts_opt_state_init(const ts_model_def *m);
void ts_opt_state_free(ts_opt_state **state, int *n_state);

/* A model on a device whose memory the host cannot read
 * (backend->host_addressable false). The host keeps every parameter,
 * buffer, constant and optimizer state, current after each run; the device
 * works on its copies. compile/device.c: */
/* At compile: device copies of what the entries point at on the host. */
ts_status ts_device_bind(const ts_model_def *m, ts_prog *p);
/* The optimizer state to the host (for a checkpoint or a recompile): it
 * stays on the device between runs. TS_OK at once on the CPU. */
ts_status ts_device_fetch_state(const ts_prog *p, ts_device dev);

void ts_prog_free(ts_prog *p);
int ts_prog_find(const ts_prog *p, const char *name);
/* TS_ERR_NOT_FOUND: "<what>: no tensor named '<name>' in this model; closest: ..." */
ts_status ts_prog_unknown_name(const ts_prog *p, const char *what, const char *name);
/* `name` as the program names it, in *full: itself when an entry has it,
 * else the one entry name it equals but for a module prefix (logged);
 * TS_ERR_NOT_FOUND with the closest names when none, and
 * TS_ERR_INVALID_ARGUMENT listing them when several. */
ts_status ts_prog_name_of(const ts_prog *p, const char *what, const char *name, const char **full);
/* A parameter's derived entry of one kind (Accum___, ...), -1 if none. */
int ts_prog_entry_of(const ts_prog *p, int node, ts_entry_kind kind);
/* Is node i the output of a layer (for check_numerics=output, stability
 * signals)? Top-level op outputs, and outputs leaving their scope. */
bool ts_prog_is_layer_output(const ts_graph *g, const ts_prog *p, int i);
/* The forward FLOPs of node t at the program's shapes (0 for ops without a
 * count); its backward counts twice as many. */
double ts_prog_op_flops(const ts_prog *p, const ts_tensor *t);
/* What the backward kernel of node t reads: the gradient of its output,
 * the forward inputs it keeps (all but bwd_unread_inputs) and its output
 * when it needs it, in that order; and what it adds into: the gradients
 * of its float inputs. Entries that do not exist are left out; a repeated
 * input (x * x) appears twice. Returns how many. */
int ts_prog_backward_reads(const ts_prog *p, const ts_tensor *t, int reads[TS_MAX_INPUTS + 2]);
int ts_prog_backward_writes(const ts_prog *p, const ts_tensor *t, int writes[TS_MAX_INPUTS]);

/* memplan.c: offsets for buffers live over [start, end] (inclusive). A
 * buffer may take another's cell after it (same_as: 1 + that one's index,
 * of as many bytes, live before it; 0: a cell of its own). */
typedef struct ts_interval {
    int64_t start, end;
    size_t bytes;
    size_t offset; /* out */
    int same_as;
} ts_interval;
size_t ts_memplan(ts_interval *iv, int n);
/* The ops after order[k] that its output pass may do in their stead
 * (exec.c's forward; docs/backend.md): a Linear's bias Add (a MatMul whose
 * row fuses_bias, then an Add of it and a bias row), that Add and the Relu
 * or unary op after it (the row fuses_bias_act: a Linear's activation), a
 * residual Add and its
 * Relu (a Conv whose row fuses_add_relu, then an Add of it and another
 * value of its shape, then a Relu of that), a Relu (fuses_relu), an op of
 * ew_math.h's unary family (fuses_unary); each of the producer alone,
 * float32 and not rounded to 16 bits. By the graph and the backend's rows
 * alone: compile records it for each order position (ts_prog.pass), and
 * the executor reads that, then asks whether the op runs there (its stage,
 * not skipped) and whether the buffers let the pass write where it must;
 * the memory plan asks it so that they do (a taken op's output lives from
 * its producer's step). took[0] the op (the Add, for a residual or a
 * Linear's activation), took[1] the residual's Relu or the activation. */
typedef enum ts_pass_kind { TS_PASS_NONE, TS_PASS_BIAS, TS_PASS_ADD_RELU, TS_PASS_RELU, TS_PASS_UNARY, TS_PASS_BIAS_ACT } ts_pass_kind;
ts_pass_kind ts_pass_takes(const ts_prog *p, const ts_graph *g, const ts_kernel_row *rows, int k, int took[2]);
/* Whether the op of kind `kind` that order[k]'s pass takes (ts_pass_takes'
 * took[0]), a Relu or a unary op, may write its output exactly over its
 * producer's input 0, in that input's cell: the producer's row says its
 * pass may (pass_over_in0), the input is float32, of the output's shape.
 * The plan gives the op that cell where the producer is the input's last
 * reader; the executor lets the pass write there where nothing observes
 * the input (a numeric check's report reads a failed output's inputs). */
bool ts_pass_over_input(const ts_prog *p, const ts_graph *g, const ts_kernel_row *rows, int k, ts_pass_kind kind, int op);

#endif
