/* test_reference_mlp.c -- the tutorial MLP end to end against PyTorch.
 *
 * tests/fixtures/mlp_v1.bin is written by tests/reference/make_fixtures.py
 * (PyTorch 1.13, float32, deterministic). This test builds the same model
 * with the public API, loads the fixture's initial weights and compares
 * through anchors: the loss, every activation and every gradient, the
 * parameters after one and two steps of SGD (momentum + weight decay), Adam
 * and AdamW (both one run per step with D=1 and one run with D=2), and a
 * 10-step trajectory with D=10, A=2 on MNIST test images 16..335.
 *
 * Tolerances: an element matches when |got - want| <= atol + rtol*|want|.
 * rtol is 1e-5 for one or two steps and 1e-4 after the 10-step trajectory
 * (rounding differences grow with each step). atol is a floor for elements
 * near zero, whose relative error means nothing (sums that cancel, Adam's
 * g/(sqrt(g^2)+eps) for tiny g): 1e-6 for the loss, activations and
 * parameters (|values| ~ 0.01..2), 1e-7 for gradients (|values| ~ 1e-3; the
 * engine agrees to ~1e-8, and PyTorch float32 vs float64 differ by < 4e-8
 * on the updated parameters even after 10 steps).
 * Each comparison prints max abs/rel error; any mismatch fails the test. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mlp.h"
#include "fixture.h"
#include "reference.h"
#include "tensorscope.h"

enum { BATCH = 16, PIXELS = 784, TRAJ_D = 10, TRAJ_A = 2 };

#define RTOL 1e-5
#define ATOL 1e-6
#define GRAD_ATOL 1e-7
#define TRAJ_RTOL 1e-4

static const char *const PARAMS[] = {"fc1.weight", "fc1.bias", "fc2.weight",
                                     "fc2.bias",   "fc3.weight", "fc3.bias"};
static const char *const ACTIVATIONS[] = {"fc1/MatMul:0", "fc1/Add:0", "Relu:0",
                                          "fc2/MatMul:0", "fc2/Add:0", "Relu:1",
                                          "fc3/MatMul:0", "fc3/Add:0", "LogSoftmax:0"};
#define N_PARAMS ((int)(sizeof PARAMS / sizeof PARAMS[0]))
#define N_ACTIVATIONS ((int)(sizeof ACTIVATIONS / sizeof ACTIVATIONS[0]))

static void reset_params(const mlp *m, const fixture *f)
{
    int ok = 1;
    for (int i = 0; i < N_PARAMS; i++) {
        ts_tensor *p = ts_graph_find(m->g, PARAMS[i]);
        const ts_array *v = need(f, PARAMS[i]);
        if (!p || !v || ts_param_set(p, v) != TS_OK) {
            printf("     %s: %s\n", PARAMS[i], p ? ts_last_error() : "not in the graph");
            ok = 0;
        }
    }
    CHECK(ok, "parameters set to the fixture's initial values");
}

/* Parameters after a step, both as anchored UpdatedVar___ and as the
 * graph's values (parameters live in the graph). */
static void expect_params(const mlp *m, const ts_model *model, const fixture *f,
                          const char *prefix, double rtol, double atol)
{
    char name[256], anchor[256], label[300];
    for (int i = 0; i < N_PARAMS; i++) {
        snprintf(name, sizeof name, "%s%s", prefix, PARAMS[i]);
        snprintf(anchor, sizeof anchor, "UpdatedVar___%s", PARAMS[i]);
        const ts_array *want = need(f, name);
        expect_anchor(model, anchor, -1, want, rtol, atol, name);
        ts_array value;
        ts_tensor *p = ts_graph_find(m->g, PARAMS[i]);
        if (want && p && ts_tensor_info(p, &value) == TS_OK && value.data) {
            snprintf(label, sizeof label, "graph %s", name);
            CHECK_RESULT(ts_expect_array_close(label, &value, want, rtol, atol));
        } else if (want) {
            CHECK(0, "graph parameter %s readable", PARAMS[i]);
        }
    }
}

/* Every name the fixture compares is a tensor of the compiled model. */
static void expect_names(const ts_model *model)
{
    const char *const *names = NULL;
    size_t n = 0;
    ts_status st = ts_model_tensor_names(model, &names, &n);
    CHECK_OK(st, "tensor names of the compiled model");
    if (st != TS_OK)
        return;
    int sorted = 1;
    for (size_t i = 1; i < n; i++)
        if (strcmp(names[i - 1], names[i]) > 0)
            sorted = 0;
    CHECK(sorted, "%zu tensor names, sorted", n);
    const char *prefixes[] = {"", "Gradient___", "UpdatedVar___", "Accum___"};
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < N_PARAMS + N_ACTIVATIONS; i++) {
            int is_param = i < N_PARAMS;
            if (k >= 2 && !is_param)
                continue;
            char want[256];
            snprintf(want, sizeof want, "%s%s", prefixes[k],
                     is_param ? PARAMS[i] : ACTIVATIONS[i - N_PARAMS]);
            int found = 0;
            for (size_t j = 0; j < n && !found; j++)
                found = strcmp(names[j], want) == 0;
            if (!found)
                CHECK(0, "tensor name %s listed", want);
        }
    }
}

/* x and labels repeated `times` along axis 0 (D micro-batches of one batch). */
typedef struct repeated {
    float *x;
    int32_t *y;
    ts_array xa, ya;
} repeated;

static int repeat_batch(repeated *r, const ts_array *x, const ts_array *y, int times)
{
    int64_t nx = ts_array_numel(x), ny = ts_array_numel(y);
    r->x = malloc(sizeof(float) * (size_t)(nx * times));
    r->y = malloc(sizeof(int32_t) * (size_t)(ny * times));
    if (!r->x || !r->y)
        return 0;
    for (int t = 0; t < times; t++) {
        memcpy(r->x + nx * t, x->data, sizeof(float) * (size_t)nx);
        memcpy(r->y + ny * t, y->data, sizeof(int32_t) * (size_t)ny);
    }
    int64_t xs[4] = {x->shape[0] * times, x->shape[1], x->shape[2], x->shape[3]};
    int64_t ys[1] = {y->shape[0] * times};
    r->xa = ts_array_f32(r->x, 4, xs);
    r->ya = ts_array_i32(r->y, 1, ys);
    return 1;
}

static void repeated_free(repeated *r)
{
    free(r->x);
    free(r->y);
}

/* The loss fixture `<tag>/loss` f32[2] element k as a scalar array. */
static ts_array loss_at(const ts_array *losses, int k)
{
    ts_array a = *losses;
    a.ndim = 0;
    a.data = (float *)losses->data + k;
    return a;
}

/* Two steps of `opt` on the fixture batch: one run per step with D=1 (the
 * first run also checks the loss, every activation and every gradient when
 * `reference` is set), then one run with D=2. */
static void optimizer_case(const mlp *m, const fixture *f, const char *tag, ts_optimizer opt,
                           int reference)
{
    const ts_array *x = need(f, "x"), *y = need(f, "labels");
    char key[256], what[256];
    snprintf(key, sizeof key, "%s/loss", tag);
    const ts_array *losses = need(f, key);
    if (!x || !y || !losses)
        return;

    printf("== %s: D=1, one run per step\n", tag);
    reset_params(m, f);
    ts_options *o = ts_options_new();
    ts_options_anchor(o, "loss", "loss", TS_OUTPUT_FINAL, 0);
    anchor_all(o, "UpdatedVar___", PARAMS, N_PARAMS, TS_OUTPUT_FINAL);
    if (reference) {
        anchor_all(o, "Gradient___", PARAMS, N_PARAMS, TS_OUTPUT_FINAL);
        anchor_all(o, "", ACTIVATIONS, N_ACTIVATIONS, TS_OUTPUT_FINAL);
        anchor_all(o, "Gradient___", ACTIVATIONS, N_ACTIVATIONS, TS_OUTPUT_FINAL);
    }
    snprintf(what, sizeof what, "%s D=1", tag);
    ts_model *model = compile(m->g, m->loss, o, opt, what);
    if (model && reference)
        expect_names(model);
    for (int step = 1; model && step <= 2; step++) {
        snprintf(what, sizeof what, "%s D=1 step %d", tag, step);
        if (!run(model, x, y, what))
            break;
        CHECK(ts_model_runs(model) == step && ts_model_steps(model) == step,
              "runs %lld, steps %lld after run %d", (long long)ts_model_runs(model),
              (long long)ts_model_steps(model), step);
        ts_array want_loss = loss_at(losses, step - 1);
        snprintf(what, sizeof what, "%s/loss[%d]", tag, step - 1);
        expect_anchor(model, "loss", -1, &want_loss, RTOL, ATOL, what);
        if (reference && step == 1) {
            expect_anchor(model, "loss", -1, need(f, "loss"), RTOL, ATOL, "loss");
            for (int i = 0; i < N_ACTIVATIONS; i++)
                expect_anchor(model, ACTIVATIONS[i], -1, need(f, ACTIVATIONS[i]), RTOL, ATOL,
                              ACTIVATIONS[i]);
            for (int i = 0; i < N_PARAMS + N_ACTIVATIONS; i++) {
                snprintf(key, sizeof key, "Gradient___%s",
                         i < N_PARAMS ? PARAMS[i] : ACTIVATIONS[i - N_PARAMS]);
                expect_anchor(model, key, -1, need(f, key), RTOL, GRAD_ATOL, key);
            }
        }
        snprintf(key, sizeof key, "%s%d/", tag, step);
        expect_params(m, model, f, key, RTOL, ATOL);
    }
    ts_model_free(model);
    ts_options_free(o);

    printf("== %s: D=2, one run\n", tag);
    reset_params(m, f);
    repeated r = {0};
    o = ts_options_new();
    ts_options_set_device_iterations(o, 2);
    ts_options_anchor(o, "loss", "loss", TS_OUTPUT_ALL, 0);
    ts_options_anchor(o, "Gradient___fc3.bias", "Gradient___fc3.bias", TS_OUTPUT_ALL, 0);
    anchor_all(o, "UpdatedVar___", PARAMS, N_PARAMS, TS_OUTPUT_FINAL);
    snprintf(what, sizeof what, "%s D=2", tag);
    model = compile(m->g, m->loss, o, opt, what);
    if (model && repeat_batch(&r, x, y, 2) && run(model, &r.xa, &r.ya, what)) {
        CHECK(ts_model_steps(model) == 2, "steps %lld after one run with D=2",
              (long long)ts_model_steps(model));
        snprintf(what, sizeof what, "%s/loss (ALL)", tag);
        expect_anchor(model, "loss", -1, losses, RTOL, ATOL, what);
        expect_anchor(model, "Gradient___fc3.bias", 0, need(f, "Gradient___fc3.bias"), RTOL,
                      GRAD_ATOL, "Gradient___fc3.bias sample 0 (ALL)");
        snprintf(key, sizeof key, "%s2/", tag);
        expect_params(m, model, f, key, RTOL, ATOL);
    }
    repeated_free(&r);
    ts_model_free(model);
    ts_options_free(o);
}

/* Ten steps of SGD with D=10, A=2 on MNIST test images 16..335 in one run. */
static void trajectory_case(const mlp *m, const fixture *f, const char *source_dir)
{
    printf("== trajectory: D=%d, A=%d, one run\n", TRAJ_D, TRAJ_A);
    const ts_array *x0 = need(f, "x"), *labels = need(f, "traj/labels");
    const ts_array *losses = need(f, "traj/loss");
    if (!x0 || !labels || !losses)
        return;
    ts_dataset *ds = NULL;
    ts_array xin, yin;
    const int64_t first = BATCH, n = (int64_t)TRAJ_D * TRAJ_A * BATCH;
    if (!trajectory_inputs(source_dir, x0, labels, first, n, BATCH, &ds, &xin, &yin)) {
        ts_dataset_free(ds);
        return;
    }

    reset_params(m, f);
    ts_options *o = ts_options_new();
    ts_options_set_device_iterations(o, TRAJ_D);
    ts_options_set_gradient_accumulation(o, TRAJ_A);
    ts_options_anchor(o, "loss", "loss", TS_OUTPUT_ALL, 0);
    anchor_all(o, "UpdatedVar___", PARAMS, N_PARAMS, TS_OUTPUT_FINAL);
    ts_model *model = compile(m->g, m->loss, o, ts_sgd(0.05f, 0.9f, 0.0f), "trajectory");
    if (model && run(model, &xin, &yin, "trajectory")) {
        CHECK(ts_model_steps(model) == TRAJ_D, "steps %lld after D=%d",
              (long long)ts_model_steps(model), TRAJ_D);
        expect_anchor(model, "loss", -1, losses, TRAJ_RTOL, ATOL, "traj/loss (ALL, 20 micro-batches)");
        expect_params(m, model, f, "traj/final/", TRAJ_RTOL, ATOL);
    }
    ts_model_free(model);
    ts_options_free(o);
    ts_dataset_free(ds);
}

int main(void)
{
    const char *src = getenv("TS_SOURCE_DIR");
    if (!src || !*src)
        src = ".";
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/mlp_v1.bin", src);
    fixture *f = fixture_load(path);
    CHECK(f != NULL, "load %s", path);
    if (!f)
        return check_summary("test_reference_mlp");

    mlp m = {0};
    ts_status st = test_mlp_build(&m, BATCH, 42); /* the header's worked example at batch 16 */
    CHECK_OK(st, "build the tutorial MLP");
    if (st == TS_OK) {
        optimizer_case(&m, f, "sgd", ts_sgd(0.1f, 0.9f, 0.01f), 1);
        optimizer_case(&m, f, "adam", ts_adam(1e-3f), 0);
        optimizer_case(&m, f, "adamw", ts_adamw(1e-3f, 0.01f), 0);
        trajectory_case(&m, f, src);
    }
    ts_graph_free(m.g);
    fixture_free(f);
    return check_summary("test_reference_mlp");
}
