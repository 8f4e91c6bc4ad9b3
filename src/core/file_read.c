/* file_read.c -- opening a file a user named, as an untrusted input:
 * regular files only, never through a symbolic link (the path's last
 * component), never waiting on a FIFO, with the real size every
 * reader checks a stated size against before allocating. */
#include "core.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

ts_status ts_file_open_read(const char *path, const char *what, int *fd_out, uint64_t *size) {
    *fd_out = -1;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; only regular
     * files are read (a FIFO or device could block or never end) */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW); /* a link is not followed: where it points is not the user's file */
    if (fd < 0 && errno == ELOOP) {
        struct stat lb;
        if (lstat(path, &lb) == 0 && S_ISLNK(lb.st_mode))
            return ts_error(TS_ERR_IO, "cannot read %s %s: it is a symbolic link, and files read as input are not followed through links "
                            "(docs/reliability.md); give the path of the file itself", what, path);
    }
    if (fd < 0) return ts_error(TS_ERR_IO, "cannot open %s %s: %s", what, path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        ts_status s = ts_error(TS_ERR_IO, "cannot read %s: %s", path, strerror(errno));
        close(fd);
        return s;
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return ts_error(TS_ERR_IO, "cannot read %s: it is not a regular file (a %s); give the path of the %s", path,
                        S_ISDIR(sb.st_mode) ? "directory" : S_ISFIFO(sb.st_mode) ? "FIFO" : "device or socket", what);
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    *fd_out = fd;
    *size = sb.st_size > 0 ? (uint64_t)sb.st_size : 0;
    return TS_OK;
}

ts_status ts_file_fopen_read(const char *path, const char *what, FILE **out, uint64_t *size) {
    *out = NULL;
    int fd;
    ts_status s = ts_file_open_read(path, what, &fd, size);
    if (s) return s;
    *out = fdopen(fd, "rb");
    if (!*out) {
        s = ts_error(TS_ERR_IO, "cannot open %s: %s", path, strerror(errno));
        close(fd);
    }
    return s;
}
