/* seeded.h -- the fused-path tests' values and their comparison: a
 * buffer filled from a seed (an LCG, values in [-1, 1)) and a seed from a
 * tensor's name (FNV-1a), so that a graph and its twin get the same values
 * by name; a twin compiled with its anchors; a run on inputs "x" and
 * "labels"; an anchored value of two models compared to the bit.
 * Header-only. */
#ifndef TS_TEST_SEEDED_H
#define TS_TEST_SEEDED_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "tensorscope.h"

static inline void seeded_fill(float *x, int64_t n, unsigned seed) {
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
}

static inline unsigned name_seed(const char *s) {
    unsigned h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* Every parameter and buffer of g filled from its name, times `scale`
 * (a running variance: 0.5 + |v|, positive), before any model is made. */
static inline void seeded_params(ts_graph *g, float scale) {
    for (size_t i = 0; i < ts_graph_tensor_count(g); i++) {
        ts_tensor *t = ts_graph_tensor_at(g, i);
        const char *op = ts_tensor_op(t), *name = ts_tensor_name(t);
        if (strcmp(op, "Param") != 0 && strcmp(op, "Buffer") != 0) continue;
        ts_array a;
        CHECK_OK(ts_tensor_info(t, &a), "'%s' read", name);
        float *v = a.data;
        int64_t n = ts_array_numel(&a);
        seeded_fill(v, n, name_seed(name));
        for (int64_t k = 0; k < n; k++) v[k] = strstr(name, "running_var") ? 0.5f + fabsf(v[k]) : scale * v[k];
    }
}

/* Graph g compiled on 2 threads as a training model of `loss` (SGD 0.1,
 * the loss anchored ALL) or an inference model of `out`, at `precision`
 * (TS_F32: the default), with the (short name, tensor) pairs of the
 * NULL-ended lists `anchors` and `seen` (either NULL), and where training
 * of `trained`, anchored FINAL. NULL, after a failed check naming `what`,
 * where it does not compile. */
static inline ts_model *twin_model(ts_graph *g, ts_tensor *loss, ts_tensor *out, bool training, ts_dtype precision,
                                   const char *const *anchors, const char *const *seen, const char *const *trained, const char *what) {
    ts_options *o = ts_options_new();
    ts_options_set_threads(o, 2);
    ts_status st = precision == TS_F32 ? TS_OK : ts_options_set_precision(o, precision);
    const char *const *lists[3] = {anchors, seen, training ? trained : NULL};
    for (int l = 0; l < 3; l++)
        for (int k = 0; lists[l] && lists[l][k]; k += 2) ts_options_anchor(o, lists[l][k], lists[l][k + 1], TS_OUTPUT_FINAL, 0);
    ts_model *m = NULL;
    if (!st && training) {
        ts_options_anchor(o, "loss", "loss", TS_OUTPUT_ALL, 0);
        st = ts_model_training(&m, g, loss, o, ts_sgd(0.1f, 0.0f, 0.0f));
    } else if (!st) {
        st = ts_model_inference(&m, g, &out, 1, o);
    }
    if (!st) st = ts_model_compile(m);
    CHECK_OK(st, "%s: a %s model", what, training ? "training" : "inference");
    ts_options_free(o);
    if (st) ts_model_free(m);
    return st ? NULL : m;
}

/* One run of m on its inputs "x" (float32, of ndim dims `shape`) and
 * "labels" (shape[0] int32s). */
static inline ts_status run_xy(ts_model *m, float *x, int ndim, const int64_t *shape, int32_t *labels) {
    const char *names[2] = {"x", "labels"};
    ts_array in[2] = {ts_array_f32(x, ndim, shape), ts_array_i32(labels, 1, (int64_t[]){shape[0]})};
    return ts_model_run(m, names, in, 2);
}

/* Whether the value anchored as `name` (n floats) is the same, to the bit,
 * in models a and b. */
static inline bool same_anchor(ts_model *a, ts_model *b, const char *name, int64_t n) {
    ts_array x, y;
    if (ts_model_anchored(a, name, &x) || ts_model_anchored(b, name, &y)) return false;
    return memcmp(x.data, y.data, (size_t)n * sizeof(float)) == 0;
}

#endif
