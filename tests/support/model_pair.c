/* model_pair.c -- the built-in models built twice for the comparison tests
 * (model_pair.h). */
#include "model_pair.h"

#include "cnn.h"
#include "graph/graph.h"
#include "mlp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *pair_device(const char *test) {
    const char *device = getenv("TS_TEST_DEVICE");
    if (!device || !*device) device = "cuda";
    ts_options *probe = ts_options_new();
    ts_model *pm = NULL;
    ts_graph *pg = ts_graph_new(1);
    ts_status st = ts_options_set_device(probe, device);
    if (!st) st = ts_model_training(&pm, pg, ts_sum(pg, ts_param(pg, "p", 1, (int64_t[]){4})), probe, ts_sgd(0.1f, 0, 0));
    ts_model_free(pm);
    ts_graph_free(pg);
    ts_options_free(probe);
    if (st == TS_ERR_UNSUPPORTED) {
        printf("%s skipped: %s\n", test, ts_last_error());
        return NULL;
    }
    return device; /* any other failure shows in the test's first model */
}

/* x: nx uniform [0, 1) values, or class ids below `classes`; y: ny ids */
static ts_status fill(model_pair *p, int64_t nx, int64_t ny, int32_t classes, bool x_ids, uint64_t seed) {
    float *x = malloc((size_t)nx * sizeof(float));
    int32_t *y = malloc((size_t)ny * sizeof(int32_t));
    p->in[0].data = x, p->in[1].data = y;
    if (!x || !y) return TS_ERR_OUT_OF_MEMORY;
    uint64_t s = seed;
    for (int64_t i = 0; i < nx + ny; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(s >> 11) * 0x1.0p-53;
        if (i >= nx) y[i - nx] = (int32_t)(u * classes);
        else if (x_ids) ((int32_t *)(void *)x)[i] = (int32_t)(u * classes);
        else x[i] = (float)u;
    }
    return TS_OK;
}

static ts_status build_mlp(ts_graph **g, ts_tensor **loss, int64_t batch) {
    mlp m;
    ts_status st = test_mlp_build(&m, batch, 7);
    *g = m.g, *loss = m.loss;
    return st;
}

static ts_status build_cnn(ts_graph **g, ts_tensor **loss, int64_t batch) {
    cnn m;
    ts_status st = test_cnn_build(&m, batch, 11);
    *g = m.g, *loss = m.loss;
    return st;
}

/* a model of 28x28 images and class labels, twice */
static ts_status pair_images(model_pair *p, const char *name, ts_status (*build)(ts_graph **, ts_tensor **, int64_t), int64_t batch,
                             int64_t samples, uint64_t seed) {
    memset(p, 0, sizeof *p);
    p->name = name;
    for (int k = 0; k < 2; k++) {
        ts_status st = build(&p->g[k], &p->loss[k], batch);
        if (st) return st;
    }
    p->in_names[0] = "x", p->in_names[1] = "labels";
    p->in[0] = ts_array_f32(NULL, 4, (int64_t[]){samples, 1, 28, 28});
    p->in[1] = ts_array_i32(NULL, 1, (int64_t[]){samples});
    return fill(p, samples * 784, samples, 10, false, seed);
}

ts_status pair_mlp(model_pair *p, int64_t batch, int64_t samples, uint64_t seed) { return pair_images(p, "mlp", build_mlp, batch, samples, seed); }
ts_status pair_cnn(model_pair *p, int64_t batch, int64_t samples, uint64_t seed) { return pair_images(p, "cnn", build_cnn, batch, samples, seed); }

ts_status pair_gpt(model_pair *p, uint64_t seed) {
    memset(p, 0, sizeof *p);
    p->name = "gpt";
    ts_gpt_config cfg = {.vocab = 65, .block_size = 16, .layers = 2, .heads = 2, .embd = 32, .batch = 4};
    ts_gpt m;
    for (int k = 0; k < 2; k++) {
        p->g[k] = ts_graph_new(3);
        if (!p->g[k]) return TS_ERR_OUT_OF_MEMORY;
        ts_status st = ts_gpt_build(p->g[k], &cfg, &m);
        if (st) return st;
        p->loss[k] = m.loss;
    }
    p->in_names[0] = ts_tensor_name(m.tokens), p->in_names[1] = ts_tensor_name(m.targets);
    p->in[0] = ts_array_i32(NULL, 2, (int64_t[]){4, 16});
    p->in[1] = ts_array_i32(NULL, 2, (int64_t[]){4, 16});
    return fill(p, 64, 64, 65, true, seed);
}

void pair_free(model_pair *p) {
    free(p->in[0].data), free(p->in[1].data);
    ts_graph_free(p->g[0]), ts_graph_free(p->g[1]);
    memset(p, 0, sizeof *p);
}

double pair_weights_error(const model_pair *p, char *worst, size_t n) {
    double err = 0;
    const ts_graph *a = p->g[0], *b = p->g[1];
    for (size_t i = 0; i < a->n; i++) {
        const ts_tensor *x = a->t[i], *y = b->t[i];
        if ((x->op != TS_OP_PARAM && x->op != TS_OP_BUFFER) || !x->value) continue;
        double d = 0, mag = 0;
        for (int64_t k = 0; k < ts_shape_numel(&x->shape); k++) {
            d = fmax(d, fabs((double)x->value[k] - (double)y->value[k]));
            if (isnan((double)x->value[k]) != isnan((double)y->value[k])) d = INFINITY;
            mag = fmax(mag, fabs((double)x->value[k]));
        }
        if (d / (mag + 1e-6) > err) {
            err = d / (mag + 1e-6);
            snprintf(worst, n, "%s", x->name);
        }
    }
    return err;
}
