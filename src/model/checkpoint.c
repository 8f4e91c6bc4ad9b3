/* checkpoint.c -- a training model's whole state in one file, so that a
 * resumed run writes the same weights as one never interrupted
 * (docs/formats.md):
 *
 *     magic    8 bytes  "TSCKPT\0\0"
 *     version  u32      1
 *     count    u32      records
 *     per record: name_len u32, name, npy_len u64, a .npy file's bytes
 *     crc      u32      CRC-32C of everything before it
 *
 * Records: `meta` i64[4] (steps, runs, optimizer kind, parameters),
 * `schedule` f64[6] (base rate, kind, warmup, step size, gamma, total steps),
 * `param/<name>` (values), `accl/`, `accl1/`, `accl2/<name>` (optimizer
 * state, as the optimizer has it), `step/<name>` f32[] (its step count),
 * with dynamic loss scaling `scaler` f64[3] (scale, good steps in a row,
 * skipped steps), and with a loader `loader` i64[11] (ts_loader_pos) and
 * `loader/order` i64[count]. Written atomically (temporary name, then
 * rename).
 *
 * Reading: every number is range-checked before it is used (number()):
 * counters (steps, runs, the loader's epoch, the scaler's good and skipped
 * steps, each parameter's step count) are whole numbers in
 * 0..CKPT_MAX_COUNT, the loss scale is in [TS_LOSS_SCALE_MIN,
 * TS_LOSS_SCALE_MAX], and parameters and optimizer state are finite. */
#include "model/model.h"
#include "data/loader.h"
#include "core/atomic_file.h"
#include "core/crc32c.h"
#include "io/npy.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define CKPT_MAGIC "TSCKPT\0\0"
#define CKPT_VERSION 1u
/* The largest counter a checkpoint may hold: 2^40 (over a trillion steps),
 * so that what is computed from it later (steps + runs x D x A, samples
 * seen, epochs) stays far from int64's end. */
#define CKPT_MAX_COUNT 0x1p40

/* ---- writing */

typedef struct writer {
    ts_atomic_file af;
    uint32_t crc;
    bool first, failed;
} writer;

static void put(writer *w, const void *p, size_t n) {
    if (w->failed || n == 0) return;
    if (fwrite(p, 1, n, w->af.f) != n) w->failed = true;
    w->crc = w->first ? ts_crc32c(p, n) : ts_crc32c_extend(w->crc, p, n);
    w->first = false;
}

static void put_u32(writer *w, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(w, b, 4);
}

static void put_u64(writer *w, uint64_t v) {
    put_u32(w, (uint32_t)v);
    put_u32(w, (uint32_t)(v >> 32));
}

static void put_record(writer *w, const char *name, const ts_array *a) {
    char hdr[TS_NPY_HEADER_MAX];
    size_t hl, bytes;
    if (ts_npy_header_for(name, a, hdr, sizeof hdr, &hl, &bytes)) {
        w->failed = true;
        return;
    }
    put_u32(w, (uint32_t)strlen(name));
    put(w, name, strlen(name));
    put_u64(w, (uint64_t)(hl + bytes));
    put(w, hdr, hl);
    put(w, a->data, bytes);
}

/* What the learning rate of every step depends on. */
static void schedule_values(const ts_model *m, double *v) {
    const ts_lr_schedule *s = &m->run.sched;
    double x[6] = {m->run.base_lr, s->kind, (double)s->warmup_steps, (double)s->step_size, s->gamma, (double)s->total_steps};
    if (s->kind != TS_LR_STEP) x[3] = x[4] = 0;
    if (s->kind != TS_LR_COSINE) x[5] = 0;
    memcpy(v, x, sizeof x);
}

/* Calls fn for every record of the model's state, in file order. */
typedef void (*record_fn)(void *ctx, const char *name, ts_array *a);
static void each_record(const ts_model *m, int64_t *meta, float *steps, record_fn fn, void *ctx) {
    const ts_graph *g = m->run.g;
    ts_array a = {.dtype = TS_I64, .ndim = 1, .shape = {4}, .data = meta};
    fn(ctx, "meta", &a);
    double sched[6];
    schedule_values(m, sched);
    ts_array sa = {.dtype = TS_F64, .ndim = 1, .shape = {6}, .data = sched};
    fn(ctx, "schedule", &sa);
    double scaler[3] = {m->run.loss_scale, (double)m->run.good_steps, (double)m->run.skipped_steps};
    ts_array ca = {.dtype = TS_F64, .ndim = 1, .shape = {3}, .data = scaler};
    if (m->run.scaling) fn(ctx, "scaler", &ca);
    for (int i = 0; i < m->run.n_state; i++) {
        const ts_tensor *t = g->t[m->run.state[i].node];
        char name[600];
        ts_array v = {.dtype = TS_F32, .ndim = t->shape.ndim};
        for (int d = 0; d < t->shape.ndim; d++) v.shape[d] = t->shape.d[d];
        float *const arrays[4] = {t->value, m->run.state[i].accl, m->run.state[i].accl1, m->run.state[i].accl2};
        static const char *const prefix[4] = {"param", "accl", "accl1", "accl2"};
        for (int k = 0; k < 4; k++) {
            if (!arrays[k]) continue;
            snprintf(name, sizeof name, "%s/%s", prefix[k], t->name);
            v.data = arrays[k];
            fn(ctx, name, &v);
        }
        snprintf(name, sizeof name, "step/%s", t->name);
        ts_array s = {.dtype = TS_F32, .ndim = 0, .data = &steps[i]};
        fn(ctx, name, &s);
    }
}

static void count_record(void *ctx, const char *name, ts_array *a) {
    (void)name, (void)a;
    (*(uint32_t *)ctx)++;
}
static void write_record(void *ctx, const char *name, ts_array *a) { put_record(ctx, name, a); }

static void loader_records(const ts_loader *l, int64_t *pos, ts_array *pa, ts_array *oa) {
    ts_loader_pos p;
    const int64_t *order;
    ts_loader_get_pos(l, &p, &order);
    int64_t v[11] = {p.epoch, p.pos, p.in_epoch, (int64_t)p.rng, p.first, p.count, p.batch_size, p.shuffle, p.drop_last, (int64_t)p.seed, 0};
    memcpy(pos, v, sizeof v);
    *pa = (ts_array){.dtype = TS_I64, .ndim = 1, .shape = {11}, .data = pos};
    *oa = (ts_array){.dtype = TS_I64, .ndim = 1, .shape = {p.count}, .data = (void *)order};
}

static ts_status check_model(const ts_model *m, const char *what) {
    if (!m) return ts_error(TS_ERR_INVALID_ARGUMENT, "%s: model is NULL", what);
    if (!m->run.training) return ts_error(TS_ERR_STATE, "%s: only a training model has a checkpoint (weights alone: ts_npy_save)", what);
    if (!m->compiled || !m->run.state) return ts_error(TS_ERR_STATE, "%s: compile the model first (its optimizer state is made at compile)", what);
    return TS_OK;
}

ts_status ts_checkpoint_save(const char *path, const ts_model *m, const ts_loader *l) {
    ts_status st = check_model(m, "ts_checkpoint_save");
    if (st) return st;
    if (!path || !*path) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_checkpoint_save: empty path");
    if ((st = ts_device_fetch_state(m->run.prog, m->run.dev))) return st; /* a device's optimizer state, brought to the host */
    if ((st = ts_graph_values_current(m->run.g))) return st; /* and its parameters */
    float *steps = ts_calloc((size_t)m->run.n_state + 1, sizeof *steps);
    if (!steps) return TS_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < m->run.n_state; i++) steps[i] = m->run.state[i].step;
    int64_t meta[4] = {m->run.steps, m->run.runs, (int64_t)m->run.opt.kind, m->run.n_state}, pos[11];
    uint32_t count = 0;
    each_record(m, meta, steps, count_record, &count);
    ts_array pa, oa;
    if (l) loader_records(l, pos, &pa, &oa), count += 2;
    writer w = {.first = true};
    if ((st = ts_atomic_open(&w.af, path))) {
        ts_free(steps);
        return st;
    }
    put(&w, CKPT_MAGIC, 8);
    put_u32(&w, CKPT_VERSION);
    put_u32(&w, count);
    each_record(m, meta, steps, write_record, &w);
    if (l) put_record(&w, "loader", &pa), put_record(&w, "loader/order", &oa);
    ts_free(steps);
    uint32_t crc = w.crc;
    put_u32(&w, crc);
    if (w.failed) {
        int err = errno;
        ts_atomic_abort(&w.af);
        return ts_error(TS_ERR_IO, "cannot write the checkpoint %s: %s", path, strerror(err));
    }
    return ts_atomic_commit(&w.af);
}

/* ---- reading */

typedef struct reader {
    const uint8_t *b;
    size_t n, at;
} reader;

static bool get(reader *r, void *out, size_t n) {
    if (n > r->n - r->at) return false;
    memcpy(out, r->b + r->at, n);
    r->at += n;
    return true;
}
static bool get_u32(reader *r, uint32_t *v) {
    uint8_t b[4];
    if (!get(r, b, 4)) return false;
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return true;
}
static bool get_u64(reader *r, uint64_t *v) {
    uint32_t lo, hi;
    if (!get_u32(r, &lo) || !get_u32(r, &hi)) return false;
    *v = (uint64_t)hi << 32 | lo;
    return true;
}

typedef struct record {
    const char *name; /* in the file's bytes, not NUL-terminated */
    uint32_t len;
    ts_array a; /* allocated by ts_npy_parse */
} record;

/* The smallest record: name_len, npy_len and a .npy preamble. */
#define CKPT_MIN_RECORD (4 + 8 + TS_NPY_PREFIX_MAX)

/* The whole file, a regular one (a FIFO is refused, not waited on), read
 * into a buffer of the size the file really has. */
static ts_status read_file(const char *path, uint8_t **out, size_t *n) {
    FILE *f;
    uint64_t size;
    ts_status st = ts_file_fopen_read(path, "checkpoint", &f, &size);
    if (st) return st;
    uint8_t *buf = size <= SIZE_MAX - 1 ? ts_malloc((size_t)size + 1) : NULL;
    if (!buf) {
        fclose(f);
        return ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory reading the checkpoint %s (%llu bytes)", path, (unsigned long long)size);
    }
    /* one byte more than the size: a file that grew while read is an error */
    size_t len = fread(buf, 1, (size_t)size + 1, f);
    bool err = ferror(f) != 0;
    fclose(f);
    if (err || len != size) {
        ts_free(buf);
        return ts_error(TS_ERR_IO, "cannot read the checkpoint %s%s", path, err ? "" : ": it changed while it was read");
    }
    *out = buf, *n = len;
    return TS_OK;
}

static const record *find(const record *recs, uint32_t n, const char *name) {
    size_t len = strlen(name);
    for (uint32_t i = 0; i < n; i++)
        if (recs[i].len == len && memcmp(recs[i].name, name, len) == 0) return &recs[i];
    return NULL;
}

/* The record `name` with the given dtype and element count, or an error. */
static ts_status want(const record *recs, uint32_t n, const char *path, const char *name, ts_dtype dt, int64_t numel, const record **out) {
    const record *r = find(recs, n, name);
    if (!r) return ts_error(TS_ERR_INVALID_ARGUMENT, "checkpoint %s has no '%s': it was written by another model or optimizer", path, name);
    if (r->a.dtype != dt || ts_array_numel(&r->a) != numel)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "checkpoint %s: '%s' holds %lld %s values, this model needs %lld %s", path, name,
                        (long long)ts_array_numel(&r->a), ts_dtype_name(r->a.dtype), (long long)numel, ts_dtype_name(dt));
    *out = r;
    return TS_OK;
}

static ts_status parse_records(const char *path, const uint8_t *b, size_t n, record **out, uint32_t *count) {
    reader r = {b, n, 0};
    char magic[8];
    uint32_t version, cnt, crc;
    if (n < 20 || !get(&r, magic, 8) || memcmp(magic, CKPT_MAGIC, 8) != 0)
        return ts_error(TS_ERR_FORMAT, "%s is not a tensorscope checkpoint (bad magic)", path);
    reader t = {b + n - 4, 4, 0};
    get_u32(&t, &crc);
    if (ts_crc32c(b, n - 4) != crc) return ts_error(TS_ERR_FORMAT, "checkpoint %s is corrupt or truncated (checksum mismatch)", path);
    get_u32(&r, &version);
    if (version != CKPT_VERSION)
        return ts_error(TS_ERR_FORMAT, "checkpoint %s has format version %u; this tensorscope reads version %u", path, version, CKPT_VERSION);
    get_u32(&r, &cnt);
    r.n = n - 4;
    /* the count is checked against the bytes there before allocating */
    if (cnt > (r.n - r.at) / CKPT_MIN_RECORD)
        return ts_error(TS_ERR_FORMAT, "checkpoint %s says it holds %u records but its %zu bytes hold at most %zu: it is corrupt", path, cnt,
                        n, (r.n - r.at) / CKPT_MIN_RECORD);
    record *recs = ts_calloc(cnt ? cnt : 1, sizeof *recs);
    if (!recs) return TS_ERR_OUT_OF_MEMORY;
    ts_status st = TS_OK;
    uint32_t i = 0;
    for (; i < cnt; i++) {
        uint32_t nl = 0;
        uint64_t bytes = 0;
        if (!get_u32(&r, &nl) || nl > r.n - r.at) {
            st = ts_error(TS_ERR_FORMAT, "checkpoint %s: record %u is truncated", path, i);
            break;
        }
        recs[i].name = (const char *)r.b + r.at, recs[i].len = nl;
        r.at += nl;
        if (!get_u64(&r, &bytes) || bytes > r.n - r.at) {
            st = ts_error(TS_ERR_FORMAT, "checkpoint %s: record %u is truncated", path, i);
            break;
        }
        if ((st = ts_npy_parse(r.b + r.at, (size_t)bytes, &recs[i].a))) {
            st = ts_error_wrap(st, "checkpoint %s: record '%.*s'", path, (int)nl, recs[i].name);
            break;
        }
        r.at += (size_t)bytes;
    }
    if (!st && r.at != r.n) st = ts_error(TS_ERR_FORMAT, "checkpoint %s: %zu bytes after the last record", path, r.n - r.at);
    if (st) {
        for (uint32_t k = 0; k < i; k++) ts_npy_free(&recs[k].a);
        ts_free(recs);
        return st;
    }
    *out = recs, *count = cnt;
    return TS_OK;
}

/* The one reader of a checkpoint's numbers: v (an f64, f32 or i64 field,
 * as a double: an i64 beyond 2^53 is far outside every range here) if it
 * is finite, whole where a count is meant and in [lo, hi]; else an error
 * naming the record, the field and the value. */
static ts_status number(const char *path, const char *rec, const char *field, double v, double lo, double hi, bool whole,
                        double *out) {
    if (isfinite(v) && v >= lo && v <= hi && (!whole || v == floor(v))) {
        *out = v;
        return TS_OK;
    }
    return ts_error(TS_ERR_FORMAT, "checkpoint %s: '%s' holds %s %.17g; it must be a%s number from %.17g to %.17g: the file is corrupt",
                    path, rec, field, v, whole ? " whole" : " finite", lo, hi);
}

/* Checks (copy = false) or copies (copy = true) every parameter's values
 * and optimizer state. */
static ts_status state_records(const char *path, const record *recs, uint32_t n, ts_model *m, bool copy) {
    static const char *const prefix[4] = {"param", "accl", "accl1", "accl2"};
    ts_status cst = copy ? ts_graph_values_current(m->run.g) : TS_OK; /* what a device holds newer, back before the host's are overwritten */
    if (cst) return cst;
    for (int i = 0; i < m->run.n_state; i++) {
        ts_tensor *t = m->run.g->t[m->run.state[i].node];
        int64_t numel = ts_shape_numel(&t->shape);
        float *const arrays[4] = {t->value, m->run.state[i].accl, m->run.state[i].accl1, m->run.state[i].accl2};
        char name[600];
        const record *r;
        ts_status st;
        for (int k = 0; k < 4; k++) {
            if (!arrays[k]) continue;
            snprintf(name, sizeof name, "%s/%s", prefix[k], t->name);
            if ((st = want(recs, n, path, name, TS_F32, numel, &r))) return st;
            int64_t bad = copy ? 0 : ts_f32_nonfinite(r->a.data, numel);
            if (bad) /* as --weights refuses them: training from a NaN would only spread it */
                return ts_error(TS_ERR_FORMAT, "checkpoint %s: '%s' holds %lld NaN or infinite value%s of %lld; %s", path, name,
                                (long long)bad, bad == 1 ? "" : "s", (long long)numel,
                                k ? "this is not a usable optimizer state" : "these are not usable weights");
            if (copy) memcpy(arrays[k], r->a.data, (size_t)numel * sizeof(float));
        }
        snprintf(name, sizeof name, "step/%s", t->name);
        if ((st = want(recs, n, path, name, TS_F32, 1, &r))) return st;
        double step = 0;
        if ((st = number(path, name, "the step count", *(const float *)r->a.data, 0, CKPT_MAX_COUNT, true, &step))) return st;
        if (copy) m->run.state[i].step = (float)step;
    }
    if (copy) m->run.g->values_gen++, m->run.state_gen++; /* a device sends them again */
    return TS_OK;
}

/* A schedule kind as the file holds it (any double). */
static const char *schedule_name(double kind) {
    for (int k = TS_LR_CONSTANT; k <= TS_LR_COSINE; k++)
        if (kind == k) return ts_lr_schedule_name((ts_lr_schedule_kind)k);
    return "corrupt";
}

/* Everything is checked before anything is changed: a bad checkpoint
 * leaves the model and loader as they were. */
static ts_status restore(const char *path, const record *recs, uint32_t n, ts_model *m, ts_loader *l) {
    const record *meta;
    ts_status st = want(recs, n, path, "meta", TS_I64, 4, &meta);
    if (st) return st;
    const int64_t *mv = meta->a.data;
    static const char *const opt_names[] = {"sgd", "adam", "adamw"};
    if (mv[2] != (int64_t)m->run.opt.kind || mv[3] != m->run.n_state)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "checkpoint %s was written by a model with optimizer %s and %lld parameters; this one has %s and %d",
                        path, mv[2] >= 0 && mv[2] <= 2 ? opt_names[mv[2]] : "?", (long long)mv[3], opt_names[m->run.opt.kind], m->run.n_state);
    double steps = 0, runs = 0;
    if ((st = number(path, "meta", "the step count", (double)mv[0], 0, CKPT_MAX_COUNT, true, &steps)) ||
        (st = number(path, "meta", "the run count", (double)mv[1], 0, CKPT_MAX_COUNT, true, &runs)))
        return st;
    const record *sr;
    double sv[6];
    if ((st = want(recs, n, path, "schedule", TS_F64, 6, &sr))) return st;
    schedule_values(m, sv);
    if (memcmp(sv, sr->a.data, sizeof sv) != 0) {
        const double *c = sr->a.data;
        return ts_error(TS_ERR_INVALID_ARGUMENT,
                        "checkpoint %s was written following a %s learning-rate schedule from %g (warmup %g, step size %g, gamma %g, total "
                        "%g steps); this model follows %s from %g (warmup %g, step size %g, gamma %g, total %g steps): resume with the same "
                        "learning rate and schedule",
                        path, schedule_name(c[1]), c[0], c[2], c[3], c[4], c[5],
                        ts_lr_schedule_name(m->run.sched.kind), sv[0], sv[2], sv[3], sv[4], sv[5]);
    }
    if ((st = state_records(path, recs, n, m, false))) return st;
    const record *cr = m->run.scaling ? find(recs, n, "scaler") : NULL;
    double scale = 0, good = 0, skipped = 0;
    if (cr && (cr->a.dtype != TS_F64 || ts_array_numel(&cr->a) != 3))
        return ts_error(TS_ERR_FORMAT, "checkpoint %s: 'scaler' must hold 3 f64 values (scale, good steps, skipped steps)", path);
    if (cr) {
        const double *c = cr->a.data;
        if ((st = number(path, "scaler", "the loss scale", c[0], TS_LOSS_SCALE_MIN, TS_LOSS_SCALE_MAX, false, &scale)) ||
            (st = number(path, "scaler", "the good steps in a row", c[1], 0, CKPT_MAX_COUNT, true, &good)) ||
            (st = number(path, "scaler", "the skipped steps", c[2], 0, CKPT_MAX_COUNT, true, &skipped)))
            return st;
    }
    if (l) { /* the last check: it sets the loader's position when it passes */
        const record *pr, *orr;
        if ((st = want(recs, n, path, "loader", TS_I64, 11, &pr))) return st;
        const int64_t *v = pr->a.data;
        double epoch = 0;
        if ((st = number(path, "loader", "the epoch", (double)v[0], 0, CKPT_MAX_COUNT, true, &epoch))) return st;
        if ((st = want(recs, n, path, "loader/order", TS_I64, v[5] > 0 ? v[5] : 0, &orr))) return st;
        ts_loader_pos p = {.epoch = v[0], .pos = v[1], .in_epoch = v[2], .rng = (uint64_t)v[3], .first = v[4], .count = v[5],
                           .batch_size = v[6], .shuffle = v[7], .drop_last = v[8], .seed = (uint64_t)v[9]};
        if ((st = ts_loader_set_pos(l, &p, orr->a.data, ts_array_numel(&orr->a)))) return ts_error_wrap(st, "checkpoint %s", path);
    }
    state_records(path, recs, n, m, true); /* checked above: cannot fail */
    if (cr) /* the loss scale goes on where it was (without the record: from its initial value) */
        m->run.loss_scale = scale, m->run.good_steps = (int64_t)good, m->run.skipped_steps = (int64_t)skipped;
    m->run.steps = (int64_t)steps;
    m->run.runs = (int64_t)runs;
    m->run.opt.lr = (float)ts_lr_at(&m->run.sched, m->run.base_lr, m->run.steps);
    return TS_OK;
}

ts_status ts_checkpoint_load(const char *path, ts_model *m, ts_loader *l) {
    ts_status st = check_model(m, "ts_checkpoint_load");
    if (st) return st;
    if (!path || !*path) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_checkpoint_load: empty path");
    uint8_t *bytes = NULL;
    size_t n = 0;
    if ((st = read_file(path, &bytes, &n))) return st;
    record *recs = NULL;
    uint32_t count = 0;
    st = parse_records(path, bytes, n, &recs, &count);
    if (!st) st = restore(path, recs, count, m, l); /* the records' names are in bytes */
    for (uint32_t i = 0; recs && i < count; i++) ts_npy_free(&recs[i].a);
    ts_free(recs);
    ts_free(bytes);
    return st;
}
