/* compile.c -- from graph + options to a program: shape inference, the live
 * set and topological order, which tensors get gradients, the named entries,
 * the memory plan by lifetime class, and anchors/watches resolved to entries. */
#include "compile/program.h"
#include "compile/stability.h"

#include "backend/backend.h"
#include "graph/ops.h"
#include "core/stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *kind_prefix[] = {"", "Gradient___", "Accum___", "UpdatedVar___", "Accl___", "Accl1___", "Accl2___", "Step___"};

void ts_prog_free(ts_prog *p) {
    if (!p) return;
    for (int i = 0; i < p->n_entries; i++) {
        ts_free(p->entries[i].name);
        ts_free(p->entries[i].anchors);
        ts_free(p->entries[i].outfeeds);
    }
    for (int i = 0; i < p->n_anchors; i++) {
        ts_free(p->anchors[i].short_name);
        ts_free(p->anchors[i].typed);
    }
    for (int i = 0; p->zero_before && i < p->n_nodes; i++) ts_free(p->zero_before[i]);
    for (int i = 0; p->scratch && i < p->n_nodes; i++) p->backend->free(p->scratch[i]);
    for (int i = 0; p->cache && i < p->n_nodes; i++) p->backend->free(p->cache[i]);
    ts_free(p->cache);
    for (int i = 0; i < p->n_lint; i++) ts_free(p->lint[i]);
    ts_free(p->lint);
    ts_free(p->scratch);
    for (int i = 0; p->cells_node && i < p->n_nodes; i++) ts_free(p->cells_node[i]);
    ts_free(p->cells_node);
    ts_free(p->plan);
    ts_free(p->plan_entry);
    p->backend->free(p->workspace);
    p->backend->free(p->widen);
    ts_free(p->stage16);
    ts_free(p->zero_before);
    ts_free(p->n_zero_before);
    ts_free(p->entries);
    ts_strmap_free(&p->entry_index);
    ts_free(p->sorted_names);
    ts_free(p->anchors);
    ts_free(p->anchor_names);
    for (int i = 0; i < p->n_keys; i++) ts_free(p->keys[i]);
    ts_free(p->keys);
    ts_free(p->watch_results);
    ts_free(p->summaries);
    ts_free(p->rep_gathered);
    ts_free(p->rep_summaries);
    ts_free(p->rep_results);
    ts_free(p->rep_sums);
    ts_free(p->rep_nodes);
    ts_free(p->stage);
    ts_free(p->bnd_in);
    ts_free(p->bnd_out);
    ts_free(p->inbox);
    ts_free(p->outbox);
    ts_free(p->slots);
    ts_free(p->param_sync);
    ts_free(p->fwd);
    ts_free(p->fwd_at);
    ts_free(p->fwd_got);
    ts_free(p->watch_what);
    ts_free(p->watch_period);
    ts_free(p->parts);
    ts_free(p->defer_ring);
    ts_free(p->defer_parts);
    ts_stab_free(p->stab);
    for (int i = 0; i < TS_RECORDINGS; i++) /* before the memory the recordings name, page-locked host memory too */
        if (p->recs[i].rec) p->backend->recording_free(p->recs[i].rec);
    for (int i = 0; p->host_inputs && i < p->n_nodes; i++) /* page-locked by the device path (exec/device.c): unlocked first */
        if (p->host_inputs[i]) p->backend->host_unpin(p->host_inputs[i]), ts_free(p->host_inputs[i]);
    ts_free(p->host_inputs);
    for (int i = 0; i < p->n_pinned; i++) p->backend->host_unpin(p->pinned[i]);
    ts_free(p->pinned);
    p->backend->free(p->arena_activations);
    p->backend->free(p->arena_grads);
    for (int i = 0; i < p->n_dev_copies; i++) p->backend->free(p->dev_copies[i].dev);
    ts_free(p->dev_copies);
    ts_free(p->dev_state);
    for (int i = 0; p->dev_inputs && i < p->n_nodes; i++) p->backend->free(p->dev_inputs[i]);
    ts_free(p->dev_inputs);
    ts_free(p->dev_input_bytes);
    ts_free(p->host_view);
    p->backend->free(p->dev_slots);
    p->backend->free(p->dev_hist);
    for (int k = 0; k < 2; k++) {
        ts_slot_set *s = k ? &p->done_slots : &p->run_slots;
        ts_free(s->stats), ts_free(s->hist), ts_free(s->pending), ts_free(s->step), ts_free(s->entry), ts_free(s->same);
    }
    ts_free(p->hist_slot);
    p->backend->free(p->dev_anchors);
    p->backend->free(p->dev_stage);
    p->backend->free(p->dev_outfeed);
    ts_free(p->host_outfeed);
    ts_free(p->outfeed_off);
    ts_free(p->outfed);
    ts_free(p->points);
    ts_free(p->copies);
    for (int i = 0; p->backend->event_free && i < 4; i++) p->backend->event_free(&p->marks[i]);
    for (int i = 0; p->backend->event_free && p->op_events && i < p->op_rounds * (p->n_nodes + 1); i++)
        p->backend->event_free(&p->op_events[i].start), p->backend->event_free(&p->op_events[i].end);
    ts_free(p->op_events);
    ts_free(p->op_calls);
    ts_free(p->queued);
    p->backend->free(p->dev_lost);
    ts_free(p->host_lost);
    ts_free(p->arena_anchors);
    ts_free(p->shape);
    ts_free(p->order);
    ts_free(p->layer_outs);
    ts_free(p->live);
    ts_free(p->needs_grad);
    ts_free(p->grad_shared);
    ts_free(p->fusions);
    ts_free(p->twin_sums);
    ts_free(p->chan_sums);
    ts_free(p->skip);
    ts_free(p->readers);
    ts_free(p->pass);
    ts_free(p->reaches);
    ts_free(p->value_entry);
    ts_free(p->grad_entry);
    ts_free(p->op_ns);
    ts_free(p->bound);
    for (int i = 0; p->converted && i < p->n_nodes; i++) ts_free(p->converted[i].data);
    ts_free(p->converted);
    ts_free(p);
}

int ts_prog_find(const ts_prog *p, const char *name) { return ts_strmap_get(&p->entry_index, name); }

double ts_prog_op_flops(const ts_prog *p, const ts_tensor *t) {
    const ts_op_def *def = ts_op_get(t->op);
    if (!def->flops || (t->op == TS_OP_ATTENTION && t->n_in == 5)) return 0; /* its twin's ops count the work, whichever runs */
    ts_shape in[TS_MAX_INPUTS];
    for (int j = 0; j < t->n_in; j++) in[j] = p->shape[t->in[j]];
    return def->flops(in, &p->shape[t->id]);
}

int ts_prog_entry_of(const ts_prog *p, int node, ts_entry_kind kind) {
    for (int e = p->grad_entry[node]; e >= 0 && e < p->n_entries && p->entries[e].node == node; e++)
        if (p->entries[e].kind == kind) return e;
    return -1;
}

int ts_prog_backward_reads(const ts_prog *p, const ts_tensor *t, int reads[TS_MAX_INPUTS + 2]) {
    const ts_op_def *def = ts_op_get(t->op);
    int n = 0;
    if (p->grad_entry[t->id] >= 0) reads[n++] = p->grad_entry[t->id];
    for (int j = 0; j < t->n_in; j++)
        if (!((def->bwd_unread_inputs >> j) & 1u) && p->value_entry[t->in[j]] >= 0) reads[n++] = p->value_entry[t->in[j]];
    if (def->needs_output && p->value_entry[t->id] >= 0) reads[n++] = p->value_entry[t->id];
    return n;
}

int ts_prog_backward_writes(const ts_prog *p, const ts_tensor *t, int writes[TS_MAX_INPUTS]) {
    int n = 0;
    for (int j = 0; j < t->n_in; j++)
        if (!ts_op_int_input(t->op, j) && p->grad_entry[t->in[j]] >= 0) writes[n++] = p->grad_entry[t->in[j]];
    return n;
}

static const char *entry_name(const void *p, size_t i) { return ((const ts_prog *)p)->entries[i].name; }

/* "did you mean" with the three closest names */
ts_status ts_prog_unknown_name(const ts_prog *p, const char *what, const char *name) {
    char hint[512];
    ts_closest_names(name, entry_name, p, (size_t)p->n_entries, hint, sizeof hint);
    return ts_error(TS_ERR_NOT_FOUND, "%s: no tensor named '%s' in this model; closest: %s (list them all with ts_model_tensor_names or `tensorscope names`)",
                    what, name, hint);
}

ts_status ts_prog_name_of(const ts_prog *p, const char *what, const char *name, const char **full) {
    int e = ts_prog_find(p, name);
    size_t hit = (size_t)e, found = e >= 0 ? 1 : ts_name_resolve_prefix(what, name, entry_name, p, (size_t)p->n_entries, &hit);
    if (!found) return ts_prog_unknown_name(p, what, name);
    if (found > 1) return TS_ERR_NOT_FOUND; /* the candidates, said */
    *full = p->entries[hit].name;
    return TS_OK;
}

static ts_status add_entry(ts_prog *p, size_t *cap, ts_entry_kind kind, const ts_tensor *t, const ts_shape *shape, bool per_step) {
    if (ts_grow((void **)&p->entries, cap, (size_t)p->n_entries + 1, sizeof *p->entries)) return TS_ERR_OUT_OF_MEMORY;
    ts_entry *e = &p->entries[p->n_entries];
    memset(e, 0, sizeof *e);
    size_t n = strlen(kind_prefix[kind]) + strlen(t->name) + 1;
    e->name = ts_malloc(n);
    if (!e->name) return TS_ERR_OUT_OF_MEMORY;
    snprintf(e->name, n, "%s%s", kind_prefix[kind], t->name);
    e->kind = kind;
    e->node = t->id;
    e->dtype = kind == TS_KIND_VALUE ? t->dtype : TS_F32;
    e->shape = kind == TS_KIND_STEP ? (ts_shape){.ndim = 0} : *shape;
    e->numel = ts_shape_numel(&e->shape);
    e->per_step = per_step;
    e->grid = kind == TS_KIND_VALUE || kind == TS_KIND_GRAD ? t->grid : TS_F32;
    e->watch = -1;
    e->relu_out = -1;
    e->stab = -1;
    e->same_values = -1;
    e->deferred_run = -1;
    e->kernel_run = -1;
    p->n_entries++;
    return TS_OK;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

bool ts_prog_is_layer_output(const ts_graph *g, const ts_prog *p, int i) {
    const ts_tensor *t = g->t[i];
    if (t->op == TS_OP_INPUT || ts_op_holds_value(t->op)) return false;
    const char *slash = strchr(t->name, '/');
    if (!slash) return true;
    size_t scope_len = (size_t)(slash - t->name);
    for (int k = 0; k < p->n_order; k++) {
        const ts_tensor *c = g->t[p->order[k]];
        for (int j = 0; j < c->n_in; j++)
            if (c->in[j] == i && !(strncmp(c->name, t->name, scope_len) == 0 && c->name[scope_len] == '/')) return true;
    }
    return false;
}

/* Where the batch lies in a tensor, as the run changes it: exporters bake
 * the example's batch into Reshape targets (ConvNeXt's [B*H*W, C] is
 * [512,16] at batch 8; attention's [T*B, C] after a sequence-first
 * transpose), so a Reshape at another batch needs to know which target dim
 * holds it. An input whose run shape differs from its declared one in one
 * dim holds the batch there. The batch's stride -- the elements inner to
 * it in row-major order -- does not depend on the batch size; a Reshape
 * (a view) keeps it, a Permute moves it, an op whose output has an input's
 * shape keeps it, a Gather of another axis moves it, and an op of the
 * same rank that keeps the dim holding it (convolution, pooling, a
 * matmul's rows, slices and reductions of other dims) keeps it there.
 * Else it is unknown (-1) and Reshape targets stay as built. */
static int64_t inner_numel(const ts_shape *s, int from) {
    int64_t n = 1;
    for (int d = from; d < s->ndim; d++) n *= s->d[d];
    return n;
}

/* The dim of s that holds the batch at stride `stride`, and the factor of
 * that dim inner to it (*inner); -1 if none. */
static int batch_dim(const ts_shape *s, int64_t stride, int64_t *inner) {
    for (int d = s->ndim - 1; d >= 0; d--) {
        int64_t below = inner_numel(s, d + 1);
        if (below > 0 && stride % below == 0 && stride < below * s->d[d]) {
            *inner = stride / below;
            return d;
        }
    }
    return -1;
}

static int64_t batch_stride_of(const ts_model_def *m, const ts_prog *p, int i, const int64_t *stride) {
    const ts_tensor *t = m->g->t[i];
    const ts_shape *out = &t->shape; /* located at the built shapes, where the batch is the example's */
    if (t->op == TS_OP_INPUT) {
        int changed = -1;
        for (int d = 0; d < out->ndim && out->ndim == p->shape[i].ndim; d++)
            if (out->d[d] != p->shape[i].d[d]) {
                if (changed >= 0) return -1;
                changed = d;
            }
        return changed >= 0 ? inner_numel(out, changed + 1) : -1;
    }
    for (int k = 0; k < t->n_in && t->op != TS_OP_PERMUTE; k++) { /* an output of an input's shape: where that input has it */
        int x = t->in[k];
        if (stride[x] >= 0 && ts_shape_equal(&m->g->t[x]->shape, out)) return stride[x];
    }
    int x = -1; /* the first input that holds the batch */
    for (int k = 0; k < t->n_in && x < 0; k++)
        if (stride[t->in[k]] >= 0) x = t->in[k];
    if (x < 0) return -1;
    const ts_shape *in = &m->g->t[x]->shape;
    if (t->op == TS_OP_RESHAPE || t->op == TS_OP_FLATTEN) return stride[x]; /* views */
    int64_t inner;
    int d = batch_dim(in, stride[x], &inner);
    if (d < 0) return -1;
    if (t->op == TS_OP_PERMUTE) {
        for (int o = 0; o < out->ndim; o++)
            if (t->attr[o] == d) return inner * inner_numel(out, o + 1);
        return -1;
    }
    if (t->op == TS_OP_GATHER) { /* data[:axis] + indices' dims + data[axis+1:] */
        int axis = (int)t->attr[0], idx_ndim = m->g->t[t->in[1]]->shape.ndim;
        if (x == t->in[0] && d == axis) return -1;
        int o = x != t->in[0] ? axis + d : d < axis ? d : d - 1 + idx_ndim;
        return o < out->ndim ? inner * inner_numel(out, o + 1) : -1;
    }
    /* the dim holding the batch kept in place, of the same size, the rank
     * kept (a matmul's rows, a convolution's samples, a slice or a
     * reduction of another dim) */
    bool matmul = t->op == TS_OP_MATMUL || t->op == TS_OP_MATMUL_T || t->op == TS_OP_BATCH_MATMUL;
    bool kept = d == 0 ? out->ndim > 0 && out->d[0] == in->d[0] /* a leading dim, whatever follows it (an embedding) */
                       : out->ndim == in->ndim && out->d[d] == in->d[d] && !(matmul && d == in->ndim - 1); /* not contracted */
    return kept ? inner * inner_numel(out, d + 1) : -1;
}

/* An imported Reshape's target at the run's shapes: the target dim that
 * holds the batch (at the input's batch stride) scaled as the input's
 * element count changed ([512,16] -> [384,16] at batch 6; [T*B, C] ->
 * [T, B, C] has it in B). A target with a -1 takes the change there;
 * without a batch stride, or where no dim holds it, the target as built.
 * A Reshape built by ts_reshape keeps the target its caller gave. */
static ts_shape reshape_target_at_batch(const ts_tensor *t, const ts_shape *built_in, const ts_shape *run_in, int64_t stride) {
    ts_shape s = t->sparam;
    int64_t n0 = ts_shape_numel(built_in), n = ts_shape_numel(run_in), inner;
    if (stride < 0 || n == n0 || n0 <= 0 || s.ndim < 1) return s;
    for (int d = 0; d < s.ndim; d++)
        if (s.d[d] <= 0) return s;
    int k = batch_dim(&s, stride, &inner);
    if (k >= 0 && (s.d[k] * n) % n0 == 0) s.d[k] = s.d[k] * n / n0;
    return s;
}

static ts_status infer_shapes(const ts_model_def *m, ts_prog *p) {
    ts_graph *g = m->g;
    int64_t *stride = ts_malloc((size_t)(p->n_nodes ? p->n_nodes : 1) * sizeof *stride); /* the batch's, per node */
    if (!stride) return ts_error(TS_ERR_OUT_OF_MEMORY, "compile: out of memory");
    ts_status st = TS_OK;
    int64_t batch_run = 0, batch_built = 0; /* elements of the first input whose batch changed, at the run and as built */
    for (int i = 0; i < p->n_nodes; i++) {
        const ts_tensor *t = g->t[i];
        const ts_op_def *def = ts_op_get(t->op);
        stride[i] = -1;
        if (!p->live[i]) continue; /* e.g. the loss of a graph run for inference */
        if (t->op == TS_OP_INPUT || ts_op_holds_value(t->op)) {
            p->shape[i] = (i < m->n_override && m->input_override[i].ndim >= 0) ? m->input_override[i] : t->shape;
        } else {
            ts_shape in[TS_MAX_INPUTS];
            for (int k = 0; k < t->n_in; k++) in[k] = p->shape[t->in[k]];
            if (t->op == TS_OP_RESHAPE && t->sparam.ndim >= 0 && t->origin) { /* imported: the exporter's target */
                ts_tensor at_batch = *t;
                at_batch.sparam = reshape_target_at_batch(t, &g->t[t->in[0]]->shape, &in[0], stride[t->in[0]]);
                st = def->shape(&at_batch, in, &p->shape[i]);
            } else {
                st = def->shape(t, in, &p->shape[i]);
            }
            char where[600];
            if (st) {
                st = ts_error_wrap(st, "compile: '%s' (%s, built at %s) with the run's input shapes", t->name, def->name,
                                   ts_tensor_where(t, where, sizeof where));
                break;
            }
        }
        if (ts_shape_numel(&p->shape[i]) > TS_MAX_NUMEL) { /* a huge micro-batch size given at run time */
            char b[96];
            st = ts_error(TS_ERR_SHAPE, "compile: '%s' would be %s, more than 2^34 elements; use a smaller micro-batch size",
                          t->name, ts_shape_str(&p->shape[i], b, sizeof b));
            break;
        }
        stride[i] = batch_stride_of(m, p, i, stride);
        if (t->op == TS_OP_SLICE && t->origin && batch_built && batch_run != batch_built && stride[t->in[0]] >= 0) {
            int64_t inner;
            if (batch_dim(&m->g->t[t->in[0]]->shape, stride[t->in[0]], &inner) == (int)t->attr[0]) {
                /* rows picked by offsets computed for the built batch (an
                 * unrolled LSTM's steps of [T*B, ...]): another batch would
                 * read the wrong rows */
                char where[600], b[96];
                st = ts_error(TS_ERR_SHAPE, "compile: '%s' (Slice, built at %s) takes rows of the dim that holds the batch at offsets "
                              "computed for the batch the graph was built with (%s); at another batch size it would read the wrong "
                              "samples; build (import) the graph at this batch size",
                              t->name, ts_tensor_where(t, where, sizeof where), ts_shape_str(&m->g->t[t->in[0]]->shape, b, sizeof b));
                break;
            }
        }
        if (stride[i] < 0) continue;
        int64_t run_n = ts_shape_numel(&p->shape[i]), built_n = ts_shape_numel(&t->shape);
        if (t->op == TS_OP_INPUT && !batch_built) {
            batch_run = run_n, batch_built = built_n;
        } else if (batch_built && t->origin && run_n * batch_built != built_n * batch_run) { /* an imported node */
            /* it holds the batch but did not scale with it: a constant
             * made for the built batch broadcast against it */
            char where[600], a[96], b[96];
            st = ts_error(TS_ERR_SHAPE, "compile: '%s' (%s, built at %s) is %s at this batch size where it was %s: it holds the batch, but "
                          "something it reads (a constant the importer folded for the batch the graph was built with, such as an attention "
                          "mask) does not scale with it; build (import) the graph at this batch size",
                          t->name, def->name, ts_tensor_where(t, where, sizeof where), ts_shape_str(&p->shape[i], a, sizeof a),
                          ts_shape_str(&t->shape, b, sizeof b));
            break;
        }
    }
    ts_free(stride);
    return st;
}

/* Which nodes run, which reach the loss, and which get gradients. */
static ts_status live_sets(const ts_model_def *m, ts_prog *p, const bool *requested) {
    ts_graph *g = m->g;
    int n = p->n_nodes;
    for (int i = 0; i < n; i++) p->live[i] = false;
    if (m->training) p->live[m->loss] = true;
    for (int k = 0; k < m->n_outputs; k++) p->live[m->outputs[k]] = true;
    for (int i = 0; i < n; i++)
        if (g->t[i]->op == TS_OP_PRINT) p->live[i] = true; /* never optimised away */
    for (size_t k = 0; k < g->n_marks; k++) p->live[g->marks[k].tensor] = true;
    /* a tensor anchored by its name is computed even when nothing else needs
     * it (a wrapped torch module's output beside a loss that does not read
     * it): what is asked for is returned */
    for (size_t k = 0; k < m->opts->n_anchors; k++) {
        const ts_tensor *t = ts_graph_find(g, m->opts->anchors[k].tensor_name);
        if (t && t->id < n) p->live[t->id] = true;
    }
    for (int i = n - 1; i >= 0; i--)
        if (p->live[i])
            for (int j = 0; j < g->t[i]->n_in; j++) p->live[g->t[i]->in[j]] = true;
    p->n_order = 0;
    for (int i = 0; i < n; i++)
        if (p->live[i]) p->order[p->n_order++] = i;
    for (int i = 0; i < n; i++) p->reaches[i] = p->needs_grad[i] = false;
    if (!m->training) return TS_OK;
    p->reaches[m->loss] = true;
    for (int i = n - 1; i >= 0; i--)
        if (p->reaches[i] && p->live[i]) {
            for (int j = 0; j < g->t[i]->n_in; j++) /* a stop-gradient's input gets no gradient from it (PyTorch's None, not 0) */
                if (!ts_op_int_input(g->t[i]->op, j) && g->t[i]->op != TS_OP_STOP_GRADIENT) p->reaches[g->t[i]->in[j]] = true;
        }
    for (int k = 0; k < p->n_order; k++) {
        int i = p->order[k];
        const ts_tensor *t = g->t[i];
        bool need = (t->op == TS_OP_PARAM && !t->frozen) || requested[i];
        for (int j = 0; j < t->n_in && !need; j++) need = p->needs_grad[t->in[j]] && !ts_op_int_input(t->op, j);
        if (t->n_in > 0 && !ts_op_get(t->op)->has_backward) need = false; /* e.g. a dropout mask: nothing flows through */
        p->needs_grad[i] = need && p->reaches[i] && t->dtype == TS_F32;
    }
    return TS_OK;
}

/* Gradient names asked for by anchors that the default set lacks. */
static ts_status requested_grads(const ts_model_def *m, ts_prog *p, bool *requested) {
    ts_graph *g = m->g;
    for (size_t k = 0; k < m->opts->n_anchors; k++) {
        const char *name = m->opts->anchors[k].tensor_name;
        if (strncmp(name, "Gradient___", 11) != 0 || strpbrk(name, "*?[")) continue;
        const ts_tensor *t = ts_graph_find(g, name + 11);
        if (!t) continue; /* reported as unknown later */
        if (!m->training)
            return ts_error(TS_ERR_INVALID_ARGUMENT, "anchor '%s': an inference model computes no gradients", name);
        if (t->dtype != TS_F32) return ts_error(TS_ERR_INVALID_ARGUMENT, "anchor '%s': '%s' is an integer tensor and has no gradient", name, t->name);
        if (t->op == TS_OP_BUFFER)
            return ts_error(TS_ERR_INVALID_ARGUMENT, "anchor '%s': '%s' is a buffer (state an op updates, such as running statistics) and has no gradient",
                            name, t->name);
        if (!p->reaches[t->id])
            return ts_error(TS_ERR_INVALID_ARGUMENT, "anchor '%s': '%s' does not reach the loss '%s', so it has no gradient",
                            name, t->name, g->t[m->loss]->name);
        requested[t->id] = true;
    }
    return TS_OK;
}

static ts_status build_entries(const ts_model_def *m, ts_prog *p) {
    ts_graph *g = m->g;
    size_t cap = 0;
    for (int i = 0; i < p->n_nodes; i++) p->value_entry[i] = p->grad_entry[i] = -1;
    for (int k = 0; k < p->n_order; k++) {
        int i = p->order[k];
        const ts_tensor *t = g->t[i];
        p->value_entry[i] = p->n_entries;
        if (add_entry(p, &cap, TS_KIND_VALUE, t, &p->shape[i], ts_op_holds_value(t->op))) return TS_ERR_OUT_OF_MEMORY;
        p->entries[p->value_entry[i]].view = ts_op_get(t->op)->view && g->t[t->in[0]]->op == TS_OP_INPUT;
        if (p->needs_grad[i]) {
            p->grad_entry[i] = p->n_entries;
            if (add_entry(p, &cap, TS_KIND_GRAD, t, &p->shape[i], false)) return TS_ERR_OUT_OF_MEMORY;
        }
        if (!m->training || t->op != TS_OP_PARAM || t->frozen || !p->needs_grad[i]) continue;
        ts_entry_kind kinds[5] = {TS_KIND_ACCUM, TS_KIND_UPDATED};
        int nk = 2;
        const ts_optimizer *o = ts_param_optimizer(m->opt, t);
        if (o->kind == TS_OPT_SGD && o->momentum != 0.0f) kinds[nk++] = TS_KIND_ACCL;
        if (o->kind != TS_OPT_SGD) kinds[nk++] = TS_KIND_ACCL1, kinds[nk++] = TS_KIND_ACCL2, kinds[nk++] = TS_KIND_STEP;
        for (int q = 0; q < nk; q++)
            if (add_entry(p, &cap, kinds[q], t, &p->shape[i], true)) return TS_ERR_OUT_OF_MEMORY;
    }
    for (int e = 0; e < p->n_entries; e++)
        if (ts_strmap_put(&p->entry_index, p->entries[e].name, e)) return TS_ERR_OUT_OF_MEMORY;
    return TS_OK;
}

/* Whether consumer c may read input j in 16-bit cells: the GEMM operands
 * of the ops whose CPU kernels widen them (backend/cpu/adapters.h), and casts. */
static bool reads_16bit(const ts_tensor *c, int j) {
    switch (c->op) {
    case TS_OP_MATMUL: case TS_OP_MATMUL_T: case TS_OP_BATCH_MATMUL: case TS_OP_CONV2D: return j < 2;
    case TS_OP_CAST: return true;
    default: return false;
    }
}

/* 16-bit storage: a cast's bf16 / f16 output is held in 2-byte cells (its
 * entry's dtype becomes the 16-bit one) when every op that reads it takes
 * them, on a backend whose memory the host addresses (the CPU's: its
 * observers read the cells where they are), without pipeline stages (whose
 * messages are f32); else in f32 cells, its values the same. The gradients
 * of 16-bit tensors stay in f32 cells (rounded to the dtype). */
static void half_storage(const ts_model_def *m, ts_prog *p) {
    const ts_graph *g = m->g;
    if (!m->dev.backend->host_addressable || m->opts->stages > 1) return;
    bool *ok = ts_calloc((size_t)p->n_nodes, sizeof *ok);
    if (!ok) return; /* f32 cells: the same values */
    for (int k = 0; k < p->n_order; k++) {
        const ts_tensor *t = g->t[p->order[k]];
        ok[t->id] = t->op == TS_OP_CAST && ts_dtype_is_half(t->grid);
    }
    for (int k = 0; k < p->n_order; k++) {
        const ts_tensor *c = g->t[p->order[k]];
        for (int j = 0; j < c->n_in; j++)
            if (!reads_16bit(c, j)) ok[c->in[j]] = false;
    }
    for (int k = 0; k < p->n_order; k++) {
        int i = p->order[k];
        if (ok[i]) p->entries[p->value_entry[i]].dtype = g->t[i]->grid;
    }
    ts_free(ok);
}

/* The compile budget (TS_LIMIT_COMPILE_BYTES): `bytes` more of the plan's
 * buffers, added to what the program has, checked before any is
 * allocated (a shape declared by a file can ask for terabytes). */
static ts_status budget(ts_prog *p, size_t bytes, const char *what) {
    size_t need;
    if (__builtin_add_overflow(p->bytes_budgeted, bytes, &need) || need > ts_get_limit(TS_LIMIT_COMPILE_BYTES)) {
        char msg[160];
        snprintf(msg, sizeof msg, "compile: the model's buffers (with %s)", what);
        return ts_limit_exceeded(TS_LIMIT_COMPILE_BYTES, msg, need < p->bytes_budgeted ? UINT64_MAX : (uint64_t)need);
    }
    p->bytes_budgeted = need;
    return TS_OK;
}

/* Zeroed memory of the model's device (its backend's). */
static ts_status device_alloc(const ts_model_def *m, size_t bytes, float **out) {
    void *v = NULL;
    ts_status st = m->dev.backend->alloc(bytes, &v);
    *out = v;
    return st;
}

/* A device summarises its watches many tensors a launch (observe/'s
 * queue, flushed before the device writes over a queued tensor, and by a
 * training step's first update): a small watched activation or activation
 * gradient keeps its memory to the end of the step's last pass (a training
 * model's backward, an inference model's forward), so that a later op's
 * output does not take it and force a launch of its own. Up to KEEP_EACH bytes a
 * tensor and KEEP_ALL in all (*kept so far): a large tensor's summary is
 * worth its launch. */
#define KEEP_EACH ((size_t)4 << 20)
#define KEEP_ALL ((size_t)1 << 30)
static bool kept_to_pass_end(const ts_model_def *m, const ts_entry *en, size_t bytes, size_t *kept) {
    if (m->dev.backend->host_addressable || en->watch < 0 || bytes > KEEP_EACH || *kept + bytes > KEEP_ALL)
        return false;
    *kept += bytes;
    return true;
}

/* Without accumulation a parameter's Accum___ is its gradient's buffer. */
static bool accum_is_grad(const ts_model_def *m) { return m->opts->grad_accum == 1; }

/* Entries whose summary is another's at every sample (same_values), so
 * that a watch of both reads the memory once:
 * - a view (Reshape, Flatten, ...) or a transpose holds its input's values
 *   in another layout: the same count, moments, extremes, histograms and
 *   ranges;
 * - the gradient such an op, an Add (to each input of its shape), a Sub
 *   (to its first) or a print op passes back is its output's gradient, in
 *   the input's layout; where that op alone adds to the input's gradient
 *   (an activation's, f32 on both sides) the two hold the same values;
 * - without accumulation a parameter's Accum___ is its gradient's buffer
 *   (plan_memory). */
static void mark_same_values(const ts_model_def *m, ts_prog *p) {
    const ts_graph *g = m->g;
    for (int e = 0; m->training && accum_is_grad(m) && e < p->n_entries; e++)
        if (p->entries[e].kind == TS_KIND_ACCUM) p->entries[e].same_values = p->grad_entry[p->entries[e].node];
    int *adders = ts_calloc((size_t)p->n_nodes, sizeof *adders); /* the consumers adding to each node's gradient */
    if (!adders) return; /* only a saving: none without memory */
    for (int k = 0; k < p->n_order; k++) {
        const ts_tensor *c = g->t[p->order[k]];
        for (int j = 0; p->needs_grad[c->id] && j < c->n_in; j++) adders[c->in[j]]++;
    }
    for (int k = 0; k < p->n_order; k++) {
        const ts_tensor *t = g->t[p->order[k]];
        bool layout = t->n_in == 1 && (ts_op_get(t->op)->view || t->op == TS_OP_PERMUTE);
        int passes = t->op == TS_OP_ADD ? 2 : t->op == TS_OP_SUB || t->op == TS_OP_PRINT || layout ? 1 : 0;
        for (int j = 0; j < passes && j < t->n_in; j++) {
            const ts_tensor *in = g->t[t->in[j]];
            int v = p->value_entry[in->id], vo = p->value_entry[t->id];
            if (layout && v >= 0 && vo >= 0 && p->entries[v].numel == p->entries[vo].numel && p->entries[v].dtype == TS_F32 &&
                p->entries[vo].dtype == TS_F32)
                p->entries[vo].same_values = v;
            int ge = p->grad_entry[in->id], out = p->grad_entry[t->id];
            bool fits = layout ? ge >= 0 && out >= 0 && p->entries[ge].numel == p->entries[out].numel
                               : ge >= 0 && out >= 0 && p->shape[in->id].ndim == p->shape[t->id].ndim &&
                                     memcmp(p->shape[in->id].d, p->shape[t->id].d, (size_t)p->shape[t->id].ndim * sizeof p->shape[t->id].d[0]) == 0;
            bool activation = !ts_op_holds_value(in->op) && in->op != TS_OP_INPUT;
            if (!m->training || !fits || !activation || adders[in->id] != 1 || in->id == m->loss || ts_dtype_is_half(in->grid) ||
                ts_dtype_is_half(t->grid) || p->entries[ge].per_step != p->entries[out].per_step)
                continue;
            p->entries[ge].same_values = out;
        }
    }
    ts_free(adders);
}

/* Planning the buffers of a program (plan_memory): positions on one
 * timeline, forward 0..L-1 then backward L..2L-1 (a node's backward at
 * 2L-1 - its forward position), 2L the end of the step.
 * fwd: forward position; per node over its consumers (one pass over the
 * edges): last_fwd = the last forward use, last_grad = the latest forward
 * position of a consumer that needs a gradient, first_read = the earliest
 * of a consumer whose backward reads the node's value (-1 when none).
 * Views: a reshape of an activation shares its buffer (no copy); root = the
 * activation owning the buffer, iv_of = its interval. Gradients: grad_users
 * = the consumers that add to a node's gradient; giv_of = the interval of a
 * node's gradient buffer, or through a view whose gradient it shares, that
 * view's (grad_shared). The eight per-node arrays are one allocation. */
typedef struct mem_plan {
    const ts_model_def *m;
    ts_prog *p;
    ts_graph *g;
    int L;
    size_t nn;
    int64_t *fwd, *last_fwd, *last_grad, *first_read, *root, *iv_of, *grad_users, *giv_of;
    ts_interval *iv; /* the activations' intervals, laid out by ts_memplan */
    int *iv_entry;   /* the entry of each interval */
    int n_iv;
    size_t kept_bytes;  /* what kept_to_pass_end lengthened */
    size_t grads_bytes; /* the gradients' arena */
    size_t workspace;   /* floats of the kernels' shared workspace */
    bool alias_accum;   /* Accum___ is the gradient's buffer */
    bool alloc;         /* a plan-only compile lays the buffers out and allocates none */
} mem_plan;

#define BWD(i) ((int64_t)(2 * L - 1) - fwd[i])

/* Each node's forward position and the positions of its uses. */
static void plan_liveness(mem_plan *mp) {
    const ts_prog *p = mp->p;
    const ts_graph *g = mp->g;
    const int L = mp->L;
    int64_t *fwd = mp->fwd, *last_fwd = mp->last_fwd, *last_grad = mp->last_grad, *first_read = mp->first_read;
    for (size_t i = 0; i < mp->nn; i++)
        last_fwd[i] = last_grad[i] = first_read[i] = mp->root[i] = mp->iv_of[i] = mp->giv_of[i] = -1, mp->grad_users[i] = 0;
    for (int k = 0; k < L; k++) fwd[p->order[k]] = k;
    for (int k = 0; k < L; k++) {
        const ts_tensor *c = g->t[p->order[k]];
        const ts_op_def *cd = ts_op_get(c->op);
        for (int j = 0; j < c->n_in; j++) {
            int i = c->in[j];
            last_fwd[i] = k;
            if (!p->needs_grad[c->id]) continue;
            last_grad[i] = k;
            mp->grad_users[i]++;
            if (first_read[i] < 0 && cd->has_backward && !((cd->bwd_unread_inputs >> j) & 1u)) first_read[i] = k;
        }
    }
}

/* A bias Add, x + b with b a parameter (or a tensor without a gradient)
 * and x of the output's shape: x's gradient is the Add's own, so where the
 * Add alone adds to it the two can share a buffer (grad_shared) and the
 * Add's backward computes b's gradient only. A Linear's bias Add then no
 * longer copies its output's gradient to the product's. */
static bool bias_add(const ts_prog *p, const ts_graph *g, const ts_tensor *c) {
    if (c->op != TS_OP_ADD || c->n_in != 2 || c->in[0] == c->in[1]) return false;
    const ts_tensor *b = g->t[c->in[1]];
    const ts_shape *sx = &p->shape[c->in[0]], *so = &p->shape[c->id];
    return (b->op == TS_OP_PARAM || !p->needs_grad[b->id]) && sx->ndim == so->ndim &&
           memcmp(sx->d, so->d, (size_t)so->ndim * sizeof so->d[0]) == 0;
}

/* A view (Reshape, Flatten) that is the only op adding to its input's
 * gradient: that gradient is the view's own, reshaped, so the two share
 * one buffer and the view's backward (a copy) is skipped; a bias Add
 * likewise shares its input's (bias_add). Activations only, f32
 * gradients, one pipeline stage. */
static void plan_view_gradients(mem_plan *mp) {
    const ts_model_def *m = mp->m;
    ts_prog *p = mp->p;
    const ts_graph *g = mp->g;
    for (int k = 0; k < mp->L && m->training && ts_opts_stages(m->opts) == 1; k++) {
        const ts_tensor *c = g->t[p->order[k]];
        if (!(ts_op_get(c->op)->view || bias_add(p, g, c)) || !p->needs_grad[c->id] || c->id == m->loss || ts_dtype_is_half(c->grid)) continue;
        const ts_tensor *in = g->t[c->in[0]];
        bool activation = !ts_op_holds_value(in->op) && in->op != TS_OP_INPUT;
        p->grad_shared[c->id] = activation && p->needs_grad[in->id] && mp->grad_users[in->id] == 1 && !ts_dtype_is_half(in->grid) &&
                                in->id != m->loss && p->grad_entry[in->id] >= 0 && p->grad_entry[c->id] >= 0;
    }
}

/* The interval of each activation's value and gradient buffer (a view's
 * lengthening its owner's), an input's gradient kept to the step's end;
 * the bytes of the other gradients and accumulators, which have fixed
 * places. */
static void plan_intervals(mem_plan *mp) {
    const ts_model_def *m = mp->m;
    ts_prog *p = mp->p;
    const ts_graph *g = mp->g;
    const int L = mp->L;
    const int64_t *fwd = mp->fwd, *last_fwd = mp->last_fwd, *last_grad = mp->last_grad, *first_read = mp->first_read;
    int64_t *root = mp->root, *iv_of = mp->iv_of, *giv_of = mp->giv_of;
    ts_interval *iv = mp->iv;
    int64_t end_of_step = 2 * L;
    for (int e = 0; e < p->n_entries; e++) {
        ts_entry *en = &p->entries[e];
        const ts_tensor *t = g->t[en->node];
        size_t bytes = ts_dtype_is_half(en->dtype) ? (size_t)en->numel * sizeof(uint16_t) : (size_t)ts_entry_cells(en) * sizeof(float);
        bool activation = !ts_op_holds_value(t->op) && t->op != TS_OP_INPUT;
        if (en->kind == TS_KIND_VALUE && activation && !en->view) {
            /* live until the last forward consumer, and until the backward
             * of each consumer that reads it (and its own backward when that
             * reads the output): a value no backward reads dies in forward */
            int64_t end = fwd[t->id];
            if (last_fwd[t->id] > end) end = last_fwd[t->id];
            if (first_read[t->id] >= 0 && (int64_t)(2 * L - 1) - first_read[t->id] > end) end = (int64_t)(2 * L - 1) - first_read[t->id];
            if (p->needs_grad[t->id] && ts_op_get(t->op)->needs_output) end = end > BWD(t->id) ? end : BWD(t->id);
            int64_t pass_end = m->training ? 2 * L - 1 : L - 1; /* the first update's flush comes after the backward */
            if (kept_to_pass_end(m, en, bytes, &mp->kept_bytes) && end < pass_end) end = pass_end;
            if (en->deferrable && end < L - 1) end = L - 1; /* its summary may be taken up to the forward's end */
            int64_t r = ts_op_get(t->op)->view ? root[t->in[0]] : -1;
            if (r >= 0) { /* a view of an activation: the owner's buffer lives as long as the view too */
                root[t->id] = r;
                if (iv[iv_of[r]].end < end) iv[iv_of[r]].end = end;
                continue;
            }
            root[t->id] = t->id;
            iv_of[t->id] = mp->n_iv;
            iv[mp->n_iv] = (ts_interval){.start = fwd[t->id], .end = end, .bytes = bytes};
            mp->iv_entry[mp->n_iv++] = e;
        } else if (en->kind == TS_KIND_GRAD && activation) {
            if (last_grad[t->id] >= 0 && p->grad_shared[p->order[last_grad[t->id]]]) continue; /* its view's buffer (below) */
            int64_t start = BWD(t->id);
            if (last_grad[t->id] >= 0 && (int64_t)(2 * L - 1) - last_grad[t->id] < start) start = (int64_t)(2 * L - 1) - last_grad[t->id];
            if (t->id == m->loss) start = BWD(t->id);
            int64_t end = kept_to_pass_end(m, en, bytes, &mp->kept_bytes) ? 2 * L - 1 : BWD(t->id);
            giv_of[t->id] = mp->n_iv;
            iv[mp->n_iv] = (ts_interval){.start = start, .end = end, .bytes = bytes};
            mp->iv_entry[mp->n_iv++] = e;
        } else if (en->kind == TS_KIND_GRAD && t->op == TS_OP_INPUT) {
            iv[mp->n_iv] = (ts_interval){.start = 0, .end = end_of_step, .bytes = bytes}; /* read after the backward pass */
            mp->iv_entry[mp->n_iv++] = e;
        } else if (en->kind == TS_KIND_GRAD || (en->kind == TS_KIND_ACCUM && !mp->alias_accum)) {
            mp->grads_bytes += (bytes + 63) / 64 * 64;
        }
    }
    /* a shared gradient lives in its view's buffer, which lasts until its
     * own last reader; a chain of views from its last, so each view's
     * interval is known before its input's turn */
    for (int k = L - 1; k >= 0; k--) {
        int c = p->order[k];
        if (!p->grad_shared[c]) continue;
        int i = g->t[c]->in[0];
        ts_interval *v = &iv[giv_of[c]];
        const ts_entry *en = &p->entries[p->grad_entry[i]];
        size_t bytes = (size_t)en->numel * sizeof(float);
        int64_t end = kept_to_pass_end(m, en, bytes, &mp->kept_bytes) ? 2 * L - 1 : BWD(i);
        if (v->end < end) v->end = end;
        giv_of[i] = giv_of[c];
    }
}
#undef BWD

/* An op that a producer's output pass does in its stead (ts_pass_takes,
 * the executor's choice by the same rule) writes its output in the
 * producer's step: that output lives from there, so that the plan never
 * gives it what the producer still reads (its inputs, its own value, a
 * residual), which the pass would write over while reading. Except where
 * the pass may write it over the producer's input element for element
 * (ts_pass_over_input: an inference norm's Relu) and the producer reads
 * that input last: then the output takes the input's cell (same_as), as
 * an unfused plan could have given it, and the arena does not grow. */
static void plan_passes(mem_plan *mp) {
    ts_prog *p = mp->p;
    const ts_kernel_row *rows = mp->m->dev.backend->kernels;
    ts_interval *iv = mp->iv;
    for (int k = 0; k < mp->L; k++) {
        int *took = p->pass + 3 * k + 1;
        ts_pass_kind kind = ts_pass_takes(p, mp->g, rows, k, took);
        p->pass[3 * k] = (int)kind;
        if (kind == TS_PASS_NONE) continue;
        int64_t v = mp->iv_of[took[0]], x = mp->root[mp->g->t[p->order[k]]->in[0]], h = x >= 0 ? mp->iv_of[x] : -1;
        if (v >= 0 && h >= 0 && iv[h].end == k && iv[h].bytes == iv[v].bytes && ts_pass_over_input(p, mp->g, rows, k, kind, took[0])) {
            iv[v].same_as = (int)h + 1;
            continue;
        }
        for (int q = 0; q < 2 && took[q] >= 0; q++) {
            v = mp->iv_of[took[q]];
            if (v >= 0 && iv[v].start > k) iv[v].start = k;
        }
    }
}

/* A SiLU-gated product's backward, the Silu's done at its Mul's place in
 * one pass with the Mul's (exec.c's gate_bwd_fusable), writes the Silu's
 * input's gradient in the Mul's backward step: that gradient lives from
 * there, so that the plan gives it nothing a backward step between the two
 * still uses. */
static void plan_gate_gradients(mem_plan *mp) {
    const ts_prog *p = mp->p;
    const ts_graph *g = mp->g;
    const ts_kernel_row *rows = mp->m->dev.backend->kernels;
    for (int k = 0; k < mp->L && mp->m->training; k++) {
        const ts_tensor *c = g->t[p->order[k]];
        if (c->op != TS_OP_MUL || c->n_in != 2 || !p->needs_grad[c->id]) continue;
        for (int j = 0; j < 2; j++) {
            const ts_tensor *s = g->t[c->in[j]];
            if (s->op != TS_OP_SILU || !rows[s->op].fuses_gate || !ts_shape_equal(&p->shape[s->id], &p->shape[c->id]) ||
                !ts_shape_equal(&p->shape[c->in[1 - j]], &p->shape[c->id]))
                continue;
            int64_t v = mp->giv_of[s->in[0]], at = (int64_t)(2 * mp->L - 1) - mp->fwd[c->id];
            if (v >= 0 && mp->iv[v].start > at) mp->iv[v].start = at;
        }
    }
}

/* The two arenas laid out and allocated; each activation's entry (and a
 * view's, and a shared gradient's) pointed into its own. */
static ts_status plan_arenas(mem_plan *mp) {
    const ts_model_def *m = mp->m;
    ts_prog *p = mp->p;
    const ts_graph *g = mp->g;
    const bool alloc = mp->alloc;
    const ts_interval *iv = mp->iv;
    size_t unplanned = 0;
    for (int k = 0; k < mp->n_iv; k++) unplanned += (iv[k].bytes + 63) / 64 * 64;
    size_t act_bytes = ts_memplan(mp->iv, mp->n_iv), grads_bytes = mp->grads_bytes;
    ts_status st = TS_OK;
    if (act_bytes == (size_t)-1) st = TS_ERR_OUT_OF_MEMORY;
    if (!st && alloc && ((st = budget(p, act_bytes, "the activations' arena")) || (st = budget(p, grads_bytes, "the gradients' arena"))))
        return st;
    if (!st && alloc && act_bytes) st = device_alloc(m, act_bytes, &p->arena_activations);
    if (!st && alloc && grads_bytes) st = device_alloc(m, grads_bytes, &p->arena_grads);
    if (st)
        return ts_error(TS_ERR_OUT_OF_MEMORY, "compile: out of memory for %zu bytes of activations and %zu of gradients", act_bytes, grads_bytes);
    p->bytes_activations = act_bytes;
    p->bytes_activations_unplanned = unplanned;
    p->bytes_grads = grads_bytes;
    for (int k = 0; alloc && k < mp->n_iv; k++) p->entries[mp->iv_entry[k]].data = p->arena_activations + iv[k].offset / sizeof(float);
    for (int k = mp->L - 1; k >= 0; k--) { /* a view's input's gradient: the view's buffer (a chain of views: from its last) */
        int c = p->order[k];
        if (p->grad_shared[c]) p->entries[p->grad_entry[g->t[c]->in[0]]].data = p->entries[p->grad_entry[c]].data;
    }
    for (int e = 0; e < p->n_entries; e++) { /* views: the reshape kernel sees out == in and copies nothing */
        ts_entry *en = &p->entries[e];
        if (en->kind == TS_KIND_VALUE && mp->root[en->node] >= 0 && mp->root[en->node] != en->node)
            en->data = p->entries[p->value_entry[mp->root[en->node]]].data;
    }
    return TS_OK;
}

/* Everything else points at fixed storage: parameters and inputs at the
 * graph's, gradients and accumulators into the gradients' arena (or an
 * Accum___ at its gradient), optimizer state at the model's. Reuses
 * last_fwd, no longer read, as node -> optimizer state index. */
static void plan_fixed_storage(mem_plan *mp) {
    const ts_model_def *m = mp->m;
    ts_prog *p = mp->p;
    const ts_graph *g = mp->g;
    int64_t *state_of = mp->last_fwd;
    for (size_t i = 0; i < mp->nn; i++) state_of[i] = -1;
    for (int q = 0; q < *m->n_state; q++) state_of[(*m->state)[q].node] = q;
    size_t goff = 0;
    for (int e = 0; e < p->n_entries; e++) {
        ts_entry *en = &p->entries[e];
        ts_tensor *t = g->t[en->node];
        if (en->data) continue;
        ts_opt_state *s = state_of[t->id] >= 0 ? &(*m->state)[state_of[t->id]] : NULL;
        switch (en->kind) {
        case TS_KIND_VALUE:
        case TS_KIND_UPDATED: en->data = t->value; break; /* params: graph storage; inputs: set per run */
        case TS_KIND_GRAD:
        case TS_KIND_ACCUM:
            if (en->kind == TS_KIND_ACCUM && mp->alias_accum) {
                en->data = p->entries[p->grad_entry[t->id]].data;
            } else {
                en->data = mp->alloc ? p->arena_grads + goff / sizeof(float) : NULL;
                goff += ((size_t)en->numel * sizeof(float) + 63) / 64 * 64;
            }
            break;
        case TS_KIND_ACCL: en->data = s ? s->accl : NULL; break;
        case TS_KIND_ACCL1: en->data = s ? s->accl1 : NULL; break;
        case TS_KIND_ACCL2: en->data = s ? s->accl2 : NULL; break;
        case TS_KIND_STEP: en->data = s ? &s->step : NULL; break;
        }
    }
}

/* Adds gradient entry e to what is zeroed before node c's backward. */
static ts_status zero_before(ts_prog *p, int c, int e) {
    int *z = ts_realloc(p->zero_before[c], (size_t)(p->n_zero_before[c] + 1) * sizeof *z);
    if (!z) return TS_ERR_OUT_OF_MEMORY;
    p->zero_before[c] = z;
    z[p->n_zero_before[c]++] = e;
    return TS_OK;
}

/* A gradient is zeroed right before the first backward that adds to it;
 * one that no backward adds to (only ops without one, a comparison, read
 * the tensor) right before its own backward reads it: 0. */
static ts_status plan_zeroing(mem_plan *mp) {
    const ts_model_def *m = mp->m;
    ts_prog *p = mp->p;
    const ts_graph *g = mp->g;
    const int64_t *last_grad = mp->last_grad;
    for (int k = mp->L - 1; k >= 0; k--) {
        int c = p->order[k];
        if (!p->needs_grad[c]) continue;
        if (last_grad[c] < 0 && c != m->loss && g->t[c]->op != TS_OP_PARAM && !p->grad_shared[c] && zero_before(p, c, p->grad_entry[c]))
            return TS_ERR_OUT_OF_MEMORY;
        const ts_tensor *ct = g->t[c];
        for (int j = 0; j < ct->n_in; j++) {
            int i = ct->in[j];
            if (!p->needs_grad[i] || g->t[i]->op == TS_OP_PARAM || p->grad_shared[c]) continue; /* a shared one holds the view's */
            bool first = last_grad[i] == k; /* no consumer later in forward order that also needs grad */
            for (int j2 = 0; j2 < j && first; j2++) first = ct->in[j2] != i; /* x*x: zero once */
            if (first && zero_before(p, c, p->grad_entry[i])) return TS_ERR_OUT_OF_MEMORY;
        }
    }
    return TS_OK;
}

/* The ops that move an i64 tensor's cells (keeps_int) run as the same op
 * on pairs of 4-byte cells: their twins (backend.h's ts_cells_node). */
static ts_status plan_cells(ts_prog *p, const ts_graph *g) {
    for (int k = 0; k < p->n_order; k++) {
        const ts_tensor *t = g->t[p->order[k]];
        if (!ts_op_get(t->op)->keeps_int || t->dtype != TS_I64) continue;
        if (!p->cells_node && !(p->cells_node = ts_calloc((size_t)p->n_nodes, sizeof *p->cells_node))) return TS_ERR_OUT_OF_MEMORY;
        ts_tensor *c = ts_malloc(sizeof *c);
        if (!c) return TS_ERR_OUT_OF_MEMORY;
        p->cells_node[t->id] = c;
        if (!ts_cells_node(t, &p->shape[t->in[0]], &p->shape[t->id], c))
            return ts_error(TS_ERR_UNSUPPORTED, "compile: '%s' moves an i64 tensor of %d dimensions; i64 tensors of up to %d dimensions "
                            "are moved (reshape it to fewer first)", t->name, TS_MAX_DIMS, TS_MAX_DIMS - 1);
    }
    return TS_OK;
}

/* Per op: what it keeps from run to run (inference), its own scratch, and
 * the largest workspace any kernel asks for, shared by all. */
static ts_status plan_scratch(mem_plan *mp) {
    const ts_model_def *m = mp->m;
    ts_prog *p = mp->p;
    const ts_graph *g = mp->g;
    const bool alloc = mp->alloc;
    ts_status st;
    size_t workspace = 0;
    for (int k = 0; k < mp->L; k++) {
        int i = p->order[k];
        const ts_op_def *def = ts_op_get(g->t[i]->op);
        const ts_kernel_row *kr = &m->dev.backend->kernels[g->t[i]->op];
        if (!def->scratch_floats && !kr->workspace_floats && !kr->cache_floats) continue;
        ts_shape in[TS_MAX_INPUTS];
        ts_dtype in_dt[TS_MAX_INPUTS];
        bool held[TS_MAX_INPUTS];
        for (int j = 0; j < g->t[i]->n_in; j++) {
            int v = g->t[i]->in[j];
            in[j] = p->shape[v], held[j] = ts_op_holds_value(g->t[v]->op), in_dt[j] = p->entries[p->value_entry[v]].dtype;
        }
        size_t kept = !m->training && kr->cache_floats ? kr->cache_floats(g->t[i], in, held, &p->shape[i]) : 0;
        p->bytes_workspace += kept * sizeof(float);
        if (!alloc) kept = 0; /* planned only: counted, not allocated */
        if (kept && (st = budget(p, kept * sizeof(float), "what an op keeps from run to run"))) return st;
        if (kept && ((!p->cache && !(p->cache = ts_calloc((size_t)p->n_nodes, sizeof *p->cache))) ||
                     device_alloc(m, kept * sizeof(float), &p->cache[i])))
            return ts_error(TS_ERR_OUT_OF_MEMORY, "compile: out of memory for the %zu bytes '%s' keeps from run to run", kept * sizeof(float),
                            g->t[i]->name);
        if (kr->workspace_floats) {
            size_t w = kr->workspace_floats(in, in_dt, &p->shape[i], m->threads);
            workspace = w > workspace ? w : workspace;
        }
        if (!def->scratch_floats) continue;
        size_t nf = def->scratch_floats(in, &p->shape[i]);
        p->bytes_workspace += (nf ? nf : 1) * sizeof(float); /* planned only (plan_only): counted, not allocated */
        if (!alloc) continue;
        if ((st = budget(p, (nf ? nf : 1) * sizeof(float), "an op's scratch"))) return st;
        if (device_alloc(m, (nf ? nf : 1) * sizeof(float), &p->scratch[i])) return TS_ERR_OUT_OF_MEMORY;
    }
    if (workspace && alloc && (st = budget(p, workspace * sizeof(float), "the kernels' workspace"))) return st;
    if (workspace && alloc && device_alloc(m, workspace * sizeof(float), &p->workspace))
        return ts_error(TS_ERR_OUT_OF_MEMORY, "compile: out of memory for %zu bytes of kernel workspace", workspace * sizeof(float));
    mp->workspace = workspace;
    return TS_OK;
}

/* 16-bit cells: the f32 copies an op reading them widens them into, and
 * the f32 view the observers read. */
static ts_status plan_staging(mem_plan *mp) {
    const ts_model_def *m = mp->m;
    ts_prog *p = mp->p;
    const ts_graph *g = mp->g;
    ts_status st;
    size_t widen = 0, stage = 0;
    for (int k = 0; k < mp->L; k++) {
        const ts_tensor *c = g->t[p->order[k]];
        size_t sum = 0;
        for (int j = 0; j < c->n_in; j++) {
            const ts_entry *ie = &p->entries[p->value_entry[c->in[j]]];
            if (ts_dtype_is_half(ie->dtype)) sum += (size_t)ie->numel;
        }
        /* training: room after the copies (64-byte aligned) for the output's
         * gradient rounded to 16-bit cells, which the bf16 products' backward
         * reads (the CPU's ts_cpu_grad_room) */
        if (sum && m->training) sum = (sum + 15) / 16 * 16 + ((size_t)p->entries[p->value_entry[c->id]].numel + 1) / 2;
        widen = sum > widen ? sum : widen;
        const ts_entry *oe = &p->entries[p->value_entry[c->id]];
        if (ts_dtype_is_half(oe->dtype) && (size_t)oe->numel > stage) stage = (size_t)oe->numel;
    }
    p->bytes_workspace += (mp->workspace + widen + stage) * sizeof(float); /* planned only: counted, not allocated */
    if (!mp->alloc) return TS_OK;
    if ((widen || stage) && (st = budget(p, (widen + stage) * sizeof(float), "the f32 views of 16-bit tensors"))) return st;
    if ((widen && device_alloc(m, widen * sizeof(float), &p->widen)) || (stage && !(p->stage16 = ts_malloc(stage * sizeof(float)))))
        return ts_error(TS_ERR_OUT_OF_MEMORY, "compile: out of memory for the f32 views of 16-bit tensors (%zu values)", widen + stage);
    return TS_OK;
}

/* Buffers: activations (values and activation gradients, lifetimes planned
 * so dead buffers are reused), gradients of parameters and accumulators,
 * optimizer state (in the model, survives recompiles), parameters (graph). */
static ts_status plan_memory(const ts_model_def *m, ts_prog *p) {
    mem_plan mp = {.m = m, .p = p, .g = m->g, .L = p->n_order, .nn = (size_t)p->n_nodes, .alias_accum = accum_is_grad(m),
                   .alloc = !m->opts->plan_only};
    size_t nn = mp.nn;
    mp.fwd = ts_malloc(8 * nn * sizeof *mp.fwd);
    mp.iv = ts_calloc((size_t)p->n_entries + 1, sizeof *mp.iv);
    mp.iv_entry = ts_calloc((size_t)p->n_entries + 1, sizeof *mp.iv_entry);
    p->pass = ts_malloc((3 * (size_t)p->n_order + 1) * sizeof *p->pass);
    ts_status st = mp.fwd && mp.iv && mp.iv_entry && p->pass ? TS_OK : TS_ERR_OUT_OF_MEMORY;
    if (!st) {
        mp.last_fwd = mp.fwd + nn, mp.last_grad = mp.fwd + 2 * nn, mp.first_read = mp.fwd + 3 * nn;
        mp.root = mp.fwd + 4 * nn, mp.iv_of = mp.fwd + 5 * nn, mp.grad_users = mp.fwd + 6 * nn, mp.giv_of = mp.fwd + 7 * nn;
        plan_liveness(&mp);
        plan_view_gradients(&mp);
        plan_intervals(&mp);
        plan_passes(&mp);
        plan_gate_gradients(&mp);
        if (!(st = plan_arenas(&mp))) {
            plan_fixed_storage(&mp);
            if (!(st = plan_zeroing(&mp)) && !(st = plan_scratch(&mp)) && !(st = plan_cells(p, mp.g))) st = plan_staging(&mp);
        }
    }
    ts_free(mp.fwd);
    if (st) {
        ts_free(mp.iv), ts_free(mp.iv_entry);
        return st;
    }
    p->plan = mp.iv, p->plan_entry = mp.iv_entry, p->n_plan = mp.n_iv;
    return TS_OK;
}

static ts_status attach_anchor(const ts_model_def *m, ts_prog *p, const char *short_name, int e, ts_output_mode mode, int period) {
    ts_entry *en = &p->entries[e];
    if (mode == TS_OUTPUT_DEFAULT) {
        mode = m->opts->output_mode;
        period = m->opts->output_period;
    }
    if (mode == TS_OUTPUT_DEFAULT) mode = m->training ? TS_OUTPUT_FINAL : TS_OUTPUT_ALL;
    int64_t S = en->per_step ? p->samples_step : p->samples_mb;
    int64_t rows = 1;
    if (mode == TS_OUTPUT_ALL) rows = S;
    if (mode == TS_OUTPUT_EVERY_N) {
        if (period < 1 || S % period != 0)
            return ts_error(TS_ERR_INVALID_ARGUMENT,
                            "anchor '%s' (%s): every_n period %d must divide the %lld %s per run (D=%d, A=%d); pick a divisor of %lld",
                            short_name, en->name, period, (long long)S, en->per_step ? "steps" : "micro-batches",
                            m->opts->device_iterations, m->opts->grad_accum, (long long)S);
        rows = S / period;
    }
    if (mode == TS_OUTPUT_SUM && (ts_entry_view_dtype(en) != TS_F32 || en->dtype == TS_BOOL)) /* the sum is taken in f32 cells */
        return ts_error(TS_ERR_INVALID_ARGUMENT, "anchor '%s' (%s): the sum output mode takes float tensors; '%s' is %s (anchor it with "
                        "all, final or every_n)", short_name, en->name, en->name, ts_dtype_name(en->dtype));
    for (int k = 0; k < p->n_anchors; k++)
        if (strcmp(p->anchors[k].short_name, short_name) == 0)
            return ts_error(TS_ERR_INVALID_ARGUMENT, "duplicate anchor short name '%s'", short_name);
    int *ea = ts_realloc(en->anchors, (size_t)(en->n_anchors + 1) * sizeof *ea);
    if (!ea) return TS_ERR_OUT_OF_MEMORY;
    en->anchors = ea;
    ts_anchor *a = &p->anchors[p->n_anchors];
    memset(a, 0, sizeof *a);
    if (!(a->short_name = ts_strdup(short_name))) return TS_ERR_OUT_OF_MEMORY;
    a->entry = e;
    a->mode = mode;
    a->period = period;
    a->rows = rows;
    a->keeps_axis = mode == TS_OUTPUT_ALL || mode == TS_OUTPUT_EVERY_N;
    ea[en->n_anchors++] = p->n_anchors++;
    en->observed = true;
    return TS_OK;
}

/* The entry `name`, or, for an imported model, the entry of the tensor that
 * a file's value name (an alias) stands for, with any derived prefix kept
 * (`Gradient___/fc2/Gemm_output_0` -> `Gradient___fc2/Gemm:0`). */
static int find_entry(const ts_model_def *m, const ts_prog *p, const char *name) {
    int e = ts_prog_find(p, name);
    for (size_t k = 0; e < 0 && k < TS_ARRAY_LEN(kind_prefix); k++) {
        size_t n = strlen(kind_prefix[k]);
        if (strncmp(name, kind_prefix[k], n) != 0) continue;
        const ts_tensor *t = ts_graph_find(m->g, name + n);
        if (!t || strcmp(t->name, name + n) == 0) continue;
        char full[1024];
        snprintf(full, sizeof full, "%s%s", kind_prefix[k], t->name);
        e = ts_prog_find(p, full);
    }
    return e;
}

/* The 4-byte cells anchor k takes in the anchors' arena: its rows, rounded
 * up to 8 bytes so that the next anchor's i64 values are aligned. */
static size_t anchor_span(const ts_prog *p, int k) {
    size_t cells = (size_t)(p->anchors[k].rows * ts_entry_cells(&p->entries[p->anchors[k].entry]));
    return (cells + 1) & ~(size_t)1;
}

static ts_status resolve_anchors(const ts_model_def *m, ts_prog *p) {
    size_t cap = m->opts->n_anchors + (size_t)m->n_outputs + 1;
    for (size_t k = 0; k < m->opts->n_anchors; k++)
        if (strpbrk(m->opts->anchors[k].tensor_name, "*?[")) cap += (size_t)p->n_entries;
    if (!(p->anchors = ts_calloc(cap, sizeof *p->anchors))) return TS_ERR_OUT_OF_MEMORY;
    for (size_t k = 0; k < m->opts->n_anchors; k++) {
        const ts_anchor_spec *s = &m->opts->anchors[k];
        if (strpbrk(s->tensor_name, "*?[")) {
            int matched = 0;
            for (int e = 0; e < p->n_entries; e++) {
                if (!ts_name_matches(s->tensor_name, p->entries[e].name)) continue;
                bool dup = false;
                for (int q = 0; q < p->n_anchors; q++) dup = dup || strcmp(p->anchors[q].short_name, p->entries[e].name) == 0;
                if (dup) continue; /* already anchored by an earlier, more specific request */
                ts_status st = attach_anchor(m, p, p->entries[e].name, e, s->mode, s->period);
                if (st) return st;
                matched++;
            }
            if (!matched) return ts_prog_unknown_name(p, "anchor pattern", s->tensor_name);
            continue;
        }
        int e = find_entry(m, p, s->tensor_name);
        size_t hit = 0, found = e < 0 ? ts_name_resolve_prefix("anchor", s->tensor_name, entry_name, p, (size_t)p->n_entries, &hit) : 0;
        if (found > 1) return TS_ERR_NOT_FOUND; /* the candidates, said */
        if (found) e = (int)hit;
        if (e < 0) {
            const ts_tensor *t = ts_graph_find(m->g, s->tensor_name);
            if (t && !p->live[t->id])
                return ts_error(TS_ERR_NOT_FOUND, "anchor '%s': tensor '%s' is not computed by this model (it feeds neither the loss nor an output)",
                                s->short_name, s->tensor_name);
            return ts_prog_unknown_name(p, "anchor", s->tensor_name);
        }
        ts_status st = attach_anchor(m, p, s->short_name, e, s->mode, s->period);
        if (st) return st;
    }
    /* the loss and the outputs, under their own names, unless taken */
    int implicit[64], n_imp = 0;
    if (m->training) implicit[n_imp++] = m->loss;
    for (int k = 0; k < m->n_outputs && n_imp < 64; k++) implicit[n_imp++] = m->outputs[k];
    for (int k = 0; k < n_imp; k++) {
        const char *name = m->g->t[implicit[k]]->name;
        bool taken = false;
        for (int q = 0; q < p->n_anchors; q++) taken = taken || strcmp(p->anchors[q].short_name, name) == 0;
        if (taken) continue;
        ts_status st = attach_anchor(m, p, name, p->value_entry[implicit[k]], TS_OUTPUT_DEFAULT, 0);
        if (st) return st;
    }
    if (!(p->anchor_names = ts_calloc((size_t)p->n_anchors + 1, sizeof *p->anchor_names))) return TS_ERR_OUT_OF_MEMORY;
    for (int k = 0; k < p->n_anchors; k++) p->anchor_names[k] = p->anchors[k].short_name;
    /* each replica's rows, then with R > 1 every replica's rows as gathered
     * (by rank) and the returned arrays (replica axis after the sample axis) */
    size_t local = 0, R = (size_t)ts_opts_replicas(m->opts), K = (size_t)ts_opts_stages(m->opts);
    for (int k = 0; k < p->n_anchors; k++) local += anchor_span(p, k);
    size_t total = local * (1 + (R > 1 ? 2 * R : 0) + (K > 1 ? K : 0)); /* pipelines gather every stage's rows */
    p->bytes_anchors = total * sizeof(float);
    p->anchor_local = local;
    if (m->opts->plan_only) return TS_OK; /* laid out, not allocated */
    ts_status bst = total ? budget(p, total * sizeof(float), "the anchors' arena") : TS_OK;
    if (bst) return bst;
    if (total && !(p->arena_anchors = ts_calloc(total, sizeof(float)))) return TS_ERR_OUT_OF_MEMORY;
    if (R > 1 || K > 1) p->anchor_gathered = p->arena_anchors + local;
    size_t off = 0;
    for (int k = 0; k < p->n_anchors; k++) {
        p->anchors[k].local = p->arena_anchors + off;
        p->anchors[k].data = R > 1 ? p->arena_anchors + local * (1 + R) + off * R : p->anchors[k].local;
        off += anchor_span(p, k);
    }
    return TS_OK;
}

/* A watch that matches nothing is a typo: say so, with the closest names
 * (and, for an exact name that begins some names, the glob of them). */
ts_status ts_prog_check_watches(const ts_prog *p, const ts_options *o) {
    for (size_t k = 0; k < o->n_watches; k++) {
        const char *pat = o->watches[k].pattern;
        int hits = 0, prefixed = 0;
        for (int e = 0; e < p->n_entries; e++) {
            hits += p->entries[e].watch >= 0 && ts_name_matches(pat, p->entries[e].name);
            prefixed += ts_entry_view_dtype(&p->entries[e]) == TS_F32 && strncmp(p->entries[e].name, pat, strlen(pat)) == 0; /* what a watch takes */
        }
        if (hits) continue;
        if (!strpbrk(pat, "*?[") && prefixed)
            return ts_error(TS_ERR_NOT_FOUND, "watch '%s': no tensor is named '%s' (a name without *, ? or [ is one exact name); "
                            "'%s*' watches the %d tensors whose names begin with it", pat, pat, pat, prefixed);
        return ts_prog_unknown_name(p, "watch", pat);
    }
    return TS_OK;
}

/* Entries the optimizer step reads or writes whole: their summaries are
 * taken inside it. A parameter's gradient is what the step reads only
 * without accumulation (Accum___ then shares its buffer) and without
 * replicas (the all-reduce overwrites it before the step). */
/* Summarised inside the optimizer step, from registers: the CPU's fused
 * update. A device whose memory the host cannot read summarises after the
 * step, on the device (observe/'s ts_observe_device). */
static bool in_step(const ts_model_def *m, const ts_entry *en) {
    if (!m->training || m->g->t[en->node]->op != TS_OP_PARAM || !m->dev.backend->host_addressable) return false;
    switch (en->kind) {
    case TS_KIND_GRAD: return m->opts->grad_accum == 1 && ts_opts_replicas(m->opts) == 1;
    case TS_KIND_ACCUM:
    case TS_KIND_UPDATED:
    case TS_KIND_ACCL:
    case TS_KIND_ACCL1:
    case TS_KIND_ACCL2: return true;
    default: return false;
    }
}

static bool user_watched(const ts_model_def *m, const ts_entry *en) {
    for (size_t k = 0; k < m->opts->n_watches; k++)
        if (ts_name_matches(m->opts->watches[k].pattern, en->name)) return true;
    return false;
}

/* An entry whose values are another's (same_values) takes that one's
 * summary where it is watched for the same (observe.c's
 * reuse_same_summary), else its own from memory the plan may hand to a
 * later op before the forward's end, but an input's: the caller's for the
 * whole run (the MLP's Flatten of its input). True: not deferred. */
static bool view_not_deferred(const ts_model_def *m, const ts_prog *p, const ts_entry *en) {
    if (en->same_values < 0) return false;
    const ts_entry *in = &p->entries[en->same_values], *root = in;
    while (root->same_values >= 0) root = &p->entries[root->same_values]; /* a view of a view */
    bool shared = in->watch >= 0 && p->watch_what[in->watch] == p->watch_what[en->watch];
    return shared || m->g->t[root->node]->op != TS_OP_INPUT || root->kind != TS_KIND_VALUE;
}

/* The summaries a training step's forward pass may hand to an idle
 * worker instead of taking them on its way (observe.c's deferral): a
 * value the forward makes (an activation, an input or a view of one), f32,
 * with plain stats alone, one thread's pass (TS_SUMMARY_SPLIT_MIN), not
 * another's summary nor a view but of an input (view_not_deferred), a
 * Relu's taken in its input's pass, a stability signal or the optimizer
 * step's. On the host with workers, one pipeline stage. The plan keeps
 * the activations among them to the forward's end (up to TS_DEFER_KEEP
 * bytes), so nothing the forward writes later lands on them; their ring
 * and the threads' partials are allocated here. True: out of memory. */
static bool mark_deferrable(const ts_model_def *m, ts_prog *p) {
    if (!m->training || !m->dev.backend->host_addressable || m->threads < 2 || ts_opts_stages(m->opts) != 1) return false;
    size_t kept = 0;
    int n = 0;
    for (int e = 0; e < p->n_entries; e++) {
        ts_entry *en = &p->entries[e];
        ts_op op = m->g->t[en->node]->op;
        size_t bytes = (size_t)en->numel * sizeof(float);
        if (en->watch < 0 || en->kind != TS_KIND_VALUE || en->watch_in_step || en->relu_derived || en->stab >= 0 || view_not_deferred(m, p, en) ||
            en->dtype != TS_F32 || p->watch_what[en->watch] != TS_WATCH_STATS || en->numel >= TS_SUMMARY_SPLIT_MIN || ts_op_holds_value(op))
            continue;
        bool planned = op != TS_OP_INPUT && !en->view; /* an input's memory is the caller's for the whole run */
        if (planned && kept + bytes > TS_DEFER_KEEP) continue;
        kept += planned ? bytes : 0;
        en->deferrable = true;
        n++;
    }
    if (!n) return false;
    p->defer_ring = ts_calloc(2 * TS_DEFER_RING, sizeof *p->defer_ring);
    p->defer_parts = ts_calloc(2 * (size_t)m->threads, sizeof *p->defer_parts);
    return !p->defer_ring || !p->defer_parts;
}

static ts_status resolve_watches(const ts_model_def *m, ts_prog *p) {
    if (m->opts->n_watches == 0 && m->opts->n_stability == 0) return TS_OK;
    for (size_t k = 0; k < m->opts->n_watches; k++) { /* a name but for a module prefix: the model's name */
        char **pat = &m->opts->watches[k].pattern;
        size_t hit;
        if (strpbrk(*pat, "*?[") || ts_prog_find(p, *pat) >= 0) continue;
        size_t found = ts_name_resolve_prefix("watch", *pat, entry_name, p, (size_t)p->n_entries, &hit);
        if (found > 1) return TS_ERR_NOT_FOUND; /* the candidates, said */
        if (!found) continue;                    /* ts_model_check_watches says so */
        char *name = ts_strdup(p->entries[hit].name);
        if (!name) return TS_ERR_OUT_OF_MEMORY;
        ts_free(*pat);
        *pat = name;
    }
    /* the entries a stability row reads: watched, numbered before the
     * user's watches and not returned as rows of their own */
    bool *stab = ts_calloc((size_t)p->n_entries + 1, sizeof *stab);
    if (!stab) return TS_ERR_OUT_OF_MEMORY;
    ts_status st = ts_stab_resolve(m, p, stab);
    int n = 0;
    for (int pass = 0; pass < 2 && !st; pass++)
        for (int e = 0; e < p->n_entries; e++) {
            ts_entry *en = &p->entries[e];
            if (ts_entry_view_dtype(en) != TS_F32 || en->watch >= 0) continue;
            bool user = user_watched(m, en);
            if (pass == 0 ? stab[e] && !user : user) en->watch = n++;
            if (pass == 0 && p->stab) p->stab->n_hidden = n;
        }
    p->n_watch = n;
    int rows = p->stab ? p->stab->n_rows : 0;
    if (st || !(n + rows)) {
        ts_free(stab);
        return st;
    }
    p->watch_results = ts_calloc((size_t)(n + rows), sizeof *p->watch_results);
    p->summaries = ts_calloc((size_t)(n + rows), sizeof *p->summaries);
    p->watch_what = ts_calloc((size_t)n + 1, sizeof *p->watch_what);
    p->watch_period = ts_calloc((size_t)n + 1, sizeof *p->watch_period);
    if (!p->watch_results || !p->summaries || !p->watch_what || !p->watch_period) {
        ts_free(stab);
        return TS_ERR_OUT_OF_MEMORY;
    }
    for (int e = 0; e < p->n_entries; e++) {
        ts_entry *en = &p->entries[e];
        if (en->watch < 0) continue;
        int w = en->watch, period = 0, what = 0;
        for (size_t k = 0; k < m->opts->n_watches; k++)
            if (ts_name_matches(m->opts->watches[k].pattern, en->name)) {
                what |= m->opts->watches[k].what;
                period = period == 0 || m->opts->watches[k].period < period ? m->opts->watches[k].period : period;
            }
        if (stab[e]) {
            what |= TS_WATCH_STATS;
            period = period == 0 || p->stab->period < period ? p->stab->period : period;
        }
        p->watch_what[w] = what;
        p->watch_period[w] = period;
        p->watch_results[w] = (ts_watch_result){en->name, -1, -1, &p->summaries[w], -1, -1, -1, -1};
        en->observed = true;
        en->watch_in_step = in_step(m, en);
    }
    ts_free(stab);
    ts_stab_bind(p);
    /* A watched Relu of a watched value, both plain stats on the same
     * period: its summary is taken in its input's pass (the Relu's values
     * follow from the input's), one read of memory instead of two. On the
     * host only: a device reduces each where it lives. */
    for (size_t i = 0; i < m->g->n && m->dev.backend->host_addressable; i++) {
        const ts_tensor *t = m->g->t[i];
        if (t->op != TS_OP_RELU || p->value_entry[t->id] < 0 || p->value_entry[t->in[0]] < 0) continue;
        ts_entry *x = &p->entries[p->value_entry[t->in[0]]], *y = &p->entries[p->value_entry[t->id]];
        if (x->watch < 0 || y->watch < 0 || x->watch_in_step || y->watch_in_step || x->relu_out >= 0 || x->kind != TS_KIND_VALUE ||
            x->dtype != TS_F32 || x->numel != y->numel || x->per_step != y->per_step || p->watch_what[x->watch] != TS_WATCH_STATS ||
            p->watch_what[y->watch] != TS_WATCH_STATS || p->watch_period[x->watch] != p->watch_period[y->watch])
            continue;
        x->relu_out = p->value_entry[t->id];
        y->relu_derived = true;
    }
    mark_same_values(m, p);
    /* per-thread partial summaries, allocated here: none in the step loop */
    p->n_slots = m->threads < TS_MAX_SLOTS ? m->threads : TS_MAX_SLOTS;
    if (!(p->parts = ts_calloc((size_t)p->n_slots * TS_STEP_WATCHES, sizeof(ts_stats_partial)))) return TS_ERR_OUT_OF_MEMORY;
    /* the sums of the kernels that summarise what they write: per channel
     * (dim 1) or per sample (dim 0) */
    for (size_t i = 0; i < m->g->n && m->dev.backend->host_addressable; i++) {
        const ts_tensor *t = m->g->t[i];
        int v = p->value_entry[t->id], dim = ts_kernel_sums_dim(&m->dev.backend->kernels[t->op]);
        if (dim >= 0 && v >= 0 && p->entries[v].watch >= 0 && p->shape[t->id].ndim >= 2 && p->shape[t->id].d[dim] > p->chan_sums_n)
            p->chan_sums_n = p->shape[t->id].d[dim];
    }
    if (p->chan_sums_n && !(p->chan_sums = ts_calloc(2 * (size_t)p->chan_sums_n, sizeof *p->chan_sums))) return TS_ERR_OUT_OF_MEMORY;
    return mark_deferrable(m, p) ? TS_ERR_OUT_OF_MEMORY : TS_OK;
}

static ts_status add_link(ts_entry *en, ts_outfeed *q, const char *key) {
    ts_outfeed_link *l = ts_realloc(en->outfeeds, (size_t)(en->n_outfeeds + 1) * sizeof *l);
    if (!l) return TS_ERR_OUT_OF_MEMORY;
    en->outfeeds = l;
    l[en->n_outfeeds++] = (ts_outfeed_link){q, key};
    en->observed = true;
    return TS_OK; /* the model layer reserves the queue's slots (ts_outfeed_reserve) */
}

static ts_status resolve_outfeeds(const ts_model_def *m, ts_prog *p) {
    ts_graph *g = m->g;
    for (size_t k = 0; k < g->n_marks; k++) {
        ts_status st = add_link(&p->entries[p->value_entry[g->marks[k].tensor]], g->marks[k].q, g->marks[k].key);
        if (st) return st;
    }
    if (!m->opts->grad_q || !m->training) return TS_OK;
    for (int e = 0; e < p->n_entries; e++) {
        ts_entry *en = &p->entries[e];
        if (g->t[en->node]->op != TS_OP_PARAM) continue;
        if (en->kind != (m->opts->grad_pre_accumulated ? TS_KIND_GRAD : TS_KIND_ACCUM)) continue;
        const char *pname = g->t[en->node]->name;
        size_t n = strlen(pname) + 6;
        char *key = ts_malloc(n);
        char **keys = ts_realloc(p->keys, (size_t)(p->n_keys + 1) * sizeof *keys);
        if (!key || !keys) {
            ts_free(key);
            return TS_ERR_OUT_OF_MEMORY;
        }
        snprintf(key, n, "%s_grad", pname);
        p->keys = keys;
        p->keys[p->n_keys++] = key;
        ts_status st = add_link(en, m->opts->grad_q, key);
        if (st) return st;
    }
    return TS_OK;
}

static void mark_checks(const ts_model_def *m, ts_prog *p) {
    ts_check_numerics c = m->opts->check;
    for (int e = 0; e < p->n_entries && c != TS_CHECK_OFF; e++) {
        ts_entry *en = &p->entries[e];
        const ts_tensor *t = m->g->t[en->node];
        bool check = false;
        if (en->kind == TS_KIND_VALUE) check = t->dtype == TS_F32 && (t->op == TS_OP_INPUT || c == TS_CHECK_OP || ts_prog_is_layer_output(m->g, p, t->id));
        /* under loss scaling an Inf gradient is the scaler's: the step is skipped, the scale backs off */
        if (en->kind == TS_KIND_GRAD) check = !m->scaling && (c == TS_CHECK_OP || t->op == TS_OP_PARAM || ts_prog_is_layer_output(m->g, p, t->id));
        if (en->kind == TS_KIND_UPDATED) check = true;
        if (en->kind == TS_KIND_VALUE && t->op == TS_OP_CAST && ts_dtype_is_half(t->grid)) check = true; /* names a 16-bit overflow where it happens */
        if (ts_op_holds_value(t->op) && en->kind == TS_KIND_VALUE) check = false;
        if (en->view) check = false; /* the bytes of the model input it views, checked there */
        en->check = check;
        en->observed = en->observed || check;
    }
}

/* The roles of fusion fu's twin (ts_fusion.role) on f32 values (no
 * 16-bit copies): its result is the pass's output whatever ops make it;
 * where that is BatchMatMul(P, v) (v as the file has it: repeated for
 * grouped-query heads, say), P = Softmax over the keys, [B,H,T,S], is the
 * pass's probabilities; where the twin is built as ts_attention describes,
 * P = Softmax(MaskedFill(Scale(raw, scale), mask)) (the MaskedFill and the
 * Scale each optional: a scale of 1), raw = BatchMatMul(q, k transposed),
 * those too. A role up the chain only where every one below it holds
 * (fu->role all -1 before). */
static void twin_roles(const ts_graph *g, const ts_prog *p, const ts_tensor *att, ts_fusion *fu) {
    const ts_tensor *o = g->t[att->in[4]];
    fu->role[TS_TWIN_OUT] = o->id;
    if (o->op != TS_OP_BATCH_MATMUL || o->attr[0] || o->attr[1]) return;
    const ts_tensor *pr = g->t[o->in[0]], *x;
    const ts_shape *q = &p->shape[att->in[0]], *k = &p->shape[att->in[1]], *ps = &p->shape[pr->id];
    ts_shape scores = {4, {q->d[0], q->d[1], q->d[2], k->d[2]}};
    if (pr->op != TS_OP_SOFTMAX || (pr->iparam != -1 && pr->iparam != ps->ndim - 1) || !ts_shape_equal(ps, &scores)) return;
    fu->role[TS_TWIN_PROB] = pr->id;
    x = g->t[pr->in[0]];
    if (x->op == TS_OP_MASKED_FILL) {
        if (x->in[1] != att->in[3]) return;
        fu->role[TS_TWIN_MASKED] = x->id, fu->fill = x->fattr[0];
        x = g->t[x->in[0]];
    }
    float scale = 1.0f;
    if (x->op == TS_OP_SCALE) scale = x->fparam, fu->role[TS_TWIN_SCALED] = x->id, x = g->t[x->in[0]];
    bool raw = x->op == TS_OP_BATCH_MATMUL && !x->attr[0] && x->attr[1] && x->in[0] == att->in[0] && x->in[1] == att->in[1];
    if (!raw || scale != att->fattr[0]) { /* the scores before the softmax are not the pass's */
        fu->role[TS_TWIN_SCALED] = fu->role[TS_TWIN_MASKED] = -1;
        return;
    }
    fu->role[TS_TWIN_RAW] = x->id;
    if (!isfinite(scale) || scale == 0.0f) fu->role[TS_TWIN_SCALED] = -1; /* not the raw scores' summary scaled */
}

/* Attention nodes that carry their unfused twin (docs/backend.md, "Fused
 * attention"): the twin's ops are what the twin reads back to the node's
 * own inputs (q, k, v, the mask). The one pass may stand for them where
 * only the twin and the node read them, the only 16-bit roundings among
 * them are copies of q, k, v and the probabilities of one type (a model's
 * precision: the pass reads the values as the twin's products do,
 * ts_attention_copies) held in 16-bit cells, one pipeline stage runs them
 * all and the device has the pass; whether it runs is decided per
 * micro-batch from what is observed (exec.c). A node without a twin needs
 * the pass. */
static ts_status find_fusions(const ts_model_def *m, ts_prog *p) {
    ts_graph *g = m->g;
    bool twin_only = !m->dev.backend->attention_one_pass;
    int n = 0;
    for (int k = 0; k < p->n_order; k++) {
        const ts_tensor *t = g->t[p->order[k]];
        if (t->op != TS_OP_ATTENTION) continue;
        if (t->n_in == 5) n++;
        else if (twin_only)
            return ts_error(TS_ERR_UNSUPPORTED, "compile: '%s' (Attention) has no unfused twin and the %s device has no one-pass attention "
                            "kernel yet; build the node with its twin (ts_attention's `unfused`) or run it on the CPU", t->name, m->dev.backend->name);
    }
    if (!n) return TS_OK;
    int *mark = ts_calloc((size_t)p->n_nodes, sizeof *mark); /* 1 + the fusion whose twin a node belongs to, else 0 */
    p->fusions = ts_calloc((size_t)n, sizeof *p->fusions);
    p->skip = ts_calloc((size_t)p->n_nodes, sizeof *p->skip);
    if (!mark || !p->fusions || !p->skip) {
        ts_free(mark);
        return ts_error(TS_ERR_OUT_OF_MEMORY, "compile: out of memory");
    }
    for (int k = 0; k < p->n_order; k++) {
        const ts_tensor *t = g->t[p->order[k]];
        if (t->op != TS_OP_ATTENTION || t->n_in != 5) continue;
        int f = p->n_fusions++;
        ts_fusion *fu = &p->fusions[f];
        fu->node = t->id;
        if (twin_only) fu->why_not = "the device has no one-pass attention kernel yet";
        else if (m->opts->stages > 1) fu->why_not = "the model runs in pipeline stages";
        ts_attn_copies copies = ts_attention_copies(t);
        if (!fu->why_not && copies.why_not) fu->why_not = copies.why_not;
        else if (!fu->why_not && copies.which && !m->dev.backend->host_addressable)
            fu->why_not = "its twin's 16-bit copies are held in f32 cells on this device (the one pass reads them as 16-bit cells)";
        int stack[TS_FUSION_MAX * TS_MAX_INPUTS + 1], ns = 0;
        stack[ns++] = t->in[4];
        while (ns && !fu->why_not) {
            int c = stack[--ns];
            const ts_tensor *ct = g->t[c];
            bool own = false;
            for (int j = 0; j < 4; j++) own = own || t->in[j] == c;
            if (own || mark[c] == f + 1 || ct->op == TS_OP_INPUT || ts_op_holds_value(ct->op)) continue;
            if (mark[c]) fu->why_not = "its twin shares ops with another attention's";
            else if (fu->n_chain == TS_FUSION_MAX) fu->why_not = "its twin has more ops than the one pass stands for";
            else if (c == m->loss) fu->why_not = "its twin computes the loss";
            if (fu->why_not) break;
            mark[c] = f + 1;
            fu->chain[fu->n_chain++] = c;
            for (int j = 0; j < ct->n_in; j++) stack[ns++] = ct->in[j];
        }
    }
    for (int f = 0; f < p->n_fusions; f++) { /* the roles the one pass summarises, and room for its pairs' sums */
        ts_fusion *fu = &p->fusions[f];
        const ts_tensor *t = g->t[fu->node];
        for (int r = 0; r < TS_TWIN_ROLES; r++) fu->role[r] = -1;
        if (fu->why_not || ts_attention_copies(t).which) continue;
        twin_roles(g, p, t, fu);
        int64_t pairs = p->shape[t->in[0]].d[0] * p->shape[t->in[0]].d[1];
        p->twin_pairs = pairs > p->twin_pairs ? pairs : p->twin_pairs;
    }
    if (p->twin_pairs && !(p->twin_sums = ts_calloc((size_t)(p->twin_pairs * TS_ATT_ROLES), sizeof *p->twin_sums))) {
        ts_free(mark);
        return ts_error(TS_ERR_OUT_OF_MEMORY, "compile: out of memory");
    }
    for (int k = 0; k < p->n_order; k++) { /* an op outside a twin that reads one of its tensors: that twin runs */
        const ts_tensor *c = g->t[p->order[k]];
        for (int j = 0; j < c->n_in; j++) {
            int f = mark[c->in[j]] - 1;
            if (f >= 0 && mark[c->id] != f + 1 && c->id != p->fusions[f].node && !p->fusions[f].why_not)
                p->fusions[f].why_not = "an op outside its twin reads one of the twin's tensors";
        }
    }
    for (int q = 0; q < m->n_outputs; q++)
        if (mark[m->outputs[q]] && !p->fusions[mark[m->outputs[q]] - 1].why_not)
            p->fusions[mark[m->outputs[q]] - 1].why_not = "one of its twin's tensors is an output of the model";
    for (int e = 0; e < p->n_entries; e++) { /* a watch reading a twin's tensor for another entry (same_values) */
        int s = p->entries[e].same_values, f = s >= 0 ? mark[p->entries[s].node] - 1 : -1;
        if (f >= 0 && mark[p->entries[e].node] != f + 1 && !p->fusions[f].why_not)
            p->fusions[f].why_not = "another tensor's summary reads one of its twin's tensors";
    }
    ts_free(mark);
    return TS_OK;
}

ts_status ts_prog_build(const ts_model_def *m, ts_prog **out) {
    *out = NULL;
    ts_graph *g = m->g;
    ts_status st = ts_graph_status(g);
    if (st) return ts_error_wrap(st, "compile: the graph has an error from building it");
    ts_prog *p = ts_calloc(1, sizeof *p);
    if (!p) return TS_ERR_OUT_OF_MEMORY;
    p->backend = m->dev.backend;
    int n = p->n_nodes = (int)g->n;
    bool *requested = ts_calloc((size_t)n, sizeof *requested);
    p->shape = ts_calloc((size_t)n, sizeof *p->shape);
    p->order = ts_calloc((size_t)n, sizeof *p->order);
    p->live = ts_calloc((size_t)n, sizeof *p->live);
    p->needs_grad = ts_calloc((size_t)n, sizeof *p->needs_grad);
    p->grad_shared = ts_calloc((size_t)n, sizeof *p->grad_shared);
    p->reaches = ts_calloc((size_t)n, sizeof *p->reaches);
    p->value_entry = ts_calloc((size_t)n, sizeof *p->value_entry);
    p->grad_entry = ts_calloc((size_t)n, sizeof *p->grad_entry);
    p->zero_before = ts_calloc((size_t)n, sizeof *p->zero_before);
    p->n_zero_before = ts_calloc((size_t)n, sizeof *p->n_zero_before);
    p->scratch = ts_calloc((size_t)n, sizeof *p->scratch);
    p->op_ns = ts_calloc((size_t)n, sizeof *p->op_ns);
    p->readers = ts_calloc((size_t)n, sizeof *p->readers);
    p->bound = ts_calloc((size_t)n + 1, sizeof *p->bound);
    if (!p->bound || !requested || !p->shape || !p->order || !p->live || !p->needs_grad || !p->grad_shared || !p->reaches || !p->value_entry ||
        !p->grad_entry || !p->zero_before || !p->n_zero_before || !p->scratch || !p->op_ns || !p->readers) {
        st = TS_ERR_OUT_OF_MEMORY;
        goto fail;
    }
    p->samples_step = m->opts->device_iterations;
    p->samples_mb = (int64_t)m->opts->device_iterations * (m->training ? m->opts->grad_accum : 1);
    if ((st = live_sets(m, p, requested))) goto fail; /* structure only: shapes may be unknown */
    if ((st = infer_shapes(m, p))) goto fail;
    if (m->training && m->scaling && m->opts->stages > 1) { /* each stage would decide its own skip */
        st = ts_error(TS_ERR_UNSUPPORTED, "compile: loss scaling (f16 precision) with pipeline stages is not supported yet; use bf16, or "
                      "turn loss scaling off (ts_options_set_loss_scaling, --loss-scale off)");
        goto fail;
    }
    if (m->training && p->shape[m->loss].ndim != 0) {
        char b[96];
        st = ts_error(TS_ERR_SHAPE, "compile: the loss '%s' must be a scalar, it is %s (reduce it with ts_mean or ts_sum)",
                      g->t[m->loss]->name, ts_shape_str(&p->shape[m->loss], b, sizeof b));
        goto fail;
    }
    if ((st = requested_grads(m, p, requested))) goto fail;
    if ((st = live_sets(m, p, requested))) goto fail;
    if ((st = ts_opt_state_init(m))) goto fail;
    if ((st = build_entries(m, p))) goto fail;
    half_storage(m, p);
    if ((st = resolve_watches(m, p))) goto fail; /* before the plan: it keeps a device's watched tensors longer */
    if ((st = plan_memory(m, p))) goto fail;
    if ((st = resolve_anchors(m, p))) goto fail;
    if ((st = resolve_outfeeds(m, p))) goto fail;
    if ((st = m->ranks(m->ranks_ctx, p))) goto fail; /* the job's ranks (parallel/) */
    mark_checks(m, p);
    if ((st = find_fusions(m, p))) goto fail;
    for (int k = 0; k < p->n_order; k++)
        for (int j = 0; j < g->t[p->order[k]]->n_in; j++) p->readers[g->t[p->order[k]]->in[j]]++;
    for (int k = 0; m->opts->log_layer_shapes && k < p->n_order; k++) { /* what ts_options_set_log_layer_shapes logs */
        if (!p->layer_outs && !(p->layer_outs = ts_calloc((size_t)p->n_order, sizeof *p->layer_outs))) {
            st = TS_ERR_OUT_OF_MEMORY;
            goto fail;
        }
        if (ts_prog_is_layer_output(g, p, p->order[k])) p->layer_outs[p->n_layer_outs++] = p->order[k];
    }
    ts_lint(m, p);
    if (!(p->sorted_names = ts_calloc((size_t)p->n_entries + 1, sizeof *p->sorted_names))) {
        st = TS_ERR_OUT_OF_MEMORY;
        goto fail;
    }
    for (int e = 0; e < p->n_entries; e++) p->sorted_names[e] = p->entries[e].name;
    qsort(p->sorted_names, (size_t)p->n_entries, sizeof *p->sorted_names, cmp_names);
    for (int k = 0; k < p->n_order; k++) {
        const ts_tensor *t = g->t[p->order[k]];
        double f = ts_prog_op_flops(p, t);
        p->flops_mb += m->training && p->needs_grad[t->id] ? 3.0 * f : f;
    }
    ts_free(requested);
    *out = p;
    return TS_OK;
fail:
    ts_free(requested);
    ts_prog_free(p);
    return st;
}
