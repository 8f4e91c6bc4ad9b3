/* fuzz_npy_load.c -- .npy files as the product reads them: by path through
 * ts_npy_load (`inspect`, `train --weights`), then, like --weights does,
 * into a parameter with ts_param_set. Any bytes give an array or an error
 * with a message, never a crash or an overread. */
#define _GNU_SOURCE /* memfd_create */
#include <string.h>

#include "fuzz_file.h"
#include "tensorscope.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static ts_graph *g;
static ts_tensor *w;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g) {
        ts_set_log_level(TS_LOG_OFF);
        g = ts_graph_new(1);
        w = ts_param(g, "w", 2, (int64_t[]){2, 3});
    }
    char path[64];
    int fd = fuzz_file(data, size, path, sizeof path);
    if (fd < 0) return 0;
    ts_array a;
    if (ts_npy_load(path, &a) == TS_OK) {
        int64_t n = ts_array_numel(&a);
        size_t es = ts_dtype_size(a.dtype);
        if (n < 0 || es == 0 || (uint64_t)n * es > size) __builtin_trap(); /* more data than the file held */
        if (n > 0) (void)((volatile const uint8_t *)a.data)[(size_t)n * es - 1];
        (void)ts_param_set(w, &a); /* wrong dtype or shape: an error */
        ts_npy_free(&a);
    } else if (!ts_last_error()[0]) {
        __builtin_trap();
    }
    close(fd);
    return 0;
}
