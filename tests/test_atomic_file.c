/* test_atomic_file.c -- how files are written (through ts_npy_save, which
 * writes like every other output): never through a planted link, never
 * replacing a device, FIFO or symlink, a FIFO without a reader is an error
 * and not a hang, stale temporaries of killed writers are cleaned, and a
 * FIFO given as a file to read is refused rather than waited on. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "core/atomic_file.h"

static char dir[64];

static void in_dir(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", dir, name); }

static const float vals[3] = {1, 2, 3};
static const ts_array arr = {.dtype = TS_F32, .ndim = 1, .shape = {3}, .data = (void *)vals};

static int count_tmp(const char *where) {
    DIR *d = opendir(where);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) n += strstr(e->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    return n;
}

static void touch(const char *path) {
    FILE *f = fopen(path, "w");
    if (f) fclose(f);
}

/* A pid that no longer exists: a child that has exited and been reaped. */
static pid_t dead_pid(void) {
    pid_t p = fork();
    if (p == 0) _exit(0);
    waitpid(p, NULL, 0);
    return p;
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/ts_atomic_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    char p[256], q[256];
    struct stat sb;

    /* a character device is written through, not replaced */
    CHECK_OK(ts_npy_save("/dev/null", &arr), "saving to /dev/null succeeds");
    CHECK(stat("/dev/null", &sb) == 0 && S_ISCHR(sb.st_mode), "/dev/null is still a character device");

    /* a FIFO: without a reader an error (no hang), with one written through */
    in_dir(p, sizeof p, "fifo.npy");
    CHECK(mkfifo(p, 0600) == 0, "mkfifo");
    alarm(20); /* a hang fails the test instead of blocking ctest */
    ts_status st = ts_npy_save(p, &arr);
    CHECK(st == TS_ERR_IO && strstr(ts_last_error(), "FIFO"), "a FIFO without a reader: TS_ERR_IO naming the FIFO (%s)",
          ts_last_error());
    int fds[2];
    CHECK(pipe(fds) == 0, "pipe");
    pid_t reader = fork();
    if (reader == 0) { /* reads the FIFO and reports the byte count through the pipe */
        int fd = open(p, O_RDONLY);
        char buf[4096];
        ssize_t k, total = 0;
        while (fd >= 0 && (k = read(fd, buf, sizeof buf)) > 0) total += k;
        if (write(fds[1], &total, sizeof total) != (ssize_t)sizeof total) _exit(1);
        _exit(0);
    }
    close(fds[1]);
    st = TS_ERR_IO;
    for (int tries = 0; tries < 6000 && st == TS_ERR_IO; tries++) { /* until the reader has opened it (at most a minute) */
        st = ts_npy_save(p, &arr);
        if (st) usleep(10000);
    }
    CHECK_OK(st, "a FIFO with a reader is written through");
    ssize_t total = 0;
    CHECK(read(fds[0], &total, sizeof total) == (ssize_t)sizeof total && total == 128 + 12,
          "the reader got the whole file (%zd bytes)", total);
    close(fds[0]);
    waitpid(reader, NULL, 0);
    CHECK(lstat(p, &sb) == 0 && S_ISFIFO(sb.st_mode), "the FIFO is still a FIFO");

    /* reading a FIFO is refused, not waited on */
    ts_array back;
    st = ts_npy_load(p, &back);
    CHECK(st != TS_OK && strstr(ts_last_error(), "not a regular file"), "ts_npy_load of a FIFO is refused at once (%s)",
          ts_last_error());
    alarm(0);

    /* a symlink stays a symlink; its target gets the new content */
    in_dir(p, sizeof p, "target.npy");
    in_dir(q, sizeof q, "link.npy");
    touch(p);
    CHECK(symlink("target.npy", q) == 0, "symlink");
    CHECK_OK(ts_npy_save(q, &arr), "saving through a symlink");
    CHECK(lstat(q, &sb) == 0 && S_ISLNK(sb.st_mode), "the link is still a link");
    CHECK(ts_npy_load(p, &back) == TS_OK && back.shape[0] == 3 && ((float *)back.data)[2] == 3.0f,
          "the target holds the array");
    ts_npy_free(&back);

    /* a directory is refused with a message */
    st = ts_npy_save(dir, &arr);
    CHECK(st == TS_ERR_IO && strstr(ts_last_error(), "directory"), "a directory as output: %s", ts_last_error());

    /* stale temporaries: of dead writers removed on the next write into the
     * directory; of live ones (us, our parent) kept; others' names kept */
    char sub[128];
    in_dir(sub, sizeof sub, "sub");
    mkdir(sub, 0700);
    char dead[300], mine[300], parent[300], other[300];
    snprintf(dead, sizeof dead, "%s/w.npy.tmp.%ld.3", sub, (long)dead_pid());
    snprintf(mine, sizeof mine, "%s/w.npy.tmp.%ld.999", sub, (long)getpid());
    snprintf(parent, sizeof parent, "%s/w.npy.tmp.%ld.1", sub, (long)getppid());
    snprintf(other, sizeof other, "%s/notes.tmp.txt", sub);
    touch(dead), touch(mine), touch(parent), touch(other);
    char out[300];
    snprintf(out, sizeof out, "%s/x.npy", sub);
    CHECK_OK(ts_npy_save(out, &arr), "a write into the directory");
    CHECK(access(dead, F_OK) != 0, "the dead writer's temporary is gone");
    CHECK(access(mine, F_OK) == 0 && access(parent, F_OK) == 0 && access(other, F_OK) == 0,
          "live writers' temporaries and other files are kept");
    unlink(mine), unlink(parent), unlink(other), unlink(out);

    /* a writer killed with -9 mid-write leaves a temporary; the next write
     * into that directory (here the first of this process) removes it */
    char sub2[128];
    in_dir(sub2, sizeof sub2, "killed");
    mkdir(sub2, 0700);
    snprintf(out, sizeof out, "%s/big.npy", sub2);
    static float big[1 << 22];
    ts_array a_big = {.dtype = TS_F32, .ndim = 1, .shape = {1 << 22}, .data = big};
    int left = 0;
    for (int attempt = 0; attempt < 5 && !left; attempt++) {
        pid_t w = fork();
        if (w == 0)
            for (;;) ts_npy_save(out, &a_big);
        usleep(30000 + 20000 * (useconds_t)attempt);
        kill(w, SIGKILL);
        waitpid(w, NULL, 0);
        left = count_tmp(sub2);
    }
    printf("(a killed writer left %d temporary file(s))\n", left);
    if (!left) { /* the kill always landed between writes: plant what it leaves */
        snprintf(dead, sizeof dead, "%s/big.npy.tmp.%ld.0", sub2, (long)dead_pid());
        touch(dead);
    }
    snprintf(out, sizeof out, "%s/small.npy", sub2);
    CHECK_OK(ts_npy_save(out, &arr), "a later write");
    CHECK(count_tmp(sub2) == 0, "no temporary left after it (%d)", count_tmp(sub2));

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) printf("cannot remove %s\n", dir);
    return check_summary("test_atomic_file");
}
