/* cpu.h -- what the CPU backend offers beyond its table (backend.h) to the
 * layers that still read tensor memory on the host themselves (docs/backend.md,
 * "What still touches tensor memory"); they move behind the table next. */
#ifndef TS_CPU_H
#define TS_CPU_H

#include "backend/cpu/pool.h"
#include "core/half.h"

/* Whether x[0..n) holds a NaN or an Inf: a memory-bound pass, big tensors
 * split over the pool (NULL: the calling thread). */
bool ts_cpu_has_nonfinite(ts_pool *pool, const float *x, int64_t n);
/* round16.c: dst = x rounded onto t's grid (TS_BF16, TS_F16), as
 * core/half.h's ts_round_half, eight at a time where the CPU can. */
void ts_cpu_round_half(ts_dtype t, float *dst, const float *x, int64_t n, ts_half_loss *loss);

#endif
