/* test_checkpoint.c -- checkpoint and resume on the tutorial MLP: a run
 * interrupted after k runs, saved, and resumed in a fresh process state
 * (new graph, model and loader) writes the same weights, bit for bit, as the
 * run never interrupted -- with SGD momentum and with Adam, D = 2 and A = 2,
 * a shuffling loader crossing epoch boundaries, and a cosine schedule.
 * Bad checkpoints (corrupt byte, truncated, another optimizer, schedule or
 * loader) are refused and change nothing. */
#include "check.h"
#include "mlp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/crc32c.h"

enum { B = 50, D = 2, A = 2, RUNS = 8 };

typedef struct job {
    mlp n;
    ts_model *m;
    ts_loader *l;
    ts_options *o;
} job;

static ts_dataset *ds;

static void job_start(job *j, ts_optimizer opt, uint64_t loader_seed) {
    memset(j, 0, sizeof *j);
    test_mlp_build(&j->n, B, 7);
    j->o = ts_options_new();
    ts_options_set_device_iterations(j->o, D);
    ts_options_set_gradient_accumulation(j->o, A);
    CHECK_OK(ts_model_training(&j->m, j->n.g, j->n.loss, j->o, opt), "training model");
    CHECK_OK(ts_model_compile(j->m), "compile");
    ts_lr_schedule cos = {.kind = TS_LR_COSINE, .warmup_steps = 3, .total_steps = 13};
    CHECK_OK(ts_model_set_lr_schedule(j->m, &cos), "cosine schedule");
    /* 700 images, 14 batches an epoch: 3 runs of D x A = 4, the rest dropped */
    ts_loader_config c = {.batch_size = B, .first = 100, .count = 700, .shuffle = 1, .seed = loader_seed, .drop_last = 1};
    CHECK_OK(ts_loader_new(&j->l, ds, c), "loader");
}

static void job_runs(job *j, int runs) {
    const char *names[2] = {"x", "labels"};
    for (int r = 0; r < runs; r++) {
        ts_array in[2];
        ts_status st = ts_loader_next(j->l, D * A, &in[0], &in[1]);
        if (st == TS_ERR_NOT_FOUND) st = ts_loader_next(j->l, D * A, &in[0], &in[1]); /* a new epoch */
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

/* Bitwise equality of every parameter. */
static int same_params(const ts_graph *a, const ts_graph *b) {
    for (size_t i = 0; i < ts_graph_tensor_count(a); i++) {
        ts_array x, y;
        ts_tensor_info(ts_graph_tensor_at(a, i), &x);
        if (!x.data) continue;
        ts_tensor_info(ts_graph_find(b, ts_tensor_name(ts_graph_tensor_at(a, i))), &y);
        if (!y.data || memcmp(x.data, y.data, (size_t)ts_array_numel(&x) * sizeof(float)) != 0) return 0;
    }
    return 1;
}

static void test_resume(const char *what, ts_optimizer opt, const char *path) {
    printf("-- %s: %d runs straight vs 3 + save + resume + %d\n", what, RUNS, RUNS - 3);
    job ref, a, b;
    job_start(&ref, opt, 11);
    job_runs(&ref, RUNS);
    job_start(&a, opt, 11);
    job_runs(&a, 3);
    CHECK_OK(ts_checkpoint_save(path, a.m, a.l), "save after 3 runs");
    job_runs(&a, 1); /* what happens after the save must not matter */
    job_end(&a);
    job_start(&b, opt, 11);
    CHECK_OK(ts_checkpoint_load(path, b.m, b.l), "load into a fresh model and loader");
    CHECK(ts_model_runs(b.m) == 3 && ts_model_steps(b.m) == 3 * D && ts_loader_epoch(b.l) == 1,
          "counts restored: %lld runs, %lld steps, loader epoch %lld", (long long)ts_model_runs(b.m), (long long)ts_model_steps(b.m),
          (long long)ts_loader_epoch(b.l));
    job_runs(&b, RUNS - 3);
    CHECK(ts_model_steps(b.m) == ts_model_steps(ref.m) && ts_loader_epoch(b.l) == ts_loader_epoch(ref.l) && ts_loader_epoch(b.l) >= 3,
          "same step (%lld) and epoch (%lld) as the straight run", (long long)ts_model_steps(b.m), (long long)ts_loader_epoch(b.l));
    CHECK(same_params(ref.n.g, b.n.g), "%s: the resumed run's weights equal the straight run's, bit for bit", what);
    CHECK(ts_model_learning_rate(b.m) == ts_model_learning_rate(ref.m), "and its learning rate (%g)", ts_model_learning_rate(b.m));
    job_end(&b);
    job_end(&ref);
}

static void test_refusals(const char *path) {
    printf("-- checkpoints that do not fit are refused and change nothing\n");
    job a, b;
    job_start(&a, ts_sgd(0.05f, 0.9f, 0.0f), 11);
    job_runs(&a, 2);
    CHECK_OK(ts_checkpoint_save(path, a.m, a.l), "save");
    job_end(&a);
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    unsigned char *bytes = malloc((size_t)size);
    fseek(f, 0, SEEK_SET);
    CHECK(fread(bytes, 1, (size_t)size, f) == (size_t)size && memcmp(bytes, "TSCKPT", 6) == 0, "the file starts with TSCKPT (%ld bytes)", size);
    fclose(f);

    char bad[1200];
    snprintf(bad, sizeof bad, "%s.bad", path);
    job_start(&b, ts_sgd(0.05f, 0.9f, 0.0f), 11);
    job ref;
    job_start(&ref, ts_sgd(0.05f, 0.9f, 0.0f), 11);
    bytes[size / 2] ^= 0x10;
    f = fopen(bad, "wb");
    fwrite(bytes, 1, (size_t)size, f);
    fclose(f);
    ts_status st = ts_checkpoint_load(bad, b.m, b.l);
    CHECK(st == TS_ERR_FORMAT && strstr(ts_last_error(), "checksum"), "one flipped bit: TS_ERR_FORMAT: %s", ts_last_error());
    bytes[size / 2] ^= 0x10;
    f = fopen(bad, "wb");
    fwrite(bytes, 1, (size_t)size - 100, f);
    fclose(f);
    st = ts_checkpoint_load(bad, b.m, b.l);
    CHECK(st == TS_ERR_FORMAT, "truncated: TS_ERR_FORMAT: %s", ts_last_error());
    st = ts_checkpoint_load("/nonexistent/ckpt", b.m, b.l);
    CHECK(st == TS_ERR_IO && strstr(ts_last_error(), "/nonexistent/ckpt"), "missing file: TS_ERR_IO naming it");
    CHECK(same_params(ref.n.g, b.n.g) && ts_model_steps(b.m) == 0, "after the refusals the model is untouched");
    job_end(&b);

    job_start(&b, ts_adam(1e-3f), 11);
    st = ts_checkpoint_load(path, b.m, b.l);
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "optimizer"), "an SGD checkpoint into an Adam model: %s", ts_last_error());
    job_end(&b);
    job_start(&b, ts_sgd(0.05f, 0.9f, 0.0f), 12);
    st = ts_checkpoint_load(path, b.m, b.l);
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "--seed"), "another loader seed: %s", ts_last_error());
    CHECK(same_params(ref.n.g, b.n.g) && ts_model_steps(b.m) == 0, "and the model is untouched");
    ts_model_set_lr_schedule(b.m, NULL);
    st = ts_checkpoint_load(path, b.m, NULL);
    CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "schedule"), "another learning-rate schedule: %s", ts_last_error());
    ts_model_set_lr_schedule(b.m, &(ts_lr_schedule){.kind = TS_LR_COSINE, .warmup_steps = 3, .total_steps = 13});
    CHECK_OK(ts_checkpoint_load(path, b.m, NULL), "without a loader: the model alone");
    CHECK(ts_model_steps(b.m) == 2 * D, "its steps restored (%lld)", (long long)ts_model_steps(b.m));
    job_end(&b);
    job_end(&ref);
    free(bytes);
    remove(bad);
}

/* The file's bytes with the checksum made right again after an edit. */
static void write_fixed(const char *path, unsigned char *b, size_t n) {
    uint32_t crc = ts_crc32c(b, n - 4);
    for (int i = 0; i < 4; i++) b[n - 4 + (size_t)i] = (unsigned char)(crc >> (8 * i));
    FILE *f = fopen(path, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
}

/* CPU seconds of this process (what a refusal costs, whatever the machine's
 * load), or wall seconds (a hang never returns) */
static double seconds_of(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* A checkpoint is an untrusted file: counts are checked against the bytes
 * there before allocating, only regular files are read, and values the
 * file holds are never cast unchecked. */
static void test_untrusted(const char *path) {
    printf("-- untrusted checkpoints\n");
    job a;
    job_start(&a, ts_sgd(0.05f, 0.9f, 0.0f), 11);
    job_runs(&a, 2);
    CHECK_OK(ts_checkpoint_save(path, a.m, a.l), "save");
    FILE *f = fopen(path, "rb");
    static unsigned char b[1 << 22];
    size_t n = fread(b, 1, sizeof b, f);
    fclose(f);
    char bad[1200];
    snprintf(bad, sizeof bad, "%s.bad", path);

    uint32_t count = (uint32_t)b[12] | (uint32_t)b[13] << 8 | (uint32_t)b[14] << 16 | (uint32_t)b[15] << 24;
    b[12] = 0, b[13] = 0, b[14] = 0x10, b[15] = 0; /* 1048576 records */
    write_fixed(bad, b, n);
    double t0 = seconds_of(CLOCK_PROCESS_CPUTIME_ID);
    ts_status st = ts_checkpoint_load(bad, a.m, a.l);
    double dt = seconds_of(CLOCK_PROCESS_CPUTIME_ID) - t0;
    CHECK(st == TS_ERR_FORMAT && strstr(ts_last_error(), "1048576 records") && strstr(ts_last_error(), "hold at most") && dt < 2,
          "a count of 1048576 records in %zu bytes: refused before allocating, in %.3f s of CPU: %s", n, dt, ts_last_error());
    for (int i = 0; i < 4; i++) b[12 + i] = (unsigned char)(count >> (8 * i));

    /* the schedule record: f64 {base rate 0.05, kind 2 (cosine), ...} */
    double lr_kind[2] = {(double)0.05f, 2.0}, huge = 1e300;
    unsigned char *k = NULL;
    for (size_t i = 0; i + sizeof lr_kind <= n && !k; i++)
        if (memcmp(b + i, lr_kind, sizeof lr_kind) == 0) k = b + i + 8;
    CHECK(k != NULL, "the schedule's kind found in the file");
    if (k) {
        memcpy(k, &huge, sizeof huge);
        write_fixed(bad, b, n);
        st = ts_checkpoint_load(bad, a.m, a.l);
        CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "a corrupt learning-rate schedule"),
              "a schedule kind of 1e300: refused, named corrupt: %s", ts_last_error());
    }

    remove(bad);
    CHECK(mkfifo(bad, 0600) == 0, "mkfifo");
    t0 = seconds_of(CLOCK_MONOTONIC);
    st = ts_checkpoint_load(bad, a.m, a.l);
    dt = seconds_of(CLOCK_MONOTONIC) - t0;
    CHECK(st == TS_ERR_IO && strstr(ts_last_error(), "not a regular file") && strstr(ts_last_error(), bad) && dt < 60,
          "a FIFO as the checkpoint: an error (in %.3f s), not a hang: %s", dt, ts_last_error());
    remove(bad);
    CHECK(symlink(path, bad) == 0, "a symbolic link to a good checkpoint");
    st = ts_checkpoint_load(bad, a.m, a.l);
    CHECK(st == TS_ERR_IO && strstr(ts_last_error(), "symbolic link") && strstr(ts_last_error(), bad),
          "a link is not followed (docs/reliability.md, rule 1): %s", ts_last_error());
    remove(bad);
    CHECK(ts_model_steps(a.m) == 2 * D, "the model kept its own state (%lld steps)", (long long)ts_model_steps(a.m));
    job_end(&a);
}

int main(void) {
    alarm(300); /* a reader that waits on a FIFO fails here rather than hanging */
    const char *src = getenv("TS_SOURCE_DIR");
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/data/mnist", src ? src : ".");
    ts_status st = ts_dataset_load_mnist(&ds, dir);
    CHECK_OK(st, "MNIST from %s", dir);
    if (st) return check_summary("test_checkpoint");
    snprintf(path, sizeof path, "%s/ts_ckpt_%d.tsck", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    test_resume("SGD momentum 0.9, weight decay", ts_sgd(0.05f, 0.9f, 1e-4f), path);
    test_resume("Adam", ts_adam(1e-3f), path);
    test_resume("AdamW", ts_adamw(1e-3f, 0.01f), path);
    test_refusals(path);
    test_untrusted(path);
    remove(path);
    ts_dataset_free(ds);
    return check_summary("test_checkpoint");
}
