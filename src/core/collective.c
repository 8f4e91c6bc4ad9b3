/* collective.c -- the job's collectives (collective.h): the table src/parallel/
 * sets when this process joins a job of more than one rank, for every layer
 * that asks. */
#include "core/collective.h"

#include <stdatomic.h>

static _Atomic(const ts_collective *) job;

void ts_collective_set(const ts_collective *c) { atomic_store(&job, c); }

const ts_collective *ts_collective_get(void) { return atomic_load(&job); }
