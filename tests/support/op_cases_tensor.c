/* op_cases_tensor.c -- the hand-written op cases of the tensor family
 * (op_check.h), what the rows' generated samples (op_gen.c) do not reach:
 * embedding with every row hit and of one row, gather by negative
 * indices and gather_elements by fewer or more indices than the data,
 * layer and group norm over several dims, groupings and eps, batched
 * matmul with each transpose and broadcast, permutations that merge dims
 * or move dims of 1, slices at the ends, every pad mode with crops,
 * concat of one to eight parts along inner and negative dims, and
 * attention with per-sample and per-head masks, fully masked rows, key
 * heads shared by groups of query heads, queries in several blocks and its
 * unfused twin. */
#include "op_check.h"

#include "graph/graph.h"
#include "tensorscope.h"

#include <stdio.h>

static ts_tensor *in_f32(ts_graph *g, const char *name, int nd, const int64_t *d) { return ts_input(g, name, TS_F32, nd, d); }

/* weight [V, C] gathered by indices of shape idx[0..ni) */
static void embedding_case(ts_op_checker *c, int64_t V, int64_t C, int ni, const int64_t *idx) {
    char label[96];
    ts_graph *g = ts_graph_new(1);
    ts_tensor *w = ts_param(g, "w", 2, (int64_t[]){V, C});
    ts_tensor *i = ts_input(g, "idx", TS_I32, ni, idx);
    int64_t n = 1;
    for (int k = 0; k < ni; k++) n *= idx[k];
    snprintf(label, sizeof label, "w [%lld,%lld], %lld indices in %d dims", (long long)V, (long long)C, (long long)n, ni);
    ts_op_check(c, label, ts_embedding(g, w, i), &(ts_op_case_opts){.int_hi = (int32_t)V});
    ts_graph_free(g);
}

static void embedding_cases(ts_op_checker *c) {
    embedding_case(c, 5, 3, 1, (int64_t[]){600});     /* index tiles past one block, every row hit */
    embedding_case(c, 1, 1, 3, (int64_t[]){2, 1, 3});    /* one row, one column */
}

/* data of shape d[0..nd) gathered along `axis` by i32 indices idx[0..ni)
 * (random in [0, d[axis]); a constant of negative ones too, counted from
 * the end) */
static void gather_case(ts_op_checker *c, int nd, const int64_t *d, int axis, int ni, const int64_t *idx) {
    char label[128];
    ts_graph *g = ts_graph_new(1);
    ts_tensor *x = ts_param(g, "x", nd, d);
    ts_tensor *i = ts_input(g, "idx", TS_I32, ni, idx);
    snprintf(label, sizeof label, "gather axis %d of %d dims by %d-dim indices", axis, nd, ni);
    ts_op_check(c, label, ts_gather(g, x, i, axis), &(ts_op_case_opts){.int_hi = (int32_t)d[axis]});
    int32_t neg[3] = {-1, (int32_t)-d[axis], 0};
    ts_array na = ts_array_i32(neg, 1, (int64_t[]){3});
    snprintf(label, sizeof label, "gather axis %d of %d dims by the constant indices -1, -%lld, 0", axis, nd, (long long)d[axis]);
    ts_op_check(c, label, ts_gather(g, x, ts_constant(g, "neg", &na), axis), NULL);
    ts_graph_free(g);
}

/* data d[0..nd) by i32 indices of shape idx (random in [0, d[axis])) */
static void gather_elements_case(ts_op_checker *c, int nd, const int64_t *d, int axis, const int64_t *idx) {
    char label[128];
    ts_graph *g = ts_graph_new(1);
    ts_tensor *x = ts_param(g, "x", nd, d);
    ts_tensor *i = ts_input(g, "idx", TS_I32, nd, idx);
    snprintf(label, sizeof label, "gather_elements axis %d of %d dims", axis, nd);
    ts_op_check(c, label, ts_gather_elements(g, x, i, axis), &(ts_op_case_opts){.int_hi = (int32_t)d[axis]});
    ts_graph_free(g);
}

static void gather_cases(ts_op_checker *c) {
    gather_elements_case(c, 2, (int64_t[]){3, 4}, 1, (int64_t[]){3, 7});        /* more indices than the axis: repeats */
    gather_elements_case(c, 3, (int64_t[]){5, 6, 7}, 0, (int64_t[]){9, 2, 7});  /* smaller off the axis */
    gather_elements_case(c, 3, (int64_t[]){40, 50, 41}, 2, (int64_t[]){40, 50, 41}); /* 82000 positions */
    gather_case(c, 3, (int64_t[]){4, 6, 5}, 1, 2, (int64_t[]){3, 7}); /* rows hit many times */
    gather_case(c, 3, (int64_t[]){4, 6, 5}, 2, 1, (int64_t[]){9});    /* the innermost axis: C = 1 */
    gather_case(c, 2, (int64_t[]){300, 260}, 0, 1, (int64_t[]){301});
    gather_case(c, 4, (int64_t[]){3, 2, 40, 33}, 2, 2, (int64_t[]){2, 300}); /* past a block's index tile */
}

/* x of shape d[0..nd), normalised over its last `k` dims */
static void layer_norm_case(ts_op_checker *c, int nd, const int64_t *d, int k, float eps) {
    char label[96];
    ts_graph *g = ts_graph_new(1);
    ts_tensor *x = in_f32(g, "x", nd, d);
    ts_tensor *w = ts_param(g, "w", k, d + nd - k), *b = ts_param(g, "b", k, d + nd - k);
    int64_t n = 1;
    for (int q = 0; q < nd; q++) n *= d[q];
    snprintf(label, sizeof label, "%lld elements in %d dims, last %d, eps %g", (long long)n, nd, k, (double)eps);
    ts_op_check(c, label, ts_layer_norm(g, x, w, b, k, eps), NULL);
    ts_graph_free(g);
}

static void layer_norm_cases(ts_op_checker *c) {
    layer_norm_case(c, 3, (int64_t[]){3, 5, 6}, 2, 1e-3f);
    layer_norm_case(c, 4, (int64_t[]){2, 3, 4, 5}, 3, 1e-5f);
    layer_norm_case(c, 2, (int64_t[]){5, 40}, 2, 1e-5f);     /* one row */
    layer_norm_case(c, 2, (int64_t[]){2000, 3}, 1, 0.1f);    /* many short rows */
}

/* x of shape d[0..nd), RMS-normalised over its last dim, with a weight
 * or without */
static void rms_norm_case(ts_op_checker *c, int nd, const int64_t *d, bool weight, float eps) {
    char label[96];
    ts_graph *g = ts_graph_new(1);
    ts_tensor *x = in_f32(g, "x", nd, d);
    int64_t n = 1;
    for (int q = 0; q < nd; q++) n *= d[q];
    snprintf(label, sizeof label, "%lld elements in %d dims, %s weight, eps %g", (long long)n, nd, weight ? "a" : "no", (double)eps);
    ts_op_check(c, label, ts_rms_norm(g, x, weight ? ts_param(g, "w", 1, d + nd - 1) : NULL, eps), NULL);
    ts_graph_free(g);
}

static void rms_norm_cases(ts_op_checker *c) {
    rms_norm_case(c, 3, (int64_t[]){3, 5, 6}, true, 1e-3f);
    rms_norm_case(c, 3, (int64_t[]){3, 5, 6}, false, 1e-5f);
    rms_norm_case(c, 2, (int64_t[]){1, 200}, true, 1e-5f);   /* one row */
    rms_norm_case(c, 2, (int64_t[]){2000, 3}, true, 0.1f);   /* many short rows */
    rms_norm_case(c, 2, (int64_t[]){64, 513}, false, 1e-6f); /* rows past the lanes' blocks */
}

/* x of shape d[0..nd) ([N, C, ...]) in G groups of channels */
static void group_norm_case(ts_op_checker *c, int nd, const int64_t *d, int G, float eps) {
    char label[128], sd[64] = "";
    for (int q = 0, o = 0; q < nd; q++) o += snprintf(sd + o, sizeof sd - (size_t)o, q ? ",%lld" : "%lld", (long long)d[q]);
    ts_graph *g = ts_graph_new(1);
    ts_tensor *x = in_f32(g, "x", nd, d);
    ts_tensor *w = ts_param(g, "w", 1, d + 1), *b = ts_param(g, "b", 1, d + 1);
    snprintf(label, sizeof label, "x [%s], %d groups, eps %g", sd, G, (double)eps);
    ts_op_check(c, label, ts_group_norm(g, x, w, b, G, eps), NULL);
    ts_graph_free(g);
}

static void group_norm_cases(ts_op_checker *c) {
    group_norm_case(c, 4, (int64_t[]){2, 4, 3, 3}, 4, 1e-5f);    /* a group per channel: instance norm */
    group_norm_case(c, 3, (int64_t[]){3, 8, 5}, 1, 1e-3f);       /* one group: 1-d, layer norm over [C, L] */
    group_norm_case(c, 2, (int64_t[]){4, 6}, 2, 1e-5f);          /* no positions: [N, C] */
    group_norm_case(c, 5, (int64_t[]){1, 4, 2, 3, 5}, 2, 1e-5f); /* 3-d */
    group_norm_case(c, 4, (int64_t[]){2, 2, 20, 20}, 1, 1e-5f);  /* a group past 256 threads */
}

/* a of shape da[0..na), b of shape db[0..nb) */
static void bmm_case(ts_op_checker *c, int na, const int64_t *da, int nb, const int64_t *db, int ta, int tb) {
    char label[160], sa[64] = "", sb[64] = "";
    for (int q = 0, o = 0; q < na; q++) o += snprintf(sa + o, sizeof sa - (size_t)o, q ? ",%lld" : "%lld", (long long)da[q]);
    for (int q = 0, o = 0; q < nb; q++) o += snprintf(sb + o, sizeof sb - (size_t)o, q ? ",%lld" : "%lld", (long long)db[q]);
    snprintf(label, sizeof label, "[%s]%s x [%s]%s", sa, ta ? "^T" : "", sb, tb ? "^T" : "");
    ts_graph *g = ts_graph_new(1);
    ts_tensor *a = in_f32(g, "a", na, da), *b = ts_param(g, "b", nb, db);
    ts_op_check(c, label, ts_matmul_batched(g, a, b, ta, tb), NULL);
    ts_graph_free(g);
}

static void bmm_cases(ts_op_checker *c) {
    /* one batch dim, each transpose */
    bmm_case(c, 3, (int64_t[]){3, 5, 4}, 3, (int64_t[]){3, 5, 6}, 1, 0);
    bmm_case(c, 3, (int64_t[]){3, 4, 5}, 3, (int64_t[]){3, 6, 5}, 0, 1);
    bmm_case(c, 3, (int64_t[]){3, 5, 4}, 3, (int64_t[]){3, 6, 5}, 1, 1);
    /* no batch dims */
    bmm_case(c, 2, (int64_t[]){4, 5}, 2, (int64_t[]){5, 6}, 0, 0);
    /* a broadcast (fewer dims, or a 1): its gradient sums the products */
    bmm_case(c, 2, (int64_t[]){4, 5}, 3, (int64_t[]){3, 5, 6}, 0, 0);
    bmm_case(c, 3, (int64_t[]){1, 5, 4}, 4, (int64_t[]){2, 3, 5, 6}, 1, 0);
    /* b broadcast */
    bmm_case(c, 3, (int64_t[]){3, 4, 5}, 2, (int64_t[]){5, 6}, 0, 0);
    bmm_case(c, 4, (int64_t[]){2, 3, 4, 5}, 3, (int64_t[]){3, 6, 5}, 0, 1);
    bmm_case(c, 4, (int64_t[]){2, 3, 5, 4}, 4, (int64_t[]){2, 1, 6, 5}, 1, 1);
    /* both broadcast across each other: a batch view of two dims */
    bmm_case(c, 4, (int64_t[]){2, 1, 4, 5}, 4, (int64_t[]){1, 3, 5, 6}, 0, 0);
    bmm_case(c, 5, (int64_t[]){2, 1, 3, 5, 4}, 4, (int64_t[]){4, 1, 6, 5}, 1, 1);
    /* vector-like products */
    bmm_case(c, 3, (int64_t[]){3, 1, 7}, 3, (int64_t[]){3, 7, 1}, 0, 0);
    bmm_case(c, 3, (int64_t[]){3, 1, 7}, 2, (int64_t[]){1, 9}, 1, 0); /* K = 1: outer products */
}

static void permute_case(ts_op_checker *c, int nd, const int64_t *d, const int *perm) {
    char label[96];
    int o = snprintf(label, sizeof label, "%d dims, perm", nd);
    for (int q = 0; q < nd; q++) o += snprintf(label + o, sizeof label - (size_t)o, " %d", perm[q]);
    ts_graph *g = ts_graph_new(1);
    ts_tensor *x = in_f32(g, "x", nd, d);
    ts_op_check(c, label, ts_permute(g, x, perm), NULL);
    ts_graph_free(g);
}

static void permute_cases(ts_op_checker *c) {
    permute_case(c, 2, (int64_t[]){3, 4}, (int[]){1, 0});
    permute_case(c, 3, (int64_t[]){2, 3, 4}, (int[]){0, 1, 2});         /* identity */
    permute_case(c, 4, (int64_t[]){2, 3, 4, 5}, (int[]){0, 2, 1, 3});   /* dims that merge */
    permute_case(c, 4, (int64_t[]){1, 5, 1, 7}, (int[]){3, 1, 0, 2});   /* size-1 dims */
    permute_case(c, 1, (int64_t[]){5}, (int[]){0});
    permute_case(c, 6, (int64_t[]){2, 1, 3, 2, 2, 3}, (int[]){5, 4, 3, 2, 1, 0});
}

static void slice_case(ts_op_checker *c, int nd, const int64_t *d, int dim, int64_t start, int64_t len) {
    char label[96];
    snprintf(label, sizeof label, "%d dims, dim %d [%lld, %lld)", nd, dim, (long long)start, (long long)(start + len));
    ts_graph *g = ts_graph_new(1);
    ts_tensor *x = in_f32(g, "x", nd, d);
    ts_op_check(c, label, ts_slice(g, x, dim, start, len), NULL);
    ts_graph_free(g);
}

static void slice_cases(ts_op_checker *c) {
    slice_case(c, 2, (int64_t[]){4, 10}, 1, 3, 5);
    slice_case(c, 3, (int64_t[]){2, 7, 3}, 1, 0, 7);  /* the whole dim */
    slice_case(c, 3, (int64_t[]){2, 7, 3}, 2, 2, 1);  /* the last element of the innermost dim */
    slice_case(c, 3, (int64_t[]){2, 7, 3}, -2, 4, 2); /* a negative dim */
    slice_case(c, 2, (int64_t[]){300, 260}, 1, 1, 259); /* 77700 elements */
}

/* x [d] padded by pads (ts_pad's order) in `mode` */
static void pad_case(ts_op_checker *c, int nd, const int64_t *d, const int64_t *pads, ts_pad_mode mode) {
    static const char *const names[] = {"constant", "reflect", "edge", "wrap"};
    char label[96];
    snprintf(label, sizeof label, "%d dims, %s, pads of dim 0: %lld, %lld", nd, names[mode], (long long)pads[0], (long long)pads[nd]);
    ts_graph *g = ts_graph_new(1);
    ts_tensor *x = in_f32(g, "x", nd, d);
    ts_op_check(c, label, ts_pad(g, x, pads, mode, -2.5f), NULL);
    ts_graph_free(g);
}

static void pad_cases(ts_op_checker *c) {
    for (int m = TS_PAD_CONSTANT; m <= TS_PAD_WRAP; m++) {
        pad_case(c, 2, (int64_t[]){4, 10}, (int64_t[]){1, 3, 2, 0}, (ts_pad_mode)m);
        pad_case(c, 3, (int64_t[]){2, 3, 5}, (int64_t[]){0, 4, 7, 1, 6, 2}, (ts_pad_mode)m);     /* wider than the dims */
        pad_case(c, 3, (int64_t[]){2, 7, 3}, (int64_t[]){1, -2, 0, -1, 3, -1}, (ts_pad_mode)m);  /* crops */
    }
    pad_case(c, 4, (int64_t[]){2, 3, 100, 120}, (int64_t[]){0, 0, 3, 3, 0, 0, 3, 3}, TS_PAD_REFLECT); /* 79,212 outputs */
    pad_case(c, 1, (int64_t[]){1}, (int64_t[]){2, 3}, TS_PAD_REFLECT);                                  /* one element */
}

/* n parts along dim, part q of size sizes[q] there; the other dims from d */
static void concat_case(ts_op_checker *c, int nd, const int64_t *d, int dim, int n, const int64_t *sizes) {
    char label[96];
    ts_graph *g = ts_graph_new(1);
    ts_tensor *xs[8];
    int ad = dim < 0 ? dim + nd : dim;
    int o = snprintf(label, sizeof label, "%d dims, dim %d, parts", nd, dim);
    for (int q = 0; q < n; q++) {
        int64_t s[8];
        for (int i = 0; i < nd; i++) s[i] = i == ad ? sizes[q] : d[i];
        char name[8];
        snprintf(name, sizeof name, "x%d", q);
        xs[q] = in_f32(g, name, nd, s);
        o += snprintf(label + o, sizeof label - (size_t)o, " %lld", (long long)sizes[q]);
    }
    ts_op_check(c, label, ts_concat(g, xs, n, dim), NULL);
    ts_graph_free(g);
}

static void concat_cases(ts_op_checker *c) {
    concat_case(c, 2, (int64_t[]){0, 3}, 0, 2, (int64_t[]){2, 5});
    concat_case(c, 3, (int64_t[]){2, 0, 4}, 1, 3, (int64_t[]){1, 3, 5});
    concat_case(c, 3, (int64_t[]){3, 2, 0}, 2, 2, (int64_t[]){1, 4}); /* innermost */
    concat_case(c, 2, (int64_t[]){3, 0}, -1, 8, (int64_t[]){1, 2, 3, 1, 4, 1, 2, 5}); /* the most inputs, a negative dim */
    concat_case(c, 2, (int64_t[]){300, 0}, 1, 2, (int64_t[]){130, 131});        /* 78300 elements */
}

/* q [B,H,T,D], k [B,Hk,S,D], v [B,Hk,S,Dv] and a random 0/1 mask of shape
 * m[0..nm) (some rows then have every key masked); with `twin`, the node
 * carries an unfused twin [B,H,T,Dv] and copies it */
static void attention_case(ts_op_checker *c, int64_t B, int64_t H, int64_t Hk, int64_t T, int64_t S, int64_t D, int64_t Dv, int nm,
                           const int64_t *m, bool twin) {
    char label[160], sm[64] = "";
    for (int q = 0, o = 0; q < nm; q++) o += snprintf(sm + o, sizeof sm - (size_t)o, q ? ",%lld" : "%lld", (long long)m[q]);
    snprintf(label, sizeof label, "q [%lld,%lld,%lld,%lld] k [.., %lld, %lld, %lld] v [.., %lld] mask [%s]%s", (long long)B, (long long)H,
             (long long)T, (long long)D, (long long)Hk, (long long)S, (long long)D, (long long)Dv, sm, twin ? " with its twin" : "");
    ts_graph *g = ts_graph_new(1);
    ts_tensor *q = in_f32(g, "q", 4, (int64_t[]){B, H, T, D}), *k = in_f32(g, "k", 4, (int64_t[]){B, Hk, S, D});
    ts_tensor *v = ts_param(g, "v", 4, (int64_t[]){B, Hk, S, Dv}), *mask = ts_input(g, "mask", TS_I32, nm, m);
    ts_tensor *tw = twin ? in_f32(g, "twin", 4, (int64_t[]){B, H, T, Dv}) : NULL;
    ts_op_check(c, label, ts_attention(g, q, k, v, mask, 0.7f, tw), NULL);
    ts_graph_free(g);
}

static void attention_cases(ts_op_checker *c) {
    attention_case(c, 2, 3, 3, 5, 7, 4, 4, 4, (int64_t[]){2, 1, 1, 7}, false);    /* padding: per sample and key */
    attention_case(c, 1, 2, 2, 3, 3, 5, 2, 4, (int64_t[]){1, 2, 3, 3}, false);    /* per head, rows with every key masked */
    attention_case(c, 2, 2, 2, 4, 6, 3, 5, 2, (int64_t[]){4, 6}, true);           /* the twin's copy */
    attention_case(c, 2, 6, 2, 5, 7, 4, 3, 4, (int64_t[]){2, 6, 1, 7}, false);    /* grouped-query: 3 query heads a key head */
    attention_case(c, 1, 4, 1, 70, 70, 3, 2, 4, (int64_t[]){1, 4, 70, 70}, false); /* three blocks of queries in two groups, two tiles of keys */
}

void ts_op_cases_tensor(ts_op_checker *c) {
    attention_cases(c);
    embedding_cases(c);
    gather_cases(c);
    layer_norm_cases(c);
    rms_norm_cases(c);
    group_norm_cases(c);
    bmm_cases(c);
    permute_cases(c);
    slice_cases(c);
    pad_cases(c);
    concat_cases(c);
}
