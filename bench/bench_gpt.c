/* bench_gpt.c -- training steps of the character GPT (ts_gpt_build), the
 * peer of bench/torch_gpt.py bench.
 *
 *     bench_gpt train [STEPS [THREADS [LAYERS HEADS EMBD T BATCH]]]
 *     bench_gpt watch|watch-all|stability [STEPS [THREADS [... [REPS]]]]
 *
 * Defaults: 4 layers, 4 heads, 128 channels, T = 64, batch 32, vocab 65,
 * AdamW; a pool of 8 random token batches cycled step by step, 3 warmup
 * steps; precision $TS_BENCH_PRECISION, f32 (default), bf16 or f16
 * (bench_common.h), on both sides of `watch`. `train` prints
 * `tensorscope batch=B threads=T precision=P steps=N ms_per_step=.. samples_per_s=.. gflops=.. peak_rss_mb=..`
 * (GFLOP/s: 6 * parameters * tokens, torch_gpt.py's convention). `watch`
 * times the plain model against one watching TS_WATCH_STATS every step on
 * every activation (every op's output but the linear layers' products
 * before the bias, as bench_observe.c; `watch-all`: those too), every
 * parameter's gradient and every updated parameter (the peer is
 * torch_gpt.py observe), in one process with interleaved pairs (REPS, default 5;
 * the median of the paired ratios, as bench_observe.c), printing role=base
 * / role=cand lines (watched= the summaries a step) and overhead_report's
 * `overhead pct=..` line. `stability` times the same way a model taking
 * every stability signal of every layer every step (ts_options_watch_stability
 * "*": output RMS and max |x|, each head's max logit, the logits'
 * log-sum-exp, each parameter's gradient norm, update/weight ratio and
 * Adam's update norm). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench_common.h"

enum { POOL = 8, WARMUP = 3, MAX_REPS = 256, VOCAB = 65 };

typedef struct side {
    ts_graph *g;
    ts_options *o;
    ts_model *m;
    double secs[MAX_REPS];
} side;

static ts_gpt_config cfg = {VOCAB, 64, 4, 4, 128, 32};
static int32_t *pool_x, *pool_y;

static int fail(const char *what)
{
    fprintf(stderr, "bench_gpt: %s: %s\n", what, ts_last_error());
    return 1;
}

static int all_ops; /* watch-all: the linear layers' products before the bias too */
static int stability; /* stability: every stability signal of every layer instead */
static const char *precision = "f32";

static ts_status side_new(side *s, long threads, int watched)
{
    memset(s, 0, sizeof *s);
    s->g = ts_graph_new(0);
    ts_gpt gpt;
    ts_status st = ts_gpt_build(s->g, &cfg, &gpt);
    if (st)
        return st;
    s->o = ts_options_new();
    ts_options_set_threads(s->o, (int)threads);
    if (!bench_precision(s->o, &precision))
        return TS_ERR_INVALID_ARGUMENT;
    /* every activation (every op's output: the attention scores and
     * probabilities included) but, as bench_observe.c, the product inside a
     * linear layer before its bias; every parameter's gradient and update */
    if (watched && stability)
        st = ts_options_watch_stability(s->o, "*", 1);
    else if (watched)
        st = bench_watch_all(s->g, s->o, !all_ops);
    if (st)
        return st;
    st = ts_model_training(&s->m, s->g, gpt.loss, s->o, ts_adamw(1e-3f, 0.01f));
    return st ? st : ts_model_compile(s->m);
}

static void side_free(side *s)
{
    ts_model_free(s->m);
    ts_options_free(s->o);
    ts_graph_free(s->g);
}

static ts_status steps(side *s, long n, long *k)
{
    static const char *const names[2] = {"tokens", "targets"};
    int64_t per = cfg.batch * cfg.block_size;
    for (long i = 0; i < n; i++, (*k)++) {
        int64_t off = (*k % POOL) * per;
        ts_array in[2] = {ts_array_i32(pool_x + off, 2, (int64_t[]){cfg.batch, cfg.block_size}),
                          ts_array_i32(pool_y + off, 2, (int64_t[]){cfg.batch, cfg.block_size})};
        ts_status st = ts_model_run(s->m, names, in, 2);
        if (st)
            return st;
    }
    return TS_OK;
}

static double flops_per_step(void)
{
    double C = (double)cfg.embd, params = (double)cfg.vocab * C + (double)cfg.layers * 12.0 * C * C;
    return 6.0 * params * (double)(cfg.batch * cfg.block_size);
}

static void line(const char *impl, const char *role, long threads, long n, long reps, double ms, double best, double worst,
                 size_t watched)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("%s%s%s batch=%lld threads=%ld precision=%s steps=%ld", impl, role ? " role=" : "", role ? role : "", (long long)cfg.batch,
           threads, precision, n);
    if (reps)
        printf(" reps=%ld watched=%zu best_ms=%.4f worst_ms=%.4f", reps, watched, best, worst);
    printf(" ms_per_step=%.4f samples_per_s=%.1f gflops=%.3f peak_rss_mb=%.1f\n", ms, (double)cfg.batch * 1e3 / ms,
           flops_per_step() / (ms * 1e-3) * 1e-9, (double)ru.ru_maxrss / 1024.0);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "train";
    long n = arg_or(argc, argv, 2, 20), threads = arg_or(argc, argv, 3, 2);
    if (argc > 8) {
        cfg.layers = arg_or(argc, argv, 4, 4), cfg.heads = arg_or(argc, argv, 5, 4), cfg.embd = arg_or(argc, argv, 6, 128);
        cfg.block_size = arg_or(argc, argv, 7, 64), cfg.batch = arg_or(argc, argv, 8, 32);
    }
    long reps = arg_or(argc, argv, 9, 5);
    all_ops = strcmp(mode, "watch-all") == 0;
    stability = strcmp(mode, "stability") == 0;
    if (all_ops || stability)
        mode = "watch";
    if (reps < 1 || reps > MAX_REPS || n < 1 || (strcmp(mode, "train") && strcmp(mode, "watch"))) {
        fprintf(stderr, "usage: bench_gpt train|watch|watch-all|stability [STEPS [THREADS [LAYERS HEADS EMBD T BATCH [REPS]]]]\n");
        return 2;
    }
    size_t per = (size_t)(cfg.batch * cfg.block_size);
    pool_x = malloc(POOL * per * sizeof *pool_x);
    pool_y = malloc(POOL * per * sizeof *pool_y);
    if (!pool_x || !pool_y)
        return 1;
    uint64_t rng = 88172645463325252ull;
    for (size_t i = 0; i < POOL * per; i++) {
        pool_x[i] = (int32_t)(xorshift(&rng) % VOCAB);
        pool_y[i] = (int32_t)(xorshift(&rng) % VOCAB);
    }
    side s[2];
    long k = 0;
    if (strcmp(mode, "train") == 0) {
        if (side_new(&s[0], threads, 0) || steps(&s[0], WARMUP, &k))
            return fail("plain model");
        double t0 = now_s();
        if (steps(&s[0], n, &k))
            return fail("training");
        line("tensorscope", NULL, threads, n, 0, (now_s() - t0) * 1e3 / (double)n, 0, 0, 0);
        side_free(&s[0]);
        return 0;
    }
    if (side_new(&s[0], threads, 0) || side_new(&s[1], threads, 1))
        return fail("models");
    for (int j = 0; j < 2; j++)
        if (steps(&s[j], WARMUP, &k))
            return fail("warmup");
    double ratio[MAX_REPS];
    for (long r = 0; r < reps; r++) {
        for (int q = 0; q < 2; q++) {
            int j = (int)((r + q) % 2); /* the side going first alternates */
            double t0 = now_s();
            if (steps(&s[j], n, &k))
                return fail("training");
            s[j].secs[r] = now_s() - t0;
        }
        ratio[r] = s[1].secs[r] / s[0].secs[r];
    }
    double med[2], best[2], worst[2];
    for (int j = 0; j < 2; j++) {
        med[j] = median(s[j].secs, reps) * 1e3 / (double)n; /* sorts */
        best[j] = s[j].secs[0] * 1e3 / (double)n;
        worst[j] = s[j].secs[reps - 1] * 1e3 / (double)n;
    }
    const ts_watch_result *w;
    size_t nw = 0;
    if (ts_model_watch_results(s[1].m, &w, &nw))
        return fail("watch results");
    line("ts-plain", "base", threads, n, reps, med[0], best[0], worst[0], 0);
    line(stability ? "ts-stability" : "ts-watch", "cand", threads, n, reps, med[1], best[1], worst[1], nw);
    overhead_report(ratio, reps, best[0], best[1]);
    side_free(&s[0]);
    side_free(&s[1]);
    return 0;
}
