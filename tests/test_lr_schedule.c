/* test_lr_schedule.c -- learning-rate schedules against PyTorch's
 * schedulers (tests/fixtures/lr_schedules_v1.bin, written by
 * tests/reference/make_lr_fixtures.py), and a model following one: the
 * rate each step used, and the weights it wrote (a step schedule that
 * drops the rate to 0 after step 0 leaves the weights as step 0 left them). */
#include "check.h"
#include "fixture.h"
#include "mlp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    ts_lr_schedule s;
} CASES[] = {
    {"constant", {.kind = TS_LR_CONSTANT}},
    {"step", {.kind = TS_LR_STEP, .step_size = 3, .gamma = 0.5}},
    {"cosine", {.kind = TS_LR_COSINE, .total_steps = 24, .min_lr = 0.001}},
    {"warmup_constant", {.kind = TS_LR_CONSTANT, .warmup_steps = 4}},
    {"warmup_step", {.kind = TS_LR_STEP, .warmup_steps = 4, .step_size = 3, .gamma = 0.5}},
    {"warmup_cosine", {.kind = TS_LR_COSINE, .warmup_steps = 4, .total_steps = 20, .min_lr = 0.001}},
};

static void test_against_pytorch(void) {
    const char *src = getenv("TS_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/lr_schedules_v1.bin", src ? src : ".");
    fixture *f = fixture_load(path);
    CHECK(f != NULL, "fixture %s", path);
    if (!f) return;
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        char key[64];
        snprintf(key, sizeof key, "%s/lr", CASES[c].name);
        const ts_array *want = fixture_get(f, key);
        CHECK(want != NULL, "fixture entry %s", key);
        if (!want) continue;
        int64_t n = ts_array_numel(want);
        float got[64];
        for (int64_t t = 0; t < n && t < 64; t++) got[t] = (float)ts_lr_at(&CASES[c].s, 0.1, t);
        CHECK_RESULT(ts_expect_close(key, got, want->data, n, 1e-6, 1e-9));
    }
    fixture_free(f);
    const ts_lr_schedule *wc = &CASES[5].s;
    CHECK(ts_lr_at(wc, 0.1, 24) == 0.001 && ts_lr_at(wc, 0.1, 100) == 0.001, "cosine holds min_lr after its total steps");
}

/* The MLP on a fixed random batch, D steps per run, following `s`. */
static void run_model(const ts_lr_schedule *s, int D, int runs, double *lrs, float *fc3_bias) {
    mlp n;
    test_mlp_build(&n, 8, 3);
    ts_options *o = ts_options_new();
    ts_options_set_device_iterations(o, D);
    ts_model *m = NULL;
    CHECK_OK(ts_model_training(&m, n.g, n.loss, o, ts_sgd(0.1f, 0.9f, 0.0f)), "training model");
    CHECK_OK(ts_model_set_lr_schedule(m, s), "set schedule");
    static float x[16 * 8 * 784];
    static int32_t y[16 * 8];
    for (int i = 0; i < D * 8 * 784; i++) x[i] = (float)((i * 7919) % 255) / 255.0f - 0.5f;
    for (int i = 0; i < D * 8; i++) y[i] = i % 10;
    ts_array in[2] = {ts_array_f32(x, 4, (int64_t[]){D * 8, 1, 28, 28}), ts_array_i32(y, 1, (int64_t[]){D * 8})};
    const char *names[2] = {"x", "labels"};
    for (int r = 0; r < runs; r++) {
        CHECK_OK(ts_model_run(m, names, in, 2), "run %d", r);
        lrs[r] = ts_model_learning_rate(m);
    }
    ts_array b;
    ts_tensor_info(ts_graph_find(n.g, "fc3.bias"), &b);
    memcpy(fc3_bias, b.data, 10 * sizeof(float));
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(n.g);
}

static void test_model(void) {
    ts_lr_schedule cos = {.kind = TS_LR_COSINE, .warmup_steps = 2, .total_steps = 6, .min_lr = 0.0};
    double lrs[4];
    float b[10], b1[10], b3[10];
    run_model(&cos, 2, 4, lrs, b);
    int ok = 1;
    for (int r = 0; r < 4; r++) ok &= fabs(lrs[r] - ts_lr_at(&cos, 0.1, 2 * r + 1)) < 1e-7;
    CHECK(ok, "the rate of each run's last step follows the schedule (%g %g %g %g)", lrs[0], lrs[1], lrs[2], lrs[3]);
    /* rate 0 from step 1 on: three steps write what one step wrote */
    ts_lr_schedule drop = {.kind = TS_LR_STEP, .step_size = 1, .gamma = 0.0};
    run_model(&drop, 1, 1, lrs, b1);
    run_model(&drop, 1, 3, lrs, b3);
    CHECK(memcmp(b1, b3, sizeof b1) == 0 && lrs[2] == 0.0, "step schedule with gamma 0: steps 1 and 2 leave the weights alone");
    run_model(NULL, 1, 3, lrs, b3);
    CHECK(memcmp(b1, b3, sizeof b1) != 0 && fabs(lrs[2] - 0.1) < 1e-7, "constant (NULL): step 1 and 2 do move them, at lr 0.1");

    mlp n;
    test_mlp_build(&n, 8, 3);
    ts_model *m = NULL, *inf = NULL;
    ts_model_training(&m, n.g, n.loss, NULL, ts_sgd(0.1f, 0, 0));
    CHECK(ts_model_set_lr_schedule(m, &(ts_lr_schedule){.kind = TS_LR_STEP, .step_size = 0, .gamma = 0.5}) == TS_ERR_INVALID_ARGUMENT &&
              strstr(ts_last_error(), "step size"),
          "step size 0 is refused: %s", ts_last_error());
    CHECK(ts_model_set_lr_schedule(m, &(ts_lr_schedule){.kind = TS_LR_COSINE}) == TS_ERR_INVALID_ARGUMENT, "cosine without total steps is refused");
    ts_model_inference(&inf, n.g, &n.loss, 1, NULL);
    CHECK(ts_model_set_lr_schedule(inf, NULL) == TS_ERR_STATE, "an inference model has no schedule");
    CHECK(ts_model_set_base_lr(inf, 0.1) == TS_ERR_STATE, "an inference model has no base rate to set: %s", ts_last_error());
    /* the base rate changed between runs: the next step follows the schedule from it */
    CHECK(fabs(ts_model_base_lr(m) - 0.1) < 1e-7, "the base rate starts at the optimizer's lr (%g)", ts_model_base_lr(m));
    CHECK_OK(ts_model_set_lr_schedule(m, &(ts_lr_schedule){.kind = TS_LR_STEP, .step_size = 1, .gamma = 0.5}), "step schedule");
    CHECK_OK(ts_model_set_base_lr(m, 0.4), "set base lr");
    CHECK(fabs(ts_model_base_lr(m) - 0.4) < 1e-7 && fabs(ts_model_learning_rate(m) - 0.4) < 1e-7,
          "before any step the next rate is the new base's (%g)", ts_model_learning_rate(m));
    CHECK(ts_model_set_base_lr(m, -1.0) == TS_ERR_INVALID_ARGUMENT && ts_model_set_base_lr(m, NAN) == TS_ERR_INVALID_ARGUMENT &&
              fabs(ts_model_base_lr(m) - 0.4) < 1e-7,
          "a negative or NaN base rate is refused and changes nothing: %s", ts_last_error());
    CHECK(ts_model_set_base_lr(NULL, 0.1) == TS_ERR_INVALID_ARGUMENT, "NULL model refused");
    ts_lr_schedule_kind k;
    CHECK(ts_lr_schedule_parse("Cosine", &k) == TS_OK && k == TS_LR_COSINE && ts_lr_schedule_parse("linear", &k) == TS_ERR_INVALID_ARGUMENT,
          "parse: Cosine ok, linear refused: %s", ts_last_error());
    ts_model_free(m);
    ts_model_free(inf);
    ts_graph_free(n.g);
}

int main(void) {
    test_against_pytorch();
    test_model();
    return check_summary("test_lr_schedule");
}
