/* test_log.c -- the log's knobs (docs/observation.md#diagnostics):
 * - TS_LOG_VMODULE / ts_set_log_vmodule raise the level of named modules
 *   only: a model's debug lines (module model) appear, the executor's trace
 *   lines (module exec) do not, until exec is named;
 * - a bad spec: ts_set_log_vmodule refuses it naming the valid modules, and
 *   TS_LOG_VMODULE warns once and keeps the entries before the bad one;
 * - source files' names (onnx_torch=5) and globs of them (mem*=5) raise
 *   those files only;
 * - TS_LOG_PREFIX=1: the local time and file:line of the call before the
 *   message;
 * - TS_LOG_THREAD_ID=1: the default callback's lines carry the kernel tid
 *   of the thread that logged;
 * - print ops reach the callback at TS_LOG_PRINT, never TS_LOG_ERROR, and
 *   are shown at --quiet's level (warn) but not when logs are off. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "core/core.h"
#include "mlp.h"

#define MAX_LINES 4096
static char *lines[MAX_LINES];
static int levels[MAX_LINES], n_lines;

static void capture(void *user, int level, const char *msg) {
    (void)user;
    if (n_lines == MAX_LINES) return;
    levels[n_lines] = level;
    lines[n_lines++] = strdup(msg);
}

static void clear(void) {
    while (n_lines) free(lines[--n_lines]);
}

/* Lines holding `text` (at `level`, or any level when -1). */
static int count(const char *text, int level) {
    int c = 0;
    for (int i = 0; i < n_lines; i++) c += strstr(lines[i], text) && (level < 0 || levels[i] == level);
    return c;
}

static float xbuf[4 * 784];
static int32_t ybuf[4];

/* Builds, compiles and runs the tutorial MLP for one step (B = 4), with a
 * print op on its logits when `print`. */
static ts_status one_step(bool print) {
    ts_graph *g = ts_graph_new(1);
    ts_tensor *x = ts_input(g, "x", TS_F32, 4, (int64_t[]){4, 1, 28, 28});
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){4});
    ts_tensor *h = ts_relu(g, ts_linear(g, ts_flatten(g, x, 1), 16, "fc1"));
    ts_tensor *logits = ts_linear(g, h, 10, "fc2");
    if (print) logits = ts_print(g, logits, "logits");
    ts_tensor *loss = ts_cross_entropy(g, logits, y);
    ts_tensor_set_name(loss, "loss");
    ts_options *o = ts_options_new();
    ts_model *m = NULL;
    ts_status st = ts_model_training(&m, g, loss, o, ts_sgd(0.01f, 0.0f, 0.0f));
    if (!st) st = ts_model_compile(m);
    for (int i = 0; i < 4 * 784; i++) xbuf[i] = (float)(i % 17) / 17.0f;
    for (int i = 0; i < 4; i++) ybuf[i] = i;
    ts_array in[2] = {ts_array_f32(xbuf, 4, (int64_t[]){4, 1, 28, 28}), ts_array_i32(ybuf, 1, (int64_t[]){4})};
    const char *names[] = {"x", "labels"};
    if (!st) st = ts_model_run(m, names, in, 2);
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
    return st;
}

static void test_modules(void) {
    CHECK(strcmp(ts_log_module_name(ts_log_module_of("/home/u/src/tensorscope/src/import/onnx.c")), "onnx") == 0,
          "src/import/onnx.c is module onnx");
    CHECK(strcmp(ts_log_module_name(ts_log_module_of("src/backend/cuda/kernels.cu")), "cuda") == 0,
          "src/backend/cuda/ is module cuda");
    CHECK(strcmp(ts_log_module_name(ts_log_module_of("/x/src/backend/cpu/ops.c")), "backend") == 0, "src/backend/cpu/ is backend");
    CHECK(ts_log_module_of("tools/cmd_train.c") == -1, "a file outside src/ has no module");
    CHECK(strcmp(ts_log_module_name(ts_log_module_of(__FILE__)), "?") == 0, "the test's own file has none");
}

static void test_vmodule(void) {
    ts_set_log_level(TS_LOG_INFO);
    ts_set_log_callback(capture, NULL);
    CHECK_OK(ts_set_log_vmodule("model=5"), "ts_set_log_vmodule(\"model=5\")");
    CHECK_OK(one_step(false), "a step with model=5");
    CHECK(count("layer template", TS_LOG_DEBUG) == 1, "model=5: the model's layer template is logged (debug)");
    CHECK(count("micro-batch 1/1", -1) == 0, "model=5: no trace line of the executor (module exec)");
    CHECK(count("graph dump", -1) == 0 && count("RSS", -1) == 0, "model=5: no debug or trace line of diag");
    clear();
    CHECK_OK(ts_set_log_vmodule("exec=5"), "ts_set_log_vmodule(\"exec=5\")");
    CHECK_OK(one_step(false), "a step with exec=5");
    CHECK(count("micro-batch 1/1", TS_LOG_TRACE) == 1, "exec=5: the executor's trace line per micro-batch");
    CHECK(count("layer template", -1) == 0, "exec=5: model is back at the global level (info)");
    clear();
    CHECK_OK(ts_set_log_vmodule(""), "an empty spec clears");
    CHECK_OK(one_step(false), "a step with no module raised");
    CHECK(count("micro-batch", -1) == 0 && count("layer template", -1) == 0, "cleared: info only");
    clear();

    ts_status st = ts_set_log_vmodule("exec=5,execc=4");
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "'execc' is not a module") &&
              strstr(ts_last_error(), "did you mean 'exec'") && strstr(ts_last_error(), "onnx, io, model, data"),
          "an unknown module is refused with the valid names: %s", ts_last_error());
    CHECK(!ts_log_enabled_in("src/exec/exec.c", TS_LOG_DEBUG), "a refused spec changes nothing");
    st = ts_set_log_vmodule("onnx=loud");
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "'loud' is not a level for onnx"), "a bad level: %s",
          ts_last_error());
    st = ts_set_log_vmodule("onnx");
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "MODULE=LEVEL"), "no '=': %s", ts_last_error());
    CHECK_OK(ts_set_log_vmodule("onnx=debug"), "level names work too");
    CHECK(ts_log_enabled_in("x/src/import/onnx.c", TS_LOG_DEBUG) && !ts_log_enabled_in("x/src/import/onnx.c", TS_LOG_TRACE) &&
              !ts_log_enabled_in("x/src/exec/exec.c", TS_LOG_DEBUG) && ts_log_enabled_in("x/src/exec/exec.c", TS_LOG_INFO),
          "onnx=debug: onnx's debug lines only");
    ts_set_log_vmodule(NULL);
    ts_set_log_callback(NULL, NULL);
}

/* In a child (the variables are read once per process): TS_LOG_VMODULE
 * with an unknown name after a good entry. Exit status: the failed checks. */
static int env_child(void) {
    setenv("TS_LOG_VMODULE", "onnx=5,bogus=3,exec=5", 1);
    ts_set_log_callback(capture, NULL);
    for (int i = 0; i < 3; i++) ts_logf_in("src/import/onnx.c", TS_LOG_DEBUG, "onnx says %d", i);
    ts_logf_in("src/exec/exec.c", TS_LOG_DEBUG, "exec says");
    int bad = 0;
    bad += count("onnx says", TS_LOG_DEBUG) != 3;
    bad += count("exec says", -1) != 0;
    bad += count("TS_LOG_VMODULE='onnx=5,bogus=3,exec=5': 'bogus' is not a module", TS_LOG_WARN) != 1;
    bad += count("the modules are core, graph, compile, exec, backend, cuda, observe, diag, parallel, onnx, io, model, data", -1) != 1;
    if (bad)
        for (int i = 0; i < n_lines; i++) fprintf(stderr, "child line %d: %s\n", levels[i], lines[i]);
    return bad;
}

static void test_vmodule_env(void) {
    pid_t pid = fork();
    if (pid == 0) _exit(env_child());
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "TS_LOG_VMODULE=onnx=5,bogus=3,exec=5: onnx's debug lines shown, exec's not, one warning naming the modules");
}

static long worker_tid;
static void *worker(void *arg) {
    (void)arg;
    worker_tid = (long)syscall(SYS_gettid);
    ts_logf_in("src/exec/exec.c", TS_LOG_WARN, "from a worker");
    return NULL;
}

/* In a child: TS_LOG_THREAD_ID=1, the default callback into a file. */
static int tid_child(const char *path) {
    setenv("TS_LOG_THREAD_ID", "1", 1);
    if (!freopen(path, "w", stderr)) return 1;
    ts_logf_in("src/exec/exec.c", TS_LOG_WARN, "from main");
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    fflush(stderr);
    FILE *f = fopen(path, "r");
    char text[1024] = "", want_main[128], want_worker[128];
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = '\0';
    if (f) fclose(f);
    snprintf(want_main, sizeof want_main, "[tensorscope W tid %ld] from main\n", (long)getpid());
    snprintf(want_worker, sizeof want_worker, "[tensorscope W tid %ld] from a worker\n", worker_tid);
    int bad = !strstr(text, want_main) + !strstr(text, want_worker) + (worker_tid == (long)getpid());
    if (bad) printf("child's stderr:\n%s(wanted %s and %s)\n", text, want_main, want_worker);
    return bad;
}

static void test_thread_id(void) {
    char path[] = "/tmp/test_log_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(tid_child(path));
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "TS_LOG_THREAD_ID=1: each line carries the kernel tid of the thread that logged it (main's = the pid, a worker's its own)");
    unlink(path);
}

static void test_print_level(void) {
    ts_set_log_callback(capture, NULL);
    ts_set_log_level(TS_LOG_WARN); /* the CLI's --quiet */
    CHECK_OK(one_step(true), "a step with a print op at level warn");
    CHECK(count("logits", TS_LOG_PRINT) >= 2 && count("logits_gradient", TS_LOG_PRINT) >= 1,
          "the print op's value and gradient reach the callback at TS_LOG_PRINT (%d lines)", n_lines);
    CHECK(count("logits", TS_LOG_ERROR) == 0, "no print line is handed over as an error");
    clear();
    ts_set_log_level(TS_LOG_OFF);
    CHECK_OK(one_step(true), "a step with a print op, logs off");
    CHECK(n_lines == 0, "logs off: no print line (%d)", n_lines);
    ts_set_log_level(TS_LOG_INFO);
    ts_set_log_callback(NULL, NULL);
    clear();
}

/* TS_LOG_VMODULE's source files (TensorFlow's TF_CPP_VMODULE): a file's
 * name without folder and .c, or a glob of names; a module's name is the
 * module. */
static void test_vmodule_files(void) {
    CHECK_OK(ts_set_log_vmodule("onnx_torch=5"), "onnx_torch=5 (src/import/onnx_torch.c)");
    CHECK(ts_log_enabled_in("x/src/import/onnx_torch.c", TS_LOG_TRACE) && !ts_log_enabled_in("x/src/import/onnx.c", TS_LOG_DEBUG) &&
              !ts_log_enabled_in("x/src/import/onnx_rnn.c", TS_LOG_DEBUG),
          "onnx_torch=5: that file's trace lines, not those of the other files of its folder");
    CHECK_OK(ts_set_log_vmodule("exec=4,mem*=5"), "a glob of files beside a module");
    CHECK(ts_log_enabled_in("x/src/diag/memwatch.c", TS_LOG_TRACE) && ts_log_enabled_in("x/src/compile/memplan.c", TS_LOG_TRACE) &&
              ts_log_enabled_in("x/src/exec/op_times.c", TS_LOG_DEBUG) && !ts_log_enabled_in("x/src/exec/op_times.c", TS_LOG_TRACE) &&
              !ts_log_enabled_in("x/src/diag/crash.c", TS_LOG_DEBUG),
          "exec=4,mem*=5: memwatch.c and memplan.c at trace, exec's folder at debug, crash.c at info");
    ts_status st = ts_set_log_vmodule("memwach=4");
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "'memwach' is not a module") && strstr(ts_last_error(), "'memwatch'"),
          "a name that is neither: refused, with the closest source files: %s", ts_last_error());
    ts_set_log_vmodule(NULL);
}

/* In a child: TS_LOG_PREFIX=1 puts TensorFlow's `DATE TIME.us: file:line] `
 * before each line, the time the local one of the call. */
static int prefix_child(void) {
    setenv("TS_LOG_PREFIX", "1", 1);
    clear();
    ts_set_log_callback(capture, NULL);
    time_t before = time(NULL);
    ts_logf_at("/build/src/core/names.c", 89, TS_LOG_WARN, "said at %d", 89);
    time_t after = time(NULL);
    if (n_lines != 1) {
        for (int i = 0; i < n_lines; i++) printf("child's line %d: %s\n", i, lines[i]);
        return 1;
    }
    struct tm tm = {0};
    tm.tm_isdst = -1;
    long us = -1;
    int line = 0, used = 0;
    char file[64] = "";
    const char *end = strptime(lines[0], "%Y-%m-%d %H:%M:%S", &tm);
    int bad = !end || sscanf(end, ".%6ld: %63[^:]:%d] %n", &us, file, &line, &used) != 3 || !used;
    time_t t = end ? mktime(&tm) : 0;
    bad += t < before || t > after || us < 0 || us > 999999 || strcmp(file, "src/core/names.c") != 0 || line != 89 ||
           strcmp(lines[0] + (end - lines[0]) + used, "said at 89") != 0;
    if (bad) printf("child's line: %s\n", lines[0]);
    return bad;
}

static void test_prefix(void) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(prefix_child());
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "TS_LOG_PREFIX=1: the line begins with the local time of the call (to the microsecond) and src/core/names.c:89]");
}

int main(void) {
    test_vmodule_env(); /* first: the children must read TS_LOG_VMODULE and TS_LOG_PREFIX themselves */
    test_prefix();
    test_modules();
    test_vmodule();
    test_vmodule_files();
    test_thread_id();
    test_print_level();
    clear();
    return check_summary("test_log");
}
