/* test_npz.c -- .npz archives: named arrays round-trip, bad archives and bad
 * arguments are errors (never a crash), nothing is left half-written.
 *
 *   test_npz               the tests
 *   test_npz --write F     writes F for tests/test_npz_numpy.sh:
 *                          w f32 [2,3] = i*0.5-1, labels i32 [4] = 3-i
 *   test_npz --read F      checks what NumPy wrote to F (same script):
 *                          x f32 [2,2] = i+0.25, y i64 [3] = 10*i, z f64 [] = 2.5 */
/* needs: npz */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/core.h"

static char tmpdir[256];

static int write_sample(const char *path) {
    float w[6];
    int32_t labels[4];
    for (int i = 0; i < 6; i++) w[i] = (float)i * 0.5f - 1;
    for (int i = 0; i < 4; i++) labels[i] = 3 - i;
    ts_array a[2] = {ts_array_f32(w, 2, (int64_t[]){2, 3}), ts_array_i32(labels, 1, (int64_t[]){4})};
    const char *names[2] = {"w", "labels"};
    ts_status s = ts_npz_save(path, names, a, 2);
    if (s) fprintf(stderr, "test_npz --write: %s\n", ts_last_error());
    return s ? 1 : 0;
}

static void check_array(const ts_npz *z, const char *name, ts_dtype dt, int ndim, const int64_t *shape,
                        double (*f)(int64_t)) {
    const ts_array *a = ts_npz_find(z, name);
    CHECK(a != NULL, "member '%s' found", name);
    if (!a) return;
    int ok = a->dtype == dt && a->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = a->shape[i] == shape[i];
    int64_t n = ok ? ts_array_numel(a) : 0;
    for (int64_t i = 0; ok && i < n; i++) ok = ts_array_value(a, i) == f(i);
    char buf[64];
    CHECK(ok, "member '%s' is %s with the expected values", name, ts_array_shape_str(a, buf, sizeof buf));
}

static double fx(int64_t i) { return (double)i + 0.25; }
static double fy(int64_t i) { return 10.0 * (double)i; }
static double fz(int64_t i) { return (void)i, 2.5; }
static double fw(int64_t i) { return (double)i * 0.5 - 1; }
static double flab(int64_t i) { return 3.0 - (double)i; }

static int read_numpy(const char *path) {
    ts_npz *z = NULL;
    CHECK_OK(ts_npz_load(path, &z), "load the archive NumPy wrote (%s)", path);
    if (!z) return check_summary("test_npz --read");
    CHECK(ts_npz_count(z) == 3, "three members (got %zu)", ts_npz_count(z));
    check_array(z, "x", TS_F32, 2, (int64_t[]){2, 2}, fx);
    check_array(z, "y", TS_I64, 1, (int64_t[]){3}, fy);
    check_array(z, "z", TS_F64, 0, NULL, fz);
    ts_npz_free(z);
    return check_summary("test_npz --read");
}

static void write_bytes(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(b, 1, n, f);
    fclose(f);
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

static void expect_load_error(const char *path, ts_status want, const char *what, const char *needle) {
    ts_npz *z = (ts_npz *)1;
    ts_status s = ts_npz_load(path, &z);
    CHECK(s == want && z == NULL && strstr(ts_last_error(), needle), "%s: %s \"%s\"", what, ts_status_name(s),
          ts_last_error());
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--write") == 0) return write_sample(argv[2]);
    if (argc == 3 && strcmp(argv[1], "--read") == 0) return read_numpy(argv[2]);

    snprintf(tmpdir, sizeof tmpdir, "%s/ts_npz.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) return 1;
    char path[512], bad[512];
    snprintf(path, sizeof path, "%s/a.npz", tmpdir);

    printf("== round trip\n");
    CHECK(write_sample(path) == 0, "save two arrays");
    ts_npz *z = NULL;
    CHECK_OK(ts_npz_load(path, &z), "load them back");
    CHECK(ts_npz_count(z) == 2 && strcmp(ts_npz_name(z, 0), "w") == 0 && strcmp(ts_npz_name(z, 1), "labels") == 0,
          "two members in order: w, labels");
    check_array(z, "w", TS_F32, 2, (int64_t[]){2, 3}, fw);
    check_array(z, "labels", TS_I32, 1, (int64_t[]){4}, flab);
    CHECK(ts_npz_find(z, "nope") == NULL && ts_npz_name(z, 2) == NULL && ts_npz_array(z, 7) == NULL,
          "unknown names and indices give NULL");
    ts_npz_free(z);
    CHECK(count_entries(tmpdir) == 1, "no temporary file left beside the archive");

    printf("== bad arguments\n");
    float v = 1;
    ts_array one = ts_array_f32(&v, 0, NULL);
    const char *dup[2] = {"a", "a"};
    ts_array two[2] = {one, one};
    CHECK(ts_npz_save(path, dup, two, 2) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "twice"),
          "a name given twice is refused: %s", ts_last_error());
    const char *empty[1] = {""};
    CHECK(ts_npz_save(path, empty, &one, 1) == TS_ERR_INVALID_ARGUMENT, "an empty name is refused");
    CHECK(ts_npz_save("", empty, &one, 1) == TS_ERR_INVALID_ARGUMENT, "an empty path is refused");
    CHECK(ts_npz_load(NULL, &z) == TS_ERR_INVALID_ARGUMENT && ts_npz_load(path, NULL) == TS_ERR_INVALID_ARGUMENT,
          "NULL path or out is refused");
    ts_npz_free(NULL);
    CHECK(ts_npz_count(NULL) == 0 && ts_npz_find(NULL, "w") == NULL, "NULL archive is empty");

    printf("== bad archives\n");
    snprintf(bad, sizeof bad, "%s/missing.npz", tmpdir);
    expect_load_error(bad, TS_ERR_IO, "missing file", "cannot open");
    snprintf(bad, sizeof bad, "%s/text.npz", tmpdir);
    write_bytes(bad, "hello, this is not a zip archive at all", 39);
    expect_load_error(bad, TS_ERR_FORMAT, "not a zip", "text.npz");
    /* an archive of no arrays, as numpy's np.savez() writes it: the
     * end-of-central-directory record alone */
    snprintf(bad, sizeof bad, "%s/none.npz", tmpdir);
    write_bytes(bad, "PK\x05\x06\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 22);
    z = NULL;
    CHECK_OK(ts_npz_load(bad, &z), "an archive of no arrays opens");
    CHECK(z && ts_npz_count(z) == 0 && ts_npz_find(z, "x") == NULL, "... and holds none");
    ts_npz_free(z);
    /* a truncated archive: the first half of a good one */
    FILE *f = fopen(path, "rb");
    static unsigned char buf[4096];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    snprintf(bad, sizeof bad, "%s/half.npz", tmpdir);
    write_bytes(bad, buf, n / 2);
    expect_load_error(bad, TS_ERR_FORMAT, "truncated archive", "half.npz");
    /* a member that is not .npy: a zip with one text member */
    snprintf(bad, sizeof bad, "%s/notnpy.npz", tmpdir);
    const char *names1[1] = {"x"};
    CHECK_OK(ts_npz_save(bad, names1, &one, 1), "write a one-member archive");
    f = fopen(bad, "r+b");
    n = f ? fread(buf, 1, sizeof buf, f) : 0;
    for (size_t i = 0; i + 5 <= n; i++)
        if (memcmp(buf + i, "x.npy", 5) == 0) memcpy(buf + i, "x.txt", 5);
    if (f) {
        rewind(f);
        fwrite(buf, 1, n, f);
        fclose(f);
    }
    expect_load_error(bad, TS_ERR_FORMAT, "member that is not .npy", "x.txt");
    /* a member whose .npy bytes are corrupt */
    write_bytes(bad, buf, n);
    f = fopen(bad, "r+b");
    for (size_t i = 0; i + 6 <= n; i++)
        if (memcmp(buf + i, "\x93NUMPY", 6) == 0) buf[i + 1] = 'X';
    for (size_t i = 0; i + 5 <= n; i++)
        if (memcmp(buf + i, "x.txt", 5) == 0) memcpy(buf + i, "x.npy", 5);
    if (f) {
        fwrite(buf, 1, n, f);
        fclose(f);
    }
    /* the directory is fine: the member is refused when it is read */
    z = NULL;
    CHECK_OK(ts_npz_load(bad, &z), "an archive with a corrupt member opens (only its directory is read)");
    const ts_array *got = (const ts_array *)1;
    ts_status s = ts_npz_get(z, "x", &got);
    CHECK(s == TS_ERR_FORMAT && got == NULL && strstr(ts_last_error(), "member 'x.npy'") && strstr(ts_last_error(), "notnpy.npz"),
          "reading the corrupt member: %s \"%s\"", ts_status_name(s), ts_last_error());
    CHECK(ts_npz_find(z, "x") == NULL && ts_npz_array(z, 0) == NULL && strstr(ts_last_error(), "member 'x.npy'"),
          "ts_npz_find and ts_npz_array give NULL, ts_last_error says why: %s", ts_last_error());
    ts_npz_free(z);

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) printf("note: could not remove %s\n", tmpdir);
    return check_summary("test_npz");
}
