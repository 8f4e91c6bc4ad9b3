/* test_onnx_matmul.c -- ONNX's matrix products beyond PyTorch's usual
 * export: Gemm with transA (and transB, alpha, beta), Y = alpha * A' B' +
 * beta * C with A' = A transposed; MatMul with 1-D operands as numpy's
 * matmul ([K] x [K] a scalar, [K] x [B,K,N] -> [B,N], [B,M,K] x [K] ->
 * [B,M]); each checked against the product computed here. A transposed A of
 * another rank than 2 is refused naming what it must be. */
/* needs: onnx */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "onnx_model.h"

enum { M = 2, K = 3, N = 4 };

int main(void) {
    ts_set_log_level(TS_LOG_OFF);
    snprintf(dir, sizeof dir, "/tmp/ts_onnx_matmul_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    float a[K * M], b[N * K], c[N];
    for (int i = 0; i < K * M; i++) a[i] = (float)(i % 5) - 1.5f;
    for (int i = 0; i < N * K; i++) b[i] = 0.25f * (float)((i * 7) % 9) - 1.0f;
    for (int i = 0; i < N; i++) c[i] = (float)i;
    const float alpha = 0.5f, beta = 2.0f;
    for (int trans_b = 0; trans_b <= 1; trans_b++) {
        model_begin();
        input("a", 2, (int64_t[]){K, M}); /* A is [K,M]: transA makes it [M,K] */
        init_f32("b", 2, trans_b ? (int64_t[]){N, K} : (int64_t[]){K, N}, b);
        init_f32("c", 1, (int64_t[]){N}, c);
        Node *n = node("Gemm", "gemm", "a,b,c", "y");
        attr_int(n, "transA", 1);
        attr_int(n, "transB", trans_b);
        attr_float(n, "alpha", alpha);
        attr_float(n, "beta", beta);
        output("y");
        ts_graph *g = NULL;
        char name[32];
        snprintf(name, sizeof name, "gemm_tb%d", trans_b);
        CHECK_OK(import_as(name, &g), "Gemm with transA=1, transB=%d imports", trans_b);
        if (!g) continue;
        ts_tensor *y = ts_graph_output_at(g, 0);
        ts_options *opt = ts_options_new();
        ts_options_set_output_mode(opt, TS_OUTPUT_FINAL, 0);
        ts_model *m = NULL;
        const char *names[1] = {"a"};
        ts_array in = ts_array_f32(a, 2, (int64_t[]){K, M}), out;
        ts_status st = ts_model_inference(&m, g, &y, 1, opt);
        if (!st) st = ts_model_run(m, names, &in, 1);
        if (!st) st = ts_model_anchored(m, ts_tensor_name(y), &out);
        int bad = st || ts_array_numel(&out) != M * N;
        for (int i = 0; !bad && i < M; i++)
            for (int j = 0; j < N; j++) {
                double want = beta * c[j];
                for (int k = 0; k < K; k++) want += alpha * a[k * M + i] * (trans_b ? b[j * K + k] : b[k * N + j]);
                bad += fabs(((const float *)out.data)[i * N + j] - want) > 1e-5 * (1 + fabs(want));
            }
        CHECK(!bad, "Y = alpha A^T B%s + beta C, [%d,%d]%s%s", trans_b ? "^T" : "", M, N, st ? ": " : "", st ? ts_last_error() : "");
        ts_model_free(m);
        ts_options_free(opt);
        ts_graph_free(g);
    }
    /* MatMul with 1-D operands: p = u.v, q = u @ T (T [2,K,N]), r = T2 @ v (T2 [2,N,K]) */
    model_begin();
    input("u", 1, (int64_t[]){K});
    input("v", 1, (int64_t[]){K});
    input("t", 3, (int64_t[]){2, K, N});
    input("t2", 3, (int64_t[]){2, N, K});
    node("MatMul", "p", "u,v", "p");
    node("MatMul", "q", "u,t", "q");
    node("MatMul", "r", "t2,v", "r");
    output("p");
    output("q");
    output("r");
    ts_graph *g = NULL;
    CHECK_OK(import_as("matmul_1d", &g), "MatMuls with 1-D operands import");
    if (g) {
        ts_tensor *o[3] = {ts_graph_output_at(g, 0), ts_graph_output_at(g, 1), ts_graph_output_at(g, 2)};
        ts_options *opt = ts_options_new();
        ts_options_set_output_mode(opt, TS_OUTPUT_FINAL, 0);
        ts_model *m = NULL;
        float u[K] = {1, -2, 0.5f}, v[K] = {3, 1, 2}, t[2 * K * N];
        for (int i = 0; i < 2 * K * N; i++) t[i] = (float)((i * 3) % 7) - 3.0f;
        const char *names[4] = {"u", "v", "t", "t2"};
        ts_array in[4] = {ts_array_f32(u, 1, (int64_t[]){K}), ts_array_f32(v, 1, (int64_t[]){K}), ts_array_f32(t, 3, (int64_t[]){2, K, N}),
                          ts_array_f32(t, 3, (int64_t[]){2, N, K})}, out[3];
        ts_status st = ts_model_inference(&m, g, o, 3, opt);
        if (!st) st = ts_model_run(m, names, in, 4);
        for (int k = 0; !st && k < 3; k++) st = ts_model_anchored(m, ts_tensor_name(o[k]), &out[k]);
        CHECK(!st && out[0].ndim == 0 && out[1].ndim == 2 && out[1].shape[0] == 2 && out[1].shape[1] == N && out[2].ndim == 2 &&
                  out[2].shape[1] == N,
              "the shapes are [], [2,%d] and [2,%d]%s%s", N, N, st ? ": " : "", st ? ts_last_error() : "");
        int bad = st != 0;
        double dot = 0;
        for (int k = 0; k < K; k++) dot += u[k] * v[k];
        bad += !st && fabs(((const float *)out[0].data)[0] - dot) > 1e-5;
        for (int bb = 0; !st && bb < 2; bb++)
            for (int j = 0; j < N; j++) {
                double q = 0, r = 0;
                for (int k = 0; k < K; k++) q += u[k] * t[(bb * K + k) * N + j], r += t[(bb * N + j) * K + k] * v[k];
                bad += fabs(((const float *)out[1].data)[bb * N + j] - q) > 1e-4 || fabs(((const float *)out[2].data)[bb * N + j] - r) > 1e-4;
            }
        CHECK(!bad, "the values are numpy's matmul of 1-D operands");
        ts_model_free(m);
        ts_options_free(opt);
        ts_graph_free(g);
    }

    model_begin();
    input("a", 3, (int64_t[]){1, K, M});
    init_f32("b", 2, (int64_t[]){K, N}, b);
    attr_int(node("Gemm", "gemm", "a,b", "y"), "transA", 1);
    output("y");
    expect("a 3-D A with transA", import_as("gemm_3d", NULL), TS_ERR_SHAPE, "A must be 2-D");
    remove_dir();
    return check_summary("test_onnx_matmul");
}
