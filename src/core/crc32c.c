/* crc32c.c -- CRC-32C, slicing-by-8 over byte loads (no alignment or
 * endianness assumptions), tables built once on first use. */
#include "core/crc32c.h"

#include <pthread.h>

#define TS_CRC32C_POLY 0x82F63B78u /* Castagnoli, reflected */
#define TS_CRC32C_MASK_DELTA 0xa282ead8u

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init_tables(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ ((c & 1u) ? TS_CRC32C_POLY : 0u);
        crc_table[0][i] = c;
    }
    /* table[k][i]: the CRC of byte i followed by k zero bytes */
    for (int k = 1; k < 8; k++)
        for (int i = 0; i < 256; i++) {
            uint32_t c = crc_table[k - 1][i];
            crc_table[k][i] = (c >> 8) ^ crc_table[0][c & 0xffu];
        }
}

uint32_t ts_crc32c_extend(uint32_t crc, const void *data, size_t n) {
    pthread_once(&crc_once, crc_init_tables);
    const uint8_t *p = data;
    uint32_t c = ~crc;
    while (n >= 8) {
        c ^= (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        c = crc_table[7][c & 0xffu] ^ crc_table[6][(c >> 8) & 0xffu] ^
            crc_table[5][(c >> 16) & 0xffu] ^ crc_table[4][c >> 24] ^ crc_table[3][p[4]] ^
            crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--) c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xffu];
    return ~c;
}

uint32_t ts_crc32c(const void *data, size_t n) { return ts_crc32c_extend(0, data, n); }

uint32_t ts_crc32c_mask(uint32_t crc) {
    return ((crc >> 15) | (crc << 17)) + TS_CRC32C_MASK_DELTA;
}

uint32_t ts_crc32c_unmask(uint32_t masked) {
    uint32_t rot = masked - TS_CRC32C_MASK_DELTA;
    return (rot >> 17) | (rot << 15);
}
