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
 * all equal is one sample broadcast, and runs at any batch. So do a class
 * token expanded to the example's batch and concatenated to the samples
 * (ViT), token-type ids of that batch gathered from an embedding (BERT),
 * and the dynamo exporter's fold of a class token into an initializer of
 * that batch: at another batch each is one sample repeated to it, and the
 * gradient reaches the token (the sum over the batch). */
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

/* The token model (tokens_model), exported at batch TB: y = concat(fold,
 * expand(cls), x + emb[ids]) along dim 1, [B, 2 + TT, C]. */
#define TB 4
#define TT 3
#define TV 3
static const float CLS[C] = {0.75f, -0.5f}, CLS2[C] = {-1.25f, 2.0f}, EMB[TV * C] = {0.1f, 0.2f, -0.3f, 0.4f, 0.5f, -0.6f};
static const int64_t IDS[TT] = {2, 0, 1};

static void tokens_model(void) {
    model_begin();
    input("x", 3, (int64_t[]){TB, TT, C});
    output("y");
    /* ViT's TorchScript export: the class token expanded to the batch */
    init_f32("cls", 3, (int64_t[]){1, 1, C}, CLS);
    init_i64("cls_shape", 3, (int64_t[]){TB, 1, 1});
    node("Expand", "expand_cls", "cls,cls_shape", "cls_b");
    /* BERT's: token-type ids of the batch (a constant), gathered */
    int64_t ids[TB * TT];
    for (int i = 0; i < TB * TT; i++) ids[i] = IDS[i % TT];
    init_i64("ids_flat", TB * TT, ids);
    init_i64("ids_shape", 2, (int64_t[]){TB, TT});
    node("Reshape", "ids_rows", "ids_flat,ids_shape", "ids");
    init_f32("emb", 2, (int64_t[]){TV, C}, EMB);
    node("Gather", "token_type", "emb,ids", "tok");
    node("Add", "embed", "x,tok", "xt");
    /* the dynamo export's: the expanded token folded into an initializer */
    float fold[TB * C];
    for (int i = 0; i < TB * C; i++) fold[i] = CLS2[i % C];
    init_f32("expand", 3, (int64_t[]){TB, 1, C}, fold);
    attr_int(node("Concat", "cat_cls", "cls_b,xt", "with_cls"), "axis", 1);
    attr_int(node("Concat", "cat_fold", "expand,with_cls", "y"), "axis", 1);
    prop(&graph->metadata_props, &graph->n_metadata_props, "pkg.torch.export.ExportedProgram.graph_signature",
         "# inputs\np_cls: PARAMETER target='cls'\np_emb: PARAMETER target='emb'\np_cls2: PARAMETER target='cls2'\n"
         "x: USER_INPUT\n\n# outputs\ny: USER_OUTPUT\n");
    value_meta("expand", "pkg.onnxscript.optimizer.folded_from", "['cls2']");
}

/* One step at `batch` samples: y's every value, and the gradients of the
 * loss sum(y^2) reaching the class token (2 * batch * cls, summed over the
 * samples) and the folded one (a parameter of one sample now). */
static void check_tokens(ts_model *m, int batch) {
    float x[TB * TT * C];
    for (int i = 0; i < batch * TT * C; i++) x[i] = (float)sin(0.41 * i + 0.2);
    ts_array in = ts_array_f32(x, 3, (int64_t[]){batch, TT, C}), a;
    const char *name = "x";
    ts_status st = ts_model_run(m, &name, &in, 1);
    CHECK(st == TS_OK, "the token model runs at batch %d%s%s", batch, st ? ": " : "", st ? ts_last_error() : "");
    if (st) return;
    if (ts_model_anchored(m, "y", &a) == TS_OK) {
        int rows = 2 + TT, bad = a.ndim != 3 || a.shape[0] != batch || a.shape[1] != rows || a.shape[2] != C;
        CHECK(!bad, "batch %d: y is [%d,%d,%d]", batch, batch, rows, C);
        for (int b = 0; b < batch && !bad; b++)
            for (int r = 0; r < rows; r++)
                for (int k = 0; k < C; k++) {
                    float want = r == 0 ? CLS2[k] : r == 1 ? CLS[k] : x[(b * TT + r - 2) * C + k] + EMB[IDS[r - 2] * C + k];
                    bad += fabsf(((const float *)a.data)[(b * rows + r) * C + k] - want) > 1e-6f;
                }
        CHECK(!bad, "batch %d: every sample is [cls2, cls, x + emb[ids]] (%d off)", batch, bad);
    }
    const char *anchors[2] = {"gcls", "gfold"};
    const float *tokens[2] = {CLS, CLS2};
    for (int p = 0; p < 2; p++) {
        if (ts_model_anchored(m, anchors[p], &a) != TS_OK) {
            CHECK(0, "batch %d: %s anchored: %s", batch, anchors[p], ts_last_error());
            continue;
        }
        int bad = a.ndim != 3 || a.shape[0] != 1 || a.shape[1] != 1 || a.shape[2] != C;
        for (int k = 0; k < C && !bad; k++) bad += fabsf(((const float *)a.data)[k] - 2.0f * (float)batch * tokens[p][k]) > 1e-5f;
        CHECK(!bad, "batch %d: %s is [1,1,%d], 2 * %d * the token: its gradient summed over the samples", batch, anchors[p], C, batch);
    }
}

static void tokens(void) {
    tokens_model();
    ts_graph *g = NULL;
    ts_status st = import_as("batch_tokens", &g);
    CHECK(st == TS_OK, "the token model exported at batch %d imports%s%s", TB, st ? ": " : "", st ? ts_last_error() : "");
    if (st) return;
    ts_tensor *y = ts_graph_output_at(g, 0), *loss = ts_sum(g, ts_mul(g, y, y));
    ts_options *o = ts_options_new();
    ts_options_anchor(o, "y", ts_tensor_name(y), TS_OUTPUT_FINAL, 0);
    ts_options_anchor(o, "gcls", "Gradient___cls", TS_OUTPUT_FINAL, 0);
    ts_options_anchor(o, "gfold", "Gradient___expand", TS_OUTPUT_FINAL, 0);
    ts_model *m = NULL;
    CHECK_OK(ts_model_training(&m, g, loss, o, ts_sgd(0.0f, 0.0f, 0.0f)), "a training model of it (lr 0)");
    if (m) {
        check_tokens(m, TB);
        check_tokens(m, 3); /* another batch: a last partial batch */
        check_tokens(m, 1);
        check_tokens(m, TB);
    }
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
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

    tokens();

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("could not remove %s\n", dir);
    return check_summary("test_onnx_batch");
}
