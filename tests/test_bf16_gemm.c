/* test_bf16_gemm.c -- a bf16 model's matmuls through the CPU's bf16 GEMM
 * (backend/cpu/bf16_gemm.h, docs/precision.md):
 * (a) by default the route is sbgemm exactly where the CPU has
 *     avx512_bf16 (and an sbgemm is found), f32 elsewhere, and
 *     ts_cpu_features says which;
 * (b) TS_BF16_GEMM=sbgemm (a second run of this program) routes a bf16
 *     Linear (bias fused, B transposed) and a bf16 MatMul (B as stored)
 *     through cblas_sbgemm, with rows split over the model's threads, and
 *     their outputs are those of a bf16 product with f32 accumulation:
 *     within f32's summation error of the products of the rounded inputs,
 *     summed in double; the training step goes on (the gradients, in f32);
 * (c) TS_BF16_GEMM=f32 keeps every bf16 matmul on the f32 GEMM.
 * The OpenBLAS Debian ships has no cblas_sbgemm: this program then lends
 * its own (exported, found by the library's lookup as an sbgemm-enabled
 * OpenBLAS's would be), which multiplies bf16 numbers exactly in f32 and
 * sums in f32, and counts its calls; with an OpenBLAS that has one, the
 * library takes OpenBLAS's and the checks hold for it. */
#define _GNU_SOURCE /* RTLD_NOLOAD */
#include <cblas.h>
#include <dlfcn.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/cpu/bf16_gemm.h"
#include "backend/cpu/cpu_features.h"
#include "check.h"
#include "core/half.h"
#include "tensorscope.h"

static atomic_long calls;

static float widen(bfloat16 h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* the stand-in: C = alpha op(A) op(B) + beta C, bf16 products in f32,
 * summed in f32 in k's order (row-major only, as tensorscope calls it) */
void cblas_sbgemm(OPENBLAS_CONST enum CBLAS_ORDER order, OPENBLAS_CONST enum CBLAS_TRANSPOSE ta, OPENBLAS_CONST enum CBLAS_TRANSPOSE tb,
                  OPENBLAS_CONST blasint M, OPENBLAS_CONST blasint N, OPENBLAS_CONST blasint K, OPENBLAS_CONST float alpha,
                  OPENBLAS_CONST bfloat16 *A, OPENBLAS_CONST blasint lda, OPENBLAS_CONST bfloat16 *B, OPENBLAS_CONST blasint ldb,
                  OPENBLAS_CONST float beta, float *C, OPENBLAS_CONST blasint ldc) {
    atomic_fetch_add(&calls, 1);
    if (order != CblasRowMajor) abort();
    for (blasint i = 0; i < M; i++)
        for (blasint j = 0; j < N; j++) {
            float s = 0;
            for (blasint k = 0; k < K; k++) {
                float a = widen(ta == CblasTrans ? A[k * lda + i] : A[i * lda + k]);
                float b = widen(tb == CblasTrans ? B[j * ldb + k] : B[k * ldb + j]);
                s += a * b;
            }
            C[i * ldc + j] = alpha * s + (beta == 0.0f ? 0.0f : beta * C[i * ldc + j]);
        }
}

/* whether the OpenBLAS loaded has its own (then ours is not called) */
static bool openblas_has_sbgemm(void) {
    Dl_info info;
    if (!dladdr((void *)(uintptr_t)cblas_sgemm, &info) || !info.dli_fname) return false;
    void *h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    bool has = h && dlsym(h, "cblas_sbgemm");
    if (h) dlclose(h);
    return has;
}

enum { M = 150, K = 96, N = 64 };

static float round_bf16(float v) {
    float r;
    ts_round_half(TS_BF16, &r, &v, 1, NULL);
    return r;
}

typedef struct result {
    bool ok;
    float y[M * N], w[N * K], b[N];
    float x[M * K];
} result;

/* one step of a bf16 model: op 0 a Linear (x [M,K] by w [N,K]^T + b), op 1
 * a MatMul (x [M,K] by w [K,N]); y anchored, with w (and b) as they were */
static void run(int op, result *r) {
    ts_graph *g = ts_graph_new(11);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (const int64_t[]){M, K});
    ts_tensor *y;
    if (op == 0) {
        y = ts_linear(g, x, N, "fc");
    } else {
        ts_tensor *w = ts_param(g, "w", 2, (const int64_t[]){K, N});
        y = ts_matmul(g, x, w);
    }
    ts_array wa, ba = {0};
    ts_tensor_info(ts_graph_find(g, op == 0 ? "fc.weight" : "w"), &wa);
    if (op == 1) /* a ts_param starts at zero */
        for (int i = 0; i < K * N; i++) ((float *)wa.data)[i] = 0.1f * cosf(0.11f * (float)i);
    memcpy(r->w, wa.data, sizeof r->w);
    if (op == 0) {
        ts_tensor_info(ts_graph_find(g, "fc.bias"), &ba);
        for (int j = 0; j < N; j++) ((float *)ba.data)[j] = 0.01f * (float)(j - 20);
        memcpy(r->b, ba.data, sizeof r->b);
    }
    for (int i = 0; i < M * K; i++) r->x[i] = sinf(0.37f * (float)i) * (1.0f + (float)(i % 5));
    ts_tensor *loss = ts_mean(g, y);
    ts_options *o = ts_options_new();
    ts_options_set_precision(o, TS_BF16);
    ts_options_set_threads(o, 2);
    ts_options_anchor(o, "y", ts_tensor_name(y), TS_OUTPUT_FINAL, 0);
    ts_model *m = NULL;
    ts_array in = {.dtype = TS_F32, .ndim = 2, .shape = {M, K}, .data = r->x}, ya;
    const char *names[] = {"x"};
    r->ok = !ts_model_training(&m, g, loss, o, ts_sgd(0.01f, 0.0f, 0.0f)) && !ts_model_run(m, names, &in, 1) &&
            !ts_model_anchored(m, "y", &ya) && ts_array_numel(&ya) == M * N;
    if (r->ok) memcpy(r->y, ya.data, sizeof r->y);
    else printf("     %s\n", ts_last_error());
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
}

/* y against the products of the rounded operands summed in double: the
 * error of an f32 sum of K terms is within K * 2^-24 of the sum of their
 * magnitudes; rounding the operands again (or not at all) misses by far
 * more */
static bool matches_bf16_product(int op, const result *r, double *worst) {
    *worst = 0;
    bool ok = true;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                double p = (double)round_bf16(r->x[i * K + k]) * round_bf16(op == 0 ? r->w[j * K + k] : r->w[k * N + j]);
                s += p, mag += fabs(p);
            }
            if (op == 0) s += r->b[j], mag += fabs(r->b[j]);
            double err = fabs(r->y[i * N + j] - s), bound = (K + 2) * 0x1p-24 * mag;
            *worst = fmax(*worst, mag > 0 ? err / mag : err);
            ok = ok && err <= bound;
        }
    return ok;
}

static int child(const char *mode) {
    bool forced = strcmp(mode, "sbgemm") == 0;
    CHECK(ts_cpu_bf16_gemm_on() == forced, "TS_BF16_GEMM=%s: the route is %s (\"%s\")", mode, forced ? "sbgemm" : "f32",
          ts_cpu_bf16_gemm_route());
    static result r;
    static const char *OP[] = {"Linear (bias, B transposed)", "MatMul (B as stored)"};
    for (int op = 0; op < 2; op++) {
        long before = atomic_load(&calls);
        run(op, &r);
        long used = atomic_load(&calls) - before;
        double worst = 0;
        CHECK(r.ok, "TS_BF16_GEMM=%s: a bf16 %s trains a step", mode, OP[op]);
        if (!openblas_has_sbgemm())
            CHECK(forced ? used >= 2 : used == 0, "TS_BF16_GEMM=%s: %s: %ld calls of cblas_sbgemm (%s)", mode, OP[op], used,
                  forced ? "rows split over 2 threads" : "none");
        CHECK(r.ok && matches_bf16_product(op, &r, &worst), "TS_BF16_GEMM=%s: %s: a bf16 product with f32 accumulation (worst %.2g of the magnitudes)",
              mode, OP[op], worst);
    }
    return check_summary(forced ? "test_bf16_gemm (TS_BF16_GEMM=sbgemm)" : "test_bf16_gemm (TS_BF16_GEMM=f32)");
}

static void run_child(const char *self, const char *mode) {
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TS_BF16_GEMM", mode, 1);
        execl(self, self, mode, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the TS_BF16_GEMM=%s run passed its checks", mode);
}

int main(int argc, char **argv) {
    if (argc > 1) return child(argv[1]);
    unsetenv("TS_BF16_GEMM"); /* (a) is the default route */
    bool bf16 = ts_cpu_flags_get()->avx512_bf16;
    CHECK(ts_cpu_bf16_gemm_on() == bf16, "by default the bf16 matmuls %s sbgemm (this CPU %s avx512_bf16)", bf16 ? "take" : "do not take",
          bf16 ? "has" : "lacks");
    char want[32];
    snprintf(want, sizeof want, "bf16 products %s", bf16 ? "sbgemm" : "f32");
    CHECK(strstr(ts_cpu_features(), want) != NULL, "ts_cpu_features: \"%s\"", ts_cpu_features());
    run_child(argv[0], "sbgemm");
    run_child(argv[0], "f32");
    return check_summary("test_bf16_gemm");
}
