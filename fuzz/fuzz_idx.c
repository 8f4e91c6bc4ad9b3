/* fuzz_idx.c -- the IDX parser on arbitrary bytes: errors, never crashes. */
#include <stddef.h>
#include <stdint.h>

#include "io/idx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ts_idx x;
    if (ts_idx_parse(data, size, "fuzz", &x) == TS_OK) {
        /* a success must describe exactly the bytes it kept */
        size_t n = 1;
        for (int i = 0; i < x.ndim; i++) n *= x.dims[i];
        if (n != x.size || 4 + 4 * (size_t)x.ndim + x.size != size) __builtin_trap();
        if (x.size) (void)(volatile uint8_t)x.data[x.size - 1];
    }
    ts_idx_free(&x);
    return 0;
}
