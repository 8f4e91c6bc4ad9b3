/* escape.c -- what the library says is safe to show on a terminal: a name
 * from a model file can hold control sequences (ESC, BEL, the C1 controls,
 * bytes that are not UTF-8), and a message that carried them raw could
 * retitle, clear or rewrite the user's terminal. */
#include "core.h"

#include <stdio.h>
#include <string.h>

size_t ts_utf8_len(const char *str) {
    const unsigned char *s = (const unsigned char *)str;
    if (s[0] < 0x80) return 1;
    size_t n = (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3 : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (n == 0 || (n == 2 && s[0] < 0xc2) || s[0] > 0xf4) return 0;
    for (size_t k = 1; k < n; k++)
        if ((s[k] & 0xc0) != 0x80) return 0;
    /* overlong forms, surrogates and code points past U+10FFFF */
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0) || (s[0] == 0xf0 && s[1] < 0x90) ||
        (s[0] == 0xf4 && s[1] >= 0x90))
        return 0;
    return n;
}

/* What stands for the character at s: an escape written into esc (its
 * length returned, *take = bytes of s it covers), or 0 when it is shown as
 * it is (*take bytes). */
static int escape_at(const unsigned char *s, size_t *take, char esc[8]) {
    unsigned char b = s[0];
    size_t n = ts_utf8_len((const char *)s);
    *take = n ? n : 1;
    if (b < 0x80) {
        if ((b >= 0x20 && b != 0x7F) || b == '\n' || b == '\t') return 0;
        return snprintf(esc, 8, "\\x%02x", b);
    }
    if (n == 0) return snprintf(esc, 8, "\\x%02x", b); /* not UTF-8: byte by byte */
    if (b == 0xC2 && s[1] <= 0x9F) return snprintf(esc, 8, "\\u%04x", (unsigned)s[1]); /* C1 controls (CSI, OSC, ...) */
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
