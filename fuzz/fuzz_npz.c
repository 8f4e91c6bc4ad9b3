/* fuzz_npz.c -- .npz archives as the product reads them: by path through
 * ts_npz_load (`train --data`, `--weights`, `compare`), then every member
 * asked for by name, as ts_dataset_load_arrays and ts_graph_load_weights do.
 * Any bytes give arrays or errors with a message, never a crash, an
 * overread, or more inflated than TS_LIMIT_ARCHIVE_BYTES allows (set low
 * here, so a bomb is refused well inside libFuzzer's -rss_limit_mb). */
/* needs: npz */
#define _GNU_SOURCE /* memfd_create */
#include <string.h>

#include "fuzz_file.h"
#include "tensorscope.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define LIMIT ((uint64_t)16 << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int init;
    if (!init) {
        ts_set_log_level(TS_LOG_OFF);
        ts_set_limit(TS_LIMIT_ARCHIVE_BYTES, LIMIT);
        init = 1;
    }
    char path[64];
    int fd = fuzz_file(data, size, path, sizeof path);
    if (fd < 0) return 0;
    ts_npz *z = NULL;
    if (ts_npz_load(path, &z) == TS_OK) {
        uint64_t total = 0;
        for (size_t i = 0; i < ts_npz_count(z); i++) {
            const char *name = ts_npz_name(z, i);
            const ts_array *a = NULL;
            if (!name || !ts_npz_has(z, name)) __builtin_trap();
            ts_status s = ts_npz_get(z, name, &a);
            if (s == TS_OK) {
                int64_t n = ts_array_numel(a);
                size_t es = ts_dtype_size(a->dtype);
                if (!a->data || n < 0 || es == 0) __builtin_trap();
                total += (uint64_t)n * es;
                if (total > 4 * LIMIT) __builtin_trap(); /* widened at most 4x (u1 -> i32) from what the limit let in */
                if (n > 0) (void)((volatile const uint8_t *)a->data)[(size_t)n * es - 1];
                if (ts_npz_array(z, i) != a || ts_npz_find(z, name) != a) __builtin_trap(); /* read once, kept */
            } else if (a || !ts_last_error()[0] || ts_npz_get(z, name, &a) != s) {
                __builtin_trap(); /* an error says why, and sticks */
            }
        }
        ts_npz_free(z);
    } else if (z || !ts_last_error()[0]) {
        __builtin_trap();
    }
    close(fd);
    return 0;
}
