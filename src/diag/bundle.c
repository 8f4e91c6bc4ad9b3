/* bundle.c -- `tensorscope debug-run`: run a command with the debug
 * variables set and archive what it left behind (docs/observation.md#diagnostics).
 *
 * The work directory (mkdtemp under $TMPDIR or /tmp) receives:
 *   output.log   the child's stdout and stderr, interleaved through one pipe
 *                (also copied to our stdout as it arrives)
 *   metrics.txt  TS_METRICS_FILE, if the child's library wrote it
 *   graph.txt    TS_SAVE_GRAPH_FILE: every compile's graph, appended, training
 *                models with their backward pass (TS_SAVE_GRAPH_FMT=text and
 *                TS_SAVE_GRAPH_BACKWARD=1 unless set)
 *   exit.txt     "exit N", "signal N (SIGX)" or "timeout after S s" followed
 *                by how the killed child ended
 *   command.txt  the command line, shell-quoted, secrets redacted
 *   env.txt      the child's environment, secrets redacted
 *   sysinfo.txt  uname, CPU, memory, library versions
 *   gpu.txt      every GPU as ts_gpus_describe writes it (or why none), then
 *                the output of `nvidia-smi` and `nvidia-smi -q` when it is
 *                on PATH, else why it did not run; each in a child process
 *                stopped after 15 s (a hung driver; -q is not tried after
 *                nvidia-smi hung)
 * and is archived as outfile (.tar.gz, pax) under `tensorscope-debug/`.
 * What is redacted (docs/reliability.md says the same to users): the value
 * of every variable whose name holds one of secret_words (any case), the
 * password of every URL with credentials (scheme://user:pass@host, or the
 * user part when there is no password: scheme://token@host) in any value or
 * argument, and the value of every argument flag whose name holds a secret
 * word (--api-key=V, --token V); PWD and OLDPWD are not secrets. Every value
 * so redacted (but the shortest, which would mangle the text) is also
 * scrubbed from every file archived, output.log included, where the
 * command printed it (scrub_work). The work directory is 0700 and every file
 * in it and the archive 0600: only their owner reads them.
 * The child also gets TS_LOG_LEVEL=4 (unless set) and TS_IR_DEBUG=1. It
 * runs in its own process group so a timeout (SIGTERM, then SIGKILL 2 s
 * later) reaches the processes it started too. Ctrl-C (SIGINT), SIGTERM
 * and SIGHUP are caught while ts_debug_run runs: the first is forwarded to
 * that group, the command waited for and the bundle written with what
 * exists (exit.txt says so; the GPUs are not probed then); a second one
 * kills the group. */
#include "core/core.h"
#include "core/atomic_file.h"

#if TS_HAVE_CAIRO
#include <cairo.h>
#endif
#if TS_HAVE_PROTOBUFC
#include <protobuf-c/protobuf-c.h>
#endif

#include <archive.h>
#include <archive_entry.h>
#include <cblas.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

extern char **environ;

#define TS_ARCHIVE_TOP "tensorscope-debug"

static const char *signal_name(int sig) {
    static const struct {
        int sig;
        const char *name;
    } names[] = {{SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"},
                 {SIGILL, "SIGILL"},   {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"},
                 {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"},
                 {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
                 {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},
                 {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"}};
    for (size_t i = 0; i < TS_ARRAY_LEN(names); i++)
        if (names[i].sig == sig)
            return names[i].name;
    return "?";
}

/* -------------------------------------------------------- small helpers */

/* "a<sep>b", allocated: paths ('/') and environment entries ('='). */
static char *join(const char *a, char sep, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = ts_malloc(n);
    if (p)
        snprintf(p, n, "%s%c%s", a, sep, b);
    return p;
}

static char *path_join(const char *dir, const char *name) { return join(dir, '/', name); }

static int write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static FILE *open_in(const char *dir, const char *name) {
    char *p = path_join(dir, name);
    int fd = p ? open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600) : -1;
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (fd >= 0 && !f)
        close(fd);
    if (p && !f)
        ts_error(TS_ERR_IO, "debug-run: cannot create %s: %s", p, strerror(errno));
    ts_free(p);
    return f;
}

static ts_status close_file(FILE *f, const char *name) {
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return ts_error(TS_ERR_IO, "debug-run: writing %s failed (disk full?)", name);
    return TS_OK;
}

/* Names of variables and flags whose values are secrets (any case, as
 * part of the name: MY_API_KEY, PGPASSWD, --auth-token), and short ones
 * that count only as a whole part of the name, between '_', '-', '.' or
 * its ends (GITHUB_PAT, CI_JOB_JWT, AZURE_SAS, &sig=, but not PATH). */
static const char *const secret_words[] = {"KEY",     "TOKEN",   "SECRET",     "PASS",  "PWD",
                                           "CREDENTIAL", "AUTH", "PRIVATE",   "WEBHOOK", "COOKIE",
                                           "SESSION", "SIGNATURE", "CERT",   "BEARER", "DSN",
                                           "CONNECTION_STRING", "CONNECTIONSTRING"};
static const char *const secret_parts[] = {"JWT", "PAT", "SAS", "SIG"};

static int has_secret_word(const char *name, size_t n) {
    for (size_t w = 0; w < TS_ARRAY_LEN(secret_words); w++) {
        size_t k = strlen(secret_words[w]);
        for (size_t i = 0; i + k <= n; i++)
            if (strncasecmp(name + i, secret_words[w], k) == 0)
                return 1;
    }
    for (size_t i = 0; i < n;) { /* the parts between separators */
        size_t j = i;
        while (j < n && isalnum((unsigned char)name[j]))
            j++;
        for (size_t w = 0; w < TS_ARRAY_LEN(secret_parts) && j > i; w++)
            if (j - i == strlen(secret_parts[w]) && strncasecmp(name + i, secret_parts[w], j - i) == 0)
                return 1;
        i = j + 1;
    }
    return 0;
}

/* The next URL credential in text from p: the password of
 * scheme://user:pw@host, or the user part of scheme://tok@host. Returns
 * where it starts (*n bytes, maybe 0) and sets *resume to the '@' after
 * it; NULL when there is none. */
static const char *url_secret(const char *p, size_t *n, const char **resume) {
    for (;;) {
        const char *sep = strstr(p, "://");
        if (!sep)
            return NULL;
        const char *auth = sep + 3, *end = auth, *at = NULL;
        while (*end && !strchr("/?#", *end) && !isspace((unsigned char)*end)) {
            if (*end == '@')
                at = end;
            end++;
        }
        if (at) {
            const char *colon = memchr(auth, ':', (size_t)(at - auth));
            const char *start = colon ? colon + 1 : auth;
            *n = (size_t)(at - start);
            *resume = at;
            return start;
        }
        p = auth;
    }
}

/* A variable whose value is a secret: its name holds a secret word, and it
 * is not the shell's working directory (PWD, OLDPWD: "PWD" is in the
 * words for DB_PWD and the like). */
static int secret_var(const char *name, size_t n) {
    if ((n == 3 && strncmp(name, "PWD", 3) == 0) || (n == 6 && strncmp(name, "OLDPWD", 6) == 0))
        return 0;
    return has_secret_word(name, n);
}

/* Where a secret inside a value ends: at a space, a quote, or a separator
 * of connection strings and URL queries. */
static size_t secret_span(const char *p) {
    size_t n = 0;
    while (p[n] && !isspace((unsigned char)p[n]) && !strchr("\"';&,#", p[n]))
        n++;
    return n;
}

static int token_char(char c) { return isalnum((unsigned char)c) || c == '_' || c == '-'; }

/* Well-known token shapes, at p (the start of a word): GitHub's ghp_ (and
 * gho_, ghu_, ghs_, ghr_) and github_pat_, GitLab's glpat-, Slack's xox?-,
 * AWS access key ids (AKIA/ASIA and 16 capitals or digits), and a JWT
 * (eyJ..., three base64url parts joined by dots). Returns its length, 0. */
static size_t token_shape(const char *p) {
    static const char *const prefixes[] = {"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-",
                                           "xoxa-", "xoxb-", "xoxo-", "xoxp-", "xoxr-", "xoxs-"};
    size_t run = 0;
    while (token_char(p[run]))
        run++;
    for (size_t i = 0; i < TS_ARRAY_LEN(prefixes); i++) {
        size_t k = strlen(prefixes[i]);
        if (strncmp(p, prefixes[i], k) == 0 && run >= k + 10)
            return run;
    }
    if ((strncmp(p, "AKIA", 4) == 0 || strncmp(p, "ASIA", 4) == 0) && run == 20) {
        size_t i = 4;
        while (i < 20 && (isupper((unsigned char)p[i]) || isdigit((unsigned char)p[i])))
            i++;
        if (i == 20)
            return 20;
    }
    if (strncmp(p, "eyJ", 3) == 0) {
        size_t n = 0;
        for (int part = 0; part < 3; part++) {
            size_t k = 0;
            while (token_char(p[n + k]))
                k++;
            if (k == 0)
                return 0;
            n += k;
            if (part < 2 && p[n++] != '.')
                return 0;
        }
        return n;
    }
    return 0;
}

/* Whether `word` (any case) is in text before q. */
static int said_before(const char *text, const char *q, const char *word) {
    size_t k = strlen(word);
    for (const char *t = text; t + k <= q; t++)
        if (strncasecmp(t, word, k) == 0)
            return 1;
    return 0;
}

/* The next secret inside text from p: a URL's credentials (see url_secret),
 * the credentials after "Bearer " (or "Basic " after "Authorization"), the
 * value of a secret-named key=value pair (AccountKey=, SharedAccessSignature=,
 * a URL query's access_token= or &sig=, a --password= inside a shell
 * command) or a well-known token shape. Returns where it starts (*n bytes)
 * and sets *resume past it; NULL when there is none. */
static const char *value_secret(const char *text, const char *p, size_t *n, const char **resume) {
    size_t un = 0;
    const char *uresume = NULL, *url = url_secret(p, &un, &uresume);
    for (const char *q = p; *q && (!url || q < url); q++) {
        int word_start = q == text || !token_char(q[-1]);
        size_t k = 0;
        const char *v = NULL;
        if (word_start && strncasecmp(q, "bearer ", 7) == 0)
            v = q + 7;
        else if (word_start && strncasecmp(q, "basic ", 6) == 0 && said_before(text, q, "authorization"))
            v = q + 6;
        if (v) {
            while (*v == ' ')
                v++;
            k = secret_span(v);
        } else if (*q == '=' && q > text) {
            const char *key = q;
            while (key > text && (token_char(key[-1]) || key[-1] == '.'))
                key--;
            if (key < q && secret_var(key, (size_t)(q - key))) {
                v = q + 1;
                k = secret_span(v);
            }
        } else if (word_start && (k = token_shape(q)) > 0) {
            v = q;
        }
        if (v && k > 0) {
            *n = k;
            *resume = v + k;
            return v;
        }
    }
    if (url) {
        *n = un;
        *resume = uresume;
    }
    return url;
}

/* Writes text with every secret inside it (value_secret) replaced by
 * <redacted>: scheme://user:pw@host -> scheme://user:<redacted>@host,
 * scheme://tok@host -> scheme://<redacted>@host, AccountKey=<redacted>;...,
 * Authorization: Bearer <redacted>. */
static void put_redacted(FILE *f, const char *text) {
    const char *p = text, *resume, *cred;
    size_t n;
    while ((cred = value_secret(text, p, &n, &resume)) != NULL) {
        fwrite(p, 1, (size_t)(cred - p), f);
        fputs("<redacted>", f);
        p = resume;
    }
    fputs(p, f);
}

/* ------------------------------------------------------ the environment */

typedef struct envlist {
    char **v;
    size_t n, cap;
} envlist;

static ts_status env_push(envlist *e, char *s) {
    if (!s || ts_grow((void **)&e->v, &e->cap, e->n + 2, sizeof(char *)) != TS_OK) {
        ts_free(s);
        return TS_ERR_OUT_OF_MEMORY;
    }
    e->v[e->n++] = s;
    e->v[e->n] = NULL;
    return TS_OK;
}

static char *env_pair(const char *name, const char *value) { return join(name, '=', value); }

static void env_free(envlist *e) {
    for (size_t i = 0; i < e->n; i++)
        ts_free(e->v[i]);
    ts_free(e->v);
}

static int env_has(const char *entry, const char *name) {
    size_t k = strlen(name);
    return strncmp(entry, name, k) == 0 && entry[k] == '=';
}

/* Our environment with the debug variables set or added. */
static ts_status build_env(envlist *e, const char *work) {
    char *metrics = path_join(work, "metrics.txt"), *graph = path_join(work, "graph.txt");
    struct {
        const char *name, *value;
        int force; /* replace a value the user set */
    } vars[] = {{"TS_LOG_LEVEL", "4", 0},          {"TS_METRICS_FILE", metrics, 1},
                {"TS_SAVE_GRAPH_FILE", graph, 1},   {"TS_SAVE_GRAPH_FMT", "text", 0},
                {"TS_SAVE_GRAPH_BACKWARD", "1", 0}, {"TS_IR_DEBUG", "1", 1}};
    ts_status st = metrics && graph ? TS_OK : TS_ERR_OUT_OF_MEMORY;
    int seen[TS_ARRAY_LEN(vars)] = {0};
    for (char **p = environ; p && *p && st == TS_OK; p++) {
        int skip = 0;
        for (size_t i = 0; i < TS_ARRAY_LEN(vars); i++)
            if (env_has(*p, vars[i].name)) {
                seen[i] = 1;
                skip = vars[i].force;
            }
        if (!skip)
            st = env_push(e, ts_strdup(*p));
    }
    for (size_t i = 0; i < TS_ARRAY_LEN(vars) && st == TS_OK; i++)
        if (vars[i].force || !seen[i])
            st = env_push(e, env_pair(vars[i].name, vars[i].value));
    ts_free(metrics);
    ts_free(graph);
    return st == TS_OK ? TS_OK : ts_error(st, "debug-run: out of memory building the environment");
}

/* ------------------------------------------------------- running the child */

typedef struct run_result {
    int status;       /* waitpid status */
    int timed_out;
    int exec_errno;   /* nonzero when the command could not be started */
    int interrupted;  /* the signal forwarded to it (Ctrl-C: SIGINT), 0 if none */
} run_result;

/* Ctrl-C, SIGTERM and SIGHUP while ts_debug_run runs: the first is kept
 * here and forwarded to the command, a second one kills it. */
static const int caught_signals[] = {SIGINT, SIGTERM, SIGHUP};
static volatile sig_atomic_t g_signal, g_signal_again;
static struct sigaction g_old_action[TS_ARRAY_LEN(caught_signals)];
static int g_catching;

static void on_signal(int sig) {
    if (g_signal)
        g_signal_again = 1;
    else
        g_signal = sig;
}

/* Catches the signals the user has not told this process to ignore. */
static void catch_signals(void) {
    g_signal = 0, g_signal_again = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: poll returns at once */
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < TS_ARRAY_LEN(caught_signals); i++)
        if (sigaction(caught_signals[i], NULL, &g_old_action[i]) == 0 && g_old_action[i].sa_handler != SIG_IGN)
            sigaction(caught_signals[i], &sa, NULL);
    g_catching = 1;
}

/* The handlers as they were (in a child before exec too: async-signal-safe). */
static void restore_signals(void) {
    if (!g_catching)
        return;
    for (size_t i = 0; i < TS_ARRAY_LEN(caught_signals); i++)
        sigaction(caught_signals[i], &g_old_action[i], NULL);
}

static void stop_catching(void) {
    restore_signals();
    g_catching = 0;
}

static void copy_out(int log_fd, bool echo, const char *buf, size_t n) {
    (void)write_all(log_fd, buf, n);
    if (echo)
        (void)write_all(STDOUT_FILENO, buf, n);
}

/* Runs argv with envp, its output into log_fd (and onto our stdout when
 * echo), killed after timeout_s (0: never). argv NULL: the child calls fn
 * instead, for work that may hang (a GPU driver's first call). */
static ts_status run_child(char *const *argv, void (*fn)(void), double timeout_s, char **envp, int log_fd,
                           bool echo, run_result *res) {
    int out[2], err[2]; /* the child's output; exec's errno if it fails */
    if (pipe(out) != 0)
        return ts_error(TS_ERR_IO, "debug-run: pipe: %s", strerror(errno));
    if (pipe(err) != 0) {
        close(out[0]);
        close(out[1]);
        return ts_error(TS_ERR_IO, "debug-run: pipe: %s", strerror(errno));
    }
    for (int i = 0; i < 2; i++) {
        fcntl(out[i], F_SETFD, FD_CLOEXEC);
        fcntl(err[i], F_SETFD, FD_CLOEXEC);
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(out[0]), close(out[1]), close(err[0]), close(err[1]);
        return ts_error(TS_ERR_IO, "debug-run: fork: %s", strerror(e));
    }
    if (pid == 0) { /* only async-signal-safe calls from here to exec */
        restore_signals();
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        setpgid(0, 0);
        dup2(out[1], STDOUT_FILENO);
        dup2(out[1], STDERR_FILENO);
        if (!argv) {
            fn();
            _exit(0);
        }
        environ = envp;
        execvp(argv[0], argv);
        int e = errno;
        (void)write_all(err[1], (const char *)&e, sizeof e);
        _exit(127);
    }
    setpgid(pid, pid); /* also here, so the group exists before any kill */
    close(out[1]);
    close(err[1]);

    memset(res, 0, sizeof(*res));
    int e = 0;
    if (read(err[0], &e, sizeof e) == (ssize_t)sizeof e) /* EOF at a successful exec */
        res->exec_errno = e;
    close(err[0]);
    if (res->exec_errno) {
        char msg[512];
        int k = snprintf(msg, sizeof msg, "tensorscope debug-run: cannot execute '%s': %s\n",
                         argv[0], strerror(res->exec_errno));
        copy_out(log_fd, echo, msg, (size_t)k < sizeof msg ? (size_t)k : sizeof msg - 1);
    }

    uint64_t start = ts_now_ns(), term_at = 0;
    int reaped = 0, eof = 0, killed = 0, hard_killed = 0;
    char buf[65536];
    while (!reaped || !eof) {
        if (!reaped && waitpid(pid, &res->status, WNOHANG) == pid)
            reaped = 1;
        if (reaped && !eof) {
            /* The child is gone: take what is buffered, but do not wait for
             * processes it left behind holding the pipe. */
            fcntl(out[0], F_SETFL, O_NONBLOCK);
            ssize_t k;
            while ((k = read(out[0], buf, sizeof buf)) > 0)
                copy_out(log_fd, echo, buf, (size_t)k);
            eof = 1;
            break;
        }
        if (!eof) {
            struct pollfd p = {.fd = out[0], .events = POLLIN};
            if (poll(&p, 1, 100) > 0) {
                ssize_t k = read(out[0], buf, sizeof buf);
                if (k > 0)
                    copy_out(log_fd, echo, buf, (size_t)k);
                else if (k == 0 || errno != EINTR)
                    eof = 1;
            }
        } else {
            struct timespec ts = {0, 20000000};
            nanosleep(&ts, NULL);
        }
        if (!reaped && g_signal && !res->interrupted) { /* Ctrl-C: the command's, too */
            res->interrupted = g_signal;
            kill(-pid, g_signal);
            kill(pid, g_signal);
        }
        if (!reaped && g_signal_again && !hard_killed) { /* a second one: no more waiting */
            hard_killed = 1;
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
        }
        uint64_t now = ts_now_ns();
        if (!reaped && timeout_s > 0 && !res->timed_out &&
            (double)(now - start) >= timeout_s * 1e9) {
            res->timed_out = 1;
            term_at = now;
            kill(-pid, SIGTERM);
            kill(pid, SIGTERM);
        }
        if (!reaped && res->timed_out && !killed && now - term_at >= 2000000000ull) {
            killed = 1;
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
        }
    }
    if (res->timed_out)
        kill(-pid, SIGKILL); /* whatever the command started */
    close(out[0]);
    return TS_OK;
}

/* -------------------------------------------------------- the text files */

static void write_exit(FILE *f, double timeout_s, const run_result *r) {
    if (r->interrupted)
        fprintf(f, "interrupted: debug-run got %s and forwarded it to the command\n", signal_name(r->interrupted));
    if (r->timed_out)
        fprintf(f, "timeout after %g s\n", timeout_s);
    if (r->exec_errno)
        fprintf(f, "not started: %s\n", strerror(r->exec_errno));
    if (WIFEXITED(r->status))
        fprintf(f, "exit %d\n", WEXITSTATUS(r->status));
    else if (WIFSIGNALED(r->status))
        fprintf(f, "signal %d (%s)\n", WTERMSIG(r->status), signal_name(WTERMSIG(r->status)));
}

/* The argument with URL credentials redacted, shell-quoted unless plain. */
static void put_quoted(FILE *f, const char *arg) {
    char *red = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&red, &len);
    if (m) {
        put_redacted(m, arg);
        if (fclose(m) != 0) {
            free(red);
            red = NULL;
        }
    }
    const char *a = red ? red : "<redacted: out of memory>";
    int plain = *a != 0;
    for (const char *p = a; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("-_./=:,+@%", *p))
            plain = 0;
    if (plain) {
        fputs(a, f);
    } else {
        fputc('\'', f);
        for (const char *p = a; *p; p++)
            *p == '\'' ? fputs("'\\''", f) : fputc(*p, f);
        fputc('\'', f);
    }
    free(red); /* open_memstream's, from malloc */
}

/* A flag whose name holds a secret word: "--api-key=V" (value inline) or
 * "--token" (value in the next argument). */
static int secret_flag(const char *a, const char **inline_value) {
    *inline_value = NULL;
    if (a[0] != '-')
        return 0;
    const char *eq = strchr(a, '=');
    size_t n = eq ? (size_t)(eq - a) : strlen(a);
    if (!has_secret_word(a, n))
        return 0;
    *inline_value = eq ? eq + 1 : NULL;
    return 1;
}

static void write_command(FILE *f, char *const *argv) {
    int hide_next = 0;
    for (size_t i = 0; argv[i]; i++) {
        const char *a = argv[i], *value;
        fputs(i ? " " : "", f);
        if (hide_next) {
            fputs("'<redacted>'", f);
            hide_next = 0;
        } else if (i > 0 && secret_flag(a, &value)) {
            if (value) {
                fwrite(a, 1, (size_t)(value - a), f);
                fputs("'<redacted>'", f);
            } else {
                put_quoted(f, a);
                hide_next = 1;
            }
        } else {
            put_quoted(f, a);
        }
    }
    fputc('\n', f);
}

static void write_env(FILE *f, char *const *envp) {
    for (size_t i = 0; envp[i]; i++) {
        const char *eq = strchr(envp[i], '=');
        if (eq && secret_var(envp[i], (size_t)(eq - envp[i]))) {
            fprintf(f, "%.*s=<redacted>\n", (int)(eq - envp[i]), envp[i]);
        } else {
            put_redacted(f, envp[i]);
            fputc('\n', f);
        }
    }
}

/* Copies the lines of a /proc file that start with one of the keys. */
static void copy_proc_lines(FILE *out, const char *path, const char *key, int first_only) {
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, strlen(key)) == 0 && (!first_only || n++ == 0))
            fputs(line, out);
    fclose(f);
}

static void write_sysinfo(FILE *f) {
    struct utsname u;
    if (uname(&u) == 0)
        fprintf(f, "uname: %s %s %s %s %s\n", u.sysname, u.nodename, u.release, u.version,
                u.machine);
    copy_proc_lines(f, "/proc/cpuinfo", "model name", 1);
    fprintf(f, "online cpus: %ld\n", sysconf(_SC_NPROCESSORS_ONLN));
    copy_proc_lines(f, "/proc/meminfo", "MemTotal", 1);
    copy_proc_lines(f, "/proc/meminfo", "MemAvailable", 1);
    fprintf(f, "tensorscope: %s\n", ts_version());
    fprintf(f, "zlib: %s\n", zlibVersion());
    fprintf(f, "openblas: %s\n", openblas_get_config());
#if TS_HAVE_CAIRO
    fprintf(f, "cairo: %s\n", cairo_version_string());
#else
    fprintf(f, "cairo: not built\n");
#endif
#if TS_HAVE_PROTOBUFC
    fprintf(f, "protobuf-c: %s\n", protobuf_c_version());
#else
    fprintf(f, "protobuf-c: not built\n");
#endif
    const char *la = archive_version_string(); /* "libarchive 3.6.2" */
    fprintf(f, "libarchive: %s\n", strncmp(la, "libarchive ", 11) == 0 ? la + 11 : la);
}

/* In a child: every GPU, as ts_gpus_describe writes them. */
static void print_gpus(void) {
    char text[8192];
    ts_gpus_describe(text, sizeof text, NULL);
    (void)write_all(STDOUT_FILENO, text, strlen(text));
}

/* The GPUs as the CUDA backend sees them (or why none), then what
 * nvidia-smi says, when it is on PATH. Each runs in a child process, its
 * output captured and its exit status written when not 0, stopped after
 * GPU_PROBE_S seconds: a hung driver leaves the bundle whole. */
#define GPU_PROBE_S 15.0
static void write_gpu(FILE *f) {
    static char *const smi[][3] = {{"nvidia-smi", NULL, NULL}, {"nvidia-smi", "-q", NULL}};
    if (g_signal) {
        fprintf(f, "(not probed: debug-run was interrupted by %s)\n", signal_name(g_signal));
        return;
    }
    for (size_t i = 0; i <= TS_ARRAY_LEN(smi); i++) {
        char *const *argv = i ? smi[i - 1] : NULL; /* first the description, in a child of ours */
        if (argv)
            fprintf(f, "\n$ %s%s%s\n", argv[0], argv[1] ? " " : "", argv[1] ? argv[1] : "");
        fflush(f);
        run_result r;
        if (run_child(argv, print_gpus, GPU_PROBE_S, environ, fileno(f), false, &r) != TS_OK) {
            fprintf(f, "(not run: %s)\n", ts_last_error());
            continue;
        }
        if (r.exec_errno)
            break; /* the line says why: not on PATH */
        if (r.timed_out || !WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0)
            write_exit(f, GPU_PROBE_S, &r);
        if (r.timed_out && argv)
            break; /* hung once, it would hang again */
    }
}

/* ------------------------------------------------- scrubbing the secrets */

/* Every secret value the redaction above knows (secret variables' values,
 * secret flags' values, URL credentials in any value or argument), to be
 * scrubbed from everything archived, wherever the command printed it. */
typedef struct secret {
    const char *p; /* into the environment or argv, which outlive the list */
    size_t n;
} secret;
typedef struct secrets {
    secret *v;
    size_t n, cap, longest;
    char too_short[512]; /* where the ones too short to scrub are */
} secrets;

/* Shorter values are left where they are: scrubbing them would mangle the
 * files (every "abc" in the log), and the run says so. */
#define TS_SCRUB_MIN 4

static ts_status secret_add(secrets *s, const char *p, size_t n, const char *where) {
    if (n == 0)
        return TS_OK;
    if (n < TS_SCRUB_MIN) {
        size_t k = strlen(s->too_short);
        if (!strstr(s->too_short, where) && k + strlen(where) + 8 < sizeof s->too_short)
            snprintf(s->too_short + k, sizeof s->too_short - k, "%s%s", k ? ", " : "", where);
        return TS_OK;
    }
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].n == n && memcmp(s->v[i].p, p, n) == 0)
            return TS_OK;
    if (ts_grow((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v) != TS_OK)
        return TS_ERR_OUT_OF_MEMORY;
    s->v[s->n++] = (secret){p, n};
    if (n > s->longest)
        s->longest = n;
    return TS_OK;
}

static ts_status add_value_secrets(secrets *s, const char *text, const char *where) {
    const char *p = text, *cred;
    size_t n;
    ts_status st = TS_OK;
    while (st == TS_OK && (cred = value_secret(text, p, &n, &p)) != NULL)
        st = secret_add(s, cred, n, where);
    return st;
}

static int longer_first(const void *a, const void *b) {
    size_t x = ((const secret *)a)->n, y = ((const secret *)b)->n;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* What env.txt and command.txt redact (write_env, write_command), as values. */
static ts_status collect_secrets(secrets *s, char *const *envp, char *const *argv) {
    ts_status st = TS_OK;
    for (size_t i = 0; envp[i] && st == TS_OK; i++) {
        const char *eq = strchr(envp[i], '=');
        if (!eq)
            continue;
        char where[96];
        snprintf(where, sizeof where, "%.*s", (int)(eq - envp[i] < 80 ? eq - envp[i] : 80), envp[i]);
        if (secret_var(envp[i], (size_t)(eq - envp[i])))
            st = secret_add(s, eq + 1, strlen(eq + 1), where);
        if (st == TS_OK)
            st = add_value_secrets(s, eq + 1, where);
    }
    for (size_t i = 1; argv[0] && argv[i] && st == TS_OK; i++) {
        const char *value;
        char where[96];
        snprintf(where, sizeof where, "argument %zu", i);
        if (secret_flag(argv[i], &value)) {
            snprintf(where, sizeof where, "%.*s", (int)strcspn(argv[i], "=") < 80 ? (int)strcspn(argv[i], "=") : 80, argv[i]);
            if (!value && argv[i + 1])
                value = argv[++i];
            if (value)
                st = secret_add(s, value, strlen(value), where);
        }
        if (st == TS_OK)
            st = add_value_secrets(s, argv[i], where);
    }
    if (st != TS_OK)
        return ts_error(TS_ERR_OUT_OF_MEMORY, "debug-run: out of memory listing the secrets to scrub");
    if (*s->too_short)
        ts_logf(TS_LOG_WARN, "debug-run: the secret values of %s are under %d characters, too short to scrub from output.log "
                "and the other files without mangling them: they are redacted in env.txt and command.txt only",
                s->too_short, TS_SCRUB_MIN);
    if (s->n)
        qsort(s->v, s->n, sizeof *s->v, longer_first);
    return TS_OK;
}

/* Rewrites dir/name with every occurrence of every secret (the longest
 * that matches at each place) replaced by <redacted>, streaming: a match
 * is looked for only where the buffer holds the longest secret's length,
 * or at the end of the file. The rewrite replaces the file by rename. */
static ts_status scrub_file(const char *dir, const char *name, const secrets *s) {
    char *path = path_join(dir, name), *tmp = path ? join(path, '.', "scrub") : NULL;
    ts_status st = path && tmp ? TS_OK : TS_ERR_OUT_OF_MEMORY;
    struct stat sb;
    int in = st == TS_OK ? open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
    if (in < 0 || fstat(in, &sb) != 0 || !S_ISREG(sb.st_mode)) { /* not a plain file: not archived either */
        if (in >= 0)
            close(in);
        ts_free(path);
        ts_free(tmp);
        return st;
    }
    int out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0)
        st = ts_error(TS_ERR_IO, "debug-run: cannot create %s: %s", tmp, strerror(errno));
    size_t cap = 65536 + s->longest, len = 0, i = 0;
    char *buf = st == TS_OK ? ts_malloc(cap) : NULL;
    char outbuf[65536];
    size_t used = 0;
    int eof = 0;
    if (st == TS_OK && !buf)
        st = TS_ERR_OUT_OF_MEMORY;
    while (st == TS_OK && (!eof || i < len)) {
        if (!eof && len - i < s->longest) { /* too little left to match: read more */
            memmove(buf, buf + i, len - i);
            len -= i, i = 0;
            ssize_t k = read(in, buf + len, cap - len);
            if (k < 0 && errno == EINTR)
                continue;
            if (k < 0)
                st = ts_error(TS_ERR_IO, "debug-run: reading %s: %s", path, strerror(errno));
            eof = k <= 0;
            len += k > 0 ? (size_t)k : 0;
            continue;
        }
        size_t hit = 0;
        for (size_t k = 0; k < s->n && !hit; k++)
            if (s->v[k].n <= len - i && buf[i] == s->v[k].p[0] && memcmp(buf + i, s->v[k].p, s->v[k].n) == 0)
                hit = s->v[k].n;
        if (used + 16 > sizeof outbuf) {
            if (write_all(out, outbuf, used) != 0)
                st = ts_error(TS_ERR_IO, "debug-run: writing %s: %s", tmp, strerror(errno));
            used = 0;
        }
        if (hit) {
            memcpy(outbuf + used, "<redacted>", 10);
            used += 10, i += hit;
        } else {
            outbuf[used++] = buf[i++];
        }
    }
    if (st == TS_OK && write_all(out, outbuf, used) != 0)
        st = ts_error(TS_ERR_IO, "debug-run: writing %s: %s", tmp, strerror(errno));
    if (out >= 0 && close(out) != 0 && st == TS_OK)
        st = ts_error(TS_ERR_IO, "debug-run: writing %s: %s", tmp, strerror(errno));
    close(in);
    if (st == TS_OK && rename(tmp, path) != 0)
        st = ts_error(TS_ERR_IO, "debug-run: replacing %s: %s", path, strerror(errno));
    if (st != TS_OK && out >= 0)
        unlink(tmp);
    ts_free(buf);
    ts_free(path);
    ts_free(tmp);
    return st;
}

static int not_hidden(const struct dirent *d);

/* Scrubs every file of the work directory before it is archived (and kept). */
static ts_status scrub_work(const char *work, char *const *envp, char *const *argv) {
    secrets s = {0};
    ts_status st = collect_secrets(&s, envp, argv);
    struct dirent **names = NULL;
    int count = st == TS_OK && s.n ? scandir(work, &names, not_hidden, alphasort) : 0;
    if (count < 0)
        st = ts_error(TS_ERR_IO, "debug-run: cannot list %s: %s", work, strerror(errno));
    for (int i = 0; i < count; i++) {
        if (st == TS_OK)
            st = scrub_file(work, names[i]->d_name, &s);
        free(names[i]); /* scandir's, from malloc */
    }
    free(names);
    ts_free(s.v);
    return st;
}

/* ------------------------------------------------------------- archiving */

static int not_hidden(const struct dirent *d) { return d->d_name[0] != '.'; }

static ts_status archive_add_file(struct archive *a, const char *dir, const char *name) {
    char *path = path_join(dir, name);
    if (!path)
        return TS_ERR_OUT_OF_MEMORY;
    ts_status st = TS_OK;
    struct stat sb;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        if (fd >= 0)
            close(fd);
        ts_free(path);
        return TS_OK; /* not a plain file: nothing to archive */
    }
    struct archive_entry *e = archive_entry_new();
    char member[512];
    snprintf(member, sizeof member, "%s/%s", TS_ARCHIVE_TOP, name);
    archive_entry_set_pathname(e, member);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0600);
    archive_entry_set_size(e, sb.st_size);
    archive_entry_set_mtime(e, sb.st_mtime, 0);
    if (archive_write_header(a, e) != ARCHIVE_OK) {
        st = ts_error(TS_ERR_IO, "debug-run: archiving %s: %s", name, archive_error_string(a));
    } else {
        char buf[65536];
        ssize_t k;
        la_int64_t left = sb.st_size; /* the size in the header is what we write */
        while (st == TS_OK && left > 0 && (k = read(fd, buf, sizeof buf)) > 0) {
            if (k > left)
                k = (ssize_t)left;
            if (archive_write_data(a, buf, (size_t)k) != k)
                st = ts_error(TS_ERR_IO, "debug-run: archiving %s: %s", name,
                              archive_error_string(a));
            left -= k;
        }
    }
    archive_entry_free(e);
    close(fd);
    ts_free(path);
    return st;
}

/* Into af: outfile's temporary, created exclusively (never through a file
 * or link planted there), owner-only, before the command ran so an
 * unwritable outfile is found first. Commits or aborts af. */
static ts_status write_archive(const char *work, ts_atomic_file *afp, const char *outfile) {
    ts_atomic_file af = *afp;
    memset(afp, 0, sizeof *afp);
    ts_status st = TS_OK;
    struct archive *a = archive_write_new();
    if (!a || archive_write_add_filter_gzip(a) != ARCHIVE_OK ||
        archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
        archive_write_open_FILE(a, af.f) != ARCHIVE_OK)
        st = ts_error(TS_ERR_IO, "debug-run: cannot create %s: %s", outfile,
                      a ? archive_error_string(a) : "out of memory");
    struct dirent **names = NULL;
    int count = st == TS_OK ? scandir(work, &names, not_hidden, alphasort) : 0;
    if (count < 0)
        st = ts_error(TS_ERR_IO, "debug-run: cannot list %s: %s", work, strerror(errno));
    if (st == TS_OK) {
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, TS_ARCHIVE_TOP "/");
        archive_entry_set_filetype(e, AE_IFDIR);
        archive_entry_set_perm(e, 0700);
        archive_entry_set_mtime(e, time(NULL), 0);
        if (archive_write_header(a, e) != ARCHIVE_OK)
            st = ts_error(TS_ERR_IO, "debug-run: archiving: %s", archive_error_string(a));
        archive_entry_free(e);
    }
    for (int i = 0; i < count; i++) {
        if (st == TS_OK)
            st = archive_add_file(a, work, names[i]->d_name);
        free(names[i]); /* scandir's, from malloc */
    }
    free(names);
    if (a && archive_write_close(a) != ARCHIVE_OK && st == TS_OK)
        st = ts_error(TS_ERR_IO, "debug-run: writing %s: %s", outfile, archive_error_string(a));
    if (a)
        archive_write_free(a);
    if (st != TS_OK) {
        ts_atomic_abort(&af);
        return st;
    }
    st = ts_atomic_commit(&af);
    return st == TS_OK ? TS_OK : ts_error_wrap(st, "debug-run");
}

static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char *p = path_join(dir, e->d_name);
            if (p)
                unlink(p);
            ts_free(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

/* ------------------------------------------------------------------ API */

static ts_status write_reports(const char *work, const ts_debug_run_config *c, char **envp,
                               const run_result *r) {
    static const char *const files[] = {"exit.txt", "command.txt", "env.txt", "sysinfo.txt", "gpu.txt"};
    for (size_t i = 0; i < TS_ARRAY_LEN(files); i++) {
        FILE *f = open_in(work, files[i]);
        if (!f)
            return TS_ERR_IO;
        switch (i) {
        case 0: write_exit(f, c->timeout_s, r); break;
        case 1: write_command(f, c->argv); break;
        case 2: write_env(f, envp); break;
        case 3: write_sysinfo(f); break;
        default: write_gpu(f); break;
        }
        ts_status st = close_file(f, files[i]);
        if (st != TS_OK)
            return st;
    }
    return TS_OK;
}

ts_status ts_debug_run(const ts_debug_run_config *c, int *child_status) {
    if (!c || !c->outfile || !*c->outfile || !c->argv || !c->argv[0])
        return ts_error(TS_ERR_INVALID_ARGUMENT,
                        "ts_debug_run: needs an outfile and a command (argv[0] is NULL)");
    if (!(c->timeout_s >= 0))
        return ts_error(TS_ERR_INVALID_ARGUMENT,
                        "ts_debug_run: timeout_s is %g; use 0 for none or a positive number",
                        c->timeout_s);
    catch_signals(); /* from here on a Ctrl-C stops the command, and the bundle is still written */
    ts_atomic_file af; /* first: an outfile that cannot be written stops us before the command runs */
    ts_status ost = ts_atomic_open_mode(&af, c->outfile, 0600);
    if (ost != TS_OK) {
        stop_catching();
        return ts_error_wrap(ost, "debug-run: --outfile");
    }
    const char *tmpdir = getenv("TMPDIR");
    char *work = path_join(tmpdir && *tmpdir ? tmpdir : "/tmp", "tensorscope-debug-XXXXXX");
    if (!work) {
        ts_atomic_abort(&af);
        stop_catching();
        return TS_ERR_OUT_OF_MEMORY;
    }
    if (!mkdtemp(work)) {
        ts_status st = ts_error(TS_ERR_IO, "debug-run: cannot create a work directory %s: %s "
                                "(set TMPDIR to a writable directory)", work, strerror(errno));
        ts_free(work);
        ts_atomic_abort(&af);
        stop_catching();
        return st;
    }
    envlist env = {0};
    run_result r = {0};
    ts_status st = build_env(&env, work);
    char *log_path = st == TS_OK ? path_join(work, "output.log") : NULL;
    int log_fd = log_path ? open(log_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600) : -1;
    if (st == TS_OK && log_fd < 0)
        st = ts_error(TS_ERR_IO, "debug-run: cannot create %s: %s",
                      log_path ? log_path : "output.log", strerror(errno));
    ts_free(log_path);
    if (st == TS_OK)
        st = run_child(c->argv, NULL, c->timeout_s, env.v, log_fd, true, &r);
    if (log_fd >= 0)
        close(log_fd);
    if (st == TS_OK) {
        int code = WIFEXITED(r.status) ? WEXITSTATUS(r.status)
                   : WIFSIGNALED(r.status) ? 128 + WTERMSIG(r.status) : -1;
        if (child_status)
            *child_status = code;
        st = write_reports(work, c, env.v, &r);
    }
    if (st == TS_OK)
        st = scrub_work(work, env.v, c->argv);
    if (st == TS_OK)
        st = write_archive(work, &af, c->outfile);
    else
        ts_atomic_abort(&af);
    if (st == TS_OK)
        ts_logf(TS_LOG_INFO, "debug-run: wrote %s%s%s", c->outfile,
                c->tidy ? "" : "; work directory kept at ", c->tidy ? "" : work);
    if (c->tidy)
        remove_dir(work);
    env_free(&env);
    ts_free(work);
    if (c->interrupted)
        *c->interrupted = g_signal;
    stop_catching();
    return st;
}
