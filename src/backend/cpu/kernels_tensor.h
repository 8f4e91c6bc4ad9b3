/* kernels_tensor.h -- kernels of the tensor and transformer ops: numpy
 * broadcasting, elementwise math, embedding, layer norm, batched matmul,
 * permute/slice/concat, where/masked fill, reductions over axes, softmax
 * rows and cross entropy over [..., V]. Same conventions as kernels.h:
 * outputs first, then inputs, then shapes; backward kernels ACCUMULATE into
 * the input gradients (NULL = not wanted). */
#ifndef TS_KERNELS_TENSOR_H
#define TS_KERNELS_TENSOR_H

#include "backend/pool.h"
#include "graph/graph.h"

struct ts_att_sums;

/* Binary kinds from here on are ew_math.h's TS_EWB_* (kind - TS_BIN_EW). */
#define TS_BIN_EW 16

/* ---- numpy broadcasting */

/* kind: TS_BIN_ADD, TS_BIN_SUB, TS_BIN_MUL or TS_BIN_DIV (kernels.h), or
 * TS_BIN_EW + a binary kind of backend/ew_math.h (Pow, Max, Equal, ...);
 * out [so] = a [sa] (op) b [sb], both broadcast to so. */
void ts_bcast_binary_forward(ts_pool *p, int kind, float *out, const float *a, const float *b, const ts_shape *so,
                             const ts_shape *sa, const ts_shape *sb);
/* da [sa] += ..., db [sb] += ... summed over the dims each was broadcast on. */
void ts_bcast_binary_backward(ts_pool *p, int kind, float *da, float *db, const float *dout, const float *a, const float *b,
                              const ts_shape *so, const ts_shape *sa, const ts_shape *sb, unsigned store);

/* ---- the unary family of backend/ew_math.h (kind: TS_EWU_*), alpha and
 * beta its parameters */
void ts_ew_unary_forward(ts_pool *p, int kind, float *out, const float *x, float alpha, float beta, int64_t n);
/* y = silu(x) * u, and s = silu(x) where s is not NULL: a Silu and the
 * Mul of its output in one pass, their bits (exec.c's gate_fusable) */
void ts_silu_mul_forward(ts_pool *p, float *s, float *y, const float *x, const float *u, int64_t n);
/* its backward in one pass, the Mul's and the Silu's (vk.h's
 * silu_mul_backward: dx from dy u, du from dy s) */
void ts_silu_mul_backward(ts_pool *p, float *dx, float *du, const float *dy, const float *u, const float *s, const float *x, int64_t n,
                          bool plus, bool store, bool du_store, bool du_plus);
/* v: x, or the forward's output for the kinds ts_ewu_reads_output names */
void ts_ew_unary_backward(ts_pool *p, int kind, float *dx, const float *dout, const float *v, float alpha, float beta, int64_t n,
                          bool store);

/* ---- gather (and embedding, its axis 0 of [V, C]): w [outer, V, C],
 * out [outer, n, C] = w[:, idx[n], :] (a negative index counts from V's
 * end); dw[:, idx[n], :] += dout[:, n, :] */
void ts_gather_forward(float *out, const float *w, const int32_t *idx, int64_t outer, int64_t V, int64_t n, int64_t C);
void ts_gather_backward(float *dw, const float *dout, const int32_t *idx, int64_t outer, int64_t V, int64_t n, int64_t C);

/* An elementwise op a kernel does in its output pass, over each piece of
 * its output y as it writes it (still in the cache): out = max(0, y) as
 * ts_relu_forward computes it (kind TS_EWU_NONE), or f(y) of ew_math.h's
 * unary `kind` with its alpha and beta, as ts_ew_unary_forward computes
 * it; out may be y. */
typedef struct ts_out_act {
    float *out;
    int kind;
    float alpha, beta;
} ts_out_act;
/* act's op over a piece y [n] of a kernel's output, into o (o may be y):
 * the Relu's and the unary family's own loops, on this thread */
void ts_out_act_apply(const ts_out_act *act, float *o, const float *y, int64_t n);

/* ---- layer norm over rows of D: y = (x - mean) * rstd * w + b; stats
 * [2*rows] keeps mean and rstd for backward; act: an op done in the
 * output pass, row by row (NULL: none) */
void ts_layer_norm_forward(ts_pool *p, float *y, float *stats, const float *x, const float *w, const float *b, int64_t rows,
                           int64_t D, float eps, const ts_out_act *act);
void ts_layer_norm_backward(ts_pool *p, float *dx, float *dw, float *db, const float *dy, const float *x, const float *stats, const float *w,
                            int64_t rows, int64_t D);
/* ---- RMS norm over rows of D: y = x * rstd * w (w NULL: none), rstd =
 * 1 / sqrt(mean(x^2) + eps) kept per row [rows] for backward, which
 * accumulates into dx and dw (either may be NULL); act as layer norm's */
void ts_rms_norm_forward(ts_pool *p, float *y, float *rstd, const float *x, const float *w, int64_t rows, int64_t D, float eps,
                         const ts_out_act *act);
void ts_rms_norm_backward(ts_pool *p, float *dx, float *dw, const float *dy, const float *x, const float *rstd, const float *w,
                          int64_t rows, int64_t D);
/* Group norm of x [N, C, S] over G groups of C/G channels: stats [N*G, 2]
 * = (mean, rstd) kept for the backward, which accumulates into dx, dw, db
 * (any may be NULL). */
void ts_group_norm_forward(ts_pool *p, float *y, float *stats, const float *x, const float *w, const float *b, int64_t N, int64_t C,
                           int64_t G, int64_t S, float eps);
void ts_group_norm_backward(ts_pool *p, float *dx, float *dw, float *db, const float *dy, const float *x, const float *stats, const float *w,
                            int64_t N, int64_t C, int64_t G, int64_t S);

/* ---- batched matmul: C[..., M, N] = op(A)[..., M, K] op(B)[..., K, N],
 * leading dims broadcast; sc, sa, sb the shapes as stored. The products
 * are split over the pool (ts_gemm_batch_pool), operands read in place */
void ts_bmm_forward(ts_pool *p, float *c, const float *a, const float *b, bool ta, bool tb, const ts_shape *sc, const ts_shape *sa,
                    const ts_shape *sb);
void ts_bmm_backward(ts_pool *p, float *da, float *db, const float *dc, const float *a, const float *b, bool ta, bool tb,
                     const ts_shape *sc, const ts_shape *sa, const ts_shape *sb);

/* ---- layout: out = permute(x, perm) (out[i...] = x[perm-ordered i...]) */
void ts_permute_forward(ts_pool *p, float *out, const float *x, const ts_shape *sx, const int64_t *perm);
void ts_permute_backward(ts_pool *p, float *dx, const float *dout, const ts_shape *sx, const int64_t *perm);
/* out = x[..., start:start+len, ...] along dim; outer/inner around dim */
void ts_slice_forward(ts_pool *p, float *out, const float *x, int64_t outer, int64_t dim_in, int64_t inner, int64_t start, int64_t len);
void ts_slice_backward(ts_pool *p, float *dx, const float *dout, int64_t outer, int64_t dim_in, int64_t inner, int64_t start, int64_t len);
/* Pad (backend/pad_index.h): out = x padded; dx += the sum of dout over
 * the output elements that read each element of x */
struct ts_pad_geom;
void ts_pad_forward(float *out, const float *x, const struct ts_pad_geom *g, int64_t n_out);
void ts_pad_backward(float *dx, const float *dout, const struct ts_pad_geom *g, int64_t n_in);
/* concat: part k [outer, dk, inner] goes to out at offset `at` of dim_out */
void ts_concat_part_forward(float *out, const float *part, int64_t outer, int64_t dim_out, int64_t inner, int64_t at, int64_t dk);

/* ---- where / masked fill (numpy broadcasting of every operand to so) */
/* cond: i32, or (cond NULL) fcond: f32 */
void ts_where_forward(float *out, const int32_t *cond, const float *fcond, const float *a, const float *b, const ts_shape *so, const ts_shape *sc,
                      const ts_shape *sa, const ts_shape *sb);
void ts_where_backward(float *da, float *db, const float *dout, const int32_t *cond, const float *fcond, const ts_shape *so, const ts_shape *sc,
                       const ts_shape *sa, const ts_shape *sb);
/* masked fill is where(mask, value, x) with a scalar value */
void ts_masked_fill_forward(ts_pool *p, float *out, const float *x, const int32_t *mask, float value, const ts_shape *so, const ts_shape *sm);
void ts_masked_fill_backward(ts_pool *p, float *dx, const float *dout, const int32_t *mask, const ts_shape *so, const ts_shape *sm);

/* ---- reductions of x [sx] over the axes in the bit mask into out (the
 * reduced dims kept as 1 in sr) */
enum { TS_RED_SUM = 0, TS_RED_MEAN, TS_RED_MAX };
void ts_reduce_axes_forward(int kind, float *out, const float *x, const ts_shape *sx, const ts_shape *sr);
void ts_reduce_axes_backward(int kind, float *dx, const float *dout, const float *x, const float *out, const ts_shape *sx,
                             const ts_shape *sr);

/* ---- softmax over contiguous rows (the last dim), split over the pool; a
 * row that is -inf everywhere (fully masked) gives zeros (log-softmax:
 * -inf) instead of NaN, and no gradient */
void ts_softmax_rows_forward(ts_pool *p, float *out, const float *x, int64_t rows, int64_t n, bool log);
void ts_softmax_rows_backward(ts_pool *p, float *dx, const float *dout, const float *out, int64_t rows, int64_t n, bool log);

/* ---- attention in one pass over the keys (attention.c): q [B,H,T,D],
 * k [B,H,S,D], v [B,H,S,Dv], out [B,H,T,Dv], all contiguous; mask(b,h,i,j)
 * = mask[b ms[0] + h ms[1] + i ms[2] + j ms[3]] (a broadcast dim's stride
 * 0), non-zero: key j left out of row i. lse [B,H,T]: each row's
 * log-sum-exp, which the backward reads. ws: ts_attention_workspace
 * floats. The backward accumulates into dq, dk, dv (each may be NULL). */
/* Hk: the key and value heads, H a multiple of them (grouped-query: query
 * head h reads key head h / (H / Hk)) */
/* copies: the 16-bit copies the node's unfused twin reads
 * (ts_attention_copies' which bits, of type copy_dtype; 0: none), which
 * the pass then reads and rounds as the twin does (attention.c) */
typedef struct ts_attn_geom {
    int64_t B, H, T, S, D, Dv, Hk;
    float scale;
    const int32_t *mask;
    int64_t ms[4];
    unsigned copies;
    ts_dtype copy_dtype;
} ts_attn_geom;
size_t ts_attention_workspace(const ts_attn_geom *g, int threads);
/* sums: the twin's summaries to take (backend.h's ts_att_sums; NULL: none;
 * the f32 form only: under 16-bit copies the executor runs the twin) */
void ts_attention_forward(ts_pool *p, float *ws, float *out, float *lse, const float *q, const float *k, const float *v, const ts_attn_geom *g,
                          const struct ts_att_sums *sums);
void ts_attention_backward(ts_pool *p, float *ws, float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                           const float *v, const float *out, const float *lse, const ts_attn_geom *g, unsigned store);

/* ---- cross entropy of logits [rows, V] against labels [rows], the mean
 * over rows whose label is not `ignore` (all ignored: 0); probs [rows, V]
 * kept for backward */
void ts_ce_forward(ts_pool *p, float *out, float *probs, const float *logits, const int32_t *labels, int64_t rows, int64_t V,
                   bool has_ignore, int32_t ignore);
void ts_ce_backward(float *dlogits, const float *dout, const float *probs, const int32_t *labels, int64_t rows, int64_t V,
                    bool has_ignore, int32_t ignore);

#endif
