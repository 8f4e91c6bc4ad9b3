/* cpu.h -- what the CPU backend offers beyond its table (backend.h) to the
 * layers that still read tensor memory on the host themselves (docs/backend.md,
 * "What still touches tensor memory"); they move behind the table next. */
#ifndef TS_CPU_H
#define TS_CPU_H

#include "backend/cpu/pool.h"

/* Whether x[0..n) holds a NaN or an Inf: a memory-bound pass, big tensors
 * split over the pool (NULL: the calling thread). */
bool ts_cpu_has_nonfinite(ts_pool *pool, const float *x, int64_t n);

#endif
