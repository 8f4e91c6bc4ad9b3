/* npz.c -- NumPy .npz archives: every member is a .npy file, parsed with the
 * project's .npy reader; libarchive reads the zip container (stored or
 * deflated, as np.savez and np.savez_compressed write it). */
#include "io/npz.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <string.h>

#define NPZ_MAX_MEMBER ((int64_t)1 << 34)

void ts_npz_free(ts_npz *z) {
    if (!z) return;
    for (size_t i = 0; i < z->n; i++) {
        ts_free(z->e[i].name);
        ts_npy_free(&z->e[i].array);
    }
    ts_free(z->e);
    memset(z, 0, sizeof *z);
}

const ts_array *ts_npz_get(const ts_npz *z, const char *name) {
    for (size_t i = 0; z && i < z->n; i++)
        if (strcmp(z->e[i].name, name) == 0) return &z->e[i].array;
    return NULL;
}

/* Reads the current member whole into a buffer. */
static ts_status read_member(struct archive *a, const char *path, const char *name, int64_t size, uint8_t **out, size_t *n) {
    if (size < 0 || size > NPZ_MAX_MEMBER)
        return ts_error(TS_ERR_FORMAT, "%s: member %s claims %lld bytes (corrupt archive?)", path, name, (long long)size);
    size_t cap = (size_t)size + 1, used = 0;
    uint8_t *b = ts_malloc(cap);
    if (!b) return TS_ERR_OUT_OF_MEMORY;
    for (;;) {
        if (used == cap) {
            if (cap > (size_t)NPZ_MAX_MEMBER) {
                ts_free(b);
                return ts_error(TS_ERR_FORMAT, "%s: member %s is larger than it claims", path, name);
            }
            uint8_t *nb = ts_realloc(b, cap * 2);
            if (!nb) {
                ts_free(b);
                return TS_ERR_OUT_OF_MEMORY;
            }
            b = nb;
            cap *= 2;
        }
        la_ssize_t got = archive_read_data(a, b + used, cap - used);
        if (got < 0) {
            ts_status st = ts_error(TS_ERR_FORMAT, "%s: member %s cannot be read: %s (corrupt or truncated archive)", path, name,
                                    archive_error_string(a));
            ts_free(b);
            return st;
        }
        if (got == 0) break;
        used += (size_t)got;
    }
    *out = b;
    *n = used;
    return TS_OK;
}

ts_status ts_npz_read(const char *path, ts_npz *out) {
    memset(out, 0, sizeof *out);
    FILE *probe = fopen(path, "rb");
    if (!probe) return ts_error(TS_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    fclose(probe);
    struct archive *a = archive_read_new();
    if (!a) return TS_ERR_OUT_OF_MEMORY;
    archive_read_support_format_zip(a);
    ts_status st = TS_OK;
    if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK)
        st = ts_error(TS_ERR_FORMAT, "%s is not an .npz (zip) archive: %s", path, archive_error_string(a));
    struct archive_entry *e;
    int r;
    while (!st && (r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
        const char *name = archive_entry_pathname(e);
        size_t len = name ? strlen(name) : 0;
        if (len < 5 || strcmp(name + len - 4, ".npy") != 0) {
            archive_read_data_skip(a);
            continue;
        }
        uint8_t *b = NULL;
        size_t n = 0;
        st = read_member(a, path, name, archive_entry_size_is_set(e) ? archive_entry_size(e) : 0, &b, &n);
        if (st) break;
        if (ts_grow((void **)&out->e, &out->cap, out->n + 1, sizeof *out->e)) {
            ts_free(b);
            st = TS_ERR_OUT_OF_MEMORY;
            break;
        }
        ts_npz_entry *en = &out->e[out->n];
        memset(en, 0, sizeof *en);
        st = ts_npy_parse(b, n, &en->array);
        ts_free(b);
        if (st) {
            st = ts_error_wrap(st, "%s: member %s", path, name);
            break;
        }
        en->name = ts_malloc(len - 3);
        if (!en->name) {
            ts_npy_free(&en->array);
            st = TS_ERR_OUT_OF_MEMORY;
            break;
        }
        memcpy(en->name, name, len - 4);
        en->name[len - 4] = '\0';
        out->n++;
    }
    if (!st && r != ARCHIVE_EOF)
        st = ts_error(TS_ERR_FORMAT, "%s: corrupt or truncated .npz archive: %s", path, archive_error_string(a));
    archive_read_free(a);
    if (st) ts_npz_free(out);
    return st;
}
