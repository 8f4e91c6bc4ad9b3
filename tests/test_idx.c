/* test_idx.c -- MNIST IDX files: the shipped test set loads with the right
 * labels and normalisation; corrupt, truncated and mismatched files are
 * TS_ERR_FORMAT with a message naming the problem, never a crash. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"
#include "io/idx.h"

static char tmpdir[512];
static char paths[64][600];
static int n_paths;

/* Writes bytes to <tmpdir>/<name>, gzip'd if `gz`; returns the path. */
static const char *write_file(const char *name, const void *bytes, size_t n, int gz) {
    char *p = paths[n_paths++];
    snprintf(p, sizeof paths[0], "%s/%s", tmpdir, name);
    if (gz) {
        gzFile f = gzopen(p, "wb");
        if (!f || gzwrite(f, bytes, (unsigned)n) != (int)n) abort();
        gzclose(f);
    } else {
        FILE *f = fopen(p, "wb");
        if (!f || fwrite(bytes, 1, n, f) != n) abort();
        fclose(f);
    }
    return p;
}

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* An IDX image file of n images rows x cols with pixel = (i + k) % 256. */
static size_t make_images(uint8_t *buf, uint32_t n, uint32_t rows, uint32_t cols) {
    put_be32(buf, 0x803);
    put_be32(buf + 4, n);
    put_be32(buf + 8, rows);
    put_be32(buf + 12, cols);
    size_t size = (size_t)n * rows * cols;
    for (size_t k = 0; k < size; k++) buf[16 + k] = (uint8_t)k;
    return 16 + size;
}

static size_t make_labels(uint8_t *buf, uint32_t n) {
    put_be32(buf, 0x801);
    put_be32(buf + 4, n);
    for (uint32_t i = 0; i < n; i++) buf[8 + i] = (uint8_t)(i % 10);
    return 8 + n;
}

/* Reads a whole gzip'd file with zlib, independently of the library. */
static uint8_t *gunzip(const char *path, size_t *n) {
    gzFile f = gzopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 20, len = 0;
    uint8_t *buf = malloc(cap);
    int r;
    while ((r = gzread(f, buf + len, (unsigned)(cap - len))) > 0) {
        len += (size_t)r;
        if (len == cap) buf = realloc(buf, cap *= 2);
    }
    gzclose(f);
    *n = len;
    return buf;
}

static uint8_t *read_raw(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)sz);
    *n = fread(b, 1, (size_t)sz, f);
    fclose(f);
    return b;
}

/* Loading must fail with `code` and a message containing `needle`. */
static void expect_fail(const char *what, ts_status code, const char *needle, const char *images,
                        const char *labels) {
    ts_dataset *d = (ts_dataset *)1;
    ts_status s = ts_dataset_load_idx(&d, images, labels);
    const char *msg = ts_last_error();
    CHECK(s == code && d == NULL && strstr(msg, needle) != NULL, "%s -> %s: %s", what,
          ts_status_name(s), msg);
}

/* The in-memory parser must agree on the same bytes. */
static void expect_parse_fail(const char *what, ts_status code, const char *needle,
                              const uint8_t *b, size_t n) {
    ts_idx x;
    ts_status s = ts_idx_parse(b, n, "mem", &x);
    CHECK(s == code && x.data == NULL && strstr(ts_last_error(), needle) != NULL,
          "parse %s -> %s: %s", what, ts_status_name(s), ts_last_error());
}

static void test_shipped_mnist(void) {
    ts_dataset *d = NULL;
    CHECK_OK(ts_dataset_load_mnist(&d, "data/mnist"), "load_mnist(data/mnist)");
    if (!d) return;
    CHECK(ts_dataset_size(d) == 10000, "10000 samples (got %lld)", (long long)ts_dataset_size(d));
    ts_array im, lb;
    CHECK_OK(ts_dataset_arrays(d, &im, &lb), "dataset arrays");
    char s1[64], s2[64];
    ts_array_shape_str(&im, s1, sizeof s1);
    ts_array_shape_str(&lb, s2, sizeof s2);
    CHECK(strcmp(s1, "f32[10000,1,28,28]") == 0 && strcmp(s2, "i32[10000]") == 0,
          "shapes %s %s", s1, s2);
    const int32_t *y = lb.data;
    CHECK(y[0] == 7 && y[1] == 2 && y[2] == 1 && y[3] == 0 && y[4] == 4,
          "first labels 7,2,1,0,4 (got %d,%d,%d,%d,%d)", y[0], y[1], y[2], y[3], y[4]);
    int hist[10] = {0}, bad = 0;
    for (int i = 0; i < 10000; i++) {
        if (y[i] < 0 || y[i] > 9) bad++;
        else hist[y[i]]++;
    }
    /* the MNIST test set's class counts */
    static const int expect[10] = {980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009};
    CHECK(bad == 0 && memcmp(hist, expect, sizeof hist) == 0,
          "class counts of the test set (0: %d, 1: %d, 9: %d)", hist[0], hist[1], hist[9]);
    const float *x = im.data;
    float lo = x[0], hi = x[0];
    for (int64_t i = 0; i < ts_array_numel(&im); i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
    }
    CHECK(lo == -1.0f && hi == 1.0f, "pixels span [-1, 1] (got [%g, %g])", (double)lo,
          (double)hi);
    /* Against the raw bytes, read here with zlib directly. */
    size_t n = 0;
    uint8_t *raw = gunzip("data/mnist/t10k-images-idx3-ubyte.gz", &n);
    double worst = 0;
    if (raw && n == 16 + 10000u * 784u)
        for (size_t i = 0; i < 10000u * 784u; i += 97) {
            double want = ((double)raw[16 + i] / 255.0 - 0.5) / 0.5;
            double e = want > x[i] ? want - x[i] : x[i] - want;
            if (e > worst) worst = e;
        }
    CHECK(raw && n == 16 + 10000u * 784u && worst < 1e-6,
          "pixels are (x/255 - 0.5)/0.5 of the raw bytes (max err %.2g)", worst);
    free(raw);

    /* The same data, decompressed, through ts_dataset_load_idx. */
    raw = gunzip("data/mnist/t10k-labels-idx1-ubyte.gz", &n);
    size_t ni = 0;
    uint8_t *rawi = gunzip("data/mnist/t10k-images-idx3-ubyte.gz", &ni);
    const char *pi = write_file("plain-images", rawi, ni, 0);
    const char *pl = write_file("plain-labels", raw, n, 0);
    ts_dataset *d2 = NULL;
    CHECK_OK(ts_dataset_load_idx(&d2, pi, pl), "load_idx of uncompressed files");
    if (d2) {
        ts_array im2, lb2;
        ts_dataset_arrays(d2, &im2, &lb2);
        CHECK(memcmp(im2.data, im.data, 10000u * 784u * 4) == 0 &&
                  memcmp(lb2.data, lb.data, 10000u * 4) == 0,
              "plain and gzip'd files give the same dataset");
        ts_dataset_free(d2);
    }
    free(raw);
    free(rawi);
    ts_dataset_free(d);
}

static void test_mnist_dir_errors(void) {
    ts_dataset *d = NULL;
    ts_status s = ts_dataset_load_mnist(&d, tmpdir); /* holds only plain-* files */
    CHECK(s == TS_ERR_IO && strstr(ts_last_error(), "t10k-images-idx3-ubyte") &&
              strstr(ts_last_error(), "train-labels-idx1-ubyte"),
          "empty dir lists the files looked for: %s", ts_last_error());
    s = ts_dataset_load_mnist(&d, "no/such/dir");
    CHECK(s == TS_ERR_IO && strstr(ts_last_error(), "no/such/dir"), "missing dir: %s",
          ts_last_error());
    uint8_t buf[16 + 2 * 4];
    size_t n = make_images(buf, 2, 2, 2);
    write_file("t10k-images-idx3-ubyte", buf, n, 0);
    s = ts_dataset_load_mnist(&d, tmpdir);
    CHECK(s == TS_ERR_IO && strstr(ts_last_error(), "t10k-labels-idx1-ubyte"),
          "images without labels names the labels file: %s", ts_last_error());
    n = make_labels(buf, 2);
    write_file("t10k-labels-idx1-ubyte.gz", buf, n, 1);
    CHECK_OK(ts_dataset_load_mnist(&d, tmpdir), "plain images + gzip'd labels load");
    CHECK(d && ts_dataset_size(d) == 2, "2 samples");
    if (d) {
        ts_array im;
        ts_dataset_arrays(d, &im, NULL);
        char s1[64];
        CHECK(strcmp(ts_array_shape_str(&im, s1, sizeof s1), "f32[2,1,2,2]") == 0,
              "other image sizes keep their shape: %s", s1);
    }
    ts_dataset_free(d);
}

static void test_bad_files(void) {
    static uint8_t img[16 + 10 * 28 * 28], lab[8 + 10], tmp[sizeof img + 8];
    size_t ni = make_images(img, 10, 28, 28), nl = make_labels(lab, 10);
    const char *good_i = write_file("good-images.gz", img, ni, 1);
    const char *good_l = write_file("good-labels.gz", lab, nl, 1);
    ts_dataset *d = NULL;
    CHECK_OK(ts_dataset_load_idx(&d, good_i, good_l), "synthetic good pair loads");
    if (d) {
        ts_array im, lb;
        ts_dataset_arrays(d, &im, &lb);
        const float *x = im.data;
        const int32_t *y = lb.data;
        /* pixel k is k % 256: check 0, 255 and 128 */
        CHECK(x[0] == -1.0f && x[255] == 1.0f && x[128] > 0.0f && x[128] < 0.01f &&
                  y[3] == 3 && y[9] == 9,
              "synthetic pixels and labels (%g %g %g)", (double)x[0], (double)x[255],
              (double)x[128]);
        ts_dataset_free(d);
    }

    memcpy(tmp, img, ni);
    put_be32(tmp, 0x12345678);
    expect_fail("wrong magic", TS_ERR_FORMAT, "magic", write_file("magic.gz", tmp, ni, 1), good_l);
    expect_parse_fail("wrong magic", TS_ERR_FORMAT, "magic", tmp, ni);

    put_be32(tmp, 0x00000D03);
    expect_fail("f32 IDX", TS_ERR_UNSUPPORTED, "f32", write_file("f32.gz", tmp, ni, 1), good_l);

    expect_fail("3-byte file", TS_ERR_FORMAT, "truncated", write_file("short.gz", img, 3, 1),
                good_l);
    expect_parse_fail("3 bytes", TS_ERR_FORMAT, "truncated", img, 3);
    expect_fail("header cut in the dims", TS_ERR_FORMAT, "truncated",
                write_file("hdr.gz", img, 10, 1), good_l);
    expect_parse_fail("header cut in the dims", TS_ERR_FORMAT, "truncated", img, 10);
    expect_fail("pixel data cut short", TS_ERR_FORMAT, "truncated",
                write_file("cut.gz", img, ni - 100, 1), good_l);
    expect_parse_fail("pixel data cut short", TS_ERR_FORMAT, "truncated", img, ni - 100);

    memcpy(tmp, img, ni);
    memset(tmp + ni, 0xAB, 8);
    expect_fail("trailing bytes", TS_ERR_FORMAT, "more data",
                write_file("trail", tmp, ni + 8, 0), good_l);
    expect_parse_fail("trailing bytes", TS_ERR_FORMAT, "after", tmp, ni + 8);

    memcpy(tmp, img, 16);
    put_be32(tmp + 4, 0xFFFFFFFFu);
    put_be32(tmp + 8, 0xFFFFFFFFu);
    put_be32(tmp + 12, 0xFFFFFFFFu);
    expect_fail("absurd dims", TS_ERR_FORMAT, "corrupt", write_file("huge.gz", tmp, 16, 1),
                good_l);
    expect_parse_fail("absurd dims", TS_ERR_FORMAT, "corrupt", tmp, 16);

    uint8_t lab9[8 + 9];
    size_t nl9 = make_labels(lab9, 9);
    expect_fail("10 images, 9 labels", TS_ERR_FORMAT, "10 images",
                good_i, write_file("nine.gz", lab9, nl9, 1));
    memcpy(tmp, lab, nl);
    tmp[8 + 4] = 12;
    expect_fail("label 12", TS_ERR_FORMAT, "outside 0..9", good_i,
                write_file("label12.gz", tmp, nl, 1));
    expect_fail("images and labels swapped", TS_ERR_FORMAT, "swapped", good_l, good_i);
    expect_fail("missing file", TS_ERR_IO, "nonexistent", good_i, "nonexistent.gz");

    /* Corrupt the compressed stream itself: flip bytes in the middle. */
    size_t nz = 0;
    uint8_t *z = read_raw(good_i, &nz);
    if (z && nz > 40) {
        for (size_t k = nz / 2; k < nz / 2 + 8; k++) z[k] ^= 0x5A;
        /* which check trips depends on zlib; the file is named either way */
        expect_fail("corrupt gzip stream", TS_ERR_FORMAT, "corrupt.gz",
                    write_file("corrupt.gz", z, nz, 0), good_l);
        /* a gzip file cut in half: the stream ends early */
        expect_fail("gzip file cut in half", TS_ERR_FORMAT, "half.gz",
                    write_file("half.gz", z, nz / 2, 0), good_l);
        /* wrong CRC in the trailer only: data decodes, the check fails */
        free(z);
        z = read_raw(good_i, &nz);
        z[nz - 8] ^= 0xFF;
        expect_fail("gzip CRC mismatch", TS_ERR_FORMAT, "gzip",
                    write_file("crc.gz", z, nz, 0), good_l);
    }
    free(z);

    ts_idx x;
    CHECK_OK(ts_idx_parse(lab, nl, "mem", &x), "in-memory parse of a label file");
    CHECK(x.ndim == 1 && x.dims[0] == 10 && x.size == 10 && x.data && x.data[7] == 7,
          "parsed labels [10], data[7] = 7");
    ts_idx_free(&x);
}

/* The largest single allocation, through the library's allocator hook. */
static size_t peak_alloc;
static void *peak_malloc(void *u, size_t n) { (void)u; if (n > peak_alloc) peak_alloc = n; return malloc(n); }
static void *peak_realloc(void *u, void *p, size_t n) { (void)u; if (n > peak_alloc) peak_alloc = n; return realloc(p, n); }
static void peak_free(void *u, void *p) { (void)u; free(p); }

/* A header is a claim: memory follows the data that is really there. */
static void test_claimed_size(void) {
    ts_allocator a = {peak_malloc, peak_realloc, peak_free, NULL};
    static uint8_t buf[16 + (8u << 20)];
    put_be32(buf, 0x803);
    put_be32(buf + 4, 65535), put_be32(buf + 8, 256), put_be32(buf + 12, 256); /* 4 GiB claimed */
    const char *tiny = write_file("claims-4g.gz", buf, 16 + 10, 1);
    ts_set_allocator(&a);
    peak_alloc = 0;
    ts_idx x;
    ts_status st = ts_idx_read(tiny, &x);
    ts_set_allocator(NULL);
    CHECK(st == TS_ERR_FORMAT && strstr(ts_last_error(), "truncated"), "26 bytes claiming 4 GiB: truncated (%s)",
          ts_last_error());
    CHECK(peak_alloc <= ((size_t)2 << 20), "... with at most 2 MiB allocated (%zu bytes)", peak_alloc);

    memset(buf + 16, 0, 8u << 20); /* 8 MiB of real zeros (a few KiB of gzip) */
    const char *bomb = write_file("claims-4g-has-8m.gz", buf, sizeof buf, 1);
    ts_set_allocator(&a);
    peak_alloc = 0;
    st = ts_idx_read(bomb, &x);
    ts_set_allocator(NULL);
    CHECK(st == TS_ERR_FORMAT && strstr(ts_last_error(), "truncated"), "8 MiB of data claiming 4 GiB: truncated");
    CHECK(peak_alloc <= ((size_t)16 << 20), "... with at most twice the data allocated (%zu bytes)", peak_alloc);
}

int main(void) {
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/ts_test_idx_XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_shipped_mnist();
    test_mnist_dir_errors();
    test_bad_files();
    test_claimed_size();
    for (int i = 0; i < n_paths; i++) unlink(paths[i]);
    rmdir(tmpdir);
    return check_summary("test_idx");
}
