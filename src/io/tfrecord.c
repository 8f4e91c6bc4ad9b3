/* tfrecord.c -- TFRecord framing: writing the header and footer of a record,
 * and reading records back with both CRCs checked. */
#include "io/tfrecord.h"

#include "core/crc32c.h"

static void tfr_put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t tfr_get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void ts_tfrecord_header(uint8_t out[TS_TFRECORD_HEADER], uint64_t n) {
    for (int i = 0; i < 8; i++) out[i] = (uint8_t)(n >> (8 * i));
    tfr_put_u32(out + 8, ts_crc32c_mask(ts_crc32c(out, 8)));
}

void ts_tfrecord_footer(uint8_t out[TS_TFRECORD_FOOTER], const void *data, size_t n) {
    tfr_put_u32(out, ts_crc32c_mask(ts_crc32c(data, n)));
}

ts_status ts_tfrecord_next(const uint8_t *buf, size_t len, size_t *pos, const uint8_t **data,
                           size_t *n, const char *name) {
    *data = NULL;
    *n = 0;
    size_t at = *pos;
    if (at >= len) return TS_OK;
    const char *what = name ? name : "TFRecord data";
    if (len - at < TS_TFRECORD_HEADER)
        return ts_error(TS_ERR_FORMAT, "%s: truncated record header at offset %zu", what, at);
    const uint8_t *h = buf + at;
    if (ts_crc32c_mask(ts_crc32c(h, 8)) != tfr_get_u32(h + 8))
        return ts_error(TS_ERR_FORMAT, "%s: record length CRC mismatch at offset %zu (corrupt file)",
                        what, at);
    uint64_t size = 0;
    for (int i = 7; i >= 0; i--) size = size << 8 | h[i];
    size_t room = len - at - TS_TFRECORD_HEADER;
    if (room < TS_TFRECORD_FOOTER || size > room - TS_TFRECORD_FOOTER)
        return ts_error(TS_ERR_FORMAT,
                        "%s: record at offset %zu claims %llu bytes but only %zu remain "
                        "(truncated file)",
                        what, at, (unsigned long long)size, room);
    const uint8_t *d = h + TS_TFRECORD_HEADER;
    if (ts_crc32c_mask(ts_crc32c(d, (size_t)size)) != tfr_get_u32(d + size))
        return ts_error(TS_ERR_FORMAT, "%s: record data CRC mismatch at offset %zu (corrupt file)",
                        what, at);
    *data = d;
    *n = (size_t)size;
    *pos = at + TS_TFRECORD_HEADER + (size_t)size + TS_TFRECORD_FOOTER;
    return TS_OK;
}
