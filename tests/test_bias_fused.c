/* test_bias_fused.c -- a Linear's bias Add done in its product's output
 * pass (docs/backend.md, "Bias in the product's output pass") gives the
 * bits the separate Add gives, and so does the Relu or GELU after it done
 * in the same pass (kernel_act_case, act_models); likewise a Conv's Relu
 * done in the convolution's output pass (conv_relu_case, conv_relu_models
 * below).
 *
 * The kernel: ts_gemm_pool_bias against ts_gemm_pool and a plain float
 * add, on each of its paths (one thread, split by rows, split by columns,
 * B transposed or not, the sum written apart or over the product).
 *
 * The model: an MLP of ts_linear layers (each Add follows its MatMul: the
 * executor fuses them) against the same MLP with each bias added first,
 * Add(bias, MatMul), which the executor never fuses. The first forward's
 * loss is the same bits, the anchored product and sum of the fused layer
 * differ by exactly its bias (the product keeps its own value), and 3 SGD
 * steps agree to float rounding (the two graphs' bias gradients are summed
 * by different broadcast paths). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "seeded.h"
#include "backend/cpu/cnn.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/kernels_tensor.h"
#include "backend/ew_math.h"
#include "backend/pool.h"

static void kernel_case(ts_pool *p, bool tb, int64_t M, int64_t N, int64_t K, const char *what) {
    float *A = malloc((size_t)(M * K) * sizeof *A), *B = malloc((size_t)(N * K) * sizeof *B), *bias = malloc((size_t)N * sizeof *bias);
    float *C0 = malloc((size_t)(M * N) * sizeof *C0), *C1 = malloc((size_t)(M * N) * sizeof *C1);
    float *out0 = malloc((size_t)(M * N) * sizeof *out0), *out1 = malloc((size_t)(M * N) * sizeof *out1);
    seeded_fill(A, M * K, 1), seeded_fill(B, N * K, 2), seeded_fill(bias, N, 3);
    ts_gemm_pool(p, false, tb, M, N, K, A, B, 0.0f, C0);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) out0[i * N + j] = C0[i * N + j] + bias[j];
    for (int64_t i = 0; i < M * N; i++) C1[i] = out1[i] = NAN;
    ts_gemm_pool_bias(p, false, tb, M, N, K, A, B, C1, bias, out1, NULL);
    size_t bytes = (size_t)(M * N) * sizeof *C0;
    CHECK(memcmp(C0, C1, bytes) == 0 && memcmp(out0, out1, bytes) == 0, "%s: the product kept, the sum the Add's bits", what);
    for (int64_t i = 0; i < M * N; i++) C1[i] = NAN;
    ts_gemm_pool_bias(p, false, tb, M, N, K, A, B, C1, bias, C1, NULL);
    CHECK(memcmp(out0, C1, bytes) == 0, "%s, the sum over the product: the Add's bits", what);
    free(A), free(B), free(bias), free(C0), free(C1), free(out0), free(out1);
}

/* ---- a Linear's activation in the same pass, after the bias: the
 * kernel with the activation's output apart (the sum kept) and over the
 * sum, against the product, a plain float add and the activation's own
 * loop over the whole (the unfused op's), to the bit */
static void kernel_act_case(ts_pool *p, bool tb, int64_t M, int64_t N, int64_t K, int kind, const char *what) {
    size_t bytes = (size_t)(M * N) * sizeof(float);
    float *A = malloc((size_t)(M * K) * sizeof *A), *B = malloc((size_t)(N * K) * sizeof *B), *bias = malloc((size_t)N * sizeof *bias);
    float *C0 = malloc(bytes), *s0 = malloc(bytes), *r0 = malloc(bytes), *C1 = malloc(bytes), *s1 = malloc(bytes), *r1 = malloc(bytes);
    seeded_fill(A, M * K, 4), seeded_fill(B, N * K, 5), seeded_fill(bias, N, 6);
    ts_out_act act = {.out = r0, .kind = kind};
    ts_gemm_pool(p, false, tb, M, N, K, A, B, 0.0f, C0);
    int neg = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) s0[i * N + j] = C0[i * N + j] + bias[j], neg += s0[i * N + j] < 0.0f;
    ts_out_act_apply(&act, r0, s0, M * N);
    CHECK(neg > 0 && neg < M * N && memcmp(s0, r0, bytes) != 0, "%s: sums of both signs, the activation moves them", what);
    for (int64_t i = 0; i < M * N; i++) C1[i] = s1[i] = r1[i] = NAN;
    act.out = r1;
    ts_gemm_pool_bias(p, false, tb, M, N, K, A, B, C1, bias, s1, &act);
    CHECK(memcmp(C0, C1, bytes) == 0 && memcmp(s0, s1, bytes) == 0 && memcmp(r0, r1, bytes) == 0,
          "%s, the activation apart: the product and the sum kept, the activation's bits", what);
    for (int64_t i = 0; i < M * N; i++) C1[i] = NAN;
    act.out = C1;
    ts_gemm_pool_bias(p, false, tb, M, N, K, A, B, C1, bias, C1, &act);
    CHECK(memcmp(r0, C1, bytes) == 0, "%s, the sum over the product and the activation over the sum: the activation's bits", what);
    free(A), free(B), free(bias), free(C0), free(s0), free(r0), free(C1), free(s1), free(r1);
}

/* ---- a Conv's Relu in its output pass (docs/backend.md, "Relu in the
 * convolution's output pass"): the kernel with relu NULL, with a relu
 * output of its own (the convolution's kept) and over its output, on each
 * output pass: Winograd's transform (by tile rows, by output channels, the
 * planes' partial blocks), im2col's with the bias written first (the
 * threads by samples or sharing one) and after (the training forward). */
static void conv_relu_case(ts_pool *p, int64_t N, int64_t C, int64_t HW, int64_t OC, int64_t S, bool infer, int want_tile, const char *what) {
    ts_conv_geom g = {.N = N, .C = C, .H = HW, .W = HW, .OC = OC, .KH = 3, .KW = 3, .SH = S, .SW = S, .PT = 1, .PL = 1, .DH = 1, .DW = 1,
                      .groups = 1};
    g.OH = g.OW = (HW + 2 - 3) / S + 1;
    int tile = infer ? ts_conv2d_winograd_tile(&g, true) : 0;
    CHECK(tile == want_tile, "%s: the path meant (Winograd tile %d, want %d)", what, tile, want_tile);
    int64_t nx = N * C * HW * HW, nw = OC * C * 9, ny = N * OC * g.OH * g.OW;
    size_t bytes = (size_t)ny * sizeof(float), cf = infer ? ts_conv2d_cache_floats(&g) : 0;
    float *x = malloc((size_t)nx * sizeof *x), *w = malloc((size_t)nw * sizeof *w), *b = malloc((size_t)OC * sizeof *b);
    float *y0 = malloc(bytes), *r0 = malloc(bytes), *y1 = malloc(bytes), *r1 = malloc(bytes);
    float *ws = malloc(ts_conv2d_workspace(&g, ts_pool_threads(p)) * sizeof *ws), *cache = cf ? calloc(cf, sizeof *cache) : NULL;
    if (!x || !w || !b || !y0 || !r0 || !y1 || !r1 || !ws || (cf && !cache)) {
        CHECK(0, "%s: out of memory", what);
        goto done;
    }
    seeded_fill(x, nx, 21), seeded_fill(w, nw, 22), seeded_fill(b, OC, 23);
    for (int64_t i = 0; i < nw; i++) w[i] *= 0.2f;
    float *outs[3] = {NULL, r1, y1}; /* no Relu, a Relu output of its own, the Relu over the output */
    for (int c = 0; c < 3; c++) {
        float *y = c == 0 ? y0 : y1;
        for (int64_t i = 0; i < ny; i++) y1[i] = r1[i] = NAN;
        ts_conv_tail t = {.relu = outs[c]};
        if (infer) ts_conv2d_infer(p, ws, y, x, w, b, &g, cache, 1, &t);
        else ts_conv2d_forward(p, ws, y, x, w, b, &g, &t);
    }
    int neg = 0;
    for (int64_t i = 0; i < ny; i++) neg += y0[i] < 0.0f, r0[i] = y0[i] < 0.0f ? 0.0f : y0[i];
    CHECK(neg > 0 && neg < ny, "%s: outputs of both signs (%d of %lld negative)", what, neg, (long long)ny);
    CHECK(memcmp(r0, y1, bytes) == 0, "%s, the Relu over the output: max(0, x) of the same floats, to the bit", what);
    for (int64_t i = 0; i < ny; i++) y1[i] = r1[i] = NAN;
    ts_conv_tail t1 = {.relu = r1};
    if (infer) ts_conv2d_infer(p, ws, y1, x, w, b, &g, cache, 1, &t1);
    else ts_conv2d_forward(p, ws, y1, x, w, b, &g, &t1);
    CHECK(memcmp(y0, y1, bytes) == 0 && memcmp(r0, r1, bytes) == 0, "%s, the Relu apart: the convolution kept, the Relu's bits", what);
done:
    free(x), free(w), free(b), free(y0), free(r0), free(y1), free(r1), free(ws), free(cache);
}

/* ---- a residual block's end in the output pass: Conv, Add(residual),
 * Relu. The kernel with each placing of the three outputs the executor
 * makes (each apart; the sum not kept; the Relu over the sum, over the
 * residual, over the Conv's output; the sum over the residual and over the
 * Conv's output), on the same paths as conv_relu_case, against the Conv
 * alone, then a plain float add, then max(0, .): to the bit. */
static void conv_add_relu_case(ts_pool *p, int64_t N, int64_t C, int64_t HW, int64_t OC, int64_t S, int64_t K, bool infer, int want_tile,
                               const char *what) {
    ts_conv_geom g = {.N = N, .C = C, .H = HW, .W = HW, .OC = OC, .KH = K, .KW = K, .SH = S, .SW = S, .PT = K / 2, .PL = K / 2, .DH = 1,
                      .DW = 1, .groups = 1};
    g.OH = g.OW = (HW + 2 * (K / 2) - K) / S + 1;
    int tile = infer ? ts_conv2d_winograd_tile(&g, true) : 0;
    CHECK(tile == want_tile, "%s: the path meant (Winograd tile %d, want %d)", what, tile, want_tile);
    int64_t nx = N * C * HW * HW, nw = OC * C * K * K, ny = N * OC * g.OH * g.OW;
    size_t bytes = (size_t)ny * sizeof(float), cf = infer ? ts_conv2d_cache_floats(&g) : 0;
    float *x = malloc((size_t)nx * sizeof *x), *w = malloc((size_t)nw * sizeof *w), *b = malloc((size_t)OC * sizeof *b);
    float *res = malloc(bytes), *y0 = malloc(bytes), *s0 = malloc(bytes), *r0 = malloc(bytes);
    float *y = malloc(bytes), *sm = malloc(bytes), *r = malloc(bytes), *rs = malloc(bytes);
    float *ws = malloc(ts_conv2d_workspace(&g, ts_pool_threads(p)) * sizeof *ws), *cache = cf ? calloc(cf, sizeof *cache) : NULL;
    if (!x || !w || !b || !res || !y0 || !s0 || !r0 || !y || !sm || !r || !rs || !ws || (cf && !cache)) {
        CHECK(0, "%s: out of memory", what);
        goto done;
    }
    seeded_fill(x, nx, 41), seeded_fill(w, nw, 42), seeded_fill(b, OC, 43), seeded_fill(res, ny, 44);
    for (int64_t i = 0; i < nw; i++) w[i] *= 0.2f;
    if (infer) ts_conv2d_infer(p, ws, y0, x, w, b, &g, cache, 1, NULL);
    else ts_conv2d_forward(p, ws, y0, x, w, b, &g, NULL);
    int neg = 0;
    for (int64_t i = 0; i < ny; i++) s0[i] = res[i] + y0[i], r0[i] = s0[i] < 0.0f ? 0.0f : s0[i], neg += s0[i] < 0.0f;
    CHECK(neg > 0 && neg < ny, "%s: sums of both signs (%d of %lld negative)", what, neg, (long long)ny);
    enum { APART, NO_SUM, RELU_OVER_SUM, RELU_OVER_RES, RELU_OVER_Y, SUM_OVER_RES, SUM_OVER_Y, PLACINGS };
    static const char *const name[PLACINGS] = {"each apart", "the sum not kept", "the Relu over the sum", "the Relu over the residual",
                                               "all over the Conv's output", "the sum over the residual", "the sum over the Conv's output"};
    for (int c = 0; c < PLACINGS; c++) {
        memcpy(rs, res, bytes);
        for (int64_t i = 0; i < ny; i++) y[i] = sm[i] = r[i] = NAN;
        ts_conv_tail t = {.res = rs, .sum = sm, .relu = r};
        float *yo = y, *want_y = y0;
        if (c == NO_SUM) t.sum = NULL;
        if (c == RELU_OVER_SUM) t.relu = sm;
        if (c == RELU_OVER_RES) t.sum = NULL, t.relu = rs;
        if (c == RELU_OVER_Y) t.sum = NULL, t.relu = y, want_y = r0;
        if (c == SUM_OVER_RES) t.sum = rs;
        if (c == SUM_OVER_Y) t.sum = y, want_y = s0;
        if (infer) ts_conv2d_infer(p, ws, yo, x, w, b, &g, cache, 1, &t);
        else ts_conv2d_forward(p, ws, yo, x, w, b, &g, &t);
        bool ok = memcmp(yo, want_y, bytes) == 0 && memcmp(t.relu, r0, bytes) == 0;
        if (t.sum && t.sum != t.relu) ok = ok && memcmp(t.sum, s0, bytes) == 0;
        if (t.sum != rs && t.relu != rs) ok = ok && memcmp(rs, res, bytes) == 0;
        CHECK(ok, "%s, %s: the Conv's, the Add's and the Relu's bits", what, name[c]);
    }
done:
    free(x), free(w), free(b), free(res), free(y0), free(s0), free(r0), free(y), free(sm), free(r), free(rs), free(ws), free(cache);
}

/* ---- the model: two Conv + Relu (the executor fuses them) against the
 * same graph with a Scale by 1 between each Conv and its Relu (exact, and
 * not fused). An inference model: the same bits out, the anchored first
 * Conv keeps its own values (negatives included) with the Relu's max(0, .)
 * of them; a training model: the same losses and weight gradients, to the
 * bit, over SGD steps. */
enum { CB = 4, CC = 3, CHW = 10, CO = 8, CK = 5, CSTEPS = 3 };

static float cxs[CB * CC * CHW * CHW];
static int32_t cys[CB];

static ts_tensor *cparam(ts_graph *g, const char *name, int nd, const int64_t *shape) {
    ts_tensor *t = ts_param(g, name, nd, shape);
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= shape[d];
    float v[16 * 16 * 9]; /* the largest: 16 channels in and out */
    seeded_fill(v, n, name_seed(name));
    for (int64_t k = 0; k < n; k++) v[k] *= 0.4f;
    ts_array a = ts_array_f32(v, nd, shape);
    CHECK_OK(ts_param_set(t, &a), "'%s' set", name);
    return t;
}

static ts_graph *cnn(bool apart, ts_tensor **loss, ts_tensor **out) {
    ts_graph *g = ts_graph_new(9);
    ts_tensor *x = ts_input(g, "x", TS_F32, 4, (int64_t[]){CB, CC, CHW, CHW});
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){CB});
    ts_conv2d_params pad = {.pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1};
    ts_tensor *c1 = ts_conv2d(g, x, cparam(g, "c1.weight", 4, (int64_t[]){CO, CC, 3, 3}), cparam(g, "c1.bias", 1, (int64_t[]){CO}), &pad);
    ts_tensor_set_name(c1, "c1");
    ts_tensor *h = ts_relu(g, apart ? ts_scale(g, c1, 1.0f) : c1);
    ts_tensor_set_name(h, "r1");
    ts_tensor *c2 = ts_conv2d(g, h, cparam(g, "c2.weight", 4, (int64_t[]){CO, CO, 3, 3}), cparam(g, "c2.bias", 1, (int64_t[]){CO}), &pad);
    h = ts_relu(g, apart ? ts_scale(g, c2, 1.0f) : c2);
    h = ts_flatten(g, ts_global_avg_pool2d(g, h), 1);
    h = ts_add(g, ts_matmul_t(g, h, cparam(g, "fc.weight", 2, (int64_t[]){CK, CO})), cparam(g, "fc.bias", 1, (int64_t[]){CK}));
    *out = h;
    ts_tensor_set_name(h, "logits");
    *loss = ts_nll_loss(g, ts_log_softmax(g, h, 1), y);
    ts_tensor_set_name(*loss, "loss");
    return g;
}

static ts_status cnn_run(ts_model *m) { return run_xy(m, cxs, 4, (int64_t[]){CB, CC, CHW, CHW}, cys); }

static void conv_relu_models(void) {
    seeded_fill(cxs, CB * CC * CHW * CHW, 31);
    for (int i = 0; i < CB; i++) cys[i] = i % CK;
    ts_tensor *loss[2], *out[2];
    ts_graph *g[2] = {cnn(false, &loss[0], &out[0]), cnn(true, &loss[1], &out[1])};
    ts_model *inf[2] = {NULL, NULL}, *tr[2] = {NULL, NULL};
    static const char *const seen[] = {"c1", "c1", "r1", "r1", NULL}; /* the fused one's Conv and Relu, in both models */
    static const char *const trained[] = {"dw1", "Gradient___c1.weight", "dw2", "Gradient___c2.weight", NULL};
    for (int k = 0; k < 2; k++) {
        const char *what = k ? "Scale between" : "Conv + Relu";
        inf[k] = twin_model(g[k], loss[k], out[k], false, TS_F32, NULL, k == 0 ? seen : NULL, NULL, what);
        tr[k] = twin_model(g[k], loss[k], out[k], true, TS_F32, NULL, k == 0 ? seen : NULL, trained, what);
        if (!inf[k]) continue;
        ts_metrics_reset();
        CHECK_OK(cnn_run(inf[k]), "an inference model run (%s)", what);
        int64_t took = ts_counter_get("FusedOps.Relu"), bias = ts_counter_get("FusedOps.BiasAdd");
        CHECK(k == 0 ? took == 2 : took == 0, "%s: FusedOps.Relu counts %lld Relus in a Conv's pass", what, (long long)took);
        /* the logits' bias Add in its product's pass, both graphs: the plan
         * keeps the sum apart from the pooled values the product reads */
        CHECK(bias == 1, "%s: FusedOps.BiasAdd counts %lld of the 1 bias Add", what, (long long)bias);
    }
    if (!inf[0] || !inf[1] || !tr[0] || !tr[1]) goto done;
    CHECK(same_anchor(inf[0], inf[1], "logits", CB * CK), "inference: the logits, the same bits");
    ts_array c1, r1;
    int64_t n = CB * CO * CHW * CHW;
    if (!ts_model_anchored(inf[0], "c1", &c1) && !ts_model_anchored(inf[0], "r1", &r1)) {
        int neg = 0, off = 0;
        for (int64_t i = 0; i < n; i++) {
            float c = ((const float *)c1.data)[i], r = ((const float *)r1.data)[i], want = c < 0.0f ? 0.0f : c;
            neg += c < 0.0f, off += memcmp(&r, &want, sizeof r) != 0;
        }
        CHECK(neg > 0 && off == 0, "the anchored Conv keeps its own values (%d negative), its Relu max(0, .) of them (%d off)", neg, off);
    } else
        CHECK(0, "c1 and r1 anchored");
    for (int s = 0; s < CSTEPS; s++) {
        CHECK_OK(cnn_run(tr[0]), "training step %d (Conv + Relu)", s + 1);
        CHECK_OK(cnn_run(tr[1]), "training step %d (Scale between)", s + 1);
        CHECK(same_anchor(tr[0], tr[1], "loss", 1), "training step %d: the same loss, to the bit", s + 1);
        CHECK(same_anchor(tr[0], tr[1], "dw1", CO * CC * 9) && same_anchor(tr[0], tr[1], "dw2", CO * CO * 9),
              "training step %d: the Convs' weight gradients, to the bit", s + 1);
    }
done:
    for (int k = 0; k < 2; k++) ts_model_free(inf[k]), ts_model_free(tr[k]), ts_graph_free(g[k]);
}

/* ---- the model: two residual blocks, each ending Conv, Add, Relu (the
 * executor fuses them: the first block's Add takes its Conv first, the
 * second's, with a strided 1x1 shortcut made last, the Conv second),
 * against the same graph with a Scale by 1 between each such Conv and its
 * Add (not fused). Inference: the same logits to the bit, unobserved (the
 * sums written in place) and with the first block's Conv and Add anchored
 * (each keeps its own value: the Add's is the Conv's plus the residual, to
 * the bit, the Relu's max(0, .) of it); training: the same losses and
 * weight gradients, to the bit, over SGD steps. */
enum { RO = 12 };

static ts_graph *resnet(bool apart, ts_tensor **loss, ts_tensor **out) {
    ts_graph *g = ts_graph_new(9);
    ts_tensor *x = ts_input(g, "x", TS_F32, 4, (int64_t[]){CB, CC, CHW, CHW});
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){CB});
    ts_conv2d_params pad = {.pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1}, s2 = pad, one = {.stride_h = 2, .stride_w = 2};
    s2.stride_h = s2.stride_w = 2;
    ts_tensor *h = ts_relu(g, ts_conv2d(g, x, cparam(g, "c1.weight", 4, (int64_t[]){CO, CC, 3, 3}), cparam(g, "c1.bias", 1, (int64_t[]){CO}), &pad));
    ts_tensor_set_name(h, "h0");
    ts_tensor *t = ts_relu(g, ts_conv2d(g, h, cparam(g, "c2.weight", 4, (int64_t[]){CO, CO, 3, 3}), cparam(g, "c2.bias", 1, (int64_t[]){CO}), &pad));
    t = ts_conv2d(g, t, cparam(g, "c3.weight", 4, (int64_t[]){CO, CO, 3, 3}), cparam(g, "c3.bias", 1, (int64_t[]){CO}), &pad);
    ts_tensor_set_name(t, "c3");
    t = ts_add(g, apart ? ts_scale(g, t, 1.0f) : t, h); /* the Conv first */
    ts_tensor_set_name(t, "a1");
    h = ts_relu(g, t);
    ts_tensor_set_name(h, "r1");
    t = ts_relu(g, ts_conv2d(g, h, cparam(g, "c4.weight", 4, (int64_t[]){RO, CO, 3, 3}), cparam(g, "c4.bias", 1, (int64_t[]){RO}), &s2));
    t = ts_conv2d(g, t, cparam(g, "c5.weight", 4, (int64_t[]){RO, RO, 3, 3}), cparam(g, "c5.bias", 1, (int64_t[]){RO}), &pad);
    ts_tensor *sc = ts_conv2d(g, h, cparam(g, "sc.weight", 4, (int64_t[]){RO, CO, 1, 1}), cparam(g, "sc.bias", 1, (int64_t[]){RO}), &one);
    h = ts_relu(g, ts_add(g, t, apart ? ts_scale(g, sc, 1.0f) : sc)); /* the shortcut's Conv second */
    h = ts_flatten(g, ts_global_avg_pool2d(g, h), 1);
    h = ts_add(g, ts_matmul_t(g, h, cparam(g, "fc.weight", 2, (int64_t[]){CK, RO})), cparam(g, "fc.bias", 1, (int64_t[]){CK}));
    *out = h;
    ts_tensor_set_name(h, "logits");
    *loss = ts_nll_loss(g, ts_log_softmax(g, h, 1), y);
    ts_tensor_set_name(*loss, "loss");
    return g;
}

static void conv_add_relu_models(void) {
    seeded_fill(cxs, CB * CC * CHW * CHW, 51);
    for (int i = 0; i < CB; i++) cys[i] = (i + 1) % CK;
    ts_tensor *loss[3], *out[3];
    ts_graph *g[3] = {resnet(false, &loss[0], &out[0]), resnet(false, &loss[1], &out[1]), resnet(true, &loss[2], &out[2])};
    ts_model *inf[3] = {NULL, NULL, NULL}, *tr[3] = {NULL, NULL, NULL};
    static const char *const what[3] = {"fused", "fused, anchored", "Scale between"};
    static const char *const seen[] = {"c3", "c3", "a1", "a1", "r1", "r1", "h0", "h0", NULL}; /* inference, the second model */
    static const char *const kept[] = {"a1", "a1", "r1", "r1", NULL}; /* training: the Add and the Relu observed, the Conv not */
    static const char *const trained[] = {"dw3", "Gradient___c3.weight", "dw5", "Gradient___c5.weight", "dsc", "Gradient___sc.weight", NULL};
    for (int k = 0; k < 3; k++) {
        inf[k] = twin_model(g[k], loss[k], out[k], false, TS_F32, NULL, k == 1 ? seen : NULL, NULL, what[k]);
        tr[k] = twin_model(g[k], loss[k], out[k], true, TS_F32, NULL, k > 0 ? kept : NULL, trained, what[k]);
        if (!inf[k]) continue;
        ts_metrics_reset();
        CHECK_OK(cnn_run(inf[k]), "an inference model run (%s)", what[k]);
        /* the metrics say which passes took their Add and Relu: both
         * blocks' in the fused graph, unobserved and anchored (the plan
         * keeps the sum and the Relu's output apart from what the Conv
         * reads: the strided shortcut's input, the block's, dead after it
         * in the unfused order), never the twin's (its Scale between) */
        int64_t took = ts_counter_get("FusedOps.AddRelu");
        CHECK(k < 2 ? took == 2 : took == 0, "%s: FusedOps.AddRelu counts %lld residual Adds and Relus in a Conv's pass", what[k],
              (long long)took);
    }
    for (int k = 0; k < 3; k++)
        if (!inf[k] || !tr[k]) goto done;
    CHECK(same_anchor(inf[0], inf[2], "logits", CB * CK) && same_anchor(inf[1], inf[2], "logits", CB * CK),
          "residual blocks, inference: the logits, the same bits (in place and anchored)");
    ts_array c3, a1, r1, h0;
    int64_t n = CB * CO * CHW * CHW;
    if (!ts_model_anchored(inf[1], "c3", &c3) && !ts_model_anchored(inf[1], "a1", &a1) && !ts_model_anchored(inf[1], "r1", &r1) &&
        !ts_model_anchored(inf[1], "h0", &h0)) {
        int neg = 0, off = 0, moved = 0;
        for (int64_t i = 0; i < n; i++) {
            float c = ((const float *)c3.data)[i], a = ((const float *)a1.data)[i], r = ((const float *)r1.data)[i];
            float h = ((const float *)h0.data)[i], sum = c + h, want = a < 0.0f ? 0.0f : a;
            neg += c < 0.0f, moved += h != 0.0f;
            off += memcmp(&a, &sum, sizeof a) != 0 || memcmp(&r, &want, sizeof r) != 0;
        }
        CHECK(neg > 0 && moved > 0 && off == 0,
              "the anchored Conv keeps its own value (%d negative), the Add's is it plus the residual, the Relu's max(0, .) of that (%d off)",
              neg, off);
    } else
        CHECK(0, "c3, a1, r1 and h0 anchored");
    int64_t nw[3] = {CO * CO * 9, RO * RO * 9, RO * CO};
    for (int s = 0; s < CSTEPS; s++) {
        for (int k = 0; k < 3; k++) {
            ts_metrics_reset();
            CHECK_OK(cnn_run(tr[k]), "residual blocks, training step %d (%s)", s + 1, what[k]);
            int64_t took = ts_counter_get("FusedOps.AddRelu");
            CHECK(k < 2 ? took > 0 : took == 0, "residual blocks, training step %d (%s): FusedOps.AddRelu counts %lld", s + 1, what[k],
                  (long long)took);
        }
        for (int k = 0; k < 2; k++) {
            CHECK(same_anchor(tr[k], tr[2], "loss", 1), "residual blocks, training step %d (%s): the same loss, to the bit", s + 1, what[k]);
            CHECK(same_anchor(tr[k], tr[2], "dw3", nw[0]) && same_anchor(tr[k], tr[2], "dw5", nw[1]) && same_anchor(tr[k], tr[2], "dsc", nw[2]),
                  "residual blocks, training step %d (%s): the Convs' weight gradients, to the bit", s + 1, what[k]);
        }
        CHECK(same_anchor(tr[1], tr[2], "a1", n) && same_anchor(tr[1], tr[2], "r1", n),
              "residual blocks, training step %d: the anchored Add and Relu, to the bit", s + 1);
    }
done:
    for (int k = 0; k < 3; k++) ts_model_free(inf[k]), ts_model_free(tr[k]), ts_graph_free(g[k]);
}

/* ---- the model: Linear layers each followed by an activation (GELU,
 * its tanh approximation, Relu: each done in its product's pass) against
 * the same graph with a Scale by 1 between each bias Add and its
 * activation (not fused), in f32 and at the bf16 and f16 precisions (the
 * products' operands 16-bit copies: the bf16 kernel's route, or widened).
 * Inference, unobserved (the activations written over the sums) and with
 * the first layer's sum and activation anchored: the same logits, to the
 * bit, the anchored activation the op's of the anchored sum; training:
 * the same losses and weight gradients, to the bit, over SGD steps; the
 * counters say what fused. */
enum { AB = 64, AI = 24, AH = 48, AO = 5 };
static float axs[AB * AI];
static int32_t ays[AB];

static ts_graph *act_mlp(bool apart, ts_tensor **loss, ts_tensor **out) {
    ts_graph *g = ts_graph_new(7);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){AB, AI});
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){AB});
    ts_tensor *h = ts_linear(g, x, AH, "fc1");
    ts_tensor_set_name(h, "s1");
    h = ts_gelu(g, apart ? ts_scale(g, h, 1.0f) : h, 0);
    ts_tensor_set_name(h, "a1");
    h = ts_linear(g, h, AH, "fc2");
    h = ts_gelu(g, apart ? ts_scale(g, h, 1.0f) : h, 1);
    h = ts_linear(g, h, AH, "fc3");
    h = ts_relu(g, apart ? ts_scale(g, h, 1.0f) : h);
    h = ts_linear(g, h, AO, "fc4");
    ts_tensor_set_name(h, "logits");
    *out = h;
    *loss = ts_nll_loss(g, ts_log_softmax(g, h, 1), y);
    ts_tensor_set_name(*loss, "loss");
    seeded_params(g, 0.3f);
    return g;
}

static ts_status act_run(ts_model *m) { return run_xy(m, axs, 2, (int64_t[]){AB, AI}, ays); }

static void act_models(ts_dtype precision) {
    seeded_fill(axs, AB * AI, 61);
    for (int i = 0; i < AB; i++) ays[i] = i % AO;
    ts_tensor *loss[3], *out[3];
    ts_graph *g[3] = {act_mlp(false, &loss[0], &out[0]), act_mlp(false, &loss[1], &out[1]), act_mlp(true, &loss[2], &out[2])};
    ts_model *inf[3] = {NULL, NULL, NULL}, *tr[3] = {NULL, NULL, NULL};
    const char *at = precision == TS_BF16 ? "bf16, " : precision == TS_F16 ? "f16, " : "";
    char what[3][48];
    snprintf(what[0], sizeof what[0], "%sfused", at);
    snprintf(what[1], sizeof what[1], "%sfused, anchored", at);
    snprintf(what[2], sizeof what[2], "%sScale between", at);
    static const char *const seen[] = {"s1", "s1", "a1", "a1", NULL}; /* inference, the second model */
    static const char *const kept[] = {"a1", "a1", NULL};              /* training, the second and third */
    static const char *const trained[] = {"dw1", "Gradient___fc1.weight", "dw3", "Gradient___fc3.weight", NULL};
    for (int k = 0; k < 3; k++) {
        inf[k] = twin_model(g[k], loss[k], out[k], false, precision, NULL, k == 1 ? seen : NULL, NULL, what[k]);
        tr[k] = twin_model(g[k], loss[k], out[k], true, precision, NULL, k > 0 ? kept : NULL, trained, what[k]);
        if (!inf[k]) continue;
        ts_metrics_reset();
        CHECK_OK(act_run(inf[k]), "Linear + activation, an inference model run (%s)", what[k]);
        int64_t act = ts_counter_get("FusedOps.Activation"), relu = ts_counter_get("FusedOps.Relu"), bias = ts_counter_get("FusedOps.BiasAdd");
        CHECK(k < 2 ? act == 2 && relu == 1 : act == 0 && relu == 0,
              "Linear + activation, inference (%s): FusedOps.Activation %lld, FusedOps.Relu %lld in a product's pass", what[k],
              (long long)act, (long long)relu);
        CHECK(bias == 4, "Linear + activation, inference (%s): FusedOps.BiasAdd counts %lld of the 4 bias Adds", what[k], (long long)bias);
    }
    for (int k = 0; k < 3; k++)
        if (!inf[k] || !tr[k]) goto done;
    CHECK(same_anchor(inf[0], inf[2], "logits", AB * AO) && same_anchor(inf[1], inf[2], "logits", AB * AO),
          "Linear + activation, inference (%s): the logits, the same bits (over the sums and anchored)", what[0]);
    ts_array s1, a1;
    if (!ts_model_anchored(inf[1], "s1", &s1) && !ts_model_anchored(inf[1], "a1", &a1)) {
        float *want = malloc((size_t)(AB * AH) * sizeof *want);
        ts_out_act gelu = {.out = want, .kind = TS_EWU_GELU};
        ts_out_act_apply(&gelu, want, s1.data, AB * AH);
        int neg = 0;
        for (int64_t i = 0; i < AB * AH; i++) neg += ((const float *)s1.data)[i] < 0.0f;
        CHECK(neg > 0 && memcmp(want, a1.data, (size_t)(AB * AH) * sizeof *want) == 0,
              "%s: the anchored sum keeps its own values (%d negative), the GELU's are GELU of them, to the bit", what[1], neg);
        free(want);
    } else
        CHECK(0, "s1 and a1 anchored");
    for (int s = 0; s < CSTEPS; s++) {
        for (int k = 0; k < 3; k++) {
            ts_metrics_reset();
            CHECK_OK(act_run(tr[k]), "Linear + activation, training step %d (%s)", s + 1, what[k]);
            int64_t act = ts_counter_get("FusedOps.Activation");
            CHECK(k < 2 ? act == 2 : act == 0, "Linear + activation, training step %d (%s): FusedOps.Activation %lld", s + 1, what[k],
                  (long long)act);
        }
        for (int k = 0; k < 2; k++) {
            CHECK(same_anchor(tr[k], tr[2], "loss", 1), "Linear + activation, training step %d (%s): the same loss, to the bit", s + 1,
                  what[k]);
            CHECK(same_anchor(tr[k], tr[2], "dw1", AH * AI) && same_anchor(tr[k], tr[2], "dw3", AH * AH),
                  "Linear + activation, training step %d (%s): the weight gradients, to the bit", s + 1, what[k]);
        }
        CHECK(same_anchor(tr[1], tr[2], "a1", AB * AH), "Linear + activation, training step %d (%s): the anchored GELU, to the bit", s + 1,
              what[1]);
    }
done:
    for (int k = 0; k < 3; k++) ts_model_free(inf[k]), ts_model_free(tr[k]), ts_graph_free(g[k]);
}

enum { BATCH = 96, IN = 40, HID = 72, OUT = 6, STEPS = 3 };

static float xs[BATCH * IN];
static int32_t ys[BATCH];

/* Every parameter filled from its name: both graphs get the same values. */
static void set_params(ts_graph *g) {
    for (size_t i = 0; i < ts_graph_tensor_count(g); i++) {
        ts_tensor *t = ts_graph_tensor_at(g, i);
        if (strcmp(ts_tensor_op(t), "Param") != 0) continue;
        const char *name = ts_tensor_name(t);
        int64_t shape[2] = {strstr(name, "fc1") ? HID : OUT, strstr(name, "fc1") ? IN : HID};
        bool bias = strstr(name, ".bias") != NULL;
        float v[HID * IN];
        seeded_fill(v, bias ? shape[0] : shape[0] * shape[1], name_seed(name));
        for (int64_t k = 0; k < shape[0] * shape[1]; k++) v[k] *= 0.3f;
        ts_array a = ts_array_f32(v, bias ? 1 : 2, shape);
        CHECK_OK(ts_param_set(t, &a), "'%s' set", name);
    }
}

/* The MLP; `bias_first`: each layer as Add(bias, MatMul), which is not fused. */
static ts_graph *mlp(bool bias_first, ts_tensor **loss) {
    ts_graph *g = ts_graph_new(7);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){BATCH, IN});
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){BATCH});
    ts_tensor *h;
    if (!bias_first) {
        h = ts_relu(g, ts_linear(g, x, HID, "fc1"));
        h = ts_linear(g, h, OUT, "fc2");
    } else {
        ts_tensor *w1 = ts_param(g, "fc1.weight", 2, (int64_t[]){HID, IN}), *b1 = ts_param(g, "fc1.bias", 1, (int64_t[]){HID});
        ts_tensor *w2 = ts_param(g, "fc2.weight", 2, (int64_t[]){OUT, HID}), *b2 = ts_param(g, "fc2.bias", 1, (int64_t[]){OUT});
        h = ts_relu(g, ts_add(g, b1, ts_matmul_t(g, x, w1)));
        h = ts_add(g, b2, ts_matmul_t(g, h, w2));
    }
    *loss = ts_nll_loss(g, ts_log_softmax(g, h, 1), y);
    ts_tensor_set_name(*loss, "loss");
    set_params(g);
    return g;
}

static ts_model *train_model(ts_graph *g, ts_tensor *loss, bool fused) {
    ts_options *o = ts_options_new();
    ts_options_set_threads(o, 2);
    ts_options_anchor(o, "loss", "loss", TS_OUTPUT_ALL, 0);
    ts_options_anchor(o, "dw1", "Gradient___fc1.weight", TS_OUTPUT_FINAL, 0);
    if (fused) {
        ts_options_anchor(o, "product", "fc1/MatMul:0", TS_OUTPUT_FINAL, 0);
        ts_options_anchor(o, "sum", "fc1/Add:0", TS_OUTPUT_FINAL, 0);
    }
    ts_model *m = NULL;
    ts_status st = ts_model_training(&m, g, loss, o, ts_sgd(0.1f, 0.0f, 0.0f));
    if (!st) st = ts_model_compile(m);
    CHECK_OK(st, "a training model (%s)", fused ? "Linear layers" : "biases added first");
    ts_options_free(o);
    return st ? NULL : m;
}

static ts_status step(ts_model *m) { return run_xy(m, xs, 2, (int64_t[]){BATCH, IN}, ys); }

int main(void) {
    ts_pool *p = NULL;
    CHECK_OK(ts_pool_new(&p, 2), "a pool of 2 threads");
    if (!p) return check_summary("test_bias_fused");
    kernel_case(p, true, 5, 7, 3, "a small product, one thread");
    kernel_case(p, true, 300, 64, 40, "split by rows, B transposed");
    kernel_case(p, false, 300, 64, 40, "split by rows");
    kernel_case(p, true, 40, 2000, 20, "split by columns, B transposed");
    kernel_case(p, false, 40, 2000, 20, "split by columns");
    /* a GPT's Linear layers: K = 128 (the bias written first, the product
     * added to it) and K = 512 (the bias added after the product) */
    kernel_case(p, false, 512, 384, 128, "the bias first, K = 128");
    kernel_case(p, true, 512, 384, 256, "the bias first, K = 256, B transposed");
    kernel_case(p, false, 512, 128, 512, "the bias after, K = 512");
    kernel_case(p, true, 2000, 40, 200, "the bias first, a narrow product split by rows");
    kernel_act_case(p, true, 5, 7, 3, TS_EWU_GELU, "GELU, a small product, one thread");
    kernel_act_case(p, false, 300, 64, 40, TS_EWU_GELU, "GELU, split by rows");
    kernel_act_case(p, true, 40, 2000, 20, TS_EWU_GELU_TANH, "tanh GELU, split by columns, B transposed");
    kernel_act_case(p, false, 512, 512, 128, TS_EWU_GELU, "GELU, a GPT's MLP, the bias first");
    kernel_act_case(p, false, 300, 128, 512, TS_EWU_NONE, "Relu, the bias after");
    kernel_act_case(p, false, 40, 2000, 300, TS_EWU_NONE, "Relu, split by columns, the bias after");
    conv_relu_case(p, 1, 32, 28, 32, 1, true, 4, "Winograd F(4x4), one sample, by tile rows");
    conv_relu_case(p, 1, 64, 56, 64, 1, true, 4, "Winograd F(4x4), 56x56 (blocks of 8 tiles in vectors)");
    conv_relu_case(p, 1, 32, 30, 32, 1, true, 4, "Winograd F(4x4), 30x30 (a vector block's last 30 outputs)");
    conv_relu_case(p, 1, 128, 7, 256, 1, true, 2, "Winograd F(2x2), a 7x7 plane, by output channels");
    conv_relu_case(p, 2, 64, 13, 64, 1, true, 4, "Winograd, 13x13 planes (partial blocks)");
    conv_relu_case(p, 1, 4, 48, 8, 1, true, 0, "a 3x3 over 4 channels packed from the input (too little work for Winograd)");
    conv_relu_case(p, 1, 16, 20, 32, 2, true, 0, "im2col, bias first, stride 2, threads sharing a sample");
    conv_relu_case(p, 4, 16, 20, 32, 2, true, 0, "im2col, bias first, stride 2, threads by samples");
    conv_relu_case(p, 1, 3, 6, 4, 1, false, 0, "im2col, bias after, one thread");
    conv_relu_case(p, 1, 16, 24, 32, 1, false, 0, "im2col, bias after, threads sharing a sample");
    conv_relu_case(p, 4, 8, 16, 16, 1, false, 0, "im2col, bias after, threads by samples");
    conv_add_relu_case(p, 1, 32, 28, 32, 1, 3, true, 4, "Conv + Add + Relu, Winograd F(4x4), by tile rows");
    conv_add_relu_case(p, 1, 64, 56, 64, 1, 3, true, 4, "Conv + Add + Relu, Winograd F(4x4), 56x56 (vector blocks)");
    conv_add_relu_case(p, 1, 32, 30, 32, 1, 3, true, 4, "Conv + Add + Relu, Winograd F(4x4), 30x30 (a vector block cut)");
    conv_add_relu_case(p, 1, 128, 7, 256, 1, 3, true, 2, "Conv + Add + Relu, Winograd F(2x2), 7x7, by output channels");
    conv_add_relu_case(p, 2, 64, 13, 64, 1, 3, true, 4, "Conv + Add + Relu, Winograd, 13x13 planes (partial blocks)");
    conv_add_relu_case(p, 1, 16, 20, 32, 2, 3, true, 0, "Conv + Add + Relu, im2col, stride 2, threads sharing a sample");
    conv_add_relu_case(p, 4, 16, 20, 32, 2, 3, true, 0, "Conv + Add + Relu, im2col, stride 2, threads by samples");
    conv_add_relu_case(p, 1, 3, 64, 16, 2, 7, true, 0, "Conv + Add + Relu, a 7x7 stride 2 packed from the input (the stem's path)");
    conv_add_relu_case(p, 1, 64, 28, 128, 2, 1, true, 0, "Conv + Add + Relu, a 1x1 stride 2 (a residual block's shortcut)");
    conv_add_relu_case(p, 1, 64, 28, 64, 1, 1, true, 0, "Conv + Add + Relu, a 1x1 stride 1 (the input its own columns)");
    conv_add_relu_case(p, 1, 3, 6, 4, 1, 3, false, 0, "Conv + Add + Relu, training forward, one thread");
    conv_add_relu_case(p, 1, 16, 24, 32, 1, 3, false, 0, "Conv + Add + Relu, training forward, threads sharing a sample");
    conv_add_relu_case(p, 4, 8, 16, 16, 1, 3, false, 0, "Conv + Add + Relu, training forward, threads by samples");
    ts_pool_free(p);
    conv_relu_models();
    conv_add_relu_models();
    act_models(TS_F32);
    act_models(TS_BF16);
    act_models(TS_F16);

    seeded_fill(xs, BATCH * IN, 11);
    for (int i = 0; i < BATCH; i++) ys[i] = (int32_t)((unsigned)(i * 7 + 3) % OUT);
    ts_tensor *la, *lb;
    ts_graph *ga = mlp(false, &la), *gb = mlp(true, &lb);
    ts_model *ma = train_model(ga, la, true), *mb = train_model(gb, lb, false);
    if (!ma || !mb) return check_summary("test_bias_fused");
    float loss_a[STEPS], loss_b[STEPS];
    for (int s = 0; s < STEPS; s++) {
        CHECK_OK(step(ma), "step %d (Linear layers)", s + 1);
        CHECK_OK(step(mb), "step %d (biases added first)", s + 1);
        ts_array a, b;
        if (ts_model_anchored(ma, "loss", &a) || ts_model_anchored(mb, "loss", &b)) {
            CHECK(0, "the losses anchored");
            break;
        }
        loss_a[s] = ((const float *)a.data)[0], loss_b[s] = ((const float *)b.data)[0];
        if (s > 0) continue;
        ts_array prod, sum, bias;
        CHECK_OK(ts_model_anchored(ma, "product", &prod), "the product anchored");
        CHECK_OK(ts_model_anchored(ma, "sum", &sum), "the sum anchored");
        float b1[HID];
        seeded_fill(b1, HID, name_seed("fc1.bias"));
        for (int j = 0; j < HID; j++) b1[j] *= 0.3f;
        bias = ts_array_f32(b1, 1, (int64_t[]){HID});
        int off = 0;
        for (int64_t i = 0; i < BATCH * HID && prod.data && sum.data; i++)
            off += ((const float *)sum.data)[i] != ((const float *)prod.data)[i] + ((const float *)bias.data)[i % HID];
        CHECK(prod.data && sum.data && off == 0, "fc1/Add:0 is fc1/MatMul:0 plus the bias, to the bit (%d values off)", off);
        CHECK(memcmp(&loss_a[0], &loss_b[0], sizeof(float)) == 0, "the first loss: the same bits (%.9g, %.9g)", (double)loss_a[0],
              (double)loss_b[0]);
        ts_array ga1, gb1;
        CHECK_OK(ts_model_anchored(ma, "dw1", &ga1), "fc1.weight's gradient anchored");
        CHECK_OK(ts_model_anchored(mb, "dw1", &gb1), "fc1.weight's gradient anchored (biases first)");
        double worst = 0;
        for (int64_t i = 0; i < HID * IN && ga1.data && gb1.data; i++) {
            double d = fabs((double)((const float *)ga1.data)[i] - ((const float *)gb1.data)[i]);
            worst = d > worst ? d : worst;
        }
        CHECK(ga1.data && gb1.data && worst <= 1e-6, "fc1.weight's first gradient agrees (largest difference %.3g)", worst);
    }
    for (int s = 1; s < STEPS; s++)
        CHECK(fabsf(loss_a[s] - loss_b[s]) <= 1e-5f * fabsf(loss_b[s]) + 1e-7f, "loss after %d SGD steps: %.9g and %.9g", s,
              (double)loss_a[s], (double)loss_b[s]);
    CHECK(loss_a[STEPS - 1] < loss_a[0], "the loss goes down (%.6g to %.6g)", (double)loss_a[0], (double)loss_a[STEPS - 1]);
    ts_model_free(ma), ts_model_free(mb);
    ts_graph_free(ga), ts_graph_free(gb);
    return check_summary("test_bias_fused");
}
