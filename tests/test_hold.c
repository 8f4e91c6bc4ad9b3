/* test_hold.c -- ts_model_hold and its readers (include/tensorscope.h):
 * - before any held run an activation is TS_ERR_STATE (arm a hold), an
 *   unknown name TS_ERR_NOT_FOUND with the closest names;
 * - a held run of two micro-batches keeps the second's activations, whose
 *   buffers the memory plan shares, equal to values computed here from the
 *   inputs and weights (fc1's output, its Relu), and the gradient of
 *   fc2.bias (mean softmax - one-hot) though the optimizer step clears it;
 * - parameters are their current values; the held names list them all;
 * - disarmed, later runs leave the held copies alone;
 * - a run stopped by the numeric check (op) holds the tensor it stopped at
 *   (with its Inf) and says the later ones were not computed;
 * - ts_model_tensor_origin names the op and this file's line. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "support/check.h"

enum { B = 4, IN = 6, HID = 5, OUT = 3 };

static float xs[2 * B * IN];
static int32_t ys[2 * B];

static ts_status run(ts_model *m) {
    ts_array in[2] = {ts_array_f32(xs, 2, (int64_t[]){2 * B, IN}), {.dtype = TS_I32, .ndim = 1, .shape = {2 * B}, .data = ys}};
    const char *names[2] = {"x", "labels"};
    return ts_model_run(m, names, in, 2);
}

static const float *held(ts_model *m, const char *name, int64_t numel) {
    ts_array a;
    if (ts_model_held(m, name, &a) != TS_OK) return NULL;
    int64_t n = 1;
    for (int i = 0; i < a.ndim; i++) n *= a.shape[i];
    return n == numel ? a.data : NULL;
}

static const float *param(ts_graph *g, const char *name) {
    ts_array a;
    return ts_tensor_info(ts_graph_find(g, name), &a) == TS_OK ? a.data : NULL;
}

int main(void) {
    ts_graph *g = ts_graph_new(3);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){B, IN});
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){B});
    ts_tensor *h = ts_relu(g, ts_linear(g, x, HID, "fc1"));
    ts_tensor *logits = ts_linear(g, h, OUT, "fc2");
    ts_tensor *loss = ts_cross_entropy(g, logits, y);
    ts_tensor_set_name(loss, "loss");
    ts_options *o = ts_options_new();
    ts_options_set_threads(o, 1);
    ts_options_set_device_iterations(o, 2);
    ts_options_set_check_numerics(o, TS_CHECK_OP);
    ts_model *m = NULL;
    CHECK_OK(ts_model_training(&m, g, loss, o, ts_sgd(0.0f, 0.0f, 0.0f)), "a training model (lr 0: the weights stay)");
    ts_options_free(o);
    if (!m) return check_summary("test_hold");
    for (int i = 0; i < 2 * B * IN; i++) xs[i] = (float)sin(0.7 * i);
    for (int i = 0; i < 2 * B; i++) ys[i] = i % OUT;

    CHECK_OK(run(m), "a run without a hold");
    ts_array a;
    ts_status st = ts_model_held(m, "fc1/Add:0", &a);
    CHECK(st == TS_ERR_STATE && strstr(ts_last_error(), "ts_model_hold"), "an activation before a held run: %s", ts_last_error());
    st = ts_model_held(m, "fc1/Ad:0", &a);
    CHECK(st == TS_ERR_NOT_FOUND && strstr(ts_last_error(), "'fc1/Add:0'"), "an unknown name names the closest: %s", ts_last_error());
    CHECK(ts_model_is_held(m, "fc1.weight") && !ts_model_is_held(m, "fc1/Add:0"), "parameters are held without a hold, activations not");

    CHECK_OK(ts_model_hold(m, 1), "arm a hold");
    CHECK_OK(run(m), "a held run");
    CHECK_OK(ts_model_hold(m, 0), "disarm");
    const float *w1 = param(g, "fc1.weight"), *b1 = param(g, "fc1.bias"), *w2 = param(g, "fc2.weight"), *b2 = param(g, "fc2.bias");
    const float *z = held(m, "fc1/Add:0", B * HID), *r = held(m, "Relu:0", B * HID), *gb = held(m, "Gradient___fc2.bias", OUT);
    const float *hx = held(m, "x", B * IN);
    CHECK(z && r && gb && hx && w1 && b1 && w2 && b2, "fc1/Add:0, Relu:0, Gradient___fc2.bias and x are held with their shapes");
    if (!(z && r && gb && hx && w1 && b1 && w2 && b2)) return check_summary("test_hold");
    const float *x1 = xs + B * IN; /* the second micro-batch: the last one of the run */
    double ez = 0, er = 0, eg = 0, ex = 0, grad[OUT] = {0};
    for (int i = 0; i < B; i++) {
        float hid[HID], lg[OUT], mx = -INFINITY, sum = 0;
        for (int j = 0; j < HID; j++) {
            float s = b1[j];
            for (int k = 0; k < IN; k++) s += x1[i * IN + k] * w1[j * IN + k];
            ez = fmax(ez, fabs(s - z[i * HID + j]));
            hid[j] = s > 0 ? s : 0;
            er = fmax(er, fabs(hid[j] - r[i * HID + j]));
        }
        for (int c = 0; c < OUT; c++) {
            lg[c] = b2[c];
            for (int j = 0; j < HID; j++) lg[c] += hid[j] * w2[c * HID + j];
            mx = fmaxf(mx, lg[c]);
        }
        for (int c = 0; c < OUT; c++) sum += expf(lg[c] - mx);
        for (int c = 0; c < OUT; c++) grad[c] += (expf(lg[c] - mx) / sum - (c == ys[B + i])) / B;
    }
    for (int c = 0; c < OUT; c++) eg = fmax(eg, fabs(grad[c] - gb[c]));
    for (int i = 0; i < B * IN; i++) ex = fmax(ex, fabs(x1[i] - hx[i]));
    CHECK(ex == 0, "held x is the last micro-batch's input");
    CHECK(ez < 1e-5, "held fc1/Add:0 is x W1^T + b1 of the last micro-batch (max error %.3g)", ez);
    CHECK(er < 1e-5, "held Relu:0 is its Relu, though the plan reuses buffers (max error %.3g)", er);
    CHECK(eg < 1e-5, "held Gradient___fc2.bias is mean(softmax - one-hot) though the step cleared it (max error %.3g)", eg);
    CHECK(held(m, "fc1.weight", HID * IN) == w1, "a parameter is its current value, where it lives");

    const char *const *names;
    size_t n, n_all;
    const char *const *all;
    CHECK_OK(ts_model_held_names(m, &names, &n), "held names");
    CHECK_OK(ts_model_tensor_names(m, &all, &n_all), "tensor names");
    size_t want = 0;
    for (size_t i = 0; i < n_all; i++) want += ts_model_is_held(m, all[i]) != 0;
    bool has_grad = false;
    for (size_t i = 0; i < n; i++) has_grad = has_grad || strcmp(names[i], "Gradient___fc1.weight") == 0;
    CHECK(n == want && n == n_all && has_grad, "every tensor of the held run is listed (%zu of %zu)", n, n_all);

    float z0 = z[0];
    for (int i = 0; i < 2 * B * IN; i++) xs[i] += 1.0f;
    CHECK_OK(run(m), "a run after the hold was disarmed");
    CHECK(held(m, "fc1/Add:0", B * HID) == z && z[0] == z0, "the held copies stay those of the held run");

    xs[B * IN] = INFINITY; /* in the second micro-batch */
    CHECK_OK(ts_model_hold(m, 1), "arm again");
    st = run(m);
    ts_model_hold(m, 0);
    const char *failed = ts_model_failed_tensor(m);
    CHECK(st == TS_ERR_NUMERICS && failed, "the numeric check stops the run at '%s' (%s)", failed ? failed : "(none)", ts_status_name(st));
    ts_array fa;
    const float *bad = failed && ts_model_held(m, failed, &fa) == TS_OK ? fa.data : NULL;
    CHECK(bad && !isfinite(bad[0]), "the tensor it stopped at is held with its Inf (%g)", bad ? (double)bad[0] : 0.0);
    st = ts_model_held(m, "fc2/Add:0", &a);
    CHECK(st == TS_ERR_NOT_FOUND && strstr(ts_last_error(), "not computed"), "a tensor after it: %s", ts_last_error());

    char where[512];
    CHECK_OK(ts_model_tensor_origin(m, "Gradient___fc1.weight", where, sizeof where), "origin of a gradient");
    CHECK(strstr(where, "gradient of parameter 'fc1.weight'") && strstr(where, "test_hold.c:"), "it says what and where: %s", where);
    st = ts_model_tensor_origin(m, "nope", where, sizeof where);
    CHECK(st == TS_ERR_NOT_FOUND, "origin of an unknown name: %s", ts_last_error());
    ts_model_free(m);
    ts_graph_free(g);
    return check_summary("test_hold");
}
