/* test_optim_step.c -- the optimizer step's weight decay, as PyTorch's
 * optimizers apply it: added to the gradient only when it is set (SGD,
 * SGD with momentum, Adam), so no decay leaves an infinite parameter
 * infinite (PyTorch: inf - lr * g) instead of making it NaN through
 * 0 * inf, and a decay makes it what PyTorch's arithmetic makes it (SGD
 * and Adam: NaN; AdamW: infinite); the finite values are the formula's. Every length crosses the vector loop and its padded tail.
 * The update that summarises its gradient and updated parameter as it goes
 * (ts_opt_update_summarised) against the plain update and one pass over
 * each tensor (test_summarised). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/stats.h"
#include "graph/optim.h"

enum { N = 37 };

static void step(const ts_optimizer *o, float *w, const float *g, float *m, float *v) {
    ts_opt_state s = {.accl = m, .accl1 = m, .accl2 = v};
    ts_opt_consts c = ts_opt_begin(o, &s);
    ts_opt_update(o, &c, &s, w, g, 0, N);
}

/* One element of the first step of o, in double, the decay added as PyTorch does. */
static double reference(const ts_optimizer *o, double w, double g) {
    if (o->weight_decay != 0.0f && o->kind != TS_OPT_ADAMW) g += (double)o->weight_decay * w;
    if (o->kind == TS_OPT_SGD) return w - (double)o->lr * g; /* momentum's first step: its buffer is g */
    double a = (1.0 - o->beta1) * g, b = (1.0 - o->beta2) * g * g;
    double ahat = a / (1.0 - o->beta1), bhat = b / (1.0 - o->beta2);
    if (o->kind == TS_OPT_ADAMW) w *= 1.0 - (double)o->lr * o->weight_decay;
    return w - (double)o->lr * ahat / (sqrt(bhat) + o->eps);
}

static void check_case(const char *label, ts_optimizer o) {
    float w[N], g[N], m[N] = {0}, v[N] = {0};
    for (int i = 0; i < N; i++) w[i] = 0.25f * (float)(i - 18), g[i] = 0.01f * (float)((i * 7) % 11) - 0.05f;
    w[3] = INFINITY, w[N - 1] = -INFINITY; /* one in the vector loop, one in the tail */
    float w0[N];
    memcpy(w0, w, sizeof w);
    step(&o, w, g, m, v);
    int bad = -1;
    double worst = 0.0;
    for (int i = 0; i < N; i++) {
        double want = reference(&o, w0[i], g[i]); /* in double, infinities as IEEE gives them */
        if (isfinite(want)) {
            double err = fabs((double)w[i] - want) / (fabs(want) + 1e-6);
            if (err > worst) worst = err;
        } else if (!isnan(want) != !isnan(w[i]) || (!isnan(want) && (!isinf(w[i]) || !signbit(want) != !signbit(w[i])))) {
            if (bad < 0) bad = i;
        }
    }
    CHECK(bad < 0, "%s: an infinite weight gives PyTorch's value (w[%d] = %g)", label, bad, bad < 0 ? 0.0 : (double)w[bad]);
    CHECK(worst < 1e-5, "%s: the step is the formula's (worst relative error %.3g)", label, worst);
}

/* Summaries agree as one pass gives them: counts, min and max exact, the
 * moments to float rounding (the mean on the data's scale). */
static bool same_stats(const ts_stats *a, const ts_stats *r) {
    double scale = fmax(r->std, fabs(r->mean) * 1e-3) + 1e-30;
    bool none = r->count == r->nans + r->pos_infs + r->neg_infs; /* no finite value: NaN moments */
    return a->count == r->count && a->zeros == r->zeros && a->nans == r->nans && a->pos_infs == r->pos_infs && a->neg_infs == r->neg_infs &&
           (none ? isnan(a->mean) && isnan(a->min) && isnan(a->max)
                 : fabs(a->mean - r->mean) <= 1e-6 * scale && fabs(a->std - r->std) <= 1e-6 * (r->std + 1e-30) &&
                       fabs(a->l2 - r->l2) <= 1e-6 * r->l2 && a->min == r->min && a->max == r->max);
}

/* One case of test_summarised: g and w filled by `data`, the step taken
 * summarised (in the executor's chunks of 16384, streams flushed after
 * each) and plainly on a twin; `clear`: the summarised step zeroes its
 * gradient (SGD's as it goes, each run the one before), the twin reads a
 * copy. */
static void summarised_case(const char *label, ts_optimizer o, int data, bool clear) {
    enum { M = 3 * 16384 + 1000 + 5 }; /* chunks, runs, and a tail shorter than a vector */
    float *w = malloc(M * sizeof *w), *g = malloc(M * sizeof *g), *tw = malloc(M * sizeof *tw), *tg = malloc(M * sizeof *tg);
    float *st = calloc(4 * (size_t)M, sizeof *st);
    if (!w || !g || !tw || !tg || !st) {
        CHECK(0, "%s: memory", label);
        goto done;
    }
    uint32_t r = 12345;
    for (int i = 0; i < M; i++) {
        r = r * 1664525u + 1013904223u;
        float u = (float)(r >> 8) / 16777216.0f - 0.5f; /* [-0.5, 0.5) */
        w[i] = 0.1f * u, g[i] = 1e-3f * (u * u - 0.1f);
        switch (data) {
        case 1: g[i] = i % 3 ? 0.0f : -0.0f; break;           /* the gradient all zero */
        case 2: w[i] = fabsf(w[i]) + 1.0f, g[i] = -fabsf(g[i]) - 1e-4f; break; /* all positive (the step adds) */
        case 3: w[i] = -fabsf(w[i]) - 1.0f, g[i] = fabsf(g[i]) + 1e-4f; break; /* all negative */
        default: break;
        }
        if (data == 0 && i % 513 == 7) g[i] = 0.0f, w[i] = i % 2 ? -0.0f : 0.0f; /* zeros of both signs in both */
    }
    if (data == 4) g[20000] = NAN, g[M - 2] = NAN, w[30000] = INFINITY, w[40000] = -INFINITY; /* in runs, and in the tail */
    memcpy(tw, w, M * sizeof *w);
    memcpy(tg, g, M * sizeof *g);
    ts_opt_state s = {.accl = st, .accl1 = st + M}, ts = {.accl = st + 2 * M, .accl1 = st + 3 * M};
    float *b2 = calloc(2 * (size_t)M, sizeof *b2);
    if (!b2) {
        CHECK(0, "%s: memory", label);
        goto done;
    }
    s.accl2 = b2, ts.accl2 = b2 + M;
    ts_opt_consts c = ts_opt_begin(&o, &s), tc = ts_opt_begin(&o, &ts);
    ts_stats_partial gp, pp;
    ts_stats_partial_init(&gp, TS_WATCH_STATS);
    ts_stats_partial_init(&pp, TS_WATCH_STATS);
    for (int64_t b = 0; b < M; b += 16384) {
        ts_stats_stream gs = {0}, ps = {0};
        ts_opt_update_summarised(&o, &c, &s, w, g, b, M - b < 16384 ? M : b + 16384, clear, &gs, &gp, &ps, &pp, NULL);
        ts_stats_stream_flush(&gs, &gp);
        ts_stats_stream_flush(&ps, &pp);
    }
    ts_opt_update(&o, &tc, &ts, tw, tg, 0, M);
    if (clear) {
        int64_t nonzero = 0;
        for (int i = 0; i < M; i++) nonzero += g[i] != 0.0f;
        CHECK(nonzero == 0, "%s: the gradient is zeroed (%lld values left)", label, (long long)nonzero);
    }
    ts_summary sg, sp, rg, rp;
    ts_stats_finish(&gp, &sg);
    ts_stats_finish(&pp, &sp);
    ts_summarize_f32(tg, M, TS_WATCH_STATS, &rg);
    ts_summarize_f32(tw, M, TS_WATCH_STATS, &rp);
    CHECK(memcmp(w, tw, M * sizeof *w) == 0, "%s: the summarised update's parameter is bit-identical to the plain update's", label);
    CHECK(same_stats(&sg.stats, &rg.stats), "%s: gradient zeros %lld nan %lld min %g max %g mean %.9g std %.9g (one pass: %lld %lld %g %g %.9g %.9g)",
          label, (long long)sg.stats.zeros, (long long)sg.stats.nans, sg.stats.min, sg.stats.max, sg.stats.mean, sg.stats.std,
          (long long)rg.stats.zeros, (long long)rg.stats.nans, rg.stats.min, rg.stats.max, rg.stats.mean, rg.stats.std);
    CHECK(same_stats(&sp.stats, &rp.stats), "%s: parameter zeros %lld nan %lld inf %lld/%lld min %g max %g mean %.9g std %.9g (one pass: %lld %lld %lld/%lld %g %g %.9g %.9g)",
          label, (long long)sp.stats.zeros, (long long)sp.stats.nans, (long long)sp.stats.pos_infs, (long long)sp.stats.neg_infs, sp.stats.min,
          sp.stats.max, sp.stats.mean, sp.stats.std, (long long)rp.stats.zeros, (long long)rp.stats.nans, (long long)rp.stats.pos_infs,
          (long long)rp.stats.neg_infs, rp.stats.min, rp.stats.max, rp.stats.mean, rp.stats.std);
    free(b2);
done:
    free(w), free(g), free(tw), free(tg), free(st);
}

/* The summarised update of every optimizer's loop (plain SGD and Adam sum
 * their squares by multiply-adds, SGD with momentum by a tree) over data
 * with zeros of both signs, a gradient all zero, everything positive,
 * everything negative, and NaN and Inf; with the gradient kept, and
 * zeroed as the executor's step does. */
static void test_summarised(void) {
    static const char *const data[] = {"mixed with zeros", "zero gradient", "all positive", "all negative", "NaN and Inf"};
    const struct {
        const char *name;
        ts_optimizer o;
    } opts[] = {{"SGD", ts_sgd(0.1f, 0.0f, 0.0f)}, {"SGD momentum", ts_sgd(0.1f, 0.9f, 0.0f)}, {"Adam", ts_adam(1e-3f)}, {"AdamW", ts_adamw(1e-3f, 1e-2f)}};
    for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++)
        for (int d = 0; d < 5; d++) {
            for (int clear = 0; clear < 2; clear++) {
                char label[128];
                snprintf(label, sizeof label, "summarised %s, %s%s", opts[k].name, data[d], clear ? ", gradient zeroed" : "");
                summarised_case(label, opts[k].o, d, clear);
            }
        }
}

int main(void) {
    ts_optimizer mom = ts_sgd(0.1f, 0.9f, 0.0f), mom_wd = ts_sgd(0.1f, 0.9f, 1e-2f);
    check_case("SGD", ts_sgd(0.1f, 0.0f, 0.0f));
    check_case("SGD with decay", ts_sgd(0.1f, 0.0f, 1e-2f));
    check_case("SGD momentum", mom);
    check_case("SGD momentum with decay", mom_wd);
    check_case("Adam", ts_adam(1e-3f));
    ts_optimizer adam_wd = ts_adam(1e-3f);
    adam_wd.weight_decay = 1e-2f;
    check_case("Adam with decay", adam_wd);
    check_case("AdamW", ts_adamw(1e-3f, 0.0f));
    check_case("AdamW with decay", ts_adamw(1e-3f, 1e-2f));
    test_summarised();
    return check_summary("test_optim_step");
}
