/* test_int64_ops.c -- the graph ops that keep i64 (and i32) values exact
 * beyond f32 and double: ts_pad (constant 0, reflect, edge) and
 * ts_gather_elements move an i64 tensor's values as they are, and
 * ts_reduce_int (and ts_reduce_sum, _mean, _max of integers) reduces them
 * in int64: Sum, Prod, SumSquare and L1 wrapping as int64 does, Max and
 * Min of values that differ by 1 past 2^53, Mean the exact mean toward
 * zero (never overflowing); an i32 Sum wraps to int32. The expected
 * values are computed here in C, element by element. Also run on the
 * staged and CUDA devices (ctest's _staged, _cuda). */
#include <stdbool.h>
#include <string.h>

#include "check.h"

#define R 3
#define C 4

static const void *anchored(ts_model *m, const ts_tensor *t, ts_dtype want, int64_t n) {
    ts_array a;
    if (!t || ts_model_anchored(m, ts_tensor_name(t), &a) || a.dtype != want || ts_array_numel(&a) != n) return NULL;
    return a.data;
}

/* int64 arithmetic wrapping (unsigned), as the expected values need it */
static int64_t add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static int64_t mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
static int64_t absw(int64_t a) { return a < 0 ? (int64_t)(0 - (uint64_t)a) : a; }

/* The padded element (i, j) of x [R,C] padded by 1 before and 2 after dim
 * 1 and 1 before dim 0, by mode: the input position it reads, or -1 */
static int64_t pad_src(int mode, int64_t u, int64_t n) {
    if (u >= 0 && u < n) return u;
    if (mode == TS_PAD_CONSTANT) return -1;
    if (mode == TS_PAD_EDGE) return u < 0 ? 0 : n - 1;
    int64_t p = 2 * (n - 1), m = ((u % p) + p) % p; /* reflect */
    return m < n ? m : p - m;
}

int main(void) {
    const int64_t B = (int64_t)1 << 53, Q = (int64_t)1 << 62;
    int64_t x[R * C] = {Q + 1, -Q - 3, INT64_MAX, 5, -7, B + 1, INT64_MIN, B + 2, 3, -B - 1, Q + 5, B + 2};
    int64_t y[R * C] = {INT64_MAX, INT64_MAX, 4, 0, INT64_MIN, INT64_MIN, -3, 0, B + 1, 2, 7, -9}; /* means that overflow a sum */
    int32_t z[R * C] = {INT32_MAX, 1, 2, 3, INT32_MIN, -1, 5, 6, 7, 8, 9, 10};
    int32_t gi[R * 2] = {3, 0, 2, -1, 1, 1}; /* GatherElements along dim 1: [R,2] */

    ts_graph *g = ts_graph_new(1);
    ts_tensor *tx = ts_input(g, "x", TS_I64, 2, (int64_t[]){R, C}), *ty = ts_input(g, "y", TS_I64, 2, (int64_t[]){R, C}),
              *tz = ts_input(g, "z", TS_I32, 2, (int64_t[]){R, C}), *tgi = ts_input(g, "gi", TS_I32, 2, (int64_t[]){R, 2});
    static const int64_t pads[4] = {1, 1, 0, 2}; /* before dims 0, 1; after dims 0, 1 */
    ts_tensor *padc = ts_pad(g, tx, pads, TS_PAD_CONSTANT, 0.0f), *padr = ts_pad(g, tx, pads, TS_PAD_REFLECT, 0.0f),
              *pade = ts_pad(g, tx, pads, TS_PAD_EDGE, 0.0f), *ge = ts_gather_elements(g, tx, tgi, 1);
    static const char *const kinds[] = {"Sum", "Mean", "Max", "Min", "Prod", "SumSquare", "L1"};
    enum { NK = 7 };
    ts_tensor *red[NK], *red_all[NK];
    for (int k = 0; k < NK; k++) {
        red[k] = ts_reduce_int(g, kinds[k], tx, 1, (const int[]){1}, 0);
        red_all[k] = ts_reduce_int(g, kinds[k], tx, 2, (const int[]){0, -1}, 1);
    }
    ts_tensor *mean_y = ts_reduce_mean(g, ty, 1, (const int[]){1}, 0), *max0 = ts_reduce_max(g, tx, 1, (const int[]){0}, 1);
    ts_tensor *sum32 = ts_reduce_sum(g, tz, 1, (const int[]){1}, 0), *mean32 = ts_reduce_int(g, "Mean", tz, 1, (const int[]){1}, 0);
    ts_tensor *outs[4 + 2 * NK + 4] = {padc, padr, pade, ge};
    for (int k = 0; k < NK; k++) outs[4 + k] = red[k], outs[4 + NK + k] = red_all[k];
    outs[4 + 2 * NK] = mean_y, outs[5 + 2 * NK] = max0, outs[6 + 2 * NK] = sum32, outs[7 + 2 * NK] = mean32;
    int n_outs = (int)(sizeof outs / sizeof outs[0]);
    bool built = true;
    for (int i = 0; i < n_outs; i++) built = built && outs[i];
    CHECK(built, "ts_pad, ts_gather_elements and ts_reduce_int build on i64 and i32 tensors: %s", built ? "" : ts_last_error());
    if (!built) return check_summary("test_int64_ops");
    ts_array info;
    bool kept = true;
    for (int i = 0; i < n_outs - 2; i++) kept = kept && !ts_tensor_info(outs[i], &info) && info.dtype == TS_I64;
    kept = kept && !ts_tensor_info(sum32, &info) && info.dtype == TS_I32 && !ts_tensor_info(mean32, &info) && info.dtype == TS_I32;
    CHECK(kept, "the results keep their input's dtype (i64, i32)");

    /* a constant border other than 0, a float tensor to ts_reduce_int and an unknown kind are refused, saying what to do */
    ts_graph *bad = ts_graph_new(1);
    ts_tensor *bx = ts_input(bad, "bx", TS_I64, 1, (int64_t[]){4});
    CHECK(!ts_pad(bad, bx, (const int64_t[]){1, 1}, TS_PAD_CONSTANT, 5.0f) && strstr(ts_last_error(), "constant border is 0") &&
              strstr(ts_last_error(), "pad x - v and add v"),
          "ts_pad of an i64 tensor with the constant 5 is refused, saying how to pad with it (%s)", ts_last_error());
    ts_graph_free(bad);
    bad = ts_graph_new(1);
    ts_tensor *bf = ts_input(bad, "bf", TS_F32, 1, (int64_t[]){4});
    CHECK(!ts_reduce_int(bad, "Prod", bf, 1, (const int[]){0}, 0) && strstr(ts_last_error(), "reduces i32 and i64 tensors"),
          "ts_reduce_int of an f32 tensor is refused (%s)", ts_last_error());
    ts_graph_free(bad);
    bad = ts_graph_new(1);
    bx = ts_input(bad, "bx", TS_I64, 1, (int64_t[]){4});
    CHECK(!ts_reduce_int(bad, "Median", bx, 1, (const int[]){0}, 0) && strstr(ts_last_error(), "SumSquare"),
          "ts_reduce_int of an unknown kind is refused, naming the kinds (%s)", ts_last_error());
    ts_graph_free(bad);

    ts_model *m = NULL;
    CHECK_OK(ts_model_inference(&m, g, outs, n_outs, NULL), "an inference model of the integer ops");
    const char *names[4] = {"x", "y", "z", "gi"};
    ts_array in[4] = {{.dtype = TS_I64, .ndim = 2, .shape = {R, C}, .data = x}, {.dtype = TS_I64, .ndim = 2, .shape = {R, C}, .data = y},
                      ts_array_i32(z, 2, (int64_t[]){R, C}), ts_array_i32(gi, 2, (int64_t[]){R, 2})};
    CHECK_OK(ts_model_run(m, names, in, 4), "a run fed int64 values at the ends of int64 and past 2^53");

    /* Pad: [R+1, C+3] */
    const int PR = R + 1, PC = C + 3;
    const ts_tensor *padded[3] = {padc, padr, pade};
    static const int modes[3] = {TS_PAD_CONSTANT, TS_PAD_REFLECT, TS_PAD_EDGE};
    for (int p = 0; p < 3; p++) {
        const int64_t *v = anchored(m, padded[p], TS_I64, PR * PC);
        int bad_cells = 0;
        for (int i = 0; v && i < PR; i++)
            for (int j = 0; j < PC; j++) {
                int64_t si = pad_src(modes[p], i - 1, R), sj = pad_src(modes[p], j - 1, C);
                bad_cells += v[i * PC + j] != (si < 0 || sj < 0 ? 0 : x[si * C + sj]);
            }
        CHECK(v && bad_cells == 0, "Pad %s of int64 values [%d,%d] -> [%d,%d], exactly (%d wrong)",
              p == 0 ? "constant 0" : p == 1 ? "reflect" : "edge", R, C, PR, PC, bad_cells);
    }
    const int64_t *vg = anchored(m, ge, TS_I64, R * 2);
    int wrong = 0;
    for (int i = 0; vg && i < R; i++)
        for (int j = 0; j < 2; j++) wrong += vg[i * 2 + j] != x[i * C + (gi[i * 2 + j] < 0 ? gi[i * 2 + j] + C : gi[i * 2 + j])];
    CHECK(vg && wrong == 0, "GatherElements of int64 values along dim 1, exactly (%d wrong)", wrong);

    /* the reductions, expected from the elements in order */
    for (int k = 0; k < NK; k++) {
        int64_t want[R], all = 0;
        for (int i = 0; i < R; i++) {
            int64_t acc = k == 4 ? 1 : k == 2 ? INT64_MIN : k == 3 ? INT64_MAX : 0;
            for (int j = 0; j < C; j++) {
                int64_t v = x[i * C + j];
                acc = k == 0 || k == 1 ? add(acc, v) : k == 2 ? (v > acc ? v : acc) : k == 3 ? (v < acc ? v : acc) : k == 4 ? mul(acc, v)
                      : k == 5                                                                                 ? add(acc, mul(v, v))
                                                                                                               : add(acc, absw(v));
            }
            want[i] = acc;
        }
        const int64_t *v = anchored(m, red[k], TS_I64, R), *va = anchored(m, red_all[k], TS_I64, 1);
        if (k == 1) continue; /* Mean: below, from exact sums */
        all = want[0];
        for (int i = 1; i < R; i++)
            all = k == 0 ? add(all, want[i]) : k == 2 ? (want[i] > all ? want[i] : all) : k == 3 ? (want[i] < all ? want[i] : all)
                  : k == 4 ? mul(all, want[i]) : add(all, want[i]);
        wrong = 0;
        for (int i = 0; v && i < R; i++) wrong += v[i] != want[i];
        CHECK(v && wrong == 0, "ReduceInt %s of int64 over dim 1, exactly, wrapping (%d wrong; [0] = %lld, want %lld)", kinds[k], wrong,
              v ? (long long)v[0] : 0LL, (long long)want[0]);
        CHECK(va && va[0] == all, "ReduceInt %s of int64 over both dims, kept as [1,1] (%lld, want %lld)", kinds[k], va ? (long long)va[0] : 0LL,
              (long long)all);
    }
#ifdef __SIZEOF_INT128__
    /* Mean: the exact mean toward zero, the sums in 128 bits */
    const int64_t *vm = anchored(m, red[1], TS_I64, R), *vmy = anchored(m, mean_y, TS_I64, R);
    wrong = 0;
    for (int i = 0; vm && vmy && i < R; i++) {
        __int128 sx = 0, sy = 0;
        for (int j = 0; j < C; j++) sx += x[i * C + j], sy += y[i * C + j];
        wrong += vm[i] != (int64_t)(sx / C) || vmy[i] != (int64_t)(sy / C); /* C's division truncates toward zero */
    }
    CHECK(vm && vmy && wrong == 0, "ReduceMean of int64 rows whose sums leave int64: the exact mean toward zero (%d wrong)", wrong);
#endif
    const int64_t *vmax = anchored(m, max0, TS_I64, C);
    wrong = 0;
    for (int j = 0; vmax && j < C; j++) {
        int64_t best = INT64_MIN;
        for (int i = 0; i < R; i++) best = x[i * C + j] > best ? x[i * C + j] : best;
        wrong += vmax[j] != best;
    }
    CHECK(vmax && wrong == 0, "ts_reduce_max of int64 over dim 0: values that differ by 1 past 2^53 told apart (%d wrong)", wrong);
    const int32_t *vs = anchored(m, sum32, TS_I32, R), *vm32 = anchored(m, mean32, TS_I32, R);
    wrong = 0;
    for (int i = 0; vs && vm32 && i < R; i++) {
        int64_t s = 0;
        for (int j = 0; j < C; j++) s += z[i * C + j];
        wrong += vs[i] != (int32_t)(uint32_t)(uint64_t)s || vm32[i] != (int32_t)(s / C);
    }
    CHECK(vs && vm32 && wrong == 0, "ts_reduce_sum of int32 wraps to int32; its Mean is exact (%d wrong)", wrong);

    ts_model_free(m);
    ts_graph_free(g);
    return check_summary("test_int64_ops");
}
