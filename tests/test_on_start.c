/* test_on_start.c -- the startup hook (ts_options_set_on_start): called
 * once, inside the first run, after compile and before the first step,
 * with the model (its names readable, its weights the initial ones); a
 * failure stops that run before any step with the hook's message, and the
 * next run calls it again; a hook that runs the model is refused. */
#include <stdbool.h>
#include <string.h>

#include "check.h"
#include "mlp.h"

typedef struct hook_state {
    int calls, fail_first;
    int64_t steps_seen;
    size_t names_seen;
    float w0;                 /* fc1.weight[0] as the hook saw it */
    const ts_array *in;       /* for the hook that runs the model */
    ts_status nested;
} hook_state;

static ts_tensor *fc1w;

static ts_status hook(ts_model *m, void *user) {
    hook_state *s = user;
    s->calls++;
    s->steps_seen = ts_model_steps(m);
    const char *const *names;
    if (ts_model_tensor_names(m, &names, &s->names_seen)) return TS_ERR_INTERNAL;
    ts_array w;
    if (ts_tensor_info(fc1w, &w)) return TS_ERR_INTERNAL;
    s->w0 = ((const float *)w.data)[0];
    if (s->in) {
        const char *in_names[] = {"x", "labels"};
        s->nested = ts_model_run(m, in_names, s->in, 2);
    }
    if (s->calls <= s->fail_first) return ts_set_error(TS_ERR_INVALID_ARGUMENT, "fc1.weight is not what the user expected");
    return TS_OK;
}

static float xbuf[4 * 784];
static int32_t ybuf[4];

static void test_hook(int fail_first, bool nested) {
    mlp net;
    if (test_mlp_build(&net, 4, 1)) {
        CHECK(0, "building the MLP: %s", ts_last_error());
        return;
    }
    fc1w = ts_graph_find(net.g, "fc1.weight");
    ts_array w;
    ts_tensor_info(fc1w, &w);
    float init = ((const float *)w.data)[0];
    for (int i = 0; i < 4 * 784; i++) xbuf[i] = (float)(i % 13) / 13.0f;
    for (int i = 0; i < 4; i++) ybuf[i] = i;
    ts_array in[2] = {ts_array_f32(xbuf, 4, (int64_t[]){4, 1, 28, 28}), ts_array_i32(ybuf, 1, (int64_t[]){4})};
    const char *names[] = {"x", "labels"};
    hook_state s = {.fail_first = fail_first, .in = nested ? in : NULL};
    ts_options *o = ts_options_new();
    ts_model *m = NULL;
    CHECK_OK(ts_options_set_on_start(o, hook, &s), "ts_options_set_on_start");
    CHECK_OK(ts_model_training(&m, net.g, net.loss, o, ts_sgd(0.1f, 0.0f, 0.0f)), "a training model");
    ts_status st = ts_model_run(m, names, in, 2);
    if (fail_first) {
        CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "the on_start hook stopped the run before its first step: "
                                                                        "fc1.weight is not what the user expected"),
              "a failing hook stops the run with its message: %s", ts_last_error());
        ts_tensor_info(fc1w, &w);
        CHECK(ts_model_steps(m) == 0 && ts_model_runs(m) == 0 && ((const float *)w.data)[0] == init,
              "no step taken, the weights as initialised");
        st = ts_model_run(m, names, in, 2);
    }
    CHECK(st == TS_OK, "the run goes on once the hook passes: %s", st ? ts_last_error() : "");
    for (int i = 0; i < 2; i++) ts_model_run(m, names, in, 2);
    const char *const *all;
    size_t n_all = 0;
    ts_model_tensor_names(m, &all, &n_all);
    CHECK(s.calls == 1 + fail_first && s.steps_seen == 0 && s.names_seen == n_all && n_all > 40 && s.w0 == init &&
              ts_model_steps(m) == 3,
          "the hook ran %d time(s), before the first step (steps 0, the initial fc1.weight[0] %g), with the model's %zu names",
          s.calls, (double)s.w0, s.names_seen);
    if (nested)
        CHECK(s.nested == TS_ERR_STATE, "running the model from the hook is refused (TS_ERR_STATE)");
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(net.g);
}

int main(void) {
    test_hook(0, false);
    test_hook(1, false);
    test_hook(0, true);
    return check_summary("test_on_start");
}
