/* test_reference_gpt.c -- the character GPT (ts_gpt_build) against PyTorch.
 *
 * tests/fixtures/gpt_v1.bin is written by tests/reference/make_gpt_fixtures.py
 * (float32, deterministic): a 2-layer, 2-head, 16-channel GPT on 3 windows
 * of 8 tokens. The test builds the same model, sets the fixture's initial
 * weights and compares through anchors: the loss, every activation the
 * fixture names (attention probabilities included) and its gradient, every
 * parameter gradient (the tied wte.weight: one gradient, the sum of its
 * embedding and output uses), the parameters after one AdamW step, and a
 * 10-step AdamW trajectory with A = 2 (D = 10 in one run): the 20
 * micro-batch losses and the final parameters.
 *
 * Tolerances (|got - want| <= atol + rtol |want|): rtol 1e-4 with atol 1e-5
 * for values, 1e-6 for gradients; after 10 steps rtol 1e-3, atol 1e-4
 * (AdamW divides by sqrt(v): rounding differences of tiny gradients grow). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixture.h"
#include "tensorscope.h"

enum { V = 11, T = 8, L = 2, H = 2, C = 16, B = 3, STEPS = 10, ACCUM = 2 };

/* the fixture's entries without a prefix that are parameters: the graph's
 * tensors holding f32 values */
static void for_params(ts_graph *g, void (*fn)(ts_tensor *, void *), void *ctx)
{
    for (size_t i = 0; i < ts_graph_tensor_count(g); i++) {
        ts_tensor *t = ts_graph_tensor_at(g, i);
        ts_array a;
        if (ts_tensor_info(t, &a) == TS_OK && a.data && a.dtype == TS_F32)
            fn(t, ctx);
    }
}

typedef struct ctx {
    const fixture *f;
    ts_options *o;
    const ts_model *m;
    const char *prefix;
    double rtol, atol;
    int bad;
} ctx;

static void set_one(ts_tensor *t, void *vc)
{
    ctx *c = vc;
    const ts_array *v = fixture_get(c->f, ts_tensor_name(t));
    if (!v || ts_param_set(t, v) != TS_OK) {
        printf("     %s: %s\n", ts_tensor_name(t), v ? ts_last_error() : "not in the fixture");
        c->bad++;
    }
}

static void anchor_grad(ts_tensor *t, void *vc)
{
    char name[256];
    snprintf(name, sizeof name, "Gradient___%s", ts_tensor_name(t));
    ts_options_anchor(((ctx *)vc)->o, name, name, TS_OUTPUT_FINAL, 0);
}

static void expect(const ts_model *m, const char *anchor, const ts_array *want, double rtol, double atol)
{
    ts_array got;
    if (!want) {
        CHECK(0, "fixture has %s", anchor);
        return;
    }
    ts_status st = ts_model_anchored(m, anchor, &got);
    if (st) {
        CHECK_OK(st, "anchored %s", anchor);
        return;
    }
    CHECK_RESULT(ts_expect_array_close(anchor, &got, want, rtol, atol));
}

static void expect_grad(ts_tensor *t, void *vc)
{
    ctx *c = vc;
    char name[256];
    snprintf(name, sizeof name, "Gradient___%s", ts_tensor_name(t));
    expect(c->m, name, fixture_get(c->f, name), c->rtol, c->atol);
}

/* the parameters' values after training, against `<prefix><name>` */
static void expect_value(ts_tensor *t, void *vc)
{
    ctx *c = vc;
    char name[256];
    ts_array got;
    snprintf(name, sizeof name, "%s%s", c->prefix, ts_tensor_name(t));
    const ts_array *want = fixture_get(c->f, name);
    ts_tensor_info(t, &got);
    if (!want) {
        CHECK(0, "fixture has %s", name);
    } else if (strstr(name, "attn.qkv.bias") && want->ndim == 1 && want->shape[0] == 3 * C) {
        /* The key bias shifts every score of a row by the same amount, which
         * softmax ignores: its gradient is 0 up to rounding (~1e-9), and
         * Adam's m / sqrt(v) turns that noise into steps of +-lr. Only the
         * query and value thirds are defined. */
        const float *g = got.data, *w = want->data;
        char label[300];
        snprintf(label, sizeof label, "%s (q)", name);
        int bad = ts_expect_close(label, g, w, C, c->rtol, c->atol);
        snprintf(label, sizeof label, "%s (v)", name);
        bad |= ts_expect_close(label, g + 2 * C, w + 2 * C, C, c->rtol, c->atol);
        CHECK_RESULT(bad);
    } else {
        CHECK_RESULT(ts_expect_array_close(name, &got, want, c->rtol, c->atol));
    }
}

static ts_graph *build(const fixture *f, ts_gpt *gpt)
{
    ts_graph *g = ts_graph_new(0);
    ts_gpt_config cfg = {V, T, L, H, C, B};
    CHECK_OK(ts_gpt_build(g, &cfg, gpt), "build the GPT");
    ctx c = {.f = f};
    for_params(g, set_one, &c);
    CHECK(c.bad == 0, "every parameter set from the fixture");
    return g;
}

static ts_model *train_model(ts_graph *g, const ts_gpt *gpt, ts_options *o)
{
    ts_model *m = NULL;
    ts_status st = ts_model_training(&m, g, gpt->loss, o, ts_adamw(1e-2f, 0.1f));
    if (!st)
        st = ts_model_compile(m);
    CHECK_OK(st, "compile the GPT for training");
    return st ? NULL : m;
}

/* A compiled training model run once on the fixture's `<prefix>tokens` and
 * `<prefix>targets`; NULL (after a failed check) when any of it failed. */
static ts_model *train_and_run(ts_graph *g, const ts_gpt *gpt, ts_options *o, const fixture *f, const char *prefix, const char *what)
{
    char xn[64], yn[64];
    snprintf(xn, sizeof xn, "%stokens", prefix);
    snprintf(yn, sizeof yn, "%stargets", prefix);
    const ts_array *x = fixture_get(f, xn), *y = fixture_get(f, yn);
    ts_model *m = train_model(g, gpt, o);
    if (!m || !x || !y) {
        CHECK(x && y, "fixture has %s and %s", xn, yn);
        ts_model_free(m);
        return NULL;
    }
    const char *names[2] = {"tokens", "targets"};
    ts_array in[2] = {*x, *y};
    ts_status st = ts_model_run(m, names, in, 2);
    CHECK_OK(st, "%s", what);
    if (st) {
        ts_model_free(m);
        return NULL;
    }
    return m;
}

static void one_step(const fixture *f)
{
    ts_gpt gpt;
    ts_graph *g = build(f, &gpt);
    ts_options *o = ts_options_new();
    ctx c = {.f = f, .o = o, .rtol = 1e-4, .atol = 1e-6};
    for_params(g, anchor_grad, &c);
    /* every activation of the fixture and its gradient */
    int n_act = 0;
    for (int i = 0; i < f->n; i++) {
        const char *name = f->entries[i].name;
        if (strchr(name, '/') == NULL && strcmp(name, "logits") != 0)
            continue;
        if (strncmp(name, "adamw1/", 7) == 0 || strncmp(name, "traj/", 5) == 0 || strncmp(name, "Gradient___", 11) == 0)
            continue;
        char gname[256];
        snprintf(gname, sizeof gname, "Gradient___%s", name);
        ts_options_anchor(o, name, name, TS_OUTPUT_FINAL, 0);
        ts_options_anchor(o, gname, gname, TS_OUTPUT_FINAL, 0);
        n_act++;
    }
    ts_model *m = train_and_run(g, &gpt, o, f, "", "one AdamW step");
    if (m) {
        expect(m, "loss", fixture_get(f, "loss"), 1e-5, 1e-6);
        for (int i = 0; i < f->n; i++) {
            const char *name = f->entries[i].name;
            ts_array got;
            if (ts_model_anchored(m, name, &got) != TS_OK || strcmp(name, "loss") == 0 || strncmp(name, "Gradient___", 11) == 0)
                continue;
            char gname[256];
            snprintf(gname, sizeof gname, "Gradient___%s", name);
            expect(m, name, &f->entries[i].array, 1e-4, 1e-5);
            expect(m, gname, fixture_get(f, gname), 1e-4, 1e-6);
        }
        CHECK(n_act >= 40, "%d activations compared (attention probabilities among them)", n_act);
        c.m = m;
        for_params(g, expect_grad, &c);
        c.prefix = "adamw1/", c.rtol = 1e-4, c.atol = 1e-5;
        for_params(g, expect_value, &c);
    }
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
}

static void trajectory(const fixture *f)
{
    ts_gpt gpt;
    ts_graph *g = build(f, &gpt);
    ts_options *o = ts_options_new();
    ts_options_set_device_iterations(o, STEPS);
    ts_options_set_gradient_accumulation(o, ACCUM);
    ts_options_anchor(o, "losses", "loss", TS_OUTPUT_ALL, 0);
    ts_model *m = train_and_run(g, &gpt, o, f, "traj/", "10 AdamW steps with A = 2 in one run (D = 10)");
    if (m) {
        expect(m, "losses", fixture_get(f, "traj/loss"), 1e-3, 1e-4);
        ctx c = {.f = f, .prefix = "traj/final/", .rtol = 1e-3, .atol = 1e-4};
        for_params(g, expect_value, &c);
    }
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
}

int main(void)
{
    fixture *f = fixture_load("tests/fixtures/gpt_v1.bin");
    CHECK(f != NULL, "load tests/fixtures/gpt_v1.bin");
    if (f) {
        one_step(f);
        trajectory(f);
    }
    fixture_free(f);
    return check_summary("test_reference_gpt");
}
