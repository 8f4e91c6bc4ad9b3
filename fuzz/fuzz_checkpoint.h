/* fuzz_checkpoint.h -- the checkpoint fuzz targets' harness: checkpoints
 * as `train --resume` reads them, by path through ts_checkpoint_load into a
 * small compiled training model (Adam, so every kind of optimizer record is
 * there) and its loader, with dynamic loss scaling off (fuzz_checkpoint) or
 * on (fuzz_checkpoint_scaled: the `scaler` record is read too). Any bytes
 * give a restored model or an error with a message, never a crash, an
 * overread or an allocation the file does not justify; a refused checkpoint
 * changes nothing; a restored loss scale is in the range docs/reliability.md
 * gives.
 *
 * The harness writes a valid CRC-32C over the input's last 4 bytes, so
 * mutations reach the records behind the checksum.
 *
 * Seeds: `TS_FUZZ_WRITE_SEEDS=fuzz/corpus/<target> build-fuzz/<target>`
 * writes the target's model's checkpoints (with and without the loader)
 * there. */
#ifndef TS_FUZZ_CHECKPOINT_H
#define TS_FUZZ_CHECKPOINT_H

#define _GNU_SOURCE /* memfd_create */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "core/crc32c.h"
#include "tensorscope.h"

static ts_model *model;
static ts_loader *loader;
static ts_tensor *weight;
static ts_options *options; /* kept for the process, like the model */
static ts_dataset *dataset;

/* x [2,3] -> fc 4 -> LogSoftmax -> NllLoss, Adam; 6 samples, shuffled;
 * with `scaling`, dynamic loss scaling from 1024, growing every 2 steps. */
static int build(bool scaling) {
    ts_graph *g = ts_graph_new(3);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){2, 3});
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){2});
    ts_tensor *loss = ts_nll_loss(g, ts_log_softmax(g, ts_linear(g, x, 4, "fc"), 1), y);
    options = ts_options_new();
    if (options && scaling && ts_options_set_loss_scaling(options, 1, 1024.0f, 2.0f, 0.5f, 2)) return -1;
    if (ts_graph_status(g) || !options || ts_model_training(&model, g, loss, options, ts_adam(0.01f)) || ts_model_compile(model))
        return -1;
    static float xs[18];
    static int32_t ls[6] = {0, 1, 2, 3, 0, 1};
    for (int i = 0; i < 18; i++) xs[i] = (float)i / 9.0f - 1.0f;
    ts_array xa = {.dtype = TS_F32, .ndim = 2, .shape = {6, 3}, .data = xs};
    ts_array la = {.dtype = TS_I32, .ndim = 1, .shape = {6}, .data = ls};
    ts_loader_config c = {.batch_size = 2, .count = 6, .shuffle = 1, .seed = 5};
    if (ts_dataset_from_arrays(&dataset, &xa, &la) || ts_loader_new(&loader, dataset, c)) return -1;
    weight = ts_graph_find(g, "fc.weight");
    return weight ? 0 : -1;
}

/* Three training runs, then the checkpoints a real run writes. */
static int write_seeds(const char *dir) {
    ts_array in[2];
    const char *names[2] = {"x", "labels"};
    for (int r = 0; r < 3; r++)
        if (ts_loader_next(loader, 1, &in[0], &in[1]) || ts_model_run(model, names, in, 2)) return -1;
    char p[4096];
    snprintf(p, sizeof p, "%s/adam_with_loader", dir);
    if (ts_checkpoint_save(p, model, loader)) return -1;
    snprintf(p, sizeof p, "%s/adam_model_only", dir);
    return ts_checkpoint_save(p, model, NULL) ? -1 : 0;
}

static void fuzz_checkpoint_init(const char *target, bool scaling) {
    ts_set_log_level(TS_LOG_OFF);
    if (build(scaling)) {
        fprintf(stderr, "%s: cannot build the model: %s\n", target, ts_last_error());
        abort();
    }
    const char *seeds = getenv("TS_FUZZ_WRITE_SEEDS");
    if (seeds && *seeds) {
        if (write_seeds(seeds)) {
            fprintf(stderr, "%s: cannot write seeds to %s: %s\n", target, seeds, ts_last_error());
            exit(1);
        }
        exit(0);
    }
}

static void fuzz_checkpoint_one(const uint8_t *data, size_t size) {
    uint8_t *b = malloc(size ? size : 1);
    if (!b) return;
    memcpy(b, data, size);
    if (size >= 8) {
        uint32_t crc = ts_crc32c(b, size - 4);
        for (int i = 0; i < 4; i++) b[size - 4 + (size_t)i] = (uint8_t)(crc >> (8 * i));
    }
    char path[64];
    int fd = fuzz_file(b, size, path, sizeof path);
    free(b);
    if (fd < 0) return;
    ts_array before, after;
    ts_tensor_info(weight, &before);
    float w0[12];
    memcpy(w0, before.data, sizeof w0);
    double scale0, scale;
    int64_t skipped0, skipped;
    ts_model_loss_scale(model, &scale0, &skipped0);
    ts_status s = ts_checkpoint_load(path, model, (size & 1) ? loader : NULL);
    ts_model_loss_scale(model, &scale, &skipped);
    if (s) {
        ts_tensor_info(weight, &after);
        if (!ts_last_error()[0] || memcmp(w0, after.data, sizeof w0) != 0 || scale != scale0 || skipped != skipped0)
            __builtin_trap(); /* refused: changes nothing */
    } else if (!(scale >= 0x1p-24 && scale <= 0x1p127) || skipped < 0 || ts_model_steps(model) < 0) {
        __builtin_trap(); /* loaded: every number in its range */
    }
    close(fd);
}

#endif
