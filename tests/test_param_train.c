/* test_param_train.c -- what a program says about training beyond its
 * ops: a stop-gradient (no gradient flows back, what is behind it is not
 * updated), frozen parameters (not updated, their gradient computed only
 * when asked) and a parameter's own optimizer settings (the same update as
 * a model whose optimizer has them), and the errors of each. */
#include "check.h"

#include <math.h>
#include <string.h>

/* x [4,3] -> a (linear 3->3) -> [stop] -> b (linear 3->2) -> mean: the loss. */
typedef struct net {
    ts_graph *g;
    ts_tensor *loss;
} net;

static net build(int stop) {
    net n = {ts_graph_new(7), NULL};
    ts_tensor *x = ts_input(n.g, "x", TS_F32, 2, (int64_t[]){4, 3});
    ts_tensor *a = ts_linear(n.g, x, 3, "a");
    if (stop) a = ts_stop_gradient(n.g, a);
    n.loss = ts_mean(n.g, ts_linear(n.g, ts_relu(n.g, a), 2, "b"));
    return n;
}

static void values(const net *n, const char *name, float *out, size_t count) {
    ts_array v;
    ts_tensor_info(ts_graph_find(n->g, name), &v);
    memcpy(out, v.data, count * sizeof(float));
}

static void train(const net *n, ts_optimizer opt, const char *anchor, int steps) {
    ts_options *o = ts_options_new();
    if (anchor) ts_options_anchor(o, NULL, anchor, TS_OUTPUT_FINAL, 0);
    ts_model *m = NULL;
    CHECK_OK(ts_model_training(&m, n->g, n->loss, o, opt), "training model");
    float x[12];
    for (int i = 0; i < 12; i++) x[i] = (float)((i * 37) % 11) / 5.0f - 1.0f;
    ts_array in = ts_array_f32(x, 2, (int64_t[]){4, 3});
    const char *names[1] = {"x"};
    for (int s = 0; s < steps; s++) CHECK_OK(ts_model_run(m, names, &in, 1), "step %d", s);
    if (anchor) {
        ts_array g;
        CHECK_OK(ts_model_anchored(m, anchor, &g), "anchored %s", anchor);
        float sum = 0;
        for (int64_t i = 0; i < ts_array_numel(&g); i++) sum += fabsf(((const float *)g.data)[i]);
        CHECK(sum > 0.0f, "%s is computed when asked (|sum| %g)", anchor, (double)sum);
    }
    ts_model_free(m);
    ts_options_free(o);
}

static int has_name(const net *n, ts_optimizer opt, const char *name) {
    ts_model *m = NULL;
    ts_model_training(&m, n->g, n->loss, NULL, opt);
    ts_model_compile(m);
    const char *const *names;
    size_t k = 0;
    int found = 0;
    if (ts_model_tensor_names(m, &names, &k) == TS_OK)
        for (size_t i = 0; i < k; i++) found |= strcmp(names[i], name) == 0;
    ts_model_free(m);
    return found;
}

static void test_stop_gradient(void) {
    net n = build(1);
    ts_optimizer adam = ts_adam(0.05f);
    adam.weight_decay = 0.1f; /* a zero gradient would still move a */
    float a0[9], a1[9], b0[6], b1[6];
    values(&n, "a.weight", a0, 9);
    values(&n, "b.weight", b0, 6);
    CHECK(!has_name(&n, adam, "Gradient___a.weight"), "nothing behind the stop-gradient gets a gradient");
    train(&n, adam, NULL, 3);
    values(&n, "a.weight", a1, 9);
    values(&n, "b.weight", b1, 6);
    CHECK(memcmp(a0, a1, sizeof a0) == 0, "the parameter behind the stop-gradient is not updated");
    CHECK(memcmp(b0, b1, sizeof b0) != 0, "the one after it is");
    CHECK(strcmp(ts_tensor_op(ts_graph_find(n.g, "StopGradient:0")), "StopGradient") == 0, "the op is named StopGradient:0");
    ts_graph_free(n.g);
}

static void test_frozen(void) {
    net n = build(0);
    ts_optimizer sgd = ts_sgd(0.1f, 0.9f, 0.1f);
    ts_tensor *aw = ts_graph_find(n.g, "a.weight");
    CHECK(ts_param_trainable(aw) == 1, "a parameter is trainable by default");
    CHECK_OK(ts_param_set_trainable(aw, 0), "freeze a.weight");
    CHECK(ts_param_trainable(aw) == 0, "and reads frozen");
    float a0[9], a1[9], ab0[3], ab1[3];
    values(&n, "a.weight", a0, 9);
    values(&n, "a.bias", ab0, 3);
    CHECK(!has_name(&n, sgd, "Gradient___a.weight") && has_name(&n, sgd, "Gradient___a.bias"),
          "a frozen parameter's gradient is not computed, its neighbour's is");
    train(&n, sgd, "Gradient___a.weight", 3);
    values(&n, "a.weight", a1, 9);
    values(&n, "a.bias", ab1, 3);
    CHECK(memcmp(a0, a1, sizeof a0) == 0, "a frozen parameter is not updated, even with its gradient asked for");
    CHECK(memcmp(ab0, ab1, sizeof ab0) != 0, "the others are");
    ts_model *m = NULL;
    CHECK_OK(ts_model_training(&m, n.g, n.loss, NULL, sgd), "a model of the graph");
    CHECK(ts_param_set_trainable(aw, 1) == TS_ERR_STATE && strstr(ts_last_error(), "before making the model"),
          "with a model made, the setting is refused: %s", ts_last_error());
    ts_model_free(m);
    CHECK(ts_param_set_trainable(ts_graph_find(n.g, "x"), 0) == TS_ERR_INVALID_ARGUMENT, "an input is not a parameter: %s",
          ts_last_error());
    ts_graph_free(n.g);
}

/* A parameter's own settings update it as a model with those settings
 * does, bit for bit, whatever the model's own. */
static void test_own_optimizer(void) {
    ts_optimizer own = ts_adamw(0.03f, 0.2f), model_opt = ts_adamw(0.001f, 0.0f);
    own.beta1 = 0.8f;
    net want = build(0), got = build(0);
    train(&want, own, NULL, 4);
    for (size_t i = 0; i < ts_graph_tensor_count(got.g); i++) {
        ts_tensor *t = ts_graph_tensor_at(got.g, i);
        if (strcmp(ts_tensor_op(t), "Param") == 0) CHECK_OK(ts_param_set_optimizer(t, &own), "own settings of %s", ts_tensor_name(t));
    }
    train(&got, model_opt, NULL, 4);
    const char *params[] = {"a.weight", "a.bias", "b.weight", "b.bias"};
    for (int p = 0; p < 4; p++) {
        float w[9], g[9];
        size_t k = p % 2 ? (p == 1 ? 3 : 2) : (p == 0 ? 9 : 6);
        values(&want, params[p], w, k);
        values(&got, params[p], g, k);
        CHECK(memcmp(w, g, k * sizeof(float)) == 0, "%s: its own settings update it as the model's would", params[p]);
    }
    ts_tensor *aw = ts_graph_find(got.g, "a.weight");
    ts_optimizer bad = own;
    bad.beta1 = 1.5f;
    CHECK(ts_param_set_optimizer(aw, &bad) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "a.weight"),
          "settings out of range are refused naming the parameter: %s", ts_last_error());
    ts_optimizer sgd = ts_sgd(0.1f, 0.9f, 0.0f);
    CHECK_OK(ts_param_set_optimizer(aw, &sgd), "SGD settings for a.weight");
    ts_model *m = NULL;
    CHECK_OK(ts_model_training(&m, got.g, got.loss, NULL, model_opt), "an AdamW model");
    CHECK(ts_model_compile(m) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "'a.weight' has its own SGD settings"),
          "one optimizer: a parameter's settings of another kind fail the compile: %s", ts_last_error());
    ts_model_free(m);
    CHECK_OK(ts_param_set_optimizer(aw, NULL), "the model's settings again");
    ts_graph_free(want.g);
    ts_graph_free(got.g);
}

/* A tensor that only ops without a backward read (a comparison) has a
 * gradient of 0, not a buffer nothing wrote, which its own op's backward
 * reads. loss = sum(p * (ReduceMax(p, 1) > 0)): dloss/dp is the 0/1
 * factor, nothing through the max (its backward adds 0 at each row's
 * maximum). */
static void test_no_backward_reader(void) {
    net n = {ts_graph_new(7), NULL};
    ts_tensor *p = ts_param(n.g, "p", 2, (int64_t[]){2, 3});
    float v[6] = {0.5f, -1.0f, 2.0f, -3.0f, -0.5f, -2.0f}, zero = 0.0f; /* row 0's max is above 0, row 1's is not */
    ts_array pa = ts_array_f32(v, 2, (int64_t[]){2, 3}), za = ts_array_f32(&zero, 0, NULL);
    CHECK_OK(ts_param_set(p, &pa), "set p");
    int ax = 1;
    ts_tensor *max = ts_reduce_max(n.g, p, 1, &ax, 1);
    n.loss = ts_sum(n.g, ts_mul(n.g, p, ts_cast(n.g, ts_binary(n.g, "Greater", max, ts_constant(n.g, "zero", &za)), TS_F32)));
    CHECK(n.loss != NULL, "graph: %s", ts_last_error());
    ts_options *o = ts_options_new();
    ts_options_anchor(o, NULL, "Gradient___p", TS_OUTPUT_FINAL, 0);
    ts_model *m = NULL;
    CHECK_OK(ts_model_training(&m, n.g, n.loss, o, ts_sgd(0.0f, 0.0f, 0.0f)), "training model");
    CHECK_OK(ts_model_run(m, NULL, NULL, 0), "step");
    ts_array gp;
    CHECK_OK(ts_model_anchored(m, "Gradient___p", &gp), "p's gradient");
    const float *gv = gp.data, want[6] = {1, 1, 1, 0, 0, 0};
    int same = 1;
    for (int i = 0; i < 6; i++) same = same && gv[i] == want[i];
    CHECK(same, "p's gradient is the 0/1 factor: %g %g %g %g %g %g", (double)gv[0], (double)gv[1], (double)gv[2], (double)gv[3], (double)gv[4],
          (double)gv[5]);
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(n.g);
}

int main(void) {
    test_stop_gradient();
    test_no_backward_reader();
    test_frozen();
    test_own_optimizer();
    return check_summary("test_param_train");
}
