/* test_onnx_layer_norm.c -- ONNX's LayerNormalization with its optional
 * Mean and InvStdDev outputs: over the dims from `axis` on (axis 1 of
 * [2,3,4], and -1), the mean and 1 / sqrt(variance + epsilon) come back
 * with the normalized dims kept as 1, each value as ONNX defines it,
 * computed here in double. */
/* needs: onnx */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "onnx_model.h"

enum { A = 2, B = 3, C = 4, N = A * B * C };

int main(void) {
    ts_set_log_level(TS_LOG_OFF);
    snprintf(dir, sizeof dir, "/tmp/ts_onnx_ln_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    float x[N];
    for (int i = 0; i < N; i++) x[i] = (float)sin(1.7 * i) * (float)(1 + i % 5);
    const float eps = 1e-3f;
    for (int axis = 1; axis <= 2; axis++) {
        int64_t inner = axis == 1 ? B * C : C, groups = N / inner;
        int64_t wshape[2] = {axis == 1 ? B : C, C};
        int wdims = axis == 1 ? 2 : 1;
        float w[B * C], b[B * C];
        for (int i = 0; i < inner; i++) w[i] = 0.5f + 0.1f * (float)i, b[i] = 0.01f * (float)i;
        model_begin();
        input("x", 3, (int64_t[]){A, B, C});
        init_f32("w", wdims, axis == 1 ? wshape : &wshape[1], w);
        init_f32("b", wdims, axis == 1 ? wshape : &wshape[1], b);
        Node *n = node("LayerNormalization", "ln", "x,w,b", "y,mean,inv_std");
        attr_int(n, "axis", axis == 1 ? 1 : -1);
        attr_float(n, "epsilon", eps);
        output("y");
        output("mean");
        output("inv_std");
        ts_graph *g = NULL;
        char name[32];
        snprintf(name, sizeof name, "ln_axis%d", axis);
        CHECK_OK(import_as(name, &g), "LayerNormalization with its three outputs imports (axis %d)", axis);
        if (!g) continue;
        ts_tensor *o[3] = {ts_graph_output_at(g, 0), ts_graph_output_at(g, 1), ts_graph_output_at(g, 2)};
        ts_options *opt = ts_options_new();
        ts_options_set_output_mode(opt, TS_OUTPUT_FINAL, 0);
        ts_model *m = NULL;
        const char *names[1] = {"x"};
        ts_array in = ts_array_f32(x, 3, (int64_t[]){A, B, C}), got[3];
        ts_status st = ts_model_inference(&m, g, o, 3, opt);
        if (!st) st = ts_model_run(m, names, &in, 1);
        for (int k = 0; !st && k < 3; k++) st = ts_model_anchored(m, ts_tensor_name(o[k]), &got[k]);
        CHECK(!st, "runs%s%s", st ? ": " : "", st ? ts_last_error() : "");
        if (!st) {
            CHECK(got[1].ndim == 3 && got[1].shape[0] == A && got[1].shape[1] == (axis == 1 ? 1 : B) && got[1].shape[2] == 1 &&
                      got[2].ndim == 3 && ts_array_numel(&got[2]) == groups,
                  "Mean and InvStdDev keep the normalized dims as 1 (axis %d)", axis);
            int bad = 0;
            for (int64_t gi = 0; gi < groups; gi++) {
                double mean = 0, var = 0;
                for (int64_t i = 0; i < inner; i++) mean += x[gi * inner + i];
                mean /= (double)inner;
                for (int64_t i = 0; i < inner; i++) var += (x[gi * inner + i] - mean) * (x[gi * inner + i] - mean);
                double inv = 1 / sqrt(var / (double)inner + eps);
                bad += fabs(((const float *)got[1].data)[gi] - mean) > 1e-5 + 1e-5 * fabs(mean);
                bad += fabs(((const float *)got[2].data)[gi] - inv) > 1e-4 * inv;
                for (int64_t i = 0; i < inner; i++) {
                    double y = (x[gi * inner + i] - mean) * inv * w[i] + b[i];
                    bad += fabs(((const float *)got[0].data)[gi * inner + i] - y) > 1e-4 * (1 + fabs(y));
                }
            }
            CHECK(bad == 0, "Y, Mean and InvStdDev are ONNX's values (axis %d; %d off)", axis, bad);
        }
        ts_model_free(m);
        ts_options_free(opt);
        ts_graph_free(g);
    }
    remove_dir();
    return check_summary("test_onnx_layer_norm");
}
