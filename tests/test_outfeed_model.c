/* test_outfeed_model.c -- outfeed queues fed by a training model (docs/README.md
 * §6): activations marked with ts_outfeed_add, gradients streamed per
 * micro-batch (pre-accumulated: D*A records per parameter per run) or per
 * update (accumulated: D per run) under `<param>_grad`. Records come as
 * {run, sample, key, array} in execution order with the tensors' shapes,
 * and their values equal the anchored ALL arrays of the same tensors.
 * Also: filters, LAST mode, a depth-1 queue drained by a sink thread
 * that must receive every record of several runs, in order, and a run's
 * first record reaching its consumer while the run goes. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "tensorscope.h"

enum { B = 2, IN = 4, HID = 3, CLS = 2, D = 3, A = 2, S = D * A };

static const char *const PARAMS[4] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
static const int64_t PARAM_SHAPE[4][2] = {{HID, IN}, {HID, 0}, {CLS, HID}, {CLS, 0}};

/* ---- records copied out of a queue */

typedef struct rec {
    int64_t run, sample;
    char key[64];
    ts_array a; /* data owned (malloc) */
} rec;
typedef struct recs {
    rec *v;
    int n, cap;
    pthread_mutex_t mu;
} recs;

static void recs_push(recs *r, const ts_outfeed_record *in) {
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 64;
        r->v = realloc(r->v, sizeof *r->v * (size_t)r->cap);
    }
    rec *o = &r->v[r->n++];
    o->run = in->run, o->sample = in->sample;
    snprintf(o->key, sizeof o->key, "%s", in->key);
    o->a = in->array;
    size_t bytes = (size_t)ts_array_numel(&in->array) * ts_dtype_size(in->array.dtype);
    o->a.data = malloc(bytes ? bytes : 1);
    memcpy(o->a.data, in->array.data, bytes);
}
static void recs_clear(recs *r) {
    for (int i = 0; i < r->n; i++) free(r->v[i].a.data);
    r->n = 0;
}
static void recs_free(recs *r) {
    recs_clear(r);
    free(r->v);
}

static void drain(ts_outfeed *q, recs *r) {
    ts_outfeed_record rc;
    while (ts_outfeed_dequeue(q, &rc, 0) == TS_OK) recs_push(r, &rc);
}

static void sink(void *user, const ts_outfeed_record *rc) {
    recs *r = user;
    pthread_mutex_lock(&r->mu);
    recs_push(r, rc);
    pthread_mutex_unlock(&r->mu);
}

/* ---- the model */

typedef struct net {
    ts_graph *g;
    ts_tensor *relu, *logits, *loss;
} net;

static void net_build(net *n) {
    n->g = ts_graph_new(21);
    int64_t xs[] = {B, IN}, ys[] = {B};
    ts_tensor *x = ts_input(n->g, "x", TS_F32, 2, xs), *y = ts_input(n->g, "labels", TS_I32, 1, ys);
    n->relu = ts_relu(n->g, ts_linear(n->g, x, HID, "fc1"));
    n->logits = ts_linear(n->g, n->relu, CLS, "fc2");
    n->loss = ts_cross_entropy(n->g, n->logits, y);
    ts_tensor_set_name(n->loss, "loss");
}

static ts_outfeed *queue(const char *name, ts_outfeed_mode mode, int depth, const char *const *filters, int n_filters) {
    ts_outfeed_config c = {.name = name, .mode = mode, .depth = depth, .filters = filters, .n_filters = n_filters};
    ts_outfeed *q = NULL;
    CHECK_OK(ts_outfeed_new(&q, &c), "queue '%s' (depth %d, %d filters)", name, depth, n_filters);
    return q;
}

/* Anchors ALL of the streamed tensors: activations and both gradient kinds. */
static void anchor_all(ts_options *o) {
    ts_options_anchor(o, "relu", "Relu:0", TS_OUTPUT_ALL, 0);
    ts_options_anchor(o, "logits", "fc2/Add:0", TS_OUTPUT_ALL, 0);
    char sn[64], tn[64];
    for (int k = 0; k < 4; k++) {
        snprintf(tn, sizeof tn, "Gradient___%s", PARAMS[k]);
        snprintf(sn, sizeof sn, "%s_grad", PARAMS[k]);
        ts_options_anchor(o, sn, tn, TS_OUTPUT_ALL, 0);
        snprintf(tn, sizeof tn, "Accum___%s", PARAMS[k]);
        snprintf(sn, sizeof sn, "%s_grad_acc", PARAMS[k]);
        ts_options_anchor(o, sn, tn, TS_OUTPUT_ALL, 0);
    }
}

static ts_model *compile(net *n, ts_options *o) {
    ts_model *m = NULL;
    ts_status st = ts_model_training(&m, n->g, n->loss, o, ts_sgd(0.1f, 0.0f, 0.0f));
    if (!st) st = ts_model_compile(m);
    CHECK_OK(st, "compile");
    if (st) ts_model_free(m), m = NULL;
    return m;
}

static uint32_t rng = 4242u;
static ts_status run(ts_model *m) {
    static float x[S * B * IN];
    static int32_t y[S * B];
    for (int i = 0; i < S * B * IN; i++) {
        rng = rng * 1664525u + 1013904223u;
        x[i] = (float)(rng >> 8) / (float)(1u << 24) * 4.0f - 2.0f;
    }
    for (int i = 0; i < S * B; i++) y[i] = (i * 5 + (int)(rng >> 28)) % CLS;
    const char *names[2] = {"x", "labels"};
    ts_array in[2] = {ts_array_f32(x, 2, (int64_t[]){S * B, IN}), ts_array_i32(y, 1, (int64_t[]){S * B})};
    return ts_model_run(m, names, in, 2);
}

/* The anchored ALL array that record key `key` streams, and its per-sample
 * shape (from the anchor, without the sample axis). */
static const char *anchor_of(const char *key, int accumulated, char *buf, size_t n) {
    if (strcmp(key, "fc1/Relu") == 0) return "relu";
    if (strcmp(key, "logits") == 0) return "logits";
    snprintf(buf, n, "%s%s", key, accumulated ? "_acc" : "");
    return buf;
}

/* Every record matches row `sample` of its anchored ALL array in dtype,
 * shape and values (exactly: the same buffer was copied twice). */
static int records_match_anchors(const ts_model *m, const recs *r, int from, int to, int accumulated) {
    for (int i = from; i < to; i++) {
        char buf[96];
        ts_array all;
        if (ts_model_anchored(m, anchor_of(r->v[i].key, accumulated, buf, sizeof buf), &all)) {
            printf("     no anchor for record key %s\n", r->v[i].key);
            return 0;
        }
        const ts_array *a = &r->v[i].a;
        int ok = a->dtype == all.dtype && a->ndim == all.ndim - 1 && r->v[i].sample < all.shape[0];
        for (int d = 0; ok && d < a->ndim; d++) ok = a->shape[d] == all.shape[d + 1];
        int64_t n = ts_array_numel(a);
        ok = ok && memcmp(a->data, (float *)all.data + r->v[i].sample * n, (size_t)n * sizeof(float)) == 0;
        if (!ok) {
            char s1[64], s2[64];
            printf("     record %d (%s, sample %lld) %s vs anchor %s\n", i, r->v[i].key, (long long)r->v[i].sample,
                   ts_array_shape_str(a, s1, sizeof s1), ts_array_shape_str(&all, s2, sizeof s2));
            return 0;
        }
    }
    return 1;
}

static int param_index(const char *key) {
    for (int k = 0; k < 4; k++) {
        size_t len = strlen(PARAMS[k]);
        if (strncmp(key, PARAMS[k], len) == 0 && strcmp(key + len, "_grad") == 0) return k;
    }
    return -1;
}

/* Gradient records of one run: per sample, each parameter once, samples in
 * order, parameter shapes. */
static int gradient_records_ok(const recs *r, int64_t run, int64_t samples) {
    if (r->n != 4 * samples) return 0;
    int seen[S][4] = {{0}};
    for (int i = 0; i < r->n; i++) {
        int k = param_index(r->v[i].key);
        int64_t s = r->v[i].sample;
        if (k < 0 || r->v[i].run != run || s < 0 || s >= samples || (i && s < r->v[i - 1].sample) || seen[s][k]++) return 0;
        const ts_array *a = &r->v[i].a;
        int nd = PARAM_SHAPE[k][1] ? 2 : 1;
        if (a->ndim != nd || a->shape[0] != PARAM_SHAPE[k][0] || (nd == 2 && a->shape[1] != PARAM_SHAPE[k][1])) return 0;
    }
    return 1;
}

static void test_gradients_and_activations(int pre_accumulated) {
    const char *mode = pre_accumulated ? "pre-accumulated" : "accumulated";
    net n;
    net_build(&n);
    ts_outfeed *acts = queue("activations", TS_OUTFEED_ALL, 256, NULL, 0);
    ts_outfeed *grads = queue("gradients", TS_OUTFEED_ALL, 256, NULL, 0);
    CHECK_OK(ts_outfeed_add(n.g, acts, "fc1/Relu", n.relu), "outfeed_add fc1/Relu");
    CHECK_OK(ts_outfeed_add(n.g, acts, "logits", n.logits), "outfeed_add logits");
    CHECK(ts_outfeed_add(n.g, acts, "logits", n.relu) == TS_ERR_INVALID_ARGUMENT, "a key used twice on a queue is refused");
    ts_options *o = ts_options_new();
    ts_options_set_device_iterations(o, D);
    ts_options_set_gradient_accumulation(o, A);
    CHECK_OK(ts_options_outfeed_gradients(o, grads, pre_accumulated), "outfeed gradients %s", mode);
    anchor_all(o);
    /* a watch on a streamed gradient: its result keeps the tensor's name */
    ts_options_watch(o, "Gradient___fc2.bias", TS_WATCH_STATS, 1);
    ts_options_watch(o, "Accum___fc2.bias", TS_WATCH_STATS, 1);
    ts_model *m = compile(&n, o);
    recs ra = {0}, rg = {0};
    int64_t gsamples = pre_accumulated ? S : D;
    for (int r = 0; m && r < 2; r++) {
        CHECK_OK(run(m), "%s run %d", mode, r);
        recs_clear(&ra);
        recs_clear(&rg);
        drain(acts, &ra);
        drain(grads, &rg);
        /* activations: per micro-batch, in forward order */
        int order_ok = ra.n == 2 * S;
        for (int i = 0; order_ok && i < ra.n; i++)
            order_ok = ra.v[i].run == r && ra.v[i].sample == i / 2 && strcmp(ra.v[i].key, i % 2 ? "logits" : "fc1/Relu") == 0;
        CHECK(order_ok, "%s run %d: %d activation records {run, sample, key} = {%d, 0..%d, fc1/Relu then logits}", mode, r, ra.n, r, S - 1);
        CHECK(order_ok && ra.v[0].a.ndim == 2 && ra.v[0].a.shape[0] == B && ra.v[0].a.shape[1] == HID && ra.v[1].a.shape[1] == CLS,
              "%s run %d: activation records are f32[%d,%d] and f32[%d,%d]", mode, r, B, HID, B, CLS);
        CHECK(records_match_anchors(m, &ra, 0, ra.n, 0), "%s run %d: activation records = anchored ALL rows", mode, r);
        /* gradients */
        CHECK(gradient_records_ok(&rg, r, gsamples), "%s run %d: %d gradient records (%lld samples x 4 parameters, keys <param>_grad, in order)",
              mode, r, rg.n, (long long)gsamples);
        CHECK(records_match_anchors(m, &rg, 0, rg.n, !pre_accumulated), "%s run %d: gradient records = anchored %s ALL rows", mode, r,
              pre_accumulated ? "Gradient___" : "Accum___");
        const ts_watch_result *w;
        size_t nw = 0;
        ts_model_watch_results(m, &w, &nw);
        int names_ok = nw == 2;
        for (size_t i = 0; i < nw; i++)
            names_ok = names_ok && (strcmp(w[i].name, "Gradient___fc2.bias") == 0 || strcmp(w[i].name, "Accum___fc2.bias") == 0);
        CHECK(names_ok, "%s run %d: watch results of streamed gradients keep their names", mode, r);
    }
    ts_outfeed_counts c = ts_outfeed_get_counts(grads);
    CHECK(c.enqueued == 2 * 4 * gsamples && c.dequeued == c.enqueued && c.dropped == 0, "%s: gradient queue counts %lld enqueued, %lld dequeued, %lld dropped",
          mode, (long long)c.enqueued, (long long)c.dequeued, (long long)c.dropped);
    recs_free(&ra);
    recs_free(&rg);
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(n.g);
    ts_outfeed_free(acts);
    ts_outfeed_free(grads);
}

static int only_keys(const recs *r, const char *a, const char *b) {
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->v[i].key, a) != 0 && (!b || strcmp(r->v[i].key, b) != 0)) return 0;
    return 1;
}

static void test_filters_and_last(void) {
    net n;
    net_build(&n);
    const char *glob[] = {"fc1*"}, *sub[] = {"logits"}, *upper[] = {"FC1"}, *bias[] = {"*.bias_grad"};
    ts_outfeed *qg = queue("glob", TS_OUTFEED_ALL, 64, glob, 1), *qs = queue("exact", TS_OUTFEED_ALL, 64, sub, 1),
               *qn = queue("none", TS_OUTFEED_ALL, 64, glob, 0), *qu = queue("case", TS_OUTFEED_ALL, 64, upper, 1),
               *ql = queue("last", TS_OUTFEED_LAST, 4, NULL, 0), *qb = queue("bias", TS_OUTFEED_ALL, 64, bias, 1);
    ts_outfeed *qs_all[] = {qg, qs, qn, qu, ql};
    for (int k = 0; k < 5; k++) {
        ts_outfeed_add(n.g, qs_all[k], "fc1/Relu", n.relu);
        ts_outfeed_add(n.g, qs_all[k], "logits", n.logits);
    }
    CHECK(ts_outfeed_accepts(qg, "fc1/Relu") && !ts_outfeed_accepts(qg, "logits") && ts_outfeed_accepts(qs, "logits") && !ts_outfeed_accepts(qs, "logits2") &&
              !ts_outfeed_accepts(qn, "fc1/Relu") && !ts_outfeed_accepts(qu, "fc1/Relu"),
          "ts_outfeed_accepts: glob, exact name (not a prefix), empty list, case-sensitive");
    ts_options *o = ts_options_new();
    ts_options_set_device_iterations(o, D);
    ts_options_set_gradient_accumulation(o, A);
    ts_options_outfeed_gradients(o, qb, 1);
    anchor_all(o);
    ts_model *m = compile(&n, o);
    if (m && run(m) == TS_OK) {
        recs r = {0};
        drain(qg, &r);
        CHECK(r.n == S && only_keys(&r, "fc1/Relu", NULL), "filter 'fc1*' (glob): %d records, all fc1/Relu", r.n);
        recs_clear(&r);
        drain(qs, &r);
        CHECK(r.n == S && only_keys(&r, "logits", NULL) && records_match_anchors(m, &r, 0, r.n, 0), "filter 'logits' (exact name): %d logits records",
              r.n);
        recs_clear(&r);
        drain(qn, &r);
        CHECK(r.n == 0, "an empty filter list accepts nothing (%d records)", r.n);
        drain(qu, &r);
        CHECK(r.n == 0, "filter 'FC1' is case-sensitive (%d records)", r.n);
        drain(qb, &r);
        CHECK(r.n == 2 * S && only_keys(&r, "fc1.bias_grad", "fc2.bias_grad") && records_match_anchors(m, &r, 0, r.n, 0),
              "gradient filter '*.bias_grad': %d records, biases only, = Gradient___ rows", r.n);
        recs_clear(&r);
        drain(ql, &r);
        int last_ok = r.n == 2;
        for (int i = 0; last_ok && i < r.n; i++) last_ok = r.v[i].sample == S - 1;
        CHECK(last_ok && records_match_anchors(m, &r, 0, r.n, 0), "LAST mode: %d records, the last micro-batch's, = anchored rows", r.n);
        recs_free(&r);
    } else
        CHECK(0, "filters run: %s", ts_last_error());
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(n.g);
    ts_outfeed *all[] = {qg, qs, qn, qu, ql, qb};
    for (int k = 0; k < 6; k++) ts_outfeed_free(all[k]);
}

/* Depth 1, sink threads: the producer waits for the consumer; every record
 * of every run arrives, in order, with the values of that run. */
static void test_sink_lossless(void) {
    enum { RUNS = 5 };
    net n;
    net_build(&n);
    ts_outfeed *acts = queue("acts1", TS_OUTFEED_ALL, 1, NULL, 0), *grads = queue("grads1", TS_OUTFEED_ALL, 1, NULL, 0);
    ts_outfeed_add(n.g, acts, "fc1/Relu", n.relu);
    ts_outfeed_add(n.g, acts, "logits", n.logits);
    ts_options *o = ts_options_new();
    ts_options_set_device_iterations(o, D);
    ts_options_set_gradient_accumulation(o, A);
    ts_options_outfeed_gradients(o, grads, 1);
    anchor_all(o);
    recs got_a = {.mu = PTHREAD_MUTEX_INITIALIZER}, got_g = {.mu = PTHREAD_MUTEX_INITIALIZER};
    CHECK_OK(ts_outfeed_set_sink(acts, sink, &got_a), "sink on the activation queue");
    CHECK_OK(ts_outfeed_set_sink(grads, sink, &got_g), "sink on the gradient queue");
    ts_model *m = compile(&n, o);
    /* what each run must deliver: the anchored ALL rows of that run */
    float *want_a = malloc(sizeof(float) * RUNS * S * B * (HID + CLS));
    float *want_g = malloc(sizeof(float) * RUNS * S * (HID * IN + HID + CLS * HID + CLS));
    size_t na = 0, ng = 0;
    int runs = 0;
    for (int r = 0; m && r < RUNS; r++, runs++) {
        if (run(m) != TS_OK) {
            CHECK(0, "sink run %d: %s", r, ts_last_error());
            break;
        }
        ts_array relu, logits, g[4];
        ts_model_anchored(m, "relu", &relu);
        ts_model_anchored(m, "logits", &logits);
        for (int k = 0; k < 4; k++) {
            char sn[64];
            snprintf(sn, sizeof sn, "%s_grad", PARAMS[k]);
            ts_model_anchored(m, sn, &g[k]);
        }
        for (int s = 0; s < S; s++) {
            memcpy(want_a + na, (float *)relu.data + s * B * HID, sizeof(float) * B * HID), na += B * HID;
            memcpy(want_a + na, (float *)logits.data + s * B * CLS, sizeof(float) * B * CLS), na += B * CLS;
        }
        /* gradients: per sample, in the backward order the records show; the
         * set per sample is checked below, values through want_g by key */
        for (int s = 0; s < S; s++)
            for (int k = 0; k < 4; k++) {
                int64_t per = ts_array_numel(&g[k]) / S;
                memcpy(want_g + ng, (float *)g[k].data + s * per, sizeof(float) * (size_t)per), ng += (size_t)per;
            }
    }
    ts_outfeed_counts ca = ts_outfeed_get_counts(acts), cg = ts_outfeed_get_counts(grads);
    CHECK(ca.enqueued == runs * 2 * S && cg.enqueued == runs * 4 * S && ca.dropped == 0 && cg.dropped == 0,
          "depth 1: %lld + %lld records enqueued over %d runs, none dropped", (long long)ca.enqueued, (long long)cg.enqueued, runs);
    ts_model_free(m);
    ts_outfeed_free(acts); /* drains to the sink, then joins */
    ts_outfeed_free(grads);
    /* activations: exact order and values */
    int ok = got_a.n == runs * 2 * S;
    size_t off = 0;
    for (int i = 0; ok && i < got_a.n; i++) {
        const rec *rc = &got_a.v[i];
        int64_t run_i = i / (2 * S), s = (i / 2) % S;
        size_t len = (size_t)ts_array_numel(&rc->a);
        ok = rc->run == run_i && rc->sample == s && strcmp(rc->key, i % 2 ? "logits" : "fc1/Relu") == 0 && len == (i % 2 ? B * CLS : B * HID) &&
             memcmp(rc->a.data, want_a + off, len * sizeof(float)) == 0;
        off += len;
    }
    CHECK(ok, "sink received all %d activation records of %d runs, in order, with each run's values", got_a.n, runs);
    /* gradients: per run and sample, the 4 parameters, values by key */
    ok = got_g.n == runs * 4 * S;
    for (int i = 0; ok && i < got_g.n; i++) {
        const rec *rc = &got_g.v[i];
        int64_t run_i = i / (4 * S);
        int k = param_index(rc->key);
        ok = k >= 0 && rc->run == run_i && rc->sample == (i / 4) % S;
        if (!ok) break;
        size_t pos = (size_t)(run_i * S + rc->sample) * (HID * IN + HID + CLS * HID + CLS);
        for (int j = 0; j < k; j++) pos += (size_t)(PARAM_SHAPE[j][0] * (PARAM_SHAPE[j][1] ? PARAM_SHAPE[j][1] : 1));
        ok = memcmp(rc->a.data, want_g + pos, sizeof(float) * (size_t)ts_array_numel(&rc->a)) == 0;
    }
    CHECK(ok, "sink received all %d gradient records of %d runs, 4 per micro-batch in order, with each run's values", got_g.n, runs);
    recs_free(&got_a);
    recs_free(&got_g);
    free(want_a);
    free(want_g);
    ts_options_free(o);
    ts_graph_free(n.g);
}

/* ---- records while the run goes: a consumer gets a run's first record
 * while its later steps still run (on a device, each step's records are
 * copied out and pushed after its work, not after the run's). The sink
 * cancels the run when the first record comes; a queue of depth 2 keeps
 * the run at most a few steps ahead of the sink, so the run stops early,
 * whatever the machine's load. Were the records pushed after the run's
 * work, every step would have run before the cancel. */

typedef struct first_seen {
    ts_model *m;
    atomic_int n; /* records since armed */
} first_seen;

static void cancel_on_first(void *user, const ts_outfeed_record *rc) {
    (void)rc;
    first_seen *f = user;
    if (atomic_fetch_add(&f->n, 1) == 0) ts_model_cancel(f->m);
}

static void test_records_while_running(void) {
    /* steps long enough that the run's time is theirs: on a GPU, wider
     * layers; on a device (cpu-staged too), two launches of 64 steps: a
     * replayed run sees a cancel between launches, so the run stops after
     * the first launch when its records reached the sink during it */
    const char *dev = getenv("TS_DEVICE");
    bool gpu = dev && strncmp(dev, "cuda", 4) == 0, device = dev && *dev && strcmp(dev, "cpu") != 0;
    const int WB = gpu ? 256 : 64, WIN = gpu ? 64 : 256, WH = gpu ? 2048 : 512, WD = device ? 128 : 64;
    ts_graph *g = ts_graph_new(23);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){WB, WIN}), *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){WB});
    ts_tensor *h = ts_relu(g, ts_linear(g, x, WH, "fc1"));
    if (gpu) h = ts_relu(g, ts_linear(g, h, WH, "fc_wide"));
    ts_tensor *loss = ts_cross_entropy(g, ts_linear(g, h, 10, "fc2"), y);
    ts_outfeed *q = queue("live", TS_OUTFEED_ALL, 2, NULL, 0);
    ts_outfeed_add(g, q, "hidden", h);
    first_seen f = {0};
    CHECK_OK(ts_outfeed_set_sink(q, cancel_on_first, &f), "a sink that cancels the run when its first record comes");
    ts_options *o = ts_options_new();
    ts_options_set_device_iterations(o, WD);
    ts_model *m = NULL;
    ts_status st = ts_model_training(&m, g, loss, o, ts_sgd(0.01f, 0.0f, 0.0f));
    f.m = m;
    float *xv = calloc((size_t)WD * WB * WIN, sizeof *xv);
    int32_t *yv = calloc((size_t)WD * WB, sizeof *yv);
    for (int i = 0; xv && i < WD * WB * WIN; i++) xv[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    for (int i = 0; yv && i < WD * WB; i++) yv[i] = i % 10;
    const char *names[2] = {"x", "labels"};
    ts_array in[2] = {ts_array_f32(xv, 2, (int64_t[]){(int64_t)WD * WB, WIN}), ts_array_i32(yv, 1, (int64_t[]){(int64_t)WD * WB})};
    for (int r = 0; !st && r < 2; r++) { /* the second run: a device replays what the first recorded */
        ts_outfeed_flush(q);
        atomic_store(&f.n, 0);
        int64_t before = ts_model_steps(m);
        ts_status rst = ts_model_run(m, names, in, 2);
        ts_outfeed_flush(q);
        int64_t done = ts_model_steps(m) - before;
        CHECK(rst == TS_ERR_CANCELLED && done >= 1 && done < WD && atomic_load(&f.n) >= 1,
              "run %d: the first record reached the consumer while the run went: cancelled after %lld of %d steps (%s)", r + 1,
              (long long)done, WD, rst ? ts_last_error() : "not cancelled");
    }
    CHECK_OK(st, "a model of %d steps a run, the hidden layer outfed each", WD);
    ts_model_free(m);
    ts_outfeed_free(q);
    ts_options_free(o);
    ts_graph_free(g);
    free(xv), free(yv);
}

int main(void) {
    test_records_while_running();
    test_gradients_and_activations(1);
    test_gradients_and_activations(0);
    test_filters_and_last();
    test_sink_lossless();
    return check_summary("test_outfeed_model");
}
