/* test_device_path.c -- what a device whose memory the host cannot read
 * keeps in step with the host (compile/device.c, exec/device.c), each
 * against the same sequence on the CPU:
 *  - a training model and an inference model of one graph: the inference
 *    model sees the weights the training model's last run brought back;
 *  - ts_param_set between runs reaches the device before the next run;
 *  - a recompile (a new anchor) keeps Adam's moments, which live on the
 *    device between runs;
 *  - a checkpoint saved from the device and loaded into a new model, or
 *    back into the model that has run since, trains on as the CPU's does.
 *  - the parameters stay on the device between runs: nothing of them
 *    crosses after a run; the first read brings them back, once; a model
 *    freed before anyone read them leaves them on the host.
 *  - the device's memory as its backend counts it (ts_model_memory_get):
 *    a model's buffers held while it lives and given back when it is
 *    freed, the peak kept.
 * The device is TS_TEST_DEVICE ("cpu-staged" unless set: the device path
 * on the CPU; test_device_path_cuda runs it on a GPU, where
 * ts_device_describe's line is checked too). No such device: exits 77
 * saying why. */
#include "check.h"
#include "report.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define B 8

typedef struct net {
    ts_graph *g;
    ts_tensor *x, *y, *logits, *loss, *w1;
} net;

static void build(net *n) {
    n->g = ts_graph_new(21);
    n->x = ts_input(n->g, "x", TS_F32, 2, (int64_t[]){B, 6});
    n->y = ts_input(n->g, "labels", TS_I32, 1, (int64_t[]){B});
    ts_tensor *h = ts_relu(n->g, ts_linear(n->g, n->x, 16, "fc1"));
    n->logits = ts_linear(n->g, h, 4, "fc2");
    n->loss = ts_cross_entropy(n->g, n->logits, n->y);
    ts_tensor_set_name(n->loss, "loss");
    n->w1 = ts_graph_find(n->g, "fc1.weight");
}

static float xs[B * 6];
static int32_t ys[B];
static const char *names[2] = {"x", "labels"};

static ts_status train(ts_model *m, int runs) {
    ts_array in[2] = {ts_array_f32(xs, 2, (int64_t[]){B, 6}), ts_array_i32(ys, 1, (int64_t[]){B})};
    ts_status st = TS_OK;
    for (int r = 0; !st && r < runs; r++) st = ts_model_run(m, names, in, 2);
    return st;
}

static ts_model *model(net *n, const char *device, bool training) {
    ts_options *o = ts_options_new();
    ts_model *m = NULL;
    ts_status st = ts_options_set_device(o, device);
    if (!st && training) st = ts_model_training(&m, n->g, n->loss, o, ts_adam(0.01f));
    else if (!st) st = ts_model_inference(&m, n->g, &n->logits, 1, o);
    ts_options_free(o);
    if (st) printf("model on %s: %s\n", device, ts_last_error());
    return m;
}

/* logits of an inference model of n on `device` */
static bool infer(net *n, const char *device, float *out) {
    ts_model *m = model(n, device, false);
    ts_array in[1] = {ts_array_f32(xs, 2, (int64_t[]){B, 6})}, a;
    bool ok = m && !ts_model_run(m, names, in, 1) && !ts_model_anchored(m, ts_tensor_name(n->logits), &a);
    if (ok) memcpy(out, a.data, sizeof(float) * B * 4);
    ts_model_free(m);
    return ok;
}

static double max_rel(const float *a, const float *b, int64_t k) {
    double d = 0, mag = 0;
    for (int64_t i = 0; i < k; i++) {
        d = fmax(d, fabs((double)a[i] - (double)b[i]));
        mag = fmax(mag, fabs((double)a[i]));
    }
    return isnan(d) ? INFINITY : d / (mag + 1e-6);
}

static double weights_rel(const net *a, const net *b) {
    double e = 0;
    for (size_t i = 0; i < ts_graph_tensor_count(a->g); i++) {
        ts_array va, vb;
        if (ts_tensor_info(ts_graph_tensor_at(a->g, i), &va) || !va.data) continue;
        ts_tensor_info(ts_graph_tensor_at(b->g, i), &vb);
        e = fmax(e, max_rel(va.data, vb.data, ts_array_numel(&va)));
    }
    return e;
}

/* How many times the parameters came back from a device so far. */
static long long fetches(void) {
    char *r = ts_metrics_report();
    long long n = 0;
    double ns = 0;
    if (!r || !report_timing(r, "ValuesToHost", &n, &ns)) n = 0;
    ts_string_free(r);
    return n;
}

/* The parameters come back when read, not after every run. */
static void lazy_values(const char *dev) {
    net c, d;
    build(&c), build(&d);
    ts_model *tc = model(&c, "cpu", true), *td = model(&d, dev, true);
    CHECK(tc && td, "training models on cpu and %s", dev);
    if (!tc || !td) return;
    long long f0 = fetches();
    CHECK_OK(train(tc, 3), "3 runs on the CPU");
    CHECK_OK(train(td, 3), "3 runs on %s", dev);
    CHECK(fetches() == f0, "3 runs on %s brought no parameters back (%lld times)", dev, fetches() - f0);
    CHECK(weights_rel(&c, &d) <= 1e-5, "read after the runs, the weights agree (%.3g)", weights_rel(&c, &d));
    CHECK(fetches() == f0 + 1, "the first read brought them back once for every parameter (%lld times)", fetches() - f0);
    ts_array a;
    CHECK_OK(ts_tensor_info(d.w1, &a), "read again");
    CHECK(fetches() == f0 + 1, "a second read without a run between brings nothing (%lld times)", fetches() - f0);
    CHECK_OK(train(tc, 2), "2 more runs on the CPU");
    CHECK_OK(train(td, 2), "2 more runs on %s", dev);
    ts_model_free(td); /* nobody read them since the runs */
    CHECK(weights_rel(&c, &d) <= 1e-5, "a model freed before its values were read left them on the host (%.3g)", weights_rel(&c, &d));
    ts_model_free(tc);
    ts_graph_free(c.g), ts_graph_free(d.g);
}

/* ts_options_set_allow_tf32: the product of an inference model with and
 * without it on dev; the CPU's (cpu-staged) the same either way, a GPU's
 * within TF32's rounding of each other. */
static void tf32(const char *dev) {
    enum { M = 64, K = 512, N = 64 };
    ts_graph *g = ts_graph_new(7);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){M, K});
    ts_tensor *y = ts_linear(g, x, N, "fc");
    static float xv[M * K], out[2][M * N];
    for (int i = 0; i < M * K; i++) xv[i] = (float)sin(0.37 * i) * 1.3f;
    const char *xn[1] = {"x"};
    ts_array in[1] = {ts_array_f32(xv, 2, (int64_t[]){M, K})};
    for (int allow = 0; allow < 2; allow++) {
        ts_options *o = ts_options_new();
        ts_model *m = NULL;
        ts_array a;
        ts_status st = ts_options_set_device(o, dev);
        if (!st) st = ts_options_set_allow_tf32(o, allow);
        if (!st) st = ts_model_inference(&m, g, &y, 1, o);
        if (!st) st = ts_model_run(m, xn, in, 1);
        if (!st) st = ts_model_anchored(m, ts_tensor_name(y), &a);
        if (!st) memcpy(out[allow], a.data, sizeof out[allow]);
        CHECK_OK(st, "a %d x %d x %d product on %s, allow_tf32 %d", M, K, N, dev, allow);
        ts_model_free(m);
        ts_options_free(o);
    }
    double d = max_rel(out[0], out[1], M * N);
    if (!strncmp(dev, "cuda", 4)) CHECK(d <= 1e-2, "on %s TF32's products are within 1e-2 of float32's (%.3g apart)", dev, d);
    else CHECK(d == 0, "on %s allow_tf32 changes nothing (%.3g apart)", dev, d);
    ts_options *o = ts_options_new();
    CHECK(ts_options_set_allow_tf32(o, 2) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "0 or 1"), "allow_tf32 2 refused: %s",
          ts_last_error());
    ts_options_free(o);
    ts_graph_free(g);
}

/* The same steps on both devices: cpu, then dev. */
static void scenario(const char *dev) {
    net c, d;
    build(&c), build(&d);
    ts_model *tc = model(&c, "cpu", true), *td = model(&d, dev, true);
    CHECK(tc && td, "training models on cpu and %s", dev);
    if (!tc || !td) return;
    CHECK_OK(train(tc, 3), "3 runs on the CPU");
    CHECK_OK(train(td, 3), "3 runs on %s", dev);
    CHECK(weights_rel(&c, &d) <= 1e-5, "the weights the runs brought back agree (%.3g)", weights_rel(&c, &d));

    /* ts_param_set between runs reaches the device */
    float w[16 * 6];
    for (int i = 0; i < 16 * 6; i++) w[i] = 0.01f * (float)(i % 13) - 0.05f;
    ts_array wa = ts_array_f32(w, 2, (int64_t[]){16, 6});
    CHECK_OK(ts_param_set(c.w1, &wa), "fc1.weight set on the CPU's graph");
    CHECK_OK(ts_param_set(d.w1, &wa), "fc1.weight set on %s's graph", dev);
    CHECK_OK(train(tc, 2), "2 more runs on the CPU");
    CHECK_OK(train(td, 2), "2 more runs on %s", dev);
    CHECK(weights_rel(&c, &d) <= 1e-5, "trained on from the weights set (%.3g)", weights_rel(&c, &d));

    /* an inference model of the same graph sees them */
    float lc[B * 4], ld[B * 4];
    CHECK(infer(&c, "cpu", lc) && infer(&d, dev, ld), "inference models of the trained graphs");
    CHECK(max_rel(lc, ld, B * 4) <= 1e-5, "the inference model on %s sees the trained weights (%.3g)", dev, max_rel(lc, ld, B * 4));

    /* a recompile keeps Adam's moments */
    CHECK_OK(ts_model_anchor(tc, "h", "fc1/Add:0", TS_OUTPUT_FINAL, 0), "an anchor recompiles the CPU model");
    CHECK_OK(ts_model_anchor(td, "h", "fc1/Add:0", TS_OUTPUT_FINAL, 0), "an anchor recompiles the %s model", dev);
    CHECK_OK(train(tc, 2), "2 runs after the recompile on the CPU");
    CHECK_OK(train(td, 2), "2 runs after the recompile on %s", dev);
    CHECK(weights_rel(&c, &d) <= 1e-5, "Adam's moments survived the recompile (%.3g)", weights_rel(&c, &d));

    /* a checkpoint from the device trains on as the CPU's */
    char pc[64], pd[64];
    snprintf(pc, sizeof pc, "/tmp/ts_devpath_%d_cpu.tsck", (int)getpid());
    snprintf(pd, sizeof pd, "/tmp/ts_devpath_%d_dev.tsck", (int)getpid());
    CHECK_OK(ts_checkpoint_save(pc, tc, NULL), "checkpoint of the CPU model");
    CHECK_OK(ts_checkpoint_save(pd, td, NULL), "checkpoint of the %s model", dev);
    net c2, d2;
    build(&c2), build(&d2);
    ts_model *tc2 = model(&c2, "cpu", true), *td2 = model(&d2, dev, true);
    if (tc2 && td2) {
        CHECK_OK(ts_model_compile(tc2), "a new CPU model compiled");
        CHECK_OK(ts_model_compile(td2), "a new %s model compiled", dev);
        CHECK_OK(ts_checkpoint_load(pc, tc2, NULL), "the CPU checkpoint loaded");
        CHECK_OK(ts_checkpoint_load(pd, td2, NULL), "the %s checkpoint loaded into a new model on %s", dev, dev);
        CHECK_OK(train(tc2, 2), "2 runs from the CPU checkpoint");
        CHECK_OK(train(td2, 2), "2 runs from the %s checkpoint", dev);
        CHECK(weights_rel(&c2, &d2) <= 1e-5, "trained on from the checkpoints alike (%.3g)", weights_rel(&c2, &d2));
        CHECK_OK(train(tc, 2), "the first CPU model trains on");
        CHECK(weights_rel(&c, &c2) <= 1e-6, "a CPU model restored from its checkpoint trains as the one that wrote it (%.3g)",
              weights_rel(&c, &c2));
        /* back to the checkpoint in a model that has run since: its state
         * on the device is replaced too */
        CHECK_OK(train(td, 2), "the first %s model trains on", dev);
        CHECK_OK(ts_checkpoint_load(pc, tc, NULL), "the CPU model back to its checkpoint");
        CHECK_OK(ts_checkpoint_load(pd, td, NULL), "the %s model back to its checkpoint", dev);
        CHECK_OK(train(tc, 2), "2 runs from there on the CPU");
        CHECK_OK(train(td, 2), "2 runs from there on %s", dev);
        CHECK(weights_rel(&c, &d) <= 1e-5, "both went back to their checkpoints, optimizer state too (%.3g)", weights_rel(&c, &d));
    }
    unlink(pc), unlink(pd);
    ts_model_free(tc2), ts_model_free(td2), ts_model_free(tc), ts_model_free(td);
    ts_graph_free(c.g), ts_graph_free(d.g), ts_graph_free(c2.g), ts_graph_free(d2.g);
}

/* What ts_device_describe and ts_gpus_describe say of a GPU: its name,
 * compute capability and memory, in the list of every GPU. */
static void describe_gpu(const char *dev) {
    char line[512] = "", all[8192] = "", gpu[256] = "";
    int count = 0, cc = 0;
    double total = 0;
    CHECK_OK(ts_device_describe(dev, line, sizeof line), "ts_device_describe(%s)", dev);
    printf("%s\n", line);
    const char *name = strstr(line, ": "), *sm = strstr(line, ", sm_");
    CHECK(name && sm && sm > name + 2, "the line names the GPU before its compute capability: '%s'", line);
    if (name && sm && sm > name) snprintf(gpu, sizeof gpu, "%.*s", (int)(sm - name), name); /* ": NVIDIA H200" */
    CHECK(sm && sscanf(sm, ", sm_%d, %lf GiB", &cc, &total) == 2 && cc >= 30 && total > 0,
          "a compute capability (sm_%d) and a positive memory (%.1f GiB)", cc, total);
    CHECK(strstr(line, "driver ") && strstr(line, "runtime ") && strstr(line, "cuBLAS "), "the driver's, runtime's and cuBLAS's versions");
    CHECK_OK(ts_gpus_describe(all, sizeof all, &count), "ts_gpus_describe");
    CHECK(count >= 1 && strstr(all, "cuda:0: ") && gpu[0] && strstr(all, gpu), "every GPU listed (%d), the one described among them:\n%s",
          count, all);
}

/* What the device holds, with a second model and after it is freed. */
static void device_memory(const char *dev) {
    net a, b;
    build(&a), build(&b);
    ts_model *ma = model(&a, dev, true), *mb = NULL;
    ts_model_memory one = {0}, two = {0}, after = {0};
    ts_status st = ma ? train(ma, 1) : TS_ERR_INTERNAL;
    if (!st) st = ts_model_memory_get(ma, &one);
    CHECK_OK(st, "a model on %s trained, its memory read", dev);
    int64_t own = one.parameters + one.gradients + one.optimizer_state + one.activations;
    CHECK(one.device_total > 0 && one.device_free <= one.device_total && one.device_in_use >= own && one.device_peak >= one.device_in_use,
          "%s holds %lld bytes (peak %lld) of %lld: at least the model's own %lld", dev, (long long)one.device_in_use,
          (long long)one.device_peak, (long long)one.device_total, (long long)own);
    mb = model(&b, dev, true);
    st = mb ? train(mb, 1) : TS_ERR_INTERNAL;
    if (!st) st = ts_model_memory_get(ma, &two);
    CHECK(!st && two.device_in_use >= one.device_in_use + own && two.device_peak >= two.device_in_use,
          "a second model: %lld bytes held (+%lld), the peak %lld", (long long)two.device_in_use,
          (long long)(two.device_in_use - one.device_in_use), (long long)two.device_peak);
    ts_model_free(mb);
    st = ts_model_memory_get(ma, &after);
    CHECK(!st && two.device_in_use - after.device_in_use >= own && after.device_peak >= two.device_in_use,
          "the second model freed: %lld bytes given back, the peak kept (%lld)", (long long)(two.device_in_use - after.device_in_use),
          (long long)after.device_peak);
    ts_model_free(ma);
    ts_graph_free(a.g), ts_graph_free(b.g);
}

int main(void) {
    const char *dev = getenv("TS_TEST_DEVICE");
    if (!dev || !*dev) dev = "cpu-staged";
    if (ts_device_check(dev)) {
        printf("test_device_path skipped: %s\n", ts_last_error());
        return 77;
    }
    if (!strncmp(dev, "cuda", 4)) describe_gpu(dev);
    for (int i = 0; i < B * 6; i++) xs[i] = (float)((i * 37) % 17) / 8.0f - 1.0f;
    for (int i = 0; i < B; i++) ys[i] = (i * 7) % 4;
    scenario(dev);
    lazy_values(dev);
    tf32(dev);
    device_memory(dev);
    return check_summary("test_device_path");
}
