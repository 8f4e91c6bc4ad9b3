/* atomic_file.h -- write a file under a temporary name, then rename it into
 * place, so readers never see a half-written file. Internal. */
#ifndef TS_ATOMIC_FILE_H
#define TS_ATOMIC_FILE_H

#include "core/core.h"

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

typedef struct ts_atomic_file {
    FILE *f;      /* write here */
    char *path;   /* the destination (a symlink's target once resolved) */
    char *tmp;    /* the temporary file; NULL when writing through */
    bool through; /* the destination is a device or FIFO: written in place */
} ts_atomic_file;

/* Creates `<path>.tmp.<pid>.<n>` next to path (same filesystem), exclusively
 * (O_EXCL: a file or link planted at that name is never followed). A path
 * that is a symlink is resolved and its target replaced; a character device
 * or FIFO (/dev/null, /dev/stdout, a pipe) is written through, never
 * replaced; a directory, socket or block device is refused. The first write
 * into a directory also removes our own stale temporaries there (names of
 * the form above whose process no longer exists: left by a kill -9). */
ts_status ts_atomic_open(ts_atomic_file *af, const char *path);
/* Same, with the mode for a new file (before the umask): 0600 for files
 * only their owner should read. */
ts_status ts_atomic_open_mode(ts_atomic_file *af, const char *path, mode_t mode);
/* Flushes, syncs and renames onto path, then syncs the directory; on any
 * failure removes the temp file. Always releases af. */
ts_status ts_atomic_commit(ts_atomic_file *af);
/* Removes the temp file and releases af (after a failed write). */
void ts_atomic_abort(ts_atomic_file *af);

/* Removes stale temporaries of ours in dir (see ts_atomic_open); returns how
 * many. Done once per directory per process by ts_atomic_open. */
int ts_atomic_clean_stale(const char *dir);

#endif
