/* fuzz_checkpoint.c -- checkpoints into a model without loss scaling
 * (fuzz_checkpoint.h says what is asked of every load). Seeds:
 * fuzz/corpus/fuzz_checkpoint/. */
#include "fuzz_checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_checkpoint_init("fuzz_checkpoint", false);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_checkpoint_one(data, size);
    return 0;
}
