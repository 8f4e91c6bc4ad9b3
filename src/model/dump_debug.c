/* dump_debug.c -- the offline debugger dump (ts_options_set_dump_debug):
 * every op's output (and each gradient, when asked) of the chosen runs as
 * one .npy file per tensor under DIR/step_NNNNNN/, with an index DIR/index.tsv
 * (docs/formats.md#debugger-dump). The run is held (observe/hold.c: a copy
 * of each tensor the moment the executor's hook sees it final), and the
 * copies are written after the run, between runs, not in the step loop.
 * Each file is written atomically, and the index is rewritten atomically
 * after each run's files: a crashed run leaves complete files only, and an
 * index that lists only complete ones. A writer thread writes a run's
 * files while the next run goes on (its copies taken after the run); the
 * end of the range, ts_model_finish and ts_model_free wait for it. */
#include "model/dump_debug.h"

#include "graph/ops.h"
#include "core/atomic_file.h"
#include "io/npy.h"
#include "observe/observe.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define INDEX_HEADER "step\tname\tkind\top\tsource\tposition\tdtype\tshape\tpath\n"

/* One tensor for the writer: its values (a copy), file and index row. */
typedef struct pending {
    ts_array a;  /* data owned */
    char *path;  /* DIR/step_NNNNNN/<file> */
    char *row;   /* its line of the index */
} pending;

typedef struct ts_dump {
    /* the writer thread: one step's tensors at a time (job), written while
     * the next step runs; rows, and err/msg, are its own until it is idle */
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pending *job;
    int n_job;
    bool busy, stop;
    ts_status err;       /* the first failure of writing, with its message */
    char msg[1024];
    bool planned;        /* the plan was checked against the limit */
    bool stated;         /* ts_model_dump_debug_plan gave it to the caller */
    bool said_params;    /* a parameter not read before its run was logged */
    bool armed_by_dump;  /* the hold is armed by the dump (not by the user) */
    int64_t written;     /* bytes handed to the writer so far */
    char *rows;          /* the index's rows so far */
    size_t n_rows, cap_rows;
    void **params;       /* per entry: a parameter's value before the run (host) */
    size_t *param_bytes;
    int64_t *param_run;  /* the run each was copied before */
    int n_params;
} ts_dump;

/* mkdir -p dir. */
static ts_status make_dirs(const char *dir) {
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) return ts_error(TS_ERR_INVALID_ARGUMENT, "dump_debug: the directory name is too long");
    for (char *c = p + 1;; c++) {
        bool end = !*c;
        if (*c == '/' || end) {
            *c = 0;
            struct stat sb;
            if (mkdir(p, 0777) != 0 && errno != EEXIST)
                return ts_error(TS_ERR_IO, "dump_debug: cannot create the directory %s: %s; choose a writable DIR", p, strerror(errno));
            if (stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode))
                return ts_error(TS_ERR_IO, "dump_debug: %s is not a directory; choose another DIR", p);
            if (end) break;
            *c = '/';
        }
    }
    return TS_OK;
}

ts_status ts_options_set_dump_debug(ts_options *o, const char *dir, int64_t first_step, int64_t last_step, const char *ops, int grads,
                                    int64_t limit_bytes) {
    if (!o) return ts_error(TS_ERR_INVALID_ARGUMENT, "options is NULL");
    if (!dir) {
        ts_dump_spec_free(o->dump);
        o->dump = NULL;
        return TS_OK;
    }
    if (!*dir) return ts_error(TS_ERR_INVALID_ARGUMENT, "dump_debug: empty directory name; name a DIR to write the dump into");
    if (first_step < 1) return ts_error(TS_ERR_INVALID_ARGUMENT, "dump_debug: steps count from 1, got first step %lld", (long long)first_step);
    if (last_step != 0 && last_step < first_step)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "dump_debug: last step %lld comes before first step %lld; give FIRST:LAST with FIRST <= LAST",
                        (long long)last_step, (long long)first_step);
    if (ops && !*ops) return ts_error(TS_ERR_INVALID_ARGUMENT, "dump_debug: empty op pattern; give a glob such as 'fc1/*' or 'MatMul', or NULL for every op");
    if (limit_bytes < 0) return ts_error(TS_ERR_INVALID_ARGUMENT, "dump_debug: the size limit must be >= 0 bytes (0: no limit), got %lld", (long long)limit_bytes);
    ts_status st = make_dirs(dir); /* can it be written? said now, not after training */
    if (st) return st;
    ts_dump_spec want = {.dir = (char *)(uintptr_t)dir, .ops = (char *)(uintptr_t)ops, .first = first_step, .last = last_step,
                         .grads = grads != 0, .limit = limit_bytes};
    ts_dump_spec *s;
    if (ts_dump_spec_copy(&s, &want)) return ts_error(TS_ERR_OUT_OF_MEMORY, "dump_debug: no memory");
    ts_dump_spec_free(o->dump);
    o->dump = s;
    return TS_OK;
}

/* A parameter, buffer or constant: read where it lives (its value before
 * the run is kept by the dump), not held. */
static bool persists(const ts_model *m, const ts_entry *e) {
    if (e->kind != TS_KIND_VALUE) return false; /* a parameter's gradient is made by the run */
    ts_op op = m->run.g->t[e->node]->op;
    return op == TS_OP_PARAM || op == TS_OP_BUFFER || op == TS_OP_CONST;
}

/* Whether entry e is one the dump writes: an op's output (inputs and
 * parameters included) or, when asked, a gradient; whose name, op type or
 * (a gradient) tensor's name matches the pattern. */
static bool selected(const ts_model *m, const ts_dump_spec *s, const ts_entry *e) {
    if (!(e->kind == TS_KIND_VALUE || (s->grads && e->kind == TS_KIND_GRAD))) return false;
    if (!ts_in_stage(&m->run, e->node)) return false;
    if (!s->ops) return true;
    const ts_tensor *t = m->run.g->t[e->node]; /* a gradient goes with its tensor: --dump-ops 'fc1*' --grads has fc1's */
    return ts_name_matches(s->ops, e->name) || ts_name_matches(s->ops, t->name) || ts_name_matches(s->ops, ts_op_get(t->op)->name);
}

/* The dtype its file holds: a 16-bit cell is held through its f32 view. */
static ts_dtype file_dtype(const ts_entry *e) { return ts_dtype_is_half(e->dtype) ? TS_F32 : e->dtype; }

/* The bytes of a's .npy file. */
static int64_t npy_bytes(const ts_array *a) {
    char hdr[TS_NPY_HEADER_MAX];
    size_t hl = 0, bytes = 0;
    ts_array shape = *a;
    shape.data = (void *)hdr; /* only the header is built */
    if (ts_npy_header_for("dump", &shape, hdr, sizeof hdr, &hl, &bytes)) return TS_NPY_HEADER_MAX + ts_array_numel(a) * (int64_t)ts_dtype_size(a->dtype);
    return (int64_t)(hl + bytes);
}

static int64_t file_bytes(const ts_entry *e) {
    ts_array a = {.dtype = file_dtype(e), .ndim = e->shape.ndim};
    for (int i = 0; i < e->shape.ndim; i++) a.shape[i] = e->shape.d[i];
    return npy_bytes(&a);
}

/* n bytes for a person: B, KiB or MiB. */
static const char *size_text(int64_t n, char *buf, size_t cap) {
    if (n < 1024) snprintf(buf, cap, "%lld B", (long long)n);
    else if (n < 1048576) snprintf(buf, cap, "%.1f KiB", (double)n / 1024.0);
    else snprintf(buf, cap, "%.1f MiB", (double)n / 1048576.0);
    return buf;
}

/* One run's tensors and bytes. */
static void per_run(const ts_model *m, const ts_dump_spec *s, int64_t *tensors, int64_t *bytes) {
    *tensors = 0, *bytes = 0;
    for (int e = 0; e < m->run.prog->n_entries; e++)
        if (selected(m, s, &m->run.prog->entries[e])) (*tensors)++, *bytes += file_bytes(&m->run.prog->entries[e]);
}

static ts_status plan(ts_model *m, int64_t last_run, int64_t *tensors, int64_t *steps, int64_t *bytes) {
    const ts_dump_spec *s = m->run.opts.dump;
    int64_t first = s->first > m->run.runs + 1 ? s->first : m->run.runs + 1;
    int64_t last = s->last && (last_run < 1 || s->last < last_run) ? s->last : last_run; /* the range, within the runs the caller will make */
    int64_t one;
    per_run(m, s, tensors, &one);
    *steps = last >= first ? last - first + 1 : 0;
    *bytes = one * *steps;
    char want[32], limit[32];
    if (s->limit && *bytes > s->limit)
        return ts_error(TS_ERR_INVALID_ARGUMENT,
                        "dump_debug: the dump of steps %lld:%lld would take %s (%lld tensors x %lld steps), over the limit of %s; "
                        "raise the limit (--dump-limit SIZE, Options.dump_debug(limit=...), 0 for none), or dump fewer steps (--dump-steps A:B) "
                        "or ops (--dump-ops GLOB)",
                        (long long)first, (long long)last, size_text(*bytes, want, sizeof want), (long long)*tensors, (long long)*steps,
                        size_text(s->limit, limit, sizeof limit));
    return TS_OK;
}

ts_status ts_dump_debug_plan(ts_model *m, int64_t last_run, int64_t *tensors, int64_t *steps, int64_t *bytes) {
    if (!m->dump && !(m->dump = ts_calloc(1, sizeof *m->dump))) return ts_error(TS_ERR_OUT_OF_MEMORY, "dump_debug: no memory");
    ts_status st = plan(m, last_run, tensors, steps, bytes);
    m->dump->stated = !st; /* the caller says it: not logged again at the first dumped run */
    return st;
}

static bool due(const ts_dump_spec *s, int64_t run) { return run >= s->first && (!s->last || run <= s->last); }

static void disarm(ts_model *m) {
    if (m->dump && m->dump->armed_by_dump) ts_hold_arm(&m->run, 0);
    if (m->dump) m->dump->armed_by_dump = false;
}

ts_status ts_dump_before_run(ts_model *m) {
    const ts_dump_spec *s = m->run.opts.dump;
    if (!s) return TS_OK;
    if (!m->dump && !(m->dump = ts_calloc(1, sizeof *m->dump))) return ts_error(TS_ERR_OUT_OF_MEMORY, "dump_debug: no memory");
    ts_dump *d = m->dump;
    if (!due(s, m->run.runs + 1)) {
        disarm(m);
        return TS_OK;
    }
    if (!d->planned) { /* said before the first dumped run, refused over the limit */
        int64_t tensors, steps, bytes;
        ts_status st = plan(m, s->last ? 0 : m->run.runs + 1, &tensors, &steps, &bytes); /* an open range: one step */
        if (st) return st;
        char limit[32] = "none", size[32];
        if (s->limit) size_text(s->limit, limit, sizeof limit);
        if (s->last && !d->stated)
            ts_logf(TS_LOG_INFO, "dump_debug: %lld tensors x %lld steps = %s planned into %s (limit %s)", (long long)tensors, (long long)steps,
                    size_text(bytes, size, sizeof size), s->dir, limit);
        else if (!d->stated)
            ts_logf(TS_LOG_INFO, "dump_debug: %lld tensors, %s a step, from step %lld on into %s (limit %s)", (long long)tensors,
                    size_text(bytes, size, sizeof size), (long long)s->first, s->dir, limit);
        d->planned = true;
    }
    if (!ts_hold_armed(&m->run)) {
        ts_status st = ts_hold_arm(&m->run, 1);
        if (st) return st;
        d->armed_by_dump = true;
    }
    ts_status hs = ts_hold_prepare(&m->run); /* now (the run does it again, a no-op): a device's parameters are read through it */
    if (hs) return hs;
    /* the parameters as the run reads them (the hold reads them where
     * they live: after the run, their updated values) */
    const ts_prog *p = m->run.prog;
    if (d->n_params < p->n_entries) {
        void **v = ts_realloc(d->params, (size_t)p->n_entries * sizeof *v);
        if (v) d->params = v;
        size_t *b = v ? ts_realloc(d->param_bytes, (size_t)p->n_entries * sizeof *b) : NULL;
        if (b) d->param_bytes = b;
        int64_t *r = b ? ts_realloc(d->param_run, (size_t)p->n_entries * sizeof *r) : NULL;
        if (r) d->param_run = r;
        if (!v || !b || !r) return ts_error(TS_ERR_OUT_OF_MEMORY, "dump_debug: no memory");
        for (int e = d->n_params; e < p->n_entries; e++) d->params[e] = NULL, d->param_bytes[e] = 0, d->param_run[e] = 0;
        d->n_params = p->n_entries;
    }
    for (int e = 0; e < p->n_entries; e++) {
        const ts_entry *en = &p->entries[e];
        if (!selected(m, s, en) || !persists(m, en)) continue;
        ts_array a;
        if (ts_hold_read(&m->run, en->name, &a)) continue; /* a device's, before its first run: not dumped (said after it) */
        size_t bytes = (size_t)ts_array_numel(&a) * ts_dtype_size(a.dtype);
        if (d->param_bytes[e] < bytes || !d->params[e]) {
            void *q = ts_realloc(d->params[e], bytes ? bytes : 1);
            if (!q) return ts_error(TS_ERR_OUT_OF_MEMORY, "dump_debug: no memory for a copy of '%s'", en->name);
            d->params[e] = q;
        }
        memcpy(d->params[e], a.data, bytes);
        d->param_bytes[e] = bytes;
        d->param_run[e] = m->run.runs + 1;
    }
    return TS_OK;
}

/* Appends to the index's rows. */
static ts_status add_row(ts_dump *d, const char *row, size_t n) {
    if (d->n_rows + n + 1 > d->cap_rows) {
        size_t cap = d->cap_rows ? d->cap_rows : 4096;
        while (cap < d->n_rows + n + 1) cap *= 2;
        char *r = ts_realloc(d->rows, cap);
        if (!r) return ts_error(TS_ERR_OUT_OF_MEMORY, "dump_debug: no memory for the index");
        d->rows = r, d->cap_rows = cap;
    }
    memcpy(d->rows + d->n_rows, row, n);
    d->n_rows += n;
    d->rows[d->n_rows] = 0;
    return TS_OK;
}

/* A field of the index: tab, newline and backslash escaped as \t \n \\. */
static size_t field(char *out, size_t cap, const char *s) {
    size_t k = 0;
    for (; *s && k + 3 < cap; s++) {
        char c = *s == '\t' ? 't' : *s == '\n' ? 'n' : *s == '\\' ? '\\' : 0;
        if (c) out[k++] = '\\', out[k++] = c;
        else out[k++] = *s;
    }
    out[k] = 0;
    return k;
}

/* numpy's name of a dtype (np.dtype(name)). */
static const char *numpy_name(ts_dtype t) {
    static const char *const names[] = {"float32", "float64", "int32", "int64", "uint8", "bool", "int8", "int16", "uint16", "uint32", "uint64"};
    return (size_t)t < sizeof names / sizeof *names ? names[t] : ts_dtype_name(t);
}

static ts_status write_index(const ts_dump_spec *s, const ts_dump *d) {
    char path[4200];
    snprintf(path, sizeof path, "%s/index.tsv", s->dir);
    ts_atomic_file af;
    ts_status st = ts_atomic_open(&af, path);
    if (st) return ts_error_wrap(st, "dump_debug: writing the index");
    if (fputs(INDEX_HEADER, af.f) == EOF || (d->n_rows && fwrite(d->rows, 1, d->n_rows, af.f) != d->n_rows)) {
        st = ts_error(TS_ERR_IO, "dump_debug: cannot write %s: %s", path, strerror(errno));
        ts_atomic_abort(&af);
        return st;
    }
    return ts_atomic_commit(&af);
}

static void free_job(pending *job, int n) {
    for (int i = 0; i < n; i++) ts_free(job[i].a.data), ts_free(job[i].path), ts_free(job[i].row);
    ts_free(job);
}

static void *writer_main(void *arg) {
    ts_model *m = arg;
    ts_dump *d = m->dump;
    const ts_dump_spec *s = m->run.opts.dump;
    for (;;) {
        pthread_mutex_lock(&d->mu);
        while (!d->busy && !d->stop) pthread_cond_wait(&d->cv, &d->mu);
        bool quit = !d->busy;
        pthread_mutex_unlock(&d->mu);
        if (quit) break;
        ts_status st = TS_OK;
        int done = 0;
        for (; !d->err && !st && done < d->n_job; done++) {
            pending *q = &d->job[done];
            st = ts_npy_save(q->path, &q->a);
            if (!st) st = add_row(d, q->row, strlen(q->row));
        }
        if (!d->err && done) { /* the rows of the files written, a failed step's too */
            ts_status wi = write_index(s, d);
            if (!st) st = wi;
        }
        if (st && !d->err) {
            snprintf(d->msg, sizeof d->msg, "dump_debug: %s", ts_last_error());
            d->err = st;
        }
        free_job(d->job, d->n_job);
        pthread_mutex_lock(&d->mu);
        d->job = NULL, d->n_job = 0, d->busy = false;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
    }
    return NULL;
}

/* Until the writer is idle: its first failure (said once). */
static ts_status wait_writer(ts_dump *d) {
    if (!d || !d->started) return TS_OK;
    pthread_mutex_lock(&d->mu);
    while (d->busy) pthread_cond_wait(&d->cv, &d->mu);
    pthread_mutex_unlock(&d->mu);
    if (!d->err || d->err == TS_ERR_CANCELLED) return TS_OK;
    ts_status st = ts_error(d->err, "%s", d->msg);
    d->err = TS_ERR_CANCELLED; /* said; nothing more is written */
    return st;
}

/* Tensor e of run `run` for the writer: a copy of its values, its file
 * and its row. */
static ts_status prepare(ts_model *m, const ts_dump_spec *s, ts_dump *d, int e, int64_t run, const char *step_dir, const ts_array *a,
                         pending *q) {
    const ts_entry *en = &m->run.prog->entries[e];
    const ts_tensor *t = m->run.g->t[en->node];
    char safe[200], file[300], path[4600];
    size_t k = 0;
    for (const char *c = en->name; *c && k + 1 < sizeof safe; c++) /* a file name from the tensor's: [A-Za-z0-9._-] */
        safe[k++] = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '.' || *c == '-' ? *c : '_';
    safe[k] = 0;
    snprintf(file, sizeof file, "%s/%05d_%s.npy", step_dir, e, safe); /* the entry's number keeps names apart */
    snprintf(path, sizeof path, "%s/%s", s->dir, file);
    size_t data = (size_t)ts_array_numel(a) * ts_dtype_size(a->dtype);
    int64_t bytes = npy_bytes(a);
    char limit[32];
    if (s->limit && d->written + bytes > s->limit)
        return ts_error(TS_ERR_IO, "dump_debug: the dump reached its limit of %s at step %lld ('%s'); raise the limit (--dump-limit SIZE, "
                        "Options.dump_debug(limit=...), 0 for none), or dump fewer steps or ops", size_text(s->limit, limit, sizeof limit),
                        (long long)run, en->name);
    char name[1024], where[600], src[1300], shape[TS_MAX_DIMS * 24 + 4], row[4096];
    field(name, sizeof name, en->name);
    field(src, sizeof src, ts_tensor_where(t, where, sizeof where));
    size_t n = 0;
    shape[n++] = '[';
    for (int i = 0; i < a->ndim; i++) n += (size_t)snprintf(shape + n, sizeof shape - n, i ? ",%lld" : "%lld", (long long)a->shape[i]);
    shape[n++] = ']', shape[n] = 0;
    int len = snprintf(row, sizeof row, "%lld\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", (long long)run, name, en->kind == TS_KIND_GRAD ? "grad" : "value",
                       ts_op_get(t->op)->name, src, en->node, numpy_name(a->dtype), shape, file);
    if (len < 0 || (size_t)len >= sizeof row) return ts_error(TS_ERR_INTERNAL, "dump_debug: the index row of '%s' is too long", en->name);
    q->a = *a;
    q->a.data = ts_malloc(data ? data : 1);
    q->path = ts_strdup(path);
    q->row = ts_strdup(row);
    if (!q->a.data || !q->path || !q->row) return ts_error(TS_ERR_OUT_OF_MEMORY, "dump_debug: no memory for a copy of '%s' (%zu bytes)", en->name, data);
    memcpy(q->a.data, a->data, data);
    d->written += bytes;
    return TS_OK;
}

ts_status ts_dump_after_run(ts_model *m) {
    const ts_dump_spec *s = m->run.opts.dump;
    ts_dump *d = m->dump;
    int64_t run = m->run.runs; /* counted already */
    if (!s || !d || !due(s, run)) return TS_OK;
    ts_status st = wait_writer(d); /* the previous step's files */
    if (st) {
        disarm(m);
        return st;
    }
    char step_dir[32], path[4200];
    snprintf(step_dir, sizeof step_dir, "step_%06lld", (long long)run);
    snprintf(path, sizeof path, "%s/%s", s->dir, step_dir);
    st = make_dirs(path);
    const ts_prog *p = m->run.prog;
    pending *job = st ? NULL : ts_calloc((size_t)(p->n_entries ? p->n_entries : 1), sizeof *job);
    if (!st && !job) st = ts_error(TS_ERR_OUT_OF_MEMORY, "dump_debug: no memory");
    int n = 0;
    for (int e = 0; !st && e < p->n_entries; e++) {
        const ts_entry *en = &p->entries[e];
        if (!selected(m, s, en)) continue;
        ts_array a;
        if (persists(m, en)) {
            if (e >= d->n_params || d->param_run[e] != run) { /* never its value after the run's update instead */
                if (!d->said_params) ts_logf(TS_LOG_WARN, "dump_debug: step %lld has no parameters: %s could not be read before it", (long long)run, en->name);
                d->said_params = true;
                continue;
            }
            if (ts_hold_read(&m->run, en->name, &a)) continue; /* the dtype and shape; the values from before the run */
            a.data = d->params[e];
        } else if (ts_hold_read(&m->run, en->name, &a)) {
            continue; /* not made by this run (it was cancelled before) */
        }
        st = prepare(m, s, d, e, run, step_dir, &a, &job[n]);
        n++;
    }
    if (st && job) { /* what was prepared before the failure is written: the index lists it */
        ts_free(job[n - 1].a.data), ts_free(job[n - 1].path), ts_free(job[n - 1].row);
        n--;
    }
    if (!d->started && job) {
        pthread_mutex_init(&d->mu, NULL);
        pthread_cond_init(&d->cv, NULL);
        if (pthread_create(&d->thread, NULL, writer_main, m) != 0) {
            pthread_mutex_destroy(&d->mu);
            pthread_cond_destroy(&d->cv);
            free_job(job, n);
            disarm(m);
            return ts_error(TS_ERR_INTERNAL, "dump_debug: cannot start the writer thread");
        }
        d->started = true;
    }
    if (job) {
        pthread_mutex_lock(&d->mu);
        d->job = job, d->n_job = n, d->busy = true;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
    }
    if (st || (s->last && run >= s->last)) { /* the end of the range: written before the call returns */
        ts_status w = wait_writer(d);
        if (!st) st = w;
        disarm(m);
    }
    return st;
}

ts_status ts_dump_finish(ts_model *m) { return m ? wait_writer(m->dump) : TS_OK; }

void ts_dump_free(ts_model *m) {
    ts_dump *d = m ? m->dump : NULL;
    if (!d) return;
    if (d->started) {
        ts_status st = wait_writer(d);
        if (st) ts_logf(TS_LOG_ERROR, "%s", ts_last_error());
        pthread_mutex_lock(&d->mu);
        d->stop = true;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->thread, NULL);
        pthread_mutex_destroy(&d->mu);
        pthread_cond_destroy(&d->cv);
    }
    for (int e = 0; e < d->n_params; e++) ts_free(d->params[e]);
    ts_free(d->params);
    ts_free(d->param_bytes);
    ts_free(d->param_run);
    ts_free(d->rows);
    ts_free(d);
    m->dump = NULL;
}
