/* int_matmul.c -- the CPU's TS_OP_INT_MATMUL (backend/int_matmul.h): the
 * output in tiles of IMM_ROWS rows by IMM_COLS columns, each tile's sums
 * held in unsigned 64-bit accumulators (8 KiB, in cache) while K runs
 * (each row of b's columns read once per tile of rows), the tiles split
 * over the model's threads. Memory: the output's, nothing more. */
#include "backend/cpu/adapters.h"

#include "backend/int_matmul.h"
#include "backend/pool.h"

#define IMM_ROWS 4
#define IMM_COLS 256

typedef struct {
    const ts_kctx *k;
    ts_imm_geom g;
    int64_t row_tiles, col_tiles; /* tiles of rows and of columns per batch element */
} imm_job;

static inline uint64_t cell(const void *p, bool i64, int64_t i) {
    return i64 ? (uint64_t)((const int64_t *)p)[i] : (uint64_t)(int64_t)((const int32_t *)p)[i];
}

static const void *cells_of(const ts_kctx *k, int j) {
    return k->in_dtype[j] == TS_I64 ? (const void *)k->in[j] : (const void *)k->in_int[j];
}

static void imm_tiles(void *ctx, int64_t begin, int64_t end) {
    const imm_job *job = ctx;
    const ts_kctx *k = job->k;
    const ts_imm_geom *g = &job->g;
    bool i64 = k->out_dtype == TS_I64;
    const void *a = cells_of(k, 0), *b = cells_of(k, 1), *c = g->cs.ndim >= 0 ? cells_of(k, 2) : NULL;
    bool c64 = c && k->in_dtype[2] == TS_I64;
    uint64_t acc[IMM_ROWS][IMM_COLS];
    for (int64_t t = begin; t < end; t++) { /* tile t: batch element p, rows from m0, columns from n0 */
        int64_t p = t / (job->row_tiles * job->col_tiles), rt = t / job->col_tiles % job->row_tiles, n0 = t % job->col_tiles * IMM_COLS;
        int64_t m0 = rt * IMM_ROWS, rows = g->M - m0 < IMM_ROWS ? g->M - m0 : IMM_ROWS, cols = g->N - n0 < IMM_COLS ? g->N - n0 : IMM_COLS;
        int64_t abase = ts_imm_a_base(g, p), bbase = ts_imm_b_base(g, p);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < cols; j++) acc[r][j] = 0;
        for (int64_t kk = 0; kk < g->K; kk++) {
            uint64_t av[IMM_ROWS];
            for (int64_t r = 0; r < rows; r++) av[r] = cell(a, i64, abase + ts_imm_a_at(g, m0 + r, kk));
            if (!g->tb && i64) { /* the common case: a row of b, contiguous */
                const int64_t *brow = (const int64_t *)b + bbase + kk * g->N + n0;
                for (int64_t r = 0; r < rows; r++)
                    for (int64_t j = 0; j < cols; j++) acc[r][j] += av[r] * (uint64_t)brow[j];
            } else {
                for (int64_t j = 0; j < cols; j++) {
                    uint64_t bv = cell(b, i64, bbase + ts_imm_b_at(g, kk, n0 + j));
                    for (int64_t r = 0; r < rows; r++) acc[r][j] += av[r] * bv;
                }
            }
        }
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < cols; j++) {
                int64_t o = (p * g->M + m0 + r) * g->N + n0 + j, cv = 0;
                if (c) {
                    int64_t at = ts_bcast_offset(&g->os, &g->cs, o);
                    cv = c64 ? ((const int64_t *)c)[at] : ((const int32_t *)c)[at];
                }
                int64_t v = ts_imm_finish(g, acc[r][j], c != NULL, cv);
                if (i64) ((int64_t *)(void *)k->out)[o] = v;
                else ((int32_t *)(void *)k->out)[o] = (int32_t)v;
            }
    }
}

void ts_fwd_int_matmul(const ts_kctx *k) {
    imm_job job = {.k = k, .g = ts_imm_geom_of(k)};
    const ts_imm_geom *g = &job.g;
    if (g->batch <= 0 || g->M <= 0 || g->N <= 0) return;
    job.row_tiles = (g->M + IMM_ROWS - 1) / IMM_ROWS, job.col_tiles = (g->N + IMM_COLS - 1) / IMM_COLS;
    double work = (double)IMM_ROWS * (double)IMM_COLS * (double)(g->K > 0 ? g->K : 1); /* products of one tile, at most */
    int64_t grain = work >= 65536.0 ? 1 : (int64_t)(65536.0 / work);
    ts_pool_for(k->pool, g->batch * job.row_tiles * job.col_tiles, grain, imm_tiles, &job);
}
