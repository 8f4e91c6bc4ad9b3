/* dataset.c -- MNIST-style datasets: IDX images + labels, normalised once at
 * load so the loader only copies. */
#include "core/core.h"
#include "io/idx.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define TS_MNIST_CLASSES 10

struct ts_dataset {
    int64_t n, rows, cols;
    float *images;   /* [n,1,rows,cols], (x/255 - 0.5)/0.5 */
    int32_t *labels; /* [n], 0..9 */
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
    d->rows = im->dims[1];
    d->cols = im->dims[2];
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
    if (images) *images = ts_array_f32(d->images, 4, (int64_t[]){d->n, 1, d->rows, d->cols});
    if (labels) *labels = ts_array_i32(d->labels, 1, (int64_t[]){d->n});
    return TS_OK;
}
