/* test_onnx_gemm.c -- ONNX's Gemm with transA (and transB, alpha, beta):
 * Y = alpha * A' B' + beta * C with A' = A transposed, checked against the
 * product computed here; a transposed A of another rank than 2 is refused
 * naming what it must be. */
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
    snprintf(dir, sizeof dir, "/tmp/ts_onnx_gemm_XXXXXX");
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
    model_begin();
    input("a", 3, (int64_t[]){1, K, M});
    init_f32("b", 2, (int64_t[]){K, N}, b);
    attr_int(node("Gemm", "gemm", "a,b", "y"), "transA", 1);
    output("y");
    expect("a 3-D A with transA", import_as("gemm_3d", NULL), TS_ERR_SHAPE, "A must be 2-D");
    remove_dir();
    return check_summary("test_onnx_gemm");
}
