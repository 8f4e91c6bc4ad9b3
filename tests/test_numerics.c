/* test_numerics.c -- numeric checks (docs/observation.md#numeric-checks) on three real failures,
 * with check_numerics = output and = op:
 * (a) the log of a negative activation inside a scoped block: pinned to the
 *     Log output, with its op, the file:line of the ts_log call and the stats
 *     of its input (min < 0); in output mode the check fires at the block's
 *     output and the op-by-op re-execution confirms the Log;
 * (b) SGD with lr 1e4 on the tutorial MLP: the run that diverges stops with
 *     TS_ERR_NUMERICS, naming a tensor; the test reports which one and
 *     whether the weights were still finite;
 * (c) a NaN in the input data: pinned to the input `x`;
 * (d) a Log's backward at 1/x near 0 (the forward finite): blamed on the Log
 *     whose backward wrote the Inf, with its incoming gradient and forward
 *     input, not on the Add whose output's gradient it is; inside a block,
 *     where under output the Log's gradient goes unchecked, the report
 *     says the incoming gradient is already non-finite, the replay names
 *     the Log;
 * (e) the first checked output's input already Inf (the README's fc3/Add:0
 *     with fc3/MatMul:0 at Inf): the report says so first.
 * Also: with the check off nothing stops and the loss is NaN; the
 * environment (TS_CHECK_NUMERICS=op, TS_OPBYOP=1) turns checks on without a
 * code change; NonFiniteFound counts failures; a failed run logs its whole
 * report once. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mlp.h"
#include "tensorscope.h"

static const char *MODE_NAME[] = {"off", "output", "op"};

static int error_logs;
static void quiet(void *user, int level, const char *msg) {
    (void)user, (void)msg;
    error_logs += level == TS_LOG_ERROR;
}

/* ------------------------------------------------------------ (a) model */

enum { LB = 4, LIN = 4, LH = 6, LOUT = 3 };
static int log_line; /* where ts_log was called */

typedef struct log_model {
    ts_graph *g;
    ts_tensor *loss;
} log_model;

/* Linear layer `layer` [LH, LIN]: the identity on its first 4 outputs, bias
 * 0 there, 1 on the others. */
static void set_identity(ts_graph *g, const char *layer) {
    float w[LH * LIN] = {0}, b[LH] = {0, 0, 0, 0, 1, 1};
    for (int i = 0; i < LIN; i++) w[i * LIN + i] = 1.0f;
    ts_array wa = ts_array_f32(w, 2, (int64_t[]){LH, LIN}), ba = ts_array_f32(b, 1, (int64_t[]){LH});
    char name[64];
    snprintf(name, sizeof name, "%s.weight", layer);
    ts_param_set(ts_graph_find(g, name), &wa);
    snprintf(name, sizeof name, "%s.bias", layer);
    ts_param_set(ts_graph_find(g, name), &ba);
}

/* x[4,4] -> block{ fc1 -> Log -> Scale } -> fc2 -> cross entropy. fc1 is
 * set so that its output column 0 is x[:,0], which the data makes negative. */
static void build_log_model(log_model *lm) {
    ts_graph *g = lm->g = ts_graph_new(5);
    int64_t xs[] = {LB, LIN}, ys[] = {LB};
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, xs);
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, ys);
    ts_scope_push(g, "block");
    ts_tensor *h = ts_linear(g, x, LH, "fc1");
    log_line = __LINE__ + 1;
    h = ts_log(g, h);
    h = ts_scale(g, h, 0.5f);
    ts_scope_pop(g);
    h = ts_linear(g, h, LOUT, "fc2");
    lm->loss = ts_cross_entropy(g, h, y);
    ts_tensor_set_name(lm->loss, "loss");
    set_identity(g, "block.fc1");
}

/* x[2,0] = v (sample 2, column 0), the rest in [0.25, 1.85] */
static ts_status run_log_model(ts_model *m, float v) {
    float x[LB * LIN];
    int32_t y[LB];
    for (int i = 0; i < LB * LIN; i++) x[i] = 0.25f + 0.1f * (float)i;
    x[2 * LIN] = v;
    for (int i = 0; i < LB; i++) y[i] = i % LOUT;
    ts_array in[2] = {ts_array_f32(x, 2, (int64_t[]){LB, LIN}), ts_array_i32(y, 1, (int64_t[]){LB})};
    const char *names[] = {"x", "labels"};
    return ts_model_run(m, names, in, 2);
}

/* min of the stats line that starts with `line` in a report, NAN if absent */
static double stats_min(const char *msg, const char *line) {
    const char *p = strstr(msg, line);
    p = p ? strstr(p, "\xe2\x88\x88[") : NULL; /* "∈[" */
    return p ? strtod(p + 4, NULL) : NAN;
}

static int all_finite(const ts_graph *g) {
    for (size_t i = 0; i < ts_graph_tensor_count(g); i++) {
        ts_array a;
        ts_tensor_info(ts_graph_tensor_at(g, i), &a);
        if (!a.data) continue;
        const float *v = a.data;
        for (int64_t k = 0; k < ts_array_numel(&a); k++)
            if (!isfinite(v[k])) return 0;
    }
    return 1;
}

static void test_log(ts_check_numerics mode) {
    printf("-- (a) log of a negative value, check_numerics=%s\n", MODE_NAME[mode]);
    log_model lm;
    build_log_model(&lm);
    ts_options *o = ts_options_new();
    ts_options_set_check_numerics(o, mode);
    ts_model *m = NULL;
    CHECK_OK(ts_model_training(&m, lm.g, lm.loss, o, ts_sgd(0.1f, 0.0f, 0.0f)), "training model");
    int64_t before = ts_counter_get("NonFiniteFound");
    ts_status st = run_log_model(m, -0.5f);
    char msg[8192];
    snprintf(msg, sizeof msg, "%s", ts_last_error());
    int64_t found = ts_counter_get("NonFiniteFound") - before;
    const char *failed = ts_model_failed_tensor(m);
    CHECK(st == TS_ERR_NUMERICS, "run returns TS_ERR_NUMERICS (got %s)", ts_status_name(st));
    CHECK(failed && strcmp(failed, "block/Log:0") == 0, "failed tensor is the Log output: %s", failed ? failed : "(null)");
    char where[512];
    snprintf(where, sizeof where, "op Log 'block/Log:0', built at %s:%d", __FILE__, log_line);
    if (mode == TS_CHECK_OUTPUT) {
        CHECK(strstr(msg, "'block/Scale:0'") != NULL, "output mode: the check fired at the block's output block/Scale:0");
        char confirm[600];
        snprintf(confirm, sizeof confirm, "op by op re-execution of micro-batch 0 confirms the culprit: 'block/Log:0' (op Log, built at %s:%d)",
                 __FILE__, log_line);
        CHECK(strstr(msg, confirm) != NULL, "output mode: '%s'", confirm);
    } else {
        CHECK(strstr(msg, "op by op") == NULL, "op mode: pinned directly, no re-execution needed");
    }
    CHECK(strstr(msg, where) != NULL, "message names op Log and the ts_log call: '%s'", where);
    /* in output mode the re-execution's report comes last: the Log's own */
    double mn = stats_min(msg, "input 0: block.fc1/Add:0 f32[4,6] n=24");
    CHECK(mn == -0.5, "message has the stats of the Log's input block.fc1/Add:0, min %g (want -0.5)", mn);
    CHECK(strstr(msg, "NaN!") != NULL, "the value line flags NaN!");
    CHECK(all_finite(lm.g), "the forward pass stopped before any step: the weights are finite");
    CHECK(mode == TS_CHECK_OP ? found == 1 : found >= 1, "NonFiniteFound +%lld", (long long)found);
    if (st != TS_ERR_NUMERICS) printf("     message: %s\n", msg);
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(lm.g);
}

/* -------------------------------------------------- (b) and (c): the MLP */

enum { B = 16, PIX = 784 };

static float mx[2 * B * PIX];
static int32_t my[2 * B];

/* two micro-batches of a fixed pattern; one value NaN when `nan_at` >= 0 */
static ts_status run_mlp(ts_model *m, int64_t rows, int64_t nan_at) {
    for (int64_t i = 0; i < rows * PIX; i++) mx[i] = (float)((i * 2654435761u) % 1000u) / 500.0f - 1.0f;
    for (int64_t i = 0; i < rows; i++) my[i] = (int32_t)((i * 7) % 10);
    if (nan_at >= 0) mx[nan_at] = NAN;
    ts_array in[2] = {ts_array_f32(mx, 4, (int64_t[]){rows, 1, 28, 28}), ts_array_i32(my, 1, (int64_t[]){rows})};
    const char *names[] = {"x", "labels"};
    return ts_model_run(m, names, in, 2);
}

static int name_known(const ts_model *m, const char *name) {
    const char *const *names;
    size_t n;
    if (!name || ts_model_tensor_names(m, &names, &n)) return 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0) return 1;
    return 0;
}

static char diverged_at[2][256]; /* pinned tensor per mode (output, op) */

static void test_divergence(ts_check_numerics mode) {
    printf("-- (b) SGD lr 1e4 diverges, check_numerics=%s\n", MODE_NAME[mode]);
    mlp n;
    test_mlp_build(&n, B, 42);
    ts_options *o = ts_options_new();
    ts_options_set_check_numerics(o, mode);
    ts_model *m = NULL;
    CHECK_OK(ts_model_training(&m, n.g, n.loss, o, ts_sgd(1e4f, 0.0f, 0.0f)), "training model, SGD lr 1e4");
    ts_status st = TS_OK;
    int run = 0;
    float last_loss = 0;
    while (run < 50 && (st = run_mlp(m, B, -1)) == TS_OK) {
        ts_array l;
        if (ts_model_anchored(m, "loss", &l) == TS_OK) last_loss = *(float *)l.data;
        run++;
    }
    char msg[8192];
    snprintf(msg, sizeof msg, "%s", ts_last_error());
    const char *failed = ts_model_failed_tensor(m);
    CHECK(st == TS_ERR_NUMERICS, "run %d stops with TS_ERR_NUMERICS (last finite loss %g)", run + 1, (double)last_loss);
    CHECK(failed && name_known(m, failed), "it names a tensor of the model: %s", failed ? failed : "(null)");
    char quoted[512];
    snprintf(quoted, sizeof quoted, "'%s'", failed ? failed : "?");
    CHECK(failed && strstr(msg, quoted), "the message names the same tensor");
    int weights_finite = all_finite(n.g);
    const char *kind = !failed                                   ? "none"
                       : strncmp(failed, "UpdatedVar___", 13) == 0 ? "updated weight"
                       : strncmp(failed, "Gradient___", 11) == 0   ? "gradient"
                                                                   : "activation";
    printf("     pinned: %s (%s); weights %s at the failure\n     message: %.*s\n", failed ? failed : "(null)", kind,
           weights_finite ? "all finite" : "already hold NaN/Inf", (int)strcspn(msg, "\n"), msg);
    const char *conf = strstr(msg, "op by op re-execution");
    if (conf) printf("     %.*s\n", (int)strcspn(conf, "\n"), conf);
    if (failed && strcmp(kind, "updated weight") != 0)
        CHECK(weights_finite, "caught in the forward/backward pass: no NaN/Inf reached the weights");
    else if (failed)
        CHECK(!weights_finite, "caught after the optimizer step: the updated weight it names holds the NaN/Inf");
    snprintf(diverged_at[mode - 1], sizeof diverged_at[0], "%s", failed ? failed : "");
    if (mode == TS_CHECK_OP)
        CHECK(strcmp(diverged_at[0], diverged_at[1]) == 0 && diverged_at[0][0],
              "output mode (after op-by-op re-execution) and op mode pin the same tensor: %s", diverged_at[1]);
    if (mode == TS_CHECK_OP && failed && strcmp(kind, "activation") == 0)
        CHECK(strstr(msg, "input 0:") != NULL, "op mode: the stats of the op's inputs are in the message");
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(n.g);
}

static void test_nan_input(ts_check_numerics mode) {
    printf("-- (c) NaN in the input data, check_numerics=%s\n", MODE_NAME[mode]);
    mlp n;
    test_mlp_build(&n, B, 42);
    ts_options *o = ts_options_new();
    ts_options_set_device_iterations(o, 2);
    ts_options_set_check_numerics(o, mode);
    ts_model *m = NULL;
    CHECK_OK(ts_model_training(&m, n.g, n.loss, o, ts_sgd(0.01f, 0.0f, 0.0f)), "training model, D=2");
    CHECK_OK(run_mlp(m, 2 * B, -1), "a clean run");
    int64_t before = ts_counter_get("NonFiniteFound");
    ts_status st = run_mlp(m, 2 * B, (int64_t)(B + 3) * PIX + 100); /* micro-batch 1, sample 3 */
    const char *failed = ts_model_failed_tensor(m);
    const char *msg = ts_last_error();
    CHECK(st == TS_ERR_NUMERICS, "run with a NaN pixel returns TS_ERR_NUMERICS (got %s)", ts_status_name(st));
    CHECK(failed && strcmp(failed, "x") == 0, "pinned to the input: %s", failed ? failed : "(null)");
    CHECK(strstr(msg, "'x'") && strstr(msg, "micro-batch 1") && strstr(msg, "n=12544") && strstr(msg, "NaN!"),
          "message names 'x', micro-batch 1, and its stats with NaN!");
    CHECK(ts_counter_get("NonFiniteFound") > before, "NonFiniteFound counted it");
    CHECK(all_finite(n.g), "no NaN reached the weights");
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(n.g);
}

/* ------------------------------- (d) a Log's backward at 1/x near 0 */

/* x[4,4] -> fc1 -> Log -> fc2 -> cross entropy, fc1 the identity on its
 * first 4 outputs: x[2,0] = 1e-44 gives log(x) = -101, finite, and a
 * backward dout / x past the float range. The Inf first appears in
 * Gradient___fc1/Add:0, which Log's backward writes: the report must name
 * the Log (not the Add whose output it is), its incoming gradient and its
 * forward input. With `block`, x -> fc1 -> block{ Scale(1) -> Log ->
 * Scale(0.5) } -> fc2: under output the Inf Log's backward writes into
 * Gradient___block/Scale:0 is not checked (it stays in the block), and the
 * check fires at Gradient___fc1/Add:0, which the first Scale's backward
 * writes from it: the report says that incoming gradient is already
 * non-finite, and the replay op by op names the Log. */
static int log_bwd_line, scale_line;

static ts_graph *build_log_backward(bool block, ts_tensor **loss) {
    ts_graph *g = ts_graph_new(5);
    int64_t xs[] = {LB, LIN}, ys[] = {LB};
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, xs);
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, ys);
    ts_tensor *h = ts_linear(g, x, LH, "fc1");
    if (block) {
        ts_scope_push(g, "block");
        scale_line = __LINE__ + 1;
        h = ts_scale(g, h, 1.0f);
    }
    log_bwd_line = __LINE__ + 1;
    h = ts_log(g, h);
    if (block) {
        h = ts_scale(g, h, 0.5f);
        ts_scope_pop(g);
    }
    *loss = ts_cross_entropy(g, ts_linear(g, h, LOUT, "fc2"), y);
    set_identity(g, "fc1");
    return g;
}

static void test_log_backward(ts_check_numerics mode, bool block) {
    printf("-- (d) Log's backward at 1/x near 0%s, check_numerics=%s\n", block ? " inside a block" : "", MODE_NAME[mode]);
    ts_tensor *loss;
    ts_graph *g = build_log_backward(block, &loss);
    ts_options *o = ts_options_new();
    ts_options_set_check_numerics(o, mode);
    ts_model *m = NULL;
    CHECK_OK(ts_model_training(&m, g, loss, o, ts_sgd(0.1f, 0.0f, 0.0f)), "training model");
    ts_status st = run_log_model(m, 1e-44f); /* log is finite, 1/x is not */
    char msg[8192];
    snprintf(msg, sizeof msg, "%s", ts_last_error());
    const char *failed = ts_model_failed_tensor(m);
    const char *grad = block ? "Gradient___block/Scale:0" : "Gradient___fc1/Add:0"; /* what Log's backward writes */
    const char *log = block ? "block/Log:0" : "Log:0", *fwd = block ? "block/Scale:0" : "fc1/Add:0";
    CHECK(st == TS_ERR_NUMERICS, "run returns TS_ERR_NUMERICS (got %s)", ts_status_name(st));
    CHECK(failed && strcmp(failed, grad) == 0, "failed tensor: %s, the gradient Log's backward writes (%s)", grad, failed ? failed : "(null)");
    char want[900];
    if (block && mode == TS_CHECK_OUTPUT) {
        snprintf(want, sizeof want,
                 "numeric check: the incoming gradient 'Gradient___block/Scale:0' is already non-finite: the origin is earlier in the "
                 "backward pass, upstream of the first non-finite value in 'Gradient___fc1/Add:0', produced by Scale's backward (op "
                 "Scale 'block/Scale:0', built at %s:%d), run 0, micro-batch 0, backward pass\n",
                 __FILE__, scale_line);
        CHECK(strncmp(msg, want, strlen(want)) == 0, "output mode: the report leads with '%.*s'", (int)strlen(want) - 1, want);
    }
    /* the report of the Log itself: the first one, or the replay's */
    snprintf(want, sizeof want,
             "numeric check: first non-finite value in '%s', produced by Log's backward (op Log '%s', built at %s:%d), "
             "run 0, micro-batch 0, backward pass\n  value: %s f32[4,6] n=24 ",
             grad, log, __FILE__, log_bwd_line, grad);
    const char *rep = strstr(msg, want);
    CHECK(rep && (rep == msg || mode == TS_CHECK_OUTPUT), "the report%s says '%.*s'", rep != msg ? " of the replay op by op" : "",
          (int)strcspn(want, "\n"), want);
    char line[200];
    snprintf(line, sizeof line, "\n  incoming gradient: Gradient___%s f32[4,6] n=24 ", log);
    CHECK(rep && strstr(rep, line), "it gives the stats of Log's incoming gradient Gradient___%s", log);
    snprintf(line, sizeof line, "\n  forward input 0: %s f32[4,6] n=24", fwd);
    double mn = rep ? stats_min(rep, line) : NAN;
    CHECK(mn > 0 && mn < 1e-43, "and of its forward input %s, min %g (want 1e-44, a subnormal)", fwd, mn);
    CHECK(rep && !strstr(rep, "already non-finite"), "Log's incoming gradient and forward input are finite: it is the origin");
    CHECK(!strstr(msg, "op Add") && !strstr(msg, "fc1/MatMul:0"), "the Add (whose output's gradient it is) and its inputs are not blamed");
    if (mode == TS_CHECK_OUTPUT) {
        snprintf(want, sizeof want,
                 "op by op re-execution of micro-batch 0 confirms the culprit: '%s' (the backward of op Log '%s', built at %s:%d)",
                 grad, log, __FILE__, log_bwd_line);
        CHECK(strstr(msg, want) != NULL, "output mode: '%s'", want);
    }
    CHECK(all_finite(g), "stopped before the optimizer step: the weights are finite");
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
}

/* ---------------- (e) the first checked output's input is already Inf */

/* x[4,4] -> fc3 (MatMul, Add) -> log-softmax -> NLL with fc3.weight 1e30
 * and x up to 1e10: fc3/MatMul:0 overflows. With check_numerics = output
 * only the layer output fc3/Add:0 is checked; its input fc3/MatMul:0 is
 * already Inf, and the report says so first (the README's example). */
static int fc3_line;

static void test_input_already_nonfinite(ts_check_numerics mode) {
    printf("-- (e) the first non-finite output's input is already non-finite, check_numerics=%s\n", MODE_NAME[mode]);
    ts_graph *g = ts_graph_new(5);
    int64_t xs[] = {LB, LIN}, ys[] = {LB};
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, xs);
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, ys);
    fc3_line = __LINE__ + 1;
    ts_tensor *h = ts_linear(g, x, LOUT, "fc3");
    ts_tensor *loss = ts_nll_loss(g, ts_log_softmax(g, h, 1), y);
    float w[LOUT * LIN];
    for (int i = 0; i < LOUT * LIN; i++) w[i] = 1e30f;
    ts_array wa = ts_array_f32(w, 2, (int64_t[]){LOUT, LIN});
    ts_param_set(ts_graph_find(g, "fc3.weight"), &wa);
    ts_options *o = ts_options_new();
    ts_options_set_check_numerics(o, mode);
    ts_model *m = NULL;
    CHECK_OK(ts_model_training(&m, g, loss, o, ts_sgd(0.1f, 0.0f, 0.0f)), "training model");
    float xv[LB * LIN];
    int32_t yv[LB];
    for (int i = 0; i < LB * LIN; i++) xv[i] = 1e10f;
    for (int i = 0; i < LB; i++) yv[i] = i % LOUT;
    ts_array in[2] = {ts_array_f32(xv, 2, (int64_t[]){LB, LIN}), ts_array_i32(yv, 1, (int64_t[]){LB})};
    const char *names[] = {"x", "labels"};
    ts_status st = ts_model_run(m, names, in, 2);
    char msg[8192];
    snprintf(msg, sizeof msg, "%s", ts_last_error());
    const char *failed = ts_model_failed_tensor(m);
    CHECK(st == TS_ERR_NUMERICS, "run returns TS_ERR_NUMERICS (got %s)", ts_status_name(st));
    CHECK(failed && strcmp(failed, "fc3/MatMul:0") == 0, "failed tensor (after the replay in output mode): fc3/MatMul:0 (%s)",
          failed ? failed : "(null)");
    char want[700];
    if (mode == TS_CHECK_OUTPUT) {
        snprintf(want, sizeof want,
                 "numeric check: the input 'fc3/MatMul:0' is already non-finite: the origin is upstream of the first non-finite value in "
                 "'fc3/Add:0' (output of op Add 'fc3/Add:0', built at %s:%d), run 0, micro-batch 0, forward pass\n",
                 __FILE__, fc3_line);
        CHECK(strncmp(msg, want, strlen(want)) == 0, "output mode: the report leads with '%.*s'", (int)strcspn(want, ":") + 60, want);
        snprintf(want, sizeof want, "confirms the culprit: 'fc3/MatMul:0' (op MatMul, built at %s:%d)", __FILE__, fc3_line);
        CHECK(strstr(msg, want) != NULL, "output mode: the replay confirms '%s'", want);
        const char *replay = strstr(msg, want);
        CHECK(replay && !strstr(replay, "already non-finite"), "the replay's report of fc3/MatMul:0 does not say its inputs are (they are finite)");
    } else {
        snprintf(want, sizeof want,
                 "numeric check: first non-finite value in 'fc3/MatMul:0' (output of op MatMul 'fc3/MatMul:0', built at %s:%d), run 0",
                 __FILE__, fc3_line);
        CHECK(strncmp(msg, want, strlen(want)) == 0 && !strstr(msg, "already non-finite"),
              "op mode: fc3/MatMul:0 caught where it is made, its inputs finite: '%s'", want);
    }
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
}

/* ------------------------------------------------------------- check off */

static void test_off(void) {
    printf("-- check_numerics=off: NaNs propagate\n");
    log_model lm;
    build_log_model(&lm);
    ts_model *m = NULL;
    CHECK_OK(ts_model_training(&m, lm.g, lm.loss, NULL, ts_sgd(0.1f, 0.0f, 0.0f)), "training model, default options");
    int64_t before = ts_counter_get("NonFiniteFound");
    CHECK_OK(run_log_model(m, -0.5f), "log of a negative value: the run succeeds");
    ts_array l;
    CHECK(ts_model_anchored(m, "loss", &l) == TS_OK && isnan(*(float *)l.data), "the loss is NaN");
    CHECK(!all_finite(lm.g), "and the step wrote NaN into the weights");
    CHECK(ts_model_failed_tensor(m) == NULL, "no failed tensor");
    CHECK(ts_counter_get("NonFiniteFound") == before, "NonFiniteFound unchanged");
    ts_model_free(m);
    ts_graph_free(lm.g);
}

static void test_env(const char *var, const char *value) {
    printf("-- %s=%s with check_numerics off in the options\n", var, value);
    setenv(var, value, 1);
    log_model lm;
    build_log_model(&lm);
    ts_options *o = ts_options_new();
    ts_options_set_check_numerics(o, TS_CHECK_OFF);
    ts_model *m = NULL;
    CHECK_OK(ts_model_training(&m, lm.g, lm.loss, o, ts_sgd(0.1f, 0.0f, 0.0f)), "training model (%s set before it)", var);
    unsetenv(var);
    ts_status st = run_log_model(m, -0.5f);
    const char *failed = ts_model_failed_tensor(m);
    CHECK(st == TS_ERR_NUMERICS && failed && strcmp(failed, "block/Log:0") == 0, "%s: stopped at %s (%s)", var,
          failed ? failed : "(null)", ts_status_name(st));
    CHECK(strstr(ts_last_error(), "op by op re-execution") == NULL, "every op checked as it runs: no re-execution");
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(lm.g);
}

int main(void) {
    ts_set_log_callback(quiet, NULL);
    unsetenv("TS_CHECK_NUMERICS");
    unsetenv("TS_OPBYOP");
    error_logs = 0;
    test_log(TS_CHECK_OUTPUT);
    CHECK(error_logs == 1, "output: the whole report (its re-execution included) was logged once at level ERROR (%d times)", error_logs);
    error_logs = 0;
    test_log(TS_CHECK_OP);
    CHECK(error_logs == 1, "op: the report was logged once at level ERROR (%d times)", error_logs);
    test_divergence(TS_CHECK_OUTPUT);
    test_divergence(TS_CHECK_OP);
    test_nan_input(TS_CHECK_OUTPUT);
    test_nan_input(TS_CHECK_OP);
    test_log_backward(TS_CHECK_OUTPUT, false);
    test_log_backward(TS_CHECK_OP, false);
    test_log_backward(TS_CHECK_OUTPUT, true);
    test_log_backward(TS_CHECK_OP, true);
    test_input_already_nonfinite(TS_CHECK_OUTPUT);
    test_input_already_nonfinite(TS_CHECK_OP);
    test_off();
    test_env("TS_CHECK_NUMERICS", "op");
    test_env("TS_OPBYOP", "1");
    ts_set_log_callback(NULL, NULL);
    return check_summary("test_numerics");
}
