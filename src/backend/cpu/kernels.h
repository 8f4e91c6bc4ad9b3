/* kernels.h -- forward/backward pairs. Argument order is fixed: outputs
 * first, then inputs, then sizes; backward kernels ACCUMULATE into the input
 * gradients (din += ...), so a tensor used twice sums its gradients. */
#ifndef TS_KERNELS_H
#define TS_KERNELS_H

#include "backend/pool.h"

/* out[n] = a[n] (+|-|*|/) b[n % nb]   (b broadcasts over a's leading dims) */
void ts_binary_forward(ts_pool *p, int kind, float *out, const float *a, const float *b, int64_t n, int64_t nb);
/* da[n] += ..., db[nb] += sum over repeats of ... (da or db may be NULL) */
void ts_binary_backward(ts_pool *p, int kind, float *da, float *db, const float *dout, const float *a,
                        const float *b, int64_t n, int64_t nb);
/* the same where bit 0 (da) or bit 1 (db) of store says that gradient is
 * stored (every value written), not added to: the first writer of it */
void ts_binary_backward_store(ts_pool *p, int kind, float *da, float *db, const float *dout, const float *a,
                              const float *b, int64_t n, int64_t nb, unsigned store);
enum { TS_BIN_ADD = 0, TS_BIN_SUB, TS_BIN_MUL, TS_BIN_DIV };

/* Sums over the rows of a [rows, cols] operand, one or two at a time (a
 * bias's gradient; layer norm's weight and bias gradients): the rows in
 * TS_SUM_PARTS fixed parts, each part's sums formed by fn over its own
 * rows (split over the pool, each thread reading the rows it has in
 * cache), then out[j] (+)= part 0 + part 1 + ... in order. The parts
 * depend only on rows, so any thread count gives the same bits. fn(ctx,
 * r0, r1, c0, c1, acc0, acc1) adds rows [r0, r1), columns [c0, c1) into
 * acc0[0 .. c1 - c0) (and acc1 where out1 is set), which start at 0; it
 * may also write elementwise results of those rows and columns. store
 * bit 0 (out0) or bit 1 (out1): written, not added to. */
enum { TS_SUM_PARTS = 8 };
typedef void (*ts_rows_sum_fn)(void *ctx, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float *acc0, float *acc1);
void ts_sum_rows(ts_pool *p, int64_t rows, int64_t cols, ts_rows_sum_fn fn, void *ctx, float *out0, float *out1, unsigned store);

/* out[n] = s * x[n];  dx[n] += s * dout[n] */
void ts_scale_forward(ts_pool *p, float *out, const float *x, float s, int64_t n);
void ts_scale_backward(ts_pool *p, float *dx, const float *dout, float s, int64_t n);
/* out[n] = max(x, 0), NaN kept;  dx[n] += dout * !(out <= 0) (_store: dx[n] =, the
 * gradient's first writer, so that it needs no zeroing first) */
void ts_relu_forward(ts_pool *p, float *out, const float *x, int64_t n);
void ts_relu_backward(ts_pool *p, float *dx, const float *dout, const float *out, int64_t n);
void ts_relu_backward_store(ts_pool *p, float *dx, const float *dout, const float *out, int64_t n);
/* out[n] = log(x);  dx[n] += dout / x */
void ts_log_forward(ts_pool *p, float *out, const float *x, int64_t n);
void ts_log_backward(ts_pool *p, float *dx, const float *dout, const float *x, int64_t n);
/* out[n] = x[n];  dx[n] += dout[n] */
void ts_copy_forward(ts_pool *p, float *out, const float *x, int64_t n);
void ts_copy_backward(ts_pool *p, float *dx, const float *dout, int64_t n);
/* softmax family over the middle axis of [outer, dim, inner] */
void ts_log_softmax_forward(float *out, const float *x, int64_t outer, int64_t dim, int64_t inner);
void ts_log_softmax_backward(float *dx, const float *dout, const float *out, int64_t outer, int64_t dim, int64_t inner);
void ts_softmax_forward(float *out, const float *x, int64_t outer, int64_t dim, int64_t inner);
void ts_softmax_backward(float *dx, const float *dout, const float *out, int64_t outer, int64_t dim, int64_t inner);
/* out[] = -mean_b logp[b, labels[b]]  (logp [B,C]) */
void ts_nll_forward(float *out, const float *logp, const int32_t *labels, int64_t B, int64_t C);
void ts_nll_backward(float *dlogp, const float *dout, const int32_t *labels, int64_t B, int64_t C);
/* out[] = sum (or mean) of x[n];  dx[n] += dout (/ n) */
void ts_reduce_forward(float *out, const float *x, int64_t n, bool mean);
void ts_reduce_backward(ts_pool *p, float *dx, const float *dout, int64_t n, bool mean);
/* dst[n] += src[n] */
void ts_accumulate(ts_pool *p, float *dst, const float *src, int64_t n);
/* dst[n] = 0 (a gradient before its first contribution) */
void ts_zero(ts_pool *p, float *dst, int64_t n);

#endif
