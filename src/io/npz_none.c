/* npz_none.c -- NumPy .npz archives in a build without libarchive: loading
 * and saving say what to install (features.c); no archive can exist, so
 * the accessors see none. (.npy files need no library: npy.c.) */
#include "core/core.h"

ts_status ts_npz_load(const char *path, ts_npz **out) {
    (void)path;
    if (out) *out = NULL;
    return ts_feature_unsupported("npz");
}

ts_status ts_npz_save(const char *path, const char *const *names, const ts_array *arrays, size_t n) {
    (void)path, (void)names, (void)arrays, (void)n;
    return ts_feature_unsupported("npz");
}

void ts_npz_free(ts_npz *z) { (void)z; }

size_t ts_npz_count(const ts_npz *z) {
    (void)z;
    return 0;
}

const char *ts_npz_name(const ts_npz *z, size_t i) {
    (void)z, (void)i;
    return NULL;
}

const ts_array *ts_npz_array(const ts_npz *z, size_t i) {
    (void)z, (void)i;
    return NULL;
}

const ts_array *ts_npz_find(const ts_npz *z, const char *name) {
    (void)z, (void)name;
    return NULL;
}

int ts_npz_has(const ts_npz *z, const char *name) {
    (void)z, (void)name;
    return 0;
}

ts_status ts_npz_get(const ts_npz *z, const char *name, const ts_array **out) {
    (void)z, (void)name;
    if (out) *out = NULL;
    return ts_feature_unsupported("npz");
}
