/* int_matmul.h -- what TS_OP_INT_MATMUL computes, one definition for
 * every device: the geometry of a node (batch dims broadcast as numpy's
 * matmul, operands stored transposed or not), where each operand's
 * element lies, and the output pass (Gemm's C; alpha and beta in double).
 * The sums over K are unsigned, so they wrap as two's complement (an i32
 * product's low 32 bits are its i32 value). Plain C, readable by a device
 * compiler. */
#ifndef TS_INT_MATMUL_H
#define TS_INT_MATMUL_H

#include "backend/backend.h"
#include "backend/ew_math.h"

#include <string.h>

#ifdef __CUDACC__
#define TS_IMM_FN static __host__ __device__ inline
#else
#define TS_IMM_FN static inline
#endif

typedef struct ts_imm_geom {
    int64_t batch, M, K, N;     /* the output [batch.., M, N], the batch dims' elements */
    ts_shape ob, ab, bb, cs, os; /* the batch dims of the output, a and b; c's shape and the output's (cs.ndim < 0: no c) */
    int ta, tb, gemm, i32;      /* a, b stored transposed; Gemm in double; i32 cells */
    double alpha, beta;
} ts_imm_geom;

/* The geometry of node k's product (its attributes and shapes) */
static inline ts_imm_geom ts_imm_geom_of(const ts_kctx *k) {
    ts_imm_geom g;
    memset(&g, 0, sizeof g);
    const ts_shape *a = &k->in_shape[0], *b = &k->in_shape[1];
    g.ta = k->node->attr[0] != 0, g.tb = k->node->attr[1] != 0, g.gemm = k->node->attr[2] == 1, g.i32 = k->out_dtype == TS_I32;
    memcpy(&g.alpha, &k->node->attr[3], sizeof g.alpha);
    memcpy(&g.beta, &k->node->attr[4], sizeof g.beta);
    g.os = k->out_shape;
    g.M = g.os.d[g.os.ndim - 2], g.N = g.os.d[g.os.ndim - 1];
    g.K = a->d[a->ndim - (g.ta ? 2 : 1)];
    g.ob = g.os, g.ab = *a, g.bb = *b;
    g.ob.ndim -= 2, g.ab.ndim -= 2, g.bb.ndim -= 2;
    g.batch = ts_shape_numel(&g.ob);
    if (k->n_in > 2) g.cs = k->in_shape[2];
    else g.cs.ndim = -1;
    return g;
}

/* The flat position in a of its matrix of output batch p, row m, column k
 * (the matrix's offset by numpy's broadcast of the batch dims) */
TS_IMM_FN int64_t ts_imm_a_base(const ts_imm_geom *g, int64_t p) { return ts_bcast_offset(&g->ob, &g->ab, p) * g->M * g->K; }
TS_IMM_FN int64_t ts_imm_b_base(const ts_imm_geom *g, int64_t p) { return ts_bcast_offset(&g->ob, &g->bb, p) * g->K * g->N; }
TS_IMM_FN int64_t ts_imm_a_at(const ts_imm_geom *g, int64_t m, int64_t k) { return g->ta ? k * g->M + m : m * g->K + k; }
TS_IMM_FN int64_t ts_imm_b_at(const ts_imm_geom *g, int64_t k, int64_t n) { return g->tb ? n * g->K + k : k * g->N + n; }

/* A double toward zero into int64 (bits 64) or int32, saturated, NaN 0
 * (ts_float_to_int's rule in double) */
TS_IMM_FN int64_t ts_imm_double_to_int(double v, int bits) {
    double lo = bits == 32 ? -2147483648.0 : -9223372036854775808.0;
    if (!(v == v)) return 0;
    if (v <= lo) return bits == 32 ? INT32_MIN : INT64_MIN;
    if (v >= -lo) return bits == 32 ? INT32_MAX : INT64_MAX;
    return (int64_t)v;
}

/* Output element o's value from its sum over K (unsigned, wrapping) and
 * its element of c (has_c): AB (+ C) wrapping in the dtype, or Gemm's
 * alpha AB + beta C in double with AB wrapped to the dtype first (ONNX's
 * reference: np.dot in the dtype, then float64, then astype) */
TS_IMM_FN int64_t ts_imm_finish(const ts_imm_geom *g, uint64_t acc, int has_c, int64_t c) {
    int64_t ab = g->i32 ? (int64_t)(int32_t)(uint32_t)acc : (int64_t)acc;
    if (!g->gemm) {
        uint64_t r = (uint64_t)ab + (has_c ? (uint64_t)c : 0u);
        return g->i32 ? (int64_t)(int32_t)(uint32_t)r : (int64_t)r;
    }
    double v = (double)ab * g->alpha;
    if (has_c && g->beta != 0.0) v += (double)c * g->beta;
    return ts_imm_double_to_int(v, g->i32 ? 32 : 64);
}

#endif
