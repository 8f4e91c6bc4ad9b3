/* pipeline.c -- a pipeline stage's part of a run
 * (docs/design.md#replicas-and-pipeline-stages): the model
 * is split before the first op of each named scope into K stages, one per
 * rank. Here: the stage of every node and the tensors that cross to the next
 * stage (compile), the messages of one micro-batch (activations forward,
 * their gradients backward), the activations each micro-batch keeps between
 * its forward and its backward, and after the run every stage's parameters,
 * anchors and watch results on every rank, and the measured bubble.
 * Talks to the other ranks only through the collective table; everything
 * it exchanges is sized at compile. The schedule itself is the executor's
 * (exec.c, run_pipelined). */
#include "observe/run.h"
#include "parallel/parallel.h"

#include "core/metrics.h"
#include "graph/ops.h"

#include <stdio.h>
#include <string.h>


/* `name` is an op of scope `scope` (or of a scope nested in it). */
static bool in_scope(const char *name, const char *scope) {
    size_t n = strlen(scope);
    return strncmp(name, scope, n) == 0 && (name[n] == '/' || name[n] == '.');
}

static bool is_leaf(const ts_tensor *t) { return t->op == TS_OP_INPUT || t->op == TS_OP_PARAM || t->op == TS_OP_BUFFER; }

/* Stage of every op by the splits, then of inputs and parameters by their
 * consumers; a parameter used by two stages, or a tensor used two stages
 * later, cannot be split there. */
static ts_status assign_stages(ts_run *run, ts_prog *p, int K) {
    const ts_graph *g = run->g;
    int cur = 0;
    for (int k = 0; k < p->n_order; k++) {
        int i = p->order[k];
        p->stage[i] = -1;
        if (is_leaf(g->t[i])) continue;
        if (cur < K - 1 && in_scope(g->t[i]->name, run->opts.split_at[cur])) cur++;
        p->stage[i] = cur;
    }
    if (cur < K - 1)
        return ts_error(TS_ERR_INVALID_ARGUMENT,
                        "pipeline: no op of scope '%s' comes after the split at '%s' (splits name scopes in forward order, e.g. fc2 for fc2/MatMul:0; see tensorscope names)",
                        run->opts.split_at[cur], cur ? run->opts.split_at[cur - 1] : "the start");
    for (int k = 0; k < p->n_order; k++) {
        int i = p->order[k];
        const ts_tensor *t = g->t[i];
        if (is_leaf(t)) continue;
        for (int j = 0; j < t->n_in; j++) {
            int src = t->in[j];
            const ts_tensor *s = g->t[src];
            if (is_leaf(s)) {
                if (s->op == TS_OP_PARAM && p->stage[src] >= 0 && p->stage[src] != p->stage[i])
                    return ts_error(TS_ERR_INVALID_ARGUMENT, "pipeline: parameter '%s' is used by stages %d and %d; split elsewhere", s->name,
                                    p->stage[src], p->stage[i]);
                if (p->stage[src] < 0 || p->stage[i] < p->stage[src]) p->stage[src] = p->stage[i];
            } else if (p->stage[i] != p->stage[src] && p->stage[i] != p->stage[src] + 1) {
                return ts_error(TS_ERR_INVALID_ARGUMENT,
                                "pipeline: '%s' (stage %d) is used by '%s' (stage %d); a tensor may only cross to the next stage: split elsewhere",
                                s->name, p->stage[src], t->name, p->stage[i]);
            }
        }
    }
    return TS_OK;
}

/* The tensors stage `from` sends to stage from + 1, in node order. */
static ts_status boundary(const ts_run *run, ts_prog *p, int from, int **out, int *n, int64_t *len) {
    const ts_graph *g = run->g;
    *n = 0;
    *len = 0;
    if (from < 0) return TS_OK;
    bool *crosses = ts_calloc((size_t)p->n_nodes, sizeof *crosses);
    if (!crosses) return TS_ERR_OUT_OF_MEMORY;
    for (int k = 0; k < p->n_order; k++) {
        const ts_tensor *t = g->t[p->order[k]];
        if (is_leaf(t) || p->stage[t->id] != from + 1) continue;
        for (int j = 0; j < t->n_in; j++) /* a view of an input follows the input, which every rank has */
            if (!is_leaf(g->t[t->in[j]]) && p->stage[t->in[j]] == from && !p->entries[p->value_entry[t->in[j]]].view)
                crosses[t->in[j]] = true;
    }
    for (int i = 0; i < p->n_nodes; i++) *n += crosses[i];
    *out = ts_calloc((size_t)*n + 1, sizeof **out);
    if (!*out) {
        ts_free(crosses);
        return TS_ERR_OUT_OF_MEMORY;
    }
    *n = 0;
    for (int i = 0; i < p->n_nodes; i++)
        if (crosses[i] && g->t[i]->dtype == TS_I64) {
            ts_free(crosses);
            return ts_error(TS_ERR_UNSUPPORTED, "compile: the i64 tensor '%s' crosses from pipeline stage %d to %d, which only f32 and i32 "
                            "tensors do yet; cast it to i32 (ts_cast) before the stage's end", g->t[i]->name, from, from + 1);
        }
    for (int i = 0; i < p->n_nodes; i++)
        if (crosses[i]) {
            (*out)[(*n)++] = i;
            *len += p->entries[p->value_entry[i]].numel;
        }
    ts_free(crosses);
    return TS_OK;
}

static int64_t param_floats(const ts_run *run, const ts_prog *p) {
    int64_t n = 0;
    for (int s = 0; s < run->n_state; s++) n += p->entries[p->value_entry[run->state[s].node]].numel;
    return n;
}

/* Stage s runs w forwards first: all of them (GPipe), or K - 1 - s
 * (1F1B), and the last stage none: each backward right after its forward. */
void ts_pipeline_op(const ts_run *run, int stage, int k, bool *backward, int *a) {
    int K = ts_stages(run), A = run->training ? run->opts.grad_accum : 1;
    int w = !run->training ? A : stage == K - 1 ? 0 : run->opts.schedule == TS_PIPELINE_1F1B ? K - 1 - stage : A;
    if (w > A) w = A;
    if (k < w) { /* warm-up: forwards */
        *backward = false, *a = k;
    } else if (k < 2 * A - w) { /* steady: one forward, one backward */
        int j = k - w;
        *backward = j % 2 == 1, *a = j % 2 ? j / 2 : w + j / 2;
    } else { /* cool-down: backwards */
        *backward = true, *a = k - A;
    }
}

static void log_schedule(const ts_run *run, int K) {
    if (!ts_log_enabled(TS_LOG_DEBUG)) return;
    int A = run->training ? run->opts.grad_accum : 1, n = run->training ? 2 * A : A;
    ts_logf(TS_LOG_DEBUG, "pipeline schedule (%s, %d stages, %d micro-batches a step; F = forward, B = backward of micro-batch k; ideal bubble %.1f%%):",
            run->opts.schedule == TS_PIPELINE_1F1B ? "1F1B" : "GPipe", K, A, 100.0 * (K - 1) / (A + K - 1));
    for (int s = 0; s < K; s++) {
        char line[1024];
        size_t used = (size_t)snprintf(line, sizeof line, "  rank %d (stage %d, from %s):", s, s, s ? run->opts.split_at[s - 1] : "the inputs");
        for (int k = 0; k < n && used < sizeof line - 32; k++) {
            bool bwd;
            int a;
            ts_pipeline_op(run, s, k, &bwd, &a);
            used += (size_t)snprintf(line + used, sizeof line - used, " %c%d", bwd ? 'B' : 'F', a);
        }
        if (run->training && used < sizeof line - 8) snprintf(line + used, sizeof line - used, " step");
        ts_logf(TS_LOG_DEBUG, "%s", line);
    }
}

ts_status ts_pipeline_compile(ts_run *run, ts_prog *p) {
    int K = ts_stages(run);
    if (K == 1) return TS_OK;
    if (ts_replicas(run) > 1) return ts_error(TS_ERR_UNSUPPORTED, "replicas and pipeline stages together are not supported: use one or the other");
    const ts_collective *c = ts_collective_get();
    if (!c && !ts_dist_available())
        return ts_error(TS_ERR_UNSUPPORTED,
                        "a pipeline of %d stages needs MPI, and this tensorscope was built without it: install libopenmpi-dev and openmpi-bin (scripts/install-deps.sh test), reconfigure, and run under `mpirun -np %d`",
                        K, K);
    if (!c) return ts_error(TS_ERR_STATE, "a pipeline of %d stages needs an MPI job of %d ranks: start the program with `mpirun -np %d ...` and call ts_dist_init first", K, K, K);
    if (c->size != K)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "a pipeline of %d stages, but the MPI job has %d ranks: one stage per rank, so use `mpirun -np %d`", K, c->size, K);
    if (!(p->stage = ts_calloc((size_t)p->n_nodes, sizeof *p->stage))) return TS_ERR_OUT_OF_MEMORY;
    ts_status st = assign_stages(run, p, K);
    int s = c->rank;
    if (!st) st = boundary(run, p, s - 1, &p->bnd_in, &p->n_bnd_in, &p->len_in);
    if (!st) st = boundary(run, p, s, &p->bnd_out, &p->n_bnd_out, &p->len_out);
    if (st) return st;
    int A = run->training ? run->opts.grad_accum : 1;
    if (2 * (int64_t)A > TS_TAG_FIRST_RESERVED)
        return ts_error(TS_ERR_UNSUPPORTED, "a pipeline of %d micro-batches a step: at most %d (their messages are tagged by micro-batch)", A,
                        TS_TAG_FIRST_RESERVED / 2);
    size_t box = (size_t)(p->len_in > p->len_out ? p->len_in : p->len_out);
    p->param_floats = param_floats(run, p);
    p->inbox = ts_calloc(box + 1, sizeof(float));
    p->outbox = ts_calloc((size_t)A * (size_t)(p->len_in + p->len_out) + 1, sizeof(float));
    p->param_sync = ts_calloc((size_t)(K + 1) * (size_t)(p->param_floats + 1), sizeof(float));
    /* micro-batches between their forward and their backward at once: all
     * of them (GPipe), at most K - s (1F1B), consecutive, so a % n_keep
     * tells their slots apart */
    p->n_keep = run->opts.schedule == TS_PIPELINE_1F1B && K - s < A ? K - s : A;
    if (run->training && s < K - 1 && A > 1 && p->bytes_activations)
        p->slots = ts_calloc((size_t)p->n_keep * p->bytes_activations / sizeof(float), sizeof(float));
    if (p->n_watch) p->rep_gathered = ts_calloc((size_t)K * (size_t)p->n_watch, sizeof *p->rep_gathered);
    if ((p->n_watch && !p->rep_gathered) || !p->inbox || !p->outbox || !p->param_sync || (run->training && s < K - 1 && A > 1 && p->bytes_activations && !p->slots))
        return TS_ERR_OUT_OF_MEMORY;
    run->coll = c;
    log_schedule(run, K);
    run->dist_agreed = false;
    return ts_dist_agree(run, p);
}

/* Receives one message into p->inbox, timing the wait (the bubble). */
static ts_status receive(ts_run *run, int peer, int tag, int64_t n) {
    uint64_t t0 = ts_now_ns();
    ts_status st = run->coll->recv(peer, tag, run->prog->inbox, (size_t)n * sizeof(float), NULL, "a receive from the neighbouring stage");
    run->prog->wait_ns += ts_now_ns() - t0;
    return st;
}

ts_status ts_pipeline_recv_forward(ts_run *run, int a) {
    ts_prog *p = run->prog;
    if (!p->n_bnd_in) return TS_OK;
    ts_status st = receive(run, run->coll->rank - 1, 2 * a, p->len_in);
    if (st) return st;
    const float *x = p->inbox;
    for (int k = 0; k < p->n_bnd_in; k++) {
        ts_entry *e = &p->entries[p->value_entry[p->bnd_in[k]]];
        memcpy(e->data, x, (size_t)e->numel * sizeof(float));
        x += e->numel;
    }
    return TS_OK;
}

ts_status ts_pipeline_send_forward(ts_run *run, int a) {
    ts_prog *p = run->prog;
    if (!p->n_bnd_out) return TS_OK;
    float *box = p->outbox + (size_t)a * (size_t)p->len_out, *x = box;
    for (int k = 0; k < p->n_bnd_out; k++) {
        const ts_entry *e = &p->entries[p->value_entry[p->bnd_out[k]]];
        memcpy(x, e->data, (size_t)e->numel * sizeof(float));
        x += e->numel;
    }
    return run->coll->send_start(run->coll->rank + 1, 2 * a, box, (size_t)p->len_out * sizeof(float));
}

/* Gradients travel for the boundary tensors that have one, in the same
 * order on both sides. */
ts_status ts_pipeline_recv_backward(ts_run *run, int a) {
    ts_prog *p = run->prog;
    if (!p->n_bnd_out) return TS_OK;
    ts_status st = receive(run, run->coll->rank + 1, 2 * a + 1, p->len_out);
    if (st) return st;
    const float *x = p->inbox;
    for (int k = 0; k < p->n_bnd_out; k++) {
        int ge = p->grad_entry[p->bnd_out[k]];
        int64_t n = p->entries[p->value_entry[p->bnd_out[k]]].numel;
        if (ge >= 0) memcpy(p->entries[ge].data, x, (size_t)n * sizeof(float));
        x += n;
    }
    return TS_OK;
}

ts_status ts_pipeline_send_backward(ts_run *run, int a) {
    ts_prog *p = run->prog;
    if (!p->n_bnd_in) return TS_OK;
    int A = run->opts.grad_accum;
    float *box = p->outbox + (size_t)A * (size_t)p->len_out + (size_t)a * (size_t)p->len_in, *x = box;
    for (int k = 0; k < p->n_bnd_in; k++) {
        int ge = p->grad_entry[p->bnd_in[k]];
        int64_t n = p->entries[p->value_entry[p->bnd_in[k]]].numel;
        if (ge >= 0) memcpy(x, p->entries[ge].data, (size_t)n * sizeof(float));
        else memset(x, 0, (size_t)n * sizeof(float));
        x += n;
    }
    return run->coll->send_start(run->coll->rank - 1, 2 * a + 1, box, (size_t)p->len_in * sizeof(float));
}

void ts_pipeline_keep(ts_run *run, int a, bool restore) {
    ts_prog *p = run->prog;
    if (!p->slots) return;
    float *slot = p->slots + (size_t)(a % p->n_keep) * (p->bytes_activations / sizeof(float));
    if (restore) memcpy(p->arena_activations, slot, p->bytes_activations);
    else memcpy(slot, p->arena_activations, p->bytes_activations);
}

/* Every stage's parameters on every rank, then the anchors and watch
 * results of each tensor from the rank of its stage. */
ts_status ts_pipeline_after_run(ts_run *run, uint64_t run_ns) {
    if (!run->coll || !run->prog->stage) return TS_OK;
    ts_prog *p = run->prog;
    int K = run->coll->size, me = run->coll->rank;
    size_t P = (size_t)p->param_floats + 1; /* + this rank's idle fraction */
    float *mine = p->param_sync + (size_t)K * P, *x = mine;
    for (int s = 0; s < run->n_state; s++) {
        int64_t n = p->entries[p->value_entry[run->state[s].node]].numel;
        memcpy(x, run->g->t[run->state[s].node]->value, (size_t)n * sizeof(float));
        x += n;
    }
    *x = run_ns ? (float)((double)p->wait_ns / (double)run_ns) : 0.0f;
    p->wait_ns = 0;
    ts_status st = run->coll->allgather(mine, p->param_sync, P * sizeof(float), "the exchange of stage parameters");
    if (st) return st;
    size_t off = 0;
    double idle = 0;
    for (int s = 0; s < run->n_state; s++) {
        int node = run->state[s].node, owner = p->stage[node];
        int64_t n = p->entries[p->value_entry[node]].numel;
        if (owner >= 0 && owner != me) memcpy(run->g->t[node]->value, p->param_sync + (size_t)owner * P + off, (size_t)n * sizeof(float));
        off += (size_t)n;
    }
    for (int r = 0; r < K; r++) idle += p->param_sync[(size_t)r * P + P - 1];
    ts_metric_record_value("PipelineBubblePercent", 100.0 * idle / K);
    if (p->anchor_local) {
        if ((st = run->coll->allgather(p->arena_anchors, p->anchor_gathered, p->anchor_local * sizeof(float), "the gather of anchored tensors")))
            return st;
        for (int k = 0; k < p->n_anchors; k++) {
            const ts_anchor *a = &p->anchors[k];
            int owner = p->stage[p->entries[a->entry].node];
            size_t n = (size_t)(a->rows * p->entries[a->entry].numel), at = (size_t)(a->local - p->arena_anchors);
            if (owner >= 0 && owner != me) memcpy(a->local, p->anchor_gathered + (size_t)owner * p->anchor_local + at, n * sizeof(float));
        }
    }
    if (p->n_watch) {
        if ((st = run->coll->allgather(p->summaries, p->rep_gathered, (size_t)p->n_watch * sizeof *p->summaries, "the gather of watch summaries")))
            return st;
        for (int e = 0; e < p->n_entries; e++) {
            const ts_entry *en = &p->entries[e];
            int w = en->watch, owner = p->stage[en->node];
            if (w < 0 || owner < 0 || owner == me || run->runs % p->watch_period[w] != 0) continue;
            p->summaries[w] = p->rep_gathered[(size_t)owner * (size_t)p->n_watch + (size_t)w];
            p->watch_results[w].run = run->runs;
            p->watch_results[w].step = run->steps;
        }
    }
    return TS_OK;
}
