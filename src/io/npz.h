/* npz.h -- NumPy .npz archives (a zip of .npy files, stored or deflated),
 * read with libarchive. Internal: datasets and tests use it. */
#ifndef TS_NPZ_H
#define TS_NPZ_H

#include "core/core.h"

typedef struct ts_npz_entry {
    char *name;     /* without the .npy suffix */
    ts_array array; /* data allocated by ts_npy_parse */
} ts_npz_entry;

typedef struct ts_npz {
    ts_npz_entry *e;
    size_t n, cap;
} ts_npz;

/* Reads every array of an .npz. TS_ERR_FORMAT for a corrupt archive or
 * member, TS_ERR_IO when it cannot be opened. */
ts_status ts_npz_read(const char *path, ts_npz *out);
/* The array named `name`, or NULL. */
const ts_array *ts_npz_get(const ts_npz *z, const char *name);
void ts_npz_free(ts_npz *z);

#endif
