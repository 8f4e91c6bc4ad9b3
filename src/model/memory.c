/* memory.c -- bytes a compiled model holds by lifetime class
 * (docs/observation.md#diagnostics), next to the process's RSS/PSS/USS. */
#include "model/model.h"

#include "backend/backend.h"

#include "diag/memory.h"
#include "diag/metrics.h"

#include <stdio.h>
#include <string.h>

ts_status ts_model_memory_get(const ts_model *m, ts_model_memory *out) {
    if (!m || !out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_memory_get: NULL argument");
    memset(out, 0, sizeof *out);
    const ts_prog *p = m->run.prog;
    if (!m->compiled || !p)
        return ts_error(TS_ERR_STATE, "ts_model_memory_get: the memory plan is made at compile; compile the model first");
    const ts_graph *g = m->run.g;
    for (size_t i = 0; i < g->n; i++)
        if (g->t[i]->op == TS_OP_PARAM) out->parameters += ts_shape_numel(&g->t[i]->shape) * (int64_t)sizeof(float);
    /* parameter gradients and accumulators; activation gradients share the
     * activations arena */
    out->gradients = (int64_t)p->bytes_grads;
    for (int s = 0; s < m->run.n_state; s++) {
        const ts_opt_state *st = &m->run.state[s];
        int64_t bytes = ts_shape_numel(&g->t[st->node]->shape) * (int64_t)sizeof(float);
        out->optimizer_state += (st->accl ? bytes : 0) + (st->accl1 ? bytes : 0) + (st->accl2 ? bytes : 0);
        if (st->accl1) out->optimizer_state += (int64_t)sizeof st->step; /* Adam's step count */
    }
    out->activations = (int64_t)p->bytes_activations;
    out->anchors = (int64_t)p->bytes_anchors;
    out->activations_without_reuse = (int64_t)p->bytes_activations_unplanned;
    if (ts_memory_get(&out->process)) out->process.rss = out->process.pss = out->process.uss = -1; /* model numbers still hold */
    if (m->run.dev.backend->memory_info) {
        ts_device_memory d;
        m->run.dev.backend->memory_info(&d);
        out->device_in_use = (int64_t)d.in_use, out->device_peak = (int64_t)d.peak;
        out->device_free = (int64_t)d.free, out->device_total = (int64_t)d.total;
    }
    return TS_OK;
}

static const char *bytes_or_na(int64_t b, char *buf, size_t n) {
    if (b < 0) {
        snprintf(buf, n, "n/a");
        return buf;
    }
    return ts_format_bytes((double)b, buf, n);
}

const char *ts_model_memory_line(const ts_model *m, char *buf, size_t n) {
    if (!buf || n == 0) return buf;
    ts_model_memory mm;
    if (ts_model_memory_get(m, &mm)) {
        snprintf(buf, n, "memory: unavailable (%s)", ts_last_error());
        return buf;
    }
    char b[9][32];
    snprintf(buf, n, "memory: params %s grads %s optimizer %s activations %s (%s without reuse) anchors %s rss %s pss %s uss %s",
             bytes_or_na(mm.parameters, b[0], sizeof b[0]), bytes_or_na(mm.gradients, b[1], sizeof b[1]),
             bytes_or_na(mm.optimizer_state, b[2], sizeof b[2]), bytes_or_na(mm.activations, b[3], sizeof b[3]),
             bytes_or_na(mm.activations_without_reuse, b[4], sizeof b[4]), bytes_or_na(mm.anchors, b[5], sizeof b[5]),
             bytes_or_na(mm.process.rss, b[6], sizeof b[6]), bytes_or_na(mm.process.pss, b[7], sizeof b[7]),
             bytes_or_na(mm.process.uss, b[8], sizeof b[8]));
    size_t used = strlen(buf);
    if (mm.device_total > 0 && used < n)
        snprintf(buf + used, n - used, " %s %s (peak %s, free %s of %s)", m->run.dev.backend->name, bytes_or_na(mm.device_in_use, b[0], sizeof b[0]),
                 bytes_or_na(mm.device_peak, b[1], sizeof b[1]), bytes_or_na(mm.device_free, b[2], sizeof b[2]),
                 bytes_or_na(mm.device_total, b[3], sizeof b[3]));
    return buf;
}

/* ------------------------------------------------- the liveness report */

#define ALIGNED(b) (((int64_t)(b) + 63) / 64 * 64)

static void put(ts_memory_buffer *out, size_t cap, size_t *n, ts_memory_buffer b) {
    if (*n < cap) out[*n] = b;
    (*n)++;
}

ts_status ts_model_memory_plan(const ts_model *m, ts_memory_buffer *out, size_t cap, size_t *n, int64_t *n_points) {
    if (!m || !n || (cap && !out)) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_memory_plan: NULL argument");
    const ts_prog *p = m->run.prog;
    if (!m->compiled || !p)
        return ts_error(TS_ERR_STATE, "ts_model_memory_plan: the memory plan is made at compile; compile the model first");
    const ts_graph *g = m->run.g;
    int64_t L = p->n_order, last = m->run.training ? 2 * L : L - 1;
    if (n_points) *n_points = last + 1;
    *n = 0;
    for (int k = 0; k < p->n_plan; k++) { /* the activations arena, as planned */
        const ts_entry *en = &p->entries[p->plan_entry[k]];
        const ts_interval *iv = &p->plan[k];
        bool grad = en->kind == TS_KIND_GRAD;
        put(out, cap, n, (ts_memory_buffer){g->t[en->node], grad ? TS_MEM_GRADIENTS : TS_MEM_ACTIVATIONS, grad, iv->start,
                                            iv->end < last ? iv->end : last, (int64_t)iv->bytes});
    }
    /* parameter gradients and accumulators: the gradients arena, the whole step */
    const float *lo = p->arena_grads, *hi = p->arena_grads ? p->arena_grads + p->bytes_grads / sizeof(float) : NULL;
    for (int e = 0; e < p->n_entries; e++) {
        const ts_entry *en = &p->entries[e];
        if ((en->kind != TS_KIND_GRAD && en->kind != TS_KIND_ACCUM) || !en->data || en->data < lo || en->data >= hi) continue;
        int ge = p->grad_entry[en->node];
        bool alias = en->kind == TS_KIND_ACCUM && ge >= 0 && ge != e && p->entries[ge].data == en->data; /* the gradient's buffer */
        if (!alias) put(out, cap, n, (ts_memory_buffer){g->t[en->node], TS_MEM_GRADIENTS, 1, 0, last, ALIGNED((size_t)en->numel * sizeof(float))});
    }
    for (int s = 0; s < m->run.n_state; s++) {
        const ts_opt_state *st = &m->run.state[s];
        int64_t bytes = ts_shape_numel(&g->t[st->node]->shape) * (int64_t)sizeof(float);
        int64_t k = (st->accl != NULL) + (st->accl1 != NULL) + (st->accl2 != NULL);
        if (k) put(out, cap, n, (ts_memory_buffer){g->t[st->node], TS_MEM_OPTIMIZER, 0, 0, last, k * bytes});
    }
    for (size_t i = 0; i < g->n; i++)
        if (g->t[i]->op == TS_OP_PARAM)
            put(out, cap, n, (ts_memory_buffer){g->t[i], TS_MEM_PARAMETERS, 0, 0, last, ts_shape_numel(&g->t[i]->shape) * (int64_t)sizeof(float)});
    if (p->bytes_workspace) put(out, cap, n, (ts_memory_buffer){NULL, TS_MEM_WORKSPACE, 0, 0, last, (int64_t)p->bytes_workspace});
    return TS_OK;
}

const ts_tensor *ts_model_memory_point(const ts_model *m, int64_t point, int *backward) {
    int dummy;
    if (!backward) backward = &dummy;
    *backward = 0;
    if (!m || !m->compiled || !m->run.prog) {
        ts_error(TS_ERR_STATE, "ts_model_memory_point: compile the model first");
        return NULL;
    }
    int64_t L = m->run.prog->n_order, n = m->run.training ? 2 * L + 1 : L;
    if (point < 0 || point >= n) {
        ts_error(TS_ERR_INVALID_ARGUMENT, "ts_model_memory_point: point %lld is not in 0..%lld", (long long)point, (long long)n - 1);
        return NULL;
    }
    if (point == 2 * L) {
        *backward = 2;
        return NULL;
    }
    *backward = point >= L;
    return m->run.g->t[m->run.prog->order[point < L ? point : 2 * L - 1 - point]];
}

void ts_memory_plan_metrics(const ts_model *m) {
    size_t n = 0;
    int64_t P = 0;
    if (ts_model_memory_plan(m, NULL, 0, &n, &P) || P <= 0) return;
    ts_memory_buffer *b = ts_malloc((n ? n : 1) * sizeof *b);
    int64_t *delta = ts_calloc((size_t)P + 1, sizeof *delta);
    if (b && delta && !ts_model_memory_plan(m, b, n, &n, &P)) {
        for (size_t i = 0; i < n; i++) delta[b[i].start] += b[i].bytes, delta[b[i].end + 1] -= b[i].bytes;
        int64_t live = 0, peak = 0;
        for (int64_t p = 0; p < P; p++) live += delta[p], peak = live > peak ? live : peak;
        ts_metric_record_value("MemoryPlanPeakBytes", (double)peak); /* the most bytes live at one point of the step */
    }
    ts_free(b);
    ts_free(delta);
}
