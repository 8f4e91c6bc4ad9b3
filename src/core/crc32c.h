/* crc32c.h -- CRC-32C (Castagnoli) and the masked form TFRecord files use.
 * Internal: nothing here is API. */
#ifndef TS_CRC32C_H
#define TS_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C of data[0..n): reflected polynomial 0x82F63B78, init and final
 * xor 0xFFFFFFFF (crc32c("123456789") == 0xE3069283). */
uint32_t ts_crc32c(const void *data, size_t n);
/* Continues `crc` (a finished ts_crc32c value) over more bytes, so
 * ts_crc32c_extend(ts_crc32c(a), b) == ts_crc32c(a || b). */
uint32_t ts_crc32c_extend(uint32_t crc, const void *data, size_t n);

/* TFRecord stores CRCs masked (rotated right by 15, plus a constant) because
 * a CRC of data that itself embeds CRCs is weak. */
uint32_t ts_crc32c_mask(uint32_t crc);
uint32_t ts_crc32c_unmask(uint32_t masked);

#endif
