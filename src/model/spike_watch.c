/* spike_watch.c -- the spike detector on a training model
 * (ts_options_detect_spikes): an observer on the op chain whose hook runs
 * before each optimizer step. It feeds the detector (spikes.c) the loss and
 * every watch result made since its last check, each a series by signal
 * and tensor, in the step's order; at a spike it logs the first mover and
 * does what the options ask: train on, skip the update, or stop the run
 * before it (holding the step, written to an .npz when asked). The rows it
 * reads are the watch results, whatever watch made them: a new kind of
 * watch feeds it with no change here (docs/observation.md#spikes). */
#include "model/model.h"
#include "diag/spikes.h"
#include "graph/ops.h"
#include "observe/observe.h"

#include "backend/backend.h"
#include "diag/metrics.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* What a model's detector keeps between runs. */
typedef struct ts_spike_watch {
    ts_spikes *det;
    ts_strmap ids;      /* "signal\ttensor" -> series id */
    char **keys;        /* the map's keys, owned */
    size_t n_keys, cap_keys;
    int64_t *seen_run;  /* per watch result: the (run, step) consumed last */
    int64_t *seen_step;
    int n_seen;
    int *pos;           /* per node: its place in the forward order */
    int n_pos;
    int *row_entry;     /* per watch result: the entry it summarises, -1: none */
    int64_t count;
    int64_t checks;     /* checks that judged something: the detector's steps (a stopped step checked again is a new one) */
    int pushed;         /* signals pushed at this check */
    ts_spike last;
    char signal[16], tensor[512], layer[512];
} ts_spike_watch;

static const char *const action_names[] = {"continue", "skip", "stop", "npz", "inspect"};

const char *ts_spike_action_name(ts_spike_action a) {
    return a >= TS_SPIKE_CONTINUE && a <= TS_SPIKE_INSPECT ? action_names[a] : "unknown";
}

ts_status ts_spike_action_parse(const char *s, ts_spike_action *out) {
    if (!out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_spike_action_parse: out is NULL");
    for (int i = 0; s && i < (int)TS_ARRAY_LEN(action_names); i++)
        if (strcasecmp(s, action_names[i]) == 0) {
            *out = (ts_spike_action)i;
            return TS_OK;
        }
    return ts_error(TS_ERR_INVALID_ARGUMENT, "unknown spike action '%s' (use continue, skip, stop, npz or inspect)", s ? s : "");
}

ts_status ts_options_detect_spikes(ts_options *o, double k, int window, ts_spike_action action, const char *npz_path) {
    if (!o) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_options_detect_spikes: options are NULL");
    if (!(k >= 0) || !isfinite(k))
        return ts_error(TS_ERR_INVALID_ARGUMENT, "detect_spikes: k is the threshold in robust z-score units, > 0 (0: off), got %g", k);
    if (k > 0 && window < 2) return ts_error(TS_ERR_INVALID_ARGUMENT, "detect_spikes: the window is the steps a median is taken over, >= 2, got %d", window);
    if (action < TS_SPIKE_CONTINUE || action > TS_SPIKE_INSPECT)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "detect_spikes: unknown action %d (TS_SPIKE_CONTINUE, _SKIP, _STOP, _NPZ or _INSPECT)", (int)action);
    if (action == TS_SPIKE_NPZ && (!npz_path || !*npz_path))
        return ts_error(TS_ERR_INVALID_ARGUMENT, "detect_spikes: the npz action writes the held tensors to a file: give its path");
    if (action != TS_SPIKE_NPZ && npz_path)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "detect_spikes: a file ('%s') is for the npz action only, not %s", npz_path, action_names[action]);
    char *path = NULL;
    if (npz_path && !(path = ts_strdup(npz_path))) return TS_ERR_OUT_OF_MEMORY;
    if (k > 0) {
        ts_status st = ts_options_watch(o, "*", TS_WATCH_STATS, 1);
        if (st) {
            ts_free(path);
            return st;
        }
    }
    ts_free(o->spike_npz);
    o->spike_k = k, o->spike_window = window, o->spike_action = action, o->spike_npz = path;
    return TS_OK;
}

void ts_spike_watch_free(ts_model *m) {
    ts_spike_watch *w = m ? m->spikes : NULL;
    if (!w) return;
    ts_spikes_free(w->det);
    ts_strmap_free(&w->ids);
    for (size_t i = 0; i < w->n_keys; i++) ts_free(w->keys[i]);
    ts_free(w->keys);
    ts_free(w->seen_run);
    ts_free(w->seen_step);
    ts_free(w->pos);
    ts_free(w->row_entry);
    ts_free(w);
    m->spikes = NULL;
}

int64_t ts_model_spike(const ts_model *m, ts_spike *last) {
    const ts_spike_watch *w = m ? m->spikes : NULL;
    if (last) *last = w && w->count ? w->last : (ts_spike){0};
    return w ? w->count : 0;
}

/* The series of `signal` of tensor `name`: its id, made at first sight. */
static ts_status series_id(ts_spike_watch *w, const char *signal, const char *name, int *id) {
    char key[600];
    snprintf(key, sizeof key, "%s\t%s", signal, name);
    if ((*id = ts_strmap_get(&w->ids, key)) >= 0) return TS_OK;
    char *k = ts_strdup(key);
    if (!k || ts_grow((void **)&w->keys, &w->cap_keys, w->n_keys + 1, sizeof *w->keys)) {
        ts_free(k);
        return ts_error(TS_ERR_OUT_OF_MEMORY, "spike detector: no memory");
    }
    w->keys[w->n_keys] = k;
    *id = (int)w->n_keys;
    if (ts_strmap_put(&w->ids, k, *id)) return ts_error(TS_ERR_OUT_OF_MEMORY, "spike detector: no memory");
    w->n_keys++;
    return TS_OK;
}

/* The series' tensor and signal back from its id. */
static void series_names(const ts_spike_watch *w, int id, char *signal, size_t ns, char *tensor, size_t nt) {
    const char *k = w->keys[id], *tab = strchr(k, '\t');
    snprintf(signal, ns, "%.*s", (int)(tab - k), k);
    snprintf(tensor, nt, "%s", tab + 1);
}

/* Where entry e's row stands in the step: the previous update's results
 * first, then the forward's values in graph order (the loss among them),
 * then the gradients in the order the backward makes them. */
static int step_order(const ts_spike_watch *w, const ts_prog *p, const ts_entry *e) {
    int at = e->node < w->n_pos ? w->pos[e->node] : 0, n = p->n_order;
    switch (e->kind) {
    case TS_KIND_VALUE: return at;
    case TS_KIND_GRAD: return n + (n - 1 - at);
    default: return at - n; /* made by the update after the last check */
    }
}

/* Tensor t's layer: the scope of an op's output, the module of a
 * parameter or buffer, else (an input, a top-level op) its name. */
static void layer_of(const ts_tensor *t, char *buf, size_t n) {
    const char *name = t->name;
    const char *cut = strrchr(name, '/');
    if (!cut && (t->op == TS_OP_PARAM || t->op == TS_OP_BUFFER)) cut = strrchr(name, '.');
    snprintf(buf, n, "%.*s", cut ? (int)(cut - name) : (int)strlen(name), name);
}

static ts_status push(ts_spike_watch *w, const ts_model *m, const char *signal, const char *name, int order, double v) {
    int id;
    ts_status st = series_id(w, signal, name, &id);
    (void)m;
    w->pushed += !st;
    return st ? st : ts_spikes_push(w->det, w->checks, id, order, v, NULL);
}

/* Every watch result made since the last check: the loss's own row (its
 * value where it was made: its buffer is reused by the backward) among
 * them. A row is read by its tensor's kind; a row of no tensor the program
 * knows (a signal a watch computes of its own) comes last in the step's
 * order, a single value (count 1) its own signal. */
static ts_status feed(ts_spike_watch *w, ts_model *m) {
    ts_prog *p = m->run.prog;
    ts_status st = TS_OK;
    for (int r = 0; r < p->n_watch && !st; r++) {
        const ts_watch_result *res = &p->watch_results[r];
        if (res->run < 0 || (res->run == w->seen_run[r] && res->step == w->seen_step[r])) continue;
        w->seen_run[r] = res->run, w->seen_step[r] = res->step;
        if (!(res->summary->what & TS_WATCH_STATS)) continue;
        const ts_stats *s = &res->summary->stats;
        bool bad = s->nans || s->pos_infs || s->neg_infs;
        int e = w->row_entry[r] >= 0 ? w->row_entry[r] : ts_prog_find(p, res->name);
        const ts_entry *en = e >= 0 ? &p->entries[e] : NULL;
        int order = en ? step_order(w, p, en) : 3 * p->n_order;
        if (en && en->kind == TS_KIND_VALUE && en->node == m->run.loss) {
            st = push(w, m, "loss", res->name, order, bad ? NAN : s->mean);
        } else if (!en && s->count == 1) {
            st = push(w, m, "value", res->name, order, bad ? NAN : s->mean);
        } else if (en && (en->kind == TS_KIND_GRAD || en->kind == TS_KIND_ACCUM)) {
            st = push(w, m, "norm", res->name, order, bad ? NAN : s->l2);
        } else {
            double rms = s->count ? s->l2 / sqrt((double)s->count) : 0, amax = s->count ? fmax(fabs(s->min), fabs(s->max)) : 0;
            st = push(w, m, "rms", res->name, order, bad ? NAN : rms);
            if (!st) st = push(w, m, "max_abs", res->name, order, bad ? NAN : amax);
        }
    }
    return st;
}

static ts_status before_update(void *ctx, ts_run *run, ts_op_call *c) {
    ts_spike_watch *w = ctx;
    ts_model *m = ts_model_of(run);
    if (c->node != TS_CALL_OPTIMIZER) return TS_OK;
    ts_status st = ts_observe_device_now(&m->run); /* a device's summaries of the step on the host */
    w->pushed = 0;
    if (!st) st = feed(w, m);
    if (st) return st;
    if (!w->pushed) return TS_OK; /* no watch was due at this step (device iterations): nothing to judge */
    w->checks++;
    ts_spike_hit h;
    if (!ts_spikes_first(w->det, &h)) return TS_OK;
    int crossed = ts_spikes_crossed(w->det);
    series_names(w, h.series, w->signal, sizeof w->signal, w->tensor, sizeof w->tensor);
    const ts_prog *p = m->run.prog;
    int e = ts_prog_find(p, w->tensor);
    const char *cut = strrchr(w->tensor, '/');
    if (e >= 0) layer_of(m->run.g->t[p->entries[e].node], w->layer, sizeof w->layer);
    else snprintf(w->layer, sizeof w->layer, "%.*s", cut ? (int)(cut - w->tensor) : (int)strlen(w->tensor), w->tensor); /* a row of no tensor */
    ts_spike_action act = m->run.opts.spike_action;
    w->count++;
    w->last = (ts_spike){m->run.steps + 1, w->signal, w->tensor, w->layer, h.value, h.median, h.mad, h.z, crossed, act};
    static const char *const done[] = {"training goes on", "the step's update is skipped", "training stops before the step's update",
                                       "training stops before the step's update; the step's tensors go to ", "training stops before the "
                                       "step's update, its tensors held"};
    char line[2048];
    snprintf(line, sizeof line, "spike at step %lld: %s of '%s' (layer %s) is %.4g, z %.3g (median %.4g, MAD %.3g over its last %d "
             "values); the first of %d signals to cross |z| >= %g, in the step's order; %s%s", (long long)w->last.step, w->signal, w->tensor,
             w->layer, h.value, h.z, h.median, h.mad, ts_spikes_history(w->det, h.series), crossed, m->run.opts.spike_k, done[act],
             act == TS_SPIKE_NPZ ? m->run.opts.spike_npz : "");
    ts_counter_add("Spikes", 1);
    if (act == TS_SPIKE_CONTINUE || act == TS_SPIKE_SKIP) {
        ts_log_message(TS_LOG_WARN, line);
        m->run.skip_update = act == TS_SPIKE_SKIP;
        return TS_OK;
    }
    return ts_error(TS_ERR_SPIKE, "%s", line);
}

/* Before a run: the hold armed for the actions that keep the step. */
ts_status ts_spike_watch_before_run(ts_model *m) {
    if (!(m->run.opts.spike_k > 0) || !m->run.training) return TS_OK;
    bool hold = m->run.opts.spike_action == TS_SPIKE_NPZ || m->run.opts.spike_action == TS_SPIKE_INSPECT;
    if (!hold || ts_hold_armed(&m->run)) return TS_OK;
    return ts_hold_arm(&m->run, 1);
}

/* After a run the detector stopped: the held tensors to the .npz. */
ts_status ts_spike_watch_after_stop(ts_model *m) {
    if (m->run.opts.spike_action != TS_SPIKE_NPZ) return TS_ERR_SPIKE;
    char why[2048];
    snprintf(why, sizeof why, "%s", ts_last_error());
    const char *const *names;
    size_t n;
    ts_status st = ts_hold_names(&m->run, &names, &n);
    ts_array *arrays = st ? NULL : ts_calloc(n ? n : 1, sizeof *arrays);
    if (!st && !arrays) st = ts_error(TS_ERR_OUT_OF_MEMORY, "spike detector: no memory for the list of %zu held tensors", n);
    for (size_t i = 0; i < n && !st; i++) st = ts_hold_read(&m->run, names[i], &arrays[i]);
    if (!st) st = ts_npz_save(m->run.opts.spike_npz, names, arrays, n);
    ts_free(arrays);
    if (st) return ts_error(st, "%s; but the held tensors could not be written to '%s': %s", why, m->run.opts.spike_npz, ts_last_error());
    return ts_error(TS_ERR_SPIKE, "%s (%zu tensors)", why, n);
}

ts_status ts_spike_watch_attach(ts_run *run, ts_op_chain *c) {
    ts_model *m = ts_model_of(run);
    m->run.skip_update = false;
    if (!(m->run.opts.spike_k > 0) || !m->run.training) return TS_OK;
    if (ts_replicas(&m->run) > 1 || m->run.prog->stage)
        return ts_error(TS_ERR_UNSUPPORTED, "detect_spikes: the spike detector runs in one process; this model has %s (turn one off)",
                        m->run.prog->stage ? "pipeline stages" : "replicas");
    if (!m->spikes && !(m->spikes = ts_calloc(1, sizeof *m->spikes))) return ts_error(TS_ERR_OUT_OF_MEMORY, "spike detector: no memory");
    ts_spike_watch *w = m->spikes;
    int window = m->run.opts.spike_window;
    if (!w->det && !(w->det = ts_spikes_new(m->run.opts.spike_k, window, window < 16 ? window : 16)))
        return ts_error(TS_ERR_OUT_OF_MEMORY, "spike detector: no memory");
    ts_prog *p = m->run.prog;
    if (w->n_seen != p->n_watch) { /* a new program: its watch results start afresh */
        ts_free(w->seen_run), ts_free(w->seen_step);
        w->seen_run = ts_malloc((size_t)(p->n_watch ? p->n_watch : 1) * sizeof *w->seen_run);
        w->seen_step = ts_malloc((size_t)(p->n_watch ? p->n_watch : 1) * sizeof *w->seen_step);
        if (!w->seen_run || !w->seen_step) return ts_error(TS_ERR_OUT_OF_MEMORY, "spike detector: no memory");
        for (int r = 0; r < p->n_watch; r++) w->seen_run[r] = w->seen_step[r] = -1;
        w->n_seen = p->n_watch;
    }
    if (w->n_pos != p->n_nodes) {
        ts_free(w->pos);
        if (!(w->pos = ts_calloc((size_t)(p->n_nodes ? p->n_nodes : 1), sizeof *w->pos))) return ts_error(TS_ERR_OUT_OF_MEMORY, "spike detector: no memory");
        w->n_pos = p->n_nodes;
    }
    for (int k = 0; k < p->n_order; k++) w->pos[p->order[k]] = k;
    ts_free(w->row_entry);
    if (!(w->row_entry = ts_malloc((size_t)(p->n_watch ? p->n_watch : 1) * sizeof *w->row_entry)))
        return ts_error(TS_ERR_OUT_OF_MEMORY, "spike detector: no memory");
    for (int r = 0; r < p->n_watch; r++) w->row_entry[r] = -1;
    for (int e = 0; e < p->n_entries; e++)
        if (p->entries[e].watch >= 0 && p->entries[e].watch < p->n_watch) w->row_entry[p->entries[e].watch] = e;
    return ts_op_chain_add(c, before_update, NULL, w);
}
