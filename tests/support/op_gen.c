/* op_gen.c -- every op's generated cases (op_check.h): each row of the op
 * table (src/graph/ops.c) built from its sample (ops.h's ts_op_sample)
 * at a sweep of sizes, through ts_graph_node and ts_op_check. A shape
 * class maps one size x of the sweep to the inputs' shapes; the sizes
 * take odd dims (not multiples of 32 or 256), a row longer than a block
 * of 256 threads and, where cheap, a tensor over 65536 elements. A size
 * whose shapes the op's shape rule refuses (a rank the op does not take)
 * is left out; a row with no size that builds fails, named. */
#include "op_check.h"

#include "check.h"
#include "graph/graph.h"
#include "graph/ops.h"
#include "graph/ops_tensor.h"

#include <stdio.h>
#include <string.h>

#define SWEEP 4

typedef struct size {
    int nd;
    int64_t d[5];
} size;

/* x by its rank (0: the op takes any); nd 0: no such size */
static const size sweeps[6][SWEEP] = {
    {{2, {4, 5}}, {3, {3, 7, 11}}, {2, {3, 300}}, {1, {70001}}},
    {{1, {5}}, {1, {33}}, {1, {300}}, {1, {70001}}},
    {{2, {4, 5}}, {2, {7, 33}}, {2, {3, 300}}, {2, {300, 257}}},
    {{3, {3, 5, 4}}, {3, {2, 7, 11}}, {3, {2, 3, 300}}, {3, {40, 50, 37}}},
    {{4, {2, 3, 9, 7}}, {4, {1, 2, 6, 5}}, {4, {2, 3, 17, 19}}, {4, {4, 8, 64, 64}}},
    {{5, {2, 2, 4, 5, 6}}, {5, {1, 3, 3, 4, 5}}, {5, {2, 3, 5, 6, 7}}, {0, {0}}},
};
/* TS_SAMPLE_CHANNELS: C = 6 (any groups of 1, 2, 3 or 6) */
static const size channels[SWEEP] = {{2, {4, 6}}, {4, {2, 6, 5, 7}}, {3, {3, 6, 300}}, {4, {8, 6, 40, 40}}};
/* TS_SAMPLE_LABELS: scores [N,..,C] */
static const size labels[SWEEP] = {{2, {4, 10}}, {3, {2, 3, 7}}, {2, {3, 300}}, {2, {5, 14001}}};
/* TS_SAMPLE_INDICES: the indices' shapes */
static const size indices[SWEEP] = {{1, {5}}, {2, {3, 4}}, {1, {301}}, {2, {2, 150}}};
/* TS_SAMPLE_MATMUL: M, K, N */
static const int64_t mkn[SWEEP][3] = {{4, 5, 3}, {7, 33, 9}, {2, 300, 5}, {300, 257, 3}};
/* TS_SAMPLE_ATTENTION: B, H, T, S, D, Dv (keys past one tile of 128 in the second) */
static const int64_t bhtsd[SWEEP][6] = {{2, 3, 5, 7, 4, 6}, {1, 2, 9, 150, 8, 8}, {1, 1, 3, 3, 5, 2}, {0}};

/* TS_SAMPLE_BROADCAST: input j >= 1 at size s is x (0), x less its first
 * dim with its last 1 (1), x's last dim (2) or x's first dim then 1s (3) */
static const int bcast[SWEEP][TS_MAX_INPUTS] = {{0, 0, 0}, {0, 1, 2}, {0, 2, 3}, {0, 0, 0}};

static size broadcast_of(const size *x, int how) {
    size r = *x;
    if (how == 1 && x->nd > 1) {
        r.nd = x->nd - 1;
        memmove(r.d, x->d + 1, sizeof(int64_t) * (size_t)r.nd);
        r.d[r.nd - 1] = 1;
    } else if (how == 2) {
        r.nd = 1, r.d[0] = x->d[x->nd - 1];
    } else if (how == 3) {
        for (int i = 1; i < x->nd; i++) r.d[i] = 1;
    }
    return r;
}

/* The inputs' shapes of op's sample at size s (false: the class has no
 * such size) and the label naming them. */
static bool sample_shapes(ts_op op, int s, int n, size *in, char *label, size_t cap) {
    const ts_op_def *def = ts_op_get(op);
    const ts_op_sample *sp = &def->sample;
    ts_sample_shapes cls = sp->shapes;
    if (cls == TS_SAMPLE_AUTO)
        cls = def->shape == ts_shape_broadcast_binary || def->shape == ts_shape_where ? TS_SAMPLE_BROADCAST : TS_SAMPLE_SAME;
    if (sp->rank < 0 || sp->rank > 5) return false;
    size x = sweeps[sp->rank][s];
    if (cls == TS_SAMPLE_CHANNELS) x = channels[s];
    if (cls == TS_SAMPLE_LABELS) x = labels[s];
    if (!x.nd) return false; /* no such size at this rank */
    in[0] = x;
    switch (cls) {
    case TS_SAMPLE_AUTO:
    case TS_SAMPLE_SAME:
        for (int j = 1; j < n; j++) in[j] = x;
        break;
    case TS_SAMPLE_BROADCAST:
        for (int j = 1; j < n; j++) in[j] = broadcast_of(&x, bcast[s][j]);
        break;
    case TS_SAMPLE_MATMUL: {
        int b = sp->rank > 2 ? sp->rank - 2 : 0; /* batch dims: 2, 3, ... */
        const int64_t *m = mkn[s];
        for (int j = 0; j < 2; j++) {
            in[j].nd = b + 2;
            for (int i = 0; i < b; i++) in[j].d[i] = 2 + i;
            bool t = sp->attrs.attr[j] != 0;
            int64_t r = j ? m[1] : m[0], c = j ? m[2] : m[1]; /* a [M,K], b [K,N] */
            in[j].d[b] = t ? c : r, in[j].d[b + 1] = t ? r : c;
        }
        break;
    }
    case TS_SAMPLE_LABELS:
        in[1] = x;
        in[1].nd = x.nd - 1;
        break;
    case TS_SAMPLE_INDICES:
        in[1] = indices[s];
        break;
    case TS_SAMPLE_TRAILING: {
        int k = (int)sp->attrs.attr[0];
        if (k < 1 || k > x.nd) return false;
        for (int j = 1; j < n; j++) {
            in[j].nd = k;
            memcpy(in[j].d, x.d + x.nd - k, sizeof(int64_t) * (size_t)k);
        }
        break;
    }
    case TS_SAMPLE_CHANNELS:
        for (int j = 1; j < n; j++) in[j] = (size){1, {x.d[1]}};
        break;
    case TS_SAMPLE_CONV:
    case TS_SAMPLE_CONV_T: { /* OC = 4, a kernel of 3 (2 in 3-d) */
        int64_t oc = 4, k = x.nd == 5 ? 2 : 3;
        if (x.nd < 3) return false;
        in[1].nd = x.nd;
        in[1].d[0] = cls == TS_SAMPLE_CONV ? oc : x.d[1], in[1].d[1] = cls == TS_SAMPLE_CONV ? x.d[1] : oc;
        for (int i = 2; i < x.nd; i++) in[1].d[i] = k;
        if (n > 2) in[2] = (size){1, {oc}};
        break;
    }
    case TS_SAMPLE_ATTENTION: {
        const int64_t *a = bhtsd[s];
        if (!a[0] || n < 4) return false;
        in[0] = (size){4, {a[0], a[1], a[2], a[4]}};
        in[1] = (size){4, {a[0], a[1], a[3], a[4]}};
        in[2] = (size){4, {a[0], a[1], a[3], a[5]}};
        in[3] = (size){2, {a[2], a[3]}};
        break;
    }
    }
    int o = snprintf(label, cap, "sample");
    for (int j = 0; j < n && o < (int)cap; j++) {
        o += snprintf(label + o, cap - (size_t)o, " [");
        for (int i = 0; i < in[j].nd && o < (int)cap; i++) o += snprintf(label + o, cap - (size_t)o, i ? ",%lld" : "%lld", (long long)in[j].d[i]);
        if (o < (int)cap) o += snprintf(label + o, cap - (size_t)o, "]");
    }
    return true;
}

/* op's sample at size s through ts_op_check; false when its shapes do not
 * build (the shape rule's message in err) */
static bool sample_case(ts_op_checker *c, ts_op op, int s, char *err, size_t cap) {
    const ts_op_def *def = ts_op_get(op);
    const ts_op_sample *sp = &def->sample;
    int n = def->arity == TS_ARITY_VARIADIC ? (sp->n_in ? sp->n_in : 1) : def->arity;
    size in[TS_MAX_INPUTS];
    char label[192];
    memset(in, 0, sizeof in);
    if (n < 1 || n > TS_MAX_INPUTS || !sample_shapes(op, s, n, in, label, sizeof label)) return false;
    ts_graph *g = ts_graph_new(1);
    const ts_tensor *ins[TS_MAX_INPUTS];
    bool ok = g != NULL;
    for (int j = 0; ok && j < n; j++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", j);
        bool ints = ts_op_int_input(op, j);
        ts_dtype dt = ints ? TS_I32 : sp->dtype;
        ins[j] = (sp->state_inputs >> j) & 1u ? ts_buffer(g, name, in[j].nd, in[j].d) : ts_input(g, name, dt, in[j].nd, in[j].d);
        ok = ins[j] != NULL;
    }
    const ts_tensor *t = ok ? ts_graph_node(g, op, ins, n, &sp->attrs) : NULL;
    if (!t) {
        snprintf(err, cap, "%s: %s", label, ts_last_error());
        ts_graph_free(g);
        return false;
    }
    ts_op_case_opts o = {.int_hi = sp->int_hi};
    if (sp->ints == TS_SAMPLE_AXIS) o.int_hi = (int32_t)in[0].d[sp->attrs.attr[0]];
    if (sp->ints == TS_SAMPLE_LAST) o.int_hi = (int32_t)in[0].d[in[0].nd - 1];
    if (sp->lo != 0 || sp->hi != 0) o.spread = (sp->hi - sp->lo) / 2, o.shift = (sp->hi + sp->lo) / 2;
    if (sp->straight_through) o.no_fd = "its row's sample says the gradient passes straight through";
    ts_op_check(c, label, t, &o);
    ts_graph_free(g);
    return true;
}

void ts_op_cases_generated(ts_op_checker *c) {
    const ts_backend *cpu = ts_backend_cpu();
    for (int op = 0; op < TS_OP_COUNT; op++) {
        if (!cpu->kernels[op].forward) continue; /* a leaf: nothing computes it */
        char err[512] = "";
        for (int s = 0; s < SWEEP; s++)
            if (sample_case(c, (ts_op)op, s, err, sizeof err)) c->ops_generated[op] = true;
        if (!c->ops_generated[op]) c->failures++;
        CHECK(c->ops_generated[op], "%s: a sample of its row builds%s%s%s", ts_op_get((ts_op)op)->name,
              c->ops_generated[op] ? "" : " (the last size tried: ", err,
              c->ops_generated[op] ? "" : "); fill the row's .sample in src/graph/ops.c (ts_op_sample in ops.h), no test code needed");
    }
}
