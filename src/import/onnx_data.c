/* onnx_data.c -- the data of a TensorProto (an initializer, an attribute's
 * tensor): its shape and type checked against the bytes it holds, its values
 * decoded from the typed fields, the raw bytes or an external file inside the
 * model's folder (opened one component at a time, following no link). */
#include "import/onnx_ops.h"
#include "core/half.h"
#include "core/lowbits.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* --------------------------------------------------------------- tensors */

static ts_status check_dims(const importer *im, const char *what, size_t n, const int64_t *dims, ts_shape *s) {
    if (n > TS_MAX_DIMS)
        return ts_error(TS_ERR_UNSUPPORTED, "%s: %s has %zu dimensions; tensorscope supports at most %d", im->path, what, n, TS_MAX_DIMS);
    s->ndim = (int)n;
    int64_t numel = 1;
    for (size_t i = 0; i < n; i++) {
        if (dims[i] < 0 || dims[i] > ((int64_t)1 << 32))
            return ts_error(TS_ERR_FORMAT, "%s: %s has a bad dimension %lld (corrupt file?)", im->path, what, (long long)dims[i]);
        s->d[i] = dims[i];
        if (__builtin_mul_overflow(numel, dims[i] ? dims[i] : 1, &numel) || numel > TS_MAX_NUMEL)
            return ts_error(TS_ERR_FORMAT, "%s: %s claims more than 2^34 elements (corrupt file?)", im->path, what);
    }
    return TS_OK;
}

/* A non-negative decimal number of external_data (offset, length). */
static bool parse_u64(const char *s, uint64_t *out) {
    uint64_t v = 0;
    if (!*s) return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9' || __builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t)(*s - '0'), &v)) return false;
    *out = v;
    return true;
}

/* Opens the external data of tp (`location`, `offset`, `length`) for its
 * `want` bytes: the location is a relative path inside the model's folder,
 * opened one component at a time from that folder with O_NOFOLLOW, so no
 * symbolic link is followed anywhere on the way (a link, even one that
 * stays inside the folder, is refused); the file is opened O_NONBLOCK and
 * must be a regular file (a FIFO, device or folder is refused at once,
 * never read) holding offset + want bytes (overflow-checked, against its
 * real size, before anything is allocated). *fd and *offset on success. */
static ts_status external_open(const importer *im, const TensorProto *tp, const char *what, size_t want, int *fd, uint64_t *offset) {
    const char *loc = NULL;
    uint64_t length = 0;
    bool has_length = false;
    *offset = 0;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const char *k = tp->external_data[i]->key, *v = tp->external_data[i]->value;
        if (!k || !v) continue;
        bool ok = true;
        if (strcmp(k, "location") == 0) loc = v;
        else if (strcmp(k, "offset") == 0) ok = parse_u64(v, offset);
        else if (strcmp(k, "length") == 0) ok = has_length = parse_u64(v, &length);
        if (!ok)
            return ts_error(TS_ERR_FORMAT, "%s: %s: external data %s '%s' is not a non-negative number (corrupt file?)", im->path, what, k, v);
    }
    if (!loc || !*loc || loc[0] == '/')
        return ts_error(TS_ERR_FORMAT, "%s: %s keeps its data outside the file but names no usable 'location' (a relative path to a "
                        "file inside the model's folder)", im->path, what);
    if (has_length && length != want)
        return ts_error(TS_ERR_FORMAT, "%s: %s: external data length %llu does not fit its %zu bytes", im->path, what,
                        (unsigned long long)length, want);
    char part[4096];
    int dir = open(im->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return ts_error(TS_ERR_IO, "%s: %s keeps its data in the external file '%s', but the model's folder %s cannot be opened: %s", im->path,
                        what, loc, im->dir, strerror(errno));
    ts_status st = TS_OK;
    for (const char *p = loc; !st;) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        bool last = !slash || !slash[1 + strspn(slash + 1, "/")];
        if (len >= sizeof part) {
            st = ts_error(TS_ERR_FORMAT, "%s: %s: external data location '%s' has a component longer than %zu bytes", im->path, what, loc,
                          sizeof part - 1);
            break;
        }
        memcpy(part, p, len);
        part[len] = '\0';
        p = slash ? slash + 1 + strspn(slash + 1, "/") : p + len;
        if (len == 0 || strcmp(part, ".") == 0) {
            if (last) st = ts_error(TS_ERR_FORMAT, "%s: %s: external data location '%s' names a folder, not a file", im->path, what, loc);
            continue;
        }
        if (strcmp(part, "..") == 0) {
            st = ts_error(TS_ERR_FORMAT, "%s: %s: external data location '%s' leaves the model's folder ('..'); external data must lie "
                          "inside the folder of the model", im->path, what, loc);
            break;
        }
        int next = openat(dir, part, last ? O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC
                                         : O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int err = errno;
        struct stat sb;
        if (next < 0 && (err == ELOOP || (err == ENOTDIR && fstatat(dir, part, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(sb.st_mode))))
            st = ts_error(TS_ERR_FORMAT, "%s: %s: external data location '%s' goes through the symbolic link '%s'; tensorscope follows no "
                          "links in external data (a model's folder may come from an archive): copy the file itself into the folder",
                          im->path, what, loc, part);
        else if (next < 0)
            st = ts_error(TS_ERR_IO, "%s: %s keeps its data in the external file '%s' (in %s): %s: %s; copy that file next to the model, "
                          "or re-export with the weights inside the model", im->path, what, loc, im->dir, part, strerror(err));
        close(dir);
        dir = next;
        if (last) break;
    }
    if (st) {
        if (dir >= 0) close(dir);
        return st;
    }
    struct stat sb;
    uint64_t end = 0;
    if (fstat(dir, &sb) != 0 || !S_ISREG(sb.st_mode))
        st = ts_error(TS_ERR_FORMAT, "%s: %s: external data location '%s' is not a regular file (a FIFO, device or folder is never read)",
                      im->path, what, loc);
    else if (__builtin_add_overflow(*offset, (uint64_t)want, &end) || end > (uint64_t)sb.st_size)
        st = ts_error(TS_ERR_FORMAT, "%s: external file '%s' is shorter than %s needs (%zu bytes at offset %llu; the file has %lld)",
                      im->path, loc, what, want, (unsigned long long)*offset, (long long)sb.st_size);
    if (st) {
        close(dir);
        return st;
    }
    *fd = dir;
    return TS_OK;
}

/* The bytes of an external-data tensor (external_open's checks first). */
static ts_status read_external(const importer *im, const TensorProto *tp, const char *what, size_t want, uint8_t **out) {
    int fd;
    uint64_t offset;
    ts_status st = external_open(im, tp, what, want, &fd, &offset);
    if (st) return st;
    uint8_t *b = ts_malloc(want ? want : 1);
    if (!b) st = TS_ERR_OUT_OF_MEMORY;
    for (size_t got = 0; !st && got < want;) {
        ssize_t k = pread(fd, b + got, want - got, (off_t)(offset + got));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) st = ts_error(TS_ERR_IO, "%s: cannot read %s's external data: %s", im->path, what, k < 0 ? strerror(errno) : "the file shrank");
        else got += (size_t)k;
    }
    close(fd);
    if (st) ts_free(b);
    else *out = b;
    return st;
}

bool ts_onnx_external(const TensorProto *tp) {
    return tp->has_data_location && tp->data_location == TENSORSCOPE_ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
}

/* The shape and type of a TensorProto into c (c->v stays NULL), after
 * checking that its data is all there. */
ts_status ts_onnx_tensor_check(const importer *im, const TensorProto *tp, const char *what, ts_const *c) {
    memset(c, 0, sizeof *c);
    ts_status st = check_dims(im, what, tp->n_dims, tp->dims, &c->shape);
    if (st) return st;
    int dt = tp->data_type;
    size_t esize = ts_onnx_dtype_size(dt);
    if (!esize)
        return ts_error(TS_ERR_UNSUPPORTED, "%s: %s has ONNX data type %d (%s), which tensorscope does not read", im->path, what, dt,
                        ts_onnx_dtype_name(dt));
    c->dtype = dt;
    int64_t n = ts_shape_numel(&c->shape);
    size_t want = ts_onnx_data_bytes(dt, (size_t)n);
    if (ts_onnx_external(tp)) { /* checked now, before anything is made of its shape, and again when read */
        int fd;
        uint64_t offset;
        st = external_open(im, tp, what, want, &fd, &offset);
        if (!st) close(fd);
        return st;
    }
    if (tp->has_raw_data) {
        if (tp->raw_data.len != want)
            return ts_error(TS_ERR_FORMAT, "%s: %s holds %zu bytes of data for %lld elements of %s (%zu expected): the file is corrupt or "
                            "truncated", im->path, what, tp->raw_data.len, (long long)n, ts_onnx_dtype_name(dt), want);
        return TS_OK;
    }
    size_t have;
    switch (dt) {
    case TS_ONNX_FLOAT: have = tp->n_float_data; break;
    case TS_ONNX_INT64: have = tp->n_int64_data; break;
    case TS_ONNX_DOUBLE: have = tp->n_double_data; break;
    case TS_ONNX_UINT64: case TS_ONNX_UINT32: have = tp->n_uint64_data; break;
    default: have = tp->n_int32_data; break; /* int32, int16, int8, uint8, uint16, bool, float16, bfloat16, low precision */
    }
    if (have != (ts_lowbits_is(dt) ? want : (size_t)n)) /* a packed type's bytes, one per int32 */
        return ts_error(TS_ERR_FORMAT, "%s: %s holds %zu values for shape of %lld elements: the file is corrupt or truncated", im->path,
                        what, have, (long long)n);
    return TS_OK;
}

/* An int64 (or uint64: its bits) tensor's n values from little-endian
 * bytes b, exactly, into c->iv where double does not hold them all. */
static ts_status exact_int64(ts_const *c, const uint8_t *b, int64_t n) {
    if ((c->dtype != TS_ONNX_INT64 && c->dtype != TS_ONNX_UINT64) || n == 0) return TS_OK;
    int64_t *x = ts_malloc((size_t)n * sizeof *x);
    if (!x) return TS_ERR_OUT_OF_MEMORY;
    for (int64_t i = 0; i < n; i++) {
        uint64_t u = 0;
        for (int k = 0; k < 8; k++) u |= (uint64_t)b[8 * i + k] << (8 * k);
        x[i] = (int64_t)u;
    }
    ts_status st = ts_const_set_exact(c, x, n);
    ts_free(x);
    return st;
}

/* The values of a checked TensorProto into c->v (allocated here); an
 * int64 one's beyond 2^53 also exactly into c->iv. */
ts_status ts_onnx_tensor_decode(const importer *im, const TensorProto *tp, const char *what, ts_const *c) {
    int dt = c->dtype;
    int64_t n = ts_shape_numel(&c->shape);
    if (ts_onnx_external(tp)) { /* the file's bytes first: its size is checked before the values are allocated */
        uint8_t *b = NULL;
        ts_status st = read_external(im, tp, what, ts_onnx_data_bytes(dt, (size_t)n), &b);
        if (!st && !(c->v = ts_malloc((size_t)(n ? n : 1) * sizeof *c->v))) st = TS_ERR_OUT_OF_MEMORY;
        if (!st) ts_onnx_decode_raw(dt, b, (size_t)n, c->v);
        if (!st) st = exact_int64(c, b, n);
        ts_free(b);
        return st;
    }
    c->v = ts_malloc((size_t)(n ? n : 1) * sizeof *c->v);
    if (!c->v) return TS_ERR_OUT_OF_MEMORY;
    if (tp->has_raw_data) {
        ts_onnx_decode_raw(dt, tp->raw_data.data, (size_t)n, c->v);
        return exact_int64(c, tp->raw_data.data, n);
    }
    if (ts_lowbits_is(dt)) { /* int32_data: a code, or a byte of packed codes, each */
        size_t nb = ts_onnx_data_bytes(dt, (size_t)n);
        uint8_t *b = ts_malloc(nb ? nb : 1);
        if (!b) return TS_ERR_OUT_OF_MEMORY;
        for (size_t i = 0; i < nb; i++) b[i] = (uint8_t)tp->int32_data[i];
        ts_onnx_decode_raw(dt, b, (size_t)n, c->v);
        ts_free(b);
        return TS_OK;
    }
    for (int64_t i = 0; i < n; i++) {
        switch (dt) {
        case TS_ONNX_FLOAT: c->v[i] = tp->float_data[i]; break;
        case TS_ONNX_INT64: c->v[i] = (double)tp->int64_data[i]; break;
        case TS_ONNX_DOUBLE: c->v[i] = tp->double_data[i]; break;
        case TS_ONNX_UINT64: case TS_ONNX_UINT32: c->v[i] = (double)tp->uint64_data[i]; break;
        case TS_ONNX_FLOAT16: c->v[i] = ts_f16_to_f32((uint16_t)tp->int32_data[i]); break;
        case TS_ONNX_BFLOAT16: c->v[i] = ts_bf16_to_f32((uint16_t)tp->int32_data[i]); break;
        default: c->v[i] = tp->int32_data[i]; break;
        }
    }
    if (dt == TS_ONNX_UINT64) return ts_const_set_exact(c, (const int64_t *)(const void *)tp->uint64_data, n); /* its bits */
    return dt == TS_ONNX_INT64 ? ts_const_set_exact(c, tp->int64_data, n) : TS_OK;
}

/* A TensorProto (initializer or attribute) as a host constant. */
ts_status ts_onnx_tensor_to_const(const importer *im, const TensorProto *tp, const char *what, ts_const *c) {
    ts_status st = ts_onnx_tensor_check(im, tp, what, c);
    return st ? st : ts_onnx_tensor_decode(im, tp, what, c);
}

/* A parameter's values for folding (Transpose of a weight, ...). */
ts_status ts_onnx_decoded(const importer *im, value *v) {
    if (!v || !v->param || v->c.v) return TS_OK;
    char what[600];
    snprintf(what, sizeof what, "initializer '%s'", v->name);
    return ts_onnx_tensor_decode(im, v->param, what, &v->c);
}
