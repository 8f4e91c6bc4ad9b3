/* hold.h -- what a held run keeps (observe/hold.c, ts_model_hold) and what
 * re-executing it compares with (observe/rerun.c, ts_model_rerun). */
#ifndef TS_HOLD_H
#define TS_HOLD_H

#include "observe/observe.h"

typedef struct held {
    char *name;
    ts_dtype dtype;
    ts_shape shape;
    int64_t numel;
    void *copy;      /* on the model's device; NULL: read where it lives */
    float *host;     /* a device's copy brought to the host (or a live value's) */
    bool captured;   /* the held run produced it */
    bool per_step;
    int64_t sample;  /* in the micro-batch (per-step: the step) of the run it was copied in */
    void *before;    /* a parameter's value as the held run's first step read it (on the device), for a rerun; else NULL */
    bool before_captured;
} held;

typedef struct ts_hold {
    bool armed;
    const ts_backend *be; /* what the copies were allocated on */
    const ts_prog *prog;  /* the program they were made for (a model keeps two: model.c's spare) */
    held *t;              /* per entry of the program they were made for */
    int n;
    bool *observed;       /* the entries' own flags, put back when disarmed */
    int64_t last_mb;      /* the last micro-batch the held run reached */
    const char **names;   /* ts_model_held_names */
    size_t n_names;
    int64_t steps;        /* the model's optimizer steps as the held run started */
    double loss_scale;    /* and its loss scale */
    /* ts_model_rerun: the held run again, each tensor compared with its copy as it is final */
    bool comparing;
    ts_rerun_diff *diffs; /* the tensors that differ, in the order the rerun made them */
    size_t n_diffs;
    double loss, held_loss;
    float *cmp_now, *cmp_was; /* a device's values brought to the host to compare (host memory of the largest entry) */
    bool cmp_failed;          /* the device failed a copy */
} ts_hold;

/* Whether entry e's copy is of the micro-batch the held run ended in. */
bool ts_hold_current(const ts_hold *h, int e);

#endif
