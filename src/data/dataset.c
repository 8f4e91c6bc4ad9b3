/* dataset.c -- datasets: MNIST-style IDX images + labels normalised once at
 * load, or arrays (x.npy + labels.npy, one .npz) converted once to f32
 * samples and i32 labels, so the loader only copies. */
#include "core/core.h"
#include "io/idx.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define TS_MNIST_CLASSES 10

struct ts_dataset {
    int64_t n;
    ts_array x_shape, label_shape; /* [n, ...] each (data unused) */
    float *images;   /* [n, ...]; MNIST: [n,1,rows,cols], (x/255 - 0.5)/0.5; integer
                        arrays' x: i32 ids in this memory (x_shape says which) */
    int32_t *labels; /* [n, ...]; MNIST: [n], 0..9 */
};

static ts_status check_pair(const ts_idx *im, const char *images_path, const ts_idx *lb,
                            const char *labels_path) {
    if (im->ndim != 3)
        return ts_error(TS_ERR_FORMAT, "%s: expected an image file (3 dimensions, magic "
                        "0x00000803) but it has %d dimension%s; are images and labels swapped?",
                        images_path, im->ndim, im->ndim == 1 ? "" : "s");
    if (lb->ndim != 1)
        return ts_error(TS_ERR_FORMAT, "%s: expected a label file (1 dimension, magic "
                        "0x00000801) but it has %d dimensions; are images and labels swapped?",
                        labels_path, lb->ndim);
    if (im->dims[0] == 0 || im->dims[1] == 0 || im->dims[2] == 0)
        return ts_error(TS_ERR_FORMAT, "%s holds no images (%u x %u x %u)", images_path,
                        im->dims[0], im->dims[1], im->dims[2]);
    if (im->dims[0] != lb->dims[0])
        return ts_error(TS_ERR_FORMAT, "%s has %u images but %s has %u labels: the files do "
                        "not belong together", images_path, im->dims[0], labels_path, lb->dims[0]);
    for (uint32_t i = 0; i < lb->dims[0]; i++)
        if (lb->data[i] >= TS_MNIST_CLASSES)
            return ts_error(TS_ERR_FORMAT, "%s: label %u of sample %u is outside 0..%d",
                            labels_path, lb->data[i], i, TS_MNIST_CLASSES - 1);
    return TS_OK;
}

static ts_status build(ts_dataset **out, const ts_idx *im, const ts_idx *lb) {
    ts_dataset *d = ts_calloc(1, sizeof *d);
    if (!d) return TS_ERR_OUT_OF_MEMORY;
    d->n = im->dims[0];
    d->x_shape = (ts_array){.dtype = TS_F32, .ndim = 4, .shape = {d->n, 1, im->dims[1], im->dims[2]}};
    d->label_shape = (ts_array){.dtype = TS_I32, .ndim = 1, .shape = {d->n}};
    d->images = ts_calloc(im->size, sizeof *d->images);
    d->labels = ts_calloc(lb->size, sizeof *d->labels);
    if (!d->images || !d->labels) {
        ts_dataset_free(d);
        return TS_ERR_OUT_OF_MEMORY;
    }
    /* torchvision's Normalize((0.5,), (0.5,)) after ToTensor(): [-1, 1] */
    for (size_t i = 0; i < im->size; i++)
        d->images[i] = ((float)im->data[i] / 255.0f - 0.5f) / 0.5f;
    for (size_t i = 0; i < lb->size; i++) d->labels[i] = lb->data[i];
    *out = d;
    return TS_OK;
}

ts_status ts_dataset_load_idx(ts_dataset **out, const char *images_path, const char *labels_path) {
    if (!out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_dataset_load_idx: out is NULL");
    *out = NULL;
    if (!images_path || !labels_path)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_dataset_load_idx: a path is NULL");
    ts_idx im, lb;
    memset(&lb, 0, sizeof lb);
    ts_status s = ts_idx_read(images_path, &im);
    if (!s) s = ts_idx_read(labels_path, &lb);
    if (!s) s = check_pair(&im, images_path, &lb, labels_path);
    if (!s) s = build(out, &im, &lb);
    ts_idx_free(&im);
    ts_idx_free(&lb);
    return s;
}

static bool is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Finds `<dir>/<base>.gz` or `<dir>/<base>` into path. */
static bool find_file(const char *dir, const char *base, char *path, size_t n) {
    snprintf(path, n, "%s/%s.gz", dir, base);
    if (is_file(path)) return true;
    snprintf(path, n, "%s/%s", dir, base);
    return is_file(path);
}

ts_status ts_dataset_load_mnist(ts_dataset **out, const char *dir) {
    if (!out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_dataset_load_mnist: out is NULL");
    *out = NULL;
    if (!dir) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_dataset_load_mnist: dir is NULL");
    struct stat st;
    if (stat(dir, &st) != 0)
        return ts_error(TS_ERR_IO, "MNIST directory %s: %s (it should hold train-images-idx3-ubyte[.gz] + "
                        "train-labels-idx1-ubyte[.gz] or t10k-images-idx3-ubyte[.gz] + t10k-labels-idx1-ubyte[.gz]; the test set ships "
                        "in data/mnist)", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return ts_error(TS_ERR_IO, "%s is not a directory; give the directory holding the "
                        "MNIST files", dir);
    /* The training set first: it is what a user who put it there wants. */
    static const char *const prefixes[] = {"train", "t10k"};
    char images[4096], labels[4096];
    for (size_t i = 0; i < TS_ARRAY_LEN(prefixes); i++) {
        char ib[64], lbase[64];
        snprintf(ib, sizeof ib, "%s-images-idx3-ubyte", prefixes[i]);
        snprintf(lbase, sizeof lbase, "%s-labels-idx1-ubyte", prefixes[i]);
        bool hi = find_file(dir, ib, images, sizeof images);
        bool hl = find_file(dir, lbase, labels, sizeof labels);
        if (hi && hl) {
            ts_logf(TS_LOG_DEBUG, "MNIST: loading %s and %s", images, labels);
            return ts_dataset_load_idx(out, images, labels);
        }
        if (hi || hl)
            return ts_error(TS_ERR_IO, "MNIST directory %s has %s but not %s/%s[.gz]; both the "
                            "images and the labels file are needed", dir, hi ? images : labels,
                            dir, hi ? lbase : ib);
    }
    return ts_error(TS_ERR_IO, "no MNIST files in %s: looked for train-images-idx3-ubyte[.gz] + "
                    "train-labels-idx1-ubyte[.gz], then t10k-images-idx3-ubyte[.gz] + "
                    "t10k-labels-idx1-ubyte[.gz]; put the MNIST files there (the test set "
                    "ships in data/mnist)", dir);
}

void ts_dataset_free(ts_dataset *d) {
    if (!d) return;
    ts_free(d->images);
    ts_free(d->labels);
    ts_free(d);
}

int64_t ts_dataset_size(const ts_dataset *d) { return d ? d->n : 0; }

ts_status ts_dataset_arrays(const ts_dataset *d, ts_array *images, ts_array *labels) {
    if (!d) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_dataset_arrays: dataset is NULL");
    if (images) *images = d->x_shape, images->data = d->images;
    if (labels) *labels = d->label_shape, labels->data = d->labels;
    return TS_OK;
}


static bool is_float(ts_dtype t) { return t == TS_F32 || t == TS_F64; }

ts_status ts_dataset_from_arrays(ts_dataset **out, const ts_array *x, const ts_array *labels) {
    if (!out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_dataset_from_arrays: out is NULL");
    *out = NULL;
    if (!x || !labels || !x->data || !labels->data)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_dataset_from_arrays: x and labels (with data) are required");
    if (ts_dtype_size(x->dtype) == 0 || ts_dtype_size(labels->dtype) == 0)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_dataset_from_arrays: unknown dtype");
    if (is_float(labels->dtype))
        return ts_error(TS_ERR_INVALID_ARGUMENT, "labels are %s; class labels must be integers (labels.astype(np.int64))",
                        ts_dtype_name(labels->dtype));
    if (x->ndim < 1 || x->ndim > TS_MAX_DIMS || labels->ndim < 1 || labels->ndim > TS_MAX_DIMS)
        return ts_error(TS_ERR_SHAPE, "x and labels need a leading sample dimension (x has %d dimensions, labels %d)", x->ndim, labels->ndim);
    char a[128], b[128];
    if (x->shape[0] != labels->shape[0])
        return ts_error(TS_ERR_SHAPE, "x is %s but labels are %s: they must hold the same number of samples (axis 0)",
                        ts_array_shape_str(x, a, sizeof a), ts_array_shape_str(labels, b, sizeof b));
    if (x->shape[0] < 1) return ts_error(TS_ERR_SHAPE, "x holds no samples");
    int64_t nx = ts_array_numel(x), nl = ts_array_numel(labels);
    if (nx < 1 || nl < 1) return ts_error(TS_ERR_SHAPE, "x or labels is empty");
    ts_dataset *d = ts_calloc(1, sizeof *d);
    if (!d) return TS_ERR_OUT_OF_MEMORY;
    d->n = x->shape[0];
    bool ids = x->dtype == TS_I32 || x->dtype == TS_I64; /* token ids stay integers */
    d->x_shape = *x;
    d->x_shape.dtype = ids ? TS_I32 : TS_F32;
    d->x_shape.data = NULL;
    d->label_shape = *labels;
    d->label_shape.dtype = TS_I32;
    d->label_shape.data = NULL;
    d->images = ts_malloc((size_t)nx * sizeof *d->images);
    d->labels = ts_malloc((size_t)nl * sizeof *d->labels);
    if (!d->images || !d->labels) {
        ts_dataset_free(d);
        return TS_ERR_OUT_OF_MEMORY;
    }
    int32_t *xi = (int32_t *)(void *)d->images; /* 4 bytes either way: the loader copies them */
    for (int64_t i = 0; i < nx; i++) {
        double v = ts_array_value(x, i);
        if (!ids) {
            d->images[i] = (float)v;
        } else if (v >= INT32_MIN && v <= INT32_MAX) {
            xi[i] = (int32_t)v;
        } else {
            ts_dataset_free(d);
            return ts_error(TS_ERR_INVALID_ARGUMENT, "x[%lld] is %.0f; integer samples (token ids) must be within int32 (they are not wrapped)",
                            (long long)i, v);
        }
    }
    for (int64_t i = 0; i < nl; i++) {
        double v = ts_array_value(labels, i);
        if (v < 0 || v > INT32_MAX) {
            ts_dataset_free(d);
            return ts_error(TS_ERR_INVALID_ARGUMENT, "label %lld is %.0f; class labels must be in 0..2^31-1", (long long)i, v);
        }
        d->labels[i] = (int32_t)v;
    }
    *out = d;
    return TS_OK;
}

static ts_status from_pair(ts_dataset **out, const ts_array *x, const char *xname, const ts_array *labels, const char *lname) {
    ts_status st = ts_dataset_from_arrays(out, x, labels);
    if (st) return ts_error_wrap(st, "%s and %s", xname, lname);
    return TS_OK;
}

ts_status ts_dataset_load_arrays(ts_dataset **out, ts_dataset **heldout, const char *path) {
    if (!out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_dataset_load_arrays: out is NULL");
    *out = NULL;
    if (heldout) *heldout = NULL;
    if (!path) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_dataset_load_arrays: path is NULL");
    struct stat st;
    if (stat(path, &st) != 0) return ts_error(TS_ERR_IO, "data %s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        char xp[4096], lp[4096];
        snprintf(xp, sizeof xp, "%s/x.npy", path);
        snprintf(lp, sizeof lp, "%s/labels.npy", path);
        if (!is_file(xp) || !is_file(lp))
            return ts_error(TS_ERR_IO, "data directory %s has no x.npy + labels.npy (nor MNIST files): save your arrays with "
                            "np.save('x.npy', x); np.save('labels.npy', labels), or give one .npz", path);
        ts_array x, l;
        memset(&l, 0, sizeof l);
        ts_status s = ts_npy_load(xp, &x);
        if (s) return ts_error_wrap(s, "%s", xp);
        s = ts_npy_load(lp, &l);
        if (s) s = ts_error_wrap(s, "%s", lp);
        if (!s) s = from_pair(out, &x, xp, &l, lp);
        ts_npy_free(&x);
        ts_npy_free(&l);
        return s;
    }
    ts_npz *z = NULL;
    ts_status s = ts_npz_load(path, &z);
    if (s) return s;
    /* names first (nothing inflated yet), then only the arrays used */
    const ts_array *x = NULL, *l = NULL, *xh = NULL, *lh = NULL;
    int has_xh = ts_npz_has(z, "x_heldout"), has_lh = ts_npz_has(z, "labels_heldout");
    if (!ts_npz_has(z, "x") || !ts_npz_has(z, "labels"))
        s = ts_error(TS_ERR_NOT_FOUND, "%s holds no arrays named 'x' and 'labels'; write it with np.savez(path, x=x, labels=labels) "
                     "(and optionally x_heldout=..., labels_heldout=...)", path);
    else if (has_xh != has_lh)
        s = ts_error(TS_ERR_NOT_FOUND, "%s has %s but not %s; give both or neither", path, has_xh ? "x_heldout" : "labels_heldout",
                     has_xh ? "labels_heldout" : "x_heldout");
    if (!s && !(s = ts_npz_get(z, "x", &x)) && !(s = ts_npz_get(z, "labels", &l))) s = from_pair(out, x, "x", l, "labels");
    if (!s && has_xh && heldout && !(s = ts_npz_get(z, "x_heldout", &xh))) s = ts_npz_get(z, "labels_heldout", &lh);
    if (!s && xh && heldout) {
        s = from_pair(heldout, xh, "x_heldout", lh, "labels_heldout");
        if (!s && ts_array_numel(xh) / xh->shape[0] != ts_array_numel(x) / x->shape[0])
            s = ts_error(TS_ERR_SHAPE, "%s: x_heldout's samples differ in shape from x's", path);
    }
    if (s) {
        ts_dataset_free(*out);
        *out = NULL;
        if (heldout) {
            ts_dataset_free(*heldout);
            *heldout = NULL;
        }
    }
    ts_npz_free(z);
    return s;
}
