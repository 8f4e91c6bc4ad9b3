/* test_precision.c -- mixed precision (docs/precision.md):
 * (a) ts_cast rounds to nearest even onto bf16 / f16 (known values: 1/3,
 *     f16's overflow at 65520, its underflow below 2^-25), and watches
 *     measure what it lost (a device the host cannot read counts into
 *     its own memory: the staged and CUDA runs check the same counts);
 * (b) a cast's gradient passes through, rounded to the cast's dtype;
 * (c) a model's precision gives the matmuls' inputs named copies before
 *     their first reader (ids stay topological), once per graph; another
 *     precision, or copies added under another model, are refused;
 * (d) linear, batched matmul and conv in bf16 / f16 compute exactly what
 *     their f32 ops compute on the rounded inputs (f32 accumulation), and
 *     a weight's gradient is that gradient rounded; against the f32 op on
 *     the unrounded inputs they stay within the dtype's error;
 * (e) dynamic loss scaling: an overflowing step is skipped (weights
 *     untouched), the scale backs off and grows after its interval; with
 *     a power-of-two scale and no overflow the weights are those of the
 *     run without scaling, bit for bit;
 * (f) a numeric check names the f16 cast where an overflow made an Inf;
 * (g) TS_USE_BF16=1 makes a model bf16; bad options are refused; the lint
 *     warns of f16 without loss scaling;
 * (h) the CPU's vector rounding kernel gives core/half.c's bits and
 *     counts on a million random bit patterns (every exponent, NaNs,
 *     infinities, subnormals), lengths that leave a tail, rounding in
 *     place and packing into cells; on an avx512 CPU again with TS_CPU=avx2. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/cpu/cpu.h"
#include "backend/cpu/cpu_features.h"
#include "check.h"
#include "core/half.h"
#include "mlp.h"
#include "tensorscope.h"

#define SHAPE(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]){__VA_ARGS__}

static float round_to(ts_dtype t, float v) {
    float r;
    ts_round_half(t, &r, &v, 1, NULL);
    return r;
}

static const ts_watch_result *watch_of(const ts_model *m, const char *name) {
    const ts_watch_result *w;
    size_t n;
    if (ts_model_watch_results(m, &w, &n)) return NULL;
    for (size_t i = 0; i < n; i++)
        if (strcmp(w[i].name, name) == 0) return &w[i];
    return NULL;
}

/* ------------------------------------------------------------------ (a) */

static void test_cast_values(void) {
    enum { N = 8 };
    float xv[N] = {1.0f / 3.0f, 65504.0f, 65519.0f, 65520.0f, 1e-8f, 3e-8f, -0.0f, 1e5f};
    ts_graph *g = ts_graph_new(1);
    ts_tensor *x = ts_input(g, "x", TS_F32, SHAPE(N));
    ts_tensor *outs[2] = {ts_cast(g, x, TS_BF16), ts_cast(g, x, TS_F16)};
    CHECK(outs[0] && outs[1] && ts_tensor_precision(outs[0]) == TS_BF16 && ts_tensor_precision(outs[1]) == TS_F16,
          "ts_cast builds bf16 and f16 tensors (%s)", ts_last_error());
    ts_graph *bad = ts_graph_new(1);
    CHECK(ts_cast(bad, NULL, TS_BF16) == NULL, "a cast of NULL is refused");
    ts_graph_free(bad);
    bad = ts_graph_new(1);
    ts_tensor *bx = ts_input(bad, "x", TS_F32, SHAPE(2));
    CHECK(ts_cast(bad, bx, TS_F64) == NULL && strstr(ts_last_error(), "casts to bf16, f16, f32"), "a cast to f64 is refused: %s", ts_last_error());
    ts_graph_free(bad);
    ts_options *o = ts_options_new();
    ts_options_anchor(o, "b", ts_tensor_name(outs[0]), TS_OUTPUT_FINAL, 0);
    ts_options_anchor(o, "h", ts_tensor_name(outs[1]), TS_OUTPUT_FINAL, 0);
    ts_options_watch(o, "Cast:*", TS_WATCH_STATS, 1);
    ts_model *m = NULL;
    CHECK_OK(ts_model_inference(&m, g, outs, 2, o), "inference model of the casts");
    ts_array in = ts_array_f32(xv, 1, (int64_t[]){N});
    const char *names[] = {"x"};
    CHECK_OK(ts_model_run(m, names, &in, 1), "run");
    ts_array b, h;
    CHECK_OK(ts_model_anchored(m, "b", &b), "bf16 values");
    CHECK_OK(ts_model_anchored(m, "h", &h), "f16 values");
    const float *bv = b.data, *hv = h.data;
    int same = 0;
    for (int i = 0; i < N; i++) same += bv[i] == round_to(TS_BF16, xv[i]) && hv[i] == round_to(TS_F16, xv[i]);
    CHECK(same == N, "every value is the conversion's (%d of %d)", same, N);
    CHECK(bv[0] == 0.333984375f && hv[0] == 0.333251953125f, "1/3 -> bf16 0.333984375, f16 0.333251953125 (got %.9g, %.12g)", (double)bv[0],
          (double)hv[0]);
    CHECK(hv[1] == 65504.0f && hv[2] == 65504.0f && isinf(hv[3]) && isinf(hv[7]), "f16: 65519 -> 65504, 65520 and 1e5 -> Inf");
    CHECK(hv[4] == 0.0f && hv[5] == 0x1p-24f && signbit(hv[6]), "f16: 1e-8 -> 0, 3e-8 -> 2^-24, -0 stays -0");
    CHECK(bv[7] == 99840.0f && bv[1] == 65536.0f, "bf16 keeps 1e5 (99840) and rounds 65504 to 65536");
    const ts_watch_result *wb = watch_of(m, ts_tensor_name(outs[0])), *wh = watch_of(m, ts_tensor_name(outs[1]));
    /* every device counts where it rounds (a GPU into its own memory) */
    CHECK(wh && wh->summary->stored == TS_F16 && fabs(wh->summary->stored_overflow - 2.0 / N) < 1e-12 &&
              fabs(wh->summary->stored_underflow - 1.0 / N) < 1e-12,
          "the f16 watch measures 2 of 8 overflowed, 1 of 8 underflowed (%g, %g)", wh ? wh->summary->stored_overflow : -1,
          wh ? wh->summary->stored_underflow : -1);
    CHECK(wb && wb->summary->stored == TS_BF16 && wb->summary->stored_overflow == 0 && wb->summary->stored_underflow == 0,
          "the bf16 watch: nothing lost to range");
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
}

/* ------------------------------------------------------------------ (b) */

static void test_cast_gradient(void) {
    ts_graph *g = ts_graph_new(1);
    ts_tensor *p = ts_param(g, "p", SHAPE(5));
    ts_tensor *loss = ts_sum(g, ts_scale(g, ts_cast(g, p, TS_BF16), 1.0f / 3.0f));
    ts_options *o = ts_options_new();
    ts_options_anchor(o, "gp", "Gradient___p", TS_OUTPUT_FINAL, 0);
    ts_model *m = NULL;
    CHECK_OK(ts_model_training(&m, g, loss, o, ts_sgd(0.0f, 0.0f, 0.0f)), "training model through a cast");
    CHECK_OK(ts_model_run(m, NULL, NULL, 0), "run");
    ts_array gp;
    CHECK_OK(ts_model_anchored(m, "gp", &gp), "the parameter's gradient");
    const float *v = gp.data;
    CHECK(v[0] == 0.333984375f && v[4] == 0.333984375f, "the gradient 1/3 came back rounded to bf16 (%.9g)", (double)v[0]);
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
}

/* ------------------------------------------------------------------ (c) */

static bool topological(const ts_graph *g) {
    for (size_t i = 0; i < ts_graph_tensor_count(g); i++) {
        const ts_tensor *t = ts_graph_tensor_at(g, i);
        for (int j = 0; j < ts_tensor_input_count(t); j++) {
            bool before = false;
            for (size_t k = 0; k < i && !before; k++) before = ts_graph_tensor_at(g, k) == ts_tensor_input(t, j);
            if (!before) return false;
        }
    }
    return true;
}

static ts_status model_at(ts_model **m, const mlp *net, ts_dtype precision) {
    ts_options *o = ts_options_new();
    ts_options_set_precision(o, precision);
    ts_status st = ts_model_training(m, net->g, net->loss, o, ts_sgd(0.01f, 0.0f, 0.0f));
    ts_options_free(o);
    return st;
}

static void test_autocast(void) {
    mlp net;
    CHECK_OK(test_mlp_build(&net, 4, 1), "the tutorial MLP");
    size_t before = ts_graph_tensor_count(net.g);
    ts_model *m1 = NULL, *m2 = NULL, *m3 = NULL;
    CHECK_OK(model_at(&m1, &net, TS_BF16), "a bf16 model");
    CHECK(ts_model_precision(m1) == TS_BF16, "its precision is bf16");
    const ts_tensor *w = ts_graph_find(net.g, "fc1.weight@bf16"), *x = ts_graph_find(net.g, "Flatten:0@bf16");
    CHECK(w && x && ts_tensor_precision(w) == TS_BF16 && strcmp(ts_tensor_op(w), "Cast") == 0, "fc1.weight@bf16 and Flatten:0@bf16 are casts");
    CHECK(ts_graph_tensor_count(net.g) == before + 6, "six copies: three weights, three activations (%zu new)", ts_graph_tensor_count(net.g) - before);
    CHECK(topological(net.g), "every tensor still follows its inputs");
    CHECK(!ts_graph_find(net.g, "fc1.bias@bf16"), "biases stay f32 (added after the matmul)");
    CHECK_OK(model_at(&m2, &net, TS_BF16), "a second bf16 model on the same graph");
    CHECK(ts_graph_tensor_count(net.g) == before + 6, "adds no copies");
    CHECK(model_at(&m3, &net, TS_F16) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "build the graph again"),
          "an f16 model on it is refused: %s", ts_last_error());
    CHECK(model_at(&m3, &net, TS_F32) == TS_ERR_INVALID_ARGUMENT, "and so is an f32 one");
    CHECK_OK(ts_model_compile(m1), "the bf16 model compiles");
    ts_model_free(m1);
    ts_model_free(m2);
    ts_graph_free(net.g);

    CHECK_OK(test_mlp_build(&net, 4, 1), "another MLP");
    CHECK_OK(model_at(&m1, &net, TS_F32), "an f32 model first");
    CHECK(model_at(&m2, &net, TS_BF16) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "another model uses this graph"),
          "then a bf16 model is refused: %s", ts_last_error());
    ts_model_free(m1);
    CHECK_OK(ts_graph_autocast(net.g, TS_F16), "once it is freed, ts_graph_autocast adds f16 copies");
    CHECK(ts_graph_find(net.g, "fc3.weight@f16") != NULL, "named before any model");
    ts_graph_free(net.g);
}

/* ------------------------------------------------------------------ (d) */

enum { B = 6, K = 37, OUT = 5 };

typedef struct gemm_case {
    ts_graph *g;
    ts_tensor *y, *loss;
} gemm_case;

/* op 0: linear x[B,K] -> [B,OUT]; 1: batched matmul x[2,B/2,K] @ w[2,K,OUT]; 2: conv 3x3 on x[2,3,5,7] */
static gemm_case build_case(int op, const float *xv, ts_dtype round_inputs) {
    gemm_case c = {.g = ts_graph_new(7)};
    ts_graph *g = c.g;
    if (op == 0) {
        c.y = ts_linear(g, ts_input(g, "x", TS_F32, SHAPE(B, K)), OUT, "fc");
    } else if (op == 1) {
        ts_tensor *w = ts_param(g, "w", SHAPE(2, K, OUT));
        ts_array wi;
        ts_tensor_info(w, &wi);
        for (int i = 0; i < 2 * K * OUT; i++) ((float *)wi.data)[i] = xv[(i * 7) % (B * K)] * 0.5f;
        c.y = ts_matmul_batched(g, ts_input(g, "x", TS_F32, SHAPE(2, B / 2, K)), w, 0, 0);
    } else {
        ts_conv2d_params p = {.stride_h = 1, .stride_w = 1, .pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1,
                              .dilation_h = 1, .dilation_w = 1, .groups = 1};
        c.y = ts_conv2d_layer(g, ts_input(g, "x", TS_F32, SHAPE(2, 3, 5, 7)), 4, 3, 3, &p, 1, "conv");
    }
    if (round_inputs != TS_F32) /* the f32 twin on the rounded weights */
        for (size_t i = 0; i < ts_graph_tensor_count(g); i++) {
            ts_tensor *t = ts_graph_tensor_at(g, i);
            ts_array v;
            if (strcmp(ts_tensor_op(t), "Param") || ts_tensor_info(t, &v) || strstr(ts_tensor_name(t), "bias")) continue;
            ts_round_half(round_inputs, v.data, v.data, ts_array_numel(&v), NULL);
        }
    c.loss = ts_mean(g, c.y);
    return c;
}

static const char *WEIGHT[] = {"fc.weight", "w", "conv.weight"};
static const int64_t XN[] = {B * K, B * K, 2 * 3 * 5 * 7};

/* y and the weight's gradient of one step of case `op` at `precision`
 * (inputs rounded to `rounded` first, for the f32 twin). */
static void run_case(int op, ts_dtype precision, ts_dtype rounded, const float *x0, float *y, float *gw, int64_t *ny, int64_t *nw) {
    float x[B * K];
    for (int64_t i = 0; i < XN[op]; i++) x[i] = rounded == TS_F32 ? x0[i] : round_to(rounded, x0[i]);
    gemm_case c = build_case(op, x0, rounded);
    ts_options *o = ts_options_new();
    ts_options_set_precision(o, precision);
    ts_options_set_loss_scaling(o, 0, 1.0f, 2.0f, 0.5f, 1); /* f16's gradients unscaled, to compare */
    ts_options_anchor(o, "y", ts_tensor_name(c.y), TS_OUTPUT_FINAL, 0);
    char gname[64];
    snprintf(gname, sizeof gname, "Gradient___%s", WEIGHT[op]);
    ts_options_anchor(o, "gw", gname, TS_OUTPUT_FINAL, 0);
    ts_model *m = NULL;
    ts_array in = {.dtype = TS_F32, .data = x};
    ts_array xi;
    ts_tensor_info(ts_graph_find(c.g, "x"), &xi);
    in.ndim = xi.ndim;
    memcpy(in.shape, xi.shape, sizeof in.shape);
    const char *names[] = {"x"};
    ts_array ya, ga;
    if (ts_model_training(&m, c.g, c.loss, o, ts_sgd(0.0f, 0.0f, 0.0f)) || ts_model_run(m, names, &in, 1) || ts_model_anchored(m, "y", &ya) ||
        ts_model_anchored(m, "gw", &ga)) {
        CHECK(0, "case %d at %s: %s", op, ts_dtype_name(precision), ts_last_error());
        *ny = *nw = 0;
    } else {
        *ny = ts_array_numel(&ya), *nw = ts_array_numel(&ga);
        memcpy(y, ya.data, (size_t)*ny * sizeof *y);
        memcpy(gw, ga.data, (size_t)*nw * sizeof *gw);
    }
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(c.g);
}

static void test_gemms(void) {
    static const char *OP[] = {"linear", "batched matmul", "conv2d"};
    float x[B * K];
    for (int i = 0; i < B * K; i++) x[i] = sinf(0.37f * (float)i) * (1.0f + (float)(i % 5));
    for (int op = 0; op < 3; op++)
        for (ts_dtype d = TS_BF16; d <= TS_F16; d++) {
            static float y[1024], gw[1024], y32[1024], gw32[1024], yref[1024], gwref[1024];
            int64_t ny, nw, ny32, nw32, nyr, nwr;
            run_case(op, d, TS_F32, x, y, gw, &ny, &nw);
            run_case(op, TS_F32, d, x, y32, gw32, &ny32, &nw32);
            run_case(op, TS_F32, TS_F32, x, yref, gwref, &nyr, &nwr);
            int exact_y = ny == ny32 && ny > 0, exact_g = nw == nw32 && nw > 0;
            double err = 0, scale = 0;
            /* a bf16 Linear through the CPU's bf16 GEMM (sbgemm or the
             * avx512_bf16 kernel, where the CPU has the instructions:
             * test_bf16_gemm), and a bf16 batched matmul on the kernel, sums the same products in its own order:
             * within f32's rounding of sums of terms up to 64 times the
             * largest output (a bf16 error is 2^-8); the kernel also
             * multiplies the weight's gradient with the output's gradient
             * rounded to bf16 (test_bf16_gemm checks those products):
             * within two bf16 roundings of the largest f32 gradient */
            bool kernel = strstr(ts_cpu_features(), "bf16 products avx512bf16") != NULL; /* the batched matmul's route too */
            bool own_order = d == TS_BF16 && ((op == 0 && strstr(ts_cpu_features(), "bf16 products sbgemm")) || (op <= 1 && kernel));
            bool own_grad = op <= 1 && d == TS_BF16 && kernel;
            float big = 0, big_g = 0;
            for (int64_t i = 0; i < ny && i < ny32; i++) big = fmaxf(big, fabsf(y32[i]));
            for (int64_t i = 0; i < nw && i < nw32; i++) big_g = fmaxf(big_g, fabsf(gw32[i]));
            for (int64_t i = 0; exact_y && i < ny; i++)
                exact_y = own_order ? fabsf(y[i] - y32[i]) <= 64 * (K + 2) * 0x1p-24f * (big + 1.0f) : y[i] == y32[i];
            for (int64_t i = 0; exact_g && i < nw; i++)
                exact_g = own_grad ? fabsf(gw[i] - gw32[i]) <= 0x1p-7f * big_g : gw[i] == round_to(d, gw32[i]);
            for (int64_t i = 0; i < ny && ny == nyr; i++) {
                err = fmax(err, fabs((double)y[i] - yref[i]));
                scale = fmax(scale, fabs((double)yref[i]));
            }
            double eps = d == TS_BF16 ? 0x1p-8 : 0x1p-11;
            CHECK(exact_y, "%s %s: the output is the f32 op's on the rounded inputs, exactly", OP[op], ts_dtype_name(d));
            CHECK(exact_g, "%s %s: the weight's gradient is the f32 op's rounded to %s", OP[op], ts_dtype_name(d), ts_dtype_name(d));
            CHECK(ny > 0 && err <= 8 * eps * scale && err > 0, "%s %s: within 8 units of rounding of the f32 op (max error %.3g of %.3g)", OP[op],
                  ts_dtype_name(d), err, scale);
        }
}

/* ------------------------------------------------------------------ (e) */

static const char *ckpt_path; /* train_steps writes a checkpoint there, when set */

static void train_steps(ts_dtype precision, int scaling, float init, int interval, int steps, float *w_out, double *scale, int64_t *skipped) {
    mlp net;
    test_mlp_build(&net, 8, 3);
    ts_options *o = ts_options_new();
    ts_options_set_precision(o, precision);
    ts_options_set_loss_scaling(o, scaling, init, 2.0f, 0.5f, interval);
    ts_model *m = NULL;
    float x[8 * 784];
    int32_t lab[8];
    for (int i = 0; i < 8 * 784; i++) x[i] = (float)((i * 37) % 255) / 255.0f;
    for (int i = 0; i < 8; i++) lab[i] = i % 10;
    ts_array in[2] = {ts_array_f32(x, 4, (int64_t[]){8, 1, 28, 28}), ts_array_i32(lab, 1, (int64_t[]){8})};
    const char *names[] = {"x", "labels"};
    ts_status st = ts_model_training(&m, net.g, net.loss, o, ts_sgd(0.05f, 0.0f, 0.0f));
    for (int s = 0; s < steps && !st; s++) st = ts_model_run(m, names, in, 2);
    CHECK(st == TS_OK, "%d steps at %s (scaling %d from %g): %s", steps, ts_dtype_name(precision), scaling, (double)init, st ? ts_last_error() : "ok");
    ts_array w;
    ts_tensor_info(ts_graph_find(net.g, "fc1.weight"), &w);
    memcpy(w_out, w.data, 320 * 784 * sizeof(float));
    ts_model_loss_scale(m, scale, skipped);
    if (ckpt_path && !st) CHECK_OK(ts_checkpoint_save(ckpt_path, m, NULL), "checkpoint after %d steps", steps);
    if (ckpt_path && !st) { /* a fresh model of the same recipe resumes the scale */
        ts_model *r = NULL;
        double rs = 0;
        int64_t rk = -1;
        CHECK_OK(ts_model_training(&r, net.g, net.loss, o, ts_sgd(0.05f, 0.0f, 0.0f)), "a second model");
        CHECK_OK(ts_model_compile(r), "compiled");
        CHECK_OK(ts_checkpoint_load(ckpt_path, r, NULL), "resumed from the checkpoint");
        ts_model_loss_scale(r, &rs, &rk);
        CHECK(rs == *scale && rk == *skipped, "the loss scale and skipped steps resume (%g, %lld)", rs, (long long)rk);
        ts_model_free(r);
    }
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(net.g);
}

static void test_loss_scaling(void) {
    static float w0[320 * 784], w1[320 * 784], w2[320 * 784];
    double scale;
    int64_t skipped;
    train_steps(TS_F16, 1, 1e30f, 2000, 0, w0, &scale, &skipped);
    CHECK(scale == (double)1e30f && skipped == 0, "before any step the scale is the initial one");
    train_steps(TS_F16, 1, 1e30f, 2000, 1, w1, &scale, &skipped);
    CHECK(skipped == 1 && scale == 0.5 * (double)1e30f, "a step whose gradients overflow f16 is skipped, the scale halves (%g, %lld)", scale,
          (long long)skipped);
    CHECK(memcmp(w0, w1, sizeof w0) == 0, "and the weights are untouched");
    char path[] = "/tmp/ts_precision_ckpt_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    ckpt_path = path;
    train_steps(TS_F16, -1, 1024.0f, 2, 4, w1, &scale, &skipped);
    ckpt_path = NULL;
    remove(path);
    CHECK(skipped == 0 && scale == 4096.0, "f16's default scaling: 4 good steps at interval 2 double the scale twice (%g)", scale);
    train_steps(TS_F16, 1, 1e30f, 2000, 3, w1, &scale, &skipped);
    CHECK(skipped == 3 && scale == (double)1e30f / 8, "three skipped steps: the scale halves three times");
    train_steps(TS_BF16, 1, 1024.0f, 2000, 3, w1, &scale, &skipped);
    train_steps(TS_BF16, 0, 1024.0f, 2000, 3, w2, &scale, &skipped);
    CHECK(memcmp(w1, w2, sizeof w1) == 0, "a power-of-two scale without overflow: the weights of the run without scaling, bit for bit");
    CHECK(scale == 1.0 && skipped == 0 && ts_model_loss_scale(NULL, &scale, NULL) == 0, "scaling off reports scale 1");
}

/* ------------------------------------------------------------------ (f) */

static void quiet(void *user, int level, const char *msg) { (void)user, (void)level, (void)msg; }

static void test_overflow_check(void) {
    mlp net;
    test_mlp_build(&net, 2, 1);
    ts_options *o = ts_options_new();
    ts_options_set_precision(o, TS_F16);
    ts_options_set_check_numerics(o, TS_CHECK_OUTPUT);
    ts_model *m = NULL;
    static float x[2 * 784];
    int32_t lab[2] = {1, 2};
    x[100] = 1e5f; /* beyond f16's 65504 */
    ts_array in[2] = {ts_array_f32(x, 4, (int64_t[]){2, 1, 28, 28}), ts_array_i32(lab, 1, (int64_t[]){2})};
    const char *names[] = {"x", "labels"};
    ts_set_log_callback(quiet, NULL);
    CHECK_OK(ts_model_training(&m, net.g, net.loss, o, ts_sgd(0.01f, 0.0f, 0.0f)), "f16 model with numeric checks");
    ts_status st = ts_model_run(m, names, in, 2);
    const char *msg = ts_last_error();
    CHECK(st == TS_ERR_NUMERICS && strstr(msg, "'Flatten:0@f16'") && strstr(msg, "f16 overflow: 1 finite values"),
          "the check names the cast where f16 overflowed: %.300s", msg);
    ts_set_log_callback(NULL, NULL);
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(net.g);
}

/* ------------------------------------------------------------------ (g) */

static void test_env_and_options(void) {
    mlp net;
    test_mlp_build(&net, 2, 1);
    setenv("TS_USE_BF16", "1", 1);
    ts_model *m = NULL;
    CHECK_OK(ts_model_training(&m, net.g, net.loss, NULL, ts_sgd(0.01f, 0.0f, 0.0f)), "a model under TS_USE_BF16=1");
    CHECK(ts_model_precision(m) == TS_BF16 && ts_graph_find(net.g, "fc2.weight@bf16"), "is bf16, with its copies");
    unsetenv("TS_USE_BF16");
    ts_model_free(m);
    ts_graph_free(net.g);
    test_mlp_build(&net, 2, 1);
    ts_options *lo = ts_options_new();
    ts_options_set_precision(lo, TS_F16);
    ts_options_set_loss_scaling(lo, 0, 1.0f, 2.0f, 0.5f, 1);
    ts_set_log_callback(quiet, NULL);
    CHECK_OK(ts_model_training(&m, net.g, net.loss, lo, ts_sgd(0.01f, 0.0f, 0.0f)), "an f16 model without loss scaling");
    CHECK_OK(ts_model_compile(m), "compiled");
    ts_set_log_callback(NULL, NULL);
    const char *const *lint;
    size_t n_lint = 0;
    CHECK(ts_model_lint(m, &lint, &n_lint) == TS_OK && n_lint == 1 && strstr(lint[0], "without loss scaling"), "the lint warns of f16 without loss scaling");
    ts_model_free(m);
    ts_options_free(lo);
    ts_graph_free(net.g);
    ts_options *o = ts_options_new();
    CHECK(ts_options_set_precision(o, TS_I32) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "f32, bf16 or f16"), "precision i32 is refused");
    CHECK(ts_options_set_loss_scaling(o, 1, 65536.0f, 2.0f, 1.5f, 2000) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "backoff"),
          "a backoff of 1.5 is refused: %s", ts_last_error());
    CHECK(ts_options_set_loss_scaling(o, 1, 0.5f, 2.0f, 0.5f, 2000) == TS_ERR_INVALID_ARGUMENT, "an initial scale below 1 is refused");
    CHECK(ts_options_set_loss_scaling(o, 1, 8.0f, 2.0f, 0.5f, 0) == TS_ERR_INVALID_ARGUMENT, "a growth interval of 0 is refused");
    ts_options_free(o);
}

/* ------------------------------------------------------------------ (h) */

static void test_vector_kernel(void) {
    enum { N = 1000003 };
    float *x = malloc(N * sizeof *x), *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    if (!x || !a || !b) {
        CHECK(0, "memory for the kernel check");
        free(x), free(a), free(b);
        return;
    }
    uint64_t s = 0x9e3779b97f4a7c15u;
    for (int i = 0; i < N; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        uint32_t u = (uint32_t)(s >> 16);
        if (i % 7 == 0) u = (u & 0x8000ffffu) | ((uint32_t)(i % 256) << 23) | (u & 0x7f0000u); /* every exponent, ties */
        if (i % 11 == 0) u = (u & 0xffff0000u) | 0x8000u;                                     /* bf16 halfway points */
        memcpy(&x[i], &u, sizeof u);
    }
    for (ts_dtype t = TS_BF16; t <= TS_F16; t++) {
        ts_half_loss la = {0, 0}, lb = {0, 0};
        ts_round_half(t, a, x, N, &la);
        memcpy(b, x, N * sizeof *b);
        ts_backend_cpu()->round_half(NULL, t, b, N, &lb); /* the CPU's vector kernel, in place */
        CHECK(memcmp(a, b, N * sizeof *a) == 0 && la.underflow == lb.underflow && la.overflow == lb.overflow,
              "%s: the vector kernel's bits and counts are the scalar's (%lld underflowed, %lld overflowed of %d)", ts_dtype_name(t),
              (long long)lb.underflow, (long long)lb.overflow, N);
        /* the table's widening of 16-bit cells (what the observers read) is the scalar conversion's, bit for bit */
        uint16_t *cells = (uint16_t *)(void *)a; /* N cells fit in a's N floats */
        for (int i = 0; i < N; i++) cells[i] = t == TS_BF16 ? ts_f32_to_bf16(x[i]) : ts_f32_to_f16(x[i]);
        ts_backend_cpu()->unpack_half(NULL, t, b, cells, N);
        int wrong = 0;
        for (int i = 0; i < N && !wrong; i++) {
            float want = t == TS_BF16 ? ts_bf16_to_f32(cells[i]) : ts_f16_to_f32(cells[i]);
            wrong = memcmp(&want, &b[i], sizeof want) != 0 && !(isnan(want) && isnan(b[i]));
        }
        CHECK(!wrong, "%s: unpack_half widens every cell as the scalar conversion does", ts_dtype_name(t));
        /* packing into 16-bit cells (a Cast's kernel): the scalar conversion's cells, the rounding's counts */
        ts_half_loss lp = {0, 0};
        ts_cpu_pack_half(NULL, t, cells, x, N, &lp);
        for (int i = 0; i < N && !wrong; i++) wrong = cells[i] != (t == TS_BF16 ? ts_f32_to_bf16(x[i]) : ts_f32_to_f16(x[i]));
        CHECK(!wrong && lp.underflow == la.underflow && lp.overflow == la.overflow,
              "%s: the vector kernel packs the scalar conversion's cells and counts what it loses as the rounding does", ts_dtype_name(t));
    }
    free(x), free(a), free(b);
}

/* (h) again with the kernels capped at AVX2 (TS_CPU=avx2), in a child:
 * the level is read once per process */
static void test_vector_kernel_avx2(const char *self) {
    if (ts_cpu_level() < TS_CPU_AVX512) return; /* the run above was that level, or below it */
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TS_CPU", "avx2", 1);
        execl(self, self, "vector-kernel", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0, "(h) with TS_CPU=avx2 passed its checks");
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "vector-kernel") == 0) {
        test_vector_kernel();
        return check_summary("test_precision (h), TS_CPU=avx2");
    }
    test_cast_values();
    test_cast_gradient();
    test_autocast();
    test_gemms();
    test_loss_scaling();
    test_overflow_check();
    test_env_and_options();
    test_vector_kernel();
    test_vector_kernel_avx2(argv[0]);
    return check_summary("test_precision");
}
