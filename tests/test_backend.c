/* test_backend.c -- the device contract (src/backend/backend.h) as the CPU
 * backend implements it: a kernel row for every op that agrees with the
 * op table (a forward for every op that computes, a backward exactly where
 * a gradient flows), memory that comes zeroed and goes back, copies, fills
 * and reductions that do what the contract says; and a model that runs
 * every kernel, fill and allocation through its backend, so a backend
 * that wraps the CPU's sees every call and gives the same numbers. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "backend/backend.h"
#include "model/model.h"
#include "graph/ops.h"

enum { B = 4, IN = 5, HID = 6, CLS = 3, D = 2, A = 2 };

static void check_table(const ts_backend *be) {
    CHECK(be && strcmp(be->name, "cpu") == 0, "the CPU backend is named 'cpu'");
    CHECK(be->alloc && be->free && be->copy_to_device && be->copy_to_host && be->copy_on_device && be->synchronize && be->fill &&
              be->zero && be->accumulate && be->scale && be->kernels && be->opt_update && be->opt_update_summarised &&
              be->has_nonfinite && be->event_record && be->event_elapsed_ns,
          "the CPU backend implements every entry of the contract");
    int bad_fwd = 0, bad_bwd = 0;
    for (int op = 0; op < TS_OP_COUNT; op++) {
        const ts_op_def *def = ts_op_get((ts_op)op);
        const ts_kernel_row *kr = &be->kernels[op];
        bool leaf = def->arity == 0;
        if (leaf != (kr->forward == NULL)) bad_fwd++, printf("  %s: forward %s\n", def->name, kr->forward ? "on a leaf" : "missing");
        if (def->has_backward != (kr->backward != NULL))
            bad_bwd++, printf("  %s: backward %s\n", def->name, kr->backward ? "where no gradient flows" : "missing");
    }
    CHECK(bad_fwd == 0, "a forward kernel for every op that computes, none for the leaves (%d wrong)", bad_fwd);
    CHECK(bad_bwd == 0, "a backward kernel exactly for the ops the op table says a gradient flows through (%d wrong)", bad_bwd);
    CHECK(be->kernels[TS_OP_CONV2D].workspace_floats != NULL, "Conv2d's CPU kernels ask for a workspace (im2col)");
}

static void check_entries(const ts_backend *be) {
    void *mem = NULL;
    CHECK_OK(be->alloc(64 * sizeof(float), &mem), "alloc 64 floats");
    float *x = mem;
    int zeroed = 1;
    for (int i = 0; x && i < 64; i++) zeroed &= x[i] == 0.0f;
    CHECK(x && zeroed, "device memory comes zeroed");
    float host[64], back[64];
    for (int i = 0; i < 64; i++) host[i] = (float)i - 20.0f;
    be->copy_to_device(NULL, x, host, sizeof host);
    be->copy_to_host(NULL, back, x, sizeof back);
    CHECK_OK(be->synchronize(NULL), "synchronize");
    CHECK(memcmp(host, back, sizeof host) == 0, "host -> device -> host copies give the values back");
    float y[64];
    be->copy_on_device(NULL, y, x, sizeof y);
    be->accumulate(NULL, y, x, 64);
    be->scale(NULL, y, y, 0.5f, 64);
    int same = 1;
    for (int i = 0; i < 64; i++) same &= y[i] == host[i];
    CHECK(same, "copy on the device, accumulate (y += x) and scale (y *= 0.5) give x back");
    be->fill(NULL, y, 3.5f, 64);
    CHECK(y[0] == 3.5f && y[63] == 3.5f, "fill writes the value");
    be->zero(NULL, y, 64);
    CHECK(y[0] == 0.0f && y[63] == 0.0f, "zero clears");
    CHECK(!be->has_nonfinite(NULL, x, 64), "no NaN/Inf found in finite values");
    x[37] = INFINITY;
    CHECK(be->has_nonfinite(NULL, x, 64), "an Inf is found");
    x[37] = NAN;
    CHECK(be->has_nonfinite(NULL, x, 64), "a NaN is found");
    x[37] = 17.0f;
    ts_event e0, e1;
    be->event_record(NULL, &e0);
    be->event_record(NULL, &e1);
    CHECK(be->event_elapsed_ns(&e0, &e1) < 1000000000ull, "timing events measure the time between them");
    be->free(mem);
    be->free(NULL);
}

/* ---- a backend that wraps the CPU's and counts what the executor asks */

static const ts_backend *cpu;
static ts_backend counting;
static ts_kernel_row counting_rows[TS_OP_COUNT];
static int64_t n_fwd, n_bwd, n_alloc, n_free, n_zero, n_accumulate, n_scale, n_copy, n_update;

static void count_fwd(const ts_kctx *k) { n_fwd++, cpu->kernels[k->node->op].forward(k); }
static void count_bwd(const ts_kctx *k) { n_bwd++, cpu->kernels[k->node->op].backward(k); }
static ts_status count_alloc(size_t bytes, void **out) { return n_alloc++, cpu->alloc(bytes, out); }
static void count_free(void *p) { n_free += p != NULL, cpu->free(p); }
static void count_zero(void *s, float *dst, int64_t n) { n_zero++, cpu->zero(s, dst, n); }
static void count_accumulate(void *s, float *dst, const float *src, int64_t n) { n_accumulate++, cpu->accumulate(s, dst, src, n); }
static void count_scale(void *s, float *dst, const float *x, float f, int64_t n) { n_scale++, cpu->scale(s, dst, x, f, n); }
static void count_copy(void *s, void *dst, const void *src, size_t bytes) { n_copy++, cpu->copy_on_device(s, dst, src, bytes); }
static void count_update(void *s, const ts_optimizer *o, const struct ts_opt_consts *c, struct ts_opt_state *st, float *param,
                         const float *grad, int64_t begin, int64_t end) {
    n_update++, cpu->opt_update(s, o, c, st, param, grad, begin, end);
}

static void make_counting(void) {
    cpu = ts_backend_cpu();
    counting = *cpu;
    for (int op = 0; op < TS_OP_COUNT; op++) {
        counting_rows[op] = cpu->kernels[op];
        if (cpu->kernels[op].forward) counting_rows[op].forward = count_fwd;
        if (cpu->kernels[op].backward) counting_rows[op].backward = count_bwd;
    }
    counting.kernels = counting_rows;
    counting.alloc = count_alloc;
    counting.free = count_free;
    counting.zero = count_zero;
    counting.accumulate = count_accumulate;
    counting.scale = count_scale;
    counting.copy_on_device = count_copy;
    counting.opt_update = count_update;
}

/* Trains x -> fc1 -> relu -> fc2 -> cross entropy for one run (D x A
 * micro-batches) on `be`; the loss and fc2.weight after it. */
static ts_status train(const ts_backend *be, float *loss, float *w, int64_t *fwd_nodes, int64_t *bwd_nodes, int64_t *fused) {
    ts_graph *g = ts_graph_new(7);
    int64_t xs[] = {B, IN}, ys[] = {B};
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, xs), *y = ts_input(g, "labels", TS_I32, 1, ys);
    ts_tensor *h = ts_relu(g, ts_linear(g, x, HID, "fc1"));
    ts_tensor *l = ts_cross_entropy(g, ts_linear(g, h, CLS, "fc2"), y);
    ts_options *o = ts_options_new();
    ts_options_set_device_iterations(o, D);
    ts_options_set_gradient_accumulation(o, A);
    ts_model *m = NULL;
    ts_status st = ts_graph_status(g);
    if (!st) st = ts_model_training(&m, g, l, o, ts_sgd(0.1f, 0.0f, 0.0f));
    if (!st) m->run.dev.backend = be;
    if (!st) st = ts_model_compile(m);
    if (!st) {
        *fwd_nodes = *bwd_nodes = *fused = 0;
        for (int k = 0; k < m->run.prog->n_order; k++) {
            const ts_tensor *t = g->t[m->run.prog->order[k]];
            *fwd_nodes += ts_op_get(t->op)->arity != 0;
            *bwd_nodes += m->run.prog->needs_grad[t->id] && ts_op_get(t->op)->has_backward;
            /* the ops done in a producer's kernel, as compile planned them
             * (a Linear's bias Add, and fc1's Relu after it: exec.c's
             * bias_fusable and bias_act_fusable) */
            const int *pass = m->run.prog->pass + 3 * k;
            *fused += pass[0] != TS_PASS_NONE ? (pass[1] >= 0) + (pass[2] >= 0) : 0;
        }
        float xv[D * A * B * IN];
        int32_t yv[D * A * B];
        for (int i = 0; i < D * A * B * IN; i++) xv[i] = sinf((float)i);
        for (int i = 0; i < D * A * B; i++) yv[i] = i % CLS;
        const char *names[2] = {"x", "labels"};
        ts_array in[2] = {ts_array_f32(xv, 2, (int64_t[]){D * A * B, IN}), ts_array_i32(yv, 1, (int64_t[]){D * A * B})};
        st = ts_model_run(m, names, in, 2);
    }
    if (!st) {
        const ts_prog *p = m->run.prog;
        *loss = p->entries[p->value_entry[l->id]].data[0];
        memcpy(w, ts_graph_find(g, "fc2.weight")->value, sizeof(float) * CLS * HID);
    }
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
    return st;
}

int main(void) {
    const ts_backend *be = ts_backend_cpu();
    check_table(be);
    check_entries(be);

    make_counting();
    float loss_cpu = 0, loss_counted = 1, w_cpu[CLS * HID], w_counted[CLS * HID];
    int64_t fwd_nodes = 0, bwd_nodes = 0, fused = 0;
    CHECK_OK(train(be, &loss_cpu, w_cpu, &fwd_nodes, &bwd_nodes, &fused), "train on the CPU backend");
    CHECK_OK(train(&counting, &loss_counted, w_counted, &fwd_nodes, &bwd_nodes, &fused), "train on a backend wrapping the CPU's");
    CHECK(loss_cpu == loss_counted && memcmp(w_cpu, w_counted, sizeof w_cpu) == 0,
          "the same loss (%g) and weights through either table", (double)loss_counted);
    CHECK(fwd_nodes > 0 && fused == 3 && n_fwd == (fwd_nodes - fused) * D * A,
          "every forward kernel went through the table: %lld calls, %lld nodes (%lld ops, 2 bias Adds and a Relu, in their products' kernels) x "
          "%d micro-batches",
          (long long)n_fwd, (long long)fwd_nodes, (long long)fused, D * A);
    CHECK(bwd_nodes > 0 && n_bwd == bwd_nodes * D * A, "every backward kernel went through the table: %lld calls, %lld nodes x %d micro-batches",
          (long long)n_bwd, (long long)bwd_nodes, D * A);
    CHECK(n_alloc >= 2 && n_free == n_alloc, "the arenas are the backend's memory: %lld allocations, %lld returned", (long long)n_alloc,
          (long long)n_free);
    CHECK(n_copy > 0 && n_accumulate > 0 && n_scale > 0, "gradient accumulation copies, adds and averages through the table (%lld, %lld, %lld)",
          (long long)n_copy, (long long)n_accumulate, (long long)n_scale);
    CHECK(n_zero > 0, "gradients are cleared through the table (%lld)", (long long)n_zero);
    CHECK(n_update > 0, "the optimizer updates through the table (%lld)", (long long)n_update);
    return check_summary("test_backend");
}
