/* test_bias_fused.c -- a Linear's bias Add done in its product's output
 * pass (docs/backend.md, "Bias in the product's output pass") gives the
 * bits the separate Add gives.
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
#include "backend/cpu/gemm.h"
#include "backend/pool.h"

static void fill(float *x, int64_t n, unsigned seed) {
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
}

static unsigned name_seed(const char *s) {
    unsigned h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static void kernel_case(ts_pool *p, bool tb, int64_t M, int64_t N, int64_t K, const char *what) {
    float *A = malloc((size_t)(M * K) * sizeof *A), *B = malloc((size_t)(N * K) * sizeof *B), *bias = malloc((size_t)N * sizeof *bias);
    float *C0 = malloc((size_t)(M * N) * sizeof *C0), *C1 = malloc((size_t)(M * N) * sizeof *C1);
    float *out0 = malloc((size_t)(M * N) * sizeof *out0), *out1 = malloc((size_t)(M * N) * sizeof *out1);
    fill(A, M * K, 1), fill(B, N * K, 2), fill(bias, N, 3);
    ts_gemm_pool(p, false, tb, M, N, K, A, B, 0.0f, C0);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) out0[i * N + j] = C0[i * N + j] + bias[j];
    for (int64_t i = 0; i < M * N; i++) C1[i] = out1[i] = NAN;
    ts_gemm_pool_bias(p, false, tb, M, N, K, A, B, C1, bias, out1);
    size_t bytes = (size_t)(M * N) * sizeof *C0;
    CHECK(memcmp(C0, C1, bytes) == 0 && memcmp(out0, out1, bytes) == 0, "%s: the product kept, the sum the Add's bits", what);
    for (int64_t i = 0; i < M * N; i++) C1[i] = NAN;
    ts_gemm_pool_bias(p, false, tb, M, N, K, A, B, C1, bias, C1);
    CHECK(memcmp(out0, C1, bytes) == 0, "%s, the sum over the product: the Add's bits", what);
    free(A), free(B), free(bias), free(C0), free(C1), free(out0), free(out1);
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
        fill(v, bias ? shape[0] : shape[0] * shape[1], name_seed(name));
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

static ts_status step(ts_model *m) {
    const char *names[2] = {"x", "labels"};
    ts_array in[2] = {ts_array_f32(xs, 2, (int64_t[]){BATCH, IN}), ts_array_i32(ys, 1, (int64_t[]){BATCH})};
    return ts_model_run(m, names, in, 2);
}

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
    ts_pool_free(p);

    fill(xs, BATCH * IN, 11);
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
        fill(b1, HID, name_seed("fc1.bias"));
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
