/* bench_gpu_stats.c -- the device's stats summary (what a watch costs on a
 * GPU) against the device's own copy of the same bytes, in one process on
 * one GPU (scripts/gpu-check.sh):
 *
 *     bench_gpu_stats [DEVICE]
 *
 * For each case (one tensor of 16 Ki to 64 Mi floats; 64 tensors of 1 Mi;
 * 64 of 4 Ki, a small model's step; 16 Mi with its histograms and range
 * counts too), the summary (stats_reduce_many) and a device-to-device copy
 * of the same tensors, each recorded 10 times in a row as a CUDA graph
 * (what a step's recording holds: no launch's host cost), the two replayed
 * 20 times interleaved and timed on the device's clock (its events), per
 * summary. Prints per case
 *   stats case=C bytes=B stats_us=S copy_us=K stats_gbps=G copy_gbps=H ratio=R
 * G: the bytes the summary reads per second; H: the copy's bytes read and
 * written per second (its memory traffic); R = G / H, the summary's speed
 * as a fraction of what the memory gives a kernel that streams it. Then
 *   transfer bytes=B pageable_us=.. pinned_us=.. pageable_gbps=.. pinned_gbps=..
 * one batch of mlp1000's input sent to the device from the caller's
 * memory and from page-locked memory: what a step's upload costs at best. */
#include "backend/registry/registry.h"
#include "core/stats.h"

#include <stdio.h>
#include <stdlib.h>

#define REPS 20
#define KEEP 10 /* launches a recording repeats */
#define MAX_T 64

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The host-to-device copy a run's input takes (exec/device.c), from
 * page-locked memory and from the caller's: the ceiling of a step's upload */
static int transfer(const ts_backend *be, void *stream) {
    const size_t bytes = (size_t)1000 * 784 * sizeof(float); /* mlp1000's batch */
    void *d = NULL;
    char *h = malloc(bytes);
    if (!h || be->alloc(bytes, &d)) {
        fprintf(stderr, "bench_gpu_stats: no memory for the transfer\n");
        return 1;
    }
    for (size_t i = 0; i < bytes; i++) h[i] = (char)i;
    double t[2][REPS];
    ts_event e[2] = {0};
    for (int k = 0; k < 2; k++) { /* pageable, then page-locked */
        bool pinned = k == 1 && be->host_pin && be->host_pin(h, bytes);
        for (int r = -2; r < REPS; r++) {
            be->event_record(stream, &e[0]);
            be->copy_to_device(stream, d, h, bytes);
            be->event_record(stream, &e[1]);
            if (be->synchronize(stream)) return 1;
            if (r >= 0) t[k][r] = (double)be->event_elapsed_ns(&e[0], &e[1]) * 1e-3;
        }
        if (pinned) be->host_unpin(h);
        qsort(t[k], REPS, sizeof t[k][0], cmp);
    }
    printf("transfer bytes=%zu pageable_us=%.2f pinned_us=%.2f pageable_gbps=%.1f pinned_gbps=%.1f\n", bytes, t[0][REPS / 2], t[1][REPS / 2],
           (double)bytes / (t[0][REPS / 2] * 1e3), (double)bytes / (t[1][REPS / 2] * 1e3));
    if (be->event_free)
        for (int i = 0; i < 2; i++) be->event_free(&e[i]);
    be->free(d);
    free(h);
    return 0;
}

typedef struct bench_case {
    const char *name;
    int tensors;
    int64_t n;     /* floats each */
    int hist_what; /* TS_WATCH_HISTOGRAM | TS_WATCH_RANGE counted too, or 0 */
} bench_case;

int main(int argc, char **argv) {
    const char *device = argc > 1 ? argv[1] : "cuda";
    const ts_backend *be;
    if (ts_backend_for(device, &be)) {
        fprintf(stderr, "bench_gpu_stats: %s\n", ts_last_error());
        return 77;
    }
    if (!be->stats_reduce_many) {
        fprintf(stderr, "bench_gpu_stats: %s reduces no summary on a device\n", device);
        return 2;
    }
    void *stream = NULL;
    if (be->stream_create && be->stream_create(&stream)) {
        fprintf(stderr, "bench_gpu_stats: no stream: %s\n", ts_last_error());
        return 1;
    }
    static const bench_case cases[] = {
        {"1x16Ki", 1, (int64_t)1 << 14, 0},  {"1x1Mi", 1, (int64_t)1 << 20, 0},   {"1x16Mi", 1, (int64_t)1 << 24, 0},
        {"1x64Mi", 1, (int64_t)1 << 26, 0},  {"64x1Mi", 64, (int64_t)1 << 20, 0}, {"64x4Ki", 64, (int64_t)1 << 12, 0},
        {"1x16Mi+hist+range", 1, (int64_t)1 << 24, TS_WATCH_HISTOGRAM | TS_WATCH_RANGE},
    };
    int rc = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0] && !rc; k++) {
        const bench_case *c = &cases[k];
        void *x[MAX_T] = {0}, *y = NULL, *slots = NULL, *hists = NULL;
        size_t bytes = (size_t)c->n * sizeof(float);
        ts_stats_job jobs[MAX_T];
        float *h = malloc(bytes);
        if (!h || be->alloc(bytes * (size_t)c->tensors, &y) || be->alloc(sizeof(ts_device_stats) * MAX_T, &slots) ||
            (c->hist_what && be->alloc(sizeof(ts_device_hist) * (size_t)c->tensors, &hists))) {
            fprintf(stderr, "bench_gpu_stats: no memory for %s\n", c->name);
            return 1;
        }
        for (int64_t i = 0; i < c->n; i++) h[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
        for (int t = 0; t < c->tensors; t++) {
            if (be->alloc(bytes, &x[t])) {
                fprintf(stderr, "bench_gpu_stats: no memory for %s\n", c->name);
                return 1;
            }
            be->copy_to_device(stream, x[t], h, bytes);
            jobs[t] = (ts_stats_job){x[t], c->n, (ts_device_stats *)slots + t, hists ? (ts_device_hist *)hists + t : NULL, c->hist_what};
        }
        /* each recorded KEEP times in a row (as a step's launches are, a
         * CUDA graph), so the launches' host cost is not what is timed */
        void *rec[2] = {NULL, NULL};
        for (int g = 0; g < 2 && be->capture_begin && !rc; g++) {
            rc = be->capture_begin(stream, 0, &rec[g]) != TS_OK;
            for (int i = 0; i < KEEP && !rc; i++)
                if (g == 0) be->stats_reduce_many(stream, jobs, c->tensors);
                else
                    for (int t = 0; t < c->tensors; t++) be->copy_on_device(stream, (char *)y + (size_t)t * bytes, x[t], bytes);
            if (!rc) rc = be->capture_end(stream, rec[g]) != TS_OK;
        }
        double ts[REPS], tc[REPS];
        ts_event e[3] = {0};
        for (int r = -2; r < REPS && !rc; r++) { /* 2 warm-ups */
            be->event_record(stream, &e[0]);
            if (rec[0]) be->replay(stream, rec[0], true);
            else be->stats_reduce_many(stream, jobs, c->tensors);
            be->event_record(stream, &e[1]);
            if (rec[1]) be->replay(stream, rec[1], true);
            else
                for (int t = 0; t < c->tensors; t++) be->copy_on_device(stream, (char *)y + (size_t)t * bytes, x[t], bytes);
            be->event_record(stream, &e[2]);
            if (be->synchronize(stream)) rc = 1;
            double per = rec[0] ? 1e-3 / KEEP : 1e-3;
            if (r >= 0) ts[r] = (double)be->event_elapsed_ns(&e[0], &e[1]) * per, tc[r] = (double)be->event_elapsed_ns(&e[1], &e[2]) * per;
        }
        if (rc) fprintf(stderr, "bench_gpu_stats: %s: %s\n", c->name, ts_last_error());
        for (int g = 0; g < 2; g++)
            if (rec[g]) be->recording_free(rec[g]);
        if (be->event_free)
            for (int i = 0; i < 3; i++) be->event_free(&e[i]);
        if (!rc) {
            qsort(ts, REPS, sizeof ts[0], cmp);
            qsort(tc, REPS, sizeof tc[0], cmp);
            double total = (double)bytes * c->tensors, s = ts[REPS / 2], cp = tc[REPS / 2];
            double g = total / (s * 1e3), gc = 2.0 * total / (cp * 1e3);
            printf("stats case=%s bytes=%.0f stats_us=%.2f copy_us=%.2f stats_gbps=%.1f copy_gbps=%.1f ratio=%.2f\n", c->name, total, s,
                   cp, g, gc, g / gc);
        }
        for (int t = 0; t < c->tensors; t++) be->free(x[t]);
        be->free(y), be->free(slots), be->free(hists), free(h);
    }
    if (!rc) rc = transfer(be, stream);
    if (be->stream_destroy) be->stream_destroy(stream);
    return rc;
}
