/* test_npz_bombs.c -- .npz archives as untrusted input: decompression bombs
 * are refused from the sizes they declare, before anything is inflated, and
 * fast (seconds of this process's CPU, not of the wall clock: the test
 * holds on a loaded machine), with the library's memory bounded (every allocation goes through a
 * counting allocator that says no past 512 MiB live).
 *
 * The bombs are made here: a bzip2 one (110 members, each one real bzip2
 * stream of 40 MiB of zeros: 4.4 GB from about 30 KB) and a deflate one
 * (a member of 3 GiB of zeros from about 3 MB: a deflate block of 1 MiB of
 * zeros, fully flushed, repeated), written as zip archives by hand.
 *
 *   test_npz_bombs               the tests
 *   test_npz_bombs --write DIR   writes DIR/bzip2_bomb.npz (no x, no labels)
 *                                and DIR/deflate_bomb.npz (x of 3 GiB, labels,
 *                                fc1.weight of 3 GiB) and DIR/weights_bomb.npz
 *                                (the CLI MLP's parameters, fc1.weight 3 GiB)
 *                                for test_cli_archives.sh */
/* needs: npz */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"

/* ---- a counting allocator: live bytes, their peak, a cap */

#define CAP ((size_t)512 << 20)
static size_t live, peak;

static void *count_alloc(void *u, size_t n) {
    (void)u;
    if (n > CAP - live) return NULL;
    size_t *p = malloc(n + 16);
    if (!p) return NULL;
    *p = n;
    live += n;
    if (live > peak) peak = live;
    return (char *)p + 16;
}
static void count_free(void *u, void *q) {
    (void)u;
    if (!q) return;
    size_t *p = (size_t *)((char *)q - 16);
    live -= *p;
    free(p);
}
static void *count_realloc(void *u, void *q, size_t n) {
    if (!q) return count_alloc(u, n);
    size_t old = *(size_t *)((char *)q - 16);
    void *r = count_alloc(u, n);
    if (!r) return NULL;
    memcpy(r, q, old < n ? old : n);
    count_free(u, q);
    return r;
}

/* Seconds of this process's CPU time: what a refusal costs, whatever else
 * the machine runs (inflating a bomb would take tens of seconds of it). */
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double wall(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- zip archives by hand: members given as their compressed bytes */

typedef struct zmember {
    char name[64];
    uint16_t method; /* 0 stored, 8 deflate, 12 bzip2 */
    uint32_t crc, csize, usize;
    /* the compressed bytes: head, then body `repeat` times, then tail */
    const uint8_t *head, *body, *tail;
    size_t nhead, nbody, ntail, repeat;
} zmember;

static void le(FILE *f, uint64_t v, int n) {
    for (int i = 0; i < n; i++) fputc((int)(v >> (8 * i)) & 0xff, f);
}

static int write_zip(const char *path, const zmember *m, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    uint32_t *offs = calloc(n, sizeof *offs);
    for (size_t i = 0; i < n; i++) {
        offs[i] = (uint32_t)ftell(f);
        le(f, 0x04034b50, 4), le(f, m[i].method == 12 ? 46 : 20, 2), le(f, 0, 2), le(f, m[i].method, 2);
        le(f, 0, 2), le(f, 0x21, 2), le(f, m[i].crc, 4), le(f, m[i].csize, 4), le(f, m[i].usize, 4);
        le(f, strlen(m[i].name), 2), le(f, 0, 2), fputs(m[i].name, f);
        if (m[i].nhead) fwrite(m[i].head, 1, m[i].nhead, f);
        for (size_t k = 0; k < m[i].repeat; k++) fwrite(m[i].body, 1, m[i].nbody, f);
        if (m[i].ntail) fwrite(m[i].tail, 1, m[i].ntail, f);
    }
    uint32_t cd = (uint32_t)ftell(f);
    for (size_t i = 0; i < n; i++) {
        le(f, 0x02014b50, 4), le(f, 20, 2), le(f, m[i].method == 12 ? 46 : 20, 2), le(f, 0, 2), le(f, m[i].method, 2);
        le(f, 0, 2), le(f, 0x21, 2), le(f, m[i].crc, 4), le(f, m[i].csize, 4), le(f, m[i].usize, 4);
        le(f, strlen(m[i].name), 2), le(f, 0, 2), le(f, 0, 2), le(f, 0, 2), le(f, 0, 2), le(f, 0, 4), le(f, offs[i], 4);
        fputs(m[i].name, f);
    }
    uint32_t end = (uint32_t)ftell(f);
    le(f, 0x06054b50, 4), le(f, 0, 2), le(f, 0, 2), le(f, n, 2), le(f, n, 2), le(f, end - cd, 4), le(f, cd, 4), le(f, 0, 2);
    free(offs);
    return fclose(f) == 0 ? 0 : -1;
}

/* A .npy header (format 1.0, 128 bytes) for |u1 [n]. */
static size_t npy_u1_header(uint8_t *h, uint64_t n) {
    char dict[128];
    int w = snprintf(dict, sizeof dict, "{'descr': '|u1', 'fortran_order': False, 'shape': (%llu,), }", (unsigned long long)n);
    memcpy(h, "\x93NUMPY\x01\x00\x76\x00", 10);
    memset(h + 10, ' ', 118);
    memcpy(h + 10, dict, (size_t)w);
    h[127] = '\n';
    return 128;
}

/* bzip2 of a .npy |u1 [40 MiB] of zeros (its 128-byte header included), as
 * Python's bz2.compress writes it; CRC-32 of the 40 MiB + 128 bytes. */
static const uint8_t bz_40m[] = {
    0x42, 0x5a, 0x68, 0x39, 0x31, 0x41, 0x59, 0x26, 0x53, 0x59, 0x49, 0x2f, 0x42, 0x38, 0x05, 0x05, 0x2e, 0x5f, 0xa0, 0xe0, 0x10,
    0x40, 0xe4, 0x6c, 0x30, 0x01, 0x03, 0x42, 0x20, 0xaf, 0x45, 0xdf, 0x0f, 0x08, 0x00, 0x00, 0x08, 0x20, 0x00, 0x94, 0x84, 0xa4,
    0xd2, 0x04, 0xcd, 0x41, 0xa6, 0x20, 0xf5, 0x32, 0x0f, 0x4d, 0x4f, 0x29, 0xa0, 0x54, 0xaa, 0x61, 0x06, 0x80, 0x00, 0x68, 0x00,
    0x03, 0xf2, 0x02, 0x20, 0x22, 0x9a, 0x12, 0x02, 0x20, 0x22, 0x9f, 0x34, 0x48, 0x08, 0x40, 0x01, 0x0c, 0x9d, 0x3b, 0x07, 0x17,
    0x8a, 0xc5, 0xa2, 0x19, 0xb2, 0x55, 0x05, 0x3c, 0x29, 0xe5, 0x7e, 0x18, 0x57, 0x26, 0x94, 0x63, 0x96, 0xfb, 0x52, 0xb7, 0xed,
    0xdd, 0xfe, 0x35, 0xcf, 0x18, 0x49, 0x6e, 0x93, 0x75, 0x1a, 0xb0, 0x21, 0x15, 0x8b, 0xe7, 0x31, 0x67, 0xb9, 0xdf, 0xa2, 0x37,
    0xaa, 0xec, 0xc1, 0x00, 0x04, 0x10, 0x01, 0x1f, 0xc5, 0xdc, 0x91, 0x4e, 0x14, 0x24, 0x12, 0x4b, 0xd0, 0x8e, 0x00};
#define BZ_ZEROS ((uint32_t)40 << 20)
#define BZ_CRC 0xd55bbc0du

enum { BZ_MEMBERS = 110 };

static int write_bzip2_bomb(const char *path) {
    static zmember m[BZ_MEMBERS];
    for (int i = 0; i < BZ_MEMBERS; i++) {
        m[i] = (zmember){.method = 12, .crc = BZ_CRC, .csize = sizeof bz_40m, .usize = BZ_ZEROS + 128, .head = bz_40m, .nhead = sizeof bz_40m};
        snprintf(m[i].name, sizeof m[i].name, "m%d.npy", i);
    }
    return write_zip(path, m, BZ_MEMBERS);
}

/* A deflate member of a .npy |u1 [mib MiB] of zeros: the header, then a
 * block of 1 MiB of zeros (fully flushed: it refers to nothing before it)
 * repeated, then the final block. Its bytes live until the next call. */
static int deflate_zeros(zmember *m, const char *name, uint32_t mib) {
    static uint8_t hdr[128], zeros[1 << 20], h[1024], body[8192], t[64];
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 9, Z_DEFLATED, -15, 9, Z_DEFAULT_STRATEGY) != Z_OK) return -1;
    npy_u1_header(hdr, (uint64_t)mib << 20);
    z.next_in = hdr, z.avail_in = sizeof hdr, z.next_out = h, z.avail_out = sizeof h;
    deflate(&z, Z_FULL_FLUSH);
    size_t nh = sizeof h - z.avail_out;
    z.next_in = zeros, z.avail_in = sizeof zeros, z.next_out = body, z.avail_out = sizeof body;
    deflate(&z, Z_FULL_FLUSH);
    size_t nb = sizeof body - z.avail_out;
    z.next_out = t, z.avail_out = sizeof t;
    int r = deflate(&z, Z_FINISH);
    size_t nt = sizeof t - z.avail_out;
    deflateEnd(&z);
    if (r != Z_STREAM_END || z.avail_in) return -1;
    uLong crc = crc32(0, hdr, sizeof hdr), cz = crc32(0, zeros, sizeof zeros);
    for (uint32_t k = 0; k < mib; k++) crc = crc32_combine(crc, cz, (z_off_t)sizeof zeros);
    *m = (zmember){.method = 8, .crc = (uint32_t)crc, .csize = (uint32_t)(nh + nb * mib + nt), .usize = (mib << 20) + 128,
                   .head = h, .nhead = nh, .body = body, .nbody = nb, .repeat = mib, .tail = t, .ntail = nt};
    snprintf(m->name, sizeof m->name, "%s", name);
    return 0;
}

/* One member per file (the deflate helper's buffers are reused). */
static int write_deflate(const char *path, const char *name, uint32_t mib) {
    zmember m;
    return deflate_zeros(&m, name, mib) || write_zip(path, &m, 1) ? -1 : 0;
}

/* x [3 GiB] and a small labels; fc1.weight [3 GiB] for --weights. */
static int write_deflate_bomb(const char *path) {
    zmember m[3];
    static uint8_t lab[128 + 4];
    npy_u1_header(lab, 4);
    if (deflate_zeros(&m[0], "x.npy", 3072)) return -1;
    m[1] = (zmember){.name = "labels.npy", .crc = (uint32_t)crc32(0, lab, sizeof lab), .csize = sizeof lab, .usize = sizeof lab,
                     .head = lab, .nhead = sizeof lab};
    m[2] = m[0];
    snprintf(m[2].name, sizeof m[2].name, "fc1.weight.npy");
    return write_zip(path, m, 3);
}

/* The CLI MLP's parameters, fc1.weight a 3 GiB bomb, the rest small. */
static int write_weights_bomb(const char *path) {
    static const char *const names[] = {"fc1.weight.npy", "fc1.bias.npy", "fc2.weight.npy", "fc2.bias.npy", "fc3.weight.npy", "fc3.bias.npy"};
    zmember m[6];
    static uint8_t small[128 + 4];
    npy_u1_header(small, 4);
    if (deflate_zeros(&m[0], names[0], 3072)) return -1;
    for (int i = 1; i < 6; i++) {
        m[i] = (zmember){.crc = (uint32_t)crc32(0, small, sizeof small), .csize = sizeof small, .usize = sizeof small, .head = small, .nhead = sizeof small};
        snprintf(m[i].name, sizeof m[i].name, "%s", names[i]);
    }
    return write_zip(path, m, 6);
}

static int all_zero(const ts_array *a) {
    int64_t n = ts_array_numel(a);
    const uint8_t *p = a->data;
    for (int64_t i = 0; i < n; i++)
        if (p[i]) return 0;
    return 1;
}

static char tmpdir[256];

/* secs: CPU seconds (a bomb), under 3; or wall seconds (a FIFO: a hang
 * would never return), under 60 */
static void expect_refusal(ts_status s, ts_status want, double secs, const char *what, const char *n1, const char *n2) {
    CHECK(s == want && strstr(ts_last_error(), n1) && strstr(ts_last_error(), n2) && secs < (strstr(what, "FIFO") ? 60.0 : 3.0),
          "%s: %s in %.3f s (%s)", what, ts_status_name(s), secs, ts_last_error());
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--write") == 0) {
        char p[4096];
        snprintf(p, sizeof p, "%s/bzip2_bomb.npz", argv[2]);
        if (write_bzip2_bomb(p)) return 1;
        snprintf(p, sizeof p, "%s/deflate_bomb.npz", argv[2]);
        if (write_deflate_bomb(p)) return 1;
        snprintf(p, sizeof p, "%s/weights_bomb.npz", argv[2]);
        return write_weights_bomb(p) ? 1 : 0;
    }
    alarm(120); /* a reader that inflates everything, or waits on a FIFO, fails here rather than hanging */
    ts_set_allocator(&(ts_allocator){count_alloc, count_realloc, count_free, NULL});
    snprintf(tmpdir, sizeof tmpdir, "%s/ts_npz_bombs.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) return 1;
    char bz[512], df[512], big[512], p[512];
    snprintf(bz, sizeof bz, "%s/bzip2_bomb.npz", tmpdir);
    snprintf(df, sizeof df, "%s/deflate_bomb.npz", tmpdir);
    snprintf(big, sizeof big, "%s/big.npz", tmpdir);
    CHECK(write_bzip2_bomb(bz) == 0 && write_deflate_bomb(df) == 0 && write_deflate(big, "big.npy", 96) == 0, "write the bombs");
    struct stat sb;
    stat(bz, &sb);
    printf("   bzip2 bomb: %lld bytes holding %d x 40 MiB\n", (long long)sb.st_size, BZ_MEMBERS);
    stat(df, &sb);
    printf("   deflate bomb: %lld bytes holding 2 x 3 GiB\n", (long long)sb.st_size);
    ts_set_limit(TS_LIMIT_ARCHIVE_BYTES, (uint64_t)2 << 30); /* the default, whatever the environment says */

    printf("== a missing array in a bomb: reported at once, nothing inflated\n");
    ts_dataset *d = NULL, *h = NULL;
    peak = live;
    double t0 = now();
    ts_status s = ts_dataset_load_arrays(&d, &h, bz);
    expect_refusal(s, TS_ERR_NOT_FOUND, now() - t0, "dataset from the bzip2 bomb (no x, no labels)", "no arrays named 'x'", "bzip2_bomb.npz");
    CHECK(peak - live < ((size_t)1 << 20), "under 1 MiB allocated at the peak (%zu bytes)", peak - live);
    ts_npz *z = NULL;
    peak = live;
    t0 = now();
    CHECK_OK(ts_npz_load(bz, &z), "the bomb's directory loads");
    CHECK(ts_npz_count(z) == BZ_MEMBERS && ts_npz_has(z, "m7") && !ts_npz_has(z, "x") && ts_npz_find(z, "x") == NULL,
          "%zu members listed, m7 there, x not", ts_npz_count(z));
    const ts_array *a = NULL;
    s = ts_npz_get(z, "x", &a);
    expect_refusal(s, TS_ERR_NOT_FOUND, now() - t0, "ts_npz_get of a missing name", "no array 'x'", "bzip2_bomb.npz");
    CHECK(peak - live < ((size_t)1 << 20), "still under 1 MiB at the peak (%zu bytes)", peak - live);

    printf("== bomb members that are read: capped by TS_LIMIT_ARCHIVE_BYTES over the archive\n");
    ts_set_limit(TS_LIMIT_ARCHIVE_BYTES, (uint64_t)100 << 20);
    CHECK_OK(ts_npz_get(z, "m0", &a), "m0 (40 MiB) is read under a limit of 100 MiB");
    CHECK(a && a->dtype == TS_U8 && ts_array_numel(a) == BZ_ZEROS && all_zero(a), "m0 holds 40 MiB of zeros");
    CHECK(ts_npz_find(z, "m1") != NULL, "m1 too (80 MiB in all)");
    peak = live;
    t0 = now();
    s = ts_npz_get(z, "m2", &a);
    expect_refusal(s, TS_ERR_FORMAT, now() - t0, "m2 would pass the limit: refused before inflating", "member 'm2.npy'", "TS_MAX_ARCHIVE_BYTES");
    CHECK(strstr(ts_last_error(), "bzip2_bomb.npz") && a == NULL, "the error names the file");
    CHECK(peak - live < ((size_t)2 << 20), "nothing allocated for it (%zu bytes at the peak)", peak - live);
    CHECK(ts_npz_get(z, "m2", &a) == TS_ERR_FORMAT && strstr(ts_last_error(), "m2.npy") && ts_npz_array(z, 2) == NULL,
          "asked again: the same refusal; ts_npz_array gives NULL");
    CHECK(ts_npz_find(z, "m0") != NULL && ts_npz_array(z, 0) == ts_npz_find(z, "m0"), "members read before stay readable");
    ts_npz_free(z);

    printf("== the deflate bomb: refused from its declared size\n");
    ts_set_limit(TS_LIMIT_ARCHIVE_BYTES, (uint64_t)2 << 30);
    peak = live;
    t0 = now();
    s = ts_dataset_load_arrays(&d, &h, df);
    expect_refusal(s, TS_ERR_FORMAT, now() - t0, "dataset from the deflate bomb (x of 3 GiB)", "member 'x.npy'", "over the limit of 2147483648");
    CHECK(peak - live < ((size_t)2 << 20) && d == NULL, "under 2 MiB allocated at the peak (%zu bytes), no dataset", peak - live);
    ts_graph *g = ts_graph_new(1);
    ts_param(g, "fc1.weight", 2, (int64_t[]){2, 3});
    ts_param(g, "x", 1, (int64_t[]){4});
    ts_param(g, "labels", 1, (int64_t[]){4});
    t0 = now();
    s = ts_graph_load_weights(g, df);
    expect_refusal(s, TS_ERR_FORMAT, now() - t0, "ts_graph_load_weights from the deflate bomb", "member 'fc1.weight.npy'", "TS_MAX_ARCHIVE_BYTES");
    ts_graph_free(g);

    printf("== a legitimate large member passes once the limit is raised\n");
    ts_set_limit(TS_LIMIT_ARCHIVE_BYTES, (uint64_t)64 << 20);
    CHECK_OK(ts_npz_load(big, &z), "open a 96 MiB member's archive");
    expect_refusal(ts_npz_get(z, "big", &a), TS_ERR_FORMAT, 0, "under a limit of 64 MiB: refused", "member 'big.npy'", "over the limit of 67108864");
    ts_npz_free(z);
    ts_set_limit(TS_LIMIT_ARCHIVE_BYTES, (uint64_t)128 << 20);
    CHECK_OK(ts_npz_load(big, &z), "again");
    CHECK_OK(ts_npz_get(z, "big", &a), "under 128 MiB: read");
    CHECK(a && ts_array_numel(a) == (int64_t)96 << 20 && all_zero(a), "96 MiB of zeros, checksum verified");
    ts_npz_free(z);
    ts_set_limit(TS_LIMIT_ARCHIVE_BYTES, (uint64_t)2 << 30);

    printf("== a member whose size differs from its .npy header\n");
    zmember m;
    deflate_zeros(&m, "x.npy", 1);
    m.usize += 100; /* the directory says 100 bytes more than the header declares */
    snprintf(p, sizeof p, "%s/lying.npz", tmpdir);
    write_zip(p, &m, 1);
    CHECK_OK(ts_npz_load(p, &z), "its directory loads");
    s = ts_npz_get(z, "x", &a);
    CHECK(s == TS_ERR_FORMAT && strstr(ts_last_error(), "archive states 1048804"), "refused: %s", ts_last_error());
    ts_npz_free(z);

    printf("== not a regular file\n");
    snprintf(p, sizeof p, "%s/fifo.npz", tmpdir);
    CHECK(mkfifo(p, 0600) == 0, "mkfifo");
    t0 = wall();
    s = ts_npz_load(p, &z);
    expect_refusal(s, TS_ERR_IO, wall() - t0, "a FIFO given as an .npz: an error, not a hang", "not a regular file", "FIFO");
    t0 = wall();
    s = ts_dataset_load_arrays(&d, &h, p);
    expect_refusal(s, TS_ERR_IO, wall() - t0, "the same FIFO as --data", "not a regular file", "fifo.npz");

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) printf("note: could not remove %s\n", tmpdir);
    ts_set_allocator(NULL);
    return check_summary("test_npz_bombs");
}
