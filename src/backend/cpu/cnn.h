/* cnn.h -- kernels of convolutional networks: conv2d (im2col + GEMM, and a
 * direct loop kept as the test oracle), pooling, batch norm, the dropout
 * mask, tanh and sigmoid. Same conventions as kernels.h: outputs first,
 * backward kernels ACCUMULATE into input gradients (NULL = not wanted). */
#ifndef TS_CNN_H
#define TS_CNN_H

#include "backend/conv3d_math.h"
#include "backend/pool.h"

/* Geometry of a conv or pooling window over NCHW. Padding at the bottom and
 * right is implied by OH, OW. */
typedef struct ts_conv_geom {
    int64_t N, C, H, W;   /* input */
    int64_t OC, OH, OW;   /* output (pooling: OC = C) */
    int64_t KH, KW;       /* window */
    int64_t SH, SW;       /* stride */
    int64_t PT, PL;       /* padding at the top and left */
    int64_t PB, PR;       /* and at the bottom and right (pooling's divisor) */
    int64_t DH, DW;       /* dilation (pooling: 1) */
    int64_t groups;       /* conv only */
} ts_conv_geom;

/* Workspace floats conv needs on a pool of `threads`: per thread (at most
 * N) the columns of a chunk of one sample and partial gradients
 * OC*C/groups*KH*KW + OC; or the input gradient's convolution (its turned
 * weights and dy's columns). From the shapes alone: N, C, H, W, OC, OH,
 * OW, KH, KW, groups (not the strides, padding or dilation). */
size_t ts_conv2d_workspace(const ts_conv_geom *g, int threads);
/* What a convolution's output pass does after y = conv + b, where the ops
 * that follow it are fused (NULL fields: none): a residual Add, s = y + res
 * (res of y's shape), written to sum (NULL: not kept); then a Relu,
 * max(0, s) (of y where res is NULL) written to relu, as the Add and the
 * Relu compute them (the same bits). sum and relu may each be y, relu may
 * be sum or res, sum may be res: each output is written after the one
 * before it, so the last one holds there. Otherwise none overlaps another
 * or the convolution's inputs. */
typedef struct ts_conv_tail {
    const float *res;
    float *sum;
    float *relu;
    /* the output's plain stats a watch asks (ts_kctx.sums_out), one
     * ts_stats_sums per sample, summed where the forward's path takes a
     * sample whole (the im2col slots: each sample's output right after its
     * product); the other paths leave them (the caller checks the counts).
     * NULL: not wanted. */
    struct ts_stats_sums *sums;
} ts_conv_tail;

/* y[N,OC,OH,OW] = x[N,C,H,W] (*) w[OC,C/groups,KH,KW] + b[OC] (b may be NULL);
 * tail (NULL: none): the fused Add and Relu that follow it */
void ts_conv2d_forward(ts_pool *p, float *ws, float *y, const float *x, const float *w, const float *b, const ts_conv_geom *g,
                       const ts_conv_tail *tail);
/* The forward pass of an inference model: a 3x3 convolution with stride 1,
 * dilation 1, one group and enough work through Winograd's F(m x m, 3x3)
 * (ts_conv2d_winograd_tile says m: 4, 2, or 0 for none), 4 or 2.25 times
 * fewer multiply-adds; with a cache, one of few taps a position (C*KH*KW
 * at most 160, at least 1024 output positions: a 7x7 stem) packed straight
 * from the input into register blocks, without im2col; any other as
 * ts_conv2d_forward but with the bias written before the product adds to
 * it (the outputs differ from ts_conv2d_forward's by rounding).
 * cache (NULL: none): ts_conv2d_cache_floats floats, zeroed before the
 * first call, that keep the weights in Winograd's domain (or the packed
 * blocks' layout) from call to
 * call: made again whenever `key` differs from the call that made them, so
 * the caller gives a key that changes whenever w's values may have (an
 * inference model: the graph's values_gen). Kept, they pay with fewer
 * tiles: the tile m depends on whether there is a cache. 0 floats: this
 * convolution keeps nothing. */
int ts_conv2d_winograd_tile(const ts_conv_geom *g, bool cached);
size_t ts_conv2d_cache_floats(const ts_conv_geom *g);
void ts_conv2d_infer(ts_pool *p, float *ws, float *y, const float *x, const float *w, const float *b, const ts_conv_geom *g, float *cache,
                     uint64_t key, const ts_conv_tail *tail);
/* dx += ..., dw += ..., db += ... (each may be NULL); dx_store: dx = ...
 * (its old values not read) */
void ts_conv2d_backward(ts_pool *p, float *ws, float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                        const ts_conv_geom *g, bool dx_store);
/* The transpose of the convolution of geometry g (its input is y [N, C, H,
 * W], its output x [N, OC, OH, OW], w [OC, C/groups, KH, KW]): y =
 * conv^T(x, w) + b[C] (b may be NULL), the convolution's input gradient;
 * backward: dx += conv(dy, w), dw += the convolution's weight gradient
 * with x as its output's, db += sum dy (each may be NULL). The workspace:
 * ts_conv_transpose2d_workspace. */
size_t ts_conv_transpose2d_workspace(const ts_conv_geom *g, int threads);
void ts_conv_transpose2d_forward(ts_pool *p, float *ws, float *y, const float *x, const float *w, const float *b, const ts_conv_geom *g);
void ts_conv_transpose2d_backward(ts_pool *p, float *ws, float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                                  const ts_conv_geom *g, bool dx_store);
/* The 3-D convolution and its transpose (backend/conv3d_math.h: one
 * element a call, a direct gather summed in double): g is the
 * convolution's geometry, the transpose's forward pass its input gradient. */
void ts_conv3d_forward(ts_pool *p, float *y, const float *x, const float *w, const float *b, const ts_conv3d_geom *g);
void ts_conv3d_backward(ts_pool *p, float *dx, float *dw, float *db, const float *dy, const float *x, const float *w, const ts_conv3d_geom *g);
void ts_conv_transpose3d_forward(ts_pool *p, float *y, const float *x, const float *w, const float *b, const ts_conv3d_geom *g);
void ts_conv_transpose3d_backward(ts_pool *p, float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                                  const ts_conv3d_geom *g);
/* The direct seven-loop convolution in double: the oracle of the tests. */
void ts_conv2d_naive_forward(float *y, const float *x, const float *w, const float *b, const ts_conv_geom *g);
void ts_conv2d_naive_backward(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w, const ts_conv_geom *g);

/* Max pooling; idx[N,C,OH,OW] keeps each window's winner (its index within
 * the input plane, -1 for a window of padding only) for the backward pass;
 * NULL: the values alone (an inference model's). sums non-NULL: y's plain
 * stats added to sums[n] a sample at a time, where there are as many
 * samples as threads (else none: the caller sums y itself). */
void ts_max_pool2d_forward(ts_pool *p, float *y, int32_t *idx, const float *x, const ts_conv_geom *g, struct ts_stats_sums *sums);
void ts_max_pool2d_backward(ts_pool *p, float *dx, const float *dy, const int32_t *idx, const ts_conv_geom *g);
/* out[q, o] = the winner idx[q, o] as a flat index into x: q*H*W + h*W + w,
 * or q*H*W + h + w*H (column_major); -1 where idx is -1. */
void ts_max_pool_flat_indices(float *out, const int32_t *idx, const ts_conv_geom *g, bool column_major);
/* Average pooling: divided by the window's taps inside the padded input
 * (include_pad) or inside the input. */
void ts_avg_pool2d_forward(ts_pool *p, float *y, const float *x, const ts_conv_geom *g, bool include_pad);
void ts_avg_pool2d_backward(ts_pool *p, float *dx, const float *dy, const ts_conv_geom *g, bool include_pad);

/* Batch norm over axis 1 of x viewed as [N, C, inner]. stats[2C] (mean,
 * invstd) is kept for backward. batch: normalise with batch statistics (and
 * update the running buffers when update is set), else with the running ones.
 * relu: also max(0, y) there, as the Relu computes it, in the output pass (a
 * Relu that follows: ts_kctx.relu_out; it may be y, which then holds the
 * Relu's values), else NULL. */
void ts_batch_norm_forward(ts_pool *p, float *y, float *stats, const float *x, const float *w, const float *b, float *run_mean,
                           float *run_var, int64_t N, int64_t C, int64_t inner, float eps, float momentum, bool batch, bool update,
                           float *relu);
/* The same, summing y's values (sy) and the Relu's (sr, with sy and relu)
 * for the plain stats a watch asks (ts_kctx.sums_out, sums_relu) as each
 * row is written: one ts_stats_sums per channel, added to in row order, so
 * the sums do not depend on the threads (NULL: not wanted). */
struct ts_stats_sums;
void ts_batch_norm_forward_summed(ts_pool *p, float *y, float *stats, const float *x, const float *w, const float *b, float *run_mean,
                                  float *run_var, int64_t N, int64_t C, int64_t inner, float eps, float momentum, bool batch, bool update,
                                  float *relu, struct ts_stats_sums *sy, struct ts_stats_sums *sr);
/* dx += ... (dx_store: dx = ...), dw += ..., db += ... (each may be NULL) */
void ts_batch_norm_backward(ts_pool *p, float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                            const float *stats, int64_t N, int64_t C, int64_t inner, bool batch, bool dx_store);

/* mask[n] = 0 with probability p, else 1/(1-p); a pure function of
 * (seed, iteration, n). */
void ts_dropout_mask(ts_pool *p, float *mask, int64_t n, float prob, uint64_t seed, uint64_t iteration);
/* out[n] uniform in [0, 1): element i the high 24 bits of the same draw
 * as dropout's, from its own key (seed and iteration) */
void ts_random_uniform_fill(ts_pool *p, float *out, int64_t n, uint64_t seed, uint64_t iteration);

/* y = tanh(x);  dx += dy * (1 - y^2) */
void ts_tanh_forward(ts_pool *p, float *y, const float *x, int64_t n);
void ts_tanh_backward(ts_pool *p, float *dx, const float *dy, const float *y, int64_t n);
/* y = 1 / (1 + exp(-x));  dx += dy * y * (1 - y) */
void ts_sigmoid_forward(ts_pool *p, float *y, const float *x, int64_t n);
void ts_sigmoid_backward(ts_pool *p, float *dx, const float *dy, const float *y, int64_t n);

#endif
