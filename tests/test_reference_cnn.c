/* test_reference_cnn.c -- the LeNet+BN CNN end to end against PyTorch.
 *
 * tests/fixtures/cnn_v1.bin is written by tests/reference/make_cnn_fixtures.py
 * (PyTorch, float32, deterministic). This test builds the same model with the
 * public API (tests/support/cnn.c), loads the fixture's initial weights and
 * compares through anchors: the loss, every activation and every gradient,
 * the batch norm running statistics after the step, the parameters and
 * running statistics after one step of SGD (momentum + weight decay) and one
 * of Adam, and a 10-step trajectory with D=10, A=2 on MNIST test images
 * 16..335 (running statistics move at every micro-batch, as in PyTorch).
 *
 * Tolerances are the MLP's (test_reference_mlp.c): |got - want| <= atol +
 * rtol*|want| with rtol 1e-5 for one step and 1e-4 after the trajectory; atol
 * 1e-6 for the loss, activations, parameters and buffers, 1e-7 for gradients.
 * For the loss, activations and gradients of the reference pass atol also
 * gets twice f32_error/<name>: how far PyTorch's own float32 result is from
 * its float64 one. Batch norm divides by small deviations and conv1's
 * weight gradient sums 12,544 products per element, so there float32
 * rounding alone moves PyTorch by up to ~1e-5; two float32 engines each that
 * close to the exact value are within twice that of each other. Everywhere
 * else the error term is below the MLP's atol and changes nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cnn.h"
#include "fixture.h"
#include "reference.h"
#include "tensorscope.h"

enum { BATCH = 16, PIXELS = 784, TRAJ_D = 10, TRAJ_A = 2 };

#define RTOL 1e-5
#define ATOL 1e-6
#define GRAD_ATOL 1e-7
#define TRAJ_RTOL 1e-4

static const char *const PARAMS[] = {"conv1.weight", "bn1.weight", "bn1.bias", "conv2.weight", "bn2.weight", "bn2.bias",
                                     "fc1.weight",   "fc1.bias",   "fc2.weight", "fc2.bias",     "fc3.weight", "fc3.bias"};
static const char *const BUFFERS[] = {"bn1.running_mean", "bn1.running_var", "bn2.running_mean", "bn2.running_var"};
static const char *const ACTIVATIONS[] = {"conv1/Conv2d:0", "bn1/BatchNorm:0", "Relu:0",       "MaxPool2d:0",  "conv2/Conv2d:0",
                                          "bn2/BatchNorm:0", "Relu:1",         "MaxPool2d:1",  "Flatten:0",    "fc1/MatMul:0",
                                          "fc1/Add:0",      "Relu:2",          "fc2/MatMul:0", "fc2/Add:0",    "Relu:3",
                                          "fc3/MatMul:0",   "fc3/Add:0",       "LogSoftmax:0"};
#define N_PARAMS ((int)(sizeof PARAMS / sizeof PARAMS[0]))
#define N_BUFFERS ((int)(sizeof BUFFERS / sizeof BUFFERS[0]))
#define N_ACTIVATIONS ((int)(sizeof ACTIVATIONS / sizeof ACTIVATIONS[0]))

/* Parameters and buffers back to the fixture's initial values. */
static void reset_state(const cnn *m, const fixture *f)
{
    int ok = 1;
    for (int i = 0; i < N_PARAMS + N_BUFFERS; i++) {
        const char *name = i < N_PARAMS ? PARAMS[i] : BUFFERS[i - N_PARAMS];
        ts_tensor *p = ts_graph_find(m->g, name);
        const ts_array *v = need(f, name);
        if (!p || !v || ts_param_set(p, v) != TS_OK) {
            printf("     %s: %s\n", name, p ? ts_last_error() : "not in the graph");
            ok = 0;
        }
    }
    CHECK(ok, "parameters and running statistics set to the fixture's initial values");
}

/* A tensor of the reference pass: atol + 2 f32_error/<name>. */
static void expect_reference(const ts_model *model, const fixture *f, const char *name, double atol)
{
    char key[300], label[400];
    snprintf(key, sizeof key, "f32_error/%s", name);
    const ts_array *e = need(f, key);
    double err = e ? (double)((const float *)e->data)[0] : 0.0;
    snprintf(label, sizeof label, "%s (atol +%.2g)", name, 2 * err);
    expect_anchor(model, name, -1, need(f, name), RTOL, atol + 2 * err, label);
}

/* Parameters (as UpdatedVar___ anchors and graph values) and running
 * statistics (anchors and graph values) against `<prefix><name>`. */
static void expect_state(const cnn *m, const ts_model *model, const fixture *f, const char *prefix, double rtol, double atol)
{
    char name[256], anchor[256], label[300];
    for (int i = 0; i < N_PARAMS + N_BUFFERS; i++) {
        int is_param = i < N_PARAMS;
        const char *base = is_param ? PARAMS[i] : BUFFERS[i - N_PARAMS];
        snprintf(name, sizeof name, "%s%s", prefix, base);
        snprintf(anchor, sizeof anchor, "%s%s", is_param ? "UpdatedVar___" : "", base);
        const ts_array *want = need(f, name);
        expect_anchor(model, anchor, -1, want, rtol, atol, name);
        ts_array value;
        ts_tensor *p = ts_graph_find(m->g, base);
        if (want && p && ts_tensor_info(p, &value) == TS_OK && value.data) {
            snprintf(label, sizeof label, "graph %s", name);
            CHECK_RESULT(ts_expect_array_close(label, &value, want, rtol, atol));
        } else if (want) {
            CHECK(0, "graph tensor %s readable", base);
        }
    }
}

/* One step of `opt` on the fixture batch; with `reference` also the loss,
 * every activation, every gradient and the running statistics. */
static void step_case(const cnn *m, const fixture *f, const char *tag, ts_optimizer opt, int reference)
{
    const ts_array *x = need(f, "x"), *y = need(f, "labels");
    char key[256], what[256];
    if (!x || !y)
        return;
    printf("== %s: one step\n", tag);
    reset_state(m, f);
    ts_options *o = ts_options_new();
    ts_options_anchor(o, "loss", "loss", TS_OUTPUT_FINAL, 0);
    anchor_all(o, "UpdatedVar___", PARAMS, N_PARAMS, TS_OUTPUT_FINAL);
    anchor_all(o, "", BUFFERS, N_BUFFERS, TS_OUTPUT_FINAL);
    if (reference) {
        anchor_all(o, "Gradient___", PARAMS, N_PARAMS, TS_OUTPUT_FINAL);
        anchor_all(o, "", ACTIVATIONS, N_ACTIVATIONS, TS_OUTPUT_FINAL);
        anchor_all(o, "Gradient___", ACTIVATIONS, N_ACTIVATIONS, TS_OUTPUT_FINAL);
    }
    ts_model *model = compile(m->g, m->loss, o, opt, tag);
    snprintf(what, sizeof what, "%s step 1", tag);
    if (model && run(model, x, y, what)) {
        if (reference) {
            expect_reference(model, f, "loss", ATOL);
            for (int i = 0; i < N_ACTIVATIONS; i++)
                expect_reference(model, f, ACTIVATIONS[i], ATOL);
            for (int i = 0; i < N_PARAMS + N_ACTIVATIONS; i++) {
                snprintf(key, sizeof key, "Gradient___%s", i < N_PARAMS ? PARAMS[i] : ACTIVATIONS[i - N_PARAMS]);
                expect_reference(model, f, key, GRAD_ATOL);
            }
            for (int i = 0; i < N_BUFFERS; i++) {
                snprintf(key, sizeof key, "running/%s", BUFFERS[i]);
                expect_anchor(model, BUFFERS[i], -1, need(f, key), RTOL, ATOL, key);
            }
        }
        snprintf(key, sizeof key, "%s1/", tag);
        expect_state(m, model, f, key, RTOL, ATOL);
    }
    ts_model_free(model);
    ts_options_free(o);
}

/* Ten steps of SGD with D=10, A=2 on MNIST test images 16..335 in one run. */
static void trajectory_case(const cnn *m, const fixture *f, const char *source_dir)
{
    printf("== trajectory: D=%d, A=%d, one run\n", TRAJ_D, TRAJ_A);
    const ts_array *x0 = need(f, "x"), *labels = need(f, "traj/labels"), *losses = need(f, "traj/loss");
    if (!x0 || !labels || !losses)
        return;
    ts_dataset *ds = NULL;
    ts_array xin, yin;
    const int64_t first = BATCH, n = (int64_t)TRAJ_D * TRAJ_A * BATCH;
    if (!trajectory_inputs(source_dir, x0, labels, first, n, BATCH, &ds, &xin, &yin)) {
        ts_dataset_free(ds);
        return;
    }

    reset_state(m, f);
    ts_options *o = ts_options_new();
    ts_options_set_device_iterations(o, TRAJ_D);
    ts_options_set_gradient_accumulation(o, TRAJ_A);
    ts_options_anchor(o, "loss", "loss", TS_OUTPUT_ALL, 0);
    anchor_all(o, "UpdatedVar___", PARAMS, N_PARAMS, TS_OUTPUT_FINAL);
    anchor_all(o, "", BUFFERS, N_BUFFERS, TS_OUTPUT_FINAL);
    ts_model *model = compile(m->g, m->loss, o, ts_sgd(0.05f, 0.9f, 0.0f), "trajectory");
    if (model && run(model, &xin, &yin, "trajectory")) {
        CHECK(ts_model_steps(model) == TRAJ_D, "steps %lld after D=%d", (long long)ts_model_steps(model), TRAJ_D);
        expect_anchor(model, "loss", -1, losses, TRAJ_RTOL, ATOL, "traj/loss (ALL, 20 micro-batches)");
        expect_state(m, model, f, "traj/final/", TRAJ_RTOL, ATOL);
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
    snprintf(path, sizeof path, "%s/tests/fixtures/cnn_v1.bin", src);
    fixture *f = fixture_load(path);
    CHECK(f != NULL, "load %s", path);
    if (!f)
        return check_summary("test_reference_cnn");
    cnn m = {0};
    ts_status st = test_cnn_build(&m, BATCH, 42);
    CHECK_OK(st, "build the LeNet+BN CNN");
    if (st == TS_OK) {
        step_case(&m, f, "sgd", ts_sgd(0.1f, 0.9f, 0.01f), 1);
        step_case(&m, f, "adam", ts_adam(1e-3f), 0);
        trajectory_case(&m, f, src);
    }
    ts_graph_free(m.g);
    fixture_free(f);
    return check_summary("test_reference_cnn");
}
