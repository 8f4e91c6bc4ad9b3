/* crash.c -- fatal-signal reports and SIGUSR1 all-thread stack dumps.
 *
 * Everything reached from a handler is async-signal-safe: output goes
 * through a stack buffer and write(2), stacks through libunwind in local
 * mode; no stdio, no malloc. */
#define UNW_LOCAL_ONLY
#include "diag/crash.h"

#include "core/core.h"

#include <errno.h>
#include <fcntl.h>
#include <libunwind.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define TS_MAX_FRAMES 64

static const char *volatile g_op, *volatile g_tensor, *volatile g_where;

void ts_crash_set_current_op(const char *op_name, const char *tensor_name, const char *where) {
    g_op = op_name;
    g_tensor = tensor_name;
    g_where = where;
}

/* ---------------------------------------------- async-signal-safe output */

typedef struct sbuf {
    int fd;
    size_t n;
    char b[512];
} sbuf;

static void sb_flush(sbuf *s) {
    size_t off = 0;
    while (off < s->n) {
        ssize_t k = write(s->fd, s->b + off, s->n - off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        off += (size_t)k;
    }
    s->n = 0;
}

static void sb_str(sbuf *s, const char *str) {
    if (!str)
        str = "(null)";
    for (; *str; str++) {
        if (s->n == sizeof(s->b))
            sb_flush(s);
        s->b[s->n++] = *str;
    }
}

static void sb_uint(sbuf *s, unsigned long long v, unsigned base, int min_digits) {
    char d[24];
    int k = 0;
    do {
        d[k++] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v && k < (int)sizeof(d));
    while (k < min_digits && k < (int)sizeof(d))
        d[k++] = '0';
    char r[25];
    int j = 0;
    while (k > 0)
        r[j++] = d[--k];
    r[j] = 0;
    sb_str(s, r);
}

static void sb_hex(sbuf *s, unsigned long long v) {
    sb_str(s, "0x");
    sb_uint(s, v, 16, 1);
}

static long my_tid(void) { return syscall(SYS_gettid); }

/* --------------------------------------------------------------- stacks */

static void write_frames(sbuf *s, unw_cursor_t *cur) {
    for (int i = 0; i < TS_MAX_FRAMES; i++) {
        unw_word_t ip = 0, off = 0;
        char name[256];
        if (unw_get_reg(cur, UNW_REG_IP, &ip) < 0 || ip == 0)
            break;
        sb_str(s, "  #");
        sb_uint(s, (unsigned long long)i, 10, 1);
        sb_str(s, i < 10 ? "  " : " ");
        sb_hex(s, (unsigned long long)ip);
        int r = unw_get_proc_name(cur, name, sizeof name, &off);
        if (r == 0 || r == -UNW_ENOMEM) { /* ENOMEM: name truncated but set */
            name[sizeof name - 1] = 0;
            sb_str(s, " ");
            sb_str(s, name);
            sb_str(s, "+");
            sb_hex(s, (unsigned long long)off);
        } else {
            sb_str(s, " ??");
        }
        sb_str(s, "\n");
        if (unw_step(cur) <= 0)
            break;
    }
    sb_flush(s);
}

void ts_crash_write_backtrace(int fd, void *ucontext) {
    sbuf s = {.fd = fd};
    unw_context_t ctx;
    unw_cursor_t cur;
    /* From a handler, start at the interrupted frame itself: the kernel's
     * ucontext is libunwind's context type on Linux. */
    int ok = ucontext && unw_init_local2(&cur, (unw_context_t *)ucontext,
                                         UNW_INIT_SIGNAL_FRAME) == 0;
    if (!ok)
        ok = unw_getcontext(&ctx) == 0 && unw_init_local(&cur, &ctx) == 0;
    if (!ok) {
        sb_str(&s, "  (backtrace unavailable)\n");
        sb_flush(&s);
        return;
    }
    write_frames(&s, &cur);
}

/* -------------------------------------------------------- fatal signals */

static const struct {
    int sig;
    const char *name, *what;
} k_fatal[] = {
    {SIGSEGV, "SIGSEGV", "invalid memory access"},
    {SIGBUS, "SIGBUS", "bus error"},
    {SIGILL, "SIGILL", "illegal instruction"},
    {SIGFPE, "SIGFPE", "arithmetic exception"},
    {SIGABRT, "SIGABRT", "aborted"},
};

static void fatal_handler(int sig, siginfo_t *si, void *uc) {
    sbuf s = {.fd = STDERR_FILENO};
    const char *name = "signal", *what = "";
    for (size_t i = 0; i < TS_ARRAY_LEN(k_fatal); i++)
        if (k_fatal[i].sig == sig) {
            name = k_fatal[i].name;
            what = k_fatal[i].what;
        }
    sb_str(&s, "\ntensorscope: fatal signal ");
    sb_str(&s, name);
    sb_str(&s, " (");
    sb_str(&s, what);
    if (sig != SIGABRT && si) {
        sb_str(&s, " at address ");
        sb_hex(&s, (unsigned long long)(uintptr_t)si->si_addr);
    }
    sb_str(&s, ") in thread ");
    sb_uint(&s, (unsigned long long)my_tid(), 10, 1);
    sb_str(&s, "\n");
    const char *op = g_op, *tensor = g_tensor, *where = g_where;
    if (op || tensor) {
        sb_str(&s, "tensorscope: while executing op ");
        sb_str(&s, op ? op : "?");
        if (tensor) {
            sb_str(&s, " -> ");
            sb_str(&s, tensor);
        }
        if (where) {
            sb_str(&s, " (");
            sb_str(&s, where);
            sb_str(&s, ")");
        }
        sb_str(&s, "\n");
    } else {
        sb_str(&s, "tensorscope: not inside an op\n");
    }
    sb_str(&s, "tensorscope: native backtrace:\n");
    sb_flush(&s);
    ts_crash_write_backtrace(STDERR_FILENO, uc);

    /* Die of the same signal so the exit status is kept: with the default
     * action back, the raise stays pending (the signal is blocked while we
     * run) and is delivered as soon as the handler returns. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    raise(sig);
}

/* --------------------------------------------------- SIGUSR1 stack dump */

/* The thread that receives a SIGUSR1 from outside becomes the initiator: it
 * prints its own stack, then asks each other thread in turn with a queued
 * SIGUSR1 carrying the dump's generation and waits for its answer, so the
 * stacks never interleave. Stray or late requests are ignored. */
static atomic_int g_dump_active;
static atomic_int g_dump_gen;
static atomic_int g_dump_ack;

static void dump_header(sbuf *s, long tid, const char *note) {
    sb_str(s, "thread ");
    sb_uint(s, (unsigned long long)tid, 10, 1);
    sb_str(s, note);
    sb_str(s, ":\n");
    sb_flush(s);
}

static int ask_thread(pid_t pid, long tid, int gen) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    info.si_signo = SIGUSR1;
    info.si_code = SI_QUEUE;
    info.si_pid = pid;
    info.si_uid = getuid();
    info.si_value.sival_int = gen;
    return (int)syscall(SYS_rt_tgsigqueueinfo, pid, (pid_t)tid, SIGUSR1, &info);
}

static void dump_all_threads(void *uc) {
    sbuf s = {.fd = STDERR_FILENO};
    pid_t pid = getpid();
    long self = my_tid();
    int gen = atomic_fetch_add(&g_dump_gen, 1) + 1;
    sb_str(&s, "\ntensorscope: SIGUSR1: stacks of all threads of process ");
    sb_uint(&s, (unsigned long long)pid, 10, 1);
    sb_str(&s, "\n");
    dump_header(&s, self, " (received SIGUSR1)");
    ts_crash_write_backtrace(STDERR_FILENO, uc);

    int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        sb_str(&s, "tensorscope: cannot list /proc/self/task: other threads not shown\n");
    } else {
        char buf[4096] __attribute__((aligned(8)));
        long nread;
        while ((nread = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
            for (long off = 0; off < nread;) {
                struct dirent64_raw {
                    uint64_t ino;
                    int64_t off;
                    unsigned short reclen;
                    unsigned char type;
                    char name[];
                } *d = (struct dirent64_raw *)(void *)(buf + off);
                off += d->reclen;
                long tid = 0;
                const char *p = d->name;
                if (*p < '0' || *p > '9')
                    continue;
                for (; *p >= '0' && *p <= '9'; p++)
                    tid = tid * 10 + (*p - '0');
                if (tid == self)
                    continue;
                atomic_store(&g_dump_ack, 0);
                if (ask_thread(pid, tid, gen) != 0)
                    continue; /* exited meanwhile */
                struct timespec ms = {0, 1000000};
                int waited = 0;
                while (!atomic_load(&g_dump_ack) && waited++ < 1000)
                    nanosleep(&ms, NULL);
                if (!atomic_load(&g_dump_ack))
                    dump_header(&s, tid, " (no answer within 1 s: SIGUSR1 blocked?)");
            }
        }
        close(fd);
    }
    sb_str(&s, "tensorscope: end of stacks\n");
    sb_flush(&s);
}

static void usr1_handler(int sig, siginfo_t *si, void *uc) {
    (void)sig;
    int saved_errno = errno;
    if (si && si->si_code == SI_QUEUE && si->si_pid == getpid()) {
        /* A request from the initiator: answer only the current dump. */
        if (atomic_load(&g_dump_active) && si->si_value.sival_int == atomic_load(&g_dump_gen)) {
            sbuf s = {.fd = STDERR_FILENO};
            dump_header(&s, my_tid(), "");
            ts_crash_write_backtrace(STDERR_FILENO, uc);
            atomic_store(&g_dump_ack, 1);
        }
    } else {
        int expected = 0;
        if (atomic_compare_exchange_strong(&g_dump_active, &expected, 1)) {
            dump_all_threads(uc);
            atomic_store(&g_dump_active, 0);
        }
    }
    errno = saved_errno;
}

/* ---------------------------------------------------------------- setup */

/* A handler for a stack overflow needs a stack of its own; sigaltstack is
 * per thread, so this covers the installing thread (others fall back to
 * their own stack). */
static ts_status ensure_altstack(void) {
    stack_t cur;
    if (sigaltstack(NULL, &cur) == 0 && !(cur.ss_flags & SS_DISABLE) && cur.ss_size >= 65536)
        return TS_OK;
    size_t size = 256 * 1024;
    void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return ts_error(TS_ERR_OUT_OF_MEMORY, "ts_crash_handler_install: cannot map a %zu-byte "
                        "signal stack: %s", size, strerror(errno));
    stack_t ss = {.ss_sp = mem, .ss_size = size, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0) {
        int e = errno;
        munmap(mem, size);
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_crash_handler_install: sigaltstack failed: %s",
                        strerror(e));
    }
    return TS_OK; /* stays mapped for the thread's lifetime */
}

static ts_status install(int sig, void (*fn)(int, siginfo_t *, void *)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fn;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL) != 0)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_crash_handler_install: sigaction(%d) failed: %s",
                        sig, strerror(errno));
    return TS_OK;
}

ts_status ts_crash_handler_install(void) {
    ts_status st = ensure_altstack();
    if (st != TS_OK)
        return st;
    /* Resolve libunwind's lazy state now rather than first inside a handler. */
    unw_context_t ctx;
    unw_cursor_t cur;
    if (unw_getcontext(&ctx) == 0)
        (void)unw_init_local(&cur, &ctx);
    for (size_t i = 0; i < TS_ARRAY_LEN(k_fatal); i++)
        if ((st = install(k_fatal[i].sig, fatal_handler)) != TS_OK)
            return st;
    return install(SIGUSR1, usr1_handler);
}
