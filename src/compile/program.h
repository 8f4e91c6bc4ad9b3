/* program.h -- what compile produces and the executor runs: the ordered
 * nodes of a model, every named tensor (an "entry") with its buffer, and the
 * observers attached to each entry. */
#ifndef TS_PROGRAM_H
#define TS_PROGRAM_H

#include "exec/pool.h"
#include "graph/graph.h"

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

typedef struct ts_anchor_spec { /* as the user asked for it */
    char *short_name;
    char *tensor_name;
    ts_output_mode mode;
    int period;
} ts_anchor_spec;

typedef struct ts_watch_spec {
    char *pattern;
    int what, period;
} ts_watch_spec;

typedef struct ts_anchor { /* resolved at compile */
    char *short_name;
    int entry;
    ts_output_mode mode; /* never DEFAULT here */
    int period;
    int64_t rows;        /* samples kept (ALL: S, EVERY_N: S/N, else 1) */
    bool keeps_axis;     /* ALL and EVERY_N return [rows, *T] */
    float *data;         /* rows * numel, in the anchors arena */
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
    ts_outfeed_link *outfeeds;
    int n_outfeeds;
    bool check;          /* numeric check after it is produced */
} ts_entry;

typedef struct ts_prog {
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
    const ts_array **bound; /* per node: the run's input arrays */
    uint64_t anchor_ns, anchor_bytes, anchor_copies; /* this run, reported once after it */
    /* the optimizer step clears the gradients it consumed (A = 1) chunk by
     * chunk while they are in cache, so the next backward need not */
    bool param_grads_zero;
    int n_param_grads;   /* parameter gradients the backward clears */
    char **lint;         /* model lint warnings (lint.c) */
    int n_lint;
} ts_prog;

typedef struct ts_opt_state { /* per parameter, survives recompiles */
    int node;
    float *accl, *accl1, *accl2; /* momentum / moments */
    float step;
} ts_opt_state;

struct ts_options {
    int device_iterations, grad_accum, threads;
    ts_output_mode output_mode;
    int output_period;
    ts_check_numerics check;
    ts_anchor_spec *anchors;
    size_t n_anchors, cap_anchors;
    ts_watch_spec *watches;
    size_t n_watches, cap_watches;
    ts_outfeed *grad_q;
    int grad_pre_accumulated;
};

struct ts_model {
    ts_graph *g;
    bool training;
    int loss;            /* node id (training) */
    int *outputs;        /* node ids (inference) */
    int n_outputs;
    ts_options opts;     /* a private copy */
    ts_optimizer opt;
    ts_shape *input_override; /* per node, ndim -1 = as declared */
    int n_override;
    ts_prog *prog;
    bool compiled, stale;
    const char *stale_cause;
    ts_opt_state *state;
    int n_state;
    ts_pool *pool;
    int64_t runs, steps;
    bool has_run;
    /* failure of the last run (numeric check) */
    int failed_entry;
    bool rerun;          /* re-executing op by op: checks only, no observers */
};

/* options.c */
ts_status ts_options_copy(ts_options *dst, const ts_options *src);
void ts_options_clear(ts_options *o);
ts_status ts_anchor_spec_add(ts_anchor_spec **v, size_t *n, size_t *cap, const char *short_name,
                             const char *tensor_name, ts_output_mode mode, int period);

/* compile.c */
ts_status ts_prog_build(ts_model *m, ts_prog **out);
void ts_prog_free(ts_prog *p);
int ts_prog_find(const ts_prog *p, const char *name);

/* lint.c: fills p->lint (and logs each warning) */
void ts_lint(const ts_model *m, ts_prog *p);

/* memplan.c: offsets for buffers live over [start, end] (inclusive). */
typedef struct ts_interval {
    int64_t start, end;
    size_t bytes;
    size_t offset; /* out */
} ts_interval;
size_t ts_memplan(ts_interval *iv, int n);

/* optim.c */
ts_status ts_opt_state_init(ts_model *m);
void ts_opt_state_free(ts_model *m);
/* One step of one parameter: ts_opt_begin once, then ts_opt_update over
 * [0, n) in one call or in pieces (the executor interleaves summaries and
 * splits big parameters over its pool). */
typedef struct ts_opt_consts {
    bool first;                 /* the first step (SGD momentum starts from g) */
    float step_size, bc2_sqrt;  /* Adam's bias corrections */
} ts_opt_consts;
ts_opt_consts ts_opt_begin(const ts_optimizer *o, ts_opt_state *s);
void ts_opt_update(const ts_optimizer *o, const ts_opt_consts *c, ts_opt_state *s, float *param, const float *grad, int64_t begin,
                   int64_t end);

/* observe.c: the executor's one hook */
ts_status ts_observe(ts_model *m, int entry, int64_t sample);
/* The optimizer step of parameter `node` in step d of the run: runs
 * update(ctx, begin, end) over [0, n) and, around each chunk of it while the
 * chunk is in cache, summarises the watched entries the step reads (its
 * gradient, Accum___) and writes (UpdatedVar___, optimizer state) -- one walk
 * over the parameter instead of one per summary. */
typedef void (*ts_update_fn)(void *ctx, int64_t begin, int64_t end);
#define TS_STEP_WATCHES 5 /* Gradient___, Accum___, UpdatedVar___, two optimizer states */
#define TS_MAX_SLOTS 4    /* threads one summary is split over, at most */
void ts_observe_step(ts_model *m, int node, int64_t d, ts_update_fn update, void *ctx, int64_t n);
void ts_print_tensor(const char *title, const float *x, const ts_shape *s);

#endif
