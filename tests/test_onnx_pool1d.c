/* test_onnx_pool1d.c -- ONNX's 1-D MaxPool and AveragePool on [N,C,L]
 * (kernel_shape, strides and pads of one axis), checked against the
 * windows computed here: a max over kernel 2, stride 2; an average over
 * kernel 3, stride 1, one pad each side, the pad not counted
 * (count_include_pad 0) and counted (1). A 1-D window on a 4-D input is
 * refused with a message that says what it pools. */
/* needs: onnx */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "onnx_model.h"

enum { NC = 2, L = 7 };

/* Imports a pool of x [1,NC,L] and runs it on xv; the output into out (n values). */
static int pool(const char *op, int k, int stride, int pad, int include_pad, const float *xv, float *out, int n) {
    model_begin();
    input("x", 3, (int64_t[]){1, NC, L});
    Node *nd = node(op, "p", "x", "y");
    attr_ints(nd, "kernel_shape", 1, (int64_t[]){k});
    attr_ints(nd, "strides", 1, (int64_t[]){stride});
    attr_ints(nd, "pads", 2, (int64_t[]){pad, pad});
    if (include_pad) attr_int(nd, "count_include_pad", 1);
    output("y");
    ts_graph *g = NULL;
    char name[64];
    snprintf(name, sizeof name, "%s_%d_%d_%d_%d", op, k, stride, pad, include_pad);
    ts_status st = import_as(name, &g);
    ts_tensor *y = g ? ts_graph_output_at(g, 0) : NULL;
    ts_options *opt = ts_options_new();
    ts_options_set_output_mode(opt, TS_OUTPUT_FINAL, 0);
    ts_model *m = NULL;
    const char *names[1] = {"x"};
    ts_array in = ts_array_f32((float *)xv, 3, (int64_t[]){1, NC, L}), a;
    if (!st) st = ts_model_inference(&m, g, &y, 1, opt);
    if (!st) st = ts_model_run(m, names, &in, 1);
    if (!st) st = ts_model_anchored(m, ts_tensor_name(y), &a);
    int ok = !st && a.ndim == 3 && a.shape[2] == n / NC && ts_array_numel(&a) == n;
    CHECK(ok, "%s kernel %d stride %d pad %d: imports and runs to [1,%d,%d]%s%s", op, k, stride, pad, NC, n / NC, st ? ": " : "",
          st ? ts_last_error() : "");
    if (ok) memcpy(out, a.data, (size_t)n * sizeof *out);
    ts_model_free(m);
    ts_options_free(opt);
    ts_graph_free(g);
    return ok;
}

int main(void) {
    ts_set_log_level(TS_LOG_OFF);
    snprintf(dir, sizeof dir, "/tmp/ts_onnx_pool1d_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    float x[NC * L], got[NC * L];
    for (int i = 0; i < NC * L; i++) x[i] = (float)((i * 5) % 11) - 4.0f;

    int n = (L - 2) / 2 + 1;
    if (pool("MaxPool", 2, 2, 0, 0, x, got, NC * n)) {
        int bad = 0;
        for (int c = 0; c < NC; c++)
            for (int j = 0; j < n; j++) bad += got[c * n + j] != fmaxf(x[c * L + 2 * j], x[c * L + 2 * j + 1]);
        CHECK(bad == 0, "MaxPool: each window's max (%d off)", bad);
    }
    for (int include = 0; include <= 1; include++)
        if (pool("AveragePool", 3, 1, 1, include, x, got, NC * L)) {
            int bad = 0;
            for (int c = 0; c < NC; c++)
                for (int j = 0; j < L; j++) {
                    double sum = 0;
                    int count = 0;
                    for (int t = j - 1; t <= j + 1; t++)
                        if (t >= 0 && t < L) sum += x[c * L + t], count++;
                    double want = sum / (include ? 3 : count);
                    bad += fabs(got[c * L + j] - want) > 1e-5;
                }
            CHECK(bad == 0, "AveragePool, count_include_pad %d: each window's mean (%d off)", include, bad);
        }

    model_begin();
    input("x", 4, (int64_t[]){1, NC, L, L});
    attr_ints(node("MaxPool", "p", "x", "y"), "kernel_shape", 1, (int64_t[]){2});
    output("y");
    expect("a 1-D window on a 4-D input", import_as("pool1d_4d", NULL), TS_ERR_SHAPE, "pools [N,C,L] inputs");
    remove_dir();
    return check_summary("test_onnx_pool1d");
}
