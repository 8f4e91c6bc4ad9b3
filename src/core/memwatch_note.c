/* memwatch_note.c -- the memory watcher's latest sample (memwatch_note.h). */
#include "core/memwatch_note.h"

#include <pthread.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static ts_memwatch_stats latest;

void ts_memwatch_note(const ts_memwatch_stats *s) {
    pthread_mutex_lock(&mu);
    latest = *s;
    pthread_mutex_unlock(&mu);
}

bool ts_memwatch_running_sample(ts_memwatch_stats *out) {
    pthread_mutex_lock(&mu);
    *out = latest;
    pthread_mutex_unlock(&mu);
    return out->running != 0;
}
