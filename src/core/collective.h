/* collective.h -- what a replica (or pipeline stage) needs from the other
 * ranks of its job, as a table of functions the model calls. src/parallel/
 * implements it with MPI and sets it here; nothing else knows how.
 * Internal: not API.
 *
 * Every call blocks until it is complete on this rank, or fails with
 * TS_ERR_DIST once the job's timeout has passed (a rank died or hangs). */
#ifndef TS_COLLECTIVE_H
#define TS_COLLECTIVE_H

#include "core/core.h"

typedef struct ts_collective {
    int rank, size;
    /* Starts buf[0..n) <- the mean over ranks of buf[0..n), in place. */
    ts_status (*allreduce_mean_start)(float *buf, int64_t n);
    /* Completes every started all-reduce. */
    ts_status (*allreduce_wait)(void);
    /* Lets the started all-reduces advance without waiting for them. */
    ts_status (*allreduce_progress)(void);
    /* recv[r * bytes ..] <- rank r's send[0..bytes), on every rank; `what`
     * names it in a failure ("the weight checksums"). */
    ts_status (*allgather)(const void *send, void *recv, size_t bytes, const char *what);
    /* Point-to-point messages (pipeline stages, outfeed records to rank
     * 0): a send starts and returns (buf must stay untouched until
     * send_wait completes every started send); a receive of at most cap
     * bytes completes before it returns and says how many came in *got
     * (NULL: not asked); `what` names it in a failure. */
    ts_status (*send_start)(int peer, int tag, const void *buf, size_t bytes);
    ts_status (*send_wait)(void);
    ts_status (*recv)(int peer, int tag, void *buf, size_t cap, size_t *got, const char *what);
    /* This rank failed (its run returned `st`, with the message `why`):
     * the others cannot finish their collectives. It tells every other
     * rank, which stop at their next wait (any call above) with `st` and
     * "rank R stopped the job: <why>" instead of waiting for the timeout,
     * and leaving the job ends it. A rank that learnt of another's failure
     * passes nothing on. */
    void (*mark_failed)(ts_status st, const char *why);
} ts_collective;

/* Message tags: a pipeline's micro-batch a sends 2a (forward) and 2a + 1
 * (backward), below TS_TAG_FIRST_RESERVED; then a rank's leaving after a
 * failure, a failure's notice to every rank (mark_failed), and the outfeed
 * records to rank 0 (MPI guarantees tags up to 32767). */
#define TS_TAG_LEAVE 32765
#define TS_TAG_FAILURE 32766
#define TS_TAG_OUTFEED 32767
#define TS_TAG_FIRST_RESERVED TS_TAG_LEAVE

/* The job's collectives, or NULL outside a job of more than one rank
 * (collective.c). Set by src/parallel/ as it joins the job (its table, its
 * rank) and leaves it (NULL); any layer reads it, the job's rank included. */
const ts_collective *ts_collective_get(void);
void ts_collective_set(const ts_collective *c);

#endif
