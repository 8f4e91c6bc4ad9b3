/* test_onnx_batch.c -- an imported model at another batch size than the
 * file's example: exporters bake the example's batch into Reshape targets
 * (ConvNeXt's [B*H*W, C]). A model exported at batch 8 -- Transpose to
 * channels-last, Reshape to [8*4*4, 2], MatMul, Reshape to [8, 48]; and,
 * as attention does after a sequence-first transpose, Transpose to
 * [C, B, H, W] and Reshape to [C*8*4, 4] -- is imported at batch 8 and run
 * on 6 samples (a last partial batch): the recompile rebuilds the targets
 * for batch 6 and every value is the model's, computed here. A tensor of
 * the built batch broadcast against the batch is an error at batch 1, not
 * an output of 8 samples; a constant of the built batch whose samples are
 * all equal is one sample broadcast, and runs at any batch. */
/* needs: onnx */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "onnx_model.h"

#define C 2
#define H 4
#define K 3

static const float W[C * K] = {0.5f, -1.0f, 2.0f, 1.5f, 0.25f, -0.75f};

/* y[b, (h*H + w)*K + k] = sum_c x[b,c,h,w] W[c,k] */
static int check_batch(ts_model *m, int batch) {
    float *x = malloc((size_t)batch * C * H * H * sizeof *x);
    if (!x) return 0;
    for (int i = 0; i < batch * C * H * H; i++) x[i] = (float)sin(0.37 * i + 0.1);
    ts_array in = ts_array_f32(x, 4, (int64_t[]){batch, C, H, H});
    const char *name = "x";
    ts_status st = ts_model_run(m, &name, &in, 1);
    CHECK(st == TS_OK, "runs on a batch of %d%s%s", batch, st ? ": " : "", st ? ts_last_error() : "");
    ts_array a;
    int ok = 0;
    if (!st && ts_model_anchored(m, "y", &a) == TS_OK) {
        CHECK(a.ndim == 2 && a.shape[0] == batch && a.shape[1] == H * H * K, "batch %d: y is [%d,%d]", batch, batch, H * H * K);
        int bad = 0;
        for (int b = 0; b < batch && a.shape[0] == batch; b++)
            for (int p = 0; p < H * H; p++)
                for (int k = 0; k < K; k++) {
                    double want = 0;
                    for (int c = 0; c < C; c++) want += x[((b * C + c) * H * H) + p] * W[c * K + k];
                    bad += fabs(((const float *)a.data)[(b * H * H + p) * K + k] - want) > 1e-5;
                }
        CHECK(bad == 0, "batch %d: every value is the model's (%d off)", batch, bad);
        ok = bad == 0;
    }
    if (!st && ts_model_anchored(m, "s", &a) == TS_OK) { /* s[(c*batch + b)*H + h, w] = x[b,c,h,w] */
        CHECK(a.ndim == 2 && a.shape[0] == C * batch * H && a.shape[1] == H, "batch %d: s is [%d,%d]", batch, C * batch * H, H);
        int bad = 0;
        for (int b = 0; b < batch && a.shape[0] == C * batch * H; b++)
            for (int c = 0; c < C; c++)
                for (int p = 0; p < H * H; p++)
                    bad += ((const float *)a.data)[(c * batch + b) * H * H + p] != x[(b * C + c) * H * H + p];
        CHECK(bad == 0, "batch %d: s holds x sequence-first (%d off)", batch, bad);
        ok = ok && bad == 0;
    }
    free(x);
    return ok;
}

int main(void) {
    ts_set_log_level(TS_LOG_OFF);
    snprintf(dir, sizeof dir, "/tmp/ts_onnx_batch_XXXXXX");
    if (!mkdtemp(dir)) return 1;

    model_begin();
    input("x", 4, (int64_t[]){8, C, H, H});
    output("y");
    output("s");
    init_f32("w", 2, (int64_t[]){C, K}, W);
    init_i64("rows", 2, (int64_t[]){8 * H * H, C});
    init_i64("per_sample", 2, (int64_t[]){8, H * H * K});
    attr_ints(node("Transpose", "nhwc", "x", "xt"), "perm", 4, (int64_t[]){0, 2, 3, 1});
    node("Reshape", "to_rows", "xt,rows", "r");
    node("MatMul", "proj", "r,w", "z");
    node("Reshape", "to_samples", "z,per_sample", "y");
    init_i64("seq_rows", 2, (int64_t[]){C * 8 * H, H});
    attr_ints(node("Transpose", "cbhw", "x", "xc"), "perm", 4, (int64_t[]){1, 0, 2, 3});
    node("Reshape", "to_seq_rows", "xc,seq_rows", "s");
    ts_graph *g = NULL;
    ts_status st = import_as("batch", &g);
    CHECK(st == TS_OK, "the model exported at batch 8 imports%s%s", st ? ": " : "", st ? ts_last_error() : "");
    if (st) return check_summary("test_onnx_batch");

    ts_tensor *outs[2] = {ts_graph_output_at(g, 0), ts_graph_output_at(g, 1)};
    ts_options *o = ts_options_new();
    ts_options_anchor(o, "y", ts_tensor_name(outs[0]), TS_OUTPUT_FINAL, 0);
    ts_options_anchor(o, "s", ts_tensor_name(outs[1]), TS_OUTPUT_FINAL, 0);
    ts_model *m = NULL;
    CHECK_OK(ts_model_inference(&m, g, outs, 2, o), "an inference model");
    CHECK_OK(m ? ts_model_compile(m) : TS_ERR_STATE, "compiles at batch 8");
    if (m) {
        check_batch(m, 8);
        check_batch(m, 6); /* Reshape targets [128,2], [8,48] and [64,4] rebuilt as [96,2], [6,48] and [48,4] */
        check_batch(m, 8); /* and back */
    }
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);

    /* a tensor made for the built batch ([8,1], as a folded attention mask
     * is) broadcast against the batch: at batch 1 it would broadcast the
     * output back to 8 samples; the recompile says so instead */
    model_begin();
    input("x", 2, (int64_t[]){8, K});
    output("masked");
    init_f32("per_example", 2, (int64_t[]){8, 1}, (const float[8]){0});
    node("Add", "mask", "x,per_example", "masked");
    g = NULL;
    st = import_as("batch_const", &g);
    CHECK(st == TS_OK, "a model adding an [8,1] tensor imports%s%s", st ? ": " : "", st ? ts_last_error() : "");
    ts_tensor *masked = g ? ts_graph_output_at(g, 0) : NULL;
    m = NULL;
    if (masked && ts_model_inference(&m, g, &masked, 1, NULL) == TS_OK) {
        float one[K] = {1, 2, 3};
        ts_array in = ts_array_f32(one, 2, (int64_t[]){1, K});
        const char *name = "x";
        st = ts_model_run(m, &name, &in, 1);
        CHECK(st == TS_ERR_SHAPE && strstr(ts_last_error(), "holds the batch") && strstr(ts_last_error(), "at this batch size"),
              "at batch 1: a shape error saying the output does not scale with the batch: %s", st ? ts_last_error() : "(ran)");
    } else {
        CHECK(0, "an inference model of it: %s", ts_last_error());
    }
    ts_model_free(m);
    ts_graph_free(g);

    /* a constant of the built batch whose samples are all equal (GPT-2's
     * attention mask of its example's [8, ...], computed from Constant
     * nodes) added to the batch: one sample of it broadcast, so the model
     * runs at any batch and adds the same row to every sample */
    model_begin();
    input("x", 2, (int64_t[]){8, K});
    output("shifted");
    int64_t rows[8 * K];
    for (int i = 0; i < 8 * K; i++) rows[i] = i % K + 1;
    init_i64("rows_i", 8 * K, rows);
    init_i64("rows_shape", 2, (int64_t[]){8, K});
    node("Reshape", "as_rows", "rows_i,rows_shape", "rows_k");
    attr_int(node("Cast", "as_float", "rows_k", "rows_f"), "to", 1);
    node("Add", "shift", "x,rows_f", "shifted");
    g = NULL;
    st = import_as("batch_rows", &g);
    CHECK(st == TS_OK, "a model adding a constant [8,%d] of equal rows imports%s%s", K, st ? ": " : "", st ? ts_last_error() : "");
    ts_tensor *shifted = g ? ts_graph_output_at(g, 0) : NULL;
    m = NULL;
    o = ts_options_new();
    if (shifted) ts_options_anchor(o, "y", ts_tensor_name(shifted), TS_OUTPUT_FINAL, 0);
    if (shifted && ts_model_inference(&m, g, &shifted, 1, o) == TS_OK) {
        for (int batch = 8; batch >= 5; batch -= 3) {
            float xs[8 * K];
            for (int i = 0; i < batch * K; i++) xs[i] = (float)cos(0.3 * i);
            ts_array in = ts_array_f32(xs, 2, (int64_t[]){batch, K}), out;
            const char *name = "x";
            st = ts_model_run(m, &name, &in, 1);
            CHECK(st == TS_OK, "adding the rows runs at batch %d%s%s", batch, st ? ": " : "", st ? ts_last_error() : "");
            if (st || ts_model_anchored(m, "y", &out) != TS_OK) continue;
            int bad = out.ndim != 2 || out.shape[0] != batch;
            for (int i = 0; !bad && i < batch * K; i++) bad = fabsf(((const float *)out.data)[i] - (xs[i] + (float)(i % K + 1))) > 1e-6f;
            CHECK(!bad, "at batch %d every sample has the row [1..%d] added", batch, K);
        }
    } else {
        CHECK(0, "an inference model of it: %s", ts_last_error());
    }
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("could not remove %s\n", dir);
    return check_summary("test_onnx_batch");
}
