/* bf16_gemm.c -- the bf16 products' route picked (bf16_gemm.h), and
 * cblas_sbgemm found and called. Found at
 * run time rather than at configure: the OpenBLAS a program loads may be
 * another build than the one tensorscope was compiled against (an
 * alternative chosen by the system, one built with bf16), and a build
 * against Debian's runs unchanged with it. */
#define _GNU_SOURCE /* dladdr, RTLD_DEFAULT */
#include "backend/cpu/bf16_gemm.h"

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/kernels_tensor.h"
#include "backend/pool.h"
#include "core/core.h"

#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* cblas.h's prototype (OpenBLAS declares it whether or not the library was
 * built with it), as a pointer */
typedef void (*sbgemm_fn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint, blasint, float,
                          const bfloat16 *, blasint, const bfloat16 *, blasint, float, float *, blasint);

static sbgemm_fn sbgemm;
static ts_bf16_route taken;
static char route[160];
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* the OpenBLAS that holds cblas_sgemm (a library loaded with RTLD_LOCAL,
 * as Python loads ours, is not in the global scope); the global scope
 * where that library cannot be told (OpenBLAS linked in statically) or
 * when `anywhere` (TS_BF16_GEMM=sbgemm asks for one) */
static sbgemm_fn find_sbgemm(bool anywhere) {
    void *f = NULL;
    bool known = false;
    Dl_info info;
    if (dladdr((void *)(uintptr_t)cblas_sgemm, &info) && info.dli_fname) {
        void *h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
        if (h) {
            known = true;
            f = dlsym(h, "cblas_sbgemm");
            dlclose(h);
        }
    }
    if (!f && (!known || anywhere)) f = dlsym(RTLD_DEFAULT, "cblas_sbgemm");
    sbgemm_fn fn;
    memcpy(&fn, &f, sizeof fn); /* an object pointer to a function pointer, as POSIX's dlsym allows */
    return fn;
}

ts_bf16_want ts_cpu_bf16_want_parse(const char *value, bool *known) {
    static const struct {
        const char *name;
        ts_bf16_want want;
    } names[] = {{"auto", TS_BF16_WANT_AUTO}, {"f32", TS_BF16_WANT_F32}, {"sbgemm", TS_BF16_WANT_SBGEMM}, {"avx512bf16", TS_BF16_WANT_AVX512BF16}};
    *known = true;
    if (!value || !*value) return TS_BF16_WANT_AUTO;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(value, names[i].name) == 0) return names[i].want;
    *known = false;
    return TS_BF16_WANT_AUTO;
}

ts_bf16_pick ts_cpu_bf16_route_pick(bool have_sbgemm, ts_bf16_kernel kernel, ts_bf16_want want) {
    const char *no_kernel = kernel == TS_BF16K_CAPPED ? " (TS_CPU below avx512)" : " (no avx512_bf16)";
    switch (want) {
    case TS_BF16_WANT_F32: return (ts_bf16_pick){TS_BF16_ROUTE_F32, " (TS_BF16_GEMM)", NULL};
    case TS_BF16_WANT_SBGEMM:
        if (have_sbgemm) return (ts_bf16_pick){TS_BF16_ROUTE_SBGEMM, " (TS_BF16_GEMM)", NULL};
        return (ts_bf16_pick){TS_BF16_ROUTE_F32, " (TS_BF16_GEMM=sbgemm, but the OpenBLAS loaded has no cblas_sbgemm)",
                              "TS_BF16_GEMM=sbgemm: the OpenBLAS loaded has no cblas_sbgemm (build OpenBLAS with BUILD_BFLOAT16=1); "
                              "bf16 matmuls widen to f32"};
    case TS_BF16_WANT_AVX512BF16:
        if (kernel == TS_BF16K_READY) return (ts_bf16_pick){TS_BF16_ROUTE_AVX512BF16, " (TS_BF16_GEMM)", NULL};
        return (ts_bf16_pick){TS_BF16_ROUTE_F32,
                              kernel == TS_BF16K_CAPPED ? " (TS_BF16_GEMM=avx512bf16, but TS_CPU is below avx512)"
                                                        : " (TS_BF16_GEMM=avx512bf16, but this CPU or build has no avx512_bf16)",
                              "TS_BF16_GEMM=avx512bf16: this CPU (or TS_CPU, or this build) has no avx512_bf16; bf16 matmuls widen to f32"};
    case TS_BF16_WANT_AUTO: break;
    }
    if (kernel != TS_BF16K_READY) return (ts_bf16_pick){TS_BF16_ROUTE_F32, no_kernel, NULL};
    if (have_sbgemm) return (ts_bf16_pick){TS_BF16_ROUTE_SBGEMM, "", NULL};
    return (ts_bf16_pick){TS_BF16_ROUTE_AVX512BF16, " (the OpenBLAS loaded has no cblas_sbgemm)", NULL};
}

static void init(void) {
    const char *value = getenv("TS_BF16_GEMM");
    bool known;
    ts_bf16_want want = ts_cpu_bf16_want_parse(value, &known);
    if (!known) ts_logf(TS_LOG_WARN, "TS_BF16_GEMM='%s' is not understood (use auto, sbgemm, avx512bf16 or f32); taken as auto", value);
    sbgemm = find_sbgemm(want == TS_BF16_WANT_SBGEMM);
    /* the kernel needs avx512_bf16 and the avx512 level's others (TS_CPU
     * below avx512 leaves it out, as it does the avx512 kernels) */
    ts_bf16_kernel kernel = !ts_bf16k_built() || !ts_cpu_flags_get()->avx512_bf16 ? TS_BF16K_ABSENT
                            : ts_cpu_level() < TS_CPU_AVX512                      ? TS_BF16K_CAPPED
                                                                                  : TS_BF16K_READY;
    ts_bf16_pick pick = ts_cpu_bf16_route_pick(sbgemm != NULL, kernel, want);
    if (pick.warn) ts_logf(TS_LOG_WARN, "%s", pick.warn);
    taken = pick.route;
    static const char *names[] = {"f32", "sbgemm", "avx512bf16"};
    snprintf(route, sizeof route, "%s%s", names[taken], pick.why);
}

ts_bf16_route ts_cpu_bf16_route(void) {
    pthread_once(&once, init);
    return taken;
}

bool ts_cpu_bf16_gemm_on(void) { return ts_cpu_bf16_route() != TS_BF16_ROUTE_F32; }

const char *ts_cpu_bf16_gemm_route(void) {
    pthread_once(&once, init);
    return route;
}

typedef struct job {
    bool tb;
    int64_t N, K;
    const uint16_t *A, *B;
    float *C, *out;
    const float *bias;
    const ts_out_act *act;
} job;

static void rows(void *vctx, int64_t begin, int64_t end) {
    const job *j = vctx;
    sbgemm(CblasRowMajor, CblasNoTrans, j->tb ? CblasTrans : CblasNoTrans, (blasint)(end - begin), (blasint)j->N, (blasint)j->K, 1.0f,
           j->A + begin * j->K, (blasint)j->K, j->B, (blasint)(j->tb ? j->K : j->N), 0.0f, j->C + begin * j->N, (blasint)j->N);
    if (!j->bias) return;
    for (int64_t r = begin; r < end; r++) {
        const float *c = j->C + r * j->N;
        float *o = j->out + r * j->N;
        for (int64_t i = 0; i < j->N; i++) o[i] = c[i] + j->bias[i];
    }
    if (j->act) ts_out_act_apply(j->act, j->act->out + begin * j->N, j->out + begin * j->N, (end - begin) * j->N);
}

/* a slice keeps at least this many multiply-adds and rows (as gemm.c) */
#define MIN_MACS (256 * 1024)
#define MIN_ROWS 32

/* the kernels' workspace (ts_kctx.workspace: compile sized it by the
 * *_floats below, with ALIGN_SLACK floats to spare) at its first 64-byte
 * boundary; NULL stays NULL */
#define ALIGN_SLACK 16
static uint32_t *ws_words(float *ws) {
    if (!ws) return NULL;
    uintptr_t at = (uintptr_t)(void *)ws, up = (at + 63) & ~(uintptr_t)63;
    return (uint32_t *)(void *)((char *)ws + (up - at));
}

/* the kernel's product in ws where there is one, else in memory allocated
 * for the call */
static ts_status kgemm(struct ts_pool *p, int64_t M, int64_t N, int64_t K, ts_bf16_mat A, ts_bf16_mat B, float beta, float *C, int64_t ldc,
                       const float *bias, float *out, const ts_out_act *act, float *ws) {
    return ws ? ts_bf16k_gemm_ws(p, M, N, K, A, B, beta, C, ldc, bias, out, act, ws_words(ws))
              : ts_bf16k_gemm(p, M, N, K, A, B, beta, C, ldc, bias, out, act);
}

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

size_t ts_cpu_bf16_gemm_floats(int64_t M, int64_t N, int64_t K, int threads) {
    if (ts_cpu_bf16_route() != TS_BF16_ROUTE_AVX512BF16) return 0;
    /* the product (N columns over K), dA (K over N), dB (K over M, or N over M) */
    size_t w = max_sz(max_sz(ts_bf16k_gemm_words(N, K, threads), ts_bf16k_gemm_words(K, N, threads)),
                      max_sz(ts_bf16k_gemm_words(K, M, threads), ts_bf16k_gemm_words(N, M, threads)));
    return w + ALIGN_SLACK;
}

bool ts_cpu_bf16_gemm(struct ts_pool *p, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t *A, const uint16_t *B, float *C,
                      const float *bias, float *out, const ts_out_act *act, float *ws) {
    if (ts_cpu_bf16_route() == TS_BF16_ROUTE_AVX512BF16) {
        ts_bf16_mat a = {A, false, K, 1}, b = {B, false, tb ? K : 1, tb ? 1 : N};
        return kgemm(p, M, N, K, a, b, 0.0f, C, N, bias, out, act, ws) == TS_OK;
    }
    job j = {tb, N, K, A, B, C, out, bias, bias ? act : NULL};
    int64_t per_row = N * K > 0 ? N * K : 1, grain = MIN_MACS / per_row;
    ts_gemm_serial_begin(); /* one OpenBLAS thread per slice */
    ts_pool_for(p, M, grain > MIN_ROWS ? grain : MIN_ROWS, rows, &j);
    return true;
}

/* dC's n values rounded to bf16 once into room (planned at compile:
 * ts_cpu_grad_room), for every product that reads them (packing an f32
 * operand rounds it again for each, to the same bits); NULL where there
 * is no room: the products round dC as they pack it. */
static const uint16_t *rounded(struct ts_pool *p, uint16_t *room, const float *dC, int64_t n) {
    if (room) ts_bf16k_round(p, room, dC, n);
    return room;
}

/* an operand over dC: its bf16 copy where there is one, else dC (f32) */
static ts_bf16_mat grad_mat(const float *dC, const uint16_t *d16, int64_t rs, int64_t cs) {
    return d16 ? (ts_bf16_mat){d16, false, rs, cs} : (ts_bf16_mat){dC, true, rs, cs};
}

unsigned ts_cpu_bf16_gemm_backward(struct ts_pool *p, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t *A, const uint16_t *B,
                                   const float *dC, float *dA, float beta_a, float *dB, float beta_b, uint16_t *room, float *ws) {
    if (ts_cpu_bf16_route() != TS_BF16_ROUTE_AVX512BF16) return 0;
    const uint16_t *d16 = rounded(p, room, dC, M * N);
    /* each operand as (row of the product, summed index) */
    ts_bf16_mat dc_rows = grad_mat(dC, d16, N, 1), dc_cols = grad_mat(dC, d16, 1, N), a_cols = {A, false, 1, K};
    ts_bf16_mat b_rows = tb ? (ts_bf16_mat){B, false, 1, K} : (ts_bf16_mat){B, false, N, 1};
    unsigned done = 0;
    if (dA && kgemm(p, M, K, N, dc_rows, b_rows, beta_a, dA, K, NULL, NULL, NULL, ws) == TS_OK) done |= 1u;
    if (dB && (tb ? kgemm(p, N, K, M, dc_cols, a_cols, beta_b, dB, K, NULL, NULL, NULL, ws)
                  : kgemm(p, K, N, M, a_cols, dc_cols, beta_b, dB, N, NULL, NULL, NULL, ws)) == TS_OK)
        done |= 2u;
    return done;
}

/* ------------------------------------------------------ batched matmuls */

/* count products C_i (ldc, stride sc floats) = beta C_i + X_i Y_i^T in
 * the kernel's terms (X_i's rows are C's, Y_i's its columns), operand i at
 * X.data + i * sx elements (and Y's at sy) */
typedef struct bjob {
    int64_t M, N, K, ldc, sx, sy, sc;
    ts_bf16_mat X, Y;
    float beta, *C;
    uint32_t *ws;
    size_t words;
    atomic_int next; /* the slices that took their workspace */
} bjob;

static ts_bf16_mat nth(ts_bf16_mat m, int64_t i, int64_t stride) {
    m.data = m.f32 ? (const void *)((const float *)m.data + i * stride) : (const void *)((const uint16_t *)m.data + i * stride);
    return m;
}

static void bslice(void *vctx, int64_t begin, int64_t end) {
    bjob *j = vctx;
    uint32_t *ws = j->ws + j->words * (size_t)atomic_fetch_add(&j->next, 1);
    for (int64_t i = begin; i < end; i++)
        ts_bf16k_gemm_serial(j->M, j->N, j->K, nth(j->X, i, j->sx), nth(j->Y, i, j->sy), j->beta, j->C + i * j->sc, j->ldc, ws);
}

/* one product's packed operands on a slice's thread, in 64-byte blocks */
static size_t serial_words(int64_t N, int64_t K) { return (ts_bf16k_serial_words(N, K) + 15) / 16 * 16; }

static bool bmm_run(struct ts_pool *p, int64_t count, int64_t M, int64_t N, int64_t K, ts_bf16_mat X, int64_t sx, ts_bf16_mat Y, int64_t sy,
                    float beta, float *C, int64_t ldc, float *ws) {
    int t = p ? ts_pool_threads(p) : 1;
    bjob j = {.M = M, .N = N, .K = K, .ldc = ldc, .sx = sx, .sy = sy, .sc = M * N, .X = X, .Y = Y, .beta = beta, .C = C};
    j.words = serial_words(N, K);
    uint32_t *own = ws ? NULL : aligned_alloc(64, j.words * sizeof(uint32_t) * (size_t)(t > count ? count : t));
    j.ws = ws ? ws_words(ws) : own;
    if (!j.ws) return false;
    atomic_init(&j.next, 0);
    int64_t per = M * N * (K > 0 ? K : 1), grain = MIN_MACS / (per > 0 ? per : 1);
    ts_pool_for(p, count, grain > 1 ? grain : 1, bslice, &j);
    free(own);
    return true;
}

/* the product count and M, N, K where the kernel's route takes the
 * batched matmul (its batch dims unbroadcast); 0 where not */
static int64_t bmm_dims(bool ta, const ts_shape *sc, const ts_shape *sa, const ts_shape *sb, int64_t *M, int64_t *N, int64_t *K) {
    if (ts_cpu_bf16_route() != TS_BF16_ROUTE_AVX512BF16 || sc->ndim < 3 || sa->ndim != sc->ndim || sb->ndim != sc->ndim) return 0;
    int64_t count = 1;
    for (int d = 0; d < sc->ndim - 2; d++) {
        if (sa->d[d] != sc->d[d] || sb->d[d] != sc->d[d]) return 0;
        count *= sc->d[d];
    }
    *M = sc->d[sc->ndim - 2], *N = sc->d[sc->ndim - 1], *K = ta ? sa->d[sa->ndim - 2] : sa->d[sa->ndim - 1];
    return count > 0 && *M > 0 && *N > 0 ? count : 0;
}

size_t ts_cpu_bf16_bmm_floats(const ts_shape *sc, const ts_shape *sa, int threads) {
    if (ts_cpu_bf16_route() != TS_BF16_ROUTE_AVX512BF16 || sc->ndim < 3 || sa->ndim != sc->ndim) return 0;
    int64_t count = 1;
    for (int d = 0; d < sc->ndim - 2; d++) count *= sc->d[d];
    /* K: A's dim that is not M (either way round where they are equal) */
    int64_t M = sc->d[sc->ndim - 2], N = sc->d[sc->ndim - 1], a0 = sa->d[sa->ndim - 2], K = a0 == M ? sa->d[sa->ndim - 1] : a0;
    /* the product (N over K), dA (N or M over N), dB (K or N over M), each way round */
    size_t w = max_sz(max_sz(serial_words(N, K), serial_words(K, N)), max_sz(serial_words(M, N), max_sz(serial_words(K, M), serial_words(N, M))));
    int64_t slices = threads < count ? threads : count;
    return w * (size_t)(slices > 1 ? slices : 1) + ALIGN_SLACK;
}

bool ts_cpu_bf16_bmm(struct ts_pool *p, bool ta, bool tb, const ts_shape *sc, const ts_shape *sa, const ts_shape *sb, const uint16_t *A,
                     const uint16_t *B, float *C, float *ws) {
    int64_t M, N, K, count = bmm_dims(ta, sc, sa, sb, &M, &N, &K);
    if (!count) return false;
    /* op(A) (i, k) as (row, summed index); op(B) (k, j) as (column, summed index) */
    ts_bf16_mat a = {A, false, ta ? 1 : K, ta ? M : 1}, b = {B, false, tb ? K : 1, tb ? 1 : N};
    return bmm_run(p, count, M, N, K, a, M * K, b, K * N, 0.0f, C, N, ws);
}

unsigned ts_cpu_bf16_bmm_backward(struct ts_pool *p, bool ta, bool tb, const ts_shape *sc, const ts_shape *sa, const ts_shape *sb,
                                  const uint16_t *A, const uint16_t *B, const float *dC, float *dA, float *dB, uint16_t *room, float *ws) {
    int64_t M, N, K, count = bmm_dims(ta, sc, sa, sb, &M, &N, &K);
    if (!count) return 0;
    /* op(A) (i, k) at A[i sai + k sak], op(B) (k, j) at B[k sbk + j sbj], dC (i, j) at dC[i N + j] */
    int64_t sai = ta ? 1 : K, sak = ta ? M : 1, sbk = tb ? 1 : N, sbj = tb ? K : 1;
    const uint16_t *d16 = rounded(p, room, dC, count * M * N);
    ts_bf16_mat dc_ij = grad_mat(dC, d16, N, 1), dc_ji = grad_mat(dC, d16, 1, N); /* dC by rows i, by columns j */
    ts_bf16_mat b_kj = {B, false, sbk, sbj}, a_ki = {A, false, sak, sai};
    int64_t sA = M * K, sB = K * N, sC = M * N;
    unsigned done = 0;
    /* dop(A) (i, k) = sum_j dC (i, j) op(B) (k, j); stored [K, M] when ta */
    if (dA && (ta ? bmm_run(p, count, K, M, N, b_kj, sB, dc_ij, sC, 1.0f, dA, M, ws) : bmm_run(p, count, M, K, N, dc_ij, sC, b_kj, sB, 1.0f, dA, K, ws)))
        done |= 1u;
    /* dop(B) (k, j) = sum_i op(A) (i, k) dC (i, j); stored [N, K] when tb */
    if (dB && (tb ? bmm_run(p, count, N, K, M, dc_ji, sC, a_ki, sA, 1.0f, dB, K, ws) : bmm_run(p, count, K, N, M, a_ki, sA, dc_ji, sC, 1.0f, dB, N, ws)))
        done |= 2u;
    return done;
}
