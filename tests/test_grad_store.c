/* test_grad_store.c -- the backward kernels that can store an input's
 * gradient instead of adding to it (ts_kernel_row.stores_din: the executor
 * then skips zeroing a gradient that backward is the first to write) give
 * exactly what zeroing and adding gives, whatever the buffer held before:
 * the elementwise unary family (GELU among them), the binary family on
 * each of its paths (Add/Sub's column pass with the bias's sums, the
 * elementwise one, the general broadcast), conv2d's input gradient on each
 * of its paths (the convolution of dy, the scatter, the 1x1 product),
 * ConvTranspose2d's, batch norm's and ReLU's; MatMul's (both operands, its
 * weight's gradient on one thread and split along the rows over two). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "backend/cpu/cnn.h"
#include "backend/ew_math.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/kernels_tensor.h"
#include "backend/backend.h"
#include "graph/graph.h"

static void fill(float *x, int64_t n, unsigned seed) {
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f + 0.01f;
    }
}

static void garbage(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = (i & 1) ? NAN : 1e30f;
}

/* one binary case: a of shape sa (= the output's), b of shape sb */
static void binary_case(ts_pool *p, int kind, const char *what, const ts_shape *sa, const ts_shape *sb) {
    enum { MAX = 60000 };
    static float a[MAX], b[MAX], d[MAX], da0[MAX], db0[MAX], da1[MAX], db1[MAX];
    int64_t n = ts_shape_numel(sa), nb = ts_shape_numel(sb);
    if (n > MAX || nb > MAX) {
        CHECK(0, "%s: a case larger than the test's buffers", what);
        return;
    }
    memset(da0, 0, sizeof da0), memset(db0, 0, sizeof db0);
    fill(a, n, 1), fill(b, nb, 2), fill(d, n, 3);
    for (int64_t j = 0; j < nb; j++) b[j] += 2.0f; /* away from 0 for Div */
    ts_bcast_binary_backward(p, kind, da0, db0, d, a, b, sa, sa, sb, 0);
    for (unsigned store = 1; store <= 3; store++) {
        /* the gradient not stored adds as before: start it from the reference's half */
        garbage(da1, n), garbage(db1, nb);
        if (!(store & 1u)) memset(da1, 0, (size_t)n * sizeof *da1);
        if (!(store & 2u)) memset(db1, 0, (size_t)nb * sizeof *db1);
        ts_bcast_binary_backward(p, kind, da1, db1, d, a, b, sa, sa, sb, store);
        CHECK(memcmp(da0, da1, (size_t)n * sizeof *da0) == 0 && memcmp(db0, db1, (size_t)nb * sizeof *db0) == 0,
              "%s: stored gradients (bits %u) equal zeroed and added ones", what, store);
    }
}

/* conv2d's (or, transpose, ConvTranspose2d's) input gradient stored
 * over garbage against zeroed and added; g: the convolution's geometry */
static void conv_case(ts_pool *p, const char *what, ts_conv_geom g, bool transpose) {
    int64_t nx = g.N * g.C * g.H * g.W, nw = g.OC * (g.C / g.groups) * g.KH * g.KW, ny = g.N * g.OC * g.OH * g.OW;
    int64_t nin = transpose ? ny : nx, nout = transpose ? nx : ny; /* the transpose's input is the convolution's output */
    size_t nws = transpose ? ts_conv_transpose2d_workspace(&g, ts_pool_threads(p)) : ts_conv2d_workspace(&g, ts_pool_threads(p));
    float *x = malloc((size_t)nin * sizeof *x), *w = malloc((size_t)nw * sizeof *w), *d = malloc((size_t)nout * sizeof *d);
    float *dx0 = calloc((size_t)nin, sizeof *dx0), *dx1 = malloc((size_t)nin * sizeof *dx1), *ws = malloc(nws * sizeof *ws);
    if (!x || !w || !d || !dx0 || !dx1 || !ws) {
        CHECK(0, "%s: out of memory", what);
    } else {
        fill(x, nin, 6), fill(w, nw, 7), fill(d, nout, 8), garbage(dx1, nin);
        if (transpose) {
            ts_conv_transpose2d_backward(p, ws, dx0, NULL, NULL, d, x, w, &g, false);
            ts_conv_transpose2d_backward(p, ws, dx1, NULL, NULL, d, x, w, &g, true);
        } else {
            ts_conv2d_backward(p, ws, dx0, NULL, NULL, d, x, w, &g, false);
            ts_conv2d_backward(p, ws, dx1, NULL, NULL, d, x, w, &g, true);
        }
        CHECK(memcmp(dx0, dx1, (size_t)nin * sizeof *dx0) == 0, "%s backward: stored dx equals zeroed and added", what);
    }
    free(x), free(w), free(d), free(dx0), free(dx1), free(ws);
}

static void batch_norm_case(ts_pool *p) {
    enum { N = 4, C = 6, INNER = 700, NX = N * C * INNER };
    static float x[NX], d[NX], dx0[NX], dx1[NX];
    float w[C], stats[2 * C], y[NX], rm[C] = {0}, rv[C] = {1, 1, 1, 1, 1, 1};
    fill(x, NX, 9), fill(d, NX, 10), fill(w, C, 11);
    ts_batch_norm_forward(p, y, stats, x, w, NULL, rm, rv, N, C, INNER, 1e-5f, 0.1f, true, false, NULL);
    memset(dx0, 0, sizeof dx0), garbage(dx1, NX);
    ts_batch_norm_backward(p, dx0, NULL, NULL, d, x, w, stats, N, C, INNER, true, false);
    ts_batch_norm_backward(p, dx1, NULL, NULL, d, x, w, stats, N, C, INNER, true, true);
    CHECK(memcmp(dx0, dx1, sizeof dx0) == 0, "batch norm backward: stored dx equals zeroed and added");
}

/* ReLU's backward through the CPU's row: the row says it stores, and the
 * stored dx (over garbage) equals zeroed and added, at the kink (out 0),
 * below it and at a NaN output (which passes the gradient) */
static void relu_case(ts_pool *p) {
    enum { N = 3 * 16384 + 17 };
    static float x[N], out[N], d[N], dx0[N], dx1[N];
    const ts_kernel_row *row = &ts_backend_cpu()->kernels[TS_OP_RELU];
    CHECK(row->stores_din & 1u, "ReLU's CPU row stores its input's gradient");
    ts_tensor node = {.op = TS_OP_RELU};
    ts_kctx k = {.node = &node, .n_in = 1, .pool = p, .stream = p};
    k.in_shape[0] = k.out_shape = (ts_shape){1, {N}};
    fill(x, N, 14), fill(d, N, 15);
    for (int64_t i = 0; i < N; i += 7) x[i] = 0.0f;
    x[5] = NAN;
    ts_relu_forward(p, out, x, N);
    memset(dx0, 0, sizeof dx0), garbage(dx1, N);
    float *dx[2] = {dx0, dx1};
    for (int s = 0; s < 2; s++) {
        k.in[0] = x, k.out = out, k.dout = d, k.din[0] = dx[s], k.din_store = s ? 1u : 0u;
        row->backward(&k);
    }
    CHECK(memcmp(dx0, dx1, sizeof dx0) == 0 && dx0[0] == 0.0f && dx0[5] == d[5], "ReLU backward: stored dx equals zeroed and added");
}

/* MatMul's backward through the CPU's row: x [M, K] times w ([K, N], or
 * [N, K] for MatMulT), both gradients stored over garbage against zeroed
 * and added, the workspace the row asks for given */
static void matmul_case(ts_pool *p, bool t, int64_t M, int64_t K, int64_t N) {
    const ts_kernel_row *row = &ts_backend_cpu()->kernels[t ? TS_OP_MATMUL_T : TS_OP_MATMUL];
    ts_tensor node = {.op = t ? TS_OP_MATMUL_T : TS_OP_MATMUL};
    ts_kctx k = {.node = &node, .n_in = 2, .pool = p, .stream = p};
    k.in_shape[0] = (ts_shape){2, {M, K}};
    k.in_shape[1] = t ? (ts_shape){2, {N, K}} : (ts_shape){2, {K, N}};
    k.out_shape = (ts_shape){2, {M, N}};
    size_t nws = row->workspace_floats(k.in_shape, k.in_dtype, &k.out_shape, ts_pool_threads(p));
    float *x = malloc((size_t)(M * K) * sizeof *x), *w = malloc((size_t)(K * N) * sizeof *w), *d = malloc((size_t)(M * N) * sizeof *d);
    float *dx[2] = {malloc((size_t)(M * K) * sizeof(float)), malloc((size_t)(M * K) * sizeof(float))};
    float *dw[2] = {malloc((size_t)(K * N) * sizeof(float)), malloc((size_t)(K * N) * sizeof(float))};
    float *ws = malloc((nws ? nws : 1) * sizeof *ws);
    fill(x, M * K, 11), fill(w, K * N, 12), fill(d, M * N, 13);
    memset(dx[0], 0, (size_t)(M * K) * sizeof(float)), memset(dw[0], 0, (size_t)(K * N) * sizeof(float));
    garbage(dx[1], M * K), garbage(dw[1], K * N);
    for (int s = 0; s < 2; s++) {
        garbage(ws, nws ? (int64_t)nws : 1);
        k.in[0] = x, k.in[1] = w, k.dout = d, k.din[0] = dx[s], k.din[1] = dw[s], k.din_store = s ? 3u : 0u, k.workspace = ws;
        row->backward(&k);
    }
    CHECK(memcmp(dx[0], dx[1], (size_t)(M * K) * sizeof(float)) == 0 && memcmp(dw[0], dw[1], (size_t)(K * N) * sizeof(float)) == 0,
          "%s [%lld,%lld] x [%lld,%lld] on %d threads (workspace %zu floats): stored dx and dw equal zeroed and added", t ? "MatMulT" : "MatMul",
          (long long)M, (long long)K, (long long)K, (long long)N, ts_pool_threads(p), nws);
    free(x), free(w), free(d), free(dx[0]), free(dx[1]), free(dw[0]), free(dw[1]), free(ws);
}

int main(void) {
    ts_pool *p = NULL;
    CHECK_OK(ts_pool_new(&p, 2), "a pool of 2 threads");
    if (!p) return check_summary("test_grad_store");

    /* the unary family, large enough that the pool splits it */
    int64_t n = 3 * 16384 + 17;
    float *x = malloc((size_t)n * sizeof *x), *d = malloc((size_t)n * sizeof *d);
    float *dx0 = malloc((size_t)n * sizeof *dx0), *dx1 = malloc((size_t)n * sizeof *dx1);
    fill(x, n, 4), fill(d, n, 5);
    static const struct { int kind; const char *name; } U[] = {
        {TS_EWU_GELU, "GELU"}, {TS_EWU_GELU_TANH, "GELU (tanh)"}, {TS_EWU_EXP, "Exp"}, {TS_EWU_ABS, "Abs"}, {TS_EWU_SIN, "Sin"}};
    for (size_t u = 0; u < sizeof U / sizeof U[0]; u++) {
        memset(dx0, 0, (size_t)n * sizeof *dx0);
        ts_ew_unary_backward(p, U[u].kind, dx0, d, x, 0.0f, 0.0f, n, false);
        garbage(dx1, n);
        ts_ew_unary_backward(p, U[u].kind, dx1, d, x, 0.0f, 0.0f, n, true);
        CHECK(memcmp(dx0, dx1, (size_t)n * sizeof *dx0) == 0, "%s backward: stored dx equals zeroed and added", U[u].name);
    }
    /* storing must not add: finite values there are replaced, not added to */
    memset(dx0, 0, (size_t)n * sizeof *dx0);
    ts_ew_unary_backward(p, TS_EWU_GELU, dx0, d, x, 0.0f, 0.0f, n, false);
    for (int64_t i = 0; i < n; i++) dx1[i] = 5.0f;
    ts_ew_unary_backward(p, TS_EWU_GELU, dx1, d, x, 0.0f, 0.0f, n, true);
    CHECK(memcmp(dx0, dx1, (size_t)n * sizeof *dx0) == 0, "a stored dx replaces the 5s that were there");
    free(x), free(d), free(dx0), free(dx1);

    ts_shape rows = {2, {300, 128}}, bias = {1, {128}}, narrow = {1, {8}}, wide = {2, {3, 20000}}, col = {2, {300, 1}};
    ts_shape rows8 = {2, {300, 8}};
    binary_case(p, TS_BIN_ADD, "Add [300,128] + bias [128] (the column pass)", &rows, &bias);
    binary_case(p, TS_BIN_SUB, "Sub [300,128] - bias [128]", &rows, &bias);
    binary_case(p, TS_BIN_ADD, "Add [300,128] + [300,128] (one row of columns)", &rows, &rows);
    binary_case(p, TS_BIN_ADD, "Add [300,8] + [8] (rows one by one)", &rows8, &narrow);
    binary_case(p, TS_BIN_MUL, "Mul [3,20000] * [3,20000] (elementwise)", &wide, &wide);
    binary_case(p, TS_BIN_DIV, "Div [300,128] / [128]", &rows, &bias);
    binary_case(p, TS_BIN_ADD, "Add [300,128] + [300,1] (general broadcast)", &rows, &col);
    binary_case(p, TS_BIN_MUL, "Mul [300,128] * [300,1] (general broadcast)", &rows, &col);

    ts_conv_geom same = {.N = 3, .C = 8, .H = 10, .W = 10, .OC = 12, .OH = 10, .OW = 10, .KH = 3, .KW = 3, .SH = 1, .SW = 1, .PT = 1, .PL = 1,
                         .DH = 1, .DW = 1, .groups = 1};
    ts_conv_geom strided = same, one = same;
    strided.SH = strided.SW = 2, strided.OH = strided.OW = 5;
    one.KH = one.KW = 1, one.PT = one.PL = 0;
    conv_case(p, "conv2d 3x3 stride 1 (the convolution of dy)", same, false);
    conv_case(p, "conv2d 3x3 stride 2 (the scatter)", strided, false);
    conv_case(p, "conv2d 1x1 (the product into dx)", one, false);
    conv_case(p, "ConvTranspose2d 3x3 stride 2", strided, true);
    batch_norm_case(p);
    relu_case(p);
    ts_pool *p1 = NULL;
    CHECK_OK(ts_pool_new(&p1, 1), "a pool of 1 thread");
    for (int t = 0; t < 2; t++) {
        matmul_case(p, t, 600, 40, 100);   /* the weight's gradient split along the 600 rows */
        matmul_case(p, t, 300, 128, 200);  /* split by rows of the gradient */
        matmul_case(p1, t, 600, 40, 100); /* unsplit */
    }
    CHECK(ts_backend_cpu()->kernels[TS_OP_MATMUL].workspace_floats((ts_shape[]){{2, {600, 40}}, {2, {40, 100}}}, (ts_dtype[]){TS_F32, TS_F32},
                                                                    &(ts_shape){2, {600, 100}}, 2) ==
              40 * 100,
          "MatMul asks for a partial of the weight's gradient on 2 threads");
    ts_pool_free(p1);
    ts_pool_free(p);
    return check_summary("test_grad_store");
}
