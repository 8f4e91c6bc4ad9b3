/* seeded.h -- the fused-path tests' values: a buffer filled from a seed
 * (an LCG, values in [-1, 1)) and a seed from a tensor's name (FNV-1a),
 * so that a graph and its twin get the same values by name. Header-only. */
#ifndef TS_TEST_SEEDED_H
#define TS_TEST_SEEDED_H

#include <stdint.h>

static inline void seeded_fill(float *x, int64_t n, unsigned seed) {
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
}

static inline unsigned name_seed(const char *s) {
    unsigned h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

#endif
