/* cmd_train.c -- `tensorscope train` and `tensorscope eval`: the main job.
 * One path for every model (mlp, cnn, gpt, an ONNX file) and every data
 * kind (MNIST IDX images, arrays, a text corpus), with the observation the
 * user asked for: anchors, watches and the stats table, outfeeds, print
 * ops, numeric checks, TensorBoard, plots, .npy dumps and the metrics
 * report; checkpoints, resuming and Ctrl-C the same for all. */
#include "cli.h"

#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct train_args {
    const char *model, *data, *optimizer, *output_mode, *check_numerics, *histogram, *dump_npy, *tensorboard, *plot;
    const char *watch_stability, *plot_stability; /* --watch-stability [GLOB] ("" alone: every layer), --plot-stability DIR */
    const char *save_graph; /* --save-graph FILE.onnx */
    const char *save_weights, *weights, *lr_schedule, *checkpoint_dir, *resume, *run_name, *dump_limit, *outfeed_mode, *picture_dir;
    const char *split_at, *pipeline_schedule, *device, *save_init, *attn_dir;
    const char *trace, *trace_steps;
    const char *precision, *loss_scale; /* --precision, --loss-scale */
    long outfeed_depth, pipeline_stages, check_replicas;
    bool outfeed_drop;
    bool allow_tf32;
    bool drop_last; /* --drop-last */
    bool log_layer_shapes; /* --log-layer-shapes */
    const char *on_start;  /* --on-start CMD */
    long epochs, batch_size, seed, holdout, repeat_count, grad_accum, threads, log_verbosity, watch_period, max_steps;
    long warmup_steps, lr_step_size, checkpoint_every, steps, break_at;
    double lr, momentum, weight_decay, lr_gamma, lr_min;
    bool outfeed_pre, stats, run_single_step, metrics, log_memory, quiet, all, watch_range, break_on_nan;
    long stats_every;
    cli_list anchors, outfeeds, watches, prints, feature_maps, filters, inputs, attention_maps, input_values;
    long watch_memory;       /* --watch-memory[=MS]: -1 off, 0 the default period */
    const char *log_vmodule; /* --log-vmodule MODULE=LEVEL,... */
    cli_dump_debug dump;     /* --dump-debug, --dump-steps, --dump-ops, --grads */
    double detect_spikes;    /* --detect-spikes[=K]: -1 off, 0 the default K */
    long spike_window;       /* --spike-window N */
    const char *on_spike;    /* --on-spike continue|skip|stop|npz:FILE|inspect */
} train_args;

/* ---- outfeed sink: runs on the queue's consumer thread */
typedef struct sink_state {
    const char *dump_dir;
    long records, written;
    char keys[32][128];
    long counts[32];
    int n_keys;
    /* per key, the samples of one run stacked on a leading axis, written as
     * one <key>.run<R>.npy [S, *T] when the next run's first record comes
     * (or at the end) */
    struct {
        unsigned char *data;
        size_t cap, sample_bytes;
        int64_t run, n;
        ts_array proto; /* dtype and shape of one sample */
        /* replicas: rank 0 gets its own records of a run, then each other
         * replica's; `reps` runs of `rows` records each, in replica order,
         * are written as [S, R, *T] (as anchors are) */
        int rep, reps;
        int64_t rows, first_rows;
        bool even;
    } stack[32];
    unsigned char *by_rep; /* a stack reordered [R][S] -> [S][R], grown as needed, kept */
    size_t by_rep_cap;
    int replicas;
    /* with --stats: per key, the f32 records since the last stats table
     * summarised as one stacked [S, *T] array (mode last: the latest record) */
    ts_summary *since; /* [32], NULL without --stats */
    int64_t since_n[32];
    ts_array since_proto[32];
    ts_summary scratch; /* one record's summary */
    bool last_only;
    long long budget;          /* bytes of dumps allowed (--dump-limit); 0: no limit */
    atomic_llong bytes;        /* bytes of dumps written so far */
    atomic_int failed, full;   /* a write failed (message in err) / the budget is spent */
    char err[512];
} sink_state;

/* n samples of `one` stacked on a leading axis: [n, *T] (the data not set). */
static ts_array stacked_shape(ts_array one, int64_t n) {
    if (one.ndim >= TS_MAX_DIMS) one.ndim = TS_MAX_DIMS - 1;
    memmove(one.shape + 1, one.shape, (size_t)one.ndim * sizeof one.shape[0]);
    one.shape[0] = n;
    one.ndim++;
    return one;
}

/* Writes key k's stacked samples as <dir>/outfeed/<key>.run<R>.npy. */
static void sink_flush(sink_state *s, int k) {
    if (!s->stack[k].n || atomic_load(&s->failed) || atomic_load(&s->full)) return;
    int R = s->replicas;
    bool by_replica = R > 1 && s->stack[k].even && s->stack[k].reps == R && s->stack[k].rows == s->stack[k].first_rows;
    ts_array a = by_replica ? stacked_shape(stacked_shape(s->stack[k].proto, R), s->stack[k].n / R) : stacked_shape(s->stack[k].proto, s->stack[k].n);
    a.data = s->stack[k].data;
    if (by_replica) { /* [R][S] as they came -> [S][R] */
        size_t one = s->stack[k].sample_bytes, need = one * (size_t)s->stack[k].n;
        if (need > s->by_rep_cap) {
            unsigned char *grown = realloc(s->by_rep, need);
            if (!grown) {
                snprintf(s->err, sizeof s->err, "out of memory ordering outfeed records of '%s' by replica", s->keys[k]);
                atomic_store(&s->failed, 1);
                return;
            }
            s->by_rep = grown;
            s->by_rep_cap = need;
        }
        int64_t S = a.shape[0];
        for (int64_t i = 0; i < S; i++)
            for (int r = 0; r < R; r++)
                memcpy(s->by_rep + ((size_t)i * (size_t)R + (size_t)r) * one, s->stack[k].data + ((size_t)r * (size_t)S + (size_t)i) * one, one);
        a.data = s->by_rep;
    }
    long long size = 128 + (long long)(s->stack[k].sample_bytes * (size_t)s->stack[k].n); /* header + data */
    s->stack[k].n = 0;
    if (s->budget && atomic_load(&s->bytes) + size > s->budget) {
        atomic_store(&s->full, 1);
        return;
    }
    char key[128], name[200];
    cli_file_safe(s->keys[k], key, sizeof key);
    snprintf(name, sizeof name, "%s.run%lld", key, (long long)s->stack[k].run);
    char *dir = cli_path(s->dump_dir, "outfeed", ""), *path = dir ? cli_path(dir, name, ".npy") : NULL;
    if (!path) {
        snprintf(s->err, sizeof s->err, "out of memory");
        atomic_store(&s->failed, 1);
    } else if (ts_npy_save(path, &a) == TS_OK) {
        s->written++;
        atomic_fetch_add(&s->bytes, size);
    } else {
        snprintf(s->err, sizeof s->err, "%s", ts_last_error()); /* this thread's message */
        atomic_store(&s->failed, 1);
    }
    free(dir);
    free(path);
}

static void on_record(void *user, const ts_outfeed_record *r) {
    sink_state *s = user;
    s->records++;
    int k = 0;
    while (k < s->n_keys && strcmp(s->keys[k], r->key) != 0) k++;
    if (k == s->n_keys && k < 32) snprintf(s->keys[s->n_keys++], sizeof s->keys[0], "%s", r->key);
    if (k >= 32) return;
    s->counts[k]++;
    if (s->since && r->array.dtype == TS_F32 &&
        ts_summarize_f32(r->array.data, ts_array_numel(&r->array), TS_WATCH_STATS, &s->scratch) == TS_OK) {
        bool same = s->since_n[k] && ts_array_numel(&s->since_proto[k]) == ts_array_numel(&r->array);
        if (s->last_only || !same || ts_summary_merge(&s->since[k], &s->scratch) != TS_OK) {
            s->since[k] = s->scratch; /* the first since the last table (another shape: starts over) */
            s->since_n[k] = 0;
        }
        s->since_n[k]++;
        s->since_proto[k] = r->array;
    }
    if (!s->dump_dir || atomic_load(&s->failed) || atomic_load(&s->full)) return;
    if (s->stack[k].n && s->stack[k].run != r->run) sink_flush(s, k);
    size_t bytes = (size_t)ts_array_numel(&r->array) * ts_dtype_size(r->array.dtype);
    if (s->stack[k].n && bytes != s->stack[k].sample_bytes) sink_flush(s, k); /* a new shape: its own file */
    if (s->last_only && s->stack[k].n && r->replica == s->stack[k].rep) s->stack[k].n--, s->stack[k].rows--; /* mode last: the latest replaces the one before */
    size_t need = bytes * (size_t)(s->stack[k].n + 1);
    if (need > s->stack[k].cap) { /* grows while the first runs come, then stays */
        unsigned char *grown = realloc(s->stack[k].data, need * 2);
        if (!grown) {
            snprintf(s->err, sizeof s->err, "out of memory stacking outfeed records of '%s'", r->key);
            atomic_store(&s->failed, 1);
            return;
        }
        s->stack[k].data = grown;
        s->stack[k].cap = need * 2;
    }
    if (!s->stack[k].n) {
        s->stack[k].rep = r->replica;
        s->stack[k].reps = 1;
        s->stack[k].rows = 0;
        s->stack[k].even = r->replica == 0;
    } else if (r->replica != s->stack[k].rep) {
        if (s->stack[k].reps == 1) s->stack[k].first_rows = s->stack[k].rows;
        s->stack[k].even = s->stack[k].even && r->replica == s->stack[k].rep + 1 && s->stack[k].rows == s->stack[k].first_rows;
        s->stack[k].rep = r->replica;
        s->stack[k].reps++;
        s->stack[k].rows = 0;
    }
    s->stack[k].rows++;
    if (s->stack[k].reps == 1) s->stack[k].first_rows = s->stack[k].rows;
    memcpy(s->stack[k].data + bytes * (size_t)s->stack[k].n, r->array.data, bytes);
    s->stack[k].proto = r->array;
    s->stack[k].sample_bytes = bytes;
    s->stack[k].run = r->run;
    s->stack[k].n++;
}

/* After the queue is drained: the last run's stacks, then the buffers. */
static void sink_finish(sink_state *s) {
    for (int k = 0; k < s->n_keys && k < 32; k++) {
        sink_flush(s, k);
        free(s->stack[k].data);
        s->stack[k].data = NULL;
    }
    free(s->by_rep);
    s->by_rep = NULL;
}

/* SIGINT / SIGTERM while training: the current run stops before its next
 * micro-batch (ts_model_cancel; in an MPI job every rank at the same step),
 * every sink is flushed and closed and what was asked is written (the
 * weights of the completed steps), then exit 130 / 143.
 * SA_RESETHAND: a second signal acts at once (the default: exit). */
static volatile sig_atomic_t g_interrupted;
static ts_model *volatile g_running; /* the model a signal cancels, NULL outside training */
static void on_interrupt(int sig) {
    g_interrupted = sig;
    if (g_running) ts_model_cancel(g_running);
}
static void catch_interrupts(bool on) {
    static const int sigs[2] = {SIGINT, SIGTERM};
    static bool caught[2];
    for (int i = 0; i < 2; i++) {
        struct sigaction sa, old;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on ? on_interrupt : SIG_DFL;
        sa.sa_flags = on ? SA_RESETHAND | SA_RESTART : 0;
        sigemptyset(&sa.sa_mask);
        if (on && sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue; /* e.g. `cmd &` in a script */
        if (on || caught[i]) sigaction(sigs[i], &sa, NULL);
        caught[i] = on;
    }
}

/* --on-start CMD: the library's startup hook, run once the model is
 * compiled and before its first step. The command runs under /bin/sh with
 * the model in hand: $TS_TENSOR_NAMES is a file of its tensor names, one a
 * line, $TS_MODEL the --model it is. A non-zero exit stops training. */
static ts_status on_start_fail(ts_status code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ts_set_error(code, msg);
}

static ts_status on_start_command(ts_model *m, void *user) {
    const char *cmd = user;
    const char *const *names;
    size_t n = 0;
    char path[4200];
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/tensorscope_names.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        return on_start_fail(TS_ERR_IO, "--on-start: cannot write the list of tensor names (%s): %s", path, strerror(errno));
    }
    ts_status st = ts_model_tensor_names(m, &names, &n);
    for (size_t i = 0; !st && i < n; i++) fprintf(f, "%s\n", names[i]);
    if (fclose(f) != 0 && !st) st = on_start_fail(TS_ERR_IO, "--on-start: writing %s: %s", path, strerror(errno));
    int status = -1;
    if (!st) {
        setenv("TS_TENSOR_NAMES", path, 1);
        fflush(stdout);
        fflush(stderr);
        status = system(cmd);
        unsetenv("TS_TENSOR_NAMES");
    }
    unlink(path);
    if (st) return st;
    if (status == -1) return on_start_fail(TS_ERR_IO, "--on-start '%s': cannot run it: %s", cmd, strerror(errno));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return TS_OK;
    if (WIFEXITED(status))
        return on_start_fail(TS_ERR_INVALID_ARGUMENT, "--on-start '%s' exited with status %d (its output above); training did not start", cmd,
                        WEXITSTATUS(status));
    return on_start_fail(TS_ERR_INVALID_ARGUMENT, "--on-start '%s' was killed by signal %d; training did not start", cmd, WTERMSIG(status));
}

/* Where batches come from: a dataset's loader (images, arrays), or windows
 * of a text corpus drawn from a splitmix64 stream (ts_corpus_sample), so a
 * reference can replay them. A corpus's epoch is as many runs as its
 * training split holds windows' worth of tokens; its state is the number
 * of windows drawn (the stream advances by a constant per draw), so a
 * checkpoint's run count restores it. */
#define EVAL_SEED 0x5eedull /* a corpus's held-out windows: the same for every run */
typedef struct batches {
    ts_loader *loader;
    const ts_corpus *corpus;
    int held_out;            /* the corpus split drawn from */
    int64_t B, T;            /* windows per batch and their length */
    int S;                   /* batches per call (a run's micro-batches) */
    uint64_t seed, rng;
    long runs_per_epoch, run_in_epoch, limit; /* limit: batches in all (held-out), 0: none */
    int64_t epoch, drawn;
    int32_t *x, *y;
} batches;

static ts_status batches_corpus(batches *b, const ts_corpus *c, int held_out, int64_t B, int64_t T, int S, uint64_t seed) {
    *b = (batches){.corpus = c, .held_out = held_out, .B = B, .T = T, .S = S, .seed = seed, .rng = seed};
    b->x = malloc((size_t)(S * B * T) * sizeof *b->x);
    b->y = malloc((size_t)(S * B * T) * sizeof *b->y);
    if (!b->x || !b->y) return TS_ERR_OUT_OF_MEMORY;
    int64_t per_run = (int64_t)S * B * T;
    b->runs_per_epoch = (long)(ts_corpus_length(c, held_out) / per_run);
    if (b->runs_per_epoch < 1) b->runs_per_epoch = 1;
    return TS_OK;
}

static void batches_free(batches *b) {
    ts_loader_free(b->loader);
    free(b->x);
    free(b->y);
    memset(b, 0, sizeof *b);
}

static long batches_runs_per_epoch(const batches *b) { return b->loader ? (long)(ts_loader_batches(b->loader) / b->S) : b->runs_per_epoch; }
static int64_t batches_epoch(const batches *b) { return b->loader ? ts_loader_epoch(b->loader) : b->epoch; }

/* A corpus stream after `runs` runs (a resumed training). */
static void batches_seek(batches *b, int64_t runs) {
    if (b->loader) return; /* the checkpoint holds the loader's position */
    b->drawn = runs * b->S * b->B;
    b->rng = b->seed + (uint64_t)b->drawn * 0x9E3779B97F4A7C15ull; /* splitmix64 adds this per draw */
    b->epoch = runs / b->runs_per_epoch + (runs % b->runs_per_epoch ? 1 : 0);
    b->run_in_epoch = (long)(runs % b->runs_per_epoch);
}

/* The next S batches stacked on axis 0; TS_ERR_NOT_FOUND at the end of an
 * epoch (or of the limit), then the next call starts a new one. */
static ts_status batches_next(batches *b, ts_array *x, ts_array *y) {
    if (b->loader) return ts_loader_next(b->loader, b->S, x, y);
    if (b->limit ? b->drawn >= b->limit * b->B : b->run_in_epoch == b->runs_per_epoch) {
        b->run_in_epoch = 0;
        return TS_ERR_NOT_FOUND;
    }
    if (b->run_in_epoch == 0) b->epoch++;
    int64_t n = (int64_t)b->S * b->B;
    ts_status st = ts_corpus_sample(b->corpus, b->held_out, n, b->T, &b->rng, b->x, b->y);
    if (st) return st;
    b->run_in_epoch++;
    b->drawn += n;
    *x = ts_array_i32(b->x, 2, (int64_t[]){n, b->T});
    *y = ts_array_i32(b->y, 2, (int64_t[]){n, b->T});
    return TS_OK;
}

/* What evaluate reads: `count` samples of ds from `first` in batches of
 * `batch`, or ceil(count / batch) batches of held-out corpus windows drawn
 * from EVAL_SEED. */
static ts_status batches_heldout(batches *b, const cli_model *cm, const ts_dataset *ds, const ts_corpus *c, int64_t first, int64_t count,
                                 long batch) {
    if (!c) {
        *b = (batches){.S = 1};
        return ts_loader_new(&b->loader, ds, (ts_loader_config){.batch_size = batch, .first = first, .count = count});
    }
    ts_status st = batches_corpus(b, c, 1, batch, cm->block, 1, EVAL_SEED);
    b->limit = (long)((count + batch - 1) / batch);
    return st;
}

/* Held-out accuracy (of the next token, for a language model) and mean
 * loss with an inference model of the same graph. */
static ts_status evaluate(ts_model *inf, const cli_model *cm, const ts_dataset *ds, const ts_corpus *corpus, int64_t first, int64_t count,
                          long batch, double *acc, double *loss, bool progress) {
    cli_progress bar; /* on a terminal and without --quiet: evaluation shows progress too */
    cli_progress_start(&bar, progress, "evaluating", (long)((count + batch - 1) / batch));
    batches l;
    ts_status st = batches_heldout(&l, cm, ds, corpus, first, count, batch);
    if (st) {
        batches_free(&l);
        return st;
    }
    int64_t right = 0, seen = 0;
    double nll = 0;
    const char *names[1] = {ts_tensor_name(cm->x)};
    const char *out_name = ts_tensor_name(cm->logp);
    for (;;) {
        ts_array x, y, lp;
        st = batches_next(&l, &x, &y);
        if (st == TS_ERR_NOT_FOUND) {
            st = TS_OK;
            break;
        }
        if (st || (st = ts_model_run(inf, names, &x, 1)) || (st = ts_model_anchored(inf, out_name, &lp))) break;
        const float *p = lp.data;
        const int32_t *lab = y.data;
        int64_t B = ts_array_numel(&y), C = lp.shape[lp.ndim - 1]; /* a row of scores per label ([B] or [B,T]) */
        for (int64_t i = 0; i < B; i++) {
            int64_t best = 0;
            for (int64_t c = 1; c < C; c++)
                if (p[i * C + c] > p[i * C + best]) best = c;
            right += best == lab[i];
            double lse = 0; /* logits: log-softmax them for the loss */
            for (int64_t c = 0; cm->logits && c < C; c++) lse += exp((double)p[i * C + c] - (double)p[i * C + best]);
            nll -= p[i * C + lab[i]] - (cm->logits ? p[i * C + best] + log(lse) : 0);
        }
        seen += B;
        cli_progress_update(&bar, bar.done + 1, nll / (double)seen);
    }
    cli_progress_end(&bar);
    batches_free(&l);
    *acc = seen ? (double)right / (double)seen : 0;
    *loss = seen ? nll / (double)seen : 0;
    return st;
}

/* The stats table under Graphcore's "Step N - Summary Stats" heading: a
 * row per watched tensor of the model's last run, then a row per outfeed
 * key over the records since the last table, named KEY f32[S,*T] (all S
 * records stacked, as the dumps stack a run's; mode last: the latest, S = 1),
 * as Graphcore's example summarises what it dequeued; then the fp16/bf16/fp8
 * range fractions of the tensors watched with --watch-range. */
static void print_stats_table(const ts_model *m, ts_outfeed *q, sink_state *sink) {
    const ts_watch_result *w = NULL;
    size_t n = 0;
    if (ts_model_watch_results(m, &w, &n)) n = 0;
    int outfed = 0;
    if (q && sink->since && ts_outfeed_flush(q) == TS_OK) /* every record so far summarised, the sink idle */
        for (int k = 0; k < sink->n_keys && k < 32; k++) outfed += sink->since_n[k] > 0;
    if (n == 0 && outfed == 0) return;
    char line[512], name[600];
    double scale;
    int64_t skipped;
    if (ts_model_loss_scale(m, &scale, &skipped))
        printf("Step %lld - Summary Stats (loss scale %g, %lld steps skipped)\n%s\n", (long long)ts_model_steps(m), scale, (long long)skipped,
               ts_stats_table_header(line, sizeof line));
    else if (ts_model_precision(m) != TS_F32)
        printf("Step %lld - Summary Stats (%s, no loss scaling)\n%s\n", (long long)ts_model_steps(m), ts_dtype_name(ts_model_precision(m)),
               ts_stats_table_header(line, sizeof line));
    else printf("Step %lld - Summary Stats\n%s\n", (long long)ts_model_steps(m), ts_stats_table_header(line, sizeof line));
    int idx = 0;
    bool ranges = false, replicas = false;
    for (size_t i = 0; i < n; i++) replicas = replicas || w[i].replica >= 0;
    for (size_t i = 0; i < n; i++) {
        if (w[i].run < 0) continue;
        ranges = ranges || (w[i].summary->what & TS_WATCH_RANGE);
        if (!(w[i].summary->what & TS_WATCH_STATS)) continue;
        if (!replicas) snprintf(name, sizeof name, "%s", w[i].name);
        else if (w[i].replica >= 0) snprintf(name, sizeof name, "%s[%d]", w[i].name, w[i].replica); /* one replica's */
        else snprintf(name, sizeof name, "%s[all]", w[i].name);                                     /* reduced over them */
        char from[160] = ""; /* the reduced row: which replica gave its min, its max, a NaN/Inf */
        if (replicas) ts_watch_result_replicas(&w[i], from, sizeof from);
        printf("%s%s%s\n", ts_stats_table_row(idx++, name, &w[i].summary->stats, line, sizeof line), *from ? "  " : "", from);
    }
    for (int k = 0; outfed && k < sink->n_keys && k < 32; k++) {
        if (!sink->since_n[k]) continue;
        ts_array all = stacked_shape(sink->since_proto[k], sink->since_n[k]);
        char shape[160];
        snprintf(name, sizeof name, "%s %s", sink->keys[k], ts_array_shape_str(&all, shape, sizeof shape));
        printf("%s\n", ts_stats_table_row(idx++, name, &sink->since[k].stats, line, sizeof line));
        sink->since_n[k] = 0; /* the next table: the records after this one */
    }
    bool stored = false;
    for (size_t i = 0; i < n; i++) stored = stored || (w[i].run >= 0 && w[i].summary->stored != TS_F32 && w[i].replica < 0);
    if (stored) { /* measured where a tensor was rounded to its 16-bit dtype this run */
        printf("%-5s %-46s %-6s %14s %14s\n", "Index", "Name (16-bit: lost in rounding)", "dtype", "underflowed %", "overflowed %");
        idx = 0;
        for (size_t i = 0; i < n; i++) {
            const ts_summary *s = w[i].summary;
            if (w[i].run < 0 || s->stored == TS_F32 || w[i].replica >= 0) continue;
            printf("%-5d %-46s %-6s %14.4f %14.4f\n", idx++, w[i].name, ts_dtype_name(s->stored), 100 * s->stored_underflow, 100 * s->stored_overflow);
        }
    }
    if (!ranges) return;
    printf("%-5s %-28s %21s %21s %21s %21s\n", "Index", "Name (underflow/overflow %)", "fp16", "bf16", "fp8 e4m3", "fp8 e5m2");
    idx = 0;
    for (size_t i = 0; i < n; i++) {
        const ts_range *r = &w[i].summary->range;
        if (w[i].run < 0 || !(w[i].summary->what & TS_WATCH_RANGE) || w[i].replica >= 0) continue;
        printf("%-5d %-28s %10.4f/%-10.4f %10.4f/%-10.4f %10.4f/%-10.4f %10.4f/%-10.4f\n", idx++, w[i].name, 100 * r->fp16_underflow,
               100 * r->fp16_overflow, 100 * r->bf16_underflow, 100 * r->bf16_overflow, 100 * r->e4m3_underflow, 100 * r->e4m3_overflow,
               100 * r->e5m2_underflow, 100 * r->e5m2_overflow);
    }
}

/* Calls fn for every parameter of the model (the tensors that hold values,
 * buffers too; not constants, such as the GPT's causal mask). */
typedef ts_status (*param_fn)(ts_tensor *t, const ts_array *value, const void *ctx);
static ts_status each_param(const cli_model *cm, param_fn fn, const void *ctx) {
    for (size_t i = 0; i < ts_graph_tensor_count(cm->g); i++) {
        ts_tensor *t = ts_graph_tensor_at(cm->g, i);
        ts_array a;
        if (ts_tensor_info(t, &a) || !a.data || strcmp(ts_tensor_op(t), "Const") == 0) continue;
        ts_status st = fn(t, &a, ctx);
        if (st) return st;
    }
    return TS_OK;
}


/* Same model, same parameter names: copy the values across (an integer
 * constant, such as an imported model's position ids, is the same in both). */
static ts_status copy_one(ts_tensor *t, const ts_array *value, const void *to) {
    if (value->dtype != TS_F32) return TS_OK;
    ts_tensor *dst = ts_graph_find(((const cli_model *)to)->g, ts_tensor_name(t));
    return dst ? ts_param_set(dst, value) : TS_ERR_NOT_FOUND;
}
static ts_status copy_params(const cli_model *from, const cli_model *to) { return each_param(from, copy_one, to); }

static ts_status save_one(ts_tensor *t, const ts_array *value, const void *dir) {
    char *path = cli_path(dir, ts_tensor_name(t), ".npy");
    ts_status st = path ? ts_npy_save(path, value) : TS_ERR_OUT_OF_MEMORY;
    free(path);
    return st;
}

static ts_status save_weights(const cli_model *cm, const char *dir) { return each_param(cm, save_one, dir); }


/* Whether --data is a FILE<suffix>, or a directory holding `member`. */
static bool data_is(const char *path, const char *suffix, const char *member) {
    size_t n = strlen(path), k = strlen(suffix);
    struct stat st;
    char in[4096];
    snprintf(in, sizeof in, "%s/%s", path, member);
    return (n > k && strcmp(path + n - k, suffix) == 0) || stat(in, &st) == 0;
}
/* --data: arrays (an .npz, or a directory with x.npy) rather than MNIST. */
static bool is_array_data(const char *path) { return data_is(path, ".npz", "x.npy"); }
/* --data: a text corpus (FILE.txt, or a directory holding input.txt). */
static bool is_text_data(const char *path) { return data_is(path, ".txt", "input.txt"); }

/* The data's samples must fit the model's input: same sizes after the batch
 * dimension, and float data for a float input. */
static int check_data(const char *cmd, const cli_model *cm, const ts_dataset *ds, const ts_dataset *hds, const char *path) {
    ts_array x, want;
    ts_dataset_arrays(ds, &x, NULL);
    ts_tensor_info(cm->x, &want);
    bool ok = x.ndim == want.ndim;
    for (int i = 1; ok && i < x.ndim; i++) ok = x.shape[i] == want.shape[i];
    char a[128], b[128];
    if (!ok) {
        x.shape[0] = want.shape[0];
        return cli_usage_error(cmd, "the data in %s has samples of %s but the model's input '%s' is %s (batch first); give data of that "
                               "shape, or the model's input shape with --input %s:...", path, ts_array_shape_str(&x, a, sizeof a),
                               ts_tensor_name(cm->x), ts_array_shape_str(&want, b, sizeof b), ts_tensor_name(cm->x));
    }
    if (want.dtype != TS_F32 && want.dtype != x.dtype && !(want.dtype == TS_I64 && x.dtype == TS_I32)) /* the run widens i32 ids */
        return cli_usage_error(cmd, "the model's input '%s' takes %s values; --data feeds float samples, or i32 ones from integer "
                               "arrays (token ids)", ts_tensor_name(cm->x), ts_dtype_name(want.dtype));
    if (hds) {
        ts_array h;
        ts_dataset_arrays(hds, &h, NULL);
        h.shape[0] = x.shape[0];
        if (strcmp(ts_array_shape_str(&h, a, sizeof a), ts_array_shape_str(&x, b, sizeof b)) != 0)
            return cli_usage_error(cmd, "%s: x_heldout's samples are %s, x's are %s", path, a, b);
    }
    ts_array lab, lwant;
    ts_dataset_arrays(ds, NULL, &lab);
    ts_tensor_info(cm->labels, &lwant);
    if (!cm->onehot && lab.ndim != lwant.ndim)
        return cli_usage_error(cmd, "the labels in %s have %d dimensions, the model's '%s' takes %d", path, lab.ndim,
                               ts_tensor_name(cm->labels), lwant.ndim);
    return CLI_OK;
}

/* A corpus trains a language model, whose window fits both splits. */
static int check_corpus(const char *cmd, const cli_model *cm, const ts_corpus *c, const char *path, const train_args *a) {
    if (!cm->lm)
        return cli_usage_error(cmd, "--data %s is a text corpus: it trains a language model (--model gpt, or an ONNX file taking tokens "
                               "[B,T] and giving scores [B,T,V]), and '%s' is not one", path, a->model);
    if (cm->vocab < ts_corpus_vocab_size(c))
        return cli_usage_error(cmd, "--data %s has %d distinct characters, more than the model's vocabulary of %lld", path,
                               ts_corpus_vocab_size(c), (long long)cm->vocab);
    for (int split = 0; split < 2; split++)
        if (ts_corpus_length(c, split) <= cm->block)
            return cli_usage_error(cmd, "--data %s: its %s split has %lld characters, fewer than a window of %lld (lower --block-size)", path,
                                   split ? "held-out" : "training", (long long)ts_corpus_length(c, split), (long long)cm->block + 1);
    if (a->feature_maps.n || a->filters.n)
        return cli_usage_error(cmd, "--feature-maps and --filters draw images and convolutions; a language model has --attention-map");
    return CLI_OK;
}

/* Whether an --anchor before the i-th names the same tensor (in another mode). */
static bool anchored_before(const char *cmd, const cli_list *anchors, int i, const char *name) {
    for (int k = 0; k < i; k++) {
        char other[512];
        ts_output_mode mode;
        int period;
        if (cli_parse_anchor(cmd, anchors->items[k], other, sizeof other, &mode, &period) == CLI_OK && strcmp(other, name) == 0) return true;
    }
    return false;
}

/* The names --feature-maps, --filters and --attention-map take, before any
 * training: each names a tensor of the right kind, its sample in the batch. */
static int check_pictures(const char *cmd, const train_args *a, const cli_model *cm, const cli_model *em) {
    char name[512], shape[160];
    long sample;
    ts_array info;
    for (int i = 0; i < a->feature_maps.n; i++) {
        const char *spec = a->feature_maps.items[i];
        if (!cli_parse_picture_spec(em->g, spec, name, sizeof name, &sample)) return cli_no_match_error(cmd, "--feature-maps", spec, em->g);
        ts_tensor_info(ts_graph_find(em->g, name), &info);
        if (info.data || info.ndim != 4)
            return cli_usage_error(cmd, "--feature-maps %s: takes a 4-D activation [N,C,H,W] such as conv1/Conv2d:0; '%s' is %s%s", spec, name,
                                   info.data ? "a parameter " : "", ts_array_shape_str(&info, shape, sizeof shape));
        if (sample >= info.shape[0])
            return cli_usage_error(cmd, "--feature-maps %s: sample %ld is not in the batch of %lld", spec, sample, (long long)info.shape[0]);
    }
    for (int i = 0; i < a->filters.n; i++) {
        const char *p = a->filters.items[i];
        ts_tensor *t = ts_graph_find(cm->g, p);
        if (!t) return cli_no_match_error(cmd, "--filters", p, cm->g);
        ts_tensor_info(t, &info);
        if (!info.data || info.ndim != 4)
            return cli_usage_error(cmd, "--filters %s: takes a conv weight [O,I,KH,KW] such as conv1.weight; it is %s%s", p,
                                   info.data ? "" : "an activation ", ts_array_shape_str(&info, shape, sizeof shape));
    }
    for (int i = 0; i < a->attention_maps.n; i++) {
        const char *spec = a->attention_maps.items[i];
        if (!em->lm) return cli_usage_error(cmd, "--attention-map draws a language model's attention over its tokens; '%s' is not one", a->model);
        if (!cli_parse_picture_spec(em->g, spec, name, sizeof name, &sample)) return cli_no_match_error(cmd, "--attention-map", spec, em->g);
        ts_tensor_info(ts_graph_find(em->g, name), &info);
        if (info.data || info.ndim != 4 || info.shape[2] != info.shape[3])
            return cli_usage_error(cmd, "--attention-map %s: takes attention probabilities [B,H,T,T] such as blocks.0.attn/Softmax:0; '%s' is %s",
                                   spec, name, ts_array_shape_str(&info, shape, sizeof shape));
        if (sample >= info.shape[0])
            return cli_usage_error(cmd, "--attention-map %s: TENSOR[:SAMPLE] with a sample in 0..%lld", spec, (long long)info.shape[0] - 1);
    }
    return CLI_OK;
}

/* mse against one-hot targets: labels i32 [B] -> f32 [B, C] in *buf. */
static float *to_onehot(ts_array *labels, int64_t C, float *buf) {
    int64_t B = labels->shape[0];
    float *b = realloc(buf, (size_t)(B * C) * sizeof *b);
    if (!b) return NULL;
    memset(b, 0, (size_t)(B * C) * sizeof *b);
    for (int64_t i = 0; i < B; i++) {
        int32_t y = ((const int32_t *)labels->data)[i];
        if (y >= 0 && y < C) b[i * C + y] = 1.0f;
    }
    *labels = ts_array_f32(b, 2, (int64_t[]){B, C});
    return b;
}

typedef struct curve {
    double x[4096], y[4096];
    int64_t n;
} curve;
static void curve_add(curve *c, double x, double y) {
    if (c->n < 4096) c->x[c->n] = x, c->y[c->n++] = y;
}

#define TS_ARRAY_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* eval takes the flags that say which model, which weights and which
 * images; everything about training or observing it is refused, not ignored. */
static const char *const EVAL_FLAGS[] = {"--model", "--data", "--batch-size", "--seed", "--holdout", "--all", "--threads", "--device", "--allow-tf32", "--precision",
                                         "--weights", "--log-verbosity", "--log-vmodule", "--watch-memory", "--metrics", "--quiet", "--input", "--input-value", "--loss", "--labels-input",
                                         "--output", "--layers", "--heads", "--embd", "--block-size", "--vocab"};

static bool is_eval_flag(const char *name, size_t len) {
    for (size_t i = 0; i < TS_ARRAY_COUNT(EVAL_FLAGS); i++)
        if (strlen(EVAL_FLAGS[i]) == len && strncmp(EVAL_FLAGS[i], name, len) == 0) return true;
    return false;
}

/* The eval subset of the train table (with its terminator) in out. */
static const cli_flag *eval_flags(const cli_flag *all, cli_flag *out) {
    size_t n = 0;
    for (const cli_flag *f = all; f->name; f++)
        if (f->kind == FLAG_SECTION || is_eval_flag(f->name, strlen(f->name))) out[n++] = *f;
    out[n] = (cli_flag){NULL, FLAG_BOOL, NULL, NULL, NULL};
    return out;
}

/* The index of the first argument that is a train flag eval does not take, or 0. */
static int train_only_flag(const cli_flag *all, const cli_flag *evalt, int argc, char **argv) {
    for (int i = 2; i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        size_t len = eq ? (size_t)(eq - argv[i]) : strlen(argv[i]);
        if (strncmp(argv[i], "--", 2) != 0 || is_eval_flag(argv[i], len)) {
            for (const cli_flag *f = evalt; f->name; f++) /* skip the value of an eval flag */
                if (!eq && strcmp(f->name, argv[i]) == 0 && f->kind != FLAG_BOOL && f->kind != FLAG_OPT_INT) i++;
            continue;
        }
        for (const cli_flag *f = all; f->name; f++)
            if (strlen(f->name) == len && strncmp(f->name, argv[i], len) == 0) return i;
    }
    return 0;
}

/* --detect-spikes[=K], --spike-window N, --on-spike ACTION: checked, the
 * action and its file (npz:FILE) out. */
static int parse_spikes(const char *cmd, const train_args *a, ts_spike_action *action, const char **npz) {
    if (a->detect_spikes < 0) {
        if (a->on_spike) return cli_usage_error(cmd, "--on-spike says what --detect-spikes does at a spike: add --detect-spikes");
        if (a->spike_window != TS_SPIKE_WINDOW) return cli_usage_error(cmd, "--spike-window is --detect-spikes's window: add --detect-spikes");
        return CLI_OK;
    }
    if (a->spike_window < 2) return cli_usage_error(cmd, "--spike-window must be >= 2 steps, got %ld", a->spike_window);
    const char *s = a->on_spike ? a->on_spike : "continue";
    if (strncmp(s, "npz:", 4) == 0) {
        if (!s[4]) return cli_usage_error(cmd, "--on-spike npz:FILE: give the file the step's tensors are written to (npz:spike.npz)");
        *action = TS_SPIKE_NPZ;
        *npz = s + 4;
        return CLI_OK;
    }
    if (ts_spike_action_parse(s, action) || *action == TS_SPIKE_NPZ)
        return cli_usage_error(cmd, "--on-spike must be continue, skip, stop, npz:FILE or inspect, got '%s'", s);
    return CLI_OK;
}

/* --precision and --loss-scale into the options; a usage error says what is wrong. */
static int set_precision(const char *cmd, const train_args *a, ts_options *o) {
    ts_dtype prec;
    if (cli_precision(a->precision, &prec)) return cli_usage_error(cmd, "--precision must be f32, bf16 or f16, got '%s'", a->precision);
    if (a->precision && ts_options_set_precision(o, prec)) return cli_usage_error(cmd, "--precision: %s", ts_last_error());
    if (!a->loss_scale) return CLI_OK;
    int on = strcmp(a->loss_scale, "off") != 0;
    double init = 65536.0;
    char *end = NULL;
    if (on && strcmp(a->loss_scale, "dynamic") != 0) {
        init = strtod(a->loss_scale, &end);
        if (end == a->loss_scale || *end)
            return cli_usage_error(cmd, "--loss-scale must be dynamic, off or an initial scale such as 1024, got '%s'", a->loss_scale);
        if (!(init >= 1 && init <= 1e30)) /* before the cast to float: 1e39 would be inf */
            return cli_usage_error(cmd, "--loss-scale: the initial scale must be in [1, 1e30], got %s", a->loss_scale);
    }
    if (ts_options_set_loss_scaling(o, on, (float)init, 2.0f, 0.5f, 2000)) return cli_usage_error(cmd, "--loss-scale: %s", ts_last_error());
    return CLI_OK;
}

/* The ranks of an MPI job train for as long as each other: a rank that
 * planned fewer steps would leave the others waiting in a collective until
 * the job's timeout. The settings first, then what follows from them, so a
 * difference is named by the flag that makes it. */
static ts_status agree_plan(const train_args *a, int64_t n_train, int64_t planned_steps, long stop_runs) {
    const struct {
        const char *what;
        long long v;
    } plan[] = {
        {"the held-out samples (--holdout)", a->holdout},
        {"the training samples (the data less --holdout)", (long long)n_train},
        {"the planned steps (--steps)", a->steps},
        {"the epochs (--epochs)", a->epochs},
        {"the step limit (--max-steps)", a->max_steps},
        {"the planned optimizer steps (--epochs or --steps, and the data)", (long long)planned_steps},
        {"the runs before stopping (--max-steps, --steps)", stop_runs},
    };
    for (size_t i = 0; i < sizeof plan / sizeof plan[0]; i++) {
        char v[32];
        snprintf(v, sizeof v, "%lld", plan[i].v);
        ts_status st = ts_dist_agree_on(plan[i].what, v);
        if (st) return st;
    }
    return TS_OK;
}


/* ---- the job: `tensorscope train` and `tensorscope eval` as a sequence of
 * steps (read the flags, set up the data, build the model, its options and
 * observers, compile, train, evaluate, write what was asked), each a
 * function below taking this context. A step returns CLI_OK or the exit
 * code; whatever a step made is freed once, by train_finish. */
typedef struct train_job {
    const char *cmd; /* "train" or "eval" */
    bool eval_only, help;
    train_args a;
    cli_import imp;
    cli_defaults model_defaults;
    /* what the flags parse to */
    ts_optimizer opt;
    ts_lr_schedule sched;
    ts_outfeed_mode of_mode;
    long long dump_limit;
    bool on_device; /* --log-memory logs each run there */
    int64_t trace_first, trace_last;
    ts_check_numerics check;
    ts_spike_action spike_action;
    const char *spike_npz;
    ts_output_mode gmode;
    int gperiod;
    char splits_buf[512];
    const char *splits[16];
    int n_splits;
    ts_pipeline_schedule schedule;
    int K, R;  /* pipeline stages, replicas */
    bool lead; /* rank 0: it alone prints and writes files */
    /* data and models */
    char data_dir[PATH_MAX + 64];
    ts_dataset *ds, *hds;
    ts_corpus *corpus;
    int64_t N, n_train;
    float *onehot;
    cli_model cm, em; /* the training model and the evaluation copy */
    ts_options *o;
    ts_model *tm, *inf;
    int S; /* micro-batches a run */
    bool want_hist;
    /* observers */
    ts_outfeed *q;
    sink_state sink;
    bool dumps_full;
    ts_tb_writer *tb;
    char tb_dir[1100];
    cli_inspector *insp;  /* --break-at-step, --break-on-nan, SIGUSR2 */
    cli_stability *stab;  /* --plot-stability: the signals of each run */
    curve *loss_curve, *acc_curve, *hl_curve;
    /* the plan */
    batches src;
    long long per_run;
    long runs_per_epoch, stop_runs;
    int64_t planned_steps;
    bool scheduled;
    char ckpt[1100];
    /* progress */
    const char *in_names[2];
    long total_runs;
    long long first_samples, samples;
    bool stop;
    double t_start, train_s; /* train_s: training time, evaluation excluded */
    double last_loss, last_acc, last_hl;
    bool last_held;
} train_job;

/* One epoch's progress: its bar, the runs' mean losses summed, when it
 * started (time at the inspector's prompt excluded). */
typedef struct epoch_state {
    long ep;
    cli_progress bar;
    double loss, t0;
    long runs;
    long long samples;
} epoch_state;

/* The flags (eval takes the subset that evaluates; a training flag given
 * to eval is named). */
static int train_parse_flags(train_job *j, int argc, char **argv) {
    train_args *a = &j->a;
    const char *cmd = j->cmd;
    const cli_flag flags[] = {
        {"--model", FLAG_STRING, &a->model, "NAME|FILE.onnx", "built-in model (mlp, cnn, gpt) or an ONNX file; its own flags are at the end"},
        {"--input", FLAG_LIST, &a->inputs, "NAME:SHAPE", "static shape of an input, e.g. x:64x1x28x28 or tokens:32x64 (dim 0 = --batch-size)"},
        {"--input-value", FLAG_LIST, &a->input_values, "NAME=V,..|NAME=F.npy", "an ONNX input's value, bound at import (a shape input: shape=4,-1)"},
        {"--data", FLAG_STRING, &a->data, "DIR|FILE", "MNIST IDX directory (default: data/mnist, else the installed copy), x.npy + labels.npy "
                                                     "directory, .npz, or a text corpus: FILE.txt or a directory with input.txt (gpt's default: data/tinyshakespeare)"},
        {"--epochs", FLAG_INT, &a->epochs, "N", "passes over the training split (default 1; gpt: --steps 1000)"},
        {"--steps", FLAG_INT, &a->steps, "N", "train N optimizer steps instead of --epochs (the plan a --lr-schedule follows)"},
        {"--batch-size", FLAG_INT, &a->batch_size, "B", "micro-batch size (default 64; gpt: 32 windows)"},
        {"--drop-last", FLAG_BOOL, &a->drop_last, NULL, "drop the samples left after an epoch's last whole run (default: kept as a smaller "
                                                       "last run, as PyTorch's DataLoader; docs/cli.md#the-last-batch)"},
        {"--lr", FLAG_FLOAT, &a->lr, "LR", "learning rate (default: mlp 0.01, cnn 0.001, gpt 0.002)"},
        {"--lr-schedule", FLAG_STRING, &a->lr_schedule, "constant|step|cosine", "learning rate per optimizer step (default constant)"},
        {"--warmup-steps", FLAG_INT, &a->warmup_steps, "N", "rise linearly to --lr over the first N steps (default 0)"},
        {"--lr-step-size", FLAG_INT, &a->lr_step_size, "N", "step schedule: multiply the rate by --lr-gamma every N steps (default 1000)"},
        {"--lr-gamma", FLAG_FLOAT, &a->lr_gamma, "G", "step schedule: the factor (default 0.1)"},
        {"--lr-min", FLAG_FLOAT, &a->lr_min, "LR", "cosine schedule: the rate at the last step of --epochs (default 0)"},
        {"--optimizer", FLAG_STRING, &a->optimizer, "sgd|adam|adamw", "optimizer (default: mlp sgd, cnn adam, gpt adamw)"},
        {"--momentum", FLAG_FLOAT, &a->momentum, "M", "SGD momentum (default 0)"},
        {"--weight-decay", FLAG_FLOAT, &a->weight_decay, "WD", "weight decay (default 0; gpt 0.01)"},
        {"--seed", FLAG_INT64, &a->seed, "N", "seed for initialisation, shuffling and a corpus's windows (default 0)"},
        {"--holdout", FLAG_INT, &a->holdout, "N", "last N samples held out for accuracy (default 2000, arrays: 10%; an .npz's x_heldout instead; "
                                                 "a corpus: N windows of its last tenth, default 20 batches)"},
        {"--all", FLAG_BOOL, &a->all, NULL, "eval: evaluate on every image, not only the held-out ones"},
        {"--repeat-count", FLAG_INT, &a->repeat_count, "D", "device iterations: optimizer steps per run (default 1)"},
        {"--gradient-accumulation-count", FLAG_INT, &a->grad_accum, "A", "micro-batches averaged per step (default 1)"},
        {"--max-steps", FLAG_INT, &a->max_steps, "N", "stop after N runs"},
        {"--threads", FLAG_INT, &a->threads, "N", "worker threads (default: all cores)"},
        {"--device", FLAG_STRING, &a->device, "cpu|cuda|cuda:N", "where the model runs (default: $TS_DEVICE, else cpu)"},
        {"--allow-tf32", FLAG_BOOL, &a->allow_tf32, NULL, "on a GPU, float32 products in TF32 on tensor cores (faster, ~1e-3 relative error; default: float32)"},
        {"--anchor", FLAG_LIST, &a->anchors, "NAME[:MODE[:N]]", "anchor a tensor (glob ok); MODE final|every_n|all|sum"},
        {"--output-mode", FLAG_STRING, &a->output_mode, "MODE[:N]", "global output mode of anchors"},
        {"--outfeed", FLAG_LIST, &a->outfeeds, "PATTERN", "stream matching activations / <param>_grad keys to an outfeed"},
        {"--outfeed-pre-accumulated-gradients", FLAG_BOOL, &a->outfeed_pre, NULL, "stream gradients per micro-batch"},
        {"--outfeed-mode", FLAG_STRING, &a->outfeed_mode, "all|last", "all: every record (default); last: only the latest per key"},
        {"--outfeed-depth", FLAG_INT, &a->outfeed_depth, "N", "records the queue holds before training waits (default 64)"},
        {"--outfeed-drop", FLAG_BOOL, &a->outfeed_drop, NULL, "drop (and count) records when the queue is full instead of waiting"},
        {"--watch", FLAG_LIST, &a->watches, "PATTERN", "summarise matching tensors (stats + histograms)"},
        {"--watch-period", FLAG_INT, &a->watch_period, "N", "summarise every N runs (default 1)"},
        {"--watch-stability", FLAG_OPT_STRING, &a->watch_stability, "[GLOB]",
         "stability signals of the layers GLOB names (default every layer): output RMS and max |x|, attention max logit per head, "
         "logits' log-sum-exp, gradient norms, update/weight ratios, Adam's update norm; rows stability/<layer>/<signal>"},
        {"--plot-stability", FLAG_STRING, &a->plot_stability, "DIR", "a heat map per stability signal (layers by steps) into DIR/stability_<signal>.png"},
        {"--watch-range", FLAG_BOOL, &a->watch_range, NULL, "also the fp16/bf16/fp8 underflow and overflow fractions of watched tensors"},
        {"--stats", FLAG_BOOL, &a->stats, NULL, "print the stats table each epoch: watched tensors, and outfeed keys over their records"},
        {"--stats-every", FLAG_INT, &a->stats_every, "N", "print the stats table every N runs ('Step N - Summary Stats')"},
        {"--histogram", FLAG_STRING, &a->histogram, "FILE.png", "write the gradient histogram of anchored gradients"},
        {"--dump-npy", FLAG_STRING, &a->dump_npy, "DIR", "write anchored arrays, and outfeed records as one [S,*T] .npy per key per run"},
        {"--dump-limit", FLAG_STRING, &a->dump_limit, "SIZE", "stop when outfeed dumps reach SIZE; refuse a --dump-debug planned over it (default 1G; 0: no limit)"},
        {"--dump-debug", FLAG_STRING, &a->dump.dir, "DIR", "write every op's output of the chosen steps as .npy with DIR/index.tsv (docs/formats.md#debugger-dump)"},
        {"--dump-steps", FLAG_STRING, &a->dump.steps, "A:B", "with --dump-debug: only runs A..B (1-based; A: = from A on; default all)"},
        {"--dump-ops", FLAG_STRING, &a->dump.ops, "GLOB", "with --dump-debug: only tensors whose name or op type matches (fc1*, MatMul)"},
        {"--grads", FLAG_BOOL, &a->dump.grads, NULL, "with --dump-debug: every gradient too"},
        {"--print-tensor", FLAG_LIST, &a->prints, "NAME", "insert a print op on a tensor (glob ok)"},
        {"--run-single-step", FLAG_BOOL, &a->run_single_step, NULL, "run one step, report, stop"},
        {"--check-numerics", FLAG_STRING, &a->check_numerics, "off|output|op", "stop at the first NaN/Inf and say where"},
        {"--break-at-step", FLAG_INT, &a->break_at, "N", "after run N, open the inspector with training paused (docs/inspector.md; SIGUSR2: after the next run)"},
        {"--break-on-nan", FLAG_BOOL, &a->break_on_nan, NULL, "with --check-numerics: open the inspector at the tensor it stops at, before the step's update"},
        {"--detect-spikes", FLAG_OPT_FLOAT, &a->detect_spikes, "[=K]", "judge the loss and every tensor's RMS, max |x| and gradient norm against "
                                                                       "their running median and MAD; a robust z-score >= K (default 12) is a spike, "
                                                                       "named by the first signal to cross in the step's order (docs/observation.md#spikes)"},
        {"--spike-window", FLAG_INT, &a->spike_window, "N", "with --detect-spikes: the steps each signal's median is taken over (default 32)"},
        {"--on-spike", FLAG_STRING, &a->on_spike, "continue|skip|stop|npz:FILE|inspect", "with --detect-spikes: at a spike train on (default), skip "
                                                                                        "the step's update, stop, write the step's tensors to FILE.npz "
                                                                                        "and stop, or open the inspector before the update"},
        {"--metrics", FLAG_BOOL, &a->metrics, NULL, "print the metrics report at exit"},
        {"--log-verbosity", FLAG_INT, &a->log_verbosity, "0-5", "log level (5: a line per step)"},
        {"--on-start", FLAG_STRING, &a->on_start, "CMD", "run CMD (sh) once the model is compiled, before the first step; $TS_TENSOR_NAMES "
                                                         "lists its tensors; a non-zero exit stops training"},
        {"--log-layer-shapes", FLAG_BOOL, &a->log_layer_shapes, NULL, "log each layer's output shape after every run, and what a recompilation changed"},
        {"--log-memory", FLAG_BOOL, &a->log_memory, NULL, "log memory by class after compile and each epoch, and on a device after each run"},
        {"--log-vmodule", FLAG_STRING, &a->log_vmodule, "NAME=LEVEL,...", "raise the log level of named modules or source files only, e.g. onnx=5,exec=4,memwatch=4"},
        {"--watch-memory", FLAG_OPT_INT, &a->watch_memory, "[=MS]", "sample RSS/PSS/USS of this process and its children every MS ms "
                                                                     "(default 100): the peak in the log, --metrics and TensorBoard"},
        {"--tensorboard", FLAG_STRING, &a->tensorboard, "DIR", "write TensorBoard event files to DIR/<date>_<host> (one run each)"},
        {"--run-name", FLAG_STRING, &a->run_name, "NAME", "with --tensorboard: write to DIR/NAME instead"},
        {"--plot", FLAG_STRING, &a->plot, "FILE.png", "plot loss and accuracy curves"},
        {"--save-graph", FLAG_STRING, &a->save_graph, "FILE.onnx", "write the compiled training graph (forward, backward, optimizer step) as ONNX, before the first step"},
        {"--save-weights", FLAG_STRING, &a->save_weights, "DIR", "save parameters as .npy at the end (and Ctrl-C); a corpus's model also "
                                                                "lm.txt and vocab.txt, for 'tensorscope generate'"},
        {"--save-init", FLAG_STRING, &a->save_init, "DIR", "save the initial parameters as .npy (for a reference run)"},
        {"--weights", FLAG_STRING, &a->weights, "DIR", "load parameters from .npy files first"},
        {"--checkpoint-dir", FLAG_STRING, &a->checkpoint_dir, "DIR", "write DIR/checkpoint.tsck (weights, optimizer, step, data position) at the end"},
        {"--checkpoint-every", FLAG_INT, &a->checkpoint_every, "N", "with --checkpoint-dir: also every N runs"},
        {"--resume", FLAG_STRING, &a->resume, "DIR", "continue from DIR/checkpoint.tsck (same flags; --max-steps counts from the start)"},
        {"--feature-maps", FLAG_LIST, &a->feature_maps, "TENSOR[:SAMPLE]", "PNG grid of a 4-D activation's channels for one held-out sample"},
        {"--filters", FLAG_LIST, &a->filters, "PARAM", "PNG grid of a conv weight's kernels (e.g. conv1.weight)"},
        {"--picture-dir", FLAG_STRING, &a->picture_dir, "DIR", "where --feature-maps and --filters write (default .)"},
        {"--attention-map", FLAG_LIST, &a->attention_maps, "TENSOR[:SAMPLE]", "PNG of a language model's attention [B,H,T,T] for a held-out window"},
        {"--attention-map-dir", FLAG_STRING, &a->attn_dir, "DIR", "where --attention-map writes (default .)"},
        {"--pipeline-stages", FLAG_INT, &a->pipeline_stages, "K", "under mpirun -np K: one pipeline stage per rank (else one replica per rank)"},
        {"--check-replicas", FLAG_INT, &a->check_replicas, "N", "replicas: compare a hash of every replica's weights every N steps, naming the "
                                                               "first replica and parameter that differ (default 100; 0: never)"},
        {"--split-at", FLAG_STRING, &a->split_at, "SCOPE[,SCOPE...]", "the K-1 scopes that start stages 2..K (e.g. fc2,fc3)"},
        {"--pipeline-schedule", FLAG_STRING, &a->pipeline_schedule, "gpipe|1f1b", "gpipe: every forward, then every backward (default); 1f1b: one forward, one backward"},
        {"--trace", FLAG_STRING, &a->trace, "FILE.json", "write a timeline of the run for Perfetto or chrome://tracing (docs/trace.md)"},
        {"--trace-steps", FLAG_STRING, &a->trace_steps, "A:B", "with --trace: only optimizer steps A..B (1-based; A: = from A on; default all)"},
        {"--precision", FLAG_STRING, &a->precision, "f32|bf16|f16", "mixed precision as autocast: matmul and conv inputs in bf16 or f16, "
                                                                  "the rest and the weights f32 (default f32; TS_USE_BF16=1: bf16; docs/precision.md)"},
        {"--loss-scale", FLAG_STRING, &a->loss_scale, "dynamic|off|S", "loss scaling: dynamic (f16's default, from 65536), off, or dynamic from S"},
        {"--quiet", FLAG_BOOL, &a->quiet, NULL, "only errors, warnings and the final result (no progress, no epoch lines)"},
        CLI_ONNX_FLAGS(j->imp),
        CLI_GPT_FLAGS(j->imp),
        {NULL, FLAG_BOOL, NULL, NULL, NULL}};
    cli_flag eval_table[TS_ARRAY_COUNT(flags)];
    const cli_flag *table = j->eval_only ? eval_flags(flags, eval_table) : flags;
    if (j->eval_only) {
        int bad = train_only_flag(flags, eval_table, argc, argv);
        if (bad)
            return cli_usage_error(cmd, "%.*s is a training flag: eval only evaluates the model (its flags are in 'tensorscope eval --help')",
                                   (int)strcspn(argv[bad], "="), argv[bad]);
    }
    return cli_parse(cmd, "[flags]", table, argc, argv, 2, NULL, &j->help);
}

/* The numbers and the optimizer's and schedule's settings, checked before
 * any work; the model's defaults fill what was not given. */
static int train_check_flags(train_job *j) {
    train_args *a = &j->a;
    const char *cmd = j->cmd;
    int rc;
    /* ---- validate before doing any work */
    if (!j->eval_only && a->all) return cli_usage_error(cmd, "--all is an eval flag (train always holds out the last --holdout images)");
    j->model_defaults = cli_model_defaults(a->model);
    if ((rc = cli_model_check(cmd, a->model, &j->imp))) return rc;
    if (a->epochs != -1 && a->steps) return cli_usage_error(cmd, "give --epochs or --steps, not both");
    if (a->steps < 0 || a->steps > 1000000000) return cli_usage_error(cmd, "--steps must be 1..1000000000, got %ld", a->steps);
    if (a->epochs != -1 && (a->epochs < (j->eval_only ? 0 : 1) || a->epochs > 100000))
        return cli_usage_error(cmd, "--epochs must be 1..100000, got %ld", a->epochs);
    if (a->epochs == -1) {
        if (!a->steps) a->steps = j->model_defaults.steps;
        a->epochs = a->steps ? 0 : 1;
    }
    if (a->batch_size == -1) a->batch_size = j->model_defaults.batch_size;
    if (a->batch_size < 1 || a->batch_size > 100000) return cli_usage_error(cmd, "--batch-size must be 1..100000, got %ld", a->batch_size);
    if (!a->optimizer) a->optimizer = j->model_defaults.optimizer;
    if (a->lr == -1) a->lr = j->model_defaults.lr;
    if (a->weight_decay == -1) a->weight_decay = j->model_defaults.weight_decay;
    if (!(a->lr >= 0 && a->lr <= 1e6)) return cli_usage_error(cmd, "--lr must be in [0, 1e6], got %g", a->lr);
    if (a->momentum < 0 || a->momentum >= 1) return cli_usage_error(cmd, "--momentum must be in [0, 1), got %g", a->momentum);
    if (a->weight_decay < 0) return cli_usage_error(cmd, "--weight-decay must be >= 0, got %g", a->weight_decay);
    if (a->repeat_count < 1 || a->repeat_count > 100000) return cli_usage_error(cmd, "--repeat-count must be >= 1, got %ld", a->repeat_count);
    if (a->grad_accum < 1 || a->grad_accum > 100000) return cli_usage_error(cmd, "--gradient-accumulation-count must be >= 1, got %ld", a->grad_accum);
    if (a->threads < 0 || a->threads > 256) return cli_usage_error(cmd, "--threads must be 0..256, got %ld", a->threads);
    if (a->watch_period < 1 || a->watch_period > INT_MAX) return cli_usage_error(cmd, "--watch-period must be 1..%d, got %ld", INT_MAX, a->watch_period);
    if (a->repeat_count * a->grad_accum > 1000000) /* both <= 100000: no overflow in long */
        return cli_usage_error(cmd, "--repeat-count x --gradient-accumulation-count is %ld micro-batches a run; at most 1000000",
                               a->repeat_count * a->grad_accum);
    j->dump_limit = 1LL << 30;
    if (a->dump_limit && cli_parse_size(a->dump_limit, &j->dump_limit))
        return cli_usage_error(cmd, "--dump-limit expects a size such as 500M or 2G (0: no limit), got '%s'", a->dump_limit);
    if (a->holdout < -1) return cli_usage_error(cmd, "--holdout must be >= 0, got %ld", a->holdout);
    if (a->max_steps < 0) return cli_usage_error(cmd, "--max-steps must be >= 0, got %ld", a->max_steps);
    if (a->log_verbosity > 5 || a->log_verbosity < -1) return cli_usage_error(cmd, "--log-verbosity must be 0..5, got %ld", a->log_verbosity);
    if (a->log_vmodule && ts_set_log_vmodule(a->log_vmodule)) return cli_usage_error(cmd, "--log-vmodule: %s", ts_last_error());
    if (cli_optimizer(a->optimizer, a->lr, a->momentum, a->weight_decay, &j->opt)) return cli_usage_error(cmd, "--optimizer must be sgd, adam or adamw, got '%s'", a->optimizer);
    j->sched = (ts_lr_schedule){.warmup_steps = a->warmup_steps, .step_size = a->lr_step_size, .gamma = a->lr_gamma, .min_lr = a->lr_min};
    if (ts_lr_schedule_parse(a->lr_schedule, &j->sched.kind)) return cli_usage_error(cmd, "--lr-schedule must be constant, step or cosine, got '%s'", a->lr_schedule);
    if (a->warmup_steps < 0) return cli_usage_error(cmd, "--warmup-steps must be >= 0, got %ld", a->warmup_steps);
    if (a->lr_step_size < 1) return cli_usage_error(cmd, "--lr-step-size must be >= 1, got %ld", a->lr_step_size);
    if (!(a->lr_gamma >= 0)) return cli_usage_error(cmd, "--lr-gamma must be >= 0, got %g", a->lr_gamma);
    if (!(a->lr_min >= 0) || a->lr_min > a->lr) return cli_usage_error(cmd, "--lr-min must be in [0, --lr], got %g", a->lr_min);
    j->of_mode = TS_OUTFEED_ALL;
    if (a->outfeed_mode && strcmp(a->outfeed_mode, "last") == 0) j->of_mode = TS_OUTFEED_LAST;
    else if (a->outfeed_mode && strcmp(a->outfeed_mode, "all") != 0)
        return cli_usage_error(cmd, "--outfeed-mode must be all or last, got '%s'", a->outfeed_mode);
    if (a->outfeed_depth < 1 || a->outfeed_depth > 1000000) return cli_usage_error(cmd, "--outfeed-depth must be 1..1000000, got %ld", a->outfeed_depth);
    if ((a->outfeed_mode || a->outfeed_drop || a->outfeed_depth != 64) && a->outfeeds.n == 0)
        return cli_usage_error(cmd, "--outfeed-mode, --outfeed-depth and --outfeed-drop set up the queue of --outfeed PATTERN: give one");
    if (a->stats_every < 0) return cli_usage_error(cmd, "--stats-every must be >= 1, got %ld", a->stats_every);
    if (a->stats_every) a->stats = true;
    if (a->watch_range && a->watches.n == 0) return cli_usage_error(cmd, "--watch-range needs --watch PATTERN (the tensors whose ranges to take)");
    if (a->run_name && !a->tensorboard) return cli_usage_error(cmd, "--run-name names a TensorBoard run: it needs --tensorboard DIR");
    if (a->checkpoint_every < 0) return cli_usage_error(cmd, "--checkpoint-every must be >= 1, got %ld", a->checkpoint_every);
    if (a->checkpoint_every && !a->checkpoint_dir) return cli_usage_error(cmd, "--checkpoint-every needs --checkpoint-dir DIR");
    if (a->resume && a->weights) return cli_usage_error(cmd, "--resume restores the weights: leave out --weights");
    if (a->attn_dir && !a->attention_maps.n) return cli_usage_error(cmd, "--attention-map-dir says where --attention-map TENSOR writes: give one");
    return CLI_OK;
}

/* The device, the observation flags (trace, numeric checks, spikes,
 * anchors), the optional features they need and the output paths (their
 * directories made), before any work. */
static int train_check_observation(train_job *j) {
    train_args *a = &j->a;
    const char *cmd = j->cmd;
    int rc;
    const char *device = a->device ? a->device : getenv("TS_DEVICE"), *from = a->device ? "--device" : "TS_DEVICE";
    j->on_device = device && *device && strcmp(device, "cpu") != 0; /* --log-memory logs each run there */
    ts_status dst = device && *device ? ts_device_check(device) : TS_OK; /* before any work */
    if (dst) return dst == TS_ERR_INVALID_ARGUMENT ? cli_usage_error(cmd, "%s: %s", from, ts_last_error()) : cli_runtime_error(from);
    j->trace_first = 1, j->trace_last = 0;
    if (a->trace_steps && !a->trace) return cli_usage_error(cmd, "--trace-steps says which steps --trace FILE.json records: give one");
    if (a->trace_steps && (rc = cli_parse_step_range(cmd, "--trace-steps", a->trace_steps, &j->trace_first, &j->trace_last))) return rc;
    a->dump.limit = j->dump_limit, a->dump.limit_text = a->dump_limit ? a->dump_limit : "1G";
    j->check = TS_CHECK_OFF;
    if (a->check_numerics && ts_check_numerics_parse(a->check_numerics, &j->check))
        return cli_usage_error(cmd, "--check-numerics must be off, output or op, got '%s'", a->check_numerics);
    if ((rc = cli_inspector_check(cmd, a->break_at, a->break_on_nan, j->check != TS_CHECK_OFF))) return rc;
    j->spike_action = TS_SPIKE_CONTINUE;
    j->spike_npz = NULL;
    if ((rc = parse_spikes(cmd, a, &j->spike_action, &j->spike_npz))) return rc;
    j->gmode = TS_OUTPUT_DEFAULT;
    j->gperiod = 0;
    if (a->output_mode && (rc = cli_parse_output_mode(cmd, a->output_mode, &j->gmode, &j->gperiod))) return rc;
    for (int i = 0; i < a->anchors.n; i++) {
        char name[512];
        ts_output_mode mode;
        int period;
        if ((rc = cli_parse_anchor(cmd, a->anchors.items[i], name, sizeof name, &mode, &period))) return rc;
    }
    /* the optional features the flags need, before any directory is made */
    const cli_need needs[] = {{"--histogram", a->histogram ? "plots" : NULL},
                              {"--plot", a->plot ? "plots" : NULL},
                              {"--plot-stability", a->plot_stability ? "plots" : NULL},
                              {"--feature-maps", a->feature_maps.n ? "plots" : NULL},
                              {"--attention-map", a->attention_maps.n ? "plots" : NULL},
                              {"--filters", a->filters.n ? "plots" : NULL},
                              {"--tensorboard", a->tensorboard ? "tensorboard" : NULL},
                              {"--on-spike npz:FILE", j->spike_npz ? "npz" : NULL},
                              {"--model", cli_file_feature(a->model)},
                              {"--data", cli_file_feature(a->data)},
                              {"--weights", cli_file_feature(a->weights)}}; /* --save-weights: always .npy files */
    if ((rc = cli_need_features(cmd, needs, sizeof needs / sizeof needs[0]))) return rc;
    /* output paths: checked (directories created) before any work */
    const struct {
        const char *flag, *path;
        bool dir;
    } outputs[] = {{"--plot", a->plot, false},           {"--histogram", a->histogram, false},  {"--save-weights", a->save_weights, true},
                   {"--dump-npy", a->dump_npy, true},      {"--tensorboard", a->tensorboard, true}, {"--save-init", a->save_init, true},
                   {"--checkpoint-dir", a->checkpoint_dir, true}, {"--picture-dir", a->picture_dir, true},
                   {"--attention-map-dir", a->attn_dir, true}, {"--trace", a->trace, false}, {"--plot-stability", a->plot_stability, true}};
    for (size_t i = 0; i < sizeof outputs / sizeof outputs[0]; i++)
        if (outputs[i].path && (rc = outputs[i].dir ? cli_check_output(cmd, outputs[i].flag, outputs[i].path, true)
                                                    : cli_check_output_file_mkdir(cmd, outputs[i].flag, outputs[i].path)))
            return rc;
    return CLI_OK;
}

/* The log level, the crash handler, and the job's place: under mpirun one
 * pipeline stage per rank with --pipeline-stages, else one replica per
 * rank; rank 0 alone prints and writes files. */
static int train_join_job(train_job *j) {
    train_args *a = &j->a;
    const char *cmd = j->cmd;
    if (a->log_verbosity >= 0) ts_set_log_level((int)a->log_verbosity);
    else if (a->quiet) cli_quiet_logs();
    ts_crash_handler_install();
    /* under mpirun: one pipeline stage per rank with --pipeline-stages, else
     * one replica per rank; rank 0 alone prints and writes files */
    j->K = a->pipeline_stages > 1 ? (int)a->pipeline_stages : 1;
    j->n_splits = 0;
    if (a->split_at) {
        snprintf(j->splits_buf, sizeof j->splits_buf, "%s", a->split_at);
        for (char *tok = strtok(j->splits_buf, ","); tok && j->n_splits < 16; tok = strtok(NULL, ",")) j->splits[j->n_splits++] = tok;
    }
    if (a->pipeline_stages < 0 || a->pipeline_stages > 16) return cli_usage_error(cmd, "--pipeline-stages must be 1..16, got %ld", a->pipeline_stages);
    if (a->check_replicas < 0) return cli_usage_error(cmd, "--check-replicas must be >= 0 (0: never), got %ld", a->check_replicas);
    j->schedule = TS_PIPELINE_GPIPE;
    if (a->pipeline_schedule && strcmp(a->pipeline_schedule, "1f1b") == 0) j->schedule = TS_PIPELINE_1F1B;
    else if (a->pipeline_schedule && strcmp(a->pipeline_schedule, "gpipe") != 0)
        return cli_usage_error(cmd, "--pipeline-schedule must be gpipe or 1f1b, got '%s'", a->pipeline_schedule);
    if (j->n_splits != j->K - 1)
        return cli_usage_error(cmd, "--pipeline-stages %d needs --split-at with %d scope%s (the first ops of stages 2..%d, e.g. fc2), got %d", j->K, j->K - 1,
                               j->K == 2 ? "" : "s", j->K, j->n_splits);
    if (ts_dist_init(NULL, NULL)) {
        fprintf(stderr, "tensorscope %s: %s\n", cmd, ts_last_error());
        return CLI_RUNTIME;
    }
    j->R = j->K > 1 ? 1 : ts_dist_size();
    j->lead = ts_dist_rank() == 0;
    if (!j->lead) {
        a->quiet = true;
        if (ts_get_log_level() > TS_LOG_WARN) ts_set_log_level(TS_LOG_WARN); /* rank 0 logs the job's story */
        if (!freopen("/dev/null", "w", stdout)) return CLI_RUNTIME;
    }
    return CLI_OK;
}

/* The job's own records: the outfeed sink's settings, the curves of
 * --plot, and --watch-memory's sampler. */
static int train_open(train_job *j) {
    train_args *a = &j->a;
    j->sink.dump_dir = j->lead ? a->dump_npy : NULL, j->sink.budget = j->dump_limit, j->sink.replicas = j->R;
    j->loss_curve = calloc(1, sizeof *j->loss_curve), j->acc_curve = calloc(1, sizeof *j->acc_curve), j->hl_curve = calloc(1, sizeof *j->hl_curve);
    if (!j->loss_curve || !j->acc_curve || !j->hl_curve) return CLI_RUNTIME;
    if (a->watch_memory >= 0 && ts_memwatch_start((int)a->watch_memory)) { /* stopped at train_finish: its peak logged */
        cli_runtime_error("--watch-memory");
        return CLI_RUNTIME;
    }
    return CLI_OK;
}

/* The data: a corpus, arrays or MNIST images, and the held-out split. */
static int train_setup_data(train_job *j) {
    train_args *a = &j->a;
    const char *cmd = j->cmd;
    int rc = CLI_RUNTIME;
    if (!a->data) a->data = cli_default_data_dir(j->model_defaults.data, j->data_dir, sizeof j->data_dir);
    const bool text = j->model_defaults.text || is_text_data(a->data);
    if (text ? ts_corpus_load(&j->corpus, a->data)
             : is_array_data(a->data) ? ts_dataset_load_arrays(&j->ds, &j->hds, a->data) : ts_dataset_load_mnist(&j->ds, a->data)) {
        cli_runtime_error(text ? "loading the corpus" : "loading the dataset");
        return rc;
    }
    j->N = j->corpus ? 0 : ts_dataset_size(j->ds);
    if (a->holdout < 0) a->holdout = j->corpus ? 20 * a->batch_size : j->hds ? 0 : is_array_data(a->data) ? (long)(j->N / 10 < 2000 ? j->N / 10 : 2000) : 2000;
    if (!j->corpus && a->holdout >= j->N)
        return cli_usage_error(cmd, "--holdout %ld leaves no training images (the dataset has %lld)", a->holdout, (long long)j->N);
    j->n_train = j->N - a->holdout;
    return CLI_OK;
}

/* The model: built in or imported, checked against the data and the
 * flags that name its tensors, its weights loaded or saved as asked. */
static int train_build_model(train_job *j) {
    train_args *a = &j->a;
    const char *cmd = j->cmd;
    int rc = CLI_RUNTIME;
    if (j->corpus && !j->imp.vocab) j->imp.vocab = ts_corpus_vocab_size(j->corpus);
    ts_status st = cli_model_open(a->model, a->batch_size, (uint64_t)a->seed, &a->prints, &j->imp, &j->cm);
    if (j->cm.unknown)
        return cli_unknown_model(cmd, a->model);
    if (st) {
        if (j->cm.error[0]) rc = cli_usage_error(cmd, "%s", j->cm.error);
        else cli_runtime_error("building the model");
        return rc;
    }
    if ((rc = j->corpus ? check_corpus(cmd, &j->cm, j->corpus, a->data, a) : check_data(cmd, &j->cm, j->ds, j->hds, a->data)) != CLI_OK) return rc;
    for (int i = 0; i < a->prints.n; i++)
        if (!cli_graph_has_match(j->cm.g, a->prints.items[i]))
            return cli_no_match_error(cmd, "--print-tensor", a->prints.items[i], j->cm.g);
    rc = CLI_RUNTIME;
    if (a->weights && ts_graph_load_weights(j->cm.g, a->weights)) { /* checked whole (shapes, NaN) before any is set */
        cli_runtime_error("loading weights");
        return rc;
    }
    if (a->save_init && j->lead && save_weights(&j->cm, a->save_init)) {
        cli_runtime_error("saving the initial weights");
        return rc;
    }
    return CLI_OK;
}

/* The training options: device iterations, accumulation, threads, device,
 * replicas and stages, trace, spikes, --on-start, precision, dumps. */
static int train_set_options(train_job *j) {
    train_args *a = &j->a;
    const char *cmd = j->cmd;
    int rc = CLI_RUNTIME;
    if (!(j->o = ts_options_new())) return rc;
    j->S = (int)(a->repeat_count * a->grad_accum); /* <= 1000000, checked above */
    ts_status st;
    if ((st = ts_options_set_device_iterations(j->o, (int)a->repeat_count)) || (st = ts_options_set_gradient_accumulation(j->o, (int)a->grad_accum)) ||
        (st = ts_options_set_threads(j->o, (int)a->threads)) || (st = ts_options_set_check_numerics(j->o, j->check)) ||
        (a->device && (st = ts_options_set_device(j->o, a->device))) || (st = ts_options_set_allow_tf32(j->o, a->allow_tf32)) ||
        (st = ts_options_set_output_mode(j->o, j->gmode, j->gperiod)) || (st = ts_options_set_replication(j->o, j->R, (int)a->check_replicas)) ||
        (st = ts_options_set_pipeline(j->o, j->K, j->splits, j->n_splits)) || (st = ts_options_set_pipeline_schedule(j->o, j->schedule)) ||
        (a->trace && (st = ts_options_set_trace(j->o, a->trace, j->trace_first, j->trace_last))) ||
        (st = ts_options_set_log_layer_shapes(j->o, a->log_layer_shapes)) ||
        (a->detect_spikes >= 0 && (st = ts_options_detect_spikes(j->o, a->detect_spikes > 0 ? a->detect_spikes : TS_SPIKE_K, (int)a->spike_window,
                                                                 j->spike_action, j->spike_npz))) ||
        (a->on_start && (st = ts_options_set_on_start(j->o, on_start_command, (void *)(uintptr_t)a->on_start)))) {
        return cli_usage_error(cmd, "%s", ts_last_error());
    }
    if ((rc = set_precision(cmd, a, j->o)) != CLI_OK || (rc = cli_dump_debug_options(cmd, &a->dump, j->o)) != CLI_OK) return rc;
    return CLI_OK;
}

/* --outfeed: the queue, its activations and gradients, and the sink that
 * writes and counts its records on the consumer thread. */
static int train_attach_outfeed(train_job *j) {
    train_args *a = &j->a;
    const char *cmd = j->cmd;
    int rc = CLI_RUNTIME;
    if (!a->outfeeds.n) return CLI_OK;
    ts_outfeed_config qc = {.name = "cli", .mode = j->of_mode, .depth = (int)a->outfeed_depth, .filters = a->outfeeds.items,
                            .n_filters = a->outfeeds.n, .drop_when_full = a->outfeed_drop};
    if (ts_outfeed_new(&j->q, &qc)) {
        cli_runtime_error("creating the outfeed");
        return rc;
    }
    char *d = j->sink.dump_dir ? cli_path(a->dump_npy, "outfeed", "") : NULL;
    rc = d ? cli_check_output(cmd, "--dump-npy", d, true) : CLI_OK;
    free(d);
    if (rc) return rc;
    rc = CLI_RUNTIME;
    bool grads = false;
    int marked = 0;
    for (size_t i = 0; i < ts_graph_tensor_count(j->cm.g); i++) {
        ts_tensor *t = ts_graph_tensor_at(j->cm.g, i);
        const char *name = ts_tensor_name(t);
        ts_array info;
        ts_tensor_info(t, &info);
        char key[600];
        snprintf(key, sizeof key, "%s_grad", name);
        if (info.data && cli_list_matches(&a->outfeeds, key)) grads = true;
        if (!info.data && cli_list_matches(&a->outfeeds, name) && ts_outfeed_add(j->cm.g, j->q, name, t) == TS_OK) marked++;
    }
    if (grads) ts_options_outfeed_gradients(j->o, j->q, a->outfeed_pre);
    if (!grads && !marked)
        return cli_usage_error(cmd, "--outfeed: no activation or <param>_grad key matches %s", a->outfeeds.items[0]);
    j->sink.last_only = j->of_mode == TS_OUTFEED_LAST;
    if (a->stats && !(j->sink.since = calloc(32, sizeof *j->sink.since))) {
        cli_runtime_error("allocating the outfeed's stats");
        return rc;
    }
    if (ts_outfeed_set_sink(j->q, on_record, &j->sink)) {
        cli_runtime_error("starting the outfeed consumer");
        return rc;
    }
    return CLI_OK;
}

/* What watches the training model: anchors (the CLI's loss among them),
 * watches and the stats table's, stability signals, the outfeed. */
static int train_attach_observers(train_job *j) {
    train_args *a = &j->a;
    const char *cmd = j->cmd;
    /* the CLI's own loss anchor: the sum over the run, for the mean loss */
    ts_options_anchor(j->o, "cli.loss", "loss", TS_OUTPUT_SUM, 0);
    for (int i = 0; i < a->anchors.n; i++) {
        char name[512];
        ts_output_mode mode;
        int period;
        cli_parse_anchor(cmd, a->anchors.items[i], name, sizeof name, &mode, &period); /* checked above */
        /* one tensor anchored in several modes: each anchor goes by its spec */
        const char *shortn = strpbrk(name, "*?[") ? NULL : anchored_before(cmd, &a->anchors, i, name) ? a->anchors.items[i] : name;
        if (ts_options_anchor(j->o, shortn, name, mode, period))
            return cli_usage_error(cmd, "--anchor %s: %s", a->anchors.items[i], ts_last_error());
    }
    j->want_hist = a->histogram != NULL;
    if (j->want_hist && a->anchors.n == 0) { /* the tutorial's six gradients */
        ts_options_anchor(j->o, NULL, "Gradient___*.weight", TS_OUTPUT_DEFAULT, 0);
        ts_options_anchor(j->o, NULL, "Gradient___*.bias", TS_OUTPUT_DEFAULT, 0);
    }
    int watch_what = TS_WATCH_STATS | (a->tensorboard ? TS_WATCH_HISTOGRAM : 0) | (a->watch_range ? TS_WATCH_RANGE : 0);
    for (int i = 0; i < a->watches.n; i++)
        if (ts_options_watch(j->o, a->watches.items[i], watch_what, (int)a->watch_period))
            return cli_usage_error(cmd, "--watch: %s", ts_last_error());
    if (a->stats && a->watches.n == 0) {
        for (int i = 0; i < a->anchors.n; i++) {
            char name[512];
            ts_output_mode mode;
            int period;
            cli_parse_anchor(cmd, a->anchors.items[i], name, sizeof name, &mode, &period);
            ts_options_watch(j->o, name, TS_WATCH_STATS, (int)a->watch_period);
        }
        if (a->anchors.n == 0 && a->outfeeds.n == 0) ts_options_watch(j->o, "Gradient___*.*", TS_WATCH_STATS, (int)a->watch_period);
    }
    if (a->stats && a->precision && strcmp(a->precision, "f32") != 0) { /* the 16-bit copies and their gradients: what rounding lost */
        char pat[16];
        snprintf(pat, sizeof pat, "*@%s", a->precision);
        ts_options_watch(j->o, pat, TS_WATCH_STATS, (int)a->watch_period);
    }
    if (a->tensorboard) ts_options_watch(j->o, "Accum___*", TS_WATCH_STATS, 1); /* global gradient norm */
    if ((a->watch_stability || a->plot_stability) &&
        ts_options_watch_stability(j->o, a->watch_stability && *a->watch_stability ? a->watch_stability : "*", (int)a->watch_period))
        return cli_usage_error(cmd, "--watch-stability: %s", ts_last_error());
    return train_attach_outfeed(j);
}

/* Evaluation runs on its own copy of the model, so the user's prints and
 * outfeeds see training only; parameters are copied over before each eval. */
static int train_build_eval_model(train_job *j) {
    train_args *a = &j->a;
    const char *cmd = j->cmd;
    int rc = CLI_RUNTIME;
    if (cli_model_open(a->model, a->batch_size, (uint64_t)a->seed, NULL, &j->imp, &j->em) || (a->weights && copy_params(&j->cm, &j->em))) {
        cli_runtime_error("building the evaluation model");
        return rc;
    }
    /* every name a picture flag takes, before training */
    if ((rc = check_pictures(cmd, a, &j->cm, &j->em)) != CLI_OK) return rc;
    rc = CLI_RUNTIME;
    ts_tensor *outs[1] = {j->em.logp};
    ts_options *io = ts_options_new();
    if (!io) return rc;
    ts_options_set_threads(io, (int)a->threads);
    if (a->device) ts_options_set_device(io, a->device); /* checked on the training options */
    ts_options_set_allow_tf32(io, a->allow_tf32);
    set_precision(cmd, a, io);                          /* evaluated as it trains; checked on the training options */
    for (int i = 0; i < a->attention_maps.n; i++) { /* the attention maps read the inference model's anchors */
        char name[512];
        long sample;
        cli_parse_picture_spec(j->em.g, a->attention_maps.items[i], name, sizeof name, &sample); /* checked above */
        ts_options_anchor(io, name, name, TS_OUTPUT_FINAL, 0); /* a repeat is one anchor: the error is ignored */
    }
    ts_status st = ts_model_inference(&j->inf, j->em.g, outs, 1, io);
    ts_options_free(io);
    if (st || ts_model_compile(j->inf)) {
        cli_runtime_error("compiling the inference model");
        return rc;
    }
    return CLI_OK;
}

/* `tensorscope eval`: the held-out split (or --all) through the
 * evaluation model, one line. */
static int train_eval_only(train_job *j) {
    train_args *a = &j->a;
    const char *cmd = j->cmd;
    int rc = CLI_RUNTIME;
    double acc, loss;
    if (!a->weights)
        fprintf(stderr, "tensorscope eval: warning: no --weights given: evaluating the untrained random initialisation (seed %ld); "
                        "save trained weights with 'tensorscope train --save-weights DIR' and pass --weights DIR\n",
                a->seed);
    if (j->corpus && a->all)
        return cli_usage_error(cmd, "--all: a corpus is evaluated on windows of its held-out last tenth (--holdout N of them)");
    int64_t first = a->all ? 0 : j->n_train, count = a->all ? j->N : a->holdout;
    const ts_dataset *eds = j->hds && !a->all ? j->hds : j->ds;
    if (j->hds && !a->all) first = 0, count = ts_dataset_size(j->hds);
    if (count == 0)
        return cli_usage_error(cmd, "nothing to evaluate: --holdout is 0 (use --all)");
    if (evaluate(j->inf, &j->em, eds, j->corpus, first, count, a->batch_size, &acc, &loss, !a->quiet)) {
        cli_runtime_error("evaluating");
        return rc;
    }
    if (j->corpus) printf("eval: %lld windows of %lld tokens, loss %.4f, next-token accuracy %.2f%%\n", (long long)count, (long long)j->em.block, loss, 100 * acc);
    else printf("eval: %lld images, loss %.4f, accuracy %.2f%%\n", (long long)count, loss, 100 * acc);
    return CLI_OK;
}

/* The training model compiled, then what only the compiled model can
 * check (watches, the histogram's gradients) or write (--save-graph). */
static int train_compile(train_job *j) {
    train_args *a = &j->a;
    const char *cmd = j->cmd;
    int rc = CLI_RUNTIME;
    if (ts_model_training(&j->tm, j->cm.g, j->cm.loss, j->o, j->opt) || ts_model_compile(j->tm)) {
        const char *msg = ts_last_error();
        if (strstr(msg, "anchor") || strstr(msg, "period")) rc = cli_usage_error(cmd, "%s", msg);
        else cli_runtime_error("compiling the training model");
        return rc;
    }
    if (ts_model_check_watches(j->tm)) { /* a watch that matches nothing is a typo: the closest names */
        rc = cli_usage_error(cmd, "--watch matches no tensor: %s", ts_last_error());
        return rc;
    }
    if (j->want_hist) { /* the histogram plots anchored gradients: none would be a silent no-op */
        const char *const *an;
        size_t nan_ = 0;
        bool grad = false;
        ts_model_anchor_list(j->tm, &an, &nan_);
        for (size_t i = 0; i < nan_ && !grad; i++) grad = strncmp(an[i], "Gradient___", 11) == 0;
        if (!grad)
            return cli_usage_error(cmd, "--histogram %s plots anchored gradients, and no --anchor names one (add --anchor 'Gradient___*' or leave out --anchor for the six layer gradients)", a->histogram);
    }
    if (a->log_memory) {
        char line[512];
        fprintf(stderr, "%s\n", ts_model_memory_line(j->tm, line, sizeof line));
    }
    if (a->save_graph && ts_model_save_graph(j->tm, a->save_graph)) {
        cli_runtime_error("saving the graph (--save-graph)");
        return rc;
    }
    if (j->R > 1 && !a->quiet) printf("replicas: %d (one per MPI rank), micro-batch %ld each, %ld per step\n", j->R, a->batch_size, a->batch_size * j->R);
    if (j->K > 1 && !a->quiet) printf("pipeline: %d stages (one per MPI rank), split at %s\n", j->K, a->split_at);
    return CLI_OK;
}

/* The loader, runs per epoch and the plan (--epochs or --steps), agreed
 * by the ranks of a job; --dump-debug's size checked against it. */
static int train_plan(train_job *j) {
    train_args *a = &j->a;
    const char *cmd = j->cmd;
    int rc = CLI_RUNTIME;
    /* every rank loads the combined batch of the replicas; each computes its slice */
    j->src.S = j->S;
    if (a->drop_last && j->corpus) {
        rc = cli_usage_error(cmd, "--drop-last is for a dataset's last batch; a corpus's windows are drawn at random, none is left over");
        return rc;
    }
    const bool drop_last = a->drop_last || j->R > 1 || j->K > 1; /* replicas and stages: equal shapes on every rank */
    if (j->corpus ? batches_corpus(&j->src, j->corpus, 0, a->batch_size * j->R, j->cm.block, j->S, (uint64_t)a->seed)
                  : ts_loader_new(&j->src.loader, j->ds, (ts_loader_config){.batch_size = a->batch_size * j->R, .first = 0, .count = j->n_train, .shuffle = 1,
                                                                      .seed = (uint64_t)a->seed, .drop_last = drop_last})) {
        cli_runtime_error("creating the data loader");
        return rc;
    }
    j->per_run = (long long)j->S * a->batch_size * j->R; /* samples one run trains on, over the replicas */
    j->runs_per_epoch = batches_runs_per_epoch(&j->src);
    if (!j->corpus) { /* the samples after the last whole run: one smaller run of S equal micro-batches, or dropped */
        long long left = j->n_train % j->per_run, kept = drop_last ? 0 : left - left % j->S;
        j->runs_per_epoch = (long)(j->n_train / j->per_run) + (kept > 0);
        if (left && j->lead && !a->quiet) {
            fprintf(stderr, "data: %lld training samples make %lld runs of %lld and leave %lld: ", (long long)j->n_train,
                    (long long)(j->n_train / j->per_run), j->per_run, left);
            if (kept)
                fprintf(stderr, "kept as a last run of %lld, micro-batch %lld (PyTorch's drop_last=False; --drop-last drops them), "
                        "whose size compiles the model once more, the first epoch (counted; both programs are kept, each epoch switches between them)", kept, kept / j->S);
            else
                fprintf(stderr, "dropped (%s)", a->drop_last ? "--drop-last" : j->R > 1 ? "replicas train on equal batches"
                                                : j->K > 1 ? "pipeline stages train on equal batches" : "fewer than one sample per micro-batch");
            if (kept && left > kept) fprintf(stderr, "; the %lld that do not split into its %d micro-batches dropped", left - kept, j->S);
            fprintf(stderr, "\n");
        }
    }
    if (j->runs_per_epoch < 1)
        return cli_usage_error(cmd, "one run needs %d batches of %ld (D x A), the training split holds %lld batches", j->S, a->batch_size * j->R,
                             (long long)ts_loader_batches(j->src.loader));
    /* the plan is --epochs or --steps: --max-steps and --run-single-step stop
     * early, so a run stopped and resumed follows the same schedule */
    j->stop_runs = a->max_steps;
    if (a->steps) {
        long runs = (a->steps + a->repeat_count - 1) / a->repeat_count;
        a->epochs = (runs + j->runs_per_epoch - 1) / j->runs_per_epoch;
        if (!j->stop_runs || runs < j->stop_runs) j->stop_runs = runs;
    }
    j->planned_steps = a->steps ? (int64_t)a->steps : (int64_t)a->epochs * j->runs_per_epoch * a->repeat_count;
    if (agree_plan(a, j->corpus ? ts_corpus_length(j->corpus, 0) : j->n_train, j->planned_steps, j->stop_runs)) {
        cli_runtime_error("comparing the ranks' plans");
        return rc;
    }
    if ((rc = cli_dump_debug_plan(cmd, j->tm, &a->dump, j->stop_runs ? j->stop_runs : a->epochs * j->runs_per_epoch, a->quiet)) != CLI_OK) return rc;
    return CLI_OK;
}

/* --tensorboard: the run's directory, its hyperparameters and config. */
static int train_open_tensorboard(train_job *j) {
    train_args *a = &j->a;
    int rc = CLI_RUNTIME;
    if (a->tensorboard && j->lead) {
        if (cli_tb_open(a->tensorboard, a->run_name, &j->tb, j->tb_dir, sizeof j->tb_dir)) {
            cli_runtime_error("opening the TensorBoard log");
            return rc;
        }
        cli_hparams hp = {a->model, a->optimizer, a->lr_schedule, a->lr, a->momentum, a->weight_decay, a->warmup_steps, a->batch_size,
                          a->repeat_count, a->grad_accum, a->epochs, a->seed};
        cli_tb_hparams(j->tb, &hp);
        char cfg[1024];
        snprintf(cfg, sizeof cfg,
                 "model: %s  \noptimizer: %s lr=%g momentum=%g weight_decay=%g  \nbatch size: %ld, repeat count (D): %ld, gradient accumulation (A): %ld  \nepochs: %ld, seed: %ld, train/held-out: %lld/%ld%s",
                 a->model, a->optimizer, a->lr, a->momentum, a->weight_decay, a->batch_size, a->repeat_count, a->grad_accum, a->epochs, a->seed,
                 (long long)(j->corpus ? ts_corpus_length(j->corpus, 0) : j->n_train), j->corpus ? (long)ts_corpus_length(j->corpus, 1) : a->holdout,
                 j->corpus ? " characters" : "");
        if (ts_tb_text(j->tb, "config", 0, cfg)) {
            cli_runtime_error("writing the TensorBoard log");
            return rc;
        }
    }
    return CLI_OK;
}

/* The learning-rate schedule over the plan, and --resume's checkpoint. */
static int train_resume(train_job *j) {
    train_args *a = &j->a;
    const char *cmd = j->cmd;
    int rc = CLI_RUNTIME;
    j->sched.total_steps = j->planned_steps - j->sched.warmup_steps > 0 ? j->planned_steps - j->sched.warmup_steps : 1;
    if (ts_model_set_lr_schedule(j->tm, &j->sched))
        return cli_usage_error(cmd, "%s", ts_last_error());
    j->scheduled = j->sched.kind != TS_LR_CONSTANT || j->sched.warmup_steps > 0;
    if (j->scheduled && !a->quiet)
        fprintf(stderr, "learning rate: %s schedule from %g, %lld warmup steps, %lld steps in all\n", ts_lr_schedule_name(j->sched.kind), a->lr,
                (long long)j->sched.warmup_steps, (long long)j->planned_steps);
    if (a->resume) {
        snprintf(j->ckpt, sizeof j->ckpt, "%s/checkpoint.tsck", a->resume);
        if (ts_checkpoint_load(j->ckpt, j->tm, j->src.loader)) {
            cli_runtime_error("resuming");
            return rc;
        }
        batches_seek(&j->src, ts_model_runs(j->tm));
        if (!a->quiet)
            fprintf(stderr, "resumed from %s at step %lld (run %lld, epoch %lld)\n", j->ckpt, (long long)ts_model_steps(j->tm),
                    (long long)ts_model_runs(j->tm), (long long)batches_epoch(&j->src));
    }
    if (a->checkpoint_dir) { /* the directory: checked (made) before any work */
        snprintf(j->ckpt, sizeof j->ckpt, "%s/checkpoint.tsck", a->checkpoint_dir);
    }
    return CLI_OK;
}

/* A run that failed: a signal stops the epoch (*stop), a spike held for
 * the inspector is skipped (CLI_OK, the loop goes on), anything else ends
 * the job with its exit code. */
static int train_run_failed(train_job *j, ts_status st, ts_array in[2], int64_t steps0, bool *stop) {
    int rc = CLI_RUNTIME;
    if (st == TS_ERR_CANCELLED) { /* a signal here, or on another rank of the job */
        if (!g_interrupted) g_interrupted = SIGINT;
        j->stop = true;
        *stop = true;
        return CLI_OK;
    }
    if (st == TS_ERR_SPIKE && j->spike_action == TS_SPIKE_INSPECT) { /* the step held, its update not applied */
        fprintf(stderr, "tensorscope: %s\n", ts_last_error());
        if (cli_inspector_on_spike(j->insp, j->tm) == CLI_INSPECT_QUIT) return 128 + SIGINT;
        return CLI_OK;
    }
    if (st == TS_ERR_SPIKE) {
        fprintf(stderr, "tensorscope: training stopped by the spike detector: %s\n", ts_last_error());
    } else if (st == TS_ERR_NUMERICS) {
        if (ts_get_log_level() >= TS_LOG_ERROR) /* the library logged the report */
            fprintf(stderr, "tensorscope: training stopped by the numeric check (report above)\n");
        else
            fprintf(stderr, "tensorscope: training stopped by the numeric check:\n%s\n", ts_last_error());
        rc = cli_inspector_on_nan(j->insp, j->tm, j->in_names, in, 2, steps0) == CLI_INSPECT_QUIT ? 128 + SIGINT : CLI_RUNTIME;
    } else {
        cli_runtime_error("training");
    }
    return rc;
}

/* After each run: its mean loss, the inspector's pause, and every observer
 * that reads the model between runs (memory, curves, stability, TensorBoard,
 * the stats table, checkpoints, the outfeed's dumps). Sets j->stop when
 * training ends here. */
static int train_after_run(train_job *j, epoch_state *e, int64_t rows, double run_s, bool pause) {
    train_args *a = &j->a;
    int rc = CLI_RUNTIME;
    double loss = NAN;
    ts_array la;
    if (ts_model_anchored(j->tm, "cli.loss", &la) == TS_OK) { /* SUM over the run (one per replica) -> mean */
        double sum = 0;
        for (int64_t i = 0; i < ts_array_numel(&la); i++) sum += ((const float *)la.data)[i];
        loss = sum / (double)(j->S * ts_array_numel(&la));
    }
    e->loss += loss;
    e->runs++;
    j->total_runs++;
    j->samples += rows;
    e->samples += rows;
    if (pause) {
        cli_progress_end(&e->bar);
        double p0 = cli_now();
        if (cli_inspector_after_run(j->insp, j->tm, j->total_runs) == CLI_INSPECT_QUIT) g_interrupted = SIGINT; /* as Ctrl-C: what was asked is written */
        double paused = cli_now() - p0; /* time at the prompt is not training time */
        e->t0 += paused, j->t_start += paused;
    }
    if (a->log_memory && j->on_device) { /* the device's memory each run (RETURNN's torch_log_memory_usage) */
        char line[512];
        cli_progress_end(&e->bar);
        fprintf(stderr, "step %lld: %s\n", (long long)ts_model_steps(j->tm), ts_model_memory_line(j->tm, line, sizeof line));
    }
    curve_add(j->loss_curve, (double)ts_model_steps(j->tm), loss); /* x: optimizer steps, as TensorBoard's */
    e->bar.written = atomic_load(&j->sink.bytes);
    cli_progress_update(&e->bar, e->runs, loss);
    if (a->plot_stability && j->lead && cli_stability_record(&j->stab, j->tm)) {
        cli_progress_end(&e->bar);
        cli_runtime_error("keeping the stability signals");
        return rc;
    }
    if (j->tb && cli_tb_step(j->tb, j->tm, loss, (double)rows / run_s, j->R)) { /* a full disk stops training now */
        cli_progress_end(&e->bar);
        cli_runtime_error("writing the TensorBoard log");
        return rc;
    }
    if (a->stats_every && j->total_runs % a->stats_every == 0) {
        cli_progress_end(&e->bar);
        print_stats_table(j->tm, j->q, &j->sink);
    }
    if (j->lead && a->checkpoint_dir && a->checkpoint_every && j->total_runs % a->checkpoint_every == 0 && ts_checkpoint_save(j->ckpt, j->tm, j->src.loader)) {
        cli_progress_end(&e->bar);
        cli_runtime_error("writing the checkpoint");
        return rc;
    }
    if (atomic_load(&j->sink.failed)) {
        cli_progress_end(&e->bar);
        fprintf(stderr, "tensorscope: writing outfeed dumps: %s\n", j->sink.err);
        return rc;
    }
    if (atomic_load(&j->sink.full) && !j->dumps_full) {
        /* only rank 0 writes dumps: the ranks of a job (replicas or
         * stages) train on together, without further dumps (one rank
         * stopping alone would leave the others waiting for it) */
        cli_progress_end(&e->bar);
        fprintf(stderr, "tensorscope: --dump-npy: the outfeed dumps reached --dump-limit %s (%lld bytes written) at run %ld; "
                "%s (raise --dump-limit, 0 for no limit, or dump fewer keys)\n",
                a->dump_limit ? a->dump_limit : "1G", (long long)atomic_load(&j->sink.bytes), j->total_runs,
                ts_dist_size() > 1 ? "no more dumps are written, all ranks train on" : "stopping");
        j->dumps_full = true;
        if (ts_dist_size() <= 1) j->stop = true;
    }
    if (g_interrupted || a->run_single_step || (j->stop_runs && j->total_runs >= j->stop_runs)) j->stop = true;
    return CLI_OK;
}

/* One epoch's runs, until the loader's epoch ends or training stops. */
static int train_epoch(train_job *j, epoch_state *e) {
    int rc;
    for (;;) {
        ts_array in[2];
        ts_status st = batches_next(&j->src, &in[0], &in[1]);
        if (st == TS_ERR_NOT_FOUND) break;
        double r0 = cli_now();
        if (!st && j->cm.onehot && !(j->onehot = to_onehot(&in[1], j->cm.onehot, j->onehot))) st = TS_ERR_OUT_OF_MEMORY;
        bool pause = !st && cli_inspector_arm(j->insp, j->tm, j->total_runs + 1);
        int64_t steps0 = ts_model_steps(j->tm);
        if (st || (st = ts_model_run(j->tm, j->in_names, in, 2))) {
            bool stop = false;
            cli_progress_end(&e->bar);
            if ((rc = train_run_failed(j, st, in, steps0, &stop)) != CLI_OK) return rc;
            if (stop) break;
            continue;
        }
        if ((rc = train_after_run(j, e, in[0].shape[0], cli_now() - r0, pause)) != CLI_OK) return rc;
        if (j->stop) break;
    }
    cli_progress_end(&e->bar);
    return CLI_OK;
}

/* The end of an epoch: the held-out evaluation, the epoch's line, its
 * TensorBoard scalars, the stats table and the memory line. */
static int train_evaluate(train_job *j, epoch_state *e) {
    train_args *a = &j->a;
    int rc = CLI_RUNTIME;
    double ep_s = cli_now() - e->t0, acc = 0, hl = 0;
    bool held = a->holdout > 0 || j->hds;
    if (held && (copy_params(&j->cm, &j->em) || evaluate(j->inf, &j->em, j->hds ? j->hds : j->ds, j->corpus, j->hds ? 0 : j->n_train,
                                                          j->hds ? ts_dataset_size(j->hds) : a->holdout, a->batch_size, &acc, &hl, !a->quiet))) {
        cli_runtime_error("evaluating");
        return rc;
    }
    if (held) {
        curve_add(j->acc_curve, (double)ts_model_steps(j->tm), 100 * acc); /* percent, as printed */
        curve_add(j->hl_curve, (double)ts_model_steps(j->tm), hl);
    }
    j->train_s += ep_s;
    j->last_loss = e->runs ? e->loss / (double)e->runs : NAN, j->last_acc = acc, j->last_hl = hl, j->last_held = held;
    if (!a->quiet) { /* --quiet: the final line says how it ended */
        printf("epoch %ld/%ld: loss %.4f", e->ep, a->epochs, j->last_loss);
        if (held) printf("  held-out accuracy %.2f%% (loss %.4f)", 100 * acc, hl);
        printf("  %.2f s, %.0f samples/s", ep_s, (double)e->samples / ep_s);
        if (j->scheduled) printf("  lr %.6g", ts_model_learning_rate(j->tm));
        if (a->dump_npy && j->q) printf("  outfeed dumps %.1f MB", (double)atomic_load(&j->sink.bytes) / 1e6);
        printf("\n");
        fflush(stdout);
    }
    if (j->tb && ((held && cli_tb_eval(j->tb, ts_model_steps(j->tm), hl, acc)) || ts_tb_flush(j->tb))) {
        cli_runtime_error("writing the TensorBoard log");
        return rc;
    }
    if (a->stats && !a->stats_every) print_stats_table(j->tm, j->q, &j->sink);
    if (a->log_memory) {
        char line[512];
        fprintf(stderr, "%s\n", ts_model_memory_line(j->tm, line, sizeof line));
    }
    return CLI_OK;
}

/* The epochs, from where a resumed run left off; Ctrl-C and SIGTERM stop
 * them between runs. */
static int train_loop(train_job *j) {
    train_args *a = &j->a;
    int rc;
    j->in_names[0] = ts_tensor_name(j->cm.x), j->in_names[1] = ts_tensor_name(j->cm.labels);
    j->total_runs = (long)ts_model_runs(j->tm);
    j->first_samples = (long long)j->total_runs * j->per_run; /* a resumed run's samples before it */
    j->samples = j->first_samples;                            /* what the runs trained on (a smaller last run's included) */
    long first_epoch = batches_epoch(&j->src) > 1 ? (long)batches_epoch(&j->src) : 1;
    j->stop = j->stop_runs && j->total_runs >= j->stop_runs;
    j->t_start = cli_now(), j->train_s = 0;
    j->last_loss = NAN, j->last_acc = 0, j->last_hl = 0;
    j->last_held = false;
    catch_interrupts(true);
    g_running = j->tm;
    if (!j->eval_only) j->insp = cli_inspector_new(j->cmd, a->break_at, a->break_on_nan);
    for (long ep = first_epoch; ep <= a->epochs && !j->stop; ep++) {
        epoch_state e = {.ep = ep};
        char label[64];
        snprintf(label, sizeof label, "epoch %ld/%ld", ep, a->epochs);
        cli_progress_start(&e.bar, !a->quiet, label, j->runs_per_epoch);
        e.t0 = cli_now();
        if ((rc = train_epoch(j, &e)) != CLI_OK || (rc = train_evaluate(j, &e)) != CLI_OK) return rc;
    }
    g_running = NULL;
    if (g_interrupted)
        fprintf(stderr, "tensorscope: interrupted by %s after %ld runs (%lld steps): writing what was asked, then exiting (again to exit at once)\n",
                g_interrupted == SIGINT ? "SIGINT" : "SIGTERM", j->total_runs, (long long)ts_model_steps(j->tm));
    return CLI_OK;
}

/* The final result: what was trained, and how the last epoch ended (its
 * mean loss and held-out accuracy, as its epoch line); samples/s over the
 * training time (evaluation excluded). The checkpoint first. */
static int train_report(train_job *j) {
    int rc = CLI_RUNTIME;
    if (j->a.checkpoint_dir && j->lead) {
        if (ts_checkpoint_save(j->ckpt, j->tm, j->src.loader)) {
            cli_runtime_error("writing the checkpoint");
            return rc;
        }
        printf("checkpoint at step %lld in %s\n", (long long)ts_model_steps(j->tm), j->ckpt);
    }
    printf("trained %ld runs (%lld steps, %lld samples) in %.2f s", j->total_runs, (long long)ts_model_steps(j->tm), j->samples, cli_now() - j->t_start);
    if (j->train_s > 0) {
        printf(": loss %.4f", j->last_loss);
        if (j->last_held) printf("  held-out accuracy %.2f%% (loss %.4f)", 100 * j->last_acc, j->last_hl);
        printf("  %.0f samples/s", (double)(j->samples - j->first_samples) / j->train_s);
        if (j->scheduled) printf("  lr %.6g", ts_model_learning_rate(j->tm));
    }
    printf("\n");
    return CLI_OK;
}

/* ---- what the user asked to keep */

/* The anchored tensors of the last run: a line each, and --dump-npy's files. */
static int train_write_anchors(train_job *j) {
    train_args *a = &j->a;
    int rc = CLI_RUNTIME;
    const char *const *anames;
    size_t n_anchors = 0;
    ts_model_anchor_list(j->tm, &anames, &n_anchors);
    if (a->anchors.n) {
        printf("anchored tensors (last run):\n");
        for (size_t i = 0; i < n_anchors; i++) {
            if (strcmp(anames[i], "cli.loss") == 0 || strcmp(anames[i], "loss") == 0) continue;
            ts_array arr;
            if (ts_model_anchored(j->tm, anames[i], &arr)) continue;
            ts_summary s;
            char line[512];
            if (arr.dtype == TS_F32 && ts_summarize_f32(arr.data, ts_array_numel(&arr), TS_WATCH_STATS, &s) == TS_OK)
                printf("  %s\n", ts_summary_line(anames[i], &arr, &s.stats, line, sizeof line));
        }
    }
    if (a->dump_npy && j->lead) {
        int written = 0;
        for (size_t i = 0; i < n_anchors; i++) {
            if (strcmp(anames[i], "cli.loss") == 0) continue;
            ts_array arr;
            char fname[512];
            if (ts_model_anchored(j->tm, anames[i], &arr)) continue;
            cli_file_safe(anames[i], fname, sizeof fname);
            char *path = cli_path(a->dump_npy, fname, ".npy");
            ts_status wst = path ? ts_npy_save(path, &arr) : TS_ERR_OUT_OF_MEMORY;
            free(path);
            if (wst) {
                cli_runtime_error("writing .npy");
                return rc;
            }
            written++;
        }
        if (cli_dump_order_write(a->dump_npy, anames, n_anchors)) return rc; /* their graph order, for `compare --rank` */
        printf("wrote %d anchored arrays to %s/\n", written, a->dump_npy);
    }
    return CLI_OK;
}

/* --histogram: the anchored gradients of the last micro-batch. */
static int train_write_histogram(train_job *j) {
    train_args *a = &j->a;
    int rc = CLI_RUNTIME;
    const char *const *anames;
    size_t n_anchors = 0;
    ts_model_anchor_list(j->tm, &anames, &n_anchors);
    if (j->want_hist && j->lead) {
        ts_array arrs[64];
        int n = 0;
        for (size_t i = 0; i < n_anchors && n < 64; i++)
            if (strncmp(anames[i], "Gradient___", 11) == 0 && ts_model_anchored(j->tm, anames[i], &arrs[n]) == TS_OK) n++;
        char caption[512];
        int used = 0;
        caption[0] = '\0';
        for (size_t i = 0, k = 0; i < n_anchors && k < (size_t)n && used < (int)sizeof caption; i++)
            if (strncmp(anames[i], "Gradient___", 11) == 0)
                used += snprintf(caption + used, sizeof caption - (size_t)used, "%s%s", k++ ? ", " : "", anames[i] + 11);
        if (used < (int)sizeof caption)
            snprintf(caption + used, sizeof caption - (size_t)used, " gradients at step %lld (last micro-batch)", (long long)ts_model_steps(j->tm));
        if (n == 0) fprintf(stderr, "tensorscope: --histogram: no anchored Gradient___ tensor to plot (anchor some with --anchor)\n");
        else if (ts_plot_gradient_histogram_captioned(a->histogram, arrs, n, caption)) {
            cli_runtime_error("writing the histogram");
            return rc;
        } else printf("Saved histogram to %s\n", a->histogram);
    }
    return CLI_OK;
}

/* --plot-stability's heat maps and --plot's curves. */
static int train_write_plots(train_job *j) {
    train_args *a = &j->a;
    int rc = CLI_RUNTIME;
    if (a->plot_stability && j->lead && (rc = cli_stability_plot(j->stab, a->plot_stability)) != CLI_OK) return rc;
    rc = CLI_RUNTIME;
    if (a->plot && j->lead) {
        ts_series losses[2] = {{"training loss (mean of each run)", j->loss_curve->x, j->loss_curve->y, j->loss_curve->n},
                               {"held-out loss (each epoch)", j->hl_curve->x, j->hl_curve->y, j->hl_curve->n}};
        ts_series accs[1] = {{"held-out accuracy (each epoch)", j->acc_curve->x, j->acc_curve->y, j->acc_curve->n}};
        ts_plot_panel panels[2] = {{"loss", losses, a->holdout > 0 ? 2 : 1}, {"accuracy (%)", accs, 1}};
        if (ts_plot_panels(a->plot, "Training", "optimizer step", panels, a->holdout > 0 ? 2 : 1)) {
            cli_runtime_error("writing the plot");
            return rc;
        }
        printf("Saved plot to %s\n", a->plot);
    }
    return CLI_OK;
}

/* --feature-maps, --filters and --attention-map, from a held-out batch
 * through the evaluation model. */
static int train_write_pictures(train_job *j) {
    train_args *a = &j->a;
    int rc = CLI_RUNTIME;
    if ((a->feature_maps.n || a->filters.n) && j->lead) {
        const char *dir = a->picture_dir ? a->picture_dir : ".";
        ts_loader *pl = NULL;
        ts_array px, py;
        int64_t first = a->holdout > 0 ? j->n_train : 0;
        if (copy_params(&j->cm, &j->em) ||
            ts_loader_new(&pl, j->ds, (ts_loader_config){.batch_size = a->batch_size, .first = first, .count = a->batch_size}) ||
            ts_loader_next(pl, 1, &px, &py)) {
            ts_loader_free(pl);
            cli_runtime_error("preparing a held-out batch for the pictures");
            return rc;
        }
        int prc = CLI_OK;
        for (int i = 0; i < a->feature_maps.n && prc == CLI_OK; i++) prc = cli_feature_maps(&j->em, &px, a->feature_maps.items[i], dir, j->tb, ts_model_steps(j->tm));
        for (int i = 0; i < a->filters.n && prc == CLI_OK; i++) prc = cli_filters(&j->cm, a->filters.items[i], dir, j->tb, ts_model_steps(j->tm));
        ts_loader_free(pl);
        if (prc != CLI_OK)
            return prc;
    }
    if (a->attention_maps.n && j->lead) {
        batches hb = {0};
        ts_array hx, hy;
        const char *xname[1] = {ts_tensor_name(j->em.x)};
        int prc = CLI_RUNTIME;
        if (copy_params(&j->cm, &j->em) || batches_heldout(&hb, &j->em, NULL, j->corpus, 0, a->batch_size, a->batch_size) || batches_next(&hb, &hx, &hy) ||
            ts_model_run(j->inf, xname, &hx, 1))
            cli_runtime_error("running a held-out batch for the attention maps");
        else
            prc = cli_attention_maps(j->inf, &j->em, &a->attention_maps, hx.data, j->corpus, a->attn_dir ? a->attn_dir : ".", j->tb, ts_model_steps(j->tm));
        batches_free(&hb);
        if (prc != CLI_OK)
            return prc;
    }
    return CLI_OK;
}

/* --save-weights: the parameters, and a corpus's lm.txt and vocab.txt. */
static int train_save_weights(train_job *j) {
    train_args *a = &j->a;
    int rc = CLI_RUNTIME;
    if (a->save_weights && j->lead) {
        if (save_weights(&j->cm, a->save_weights)) {
            cli_runtime_error("saving weights");
            return rc;
        }
        if (j->corpus && (rc = cli_lm_save(a->save_weights, a->model, &j->imp, &j->cm, j->corpus)) != CLI_OK) return rc;
        printf("saved weights to %s/\n", a->save_weights);
    }
    return CLI_OK;
}

static int train_write_outputs(train_job *j) {
    int rc;
    if ((rc = train_write_anchors(j)) || (rc = train_write_histogram(j)) || (rc = train_write_plots(j)) || (rc = train_write_pictures(j)) ||
        (rc = train_save_weights(j)))
        return rc;
    return j->dumps_full ? CLI_RUNTIME : CLI_OK;
}

/* The one exit of a job that got past its flags: the outfeed drained and
 * counted, the trace and TensorBoard closed, the metrics report, then
 * everything the steps made freed. */
static int train_finish(train_job *j, int rc) {
    train_args *a = &j->a;
    if (j->q) {
        ts_outfeed_counts oc = ts_outfeed_get_counts(j->q);
        ts_outfeed_free(j->q); /* drains: every record reaches the sink */
        j->q = NULL;
        sink_finish(&j->sink);
        if (atomic_load(&j->sink.failed) && rc == CLI_OK) {
            fprintf(stderr, "tensorscope: writing outfeed dumps: %s\n", j->sink.err);
            rc = CLI_RUNTIME;
        }
        if (rc == CLI_OK || j->dumps_full) {
            printf("outfeed: %ld records", j->sink.records);
            for (int k = 0; k < j->sink.n_keys; k++) printf("%s %s x%ld", k ? "," : ":", j->sink.keys[k], j->sink.counts[k]);
            if (a->dump_npy) printf(" (%ld files written to %s/outfeed/, one [S,%s*T] array per key per run)", j->sink.written, a->dump_npy, j->R > 1 ? "R," : "");
            printf("\n");
            if (oc.dropped) /* the library warned as it happened; the count, once */
                printf("outfeed: %lld records dropped (%s)\n", (long long)oc.dropped,
                       a->outfeed_drop ? "--outfeed-drop: the queue was full" : "more keys waited than --outfeed-depth");
        }
    }
    if (j->tm && ts_model_finish(j->tm)) { /* --trace with an open range: its file, whose error is the run's */
        fprintf(stderr, "tensorscope: %s\n", ts_last_error());
        if (rc == CLI_OK) rc = CLI_RUNTIME;
    }
    ts_memwatch_stop();
    if (j->tb) ts_tb_hparams_end(j->tb, rc == CLI_OK);
    if (j->tb && ts_tb_close(j->tb) && rc == CLI_OK) rc = cli_runtime_error("closing the TensorBoard log");
    else if (j->tb && rc == CLI_OK) printf("TensorBoard logs in %s (run: tensorboard --logdir %s)\n", j->tb_dir, a->tensorboard);
    if (a->metrics) {
        char *r = ts_metrics_report();
        if (r) fputs(r, stdout);
        ts_string_free(r);
    }
    g_running = NULL;
    batches_free(&j->src);
    ts_corpus_free(j->corpus);
    ts_model_free(j->tm);
    ts_model_free(j->inf);
    ts_options_free(j->o);
    ts_graph_free(j->cm.g);
    ts_graph_free(j->em.g);
    ts_dataset_free(j->ds);
    ts_dataset_free(j->hds);
    free(j->onehot);
    free(j->sink.since);
    free(j->loss_curve);
    cli_stability_free(j->stab);
    free(j->acc_curve);
    free(j->hl_curve);
    catch_interrupts(false);
    cli_inspector_free(j->insp);
    if (rc == CLI_OK && g_interrupted) rc = 128 + g_interrupted; /* 130, 143: what shells expect */
    if (ts_dist_finalize() && rc == CLI_OK) rc = cli_runtime_error("leaving the MPI job");
    return rc;
}

/* Past its flags, a job either evaluates (eval) or trains; every step
 * returns CLI_OK or the exit code, and train_finish frees what they made. */
static int train_run(train_job *j) {
    int rc;
    if ((rc = train_open(j)) || (rc = train_setup_data(j)) || (rc = train_build_model(j)) || (rc = train_set_options(j)) ||
        (rc = train_attach_observers(j)) || (rc = train_build_eval_model(j)))
        return rc;
    if (j->eval_only) return train_eval_only(j);
    if ((rc = train_compile(j)) || (rc = train_plan(j)) || (rc = train_open_tensorboard(j)) || (rc = train_resume(j)) || (rc = train_loop(j)) ||
        (rc = train_report(j)))
        return rc;
    return train_write_outputs(j);
}

int cmd_train(int argc, char **argv, bool eval_only) {
    train_job j = {.cmd = eval_only ? "eval" : "train", .eval_only = eval_only,
                   .a = {.model = "mlp", .data = NULL, .optimizer = NULL, .epochs = -1, .batch_size = -1, .seed = 0,
                         .holdout = -1, .repeat_count = 1, .grad_accum = 1, .threads = 0, .log_verbosity = -1, .watch_period = 1,
                         .lr = -1, .weight_decay = -1, .check_numerics = NULL, .lr_schedule = "constant", .lr_step_size = 1000, .lr_gamma = 0.1,
                         .outfeed_depth = 64, .watch_memory = -1, .check_replicas = 100, .detect_spikes = -1,
                         .spike_window = TS_SPIKE_WINDOW}};
    j.imp = (cli_import){.inputs = &j.a.inputs, .values = &j.a.input_values};
    int rc = train_parse_flags(&j, argc, argv);
    if (rc || j.help || (rc = train_check_flags(&j)) || (rc = train_check_observation(&j)) || (rc = train_join_job(&j))) return rc;
    return train_finish(&j, train_run(&j));
}
