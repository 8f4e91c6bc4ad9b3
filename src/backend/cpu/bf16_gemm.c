/* bf16_gemm.c -- cblas_sbgemm found and called (bf16_gemm.h). Found at
 * run time rather than at configure: the OpenBLAS a program loads may be
 * another build than the one tensorscope was compiled against (an
 * alternative chosen by the system, one built with bf16), and a build
 * against Debian's runs unchanged with it. */
#define _GNU_SOURCE /* dladdr, RTLD_DEFAULT */
#include "backend/cpu/bf16_gemm.h"

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/gemm.h"
#include "backend/pool.h"
#include "core/core.h"

#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* cblas.h's prototype (OpenBLAS declares it whether or not the library was
 * built with it), as a pointer */
typedef void (*sbgemm_fn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint, blasint, float,
                          const bfloat16 *, blasint, const bfloat16 *, blasint, float, float *, blasint);

static sbgemm_fn sbgemm;
static bool on;
static char route[160];
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* the OpenBLAS that holds cblas_sgemm first (a library loaded with
 * RTLD_LOCAL, as Python loads ours, is not in the global scope), then the
 * global scope */
static sbgemm_fn find_sbgemm(void) {
    void *f = NULL;
    Dl_info info;
    if (dladdr((void *)(uintptr_t)cblas_sgemm, &info) && info.dli_fname) {
        void *h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
        if (h) {
            f = dlsym(h, "cblas_sbgemm");
            dlclose(h);
        }
    }
    if (!f) f = dlsym(RTLD_DEFAULT, "cblas_sbgemm");
    sbgemm_fn fn;
    memcpy(&fn, &f, sizeof fn); /* an object pointer to a function pointer, as POSIX's dlsym allows */
    return fn;
}

static void init(void) {
    sbgemm = find_sbgemm();
    bool bf16 = ts_cpu_flags_get()->avx512_bf16;
    const char *want = getenv("TS_BF16_GEMM");
    int force = 0; /* 1 sbgemm, -1 f32 */
    if (want && *want) {
        if (strcasecmp(want, "sbgemm") == 0) force = 1;
        else if (strcasecmp(want, "f32") == 0) force = -1;
        else if (strcasecmp(want, "auto") != 0)
            ts_logf(TS_LOG_WARN, "TS_BF16_GEMM='%s' is not understood (use auto, sbgemm or f32); taken as auto", want);
    }
    if (force == 1 && !sbgemm)
        ts_logf(TS_LOG_WARN, "TS_BF16_GEMM=sbgemm: the OpenBLAS loaded has no cblas_sbgemm (build OpenBLAS with BUILD_BFLOAT16=1); "
                             "bf16 matmuls widen to f32");
    on = sbgemm && (force == 1 || (force == 0 && bf16));
    const char *why = on ? (force == 1 ? " (TS_BF16_GEMM)" : "")
                    : force == -1 ? " (TS_BF16_GEMM)"
                    : !sbgemm    ? " (the OpenBLAS loaded has no cblas_sbgemm)"
                                 : " (no avx512_bf16)";
    snprintf(route, sizeof route, "%s%s", on ? "sbgemm" : "f32", why);
}

bool ts_cpu_bf16_gemm_on(void) {
    pthread_once(&once, init);
    return on;
}

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
}

/* a slice keeps at least this many multiply-adds and rows (as gemm.c) */
#define MIN_MACS (256 * 1024)
#define MIN_ROWS 32

void ts_cpu_bf16_gemm(struct ts_pool *p, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t *A, const uint16_t *B, float *C,
                      const float *bias, float *out) {
    job j = {tb, N, K, A, B, C, out, bias};
    int64_t per_row = N * K > 0 ? N * K : 1, grain = MIN_MACS / per_row;
    ts_gemm_serial_begin(); /* one OpenBLAS thread per slice */
    ts_pool_for(p, M, grain > MIN_ROWS ? grain : MIN_ROWS, rows, &j);
}
