/* agree.c -- every rank of a replicated or pipelined model runs the same
 * training (docs/design.md#replicas-and-pipeline-stages): before the first step, each rank hashes what
 * must be the same everywhere (the optimizer and its hyper-parameters, the
 * learning rate and its schedule, D, A, the replica and stage layout, the
 * numeric check, the anchors and watches, and the graph: every tensor's
 * name, op, attributes, dtype and compiled shape, so the micro-batch size
 * too) and the ranks compare hashes. When they differ, they exchange the
 * hash of each of those items, find the first that differs and exchange
 * its text, so that every rank fails with TS_ERR_DIST naming it and both
 * values ("rank 1 has 0.1, rank 0 has 0.01"), before any step has run and
 * long before the weight checksums would blame the starting weights.
 * Talks to the other ranks only through the collective table. */
#include "observe/run.h"
#include "parallel/parallel.h"

#include "graph/ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One item: what it is ("the learning rate (--lr)") and its value as text. */
typedef struct agree_item {
    char label[192], value[320];
} agree_item;

/* Walks the items in a fixed order: each is written into *it and handed to
 * visit, which returns false to stop. */
typedef bool (*agree_visit)(void *ctx, const agree_item *it);

static bool item(agree_visit visit, void *ctx, agree_item *it, const char *label, const char *fmt, ...) TS_PRINTF(5, 6);
static bool item(agree_visit visit, void *ctx, agree_item *it, const char *label, const char *fmt, ...) {
    va_list ap;
    snprintf(it->label, sizeof it->label, "%s", label);
    va_start(ap, fmt);
    vsnprintf(it->value, sizeof it->value, fmt, ap);
    va_end(ap);
    return visit(ctx, it);
}

static const char *optimizer_name(ts_optimizer_kind k) { return k == TS_OPT_SGD ? "sgd" : k == TS_OPT_ADAM ? "adam" : k == TS_OPT_ADAMW ? "adamw" : "?"; }
static const char *check_name(ts_check_numerics c) { return c == TS_CHECK_OFF ? "off" : c == TS_CHECK_OUTPUT ? "output" : c == TS_CHECK_OP ? "op" : "?"; }

/* The shortest text that reads back as v (a float, or a double): 0.1,
 * not 0.100000001. */
static const char *num(char buf[32], double v, bool is_float) {
    for (int digits = 6; digits <= 17; digits++) {
        snprintf(buf, 32, "%.*g", digits, v);
        double back = strtod(buf, NULL);
        if (is_float ? (float)back == (float)v : back == v) break;
    }
    return buf;
}
static const char *flt(char buf[32], float v) { return num(buf, (double)v, true); }

static void walk(const ts_run *run, const ts_prog *p, agree_visit v, void *ctx) {
    agree_item it;
    const ts_options *o = &run->opts;
    char b[160], l[192], f1[32], f2[32];
#define ITEM(label, ...) \
    do { \
        if (!item(v, ctx, &it, label, __VA_ARGS__)) return; \
    } while (0)
    ITEM("the kind of model", "%s", run->training ? "training" : "inference");
    if (run->training) {
        const ts_optimizer *opt = &run->opt;
        ITEM("the optimizer (--optimizer)", "%s", optimizer_name(opt->kind));
        ITEM("the learning rate (--lr)", "%s", flt(f1, run->base_lr));
        ITEM("the momentum (--momentum)", "%s", flt(f1, opt->momentum));
        ITEM("the weight decay (--weight-decay)", "%s", flt(f1, opt->weight_decay));
        ITEM("the SGD dampening", "%s", flt(f1, opt->dampening));
        ITEM("SGD's Nesterov momentum", "%d", opt->nesterov);
        ITEM("the Adam betas", "%s, %s", flt(f1, opt->beta1), flt(f2, opt->beta2));
        ITEM("the Adam epsilon", "%s", flt(f1, opt->eps));
        /* a schedule's numbers only where it reads them: a mismatch names
         * what differs, not a field the schedule ignores */
        const ts_lr_schedule *sc = &run->sched;
        ITEM("the learning-rate schedule (--lr-schedule)", "%s", ts_lr_schedule_name(sc->kind));
        ITEM("the warmup steps (--warmup-steps)", "%lld", (long long)sc->warmup_steps);
        if (sc->kind == TS_LR_STEP) {
            ITEM("the step schedule's step size (--lr-step-size)", "%lld", (long long)sc->step_size);
            ITEM("the step schedule's factor (--lr-gamma)", "%s", num(f1, sc->gamma, false));
        }
        if (sc->kind == TS_LR_COSINE) {
            ITEM("the cosine schedule's steps after warmup (--epochs or --steps, and the training split)", "%lld", (long long)sc->total_steps);
            ITEM("the cosine schedule's last rate (--lr-min)", "%s", num(f1, sc->min_lr, false));
        }
        /* loss scaling: a rank that scales and one that does not (or with
         * another scale) would skip different steps and drift apart */
        if (run->scaling) snprintf(b, sizeof b, "dynamic from %s", flt(f1, o->scale_init));
        ITEM("loss scaling (--loss-scale)", "%s", run->scaling ? b : "off");
        if (run->scaling) {
            ITEM("the loss scale's growth and backoff factors", "%s, %s", flt(f1, o->scale_growth), flt(f2, o->scale_backoff));
            ITEM("the loss scale's growth interval", "%d steps", o->scale_interval);
            ITEM("the current loss scale (the initial one, or a resumed checkpoint's)", "%s after %lld good steps in a row",
                 num(f1, run->loss_scale, false), (long long)run->good_steps);
        }
        ITEM("the loss", "'%s'", run->g->t[run->loss]->name);
        ITEM("the gradient outfeed per micro-batch (--outfeed-pre-accumulated-gradients)", "%d", o->grad_pre_accumulated);
    }
    for (int i = 0; i < run->n_outputs; i++) ITEM("an output of the model", "'%s'", run->g->t[run->outputs[i]]->name);
    ITEM("the device iterations D (--repeat-count)", "%d", o->device_iterations);
    ITEM("the gradient accumulation A (--gradient-accumulation-count)", "%d", o->grad_accum);
    ITEM("the replicas", "%d", o->replicas);
    ITEM("the steps between weight checks", "%d", o->replica_check);
    ITEM("the pipeline stages (--pipeline-stages)", "%d", o->stages);
    ITEM("the pipeline schedule (--pipeline-schedule)", "%s", o->schedule == TS_PIPELINE_1F1B ? "1f1b" : "gpipe");
    for (int s = 0; s + 1 < o->stages; s++) {
        snprintf(l, sizeof l, "the scope that starts stage %d (--split-at)", s + 1);
        ITEM(l, "'%s'", o->split_at[s]);
    }
    ITEM("the numeric check (--check-numerics)", "%s", check_name(o->check));
    ITEM("the number of anchors (--anchor)", "%d", p->n_anchors);
    for (int k = 0; k < p->n_anchors; k++) {
        const ts_anchor *a = &p->anchors[k];
        snprintf(l, sizeof l, "anchor %d (--anchor)", k + 1);
        ITEM(l, "'%s' of '%s', %s every %d", a->short_name, p->entries[a->entry].name, ts_output_mode_name(a->mode), a->period);
    }
    ITEM("the number of watched tensors (--watch, --stats)", "%d", p->n_watch);
    for (int w = 0; w < p->n_watch; w++) {
        snprintf(l, sizeof l, "watch %d (--watch, --stats)", w + 1);
        ITEM(l, "'%s', summaries %#x every %d runs", p->watch_results[w].name, (unsigned)p->watch_what[w], p->watch_period[w]);
    }
    /* inputs first: a different micro-batch size shows there before it
     * changes the shape of every tensor after them */
    const ts_graph *g = run->g;
    ITEM("the number of tensors in the graph", "%d", p->n_nodes);
    for (int i = 0; i < p->n_nodes; i++) {
        const ts_tensor *t = g->t[i];
        if (t->op != TS_OP_INPUT) continue;
        snprintf(l, sizeof l, "input '%.100s' (its first axis is the micro-batch size, --batch-size)", t->name);
        ITEM(l, "%s%s", ts_dtype_name(t->dtype), ts_shape_str(&p->shape[i], b, sizeof b));
    }
    for (int i = 0; i < p->n_nodes; i++) {
        const ts_tensor *t = g->t[i];
        snprintf(l, sizeof l, "tensor %d of the graph", i);
        char ins[96] = "";
        for (int j = 0, used = 0; j < t->n_in && used < (int)sizeof ins; j++)
            used += snprintf(ins + used, sizeof ins - (size_t)used, "%s%d", j ? ", " : "", t->in[j]);
        ITEM(l, "'%.120s' = %s(%s) %s%s", t->name, ts_op_get(t->op)->name, ins, ts_dtype_name(t->dtype), ts_shape_str(&p->shape[i], b, sizeof b));
        snprintf(l, sizeof l, "the attributes of '%.120s'", t->name);
        uint64_t h = 1469598103934665603ull; /* FNV-1a of the attributes, field by field (no padding); shown as their hash */
        int nd = t->sparam.ndim > 0 ? t->sparam.ndim : 0;
        const void *fields[] = {&t->fparam, &t->iparam, t->attr, t->fattr, &t->sparam.ndim, t->sparam.d};
        const size_t sizes[] = {sizeof t->fparam, sizeof t->iparam, sizeof t->attr, sizeof t->fattr, sizeof t->sparam.ndim,
                                (size_t)nd * sizeof t->sparam.d[0]};
        for (size_t k = 0; k < TS_ARRAY_LEN(sizes); k++)
            for (size_t j = 0; j < sizes[k]; j++) h = (h ^ ((const unsigned char *)fields[k])[j]) * 1099511628211ull;
        ITEM(l, "%016llx (title '%.60s')", (unsigned long long)h, t->title ? t->title : "");
    }
#undef ITEM
}

static uint64_t fnv1a(uint64_t h, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) h = (h ^ *p) * 1099511628211ull;
    return (h ^ 0xff) * 1099511628211ull; /* a separator no text holds */
}

typedef struct hashes {
    uint64_t *v;
    size_t n, cap;
    uint64_t all;
    bool oom;
} hashes;

static bool hash_item(void *ctx, const agree_item *it) {
    hashes *h = ctx;
    uint64_t x = fnv1a(fnv1a(1469598103934665603ull, it->label), it->value);
    if (ts_grow((void **)&h->v, &h->cap, h->n + 1, sizeof *h->v)) {
        h->oom = true;
        return false;
    }
    h->v[h->n++] = x;
    h->all = (h->all ^ x) * 1099511628211ull + h->n;
    return true;
}

typedef struct pick {
    size_t want, at;
    agree_item *out;
} pick;

static bool pick_item(void *ctx, const agree_item *it) {
    pick *k = ctx;
    if (k->at++ != k->want) return true;
    *k->out = *it;
    return false;
}

#define AGREE_HINT "every rank must build the same model with the same options (the same command line and flags for every rank): stopping before the next step"

/* TS_ERR_DIST: rank r_bad's item differs from rank 0's, in both values. */
static ts_status differ(const agree_item *texts, int r_bad) {
    const agree_item *a = &texts[r_bad], *z = &texts[0];
    bool one_label = strcmp(a->label, z->label) == 0 || !z->label[0] || !a->label[0];
    const char *label = z->label[0] ? z->label : a->label;
    return one_label ? ts_error(TS_ERR_DIST, "the ranks were started differently: rank %d has %s %s, rank 0 has %s; " AGREE_HINT, r_bad, label, a->value, z->value)
                     : ts_error(TS_ERR_DIST, "the ranks were started differently: rank %d has %s %s, rank 0 has %s %s; " AGREE_HINT, r_bad, a->label,
                                a->value, z->label, z->value);
}

ts_status ts_dist_agree(ts_run *run, const ts_prog *p) {
    const ts_collective *c = run->coll;
    if (run->dist_agreed || !c || c->size < 2) return TS_OK;
    int R = c->size;
    hashes h = {.all = 1469598103934665603ull};
    walk(run, p, hash_item, &h);
    if (h.oom) return TS_ERR_OUT_OF_MEMORY;
    ts_status st = TS_OK;
    uint64_t mine[2] = {h.all, h.n}, *all = ts_calloc(2 * (size_t)R, sizeof *all), *each = NULL;
    agree_item *texts = ts_calloc((size_t)R, sizeof *texts);
    if (!all || !texts) st = TS_ERR_OUT_OF_MEMORY;
    if (!st) st = c->allgather(mine, all, sizeof mine, "the comparison of the ranks' training options");
    bool same = true;
    size_t N = 0;
    for (int r = 0; r < R && !st; r++) {
        same = same && all[2 * r] == all[0] && all[2 * r + 1] == all[1];
        if (all[2 * r + 1] > N) N = (size_t)all[2 * r + 1];
    }
    if (!st && !same) { /* every rank sees the same: which item, whose value */
        if (!(each = ts_calloc((size_t)R * N + 1, sizeof *each)) || ts_grow((void **)&h.v, &h.cap, N + 1, sizeof *h.v)) st = TS_ERR_OUT_OF_MEMORY;
        if (!st) {
            memset(h.v + h.n, 0, (N - h.n) * sizeof *h.v); /* items this rank lacks */
            st = c->allgather(h.v, each, N * sizeof *h.v, "the comparison of the ranks' training options");
        }
        size_t k = N;
        int r_bad = 1;
        for (size_t i = 0; i < N && k == N && !st; i++)
            for (int r = 1; r < R && k == N; r++)
                if (each[(size_t)r * N + i] != each[i]) k = i, r_bad = r;
        agree_item mine_text = {.label = "", .value = "nothing (its model has fewer items)"};
        pick pk = {.want = k, .out = &mine_text};
        walk(run, p, pick_item, &pk);
        if (!st && k < N) st = c->allgather(&mine_text, texts, sizeof mine_text, "the comparison of the ranks' training options");
        if (!st)
            st = k == N ? ts_error(TS_ERR_DIST, "the ranks were started differently (their training options hash differently); every rank must build the same model with the same options")
                        : differ(texts, r_bad);
    }
    if (!st) run->dist_agreed = true;
    ts_free(h.v);
    ts_free(all);
    ts_free(each);
    ts_free(texts);
    return st;
}

ts_status ts_dist_agree_on(const char *what, const char *value) {
    if (!what || !value) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_dist_agree_on: what and value must not be NULL");
    const ts_collective *c = ts_collective_get();
    if (!c || c->size < 2) return TS_OK;
    agree_item mine = {.label = "", .value = ""}, *texts = ts_calloc((size_t)c->size, sizeof *texts);
    if (!texts) return ts_error(TS_ERR_OUT_OF_MEMORY, "no memory to compare %s across the ranks", what);
    snprintf(mine.label, sizeof mine.label, "%s", what);
    snprintf(mine.value, sizeof mine.value, "%s", value);
    ts_status st = c->allgather(&mine, texts, sizeof mine, "the comparison of the ranks' training options");
    for (int r = 1; r < c->size && !st; r++)
        if (strcmp(texts[r].label, texts[0].label) != 0 || strcmp(texts[r].value, texts[0].value) != 0) st = differ(texts, r);
    ts_free(texts);
    return st;
}
