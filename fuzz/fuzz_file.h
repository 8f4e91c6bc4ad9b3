/* fuzz_file.h (include it first after defining _GNU_SOURCE) -- the fuzz input as a file the product opens by path: an
 * anonymous memory file (memfd) named /proc/self/fd/N, so the targets go
 * through the same fopen / gzopen / fstat paths as the CLI. */
#ifndef TS_FUZZ_FILE_H
#define TS_FUZZ_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

/* Writes n bytes into a fresh memfd; path gets its name. -1 on failure. */
static inline int fuzz_file(const void *data, size_t n, char *path, size_t cap) {
    int fd = memfd_create("fuzz", MFD_CLOEXEC);
    if (fd < 0) return -1;
    const uint8_t *p = data;
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k <= 0) {
            close(fd);
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    snprintf(path, cap, "/proc/self/fd/%d", fd);
    return fd;
}

#endif
