/* int_matmul.cu -- the CUDA twin of the CPU's TS_OP_INT_MATMUL
 * (backend/cpu/int_matmul.c; what it computes: backend/int_matmul.h): one
 * thread an output element, its sum over K unsigned (wrapping), then the
 * output pass (Gemm's C, alpha and beta in double). */
#include "backend/cuda/cuda.h"

#include "backend/cuda/adapters.h"
#include "backend/int_matmul.h"

extern "C" {
#include "graph/ops.h"
}

__device__ inline uint64_t imm_cell(const void *p, bool i64, int64_t i) {
    return i64 ? (uint64_t)((const int64_t *)p)[i] : (uint64_t)(int64_t)((const int32_t *)p)[i];
}

__global__ void int_matmul_kernel(void *y, ts_imm_geom g, const void *a, const void *b, const void *c, bool c64, int64_t n) {
    bool i64 = !g.i32;
    TS_CU_FOR(o, n) {
        int64_t col = o % g.N, row = (o / g.N) % g.M, p = o / (g.N * g.M);
        int64_t abase = ts_imm_a_base(&g, p), bbase = ts_imm_b_base(&g, p);
        uint64_t acc = 0;
        for (int64_t kk = 0; kk < g.K; kk++)
            acc += imm_cell(a, i64, abase + ts_imm_a_at(&g, row, kk)) * imm_cell(b, i64, bbase + ts_imm_b_at(&g, kk, col));
        int64_t cv = 0;
        if (c) {
            int64_t at = ts_bcast_offset(&g.os, &g.cs, o);
            cv = c64 ? ((const int64_t *)c)[at] : ((const int32_t *)c)[at];
        }
        int64_t v = ts_imm_finish(&g, acc, c != nullptr, cv);
        if (i64) ((int64_t *)y)[o] = v;
        else ((int32_t *)y)[o] = (int32_t)v;
    }
}

static const void *imm_cells(const ts_kctx *k, int j) {
    return k->in_dtype[j] == TS_I64 ? (const void *)k->in[j] : (const void *)k->in_int[j];
}

void ts_cu_fwd_int_matmul(const ts_kctx *k) {
    ts_imm_geom g = ts_imm_geom_of(k);
    int64_t n = g.batch * g.M * g.N;
    if (n <= 0) return;
    const void *c = g.cs.ndim >= 0 ? imm_cells(k, 2) : nullptr;
    int_matmul_kernel<<<ts_cu_blocks(n), TS_CU_THREADS, 0, ts_cu_stream(k)>>>(k->out, g, imm_cells(k, 0), imm_cells(k, 1), c,
                                                                             c && k->in_dtype[2] == TS_I64, n);
    ts_cu_check(cudaGetLastError(), ts_op_get(k->node->op)->name);
}
