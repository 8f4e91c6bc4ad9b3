/* npz.c -- NumPy's .npz archives: a zip of `<name>.npy` members, as written
 * by numpy.savez and numpy.savez_compressed. Read and written through
 * libarchive (stored, deflated, bzip2 ... members). Archives are untrusted:
 * loading reads the directory alone, a member is inflated when asked for,
 * to exactly the size its .npy header declares, under
 * TS_LIMIT_ARCHIVE_BYTES. */
#include "core/core.h"
#include "core/atomic_file.h"
#include "io/npy.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

/* One `<name>.npy` member, as the archive's directory states it. */
typedef struct member {
    char *name;     /* without ".npy" */
    size_t pos;     /* its place among the archive's entries */
    int64_t stated; /* uncompressed bytes the directory states; -1: not stated */
    ts_array a;     /* once read */
    bool read;
    ts_status failed; /* a failure sticks: reading again says the same */
    char *why;
} member;

/* Members are inflated when first asked for: the directory alone is read
 * at load, so a missing array costs nothing and an unused one is never
 * inflated. */
struct ts_npz {
    char *path;
    int fd;
    struct archive *a; /* open on fd; the next header it gives is entry `next` */
    size_t next;
    member *m;
    size_t n, cap;
    uint64_t inflated; /* bytes inflated so far, against TS_LIMIT_ARCHIVE_BYTES */
};

void ts_npz_free(ts_npz *z) {
    if (!z) return;
    for (size_t i = 0; i < z->n; i++) {
        ts_free(z->m[i].name);
        ts_free(z->m[i].why);
        ts_npy_free(&z->m[i].a);
    }
    ts_free(z->m);
    if (z->a) archive_read_free(z->a);
    if (z->fd >= 0) close(z->fd);
    ts_free(z->path);
    ts_free(z);
}

size_t ts_npz_count(const ts_npz *z) { return z ? z->n : 0; }

const char *ts_npz_name(const ts_npz *z, size_t i) { return z && i < z->n ? z->m[i].name : NULL; }

static member *find_member(const ts_npz *z, const char *name) {
    for (size_t i = 0; z && name && i < z->n; i++)
        if (strcmp(z->m[i].name, name) == 0) return &z->m[i];
    return NULL;
}

int ts_npz_has(const ts_npz *z, const char *name) { return find_member(z, name) != NULL; }

/* (Re)starts reading the archive from its first entry. */
static ts_status open_archive(ts_npz *z) {
    if (z->a) archive_read_free(z->a);
    z->next = 0;
    z->a = archive_read_new();
    if (!z->a) return ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory opening %s", z->path);
    if (lseek(z->fd, 0, SEEK_SET) != 0) return ts_error(TS_ERR_IO, "cannot read %s: %s", z->path, strerror(errno));
    /* the seekable reader trusts the central directory: a truncated
     * archive is an error, not a shorter list; skipping a member seeks
     * past it, nothing is inflated */
    archive_read_support_format_zip_seekable(z->a);
    if (archive_read_open_fd(z->a, z->fd, 65536) != ARCHIVE_OK)
        return ts_error(TS_ERR_FORMAT, "%s is not a .npz (zip) archive: %s", z->path, archive_error_string(z->a));
    return TS_OK;
}

/* Adds entry `entry` (number pos, stated size `stated` or -1) as `name`
 * without ".npy". */
static ts_status add_member(ts_npz *z, const char *entry, size_t pos, int64_t stated) {
    size_t len = strlen(entry);
    if (len < 5 || strcmp(entry + len - 4, ".npy") != 0)
        return ts_error(TS_ERR_FORMAT, "member '%s' is not a .npy array (an .npz holds only <name>.npy members)", entry);
    for (size_t i = 0; i < z->n; i++)
        if (strncmp(z->m[i].name, entry, len - 4) == 0 && z->m[i].name[len - 4] == '\0')
            return ts_error(TS_ERR_FORMAT, "member '%s' appears twice", entry);
    if (ts_grow((void **)&z->m, &z->cap, z->n + 1, sizeof *z->m))
        return ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory reading member '%s'", entry);
    char *name = ts_malloc(len - 3);
    if (!name) return ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory reading member '%s'", entry);
    memcpy(name, entry, len - 4);
    name[len - 4] = '\0';
    z->m[z->n++] = (member){.name = name, .pos = pos, .stated = stated};
    return TS_OK;
}

/* The names and stated sizes of every member; nothing is inflated. */
static ts_status read_directory(ts_npz *z) {
    struct archive_entry *e;
    int r;
    while ((r = archive_read_next_header(z->a, &e)) == ARCHIVE_OK) {
        size_t pos = z->next++;
        const char *entry = archive_entry_pathname(e);
        if (!entry) return ts_error(TS_ERR_FORMAT, "a member has no name");
        if (archive_entry_filetype(e) == AE_IFDIR) continue;
        ts_status s = add_member(z, entry, pos, archive_entry_size_is_set(e) ? archive_entry_size(e) : -1);
        if (s) return s;
    }
    if (r != ARCHIVE_EOF) return ts_error(TS_ERR_FORMAT, "%s", archive_error_string(z->a));
    return TS_OK;
}

/* Up to n bytes of the current member into buf: *got < n at its end. */
static ts_status inflate(ts_npz *z, void *buf, size_t n, size_t *got) {
    *got = 0;
    while (*got < n) {
        la_ssize_t k = archive_read_data(z->a, (uint8_t *)buf + *got, n - *got);
        if (k < 0) return ts_error(TS_ERR_FORMAT, "%s", archive_error_string(z->a));
        if (k == 0) break;
        *got += (size_t)k;
    }
    return TS_OK;
}

/* Inflates member m: its .npy header first, then exactly the data that
 * header declares, once the declared size is checked against the
 * archive's directory and TS_LIMIT_ARCHIVE_BYTES. */
static ts_status inflate_member(ts_npz *z, member *m) {
    ts_status s = TS_OK;
    if (m->pos < z->next && (s = open_archive(z))) return s;
    struct archive_entry *e;
    while (z->next <= m->pos) {
        if (archive_read_next_header(z->a, &e) != ARCHIVE_OK)
            return ts_error(TS_ERR_FORMAT, "cannot find it again (did the file change?): %s", archive_error_string(z->a));
        z->next++;
    }
    uint8_t pre[TS_NPY_PREFIX_MAX];
    size_t npre, len, got;
    if ((s = inflate(z, pre, sizeof pre, &npre)) || (s = ts_npy_header_len(pre, npre, &len))) return s;
    uint8_t *hdr = ts_malloc(len); /* at most 1 MiB: ts_npy_header_len caps it */
    if (!hdr) return TS_ERR_OUT_OF_MEMORY;
    memcpy(hdr, pre, npre);
    if (!(s = inflate(z, hdr + npre, len - npre, &got)) && npre + got < len)
        s = ts_error(TS_ERR_FORMAT, "truncated: %zu bytes, the .npy header needs %zu", npre + got, len);
    ts_npy_header h;
    if (!s) s = ts_npy_header_parse(hdr, len, &h);
    ts_free(hdr);
    if (s) return s;
    uint64_t total, need;
    if (__builtin_add_overflow((uint64_t)len, (uint64_t)h.data_bytes, &total) || (m->stated >= 0 && total != (uint64_t)m->stated))
        return ts_error(TS_ERR_FORMAT, "its .npy header declares %zu bytes of data (%llu with the header) but the archive states %lld: "
                        "the member is corrupt", h.data_bytes, (unsigned long long)total, (long long)m->stated);
    if (__builtin_add_overflow(z->inflated, total, &need)) need = UINT64_MAX;
    if (need > ts_get_limit(TS_LIMIT_ARCHIVE_BYTES)) {
        char what[128] = "inflating it";
        if (z->inflated)
            snprintf(what, sizeof what, "inflating it (after %llu bytes inflated from the archive before it)", (unsigned long long)z->inflated);
        return ts_limit_exceeded(TS_LIMIT_ARCHIVE_BYTES, what, need);
    }
    void *data = ts_malloc(h.data_bytes ? h.data_bytes : 1);
    if (!data) return ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory for its %zu bytes", h.data_bytes);
    uint8_t more;
    size_t extra = 0;
    s = inflate(z, data, h.data_bytes, &got);
    if (!s && got < h.data_bytes)
        s = ts_error(TS_ERR_FORMAT, "truncated: the .npy header declares %zu bytes of data but only %zu follow", h.data_bytes, got);
    /* one byte past the end: more data is an error, and reading to the end
     * lets the archive check the member's CRC */
    if (!s && !(s = inflate(z, &more, 1, &extra)) && extra)
        s = ts_error(TS_ERR_FORMAT, "more data follows the %zu bytes its .npy header declares: the member is corrupt", h.data_bytes);
    if (s) {
        ts_free(data);
        return s;
    }
    z->inflated += total;
    return ts_npy_take(&h, data, &m->a);
}

ts_status ts_npz_get(const ts_npz *cz, const char *name, const ts_array **out) {
    if (!out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_npz_get: out is NULL");
    *out = NULL;
    if (!cz || !name) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_npz_get: archive or name is NULL");
    ts_npz *z = (ts_npz *)cz; /* reading on first use changes only what the archive caches */
    member *m = find_member(z, name);
    if (!m) return ts_error(TS_ERR_NOT_FOUND, "%s has no array '%s'", z->path, name);
    if (m->failed) return ts_error(m->failed, "%s", m->why ? m->why : "reading failed before");
    if (!m->read) {
        ts_status s = inflate_member(z, m);
        if (s) {
            s = ts_error_wrap(s, "%s: member '%s.npy'", z->path, m->name);
            m->failed = s;
            m->why = ts_strdup(ts_last_error());
            z->next = SIZE_MAX; /* mid-member: start again for the next one */
            return s;
        }
        m->read = true;
    }
    *out = &m->a;
    return TS_OK;
}

const ts_array *ts_npz_array(const ts_npz *z, size_t i) {
    const ts_array *a = NULL;
    if (z && i < z->n) (void)ts_npz_get(z, z->m[i].name, &a);
    return a;
}

const ts_array *ts_npz_find(const ts_npz *z, const char *name) {
    const ts_array *a = NULL;
    if (find_member(z, name)) (void)ts_npz_get(z, name, &a);
    return a;
}

/* A zip archive of no members: its end-of-central-directory record
 * alone (22 bytes, no comment), which the archive reader does not take
 * for a zip archive. */
static bool empty_zip(int fd, uint64_t size) {
    uint8_t b[22];
    if (size != sizeof b || pread(fd, b, sizeof b, 0) != (ssize_t)sizeof b) return false;
    static const uint8_t eocd[4] = {'P', 'K', 5, 6};
    for (size_t i = 4; i < sizeof b; i++)
        if (b[i]) return false;
    return memcmp(b, eocd, sizeof eocd) == 0;
}

ts_status ts_npz_load(const char *path, ts_npz **out) {
    if (!out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_npz_load: out is NULL");
    *out = NULL;
    if (!path || !*path) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_npz_load: a path is required");
    ts_npz *z = ts_calloc(1, sizeof *z);
    if (!z) return ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory opening %s", path);
    z->fd = -1;
    uint64_t size;
    ts_status s = ts_file_open_read(path, ".npz archive", &z->fd, &size);
    if (!s && !(z->path = ts_strdup(path))) s = ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory opening %s", path);
    if (!s && empty_zip(z->fd, size)) { /* numpy's np.savez() of no arrays: no member to read */
        *out = z;
        return TS_OK;
    }
    if (!s) s = open_archive(z);
    if (!s && (s = read_directory(z))) s = ts_error_wrap(s, "%s", path);
    if (s) {
        ts_npz_free(z);
        return s;
    }
    *out = z;
    return TS_OK;
}

ts_status ts_npz_save(const char *path, const char *const *names, const ts_array *arrays, size_t n) {
    if (!path || !*path) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_npz_save: a path is required");
    if (n && (!names || !arrays)) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_npz_save %s: names or arrays is NULL", path);
    for (size_t i = 0; i < n; i++) {
        if (!names[i] || !*names[i] || strlen(names[i]) > 4000)
            return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_npz_save %s: array %zu needs a name", path, i);
        for (size_t j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0)
                return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_npz_save %s: the name '%s' is given twice", path, names[i]);
    }
    ts_atomic_file af;
    ts_status s = ts_atomic_open(&af, path);
    if (s) return s;
    struct archive *a = archive_write_new();
    if (!a) {
        ts_atomic_abort(&af);
        return ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory writing %s", path);
    }
    archive_write_set_format_zip(a);
    archive_write_zip_set_compression_store(a);
    archive_write_set_bytes_in_last_block(a, 1); /* no padding to 10 KiB blocks */
    if (archive_write_open_FILE(a, af.f) != ARCHIVE_OK)
        s = ts_error(TS_ERR_IO, "cannot write %s: %s", path, archive_error_string(a));
    for (size_t i = 0; i < n && !s; i++) {
        char hdr[TS_NPY_HEADER_MAX], entry[4100];
        size_t hl, bytes;
        s = ts_npy_header_for(path, &arrays[i], hdr, sizeof hdr, &hl, &bytes);
        if (s) break;
        snprintf(entry, sizeof entry, "%s.npy", names[i]);
        struct archive_entry *e = archive_entry_new();
        if (!e) {
            s = ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory writing %s", path);
            break;
        }
        archive_entry_set_pathname(e, entry);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, (la_int64_t)(hl + bytes));
        if (archive_write_header(a, e) != ARCHIVE_OK || archive_write_data(a, hdr, hl) != (la_ssize_t)hl ||
            (bytes && archive_write_data(a, arrays[i].data, bytes) != (la_ssize_t)bytes))
            s = ts_error(TS_ERR_IO, "cannot write %s (member %s): %s", path, entry, archive_error_string(a));
        archive_entry_free(e);
    }
    if (!s && archive_write_close(a) != ARCHIVE_OK)
        s = ts_error(TS_ERR_IO, "cannot write %s: %s", path, archive_error_string(a));
    archive_write_free(a);
    if (s) {
        ts_atomic_abort(&af);
        return s;
    }
    return ts_atomic_commit(&af);
}
