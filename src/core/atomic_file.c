/* atomic_file.c -- temp file + rename: a file is there whole or not at all.
 * Special files are written through instead: renaming over /dev/null would
 * replace the device with a regular file. */
#include "core/atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static atomic_uint tmp_counter;

static void release(ts_atomic_file *af) {
    ts_free(af->path);
    ts_free(af->tmp);
    memset(af, 0, sizeof *af);
}

/* The directory part of path ("." when it has none), allocated. */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return ts_strdup(".");
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    char *d = ts_malloc(n + 1);
    if (d) {
        memcpy(d, path, n);
        d[n] = '\0';
    }
    return d;
}

/* "<anything>.tmp.<pid>.<n>": our temporary naming; *pid gets the writer. */
static bool stale_name(const char *name, long *pid) {
    size_t len = strlen(name), i = len;
    while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9') i--;
    if (i == len || i == 0 || name[i - 1] != '.') return false;
    size_t end_pid = --i;
    while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9') i--;
    if (i == end_pid || end_pid - i > 9 || i < 5 || strncmp(name + i - 5, ".tmp.", 5) != 0) return false;
    *pid = strtol(name + i, NULL, 10);
    return *pid > 0;
}

int ts_atomic_clean_stale(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        long pid;
        if (!stale_name(e->d_name, &pid) || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive, or not ours to judge */
        struct stat sb;
        if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode)) continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0) removed++;
    }
    closedir(d);
    if (removed) ts_logf(TS_LOG_DEBUG, "removed %d stale temporary file%s in %s", removed, removed == 1 ? "" : "s", dir);
    return removed;
}

/* Once per directory per process (the last 32 directories remembered), so
 * a run writing thousands of files into one directory scans it once. */
static void clean_once(const char *dir) {
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static char *seen[32];
    static unsigned next;
    pthread_mutex_lock(&mu);
    bool done = false;
    for (size_t i = 0; i < TS_ARRAY_LEN(seen) && !done; i++) done = seen[i] && strcmp(seen[i], dir) == 0;
    if (!done) {
        char *copy = ts_strdup(dir);
        if (copy) {
            ts_free(seen[next % TS_ARRAY_LEN(seen)]);
            seen[next++ % TS_ARRAY_LEN(seen)] = copy;
        }
    }
    pthread_mutex_unlock(&mu);
    if (!done) ts_atomic_clean_stale(dir);
}

/* A device or FIFO: opened for writing as it is (a FIFO without a reader is
 * an error, not a hang). */
static ts_status open_through(ts_atomic_file *af, const struct stat *sb) {
    bool fifo = S_ISFIFO(sb->st_mode);
    int fd = open(af->path, O_WRONLY | O_NOCTTY | O_CLOEXEC | (fifo ? O_NONBLOCK : 0));
    if (fd < 0)
        return ts_error(TS_ERR_IO, "cannot write %s: %s", af->path,
                        fifo && errno == ENXIO ? "it is a FIFO with no reader" : strerror(errno));
    if (fifo) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    af->through = true;
    af->f = fdopen(fd, "wb");
    if (!af->f) {
        close(fd);
        return ts_error(TS_ERR_IO, "cannot open %s: %s", af->path, strerror(errno));
    }
    return TS_OK;
}

static ts_status open_tmp(ts_atomic_file *af, mode_t mode) {
    size_t n = strlen(af->path) + 64;
    af->tmp = ts_malloc(n);
    if (!af->tmp) return TS_ERR_OUT_OF_MEMORY;
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 16; tries++) {
        snprintf(af->tmp, n, "%s.tmp.%ld.%u", af->path, (long)getpid(), atomic_fetch_add(&tmp_counter, 1u));
        fd = open(af->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        ts_status s = ts_error(TS_ERR_IO, "cannot write %s: creating %s failed: %s", af->path, af->tmp, strerror(errno));
        ts_free(af->tmp);
        af->tmp = NULL;
        return s;
    }
    af->f = fdopen(fd, "wb");
    if (!af->f) {
        ts_status s = ts_error(TS_ERR_IO, "cannot open %s: %s", af->tmp, strerror(errno));
        close(fd);
        unlink(af->tmp);
        return s;
    }
    char *dir = dir_of(af->path);
    if (dir) clean_once(dir);
    ts_free(dir);
    return TS_OK;
}

ts_status ts_atomic_open_mode(ts_atomic_file *af, const char *path, mode_t mode) {
    memset(af, 0, sizeof *af);
    if (!path || !*path) return ts_error(TS_ERR_INVALID_ARGUMENT, "output path is empty");
    struct stat sb;
    bool exists = lstat(path, &sb) == 0;
    if (exists && S_ISLNK(sb.st_mode)) { /* replace what the link points to, keep the link */
        char *target = realpath(path, NULL);
        if (!target && errno != ENOENT) return ts_error(TS_ERR_IO, "cannot write %s: resolving the symlink: %s", path, strerror(errno));
        if (!target) return ts_error(TS_ERR_IO, "cannot write %s: it is a symlink to a file that does not exist", path);
        af->path = ts_strdup(target);
        free(target); /* realpath's, from malloc */
        exists = af->path && stat(af->path, &sb) == 0;
    } else {
        af->path = ts_strdup(path);
    }
    if (!af->path) {
        release(af);
        return TS_ERR_OUT_OF_MEMORY;
    }
    ts_status s = TS_OK;
    if (exists && S_ISDIR(sb.st_mode)) s = ts_error(TS_ERR_IO, "cannot write %s: it is a directory", path);
    else if (exists && (S_ISSOCK(sb.st_mode) || S_ISBLK(sb.st_mode)))
        s = ts_error(TS_ERR_IO, "cannot write %s: it is a %s, not a regular file", path, S_ISSOCK(sb.st_mode) ? "socket" : "block device");
    else if (exists && (S_ISCHR(sb.st_mode) || S_ISFIFO(sb.st_mode))) s = open_through(af, &sb);
    else s = open_tmp(af, mode);
    if (s) release(af);
    return s;
}

ts_status ts_atomic_open(ts_atomic_file *af, const char *path) { return ts_atomic_open_mode(af, path, 0666); }

/* After a rename the directory entry itself must reach the disk. */
static void sync_dir(const char *path) {
    char *dir = dir_of(path);
    int fd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (fd >= 0) {
        (void)fsync(fd); /* some filesystems refuse fsync on a directory: the data is synced already */
        close(fd);
    }
    ts_free(dir);
}

ts_status ts_atomic_commit(ts_atomic_file *af) {
    if (!af->f) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_atomic_commit: file is not open");
    errno = 0;
    bool ok = fflush(af->f) == 0 && !ferror(af->f);
    if (ok && !af->through) ok = fsync(fileno(af->f)) == 0; /* devices need not support fsync */
    int err = errno;
    if (fclose(af->f) != 0) {
        ok = false;
        if (!err) err = errno;
    }
    af->f = NULL;
    if (!ok && !err) err = EIO;
    if (!ok) {
        ts_status s = ts_error(TS_ERR_IO, "cannot write %s: %s", af->path, strerror(err));
        if (af->tmp) unlink(af->tmp);
        release(af);
        return s;
    }
    if (af->tmp && rename(af->tmp, af->path) != 0) {
        ts_status s = ts_error(TS_ERR_IO, "cannot rename %s to %s: %s", af->tmp, af->path, strerror(errno));
        unlink(af->tmp);
        release(af);
        return s;
    }
    if (af->tmp) sync_dir(af->path);
    release(af);
    return TS_OK;
}

void ts_atomic_abort(ts_atomic_file *af) {
    if (af->f) fclose(af->f);
    if (af->tmp) unlink(af->tmp);
    release(af);
}
