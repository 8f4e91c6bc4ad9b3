/* exec.c -- runs a compiled program: D x A micro-batches of forward and
 * backward, gradient accumulation and optimizer steps. Around each kernel
 * call and the optimizer's step it runs the model's op chain
 * (core/op_chain.h: whatever observers the model layer registered), and
 * it calls the observe hook for every other tensor the moment it is
 * final. Kernels, fills, copies and
 * optimizer updates go through the model's backend (backend/backend.h).
 * Nothing here allocates and nothing here compiles: the model layer
 * (src/model/) binds the inputs and recompiles before it calls
 * ts_exec_run. */
#include "exec/exec.h"
#include "observe/observe.h"

#include "backend/backend.h"
#include "backend/ew_math.h"
#include "core/crash_note.h"
#include "core/memwatch_note.h"
#include "core/metrics.h"
#include "core/trace.h"
#include "core/op_chain.h"
#include "backend/pool.h"
#include "graph/ops.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The hook of the tensors the executor makes final outside a kernel's
 * call (the inputs, parameters, buffers, gradients and optimizer state): one
 * flag test for unobserved tensors. A kernel's output is observed by the
 * watches' hook on the op chain (observe/chain.c). */
#define OBSERVE(run, e, sample)                                                   \
    do {                                                                        \
        if ((run)->prog->entries[(e)].observed) {                                 \
            ts_status st_ = ts_observe_entry((run), (e), (sample));               \
            if (st_) return st_;                                                \
        }                                                                       \
    } while (0)

/* mb: the micro-batch of this run the kernel works on. */
static ts_kctx make_ctx(const ts_run *run, int node, int64_t mb) {
    const ts_prog *p = run->prog;
    const ts_tensor *t = run->g->t[node];
    int A = run->training ? run->opts.grad_accum : 1;
    ts_kctx k = {.node = t, .n_in = t->n_in, .pool = run->pool, .stream = run->dev.stream, .scratch = p->scratch[node], .workspace = p->workspace,
                 .cache = p->cache ? p->cache[node] : NULL, .values_gen = run->g->values_gen,
                 .out_shape = p->shape[node], .training = run->training, .tf32 = run->opts.allow_tf32, .update_state = run->training && !run->rerun,
                 /* the micro-batch's number, which random draws follow: a training model's
                  * counts its steps' micro-batches, an inference model's its runs' */
                 .iteration = (uint64_t)(run->training ? run->steps * A + mb % A : run->runs * run->opts.device_iterations + mb)};
    const ts_op_def *def = ts_op_get(t->op);
    for (int j = 0; j < t->n_in; j++) {
        int in = t->in[j];
        const ts_entry *ie = &p->entries[p->value_entry[in]];
        bool data = def->keeps_int && !ts_op_int_input(t->op, j);
        if (ie->dtype == TS_I32) k.in_int[j] = (const int32_t *)(const void *)ie->data;
        /* an op that keeps integers moves the cells as they are: its float kernel does */
        if (ie->dtype != TS_I32 || data) k.in[j] = ie->data;
        k.in_dtype[j] = ie->dtype;
        k.in_shape[j] = p->shape[in];
        k.din[j] = p->grad_entry[in] >= 0 ? p->entries[p->grad_entry[in]].data : NULL;
    }
    if (t->op == TS_OP_ATTENTION && t->n_in == 5 && p->skip && p->skip[t->in[4]]) /* its twin skipped: the one pass (docs/backend.md) */
        k.in[4] = NULL, k.din[4] = NULL;
    k.out = p->entries[p->value_entry[node]].data;
    k.out_dtype = p->entries[p->value_entry[node]].dtype;
    if (p->cells_node && p->cells_node[node]) ts_kctx_as_cells(&k, p->cells_node[node]); /* an i64 tensor's cells moved in pairs */
    k.lost = ts_lost_slot(p, p->value_entry[node]);
    k.widen = p->widen;
    if (p->grad_entry[node] >= 0) k.dout = p->entries[p->grad_entry[node]].data;
    return k;
}

/* Whether any rank of the job says yes: every rank calls it at the same
 * point with its own answer, and all get the same one (without a job, its
 * own). */
static ts_status any_rank(ts_run *run, bool mine, bool *any, const char *what) {
    *any = mine;
    if (!run->coll) return TS_OK;
    if (!run->votes) {
        run->votes = ts_calloc((size_t)run->coll->size, sizeof *run->votes); /* once per model */
        if (!run->votes) return ts_error(TS_ERR_OUT_OF_MEMORY, "run: no memory for %s", what);
    }
    int v = mine;
    ts_status st = run->coll->allgather(&v, run->votes, sizeof v, what);
    for (int r = 0; r < run->coll->size && !st; r++) *any = *any || run->votes[r];
    return st;
}

/* Before micro-batch mb (the a-th of its step): TS_ERR_CANCELLED once
 * ts_model_cancel was called. Under MPI the ranks share their flags before
 * each step, so every rank stops at the same step or none does. */
static ts_status cancel_point(ts_run *run, int64_t mb, int a) {
    if (run->prog->recorded && mb != run->prog->recorded_from) return TS_OK; /* recorded steps are done whole or not at all (exec/replay.c) */
    if (run->coll && a != 0) return TS_OK;
    bool stop;
    ts_status st = any_rank(run, atomic_load_explicit(&run->cancel, memory_order_relaxed) != 0, &stop, "the ranks' cancel flags");
    if (st) return st;
    if (!stop) return TS_OK;
    run->cancel_at = mb;
    return TS_ERR_CANCELLED;
}

/* ---- the timeline (ts_options_set_trace, core/trace.h): while tracing,
 * each op's slice is the timeline's observer on the op chain
 * (diag/op_observers.c); off, a call site is one predictable branch. */

/* The 1-based number of step d of this run (inference: of its batch). */
static int64_t trace_step_number(const ts_run *run, int64_t d) {
    return run->training ? run->steps + 1 : run->runs * run->opts.device_iterations + d + 1;
}

/* Before a step: starts the trace at the first step it covers, with room
 * for every event of the steps it covers (an open range: 1000 steps). */
static ts_status trace_step_begin(ts_run *run, int64_t step) {
    const ts_options *o = &run->opts;
    if (run->trace_done || step < o->trace_first || (o->trace_last && step > o->trace_last)) return TS_OK;
    if (!ts_trace_owned_by(run)) {
        const ts_prog *p = run->prog;
        int64_t A = run->training ? o->grad_accum : 1, threads = ts_pool_threads(run->pool);
        int64_t per_step = (3 * (int64_t)p->n_order + p->n_entries + 16) * A * (threads + 1) + 64;
        int64_t steps = o->trace_last ? o->trace_last - step + 1 : 1000, cap = (int64_t)1 << 20; /* at most about 220 MB */
        ts_status st = ts_trace_start(run, o->trace_path, steps > cap / per_step ? cap : per_step * steps, run->coll ? run->coll->rank : -1);
        if (st) return st;
    }
    ts_trace_resume(run); /* every thread's events, until the step ends */
    return TS_OK;
}

/* After a step: its slice; after the last step traced, the trace done
 * (the model layer writes its file once the run is over, model/run.c). */
static ts_status trace_step_end(ts_run *run, int64_t step, uint64_t t0) {
    if (!ts_trace_live() || !ts_trace_owned_by(run)) return TS_OK;
    ts_trace_slice(TS_TRACE_STEP, NULL, NULL, NULL, 0, step, t0, ts_now_ns());
    ts_trace_pause(run); /* other models' work between steps stays out */
    if (!run->opts.trace_last || step < run->opts.trace_last) return TS_OK;
    run->trace_done = true;
    return TS_OK;
}

/* A pipeline's message to or from another stage, as a slice. */
static ts_status trace_comm(ts_run *run, ts_status (*fn)(ts_run *, int), int a, const char *what) {
    if (!ts_trace_live()) return fn(run, a);
    uint64_t t0 = ts_now_ns();
    ts_status st = fn(run, a);
    ts_trace_slice(TS_TRACE_COMM, NULL, what, NULL, 0, a, t0, ts_now_ns());
    return st;
}

/* Which attention nodes run their one pass this micro-batch (compile.c's
 * find_fusions): those whose twin's tensors nothing observes (a watch, an
 * anchor, an outfeed, a numeric check, a held run: the flags as they are
 * now) but plain stats watches the pass takes for them; the others run
 * the twin's ops, and the log says so once. Its
 * backward follows the same choice (nothing changes the flags between). */
static void choose_fusions(ts_run *run) {
    ts_prog *p = run->prog;
    for (int f = 0; f < p->n_fusions; f++) {
        ts_fusion *fu = &p->fusions[f];
        const char *seen = NULL;
        for (int c = 0; c < fu->n_chain && !seen; c++) {
            int v = p->value_entry[fu->chain[c]], gr = p->grad_entry[fu->chain[c]];
            /* a plain stats watch on a tensor the pass summarises (observe.c's twin summaries) keeps it */
            if (p->entries[v].observed && !ts_observe_twin_summarised(run, fu, fu->chain[c])) seen = p->entries[v].name;
            else if (gr >= 0 && p->entries[gr].observed) seen = p->entries[gr].name;
        }
        bool on = !fu->why_not && !seen;
        for (int c = 0; c < fu->n_chain; c++) p->skip[fu->chain[c]] = on;
        if (on || fu->logged) continue;
        fu->logged = true;
        if (seen)
            ts_logf(TS_LOG_INFO, "'%s' runs as its unfused ops: '%s' is observed, which the one-pass attention does not compute",
                    run->g->t[fu->node]->name, seen);
        else
            ts_logf(TS_LOG_DEBUG, "'%s' runs as its unfused ops: %s", run->g->t[fu->node]->name, fu->why_not);
    }
}

/* The fusion of attention node i. */
static const ts_fusion *fusion_of(const ts_prog *p, int i) {
    for (int f = 0; f < p->n_fusions; f++)
        if (p->fusions[f].node == i) return &p->fusions[f];
    return NULL;
}

/* Whether [a, a + n) and [b, b + k) floats share memory. */
static bool overlaps(const float *a, int64_t n, const float *b, int64_t k) { return a < b + k && b < a + n; }

/* The floats n values of dtype d span where they are held: 16-bit cells
 * two a float. */
static int64_t span_floats(ts_dtype d, int64_t n) { return ts_dtype_is_half(d) ? (n + 1) / 2 : n; }

/* Whether node a runs here now: this rank's stage, not a fused attention's
 * twin that its one pass stands for. */
static bool runs_here(const ts_run *run, int a) { return ts_in_stage(run, a) && !(run->prog->skip && run->prog->skip[a]); }

/* A Linear's bias Add done in its product's output pass: node order[k] a
 * MatMul whose row fuses_bias (mk its arguments: float32 operands, or a
 * precision's 16-bit copies, which the kernel multiplies on the bf16 route
 * or widens; its product float32), node a the next in the order, an Add of
 * it and a float32 bias row [N] (or [1, N]) broadcast over its [M, N]
 * output (ts_pass_takes' TS_PASS_BIAS). Then *ac holds the
 * Add's arguments, the MatMul's kernel writes the Add's output and the
 * Add's kernel is skipped (its observers run as ever: names, watches and
 * anchors unchanged, the same float sums). The product keeps its own value
 * unless the Add writes in place, which only an unobserved product may;
 * the Add's output must not overlap what the product reads. */
static bool bias_fusable(const ts_run *run, int k, int a, int64_t mb, const ts_kctx *mk, ts_kctx *ac) {
    const ts_prog *p = run->prog;
    int i = p->order[k];
    for (int j = 0; j < 2; j++) /* float32 operands, or a precision's 16-bit copies (the product and the sum float32) */
        if (mk->in_dtype[j] != TS_F32 && !ts_dtype_is_half(mk->in_dtype[j])) return false;
    if (mk->out_dtype != TS_F32 || mk->out_shape.ndim != 2 || !mk->in[0] || !mk->in[1] || !mk->out) return false;
    *ac = make_ctx(run, a, mb);
    int64_t M = mk->out_shape.d[0], N = mk->out_shape.d[1], K = mk->in_shape[0].d[1];
    const ts_shape *b = &ac->in_shape[1], *o = &ac->out_shape;
    bool row = (b->ndim == 1 && b->d[0] == N) || (b->ndim == 2 && b->d[0] == 1 && b->d[1] == N);
    if (!row || o->ndim != 2 || o->d[0] != M || o->d[1] != N || ac->out_dtype != TS_F32 || ac->in_dtype[1] != TS_F32 || !ac->in[1] || !ac->out)
        return false;
    float *out = ac->out;
    if (out == mk->out) return !p->entries[p->value_entry[i]].observed; /* in place: the product's value becomes the sum */
    return !overlaps(out, M * N, mk->out, M * N) && !overlaps(out, M * N, mk->in[0], span_floats(mk->in_dtype[0], M * K)) &&
           !overlaps(out, M * N, mk->in[1], span_floats(mk->in_dtype[1], N * K)) && !overlaps(out, M * N, ac->in[1], N);
}

/* Whether an observer reads node i's value after its kernel ran: it is
 * observed, and not by a plain stats watch alone that the kernel (kc its
 * arguments; NULL: none asked) takes as it writes the value (observe.c's
 * kernel summaries). */
static bool read_by_observers(const ts_run *run, int i, const ts_kctx *kc) {
    return run->prog->entries[run->prog->value_entry[i]].observed && !(kc && ts_observe_kernel_sums(run, i, kc));
}

/* Whether nothing but the fused Add reads the product i of a fused
 * Linear: unobserved (read_by_observers, kc as there), not the loss nor a graph output, no other node's
 * input (the Add its one reader, compile's count; a MatMul's backward and
 * an Add's read no output: the op table's needs_output, which a fused
 * Relu's producer is asked too), no numeric check (whose report reads a
 * failed output's inputs). Then the product is not kept: the kernel writes
 * the sum alone, in the Add's output, over the bias it writes first
 * (gemm.c), one pass over the output where keeping the product took
 * three. */
static bool product_unread(const ts_run *run, int i, const ts_kctx *kc) {
    const ts_prog *p = run->prog;
    const ts_graph *g = run->g;
    if (read_by_observers(run, i, kc) || i == run->loss || run->opts.check != TS_CHECK_OFF || p->readers[i] != 1 ||
        ts_op_get(g->t[i]->op)->needs_output)
        return false;
    for (size_t o = 0; o < g->n_outputs; o++)
        if (g->outputs[o] == i) return false;
    return true;
}

/* Whether node a's backward leaves its input i's value unread (a Relu's
 * reads its output; the op table's bwd_unread_inputs), or no gradient
 * flows back through i: then a may take i's place. */
static bool follower_lets_go(const ts_run *run, int i, int a) {
    return (ts_op_get(run->g->t[a]->op)->bwd_unread_inputs & 1u) || run->prog->grad_entry[i] < 0;
}

/* Whether output `o` (n floats) of a fused output pass may be where it is:
 * apart from what the producer reads (ck's inputs) unless over_in0 and it
 * is input 0 exactly (the pass may write there element for element), and
 * from each earlier value of the pass (`prev`, of the entries `ent`, n
 * floats each) unless it is that one exactly (in place), which only an
 * unobserved value may be. */
static bool pass_output_ok(const ts_run *run, const ts_kctx *ck, const float *o, int64_t n, const float *const *prev, const int *ent,
                           int n_prev, bool over_in0) {
    for (int j = 0; j < ck->n_in; j++) {
        int64_t m = ts_shape_numel(&ck->in_shape[j]);
        if (j == 0 && over_in0 && o == ck->in[0] && m == n) continue;
        if (ck->in[j] && overlaps(o, n, ck->in[j], span_floats(ck->in_dtype[j], m))) return false;
    }
    for (int q = 0; q < n_prev; q++) {
        if (o == prev[q] && run->prog->entries[ent[q]].observed) return false;
        if (o != prev[q] && overlaps(o, n, prev[q], n)) return false;
    }
    return true;
}

/* An elementwise op done in its producer's output pass, as bias_fusable
 * does a Linear's bias: node order[k] the producer (ck its arguments),
 * node a the op (ts_pass_takes' TS_PASS_RELU or TS_PASS_UNARY: the next in
 * the order, of the producer alone), float32 both. A Relu (the producer's
 * row fuses_relu: a Conv, a BatchNorm, a LayerNorm) is written into
 * ts_kctx.relu_out; an op of ew_math.h's unary family (fuses_unary: a
 * LayerNorm) into act_out, its node in act. Then *rc holds the op's
 * arguments, the producer's kernel writes the op's output too (the op's
 * own formula over the same floats, its bits) and the op's kernel is
 * skipped, its observers run as ever. The producer keeps its own value
 * unless the op writes in place, which only an unobserved producer may
 * whose backward does not read its output (a Conv's reads its input; a
 * BatchNorm's its input and the statistics it kept; a LayerNorm's
 * likewise) and whose value the op's backward does not read
 * (follower_lets_go); the op's output must not overlap what the producer
 * reads or updates (a BatchNorm's running buffers). */
static bool pass_fusable(const ts_run *run, int k, ts_pass_kind kind, int a, int64_t mb, const ts_kctx *ck, ts_kctx *rc) {
    const ts_prog *p = run->prog;
    int i = p->order[k];
    if (ck->out_dtype != TS_F32 || !ck->out || !ck->in[0]) return false;
    for (int j = 0; j < ck->n_in; j++)
        if (ck->in[j] && ck->in_dtype[j] != TS_F32) return false;
    *rc = make_ctx(run, a, mb);
    int64_t n = ts_shape_numel(&ck->out_shape);
    if (ts_shape_numel(&rc->out_shape) != n || rc->out_dtype != TS_F32 || rc->in_dtype[0] != TS_F32 || !rc->out) return false;
    float *out = rc->out;
    if (out == ck->out) /* in place: the producer's value becomes the op's */
        return !read_by_observers(run, i, ck) && !ts_op_get(run->g->t[i]->op)->needs_output && follower_lets_go(run, i, a);
    const float *prev = ck->out;
    const ts_tensor *t = run->g->t[i];
    bool over_in0 = ts_pass_over_input(p, run->g, run->dev.backend->kernels, k, kind, a) && !p->entries[p->value_entry[t->in[0]]].observed;
    return pass_output_ok(run, ck, out, n, &prev, &p->value_entry[i], 1, over_in0);
}

/* A Linear's activation done in its product's output pass after the
 * bias: bias_fusable held for the bias Add (ac its arguments, kc's bias
 * set and its out where the kernel writes the product), node u a Relu or
 * an op of ew_math.h's unary family of the sum alone (ts_pass_takes'
 * TS_PASS_BIAS_ACT), float32. Then *rc holds u's arguments, and the
 * caller sets kc's relu_out, or act and act_out: the MatMul's kernel
 * writes u's output in each slice right after its sum (u's own formula
 * over the same floats, its bits) and u's kernel is skipped, its observers
 * run as ever. The sum is kept (a GELU's backward reads it). u's output is
 * over the sum only where the plan put it there and nothing observes the
 * sum, and u's backward does not read it (follower_lets_go); else it lies
 * apart from what the product reads, the bias, and the product and the
 * sum unless it is one of them unobserved (pass_output_ok). */
static bool bias_act_fusable(const ts_run *run, int k, int u, int64_t mb, const ts_kctx *kc, const ts_kctx *ac, ts_kctx *rc) {
    const ts_prog *p = run->prog;
    int a = run->g->t[u]->in[0];
    *rc = make_ctx(run, u, mb);
    int64_t n = ts_shape_numel(&ac->out_shape), N = ac->out_shape.d[1];
    if (ts_shape_numel(&rc->out_shape) != n || rc->out_dtype != TS_F32 || rc->in_dtype[0] != TS_F32 || !rc->out) return false;
    if (rc->out == ac->out) return !p->entries[p->value_entry[a]].observed && follower_lets_go(run, a, u);
    const float *prev[2] = {kc->out, ac->out};
    int ent[2] = {p->value_entry[p->order[k]], p->value_entry[a]};
    return !overlaps(rc->out, n, ac->in[1], N) && pass_output_ok(run, kc, rc->out, n, prev, ent, 2, false);
}

/* rc's node, a Relu or an op of the unary family, made the op kc's
 * output pass does (relu_out, or act and act_out), and counted by kind. */
static void take_activation(ts_kctx *kc, const ts_kctx *rc, int64_t n_fused[]) {
    if (rc->node->op == TS_OP_RELU) kc->relu_out = rc->out, n_fused[2]++;
    else kc->act = rc->node, kc->act_out = rc->out, n_fused[3]++;
}

/* A residual block's end done in a Conv's output pass, as pass_fusable
 * does a Relu alone: node order[k] a Conv whose row fuses_add_relu (kc its
 * arguments), took[0] the next node, an Add of it and another value of the
 * same shape (the residual, either input), took[1] the node after, a Relu
 * of that Add (ts_pass_takes' TS_PASS_ADD_RELU), float32 all. Then kc's
 * residual, residual_out and relu_out are set: the Conv's kernel writes
 * the sum and the Relu's output (the same floats added in the same pass:
 * the Add's and the Relu's bits) and both kernels are skipped, their
 * observers run as ever. The sum is not kept where the Relu alone reads it
 * (product_unread), nor the Conv's value where the Add alone reads it: the
 * kernel then writes the Relu's output alone, in place. An output kept may
 * be in place over an earlier value of the pass (the Conv's, the residual,
 * the sum) where that one is unobserved (the pass writes each after
 * reading it); otherwise it keeps its own memory, and none overlaps what
 * the Conv reads (the residual too stays apart from the Conv's output).
 * Training too: the Relu's backward reads its output, the Add's nothing,
 * the Conv's its inputs. */
static bool add_relu_fusable(const ts_run *run, int k, const int took[2], int64_t mb, ts_kctx *kc) {
    const ts_prog *p = run->prog;
    int i = p->order[k], a = took[0], r = took[1], j = run->g->t[a]->in[1] == i;
    if (kc->out_dtype != TS_F32 || !kc->out || !kc->in[0] || !kc->in[1]) return false;
    for (int q = 0; q < kc->n_in; q++)
        if (kc->in_dtype[q] != TS_F32) return false;
    ts_kctx ac = make_ctx(run, a, mb), rc = make_ctx(run, r, mb);
    const ts_shape *sh = &kc->out_shape;
    int o = 1 - j, res_node = run->g->t[a]->in[o];
    int64_t n = ts_shape_numel(sh);
    if (!ts_shape_equal(&ac.in_shape[0], sh) || !ts_shape_equal(&ac.in_shape[1], sh) || !ts_shape_equal(&ac.out_shape, sh) ||
        ac.out_dtype != TS_F32 || ac.in_dtype[o] != TS_F32 || !ac.in[o] || !ac.out || ts_shape_numel(&rc.out_shape) != n ||
        rc.out_dtype != TS_F32 || rc.in_dtype[0] != TS_F32 || !rc.out)
        return false;
    const float *res = ac.in[o];
    float *sum = rc.out == ac.out || !product_unread(run, a, NULL) ? ac.out : NULL;
    const float *prev[3] = {kc->out, res, sum};
    int ent[3] = {p->value_entry[i], p->value_entry[res_node], p->value_entry[a]};
    if (overlaps(res, n, kc->out, n) || (sum && !pass_output_ok(run, kc, sum, n, prev, ent, 2, false)) ||
        !pass_output_ok(run, kc, rc.out, n, prev, ent, sum ? 3 : 2, false))
        return false;
    kc->residual = res, kc->residual_out = sum, kc->relu_out = rc.out;
    if (kc->out != rc.out && kc->out != sum && product_unread(run, i, NULL)) { /* the Conv's value read by the Add alone: in place under them */
        if (rc.out != res) kc->out = rc.out;
        else if (sum && sum != res) kc->out = sum;
    }
    return true;
}

/* Whether node a's output lies apart from x's n floats and s's (NULL: none). */
static bool writes_apart(const ts_run *run, int a, int64_t mb, const float *x, const float *s, int64_t n) {
    ts_kctx c = make_ctx(run, a, mb);
    int64_t m = ts_shape_numel(&c.out_shape);
    return !c.out || (!overlaps(c.out, m, x, n) && !(s && overlaps(c.out, m, s, n)));
}

/* A SiLU-gated product, silu(x) * u, done in one pass: node order[k] a
 * Silu whose row fuses_gate (sc its arguments), read by one node alone, a
 * later Mul of it and another value u of its shape (no broadcast), float32
 * all. The Silu's kernel waits for the Mul's place in the order (u may be
 * computed between the two, as Llama's MLP computes up(x)) and does both
 * there: sc's gate and gate_out are set and the Mul's kernel is skipped,
 * the observers of both running as ever. The Silu's value is written late,
 * so it must be unobserved, not the loss nor a graph output, no numeric
 * check on; nothing between the two may write over x or that value (an
 * inference plan may give x's memory away once the Silu has read it); each
 * output is where an input is (in place) or apart from it, and the two
 * outputs apart. The value is kept where the Mul's backward reads it (u's
 * gradient); else (product_unread) the pass writes the product alone, out
 * set to it. Returns the Mul, or -1. */
static int gate_fusable(const ts_run *run, int k, int64_t mb, ts_kctx *sc) {
    const ts_prog *p = run->prog;
    const ts_graph *g = run->g;
    int i = p->order[k];
    if (g->t[i]->op != TS_OP_SILU || p->readers[i] != 1 || p->entries[p->value_entry[i]].observed || i == run->loss ||
        run->opts.check != TS_CHECK_OFF || ts_dtype_is_half(g->t[i]->grid) || sc->out_dtype != TS_F32 || sc->in_dtype[0] != TS_F32 || !sc->out ||
        !sc->in[0])
        return -1;
    for (size_t o = 0; o < g->n_outputs; o++)
        if (g->outputs[o] == i) return -1;
    const float *x = sc->in[0];
    float *s = sc->out;
    int64_t n = ts_shape_numel(&sc->out_shape);
    for (int q = k + 1; q < p->n_order; q++) {
        int a = p->order[q];
        const ts_tensor *t = g->t[a];
        bool skipped = !ts_in_stage(run, a) || (p->skip && p->skip[a]) || t->op == TS_OP_INPUT || ts_op_holds_value(t->op);
        if ((t->n_in < 1 || t->in[0] != i) && (t->n_in < 2 || t->in[1] != i)) { /* between the two: written apart from x and s */
            if (!skipped && !ts_op_get(t->op)->view && !writes_apart(run, a, mb, x, s, n)) return -1;
            continue;
        }
        if (skipped || t->op != TS_OP_MUL || t->n_in != 2 || t->in[0] == t->in[1] || ts_dtype_is_half(t->grid)) return -1;
        ts_kctx mc = make_ctx(run, a, mb);
        int j = t->in[0] == i ? 1 : 0;
        const float *u = mc.in[j];
        float *y = mc.out;
        if (!ts_shape_equal(&mc.in_shape[j], &sc->out_shape) || !ts_shape_equal(&mc.out_shape, &sc->out_shape) || mc.in_dtype[j] != TS_F32 ||
            mc.out_dtype != TS_F32 || !u || !y)
            return -1;
        bool keep = !product_unread(run, i, NULL) || p->grad_entry[t->in[j]] >= 0;
        if ((y != x && overlaps(y, n, x, n)) || (y != u && overlaps(y, n, u, n)) ||
            (keep && (overlaps(s, n, y, n) || overlaps(s, n, u, n) || (s != x && overlaps(s, n, x, n)))))
            return -1;
        sc->gate = u, sc->gate_out = y;
        if (!keep) sc->out = y;
        return a;
    }
    return -1;
}

static ts_status check_computed_indices(const ts_run *run, const ts_kctx *k);

static ts_status forward_ops(ts_run *run, int64_t mb);

/* The forward pass of micro-batch mb; the summaries it deferred are done
 * when it returns, failed or not. */
static ts_status forward(ts_run *run, int64_t mb) {
    ts_observe_forward_begin(run);
    ts_status st = forward_ops(run, mb);
    ts_observe_forward_end(run);
    return st;
}

static ts_status forward_ops(ts_run *run, int64_t mb) {
    ts_prog *p = run->prog;
    ts_graph *g = run->g;
    bool tr = ts_trace_live();
    uint64_t tf = tr ? ts_now_ns() : 0;
    if (p->n_fusions) choose_fusions(run);
    int fused = -1, fused2 = -1; /* the Add (Relu, Gelu, ...; a residual Add and its Relu) whose kernels the node before them ran */
    int64_t n_fused[5] = {0}; /* the ops done in a producer's output pass, by kind (fused_kind), counted once a pass */
    int gate = -1;              /* the Mul whose place a Silu's kernel waits for (gate_fusable), the Silu's arguments in gc */
    ts_kctx gc;
    for (int k = 0; k < p->n_order; k++) {
        int i = p->order[k];
        const ts_tensor *t = g->t[i];
        if (!ts_in_stage(run, i) || (p->skip && p->skip[i])) continue; /* another rank's stage; a fused attention's twin */
        if (t->op == TS_OP_INPUT) {
            OBSERVE(run, p->value_entry[i], mb);
            continue;
        }
        if (ts_op_holds_value(t->op)) continue; /* observed once per step */
        ts_kctx kc = make_ctx(run, i, mb), ac, rc;
        int relu = -1; /* the Relu the kernel writes in its output pass */
        const int *took = p->pass + 3 * k + 1; /* ts_pass_takes', planned at compile */
        ts_pass_kind pk = (ts_pass_kind)p->pass[3 * k];
        if (pk != TS_PASS_NONE && (!runs_here(run, took[0]) || (took[1] >= 0 && !runs_here(run, took[1])))) pk = TS_PASS_NONE;
        if ((pk == TS_PASS_BIAS || pk == TS_PASS_BIAS_ACT) && bias_fusable(run, k, took[0], mb, &kc, &ac)) {
            kc.bias = ac.in[1], kc.bias_out = ac.out;
            if (kc.out != ac.out && product_unread(run, i, NULL)) kc.out = ac.out;
            fused = took[0], n_fused[0]++;
            if (pk == TS_PASS_BIAS_ACT && bias_act_fusable(run, k, took[1], mb, &kc, &ac, &rc)) /* and the Linear's activation */
                take_activation(&kc, &rc, n_fused), fused2 = took[1];
        } else if (pk == TS_PASS_ADD_RELU && add_relu_fusable(run, k, took, mb, &kc)) {
            fused = took[0], fused2 = took[1], n_fused[1]++;
        } else if ((pk == TS_PASS_RELU || pk == TS_PASS_UNARY) && pass_fusable(run, k, pk, took[0], mb, &kc, &ac)) {
            take_activation(&kc, &ac, n_fused); /* the kernel writes max(0, x) into relu_out, or f(x) into act_out */
            /* the producer's value under the op's where nothing else reads it (a Relu's backward reads its own output) */
            if (kc.out != ac.out && product_unread(run, i, &kc) && follower_lets_go(run, i, took[0])) kc.out = ac.out;
            fused = took[0];
            if (kc.relu_out) relu = took[0];
        } else if (run->dev.backend->kernels[t->op].fuses_gate && i != fused && gate < 0 && (gate = gate_fusable(run, k, mb, &kc)) >= 0) {
            gc = kc, n_fused[4]++;
        }
        ts_op_call call = {i, false, mb, &kc, 0, 0, tr};
        ts_status st = check_computed_indices(run, &kc);
        if (!st) st = ts_op_chain_run(run->chain.before, run->chain.n_before, run, &call);
        if (st) return st;
        ts_att_sums twin;
        const ts_fusion *fu = t->op == TS_OP_ATTENTION && kc.n_in == 5 && !kc.in[4] ? fusion_of(p, i) : NULL; /* its one pass */
        if (fu && ts_observe_twin_begin(run, fu, mb, &twin)) kc.att_sums = &twin;
        bool sums = ts_observe_kernel_begin(run, i, relu, mb, &kc); /* the summaries its kernel takes */
        if (i == gate) run->dev.backend->kernels[gc.node->op].forward(&gc), gate = -1; /* a Silu's and its Mul's */
        else if (i != fused && i != fused2 && !kc.gate_out) run->dev.backend->kernels[t->op].forward(&kc); /* the bias Add (Relu, ...; Add and Relu): done by the node before it */
        if (kc.att_sums) ts_observe_twin_end(run, fu, mb, &twin);
        if (sums) ts_observe_kernel_end(run, i, relu, &kc);
        st = ts_op_chain_run(run->chain.after, run->chain.n_after, run, &call);
        if (st) return st;
    }
    static const char *const kinds[5] = {"BiasAdd", "AddRelu", "Relu", "Activation", "SiluMul"}; /* a residual Add and its Relu: one */
    for (int q = 0; q < 5; q++)
        if (n_fused[q]) ts_counter_add_cause("FusedOps", kinds[q], n_fused[q]);
    if (tr) ts_trace_slice(TS_TRACE_FORWARD, NULL, NULL, NULL, 0, mb, tf, ts_now_ns());
    return TS_OK;
}

/* The input of node t whose gradient (entry ge) t's backward may store
 * rather than add to, so that it needs no zeroing first: the backend's row
 * says the backward can (stores_din), the input appears once among t's
 * inputs, and the gradient is a float32 one of t's own input (not t's own
 * gradient, which no backward adds to). -1: zero it. */
static int first_store(const ts_run *run, const ts_tensor *t, int ge) {
    const ts_prog *p = run->prog;
    unsigned can = run->dev.backend->kernels[t->op].stores_din;
    int found = -1;
    for (int j = 0; j < t->n_in; j++) {
        if (p->grad_entry[t->in[j]] != ge) continue;
        if (found >= 0) return -1; /* x*x: the second adds to the first */
        found = j;
    }
    if (found < 0 || !(can >> found & 1u) || p->entries[ge].dtype != TS_F32 || ts_dtype_is_half(t->grid)) return -1;
    return found;
}

static bool entries_overlap(const ts_entry *a, const ts_entry *b) {
    const char *x = (const char *)a->data, *y = (const char *)b->data;
    size_t nx = (size_t)a->numel * ts_dtype_cell_bytes(a->dtype), ny = (size_t)b->numel * ts_dtype_cell_bytes(b->dtype);
    return x && y && x < y + ny && y < x + nx;
}

/* Whether backward step a touches nothing of entry w: the entries it
 * zeroes first, its inputs' values and gradients, its own value and
 * gradient. */
static bool bwd_step_apart(const ts_run *run, int a, const ts_entry *w) {
    const ts_prog *p = run->prog;
    const ts_tensor *t = run->g->t[a];
    int ids[2 * TS_MAX_INPUTS + 2], n = 0;
    for (int j = 0; j < t->n_in; j++) ids[n++] = p->value_entry[t->in[j]], ids[n++] = p->grad_entry[t->in[j]];
    ids[n++] = p->value_entry[a], ids[n++] = p->grad_entry[a];
    for (int q = 0; q < n; q++)
        if (ids[q] >= 0 && entries_overlap(&p->entries[ids[q]], w)) return false;
    for (int z = 0; z < p->n_zero_before[a]; z++)
        if (entries_overlap(&p->entries[p->zero_before[a][z]], w)) return false;
    return true;
}

/* The backward of a SiLU-gated product, silu(x) * u, as gate_fusable does
 * its forward: node order[k] a Mul of a Silu's value s (its input *j; read
 * by the Mul alone, so s's gradient is the Mul's part alone) and another
 * value u of its shape, float32 all. The Silu's backward runs at the
 * Mul's place, both in one pass: the Silu's zeroing first (zero_first),
 * then its kernel with the Mul's arguments (ts_kctx.gate_dout, gate,
 * gate_din, ...): u's gradient dy s as the Mul's kernel writes it, x's
 * (dy u) silu'(x), dy u as the Mul's kernel would have left s's gradient,
 * the same bits; s's gradient is neither zeroed, written nor read, and
 * the Silu's own step later runs its observers alone. The pass reads each
 * block of elements before it writes it, so u's gradient may lie over dy,
 * u or s (the Mul's backward in place). What the Silu's step writes (its
 * zeroed entries, x's gradient) is written early: it must lie apart from
 * all the Mul's step reads and writes (s's gradient aside) and from all
 * that a backward step between the two touches; the memory plan starts
 * x's gradient at the Mul's backward for this (compile.c's
 * plan_gate_gradients). Refused where s's gradient is observed
 * or checked, or the Silu's backward does not run. Returns the Silu, or -1. */
static int gate_bwd_fusable(const ts_run *run, int k, int64_t mb, int *j_out) {
    const ts_prog *p = run->prog;
    const ts_graph *g = run->g;
    int m = p->order[k];
    const ts_tensor *t = g->t[m];
    if (t->op != TS_OP_MUL || t->n_in != 2 || t->in[0] == t->in[1] || ts_dtype_is_half(t->grid) || run->opts.check != TS_CHECK_OFF ||
        p->grad_shared[m])
        return -1;
    ts_kctx kc = make_ctx(run, m, mb);
    if (!kc.dout || kc.out_dtype != TS_F32 || !ts_shape_equal(&kc.in_shape[0], &kc.out_shape) || !ts_shape_equal(&kc.in_shape[1], &kc.out_shape) ||
        kc.in_dtype[0] != TS_F32 || kc.in_dtype[1] != TS_F32 || !kc.in[0] || !kc.in[1])
        return -1;
    for (int j = 0; j < 2; j++) {
        int s = t->in[j], u = t->in[1 - j], x = g->t[s]->in[0];
        const ts_tensor *st = g->t[s];
        if (st->op != TS_OP_SILU || !run->dev.backend->kernels[st->op].fuses_gate || p->readers[s] != 1 || !p->needs_grad[s] ||
            p->grad_entry[s] < 0 || p->entries[p->grad_entry[s]].observed || p->grad_shared[s] || !ts_in_stage(run, s) ||
            (p->skip && p->skip[s]) || ts_dtype_is_half(st->grid) || x == u || p->entries[p->value_entry[x]].dtype != TS_F32)
            continue;
        /* what the pass reads, and what it writes besides the Silu's part */
        int du = p->grad_entry[u], touched[5] = {p->grad_entry[m], p->value_entry[u], p->value_entry[s], p->value_entry[x], du};
        int w[TS_MAX_INPUTS + 1], nw = 0; /* what the Silu's step writes: its zeroed entries, x's gradient */
        for (int z = 0; z < p->n_zero_before[s]; z++) w[nw++] = p->zero_before[s][z];
        if (p->grad_entry[x] >= 0) w[nw++] = p->grad_entry[x];
        bool apart = true;
        for (int z = 0; z < nw && apart; z++) {
            const ts_entry *e = &p->entries[w[z]];
            for (int r = 0; r < 5 && apart; r++) apart = !(touched[r] >= 0 && entries_overlap(&p->entries[touched[r]], e));
            for (int y = 0; y < p->n_zero_before[m] && apart; y++)
                apart = p->zero_before[m][y] == p->grad_entry[s] || !entries_overlap(&p->entries[p->zero_before[m][y]], e);
        }
        int q = k - 1;
        for (; q >= 0 && p->order[q] != s && apart; q--) {
            int a = p->order[q];
            if (p->needs_grad[a] && ts_in_stage(run, a) && !(p->skip && p->skip[a]))
                for (int z = 0; z < nw && apart; z++) apart = bwd_step_apart(run, a, &p->entries[w[z]]);
        }
        if (!apart || q < 0) continue;
        *j_out = j;
        return s;
    }
    return -1;
}

/* Backward step i's zeroing: the gradients its backward is the first to
 * add to (and its own where none adds to it) start at 0, except an
 * input's that the backward stores instead (first_store: the bits
 * returned), and entry keep (-1: none), which nothing reads. */
static unsigned zero_first(ts_run *run, int i, int keep) {
    ts_prog *p = run->prog;
    unsigned store = 0;
    for (int z = 0; z < p->n_zero_before[i]; z++) {
        ts_entry *e = &p->entries[p->zero_before[i][z]];
        ts_observe_guard(run, e);
        int j = first_store(run, run->g->t[i], p->zero_before[i][z]);
        if (j >= 0) store |= 1u << j;
        else if (p->zero_before[i][z] != keep) run->dev.backend->zero(run->dev.stream, e->data, e->numel);
    }
    return store;
}

static ts_status backward(ts_run *run, int64_t mb) {
    ts_prog *p = run->prog;
    ts_graph *g = run->g;
    bool tr = ts_trace_live();
    uint64_t tb = tr ? ts_now_ns() : 0;
    if (!p->param_grads_zero) {
        p->n_param_grads = 0;
        for (int k = 0; k < p->n_order; k++) {
            int i = p->order[k];
            if (g->t[i]->op == TS_OP_PARAM && p->needs_grad[i]) {
                ts_entry *e = &p->entries[p->grad_entry[i]];
                run->dev.backend->zero(run->dev.stream, e->data, e->numel);
                p->n_param_grads++;
            }
        }
    }
    p->param_grads_zero = false;
    bool replicas = ts_replicas(run) > 1;
    int gate = -1; /* the Silu whose backward ran at its Mul's place (gate_bwd_fusable) */
    int64_t n_gate = 0;
    for (int k = p->n_order - 1; k >= 0; k--) {
        int i = p->order[k];
        if (!p->needs_grad[i] || !ts_in_stage(run, i) || (p->skip && p->skip[i])) continue;
        const ts_tensor *t = g->t[i];
        if (i == run->loss) {
            ts_observe_guard(run, &p->entries[p->grad_entry[i]]);
            run->dev.backend->fill(run->dev.stream, p->entries[p->grad_entry[i]].data, run->scaling ? (float)run->loss_scale : 1.0f, 1);
        }
        bool gated = i == gate; /* done at its Mul's place: its observers alone run here */
        int gs = -1, gj = 0;
        if (gated) gate = -1;
        else if (t->op == TS_OP_MUL && gate < 0) gs = gate_bwd_fusable(run, k, mb, &gj);
        unsigned store = gated ? 0 : zero_first(run, i, gs >= 0 ? p->grad_entry[gs] : -1);
        if (ts_dtype_is_half(t->grid)) { /* a 16-bit tensor's gradient is one too, once every consumer added its part */
            ts_entry *ge = &p->entries[p->grad_entry[i]];
            ts_observe_guard(run, ge);
            ts_half_loss *lost = ts_lost_slot(p, p->grad_entry[i]);
            if (p->dev_lost) run->dev.backend->zero(run->dev.stream, (float *)(void *)lost, sizeof *lost / sizeof(float)); /* its 16 bytes cleared */
            else *lost = (ts_half_loss){0, 0};
            run->dev.backend->round_half(run->dev.stream, t->grid, ge->data, ge->numel, lost);
        }
        OBSERVE(run, p->grad_entry[i], mb); /* every consumer has added its part */
        if (t->op == TS_OP_PARAM && !t->frozen && replicas && !run->rerun) { /* its all-reduce can start */
            ts_status st = run->par->grad_ready(run, i, mb);
            if (st) return st;
        }
        const ts_op_def *def = ts_op_get(t->op);
        bool shared = p->grad_shared[i]; /* its input's gradient is its own: a view adds nothing, a bias Add only to the bias's */
        if (!def->has_backward || (shared && (t->op != TS_OP_ADD || p->grad_entry[t->in[1]] < 0))) continue;
        ts_kctx kc = make_ctx(run, i, mb);
        if (shared) kc.din[0] = NULL;
        kc.din_store = store;
        ts_kctx sc; /* the Silu's, where its backward and the Mul's run here in one pass */
        if (gs >= 0) {
            sc = make_ctx(run, gs, mb);
            sc.din_store = zero_first(run, gs, -1);
            sc.gate = kc.in[1 - gj], sc.gate_dout = kc.dout, sc.gate_din = kc.din[1 - gj];
            sc.gate_plus = gj == 1 || !(store & 1u); /* s's gradient: 0 + dout b (kernels.c), or dout b added to its zeros */
            sc.gate_din_store = store >> (1 - gj) & 1u, sc.gate_din_plus = gj == 0;
            gate = gs, n_gate++;
        }
        ts_op_call call = {i, true, mb, &kc, 0, 0, ts_trace_live()};
        ts_status st = ts_op_chain_run(run->chain.before, run->chain.n_before, run, &call);
        if (st) return st;
        if (gs >= 0) run->dev.backend->kernels[g->t[gs]->op].backward(&sc);
        else if (!gated) run->dev.backend->kernels[t->op].backward(&kc);
        st = ts_op_chain_run(run->chain.after, run->chain.n_after, run, &call);
        if (!st && replicas) st = run->coll->allreduce_progress();
        if (st) return st;
    }
    if (n_gate) ts_counter_add_cause("FusedOps", "SiluMulBackward", n_gate);
    if (tr) ts_trace_slice(TS_TRACE_BACKWARD, NULL, NULL, NULL, 0, mb, tb, ts_now_ns());
    return TS_OK;
}

typedef struct update_job {
    const ts_backend *be;
    void *stream;        /* the model's; TS_STREAM_THIS_THREAD where the host's pool splits the update into jobs (the CPU) */
    ts_optimizer opt; /* the parameter's optimizer this step (its own rate on the schedule) */
    ts_opt_consts consts;
    ts_opt_state *state;
    float *param;
    float *grad;
    bool clear;          /* zero the gradient once consumed (A = 1: nothing reads it again this step) */
    int64_t chunk;       /* the CPU's pieces, small enough to stay in L1; a device's: the whole */
} update_job;

/* chunks of the update small enough that the gradient is still in L1 when cleared */
#define UPDATE_CHUNK 4096

static void update_range(void *ctx, int64_t begin, int64_t end) {
    const update_job *u = ctx;
    for (int64_t c = begin; c < end; c += u->chunk) {
        int64_t e = end - c < u->chunk ? end : c + u->chunk;
        u->be->opt_update(u->stream, &u->opt, &u->consts, u->state, u->param, u->grad, c, e);
        if (u->clear) u->be->zero(u->stream, u->grad + c, e - c);
    }
}

static void update_summarised(void *ctx, int64_t begin, int64_t end, struct ts_stats_stream *gs, struct ts_stats_partial *gp,
                              struct ts_stats_stream *ps, struct ts_stats_partial *pp, double sq[4]) {
    const update_job *u = ctx;
    u->be->opt_update_summarised(&u->opt, &u->consts, u->state, u->param, u->grad, begin, end, u->clear, gs, gp, ps, pp, sq);
}

static void update_norms(void *ctx, int64_t begin, int64_t end, double sq[4]) {
    const update_job *u = ctx;
    u->be->opt_update_norms(&u->opt, &u->consts, u->state, u->param, u->grad, begin, end, u->clear, sq);
}

/* u's update as the observers take it: plain, with its summaries, with
 * the squares stability signals sum (where the backend offers them). */
static ts_step_update step_update(const ts_run *run, update_job *u) {
    return (ts_step_update){update_range, update_summarised, u, u->grad, u->param, run->dev.backend->opt_update_norms ? update_norms : NULL};
}

/* Whether optimizer state s's parameter is updated by this program (live,
 * trained, not frozen, and in this rank's pipeline stage). */
static bool updated_here(const ts_run *run, int s) {
    int node = run->state[s].node;
    return run->prog->live[node] && run->prog->needs_grad[node] && !run->g->t[node]->frozen && ts_in_stage(run, node);
}

/* Dynamic loss scaling, at the end of a step: whether a gradient the
 * optimizer would read holds an Inf or NaN (the step is then skipped and
 * the scale backs off), else the scale grows after enough good steps. In
 * a job the ranks decide together: a step one rank skips, every rank
 * skips, so their weights and scales never part. */
static ts_status skip_scaled_step(ts_run *run, bool *skip) {
    ts_prog *p = run->prog;
    bool bad = false;
    for (int s = 0; s < run->n_state && !bad; s++) {
        if (!updated_here(run, s)) continue;
        int node = run->state[s].node;
        const ts_entry *ae = &p->entries[ts_prog_entry_of(p, node, TS_KIND_ACCUM)];
        bad = run->dev.backend->has_nonfinite(run->dev.stream, ae->data, ae->numel);
    }
    ts_status st = any_rank(run, bad, &bad, "the ranks' gradient overflow flags (loss scaling)");
    if (st) return st;
    *skip = bad;
    if (bad) {
        run->loss_scale = fmax(run->loss_scale * run->opts.scale_backoff, TS_LOSS_SCALE_MIN);
        run->good_steps = 0;
        run->skipped_steps++;
        ts_counter_add("SkippedSteps", 1);
        ts_logf(TS_LOG_INFO, "step %lld skipped: a gradient overflowed; loss scale now %g", (long long)run->steps + 1, run->loss_scale);
    } else if (++run->good_steps >= run->opts.scale_interval) {
        run->loss_scale = fmin(run->loss_scale * run->opts.scale_growth, TS_LOSS_SCALE_MAX);
        run->good_steps = 0;
    }
    ts_metric_record_value("LossScale", run->loss_scale); /* the scale the next step starts at */
    return TS_OK;
}

/* Parameter state[s]'s update job (its step's constants taken: once per
 * step), its value and gradient guarded for the writes to come. */
static update_job update_begin(ts_run *run, int s, int A) {
    ts_prog *p = run->prog;
    int node = run->state[s].node, acc = ts_prog_entry_of(p, node, TS_KIND_ACCUM);
    ts_entry *ae = &p->entries[acc], *pe = &p->entries[p->value_entry[node]];
    const ts_tensor *t = run->g->t[node];
    ts_optimizer o = *ts_param_optimizer(&run->opt, t);
    if (t->has_opt) o.lr = (float)ts_lr_at(&run->sched, t->opt.lr, run->steps); /* its own base rate, on the model's schedule */
    ts_opt_consts consts = ts_opt_begin(&o, &run->state[s]); /* the host's step count */
    bool host = run->dev.backend->host_addressable; /* the host's pool splits the update into jobs, each on its own thread */
    update_job u = {.be = run->dev.backend, .stream = host ? TS_STREAM_THIS_THREAD : run->dev.stream, .opt = o, .consts = consts,
                    .state = p->dev_state ? &p->dev_state[s] : &run->state[s], .param = pe->data, .grad = ae->data, .clear = A == 1,
                    .chunk = host ? UPDATE_CHUNK : ae->numel};
    ts_observe_guard(run, pe);
    ts_observe_guard(run, ae);
    return u;
}

/* The observers of what state[s]'s update wrote: the parameter and the
 * optimizer's state. */
static ts_status update_end(ts_run *run, int s, int64_t d) {
    ts_prog *p = run->prog;
    int node = run->state[s].node;
    for (int e = ts_prog_entry_of(p, node, TS_KIND_ACCUM) + 1; e < p->n_entries && p->entries[e].node == node; e++) OBSERVE(run, e, d);
    return TS_OK;
}

/* Parameter state[s]'s update from its ready gradient, and the observers
 * of what it writes: one launch on a device; on the CPU in chunks, with
 * the summaries fused into the same pass. */
static ts_status update_param(ts_run *run, int s, int64_t d, int A) {
    ts_prog *p = run->prog;
    int node = run->state[s].node;
    update_job u = update_begin(run, s, A);
    int64_t n = p->entries[ts_prog_entry_of(p, node, TS_KIND_ACCUM)].numel;
    ts_step_update su = step_update(run, &u);
    if (run->dev.backend->host_addressable) ts_observe_step(run, node, d, &su, n);
    else update_range(&u, 0, n); /* one launch on the model's stream; its observers below */
    return update_end(run, s, d);
}

/* Parameters whose update takes no summary but those the update fuses
 * (ts_observe_step_batchable: a gradient, Accum___ and UpdatedVar___ with
 * plain stats, and the squares of stability signals), on the host: their updates are one
 * job over the pool (ts_observe_steps), each thread a run of their
 * values, where one at a time left the small ones on one thread and gave
 * each large one a hand-off of its own. Each value's update is the same
 * arithmetic either way (the optimizers are elementwise): the same bits. */
typedef struct update_batch {
    update_job u[TS_STEP_BATCH];
    int state[TS_STEP_BATCH];
    ts_step_batch steps; /* the updates of u, and what the observers summarise in them */
} update_batch;

static bool update_batchable(ts_run *run, int s, int64_t d) {
    if (!run->dev.backend->host_addressable) return false;
    return ts_observe_step_batchable(run, run->state[s].node, d);
}

/* Runs the batch's updates, then their observers in order. */
static ts_status update_batch_run(ts_run *run, update_batch *b, int64_t d) {
    if (!b->steps.n) return TS_OK;
    ts_observe_steps(run, &b->steps);
    ts_status st = TS_OK;
    for (int k = 0; k < b->steps.n && !st; k++) st = update_end(run, b->state[k], d);
    b->steps.n = 0;
    return st;
}

static ts_status accumulate_and_step(ts_run *run, int a, int64_t d) {
    ts_prog *p = run->prog;
    int A = run->opts.grad_accum;
    bool tr = ts_trace_live();
    uint64_t ta = tr ? ts_now_ns() : 0;
    for (int s = 0; s < run->n_state && ts_replicas(run) == 1; s++) { /* replicas: done in the backward */
        if (!updated_here(run, s)) continue;
        int node = run->state[s].node;
        ts_entry *grad = &p->entries[p->grad_entry[node]];
        ts_entry *acc = &p->entries[ts_prog_entry_of(p, node, TS_KIND_ACCUM)];
        if (A > 1) {
            ts_observe_guard(run, acc);
            if (a == 0) run->dev.backend->copy_on_device(run->dev.stream, acc->data, grad->data, (size_t)acc->numel * sizeof(float));
            else run->dev.backend->accumulate(run->dev.stream, acc->data, grad->data, acc->numel);
        }
    }
    if (a != A - 1) {
        if (tr) ts_trace_slice(TS_TRACE_ACCUMULATE, NULL, NULL, NULL, 0, d * A + a, ta, ts_now_ns());
        return TS_OK;
    }
    if (ts_replicas(run) > 1) { /* replicas: Accum___ becomes the mean over them (started in the backward) */
        ts_crash_set_current_op("AllReduce", "(all parameters)", NULL);
        uint64_t t0 = tr ? ts_now_ns() : 0;
        ts_status st = run->par->allreduce(run);
        if (tr) ts_trace_slice(TS_TRACE_COMM, NULL, "all-reduce", NULL, 0, d * A + a, t0, ts_now_ns());
        if (st) return st;
    }
    ts_op_call call = {TS_CALL_OPTIMIZER, false, d, NULL, 0, 0, ts_trace_live()};
    ts_status cst = ts_op_chain_run(run->chain.before, run->chain.n_before, run, &call);
    if (cst) return cst;
    double scale = run->loss_scale; /* this step's gradients carry it (the check below may grow it for the next) */
    bool skip = run->skip_update; /* the spike detector's, before the hook returned */
    const char *why = skip ? "skipped (spike)" : "skipped (loss scale)";
    run->skip_update = false;
    if (skip) ts_counter_add("SkippedSteps", 1);
    if (run->scaling && !skip) {
        ts_status st = skip_scaled_step(run, &skip);
        if (st) return st;
    }
    if (skip) { /* an Inf/NaN gradient (the scale backs off), or a spike */
        p->param_grads_zero = false; /* the next backward clears them */
        if (tr) ts_trace_slice(TS_TRACE_OPTIMIZER, NULL, why, NULL, 0, run->steps + 1, ta, ts_now_ns());
        run->steps++;
        return TS_OK;
    }
    float unscale = run->scaling ? (float)(1.0 / scale) : 1.0f;
    run->opt.lr = (float)ts_lr_at(&run->sched, run->base_lr, run->steps);
    /* a device: every gradient made ready (and its summary queued) before
     * the first update, whose write flushes the queue (ts_observe_guard): the
     * parameters, activations and gradients summarised in one launch */
    bool split = !run->dev.backend->host_addressable;
    int cleared = 0;
    update_batch batch;
    batch.steps.n = 0;
    for (int s = 0; s < run->n_state; s++) {
        if (!updated_here(run, s)) continue;
        int acc = ts_prog_entry_of(p, run->state[s].node, TS_KIND_ACCUM);
        ts_entry *ae = &p->entries[acc];
        if (A > 1 || unscale != 1.0f) { /* the mean, unscaled */
            ts_observe_guard(run, ae);
            run->dev.backend->scale(run->dev.stream, ae->data, ae->data, unscale / (float)A, ae->numel);
        }
        OBSERVE(run, acc, d);
        if (split) continue;
        cleared += A == 1;
        if (update_batchable(run, s, d)) { /* into the batch, run when full or when one that cannot join comes */
            int k = batch.steps.n;
            batch.u[k] = update_begin(run, s, A);
            batch.state[k] = s;
            ts_step_update su = step_update(run, &batch.u[k]);
            ts_observe_step_add(run, &batch.steps, run->state[s].node, d, &su, ae->numel);
            if (batch.steps.n == TS_STEP_BATCH) {
                ts_status st = update_batch_run(run, &batch, d);
                if (st) return st;
            }
            continue;
        }
        ts_status st = update_batch_run(run, &batch, d);
        if (!st) st = update_param(run, s, d, A);
        if (st) return st;
    }
    ts_status bst = update_batch_run(run, &batch, d);
    if (bst) return bst;
    for (int s = 0; split && s < run->n_state; s++) {
        if (!updated_here(run, s)) continue;
        ts_status st = update_param(run, s, d, A);
        if (st) return st;
        cleared += A == 1;
    }
    ts_observe_device_flush(run); /* the updated values and the optimizer's state */
    p->param_grads_zero = cleared == p->n_param_grads; /* else the next backward clears them */
    cst = ts_op_chain_run(run->chain.after, run->chain.n_after, run, &call);
    if (tr) ts_trace_slice(TS_TRACE_OPTIMIZER, NULL, NULL, NULL, 0, run->steps + 1, ta, call.t1 ? call.t1 : ts_now_ns());
    if (cst) return cst;
    run->steps++;
    return TS_OK;
}

/* Whether node t reads integer indices in its input 1 (labels into class
 * scores, token ids into embedding rows, a gather's indices). */
static bool reads_indices(const ts_tensor *t) {
    return t->op == TS_OP_NLL_LOSS || t->op == TS_OP_CROSS_ENTROPY || t->op == TS_OP_EMBEDDING || t->op == TS_OP_GATHER ||
           t->op == TS_OP_GATHER_ELEMENTS;
}

/* Whether t holds its input 0's values, reshaped or permuted. */
static bool same_values(const ts_tensor *t) { return t->op == TS_OP_RESHAPE || t->op == TS_OP_FLATTEN || t->op == TS_OP_PERMUTE; }

/* The tensor the indices lab were made of (through ts_cast and
 * ts_graph_indices, slices and views: GatherND's columns, a slice of the
 * labels), the first on the way that has a file's name, else where the
 * walk ends; NULL where lab is made of nothing else. */
static const ts_tensor *index_origin(const ts_run *run, const ts_tensor *lab) {
    const ts_tensor *t = lab;
    while ((t == lab || !ts_graph_alias_of(run->g, t)) &&
           (t->op == TS_OP_CONVERT || t->op == TS_OP_SLICE || same_values(t)))
        t = run->g->t[t->in[0]];
    return t == lab ? NULL : t;
}

/* The n indices y (i32, or i64: an int64 input's, checked as fed) of node
 * t (its input 1, `lab`) inside what they index (an ignore_index label is
 * allowed), else an error naming both. */
static ts_status check_indices(const ts_run *run, const ts_tensor *t, const ts_tensor *lab, const void *y, ts_dtype dt, int64_t n) {
    const ts_shape *s0 = &run->prog->shape[t->in[0]];
    bool rows = t->op != TS_OP_NLL_LOSS && t->op != TS_OP_CROSS_ENTROPY, gather = rows && t->op != TS_OP_EMBEDDING;
    int64_t C = rows ? s0->d[t->attr[0]] : s0->d[s0->ndim - 1], lo = gather ? -C : 0; /* gathers: negative from the end */
    bool ignore = t->op == TS_OP_CROSS_ENTROPY && t->attr[0];
    /* indices made of another tensor: that one named too, by its file's name where it has one */
    const ts_tensor *src = index_origin(run, lab);
    const char *src_name = src ? ts_graph_alias_of(run->g, src) ? ts_graph_alias_of(run->g, src) : src->name : NULL;
    for (int64_t i = 0; i < n; i++) {
        int64_t v = dt == TS_I64 ? ((const int64_t *)y)[i] : ((const int32_t *)y)[i];
        if ((v < lo || v >= C) && !(ignore && v == t->attr[1]))
            return ts_error(TS_ERR_INVALID_ARGUMENT, "run: '%s'[%lld] = %lld%s%s%s is not %s in [%lld, %lld) for %s", lab->name, (long long)i,
                            (long long)v, src ? " (made of '" : "", src ? src_name : "", src ? "')" : "",
                            gather ? "an index" : rows ? "a row index" : "a class index", (long long)lo, (long long)C, t->name);
    }
    return TS_OK;
}

/* An int64 graph input or constant made indices (ts_graph_indices of an
 * i64 tensor: its values, saturated to i32), whose values are checked
 * as they are fed or held, exactly. */
static bool fed_i64_indices(const ts_run *run, const ts_tensor *t) {
    if (t->op != TS_OP_CONVERT || t->attr[1] != 1) return false;
    const ts_tensor *x = run->g->t[t->in[0]];
    return (x->op == TS_OP_INPUT || x->op == TS_OP_CONST) && x->dtype == TS_I64;
}

/* The tensor whose values t's input 1 holds: through views and
 * permutations (the same values) and an int64 input's indices, else
 * itself. */
static const ts_tensor *index_source(const ts_run *run, const ts_tensor *t) {
    const ts_tensor *lab = run->g->t[t->in[1]];
    while (same_values(lab) || fed_i64_indices(run, lab))
        lab = run->g->t[lab->in[0]];
    return lab;
}

/* Labels index into class scores and token ids into embedding rows: check
 * those the run is fed or the graph holds before any kernel reads them;
 * the ones the graph computes are checked before the kernel that reads
 * them (check_computed_indices). */
static ts_status check_labels(const ts_run *run, const ts_array *const *bound) {
    const ts_prog *p = run->prog;
    for (int k = 0; k < p->n_order; k++) {
        const ts_tensor *t = run->g->t[p->order[k]];
        if (!reads_indices(t)) continue;
        const ts_tensor *lab = index_source(run, t);
        ts_status st = TS_OK;
        if (lab->op == TS_OP_INPUT && bound[lab->id])
            st = check_indices(run, t, lab, bound[lab->id]->data, bound[lab->id]->dtype, ts_array_numel(bound[lab->id]));
        else if (lab->op == TS_OP_CONST)
            st = check_indices(run, t, lab, lab->value, lab->dtype, ts_shape_numel(&lab->shape));
        if (st) return st;
    }
    return TS_OK;
}

/* Indices the graph computed (a slice of the labels, a ts_cast of i64
 * ids, integer arithmetic), checked as check_labels does before the
 * kernel that reads them, where the host reads the device's memory: an
 * index out of range is an error naming the tensor, never clamped or read
 * past the table. */
bool ts_exec_computed_indices(const ts_run *run, const ts_tensor *t) {
    if (!reads_indices(t)) return false;
    const ts_tensor *lab = index_source(run, t);
    return lab->op != TS_OP_INPUT && lab->op != TS_OP_CONST && lab->op != TS_OP_CAST_INDEX; /* checked, or clamped by its definition */
}

static ts_status check_computed_indices(const ts_run *run, const ts_kctx *k) {
    const ts_tensor *t = run->g->t[k->node->id];
    if (!k->in_int[1] || !ts_exec_computed_indices(run, t)) return TS_OK;
    int64_t n = ts_shape_numel(&k->in_shape[1]);
    if (run->dev.backend->host_addressable) return check_indices(run, t, run->g->t[t->in[1]], k->in_int[1], TS_I32, n);
    /* a device's: brought to the host first, into the program's host view
     * (made at compile for the largest entry: nothing allocated in the
     * step), a wait for the device paid only by the indices a graph computes */
    ts_prog *p = run->prog;
    if (n > p->host_view_floats)
        return ts_error(TS_ERR_INTERNAL, "run: the indices of %s (%lld) exceed the host view (%lld values)", t->name, (long long)n,
                        (long long)p->host_view_floats);
    int32_t *y = (int32_t *)(void *)p->host_view;
    run->dev.backend->copy_to_host(run->dev.stream, y, k->in_int[1], (size_t)n * sizeof *y);
    ts_status st = run->dev.backend->synchronize(run->dev.stream);
    return st ? st : check_indices(run, t, run->g->t[t->in[1]], y, TS_I32, n);
}

static void record_run_metrics(ts_run *run) {
    ts_prog *p = run->prog;
    if (p->anchor_copies) {
        ts_metric_record("TransferToHost", (double)p->anchor_ns);
        ts_metric_record_value("TransferToHostBytes", (double)p->anchor_bytes);
        ts_counter_add("AnchorsCopied", (int64_t)p->anchor_copies);
        p->anchor_ns = p->anchor_bytes = p->anchor_copies = 0;
    }
    uint64_t per_op[TS_OP_COUNT] = {0};
    for (int k = 0; k < p->n_order; k++) {
        int i = p->order[k];
        per_op[run->g->t[i]->op] += p->op_ns[i];
        p->op_ns[i] = 0;
    }
    if (p->opt_ns) ts_metric_record("OpTime.Optimizer", (double)p->opt_ns);
    p->opt_ns = 0;
    for (int op = 0; op < TS_OP_COUNT; op++) {
        if (!per_op[op]) continue;
        char name[64];
        snprintf(name, sizeof name, "OpTime.%s", ts_op_get((ts_op)op)->name);
        ts_metric_record(name, (double)per_op[op]);
    }
}

/* A check after layer outputs found a NaN/Inf: run the same micro-batch
 * again op by op, checking every tensor, to pin the op that made it. The
 * parameters have not moved (the step comes after), so this replays it. */
static ts_status confirm_op_by_op(ts_run *run, int64_t mb) {
    ts_prog *p = run->prog;
    const ts_entry *first = &p->entries[run->failed_entry];
    if (first->kind != TS_KIND_VALUE && first->kind != TS_KIND_GRAD) return TS_ERR_NUMERICS;
    char original[TS_REPORT_MAX];
    snprintf(original, sizeof original, "%s", ts_last_error());
    int first_entry = run->failed_entry;
    bool *saved = ts_malloc((size_t)p->n_entries * 2 * sizeof *saved); /* only after a failure */
    if (!saved) return ts_error(TS_ERR_NUMERICS, "%s", original);
    for (int e = 0; e < p->n_entries; e++) {
        saved[2 * e] = p->entries[e].check;
        saved[2 * e + 1] = p->entries[e].observed;
        if (ts_entry_view_dtype(&p->entries[e]) == TS_F32 && p->entries[e].kind <= TS_KIND_GRAD) p->entries[e].check = p->entries[e].observed = true;
    }
    run->rerun = true;
    ts_status st = forward(run, mb);
    if (!st && first->kind == TS_KIND_GRAD) st = backward(run, mb);
    run->rerun = false;
    for (int e = 0; e < p->n_entries; e++) {
        p->entries[e].check = saved[2 * e];
        p->entries[e].observed = saved[2 * e + 1];
    }
    ts_free(saved);
    if (st != TS_ERR_NUMERICS) {
        run->failed_entry = first_entry;
        return ts_error(TS_ERR_NUMERICS, "%s\nop by op re-execution of micro-batch %lld did not reproduce it", original, (long long)mb);
    }
    const ts_entry *culprit = &p->entries[run->failed_entry];
    bool bwd = run->failed_op >= 0; /* a gradient: the op whose backward wrote it */
    const ts_tensor *t = run->g->t[bwd ? run->failed_op : culprit->node];
    char rerun[TS_REPORT_MAX];
    snprintf(rerun, sizeof rerun, "%s", ts_last_error());
    char where[600], what[800];
    ts_tensor_where(t, where, sizeof where);
    if (bwd) snprintf(what, sizeof what, "the backward of op %s '%s', built at %s", ts_op_get(t->op)->name, t->name, where);
    else snprintf(what, sizeof what, "op %s, built at %s", ts_op_get(t->op)->name, where);
    bool same = run->failed_entry == first_entry && strcmp(rerun, original) == 0; /* the first report named it already */
    return ts_error(TS_ERR_NUMERICS, "%s\nop by op re-execution of micro-batch %lld confirms the culprit: '%s' (%s)%s%s", original,
                    (long long)mb, culprit->name, what, same ? "" : "\n", same ? "" : rerun);
}

/* Log level 5 (RETURNN's log_verbosity 5): a line per micro-batch with its
 * loss and size, as its forward pass leaves them. */
static void trace_micro_batch(ts_run *run, int a, int A) {
    const ts_prog *p = run->prog;
    int64_t B = 1;
    for (int k = 0; k < p->n_order; k++) {
        int i = p->order[k];
        if (run->g->t[i]->op == TS_OP_INPUT && p->shape[i].ndim > 0) {
            B = p->shape[i].d[0];
            break;
        }
    }
    const float *loss = ts_device_host_view(run, &p->entries[p->value_entry[run->loss]]);
    ts_memwatch_stats mw; /* the memory watcher's latest sample, while it runs */
    char mem[64] = "";
    if (ts_memwatch_running_sample(&mw) && mw.latest.rss >= 0)
        snprintf(mem, sizeof mem, " rss %.1f MiB", (double)mw.latest.rss / (1024.0 * 1024.0));
    ts_logf(TS_LOG_TRACE, "micro-batch %d/%d of step %lld: loss %.9g batch %lld%s", a + 1, A, (long long)run->steps + 1,
            loss ? (double)loss[0] : (double)NAN, (long long)B, mem);
}

/* Points the inputs at micro-batch mb of the run (this replica's slice). */
static void bind_micro_batch(ts_run *run, const ts_array *const *bound, int64_t mb) {
    ts_prog *p = run->prog;
    int64_t R = ts_replicas(run), replica = R > 1 ? run->coll->rank : 0;
    for (int k = 0; k < p->n_order; k++) {
        int i = p->order[k];
        if (run->g->t[i]->op != TS_OP_INPUT) continue;
        ts_entry *e = &p->entries[p->value_entry[i]];
        float *base = p->dev_inputs ? p->dev_inputs[i] : (float *)bound[i]->data; /* a device's copy of them */
        e->data = base + (mb * R + replica) * ts_entry_cells(e);
    }
    for (int k = 0; k < p->n_order; k++) { /* views of inputs follow them; their forward copies nothing */
        ts_entry *e = &p->entries[p->value_entry[p->order[k]]];
        if (e->view) e->data = p->entries[p->value_entry[run->g->t[p->order[k]]->in[0]]].data;
    }
}

/* The parameters are observed once per step, before its first forward. */
static ts_status observe_params(ts_run *run, int64_t d) {
    ts_prog *p = run->prog;
    for (int k = 0; k < p->n_order; k++)
        if (run->g->t[p->order[k]]->op == TS_OP_PARAM && ts_in_stage(run, p->order[k])) OBSERVE(run, p->value_entry[p->order[k]], d);
    return TS_OK;
}

/* Buffers (running statistics) as the step left them. */
static ts_status observe_buffers(ts_run *run, int64_t d) {
    ts_prog *p = run->prog;
    for (int k = 0; k < p->n_order; k++)
        if ((run->g->t[p->order[k]]->op == TS_OP_BUFFER || run->g->t[p->order[k]]->op == TS_OP_CONST) && ts_in_stage(run, p->order[k]))
            OBSERVE(run, p->value_entry[p->order[k]], d);
    return TS_OK;
}

/* Step d of the run: its A micro-batches of forward, backward and
 * accumulation, the optimizer step, and the buffers' observers. */
static ts_status run_step(ts_run *run, int64_t d) {
    const ts_array *const *bound = run->prog->bound;
    int A = run->training ? run->opts.grad_accum : 1;
    int64_t step = run->opts.trace_path ? trace_step_number(run, d) : 0;
    ts_status tst = step ? trace_step_begin(run, step) : TS_OK;
    if (tst) return tst;
    uint64_t ts0 = step ? ts_now_ns() : 0;
    for (int a = 0; a < A; a++) {
        int64_t mb = d * A + a;
        ts_status st = cancel_point(run, mb, a);
        if (st) return st;
        bind_micro_batch(run, bound, mb);
        st = a == 0 ? observe_params(run, d) : TS_OK;
        if (!st) st = forward(run, mb);
        if (!st && run->training && ts_log_enabled(TS_LOG_TRACE)) trace_micro_batch(run, a, A);
        if (!st && run->training) st = backward(run, mb);
        if (st == TS_ERR_NUMERICS && run->opts.check != TS_CHECK_OP) return confirm_op_by_op(run, mb);
        if (!st && run->training) st = accumulate_and_step(run, a, d);
        if (st) return st;
    }
    ts_status st = run->training && ts_replicas(run) > 1 ? run->par->sync_buffers(run) : TS_OK;
    if (!st) st = observe_buffers(run, d);
    ts_observe_device_flush(run); /* an inference model's parameters */
    if (run->prog->dev_outfeed) ts_observe_device_stream(run); /* the step's outfeed records, on their way while the run goes */
    if (!st && step) st = trace_step_end(run, step, ts0);
    return st;
}

/* A pipeline stage's run: each step, the forwards and backwards of its
 * micro-batches in the order of the schedule (the dist table's schedule_op: GPipe or
 * 1F1B), activations from the previous stage and to the next one, gradients
 * from the next stage and to the previous one, and after the last backward
 * the step of this stage's parameters. A micro-batch whose backward does
 * not follow its forward keeps its activations meanwhile. Sends do not
 * wait for the receiver; each step waits for its sends at its end. */
static ts_status run_pipelined(ts_run *run, const ts_array *const *bound) {
    int D = run->opts.device_iterations, A = run->training ? run->opts.grad_accum : 1, n = run->training ? 2 * A : A, me = run->coll->rank;
    for (int64_t d = 0; d < D; d++) {
        int64_t step = run->opts.trace_path ? trace_step_number(run, d) : 0;
        ts_status st = step ? trace_step_begin(run, step) : TS_OK;
        uint64_t ts0 = step ? ts_now_ns() : 0;
        if (!st) st = cancel_point(run, d * A, 0);
        if (st) return st;
        st = observe_params(run, d);
        bool bwd, was_bwd = true;
        int a, prev = -1;
        for (int k = 0; k < n && !st; k++, prev = a, was_bwd = bwd) {
            run->par->schedule_op(run, me, k, &bwd, &a);
            int64_t mb = d * A + a;
            if (run->training && !was_bwd && !(bwd && a == prev)) run->par->keep(run, prev, false); /* the last forward waits for its backward */
            if (bwd && (was_bwd || a != prev)) run->par->keep(run, a, true); /* its activations back */
            bind_micro_batch(run, bound, mb);
            if (!bwd) {
                st = trace_comm(run, run->par->recv_forward, a, "receive activations");
                if (!st) st = forward(run, mb);
                if (!st) st = trace_comm(run, run->par->send_forward, a, "send activations");
                continue;
            }
            st = trace_comm(run, run->par->recv_backward, a, "receive gradients");
            if (!st) st = backward(run, mb);
            if (!st) st = trace_comm(run, run->par->send_backward, a, "send gradients");
            if (!st) st = accumulate_and_step(run, a, d);
        }
        uint64_t tw = ts_trace_live() ? ts_now_ns() : 0;
        if (!st) st = run->coll->send_wait();
        if (tw) ts_trace_slice(TS_TRACE_COMM, NULL, "wait for sends", NULL, 0, d, tw, ts_now_ns());
        if (!st) st = observe_buffers(run, d);
        if (!st && step) st = trace_step_end(run, step, ts0);
        if (st) return st;
    }
    return TS_OK;
}

ts_status ts_exec_again(ts_run *run, float *const *inputs) {
    ts_prog *p = run->prog;
    for (int k = 0; k < p->n_order; k++) {
        int i = p->order[k];
        if (run->g->t[i]->op == TS_OP_INPUT) p->entries[p->value_entry[i]].data = inputs[i];
    }
    for (int k = 0; k < p->n_order; k++) { /* views of inputs follow them */
        ts_entry *e = &p->entries[p->value_entry[p->order[k]]];
        if (e->view) e->data = p->entries[p->value_entry[run->g->t[p->order[k]]->in[0]]].data;
    }
    run->rerun = true; /* no state updated (running statistics), no collectives */
    ts_status st = observe_params(run, 0);
    if (!st) st = forward(run, 0);
    if (!st && run->training) st = backward(run, 0);
    run->rerun = false;
    ts_crash_set_current_op(NULL, NULL, NULL);
    ts_status sy = run->dev.backend->synchronize(run->dev.stream);
    return st ? st : sy ? ts_error_wrap(TS_ERR_INTERNAL, "rerun: waiting for %s", run->dev.backend->name) : TS_OK;
}

ts_status ts_exec_run(ts_run *run) {
    ts_status st = check_labels(run, run->prog->bound);
    if (st) return st;
    run->failed_entry = run->failed_op = -1;
    st = ts_device_before_run(run);
    if (!st) st = run->prog->stage ? run_pipelined(run, run->prog->bound) : ts_exec_recorded(run, run_step);
    if (run->opts.trace_path) ts_trace_pause(run); /* a step that failed or was cancelled */
    ts_crash_set_current_op(NULL, NULL, NULL);
    ts_status dst = ts_device_after_run(run); /* a cancelled or failed run's values too */
    if (!st) st = dst;
    if (st == TS_ERR_NUMERICS) ts_log_message(TS_LOG_ERROR, ts_last_error()); /* the whole report, once */
    if (st && st != TS_ERR_CANCELLED) return st;
    record_run_metrics(run); /* a cancelled run's too */
    return st;
}
