/* weights.c -- a graph's parameter values to and from files: one .npz
 * archive, or a directory of `<name>.npy` files (what `--save-weights DIR`
 * writes). Loading is strict, like PyTorch's load_state_dict: every
 * parameter must be there with its shape, and nothing else may be; or,
 * like its strict=False, takes the arrays that are parameters and names
 * the rest (a reference's weights against an export that folded some). */
#include "core/core.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static bool is_npz(const char *path) {
    size_t n = strlen(path);
    return n > 4 && strcmp(path + n - 4, ".npz") == 0;
}

/* Tensors that hold values (parameters and state buffers), i-th of them. */
static ts_tensor *valued_at(const ts_graph *g, size_t i, ts_array *value) {
    ts_tensor *t = ts_graph_tensor_at(g, i);
    /* constants (masks, ids) are rebuilt with the graph: not weights */
    if (!t || ts_tensor_info(t, value) || !value->data || strcmp(ts_tensor_op(t), "Const") == 0) return NULL;
    return t;
}

static char *join(const char *dir, const char *name, const char *ext) {
    size_t n = strlen(dir) + strlen(name) + strlen(ext) + 2;
    char *p = ts_malloc(n);
    if (p) snprintf(p, n, "%s/%s%s", dir, name, ext);
    return p;
}

static ts_status check_path(const char *what, const char *path) {
    if (!path || !*path) return ts_error(TS_ERR_INVALID_ARGUMENT, "%s: a path is required (an empty one would mean the current or root directory)", what);
    return TS_OK;
}

ts_status ts_graph_save_weights(const ts_graph *g, const char *path) {
    ts_status st = check_path("ts_graph_save_weights", path);
    if (st) return st;
    if (!g) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_graph_save_weights: graph is NULL");
    size_t n = ts_graph_tensor_count(g), k = 0;
    const char **names = ts_calloc(n ? n : 1, sizeof *names);
    ts_array *arrays = ts_calloc(n ? n : 1, sizeof *arrays);
    if (!names || !arrays) st = ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory saving weights to %s", path);
    for (size_t i = 0; !st && i < n; i++) {
        ts_tensor *t = valued_at(g, i, &arrays[k]);
        if (t) names[k++] = ts_tensor_name(t);
    }
    if (!st && is_npz(path)) st = ts_npz_save(path, names, arrays, k);
    else if (!st) {
        if (mkdir(path, 0777) != 0 && errno != EEXIST) st = ts_error(TS_ERR_IO, "cannot create directory %s: %s", path, strerror(errno));
        for (size_t i = 0; !st && i < k; i++) {
            char *p = join(path, names[i], ".npy");
            st = p ? ts_npy_save(p, &arrays[i]) : ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory saving weights");
            ts_free(p);
        }
    }
    ts_free(names);
    ts_free(arrays);
    return st;
}

/* Whether v can be t's value (f32, t's shape, every value finite: training
 * from a NaN would only spread it, silently); says why not. */
static ts_status fits(const ts_tensor *t, const ts_array *cur, const ts_array *v, const char *where) {
    bool ok = v->dtype == TS_F32 && v->ndim == cur->ndim;
    for (int i = 0; ok && i < v->ndim; i++) ok = v->shape[i] == cur->shape[i];
    if (!ok) {
        char a[160], b[160];
        return ts_error(TS_ERR_SHAPE, "%s: '%s' is %s in the model but %s in the file", where, ts_tensor_name(t),
                        ts_array_shape_str(cur, a, sizeof a), ts_array_shape_str(v, b, sizeof b));
    }
    int64_t n = ts_array_numel(v), bad = ts_f32_nonfinite(v->data, n);
    if (bad)
        return ts_error(TS_ERR_FORMAT, "%s: '%s' holds %lld NaN or infinite value%s of %lld; these are not usable weights", where,
                        ts_tensor_name(t), (long long)bad, bad == 1 ? "" : "s", (long long)n);
    return TS_OK;
}

/* How a load treats what does not pair up: strict, an error; otherwise
 * told to skipped() and left alone. */
typedef struct load_mode {
    bool strict;
    ts_weights_skipped_fn skipped;
    void *ctx;
    size_t loaded;
} load_mode;

/* An entry of the file that is not a value of the graph under its own
 * name (another name of a tensor, an imported file's, is not loaded). */
static ts_status extra(const ts_graph *g, const char *name, const char *where, load_mode *m) {
    ts_array cur;
    ts_tensor *t = ts_graph_find(g, name);
    if (t && strcmp(ts_tensor_name(t), name) == 0 && !ts_tensor_info(t, &cur) && cur.data && strcmp(ts_tensor_op(t), "Const") != 0)
        return TS_OK;
    if (!m->strict) {
        if (m->skipped) m->skipped(m->ctx, name, TS_WEIGHT_UNEXPECTED);
        return TS_OK;
    }
    if (t && strcmp(ts_tensor_op(t), "Param") == 0)
        return ts_error(TS_ERR_NOT_FOUND, "%s holds '%s', the model's other name of its parameter '%s': store the values under that name",
                        where, name, ts_tensor_name(t));
    return ts_error(TS_ERR_NOT_FOUND, "%s holds '%s', which is not a parameter of the model (load into the model it came from)", where, name);
}

/* A parameter the file lacks. */
static ts_status missing(const ts_tensor *t, const char *where, load_mode *m) {
    if (!m->strict) {
        if (m->skipped) m->skipped(m->ctx, ts_tensor_name(t), TS_WEIGHT_MISSING);
        return TS_OK;
    }
    return ts_error(TS_ERR_NOT_FOUND, "%s has no array '%s' (a parameter of the model)", where, ts_tensor_name(t));
}

/* Reads every value the graph needs into vals[] (owned, from .npy files,
 * or borrowed from the archive), checking each against its tensor; sets
 * nothing. An archive's names are checked first: a missing or foreign
 * array is reported before anything is inflated. */
static ts_status gather(ts_graph *g, const char *path, const ts_npz *z, ts_array *vals, bool *owned, load_mode *m) {
    ts_status st = TS_OK;
    ts_array cur;
    for (size_t i = 0; z && !st && i < ts_graph_tensor_count(g); i++) {
        ts_tensor *t = valued_at(g, i, &cur);
        if (t && !ts_npz_has(z, ts_tensor_name(t))) st = missing(t, path, m);
    }
    for (size_t i = 0; z && !st && i < ts_npz_count(z); i++) st = extra(g, ts_npz_name(z, i), path, m);
    for (size_t i = 0; !st && i < ts_graph_tensor_count(g); i++) {
        ts_tensor *t = valued_at(g, i, &cur);
        if (!t) continue;
        if (z) {
            const ts_array *v;
            if (!m->strict && !ts_npz_has(z, ts_tensor_name(t))) continue; /* told above */
            st = ts_npz_get(z, ts_tensor_name(t), &v);
            if (!st) vals[i] = *v, st = fits(t, &cur, v, path), m->loaded++;
            continue;
        }
        char *p = join(path, ts_tensor_name(t), ".npy");
        if (!p) return ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory loading weights");
        struct stat sb;
        if (!m->strict && stat(p, &sb) != 0 && errno == ENOENT) st = missing(t, path, m);
        else if (!(st = ts_npy_load(p, &vals[i]))) owned[i] = true, st = fits(t, &cur, &vals[i], p), m->loaded++;
        ts_free(p);
    }
    DIR *d = st || z ? NULL : opendir(path);
    for (struct dirent *e; d && !st && (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n <= 4 || strcmp(e->d_name + n - 4, ".npy") != 0) continue;
        char *name = ts_strdup(e->d_name);
        if (!name) st = ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory loading weights");
        else name[n - 4] = '\0', st = extra(g, name, path, m);
        ts_free(name);
    }
    if (d) closedir(d);
    if (!st && !m->strict && !m->loaded)
        st = ts_error(TS_ERR_NOT_FOUND, "%s holds none of the model's parameters by name: weights of another model? ('tensorscope names' "
                      "lists the model's)", path);
    return st;
}

static ts_status load(ts_graph *g, const char *path, load_mode *mode) {
    ts_status st = check_path(mode->strict ? "ts_graph_load_weights" : "ts_graph_load_weights_matching", path);
    if (st) return st;
    if (!g) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_graph_load_weights: graph is NULL");
    struct stat sb;
    if (stat(path, &sb) != 0) return ts_error(TS_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    if (!S_ISDIR(sb.st_mode) && !S_ISREG(sb.st_mode))
        return ts_error(TS_ERR_IO, "%s is neither a directory of .npy files nor an .npz file", path);
    ts_npz *z = NULL;
    if (!S_ISDIR(sb.st_mode) && (st = ts_npz_load(path, &z))) return st;
    size_t n = ts_graph_tensor_count(g);
    ts_array *vals = ts_calloc(n ? n : 1, sizeof *vals);
    bool *owned = ts_calloc(n ? n : 1, sizeof *owned);
    if (!vals || !owned) st = ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory loading weights");
    if (!st) st = gather(g, path, z, vals, owned, mode);
    /* all checked: now set them, so a bad file changes nothing */
    for (size_t i = 0; !st && i < n; i++)
        if (vals && vals[i].data) st = ts_param_set(ts_graph_tensor_at(g, i), &vals[i]);
    for (size_t i = 0; owned && i < n; i++)
        if (owned[i]) ts_npy_free(&vals[i]);
    ts_free(vals);
    ts_free(owned);
    ts_npz_free(z);
    return st;
}

ts_status ts_graph_load_weights(ts_graph *g, const char *path) {
    load_mode m = {.strict = true};
    return load(g, path, &m);
}

ts_status ts_graph_load_weights_matching(ts_graph *g, const char *path, ts_weights_skipped_fn skipped, void *ctx, size_t *loaded) {
    load_mode m = {.strict = false, .skipped = skipped, .ctx = ctx};
    ts_status st = load(g, path, &m);
    if (loaded) *loaded = st ? 0 : m.loaded;
    return st;
}
