/* test_cnn.c -- the convolutional pieces beyond their gradients (those are
 * in test_ops_grad):
 *  - conv2d's im2col + GEMM path against the direct loop (the oracle), over
 *    a spread of geometries, forward and backward, with and without threads.
 *    Forward tolerance: (K + 2) * FLT_EPSILON * (|x| (*) |w| + |b|), the
 *    rounding bound of a length-K float dot product in any order, so a wrong
 *    index (an O(1) error) cannot pass;
 *  - the inference forward (Winograd F(4x4, 3x3) and F(2x2, 3x3) where it
 *    picks them, the weights transformed at each call or kept) against the
 *    same loop; an inference model's kept weights made again when the
 *    graph's weights change (ts_param_set, another model's training step);
 *  - max pooling's winners (ties, NaN, padding) against a plain scan;
 *  - build errors that name the layer and the sizes;
 *  - batch norm's running statistics (momentum update with the unbiased
 *    variance, computed here in double from the batch), inference with the
 *    running values, the buffers listed, anchorable and without gradients;
 *  - dropout: the mask's values and rate, determinism for a seed, a new mask
 *    each micro-batch, the gradient through the mask, identity in inference. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "backend/cpu/cnn.h"
#include "backend/cpu/lane_sum.h"
#include "tensorscope.h"

#include "rand.h"

/* ------------------------------------------------ conv2d: fast vs oracle */

static int64_t osize(int64_t in, int64_t pa, int64_t pb, int64_t k, int64_t d, int64_t s)
{
    return (in + pa + pb - (k - 1) * d - 1) / s + 1;
}

static void conv_case(ts_pool *pool, int64_t N, int64_t C, int64_t H, int64_t W, int64_t OC, int64_t KH, int64_t KW, int64_t SH, int64_t SW,
                      int64_t PT, int64_t PB, int64_t PL, int64_t PR, int64_t DH, int64_t DW, int64_t G)
{
    ts_conv_geom g = {.N = N, .C = C, .H = H, .W = W, .OC = OC, .KH = KH, .KW = KW, .SH = SH, .SW = SW, .PT = PT, .PL = PL, .DH = DH,
                      .DW = DW, .groups = G};
    g.OH = osize(H, PT, PB, KH, DH, SH);
    g.OW = osize(W, PL, PR, KW, DW, SW);
    int64_t nx = N * C * H * W, nw = OC * (C / G) * KH * KW, ny = N * OC * g.OH * g.OW;
    float *x = rand_buf(nx), *w = rand_buf(nw), *b = rand_buf(OC), *dy = rand_buf(ny);
    float *y = calloc((size_t)ny, sizeof(float)), *y0 = calloc((size_t)ny, sizeof(float)), *bound = calloc((size_t)ny, sizeof(float));
    float *ax = malloc(sizeof(float) * (size_t)nx), *aw = malloc(sizeof(float) * (size_t)nw), *ab = malloc(sizeof(float) * (size_t)OC);
    /* the workspace sized as the op table does, from the shapes alone (no strides, padding, dilation) */
    ts_conv_geom shapes = {.N = N, .C = C, .H = H, .W = W, .OC = OC, .OH = g.OH, .OW = g.OW, .KH = KH, .KW = KW, .groups = G};
    float *ws = malloc(sizeof(float) * ts_conv2d_workspace(&shapes, ts_pool_threads(pool)));
    float *dx = calloc((size_t)nx, sizeof(float)), *dw = calloc((size_t)nw, sizeof(float)), *db = calloc((size_t)OC, sizeof(float));
    float *dx0 = calloc((size_t)nx, sizeof(float)), *dw0 = calloc((size_t)nw, sizeof(float)), *db0 = calloc((size_t)OC, sizeof(float));
    if (!x || !w || !b || !dy || !y || !y0 || !bound || !ax || !aw || !ab || !ws || !dx || !dw || !db || !dx0 || !dw0 || !db0) {
        CHECK(0, "conv case: out of memory");
        goto done;
    }
    for (int64_t i = 0; i < nx; i++)
        ax[i] = fabsf(x[i]);
    for (int64_t i = 0; i < nw; i++)
        aw[i] = fabsf(w[i]);
    for (int64_t i = 0; i < OC; i++)
        ab[i] = fabsf(b[i]);
    /* start the accumulating outputs from a non-zero value: backward adds */
    for (int64_t i = 0; i < nx; i++)
        dx[i] = dx0[i] = 0.25f;
    for (int64_t i = 0; i < nw; i++)
        dw[i] = dw0[i] = -0.25f;
    ts_conv2d_forward(pool, ws, y, x, w, b, &g, NULL);
    ts_conv2d_naive_forward(y0, x, w, b, &g);
    ts_conv2d_naive_forward(bound, ax, aw, ab, &g);
    double K = (double)((C / G) * KH * KW), worst = 0;
    int64_t bad = 0;
    for (int64_t i = 0; i < ny; i++) {
        double d = fabs((double)y[i] - y0[i]), tol = (K + 2) * FLT_EPSILON * bound[i] + 1e-30;
        bad += !(d <= tol);
        worst = fmax(worst, d / tol);
    }
    ts_conv2d_backward(pool, ws, dx, dw, db, dy, x, w, &g, false);
    ts_conv2d_naive_backward(dx0, dw0, db0, dy, x, w, &g);
    double bw = 0, mag = 0;
    for (int64_t i = 0; i < nx; i++)
        bw = fmax(bw, fabs((double)dx[i] - dx0[i])), mag = fmax(mag, fabs((double)dx0[i]));
    for (int64_t i = 0; i < nw; i++)
        bw = fmax(bw, fabs((double)dw[i] - dw0[i])), mag = fmax(mag, fabs((double)dw0[i]));
    for (int64_t i = 0; i < OC; i++)
        bw = fmax(bw, fabs((double)db[i] - db0[i])), mag = fmax(mag, fabs((double)db0[i]));
    /* the backward sums run over N*OH*OW (dw) or OC*KH*KW (dx) products */
    double btol = 4e-6 * mag * sqrt((double)(N * g.OH * g.OW + OC * KH * KW));
    CHECK(bad == 0 && bw <= btol,
          "conv2d fast == oracle: x[%lld,%lld,%lld,%lld] k%lldx%lld s%lld,%lld p%lld,%lld,%lld,%lld d%lld,%lld g%lld -> [%lld,%lld,%lld,%lld]%s "
          "forward worst %.2f of the bound, backward max diff %.3g (tol %.3g)",
          (long long)N, (long long)C, (long long)H, (long long)W, (long long)KH, (long long)KW, (long long)SH, (long long)SW, (long long)PT,
          (long long)PB, (long long)PL, (long long)PR, (long long)DH, (long long)DW, (long long)G, (long long)N, (long long)OC,
          (long long)g.OH, (long long)g.OW, pool ? " threads" : "", worst, bw, btol);
    /* the first backward to write dx stores into it (the executor did not
     * zero it): every value written, none of the old (NaN) ones read */
    for (int64_t i = 0; i < nx; i++)
        dx[i] = NAN;
    ts_conv2d_backward(pool, ws, dx, NULL, NULL, dy, x, w, &g, true);
    double sw = 0;
    for (int64_t i = 0; i < nx; i++)
        sw = fmax(sw, isnan(dx[i]) ? INFINITY : fabs((double)dx[i] - (dx0[i] - 0.25)));
    CHECK(sw <= btol, "conv2d backward storing dx == oracle: x[%lld,%lld,%lld,%lld] k%lldx%lld s%lld,%lld g%lld%s max diff %.3g (tol %.3g)",
          (long long)N, (long long)C, (long long)H, (long long)W, (long long)KH, (long long)KW, (long long)SH, (long long)SW, (long long)G,
          pool ? " threads" : "", sw, btol);
done:
    free(x), free(w), free(b), free(dy), free(y), free(y0), free(bound), free(ax), free(aw), free(ab), free(ws);
    free(dx), free(dw), free(db), free(dx0), free(dw0), free(db0);
}

/* ----------------------------- conv2d's inference path: Winograd vs oracle */

/* ts_conv2d_infer on a 3x3 convolution against the direct loop, within
 * TOL[m] * FLT_EPSILON * (|x| (*) |w| + |b|) for the tile m it takes, for
 * im2col (m = 0) the dot product's bound K + 2 as in conv_case: the
 * transforms (entries up to 8 in F(4x4)) round more than a dot product
 * (about 1 and 15 eps here), but a wrong tap or tile (an error of one term,
 * about 1/(9C) of that bound) is hundreds of times the tolerance. Returns
 * the outputs off; *worst: the worst in eps of the bound. */
static int64_t infer_off(ts_pool *pool, const ts_conv_geom *g, float *ws, float *y, const float *x, const float *w, const float *b,
                         float *cache, uint64_t key, int m, double *worst)
{
    double TOL[5] = {(double)(g->C * 9 + 2), 0, 8, 0, 64};
    int64_t nx = g->N * g->C * g->H * g->W, nw = g->OC * g->C * 9, ny = g->N * g->OC * g->OH * g->OW, bad = 0;
    float *y0 = malloc(sizeof(float) * (size_t)ny), *bound = malloc(sizeof(float) * (size_t)ny);
    float *ax = malloc(sizeof(float) * (size_t)nx), *aw = malloc(sizeof(float) * (size_t)nw), *ab = b ? malloc(sizeof(float) * (size_t)g->OC) : NULL;
    *worst = 0;
    if (!y0 || !bound || !ax || !aw || (b && !ab)) {
        free(y0), free(bound), free(ax), free(aw), free(ab);
        return ny;
    }
    for (int64_t i = 0; i < nx; i++)
        ax[i] = fabsf(x[i]);
    for (int64_t i = 0; i < nw; i++)
        aw[i] = fabsf(w[i]);
    for (int64_t i = 0; b && i < g->OC; i++)
        ab[i] = fabsf(b[i]);
    ts_conv2d_infer(pool, ws, y, x, w, b, g, cache, key, NULL);
    ts_conv2d_naive_forward(y0, x, w, b, g);
    ts_conv2d_naive_forward(bound, ax, aw, ab, g);
    for (int64_t i = 0; i < ny; i++) {
        double d = fabs((double)y[i] - y0[i]), tol = TOL[m] * FLT_EPSILON * bound[i] + 1e-30;
        bad += !(d <= tol);
        *worst = fmax(*worst, d / (FLT_EPSILON * bound[i] + 1e-30));
    }
    free(y0), free(bound), free(ax), free(aw), free(ab);
    return bad;
}

/* The inference forward of one geometry: the tile it picks (want_m: 4, 2,
 * or 0 for the im2col path, its bias written before the product adds to
 * it), with the weights transformed at the call and, want_kept, with them
 * kept in a cache; both against the oracle. With the cache: new weights
 * under a new key are transformed again (the outputs follow them), under
 * the same key they are not (the outputs of the kept ones, bit for bit:
 * the cache is used). Odd sizes (partial tiles at the bottom and right),
 * uneven padding, several samples in one chunk of tile rows and chunks
 * that start inside a sample. */
static void infer_case(ts_pool *pool, int64_t N, int64_t C, int64_t H, int64_t W, int64_t OC, int64_t PT, int64_t PB, int64_t PL, int64_t PR,
                       int64_t S, bool bias, int want_m, int want_kept)
{
    ts_conv_geom g = {.N = N, .C = C, .H = H, .W = W, .OC = OC, .KH = 3, .KW = 3, .SH = S, .SW = S, .PT = PT, .PL = PL, .DH = 1, .DW = 1,
                      .groups = 1};
    g.OH = osize(H, PT, PB, 3, 1, S);
    g.OW = osize(W, PL, PR, 3, 1, S);
    int64_t nx = N * C * H * W, nw = OC * C * 9, ny = N * OC * g.OH * g.OW;
    ts_conv_geom shapes = {.N = N, .C = C, .H = H, .W = W, .OC = OC, .OH = g.OH, .OW = g.OW, .KH = 3, .KW = 3, .groups = 1};
    size_t kept = ts_conv2d_cache_floats(&g);
    float *x = rand_buf(nx), *w = rand_buf(nw), *w2 = rand_buf(nw), *b = bias ? rand_buf(OC) : NULL, *y = malloc(sizeof(float) * (size_t)ny);
    float *y1 = malloc(sizeof(float) * (size_t)ny), *cache = kept ? calloc(kept, sizeof(float)) : NULL;
    float *ws = malloc(sizeof(float) * ts_conv2d_workspace(&shapes, ts_pool_threads(pool)));
    if (!x || !w || !w2 || (bias && !b) || !y || !y1 || (kept && !cache) || !ws) {
        CHECK(0, "inference conv case: out of memory");
        goto done;
    }
    int m = ts_conv2d_winograd_tile(&g, false), mk = ts_conv2d_winograd_tile(&g, true);
    double worst = 0, worst_k = 0, worst_new = 0;
    int64_t bad = infer_off(pool, &g, ws, y, x, w, b, NULL, 0, m, &worst);
    int64_t bad_k = infer_off(pool, &g, ws, y1, x, w, b, cache, 7, mk, &worst_k);
    int64_t bad_new = infer_off(pool, &g, ws, y, x, w2, b, cache, 8, mk, &worst_new); /* new weights, new key */
    ts_conv2d_infer(pool, ws, y, x, w, b, &g, cache, 8, NULL);                        /* the first weights back, the same key */
    bool reused = !kept || memcmp(y, y1, sizeof(float) * (size_t)ny) != 0;
    char what[160];
    snprintf(what, sizeof what, "conv2d inference: x[%lld,%lld,%lld,%lld] k3x3 s%lld p%lld,%lld,%lld,%lld%s -> [%lld,%lld,%lld,%lld]%s",
             (long long)N, (long long)C, (long long)H, (long long)W, (long long)S, (long long)PT, (long long)PB, (long long)PL, (long long)PR,
             bias ? "" : " no bias", (long long)N, (long long)OC, (long long)g.OH, (long long)g.OW, pool ? " threads" : "");
    CHECK(m == want_m && bad == 0, "%s: tile %d (want %d), %lld outputs off, worst %.1f eps of the bound", what, m, want_m, (long long)bad, worst);
    CHECK(mk == want_kept && (kept > 0) == (want_kept > 0) && bad_k == 0 && bad_new == 0 && reused,
          "%s, the weights kept: tile %d (want %d), %lld outputs off (worst %.1f eps), after new weights under a new key %lld off "
          "(worst %.1f eps); under the same key the kept ones used: %s",
          what, mk, want_kept, (long long)bad_k, worst_k, (long long)bad_new, worst_new, reused ? "yes" : "no");
done:
    free(x), free(w), free(w2), free(b), free(y), free(y1), free(cache), free(ws);
}

/* The inference forward's outputs on pools of 1, 2 and 3 threads: the
 * same bits (each output's sums in one order whichever slice makes it:
 * the slices split tile rows or output channels, a chunk at a time) */
static void infer_threads_case(ts_pool *const pools[3], int64_t N, int64_t C, int64_t H, int64_t W, int64_t OC, bool kept)
{
    ts_conv_geom g = {.N = N, .C = C, .H = H, .W = W, .OC = OC, .OH = H, .OW = W, .KH = 3, .KW = 3, .SH = 1, .SW = 1, .PT = 1, .PL = 1,
                      .PB = 1, .PR = 1, .DH = 1, .DW = 1, .groups = 1};
    int64_t nx = N * C * H * W, ny = N * OC * H * W;
    size_t nc = kept ? ts_conv2d_cache_floats(&g) : 0;
    float *x = rand_buf(nx), *w = rand_buf(OC * C * 9), *b = rand_buf(OC), *y[3] = {0};
    bool ok = x && w && b, same = true;
    for (int t = 0; t < 3 && ok; t++) {
        float *ws = malloc(sizeof(float) * ts_conv2d_workspace(&g, ts_pool_threads(pools[t])));
        float *cache = nc ? calloc(nc, sizeof(float)) : NULL;
        y[t] = malloc(sizeof(float) * (size_t)ny);
        ok = ws && y[t] && (!nc || cache);
        if (ok) ts_conv2d_infer(pools[t], ws, y[t], x, w, b, &g, cache, 1, NULL);
        if (ok && t) same = same && memcmp(y[t], y[0], sizeof(float) * (size_t)ny) == 0;
        free(ws), free(cache);
    }
    CHECK(ok && same && ts_conv2d_winograd_tile(&g, kept) > 0,
          "conv2d inference x[%lld,%lld,%lld,%lld] -> %lld channels%s, tile %d: the same bits on 1, 2 and 3 threads", (long long)N,
          (long long)C, (long long)H, (long long)W, (long long)OC, kept ? " (weights kept)" : "", ts_conv2d_winograd_tile(&g, kept));
    free(x), free(w), free(b), free(y[0]), free(y[1]), free(y[2]);
}

/* The inference forward of a convolution of few taps with its weights
 * kept (the stem's 7x7 stride 2; the panels gathered from the input, no
 * im2col): against the direct loop within the dot product's bound (K + 2
 * eps), the same bits on 1, 2 and 3 threads, new weights under a new key
 * packed again, and under the same key the kept ones used. Panels across
 * output rows, a partial last panel, output channels not a multiple of
 * the register block's, several samples. */
static void packed_case(ts_pool *const pools[3], int64_t N, int64_t C, int64_t H, int64_t W, int64_t OC, int64_t K, int64_t S, int64_t P,
                        const char *what)
{
    ts_conv_geom g = {.N = N, .C = C, .H = H, .W = W, .OC = OC, .KH = K, .KW = K, .SH = S, .SW = S, .PT = P, .PL = P, .PB = P, .PR = P,
                      .DH = 1, .DW = 1, .groups = 1};
    g.OH = osize(H, P, P, K, 1, S);
    g.OW = osize(W, P, P, K, 1, S);
    ts_conv_geom shapes = {.N = N, .C = C, .H = H, .W = W, .OC = OC, .OH = g.OH, .OW = g.OW, .KH = K, .KW = K, .groups = 1};
    int64_t nx = N * C * H * W, nw = OC * C * K * K, ny = N * OC * g.OH * g.OW, bad = 0;
    size_t kept = ts_conv2d_cache_floats(&g), bytes = sizeof(float) * (size_t)ny;
    float *x = rand_buf(nx), *w = rand_buf(nw), *w2 = rand_buf(nw), *b = rand_buf(OC), *y0 = malloc(bytes), *bound = malloc(bytes);
    float *ax = malloc(sizeof(float) * (size_t)nx), *aw = malloc(sizeof(float) * (size_t)nw), *ab = malloc(sizeof(float) * (size_t)OC);
    float *y[3] = {0}, *y2 = malloc(bytes), *y3 = malloc(bytes);
    bool ok = x && w && w2 && b && y0 && bound && ax && aw && ab && y2 && y3 && kept > 0 && !ts_conv2d_winograd_tile(&g, true), same = true,
         repacked = true, reused = true;
    double worst = 0;
    for (int64_t i = 0; ok && i < nx; i++) ax[i] = fabsf(x[i]);
    for (int64_t i = 0; ok && i < nw; i++) aw[i] = fabsf(w[i]);
    for (int64_t i = 0; ok && i < OC; i++) ab[i] = fabsf(b[i]);
    if (ok) ts_conv2d_naive_forward(y0, x, w, b, &g), ts_conv2d_naive_forward(bound, ax, aw, ab, &g);
    for (int t = 0; t < 3 && ok; t++) {
        float *ws = malloc(sizeof(float) * ts_conv2d_workspace(&shapes, ts_pool_threads(pools[t]))), *cache = calloc(kept, sizeof(float));
        y[t] = malloc(bytes);
        ok = ws && cache && y[t];
        if (ok) {
            ts_conv2d_infer(pools[t], ws, y[t], x, w, b, &g, cache, 1, NULL);
            ts_conv2d_infer(pools[t], ws, y2, x, w2, b, &g, cache, 2, NULL); /* new weights, new key */
            ts_conv2d_infer(pools[t], ws, y3, x, w, b, &g, cache, 2, NULL);  /* the first back, the same key: the kept ones */
            repacked = repacked && memcmp(y2, y[t], bytes) != 0;
            reused = reused && memcmp(y3, y2, bytes) == 0;
        }
        if (ok && t) same = same && memcmp(y[t], y[0], bytes) == 0;
        free(ws), free(cache);
    }
    for (int64_t i = 0; ok && i < ny; i++) {
        double d = fabs((double)y[0][i] - y0[i]), e = FLT_EPSILON * bound[i] + 1e-30;
        bad += !(d <= (double)(C * K * K + 2) * e);
        worst = fmax(worst, d / e);
    }
    CHECK(ok && bad == 0 && same && repacked && reused,
          "conv2d inference, packed from the input (%s): weights kept (%zu floats), %lld outputs off (worst %.1f eps of the bound), the same "
          "bits on 1, 2, 3 threads: %s, new weights under a new key packed again: %s, the same key keeps them: %s",
          what, kept, (long long)bad, worst, same ? "yes" : "no", repacked ? "yes" : "no", reused ? "yes" : "no");
    free(x), free(w), free(w2), free(b), free(y0), free(bound), free(ax), free(aw), free(ab), free(y[0]), free(y[1]), free(y[2]), free(y2), free(y3);
}

static void infer_oracles(void)
{
    ts_pool *pool = NULL, *pool3 = NULL;
    CHECK_OK(ts_pool_new(&pool, 2), "a pool of 2 threads");
    CHECK_OK(ts_pool_new(&pool3, 3), "a pool of 3 threads");
    ts_pool *const pools[3] = {NULL, pool, pool3};
    packed_case(pools, 1, 3, 64, 64, 16, 7, 2, 3, "the stem's 7x7 stride 2, 32x32 outputs");
    packed_case(pools, 2, 3, 67, 61, 10, 7, 2, 3, "7x7 stride 2, two samples of 34x31 outputs, 10 channels");
    packed_case(pools, 1, 64, 90, 90, 24, 1, 2, 0, "a 1x1 stride 2, 45x45 outputs");
    packed_case(pools, 1, 4, 40, 40, 8, 3, 1, 1, "a 3x3 too small for Winograd");
    infer_threads_case(pools, 1, 16, 60, 70, 24, false); /* rows of 18 tiles: whole vector blocks, 15 tile rows split 7/8, 5/5/5 */
    infer_threads_case(pools, 2, 32, 28, 28, 40, true);  /* 14 tile rows of 7 tiles over two samples */
    infer_threads_case(pools, 1, 64, 14, 14, 100, true); /* 16 tiles, 100 channels: split by output channels (54 + 46, 36 + 36 + 28) */
    infer_threads_case(pools, 1, 64, 14, 14, 100, false); /* F(2x2)'s 49 tiles: by output channels too */
    for (int t = 0; t < 3; t++) {
        ts_pool *p = pools[t];
        infer_case(p, 1, 32, 30, 30, 32, 1, 1, 1, 1, 1, true, 4, 4);     /* ResNet's first stage, smaller: 8x8 tiles of 4x4 */
        infer_case(p, 1, 24, 29, 31, 40, 2, 0, 0, 2, 1, true, 4, 4);     /* odd sizes, uneven padding: partial tiles */
        infer_case(p, 5, 256, 18, 18, 8, 1, 1, 1, 1, 1, false, 4, 4);    /* two chunks of 13 and 12 tile rows, each across samples */
        infer_case(p, 1, 64, 14, 14, 48, 1, 1, 1, 1, 1, true, 2, 4);     /* ResNet's third stage at batch 1: 7x7 tiles of 2x2, or 4x4 of 4x4 kept */
        infer_case(p, 1, 64, 13, 13, 48, 1, 1, 1, 1, 1, false, 2, 4);    /* a partial last tile row and column */
        infer_case(p, 1, 64, 15, 15, 48, 0, 0, 0, 0, 1, true, 2, 4);     /* no padding */
        infer_case(p, 1, 128, 7, 7, 128, 1, 1, 1, 1, 1, true, 0, 2);     /* the last stage at batch 1: F(2x2) only with the weights kept */
        infer_case(p, 1, 256, 5, 5, 256, 1, 1, 1, 1, 1, true, 0, 0);     /* too few tiles even with the weights kept */
        infer_case(p, 2, 32, 29, 29, 32, 1, 1, 1, 1, 2, true, 0, 0);     /* stride 2 */
        infer_case(p, 1, 8, 12, 12, 8, 1, 1, 1, 1, 1, true, 0, 0);       /* too little work */
        infer_case(p, 3, 64, 20, 20, 32, 1, 1, 1, 1, 2, true, 0, 0);     /* stride 2 on the threads' own samples */
        infer_case(p, 1, 16, 60, 70, 24, 1, 1, 1, 1, 1, true, 4, 4);     /* rows of 18 tiles: vector blocks of 8 at the edge and inside */
        infer_case(p, 2, 16, 37, 63, 24, 1, 0, 0, 2, 1, false, 4, 4);    /* a vector block cut at the right (31 outputs), uneven padding */
        infer_case(p, 1, 64, 14, 14, 100, 1, 1, 1, 1, 1, true, 2, 4);    /* fewer tiles than output channels: slices of them */
    }
    ts_pool_free(pool);
    ts_pool_free(pool3);
}

/* A same-padded 3x3 convolution with stride 1 whose weight gradient (the
 * forward's tiles) and input gradient (the convolution of dy with the
 * turned weights: the geometry with C and OC swapped) take Winograd's tile
 * want_m, against the oracle (conv_case: the gradients added, and dx
 * stored). */
static void backward_wino(ts_pool *pool, int64_t N, int64_t C, int64_t H, int64_t W, int64_t OC, int want_m)
{
    ts_conv_geom f = {.N = N, .C = C, .H = H, .W = W, .OC = OC, .OH = H, .OW = W, .KH = 3, .KW = 3, .SH = 1, .SW = 1, .PT = 1, .PL = 1,
                      .DH = 1, .DW = 1, .groups = 1};
    ts_conv_geom d = f;
    d.C = OC, d.OC = C;
    int mw = ts_conv2d_winograd_tile(&f, false), mx = ts_conv2d_winograd_tile(&d, false);
    CHECK(mw == want_m && mx == want_m,
          "conv2d x[%lld,%lld,%lld,%lld] k3x3 -> %lld channels: its weight and input gradients take Winograd's tiles %d, %d (want %d)",
          (long long)N, (long long)C, (long long)H, (long long)W, (long long)OC, mw, mx, want_m);
    conv_case(pool, N, C, H, W, OC, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);
}

/* ------------------------------------------ max pooling: winners vs a scan */

/* The kernel's windows (the vectorised 2x2 stride-2 rows, the general
 * rows' vectors and their edges, rows too short for a vector) against a
 * plain scan with PyTorch's CPU rule written here: the first value of the
 * window row-major, then any strictly greater value or NaN takes over.
 * Values from {0, 1, 2} (ties everywhere) with NaNs; the gradient goes to
 * the winner. The values alone (an inference model's, no indices kept)
 * the same. */
static void pool_case(ts_pool *pool, int64_t H, int64_t W, int64_t K, int64_t S, int64_t P, int64_t D)
{
    ts_conv_geom g = {.N = 2, .C = 3, .H = H, .W = W, .OC = 3, .KH = K, .KW = K, .SH = S, .SW = S, .PT = P, .PL = P, .DH = D, .DW = D,
                      .groups = 1};
    g.OH = osize(H, P, P, K, D, S);
    g.OW = osize(W, P, P, K, D, S);
    int64_t nx = g.N * g.C * H * W, ny = g.N * g.C * g.OH * g.OW, bad = 0;
    float *x = rand_buf(nx), *dy = rand_buf(ny), *y = malloc(sizeof(float) * (size_t)ny), *yv = malloc(sizeof(float) * (size_t)ny);
    float *dx = calloc((size_t)nx, sizeof(float)), *dx0 = calloc((size_t)nx, sizeof(float));
    float *flat = malloc(sizeof(float) * (size_t)ny), *flat_cm = malloc(sizeof(float) * (size_t)ny);
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)ny);
    if (!x || !dy || !y || !yv || !dx || !dx0 || !idx || !flat || !flat_cm) {
        CHECK(0, "pool case: out of memory");
        goto done;
    }
    for (int64_t i = 0; i < nx; i++)
        x[i] = i % 37 == 5 ? NAN : floorf((x[i] + 1.0f) * 1.5f);
    ts_max_pool2d_forward(pool, y, idx, x, &g, NULL);
    ts_max_pool2d_forward(pool, yv, NULL, x, &g, NULL);
    ts_max_pool2d_backward(pool, dx, dy, idx, &g);
    ts_max_pool_flat_indices(flat, idx, &g, false);
    ts_max_pool_flat_indices(flat_cm, idx, &g, true);
    for (int64_t q = 0; q < g.N * g.C; q++)
        for (int64_t oh = 0; oh < g.OH; oh++)
            for (int64_t ow = 0; ow < g.OW; ow++) {
                int64_t best_i = -1, o = (q * g.OH + oh) * g.OW + ow;
                for (int64_t ki = 0; ki < K; ki++)
                    for (int64_t kj = 0; kj < K; kj++) {
                        int64_t ih = oh * S - P + ki * D, iw = ow * S - P + kj * D, at = ih * W + iw;
                        if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                        if (best_i < 0 || x[q * H * W + at] > x[q * H * W + best_i] || isnan(x[q * H * W + at])) best_i = at;
                    }
                float want = x[q * H * W + best_i];
                bad += idx[o] != best_i || !(y[o] == want || (isnan(y[o]) && isnan(want))) || !(yv[o] == want || (isnan(yv[o]) && isnan(want)));
                /* ONNX's Indices: into the whole input, row- or column-major within the plane */
                bad += flat[o] != (float)(q * H * W + best_i) || flat_cm[o] != (float)(q * H * W + best_i / W + best_i % W * H);
                dx0[q * H * W + best_i] += dy[o];
            }
    for (int64_t i = 0; i < nx; i++)
        bad += dx[i] != dx0[i];
    CHECK(bad == 0, "max_pool2d k%lld s%lld p%lld d%lld on %lldx%lld%s: winners, flat indices, outputs and gradients as the scan (%lld differ)",
          (long long)K, (long long)S, (long long)P, (long long)D, (long long)H, (long long)W, pool ? " threads" : "", (long long)bad);
done:
    free(x), free(dy), free(y), free(yv), free(dx), free(dx0), free(idx), free(flat), free(flat_cm);
}

/* conv2d and max pooling against their oracles, without and with threads */
static void kernel_oracles(void)
{
    ts_pool *pool = NULL;
    CHECK_OK(ts_pool_new(&pool, 2), "a pool of 2 threads");
    for (int t = 0; t < 2; t++) {
        ts_pool *p = t ? pool : NULL;
        conv_case(p, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1);           /* 1x1 everything */
        conv_case(p, 3, 1, 28, 28, 6, 5, 5, 1, 1, 0, 0, 0, 0, 1, 1, 1);         /* LeNet conv1 */
        conv_case(p, 4, 6, 12, 12, 16, 5, 5, 1, 1, 0, 0, 0, 0, 1, 1, 1);        /* LeNet conv2 */
        conv_case(p, 2, 16, 9, 11, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1);        /* ResNet downsampling, odd sizes */
        conv_case(p, 2, 16, 8, 8, 32, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1);         /* 1x1 shortcut, stride 2 */
        conv_case(p, 2, 5, 13, 7, 4, 3, 2, 3, 1, 2, 0, 1, 1, 2, 3, 1);          /* asymmetric, dilated */
        conv_case(p, 3, 8, 10, 10, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 4);        /* groups 4 */
        conv_case(p, 2, 8, 10, 9, 16, 3, 3, 1, 2, 1, 1, 1, 1, 1, 1, 8);         /* depthwise x2 */
        conv_case(p, 1, 3, 32, 32, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);        /* ResNet stem */
        conv_case(p, 5, 8, 16, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2);        /* groups 2, samples split unevenly over threads */
        conv_case(p, 3, 32, 12, 12, 32, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1);       /* 1x1 stride 1: the input is its own columns */
        conv_case(p, 3, 16, 23, 23, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);        /* columns in two chunks of output rows (12, 11) */
        conv_case(p, 2, 64, 40, 40, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);        /* six chunks of output rows (7, ..., 7, 5) */
        conv_case(p, 2, 128, 41, 41, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1);       /* stride 2 in two chunks (11, 10) */
        /* one sample on two threads share it: columns built by channels,
         * the product split by output positions or by output channels */
        conv_case(p, 1, 64, 40, 40, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);        /* padded, four chunks, split by positions */
        conv_case(p, 1, 128, 7, 7, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);        /* ResNet's last stage: split by channels */
        conv_case(p, 1, 48, 9, 9, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3);         /* groups of 16 split by channels across a group */
        conv_case(p, 1, 16, 33, 31, 40, 3, 3, 2, 2, 2, 1, 2, 1, 2, 2, 1);       /* stride 2, dilated, uneven padding */
        conv_case(p, 1, 256, 36, 36, 16, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1);      /* 1x1: the input is its columns, three chunks */
        conv_case(p, 1, 512, 14, 14, 64, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 2);      /* 1x1 in two groups, split by channels */
        conv_case(p, 1, 3, 45, 45, 16, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1);        /* the 7x7 stem, stride 2 */
        /* strided: im2col's bounds; the weight gradient of up to 32
         * output channels (one group) taken as its transpose (dw_turned),
         * of more as it is */
        conv_case(p, 2, 6, 11, 10, 8, 2, 2, 3, 3, 1, 0, 0, 1, 1, 1, 1);         /* 2x2 stride 3: rows and columns no tap reads */
        conv_case(p, 2, 4, 9, 12, 6, 3, 3, 2, 1, 1, 1, 1, 1, 1, 1, 1);          /* stride 2 down, 1 across */
        conv_case(p, 2, 3, 6, 6, 4, 3, 3, 2, 2, 5, 5, 5, 5, 1, 1, 1);           /* padding past the window */
        conv_case(p, 3, 16, 12, 12, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);       /* 32 channels: dW turned, partials of 2 threads */
        conv_case(p, 2, 64, 16, 16, 64, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1);       /* 64 channels: dW not turned */
        conv_case(p, 1, 256, 32, 32, 64, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 2);      /* 1x1 stride 2 in two groups, one sample shared */
        /* stride 1: the input gradient as a convolution of dy with the
         * turned weights, dy padded by K-1-P; padding past K-1 keeps the
         * scatter (col2im) */
        conv_case(p, 2, 6, 9, 8, 5, 3, 3, 1, 1, 2, 0, 1, 2, 1, 1, 1);           /* uneven padding: 0 and 2 on dy's sides */
        conv_case(p, 3, 4, 7, 10, 6, 2, 4, 1, 1, 1, 0, 3, 0, 1, 1, 1);          /* a 2x4 window */
        conv_case(p, 2, 4, 7, 7, 6, 3, 3, 1, 1, 0, 3, 1, 1, 1, 1, 1);           /* bottom padding past the window: dy cropped */
        conv_case(p, 2, 4, 7, 7, 6, 3, 3, 1, 1, 3, 0, 1, 4, 1, 1, 1);           /* top and right padding past it: the scatter */
        conv_case(p, 1, 32, 20, 20, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);       /* one sample: dy's columns shared by the threads */
        conv_case(p, 4, 12, 9, 9, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 4);          /* groups 4, C/groups != OC/groups */
        /* a 3x3 with enough tiles: the weight gradient and that
         * convolution through Winograd (backward_wino checks the tiles) */
        backward_wino(p, 2, 32, 24, 24, 48, 4);  /* F(4x4), two samples */
        backward_wino(p, 2, 24, 29, 31, 40, 4);  /* odd sizes: partial tiles at the bottom and right */
        backward_wino(p, 8, 128, 7, 7, 128, 2); /* ResNet's last stage at batch 8: F(2x2) */
        backward_wino(p, 1, 24, 40, 40, 24, 4);  /* rows of 10 tiles: whole blocks of dy's transform and of the output
                                                    transform adding to dx, then their partial ones */
        pool_case(p, 28, 28, 2, 2, 0, 1); /* LeNet's: the vectorised rows */
        pool_case(p, 9, 41, 2, 2, 0, 1);  /* odd sizes: the last row and column unused */
        pool_case(p, 13, 11, 3, 2, 1, 1); /* padding: the general windows */
        pool_case(p, 12, 17, 3, 2, 1, 1); /* ResNet's stem pooling, even sizes */
        pool_case(p, 10, 9, 3, 1, 1, 1);  /* stride 1: overlapping windows */
        pool_case(p, 11, 10, 3, 3, 0, 1); /* windows side by side, the last column unused */
        pool_case(p, 7, 8, 4, 2, 2, 1);   /* a 4x4 window, padding 2 */
        pool_case(p, 13, 12, 3, 2, 3, 2); /* dilated 5x5 windows, padding past half of them */
        pool_case(p, 9, 14, 2, 1, 0, 3);  /* dilation 3, stride 1 */
        /* rows wide enough for vectors of outputs (16 or 8), the last
         * overlapping the one before, with windows at the edges */
        pool_case(p, 9, 45, 3, 2, 1, 1);  /* ResNet's stem pooling, odd width */
        pool_case(p, 6, 64, 3, 2, 1, 1);  /* even width: the last stride-2 load ends at the row's end */
        pool_case(p, 5, 40, 3, 1, 1, 1);  /* stride 1 */
        pool_case(p, 5, 83, 3, 3, 1, 1);  /* stride 3: lanes gathered */
        pool_case(p, 7, 70, 3, 2, 2, 2);  /* dilated, padding past half the window */
        pool_case(p, 4, 36, 4, 2, 0, 1);  /* exactly one vector at stride 2 without padding */
    }
    ts_pool_free(pool);
}

/* ------------------------------------------------------------ build errors */

static void expect_error(ts_graph *g, ts_tensor *y, const char *what, const char *const *parts, int n)
{
    ts_status st = ts_graph_status(g);
    const char *msg = ts_last_error();
    int has = y == NULL && st == TS_ERR_SHAPE;
    for (int i = 0; i < n; i++)
        has = has && strstr(msg, parts[i]) != NULL;
    CHECK(has, "%s: a shape error naming the layer and sizes: %s", what, msg);
}

static void build_errors(void)
{
    ts_graph *g = ts_graph_new(1);
    ts_tensor *x = ts_input(g, "x", TS_F32, 4, (int64_t[]){2, 3, 4, 4});
    ts_tensor *y = ts_conv2d_layer(g, x, 8, 7, 7, &(ts_conv2d_params){.pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1}, 1, "big");
    expect_error(g, y, "kernel larger than the padded input", (const char *[]){"'big'", "7x7", "6x6", "[2,3,4,4]"}, 4);
    ts_graph_free(g);

    g = ts_graph_new(1);
    x = ts_input(g, "x", TS_F32, 4, (int64_t[]){2, 3, 8, 8});
    ts_tensor *w = ts_param(g, "w", 4, (int64_t[]){4, 2, 3, 3});
    ts_scope_push(g, "conv2");
    y = ts_conv2d(g, x, w, NULL, NULL);
    ts_scope_pop(g);
    expect_error(g, y, "channel mismatch", (const char *[]){"'conv2'", "[2,3,8,8]", "3 channels", "[4,2,3,3]", "takes 2"}, 5);
    ts_graph_free(g);

    g = ts_graph_new(1);
    x = ts_input(g, "x", TS_F32, 4, (int64_t[]){2, 6, 8, 8});
    y = ts_conv2d_layer(g, x, 8, 3, 3, &(ts_conv2d_params){.groups = 4}, 1, "grouped");
    expect_error(g, y, "groups not dividing the channels", (const char *[]){"'grouped'", "groups=4", "(6,", "[2,6,8,8]"}, 4);
    ts_graph_free(g);

    g = ts_graph_new(1);
    x = ts_input(g, "x", TS_F32, 3, (int64_t[]){1, 28, 28});
    y = ts_conv2d_layer(g, x, 6, 5, 5, NULL, 1, "conv1");
    expect_error(g, y, "3-D input to conv2d", (const char *[]){"'conv1'", "[1,28,28]", "3-D", "4-D"}, 4);
    ts_graph_free(g);

    g = ts_graph_new(1);
    x = ts_input(g, "x", TS_F32, 3, (int64_t[]){1, 28, 28});
    w = ts_param(g, "w", 4, (int64_t[]){4, 1, 3, 3});
    y = ts_conv2d(g, x, w, NULL, NULL);
    expect_error(g, y, "3-D input to ts_conv2d", (const char *[]){"(top level)", "[1,28,28]", "3-D"}, 3);
    ts_graph_free(g);

    g = ts_graph_new(1);
    x = ts_input(g, "x", TS_F32, 4, (int64_t[]){2, 3, 2, 5});
    y = ts_max_pool2d(g, x, &(ts_pool2d_params){.kernel_h = 3, .kernel_w = 3});
    expect_error(g, y, "pool window larger than the input", (const char *[]){"MaxPool2d", "3x3", "2x5"}, 3);
    ts_graph_free(g);

    g = ts_graph_new(1);
    x = ts_input(g, "x", TS_F32, 4, (int64_t[]){2, 3, 9, 9});
    y = ts_avg_pool2d(g, x, &(ts_pool2d_params){.kernel_h = 2, .kernel_w = 2, .dilation_h = 2, .pad_top = 3});
    expect_error(g, y, "padding as large as the dilated window", (const char *[]){"AvgPool2d", "top 3", "smaller than the window 3x2"}, 3);
    ts_graph_free(g);

    /* indices past 2^24 would not be exact in float: refused at build */
    g = ts_graph_new(1);
    x = ts_input(g, "x", TS_F32, 4, (int64_t[]){1, 1, 4097, 4096});
    y = ts_max_pool2d_indices(g, x, &(ts_pool2d_params){.kernel_h = 2, .kernel_w = 2}, 0);
    CHECK(y == NULL && ts_graph_status(g) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "2^24"),
          "max pool indices of more than 2^24 elements: refused: %s", ts_last_error());
    ts_graph_free(g);

    /* a batch size that no longer fits is reported at compile */
    g = ts_graph_new(1);
    x = ts_input(g, "x", TS_F32, 4, (int64_t[]){2, 3, 8, 8});
    ts_tensor *h = ts_batch_norm_layer(g, ts_conv2d_layer(g, x, 4, 3, 3, NULL, 0, "c"), "bn");
    CHECK(h && ts_graph_find(g, "c/Conv2d:0") && ts_graph_find(g, "bn/BatchNorm:0") && ts_graph_find(g, "bn.running_var"),
          "layers name their op and tensors: c/Conv2d:0, c.weight, bn/BatchNorm:0, bn.running_mean, bn.running_var");
    ts_graph_free(g);
}

/* ------------------------------------------------------------- batch norm */

enum { BN_N = 4, BN_C = 3, BN_HW = 5 };

static void batch_norm_running(void)
{
    ts_graph *g = ts_graph_new(3);
    int64_t xs[4] = {BN_N, BN_C, 1, BN_HW};
    ts_tensor *x = ts_input(g, "x", TS_F32, 4, xs);
    ts_tensor *y = ts_batch_norm_layer(g, x, "bn");
    ts_tensor *loss = ts_mean(g, ts_mul(g, y, y));
    ts_tensor_set_name(loss, "loss");
    ts_options *o = ts_options_new();
    ts_options_set_device_iterations(o, 2);
    ts_options_anchor(o, "rm", "bn.running_mean", TS_OUTPUT_ALL, 0);
    ts_options_anchor(o, "rv", "bn.running_var", TS_OUTPUT_FINAL, 0);
    ts_model *m = NULL;
    ts_status st = ts_model_training(&m, g, loss, o, ts_sgd(0.0f, 0.0f, 0.0f));
    if (!st)
        st = ts_model_compile(m);
    CHECK_OK(st, "a training model with a batch norm layer compiles");
    const char *const *names;
    size_t n_names = 0;
    int listed = 0, grad = 0;
    if (!st && !ts_model_tensor_names(m, &names, &n_names))
        for (size_t i = 0; i < n_names; i++) {
            listed += strcmp(names[i], "bn.running_mean") == 0 || strcmp(names[i], "bn.running_var") == 0;
            grad += strstr(names[i], "running_") && strncmp(names[i], "Gradient___", 11) == 0;
            grad += strstr(names[i], "running_") && strncmp(names[i], "Accl", 4) == 0;
        }
    CHECK(listed == 2 && grad == 0, "the running buffers are listed by name, with no gradient or optimizer state");
    float xv[2 * BN_N * BN_C * BN_HW];
    for (int i = 0; i < 2 * BN_N * BN_C * BN_HW; i++)
        xv[i] = 2.0f * urand() + (float)(i % 3);
    ts_array in = ts_array_f32(xv, 4, (int64_t[]){2 * BN_N, BN_C, 1, BN_HW});
    const char *nm[1] = {"x"};
    if (!st)
        st = ts_model_run(m, nm, &in, 1);
    CHECK_OK(st, "one run of two steps");
    /* expected: r = 0.9 r + 0.1 stat, twice; var unbiased over N*HW = 20 */
    double rm[BN_C], rv[BN_C];
    double want_rm_step1[BN_C];
    for (int c = 0; c < BN_C; c++)
        rm[c] = 0, rv[c] = 1;
    for (int s = 0; s < 2; s++)
        for (int c = 0; c < BN_C; c++) {
            double sum = 0, ss = 0, M = BN_N * BN_HW;
            for (int nn = 0; nn < BN_N; nn++)
                for (int i = 0; i < BN_HW; i++)
                    sum += xv[((s * BN_N + nn) * BN_C + c) * BN_HW + i];
            double mean = sum / M;
            for (int nn = 0; nn < BN_N; nn++)
                for (int i = 0; i < BN_HW; i++) {
                    double d = xv[((s * BN_N + nn) * BN_C + c) * BN_HW + i] - mean;
                    ss += d * d;
                }
            rm[c] = 0.9 * rm[c] + 0.1 * mean;
            rv[c] = 0.9 * rv[c] + 0.1 * ss / (M - 1);
            if (s == 0)
                want_rm_step1[c] = rm[c];
        }
    ts_array a_rm, a_rv, v_rm, v_rv;
    ts_tensor_info(ts_graph_find(g, "bn.running_mean"), &v_rm);
    ts_tensor_info(ts_graph_find(g, "bn.running_var"), &v_rv);
    double err = 0;
    for (int c = 0; c < BN_C; c++)
        err = fmax(err, fmax(fabs(((float *)v_rm.data)[c] - rm[c]), fabs(((float *)v_rv.data)[c] - rv[c])));
    CHECK(!st && err < 1e-5, "running mean/var after 2 steps: momentum 0.1 with the unbiased batch variance (max err %.2g)", err);
    int anch = !st && !ts_model_anchored(m, "rm", &a_rm) && !ts_model_anchored(m, "rv", &a_rv) && a_rm.ndim == 2 && a_rm.shape[0] == 2;
    double aerr = 1;
    if (anch) {
        aerr = 0;
        for (int c = 0; c < BN_C; c++) {
            aerr = fmax(aerr, fabs(((float *)a_rm.data)[c] - want_rm_step1[c]));
            aerr = fmax(aerr, fabs(((float *)a_rm.data)[BN_C + c] - rm[c]));
            aerr = fmax(aerr, fabs(((float *)a_rv.data)[c] - rv[c]));
        }
    }
    CHECK(anch && aerr < 1e-5, "bn.running_mean anchored per step [2,%d] (after step 1 and 2) and bn.running_var final (max err %.2g)", BN_C,
          aerr);
    ts_status gs = ts_model_anchor(m, "g", "Gradient___bn.running_mean", TS_OUTPUT_FINAL, 0);
    if (!gs)
        gs = ts_model_run(m, nm, &in, 1);
    CHECK(gs != TS_OK, "Gradient___bn.running_mean does not exist: %s", ts_last_error());

    /* inference normalises with the running values */
    ts_tensor *outs[1] = {y};
    ts_model *inf = NULL;
    st = ts_model_inference(&inf, g, outs, 1, NULL);
    if (!st)
        st = ts_model_compile(inf);
    float before[BN_C];
    memcpy(before, v_rm.data, sizeof before);
    ts_array ya;
    in.shape[0] = BN_N;
    if (!st)
        st = ts_model_run(inf, nm, &in, 1);
    if (!st)
        st = ts_model_anchored(inf, ts_tensor_name(y), &ya);
    double ierr = 1;
    if (!st) {
        ierr = 0;
        const float *rmv = v_rm.data, *rvv = v_rv.data;
        for (int nn = 0; nn < BN_N; nn++)
            for (int c = 0; c < BN_C; c++)
                for (int i = 0; i < BN_HW; i++) {
                    int k = (nn * BN_C + c) * BN_HW + i;
                    double want = (xv[k] - rmv[c]) / sqrt((double)rvv[c] + 1e-5);
                    ierr = fmax(ierr, fabs(((float *)ya.data)[k] - want));
                }
    }
    CHECK(!st && ierr < 1e-5 && memcmp(before, v_rm.data, sizeof before) == 0,
          "inference uses the running mean/var and leaves them unchanged (max err %.2g)", ierr);
    ts_model_free(inf);
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
}

/* ------------------------- an inference model's kept weights follow the graph */

/* An inference model keeps a 3x3 convolution's weights in Winograd's domain
 * from run to run (this one: 16 tiles of 4x4, kept). Its outputs against the
 * direct loop on the weights the graph holds now: after a first run, after
 * ts_param_set, and after a training model of the same graph took an SGD
 * step (it writes the weights in place); each change moves the outputs by
 * far more than the tolerance, so outputs of the weights before fail. */
enum { KW_C = 64, KW_HW = 16 };

static double kept_err(ts_model *inf, ts_graph *g, ts_tensor *y, float *xv, float *want)
{
    ts_conv_geom geom = {.N = 1, .C = KW_C, .H = KW_HW, .W = KW_HW, .OC = KW_C, .OH = KW_HW, .OW = KW_HW, .KH = 3, .KW = 3, .SH = 1, .SW = 1,
                         .PT = 1, .PL = 1, .DH = 1, .DW = 1, .groups = 1};
    ts_array in = ts_array_f32(xv, 4, (int64_t[]){1, KW_C, KW_HW, KW_HW}), w, b, ya;
    const char *nm[1] = {"x"};
    if (ts_model_run(inf, nm, &in, 1) || ts_model_anchored(inf, ts_tensor_name(y), &ya) || ts_tensor_info(ts_graph_find(g, "c.weight"), &w) ||
        ts_tensor_info(ts_graph_find(g, "c.bias"), &b))
        return INFINITY;
    ts_conv2d_naive_forward(want, xv, w.data, b.data, &geom);
    double err = 0, mag = 0;
    for (int i = 0; i < KW_C * KW_HW * KW_HW; i++)
        err = fmax(err, fabs((double)((float *)ya.data)[i] - want[i])), mag = fmax(mag, fabs((double)want[i]));
    return err / (mag + 1e-30);
}

static void kept_weights_follow(void)
{
    enum { NX = KW_C * KW_HW * KW_HW, NW = KW_C * KW_C * 9 };
    ts_graph *g = ts_graph_new(5);
    ts_tensor *x = ts_input(g, "x", TS_F32, 4, (int64_t[]){1, KW_C, KW_HW, KW_HW});
    ts_tensor *y = ts_conv2d_layer(g, x, KW_C, 3, 3, &(ts_conv2d_params){.pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1}, 1, "c");
    ts_tensor *loss = ts_sum(g, y);
    ts_tensor_set_name(loss, "loss");
    float *xv = rand_buf(NX), *w2 = rand_buf(NW), *want = malloc(sizeof(float) * NX), *before = malloc(sizeof(float) * NW);
    ts_model *inf = NULL, *tr = NULL;
    ts_tensor *outs[1] = {y};
    ts_status st = !xv || !w2 || !want || !before ? TS_ERR_OUT_OF_MEMORY : ts_model_inference(&inf, g, outs, 1, NULL);
    if (!st)
        st = ts_model_training(&tr, g, loss, NULL, ts_sgd(0.01f, 0.0f, 0.0f));
    CHECK_OK(st, "an inference and a training model of one graph with a 3x3 convolution");
    if (st)
        goto done;
    double e1 = kept_err(inf, g, y, xv, want);
    ts_array wa = ts_array_f32(w2, 4, (int64_t[]){KW_C, KW_C, 3, 3}), cur;
    st = ts_param_set(ts_graph_find(g, "c.weight"), &wa);
    double e2 = st ? INFINITY : kept_err(inf, g, y, xv, want);
    ts_tensor_info(ts_graph_find(g, "c.weight"), &cur);
    memcpy(before, cur.data, sizeof(float) * NW);
    ts_array in = ts_array_f32(xv, 4, (int64_t[]){1, KW_C, KW_HW, KW_HW});
    const char *nm[1] = {"x"};
    if (!st)
        st = ts_model_run(tr, nm, &in, 1);
    bool moved = !st && memcmp(before, cur.data, sizeof(float) * NW) != 0;
    double e3 = st ? INFINITY : kept_err(inf, g, y, xv, want);
    CHECK(e1 < 1e-4 && e2 < 1e-4 && moved && e3 < 1e-4,
          "the inference model's convolution follows its weights: first run %.2g, after ts_param_set %.2g, after a training step of "
          "another model (weights moved: %s) %.2g (relative to the largest output)",
          e1, e2, moved ? "yes" : "no", e3);
done:
    ts_model_free(inf);
    ts_model_free(tr);
    ts_graph_free(g);
    free(xv), free(w2), free(want), free(before);
}

/* ---------------------------------------------------------------- dropout */

enum { DR_N = 4000 };

/* A graph y = dropout(x) with loss sum(y * R); runs it for `runs` runs of
 * one step and returns the last mask and Gradient___x. */
static int dropout_run(uint64_t seed, int runs, float *mask, float *gx, float *R, int *mask_changed)
{
    ts_graph *g = ts_graph_new(seed);
    ts_tensor *x = ts_param(g, "x", 1, (int64_t[]){DR_N});
    ts_tensor *r = ts_input(g, "R", TS_F32, 1, (int64_t[]){DR_N});
    ts_tensor *y = ts_dropout(g, x, 0.25f);
    ts_tensor *loss = ts_sum(g, ts_mul(g, y, r));
    ts_tensor_set_name(loss, "loss");
    ts_options *o = ts_options_new();
    ts_options_anchor(o, "mask", "DropoutMask:0", TS_OUTPUT_FINAL, 0);
    ts_options_anchor(o, "gx", "Gradient___x", TS_OUTPUT_FINAL, 0);
    ts_model *m = NULL;
    ts_status st = ts_model_training(&m, g, loss, o, ts_sgd(0.0f, 0.0f, 0.0f));
    ts_array in = ts_array_f32(R, 1, (int64_t[]){DR_N});
    const char *nm[1] = {"R"};
    float *prev = malloc(sizeof(float) * DR_N);
    *mask_changed = 0;
    for (int k = 0; !st && prev && k < runs; k++) {
        st = ts_model_run(m, nm, &in, 1);
        ts_array a, b;
        if (!st)
            st = ts_model_anchored(m, "mask", &a);
        if (!st)
            st = ts_model_anchored(m, "gx", &b);
        if (!st) {
            if (k > 0 && memcmp(prev, a.data, sizeof(float) * DR_N) != 0)
                *mask_changed = 1;
            memcpy(prev, a.data, sizeof(float) * DR_N);
            memcpy(mask, a.data, sizeof(float) * DR_N);
            memcpy(gx, b.data, sizeof(float) * DR_N);
        }
    }
    if (st)
        CHECK_OK(st, "dropout model runs");
    free(prev);
    /* inference: the identity */
    int identity = 0;
    ts_tensor *outs[1] = {y};
    ts_model *inf = NULL;
    ts_array xi;
    ts_tensor_info(x, &xi);
    for (int i = 0; i < DR_N; i++)
        ((float *)xi.data)[i] = (float)i;
    if (!st && !ts_model_inference(&inf, g, outs, 1, NULL) && !ts_model_run(inf, NULL, NULL, 0)) {
        ts_array ya;
        if (!ts_model_anchored(inf, ts_tensor_name(y), &ya))
            identity = memcmp(ya.data, xi.data, sizeof(float) * DR_N) == 0;
    }
    ts_model_free(inf);
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
    return !st && identity;
}

static void dropout(void)
{
    float *R = rand_buf(DR_N), *m1 = malloc(sizeof(float) * DR_N), *m2 = malloc(sizeof(float) * DR_N), *m3 = malloc(sizeof(float) * DR_N);
    float *g1 = malloc(sizeof(float) * DR_N), *g2 = malloc(sizeof(float) * DR_N), *g3 = malloc(sizeof(float) * DR_N);
    int ch1 = 0, ch2 = 0, ch3 = 0;
    int ok1 = R && m1 && m2 && m3 && g1 && g2 && g3 && dropout_run(11, 3, m1, g1, R, &ch1);
    int ok2 = ok1 && dropout_run(11, 3, m2, g2, R, &ch2);
    int ok3 = ok2 && dropout_run(12, 3, m3, g3, R, &ch3);
    CHECK(ok1 && ok2 && ok3, "dropout models ran; in inference the output equals the input");
    if (ok3) {
        int64_t zeros = 0, values_ok = 1, grad_ok = 1;
        for (int i = 0; i < DR_N; i++) {
            zeros += m1[i] == 0.0f;
            values_ok = values_ok && (m1[i] == 0.0f || m1[i] == 1.0f / 0.75f);
            grad_ok = grad_ok && g1[i] == R[i] * m1[i];
        }
        /* 4000 draws at p = 0.25: sd = sqrt(4000 * 0.25 * 0.75) = 27 */
        CHECK(values_ok && llabs(zeros - 1000) < 150, "the mask holds 0 or 1/(1-p); %lld of %d dropped at p = 0.25", (long long)zeros, DR_N);
        CHECK(grad_ok, "Gradient___x = R * mask (the mask is a constant of the backward pass)");
        CHECK(memcmp(m1, m2, sizeof(float) * DR_N) == 0 && memcmp(m1, m3, sizeof(float) * DR_N) != 0,
              "the same seed gives the same masks, another seed other masks");
        CHECK(ch1 && ch2 && ch3, "each step draws a new mask");
    }
    free(R), free(m1), free(m2), free(m3), free(g1), free(g2), free(g3);
}

/* batch norm's sums (ts_lane_sum32) in their stated order, bit for bit:
 * per block of 256, 32 float lanes, lanes k, k+8, k+16, k+24 folded in
 * float, those 8 added in double; the last n mod 32 in 8 lanes the same
 * way; and ts_lane_sum's 8 lanes unchanged */
static double lanes_by_hand(const float *a, float ma, const float *b, float mb, int64_t n, int L)
{
    double t = 0;
    int64_t i = 0, end = n - n % L;
    while (i < end) {
        int64_t stop = end - i > 256 ? i + 256 : end;
        float acc[32] = {0};
        for (; i < stop; i += L)
            for (int k = 0; k < L; k++)
                acc[k] += b ? (a[i + k] - ma) * (b[i + k] - mb) : a[i + k] - ma;
        for (int k = 0; k < 8; k++) {
            float lane = acc[k];
            for (int q = 8; q < L; q += 8)
                lane += acc[q + k];
            t += lane;
        }
    }
    for (; i < n; i++)
        t += (double)(a[i] - ma) * (b ? (double)(b[i] - mb) : 1.0);
    return t;
}

static void lane_sums(void)
{
    enum { MAX = 1100 };
    static float a[MAX], b[MAX];
    for (int i = 0; i < MAX; i++)
        a[i] = (float)sin(0.37 * i) * 3.0f + 1.0f, b[i] = (float)cos(0.11 * i) - 0.5f;
    static const int64_t ns[] = {0, 7, 31, 32, 33, 64, 100, 256, 257, 1024, 1100};
    int bad = 0;
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        int64_t n = ns[k], m = n - n % 32;
        double w1 = lanes_by_hand(a, 0.5f, NULL, 0.0f, m, 32) + lanes_by_hand(a + m, 0.5f, NULL, 0.0f, n - m, 8);
        double w2 = lanes_by_hand(a, 0.5f, b, -0.25f, m, 32) + lanes_by_hand(a + m, 0.5f, b + m, -0.25f, n - m, 8);
        bad += ts_lane_sum32(a, 0.5f, NULL, 0.0f, n) != w1 || ts_lane_sum32(a, 0.5f, b, -0.25f, n) != w2;
        bad += ts_lane_sum(a, 0.5f, NULL, 0.0f, n) != lanes_by_hand(a, 0.5f, NULL, 0.0f, n, 8) ||
               ts_lane_sum(a, 0.5f, b, -0.25f, n) != lanes_by_hand(a, 0.5f, b, -0.25f, n, 8);
    }
    CHECK(bad == 0, "batch norm's sums in 32 lanes and the 8-lane sums, bit for bit in their stated order (%d lengths wrong)", bad);
}

int main(void)
{
    lane_sums();
    kernel_oracles();
    infer_oracles();
    build_errors();
    batch_norm_running();
    kept_weights_follow();
    dropout();
    return check_summary("test_cnn");
}
