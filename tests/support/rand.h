/* rand.h -- the tests' deterministic uniform numbers (one LCG stream per
 * test program), and buffers of them. Header-only. */
#ifndef TS_TEST_RAND_H
#define TS_TEST_RAND_H

#include <stdint.h>
#include <stdlib.h>

static uint64_t rng_state = 0x243F6A8885A308D3ull;

static inline float urand(void) /* in [-1, 1) */
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng_state >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

/* n values of urand() in a malloc'd buffer (NULL when out of memory). */
static inline float *rand_buf(int64_t n)
{
    float *p = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; p && i < n; i++)
        p[i] = urand();
    return p;
}

#endif
