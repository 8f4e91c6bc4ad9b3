/* rng.c -- splitmix64: small, seedable, easy to reproduce elsewhere (a
 * PyTorch reference draws the same corpus windows with it). */
#include "core.h"

uint64_t ts_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
