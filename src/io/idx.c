/* idx.c -- reads IDX files (MNIST), gzip'd or plain, through zlib.
 *
 * Layout: magic 00 00 <type> <ndim>, then ndim big-endian u32 dims, then the
 * data. Only type 0x08 (u8) is read; that is all MNIST uses. The header is
 * checked before any data is allocated, so a corrupt header cannot make us
 * allocate more than TS_IDX_MAX_BYTES. */
#include "io/idx.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static const char *idx_type_name(uint8_t t) {
    switch (t) {
    case 0x09: return "i8";
    case 0x0B: return "i16";
    case 0x0C: return "i32";
    case 0x0D: return "f32";
    case 0x0E: return "f64";
    }
    return NULL;
}

/* Checks the 4 magic bytes; on success sets out->ndim. */
static ts_status check_magic(const uint8_t m[4], const char *name, ts_idx *out) {
    if (m[0] != 0 || m[1] != 0 || (m[2] != 0x08 && !idx_type_name(m[2]))) {
        if (m[0] == 0x1f && m[1] == 0x8b)
            return ts_error(TS_ERR_FORMAT, "%s: gzip data where an IDX header was expected "
                            "(compressed twice?)", name);
        return ts_error(TS_ERR_FORMAT, "%s: not an IDX file: magic 0x%02x%02x%02x%02x, expected "
                        "0x00000801 (labels) or 0x00000803 (images)", name, m[0], m[1], m[2], m[3]);
    }
    if (m[2] != 0x08)
        return ts_error(TS_ERR_UNSUPPORTED, "%s: IDX element type %s (0x%02x) is not supported; "
                        "only u8 (0x08) files such as MNIST are", name, idx_type_name(m[2]), m[2]);
    if (m[3] < 1 || m[3] > TS_IDX_MAX_DIMS)
        return ts_error(TS_ERR_FORMAT, "%s: IDX header has %d dimensions, expected 1 (labels) "
                        "or 3 (images)", name, m[3]);
    out->ndim = m[3];
    return TS_OK;
}

/* Decodes the dims and the data size they imply, refusing absurd sizes. */
static ts_status check_dims(const uint8_t *p, const char *name, ts_idx *out) {
    uint64_t size = 1;
    for (int i = 0; i < out->ndim; i++) {
        out->dims[i] = be32(p + 4 * i);
        size *= out->dims[i]; /* no overflow: size <= 2^32 before, dim < 2^32 */
        if (size > TS_IDX_MAX_BYTES)
            return ts_error(TS_ERR_FORMAT, "%s: IDX header claims more than %llu bytes of data "
                            "(dimension %d is %u): the header is corrupt", name,
                            (unsigned long long)TS_IDX_MAX_BYTES, i, out->dims[i]);
    }
    if (size > SIZE_MAX)
        return ts_error(TS_ERR_FORMAT, "%s: %llu bytes of data do not fit in memory", name,
                        (unsigned long long)size);
    out->size = (size_t)size;
    return TS_OK;
}

static void shape_text(const ts_idx *x, char *buf, size_t n) {
    if (x->ndim == 3)
        snprintf(buf, n, "%u x %u x %u", x->dims[0], x->dims[1], x->dims[2]);
    else if (x->ndim == 2)
        snprintf(buf, n, "%u x %u", x->dims[0], x->dims[1]);
    else
        snprintf(buf, n, "%u", x->dims[0]);
}

static ts_status truncated(const ts_idx *x, const char *name, size_t got) {
    char s[64];
    shape_text(x, s, sizeof s);
    return ts_error(TS_ERR_FORMAT, "%s is truncated: its header says %s = %zu bytes of data but "
                    "only %zu follow (re-download the file)", name, s, x->size, got);
}

ts_status ts_idx_parse(const uint8_t *bytes, size_t n, const char *name, ts_idx *out) {
    if (!out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_idx_parse: out is NULL");
    memset(out, 0, sizeof *out);
    if (!name) name = "IDX data";
    if (!bytes && n) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_idx_parse: bytes is NULL");
    if (n < 4)
        return ts_error(TS_ERR_FORMAT, "%s is truncated: %zu bytes, too short for an IDX header",
                        name, n);
    ts_status s = check_magic(bytes, name, out);
    if (s) return s;
    size_t hdr = 4 + 4 * (size_t)out->ndim;
    if (n < hdr)
        return ts_error(TS_ERR_FORMAT, "%s is truncated: %zu bytes, the IDX header needs %zu",
                        name, n, hdr);
    if ((s = check_dims(bytes + 4, name, out))) return s;
    if (n - hdr < out->size) return truncated(out, name, n - hdr);
    if (n - hdr > out->size)
        return ts_error(TS_ERR_FORMAT, "%s has %zu bytes after the %zu its header describes: "
                        "the header or the file is corrupt", name, n - hdr - out->size, out->size);
    out->data = ts_malloc(out->size);
    if (!out->data) return TS_ERR_OUT_OF_MEMORY;
    if (out->size) memcpy(out->data, bytes + hdr, out->size);
    return TS_OK;
}

/* Reads up to n bytes; *got says how many came. Errors of zlib (a corrupt or
 * cut gzip stream) are TS_ERR_FORMAT, errors of the OS are TS_ERR_IO. */
static ts_status gz_read(gzFile f, const char *path, void *buf, size_t n, size_t *got) {
    *got = 0;
    while (*got < n) {
        size_t want = n - *got;
        if (want > (size_t)1 << 30) want = (size_t)1 << 30;
        int r = gzread(f, (uint8_t *)buf + *got, (unsigned)want);
        if (r < 0) {
            int err = 0;
            const char *msg = gzerror(f, &err);
            if (err == Z_ERRNO)
                return ts_error(TS_ERR_IO, "cannot read %s: %s", path, strerror(errno));
            return ts_error(TS_ERR_FORMAT, "%s: corrupt or truncated gzip data (%s); "
                            "re-download the file", path, msg);
        }
        if (r == 0) break;
        *got += (size_t)r;
    }
    return TS_OK;
}

static ts_status read_file(gzFile f, const char *path, ts_idx *out) {
    uint8_t hdr[4 + 4 * TS_IDX_MAX_DIMS];
    size_t got;
    ts_status s = gz_read(f, path, hdr, 4, &got);
    if (s) return s;
    if (got < 4)
        return ts_error(TS_ERR_FORMAT, "%s is truncated: %zu bytes, too short for an IDX header",
                        path, got);
    if ((s = check_magic(hdr, path, out))) return s;
    size_t need = 4 * (size_t)out->ndim;
    if ((s = gz_read(f, path, hdr + 4, need, &got))) return s;
    if (got < need)
        return ts_error(TS_ERR_FORMAT, "%s is truncated: %zu bytes, the IDX header needs %zu",
                        path, 4 + got, 4 + need);
    if ((s = check_dims(hdr + 4, path, out))) return s;
    /* The header's size is a claim: the buffer grows (doubling from 1 MiB)
     * only as data actually arrives, so a short file claiming 4 GiB costs
     * at most twice what it holds. */
    size_t cap = 0, have = 0;
    while (have < out->size) {
        if (have == cap) {
            size_t next = cap ? (cap > out->size / 2 ? out->size : 2 * cap) : ((size_t)1 << 20);
            if (next > out->size) next = out->size;
            uint8_t *nd = ts_realloc(out->data, next);
            if (!nd) return TS_ERR_OUT_OF_MEMORY;
            out->data = nd;
            cap = next;
        }
        size_t want = cap - have;
        if ((s = gz_read(f, path, out->data + have, want, &got))) return s;
        have += got;
        if (got < want) break; /* the data ended */
    }
    if (have < out->size) return truncated(out, path, have);
    /* One more read: finds trailing bytes, and makes zlib check the CRC. */
    uint8_t extra;
    if ((s = gz_read(f, path, &extra, 1, &got))) return s;
    if (got)
        return ts_error(TS_ERR_FORMAT, "%s has more data than the %zu bytes its header "
                        "describes: the header or the file is corrupt", path, out->size);
    return TS_OK;
}

ts_status ts_idx_read(const char *path, ts_idx *out) {
    if (!out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_idx_read: out is NULL");
    memset(out, 0, sizeof *out);
    if (!path) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_idx_read: path is NULL");
    errno = 0;
    gzFile f = gzopen(path, "rb"); /* reads plain files too */
    if (!f)
        return ts_error(TS_ERR_IO, "cannot open %s: %s", path,
                        errno ? strerror(errno) : "out of memory");
    gzbuffer(f, 1 << 17);
    ts_status s = read_file(f, path, out);
    gzclose(f);
    if (s) ts_idx_free(out);
    return s;
}

void ts_idx_free(ts_idx *x) {
    if (!x) return;
    ts_free(x->data);
    memset(x, 0, sizeof *x);
}
