/* backward_ops.c -- the backward pass and the optimizer step of a compiled
 * training program as ops over its entries (backward_ops.h). */
#include "diag/backward_ops.h"

#include "graph/ops.h"

#include <stdio.h>

static void add_ref(int *v, int *n, int max, int e) {
    for (int k = 0; k < *n; k++)
        if (v[k] == e) return; /* x * x reads x once, writes Gradient___x once */
    if (*n < max && e >= 0) v[(*n)++] = e;
}

float ts_bwd_lr(const ts_bwd_model *m, const ts_tensor *t) { return t->has_opt ? t->opt.lr : m->base_lr; }

/* The settings parameter t is updated with (its own, or the model's). */
static void optimizer_attrs(const ts_bwd_model *m, const ts_tensor *t, char *buf, size_t n) {
    const ts_optimizer *o = ts_param_optimizer(m->opt, t);
    size_t used = (size_t)snprintf(buf, n, ", lr=%g", ts_bwd_lr(m, t));
    if (used < n && o->kind == TS_OPT_SGD) {
        if (o->momentum != 0.0f) used += (size_t)snprintf(buf + used, n - used, ", momentum=%g", (double)o->momentum);
        if (used < n && o->dampening != 0.0f) used += (size_t)snprintf(buf + used, n - used, ", dampening=%g", (double)o->dampening);
        if (used < n && o->nesterov) used += (size_t)snprintf(buf + used, n - used, ", nesterov=true");
    } else if (used < n) {
        used += (size_t)snprintf(buf + used, n - used, ", betas=(%g, %g), eps=%g", (double)o->beta1, (double)o->beta2, (double)o->eps);
    }
    if (used < n && o->weight_decay != 0.0f) snprintf(buf + used, n - used, ", weight_decay=%g", (double)o->weight_decay);
}

ts_status ts_backward_ops(const ts_bwd_model *m, ts_bwd_op **out, int *n) {
    const ts_prog *p = m->prog;
    const ts_graph *g = m->g;
    *out = NULL;
    *n = 0;
    ts_bwd_op *v = ts_calloc((size_t)p->n_order * 3 + 1, sizeof *v); /* per node: a backward, or an accumulation and an update */
    if (!v) return TS_ERR_OUT_OF_MEMORY;
    int k = 0;
    if (m->loss >= 0 && m->loss < p->n_nodes && p->grad_entry[m->loss] >= 0) { /* d loss / d loss = 1 */
        ts_bwd_op *b = &v[k++];
        snprintf(b->op, sizeof b->op, "OnesLike");
        b->src = g->t[m->loss];
        add_ref(b->in, &b->n_in, TS_BWD_MAX_IN, p->value_entry[m->loss]);
        add_ref(b->out, &b->n_out, TS_BWD_MAX_OUT, p->grad_entry[m->loss]);
    }
    for (int r = p->n_order - 1; r >= 0; r--) {
        int i = p->order[r];
        const ts_tensor *t = g->t[i];
        const ts_op_def *def = ts_op_get(t->op);
        if (!p->needs_grad[i] || !def->has_backward) continue;
        ts_bwd_op *b = &v[k];
        *b = (ts_bwd_op){.src = t, .accumulates = true};
        snprintf(b->op, sizeof b->op, "%sBackward", def->name);
        int io[TS_MAX_INPUTS + 2], n_io = ts_prog_backward_reads(p, t, io);
        for (int q = 0; q < n_io; q++) add_ref(b->in, &b->n_in, TS_BWD_MAX_IN, io[q]);
        n_io = ts_prog_backward_writes(p, t, io);
        for (int q = 0; q < n_io; q++) add_ref(b->out, &b->n_out, TS_BWD_MAX_OUT, io[q]);
        k += b->n_out > 0; /* a gradient asked of an op whose inputs need none: nothing written */
    }
    int A = m->grad_accum, R = m->replicas;
    for (int r = 0; r < p->n_order; r++) {
        int i = p->order[r];
        int acc = ts_prog_entry_of(p, i, TS_KIND_ACCUM);
        if (acc < 0) continue;
        const ts_tensor *t = g->t[i];
        ts_bwd_op *a = &v[k++], *u = &v[k++];
        *a = (ts_bwd_op){.src = t, .optimizer = true};
        if (A == 1 && R == 1) snprintf(a->op, sizeof a->op, "Alias"); /* the gradient's own buffer */
        else {
            snprintf(a->op, sizeof a->op, "AccumulateMean");
            snprintf(a->attrs, sizeof a->attrs, ", micro_batches=%d%s", A, R > 1 ? ", over_replicas=true" : "");
        }
        add_ref(a->in, &a->n_in, TS_BWD_MAX_IN, p->grad_entry[i]);
        add_ref(a->out, &a->n_out, TS_BWD_MAX_OUT, acc);
        *u = (ts_bwd_op){.src = t, .optimizer = true};
        snprintf(u->op, sizeof u->op, "%s", ts_optimizer_name(m->opt->kind));
        optimizer_attrs(m, t, u->attrs, sizeof u->attrs);
        add_ref(u->in, &u->n_in, TS_BWD_MAX_IN, p->value_entry[i]);
        add_ref(u->in, &u->n_in, TS_BWD_MAX_IN, acc);
        add_ref(u->out, &u->n_out, TS_BWD_MAX_OUT, ts_prog_entry_of(p, i, TS_KIND_UPDATED));
        for (int e = acc + 1; e < p->n_entries && p->entries[e].node == i; e++)
            if (p->entries[e].kind != TS_KIND_UPDATED) { /* optimizer state: read and written */
                add_ref(u->in, &u->n_in, TS_BWD_MAX_IN, e);
                add_ref(u->out, &u->n_out, TS_BWD_MAX_OUT, e);
            }
    }
    *out = v;
    *n = k;
    return TS_OK;
}
