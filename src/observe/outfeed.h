/* outfeed.h -- the producer side of outfeed queues (docs/observation.md#outfeed-queues), for the
 * executor. Internal: the public side is in tensorscope.h.
 *
 * Life of a queue:
 *   ts_outfeed_new            (user)      validates the config, copies filters
 *   ts_outfeed_reserve        (compile)   preallocates the slots
 *   ts_outfeed_push           (executor)  one call per record, never mallocs
 *   ts_outfeed_dequeue / sink (consumer)  one consumer at a time
 *   ts_outfeed_close          (optional)  wakes everyone; pushes then fail
 *   ts_outfeed_free           (user)      closes, lets a sink drain, joins, frees
 *
 * Slots: depth records can wait, plus one slot that the consumer holds (the
 * record it got last, released by its next dequeue), so the producer can
 * fill the next record while the consumer still reads the last one.
 *
 * Counts (ts_outfeed_get_counts):
 *   ALL mode:  enqueued == dequeued + waiting; a record dropped because the
 *              queue was full (drop_when_full) never entered, so
 *              enqueued + dropped == accepted pushes.
 *   LAST mode: every accepted push is enqueued. A record replaced by a newer
 *              one of its key is what the mode asks for and is not counted as
 *              dropped; a record evicted because more than `depth` distinct
 *              keys were waiting is counted as dropped.
 *   Every drop also adds 1 to the metrics counter "OutfeedDropped" and logs a
 *   warning (once per run per queue); every producer wait adds a sample to
 *   the timing metric "OutfeedWait" and its nanoseconds to wait_ns. */
#ifndef TS_OBSERVE_OUTFEED_H
#define TS_OBSERVE_OUTFEED_H

#include "core/core.h"

/* Longest key, with its terminating NUL; the key is copied into the slot. */
#define TS_OUTFEED_KEY_MAX 256
/* Deepest queue accepted by ts_outfeed_new (each slot costs a few hundred
 * bytes before its data buffer). */
#define TS_OUTFEED_MAX_DEPTH (1 << 20)

/* Compile time: makes every slot hold max_record_bytes of array data, so
 * ts_outfeed_push never allocates. Calling it again with a larger size
 * (recompilation) grows the free slots now and the others when they are
 * released; a smaller size keeps the larger buffers. */
ts_status ts_outfeed_reserve(ts_outfeed *q, size_t max_record_bytes);

/* Copies `a` (and `key`, bounded by TS_OUTFEED_KEY_MAX) into a free slot.
 * - A key the filters do not accept: returns TS_OK and does nothing.
 * - ALL mode, queue full: waits for the consumer (backpressure), or with
 *   drop_when_full drops the record, counts it and returns TS_OK.
 * - LAST mode: replaces the waiting record of the same key (and replica
 *   and stage); never waits on the consumer.
 * Errors: TS_ERR_STATE before ts_outfeed_reserve or after ts_outfeed_close
 * (including a close while waiting: that record is not delivered);
 * TS_ERR_INVALID_ARGUMENT for a bad array, a key too long, or a record larger
 * than reserved. Safe to call from several threads, though the executor has
 * one producer per queue. Must not race with ts_outfeed_free. */
ts_status ts_outfeed_push(ts_outfeed *q, int64_t run, int64_t sample, const char *key,
                          const ts_array *a);
/* The same, for a record of a replica or pipeline stage (an MPI rank),
 * which the record carries; ts_outfeed_push is replica 0, stage 0. */
ts_status ts_outfeed_push_from(ts_outfeed *q, int64_t run, int64_t sample, const char *key,
                               const ts_array *a, int replica, int stage);

/* Wakes waiting producers and consumers. Afterwards pushes fail with
 * TS_ERR_STATE and dequeue delivers what is left, then TS_ERR_NOT_FOUND.
 * Idempotent; ts_outfeed_free calls it. */
void ts_outfeed_close(ts_outfeed *q);

#endif
