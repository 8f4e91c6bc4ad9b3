/* test_norm_fused.c -- a Relu done in the output pass of the BatchNorm
 * before it (docs/backend.md, "Relu in the convolution's output pass")
 * gives the bits the separate Relu gives.
 *
 * The kernel: ts_batch_norm_forward with relu NULL, with a Relu output of
 * its own (the norm's kept) and over its output, with batch statistics and
 * running ones, against ts_relu_forward of the norm's output.
 *
 * The model: Conv + BatchNorm + Relu twice (the executor fuses each Relu
 * into its norm) against the same graph with a Scale by 1 between each
 * norm and its Relu (exact, and not fused). An inference model: the same
 * logits, the anchored first norm keeps its own values (negatives
 * included) with the Relu's max(0, .) of them, and unobserved (the plan
 * keeps each Relu's output apart from its norm's input, which the pass
 * reads: the metrics count both Relus fused); training models, with
 * nothing anchored but the loss and gradients (the Relu written over the
 * norm's output) and with the norm and the Relu anchored: the same losses,
 * weight gradients and anchored values, to the bit, over SGD steps.
 *
 * Likewise a LayerNorm's following Gelu (exact and tanh), Erf or Relu
 * (docs/backend.md, "An activation in a norm's output pass"): the kernel
 * with the op apart and over its output, against ts_ew_unary_forward
 * (ts_relu_forward) of the norm's output on 2 threads, rows of 37 and 128;
 * a model of LayerNorm + Gelu + Linear + LayerNorm + Relu + Linear against
 * the same graph with a Scale by 1 after each norm: the same logits,
 * losses, weight gradients and anchored values, to the bit. The same for
 * RMSNorm, whose row shares the output pass (its kernel with Gelu, Gelu
 * tanh and Relu; the model with RMSNorms in place of the LayerNorms). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "seeded.h"
#include "backend/cpu/cnn.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/kernels_tensor.h"
#include "backend/ew_math.h"
#include "backend/pool.h"

/* ---- the kernel, on [N, C, inner] with a tail of inner past the vectors */
static void bn_relu_case(ts_pool *p, int64_t N, int64_t C, int64_t inner, bool batch, const char *what) {
    int64_t n = N * C * inner;
    size_t bytes = (size_t)n * sizeof(float);
    float *x = malloc(bytes), *y0 = malloc(bytes), *r0 = malloc(bytes), *y1 = malloc(bytes), *r1 = malloc(bytes);
    float *w = malloc((size_t)C * sizeof *w), *b = malloc((size_t)C * sizeof *b), *rm = malloc((size_t)C * sizeof *rm),
          *rv = malloc((size_t)C * sizeof *rv), *stats = malloc((size_t)(2 * C) * sizeof *stats);
    if (!x || !y0 || !r0 || !y1 || !r1 || !w || !b || !rm || !rv || !stats) {
        CHECK(0, "%s: out of memory", what);
        goto done;
    }
    seeded_fill(x, n, 41), seeded_fill(w, C, 42), seeded_fill(b, C, 43), seeded_fill(rm, C, 44), seeded_fill(rv, C, 45);
    for (int64_t c = 0; c < C; c++) rv[c] = 0.5f + fabsf(rv[c]), b[c] *= 0.5f;
    ts_batch_norm_forward(p, y0, stats, x, w, b, rm, rv, N, C, inner, 1e-5f, 0.1f, batch, false, NULL);
    ts_relu_forward(p, r0, y0, n);
    int neg = 0;
    for (int64_t i = 0; i < n; i++) neg += y0[i] < 0.0f;
    CHECK(neg > 0 && neg < n, "%s: outputs of both signs (%d of %lld negative)", what, neg, (long long)n);
    for (int64_t i = 0; i < n; i++) y1[i] = r1[i] = NAN;
    ts_batch_norm_forward(p, y1, stats, x, w, b, rm, rv, N, C, inner, 1e-5f, 0.1f, batch, false, r1);
    CHECK(memcmp(y0, y1, bytes) == 0 && memcmp(r0, r1, bytes) == 0, "%s, the Relu apart: the norm kept, the Relu's bits", what);
    for (int64_t i = 0; i < n; i++) y1[i] = NAN;
    ts_batch_norm_forward(p, y1, stats, x, w, b, rm, rv, N, C, inner, 1e-5f, 0.1f, batch, false, y1);
    CHECK(memcmp(r0, y1, bytes) == 0, "%s, the Relu over the output: max(0, x) of the same floats, to the bit", what);
done:
    free(x), free(y0), free(r0), free(y1), free(r1), free(w), free(b), free(rm), free(rv), free(stats);
}

/* ---- the model */
enum { B = 4, CI = 3, HW = 9, CO = 8, K = 5, STEPS = 3 };

static float xs[B * CI * HW * HW];
static int32_t ys[B];

static ts_tensor *block(ts_graph *g, ts_tensor *x, int64_t ic, const char *conv, const char *bn, const char *relu, bool apart) {
    ts_conv2d_params pad = {.pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1};
    ts_tensor *w = ts_param(g, conv, 4, (int64_t[]){CO, ic, 3, 3});
    ts_tensor *h = ts_batch_norm_layer(g, ts_conv2d(g, x, w, NULL, &pad), bn);
    h = ts_relu(g, apart ? ts_scale(g, h, 1.0f) : h);
    ts_tensor_set_name(h, relu);
    return h;
}

static ts_graph *cnn(bool apart, ts_tensor **loss, ts_tensor **out) {
    ts_graph *g = ts_graph_new(9);
    ts_tensor *x = ts_input(g, "x", TS_F32, 4, (int64_t[]){B, CI, HW, HW});
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){B});
    ts_tensor *h = block(g, x, CI, "c1.weight", "bn1", "r1", apart);
    h = block(g, h, CO, "c2.weight", "bn2", "r2", apart);
    h = ts_flatten(g, ts_global_avg_pool2d(g, h), 1);
    h = ts_matmul_t(g, h, ts_param(g, "fc.weight", 2, (int64_t[]){K, CO}));
    ts_tensor_set_name(h, "logits");
    *out = h;
    *loss = ts_nll_loss(g, ts_log_softmax(g, h, 1), y);
    ts_tensor_set_name(*loss, "loss");
    seeded_params(g, 0.4f);
    return g;
}

static ts_status run(ts_model *m) {
    const char *names[2] = {"x", "labels"};
    ts_array in[2] = {ts_array_f32(xs, 4, (int64_t[]){B, CI, HW, HW}), ts_array_i32(ys, 1, (int64_t[]){B})};
    return ts_model_run(m, names, in, 2);
}

/* The anchored norm "bn" of m keeps its own values, negatives included,
 * and the anchored Relu "r" is max(0, .) of them, to the bit. */
static void norm_and_relu(ts_model *m, const char *what) {
    ts_array bn, r;
    if (ts_model_anchored(m, "bn", &bn) || ts_model_anchored(m, "r", &r)) {
        CHECK(0, "%s: bn1 and r1 anchored", what);
        return;
    }
    int neg = 0, off = 0;
    for (int64_t i = 0; i < B * CO * HW * HW; i++) {
        float c = ((const float *)bn.data)[i], v = ((const float *)r.data)[i], want = c < 0.0f ? 0.0f : c;
        neg += c < 0.0f, off += memcmp(&v, &want, sizeof v) != 0;
    }
    CHECK(neg > 0 && off == 0, "%s: the anchored norm keeps its own values (%d negative), its Relu max(0, .) of them (%d off)", what, neg,
          off);
}


static ts_model *model(ts_graph *g, ts_tensor *loss, ts_tensor *out, bool training, bool observed) {
    static const char *const seen[] = {"bn", "bn1/BatchNorm:0", "r", "r1", NULL};
    static const char *const trained[] = {"dw1", "Gradient___c1.weight", "dw2", "Gradient___c2.weight", "dg1", "Gradient___bn1.weight", NULL};
    return twin_model(g, loss, out, training, TS_F32, NULL, observed ? seen : NULL, trained, observed ? "observed" : "unobserved");
}

static void bn_relu_models(void) {
    seeded_fill(xs, B * CI * HW * HW, 31);
    for (int i = 0; i < B; i++) ys[i] = i % K;
    ts_tensor *loss[2], *out[2];
    ts_graph *g[2] = {cnn(false, &loss[0], &out[0]), cnn(true, &loss[1], &out[1])};
    for (int observed = 0; observed < 2; observed++) {
        ts_model *inf[2] = {model(g[0], loss[0], out[0], false, observed), model(g[1], loss[1], out[1], false, observed)};
        const char *how = observed ? "norm and Relu anchored" : "nothing anchored";
        if (inf[0] && inf[1]) {
            ts_metrics_reset();
            CHECK_OK(run(inf[0]), "inference (BatchNorm + Relu, %s)", how);
            int64_t took = ts_counter_get("FusedOps.Relu"); /* both norms' passes took their Relu */
            ts_metrics_reset();
            CHECK_OK(run(inf[1]), "inference (Scale between, %s)", how);
            CHECK(took == 2 && ts_counter_get("FusedOps.Relu") == 0, "inference (%s): FusedOps.Relu counts %lld of 2, none in the twin",
                  how, (long long)took);
            CHECK(same_anchor(inf[0], inf[1], "logits", B * K), "inference (%s): the logits, the same bits", how);
            /* each Relu in its norm's input's cell (the pass writes it over
             * the input element for element): no more activations than the
             * twin's, whose Relus take dead cells */
            ts_model_memory mem[2];
            if (!ts_model_memory_get(inf[0], &mem[0]) && !ts_model_memory_get(inf[1], &mem[1]))
                CHECK(mem[0].activations <= mem[1].activations, "inference (%s): the activations' arena %lld bytes, the twin's %lld", how,
                      (long long)mem[0].activations, (long long)mem[1].activations);
            else
                CHECK(0, "inference (%s): the models' memory read", how);
            if (observed) {
                norm_and_relu(inf[0], "inference");
                CHECK(same_anchor(inf[0], inf[1], "r", B * CO * HW * HW) && same_anchor(inf[0], inf[1], "bn", B * CO * HW * HW),
                      "inference: the anchored norm and Relu, the same bits");
            }
        }
        ts_model_free(inf[0]), ts_model_free(inf[1]);
    }
    for (int observed = 0; observed < 2; observed++) {
        ts_model *tr[2] = {model(g[0], loss[0], out[0], true, observed), model(g[1], loss[1], out[1], true, observed)};
        const char *how = observed ? "norm and Relu anchored" : "nothing anchored";
        for (int s = 0; s < STEPS && tr[0] && tr[1]; s++) {
            ts_metrics_reset();
            CHECK_OK(run(tr[0]), "training step %d (BatchNorm + Relu, %s)", s + 1, how);
            int64_t took = ts_counter_get("FusedOps.Relu"); /* the metrics say the norm's pass took its Relu, never the twin's */
            ts_metrics_reset();
            CHECK_OK(run(tr[1]), "training step %d (Scale between, %s)", s + 1, how);
            CHECK(took > 0 && ts_counter_get("FusedOps.Relu") == 0, "training step %d (%s): FusedOps.Relu counts %lld, none in the twin",
                  s + 1, how, (long long)took);
            CHECK(same_anchor(tr[0], tr[1], "loss", 1), "training step %d (%s): the same loss, to the bit", s + 1, how);
            CHECK(same_anchor(tr[0], tr[1], "dw1", CO * CI * 9) && same_anchor(tr[0], tr[1], "dw2", CO * CO * 9) &&
                      same_anchor(tr[0], tr[1], "dg1", CO),
                  "training step %d (%s): the Convs' and the norm's weight gradients, to the bit", s + 1, how);
            if (!observed) continue;
            norm_and_relu(tr[0], "training");
            CHECK(same_anchor(tr[0], tr[1], "r", B * CO * HW * HW) && same_anchor(tr[0], tr[1], "bn", B * CO * HW * HW),
                  "training step %d: the anchored norm and Relu, the same bits", s + 1);
        }
        ts_model_free(tr[0]), ts_model_free(tr[1]);
    }
    for (int k = 0; k < 2; k++) ts_graph_free(g[k]);
}

/* the norm's forward: LayerNorm's, or RMSNorm's (b unread) */
static void norm_forward(ts_pool *p, bool rms, float *y, float *stats, const float *x, const float *w, const float *b, int64_t rows,
                         int64_t D, const ts_out_act *act) {
    if (rms) ts_rms_norm_forward(p, y, stats, x, w, rows, D, 1e-5f, act);
    else ts_layer_norm_forward(p, y, stats, x, w, b, rows, D, 1e-5f, act);
}

/* ---- LayerNorm (RMSNorm) and the op after it: the kernel, rows of D */
static void ln_act_case(ts_pool *p, int64_t rows, int64_t D, int kind, bool rms, const char *what) {
    int64_t n = rows * D;
    size_t bytes = (size_t)n * sizeof(float);
    float *x = malloc(bytes), *y0 = malloc(bytes), *a0 = malloc(bytes), *y1 = malloc(bytes), *a1 = malloc(bytes);
    float *w = malloc((size_t)D * sizeof *w), *b = malloc((size_t)D * sizeof *b), *stats = malloc((size_t)(2 * rows) * sizeof *stats);
    if (!x || !y0 || !a0 || !y1 || !a1 || !w || !b || !stats) {
        CHECK(0, "%s: out of memory", what);
        goto done;
    }
    seeded_fill(x, n, 51), seeded_fill(w, D, 52), seeded_fill(b, D, 53);
    for (int64_t i = 0; i < n; i++) x[i] *= 3.0f;
    norm_forward(p, rms, y0, stats, x, w, b, rows, D, NULL);
    if (kind == TS_EWU_NONE) ts_relu_forward(p, a0, y0, n);
    else ts_ew_unary_forward(p, kind, a0, y0, 0.0f, 0.0f, n);
    int neg = 0;
    for (int64_t i = 0; i < n; i++) neg += y0[i] < 0.0f;
    CHECK(neg > 0 && neg < n, "%s: outputs of both signs (%d of %lld negative)", what, neg, (long long)n);
    for (int64_t i = 0; i < n; i++) y1[i] = a1[i] = NAN;
    ts_out_act act = {.out = a1, .kind = kind};
    norm_forward(p, rms, y1, stats, x, w, b, rows, D, &act);
    CHECK(memcmp(y0, y1, bytes) == 0 && memcmp(a0, a1, bytes) == 0, "%s, the op apart: the norm kept, the op's bits", what);
    for (int64_t i = 0; i < n; i++) y1[i] = NAN;
    act.out = y1;
    norm_forward(p, rms, y1, stats, x, w, b, rows, D, &act);
    CHECK(memcmp(a0, y1, bytes) == 0, "%s, the op over the output: the op's bits", what);
done:
    free(x), free(y0), free(a0), free(y1), free(a1), free(w), free(b), free(stats);
}

/* ---- LayerNorm (RMSNorm) and the op after it: the model */
enum { LB = 24, LD = 40, LH = 36, LK = 6 };

static float lxs[LB * LD];
static int32_t lys[LB];

static ts_tensor *ln_layer(ts_graph *g, ts_tensor *x, int64_t d, const char *name, bool rms) {
    char wn[32], bn[32];
    snprintf(wn, sizeof wn, "%s.weight", name), snprintf(bn, sizeof bn, "%s.bias", name);
    ts_tensor *h = rms ? ts_rms_norm(g, x, ts_param(g, wn, 1, &d), 1e-5f) : ts_layer_norm(g, x, ts_param(g, wn, 1, &d), ts_param(g, bn, 1, &d), 1, 1e-5f);
    ts_tensor_set_name(h, name);
    return h;
}

static ts_graph *mlp(bool apart, bool rms, ts_tensor **loss, ts_tensor **out) {
    ts_graph *g = ts_graph_new(5);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){LB, LD});
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){LB});
    ts_tensor *h = ln_layer(g, x, LD, "ln1", rms);
    h = ts_gelu(g, apart ? ts_scale(g, h, 1.0f) : h, 0);
    ts_tensor_set_name(h, "gelu");
    h = ln_layer(g, ts_linear(g, h, LH, "fc1"), LH, "ln2", rms);
    h = ts_relu(g, apart ? ts_scale(g, h, 1.0f) : h);
    ts_tensor_set_name(h, "relu");
    h = ts_linear(g, h, LK, "fc2");
    ts_tensor_set_name(h, "logits");
    *out = h;
    *loss = ts_nll_loss(g, ts_log_softmax(g, h, 1), y);
    ts_tensor_set_name(*loss, "loss");
    seeded_params(g, 0.4f);
    return g;
}

static ts_status ln_run(ts_model *m) { return run_xy(m, lxs, 2, (int64_t[]){LB, LD}, lys); }

static ts_model *ln_model(ts_graph *g, ts_tensor *loss, ts_tensor *out, bool training, bool observed, bool rms) {
    static const char *const always[] = {"logits", "logits", NULL};
    static const char *const seen[] = {"ln1", "ln1", "gelu", "gelu", "relu", "relu", NULL};
    static const char *const trained[] = {"dw1", "Gradient___fc1.weight", "dg1", "Gradient___ln1.weight", "dg2", "Gradient___ln2.weight", NULL};
    return twin_model(g, loss, out, training, TS_F32, always, observed ? seen : NULL, trained,
                      rms ? (observed ? "RMSNorm, observed" : "RMSNorm") : observed ? "LayerNorm, observed" : "LayerNorm");
}

static void ln_act_models(bool rms) {
    seeded_fill(lxs, LB * LD, 61);
    for (int i = 0; i < LB; i++) lys[i] = (i * 5 + 1) % LK;
    ts_tensor *loss[2], *out[2];
    ts_graph *g[2] = {mlp(false, rms, &loss[0], &out[0]), mlp(true, rms, &loss[1], &out[1])};
    for (int training = 0; training < 2; training++)
        for (int observed = 0; observed < 2; observed++) {
            ts_model *m[2] = {ln_model(g[0], loss[0], out[0], training, observed, rms), ln_model(g[1], loss[1], out[1], training, observed, rms)};
            char how[80];
            snprintf(how, sizeof how, "%s %s, %s", rms ? "RMSNorm" : "LayerNorm", training ? "training" : "inference",
                     observed ? "norms and ops anchored" : "nothing anchored");
            for (int s = 0; s < (training ? STEPS : 1) && m[0] && m[1]; s++) {
                ts_metrics_reset();
                CHECK_OK(ln_run(m[0]), "%s, run %d (norm + op)", how, s + 1);
                int64_t act = ts_counter_get("FusedOps.Activation"), relu = ts_counter_get("FusedOps.Relu");
                ts_metrics_reset();
                CHECK_OK(ln_run(m[1]), "%s, run %d (Scale between)", how, s + 1);
                CHECK(act == 1 && relu == 1 && ts_counter_get("FusedOps.Activation") + ts_counter_get("FusedOps.Relu") == 0,
                      "%s, run %d: FusedOps counts the norms' Gelu (%lld) and Relu (%lld), none in the twin", how, s + 1, (long long)act,
                      (long long)relu);
                CHECK(same_anchor(m[0], m[1], "logits", LB * LK), "%s, run %d: the logits, to the bit", how, s + 1);
                if (training)
                    CHECK(same_anchor(m[0], m[1], "loss", 1) && same_anchor(m[0], m[1], "dw1", LH * LD) &&
                              same_anchor(m[0], m[1], "dg1", LD) && same_anchor(m[0], m[1], "dg2", LH),
                          "%s, step %d: the loss and weight gradients, to the bit", how, s + 1);
                if (observed)
                    CHECK(same_anchor(m[0], m[1], "ln1", LB * LD) && same_anchor(m[0], m[1], "gelu", LB * LD) &&
                              same_anchor(m[0], m[1], "relu", LB * LH),
                          "%s, run %d: the anchored norm, Gelu and Relu, to the bit", how, s + 1);
            }
            ts_model_free(m[0]), ts_model_free(m[1]);
        }
    ts_graph_free(g[0]), ts_graph_free(g[1]);
}

int main(void) {
    ts_pool *p = NULL;
    CHECK_OK(ts_pool_new(&p, 2), "a pool of 2 threads");
    if (!p) return check_summary("test_norm_fused");
    bn_relu_case(p, 4, 6, 37, true, "batch statistics, a tail past the vectors");
    bn_relu_case(p, 8, 16, 64, true, "batch statistics, 8x8 planes");
    bn_relu_case(p, 3, 5, 21, false, "running statistics");
    bn_relu_case(p, 32, 4, 1, true, "[N, C] (inner 1)");
    ln_act_case(p, 50, 37, TS_EWU_GELU, false, "LayerNorm + Gelu, rows of 37");
    ln_act_case(p, 64, 128, TS_EWU_GELU, false, "LayerNorm + Gelu, rows of 128");
    ln_act_case(p, 50, 37, TS_EWU_GELU_TANH, false, "LayerNorm + Gelu (tanh), rows of 37");
    ln_act_case(p, 50, 37, TS_EWU_ERF, false, "LayerNorm + Erf, rows of 37");
    ln_act_case(p, 50, 37, TS_EWU_SILU, false, "LayerNorm + Silu, rows of 37");
    ln_act_case(p, 64, 128, TS_EWU_NONE, false, "LayerNorm + Relu, rows of 128");
    ln_act_case(p, 50, 37, TS_EWU_GELU, true, "RMSNorm + Gelu, rows of 37");
    ln_act_case(p, 64, 128, TS_EWU_GELU_TANH, true, "RMSNorm + Gelu (tanh), rows of 128");
    ln_act_case(p, 64, 128, TS_EWU_NONE, true, "RMSNorm + Relu, rows of 128");
    ts_pool_free(p);
    bn_relu_models();
    ln_act_models(false);
    ln_act_models(true);
    return check_summary("test_norm_fused");
}
