/* escape.c -- what the library says is safe to show on a terminal: a name
 * from a model file can hold control sequences (ESC, BEL, the C1 controls,
 * bytes that are not UTF-8), and a message that carried them raw could
 * retitle, clear or rewrite the user's terminal. */
#include "core.h"

#include <stdio.h>
#include <string.h>

/* The length of the valid UTF-8 sequence at s (2-4), 0 when it is not one;
 * *cp gets its code point. Rejects overlong forms, surrogates and code
 * points past U+10FFFF. */
static int utf8_seq(const unsigned char *s, uint32_t *cp) {
    unsigned char b = s[0];
    int n;
    uint32_t c, min;
    if (b >= 0xC2 && b <= 0xDF) n = 2, c = b & 0x1Fu, min = 0x80;
    else if (b >= 0xE0 && b <= 0xEF) n = 3, c = b & 0x0Fu, min = 0x800;
    else if (b >= 0xF0 && b <= 0xF4) n = 4, c = b & 0x07u, min = 0x10000;
    else return 0;
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = c << 6 | (s[i] & 0x3Fu);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    *cp = c;
    return n;
}

/* What stands for the character at s: an escape written into esc (its
 * length returned, *take = bytes of s it covers), or 0 when it is shown as
 * it is (*take bytes). */
static int escape_at(const unsigned char *s, size_t *take, char esc[8]) {
    unsigned char b = s[0];
    uint32_t cp = 0;
    int n;
    *take = 1;
    if (b < 0x80) {
        if ((b >= 0x20 && b != 0x7F) || b == '\n' || b == '\t') return 0;
        return snprintf(esc, 8, "\\x%02x", b);
    }
    if ((n = utf8_seq(s, &cp)) == 0) return snprintf(esc, 8, "\\x%02x", b); /* not UTF-8: byte by byte */
    *take = (size_t)n;
    if (cp <= 0x9F) return snprintf(esc, 8, "\\u%04x", (unsigned)cp); /* C1 controls (CSI, OSC, ...) */
    return 0;
}

bool ts_text_needs_escape(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    char esc[8];
    size_t take;
    for (; *p; p += take)
        if (escape_at(p, &take, esc)) return true;
    return false;
}

size_t ts_escape_text(char *dst, size_t cap, const char *src) {
    const unsigned char *p = (const unsigned char *)src;
    size_t used = 0, need = 0, take;
    char esc[8];
    bool full = cap == 0;
    for (; *p; p += take) {
        int e = escape_at(p, &take, esc);
        size_t len = e ? (size_t)e : take;
        need += len;
        if (full || used + len >= cap) { /* never half an escape or half a character */
            full = true;
            continue;
        }
        memcpy(dst + used, e ? esc : (const char *)p, len);
        used += len;
    }
    if (cap) dst[used] = '\0';
    return need;
}
