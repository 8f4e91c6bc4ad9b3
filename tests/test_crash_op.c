/* test_crash_op.c -- a crash inside a real op of a running model: the print
 * op calls the user's log callback while it executes, and that callback
 * faults. The handler must name the op and tensor being executed, print a
 * backtrace through the executor, and re-raise so the exit status shows the
 * signal. Checked from the parent, which reads the child's stderr. */
#include "tensorscope.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int failures;

static void check(int ok, const char *what) {
    printf("%s: %s\n", ok ? "ok" : "FAIL", what);
    if (!ok) failures++;
}

__attribute__((noinline, no_sanitize("undefined"))) static void faulting_log(void *user, int level, const char *msg) {
    (void)user, (void)level, (void)msg;
    volatile int *volatile p = NULL;
    *p = 1; /* the bug "in an op" */
}

static void child(void) {
    if (ts_crash_handler_install() != TS_OK) _exit(99);
    ts_graph *g = ts_graph_new(1);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){2, 3});
    ts_tensor *y = ts_mean(g, ts_print(g, ts_relu(g, x), "probe"));
    ts_model *m;
    if (ts_model_inference(&m, g, &y, 1, NULL) || ts_model_compile(m)) _exit(98);
    float data[6] = {1, -2, 3, -4, 5, -6};
    ts_array in = ts_array_f32(data, 2, (int64_t[]){2, 3});
    ts_set_log_callback(faulting_log, NULL);
    ts_model_run(m, (const char *[]){"x"}, &in, 1);
    _exit(0); /* not reached */
}

int main(void) {
    int p[2];
    if (pipe(p) != 0) return 1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        dup2(p[1], STDERR_FILENO);
        close(p[1]);
        child();
    }
    close(p[1]);
    static char buf[1 << 16];
    size_t len = 0;
    ssize_t k;
    while (len + 1 < sizeof buf && (k = read(p[0], buf + len, sizeof buf - 1 - len)) > 0) len += (size_t)k;
    buf[len] = 0;
    close(p[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    check(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV, "the child died of SIGSEGV (the handler re-raised)");
    check(strstr(buf, "SIGSEGV") != NULL, "the report names the signal");
    check(strstr(buf, "Print") != NULL && strstr(buf, "Print:0") != NULL, "the report names the op (Print) and its tensor (Print:0)");
    check(strstr(buf, "faulting_log") != NULL, "the backtrace shows the faulting function");
    check(strstr(buf, "ts_model_run") != NULL, "the backtrace goes through the executor (ts_model_run)");
    if (failures) printf("---- child stderr ----\n%s\n", buf);
    printf("test_crash_op: %d failed: %s\n", failures, failures ? "FAIL" : "PASS");
    return failures != 0;
}
