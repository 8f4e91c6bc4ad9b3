/* test_memplan.c -- the memory plan reuses buffers, and reuse never shows in
 * what the user sees.
 *
 * 1. A deep chain of relus and scales (with a skip connection from the
 *    first relu to the end): its activations take a few buffers, not one
 *    per op (ts_model_memory_get: activations vs activations_without_reuse);
 *    in training only the values some backward reads outlive the forward
 *    pass; the output is still right.
 * 2. One training run of an MLP (D = 2) anchoring every activation with ALL:
 *    sample 0 must equal an inference model of the initial weights (a graph
 *    rebuilt from the same seed) on micro-batch 0, and sample 1 an inference
 *    model of the weights after step 1 (UpdatedVar___ anchored ALL) on
 *    micro-batch 1. Same kernels, same shapes: bit-exact is expected, 1e-6
 *    is the limit.
 * 3. Observation does not perturb training: a run anchoring only the loss
 *    and one anchoring everything ("*", ALL) with watches and per-op numeric
 *    checks give identical losses and identical updated weights.
 * 4. Flatten of a model input is a view: no buffer, no copy, and it follows
 *    the input from micro-batch to micro-batch. */
#include <math.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tensorscope.h"

/* --------------------------------------------------------- 1. deep chain */

static void deep_chain(int training)
{
    enum { B = 16, F = 64, DEPTH = 40 };
    ts_graph *g = ts_graph_new(1);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){B, F});
    ts_tensor *h = training ? ts_mul(g, x, ts_param(g, "w", 1, (int64_t[]){F})) : x;
    ts_tensor *first = NULL;
    for (int i = 0; i < DEPTH; i++) {
        h = i % 2 ? ts_scale(g, h, 0.9f) : ts_relu(g, h);
        if (!first)
            first = h;
    }
    if (!training) /* a skip connection: the first relu lives to the end */
        h = ts_add(g, h, first);
    ts_model *m = NULL;
    ts_status st;
    if (training) {
        ts_tensor *loss = ts_mean(g, h);
        ts_tensor_set_name(loss, "loss");
        st = ts_model_training(&m, g, loss, NULL, ts_sgd(0.1f, 0, 0));
    } else {
        st = ts_model_inference(&m, g, &h, 1, NULL);
    }
    if (!st)
        st = ts_model_compile(m);
    CHECK_OK(st, "compile a %d-op chain (%s)", DEPTH, training ? "training" : "inference");
    ts_model_memory mem;
    if (!st) {
        st = ts_model_memory_get(m, &mem);
        CHECK_OK(st, "ts_model_memory_get");
    }
    if (!st) {
        size_t planned = (size_t)mem.activations, unplanned = (size_t)mem.activations_without_reuse;
        size_t one = (size_t)B * F * sizeof(float);
        /* inference: a value lives until its consumer ran, so two buffers
         * and the skip connection's suffice; first-fit may use a fourth.
         * Training keeps only what a backward reads: the 20 relu outputs
         * (Relu's backward reads its output), not the scales' outputs nor
         * the relus' inputs (no backward reads them), plus a few values and
         * gradients in flight. Keeping every op input until its consumer's
         * backward would take ~43 buffers. */
        size_t limit = training ? (size_t)(DEPTH / 2 + 4) * one : 4 * one;
        CHECK(unplanned >= (size_t)DEPTH * one && planned <= limit,
              "%s chain: activations %zu bytes planned vs %zu without reuse (%.1f buffers of %zu)",
              training ? "training" : "inference", planned, unplanned, (double)planned / (double)one, one);
        float *xv = malloc(sizeof(float) * B * F);
        for (int i = 0; i < B * F; i++)
            xv[i] = (float)((i % 13) - 6) / 3.0f;
        ts_array in[2] = {ts_array_f32(xv, 2, (int64_t[]){B, F})};
        const char *names[1] = {"x"};
        st = ts_model_run(m, names, in, 1);
        CHECK_OK(st, "run the chain");
        ts_array out;
        if (!st && !training && ts_model_anchored(m, ts_tensor_name(h), &out) == TS_OK) {
            /* 20 relus and 20 scales of 0.9, plus the first relu */
            double f = pow(0.9, DEPTH / 2), worst = 0;
            const float *o = out.data;
            for (int i = 0; i < B * F; i++)
                worst = fmax(worst, fabs(o[i] - (xv[i] > 0 ? xv[i] * (f + 1.0) : 0.0)));
            CHECK(worst < 1e-6, "chain output correct despite buffer reuse (max err %.3g)", worst);
        }
        free(xv);
    }
    ts_model_free(m);
    ts_graph_free(g);
}

/* ----------------------------------------------------------------- MLP */

enum { MB = 8, IN = 20, C = 10, D = 2 };

static const char *const ACTS[] = {"fc1/MatMul:0", "fc1/Add:0", "Relu:0", "fc2/MatMul:0", "fc2/Add:0",
                                   "Relu:1", "fc3/MatMul:0", "fc3/Add:0", "LogSoftmax:0", "loss"};
static const char *const PARAMS[] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"};
#define N_ACTS ((int)(sizeof ACTS / sizeof ACTS[0]))
#define N_PARAMS ((int)(sizeof PARAMS / sizeof PARAMS[0]))

static ts_tensor *mlp(ts_graph *g)
{
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){MB, IN});
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){MB});
    ts_tensor *h = ts_relu(g, ts_linear(g, x, 16, "fc1"));
    h = ts_relu(g, ts_linear(g, h, 12, "fc2"));
    h = ts_log_softmax(g, ts_linear(g, h, C, "fc3"), 1);
    ts_tensor *loss = ts_nll_loss(g, h, y);
    ts_tensor_set_name(loss, "loss");
    return loss;
}

typedef struct inputs {
    float x[D * 2 * MB * IN];
    int32_t y[D * 2 * MB];
} inputs;

static void inputs_make(inputs *in)
{
    uint64_t s = 12345;
    for (int i = 0; i < D * 2 * MB * IN; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        in->x[i] = (float)((double)(s >> 11) * 0x1.0p-53 * 4.0 - 2.0);
    }
    for (int i = 0; i < D * 2 * MB; i++)
        in->y[i] = (int32_t)((i * 7 + 3) % C);
}

static const char *const IN_NAMES[2] = {"x", "labels"};

static ts_status run_mb(ts_model *m, inputs *in, int first_mb, int n_mb)
{
    ts_array a[2] = {ts_array_f32(in->x + first_mb * MB * IN, 2, (int64_t[]){n_mb * MB, IN}),
                     ts_array_i32(in->y + first_mb * MB, 1, (int64_t[]){n_mb * MB})};
    return ts_model_run(m, IN_NAMES, a, 2);
}

/* Max |a - b| over n floats; *exact when every bit matches. */
static double max_diff(const float *a, const float *b, int64_t n, int *exact)
{
    double d = 0;
    *exact = memcmp(a, b, sizeof(float) * (size_t)n) == 0;
    for (int64_t i = 0; i < n; i++)
        d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

/* An inference model of a fresh graph (seed 42), its weights set from
 * `weights` (per parameter, NULL = the seed's), run on micro-batch `mb`;
 * compares every activation with sample `sample` of the training anchors. */
static void compare_inference(ts_model *train, const float *const *weights, inputs *in, int mb, int sample)
{
    ts_graph *g = ts_graph_new(42);
    mlp(g);
    for (int p = 0; weights && p < N_PARAMS; p++) {
        ts_tensor *t = ts_graph_find(g, PARAMS[p]);
        ts_array info;
        ts_tensor_info(t, &info);
        ts_array v = info;
        v.data = (void *)weights[p];
        ts_param_set(t, &v);
    }
    ts_tensor *outs[N_ACTS];
    for (int k = 0; k < N_ACTS; k++)
        outs[k] = ts_graph_find(g, ACTS[k]);
    ts_model *m = NULL;
    ts_status st = ts_model_inference(&m, g, outs, N_ACTS, NULL);
    if (!st)
        st = ts_model_compile(m);
    if (!st)
        st = run_mb(m, in, mb, 1);
    CHECK_OK(st, "inference model on micro-batch %d", mb);
    for (int k = 0; !st && k < N_ACTS; k++) {
        ts_array want, got;
        if (ts_model_anchored(m, ACTS[k], &want) || ts_model_anchored(train, ACTS[k], &got)) {
            CHECK(0, "%s anchored in both models: %s", ACTS[k], ts_last_error());
            continue;
        }
        int64_t n = ts_array_numel(&want); /* [1, *T] */
        int exact = 0;
        int ok = got.ndim == want.ndim && got.shape[0] == D && ts_array_numel(&got) == D * n;
        double d = ok ? max_diff((const float *)got.data + sample * n, want.data, n, &exact) : INFINITY;
        CHECK(ok && d <= 1e-6, "sample %d of %-13s = inference: max diff %.3g%s", sample, ACTS[k], d,
              exact ? " (bit-exact)" : "");
    }
    ts_model_free(m);
    ts_graph_free(g);
}

static void anchored_copies(void)
{
    inputs in;
    inputs_make(&in);
    ts_graph *g = ts_graph_new(42);
    ts_tensor *loss = mlp(g);
    ts_options *o = ts_options_new();
    ts_options_set_device_iterations(o, D);
    for (int k = 0; k < N_ACTS; k++)
        ts_options_anchor(o, ACTS[k], ACTS[k], TS_OUTPUT_ALL, 0);
    ts_options_anchor(o, NULL, "UpdatedVar___*", TS_OUTPUT_ALL, 0);
    ts_options_anchor(o, NULL, "Gradient___*", TS_OUTPUT_ALL, 0);
    ts_model *m = NULL;
    ts_status st = ts_model_training(&m, g, loss, o, ts_sgd(0.1f, 0.9f, 0.0f));
    if (!st)
        st = ts_model_compile(m);
    if (!st)
        st = run_mb(m, &in, 0, D);
    CHECK_OK(st, "train D=%d anchoring every activation, gradient and update (ALL)", D);
    if (!st) {
        ts_model_memory mem;
        if (ts_model_memory_get(m, &mem) == TS_OK)
            printf("     activations %lld bytes, %lld without reuse; anchors %lld\n", (long long)mem.activations,
                   (long long)mem.activations_without_reuse, (long long)mem.anchors);
        compare_inference(m, NULL, &in, 0, 0);
        const float *w1[N_PARAMS];
        char name[64];
        int ok = 1;
        for (int p = 0; p < N_PARAMS; p++) {
            ts_array a;
            snprintf(name, sizeof name, "UpdatedVar___%s", PARAMS[p]);
            ok = ok && ts_model_anchored(m, name, &a) == TS_OK && a.shape[0] == D;
            w1[p] = ok ? a.data : NULL; /* sample 0 = after step 1 */
        }
        CHECK(ok, "UpdatedVar___ anchored with %d samples", D);
        if (ok)
            compare_inference(m, w1, &in, 1, 1);
    }
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
}

/* ------------------------------------------ 3. observation changes nothing */

typedef struct trained {
    float loss[D * 2];
    float params[N_PARAMS][16 * IN];
    int64_t numel[N_PARAMS];
    int ok;
} trained;

static void train_once(trained *t, int observe_all)
{
    inputs in;
    inputs_make(&in);
    ts_graph *g = ts_graph_new(42);
    ts_tensor *loss = mlp(g);
    ts_options *o = ts_options_new();
    ts_options_set_device_iterations(o, D);
    ts_options_set_gradient_accumulation(o, 2);
    if (observe_all) {
        ts_options_anchor(o, NULL, "*", TS_OUTPUT_ALL, 0);
        ts_options_watch(o, "*", TS_WATCH_STATS | TS_WATCH_HISTOGRAM | TS_WATCH_RANGE, 1);
        ts_options_set_check_numerics(o, TS_CHECK_OP);
    } else {
        ts_options_anchor(o, "loss", "loss", TS_OUTPUT_ALL, 0);
    }
    ts_model *m = NULL;
    ts_status st = ts_model_training(&m, g, loss, o, ts_sgd(0.1f, 0.9f, 0.0f));
    if (!st)
        st = ts_model_compile(m);
    if (!st)
        st = run_mb(m, &in, 0, D * 2);
    ts_array a;
    if (!st)
        st = ts_model_anchored(m, "loss", &a);
    const char *const *list;
    size_t n_anchors = 0;
    if (!st)
        ts_model_anchor_list(m, &list, &n_anchors);
    CHECK_OK(st, "train D=%d, A=2 anchoring %s (%zu anchors)", D, observe_all ? "everything" : "the loss only",
             n_anchors);
    t->ok = !st && ts_array_numel(&a) == D * 2;
    if (t->ok)
        memcpy(t->loss, a.data, sizeof t->loss);
    for (int p = 0; t->ok && p < N_PARAMS; p++) {
        ts_array v;
        ts_tensor_info(ts_graph_find(g, PARAMS[p]), &v);
        t->numel[p] = ts_array_numel(&v);
        memcpy(t->params[p], v.data, sizeof(float) * (size_t)t->numel[p]);
    }
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
}

static void observation_is_free(void)
{
    static trained quiet, loud;
    train_once(&quiet, 0);
    train_once(&loud, 1);
    if (!quiet.ok || !loud.ok)
        return;
    int exact;
    double d = max_diff(quiet.loss, loud.loss, D * 2, &exact);
    CHECK(exact, "losses of all %d micro-batches identical (max diff %.3g)", D * 2, d);
    for (int p = 0; p < N_PARAMS; p++) {
        d = max_diff(quiet.params[p], loud.params[p], quiet.numel[p], &exact);
        CHECK(exact, "%-10s after %d steps identical (max diff %.3g)", PARAMS[p], D, d);
    }
}

/* ------------------------------------- 5. a view of an activation */

/* relu -> reshape -> relu: the reshape of an activation shares its buffer
 * (no copy, no bytes of its own), and still reads as the reshaped values. */
static void reshape_is_a_view(void)
{
    enum { B = 8, F = 32 };
    ts_graph *g = ts_graph_new(1);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){B, F});
    ts_tensor *r = ts_reshape(g, ts_relu(g, x), 3, (int64_t[]){B, 4, F / 4});
    ts_tensor *y = ts_relu(g, r);
    ts_options *o = ts_options_new();
    ts_options_anchor(o, "relu0", "Relu:0", TS_OUTPUT_FINAL, 0);
    ts_options_anchor(o, "view", "Reshape:0", TS_OUTPUT_FINAL, 0);
    ts_model *m = NULL;
    ts_status st = ts_model_inference(&m, g, &y, 1, o);
    if (!st)
        st = ts_model_compile(m);
    CHECK_OK(st, "compile relu -> reshape -> relu");
    float xv[B * F];
    for (int i = 0; i < B * F; i++)
        xv[i] = (float)(i % 7) - 3.0f;
    ts_array in = ts_array_f32(xv, 2, (int64_t[]){B, F});
    const char *names[1] = {"x"};
    ts_model_memory mem;
    ts_array a0, av;
    if (!st)
        st = ts_model_run(m, names, &in, 1);
    if (!st)
        st = ts_model_memory_get(m, &mem);
    if (!st)
        st = ts_model_anchored(m, "relu0", &a0);
    if (!st)
        st = ts_model_anchored(m, "view", &av);
    CHECK_OK(st, "run, memory, anchors");
    if (!st) {
        int64_t one = (int64_t)B * F * (int64_t)sizeof(float);
        CHECK(mem.activations_without_reuse == 2 * one,
              "two activation buffers for three op outputs (%lld bytes, one is %lld): the reshape has none of its own",
              (long long)mem.activations_without_reuse, (long long)one);
        CHECK(av.ndim == 3 && av.shape[1] == 4 && memcmp(a0.data, av.data, sizeof xv) == 0,
              "the view reads as the reshaped relu output");
    }
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
}

/* ------------------------------ 6. a view's gradient shares its input's */

/* fc1 -> relu -> reshape -> reshape back -> fc2 -> cross entropy, trained,
 * against the same without the reshapes: the views add no buffers of
 * their own, values or gradients (the gradient of a view's input is the
 * view's gradient, reshaped, in the same buffer), and the two train alike. */
static ts_status views_model(bool views, ts_model **m, ts_graph **gp)
{
    enum { B = 8, F = 32 };
    ts_graph *g = *gp = ts_graph_new(4);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){B, F});
    ts_tensor *labels = ts_input(g, "labels", TS_I32, 1, (int64_t[]){B});
    ts_tensor *h = ts_relu(g, ts_linear(g, x, F, "fc1"));
    if (views)
        h = ts_reshape(g, ts_reshape(g, h, 3, (int64_t[]){B, 4, F / 4}), 2, (int64_t[]){B, F});
    ts_tensor *loss = ts_cross_entropy(g, ts_linear(g, h, 5, "fc2"), labels);
    return ts_model_training(m, g, loss, NULL, ts_sgd(0.1f, 0, 0));
}

static void view_gradient_shared(void)
{
    enum { B = 8, F = 32 };
    float xv[B * F];
    int32_t yv[B];
    for (int i = 0; i < B * F; i++)
        xv[i] = (float)((i * 13) % 11) / 5.0f - 1.0f;
    for (int i = 0; i < B; i++)
        yv[i] = i % 5;
    ts_array in[2] = {ts_array_f32(xv, 2, (int64_t[]){B, F}), ts_array_i32(yv, 1, (int64_t[]){B})};
    const char *names[2] = {"x", "labels"};
    ts_model_memory mem[2];
    ts_graph *g[2];
    ts_model *m[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        ts_status st = views_model(k == 1, &m[k], &g[k]);
        for (int r = 0; !st && r < 3; r++)
            st = ts_model_run(m[k], names, in, 2);
        if (!st)
            st = ts_model_memory_get(m[k], &mem[k]);
        CHECK_OK(st, "3 steps %s the reshapes", k ? "with" : "without");
    }
    CHECK(mem[0].activations_without_reuse == mem[1].activations_without_reuse,
          "two reshapes add no buffers, values or gradients (%lld bytes without them, %lld with)",
          (long long)mem[0].activations_without_reuse, (long long)mem[1].activations_without_reuse);
    ts_array w0, w1;
    bool ok = !ts_tensor_info(ts_graph_find(g[0], "fc1.weight"), &w0) && !ts_tensor_info(ts_graph_find(g[1], "fc1.weight"), &w1);
    CHECK(ok && memcmp(w0.data, w1.data, sizeof(float) * F * F) == 0, "fc1 trained the same through the views' shared gradient");
    for (int k = 0; k < 2; k++)
        ts_model_free(m[k]), ts_graph_free(g[k]);
}

/* ------------------------------------------- 4. a view of a model input */

/* Flatten of the input x shares x's buffer (no bytes of its own, no copy)
 * and follows it from micro-batch to micro-batch: anchored with ALL over
 * D = 3 micro-batches it equals x, and what consumes it (a scale) too. */
static void input_view(void)
{
    enum { VD = 3, VB = 2, VC = 3, VH = 4 };
    ts_graph *g = ts_graph_new(1);
    ts_tensor *x = ts_input(g, "x", TS_F32, 3, (int64_t[]){VB, VC, VH});
    ts_tensor *f = ts_flatten(g, x, 1);
    ts_tensor *s = ts_scale(g, f, 2.0f);
    ts_options *o = ts_options_new();
    ts_status st = ts_options_set_device_iterations(o, VD);
    if (!st)
        st = ts_options_anchor(o, "f", ts_tensor_name(f), TS_OUTPUT_ALL, 0);
    if (!st)
        st = ts_options_anchor(o, "s", ts_tensor_name(s), TS_OUTPUT_ALL, 0);
    ts_model *m = NULL;
    if (!st)
        st = ts_model_inference(&m, g, &s, 1, o);
    if (!st)
        st = ts_model_compile(m);
    CHECK_OK(st, "compile Flatten of an input");
    ts_model_memory mem;
    if (!st && ts_model_memory_get(m, &mem) == TS_OK)
        CHECK(mem.activations_without_reuse == (VB * VC * VH * 4 + 63) / 64 * 64,
              "only the scale's output takes activation bytes (%lld, want %d, buffers 64-byte aligned): the flatten is a view",
              (long long)mem.activations_without_reuse, (VB * VC * VH * 4 + 63) / 64 * 64);
    float xv[VD * VB * VC * VH];
    for (int i = 0; i < VD * VB * VC * VH; i++)
        xv[i] = (float)i - 7.5f;
    ts_array in = ts_array_f32(xv, 3, (int64_t[]){VD * VB, VC, VH});
    const char *names[1] = {"x"};
    if (!st)
        st = ts_model_run(m, names, &in, 1);
    CHECK_OK(st, "run %d micro-batches", VD);
    ts_array fa, sa;
    if (!st && ts_model_anchored(m, "f", &fa) == TS_OK && ts_model_anchored(m, "s", &sa) == TS_OK) {
        const float *fv = fa.data, *sv = sa.data;
        int bad = 0;
        for (int i = 0; i < VD * VB * VC * VH; i++)
            bad += fv[i] != xv[i] || sv[i] != 2.0f * xv[i];
        CHECK(bad == 0 && fa.ndim == 3 && fa.shape[0] == VD && fa.shape[2] == VC * VH,
              "Flatten:0 anchored ALL equals x in every micro-batch (%d wrong)", bad);
    } else {
        CHECK(0, "anchors f and s readable: %s", ts_last_error());
    }
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
}

int main(void)
{
    reshape_is_a_view();
    view_gradient_shared();
    deep_chain(0);
    deep_chain(1);
    input_view();
    anchored_copies();
    observation_is_free();
    return check_summary("test_memplan");
}
