/* test_save_graph_c.c -- ts_model_save_graph from C: an inference model's
 * file, imported again by ts_graph_from_onnx, computes what the model
 * computed (the file reads back through an independent path: the importer
 * maps ONNX ops to ours, the writer ours to ONNX); a training model's file
 * is refused by the importer only for its optimizer's own-domain nodes;
 * bad arguments, an unwritable path and every allocation failing are errors
 * that name the fix, leave no file and leak nothing. tests/test_save_graph.sh checks the files with onnx and
 * onnxruntime. */
/* needs: onnx */
#define _GNU_SOURCE /* memmem */
#include "support/check.h"
#include "tensorscope.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define B 3
#define F 6

/* x [B,F] -> fc1 -> gelu -> layer norm -> fc2 -> tanh -> softmax */
static ts_graph *build(ts_tensor **out, ts_tensor **loss) {
    ts_graph *g = ts_graph_new(11);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){B, F});
    ts_tensor *labels = ts_input(g, "labels", TS_I32, 1, (int64_t[]){B});
    ts_tensor *w = ts_param(g, "ln.weight", 1, (int64_t[]){8}), *b = ts_param(g, "ln.bias", 1, (int64_t[]){8});
    ts_tensor *h = ts_layer_norm(g, ts_gelu(g, ts_linear(g, x, 8, "fc1"), 0), w, b, 1, 1e-5f);
    ts_tensor *logits = ts_tanh(g, ts_linear(g, h, 4, "fc2"));
    *out = ts_softmax(g, logits, 1);
    *loss = ts_cross_entropy(g, logits, labels);
    float ones[8];
    for (int i = 0; i < 8; i++) ones[i] = 1.0f + 0.1f * (float)i;
    ts_array wa = ts_array_f32(ones, 1, (int64_t[]){8});
    if (w) ts_param_set(w, &wa);
    return g;
}

/* A counting allocator that can fail its Nth call (tests/test_alloc_fail.c's kind). */
static long calls, fail_at, live;
static void *c_alloc(void *u, size_t n) {
    (void)u;
    if (++calls == fail_at) return NULL;
    void *p = malloc(n);
    if (p) live++;
    return p;
}
static void *c_realloc(void *u, void *p, size_t n) {
    (void)u;
    if (++calls == fail_at) return NULL;
    void *q = realloc(p, n);
    if (q && !p) live++;
    return q;
}
static void c_free(void *u, void *p) {
    (void)u;
    if (p) live--;
    free(p);
}
static const ts_allocator COUNTING = {c_alloc, c_realloc, c_free, NULL};

static ts_status run_out(ts_model *m, const char *name, float *x, float *y) {
    ts_array in = ts_array_f32(x, 2, (int64_t[]){B, F}), got;
    const char *names[1] = {"x"};
    ts_status st = ts_model_run(m, names, &in, 1);
    if (!st) st = ts_model_anchored(m, name, &got);
    if (!st) memcpy(y, got.data, sizeof(float) * B * 4);
    return st;
}

int main(void) {
    char dir[] = "/tmp/ts_save_graph_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char path[256], bad[300];
    snprintf(path, sizeof path, "%s/inference.onnx", dir);
    snprintf(bad, sizeof bad, "%s/missing/g.onnx", dir);

    ts_tensor *out, *loss;
    ts_graph *g = build(&out, &loss);
    ts_model *m = NULL;
    CHECK_OK(ts_model_inference(&m, g, &out, 1, NULL), "an inference model");
    float x[B * F], ours[B * 4], theirs[B * 4];
    for (int i = 0; i < B * F; i++) x[i] = sinf((float)i * 0.7f) * 2.0f;
    CHECK_OK(run_out(m, ts_tensor_name(out), x, ours), "running it");
    CHECK_OK(ts_model_save_graph(m, path), "saving its graph");

    /* imported again: the same outputs */
    ts_graph *back = NULL;
    ts_status st = ts_graph_from_onnx(&back, path, NULL, 0);
    CHECK_OK(st, "the saved file imports again");
    ts_tensor *bo = back ? ts_graph_find(back, ts_tensor_name(out)) : NULL;
    CHECK(bo != NULL, "the output keeps its name '%s' in the file", ts_tensor_name(out));
    ts_model *mb = NULL;
    if (bo && !ts_model_inference(&mb, back, &bo, 1, NULL) && !run_out(mb, ts_tensor_name(out), x, theirs)) {
        double worst = 0;
        for (int i = 0; i < B * 4; i++) worst = fmax(worst, fabs((double)ours[i] - (double)theirs[i]));
        CHECK(worst < 1e-5, "the imported file computes the model's outputs (max diff %g)", worst);
    } else CHECK(0, "running the imported file: %s", ts_last_error());
    ts_model_free(mb);
    ts_graph_free(back);

    /* every allocation the writer makes failing in turn: TS_ERR_OUT_OF_MEMORY
     * (or the file whole), nothing leaked */
    ts_set_allocator(&COUNTING);
    calls = 0, fail_at = 0, live = 0;
    CHECK_OK(ts_model_save_graph(m, path), "saving with a counting allocator");
    long total = calls, leaked = live, wrong = 0, wrong_at = 0;
    for (long k = 1; k <= total; k++) {
        calls = 0, fail_at = k, live = 0;
        st = ts_model_save_graph(m, path);
        if ((st != TS_OK && st != TS_ERR_OUT_OF_MEMORY) || live != 0) {
            wrong++;
            if (!wrong_at) wrong_at = k;
        }
    }
    ts_set_allocator(NULL);
    CHECK(leaked == 0 && total > 10, "a save makes %ld allocations and frees them all (%ld left)", total, leaked);
    CHECK(wrong == 0, "each of the %ld allocations failing gives TS_ERR_OUT_OF_MEMORY and leaks nothing (%ld did not; first: call %ld)", total, wrong, wrong_at);

    /* bad arguments and an unwritable path: errors, no file */
    CHECK(ts_model_save_graph(NULL, path) == TS_ERR_INVALID_ARGUMENT, "a NULL model is refused");
    CHECK(ts_model_save_graph(m, NULL) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "path"), "a NULL path is refused, saying what to give");
    CHECK(ts_model_save_graph(m, "") == TS_ERR_INVALID_ARGUMENT, "an empty path is refused");
    st = ts_model_save_graph(m, bad);
    CHECK(st == TS_ERR_IO && strstr(ts_last_error(), "missing"), "an unwritable path is an I/O error naming it: %s", ts_last_error());
    CHECK(access(bad, F_OK) != 0, "nothing is left at the unwritable path");
    ts_model_free(m);

    /* a training model's file: its optimizer step is of our own domain */
    ts_model *t = NULL;
    char tpath[256];
    snprintf(tpath, sizeof tpath, "%s/training.onnx", dir);
    CHECK_OK(ts_model_training(&t, g, loss, NULL, ts_sgd(0.1f, 0.9f, 0.0f)), "a training model");
    CHECK_OK(ts_model_save_graph(t, tpath), "saving a training model's graph (compiles it first)");
    FILE *f = fopen(tpath, "rb");
    static char bytes[1 << 20];
    size_t n = f ? fread(bytes, 1, sizeof bytes, f) : 0;
    if (f) fclose(f);
    const char *want[] = {"ai.tensorscope", "Gradient___fc1.weight", "UpdatedVar___fc1.weight", "Accl___fc1.weight/next", "Gradient___ln.bias"};
    for (size_t k = 0; k < sizeof want / sizeof *want; k++)
        CHECK(n && memmem(bytes, n, want[k], strlen(want[k])), "the training file holds '%s'", want[k]);
    ts_model_free(t);
    ts_graph_free(g);
    unlink(path);
    unlink(tpath);
    rmdir(dir);
    return check_summary("test_save_graph_c");
}
