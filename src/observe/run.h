/* run.h -- a model's runs as the layers that carry them out share them:
 * what runs (the graph, the options, the optimizer, the compiled program),
 * on what (the device, the job's ranks), and the state its runs keep from
 * one to the next (run and step counts, loss scaling, the cancel flag, the
 * observers around each op, the hold, the failure of the last run).
 *
 * The model (model/model.h) embeds one and hands it to the executor, the
 * observers, the job's ranks (src/parallel/) and the diagnostics' hooks,
 * which never see the model itself. It is declared here, with the
 * observers, because that is the lowest layer all its readers may use
 * (docs/design.md#layers-and-the-flow-of-data: exec, parallel and diag use
 * observe; observe uses none of them). Each group of fields below names
 * the one module that writes it; the others only read it. Internal: not
 * API. */
#ifndef TS_OBSERVE_RUN_H
#define TS_OBSERVE_RUN_H

#include "backend/pool.h"
#include "compile/program.h"
#include "core/collective.h"
#include "core/op_chain.h"
#include "graph/options.h"

#include <stdatomic.h>

typedef struct ts_run {
    /* what runs: written by the model layer (src/model/) as the model is
     * made, compiled and given new options; read by the rest */
    ts_graph *g;
    bool training;
    int loss;            /* node id (training) */
    int *outputs;        /* node ids (inference) */
    int n_outputs;
    ts_options opts;     /* a private copy */
    ts_optimizer opt;    /* opt.lr: the rate of the current step (the executor sets it each step) */
    float base_lr;       /* the rate the schedule scales */
    ts_lr_schedule sched;
    ts_prog *prog;       /* the program the next run runs */
    ts_opt_state *state; /* per trained parameter: made at the first compile, outlives every program */
    int n_state;
    uint64_t state_gen;  /* bumped when the host writes the optimizer state (a checkpoint restored) */
    /* on what: the device and the job's ranks, set by the model layer as
     * the model is made and compiled */
    ts_device dev;       /* the device it runs on and its stream (made with the model): every call through the table passes dev.stream */
    ts_pool *pool;       /* the host's worker threads, for the host's own jobs (ts_pool_for); the CPU backend's stream too */
    const struct ts_parallel *par;    /* its split over a job's ranks (parallel/, through this table) */
    const ts_collective *coll;        /* the job's collectives (NULL without replicas or stages) */
    ts_op_chain chain;   /* the observers around each op of the next run: registered by the model layer, run by the executor */
    int64_t runs;        /* runs completed (the model layer counts them at each run's end) */
    bool has_run;        /* a run completed since the last compile */
    /* the executor's (exec/): its step count, the failure of the last
     * run, cancelling, loss scaling (the model layer writes these only to
     * restore a checkpoint's, model/checkpoint.c) */
    int64_t steps;
    int failed_entry;    /* the tensor a numeric check failed on */
    int failed_op;       /* node whose backward wrote the failed gradient, -1 otherwise */
    bool rerun;          /* re-executing op by op: checks only, no observers */
    /* cancelling (ts_model_cancel): the flag, set from any thread or a
     * signal handler; every rank's answer to a question all decide
     * together (MPI jobs: cancel, skip a loss-scaled step); the
     * micro-batches a cancelled run completed */
    atomic_int cancel;
    int *votes;
    int64_t cancel_at;
    bool trace_done;     /* its trace (ts_options_set_trace) is written: not started again */
    /* dynamic loss scaling (ts_options_set_loss_scaling), on when
     * `scaling` (the model layer sets it and the first scale from the
     * options) */
    bool scaling;
    double loss_scale;   /* kept in [TS_LOSS_SCALE_MIN, TS_LOSS_SCALE_MAX] */
    int64_t good_steps;  /* steps in a row without an Inf/NaN gradient */
    int64_t skipped_steps;
    bool skip_update;    /* the spike detector (model/spike_watch.c) found a spike: this step's update is skipped */
    /* the observers' (observe/hold.c): ts_model_hold's copies of a run's
     * tensors, NULL until asked */
    struct ts_hold *hold;
    /* the job's (parallel/) */
    int64_t next_check;  /* step of the next weight checksum (replicas.c) */
    bool dist_agreed;    /* the ranks' options compared equal (agree.c); cleared by a compile or a new schedule */
} ts_run;

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
    ts_status (*compile)(ts_run *run, ts_prog *p); /* replicas, stages, then outfeeds */
    ts_status (*grad_ready)(ts_run *run, int node, int64_t mb);
    ts_status (*allreduce)(ts_run *run);
    ts_status (*sync_buffers)(ts_run *run);
    void (*schedule_op)(const ts_run *run, int stage, int k, bool *backward, int *a);
    void (*keep)(ts_run *run, int a, bool restore);
    ts_status (*recv_forward)(ts_run *run, int a);
    ts_status (*send_forward)(ts_run *run, int a);
    ts_status (*recv_backward)(ts_run *run, int a);
    ts_status (*send_backward)(ts_run *run, int a);
    int (*outfeed_replica)(const ts_run *run);
    int (*outfeed_stage)(const ts_run *run);
    ts_status (*outfeed_keep)(ts_run *run, int entry, int link, int64_t sample, const ts_array *a);
} ts_parallel;

/* R replicas, 1 without; K pipeline stages, 1 without. */
static inline int ts_replicas(const ts_run *run) { return ts_opts_replicas(&run->opts); }
static inline int ts_stages(const ts_run *run) { return ts_opts_stages(&run->opts); }
/* Whether this rank runs `node` (every node without a pipeline). */
static inline bool ts_in_stage(const ts_run *run, int node) { return !run->prog->stage || run->prog->stage[node] == run->coll->rank; }

#endif
