/* alloc.c -- every allocation of the library goes through the user's
 * allocator, so a test allocator can fail the Nth one. */
#include "core.h"

#include <stdlib.h>
#include <string.h>

static void *default_alloc(void *u, size_t n) { (void)u; return malloc(n); }
static void *default_realloc(void *u, void *p, size_t n) { (void)u; return realloc(p, n); }
static void default_free(void *u, void *p) { (void)u; free(p); }

static ts_allocator current = {default_alloc, default_realloc, default_free, NULL};

void ts_set_allocator(const ts_allocator *a) {
    if (a && a->alloc && a->realloc && a->free)
        current = *a;
    else
        current = (ts_allocator){default_alloc, default_realloc, default_free, NULL};
}

void *ts_malloc(size_t n) {
    void *p = current.alloc(current.user, n ? n : 1);
    if (!p) ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory allocating %zu bytes", n);
    return p;
}

/* Zeroed memory. With the default allocator, the C library's calloc: a
 * large block comes as fresh pages of zeros that cost no memory until
 * written (an arena planned for a batch that never runs, a long trace's
 * event array), where zeroing it would touch every page at once. */
void *ts_calloc(size_t count, size_t size) {
    if (size && count > SIZE_MAX / size) {
        ts_error(TS_ERR_OUT_OF_MEMORY, "allocation of %zu x %zu bytes overflows", count, size);
        return NULL;
    }
    if (current.alloc == default_alloc) {
        void *p = calloc(count ? count : 1, size ? size : 1);
        if (!p) ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory allocating %zu bytes", count * size);
        return p;
    }
    void *p = ts_malloc(count * size);
    if (p && count && size) memset(p, 0, count * size);
    return p;
}

void *ts_realloc(void *p, size_t n) {
    void *q = current.realloc(current.user, p, n ? n : 1);
    if (!q) ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory growing a buffer to %zu bytes", n);
    return q;
}

void ts_free(void *p) {
    if (p) current.free(current.user, p);
}

char *ts_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = ts_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

ts_status ts_grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return TS_OK;
    size_t c = *cap ? *cap : 8;
    while (c < need) c *= 2;
    void *q = ts_realloc(*p, c * elem);
    if (!q) return TS_ERR_OUT_OF_MEMORY;
    *p = q;
    *cap = c;
    return TS_OK;
}

/* What the library hands out for the caller to free (PNG bytes, ...). */
void ts_buffer_free(void *p) { ts_free(p); }
