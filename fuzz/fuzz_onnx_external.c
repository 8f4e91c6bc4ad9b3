/* fuzz_onnx_external.c -- the ONNX importer with external data. The input
 * is a model and an external data file: 4 bytes (little-endian) give the
 * model's length, the model follows, the rest is the data, written as
 * weights.bin into a folder of this process that also holds what a hostile
 * model folder may hold: links out of it (passwd.bin -> /etc/passwd,
 * zero.bin -> /dev/zero, up -> ..), a FIFO (fifo.bin), a folder (sub) with
 * a file in it (sub/w.bin, 32 bytes). Every one of them must be refused or
 * read within its size, never followed or waited on (fuzz_onnx.h says what
 * a result must be). Seeds: fuzz/corpus/fuzz_onnx_external/ (a MatMul with
 * its weight external at each of these locations, by fuzz/make_corpus.py). */
/* needs: onnx */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_onnx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];
static const char *const entries[] = {"weights.bin", "passwd.bin", "zero.bin", "up", "fifo.bin", "sub/w.bin", "sub"};

static void remove_folder(void) {
    char p[128];
    for (size_t i = 0; i < sizeof entries / sizeof *entries; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, entries[i]);
        if (unlink(p) != 0) rmdir(p);
    }
    rmdir(dir);
}

static void make_folder(void) {
    snprintf(dir, sizeof dir, "/tmp/fuzz_onnx_external_XXXXXX");
    if (!mkdtemp(dir)) abort();
    char p[128];
    snprintf(p, sizeof p, "%s/passwd.bin", dir);
    if (symlink("/etc/passwd", p) != 0) abort();
    snprintf(p, sizeof p, "%s/zero.bin", dir);
    if (symlink("/dev/zero", p) != 0) abort();
    snprintf(p, sizeof p, "%s/up", dir);
    if (symlink("..", p) != 0) abort();
    snprintf(p, sizeof p, "%s/fifo.bin", dir);
    if (mkfifo(p, 0600) != 0) abort();
    snprintf(p, sizeof p, "%s/sub", dir);
    if (mkdir(p, 0700) != 0) abort();
    snprintf(p, sizeof p, "%s/sub/w.bin", dir);
    FILE *f = fopen(p, "wb");
    float w[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    if (!f || fwrite(w, sizeof w, 1, f) != 1 || fclose(f) != 0) abort();
    atexit(remove_folder);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_onnx_setup();
    if (!dir[0]) make_folder();
    if (size < 4) return 0;
    size_t k = (size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16 | (size_t)data[3] << 24;
    if (k > size - 4) k = size - 4;
    char p[128];
    snprintf(p, sizeof p, "%s/weights.bin", dir);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) abort();
    size_t n = size - 4 - k;
    if (n && write(fd, data + 4 + k, n) != (ssize_t)n) abort();
    close(fd);
    snprintf(p, sizeof p, "%s/model.onnx", dir);
    ts_graph *g = NULL;
    ts_status st = ts_onnx_import_bytes(&g, data + 4, k, p, NULL, 0);
    fuzz_onnx_check(st, g);
    ts_graph_free(g);
    return 0;
}
