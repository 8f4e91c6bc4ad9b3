/* fuzz_tfrecord.c -- TFRecord framing (TensorBoard event files): any bytes
 * give records or TS_ERR_FORMAT, never a read outside the input. */
#include "io/tfrecord.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t pos = 0, n = 0;
    const uint8_t *rec = NULL;
    volatile uint8_t sink = 0;
    while (ts_tfrecord_next(data, size, &pos, &rec, &n, "fuzz") == TS_OK && rec) {
        if (n) sink ^= rec[0] ^ rec[n - 1];
    }
    (void)sink;
    return 0;
}
