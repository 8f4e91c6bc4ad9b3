/* atomic_file.h -- write a file under a temporary name, then rename it into
 * place, so readers never see a half-written file. Internal. */
#ifndef TS_ATOMIC_FILE_H
#define TS_ATOMIC_FILE_H

#include "core/core.h"

#include <stdio.h>

typedef struct ts_atomic_file {
    FILE *f;   /* write here */
    char *path, *tmp;
} ts_atomic_file;

/* Creates `<path>.tmp.<pid>.<n>` next to path (same filesystem). */
ts_status ts_atomic_open(ts_atomic_file *af, const char *path);
/* Flushes, syncs and renames onto path; on any failure removes the temp file.
 * Always releases af. */
ts_status ts_atomic_commit(ts_atomic_file *af);
/* Removes the temp file and releases af (after a failed write). */
void ts_atomic_abort(ts_atomic_file *af);

#endif
