/* bundle_none.c -- `tensorscope debug-run` in a build without libarchive
 * (or without cairo or protobuf-c, whose versions bundle.c reports): it
 * says what to install (features.c) before running anything. */
#include "core/core.h"

ts_status ts_debug_run(const ts_debug_run_config *c, int *child_status) {
    (void)c, (void)child_status;
    return ts_feature_unsupported("debug-bundle");
}
