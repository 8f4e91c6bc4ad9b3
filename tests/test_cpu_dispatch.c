/* test_cpu_dispatch.c -- the kernels chosen for the CPU at hand
 * (backend/cpu/vk.h, cpu_features.h; docs/backend.md):
 * (a) the instruction sets read from cpuid are those /proc/cpuinfo lists
 *     (where Linux has it), and the level follows from them;
 * (b) every kernel level this CPU can run (generic, avx2, avx512) gives the
 *     generic level's bits, kind by kind of the unary family (forward,
 *     backward stored and added) and for softmax and log-softmax rows, on
 *     lengths that leave every vector width a tail, unaligned starts and
 *     the special values (NaN, +-inf, exp's clamps, erf's switch at 0.8);
 *     the levels above the CPU are skipped, and ts_vk_at refuses them;
 * (c) TS_CPU=generic (a second run of this program) makes the models use
 *     the generic level, says so in ts_cpu_features, and a small model
 *     (Linear, GELU, cross entropy) trained there matches the default
 *     level's, bit for bit; a TS_CPU the CPU
 *     cannot run is capped, never raised. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/vk.h"
#include "backend/ew_math.h"
#include "check.h"
#include "tensorscope.h"

/* ------------------------------------------------------------------ (a) */

static bool cpuinfo_has(const char *flags, const char *name) {
    size_t n = strlen(name);
    for (const char *p = flags; (p = strstr(p, name)) != NULL; p += n)
        if ((p == flags || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\n' || p[n] == '\0')) return true;
    return false;
}

static void test_flags(void) {
    const ts_cpu_flags *f = ts_cpu_flags_get();
    int max = ts_cpu_level_max();
    CHECK(max >= TS_CPU_GENERIC && max < TS_CPU_LEVELS && ts_cpu_level() == max, "level %s (the highest this CPU runs, TS_CPU unset)",
          ts_cpu_level_name(max));
    CHECK((max >= TS_CPU_AVX2) == (f->avx2 && f->fma && f->f16c), "avx2 level exactly where avx2, fma and f16c are");
    CHECK((max >= TS_CPU_AVX512) == (max >= TS_CPU_AVX2 && f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq),
          "avx512 level exactly where avx512f, bw, vl and dq are");
    FILE *fp = fopen("/proc/cpuinfo", "r");
    static char line[8192];
    bool found = false;
    while (fp && fgets(line, sizeof line, fp))
        if (strncmp(line, "flags", 5) == 0) {
            found = true;
            break;
        }
    if (fp) fclose(fp);
    if (!found) {
        printf("skip /proc/cpuinfo has no flags line here\n");
        return;
    }
    struct { const char *name; bool ours; } sets[] = {
        {"avx", f->avx},           {"avx2", f->avx2},         {"fma", f->fma},           {"f16c", f->f16c},
        {"avx512f", f->avx512f},   {"avx512bw", f->avx512bw}, {"avx512vl", f->avx512vl}, {"avx512dq", f->avx512dq},
        {"avx512_bf16", f->avx512_bf16}, {"amx_tile", f->amx_tile}, {"amx_bf16", f->amx_bf16},
    };
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
        CHECK(sets[i].ours == cpuinfo_has(line, sets[i].name), "%s: %s, as /proc/cpuinfo says", sets[i].name, sets[i].ours ? "yes" : "no");
    const char *pub = ts_cpu_features();
    char want[64];
    snprintf(want, sizeof want, "kernels %s", ts_cpu_level_name(max));
    CHECK(strstr(pub, want) != NULL && (strstr(pub, "avx2") != NULL) == f->avx2, "ts_cpu_features: \"%s\"", pub);
}

/* ------------------------------------------------------------------ (b) */

enum { N = 1003 };

static float xs[N + 1], ys[N + 1], dys[N + 1], ref[N + 1], got[N + 1];

static void fill_inputs(void) {
    static const float special[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 100.0f, -100.0f, 88.29f, 88.31f, -87.29f, -87.31f,
                                    0.79999995f, 0.8f, -0.8f, 1e-30f, -1e-30f, 1e-45f, 3.0f, -3.0f, 0.5f, 1e6f, -1e6f};
    size_t ns = sizeof special / sizeof special[0];
    for (int i = 0; i < N + 1; i++) {
        xs[i] = i % 7 == 3 ? special[(size_t)(i / 7) % ns] : -12.0f + 24.0f * (float)i / (float)N + 0.001f * (float)(i % 13);
        dys[i] = 0.25f + sinf((float)i);
    }
}

/* same bits, or both NaN */
static bool same(const float *a, const float *b, int64_t n, int64_t *at) {
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0 && !(isnan(a[i]) && isnan(b[i]))) return *at = i, false;
    return true;
}

typedef struct { int kind; float alpha, beta; } ewu_case;

static void compare_level(const ts_vk *gen, const ts_vk *vk) {
    static ewu_case cases[TS_EWU_SOFTPLUS + 2];
    int nc = 0;
    for (int k = 0; k <= TS_EWU_SOFTPLUS; k++) {
        float a = 1.5f, b = 0.5f;
        if (k == TS_EWU_ISINF) a = b = 1.0f;
        if (k == TS_EWU_SELU) a = 1.6732632f, b = 1.0507010f;
        if (k == TS_EWU_LEAKYRELU) a = 0.01f;
        cases[nc++] = (ewu_case){k, a, b};
    }
    cases[nc++] = (ewu_case){TS_EWU_POW, 2.0f, 0.0f}; /* the square's own loop */
    static const int64_t lens[] = {1, 3, 7, 8, 15, 16, 17, 31, 33, 64, 100, N};
    int64_t at = -1;
    int bad_f = 0, bad_b = 0;
    for (int c = 0; c < nc; c++)
        for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
            for (int off = 0; off < 2; off++) { /* aligned and one float in */
                int64_t n = lens[l] - (lens[l] == N ? off : 0);
                const ewu_case *e = &cases[c];
                gen->unary_forward(e->kind, ref, xs + off, e->alpha, e->beta, n);
                vk->unary_forward(e->kind, got, xs + off, e->alpha, e->beta, n);
                if (!same(ref, got, n, &at) && bad_f++ == 0)
                    printf("     forward kind %d n %lld: x %g gives %g, generic %g\n", e->kind, (long long)n, (double)xs[off + at],
                           (double)got[at], (double)ref[at]);
                for (int store = 0; store < 2; store++) {
                    for (int64_t i = 0; i < n; i++) ref[i] = got[i] = 0.125f * (float)(i % 5);
                    gen->unary_backward(e->kind, ref, dys + off, xs + off, e->alpha, e->beta, n, store);
                    vk->unary_backward(e->kind, got, dys + off, xs + off, e->alpha, e->beta, n, store);
                    if (!same(ref, got, n, &at) && bad_b++ == 0)
                        printf("     backward kind %d n %lld store %d: x %g gives %g, generic %g\n", e->kind, (long long)n, store,
                               (double)xs[off + at], (double)got[at], (double)ref[at]);
                }
            }
    CHECK(bad_f == 0, "%s: the unary family's forward (%d kinds, every length and start) is generic's, bit for bit (%d differ)", vk->name,
          nc, bad_f);
    CHECK(bad_b == 0, "%s: its backward, stored and added, is generic's bit for bit (%d differ)", vk->name, bad_b);
    int bad_s = 0;
    for (int log = 0; log < 2; log++)
        for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
            int64_t n = lens[l];
            for (int64_t i = 0; i < n; i++) ys[i] = isnan(xs[i]) || xs[i] > 1e5f ? -INFINITY : xs[i]; /* masked entries, no NaN row */
            gen->softmax_row(ref, ys + 1, n - (n > 1), log);
            vk->softmax_row(got, ys + 1, n - (n > 1), log);
            bad_s += !same(ref, got, n - (n > 1), &at);
        }
    for (int64_t i = 0; i < 40; i++) ys[i] = -INFINITY; /* a fully masked row */
    for (int log = 0; log < 2; log++) {
        vk->softmax_row(got, ys, 40, log);
        gen->softmax_row(ref, ys, 40, log);
        bad_s += !same(ref, got, 40, &at) || got[7] != (log ? -INFINITY : 0.0f);
    }
    CHECK(bad_s == 0, "%s: softmax and log-softmax rows (masked entries, a masked row) are generic's bit for bit (%d differ)", vk->name,
          bad_s);
}

static void test_levels(void) {
    fill_inputs();
    const ts_vk *gen = ts_vk_at(TS_CPU_GENERIC);
    CHECK(gen && strcmp(gen->name, "generic") == 0, "the generic level is always there");
    if (!gen) return;
    /* the generic level itself against libm, so that a fault shared by
     * every level cannot pass (vmath.h: within 2 ulp of expf, 1.5e-7 of
     * erff) */
    double worst_exp = 0, worst_erf = 0;
    gen->unary_forward(TS_EWU_EXP, ref, xs, 0, 0, N);
    gen->unary_forward(TS_EWU_ERF, got, xs, 0, 0, N);
    for (int i = 0; i < N; i++) {
        if (!isfinite(xs[i]) || fabsf(xs[i]) > 80.0f) continue;
        double e = exp((double)xs[i]);
        worst_exp = fmax(worst_exp, fabs(ref[i] - e) / e);
        worst_erf = fmax(worst_erf, fabs(got[i] - erf((double)xs[i])));
    }
    CHECK(worst_exp < 3e-7 && worst_erf < 3e-7, "generic exp within %.2g relative of exp, erf within %.2g of erf", worst_exp, worst_erf);
    for (int l = TS_CPU_GENERIC + 1; l < TS_CPU_LEVELS; l++) {
        const ts_vk *vk = ts_vk_at(l);
        if (l > ts_cpu_level_max()) {
            CHECK(vk == NULL, "%s: above this CPU, refused", ts_cpu_level_name(l));
            printf("skip %s: this CPU cannot run it\n", ts_cpu_level_name(l));
            continue;
        }
        CHECK(vk && vk != gen && strcmp(vk->name, ts_cpu_level_name(l)) == 0 && vk->unary_forward != gen->unary_forward,
              "%s: its own code", ts_cpu_level_name(l));
        if (vk) compare_level(gen, vk);
    }
}

/* ------------------------------------------------------------------ (c) */

/* fc1's weight after two SGD steps of x[16,24] -> Linear 32 -> GELU ->
 * Linear 10 -> cross entropy: the unary family and softmax rows on the
 * model's path */
static bool train_small(float *out, int64_t *n) {
    enum { B = 16, K = 24 };
    ts_graph *g = ts_graph_new(3);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (const int64_t[]){B, K});
    ts_tensor *lab = ts_input(g, "labels", TS_I32, 1, (const int64_t[]){B});
    ts_tensor *h = ts_gelu(g, ts_linear(g, x, 32, "fc1"), 0);
    ts_tensor *loss = ts_cross_entropy(g, ts_linear(g, h, 10, "fc2"), lab);
    static float xv[B * K];
    static int32_t lv[B];
    for (int i = 0; i < B * K; i++) xv[i] = 2.0f * sinf(0.7f * (float)i);
    for (int i = 0; i < B; i++) lv[i] = (i * 7) % 10;
    ts_array in[2] = {{.dtype = TS_F32, .ndim = 2, .shape = {B, K}, .data = xv}, {.dtype = TS_I32, .ndim = 1, .shape = {B}, .data = lv}};
    const char *names[] = {"x", "labels"};
    ts_options *o = ts_options_new();
    ts_options_anchor(o, "w", "fc1.weight", TS_OUTPUT_FINAL, 0);
    ts_model *m = NULL;
    ts_array w;
    bool ok = !ts_model_training(&m, g, loss, o, ts_sgd(0.1f, 0.0f, 0.0f)) && !ts_model_run(m, names, in, 2) &&
              !ts_model_run(m, names, in, 2) && !ts_model_anchored(m, "w", &w) && ts_array_numel(&w) <= 4096;
    if (ok) {
        *n = ts_array_numel(&w);
        memcpy(out, w.data, (size_t)*n * sizeof *out);
    } else {
        printf("     %s\n", ts_last_error());
    }
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);
    return ok;
}

static int child_generic(void) {
    /* run with TS_CPU=generic: the models use the generic table */
    CHECK(ts_cpu_level() == TS_CPU_GENERIC && ts_vk_get() == ts_vk_at(TS_CPU_GENERIC), "TS_CPU=generic: the generic kernels");
    CHECK(strstr(ts_cpu_features(), "kernels generic") != NULL, "TS_CPU=generic: ts_cpu_features says so: \"%s\"", ts_cpu_features());
    static float w[4096];
    int64_t n = 0;
    CHECK(train_small(w, &n), "TS_CPU=generic: the small model trains");
    FILE *back = fdopen(3, "wb"); /* the weights back to the parent */
    if (back) {
        fwrite(&n, sizeof n, 1, back);
        fwrite(w, sizeof *w, (size_t)n, back);
        fclose(back);
    }
    return check_summary("test_cpu_dispatch (TS_CPU=generic)");
}

static void test_env(const char *self) {
    static float w[4096], wg[4096];
    int64_t n = 0, ng = -1;
    CHECK(train_small(w, &n), "the small model trains at level %s", ts_vk_get()->name);
    int fd[2];
    if (pipe(fd)) return;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]); /* before the dup: the pipe's ends may be 3 and 4 */
        dup2(fd[1], 3);
        setenv("TS_CPU", "generic", 1);
        execl(self, self, "--generic", (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    FILE *in = fdopen(fd[0], "rb");
    bool read_ok = in && fread(&ng, sizeof ng, 1, in) == 1 && ng == n && fread(wg, sizeof *wg, (size_t)ng, in) == (size_t)ng;
    if (in) fclose(in);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the TS_CPU=generic run passed its checks");
    int64_t at = -1;
    if (read_ok && !same(w, wg, n, &at)) printf("     w[%lld] %.9g, generic %.9g\n", (long long)at, (double)w[at], (double)wg[at]);
    CHECK(read_ok && same(w, wg, n, &at), "the small model's weights after two steps: TS_CPU=generic's equal level %s's bit for bit",
          ts_vk_get()->name);
    /* a level above this CPU is capped (the warning goes to the log) */
    if (ts_cpu_level_max() < TS_CPU_AVX512) {
        pid = fork();
        if (pid == 0) {
            setenv("TS_CPU", "avx512", 1);
            setenv("TS_LOG_LEVEL", "error", 1);
            execl(self, self, "--capped", (char *)NULL);
            _exit(127);
        }
        waitpid(pid, &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "TS_CPU=avx512 on a CPU without it: the CPU's own level, and the line says so");
    }
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--generic") == 0) return child_generic();
    if (argc > 1 && strcmp(argv[1], "--capped") == 0) /* TS_CPU above the CPU */
        return ts_cpu_level() == ts_cpu_level_max() && ts_vk_get() == ts_vk_at(ts_cpu_level_max()) &&
                       strstr(ts_cpu_features(), "above this CPU") ? 0 : 1;
    if (getenv("TS_CPU")) unsetenv("TS_CPU"); /* the checks below assume the CPU's own level */
    test_flags();
    test_levels();
    test_env(argv[0]);
    return check_summary("test_cpu_dispatch");
}
