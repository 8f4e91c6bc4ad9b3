/* test_loader.c -- batching, seeded shuffling, slices, epoch ends and config
 * errors of ts_loader, on a synthetic dataset whose first pixel of image i
 * encodes i, so every served sample can be identified. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

#define N 103 /* not a multiple of the batch sizes below */

static char tmpdir[512], img_path[600], lab_path[600];

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void write_bytes(const char *path, const uint8_t *b, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, n, f) != n) abort();
    fclose(f);
}

/* N images of 2x2: pixel 0 = i, labels i % 10. */
static ts_dataset *make_dataset(void) {
    uint8_t img[16 + N * 4], lab[8 + N];
    put_be32(img, 0x803);
    put_be32(img + 4, N);
    put_be32(img + 8, 2);
    put_be32(img + 12, 2);
    put_be32(lab, 0x801);
    put_be32(lab + 4, N);
    for (int i = 0; i < N; i++) {
        memset(img + 16 + 4 * i, 255 - i, 4);
        img[16 + 4 * i] = (uint8_t)i;
        lab[8 + i] = (uint8_t)(i % 10);
    }
    snprintf(img_path, sizeof img_path, "%s/images", tmpdir);
    snprintf(lab_path, sizeof lab_path, "%s/labels", tmpdir);
    write_bytes(img_path, img, sizeof img);
    write_bytes(lab_path, lab, sizeof lab);
    ts_dataset *d = NULL;
    if (ts_dataset_load_idx(&d, img_path, lab_path)) {
        printf("FAIL cannot make the dataset: %s\n", ts_last_error());
        exit(1);
    }
    return d;
}

/* The sample index encoded in image `k` of a batch (undoes the normalisation). */
static int sample_id(const ts_array *images, int64_t k) {
    const float *x = images->data;
    return (int)((x[k * 4] * 0.5f + 0.5f) * 255.0f + 0.5f);
}

static ts_loader *loader(const ts_dataset *d, int64_t b, int64_t first, int64_t count,
                         int shuffle, uint64_t seed, int drop_last) {
    ts_loader *l = NULL;
    ts_loader_config c = {b, first, count, shuffle, seed, drop_last};
    if (ts_loader_new(&l, d, c)) printf("loader_new failed: %s\n", ts_last_error());
    return l;
}

/* Serves one epoch in groups of n batches: ids into out (up to cap), group
 * sizes into sizes; returns samples served, -1 on any inconsistency. */
static int epoch(ts_loader *l, int n, int *out, int cap, int64_t *sizes, int *n_groups) {
    int got = 0;
    *n_groups = 0;
    ts_array im, lb;
    ts_status s;
    while ((s = ts_loader_next(l, n, &im, &lb)) == TS_OK) {
        if (im.ndim != 4 || lb.ndim != 1 || im.shape[0] != lb.shape[0] || im.shape[1] != 1 ||
            im.shape[2] != 2 || im.shape[3] != 2)
            return -1;
        sizes[(*n_groups)++] = im.shape[0];
        for (int64_t k = 0; k < im.shape[0]; k++) {
            int id = sample_id(&im, k);
            if (((const int32_t *)lb.data)[k] != id % 10) return -1; /* label travels along */
            if (got < cap) out[got] = id;
            got++;
        }
    }
    return s == TS_ERR_NOT_FOUND ? got : -1;
}

/* Whether ids[0..n) is a permutation of first..first+n-1 (and not in order). */
static int is_permutation(const int *ids, int n, int first, int *in_order) {
    int seen[N] = {0};
    *in_order = 1;
    for (int i = 0; i < n; i++) {
        if (ids[i] < first || ids[i] >= first + n || seen[ids[i]]++) return 0;
        if (ids[i] != first + i) *in_order = 0;
    }
    return 1;
}

static void test_batching(const ts_dataset *d) {
    ts_loader *l = loader(d, 10, 0, 0, 0, 0, 0);
    ts_loader *ld = loader(d, 10, 0, 0, 0, 0, 1);
    CHECK(l && ts_loader_batches(l) == 11, "103 samples / 10: 11 batches without drop_last");
    CHECK(ld && ts_loader_batches(ld) == 10, "103 samples / 10: 10 batches with drop_last");
    int ids[N], ng, in_order;
    int64_t sizes[16];
    int n = epoch(l, 1, ids, N, sizes, &ng);
    CHECK(n == N && ng == 11 && sizes[0] == 10 && sizes[10] == 3,
          "epoch: 11 batches, the last of 3 (served %d in %d)", n, ng);
    CHECK(is_permutation(ids, N, 0, &in_order) && in_order, "no shuffle: samples in order");
    ts_array im, lb;
    CHECK_OK(ts_loader_next(l, 1, &im, &lb), "next epoch starts after TS_ERR_NOT_FOUND");
    CHECK(sample_id(&im, 0) == 0, "and begins again at sample 0");

    n = epoch(ld, 1, ids, N, sizes, &ng);
    CHECK(n == 100 && ng == 10 && sizes[9] == 10, "drop_last: 10 full batches (%d samples)", n);

    /* groups of n = 4 batches */
    ts_loader_free(l);
    l = loader(d, 10, 0, 0, 0, 0, 0);
    n = epoch(l, 4, ids, N, sizes, &ng);
    CHECK(n == 100 && ng == 3 && sizes[0] == 40 && sizes[1] == 40 && sizes[2] == 20,
          "groups of 4 batches: 40, 40, then the 23 left as 4 batches of 5 (20; the 3 that do not split evenly dropped)");
    n = epoch(ld, 4, ids, N, sizes, &ng);
    CHECK(n == 80 && ng == 2, "drop_last drops the short group too (%d samples)", n);
    ts_array im2, lb2;
    ts_status s = ts_loader_next(ld, 11, &im2, &lb2);
    CHECK(s == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "only 10 full batches"),
          "drop_last and a group larger than the epoch: an error, not endless empty epochs: %s",
          ts_last_error());
    n = epoch(l, 100, ids, N, sizes, &ng);
    CHECK(n == 100 && ng == 1 && sizes[0] == 100, "a group of 100 batches, larger than the epoch: 100 batches of 1 (%d)", n);
    n = epoch(l, 103, ids, N, sizes, &ng);
    CHECK(n == N && ng == 1 && sizes[0] == N, "a group of 103 batches: all %d, batches of 1", n);
    s = ts_loader_next(l, 104, &im2, &lb2);
    CHECK(s == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "only 103 samples"),
          "a group of 104 batches from 103 samples: an error, not endless empty epochs: %s", ts_last_error());
    ts_loader_free(l);
    ts_loader_free(ld);
}

static void test_shuffle(const ts_dataset *d) {
    ts_loader *a = loader(d, 8, 0, 0, 1, 42, 0), *b = loader(d, 8, 0, 0, 1, 42, 0);
    ts_loader *c = loader(d, 8, 0, 0, 1, 43, 0);
    int ea1[N], ea2[N], eb1[N], eb2[N], ec1[N], ng, in_order;
    int64_t sizes[16];
    epoch(a, 1, ea1, N, sizes, &ng);
    epoch(a, 1, ea2, N, sizes, &ng);
    epoch(b, 3, eb1, N, sizes, &ng); /* group size does not change the order */
    epoch(b, 2, eb2, N, sizes, &ng);
    epoch(c, 1, ec1, N, sizes, &ng);
    CHECK(is_permutation(ea1, N, 0, &in_order) && !in_order,
          "shuffled epoch is a permutation, not in order");
    CHECK(is_permutation(ea2, N, 0, &in_order), "second epoch is a permutation");
    /* groups of 3 and 2 serve 102 of the 103: the last one does not split evenly */
    CHECK(memcmp(ea1, eb1, (N - 1) * sizeof *ea1) == 0 && memcmp(ea2, eb2, (N - 1) * sizeof *ea2) == 0,
          "same seed: same order, epoch after epoch");
    CHECK(memcmp(ea1, ea2, sizeof ea1) != 0, "each epoch is reshuffled");
    CHECK(memcmp(ea1, ec1, sizeof ea1) != 0, "another seed gives another order");
    ts_loader_free(a);
    ts_loader_free(b);
    ts_loader_free(c);
}

static void test_slice(const ts_dataset *d) {
    ts_loader *l = loader(d, 8, 20, 30, 1, 7, 0);
    int ids[N], ng, in_order;
    int64_t sizes[16];
    CHECK(l && ts_loader_batches(l) == 4, "slice [20, 50) in batches of 8: 4 batches");
    int n = epoch(l, 1, ids, N, sizes, &ng);
    CHECK(n == 30 && is_permutation(ids, 30, 20, &in_order) && !in_order,
          "slice serves exactly samples 20..49, shuffled");
    ts_loader_free(l);
    l = loader(d, 8, 100, 0, 0, 0, 0);
    n = epoch(l, 1, ids, N, sizes, &ng);
    CHECK(n == 3 && ids[0] == 100 && ids[2] == 102, "count 0 = to the end: samples 100..102");
    ts_loader_free(l);
}

static void expect_bad(const ts_dataset *d, ts_loader_config c, const char *needle,
                       const char *what) {
    ts_loader *l = (ts_loader *)1;
    ts_status s = ts_loader_new(&l, d, c);
    CHECK(s == TS_ERR_INVALID_ARGUMENT && l == NULL && strstr(ts_last_error(), needle),
          "%s -> %s: %s", what, ts_status_name(s), ts_last_error());
}

static void test_bad_config(const ts_dataset *d) {
    expect_bad(d, (ts_loader_config){0, 0, 0, 0, 0, 0}, "batch_size", "batch_size 0");
    expect_bad(d, (ts_loader_config){-5, 0, 0, 0, 0, 0}, "batch_size", "batch_size -5");
    expect_bad(d, (ts_loader_config){8, -1, 0, 0, 0, 0}, "outside", "first -1");
    expect_bad(d, (ts_loader_config){8, 100, 10, 0, 0, 0}, "outside", "slice past the end");
    expect_bad(d, (ts_loader_config){8, 0, -2, 0, 0, 0}, "outside", "count -2");
    expect_bad(d, (ts_loader_config){8, N, 0, 0, 0, 0}, "empty", "empty slice");
    expect_bad(d, (ts_loader_config){8, 0, 5, 0, 0, 1}, "drop_last", "drop_last, 5 < 8");
    expect_bad(NULL, (ts_loader_config){8, 0, 0, 0, 0, 0}, "NULL", "NULL dataset");
    ts_loader *l = loader(d, 8, 0, 0, 0, 0, 0);
    ts_array im, lb;
    ts_status s = ts_loader_next(l, 0, &im, &lb);
    CHECK(s == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "n must be"),
          "next with n = 0: %s", ts_last_error());
    ts_loader_free(l);

    /* batch sizes near INT64_MAX: no overflow, one partial batch of all N */
    l = loader(d, INT64_MAX, 0, 0, 0, 0, 0);
    CHECK(l && ts_loader_batches(l) == 1, "batch_size INT64_MAX: 1 batch (%lld)", (long long)ts_loader_batches(l));
    s = l ? ts_loader_next(l, 3, &im, &lb) : TS_ERR_INTERNAL;
    CHECK(s == TS_OK && im.shape[0] == N - 1 && lb.shape[0] == N - 1, "3 batches of INT64_MAX serve %d of the %d samples (3 x 34)", N - 1, N);
    ts_loader_free(l);
    expect_bad(d, (ts_loader_config){INT64_MAX - 1, 0, 0, 0, 0, 1}, "drop_last", "drop_last with INT64_MAX-1");
    l = loader(d, INT64_MAX / 2 + 1, 0, 0, 0, 0, 0);
    s = l ? ts_loader_next(l, 2, &im, &lb) : TS_ERR_INTERNAL;
    CHECK(s == TS_OK && im.shape[0] == N - 1, "2 x (2^62) samples requested: %d of the %d there are (2 x 51)", N - 1, N);
    ts_loader_free(l);
}

/* Counts allocations, to show ts_loader_next allocates nothing once warm. */
static int allocs;
static void *count_alloc(void *u, size_t n) { (void)u; allocs++; return malloc(n); }
static void *count_realloc(void *u, void *p, size_t n) { (void)u; allocs++; return realloc(p, n); }
static void count_free(void *u, void *p) { (void)u; free(p); }

static void test_no_alloc_in_next(const ts_dataset *d) {
    ts_allocator a = {count_alloc, count_realloc, count_free, NULL};
    ts_set_allocator(&a);
    ts_loader *l = loader(d, 8, 0, 0, 1, 1, 0);
    ts_array im, lb;
    ts_loader_next(l, 1, &im, &lb);
    allocs = 0;
    int calls = 0;
    for (int i = 0; i < 50; i++)
        if (ts_loader_next(l, 1, &im, &lb) == TS_OK) calls++;
    CHECK(allocs == 0 && calls > 0, "%d calls of next over epochs: %d allocations", calls,
          allocs);
    ts_loader_free(l);
    ts_set_allocator(NULL);
}

int main(void) {
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/ts_test_loader_XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    ts_dataset *d = make_dataset();
    test_batching(d);
    test_shuffle(d);
    test_slice(d);
    test_bad_config(d);
    test_no_alloc_in_next(d);
    ts_dataset_free(d);
    unlink(img_path);
    unlink(lab_path);
    rmdir(tmpdir);
    return check_summary("test_loader");
}
