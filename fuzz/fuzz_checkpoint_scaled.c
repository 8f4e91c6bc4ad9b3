/* fuzz_checkpoint_scaled.c -- checkpoints into a model with dynamic loss
 * scaling on, so the `scaler` record (scale, good and skipped steps) is
 * read and range-checked too (fuzz_checkpoint.h says what is asked of
 * every load). Seeds: fuzz/corpus/fuzz_checkpoint_scaled/, written by this
 * target's model after three runs. */
#include "fuzz_checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_checkpoint_init("fuzz_checkpoint_scaled", true);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_checkpoint_one(data, size);
    return 0;
}
