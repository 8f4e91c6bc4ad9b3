/* loader.h -- a loader's position, for checkpoints (model/checkpoint.c).
 * Internal: the API is ts_checkpoint_save/load in tensorscope.h. */
#ifndef TS_LOADER_H
#define TS_LOADER_H

#include "core/core.h"

/* Where a loader stands, and the configuration a restore must match. */
typedef struct ts_loader_pos {
    int64_t epoch, pos, in_epoch; /* epochs started, samples served of the current one */
    uint64_t rng;                 /* the shuffle RNG's state */
    int64_t first, count, batch_size, shuffle, drop_last;
    uint64_t seed;
} ts_loader_pos;

/* The position and this epoch's order (`count` dataset indices). */
void ts_loader_get_pos(const ts_loader *l, ts_loader_pos *out, const int64_t **order);
/* Puts the loader where `p` says; the configuration must be the same. */
ts_status ts_loader_set_pos(ts_loader *l, const ts_loader_pos *p, const int64_t *order, int64_t n);

#endif
