/* npz.c -- NumPy's .npz archives: a zip of `<name>.npy` members, as written
 * by numpy.savez and numpy.savez_compressed. Read and written through
 * libarchive (stored or deflated members); each member through the .npy
 * parser. */
#include "core/core.h"
#include "io/atomic_file.h"
#include "io/npy.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <string.h>

struct ts_npz {
    char **names;
    ts_array *arrays;
    size_t n, cap;
};

void ts_npz_free(ts_npz *z) {
    if (!z) return;
    for (size_t i = 0; i < z->n; i++) {
        ts_free(z->names[i]);
        ts_npy_free(&z->arrays[i]);
    }
    ts_free(z->names);
    ts_free(z->arrays);
    ts_free(z);
}

size_t ts_npz_count(const ts_npz *z) { return z ? z->n : 0; }

const char *ts_npz_name(const ts_npz *z, size_t i) { return z && i < z->n ? z->names[i] : NULL; }

const ts_array *ts_npz_array(const ts_npz *z, size_t i) { return z && i < z->n ? &z->arrays[i] : NULL; }

const ts_array *ts_npz_find(const ts_npz *z, const char *name) {
    for (size_t i = 0; z && name && i < z->n; i++)
        if (strcmp(z->names[i], name) == 0) return &z->arrays[i];
    return NULL;
}

/* Adds member `entry` (its bytes in buf) as `name` without ".npy". */
static ts_status add_member(ts_npz *z, const char *entry, const uint8_t *buf, size_t n) {
    size_t len = strlen(entry);
    if (len < 5 || strcmp(entry + len - 4, ".npy") != 0)
        return ts_error(TS_ERR_FORMAT, "member '%s' is not a .npy array (an .npz holds only <name>.npy members)", entry);
    for (size_t i = 0; i < z->n; i++)
        if (strncmp(z->names[i], entry, len - 4) == 0 && z->names[i][len - 4] == '\0')
            return ts_error(TS_ERR_FORMAT, "member '%s' appears twice", entry);
    size_t cap = z->cap;
    if (ts_grow((void **)&z->names, &cap, z->n + 1, sizeof *z->names) ||
        ts_grow((void **)&z->arrays, &z->cap, z->n + 1, sizeof *z->arrays))
        return ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory reading member '%s'", entry);
    char *name = ts_malloc(len - 3);
    if (!name) return ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory reading member '%s'", entry);
    memcpy(name, entry, len - 4);
    name[len - 4] = '\0';
    ts_status s = ts_npy_parse(buf, n, &z->arrays[z->n]);
    if (s) {
        ts_free(name);
        return ts_error_wrap(s, "member '%s'", entry);
    }
    z->names[z->n++] = name;
    return TS_OK;
}

/* Reads every member of an open archive; sizes are bounded by what the
 * member header says and by what was actually inflated. */
static ts_status read_members(struct archive *a, ts_npz *z) {
    struct archive_entry *e;
    int r;
    while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
        const char *entry = archive_entry_pathname(e);
        if (!entry) return ts_error(TS_ERR_FORMAT, "a member has no name");
        if (archive_entry_filetype(e) == AE_IFDIR) continue;
        uint8_t *buf = NULL;
        size_t n = 0, cap = 0;
        for (;;) {
            if (ts_grow((void **)&buf, &cap, n + 65536, 1)) {
                ts_free(buf);
                return ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory reading member '%s'", entry);
            }
            la_ssize_t got = archive_read_data(a, buf + n, cap - n);
            if (got < 0) {
                ts_free(buf);
                return ts_error(TS_ERR_FORMAT, "member '%s': %s", entry, archive_error_string(a));
            }
            if (got == 0) break;
            n += (size_t)got;
        }
        ts_status s = add_member(z, entry, buf, n);
        ts_free(buf);
        if (s) return s;
    }
    if (r != ARCHIVE_EOF) return ts_error(TS_ERR_FORMAT, "%s", archive_error_string(a));
    return TS_OK;
}

ts_status ts_npz_load(const char *path, ts_npz **out) {
    if (!out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_npz_load: out is NULL");
    *out = NULL;
    if (!path || !*path) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_npz_load: a path is required");
    FILE *f = fopen(path, "rb"); /* for errno's word on a missing file */
    if (!f) return ts_error(TS_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    fclose(f);
    ts_npz *z = ts_calloc(1, sizeof *z);
    struct archive *a = archive_read_new();
    ts_status s = TS_OK;
    if (!z || !a) s = ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory opening %s", path);
    if (!s) {
        /* the seekable reader trusts the central directory: a truncated
         * archive is an error, not a shorter list */
        archive_read_support_format_zip_seekable(a);
        if (archive_read_open_filename(a, path, 65536) != ARCHIVE_OK)
            s = ts_error(TS_ERR_FORMAT, "not a .npz (zip) archive: %s", archive_error_string(a));
        else s = read_members(a, z);
    }
    if (a) archive_read_free(a);
    if (s) {
        ts_npz_free(z);
        return ts_error_wrap(s, "%s", path);
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
