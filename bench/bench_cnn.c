/* bench_cnn.c -- training of convolutional networks, plain and observed.
 *
 *     bench_cnn train   MODEL BATCH [STEPS [WARMUP [THREADS]]]
 *     bench_cnn observe MODEL BATCH [STEPS [WARMUP [THREADS [REPS]]]]
 *     bench_cnn stability MODEL BATCH [STEPS [WARMUP [THREADS [REPS]]]]
 *
 * MODEL
 *   lenet   the LeNet+BN of `tensorscope train --model cnn` on 1x28x28
 *           (tests/support/cnn.c), NLL loss
 *   resnet  a small ResNet on 3x32x32: stem conv3x3 16 + BN + ReLU, three
 *           stages of one basic block (16, 32, 64 channels; the 2nd and 3rd
 *           stride 2 with a 1x1 conv + BN shortcut), global average pool,
 *           fc 10, cross entropy
 * Both train with SGD lr 0.01 momentum 0.9 on a pool of 8 random batches
 * (x ~ U(-1,1), labels 0..9), as bench/torch_cnn.py does.
 *
 * train prints one line like bench_mlp's:
 * `tensorscope model=M batch=B threads=T steps=N ms_per_step=.. samples_per_s=.. gflops=.. peak_rss_mb=..`
 * observe times plain against observed training in one process, interleaved
 * (as bench_observe.c; REPS default 7): observed = TS_WATCH_STATS every run
 * on every op output, every parameter gradient and every updated parameter,
 * and prints role=base / role=cand lines and overhead_report's `overhead pct=..`;
 * stability the same with every stability signal of every layer taken every
 * run instead (ts_options_watch_stability "*").
 * GFLOP/s: ts_model_flops_per_microbatch (convs and matmuls 2 flops a MAC,
 * backward counted as twice the forward; torch_cnn.py uses the same count
 * of the same layers). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench_common.h"
#include "cnn.h"
#include "tensorscope.h"

enum { POOL = 8, MAX_REPS = 1024 };

static int fail(const char *what)
{
    fprintf(stderr, "bench_cnn: %s: %s\n", what, ts_last_error());
    return 1;
}

/* conv3x3 (stride s, pad 1, no bias) + batch norm, named <name> and <name>_bn */
static ts_tensor *conv_bn(ts_graph *g, ts_tensor *x, int64_t oc, int k, int s, const char *name)
{
    char bn[96];
    int p = k / 2;
    ts_conv2d_params cp = {.stride_h = s, .stride_w = s, .pad_top = p, .pad_bottom = p, .pad_left = p, .pad_right = p};
    snprintf(bn, sizeof bn, "%s_bn", name);
    return ts_batch_norm_layer(g, ts_conv2d_layer(g, x, oc, k, k, &cp, 0, name), bn);
}

static ts_tensor *basic_block(ts_graph *g, ts_tensor *x, int64_t oc, int stride, const char *name)
{
    char n1[64], n2[64], ns[64];
    snprintf(n1, sizeof n1, "%s_conv1", name);
    snprintf(n2, sizeof n2, "%s_conv2", name);
    snprintf(ns, sizeof ns, "%s_down", name);
    ts_tensor *h = ts_relu(g, conv_bn(g, x, oc, 3, stride, n1));
    h = conv_bn(g, h, oc, 3, 1, n2);
    ts_tensor *sc = stride == 1 ? x : conv_bn(g, x, oc, 1, stride, ns);
    return ts_relu(g, ts_add(g, h, sc));
}

static ts_graph *resnet(long batch, ts_tensor **loss)
{
    ts_graph *g = ts_graph_new(0);
    int64_t xs[] = {batch, 3, 32, 32}, ys[] = {batch};
    ts_tensor *x = ts_input(g, "x", TS_F32, 4, xs);
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, ys);
    ts_tensor *h = ts_relu(g, conv_bn(g, x, 16, 3, 1, "stem"));
    h = basic_block(g, h, 16, 1, "stage1");
    h = basic_block(g, h, 32, 2, "stage2");
    h = basic_block(g, h, 64, 2, "stage3");
    h = ts_flatten(g, ts_global_avg_pool2d(g, h), 1);
    *loss = ts_cross_entropy(g, ts_linear(g, h, CLASSES, "fc"), y);
    ts_tensor_set_name(*loss, "loss");
    return g;
}

typedef struct bench {
    const char *model;
    long batch, threads;
    int64_t xs[4], ys[1];
    float *x;
    int32_t *y;
} bench;

typedef struct side {
    ts_graph *g;
    ts_options *o;
    ts_model *m;
} side;

static bool stability; /* `stability`: the observed side takes every stability signal instead */

static ts_status side_new(side *s, const bench *b, int observed)
{
    ts_tensor *loss = NULL;
    memset(s, 0, sizeof *s);
    if (strcmp(b->model, "resnet") == 0) {
        s->g = resnet(b->batch, &loss);
    } else {
        cnn c;
        test_cnn_build(&c, b->batch, 0);
        s->g = c.g, loss = c.loss;
    }
    ts_status st = ts_graph_status(s->g);
    if (st)
        return st;
    s->o = ts_options_new();
    ts_options_set_threads(s->o, (int)b->threads);
    if (observed && stability) /* every layer's signals, every parameter's */
        st = ts_options_watch_stability(s->o, "*", 1);
    else if (observed) /* every op output, every parameter gradient and update */
        st = bench_watch_all(s->g, s->o, 0);
    if (st)
        return st;
    st = ts_model_training(&s->m, s->g, loss, s->o, ts_sgd(0.01f, 0.9f, 0.0f));
    return st ? st : ts_model_compile(s->m);
}

static void side_free(side *s)
{
    ts_model_free(s->m);
    ts_options_free(s->o);
    ts_graph_free(s->g);
}

static double train(ts_model *m, const bench *b, long first, long n)
{
    static const char *const names[2] = {"x", "labels"};
    int64_t per = b->xs[1] * b->xs[2] * b->xs[3] * b->batch;
    double t0 = now_s();
    for (long s = first; s < first + n; s++) {
        long k = s % POOL;
        ts_array in[2] = {ts_array_f32(b->x + k * per, 4, b->xs), ts_array_i32(b->y + k * b->batch, 1, b->ys)};
        if (ts_model_run(m, names, in, 2))
            return -1;
    }
    return now_s() - t0;
}

int main(int argc, char **argv)
{
    const char *env_threads = getenv("TS_BENCH_THREADS");
    if (argc < 4 || (strcmp(argv[1], "train") && strcmp(argv[1], "observe") && strcmp(argv[1], "stability")) ||
        (strcmp(argv[2], "lenet") && strcmp(argv[2], "resnet"))) {
        fprintf(stderr, "usage: bench_cnn train|observe|stability lenet|resnet BATCH [STEPS [WARMUP [THREADS [REPS]]]]\n");
        return 2;
    }
    stability = strcmp(argv[1], "stability") == 0;
    bool observe = stability || strcmp(argv[1], "observe") == 0;
    bench b = {.model = argv[2], .batch = arg_or(argc, argv, 3, 64)};
    long steps = arg_or(argc, argv, 4, 20), warmup = arg_or(argc, argv, 5, 3), reps = arg_or(argc, argv, 7, 7);
    b.threads = arg_or(argc, argv, 6, env_threads ? strtol(env_threads, NULL, 10) : 2);
    if (b.batch < 1 || steps < 1 || warmup < 0 || b.threads < 0 || reps < 1 || reps > MAX_REPS) {
        fprintf(stderr, "bench_cnn: bad sizes\n");
        return 2;
    }
    bool res = strcmp(b.model, "resnet") == 0;
    int64_t xs[4] = {b.batch, res ? 3 : 1, res ? 32 : 28, res ? 32 : 28};
    memcpy(b.xs, xs, sizeof xs);
    b.ys[0] = b.batch;
    size_t per = (size_t)(xs[0] * xs[1] * xs[2] * xs[3]);
    if (!bench_random_data(per * POOL, (size_t)b.batch * POOL, &b.x, &b.y))
        return fail("out of memory");

    side sides[2];
    int n_sides = observe ? 2 : 1;
    for (int k = 0; k < n_sides; k++)
        if (side_new(&sides[k], &b, k == 1))
            return fail("compile");
    double secs[2][MAX_REPS];
    long n_reps = observe ? reps : 1;
    for (int k = 0; k < n_sides; k++)
        if (train(sides[k].m, &b, 0, warmup) < 0)
            return fail("run");
    for (long r = 0; r < n_reps; r++)
        for (int i = 0; i < n_sides; i++) {
            int k = (int)((r + i) % n_sides);
            secs[k][r] = train(sides[k].m, &b, warmup + r * steps, steps);
            if (secs[k][r] < 0)
                return fail("run");
        }
    double flops = ts_model_flops_per_microbatch(sides[0].m);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    if (!observe) {
        double ms = secs[0][0] * 1e3 / (double)steps;
        printf("tensorscope model=%s batch=%ld threads=%ld steps=%ld ms_per_step=%.4f samples_per_s=%.1f gflops=%.3f peak_rss_mb=%.1f\n",
               b.model, b.batch, b.threads, steps, ms, (double)b.batch * 1e3 / ms, flops / ms * 1e-6, (double)ru.ru_maxrss / 1024.0);
    } else {
        const char *const impl[2] = {"ts-plain", stability ? "ts-stability" : "ts-watch"};
        const ts_watch_result *w;
        size_t nw = 0;
        ts_model_watch_results(sides[1].m, &w, &nw);
        double ratio[MAX_REPS], best[2];
        for (long r = 0; r < n_reps; r++) /* pairs first: median() sorts secs */
            ratio[r] = secs[1][r] / secs[0][r];
        for (int k = 0; k < 2; k++) {
            double med = median(secs[k], n_reps) / (double)steps; /* sorted now */
            best[k] = secs[k][0] / (double)steps;
            printf("%s role=%s model=%s batch=%ld threads=%ld steps=%ld reps=%ld watched=%zu ms_per_step=%.4f best_ms=%.4f worst_ms=%.4f "
                   "samples_per_s=%.1f gflops=%.3f\n",
                   impl[k], k ? "cand" : "base", b.model, b.batch, b.threads, steps, n_reps, k ? nw : 0, med * 1e3, best[k] * 1e3,
                   secs[k][n_reps - 1] / (double)steps * 1e3, (double)b.batch / med, flops / med * 1e-9);
        }
        overhead_report(ratio, n_reps, best[0], best[1]);
    }
    for (int k = 0; k < n_sides; k++)
        side_free(&sides[k]);
    free(b.x);
    free(b.y);
    return 0;
}
