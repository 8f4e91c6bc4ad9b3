/* test_debug_run.c -- ts_debug_run on a failing, a killed and a hanging
 * command; each archive is opened with libarchive and its members read.
 * Secrets (by variable name, in URLs, in the command's flags) are redacted
 * in env.txt and command.txt, and scrubbed from everything archived when
 * the command prints them. gpu.txt holds the GPUs (or why none) and what
 * nvidia-smi says, with a fake one first on PATH.
 * test_debug_run_cuda (label gpu; TS_TEST_DEVICE=cuda, skipped without a
 * GPU) checks gpu.txt alone, on a GPU: the GPU's line with its compute
 * capability, memory and driver, then the real nvidia-smi's and
 * nvidia-smi -q's output (each with the driver's version), or, when it
 * is not on PATH, the line saying so. */
/* needs: debug-bundle */
#include "tensorscope.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures;

static void check(int ok, const char *what) {
    printf("%s: %s\n", ok ? "ok" : "FAIL", what);
    if (!ok)
        failures++;
}

#define MAX_MEMBERS 32
typedef struct members {
    int n;
    char *name[MAX_MEMBERS];
    char *text[MAX_MEMBERS];
} members;

static int read_archive(const char *path, members *m) {
    memset(m, 0, sizeof(*m));
    struct archive *a = archive_read_new();
    archive_read_support_filter_all(a);
    archive_read_support_format_all(a);
    if (archive_read_open_filename(a, path, 16384) != ARCHIVE_OK) {
        printf("cannot open %s: %s\n", path, archive_error_string(a));
        archive_read_free(a);
        return -1;
    }
    struct archive_entry *e;
    while (m->n < MAX_MEMBERS && archive_read_next_header(a, &e) == ARCHIVE_OK) {
        size_t size = (size_t)archive_entry_size(e);
        char *t = malloc(size + 1);
        la_ssize_t got = archive_read_data(a, t, size);
        t[got > 0 ? (size_t)got : 0] = 0;
        m->name[m->n] = strdup(archive_entry_pathname(e));
        m->text[m->n++] = t;
    }
    archive_read_free(a);
    return 0;
}

static const char *member(const members *m, const char *name) {
    char full[256];
    snprintf(full, sizeof full, "tensorscope-debug/%s", name);
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->name[i], full) == 0)
            return m->text[i];
    return NULL;
}

static void free_members(members *m) {
    for (int i = 0; i < m->n; i++)
        free(m->name[i]), free(m->text[i]);
}

static char logged[8192]; /* the library's log lines, while captured */
static void capture_log(void *user, int level, const char *msg) {
    (void)user, (void)level;
    size_t n = strlen(logged);
    snprintf(logged + n, sizeof logged - n, "%s\n", msg);
}

/* gpu.txt begins with the GPUs, or says why there is none: the build
 * lacks CUDA, or the machine a GPU. */
static void check_gpu_lines(const char *gpu) {
    if (!ts_has_feature("cuda"))
        check(gpu && strncmp(gpu, "cuda: a CUDA device needs tensorscope built with CUDA", 53) == 0,
              "gpu.txt: this build has no CUDA, and says so");
    else if (ts_device_check("cuda") != TS_OK)
        check(gpu && strncmp(gpu, "cuda:0: no usable GPU here (", 28) == 0, "gpu.txt: this machine has no GPU, and says so");
    else
        check(gpu && strncmp(gpu, "cuda:0: ", 8) == 0 && strstr(gpu, ", sm_") && strstr(gpu, " GiB") && strstr(gpu, ", driver "),
              "gpu.txt: cuda:0 with its compute capability, memory and driver");
    if (!gpu)
        printf("  (no gpu.txt)\n");
    else if (strncmp(gpu, "cuda", 4) != 0)
        printf("  gpu.txt begins: %.200s\n", gpu);
}

/* A fake nvidia-smi in dir, running `body` (sh). */
static void fake_smi(const char *dir, const char *body) {
    char path[600];
    snprintf(path, sizeof path, "%s/nvidia-smi", dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "#!/bin/sh\n%s\n", body);
        fclose(f);
    }
    chmod(path, 0700);
}

/* Runs argv through ts_debug_run, checks what every archive must hold, and
 * leaves the members in m. */
static int leftover_tmp(const char *out);

static int run(const char *label, char *const *argv, double timeout, int *status, members *m) {
    char out[512];
    snprintf(out, sizeof out, "%s/ts_debug_run_%ld_%s.tar.gz",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid(), label);
    ts_debug_run_config c = {.outfile = out, .argv = argv, .tidy = 1, .timeout_s = timeout};
    *status = -1;
    ts_status st = ts_debug_run(&c, status);
    printf("[%s] status %d, child status %d%s%s\n", label, (int)st, *status,
           st ? ": " : "", st ? ts_last_error() : "");
    check(st == TS_OK, "ts_debug_run returns TS_OK");
    int ok = st == TS_OK && read_archive(out, m) == 0;
    check(ok, "archive opens with libarchive");
    if (!ok)
        return -1;
    for (int i = 0; i < m->n; i++)
        printf("  member %s (%zu bytes)\n", m->name[i], strlen(m->text[i]));
    const char *env = member(m, "env.txt"), *sys = member(m, "sysinfo.txt");
    check(env && strstr(env, "MY_API_KEY=<redacted>") && !strstr(env, "hunter2"),
          "env.txt redacts MY_API_KEY");
    check(env && strstr(env, "TS_IR_DEBUG=1") && strstr(env, "TS_METRICS_FILE="),
          "env.txt has the debug variables");
    check(env && strstr(env, "MY_PLAIN_VAR=visible"), "env.txt keeps ordinary values");
    check(sys && strstr(sys, "uname:") && strstr(sys, "zlib: ") && strstr(sys, "openblas: ") &&
              strstr(sys, "MemTotal"), "sysinfo.txt has uname, memory and library versions");
    check(member(m, "command.txt") != NULL, "command.txt present");
    check_gpu_lines(member(m, "gpu.txt"));
    check(member(m, "output.log") != NULL, "output.log present");
    struct stat sb;
    check(stat(out, &sb) == 0 && (sb.st_mode & 0777) == 0600, "the archive is owner-only (0600)");
    unlink(out);
    check(!leftover_tmp(out), "no temporary archive left behind");
    return 0;
}

/* Any "<out>.tmp..." file next to out. */
static int leftover_tmp(const char *out) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s", out);
    char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : out;
    if (slash)
        *slash = 0;
    char prefix[600];
    snprintf(prefix, sizeof prefix, "%s.tmp", base);
    DIR *d = opendir(slash ? dir : ".");
    int found = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        found |= strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    if (d)
        closedir(d);
    return found;
}

/* Whether `name` is an executable file in a folder of $PATH. */
static int on_path(const char *name) {
    const char *path = getenv("PATH");
    char dirs[4096], file[4200];
    snprintf(dirs, sizeof dirs, "%s", path ? path : "");
    for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(file, sizeof file, "%s/%s", *d ? d : ".", name);
        if (access(file, X_OK) == 0)
            return 1;
    }
    return 0;
}

/* On a GPU (test_debug_run_cuda): gpu.txt's GPU line, then the real
 * nvidia-smi's output under its command, or the line saying it is not on
 * PATH. */
static int gpu_only(void) {
    members m;
    int status;
    char *const cmd[] = {"true", NULL};
    if (run("gpu", cmd, 0, &status, &m) == 0) {
        const char *gpu = member(&m, "gpu.txt");
        const char *smi = gpu ? strstr(gpu, "\n$ nvidia-smi\n") : NULL, *q = gpu ? strstr(gpu, "\n$ nvidia-smi -q\n") : NULL;
        if (on_path("nvidia-smi")) {
            check(smi && strstr(smi, "Driver Version"), "gpu.txt: nvidia-smi's table under '$ nvidia-smi', with the driver's version");
            check(q && strstr(q, "Driver Version") && strstr(q, "Product Name"),
                  "gpu.txt: nvidia-smi -q's report under '$ nvidia-smi -q', with the driver's version and the product");
        } else {
            check(smi && strstr(smi, "cannot execute 'nvidia-smi'"), "gpu.txt: no nvidia-smi on PATH, and says so");
        }
        if (gpu)
            printf("  gpu.txt (%zu bytes) begins: %.300s\n", strlen(gpu), gpu);
        free_members(&m);
    }
    printf("%s\n", failures ? "test_debug_run: FAILED" : "test_debug_run: all passed");
    return failures != 0;
}

int main(void) {
    setenv("MY_API_KEY", "hunter2", 1);
    setenv("MY_PLAIN_VAR", "visible", 1);
    const char *dev = getenv("TS_TEST_DEVICE");
    if (dev && strncmp(dev, "cuda", 4) == 0)
        return gpu_only();
    members m;
    int status;

    char *const a1[] = {"sh", "-c", "echo out; echo err >&2; exit 3", NULL};
    if (run("exit3", a1, 0, &status, &m) == 0) {
        const char *log = member(&m, "output.log"), *ex = member(&m, "exit.txt");
        check(status == 3, "exit 3 gives child status 3");
        check(log && strstr(log, "out\n") && strstr(log, "err\n"), "output.log has stdout and stderr");
        check(ex && strcmp(ex, "exit 3\n") == 0, "exit.txt says exit 3");
        const char *cmd = member(&m, "command.txt");
        check(cmd && strstr(cmd, "sh -c 'echo out; echo err >&2; exit 3'"),
              "command.txt is the quoted command line");
        free_members(&m);
    }

    char *const a2[] = {"sh", "-c", "echo before; kill -9 $$", NULL};
    if (run("sigkill", a2, 0, &status, &m) == 0) {
        const char *log = member(&m, "output.log"), *ex = member(&m, "exit.txt");
        check(status == 128 + 9, "SIGKILL gives child status 137");
        check(ex && strstr(ex, "signal 9 (SIGKILL)"), "exit.txt names SIGKILL");
        check(log && strstr(log, "before"), "output.log kept the output before the kill");
        free_members(&m);
    }

    char *const a3[] = {"sleep", "30", NULL};
    uint64_t t0 = (uint64_t)time(NULL);
    if (run("timeout", a3, 1, &status, &m) == 0) {
        const char *ex = member(&m, "exit.txt");
        check(status == 128 + 15, "timeout: child ended by SIGTERM (143)");
        check(ex && strncmp(ex, "timeout after 1 s\n", 18) == 0, "exit.txt starts with the timeout");
        check(ex && strstr(ex, "SIGTERM"), "exit.txt says how the child ended");
        check((uint64_t)time(NULL) - t0 < 29, "timeout returns before the command would have ended (30 s)");
        free_members(&m);
    }

    char *const a4[] = {"/nonexistent/tensorscope-no-such-command", NULL};
    if (run("noexec", a4, 0, &status, &m) == 0) {
        const char *log = member(&m, "output.log"), *ex = member(&m, "exit.txt");
        check(status == 127, "a missing command gives 127");
        check(log && strstr(log, "cannot execute"), "output.log explains the failed start");
        check(ex && strstr(ex, "not started"), "exit.txt says it did not start");
        free_members(&m);
    }

    ts_debug_run_config bad = {.outfile = "/tmp/x.tar.gz", .argv = NULL};
    check(ts_debug_run(&bad, &status) == TS_ERR_INVALID_ARGUMENT && *ts_last_error(),
          "no command is TS_ERR_INVALID_ARGUMENT with a message");
    char *const a5[] = {"true", NULL};
    char marker[128];
    snprintf(marker, sizeof marker, "/tmp/ts_debug_run_ran_%ld", (long)getpid());
    char touch_cmd[200];
    snprintf(touch_cmd, sizeof touch_cmd, "touch %s", marker);
    char *const a7[] = {"sh", "-c", touch_cmd, NULL};
    ts_debug_run_config unwritable = {.outfile = "/nonexistent-dir/x.tar.gz", .argv = a7, .tidy = 1};
    check(ts_debug_run(&unwritable, &status) == TS_ERR_IO, "unwritable outfile is TS_ERR_IO");
    check(access(marker, F_OK) != 0, "... found before the command runs (it did not run)");
    unlink(marker);

    /* secrets: by name, inside URLs, and in the command's flags */
    static const char *const secret_env[][2] = {
        {"DATABASE_URL", "postgres://u:pw1secret@h/db"}, {"HTTPS_PROXY", "http://bob:hunter3@proxy:3128"},
        {"PGPASSWD", "pgsecret4"},          {"API_CREDENTIALS", "credsecret5"},
        {"SLACK_WEBHOOK_URL", "https://hooks.example/hooksecret6"}, {"AUTH_BEARER", "bearersecret7"},
        {"PRIVATE_PEM", "pemsecret8"},      {"GIT_URL", "https://tokensecret9@git.example/repo"},
        /* by name words added later (whole parts: JWT, PAT, SAS, SIG; CONNECTION_STRING) */
        {"CI_JOB_JWT", "jwtsecret10"},      {"GITHUB_PAT", "patsecret11"},
        {"AZURE_STORAGE_CONNECTION_STRING", "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=acctkeysecret12==;EndpointSuffix=core.windows.net"},
        {"AZURE_SAS", "sassecret13"},       {"UPLOAD_SIG", "sigsecret14"},
        /* inside values of variables whose names say nothing */
        {"BLOB_CONFIG", "BlobEndpoint=https://a.example/;SharedAccessSignature=sassig15"},
        {"STORE_CONFIG", "Endpoint=https://s.example/;AccountKey=acctkeysecret16"},
        {"DOWNLOAD_URL", "https://x.example/f?access_token=accesstok17&x=1"},
        {"BLOB_URL", "https://b.example/c?sv=1&sig=blobsig18"},
        /* well-known token shapes */
        {"CI_VALUE_A", "ghp_Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78"},
        {"CI_VALUE_B", "github_pat_11ABCDEFG0123456789_abcdefghijklmnop"},
        {"CI_VALUE_C", "AKIAIOSFODNN7EXAMPLE"},
        {"CI_VALUE_D", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.jwtsigsecret19"},
        {"CI_VALUE_E", "xoxb-1234567890-slacksecret20"}};
    for (size_t i = 0; i < sizeof secret_env / sizeof secret_env[0]; i++)
        setenv(secret_env[i][0], secret_env[i][1], 1);
    setenv("SHORT_KEY", "q7z", 1); /* too short to scrub from the output */
    char cwd[512];
    setenv("PWD", getcwd(cwd, sizeof cwd) ? cwd : "/", 1);
    /* the command echoes its arguments and its environment: the secrets it
     * prints must not reach output.log, nor any other member */
    char *const a6[] = {"sh", "-c", "echo \"args: $*\"; env; echo \"short q7z\"; echo login --password=shpass21 --verbose", "sh",
                        "--api-key=argsecret1", "--token", "argsecret2",
                        "--password", "argsecret3", "--url=https://user:argsecret4@example.com/x", "--lr", "0.5",
                        "--header", "Authorization: Bearer bearertok22", "--header=Authorization: Basic basicsecret23",
                        "--fetch=https://f.example/x?token=urltoken24&page=2", NULL};
    ts_set_log_callback(capture_log, NULL);
    int ran = run("secrets", a6, 0, &status, &m);
    ts_set_log_callback(NULL, NULL);
    if (ran == 0) {
        const char *env = member(&m, "env.txt"), *cmd = member(&m, "command.txt"), *log = member(&m, "output.log");
        static const char *const leaked[] = {"hunter2", "pw1secret", "hunter3", "pgsecret4", "credsecret5", "hooksecret6",
                                             "bearersecret7", "pemsecret8", "tokensecret9", "argsecret1",
                                             "argsecret2", "argsecret3", "argsecret4",
                                             "jwtsecret10", "patsecret11", "acctkeysecret12", "sassecret13", "sigsecret14",
                                             "sassig15", "acctkeysecret16", "accesstok17", "blobsig18",
                                             "Ab12Cd34Ef56Gh78Ij90", "github_pat_11ABCDEFG", "AKIAIOSFODNN7EXAMPLE", "jwtsigsecret19",
                                             "slacksecret20", "shpass21", "bearertok22", "basicsecret23", "urltoken24"};
        check(log && strstr(log, "args: --api-key=") && strstr(log, "MY_PLAIN_VAR=visible"), "the command printed its arguments and environment");
        for (size_t i = 0; i < sizeof leaked / sizeof leaked[0]; i++) {
            char what[128];
            int found = 0;
            for (int k = 0; k < m.n; k++)
                found |= strstr(m.text[k], leaked[i]) != NULL;
            snprintf(what, sizeof what, "%s is in no member of the archive (output.log included)", leaked[i]);
            check(env && cmd && !found, what);
        }
        check(log && strstr(log, "args: --api-key=<redacted> --token <redacted> --password <redacted> --url=https://user:<redacted>@example.com/x --lr 0.5"),
              "output.log has <redacted> where the command echoed its secret arguments");
        check(log && strstr(log, "MY_API_KEY=<redacted>") && strstr(log, "DATABASE_URL=postgres://u:<redacted>@h/db"),
              "output.log has <redacted> where the command printed secret variables");
        check(log && strstr(log, "short q7z"), "a secret under 4 characters is left in the output (it would mangle it) ...");
        check(strstr(logged, "SHORT_KEY") && strstr(logged, "too short"), "... and the run says so, naming the variable");
        char pwd[600];
        snprintf(pwd, sizeof pwd, "PWD=%s\n", getenv("PWD"));
        check(env && log && strstr(env, pwd) && strstr(log, pwd), "the working directory (PWD) is no secret: kept in env.txt and output.log");
        check(env && strstr(env, "DATABASE_URL=postgres://u:<redacted>@h/db"), "a URL keeps all but its password");
        check(env && strstr(env, "CI_JOB_JWT=<redacted>") && strstr(env, "GITHUB_PAT=<redacted>") && strstr(env, "AZURE_SAS=<redacted>") &&
                  strstr(env, "UPLOAD_SIG=<redacted>") && strstr(env, "AZURE_STORAGE_CONNECTION_STRING=<redacted>"),
              "env.txt: names with JWT, PAT, SAS, SIG as a part, and CONNECTION_STRING, are secret");
        check(env && strstr(env, "\nPATH=") && !strstr(env, "\nPATH=<redacted>"), "... PATH is not (PAT only as a whole part)");
        check(env && strstr(env, "STORE_CONFIG=Endpoint=https://s.example/;AccountKey=<redacted>") &&
                  strstr(env, "BLOB_CONFIG=BlobEndpoint=https://a.example/;SharedAccessSignature=<redacted>"),
              "env.txt: AccountKey= and SharedAccessSignature= inside a value");
        check(env && strstr(env, "DOWNLOAD_URL=https://x.example/f?access_token=<redacted>&x=1") &&
                  strstr(env, "BLOB_URL=https://b.example/c?sv=1&sig=<redacted>"),
              "env.txt: a URL query's access_token and sig, the rest kept");
        check(env && strstr(env, "CI_VALUE_A=<redacted>\n") && strstr(env, "CI_VALUE_B=<redacted>\n") && strstr(env, "CI_VALUE_C=<redacted>\n") &&
                  strstr(env, "CI_VALUE_D=<redacted>\n") && strstr(env, "CI_VALUE_E=<redacted>\n"),
              "env.txt: GitHub, AWS, JWT and Slack tokens by their shape");
        check(cmd && strstr(cmd, "'Authorization: Bearer <redacted>'") && strstr(cmd, "'--header=Authorization: Basic <redacted>'") &&
                  strstr(cmd, "--fetch=https://f.example/x?token=<redacted>&page=2") && strstr(cmd, "login --password=<redacted> --verbose"),
              "command.txt: Bearer and Basic credentials in a flag's value, a URL's token, a --password= inside sh -c");
        check(log && strstr(log, "login --password=<redacted> --verbose"), "output.log: the --password= the shell printed is scrubbed");
        if (cmd)
            printf("  command.txt: %s", cmd);
        check(cmd && strstr(cmd, "--lr 0.5") && strstr(cmd, "--token '<redacted>'"),
              "command.txt keeps ordinary flags and names the redacted ones");
        check(cmd && strstr(cmd, "'--url=https://user:<redacted>@example.com/x'"),
              "a URL argument keeps all but its password, shell-quoted");
        free_members(&m);
    }
    for (size_t i = 0; i < sizeof secret_env / sizeof secret_env[0]; i++)
        unsetenv(secret_env[i][0]);
    unsetenv("SHORT_KEY");

    /* gpu.txt: what nvidia-smi says, when it is on PATH (a fake one here,
     * first on PATH); a failing one's exit status; a hanging one stopped;
     * none on PATH said */
    {
        char dir[] = "/tmp/ts_debug_run_smiXXXXXX";
        check(mkdtemp(dir) != NULL, "a scratch directory for a fake nvidia-smi");
        const char *old = getenv("PATH");
        char *saved = strdup(old ? old : "/usr/bin:/bin"), path[4096];
        snprintf(path, sizeof path, "%s:%s", dir, saved);
        setenv("PATH", path, 1);
        char *const tru[] = {"/bin/true", NULL};
        fake_smi(dir, "echo \"FAKE-SMI 999.12 args:[$*]\"");
        if (run("smi", tru, 0, &status, &m) == 0) {
            const char *gpu = member(&m, "gpu.txt");
            check(gpu && strstr(gpu, "\n$ nvidia-smi\nFAKE-SMI 999.12 args:[]\n"), "gpu.txt has nvidia-smi's output under '$ nvidia-smi'");
            check(gpu && strstr(gpu, "\n$ nvidia-smi -q\nFAKE-SMI 999.12 args:[-q]\n"), "... and nvidia-smi -q's under '$ nvidia-smi -q'");
            if (gpu)
                printf("  gpu.txt:\n%s", gpu);
            free_members(&m);
        }
        fake_smi(dir, "echo 'Failed to initialize NVML: Driver/library version mismatch'; exit 9");
        if (run("smifail", tru, 0, &status, &m) == 0) {
            const char *gpu = member(&m, "gpu.txt");
            check(status == 0, "a failing nvidia-smi does not fail the command's bundle (status 0)");
            check(gpu && strstr(gpu, "version mismatch\nexit 9\n"), "gpu.txt: a failing nvidia-smi's output and its exit status");
            free_members(&m);
        }
        fake_smi(dir, "echo started; exec sleep 60");
        uint64_t t1 = (uint64_t)time(NULL);
        if (run("smihang", tru, 0, &status, &m) == 0) {
            const char *gpu = member(&m, "gpu.txt");
            uint64_t took = (uint64_t)time(NULL) - t1;
            check(gpu && strstr(gpu, "$ nvidia-smi\nstarted\ntimeout after 15 s\n"), "gpu.txt: a hanging nvidia-smi is stopped after 15 s");
            check(gpu && !strstr(gpu, "nvidia-smi -q"), "... and -q is not tried after it");
            check(took < 55, "... and the bundle is written after it (took < 55 s: the fake would sleep 60)");
            free_members(&m);
        }
        setenv("PATH", dir, 1); /* an empty folder: no nvidia-smi */
        char smi[600];
        snprintf(smi, sizeof smi, "%s/nvidia-smi", dir);
        unlink(smi);
        if (run("nosmi", tru, 0, &status, &m) == 0) {
            const char *gpu = member(&m, "gpu.txt");
            check(gpu && strstr(gpu, "$ nvidia-smi\ntensorscope debug-run: cannot execute 'nvidia-smi': No such file or directory\n"),
                  "gpu.txt: no nvidia-smi on PATH is said");
            check(gpu && !strstr(gpu, "nvidia-smi -q"), "... and -q is not tried");
            free_members(&m);
        }
        setenv("PATH", saved, 1);
        free(saved);
        rmdir(dir);
    }

    /* a link planted at a temporary name is never followed; the kept work
     * directory is owner-only */
    {
        char dir[] = "/tmp/ts_debug_run_linkXXXXXX";
        check(mkdtemp(dir) != NULL, "a scratch directory");
        char precious[600], out[600], link[700];
        snprintf(precious, sizeof precious, "%s/precious", dir);
        snprintf(out, sizeof out, "%s/out.tar.gz", dir);
        FILE *f = fopen(precious, "w");
        if (f) {
            fputs("keep me\n", f);
            fclose(f);
        }
        snprintf(link, sizeof link, "%s.tmp%ld", out, (long)getpid()); /* the old fixed name */
        check(symlink(precious, link) == 0, "symlink planted at the old temporary name");
        for (int k = 0; k < 4; k++) { /* and at the first names of the current scheme */
            snprintf(link, sizeof link, "%s.tmp.%ld.%d", out, (long)getpid(), k);
            (void)symlink(precious, link);
        }
        setenv("TMPDIR", dir, 1);
        ts_debug_run_config c = {.outfile = out, .argv = a5, .tidy = 0};
        check(ts_debug_run(&c, &status) == TS_OK, "debug-run with planted links succeeds");
        unsetenv("TMPDIR");
        char *text = NULL;
        f = fopen(precious, "r");
        char buf[64] = "";
        if (f) {
            text = fgets(buf, sizeof buf, f);
            fclose(f);
        }
        check(text && strcmp(buf, "keep me\n") == 0, "the link's target is untouched");
        members mm;
        check(read_archive(out, &mm) == 0 && member(&mm, "exit.txt") != NULL, "the archive was written");
        free_members(&mm);
        DIR *d = opendir(dir);
        struct dirent *e;
        int kept = 0;
        while (d && (e = readdir(d)) != NULL) {
            if (strncmp(e->d_name, "tensorscope-debug-", 18) != 0)
                continue;
            char p[1200];
            struct stat sb;
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            kept = stat(p, &sb) == 0 && (sb.st_mode & 0777) == 0700;
            char cmdline[1300];
            snprintf(cmdline, sizeof cmdline, "rm -rf '%s'", p);
            if (system(cmdline) != 0)
                printf("cannot remove %s\n", p);
        }
        if (d)
            closedir(d);
        check(kept, "the kept work directory is owner-only (0700)");
        char cmdline[700];
        snprintf(cmdline, sizeof cmdline, "rm -rf '%s'", dir);
        if (system(cmdline) != 0)
            printf("cannot remove %s\n", dir);
    }

    printf("%s\n", failures ? "test_debug_run: FAILED" : "test_debug_run: all passed");
    return failures != 0;
}
