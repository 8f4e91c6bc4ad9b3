/* onnx.c -- ONNX model files -> graph (docs/design.md#bring-your-own-model).
 *
 * The file is parsed with protobuf-c (src/import/proto/onnx.proto, a proto2
 * subset of ONNX's schema). Every value name of the file maps to either a
 * graph tensor or a host constant (initializers, Constant nodes, and what
 * the shape computations make of them). Nodes are imported in file order
 * (ONNX requires a topological order) through one table from op type to an
 * import function: with only constant inputs a node is folded on the host
 * (shape subgraphs: Shape, Gather, Concat, Unsqueeze, ConstantOfShape, Range,
 * Cast, Equal, Where, Slice, ... for the static input shapes given), else it
 * becomes builder calls. Float initializers become parameters under their
 * own names the first time a graph op reads them. */
#include "core/half.h"
#include "core/lowbits.h"
#include "import/onnx_consts.h"
#include "import/onnx_fuse.h"
#include "import/onnx_ops_extra.h"
#include "import/onnx_rnn.h"
#include "import/onnx_torch.h"

#include "onnx.pb-c.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef TensorscopeOnnx__NodeProto Node;
typedef TensorscopeOnnx__TensorProto TensorProto;
typedef TensorscopeOnnx__AttributeProto Attr;
typedef TensorscopeOnnx__ValueInfoProto ValueInfo;

/* The default domain's opsets read here: 1 to the newest of onnx 1.23.2
 * (onnx.defs.onnx_opset_version()). Each node is read by the version of
 * its op that the model's opset selects (the newest one not above it), see
 * `since`; an op of a version older than its row's `oldest` (op_table)
 * is refused. */
#define MIN_OPSET 1
#define MAX_OPSET 28
#define MAX_NODE_IO 16
#define MAX_MODEL_BYTES ((size_t)1 << 31)
/* If's branches and Loop's and Scan's bodies: graphs nest at most
 * MAX_GRAPH_DEPTH deep, and the nodes imported from them (a body once per
 * iteration, one more per iteration) number at most MAX_UNROLLED_NODES in
 * all (docs/onnx.md, "Control flow"). */
#define MAX_GRAPH_DEPTH 8
#define MAX_UNROLLED_NODES 100000

/* One value of the file: a graph tensor or a host constant. */
typedef struct value {
    const char *name; /* the file's name (points into the parsed model) */
    ts_tensor *t;     /* graph tensor, or NULL for a constant */
    ts_const c;       /* host constant when t is NULL */
    /* A float initializer: a parameter (made the first time a graph op
     * reads it), never folded; its data is decoded only when needed
     * (c.v NULL until then), straight from the file's bytes. */
    const TensorProto *param;
    /* The graph constant made from c the first time a graph op reads it
     * (c stays, for later folds): one tensor under the value's name. */
    ts_tensor *made;
    /* Where it is equal samples along dim 0, its first sample (sample_of) */
    ts_tensor *sample;
    bool folded; /* a parameter folded from one and constants (TS_TORCH_FOLDED) */
    /* A parameter's PyTorch name where the file's metadata gives another
     * than the file's (onnx_torch.h; the file's name is then an alias,
     * unless it names a tensor of PyTorch's this is not: fused). */
    const char *pname;
    bool fused;
    /* The PyTorch parameter whose transpose this initializer is (a
     * Linear's weight the dynamo exporter stored as MatMul's B). */
    struct value *twin;
} value;

typedef struct importer {
    ts_graph *g;
    const char *path;
    char dir[4096];       /* the model's directory, for external data */
    const char *file;     /* basename, graph-owned, for locations */
    int64_t opset;
    value **v;
    size_t nv, capv;
    size_t *hash;         /* open addressing over v: index + 1, 0 = empty */
    size_t hcap;
    const Node *node;     /* the node being imported */
    int node_index;
    ts_strmap uses;       /* value name -> node inputs still to read it */
    ts_torch_fix *fix;    /* PyTorch's names the file's metadata gives back */
    size_t n_fix;
    ts_onnx_group_norm_chain *chain; /* node chains imported as one op (onnx_fuse.h) */
    size_t n_chain;
    const TensorscopeOnnx__GraphProto *chain_graph; /* the graph they are of */
    size_t inputs_from, inputs_to; /* the graph tensors import_inputs made */
    int depth;            /* of the branch or body being imported (0: the model's graph) */
    int top_index;        /* the node of the model's graph that holds it */
    size_t unrolled;      /* nodes imported from branches and bodies so far */
} importer;

typedef struct node_io {
    value *in[MAX_NODE_IO];
    int n_in;
    value out[MAX_NODE_IO];
    int n_out;
} node_io;

typedef ts_status (*import_fn)(importer *im, node_io *io);

/* ----------------------------------------------------------------- values */

static size_t hash_str(const char *s) {
    size_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static value *lookup(const importer *im, const char *name) {
    if (!im->hcap) return NULL;
    for (size_t i = hash_str(name) & (im->hcap - 1);; i = (i + 1) & (im->hcap - 1)) {
        size_t k = im->hash[i];
        if (!k) return NULL;
        if (strcmp(im->v[k - 1]->name, name) == 0) return im->v[k - 1];
    }
}

static ts_status rehash(importer *im, size_t cap) {
    size_t *h = ts_calloc(cap, sizeof *h);
    if (!h) return TS_ERR_OUT_OF_MEMORY;
    for (size_t k = 0; k < im->nv; k++) {
        size_t i = hash_str(im->v[k]->name) & (cap - 1);
        while (h[i]) i = (i + 1) & (cap - 1);
        h[i] = k + 1;
    }
    ts_free(im->hash);
    im->hash = h;
    im->hcap = cap;
    return TS_OK;
}

/* Defines `name` (a later definition of the same name replaces the first). */
static ts_status define(importer *im, const char *name, const value *val) {
    value *old = lookup(im, name);
    if (old) {
        ts_const_free(&old->c);
        *old = *val;
        old->name = name;
        return TS_OK;
    }
    if ((im->nv + 1) * 2 > im->hcap && rehash(im, im->hcap ? im->hcap * 2 : 256)) return TS_ERR_OUT_OF_MEMORY;
    if (ts_grow((void **)&im->v, &im->capv, im->nv + 1, sizeof *im->v)) return TS_ERR_OUT_OF_MEMORY;
    value *v = ts_malloc(sizeof *v);
    if (!v) return TS_ERR_OUT_OF_MEMORY;
    *v = *val;
    v->name = name;
    im->v[im->nv] = v;
    size_t i = hash_str(name) & (im->hcap - 1);
    while (im->hash[i]) i = (i + 1) & (im->hcap - 1);
    im->hash[i] = ++im->nv;
    return TS_OK;
}

/* ----------------------------------------------------------------- errors */

static const char *node_name(const importer *im) {
    return im->node && im->node->name && *im->node->name ? im->node->name : "(unnamed)";
}

/* "model.onnx: node 12 '/conv1/Conv' (Conv): ..." */
static ts_status node_error(const importer *im, ts_status code, const char *fmt, ...) TS_PRINTF(3, 4);
static ts_status node_error(const importer *im, ts_status code, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ts_error(code, "%s: node %d '%s' (%s, opset %lld): %s", im->path, im->node_index, node_name(im),
                    im->node->op_type ? im->node->op_type : "?", (long long)im->opset, msg);
}

/* A kernel's error (onnx_consts.c, the graph builders) as the node's. */
static ts_status fold_result(importer *im, ts_status st) {
    if (st == TS_OK) return TS_OK;
    char msg[600];
    snprintf(msg, sizeof msg, "%s", ts_last_error());
    return node_error(im, st, "%s", msg);
}

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

static bool external(const TensorProto *tp) {
    return tp->has_data_location && tp->data_location == TENSORSCOPE_ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
}

/* The shape and type of a TensorProto into c (c->v stays NULL), after
 * checking that its data is all there. */
static ts_status tensor_check(const importer *im, const TensorProto *tp, const char *what, ts_const *c) {
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
    if (external(tp)) { /* checked now, before anything is made of its shape, and again when read */
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

/* The values of a checked TensorProto into c->v (allocated here). */
static ts_status tensor_decode(const importer *im, const TensorProto *tp, const char *what, ts_const *c) {
    int dt = c->dtype;
    int64_t n = ts_shape_numel(&c->shape);
    if (external(tp)) { /* the file's bytes first: its size is checked before the values are allocated */
        uint8_t *b = NULL;
        ts_status st = read_external(im, tp, what, ts_onnx_data_bytes(dt, (size_t)n), &b);
        if (!st && !(c->v = ts_malloc((size_t)(n ? n : 1) * sizeof *c->v))) st = TS_ERR_OUT_OF_MEMORY;
        if (!st) ts_onnx_decode_raw(dt, b, (size_t)n, c->v);
        ts_free(b);
        return st;
    }
    c->v = ts_malloc((size_t)(n ? n : 1) * sizeof *c->v);
    if (!c->v) return TS_ERR_OUT_OF_MEMORY;
    if (tp->has_raw_data) {
        ts_onnx_decode_raw(dt, tp->raw_data.data, (size_t)n, c->v);
        return TS_OK;
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
    return TS_OK;
}

/* A TensorProto (initializer or attribute) as a host constant. */
static ts_status tensor_to_const(const importer *im, const TensorProto *tp, const char *what, ts_const *c) {
    ts_status st = tensor_check(im, tp, what, c);
    return st ? st : tensor_decode(im, tp, what, c);
}

/* A parameter's values for folding (Transpose of a weight, ...). */
static ts_status decoded(const importer *im, value *v) {
    if (!v || !v->param || v->c.v) return TS_OK;
    char what[600];
    snprintf(what, sizeof what, "initializer '%s'", v->name);
    return tensor_decode(im, v->param, what, &v->c);
}

/* Whether the node's op is read at version `version` or newer: ONNX reads
 * each node by the newest version of its op at or below the model's opset,
 * so a change of version v applies from opset v on. */
static bool since(const importer *im, int64_t version) { return im->opset >= version; }

/* ------------------------------------------------------------ attributes */

static const Attr *attr(const importer *im, const char *name) {
    for (size_t i = 0; i < im->node->n_attribute; i++)
        if (im->node->attribute[i]->name && strcmp(im->node->attribute[i]->name, name) == 0) return im->node->attribute[i];
    return NULL;
}
/* The index of string attribute a's value among choices[0..n); n where it
 * is none of them or holds no string. */
static int attr_choice(const Attr *a, const char *const *choices, int n) {
    int k = 0;
    while (k < n && !(a->has_s && a->s.len == strlen(choices[k]) && memcmp(a->s.data, choices[k], a->s.len) == 0)) k++;
    return k;
}
static int64_t attr_i(const importer *im, const char *name, int64_t def) {
    const Attr *a = attr(im, name);
    return a && a->has_i ? a->i : def;
}
/* An INT attribute (def when absent) range-checked into [lo, hi], the
 * values the op allows: every int64 attribute that ends up in an int or
 * an index is read here, never truncated. */
static ts_status attr_int(const importer *im, const char *name, int64_t def, int64_t lo, int64_t hi, int64_t *out) {
    int64_t v = attr_i(im, name, def);
    if (v < lo || v > hi)
        return node_error(im, TS_ERR_FORMAT, "attribute '%s' is %lld; %s takes %lld to %lld", name, (long long)v, im->node->op_type,
                          (long long)lo, (long long)hi);
    *out = v;
    return TS_OK;
}
static ts_status attr_int32(const importer *im, const char *name, int64_t def, int64_t lo, int64_t hi, int *out) {
    int64_t v = 0;
    ts_status st = attr_int(im, name, def, lo, hi, &v);
    *out = (int)v;
    return st;
}
static ts_status attr_flag(const importer *im, const char *name, bool *out) {
    int v = 0;
    ts_status st = attr_int32(im, name, 0, 0, 1, &v);
    *out = v != 0;
    return st;
}
/* An axis of a tensor of ndim dimensions, -ndim to ndim - 1 (to ndim when
 * `end` is), made non-negative. */
static ts_status attr_axis(const importer *im, const char *name, int64_t def, int ndim, bool end, int *out) {
    int64_t v = 0;
    ts_status st = attr_int(im, name, def, -(int64_t)ndim, end ? ndim : ndim - 1, &v);
    *out = (int)(v < 0 ? v + ndim : v);
    return st;
}
static double attr_f(const importer *im, const char *name, double def) {
    const Attr *a = attr(im, name);
    return a && a->has_f ? a->f : def;
}
/* An INTS attribute, or *n = -1 when absent. */
static void attr_ints(const importer *im, const char *name, const int64_t **v, int64_t *n) {
    const Attr *a = attr(im, name);
    *v = a ? a->ints : NULL;
    *n = a ? (int64_t)a->n_ints : -1;
}
/* An INTS attribute of at most `cap` values, each range-checked into
 * [lo, hi] (as attr_int), into out; *n = -1 when absent. */
static ts_status attr_int_list(const importer *im, const char *name, int64_t lo, int64_t hi, int64_t *out, int cap, int *n) {
    const int64_t *v;
    int64_t nv;
    attr_ints(im, name, &v, &nv);
    if (nv > cap) return node_error(im, TS_ERR_FORMAT, "attribute '%s' has %lld values; %s takes at most %d", name, (long long)nv, im->node->op_type, cap);
    *n = (int)nv;
    for (int i = 0; i < *n; i++) {
        if (v[i] < lo || v[i] > hi)
            return node_error(im, TS_ERR_FORMAT, "attribute '%s' value %d is %lld; %s takes %lld to %lld", name, i, (long long)v[i],
                              im->node->op_type, (long long)lo, (long long)hi);
        out[i] = v[i];
    }
    return TS_OK;
}

/* ---------------------------------------------------------- graph tensors */

static bool is_const(const value *v) { return v && !v->t; }

static bool host_little_endian(void) {
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

/* A graph tensor of v's values (as_tensor): float initializers become
 * parameters under their own names the first time a graph op reads them
 * (float32 raw data is copied as it is, the rest converted). */
static ts_tensor *made_tensor(importer *im, value *v, ts_status *st) {
    if (v->t) return v->t;
    if (v->param) {
        ts_tensor *p = ts_param(im->g, v->pname ? v->pname : v->name, v->c.shape.ndim, v->c.shape.d);
        if (!p || (v->pname && !v->fused && ts_graph_add_alias(im->g, v->name, p))) {
            *st = ts_graph_status(im->g);
            return NULL;
        }
        int64_t n = ts_shape_numel(&v->c.shape);
        const TensorProto *tp = v->param;
        if (!v->c.v && tp->has_raw_data && !external(tp) && v->c.dtype == TS_ONNX_FLOAT && host_little_endian()) {
            memcpy(p->value, tp->raw_data.data, (size_t)n * sizeof(float));
        } else {
            if ((*st = decoded(im, v))) return NULL;
            for (int64_t i = 0; i < n; i++) p->value[i] = (float)v->c.v[i];
        }
        v->t = p;
        return p;
    }
    /* a constant computed at import (a mask, position ids): a graph
     * constant, i32 for integer and bool data, else f32; never cached in
     * v->t, so later folds still see the host constant, but in v->made:
     * the second graph op that reads it reads the same tensor */
    if (v->made) return v->made;
    int64_t n = ts_shape_numel(&v->c.shape);
    bool integer = !ts_onnx_dtype_is_float(v->c.dtype);
    uint64_t bytes = (uint64_t)(n ? n : 1) * 4;
    /* the graph's copy, which stays, and the f32/i32 values it is made from, while both are alive */
    if ((*st = ts_const_charge(2 * bytes))) {
        *st = fold_result(im, *st);
        return NULL;
    }
    void *data = ts_malloc((size_t)bytes);
    if (!data) {
        *st = TS_ERR_OUT_OF_MEMORY;
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t k = 0;
        if (!integer) {
            ((float *)data)[i] = (float)v->c.v[i];
        } else if (ts_onnx_int_value(v->c.v[i], INT32_MIN, INT32_MAX, &k)) {
            ((int32_t *)data)[i] = (int32_t)k;
        } else { /* never wrapped */
            ts_free(data);
            *st = node_error(im, TS_ERR_UNSUPPORTED, "constant '%s' holds %.17g at element %lld; tensorscope computes integer tensors in "
                             "int32 (%d to %d)", v->name, v->c.v[i], (long long)i, INT32_MIN, INT32_MAX);
            return NULL;
        }
    }
    char name[512];
    size_t used = 0;
    for (const char *p = v->name; *p && used + 1 < sizeof name; p++)
        if (!(used == 0 && *p == '/')) name[used++] = *p == '/' ? '.' : *p;
    name[used] = '\0';
    ts_array a = integer ? ts_array_i32(data, v->c.shape.ndim, v->c.shape.d) : ts_array_f32(data, v->c.shape.ndim, v->c.shape.d);
    /* a name already taken (a Loop body's constant, made again each iteration): the scope's next free one */
    char *again = ts_graph_find(im->g, used ? name : "constant") ? ts_graph_op_output_name(im->g, used ? name : "constant") : NULL;
    ts_tensor *t = ts_constant(im->g, again ? again : used ? name : "constant", &a);
    ts_free(again);
    ts_free(data);
    ts_const_release(bytes);
    if (!t) *st = ts_graph_status(im->g);
    v->made = t;
    return t;
}

/* A graph tensor of f32 values: an i32 one through CastFloat, an i64 one
 * through ts_cast. */
static ts_tensor *f32_of(importer *im, ts_tensor *t, ts_status *st) {
    if (t && t->dtype == TS_I32 && !(t = ts_unary(im->g, "CastFloat", t, 0.0f, 0.0f))) *st = ts_graph_status(im->g);
    if (t && t->dtype == TS_I64 && !(t = ts_cast(im->g, t, TS_F32))) *st = ts_graph_status(im->g);
    return t;
}

/* An integer operand as an i64 graph tensor: an i32 or i64 graph tensor,
 * or a one-element integer constant (exact to 2^53, as folding holds
 * constants); NULL where it is neither (no error: the caller computes as
 * before). */
static ts_tensor *i64_of(importer *im, value *v, ts_status *st) {
    if (v->t) {
        if (v->t->dtype == TS_I64) return v->t;
        ts_tensor *t = v->t->dtype == TS_I32 ? ts_cast(im->g, v->t, TS_I64) : NULL;
        if (v->t->dtype == TS_I32 && !t) *st = ts_graph_status(im->g);
        return t;
    }
    if (v->param || ts_onnx_dtype_is_float(v->c.dtype) || ts_shape_numel(&v->c.shape) != 1 || (*st = decoded(im, v))) return NULL;
    int64_t k;
    if (!ts_onnx_int_value(v->c.v[0], -((int64_t)1 << 53), (int64_t)1 << 53, &k)) return NULL;
    char *name = ts_graph_op_output_name(im->g, "Int64");
    ts_tensor *t = name ? ts_constant(im->g, name, &(ts_array){.dtype = TS_I64, .ndim = v->c.shape.ndim, .shape = {1, 1, 1, 1, 1, 1, 1, 1}, .data = &k})
                        : NULL;
    ts_free(name);
    if (!t) *st = ts_graph_status(im->g) ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
    return t;
}

/* x broadcast to the shape `to` (numpy's rules, both ways) as x + zeros,
 * the zeros spanning only the broadcast dims: the binary ops' broadcasting
 * gives the forward and their reduce-to-shape the backward (the gradient
 * summed over the broadcast dims). */
static ts_tensor *broadcast_to(importer *im, ts_tensor *x, const ts_shape *to, ts_status *st) {
    ts_shape zs = {.ndim = to->ndim};
    int64_t nz = 1;
    for (int i = 0; i < to->ndim; i++) {
        int j = i - (to->ndim - x->shape.ndim); /* x's dim aligned with to's i-th */
        zs.d[i] = j < 0 || x->shape.d[j] == 1 ? to->d[i] : 1;
        nz *= zs.d[i];
    }
    uint64_t bytes = (uint64_t)(nz ? nz : 1) * 4;
    if ((*st = ts_const_charge(2 * bytes))) { /* the graph's zeros and the copy they are made from */
        *st = fold_result(im, *st);
        return NULL;
    }
    float *zeros = ts_calloc((size_t)(nz ? nz : 1), sizeof *zeros);
    char *name = zeros ? ts_graph_op_output_name(im->g, "ExpandZeros") : NULL;
    ts_array za = ts_array_f32(zeros, zs.ndim, zs.d);
    ts_tensor *z = name ? ts_constant(im->g, name, &za) : NULL;
    ts_free(name);
    ts_free(zeros);
    ts_const_release(bytes);
    ts_tensor *t = z ? ts_add(im->g, x, z) : NULL;
    if (!t) *st = ts_graph_status(im->g) ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
    return t;
}

/* The first graph input of the file whose dim 0 is `batch`, or NULL. */
static ts_tensor *input_of_batch(const importer *im, int64_t batch) {
    for (size_t i = im->inputs_from; i < im->inputs_to; i++) {
        ts_tensor *t = ts_graph_tensor_at(im->g, i);
        if (t->op == TS_OP_INPUT && t->shape.ndim > 0 && t->shape.d[0] == batch) return t;
    }
    return NULL;
}

/* sample ([1,...]) repeated along dim 0 to the shape `to`, whose dim 0 is
 * the example's batch: sample + zeros [B,1,...], the zeros made from dim 0
 * of the graph input of that batch (a CastIndex clamped to 0 reads none of
 * its values, NaN included), so that the compile gives them the batch
 * that input has at the run; broadcast_to's constant zeros where no input
 * has that batch. The gradient reaching the sample is summed over the
 * batch. An i32 sample (ids, bools) is repeated in f32 and comes back i32
 * (sample_of keeps to integers that f32 holds exactly). */
static ts_tensor *repeated(importer *im, ts_tensor *sample, const ts_shape *to, ts_status *st) {
    ts_tensor *in = input_of_batch(im, to->d[0]), *z = in ? f32_of(im, in, st) : NULL, *x = f32_of(im, sample, st), *t;
    for (int d = 1; z && d < in->shape.ndim; d++)
        if (z->shape.d[d] != 1) z = ts_slice(im->g, z, d, 0, 1);
    z = z ? ts_unary(im->g, "CastIndex", z, 0.0f, 0.0f) : NULL;
    z = z ? ts_unary(im->g, "CastFloat", z, 0.0f, 0.0f) : NULL;
    ts_shape zs = {.ndim = to->ndim, .d = {to->d[0]}};
    for (int d = 1; d < to->ndim; d++) zs.d[d] = 1;
    if (z && !ts_shape_equal(&z->shape, &zs)) z = ts_reshape(im->g, z, zs.ndim, zs.d);
    if (!x) return NULL;
    t = !in ? broadcast_to(im, x, to, st) : z ? ts_add(im->g, x, z) : NULL;
    if (t && sample->dtype == TS_I32) t = ts_unary(im->g, "CastIndex", t, (float)INT32_MIN, 2147483520.0f);
    if (!t && !*st) *st = ts_graph_status(im->g);
    return t;
}

/* The value's first sample, where it is `batch` (above 1) equal samples
 * along dim 0 (exporters make masks, ids and tokens for their example's
 * batch): a constant's (GPT-2's attention mask [B,1,T,T], BERT's
 * token-type ids [B,T]; of integers f32 holds exactly), or a parameter's
 * that the exporter folded from one with constants (ViT's class token
 * expanded to the batch, the dynamo export's `expand`), which is then
 * made a parameter of that one sample under its name and trains as the
 * module's one token does. NULL where it is neither, or after an error
 * (*st). */
static ts_tensor *sample_of(importer *im, value *v, int64_t batch, ts_status *st) {
    const ts_shape *s = &v->c.shape;
    if (batch < 2 || v->t || s->ndim < 1 || s->d[0] != batch) return NULL;
    if (v->sample) return v->sample;
    if (v->param && (!v->folded || (*st = decoded(im, v)))) return NULL;
    if (!v->c.v) return NULL;
    int64_t n = ts_shape_numel(s), row = n / batch;
    bool integer = !ts_onnx_dtype_is_float(v->c.dtype);
    for (int64_t i = 0; i < n; i++)
        if (v->c.v[i] != v->c.v[i % row] || (integer && (double)(float)v->c.v[i] != v->c.v[i])) return NULL;
    char name[512];
    snprintf(name, sizeof name, "%s.sample", v->name);
    value first = *v; /* the first sample's values, which c.v begins with */
    first.name = v->param ? v->name : name;
    first.c.shape.d[0] = 1;
    first.made = NULL;
    return v->sample = made_tensor(im, &first, st);
}

/* A graph tensor for v (made_tensor's) -- but where v is equal samples
 * along dim 0 (sample_of) as many as the batch of a graph input (or
 * already read as its sample), its first sample repeated to that input's
 * batch: it then follows the batch the model is compiled at (the example's
 * class token, token-type ids). */
static ts_tensor *as_tensor(importer *im, value *v, ts_status *st) {
    if (v->t) return v->t;
    if (v->made) return v->made;
    const ts_shape *s = &v->c.shape;
    ts_tensor *one = v->sample || (s->ndim > 1 && input_of_batch(im, s->d[0])) ? sample_of(im, v, s->d[0], st) : NULL;
    if (!one) return *st ? NULL : made_tensor(im, v, st);
    ts_tensor *t = repeated(im, one, s, st);
    if (v->param) v->t = t;
    else v->made = t;
    return t;
}

/* For an error on a value that must be a constant: how to make a graph
 * input one (bind it at import), or "". */
static const char *bind_hint(const value *x) {
    return x && x->t && x->t->op == TS_OP_INPUT ? "; it is a graph input: bind its value at import (ts_onnx_input.value, in Python "
                                                  "Graph.from_onnx(path, input_values={name: array}))"
                                                : "";
}

/* Whether v is a constant scalar (any shape of one element), into *s. */
static bool const_scalar(const value *v, double *s) {
    if (!is_const(v) || v->param || ts_shape_numel(&v->c.shape) != 1) return false;
    *s = v->c.v[0];
    return true;
}

static ts_status built(importer *im, ts_tensor *t, value *out) {
    if (!t) return ts_graph_status(im->g) ? ts_graph_status(im->g) : node_error(im, TS_ERR_INTERNAL, "a builder returned NULL");
    memset(out, 0, sizeof *out);
    out->t = t;
    return TS_OK;
}

static int norm_axis(int64_t axis, int ndim) { return (int)(axis < 0 ? axis + ndim : axis); }

static const ts_shape *shape_of(const value *v) { return v->t ? &v->t->shape : &v->c.shape; }

/* ------------------------------------------------------------ op imports */

/* A graph tensor of f32 values for an op that computes in f32: an i32
 * tensor (integer ids, bools) through CastFloat, a constant as a graph
 * constant first. */
static ts_tensor *as_f32(importer *im, value *v, ts_status *st) { return f32_of(im, as_tensor(im, v, st), st); }

/* An operand of an elementwise op, as a graph tensor: its first sample
 * (sample_of) where it is equal samples of the other operand's rank and
 * dim 0 (GPT-2's attention mask [B,1,T,T]), which then broadcasts over
 * any batch the model is compiled at; otherwise as_f32's tensor. */
static ts_tensor *as_f32_per_sample(importer *im, value *v, const ts_tensor *other, ts_status *st) {
    ts_tensor *s = other && other->shape.ndim == v->c.shape.ndim ? sample_of(im, v, other->shape.d[0], st) : NULL;
    return s ? f32_of(im, s, st) : *st ? NULL : as_f32(im, v, st);
}

/* The elementwise binary family on graph tensors (ts_binary), by the op
 * table's name of the ONNX op type; Sum's links are Adds. */
static ts_status binary_family(importer *im, const char *op, value *a, value *b, value *out) {
    ts_status st = TS_OK;
    ts_tensor *ta = as_f32(im, a, &st), *tb = ta ? as_f32(im, b, &st) : NULL;
    if (!tb) return st;
    return built(im, strcmp(op, "Sum") == 0 ? ts_add(im->g, ta, tb) : ts_binary(im->g, op, ta, tb), out);
}

/* Elementwise binary ops: folded on constants; Add/Sub/Mul on graph
 * tensors when one side's shape is a suffix of the other's (the rest of
 * NumPy broadcasting comes with the broadcasting ops). */
static ts_status op_binary(importer *im, node_io *io) {
    const char *op = im->node->op_type;
    if (io->n_in != 2) return node_error(im, TS_ERR_FORMAT, "needs 2 inputs, has %d", io->n_in);
    value *a = io->in[0], *b = io->in[1];
    ts_status st = TS_OK;
    int fmod_ = 0;
    if (strcmp(op, "Mod") == 0 && (st = attr_int32(im, "fmod", 0, 0, 1, &fmod_))) return st;
    if (fmod_) op = "FMod";
    if (is_const(a) && is_const(b) && !a->param && !b->param)
        return fold_result(im, ts_const_binary(op, &a->c, &b->c, &io->out[0].c));
    /* integer Div truncates toward zero (ids, counts: i32 tensors and integer constants) */
    bool int_a = a->t ? a->t->dtype == TS_I32 || a->t->dtype == TS_I64 : !a->param && !ts_onnx_dtype_is_float(a->c.dtype);
    bool int_b = b->t ? b->t->dtype == TS_I32 || b->t->dtype == TS_I64 : !b->param && !ts_onnx_dtype_is_float(b->c.dtype);
    /* integer arithmetic of graph tensors (position ids from a mask), exactly in int64 */
    static const char *const int_ops[] = {"Add", "Sub", "Mul", "Div", "Mod", "FMod"};
    bool int_op = false;
    for (size_t k = 0; k < sizeof int_ops / sizeof *int_ops; k++) int_op = int_op || strcmp(op, int_ops[k]) == 0;
    if (int_a && int_b && int_op && (a->t || b->t)) {
        ts_tensor *ia = i64_of(im, a, &st), *ib = ia ? i64_of(im, b, &st) : NULL;
        if (st) return st;
        if (ib) return built(im, ts_binary(im->g, op, ia, ib), &io->out[0]);
    }
    if (strcmp(op, "Div") == 0 && int_a && int_b) {
        ts_tensor *ta = as_f32(im, a, &st), *tb = ta ? as_f32(im, b, &st) : NULL;
        return tb ? built(im, ts_unary(im->g, "CastInt", ts_div(im->g, ta, tb), 0.0f, 0.0f), &io->out[0]) : st;
    }
    double s;
    /* x * c, c * x, x / c: a scale */
    if (strcmp(op, "Mul") == 0 && const_scalar(b, &s) && a->t) return built(im, ts_scale(im->g, a->t, (float)s), &io->out[0]);
    if (strcmp(op, "Mul") == 0 && const_scalar(a, &s) && b->t) return built(im, ts_scale(im->g, b->t, (float)s), &io->out[0]);
    if (strcmp(op, "Div") == 0 && const_scalar(b, &s) && a->t && s != 0.0)
        return built(im, ts_scale(im->g, a->t, (float)(1.0 / s)), &io->out[0]);
    if (strcmp(op, "Pow") == 0 && const_scalar(b, &s) && a->t && a->t->dtype == TS_F32)
        return built(im, ts_pow(im->g, a->t, (float)s), &io->out[0]);
    /* x ** c with c a one-element float initializer: a constant exponent,
     * not a parameter (PyTorch's dynamo exporter stores its constants as
     * initializers; a trained exponent's gradient x^c log x is NaN for
     * every negative x, GPT-2's tanh Gelu) */
    if (strcmp(op, "Pow") == 0 && b->param && ts_shape_numel(&b->c.shape) == 1) {
        ts_tensor *ta = as_f32(im, a, &st);
        if (!ta || (st = decoded(im, b))) return st;
        return built(im, ts_pow(im->g, ta, (float)b->c.v[0]), &io->out[0]);
    }
    if (strcmp(op, "Add") && strcmp(op, "Sub") && strcmp(op, "Mul") && strcmp(op, "Div")) return binary_family(im, op, a, b, &io->out[0]);
    ts_tensor *ta = as_f32_per_sample(im, a, b->t, &st), *tb = ta ? as_f32_per_sample(im, b, a->t, &st) : NULL;
    if (!tb) return st;
    if (strcmp(op, "Div") == 0) return built(im, ts_div(im->g, ta, tb), &io->out[0]);
    bool swap = ta->shape.ndim < tb->shape.ndim || (ta->shape.ndim == tb->shape.ndim && ts_shape_numel(&ta->shape) < ts_shape_numel(&tb->shape));
    ts_tensor *r;
    if (!swap) r = strcmp(op, "Add") == 0 ? ts_add(im->g, ta, tb) : strcmp(op, "Sub") == 0 ? ts_sub(im->g, ta, tb) : ts_mul(im->g, ta, tb);
    else if (strcmp(op, "Sub") == 0) r = ts_scale(im->g, ts_sub(im->g, tb, ta), -1.0f);
    else r = strcmp(op, "Add") == 0 ? ts_add(im->g, tb, ta) : ts_mul(im->g, tb, ta);
    return built(im, r, &io->out[0]);
}

/* Unary ops: folded on constants; on graph tensors those the op table has. */
static ts_status op_unary(importer *im, node_io *io) {
    const char *op = im->node->op_type;
    value *x = io->in[0];
    if (is_const(x) && !x->param) return fold_result(im, ts_const_unary(op, &x->c, &io->out[0].c));
    ts_status st = TS_OK;
    ts_tensor *t = as_f32(im, x, &st);
    if (!t) return st;
    if (strcmp(op, "Relu") == 0) return built(im, ts_relu(im->g, t), &io->out[0]);
    if (strcmp(op, "Log") == 0) return built(im, ts_log(im->g, t), &io->out[0]);
    if (strcmp(op, "Exp") == 0) return built(im, ts_exp(im->g, t), &io->out[0]);
    if (strcmp(op, "Reciprocal") == 0) return built(im, ts_pow(im->g, t, -1.0f), &io->out[0]); /* 1/x, gradient -1/x^2 */
    if (strcmp(op, "Neg") == 0) return built(im, ts_scale(im->g, t, -1.0f), &io->out[0]);
    if (strcmp(op, "Tanh") == 0) return built(im, ts_tanh(im->g, t), &io->out[0]);
    if (strcmp(op, "Sigmoid") == 0) return built(im, ts_sigmoid(im->g, t), &io->out[0]);
    if (strcmp(op, "Sqrt") == 0) return built(im, ts_sqrt(im->g, t), &io->out[0]);
    if (strcmp(op, "Erf") == 0) return built(im, ts_erf(im->g, t), &io->out[0]);
    if (strcmp(op, "Abs") == 0) return built(im, ts_abs(im->g, t), &io->out[0]);
    /* the unary family (ts_unary): the op table's names are ONNX's, with
     * the attributes' defaults of the ONNX op */
    float alpha = 0.0f, beta = 0.0f;
    if (strcmp(op, "IsInf") == 0) {
        alpha = (float)attr_i(im, "detect_positive", 1);
        beta = (float)attr_i(im, "detect_negative", 1);
    } else if (strcmp(op, "HardSigmoid") == 0) {
        alpha = (float)attr_f(im, "alpha", 0.2);
        beta = (float)attr_f(im, "beta", 0.5);
    } else if (strcmp(op, "LeakyRelu") == 0) {
        alpha = (float)attr_f(im, "alpha", 0.01);
    } else if (strcmp(op, "Elu") == 0) {
        alpha = (float)attr_f(im, "alpha", 1.0);
    } else if (strcmp(op, "Selu") == 0) {
        alpha = (float)attr_f(im, "alpha", 1.67326319217681884765625);
        beta = (float)attr_f(im, "gamma", 1.05070102214813232421875);
    } else if (strcmp(op, "Gelu") == 0) {
        static const char *const approximations[] = {"none", "tanh"};
        const Attr *ap = attr(im, "approximate");
        int k = ap && ap->has_s ? attr_choice(ap, approximations, 2) : 0;
        if (k == 2)
            return node_error(im, TS_ERR_FORMAT, "attribute 'approximate' is '%.*s'; Gelu takes 'none' or 'tanh'", (int)ap->s.len,
                              (const char *)ap->s.data);
        return built(im, ts_gelu(im->g, t, k == 1), &io->out[0]);
    }
    return built(im, ts_unary(im->g, op, t, alpha, beta), &io->out[0]);
}

static ts_status op_identity(importer *im, node_io *io);

/* The domain of tensorscope's own ops in an ONNX file, which its Python
 * wrapper writes where ONNX has no op: StopGradient, a torch detach(). */
#define TS_ONNX_DOMAIN "ai.tensorscope"

/* x, through which no gradient flows (a constant or integers have none). */
static ts_status op_stop_gradient(importer *im, node_io *io) {
    value *x = io->in[0];
    if ((is_const(x) && !x->param) || (x->t && x->t->dtype != TS_F32)) return op_identity(im, io);
    ts_status st = TS_OK;
    ts_tensor *t = as_tensor(im, x, &st);
    return t ? built(im, ts_stop_gradient(im->g, t), &io->out[0]) : st;
}

/* Max, Min, Sum and Mean of any number of inputs (at least one),
 * broadcast: a chain of the binary op (Mean's links are Sum's), each link
 * a named tensor; Mean then scales the sum by 1/n. */
static ts_status op_variadic(importer *im, node_io *io) {
    value *acc = io->in[0];
    bool mean = strcmp(im->node->op_type, "Mean") == 0;
    if (!acc) return node_error(im, TS_ERR_FORMAT, "input 0 is empty; %s needs at least one input", im->node->op_type);
    if (io->n_in == 1) return op_identity(im, io);
    value tmp = {0};
    for (int i = 1; i < io->n_in; i++) {
        if (!io->in[i]) return node_error(im, TS_ERR_FORMAT, "input %d is empty", i);
        value *out = i + 1 == io->n_in && !mean ? &io->out[0] : &tmp;
        ts_status st = binary_family(im, mean ? "Sum" : im->node->op_type, acc, io->in[i], out);
        if (st) return st;
        acc = &tmp;
    }
    return mean ? built(im, ts_scale(im->g, tmp.t, 1.0f / (float)io->n_in), &io->out[0]) : TS_OK;
}

/* The same tensor under a second name (a parameter stays one tensor). */
static ts_status op_identity(importer *im, node_io *io) {
    ts_status st = TS_OK;
    value *x = io->in[0];
    /* PyTorch's exporter stores parameters of equal values once and gives
     * the others as Identity of it (the layer norms' ones and zeros): a
     * parameter of its own under the output's name, with its own gradient
     * (a tied weight is one initializer, read by name, never an Identity) */
    if (x->param && im->node->output[0] && *im->node->output[0]) {
        value twin = {.name = im->node->output[0], .param = x->param};
        twin.c.shape = x->c.shape;
        twin.c.dtype = x->c.dtype;
        ts_tensor *t = as_tensor(im, &twin, &st);
        ts_const_free(&twin.c);
        return t ? built(im, t, &io->out[0]) : st;
    }
    if (x->param && !as_tensor(im, x, &st)) return st;
    if (is_const(io->in[0])) return fold_result(im, ts_const_copy(&io->in[0]->c, &io->out[0].c));
    io->out[0] = (value){.t = io->in[0]->t};
    return TS_OK;
}

/* Dropout: the identity in an inference export (no training_mode input, or
 * a constant false), its mask output all ones; in a training export
 * ts_dropout, whose mask output is where the drawn mask keeps a value. */
static ts_status op_dropout(importer *im, node_io *io) {
    double train = 0, ratio = 0.5;
    if (io->n_in >= 3 && io->in[2] && !(is_const(io->in[2]) && const_scalar(io->in[2], &train)))
        return node_error(im, TS_ERR_UNSUPPORTED, "a Dropout whose training_mode is computed by the graph is not available%s",
                          bind_hint(io->in[2]));
    if (io->n_in >= 2 && io->in[1] && !const_scalar(io->in[1], &ratio))
        return node_error(im, TS_ERR_UNSUPPORTED, "a Dropout whose ratio is not a constant is not available%s", bind_hint(io->in[1]));
    if (train != 0) {
        ts_status st = TS_OK;
        ts_tensor *x = as_tensor(im, io->in[0], &st), *y = x ? ts_dropout(im->g, x, (float)ratio) : NULL;
        if (!x) return st;
        st = built(im, y, &io->out[0]);
        /* y = x * mask, the mask 0 or 1/(1-ratio); only where a node or the
         * graph's outputs read it (training exports name it and never read
         * it: made anyway, it would be the last tensor of the Dropout's
         * module, which `compare` pairs with PyTorch's module output) */
        if (!st && io->n_out > 1 && *im->node->output[1] && ts_strmap_get(&im->uses, im->node->output[1]) > 0)
            st = built(im, ts_unary(im->g, "CastBool", ts_tensor_input(y, 1), 0.0f, 0.0f), &io->out[1]);
        return st;
    }
    ts_status st = op_identity(im, io);
    if (!st && io->n_out > 1) st = fold_result(im, ts_const_fill(shape_of(io->in[0]), TS_ONNX_BOOL, 1.0, &io->out[1].c));
    return st;
}

static ts_status op_constant(importer *im, node_io *io) {
    const Attr *a;
    ts_const *c = &io->out[0].c;
    if ((a = attr(im, "value")) && a->t) return tensor_to_const(im, a->t, "the Constant's value", c);
    if ((a = attr(im, "value_float")) && a->has_f) return fold_result(im, ts_const_fill(&(ts_shape){0}, TS_ONNX_FLOAT, a->f, c));
    if ((a = attr(im, "value_int")) && a->has_i) return fold_result(im, ts_const_fill(&(ts_shape){0}, TS_ONNX_INT64, (double)a->i, c));
    if ((a = attr(im, "value_floats")) || (a = attr(im, "value_ints"))) {
        bool fl = a->n_floats > 0 || strcmp(a->name, "value_floats") == 0;
        size_t n = fl ? a->n_floats : a->n_ints;
        ts_status st = ts_const_fill(&(ts_shape){.ndim = 1, .d = {(int64_t)n}}, fl ? TS_ONNX_FLOAT : TS_ONNX_INT64, 0, c);
        for (size_t i = 0; !st && i < n; i++) c->v[i] = fl ? a->floats[i] : (double)a->ints[i];
        return fold_result(im, st);
    }
    if ((a = attr(im, "sparse_value")) || (a = attr(im, "value_string")) || (a = attr(im, "value_strings")))
        return node_error(im, TS_ERR_UNSUPPORTED, "a Constant given as '%s' is not available (%s); 'value', 'value_float(s)' and "
                          "'value_int(s)' are", a->name, a->name[0] == 's' ? "sparse tensors" : "strings");
    return node_error(im, TS_ERR_FORMAT, "a Constant needs one of the attributes 'value', 'value_float(s)', 'value_int(s)'");
}

/* Shape of anything whose shape is known (every value here). */
static ts_status op_shape(importer *im, node_io *io) {
    const ts_shape *s = shape_of(io->in[0]);
    int64_t start = attr_i(im, "start", 0), end = attr_i(im, "end", s->ndim);
    if (start < 0) start += s->ndim;
    if (end < 0) end += s->ndim;
    start = start < 0 ? 0 : start > s->ndim ? s->ndim : start;
    end = end < start ? start : end > s->ndim ? s->ndim : end;
    ts_const *c = &io->out[0].c;
    ts_status st = ts_const_fill(&(ts_shape){.ndim = 1, .d = {end - start}}, TS_ONNX_INT64, 0, c);
    for (int64_t i = start; !st && i < end; i++) c->v[i - start] = (double)s->d[i];
    return fold_result(im, st);
}

static ts_status op_size(importer *im, node_io *io) {
    return fold_result(im, ts_const_fill(&(ts_shape){0}, TS_ONNX_INT64, (double)ts_shape_numel(shape_of(io->in[0])), &io->out[0].c));
}

/* Ops that exist only folded here: every input must be a constant. */
static ts_status need_consts(importer *im, node_io *io) {
    for (int i = 0; i < io->n_in; i++) {
        ts_status st = decoded(im, io->in[i]);
        if (st) return st;
    }
    for (int i = 0; i < io->n_in; i++)
        if (io->in[i] && !is_const(io->in[i]))
            return node_error(im, TS_ERR_UNSUPPORTED, "%s is folded when its inputs are constants, but input %d ('%s') is computed by "
                              "the graph; %s on graph tensors is not available yet%s", im->node->op_type, i, io->in[i]->name,
                              im->node->op_type, bind_hint(io->in[i]));
    return TS_OK;
}

/* An int64 list from a constant input (axes, shape, ...) into v[0..*n),
 * each value in [lo, hi]: outside it an error, or with `clamp` the nearest
 * end (Slice's starts and ends, which ONNX clamps anyway). */
static ts_status const_ints(importer *im, value *x, int64_t *v, int *n, const char *what, int64_t lo, int64_t hi, bool clamp) {
    ts_status st = decoded(im, x);
    if (st) return st;
    if (!is_const(x) || x->c.shape.ndim > 1 || ts_shape_numel(&x->c.shape) > TS_MAX_DIMS)
        return node_error(im, TS_ERR_UNSUPPORTED, "its %s ('%s') must be a constant list of at most %d values%s", what, x ? x->name : "?",
                          TS_MAX_DIMS, bind_hint(x));
    *n = (int)ts_shape_numel(&x->c.shape);
    for (int i = 0; i < *n; i++) {
        double d = x->c.v[i];
        bool ok = ts_onnx_int_value(d, lo, hi, &v[i]);
        if (!ok && clamp && !isnan(d)) {
            v[i] = d < 0 ? lo : hi;
            ok = true;
        }
        if (!ok)
            return node_error(im, TS_ERR_FORMAT, "its %s ('%s') holds %g at %d; it takes integers from %lld to %lld", what, x->name,
                              x->c.v[i], i, (long long)lo, (long long)hi);
    }
    return TS_OK;
}

/* The axes of Squeeze, Unsqueeze and the Reduce ops: the attribute 'axes'
 * before version `input_since` of the op (attr_versions refuses it from
 * then on), from then on the (constant) input `input`, refused before.
 * *n = -1 when absent. */
static ts_status axes_of(importer *im, node_io *io, int input, int input_since, int64_t *axes, int *n) {
    if (since(im, input_since)) {
        *n = -1;
        return io->n_in > input && io->in[input] ? const_ints(im, io->in[input], axes, n, "axes", -TS_MAX_DIMS, TS_MAX_DIMS, false) : TS_OK;
    }
    if (io->n_in > input)
        return node_error(im, TS_ERR_FORMAT, "%s takes its axes as the attribute 'axes' before opset %d, not as input %d", im->node->op_type,
                          input_since, input);
    return attr_int_list(im, "axes", -TS_MAX_DIMS, TS_MAX_DIMS, axes, TS_MAX_DIMS, n);
}

static ts_status reshape_to(importer *im, value *x, const ts_shape *s, value *out) {
    if (is_const(x) && !x->param) {
        ts_status st = ts_const_copy(&x->c, &out->c);
        if (!st) out->c.shape = *s;
        return fold_result(im, st);
    }
    ts_status st = TS_OK;
    ts_tensor *t = as_tensor(im, x, &st);
    if (!t) return st;
    if (ts_shape_equal(&t->shape, s)) {
        *out = (value){.t = t};
        return TS_OK;
    }
    return built(im, ts_reshape(im->g, t, s->ndim, s->d), out);
}

static ts_status op_reshape(importer *im, node_io *io) {
    if (io->n_in != 2) return node_error(im, TS_ERR_FORMAT, "needs 2 inputs");
    int64_t want[TS_MAX_DIMS];
    int n = 0;
    bool allowzero = false;
    ts_status st = const_ints(im, io->in[1], want, &n, "target shape", -1, TS_MAX_NUMEL, false);
    if (!st) st = attr_flag(im, "allowzero", &allowzero);
    if (st) return st;
    ts_shape s;
    st = ts_const_reshape_target(shape_of(io->in[0]), want, n, allowzero, &s);
    if (st) return fold_result(im, st);
    return reshape_to(im, io->in[0], &s, &io->out[0]);
}

static ts_status op_flatten(importer *im, node_io *io) {
    const ts_shape *in = shape_of(io->in[0]);
    int axis;
    ts_status st = attr_axis(im, "axis", 1, in->ndim, true, &axis);
    if (st) return st;
    if (axis == 1 && in->ndim >= 2 && io->in[0]->t) return built(im, ts_flatten(im->g, io->in[0]->t, 1), &io->out[0]);
    ts_shape s = {.ndim = 2, .d = {1, 1}};
    for (int i = 0; i < in->ndim; i++) s.d[i < axis ? 0 : 1] *= in->d[i];
    return reshape_to(im, io->in[0], &s, &io->out[0]);
}

static ts_status op_squeeze_unsqueeze(importer *im, node_io *io) {
    int64_t axes[TS_MAX_DIMS];
    int n = 0;
    ts_status st = axes_of(im, io, 1, 13, axes, &n);
    if (st) return st;
    ts_shape s;
    st = ts_const_squeeze_shape(shape_of(io->in[0]), axes, n, strcmp(im->node->op_type, "Unsqueeze") == 0, &s);
    if (st) return fold_result(im, st);
    return reshape_to(im, io->in[0], &s, &io->out[0]);
}

/* Softmax and LogSoftmax over `axis`; before opset 13 (versions 1 and 11)
 * over the input coerced to 2-D at axis (default 1): every dim from axis
 * on at once, the same where the dims after axis are 1 (the last axis, a
 * 2-D input's default). */
static ts_status op_softmax(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *t = as_tensor(im, io->in[0], &st);
    if (!t) return st;
    int axis;
    if ((st = attr_axis(im, "axis", since(im, 13) ? -1 : 1, t->shape.ndim, false, &axis))) return st;
    for (int d = axis + 1; !since(im, 13) && d < t->shape.ndim; d++)
        if (t->shape.d[d] != 1)
            return node_error(im, TS_ERR_UNSUPPORTED, "before opset 13, %s normalizes over every dim from axis %d on at once (the input "
                              "coerced to 2-D), which is available only where the dims after the axis are 1 (here dim %d is %lld); "
                              "re-export with opset 13 or later", im->node->op_type, axis, d, (long long)t->shape.d[d]);
    bool log = strcmp(im->node->op_type, "LogSoftmax") == 0;
    return built(im, log ? ts_log_softmax(im->g, t, axis) : ts_softmax(im->g, t, axis), &io->out[0]);
}

/* [.., K] x [K, N]: 2-D, or leading dims folded into rows. */
static ts_tensor *matmul_2d(importer *im, ts_tensor *a, ts_tensor *b, bool transb, ts_status *st) {
    if (b->shape.ndim != 2 || a->shape.ndim < 2) {
        *st = node_error(im, TS_ERR_UNSUPPORTED, "a batched MatMul (operands of %d and %d dimensions) is not available yet; 2-D weights "
                         "are", a->shape.ndim, b->shape.ndim);
        return NULL;
    }
    ts_tensor *x = a;
    int64_t rows = ts_shape_numel(&a->shape) / a->shape.d[a->shape.ndim - 1];
    if (a->shape.ndim > 2) x = ts_reshape(im->g, a, 2, (int64_t[]){rows, a->shape.d[a->shape.ndim - 1]});
    ts_tensor *y = transb ? ts_matmul_t(im->g, x, b) : ts_matmul(im->g, x, b);
    if (y && a->shape.ndim > 2) {
        ts_shape s = a->shape;
        s.d[s.ndim - 1] = y->shape.d[1];
        y = ts_reshape(im->g, y, s.ndim, s.d);
    }
    if (!y) *st = ts_graph_status(im->g);
    return y;
}

/* An initializer the exporter made (onnx::...) that holds exactly the
 * transpose of a named 2-D initializer: a tied weight (lm_head = wte^T)
 * whose transpose an eval export folded. The named one, or NULL. */
static value *transposed_twin(importer *im, value *v, ts_status *st) {
    if (v->twin) return v->twin;
    if (!v->param || v->t || v->c.shape.ndim != 2 || strncmp(v->name, "onnx::", 6) != 0) return NULL;
    int64_t k = v->c.shape.d[0], n = v->c.shape.d[1];
    for (size_t i = 0; i < im->nv; i++) {
        value *w = im->v[i];
        if (w == v || !w->param || w->c.shape.ndim != 2 || w->c.shape.d[0] != n || w->c.shape.d[1] != k ||
            strncmp(w->name, "onnx::", 6) == 0)
            continue;
        if ((*st = decoded(im, v)) || (*st = decoded(im, w))) return NULL;
        bool same = true;
        for (int64_t r = 0; r < k && same; r++)
            for (int64_t c = 0; c < n && same; c++) same = v->c.v[r * n + c] == w->c.v[c * k + r];
        if (same) return w;
    }
    return NULL;
}

static ts_status op_matmul(importer *im, node_io *io) {
    if (io->n_in != 2) return node_error(im, TS_ERR_FORMAT, "needs 2 inputs");
    ts_status st = TS_OK;
    value *twin = transposed_twin(im, io->in[1], &st);
    if (st) return st;
    ts_tensor *a = as_tensor(im, io->in[0], &st), *b = a ? as_tensor(im, twin ? twin : io->in[1], &st) : NULL;
    if (!b) return st;
    if (!twin && (a->shape.ndim == 1 || b->shape.ndim == 1)) { /* numpy's 1-D operands: [K] as [1,K] (A) or [K,1] (B), that dim dropped */
        bool a1 = a->shape.ndim == 1, b1 = b->shape.ndim == 1;
        if (a1) a = ts_reshape(im->g, a, 2, (int64_t[]){1, a->shape.d[0]});
        if (a && b1) b = ts_reshape(im->g, b, 2, (int64_t[]){b->shape.d[0], 1});
        ts_tensor *y = !a || !b ? NULL : b->shape.ndim > 2 ? ts_matmul_batched(im->g, a, b, 0, 0) : matmul_2d(im, a, b, false, &st);
        if (!y) return st ? st : ts_graph_status(im->g);
        ts_shape s = y->shape;
        if (b1) s.ndim--;
        if (a1) s.d[s.ndim - 2 + (b1 ? 1 : 0)] = -1; /* the 1 of A's row, dropped below */
        int64_t d[TS_MAX_DIMS];
        int n = 0;
        for (int k = 0; k < s.ndim; k++)
            if (s.d[k] != -1) d[n++] = s.d[k];
        return built(im, ts_reshape(im->g, y, n, d), &io->out[0]);
    }
    if (b->shape.ndim > 2 || (a->shape.ndim > 2 && !twin && !io->in[1]->param && b->shape.ndim == a->shape.ndim))
        return built(im, ts_matmul_batched(im->g, a, b, 0, 0), &io->out[0]);
    ts_tensor *y = matmul_2d(im, a, b, twin != NULL, &st);
    return y ? built(im, y, &io->out[0]) : st;
}

/* Y = alpha op(A) op(B) + beta C */
static ts_status op_gemm(importer *im, node_io *io) {
    if (io->n_in < 2) return node_error(im, TS_ERR_FORMAT, "needs at least 2 inputs");
    bool trans_a, trans_b;
    ts_status st = attr_flag(im, "transA", &trans_a);
    if (!st) st = attr_flag(im, "transB", &trans_b);
    if (st) return st;
    double alpha = attr_f(im, "alpha", 1.0), beta = attr_f(im, "beta", 1.0);
    ts_tensor *a = as_tensor(im, io->in[0], &st), *b = a ? as_tensor(im, io->in[1], &st) : NULL;
    if (!b) return st;
    if (trans_a && a->shape.ndim != 2) return node_error(im, TS_ERR_SHAPE, "A must be 2-D, got %d dimensions", a->shape.ndim);
    if (trans_a && !(a = ts_transpose(im->g, a, 0, 1))) return ts_graph_status(im->g);
    ts_tensor *y = matmul_2d(im, a, b, trans_b, &st);
    if (!y) return st;
    if (alpha != 1.0) y = ts_scale(im->g, y, (float)alpha);
    if (io->n_in > 2 && io->in[2] && beta != 0.0) {
        ts_tensor *c = as_tensor(im, io->in[2], &st);
        if (!c) return st;
        if (beta != 1.0) c = ts_scale(im->g, c, (float)beta);
        y = ts_add(im->g, y, c);
    }
    return built(im, y, &io->out[0]);
}

/* Pad: PyTorch writes one with zero pads before an avg_pool2d; that is
 * the identity, whatever the mode and constant value. Its pads are input 1
 * (2 per padded axis: all the starts, then all the ends), over every axis,
 * or from opset 18 on over the axes of input 3; the modes are constant
 * (the constant_value input 2, default 0), reflect and edge, and wrap from
 * opset 19 on: ts_pad (negative pads crop). */
static ts_status op_pad(importer *im, node_io *io) {
    if (io->n_in < 2 || !io->in[1]) return node_error(im, TS_ERR_FORMAT, "input 1 (pads) is required");
    if (io->n_in > 3 && !since(im, 18)) return node_error(im, TS_ERR_FORMAT, "input 3 (axes) is part of Pad from opset 18 on");
    const Attr *mode = attr(im, "mode");
    int k = 0; /* modes[k]: ts_pad_mode k */
    if (mode) {
        static const char *const modes[] = {"constant", "reflect", "edge", "wrap"};
        int known = since(im, 19) ? 4 : 3;
        if ((k = attr_choice(mode, modes, known)) == known)
            return node_error(im, TS_ERR_FORMAT, "mode '%.*s' is not one of Pad's at this opset: constant, reflect, edge%s",
                              mode->has_s ? (int)mode->s.len : 0, mode->has_s ? (const char *)mode->s.data : "", since(im, 19) ? ", wrap" : "");
    }
    int ndim = shape_of(io->in[0])->ndim, n = 0, n_axes = ndim;
    int64_t pads[2 * TS_MAX_DIMS], axes[TS_MAX_DIMS];
    ts_status st = decoded(im, io->in[1]);
    if (st) return st;
    if (!is_const(io->in[1]) || io->in[1]->c.shape.ndim > 1 || ts_shape_numel(&io->in[1]->c.shape) > 2 * TS_MAX_DIMS)
        return node_error(im, TS_ERR_UNSUPPORTED, "its pads ('%s') must be a constant list of at most %d values%s", io->in[1]->name,
                          2 * TS_MAX_DIMS, bind_hint(io->in[1]));
    n = (int)ts_shape_numel(&io->in[1]->c.shape);
    for (int i = 0; i < n; i++)
        if (!ts_onnx_int_value(io->in[1]->c.v[i], INT64_MIN, INT64_MAX, &pads[i]))
            return node_error(im, TS_ERR_FORMAT, "its pads ('%s') hold %g at %d; pads are integers", io->in[1]->name, io->in[1]->c.v[i], i);
    if (io->n_in > 3 && io->in[3]) {
        if ((st = const_ints(im, io->in[3], axes, &n_axes, "axes", -ndim, ndim - 1, false))) return st;
        bool seen[TS_MAX_DIMS] = {false};
        for (int i = 0; i < n_axes; i++) {
            int ax = norm_axis(axes[i], ndim);
            if (seen[ax]) return node_error(im, TS_ERR_FORMAT, "axis %lld is given twice", (long long)axes[i]);
            seen[ax] = true;
        }
    }
    if (n != 2 * n_axes)
        return node_error(im, TS_ERR_FORMAT, "its pads hold %d values; Pad takes 2 per padded axis (%d)", n, 2 * n_axes);
    bool zero = true;
    for (int i = 0; i < n; i++) zero = zero && pads[i] == 0;
    if (zero) return op_identity(im, io);
    /* the pads of every dim, ONNX's order: all befores, then all afters */
    int64_t all[2 * TS_MAX_DIMS] = {0};
    for (int i = 0; i < n_axes; i++) {
        int ax = io->n_in > 3 && io->in[3] ? norm_axis(axes[i], ndim) : i;
        all[ax] = pads[i], all[ndim + ax] = pads[n_axes + i];
    }
    double fill = 0;
    if (io->n_in > 2 && io->in[2] && !const_scalar(io->in[2], &fill))
        return node_error(im, TS_ERR_UNSUPPORTED, "its constant_value ('%s') must be a constant of one value%s", io->in[2]->name,
                          bind_hint(io->in[2]));
    ts_tensor *x = as_f32(im, io->in[0], &st);
    return x ? built(im, ts_pad(im->g, x, all, (ts_pad_mode)k, (float)fill), &io->out[0]) : st;
}

/* The window attributes of Conv, ConvTranspose and the pools:
 * kernel_shape, strides (ONNX's default 1), dilations, pads [begins...,
 * ends...], each range-checked, over `rank` spatial axes (0: the length of
 * kernel_shape, 1 to 3, for the pools; a convolution's is its weight's,
 * 1 to 3, its kernel taken from the weight when absent); and auto_pad
 * resolved into pads from the input's spatial sizes. */
typedef struct window {
    int rank;
    int kernel[3], stride[3], dilation[3], pad[6];
    bool has_kernel;
} window;

static ts_status window_attrs(const importer *im, window *w, int rank) {
    static const struct {
        const char *name;
        int64_t lo;
        int per_axis;
    } lists[] = {{"kernel_shape", 1, 1}, {"strides", 1, 1}, {"dilations", 1, 1}, {"pads", 0, 2}};
    int *dst[] = {w->kernel, w->stride, w->dilation, w->pad};
    bool pool = rank == 0;
    *w = (window){.rank = pool ? 2 : rank, .stride = {1, 1, 1}, .dilation = {1, 1, 1}};
    for (size_t k = 0; k < TS_ARRAY_LEN(lists); k++) {
        int64_t v[6];
        int n;
        ts_status st = attr_int_list(im, lists[k].name, lists[k].lo, INT32_MAX, v, 6, &n);
        if (st) return st;
        if (k == 0 && pool && n >= 1 && n <= 3) w->rank = n;
        int len = w->rank * lists[k].per_axis;
        if (n >= 0 && n != len)
            return node_error(im, TS_ERR_UNSUPPORTED, "attribute '%s' has %d values where %d are needed (tensorscope imports %s%s%s)", lists[k].name, n,
                              len, pool ? "" : "1-D, 2-D and 3-D ", im->node->op_type,
                              pool ? " over 1, 2 or 3 axes, as many as kernel_shape has" : ", as many values as the weight has spatial axes");
        for (int i = 0; i < n; i++) dst[k][i] = (int)v[i];
        if (k == 0) w->has_kernel = n == len;
    }
    return TS_OK;
}

/* auto_pad: NOTSET keeps the pads, VALID drops them, SAME_UPPER and
 * SAME_LOWER pad each axis of `in` (x's spatial sizes) so that the output is
 * ceil(in / stride), the odd one at the end (UPPER) or at the start. */
static ts_status window_auto_pad(importer *im, window *w, const int64_t *in) {
    static const char *const modes[] = {"NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"};
    const Attr *ap = attr(im, "auto_pad");
    int k = ap && ap->has_s ? attr_choice(ap, modes, 4) : 0;
    if (k == 0) return TS_OK;
    bool valid = k == 1, upper = k == 2;
    if (k == 4)
        return node_error(im, TS_ERR_FORMAT, "auto_pad '%.*s' is not one of NOTSET, VALID, SAME_UPPER and SAME_LOWER", (int)ap->s.len,
                          (const char *)ap->s.data);
    for (int i = 0; i < w->rank; i++) {
        int64_t out = (in[i] + w->stride[i] - 1) / w->stride[i], ek = (int64_t)(w->kernel[i] - 1) * w->dilation[i] + 1;
        int64_t total = valid ? 0 : (out - 1) * w->stride[i] + ek - in[i];
        if (total < 0) total = 0;
        w->pad[i] = (int)(upper ? total / 2 : total - total / 2), w->pad[w->rank + i] = (int)(total - w->pad[i]);
    }
    return TS_OK;
}

/* x [N,C,L] as [N,C,1,L] (unit), or back: the 1-D convolutions are the
 * 2-D ones over a unit axis (views, no copy). */
static ts_tensor *unit_axis(importer *im, ts_tensor *x, bool unit) {
    const int64_t *d = x->shape.d;
    return unit ? ts_reshape(im->g, x, 4, (int64_t[]){d[0], d[1], 1, d[2]}) : ts_reshape(im->g, x, 3, (int64_t[]){d[0], d[1], d[3]});
}

/* A convolution's input and weight (NCL, NCHW or NCDHW as PyTorch exports
 * them) and its window over the weight's 1 to 3 spatial axes, auto_pad
 * resolved for the input's sizes; 1-D ones as 2-D over a unit first axis
 * (*one). */
static ts_status conv_operands(importer *im, node_io *io, window *win, ts_tensor **x, ts_tensor **w, bool *one) {
    ts_status st = TS_OK;
    if (!(*x = as_tensor(im, io->in[0], &st)) || !(*w = as_tensor(im, io->in[1], &st))) return st;
    int r = (*w)->shape.ndim - 2;
    if (r < 1 || r > 3 || (*x)->shape.ndim != r + 2)
        return node_error(im, TS_ERR_UNSUPPORTED, "a convolution of a %d-D input by a %d-D weight is not available; 1-D, 2-D and 3-D ones "
                          "([N,C,L] by a 3-D weight, [N,C,H,W] by a 4-D one, [N,C,D,H,W] by a 5-D one) are", (*x)->shape.ndim,
                          (*w)->shape.ndim);
    if ((st = window_attrs(im, win, r))) return st;
    for (int i = 0; !win->has_kernel && i < r; i++) win->kernel[i] = (int)(*w)->shape.d[2 + i];
    if (strcmp(im->node->op_type, "Conv") == 0 && (st = window_auto_pad(im, win, (*x)->shape.d + 2))) return st;
    if ((*one = r == 1)) { /* the window's one axis becomes W, H a unit axis */
        *win = (window){.rank = 2, .kernel = {1, win->kernel[0]}, .stride = {1, win->stride[0]}, .dilation = {1, win->dilation[0]},
                        .pad = {0, win->pad[0], 0, win->pad[1]}, .has_kernel = true};
        *x = unit_axis(im, *x, true), *w = *x ? unit_axis(im, *w, true) : NULL;
        if (!*w) return ts_graph_status(im->g);
    }
    return TS_OK;
}

/* A 3-D window, its group count and output padding op as ts_conv3d_params */
static ts_conv3d_params conv3d_params(const window *win, int groups, const int64_t *op) {
    return (ts_conv3d_params){.stride_d = win->stride[0], .stride_h = win->stride[1], .stride_w = win->stride[2],
                              .pad_front = win->pad[0], .pad_top = win->pad[1], .pad_left = win->pad[2], .pad_back = win->pad[3],
                              .pad_bottom = win->pad[4], .pad_right = win->pad[5], .dilation_d = win->dilation[0],
                              .dilation_h = win->dilation[1], .dilation_w = win->dilation[2], .groups = groups, .output_pad_d = (int)op[0],
                              .output_pad_h = (int)op[1], .output_pad_w = (int)op[2]};
}

/* Conv, 1-D to 3-D: pads [begins..., ends...], strides, dilations,
 * group, auto_pad. */
static ts_status op_conv(importer *im, node_io *io) {
    window win;
    ts_conv2d_params p = {0};
    ts_status st = attr_int32(im, "group", 1, 1, INT32_MAX, &p.groups);
    ts_tensor *x, *w, *b = NULL, *y;
    bool one;
    if (st || (st = conv_operands(im, io, &win, &x, &w, &one))) return st;
    if (io->n_in > 2 && io->in[2] && !(b = as_tensor(im, io->in[2], &st))) return st;
    if (win.rank == 3) {
        ts_conv3d_params p3 = conv3d_params(&win, p.groups, (const int64_t[3]){0});
        return built(im, ts_conv3d(im->g, x, w, b, &p3), &io->out[0]);
    }
    p.stride_h = win.stride[0], p.stride_w = win.stride[1], p.dilation_h = win.dilation[0], p.dilation_w = win.dilation[1];
    p.pad_top = win.pad[0], p.pad_left = win.pad[1], p.pad_bottom = win.pad[2], p.pad_right = win.pad[3];
    y = ts_conv2d(im->g, x, w, b, &p);
    return built(im, one && y ? unit_axis(im, y, false) : y, &io->out[0]);
}

/* ConvTranspose, 1-D to 3-D: strides, pads, output_padding, dilations,
 * group; output_shape (or auto_pad SAME_*: the input's size times the
 * stride) sets the pads, the odd one at the start unless SAME_UPPER, as
 * ONNX says (an output_shape past what the transpose gives adds output
 * padding). */
static ts_status op_conv_transpose(importer *im, node_io *io) {
    window win;
    ts_conv_transpose2d_params p = {0};
    int64_t opad[3] = {0}, oshape[3], op_axis[3] = {0}; /* op_axis: the output padding of each window axis */
    int n_opad = -1, n_oshape = -1, r;
    ts_status st = attr_int32(im, "group", 1, 1, INT32_MAX, &p.groups);
    ts_tensor *x, *w, *b = NULL, *y;
    bool one;
    if (!st) st = attr_int_list(im, "output_padding", 0, INT32_MAX, opad, 3, &n_opad);
    if (!st) st = attr_int_list(im, "output_shape", 1, INT32_MAX, oshape, 3, &n_oshape);
    if (st || (st = conv_operands(im, io, &win, &x, &w, &one))) return st;
    r = one ? 1 : win.rank;
    int lo = one ? 1 : 0; /* the window's first real axis */
    if ((n_opad >= 0 && n_opad != r) || (n_oshape >= 0 && n_oshape != r))
        return node_error(im, TS_ERR_UNSUPPORTED, "attributes 'output_padding' and 'output_shape' need %d values, one per spatial axis", r);
    static const char *const modes[] = {"NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"};
    const Attr *ap = attr(im, "auto_pad");
    int mode = ap && ap->has_s ? attr_choice(ap, modes, 4) : 0;
    if (mode == 4)
        return node_error(im, TS_ERR_FORMAT, "auto_pad '%.*s' is not one of NOTSET, VALID, SAME_UPPER and SAME_LOWER", (int)ap->s.len,
                          (const char *)ap->s.data);
    for (int i = 0; i < r; i++) {
        int a = lo + i;
        int64_t in = x->shape.d[2 + a], ek = (int64_t)(win.kernel[a] - 1) * win.dilation[a] + 1, op = n_opad > 0 ? opad[i] : 0;
        if (mode == 1) win.pad[a] = win.pad[win.rank + a] = 0;
        if (n_oshape > 0 || mode >= 2) {
            int64_t want = n_oshape > 0 ? oshape[i] : in * win.stride[a], total = win.stride[a] * (in - 1) + op + ek - want;
            if (total < 0) /* larger than the transpose gives: the rows past it at the end, as output padding */
                op -= total, total = 0;
            bool upper = mode == 2;
            win.pad[a] = (int)(upper ? total / 2 : total - total / 2), win.pad[win.rank + a] = (int)(total - win.pad[a]);
        }
        op_axis[a] = op;
    }
    if (io->n_in > 2 && io->in[2] && !(b = as_tensor(im, io->in[2], &st))) return st;
    if (win.rank == 3) {
        ts_conv3d_params p3 = conv3d_params(&win, p.groups, op_axis);
        return built(im, ts_conv_transpose3d(im->g, x, w, b, &p3), &io->out[0]);
    }
    p.output_pad_h = (int)op_axis[0], p.output_pad_w = (int)op_axis[1];
    p.stride_h = win.stride[0], p.stride_w = win.stride[1], p.dilation_h = win.dilation[0], p.dilation_w = win.dilation[1];
    p.pad_top = win.pad[0], p.pad_left = win.pad[1], p.pad_bottom = win.pad[2], p.pad_right = win.pad[3];
    y = ts_conv_transpose2d(im->g, x, w, b, &p);
    return built(im, one && y ? unit_axis(im, y, false) : y, &io->out[0]);
}

/* One 2-D pool of x [N,C,H,W] over window axes a0 and a1 of `win` (-1: a
 * unit axis); with `indices` (0 none, 1 row-major, 2 column-major) *indices
 * gets the max pool's winners. */
static ts_tensor *pool_axes(importer *im, ts_tensor *x, const window *win, int a0, int a1, bool max, bool exclude_pad, bool ceil_mode,
                            int indices, ts_tensor **idx) {
    const int r = win->rank, ax[2] = {a0, a1};
    int k[2], s[2], d[2], pb[2], pa[2];
    for (int i = 0; i < 2; i++) {
        bool unit = ax[i] < 0;
        k[i] = unit ? 1 : win->kernel[ax[i]], s[i] = unit ? 1 : win->stride[ax[i]], d[i] = unit ? 1 : win->dilation[ax[i]];
        pb[i] = unit ? 0 : win->pad[ax[i]], pa[i] = unit ? 0 : win->pad[r + ax[i]];
    }
    ts_pool2d_params p = {.kernel_h = k[0], .kernel_w = k[1], .stride_h = s[0], .stride_w = s[1], .pad_top = pb[0], .pad_bottom = pa[0],
                          .pad_left = pb[1], .pad_right = pa[1], .exclude_pad = exclude_pad, .dilation_h = d[0], .dilation_w = d[1],
                          .ceil_mode = ceil_mode};
    if (indices && !(*idx = ts_max_pool2d_indices(im->g, x, &p, indices == 2))) return NULL;
    return max ? ts_max_pool2d(im->g, x, &p) : ts_avg_pool2d(im->g, x, &p);
}

/* x pooled by the window win (1, 2 or 3 axes; auto_pad resolved here)
 * into *y, MaxPool's indices into *idx where `indices` asks (1 row-major,
 * 2 column-major). */
static ts_status pool_window(importer *im, ts_tensor *x, window *w, bool max, bool exclude, bool ceil_mode, int indices, ts_tensor **out,
                             ts_tensor **out_idx) {
    window win = *w;
    ts_status st;
    const int r = win.rank;
    if (x->shape.ndim != r + 2)
        return node_error(im, TS_ERR_SHAPE, "a %d-D window pools %s inputs; this one has %d dimensions", r,
                          (const char *[]){"[N,C,L]", "[N,C,H,W]", "[N,C,D,H,W]"}[r - 1], x->shape.ndim);
    if ((st = window_auto_pad(im, &win, x->shape.d + 2))) return st;
    const int64_t *d = x->shape.d;
    ts_tensor *y, *idx = NULL;
    if (r == 1) { /* a 1-D index q*L + l is the [N,C,1,L] pool's, in either storage order */
        y = ts_reshape(im->g, x, 4, (int64_t[]){d[0], d[1], 1, d[2]});
        y = y ? pool_axes(im, y, &win, -1, 0, max, exclude, ceil_mode, indices ? 1 : 0, &idx) : NULL;
        int64_t s3[3] = {d[0], d[1], y ? y->shape.d[3] : 0};
        if (y) y = ts_reshape(im->g, y, 3, s3);
        if (y && idx) idx = ts_reshape(im->g, idx, 3, s3);
    } else if (r == 2) {
        y = pool_axes(im, x, &win, 0, 1, max, exclude, ceil_mode, indices, &idx);
    } else {
        y = ts_reshape(im->g, x, 4, (int64_t[]){d[0], d[1] * d[2], d[3], d[4]});
        y = y ? pool_axes(im, y, &win, 1, 2, max, exclude, ceil_mode, 0, NULL) : NULL;
        int64_t OH = y ? y->shape.d[2] : 0, OW = y ? y->shape.d[3] : 0;
        if (y) y = ts_reshape(im->g, y, 4, (int64_t[]){d[0], d[1], d[2], OH * OW});
        y = y ? pool_axes(im, y, &win, 0, -1, max, exclude, ceil_mode, 0, NULL) : NULL;
        if (y) y = ts_reshape(im->g, y, 5, (int64_t[]){d[0], d[1], y->shape.d[2], OH, OW});
    }
    *out = y;
    if (out_idx) *out_idx = idx;
    return y ? TS_OK : ts_graph_status(im->g);
}

/* MaxPool and AveragePool over 1, 2 or 3 spatial axes, MaxPool's Indices
 * (storage_order 0 or 1) over 1 or 2.
 * 1-D pools [N,C,L] as [N,C,1,L]; 3-D pools H,W of [N,C*D,H,W], then D of
 * [N,C,D,OH*OW]: a box's max is the max of its rows' maxes, and its mean
 * the mean of theirs, the divisors (taps inside the padded input, or inside
 * the input) being products over the axes. */
static ts_status op_pool(importer *im, node_io *io) {
    bool max = strcmp(im->node->op_type, "MaxPool") == 0, ceil_mode = false, include_pad = false;
    window win;
    ts_status st = window_attrs(im, &win, 0);
    if (!st) st = attr_flag(im, "ceil_mode", &ceil_mode);
    if (!st) st = attr_flag(im, "count_include_pad", &include_pad);
    if (st) return st;
    if (!win.has_kernel) return node_error(im, TS_ERR_FORMAT, "its attribute 'kernel_shape' is missing");
    int indices = 0;
    if (max && io->n_out > 1 && im->node->output[1] && *im->node->output[1]) {
        bool column_major;
        if ((st = attr_flag(im, "storage_order", &column_major))) return st;
        if (win.rank == 3) return node_error(im, TS_ERR_UNSUPPORTED, "MaxPool's indices output is available for 1-D and 2-D windows, not 3-D");
        indices = column_major ? 2 : 1;
    }
    ts_tensor *x = as_f32(im, io->in[0], &st), *y = NULL, *idx = NULL; /* integers pooled as f32 */
    if (!x || (st = pool_window(im, x, &win, max, !max && !include_pad, ceil_mode, indices, &y, &idx))) return st;
    if (indices && (st = built(im, idx, &io->out[1]))) return st;
    return built(im, y, &io->out[0]);
}

/* LpPool: (sum over the window of |x|^p)^(1/p), the padding zeros: the
 * average pool of |x|^p counting the padding, times the window's size;
 * ceil_mode's partial last windows are not available. */
static ts_status op_lp_pool(importer *im, node_io *io) {
    window win;
    bool ceil_mode = false;
    int p;
    ts_status st = window_attrs(im, &win, 0);
    if (!st) st = attr_flag(im, "ceil_mode", &ceil_mode);
    if (!st) st = attr_int32(im, "p", 2, 1, 64, &p);
    if (st) return st;
    if (!win.has_kernel) return node_error(im, TS_ERR_FORMAT, "its attribute 'kernel_shape' is missing");
    if (ceil_mode) return node_error(im, TS_ERR_UNSUPPORTED, "ceil_mode 1 is not available for LpPool; ceil_mode 0 is");
    ts_tensor *x = as_f32(im, io->in[0], &st), *y = NULL;
    if (!x) return st;
    ts_graph *g = im->g;
    ts_tensor *a = p == 2 ? ts_mul(g, x, x) : p == 1 ? ts_abs(g, x) : ts_pow(g, ts_abs(g, x), (float)p);
    if (!a || (st = pool_window(im, a, &win, false, false, false, 0, &y, NULL))) return st ? st : ts_graph_status(g);
    double k = 1;
    for (int i = 0; i < win.rank; i++) k *= win.kernel[i];
    y = ts_scale(g, y, (float)k);
    y = p == 1 ? y : p == 2 ? ts_sqrt(g, y) : ts_pow(g, y, 1.0f / (float)p);
    return built(im, y, &io->out[0]);
}

/* GlobalAveragePool: [N,C,H,W] is the GlobalAvgPool op; [N,C,L] and
 * [N,C,D,H,W] (AdaptiveAvgPool1d(1), AdaptiveAvgPool3d(1)) the mean over
 * the spatial axes, kept. */
static ts_status op_global_avg_pool(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = as_tensor(im, io->in[0], &st);
    if (!x) return st;
    if (x->shape.ndim == 4) return built(im, ts_global_avg_pool2d(im->g, x), &io->out[0]);
    int ax[TS_MAX_DIMS], n = 0;
    for (int d = 2; d < x->shape.ndim; d++) ax[n++] = d;
    if (n == 0) return node_error(im, TS_ERR_SHAPE, "pools an input [N,C,d1,...] of at least 3 dimensions; it has %d", x->shape.ndim);
    return built(im, ts_reduce_mean(im->g, x, n, ax, 1), &io->out[0]);
}

/* A running statistic (`stat`: running_mean, running_var): a buffer under
 * the initializer's name (or the name of a constant: an input bound at
 * import). PyTorch's exporters store initializers of equal values once: a
 * fresh BatchNorm's running_var is its weight's ones, its running_mean its
 * bias's zeros (an eval-mode export gives it as the parameter itself, or an
 * Identity of it, which made a parameter of its own): then the module's
 * own buffer `<module>.<stat>` with those values (the Identity's parameter
 * becomes that buffer). */
static ts_tensor *as_buffer(importer *im, value *v, const char *stat, bool training, ts_status *st) {
    if (v->t && v->t->op == TS_OP_BUFFER) return v->t;
    if (v->t && v->t->op != TS_OP_INPUT) {
        char scope[512], name[600];
        ts_graph_scope_path(im->g, scope, sizeof scope);
        snprintf(name, sizeof name, "%s%s%s", scope, *scope ? "." : "", stat);
        ts_tensor *have = ts_graph_find(im->g, name), *b;
        if (have && have->op == TS_OP_BUFFER) return have;
        if (have == v->t && have->op == TS_OP_PARAM) {
            have->op = TS_OP_BUFFER;
            return have;
        }
        /* the module's own statistic read through graph ops (InstanceNorm's
         * tiled over the batch, below): a PyTorch `running_mean` or
         * `running_var` is a buffer, never trained; the node's per-sample
         * one is `<stat>.tiled` */
        if (have && have->op == TS_OP_PARAM && have->value) {
            have->op = TS_OP_BUFFER;
            snprintf(name + strlen(name), sizeof name - strlen(name), ".tiled");
            have = ts_graph_find(im->g, name);
            if (have && have->op == TS_OP_BUFFER) return have;
        }
        /* computed in the graph (PyTorch's InstanceNorm with running
         * statistics tiles them over the batch into a BatchNormalization of
         * [1, N*C, ...], whose running outputs nothing reads): a training
         * node normalises by the batch's statistics, its running ones start
         * at 0 and 1 in a buffer of their own; an inference node would need
         * their values */
        if (!v->t->value && !training) {
            *st = node_error(im, TS_ERR_UNSUPPORTED, "its running statistic '%s' is computed in the graph ('%s'); an inference-mode "
                             "BatchNormalization takes its running statistics as initializers", v->name, v->t->name);
            return NULL;
        }
        if (have || v->t->dtype != TS_F32 || !(b = ts_buffer(im->g, name, v->t->shape.ndim, v->t->shape.d))) {
            *st = have ? node_error(im, TS_ERR_UNSUPPORTED, "its running statistic '%s' shares the values of '%s', and '%s' is taken", v->name,
                                    v->t->name, name)
                       : ts_graph_status(im->g) ? ts_graph_status(im->g)
                                                : node_error(im, TS_ERR_UNSUPPORTED, "its running statistic '%s' is not float", v->name);
            return NULL;
        }
        int64_t n = ts_shape_numel(&b->shape);
        if (v->t->value) memcpy(b->value, v->t->value, (size_t)n * sizeof(float));
        else
            for (int64_t i = 0; i < n; i++) b->value[i] = strcmp(stat, "running_var") == 0 ? 1.0f : 0.0f;
        return b;
    }
    if (!v->param && !v->c.v) {
        *st = node_error(im, TS_ERR_UNSUPPORTED, "its running statistic '%s' must be an initializer%s", v->name, bind_hint(v));
        return NULL;
    }
    ts_tensor *b = ts_buffer(im->g, v->name, v->c.shape.ndim, v->c.shape.d);
    if (!b || (*st = decoded(im, v))) {
        if (!b) *st = ts_graph_status(im->g);
        return NULL;
    }
    int64_t n = ts_shape_numel(&v->c.shape);
    for (int64_t i = 0; i < n; i++) b->value[i] = (float)v->c.v[i];
    v->t = b;
    return b;
}

/* BatchNormalization: training_mode 1 (a training export) normalises with
 * batch statistics and updates the running buffers (ONNX's momentum m is
 * PyTorch's 1 - m); an inference export's node keeps using the running
 * values when trained (frozen). Without the attribute, a node with the
 * running outputs is a training one, as BatchNormalization-9 says (PyTorch
 * writes its InstanceNorm with running statistics so at every opset). */
static ts_status op_batch_norm(importer *im, node_io *io) {
    if (io->n_in < 5) return node_error(im, TS_ERR_FORMAT, "needs 5 inputs");
    bool training;
    ts_status st = attr_flag(im, "training_mode", &training);
    if (st) return st;
    if (!attr(im, "training_mode") && io->n_out > 1 && im->node->output[1] && *im->node->output[1]) training = true;
    float eps = (float)attr_f(im, "epsilon", 1e-5), momentum = (float)(1.0 - attr_f(im, "momentum", 0.9));
    ts_tensor *x = as_tensor(im, io->in[0], &st), *w = x ? as_tensor(im, io->in[1], &st) : NULL,
              *b = w ? as_tensor(im, io->in[2], &st) : NULL, *rm = b ? as_buffer(im, io->in[3], "running_mean", training, &st) : NULL,
              *rv = rm ? as_buffer(im, io->in[4], "running_var", training, &st) : NULL;
    if (!rv) return st;
    /* [N,C,L] and [N,C,D,H,W] as the op's [N,C,H,W]: [N,C,1,L], [N,C,D,H*W] (views) */
    const int64_t *d = x->shape.d;
    int nd = x->shape.ndim;
    ts_tensor *x4 = nd == 3 ? ts_reshape(im->g, x, 4, (int64_t[]){d[0], d[1], 1, d[2]})
                    : nd == 5 ? ts_reshape(im->g, x, 4, (int64_t[]){d[0], d[1], d[2], d[3] * d[4]}) : x;
    ts_tensor *y = x4 ? ts_batch_norm(im->g, x4, w, b, rm, rv, eps, momentum, !training) : NULL;
    return built(im, y && x4 != x ? ts_reshape(im->g, y, nd, d) : y, &io->out[0]);
}
/* The file's own loss: NegativeLogLikelihoodLoss (after a LogSoftmax) and
 * SoftmaxCrossEntropyLoss on scores [N,C,d1..] and integer labels [N,d1..],
 * with class weights and ignore_index, reduced by none, sum or mean; the
 * second output of SoftmaxCrossEntropyLoss is the log-probabilities. */
/* An f32 graph constant of `shape` holding v[0..numel). */
static ts_tensor *f32_constant(importer *im, const char *name, const ts_shape *shape, const float *v) {
    return ts_constant(im->g, name, &(ts_array){.dtype = TS_F32, .ndim = shape->ndim, .shape = {shape->d[0], shape->d[1], shape->d[2],
                       shape->d[3], shape->d[4], shape->d[5], shape->d[6], shape->d[7]}, .data = (void *)v});
}

/* NegativeLogLikelihoodLoss on log-probabilities [N,C,d1..dk] and labels
 * [N,d1..dk] as ONNX defines it, from graph ops (so its gradient is theirs):
 * each element's loss is -logp[n, y, d] * weight[y], 0 where y is
 * ignore_index; reduction none keeps them, sum adds them, mean divides the
 * sum by the weights of the elements counted. */
static ts_tensor *nll_composed(importer *im, ts_tensor *logp, ts_tensor *y, ts_tensor *w, bool has_ii, int64_t ii, int reduction,
                               ts_status *st) {
    ts_graph *g = im->g;
    const ts_shape *xs = &logp->shape;
    bool fits = xs->ndim >= 2 && y->shape.ndim == xs->ndim - 1 && y->shape.d[0] == xs->d[0];
    for (int d = 1; fits && d < y->shape.ndim; d++) fits = y->shape.d[d] == xs->d[d + 1];
    if (!fits) {
        char a[96], b[96];
        *st = node_error(im, TS_ERR_SHAPE, "expects scores [N,C,d1,...] and labels [N,d1,...], got %s and %s", ts_shape_str(xs, a, sizeof a),
                         ts_shape_str(&y->shape, b, sizeof b));
        return NULL;
    }
    int64_t C = xs->d[1];
    ts_shape ys = *xs, cs = {.ndim = xs->ndim};
    ys.d[1] = 1; /* labels as [N,1,d1..] */
    for (int d = 0; d < cs.ndim; d++) cs.d[d] = d == 1 ? C : 1;
    float *cls = ts_malloc((size_t)C * sizeof *cls);
    if (!cls) {
        *st = TS_ERR_OUT_OF_MEMORY;
        return NULL;
    }
    for (int64_t c = 0; c < C; c++) cls[c] = (float)c;
    ts_tensor *classes = f32_constant(im, "classes", &cs, cls);
    ts_free(cls);
    ts_tensor *yf = y->dtype == TS_I32 ? ts_unary(g, "CastFloat", y, 0.0f, 0.0f) : y;
    ts_tensor *yu = ts_reshape(g, yf, ys.ndim, ys.d);
    ts_tensor *pick = ts_binary(g, "Equal", yu, classes); /* one-hot [N,C,d1..] */
    if (pick && w) {
        ts_tensor *wr = ts_reshape(g, w, cs.ndim, cs.d);
        pick = wr ? ts_mul(g, pick, wr) : NULL;
    }
    if (pick && has_ii) {
        const float one = 1.0f, ignored = (float)ii;
        ts_shape scalar = {0};
        ts_tensor *is_ii = ts_binary(g, "Equal", yu, f32_constant(im, "ignore_index", &scalar, &ignored));
        ts_tensor *keep = is_ii ? ts_sub(g, f32_constant(im, "one", &scalar, &one), is_ii) : NULL;
        pick = keep ? ts_mul(g, pick, keep) : NULL;
    }
    int axis1 = 1, all[TS_MAX_DIMS];
    ts_tensor *loss = pick ? ts_reduce_sum(g, ts_mul(g, pick, logp), 1, &axis1, 0) : NULL;
    loss = loss ? ts_scale(g, loss, -1.0f) : NULL;
    for (int d = 0; d < y->shape.ndim; d++) all[d] = d;
    if (loss && reduction > 0) loss = ts_reduce_sum(g, loss, y->shape.ndim, all, 0);
    if (loss && reduction == 2) {
        ts_tensor *counted = ts_reduce_sum(g, ts_reduce_sum(g, pick, 1, &axis1, 0), y->shape.ndim, all, 0);
        loss = counted ? ts_div(g, loss, counted) : NULL;
    }
    if (!loss) *st = ts_graph_status(g);
    return loss;
}

/* A loss's class weights: a graph tensor when computed, else a constant
 * under the initializer's name (the dynamo exporter writes a loss
 * module's weight buffer as an initializer: never a trained parameter). */
static ts_tensor *class_weights(importer *im, value *v, ts_status *st) {
    if (v->t || !v->param) return as_f32(im, v, st);
    if ((*st = decoded(im, v))) return NULL;
    int64_t n = ts_shape_numel(&v->c.shape);
    float *f = ts_malloc((size_t)(n ? n : 1) * sizeof *f);
    for (int64_t i = 0; f && i < n; i++) f[i] = (float)v->c.v[i];
    ts_tensor *t = f ? f32_constant(im, v->name, &v->c.shape, f) : NULL;
    ts_free(f);
    if (!t) *st = f ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
    return v->t = t;
}

static ts_status op_loss(importer *im, node_io *io) {
    bool ce = strcmp(im->node->op_type, "SoftmaxCrossEntropyLoss") == 0;
    static const char *const reductions[] = {"mean", "sum", "none"};
    const Attr *red = attr(im, "reduction");
    int k = red && red->has_s ? attr_choice(red, reductions, 3) : 0;
    if (k == 3)
        return node_error(im, TS_ERR_FORMAT, "reduction '%.*s' is not one of ONNX's: none, sum, mean", (int)red->s.len, (const char *)red->s.data);
    bool sum = k == 1, none = k == 2;
    bool has_w = io->n_in > 2 && io->in[2], has_ii = attr(im, "ignore_index") != NULL;
    ts_status st = TS_OK;
    ts_tensor *x = as_tensor(im, io->in[0], &st), *y = x ? as_tensor(im, io->in[1], &st) : NULL;
    /* labels the graph computed (in f32 or i64): checked before the loss reads them (an ignore_index allowed) */
    if (y && y->dtype != TS_I32 && !(y = ts_graph_indices(im->g, y))) return ts_graph_status(im->g);
    ts_tensor *w = y && has_w ? class_weights(im, io->in[2], &st) : NULL;
    if (!y || (has_w && !w)) return st;
    ts_tensor *logp = ce ? ts_log_softmax(im->g, x, 1) : x, *loss;
    /* the fused ops for [N,C] scores, unweighted, mean or sum; with an
     * ignore_index (PyTorch writes -100), CrossEntropy's mean, over the
     * labels not ignored; the graph ops otherwise */
    int64_t ii = attr_i(im, "ignore_index", 0);
    if (x->shape.ndim == 2 && !has_w && !none && !has_ii) {
        loss = ce ? ts_cross_entropy(im->g, x, y) : ts_nll_loss(im->g, x, y);
        if (loss && sum) loss = ts_scale(im->g, loss, (float)x->shape.d[0]);
    } else if (x->shape.ndim == 2 && !has_w && ce && !sum && !none && ii >= INT32_MIN && ii <= INT32_MAX) {
        loss = ts_cross_entropy_ignore(im->g, x, y, (int32_t)ii);
    } else {
        loss = logp ? nll_composed(im, logp, y, w, has_ii, ii, none ? 0 : sum ? 1 : 2, &st) : NULL;
        if (!loss) return st ? st : ts_graph_status(im->g);
    }
    st = built(im, loss, &io->out[0]);
    if (!st && ce && io->n_out > 1) st = built(im, logp, &io->out[1]);
    return st;
}

/* Folded-only ops: a thin row each over the constant kernels. */
static ts_status op_fold(importer *im, node_io *io) {
    ts_status st = need_consts(im, io);
    if (st) return st;
    const ts_const *in[MAX_NODE_IO];
    for (int i = 0; i < io->n_in; i++) in[i] = io->in[i] ? &io->in[i]->c : NULL;
    ts_const_attrs at = {0};
    at.axis = attr_i(im, "axis", 0); /* range-checked by the kernels */
    if ((st = attr_int32(im, "to", 0, 0, TS_ONNX_BFLOAT16, &at.to))) return st;
    attr_ints(im, "perm", &at.perm, &at.n_perm);
    const Attr *v = attr(im, "value");
    ts_const fillv = {0};
    if (v && v->t) {
        st = tensor_to_const(im, v->t, "the fill value", &fillv);
        if (st) return st;
        at.fill = &fillv;
    }
    st = ts_const_op(im->node->op_type, in, io->n_in, &at, &io->out[0].c);
    ts_const_free(&fillv);
    return fold_result(im, st);
}

/* The TS_LOWBITS_ flags of a Cast's opset-19 `saturate` (default 1: a
 * float8 value past the largest finite one clamps to it) and opset-24
 * `round_mode` (float8e8m0: "up", the default, "down" or "nearest"). */
static ts_status lowbits_mode(importer *im, int *mode) {
    int64_t sat = attr_i(im, "saturate", 1);
    if (sat != 0 && sat != 1) return node_error(im, TS_ERR_FORMAT, "attribute saturate is %lld; it is 0 or 1", (long long)sat);
    *mode = sat ? TS_LOWBITS_SATURATE : 0;
    static const char *const modes[] = {"up", "down", "nearest"};
    const Attr *rm = attr(im, "round_mode");
    int k = rm && rm->has_s ? attr_choice(rm, modes, 3) : 0;
    if (k == 3)
        return node_error(im, TS_ERR_FORMAT, "round_mode '%.*s' is not one of up, down, nearest", (int)rm->s.len, (const char *)rm->s.data);
    *mode |= k == 1 ? TS_LOWBITS_ROUND_DOWN : k == 2 ? TS_LOWBITS_ROUND_NEAREST : 0;
    return TS_OK;
}

/* Cast: on graph tensors, or folded; to one of the types read here. The
 * low-precision types (float8, float4, e8m0, int4, uint4, int2, uint2)
 * are held in f32: a cast rounds the values onto their grid (CastLowbits,
 * the gradient straight through) by `saturate` and `round_mode`. */
static ts_status cast_to(importer *im, node_io *io, int to) {
    ts_status st = TS_OK;
    if (!ts_onnx_dtype_size(to) || (to > TS_ONNX_BFLOAT16 && !ts_lowbits_is(to)))
        return node_error(im, TS_ERR_UNSUPPORTED, "Cast to %s (ONNX data type %d) is not available: tensorscope casts to float, double, "
                          "float16, bfloat16, bool, the integer types and ONNX's float8, float4, int4 and int2 types",
                          ts_onnx_dtype_name(to), to);
    int mode = 0;
    if (ts_lowbits_is(to) && (st = lowbits_mode(im, &mode))) return st;
    /* a graph tensor keeps its values: f32 carries float and double, i32
     * the integer ids (LayerNormalization's stash cast, index casts) */
    const ts_tensor *t = io->in[0] ? io->in[0]->t : NULL;
    if (t && ((t->dtype == TS_F32 && (to == TS_ONNX_FLOAT || to == TS_ONNX_DOUBLE)) ||
              (t->dtype == TS_I32 && (to == TS_ONNX_INT32 || to == TS_ONNX_INT64))))
        return op_identity(im, io);
    /* between kinds, the values carried in f32: integers toward zero,
     * bools as 1 where non-zero, integers and bools as floats */
    bool to_int = !ts_onnx_dtype_is_float(to) && !ts_lowbits_is(to) && to != TS_ONNX_BOOL, to_bool = to == TS_ONNX_BOOL, to_float = to == TS_ONNX_FLOAT || to == TS_ONNX_DOUBLE;
    bool to_half = to == TS_ONNX_FLOAT16 || to == TS_ONNX_BFLOAT16;
    if (t && (to_int || to_bool || to_float || to_half || ts_lowbits_is(to))) {
        ts_tensor *f = as_f32(im, io->in[0], &st);
        if (!f) return st;
        if (to_float) return built(im, f, &io->out[0]);
        if (ts_lowbits_is(to)) {
            st = built(im, ts_unary(im->g, "CastLowbits", f, (float)to, (float)mode), &io->out[0]);
            io->out[0].c.dtype = to; /* the type a CastLike reads */
            return st;
        }
        /* float16, bfloat16: rounded onto its values, held in f32, which
         * the ops after compute in (as onnxruntime's CPU provider does
         * where it has no 16-bit kernel) */
        if (to_half) return built(im, ts_cast(im->g, f, to == TS_ONNX_FLOAT16 ? TS_F16 : TS_BF16), &io->out[0]);
        st = built(im, ts_unary(im->g, to_int ? "CastInt" : "CastBool", f, 0.0f, 0.0f), &io->out[0]);
        io->out[0].c.dtype = to; /* the integer type the bitwise ops compute in */
        return st;
    }
    node_io one = *io; /* CastLike's target is read for its type only */
    one.n_in = 1;
    if ((st = need_consts(im, &one))) return st;
    ts_const_attrs at = {.to = to, .lowbits_mode = mode};
    const ts_const *in[1] = {&io->in[0]->c};
    return fold_result(im, ts_const_op("Cast", in, 1, &at, &io->out[0].c));
}

static ts_status op_cast(importer *im, node_io *io) {
    int to;
    ts_status st = attr_int32(im, "to", 0, 0, INT32_MAX, &to);
    if (st) return st;
    if (!attr(im, "to")) return node_error(im, TS_ERR_FORMAT, "attribute 'to' is required");
    return cast_to(im, io, to);
}

/* CastLike: a Cast to the type of input 1 (a graph tensor's: float16 or
 * bfloat16 for a cast's output of those, float for f32, int64 for i32). */
static ts_status op_cast_like(importer *im, node_io *io) {
    const value *like = io->in[1];
    if (!like) return node_error(im, TS_ERR_FORMAT, "input 1 (target_type) is empty");
    if (!like->t || ts_lowbits_is(like->c.dtype)) return cast_to(im, io, like->c.dtype);
    ts_dtype p = ts_tensor_precision(like->t);
    return cast_to(im, io, p == TS_F16 ? TS_ONNX_FLOAT16 : p == TS_BF16 ? TS_ONNX_BFLOAT16 : like->t->dtype == TS_F32 ? TS_ONNX_FLOAT : TS_ONNX_INT64);
}

/* Range (folded): from opset 27 on, a stash_type other than 1 (float)
 * asks a float16 or bfloat16 range to be summed in another type, which
 * folding (in double) does not do: refused for them. */
static ts_status op_range(importer *im, node_io *io) {
    int stash = 1;
    ts_status st = attr_int32(im, "stash_type", 1, INT32_MIN, INT32_MAX, &stash);
    if (st) return st;
    int dt = is_const(io->in[0]) ? io->in[0]->c.dtype : 0;
    if (stash != 1 && (dt == TS_ONNX_FLOAT16 || dt == TS_ONNX_BFLOAT16))
        return node_error(im, TS_ERR_UNSUPPORTED, "stash_type %d (a %s range summed in %s) is not available; stash_type 1 (float) is",
                          stash, ts_onnx_dtype_name(dt), ts_onnx_dtype_name(stash));
    return op_fold(im, io);
}

/* Gather: of rows of a 2-D table by integer ids an embedding (the table is
 * the parameter under its own name, so a tied weight stays one), along any
 * other axis ts_gather; GatherElements: ts_gather_elements; folded when
 * both are constants. */
static ts_status op_gather(importer *im, node_io *io) {
    value *data = io->in[0], *idx = io->in[1];
    bool elements = strcmp(im->node->op_type, "GatherElements") == 0;
    if (is_const(data) && !data->param && is_const(idx)) return op_fold(im, io);
    int axis;
    ts_status st = attr_axis(im, "axis", 0, shape_of(data)->ndim, false, &axis);
    if (st) return st;
    ts_tensor *w = as_f32(im, data, &st), *i = w ? as_tensor(im, idx, &st) : NULL;
    if (!i) return st;
    bool computed = i->dtype != TS_I32;
    /* integer values the graph computed in f32 (or i64): indices, checked
     * before the gather reads them (one outside the axis is an error naming
     * it, as ONNX says, never clamped into it) */
    if (computed && !(i = ts_graph_indices(im->g, i))) return ts_graph_status(im->g);
    if (elements) return built(im, ts_gather_elements(im->g, w, i, axis), &io->out[0]);
    if (axis == 0 && w->shape.ndim == 2 && !computed) return built(im, ts_embedding(im->g, w, i), &io->out[0]);
    return built(im, ts_gather(im->g, w, i, axis), &io->out[0]);
}

/* The product of x along `axis`, kept as 1: halves multiplied together
 * (the odd one out carried), log2(n) Muls whose gradients are theirs. */
static ts_tensor *product_along(ts_graph *g, ts_tensor *x, int axis) {
    while (x && x->shape.d[axis] > 1) {
        int64_t n = x->shape.d[axis], h = n / 2;
        ts_tensor *m = ts_mul(g, ts_slice(g, x, axis, 0, h), ts_slice(g, x, axis, h, h));
        x = n % 2 ? ts_concat(g, (ts_tensor *[]){m, ts_slice(g, x, axis, n - 1, 1)}, 2, axis) : m;
    }
    return x;
}

/* The Reduce ops over their axes: the attribute before the opset that
 * made them input 1 (ReduceSum 13, the others 18), the input from then on;
 * absent (or, from then on, an empty list) means every axis, or none with
 * noop_with_empty_axes=1: the identity. keepdims. ReduceMean, ReduceSum
 * and ReduceMax are graph ops; the others are composed of them: ReduceMin
 * -max(-x), ReduceL1 sum|x|, ReduceL2 sqrt(sum x^2), ReduceSumSquare
 * sum x^2, ReduceLogSum log(sum x), ReduceProd product_along each axis,
 * ReduceLogSumExp m + log(sum e^(x-m))
 * with m the maximum (no gradient through m: its terms cancel). */
/* A reduction of an empty constant (a bound input with a dimension of 0:
 * it holds no values, so it is known at import), folded to the op's value
 * over no elements, as numpy's and ONNX's reference: 0 for the sums and
 * norms, 1 for the product, -inf for the maximum, the log-sum and the
 * log-sum-exp, +inf for the minimum (a bool's: false and true), NaN for
 * the mean. n < 0: every axis. */
static ts_status reduce_empty(importer *im, node_io *io, const int64_t *axes, int n, bool keep) {
    const char *op = im->node->op_type;
    const ts_const *x = &io->in[0]->c;
    bool boolean = x->dtype == TS_ONNX_BOOL;
    if (!boolean && !ts_onnx_dtype_is_float(x->dtype))
        return node_error(im, TS_ERR_UNSUPPORTED, "%s of an empty %s tensor has no value in its type", op, ts_onnx_dtype_name(x->dtype));
    bool reduced[TS_MAX_DIMS] = {false};
    for (int i = 0; i < (n < 0 ? x->shape.ndim : n); i++) {
        int64_t a = n < 0 ? i : axes[i];
        if (a < -x->shape.ndim || a >= x->shape.ndim)
            return node_error(im, TS_ERR_FORMAT, "axis %lld is out of range for %d dimensions", (long long)a, x->shape.ndim);
        reduced[norm_axis(a, x->shape.ndim)] = true;
    }
    ts_shape s = {0};
    for (int d = 0; d < x->shape.ndim; d++)
        if (!reduced[d] || keep) s.d[s.ndim++] = reduced[d] ? 1 : x->shape.d[d];
    double v = strcmp(op, "ReduceProd") == 0 ? 1.0
               : strcmp(op, "ReduceMax") == 0 ? (boolean ? 0.0 : -INFINITY)
               : strcmp(op, "ReduceMin") == 0 ? (boolean ? 1.0 : INFINITY)
               : strcmp(op, "ReduceLogSum") == 0 || strcmp(op, "ReduceLogSumExp") == 0 ? -INFINITY
               : strcmp(op, "ReduceMean") == 0 ? NAN : 0.0;
    return fold_result(im, ts_const_fill(&s, x->dtype, v, &io->out[0].c));
}

static ts_status op_reduce(importer *im, node_io *io) {
    const char *op = im->node->op_type;
    int input_since = strcmp(op, "ReduceSum") == 0 ? 13 : 18; /* ReduceProd's too: 18 */
    int64_t axes[TS_MAX_DIMS];
    int n = 0, keepdims, noop = 0;
    ts_status st = axes_of(im, io, 1, input_since, axes, &n);
    if (!st) st = attr_int32(im, "keepdims", 1, 0, 1, &keepdims);
    if (!st) st = attr_int32(im, "noop_with_empty_axes", 0, 0, 1, &noop);
    if (st) return st;
    bool all = n < 0 || (n == 0 && since(im, input_since));
    if (all && noop) return op_identity(im, io);
    value *in = io->in[0];
    if (is_const(in) && !in->param && ts_shape_numel(&in->c.shape) == 0) return reduce_empty(im, io, axes, all ? -1 : n, keepdims != 0);
    ts_tensor *x = as_f32(im, in, &st); /* integers and bools reduced as f32 */
    if (!x) return st;
    int ax[TS_MAX_DIMS];
    if (all) n = x->shape.ndim;
    if (n == 0) return op_identity(im, io); /* no axis to reduce (a scalar): the identity */
    for (int i = 0; i < n; i++) {
        if (!all && (axes[i] < -x->shape.ndim || axes[i] >= x->shape.ndim))
            return node_error(im, TS_ERR_FORMAT, "axis %lld is out of range for %d dimensions", (long long)axes[i], x->shape.ndim);
        ax[i] = all ? i : norm_axis(axes[i], x->shape.ndim);
    }
    ts_graph *g = im->g;
    int keep = keepdims != 0;
    ts_tensor *y;
    if (strcmp(op, "ReduceSum") == 0) y = ts_reduce_sum(g, x, n, ax, keep);
    else if (strcmp(op, "ReduceMax") == 0) y = ts_reduce_max(g, x, n, ax, keep);
    else if (strcmp(op, "ReduceMean") == 0) y = ts_reduce_mean(g, x, n, ax, keep);
    else if (strcmp(op, "ReduceMin") == 0) y = ts_scale(g, ts_reduce_max(g, ts_scale(g, x, -1.0f), n, ax, keep), -1.0f);
    else if (strcmp(op, "ReduceL1") == 0) y = ts_reduce_sum(g, ts_abs(g, x), n, ax, keep);
    else if (strcmp(op, "ReduceL2") == 0) y = ts_sqrt(g, ts_reduce_sum(g, ts_mul(g, x, x), n, ax, keep));
    else if (strcmp(op, "ReduceSumSquare") == 0) y = ts_reduce_sum(g, ts_mul(g, x, x), n, ax, keep);
    else if (strcmp(op, "ReduceLogSum") == 0) y = ts_log(g, ts_reduce_sum(g, x, n, ax, keep));
    else if (strcmp(op, "ReduceProd") == 0) {
        y = x;
        for (int i = 0; i < n && y; i++) y = product_along(g, y, ax[i]);
        if (y && !keep) {
            ts_shape s = {0};
            for (int d = 0; d < y->shape.ndim; d++) {
                bool reduced = false;
                for (int i = 0; i < n; i++) reduced = reduced || ax[i] == d;
                if (!reduced) s.d[s.ndim++] = y->shape.d[d];
            }
            y = ts_reshape(g, y, s.ndim, s.d);
        }
    }
    else { /* ReduceLogSumExp */
        ts_tensor *m = ts_stop_gradient(g, ts_reduce_max(g, x, n, ax, 1));
        ts_tensor *mo = keep ? m : ts_stop_gradient(g, ts_reduce_max(g, x, n, ax, 0));
        y = ts_add(g, ts_log(g, ts_reduce_sum(g, ts_exp(g, ts_sub(g, x, m)), n, ax, keep)), mo);
    }
    return built(im, y, &io->out[0]);
}

static ts_status op_transpose(importer *im, node_io *io) {
    if (is_const(io->in[0]) && !io->in[0]->param) return op_fold(im, io);
    ts_status st = TS_OK;
    ts_tensor *x = as_tensor(im, io->in[0], &st);
    if (!x) return st;
    int64_t p[TS_MAX_DIMS];
    int np, perm[TS_MAX_DIMS];
    if ((st = attr_int_list(im, "perm", 0, x->shape.ndim - 1, p, TS_MAX_DIMS, &np))) return st;
    if (np >= 0 && np != x->shape.ndim)
        return node_error(im, TS_ERR_SHAPE, "perm has %d entries for %d dimensions", np, x->shape.ndim);
    for (int i = 0; i < x->shape.ndim; i++) perm[i] = np < 0 ? x->shape.ndim - 1 - i : (int)p[i];
    return built(im, ts_permute(im->g, x, perm), &io->out[0]);
}

/* Split into the sizes of the constant 'split' input, or (opset 18 on)
 * into 'num_outputs' parts of ceil(dim / num_outputs), the last one
 * smaller; with neither, equal parts, one per output. */
static ts_status op_split(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = as_tensor(im, io->in[0], &st);
    if (!x) return st;
    int axis;
    if ((st = attr_axis(im, "axis", 0, x->shape.ndim, false, &axis))) return st;
    int64_t sizes[MAX_NODE_IO], dim = x->shape.d[axis], parts = 0;
    int n = io->n_out;
    bool has_split = io->n_in > 1 && io->in[1];
    if ((st = attr_int(im, "num_outputs", io->n_out, 1, MAX_NODE_IO, &parts))) return st;
    if (attr(im, "num_outputs") && has_split)
        return node_error(im, TS_ERR_FORMAT, "gives both the 'split' input and the 'num_outputs' attribute; ONNX allows one of them");
    if (parts != io->n_out) return node_error(im, TS_ERR_FORMAT, "num_outputs is %lld for %d outputs", (long long)parts, io->n_out);
    if (has_split) {
        if ((st = decoded(im, io->in[1]))) return st;
        if (!is_const(io->in[1]) || ts_shape_numel(&io->in[1]->c.shape) != io->n_out)
            return node_error(im, TS_ERR_UNSUPPORTED, "its split sizes ('%s') must be a constant list of one size per output%s",
                              io->in[1]->name, bind_hint(io->in[1]));
        for (int i = 0; i < n; i++)
            if (!ts_onnx_int_value(io->in[1]->c.v[i], 0, dim, &sizes[i]))
                return node_error(im, TS_ERR_FORMAT, "split size %d is %g; the axis has %lld", i, io->in[1]->c.v[i], (long long)dim);
    } else if (attr(im, "num_outputs")) { /* ceil-sized parts, the rest in the last */
        int64_t part = (dim + parts - 1) / parts;
        if (part * (parts - 1) > dim)
            return node_error(im, TS_ERR_SHAPE, "an axis of %lld does not split into %lld parts of %lld (the last one smaller)",
                              (long long)dim, (long long)parts, (long long)part);
        for (int i = 0; i < n; i++) sizes[i] = i < n - 1 ? part : dim - part * (parts - 1);
    } else {
        if (dim % n)
            return node_error(im, TS_ERR_SHAPE, "an axis of %lld does not split into %d equal parts; give the sizes (input 1)%s",
                              (long long)dim, n, since(im, 18) ? " or num_outputs" : "");
        for (int i = 0; i < n; i++) sizes[i] = dim / n;
    }
    int64_t start = 0;
    for (int i = 0; i < n && !st; i++) {
        if (sizes[i] == 0) { /* an empty part: a constant of no values, which a Concat skips */
            ts_shape es = x->shape;
            es.d[axis] = 0;
            st = fold_result(im, ts_const_fill(&es, TS_ONNX_FLOAT, 0.0, &io->out[i].c));
            continue;
        }
        st = built(im, ts_slice(im->g, x, axis, start, sizes[i]), &io->out[i]);
        start += sizes[i];
    }
    if (!st && start != x->shape.d[axis])
        return node_error(im, TS_ERR_SHAPE, "split sizes add up to %lld, the axis has %lld", (long long)start, (long long)x->shape.d[axis]);
    return st;
}

/* The `count` positions start, start + step, ... of axis `ax` of x (a step
 * other than 1: negative walks backward): a Gather by constant indices,
 * whose gradient adds back into the positions taken. */
static ts_tensor *strided(importer *im, ts_tensor *x, int ax, int64_t start, int64_t count, int64_t step, ts_status *st) {
    if ((*st = ts_const_charge((uint64_t)count * 4))) {
        *st = fold_result(im, *st);
        return NULL;
    }
    int32_t *idx = ts_malloc((size_t)count * sizeof *idx);
    char *name = idx ? ts_graph_op_output_name(im->g, "SliceSteps") : NULL;
    for (int64_t i = 0; name && i < count; i++) idx[i] = (int32_t)(start + i * step);
    ts_array a = ts_array_i32(idx, 1, (int64_t[]){count});
    ts_tensor *c = name ? ts_constant(im->g, name, &a) : NULL, *t = c ? ts_gather(im->g, x, c, ax) : NULL;
    ts_free(name);
    ts_free(idx);
    if (!t) *st = ts_graph_status(im->g) ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
    return t;
}

/* Slice of a graph tensor: ts_slice per axis for step 1, a Gather of the
 * positions taken for other steps; folded on constants. */
static ts_status op_slice(importer *im, node_io *io) {
    if (is_const(io->in[0]) && !io->in[0]->param) return op_fold(im, io);
    ts_status st = TS_OK;
    /* integers (an EmbeddingBag's bag of ids) sliced as f32 values, exact
     * to 2^24: a Gather reads them as indices */
    ts_tensor *x = as_f32(im, io->in[0], &st);
    if (!x) return st;
    int64_t starts[TS_MAX_DIMS], ends[TS_MAX_DIMS], axes[TS_MAX_DIMS], steps[TS_MAX_DIMS];
    int n = 0, ne = 0, na = 0, ns = 0;
    if ((st = const_ints(im, io->in[1], starts, &n, "starts", INT64_MIN, INT64_MAX, true)) ||
        (st = const_ints(im, io->in[2], ends, &ne, "ends", INT64_MIN, INT64_MAX, true)))
        return st;
    if (io->n_in > 3 && io->in[3] && (st = const_ints(im, io->in[3], axes, &na, "axes", -TS_MAX_DIMS, TS_MAX_DIMS, false))) return st;
    if (io->n_in > 4 && io->in[4] && (st = const_ints(im, io->in[4], steps, &ns, "steps", INT64_MIN, INT64_MAX, true))) return st;
    if (ne != n || (na && na != n) || (ns && ns != n)) return node_error(im, TS_ERR_SHAPE, "starts, ends, axes and steps differ in length");
    for (int k = 0; k < n; k++) {
        int64_t step = ns ? steps[k] : 1;
        if (step == 0) return node_error(im, TS_ERR_FORMAT, "a Slice step is 0 (at position %d); ONNX's steps are non-zero", k);
        int ax = norm_axis(na ? axes[k] : k, x->shape.ndim);
        if (ax < 0 || ax >= x->shape.ndim) return node_error(im, TS_ERR_SHAPE, "axis out of range for %d dimensions", x->shape.ndim);
        int64_t start, count;
        if ((st = ts_const_slice_range(x->shape.d[ax], (double)starts[k], (double)ends[k], step, &start, &count)))
            return fold_result(im, st);
        if (count == 0)
            return node_error(im, TS_ERR_SHAPE, "[%lld, %lld) step %lld of an axis of %lld is empty; tensorscope's dimensions are positive",
                              (long long)starts[k], (long long)ends[k], (long long)step, (long long)x->shape.d[ax]);
        if (step != 1) x = strided(im, x, ax, start, count, step, &st);
        else if (start != 0 || count != x->shape.d[ax]) x = ts_slice(im->g, x, ax, start, count);
        if (!x) return st ? st : ts_graph_status(im->g);
    }
    return built(im, x, &io->out[0]);
}

/* Concat: folded on constants, else ts_concat of the graph tensors. */
static ts_status op_concat(importer *im, node_io *io) {
    bool all_const = true;
    for (int i = 0; i < io->n_in; i++) all_const = all_const && io->in[i] && is_const(io->in[i]) && !io->in[i]->param;
    if (all_const) return op_fold(im, io);
    ts_tensor *xs[MAX_NODE_IO];
    ts_status st = TS_OK;
    int n = 0;
    for (int i = 0; i < io->n_in; i++) {
        if (io->in[i] && is_const(io->in[i]) && !io->in[i]->param && ts_shape_numel(&io->in[i]->c.shape) == 0) continue; /* an empty part (a Split's) adds nothing */
        if (!io->in[i] || !(xs[n++] = as_tensor(im, io->in[i], &st))) return st ? st : node_error(im, TS_ERR_FORMAT, "input %d is missing", i);
    }
    int axis;
    if ((st = attr_axis(im, "axis", 0, xs[0]->shape.ndim, false, &axis))) return st;
    bool mixed = false; /* parts of several dtypes: joined as f32 */
    for (int i = 1; i < n; i++) mixed = mixed || xs[i]->dtype != xs[0]->dtype;
    for (int i = 0; mixed && i < n; i++)
        if (!(xs[i] = f32_of(im, xs[i], &st))) return st ? st : ts_graph_status(im->g);
    return built(im, n == 1 ? xs[0] : ts_concat(im->g, xs, n, axis), &io->out[0]);
}

/* Where: folded on constants; a constant condition choosing a constant
 * scalar is a masked fill (attention's causal mask); else ts_where (an
 * f32 condition computed by the graph: Select). */
static ts_status op_where(importer *im, node_io *io) {
    value *c = io->in[0], *a = io->in[1], *b = io->in[2];
    if (is_const(c) && !c->param && is_const(a) && !a->param && is_const(b) && !b->param) return op_fold(im, io);
    double s;
    ts_status st = TS_OK;
    if (is_const(c) && !c->param && const_scalar(a, &s) && b->t) {
        ts_tensor *mask = as_tensor(im, c, &st);
        return mask ? built(im, ts_masked_fill(im->g, b->t, mask, (float)s), &io->out[0]) : st;
    }
    /* the condition as it is (i32 bools, or the 1 and 0 of a comparison);
     * the values in f32 */
    ts_tensor *tc = as_tensor(im, c, &st), *ta = tc ? as_f32(im, a, &st) : NULL, *tb = ta ? as_f32(im, b, &st) : NULL;
    if (tc && tc->dtype == TS_I64) tc = f32_of(im, tc, &st); /* non-zero stays non-zero */
    return tb ? built(im, ts_where(im->g, tc, ta, tb), &io->out[0]) : st;
}

/* Expand: folded on constants; on a graph tensor, x broadcast to the
 * shape (numpy's rules, both ways; broadcast_to); along dim 0 too (ViT's
 * class token to the example's batch), its first sample repeated to the
 * batch (repeated), which follows the batch of the graph input of that
 * size. An i32 tensor (ids, bools) is expanded in f32, as the binary ops
 * compute it. */
static ts_status op_expand(importer *im, node_io *io) {
    value *x = io->in[0];
    if (is_const(x) && !x->param) return op_fold(im, io);
    int64_t dims[TS_MAX_DIMS];
    int n;
    ts_status st = const_ints(im, io->in[1], dims, &n, "shape", 0, INT32_MAX, false);
    if (st) return st;
    ts_shape want = {.ndim = n}, out;
    for (int i = 0; i < n; i++) want.d[i] = dims[i];
    const ts_shape *xs = shape_of(x);
    char b1[128], b2[128];
    if (!ts_broadcast_shape(xs, &want, &out))
        return node_error(im, TS_ERR_SHAPE, "input '%s' of shape %s does not broadcast to the shape %s (numpy's rules: aligned on the right, "
                          "each pair of dims equal or one of them 1)", x->name, ts_shape_str(xs, b1, sizeof b1), ts_shape_str(&want, b2, sizeof b2));
    /* a parameter expanded to its own shape is itself (op_identity would
     * make it a parameter of its own: the TorchScript exporter's marker) */
    if (ts_shape_equal(xs, &out) && !x->param) return op_identity(im, io);
    if (ts_shape_equal(xs, &out)) {
        ts_tensor *t = as_tensor(im, x, &st);
        if (t) io->out[0] = (value){.t = t};
        return st;
    }
    ts_shape one = out;
    one.d[0] = 1;
    bool along0 = out.d[0] > 1 && (xs->ndim < out.ndim || xs->d[0] == 1);
    ts_tensor *t = as_f32(im, x, &st);
    if (t && along0 && !ts_shape_equal(&t->shape, &one)) t = broadcast_to(im, t, &one, &st);
    if (t) t = along0 ? repeated(im, t, &out, &st) : broadcast_to(im, t, &out, &st);
    return t ? built(im, t, &io->out[0]) : st;
}

/* LayerNormalization (opset 17): over the dims from `axis` on, computed in
 * float (stash_type 1, the only one available); without its optional bias
 * B, a bias of zeros. */
static ts_status op_layer_norm(importer *im, node_io *io) {
    int stash;
    ts_status st = attr_int32(im, "stash_type", 1, INT32_MIN, INT32_MAX, &stash);
    if (st) return st;
    if (stash != 1)
        return node_error(im, TS_ERR_UNSUPPORTED, "stash_type %d (statistics computed in %s) is not available; stash_type 1 (float) is", stash,
                          ts_onnx_dtype_name(stash));
    ts_tensor *x = as_tensor(im, io->in[0], &st), *w = x ? as_tensor(im, io->in[1], &st) : NULL, *b = NULL;
    if (!w) return st;
    if (io->n_in > 2 && io->in[2] && !(b = as_tensor(im, io->in[2], &st))) return st;
    if (!b) { /* B is optional (a layer norm without bias): zeros of the scale's shape */
        int64_t n = ts_shape_numel(&w->shape);
        if ((st = ts_const_charge((uint64_t)(n ? n : 1) * 4))) return fold_result(im, st);
        float *zeros = ts_calloc((size_t)(n ? n : 1), sizeof *zeros);
        char *name = zeros ? ts_graph_op_output_name(im->g, "ZeroBias") : NULL;
        ts_array za = ts_array_f32(zeros, w->shape.ndim, w->shape.d);
        b = name ? ts_constant(im->g, name, &za) : NULL;
        ts_free(name);
        ts_free(zeros);
        if (!b) return ts_graph_status(im->g) ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
    }
    int axis;
    if ((st = attr_axis(im, "axis", -1, x->shape.ndim, false, &axis))) return st;
    float eps = (float)attr_f(im, "epsilon", 1e-5);
    st = built(im, ts_layer_norm(im->g, x, w, b, x->shape.ndim - axis, eps), &io->out[0]);
    /* the optional Mean and InvStdDev outputs ([d0..d(axis-1), 1, ...]),
     * when read: from graph ops, 1 / sqrt(mean((x - mean)^2) + eps) */
    bool stats = false;
    for (int i = 1; i < io->n_out; i++) stats = stats || (im->node->output[i] && *im->node->output[i]);
    if (st || !stats) return st;
    int axes[TS_MAX_DIMS], n = 0;
    for (int d = axis; d < x->shape.ndim; d++) axes[n++] = d;
    ts_tensor *mean = ts_reduce_mean(im->g, x, n, axes, 1), *dev = mean ? ts_sub(im->g, x, mean) : NULL;
    ts_tensor *var = dev ? ts_reduce_mean(im->g, ts_mul(im->g, dev, dev), n, axes, 1) : NULL;
    ts_shape scalar = {0};
    ts_tensor *inv = var ? ts_pow(im->g, ts_add(im->g, var, f32_constant(im, "epsilon", &scalar, &eps)), -0.5f) : NULL;
    if (!(st = built(im, mean, &io->out[1])) && io->n_out > 2) st = built(im, inv, &io->out[2]);
    return st;
}

/* An f32 graph constant [n] named `<scope>/<what>:<k>`: value i is
 * src's value i / every (a constant's values spread, each `every` times),
 * or v where src is NULL. */
static ts_tensor *spread_constant(importer *im, const char *what, int64_t n, const value *src, int64_t every, float v) {
    ts_status st = ts_const_charge((uint64_t)n * 4);
    if (st) {
        fold_result(im, st);
        return NULL;
    }
    float *f = ts_malloc((size_t)n * sizeof *f);
    char *name = f ? ts_graph_op_output_name(im->g, what) : NULL;
    for (int64_t i = 0; name && i < n; i++) f[i] = src ? (float)src->c.v[i / every] : v;
    ts_tensor *t = name ? f32_constant(im, name, &(ts_shape){.ndim = 1, .d = {n}}, f) : NULL;
    ts_free(name);
    ts_free(f);
    return t;
}

/* An f32 graph constant of n copies of v, named `<scope>/<what>:<k>`. */
static ts_tensor *filled_constant(importer *im, const char *what, int64_t n, float v) { return spread_constant(im, what, n, NULL, 1, v); }

/* Whether v is a constant (not a parameter) whose every value is x. */
static bool const_filled(const value *v, double x) {
    if (!is_const(v) || v->param || !v->c.v) return false;
    for (int64_t i = 0, n = ts_shape_numel(&v->c.shape); i < n; i++)
        if (v->c.v[i] != x) return false;
    return true;
}

/* x [N,C,d1..] normalised over each sample's G groups of channels, then *
 * scale + B: per channel ([C]: one GroupNorm op), or per group ([G],
 * GroupNormalization before opset 21: a constant scale and B are spread
 * over each group's channels into that op; else the layer norm of x as
 * [N,G,L] over L, then the affine per group, where a constant unit scale
 * and zero B add no op). */
static ts_status group_norm(importer *im, node_io *io, int64_t G, bool per_group) {
    ts_status st = TS_OK;
    ts_tensor *x = as_tensor(im, io->in[0], &st);
    if (!x) return st;
    const ts_shape *xs = &x->shape, *ss = shape_of(io->in[1]), *bs = shape_of(io->in[2]);
    char a[96], c[96], d[96];
    int64_t n_affine = per_group ? G : xs->ndim >= 3 ? xs->d[1] : 0;
    if (xs->ndim < 3 || ss->ndim != 1 || bs->ndim != 1 || ss->d[0] != n_affine || bs->d[0] != n_affine)
        return node_error(im, TS_ERR_SHAPE, "normalises x [N,C,d1,...] with scale and B of [%s]; got %s, %s and %s", per_group ? "num_groups" : "C",
                          ts_shape_str(xs, a, sizeof a), ts_shape_str(ss, c, sizeof c), ts_shape_str(bs, d, sizeof d));
    if (G < 1 || xs->d[1] % G)
        return node_error(im, TS_ERR_SHAPE, "num_groups %lld must divide the %lld channels of %s", (long long)G, (long long)xs->d[1],
                          ts_shape_str(xs, a, sizeof a));
    bool scaled = !const_filled(io->in[1], 1.0), shifted = !const_filled(io->in[2], 0.0);
    bool spread = per_group && (!scaled || (is_const(io->in[1]) && !io->in[1]->param)) &&
                  (!shifted || (is_const(io->in[2]) && !io->in[2]->param)); /* constants over each group's channels */
    ts_tensor *s = scaled && !spread ? as_f32(im, io->in[1], &st) : NULL, *b = shifted && !spread && !st ? as_f32(im, io->in[2], &st) : NULL;
    if (st) return st;
    float eps = (float)attr_f(im, "epsilon", 1e-5);
    int64_t C = xs->d[1], Cg = C / G;
    if (!per_group || spread) {
        if (spread || !s) s = spread_constant(im, "ScalePerChannel", C, scaled ? io->in[1] : NULL, Cg, 1.0f);
        if (s && (spread || !b)) b = spread_constant(im, "BiasPerChannel", C, shifted ? io->in[2] : NULL, Cg, 0.0f);
        if (!b) return ts_graph_status(im->g) ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
        return built(im, ts_group_norm(im->g, x, s, b, (int)G, eps), &io->out[0]);
    }
    int64_t L = ts_shape_numel(xs) / (xs->d[0] * G);
    ts_tensor *ones = filled_constant(im, "Ones", L, 1.0f), *zeros = ones ? filled_constant(im, "Zeros", L, 0.0f) : NULL;
    if (!zeros) return ts_graph_status(im->g) ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
    ts_tensor *y = ts_reshape(im->g, x, 3, (int64_t[]){xs->d[0], G, L});
    y = ts_layer_norm(im->g, y, ones, zeros, 1, eps);
    const ts_shape cs = {.ndim = 2, .d = {n_affine, 1}}; /* [G,1] against [N,G,L] */
    if (scaled) y = ts_mul(im->g, y, ts_reshape(im->g, s, cs.ndim, cs.d));
    if (shifted) y = ts_add(im->g, y, ts_reshape(im->g, b, cs.ndim, cs.d));
    y = ts_reshape(im->g, y, xs->ndim, xs->d);
    return built(im, y, &io->out[0]);
}

/* InstanceNormalization: a group norm with a group per channel. nn.GroupNorm's
 * TorchScript export (a Reshape to [N,G,-1] around one, then Mul and Add by
 * the module's weight and bias) is then a group norm. */
static ts_status op_instance_norm(importer *im, node_io *io) {
    const ts_shape *xs = shape_of(io->in[0]);
    return group_norm(im, io, xs->ndim >= 2 ? xs->d[1] : 1, false);
}

/* GroupNormalization: scale and bias per group before opset 21 (which
 * deprecated that form), per channel from it; statistics in float. */
static ts_status op_group_norm(importer *im, node_io *io) {
    int64_t G;
    int stash;
    ts_status st = attr_int(im, "num_groups", 0, 1, INT32_MAX, &G);
    if (!st) st = attr_int32(im, "stash_type", 1, INT32_MIN, INT32_MAX, &stash);
    if (st) return st;
    if (!attr(im, "num_groups")) return node_error(im, TS_ERR_FORMAT, "its attribute 'num_groups' is missing");
    if (stash != 1)
        return node_error(im, TS_ERR_UNSUPPORTED, "stash_type %d (statistics computed in %s) is not available; stash_type 1 (float) is", stash,
                          ts_onnx_dtype_name(stash));
    return group_norm(im, io, G, !since(im, 21));
}

/* LSTM, GRU and RNN, unrolled over the sequence (onnx_rnn.c): initializers
 * as parameters under their names, other constants as their values; an
 * initial state (inputs 5 and 6) given as an initializer is a constant
 * state, not a parameter (exporters write zeros of the example's batch). */
static ts_status op_rnn(importer *im, node_io *io) {
    ts_onnx_rnn_node rn = {.node = im->node};
    ts_status st = TS_OK;
    if (io->n_in > TS_ONNX_RNN_INPUTS)
        return node_error(im, TS_ERR_FORMAT, "has %d inputs; %s takes at most %d", io->n_in, im->node->op_type, TS_ONNX_RNN_INPUTS);
    for (int i = 0; i < io->n_in; i++) {
        value *v = io->in[i];
        if (v && (i == 5 || i == 6) && v->param && !v->t && (st = decoded(im, v))) return st;
        if (v && is_const(v) && (!v->param || i == 5 || i == 6)) rn.c[i] = &v->c;
        else if (v && !(rn.t[i] = as_tensor(im, v, &st))) return st;
    }
    ts_tensor *out[3];
    if ((st = ts_onnx_rnn(im->g, &rn, out))) return st;
    for (int i = 0; i < io->n_out && i < 3 && !st; i++)
        if (out[i]) st = built(im, out[i], &io->out[i]);
    return st;
}

/* ------------------------------------------------- ops composed at import
 * The ONNX ops below are built from graph ops that have their gradients,
 * devices and names already: each tensor they make is named in the node's
 * scope, its constants `<scope>/<what>:<k>`, the result after the op type
 * (import_node). */

/* An f32 scalar graph constant holding v, named `<scope>/<what>:<k>`. */
static ts_tensor *scalar_constant(importer *im, const char *what, float v) {
    char *name = ts_graph_op_output_name(im->g, what);
    ts_tensor *t = name ? f32_constant(im, name, &(ts_shape){0}, &v) : NULL;
    ts_free(name);
    return t;
}

/* A one-element input read as a setting (Clip's bounds, Trilu's k): a
 * constant, or an initializer of one element (the dynamo exporter stores
 * its constants so), never a trained parameter. false where it is neither. */
static bool setting_scalar(importer *im, value *v, double *out, ts_status *st) {
    if (!v || v->t || ts_shape_numel(&v->c.shape) != 1) return false;
    if (v->param && (*st = decoded(im, v))) return false;
    *out = v->c.v[0];
    return true;
}

/* Activations composed of the unary and binary families: Celu alpha
 * Elu(x / alpha), Mish x tanh(softplus x), Softsign x / (1 + |x|),
 * ThresholdedRelu x where x > alpha else 0, Shrink x + bias below -lambd,
 * x - bias above lambd, else 0, Sign (x > 0) - (x < 0), NaN where x is
 * (no gradient). */
static ts_status op_composed_unary(importer *im, node_io *io) {
    const char *op = im->node->op_type;
    ts_status st = TS_OK;
    ts_tensor *x = as_f32(im, io->in[0], &st), *y;
    if (!x) return st;
    ts_graph *g = im->g;
    if (strcmp(op, "Celu") == 0) {
        float a = (float)attr_f(im, "alpha", 1.0);
        if (!(a != 0.0f) || !isfinite(a)) return node_error(im, TS_ERR_FORMAT, "attribute 'alpha' is %g; Celu needs a finite non-zero alpha", a);
        y = ts_scale(g, ts_unary(g, "Elu", ts_scale(g, x, 1.0f / a), 1.0f, 0.0f), a);
    } else if (strcmp(op, "Mish") == 0) {
        y = ts_mul(g, x, ts_tanh(g, ts_unary(g, "Softplus", x, 0.0f, 0.0f)));
    } else if (strcmp(op, "Softsign") == 0) {
        y = ts_div(g, x, ts_add(g, ts_abs(g, x), scalar_constant(im, "One", 1.0f)));
    } else if (strcmp(op, "ThresholdedRelu") == 0) {
        ts_tensor *alpha = scalar_constant(im, "Alpha", (float)attr_f(im, "alpha", 1.0));
        y = ts_where(g, ts_binary(g, "Greater", x, alpha), x, scalar_constant(im, "Zero", 0.0f));
    } else if (strcmp(op, "Shrink") == 0) {
        float lambd = (float)attr_f(im, "lambd", 0.5), bias = (float)attr_f(im, "bias", 0.0);
        ts_tensor *b = scalar_constant(im, "Bias", bias);
        ts_tensor *above = ts_where(g, ts_binary(g, "Greater", x, scalar_constant(im, "Lambd", lambd)), ts_sub(g, x, b),
                                    scalar_constant(im, "Zero", 0.0f));
        y = ts_where(g, ts_binary(g, "Less", x, scalar_constant(im, "NegLambd", -lambd)), ts_add(g, x, b), above);
    } else { /* Sign */
        ts_tensor *zero = scalar_constant(im, "Zero", 0.0f);
        y = ts_sub(g, ts_binary(g, "Greater", x, zero), ts_binary(g, "Less", x, zero));
        y = ts_where(g, ts_unary(g, "IsNaN", x, 0.0f, 0.0f), x, y); /* NaN stays NaN, as torch.sign's */
    }
    return built(im, y, &io->out[0]);
}

/* Clip: x within [min, max] (min first, so min > max gives max), the
 * bounds the attributes before opset 11, the optional inputs 1 and 2 from
 * then on (a graph tensor bound broadcasts and takes its gradient where it
 * is the result, as torch.clamp's). x's gradient passes where it is within
 * the bounds, ends included. */
static ts_status op_clip(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *y = as_f32(im, io->in[0], &st), *b[2] = {NULL, NULL};
    if (!y) return st;
    static const char *const names[2] = {"min", "max"};
    for (int k = 0; k < 2; k++) {
        double v;
        if (!since(im, 11)) {
            if (attr(im, names[k])) b[k] = scalar_constant(im, k ? "Max" : "Min", (float)attr_f(im, names[k], 0.0));
        } else if (io->n_in > k + 1 && io->in[k + 1]) {
            b[k] = setting_scalar(im, io->in[k + 1], &v, &st) ? scalar_constant(im, k ? "Max" : "Min", (float)v)
                   : st                                         ? NULL
                                                                : as_f32(im, io->in[k + 1], &st);
            if (st) return st;
        } else continue;
        if (!b[k]) return ts_graph_status(im->g) ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
        y = ts_where(im->g, ts_binary(im->g, k ? "Greater" : "Less", y, b[k]), b[k], y);
    }
    return built(im, y, &io->out[0]);
}

/* PRelu: relu(x) - slope relu(-x), slope broadcast to x (numpy's rules);
 * an initializer slope is a parameter that trains. */
static ts_status op_prelu(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = as_f32(im, io->in[0], &st), *slope = x ? as_f32(im, io->in[1], &st) : NULL;
    if (!slope) return st;
    ts_graph *g = im->g;
    return built(im, ts_sub(g, ts_relu(g, x), ts_mul(g, ts_relu(g, ts_scale(g, x, -1.0f)), slope)), &io->out[0]);
}

/* GlobalMaxPool: the maximum over every axis after [N,C], kept as 1. */
static ts_status op_global_max_pool(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = as_f32(im, io->in[0], &st);
    if (!x) return st;
    int ax[TS_MAX_DIMS], n = 0;
    for (int d = 2; d < x->shape.ndim; d++) ax[n++] = d;
    if (n == 0) return node_error(im, TS_ERR_SHAPE, "pools an input [N,C,d1,...] of at least 3 dimensions; it has %d", x->shape.ndim);
    return built(im, ts_reduce_max(im->g, x, n, ax, 1), &io->out[0]);
}

/* LpNormalization: x / ||x||_p along `axis` (p 1 or 2; no epsilon, as
 * ONNX's), 0 where the norm is 0 (the norm + 1 there: x is all zeros). */
static ts_status op_lp_norm(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = as_f32(im, io->in[0], &st);
    int axis, p;
    if (!x || (st = attr_axis(im, "axis", -1, x->shape.ndim, false, &axis)) || (st = attr_int32(im, "p", 2, INT32_MIN, INT32_MAX, &p))) return st;
    if (p != 1 && p != 2) return node_error(im, TS_ERR_FORMAT, "attribute 'p' is %d; LpNormalization takes 1 or 2", p);
    ts_graph *g = im->g;
    ts_tensor *norm = p == 1 ? ts_reduce_sum(g, ts_abs(g, x), 1, &axis, 1) : ts_sqrt(g, ts_reduce_sum(g, ts_mul(g, x, x), 1, &axis, 1));
    norm = ts_add(g, norm, ts_binary(g, "Equal", norm, scalar_constant(im, "Zero", 0.0f)));
    return built(im, ts_div(g, x, norm), &io->out[0]);
}

/* MeanVarianceNormalization: (x - E x) / (sqrt(E x^2 - (E x)^2) + 1e-9)
 * over `axes` (default [0,2,3]), ONNX's function body. */
static ts_status op_mvn(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = as_f32(im, io->in[0], &st);
    int64_t axes[TS_MAX_DIMS];
    int n = -1, ax[TS_MAX_DIMS];
    if (!x || (st = attr_int_list(im, "axes", -TS_MAX_DIMS, TS_MAX_DIMS, axes, TS_MAX_DIMS, &n))) return st;
    if (n < 0) {
        static const int64_t def[3] = {0, 2, 3};
        n = 3;
        memcpy(axes, def, sizeof def);
    }
    for (int i = 0; i < n; i++) {
        if (axes[i] < -x->shape.ndim || axes[i] >= x->shape.ndim)
            return node_error(im, TS_ERR_FORMAT, "axis %lld is out of range for %d dimensions", (long long)axes[i], x->shape.ndim);
        ax[i] = norm_axis(axes[i], x->shape.ndim);
    }
    ts_graph *g = im->g;
    ts_tensor *mean = ts_reduce_mean(g, x, n, ax, 1);
    ts_tensor *var = ts_sub(g, ts_reduce_mean(g, ts_mul(g, x, x), n, ax, 1), ts_mul(g, mean, mean));
    return built(im, ts_div(g, ts_sub(g, x, mean), ts_add(g, ts_sqrt(g, var), scalar_constant(im, "Epsilon", 1e-9f))), &io->out[0]);
}

/* RMSNormalization (opset 23): x / sqrt(mean(x^2) + epsilon) * scale,
 * the mean over the axes from `axis` on; statistics in float. */
static ts_status op_rms_norm(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = as_f32(im, io->in[0], &st), *s = x ? as_f32(im, io->in[1], &st) : NULL;
    int axis, stash, ax[TS_MAX_DIMS], n = 0;
    if (!s || (st = attr_axis(im, "axis", -1, x->shape.ndim, false, &axis)) || (st = attr_int32(im, "stash_type", 1, INT32_MIN, INT32_MAX, &stash)))
        return st;
    if (stash != 1)
        return node_error(im, TS_ERR_UNSUPPORTED, "stash_type %d (statistics computed in %s) is not available; stash_type 1 (float) is", stash,
                          ts_onnx_dtype_name(stash));
    for (int d = axis; d < x->shape.ndim; d++) ax[n++] = d;
    ts_graph *g = im->g;
    ts_tensor *ms = ts_reduce_mean(g, ts_mul(g, x, x), n, ax, 1);
    ts_tensor *inv = ts_pow(g, ts_add(g, ms, scalar_constant(im, "Epsilon", (float)attr_f(im, "epsilon", 1e-5))), -0.5f);
    return built(im, ts_mul(g, ts_mul(g, x, inv), s), &io->out[0]);
}

/* x in f32 (an i32 one through CastFloat), and the i32 result back from
 * such an f32 one (Trilu's of integers). */
static ts_tensor *as_dtype_of(importer *im, ts_tensor *y, const ts_tensor *like) {
    return y && like->dtype == TS_I32 ? ts_unary(im->g, "CastIndex", y, (float)INT32_MIN, 2147483520.0f) : y;
}

/* Trilu: the upper (upper=1) or lower triangle of the last two axes, from
 * the diagonal k (constant input 1, default 0) on: where(mask, x, 0), the
 * mask a graph constant [M,N]. */
static ts_status op_trilu(importer *im, node_io *io) {
    ts_status st = TS_OK;
    double k = 0.0;
    int upper;
    if ((st = attr_int32(im, "upper", 1, 0, 1, &upper))) return st;
    if (io->n_in > 1 && io->in[1] && !setting_scalar(im, io->in[1], &k, &st))
        return st ? st : node_error(im, TS_ERR_UNSUPPORTED, "its k ('%s') must be a constant%s", io->in[1]->name, bind_hint(io->in[1]));
    ts_tensor *x0 = as_tensor(im, io->in[0], &st), *x = f32_of(im, x0, &st);
    if (!x) return st;
    if (x->shape.ndim < 2) return node_error(im, TS_ERR_SHAPE, "takes an input of at least 2 dimensions; it has %d", x->shape.ndim);
    int64_t M = x->shape.d[x->shape.ndim - 2], N = x->shape.d[x->shape.ndim - 1];
    if (!(fabs(k) <= 2.0 * (double)(M + N))) k = k < 0 ? -2.0 * (double)(M + N) : 2.0 * (double)(M + N); /* beyond the matrix: all or none */
    if ((st = ts_const_charge((uint64_t)(M * N) * 4))) return fold_result(im, st);
    float *mask = ts_malloc((size_t)(M * N) * sizeof *mask);
    char *name = mask ? ts_graph_op_output_name(im->g, "Mask") : NULL;
    for (int64_t i = 0; name && i < M; i++)
        for (int64_t j = 0; j < N; j++) mask[i * N + j] = upper ? (double)(j - i) >= k : (double)(j - i) <= k;
    ts_tensor *m = name ? f32_constant(im, name, &(ts_shape){.ndim = 2, .d = {M, N}}, mask) : NULL;
    ts_free(name);
    ts_free(mask);
    ts_const_release((uint64_t)(M * N) * 4);
    if (!m) return ts_graph_status(im->g) ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
    return built(im, as_dtype_of(im, ts_where(im->g, m, x, scalar_constant(im, "Zero", 0.0f)), x0), &io->out[0]);
}

/* Tile with constant repeats (input 1): along each axis, the input's
 * copies concatenated; the gradient sums them. */
static ts_status op_tile(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = as_tensor(im, io->in[0], &st);
    int64_t rep[TS_MAX_DIMS];
    int n;
    if (!x || (st = const_ints(im, io->in[1], rep, &n, "repeats", 1, INT32_MAX, false))) return st;
    if (n != x->shape.ndim) return node_error(im, TS_ERR_SHAPE, "has %d repeats for an input of %d dimensions; it needs one per dimension", n,
                                              x->shape.ndim);
    for (int d = 0; d < n && x; d++) {
        if (rep[d] == 1) continue;
        if ((double)rep[d] * (double)ts_shape_numel(&x->shape) > (double)TS_MAX_NUMEL)
            return node_error(im, TS_ERR_SHAPE, "repeats %lld along axis %d make more than 2^34 elements", (long long)rep[d], d);
        ts_tensor **xs = ts_malloc((size_t)rep[d] * sizeof *xs);
        if (!xs) return TS_ERR_OUT_OF_MEMORY;
        for (int64_t r = 0; r < rep[d]; r++) xs[r] = x;
        x = ts_concat(im->g, xs, (int)rep[d], d);
        ts_free(xs);
    }
    return built(im, x, &io->out[0]);
}

/* A graph constant `<scope>/<what>:<k>` of `shape` whose n values
 * fill(ctx, v) writes (the host copy charged while it lives). */
static ts_tensor *computed_constant(importer *im, const char *what, const ts_shape *shape, void (*fill)(const void *, float *),
                                   const void *ctx, ts_status *st) {
    int64_t n = ts_shape_numel(shape);
    uint64_t bytes = (uint64_t)(n ? n : 1) * 4;
    if ((*st = ts_const_charge(bytes))) {
        *st = fold_result(im, *st);
        return NULL;
    }
    float *v = ts_malloc((size_t)bytes);
    char *name = v ? ts_graph_op_output_name(im->g, what) : NULL;
    if (name) fill(ctx, v);
    ts_tensor *t = name ? f32_constant(im, name, shape, v) : NULL;
    ts_free(name);
    ts_free(v);
    ts_const_release(bytes);
    if (!t) *st = ts_graph_status(im->g) ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
    return t;
}

typedef struct iota_ctx {
    int64_t n;
} iota_ctx;
static void fill_iota(const void *ctx, float *v) {
    for (int64_t i = 0; i < ((const iota_ctx *)ctx)->n; i++) v[i] = (float)i;
}

/* 0, 1, ..., n-1 along `axis` of a rank-`ndim` tensor ([n,1,...,1] from
 * that axis on), broadcasting against it. */
static ts_tensor *iota_along(importer *im, int64_t n, int axis, int ndim, ts_status *st) {
    ts_shape s = {.ndim = ndim - axis, .d = {n}};
    for (int d = 1; d < s.ndim; d++) s.d[d] = 1;
    return computed_constant(im, "Positions", &s, fill_iota, &(iota_ctx){n}, st);
}

/* The position (in f32) along `axis` of x's maximum (min: minimum),
 * the first one (last: the last one), the axis kept as 1: where x equals
 * its maximum the position, elsewhere out of range, reduced by max. */
static ts_tensor *arg_extreme(importer *im, ts_tensor *x, int axis, bool min, bool last, ts_status *st) {
    ts_graph *g = im->g;
    int64_t n = x->shape.d[axis];
    ts_tensor *xs = min ? ts_scale(g, x, -1.0f) : x, *pos = xs ? iota_along(im, n, axis, x->shape.ndim, st) : NULL;
    if (!pos) return NULL;
    ts_tensor *at = ts_binary(g, "Equal", xs, ts_reduce_max(g, xs, 1, &axis, 1)), *y;
    if (last) y = ts_reduce_max(g, ts_where(g, at, pos, scalar_constant(im, "Before", -1.0f)), 1, &axis, 1);
    else y = ts_scale(g, ts_reduce_max(g, ts_where(g, at, ts_scale(g, pos, -1.0f), scalar_constant(im, "After", (float)-n)), 1, &axis, 1), -1.0f);
    if (!y && !*st) *st = ts_graph_status(im->g);
    return y;
}

/* ArgMax and ArgMin along `axis` (default 0): the first position of the
 * maximum (minimum), or the last with select_last_index; keepdims. Integer
 * results (i32 in the graph, the file's int64 where returned): no gradient. */
static ts_status op_arg_extreme(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = as_f32(im, io->in[0], &st);
    int axis, keep, last;
    if (!x || (st = attr_axis(im, "axis", 0, x->shape.ndim, false, &axis)) || (st = attr_int32(im, "keepdims", 1, 0, 1, &keep)) ||
        (st = attr_int32(im, "select_last_index", 0, 0, 1, &last)))
        return st;
    if (x->shape.ndim == 0) return node_error(im, TS_ERR_SHAPE, "takes an input of at least 1 dimension; it is a scalar");
    ts_tensor *y = arg_extreme(im, x, axis, strcmp(im->node->op_type, "ArgMin") == 0, last != 0, &st);
    if (!y) return st;
    if (!keep) {
        ts_shape s = y->shape;
        for (int d = axis; d + 1 < s.ndim; d++) s.d[d] = s.d[d + 1];
        s.ndim--;
        y = ts_reshape(im->g, y, s.ndim, s.d);
    }
    return built(im, ts_unary(im->g, "CastIndex", y, 0.0f, (float)(x->shape.d[axis] - 1)), &io->out[0]);
}

/* Hardmax: 1 at the first maximum along `axis` (default -1; before opset
 * 13, 1, over the input coerced to 2-D there: available where the dims
 * after it are 1), 0 elsewhere. Piecewise constant: no gradient. */
static ts_status op_hardmax(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = as_f32(im, io->in[0], &st);
    int axis;
    if (!x || (st = attr_axis(im, "axis", since(im, 13) ? -1 : 1, x->shape.ndim, false, &axis))) return st;
    for (int d = axis + 1; !since(im, 13) && d < x->shape.ndim; d++)
        if (x->shape.d[d] != 1)
            return node_error(im, TS_ERR_UNSUPPORTED, "before opset 13, Hardmax works over every dim from axis %d on at once (the input "
                              "coerced to 2-D), which is available only where the dims after the axis are 1 (here dim %d is %lld); "
                              "re-export with opset 13 or later", axis, d, (long long)x->shape.d[d]);
    ts_tensor *at = arg_extreme(im, x, axis, false, false, &st), *pos = at ? iota_along(im, x->shape.d[axis], axis, x->shape.ndim, &st) : NULL;
    return pos ? built(im, ts_binary(im->g, "Equal", pos, at), &io->out[0]) : st;
}

/* Swish (opset 24): x sigmoid(alpha x); SwiGLU (opset 28): Swish(A) * B,
 * A and B of one shape. */
static ts_status op_swish(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = as_f32(im, io->in[0], &st), *b = NULL;
    if (!x) return st;
    bool glu = strcmp(im->node->op_type, "SwiGLU") == 0;
    if (glu && (io->n_in < 2 || !io->in[1])) return node_error(im, TS_ERR_FORMAT, "input 1 (B) is required");
    if (glu && !(b = as_f32(im, io->in[1], &st))) return st;
    if (b && !ts_shape_equal(&x->shape, &b->shape)) {
        char sa[96], sb[96];
        return node_error(im, TS_ERR_SHAPE, "A %s and B %s must have one shape (SwiGLU does not broadcast)", ts_shape_str(&x->shape, sa, sizeof sa),
                          ts_shape_str(&b->shape, sb, sizeof sb));
    }
    float alpha = (float)attr_f(im, "alpha", 1.0);
    ts_tensor *y = ts_mul(im->g, x, ts_sigmoid(im->g, alpha == 1.0f ? x : ts_scale(im->g, x, alpha)));
    return built(im, b ? ts_mul(im->g, y, b) : y, &io->out[0]);
}

/* LRN over the channels of [N,C,...]: x / (bias + alpha / size * s)^beta,
 * s the sum of x^2 over the `size` channels around each (zeros past the
 * ends): `size` slices of the padded squares added. */
static ts_status op_lrn(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = as_f32(im, io->in[0], &st);
    int64_t size;
    if (!x || (st = attr_int(im, "size", 0, 1, 4096, &size))) return st;
    if (!attr(im, "size")) return node_error(im, TS_ERR_FORMAT, "attribute 'size' is required");
    if (x->shape.ndim < 3) return node_error(im, TS_ERR_SHAPE, "takes an input [N,C,d1,...] of at least 3 dimensions; it has %d", x->shape.ndim);
    ts_graph *g = im->g;
    int r = x->shape.ndim;
    int64_t C = x->shape.d[1], pads[2 * TS_MAX_DIMS] = {0};
    pads[1] = (size - 1) / 2, pads[r + 1] = size - 1 - (size - 1) / 2;
    ts_tensor *sq = ts_pad(g, ts_mul(g, x, x), pads, TS_PAD_CONSTANT, 0.0f), *sum = NULL;
    for (int64_t k = 0; sq && k < size; k++) {
        ts_tensor *part = ts_slice(g, sq, 1, k, C);
        sum = sum ? ts_add(g, sum, part) : part;
    }
    double alpha = attr_f(im, "alpha", 1e-4), beta = attr_f(im, "beta", 0.75), bias = attr_f(im, "bias", 1.0);
    ts_tensor *den = sum ? ts_add(g, ts_scale(g, sum, (float)(alpha / (double)size)), scalar_constant(im, "Bias", (float)bias)) : NULL;
    return built(im, den ? ts_mul(g, x, ts_pow(g, den, (float)-beta)) : NULL, &io->out[0]);
}

typedef struct cumsum_ctx {
    int64_t n;
    int exclusive, reverse;
} cumsum_ctx;
/* M[i][j] = 1 where x[i] adds into y[j]: i <= j (reverse: i >= j), i != j when exclusive */
static void fill_cumsum(const void *ctx, float *v) {
    const cumsum_ctx *c = ctx;
    for (int64_t i = 0; i < c->n; i++)
        for (int64_t j = 0; j < c->n; j++) v[i * c->n + j] = (c->reverse ? i >= j : i <= j) && !(c->exclusive && i == j);
}

/* CumSum's and CumProd's inputs: x (as f32; x0 as given), the constant
 * axis (input 1, normalised), exclusive and reverse. */
static ts_status cum_args(importer *im, node_io *io, ts_tensor **x0, ts_tensor **x, int *axis, int *exclusive, int *reverse) {
    ts_status st = TS_OK;
    *axis = 0;
    *x0 = as_tensor(im, io->in[0], &st), *x = f32_of(im, *x0, &st);
    double a = 0;
    if (!*x || (st = attr_int32(im, "exclusive", 0, 0, 1, exclusive)) || (st = attr_int32(im, "reverse", 0, 0, 1, reverse)))
        return st ? st : TS_ERR_INTERNAL;
    if (!setting_scalar(im, io->in[1], &a, &st))
        return st ? st : node_error(im, TS_ERR_UNSUPPORTED, "its axis ('%s') must be a constant%s", io->in[1]->name, bind_hint(io->in[1]));
    int nd = (*x)->shape.ndim;
    if (nd == 0 || !(a >= -nd && a < nd) || a != floor(a))
        return node_error(im, TS_ERR_FORMAT, "axis %g is out of range for %d dimensions", a, nd);
    *axis = norm_axis((int64_t)a, nd);
    return TS_OK;
}

/* CumSum along the constant axis (input 1): x, its axis moved last, times
 * the [N,N] matrix of which elements add into which (exclusive, reverse),
 * so the gradient is the matmul's. Integer graph tensors: ts_cumsum, in
 * int64. */
static ts_status op_cumsum(importer *im, node_io *io) {
    ts_tensor *x0, *x;
    int axis, exclusive, reverse;
    ts_status st = cum_args(im, io, &x0, &x, &axis, &exclusive, &reverse);
    if (st) return st;
    if (x0->dtype == TS_I32 || x0->dtype == TS_I64) /* integers (a mask's running count): exactly, in int64 */
        return built(im, ts_cumsum(im->g, x0->dtype == TS_I64 ? x0 : ts_cast(im->g, x0, TS_I64), axis, exclusive, reverse), &io->out[0]);
    int nd = x->shape.ndim, last = nd - 1;
    int64_t n = x->shape.d[axis];
    ts_tensor *m = computed_constant(im, "Sums", &(ts_shape){.ndim = 2, .d = {n, n}}, fill_cumsum, &(cumsum_ctx){n, exclusive, reverse}, &st);
    if (!m) return st;
    ts_tensor *t = axis == last ? x : ts_transpose(im->g, x, axis, last);
    if (t && nd == 1) t = ts_reshape(im->g, t, 2, (int64_t[]){1, n});
    ts_tensor *y = t ? matmul_2d(im, t, m, false, &st) : NULL;
    if (!y) return st ? st : ts_graph_status(im->g);
    if (nd == 1) y = ts_reshape(im->g, y, 1, (int64_t[]){n});
    if (axis != last) y = ts_transpose(im->g, y, axis, last);
    return built(im, as_dtype_of(im, y, x0), &io->out[0]);
}

/* DepthToSpace and SpaceToDepth on [N,C,H,W] by `blocksize`: a reshape to
 * 6 dims, a permutation, a reshape back; the modes DCR (the default: the
 * block's offsets before the channels) and CRD (after them). */
static ts_status op_depth_space(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = as_tensor(im, io->in[0], &st);
    int64_t b;
    if (!x || (st = attr_int(im, "blocksize", 0, 1, INT32_MAX, &b))) return st;
    if (!attr(im, "blocksize")) return node_error(im, TS_ERR_FORMAT, "attribute 'blocksize' is required");
    if (x->shape.ndim != 4) return node_error(im, TS_ERR_SHAPE, "takes an input [N,C,H,W]; it has %d dimensions", x->shape.ndim);
    int64_t N = x->shape.d[0], C = x->shape.d[1], H = x->shape.d[2], W = x->shape.d[3];
    bool to_space = strcmp(im->node->op_type, "DepthToSpace") == 0;
    static const char *const modes[] = {"DCR", "CRD"};
    const Attr *ma = attr(im, "mode");
    int crd = ma ? attr_choice(ma, modes, 2) : 0;
    if (crd == 2) return node_error(im, TS_ERR_FORMAT, "mode '%.*s' is not DCR or CRD", (int)ma->s.len, (const char *)ma->s.data);
    int64_t six[6], out[4];
    const int *perm;
    if (to_space) {
        if (C % (b * b)) return node_error(im, TS_ERR_SHAPE, "%lld channels are not a multiple of blocksize^2 = %lld", (long long)C, (long long)(b * b));
        static const int dcr[6] = {0, 3, 4, 1, 5, 2}, crdp[6] = {0, 1, 4, 2, 5, 3};
        int64_t c = C / (b * b);
        if (crd) memcpy(six, (int64_t[]){N, c, b, b, H, W}, sizeof six);
        else memcpy(six, (int64_t[]){N, b, b, c, H, W}, sizeof six);
        perm = crd ? crdp : dcr;
        memcpy(out, (int64_t[]){N, c, H * b, W * b}, sizeof out);
    } else {
        if (H % b || W % b)
            return node_error(im, TS_ERR_SHAPE, "H %lld and W %lld must be multiples of blocksize %lld", (long long)H, (long long)W, (long long)b);
        static const int dcr[6] = {0, 3, 5, 1, 2, 4}, crdp[6] = {0, 1, 3, 5, 2, 4};
        memcpy(six, (int64_t[]){N, C, H / b, b, W / b, b}, sizeof six);
        perm = crd ? crdp : dcr;
        memcpy(out, (int64_t[]){N, C * b * b, H / b, W / b}, sizeof out);
    }
    return built(im, ts_reshape(im->g, ts_permute(im->g, ts_reshape(im->g, x, 6, six), perm), 4, out), &io->out[0]);
}

/* OneHot: along `axis` (default -1, a new axis), 1 (values[1]) where
 * the position equals the index (a negative one counted from depth, a
 * constant), values[0] elsewhere: Where(Equal(indices, positions), on,
 * off), so a graph-tensor `values` takes its gradient. */
static ts_status op_one_hot(importer *im, node_io *io) {
    ts_status st = TS_OK;
    double depth = 0;
    if (!setting_scalar(im, io->in[1], &depth, &st))
        return st ? st : node_error(im, TS_ERR_UNSUPPORTED, "its depth ('%s') must be a constant%s", io->in[1]->name, bind_hint(io->in[1]));
    if (!(depth >= 1 && depth <= (double)INT32_MAX))
        return node_error(im, TS_ERR_FORMAT, "its depth is %g; OneHot takes a positive depth", depth);
    int64_t n = (int64_t)depth;
    ts_tensor *idx = as_f32(im, io->in[0], &st), *v0 = idx ? as_tensor(im, io->in[2], &st) : NULL, *v = f32_of(im, v0, &st);
    if (!v) return st;
    if (ts_shape_numel(&v->shape) != 2) return node_error(im, TS_ERR_SHAPE, "its values hold %lld elements; OneHot takes two, [off, on]",
                                                         (long long)ts_shape_numel(&v->shape));
    int r = idx->shape.ndim, axis;
    if (r + 1 > TS_MAX_DIMS) return node_error(im, TS_ERR_SHAPE, "its output would have more than %d dimensions", TS_MAX_DIMS);
    if ((st = attr_axis(im, "axis", -1, r + 1, false, &axis))) return st;
    ts_graph *g = im->g;
    ts_tensor *zero = scalar_constant(im, "Zero", 0.0f), *wrap = scalar_constant(im, "Depth", (float)n);
    if (!zero || !wrap) return ts_graph_status(g);
    idx = ts_add(g, idx, ts_mul(g, ts_binary(g, "Less", idx, zero), wrap));
    ts_shape s = {.ndim = r + 1};
    for (int d = 0, k = 0; d <= r; d++) s.d[d] = d == axis ? 1 : idx->shape.d[k++];
    ts_tensor *pos = iota_along(im, n, axis, r + 1, &st);
    if (!pos) return st;
    v = ts_reshape(g, v, 1, (int64_t[]){2});
    ts_tensor *y = ts_where(g, ts_binary(g, "Equal", ts_reshape(g, idx, s.ndim, s.d), pos), ts_slice(g, v, 0, 1, 1), ts_slice(g, v, 0, 0, 1));
    return built(im, as_dtype_of(im, y, v0), &io->out[0]);
}

/* EyeLike: a constant of the input's (static) 2-D shape, ones on the
 * diagonal k, in `dtype` (default the input's type). */
static ts_status op_eye_like(importer *im, node_io *io) {
    const ts_shape *s = shape_of(io->in[0]);
    int64_t k;
    int dt;
    ts_status st = attr_int(im, "k", 0, INT64_MIN / 2, INT64_MAX / 2, &k);
    if (st) return st;
    if (s->ndim != 2) return node_error(im, TS_ERR_SHAPE, "takes a 2-D input; it has %d dimensions", s->ndim);
    int like = io->in[0]->t ? (io->in[0]->t->dtype == TS_F32 ? TS_ONNX_FLOAT : TS_ONNX_INT64) : io->in[0]->c.dtype;
    if ((st = attr_int32(im, "dtype", like, 0, INT32_MAX, &dt))) return st;
    if (!ts_onnx_dtype_size(dt)) return node_error(im, TS_ERR_UNSUPPORTED, "dtype %d (%s) is not one tensorscope reads", dt, ts_onnx_dtype_name(dt));
    ts_const *c = &io->out[0].c;
    if ((st = ts_const_fill(s, dt, 0.0, c))) return fold_result(im, st);
    for (int64_t i = 0; i < s->d[0]; i++)
        if (i + k >= 0 && i + k < s->d[1]) c->v[i * s->d[1] + i + k] = 1.0;
    return TS_OK;
}

typedef struct offsets_ctx {
    int64_t q, kv, shift;
} offsets_ctx;
/* [q, kv]: i - j + shift, query i's offset past key j */
static void fill_offsets(const void *ctx, float *v) {
    const offsets_ctx *c = ctx;
    for (int64_t i = 0; i < c->q; i++)
        for (int64_t j = 0; j < c->kv; j++) v[i * c->kv + j] = (float)(i - j + c->shift);
}

typedef struct value_ctx {
    int64_t n;
    float v;
} value_ctx;
static void fill_value(const void *ctx, float *v) {
    for (int64_t i = 0; i < ((const value_ctx *)ctx)->n; i++) v[i] = ((const value_ctx *)ctx)->v;
}

/* Attention's masked-out bias: -1e30 where the mask takes a key away
 * (ONNX's -inf, finite so that a row with every key masked has a finite
 * softmax, set to 0 after as ONNX's), 0 elsewhere. */
#define ATTENTION_MASKED -1e30f

/* x [B,S,H*D] as [B,H,S,D] (Attention's 3-D inputs). */
static ts_tensor *heads_of(importer *im, ts_tensor *x, int64_t heads, ts_status *st) {
    const int64_t *d = x->shape.d;
    if (heads < 1 || d[2] % heads) {
        *st = node_error(im, TS_ERR_SHAPE, "a hidden size of %lld does not split into %lld heads", (long long)d[2], (long long)heads);
        return NULL;
    }
    static const int perm[4] = {0, 2, 1, 3};
    return ts_permute(im->g, ts_reshape(im->g, x, 4, (int64_t[]){d[0], d[1], heads, d[2] / heads}), perm);
}

/* Attention (opset 23 on) composed of graph ops, as ONNX's reference
 * computes it: Q, K and V of 4 dims [B,H,S,D] or 3 ([B,S,H*D], with
 * q_num_heads and kv_num_heads); past_key and past_value concatenated
 * before K and V (present_key, present_value); grouped-query heads
 * repeated; softmax(softcap(scale QK^T) + bias) V, the bias the sum of the
 * attention mask (bool or additive, padded to the keys), the causal mask
 * (is_causal, bottom-right aligned after a past or at nonpad_kv_seqlen),
 * the sliding window (left_window_size, right_window_size) and the keys
 * past nonpad_kv_seqlen; a row with every key masked gives 0;
 * qk_matmul_output in each qk_matmul_output_mode. The softmax is in f32
 * whatever softmax_precision asks. */
static ts_status op_attention(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_graph *g = im->g;
    ts_tensor *q = as_f32(im, io->in[0], &st), *k = q ? as_f32(im, io->in[1], &st) : NULL, *v = k ? as_f32(im, io->in[2], &st) : NULL;
    if (!v) return st;
    int rank = q->shape.ndim, causal, mode;
    int64_t hq, hkv, left, right;
    if ((st = attr_int32(im, "is_causal", 0, 0, 1, &causal)) || (st = attr_int32(im, "qk_matmul_output_mode", 0, 0, 3, &mode)) ||
        (st = attr_int(im, "q_num_heads", 0, 0, INT32_MAX, &hq)) || (st = attr_int(im, "kv_num_heads", 0, 0, INT32_MAX, &hkv)) ||
        (st = attr_int(im, "left_window_size", -1, -1, INT32_MAX, &left)) || (st = attr_int(im, "right_window_size", -1, -1, INT32_MAX, &right)))
        return st;
    double softcap = attr_f(im, "softcap", 0.0);
    if ((rank != 3 && rank != 4) || k->shape.ndim != rank || v->shape.ndim != rank)
        return node_error(im, TS_ERR_SHAPE, "takes Q, K and V of 3 or 4 dimensions alike; they have %d, %d and %d", rank, k->shape.ndim, v->shape.ndim);
    if (rank == 3) {
        if (!hq || !hkv) return node_error(im, TS_ERR_FORMAT, "3-D inputs need the attributes q_num_heads and kv_num_heads");
        if (!(q = heads_of(im, q, hq, &st)) || !(k = heads_of(im, k, hkv, &st)) || !(v = heads_of(im, v, hkv, &st))) return st;
    }
    for (int i = 4; i < 6; i++) { /* past_key, past_value: before K and V along the sequence */
        if (io->n_in <= i || !io->in[i]) continue;
        ts_tensor *past = as_f32(im, io->in[i], &st);
        if (!past) return st;
        ts_tensor *pair[2] = {past, i == 4 ? k : v};
        if (i == 4) k = ts_concat(g, pair, 2, 2);
        else v = ts_concat(g, pair, 2, 2);
        if (!k || !v) return ts_graph_status(g);
    }
    if ((io->n_in > 4 && io->in[4]) != (io->n_in > 5 && io->in[5])) return node_error(im, TS_ERR_FORMAT, "past_key and past_value come together");
    ts_tensor *present_k = k, *present_v = v;
    int64_t B = q->shape.d[0], H = q->shape.d[1], Sq = q->shape.d[2], D = q->shape.d[3], Hk = k->shape.d[1], Skv = k->shape.d[2];
    int64_t past = io->n_in > 4 && io->in[4] ? shape_of(io->in[4])->d[2] : 0;
    if (H != Hk) { /* grouped-query: each of K's and V's heads repeated for its group of Q's */
        if (H % Hk || v->shape.d[1] != Hk)
            return node_error(im, TS_ERR_SHAPE, "%lld query heads do not group over %lld key heads", (long long)H, (long long)Hk);
        int64_t reps = H / Hk;
        ts_tensor **xs = ts_malloc((size_t)reps * sizeof *xs);
        if (!xs) return TS_ERR_OUT_OF_MEMORY;
        for (int t = 0; t < 2; t++) {
            ts_tensor *x = t ? v : k;
            const int64_t *d = x->shape.d;
            ts_tensor *one = ts_reshape(g, x, 5, (int64_t[]){d[0], d[1], 1, d[2], d[3]});
            for (int64_t r = 0; r < reps; r++) xs[r] = one;
            x = ts_reshape(g, ts_concat(g, xs, (int)reps, 2), 4, (int64_t[]){d[0], H, d[2], d[3]});
            if (t) v = x;
            else k = x;
        }
        ts_free(xs);
        if (!k || !v) return ts_graph_status(g);
    }
    const Attr *sa = attr(im, "scale");
    double scale = sa && sa->has_f ? sa->f : 1.0 / sqrt((double)D);
    ts_tensor *qk = ts_scale(g, ts_matmul_batched(g, q, k, 0, 1), (float)scale);
    if (softcap > 0) qk = ts_scale(g, ts_tanh(g, ts_scale(g, qk, (float)(1.0 / softcap))), (float)softcap);
    if (!qk) return ts_graph_status(g);
    /* the bias: mask + causal + window + padding, each 0 or masked */
    ts_tensor *bias = NULL, *zero = scalar_constant(im, "Zero", 0.0f), *masked = scalar_constant(im, "Masked", ATTENTION_MASKED);
    if (!zero || !masked) return ts_graph_status(g);
    if (io->n_in > 3 && io->in[3]) {
        ts_tensor *m = as_tensor(im, io->in[3], &st);
        if (!m) return st;
        bool boolean = m->dtype == TS_I32;
        if (boolean) m = ts_where(g, m, zero, masked);
        else m = ts_binary(g, "Max", m, masked); /* -inf as the finite mask */
        int64_t have = m ? m->shape.d[m->shape.ndim - 1] : 0;
        if (m && have < Skv) { /* keys past the mask's: masked */
            ts_shape ps = m->shape;
            ps.d[ps.ndim - 1] = Skv - have;
            ts_tensor *pad = computed_constant(im, "MaskPad", &ps, fill_value, &(value_ctx){ts_shape_numel(&ps), ATTENTION_MASKED}, &st);
            if (!pad) return st;
            m = ts_concat(g, (ts_tensor *[]){m, pad}, 2, ps.ndim - 1);
        }
        bias = m;
    }
    ts_tensor *seqlen = NULL; /* nonpad_kv_seqlen [B] as [B,1,1,1] */
    if (io->n_in > 6 && io->in[6]) {
        if (past) return node_error(im, TS_ERR_FORMAT, "nonpad_kv_seqlen cannot come with past_key and past_value");
        seqlen = as_f32(im, io->in[6], &st);
        if (!seqlen) return st;
        seqlen = ts_reshape(g, seqlen, 4, (int64_t[]){B, 1, 1, 1});
    }
    if (causal || left >= 0 || right >= 0) { /* diff = i + offset - j: causal diff >= 0, the window -right <= diff <= left */
        ts_tensor *diff = computed_constant(im, "Offsets", &(ts_shape){.ndim = 2, .d = {Sq, Skv}}, fill_offsets,
                                            &(offsets_ctx){Sq, Skv, seqlen ? -Sq : past}, &st);
        if (!diff) return st;
        if (seqlen) diff = ts_add(g, ts_reshape(g, diff, 4, (int64_t[]){1, 1, Sq, Skv}), seqlen);
        ts_tensor *allowed = NULL, *cond[3] = {NULL, NULL, NULL};
        if (causal) cond[0] = ts_binary(g, "GreaterOrEqual", diff, zero);
        if (left >= 0) cond[1] = ts_binary(g, "LessOrEqual", diff, scalar_constant(im, "Left", (float)left));
        if (right >= 0) cond[2] = ts_binary(g, "GreaterOrEqual", diff, scalar_constant(im, "Right", (float)-right));
        for (int c = 0; c < 3; c++)
            if (cond[c]) allowed = allowed ? ts_mul(g, allowed, cond[c]) : cond[c];
        ts_tensor *b = ts_where(g, allowed, zero, masked);
        bias = bias ? ts_add(g, bias, b) : b;
    }
    if (seqlen) { /* the keys at or past each sample's length */
        ts_tensor *pos = iota_along(im, Skv, 3, 4, &st);
        if (!pos) return st;
        ts_tensor *b = ts_where(g, ts_binary(g, "Less", pos, seqlen), zero, masked);
        bias = bias ? ts_add(g, bias, b) : b;
    }
    if (bias) bias = ts_binary(g, "Max", bias, masked); /* a sum of masks stays one */
    ts_tensor *logits = bias ? ts_add(g, qk, bias) : qk, *p = ts_softmax(g, logits, 3);
    if (bias && p) { /* a row whose every key is masked: 0 */
        int last = bias->shape.ndim - 1;
        ts_tensor *all = ts_binary(g, "LessOrEqual", ts_reduce_max(g, bias, 1, &last, 1), masked);
        p = ts_where(g, all, zero, p);
    }
    ts_tensor *y = p ? ts_matmul_batched(g, p, v, 0, 0) : NULL;
    if (y && rank == 3) {
        static const int perm[4] = {0, 2, 1, 3};
        y = ts_reshape(g, ts_permute(g, y, perm), 3, (int64_t[]){B, Sq, H * v->shape.d[3]});
    }
    if ((st = built(im, y, &io->out[0]))) return st;
    if (io->n_out > 1 && im->node->output[1] && *im->node->output[1] && (st = built(im, present_k, &io->out[1]))) return st;
    if (io->n_out > 2 && im->node->output[2] && *im->node->output[2] && (st = built(im, present_v, &io->out[2]))) return st;
    if (io->n_out > 3 && im->node->output[3] && *im->node->output[3]) {
        ts_tensor *o = mode == 3 ? p : mode == 2 && bias ? logits : qk;
        if (mode == 2 && bias) { /* the masked values as ONNX's -inf */
            ts_tensor *inf = scalar_constant(im, "NegInf", -INFINITY);
            o = inf ? ts_where(g, ts_binary(g, "LessOrEqual", bias, masked), inf, logits) : NULL;
        }
        if ((st = built(im, o, &io->out[3]))) return st;
    }
    return TS_OK;
}

/* RotaryEmbedding (opset 23): the first rotary_embedding_dim (default
 * all) features of each head rotated by the cos and sin caches (gathered
 * at position_ids where given): halves (or, interleaved, even and odd
 * features) x1, x2 become cos x1 - sin x2 and sin x1 + cos x2. The input
 * [B,H,S,D], or [B,S,H*D] with num_heads. Slices, products and concats:
 * the gradient reaches the input and the caches. */
static ts_status op_rotary(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_graph *g = im->g;
    ts_tensor *x = as_f32(im, io->in[0], &st), *cosc = x ? as_f32(im, io->in[1], &st) : NULL, *sinc = cosc ? as_f32(im, io->in[2], &st) : NULL;
    if (!sinc) return st;
    int64_t nh, rd;
    int inter;
    if ((st = attr_int(im, "num_heads", 0, 0, INT32_MAX, &nh)) || (st = attr_int(im, "rotary_embedding_dim", 0, 0, INT32_MAX, &rd)) ||
        (st = attr_int32(im, "interleaved", 0, 0, 1, &inter)))
        return st;
    int rank = x->shape.ndim;
    static const int swap[4] = {0, 2, 1, 3};
    ts_shape in = x->shape;
    if (rank == 4) x = ts_permute(g, x, swap);
    else if (rank == 3) {
        if (nh < 1 || in.d[2] % nh) return node_error(im, TS_ERR_FORMAT, "a 3-D input needs num_heads dividing its %lld features", (long long)in.d[2]);
        x = ts_reshape(g, x, 4, (int64_t[]){in.d[0], in.d[1], nh, in.d[2] / nh});
    } else return node_error(im, TS_ERR_SHAPE, "takes an input of 3 or 4 dimensions; it has %d", rank);
    if (!x) return ts_graph_status(g);
    int64_t B = x->shape.d[0], S = x->shape.d[1], H = x->shape.d[2], hd = x->shape.d[3];
    if (rd == 0) rd = hd;
    if (rd > hd || rd % 2) return node_error(im, TS_ERR_FORMAT, "rotary_embedding_dim %lld must be even and at most the head size %lld", (long long)rd, (long long)hd);
    int64_t half = rd / 2;
    if (io->n_in > 3 && io->in[3]) {
        ts_tensor *ids = as_tensor(im, io->in[3], &st);
        if (!ids) return st;
        if (ids->dtype != TS_I32 && !(ids = ts_graph_indices(g, ids))) return ts_graph_status(g); /* checked before the gathers */
        cosc = ts_gather(g, cosc, ids, 0);
        sinc = ts_gather(g, sinc, ids, 0);
    }
    if (!cosc || !sinc) return ts_graph_status(g);
    if (cosc->shape.ndim != 3 || cosc->shape.d[2] != half || !ts_shape_equal(&cosc->shape, &sinc->shape))
        return node_error(im, TS_ERR_SHAPE, "its cos and sin caches must be [B,S,%lld] (at the position ids, where given)", (long long)half);
    cosc = ts_reshape(g, cosc, 4, (int64_t[]){cosc->shape.d[0], cosc->shape.d[1], 1, half});
    sinc = ts_reshape(g, sinc, 4, (int64_t[]){sinc->shape.d[0], sinc->shape.d[1], 1, half});
    ts_tensor *rot = rd == hd ? x : ts_slice(g, x, 3, 0, rd), *x1, *x2;
    if (inter) {
        ts_tensor *pairs = ts_reshape(g, rot, 5, (int64_t[]){B, S, H, half, 2});
        x1 = ts_reshape(g, ts_slice(g, pairs, 4, 0, 1), 4, (int64_t[]){B, S, H, half});
        x2 = ts_reshape(g, ts_slice(g, pairs, 4, 1, 1), 4, (int64_t[]){B, S, H, half});
    } else {
        x1 = ts_slice(g, rot, 3, 0, half);
        x2 = ts_slice(g, rot, 3, half, half);
    }
    ts_tensor *re = ts_sub(g, ts_mul(g, x1, cosc), ts_mul(g, x2, sinc)), *imag = ts_add(g, ts_mul(g, x1, sinc), ts_mul(g, x2, cosc)), *y;
    if (inter) {
        int64_t five[5] = {B, S, H, half, 1};
        y = ts_reshape(g, ts_concat(g, (ts_tensor *[]){ts_reshape(g, re, 5, five), ts_reshape(g, imag, 5, five)}, 2, 4), 4, (int64_t[]){B, S, H, rd});
    } else {
        y = ts_concat(g, (ts_tensor *[]){re, imag}, 2, 3);
    }
    if (rd < hd) y = ts_concat(g, (ts_tensor *[]){y, ts_slice(g, x, 3, rd, hd - rd)}, 2, 3);
    if (!y) return ts_graph_status(g);
    y = rank == 4 ? ts_permute(g, y, swap) : ts_reshape(g, y, 3, in.d);
    return built(im, y, &io->out[0]);
}

/* CumProd (opset 26) along the constant axis (input 1): log2(N) steps,
 * each multiplying in the products `shift` places back (ones shifted in),
 * after x is shifted by one (exclusive) and flipped (reverse, a Gather of
 * the reversed positions, flipped back after). Muls, slices and concats:
 * the gradient is theirs. */
static ts_status op_cumprod(importer *im, node_io *io) {
    ts_tensor *x0, *x;
    int axis, exclusive, reverse;
    ts_status st = cum_args(im, io, &x0, &x, &axis, &exclusive, &reverse);
    if (st) return st;
    int64_t n = x->shape.d[axis];
    ts_graph *g = im->g;
    ts_shape os = x->shape;
    os.d[axis] = n;
    ts_tensor *ones = computed_constant(im, "Ones", &os, fill_value, &(value_ctx){ts_shape_numel(&os), 1.0f}, &st);
    if (!ones) return st;
    if (reverse && n > 1 && !(x = strided(im, x, axis, n - 1, n, -1, &st))) return st;
    if (exclusive) x = n == 1 ? ones : ts_concat(g, (ts_tensor *[]){ts_slice(g, ones, axis, 0, 1), ts_slice(g, x, axis, 0, n - 1)}, 2, axis);
    for (int64_t shift = 1; x && shift < n; shift *= 2)
        x = ts_mul(g, x, ts_concat(g, (ts_tensor *[]){ts_slice(g, ones, axis, 0, shift), ts_slice(g, x, axis, 0, n - shift)}, 2, axis));
    if (!x) return ts_graph_status(g);
    if (reverse && n > 1 && !(x = strided(im, x, axis, n - 1, n, -1, &st))) return st;
    return built(im, as_dtype_of(im, x, x0), &io->out[0]);
}

/* CenterCropPad (opset 18): each of `axes` (default all) cropped to the
 * size of the constant `shape` input around its centre, or zero-padded
 * to it with the input centred (the odd one after). */
static ts_status op_center_crop_pad(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = as_tensor(im, io->in[0], &st);
    if (!x) return st;
    int r = x->shape.ndim, n, na;
    int64_t size[TS_MAX_DIMS], axes[TS_MAX_DIMS];
    if ((st = const_ints(im, io->in[1], size, &n, "shape", 1, TS_MAX_NUMEL, false)) ||
        (st = attr_int_list(im, "axes", -r, r - 1, axes, TS_MAX_DIMS, &na)))
        return st;
    if (na < 0) {
        na = r;
        for (int i = 0; i < r; i++) axes[i] = i;
    }
    if (n != na) return node_error(im, TS_ERR_SHAPE, "its shape holds %d sizes for %d axes", n, na);
    int64_t pads[2 * TS_MAX_DIMS] = {0};
    bool pad = false;
    for (int i = 0; i < na && x; i++) {
        int ax = norm_axis(axes[i], r);
        int64_t dim = x->shape.d[ax];
        if (size[i] < dim) x = ts_slice(im->g, x, ax, (dim - size[i]) / 2, size[i]);
        else if (size[i] > dim) {
            pads[ax] = (size[i] - dim) / 2, pads[r + ax] = size[i] - dim - pads[ax];
            pad = true;
        }
    }
    if (x && pad) x = ts_pad(im->g, x, pads, TS_PAD_CONSTANT, 0.0f);
    if (!x) return ts_graph_status(im->g);
    return built(im, x, &io->out[0]);
}

/* TopK with a constant k (input 1; opset 1's attribute): along `axis`
 * (default -1) the k largest (largest=0: smallest) values, sorted, the
 * lower position first among equal ones, and their positions: k rounds of
 * arg_extreme, each taking its pick out of the next; the values gathered
 * at the positions (GatherElements: the gradient reaches x there). */
static ts_status op_topk(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = as_f32(im, io->in[0], &st);
    int axis, largest;
    if (!x || (st = attr_axis(im, "axis", -1, x->shape.ndim, false, &axis)) || (st = attr_int32(im, "largest", 1, 0, 1, &largest))) return st;
    double kd = (double)attr_i(im, "k", 0);
    if (since(im, 10) && (io->n_in < 2 || !io->in[1] || !setting_scalar(im, io->in[1], &kd, &st)))
        return st ? st : node_error(im, TS_ERR_UNSUPPORTED, "its k must be a constant%s", io->n_in > 1 ? bind_hint(io->in[1]) : "");
    int64_t n = x->shape.d[axis], k = (int64_t)kd;
    if (kd != floor(kd) || k < 1 || k > n) return node_error(im, TS_ERR_FORMAT, "k is %g; it takes 1 to the axis' %lld", kd, (long long)n);
    ts_graph *g = im->g;
    ts_tensor *pos = iota_along(im, n, axis, x->shape.ndim, &st), *gone = scalar_constant(im, "Taken", largest ? -INFINITY : INFINITY);
    if (!pos || !gone) return st ? st : ts_graph_status(g);
    ts_tensor **picks = ts_malloc((size_t)k * sizeof *picks), *xm = ts_stop_gradient(g, x);
    if (!picks) return TS_ERR_OUT_OF_MEMORY;
    for (int64_t t = 0; t < k && xm; t++) {
        picks[t] = arg_extreme(im, xm, axis, !largest, false, &st);
        if (!picks[t]) break;
        if (t + 1 < k) xm = ts_where(g, ts_binary(g, "Equal", pos, picks[t]), gone, xm);
    }
    ts_tensor *idx = st || !xm ? NULL : k == 1 ? picks[0] : ts_concat(g, picks, (int)k, axis);
    ts_free(picks);
    if (!idx) return st ? st : ts_graph_status(g);
    idx = ts_unary(g, "CastIndex", idx, 0.0f, (float)(n - 1));
    if ((st = built(im, ts_gather_elements(g, x, idx, axis), &io->out[0]))) return st;
    return io->n_out > 1 ? built(im, idx, &io->out[1]) : TS_OK;
}

typedef struct strides_ctx {
    int q;
    const int64_t *d; /* the q indexed dims */
    bool dims;        /* the dims themselves, not their strides */
} strides_ctx;
static void fill_strides(const void *ctx, float *v) {
    const strides_ctx *c = ctx;
    double stride = 1;
    for (int j = c->q - 1; j >= 0; j--) {
        v[j] = c->dims ? (float)c->d[j] : (float)stride;
        stride *= (double)c->d[j];
    }
}
typedef struct batch_ctx {
    int64_t n, m;
} batch_ctx;
static void fill_batch_offsets(const void *ctx, float *v) {
    const batch_ctx *c = ctx;
    for (int64_t i = 0; i < c->n; i++) v[i] = (float)(i * c->m);
}

/* GatherND with batch_dims b: data [B..., D_b..D_{b+q-1}, tail...] seen as
 * [prod(B) * prod(D), tail...] and gathered along its first axis at each
 * index row's flat position (negative indices counted from their dim):
 * the rows times the constant strides (a MatMul, exact below 2^24), plus
 * the batch's offset; Gather's gradient reaches the data. */
static ts_status op_gather_nd(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_graph *g = im->g;
    ts_tensor *data = as_f32(im, io->in[0], &st), *idx = data ? as_f32(im, io->in[1], &st) : NULL;
    int64_t b;
    if (!idx || (st = attr_int(im, "batch_dims", 0, 0, TS_MAX_DIMS, &b))) return st;
    int r = data->shape.ndim, mr = idx->shape.ndim;
    int q = mr ? (int)idx->shape.d[mr - 1] : 0;
    if (mr < 1 || q < 1 || b >= mr || b + q > r)
        return node_error(im, TS_ERR_SHAPE, "indices of %d dims whose last is %d do not index data of %d dims after %lld batch dims", mr, q, r,
                          (long long)b);
    int64_t B = 1, M = 1, rows = ts_shape_numel(&idx->shape) / q;
    for (int d = 0; d < b; d++) {
        if (idx->shape.d[d] != data->shape.d[d]) return node_error(im, TS_ERR_SHAPE, "batch dim %d is %lld in the indices, %lld in the data", d,
                                                                   (long long)idx->shape.d[d], (long long)data->shape.d[d]);
        B *= data->shape.d[d];
    }
    for (int d = (int)b; d < b + q; d++) M *= data->shape.d[d];
    const int64_t *dd = data->shape.d + b;
    ts_tensor *strides = computed_constant(im, "Strides", &(ts_shape){.ndim = 2, .d = {q, 1}}, fill_strides, &(strides_ctx){q, dd, false}, &st);
    ts_tensor *dims = strides ? computed_constant(im, "Dims", &(ts_shape){.ndim = 1, .d = {q}}, fill_strides, &(strides_ctx){q, dd, true}, &st) : NULL;
    ts_tensor *zero = dims ? scalar_constant(im, "Zero", 0.0f) : NULL;
    if (!zero) return st ? st : ts_graph_status(g);
    idx = ts_add(g, idx, ts_mul(g, ts_binary(g, "Less", idx, zero), dims)); /* -1: the last */
    ts_tensor *flat = matmul_2d(im, ts_reshape(g, idx, 2, (int64_t[]){rows, q}), strides, false, &st);
    if (!flat) return st ? st : ts_graph_status(g);
    ts_shape fs = idx->shape; /* the index rows' shape */
    fs.ndim--;
    if (fs.ndim == 0) fs = (ts_shape){.ndim = 1, .d = {1}};
    flat = ts_reshape(g, flat, fs.ndim, fs.d);
    if (b > 0) { /* each batch's first row of the flattened data */
        ts_shape os = {.ndim = fs.ndim};
        for (int d = 0; d < os.ndim; d++) os.d[d] = d < b ? fs.d[d] : 1;
        ts_tensor *off = computed_constant(im, "BatchOffsets", &os, fill_batch_offsets, &(batch_ctx){B, M}, &st);
        if (!off) return st;
        flat = ts_add(g, flat, off);
    }
    ts_shape ds = {.ndim = 1 + r - (int)(b + q), .d = {B * M}};
    for (int d = (int)(b + q); d < r; d++) ds.d[d - (b + q) + 1] = data->shape.d[d];
    ts_tensor *y = ts_gather(g, ts_reshape(g, data, ds.ndim, ds.d), ts_unary(g, "CastIndex", flat, 0.0f, (float)(B * M - 1)), 0);
    if (y && mr == 1) { /* one index row: the row's own dim goes */
        ts_shape ys = y->shape;
        for (int d = 0; d + 1 < ys.ndim; d++) ys.d[d] = ys.d[d + 1];
        ys.ndim--;
        y = ys.ndim ? ts_reshape(g, y, ys.ndim, ys.d) : ts_reshape(g, y, 0, ys.d);
    }
    return built(im, y, &io->out[0]);
}

/* Compress with a constant condition (input 1): along `axis` (absent: of
 * the flattened input) the positions where it is true, a Gather of
 * constant indices (its gradient adds back into them). */
static ts_status op_compress(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = as_tensor(im, io->in[0], &st);
    if (!x || (st = decoded(im, io->in[1]))) return st;
    if (!is_const(io->in[1]) || io->in[1]->c.shape.ndim != 1)
        return node_error(im, TS_ERR_UNSUPPORTED, "its condition ('%s') must be a constant 1-D list%s", io->in[1]->name, bind_hint(io->in[1]));
    const Attr *a = attr(im, "axis");
    int axis = 0;
    if (a && (st = attr_axis(im, "axis", 0, x->shape.ndim, false, &axis))) return st;
    if (!a) x = ts_reshape(im->g, x, 1, (int64_t[]){ts_shape_numel(&x->shape)});
    if (!x) return ts_graph_status(im->g);
    int64_t n = ts_shape_numel(&io->in[1]->c.shape), dim = x->shape.d[axis], count = 0;
    if (n > dim) n = dim;
    if ((st = ts_const_charge((uint64_t)(n ? n : 1) * 4))) return fold_result(im, st);
    int32_t *pos = ts_malloc((size_t)(n ? n : 1) * sizeof *pos);
    for (int64_t i = 0; pos && i < n; i++)
        if (io->in[1]->c.v[i] != 0) pos[count++] = (int32_t)i;
    char *name = pos && count ? ts_graph_op_output_name(im->g, "Kept") : NULL;
    ts_array pa = ts_array_i32(pos, 1, (int64_t[]){count});
    ts_tensor *c = name ? ts_constant(im->g, name, &pa) : NULL;
    ts_free(name);
    ts_free(pos);
    ts_const_release((uint64_t)(n ? n : 1) * 4);
    if (!count) return node_error(im, TS_ERR_SHAPE, "its condition keeps nothing; tensorscope's dimensions are positive");
    if (!c) return ts_graph_status(im->g) ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
    return built(im, ts_gather(im->g, x, c, axis), &io->out[0]);
}

typedef struct scatter_layer_ctx {
    const int64_t *src; /* per data element: the update written there in this layer, or -1 */
    int64_t n;
} scatter_layer_ctx;
static void fill_scatter_mask(const void *ctx, float *v) {
    const scatter_layer_ctx *c = ctx;
    for (int64_t i = 0; i < c->n; i++) v[i] = c->src[i] >= 0;
}

/* ScatterND and ScatterElements (and the old Scatter) with constant
 * indices (input 1): the flat data position each update element goes to
 * is computed at import; the updates then reach the data in layers, each
 * a Gather of the updates at the positions it writes and a Where of its
 * mask, a position written k times in k layers: reduction none keeps the
 * last write (one layer), add, mul, max and min combine each layer with
 * the data so far. Gather, Where and the binary ops carry the gradient to
 * the data and the updates. */
static ts_status op_scatter(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_graph *g = im->g;
    bool nd = strcmp(im->node->op_type, "ScatterND") == 0;
    ts_tensor *x0 = as_tensor(im, io->in[0], &st), *x = f32_of(im, x0, &st), *u = x ? as_f32(im, io->in[2], &st) : NULL;
    if (!u || (st = decoded(im, io->in[1]))) return st;
    value *iv = io->in[1];
    if (!is_const(iv))
        return node_error(im, TS_ERR_UNSUPPORTED, "its indices ('%s') must be a constant%s", iv->name, bind_hint(iv));
    static const char *const reductions[] = {"none", "add", "mul", "max", "min"};
    const Attr *ra = attr(im, "reduction");
    int red = ra ? attr_choice(ra, reductions, 5) : 0, axis = 0;
    if (red == 5) return node_error(im, TS_ERR_FORMAT, "reduction '%.*s' is not none, add, mul, max or min", (int)ra->s.len, (const char *)ra->s.data);
    const ts_shape *xs = &x->shape, *is = &iv->c.shape, *us = &u->shape;
    int r = xs->ndim;
    if (!nd && (st = attr_axis(im, "axis", 0, r, false, &axis))) return st;
    int64_t N = ts_shape_numel(xs), U = ts_shape_numel(us);
    int q = nd ? (is->ndim ? (int)is->d[is->ndim - 1] : 0) : 0;
    if (nd ? (is->ndim < 1 || q < 1 || q > r || us->ndim != is->ndim - 1 + r - q) : !ts_shape_equal(is, us) || is->ndim != r)
        return node_error(im, TS_ERR_SHAPE, "its indices, updates and data do not fit together (%s)", nd ? "ScatterND: updates are indices.shape[:-1] + data.shape[q:]"
                                                                                                    : "ScatterElements: indices and updates alike, of the data's rank");
    int64_t inner = 1; /* ScatterND: elements of each indexed slice */
    for (int d = q; nd && d < r; d++) inner *= xs->d[d];
    int64_t bytes = (N + 2 * U) * (int64_t)sizeof(int64_t);
    if ((st = ts_const_charge((uint64_t)bytes))) return fold_result(im, st);
    int64_t *dst = ts_malloc((size_t)(U ? U : 1) * sizeof *dst), *src = ts_malloc((size_t)(N ? N : 1) * sizeof *src);
    int64_t *occ = ts_malloc((size_t)(U ? U : 1) * sizeof *occ); /* update k is the occ[k]-th write to its position */
    for (int64_t k = 0; dst && src && occ && k < U && !st; k++) { /* where update k goes */
        int64_t flat = 0, rest = k;
        if (nd) {
            int64_t row = k / inner;
            for (int j = 0; j < q && !st; j++) {
                double v = iv->c.v[row * q + j];
                int64_t dim = xs->d[j], at = (int64_t)v < 0 ? (int64_t)v + dim : (int64_t)v;
                if (v != floor(v) || at < 0 || at >= dim) st = node_error(im, TS_ERR_FORMAT, "index %g is out of range for a dim of %lld", v, (long long)dim);
                flat = flat * dim + at;
            }
            flat = flat * inner + k % inner;
        } else {
            int64_t coord[TS_MAX_DIMS];
            for (int d = r - 1; d >= 0; d--) coord[d] = rest % us->d[d], rest /= us->d[d];
            double v = iv->c.v[k];
            int64_t dim = xs->d[axis], at = (int64_t)v < 0 ? (int64_t)v + dim : (int64_t)v;
            if (v != floor(v) || at < 0 || at >= dim) st = node_error(im, TS_ERR_FORMAT, "index %g is out of range for a dim of %lld", v, (long long)dim);
            coord[axis] = at;
            for (int d = 0; d < r; d++) flat = flat * xs->d[d] + coord[d];
        }
        dst[k] = flat;
    }
    for (int64_t i = 0; dst && src && occ && !st && i < N; i++) src[i] = 0;
    for (int64_t k = 0; dst && src && occ && !st && k < U; k++) occ[k] = src[dst[k]]++;
    ts_tensor *y = dst && src && occ && !st ? ts_reshape(g, x, 1, (int64_t[]){N}) : NULL, *uf = y ? ts_reshape(g, u, 1, (int64_t[]){U}) : NULL;
    /* layer l writes the l-th update to each position (none: the last only) */
    for (int layer = 0; uf && y && !st; layer++) {
        bool any = false;
        for (int64_t i = 0; i < N; i++) src[i] = -1;
        for (int64_t k = 0; k < U; k++)
            if (red ? occ[k] == layer : layer == 0) src[dst[k]] = k, any = true;
        if (!any) break;
        int32_t *idx = ts_malloc((size_t)N * sizeof *idx);
        char *name = idx ? ts_graph_op_output_name(g, "Sources") : NULL;
        for (int64_t i = 0; name && i < N; i++) idx[i] = (int32_t)(src[i] < 0 ? 0 : src[i]);
        ts_array ia = ts_array_i32(idx, 1, (int64_t[]){N});
        ts_tensor *ic = name ? ts_constant(g, name, &ia) : NULL;
        ts_free(name);
        ts_free(idx);
        ts_tensor *mask = ic ? computed_constant(im, "Written", &(ts_shape){.ndim = 1, .d = {N}}, fill_scatter_mask, &(scatter_layer_ctx){src, N}, &st) : NULL;
        if (!mask) {
            if (!st) st = ts_graph_status(g) ? ts_graph_status(g) : TS_ERR_OUT_OF_MEMORY;
            break;
        }
        ts_tensor *v = ts_gather(g, uf, ic, 0);
        if (red == 0 || red == 3 || red == 4) y = ts_where(g, mask, red == 0 ? v : ts_binary(g, red == 3 ? "Max" : "Min", y, v), y);
        else y = red == 1 ? ts_add(g, y, ts_mul(g, v, mask)) : ts_mul(g, y, ts_where(g, mask, v, scalar_constant(im, "One", 1.0f)));
        if (!red) break;
    }
    ts_free(dst);
    ts_free(src);
    ts_free(occ);
    ts_const_release((uint64_t)bytes);
    if (st) return st;
    if (!y) return ts_graph_status(g) ? ts_graph_status(g) : TS_ERR_OUT_OF_MEMORY;
    return built(im, as_dtype_of(im, ts_reshape(g, y, xs->ndim, xs->d), x0), &io->out[0]);
}

/* Einsum's labels: a to z and A to Z are 0 to 51, an ellipsis' dims 52
 * on, numbered from the right (so that ellipses of different ranks line
 * up as numpy broadcasts them). */
#define EINSUM_ELLIPSIS 52
#define EINSUM_LABELS (EINSUM_ELLIPSIS + TS_MAX_DIMS)

/* One term of an Einsum equation (spaces skipped) for an operand of
 * `rank` dims (-1: the output, its ellipsis `ell` dims) into lab; *n. */
static bool einsum_term(const char *t, size_t len, int rank, int ell, int *lab, int *n, int *ell_out) {
    int letters = 0, k = 0;
    bool dots = false;
    for (size_t i = 0; i < len; i++) letters += (t[i] >= 'a' && t[i] <= 'z') || (t[i] >= 'A' && t[i] <= 'Z');
    int e = rank >= 0 ? rank - letters : ell;
    for (size_t i = 0; i < len; i++) {
        char c = t[i];
        if (c == ' ') continue;
        if (c == '.') {
            if (dots || i + 2 >= len || t[i + 1] != '.' || t[i + 2] != '.' || e < 0) return false;
            dots = true;
            for (int j = 0; j < e; j++) {
                if (k >= TS_MAX_DIMS) return false;
                lab[k++] = EINSUM_ELLIPSIS + (e - 1 - j);
            }
            i += 2;
            continue;
        }
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) || k >= TS_MAX_DIMS) return false;
        lab[k++] = c >= 'a' ? c - 'a' : 26 + c - 'A';
    }
    if (rank >= 0 && !dots && letters != rank) return false;
    if (ell_out) *ell_out = dots ? e : 0;
    *n = k;
    return true;
}

/* x with labels lab[n]: repeated labels made one (the diagonal: x times
 * the identity over the two axes, summed over the second), then the
 * labels `keep` does not hold summed out. */
static ts_tensor *einsum_reduce(importer *im, ts_tensor *x, int *lab, int *n, const bool *keep, ts_status *st) {
    ts_graph *g = im->g;
    for (int p = 0; p < *n && x; p++)
        for (int q = p + 1; q < *n && x; q++) {
            if (lab[p] != lab[q]) continue;
            int64_t d = x->shape.d[p];
            ts_shape ms = {.ndim = *n};
            for (int k = 0; k < *n; k++) ms.d[k] = k == p || k == q ? d : 1;
            offsets_ctx oc = {d, d, 0}; /* i - j: 0 on the diagonal */
            ts_tensor *off = computed_constant(im, "Diagonal", &(ts_shape){.ndim = 2, .d = {d, d}}, fill_offsets, &oc, st);
            if (!off) return NULL;
            ts_tensor *eye = ts_reshape(g, ts_binary(g, "Equal", off, scalar_constant(im, "Zero", 0.0f)), ms.ndim, ms.d);
            x = ts_reduce_sum(g, ts_mul(g, x, eye), 1, &q, 0);
            for (int k = q; k + 1 < *n; k++) lab[k] = lab[k + 1];
            (*n)--;
            q--;
        }
    int ax[TS_MAX_DIMS], na = 0, m = 0;
    for (int k = 0; k < *n; k++)
        if (!keep[lab[k]]) ax[na++] = k;
        else lab[m++] = lab[k];
    if (x && na) x = ts_reduce_sum(g, x, na, ax, 0);
    *n = m;
    if (!x && !*st) *st = ts_graph_status(g);
    return x;
}

/* x permuted so that its labels come in the order `want` (n of them). */
static ts_tensor *einsum_order(importer *im, ts_tensor *x, const int *lab, const int *want, int n) {
    int perm[TS_MAX_DIMS];
    bool same = true;
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < n; k++)
            if (lab[k] == want[i]) perm[i] = k;
        same = same && perm[i] == i;
    }
    return same || n < 2 ? x : ts_permute(im->g, x, perm);
}

/* Einsum of one or two operands (floats): repeated labels as diagonals,
 * labels in one operand only and not in the output summed out, then two
 * operands as one batched MatMul [batch, left, contracted] x [batch,
 * contracted, right], and the output's order; an ellipsis stands for the
 * same dims in each (numpy's implicit output where there is no "->"). */
static ts_status op_einsum(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_graph *g = im->g;
    const Attr *a = attr(im, "equation");
    if (!a || !a->has_s) return node_error(im, TS_ERR_FORMAT, "attribute 'equation' is required");
    if (io->n_in < 1 || io->n_in > 2)
        return node_error(im, TS_ERR_UNSUPPORTED, "an Einsum of %d operands is not available; one or two are (chain two-operand ones)", io->n_in);
    const char *eq = (const char *)a->s.data, *arrow = NULL;
    size_t len = a->s.len;
    for (size_t i = 0; i + 1 < len; i++)
        if (eq[i] == '-' && eq[i + 1] == '>') arrow = eq + i;
    size_t lhs = arrow ? (size_t)(arrow - eq) : len;
    ts_tensor *x[2] = {NULL, NULL};
    int lab[2][TS_MAX_DIMS], n[2] = {0, 0}, out[TS_MAX_DIMS], no = 0, ell = 0, count[EINSUM_LABELS] = {0};
    size_t start = 0;
    for (int k = 0; k < io->n_in; k++) {
        size_t end = start;
        while (end < lhs && eq[end] != ',') end++;
        if ((k + 1 < io->n_in) != (end < lhs)) return node_error(im, TS_ERR_FORMAT, "equation '%.*s' has not one term per input", (int)len, eq);
        if (!(x[k] = as_f32(im, io->in[k], &st))) return st;
        int e = 0;
        if (!einsum_term(eq + start, end - start, x[k]->shape.ndim, 0, lab[k], &n[k], &e))
            return node_error(im, TS_ERR_FORMAT, "term %d of the equation '%.*s' does not fit its input of %d dims", k, (int)len, eq, x[k]->shape.ndim);
        if (e > ell) ell = e;
        for (int i = 0; i < n[k]; i++) count[lab[k][i]]++;
        start = end + 1;
    }
    if (arrow) {
        if (!einsum_term(arrow + 2, len - lhs - 2, -1, ell, out, &no, NULL))
            return node_error(im, TS_ERR_FORMAT, "the output of the equation '%.*s' is not a term", (int)len, eq);
    } else { /* numpy's: the ellipsis, then the labels seen once, in order */
        for (int l = EINSUM_ELLIPSIS + ell - 1; l >= EINSUM_ELLIPSIS; l--) out[no++] = l;
        for (int l = 0; l < EINSUM_ELLIPSIS; l++)
            if (count[l] == 1) out[no++] = l;
    }
    bool keep[2][EINSUM_LABELS] = {{false}};
    int64_t size[EINSUM_LABELS] = {0};
    for (int i = 0; i < no; i++) keep[0][out[i]] = keep[1][out[i]] = true;
    for (int k = 0; k < io->n_in; k++)
        for (int i = 0; i < n[k]; i++) {
            int64_t d = x[k]->shape.d[i];
            if (size[lab[k][i]] && size[lab[k][i]] != d)
                return node_error(im, TS_ERR_SHAPE, "a label of the equation '%.*s' stands for dims of %lld and %lld", (int)len, eq,
                                  (long long)size[lab[k][i]], (long long)d);
            size[lab[k][i]] = d;
        }
    if (io->n_in == 2) { /* a label of both operands is kept until the MatMul */
        bool in1[EINSUM_LABELS] = {false};
        for (int i = 0; i < n[1]; i++) in1[lab[1][i]] = true;
        for (int i = 0; i < n[0]; i++)
            if (in1[lab[0][i]]) keep[0][lab[0][i]] = keep[1][lab[0][i]] = true;
    }
    for (int k = 0; k < io->n_in; k++)
        if (!(x[k] = einsum_reduce(im, x[k], lab[k], &n[k], keep[k], &st))) return st;
    ts_tensor *y;
    int ylab[TS_MAX_DIMS], ny = 0;
    if (io->n_in == 1) {
        y = x[0];
        ny = n[0];
        memcpy(ylab, lab[0], sizeof ylab);
    } else {
        bool in[2][EINSUM_LABELS] = {{false}}, outl[EINSUM_LABELS] = {false};
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < n[k]; i++) in[k][lab[k][i]] = true;
        for (int i = 0; i < no; i++) outl[out[i]] = true;
        int bl[TS_MAX_DIMS], ll[TS_MAX_DIMS], cl[TS_MAX_DIMS], rl[TS_MAX_DIMS], nb = 0, nl = 0, nc = 0, nr = 0;
        int64_t B = 1, L = 1, C = 1, R = 1;
        for (int i = 0; i < n[0]; i++) {
            int l = lab[0][i];
            if (in[1][l] && outl[l]) bl[nb++] = l, B *= size[l];
            else if (in[1][l]) cl[nc++] = l, C *= size[l];
            else ll[nl++] = l, L *= size[l];
        }
        for (int i = 0; i < n[1]; i++)
            if (!in[0][lab[1][i]]) rl[nr++] = lab[1][i], R *= size[lab[1][i]];
        int wa[TS_MAX_DIMS], wb[TS_MAX_DIMS], k = 0;
        for (int i = 0; i < nb; i++) wa[k++] = bl[i];
        for (int i = 0; i < nl; i++) wa[k++] = ll[i];
        for (int i = 0; i < nc; i++) wa[k++] = cl[i];
        k = 0;
        for (int i = 0; i < nb; i++) wb[k++] = bl[i];
        for (int i = 0; i < nc; i++) wb[k++] = cl[i];
        for (int i = 0; i < nr; i++) wb[k++] = rl[i];
        ts_tensor *pa = ts_reshape(g, einsum_order(im, x[0], lab[0], wa, n[0]), 3, (int64_t[]){B, L, C});
        ts_tensor *pb = ts_reshape(g, einsum_order(im, x[1], lab[1], wb, n[1]), 3, (int64_t[]){B, C, R});
        y = pa && pb ? ts_matmul_batched(g, pa, pb, 0, 0) : NULL;
        ts_shape ys = {0};
        for (int i = 0; i < nb; i++) ylab[ny++] = bl[i];
        for (int i = 0; i < nl; i++) ylab[ny++] = ll[i];
        for (int i = 0; i < nr; i++) ylab[ny++] = rl[i];
        for (int i = 0; i < ny; i++) ys.d[ys.ndim++] = size[ylab[i]];
        if (y) y = ts_reshape(g, y, ys.ndim, ys.d);
    }
    if (!y) return ts_graph_status(g);
    if (ny != no) return node_error(im, TS_ERR_FORMAT, "the output of the equation '%.*s' names labels the inputs lack or repeats one", (int)len, eq);
    return built(im, einsum_order(im, y, ylab, out, no), &io->out[0]);
}

/* MaxUnpool with constant indices (input 1, MaxPool's flat positions in
 * the whole output): zeros but at those positions, X's values there (a
 * Gather of X and a Where, so X takes its gradient); the output shape the
 * constant input 2, or (in - 1) * stride - pads + kernel per spatial axis. */
static ts_status op_max_unpool(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_graph *g = im->g;
    ts_tensor *x = as_f32(im, io->in[0], &st);
    window win;
    if (!x || (st = window_attrs(im, &win, 0)) || (st = decoded(im, io->in[1]))) return st;
    if (!win.has_kernel) return node_error(im, TS_ERR_FORMAT, "its attribute 'kernel_shape' is missing");
    value *iv = io->in[1];
    if (!is_const(iv) || !ts_shape_equal(&iv->c.shape, &x->shape))
        return node_error(im, TS_ERR_UNSUPPORTED, "its indices ('%s') must be a constant of X's shape%s", iv->name, bind_hint(iv));
    if (x->shape.ndim != win.rank + 2) return node_error(im, TS_ERR_SHAPE, "a %d-D window unpools inputs of %d dims; X has %d", win.rank, win.rank + 2, x->shape.ndim);
    ts_shape ds = x->shape, os; /* the default output shape, which the indices are positions in; the one asked for */
    for (int i = 0; i < win.rank; i++) ds.d[2 + i] = (x->shape.d[2 + i] - 1) * win.stride[i] - win.pad[i] - win.pad[win.rank + i] + win.kernel[i];
    os = ds;
    if (io->n_in > 2 && io->in[2]) { /* a larger output: the same coordinates, the rest zeros */
        int64_t want[TS_MAX_DIMS];
        int n;
        if ((st = const_ints(im, io->in[2], want, &n, "output_shape", 1, TS_MAX_NUMEL, false))) return st;
        if (n != os.ndim) return node_error(im, TS_ERR_SHAPE, "its output_shape has %d dims; X has %d", n, os.ndim);
        for (int d = 0; d < n; d++) {
            if (want[d] < ds.d[d]) return node_error(im, TS_ERR_SHAPE, "its output_shape's dim %d, %lld, is below the unpooled %lld", d, (long long)want[d], (long long)ds.d[d]);
            os.d[d] = want[d];
        }
    }
    int64_t N = ts_shape_numel(&os), U = ts_shape_numel(&x->shape), ND = ts_shape_numel(&ds);
    if ((st = ts_const_charge((uint64_t)N * 12))) return fold_result(im, st);
    int64_t *src = ts_malloc((size_t)N * sizeof *src);
    int32_t *idx = src ? ts_malloc((size_t)N * sizeof *idx) : NULL;
    for (int64_t i = 0; idx && i < N; i++) src[i] = -1;
    for (int64_t k = 0; idx && k < U && !st; k++) {
        double v = iv->c.v[k];
        if (v != floor(v) || v < 0 || v >= (double)ND) {
            st = node_error(im, TS_ERR_FORMAT, "index %g is outside the unpooled output's %lld elements", v, (long long)ND);
            break;
        }
        int64_t rest = (int64_t)v, at = 0, stride = 1;
        for (int d = ds.ndim - 1; d >= 0; d--) { /* its coordinates in the default shape, placed in the output's */
            at += rest % ds.d[d] * stride;
            rest /= ds.d[d], stride *= os.d[d];
        }
        src[at] = k;
    }
    char *name = idx && !st ? ts_graph_op_output_name(g, "Sources") : NULL;
    for (int64_t i = 0; name && i < N; i++) idx[i] = (int32_t)(src[i] < 0 ? 0 : src[i]);
    ts_array ia = ts_array_i32(idx, 1, (int64_t[]){N});
    ts_tensor *ic = name ? ts_constant(g, name, &ia) : NULL;
    ts_tensor *mask = ic ? computed_constant(im, "Written", &(ts_shape){.ndim = 1, .d = {N}}, fill_scatter_mask, &(scatter_layer_ctx){src, N}, &st) : NULL;
    ts_free(name);
    ts_free(idx);
    ts_free(src);
    ts_const_release((uint64_t)N * 12);
    if (!mask) return st ? st : ts_graph_status(g) ? ts_graph_status(g) : TS_ERR_OUT_OF_MEMORY;
    ts_tensor *y = ts_where(g, mask, ts_gather(g, ts_reshape(g, x, 1, (int64_t[]){U}), ic, 0), scalar_constant(im, "Zero", 0.0f));
    return built(im, y ? ts_reshape(g, y, os.ndim, os.d) : NULL, &io->out[0]);
}

/* One resized axis of Resize: its interpolation as a matrix [in, out]
 * (column j the weights of output j over the inputs) and, for
 * tf_crop_and_resize, the extrapolation value of each output outside the
 * input (extra, 0 elsewhere). */
enum { RESIZE_NEAREST, RESIZE_LINEAR, RESIZE_CUBIC };
enum { COORD_HALF_PIXEL, COORD_HALF_PIXEL_SYMMETRIC, COORD_PYTORCH_HALF_PIXEL, COORD_ALIGN_CORNERS, COORD_ASYMMETRIC, COORD_TF_CROP };
enum { NEAREST_ROUND_PREFER_FLOOR, NEAREST_ROUND_PREFER_CEIL, NEAREST_FLOOR, NEAREST_CEIL };
typedef struct resize_axis {
    int64_t in, out;
    double scale, roi0, roi1, cubic_a;
    int mode, coord, nearest;
    bool exclude_outside, antialias;
    float extrapolation;
    bool *outside; /* per output: extrapolated (tf_crop_and_resize) */
} resize_axis;

/* The interpolation coefficients at `ratio` (0 < ratio <= 1: the source
 * coordinate's distance past the pixel before it), ONNX's: *n of them. */
static void resize_coeffs(const resize_axis *r, double ratio, double *c, int *n) {
    double s = r->scale < 1.0 ? r->scale : 1.0, A = r->cubic_a, sum = 0;
    if (r->mode == RESIZE_NEAREST) {
        bool whole = ratio == floor(ratio), second = r->nearest == NEAREST_ROUND_PREFER_FLOOR ? ratio > 0.5
                                                     : r->nearest == NEAREST_ROUND_PREFER_CEIL ? ratio >= 0.5
                                                                                               : r->nearest == NEAREST_CEIL;
        *n = 2;
        c[0] = whole ? 0 : !second, c[1] = whole ? 1 : second;
        return;
    }
    if (r->mode == RESIZE_LINEAR && !r->antialias) {
        *n = 2;
        c[0] = 1 - ratio, c[1] = ratio;
        return;
    }
    if (r->mode == RESIZE_CUBIC && !r->antialias) {
        double t = ratio + 1, u = 1 - ratio, v = 2 - ratio;
        *n = 4;
        c[0] = ((A * t - 5 * A) * t + 8 * A) * t - 4 * A;
        c[1] = ((A + 2) * ratio - (A + 3)) * ratio * ratio + 1;
        c[2] = ((A + 2) * u - (A + 3)) * u * u + 1;
        c[3] = ((A * v - 5 * A) * v + 8 * A) * v - 4 * A;
        return;
    }
    int start = (int)floor((r->mode == RESIZE_LINEAR ? -1.0 : -2.0) / s) + 1;
    *n = 2 - 2 * start;
    for (int k = 0; k < *n; k++) {
        double x = fabs(s * (start + k - ratio));
        c[k] = r->mode == RESIZE_LINEAR ? (x < 1 ? 1 - x : 0)
               : x <= 1                 ? ((A + 2) * x - (A + 3)) * x * x + 1
               : x < 2                  ? ((A * x - 5 * A) * x + 8 * A) * x - 4 * A
                                        : 0;
        sum += c[k];
    }
    for (int k = 0; k < *n; k++) c[k] /= sum;
}

#define RESIZE_MAX_TAPS 4096
static void fill_resize(const void *ctx, float *w) {
    const resize_axis *r = ctx;
    int64_t in = r->in, out = r->out;
    double width = r->scale * (double)in;
    memset(w, 0, (size_t)(in * out) * sizeof *w);
    for (int64_t y = 0; y < out; y++) {
        double x, yd = (double)y;
        switch (r->coord) {
        case COORD_ALIGN_CORNERS: x = width == 1 ? 0 : yd * (double)(in - 1) / (width - 1); break;
        case COORD_ASYMMETRIC: x = yd / r->scale; break;
        case COORD_TF_CROP:
            x = width == 1 ? (r->roi1 - r->roi0) * (double)(in - 1) / 2 : yd * (r->roi1 - r->roi0) * (double)(in - 1) / (width - 1);
            x += r->roi0 * (double)(in - 1);
            r->outside[y] = x < 0 || x > (double)(in - 1);
            break;
        case COORD_PYTORCH_HALF_PIXEL: x = width == 1 ? -0.5 : (yd + 0.5) / r->scale - 0.5; break;
        case COORD_HALF_PIXEL_SYMMETRIC: {
            double offset = (double)in / 2 * (1 - (double)out / width);
            x = offset + (yd + 0.5) / r->scale - 0.5;
            break;
        }
        default: x = (yd + 0.5) / r->scale - 0.5; break;
        }
        if (r->coord == COORD_TF_CROP && r->outside[y]) continue;
        double fl = floor(x), ratio = x == fl ? 1.0 : x - fl, c[RESIZE_MAX_TAPS];
        int n;
        resize_coeffs(r, ratio, c, &n);
        /* the n taps nearest x, ties to the lower ones (ONNX's reference) */
        int pad = (n + 1) / 2;
        double xp = x + pad, p = floor(xp), frac = xp - p;
        int64_t first = (int64_t)p + (n % 2 == 0 ? (frac == 0 ? -(n / 2) : -(n / 2) + 1) : (frac <= 0.5 ? -((n - 1) / 2) : -((n - 1) / 2) + 1)) - pad;
        if (r->exclude_outside) {
            double sum = 0;
            for (int k = 0; k < n; k++) {
                if (first + k < 0 || first + k >= in) c[k] = 0;
                sum += c[k];
            }
            for (int k = 0; k < n && sum != 0; k++) c[k] /= sum;
        }
        for (int k = 0; k < n; k++) {
            int64_t i = first + k < 0 ? 0 : first + k >= in ? in - 1 : first + k; /* edge padding */
            w[i * out + y] += (float)c[k];
        }
    }
}

static void fill_extrapolation(const void *ctx, float *v) {
    const resize_axis *r = ctx;
    for (int64_t y = 0; y < r->out; y++) v[y] = r->outside[y] ? r->extrapolation : 0.0f;
}

/* Resize (opset 11 on) with constant roi, scales or sizes (inputs 1 to 3,
 * over `axes` from opset 18 on): every mode (nearest with its nearest_mode,
 * linear, cubic with cubic_coeff_a and exclude_outside, antialias), every
 * coordinate_transformation_mode and keep_aspect_ratio_policy, as ONNX's
 * reference computes them. Each resized axis is a matmul by the matrix of
 * its interpolation weights (made at import), so the gradient is the
 * matmul's; an integer input is resized in f32 and rounded back. */
static ts_status op_resize(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x0 = as_tensor(im, io->in[0], &st), *x = f32_of(im, x0, &st);
    if (!x) return st;
    int r = x->shape.ndim;
    static const char *const modes[] = {"nearest", "linear", "cubic"};
    static const char *const coords[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize"};
    static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    static const char *const policies[] = {"stretch", "not_larger", "not_smaller"};
    const char *const *lists[] = {modes, coords, nearests, policies};
    const char *names[] = {"mode", "coordinate_transformation_mode", "nearest_mode", "keep_aspect_ratio_policy"};
    int counts[] = {3, 6, 4, 3}, k[4] = {0};
    for (int i = 0; i < 4; i++) {
        const Attr *a = attr(im, names[i]);
        if (a && (k[i] = attr_choice(a, lists[i], counts[i])) == counts[i])
            return node_error(im, TS_ERR_FORMAT, "attribute '%s' is '%.*s', which is not one of Resize's", names[i], a->has_s ? (int)a->s.len : 0,
                              a->has_s ? (const char *)a->s.data : "");
    }
    int antialias, exclude;
    int64_t axes[TS_MAX_DIMS];
    int n_axes = -1;
    if ((st = attr_int32(im, "antialias", 0, 0, 1, &antialias)) || (st = attr_int32(im, "exclude_outside", 0, 0, 1, &exclude)) ||
        (st = attr_int_list(im, "axes", -r, r - 1, axes, TS_MAX_DIMS, &n_axes)))
        return st;
    if (n_axes < 0) {
        n_axes = r;
        for (int i = 0; i < r; i++) axes[i] = i;
    }
    for (int i = 0; i < n_axes; i++) axes[i] = norm_axis(axes[i], r);
    /* the constant roi, scales and sizes, of one value per axis (two for roi) */
    double vals[3][2 * TS_MAX_DIMS];
    bool given[3] = {false, false, false};
    for (int i = 0; i < 3; i++) {
        value *v = io->n_in > i + 1 ? io->in[i + 1] : NULL;
        if (!v) continue;
        if ((st = decoded(im, v))) return st;
        if (!is_const(v))
            return node_error(im, TS_ERR_UNSUPPORTED, "its %s ('%s') must be a constant%s", i == 0 ? "roi" : i == 1 ? "scales" : "sizes", v->name,
                              bind_hint(v));
        int64_t n = ts_shape_numel(&v->c.shape);
        if (n == 0) continue;
        if (n != (i == 0 ? 2 : 1) * n_axes)
            return node_error(im, TS_ERR_SHAPE, "its %s ('%s') holds %lld values; it takes %d, %s per resized axis", i == 0 ? "roi" : i == 1 ? "scales" : "sizes",
                              v->name, (long long)n, (i == 0 ? 2 : 1) * n_axes, i == 0 ? "two" : "one");
        for (int64_t j = 0; j < n; j++) vals[i][j] = v->c.v[j];
        given[i] = true;
    }
    if (given[1] == given[2]) return node_error(im, TS_ERR_FORMAT, "gives %s of scales and sizes; Resize takes exactly one", given[1] ? "both" : "neither");
    if (k[1] == COORD_TF_CROP && !given[0]) return node_error(im, TS_ERR_FORMAT, "coordinate_transformation_mode tf_crop_and_resize needs the roi input");
    double scale[TS_MAX_DIMS];
    int64_t out[TS_MAX_DIMS];
    double policy = k[3] == 1 ? INFINITY : -INFINITY;
    for (int i = 0; i < n_axes; i++) {
        int64_t in = x->shape.d[axes[i]];
        double s = given[1] ? vals[1][i] : vals[2][i] / (double)in;
        if (!(s > 0) || !isfinite(s) || (given[2] && vals[2][i] != floor(vals[2][i])))
            return node_error(im, TS_ERR_FORMAT, "its %s for axis %lld is %g; it takes a positive %s", given[1] ? "scale" : "size",
                              (long long)axes[i], given[1] ? vals[1][i] : vals[2][i], given[1] ? "number" : "integer");
        scale[i] = s;
        out[i] = given[1] ? (int64_t)(s * (double)in) : (int64_t)vals[2][i];
        policy = k[3] == 1 ? fmin(policy, s) : fmax(policy, s);
    }
    for (int i = 0; given[2] && k[3] != 0 && i < n_axes; i++) { /* not_larger, not_smaller: one scale for every axis */
        scale[i] = policy;
        out[i] = (int64_t)(policy * (double)x->shape.d[axes[i]] + 0.5);
    }
    ts_tensor *y = x;
    for (int i = 0; i < n_axes && y; i++) {
        int ax = (int)axes[i], last = r - 1;
        resize_axis ra = {.in = x->shape.d[ax], .out = out[i], .scale = scale[i], .roi0 = given[0] ? vals[0][i] : 0,
                          .roi1 = given[0] ? vals[0][n_axes + i] : 1, .cubic_a = attr_f(im, "cubic_coeff_a", -0.75), .mode = k[0],
                          .coord = k[1], .nearest = k[2], .exclude_outside = exclude != 0, .antialias = antialias != 0 && k[0] != RESIZE_NEAREST,
                          .extrapolation = (float)attr_f(im, "extrapolation_value", 0.0)};
        if (out[i] < 1) return node_error(im, TS_ERR_SHAPE, "resizes axis %d to %lld; tensorscope's dimensions are positive", ax, (long long)out[i]);
        if (fabs(ra.scale - 1.0) <= 1e-9 && ra.out == ra.in && ra.roi0 == 0 && ra.roi1 == 1) continue; /* the identity, as ONNX's reference */
        if (ra.antialias && ra.scale < 1 && 2.0 / ra.scale + 2 > RESIZE_MAX_TAPS)
            return node_error(im, TS_ERR_UNSUPPORTED, "an antialiased downscale by %g takes more than %d taps", ra.scale, RESIZE_MAX_TAPS);
        bool outside[4096];
        if (ra.coord == COORD_TF_CROP && ra.out > (int64_t)TS_ARRAY_LEN(outside))
            return node_error(im, TS_ERR_UNSUPPORTED, "tf_crop_and_resize to more than %zu positions is not available", TS_ARRAY_LEN(outside));
        memset(outside, 0, sizeof outside);
        ra.outside = outside;
        ts_tensor *w = computed_constant(im, "Weights", &(ts_shape){.ndim = 2, .d = {ra.in, ra.out}}, fill_resize, &ra, &st);
        if (!w) return st;
        ts_tensor *t = ax == last ? y : ts_transpose(im->g, y, ax, last);
        int64_t rows = t ? ts_shape_numel(&t->shape) / ra.in : 0;
        ts_tensor *m = t ? matmul_2d(im, ts_reshape(im->g, t, 2, (int64_t[]){rows, ra.in}), w, false, &st) : NULL;
        if (!m) return st ? st : ts_graph_status(im->g);
        bool any = false;
        for (int64_t j = 0; j < ra.out; j++) any = any || outside[j];
        if (any) {
            ts_tensor *e = computed_constant(im, "Extrapolation", &(ts_shape){.ndim = 1, .d = {ra.out}}, fill_extrapolation, &ra, &st);
            if (!e) return st;
            m = ts_add(im->g, m, e);
        }
        ts_shape s = t->shape;
        s.d[last] = ra.out;
        y = ts_reshape(im->g, m, s.ndim, s.d);
        if (y && ax != last) y = ts_transpose(im->g, y, ax, last);
    }
    if (!y) return ts_graph_status(im->g);
    if (y == x) return op_identity(im, io);
    if (x0->dtype == TS_I32) y = ts_unary(im->g, "Round", y, 0.0f, 0.0f);
    return built(im, as_dtype_of(im, y, x0), &io->out[0]);
}

/* One row per ONNX op type: the import table. `oldest` is the oldest
 * opset whose version of the op the row reads: the op's version at opset
 * 13 and the older ones that differ from it in types only (onnx.defs'
 * schemas: the same attributes, defaults, inputs and outputs, or a subset
 * read the same), and older ones still where the row reads them as their
 * spec says (Squeeze's, Unsqueeze's and ReduceSum's axes attribute,
 * Softmax's 2-D coercion, Dropout's ratio attribute). A node of a version
 * older than that is refused, never read as another version. */
/* ----------------------------------------------------------- control flow */

/* One static graph holds no control flow: an If whose condition is known
 * at import is its chosen branch, imported inline (its nodes read the
 * names of the graph around it); a Loop whose trip count and condition
 * fold at import, and a Scan (its sequence length is static), are their
 * body imported once per iteration, the loop-carried values threaded from
 * one to the next and the scan outputs stacked (docs/onnx.md). The body's
 * ops are ordinary graph ops: gradients flow through them. */

static ts_status import_node(importer *im, const Node *n, int index);

static const TensorscopeOnnx__GraphProto *attr_graph(const importer *im, const char *name) {
    const Attr *a = attr(im, name);
    return a ? a->g : NULL;
}

/* v as a value of its own, which outlives the names of the body that made
 * it: a graph tensor (a parameter's, made now) or a copy of a constant. */
static ts_status carried(importer *im, value *v, value *out) {
    memset(out, 0, sizeof *out);
    if (v->t || v->param) {
        ts_status st = TS_OK;
        out->t = as_tensor(im, v, &st);
        return out->t ? TS_OK : st;
    }
    return fold_result(im, ts_const_copy(&v->c, &out->c));
}

static void free_values(value *v, int n) {
    for (int i = 0; i < n; i++) ts_const_free(&v[i].c);
}

/* A scalar constant of ONNX type dtype (Loop's iteration number, its
 * condition) as a value. */
static ts_status scalar_value(importer *im, int dtype, double x, value *out) {
    memset(out, 0, sizeof *out);
    ts_shape s = {.ndim = 0};
    return fold_result(im, ts_const_fill(&s, dtype, x, &out->c));
}

/* Imports the graph `gp` of the current node inline: its inputs bound to
 * in[0..n_in), its outputs into out[0..gp->n_output) (values of their own,
 * freed by the caller). `what` names the branch or iteration in errors,
 * which name the node that holds the graph. */
static ts_status import_body(importer *im, const TensorscopeOnnx__GraphProto *gp, value **in, int n_in, value *out, const char *what) {
    const Node *node = im->node;
    int index = im->node_index;
    if (gp->n_input != (size_t)n_in)
        return node_error(im, TS_ERR_FORMAT, "its %s has %zu inputs where %s gives it %d", what, gp->n_input, node->op_type, n_in);
    if (im->depth >= MAX_GRAPH_DEPTH)
        return node_error(im, TS_ERR_UNSUPPORTED, "its %s nests graphs more than %d deep (tensorscope's limit)", what, MAX_GRAPH_DEPTH);
    if (gp->n_node + 1 > MAX_UNROLLED_NODES - im->unrolled)
        return node_error(im, TS_ERR_UNSUPPORTED, "importing its %s would bring the nodes imported from If branches and Loop and Scan "
                          "bodies past %d, tensorscope's limit on unrolled nodes (a body counts once per iteration, and one more): "
                          "shorten the loop, or write the computation without it (a batched op over the sequence)",
                          what, MAX_UNROLLED_NODES);
    im->unrolled += gp->n_node + 1;
    ts_status st = TS_OK;
    for (size_t i = 0; !st && i < gp->n_initializer; i++) { /* constants of the body */
        const TensorProto *tp = gp->initializer[i];
        char w[600];
        snprintf(w, sizeof w, "initializer '%s' of its %s", tp->name ? tp->name : "", what);
        value v = {0};
        st = tp->name && *tp->name ? tensor_check(im, tp, w, &v.c) : node_error(im, TS_ERR_FORMAT, "an initializer of its %s has no name", what);
        if (!st) st = tensor_decode(im, tp, w, &v.c);
        if (!st) st = define(im, tp->name, &v);
        if (st) ts_const_free(&v.c);
    }
    for (int i = 0; !st && i < n_in; i++) {
        const char *name = gp->input[i]->name;
        if (!name || !*name) return node_error(im, TS_ERR_FORMAT, "input %d of its %s has no name", i, what);
        if (!in[i]) continue; /* an input left out: a node that reads it fails */
        value v;
        st = carried(im, in[i], &v);
        if (!st && (st = define(im, name, &v))) ts_const_free(&v.c);
    }
    im->depth++;
    for (size_t k = 0; !st && k < gp->n_node; k++) st = import_node(im, gp->node[k], (int)k);
    im->depth--;
    im->node = node;
    im->node_index = index;
    ts_graph_at(im->g, im->file, im->top_index);
    if (st) {
        char msg[900];
        const char *e = ts_last_error();
        if (strncmp(e, im->path, strlen(im->path)) == 0 && e[strlen(im->path)] == ':') e += strlen(im->path) + 2;
        snprintf(msg, sizeof msg, "%s", e);
        return node_error(im, st, "in its %s, %s", what, msg);
    }
    for (size_t o = 0; o < gp->n_output; o++) {
        const char *name = gp->output[o]->name;
        value *v = name && *name ? lookup(im, name) : NULL;
        if (!v || (!v->t && !v->param && !v->c.v && ts_shape_numel(&v->c.shape) > 0))
            st = node_error(im, TS_ERR_UNSUPPORTED, "output %zu '%s' of its %s is computed by no node tensorscope imports", o,
                            name ? name : "", what);
        else st = carried(im, v, &out[o]);
        if (st) {
            free_values(out, (int)o);
            return st;
        }
    }
    return TS_OK;
}

/* The refusal of control flow that depends on the graph's tensors. */
static ts_status refuse_dynamic(importer *im, const value *v, int input, const char *what) {
    const char *name = im->node->input[input];
    return node_error(im, TS_ERR_UNSUPPORTED, "its %s '%s' is computed from the graph's tensors, not known at import%s: tensorscope "
                      "trains one static graph, and imports control flow whose %s folds to a constant. Write the model without Python "
                      "control flow on tensor values (torch.where on both results for an if; a loop over a fixed range)",
                      what, name, bind_hint(v), what);
}

/* parts[0..n) (one shape, one type) stacked along a new axis `axis`, in
 * reverse order when `reverse`: Loop's and Scan's scan outputs. */
static ts_status stack(importer *im, value *parts, int64_t n, int64_t axis, bool reverse, const char *what, value *out) {
    const ts_shape *p = shape_of(&parts[0]);
    if (axis < -(p->ndim + 1) || axis > p->ndim)
        return node_error(im, TS_ERR_FORMAT, "the axis %lld of %s is outside its %d dimensions", (long long)axis, what, p->ndim + 1);
    if (p->ndim + 1 > TS_MAX_DIMS) return node_error(im, TS_ERR_UNSUPPORTED, "%s would have more than %d dimensions", what, TS_MAX_DIMS);
    int ax = (int)(axis < 0 ? axis + p->ndim + 1 : axis);
    ts_shape one = {.ndim = p->ndim + 1}, all;
    for (int d = 0, k = 0; d < one.ndim; d++) one.d[d] = d == ax ? 1 : p->d[k++];
    all = one;
    all.d[ax] = n;
    bool consts = true;
    for (int64_t i = 0; i < n; i++) {
        if (!ts_shape_equal(shape_of(&parts[i]), p))
            return node_error(im, TS_ERR_SHAPE, "%s has parts of different shapes (iteration %lld); tensorscope stacks equal ones", what,
                              (long long)i);
        consts = consts && is_const(&parts[i]) && parts[i].c.dtype == parts[0].c.dtype;
    }
    memset(out, 0, sizeof *out);
    if (consts) { /* outer x n x inner values */
        int64_t inner = ts_shape_numel(p), outer = 1;
        for (int d = 0; d < ax; d++) outer *= p->d[d];
        inner /= outer ? outer : 1;
        ts_status st = ts_const_fill(&all, parts[0].c.dtype, 0, &out->c);
        for (int64_t i = 0; !st && i < n; i++) {
            const double *src = parts[reverse ? n - 1 - i : i].c.v;
            for (int64_t o = 0; o < outer; o++) memcpy(out->c.v + (o * n + i) * inner, src + o * inner, (size_t)inner * sizeof(double));
        }
        return fold_result(im, st);
    }
    ts_tensor **xs = ts_malloc((size_t)n * sizeof *xs);
    if (!xs) return TS_ERR_OUT_OF_MEMORY;
    ts_status st = TS_OK;
    for (int64_t i = 0; !st && i < n; i++) {
        ts_tensor *t = as_tensor(im, &parts[reverse ? n - 1 - i : i], &st);
        xs[i] = t ? ts_reshape(im->g, t, one.ndim, one.d) : NULL;
        if (t && !xs[i]) st = ts_graph_status(im->g);
    }
    if (!st) st = built(im, n == 1 ? xs[0] : ts_concat(im->g, xs, (int)n, ax), out);
    ts_free(xs);
    return st;
}

/* x's slice at `at` along `axis`, without that axis: Scan's inputs. */
static ts_status slice_at(importer *im, value *x, int axis, int64_t at, value *out) {
    const ts_shape *s = shape_of(x);
    ts_shape r = {.ndim = s->ndim - 1};
    for (int d = 0, k = 0; d < s->ndim; d++)
        if (d != axis) r.d[k++] = s->d[d];
    memset(out, 0, sizeof *out);
    if (is_const(x) && !x->param) {
        int64_t inner = 1, outer = 1;
        for (int d = 0; d < s->ndim; d++) {
            if (d < axis) outer *= s->d[d];
            if (d > axis) inner *= s->d[d];
        }
        ts_status st = ts_const_fill(&r, x->c.dtype, 0, &out->c);
        for (int64_t o = 0; !st && o < outer; o++)
            memcpy(out->c.v + o * inner, x->c.v + (o * s->d[axis] + at) * inner, (size_t)inner * sizeof(double));
        return fold_result(im, st);
    }
    ts_status st = TS_OK;
    ts_tensor *t = as_tensor(im, x, &st), *one = t ? ts_slice(im->g, t, axis, at, 1) : NULL;
    if (t && !one) st = ts_graph_status(im->g);
    return one ? built(im, ts_reshape(im->g, one, r.ndim, r.d), out) : st;
}

static ts_status op_if(importer *im, node_io *io) {
    double c = 0;
    if (!const_scalar(io->in[0], &c)) return refuse_dynamic(im, io->in[0], 0, "condition");
    const char *which = c != 0 ? "then_branch" : "else_branch";
    const TensorscopeOnnx__GraphProto *gp = attr_graph(im, which);
    if (!gp) return node_error(im, TS_ERR_FORMAT, "it has no graph attribute '%s'", which);
    if (gp->n_output != (size_t)io->n_out)
        return node_error(im, TS_ERR_FORMAT, "its %s has %zu outputs where the node has %d", which, gp->n_output, io->n_out);
    return import_body(im, gp, NULL, 0, io->out, which);
}

/* Loop's and Scan's scan outputs: each iteration's value of each, grown. */
typedef struct scans {
    value *v[MAX_NODE_IO];
    int64_t n, cap;
    int k;
} scans;

static ts_status scans_add(importer *im, scans *s, value *outs) {
    if (s->n == s->cap) {
        int64_t cap = s->cap ? s->cap * 2 : 16;
        for (int j = 0; j < s->k; j++) {
            value *v = ts_realloc(s->v[j], (size_t)cap * sizeof *v);
            if (!v) return node_error(im, TS_ERR_OUT_OF_MEMORY, "out of memory unrolling its body");
            s->v[j] = v;
        }
        s->cap = cap;
    }
    for (int j = 0; j < s->k; j++) s->v[j][s->n] = outs[j];
    s->n++;
    return TS_OK;
}

static void scans_free(scans *s) {
    for (int j = 0; j < s->k; j++) {
        for (int64_t i = 0; i < s->n; i++) ts_const_free(&s->v[j][i].c);
        ts_free(s->v[j]);
    }
}

/* The stacked scan outputs into out[0..s->k), axes[j] and reverse[j] each
 * (NULL: 0 and forward). */
static ts_status scans_stack(importer *im, scans *s, const int64_t *axes, const int64_t *reverse, value *out) {
    for (int j = 0; j < s->k; j++) {
        char what[64];
        snprintf(what, sizeof what, "scan output %d", j);
        if (s->n == 0)
            return node_error(im, TS_ERR_UNSUPPORTED, "its body runs no iteration, so the shape of %s is not known at import", what);
        ts_status st = stack(im, s->v[j], s->n, axes ? axes[j] : 0, reverse && reverse[j], what, &out[j]);
        if (st) {
            free_values(out, j);
            return st;
        }
    }
    return TS_OK;
}

static ts_status op_loop(importer *im, node_io *io) {
    const TensorscopeOnnx__GraphProto *gp = attr_graph(im, "body");
    if (!gp) return node_error(im, TS_ERR_FORMAT, "it has no graph attribute 'body'");
    int n_carried = io->n_in - 2, n_scan = io->n_out - (io->n_in - 2);
    if (n_carried < 0 || n_scan < 0 || gp->n_input != (size_t)n_carried + 2 || gp->n_output != (size_t)(n_carried + n_scan) + 1)
        return node_error(im, TS_ERR_FORMAT, "its body has %zu inputs and %zu outputs; a Loop of %d inputs and %d outputs has %d and %d",
                          gp->n_input, gp->n_output, io->n_in, io->n_out, n_carried + 2, n_carried + n_scan + 1);
    double m = -1, c = 1;
    if (io->in[0] && !const_scalar(io->in[0], &m)) return refuse_dynamic(im, io->in[0], 0, "trip count M");
    if (io->in[1] && !const_scalar(io->in[1], &c)) return refuse_dynamic(im, io->in[1], 1, "condition");
    if (io->in[0] && !(m >= 0)) return node_error(im, TS_ERR_FORMAT, "its trip count M is %g", m);
    value carry[MAX_NODE_IO], outs[2 * MAX_NODE_IO + 1];
    scans sc = {.k = n_scan};
    ts_status st = TS_OK;
    int made = 0;
    for (; !st && made < n_carried; made++) {
        if (!io->in[2 + made]) st = node_error(im, TS_ERR_FORMAT, "its loop-carried input %d is missing", made);
        else st = carried(im, io->in[2 + made], &carry[made]);
    }
    if (st) made--;
    for (int64_t it = 0; !st && (m < 0 || (double)it < m) && c != 0; it++) {
        value iter, cond, *in[MAX_NODE_IO + 2] = {&iter, &cond};
        for (int i = 0; i < n_carried; i++) in[2 + i] = &carry[i];
        char what[64];
        snprintf(what, sizeof what, "body (iteration %lld)", (long long)it);
        st = scalar_value(im, TS_ONNX_INT64, (double)it, &iter);
        if (!st && !(st = scalar_value(im, TS_ONNX_BOOL, 1, &cond))) {
            st = import_body(im, gp, in, n_carried + 2, outs, what);
            ts_const_free(&cond.c);
        }
        ts_const_free(&iter.c);
        if (st) break;
        if (!const_scalar(&outs[0], &c))
            st = node_error(im, TS_ERR_UNSUPPORTED, "the condition its body computes at iteration %lld ('%s') is computed from the graph's "
                            "tensors, not known at import: tensorscope trains one static graph and unrolls a Loop whose trip count and "
                            "condition fold to constants. Write the model without a loop whose end depends on tensor values",
                            (long long)it, gp->output[0]->name ? gp->output[0]->name : "");
        for (int i = 0; !st && i < n_carried; i++) {
            ts_const_free(&carry[i].c);
            carry[i] = outs[1 + i];
            outs[1 + i] = (value){0};
        }
        if (!st && !(st = scans_add(im, &sc, outs + 1 + n_carried)))
            for (int j = 0; j < n_scan; j++) outs[1 + n_carried + j] = (value){0};
        free_values(outs, n_carried + n_scan + 1);
    }
    if (!st) st = scans_stack(im, &sc, NULL, NULL, io->out + n_carried);
    for (int i = 0; !st && i < n_carried; i++) io->out[i] = carry[i], carry[i] = (value){0};
    free_values(carry, st ? made : 0);
    scans_free(&sc);
    return st;
}

/* Scan's iterations over seq[0..n_seq) (their sequences along in_axes,
 * from the end where in_rev), the states state[0..n_state) threaded:
 * out[0..n_state) the final states, then n_scan_out scan outputs stacked
 * along out_axes (reversed where out_rev). */
static ts_status scan_unrolled(importer *im, const TensorscopeOnnx__GraphProto *gp, value **state_in, int n_state, value **seq, int n_seq,
                               const int64_t *in_axes, const int64_t *in_rev, int n_scan_out, const int64_t *out_axes,
                               const int64_t *out_rev, value *out) {
    int64_t len = -1, axes[MAX_NODE_IO];
    for (int j = 0; j < n_seq; j++) {
        const ts_shape *s = shape_of(seq[j]);
        if (in_axes[j] < -s->ndim || in_axes[j] >= s->ndim)
            return node_error(im, TS_ERR_FORMAT, "the scan axis %lld of scan input %d is outside its %d dimensions", (long long)in_axes[j],
                              j, s->ndim);
        axes[j] = in_axes[j] < 0 ? in_axes[j] + s->ndim : in_axes[j];
        int64_t l = s->d[axes[j]];
        if (len >= 0 && l != len)
            return node_error(im, TS_ERR_SHAPE, "its scan inputs have sequence lengths %lld and %lld; they must be equal", (long long)len,
                              (long long)l);
        len = l;
    }
    value state[MAX_NODE_IO], slices[MAX_NODE_IO], outs[MAX_NODE_IO];
    scans sc = {.k = n_scan_out};
    ts_status st = TS_OK;
    int made = 0;
    for (; !st && made < n_state; made++) st = carried(im, state_in[made], &state[made]);
    if (st) made--;
    for (int64_t t = 0; !st && t < len; t++) {
        value *in[MAX_NODE_IO];
        int sliced = 0;
        for (int i = 0; i < n_state; i++) in[i] = &state[i];
        for (; !st && sliced < n_seq; sliced++) {
            in[n_state + sliced] = &slices[sliced];
            st = slice_at(im, seq[sliced], (int)axes[sliced], in_rev[sliced] ? len - 1 - t : t, &slices[sliced]);
        }
        char what[64];
        snprintf(what, sizeof what, "body (iteration %lld)", (long long)t);
        if (!st) st = import_body(im, gp, in, n_state + n_seq, outs, what);
        free_values(slices, sliced); /* a slice that failed is zeroed */
        if (st) break;
        for (int i = 0; i < n_state; i++) {
            ts_const_free(&state[i].c);
            state[i] = outs[i];
            outs[i] = (value){0};
        }
        if (!(st = scans_add(im, &sc, outs + n_state)))
            for (int j = 0; j < n_scan_out; j++) outs[n_state + j] = (value){0};
        free_values(outs, n_state + n_scan_out);
    }
    if (!st) st = scans_stack(im, &sc, out_axes, out_rev, out + n_state);
    for (int i = 0; !st && i < n_state; i++) out[i] = state[i], state[i] = (value){0};
    free_values(state, st ? made : 0);
    scans_free(&sc);
    return st;
}

/* Scan: from opset 9 its inputs are the states, then num_scan_inputs
 * sequences along scan_input_axes; opset 8's are sequence_lens (absent, or
 * every length the sequence's), then states and sequences of a batch
 * (dim 0; the sequence is dim 1): each batch row scanned on its own, the
 * results stacked along dim 0. */
static ts_status op_scan(importer *im, node_io *io) {
    const TensorscopeOnnx__GraphProto *gp = attr_graph(im, "body");
    if (!gp) return node_error(im, TS_ERR_FORMAT, "it has no graph attribute 'body'");
    bool batched = !since(im, 9);
    int first = batched, n_in_scan;
    ts_status st = attr_int32(im, "num_scan_inputs", 0, 1, io->n_in - first, &n_in_scan);
    if (st) return st;
    int n_state = io->n_in - first - n_in_scan, n_out_scan = io->n_out - n_state;
    if (n_out_scan < 0 || gp->n_input != (size_t)(io->n_in - first) || gp->n_output != (size_t)io->n_out)
        return node_error(im, TS_ERR_FORMAT, "its body has %zu inputs and %zu outputs; this Scan needs %d and %d", gp->n_input,
                          gp->n_output, io->n_in - first, io->n_out);
    int64_t in_axes[MAX_NODE_IO] = {0}, in_rev[MAX_NODE_IO] = {0}, out_axes[MAX_NODE_IO] = {0}, out_rev[MAX_NODE_IO] = {0};
    int n;
    if ((st = attr_int_list(im, batched ? "directions" : "scan_input_directions", 0, 1, in_rev, n_in_scan, &n)) ||
        (!batched && (st = attr_int_list(im, "scan_input_axes", -TS_MAX_DIMS, TS_MAX_DIMS - 1, in_axes, n_in_scan, &n))) ||
        (!batched && (st = attr_int_list(im, "scan_output_axes", -TS_MAX_DIMS, TS_MAX_DIMS - 1, out_axes, n_out_scan, &n))) ||
        (!batched && (st = attr_int_list(im, "scan_output_directions", 0, 1, out_rev, n_out_scan, &n))))
        return st;
    for (int j = first; j < io->n_in; j++)
        if (!io->in[j]) return node_error(im, TS_ERR_FORMAT, "its input %d is missing", j);
    value **states = io->in + first, **seqs = io->in + first + n_state;
    if (!batched) return scan_unrolled(im, gp, states, n_state, seqs, n_in_scan, in_axes, in_rev, n_out_scan, out_axes, out_rev, io->out);
    const ts_shape *s0 = shape_of(io->in[first]);
    int64_t rows = s0->ndim ? s0->d[0] : 0, len = -1;
    for (int j = first; j < io->n_in; j++) {
        const ts_shape *s = shape_of(io->in[j]);
        if (s->ndim < (j >= first + n_state ? 2 : 1) || s->d[0] != rows)
            return node_error(im, TS_ERR_SHAPE, "its input %d is not [batch%s] of the batch %lld of its first", j,
                              j >= first + n_state ? ", sequence, ..." : ", ...", (long long)rows);
        if (j >= first + n_state) len = s->d[1];
    }
    double l;
    for (int64_t i = 0; io->in[0] && i < ts_shape_numel(shape_of(io->in[0])); i++)
        if (!is_const(io->in[0]) || io->in[0]->param || (l = io->in[0]->c.v[i]) != (double)len)
            return node_error(im, TS_ERR_UNSUPPORTED, "its sequence_lens %s; tensorscope scans every row's whole sequence (%lld steps): "
                              "leave sequence_lens out", is_const(io->in[0]) ? "differ from the sequence's length" : "are computed from "
                              "the graph's tensors", (long long)len);
    for (int j = 0; j < n_in_scan; j++) in_axes[j] = 0; /* the sequence of a row */
    value part[MAX_NODE_IO], outs[MAX_NODE_IO], *row_in[MAX_NODE_IO];
    scans per_row = {.k = io->n_out};
    for (int64_t b = 0; !st && b < rows; b++) {
        int k = 0;
        for (; !st && k < io->n_in - first; k++) {
            row_in[k] = &part[k];
            st = slice_at(im, io->in[first + k], 0, b, &part[k]);
        }
        if (!st) st = scan_unrolled(im, gp, row_in, n_state, row_in + n_state, n_in_scan, in_axes, in_rev, n_out_scan, out_axes, out_rev, outs);
        free_values(part, k);
        if (!st && (st = scans_add(im, &per_row, outs))) free_values(outs, io->n_out);
    }
    if (!st) st = scans_stack(im, &per_row, NULL, NULL, io->out);
    scans_free(&per_row);
    return st;
}

/* ----------------------------------------------- conformance ops */

static bool onnx_array_dtype(int elem, ts_dtype *out);

/* An integer operand as an i32 graph tensor: an i32 one as it is, one
 * carried in f32 (integer arithmetic) toward zero in int32's range. */
static ts_tensor *as_i32(importer *im, value *v, ts_status *st) {
    ts_tensor *t = as_tensor(im, v, st);
    if (!t || t->dtype == TS_I32) return t;
    if (t->dtype == TS_I64) return ts_cast(im->g, t, TS_I32); /* its low 32 bits */
    return ts_unary(im->g, "CastIndex", t, -2147483648.0f, 2147483520.0f); /* the largest float below 2^31 */
}

/* BitwiseAnd, BitwiseOr, BitwiseXor, BitwiseNot (opset 18) and BitShift
 * (opset 11) on integer tensors (ts_bitwise), computed in the declared
 * integer type of input 0 (a graph input's, a Cast's or a constant's) and
 * wrapped to it. */
static ts_status op_bitwise(importer *im, node_io *io) {
    const char *op = im->node->op_type;
    bool shift = strcmp(op, "BitShift") == 0, not_ = strcmp(op, "BitwiseNot") == 0;
    if (io->n_in != (not_ ? 1 : 2)) return node_error(im, TS_ERR_FORMAT, "needs %d input%s, has %d", not_ ? 1 : 2, not_ ? "" : "s", io->n_in);
    const char *kind = not_ ? "Not" : op + strlen("Bitwise");
    if (shift) {
        static const char *const dirs[] = {"LEFT", "RIGHT"};
        const Attr *a = attr(im, "direction");
        int d = a ? attr_choice(a, dirs, 2) : 2;
        if (d == 2) return node_error(im, TS_ERR_FORMAT, "attribute 'direction' must be \"LEFT\" or \"RIGHT\"");
        kind = d ? "ShiftRight" : "ShiftLeft";
    }
    int type = io->in[0]->c.dtype;
    ts_dtype dt;
    if (!type || ts_onnx_dtype_is_float(type) || type == TS_ONNX_BOOL || !onnx_array_dtype(type, &dt))
        return node_error(im, TS_ERR_UNSUPPORTED, "takes integer tensors whose type is known at import (a graph input's, a Cast's or a "
                          "constant's); input 0 '%s' is %s", io->in[0]->name ? io->in[0]->name : "", type ? ts_onnx_dtype_name(type) : "of a type not known here");
    ts_status st = TS_OK;
    ts_tensor *a = as_i32(im, io->in[0], &st), *b = not_ || !a ? NULL : as_i32(im, io->in[1], &st);
    if (!a || (!not_ && !b)) return st ? st : ts_graph_status(im->g);
    st = built(im, ts_bitwise(im->g, kind, a, b, dt), &io->out[0]);
    io->out[0].c.dtype = type;
    return st;
}

/* Optional input k as an f32 graph tensor, NULL where absent (or on an error, in *st). */
static ts_tensor *optional_f32(importer *im, node_io *io, int k, ts_status *st) {
    return io->n_in > k && io->in[k] ? as_f32(im, io->in[k], st) : NULL;
}

/* Whether the node names output k and a later node or the graph reads it. */
static bool output_wanted(const importer *im, const node_io *io, int k) {
    return io->n_out > k && im->node->output[k] && *im->node->output[k];
}

/* CausalConvWithState (opset 27): onnx_ops_extra.c. */
static ts_status op_causal_conv(importer *im, node_io *io) {
    static const char *const acts[] = {"none", "silu", "swish"};
    const Attr *a = attr(im, "activation");
    int act = a ? attr_choice(a, acts, 3) : 0;
    if (act == 3) return node_error(im, TS_ERR_FORMAT, "activation '%.*s' is not none, silu or swish", (int)a->s.len, (const char *)a->s.data);
    ts_status st = TS_OK;
    ts_tensor *x = as_f32(im, io->in[0], &st), *w = x ? as_f32(im, io->in[1], &st) : NULL;
    ts_tensor *bias = w ? optional_f32(im, io, 2, &st) : NULL, *past = w && !st ? optional_f32(im, io, 3, &st) : NULL, *out[2];
    if (!w || st) return st;
    if ((st = ts_onnx_causal_conv(im->g, x, w, bias, past, act != 0, out))) return fold_result(im, st);
    if ((st = built(im, out[0], &io->out[0]))) return st;
    if (!output_wanted(im, io, 1)) return TS_OK;
    if (!out[1]) return node_error(im, TS_ERR_SHAPE, "present_state of a kernel of size 1 has 0 steps; tensorscope's dimensions are positive: "
                                   "leave the output unnamed");
    return built(im, out[1], &io->out[1]);
}

/* LinearAttention (opset 27): onnx_ops_extra.c. */
static ts_status op_linear_attention(importer *im, node_io *io) {
    static const char *const rules[] = {"linear", "gated", "delta", "gated_delta"}; /* TS_LINATT_* */
    const Attr *r = attr(im, "update_rule");
    ts_onnx_linear_attention la = {.rule = r ? attr_choice(r, rules, 4) : TS_LINATT_GATED_DELTA, .scale = (float)attr_f(im, "scale", 0.0)};
    if (la.rule == 4)
        return node_error(im, TS_ERR_FORMAT, "update_rule '%.*s' is not linear, gated, delta or gated_delta", (int)r->s.len, (const char *)r->s.data);
    ts_status st;
    if (!attr(im, "q_num_heads") || !attr(im, "kv_num_heads"))
        return node_error(im, TS_ERR_FORMAT, "attributes 'q_num_heads' and 'kv_num_heads' are required");
    if ((st = attr_int(im, "q_num_heads", 0, 1, INT32_MAX, &la.q_heads)) || (st = attr_int(im, "kv_num_heads", 0, 1, INT32_MAX, &la.kv_heads))) return st;
    ts_tensor **in[6] = {&la.q, &la.k, &la.v, &la.past, &la.decay, &la.beta};
    for (int k = 0; k < 6 && !st; k++) *in[k] = k < 3 ? as_f32(im, io->in[k], &st) : optional_f32(im, io, k, &st);
    if (st) return st;
    ts_tensor *out[2];
    if ((st = ts_onnx_linear_attention_build(im->g, &la, out))) return fold_result(im, st);
    if ((st = built(im, out[0], &io->out[0]))) return st;
    return output_wanted(im, io, 1) ? built(im, out[1], &io->out[1]) : TS_OK;
}

/* GridSample (opset 16 on; opset 20's mode names linear and cubic, 16's
 * bilinear and bicubic): onnx_ops_extra.c. */
static ts_status op_grid_sample(importer *im, node_io *io) {
    static const char *const modes[] = {"linear", "nearest", "cubic", "bilinear", "bicubic"}; /* TS_GRID_*, then opset 16's names */
    static const char *const pads[] = {"zeros", "border", "reflection"};
    const Attr *ma = attr(im, "mode"), *pa = attr(im, "padding_mode");
    int mode = ma ? attr_choice(ma, modes, 5) : since(im, 20) ? 0 : 3, padding = pa ? attr_choice(pa, pads, 3) : 0;
    if (mode == 5 || (since(im, 20) ? mode > 2 : mode == 0 || mode == 2))
        return node_error(im, TS_ERR_FORMAT, "mode '%.*s' is not one of %s", ma ? (int)ma->s.len : 0, ma ? (const char *)ma->s.data : "",
                          since(im, 20) ? "linear, nearest, cubic" : "bilinear, nearest, bicubic (opset 20 names them linear and cubic)");
    if (padding == 3)
        return node_error(im, TS_ERR_FORMAT, "padding_mode '%.*s' is not zeros, border or reflection", (int)pa->s.len, (const char *)pa->s.data);
    bool align;
    ts_status st = attr_flag(im, "align_corners", &align);
    ts_tensor *x = st ? NULL : as_f32(im, io->in[0], &st), *grid = x ? as_f32(im, io->in[1], &st) : NULL, *y;
    if (!grid) return st;
    if ((st = ts_onnx_grid_sample(im->g, x, grid, mode == 3 ? TS_GRID_LINEAR : mode == 4 ? TS_GRID_CUBIC : mode, padding, align, &y)))
        return fold_result(im, st);
    return built(im, y, &io->out[0]);
}

/* AffineGrid (opset 20), size a constant (a bound input): onnx_ops_extra.c. */
static ts_status op_affine_grid(importer *im, node_io *io) {
    value *size = io->in[1];
    if (!is_const(size) || size->param || size->c.shape.ndim != 1 || (size->c.shape.d[0] != 4 && size->c.shape.d[0] != 5))
        return node_error(im, TS_ERR_UNSUPPORTED, "its size '%s' must be a constant of 4 or 5 values (N, C, H, W or N, C, D, H, W)%s",
                          size->name ? size->name : "", bind_hint(size));
    int64_t dims[5];
    for (int i = 0; i < (int)size->c.shape.d[0]; i++) dims[i] = (int64_t)size->c.v[i];
    bool align;
    ts_status st = attr_flag(im, "align_corners", &align);
    ts_tensor *theta = st ? NULL : as_f32(im, io->in[0], &st), *y;
    if (!theta) return st;
    if ((st = ts_onnx_affine_grid(im->g, theta, dims, (int)size->c.shape.d[0], align, &y))) return fold_result(im, st);
    return built(im, y, &io->out[0]);
}

/* An INTS attribute of n values into v, def where absent. */
static ts_status attr_ints_n(importer *im, const char *name, int n, int64_t def, int64_t *v) {
    const int64_t *a;
    int64_t na;
    attr_ints(im, name, &a, &na);
    if (a && na != n) return node_error(im, TS_ERR_FORMAT, "attribute '%s' has %lld values where %d are needed", name, (long long)na, n);
    for (int i = 0; i < n; i++) v[i] = a ? a[i] : def;
    return TS_OK;
}

/* Col2Im (opset 18) with 2 spatial dims, image_shape and block_shape
 * constants (bound inputs): onnx_ops_extra.c. */
static ts_status op_col2im(importer *im, node_io *io) {
    int64_t img[TS_MAX_DIMS], block[TS_MAX_DIMS], strides[2], pads[4], dil[2];
    int n_img, n_block;
    ts_status st;
    if ((st = const_ints(im, io->in[1], img, &n_img, "image_shape", 1, INT32_MAX, false)) ||
        (st = const_ints(im, io->in[2], block, &n_block, "block_shape", 1, INT32_MAX, false)))
        return st;
    if (n_img != 2 || n_block != 2)
        return node_error(im, TS_ERR_UNSUPPORTED, "a %d-D image is not available; Col2Im of 2-D images is", n_img);
    if ((st = attr_ints_n(im, "strides", 2, 1, strides)) || (st = attr_ints_n(im, "pads", 4, 0, pads)) || (st = attr_ints_n(im, "dilations", 2, 1, dil)))
        return st;
    ts_tensor *x = as_f32(im, io->in[0], &st), *y;
    if (!x) return st;
    if ((st = ts_onnx_col2im(im->g, x, img, block, strides, pads, dil, &y))) return fold_result(im, st);
    return built(im, y, &io->out[0]);
}

/* TensorScatter (opset 24): onnx_ops_extra.c. */
static ts_status op_tensor_scatter(importer *im, node_io *io) {
    static const char *const modes[] = {"linear", "circular"};
    const Attr *ma = attr(im, "mode");
    int mode = ma ? attr_choice(ma, modes, 2) : 0, axis;
    if (mode == 2) return node_error(im, TS_ERR_FORMAT, "mode '%.*s' is not linear or circular", (int)ma->s.len, (const char *)ma->s.data);
    ts_status st = TS_OK;
    ts_tensor *past = as_f32(im, io->in[0], &st), *update = past ? as_f32(im, io->in[1], &st) : NULL;
    ts_tensor *index = update && io->n_in > 2 && io->in[2] ? as_tensor(im, io->in[2], &st) : NULL, *y;
    if (!update || st || (st = attr_axis(im, "axis", -2, past->shape.ndim, false, &axis))) return st;
    if ((st = ts_onnx_tensor_scatter(im->g, past, update, index, axis, mode == 1, &y))) return fold_result(im, st);
    return built(im, y, &io->out[0]);
}

/* BitCast (opset 26) between integer (and bool) types of one width: the
 * bits read in the target type, a Bitwise Or of the value with itself
 * wrapped to it (int8 -1 is uint8 255). Between floats and integers the
 * bits are not those of a value held in f32 or i32: refused. */
static ts_status op_bitcast(importer *im, node_io *io) {
    int to, from = io->in[0]->c.dtype;
    ts_status st = attr_int32(im, "to", 0, 0, INT32_MAX, &to);
    if (st) return st;
    if (!attr(im, "to")) return node_error(im, TS_ERR_FORMAT, "attribute 'to' is required");
    ts_dtype dt_from, dt_to;
    bool int_from = from && !ts_onnx_dtype_is_float(from) && onnx_array_dtype(from, &dt_from);
    bool int_to = !ts_onnx_dtype_is_float(to) && to != TS_ONNX_BOOL && onnx_array_dtype(to, &dt_to);
    if (!int_from || !int_to)
        return node_error(im, TS_ERR_UNSUPPORTED, "a bit cast from %s to %s is not available; between integer and bool types of one width it is "
                          "(float bits are not those of the values tensorscope holds)",
                          from ? ts_onnx_dtype_name(from) : io->in[0]->t && io->in[0]->t->dtype == TS_F32 ? "a float type" : "a type not known here",
                          ts_onnx_dtype_name(to));
    if ((dt_from == TS_BOOL ? 1 : ts_dtype_size(dt_from)) != ts_dtype_size(dt_to))
        return node_error(im, TS_ERR_FORMAT, "%s and %s differ in width; BitCast keeps the bits", ts_onnx_dtype_name(from), ts_onnx_dtype_name(to));
    ts_tensor *a = as_i32(im, io->in[0], &st);
    if (!a) return st;
    st = built(im, ts_bitwise(im->g, "Or", a, a, dt_to), &io->out[0]);
    io->out[0].c.dtype = to;
    return st;
}

/* Det (opset 11): onnx_ops_extra.c. */
static ts_status op_det(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = as_f32(im, io->in[0], &st), *y;
    if (!x) return st;
    if ((st = ts_onnx_det(im->g, x, &y))) return fold_result(im, st);
    return built(im, y, &io->out[0]);
}

/* Upsample (opsets 7 to 9; Resize replaces it), mode nearest with whole
 * scales (the attribute, from opset 9 a constant input): along each
 * scaled axis a Gather of every position `scale` times (numpy's repeat,
 * ONNX's reference). */
static ts_status op_upsample(importer *im, node_io *io) {
    static const char *const modes[] = {"nearest", "linear"};
    const Attr *ma = attr(im, "mode");
    if (ma && attr_choice(ma, modes, 2) != 0)
        return node_error(im, TS_ERR_UNSUPPORTED, "mode '%.*s' is not available; nearest is (or Resize, which replaces Upsample from opset 10)",
                          (int)ma->s.len, (const char *)ma->s.data);
    ts_status st = TS_OK;
    ts_tensor *y = as_tensor(im, io->in[0], &st);
    if (!y) return st;
    const Attr *sa = attr(im, "scales");
    bool from_input = since(im, 9);
    value *sv = from_input && io->n_in > 1 ? io->in[1] : NULL;
    if (sv && sv->param && (st = decoded(im, sv))) return st; /* an initializer's scales: settings, not trained */
    int n = from_input ? (sv && is_const(sv) && sv->c.shape.ndim == 1 ? (int)sv->c.shape.d[0] : -1) : sa ? (int)sa->n_floats : -1;
    if (n != y->shape.ndim)
        return node_error(im, TS_ERR_UNSUPPORTED, "its scales must be %s of %d values, one per axis%s", from_input ? "a constant input" : "an attribute",
                          y->shape.ndim, bind_hint(sv));
    for (int axis = 0; axis < n && y; axis++) {
        double s = from_input ? sv->c.v[axis] : sa->floats[axis];
        if (!(s >= 1.0 && s <= 1024.0 && s == floor(s)))
            return node_error(im, TS_ERR_UNSUPPORTED, "scale %g of axis %d is not available; whole scales from 1 to 1024 are", s, axis);
        if (s == 1.0) continue;
        int64_t d = y->shape.d[axis], m = d * (int64_t)s;
        int32_t *idx = ts_malloc((size_t)m * sizeof *idx);
        char *name = idx ? ts_graph_op_output_name(im->g, "Positions") : NULL;
        for (int64_t i = 0; idx && i < m; i++) idx[i] = (int32_t)(i / (int64_t)s);
        ts_tensor *at = name ? ts_constant(im->g, name, &(ts_array){.dtype = TS_I32, .ndim = 1, .shape = {m}, .data = idx}) : NULL;
        ts_free(name);
        ts_free(idx);
        if (!at) return ts_graph_status(im->g) ? ts_graph_status(im->g) : node_error(im, TS_ERR_OUT_OF_MEMORY, "out of memory");
        y = y->dtype == TS_I32 ? ts_unary(im->g, "CastIndex", ts_gather(im->g, ts_unary(im->g, "CastFloat", y, 0, 0), at, axis), (float)INT32_MIN,
                                          2147483520.0f)
                               : ts_gather(im->g, y, at, axis);
    }
    return built(im, y, &io->out[0]);
}

static const struct {
    const char *op_type;
    int required;  /* inputs that must be present */
    int oldest;    /* opset */
    import_fn fn;
} op_table[] = {
    {"Abs", 1, 6, op_unary},
    {"Acos", 1, 7, op_unary},
    {"Acosh", 1, 9, op_unary},
    {"Add", 2, 7, op_binary},
    {"AffineGrid", 2, 20, op_affine_grid},
    {"And", 2, 7, op_binary},
    {"ArgMax", 1, 1, op_arg_extreme},
    {"ArgMin", 1, 1, op_arg_extreme},
    {"Asin", 1, 7, op_unary},
    {"Asinh", 1, 9, op_unary},
    {"Atan", 1, 7, op_unary},
    {"Atanh", 1, 9, op_unary},
    {"Attention", 3, 23, op_attention},
    {"AveragePool", 1, 10, op_pool},
    {"BatchNormalization", 5, 9, op_batch_norm},
    {"BitCast", 1, 26, op_bitcast},
    {"BitShift", 2, 11, op_bitwise},
    {"BitwiseAnd", 2, 18, op_bitwise},
    {"BitwiseNot", 1, 18, op_bitwise},
    {"BitwiseOr", 2, 18, op_bitwise},
    {"BitwiseXor", 2, 18, op_bitwise},
    {"Cast", 1, 6, op_cast},
    {"CausalConvWithState", 2, 27, op_causal_conv},
    {"CastLike", 2, 13, op_cast_like},
    {"Ceil", 1, 6, op_unary},
    {"Celu", 1, 12, op_composed_unary},
    {"CenterCropPad", 2, 18, op_center_crop_pad},
    {"Clip", 1, 6, op_clip},
    {"Col2Im", 3, 18, op_col2im},
    {"Compress", 2, 9, op_compress},
    {"Concat", 1, 4, op_concat},
    {"Constant", 0, 1, op_constant},
    {"ConstantOfShape", 1, 9, op_fold},
    {"Conv", 2, 1, op_conv},
    {"ConvTranspose", 2, 1, op_conv_transpose},
    {"Cos", 1, 7, op_unary},
    {"Cosh", 1, 9, op_unary},
    {"CumProd", 2, 26, op_cumprod},
    {"CumSum", 2, 11, op_cumsum},
    {"DepthToSpace", 1, 1, op_depth_space},
    {"Det", 1, 11, op_det},
    {"Div", 2, 7, op_binary},
    {"Dropout", 1, 10, op_dropout},
    {"Elu", 1, 6, op_unary},
    {"Equal", 2, 7, op_binary},
    {"Einsum", 1, 12, op_einsum},
    {"Erf", 1, 9, op_unary},
    {"Exp", 1, 6, op_unary},
    {"EyeLike", 1, 9, op_eye_like},
    {"Expand", 2, 8, op_expand},
    {"Flatten", 1, 1, op_flatten},
    {"Floor", 1, 6, op_unary},
    {"Gather", 2, 1, op_gather},
    {"GatherElements", 2, 11, op_gather},
    {"GatherND", 2, 11, op_gather_nd},
    {"Gelu", 1, 13, op_unary},
    {"Gemm", 2, 7, op_gemm},
    {"GlobalAveragePool", 1, 1, op_global_avg_pool},
    {"GlobalMaxPool", 1, 1, op_global_max_pool},
    {"Greater", 2, 7, op_binary},
    {"GreaterOrEqual", 2, 12, op_binary},
    {"GridSample", 2, 16, op_grid_sample},
    {"GroupNormalization", 3, 18, op_group_norm},
    {"GRU", 3, 7, op_rnn},
    {"HardSigmoid", 1, 6, op_unary},
    {"Hardmax", 1, 1, op_hardmax},
    {"HardSwish", 1, 13, op_unary},
    {"If", 1, 1, op_if},
    {"Identity", 1, 1, op_identity},
    {"InstanceNormalization", 3, 6, op_instance_norm},
    {"IsInf", 1, 10, op_unary},
    {"IsNaN", 1, 9, op_unary},
    {"LayerNormalization", 2, 13, op_layer_norm},
    {"LeakyRelu", 1, 6, op_unary},
    {"Less", 2, 7, op_binary},
    {"LessOrEqual", 2, 12, op_binary},
    {"Log", 1, 6, op_unary},
    {"LogSoftmax", 1, 1, op_softmax},
    {"LpNormalization", 1, 1, op_lp_norm},
    {"LinearAttention", 3, 27, op_linear_attention},
    {"LRN", 1, 1, op_lrn},
    {"LpPool", 1, 11, op_lp_pool},
    {"LSTM", 3, 7, op_rnn},
    {"Loop", 0, 1, op_loop},
    {"MatMul", 2, 1, op_matmul},
    {"Max", 1, 6, op_variadic},
    {"MaxPool", 1, 10, op_pool},
    {"MaxUnpool", 2, 9, op_max_unpool},
    {"Mean", 1, 6, op_variadic},
    {"MeanVarianceNormalization", 1, 9, op_mvn},
    {"Min", 1, 6, op_variadic},
    {"Mish", 1, 18, op_composed_unary},
    {"Mod", 2, 10, op_binary},
    {"Mul", 2, 7, op_binary},
    {"Neg", 1, 6, op_unary},
    {"NegativeLogLikelihoodLoss", 2, 12, op_loss},
    {"Not", 1, 1, op_unary},
    {"OneHot", 3, 9, op_one_hot},
    {"Or", 2, 7, op_binary},
    {"Pad", 1, 11, op_pad},
    {"Pow", 2, 7, op_binary},
    {"PRelu", 2, 7, op_prelu},
    {"Range", 3, 11, op_range},
    {"Reciprocal", 1, 6, op_unary},
    {"ReduceL1", 1, 1, op_reduce},
    {"ReduceL2", 1, 1, op_reduce},
    {"ReduceLogSum", 1, 1, op_reduce},
    {"ReduceLogSumExp", 1, 1, op_reduce},
    {"ReduceMax", 1, 1, op_reduce},
    {"ReduceMean", 1, 1, op_reduce},
    {"ReduceMin", 1, 1, op_reduce},
    {"ReduceProd", 1, 1, op_reduce},
    {"ReduceSum", 1, 1, op_reduce},
    {"ReduceSumSquare", 1, 1, op_reduce},
    {"Relu", 1, 6, op_unary},
    {"Reshape", 2, 5, op_reshape},
    {"Resize", 1, 11, op_resize},
    {"RNN", 3, 7, op_rnn},
    {"RMSNormalization", 2, 23, op_rms_norm},
    {"RotaryEmbedding", 3, 23, op_rotary},
    {"Round", 1, 11, op_unary},
    {"Scatter", 3, 9, op_scatter},
    {"ScatterElements", 3, 11, op_scatter},
    {"ScatterND", 3, 11, op_scatter},
    {"Scan", 0, 8, op_scan},
    {"Selu", 1, 6, op_unary},
    {"Shape", 1, 1, op_shape},
    {"Shrink", 1, 9, op_composed_unary},
    {"Sigmoid", 1, 6, op_unary},
    {"Sign", 1, 9, op_composed_unary},
    {"Sin", 1, 7, op_unary},
    {"Sinh", 1, 9, op_unary},
    {"Size", 1, 1, op_size},
    {"Slice", 3, 10, op_slice},
    {"Softmax", 1, 1, op_softmax},
    {"SoftmaxCrossEntropyLoss", 2, 12, op_loss},
    {"Softplus", 1, 1, op_unary},
    {"Softsign", 1, 1, op_composed_unary},
    {"SpaceToDepth", 1, 1, op_depth_space},
    {"Split", 1, 13, op_split},
    {"Sqrt", 1, 6, op_unary},
    {"Squeeze", 1, 1, op_squeeze_unsqueeze},
    {"Sub", 2, 7, op_binary},
    {"Sum", 1, 6, op_variadic},
    {"Swish", 1, 24, op_swish},
    {"SwiGLU", 2, 28, op_swish},
    {"Tan", 1, 7, op_unary},
    {"Tanh", 1, 6, op_unary},
    {"TensorScatter", 2, 24, op_tensor_scatter},
    {"ThresholdedRelu", 1, 10, op_composed_unary},
    {"Tile", 2, 6, op_tile},
    {"TopK", 1, 1, op_topk},
    {"Transpose", 1, 1, op_transpose},
    {"Trilu", 1, 14, op_trilu},
    {"Unsqueeze", 1, 1, op_squeeze_unsqueeze},
    {"Upsample", 1, 7, op_upsample},
    {"Where", 3, 9, op_where},
    {"Xor", 2, 7, op_binary},
    {"ai.tensorscope.StopGradient", 1, 1, op_stop_gradient}, /* tensorscope's own domain: key "<domain>.<op type>" */
};

static const char *supported_list(void) {
    static char buf[1024];
    size_t used = 0;
    for (size_t i = 0; i < TS_ARRAY_LEN(op_table) && used < sizeof buf; i++)
        used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%s", i ? ", " : "", op_table[i].op_type);
    return buf;
}

static import_fn find_op(const char *op_type, int *required, int *oldest) {
    for (size_t i = 0; i < TS_ARRAY_LEN(op_table); i++)
        if (strcmp(op_table[i].op_type, op_type) == 0) {
            *required = op_table[i].required;
            *oldest = op_table[i].oldest;
            return op_table[i].fn;
        }
    return NULL;
}

/* ------------------------------------------------------------------ scope */

/* "/blocks.0/attn/MatMul" -> "blocks.0.attn" (the components before the
 * last, joined with dots); "" for a name without a scope. PyTorch names a
 * Sequential's child after its full path ("/layer4/layer4.0/conv1/Conv"):
 * a component that the next one repeats as its prefix is dropped, so the
 * scope is the module path of the parameters ("layer4.0.conv1"). */
static void scope_of(const char *name, char *buf, size_t n) {
    buf[0] = '\0';
    if (!name) return;
    const char *last = strrchr(name, '/');
    if (!last) return;
    size_t used = 0;
    for (const char *p = name; p < last && used + 1 < n;) {
        if (*p == '/') {
            p++;
            continue;
        }
        const char *end = p;
        while (end < last && *end != '/') end++;
        size_t len = (size_t)(end - p);
        const char *next = end < last ? end + 1 : NULL;
        /* "layer4" followed by "layer4.0": keep only the second */
        if (next && next < last && strncmp(next, p, len) == 0 && next[len] == '.') {
            p = end;
            continue;
        }
        if (used && used + 1 < n) buf[used++] = '.';
        for (; p < end && used + 1 < n; p++) {
            char c = *p;
            buf[used++] = (c == ':' || (unsigned char)c < 0x20 || c == '"' || c == '\\') ? '_' : c;
        }
    }
    while (used && buf[used - 1] == '.') used--;
    buf[used] = '\0';
}

/* The ops and attributes read here that exist in some of the opsets
 * MIN_OPSET..MAX_OPSET only (onnx.defs' schemas): one outside its versions is not
 * part of the op at the model's opset and is refused, never read (nor
 * ignored). A row without an attribute name is the op itself. */
static const struct {
    const char *op_type, *name;
    int from, until; /* opsets; until 0: still there */
    const char *instead;
} attr_versions[] = {
    {"LayerNormalization", NULL, 17, 0, NULL},
    {"Gelu", NULL, 20, 0, NULL},
    {"AveragePool", "dilations", 19, 0, NULL},
    {"BatchNormalization", "training_mode", 14, 0, NULL},
    {"Clip", "min", 1, 10, "from opset 11 on, the bounds are inputs 1 and 2"},
    {"Clip", "max", 1, 10, "from opset 11 on, the bounds are inputs 1 and 2"},
    {"Cast", "saturate", 19, 0, NULL},
    {"Cast", "round_mode", 24, 0, NULL},
    {"CastLike", "saturate", 19, 0, NULL},
    {"CastLike", "round_mode", 24, 0, NULL},
    {"Dropout", "ratio", 1, 11, "the ratio is input 1"},
    {"GRU", "layout", 14, 0, NULL},
    {"LSTM", "layout", 14, 0, NULL},
    {"RNN", "layout", 14, 0, NULL},
    {"Pad", "pads", 1, 10, "the pads are input 1"},
    {"Range", "stash_type", 27, 0, NULL},
    {"ReduceL1", "axes", 1, 17, "from opset 18 on, the axes are input 1"},
    {"ReduceL1", "noop_with_empty_axes", 18, 0, NULL},
    {"ReduceL2", "axes", 1, 17, "from opset 18 on, the axes are input 1"},
    {"ReduceL2", "noop_with_empty_axes", 18, 0, NULL},
    {"ReduceLogSum", "axes", 1, 17, "from opset 18 on, the axes are input 1"},
    {"ReduceLogSum", "noop_with_empty_axes", 18, 0, NULL},
    {"ReduceLogSumExp", "axes", 1, 17, "from opset 18 on, the axes are input 1"},
    {"ReduceLogSumExp", "noop_with_empty_axes", 18, 0, NULL},
    {"ReduceMax", "axes", 1, 17, "from opset 18 on, the axes are input 1"},
    {"ReduceMax", "noop_with_empty_axes", 18, 0, NULL},
    {"ReduceMean", "axes", 1, 17, "from opset 18 on, the axes are input 1"},
    {"ReduceMean", "noop_with_empty_axes", 18, 0, NULL},
    {"ReduceMin", "axes", 1, 17, "from opset 18 on, the axes are input 1"},
    {"ReduceMin", "noop_with_empty_axes", 18, 0, NULL},
    {"ReduceSum", "axes", 1, 12, "from opset 13 on, the axes are input 1"},
    {"ReduceSum", "noop_with_empty_axes", 13, 0, NULL},
    {"ReduceProd", "axes", 1, 17, "from opset 18 on, the axes are input 1"},
    {"ReduceProd", "noop_with_empty_axes", 18, 0, NULL},
    {"ReduceSumSquare", "axes", 1, 17, "from opset 18 on, the axes are input 1"},
    {"ReduceSumSquare", "noop_with_empty_axes", 18, 0, NULL},
    {"Reshape", "allowzero", 14, 0, NULL},
    {"Upsample", NULL, 7, 9, "Resize replaces it"},
    {"Shape", "start", 15, 0, NULL},
    {"Shape", "end", 15, 0, NULL},
    {"Split", "split", 1, 12, "the sizes are input 1"},
    {"Split", "num_outputs", 18, 0, NULL},
    {"Squeeze", "axes", 1, 12, "the axes are input 1"},
    {"Unsqueeze", "axes", 1, 12, "the axes are input 1"},
};

static ts_status check_attr_versions(const importer *im) {
    for (size_t i = 0; i < TS_ARRAY_LEN(attr_versions); i++) {
        int from = attr_versions[i].from, until = attr_versions[i].until;
        const char *name = attr_versions[i].name;
        if (strcmp(attr_versions[i].op_type, im->node->op_type) != 0 || (name && !attr(im, name)) ||
            (since(im, from) && (!until || !since(im, until + 1))))
            continue;
        if (!name && until && since(im, until + 1))
            return node_error(im, TS_ERR_FORMAT, "%s is part of the default ONNX domain up to opset %d only (%s); the model's opset has no "
                              "such op", im->node->op_type, until, attr_versions[i].instead);
        if (!name)
            return node_error(im, TS_ERR_FORMAT, "%s is part of the default ONNX domain from opset %d on; the model's opset has no such "
                              "op (raise it to %d or more)", im->node->op_type, from, from);
        if (until)
            return node_error(im, TS_ERR_FORMAT, "attribute '%s' is part of %s up to opset %d only (%s); re-export, or fix the exporter",
                              attr_versions[i].name, im->node->op_type, until, attr_versions[i].instead);
        return node_error(im, TS_ERR_FORMAT, "attribute '%s' is part of %s from opset %d on; the model's opset reads an older version "
                          "without it (raise the model's opset, or drop the attribute)", attr_versions[i].name, im->node->op_type, from);
    }
    return TS_OK;
}

/* ----------------------------------------------------------------- import */

/* A folded constant is freed after the last node that reads it: counts
 * down the node's inputs' readers and frees what no node reads any more. */
static void release_values(importer *im, const Node *n) {
    for (size_t i = 0; i < n->n_input + n->n_output; i++) {
        bool in = i < n->n_input;
        const char *name = in ? n->input[i] : n->output[i - n->n_input];
        int left = name && *name ? ts_strmap_get(&im->uses, name) : -1;
        if (in && left > 0) ts_strmap_put(&im->uses, name, --left);
        value *v = left == 0 ? lookup(im, name) : NULL;
        if (v && !v->t && !v->param) ts_const_free(&v->c);
    }
}

/* A node that would be folded (every input a constant that is not a
 * parameter) and whose outputs nothing reads: computing it would only cost
 * time and memory (ConstantOfShape of a large shape), so it is skipped. */
static bool folds_unread(importer *im, const Node *n) {
    for (size_t i = 0; i < n->n_input; i++) {
        if (!n->input[i] || !*n->input[i]) continue;
        const value *v = lookup(im, n->input[i]);
        if (!v || v->t || v->param) return false;
    }
    for (size_t i = 0; i < n->n_output; i++)
        if (n->output[i] && *n->output[i] && ts_strmap_get(&im->uses, n->output[i]) != 0) return false;
    return true;
}

/* ------------------------------------------------ chains imported as one op */

static ts_onnx_group_norm_chain *chain_of(importer *im, int index) {
    for (size_t c = 0; c < im->n_chain; c++)
        for (int k = 0; k < im->chain[c].n_node && !im->chain[c].off; k++)
            if (im->chain[c].node[k] == (size_t)index) return &im->chain[c];
    return NULL;
}

/* Whether the constant v holds exactly the ints want[0..n) (0 and -1 of
 * a Reshape where `lenient`: copy that dim, infer this one). */
static bool const_shape_is(const value *v, const int64_t *want, int n, bool lenient) {
    if (!v || !is_const(v) || v->param || !v->c.v || v->c.shape.ndim != 1 || v->c.shape.d[0] != n) return false;
    for (int i = 0; i < n; i++)
        if (v->c.v[i] != (double)want[i] && !(lenient && (v->c.v[i] == -1 || (v->c.v[i] == 0 && i < 2)))) return false;
    return true;
}

/* Whether a per-channel operand is C values: [C], or [C,1,...] one dim
 * fewer than x (against [N,C,...]); or one constant value ([1], the
 * exporter's unit scale and zero bias of GroupNorm(affine=False)) */
static bool per_channel_of(const value *v, int64_t C, int ndim) {
    const ts_shape *s = v ? shape_of(v) : NULL;
    if (s && ts_shape_numel(s) == 1 && s->ndim <= 1 && is_const(v) && !v->param && v->c.v) return true;
    if (!s || ts_shape_numel(s) != C || s->ndim < 1 || s->d[0] != C || (s->ndim != 1 && s->ndim != ndim - 1)) return false;
    return true;
}

/* A per-channel operand (per_channel_of) as [C]. */
static ts_tensor *channels_of(importer *im, value *v, int64_t C, const char *what, ts_status *st) {
    if (is_const(v) && !v->param && v->c.v) { /* a constant's C values, or its one value C times */
        ts_tensor *t = spread_constant(im, what, C, v, ts_shape_numel(shape_of(v)) == 1 ? C : 1, 0.0f);
        if (!t) *st = ts_graph_status(im->g) ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
        return t;
    }
    ts_tensor *t = as_f32(im, v, st);
    if (t && t->shape.ndim != 1) t = ts_reshape(im->g, t, 1, &C);
    if (!t && !*st) *st = ts_graph_status(im->g);
    return t;
}

/* Whether the chain's values make it nn.GroupNorm: x [N,C,...] reshaped
 * to [N,G,L], a unit scale and zero bias of G, the Reshape back to x's
 * shape, and C weights and biases. */
static bool chain_fits(importer *im, const ts_onnx_group_norm_chain *c) {
    const value *x = lookup(im, c->x), *s = lookup(im, c->scale), *b = lookup(im, c->bias);
    if (!x || !s || !b || !const_filled(s, 1.0) || !const_filled(b, 0.0)) return false;
    const ts_shape *xs = shape_of(x);
    int64_t G = shape_of(s)->ndim == 1 ? shape_of(s)->d[0] : 0;
    if (xs->ndim < 3 || G < 1 || xs->d[1] % G || (x->t && x->t->dtype != TS_F32)) return false;
    int64_t L = ts_shape_numel(xs) / (xs->d[0] * G);
    if (!const_shape_is(lookup(im, c->shape_in), (int64_t[]){xs->d[0], G, L}, 3, true) ||
        !const_shape_is(lookup(im, c->shape_out), xs->d, xs->ndim, false))
        return false;
    return per_channel_of(lookup(im, c->weight), xs->d[1], xs->ndim) && per_channel_of(lookup(im, c->shift), xs->d[1], xs->ndim);
}

/* A chain that is not nn.GroupNorm: its nodes but the last, one by one. */
static ts_status chain_one_by_one(importer *im, ts_onnx_group_norm_chain *c) {
    c->off = true;
    ts_status st = TS_OK;
    for (size_t j = 0; j < im->chain_graph->n_node && !st; j++) /* in the file's order */
        for (int k = 0; k < c->n_node && !st; k++)
            if (j == c->node[k] && j != c->last) st = import_node(im, im->chain_graph->node[j], (int)j);
    return st;
}

static void chain_inputs(importer *im, const ts_onnx_group_norm_chain *c, node_io *io) {
    const char *names[5] = {c->x, c->scale, c->bias, c->weight, c->shift};
    for (int i = 0; i < 5; i++) io->in[i] = lookup(im, names[i]);
    io->n_in = 5;
}

/* nn.GroupNorm's chain (onnx_fuse.h) as one group-norm op: x, the G of
 * the InstanceNormalization's scale, and the weight and bias as [C]. */
static ts_status op_group_norm_chain(importer *im, node_io *io) {
    const ts_onnx_group_norm_chain *c = chain_of(im, im->node_index);
    ts_status st = TS_OK;
    ts_tensor *x = as_tensor(im, io->in[0], &st);
    int64_t C = x ? x->shape.d[1] : 0;
    ts_tensor *w = x ? channels_of(im, io->in[3], C, "ScalePerChannel", &st) : NULL, *b = w ? channels_of(im, io->in[4], C, "BiasPerChannel", &st) : NULL;
    if (!b) return st;
    return built(im, ts_group_norm(im->g, x, w, b, (int)shape_of(io->in[1])->d[0], c->eps), &io->out[0]);
}

static ts_status import_node(importer *im, const Node *n, int index) {
    im->node = n;
    im->node_index = index;
    if (!n->op_type || !*n->op_type) return node_error(im, TS_ERR_FORMAT, "the node has no op type (corrupt file?)");
    bool own = n->domain && strcmp(n->domain, TS_ONNX_DOMAIN) == 0; /* the ops the Python wrapper marks (a detach) */
    if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx") != 0 && !own)
        return node_error(im, TS_ERR_UNSUPPORTED, "op type %s of domain '%s' is not supported: tensorscope imports the default ONNX "
                          "domain (opsets %d to %d) and its own, " TS_ONNX_DOMAIN ": %s", n->op_type, n->domain, MIN_OPSET, MAX_OPSET,
                          supported_list());
    char key[160];
    snprintf(key, sizeof key, "%s%s%s", own ? TS_ONNX_DOMAIN : "", own ? "." : "", n->op_type);
    int required = 0, oldest = MIN_OPSET;
    import_fn fn = find_op(key, &required, &oldest);
    if (!fn)
        return node_error(im, TS_ERR_UNSUPPORTED, "op type %s is not supported yet; tensorscope imports: %s", n->op_type, supported_list());
    if (!since(im, oldest))
        return node_error(im, TS_ERR_UNSUPPORTED, "opset %lld has an older version of %s than tensorscope reads (that of opset %d and "
                          "later); re-export with a newer opset, e.g. torch.onnx.export(..., opset_version=17)",
                          (long long)im->opset, n->op_type, oldest);
    ts_status vst = check_attr_versions(im);
    if (vst) return vst;
    if (im->depth == 0) im->top_index = index;
    ts_onnx_group_norm_chain *chain = im->depth == 0 ? chain_of(im, index) : NULL;
    if (chain && (size_t)index != chain->last) return TS_OK; /* imported with the chain's last node */
    if (chain && !chain_fits(im, chain)) {
        ts_status cst = chain_one_by_one(im, chain);
        if (cst) return cst;
        im->node = n, im->node_index = index;
        chain = NULL;
    }
    if (chain) fn = op_group_norm_chain, required = 0;
    if (im->depth == 0 && folds_unread(im, n)) {
        ts_logf(TS_LOG_DEBUG, "%s: node %d '%s' (%s) computes constants nothing reads: skipped", im->path, index,
                n->name ? n->name : "", n->op_type);
        release_values(im, n);
        return TS_OK;
    }
    if (n->n_input > MAX_NODE_IO || n->n_output > MAX_NODE_IO || n->n_output == 0)
        return node_error(im, TS_ERR_FORMAT, "%zu inputs and %zu outputs (1..%d outputs, at most %d inputs are read)", n->n_input,
                          n->n_output, MAX_NODE_IO, MAX_NODE_IO);
    node_io io;
    memset(&io, 0, sizeof io);
    io.n_in = (int)n->n_input;
    io.n_out = (int)n->n_output;
    if (chain) chain_inputs(im, chain, &io);
    for (size_t i = 0; !chain && i < n->n_input; i++) {
        if (!n->input[i] || !*n->input[i]) continue; /* an omitted optional input */
        io.in[i] = lookup(im, n->input[i]);
        if (!io.in[i])
            return node_error(im, TS_ERR_FORMAT, "input '%s' is defined by no earlier node, initializer or graph input (the file is "
                              "corrupt or its nodes are not in topological order)", n->input[i]);
    }
    for (size_t f = 0; f < im->n_fix && im->depth == 0; f++) { /* a parameter's own copy in place of a merged one, a dropped bias */
        const ts_torch_fix *x = &im->fix[f];
        if ((x->kind != TS_TORCH_COPY && x->kind != TS_TORCH_ZERO_BIAS) || x->node != (size_t)index || x->input >= MAX_NODE_IO) continue;
        value *v = lookup(im, x->name);
        if (!v) continue;
        io.in[x->input] = v;
        if ((int)x->input >= io.n_in) io.n_in = (int)x->input + 1;
    }
    for (int i = 0; i < required; i++)
        if (i >= io.n_in || !io.in[i]) return node_error(im, TS_ERR_FORMAT, "input %d is required but missing", i);
    char scope[512]; /* the module a dynamo export's node came from, or the scope of its name (TorchScript's /layer1/0/conv1/Conv) */
    if (!ts_torch_scope(n, scope, sizeof scope)) scope_of(n->name, scope, sizeof scope);
    ts_graph_at(im->g, im->file, im->top_index); /* a body's node: at the node that holds the body */
    im->g->origin = n->name && *n->name ? ts_graph_keep_string(im->g, n->name) : NULL;
    size_t first_new = ts_graph_tensor_count(im->g);
    ts_status st = scope[0] ? ts_scope_push(im->g, scope) : TS_OK;
    if (st) return node_error(im, st, "%s", ts_last_error());
    st = fn(im, &io);
    if (scope[0]) ts_scope_pop(im->g);
    if (st) {
        for (int i = 0; i < io.n_out; i++) ts_const_free(&io.out[i].c);
        if (strncmp(ts_last_error(), im->path, strlen(im->path)) == 0) return st;
        char msg[900]; /* a builder's error: say which node of the file */
        snprintf(msg, sizeof msg, "%s", ts_last_error());
        return node_error(im, st, "%s", msg);
    }
    /* The node's result is named after its op type when the builder named
     * it after another op (Gemm = MatMul + Add). */
    for (int i = 0; i < io.n_out && !st; i++) {
        value *o = &io.out[i];
        if (o->t && !chain && (size_t)o->t->id >= first_new && !ts_op_holds_value(o->t->op) && strcmp(ts_op_get(o->t->op)->name, n->op_type) != 0) {
            if (scope[0]) ts_scope_push(im->g, scope);
            char *name = ts_graph_op_output_name(im->g, n->op_type);
            if (scope[0]) ts_scope_pop(im->g);
            st = name ? ts_tensor_set_name(o->t, name) : TS_ERR_OUT_OF_MEMORY;
            ts_free(name);
        }
        if (!st && o->t && n->output[i] && *n->output[i]) st = ts_graph_add_alias(im->g, n->output[i], o->t);
        /* an output the op does not compute (Dropout's mask, ...) stays
         * undefined: a node that reads it fails with a clear message */
        if (!st && n->output[i] && *n->output[i] && (o->t || o->c.v)) st = define(im, n->output[i], o);
        else ts_const_free(&o->c);
    }
    for (int i = 0; i < io.n_out && !st; i++) {
        const ts_tensor *t = io.out[i].t;
        if (!t) continue;
        bool usable = ts_shape_numel(&t->shape) <= TS_MAX_NUMEL;
        for (int d = 0; d < t->shape.ndim; d++) usable = usable && t->shape.d[d] >= 0;
        char buf[96];
        if (!usable)
            return node_error(im, TS_ERR_SHAPE, "its output %d would have the shape %s, more than 2^34 elements (check its attributes: "
                              "pads, strides, kernel)", i, ts_shape_str(&t->shape, buf, sizeof buf));
    }
    if (!st && ts_log_enabled(TS_LOG_TRACE)) { /* what each node became (TS_LOG_VMODULE=onnx=5) */
        const value *o = &io.out[0];
        char buf[96];
        if (o->t) ts_logf(TS_LOG_TRACE, "%s: node %d '%s' (%s) -> '%s' %s %s", im->path, index, n->name ? n->name : "", n->op_type,
                          o->t->name, ts_dtype_name(o->t->dtype), ts_shape_str(&o->t->shape, buf, sizeof buf));
        else ts_logf(TS_LOG_TRACE, "%s: node %d '%s' (%s) -> a constant, folded at import", im->path, index, n->name ? n->name : "",
                     n->op_type);
    }
    if (!st && im->depth == 0) release_values(im, n); /* a body's values live until the import's end */
    return st;
}

/* The ts_dtype of ONNX's float, double, float16, bfloat16, integer and
 * bool types; false for the others (float8, int4, string, ...). */
static bool onnx_array_dtype(int elem, ts_dtype *out) {
    static const struct { int onnx; ts_dtype dt; } map[] = {
        {TS_ONNX_FLOAT, TS_F32},   {TS_ONNX_DOUBLE, TS_F64}, {TS_ONNX_INT32, TS_I32},  {TS_ONNX_INT64, TS_I64},
        {TS_ONNX_UINT8, TS_U8},    {TS_ONNX_BOOL, TS_BOOL},  {TS_ONNX_INT8, TS_I8},    {TS_ONNX_INT16, TS_I16},
        {TS_ONNX_UINT16, TS_U16},  {TS_ONNX_UINT32, TS_U32}, {TS_ONNX_UINT64, TS_U64}, {TS_ONNX_FLOAT16, TS_F16},
        {TS_ONNX_BFLOAT16, TS_BF16},
    };
    for (size_t i = 0; i < TS_ARRAY_LEN(map); i++)
        if (map[i].onnx == elem) {
            *out = map[i].dt;
            return true;
        }
    return false;
}

/* An input bound to a value at import: that constant, of the file's type
 * and, where the file gives them, its sizes. */
static ts_status bind_input(importer *im, const ValueInfo *vi, int elem, const ts_array *a) {
    const TensorscopeOnnx__TypeProto__Tensor *tt = vi->type->tensor_type;
    char got[128];
    ts_array_shape_str(a, got, sizeof got);
    int64_t n = ts_array_numel(a);
    if (n < 0 || (n > 0 && !a->data) || !ts_dtype_size(a->dtype))
        return ts_error(TS_ERR_INVALID_ARGUMENT, "%s: the value bound to input '%s' is no valid array (%s)", im->path, vi->name, got);
    /* the array's shape where the file's has dynamic sizes; the file's
     * where it is static and holds as many values ([1] for a scalar) */
    ts_shape s = {.ndim = a->ndim}, file = {.ndim = tt->shape ? (int)tt->shape->n_dim : -1};
    for (int d = 0; d < a->ndim; d++) s.d[d] = a->shape[d];
    bool fits = file.ndim < 0 || file.ndim == a->ndim, known = file.ndim >= 0 && file.ndim <= TS_MAX_DIMS;
    for (int d = 0; known && d < file.ndim; d++) {
        const TensorscopeOnnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        known = dim->has_dim_value && dim->dim_value >= 0;
        file.d[d] = known ? dim->dim_value : -1;
        fits = fits && (!known || file.d[d] == a->shape[d]);
    }
    if (!fits && known && ts_shape_numel(&file) == n) s = file, fits = true;
    if (!fits) return ts_error(TS_ERR_SHAPE, "%s: the value bound to input '%s' is %s, which is not the input's shape", im->path, vi->name, got);
    bool integer = !ts_onnx_dtype_is_float(elem);
    value v = {0};
    ts_status st = ts_const_fill(&s, elem, 0, &v.c);
    for (int64_t i = 0; !st && i < n; i++) {
        v.c.v[i] = ts_array_value(a, i);
        if (integer && v.c.v[i] != floor(v.c.v[i]))
            st = ts_error(TS_ERR_INVALID_ARGUMENT, "%s: the value bound to input '%s' holds %g at [%lld]; the input is %s", im->path, vi->name,
                          v.c.v[i], (long long)i, ts_onnx_dtype_name(elem));
    }
    if (!st) st = define(im, vi->name, &v);
    if (st) ts_const_free(&v.c);
    return st;
}

static ts_status import_inputs(importer *im, const TensorscopeOnnx__GraphProto *gp, const ts_onnx_input *given, int n_given) {
    for (int k = 0; k < n_given; k++) {
        bool found = false;
        for (size_t i = 0; i < gp->n_input && !found; i++) found = gp->input[i]->name && strcmp(gp->input[i]->name, given[k].name) == 0;
        if (!found) {
            char names[512] = "";
            size_t used = 0;
            for (size_t i = 0; i < gp->n_input && used < sizeof names; i++)
                if (gp->input[i]->name && !lookup(im, gp->input[i]->name))
                    used += (size_t)snprintf(names + used, sizeof names - used, "%s'%s'", used ? ", " : "", gp->input[i]->name);
            return ts_error(TS_ERR_NOT_FOUND, "%s has no input named '%s'; its inputs: %s", im->path, given[k].name, names);
        }
    }
    for (size_t i = 0; i < gp->n_input; i++) {
        const ValueInfo *vi = gp->input[i];
        if (!vi->name || !*vi->name) return ts_error(TS_ERR_FORMAT, "%s: graph input %zu has no name", im->path, i);
        if (lookup(im, vi->name)) continue; /* an initializer listed as an input (IR < 4) */
        const ts_onnx_input *user = NULL;
        for (int k = 0; k < n_given; k++)
            if (strcmp(given[k].name, vi->name) == 0) user = &given[k];
        const TensorscopeOnnx__TypeProto__Tensor *tt = vi->type ? vi->type->tensor_type : NULL;
        if (!tt) return ts_error(TS_ERR_UNSUPPORTED, "%s: input '%s' is not a tensor", im->path, vi->name);
        int elem = tt->has_elem_type ? tt->elem_type : TS_ONNX_FLOAT;
        if (user && user->value) {
            ts_status st = bind_input(im, vi, elem, user->value);
            if (st) return st;
            continue;
        }
        ts_dtype dt;
        if (ts_onnx_dtype_is_float(elem) || ts_lowbits_is(elem)) dt = TS_F32; /* low precision: the values, exact in f32 */
        else if (onnx_array_dtype(elem, &dt)) dt = TS_I32; /* ids, labels, masks: integers of any width, exact in i32 */
        else return ts_error(TS_ERR_UNSUPPORTED, "%s: input '%s' has data type %s; tensorscope feeds float, bool and integer inputs "
                             "(8 to 64 bits, signed or not)", im->path, vi->name, ts_onnx_dtype_name(elem));
        ts_shape s = {0};
        if (tt->shape) {
            if (tt->shape->n_dim > TS_MAX_DIMS) return ts_error(TS_ERR_UNSUPPORTED, "%s: input '%s' has more than %d dimensions", im->path, vi->name, TS_MAX_DIMS);
            s.ndim = (int)tt->shape->n_dim;
        } else if (!user) {
            return ts_error(TS_ERR_INVALID_ARGUMENT, "%s: input '%s' has no shape in the file; give it (--input %s:D0xD1x...)", im->path,
                            vi->name, vi->name);
        }
        char dims[256] = "";
        size_t used = 0;
        for (int d = 0; d < s.ndim; d++) {
            const TensorscopeOnnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
            if (dim->has_dim_value && dim->dim_value > 0) s.d[d] = dim->dim_value;
            else s.d[d] = -1;
            /* a long dim_param is cut, never written past the buffer */
            if (used < sizeof dims)
                used += (size_t)snprintf(dims + used, sizeof dims - used, "%s%s", d ? "x" : "",
                                         s.d[d] > 0 ? "" : dim->dim_param && *dim->dim_param ? dim->dim_param : "?");
            if (s.d[d] > 0 && used < sizeof dims) used += (size_t)snprintf(dims + used, sizeof dims - used, "%lld", (long long)s.d[d]);
        }
        if (user) {
            if (user->ndim < 0 || user->ndim > TS_MAX_DIMS) return ts_error(TS_ERR_INVALID_ARGUMENT, "input '%s': ndim %d is out of range", vi->name, user->ndim);
            if (tt->shape && user->ndim != s.ndim)
                return ts_error(TS_ERR_SHAPE, "%s: input '%s' has %d dimensions (%s) but %d were given", im->path, vi->name, s.ndim, dims, user->ndim);
            /* a given size replaces the file's, dynamic or not: exporters
             * record the example's batch size, and shape computations are
             * folded for the sizes given here */
            for (int d = 0; d < user->ndim; d++) {
                if (user->shape[d] <= 0) return ts_error(TS_ERR_SHAPE, "input '%s': dimension %d must be positive", vi->name, d);
                s.d[d] = user->shape[d];
            }
            s.ndim = user->ndim;
        }
        for (int d = 0; d < s.ndim; d++)
            if (s.d[d] <= 0)
                return ts_error(TS_ERR_INVALID_ARGUMENT, "%s: input '%s' has the dynamic shape %s; give its static shape (ts_onnx_input, or "
                                "--input %s:%s with numbers)", im->path, vi->name, dims, vi->name, dims);
        ts_graph_at(im->g, im->file, -1);
        im->g->origin = "graph input";
        ts_tensor *t = ts_input(im->g, vi->name, dt, s.ndim, s.d);
        if (!t) return ts_graph_status(im->g);
        /* the type a CastLike reads; an integer input's type, which the bitwise ops compute in */
        value v = {.t = t, .c.dtype = ts_lowbits_is(elem) || dt == TS_I32 ? elem : 0};
        ts_status st = define(im, vi->name, &v);
        if (st) return st;
    }
    return TS_OK;
}

/* A node's name for messages: its name, else its place in the graph. */
static const char *node_label(const Node *n, size_t i, char *buf, size_t cap) {
    if (n->name && *n->name) return n->name;
    snprintf(buf, cap, "#%zu", i);
    return buf;
}

/* Every value has one writer (static single assignment, as onnx.checker
 * requires): a node output that another node, a graph input or an
 * initializer already defines is refused, naming both. */
static ts_status single_writers(importer *im, const TensorscopeOnnx__GraphProto *gp) {
    enum { INPUT = -3, INITIALIZER = -2 }; /* else the writing node's index (-1: none yet) */
    ts_strmap w = {0};
    ts_status st = TS_OK;
    /* an initializer may also be listed as an input (IR version < 4) */
    for (size_t i = 0; !st && i < gp->n_input; i++)
        if (gp->input[i]->name && *gp->input[i]->name) st = ts_strmap_put(&w, gp->input[i]->name, INPUT);
    for (size_t i = 0; !st && i < gp->n_initializer; i++)
        if (gp->initializer[i]->name && *gp->initializer[i]->name) st = ts_strmap_put(&w, gp->initializer[i]->name, INITIALIZER);
    for (size_t i = 0; !st && i < gp->n_node; i++) {
        const Node *n = gp->node[i];
        for (size_t k = 0; !st && k < n->n_output; k++) {
            const char *name = n->output[k];
            if (!name || !*name) continue; /* an optional output left out */
            int prev = ts_strmap_get(&w, name);
            char a[32], b[32];
            if (prev == INPUT || prev == INITIALIZER)
                st = ts_error(TS_ERR_FORMAT, "%s: node '%s' (%s) writes '%s', which is a graph %s; every value has one writer (onnx.checker "
                              "refuses this graph too): rename the node's output",
                              im->path, node_label(n, i, a, sizeof a), n->op_type, name, prev == INPUT ? "input" : "initializer");
            else if (prev >= 0)
                st = ts_error(TS_ERR_FORMAT, "%s: nodes '%s' (%s) and '%s' (%s) both write '%s'; every value has one writer (onnx.checker "
                              "refuses this graph too): rename one of the outputs",
                              im->path, node_label(gp->node[prev], (size_t)prev, a, sizeof a), gp->node[prev]->op_type,
                              node_label(n, i, b, sizeof b), n->op_type, name);
            else
                st = ts_strmap_put(&w, name, (int)i);
        }
    }
    ts_strmap_free(&w);
    return st;
}

/* How many node inputs read each value (0 for a node output no node
 * reads; a graph output counts as one reader more), so import_node frees a
 * folded constant after its last reader and skips what nothing reads. */
static ts_status count_uses(importer *im, const TensorscopeOnnx__GraphProto *gp) {
    ts_status st = TS_OK;
    for (size_t i = 0; !st && i < gp->n_node; i++) {
        const Node *n = gp->node[i];
        for (size_t a = 0; !st && a < n->n_attribute; a++) /* a branch's or body's reads: never freed */
            if (n->attribute[a]->g) st = count_uses(im, n->attribute[a]->g);
        for (size_t k = 0; !st && k < n->n_input + n->n_output; k++) {
            const char *name = k < n->n_input ? n->input[k] : n->output[k - n->n_input];
            int c = name && *name ? ts_strmap_get(&im->uses, name) : 0;
            if (k < n->n_input && name && *name) st = ts_strmap_put(&im->uses, name, (c < 0 ? 0 : c) + 1);
            else if (c < 0) st = ts_strmap_put(&im->uses, name, 0);
        }
    }
    for (size_t i = 0; !st && i < gp->n_output; i++) {
        const char *name = gp->output[i]->name;
        if (!name || !*name) continue;
        int c = ts_strmap_get(&im->uses, name);
        st = ts_strmap_put(&im->uses, name, (c < 0 ? 0 : c) + 1);
    }
    return st;
}

/* A parameter the file's metadata names (onnx_torch.h), defined as a
 * value under its PyTorch name once (c: its values, or just the shape and
 * type of `tp`'s); returns the value, NULL after an error (*st). */
static value *torch_param(importer *im, const char *name, const TensorProto *tp, ts_const *c, ts_status *st) {
    value *v = lookup(im, name);
    if (v) {
        ts_const_free(c);
        return v;
    }
    const char *kept = ts_graph_keep_string(im->g, name);
    value nv = {.c = *c, .param = tp};
    *st = kept ? define(im, kept, &nv) : TS_ERR_OUT_OF_MEMORY;
    if (*st) ts_const_free(c);
    return *st ? NULL : lookup(im, kept);
}

/* Gives the parameters of a dynamo export their PyTorch names where the
 * file's metadata says which they are (onnx_torch.h): renamed, a merged
 * one's own copy, a Linear weight stored transposed (its twin), a zero
 * bias the optimizer dropped (param marks the value a parameter; c holds
 * its values); and a float initializer that is no parameter of the
 * module, nor folded from one, a constant. */
static ts_status torch_names(importer *im, const TensorscopeOnnx__GraphProto *gp) {
    char first[256] = "";
    size_t frozen = ts_torch_frozen_batch_norms(gp, first, sizeof first);
    if (frozen)
        ts_logf(TS_LOG_WARN, "%s: %zu BatchNorm%s of a module in training mode %s here in inference mode (the dynamo exporter writes them "
                "so, and fuses them into the Conv before: '%s' is the first): the model normalises by the running statistics and trains "
                "neither them nor a fused BatchNorm's weight and bias. To train BatchNorm, export with the TorchScript exporter "
                "(dynamo=False; ts.training_model does). A fused Conv's weight is named '<weight>.fused': it holds the BatchNorm's scale "
                "too", im->path, frozen, frozen == 1 ? "" : "s", frozen == 1 ? "is" : "are", first);
    ts_status st = ts_torch_fixes(gp, &im->fix, &im->n_fix);
    size_t lost = 0;
    const char *first_lost = NULL;
    for (size_t f = 0; f < im->n_fix && !st; f++) {
        const ts_torch_fix *x = &im->fix[f];
        if (x->kind == TS_TORCH_LOST) {
            if (!lost++) first_lost = x->name;
            continue;
        }
        value *v = x->kind == TS_TORCH_ZERO_BIAS ? lookup(im, gp->node[x->node]->input[1]) : lookup(im, gp->initializer[x->init]->name);
        if (!v || !v->param) continue; /* an initializer that is no parameter (an integer type) */
        ts_const c = {.dtype = v->c.dtype, .shape = v->c.shape};
        switch (x->kind) {
        case TS_TORCH_CONSTANT: {
            char what[600];
            snprintf(what, sizeof what, "initializer '%s'", v->name);
            if (!(st = tensor_decode(im, v->param, what, &v->c))) v->param = NULL;
            break;
        }
        case TS_TORCH_FOLDED: v->folded = true; break;
        case TS_TORCH_RENAME:
        case TS_TORCH_FUSED:
            v->pname = ts_graph_keep_string(im->g, x->name);
            v->fused = x->kind == TS_TORCH_FUSED;
            st = v->pname ? TS_OK : TS_ERR_OUT_OF_MEMORY;
            break;
        case TS_TORCH_COPY: torch_param(im, x->name, v->param, &c, &st); break;
        case TS_TORCH_TRANSPOSED: {
            ts_const_attrs at = {.n_perm = -1};
            const ts_const *in = &v->c;
            if (!(st = decoded(im, v)) && !(st = ts_const_op("Transpose", &in, 1, &at, &c))) v->twin = torch_param(im, x->name, v->param, &c, &st);
            ts_const_free(&v->c); /* decoded again if a fold reads it */
            const value *w = v->twin; /* an initializer of that name already (tied): of the transposed shape */
            if (w && (!w->param || w->c.shape.ndim != 2 || w->c.shape.d[0] != v->c.shape.d[1] || w->c.shape.d[1] != v->c.shape.d[0]))
                v->twin = NULL;
            break;
        }
        case TS_TORCH_ZERO_BIAS: {
            ts_shape s = {.ndim = 1, .d = {x->length}};
            if (!(st = ts_const_fill(&s, TS_ONNX_FLOAT, 0.0, &c))) torch_param(im, x->name, v->param, &c, &st);
            break;
        }
        case TS_TORCH_LOST: break;
        }
    }
    if (lost)
        ts_logf(TS_LOG_WARN, "%s: %zu parameter%s of the PyTorch module ('%s'%s) %s in the file nowhere: the dynamo exporter's optimizer "
                "stores initializers of equal values once (fresh zero biases, the copies of a layer) and fuses BatchNorm into the Conv "
                "before it, so such a parameter trains as the tensor the file reads in its place, or not at all. To train each parameter "
                "as the module does, export with the TorchScript exporter (dynamo=False; ts.training_model of the module does), or with "
                "optimize=False, which keeps every parameter (and writes a Split as a sequence)",
                im->path, lost, lost == 1 ? "" : "s", first_lost, lost == 1 ? "" : " is the first", lost == 1 ? "is" : "are");
    return st;
}

static ts_status import_graph(importer *im, const TensorscopeOnnx__ModelProto *mp, const ts_onnx_input *inputs, int n_inputs) {
    const TensorscopeOnnx__GraphProto *gp = mp->graph;
    if (!gp) return ts_error(TS_ERR_FORMAT, "%s holds no graph (not an ONNX model, or truncated)", im->path);
    bool named = false;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const char *d = mp->opset_import[i]->domain;
        if (!d || !*d || strcmp(d, "ai.onnx") == 0) {
            im->opset = mp->opset_import[i]->version;
            named = true;
        }
    }
    if (!named)
        return ts_error(TS_ERR_FORMAT, "%s names no opset of the default ONNX domain (its opset_import lists none); tensorscope imports "
                        "opsets %d to %d", im->path, MIN_OPSET, MAX_OPSET);
    if (im->opset < MIN_OPSET || im->opset > MAX_OPSET)
        return ts_error(TS_ERR_UNSUPPORTED, "%s uses opset %lld of the default ONNX domain; tensorscope imports opsets %d to %d (re-export "
                        "with one of them, e.g. torch.onnx.export(..., opset_version=18))", im->path, (long long)im->opset, MIN_OPSET,
                        MAX_OPSET);
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const TensorProto *tp = gp->initializer[i];
        if (!tp->name || !*tp->name) return ts_error(TS_ERR_FORMAT, "%s: initializer %zu has no name", im->path, i);
        char what[600];
        snprintf(what, sizeof what, "initializer '%s'", tp->name);
        value v = {0};
        ts_status st = tensor_check(im, tp, what, &v.c);
        /* float initializers are parameters; the low-precision ones
         * (float8, float4) constants, which training would move off their grid */
        if (!st && ts_onnx_dtype_is_float(v.c.dtype) && !ts_lowbits_is(v.c.dtype)) v.param = tp;
        else if (!st) st = tensor_decode(im, tp, what, &v.c);
        if (!st) st = define(im, tp->name, &v);
        if (st) {
            ts_const_free(&v.c);
            return st;
        }
    }
    ts_status st = single_writers(im, gp);
    if (!st) st = torch_names(im, gp);
    if (!st) st = ts_onnx_group_norm_chains(gp, &im->chain, &im->n_chain);
    im->chain_graph = gp;
    if (!st) st = count_uses(im, gp);
    im->inputs_from = ts_graph_tensor_count(im->g);
    if (!st) st = import_inputs(im, gp, inputs, n_inputs);
    im->inputs_to = ts_graph_tensor_count(im->g);
    if (!st)
        ts_logf(TS_LOG_DEBUG, "%s: opset %lld, %zu nodes, %zu initializers, %zu inputs, %zu outputs", im->path, (long long)im->opset,
                gp->n_node, gp->n_initializer, gp->n_input, gp->n_output);
    for (size_t i = 0; !st && i < gp->n_node; i++) st = import_node(im, gp->node[i], (int)i);
    if (st) return st;
    im->node = NULL;
    for (size_t i = 0; i < gp->n_output; i++) {
        const char *name = gp->output[i]->name;
        value *v = name ? lookup(im, name) : NULL;
        const char *op = NULL;
        for (size_t k = 0; !v && name && k < gp->n_node; k++)
            for (size_t j = 0; j < gp->node[k]->n_output; j++)
                if (gp->node[k]->output[j] && strcmp(gp->node[k]->output[j], name) == 0) op = gp->node[k]->op_type;
        if (!v && op)
            return ts_error(TS_ERR_UNSUPPORTED, "%s: graph output '%s' is an output of a %s node that tensorscope does not compute", im->path,
                            name, op);
        if (!v) return ts_error(TS_ERR_FORMAT, "%s: graph output '%s' is computed by no node", im->path, name ? name : "?");
        /* an output that folded to a constant is returned as that constant */
        ts_tensor *t = v->t ? v->t : as_tensor(im, v, &st);
        if (!t) return st;
        st = ts_graph_add_output(im->g, t);
        if (!st && !v->t) st = ts_graph_add_alias(im->g, name, t);
        /* returned in the file's type (int64, bool, double, ...) */
        const TensorscopeOnnx__TypeProto__Tensor *tt = gp->output[i]->type ? gp->output[i]->type->tensor_type : NULL;
        ts_dtype dt;
        if (!st && tt && tt->has_elem_type && onnx_array_dtype(tt->elem_type, &dt)) st = ts_tensor_set_output_dtype(t, dt);
        if (!st && tt && tt->has_elem_type && ts_lowbits_is(tt->elem_type)) t->onnx_type = tt->elem_type; /* held in f32 */
        if (st) return st;
    }
    if (gp->n_output == 0) return ts_error(TS_ERR_FORMAT, "%s: the graph has no outputs", im->path);
    return ts_graph_status(im->g);
}

/* Maps the file read-only (the parser copies what it keeps). */
static ts_status map_file(const char *path, void **out, size_t *n) {
    *out = NULL;
    *n = 0;
    int fd;
    uint64_t size;
    ts_status s = ts_file_open_read(path, "ONNX model", &fd, &size);
    if (s) return s;
    if (size > MAX_MODEL_BYTES)
        s = ts_error(TS_ERR_UNSUPPORTED, "%s is %llu bytes; ONNX files hold at most 2 GB (larger models keep their weights as external "
                     "data)", path, (unsigned long long)size);
    if (!s) *n = (size_t)size;
    if (!s && *n) {
        void *p = mmap(NULL, *n, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
        if (p == MAP_FAILED) s = ts_error(TS_ERR_IO, "cannot map %s: %s", path, strerror(errno));
        else *out = p;
    }
    close(fd);
    return s;
}

/* How deeply the graphs of b[0..n), a message of `kind`, nest (If's
 * branches, Loop's and Scan's bodies: ModelProto.graph (7), GraphProto.node
 * (1), NodeProto.attribute (5), AttributeProto.g (6), a graph again), or
 * -1 past `left` levels: read from the wire format before the parser,
 * whose recursion follows the file's nesting. Bytes that do not parse end
 * the walk (the parser refuses them). */
enum { PB_MODEL, PB_GRAPH, PB_NODE, PB_ATTR };
static bool pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return true;
    }
    return false;
}
static int graph_depth(const uint8_t *b, size_t n, int kind, int left) {
    static const uint64_t field[] = {[PB_MODEL] = 7, [PB_GRAPH] = 1, [PB_NODE] = 5, [PB_ATTR] = 6};
    const uint8_t *p = b, *end = b + n;
    int deepest = 0;
    while (p < end) {
        uint64_t key, len = 0;
        if (!pb_varint(&p, end, &key)) break;
        int wire = (int)(key & 7);
        if (wire == 0 && pb_varint(&p, end, &len)) continue;
        if ((wire == 1 || wire == 5) && (size_t)(end - p) >= (wire == 1 ? 8u : 4u)) {
            p += wire == 1 ? 8 : 4;
            continue;
        }
        if (wire != 2 || !pb_varint(&p, end, &len) || len > (uint64_t)(end - p)) break;
        if (key >> 3 == field[kind]) {
            bool graph = kind == PB_ATTR; /* AttributeProto.g: one level deeper */
            int d = graph && left == 0 ? -1 : graph_depth(p, (size_t)len, kind == PB_ATTR ? PB_GRAPH : kind + 1, left - graph);
            if (d < 0) return -1;
            if (d + graph > deepest) deepest = d + graph;
        }
        p += len;
    }
    return deepest;
}

static void *pb_alloc(void *user, size_t n) { (void)user; return ts_malloc(n ? n : 1); }
static void pb_free(void *user, void *p) { (void)user; ts_free(p); }

ts_status ts_onnx_import_bytes(ts_graph **out, const uint8_t *bytes, size_t n, const char *path, const ts_onnx_input *inputs,
                               int n_inputs) {
    *out = NULL;
    if (n == 0) return ts_error(TS_ERR_FORMAT, "%s is empty: not an ONNX model", path);
    if (graph_depth(bytes, n, PB_MODEL, MAX_GRAPH_DEPTH) < 0)
        return ts_error(TS_ERR_UNSUPPORTED, "%s nests graphs (If branches, Loop and Scan bodies) more than %d deep; tensorscope imports "
                        "at most %d levels", path, MAX_GRAPH_DEPTH, MAX_GRAPH_DEPTH);
    ProtobufCAllocator alloc = {pb_alloc, pb_free, NULL};
    TensorscopeOnnx__ModelProto *mp = tensorscope_onnx__model_proto__unpack(&alloc, n, bytes);
    if (!mp)
        return ts_error(TS_ERR_FORMAT, "%s is not a valid ONNX model: its protobuf encoding is corrupt or truncated (%zu bytes)", path, n);
    importer im;
    memset(&im, 0, sizeof im);
    im.path = path;
    snprintf(im.dir, sizeof im.dir, "%s", path);
    char *slash = strrchr(im.dir, '/');
    if (slash) *slash = '\0';
    else snprintf(im.dir, sizeof im.dir, ".");
    im.g = ts_graph_new(0);
    ts_const_budget(ts_get_limit(TS_LIMIT_IMPORT_BYTES));
    ts_status st = im.g ? TS_OK : TS_ERR_OUT_OF_MEMORY;
    if (!st) {
        const char *base = strrchr(path, '/');
        im.file = ts_graph_keep_string(im.g, base ? base + 1 : path);
        st = im.file ? import_graph(&im, mp, inputs, n_inputs) : TS_ERR_OUT_OF_MEMORY;
    }
    ts_graph_at(im.g, NULL, 0);
    for (size_t i = 0; i < im.nv; i++) {
        ts_const_free(&im.v[i]->c);
        ts_free(im.v[i]);
    }
    ts_free(im.v);
    ts_free(im.hash);
    ts_strmap_free(&im.uses);
    ts_torch_fixes_free(im.fix, im.n_fix);
    ts_free(im.chain);
    ts_const_budget(UINT64_MAX);
    tensorscope_onnx__model_proto__free_unpacked(mp, &alloc);
    if (st) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ts_last_error());
        ts_graph_free(im.g);
        return ts_error(st, "%s", msg);
    }
    *out = im.g;
    return TS_OK;
}

ts_status ts_graph_from_onnx(ts_graph **out, const char *path, const ts_onnx_input *inputs, int n_inputs) {
    if (!out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_graph_from_onnx: out is NULL");
    *out = NULL;
    if (!path) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_graph_from_onnx: path is NULL");
    if (n_inputs < 0 || (n_inputs > 0 && !inputs)) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_graph_from_onnx: bad input list");
    for (int i = 0; i < n_inputs; i++)
        if (!inputs[i].name) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_graph_from_onnx: input %d has no name", i);
    void *b = NULL;
    size_t n = 0;
    uint64_t t0 = ts_now_ns();
    ts_status st = map_file(path, &b, &n);
    if (!st) st = ts_onnx_import_bytes(out, b, n, path, inputs, n_inputs);
    if (b) munmap(b, n);
    if (!st) ts_metric_record("OnnxImportTime", (double)(ts_now_ns() - t0));
    return st;
}
