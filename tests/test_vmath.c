/* test_vmath.c -- the vectorising float math of backend/vmath.h against
 * libm in double precision, over a dense sweep of the range each kernel
 * sees and the special values:
 * (a) ts_verf: erf within 1.5e-7 absolute and 2.5e-7 relative (both sides of
 *     the switch from the series to the erfc fit at |x| = 0.8, tiny x,
 *     the tails), odd, +-1 at +-inf, NaN kept;
 * (b) ts_vsigmoid: within 2e-7 relative, 0 and 1 at -inf and +inf, NaN
 *     kept, no overflow for large |x|;
 * (c) ts_vexp: within 2 ulp (2.4e-7 relative) on [-87, 88], 0 below. */
#include <math.h>

#include "backend/vmath.h"
#include "check.h"

#define N 400001

static double rel(double got, double want) { return fabs(got - want) / fmax(fabs(want), 1e-30); }

int main(void) {
    double erf_abs = 0, erf_rel = 0, sig_rel = 0, exp_rel = 0;
    float worst_erf = 0, worst_sig = 0;
    for (int i = 0; i < N; i++) {
        float x = -6.0f + 12.0f * (float)i / (float)(N - 1);
        double e = erf((double)x), v = ts_verf(x);
        if (fabs(v - e) > erf_abs) erf_abs = fabs(v - e), worst_erf = x;
        if (x != 0.0f && rel(v, e) > erf_rel) erf_rel = rel(v, e);
        float y = -30.0f + 60.0f * (float)i / (float)(N - 1);
        double s = 1.0 / (1.0 + exp(-(double)y));
        if (rel(ts_vsigmoid(y), s) > sig_rel) sig_rel = rel(ts_vsigmoid(y), s), worst_sig = y;
        float z = -87.0f + 175.0f * (float)i / (float)(N - 1);
        if (rel(ts_vexp(z), exp((double)z)) > exp_rel) exp_rel = rel(ts_vexp(z), exp((double)z));
    }
    for (float x = 1e-30f; x < 1.0f; x *= 1.37f) /* tiny and around the switch: relative accuracy */
        if (rel(ts_verf(x), erf((double)x)) > erf_rel) erf_rel = rel(ts_verf(x), erf((double)x)), worst_erf = x;
    for (float x = 0.79f; x < 0.81f; x = nextafterf(x, 1.0f) + 1e-6f)
        if (rel(ts_verf(x), erf((double)x)) > erf_rel) erf_rel = rel(ts_verf(x), erf((double)x)), worst_erf = x;
    CHECK(erf_abs <= 1.5e-7, "erf: max abs error %.3g on [-6, 6] (worst near %g)", erf_abs, (double)worst_erf);
    CHECK(erf_rel <= 2.5e-7, "erf: max relative error %.3g", erf_rel);
    CHECK(ts_verf(-0.3f) == -ts_verf(0.3f) && ts_verf(-2.0f) == -ts_verf(2.0f), "erf is odd");
    CHECK(ts_verf(INFINITY) == 1.0f && ts_verf(-INFINITY) == -1.0f && ts_verf(40.0f) == 1.0f, "erf(+-inf) = +-1, erf(40) = 1");
    CHECK(isnan(ts_verf(NAN)), "erf(NaN) is NaN");
    CHECK(ts_verf(0.0f) == 0.0f, "erf(0) = 0");
    CHECK(sig_rel <= 2e-7, "sigmoid: max relative error %.3g on [-30, 30] (worst near %g)", sig_rel, (double)worst_sig);
    CHECK(ts_vsigmoid(INFINITY) == 1.0f && ts_vsigmoid(-INFINITY) == 0.0f && ts_vsigmoid(0.0f) == 0.5f, "sigmoid at +-inf and 0");
    CHECK(ts_vsigmoid(200.0f) == 1.0f && ts_vsigmoid(-200.0f) == 0.0f && isnan(ts_vsigmoid(NAN)), "sigmoid of large |x| and NaN");
    CHECK(exp_rel <= 2.4e-7, "exp: max relative error %.3g on [-87, 88]", exp_rel);
    CHECK(ts_vexp(-100.0f) == 0.0f && ts_vexp(-INFINITY) == 0.0f && isinf(ts_vexp(100.0f)) && isnan(ts_vexp(NAN)), "exp's limits");
    return check_summary("test_vmath");
}
