/* tfrecord.h -- TFRecord framing, the container of TensorBoard event files:
 *   u64 length | u32 masked crc32c(length bytes) | data | u32 masked crc32c(data)
 * all little-endian. Internal: nothing here is API. */
#ifndef TS_TFRECORD_H
#define TS_TFRECORD_H

#include "core/core.h"

#define TS_TFRECORD_HEADER 12 /* length + its CRC */
#define TS_TFRECORD_FOOTER 4  /* CRC of the data */

/* Fills the 12 bytes that precede a record of n bytes. */
void ts_tfrecord_header(uint8_t out[TS_TFRECORD_HEADER], uint64_t n);
/* Fills the 4 bytes that follow the record data[0..n). */
void ts_tfrecord_footer(uint8_t out[TS_TFRECORD_FOOTER], const void *data, size_t n);

/* Reads the record at buf[*pos..len): on TS_OK, *data and *n are its payload
 * (pointing into buf) and *pos moves past it; at the end of buf, *data is
 * NULL. TS_ERR_FORMAT (naming `name` and the offset) on a truncated record
 * or a CRC mismatch. */
ts_status ts_tfrecord_next(const uint8_t *buf, size_t len, size_t *pos, const uint8_t **data,
                           size_t *n, const char *name);

#endif
