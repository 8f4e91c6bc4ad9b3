/* features.c -- which optional features this build has (ts_has_feature),
 * and the one refusal a feature built without its library gives at use.
 * CMake sets TS_HAVE_<LIB> on this file alone; the features themselves are
 * real sources or their *_none.c stand-ins, picked at configure. */
#include "core.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#ifndef TS_HAVE_CAIRO
#define TS_HAVE_CAIRO 0
#endif
#ifndef TS_HAVE_PROTOBUFC
#define TS_HAVE_PROTOBUFC 0
#endif
#ifndef TS_HAVE_ARCHIVE
#define TS_HAVE_ARCHIVE 0
#endif
#ifndef TS_HAVE_BUNDLE
#define TS_HAVE_BUNDLE 0
#endif
#ifndef TS_HAVE_UNWIND
#define TS_HAVE_UNWIND 0
#endif
#ifndef TS_HAVE_MPI
#define TS_HAVE_MPI 0
#endif
#ifndef TS_HAVE_CUDA
#define TS_HAVE_CUDA 0
#endif

#define INSTALL(pkgs) "apt-get install " pkgs ", then rebuild tensorscope"
#define PROTOBUFC INSTALL("libprotobuf-c-dev protobuf-c-compiler")

static const struct feature {
    const char *name;  /* what ts_has_feature takes */
    int built;
    const char *needs; /* "<what> need(s) <library>" */
    const char *fix;
} features[] = {
    {"plots", TS_HAVE_CAIRO, "plots need cairo", INSTALL("libcairo2-dev")},
    {"onnx", TS_HAVE_PROTOBUFC, "ONNX import needs protobuf-c", PROTOBUFC},
    {"tensorboard", TS_HAVE_PROTOBUFC, "TensorBoard event files need protobuf-c", PROTOBUFC},
    {"npz", TS_HAVE_ARCHIVE, ".npz files need libarchive", INSTALL("libarchive-dev")},
    {"debug-bundle", TS_HAVE_BUNDLE, "the debug bundle (debug-run) needs libarchive", INSTALL("libarchive-dev")},
    {"unwind", TS_HAVE_UNWIND, "crash backtraces through libunwind need libunwind", INSTALL("libunwind-dev")},
    {"mpi", TS_HAVE_MPI, "replicas and pipeline stages need MPI", INSTALL("libopenmpi-dev openmpi-bin")},
    {"cuda", TS_HAVE_CUDA, "a CUDA device needs tensorscope built with CUDA",
     "apt-get install nvidia-cuda-toolkit (or NVIDIA's CUDA toolkit: nvcc and cuBLAS), then rebuild tensorscope; or run with --device cpu"},
};

static const struct feature *find(const char *name) {
    for (size_t i = 0; name && i < TS_ARRAY_LEN(features); i++)
        if (strcmp(features[i].name, name) == 0) return &features[i];
    return NULL;
}

int ts_has_feature(const char *name) {
    const struct feature *f = find(name);
    return f && f->built;
}

static ts_status unknown(const char *name) {
    char list[160] = "";
    for (size_t i = 0; i < TS_ARRAY_LEN(features); i++) {
        if (i) strncat(list, ", ", sizeof list - strlen(list) - 1);
        strncat(list, features[i].name, sizeof list - strlen(list) - 1);
    }
    return ts_error(TS_ERR_INVALID_ARGUMENT, "unknown feature '%s': the features are %s", name ? name : "(null)", list);
}

ts_status ts_feature_unsupported(const char *name) {
    const struct feature *f = find(name);
    if (!f) return unknown(name);
    return ts_error(TS_ERR_UNSUPPORTED, "%s: %s", f->needs, f->fix);
}

ts_status ts_require_feature(const char *name) {
    const struct feature *f = find(name);
    if (!f) return unknown(name);
    return f->built ? TS_OK : ts_feature_unsupported(name);
}

static char feature_line[256];
static pthread_once_t feature_line_once = PTHREAD_ONCE_INIT;

static void make_feature_line(void) {
    for (size_t i = 0; i < TS_ARRAY_LEN(features); i++) {
        size_t used = strlen(feature_line);
        snprintf(feature_line + used, sizeof feature_line - used, "%s%s %s", i ? ", " : "", features[i].name,
                 features[i].built ? "yes" : "no");
    }
}

const char *ts_features(void) {
    pthread_once(&feature_line_once, make_feature_line);
    return feature_line;
}
