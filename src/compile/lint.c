/* lint.c -- the model lint: mistakes that give bad scores without an error
 * or a NaN (docs/observation.md#comparing-against-a-reference), found on the compiled program and kept as
 * warnings (also logged). */
#include "compile/program.h"

#include "graph/ops.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void warn(ts_prog *p, size_t *cap, const char *fmt, ...) TS_PRINTF(3, 4);
static void warn(ts_prog *p, size_t *cap, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    ts_logf(TS_LOG_WARN, "lint: %s", buf);
    char *s = ts_strdup(buf);
    if (!s || ts_grow((void **)&p->lint, cap, (size_t)p->n_lint + 1, sizeof *p->lint)) {
        ts_free(s);
        return; /* a warning lost to memory pressure is still logged */
    }
    p->lint[p->n_lint++] = s;
}

static const char *where(const ts_tensor *t, char *buf, size_t n) {
    if (t->file) snprintf(buf, n, " (built at %s:%d)", t->file, t->line);
    else buf[0] = '\0';
    return buf;
}

/* The tensor behind identities that keep values (print, reshape, flatten). */
static const ts_tensor *through_identities(const ts_graph *g, const ts_tensor *t) {
    while (t->op == TS_OP_PRINT || t->op == TS_OP_RESHAPE || t->op == TS_OP_FLATTEN) t = g->t[t->in[0]];
    return t;
}

/* The micro-batch size: the leading dimension of the graph's inputs. */
static int64_t batch_size(const ts_model_def *m, const ts_prog *p) {
    for (int k = 0; k < p->n_order; k++) {
        const ts_tensor *t = m->g->t[p->order[k]];
        if (t->op == TS_OP_INPUT && p->shape[t->id].ndim > 0) return p->shape[t->id].d[0];
    }
    return -1;
}

static bool consumed(const ts_model_def *m, const ts_prog *p, int id) {
    for (int k = 0; k < p->n_order; k++) {
        const ts_tensor *c = m->g->t[p->order[k]];
        for (int j = 0; j < c->n_in; j++)
            if (c->in[j] == id) return true;
    }
    if (m->training && m->loss == id) return true;
    for (int k = 0; k < m->n_outputs; k++)
        if (m->outputs[k] == id) return true;
    for (size_t k = 0; k < m->g->n_marks; k++)
        if (m->g->marks[k].tensor == id) return true;
    return false;
}

void ts_lint(const ts_model_def *m, ts_prog *p) {
    const ts_graph *g = m->g;
    size_t cap = 0;
    char loc[600];
    int64_t B = batch_size(m, p);
    if (m->training && m->opts->precision == TS_F16 && !m->scaling)
        warn(p, &cap,
             "f16 precision without loss scaling: gradients below f16's smallest value (6e-8) become 0 and those below 6e-5 lose "
             "bits; turn dynamic loss scaling on (ts_options_set_loss_scaling, --loss-scale dynamic) unless you know the gradients' "
             "range (the stats table's underflow column shows what is lost)");
    for (int k = 0; k < p->n_order; k++) {
        const ts_tensor *t = g->t[p->order[k]];
        const ts_shape *in0 = t->n_in ? &p->shape[t->in[0]] : NULL;
        if ((t->op == TS_OP_SOFTMAX || t->op == TS_OP_LOG_SOFTMAX) && in0 && in0->ndim >= 2) {
            int d = t->iparam < 0 ? t->iparam + in0->ndim : t->iparam;
            if (d == 0 && in0->d[0] == B)
                warn(p, &cap,
                     "'%s' normalises over dim 0, the batch dimension (%lld samples)%s: each class score is divided among the "
                     "samples of the batch instead of among the classes; use dim %d (the class dimension)",
                     t->name, (long long)B, where(t, loc, sizeof loc), in0->ndim - 1);
        }
        if (t->op == TS_OP_NLL_LOSS) {
            const ts_tensor *src = through_identities(g, g->t[t->in[0]]);
            if (src->op != TS_OP_LOG_SOFTMAX)
                warn(p, &cap,
                     "'%s' takes '%s' (%s), which is not a LogSoftmax: NLL loss expects log-probabilities; apply "
                     "log_softmax first, or use cross_entropy on the raw scores%s",
                     t->name, src->name, ts_op_get(src->op)->name, where(t, loc, sizeof loc));
        }
        if (t->op == TS_OP_DROPOUT_MASK && !m->training && t->fattr[0] > 0)
            warn(p, &cap,
                 "dropout '%s' (p = %g) is in an inference model: it runs as the identity here (like PyTorch's eval()); a "
                 "reference run in train() mode, or a model meant to sample with dropout, will differ%s",
                 t->name, (double)t->fattr[0], where(t, loc, sizeof loc));
        if (t->op == TS_OP_BATCH_NORM && m->training && !t->attr[0] && in0) {
            int64_t per_channel = in0->d[0];
            for (int d = 2; d < in0->ndim; d++) per_channel *= in0->d[d];
            if (per_channel <= 1)
                warn(p, &cap,
                     "batch norm '%s' trains on batches of %lld value%s per channel: the batch variance is 0, so it outputs only "
                     "its bias and learns nothing (use a larger micro-batch, or freeze it)%s",
                     t->name, (long long)per_channel, per_channel == 1 ? "" : "s", where(t, loc, sizeof loc));
        }
        /* a print of a parameter or buffer only observes it: nothing should
         * read it; nor should a print made beside its tensor (ts_print_beside) */
        if (t->op == TS_OP_PRINT && !t->attr[0] && !ts_op_holds_value(g->t[t->in[0]]->op) && !consumed(m, p, t->id))
            warn(p, &cap,
                 "the print op '%s' is not used by anything: it still prints (print ops are never optimised away), "
                 "but the model computes with its input, not with its result%s",
                 t->name, where(t, loc, sizeof loc));
    }
    if (!m->training) return;
    for (size_t i = 0; i < g->n; i++) {
        const ts_tensor *t = g->t[i];
        if (t->op == TS_OP_PARAM && !t->frozen && !p->reaches[i])
            warn(p, &cap, "parameter '%s' has no path to the loss '%s': it is never trained%s", t->name, g->t[m->loss]->name,
                 where(t, loc, sizeof loc));
    }
}
