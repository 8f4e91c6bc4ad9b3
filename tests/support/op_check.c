/* op_check.c -- see op_check.h. */
#include "op_check.h"

#include "check.h"
#include "graph/graph.h"
#include "graph/ops.h"
#include "graph/optim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* check.h's CHECK, counted in the checker too (main's summary reads it) */
#define OP_CHECK(c, cond, ...)                  \
    do {                                        \
        bool ok_ = (cond);                      \
        if (!ok_) (c)->failures++;              \
        CHECK(ok_, __VA_ARGS__);                \
    } while (0)

static float next_uniform(uint64_t *s) { /* [0, 1) */
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*s >> 11) * 0x1.0p-53);
}

/* An i64 value over +-2^bits (bits 0: every int64), the ends, 0 and -1 a
 * few times in a hundred (the divisions' edge cases) */
static int64_t next_i64(uint64_t *s, int bits) {
    uint64_t hi = (uint64_t)(next_uniform(s) * 4294967296.0f), lo = (uint64_t)(next_uniform(s) * 4294967296.0f);
    int64_t v = (int64_t)(hi << 32 | lo);
    float pick = next_uniform(s);
    if (pick < 0.02f) return pick < 0.01f ? 0 : -1;
    if (pick < 0.03f) return pick < 0.025f ? INT64_MIN : INT64_MAX;
    return bits > 0 && bits < 63 ? v >> (63 - bits) : v;
}

/* One operand on both devices: host values, the CPU's copy, the device's. */
typedef struct operand {
    int64_t n;
    size_t bytes;
    float *host, *cpu;
    void *dev;
} operand;

static bool operand_new(ts_op_checker *c, operand *o, int64_t n) {
    memset(o, 0, sizeof *o);
    o->n = n;
    o->bytes = (size_t)(n ? n : 1) * sizeof(float);
    o->host = calloc(1, o->bytes);
    o->cpu = calloc(1, o->bytes);
    return o->host && o->cpu && c->dev->alloc(o->bytes, &o->dev) == TS_OK;
}

static void operand_free(ts_op_checker *c, operand *o) {
    free(o->host);
    free(o->cpu);
    if (o->dev) c->dev->free(o->dev);
}

static void operand_upload(ts_op_checker *c, operand *o) {
    memcpy(o->cpu, o->host, o->bytes);
    c->dev->copy_to_device(c->stream, o->dev, o->host, o->bytes);
}

/* an i32 output (CastIndex): 0 where the device's equals the CPU's, else Inf */
static double compare_int(ts_op_checker *c, const operand *o, float *scratch) {
    c->dev->copy_to_host(c->stream, scratch, o->dev, o->bytes);
    if (c->dev->synchronize(c->stream)) return INFINITY;
    return memcmp(scratch, o->cpu, o->bytes) ? INFINITY : 0.0;
}

/* max |device - cpu| / (max |cpu| + 1e-3), NaN where either has one */
static double compare(ts_op_checker *c, const operand *o, float *scratch) {
    c->dev->copy_to_host(c->stream, scratch, o->dev, o->bytes);
    if (c->dev->synchronize(c->stream)) return INFINITY;
    double err = 0, mag = 0;
    for (int64_t i = 0; i < o->n; i++) {
        float a = o->cpu[i], b = scratch[i];
        if (isnan(a) != isnan(b)) return NAN;
        if (isnan(a)) continue;
        if (isinf(a) || isinf(b)) {
            if (a != b) return INFINITY;
            continue;
        }
        double d = fabs((double)a - (double)b);
        if (d > err) err = d;
        if (fabs(a) > mag) mag = fabs(a);
    }
    return err / (mag + 1e-3);
}

/* The CPU forward of kf on `in`'s host values, input j's element i moved
 * by h (j < 0: none moved). */
static void fd_forward(const ts_kernel_row *row, ts_kctx *kf, float **fin, const operand *in, int j, int64_t i, float h) {
    for (int k = 0; k < kf->n_in; k++)
        if (fin[k]) memcpy(fin[k], in[k].host, in[k].bytes); /* a forward may update its inputs (running stats) */
    if (j >= 0) fin[j][i] += h;
    row->forward(kf);
}

/* How L = sum(out * r) moves when input j's element i moves by h: the
 * sum of (out - base) * r in double over the outputs that moved (base:
 * the unmoved forward's; the others cancel exactly, however many there
 * are), and sum(|out * r|) over those in *mag. */
static double fd_change(const ts_kernel_row *row, ts_kctx *kf, float **fin, const operand *in, int j, int64_t i, float h,
                        const operand *r, const float *base, double *mag) {
    fd_forward(row, kf, fin, in, j, i, h);
    double l = 0, m = 0;
    for (int64_t k = 0; k < r->n; k++) {
        float o = kf->out[k];
        if (o == base[k] || !isfinite(o) || !isfinite(base[k])) continue; /* a filled -inf, say: constant, no gradient to compare */
        l += ((double)o - (double)base[k]) * (double)r->host[k];
        m += fabs((double)o * (double)r->host[k]);
    }
    *mag = m;
    return l;
}

/* The CPU backward's gradients (din[j].cpu less its starting values)
 * against central differences of the CPU forward (op_check.h). */
static void fd_check(ts_op_checker *c, const char *label, const ts_tensor *t, const ts_kctx *kc, const operand *in,
                     const operand *din, const operand *dout, size_t nscratch, size_t nwork) {
    const ts_op_def *def = ts_op_get(t->op);
    const ts_kernel_row *row = &ts_backend_cpu()->kernels[t->op];
    ts_kctx kf = *kc;
    float *fin[TS_MAX_INPUTS] = {0};
    float *base = malloc((size_t)(dout->n ? dout->n : 1) * sizeof(float));
    bool ok = (kf.out = malloc((size_t)(dout->n ? dout->n : 1) * sizeof(float))) != NULL && base;
    ok = (kf.scratch = calloc(nscratch + 1, sizeof(float))) != NULL && ok;
    ok = (kf.workspace = calloc(nwork + 1, sizeof(float))) != NULL && ok;
    for (int j = 0; j < t->n_in; j++) {
        kf.din[j] = NULL;
        if (!kc->in[j]) continue;
        ok = (fin[j] = malloc(in[j].bytes)) != NULL && ok;
        kf.in[j] = fin[j];
    }
    kf.dout = NULL;
    if (!ok) {
        OP_CHECK(c, 0, "%s %s: no memory for the finite differences", def->name, label);
        goto done;
    }
    fd_forward(row, &kf, fin, in, -1, 0, 0);
    memcpy(base, kf.out, (size_t)dout->n * sizeof(float));
    for (int j = 0; j < t->n_in; j++) {
        ts_op leaf = t->g->t[t->in[j]]->op;
        if (!din[j].host || !fin[j] || leaf == TS_OP_BUFFER || leaf == TS_OP_CONST) continue; /* no gradient by contract */
        int64_t n = din[j].n, k_max = n < 12 ? n : 12;
        int checked = 0, kinks = 0;
        for (int64_t k = 0; k < k_max; k++) {
            int64_t i = k * n / k_max;
            float x = in[j].host[i], h = 1e-2f * fmaxf(1.0f, fabsf(x));
            double mp, mm, lp = fd_change(row, &kf, fin, in, j, i, h, dout, base, &mp);
            double lm = fd_change(row, &kf, fin, in, j, i, -h, dout, base, &mm), mag = fmax(mp, mm);
            h = ((x + h) - (x - h)) / 2; /* the step float arithmetic took */
            double central = (lp - lm) / (2.0 * h), up = lp / h, down = -lm / h;
            double grad = (double)din[j].cpu[i] - (double)din[j].host[i];
            /* the forward's float32 rounding, seen through the step, and a relative 2% */
            double atol = 1e-3 + 1e-6 * mag / h, rtol = 2e-2;
            double err = fabs(central - grad);
            if (err <= atol + rtol * fmax(fabs(central), fabs(grad))) {
                checked++;
            } else if (fabs(up - down) > atol + rtol * fmax(fabs(up), fabs(down))) {
                kinks++; /* not differentiable within the step: a kink, not a wrong gradient */
            } else {
                OP_CHECK(c, 0, "%s %s: gradient of input %d element %lld is %.6g, finite differences %.6g",
                         def->name, label, j, (long long)i, grad, central);
                goto done;
            }
        }
        OP_CHECK(c, checked > 0, "%s %s: input %d, %d of %lld elements on a kink: none checked against finite differences",
                 def->name, label, j, kinks, (long long)k_max);
        if (checked) c->ops_fd[t->op] = true;
    }
done:
    free(base);
    free(kf.out);
    free(kf.scratch);
    free(kf.workspace);
    for (int j = 0; j < t->n_in; j++) free(fin[j]);
}

void ts_op_check(ts_op_checker *c, const char *label, const ts_tensor *t, const ts_op_case_opts *opts) {
    ts_op_case_opts o = opts ? *opts : (ts_op_case_opts){0};
    if (!o.int_hi) o.int_hi = 2;
    if (o.tol == 0) o.tol = 1e-4f;
    const ts_graph *g = t->g;
    const ts_op_def *def = ts_op_get(t->op);
    const ts_backend *cpu = ts_backend_cpu();
    const ts_kernel_row *crow = &cpu->kernels[t->op], *drow = &c->dev->kernels[t->op];
    if (!drow->forward) {
        OP_CHECK(c, 0, "%s %s: the %s backend has no forward kernel", def->name, label, c->dev->name);
        return;
    }
    if (t->op == TS_OP_ATTENTION && t->n_in < 5 && !c->dev->attention_one_pass) {
        /* compile refuses an Attention node without its unfused twin on
         * such a device (its row copies the twin); the twin's case runs */
        printf("skip %s %s on %s: no one-pass kernel on this device\n", def->name, label, c->dev->name);
        return;
    }
    if (!c->seed) c->seed = 0x9E3779B97F4A7C15ull;
    bool bwd = def->has_backward && !o.no_backward && t->dtype == TS_F32; /* an integer output has no gradient */
    operand in[TS_MAX_INPUTS], din[TS_MAX_INPUTS], out, dout, scratch, wcpu, wdev;
    memset(in, 0, sizeof in);
    memset(din, 0, sizeof din);
    memset(&out, 0, sizeof out);
    memset(&dout, 0, sizeof dout);
    memset(&scratch, 0, sizeof scratch);
    memset(&wcpu, 0, sizeof wcpu);
    memset(&wdev, 0, sizeof wdev);
    ts_shape in_shape[TS_MAX_INPUTS];
    ts_dtype in_dt[TS_MAX_INPUTS];
    bool ok = true;
    int64_t biggest = 0;
    for (int j = 0; j < t->n_in; j++) {
        const ts_tensor *x = g->t[t->in[j]];
        in_shape[j] = x->shape, in_dt[j] = x->dtype;
        int64_t n = ts_shape_numel(&x->shape);
        bool wide = x->dtype == TS_I64; /* two cells an element */
        if (n * (wide ? 2 : 1) > biggest) biggest = n * (wide ? 2 : 1);
        ok = ok && operand_new(c, &in[j], n * (wide ? 2 : 1));
        bool is_int = ts_op_int_input(t->op, j) || x->dtype == TS_I32 || wide;
        for (int64_t i = 0; ok && i < n; i++) {
            float u = next_uniform(&c->seed);
            if (wide) {
                int64_t v = next_i64(&c->seed, o.i64_bits);
                memcpy(&in[j].host[2 * i], &v, sizeof v);
            } else if (is_int) {
                int32_t v = (int32_t)(u * (float)o.int_hi);
                memcpy(&in[j].host[i], &v, sizeof v);
            } else {
                in[j].host[i] = o.shift + (o.positive ? 0.5f + 1.5f * u : (o.spread > 0 ? o.spread : 1.0f) * (2.0f * u - 1.0f));
            }
        }
        if (ok) operand_upload(c, &in[j]);
        if (ok && bwd && !is_int) {
            ok = operand_new(c, &din[j], n);
            for (int64_t i = 0; ok && i < n; i++) din[j].host[i] = 2.0f * next_uniform(&c->seed) - 1.0f;
            if (ok) operand_upload(c, &din[j]);
        }
    }
    int64_t n_out = ts_shape_numel(&t->shape) * ts_dtype_cells(t->dtype);
    if (n_out > biggest) biggest = n_out;
    ok = ok && operand_new(c, &out, n_out) && operand_new(c, &dout, n_out);
    for (int64_t i = 0; ok && i < n_out; i++) dout.host[i] = 2.0f * next_uniform(&c->seed) - 1.0f;
    if (ok) operand_upload(c, &dout);
    size_t nscratch = def->scratch_floats ? def->scratch_floats(in_shape, &t->shape) : 0;
    size_t nwc = crow->workspace_floats ? crow->workspace_floats(in_shape, in_dt, &t->shape, 1) : 0;
    size_t nwd = drow->workspace_floats ? drow->workspace_floats(in_shape, in_dt, &t->shape, 1) : 0;
    if (ok) ok = operand_new(c, &scratch, (int64_t)nscratch) && operand_new(c, &wcpu, (int64_t)nwc) && operand_new(c, &wdev, (int64_t)nwd);
    float *back = ok ? malloc((size_t)(biggest + (int64_t)nscratch + 1) * sizeof(float)) : NULL;
    if (!ok || !back) {
        OP_CHECK(c, 0, "%s %s: no memory for the operands", def->name, label);
        goto done;
    }

    ts_kctx kc = {.node = t, .n_in = t->n_in, .out_shape = t->shape, .training = true, .update_state = true, .iteration = 3};
    ts_kctx kd = kc;
    kc.scratch = scratch.cpu;
    kc.workspace = wcpu.cpu;
    kd.scratch = scratch.dev;
    kd.workspace = wdev.dev;
    kd.stream = c->stream;
    kc.out = out.cpu;
    kd.out = out.dev;
    kc.dout = dout.cpu;
    kd.dout = dout.dev;
    for (int j = 0; j < t->n_in; j++) {
        kc.in_shape[j] = kd.in_shape[j] = in_shape[j];
        ts_dtype dt = g->t[t->in[j]]->dtype;
        kc.in_dtype[j] = kd.in_dtype[j] = dt;
        bool is_int = ts_op_int_input(t->op, j) || dt == TS_I32;
        if (is_int && def->keeps_int && !ts_op_int_input(t->op, j)) { /* moved as cells: read as floats too */
            kc.in[j] = in[j].cpu;
            kd.in[j] = in[j].dev;
        }
        if (is_int) {
            kc.in_int[j] = (const int32_t *)(const void *)in[j].cpu;
            kd.in_int[j] = (const int32_t *)(const void *)in[j].dev;
        } else {
            kc.in[j] = in[j].cpu;
            kd.in[j] = in[j].dev;
        }
        kc.din[j] = din[j].cpu;
        kd.din[j] = din[j].dev;
    }
    kc.out_dtype = kd.out_dtype = t->dtype;
    ts_tensor twin;
    if (def->keeps_int && t->dtype == TS_I64) { /* an i64 tensor's cells moved in pairs, as exec.c runs it */
        OP_CHECK(c, ts_cells_node(t, &in_shape[0], &t->shape, &twin), "%s %s: no room for the cells' dim", def->name, label);
        ts_kctx_as_cells(&kc, &twin);
        ts_kctx_as_cells(&kd, &twin);
    }
    crow->forward(&kc);
    drow->forward(&kd);
    double e = t->dtype != TS_F32 ? compare_int(c, &out, back) : compare(c, &out, back);
    OP_CHECK(c, e <= o.tol, "%s %s on %s: forward, rel. error %.3g", def->name, label, c->dev->name, e);
    for (int j = 0; j < t->n_in; j++) {
        if (!kc.in[j] || g->t[t->in[j]]->dtype != TS_F32) continue; /* integers are never written */
        e = compare(c, &in[j], back);
        if (e > 0) OP_CHECK(c, e <= o.tol, "%s %s on %s: input %d after the forward, rel. error %.3g", def->name, label, c->dev->name, j, e);
    }
    if (bwd) {
        if (!drow->backward) {
            OP_CHECK(c, 0, "%s %s: the %s backend has no backward kernel", def->name, label, c->dev->name);
        } else {
            crow->backward(&kc);
            drow->backward(&kd);
            for (int j = 0; j < t->n_in; j++) {
                if (!din[j].host) continue;
                e = compare(c, &din[j], back);
                OP_CHECK(c, e <= o.tol, "%s %s on %s: gradient of input %d, rel. error %.3g", def->name, label, c->dev->name, j, e);
            }
            if (o.no_fd) {
                c->ops_no_fd[t->op] = true;
                printf("note %s %s: not against finite differences: %s\n", def->name, label, o.no_fd);
            } else {
                fd_check(c, label, t, &kc, in, din, &dout, nscratch, nwc);
            }
        }
    }
    c->checked++;
done:
    free(back);
    for (int j = 0; j < t->n_in; j++) {
        operand_free(c, &in[j]);
        operand_free(c, &din[j]);
    }
    operand_free(c, &out);
    operand_free(c, &dout);
    operand_free(c, &scratch);
    operand_free(c, &wcpu);
    operand_free(c, &wdev);
}

/* One optimizer step over n values on both devices from the same
 * parameter, gradient and state: the parameter and state compared. */
static void opt_case(ts_op_checker *c, const char *label, ts_optimizer o, int step, int64_t n) {
    const ts_backend *cpu = ts_backend_cpu();
    operand p, g, s1, s2;
    bool ok = operand_new(c, &p, n) && operand_new(c, &g, n) && operand_new(c, &s1, n) && operand_new(c, &s2, n);
    float *back = ok ? malloc((size_t)n * sizeof(float)) : NULL;
    if (!back) {
        OP_CHECK(c, 0, "optimizer %s: no memory", label);
    } else {
        for (int64_t i = 0; i < n; i++) {
            p.host[i] = 2.0f * next_uniform(&c->seed) - 1.0f;
            g.host[i] = 0.1f * (2.0f * next_uniform(&c->seed) - 1.0f);
            s1.host[i] = 0.1f * (2.0f * next_uniform(&c->seed) - 1.0f);
            s2.host[i] = 0.01f * next_uniform(&c->seed);
        }
        operand_upload(c, &p), operand_upload(c, &g), operand_upload(c, &s1), operand_upload(c, &s2);
        bool adam = o.kind != TS_OPT_SGD, mom = !adam && o.momentum != 0.0f;
        ts_opt_state sc = {.step = (float)step - 1}, sd = sc;
        if (mom) sc.accl = s1.cpu, sd.accl = s1.dev;
        if (adam) sc.accl1 = s1.cpu, sc.accl2 = s2.cpu, sd.accl1 = s1.dev, sd.accl2 = s2.dev;
        ts_opt_consts k = ts_opt_begin(&o, &sc);
        cpu->opt_update(NULL, &o, &k, &sc, p.cpu, g.cpu, 0, n);
        c->dev->opt_update(c->stream, &o, &k, &sd, p.dev, g.dev, 0, n);
        double e = compare(c, &p, back);
        OP_CHECK(c, e <= 1e-6, "optimizer %s step %d on %s: parameter, rel. error %.3g", label, step, c->dev->name, e);
        if (mom || adam) {
            e = compare(c, &s1, back);
            OP_CHECK(c, e <= 1e-6, "optimizer %s step %d on %s: first state, rel. error %.3g", label, step, c->dev->name, e);
        }
        if (adam) {
            e = compare(c, &s2, back);
            OP_CHECK(c, e <= 1e-6, "optimizer %s step %d on %s: second moment, rel. error %.3g", label, step, c->dev->name, e);
        }
        c->checked++;
    }
    free(back);
    operand_free(c, &p), operand_free(c, &g), operand_free(c, &s1), operand_free(c, &s2);
}

void ts_opt_cases(ts_op_checker *c) {
    ts_optimizer nesterov = ts_sgd(0.1f, 0.9f, 1e-3f);
    nesterov.nesterov = 1;
    ts_optimizer damp = ts_sgd(0.05f, 0.8f, 0);
    damp.dampening = 0.3f;
    opt_case(c, "sgd", ts_sgd(0.1f, 0, 0), 1, 1000);
    opt_case(c, "sgd weight decay", ts_sgd(0.1f, 0, 0.01f), 1, 100003);
    opt_case(c, "sgd momentum (first step)", ts_sgd(0.1f, 0.9f, 0), 1, 5000);
    opt_case(c, "sgd momentum", ts_sgd(0.1f, 0.9f, 0), 4, 5000);
    opt_case(c, "sgd momentum dampening", damp, 3, 777);
    opt_case(c, "sgd nesterov", nesterov, 2, 4097);
    opt_case(c, "adam (first step)", ts_adam(1e-3f), 1, 3001);
    opt_case(c, "adam", ts_adam(1e-3f), 7, 100003);
    opt_case(c, "adamw", ts_adamw(1e-3f, 0.1f), 5, 65537);
}
