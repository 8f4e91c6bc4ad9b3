/* idx.h -- IDX files (the MNIST format): a big-endian header, then u8 data.
 * Internal: nothing here is API. */
#ifndef TS_IDX_H
#define TS_IDX_H

#include "core/core.h"

#define TS_IDX_MAX_DIMS 3
/* Refuse headers that claim more data than this: a corrupt header must not
 * make us allocate gigabytes. MNIST's training images are 47 MB. */
#define TS_IDX_MAX_BYTES ((uint64_t)1 << 32)

/* One IDX file of unsigned bytes: magic 0x0000 08 <ndim>. */
typedef struct ts_idx {
    int ndim;                       /* 1 (labels) or 3 (images) */
    uint32_t dims[TS_IDX_MAX_DIMS]; /* [N] or [N, rows, cols] */
    uint8_t *data;                  /* ts_malloc'd, `size` bytes */
    size_t size;
} ts_idx;

/* Parses a whole IDX file held in memory; `name` (a path) goes into errors.
 * Copies the data into out->data. TS_ERR_FORMAT on any corruption. */
ts_status ts_idx_parse(const uint8_t *bytes, size_t n, const char *name, ts_idx *out);
/* Reads a gzip'd or plain IDX file. TS_ERR_IO when it cannot be opened. */
ts_status ts_idx_read(const char *path, ts_idx *out);
void ts_idx_free(ts_idx *x);

#endif
