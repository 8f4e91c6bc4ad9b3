/* test_int64_ops.c -- the graph ops that keep i64 (and i32) values exact
 * beyond f32 and double: ts_pad (constant 0, reflect, edge) and
 * ts_gather_elements move an i64 tensor's values as they are, and
 * ts_reduce_int (and ts_reduce_sum, _mean, _max of integers) reduces them
 * in int64: Sum, Prod, SumSquare and L1 wrapping as int64 does, Max and
 * Min of values that differ by 1 past 2^53, Mean the exact mean toward
 * zero (never overflowing); an i32 Sum wraps to int32. The expected
 * values are computed here in C, element by element. ts_matmul_int
 * multiplies i64 and i32 tensors exactly (the sums wrapping mod 2^64 and
 * 2^32, INT64_MIN and INT64_MAX among the values; 1-D operands, broadcast
 * batch dims, tiles of rows and columns with remainders), and Gemm's
 * alpha AB + beta C in double (ts_graph_int_gemm) truncates as ONNX's
 * reference does. Also run on the staged and CUDA devices (ctest's
 * _staged, _cuda). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
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

/* ---- ts_matmul_int and Gemm's ts_graph_int_gemm, against products
 * computed here element by element (unsigned: wrapping) */

/* x [batch.., M, K] of `dims` (the last two M, K) element (p, m, k),
 * numpy's broadcast of p over the output's batch dims ob[nb] */
static int64_t bat_at(const int64_t *dims, int nd, const int64_t *ob, int nb, int64_t p, int64_t r, int64_t c) {
    int64_t off = 0, stride = 1;
    for (int i = nb - 1, j = nd - 3; i >= 0; i--, j--) {
        int64_t ci = p % ob[i];
        p /= ob[i];
        if (j < 0) continue;
        if (dims[j] != 1) off += ci * stride;
        stride *= dims[j];
    }
    return (off * dims[nd - 2] + r) * dims[nd - 1] + c;
}

/* Fills n values: the ends of int64 and 0, +-1, then values over all of
 * int64 (a fixed generator) */
static void fill64(int64_t *v, int64_t n, uint64_t seed) {
    static const int64_t ends[] = {INT64_MIN, INT64_MAX, 0, -1, 1, ((int64_t)1 << 62) + 1, -((int64_t)1 << 53) - 1};
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        v[i] = i < 7 ? ends[(i + (int64_t)(seed >> 61)) % 7] : (int64_t)(seed ^ (seed >> 29));
    }
}

typedef struct {
    const char *what;
    int na, nb;
    int64_t da[4], db[4];
    bool i32;
} mm_case;

static void int_matmul_cases(void) {
    static const mm_case cases[] = {
        {"i64 [2,3,4] x [4,5] (b broadcast over the batch)", 3, 2, {2, 3, 4}, {4, 5}, false},
        {"i64 [2,1,3,4] x [3,4,2] (both broadcast)", 4, 3, {2, 1, 3, 4}, {3, 4, 2}, false},
        {"i64 [9,70] x [70,300] (tiles of rows and columns with remainders)", 2, 2, {9, 70}, {70, 300}, false},
        {"i64 [4] x [4,5] (1-D a)", 1, 2, {4}, {4, 5}, false},
        {"i64 [3,4] x [4] (1-D b)", 2, 1, {3, 4}, {4}, false},
        {"i64 [6] x [6] (both 1-D: a scalar)", 1, 1, {6}, {6}, false},
        {"i32 [5,33] x [2,33,7] (wrapping to int32)", 2, 3, {5, 33}, {2, 33, 7}, true},
    };
    enum { NC = sizeof cases / sizeof cases[0] };
    ts_graph *g = ts_graph_new(1);
    ts_tensor *ta[NC], *tb[NC], *ty[NC + 1];
    int64_t *va[NC], *vb[NC];
    for (int c = 0; c < NC; c++) {
        char na[16], nb[16];
        snprintf(na, sizeof na, "ma%d", c), snprintf(nb, sizeof nb, "mb%d", c);
        ts_dtype dt = cases[c].i32 ? TS_I32 : TS_I64;
        ta[c] = ts_input(g, na, dt, cases[c].na, cases[c].da), tb[c] = ts_input(g, nb, dt, cases[c].nb, cases[c].db);
        ty[c] = ts_matmul_int(g, ta[c], tb[c]);
    }
    /* Gemm: alpha A^T B^T + beta C, A [4,3] stored transposed, B [5,4] too, C [5] broadcast over the rows */
    const double alpha = 0.3, beta = -1.5;
    ts_tensor *ga = ts_input(g, "ga", TS_I64, 2, (int64_t[]){4, 3}), *gb = ts_input(g, "gb", TS_I64, 2, (int64_t[]){5, 4}),
              *gc = ts_input(g, "gc", TS_I64, 1, (int64_t[]){5});
    ty[NC] = ts_graph_int_gemm(g, ga, gb, gc, 1, 1, alpha, beta);
    bool built = true;
    for (int c = 0; c <= NC; c++) built = built && ty[c];
    CHECK(built, "ts_matmul_int and ts_graph_int_gemm build: %s", built ? "" : ts_last_error());
    if (!built) {
        ts_graph_free(g);
        return;
    }
    CHECK(strncmp(ts_tensor_name(ty[2]), "IntMatMul:", 10) == 0, "the product is a node a user can watch by name ('%s')", ts_tensor_name(ty[2]));

    /* refused: an f32 operand, a mix of i32 and i64, inner dims that differ */
    ts_graph *bad = ts_graph_new(1);
    ts_tensor *bi = ts_input(bad, "bi", TS_I64, 2, (int64_t[]){2, 3}), *bf = ts_input(bad, "bf", TS_F32, 2, (int64_t[]){3, 2}),
              *b32 = ts_input(bad, "b32", TS_I32, 2, (int64_t[]){3, 2}), *b4 = ts_input(bad, "b4", TS_I64, 2, (int64_t[]){4, 2});
    CHECK(!ts_matmul_int(bad, bi, bf) && strstr(ts_last_error(), "i32 or i64 tensors of one dtype"), "ts_matmul_int of an f32 operand is refused (%s)",
          ts_last_error());
    ts_graph_free(bad);
    bad = ts_graph_new(1);
    bi = ts_input(bad, "bi", TS_I64, 2, (int64_t[]){2, 3}), b32 = ts_input(bad, "b32", TS_I32, 2, (int64_t[]){3, 2});
    CHECK(!ts_matmul_int(bad, bi, b32) && strstr(ts_last_error(), "ts_cast one"), "ts_matmul_int of i64 by i32 is refused (%s)", ts_last_error());
    ts_graph_free(bad);
    bad = ts_graph_new(1);
    bi = ts_input(bad, "bi", TS_I64, 2, (int64_t[]){2, 3}), b4 = ts_input(bad, "b4", TS_I64, 2, (int64_t[]){4, 2});
    CHECK(!ts_matmul_int(bad, bi, b4) && strstr(ts_last_error(), "inner dimensions differ"), "ts_matmul_int of [2,3] by [4,2] is refused (%s)",
          ts_last_error());
    ts_graph_free(bad);
    (void)bf;

    ts_model *m = NULL;
    CHECK_OK(ts_model_inference(&m, g, ty, NC + 1, NULL), "an inference model of integer matrix products");
    if (!m) {
        ts_graph_free(g);
        return;
    }
    const char *names[2 * NC + 3];
    ts_array in[2 * NC + 3];
    for (int c = 0; c < NC; c++) {
        const mm_case *k = &cases[c];
        int64_t n[2] = {1, 1};
        for (int i = 0; i < k->na; i++) n[0] *= k->da[i];
        for (int i = 0; i < k->nb; i++) n[1] *= k->db[i];
        va[c] = malloc((size_t)n[0] * sizeof(int64_t)), vb[c] = malloc((size_t)n[1] * sizeof(int64_t));
        fill64(va[c], n[0], 11u + (uint64_t)c), fill64(vb[c], n[1], 101u + (uint64_t)c);
        if (k->i32) { /* the int32 ends among int32 values, held in the first half of the buffer */
            int32_t *a32 = (int32_t *)(void *)va[c], *b32v = (int32_t *)(void *)vb[c];
            for (int64_t i = 0; i < n[0]; i++) a32[i] = i == 0 ? INT32_MIN : i == 1 ? INT32_MAX : (int32_t)(uint32_t)(uint64_t)va[c][i];
            for (int64_t i = 0; i < n[1]; i++) b32v[i] = i == 0 ? INT32_MAX : i == 1 ? INT32_MIN : (int32_t)(uint32_t)(uint64_t)vb[c][i];
        }
        names[2 * c] = ts_tensor_name(ta[c]), names[2 * c + 1] = ts_tensor_name(tb[c]);
        in[2 * c] = (ts_array){.dtype = k->i32 ? TS_I32 : TS_I64, .ndim = k->na, .data = va[c]};
        in[2 * c + 1] = (ts_array){.dtype = k->i32 ? TS_I32 : TS_I64, .ndim = k->nb, .data = vb[c]};
        memcpy(in[2 * c].shape, k->da, sizeof k->da), memcpy(in[2 * c + 1].shape, k->db, sizeof k->db);
    }
    int64_t A[12], Bm[20], Cv[5];
    fill64(A, 12, 7u), fill64(Bm, 20, 8u), fill64(Cv, 5, 9u);
    for (int i = 0; i < 12; i++) A[i] = i % 5 == 0 ? A[i] : A[i] >> 34; /* AB within double's reach for some, past 2^53 for others */
    for (int i = 0; i < 20; i++) Bm[i] = Bm[i] >> 36;
    Cv[0] = INT64_MAX, Cv[1] = ((int64_t)1 << 53) + 1;
    names[2 * NC] = "ga", names[2 * NC + 1] = "gb", names[2 * NC + 2] = "gc";
    in[2 * NC] = (ts_array){.dtype = TS_I64, .ndim = 2, .shape = {4, 3}, .data = A};
    in[2 * NC + 1] = (ts_array){.dtype = TS_I64, .ndim = 2, .shape = {5, 4}, .data = Bm};
    in[2 * NC + 2] = (ts_array){.dtype = TS_I64, .ndim = 1, .shape = {5}, .data = Cv};
    CHECK_OK(ts_model_run(m, names, in, 2 * NC + 3), "a run of the integer matrix products");

    for (int c = 0; c < NC; c++) {
        const mm_case *k = &cases[c];
        /* as numpy: a 1-D a is [1,K], a 1-D b [K,1] */
        int64_t da[4], db[4];
        int nda = k->na < 2 ? 2 : k->na, ndb = k->nb < 2 ? 2 : k->nb;
        if (k->na == 1) da[0] = 1, da[1] = k->da[0];
        else memcpy(da, k->da, sizeof da);
        if (k->nb == 1) db[0] = k->db[0], db[1] = 1;
        else memcpy(db, k->db, sizeof db);
        int nbat = (nda > ndb ? nda : ndb) - 2;
        int64_t ob[4], batch = 1, M = da[nda - 2], K = da[nda - 1], N = db[ndb - 1];
        for (int i = 0; i < nbat; i++) {
            int ja = i - (nbat - (nda - 2)), jb = i - (nbat - (ndb - 2));
            int64_t x = ja >= 0 ? da[ja] : 1, y = jb >= 0 ? db[jb] : 1;
            ob[i] = x > y ? x : y, batch *= ob[i];
        }
        const void *v = anchored(m, ty[c], k->i32 ? TS_I32 : TS_I64, batch * M * N);
        int bad_cells = 0;
        for (int64_t p = 0; v && p < batch; p++)
            for (int64_t r = 0; r < M; r++)
                for (int64_t col = 0; col < N; col++) {
                    uint64_t acc = 0;
                    for (int64_t j = 0; j < K; j++) {
                        int64_t ia = bat_at(da, nda, ob, nbat, p, r, j), ib = bat_at(db, ndb, ob, nbat, p, j, col);
                        int64_t x = k->i32 ? ((const int32_t *)(const void *)va[c])[ia] : va[c][ia];
                        int64_t y = k->i32 ? ((const int32_t *)(const void *)vb[c])[ib] : vb[c][ib];
                        acc += (uint64_t)x * (uint64_t)y;
                    }
                    int64_t o = (p * M + r) * N + col;
                    bad_cells += k->i32 ? ((const int32_t *)v)[o] != (int32_t)(uint32_t)acc : ((const int64_t *)v)[o] != (int64_t)acc;
                }
        CHECK(v && bad_cells == 0, "ts_matmul_int %s, exactly, wrapping (%d wrong)", k->what, bad_cells);
    }
    const int64_t *vg = anchored(m, ty[NC], TS_I64, 3 * 5);
    int bad_cells = 0;
    for (int i = 0; vg && i < 3; i++)
        for (int j = 0; j < 5; j++) {
            uint64_t acc = 0;
            for (int t = 0; t < 4; t++) acc += (uint64_t)A[t * 3 + i] * (uint64_t)Bm[j * 4 + t];
            double want = (double)(int64_t)acc * alpha + (double)Cv[j] * beta;
            int64_t w = want >= 9223372036854775808.0 ? INT64_MAX : want < -9223372036854775808.0 ? INT64_MIN : (int64_t)want;
            bad_cells += vg[i * 5 + j] != w;
        }
    CHECK(vg && bad_cells == 0, "Gemm of int64, A and B transposed, alpha 0.3, beta -1.5: AB wrapped, then in double, toward zero (%d wrong)",
          bad_cells);
    for (int c = 0; c < NC; c++) free(va[c]), free(vb[c]);
    ts_model_free(m);
    ts_graph_free(g);
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
    int_matmul_cases();
    return check_summary("test_int64_ops");
}
