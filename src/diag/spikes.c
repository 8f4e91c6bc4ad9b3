/* spikes.c -- the spike detector (spikes.h): per series a ring of its last
 * `window` values; a new value scores z = (x - median) / (1.4826 MAD), the
 * robust z-score (1.4826 MAD estimates the standard deviation of normal
 * noise, and neither the median nor the MAD moves much for a few outliers
 * in the window, so an earlier spike does not hide the next one). */
#include "diag/spikes.h"

#include <math.h>
#include <stdlib.h>

typedef struct series {
    double *ring;      /* the last `window` committed values */
    int n, next;       /* how many it holds, where the next goes */
    bool pending;      /* a value of the current step, not yet committed */
    double value;
    ts_spike_hit hit;  /* its verdict at the current step */
} series;

struct ts_spikes {
    double k;
    int window, min_history;
    int64_t step;
    series *s;
    size_t n, cap;
    double *scratch; /* window values, to select medians */
    int first;       /* the series of the current step's first mover, -1: none */
    int64_t pushes;  /* the order of pushes within the step, for ties */
    int64_t first_push;
};

ts_spikes *ts_spikes_new(double k, int window, int min_history) {
    if (!(k > 0) || window < 2 || min_history < 1 || min_history > window) return NULL;
    ts_spikes *d = ts_calloc(1, sizeof *d);
    if (!d) return NULL;
    d->k = k, d->window = window, d->min_history = min_history, d->step = -1, d->first = -1;
    if (!(d->scratch = ts_malloc((size_t)window * sizeof *d->scratch))) {
        ts_free(d);
        return NULL;
    }
    return d;
}

void ts_spikes_free(ts_spikes *d) {
    if (!d) return;
    for (size_t i = 0; i < d->n; i++) ts_free(d->s[i].ring);
    ts_free(d->s);
    ts_free(d->scratch);
    ts_free(d);
}

void ts_spikes_reset(ts_spikes *d) {
    if (!d) return;
    for (size_t i = 0; i < d->n; i++) d->s[i].n = d->s[i].next = 0, d->s[i].pending = false;
    d->step = -1, d->first = -1;
}

int64_t ts_spikes_step(const ts_spikes *d) { return d ? d->step : -1; }

int ts_spikes_history(const ts_spikes *d, int id) { return d && id >= 0 && (size_t)id < d->n ? d->s[id].n : 0; }

int ts_spikes_crossed(const ts_spikes *d) {
    int n = 0;
    for (size_t i = 0; d && i < d->n; i++) n += d->s[i].pending && fabs(d->s[i].hit.z) >= d->k;
    return n;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (reordered). */
static double median_of(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The current step's values join their windows. */
static void commit(ts_spikes *d) {
    for (size_t i = 0; i < d->n; i++) {
        series *s = &d->s[i];
        if (!s->pending) continue;
        s->pending = false;
        if (!isfinite(s->value)) continue;
        s->ring[s->next] = s->value;
        s->next = (s->next + 1) % d->window;
        if (s->n < d->window) s->n++;
    }
    d->first = -1;
    d->pushes = 0;
}

/* Grows the table to hold series id `id`. */
static ts_status reach(ts_spikes *d, int id) {
    if ((size_t)id < d->n) return TS_OK;
    if (ts_grow((void **)&d->s, &d->cap, (size_t)id + 1, sizeof *d->s)) return TS_ERR_OUT_OF_MEMORY;
    for (size_t i = d->n; i <= (size_t)id; i++) {
        d->s[i] = (series){0};
        d->s[i].hit.series = -1;
        if (!(d->s[i].ring = ts_malloc((size_t)d->window * sizeof(double)))) {
            d->n = i;
            return ts_error(TS_ERR_OUT_OF_MEMORY, "spike detector: no memory for a window of %d values", d->window);
        }
    }
    d->n = (size_t)id + 1;
    return TS_OK;
}

ts_status ts_spikes_push(ts_spikes *d, int64_t step, int id, int order, double value, double *z) {
    if (z) *z = NAN;
    if (!d || id < 0) return ts_error(TS_ERR_INVALID_ARGUMENT, "spike detector: no detector or a negative series id");
    if (step < d->step)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "spike detector: step %lld pushed after step %lld (steps go forward)", (long long)step,
                        (long long)d->step);
    if (step > d->step) {
        commit(d);
        d->step = step;
    }
    ts_status st = reach(d, id);
    if (st) return st;
    series *s = &d->s[id];
    s->pending = true;
    s->value = value;
    ts_spike_hit h = {id, order, value, NAN, NAN, NAN};
    if (!isfinite(value)) {
        h.z = isnan(value) || value > 0 ? INFINITY : -INFINITY;
    } else if (s->n >= d->min_history) {
        for (int i = 0; i < s->n; i++) d->scratch[i] = s->ring[i];
        h.median = median_of(d->scratch, s->n);
        for (int i = 0; i < s->n; i++) d->scratch[i] = fabs(s->ring[i] - h.median);
        h.mad = median_of(d->scratch, s->n);
        double scale = fmax(1.4826 * h.mad, TS_SPIKE_REL_FLOOR * fabs(h.median));
        double dev = value - h.median;
        h.z = scale > 0 ? dev / scale : dev == 0 ? 0 : copysign(INFINITY, dev);
    }
    s->hit = h;
    if (z) *z = h.z;
    int64_t at = d->pushes++;
    if (fabs(h.z) >= d->k) { /* NaN compares false: not yet judged */
        bool earlier = d->first < 0 || order < d->s[d->first].hit.order || (order == d->s[d->first].hit.order && at < d->first_push);
        if (d->first == id) earlier = true; /* pushed again: its new value stands */
        if (earlier) d->first = id, d->first_push = at;
    } else if (d->first == id) { /* pushed again below the threshold: find the next */
        d->first = -1;
        for (size_t i = 0; i < d->n; i++) {
            const series *o = &d->s[i];
            if (!o->pending || !(fabs(o->hit.z) >= d->k)) continue;
            if (d->first < 0 || o->hit.order < d->s[d->first].hit.order) d->first = (int)i;
        }
    }
    return TS_OK;
}

bool ts_spikes_first(const ts_spikes *d, ts_spike_hit *out) {
    ts_spike_hit none = {-1, 0, NAN, NAN, NAN, NAN};
    if (!d || d->first < 0) {
        if (out) *out = none;
        return false;
    }
    if (out) *out = d->s[d->first].hit;
    return true;
}
