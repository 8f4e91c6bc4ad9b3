/* test_checkpoint_values.c -- every number a checkpoint holds is range
 * checked before it is used: a checkpoint of a model trained with dynamic
 * loss scaling, edited one value at a time (its checksum made right again),
 * is refused with TS_ERR_FORMAT naming the record and the value, and the
 * model and loader it was loaded into keep their own state. The edits: a
 * loss scale of inf, NaN, 0, -1, 1e-300 and 1e300; good or skipped steps
 * of NaN, 1e30 (a cast to int64 would be undefined), -1 and 0.5; steps,
 * runs and the loader's epoch of 2^63-1; a NaN or infinite parameter,
 * optimizer state or step count. The file unedited loads and restores the
 * scale and its counters. */
#include "check.h"
#include "mlp.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/crc32c.h"

enum { B = 20 };

typedef struct job {
    mlp n;
    ts_model *m;
    ts_loader *l;
    ts_options *o;
} job;

static ts_dataset *ds;

static void job_start(job *j, ts_optimizer opt) {
    memset(j, 0, sizeof *j);
    test_mlp_build(&j->n, B, 7);
    j->o = ts_options_new();
    CHECK_OK(ts_options_set_loss_scaling(j->o, 1, 1024.0f, 2.0f, 0.5f, 3), "loss scaling on");
    CHECK_OK(ts_model_training(&j->m, j->n.g, j->n.loss, j->o, opt), "training model");
    CHECK_OK(ts_model_compile(j->m), "compile");
    ts_loader_config c = {.batch_size = B, .first = 0, .count = 200, .shuffle = 1, .seed = 3, .drop_last = 1};
    CHECK_OK(ts_loader_new(&j->l, ds, c), "loader");
}

static void job_runs(job *j, int runs) {
    const char *names[2] = {"x", "labels"};
    for (int r = 0; r < runs; r++) {
        ts_array in[2];
        ts_status st = ts_loader_next(j->l, 1, &in[0], &in[1]);
        if (st == TS_ERR_NOT_FOUND) st = ts_loader_next(j->l, 1, &in[0], &in[1]);
        if (st || (st = ts_model_run(j->m, names, in, 2))) {
            CHECK_OK(st, "run");
            return;
        }
    }
}

static void job_end(job *j) {
    ts_model_free(j->m);
    ts_loader_free(j->l);
    ts_options_free(j->o);
    ts_graph_free(j->n.g);
}

/* The file's bytes: the offset of record `name`'s array data (after its
 * .npy header), or 0. */
static size_t record_data(const unsigned char *b, size_t n, const char *name) {
    size_t len = strlen(name);
    for (size_t i = 16; i + 4 + len + 8 + 10 <= n; i++) {
        uint32_t nl = (uint32_t)b[i] | (uint32_t)b[i + 1] << 8 | (uint32_t)b[i + 2] << 16 | (uint32_t)b[i + 3] << 24;
        if (nl != len || memcmp(b + i + 4, name, len) != 0) continue;
        const unsigned char *npy = b + i + 4 + len + 8;
        if (memcmp(npy, "\x93NUMPY", 6) != 0) continue;
        size_t hl = (size_t)npy[8] | (size_t)npy[9] << 8;
        return (size_t)(npy - b) + 10 + hl;
    }
    return 0;
}

static void write_fixed(const char *path, unsigned char *b, size_t n) {
    uint32_t crc = ts_crc32c(b, n - 4);
    for (int i = 0; i < 4; i++) b[n - 4 + (size_t)i] = (unsigned char)(crc >> (8 * i));
    FILE *f = fopen(path, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
}

static unsigned char *file;
static size_t file_n;
static char bad[1200];

/* One edit: `size` bytes of `value` at element `index` of record `rec`;
 * the load must fail with TS_ERR_FORMAT and a message holding `want`, and
 * the model keep its state. The edit is undone after. */
static void refused(job *j, const char *what, const char *rec, size_t index, const void *value, size_t size, const char *want) {
    size_t at = record_data(file, file_n, rec);
    CHECK(at != 0, "%s: record '%s' found in the file", what, rec);
    if (!at) return;
    at += index * size;
    unsigned char saved[8];
    memcpy(saved, file + at, size);
    memcpy(file + at, value, size);
    write_fixed(bad, file, file_n);
    double scale_before;
    int64_t skipped_before;
    ts_model_loss_scale(j->m, &scale_before, &skipped_before);
    int64_t steps = ts_model_steps(j->m), runs = ts_model_runs(j->m), epoch = ts_loader_epoch(j->l);
    ts_status st = ts_checkpoint_load(bad, j->m, j->l);
    double scale;
    int64_t skipped;
    ts_model_loss_scale(j->m, &scale, &skipped);
    CHECK(st == TS_ERR_FORMAT && strstr(ts_last_error(), rec) && strstr(ts_last_error(), want), "%s: refused (%s): %s", what,
          ts_status_name(st), ts_last_error());
    CHECK(ts_model_steps(j->m) == steps && ts_model_runs(j->m) == runs && ts_loader_epoch(j->l) == epoch && scale == scale_before &&
              skipped == skipped_before,
          "%s: the model and loader keep their state", what);
    memcpy(file + at, saved, size);
}

int main(void) {
    const char *src = getenv("TS_SOURCE_DIR");
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/data/mnist", src ? src : ".");
    ts_status st = ts_dataset_load_mnist(&ds, dir);
    CHECK_OK(st, "MNIST from %s", dir);
    if (st) return check_summary("test_checkpoint_values");
    snprintf(path, sizeof path, "%s/ts_ckptv_%d.tsck", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    snprintf(bad, sizeof bad, "%s.bad", path);

    job a, b;
    job_start(&a, ts_adam(1e-3f));
    job_runs(&a, 4);
    double scale_a;
    int64_t skipped_a;
    CHECK(ts_model_loss_scale(a.m, &scale_a, &skipped_a) == 1, "loss scaling is on");
    CHECK_OK(ts_checkpoint_save(path, a.m, a.l), "save after 4 runs (scale %g)", scale_a);
    FILE *f = fopen(path, "rb");
    static unsigned char buf[1 << 23];
    file_n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    file = buf;
    CHECK(file_n > 100 && file_n < sizeof buf, "the checkpoint read back (%zu bytes)", file_n);

    job_start(&b, ts_adam(1e-3f));
    job_runs(&b, 1);
    const double inf = INFINITY, nan_ = NAN, zero = 0, minus = -1, tiny = 1e-300, huge = 1e300, big = 1e30, half = 0.5;
    refused(&b, "a loss scale of inf", "scaler", 0, &inf, 8, "the loss scale inf");
    refused(&b, "a loss scale of NaN", "scaler", 0, &nan_, 8, "the loss scale nan");
    refused(&b, "a loss scale of 0", "scaler", 0, &zero, 8, "the loss scale 0");
    refused(&b, "a loss scale of -1", "scaler", 0, &minus, 8, "the loss scale -1");
    refused(&b, "a loss scale of 1e-300", "scaler", 0, &tiny, 8, "the loss scale 1e-300");
    refused(&b, "a loss scale of 1e300", "scaler", 0, &huge, 8, "it must be a finite number from 5.9604644775390625e-08 to 1.7014118346046923e+38");
    refused(&b, "good steps of NaN", "scaler", 1, &nan_, 8, "the good steps in a row nan");
    refused(&b, "good steps of 1e30", "scaler", 1, &big, 8, "the good steps in a row 1e+30");
    refused(&b, "good steps of 0.5", "scaler", 1, &half, 8, "it must be a whole number");
    refused(&b, "skipped steps of -1", "scaler", 2, &minus, 8, "the skipped steps -1");
    refused(&b, "skipped steps of 1e30", "scaler", 2, &big, 8, "the skipped steps 1e+30; it must be a whole number from 0 to 1099511627776");
    const int64_t top = INT64_MAX, neg = -1;
    refused(&b, "steps of 2^63-1", "meta", 0, &top, 8, "the step count 9.2233720368547758e+18");
    refused(&b, "runs of 2^63-1", "meta", 1, &top, 8, "the run count 9.2233720368547758e+18");
    refused(&b, "runs of -1", "meta", 1, &neg, 8, "the run count -1");
    refused(&b, "a loader epoch of 2^63-1", "loader", 0, &top, 8, "the epoch 9.2233720368547758e+18");
    const float fnan = NAN, finf = INFINITY;
    refused(&b, "a NaN weight", "param/fc1.weight", 17, &fnan, 4, "holds 1 NaN or infinite value of 250880; these are not usable weights");
    refused(&b, "an infinite Adam moment", "accl2/fc2.bias", 3, &finf, 4, "this is not a usable optimizer state");
    refused(&b, "a NaN step count", "step/fc3.bias", 0, &fnan, 4, "the step count nan");

    /* unedited: it loads, the scale and its counters go on where they were */
    CHECK_OK(ts_checkpoint_load(path, b.m, b.l), "the checkpoint as written loads");
    double scale;
    int64_t skipped;
    ts_model_loss_scale(b.m, &scale, &skipped);
    CHECK(scale == scale_a && skipped == skipped_a && ts_model_steps(b.m) == ts_model_steps(a.m),
          "the scale (%g), skipped steps (%lld) and steps (%lld) restored", scale, (long long)skipped, (long long)ts_model_steps(b.m));
    job_end(&b);
    job_end(&a);
    remove(bad);
    remove(path);
    ts_dataset_free(ds);
    return check_summary("test_checkpoint_values");
}
