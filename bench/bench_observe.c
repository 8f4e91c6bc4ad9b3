/* bench_observe.c -- what observing costs: the tutorial MLP training of
 * bench_mlp.c, plain (the baseline) against the same training observed.
 *
 *     bench_observe MODE BATCH [STEPS [WARMUP [THREADS [REPS]]]]
 *
 * MODE
 *   watch     TS_WATCH_STATS every run (period 1) on every activation (the
 *             outputs PyTorch's forward hooks see: Flatten, each Linear, each
 *             ReLU, LogSoftmax), every parameter gradient and every updated
 *             parameter: 7 + 6 + 6 = 19 summaries a step. The peer is
 *             bench/torch_observe.py. TS_BENCH_WATCH=PATTERN[,PATTERN...]
 *             watches those names instead (ts_options_watch's globs), to
 *             see what each tensor costs: e.g.
 *             "Gradient___fc1.weight,UpdatedVar___fc1.weight" for the
 *             largest parameter's step alone, "Flatten:?,fc?/Add:?" for
 *             activations.
 *   stability every stability signal of every layer every run
 *             (ts_options_watch_stability "*": each layer's output RMS and
 *             max |x|, the logits' log-sum-exp, each parameter's gradient
 *             norm and update/weight ratio).
 *   numerics  check_numerics = TS_CHECK_OUTPUT against off.
 *   trace     the timeline of every step (ts_options_set_trace, recorded
 *             in memory; the file is written after the timing) against
 *             no trace.
 *   crash     one model, with ts_crash_handler_install's handlers in place
 *             against the previous ones (TS_METRICS_FILE unset): the cost of
 *             diagnostics that are "off".
 *   memwatch  one model, with the memory watcher (--watch-memory) sampling
 *             every 10 ms (a tenth of its default period) against none.
 *             Each side starts a thread before its steps and ends it after
 *             them: the base's sleeps on a pipe, the cand's is the watcher
 *             (its first sample, the one that reads PSS and USS at once,
 *             taken before the timing starts). On a loaded machine making
 *             a thread alone moves the timing by 10-20% (the main thread
 *             loses its core for a while); both sides pay that, and what
 *             differs is the sampling.
 *
 * The two sides are two models (but crash and memwatch: one), built in
 * TS_BENCH_SETS pairs (default 4): where a model's arrays fall in memory
 * moves its step by a few percent, and the model built second ran faster
 * (the MLP at batch 32 watching one tensor of 320 values, one pair: -0.5
 * to -1.9% over 6 processes; four pairs, each built in the other order
 * from the last: -0.1 to +0.4%). Pairs 2j and 2j + 1 time set j % sets,
 * one each way round, so the median spans every placement of each side.
 *
 * Both sides live in one process and are timed in interleaved pairs (REPS,
 * default 7, each STEPS steps of one side then of the other after WARMUP
 * steps per side; the side that goes first alternates) so that load from
 * other processes hits both alike. The overhead is the median over pairs of
 * cand/base - 1: robust to the machine's speed changing between pairs
 * (shared 2-core machines change by 2x), where a best-of would pair one
 * side's lucky moment with the other's ordinary one. make bench runs many
 * short pairs (about 100 of 10-20 ms) and reports the median's 95%
 * confidence interval (overhead_report in bench_common.h). ms_per_step is
 * each side's median pair, best_ms and worst_ms its spread.
 *
 * Prints one line per side, then the overhead:
 * `ts-plain role=base batch=B threads=T steps=N reps=R sets=S ms_per_step=.. best_ms=.. worst_ms=.. samples_per_s=.. gflops=..`
 * `ts-watch role=cand ...`
 * (memwatch: `ts-nowatch`, `ts-memwatch`)
 * `overhead pct=.. best_pct=.. min_pct=.. max_pct=.. q1_pct=.. q3_pct=.. ci_lo_pct=.. ci_hi_pct=..`
 * (best_pct: best cand / best base - 1; the rest: overhead_report) */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "tensorscope.h"

enum { POOL = 8, MAX_REPS = 1024, MAX_SETS = 8, SETS = 4 };

typedef enum mode { MODE_WATCH, MODE_NUMERICS, MODE_CRASH, MODE_TRACE, MODE_MEMWATCH, MODE_STABILITY } mode;
enum { MEMWATCH_MS = 10 };

static char trace_path[512]; /* MODE_TRACE: the file, removed at the end */
static long trace_steps;     /* every step the bench runs, so the file is written at free */

/* Activations as PyTorch's module hooks see them, parameter gradients,
 * updated parameters. Globs: a plain "LogSoftmax:0" would also match
 * "Gradient___LogSoftmax:0" (substring). */
static const char *const k_watch[] = {"Flatten:?", "fc?/Add:?", "Relu:?", "LogSoftmax:?",
                                      "Gradient___fc?.*", "UpdatedVar___*"};
#define WATCHED 19

/* The watched patterns: TS_BENCH_WATCH's (read_watch_list), else k_watch. */
enum { MAX_PATTERNS = 32 };
static char g_patterns[MAX_PATTERNS][256];
static int g_n_patterns;

/* TS_BENCH_WATCH=P[,P...] into g_patterns; false (with a message) when a
 * pattern is empty or too long, or there are too many. */
static int read_watch_list(void)
{
    const char *list = getenv("TS_BENCH_WATCH");
    for (const char *p = list && *list ? list : ""; *p;) {
        size_t n = strcspn(p, ",");
        if (n == 0 || n >= sizeof g_patterns[0] || g_n_patterns == MAX_PATTERNS) {
            fprintf(stderr, "bench_observe: TS_BENCH_WATCH: up to %d comma-separated patterns of 1 to %zu characters\n",
                    MAX_PATTERNS, sizeof g_patterns[0] - 1);
            return 0;
        }
        memcpy(g_patterns[g_n_patterns], p, n);
        g_patterns[g_n_patterns++][n] = 0;
        p += n + (p[n] == ',');
    }
    return 1;
}

static ts_status watch_all(ts_options *o)
{
    ts_status st = TS_OK;
    for (int i = 0; !st && i < (g_n_patterns ? g_n_patterns : (int)(sizeof k_watch / sizeof *k_watch)); i++)
        st = ts_options_watch(o, g_n_patterns ? g_patterns[i] : k_watch[i], TS_WATCH_STATS, 1);
    return st;
}

typedef struct side {
    ts_graph *g;
    ts_options *o;
    ts_model *m;
} side;

typedef struct data {
    long batch;
    int64_t xs[4], ys[1];
    float *x;
    int32_t *y;
} data;

static int fail(const char *what)
{
    fprintf(stderr, "bench_observe: %s: %s\n", what, ts_last_error());
    return 1;
}

/* The model of bench_mlp.c; `observed` adds what MODE measures. */
static ts_status side_new(side *s, const data *d, long threads, mode md, int observed)
{
    memset(s, 0, sizeof *s);
    ts_tensor *loss;
    s->g = bench_mlp_graph(d->batch, &loss);
    if (ts_graph_status(s->g) != TS_OK)
        return ts_graph_status(s->g);
    s->o = ts_options_new();
    ts_status st = ts_options_set_threads(s->o, (int)threads);
    if (observed && md == MODE_WATCH)
        st = watch_all(s->o);
    if (!st && observed && md == MODE_STABILITY)
        st = ts_options_watch_stability(s->o, "*", 1);
    if (!st && observed && md == MODE_NUMERICS)
        st = ts_options_set_check_numerics(s->o, TS_CHECK_OUTPUT);
    if (!st && observed && md == MODE_TRACE)
        st = ts_options_set_trace(s->o, trace_path, 1, trace_steps + 1);
    if (!st)
        st = ts_model_training(&s->m, s->g, loss, s->o, ts_sgd(0.01f, 0.0f, 0.0f));
    return st ? st : ts_model_compile(s->m);
}

static void side_free(side *s)
{
    ts_model_free(s->m);
    ts_options_free(s->o);
    ts_graph_free(s->g);
}

/* Steps [first, first + n) of the pool cycle; seconds, or < 0 on error. */
static double train(ts_model *m, const data *d, long first, long n)
{
    static const char *const names[2] = {"x", "labels"};
    size_t per_x = (size_t)d->batch * PIXELS;
    double t0 = now_s();
    for (long s = first; s < first + n; s++) {
        size_t k = (size_t)s % POOL;
        ts_array in[2] = {ts_array_f32(d->x + k * per_x, 4, d->xs),
                          ts_array_i32(d->y + k * (size_t)d->batch, 1, d->ys)};
        if (ts_model_run(m, names, in, 2))
            return -1;
    }
    return now_s() - t0;
}

/* The watches really ran: every expected tensor summarised at the last run. */
static int watches_ok(const ts_model *m)
{
    const ts_watch_result *r;
    size_t n;
    if (ts_model_watch_results(m, &r, &n))
        return 0;
    if (g_n_patterns ? n < 1 : n != WATCHED) { /* TS_BENCH_WATCH's: at least one */
        fprintf(stderr, "bench_observe: %zu watched tensors, expected %s%d\n", n, g_n_patterns ? "at least " : "", g_n_patterns ? 1 : WATCHED);
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        if (r[i].run != r[0].run || r[i].run < 0 || r[i].summary->stats.count <= 0) {
            fprintf(stderr, "bench_observe: watch '%s' not summarised in the last run\n", r[i].name);
            return 0;
        }
    return 1;
}

/* The stability rows really ran: each taken at the last run. */
static int stability_ok(const ts_model *m)
{
    const ts_watch_result *r;
    size_t n, rows = 0;
    if (ts_model_watch_results(m, &r, &n))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(r[i].name, "stability/", 10) == 0 && r[i].run == ts_model_runs(m) - 1)
            rows++;
    if (rows != n || rows < 3 * 2 + 1 + 6 * 2) { /* fc1..3: rms, max_abs; lse; 6 parameters: grad_norm, update_ratio */
        fprintf(stderr, "bench_observe: %zu of %zu rows are this run's stability signals\n", rows, n);
        return 0;
    }
    return 1;
}

/* ---- crash mode: toggle between the previous handlers and tensorscope's */

static const int k_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGUSR1};
#define NSIG_SAVED (int)(sizeof k_signals / sizeof *k_signals)
static struct sigaction g_handlers[2][NSIG_SAVED];

static int handlers_prepare(void)
{
    for (int i = 0; i < NSIG_SAVED; i++)
        sigaction(k_signals[i], NULL, &g_handlers[0][i]);
    if (ts_crash_handler_install())
        return fail("ts_crash_handler_install");
    for (int i = 0; i < NSIG_SAVED; i++)
        sigaction(k_signals[i], NULL, &g_handlers[1][i]);
    return 0;
}

static void handlers_use(int installed)
{
    for (int i = 0; i < NSIG_SAVED; i++)
        sigaction(k_signals[i], &g_handlers[installed][i], NULL);
}

/* The memwatch base side's thread: it sleeps until its pipe closes. */
static int g_pipe[2] = {-1, -1};
static pthread_t g_sleeper;
static void *sleeper(void *arg)
{
    (void)arg;
    char c;
    while (read(g_pipe[0], &c, 1) > 0) {
    }
    return NULL;
}

/* Side k's thread: 0 a sleeper, 1 the memory watcher (waiting for its
 * first sample). */
static ts_status thread_started(int k)
{
    if (!k) {
        if (pipe(g_pipe) || pthread_create(&g_sleeper, NULL, sleeper, NULL))
            return TS_ERR_INTERNAL;
        return TS_OK;
    }
    ts_status st = ts_memwatch_start(MEMWATCH_MS);
    ts_memwatch_stats ms = {0};
    while (!st && (st = ts_memwatch_latest(&ms)) == TS_OK && ms.samples == 0)
        nanosleep(&(struct timespec){0, 100000}, NULL);
    return st;
}

static void thread_stop(int k)
{
    if (k) {
        ts_memwatch_stop();
        return;
    }
    close(g_pipe[1]);
    pthread_join(g_sleeper, NULL);
    close(g_pipe[0]);
}

/* TS_BENCH_SETS: the model pairs (1..MAX_SETS, default SETS); 0 with a
 * message when it is not one of those. */
static long env_sets(void)
{
    const char *v = getenv("TS_BENCH_SETS");
    if (!v || !*v)
        return SETS;
    char *end;
    long n = strtol(v, &end, 10);
    if (*end || n < 1 || n > MAX_SETS) {
        fprintf(stderr, "bench_observe: TS_BENCH_SETS: a number of model pairs from 1 to %d\n", MAX_SETS);
        return 0;
    }
    return n;
}

/* One side's line (median, best and worst repetition); *best = its best
 * seconds per step. */
static void report(const char *impl, const char *role, const double *secs, const ts_model *m, const data *d, long threads,
                   long steps, long reps, long sets, double *best)
{
    double v[MAX_REPS];
    memcpy(v, secs, sizeof(double) * (size_t)reps);
    double med = median(v, reps) / (double)steps;
    *best = v[0] / (double)steps;
    printf("%s role=%s batch=%ld threads=%ld steps=%ld reps=%ld sets=%ld ms_per_step=%.4f best_ms=%.4f "
           "worst_ms=%.4f samples_per_s=%.1f gflops=%.3f\n",
           impl, role, d->batch, threads, steps, reps, sets, med * 1e3, *best * 1e3,
           v[reps - 1] / (double)steps * 1e3, (double)d->batch / med, ts_model_flops_per_microbatch(m) / med * 1e-9);
}

int main(int argc, char **argv)
{
    const char *env_threads = getenv("TS_BENCH_THREADS");
    const char *mname = argc > 1 ? argv[1] : "";
    mode md = strcmp(mname, "watch") == 0      ? MODE_WATCH
              : strcmp(mname, "numerics") == 0 ? MODE_NUMERICS
              : strcmp(mname, "crash") == 0    ? MODE_CRASH
              : strcmp(mname, "trace") == 0    ? MODE_TRACE
              : strcmp(mname, "memwatch") == 0 ? MODE_MEMWATCH
              : strcmp(mname, "stability") == 0 ? MODE_STABILITY
                                               : (mode)-1;
    long batch = arg_or(argc, argv, 2, 1000), steps = arg_or(argc, argv, 3, 20);
    long warmup = arg_or(argc, argv, 4, 5);
    long threads = arg_or(argc, argv, 5, env_threads ? strtol(env_threads, NULL, 10) : 2);
    long reps = arg_or(argc, argv, 6, 7);
    if ((int)md < 0 || batch < 1 || steps < 1 || warmup < 0 || threads < 0 || reps < 1 ||
        reps > MAX_REPS) {
        fprintf(stderr, "usage: bench_observe watch|stability|numerics|crash|trace|memwatch BATCH [STEPS [WARMUP [THREADS "
                        "[REPS (1..%d)]]]]\n", MAX_REPS);
        return 2;
    }
    if (md == MODE_WATCH && !read_watch_list())
        return 2;
    if (md == MODE_CRASH)
        unsetenv("TS_METRICS_FILE"); /* "diagnostics off" */
    const int one_model = md == MODE_CRASH || md == MODE_MEMWATCH;
    if (md == MODE_MEMWATCH)
        ts_set_log_level(TS_LOG_WARN); /* each stop logs the peak */
    if (md == MODE_TRACE) {
        const char *tmp = getenv("TMPDIR");
        snprintf(trace_path, sizeof trace_path, "%s/bench_observe_trace.%ld.json", tmp && *tmp ? tmp : "/tmp", (long)getpid());
        trace_steps = warmup + reps * steps;
    }

    data d = {.batch = batch, .xs = {batch, 1, 28, 28}, .ys = {batch}};
    if (!bench_data_pool(batch, POOL, &d.x, &d.y))
        return fail("out of memory");

    /* crash and memwatch: one model, the handlers or the thread change; else
     * two models, in `sets` pairs built one after the other (see the top) */
    long sets = one_model ? 1 : env_sets();
    if (sets < 1)
        return 2;
    side sd[MAX_SETS][2];
    for (long j = 0; j < sets; j++) {
        if (one_model) {
            if (side_new(&sd[j][0], &d, threads, md, 0))
                return fail("plain model");
            sd[j][1] = sd[j][0];
            if (md == MODE_CRASH && handlers_prepare())
                return 1;
            continue;
        }
        for (int i = 0; i < 2; i++) { /* the side built first alternates too (the one built second ran 1% faster) */
            int k = (int)((j + i) % 2);
            if (side_new(&sd[j][k], &d, threads, md, k))
                return fail(k ? "observed model" : "plain model");
        }
    }

    for (long j = 0; j < sets; j++)
        for (int k = 0; k < 2; k++) {
            if (md == MODE_CRASH)
                handlers_use(k);
            if (md == MODE_MEMWATCH && thread_started(k))
                return fail("memory watcher");
            if (train(sd[j][k].m, &d, 0, warmup) < 0)
                return fail("warmup run");
            if (md == MODE_MEMWATCH)
                thread_stop(k);
        }
    double secs_of[2][MAX_REPS];
    for (long r = 0; r < reps; r++)
        for (int i = 0; i < 2; i++) {
            int k = (int)((r + i) % 2); /* alternate which side goes first */
            side *sk = &sd[(r / 2) % sets][k]; /* each set in both orders */
            if (md == MODE_CRASH)
                handlers_use(k);
            if (md == MODE_MEMWATCH && thread_started(k))
                return fail("memory watcher");
            if (md == MODE_MEMWATCH) /* both sides come out of the same sleep (the cand waited for its first sample) */
                nanosleep(&(struct timespec){0, 2000000}, NULL);
            double secs = train(sk->m, &d, warmup + r * steps, steps);
            if (md == MODE_MEMWATCH)
                thread_stop(k);
            if (secs < 0)
                return fail("run");
            if (md == MODE_WATCH && k == 1 && !watches_ok(sk->m))
                return 1;
            if (md == MODE_STABILITY && k == 1 && !stability_ok(sk->m))
                return 1;
            secs_of[k][r] = secs;
        }

    static const char *const impl[][2] = {{"ts-plain", "ts-watch"},
                                          {"ts-plain", "ts-numerics"},
                                          {"ts-nohandler", "ts-handler"},
                                          {"ts-plain", "ts-trace"},
                                          {"ts-nowatch", "ts-memwatch"},
                                          {"ts-plain", "ts-stability"}};
    double best[2], ratio[MAX_REPS];
    for (int k = 0; k < 2; k++)
        report(impl[md][k], k ? "cand" : "base", secs_of[k], sd[0][k].m, &d, threads, steps, reps, sets, &best[k]);
    for (long r = 0; r < reps; r++)
        ratio[r] = secs_of[1][r] / secs_of[0][r];
    overhead_report(ratio, reps, best[0], best[1]);

    if (md == MODE_CRASH)
        handlers_use(0);
    for (long j = 0; j < sets; j++) {
        if (!one_model)
            side_free(&sd[j][1]);
        side_free(&sd[j][0]);
    }
    if (md == MODE_TRACE)
        remove(trace_path);
    free(d.x);
    free(d.y);
    return 0;
}
