/* options.h -- the run options a model is made with (ts_options of the
 * public API): iterations, accumulation, device, anchors and watches as the
 * user asked for them, numeric checks, replicas and pipeline stages. The
 * setters (graph/options.c) validate at once; names are resolved at
 * compile. */
#ifndef TS_OPTIONS_H
#define TS_OPTIONS_H

#include "tensorscope.h"

#include <stdbool.h>
#include <stddef.h>

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

/* What ts_options_set_dump_debug asked for (its dump is model/dump_debug.c's). */
typedef struct ts_dump_spec {
    char *dir;
    char *ops;            /* a glob over tensor names or op types; NULL: every one */
    int64_t first, last;  /* runs, 1-based, inclusive; last 0: to the end */
    bool grads;           /* the gradients too */
    int64_t limit;        /* bytes; 0: no limit */
} ts_dump_spec;

ts_status ts_dump_spec_copy(ts_dump_spec **dst, const ts_dump_spec *src);
void ts_dump_spec_free(ts_dump_spec *s);

struct ts_options {
    char device[16];     /* "cpu", "cuda", "cuda:N"; "" = TS_DEVICE or cpu */
    bool allow_tf32;     /* float32 products in TF32 on a GPU (ts_options_set_allow_tf32) */
    bool plan_only;      /* compile without allocating the plan's buffers (ts_options_set_plan_only) */
    bool log_layer_shapes; /* each run's layer output shapes in the log (ts_options_set_log_layer_shapes) */
    ts_start_fn on_start;  /* ts_options_set_on_start: once, before the first run's first step */
    void *on_start_user;
    int device_iterations, grad_accum, threads;
    ts_output_mode output_mode;
    int output_period;
    ts_check_numerics check;
    ts_anchor_spec *anchors;
    size_t n_anchors, cap_anchors;
    ts_watch_spec *watches;
    size_t n_watches, cap_watches;
    ts_watch_spec *stability;    /* ts_options_watch_stability: layer globs (what unused) */
    size_t n_stability, cap_stability;
    ts_outfeed *grad_q;
    int grad_pre_accumulated;
    int replicas, replica_check; /* R (1 = off) and steps between weight checks */
    int stages;                  /* pipeline stages K (1 = off) */
    ts_pipeline_schedule schedule;
    char **split_at;             /* K - 1 scope names */
    char *trace_path;            /* ts_options_set_trace: NULL = off */
    int64_t trace_first, trace_last; /* steps, 1-based, inclusive; last 0 = to the end */
    ts_dtype precision;          /* TS_F32, TS_BF16, TS_F16 */
    bool precision_set;          /* set by the user (else TS_USE_BF16 may decide) */
    int loss_scaling;            /* 1 on, 0 off, -1 for f16 only */
    float scale_init, scale_growth, scale_backoff;
    int scale_interval;
    ts_dump_spec *dump;   /* ts_options_set_dump_debug: NULL = off (model/dump_debug.c) */
    double spike_k;       /* ts_options_detect_spikes: 0 = off (model/spike_watch.c) */
    int spike_window;
    ts_spike_action spike_action;
    char *spike_npz;      /* TS_SPIKE_NPZ's file */
};

ts_status ts_options_copy(ts_options *dst, const ts_options *src);
void ts_options_clear(ts_options *o);
ts_status ts_anchor_spec_add(ts_anchor_spec **v, size_t *n, size_t *cap, const char *short_name,
                             const char *tensor_name, ts_output_mode mode, int period);

#endif
