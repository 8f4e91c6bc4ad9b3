/* test_int_views.c -- integer tensors (token ids, labels, indices) through
 * the ops that only move cells: Reshape, Flatten and Permute of an i32
 * tensor are i32 tensors with the same values, in their new places, that
 * feed the ops taking integer inputs (an embedding, a loss's labels) and
 * come out of a model as i32. Every value survives, the ones whose bits
 * read as a float NaN included, and a numerics check after every op does
 * not take them for NaNs. They have no gradient (an anchor asking for one is
 * refused), while the f32 table they index still trains. The other ops
 * keep refusing an i32 input with an error that says so. CastIndex makes
 * indices of floats the graph computed: toward zero, clamped into the
 * range given, so that a Gather by them never reads outside its table.
 * Also run on the staged and CUDA devices (ctest's _staged, _cuda). */
#include <math.h>
#include <string.h>

#include "check.h"

static ts_dtype dtype_of(const ts_tensor *t) {
    ts_array a;
    return ts_tensor_info(t, &a) ? (ts_dtype)-1 : a.dtype;
}

int main(void)
{
    /* ids [2,3,1] -> reshape [3,2] -> permute [2,3] -> flatten [6]; the
     * values a float NaN's bits would have (-1 is 0xffffffff, -5000000 a
     * signalling NaN's pattern) move as they are */
    ts_graph *g = ts_graph_new(1);
    ts_tensor *ids = ts_input(g, "ids", TS_I32, 3, (int64_t[]){2, 3, 1});
    ts_tensor *r = ts_reshape(g, ids, 2, (int64_t[]){3, 2});
    ts_tensor *p = ts_permute(g, r, (int[]){1, 0});
    ts_tensor *f = ts_flatten(g, ts_reshape(g, p, 3, (int64_t[]){2, 3, 1}), 0);
    CHECK(r && p && f, "Reshape, Permute and Flatten take an i32 tensor: %s", r && p && f ? "" : ts_last_error());
    CHECK(dtype_of(r) == TS_I32 && dtype_of(p) == TS_I32 && dtype_of(f) == TS_I32, "and their outputs are i32");
    ts_tensor *outs[3] = {r, p, f};
    ts_options *o = ts_options_new();
    CHECK_OK(ts_options_set_check_numerics(o, TS_CHECK_OP), "a numerics check after every op");
    ts_model *m = NULL;
    CHECK_OK(ts_model_inference(&m, g, outs, 3, o), "an inference model with i32 outputs");
    int32_t v[6] = {0, -1, 7, -5000000, 2147483647, -2147483647 - 1};
    ts_array in = ts_array_i32(v, 3, (int64_t[]){2, 3, 1});
    const char *name = "ids";
    CHECK_OK(ts_model_run(m, &name, &in, 1), "a run over ids whose bits read as NaN as floats (the check finds none)");
    ts_array ar, ap, af;
    int ok = !ts_model_anchored(m, ts_tensor_name(r), &ar) && !ts_model_anchored(m, ts_tensor_name(p), &ap) &&
             !ts_model_anchored(m, ts_tensor_name(f), &af);
    CHECK(ok && ar.dtype == TS_I32 && ap.dtype == TS_I32 && af.dtype == TS_I32, "the outputs come back as i32 arrays");
    int bad = 0;
    for (int i = 0; ok && i < 6; i++) bad += ((const int32_t *)ar.data)[i] != v[i];
    CHECK(ok && bad == 0 && ar.ndim == 3 && ar.shape[1] == 3 && ar.shape[2] == 2, "the reshape holds the ids in order, as [3,2] (one sample)");
    bad = 0; /* p[i][j] = r[j][i] = v[2j + i] */
    for (int i = 0; ok && i < 2; i++)
        for (int j = 0; j < 3; j++) bad += ((const int32_t *)ap.data)[i * 3 + j] != v[2 * j + i];
    CHECK(ok && bad == 0, "the permutation moves every id to its transposed place");
    bad = 0;
    for (int i = 0; ok && i < 6; i++) bad += ((const int32_t *)af.data)[i] != ((const int32_t *)ap.data)[i];
    CHECK(ok && bad == 0 && af.ndim == 2 && af.shape[1] == 6, "the flatten holds the permuted ids as [6] (one sample)");
    ts_model_free(m);
    ts_options_free(o);

    CHECK(ts_relu(g, r) == NULL && strstr(ts_last_error(), "'") && strstr(ts_last_error(), "is i32; this input takes f32"),
          "an op that computes in f32 still refuses the i32 tensor: %s", ts_last_error());
    ts_graph_free(g);

    /* training: labels [2,2] flattened to [4] for the loss, ids reshaped
     * for an embedding; the table trains, the ids have no gradient */
    g = ts_graph_new(1);
    ids = ts_input(g, "ids", TS_I32, 2, (int64_t[]){2, 2});
    ts_tensor *labels = ts_input(g, "labels", TS_I32, 2, (int64_t[]){2, 2});
    ts_tensor *table = ts_param(g, "table", 2, (int64_t[]){5, 3});
    ts_tensor *flat_ids = ts_reshape(g, ids, 1, (int64_t[]){4});
    ts_tensor *rows = ts_embedding(g, table, flat_ids); /* [4,3] */
    ts_tensor *loss = ts_cross_entropy(g, rows, ts_flatten(g, labels, 0));
    CHECK(loss != NULL, "a reshaped i32 tensor feeds an embedding, a flattened one a loss's labels: %s", loss ? "" : ts_last_error());
    o = ts_options_new();
    ts_options_anchor(o, "dids", "Gradient___" "ids", TS_OUTPUT_FINAL, 0);
    ts_status st = ts_model_training(&m, g, loss, o, ts_sgd(0.5f, 0.0f, 0.0f));
    if (!st) st = ts_model_compile(m);
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "integer tensor and has no gradient"),
          "the gradient of the ids is refused: %s", ts_last_error());
    ts_model_free(m);
    ts_options_free(o);
    o = ts_options_new();
    char grad_name[128];
    snprintf(grad_name, sizeof grad_name, "Gradient___%s", ts_tensor_name(flat_ids));
    ts_options_anchor(o, "dflat", grad_name, TS_OUTPUT_FINAL, 0);
    m = NULL;
    st = ts_model_training(&m, g, loss, o, ts_sgd(0.5f, 0.0f, 0.0f));
    if (!st) st = ts_model_compile(m);
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "integer tensor and has no gradient"),
          "and so is the gradient of their reshape: %s", ts_last_error());
    ts_model_free(m);
    ts_options_free(o);

    m = NULL;
    CHECK_OK(ts_model_training(&m, g, loss, NULL, ts_sgd(0.5f, 0.0f, 0.0f)), "a training model over the reshaped ids");
    int32_t idv[4] = {4, 0, 4, 2}, lv[4] = {1, 2, 1, 0};
    const char *names[2] = {"ids", "labels"};
    ts_array ins[2] = {ts_array_i32(idv, 2, (int64_t[]){2, 2}), ts_array_i32(lv, 2, (int64_t[]){2, 2})};
    ts_array la;
    float first = 0, last = 0;
    ok = 1;
    for (int step = 0; ok && step < 20; step++) {
        ok = !ts_model_run(m, names, ins, 2) && !ts_model_anchored(m, ts_tensor_name(loss), &la);
        if (ok && step == 0) first = *(const float *)la.data;
        if (ok) last = *(const float *)la.data;
    }
    CHECK(ok && last < 0.5f * first, "the table trains through the ids' reshape: loss %.4f -> %.4f %s", (double)first, (double)last,
          ok ? "" : ts_last_error());
    /* an id beyond the table, seen through the reshape, is refused before
     * any kernel reads it (the check follows the view to the input) */
    idv[2] = 5;
    st = ts_model_run(m, names, ins, 2);
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "'ids'[2] = 5") && strstr(ts_last_error(), "[0, 5)"),
          "an id out of range through a reshape: %s", ts_last_error());
    idv[2] = 4;
    lv[1] = -1;
    st = ts_model_run(m, names, ins, 2);
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "'labels'[1] = -1"), "a label out of range through a flatten: %s",
          ts_last_error());
    ts_model_free(m);
    ts_graph_free(g);

    /* CastIndex of computed floats, clamped to [-3, 4], gathering rows of
     * a [5,2] table (negative indices from the end); the table's gradient
     * reaches the rows the indices picked */
    g = ts_graph_new(1);
    ts_tensor *x = ts_input(g, "x", TS_F32, 1, (int64_t[]){8});
    ts_tensor *ix = ts_unary(g, "CastIndex", ts_scale(g, x, 2.0f), -3.0f, 4.0f);
    CHECK(ix && dtype_of(ix) == TS_I32, "CastIndex gives an i32 tensor: %s", ix ? "" : ts_last_error());
    ts_graph *badg = ts_graph_new(1);
    ts_tensor *bx = ts_input(badg, "x", TS_F32, 1, (int64_t[]){8});
    CHECK(ts_unary(badg, "CastIndex", bx, 4.0f, -3.0f) == NULL && strstr(ts_last_error(), "alpha <= beta"),
          "a clamp whose bounds are reversed is refused: %s", ts_last_error());
    ts_graph_free(badg);
    badg = ts_graph_new(1);
    bx = ts_input(badg, "x", TS_F32, 1, (int64_t[]){8});
    CHECK(ts_unary(badg, "CastIndex", bx, -1e12f, 3.0f) == NULL && strstr(ts_last_error(), "int32's range"),
          "and one beyond int32's: %s", ts_last_error());
    ts_graph_free(badg);
    table = ts_param(g, "table", 2, (int64_t[]){5, 2});
    ts_tensor *picked = ts_gather(g, table, ix, 0); /* [8,2] */
    loss = ts_sum(g, picked);
    o = ts_options_new();
    ts_options_anchor(o, "ix", ts_tensor_name(ix), TS_OUTPUT_FINAL, 0);
    ts_options_anchor(o, "picked", ts_tensor_name(picked), TS_OUTPUT_FINAL, 0);
    ts_options_anchor(o, "dtable", "Gradient___table", TS_OUTPUT_FINAL, 0);
    ts_options_anchor(o, "w", "table", TS_OUTPUT_FINAL, 0);
    m = NULL;
    CHECK_OK(ts_model_training(&m, g, loss, o, ts_sgd(0.0f, 0.0f, 0.0f)), "a model gathering by computed indices");
    float xv[8] = {-3.95f, -1.6f, -0.2f, 0.45f, 1.99f, 50.0f, NAN, -INFINITY}; /* x2: -7.9 -3.2 -0.4 0.9 3.98 100 NaN -inf */
    int32_t want[8] = {-3, -3, 0, 0, 3, 4, -3, -3};
    ts_array xa = ts_array_f32(xv, 1, (int64_t[]){8});
    const char *xn = "x";
    CHECK_OK(ts_model_run(m, &xn, &xa, 1), "a run whose indices are NaN, infinite and beyond the table");
    ts_array ia, pa, da;
    ok = !ts_model_anchored(m, "ix", &ia) && !ts_model_anchored(m, "picked", &pa) && !ts_model_anchored(m, "dtable", &da);
    CHECK(ok && ia.dtype == TS_I32, "the indices come back as i32 %s", ok ? "" : ts_last_error());
    bad = 0;
    for (int i = 0; ok && i < 8; i++) bad += ((const int32_t *)ia.data)[i] != want[i];
    CHECK(ok && bad == 0, "toward zero, clamped to [-3, 4], NaN and -inf to -3 (%d wrong)", bad);
    const float *tv = NULL;
    ts_array ta;
    if (ok && !ts_model_anchored(m, "w", &ta)) tv = ta.data;
    int counts[5] = {0};
    bad = 0;
    for (int i = 0; ok && tv && i < 8; i++) {
        int row = want[i] < 0 ? want[i] + 5 : want[i];
        counts[row]++;
        for (int j = 0; j < 2; j++) bad += ((const float *)pa.data)[i * 2 + j] != tv[row * 2 + j];
    }
    CHECK(ok && tv && bad == 0, "each gathered row is the table's row at the index");
    bad = 0;
    for (int row = 0; ok && row < 5; row++)
        for (int j = 0; j < 2; j++) bad += ((const float *)da.data)[row * 2 + j] != (float)counts[row];
    CHECK(ok && bad == 0, "the table's gradient counts how often each row was picked");
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
    return check_summary("test_int_views");
}
