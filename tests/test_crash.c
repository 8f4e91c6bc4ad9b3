/* test_crash.c -- the crash handler, checked from a parent process: the
 * child crashes (or gets SIGUSR1) and the parent reads its stderr. */
#include "diag/crash.h"
#include "core/crash_note.h"
#include "tensorscope.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int failures;

static void check(int ok, const char *what) {
    printf("%s: %s\n", ok ? "ok" : "FAIL", what);
    if (!ok)
        failures++;
}

/* Runs fn in a child whose stderr comes back in buf; returns wait status. */
static int run_child(void (*fn)(void), char *buf, size_t cap) {
    int p[2];
    if (pipe(p) != 0)
        return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        dup2(p[1], STDERR_FILENO);
        close(p[1]);
        fn();
        _exit(0);
    }
    close(p[1]);
    size_t len = 0;
    ssize_t k;
    while (len + 1 < cap && (k = read(p[0], buf + len, cap - 1 - len)) > 0)
        len += (size_t)k;
    buf[len] = 0;
    close(p[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
}

/* UBSan would report the store itself; the point is the real fault. */
static const int fault_line = __LINE__ + 3; /* the store below */
__attribute__((noinline, no_sanitize("undefined"))) void tscrash_test_null_deref(void) {
    volatile int *volatile p = NULL;
    *p = 42;
}

static void child_segv(void) {
    if (ts_crash_handler_install() != TS_OK)
        _exit(99);
    ts_crash_set_current_op("MatMul", "fc1/MatMul:0", "model.c:12");
    tscrash_test_null_deref();
}

__attribute__((noinline)) void tscrash_test_abort(void) { abort(); }

static void child_abort(void) {
    if (ts_crash_handler_install() != TS_OK)
        _exit(99);
    ts_crash_set_current_op("Relu", "Relu:1", NULL);
    tscrash_test_abort();
}

static atomic_int worker_stop;    /* read by the worker, set by main */
static atomic_int worker_waiting; /* set by the worker inside its wait */

__attribute__((noinline)) void tscrash_test_worker_wait(void) {
    struct timespec ms = {0, 1000000};
    atomic_store(&worker_waiting, 1);
    while (!atomic_load(&worker_stop))
        nanosleep(&ms, NULL);
}

static void *worker(void *arg) {
    (void)arg;
    tscrash_test_worker_wait();
    return NULL;
}

static void child_usr1(void) {
    if (ts_crash_handler_install() != TS_OK)
        _exit(99);
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0)
        _exit(98);
    struct timespec ms = {0, 1000000};
    while (!atomic_load(&worker_waiting)) /* the worker in its wait loop */
        nanosleep(&ms, NULL);
    kill(getpid(), SIGUSR1);
    atomic_store(&worker_stop, 1);
    pthread_join(t, NULL);
    fprintf(stderr, "child still alive\n");
    _exit(0);
}

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

int main(void) {
    static char buf[1 << 16];

    int st = run_child(child_segv, buf, sizeof buf);
    printf("--- child stderr (SIGSEGV) ---\n%s---\n", buf);
    check(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "NULL dereference dies of SIGSEGV");
    check(strstr(buf, "fatal signal SIGSEGV") != NULL, "report names SIGSEGV");
    check(strstr(buf, "MatMul") && strstr(buf, "fc1/MatMul:0") && strstr(buf, "model.c:12"),
          "report names op, tensor and source location");
    check(strstr(buf, "tscrash_test_null_deref") != NULL, "backtrace has the faulting function");
    check(strstr(buf, " main+") != NULL, "backtrace reaches main");
    char where[64], line[256] = "";
    snprintf(where, sizeof where, "test_crash.c:%d", fault_line);
    const char *src = strstr(buf, "source lines"), *at = src ? strstr(src, "tscrash_test_null_deref at ") : NULL;
    if (at)
        snprintf(line, sizeof line, "%.*s", (int)strcspn(at, "\n"), at);
    check(strstr(line, where) != NULL, "file:line of the faulting store from the debug info (addr2line)");

    st = run_child(child_abort, buf, sizeof buf);
    printf("--- child stderr (SIGABRT) ---\n%s---\n", buf);
    check(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "abort() dies of SIGABRT");
    check(strstr(buf, "fatal signal SIGABRT") != NULL, "report names SIGABRT");
    check(strstr(buf, "Relu:1") != NULL, "report names the tensor");
    check(strstr(buf, "tscrash_test_abort") != NULL, "backtrace has the aborting function");

    st = run_child(child_usr1, buf, sizeof buf);
    printf("--- child stderr (SIGUSR1) ---\n%s---\n", buf);
    check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "SIGUSR1: child continues and exits 0");
    check(strstr(buf, "child still alive") != NULL, "SIGUSR1: child ran on after the dump");
    check(count(buf, "thread ") >= 2, "SIGUSR1: at least two thread stacks");
    check(strstr(buf, "tscrash_test_worker_wait") != NULL, "SIGUSR1: the worker's stack is shown");
    check(strstr(buf, "child_usr1") != NULL, "SIGUSR1: the main thread's stack is shown");
    check(strstr(buf, "no answer") == NULL, "SIGUSR1: every thread answered");

    printf("%s\n", failures ? "test_crash: FAILED" : "test_crash: all passed");
    return failures != 0;
}
