/* cpu.h -- what the CPU backend offers beyond its table (backend.h) to the
 * layers that still read tensor memory on the host themselves (docs/backend.md,
 * "What still touches tensor memory"); they move behind the table next. */
#ifndef TS_CPU_H
#define TS_CPU_H

#include "backend/pool.h"
#include "core/half.h"

/* Whether x[0..n) holds a NaN or an Inf: a memory-bound pass, big tensors
 * split over the pool (NULL: the calling thread). */
bool ts_cpu_has_nonfinite(ts_pool *pool, const float *x, int64_t n);
/* round16.c, the 16-bit floats t (TS_BF16, TS_F16), bit for bit as
 * core/half.h, eight at a time where the CPU can, what rounding loses
 * added to *lost (NULL: not counted): dst = x on t's grid, in f32, over
 * the pool (NULL: the calling thread); x packed into
 * 16-bit cells; 16-bit cells widened to f32 (exact). */
void ts_cpu_round_half_pool(ts_pool *pool, ts_dtype t, float *dst, const float *x, int64_t n, ts_half_loss *lost);
void ts_cpu_pack_half(ts_pool *pool, ts_dtype t, uint16_t *dst, const float *x, int64_t n, ts_half_loss *lost);
void ts_cpu_unpack_half(ts_pool *pool, ts_dtype t, float *dst, const uint16_t *h, int64_t n);

/* staged_record.c: "cpu-staged" (ts_backend_cpu_staged) records and
 * replays runs as the CUDA backend does (backend.h's capture entries):
 * wraps the calls of `be` that work, and fills those entries. */
struct ts_backend;
void ts_cpu_staged_recording(struct ts_backend *be);
/* staged_stream.c: its streams made, and checked on every call that
 * takes one (ts_cpu_staged_stream_misuse): wraps those calls of `be`. */
void ts_cpu_staged_streams(struct ts_backend *be);

#endif
