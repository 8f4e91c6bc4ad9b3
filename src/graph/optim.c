/* optim.c -- SGD (momentum, dampening, nesterov, weight decay), Adam and
 * AdamW, following PyTorch's update formulas exactly so that runs match. */
#include "graph/optim.h"
#include "core/core.h"
#include "core/stats_vec.h"
#include "graph/graph.h"

#include <math.h>
#include <string.h>
#include <strings.h>

ts_optimizer ts_sgd(float lr, float momentum, float weight_decay) {
    return (ts_optimizer){.kind = TS_OPT_SGD, .lr = lr, .momentum = momentum, .weight_decay = weight_decay,
                          .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
}

ts_optimizer ts_adam(float lr) {
    return (ts_optimizer){.kind = TS_OPT_ADAM, .lr = lr, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
}

ts_optimizer ts_adamw(float lr, float weight_decay) {
    return (ts_optimizer){.kind = TS_OPT_ADAMW, .lr = lr, .weight_decay = weight_decay, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
}

const char *ts_optimizer_name(ts_optimizer_kind k) {
    switch (k) {
    case TS_OPT_SGD: return "SGD";
    case TS_OPT_ADAM: return "Adam";
    case TS_OPT_ADAMW: return "AdamW";
    }
    return "?";
}

ts_status ts_optimizer_check(const ts_optimizer *o) {
    if (o->kind < TS_OPT_SGD || o->kind > TS_OPT_ADAMW) return ts_error(TS_ERR_INVALID_ARGUMENT, "unknown optimizer kind %d", (int)o->kind);
    if (!(o->lr >= 0.0f) || o->lr > 1e6f) return ts_error(TS_ERR_INVALID_ARGUMENT, "learning rate must be in [0, 1e6], got %g", (double)o->lr);
    if (!(o->momentum >= 0.0f && o->momentum < 1.0f) && o->kind == TS_OPT_SGD)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "momentum must be in [0, 1), got %g", (double)o->momentum);
    if (!(o->weight_decay >= 0.0f)) return ts_error(TS_ERR_INVALID_ARGUMENT, "weight decay must be >= 0, got %g", (double)o->weight_decay);
    if (o->kind != TS_OPT_SGD && !(o->beta1 >= 0.0f && o->beta1 < 1.0f && o->beta2 >= 0.0f && o->beta2 < 1.0f && o->eps > 0.0f))
        return ts_error(TS_ERR_INVALID_ARGUMENT, "Adam needs betas in [0, 1) and eps > 0");
    if (o->nesterov && (o->momentum <= 0.0f || o->dampening != 0.0f))
        return ts_error(TS_ERR_INVALID_ARGUMENT, "Nesterov momentum requires a momentum and zero dampening");
    return TS_OK;
}

const ts_optimizer *ts_param_optimizer(const ts_optimizer *model, const ts_tensor *param) { return param->has_opt ? &param->opt : model; }

ts_status ts_lr_schedule_parse(const char *s, ts_lr_schedule_kind *out) {
    for (int k = TS_LR_CONSTANT; k <= TS_LR_COSINE; k++)
        if (s && strcasecmp(s, ts_lr_schedule_name((ts_lr_schedule_kind)k)) == 0) return *out = (ts_lr_schedule_kind)k, TS_OK;
    return ts_error(TS_ERR_INVALID_ARGUMENT, "unknown learning-rate schedule '%s' (use constant, step or cosine)", s ? s : "(null)");
}

const char *ts_lr_schedule_name(ts_lr_schedule_kind k) {
    switch (k) {
    case TS_LR_CONSTANT: return "constant";
    case TS_LR_STEP: return "step";
    case TS_LR_COSINE: return "cosine";
    }
    return "?";
}

double ts_lr_at(const ts_lr_schedule *s, double base_lr, int64_t t) {
    if (!s || t < 0) return base_lr;
    if (t < s->warmup_steps) return base_lr * (double)(t + 1) / (double)s->warmup_steps;
    int64_t u = t - (s->warmup_steps > 0 ? s->warmup_steps : 0);
    switch (s->kind) {
    case TS_LR_STEP: return s->step_size > 0 ? base_lr * pow(s->gamma, (double)(u / s->step_size)) : base_lr;
    case TS_LR_COSINE: {
        if (s->total_steps < 1) return base_lr;
        double f = (double)(u < s->total_steps ? u : s->total_steps) / (double)s->total_steps;
        return s->min_lr + (base_lr - s->min_lr) * (1.0 + cos(M_PI * f)) / 2.0;
    }
    default: return base_lr;
    }
}


/* Counts the step and computes what every element of it shares. */
ts_opt_consts ts_opt_begin(const ts_optimizer *o, ts_opt_state *s) {
    s->step += 1.0f;
    ts_opt_consts c = {.first = s->step == 1.0f};
    if (o->kind != TS_OPT_SGD) {
        double t = s->step;
        float bc1 = (float)(1.0 - pow(o->beta1, t)), bc2 = (float)(1.0 - pow(o->beta2, t));
        c.step_size = o->lr / bc1;
        c.bc2_sqrt = sqrtf(bc2);
        c.bc1 = bc1;
    }
    return c;
}

/* Each optimizer's arithmetic; `kind` is a constant at each call of the
 * loops below, so each compiles to one optimizer's. */
enum { STEP_SGD, STEP_MOMENTUM, STEP_ADAM };

static int step_kind(const ts_optimizer *o) {
    return o->kind != TS_OPT_SGD ? STEP_ADAM : o->momentum != 0.0f ? STEP_MOMENTUM : STEP_SGD;
}

/* What every element of a step shares, read once before the loops (the
 * stores into the parameter could otherwise alias the optimizer's fields). */
typedef struct step_k {
    float lr, mom, damp, wd, b1, b2, step_size, bc2_sqrt, eps, decay;
    float rlr, rbc1; /* 1 / lr (0 when lr is 0 or subnormal), 1 / (1 - beta1^t): Adam's direction for a stability watch */
    bool first, nesterov, adamw;
} step_k;

static step_k step_consts(const ts_optimizer *o, const ts_opt_consts *c) {
    return (step_k){o->lr, o->momentum, 1.0f - o->dampening, o->weight_decay, o->beta1, o->beta2, c->step_size, c->bc2_sqrt, o->eps,
                    1.0f - o->lr * o->weight_decay, isnormal(o->lr) ? 1.0f / o->lr : 0.0f, c->bc1 != 0.0f ? 1.0f / c->bc1 : 0.0f,
                    c->first, o->nesterov, o->kind == TS_OPT_ADAMW};
}

/* The update of TS_STATS_VEC values: g the gradient, w the parameter, *a
 * and *b the state (SGD with momentum: *a the momentum buffer; Adam: the
 * two moments, and *q the step it subtracts, lr / (1 - beta1^t) times
 * its direction). The one definition of each optimizer's arithmetic, for
 * whole vectors and, padded, for the last few values. */
static inline ts_vfloat opt_step(int kind, const step_k *k, ts_vfloat g, ts_vfloat w, ts_vfloat *a, ts_vfloat *b, ts_vfloat *q) {
    if (kind != STEP_ADAM) {
        if (k->wd != 0.0f) g += k->wd * w; /* PyTorch adds it only when set (an infinite weight stays out of g) */
        if (kind == STEP_SGD) return w - k->lr * g;
        *a = k->first ? g : k->mom * *a + k->damp * g;
        return w - k->lr * (k->nesterov ? g + k->mom * *a : *a);
    }
    if (k->adamw) w *= k->decay;
    else if (k->wd != 0.0f) g += k->wd * w;
    *a = k->b1 * *a + (1.0f - k->b1) * g;
    *b = k->b2 * *b + (1.0f - k->b2) * g * g;
    *q = k->step_size * *a / (TS_VSQRT(*b) / k->bc2_sqrt + k->eps);
    return w - *q;
}

/* The state arrays the optimizer keeps (NULL: none). */
static inline void step_state(int kind, ts_opt_state *s, float **sa, float **sb) {
    *sa = kind == STEP_MOMENTUM ? s->accl : kind == STEP_ADAM ? s->accl1 : NULL;
    *sb = kind == STEP_ADAM ? s->accl2 : NULL;
}

/* The squares a stability watch sums as the step goes, TS_STATS_VEC lanes
 * each: the gradient, w before, w_after - w_before, Adam's direction. */
typedef struct norm_acc {
    ts_vfloat g, w, d, u;
} norm_acc;

/* One vector's squares: g the gradient, w0 and w the parameter before and
 * after, a and b the state after, q Adam's step (a padded vector: zeros
 * add nothing). */
static inline __attribute__((always_inline)) void norm_add(int kind, const step_k *k, ts_vfloat g, ts_vfloat w0, ts_vfloat w, ts_vfloat a,
                                                            ts_vfloat b, ts_vfloat q, norm_acc *acc) {
    ts_vfloat d = w - w0;
    acc->g = TS_VFMA(g, g, acc->g), acc->w = TS_VFMA(w0, w0, acc->w), acc->d = TS_VFMA(d, d, acc->d);
    if (kind == STEP_ADAM) { /* opt_step's direction, before the rate: the new moments over their bias corrections */
        ts_vfloat u;
        if (k->rlr != 0.0f) u = q * k->rlr; /* the step over the rate: a few ulps from the quotient, and no division */
        else u = a / (TS_VSQRT(b) / k->bc2_sqrt + k->eps) * k->rbc1; /* a rate of 0 (or subnormal): the step says nothing */
        acc->u = TS_VFMA(u, u, acc->u);
    }
}

/* The vector at i: the update in memory, *g and *w its gradient and new
 * parameter, its squares added to na (NULL: none). */
static inline __attribute__((always_inline)) void step_vec(int kind, const step_k *k, float *restrict sa, float *restrict sb,
                                                            float *restrict p, const float *restrict gr, int64_t i, ts_vfloat *g,
                                                            ts_vfloat *w, norm_acc *na) {
    ts_vfloat a = {0}, b = {0}, q = {0}, w0;
    memcpy(g, gr + i, sizeof *g);
    memcpy(&w0, p + i, sizeof w0);
    if (sa && !(kind == STEP_MOMENTUM && k->first)) memcpy(&a, sa + i, sizeof a);
    if (sb) memcpy(&b, sb + i, sizeof b);
    *w = opt_step(kind, k, *g, w0, &a, &b, &q);
    memcpy(p + i, w, sizeof *w);
    if (sa) memcpy(sa + i, &a, sizeof a);
    if (sb) memcpy(sb + i, &b, sizeof b);
    if (na) norm_add(kind, k, *g, w0, *w, a, b, q, na);
}

/* The float lanes a loop adds to, from a into to (the double lanes and
 * the count are not touched in it) */
static inline void vacc_lanes(ts_vacc *to, const ts_vacc *a) {
    to->s = a->s, to->q = a->q, to->q2 = a->q2, to->mn = a->mn, to->mx = a->mx, to->z = a->z;
}

/* Whole vectors [begin, end): the update, each gradient vector summarised
 * (shifted by cg) into ag as read and each parameter vector (cp, ap) as
 * written, two vectors at a time, the squares of the first of each two in
 * n0 and of the second in n1 (two chains a lane half as long); ag, ap, n0
 * NULL: that one not wanted. */
static inline __attribute__((always_inline)) void step_loop(int kind, const ts_optimizer *o, const ts_opt_consts *c, ts_opt_state *s,
                                                             float *restrict p, const float *restrict gr, int64_t begin, int64_t end,
                                                             ts_vfloat cg, ts_vfloat cp, ts_vacc *ag, ts_vacc *ap, norm_acc *n0,
                                                             norm_acc *n1) {
    enum { V = TS_STATS_VEC };
    const step_k k = step_consts(o, c);
    float *sa, *sb;
    step_state(kind, s, &sa, &sb);
    /* the sums in locals for the loop: through the callers' pointers the
     * compiler kept them in memory, each a chain of loads and stores (it
     * cannot tell them from the optimizer state a momentum step stores):
     * SGD with momentum over 48,000 values with both summaries took 16.8
     * us, against 12.4 for the plain step and two passes of summaries */
    ts_vacc lg, lp;
    norm_acc l0, l1;
    ts_vacc *xg = ag ? (vacc_lanes(&lg, ag), &lg) : NULL, *xp = ap ? (vacc_lanes(&lp, ap), &lp) : NULL;
    norm_acc *x0 = n0 ? (l0 = *n0, &l0) : NULL, *x1 = n1 ? (l1 = *n1, &l1) : NULL;
    ts_vfloat g0, w0, g1, w1;
    int64_t i = begin;
    for (; i + 2 * V <= end; i += 2 * V) {
        step_vec(kind, &k, sa, sb, p, gr, i, &g0, &w0, x0);
        step_vec(kind, &k, sa, sb, p, gr, i + V, &g1, &w1, x1);
        if (kind == STEP_MOMENTUM) { /* see ts_vacc_add2_fma */
            if (xg) ts_vacc_add2(xg, g0, g1, cg);
            if (xp) ts_vacc_add2(xp, w0, w1, cp);
        } else {
            if (xg) ts_vacc_add2_fma(xg, g0, g1, cg);
            if (xp) ts_vacc_add2_fma(xp, w0, w1, cp);
        }
    }
    if (i < end) {
        step_vec(kind, &k, sa, sb, p, gr, i, &g0, &w0, x0);
        if (xg) ts_vacc_add(xg, g0, cg);
        if (xp) ts_vacc_add(xp, w0, cp);
    }
    if (ag) vacc_lanes(ag, &lg);
    if (ap) vacc_lanes(ap, &lp);
    if (n0) *n0 = l0;
    if (n1) *n1 = l1;
}

/* The last n < TS_STATS_VEC values at i, through one padded vector. */
static void step_tail(const ts_optimizer *o, const ts_opt_consts *c, ts_opt_state *s, float *param, const float *grad, int64_t i,
                      int64_t n) {
    int kind = step_kind(o);
    const step_k k = step_consts(o, c);
    float *sa, *sb;
    step_state(kind, s, &sa, &sb);
    size_t bytes = (size_t)n * sizeof(float);
    ts_vfloat g = {0}, w = {0}, a = {0}, b = {0}, q = {0};
    memcpy(&g, grad + i, bytes);
    memcpy(&w, param + i, bytes);
    if (sa) memcpy(&a, sa + i, bytes);
    if (sb) memcpy(&b, sb + i, bytes);
    w = opt_step(kind, &k, g, w, &a, &b, &q);
    memcpy(param + i, &w, bytes);
    if (sa) memcpy(sa + i, &a, bytes);
    if (sb) memcpy(sb + i, &b, bytes);
}

/* Elements [begin, end) of one parameter's update (any split of [0, n)
 * gives the same result). */
void ts_opt_update(const ts_optimizer *o, const ts_opt_consts *c, ts_opt_state *s, float *param, const float *grad, int64_t begin,
                   int64_t end) {
    int64_t whole = begin + (end - begin) / TS_STATS_VEC * TS_STATS_VEC;
    ts_vfloat none = {0};
    switch (step_kind(o)) {
    case STEP_SGD: step_loop(STEP_SGD, o, c, s, param, grad, begin, whole, none, none, NULL, NULL, NULL, NULL); break;
    case STEP_MOMENTUM: step_loop(STEP_MOMENTUM, o, c, s, param, grad, begin, whole, none, none, NULL, NULL, NULL, NULL); break;
    default: step_loop(STEP_ADAM, o, c, s, param, grad, begin, whole, none, none, NULL, NULL, NULL, NULL); break;
    }
    if (whole < end) step_tail(o, c, s, param, grad, whole, end - whole);
}

/* The squares' sums in double, lane by lane: each block's float lanes
 * are added here, and the lanes summed once at the end. */
typedef struct norm_sum {
    ts_vdouble4 g[TS_STATS_VEC / 4], w[TS_STATS_VEC / 4], d[TS_STATS_VEC / 4], u[TS_STATS_VEC / 4];
} norm_sum;

static inline void lanes_add(ts_vdouble4 *to, ts_vfloat v) {
    ts_vfloat4 h[TS_STATS_VEC / 4];
    memcpy(h, &v, sizeof h);
    for (int j = 0; j < TS_STATS_VEC / 4; j++) to[j] += __builtin_convertvector(h[j], ts_vdouble4);
}

static inline void norm_sum_add(norm_sum *ns, const norm_acc *a) {
    lanes_add(ns->g, a->g), lanes_add(ns->w, a->w), lanes_add(ns->d, a->d), lanes_add(ns->u, a->u);
}

static double lanes_total(const ts_vdouble4 *v) {
    double t = 0;
    for (int j = 0; j < TS_STATS_VEC / 4; j++) t += v[j][0] + v[j][1] + v[j][2] + v[j][3];
    return t;
}

static void norm_sum_out(const norm_sum *ns, double sq[4]) {
    sq[0] += lanes_total(ns->g), sq[1] += lanes_total(ns->w), sq[2] += lanes_total(ns->d), sq[3] += lanes_total(ns->u);
}

/* A run of ts_opt_update_summarised, specialised on the optimizer, on the
 * shifts being 0 and on the squares being wanted (n0 non-NULL). */
static void summarised_run(const ts_optimizer *o, const ts_opt_consts *c, ts_opt_state *s, float *param, const float *grad, int64_t begin,
                           int64_t end, bool centred, ts_vfloat cg, ts_vfloat cp, ts_vacc *ag, ts_vacc *ap, norm_acc *n0, norm_acc *n1) {
    ts_vfloat zero = {0};
#define TS_RUN(kind)                                                                                         \
    n0 ? (centred ? step_loop(kind, o, c, s, param, grad, begin, end, zero, zero, ag, ap, n0, n1)           \
                  : step_loop(kind, o, c, s, param, grad, begin, end, cg, cp, ag, ap, n0, n1))              \
       : (centred ? step_loop(kind, o, c, s, param, grad, begin, end, zero, zero, ag, ap, NULL, NULL)       \
                  : step_loop(kind, o, c, s, param, grad, begin, end, cg, cp, ag, ap, NULL, NULL))
    switch (step_kind(o)) {
    case STEP_SGD: TS_RUN(STEP_SGD); break;
    case STEP_MOMENTUM: TS_RUN(STEP_MOMENTUM); break;
    default: TS_RUN(STEP_ADAM); break;
    }
#undef TS_RUN
}

void ts_opt_update_summarised(const ts_optimizer *o, const ts_opt_consts *c, ts_opt_state *s, float *param, float *grad, int64_t begin,
                              int64_t end, bool clear, ts_stats_stream *gs, ts_stats_partial *gp, ts_stats_stream *ps,
                              ts_stats_partial *pp, double sq[4]) {
    enum { V = TS_STATS_VEC };
    /* runs of ts_vacc_add2_fma's length where the step sums by it (plain SGD and Adam), and no squares for the norms */
    bool fma_run = !sq && step_kind(o) != STEP_MOMENTUM;
    int64_t whole = begin + (end - begin) / V * V, RUN = (fma_run ? TS_VACC_RUN_FMA : TS_VACC_RUN) * V;
    if (whole > begin) {
        if (!gs->shifted && gp) gs->c = ts_stats_shift(gp, grad + begin, end - begin), gs->shifted = true;
        if (!ps->shifted && pp) ps->c = ts_stats_shift(pp, param + begin, end - begin), ps->shifted = true;
    }
    ts_vfloat cg = gs->c - (ts_vfloat){0}, cp = ps->c - (ts_vfloat){0};
    bool centred = gs->c == 0.0f && ps->c == 0.0f; /* weights and gradients, usually: no shift to subtract */
    ts_vacc ag, ap;
    ts_vacc_start(&ag);
    ts_vacc_start(&ap);
    norm_sum ns = {{{0}}, {{0}}, {{0}}, {{0}}};
    for (int64_t r = begin; r < whole; r += RUN) {
        int64_t e = whole - r < RUN ? whole : r + RUN;
        ts_vacc_mark mg = ts_vacc_run_begin(&ag), mp = ts_vacc_run_begin(&ap);
        norm_acc n0 = {{0}, {0}, {0}, {0}}, n1 = n0; /* a lane's float chains: TS_VACC_RUN / 2 long, as the summaries' */
        summarised_run(o, c, s, param, grad, r, e, centred, cg, cp, &ag, &ap, sq ? &n0 : NULL, &n1);
        if (sq) norm_sum_add(&ns, &n0), norm_sum_add(&ns, &n1);
        /* a run with NaN or Inf: classified from memory (the gradient is cleared only after) */
        ts_vacc_run_close(&ag, mg, gp, grad + r, e - r);
        ts_vacc_run_close(&ap, mp, pp, param + r, e - r);
        /* zeroed after its run, in one memset: zeroing each run's gradient
         * with vector stores while the next is updated (after its NaN check)
         * took half of the MLP's fc1 step at batch 32 from 22.4 to 18.9 us
         * when this core had written the gradient, but from 32 to 36 us when
         * the other core had (as the backward pass's matrix product leaves
         * it): the loop then stalled on those stores */
        if (clear) memset(grad + r, 0, (size_t)(e - r) * sizeof(float));
    }
    if (gp) ts_vacc_finish(&ag, gs, gp);
    if (pp) ts_vacc_finish(&ap, ps, pp);
    if (sq) norm_sum_out(&ns, sq);
    if (whole < end) { /* the last few values, one by one */
        if (gp) ts_stats_stream_add(gs, gp, grad + whole, end - whole);
        if (sq) ts_opt_update_norms(o, c, s, param, grad, whole, end, false, sq);
        else ts_opt_update(o, c, s, param, grad, whole, end);
        if (pp) ts_stats_stream_add(ps, pp, param + whole, end - whole);
        if (clear) memset(grad + whole, 0, (size_t)(end - whole) * sizeof(float));
    }
}

/* One vector of the update (a padded one for the tail) and its squares. */
static inline __attribute__((always_inline)) void norm_vec(int kind, const step_k *k, ts_vfloat g, ts_vfloat *w, ts_vfloat *a, ts_vfloat *b,
                                                            norm_acc *acc) {
    ts_vfloat w0 = *w, q = {0};
    *w = opt_step(kind, k, g, w0, a, b, &q);
    norm_add(kind, k, g, w0, *w, *a, *b, q, acc);
}

/* The whole vector at i: loaded, updated, stored, its squares added. */
static inline __attribute__((always_inline)) void norm_whole(int kind, const step_k *k, float *restrict sa, float *restrict sb,
                                                              float *restrict p, float *restrict gr, int64_t i, norm_acc *acc) {
    ts_vfloat g, w;
    step_vec(kind, k, sa, sb, p, gr, i, &g, &w, acc);
}

/* Blocks of NORM_BLOCK values summed in float lanes (two sets of
 * TS_STATS_VEC lanes, so that the sums' latency hides under the update:
 * 32 terms a lane at most; four sets would not fit the registers, and an
 * accumulator spilled to the stack is a chain through memory), then in
 * double lanes, summed across once at the end: rounding well under 1e-6. */
#define NORM_BLOCK (64 * TS_STATS_VEC)

static inline __attribute__((always_inline)) void norm_loop(int kind, const ts_optimizer *o, const ts_opt_consts *c, ts_opt_state *s,
                                                             float *restrict p, float *restrict gr, int64_t begin, int64_t end, bool clear,
                                                             double sq[4]) {
    enum { V = TS_STATS_VEC };
    const step_k k = step_consts(o, c);
    float *sa, *sb;
    step_state(kind, s, &sa, &sb);
    /* the gradient is zeroed after the loop, in one memset: zeroing each
     * vector as it goes (SGD's update leaves the store port idle enough)
     * stalled on the lines the other core's matrix product had written,
     * as ts_opt_update_summarised's runs did: on the MLP at batch 32, 2
     * threads, the step with its sums took about 5% less CPU time with
     * the memset after (perf samples, three interleaved rounds) */
    norm_sum ns = {{{0}}, {{0}}, {{0}}, {{0}}};
    for (int64_t r = begin; r < end; r += NORM_BLOCK) {
        int64_t e = end - r < NORM_BLOCK ? end : r + NORM_BLOCK, i = r;
        norm_acc acc = {{0}, {0}, {0}, {0}}, acc1 = acc;
        for (; i + 4 * V <= e; i += 4 * V) { /* four vectors at a time, into two sets of sums */
            norm_whole(kind, &k, sa, sb, p, gr, i, &acc);
            norm_whole(kind, &k, sa, sb, p, gr, i + V, &acc1);
            norm_whole(kind, &k, sa, sb, p, gr, i + 2 * V, &acc);
            norm_whole(kind, &k, sa, sb, p, gr, i + 3 * V, &acc1);
        }
        for (; i + V <= e; i += V) norm_whole(kind, &k, sa, sb, p, gr, i, &acc);
        if (i < e) { /* the last few, padded with zeros */
            size_t bytes = (size_t)(e - i) * sizeof(float);
            ts_vfloat g = {0}, w = {0}, a = {0}, b = {0};
            memcpy(&g, gr + i, bytes);
            memcpy(&w, p + i, bytes);
            if (sa && !(kind == STEP_MOMENTUM && k.first)) memcpy(&a, sa + i, bytes);
            if (sb) memcpy(&b, sb + i, bytes);
            norm_vec(kind, &k, g, &w, &a, &b, &acc);
            memcpy(p + i, &w, bytes);
            if (sa) memcpy(sa + i, &a, bytes);
            if (sb) memcpy(sb + i, &b, bytes);
        }
        acc.g += acc1.g, acc.w += acc1.w, acc.d += acc1.d, acc.u += acc1.u;
        norm_sum_add(&ns, &acc);
    }
    norm_sum_out(&ns, sq);
    if (clear) memset(gr + begin, 0, (size_t)(end - begin) * sizeof(float));
}

void ts_opt_update_norms(const ts_optimizer *o, const ts_opt_consts *c, ts_opt_state *s, float *param, float *grad, int64_t begin, int64_t end,
                         bool clear, double sq[4]) {
#define TS_NORMS(kind) \
    clear ? norm_loop(kind, o, c, s, param, grad, begin, end, true, sq) : norm_loop(kind, o, c, s, param, grad, begin, end, false, sq)
    switch (step_kind(o)) {
    case STEP_SGD: TS_NORMS(STEP_SGD); break;
    case STEP_MOMENTUM: TS_NORMS(STEP_MOMENTUM); break;
    default: TS_NORMS(STEP_ADAM); break;
    }
#undef TS_NORMS
}
