/* spikes.h -- the spike detector (spikes.c): each series of values (a
 * signal of one tensor, or the loss) judged against its own running median
 * and median absolute deviation over a window of the steps before; a step's
 * first mover is the series that crossed the threshold first in the step's
 * order (the forward pass, then the loss, then the backward). Pure: it
 * knows no model; the observer that feeds it from the watch results is
 * spike_watch.c (docs/observation.md#spikes). */
#ifndef TS_DIAG_SPIKES_H
#define TS_DIAG_SPIKES_H

#include "core/core.h"

/* The z-score's scale is at least this fraction of the median's magnitude,
 * whatever the window's spread: a signal that has barely moved (a weight's
 * max |x|, which changes when another element overtakes it; a constant)
 * has a median absolute deviation near 0, over which any small move would
 * score an unbounded z. With k = 12 such a signal must move by 12% of its
 * median to cross. */
#define TS_SPIKE_REL_FLOOR 0.01

typedef struct ts_spikes ts_spikes;

/* A series' verdict at a step. */
typedef struct ts_spike_hit {
    int series;    /* the caller's id; -1: none */
    int order;     /* its position in the step (lower: earlier) */
    double value;  /* the value pushed */
    double median; /* of the window before the step */
    double mad;    /* median absolute deviation of that window */
    double z;      /* (value - median) / max(1.4826 mad, floor); +-Inf for a non-finite value */
} ts_spike_hit;

/* k > 0: the threshold on |z|; window >= 2: the steps each series
 * remembers; min_history in [1, window]: the values a series needs before
 * it is judged (its z is NaN until then). NULL when out of memory. */
ts_spikes *ts_spikes_new(double k, int window, int min_history);
void ts_spikes_free(ts_spikes *d);
/* Forget every series' history (a new run of training). */
void ts_spikes_reset(ts_spikes *d);

/* The value of series `series` (>= 0, any id) at `step`, at position
 * `order` of that step. It is judged against the series' values of the
 * earlier steps; it joins them when a later step is pushed (a non-finite
 * value never does). A series pushed twice in a step keeps the last value.
 * *z (may be NULL) <- its z-score, NaN while the series has fewer than
 * min_history values. Steps must not go back (TS_ERR_INVALID_ARGUMENT). */
ts_status ts_spikes_push(ts_spikes *d, int64_t step, int series, int order, double value, double *z);

/* The first mover of the step pushed last: of the series whose |z| >= k,
 * the one of the lowest order (the first pushed among equals). False, and
 * out->series -1, when none crossed. */
bool ts_spikes_first(const ts_spikes *d, ts_spike_hit *out);
/* How many values of series `id` the current step is judged against. */
int ts_spikes_history(const ts_spikes *d, int id);
/* How many series crossed at the step pushed last. */
int ts_spikes_crossed(const ts_spikes *d);
/* The step pushed last (-1 before any). */
int64_t ts_spikes_step(const ts_spikes *d);

#endif
