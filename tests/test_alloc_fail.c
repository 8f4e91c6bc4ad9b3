/* test_alloc_fail.c -- allocation failure at every point of a small MLP's
 * life, and no allocation in the step loop.
 *
 * A counting allocator (ts_set_allocator) wraps malloc/realloc/free, counts
 * every alloc and realloc call and the blocks alive, and can fail the Nth
 * call. First one full cycle (graph build, options, training model, compile,
 * two runs, anchors read, free) is measured: K calls. Then for N = 1..K the
 * cycle runs again with call N failing, each in a forked child so that a
 * crash is reported with its call number instead of ending the test: every
 * step must either succeed or return TS_ERR_OUT_OF_MEMORY with a message,
 * never crash, and once freed no block may be left alive. (Build with -DTS_SANITIZE=ON to have ASan check
 * the same for use-after-free and leaks outside the allocator's view.)
 *
 * Then the guarantee "no malloc in the step loop": after a first run, ten
 * runs of a compiled model must make zero allocator calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "tensorscope.h"

typedef struct counting {
    long calls;     /* alloc + realloc calls so far */
    long fail_at;   /* the call number that fails (1-based), 0 = none */
    long live;      /* blocks alive */
    long failed;    /* calls refused */
} counting;

static counting cnt;

static void *c_alloc(void *u, size_t n)
{
    (void)u;
    long k = __atomic_add_fetch(&cnt.calls, 1, __ATOMIC_SEQ_CST);
    if (k == cnt.fail_at) {
        __atomic_add_fetch(&cnt.failed, 1, __ATOMIC_SEQ_CST);
        return NULL;
    }
    void *p = malloc(n);
    if (p)
        __atomic_add_fetch(&cnt.live, 1, __ATOMIC_SEQ_CST);
    return p;
}

static void *c_realloc(void *u, void *p, size_t n)
{
    (void)u;
    long k = __atomic_add_fetch(&cnt.calls, 1, __ATOMIC_SEQ_CST);
    if (k == cnt.fail_at) {
        __atomic_add_fetch(&cnt.failed, 1, __ATOMIC_SEQ_CST);
        return NULL;
    }
    void *q = realloc(p, n);
    if (q && !p)
        __atomic_add_fetch(&cnt.live, 1, __ATOMIC_SEQ_CST);
    return q;
}

static void c_free(void *u, void *p)
{
    (void)u;
    if (p)
        __atomic_sub_fetch(&cnt.live, 1, __ATOMIC_SEQ_CST);
    free(p);
}

static const ts_allocator COUNTING = {c_alloc, c_realloc, c_free, NULL};

enum { B = 8, D = 2, C = 10 };

typedef struct data {
    float x[D * B * 16];
    int32_t y[D * B];
    ts_array in[2];
} data;

static const char *const IN_NAMES[2] = {"x", "labels"};

static void data_make(data *d)
{
    for (int i = 0; i < D * B * 16; i++)
        d->x[i] = (float)((i * 29 % 31) - 15) / 15.0f;
    for (int i = 0; i < D * B; i++)
        d->y[i] = (i * 3) % C;
    d->in[0] = ts_array_f32(d->x, 4, (int64_t[]){D * B, 1, 4, 4});
    d->in[1] = ts_array_i32(d->y, 1, (int64_t[]){D * B});
}

/* What one cycle saw: the first failing status (TS_OK if none) and where. */
typedef struct outcome {
    ts_status st;
    const char *where;
    char msg[256];
} outcome;

static void note(outcome *o, ts_status st, const char *where)
{
    if (st && !o->st) {
        o->st = st;
        o->where = where;
        snprintf(o->msg, sizeof o->msg, "%s", ts_last_error());
    }
}

/* Build, compile, run twice, read anchors, free. Stops at the first error. */
static outcome cycle(const data *d)
{
    outcome o = {TS_OK, NULL, ""};
    ts_graph *g = ts_graph_new(42);
    ts_options *opts = NULL;
    ts_model *m = NULL;
    if (!g) {
        note(&o, TS_ERR_OUT_OF_MEMORY, "ts_graph_new (NULL)");
        return o;
    }
    ts_tensor *x = ts_input(g, "x", TS_F32, 4, (int64_t[]){B, 1, 4, 4});
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){B});
    ts_tensor *h = ts_flatten(g, x, 1);
    h = ts_relu(g, ts_linear(g, h, 12, "fc1"));
    h = ts_print(g, h, "h");
    h = ts_log_softmax(g, ts_linear(g, h, C, "fc2"), 1);
    ts_tensor *loss = ts_nll_loss(g, h, y);
    if (loss)
        note(&o, ts_tensor_set_name(loss, "loss"), "ts_tensor_set_name");
    note(&o, ts_graph_status(g), "graph build");
    if (o.st)
        goto out;
    opts = ts_options_new();
    if (!opts) {
        note(&o, TS_ERR_OUT_OF_MEMORY, "ts_options_new (NULL)");
        goto out;
    }
    note(&o, ts_options_set_device_iterations(opts, D), "set D");
    note(&o, ts_options_set_threads(opts, 2), "set threads");
    note(&o, ts_options_anchor(opts, "g1", "Gradient___fc1.bias", TS_OUTPUT_ALL, 0), "anchor g1");
    note(&o, ts_options_anchor(opts, "r", "Relu:0", TS_OUTPUT_FINAL, 0), "anchor r");
    note(&o, ts_options_anchor(opts, NULL, "UpdatedVar___*", TS_OUTPUT_FINAL, 0), "anchor glob");
    note(&o, ts_options_watch(opts, "fc2*", TS_WATCH_STATS | TS_WATCH_HISTOGRAM, 1), "watch");
    if (o.st)
        goto out;
    note(&o, ts_model_training(&m, g, loss, opts, ts_sgd(0.05f, 0.9f, 0.0f)), "ts_model_training");
    if (!o.st)
        note(&o, ts_model_compile(m), "ts_model_compile");
    for (int r = 0; r < 2 && !o.st; r++)
        note(&o, ts_model_run(m, IN_NAMES, d->in, 2), "ts_model_run");
    if (!o.st) {
        ts_array a;
        note(&o, ts_model_anchored(m, "g1", &a), "anchored g1");
        note(&o, ts_model_anchored(m, "UpdatedVar___fc2.bias", &a), "anchored UpdatedVar___fc2.bias");
        const char *const *names;
        size_t n;
        note(&o, ts_model_tensor_names(m, &names, &n), "tensor names");
    }
    /* recompiles: an anchor after compile, then a smaller batch */
    if (!o.st)
        note(&o, ts_model_anchor(m, "mm", "fc1/MatMul:0", TS_OUTPUT_SUM, 0), "ts_model_anchor");
    if (!o.st) {
        ts_array half[2] = {d->in[0], d->in[1]};
        half[0].shape[0] /= 2;
        half[1].shape[0] /= 2;
        note(&o, ts_model_run(m, IN_NAMES, half, 2), "ts_model_run (B/2)");
    }
    /* an inference model of the same graph */
    if (!o.st) {
        ts_model *inf = NULL;
        note(&o, ts_model_inference(&inf, g, &h, 1, NULL), "ts_model_inference");
        if (!o.st)
            note(&o, ts_model_run(inf, IN_NAMES, d->in, 1), "inference run");
        ts_model_free(inf);
    }
out:
    ts_model_free(m);
    ts_options_free(opts);
    ts_graph_free(g);
    return o;
}

/* One cycle with call `n` refused, in a child process so that a crash is
 * reported (with its signal) instead of ending the test. */
typedef struct child_result {
    outcome o;
    long left;   /* blocks alive after freeing everything */
    long failed; /* calls refused */
} child_result;

static int run_child(const data *d, long n, child_result *r, int *signo)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(fds[0]);
        child_result cr;
        memset(&cr, 0, sizeof cr);
        cnt.calls = cnt.failed = 0;
        cnt.fail_at = n;
        long live0 = cnt.live;
        cr.o = cycle(d);
        cnt.fail_at = 0;
        cr.left = cnt.live - live0;
        cr.failed = cnt.failed;
        ssize_t w = write(fds[1], &cr, sizeof cr);
        _exit(w == (ssize_t)sizeof cr ? 0 : 3);
    }
    close(fds[1]);
    ssize_t got = read(fds[0], r, sizeof *r);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    *signo = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    return got == (ssize_t)sizeof *r && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

static void injected_failures(const data *d)
{
    ts_set_log_level(TS_LOG_OFF); /* the print op */
    /* warm up: the metrics registry keeps its names for the process */
    outcome w = cycle(d);
    CHECK_OK(w.st, "warm-up cycle (%s)", w.where ? w.where : "all steps");
    cnt.calls = cnt.failed = 0;
    long live0 = cnt.live;
    outcome full = cycle(d);
    long K = cnt.calls;
    CHECK(full.st == TS_OK && cnt.live == live0, "full cycle: %ld allocator calls, %ld blocks left", K,
          cnt.live - live0);
    long oom = 0, ok = 0, other = 0, leaked = 0, silent = 0, crashed = 0;
    /* Under ThreadSanitizer a fork costs ~0.5 s: that build looks for races
     * and visits every 8th point (the Release and ASan builds visit all). */
#if defined(__SANITIZE_THREAD__)
    const long stride = 8;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
    const long stride = 8;
#else
    const long stride = 1;
#endif
#else
    const long stride = 1;
#endif
    if (stride > 1) printf("     ThreadSanitizer build: failing every %ldth of the %ld calls\n", stride, K);
    for (long n = 1; n <= K; n += stride) {
        child_result r;
        int signo = 0;
        if (run_child(d, n, &r, &signo) != 0) {
            crashed++;
            if (signo)
                printf("     call %ld refused: the cycle crashed (signal %d)\n", n, signo);
            else
                printf("     call %ld refused: the cycle died (a sanitizer report is above)\n", n);
            continue;
        }
        if (r.o.st == TS_OK) {
            ok++;
            if (r.failed)
                silent++;
        } else if (r.o.st == TS_ERR_OUT_OF_MEMORY && r.o.msg[0]) {
            oom++;
        } else {
            other++;
            printf("     call %ld refused: %s at %s: \"%s\"\n", n, ts_status_name(r.o.st), r.o.where, r.o.msg);
        }
        if (r.left) {
            leaked++;
            printf("     call %ld refused (%s, at %s): %ld blocks left alive after freeing everything\n", n,
                   ts_status_name(r.o.st), r.o.where ? r.o.where : "-", r.left);
        }
    }
    CHECK(crashed == 0, "N = 1..%ld: no crash when allocator call N fails (%ld crashed)", K, crashed);
    CHECK(other == 0,
          "N = 1..%ld: every injected failure is TS_ERR_OUT_OF_MEMORY with a message or handled (%ld OOM, "
          "%ld completed, %ld other status)",
          K, oom, ok, other);
    CHECK(leaked == 0, "N = 1..%ld: nothing left alive after an injected failure (%ld cycles leaked)", K,
          leaked);
    printf("     (%ld cycles completed despite a refused allocation)\n", silent);
}

static void steady_state(const data *d)
{
    ts_graph *g = ts_graph_new(7);
    ts_tensor *x = ts_input(g, "x", TS_F32, 4, (int64_t[]){B, 1, 4, 4});
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){B});
    ts_tensor *h = ts_relu(g, ts_linear(g, ts_flatten(g, x, 1), 12, "fc1"));
    ts_tensor *loss = ts_cross_entropy(g, ts_linear(g, h, C, "fc2"), y);
    ts_tensor_set_name(loss, "loss");
    ts_options *o = ts_options_new();
    ts_options_set_device_iterations(o, D);
    ts_options_anchor(o, "g1", "Gradient___fc1.bias", TS_OUTPUT_ALL, 0);
    ts_options_anchor(o, NULL, "*fc2*", TS_OUTPUT_SUM, 0);
    ts_options_watch(o, "fc1*", TS_WATCH_STATS | TS_WATCH_HISTOGRAM | TS_WATCH_RANGE, 1);
    ts_model *m = NULL;
    ts_status st = ts_model_training(&m, g, loss, o, ts_adam(1e-3f));
    if (!st)
        st = ts_model_compile(m);
    if (!st)
        st = ts_model_run(m, IN_NAMES, d->in, 2);
    CHECK_OK(st, "steady state: compile and a first run (Adam, anchors, watches)");
    if (!st) {
        cnt.calls = 0;
        for (int r = 0; r < 10 && !st; r++)
            st = ts_model_run(m, IN_NAMES, d->in, 2);
        CHECK_OK(st, "ten more runs");
        CHECK(cnt.calls == 0, "no allocation in the step loop: %ld allocator calls in 10 runs", cnt.calls);
        /* and no allocation is needed: every call refused, runs still work */
        cnt.calls = 0;
        cnt.fail_at = 1;
        st = ts_model_run(m, IN_NAMES, d->in, 2);
        cnt.fail_at = 0;
        CHECK_OK(st, "a run with the first allocation refused");
    }
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
}

int main(void)
{
    data d;
    data_make(&d);
    ts_set_allocator(&COUNTING);
    /* ALLOC_FAIL_AT=N: refuse only call N, in this process (for a debugger) */
    const char *only = getenv("ALLOC_FAIL_AT");
    if (only && *only) {
        ts_set_log_level(TS_LOG_OFF);
        outcome w = cycle(&d);
        cnt.calls = 0;
        cnt.fail_at = atol(only);
        outcome o = cycle(&d);
        printf("call %ld refused: %s at %s: %s\n", cnt.fail_at, ts_status_name(o.st), o.where ? o.where : "-",
               o.msg);
        ts_set_allocator(NULL);
        return w.st != TS_OK;
    }
    injected_failures(&d);
    steady_state(&d);
    /* blocks still alive from the counting allocator are the metrics
     * registry's (it lives for the process); both allocators are malloc's */
    ts_set_allocator(NULL);
    cnt.calls = 0;
    ts_graph *g = ts_graph_new(1);
    CHECK(g != NULL && cnt.calls == 0, "default allocator restored (no calls counted)");
    ts_graph_free(g);
    return check_summary("test_alloc_fail");
}
