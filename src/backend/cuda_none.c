/* cuda_none.c -- the CUDA backend's stand-in in a build without CUDA. */
#include "backend/backend.h"

ts_status ts_backend_cuda(int ordinal, const ts_backend **out) {
    (void)ordinal;
    *out = NULL;
    return ts_require_feature("cuda");
}

ts_status ts_backend_cuda_describe(int ordinal, char *buf, size_t n) {
    (void)ordinal, (void)buf, (void)n;
    return ts_require_feature("cuda");
}

ts_status ts_backend_cuda_count(int *count) {
    *count = 0;
    return ts_require_feature("cuda");
}
