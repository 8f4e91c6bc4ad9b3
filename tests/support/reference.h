/* reference.h -- what the end-to-end comparisons with PyTorch share
 * (test_reference_mlp.c, test_reference_cnn.c): fixture entries, anchors,
 * compiling and running a training model, comparing an anchor. Header-only,
 * like check.h, so that every check counts in the one test program. */
#ifndef TS_TEST_REFERENCE_H
#define TS_TEST_REFERENCE_H

#include <stdio.h>
#include <string.h>

#include "check.h"
#include "fixture.h"
#include "tensorscope.h"

/* The fixture entry `name`; a missing one is a failed check. */
static inline const ts_array *need(const fixture *f, const char *name)
{
    const ts_array *a = fixture_get(f, name);
    if (!a)
        CHECK(0, "fixture has entry %s", name);
    return a;
}

/* Anchors `<prefix><name>` under that name for each of names[0..n). */
static inline void anchor_all(ts_options *o, const char *prefix, const char *const *names, int n, ts_output_mode mode)
{
    char full[256];
    for (int i = 0; i < n; i++) {
        snprintf(full, sizeof full, "%s%s", prefix, names[i]);
        ts_status st = ts_options_anchor(o, full, full, mode, 0);
        if (st != TS_OK)
            CHECK_OK(st, "anchor %s", full);
    }
}

/* A compiled training model of g minimising loss, or NULL (a failed check). */
static inline ts_model *compile(ts_graph *g, ts_tensor *loss, ts_options *o, ts_optimizer opt, const char *what)
{
    ts_model *model = NULL;
    ts_status st = ts_model_training(&model, g, loss, o, opt);
    if (st == TS_OK)
        st = ts_model_compile(model);
    CHECK_OK(st, "compile %s", what);
    if (st != TS_OK) {
        ts_model_free(model);
        return NULL;
    }
    return model;
}

/* One run on inputs "x" and "labels". */
static inline int run(ts_model *model, const ts_array *x, const ts_array *y, const char *what)
{
    const char *names[2] = {"x", "labels"};
    ts_array in[2] = {*x, *y};
    ts_status st = ts_model_run(model, names, in, 2);
    CHECK_OK(st, "run %s", what);
    return st == TS_OK;
}

/* Compares anchor `short_name` (or its sample `sample` when >= 0, for ALL
 * anchors) with `want`. */
static inline void expect_anchor(const ts_model *model, const char *short_name, int sample, const ts_array *want, double rtol,
                                 double atol, const char *label)
{
    ts_array got;
    if (!want)
        return;
    ts_status st = ts_model_anchored(model, short_name, &got);
    if (st != TS_OK) {
        CHECK_OK(st, "anchored %s", short_name);
        return;
    }
    if (sample >= 0) { /* drop the leading sample axis */
        if (got.ndim < 1 || got.shape[0] <= sample || got.dtype != TS_F32) {
            CHECK(0, "%s has a sample %d", short_name, sample);
            return;
        }
        int64_t per = 1;
        for (int d = 1; d < got.ndim; d++)
            per *= got.shape[d];
        ts_array s = got;
        s.ndim = got.ndim - 1;
        memmove(s.shape, got.shape + 1, sizeof(int64_t) * (size_t)s.ndim);
        s.data = (float *)got.data + per * sample;
        got = s;
    }
    CHECK_RESULT(ts_expect_array_close(label, &got, want, rtol, atol));
}

/* The trajectory's inputs: MNIST test images [first, first+n) of
 * <source_dir>/data/mnist as x [n,1,28,28] and labels [n] (views into *ds,
 * which the caller frees), the labels checked against the fixture's `labels`
 * and the first `batch` images against the fixture's batch `x0` (the
 * loader's normalisation is PyTorch's). 0 with a failed check if missing. */
static inline int trajectory_inputs(const char *source_dir, const ts_array *x0, const ts_array *labels, int64_t first, int64_t n,
                                    int64_t batch, ts_dataset **ds, ts_array *xin, ts_array *yin)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/data/mnist", source_dir);
    *ds = NULL;
    ts_status st = ts_dataset_load_mnist(ds, dir);
    CHECK_OK(st, "load MNIST from %s", dir);
    if (st != TS_OK)
        return 0;
    ts_array images, ys;
    st = ts_dataset_arrays(*ds, &images, &ys);
    CHECK_OK(st, "dataset arrays");
    if (st != TS_OK || ts_dataset_size(*ds) < first + n) {
        CHECK(0, "MNIST test set has %lld >= %lld images", (long long)ts_dataset_size(*ds), (long long)(first + n));
        return 0;
    }
    ts_array head = images;
    head.shape[0] = batch;
    CHECK_RESULT(ts_expect_array_close("dataset images[0:batch] vs fixture x", &head, x0, 0, 1e-6));
    const int32_t *yl = (const int32_t *)ys.data + first, *yw = labels->data;
    int same = ts_array_numel(labels) == n;
    for (int64_t i = 0; same && i < n; i++)
        same = yl[i] == yw[i];
    CHECK(same, "dataset labels[%lld:%lld] equal traj/labels", (long long)first, (long long)(first + n));
    int64_t per = images.shape[1] * images.shape[2] * images.shape[3];
    int64_t xs[4] = {n, images.shape[1], images.shape[2], images.shape[3]}, lsh[1] = {n};
    *xin = ts_array_f32((float *)images.data + first * per, 4, xs);
    *yin = ts_array_i32((int32_t *)ys.data + first, 1, lsh);
    return 1;
}

#endif
