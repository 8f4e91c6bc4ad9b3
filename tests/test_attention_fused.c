/* test_attention_fused.c -- the character GPT's attention in one pass
 * (docs/backend.md, "Fused attention") against its unfused ops.
 *
 * Two GPTs built alike (the same seed, so the same weights) train on the
 * same tokens, T = 70 (two tiles of keys, a causal mask): one observes
 * nothing of its attention (the one pass runs: the run's OpTime metrics
 * name Attention and no Softmax), the other anchors every layer's
 * probabilities (the unfused ops run). The loss and every parameter's
 * gradient agree to float rounding, and so do the losses of 4 AdamW steps
 * and the weights after them (but the key bias: see below). A hold armed on the first model (the
 * inspector) turns its attention back to the unfused ops for that run,
 * and the probabilities it holds are the anchored ones.
 *
 * In bf16 (a model's precision: the twin's products read 16-bit copies of
 * q, k, v and the probabilities) the one pass runs too and reads the
 * values as the twin's products do: the same GPT pair in bf16, and q, k, v
 * parameters under a causal mask over two tiles of keys and under a
 * padding mask with a sample whose keys are all masked, the loss and
 * every gradient against the twin's (and the causal case in f16); a twin
 * that rounds another tensor keeps its unfused ops. Rounding onto bf16 keeps
 * two runs that differ only in the order of their f32 sums apart by a
 * whole bf16 step where a value lies at a rounding boundary, so the
 * comparison is: nearly every value to f32 rounding, every value within
 * a bf16 step; a pass that left out one of the twin's roundings differs
 * in most values. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_case.h"
#include "check.h"
#include "graph/graph.h"
#include "rand.h"
#include "reference.h"
#include "tensorscope.h"

enum { V = 13, T = 70, L = 2, H = 2, C = 16, B = 3, STEPS = 4 };

static int32_t tokens[B * T], targets[B * T];

/* a training model of loss (named "loss"), every parameter's gradient
 * anchored, and with `probs` the probabilities of the layers' attention
 * (the format of their names, layer by layer) */
static ts_model *model(ts_graph *g, ts_tensor *loss, ts_dtype precision, const char *probs, int layers) {
    bool anchor_probs = probs != NULL;
    ts_options *o = ts_options_new();
    if (precision != TS_F32) ts_options_set_precision(o, precision);
    ts_options_set_loss_scaling(o, 0, 65536.0f, 2.0f, 0.5f, 2000); /* gradients compared as computed */
    ts_options_anchor(o, "loss", ts_tensor_name(loss), TS_OUTPUT_ALL, 0);
    for (size_t i = 0; i < ts_graph_tensor_count(g); i++) {
        ts_tensor *t = ts_graph_tensor_at(g, i);
        if (strcmp(ts_tensor_op(t), "Param") != 0) continue;
        char name[256];
        snprintf(name, sizeof name, "Gradient___%s", ts_tensor_name(t));
        ts_options_anchor(o, name, name, TS_OUTPUT_FINAL, 0);
    }
    for (int l = 0; anchor_probs && l < layers; l++) {
        char name[64];
        snprintf(name, sizeof name, probs, l);
        ts_options_anchor(o, name, name, TS_OUTPUT_FINAL, 0);
    }
    ts_model *m = NULL;
    ts_status st = ts_model_training(&m, g, loss, o, ts_adamw(1e-2f, 0.1f));
    if (!st) st = ts_model_compile(m);
    CHECK_OK(st, "a %s training model (%s)", ts_dtype_name(precision), anchor_probs ? "probabilities anchored" : "nothing of the attention observed");
    ts_options_free(o);
    return st ? NULL : m;
}

static ts_model *make(ts_graph *g, const ts_gpt *gpt, bool anchor_probs) {
    return model(g, gpt->loss, TS_F32, anchor_probs ? "blocks.%d.attn/Softmax:0" : NULL, L);
}

static ts_status step(ts_model *m) {
    const char *names[2] = {"tokens", "targets"};
    ts_array in[2] = {ts_array_i32(tokens, 2, (int64_t[]){B, T}), ts_array_i32(targets, 2, (int64_t[]){B, T})};
    return ts_model_run(m, names, in, 2);
}

static void compare_anchor(ts_model *a, ts_model *b, const char *name, double rtol, double atol) {
    ts_array x, y;
    if (ts_model_anchored(a, name, &x) || ts_model_anchored(b, name, &y)) {
        CHECK(0, "anchor %s on both models: %s", name, ts_last_error());
        return;
    }
    CHECK_RESULT(ts_expect_array_close(name, &x, &y, rtol, atol));
}

/* got against want (n values), where the twin rounds to bf16: at most
 * `frac` of the values beyond f32's rounding (rtol, atol), none beyond a
 * bf16 step (2^-7 of the value, or of a 16th of the largest where it is
 * smaller: a sum whose terms cancel moves by its terms' steps) */
static int close_bf16(const char *what, const float *got, const float *want, int64_t n, double rtol, double atol, double frac) {
    double big = 0;
    for (int64_t i = 0; i < n; i++) big = fabs((double)want[i]) > big ? fabs((double)want[i]) : big;
    int64_t off = 0, far = 0, worst = -1;
    double worst_d = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]), w = fabs((double)want[i]);
        off += !(d <= atol + rtol * w);
        bool out = !(d <= 0x1p-7 * (w > 0x1p-4 * big ? w : 0x1p-4 * big) + atol);
        far += out;
        if (out && (worst < 0 || d > worst_d)) worst = i, worst_d = d;
    }
    bool ok = far == 0 && (double)off <= frac * (double)n;
    printf("%-40s n=%-6lld beyond f32 rounding %lld (%.2f%%, at most %.2f%%), beyond a bf16 step %lld %s", what, (long long)n, (long long)off,
           n ? 100.0 * (double)off / (double)n : 0.0, 100.0 * frac, (long long)far, ok ? "OK" : "MISMATCH");
    if (worst >= 0) printf(": worst [%lld] got %.9g want %.9g", (long long)worst, (double)got[worst], (double)want[worst]);
    printf("\n");
    return ok ? 0 : 1;
}

static void compare_bf16(ts_model *a, ts_model *b, const char *name, double frac) {
    ts_array x, y;
    if (ts_model_anchored(a, name, &x) || ts_model_anchored(b, name, &y)) {
        CHECK(0, "anchor %s on both models: %s", name, ts_last_error());
        return;
    }
    int64_t n = 1;
    for (int d = 0; d < x.ndim; d++) n *= x.shape[d];
    CHECK_RESULT(close_bf16(name, x.data, y.data, n, 1e-5, 1e-7, frac));
}

/* every parameter's gradient of the two models (graph ga's names) */
static int compare_grads(const ts_graph *ga, ts_model *a, ts_model *b, double frac) {
    int grads = 0;
    for (size_t i = 0; i < ts_graph_tensor_count(ga); i++) {
        ts_tensor *t = ts_graph_tensor_at(ga, i);
        if (strcmp(ts_tensor_op(t), "Param") != 0) continue;
        char name[256];
        snprintf(name, sizeof name, "Gradient___%s", ts_tensor_name(t));
        compare_bf16(a, b, name, frac);
        grads++;
    }
    return grads;
}

/* The GPT pair of main() in bf16: the one pass taken, the loss and the
 * gradients the twin's */
static void gpt_bf16(void) {
    ts_gpt_config cfg = {V, T, L, H, C, B};
    ts_graph *gf = ts_graph_new(3), *gu = ts_graph_new(3);
    ts_gpt f, u;
    CHECK_OK(ts_gpt_build(gf, &cfg, &f), "build the GPT");
    CHECK_OK(ts_gpt_build(gu, &cfg, &u), "build its twin");
    ts_model *mf = model(gf, f.loss, TS_BF16, NULL, L), *mu = model(gu, u.loss, TS_BF16, "blocks.%d.attn/Softmax:0", L);
    if (mf && mu) {
        ts_metrics_reset();
        CHECK_OK(step(mf), "a bf16 step with the attention in one pass");
        CHECK(timed("Attention") && !timed("Softmax"), "bf16, nothing observes the probabilities: the one pass ran, no softmax");
        ts_metrics_reset();
        CHECK_OK(step(mu), "a bf16 step with the probabilities anchored");
        CHECK(timed("Softmax"), "bf16, the probabilities anchored: the unfused ops ran");
        compare_anchor(mf, mu, "loss", 1e-5, 1e-6);
        int grads = compare_grads(gf, mf, mu, 0.02);
        CHECK(grads == 2 + 12 * L + 2, "bf16: %d parameter gradients compared", grads);
    }
    ts_model_free(mf), ts_model_free(mu);
    ts_graph_free(gf), ts_graph_free(gu);
}

/* softmax(q k^T / sqrt(D), masked) v on q, k, v parameters [NB,NH,TT,SD]
 * (the same random values in both graphs), a mask of shape m (fed), the
 * loss sum(o * w) for a fed random w; the one pass against the twin at a
 * 16-bit precision: the loss, q's, k's and v's gradients */
enum { NB = 2, NH = 2, SD = 16 };

static ts_tensor *masked_graph(ts_graph *g, int64_t TT, int nm, const int64_t *m, const float *init, const char **probs) {
    int64_t shape[4] = {NB, NH, TT, SD};
    ts_tensor *x[3];
    qkv_params(g, shape, init, x);
    ts_tensor *mask = ts_input(g, "mask", TS_I32, nm, m), *w = ts_input(g, "w", TS_F32, 4, shape);
    float scale = 0.25f;
    ts_tensor *p = ts_softmax(g, ts_masked_fill(g, ts_scale(g, ts_matmul_batched(g, x[0], x[1], 0, 1), scale), mask, -1e30f), -1);
    ts_tensor *o = ts_attention(g, x[0], x[1], x[2], mask, scale, ts_matmul_batched(g, p, x[2], 0, 0));
    *probs = ts_tensor_name(p);
    return ts_sum(g, ts_mul(g, o, w));
}

static void masked_case(const char *what, ts_dtype precision, int64_t TT, int nm, const int64_t *m, const int32_t *mask) {
    int64_t n = NB * NH * TT * SD, mn = 1;
    for (int i = 0; i < nm; i++) mn *= m[i];
    float *init = malloc((size_t)(3 * n) * sizeof *init), *w = malloc((size_t)n * sizeof *w);
    for (int64_t i = 0; i < 3 * n; i++) init[i] = 2.0f * urand();
    for (int64_t i = 0; i < n; i++) w[i] = urand();
    ts_graph *gf = ts_graph_new(1), *gu = ts_graph_new(1);
    const char *probs = NULL;
    ts_tensor *lf = masked_graph(gf, TT, nm, m, init, &probs), *lu = masked_graph(gu, TT, nm, m, init, &probs);
    ts_model *mf = model(gf, lf, precision, NULL, 0), *mu = model(gu, lu, precision, probs, 1);
    const char *in_names[2] = {"mask", "w"};
    ts_array in[2] = {ts_array_i32((int32_t *)mask, nm, m), ts_array_f32(w, 4, (int64_t[]){NB, NH, TT, SD})};
    if (mf && mu) {
        ts_metrics_reset();
        CHECK_OK(ts_model_run(mf, in_names, in, 2), "%s: the one pass", what);
        CHECK(timed("Attention") && !timed("Softmax"), "%s: the one pass ran", what);
        CHECK_OK(ts_model_run(mu, in_names, in, 2), "%s: the unfused ops", what);
        printf("%s:\n", what);
        compare_anchor(mf, mu, "loss", 1e-5, 1e-5);
        int grads = compare_grads(gf, mf, mu, 0.01);
        CHECK(grads == 3, "%s: q's, k's and v's gradients compared (%d)", what, grads);
    }
    ts_model_free(mf), ts_model_free(mu);
    ts_graph_free(gf), ts_graph_free(gu);
    free(init), free(w);
}

static void masks_bf16(void) {
    enum { TC = 70, TP = 20 }; /* causal: two tiles of keys */
    int32_t *causal = malloc(TC * TC * sizeof *causal);
    for (int i = 0; i < TC; i++)
        for (int j = 0; j < TC; j++) causal[i * TC + j] = j > i;
    masked_case("bf16, causal mask, T = 70", TS_BF16, TC, 2, (int64_t[]){TC, TC}, causal);
    masked_case("f16, causal mask, T = 70", TS_F16, TC, 2, (int64_t[]){TC, TC}, causal);
    int32_t pad[NB * TP]; /* sample 0: its last 7 keys padding; sample 1: every key */
    for (int j = 0; j < TP; j++) pad[j] = j >= TP - 7, pad[TP + j] = 1;
    masked_case("bf16, padding mask, a sample all padding", TS_BF16, TP, 4, (int64_t[]){NB, 1, 1, TP}, pad);
    free(causal);
}

/* A twin that rounds another tensor to 16 bits (here a scaled copy of q,
 * not q itself) is not one the pass reads as it would: its unfused ops
 * run, with nothing observed */
static void other_cast(void) {
    enum { TT = 8 };
    int64_t shape[4] = {1, 1, TT, SD}, n = TT * SD;
    float *init = malloc((size_t)(3 * n) * sizeof *init), w[TT * SD];
    for (int64_t i = 0; i < 3 * n; i++) init[i] = urand();
    for (int64_t i = 0; i < n; i++) w[i] = urand();
    int32_t mask[TT * TT];
    for (int i = 0; i < TT * TT; i++) mask[i] = i % TT > i / TT;
    ts_graph *g = ts_graph_new(1);
    ts_tensor *x[3];
    for (int i = 0; i < 3; i++) {
        x[i] = ts_param(g, i == 0 ? "q" : i == 1 ? "k" : "v", 4, shape);
        ts_array a = ts_array_f32(init + i * n, 4, shape);
        CHECK_OK(ts_param_set(x[i], &a), "set a parameter");
    }
    ts_tensor *m = ts_input(g, "mask", TS_I32, 2, (int64_t[]){TT, TT}), *wt = ts_input(g, "w", TS_F32, 4, shape);
    ts_tensor *q16 = ts_cast(g, ts_scale(g, x[0], 0.25f), TS_BF16);
    ts_tensor *p = ts_softmax(g, ts_masked_fill(g, ts_matmul_batched(g, q16, x[1], 0, 1), m, -1e30f), -1);
    ts_tensor *o = ts_attention(g, x[0], x[1], x[2], m, 0.25f, ts_matmul_batched(g, p, x[2], 0, 0));
    ts_model *md = model(g, ts_sum(g, ts_mul(g, o, wt)), TS_F32, NULL, 0);
    const char *names[2] = {"mask", "w"};
    ts_array in[2] = {ts_array_i32(mask, 2, (int64_t[]){TT, TT}), ts_array_f32(w, 4, shape)};
    if (md) {
        ts_metrics_reset();
        CHECK_OK(ts_model_run(md, names, in, 2), "a step with a twin that rounds a scaled q");
        CHECK(timed("Softmax"), "a twin rounding a tensor other than q, k, v and the probabilities: its unfused ops ran");
    }
    ts_model_free(md);
    ts_graph_free(g);
    free(init);
}

int main(void) {
    for (int i = 0; i < B * T; i++) tokens[i] = (int32_t)((urand() + 1.0f) * 0.5f * V) % V, targets[i] = (int32_t)((urand() + 1.0f) * 0.5f * V) % V;
    ts_gpt_config cfg = {V, T, L, H, C, B};
    ts_graph *gf = ts_graph_new(3), *gu = ts_graph_new(3);
    ts_gpt f, u;
    CHECK_OK(ts_gpt_build(gf, &cfg, &f), "build the GPT");
    CHECK_OK(ts_gpt_build(gu, &cfg, &u), "build its twin");
    ts_model *mf = make(gf, &f, false), *mu = make(gu, &u, true);
    if (!mf || !mu) return check_summary("test_attention_fused");

    /* one step each: the one pass and the unfused ops */
    ts_metrics_reset();
    CHECK_OK(step(mf), "a step with the attention in one pass");
    CHECK(timed("Attention") && !timed("Softmax"), "nothing observes the probabilities: the one pass ran, no softmax");
    ts_metrics_reset();
    CHECK_OK(step(mu), "a step with the probabilities anchored");
    CHECK(timed("Softmax"), "the probabilities anchored: the unfused ops ran");
    compare_anchor(mf, mu, "loss", 1e-6, 1e-7);
    int grads = 0;
    for (size_t i = 0; i < ts_graph_tensor_count(gf); i++) {
        ts_tensor *t = ts_graph_tensor_at(gf, i);
        if (strcmp(ts_tensor_op(t), "Param") != 0) continue;
        char name[256];
        snprintf(name, sizeof name, "Gradient___%s", ts_tensor_name(t));
        compare_anchor(mf, mu, name, 1e-4, 1e-6);
        grads++;
    }
    CHECK(grads == 2 + 12 * L + 2, "%d parameter gradients compared", grads);

    /* AdamW steps: the same losses and weights */
    for (int s = 1; s < STEPS; s++) {
        CHECK_OK(step(mf), "step %d, one pass", s + 1);
        CHECK_OK(step(mu), "step %d, unfused", s + 1);
        char what[64];
        snprintf(what, sizeof what, "loss after %d steps", s);
        ts_array x, y;
        if (!ts_model_anchored(mf, "loss", &x) && !ts_model_anchored(mu, "loss", &y)) CHECK_RESULT(ts_expect_array_close(what, &x, &y, 1e-5, 1e-6));
    }
    for (size_t i = 0; i < ts_graph_tensor_count(gf); i++) {
        ts_tensor *a = ts_graph_tensor_at(gf, i), *b = ts_graph_tensor_at(gu, i);
        if (strcmp(ts_tensor_op(a), "Param") != 0) continue;
        ts_array x, y;
        ts_tensor_info(a, &x), ts_tensor_info(b, &y);
        if (strstr(ts_tensor_name(a), "attn.qkv.bias")) {
            /* the key bias shifts every score of a row alike, which softmax
             * ignores: its gradient is rounding noise (~1e-9) that Adam's
             * m / sqrt(v) turns into steps of +-lr; its q and v thirds only */
            const float *p = x.data, *r = y.data;
            char label[300];
            snprintf(label, sizeof label, "%s (q)", ts_tensor_name(a));
            int bad = ts_expect_close(label, p, r, C, 1e-4, 1e-5);
            snprintf(label, sizeof label, "%s (v)", ts_tensor_name(a));
            bad |= ts_expect_close(label, p + 2 * C, r + 2 * C, C, 1e-4, 1e-5);
            CHECK_RESULT(bad);
        } else {
            CHECK_RESULT(ts_expect_array_close(ts_tensor_name(a), &x, &y, 1e-4, 1e-5));
        }
    }

    /* a held run: the unfused ops for that run, their probabilities held */
    CHECK_OK(ts_model_hold(mf, 1), "arm a hold");
    ts_metrics_reset();
    CHECK_OK(step(mf), "a held step");
    CHECK(timed("Softmax"), "a held run computes the probabilities");
    CHECK_OK(step(mu), "the same step unfused");
    ts_array held, anchored;
    if (!ts_model_held(mf, "blocks.1.attn/Softmax:0", &held) && !ts_model_anchored(mu, "blocks.1.attn/Softmax:0", &anchored))
        CHECK_RESULT(ts_expect_array_close("held probabilities", &held, &anchored, 1e-4, 1e-6));
    else
        CHECK(0, "held and anchored probabilities: %s", ts_last_error());
    CHECK_OK(ts_model_hold(mf, 0), "disarm the hold");
    ts_metrics_reset();
    CHECK_OK(step(mf), "a step after the hold");
    CHECK(!timed("Softmax"), "the hold disarmed: the one pass again");

    ts_model_free(mf), ts_model_free(mu);
    ts_graph_free(gf), ts_graph_free(gu);

    gpt_bf16();
    masks_bf16();
    other_cast();
    return check_summary("test_attention_fused");
}
