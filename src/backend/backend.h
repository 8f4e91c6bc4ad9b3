/* backend.h -- the device contract: what the executor needs from a device,
 * as a table of functions (in the style of core/collective.h). One backend
 * per device under src/backend/ (cpu/ always; cuda/ when nvcc is found),
 * found by the name a user gives through the registry above them
 * (backend/registry/); a model holds one (m->backend, the CPU's by
 * default) and nothing but that backend knows how the device works.
 * Internal: not API. docs/backend.md tells how a
 * device joins and which entries are called through the table yet.
 *
 * Rules every backend follows:
 * - Device pointers are opaque outside the backend: float * or void *
 *   values it hands out may not be dereferenced by the host (the CPU's can,
 *   which is why the layers that still do so work today, see docs).
 * - Work goes on a stream: every entry that works takes the model's
 *   stream first, the `stream` of its device handle (ts_device below),
 *   made once with the model (stream_create; the CPU backend, which has
 *   none, takes the model's thread pool, ts_pool *). The layers above pass
 *   that stream and nothing else to every call; every backend honours it
 *   (a GPU's work, copies, events, reductions and recordings all go on
 *   it). Two exceptions, by name: TS_STREAM_THIS_THREAD from inside one
 *   of the host pool's jobs (a host_addressable backend only), and NULL
 *   outside any model (tests, benchmarks: the device's default stream,
 *   the CPU's calling thread). Work and copies are asynchronous: they may
 *   return before they are done, in order on that stream; `synchronize`
 *   completes them. The CPU completes everything before returning.
 * - Kernels follow the op table (graph/ops.h): one row per ts_op, forward
 *   and backward of fixed meaning; backward kernels ACCUMULATE into the
 *   input gradients (NULL = not wanted).
 * - Reductions (summaries, NaN/Inf scans) run where the tensor lives and
 *   hand the host a few bytes, never the tensor. */
#ifndef TS_BACKEND_H
#define TS_BACKEND_H

#include "core/half.h"
#include "core/stats.h"
#include "graph/graph.h"

struct ts_pool;
struct ts_opt_consts;

/* The stream of a call made from inside one of the host pool's jobs (the
 * CPU's optimizer step, split over the model's threads): its work is done
 * on the calling thread, which is already one of the pool's. Only a
 * host_addressable backend is given it (its memory is what the host's
 * jobs work on); no layer above the backends passes a bare NULL. */
#define TS_STREAM_THIS_THREAD ((void *)(intptr_t)-1)
struct ts_opt_state;
struct ts_stats_stream;
struct ts_stats_partial;
struct ts_stats_sums;

/* What an Attention node's one pass summarises of its unfused twin's
 * tensors while it computes them, for the watches on them that it stands
 * for (observe.c's twin summaries): per (batch, query head) pair p, the
 * sums of role r in pairs[p * TS_ATT_ROLES + r] (zeroed by the caller),
 * for each role whose bit `want` has: the raw scores q k^T over every
 * (query, key); the scaled scores with the masked keys `fill`, which the
 * twin's softmax reads; the probabilities; the output [T, Dv] rows. */
enum { TS_ATT_RAW, TS_ATT_MASKED, TS_ATT_PROB, TS_ATT_OUT, TS_ATT_ROLES };
typedef struct ts_att_sums {
    unsigned want;
    float fill;
    struct ts_stats_sums *pairs;
} ts_att_sums;

/* What a kernel sees of one node at run time. */
typedef struct ts_kctx {
    const ts_tensor *node; /* op and attributes (attr, fattr, iparam, fparam) */
    int n_in;
    const float *in[TS_MAX_INPUTS];       /* float input values (NULL for integer inputs, except for the ops that keep them: ts_op_def.keeps_int) */
    const int32_t *in_int[TS_MAX_INPUTS]; /* integer input values (labels, indices), else NULL */
    float *out;            /* output value */
    const float *dout;     /* gradient of the output */
    float *din[TS_MAX_INPUTS]; /* gradients of the inputs to accumulate into, or NULL */
    /* bit j: this backward is the first to write din[j], which the executor
     * did not zero: store into it (every value) rather than add. Set only
     * for the inputs the row's stores_din names. */
    unsigned din_store;
    ts_shape in_shape[TS_MAX_INPUTS];
    ts_shape out_shape;
    float *scratch;        /* per-node scratch planned at compile, kept from forward to backward */
    float *workspace;      /* transient scratch shared by all nodes (valid during one kernel call) */
    float *cache;          /* what the kernel keeps from run to run (ts_kernel_row.cache_floats), else NULL */
    uint64_t values_gen;   /* the graph's values_gen: moved since the kernel filled its cache, the inputs it derived it from may differ */
    ts_half_loss *lost;    /* a Cast to a 16-bit float: what its rounding loses this micro-batch goes here, in the device's memory (NULL: not counted) */
    /* TS_BF16 / TS_F16 where a value is held in 16-bit cells (uint16_t
     * behind the float pointer: only the ops compile lets read them do,
     * widening into `widen`), else TS_F32 (and TS_I32 for in_int) */
    ts_dtype in_dtype[TS_MAX_INPUTS];
    ts_dtype out_dtype;
    float *widen;          /* room for the f32 copies of this node's 16-bit inputs (transient) */
    /* MatMul forward whose row fuses_bias: the Add of a Linear's bias that
     * follows it, done in the product's output pass: bias_out[i, :] =
     * out[i, :] + bias, as the Add computes it (bias_out may be out). NULL:
     * none (the executor sets both, and skips the Add's kernel). */
    const float *bias;
    float *bias_out;
    bool training;         /* a training model (batch statistics, dropout on) */
    bool tf32;             /* float32 products may round their inputs to TF32 (ts_options_set_allow_tf32; a GPU's tensor cores) */
    bool update_state;     /* forward may update buffers (training, not a diagnostic replay) */
    uint64_t iteration;    /* micro-batches trained before this one (seeds dropout) */
    struct ts_pool *pool;  /* the model's host worker threads (the CPU's kernels split their work over them) */
    void *stream;          /* the model's stream the kernel runs on (ts_device.stream; the CPU's: pool) */
    /* Conv or BatchNorm forward whose row fuses_relu: the Relu that
     * follows it, done in the kernel's output pass: relu_out = max(0, out),
     * as the Relu computes it (relu_out may be out); a MatMul whose row
     * fuses_bias_act, with bias: relu_out = max(0, bias_out). NULL: none
     * (the executor sets it, and skips the Relu's kernel). */
    float *relu_out;
    /* LayerNorm forward whose row fuses_unary: the op of ew_math.h's unary
     * family that follows it (act: a Gelu, an Erf, ...; its ts_ewu_kind and
     * fattr[0..1] say the formula), done in the kernel's output pass:
     * act_out = f(out), as that op's kernel computes it (act_out may be
     * out); a MatMul whose row fuses_bias_act, with bias: act_out =
     * f(bias_out). NULL both: none (the executor sets them, and skips that
     * op's kernel). */
    const ts_tensor *act;
    float *act_out;
    /* Conv forward whose row fuses_add_relu: the residual Add and the Relu
     * that follow it, done in the convolution's output pass (exec.c's
     * add_relu_fusable): residual_out = out + residual (the Add's other
     * input, of out's shape; NULL: the sum not kept), relu_out = max(0,
     * that sum), as the Add and the Relu compute them. NULL residual: none
     * (the executor sets them, and skips both kernels). */
    const float *residual;
    float *residual_out;
    /* Silu forward whose row fuses_gate: the Mul of its output by `gate`
     * (another value of its shape) that the executor hands it (exec.c's
     * gate_fusable), done in its output pass: gate_out = f(x) * gate, as
     * the Mul computes it; out is written too unless it is gate_out. NULL
     * both: none (the executor skips the Mul's kernel). */
    const float *gate;
    float *gate_out;
    /* Silu backward whose row fuses_gate, run at the place of the Mul of
     * its value s (out) by `gate` (u): both backwards in one pass (exec.c's
     * gate_bwd_fusable), din[0] (+)= (dy u) f'(x) and gate_din (+)= dy s,
     * dy the Mul's output gradient (gate_dout). dy u is the value the
     * Mul's backward gives s's gradient (0 + dy u where gate_plus: a
     * gradient it adds to, zeroed); gate_din is u's gradient as the Mul's
     * kernel writes it (stored where gate_din_store, 0 + dy s where
     * gate_din_plus; NULL: not wanted), in place over dy, u or s or apart.
     * s's gradient is neither written nor read. NULL gate_dout: none. */
    const float *gate_dout;
    float *gate_din;
    bool gate_plus, gate_din_store, gate_din_plus;
    /* Attention forward running its one pass: the twin's summaries it
     * takes as it goes (NULL: none) */
    const ts_att_sums *att_sums;
    /* BatchNorm forward whose row sums_channels: the plain stats of its
     * output and of the Relu it writes (relu_out; only with the output's)
     * that a watch asks, summed as the kernel writes them, one
     * ts_stats_sums per channel (dim 1), zeroed by the executor (observe.c's
     * kernel summaries). Conv and MaxPool forward whose row sums_samples:
     * its output's, one per sample (dim 0), where its path sums them (the
     * executor checks the counts, and summarises the output itself where
     * they fall short). NULL: not wanted. */
    struct ts_stats_sums *sums_out, *sums_relu;
} ts_kctx;

typedef void (*ts_kernel_fn)(const ts_kctx *k);

/* One op on one device. forward is NULL for the leaves (Input, Param,
 * Const, Buffer: their values are bound, not computed); backward is NULL
 * exactly when the op table says no gradient flows through the op
 * (ts_op_def.has_backward). */
typedef struct ts_kernel_row {
    ts_kernel_fn forward;
    ts_kernel_fn backward;
    /* Transient floats the op's kernels need during one call, shared by
     * every node (the largest is planned at compile); NULL: none. in_dtype:
     * the cells its inputs are held in (a kernel of 16-bit operands may
     * take other room); threads: the stream's (the CPU splits work into
     * that many slots). */
    size_t (*workspace_floats)(const ts_shape *in, const ts_dtype *in_dtype, const ts_shape *out, int threads);
    /* Floats a node of an inference model keeps from run to run (kctx.cache,
     * zeroed at compile) for what its forward derives from the inputs the
     * graph holds (held[j]: input j is a parameter, buffer or constant),
     * such as a convolution's weights transformed: made again when
     * kctx.values_gen moves. NULL or 0: nothing kept. */
    size_t (*cache_floats)(const ts_tensor *node, const ts_shape *in, const bool *held, const ts_shape *out);
    /* bit j: the backward honours kctx.din_store for input j, so the
     * executor need not zero that gradient before the first backward that
     * writes it (0: it always zeroes, the backward adds) */
    unsigned stores_din;
    /* the forward honours kctx.bias (MatMul): the executor may hand it the
     * bias Add that follows it (exec.c's bias_fusable) */
    bool fuses_bias;
    /* with fuses_bias, the forward honours kctx.relu_out, or act and
     * act_out, after the bias: relu_out = max(0, bias_out) or act_out =
     * f(bias_out) (MatMul): the executor may hand it the bias Add and the
     * Relu or unary op after it (exec.c's bias_act_fusable) */
    bool fuses_bias_act;
    /* the forward honours kctx.relu_out (Conv, BatchNorm): the executor
     * may hand it the Relu that follows it (exec.c's pass_fusable) */
    bool fuses_relu;
    /* the forward honours kctx.sums_out and sums_relu (BatchNorm): the
     * executor may hand it the summaries of what it writes, and then write
     * the Relu over its output though a watch summarises that output */
    bool sums_channels;
    /* the forward may honour kctx.sums_out, a sample at a time (Conv,
     * MaxPool): the executor may hand it the summary of its output, and
     * takes it from the sums where their counts cover the output */
    bool sums_samples;
    /* the forward honours kctx.act and act_out (LayerNorm): the executor
     * may hand it the op of ew_math.h's unary family that follows it
     * (exec.c's pass_fusable) */
    bool fuses_unary;
    /* the forward honours kctx.residual and residual_out (Conv): the
     * executor may hand it the residual Add and the Relu that follow it
     * (exec.c's add_relu_fusable) */
    bool fuses_add_relu;
    /* the forward's output pass (a fused op's output too: relu_out,
     * act_out) may write over its input 0 exactly, element for element: it
     * reads each row of that input before it writes the row's outputs, and
     * no other row (BatchNorm, LayerNorm). The memory plan may then give
     * the fused op's output the input's cell (ts_pass_over_input). */
    bool pass_over_in0;
    /* the forward honours kctx.gate and gate_out (Silu): the executor may
     * hand it the Mul of its output by another value of its shape
     * (exec.c's gate_fusable) */
    bool fuses_gate;
} ts_kernel_row;

/* The dimension of a node's value whose work items the row's forward sums
 * for a watch (kctx.sums_out): 1, channels (sums_channels), 0, samples
 * (sums_samples), -1 none. */
static inline int ts_kernel_sums_dim(const ts_kernel_row *r) { return r->sums_channels ? 1 : r->sums_samples ? 0 : -1; }

/* A point on a stream, for timing kernels: ns once complete (the CPU's
 * clock at record), or a device handle a backend fills. */
typedef struct ts_event {
    uint64_t ns;
    void *handle;
} ts_event;

/* One tensor's summary into device slots (stats_reduce_many): its stats,
 * and where hist is not NULL the counts of `hist_what` (TS_WATCH_HISTOGRAM,
 * TS_WATCH_RANGE, or both). */
typedef struct ts_stats_job {
    const float *x;
    int64_t n;
    ts_device_stats *slot;
    ts_device_hist *hist;
    int hist_what;
} ts_stats_job;
#define TS_STATS_MANY 64 /* tensors a device summarises in one launch */

/* One copy from device memory to the host (copy_out_then). */
typedef struct ts_copy_out {
    void *dst;
    const void *src;
    size_t bytes;
} ts_copy_out;

/* A device's memory, in bytes: what the backend holds now (`alloc` less
 * `free`) and at most since it started, and what the device has free of
 * its total (every process's use counted). */
typedef struct ts_device_memory {
    uint64_t in_use, peak, free, total;
} ts_device_memory;

typedef struct ts_backend {
    const char *name; /* "cpu", "cuda", as the user names the device */
    int ordinal;      /* which device of that kind (cuda:N) */
    /* Whether the host may read and write the device's memory directly
     * (the CPU's). Where not, the layers that read tensor values on the
     * host go through copy_to_host (docs/backend.md). */
    bool host_addressable;
    /* The device's stream for a model: *out, a queue of its own (a GPU's:
     * a real stream, not shared with other models); stream_destroy
     * completes and gives it back. NULL entries: the device has none, and
     * a model's stream is its host thread pool (the CPU). */
    ts_status (*stream_create)(void **out);
    void (*stream_destroy)(void *stream);

    /* ---- memory: the memory plan's arenas, scratch and workspace */
    /* *out <- `bytes` of zeroed device memory (bytes > 0), or
     * TS_ERR_OUT_OF_MEMORY with *out NULL. */
    ts_status (*alloc)(size_t bytes, void **out);
    void (*free)(void *p); /* NULL: nothing */
    /* *out <- the device's memory as above; NULL: the host's (the CPU's,
     * which the memory watcher reports) */
    void (*memory_info)(ts_device_memory *out);

    /* ---- the host's side of the copies: the `bytes` at p (host memory the
     * caller owns) page-locked, so that copies to and from them run at the
     * bus's speed without holding up the host. True: this call locked them
     * (host_unpin gives them back, before the memory is freed); false: it
     * could not (already locked by someone else, or refused), and copies
     * work as before, only slower. NULL: the device copies from any host
     * memory as fast (the CPU). */
    bool (*host_pin)(void *p, size_t bytes);
    void (*host_unpin)(void *p);

    /* ---- copies, asynchronous on `stream`: complete after `synchronize`;
     * the host side must stay untouched until then */
    void (*copy_to_device)(void *stream, void *dst, const void *src, size_t bytes);
    void (*copy_to_host)(void *stream, void *dst, const void *src, size_t bytes);
    void (*copy_on_device)(void *stream, void *dst, const void *src, size_t bytes);
    /* Completes everything started on the stream; a device failure is
     * TS_ERR_INTERNAL with a message naming the device. */
    ts_status (*synchronize)(void *stream);

    /* ---- fill; gradient accumulation and its mean */
    void (*fill)(void *stream, float *dst, float value, int64_t n);
    void (*zero)(void *stream, float *dst, int64_t n);
    void (*accumulate)(void *stream, float *dst, const float *src, int64_t n); /* dst += src */
    void (*scale)(void *stream, float *dst, const float *x, float s, int64_t n); /* dst = s x (dst may be x) */
    /* x[0..n) rounded in place to the nearest `t` value (TS_BF16, TS_F16:
     * core/half.h), what it lost added to *lost, the device's memory
     * (NULL: not counted). */
    void (*round_half)(void *stream, ts_dtype t, float *x, int64_t n, ts_half_loss *lost);
    /* Whether round_half and the Cast kernels count what they lose (where
     * the host cannot read the device's memory, into per-entry slots there,
     * brought back after the run: exec/device.c); false: watches report it
     * as not measured. */
    bool counts_half_loss;
    /* n values held in 16-bit cells of type t (TS_BF16, TS_F16) at src
     * widened exactly into f32 at dst (host memory), for the observers,
     * which read f32. NULL: the device keeps no tensor in 16-bit cells. */
    void (*unpack_half)(void *stream, ts_dtype t, float *dst, const void *src, int64_t n);

    /* ---- kernels: kernels[op] for every ts_op (TS_OP_COUNT rows) */
    const ts_kernel_row *kernels;
    /* Whether the Attention row computes the one pass (docs/backend.md,
     * "Fused attention"); false: it only copies the node's unfused twin,
     * so the executor always runs the twin's ops on this device, and
     * compile refuses an Attention node without a twin. The one pass
     * takes the twin's summaries its kctx asks for (att_sums). */
    bool attention_one_pass;

    /* ---- the optimizer step of one parameter over [begin, end): as
     * ts_opt_update / ts_opt_update_summarised (compile/program.h), the
     * latter fusing the summaries of the gradient it reads and the
     * parameter it writes, and clearing the gradient when `clear`; NULL
     * on a device whose memory the host cannot read (its step's tensors
     * are summarised on the device, stats_reduce_many) */
    void (*opt_update)(void *stream, const ts_optimizer *o, const struct ts_opt_consts *c, struct ts_opt_state *s, float *param,
                       const float *grad, int64_t begin, int64_t end);
    /* (the two below are the host's: they work on [begin, end) on the
     * calling thread, one of the pool's jobs, and take no stream) */
    void (*opt_update_summarised)(const ts_optimizer *o, const struct ts_opt_consts *c, struct ts_opt_state *s, float *param,
                                  float *grad, int64_t begin, int64_t end, bool clear, struct ts_stats_stream *gs,
                                  struct ts_stats_partial *gp, struct ts_stats_stream *ps, struct ts_stats_partial *pp, double sq[4]);
    /* ... and as ts_opt_update_norms: the squares stability signals sum
     * (NULL where opt_update_summarised is) */
    void (*opt_update_norms)(const ts_optimizer *o, const struct ts_opt_consts *c, struct ts_opt_state *s, float *param, float *grad,
                             int64_t begin, int64_t end, bool clear, double sq[4]);

    /* ---- reductions observation needs, into a few bytes on the host */
    /* The summaries of n tensors into their slots (device memory; jobs is
     * host memory, read before the call returns), asynchronously, in as
     * few launches as the device can: the host reads the slots after the
     * run, in one copy. NULL: not needed (a device whose memory the host
     * reads summarises there). */
    void (*stats_reduce_many)(void *stream, const ts_stats_job *jobs, int n);
    /* Whether x[0..n) holds a NaN or an Inf. */
    bool (*has_nonfinite)(void *stream, const float *x, int64_t n);
    /* What the host takes while the run goes: the n copies device to host
     * (dst page-locked, host_pin), then fn(arg) on a host thread, once the
     * work queued on the stream so far is done, without holding up the
     * stream's later work (CUDA: on a side stream after an event, a branch
     * of a recorded run's graph); fn must not call the backend. Done by
     * the stream's next synchronize; c is read before the call returns.
     * NULL: not offered (what the run captured is copied after it). The
     * CPU: at once. */
    void (*copy_out_then)(void *stream, const ts_copy_out *c, int n, void (*fn)(void *arg), void *arg);

    /* ---- replay: a run's device work recorded once and replayed as one
     * launch (a CUDA graph; exec/replay.c decides which runs). NULL
     * entries: the device launches each run's work as it comes (the CPU).
     * capture_begin: until capture_end, the stream's work is recorded, not
     * done; *rec <- the recording, with room for `updates` opt_update
     * calls, whose step constants (the rate, Adam's bias corrections)
     * change every step: a recorded update reads them from the
     * recording's table. capture_end: the recording ready to replay, or
     * an error saying why the device refused it (the run's work was then
     * not done). walk_begin: the host walks the same run again without
     * work (nothing is launched; opt_update only fills the table);
     * replay: sends the table and launches the recording, or, with
     * `launch` false, abandons the walk (a run cancelled before its first
     * micro-batch). */
    ts_status (*capture_begin)(void *stream, int updates, void **rec);
    ts_status (*capture_end)(void *stream, void *rec);
    void (*walk_begin)(void *stream, void *rec);
    ts_status (*replay)(void *stream, void *rec, bool launch);
    void (*recording_free)(void *rec);

    /* ---- timing */
    void (*event_record)(void *stream, ts_event *e);
    /* ns from a to b, both recorded and complete; 0 when either is not */
    uint64_t (*event_elapsed_ns)(const ts_event *a, const ts_event *b);
    /* What event_record made for e given back (NULL: nothing to give) */
    void (*event_free)(ts_event *e);
} ts_backend;

/* A device handle: the backend a model runs on and the stream its work
 * goes on (the stream its stream_create made; the CPU backend's, which
 * has no stream_create: the model's thread pool), made once with the
 * model and passed as one: every call through the table takes
 * dev.stream. */
typedef struct ts_device {
    const ts_backend *backend;
    void *stream;
} ts_device;

/* ---- each backend's entry points, which the registry
 * (backend/registry/registry.h) calls to find a device's table: no layer
 * below it names a backend. */

/* The CPU backend (backend/cpu/cpu.c): always built. Its table also
 * answers questions about host memory on any device (a NaN/Inf scan of a
 * value the host holds), with the model's pool as its stream. */
/* The ops that move an i64 tensor's cells (ts_op_def.keeps_int) run on
 * every device as the same op on pairs of 4-byte cells: ts_cells_node
 * makes t's twin the kernels then read (a permutation keeps the pair's dim
 * last; the other ops count dims from the front), false where t's ranks
 * leave no room for the pair's dim; ts_kctx_as_cells makes k (built for
 * t) that op: the twin, the data's and the output's dims with a trailing
 * 2 (Where's condition a 1, to broadcast), their dtypes f32. */
bool ts_cells_node(const ts_tensor *t, const ts_shape *in0, const ts_shape *out, ts_tensor *twin);
void ts_kctx_as_cells(ts_kctx *k, const ts_tensor *twin);

const ts_backend *ts_backend_cpu(void);
/* A model's host worker threads (backend/pool.h), n including the caller:
 * *out, and the CPU's matrix products told to use as many. */
ts_status ts_backend_host_pool(int n, struct ts_pool **out);
/* The CPU run the way a GPU is ("cpu-staged"): its memory treated as a
 * device's, so the device path is tested without a GPU. */
const ts_backend *ts_backend_cpu_staged(void);
/* Its streams are real (an object each, from its stream_create), and
 * every entry that takes one checks it was given one of those, alive
 * (stricter than a GPU: NULL is counted too, so a test's own calls pass
 * the stream they made):
 * the calls given anything else (NULL, a thread pool, a stream destroyed)
 * since the last call, and in buf each kind of them once ("fill given
 * NULL; ..."); both cleared. The tests' check that the layers above pass
 * the model's stream to every call (backend/cpu/staged_stream.c). */
int ts_cpu_staged_stream_misuse(char *buf, size_t n);

/* The CUDA backend of GPU `ordinal` (backend/cuda/cuda.cu), built as a
 * feature when nvcc is found: *out, or TS_ERR_UNSUPPORTED saying why not
 * (built without CUDA: backend/cuda_none.c; no GPU, no driver, no such
 * ordinal) with *out NULL. Thread-safe; the first call initialises it. */
ts_status ts_backend_cuda(int ordinal, const ts_backend **out);

/* GPU `ordinal` in one line, for users and bug reports (ts_device_describe):
 * "cuda:0: NVIDIA H200, sm_90, 139.8 GiB (139.2 free), 132 SMs, driver
 * 13.0, runtime 13.0, cuBLAS 13.0.2, PCI 0000:1A:00.0"; or the refusal
 * ts_backend_cuda gives. It starts no backend (no stream, no workspace, the
 * process not bound to that GPU), so every GPU can be described; it loads
 * cuBLAS, as a model would, and the CUDA runtime makes its context on the
 * GPU to read what is free. ts_backend_cuda_count: the GPUs CUDA sees, or
 * TS_ERR_UNSUPPORTED saying why none (built without CUDA, no GPU, no
 * driver). Both in backend/cuda/cuda.cu, refused by backend/cuda_none.c. */
ts_status ts_backend_cuda_describe(int ordinal, char *buf, size_t n);
ts_status ts_backend_cuda_count(int *count);

#endif
