/* staged_record.c -- "cpu-staged" records and replays runs the way the
 * CUDA backend does with CUDA graphs (backend.h's capture entries,
 * exec/replay.c): while recording, every call that works is kept with its
 * arguments as they were and done only when the recording is replayed;
 * the optimizer's step constants alone come from the recording's table,
 * refilled by each walk. So a value that changes from run to run and
 * reaches the device any other way shows here, on any machine, as the
 * wrong result it would give on a GPU. */
#include "backend/backend.h"
#include "backend/cpu/cpu.h"
#include "graph/optim.h"

#include <string.h>

enum { MODE_LAUNCH, MODE_RECORD, MODE_WALK };

typedef enum call_kind { C_COPY, C_FILL, C_ZERO, C_ACCUMULATE, C_SCALE, C_ROUND, C_FORWARD, C_BACKWARD, C_UPDATE, C_STATS, C_OUT } call_kind;

typedef struct call {
    call_kind kind;
    ts_kctx k;             /* C_FORWARD, C_BACKWARD: the context as it was */
    void *dst;
    const void *src;
    size_t bytes;
    float value;           /* C_FILL, C_SCALE */
    int64_t n, begin, end;
    ts_dtype t;
    void *stream;
    ts_half_loss *lost;
    ts_opt_state *state;   /* C_UPDATE: its row of the table */
    int row;
    ts_stats_job job;      /* C_STATS */
    ts_copy_out *out;      /* C_OUT: n copies (the recording's), then fn(arg) */
    void (*fn)(void *);
    void *arg;
} call;

typedef struct step_row {
    ts_optimizer o;
    ts_opt_consts c;
} step_row;

typedef struct recording {
    call *calls;
    int n, cap;
    bool failed;           /* no memory for a call: the recording is refused */
    step_row *rows;
    int rows_cap, used;
} recording;

static ts_backend base; /* the staged table before recording joined it (set once) */
/* what the calls of the thread running a model do now: a run records,
 * walks and replays on its own thread */
static _Thread_local int mode = MODE_LAUNCH;
static _Thread_local recording *cur;

/* Room for one more call (NULL: none, the recording marked failed). */
static call *keep(call_kind kind) {
    recording *r = cur;
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 256;
        call *c = ts_realloc(r->calls, (size_t)cap * sizeof *c);
        if (!c) {
            r->failed = true;
            return NULL;
        }
        r->calls = c, r->cap = cap;
    }
    call *c = &r->calls[r->n++];
    memset(c, 0, sizeof *c);
    c->kind = kind;
    return c;
}

static void s_copy(void *stream, void *dst, const void *src, size_t bytes) {
    if (mode != MODE_RECORD) {
        base.copy_on_device(stream, dst, src, bytes);
        return;
    }
    call *c = keep(C_COPY);
    if (c) c->stream = stream, c->dst = dst, c->src = src, c->bytes = bytes;
}

static void s_fill(void *stream, float *dst, float value, int64_t n) {
    if (mode != MODE_RECORD) {
        base.fill(stream, dst, value, n);
        return;
    }
    call *c = keep(C_FILL);
    if (c) c->stream = stream, c->dst = dst, c->value = value, c->n = n;
}

static void s_zero(void *stream, float *dst, int64_t n) {
    if (mode != MODE_RECORD) {
        base.zero(stream, dst, n);
        return;
    }
    call *c = keep(C_ZERO);
    if (c) c->stream = stream, c->dst = dst, c->n = n;
}

static void s_accumulate(void *stream, float *dst, const float *src, int64_t n) {
    if (mode != MODE_RECORD) {
        base.accumulate(stream, dst, src, n);
        return;
    }
    call *c = keep(C_ACCUMULATE);
    if (c) c->stream = stream, c->dst = dst, c->src = src, c->n = n;
}

static void s_scale(void *stream, float *dst, const float *x, float s, int64_t n) {
    if (mode != MODE_RECORD) {
        base.scale(stream, dst, x, s, n);
        return;
    }
    call *c = keep(C_SCALE);
    if (c) c->stream = stream, c->dst = dst, c->src = x, c->value = s, c->n = n;
}

static void s_round_half(void *stream, ts_dtype t, float *x, int64_t n, ts_half_loss *lost) {
    if (mode != MODE_RECORD) {
        base.round_half(stream, t, x, n, lost);
        return;
    }
    call *c = keep(C_ROUND);
    if (c) c->stream = stream, c->t = t, c->dst = x, c->n = n, c->lost = lost;
}

static void s_forward(const ts_kctx *k) {
    if (mode != MODE_RECORD) {
        base.kernels[k->node->op].forward(k);
        return;
    }
    call *c = keep(C_FORWARD);
    if (c) c->k = *k;
}

static void s_backward(const ts_kctx *k) {
    if (mode != MODE_RECORD) {
        base.kernels[k->node->op].backward(k);
        return;
    }
    call *c = keep(C_BACKWARD);
    if (c) c->k = *k;
}

/* Recording or walking: the constants into the table's next row, the
 * update (recording) reading that row when replayed. */
static void s_opt_update(void *stream, const ts_optimizer *o, const ts_opt_consts *oc, ts_opt_state *s, float *param, const float *grad,
                         int64_t begin, int64_t end) {
    if (mode == MODE_LAUNCH) {
        base.opt_update(stream, o, oc, s, param, grad, begin, end);
        return;
    }
    recording *r = cur;
    if (r->used >= r->rows_cap) {
        r->failed = true;
        return;
    }
    r->rows[r->used] = (step_row){*o, *oc};
    int row = r->used++;
    if (mode == MODE_WALK) return;
    call *c = keep(C_UPDATE);
    if (c) c->stream = stream, c->state = s, c->dst = param, c->src = grad, c->begin = begin, c->end = end, c->row = row;
}

static void s_stats_reduce_many(void *stream, const ts_stats_job *jobs, int n) {
    if (mode != MODE_RECORD) {
        base.stats_reduce_many(stream, jobs, n);
        return;
    }
    for (int i = 0; i < n; i++) {
        call *c = keep(C_STATS);
        if (c) c->stream = stream, c->job = jobs[i];
    }
}

static void s_copy_out_then(void *stream, const ts_copy_out *c, int n, void (*fn)(void *), void *arg) {
    if (mode != MODE_RECORD) {
        base.copy_out_then(stream, c, n, fn, arg);
        return;
    }
    ts_copy_out *kept = ts_malloc((size_t)(n > 0 ? n : 1) * sizeof *kept);
    call *k = kept ? keep(C_OUT) : NULL;
    if (!k) {
        ts_free(kept);
        cur->failed = true;
        return;
    }
    memcpy(kept, c, (size_t)n * sizeof *kept);
    k->stream = stream, k->out = kept, k->n = n, k->fn = fn, k->arg = arg;
}

static void replay_call(const recording *r, const call *c) {
    switch (c->kind) {
    case C_COPY: base.copy_on_device(c->stream, c->dst, c->src, c->bytes); break;
    case C_FILL: base.fill(c->stream, c->dst, c->value, c->n); break;
    case C_ZERO: base.zero(c->stream, c->dst, c->n); break;
    case C_ACCUMULATE: base.accumulate(c->stream, c->dst, c->src, c->n); break;
    case C_SCALE: base.scale(c->stream, c->dst, c->src, c->value, c->n); break;
    case C_ROUND: base.round_half(c->stream, c->t, c->dst, c->n, c->lost); break;
    case C_FORWARD: base.kernels[c->k.node->op].forward(&c->k); break;
    case C_BACKWARD: base.kernels[c->k.node->op].backward(&c->k); break;
    case C_UPDATE: {
        const step_row *s = &r->rows[c->row];
        base.opt_update(c->stream, &s->o, &s->c, c->state, c->dst, c->src, c->begin, c->end);
        break;
    }
    case C_STATS: base.stats_reduce_many(c->stream, &c->job, 1); break;
    case C_OUT: base.copy_out_then(c->stream, c->out, (int)c->n, c->fn, c->arg); break;
    }
}

static void s_recording_free(void *p) {
    recording *r = p;
    if (!r) return;
    for (int i = 0; i < r->n; i++)
        if (r->calls[i].kind == C_OUT) ts_free(r->calls[i].out);
    ts_free(r->calls);
    ts_free(r->rows);
    ts_free(r);
}

static ts_status s_capture_begin(void *stream, int updates, void **out) {
    (void)stream;
    *out = NULL;
    recording *r = ts_calloc(1, sizeof *r);
    if (r) r->rows_cap = updates > 0 ? updates : 1;
    if (r) r->rows = ts_calloc((size_t)r->rows_cap, sizeof *r->rows);
    if (!r || !r->rows) {
        s_recording_free(r);
        return ts_error(TS_ERR_OUT_OF_MEMORY, "cpu-staged: no memory to record a run");
    }
    mode = MODE_RECORD, cur = r;
    *out = r;
    return TS_OK;
}

static ts_status s_capture_end(void *stream, void *p) {
    (void)stream;
    recording *r = p;
    mode = MODE_LAUNCH, cur = NULL;
    if (r->failed) return ts_error(TS_ERR_OUT_OF_MEMORY, "cpu-staged: no memory to record a run (%d calls kept)", r->n);
    return TS_OK;
}

static void s_walk_begin(void *stream, void *p) {
    (void)stream;
    mode = MODE_WALK, cur = p;
    cur->used = 0;
}

static ts_status s_replay(void *stream, void *p, bool launch) {
    (void)stream;
    recording *r = p;
    mode = MODE_LAUNCH, cur = NULL;
    if (!launch) return TS_OK;
    if (r->failed) return ts_error(TS_ERR_INTERNAL, "cpu-staged: a walk made more optimizer updates than its recording has room for");
    for (int i = 0; i < r->n; i++) replay_call(r, &r->calls[i]);
    return TS_OK;
}

static ts_kernel_row rows[TS_OP_COUNT];

void ts_cpu_staged_recording(ts_backend *be) {
    base = *be;
    /* nothing kept from run to run (cache_floats NULL): a recorded call
     * replays with the values_gen it was recorded with */
    for (int op = 0; op < TS_OP_COUNT; op++) rows[op] = (ts_kernel_row){.forward = base.kernels[op].forward ? s_forward : NULL,
                                                                       .backward = base.kernels[op].backward ? s_backward : NULL,
                                                                       .workspace_floats = base.kernels[op].workspace_floats,
                                                                       .stores_din = base.kernels[op].stores_din};
    be->kernels = rows;
    be->copy_on_device = s_copy;
    be->fill = s_fill;
    be->zero = s_zero;
    be->accumulate = s_accumulate;
    be->scale = s_scale;
    be->round_half = s_round_half;
    be->opt_update = s_opt_update;
    be->stats_reduce_many = s_stats_reduce_many;
    be->copy_out_then = s_copy_out_then;
    be->capture_begin = s_capture_begin;
    be->capture_end = s_capture_end;
    be->walk_begin = s_walk_begin;
    be->replay = s_replay;
    be->recording_free = s_recording_free;
}
