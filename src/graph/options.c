/* options.c -- run options: iterations, accumulation, anchors, watches,
 * numeric checks. Setters validate at once; names are checked at compile. */
#include "graph/options.h"
#include "graph/graph.h"
#include "core/atomic_file.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

ts_options *ts_options_new(void) {
    ts_options *o = ts_calloc(1, sizeof *o);
    if (!o) return NULL;
    o->device_iterations = 1;
    o->grad_accum = 1;
    o->output_mode = TS_OUTPUT_DEFAULT;
    o->check = TS_CHECK_OFF;
    o->replicas = 1;
    o->replica_check = 100;
    o->stages = 1;
    o->precision = TS_F32;
    o->loss_scaling = -1;
    o->scale_init = 65536.0f, o->scale_growth = 2.0f, o->scale_backoff = 0.5f, o->scale_interval = 2000;
    return o;
}

void ts_options_clear(ts_options *o) {
    for (size_t i = 0; i < o->n_anchors; i++) {
        ts_free(o->anchors[i].short_name);
        ts_free(o->anchors[i].tensor_name);
    }
    for (size_t i = 0; i < o->n_watches; i++) ts_free(o->watches[i].pattern);
    for (size_t i = 0; i < o->n_stability; i++) ts_free(o->stability[i].pattern);
    ts_free(o->stability);
    for (int i = 0; o->split_at && i < o->stages - 1; i++) ts_free(o->split_at[i]);
    ts_free(o->split_at);
    ts_free(o->trace_path);
    ts_dump_spec_free(o->dump);
    ts_free(o->spike_npz);
    ts_free(o->anchors);
    ts_free(o->watches);
    memset(o, 0, sizeof *o);
}

void ts_options_free(ts_options *o) {
    if (!o) return;
    ts_options_clear(o);
    ts_free(o);
}

ts_status ts_options_set_device_iterations(ts_options *o, int d) {
    if (!o) return ts_error(TS_ERR_INVALID_ARGUMENT, "options is NULL");
    if (d < 1) return ts_error(TS_ERR_INVALID_ARGUMENT, "device iterations must be >= 1, got %d", d);
    o->device_iterations = d;
    return TS_OK;
}

ts_status ts_options_set_gradient_accumulation(ts_options *o, int a) {
    if (!o) return ts_error(TS_ERR_INVALID_ARGUMENT, "options is NULL");
    if (a < 1) return ts_error(TS_ERR_INVALID_ARGUMENT, "gradient accumulation count must be >= 1, got %d", a);
    o->grad_accum = a;
    return TS_OK;
}

ts_status ts_options_set_precision(ts_options *o, ts_dtype precision) {
    if (!o) return ts_error(TS_ERR_INVALID_ARGUMENT, "options is NULL");
    if (precision != TS_F32 && precision != TS_BF16 && precision != TS_F16)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "precision must be f32, bf16 or f16, not %s", ts_dtype_name(precision));
    o->precision = precision;
    o->precision_set = true;
    return TS_OK;
}

ts_status ts_options_set_loss_scaling(ts_options *o, int enabled, float init_scale, float growth, float backoff, int growth_interval) {
    if (!o) return ts_error(TS_ERR_INVALID_ARGUMENT, "options is NULL");
    if (enabled < -1 || enabled > 1) return ts_error(TS_ERR_INVALID_ARGUMENT, "loss scaling: enabled is 1 (on), 0 (off) or -1 (f16 only), not %d", enabled);
    if (!(init_scale >= 1.0f && init_scale <= 1e30f)) return ts_error(TS_ERR_INVALID_ARGUMENT, "loss scaling: the initial scale must be in [1, 1e30], got %g", (double)init_scale);
    if (!(growth > 1.0f && growth <= 1e3f)) return ts_error(TS_ERR_INVALID_ARGUMENT, "loss scaling: the growth factor must be in (1, 1000], got %g", (double)growth);
    if (!(backoff > 0.0f && backoff < 1.0f)) return ts_error(TS_ERR_INVALID_ARGUMENT, "loss scaling: the backoff factor must be in (0, 1), got %g", (double)backoff);
    if (growth_interval < 1) return ts_error(TS_ERR_INVALID_ARGUMENT, "loss scaling: the growth interval must be >= 1 step, got %d", growth_interval);
    o->loss_scaling = enabled;
    o->scale_init = init_scale, o->scale_growth = growth, o->scale_backoff = backoff, o->scale_interval = growth_interval;
    return TS_OK;
}

ts_status ts_options_set_threads(ts_options *o, int n) {
    if (!o) return ts_error(TS_ERR_INVALID_ARGUMENT, "options is NULL");
    if (n < 0 || n > 256) return ts_error(TS_ERR_INVALID_ARGUMENT, "threads must be 0 (all cores) .. 256, got %d", n);
    o->threads = n;
    return TS_OK;
}

ts_status ts_options_set_device(ts_options *o, const char *device) {
    if (!o) return ts_error(TS_ERR_INVALID_ARGUMENT, "options is NULL");
    if (!device) return ts_error(TS_ERR_INVALID_ARGUMENT, "device is NULL: write cpu, cuda or cuda:N");
    ts_device_kind kind;
    int ordinal;
    ts_status st = ts_device_name_parse(device, &kind, &ordinal); /* every accepted name fits o->device */
    if (st) return st;
    snprintf(o->device, sizeof o->device, "%s", device);
    return TS_OK;
}

ts_status ts_options_set_allow_tf32(ts_options *o, int allow) {
    if (!o) return ts_error(TS_ERR_INVALID_ARGUMENT, "options is NULL");
    if (allow != 0 && allow != 1) return ts_error(TS_ERR_INVALID_ARGUMENT, "allow_tf32 must be 0 or 1, got %d", allow);
    o->allow_tf32 = allow;
    return TS_OK;
}

ts_status ts_options_set_plan_only(ts_options *o, int on) {
    if (!o) return ts_error(TS_ERR_INVALID_ARGUMENT, "options is NULL");
    if (on != 0 && on != 1) return ts_error(TS_ERR_INVALID_ARGUMENT, "plan_only must be 0 or 1, got %d", on);
    o->plan_only = on;
    return TS_OK;
}

ts_status ts_options_set_log_layer_shapes(ts_options *o, int on) {
    if (!o) return ts_error(TS_ERR_INVALID_ARGUMENT, "options is NULL");
    if (on != 0 && on != 1) return ts_error(TS_ERR_INVALID_ARGUMENT, "log_layer_shapes must be 0 or 1, got %d", on);
    o->log_layer_shapes = on;
    return TS_OK;
}

ts_status ts_options_set_on_start(ts_options *o, ts_start_fn fn, void *user) {
    if (!o) return ts_error(TS_ERR_INVALID_ARGUMENT, "options is NULL");
    o->on_start = fn;
    o->on_start_user = fn ? user : NULL;
    return TS_OK;
}

ts_status ts_options_set_replication(ts_options *o, int replicas, int check_every) {
    if (!o) return ts_error(TS_ERR_INVALID_ARGUMENT, "options is NULL");
    if (replicas < 1 || replicas > 4096) return ts_error(TS_ERR_INVALID_ARGUMENT, "replicas must be 1 (off) .. 4096, got %d", replicas);
    if (check_every < 0) return ts_error(TS_ERR_INVALID_ARGUMENT, "replica weight check period must be >= 0 steps (0 = never), got %d", check_every);
    o->replicas = replicas;
    o->replica_check = check_every;
    return TS_OK;
}

static ts_status set_split(ts_options *o, int stages, const char *const *split_at) {
    char **v = stages > 1 ? ts_calloc((size_t)stages - 1, sizeof *v) : NULL;
    if (stages > 1 && !v) return TS_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < stages - 1; i++)
        if (!(v[i] = ts_strdup(split_at[i]))) {
            for (int k = 0; k < i; k++) ts_free(v[k]);
            ts_free(v);
            return TS_ERR_OUT_OF_MEMORY;
        }
    for (int i = 0; o->split_at && i < o->stages - 1; i++) ts_free(o->split_at[i]);
    ts_free(o->split_at);
    o->split_at = v;
    o->stages = stages;
    return TS_OK;
}

ts_status ts_options_set_pipeline_schedule(ts_options *o, ts_pipeline_schedule schedule) {
    if (!o) return ts_error(TS_ERR_INVALID_ARGUMENT, "options is NULL");
    if (schedule != TS_PIPELINE_GPIPE && schedule != TS_PIPELINE_1F1B)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "pipeline schedule %d is not TS_PIPELINE_GPIPE or TS_PIPELINE_1F1B", (int)schedule);
    o->schedule = schedule;
    return TS_OK;
}

ts_status ts_options_set_pipeline(ts_options *o, int stages, const char *const *split_at, int n_split) {
    if (!o) return ts_error(TS_ERR_INVALID_ARGUMENT, "options is NULL");
    if (stages < 1 || stages > 1024) return ts_error(TS_ERR_INVALID_ARGUMENT, "pipeline stages must be 1 (off) .. 1024, got %d", stages);
    if (n_split != stages - 1 || (n_split > 0 && !split_at))
        return ts_error(TS_ERR_INVALID_ARGUMENT, "a pipeline of %d stages is split at %d scopes, got %d", stages, stages - 1, n_split);
    for (int i = 0; i < n_split; i++)
        if (!split_at[i] || !*split_at[i]) return ts_error(TS_ERR_INVALID_ARGUMENT, "pipeline split %d: empty scope name", i);
    return set_split(o, stages, split_at);
}

ts_status ts_options_set_trace(ts_options *o, const char *path, int64_t first_step, int64_t last_step) {
    if (!o) return ts_error(TS_ERR_INVALID_ARGUMENT, "options is NULL");
    if (!path) {
        ts_free(o->trace_path);
        o->trace_path = NULL;
        return TS_OK;
    }
    if (!*path) return ts_error(TS_ERR_INVALID_ARGUMENT, "trace: empty file name; name a FILE.json to write");
    if (first_step < 1) return ts_error(TS_ERR_INVALID_ARGUMENT, "trace: steps count from 1, got first step %lld", (long long)first_step);
    if (last_step != 0 && last_step < first_step)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "trace: last step %lld comes before first step %lld; give FIRST:LAST with FIRST <= LAST",
                        (long long)last_step, (long long)first_step);
    ts_atomic_file af; /* can it be written? said now, not after training */
    ts_status st = ts_atomic_open(&af, path);
    if (st) return ts_error_wrap(st, "trace: %s cannot be written; choose a writable FILE.json", path);
    ts_atomic_abort(&af);
    char *p = ts_strdup(path);
    if (!p) return TS_ERR_OUT_OF_MEMORY;
    ts_free(o->trace_path);
    o->trace_path = p;
    o->trace_first = first_step;
    o->trace_last = last_step;
    return TS_OK;
}

ts_status ts_options_set_check_numerics(ts_options *o, ts_check_numerics c) {
    if (!o) return ts_error(TS_ERR_INVALID_ARGUMENT, "options is NULL");
    if (c < TS_CHECK_OFF || c > TS_CHECK_OP) return ts_error(TS_ERR_INVALID_ARGUMENT, "check_numerics must be off, output or op");
    o->check = c;
    return TS_OK;
}

static ts_status check_mode(ts_output_mode m, int period, bool allow_default) {
    if (m < TS_OUTPUT_DEFAULT || m > TS_OUTPUT_SUM || (m == TS_OUTPUT_DEFAULT && !allow_default))
        return ts_error(TS_ERR_INVALID_ARGUMENT, "unknown output mode %d (use final, every_n, all or sum)", (int)m);
    if (m == TS_OUTPUT_EVERY_N && period < 1)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "output mode every_n needs a period >= 1, got %d", period);
    if (m != TS_OUTPUT_EVERY_N && period != 0 && period != 1)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "a period (%d) only applies to output mode every_n", period);
    return TS_OK;
}

ts_status ts_options_set_output_mode(ts_options *o, ts_output_mode m, int period) {
    if (!o) return ts_error(TS_ERR_INVALID_ARGUMENT, "options is NULL");
    ts_status st = check_mode(m, period, true);
    if (st) return st;
    o->output_mode = m;
    o->output_period = period;
    return TS_OK;
}

ts_status ts_anchor_spec_add(ts_anchor_spec **v, size_t *n, size_t *cap, const char *short_name,
                             const char *tensor_name, ts_output_mode mode, int period) {
    if (!tensor_name || !*tensor_name) return ts_error(TS_ERR_INVALID_ARGUMENT, "an anchor needs a tensor name");
    bool glob = strpbrk(tensor_name, "*?[") != NULL;
    if (!short_name || !*short_name) short_name = tensor_name;
    if (glob && strcmp(short_name, tensor_name) != 0)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "anchor pattern '%s': a glob anchors each match under its own name, so give no short name", tensor_name);
    ts_status st = check_mode(mode, period, true);
    if (st) return st;
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*v)[i].short_name, short_name) == 0)
            return ts_error(TS_ERR_INVALID_ARGUMENT, "duplicate anchor short name '%s' (already anchoring '%s')", short_name, (*v)[i].tensor_name);
    if (ts_grow((void **)v, cap, *n + 1, sizeof **v)) return TS_ERR_OUT_OF_MEMORY;
    ts_anchor_spec *a = &(*v)[*n];
    a->short_name = ts_strdup(short_name);
    a->tensor_name = ts_strdup(tensor_name);
    if (!a->short_name || !a->tensor_name) {
        ts_free(a->short_name);
        ts_free(a->tensor_name);
        return TS_ERR_OUT_OF_MEMORY;
    }
    a->mode = mode;
    a->period = mode == TS_OUTPUT_EVERY_N ? period : 0;
    (*n)++;
    return TS_OK;
}

ts_status ts_options_anchor(ts_options *o, const char *short_name, const char *tensor_name, ts_output_mode mode, int period) {
    if (!o) return ts_error(TS_ERR_INVALID_ARGUMENT, "options is NULL");
    return ts_anchor_spec_add(&o->anchors, &o->n_anchors, &o->cap_anchors, short_name, tensor_name, mode, period);
}

ts_status ts_options_watch(ts_options *o, const char *pattern, int what, int period) {
    if (!o || !pattern || !*pattern) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_options_watch needs options and a pattern");
    if (what <= 0 || (what & ~(TS_WATCH_STATS | TS_WATCH_HISTOGRAM | TS_WATCH_RANGE)))
        return ts_error(TS_ERR_INVALID_ARGUMENT, "watch '%s': what must combine TS_WATCH_STATS, TS_WATCH_HISTOGRAM and TS_WATCH_RANGE", pattern);
    if (period < 1) return ts_error(TS_ERR_INVALID_ARGUMENT, "watch '%s': period must be >= 1 run, got %d", pattern, period);
    if (ts_grow((void **)&o->watches, &o->cap_watches, o->n_watches + 1, sizeof *o->watches)) return TS_ERR_OUT_OF_MEMORY;
    char *p = ts_strdup(pattern);
    if (!p) return TS_ERR_OUT_OF_MEMORY;
    o->watches[o->n_watches++] = (ts_watch_spec){p, what, period};
    return TS_OK;
}

ts_status ts_options_watch_stability(ts_options *o, const char *layers, int period) {
    if (!o || !layers || !*layers)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_options_watch_stability needs options and a layer pattern (\"*\": every layer)");
    if (period < 1) return ts_error(TS_ERR_INVALID_ARGUMENT, "stability watch '%s': period must be >= 1 run, got %d", layers, period);
    if (ts_grow((void **)&o->stability, &o->cap_stability, o->n_stability + 1, sizeof *o->stability)) return TS_ERR_OUT_OF_MEMORY;
    char *p = ts_strdup(layers);
    if (!p) return TS_ERR_OUT_OF_MEMORY;
    o->stability[o->n_stability++] = (ts_watch_spec){p, 0, period};
    return TS_OK;
}

ts_status ts_options_outfeed_gradients(ts_options *o, ts_outfeed *q, int pre_accumulated) {
    if (!o || !q) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_options_outfeed_gradients needs options and a queue");
    o->grad_q = q;
    o->grad_pre_accumulated = pre_accumulated ? 1 : 0;
    return TS_OK;
}

ts_status ts_options_copy(ts_options *dst, const ts_options *src) {
    ts_options o = *src;
    o.anchors = NULL, o.n_anchors = 0, o.cap_anchors = 0;
    o.watches = NULL, o.n_watches = 0, o.cap_watches = 0;
    o.stability = NULL, o.n_stability = 0, o.cap_stability = 0;
    o.split_at = NULL, o.stages = 1;
    o.trace_path = NULL;
    o.dump = NULL;
    o.spike_npz = NULL;
    if (set_split(&o, src->stages, (const char *const *)src->split_at)) return TS_ERR_OUT_OF_MEMORY;
    if ((src->trace_path && !(o.trace_path = ts_strdup(src->trace_path))) || ts_dump_spec_copy(&o.dump, src->dump) ||
        (src->spike_npz && !(o.spike_npz = ts_strdup(src->spike_npz)))) {
        ts_options_clear(&o);
        return TS_ERR_OUT_OF_MEMORY;
    }
    for (size_t i = 0; i < src->n_anchors; i++) {
        const ts_anchor_spec *a = &src->anchors[i];
        if (ts_anchor_spec_add(&o.anchors, &o.n_anchors, &o.cap_anchors, a->short_name, a->tensor_name, a->mode, a->period)) {
            ts_options_clear(&o);
            return TS_ERR_OUT_OF_MEMORY;
        }
    }
    for (size_t i = 0; i < src->n_watches; i++)
        if (ts_options_watch(&o, src->watches[i].pattern, src->watches[i].what, src->watches[i].period)) {
            ts_options_clear(&o);
            return TS_ERR_OUT_OF_MEMORY;
        }
    for (size_t i = 0; i < src->n_stability; i++)
        if (ts_options_watch_stability(&o, src->stability[i].pattern, src->stability[i].period)) {
            ts_options_clear(&o);
            return TS_ERR_OUT_OF_MEMORY;
        }
    *dst = o;
    return TS_OK;
}

static const char *mode_names[] = {"default", "final", "every_n", "all", "sum"};

const char *ts_output_mode_name(ts_output_mode m) {
    return m >= TS_OUTPUT_DEFAULT && m <= TS_OUTPUT_SUM ? mode_names[m] : "unknown";
}

ts_status ts_output_mode_parse(const char *s, ts_output_mode *out) {
    if (!out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_output_mode_parse: out is NULL");
    for (int i = 0; s && i < (int)TS_ARRAY_LEN(mode_names); i++)
        if (strcasecmp(s, mode_names[i]) == 0 || (i == TS_OUTPUT_EVERY_N && strcasecmp(s, "everyn") == 0)) {
            *out = (ts_output_mode)i;
            return TS_OK;
        }
    return ts_error(TS_ERR_INVALID_ARGUMENT, "unknown output mode '%s' (use final, every_n, all, sum or default)", s ? s : "");
}

ts_status ts_check_numerics_parse(const char *s, ts_check_numerics *out) {
    if (!out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_check_numerics_parse: out is NULL");
    static const char *names[] = {"off", "output", "op"};
    for (int i = 0; s && i < (int)TS_ARRAY_LEN(names); i++)
        if (strcasecmp(s, names[i]) == 0) {
            *out = (ts_check_numerics)i;
            return TS_OK;
        }
    if (s && strcmp(s, "0") == 0) {
        *out = TS_CHECK_OFF;
        return TS_OK;
    }
    return ts_error(TS_ERR_INVALID_ARGUMENT, "check_numerics must be off, output or op, got '%s'", s ? s : "");
}

ts_status ts_dump_spec_copy(ts_dump_spec **dst, const ts_dump_spec *src) {
    *dst = NULL;
    if (!src) return TS_OK;
    ts_dump_spec *s = ts_calloc(1, sizeof *s);
    if (!s) return TS_ERR_OUT_OF_MEMORY;
    *s = *src;
    s->dir = ts_strdup(src->dir);
    s->ops = src->ops ? ts_strdup(src->ops) : NULL;
    if (!s->dir || (src->ops && !s->ops)) {
        ts_dump_spec_free(s);
        return TS_ERR_OUT_OF_MEMORY;
    }
    *dst = s;
    return TS_OK;
}

void ts_dump_spec_free(ts_dump_spec *s) {
    if (!s) return;
    ts_free(s->dir);
    ts_free(s->ops);
    ts_free(s);
}
