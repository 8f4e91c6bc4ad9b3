/* crash.c -- fatal-signal reports and SIGUSR1 all-thread stack dumps.
 *
 * Everything reached from a handler is async-signal-safe: output goes
 * through a stack buffer and write(2), stacks through the walker of
 * unwind.c (libunwind's unw_step in local mode) or unwind_none.c (glibc's
 * backtrace(), in a build without libunwind); no stdio, no malloc, no
 * lock. Frames are named from tables built when the handler is installed
 * (each loaded module's ELF function symbols, read with malloc then, never
 * in a handler). A fatal report then
 * gives file:line by running addr2line on the frames: a process started
 * with the raw clone and execve system calls (no fork handlers, no locks),
 * waited for at most 3 s. */
#define _GNU_SOURCE /* dl_iterate_phdr */
#include "diag/crash.h"
#include "core/crash_note.h"

#include "core/core.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TS_MAX_FRAMES 64

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

/* ------------------------------------------- symbols, read at install */

#define TS_MAX_MODULES 256

typedef struct sym {
    uintptr_t addr, size;
    uint32_t name; /* offset into g_names */
} sym;

typedef struct module {
    uintptr_t base, lo, hi; /* load bias; the address range of its segments */
    uint32_t path;          /* offset into g_names */
    int dyn;                /* ET_DYN (PIE or shared object): addresses are base-relative */
} module;

static module g_mods[TS_MAX_MODULES];
static int g_n_mods;
static sym *g_syms; /* sorted by addr */
static size_t g_n_syms, g_cap_syms;
static char *g_names;
static size_t g_names_len, g_names_cap;
static char g_addr2line[256]; /* absolute path, "" when not found */
static atomic_int g_tables_ready;

static uint32_t add_name(const char *s, size_t n) {
    if (g_names_len + n + 1 > g_names_cap) {
        size_t cap = g_names_cap ? 2 * g_names_cap : 1 << 16;
        while (cap < g_names_len + n + 1) cap *= 2;
        char *p = realloc(g_names, cap);
        if (!p) return UINT32_MAX;
        g_names = p, g_names_cap = cap;
    }
    memcpy(g_names + g_names_len, s, n);
    g_names[g_names_len + n] = '\0';
    uint32_t off = (uint32_t)g_names_len;
    g_names_len += n + 1;
    return off;
}

/* The function symbols of one ELF file (its .symtab, else .dynsym). */
static void load_symbols(const char *path, uintptr_t base, int dyn) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0) return;
    if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
        close(fd);
        return;
    }
    size_t size = (size_t)st.st_size;
    const uint8_t *f = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (f == MAP_FAILED) return;
    const Elf64_Ehdr *eh = (const void *)f;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_shoff == 0 ||
        eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > size) {
        munmap((void *)(uintptr_t)f, size);
        return;
    }
    const Elf64_Shdr *sh = (const void *)(f + eh->e_shoff);
    int pick = -1;
    for (int i = 0; i < eh->e_shnum; i++)
        if (sh[i].sh_type == SHT_SYMTAB || (sh[i].sh_type == SHT_DYNSYM && pick < 0)) pick = i;
    if (pick >= 0 && sh[pick].sh_link < eh->e_shnum && sh[pick].sh_offset + sh[pick].sh_size <= size) {
        const Elf64_Shdr *strs = &sh[sh[pick].sh_link];
        const Elf64_Sym *sy = (const void *)(f + sh[pick].sh_offset);
        size_t n = sh[pick].sh_size / sizeof(Elf64_Sym);
        for (size_t i = 0; i < n && strs->sh_offset + strs->sh_size <= size; i++) {
            if (ELF64_ST_TYPE(sy[i].st_info) != STT_FUNC || sy[i].st_value == 0 || sy[i].st_name >= strs->sh_size) continue;
            const char *nm = (const char *)f + strs->sh_offset + sy[i].st_name;
            size_t len = strnlen(nm, strs->sh_size - sy[i].st_name);
            if (g_n_syms == g_cap_syms) {
                size_t cap = g_cap_syms ? 2 * g_cap_syms : 4096;
                sym *p = realloc(g_syms, cap * sizeof *p);
                if (!p) break;
                g_syms = p, g_cap_syms = cap;
            }
            uint32_t off = add_name(nm, len);
            if (off == UINT32_MAX) break;
            g_syms[g_n_syms++] = (sym){.addr = (uintptr_t)sy[i].st_value + (dyn ? base : 0), .size = sy[i].st_size, .name = off};
        }
    }
    munmap((void *)(uintptr_t)f, size);
}

static int add_module(struct dl_phdr_info *info, size_t n, void *unused) {
    (void)n, (void)unused;
    if (g_n_mods == TS_MAX_MODULES) return 1;
    char exe[512];
    const char *path = info->dlpi_name;
    if (!path || !*path) { /* the main program */
        ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (k <= 0) return 0;
        exe[k] = '\0';
        path = exe;
    }
    if (path[0] != '/') return 0; /* the vDSO */
    module *m = &g_mods[g_n_mods];
    m->base = (uintptr_t)info->dlpi_addr;
    m->lo = UINTPTR_MAX, m->hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t lo = m->base + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (lo < m->lo) m->lo = lo;
        if (hi > m->hi) m->hi = hi;
    }
    if (m->hi == 0) return 0;
    m->dyn = m->base != 0; /* a non-PIE program loads at its link addresses */
    m->path = add_name(path, strlen(path));
    if (m->path == UINT32_MAX) return 1;
    load_symbols(path, m->base, m->dyn);
    g_n_mods++;
    return 0;
}

static int sym_cmp(const void *a, const void *b) {
    uintptr_t x = ((const sym *)a)->addr, y = ((const sym *)b)->addr;
    return x < y ? -1 : x > y;
}

static void find_addr2line(void) {
    const char *path = getenv("PATH");
    if (!path || !*path) path = "/usr/bin:/bin";
    while (*path) {
        const char *end = strchr(path, ':');
        size_t n = end ? (size_t)(end - path) : strlen(path);
        if (n > 0 && n + 11 < sizeof g_addr2line) {
            memcpy(g_addr2line, path, n);
            memcpy(g_addr2line + n, "/addr2line", 11);
            if (access(g_addr2line, X_OK) == 0) return;
        }
        path += n + (end != NULL);
    }
    g_addr2line[0] = '\0';
}

/* Once per process (later installs keep the tables: modules loaded after
 * the first install are shown as addresses). */
static void build_tables(void) {
    static atomic_int started;
    if (atomic_exchange(&started, 1)) return;
    dl_iterate_phdr(add_module, NULL);
    if (g_n_syms) qsort(g_syms, g_n_syms, sizeof *g_syms, sym_cmp);
    find_addr2line();
    atomic_store(&g_tables_ready, 1);
}

static const module *module_of(uintptr_t ip) {
    for (int i = 0; i < g_n_mods; i++)
        if (ip >= g_mods[i].lo && ip < g_mods[i].hi) return &g_mods[i];
    return NULL;
}

static const sym *sym_of(uintptr_t ip) {
    size_t lo = 0, hi = g_n_syms;
    while (lo < hi) { /* the last symbol at or below ip */
        size_t mid = lo + (hi - lo) / 2;
        if (g_syms[mid].addr <= ip) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0) return NULL;
    const sym *s = &g_syms[lo - 1];
    return ip < s->addr + (s->size ? s->size : 1) ? s : NULL;
}

/* --------------------------------------------------------------- stacks */

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static void write_frames(sbuf *s, const uintptr_t *ips, int n) {
    int ready = atomic_load(&g_tables_ready);
    for (int i = 0; i < n; i++) {
        uintptr_t ip = ips[i], look = i > 0 ? ip - 1 : ip; /* a return address is past its call */
        sb_str(s, "  #");
        sb_uint(s, (unsigned long long)i, 10, 1);
        sb_str(s, i < 10 ? "  " : " ");
        sb_hex(s, (unsigned long long)ip);
        const sym *fn = ready ? sym_of(look) : NULL;
        const module *m = ready ? module_of(look) : NULL;
        if (fn) {
            sb_str(s, " ");
            sb_str(s, g_names + fn->name);
            sb_str(s, "+");
            sb_hex(s, (unsigned long long)(ip - fn->addr));
        } else {
            sb_str(s, " ??");
        }
        if (m) {
            sb_str(s, " (");
            sb_str(s, base_name(g_names + m->path));
            sb_str(s, "+");
            sb_hex(s, (unsigned long long)(ip - (m->dyn ? m->base : 0)));
            sb_str(s, ")");
        }
        sb_str(s, "\n");
    }
    sb_flush(s);
}

void ts_crash_write_backtrace(int fd, void *ucontext) {
    sbuf s = {.fd = fd};
    uintptr_t ips[TS_MAX_FRAMES];
    int n = ts_crash_collect_frames(ucontext, ips, TS_MAX_FRAMES);
    if (n < 0) {
        sb_str(&s, "  (backtrace unavailable)\n");
        sb_flush(&s);
        return;
    }
    write_frames(&s, ips, n);
}

/* file:line of the frames: addr2line per module, in a child made with the
 * raw clone system call (no atfork handlers, no locks) that only dup2s and
 * execs; waited for up to 3 s. Pre-sized static buffers, no malloc. */
static void symbolize(int fd, const uintptr_t *ips, int n) {
    static atomic_int busy;
    if (!atomic_load(&g_tables_ready) || !g_addr2line[0] || atomic_exchange(&busy, 1)) return;
    static char args[TS_MAX_FRAMES][24];
    static char *argv[TS_MAX_FRAMES + 12];
    static char *const envp[] = {NULL};
    sbuf s = {.fd = fd};
    sb_str(&s, "tensorscope: source lines (addr2line):\n");
    sb_flush(&s);
    for (int mi = 0; mi < g_n_mods; mi++) {
        const module *m = &g_mods[mi];
        int k = 0, na = 0;
        argv[k++] = "addr2line", argv[k++] = "-C", argv[k++] = "-f", argv[k++] = "-i", argv[k++] = "-p", argv[k++] = "-a";
        argv[k++] = "-e", argv[k++] = g_names + m->path;
        for (int i = 0; i < n; i++) {
            uintptr_t look = i > 0 ? ips[i] - 1 : ips[i];
            if (module_of(look) != m) continue;
            sbuf hex = {.fd = -1};
            sb_hex(&hex, (unsigned long long)(look - (m->dyn ? m->base : 0)));
            memcpy(args[na], hex.b, hex.n < 23 ? hex.n : 23);
            args[na][hex.n < 23 ? hex.n : 23] = '\0';
            argv[k++] = args[na++];
        }
        argv[k] = NULL;
        if (!na) continue;
        long pid = syscall(SYS_clone, SIGCHLD, 0, NULL, NULL, 0);
        if (pid == 0) {
            syscall(SYS_dup3, fd, STDOUT_FILENO, 0);
            syscall(SYS_execve, g_addr2line, argv, envp);
            syscall(SYS_exit_group, 127);
        }
        if (pid < 0) break;
        int status;
        for (int waited = 0; syscall(SYS_wait4, (pid_t)pid, &status, WNOHANG, NULL) == 0; waited++) {
            if (waited == 300) { /* 3 s */
                kill((pid_t)pid, SIGKILL);
                syscall(SYS_wait4, (pid_t)pid, &status, 0, NULL);
                break;
            }
            struct timespec ten_ms = {0, 10000000};
            nanosleep(&ten_ms, NULL);
        }
    }
    atomic_store(&busy, 0);
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
    const char *op, *tensor, *where;
    ts_crash_current_op(&op, &tensor, &where);
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
    uintptr_t ips[TS_MAX_FRAMES];
    int n = ts_crash_collect_frames(uc, ips, TS_MAX_FRAMES);
    if (n < 0) {
        sb_str(&s, "  (backtrace unavailable)\n");
        sb_flush(&s);
    } else {
        write_frames(&s, ips, n);
        symbolize(STDERR_FILENO, ips, n);
    }

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
static atomic_int g_dump_fd = STDERR_FILENO; /* where the current dump goes */

/* `tensorscope stacks PID` (ts_process_stacks): the requester creates
 * /tmp/tensorscope-stacks.<target pid>.<requester pid> (mode 0600) and
 * queues SIGUSR1 with this value; the target writes the dump there
 * instead of to stderr, ending with STACKS_END. */
#define STACKS_REQUEST 0x54537374 /* "TSst" */
#define STACKS_DIR "/tmp"
#define STACKS_END "tensorscope: end of stacks\n"

static void stacks_path(sbuf *p, long target, long requester) {
    sb_str(p, STACKS_DIR "/tensorscope-stacks.");
    sb_uint(p, (unsigned long long)target, 10, 1);
    sb_str(p, ".");
    sb_uint(p, (unsigned long long)requester, 10, 1);
    p->b[p->n < sizeof p->b ? p->n : sizeof p->b - 1] = '\0';
}

/* The requester's file, opened for the dump: only a regular file of this
 * user, never through a link (open, fstat: async-signal-safe); -1 if not. */
static int open_request(long requester) {
    sbuf path = {.fd = -1};
    stacks_path(&path, (long)getpid(), requester);
    int fd = open(path.b, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid())) {
        close(fd);
        fd = -1;
    }
    return fd;
}

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

/* Whether thread tid blocks SIGUSR1: the SigBlk mask of
 * /proc/self/task/<tid>/status (open, read, close: async-signal-safe). */
static int blocks_usr1(long tid) {
    sbuf path = {.fd = -1};
    sb_str(&path, "/proc/self/task/");
    sb_uint(&path, (unsigned long long)tid, 10, 1);
    sb_str(&path, "/status");
    path.b[path.n < sizeof path.b ? path.n : sizeof path.b - 1] = '\0';
    int fd = open(path.b, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *p = strstr(buf, "SigBlk:");
    if (!p)
        return 0;
    p += 7;
    while (*p == ' ' || *p == '\t')
        p++;
    unsigned long long mask = 0;
    for (; (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'); p++)
        mask = mask << 4 | (unsigned long long)(*p <= '9' ? *p - '0' : *p - 'a' + 10);
    return (mask >> (SIGUSR1 - 1)) & 1;
}

static void dump_all_threads(void *uc, int out) {
    atomic_store(&g_dump_fd, out);
    sbuf s = {.fd = out};
    pid_t pid = getpid();
    long self = my_tid();
    int gen = atomic_fetch_add(&g_dump_gen, 1) + 1;
    sb_str(&s, "\ntensorscope: SIGUSR1: stacks of all threads of process ");
    sb_uint(&s, (unsigned long long)pid, 10, 1);
    sb_str(&s, "\n");
    dump_header(&s, self, " (received SIGUSR1)");
    ts_crash_write_backtrace(out, uc);

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
                if (blocks_usr1(tid)) { /* e.g. a sanitizer's own thread: asking would only time out */
                    dump_header(&s, tid, " (blocks SIGUSR1: stack not shown)");
                    continue;
                }
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
    sb_str(&s, STACKS_END);
    sb_flush(&s);
    atomic_store(&g_dump_fd, STDERR_FILENO);
}

static void usr1_handler(int sig, siginfo_t *si, void *uc) {
    (void)sig;
    int saved_errno = errno;
    if (si && si->si_code == SI_QUEUE && si->si_pid == getpid()) {
        /* A request from the initiator: answer only the current dump. */
        if (atomic_load(&g_dump_active) && si->si_value.sival_int == atomic_load(&g_dump_gen)) {
            int out = atomic_load(&g_dump_fd);
            sbuf s = {.fd = out};
            dump_header(&s, my_tid(), "");
            ts_crash_write_backtrace(out, uc);
            atomic_store(&g_dump_ack, 1);
        }
    } else {
        int expected = 0, out = STDERR_FILENO;
        if (si && si->si_code == SI_QUEUE && si->si_value.sival_int == STACKS_REQUEST) {
            out = open_request((long)si->si_pid); /* `tensorscope stacks`: into its file */
            if (out < 0) {
                errno = saved_errno;
                return;
            }
        }
        if (atomic_compare_exchange_strong(&g_dump_active, &expected, 1)) {
            dump_all_threads(uc, out);
            atomic_store(&g_dump_active, 0);
        }
        if (out != STDERR_FILENO) close(out);
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
    build_tables();
    ts_crash_unwind_prepare();
    for (size_t i = 0; i < TS_ARRAY_LEN(k_fatal); i++)
        if ((st = install(k_fatal[i].sig, fatal_handler)) != TS_OK)
            return st;
    return install(SIGUSR1, usr1_handler);
}

/* ------------------------------------------ the stacks of another process */

static bool read_small(const char *path, char *buf, size_t n) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    ssize_t k = read(fd, buf, n - 1);
    close(fd);
    buf[k > 0 ? k : 0] = '\0';
    return k > 0;
}

/* Whether the process maps the library or runs the CLI, and catches SIGUSR1. */
static ts_status check_target(int pid) {
    if (pid <= 0) return ts_error(TS_ERR_INVALID_ARGUMENT, "stacks: '%d' is not a process id", pid);
    if (kill(pid, 0) != 0) {
        if (errno == ESRCH) return ts_error(TS_ERR_NOT_FOUND, "stacks: there is no process %d", pid);
        return ts_error(TS_ERR_STATE, "stacks: process %d is not ours to ask (%s): it belongs to another user; run this as that user", pid,
                        strerror(errno));
    }
    char path[64], exe[512] = "", status[4096];
    snprintf(path, sizeof path, "/proc/%d/exe", pid);
    ssize_t k = readlink(path, exe, sizeof exe - 1);
    if (k < 0)
        return ts_error(TS_ERR_STATE, "stacks: process %d cannot be inspected (%s reads %s: %s); run this as its user", pid, "readlink", path,
                        strerror(errno));
    exe[k] = '\0';
    snprintf(path, sizeof path, "/proc/%d/maps", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    bool ours = strcmp(strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe, "tensorscope") == 0;
    char buf[8192 + 32];
    size_t keep = 0;
    for (ssize_t n; !ours && fd >= 0 && (n = read(fd, buf + keep, sizeof buf - keep - 1)) > 0;) {
        buf[keep + (size_t)n] = '\0';
        ours = strstr(buf, "libtensorscope") != NULL;
        size_t len = keep + (size_t)n;
        keep = len > 32 ? 32 : len; /* a name split between two reads */
        memmove(buf, buf + len - keep, keep);
    }
    if (fd >= 0) close(fd);
    if (!ours)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "stacks: process %d (%s) is not a tensorscope process: it neither runs the tensorscope "
                        "command nor loads libtensorscope", pid, exe);
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    const char *cgt = read_small(path, status, sizeof status) ? strstr(status, "SigCgt:") : NULL;
    unsigned long long mask = cgt ? strtoull(cgt + 7, NULL, 16) : 0;
    if (!((mask >> (SIGUSR1 - 1)) & 1))
        return ts_error(TS_ERR_STATE, "stacks: process %d (%s) has not installed tensorscope's crash handler (ts_crash_handler_install), "
                        "so it cannot answer; SIGUSR1 would end it", pid, exe);
    return TS_OK;
}

ts_status ts_process_stacks(int pid, double timeout_s, char **out) {
    if (!out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_process_stacks: out is NULL");
    *out = NULL;
    ts_status st = check_target(pid);
    if (st) return st;
    sbuf path = {.fd = -1};
    stacks_path(&path, pid, (long)getpid());
    unlink(path.b); /* one left by an earlier request of a process of this pid */
    int fd = open(path.b, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return ts_error(TS_ERR_IO, "stacks: cannot create %s: %s", path.b, strerror(errno));
    union sigval v = {.sival_int = STACKS_REQUEST};
    if (sigqueue(pid, SIGUSR1, v) != 0) {
        int e = errno;
        close(fd);
        unlink(path.b);
        return ts_error(TS_ERR_STATE, "stacks: cannot signal process %d: %s", pid, strerror(e));
    }
    char *text = NULL;
    size_t used = 0, cap = 0;
    uint64_t deadline = ts_now_ns() + (uint64_t)(timeout_s * 1e9);
    bool done = false;
    while (!done) { /* until the end line, the process's end, or the deadline */
        if (ts_grow((void **)&text, &cap, used + 65536, 1)) {
            st = TS_ERR_OUT_OF_MEMORY;
            break;
        }
        ssize_t k = pread(fd, text + used, cap - used - 1, (off_t)used);
        if (k > 0) used += (size_t)k;
        text[used] = '\0';
        done = used >= strlen(STACKS_END) && strcmp(text + used - strlen(STACKS_END), STACKS_END) == 0;
        if (done || k > 0) continue;
        if (kill(pid, 0) != 0) {
            st = ts_error(TS_ERR_STATE, "stacks: process %d ended before it answered", pid);
            break;
        }
        if (ts_now_ns() > deadline) {
            st = ts_error(TS_ERR_STATE, "stacks: process %d did not answer within %.0f s (%zu bytes so far); it may block SIGUSR1", pid,
                          timeout_s, used);
            break;
        }
        struct timespec ms = {0, 5000000};
        nanosleep(&ms, NULL);
    }
    close(fd);
    unlink(path.b);
    if (st) {
        ts_free(text);
        return st;
    }
    *out = text; /* ts_string_free */
    return TS_OK;
}
