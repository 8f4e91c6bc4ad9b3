/* vk.h -- the vectorised kernels compiled once per kernel level
 * (cpu_features.h) and picked at run time: vk_body.h is their one source,
 * vk_generic.c, vk_avx2.c and vk_avx512.c compile it for x86-64's
 * baseline, AVX2+FMA and AVX-512 (CMake gives each file its -march), and
 * ts_vk_get() hands out the table of the level chosen. Each row takes a slice
 * (pointers at its start, n values); the callers split over the pool. */
#ifndef TS_VK_H
#define TS_VK_H

#include <stdbool.h>
#include <stdint.h>

typedef struct ts_vk {
    const char *name;
    /* ew_math.h's unary family, kind TS_EWU_*: y = f(x; alpha, beta) */
    void (*unary_forward)(int kind, float *y, const float *x, float alpha, float beta, int64_t n);
    /* dx (+)= dout * f'(x): stored when store, else added */
    void (*unary_backward)(int kind, float *dx, const float *dout, const float *x, float alpha, float beta, int64_t n, bool store);
    /* one row of n: y = softmax(x), or log-softmax when log; a row of
     * -inf gives 0 (-inf for log) */
    void (*softmax_row)(float *y, const float *x, int64_t n, bool log);
    /* y = silu(x) * u, and s = silu(x) where s is not NULL (a SiLU-gated
     * product: the Silu's and the Mul's bits) */
    void (*silu_mul)(float *s, float *y, const float *x, const float *u, int64_t n);
    /* its backward, the Mul's and the Silu's: dx (+)= (dy u) silu'(x)
     * (stored when store, else added), dy u as the Mul's backward gives
     * it (0 + dy u where plus); du (+)= dy s, s = silu(x) kept (stored
     * when du_store: 0 + dy s where du_plus); dx or du NULL: not wanted;
     * du may be dy, u or s */
    void (*silu_mul_backward)(float *dx, float *du, const float *dy, const float *u, const float *s, const float *x, int64_t n, bool plus,
                              bool store, bool du_store, bool du_plus);
} ts_vk;

/* the table of ts_cpu_level() */
const ts_vk *ts_vk_get(void);
/* the table of a level, or NULL where this CPU or this build cannot run it */
const ts_vk *ts_vk_at(int level);

#endif
