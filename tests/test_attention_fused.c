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
 * and the probabilities it holds are the anchored ones. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rand.h"
#include "reference.h"
#include "tensorscope.h"

enum { V = 13, T = 70, L = 2, H = 2, C = 16, B = 3, STEPS = 4 };

static int32_t tokens[B * T], targets[B * T];

static ts_model *make(ts_graph *g, const ts_gpt *gpt, bool anchor_probs) {
    ts_options *o = ts_options_new();
    ts_options_anchor(o, "loss", "loss", TS_OUTPUT_ALL, 0);
    for (size_t i = 0; i < ts_graph_tensor_count(g); i++) {
        ts_tensor *t = ts_graph_tensor_at(g, i);
        if (strcmp(ts_tensor_op(t), "Param") != 0) continue;
        char name[256];
        snprintf(name, sizeof name, "Gradient___%s", ts_tensor_name(t));
        ts_options_anchor(o, name, name, TS_OUTPUT_FINAL, 0);
    }
    for (int l = 0; anchor_probs && l < L; l++) {
        char name[64];
        snprintf(name, sizeof name, "blocks.%d.attn/Softmax:0", l);
        ts_options_anchor(o, name, name, TS_OUTPUT_FINAL, 0);
    }
    ts_model *m = NULL;
    ts_status st = ts_model_training(&m, g, gpt->loss, o, ts_adamw(1e-2f, 0.1f));
    if (!st) st = ts_model_compile(m);
    CHECK_OK(st, "a training model (%s)", anchor_probs ? "probabilities anchored" : "nothing of the attention observed");
    ts_options_free(o);
    return st ? NULL : m;
}

static ts_status step(ts_model *m) {
    const char *names[2] = {"tokens", "targets"};
    ts_array in[2] = {ts_array_i32(tokens, 2, (int64_t[]){B, T}), ts_array_i32(targets, 2, (int64_t[]){B, T})};
    return ts_model_run(m, names, in, 2);
}

/* whether the metrics since the last reset time op `op` */
static bool timed(const char *op) {
    char *r = ts_metrics_report(), name[64];
    snprintf(name, sizeof name, "OpTime.%s", op);
    bool yes = r && strstr(r, name) != NULL;
    free(r);
    return yes;
}

static void compare_anchor(ts_model *a, ts_model *b, const char *name, double rtol, double atol) {
    ts_array x, y;
    if (ts_model_anchored(a, name, &x) || ts_model_anchored(b, name, &y)) {
        CHECK(0, "anchor %s on both models: %s", name, ts_last_error());
        return;
    }
    CHECK_RESULT(ts_expect_array_close(name, &x, &y, rtol, atol));
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
    return check_summary("test_attention_fused");
}
