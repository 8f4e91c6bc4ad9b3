/* test_optim_step.c -- the optimizer step's weight decay, as PyTorch's
 * optimizers apply it: added to the gradient only when it is set (SGD,
 * SGD with momentum, Adam), so no decay leaves an infinite parameter
 * infinite (PyTorch: inf - lr * g) instead of making it NaN through
 * 0 * inf, and a decay makes it what PyTorch's arithmetic makes it (SGD
 * and Adam: NaN; AdamW: infinite); the finite values are the formula's. Every length crosses the vector loop and its padded tail. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "graph/optim.h"

enum { N = 37 };

static void step(const ts_optimizer *o, float *w, const float *g, float *m, float *v) {
    ts_opt_state s = {.accl = m, .accl1 = m, .accl2 = v};
    ts_opt_consts c = ts_opt_begin(o, &s);
    ts_opt_update(o, &c, &s, w, g, 0, N);
}

/* One element of the first step of o, in double, the decay added as PyTorch does. */
static double reference(const ts_optimizer *o, double w, double g) {
    if (o->weight_decay != 0.0f && o->kind != TS_OPT_ADAMW) g += (double)o->weight_decay * w;
    if (o->kind == TS_OPT_SGD) return w - (double)o->lr * g; /* momentum's first step: its buffer is g */
    double a = (1.0 - o->beta1) * g, b = (1.0 - o->beta2) * g * g;
    double ahat = a / (1.0 - o->beta1), bhat = b / (1.0 - o->beta2);
    if (o->kind == TS_OPT_ADAMW) w *= 1.0 - (double)o->lr * o->weight_decay;
    return w - (double)o->lr * ahat / (sqrt(bhat) + o->eps);
}

static void check_case(const char *label, ts_optimizer o) {
    float w[N], g[N], m[N] = {0}, v[N] = {0};
    for (int i = 0; i < N; i++) w[i] = 0.25f * (float)(i - 18), g[i] = 0.01f * (float)((i * 7) % 11) - 0.05f;
    w[3] = INFINITY, w[N - 1] = -INFINITY; /* one in the vector loop, one in the tail */
    float w0[N];
    memcpy(w0, w, sizeof w);
    step(&o, w, g, m, v);
    int bad = -1;
    double worst = 0.0;
    for (int i = 0; i < N; i++) {
        double want = reference(&o, w0[i], g[i]); /* in double, infinities as IEEE gives them */
        if (isfinite(want)) {
            double err = fabs((double)w[i] - want) / (fabs(want) + 1e-6);
            if (err > worst) worst = err;
        } else if (!isnan(want) != !isnan(w[i]) || (!isnan(want) && (!isinf(w[i]) || !signbit(want) != !signbit(w[i])))) {
            if (bad < 0) bad = i;
        }
    }
    CHECK(bad < 0, "%s: an infinite weight gives PyTorch's value (w[%d] = %g)", label, bad, bad < 0 ? 0.0 : (double)w[bad]);
    CHECK(worst < 1e-5, "%s: the step is the formula's (worst relative error %.3g)", label, worst);
}

int main(void) {
    ts_optimizer mom = ts_sgd(0.1f, 0.9f, 0.0f), mom_wd = ts_sgd(0.1f, 0.9f, 1e-2f);
    check_case("SGD", ts_sgd(0.1f, 0.0f, 0.0f));
    check_case("SGD with decay", ts_sgd(0.1f, 0.0f, 1e-2f));
    check_case("SGD momentum", mom);
    check_case("SGD momentum with decay", mom_wd);
    check_case("Adam", ts_adam(1e-3f));
    ts_optimizer adam_wd = ts_adam(1e-3f);
    adam_wd.weight_decay = 1e-2f;
    check_case("Adam with decay", adam_wd);
    check_case("AdamW", ts_adamw(1e-3f, 0.0f));
    check_case("AdamW with decay", ts_adamw(1e-3f, 1e-2f));
    return check_summary("test_optim_step");
}
