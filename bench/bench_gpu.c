/* bench_gpu.c -- training on a GPU, plain and observed, one row of
 * `make bench-gpu` (scripts/gpu-check.sh) per call:
 *
 *     bench_gpu ROW [STEPS [DEVICE]]
 *
 * ROW
 *   mlp32     the tutorial MLP 784-320-100-10 at batch 32, SGD momentum 0.9
 *   mlp1000   the same at batch 1000
 *   lenet64   LeNet+BN (tests/support/cnn.c) at batch 64, Adam
 *   gpt128    the char GPT: 4 layers, 4 heads, 128 channels, T 64, B 32,
 *             vocabulary 65, AdamW
 *   gpt2      GPT-2 small's size: 12 layers, 12 heads, 768 channels,
 *             T 1024, B 8, vocabulary 50304, AdamW (random tokens)
 *   ROW_tf32  ROW with float32 products in TF32 (ts_options_set_allow_tf32)
 * Each step is one ts_model_run (one micro-batch, one optimizer step) on
 * random data; 3 warm-up steps, then STEPS (default 20) timed, plain,
 * observed and plain call by call interleaved in blocks of 5; observed =
 * TS_WATCH_STATS every step on every tensor (activations, gradients,
 * updated weights), the summaries read after each step
 * (ts_model_watch_results, as PyTorch's hooks .item() theirs); call by
 * call = each step's kernels launched one by one rather than replayed as
 * one CUDA graph (TS_CUDA_GRAPHS=0). Prints
 *   tensorscope row=R device=D ms_per_step=M (median) spread=S observed_ms_per_step=O overhead_pct=P
 *     call_by_call_ms_per_step=C graph_replays=N (all the process's) peak_mb=K
 *     summary_mb_per_step=B (what the observed step's summaries read)
 * K: the device memory tensorscope held at most by the end of the plain
 * model's warm-up (before the others exist), cuBLAS's workspace included.
 * torch_gpu.py prints the same rows for PyTorch on the same GPU (its
 * peak_mb: torch.cuda.max_memory_allocated).
 * BENCH_GPU_PROFILE=1: then STEPS more of each model alone, each followed
 * by the metrics report of its steps on stderr (where a step's time goes:
 * DeviceTime.CopyToDevice, .Run and .CopyToHost on the device's clock,
 * DeviceWait and ExecuteTime on the host's). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cnn.h"
#include "mlp.h"
#include "tensorscope.h"

static uint64_t rng = 88172645463325252ull;
static float u01(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) * 0x1.0p-53);
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int fail(const char *what) {
    fprintf(stderr, "bench_gpu: %s: %s\n", what, ts_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_gpu mlp32|mlp1000|lenet64|gpt128|gpt2 [STEPS [DEVICE]]\n");
        return 2;
    }
    const char *device = argc > 3 ? argv[3] : "cuda";
    char row[32];
    snprintf(row, sizeof row, "%s", argv[1]);
    size_t len = strlen(row);
    bool tf32 = len > 5 && !strcmp(row + len - 5, "_tf32");
    if (tf32) row[len - 5] = 0;
    int steps = argc > 2 ? atoi(argv[2]) : 20;
    if (steps < 5) steps = 5;
    ts_graph *g = NULL;
    ts_tensor *loss = NULL;
    const char *names[2] = {"x", "labels"};
    ts_array in[2];
    ts_optimizer opt;
    int64_t nx, ny, classes = 10;
    bool tokens = false;
    if (!strcmp(row, "mlp32") || !strcmp(row, "mlp1000")) {
        int64_t B = row[3] == '3' ? 32 : 1000;
        mlp m;
        if (test_mlp_build(&m, B, 1)) return fail("building the MLP");
        g = m.g, loss = m.loss, nx = B * 784, ny = B, opt = ts_sgd(0.01f, 0.9f, 0);
        in[0] = ts_array_f32(NULL, 4, (int64_t[]){B, 1, 28, 28});
        in[1] = ts_array_i32(NULL, 1, (int64_t[]){B});
    } else if (!strcmp(row, "lenet64")) {
        cnn m;
        if (test_cnn_build(&m, 64, 1)) return fail("building LeNet");
        g = m.g, loss = m.loss, nx = 64 * 784, ny = 64, opt = ts_adam(1e-3f);
        in[0] = ts_array_f32(NULL, 4, (int64_t[]){64, 1, 28, 28});
        in[1] = ts_array_i32(NULL, 1, (int64_t[]){64});
    } else if (!strcmp(row, "gpt128") || !strcmp(row, "gpt2")) {
        bool big = !strcmp(row, "gpt2");
        ts_gpt_config c = big ? (ts_gpt_config){50304, 1024, 12, 12, 768, 8} : (ts_gpt_config){65, 64, 4, 4, 128, 32};
        ts_gpt gm;
        g = ts_graph_new(1);
        if (ts_gpt_build(g, &c, &gm)) return fail("building the GPT");
        loss = gm.loss, nx = ny = c.batch * c.block_size, classes = c.vocab, opt = ts_adamw(3e-4f, 0.1f), tokens = true;
        names[0] = ts_tensor_name(gm.tokens), names[1] = ts_tensor_name(gm.targets);
        in[0] = ts_array_i32(NULL, 2, (int64_t[]){c.batch, c.block_size});
        in[1] = ts_array_i32(NULL, 2, (int64_t[]){c.batch, c.block_size});
    } else {
        fprintf(stderr, "bench_gpu: unknown row '%s'\n", row);
        return 2;
    }
    void *x = malloc((size_t)nx * 4), *y = malloc((size_t)ny * 4);
    for (int64_t i = 0; i < nx; i++) {
        if (tokens) ((int32_t *)x)[i] = (int32_t)(u01() * (float)classes);
        else ((float *)x)[i] = 2.0f * u01() - 1.0f;
    }
    for (int64_t i = 0; i < ny; i++) ((int32_t *)y)[i] = (int32_t)(u01() * (float)classes);
    in[0].data = x, in[1].data = y;

    /* plain, observed, plain launched call by call (each step not recorded
     * as a CUDA graph: TS_CUDA_GRAPHS=0 while it runs) */
    ts_model *m[3] = {NULL, NULL, NULL};
    ts_model_memory mem;
    for (int k = 0; k < 3; k++) {
        ts_options *o = ts_options_new();
        if (!o || ts_options_set_device(o, device) || ts_options_set_allow_tf32(o, tf32)) return fail("options");
        if (k == 1 && ts_options_watch(o, "*", TS_WATCH_STATS, 1)) return fail("watching every tensor");
        if (ts_model_training(&m[k], g, loss, o, opt) || ts_model_compile(m[k])) return fail("compiling");
        ts_options_free(o);
        if (k == 2) setenv("TS_CUDA_GRAPHS", "0", 1);
        for (int w = 0; w < 3; w++)
            if (ts_model_run(m[k], names, in, 2)) return fail("warm-up step");
        unsetenv("TS_CUDA_GRAPHS");
        if (k == 0 && ts_model_memory_get(m[0], &mem)) return fail("memory"); /* the plain model's alone: the others come after */
    }
    double *t[3], read_sum = 0;
    for (int k = 0; k < 3; k++) t[k] = malloc(sizeof(double) * (size_t)steps);
    int64_t summary_bytes = ts_counter_get("SummaryBytes"); /* the observed model's alone: the others watch nothing */
    for (int s0 = 0; s0 < steps; s0 += 5)
        for (int k = 0; k < 3; k++) {
            if (k == 2) setenv("TS_CUDA_GRAPHS", "0", 1);
            for (int s = s0; s < s0 + 5 && s < steps; s++) {
                double a = now_ms();
                if (ts_model_run(m[k], names, in, 2)) return fail("step");
                if (k == 1) { /* the summaries read, as PyTorch's hooks .item() theirs */
                    const ts_watch_result *w = NULL;
                    size_t nw = 0;
                    if (ts_model_watch_results(m[k], &w, &nw)) return fail("watch results");
                    for (size_t i = 0; i < nw; i++) read_sum += w[i].summary->stats.mean;
                }
                t[k][s] = now_ms() - a;
            }
            unsetenv("TS_CUDA_GRAPHS");
        }
    summary_bytes = ts_counter_get("SummaryBytes") - summary_bytes;
    double med[3], spread[3];
    for (int k = 0; k < 3; k++) {
        qsort(t[k], (size_t)steps, sizeof(double), cmp);
        med[k] = t[k][steps / 2];
        spread[k] = t[k][steps * 9 / 10] - t[k][steps / 10];
    }
    printf("tensorscope row=%s device=%s ms_per_step=%.4f spread=%.4f observed_ms_per_step=%.4f overhead_pct=%.1f call_by_call_ms_per_step=%.4f "
           "graph_replays=%lld peak_mb=%.1f summary_mb_per_step=%.1f\n",
           argv[1], device, med[0], spread[0], med[1], 100.0 * (med[1] / med[0] - 1.0), med[2], (long long)ts_counter_get("GraphReplays"),
           (double)mem.device_peak / (1 << 20), (double)summary_bytes / steps / (1 << 20));
    if (!isfinite(read_sum)) fprintf(stderr, "bench_gpu: a summary's mean is not finite\n");
    const char *profile = getenv("BENCH_GPU_PROFILE");
    for (int k = 0; profile && *profile == '1' && k < 3; k++) {
        static const char *const what[3] = {"plain", "observed", "call by call"};
        if (k == 2) setenv("TS_CUDA_GRAPHS", "0", 1);
        ts_metrics_reset();
        for (int s = 0; s < steps; s++)
            if (ts_model_run(m[k], names, in, 2)) return fail("profiled step");
        unsetenv("TS_CUDA_GRAPHS");
        char *r = ts_metrics_report();
        fprintf(stderr, "==== %s: %s, %d steps\n%s\n", row, what[k], steps, r ? r : "(no report)");
        ts_string_free(r);
    }
    for (int k = 0; k < 3; k++) ts_model_free(m[k]), free(t[k]);
    ts_graph_free(g);
    free(x), free(y);
    return 0;
}
