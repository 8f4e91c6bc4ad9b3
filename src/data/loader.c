/* loader.c -- batches of a dataset slice, reshuffled each epoch with a seeded
 * RNG (same seed, same order), gathered into buffers the loader owns. */
#include "data/loader.h"

#include <string.h>

struct ts_loader {
    const float *images;   /* the dataset's, [N, *sample shape] */
    const int32_t *labels; /* [N, *label shape] */
    ts_array im_shape, lb_shape; /* the dataset's shapes (data NULL) */
    int64_t sample, lsample; /* floats per sample, labels per sample */
    ts_loader_config c;    /* count resolved (never 0) */
    int64_t batches;       /* per epoch */
    int64_t usable;        /* samples served per epoch (full batches only with drop_last) */
    int64_t *order;        /* [count] dataset indices of this epoch, in order */
    int64_t pos;           /* samples of this epoch already served */
    int64_t epoch;         /* epochs started */
    bool in_epoch;
    uint64_t rng;
    float *img_buf;        /* [cap, *sample shape] */
    int32_t *lab_buf;      /* [cap, *label shape] */
    int64_t cap;           /* samples the buffers hold */
};

/* splitmix64: tiny, seedable with any value, good enough to shuffle. */
static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

/* Uniform in [0, n) without modulo bias. */
static uint64_t rng_below(uint64_t *s, uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n, r;
    do r = rng_next(s);
    while (r >= limit);
    return r % n;
}

static void start_epoch(ts_loader *l) {
    int64_t n = l->c.count;
    for (int64_t i = 0; i < n; i++) l->order[i] = l->c.first + i;
    if (l->c.shuffle) /* Fisher-Yates */
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)rng_below(&l->rng, (uint64_t)i + 1);
            int64_t t = l->order[i];
            l->order[i] = l->order[j];
            l->order[j] = t;
        }
    l->pos = 0;
    l->epoch++;
    l->in_epoch = true;
}

/* Buffers for `samples` samples; at most once per larger group size. */
static ts_status reserve(ts_loader *l, int64_t samples) {
    if (samples <= l->cap) return TS_OK;
    float *im = ts_realloc(l->img_buf, (size_t)(samples * l->sample) * sizeof *im);
    if (!im) return TS_ERR_OUT_OF_MEMORY;
    l->img_buf = im;
    int32_t *lb = ts_realloc(l->lab_buf, (size_t)(samples * l->lsample) * sizeof *lb);
    if (!lb) return TS_ERR_OUT_OF_MEMORY;
    l->lab_buf = lb;
    l->cap = samples;
    return TS_OK;
}

ts_status ts_loader_new(ts_loader **out, const ts_dataset *d, ts_loader_config c) {
    if (!out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_loader_new: out is NULL");
    *out = NULL;
    if (!d) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_loader_new: dataset is NULL");
    ts_array im, lb;
    ts_status s = ts_dataset_arrays(d, &im, &lb);
    if (s) return s;
    int64_t n = im.shape[0];
    if (c.batch_size < 1)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "loader: batch_size must be >= 1 (got %lld)",
                        (long long)c.batch_size);
    if (c.first < 0 || c.count < 0 || c.first > n || c.count > n - c.first)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "loader: slice first=%lld count=%lld is outside "
                        "the dataset of %lld samples (need 0 <= first, first + count <= %lld; "
                        "count 0 = to the end)", (long long)c.first, (long long)c.count,
                        (long long)n, (long long)n);
    if (c.count == 0) c.count = n - c.first;
    if (c.count == 0)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "loader: slice starting at %lld of a dataset of "
                        "%lld samples is empty", (long long)c.first, (long long)n);
    if (c.drop_last && c.count < c.batch_size)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "loader: a slice of %lld samples has no full "
                        "batch of %lld and drop_last is on; lower batch_size or turn drop_last "
                        "off", (long long)c.count, (long long)c.batch_size);
    ts_loader *l = ts_calloc(1, sizeof *l);
    if (!l) return TS_ERR_OUT_OF_MEMORY;
    l->images = im.data;
    l->labels = lb.data;
    l->im_shape = im;
    l->lb_shape = lb;
    l->sample = n ? ts_array_numel(&im) / n : 0;
    l->lsample = n ? ts_array_numel(&lb) / n : 0;
    l->c = c;
    /* no (count + batch_size - 1): batch_size may be near INT64_MAX */
    l->batches = c.count / c.batch_size + (!c.drop_last && c.count % c.batch_size != 0);
    l->usable = c.drop_last ? l->batches * c.batch_size : c.count;
    l->rng = c.seed;
    l->order = ts_calloc((size_t)c.count, sizeof *l->order);
    if (!l->order || reserve(l, c.batch_size < c.count ? c.batch_size : c.count)) {
        ts_loader_free(l);
        return TS_ERR_OUT_OF_MEMORY;
    }
    *out = l;
    return TS_OK;
}

void ts_loader_free(ts_loader *l) {
    if (!l) return;
    ts_free(l->order);
    ts_free(l->img_buf);
    ts_free(l->lab_buf);
    ts_free(l);
}

int64_t ts_loader_batches(const ts_loader *l) { return l ? l->batches : 0; }

ts_status ts_loader_next(ts_loader *l, int n, ts_array *images, ts_array *labels) {
    if (!l || !images || !labels)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_loader_next: loader or an output is NULL");
    if (n < 1)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_loader_next: n must be >= 1 batch (got %d)",
                        n);
    /* more than the slice is the same as the whole slice (and cannot overflow) */
    int64_t want = l->c.batch_size > l->c.count / n ? l->c.count + 1 : (int64_t)n * l->c.batch_size;
    if (l->c.drop_last && want > l->usable)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_loader_next: %d batches per call, but an "
                        "epoch has only %lld full batches (drop_last is on): nothing could ever "
                        "be served", n, (long long)l->batches);
    if (n > l->c.count)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_loader_next: %d batches per call, but the slice has only %lld samples, "
                        "not one for each: nothing could ever be served", n, (long long)l->c.count);
    if (!l->in_epoch) start_epoch(l);
    int64_t left = l->usable - l->pos;
    /* With drop_last a short group is dropped like a partial batch: a model
     * consuming n batches per run could not use it. */
    if (left <= 0 || (l->c.drop_last && left < want)) {
        l->in_epoch = false;
        return ts_error(TS_ERR_NOT_FOUND, "end of epoch %lld of the loader; the next call starts "
                        "a new one", (long long)l->epoch);
    }
    int64_t take = want < left ? want : left;
    take -= take % n; /* a short last group splits into n equal batches; what does not is dropped */
    if (take == 0) {
        l->in_epoch = false;
        return ts_error(TS_ERR_NOT_FOUND, "end of epoch %lld of the loader; the next call starts "
                        "a new one", (long long)l->epoch);
    }
    ts_status s = reserve(l, take);
    if (s) return s;
    size_t row = (size_t)l->sample * sizeof *l->img_buf, lrow = (size_t)l->lsample * sizeof *l->lab_buf;
    for (int64_t i = 0; i < take; i++) {
        int64_t k = l->order[l->pos + i];
        memcpy(l->img_buf + i * l->sample, l->images + k * l->sample, row);
        memcpy(l->lab_buf + i * l->lsample, l->labels + k * l->lsample, lrow);
    }
    l->pos += take;
    *images = l->im_shape;
    images->shape[0] = take;
    images->data = l->img_buf;
    *labels = l->lb_shape;
    labels->shape[0] = take;
    labels->data = l->lab_buf;
    return TS_OK;
}

void ts_loader_get_pos(const ts_loader *l, ts_loader_pos *out, const int64_t **order) {
    *out = (ts_loader_pos){.epoch = l->epoch, .pos = l->pos, .in_epoch = l->in_epoch, .rng = l->rng, .first = l->c.first,
                           .count = l->c.count, .batch_size = l->c.batch_size, .shuffle = l->c.shuffle != 0,
                           .drop_last = l->c.drop_last != 0, .seed = l->c.seed};
    *order = l->order;
}

ts_status ts_loader_set_pos(ts_loader *l, const ts_loader_pos *p, const int64_t *order, int64_t n) {
    if (p->first != l->c.first || p->count != l->c.count || p->batch_size != l->c.batch_size ||
        p->shuffle != (l->c.shuffle != 0) || p->drop_last != (l->c.drop_last != 0) || p->seed != l->c.seed)
        return ts_error(TS_ERR_INVALID_ARGUMENT,
                        "the checkpoint's data loader served %lld samples from %lld in batches of %lld (seed %llu, shuffle %lld); "
                        "this one serves %lld from %lld in batches of %lld (seed %llu, shuffle %d): resume with the same "
                        "data, --holdout, --batch-size and --seed",
                        (long long)p->count, (long long)p->first, (long long)p->batch_size, (unsigned long long)p->seed,
                        (long long)p->shuffle, (long long)l->c.count, (long long)l->c.first, (long long)l->c.batch_size,
                        (unsigned long long)l->c.seed, l->c.shuffle);
    if (n != l->c.count || p->pos < 0 || p->pos > l->usable || p->epoch < 0)
        return ts_error(TS_ERR_FORMAT, "the checkpoint's data loader position is corrupt");
    for (int64_t i = 0; i < n; i++)
        if (order[i] < l->c.first || order[i] >= l->c.first + l->c.count)
            return ts_error(TS_ERR_FORMAT, "the checkpoint's data loader order is corrupt (index %lld)", (long long)order[i]);
    memcpy(l->order, order, (size_t)n * sizeof *order);
    l->epoch = p->epoch;
    l->pos = p->pos;
    l->in_epoch = p->in_epoch != 0;
    l->rng = p->rng;
    return TS_OK;
}

int64_t ts_loader_epoch(const ts_loader *l) { return l ? l->epoch : 0; }
