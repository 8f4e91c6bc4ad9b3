/* replicas.c -- a data-parallel replica's part of a run
 * (docs/design.md#replicas-and-pipeline-stages):
 * the weight checksum across ranks, the gradient all-reduce before the
 * step, and after the run every replica's anchors (a replica axis after the
 * sample axis, §4) and watch results (a row per replica and a reduced row).
 * The all-reduce overlaps the backward: each parameter's starts as soon as
 * the backward has finished its gradient (the parameter's last consumer,
 * in execution order, has added its part), while the layers below still
 * run, and the step waits for all of them before the optimizer.
 * Buffers (batch norm's running statistics) are averaged over the
 * replicas after each step, so that they too stay the same on every rank
 * and the checksum covers them.
 * Talks to the other ranks only through the collective table (src/parallel/
 * implements it); everything it exchanges is sized at compile. */
#include "observe/run.h"
#include "parallel/parallel.h"

#include "backend/backend.h"
#include "core/metrics.h"
#include "core/crc32c.h"
#include "core/stats.h"

#include <string.h>


/* The parameters the optimizer updates, in the same order on every rank. */
static bool trained(const ts_run *run, const ts_prog *p, int s) {
    int node = run->state[s].node;
    return p->live[node] && p->needs_grad[node] && !run->g->t[node]->frozen; /* a frozen one's gradient, when asked, is not averaged */
}

ts_status ts_replicas_compile(ts_run *run, ts_prog *p) {
    int R = ts_replicas(run);
    run->coll = NULL;
    if (R == 1) return TS_OK;
    const ts_collective *c = ts_collective_get();
    if (!c && !ts_dist_available())
        return ts_error(TS_ERR_UNSUPPORTED,
                        "replication %d needs MPI, and this tensorscope was built without it: install libopenmpi-dev and openmpi-bin (scripts/install-deps.sh test), reconfigure, and run under `mpirun -np %d`",
                        R, R);
    if (!c)
        return ts_error(TS_ERR_STATE, "replication %d needs an MPI job of %d ranks: start the program with `mpirun -np %d ...` and call ts_dist_init first",
                        R, R, R);
    if (c->size != R)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "replication %d, but the MPI job has %d ranks: one replica per rank, so use `mpirun -np %d` or replication %d",
                        R, c->size, R, c->size);
    size_t W = (size_t)p->n_watch, n = (size_t)R + 1;
    if (W) {
        p->rep_gathered = ts_calloc(W * (size_t)R, sizeof *p->rep_gathered);
        p->rep_summaries = ts_calloc(W * n, sizeof *p->rep_summaries);
        p->rep_results = ts_calloc(W * n, sizeof *p->rep_results);
        if (!p->rep_gathered || !p->rep_summaries || !p->rep_results) return TS_ERR_OUT_OF_MEMORY;
        for (size_t w = 0; w < W; w++)
            for (size_t r = 0; r < n; r++) {
                ts_watch_result *res = &p->rep_results[w * n + r];
                *res = p->watch_results[w];
                res->summary = &p->rep_summaries[w * n + r];
                res->replica = r < (size_t)R ? (int)r : -1;
                res->min_replica = res->max_replica = res->nonfinite_replica = -1;
            }
    }
    /* what must stay the same on every rank: the trained parameters, then
     * the buffers (running statistics), which the step averages */
    if (!(p->rep_nodes = ts_calloc((size_t)p->n_order + 1, sizeof *p->rep_nodes))) return TS_ERR_OUT_OF_MEMORY;
    for (int s = 0; s < run->n_state; s++)
        if (trained(run, p, s)) p->rep_nodes[p->n_rep_nodes++] = run->state[s].node;
    p->rep_first_buffer = p->n_rep_nodes;
    for (int k = 0; k < p->n_order; k++) {
        const ts_tensor *t = run->g->t[p->order[k]];
        if (t->op == TS_OP_BUFFER && t->dtype == TS_F32) p->rep_nodes[p->n_rep_nodes++] = t->id;
    }
    if (!(p->rep_sums = ts_calloc(n * (size_t)p->n_rep_nodes + 1, sizeof *p->rep_sums))) return TS_ERR_OUT_OF_MEMORY;
    run->coll = c;
    run->next_check = run->steps; /* check before the first run of this program */
    run->dist_agreed = false;
    return ts_dist_agree(run, p);
}

/* The rank whose checksum of what rep_nodes[k] holds is the odd one out,
 * or -1 when every rank's is the same. Against the checksum most ranks
 * share (rank 0's on a tie, so with 2 ranks rank 1 is named): of 3 or
 * more replicas, the one whose weights changed. */
static int odd_rank(const uint32_t *all, int R, int n, int k, uint32_t *usual) {
    int best = 0, best_votes = 0;
    for (int r = 0; r < R; r++) {
        int votes = 0;
        for (int q = 0; q < R; q++) votes += all[(size_t)q * (size_t)n + (size_t)k] == all[(size_t)r * (size_t)n + (size_t)k];
        if (votes > best_votes) best = r, best_votes = votes;
    }
    *usual = all[(size_t)best * (size_t)n + (size_t)k];
    for (int r = 0; r < R; r++)
        if (all[(size_t)r * (size_t)n + (size_t)k] != *usual) return r;
    return -1;
}

ts_status ts_replicas_before_run(ts_run *run) {
    if (ts_replicas(run) == 1 || !run->training || run->opts.replica_check == 0 || run->steps < run->next_check) return TS_OK;
    run->next_check = run->steps + run->opts.replica_check;
    ts_prog *p = run->prog;
    int R = run->coll->size, n = p->n_rep_nodes;
    uint32_t *mine = p->rep_sums + (size_t)R * (size_t)n, *all = p->rep_sums;
    for (int k = 0; k < n; k++) {
        int node = p->rep_nodes[k];
        mine[k] = ts_crc32c(run->g->t[node]->value, (size_t)p->entries[p->value_entry[node]].numel * sizeof(float));
    }
    ts_status st = run->coll->allgather(mine, all, (size_t)n * sizeof *mine, "the exchange of weight checksums");
    if (st) return st;
    ts_counter_add("ReplicaWeightChecks", 1);
    for (int k = 0; k < n; k++) { /* the parameters in order, then the buffers: the first that differs */
        uint32_t usual;
        int r = odd_rank(all, R, n, k, &usual);
        if (r < 0) continue;
        uint32_t odd = all[(size_t)r * (size_t)n + (size_t)k];
        const char *name = run->g->t[p->rep_nodes[k]]->name;
        if (R == 2)
            return ts_error(TS_ERR_DIST,
                            "replicas out of sync after %lld steps: rank %d's '%s' differs from rank 0's (CRC-32C %08x, rank 0 %08x); every rank must start from the same weights and buffers (same seed, or the same ts_param_set on every rank)",
                            (long long)run->steps, r, name, (unsigned)odd, (unsigned)usual);
        return ts_error(TS_ERR_DIST,
                        "replicas out of sync after %lld steps: rank %d's '%s' differs from most ranks' (CRC-32C %08x, theirs %08x); every rank must start from the same weights and buffers (same seed, or the same ts_param_set on every rank)",
                        (long long)run->steps, r, name, (unsigned)odd, (unsigned)usual);
    }
    return TS_OK;
}

ts_status ts_replicas_sync_buffers(ts_run *run) {
    ts_prog *p = run->prog;
    if (p->rep_first_buffer == p->n_rep_nodes) return TS_OK;
    uint64_t t0 = ts_now_ns();
    size_t bytes = 0;
    for (int k = p->rep_first_buffer; k < p->n_rep_nodes; k++) {
        int node = p->rep_nodes[k];
        int64_t numel = p->entries[p->value_entry[node]].numel;
        ts_status st = run->coll->allreduce_mean_start(run->g->t[node]->value, numel);
        if (st) return st;
        bytes += (size_t)numel * sizeof(float);
    }
    ts_status st = run->coll->allreduce_wait();
    if (st) return st;
    ts_metric_record("BufferAllReduceTime", (double)(ts_now_ns() - t0));
    ts_metric_record_value("BufferAllReduceBytes", (double)bytes);
    return TS_OK;
}

ts_status ts_replicas_grad_ready(ts_run *run, int node, int64_t mb) {
    ts_prog *p = run->prog;
    int A = run->opts.grad_accum, a = (int)(mb % A);
    ts_entry *acc = &p->entries[ts_prog_entry_of(p, node, TS_KIND_ACCUM)];
    if (A > 1) { /* without accumulation Accum___ is the gradient's own buffer */
        const ts_entry *grad = &p->entries[p->grad_entry[node]];
        if (a == 0) run->dev.backend->copy_on_device(run->dev.stream, acc->data, grad->data, (size_t)acc->numel * sizeof(float));
        else run->dev.backend->accumulate(run->dev.stream, acc->data, grad->data, acc->numel);
    }
    if (a != A - 1) return TS_OK;
    p->allreduce_bytes += (size_t)acc->numel * sizeof(float);
    return run->coll->allreduce_mean_start(acc->data, acc->numel);
}

ts_status ts_replicas_allreduce(ts_run *run) {
    uint64_t t0 = ts_now_ns();
    ts_status st = run->coll->allreduce_wait();
    if (st) return st;
    ts_metric_record("AllReduceTime", (double)(ts_now_ns() - t0));
    ts_metric_record_value("AllReduceBytes", (double)run->prog->allreduce_bytes);
    run->prog->allreduce_bytes = 0;
    return TS_OK;
}

/* [R][rows][T] by rank -> [rows][R][T]: the replica axis after the sample axis. */
static void place_anchors(ts_prog *p, int R) {
    for (int k = 0; k < p->n_anchors; k++) {
        const ts_anchor *a = &p->anchors[k];
        size_t numel = (size_t)ts_entry_cells(&p->entries[a->entry]), off = (size_t)(a->local - p->arena_anchors); /* 4-byte cells */
        for (int64_t row = 0; row < a->rows; row++)
            for (int r = 0; r < R; r++)
                memcpy(a->data + ((size_t)row * (size_t)R + (size_t)r) * numel,
                       p->anchor_gathered + (size_t)r * p->anchor_local + off + (size_t)row * numel, numel * sizeof(float));
    }
}

/* Rows of the watches taken this run: each replica's, then the reduced one
 * (the summary of every replica's values together: the counts of NaN and
 * Inf summed, min and max over the replicas' finite values, with the
 * replica each came from and the first replica that held a NaN or Inf). */
static void place_watches(ts_run *run, int R) {
    ts_prog *p = run->prog;
    size_t n = (size_t)R + 1;
    ts_stats_partial all, one;
    for (int w = 0; w < p->n_watch; w++) {
        if (p->watch_results[w].run != run->runs) continue;
        for (int r = 0; r <= R; r++) {
            ts_watch_result *res = &p->rep_results[(size_t)w * n + (size_t)r];
            res->run = p->watch_results[w].run;
            res->step = p->watch_results[w].step;
        }
        ts_watch_result *red = &p->rep_results[(size_t)w * n + (size_t)R];
        red->min_replica = red->max_replica = red->nonfinite_replica = -1;
        for (int r = 0; r < R; r++) {
            const ts_summary *s = &p->rep_gathered[(size_t)r * (size_t)p->n_watch + (size_t)w];
            p->rep_summaries[(size_t)w * n + (size_t)r] = *s;
            ts_stats_from_summary(s, r == 0 ? &all : &one);
            const ts_stats_partial *mine = r == 0 ? &all : &one;
            if (mine->finite > 0) { /* before the merge: `all` holds replicas 0 .. r - 1 */
                if (red->min_replica < 0 || mine->min < all.min) red->min_replica = r;
                if (red->max_replica < 0 || mine->max > all.max) red->max_replica = r;
            }
            if (red->nonfinite_replica < 0 && mine->nans + mine->pos_infs + mine->neg_infs > 0) red->nonfinite_replica = r;
            if (r > 0) ts_stats_merge(&all, &one);
        }
        ts_stats_finish(&all, &p->rep_summaries[(size_t)w * n + (size_t)R]);
    }
}

ts_status ts_replicas_after_run(ts_run *run) {
    if (ts_replicas(run) == 1) return TS_OK;
    ts_prog *p = run->prog;
    int R = run->coll->size;
    uint64_t t0 = ts_now_ns();
    size_t bytes = 0;
    if (p->anchor_local) {
        ts_status st = run->coll->allgather(p->arena_anchors, p->anchor_gathered, p->anchor_local * sizeof(float), "the gather of anchored tensors");
        if (st) return st;
        place_anchors(p, R);
        bytes += p->anchor_local * sizeof(float);
    }
    bool due = false;
    for (int w = 0; w < p->n_watch; w++) due = due || p->watch_results[w].run == run->runs;
    if (due) { /* the same on every rank: periods and run counts are */
        ts_status st = run->coll->allgather(p->summaries, p->rep_gathered, (size_t)p->n_watch * sizeof *p->summaries, "the gather of watch summaries");
        if (st) return st;
        place_watches(run, R);
        bytes += (size_t)p->n_watch * sizeof *p->summaries;
    }
    if (bytes) {
        ts_metric_record("ReplicaGatherTime", (double)(ts_now_ns() - t0));
        ts_metric_record_value("ReplicaGatherBytes", (double)bytes);
    }
    return TS_OK;
}
