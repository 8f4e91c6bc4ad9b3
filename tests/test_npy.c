/* test_npy.c -- .npy files: every dtype round-trips, headers are 64-byte
 * aligned, corrupt and truncated files are errors (never a crash), nothing is
 * left half-written; and the ts_array helpers.
 *
 *   test_npy               the tests
 *   test_npy --write DIR   writes sample files for tests/test_npy_numpy.sh
 *   test_npy --read DIR    checks the files NumPy wrote there (same script)
 *
 * The sample values are formulas of the index, shared with the script:
 *   c_f32.npy  f32 [2,3]   i*0.5 - 1       c_f64.npy  f64 [4]    i/3
 *   c_i32.npy  i32 [3,2]   i*7 - 20        c_i64.npy  i64 [2,2]  i * 2^40 - 5
 *   c_u8.npy   u8  [5,1]   i*63            c_scalar.npy f32 []   3.25
 *   c_empty.npy f32 [0,3] */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/core.h"

static char tmpdir[512];

static void path_in(char *buf, size_t n, const char *dir, const char *name) {
    snprintf(buf, n, "%s/%s", dir, name);
}

/* ------------------------------------------------------ sample arrays */

typedef struct sample {
    const char *name;
    ts_dtype dtype;
    int ndim;
    int64_t shape[3];
} sample;

static const sample samples[] = {
    {"c_f32.npy", TS_F32, 2, {2, 3}},  {"c_f64.npy", TS_F64, 1, {4}},
    {"c_i32.npy", TS_I32, 2, {3, 2}},  {"c_i64.npy", TS_I64, 2, {2, 2}},
    {"c_u8.npy", TS_U8, 2, {5, 1}},    {"c_scalar.npy", TS_F32, 0, {0}},
    {"c_empty.npy", TS_F32, 2, {0, 3}},
};

/* Value i of a sample, as a double (exact for every value used here). */
static double sample_value(const sample *s, int64_t i) {
    if (s->ndim == 0) return 3.25;
    switch (s->dtype) {
    case TS_F32: return (double)i * 0.5 - 1;
    case TS_F64: return (double)i / 3;
    case TS_I32: return (double)(i * 7 - 20);
    case TS_I64: return (double)(i * ((int64_t)1 << 40) - 5);
    case TS_U8: return (double)(i * 63);
    default: break; /* no sample of the other dtypes: .npy reads them widened */
    }
    return 0;
}

static void set(ts_array *a, int64_t i, double v) {
    switch (a->dtype) {
    case TS_F32: ((float *)a->data)[i] = (float)v; break;
    case TS_F64: ((double *)a->data)[i] = v; break;
    case TS_I32: ((int32_t *)a->data)[i] = (int32_t)v; break;
    case TS_I64: ((int64_t *)a->data)[i] = (int64_t)v; break;
    case TS_U8: ((uint8_t *)a->data)[i] = (uint8_t)v; break;
    default: break;
    }
}

/* Fills a (data malloc'd here; free it) with the sample's values. */
static ts_array make_sample(const sample *s) {
    ts_array a = {.dtype = s->dtype, .ndim = s->ndim};
    for (int i = 0; i < s->ndim; i++) a.shape[i] = s->shape[i];
    int64_t n = ts_array_numel(&a);
    a.data = malloc((size_t)(n ? n : 1) * ts_dtype_size(s->dtype));
    for (int64_t i = 0; i < n; i++) set(&a, i, sample_value(s, i));
    if (s->dtype == TS_I64 && n) /* beyond double's 2^53: checks i64 is not squeezed */
        ((int64_t *)a.data)[n - 1] = INT64_MAX - 1;
    return a;
}

static int same_array(const ts_array *a, const ts_array *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    size_t bytes = (size_t)ts_array_numel(a) * ts_dtype_size(a->dtype);
    return bytes == 0 || memcmp(a->data, b->data, bytes) == 0;
}

static int write_samples(const char *dir) {
    int bad = 0;
    for (size_t k = 0; k < sizeof samples / sizeof samples[0]; k++) {
        char p[700];
        path_in(p, sizeof p, dir, samples[k].name);
        ts_array a = make_sample(&samples[k]);
        if (ts_npy_save(p, &a)) {
            fprintf(stderr, "cannot write %s: %s\n", p, ts_last_error());
            bad = 1;
        }
        free(a.data);
    }
    return bad;
}

/* ------------------------------------------------- reading NumPy's files */

/* Files tests/test_npy_numpy.sh writes with NumPy, and what they hold. */
static void read_numpy_files(const char *dir) {
    static const struct {
        const char *name;
        ts_dtype dtype;
        const char *shape;
        double scale, offset; /* value i = i * scale + offset */
    } files[] = {
        {"py_f32.npy", TS_F32, "f32[2,3,4]", 0.25, -1},
        {"py_f64.npy", TS_F64, "f64[5]", 1.0 / 3, 0},
        {"py_i32.npy", TS_I32, "i32[3,2]", 1, -3},
        {"py_i64.npy", TS_I64, "i64[4]", (double)((int64_t)1 << 40), 0},
        {"py_u8.npy", TS_U8, "u8[256]", 1, 0},
        {"py_v2.npy", TS_F32, "f32[2,3]", 1, 0},
        {"py_scalar.npy", TS_F64, "f64[]", 0, 3.5},
        {"py_sliced.npy", TS_F32, "f32[3,2]", 2, 0}, /* a[:, ::2] saved: made contiguous */
    };
    char p[700], shape[64];
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        path_in(p, sizeof p, dir, files[k].name);
        ts_array a;
        ts_status s = ts_npy_load(p, &a);
        CHECK_OK(s, "load NumPy's %s", files[k].name);
        if (s) continue;
        ts_array_shape_str(&a, shape, sizeof shape);
        CHECK(a.dtype == files[k].dtype && strcmp(shape, files[k].shape) == 0, "%s is %s",
              files[k].name, shape);
        double worst = 0;
        for (int64_t i = 0; i < ts_array_numel(&a); i++) {
            double want = (double)i * files[k].scale + files[k].offset;
            double e = fabs(ts_array_value(&a, i) - want) / (fabs(want) > 1 ? fabs(want) : 1);
            if (e > worst) worst = e;
        }
        CHECK(worst < 1e-7, "%s values (max rel err %.2g)", files[k].name, worst);
        ts_npy_free(&a);
    }
    static const struct {
        const char *name, *needle;
    } refused[] = {{"py_fortran.npy", "Fortran"}, {"py_bigendian.npy", "big-endian"},
                   {"py_complex.npy", "<c8"}};
    for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++) {
        path_in(p, sizeof p, dir, refused[k].name);
        ts_array a;
        ts_status s = ts_npy_load(p, &a);
        CHECK(s == TS_ERR_UNSUPPORTED && a.data == NULL && strstr(ts_last_error(), refused[k].needle),
              "NumPy's %s refused: %s", refused[k].name, ts_last_error());
    }
}

/* ------------------------------------------------------------ the tests */

static void test_round_trip(void) {
    for (size_t k = 0; k < sizeof samples / sizeof samples[0]; k++) {
        const sample *s = &samples[k];
        char p[700], shape[64];
        path_in(p, sizeof p, tmpdir, s->name);
        ts_array a = make_sample(s), b, c;
        ts_array_shape_str(&a, shape, sizeof shape);
        CHECK_OK(ts_npy_save(p, &a), "save %s", shape);
        CHECK_OK(ts_npy_load(p, &b), "load %s", shape);
        CHECK(same_array(&a, &b), "%s round-trips through a file", shape);
        /* the header: 1.0, data 64-byte aligned, '\n'-terminated dict */
        FILE *f = fopen(p, "rb");
        uint8_t raw[4096];
        size_t n = f ? fread(raw, 1, sizeof raw, f) : 0;
        if (f) fclose(f);
        size_t hl = n >= 10 ? (size_t)raw[8] | (size_t)raw[9] << 8 : 0;
        char descr[16];
        snprintf(descr, sizeof descr, "'%s'",
                 s->dtype == TS_F32   ? "<f4"
                 : s->dtype == TS_F64 ? "<f8"
                 : s->dtype == TS_I32 ? "<i4"
                 : s->dtype == TS_I64 ? "<i8"
                                      : "|u1");
        CHECK(n >= 10 && memcmp(raw, "\x93NUMPY\x01\x00", 8) == 0 && (10 + hl) % 64 == 0 &&
                  10 + hl <= n && raw[10 + hl - 1] == '\n' &&
                  strstr((const char *)raw + 10, descr) &&
                  n == 10 + hl + (size_t)ts_array_numel(&a) * ts_dtype_size(a.dtype),
              "%s header: version 1.0, %s, data at offset %zu", shape, descr, 10 + hl);
        CHECK_OK(ts_npy_parse(raw, n, &c), "parse %s from memory", shape);
        CHECK(same_array(&a, &c), "%s round-trips through memory", shape);
        ts_npy_free(&b);
        CHECK(b.data == NULL, "ts_npy_free clears the view");
        ts_npy_free(&c);
        free(a.data);
        unlink(p);
    }
    /* all 8 dims */
    float v[6] = {1, 2, 3, 4, 5, 6};
    ts_array a = ts_array_f32(v, 8, (int64_t[]){1, 1, 1, 1, 1, 1, 2, 3}), b;
    char p[700];
    path_in(p, sizeof p, tmpdir, "eight.npy");
    CHECK_OK(ts_npy_save(p, &a), "save 8 dims");
    CHECK(ts_npy_load(p, &b) == TS_OK && same_array(&a, &b), "8 dims round-trip");
    ts_npy_free(&b);
    unlink(p);
}

static int dir_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    if (d) closedir(d);
    return n;
}

static void test_atomic_write(void) {
    float v[4] = {1, 2, 3, 4};
    ts_array a = ts_array_f32(v, 1, (int64_t[]){4}), b;
    char p[700];
    path_in(p, sizeof p, tmpdir, "over.npy");
    ts_npy_save(p, &a);
    v[0] = 9;
    CHECK_OK(ts_npy_save(p, &a), "overwrite an existing file");
    CHECK(ts_npy_load(p, &b) == TS_OK && ((float *)b.data)[0] == 9.0f, "the new content is there");
    ts_npy_free(&b);
    CHECK(dir_entries(tmpdir) == 1, "no temporary file left behind (%d entries)",
          dir_entries(tmpdir));
    ts_status s = ts_npy_save("no/such/dir/x.npy", &a);
    CHECK(s == TS_ERR_IO && strstr(ts_last_error(), "no/such/dir"), "unwritable dir: %s",
          ts_last_error());
    ts_array bad = a;
    bad.shape[0] = -1;
    CHECK(ts_npy_save(p, &bad) == TS_ERR_INVALID_ARGUMENT, "negative dim refused: %s",
          ts_last_error());
    bad = a;
    bad.dtype = (ts_dtype)77;
    CHECK(ts_npy_save(p, &bad) == TS_ERR_INVALID_ARGUMENT, "unknown dtype refused: %s",
          ts_last_error());
    CHECK(ts_npy_load(p, &b) == TS_OK && ((float *)b.data)[0] == 9.0f,
          "failed saves leave the old file intact");
    ts_npy_free(&b);
    unlink(p);
}

/* A .npy image with a hand-written header dict, padded like NumPy does. */
static size_t make_npy(uint8_t *buf, int major, const char *dict, const void *data, size_t n) {
    size_t pre = major == 1 ? 10 : 12, dl = strlen(dict);
    size_t total = (pre + dl + 1 + 63) / 64 * 64, hl = total - pre;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)major;
    buf[7] = 0;
    buf[8] = (uint8_t)hl;
    buf[9] = (uint8_t)(hl >> 8);
    if (major != 1) buf[10] = buf[11] = 0;
    memcpy(buf + pre, dict, dl);
    memset(buf + pre + dl, ' ', hl - dl - 1);
    buf[total - 1] = '\n';
    memcpy(buf + total, data, n);
    return total + n;
}

/* Both the memory parser and the file loader must refuse b with `code`. */
static void expect_bad(const char *what, const uint8_t *b, size_t n, ts_status code,
                       const char *needle) {
    ts_array a;
    ts_status s = ts_npy_parse(b, n, &a);
    int ok = s == code && a.data == NULL && strstr(ts_last_error(), needle);
    char p[700];
    path_in(p, sizeof p, tmpdir, "bad.npy");
    FILE *f = fopen(p, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
    ts_status s2 = ts_npy_load(p, &a);
    ok = ok && s2 == code && a.data == NULL && strstr(ts_last_error(), needle) &&
         strstr(ts_last_error(), "bad.npy");
    CHECK(ok, "%s -> %s: %s", what, ts_status_name(s2), ts_last_error());
    unlink(p);
}

static void test_bad_input(void) {
    static uint8_t b[1024];
    const float v[6] = {1, 2, 3, 4, 5, 6};
    ts_array a;
    size_t n = make_npy(b, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", v,
                        sizeof v);
    CHECK(ts_npy_parse(b, n, &a) == TS_OK && ((float *)a.data)[5] == 6.0f,
          "a hand-made 1.0 file parses");
    ts_npy_free(&a);
    /* any key order, double quotes, no trailing comma: still a Python dict */
    n = make_npy(b, 2, "{\"shape\": (6,), \"fortran_order\": False, \"descr\": \"<f4\"}", v,
                 sizeof v);
    CHECK(ts_npy_parse(b, n, &a) == TS_OK && a.ndim == 1 && a.shape[0] == 6,
          "a 2.0 file with keys in another order parses");
    ts_npy_free(&a);
    /* uint64 is read as i64, exactly, below 2^63; one at or above it is refused */
    uint64_t u[3] = {7, (uint64_t)1 << 62, UINT64_MAX};
    n = make_npy(b, 1, "{'descr': '<u8', 'fortran_order': False, 'shape': (2,), }", u,
                 2 * sizeof u[0]);
    CHECK(ts_npy_parse(b, n, &a) == TS_OK && a.dtype == TS_I64 && ((int64_t *)a.data)[0] == 7 &&
              ((int64_t *)a.data)[1] == (int64_t)1 << 62,
          "<u8 below 2^63 reads as i64, exactly");
    ts_npy_free(&a);
    n = make_npy(b, 1, "{'descr': '<u8', 'fortran_order': False, 'shape': (3,), }", u, sizeof u);
    expect_bad("<u8 at 2^64-1", b, n, TS_ERR_UNSUPPORTED, "element 2 is 2^63 or more");

    n = make_npy(b, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", v,
                 sizeof v);
    int crashes_or_oks = 0;
    for (size_t cut = 0; cut < n; cut++) {
        ts_status s = ts_npy_parse(b, cut, &a);
        if (s != TS_ERR_FORMAT || a.data) crashes_or_oks++;
    }
    CHECK(crashes_or_oks == 0, "every one of the %zu truncations is TS_ERR_FORMAT", n);
    expect_bad("cut in the data", b, n - 3, TS_ERR_FORMAT, "truncated");
    expect_bad("cut in the header", b, 30, TS_ERR_FORMAT, "truncated");
    b[n] = 0;
    expect_bad("trailing byte", b, n + 1, TS_ERR_FORMAT, "1 bytes follow");
    b[1] = 'X';
    expect_bad("bad magic", b, n, TS_ERR_FORMAT, "not a .npy");
    b[1] = 'N';
    b[6] = 9;
    expect_bad("version 9.0", b, n, TS_ERR_FORMAT, "version 9.0");
    b[6] = 1;
    b[8] = 0xff;
    b[9] = 0xff;
    expect_bad("header length past the end", b, n, TS_ERR_FORMAT, "truncated");
    b[8] = 1;
    b[9] = 0;
    expect_bad("header length 1", b, n, TS_ERR_FORMAT, "too short");

    static const struct {
        const char *what, *dict, *needle;
        ts_status code;
    } dicts[] = {
        {"fortran order", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
         "Fortran", TS_ERR_UNSUPPORTED},
        {"big-endian", "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }",
         "big-endian", TS_ERR_UNSUPPORTED},
        {"complex", "{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", "<c8",
         TS_ERR_UNSUPPORTED},
        {"structured", "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }",
         "structured", TS_ERR_UNSUPPORTED},
        {"9 dims", "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,2,3), }",
         "more than 8", TS_ERR_UNSUPPORTED},
        {"missing shape", "{'descr': '<f4', 'fortran_order': False, }", "missing 'shape'",
         TS_ERR_FORMAT},
        {"duplicate key", "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
         "'shape': (6,), }", "twice", TS_ERR_FORMAT},
        {"unknown key", "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}",
         "unknown key", TS_ERR_FORMAT},
        {"negative dim", "{'descr': '<f4', 'fortran_order': False, 'shape': (-6,), }",
         "shape", TS_ERR_FORMAT},
        {"overflowing dims", "{'descr': '<f4', 'fortran_order': False, "
         "'shape': (4294967296, 4294967296, 4294967296), }", "too many", TS_ERR_FORMAT},
        {"dim past int64", "{'descr': '<f4', 'fortran_order': False, "
         "'shape': (99999999999999999999,), }", "shape", TS_ERR_FORMAT},
        {"shape too big for the data", "{'descr': '<f4', 'fortran_order': False, "
         "'shape': (1000000,), }", "truncated", TS_ERR_FORMAT},
        {"not a dict", "['descr', '<f4']", "not a dict", TS_ERR_FORMAT},
        {"unterminated string", "{'descr': '<f4", "quoted string", TS_ERR_FORMAT},
        {"fortran_order 1", "{'descr': '<f4', 'fortran_order': 1, 'shape': (6,), }",
         "True or False", TS_ERR_FORMAT},
        {"text after dict", "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), } x",
         "after", TS_ERR_FORMAT},
    };
    for (size_t k = 0; k < sizeof dicts / sizeof dicts[0]; k++) {
        n = make_npy(b, 1, dicts[k].dict, v, sizeof v);
        expect_bad(dicts[k].what, b, n, dicts[k].code, dicts[k].needle);
    }
    ts_status s = ts_npy_load("no/such/file.npy", &a);
    CHECK(s == TS_ERR_IO && strstr(ts_last_error(), "no/such/file.npy"), "missing file: %s",
          ts_last_error());
}

static void test_array_helpers(void) {
    static const char *names[] = {"f32", "f64", "i32", "i64", "u8"};
    static const size_t sizes[] = {4, 8, 4, 8, 1};
    int ok = 1;
    for (int t = TS_F32; t <= TS_U8; t++)
        ok &= strcmp(ts_dtype_name((ts_dtype)t), names[t]) == 0 &&
              ts_dtype_size((ts_dtype)t) == sizes[t];
    CHECK(ok && ts_dtype_size((ts_dtype)99) == 0, "dtype names and sizes");
    int32_t iv[1];
    ts_array a = ts_array_f32(NULL, 2, (int64_t[]){4, 100});
    char buf[64];
    CHECK(strcmp(ts_array_shape_str(&a, buf, sizeof buf), "f32[4,100]") == 0 &&
              ts_array_numel(&a) == 400,
          "f32[4,100]: %s, numel %lld", buf, (long long)ts_array_numel(&a));
    a = ts_array_i32(iv, 0, NULL);
    CHECK(strcmp(ts_array_shape_str(&a, buf, sizeof buf), "i32[]") == 0 &&
              ts_array_numel(&a) == 1 && a.data == iv,
          "a scalar: %s, numel 1", buf);
    a = ts_array_f32(NULL, 2, (int64_t[]){0, 3});
    CHECK(ts_array_numel(&a) == 0, "[0,3] has no elements");
    a = ts_array_f32(NULL, 2, (int64_t[]){INT64_MAX, 3});
    CHECK(ts_array_numel(&a) == -1, "an overflowing element count is -1");
    a = ts_array_f32(NULL, 9, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1});
    CHECK(a.ndim == -1 && ts_array_numel(&a) == -1 && strstr(ts_last_error(), "rank 9"),
          "rank 9 gives an invalid array: %s", ts_last_error());
    a = ts_array_f32(NULL, 2, (int64_t[]){4, 100});
    char tiny[6];
    memset(tiny, 'x', sizeof tiny);
    ts_array_shape_str(&a, tiny, sizeof tiny);
    CHECK(strcmp(tiny, "f32[4") == 0, "shape string truncates safely: \"%s\"", tiny);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--write") == 0) return write_samples(argv[2]);
    if (argc == 3 && strcmp(argv[1], "--read") == 0) {
        read_numpy_files(argv[2]);
        return check_summary("test_npy --read");
    }
    if (argc != 1) {
        fprintf(stderr, "usage: test_npy [--write DIR | --read DIR]\n");
        return 2;
    }
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/ts_test_npy_XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_array_helpers();
    test_round_trip();
    test_atomic_write();
    test_bad_input();
    rmdir(tmpdir);
    return check_summary("test_npy");
}
