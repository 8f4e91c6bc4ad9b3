/* backward_ops.h -- the backward pass and the optimizer step of a compiled
 * training program as a list of ops over the program's named entries: what
 * the graph dump (graph_dump.c) prints and the ONNX writer (diag/onnx_export.c)
 * writes, from one walk.
 *
 * Not graph nodes: compile gives every op's backward kernel a place in the
 * program (the reverse of the forward order) and every parameter an
 * optimizer update. Each is described as an "op" over the program's named
 * entries (Gradient___, Accum___, UpdatedVar___, optimizer state, and the
 * forward values it keeps). */
#ifndef TS_BACKWARD_OPS_H
#define TS_BACKWARD_OPS_H

#include "compile/program.h"
#include "graph/optim.h"
#include "observe/run.h"

/* What the walk reads of a training model besides its program (the model
 * layer fills it: ts_bwd_of below), and the graph dump of any
 * model (graph_dump.c). */
typedef struct ts_bwd_model {
    const ts_prog *prog;
    const ts_graph *g;
    bool training;
    const ts_optimizer *opt; /* the model's optimizer (a parameter may have its own) */
    float base_lr;           /* the model's base rate */
    int loss;                /* the loss node, -1: none */
    int grad_accum, replicas;
} ts_bwd_model;

/* The walk's view of a model's runs. */
static inline ts_bwd_model ts_bwd_of(const ts_run *run) {
    return (ts_bwd_model){.prog = run->prog, .g = run->g, .training = run->training, .opt = &run->opt, .base_lr = run->base_lr, .loss = run->loss,
                          .grad_accum = run->opts.grad_accum, .replicas = ts_replicas(run)};
}

#define TS_BWD_MAX_IN (TS_MAX_INPUTS + 2)
#define TS_BWD_MAX_OUT TS_MAX_INPUTS

typedef struct ts_bwd_op {
    char op[64];           /* LogBackward, SGD, ... */
    char attrs[160];       /* ", lr=0.01, momentum=0.9" */
    const ts_tensor *src;  /* whose op it is (its source location) */
    int in[TS_BWD_MAX_IN], n_in;    /* entries read */
    int out[TS_BWD_MAX_OUT], n_out; /* entries written */
    bool accumulates;      /* adds into its outputs (a backward kernel) */
    bool optimizer;        /* part of the optimizer step */
} ts_bwd_op;

/* The ops of the backward pass in the order they run (the first,
 * OnesLike, seeds the loss's gradient), then those of the optimizer step
 * (per trained parameter an Alias or AccumulateMean, then its update);
 * *out (ts_free) NULL and *n 0 when there are none. */
ts_status ts_backward_ops(const ts_bwd_model *m, ts_bwd_op **out, int *n);
/* The base rate parameter t is updated with: its own or the model's. */
float ts_bwd_lr(const ts_bwd_model *m, const ts_tensor *t);

#endif
