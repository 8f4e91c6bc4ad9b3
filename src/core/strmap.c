/* strmap.c -- string -> int hash map (open addressing, linear probing) for
 * name lookups in the graph and the compiled program. Keys are borrowed:
 * the caller keeps each key string alive while it is in the map. */
#include "core.h"

#include <string.h>

#define TOMBSTONE ((const char *)&ts_strmap_hash) /* a removed slot: probing goes on past it */

uint64_t ts_strmap_hash(const char *s) { /* FNV-1a */
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static size_t find_slot(const ts_strmap *m, const char *key, uint64_t h, bool *found) {
    size_t mask = m->cap - 1, i = (size_t)h & mask, free_slot = (size_t)-1;
    for (;;) {
        const char *k = m->slots[i].key;
        if (!k) {
            *found = false;
            return free_slot != (size_t)-1 ? free_slot : i;
        }
        if (k == TOMBSTONE) {
            if (free_slot == (size_t)-1) free_slot = i;
        } else if (m->slots[i].hash == h && strcmp(k, key) == 0) {
            *found = true;
            return i;
        }
        i = (i + 1) & mask;
    }
}

int ts_strmap_get(const ts_strmap *m, const char *key) {
    if (!m->cap || !key) return -1;
    bool found;
    size_t i = find_slot(m, key, ts_strmap_hash(key), &found);
    return found ? m->slots[i].value : -1;
}

static ts_status rehash(ts_strmap *m, size_t cap) {
    ts_strmap n = {.cap = cap};
    n.slots = ts_calloc(cap, sizeof *n.slots);
    if (!n.slots) return TS_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < m->cap; i++) {
        const char *k = m->slots[i].key;
        if (!k || k == TOMBSTONE) continue;
        bool found;
        size_t j = find_slot(&n, k, m->slots[i].hash, &found);
        n.slots[j] = m->slots[i];
        n.used++, n.n++;
    }
    ts_free(m->slots);
    *m = n;
    return TS_OK;
}

ts_status ts_strmap_put(ts_strmap *m, const char *key, int value) {
    if ((m->used + 1) * 4 >= m->cap * 3) {
        size_t cap = m->cap ? m->cap : 64;
        while ((m->n + 1) * 2 >= cap) cap *= 2;
        if (rehash(m, cap)) return TS_ERR_OUT_OF_MEMORY;
    }
    uint64_t h = ts_strmap_hash(key);
    bool found;
    size_t i = find_slot(m, key, h, &found);
    if (!found) {
        if (!m->slots[i].key) m->used++;
        m->n++;
    }
    m->slots[i].key = key;
    m->slots[i].hash = h;
    m->slots[i].value = value;
    return TS_OK;
}

void ts_strmap_del(ts_strmap *m, const char *key) {
    if (!m->cap) return;
    bool found;
    size_t i = find_slot(m, key, ts_strmap_hash(key), &found);
    if (!found) return;
    m->slots[i].key = TOMBSTONE;
    m->n--;
}

void ts_strmap_free(ts_strmap *m) {
    ts_free(m->slots);
    memset(m, 0, sizeof *m);
}
