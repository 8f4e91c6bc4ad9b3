/* test_spikes.c -- the spike detector on its own (src/diag/spikes.h), on
 * series made here:
 * - noisy series (a deterministic jitter) never cross k = 6 over 200 steps;
 * - a value 50x the series' level crosses at that step, with the z-score
 *   computed here from the window's median and MAD;
 * - of two series crossing at one step the one of the lower order is the
 *   first mover, whichever was pushed first; a series below the threshold
 *   is never named;
 * - a series is not judged before min_history values (z NaN);
 * - a NaN is a spike (z +Inf) and never joins the window: the next normal
 *   value scores as before;
 * - a spike joins the window, yet the next spike 3 steps later is caught;
 * - a series that has barely moved (a constant) is not flagged for a
 *   change of 1e-6 (TS_SPIKE_REL_FLOOR), but is for a change of 2x;
 * - steps going back are refused; bad settings give no detector. */
#include <math.h>
#include <stdlib.h>

#include "support/check.h"
#include "diag/spikes.h"

static double jitter(int step, int series) { return 1.0 + 0.1 * sin(1.7 * step + 0.9 * series) + 0.05 * cos(3.1 * step * (series + 1)); }

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(void) {
    enum { W = 16 };
    ts_spikes *d = ts_spikes_new(6.0, W, 8);
    CHECK(d != NULL, "a detector with k 6, window 16, 8 values before judging");
    if (!d) return check_summary("test_spikes");
    int crossed = 0;
    ts_spike_hit h;
    for (int step = 0; step < 200; step++) {
        for (int s = 0; s < 5; s++) {
            double z;
            CHECK_OK(ts_spikes_push(d, step, s, s, jitter(step, s), &z), "push") ;
            if (step < 8 && !isnan(z)) crossed += 1000; /* judged too early */
        }
        crossed += ts_spikes_first(d, &h);
    }
    CHECK(crossed == 0, "200 steps of 5 noisy series: nothing crosses, nothing judged before 8 values (%d)", crossed);

    /* a spike of series 3 at step 200: its z from the window of steps 184..199 */
    double win[W], dev[W];
    for (int i = 0; i < W; i++) win[i] = jitter(184 + i, 3);
    double med = median(win, W);
    for (int i = 0; i < W; i++) dev[i] = fabs(jitter(184 + i, 3) - med);
    double mad = median(dev, W), x = 50 * med;
    double want = (x - med) / fmax(1.4826 * mad, TS_SPIKE_REL_FLOOR * med);
    double z = 0;
    for (int s = 0; s < 5; s++) CHECK_OK(ts_spikes_push(d, 200, s, s, s == 3 ? x : jitter(200, s), s == 3 ? &z : NULL), "push step 200");
    CHECK(ts_spikes_first(d, &h) && h.series == 3 && h.order == 3, "the spike of series 3 is the step's first mover (series %d)", h.series);
    CHECK(fabs(z - want) <= 1e-9 * want && fabs(h.z - want) <= 1e-9 * want && fabs(h.median - med) < 1e-12 && fabs(h.mad - mad) < 1e-12,
          "its z-score %.6g is (x - median) / (1.4826 MAD) of the window before it (%.6g; median %.6g, MAD %.6g)", h.z, want, med, mad);

    /* two series cross at step 201; series 4 pushed first, series 1 is earlier in the step's order */
    CHECK_OK(ts_spikes_push(d, 201, 4, 4, 100.0, NULL), "push series 4's spike first");
    CHECK_OK(ts_spikes_push(d, 201, 0, 0, jitter(201, 0), NULL), "push series 0 (normal)");
    CHECK_OK(ts_spikes_push(d, 201, 1, 1, -80.0, NULL), "push series 1's spike second");
    CHECK(ts_spikes_first(d, &h) && h.series == 1 && h.z < -6, "the lower order is the first mover, a negative spike too (series %d, z %g)",
          h.series, h.z);

    /* 3 steps later, after the spike joined series 3's window, another */
    for (int step = 202; step < 205; step++)
        for (int s = 0; s < 5; s++) CHECK_OK(ts_spikes_push(d, step, s, s, jitter(step, s), NULL), "push");
    CHECK(!ts_spikes_first(d, &h) && h.series == -1, "normal steps after the spikes: none");
    CHECK_OK(ts_spikes_push(d, 205, 3, 3, 20.0, NULL), "push series 3's second spike");
    CHECK(ts_spikes_first(d, &h) && h.series == 3 && h.z > 6, "a spike in the window does not hide the next (z %g)", h.z);

    /* a NaN: z +Inf, named; it never joins the window */
    CHECK_OK(ts_spikes_push(d, 206, 2, 2, NAN, &z), "push a NaN");
    CHECK(isinf(z) && z > 0 && ts_spikes_first(d, &h) && h.series == 2, "a NaN is a spike (z %g)", z);
    CHECK_OK(ts_spikes_push(d, 207, 2, 2, jitter(207, 2), &z), "push a normal value after the NaN");
    CHECK(isfinite(z) && fabs(z) < 6, "the NaN did not join the window (z %g)", z);

    /* steps go forward */
    CHECK(ts_spikes_push(d, 100, 2, 2, 1.0, NULL) == TS_ERR_INVALID_ARGUMENT, "a step going back is refused");
    ts_spikes_free(d);

    /* a constant series: a rounding change is nothing, a doubling is a spike */
    d = ts_spikes_new(6.0, W, 8);
    for (int step = 0; step < 20; step++) CHECK_OK(ts_spikes_push(d, step, 0, 0, 0.25, NULL), "push a constant");
    CHECK_OK(ts_spikes_push(d, 20, 0, 0, 0.25 * (1 + 1e-6), &z), "push the constant changed by 1e-6");
    CHECK(!ts_spikes_first(d, &h) && fabs(z) < 1e-3, "a constant changed by 1e-6 is no spike (z %g)", z);
    CHECK_OK(ts_spikes_push(d, 21, 0, 0, 0.5, &z), "push the constant doubled");
    CHECK(ts_spikes_first(d, &h) && z >= 6, "the constant doubled is (z %g)", z);
    ts_spikes_reset(d);
    CHECK_OK(ts_spikes_push(d, 0, 0, 0, 100.0, &z), "push after a reset");
    CHECK(isnan(z), "a reset forgets the history (z %g)", z);
    ts_spikes_free(d);

    CHECK(!ts_spikes_new(0, W, 8) && !ts_spikes_new(6, 1, 1) && !ts_spikes_new(6, W, W + 1) && !ts_spikes_new(NAN, W, 8),
          "k <= 0 or NaN, a window under 2, min_history past the window: no detector");
    return check_summary("test_spikes");
}
