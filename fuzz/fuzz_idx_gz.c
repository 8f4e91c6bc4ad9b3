/* fuzz_idx_gz.c -- MNIST loading as the product does it: two IDX files,
 * gzip'd or plain, opened by path through zlib (ts_dataset_load_idx, which
 * `train --data` and ts_dataset_load_mnist reach). Any bytes give a dataset
 * or an error, never a crash, an overread or an allocation the data does not
 * justify (libFuzzer's -rss_limit_mb catches those).
 *
 * Input: byte 0 bit 0: gzip the files here (so mutations reach the IDX
 * layer behind the compression; else the bytes are the files, gzip framing
 * and all); bytes 1-2: the images file's length (LE); then images, then
 * labels. */
#define _GNU_SOURCE /* memfd_create */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "fuzz_file.h"
#include "tensorscope.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* gzip of n bytes into a malloc'd buffer (*out_n its size). */
static uint8_t *gzip_bytes(const uint8_t *in, size_t n, size_t *out_n) {
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return NULL;
    size_t cap = deflateBound(&z, (uLong)n);
    uint8_t *out = malloc(cap);
    if (!out) {
        deflateEnd(&z);
        return NULL;
    }
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    int r = deflate(&z, Z_FINISH);
    *out_n = z.total_out;
    deflateEnd(&z);
    if (r != Z_STREAM_END) {
        free(out);
        return NULL;
    }
    return out;
}

static int as_file(const uint8_t *p, size_t n, int gz, char *path, size_t cap) {
    if (!gz) return fuzz_file(p, n, path, cap);
    size_t zn = 0;
    uint8_t *z = gzip_bytes(p, n, &zn);
    if (!z) return -1;
    int fd = fuzz_file(z, zn, path, cap);
    free(z);
    return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    int gz = data[0] & 1;
    size_t ni = (size_t)data[1] | (size_t)data[2] << 8;
    data += 3, size -= 3;
    if (ni > size) ni = size;
    char ip[64], lp[64];
    int fi = as_file(data, ni, gz, ip, sizeof ip);
    int fl = fi >= 0 ? as_file(data + ni, size - ni, gz, lp, sizeof lp) : -1;
    if (fi >= 0 && fl >= 0) {
        ts_dataset *d = NULL;
        if (ts_dataset_load_idx(&d, ip, lp) == TS_OK) {
            ts_array im, lb;
            if (ts_dataset_arrays(d, &im, &lb) != TS_OK || im.shape[0] != lb.shape[0] || ts_dataset_size(d) != im.shape[0])
                __builtin_trap(); /* a dataset must be consistent */
            int64_t n = ts_array_numel(&im);
            volatile float sink = n > 0 ? ((const float *)im.data)[n - 1] : 0.0f;
            (void)sink;
            ts_dataset_free(d);
        } else if (!ts_last_error()[0]) {
            __builtin_trap(); /* every error has a message */
        }
    }
    if (fi >= 0) close(fi);
    if (fl >= 0) close(fl);
    return 0;
}
