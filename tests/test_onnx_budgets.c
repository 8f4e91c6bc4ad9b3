/* test_onnx_budgets.c -- small hostile ONNX files (written here) whose
 * declared shapes ask for far more memory than they hold, and graphs that
 * break single assignment:
 *
 * - a Pad of [64,1] by 2^26 columns (16 GiB of output): `tensorscope
 *   names`, `graph` and `lint` plan it without allocating a buffer (peak
 *   RSS of the command stays small); a compile to run is refused by
 *   TS_LIMIT_COMPILE_BYTES from the plan, before allocating, with the
 *   "raise it with TS_MAX_COMPILE_BYTES" message; a plan-only model does
 *   not run; a compile to run of a 1 GiB Pad allocates its arenas without
 *   touching them (they are not zero-filled page by page);
 * - an Expand of a graph input to [64, 2^28] under the 1 GiB import limit:
 *   what the import would hold (the zeros it adds and their copy, 2 GiB) is
 *   refused before it is allocated;
 * - two nodes writing one value, a node writing a graph input or an
 *   initializer: refused (as onnx.checker refuses them), naming both.
 *
 * Each hostile case runs in a child process whose peak RSS is read with
 * wait4, its address space capped (cap_address_space). */
/* needs: onnx */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "onnx.pb-c.h"
#include "tensorscope.h"

#include "onnx_model.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif
#ifndef UNDER_SANITIZER
#define UNDER_SANITIZER 0
#endif
/* ThreadSanitizer clears the shadow of every block it allocates, which
 * touches memory in proportion to the block: RSS says nothing there about
 * whether the library touched the block itself */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif

#define SMALL_RSS_MB 400 /* the hostile cases declare 2 GiB to 16 GiB */

/* In a child: at most 3 GiB of address space, so that a reader allocating
 * what a file declares fails instead of taking the machine's memory; not
 * under a sanitizer (its shadow memory needs the address space) nor with
 * CUDA built in (its runtime reserves address space when it starts), where
 * a compile limit of 4 GiB still guards. */
static void cap_address_space(void) {
    setenv("TS_MAX_COMPILE_BYTES", "4G", 1);
    if (UNDER_SANITIZER || ts_has_feature("cuda")) return;
    struct rlimit r = {(rlim_t)3 << 30, (rlim_t)3 << 30};
    setrlimit(RLIMIT_AS, &r);
}

/* Runs argv (the CLI) in a child; its exit status and peak RSS in MiB. */
static int run_cli(char *const argv[], const char *out_path, double *peak_mb) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        cap_address_space();
        FILE *f = freopen(out_path, "w", stdout);
        if (!f || !freopen("/dev/null", "w", stderr)) _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    if (pid < 0 || wait4(pid, &status, 0, &ru) != pid) return -1;
    *peak_mb = (double)ru.ru_maxrss / 1024.0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* x [64,1] -> Pad(pads 0,0,0,2^26) -> y [64, 2^26+1]: 16 GiB of f32 */
static void pad_model(void) {
    model_begin();
    input("x", 2, (int64_t[]){64, 1});
    output("y");
    init_i64("pads", 4, (int64_t[]){0, 0, 0, (int64_t)1 << 26});
    node("Pad", "pad", "x,pads", "y");
}

static bool file_has(const char *path, const char *needle) {
    FILE *f = fopen(path, "r");
    char line[4096];
    bool found = false;
    while (f && !found && fgets(line, sizeof line, f)) found = strstr(line, needle) != NULL;
    if (f) fclose(f);
    return found;
}

static void check_plan_only_commands(void) {
    printf("-- names, graph and lint plan a 16 GiB Pad without allocating it\n");
    pad_model();
    ts_graph *g = NULL;
    CHECK_OK(import_as("pad", &g), "the Pad model imports (its 16 GiB is only declared)");
    ts_graph_free(g);
    const char *build = getenv("TS_BUILD_DIR");
    char bin[512], model[256], out[256];
    snprintf(bin, sizeof bin, "%s/tensorscope", build ? build : "build");
    snprintf(model, sizeof model, "%s/pad.onnx", dir);
    snprintf(out, sizeof out, "%s/cli.out", dir);
    if (access(bin, X_OK) != 0) {
        CHECK(0, "the CLI %s is built", bin);
        return;
    }
    const char *cmds[3] = {"names", "graph", "lint"};
    const char *want[3] = {"Pad:0", "Pad", "lint warning"};
    for (int k = 0; k < 3; k++) {
        char *argv[] = {bin, (char *)cmds[k], "--model", model, "--inference", NULL};
        double mb = 0;
        int rc = run_cli(argv, out, &mb);
        CHECK((rc == 0 || (k == 2 && rc == 1)) && file_has(out, want[k]) && mb < SMALL_RSS_MB,
              "tensorscope %s --model pad.onnx: exit %d, prints '%s', peak RSS %.0f MiB (< %d)", cmds[k], rc, want[k], mb, SMALL_RSS_MB);
    }
}

/* In a child: import pad.onnx, compile an inference model of it under a
 * 256 MiB compile limit; exit 0 when refused as it should be. */
static int compile_budget_child(const char *path) {
    ts_graph *g = NULL;
    if (ts_graph_from_onnx(&g, path, NULL, 0)) return 10;
    ts_tensor *y = ts_graph_output_at(g, 0);
    if (ts_set_limit(TS_LIMIT_COMPILE_BYTES, (uint64_t)256 << 20)) return 11;
    ts_model *m = NULL;
    ts_status st = ts_model_inference(&m, g, &y, 1, NULL);
    if (!st) st = ts_model_compile(m);
    int rc = st == TS_ERR_FORMAT && strstr(ts_last_error(), "over the limit of 268435456 bytes") &&
                     strstr(ts_last_error(), "raise it with TS_MAX_COMPILE_BYTES=SIZE") && strstr(ts_last_error(), "TS_LIMIT_COMPILE_BYTES")
                 ? 0
                 : 1;
    printf("     | %s: %s\n", ts_status_name(st), st ? ts_last_error() : "compiled");
    ts_model_free(m);
    /* planned only: compiles whatever its size, says what it would take, does not run */
    ts_options *o = ts_options_new();
    ts_options_set_plan_only(o, 1);
    st = ts_model_inference(&m, g, &y, 1, o);
    if (!st) st = ts_model_compile(m);
    ts_model_memory mm;
    if (!st) st = ts_model_memory_get(m, &mm);
    if (st || mm.activations < ((int64_t)16 << 30)) rc = rc ? rc : 2;
    printf("     | plan only: %s, activations %lld bytes\n", ts_status_name(st), st ? 0LL : (long long)mm.activations);
    ts_array x = {.dtype = TS_F32, .ndim = 2, .shape = {64, 1}, .data = calloc(64, sizeof(float))};
    const char *names[1] = {"x"};
    st = ts_model_run(m, names, &x, 1);
    if (st != TS_ERR_STATE || !strstr(ts_last_error(), "plan only")) rc = rc ? rc : 3;
    printf("     | run: %s: %s\n", ts_status_name(st), ts_last_error());
    free(x.data);
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
    return rc;
}

/* In a child: compile (to run) an inference model of the 1 GiB Pad at
 * `path`; exit 0 when compiled with its arenas planned at that size. */
static int compile_lazy_child(const char *path) {
    ts_graph *g = NULL;
    if (ts_graph_from_onnx(&g, path, NULL, 0)) return 10;
    ts_tensor *y = ts_graph_output_at(g, 0);
    ts_model *m = NULL;
    ts_model_memory mm = {0};
    ts_status st = ts_model_inference(&m, g, &y, 1, NULL);
    if (!st) st = ts_model_compile(m);
    if (!st) st = ts_model_memory_get(m, &mm);
    printf("     | %s: %s; activations %lld bytes, anchors %lld\n", ts_status_name(st), st ? ts_last_error() : "compiled",
           (long long)mm.activations, (long long)mm.anchors);
    ts_model_free(m);
    ts_graph_free(g);
    return !st && mm.activations >= ((int64_t)1 << 30) ? 0 : 1;
}

/* In a child: import `path` under the default 1 GiB import limit; exit 0
 * when refused by TS_MAX_IMPORT_BYTES. */
static int import_budget_child(const char *path) {
    ts_graph *g = NULL;
    ts_status st = ts_graph_from_onnx(&g, path, NULL, 0);
    printf("     | %s: %s\n", ts_status_name(st), st ? ts_last_error() : "imported");
    ts_graph_free(g);
    return st == TS_ERR_FORMAT && strstr(ts_last_error(), "TS_MAX_IMPORT_BYTES") && strstr(ts_last_error(), "'expand'") ? 0 : 1;
}

static int in_child(int (*fn)(const char *), const char *path, double *peak_mb) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        cap_address_space();
        int rc = fn(path);
        fflush(stdout);
        _exit(rc);
    }
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    if (pid < 0 || wait4(pid, &status, 0, &ru) != pid) return -1;
    *peak_mb = (double)ru.ru_maxrss / 1024.0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void check_budgets(void) {
    printf("-- budgets from the declared shapes, before allocating\n");
    char path[256];
    snprintf(path, sizeof path, "%s/pad.onnx", dir);
    double mb = 0;
    int rc = in_child(compile_budget_child, path, &mb);
    CHECK(rc == 0 && mb < SMALL_RSS_MB,
          "a compile of the 16 GiB Pad under a 256 MiB compile limit: refused from the plan, plan-only compiles and does not run (exit %d, "
          "peak RSS %.0f MiB)", rc, mb);

    /* arenas are not zero-filled: a compile touches no page of them */
    model_begin();
    input("x", 2, (int64_t[]){64, 1});
    output("y");
    init_i64("pads", 4, (int64_t[]){0, 0, 0, (int64_t)1 << 22});
    node("Pad", "pad", "x,pads", "y");
    CHECK_OK(import_as("pad1g", NULL), "a Pad to [64, 2^22+1] (1 GiB) imports");
    snprintf(path, sizeof path, "%s/pad1g.onnx", dir);
    rc = in_child(compile_lazy_child, path, &mb);
    CHECK(rc == 0 && (UNDER_TSAN || mb < SMALL_RSS_MB),
          "its compile plans 1 GiB of activations and an anchor of 1 GiB without touching them (exit %d, peak RSS "
          "%.0f MiB%s)", rc, mb, UNDER_TSAN ? "; not measured under ThreadSanitizer" : "");

    /* x [64,1] expanded to [64, 2^28]: x + zeros [1, 2^28] (1 GiB), the
     * zeros copied into the graph (1 GiB more) */
    model_begin();
    input("x", 2, (int64_t[]){64, 1});
    output("y");
    init_i64("shape", 2, (int64_t[]){64, (int64_t)1 << 28});
    node("Expand", "expand", "x,shape", "y");
    ts_status st = import_as("expand", NULL);
    (void)st; /* imported again in the child, where its memory is measured */
    snprintf(path, sizeof path, "%s/expand.onnx", dir);
    rc = in_child(import_budget_child, path, &mb);
    CHECK(rc == 0 && mb < SMALL_RSS_MB, "an Expand to [64, 2^28] (2 GiB held) under the 1 GiB import limit: refused before allocating (exit %d, "
          "peak RSS %.0f MiB)", rc, mb);
}

static void check_single_writers(void) {
    printf("-- every value has one writer\n");
    model_begin();
    input("x", 2, (int64_t[]){2, 4});
    output("y");
    node("Relu", "first", "x", "y");
    node("Sigmoid", "second", "x", "y");
    expect("two nodes write y", import_as("two_writers", NULL), TS_ERR_FORMAT,
           "nodes 'first' (Relu) and 'second' (Sigmoid) both write 'y'");
    model_begin();
    input("x", 2, (int64_t[]){2, 4});
    output("y");
    node("Relu", "relu", "x", "x");
    node("Sigmoid", "sig", "x", "y");
    expect("a node writes a graph input", import_as("writes_input", NULL), TS_ERR_FORMAT, "node 'relu' (Relu) writes 'x', which is a graph input");
    model_begin();
    input("x", 2, (int64_t[]){2, 4});
    output("y");
    init_f32("w", 1, (int64_t[]){4}, (const float[]){1, 2, 3, 4});
    node("Relu", "relu", "x", "w");
    node("Add", "add", "x,w", "y");
    expect("a node writes an initializer", import_as("writes_init", NULL), TS_ERR_FORMAT,
           "node 'relu' (Relu) writes 'w', which is a graph initializer");
    /* an initializer also listed as an input (IR version < 4) is not a second writer */
    model_begin();
    input("x", 2, (int64_t[]){2, 4});
    input("w", 1, (int64_t[]){4});
    output("y");
    init_f32("w", 1, (int64_t[]){4}, (const float[]){1, 2, 3, 4});
    node("Add", "add", "x,w", "y");
    expect("an initializer listed as an input too", import_as("init_as_input", NULL), TS_OK, NULL);
}

int main(void) {
    ts_set_log_level(TS_LOG_OFF);
    alarm(300);
    snprintf(dir, sizeof dir, "/tmp/ts_onnx_budgets_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    check_single_writers();
    check_plan_only_commands();
    check_budgets();
    remove_dir();
    return check_summary("test_onnx_budgets");
}
