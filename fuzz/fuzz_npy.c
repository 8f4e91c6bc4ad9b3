/* fuzz_npy.c -- the .npy parser on arbitrary bytes: errors, never crashes. */
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ts_array a;
    if (ts_npy_parse(data, size, &a) == TS_OK) {
        /* a success must be a valid array whose data fits in the input */
        int64_t n = ts_array_numel(&a);
        if (n < 0 || (uint64_t)n * ts_dtype_size(a.dtype) > size) __builtin_trap();
        if (n) (void)((volatile const uint8_t *)a.data)[(size_t)n * ts_dtype_size(a.dtype) - 1];
        ts_npy_free(&a);
    }
    return 0;
}
