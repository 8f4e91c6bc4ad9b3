/* model.h -- a model as the layers that run it share it: its graph, options,
 * optimizer and state, the compiled program, its device (backend) and its
 * split over a job's ranks (the parallel table), and the bookkeeping of its
 * runs. Owned by the model layer (src/model/), which creates and drives
 * it; exec/, observe/, parallel/ and diag/ read and update the parts named
 * here. Compile reads none of it: it is handed a ts_model_def
 * (compile/program.h, ts_model_definition). */
#ifndef TS_MODEL_H
#define TS_MODEL_H

#include "backend/pool.h"
#include "compile/program.h"
#include "core/collective.h"
#include "core/op_chain.h"
#include "diag/backward_ops.h"
#include "graph/options.h"

#include <stdatomic.h>

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
    /* the program of the other micro-batch size, kept when a new size
     * recompiled (an epoch's last, smaller batch): switching back to it
     * is no compilation, so each size compiles once a run. Any other
     * compile (options, anchors, the graph) drops it. */
    ts_prog *spare;
    bool compiled, stale;
    bool recompile_logged; /* the first recompilation is logged at info */
    const char *stale_cause;
    ts_opt_state *state;
    int n_state;
    const struct ts_backend *backend; /* the device it runs on */
    const struct ts_parallel *par;    /* its split over a job's ranks (parallel/) */
    uint64_t state_gen;  /* bumped when the host writes the optimizer state (a checkpoint restored) */
    ts_pool *pool;       /* the CPU backend's stream: its worker threads */
    void *stream;        /* another device's stream (NULL on the CPU) */
    int64_t runs, steps;
    bool has_run;
    ts_op_chain chain;   /* the observers around each op of the next run (made by the model layer: src/model/observers.c) */
    bool started, in_start; /* the on_start hook has returned TS_OK / is running */
    /* failure of the last run (numeric check) */
    int failed_entry;
    int failed_op;       /* node whose backward wrote the failed gradient, -1 otherwise */
    bool rerun;          /* re-executing op by op: checks only, no observers */
    /* replicas: the job's collectives (NULL without replicas) */
    const ts_collective *coll;
    int64_t next_check;  /* step of the next weight checksum */
    /* cancelling (ts_model_cancel): the flag, set from any thread or a
     * signal handler; every rank's answer to a question all decide
     * together (MPI jobs: cancel, skip a loss-scaled step); the
     * micro-batches a cancelled run completed */
    atomic_int cancel;
    int *votes;
    int64_t cancel_at;
    struct ts_hold *hold; /* ts_model_hold: a run's tensors kept (observe/hold.c), NULL until asked */
    struct ts_dump *dump; /* ts_options_set_dump_debug: what the dump wrote so far (model/dump_debug.c) */
    bool trace_done;     /* its trace (ts_options_set_trace) is written: not started again */
    bool dist_agreed;    /* the ranks' options compared equal (agree.c); cleared by a compile or a new schedule */
    /* dynamic loss scaling (ts_options_set_loss_scaling), on when `scaling` */
    bool scaling;
    double loss_scale; /* kept in [TS_LOSS_SCALE_MIN, TS_LOSS_SCALE_MAX] */
    int64_t good_steps;  /* steps in a row without an Inf/NaN gradient */
    int64_t skipped_steps;
    /* the spike detector (ts_options_detect_spikes, model/spike_watch.c) */
    struct ts_spike_watch *spikes;
    bool skip_update;    /* it found a spike: this step's update is skipped */
};

/* The range a dynamic loss scale stays in (backing off and growing stop at
 * its ends) and a checkpoint's scale must be in: 2^-24 (f16's smallest
 * step: a smaller scale only flushes gradients to zero) to 2^127 (below
 * f32's largest, which the scale is multiplied in). */
#define TS_LOSS_SCALE_MIN 0x1p-24
#define TS_LOSS_SCALE_MAX 0x1p127

/* A model's split over the ranks of a job (src/parallel/: replicas, pipeline
 * stages, records gathered to rank 0), as compile, the executor and the
 * observers call it: through this table, set by the model layer, so they
 * never link to parallel/ (docs/design.md#layers-and-the-flow-of-data). The entries are
 * parallel/parallel.h's functions of the same meaning. */
typedef struct ts_parallel {
    ts_status (*compile)(ts_model *m, ts_prog *p); /* replicas, stages, then outfeeds */
    ts_status (*grad_ready)(ts_model *m, int node, int64_t mb);
    ts_status (*allreduce)(ts_model *m);
    ts_status (*sync_buffers)(ts_model *m);
    void (*schedule_op)(const ts_model *m, int stage, int k, bool *backward, int *a);
    void (*keep)(ts_model *m, int a, bool restore);
    ts_status (*recv_forward)(ts_model *m, int a);
    ts_status (*send_forward)(ts_model *m, int a);
    ts_status (*recv_backward)(ts_model *m, int a);
    ts_status (*send_backward)(ts_model *m, int a);
    int (*outfeed_replica)(const ts_model *m);
    int (*outfeed_stage)(const ts_model *m);
    ts_status (*outfeed_keep)(ts_model *m, int entry, int link, int64_t sample, const ts_array *a);
} ts_parallel;

/* R replicas, 1 without; K pipeline stages, 1 without. */
static inline int ts_replicas(const ts_model *m) { return ts_opts_replicas(&m->opts); }
static inline int ts_stages(const ts_model *m) { return ts_opts_stages(&m->opts); }
/* Whether this rank runs `node` (every node without a pipeline). */
static inline bool ts_in_stage(const ts_model *m, int node) { return !m->prog->stage || m->prog->stage[node] == m->coll->rank; }

/* Its device handle: the backend and the stream its work goes on (the
 * CPU's: the thread pool; another device's: m->stream). */
static inline ts_device ts_model_device(const ts_model *m) {
    return (ts_device){.backend = m->backend, .stream = m->backend->host_addressable ? (void *)m->pool : m->stream};
}

/* model.c: what compile reads of m (compile/program.h), all it is handed;
 * what the backward walk (diag/backward_ops.h) reads of it. */
ts_model_def ts_model_definition(ts_model *m);
static inline ts_bwd_model ts_bwd_of(const ts_model *m) {
    return (ts_bwd_model){.prog = m->prog, .g = m->g, .training = m->training, .opt = &m->opt, .base_lr = m->base_lr, .loss = m->loss,
                          .grad_accum = m->opts.grad_accum, .replicas = ts_replicas(m)};
}

/* memory.c: after a compile, the memory plan's peak (the most bytes live
 * at one point of the step, ts_model_memory_plan) as the metric
 * MemoryPlanPeakBytes. */
void ts_memory_plan_metrics(const ts_model *m);

/* model/model.c: the program for the inputs' new micro-batch size (the
 * shapes m->input_override asks for): the spare when it was compiled for
 * them (switched to, no compilation), else a new one, the current kept
 * as the spare. why: what changed, for the log line. */
ts_status ts_model_compile_for_shape(ts_model *m, const char *why);

#endif
