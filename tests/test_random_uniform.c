/* test_random_uniform.c -- ts_random_uniform (torch.rand in forward): a
 * training model x * u + ..., run for 4 micro-batches (2 device
 * iterations x 2 accumulated): each micro-batch draws other values, all in
 * [0, 1) with the mean and spread of a uniform draw; the gradient of x is
 * the draw it was multiplied by (none flows into the draw); a
 * second model from the same seed draws the same values; on a device
 * (TS_DEVICE, make test's cpu-staged run) the same values as the CPU's,
 * and its steps are not recorded (each micro-batch's draw follows its
 * number), counted as StepsNotRecorded.Random. */
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define N 4096

/* u of each of the 4 micro-batches into u[4][N], x's gradient into gx */
static ts_status run(const char *device, float *u, float *gx) {
    ts_graph *g = ts_graph_new(5);
    ts_tensor *x = ts_param(g, "x", 1, (int64_t[]){N});
    ts_tensor *r = ts_input(g, "r", TS_F32, 1, (int64_t[]){N});
    ts_tensor *draw = ts_random_uniform(g, x);
    ts_tensor *loss = ts_sum(g, ts_add(g, ts_mul(g, x, draw), r));
    ts_options *o = ts_options_new();
    ts_model *m = NULL;
    ts_status st = ts_graph_status(g);
    if (!st) st = ts_options_set_device(o, device);
    if (!st) st = ts_options_set_device_iterations(o, 2);
    if (!st) st = ts_options_set_gradient_accumulation(o, 2);
    if (!st) st = ts_options_anchor(o, "u", ts_tensor_name(draw), TS_OUTPUT_ALL, 0);
    if (!st) st = ts_options_anchor(o, "gx", "Gradient___x", TS_OUTPUT_FINAL, 0);
    if (!st) st = ts_model_training(&m, g, loss, o, ts_sgd(0.0f, 0.0f, 0.0f));
    float *rv = calloc(4 * N, sizeof(float));
    ts_array in = ts_array_f32(rv, 1, (int64_t[]){4 * N});
    const char *names[1] = {"r"};
    if (!st) st = rv ? ts_model_run(m, names, &in, 1) : TS_ERR_OUT_OF_MEMORY;
    ts_array a;
    if (!st && !(st = ts_model_anchored(m, "u", &a))) memcpy(u, a.data, 4 * N * sizeof(float));
    if (!st && !(st = ts_model_anchored(m, "gx", &a))) memcpy(gx, a.data, N * sizeof(float));
    free(rv);
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
    return st;
}

int main(void) {
    const char *device = getenv("TS_DEVICE");
    static float u[4 * N], u2[4 * N], gx[N], gx2[N];
    CHECK_OK(run("cpu", u, gx), "4 micro-batches on the CPU");
    double sum = 0, sq = 0;
    int in_range = 1, differ = 1;
    for (int i = 0; i < 4 * N; i++) {
        in_range &= u[i] >= 0.0f && u[i] < 1.0f;
        sum += u[i], sq += (double)u[i] * u[i];
    }
    for (int b = 1; b < 4; b++) differ &= memcmp(u, u + b * N, N * sizeof(float)) != 0;
    double mean = sum / (4 * N), var = sq / (4 * N) - mean * mean;
    CHECK(in_range && fabs(mean - 0.5) < 0.01 && fabs(var - 1.0 / 12) < 0.005,
          "draws in [0, 1): mean %.4f (0.5), variance %.4f (%.4f)", mean, var, 1.0 / 12);
    CHECK(differ, "each micro-batch draws other values");
    /* the last micro-batch's gradient: d loss / dx = its u */
    double worst = 0;
    for (int i = 0; i < N; i++) worst = fmax(worst, fabs((double)gx[i] - (double)u[3 * N + i]));
    CHECK(worst == 0, "x's gradient is its micro-batch's draw (worst %.2g); none flows into the draw", worst);
    CHECK_OK(run("cpu", u2, gx2), "the same model again");
    CHECK(memcmp(u, u2, sizeof u) == 0, "the same seed draws the same values");
    if (device && strcmp(device, "cpu")) {
        int64_t not_recorded = ts_counter_get("StepsNotRecorded.Random");
        CHECK_OK(run(device, u2, gx2), "4 micro-batches on %s", device);
        CHECK(memcmp(u, u2, sizeof u) == 0, "%s draws the CPU's values", device);
        CHECK(ts_counter_get("StepsNotRecorded.Random") > not_recorded, "%s's steps not recorded (StepsNotRecorded.Random)", device);
    }
    return check_summary("test_random_uniform");
}
