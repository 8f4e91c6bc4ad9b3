/* npy.c -- NumPy's .npy format, by hand (it is a tiny header).
 *
 * Layout: "\x93NUMPY", major, minor, header length (u16 LE in 1.0, u32 LE in
 * 2.0/3.0), then a Python dict literal such as
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (4, 100), }
 * padded with spaces and ended by '\n' so the data is 64-byte aligned, then
 * the raw little-endian data in C order. We write 1.0 and read 1.0-3.0. */
#include "io/npy.h"
#include "core/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
/* Headers are a few dozen bytes; a corrupt length must not allocate much. */
#define NPY_MAX_HEADER ((size_t)1 << 20)

static const struct {
    ts_dtype dtype;
    const char *descr;
} npy_types[] = {
    {TS_F32, "<f4"}, {TS_F64, "<f8"}, {TS_I32, "<i4"}, {TS_I64, "<i8"}, {TS_U8, "|u1"},
};
/* The dtypes of typed outputs, written as themselves (reading widens them). */
static const struct {
    ts_dtype dtype;
    const char *descr;
} npy_written[] = {
    {TS_BOOL, "|b1"}, {TS_I8, "|i1"}, {TS_I16, "<i2"}, {TS_U16, "<u2"}, {TS_U32, "<u4"}, {TS_U64, "<u8"}, {TS_F16, "<f2"},
};

static bool host_little_endian(void) {
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

static bool valid_dtype(ts_dtype t) { return ts_dtype_size(t) != 0; }

/* ------------------------------------------------------------- reading */

ts_status ts_npy_header_len(const uint8_t *b, size_t n, size_t *len) {
    size_t m = n < NPY_MAGIC_LEN ? n : NPY_MAGIC_LEN;
    if (memcmp(b, NPY_MAGIC, m) != 0)
        return ts_error(TS_ERR_FORMAT, "not a .npy file (it does not start with \\x93NUMPY)");
    if (n < 10)
        return ts_error(TS_ERR_FORMAT, "truncated: %zu bytes, too short for a .npy preamble", n);
    uint8_t major = b[6], minor = b[7];
    if (major < 1 || major > 3 || minor != 0)
        return ts_error(TS_ERR_FORMAT, ".npy format version %u.%u is not one of 1.0, 2.0, 3.0",
                        major, minor);
    uint64_t hl, prefix;
    if (major == 1) {
        hl = (uint64_t)b[8] | (uint64_t)b[9] << 8;
        prefix = 10;
    } else {
        if (n < 12)
            return ts_error(TS_ERR_FORMAT, "truncated: %zu bytes, too short for a .npy %u.0 "
                            "preamble", n, major);
        hl = (uint64_t)b[8] | (uint64_t)b[9] << 8 | (uint64_t)b[10] << 16 | (uint64_t)b[11] << 24;
        prefix = 12;
    }
    if (prefix + hl < TS_NPY_PREFIX_MAX)
        return ts_error(TS_ERR_FORMAT, ".npy header length %llu is too short to hold the "
                        "header dict (the file is corrupt)", (unsigned long long)hl);
    if (hl > NPY_MAX_HEADER)
        return ts_error(TS_ERR_FORMAT, ".npy header length %llu is absurd (the file is corrupt)",
                        (unsigned long long)hl);
    *len = (size_t)(prefix + hl);
    return TS_OK;
}

/* A cursor over the header dict text. */
typedef struct {
    const char *p, *end;
} npy_cursor;

static void skip_ws(npy_cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static bool eat(npy_cursor *c, char ch) {
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

static bool peek(npy_cursor *c, char ch) {
    skip_ws(c);
    return c->p < c->end && *c->p == ch;
}

/* A quoted Python string without escapes, into buf. */
static bool parse_str(npy_cursor *c, char *buf, size_t n) {
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return false;
    char q = *c->p++;
    size_t k = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || k + 1 >= n) return false;
        buf[k++] = *c->p++;
    }
    if (c->p >= c->end) return false;
    c->p++;
    buf[k] = '\0';
    return true;
}

static bool parse_word(npy_cursor *c, const char *w) {
    skip_ws(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n) != 0) return false;
    c->p += n;
    return true;
}

/* A non-negative integer (Python 2 NumPy wrote "3L"). */
static bool parse_dim(npy_cursor *c, int64_t *v) {
    skip_ws(c);
    if (c->p >= c->end || *c->p < '0' || *c->p > '9') return false;
    int64_t x = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        int d = *c->p++ - '0';
        if (x > (INT64_MAX - d) / 10) return false;
        x = x * 10 + d;
    }
    if (c->p < c->end && *c->p == 'L') c->p++;
    *v = x;
    return true;
}

static ts_status parse_descr(npy_cursor *c, ts_npy_header *h) {
    if (peek(c, '['))
        return ts_error(TS_ERR_UNSUPPORTED, ".npy file holds a structured dtype; only plain "
                        "<f4, <f8, <i4, <i8 and |u1 arrays are supported");
    char d[32];
    if (!parse_str(c, d, sizeof d))
        return ts_error(TS_ERR_FORMAT, "corrupt .npy header: 'descr' is not a quoted string");
    for (size_t i = 0; i < TS_ARRAY_LEN(npy_types); i++)
        if (strcmp(d, npy_types[i].descr) == 0) {
            h->dtype = npy_types[i].dtype;
            return TS_OK;
        }
    /* byte order does not apply to one-byte values */
    if (strlen(d) == 3 && strchr("<>=", d[0]) && strcmp(d + 1, "u1") == 0) {
        h->dtype = TS_U8;
        return TS_OK;
    }
    /* narrower types NumPy writes, widened as they are read */
    static const struct {
        const char *descr;
        ts_dtype dtype;
        char widen;
        size_t size;
    } narrow[] = {{"<f2", TS_F32, 'h', 2}, {"|i1", TS_I32, 'b', 1}, {"|b1", TS_U8, 'b', 1}, {"<i2", TS_I32, 's', 2},
                  {"<u2", TS_I32, 'S', 2}, {"<u4", TS_I64, 'U', 4}, {"<u8", TS_I64, 'Q', 8}};
    for (size_t i = 0; i < TS_ARRAY_LEN(narrow); i++)
        if (strcmp(d, narrow[i].descr) == 0) {
            h->dtype = narrow[i].dtype;
            h->widen = narrow[i].widen;
            h->file_size = narrow[i].size;
            return TS_OK;
        }
    if (d[0] == '>')
        return ts_error(TS_ERR_UNSUPPORTED, ".npy dtype '%s' is big-endian; convert it with "
                        "a.astype(a.dtype.newbyteorder('<'))", d);
    return ts_error(TS_ERR_UNSUPPORTED, ".npy dtype '%s' is not supported; use one of <f2, <f4, <f8, "
                    "|i1, <i2, <i4, <i8, |u1, <u2, <u4, <u8, |b1", d);
}

static ts_status parse_shape(npy_cursor *c, ts_npy_header *h) {
    if (!eat(c, '('))
        return ts_error(TS_ERR_FORMAT, "corrupt .npy header: 'shape' is not a tuple");
    h->ndim = 0;
    while (!eat(c, ')')) {
        int64_t v;
        if (!parse_dim(c, &v))
            return ts_error(TS_ERR_FORMAT, "corrupt .npy header: 'shape' holds something other "
                            "than non-negative integers");
        if (h->ndim == TS_MAX_DIMS)
            return ts_error(TS_ERR_UNSUPPORTED, ".npy array has more than %d dimensions, the "
                            "most a ts_array holds", TS_MAX_DIMS);
        h->shape[h->ndim++] = v;
        if (!eat(c, ',') && !peek(c, ')'))
            return ts_error(TS_ERR_FORMAT, "corrupt .npy header: 'shape' tuple is malformed");
    }
    return TS_OK;
}

static ts_status parse_dict(npy_cursor *c, ts_npy_header *h) {
    enum { DESCR = 1, FORTRAN = 2, SHAPE = 4 };
    int seen = 0;
    if (!eat(c, '{'))
        return ts_error(TS_ERR_FORMAT, "corrupt .npy header: it is not a dict literal");
    while (!eat(c, '}')) {
        char key[32];
        if (!parse_str(c, key, sizeof key) || !eat(c, ':'))
            return ts_error(TS_ERR_FORMAT, "corrupt .npy header: expected 'key': value");
        int which = strcmp(key, "descr") == 0           ? DESCR
                    : strcmp(key, "fortran_order") == 0 ? FORTRAN
                    : strcmp(key, "shape") == 0         ? SHAPE
                                                        : 0;
        if (!which)
            return ts_error(TS_ERR_FORMAT, "corrupt .npy header: unknown key '%s'", key);
        if (seen & which)
            return ts_error(TS_ERR_FORMAT, "corrupt .npy header: key '%s' appears twice", key);
        seen |= which;
        ts_status s = TS_OK;
        if (which == DESCR) {
            s = parse_descr(c, h);
        } else if (which == SHAPE) {
            s = parse_shape(c, h);
        } else if (parse_word(c, "True")) {
            s = ts_error(TS_ERR_UNSUPPORTED, ".npy array is in Fortran order; save it in C "
                         "order (np.save(f, np.ascontiguousarray(a)))");
        } else if (!parse_word(c, "False")) {
            s = ts_error(TS_ERR_FORMAT, "corrupt .npy header: 'fortran_order' is not True "
                         "or False");
        }
        if (s) return s;
        if (!eat(c, ',') && !peek(c, '}'))
            return ts_error(TS_ERR_FORMAT, "corrupt .npy header: expected ',' or '}' after "
                            "'%s'", key);
    }
    skip_ws(c);
    if (c->p != c->end)
        return ts_error(TS_ERR_FORMAT, "corrupt .npy header: text after the closing '}'");
    if (seen != (DESCR | FORTRAN | SHAPE))
        return ts_error(TS_ERR_FORMAT, "corrupt .npy header: missing '%s'",
                        !(seen & DESCR) ? "descr" : !(seen & FORTRAN) ? "fortran_order" : "shape");
    return TS_OK;
}

ts_status ts_npy_header_parse(const uint8_t *b, size_t n, ts_npy_header *h) {
    memset(h, 0, sizeof *h);
    size_t len = 0;
    ts_status s = ts_npy_header_len(b, n, &len);
    if (s) return s;
    if (n < len)
        return ts_error(TS_ERR_FORMAT, "truncated: %zu bytes, the .npy header needs %zu", n, len);
    size_t prefix = b[6] == 1 ? 10 : 12;
    npy_cursor c = {(const char *)b + prefix, (const char *)b + len};
    if ((s = parse_dict(&c, h))) return s;
    ts_array a = {.dtype = h->dtype, .ndim = h->ndim};
    memcpy(a.shape, h->shape, sizeof a.shape);
    int64_t numel = ts_array_numel(&a);
    size_t esize = h->widen ? h->file_size : ts_dtype_size(h->dtype);
    if (numel < 0 || (uint64_t)numel > SIZE_MAX / esize / 8)
        return ts_error(TS_ERR_FORMAT, "corrupt .npy header: its shape has too many elements");
    h->data_offset = len;
    h->data_bytes = (size_t)numel * esize;
    if (!host_little_endian())
        return ts_error(TS_ERR_UNSUPPORTED, ".npy reading needs a little-endian host");
    return TS_OK;
}

/* The data must fill the rest of the input exactly. */
static ts_status check_data_size(const ts_npy_header *h, uint64_t have) {
    if (have == h->data_bytes) return TS_OK;
    ts_array a = {.dtype = h->dtype, .ndim = h->ndim};
    memcpy(a.shape, h->shape, sizeof a.shape);
    char shape[128];
    ts_array_shape_str(&a, shape, sizeof shape);
    if (have < h->data_bytes)
        return ts_error(TS_ERR_FORMAT, "truncated: the header says %s = %zu bytes of data but "
                        "only %llu follow", shape, h->data_bytes, (unsigned long long)have);
    return ts_error(TS_ERR_FORMAT, "%llu bytes follow the %zu bytes of data of %s: the header "
                    "or the file is corrupt", (unsigned long long)(have - h->data_bytes),
                    h->data_bytes, shape);
}

static void set_out(const ts_npy_header *h, void *data, ts_array *out) {
    out->dtype = h->dtype;
    out->ndim = h->ndim;
    memcpy(out->shape, h->shape, sizeof out->shape);
    out->data = data;
}

/* The file's narrower elements at src as h->dtype, into a new buffer. */
static void *widen(const ts_npy_header *h, const uint8_t *src) {
    size_t n = h->data_bytes / h->file_size;
    void *dst = ts_malloc(n ? n * ts_dtype_size(h->dtype) : 1);
    if (!dst) return NULL;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = src + i * h->file_size;
        if (h->widen == 'Q') { /* u64 below 2^63 (ts_npy_take checked) */
            uint64_t q = 0;
            for (int k = 7; k >= 0; k--) q = q << 8 | p[k];
            ((int64_t *)dst)[i] = (int64_t)q;
            continue;
        }
        uint32_t u = p[0] | (h->file_size > 1 ? (uint32_t)p[1] << 8 : 0);
        if (h->file_size == 4) u |= (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        switch (h->widen) {
        case 'h': { /* IEEE half */
            int e = (int)(u >> 10) & 0x1f, m = (int)(u & 0x3ff);
            float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 0x400), e - 25);
            ((float *)dst)[i] = (u & 0x8000) ? -v : v;
            break;
        }
        case 'b':
            if (h->dtype == TS_U8) ((uint8_t *)dst)[i] = p[0] != 0;
            else ((int32_t *)dst)[i] = (int8_t)p[0];
            break;
        case 's': ((int32_t *)dst)[i] = (int16_t)u; break;
        case 'S': ((int32_t *)dst)[i] = (int32_t)u; break;
        default: ((int64_t *)dst)[i] = u; break;
        }
    }
    return dst;
}

static ts_status parse(const uint8_t *b, size_t n, ts_array *out) {
    ts_npy_header h;
    ts_status s = ts_npy_header_parse(b, n, &h);
    if (!s) s = check_data_size(&h, n - h.data_offset);
    if (s) return s;
    void *data = ts_malloc(h.data_bytes ? h.data_bytes : 1);
    if (!data) return TS_ERR_OUT_OF_MEMORY;
    if (h.data_bytes) memcpy(data, b + h.data_offset, h.data_bytes);
    return ts_npy_take(&h, data, out);
}

ts_status ts_npy_parse(const void *bytes, size_t n, ts_array *out) {
    if (!out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_npy_parse: out is NULL");
    memset(out, 0, sizeof *out);
    if (!bytes && n) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_npy_parse: bytes is NULL");
    if (!bytes) bytes = "";
    ts_status s = parse(bytes, n, out);
    return s ? ts_error_wrap(s, ".npy data") : TS_OK;
}

static ts_status read_exact(FILE *f, void *buf, size_t n, size_t *got) {
    *got = fread(buf, 1, n, f);
    if (*got < n && ferror(f)) return ts_error(TS_ERR_IO, "read failed: %s", strerror(errno));
    return TS_OK;
}

/* The first u64 element at or above 2^63 (an i64 cannot hold it), or -1. */
static int64_t u64_too_big(const ts_npy_header *h, const uint8_t *src) {
    size_t n = h->data_bytes / 8;
    for (size_t i = 0; i < n; i++)
        if (src[i * 8 + 7] & 0x80) return (int64_t)i;
    return -1;
}

ts_status ts_npy_take(const ts_npy_header *h, void *data, ts_array *out) {
    int64_t big = h->widen == 'Q' ? u64_too_big(h, data) : -1;
    if (big >= 0) {
        ts_free(data);
        return ts_error(TS_ERR_UNSUPPORTED, ".npy uint64 element %lld is 2^63 or more, which an "
                        "i64 (the type uint64 arrays are read as) cannot hold; use values below 2^63",
                        (long long)big);
    }
    if (h->widen) {
        void *wide = widen(h, data);
        ts_free(data);
        if (!wide) return ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory widening %zu bytes of .npy data", h->data_bytes);
        data = wide;
    }
    set_out(h, data, out);
    return TS_OK;
}

static ts_status load(FILE *f, uint64_t size, ts_array *out) {
    uint8_t pre[TS_NPY_PREFIX_MAX];
    size_t npre, got, len;
    ts_status s = read_exact(f, pre, sizeof pre, &npre);
    if (s || (s = ts_npy_header_len(pre, npre, &len))) return s;
    if (len > size)
        return ts_error(TS_ERR_FORMAT, "truncated: %llu bytes, the .npy header needs %zu", (unsigned long long)size, len);
    uint8_t *hdr = ts_malloc(len); /* len >= sizeof pre: no data bytes in pre */
    if (!hdr) return TS_ERR_OUT_OF_MEMORY;
    memcpy(hdr, pre, npre);
    if (!(s = read_exact(f, hdr + npre, len - npre, &got)) && npre + got < len)
        s = ts_error(TS_ERR_FORMAT, "truncated: %zu bytes, the .npy header needs %zu",
                     npre + got, len);
    ts_npy_header h;
    if (!s) s = ts_npy_header_parse(hdr, len, &h);
    ts_free(hdr);
    /* Check the size before allocating what a corrupt header claims. */
    if (s || (s = check_data_size(&h, size - len))) return s;
    void *data = ts_malloc(h.data_bytes ? h.data_bytes : 1);
    if (!data) return TS_ERR_OUT_OF_MEMORY;
    s = read_exact(f, data, h.data_bytes, &got);
    if (!s) s = check_data_size(&h, got + (got == h.data_bytes && fgetc(f) != EOF));
    if (s) {
        ts_free(data);
        return s;
    }
    return ts_npy_take(&h, data, out);
}

ts_status ts_npy_load(const char *path, ts_array *out) {
    if (!out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_npy_load: out is NULL");
    memset(out, 0, sizeof *out);
    if (!path) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_npy_load: path is NULL");
    FILE *f;
    uint64_t size;
    ts_status s = ts_file_fopen_read(path, ".npy file", &f, &size);
    if (s) return s;
    s = load(f, size, out);
    fclose(f);
    return s ? ts_error_wrap(s, "%s", path) : TS_OK;
}

void ts_npy_free(ts_array *a) {
    if (!a) return;
    ts_free(a->data);
    a->data = NULL;
}

/* ------------------------------------------------------------- writing */

/* Preamble + dict + padding + '\n' into buf; returns its length (a multiple
 * of TS_NPY_ALIGN) or 0 if it does not fit. */
static size_t build_header(const ts_array *a, char *buf, size_t cap) {
    const char *descr = NULL;
    for (size_t i = 0; i < TS_ARRAY_LEN(npy_types); i++)
        if (npy_types[i].dtype == a->dtype) descr = npy_types[i].descr;
    for (size_t i = 0; i < TS_ARRAY_LEN(npy_written); i++)
        if (npy_written[i].dtype == a->dtype) descr = npy_written[i].descr;
    char shape[TS_MAX_DIMS * 24 + 4];
    size_t k = 0;
    shape[k++] = '(';
    for (int i = 0; i < a->ndim; i++)
        k += (size_t)snprintf(shape + k, sizeof shape - k, i ? ", %lld" : "%lld",
                              (long long)a->shape[i]);
    if (a->ndim == 1) shape[k++] = ','; /* Python's one-element tuple */
    shape[k++] = ')';
    shape[k] = '\0';
    int w = snprintf(buf + 10, cap - 10, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                     descr, shape);
    if (w < 0) return 0;
    size_t total = 10 + (size_t)w + 1;
    total = (total + TS_NPY_ALIGN - 1) / TS_NPY_ALIGN * TS_NPY_ALIGN;
    if (total > cap || total - 10 > UINT16_MAX) return 0;
    memset(buf + 10 + w, ' ', total - 10 - (size_t)w - 1);
    buf[total - 1] = '\n';
    memcpy(buf, NPY_MAGIC, NPY_MAGIC_LEN);
    buf[6] = 1;
    buf[7] = 0;
    buf[8] = (char)((total - 10) & 0xff);
    buf[9] = (char)((total - 10) >> 8);
    return total;
}

ts_status ts_npy_header_for(const char *path, const ts_array *a, char *hdr, size_t cap, size_t *hdr_len,
                            size_t *data_bytes) {
    if (!path || !a) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_npy_save: path or array is NULL");
    if (!valid_dtype(a->dtype))
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_npy_save %s: unknown dtype %d", path,
                        (int)a->dtype);
    int64_t numel = ts_array_numel(a);
    if (numel < 0)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_npy_save %s: invalid shape (rank %d, "
                        "negative or overflowing dims)", path, a->ndim);
    if (numel > 0 && !a->data)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_npy_save %s: array data is NULL", path);
    if ((uint64_t)numel > SIZE_MAX / ts_dtype_size(a->dtype))
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_npy_save %s: array too large", path);
    if (!host_little_endian())
        return ts_error(TS_ERR_UNSUPPORTED, ".npy writing needs a little-endian host");
    *hdr_len = build_header(a, hdr, cap);
    if (!*hdr_len) return ts_error(TS_ERR_INTERNAL, "ts_npy_save %s: header does not fit", path);
    *data_bytes = (size_t)numel * ts_dtype_size(a->dtype);
    return TS_OK;
}

ts_status ts_npy_save(const char *path, const ts_array *a) {
    char hdr[TS_NPY_HEADER_MAX];
    size_t hl, bytes;
    ts_status s = ts_npy_header_for(path, a, hdr, sizeof hdr, &hl, &bytes);
    if (s) return s;
    ts_atomic_file af;
    s = ts_atomic_open(&af, path);
    if (s) return s;
    if (fwrite(hdr, 1, hl, af.f) != hl || (bytes && fwrite(a->data, 1, bytes, af.f) != bytes)) {
        s = ts_error(TS_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        ts_atomic_abort(&af);
        return s;
    }
    return ts_atomic_commit(&af);
}
