/* atomic_file.c -- temp file + rename: a file is there whole or not at all. */
#include "io/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

static atomic_uint tmp_counter;

static void release(ts_atomic_file *af) {
    ts_free(af->path);
    ts_free(af->tmp);
    memset(af, 0, sizeof *af);
}

ts_status ts_atomic_open(ts_atomic_file *af, const char *path) {
    memset(af, 0, sizeof *af);
    if (!path || !*path) return ts_error(TS_ERR_INVALID_ARGUMENT, "output path is empty");
    size_t n = strlen(path) + 64;
    af->path = ts_strdup(path);
    af->tmp = ts_malloc(n);
    if (!af->path || !af->tmp) {
        release(af);
        return TS_ERR_OUT_OF_MEMORY;
    }
    /* O_EXCL with a per-process counter: concurrent writers never share a temp
     * name; mode 0666 lets the umask decide, as for any other new file. */
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 16; tries++) {
        snprintf(af->tmp, n, "%s.tmp.%ld.%u", path, (long)getpid(),
                 atomic_fetch_add(&tmp_counter, 1u));
        fd = open(af->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        ts_status s = ts_error(TS_ERR_IO, "cannot write %s: creating %s failed: %s", path,
                               af->tmp, strerror(errno));
        release(af);
        return s;
    }
    af->f = fdopen(fd, "wb");
    if (!af->f) {
        ts_status s = ts_error(TS_ERR_IO, "cannot open %s: %s", af->tmp, strerror(errno));
        close(fd);
        unlink(af->tmp);
        release(af);
        return s;
    }
    return TS_OK;
}

ts_status ts_atomic_commit(ts_atomic_file *af) {
    if (!af->f) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_atomic_commit: file is not open");
    errno = 0;
    bool ok = fflush(af->f) == 0 && !ferror(af->f) && fsync(fileno(af->f)) == 0;
    int err = errno;
    if (fclose(af->f) != 0) {
        ok = false;
        if (!err) err = errno;
    }
    af->f = NULL;
    if (!ok && !err) err = EIO;
    if (!ok) {
        ts_status s = ts_error(TS_ERR_IO, "cannot write %s: %s", af->path, strerror(err));
        unlink(af->tmp);
        release(af);
        return s;
    }
    if (rename(af->tmp, af->path) != 0) {
        ts_status s = ts_error(TS_ERR_IO, "cannot rename %s to %s: %s", af->tmp, af->path,
                               strerror(errno));
        unlink(af->tmp);
        release(af);
        return s;
    }
    release(af);
    return TS_OK;
}

void ts_atomic_abort(ts_atomic_file *af) {
    if (af->f) fclose(af->f);
    if (af->tmp) unlink(af->tmp);
    release(af);
}
