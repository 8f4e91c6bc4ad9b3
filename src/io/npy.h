/* npy.h -- the .npy header, shared by the file and in-memory readers.
 * Internal: the API is ts_npy_save/load/parse/free in tensorscope.h. */
#ifndef TS_NPY_H
#define TS_NPY_H

#include "core/core.h"

/* magic (6) + version (2) + header length (2 in format 1.0, 4 in 2.0/3.0) */
#define TS_NPY_PREFIX_MAX 12
/* Data starts at a multiple of this (what NumPy does since 1.13). */
#define TS_NPY_ALIGN 64

typedef struct ts_npy_header {
    ts_dtype dtype;
    int ndim;
    int64_t shape[TS_MAX_DIMS];
    size_t data_offset; /* where the data starts */
    size_t data_bytes;  /* numel x element size in the file */
    char widen;         /* narrower types NumPy writes, read as `dtype`: 'h' float16,
                           'b' int8/bool, 's' int16, 'S' uint16, 'U' uint32, 'Q' uint64 (below 2^63); 0: as stored */
    size_t file_size;   /* element size in the file */
} ts_npy_header;

/* From the first `n` bytes (at least TS_NPY_PREFIX_MAX, or the whole input
 * if shorter) finds where the data starts: the bytes the header needs. */
ts_status ts_npy_header_len(const uint8_t *b, size_t n, size_t *len);
/* Parses magic, version and the header dict; `n` >= ts_npy_header_len. */
ts_status ts_npy_header_parse(const uint8_t *b, size_t n, ts_npy_header *h);

/* Makes `out` from a parsed header and its data as the file holds it
 * (h->data_bytes, allocated with ts_malloc; taken over, freed on error):
 * narrower types are widened here. */
ts_status ts_npy_take(const ts_npy_header *h, void *data, ts_array *out);

/* Checks `a` and builds its .npy header into hdr (TS_NPY_HEADER_MAX
 * bytes): the header's length and the data's byte count. `path` names the
 * destination in errors. */
#define TS_NPY_HEADER_MAX 512
ts_status ts_npy_header_for(const char *path, const ts_array *a, char *hdr, size_t cap, size_t *hdr_len,
                            size_t *data_bytes);

#endif
