/* test_anchors.c -- output modes of anchors (docs/architecture.md#output-modes): returned shapes
 * and values for FINAL, EVERY_N, ALL, SUM and DEFAULT, over several device
 * iterations D and gradient accumulations A, for per-micro-batch tensors
 * (input, activation, loss, gradients) and per-step tensors (parameter
 * values, Accum___, UpdatedVar___, SGD momentum, Adam moments and steps).
 *
 * References are independent of the engine: the tiny MLP (4 -> 3 -> 2
 * classes, cross entropy) is evaluated by hand in double from the parameter
 * values, micro-batch by micro-batch; per-step tensors are checked against
 * the optimizers' update relations (PyTorch's formulas) over the anchored
 * ALL rows, and the final parameter values read from the graph. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixture.h"
#include "tensorscope.h"

enum { B = 2, IN = 4, HID = 3, CLS = 2, MAXS = 8 };
#define RTOL 1e-5
#define ATOL 1e-6

static const char *const PARAMS[4] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
static const int64_t PARAM_NUMEL[4] = {HID * IN, HID, CLS * HID, CLS};

typedef struct tiny {
    ts_graph *g;
    ts_tensor *x, *y, *h, *logits, *loss;
} tiny;

static int tiny_build(tiny *t, uint64_t seed) {
    memset(t, 0, sizeof *t);
    t->g = ts_graph_new(seed);
    int64_t xs[] = {B, IN}, ys[] = {B};
    t->x = ts_input(t->g, "x", TS_F32, 2, xs);
    t->y = ts_input(t->g, "labels", TS_I32, 1, ys);
    t->h = ts_linear(t->g, t->x, HID, "fc1");
    t->logits = ts_linear(t->g, ts_relu(t->g, t->h), CLS, "fc2");
    t->loss = ts_cross_entropy(t->g, t->logits, t->y);
    if (t->loss) ts_tensor_set_name(t->loss, "loss");
    return ts_graph_status(t->g) == TS_OK;
}

/* Deterministic inputs: x in [-2, 2), labels in {0, 1}. */
static uint32_t rng_state = 12345u;
static float rnd(void) {
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / (float)(1u << 24) * 4.0f - 2.0f;
}
static void make_inputs(float *x, int32_t *y, int64_t samples) {
    for (int64_t i = 0; i < samples * B * IN; i++) x[i] = rnd();
    for (int64_t i = 0; i < samples * B; i++) y[i] = rnd() > 0.0f;
}

/* ---- the hand reference of one micro-batch */

typedef struct ref_mb {
    float x[B * IN], h[B * HID], logits[B * CLS], loss;
    float g_logits[B * CLS], g_b2[CLS];
} ref_mb;

/* params: fc1.weight [HID,IN], fc1.bias, fc2.weight [CLS,HID], fc2.bias. */
static void ref_forward(const float *const p[4], const float *x, const int32_t *y, ref_mb *r) {
    memcpy(r->x, x, sizeof r->x);
    double loss = 0.0, gb[CLS] = {0};
    for (int i = 0; i < B; i++) {
        double relu[HID], z[CLS], zmax = -INFINITY, se = 0.0;
        for (int j = 0; j < HID; j++) {
            double s = p[1][j];
            for (int k = 0; k < IN; k++) s += (double)p[0][j * IN + k] * x[i * IN + k];
            r->h[i * HID + j] = (float)s;
            relu[j] = s > 0 ? s : 0;
        }
        for (int c = 0; c < CLS; c++) {
            double s = p[3][c];
            for (int j = 0; j < HID; j++) s += (double)p[2][c * HID + j] * relu[j];
            z[c] = s;
            r->logits[i * CLS + c] = (float)s;
            zmax = s > zmax ? s : zmax;
        }
        for (int c = 0; c < CLS; c++) se += exp(z[c] - zmax);
        double lse = zmax + log(se);
        loss += lse - z[y[i]];
        for (int c = 0; c < CLS; c++) {
            double g = (exp(z[c] - lse) - (c == y[i])) / B;
            r->g_logits[i * CLS + c] = (float)g;
            gb[c] += g;
        }
    }
    r->loss = (float)(loss / B);
    for (int c = 0; c < CLS; c++) r->g_b2[c] = (float)gb[c];
}

static void graph_params(const tiny *t, const float *p[4]) {
    for (int k = 0; k < 4; k++) {
        ts_array a;
        ts_tensor_info(ts_graph_find(t->g, PARAMS[k]), &a);
        p[k] = a.data;
    }
}

/* ---- one anchored tensor against per-sample reference rows */

typedef struct spec {
    const char *tensor;
    int ndim;
    int64_t shape[2];
    size_t offset; /* of its values in ref_mb */
} spec;

static const spec SPECS[] = {
    {"x", 2, {B, IN}, offsetof(ref_mb, x)},
    {"fc1/Add:0", 2, {B, HID}, offsetof(ref_mb, h)},
    {"fc2/Add:0", 2, {B, CLS}, offsetof(ref_mb, logits)},
    {"loss", 0, {0, 0}, offsetof(ref_mb, loss)},
    {"Gradient___fc2.bias", 1, {CLS, 0}, offsetof(ref_mb, g_b2)},
    {"Gradient___fc2/Add:0", 2, {B, CLS}, offsetof(ref_mb, g_logits)},
};
#define N_SPECS ((int)(sizeof SPECS / sizeof SPECS[0]))

static int64_t spec_numel(const spec *s) {
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++) n *= s->shape[i];
    return n;
}
static const float *ref_row(const ref_mb *r, const spec *s) { return (const float *)(const void *)((const char *)r + s->offset); }

/* Checks anchor `short_name` (mode resolved, never DEFAULT) of tensor `s`
 * over S samples whose reference values are rows[0..S). */
static void expect_mode(const ts_model *m, const char *short_name, const spec *s, ts_output_mode mode, int N, const ref_mb *rows,
                        int64_t S, const char *ctx) {
    ts_array got;
    char what[160];
    snprintf(what, sizeof what, "%s %s", ctx, short_name);
    ts_status st = ts_model_anchored(m, short_name, &got);
    if (st) {
        CHECK_OK(st, "%s retrieved", what);
        return;
    }
    int64_t n = spec_numel(s), kept = mode == TS_OUTPUT_ALL ? S : mode == TS_OUTPUT_EVERY_N ? S / N : 1;
    int axis = mode == TS_OUTPUT_ALL || mode == TS_OUTPUT_EVERY_N;
    int shape_ok = got.dtype == TS_F32 && got.ndim == s->ndim + axis && (!axis || got.shape[0] == kept);
    for (int i = 0; shape_ok && i < s->ndim; i++) shape_ok = got.shape[axis + i] == s->shape[i];
    char sh[96];
    CHECK(shape_ok, "%s shape %s (mode %s, S=%lld)", what, ts_array_shape_str(&got, sh, sizeof sh), ts_output_mode_name(mode), (long long)S);
    if (!shape_ok) return;
    float *want = calloc((size_t)(kept * n), sizeof *want);
    for (int64_t r = 0; r < kept; r++) {
        float *w = want + r * n;
        if (mode == TS_OUTPUT_ALL) memcpy(w, ref_row(&rows[r], s), (size_t)n * sizeof *w);
        else if (mode == TS_OUTPUT_EVERY_N) memcpy(w, ref_row(&rows[(r + 1) * N - 1], s), (size_t)n * sizeof *w);
        else if (mode == TS_OUTPUT_FINAL) memcpy(w, ref_row(&rows[S - 1], s), (size_t)n * sizeof *w);
        else
            for (int64_t i = 0; i < S; i++)
                for (int64_t k = 0; k < n; k++) w[k] += ref_row(&rows[i], s)[k];
    }
    CHECK_RESULT(ts_expect_close(what, got.data, want, kept * n, RTOL, ATOL));
    free(want);
}

static int smallest_divisor(int64_t S) {
    for (int d = 2; d <= S; d++)
        if (S % d == 0) return d;
    return 1;
}

static ts_model *compile_training(const tiny *t, ts_options *o, ts_optimizer opt, const char *what) {
    ts_model *m = NULL;
    ts_status st = ts_model_training(&m, t->g, t->loss, o, opt);
    if (!st) st = ts_model_compile(m);
    CHECK_OK(st, "compile %s", what);
    if (st) {
        ts_model_free(m);
        return NULL;
    }
    return m;
}

static ts_status run_model(ts_model *m, float *x, int32_t *y, int64_t S) {
    const char *names[2] = {"x", "labels"};
    ts_array in[2] = {ts_array_f32(x, 2, (int64_t[]){S * B, IN}), ts_array_i32(y, 1, (int64_t[]){S * B})};
    return ts_model_run(m, names, in, 2);
}

typedef struct mode_case {
    const char *suffix;
    ts_output_mode mode;
} mode_case;

/* Every mode on every per-micro-batch tensor, training with lr = 0 (so the
 * parameters stay put and the hand reference applies to each micro-batch),
 * or inference (D samples; DEFAULT = ALL). */
static void test_per_microbatch(int D, int A, int training) {
    tiny t;
    if (!tiny_build(&t, 7)) {
        CHECK(0, "build tiny MLP: %s", ts_last_error());
        return;
    }
    int64_t S = (int64_t)D * A;
    int N = smallest_divisor(S);
    char ctx[64];
    snprintf(ctx, sizeof ctx, "%s D=%d A=%d", training ? "train" : "infer", D, A);
    ts_options *o = ts_options_new();
    ts_options_set_device_iterations(o, D);
    ts_options_set_gradient_accumulation(o, A);
    const mode_case modes[] = {{"all", TS_OUTPUT_ALL}, {"final", TS_OUTPUT_FINAL}, {"sum", TS_OUTPUT_SUM},
                               {"every_n", TS_OUTPUT_EVERY_N}, {"every_s", TS_OUTPUT_EVERY_N}, {"default", TS_OUTPUT_DEFAULT}};
    int n_modes = (int)(sizeof modes / sizeof modes[0]);
    int n_specs = training ? N_SPECS : 3; /* inference: x and activations only */
    char sn[128];
    for (int k = 0; k < n_specs; k++)
        for (int q = 0; q < n_modes; q++) {
            snprintf(sn, sizeof sn, "%s|%s", SPECS[k].tensor, modes[q].suffix);
            int period = q == 3 ? N : q == 4 ? (int)S : 0;
            ts_status st = ts_options_anchor(o, sn, SPECS[k].tensor, modes[q].mode, period);
            if (st) CHECK_OK(st, "anchor %s", sn);
        }
    ts_model *m = NULL;
    if (training) m = compile_training(&t, o, ts_sgd(0.0f, 0.0f, 0.0f), ctx);
    else {
        ts_status st = ts_model_inference(&m, t.g, &t.logits, 1, o);
        if (!st) st = ts_model_compile(m);
        CHECK_OK(st, "compile %s", ctx);
        if (st) ts_model_free(m), m = NULL;
    }
    float *x = malloc(sizeof(float) * (size_t)(S * B * IN));
    int32_t *y = malloc(sizeof(int32_t) * (size_t)(S * B));
    ref_mb rows[MAXS];
    for (int r = 0; m && r < 2; r++) { /* the second run overwrites the first */
        make_inputs(x, y, S);
        const float *p[4];
        graph_params(&t, p);
        for (int64_t i = 0; i < S; i++) ref_forward(p, x + i * B * IN, y + i * B, &rows[i]);
        ts_status st = run_model(m, x, y, S);
        CHECK_OK(st, "%s run %d", ctx, r);
        if (st) break;
        char rc[96];
        snprintf(rc, sizeof rc, "%s run %d", ctx, r);
        for (int k = 0; k < n_specs; k++)
            for (int q = 0; q < n_modes; q++) {
                snprintf(sn, sizeof sn, "%s|%s", SPECS[k].tensor, modes[q].suffix);
                ts_output_mode mode = modes[q].mode;
                if (mode == TS_OUTPUT_DEFAULT) mode = training ? TS_OUTPUT_FINAL : TS_OUTPUT_ALL;
                expect_mode(m, sn, &SPECS[k], mode, q == 3 ? N : (int)S, rows, S, rc);
            }
        if (training) /* the loss is anchored under its own name, DEFAULT = FINAL */
            expect_mode(m, "loss", &SPECS[3], TS_OUTPUT_FINAL, 1, rows, S, rc);
        else /* the output under its own name, DEFAULT = ALL */
            expect_mode(m, "fc2/Add:0", &SPECS[2], TS_OUTPUT_ALL, 1, rows, S, rc);
    }
    free(x);
    free(y);
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(t.g);
}

/* ---- per-step tensors */

static const float *anchored_rows(const ts_model *m, const char *short_name, int ndim, int64_t rows, int64_t numel, const char *ctx) {
    ts_array a;
    ts_status st = ts_model_anchored(m, short_name, &a);
    if (st) {
        CHECK_OK(st, "%s %s retrieved", ctx, short_name);
        return NULL;
    }
    int ok = a.dtype == TS_F32 && a.ndim == ndim && ts_array_numel(&a) == rows * numel && (ndim == 0 || rows == 1 || a.shape[0] == rows);
    char sh[96];
    CHECK(ok, "%s %s shape %s", ctx, short_name, ts_array_shape_str(&a, sh, sizeof sh));
    return ok ? a.data : NULL;
}

static int close_to(double got, double want, double rtol, double atol) { return fabs(got - want) <= atol + rtol * fabs(want); }

/* SGD (optionally with momentum), lr > 0: every step's parameters, the
 * per-micro-batch gradients at those parameters, Accum___ as the mean of a
 * step's gradients in every mode, UpdatedVar___ and Accl___ by the update
 * rule, and the final UpdatedVar___ against the graph's parameter. */
static void test_sgd_steps(int D, int A, float momentum) {
    tiny t;
    if (!tiny_build(&t, 11)) {
        CHECK(0, "build tiny MLP: %s", ts_last_error());
        return;
    }
    const float lr = 0.5f;
    int64_t S = (int64_t)D * A;
    int N = smallest_divisor(D);
    char ctx[80];
    snprintf(ctx, sizeof ctx, "sgd(momentum %.1f) D=%d A=%d", (double)momentum, D, A);
    ts_options *o = ts_options_new();
    ts_options_set_device_iterations(o, D);
    ts_options_set_gradient_accumulation(o, A);
    ts_options_anchor(o, "g", "Gradient___fc2.bias", TS_OUTPUT_ALL, 0);
    ts_options_anchor(o, "acc_all", "Accum___fc2.bias", TS_OUTPUT_ALL, 0);
    ts_options_anchor(o, "acc_final", "Accum___fc2.bias", TS_OUTPUT_FINAL, 0);
    ts_options_anchor(o, "acc_sum", "Accum___fc2.bias", TS_OUTPUT_SUM, 0);
    ts_options_anchor(o, "acc_every", "Accum___fc2.bias", TS_OUTPUT_EVERY_N, N);
    ts_options_anchor(o, "acc_default", "Accum___fc2.bias", TS_OUTPUT_DEFAULT, 0);
    ts_options_anchor(o, "upd_all", "UpdatedVar___fc2.bias", TS_OUTPUT_ALL, 0);
    ts_options_anchor(o, "upd_final", "UpdatedVar___fc2.bias", TS_OUTPUT_FINAL, 0);
    if (momentum != 0.0f) ts_options_anchor(o, "accl_all", "Accl___fc2.bias", TS_OUTPUT_ALL, 0);
    for (int k = 0; k < 4; k++) ts_options_anchor(o, PARAMS[k], PARAMS[k], TS_OUTPUT_ALL, 0); /* before each step */
    ts_model *m = compile_training(&t, o, ts_sgd(lr, momentum, 0.0f), ctx);
    float *x = malloc(sizeof(float) * (size_t)(S * B * IN));
    int32_t *y = malloc(sizeof(int32_t) * (size_t)(S * B));
    float prev[CLS], accl_prev[CLS] = {0};
    const float *p0[4];
    graph_params(&t, p0);
    memcpy(prev, p0[3], sizeof prev);
    int64_t steps_done = 0;
    for (int r = 0; m && r < 2; r++) {
        char rc[112];
        snprintf(rc, sizeof rc, "%s run %d", ctx, r);
        make_inputs(x, y, S);
        ts_status st = run_model(m, x, y, S);
        CHECK_OK(st, "%s", rc);
        if (st) break;
        const float *g = anchored_rows(m, "g", 2, S, CLS, rc);
        const float *acc = anchored_rows(m, "acc_all", 2, D, CLS, rc);
        const float *acc_final = anchored_rows(m, "acc_final", 1, 1, CLS, rc);
        const float *acc_sum = anchored_rows(m, "acc_sum", 1, 1, CLS, rc);
        const float *acc_every = anchored_rows(m, "acc_every", 2, D / N, CLS, rc);
        const float *acc_default = anchored_rows(m, "acc_default", 1, 1, CLS, rc);
        const float *upd = anchored_rows(m, "upd_all", 2, D, CLS, rc);
        const float *upd_final = anchored_rows(m, "upd_final", 1, 1, CLS, rc);
        const float *accl = momentum != 0.0f ? anchored_rows(m, "accl_all", 2, D, CLS, rc) : NULL;
        const float *pv[4];
        for (int k = 0; k < 4; k++) pv[k] = anchored_rows(m, PARAMS[k], k == 0 || k == 2 ? 3 : 2, D, PARAM_NUMEL[k], rc);
        if (!g || !acc || !acc_final || !acc_sum || !acc_every || !acc_default || !upd || !upd_final || (momentum != 0.0f && !accl) ||
            !pv[0] || !pv[1] || !pv[2] || !pv[3])
            break;
        int ok_grad = 1, ok_mean = 1, ok_val = 1, ok_upd = 1, ok_accl = 1;
        for (int d = 0; d < D; d++) {
            /* the parameters the step started from, anchored per step */
            const float *pd[4];
            for (int k = 0; k < 4; k++) pd[k] = pv[k] + d * PARAM_NUMEL[k];
            for (int c = 0; c < CLS; c++) ok_val &= pd[3][c] == (d == 0 ? prev[c] : upd[(d - 1) * CLS + c]);
            double mean[CLS] = {0};
            for (int a = 0; a < A; a++) {
                int64_t mb = (int64_t)d * A + a;
                ref_mb ref;
                ref_forward(pd, x + mb * B * IN, y + mb * B, &ref);
                for (int c = 0; c < CLS; c++) {
                    ok_grad &= close_to(g[mb * CLS + c], ref.g_b2[c], RTOL, ATOL);
                    mean[c] += (double)g[mb * CLS + c] / A;
                }
            }
            for (int c = 0; c < CLS; c++) {
                double ac = acc[d * CLS + c];
                ok_mean &= close_to(ac, mean[c], RTOL, 1e-7);
                double buf = ac;
                if (momentum != 0.0f) {
                    buf = steps_done + d == 0 ? ac : momentum * accl_prev[c] + ac;
                    ok_accl &= close_to(accl[d * CLS + c], buf, RTOL, 1e-7);
                    buf = accl[d * CLS + c];
                    accl_prev[c] = accl[d * CLS + c];
                }
                double from = d == 0 ? prev[c] : upd[(d - 1) * CLS + c];
                ok_upd &= close_to(upd[d * CLS + c], from - lr * buf, RTOL, 1e-7);
            }
        }
        CHECK(ok_val, "%s fc2.bias ALL row d = the parameter before step d (row 0 = the previous run's last UpdatedVar___)", rc);
        CHECK(ok_grad, "%s Gradient___fc2.bias ALL rows = hand gradients at each step's parameters", rc);
        CHECK(ok_mean, "%s Accum___ ALL row d = mean of the step's %d Gradient___ samples", rc, A);
        CHECK(ok_upd, "%s UpdatedVar___ ALL row d = previous - lr * %s", rc, momentum != 0.0f ? "Accl___" : "Accum___");
        if (momentum != 0.0f) CHECK(ok_accl, "%s Accl___ ALL row d = momentum * previous + Accum___ (first step: Accum___)", rc);
        int ok_f = 1, ok_s = 1, ok_e = 1, ok_d = 1;
        for (int c = 0; c < CLS; c++) {
            double sum = 0;
            for (int d = 0; d < D; d++) sum += acc[d * CLS + c];
            ok_s &= close_to(acc_sum[c], sum, RTOL, 1e-7);
            ok_f &= acc_final[c] == acc[(D - 1) * CLS + c];
            ok_d &= acc_default[c] == acc_final[c];
            for (int j = 0; j < D / N; j++) ok_e &= acc_every[j * CLS + c] == acc[((j + 1) * N - 1) * CLS + c];
        }
        CHECK(ok_f, "%s Accum___ FINAL = last ALL row", rc);
        CHECK(ok_s, "%s Accum___ SUM = sum of this run's ALL rows", rc);
        CHECK(ok_e, "%s Accum___ EVERY_N(%d) = ALL rows N-1, 2N-1, ...", rc, N);
        CHECK(ok_d, "%s Accum___ DEFAULT (training) = FINAL", rc);
        const float *now[4];
        graph_params(&t, now);
        CHECK(memcmp(upd_final, now[3], sizeof(float) * CLS) == 0 && memcmp(upd_final, upd + (D - 1) * CLS, sizeof(float) * CLS) == 0,
              "%s UpdatedVar___ FINAL = last ALL row = the graph's fc2.bias after the run", rc);
        CHECK(ts_model_steps(m) == steps_done + D, "%s model steps %lld", rc, (long long)ts_model_steps(m));
        memcpy(prev, now[3], sizeof prev);
        steps_done += D;
    }
    free(x);
    free(y);
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(t.g);
}

/* Adam: Accl1___/Accl2___ follow the moment recurrences, Step___ counts the
 * steps across runs, UpdatedVar___ follows the bias-corrected update. */
static void test_adam_steps(int D, int A) {
    tiny t;
    if (!tiny_build(&t, 13)) {
        CHECK(0, "build tiny MLP: %s", ts_last_error());
        return;
    }
    int64_t S = (int64_t)D * A;
    char ctx[64];
    snprintf(ctx, sizeof ctx, "adam D=%d A=%d", D, A);
    ts_optimizer opt = ts_adam(0.01f);
    ts_options *o = ts_options_new();
    ts_options_set_device_iterations(o, D);
    ts_options_set_gradient_accumulation(o, A);
    ts_options_anchor(o, "acc", "Accum___fc2.bias", TS_OUTPUT_ALL, 0);
    ts_options_anchor(o, "m", "Accl1___fc2.bias", TS_OUTPUT_ALL, 0);
    ts_options_anchor(o, "v", "Accl2___fc2.bias", TS_OUTPUT_ALL, 0);
    ts_options_anchor(o, "step", "Step___fc2.bias", TS_OUTPUT_ALL, 0);
    ts_options_anchor(o, "step_final", "Step___fc2.bias", TS_OUTPUT_FINAL, 0);
    ts_options_anchor(o, "m_sum", "Accl1___fc2.bias", TS_OUTPUT_SUM, 0);
    ts_options_anchor(o, "upd", "UpdatedVar___fc2.bias", TS_OUTPUT_ALL, 0);
    ts_model *m = compile_training(&t, o, opt, ctx);
    float *x = malloc(sizeof(float) * (size_t)(S * B * IN));
    int32_t *y = malloc(sizeof(int32_t) * (size_t)(S * B));
    double mp[CLS] = {0}, vp[CLS] = {0}, prev[CLS];
    const float *p0[4];
    graph_params(&t, p0);
    for (int c = 0; c < CLS; c++) prev[c] = p0[3][c];
    for (int r = 0; m && r < 2; r++) {
        char rc[96];
        snprintf(rc, sizeof rc, "%s run %d", ctx, r);
        make_inputs(x, y, S);
        ts_status st = run_model(m, x, y, S);
        CHECK_OK(st, "%s", rc);
        if (st) break;
        const float *acc = anchored_rows(m, "acc", 2, D, CLS, rc), *mm = anchored_rows(m, "m", 2, D, CLS, rc),
                    *vv = anchored_rows(m, "v", 2, D, CLS, rc), *step = anchored_rows(m, "step", 1, D, 1, rc),
                    *step_final = anchored_rows(m, "step_final", 0, 1, 1, rc), *m_sum = anchored_rows(m, "m_sum", 1, 1, CLS, rc),
                    *upd = anchored_rows(m, "upd", 2, D, CLS, rc);
        if (!acc || !mm || !vv || !step || !step_final || !m_sum || !upd) break;
        int ok_step = 1, ok_m = 1, ok_v = 1, ok_u = 1, ok_sum = 1;
        for (int d = 0; d < D; d++) {
            double tstep = (double)(r * D + d + 1);
            ok_step &= step[d] == (float)tstep;
            for (int c = 0; c < CLS; c++) {
                double g = acc[d * CLS + c];
                double mw = opt.beta1 * mp[c] + (1.0 - opt.beta1) * g, vw = opt.beta2 * vp[c] + (1.0 - opt.beta2) * g * g;
                ok_m &= close_to(mm[d * CLS + c], mw, RTOL, 1e-8);
                ok_v &= close_to(vv[d * CLS + c], vw, RTOL, 1e-10);
                mp[c] = mm[d * CLS + c], vp[c] = vv[d * CLS + c];
                double mhat = mp[c] / (1.0 - pow(opt.beta1, tstep)), vhat = vp[c] / (1.0 - pow(opt.beta2, tstep));
                double uw = prev[c] - opt.lr * mhat / (sqrt(vhat) + opt.eps);
                ok_u &= close_to(upd[d * CLS + c], uw, RTOL, 1e-6);
                prev[c] = upd[d * CLS + c];
            }
        }
        for (int c = 0; c < CLS; c++) {
            double s = 0;
            for (int d = 0; d < D; d++) s += mm[d * CLS + c];
            ok_sum &= close_to(m_sum[c], s, RTOL, 1e-8);
        }
        CHECK(ok_step, "%s Step___ ALL rows count the steps (%d..%d)", rc, r * D + 1, r * D + D);
        CHECK(step_final[0] == (float)(r * D + D), "%s Step___ FINAL is a scalar = %g", rc, (double)step_final[0]);
        CHECK(ok_m, "%s Accl1___ = beta1 * previous + (1 - beta1) * Accum___", rc);
        CHECK(ok_v, "%s Accl2___ = beta2 * previous + (1 - beta2) * Accum___^2", rc);
        CHECK(ok_u, "%s UpdatedVar___ = previous - lr * mhat / (sqrt(vhat) + eps)", rc);
        CHECK(ok_sum, "%s Accl1___ SUM = sum of this run's ALL rows", rc);
    }
    free(x);
    free(y);
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(t.g);
}

/* ---- global mode, globs, errors */

static void test_global_mode(void) {
    tiny t;
    tiny_build(&t, 17);
    const int D = 4;
    ts_options *o = ts_options_new();
    ts_options_set_device_iterations(o, D);
    ts_options_set_output_mode(o, TS_OUTPUT_SUM, 0);
    ts_options_anchor(o, "x_default", "x", TS_OUTPUT_DEFAULT, 0);
    ts_options_anchor(o, "x_all", "x", TS_OUTPUT_ALL, 0);
    ts_options_anchor(o, "h_final", "fc1/Add:0", TS_OUTPUT_FINAL, 0);
    ts_model *m = compile_training(&t, o, ts_sgd(0.0f, 0.0f, 0.0f), "global SUM");
    float x[D * B * IN];
    int32_t y[D * B];
    make_inputs(x, y, D);
    ref_mb rows[D];
    const float *p[4];
    graph_params(&t, p);
    for (int i = 0; i < D; i++) ref_forward(p, x + i * B * IN, y + i * B, &rows[i]);
    if (m && run_model(m, x, y, D) == TS_OK) {
        expect_mode(m, "x_default", &SPECS[0], TS_OUTPUT_SUM, 1, rows, D, "global SUM:");
        expect_mode(m, "x_all", &SPECS[0], TS_OUTPUT_ALL, 1, rows, D, "global SUM:");
        expect_mode(m, "h_final", &SPECS[1], TS_OUTPUT_FINAL, 1, rows, D, "global SUM:");
        expect_mode(m, "loss", &SPECS[3], TS_OUTPUT_SUM, 1, rows, D, "global SUM (implicit):");
    } else
        CHECK(0, "global SUM run: %s", ts_last_error());
    ts_model_free(m);
    ts_options_free(o);

    /* global EVERY_N with its period; an inference model's outputs follow it */
    o = ts_options_new();
    ts_options_set_device_iterations(o, D);
    ts_options_set_output_mode(o, TS_OUTPUT_EVERY_N, 2);
    ts_options_anchor(o, "x_default", "x", TS_OUTPUT_DEFAULT, 0);
    ts_status st = ts_model_inference(&m, t.g, &t.logits, 1, o);
    if (!st) st = ts_model_compile(m);
    CHECK_OK(st, "compile inference with global EVERY_N(2)");
    if (!st && run_model(m, x, y, D) == TS_OK) {
        expect_mode(m, "x_default", &SPECS[0], TS_OUTPUT_EVERY_N, 2, rows, D, "global EVERY_N(2):");
        expect_mode(m, "fc2/Add:0", &SPECS[2], TS_OUTPUT_EVERY_N, 2, rows, D, "global EVERY_N(2) (output):");
    }
    ts_model_free(m);
    ts_options_free(o);

    /* a global EVERY_N whose period does not divide S fails at compile */
    o = ts_options_new();
    ts_options_set_device_iterations(o, 3);
    ts_options_set_output_mode(o, TS_OUTPUT_EVERY_N, 2);
    st = ts_model_training(&m, t.g, t.loss, o, ts_sgd(0.1f, 0.0f, 0.0f));
    if (!st) st = ts_model_compile(m);
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "every_n"), "global EVERY_N(2) with S=3 is a compile error: %s",
          ts_last_error());
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(t.g);
}

static void test_glob(void) {
    tiny t;
    tiny_build(&t, 19);
    const int D = 2;
    ts_options *o = ts_options_new();
    ts_options_set_device_iterations(o, D);
    CHECK_OK(ts_options_anchor(o, NULL, "Gradient___*", TS_OUTPUT_DEFAULT, 0), "anchor glob Gradient___* with no short name");
    CHECK_OK(ts_options_anchor(o, NULL, "Accum___fc?.bias", TS_OUTPUT_ALL, 0), "anchor glob Accum___fc?.bias ALL");
    CHECK(ts_options_anchor(o, "short", "Gradient___*", TS_OUTPUT_ALL, 0) != TS_OK, "a glob with a short name is refused: %s",
          ts_last_error());
    ts_model *m = compile_training(&t, o, ts_sgd(0.0f, 0.0f, 0.0f), "glob anchors");
    if (!m) {
        ts_options_free(o);
        ts_graph_free(t.g);
        return;
    }
    const char *const *names, *const *anchors;
    size_t n_names = 0, n_anchors = 0;
    ts_model_tensor_names(m, &names, &n_names);
    CHECK_OK(ts_model_anchor_list(m, &anchors, &n_anchors), "anchor list");
    size_t want = 0, found = 0;
    for (size_t i = 0; i < n_names; i++) {
        int grad = strncmp(names[i], "Gradient___", 11) == 0;
        int acc = strcmp(names[i], "Accum___fc1.bias") == 0 || strcmp(names[i], "Accum___fc2.bias") == 0;
        if (!grad && !acc) continue;
        want++;
        for (size_t k = 0; k < n_anchors; k++) found += strcmp(anchors[k], names[i]) == 0;
    }
    CHECK(want >= 6 && found == want && n_anchors == want + 1, "each match anchored under its own name (%zu of %zu, %zu anchors with the loss)",
          found, want, n_anchors);
    float x[D * B * IN];
    int32_t y[D * B];
    make_inputs(x, y, D);
    ref_mb rows[D];
    const float *p[4];
    graph_params(&t, p);
    for (int i = 0; i < D; i++) ref_forward(p, x + i * B * IN, y + i * B, &rows[i]);
    if (run_model(m, x, y, D) == TS_OK) {
        expect_mode(m, "Gradient___fc2.bias", &SPECS[4], TS_OUTPUT_FINAL, 1, rows, D, "glob:");
        expect_mode(m, "Gradient___fc2/Add:0", &SPECS[5], TS_OUTPUT_FINAL, 1, rows, D, "glob:");
        for (int k = 0; k < 4; k++) {
            char nm[64];
            snprintf(nm, sizeof nm, "Gradient___%s", PARAMS[k]);
            ts_array a, pa;
            ts_tensor_info(ts_graph_find(t.g, PARAMS[k]), &pa);
            ts_status st = ts_model_anchored(m, nm, &a);
            CHECK(st == TS_OK && a.ndim == pa.ndim && ts_array_numel(&a) == ts_array_numel(&pa), "glob: %s has its parameter's shape", nm);
        }
        /* A = 1: Accum___ aliases the gradient, one row per step */
        ts_array a;
        ts_status st = ts_model_anchored(m, "Accum___fc2.bias", &a);
        CHECK(st == TS_OK && a.ndim == 2 && a.shape[0] == D && a.shape[1] == CLS && close_to(((float *)a.data)[CLS], rows[1].g_b2[0], RTOL, ATOL),
              "glob: Accum___fc2.bias ALL is [D,2] and equals the step's gradient (A=1)");
    } else
        CHECK(0, "glob run: %s", ts_last_error());
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(t.g);
}

static void test_errors_and_late_anchor(void) {
    tiny t;
    tiny_build(&t, 23);
    ts_options *o = ts_options_new();
    ts_options_set_device_iterations(o, 3);
    ts_options_anchor(o, "h", "fc1/Add:0", TS_OUTPUT_ALL, 0);
    ts_model *m = compile_training(&t, o, ts_sgd(0.0f, 0.0f, 0.0f), "errors");
    ts_array a;
    CHECK(m && ts_model_anchored(m, "h", &a) == TS_ERR_STATE, "retrieving before the first run is TS_ERR_STATE: %s", ts_last_error());
    float x[3 * B * IN];
    int32_t y[3 * B];
    make_inputs(x, y, 3);
    CHECK_OK(run_model(m, x, y, 3), "run");
    CHECK(ts_model_anchored(m, "nope", &a) == TS_ERR_NOT_FOUND, "an unknown short name is TS_ERR_NOT_FOUND: %s", ts_last_error());
    /* an anchor added after compile recompiles and applies from the next run */
    CHECK_OK(ts_model_anchor(m, "late", "Gradient___fc2.bias", TS_OUTPUT_SUM, 0), "ts_model_anchor after compile");
    CHECK(ts_model_anchor(m, "bad", "fc9/Add:0", TS_OUTPUT_ALL, 0) == TS_ERR_NOT_FOUND, "late anchor of an unknown tensor: %s", ts_last_error());
    CHECK(ts_model_anchor(m, "odd", "x", TS_OUTPUT_EVERY_N, 2) == TS_ERR_INVALID_ARGUMENT, "late EVERY_N(2) with S=3: %s", ts_last_error());
    make_inputs(x, y, 3);
    ref_mb rows[3];
    const float *p[4];
    graph_params(&t, p);
    for (int i = 0; i < 3; i++) ref_forward(p, x + i * B * IN, y + i * B, &rows[i]);
    if (run_model(m, x, y, 3) == TS_OK) {
        expect_mode(m, "late", &SPECS[4], TS_OUTPUT_SUM, 1, rows, 3, "late anchor:");
        expect_mode(m, "h", &SPECS[1], TS_OUTPUT_ALL, 1, rows, 3, "after recompile:");
    } else
        CHECK(0, "run after late anchor: %s", ts_last_error());
    ts_model_free(m);
    ts_options_free(o);

    o = ts_options_new();
    ts_options_anchor(o, "q", "fc1/Add:1", TS_OUTPUT_ALL, 0);
    ts_status st = ts_model_training(&m, t.g, t.loss, o, ts_sgd(0.1f, 0.0f, 0.0f));
    if (!st) st = ts_model_compile(m);
    CHECK(st == TS_ERR_NOT_FOUND && strstr(ts_last_error(), "fc1/Add:0"), "an unknown tensor fails compile naming the closest: %s", ts_last_error());
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(t.g);
}

int main(void) {
    tiny t;
    if (tiny_build(&t, 7)) {
        CHECK(strcmp(ts_tensor_name(t.h), "fc1/Add:0") == 0 && strcmp(ts_tensor_name(t.logits), "fc2/Add:0") == 0,
              "tiny MLP names: %s, %s", ts_tensor_name(t.h), ts_tensor_name(t.logits));
    }
    ts_graph_free(t.g);
    const int Ds[] = {1, 3, 4}, As[] = {1, 2};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) test_per_microbatch(Ds[i], As[j], 1);
    for (int i = 0; i < 3; i++) test_per_microbatch(Ds[i], 1, 0);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) {
            test_sgd_steps(Ds[i], As[j], 0.0f);
            test_sgd_steps(Ds[i], As[j], 0.9f);
        }
    test_adam_steps(1, 1);
    test_adam_steps(3, 2);
    test_global_mode();
    test_glob();
    test_errors_and_late_anchor();
    return check_summary("test_anchors");
}
