/* test_gemm.c -- the BLAS-backed ts_gemm and ts_gemm_pool (split over a
 * 2- and a 3-thread pool, by rows and by columns) against the naive oracle
 * ts_gemm_naive, for all four transpose combinations, odd and large sizes,
 * beta 0 and 1; ts_gemm_pool_ws's products split along K (a weight's
 * gradient summed over many rows: each thread's partial, then their sum),
 * its scratch filled with NaN first so that a partial added to rather than
 * stored would show, and too little scratch falling back to ts_gemm_pool;
 * ts_gemm_batch_pool's batched products (split, unsplit, all into one C)
 * product by product against the same oracle.
 *
 * Tolerance: each element's difference must be within
 * (K + 2) * FLT_EPSILON * (sum_k |a_ik b_kj| + |beta c_ij|), the worst-case
 * rounding bound of a length-K float dot product in any summation order, so a
 * wrong index or transpose (an O(1) error) cannot pass while a different
 * blocking order always does. The oracle itself is checked by hand on 2x2. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "backend/cpu/gemm.h"
#include "backend/pool.h"

#include "rand.h"

/* op(A)[i,k] and op(B)[k,j] for stored-transposed operands. */
static float at(const float *A, bool ta, int64_t M, int64_t K, int64_t i, int64_t k)
{
    return ta ? A[k * M + i] : A[i * K + k];
}

static ts_pool *g_pool; /* NULL: ts_gemm, else ts_gemm_pool over it */
static int g_ws;        /* with g_pool: ts_gemm_pool_ws, 1 with the scratch it asks for, 2 with one float too few */

static void one_case(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float beta)
{
    float *A = rand_buf(M * K), *B = rand_buf(K * N), *C0 = rand_buf(M * N);
    float *Cb = malloc(sizeof(float) * (size_t)(M * N));
    float *Cn = malloc(sizeof(float) * (size_t)(M * N));
    if (!A || !B || !C0 || !Cb || !Cn) {
        CHECK(0, "allocate %lldx%lldx%lld", (long long)M, (long long)N, (long long)K);
        goto out;
    }
    memcpy(Cb, C0, sizeof(float) * (size_t)(M * N));
    memcpy(Cn, C0, sizeof(float) * (size_t)(M * N));
    if (g_pool && g_ws) {
        size_t need = ts_gemm_split_k_floats(ts_pool_threads(g_pool), M, N, K);
        CHECK(need == (size_t)(ts_pool_threads(g_pool) - 1) * (size_t)(M * N), "%lldx%lldx%lld is split along K on %d threads",
              (long long)M, (long long)N, (long long)K, ts_pool_threads(g_pool));
        float *ws = malloc(sizeof(float) * (need + 1));
        if (!ws) {
            CHECK(0, "allocate the scratch");
            goto out;
        }
        for (size_t i = 0; i <= need; i++)
            ws[i] = NAN;
        ts_gemm_pool_ws(g_pool, ta, tb, M, N, K, A, B, beta, Cb, ws, g_ws == 1 ? need : need - 1);
        CHECK(isnan(ws[need]), "the split writes no further than the scratch it asks for");
        free(ws);
    } else if (g_pool)
        ts_gemm_pool(g_pool, ta, tb, M, N, K, A, B, beta, Cb);
    else
        ts_gemm(ta, tb, M, N, K, A, B, beta, Cb);
    ts_gemm_naive(ta, tb, M, N, K, A, B, beta, Cn);
    double max_abs = 0, max_ratio = 0;
    int64_t bad = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double mag = fabs((double)beta * C0[i * N + j]);
            for (int64_t k = 0; k < K; k++)
                mag += fabs((double)at(A, ta, M, K, i, k) * at(B, !tb, N, K, j, k));
            double bound = (double)(K + 2) * FLT_EPSILON * mag + 1e-30;
            double d = fabs((double)Cb[i * N + j] - Cn[i * N + j]);
            if (!(d <= bound))
                bad++;
            if (d > max_abs)
                max_abs = d;
            if (d / bound > max_ratio)
                max_ratio = d / bound;
        }
    CHECK(bad == 0, "gemm%s%s %c%c M=%lld N=%lld K=%lld beta=%g: max_abs=%.3g, max err/bound=%.3g%s",
          g_pool ? (ts_pool_threads(g_pool) == 2 ? " pool2" : " pool3") : "", g_ws == 1 ? " split-K" : g_ws == 2 ? " split-K short" : "", ta ? 'T' : 'N', tb ? 'T' : 'N', (long long)M, (long long)N, (long long)K, (double)beta,
          max_abs, max_ratio, bad ? " (elements out of bound)" : "");
out:
    free(A), free(B), free(C0), free(Cb), free(Cn);
}

/* The oracle by hand: [[1,2],[3,4]] x [[5,6],[7,8]] = [[19,22],[43,50]]. */
static void oracle_by_hand(void)
{
    const float A[4] = {1, 2, 3, 4}, B[4] = {5, 6, 7, 8};
    const float AT[4] = {1, 3, 2, 4}, BT[4] = {5, 7, 6, 8}; /* stored transposed */
    const float want[4] = {19, 22, 43, 50};
    const float *as[2] = {A, AT}, *bs[2] = {B, BT};
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            float C[4] = {1, 1, 1, 1}, Cb[4] = {1, 1, 1, 1};
            ts_gemm_naive(ta, tb, 2, 2, 2, as[ta], bs[tb], 0.0f, C);
            ts_gemm(ta, tb, 2, 2, 2, as[ta], bs[tb], 1.0f, Cb);
            int ok = 1;
            for (int i = 0; i < 4; i++)
                ok = ok && C[i] == want[i] && Cb[i] == want[i] + 1.0f;
            CHECK(ok, "2x2 by hand %c%c: naive (beta 0) and BLAS (beta 1) exact", ta ? 'T' : 'N',
                  tb ? 'T' : 'N');
        }
}

/* ts_gemm_batch_pool: `count` products of one shape, operands at strided
 * offsets in one buffer (as a batched matmul's blocks), against the naive
 * oracle product by product; shared_c adds every product into one C. */
typedef struct batch_ctx {
    const float *A, *B;
    float *C;
    int64_t sa, sb, sc;
} batch_ctx;

static void batch_item(void *vctx, int64_t i, const float **A, const float **B, float **C)
{
    const batch_ctx *c = vctx;
    *A = c->A + i * c->sa, *B = c->B + i * c->sb, *C = c->C + i * c->sc;
}

static void batch_case(ts_pool *pool, bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t count, bool shared)
{
    int64_t nc = shared ? M * N : count * M * N;
    float *A = rand_buf(count * M * K), *B = rand_buf(count * K * N), *C = rand_buf(nc), *want = malloc(sizeof(float) * (size_t)nc);
    if (!A || !B || !C || !want) {
        CHECK(0, "allocate a batch");
        goto out;
    }
    memcpy(want, C, sizeof(float) * (size_t)nc);
    batch_ctx ctx = {A, B, C, M * K, K * N, shared ? 0 : M * N};
    ts_gemm_batch_pool(pool, ta, tb, M, N, K, count, batch_item, &ctx, 1.0f, shared);
    double worst = 0;
    for (int64_t i = 0; i < count; i++)
        ts_gemm_naive(ta, tb, M, N, K, A + i * M * K, B + i * K * N, 1.0f, want + (shared ? 0 : i * M * N));
    for (int64_t i = 0; i < nc; i++)
        worst = fmax(worst, fabs((double)C[i] - want[i]) / (1.0 + fabs((double)want[i])));
    CHECK(worst <= (double)(count * K + 2) * FLT_EPSILON, "batch of %lld %c%c %lldx%lldx%lld%s on %d threads: worst rel diff %.3g",
          (long long)count, ta ? 'T' : 'N', tb ? 'T' : 'N', (long long)M, (long long)N, (long long)K, shared ? " into one C" : "",
          ts_pool_threads(pool), worst);
out:
    free(A), free(B), free(C), free(want);
}

int main(void)
{
    oracle_by_hand();
    static const int64_t sizes[][3] = {
        {1, 1, 1},   {7, 13, 5},  {13, 5, 7},   {1, 17, 3},  {17, 1, 3},   {3, 4, 1},
        {33, 31, 65}, {16, 10, 100}, {64, 320, 784}, {64, 784, 320}, {100, 320, 64},
    };
    const float betas[2] = {0.0f, 1.0f};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int b = 0; b < 2; b++)
                    one_case(ta, tb, sizes[s][0], sizes[s][1], sizes[s][2], betas[b]);
    /* split over a pool: by rows (M >= 64), by columns (M small, N large),
     * odd sizes so slices are uneven, and one too small to split */
    static const int64_t split_sizes[][3] = {{256, 96, 200}, {200, 100, 320}, {131, 97, 67},
                                             {32, 320, 200},   {16, 100, 320},  {7, 13, 5}};
    for (int threads = 2; threads <= 3; threads++) {
        if (ts_pool_new(&g_pool, threads) != TS_OK) {
            CHECK(0, "a %d-thread pool", threads);
            continue;
        }
        for (size_t s = 0; s < sizeof split_sizes / sizeof split_sizes[0]; s++)
            for (int ta = 0; ta < 2; ta++)
                for (int tb = 0; tb < 2; tb++)
                    one_case(ta, tb, split_sizes[s][0], split_sizes[s][1], split_sizes[s][2], betas[(ta + tb + (int)s) % 2]);
        /* split along K (K >= 4 max(M, N)): a weight's gradient's shapes,
         * K not a multiple of the threads; then with too little scratch */
        static const int64_t k_sizes[][3] = {{64, 48, 700}, {40, 30, 501}, {128, 96, 2048}, {7, 65, 1100}};
        for (g_ws = 1; g_ws <= 2; g_ws++)
            for (size_t s = 0; s < sizeof k_sizes / sizeof k_sizes[0]; s++)
                for (int ta = 0; ta < 2; ta++)
                    for (int tb = 0; tb < 2; tb++)
                        for (int b = 0; b < 2; b++)
                            one_case(ta, tb, k_sizes[s][0], k_sizes[s][1], k_sizes[s][2], betas[b]);
        g_ws = 0;
        CHECK(ts_gemm_split_k_floats(threads, 2048, 128, 128) == 0 && ts_gemm_split_k_floats(1, 128, 128, 2048) == 0,
              "no split where K is short or on one thread");
        ts_pool_free(g_pool);
        g_pool = NULL;
    }
    /* batched products: split over a pool, too few to split, into one C */
    ts_pool *bp = NULL;
    if (ts_pool_new(&bp, 3) == TS_OK) {
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                batch_case(bp, ta, tb, 64, 64, 32, 13, false);
                batch_case(bp, ta, tb, 7, 5, 3, 2, false);
                batch_case(bp, ta, tb, 33, 17, 9, 5, true);
            }
        ts_pool_free(bp);
    } else {
        CHECK(0, "a 3-thread pool");
    }
    /* beta 0 must ignore what C held, even NaN (BLAS semantics) */
    float A[6], B[6], C[4], want[4];
    for (int i = 0; i < 6; i++)
        A[i] = urand(), B[i] = urand();
    for (int i = 0; i < 4; i++)
        C[i] = NAN;
    ts_gemm(false, false, 2, 2, 3, A, B, 0.0f, C);
    ts_gemm_naive(false, false, 2, 2, 3, A, B, 0.0f, want);
    int finite = 1;
    for (int i = 0; i < 4; i++)
        finite = finite && isfinite(C[i]) && fabsf(C[i] - want[i]) <= 1e-6f;
    CHECK(finite, "beta 0 overwrites a NaN-filled C");
    return check_summary("test_gemm");
}
