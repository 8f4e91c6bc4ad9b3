/* test_attention_watch.c -- stats watches on an attention's unfused twin,
 * taken by its one pass (docs/backend.md, "Fused attention"): the raw
 * scores, the scaled ones, the masked ones the softmax reads, the
 * probabilities and their product with v, summarised as the pass computes
 * them, against the same watches where the twin's ops run.
 *
 * Two models built alike (the same seed, so the same weights) run the same
 * step with every tensor of the attention watched (plain stats, every
 * run): one watches nothing else there, so the one pass runs (its OpTime
 * metrics name Attention and no Softmax) and takes the twin's summaries;
 * the other anchors the probabilities too, so the twin's ops run and the
 * summaries are of their values. Each summary agrees: the counts (zeros,
 * NaN, +-Inf) exactly, mean, std, min, max and l2 to float rounding. The
 * cases:
 * - the character GPT at T = 70 under its causal mask, masked keys filled
 *   with -1e30: a block of queries whose keys span two tiles (their
 *   probabilities computed again from the rows' log-sum-exps), blocks
 *   whose last key comes before the last (the raw scores of the keys the
 *   pass skips computed for the summary), on 1 and 3 threads (the same
 *   bits: the pass's pairs merge in their order);
 * - q, k and v parameters under a padding mask with a sample whose keys
 *   are all masked (its probabilities 1/S, as a softmax over one fill
 *   value), and under a partial padding mask filled with -inf (the masked
 *   scores counted as -Inf);
 * - a histogram watch on the probabilities, which the pass does not take:
 *   the twin's ops run;
 * - a twin of other ops (an additive mask, v through an op of its own, as
 *   an ONNX file's): its probabilities and output still the pass's, its
 *   scores not (watching them runs the twin);
 * - grouped-query heads (one key and value head, repeated in the twin);
 * - every stability signal of the GPT: each head's max logit, from the
 *   pass's summaries of the scores the softmax reads. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_case.h"
#include "check.h"
#include "rand.h"
#include "tensorscope.h"

enum { V = 13, T = 70, L = 2, H = 2, C = 16, B = 3 };

static int32_t tokens[B * T], targets[B * T];

/* a training model of loss with `watch` (every run, `what`) and with
 * `anchor` (NULL: none; the format of a name, a layer's number in it)
 * anchored in each of `layers` layers */
static ts_model *model(ts_graph *g, ts_tensor *loss, int threads, const char *watch, int what, const char *anchor, int layers) {
    ts_options *o = ts_options_new();
    ts_options_set_threads(o, threads);
    ts_status st = ts_options_watch(o, watch, what, 1);
    for (int l = 0; anchor && l < layers && !st; l++) {
        char name[64];
        snprintf(name, sizeof name, anchor, l);
        st = ts_options_anchor(o, name, name, TS_OUTPUT_FINAL, 0);
    }
    ts_model *m = NULL;
    if (!st) st = ts_model_training(&m, g, loss, o, ts_sgd(0.1f, 0.0f, 0.0f));
    if (!st) st = ts_model_compile(m);
    CHECK_OK(st, "a model watching '%s'%s%s", watch, anchor ? ", anchoring " : "", anchor ? anchor : "");
    ts_options_free(o);
    return st ? NULL : m;
}

/* the summary of `name` in m's results of its last run, or NULL */
static const ts_summary *result(ts_model *m, const char *name, int64_t run) {
    const ts_watch_result *w;
    size_t n = 0;
    if (ts_model_watch_results(m, &w, &n)) return NULL;
    for (size_t i = 0; i < n; i++)
        if (strcmp(w[i].name, name) == 0) return w[i].run == run ? w[i].summary : NULL;
    return NULL;
}

static bool close_to(double a, double b, double tol) { return a == b || fabs(a - b) <= tol; }

/* one-pass summary a against the twin's b of tensor `name` */
static void compare(const char *name, const ts_summary *a, const ts_summary *b) {
    if (!a || !b) {
        CHECK(0, "%s: a summary of this run on both models (%s, %s)", name, a ? "one pass" : "none", b ? "twin" : "none");
        return;
    }
    const ts_stats *x = &a->stats, *y = &b->stats;
    CHECK(x->count == y->count && x->zeros == y->zeros && x->nans == y->nans && x->pos_infs == y->pos_infs && x->neg_infs == y->neg_infs,
          "%s: counts %lld/%lld zeros %lld/%lld NaN %lld/%lld +Inf %lld/%lld -Inf %lld/%lld", name, (long long)x->count, (long long)y->count,
          (long long)x->zeros, (long long)y->zeros, (long long)x->nans, (long long)y->nans, (long long)x->pos_infs, (long long)y->pos_infs,
          (long long)x->neg_infs, (long long)y->neg_infs);
    double scale = fabs(y->mean) + y->std, ext = fmax(fabs(y->min), fabs(y->max));
    CHECK(close_to(x->mean, y->mean, 1e-5 * scale) && close_to(x->std, y->std, 1e-4 * y->std + 1e-7 * scale) &&
              close_to(x->min, y->min, 1e-5 * ext) && close_to(x->max, y->max, 1e-5 * ext) && close_to(x->l2, y->l2, 1e-5 * y->l2),
          "%s: mean %.9g/%.9g std %.9g/%.9g min %.9g/%.9g max %.9g/%.9g l2 %.9g/%.9g", name, x->mean, y->mean, x->std, y->std, x->min, y->min,
          x->max, y->max, x->l2, y->l2);
}

/* the twin's tensors of an attention (their names' formats, a layer's
 * number in them) */
static const char *const twin_gpt[] = {"blocks.%d.attn/MatMul:0", "blocks.%d.attn/Scale:0", "blocks.%d.attn/MaskedFill:0",
                                       "blocks.%d.attn/Softmax:0", "blocks.%d.attn/MatMul:1", "blocks.%d.attn/Attention:0"};

static ts_status gpt_step(ts_model *m) {
    const char *names[2] = {"tokens", "targets"};
    ts_array in[2] = {ts_array_i32(tokens, 2, (int64_t[]){B, T}), ts_array_i32(targets, 2, (int64_t[]){B, T})};
    return ts_model_run(m, names, in, 2);
}

static ts_model *gpt_model(ts_graph **g, int threads, int what, const char *anchor) {
    ts_gpt_config cfg = {V, T, L, H, C, B};
    ts_gpt gpt;
    *g = ts_graph_new(3);
    CHECK_OK(ts_gpt_build(*g, &cfg, &gpt), "build the GPT");
    return model(*g, gpt.loss, threads, "blocks.*.attn/*", what, anchor, L);
}

static void gpt_case(void) {
    ts_graph *g1, *g3, *gu;
    ts_model *m1 = gpt_model(&g1, 1, TS_WATCH_STATS, NULL), *m3 = gpt_model(&g3, 3, TS_WATCH_STATS, NULL),
             *mu = gpt_model(&gu, 2, TS_WATCH_STATS, "blocks.%d.attn/Softmax:0"), *mh = NULL;
    ts_graph *gh = NULL;
    if (m1 && m3 && mu) {
        for (int r = 0; r < 2; r++) { /* two runs: a step between, the second's summaries of new weights */
            ts_metrics_reset();
            CHECK_OK(gpt_step(m1), "run %d, one pass", r);
            CHECK(timed("Attention") && !timed("Softmax"), "run %d: every twin tensor watched, the one pass ran", r);
            CHECK_OK(gpt_step(m3), "run %d, one pass on 3 threads", r);
            ts_metrics_reset();
            CHECK_OK(gpt_step(mu), "run %d, the probabilities anchored", r);
            CHECK(timed("Softmax"), "run %d: the probabilities anchored, the twin's ops ran", r);
            int n = 0, same = 0;
            for (int l = 0; l < L; l++)
                for (size_t k = 0; k < sizeof twin_gpt / sizeof *twin_gpt; k++) {
                    char name[64];
                    snprintf(name, sizeof name, twin_gpt[k], l);
                    const ts_summary *a = result(m1, name, r), *c = result(m3, name, r);
                    compare(name, a, result(mu, name, r));
                    n++;
                    same += a && c && memcmp(&a->stats, &c->stats, sizeof a->stats) == 0;
                }
            CHECK(n == 12 && same == n, "run %d: %d of %d twin summaries the same bits on 1 and 3 threads", r, same, n);
        }
        /* a histogram is not the pass's: the twin's ops run */
        mh = gpt_model(&gh, 2, TS_WATCH_STATS | TS_WATCH_HISTOGRAM, NULL);
        ts_metrics_reset();
        if (mh) CHECK_OK(gpt_step(mh), "a step with histograms watched");
        CHECK(mh && timed("Softmax"), "histograms of the twin's tensors watched: the twin's ops ran");
    }
    ts_model_free(m1), ts_model_free(m3), ts_model_free(mu), ts_model_free(mh);
    ts_graph_free(g1), ts_graph_free(g3), ts_graph_free(gu), ts_graph_free(gh);
}

/* Every stability signal (ts_options_watch_stability "*"): the scores'
 * max logit per head is the pass's too, the twin's ops do not run for
 * it; against the same rows with the probabilities anchored */
static void gpt_stability(void) {
    ts_gpt_config cfg = {V, T, L, H, C, B};
    ts_graph *g[2] = {NULL, NULL};
    ts_model *m[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        ts_gpt gpt;
        g[k] = ts_graph_new(3);
        CHECK_OK(ts_gpt_build(g[k], &cfg, &gpt), "build the GPT");
        ts_options *o = ts_options_new();
        ts_status st = ts_options_watch_stability(o, "*", 1);
        for (int l = 0; k == 1 && l < L && !st; l++) {
            char name[64];
            snprintf(name, sizeof name, "blocks.%d.attn/Softmax:0", l);
            st = ts_options_anchor(o, name, name, TS_OUTPUT_FINAL, 0);
        }
        if (!st) st = ts_model_training(&m[k], g[k], gpt.loss, o, ts_adamw(1e-2f, 0.1f));
        if (!st) st = ts_model_compile(m[k]);
        CHECK_OK(st, "a GPT with every stability signal%s", k ? ", the probabilities anchored" : "");
        ts_options_free(o);
    }
    if (m[0] && m[1]) {
        ts_metrics_reset();
        CHECK_OK(gpt_step(m[0]), "a step, stability signals on");
        CHECK(timed("Attention") && !timed("Softmax"), "stability signals on: the one pass ran");
        CHECK_OK(gpt_step(m[1]), "a step, the probabilities anchored");
        const ts_watch_result *a, *b;
        size_t na = 0, nb = 0, n = 0;
        ts_model_watch_results(m[0], &a, &na), ts_model_watch_results(m[1], &b, &nb);
        for (size_t i = 0; i < na; i++)
            for (size_t j = 0; j < nb && strstr(a[i].name, "max_logit"); j++) {
                if (strcmp(a[i].name, b[j].name) != 0) continue;
                double x = a[i].summary->stats.mean, y = b[j].summary->stats.mean;
                CHECK(a[i].run == 0 && b[j].run == 0 && close_to(x, y, 1e-6 * fabs(y)), "%s: %.9g (one pass) / %.9g (twin)", a[i].name, x, y);
                n++;
            }
        CHECK(n == L * H, "%zu max logit rows compared", n);
    }
    for (int k = 0; k < 2; k++) ts_model_free(m[k]), ts_graph_free(g[k]);
}

/* softmax(q k^T / 4, masked keys `fill`) v on q, k, v parameters
 * [NB,NH,TT,SD], a fed mask [NB,1,1,TT]; loss sum(o * w) */
enum { NB = 2, NH = 2, TT = 20, SD = 16 };

static const char *const twin_names[] = {"raw", "scaled", "masked", "probs", "out"};

static ts_tensor *masked_graph(ts_graph *g, const float *init, float fill) {
    int64_t shape[4] = {NB, NH, TT, SD};
    ts_tensor *x[3];
    qkv_params(g, shape, init, x);
    ts_tensor *mask = ts_input(g, "mask", TS_I32, 4, (int64_t[]){NB, 1, 1, TT}), *w = ts_input(g, "w", TS_F32, 4, shape);
    ts_tensor *t[5];
    t[0] = ts_matmul_batched(g, x[0], x[1], 0, 1);
    t[1] = ts_scale(g, t[0], 0.25f);
    t[2] = ts_masked_fill(g, t[1], mask, fill);
    t[3] = ts_softmax(g, t[2], -1);
    t[4] = ts_matmul_batched(g, t[3], x[2], 0, 0);
    for (int i = 0; i < 5; i++) ts_tensor_set_name(t[i], twin_names[i]);
    ts_tensor *o = ts_attention(g, x[0], x[1], x[2], mask, 0.25f, t[4]);
    return ts_sum(g, ts_mul(g, o, w));
}

static void masked_case(const char *what, float fill, const int32_t *mask) {
    int64_t n = NB * NH * TT * SD;
    float *init = malloc((size_t)(3 * n) * sizeof *init), *w = malloc((size_t)n * sizeof *w);
    for (int64_t i = 0; i < 3 * n; i++) init[i] = 2.0f * urand();
    for (int64_t i = 0; i < n; i++) w[i] = urand();
    ts_graph *gf = ts_graph_new(1), *gu = ts_graph_new(1);
    ts_tensor *lf = masked_graph(gf, init, fill), *lu = masked_graph(gu, init, fill);
    const char *pattern = "[rsmpo][a-z]*"; /* raw, scaled, masked, probs, out (and the mask) */
    ts_model *mf = model(gf, lf, 2, pattern, TS_WATCH_STATS, NULL, 0), *mu = model(gu, lu, 2, pattern, TS_WATCH_STATS, "probs", 1);
    const char *in_names[2] = {"mask", "w"};
    ts_array in[2] = {ts_array_i32((int32_t *)mask, 4, (int64_t[]){NB, 1, 1, TT}), ts_array_f32(w, 4, (int64_t[]){NB, NH, TT, SD})};
    if (mf && mu) {
        ts_metrics_reset();
        CHECK_OK(ts_model_run(mf, in_names, in, 2), "%s: the one pass", what);
        CHECK(timed("Attention") && !timed("Softmax"), "%s: the one pass ran", what);
        ts_metrics_reset();
        CHECK_OK(ts_model_run(mu, in_names, in, 2), "%s: the twin's ops", what);
        CHECK(timed("Softmax"), "%s: the twin's ops ran", what);
        printf("%s:\n", what);
        for (int i = 0; i < 5; i++) compare(twin_names[i], result(mf, twin_names[i], 0), result(mu, twin_names[i], 0));
    }
    ts_model_free(mf), ts_model_free(mu);
    ts_graph_free(gf), ts_graph_free(gu);
    free(init), free(w);
}

/* A twin the pass names only in part (an ONNX file's: an additive mask,
 * v through an op of its own, as grouped-query heads' repeat): its
 * probabilities and output are the pass's whatever ops come before;
 * the scores before the softmax are not, and watching them runs the
 * twin */
static ts_tensor *additive_graph(ts_graph *g, const float *init, const float *madd) {
    int64_t shape[4] = {NB, NH, TT, SD}, ms[4] = {NB, 1, 1, TT};
    ts_tensor *x[3];
    qkv_params(g, shape, init, x);
    ts_tensor *mask = ts_input(g, "mask", TS_I32, 4, ms), *w = ts_input(g, "w", TS_F32, 4, shape);
    ts_tensor *bias = ts_constant(g, "bias", &(ts_array){.dtype = TS_F32, .ndim = 4, .shape = {NB, 1, 1, TT}, .data = (void *)madd});
    ts_tensor *sc = ts_add(g, ts_scale(g, ts_matmul_batched(g, x[0], x[1], 0, 1), 0.25f), bias), *pr = ts_softmax(g, sc, -1);
    ts_tensor *out = ts_matmul_batched(g, pr, ts_scale(g, x[2], 1.0f), 0, 0);
    ts_tensor_set_name(sc, "scores"), ts_tensor_set_name(pr, "probs"), ts_tensor_set_name(out, "out");
    ts_tensor *o = ts_attention(g, x[0], x[1], x[2], mask, 0.25f, out);
    return ts_sum(g, ts_mul(g, o, w));
}

static void additive_case(const int32_t *mask) {
    int64_t n = NB * NH * TT * SD;
    float *init = malloc((size_t)(3 * n) * sizeof *init), *w = malloc((size_t)n * sizeof *w), madd[NB * TT];
    for (int64_t i = 0; i < 3 * n; i++) init[i] = 2.0f * urand();
    for (int64_t i = 0; i < n; i++) w[i] = urand();
    for (int i = 0; i < NB * TT; i++) madd[i] = mask[i] ? -INFINITY : 0.0f;
    const char *watches[3] = {"[po]*", "[po]*", "[spo]*"}, *anchors[3] = {NULL, "probs", NULL};
    ts_graph *g[3];
    ts_model *m[3];
    for (int k = 0; k < 3; k++) {
        g[k] = ts_graph_new(1);
        m[k] = model(g[k], additive_graph(g[k], init, madd), 2, watches[k], TS_WATCH_STATS, anchors[k], 1);
    }
    const char *in_names[2] = {"mask", "w"};
    ts_array in[2] = {ts_array_i32((int32_t *)mask, 4, (int64_t[]){NB, 1, 1, TT}), ts_array_f32(w, 4, (int64_t[]){NB, NH, TT, SD})};
    bool ran[3] = {false, false, false};
    for (int k = 0; k < 3 && m[0] && m[1] && m[2]; k++) {
        ts_metrics_reset();
        CHECK_OK(ts_model_run(m[k], in_names, in, 2), "an additive mask's twin, model %d", k);
        ran[k] = timed("Softmax");
    }
    CHECK(!ran[0] && ran[1] && ran[2], "an additive mask's twin: the one pass with its probabilities and output watched (%d), the twin's ops "
          "with them anchored (%d) and with the scores watched (%d)", !ran[0], ran[1], ran[2]);
    printf("an additive mask's twin:\n");
    for (int i = 0; i < 2 && m[0] && m[1]; i++) {
        const char *name = i ? "out" : "probs";
        compare(name, result(m[0], name, 0), result(m[1], name, 0));
    }
    for (int k = 0; k < 3; k++) ts_model_free(m[k]), ts_graph_free(g[k]);
    free(init), free(w);
}

/* Grouped-query heads: one key and value head for the NH query heads,
 * the twin reading them repeated (a Concat); the pass's pairs are the
 * query heads', its summaries the twin's */
static void grouped_case(const int32_t *mask) {
    int64_t qs[4] = {NB, NH, TT, SD}, ks[4] = {NB, 1, TT, SD}, nq = NB * NH * TT * SD, nk = NB * TT * SD;
    float *init = malloc((size_t)(nq + 2 * nk) * sizeof *init), *w = malloc((size_t)nq * sizeof *w);
    for (int64_t i = 0; i < nq + 2 * nk; i++) init[i] = 2.0f * urand();
    for (int64_t i = 0; i < nq; i++) w[i] = urand();
    ts_graph *g[2];
    ts_model *m[2];
    for (int k = 0; k < 2; k++) {
        ts_graph *gk = g[k] = ts_graph_new(1);
        ts_tensor *x[3];
        const int64_t *shape[3] = {qs, ks, ks};
        const float *from[3] = {init, init + nq, init + nq + nk};
        const char *names[3] = {"q", "k", "v"};
        for (int i = 0; i < 3; i++) {
            x[i] = ts_param(gk, names[i], 4, shape[i]);
            ts_array a = ts_array_f32((float *)from[i], 4, shape[i]);
            CHECK_OK(ts_param_set(x[i], &a), "set %s", names[i]);
        }
        ts_tensor *mk = ts_input(gk, "mask", TS_I32, 4, (int64_t[]){NB, 1, 1, TT}), *wt = ts_input(gk, "w", TS_F32, 4, qs);
        ts_tensor *kr = ts_concat(gk, (ts_tensor *[]){x[1], x[1]}, NH, 1), *vr = ts_concat(gk, (ts_tensor *[]){x[2], x[2]}, NH, 1);
        ts_tensor *pr = ts_softmax(gk, ts_masked_fill(gk, ts_scale(gk, ts_matmul_batched(gk, x[0], kr, 0, 1), 0.25f), mk, -1e30f), -1);
        ts_tensor *out = ts_matmul_batched(gk, pr, vr, 0, 0);
        ts_tensor_set_name(pr, "probs"), ts_tensor_set_name(out, "out");
        ts_tensor *o = ts_attention(gk, x[0], x[1], x[2], mk, 0.25f, out);
        m[k] = model(gk, ts_sum(gk, ts_mul(gk, o, wt)), 2, "[po]*", TS_WATCH_STATS, k ? "probs" : NULL, 1);
    }
    const char *in_names[2] = {"mask", "w"};
    ts_array in[2] = {ts_array_i32((int32_t *)mask, 4, (int64_t[]){NB, 1, 1, TT}), ts_array_f32(w, 4, qs)};
    if (m[0] && m[1]) {
        ts_metrics_reset();
        CHECK_OK(ts_model_run(m[0], in_names, in, 2), "grouped-query heads, the one pass");
        CHECK(timed("Attention") && !timed("Softmax"), "grouped-query heads, probabilities and output watched: the one pass ran");
        ts_metrics_reset();
        CHECK_OK(ts_model_run(m[1], in_names, in, 2), "grouped-query heads, the twin");
        CHECK(timed("Softmax"), "grouped-query heads, the probabilities anchored: the twin's ops ran");
        printf("grouped-query heads:\n");
        for (int i = 0; i < 2; i++) {
            const char *name = i ? "out" : "probs";
            compare(name, result(m[0], name, 0), result(m[1], name, 0));
        }
    }
    for (int k = 0; k < 2; k++) ts_model_free(m[k]), ts_graph_free(g[k]);
    free(init), free(w);
}

int main(void) {
    for (int i = 0; i < B * T; i++) tokens[i] = (int32_t)((urand() + 1.0f) * 0.5f * V) % V, targets[i] = (int32_t)((urand() + 1.0f) * 0.5f * V) % V;
    gpt_case();
    gpt_stability();
    int32_t pad[NB * TT];
    for (int j = 0; j < TT; j++) pad[j] = j >= TT - 7, pad[TT + j] = 1; /* sample 0: its last 7 keys padding; sample 1: every key */
    masked_case("padding, a sample all padding, fill -1e30", -1e30f, pad);
    for (int j = 0; j < TT; j++) pad[TT + j] = j % 3 == 1; /* sample 1: every third key */
    masked_case("padding, fill -inf", -INFINITY, pad);
    additive_case(pad);
    grouped_case(pad);
    return check_summary("test_attention_watch");
}
