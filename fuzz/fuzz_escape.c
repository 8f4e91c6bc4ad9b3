/* fuzz_escape.c -- the escaping every message goes through (core/escape.c):
 * for any bytes, ts_escape_text's text holds no terminal control (C0 but
 * \n and \t, DEL, C1 in UTF-8) and is valid UTF-8 throughout; the length it
 * returns is the length it writes when there is room; a smaller buffer
 * gets a prefix of it, never half an escape or half a character; escaping
 * it again changes nothing; and ts_error stores the same text.
 *
 * Input: any bytes (up to the first NUL); the first byte also picks the
 * size of the small buffer. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void clean(const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t n = ts_utf8_len((const char *)p);
        if (n == 0) abort();                                              /* not UTF-8 */
        if ((*p < 0x20 && *p != '\n' && *p != '\t') || *p == 0x7f) abort(); /* C0, DEL */
        if (p[0] == 0xc2 && p[1] <= 0x9f) abort();                        /* C1 */
        p += n;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 2048) return 0;
    char in[2049], out[8 * 2049 + 1], again[8 * 2049 + 1], small[64];
    memcpy(in, data, size);
    in[size] = '\0';
    size_t need = ts_escape_text(out, sizeof out, in);
    if (need != strlen(out)) abort();
    clean(out);
    if (ts_escape_text(again, sizeof again, out) != need || strcmp(again, out) != 0) abort(); /* idempotent */
    size_t cap = size ? (size_t)data[0] % sizeof small : 0;
    if (ts_escape_text(cap ? small : NULL, cap, in) != need) abort();
    if (cap) {
        size_t k = strlen(small);
        if (k >= cap || strncmp(small, out, k) != 0) abort(); /* a prefix that fits */
        clean(small);                                      /* not cut inside a character */
        if (k < need && k + 10 < cap) abort();             /* only the last unit may be left out (an escape is 6 bytes) */
    }
    ts_error(TS_ERR_FORMAT, "%s", in);
    if (strcmp(ts_last_error(), out) != 0 && need < 8000) abort();
    clean(ts_last_error());
    return 0;
}
