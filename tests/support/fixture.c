/* fixture.c -- reader of the reference fixtures and array comparisons
 * (format in fixture.h). Bounds-checked: a truncated or corrupt file is a
 * message and NULL, never a crash. */
#include "fixture.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A cursor over the file's bytes. */
typedef struct reader {
    const unsigned char *p;
    size_t n, off;
    const char *path;
} reader;

static int fail(const reader *r, const char *what)
{
    fprintf(stderr, "fixture %s: %s at byte %zu; regenerate it with "
                    "`/usr/bin/python3 tests/reference/make_fixtures.py`\n",
            r->path, what, r->off);
    return -1;
}

static int take(reader *r, void *out, size_t len, const char *what)
{
    if (len > r->n - r->off)
        return fail(r, what);
    memcpy(out, r->p + r->off, len);
    r->off += len;
    return 0;
}

static uint64_t le_bytes(const unsigned char *b, int len)
{
    uint64_t v = 0;
    for (int i = len - 1; i >= 0; i--)
        v = (v << 8) | b[i];
    return v;
}

static int take_u32(reader *r, uint32_t *out, const char *what)
{
    unsigned char b[4];
    if (take(r, b, 4, what))
        return -1;
    *out = (uint32_t)le_bytes(b, 4);
    return 0;
}

static int take_i64(reader *r, int64_t *out, const char *what)
{
    unsigned char b[8];
    if (take(r, b, 8, what))
        return -1;
    *out = (int64_t)le_bytes(b, 8);
    return 0;
}

/* Entry data: 4-byte little-endian elements into aligned host-order storage. */
static int take_data(reader *r, ts_array *a, int64_t numel, const char *what)
{
    if (numel < 0 || (uint64_t)numel > (r->n - r->off) / 4)
        return fail(r, what);
    size_t bytes = (size_t)numel * 4;
    uint32_t *dst = malloc(bytes ? bytes : 4);
    if (!dst)
        return fail(r, "out of memory");
    for (int64_t i = 0; i < numel; i++)
        dst[i] = (uint32_t)le_bytes(r->p + r->off + (size_t)i * 4, 4);
    r->off += bytes;
    a->data = dst;
    return 0;
}

static int parse_entry(reader *r, fixture_entry *e)
{
    uint32_t name_len, dtype, ndim;
    if (take_u32(r, &name_len, "truncated entry header"))
        return -1;
    if (name_len == 0 || name_len > 4096 || name_len > r->n - r->off)
        return fail(r, "bad entry name length");
    e->name = malloc((size_t)name_len + 1);
    if (!e->name)
        return fail(r, "out of memory");
    if (take(r, e->name, name_len, "truncated entry name"))
        return -1;
    e->name[name_len] = '\0';
    if (strlen(e->name) != name_len)
        return fail(r, "entry name contains a NUL byte");
    if (take_u32(r, &dtype, "truncated dtype") || take_u32(r, &ndim, "truncated ndim"))
        return -1;
    if (dtype != TS_F32 && dtype != TS_I32)
        return fail(r, "entry dtype is neither f32 (0) nor i32 (2)");
    if (ndim > TS_MAX_DIMS)
        return fail(r, "entry has more dims than TS_MAX_DIMS");
    e->array.dtype = (ts_dtype)dtype;
    e->array.ndim = (int)ndim;
    int64_t numel = 1;
    for (uint32_t d = 0; d < ndim; d++) {
        int64_t s;
        if (take_i64(r, &s, "truncated shape"))
            return -1;
        if (s < 0 || (s > 0 && numel > INT64_MAX / 4 / s))
            return fail(r, "bad dimension in shape");
        e->array.shape[d] = s;
        numel *= s;
    }
    return take_data(r, &e->array, numel, "truncated entry data");
}

fixture *fixture_parse(const void *bytes, size_t n, const char *path)
{
    reader r = {bytes, n, 0, path};
    char magic[8];
    uint32_t version, count;
    if (take(&r, magic, 8, "file shorter than the header") ||
        take_u32(&r, &version, "file shorter than the header") ||
        take_u32(&r, &count, "file shorter than the header"))
        return NULL;
    if (memcmp(magic, FIXTURE_MAGIC, 8) != 0) {
        fail(&r, "bad magic (not a TSFIXTR file)");
        return NULL;
    }
    if (version != FIXTURE_VERSION) {
        fail(&r, "unsupported version");
        return NULL;
    }
    /* each entry takes at least 13 bytes: a corrupt count cannot make us
     * allocate more than the file could describe */
    if (count > (n - r.off) / 13) {
        fail(&r, "entry count larger than the file");
        return NULL;
    }
    fixture *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->version = version;
    f->path = malloc(strlen(path) + 1);
    f->entries = calloc(count ? count : 1, sizeof *f->entries);
    if (!f->path || !f->entries) {
        fixture_free(f);
        return NULL;
    }
    strcpy(f->path, path);
    for (uint32_t i = 0; i < count; i++) {
        f->n = (int)i + 1; /* so fixture_free releases a half-parsed entry */
        if (parse_entry(&r, &f->entries[i])) {
            fixture_free(f);
            return NULL;
        }
    }
    if (r.off != n) {
        fail(&r, "trailing bytes after the last entry");
        fixture_free(f);
        return NULL;
    }
    return f;
}

fixture *fixture_load(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        perror(path);
        return NULL;
    }
    unsigned char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 1 << 20;
            unsigned char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(fp);
                fprintf(stderr, "fixture %s: out of memory\n", path);
                return NULL;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, fp);
        n += got;
        if (got == 0)
            break;
    }
    int err = ferror(fp);
    fclose(fp);
    fixture *f = NULL;
    if (err)
        fprintf(stderr, "fixture %s: read error\n", path);
    else
        f = fixture_parse(buf, n, path);
    free(buf);
    return f;
}

void fixture_free(fixture *f)
{
    if (!f)
        return;
    for (int i = 0; i < f->n; i++) {
        free(f->entries[i].name);
        free(f->entries[i].array.data);
    }
    free(f->entries);
    free(f->path);
    free(f);
}

const ts_array *fixture_get(const fixture *f, const char *name)
{
    for (int i = 0; f && i < f->n; i++)
        if (strcmp(f->entries[i].name, name) == 0)
            return &f->entries[i].array;
    return NULL;
}

int ts_expect_close(const char *what, const float *got, const float *want, int64_t n,
                    double rtol, double atol)
{
    double max_abs = 0, max_rel = 0;
    int64_t bad = 0, worst = -1;
    double worst_excess = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = got[i], w = want[i];
        double d = fabs(g - w);
        double tol = atol + rtol * fabs(w);
        if (!(d <= tol)) { /* NaN fails too */
            bad++;
            double excess = isnan(d) ? INFINITY : d - tol;
            if (worst < 0 || excess > worst_excess) {
                worst = i;
                worst_excess = excess;
            }
        }
        if (isnan(d) || d > max_abs)
            max_abs = isnan(d) ? INFINITY : d;
        if (w != 0 && (isnan(d) || d / fabs(w) > max_rel))
            max_rel = isnan(d) ? INFINITY : d / fabs(w);
    }
    printf("%-34s n=%-7lld max_abs=%.3g max_rel=%.3g (rtol %.0e atol %.0e) %s", what,
           (long long)n, max_abs, max_rel, rtol, atol, bad ? "MISMATCH" : "OK");
    if (bad)
        printf(": %lld bad, worst [%lld] got %.9g want %.9g", (long long)bad, (long long)worst,
               (double)got[worst], (double)want[worst]);
    printf("\n");
    fflush(stdout);
    return bad ? 1 : 0;
}

int ts_expect_array_close(const char *what, const ts_array *got, const ts_array *want,
                          double rtol, double atol)
{
    char gs[128], ws[128];
    ts_array_shape_str(got, gs, sizeof gs);
    ts_array_shape_str(want, ws, sizeof ws);
    int same = got->dtype == TS_F32 && want->dtype == TS_F32 && got->ndim == want->ndim &&
               got->data && want->data;
    for (int d = 0; same && d < got->ndim; d++)
        if (got->shape[d] != want->shape[d] && !(d == 0 && want->shape[0] <= got->shape[0]))
            same = 0;
    if (!same) {
        printf("%-34s shape/dtype MISMATCH: got %s, want %s\n", what, gs, ws);
        fflush(stdout);
        return 1;
    }
    int64_t n = 1;
    for (int d = 0; d < want->ndim; d++)
        n *= want->shape[d];
    char label[256];
    if (want->ndim > 0 && want->shape[0] < got->shape[0])
        snprintf(label, sizeof label, "%s[:%lld]", what, (long long)want->shape[0]);
    else
        snprintf(label, sizeof label, "%s", what);
    return ts_expect_close(label, got->data, want->data, n, rtol, atol);
}

int fixture_count_present(const uint32_t *x, int64_t n, const uint32_t *must, size_t n_must) {
    int found = 0;
    for (size_t k = 0; k < n_must; k++)
        for (int64_t i = 0; i < n; i++)
            if (x[i] == must[k]) {
                found++;
                break;
            }
    return found;
}
