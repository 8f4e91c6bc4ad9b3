/* test_compare_jump.c -- the figures `compare --rank` stands on: the
 * relative error ||a - r|| / ||r|| of ts_compare_arrays against the
 * definition (and its zero, infinite and NaN cases), and where
 * ts_compare_first_jump says precision is first lost: after exact tensors,
 * after noise below the floor (k x its median, an even count's median the
 * mean of the middle two), not below the floor, a NaN as a jump, nothing
 * on a smooth rise, bad arguments refused. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "tensorscope.h"

static ts_array vec(float *v, int64_t n) {
    ts_array a;
    memset(&a, 0, sizeof a);
    a.dtype = TS_F32;
    a.ndim = 1;
    a.shape[0] = n;
    a.data = v;
    return a;
}

static double rel(float *x, float *r, int64_t n) {
    ts_array a = vec(x, n), b = vec(r, n);
    ts_compare_result res;
    if (ts_compare_arrays(&a, &b, 1e-5, 1e-4, &res)) return -1;
    return res.rel_error;
}

static int jump(const double *e, int n, double factor, double *median, double *bar) {
    int at = -2;
    if (ts_compare_first_jump(e, n, factor, TS_JUMP_FLOOR, &at, median, bar)) return -3;
    return at;
}

int main(void) {
    /* the relative error */
    float r[4] = {3, 0, 4, 0}, x[4] = {3, 1, 4, 0}, z[4] = {0}, nan_x[4] = {3, NAN, 4, 0};
    CHECK(fabs(rel(x, r, 4) - 1.0 / 5.0) < 1e-12, "||(0,1,0,0)|| / ||(3,0,4,0)|| = 1/5 (got %g)", rel(x, r, 4));
    CHECK(rel(r, r, 4) == 0, "a tensor against itself: 0");
    CHECK(rel(z, z, 4) == 0, "zeros against zeros: 0");
    CHECK(isinf(rel(x, z, 4)), "anything but zeros against zeros: inf");
    CHECK(isinf(rel(nan_x, r, 4)), "a NaN where the reference is finite: inf");

    double median, bar[8];
    /* exact tensors, then the first rounded one (the first tensor above the floor after exact ones) */
    double exact[] = {0, 0, 0, 2e-3, 1e-3, 3e-3};
    CHECK(jump(exact, 6, 10, &median, bar) == 3 && median == 0, "after exact tensors: the first above the floor (index 3, median 0)");
    CHECK(bar[0] == TS_JUMP_FLOOR && bar[5] == TS_JUMP_FLOOR, "the bar is the floor while the median before is 0");
    /* noise below the floor, then a rise past 10x its median */
    double noisy[] = {5e-6, 6e-6, 7e-6, 8e-6, 5e-5, 1e-4};
    CHECK(jump(noisy, 6, 10, &median, bar) == 5 && fabs(median - 7e-6) < 1e-18,
          "5e-5 stays under 10 x the median 6.5e-6, 1e-4 passes 10 x 7e-6: index 5 (median %g)", median);
    CHECK(fabs(bar[4] - 6.5e-5) < 1e-18 && fabs(bar[1] - 5e-5) < 1e-18,
          "an even count's median is the mean of the middle two (bar[4] = 10 x 6.5e-6 = %g)", bar[4]);
    double smooth[] = {6e-6, 1.2e-5, 2.4e-5, 4.8e-5, 9.6e-5};
    CHECK(jump(smooth, 5, 10, &median, bar) == -1, "a smooth rise (2x per tensor) is no jump");
    CHECK(jump(smooth, 5, 2.5, &median, bar) == 2, "... at factor 2.5 it is, at 2.4e-5 (2.5 x the median 9e-6 = 2.25e-5)");
    double tiny[] = {0, 0, 9e-6, 0};
    CHECK(jump(tiny, 4, 10, &median, bar) == -1, "below the floor (1e-5): f32 noise, no jump");
    double with_nan[] = {5e-6, 5e-6, NAN, 0};
    CHECK(jump(with_nan, 4, 10, &median, bar) == 2, "a NaN error is a jump");
    CHECK(jump(with_nan, 0, 10, &median, NULL) == -1, "no tensors: no jump");

    int at;
    CHECK(ts_compare_first_jump(exact, 6, 0.5, 1e-5, &at, NULL, NULL) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "factor"),
          "a factor below 1 is refused: %s", ts_last_error());
    CHECK(ts_compare_first_jump(exact, 6, 10, -1, &at, NULL, NULL) == TS_ERR_INVALID_ARGUMENT, "a negative floor is refused");
    CHECK(ts_compare_first_jump(NULL, 6, 10, 1e-5, &at, NULL, NULL) == TS_ERR_INVALID_ARGUMENT, "no errors given: refused");
    return check_summary("test_compare_jump");
}
