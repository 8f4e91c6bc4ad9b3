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

/* out[n] = s * x[n];  dx[n] += s * dout[n] */
void ts_scale_forward(ts_pool *p, float *out, const float *x, float s, int64_t n);
void ts_scale_backward(ts_pool *p, float *dx, const float *dout, float s, int64_t n);
/* out[n] = max(x, 0), NaN kept;  dx[n] += dout * !(out <= 0) */
void ts_relu_forward(ts_pool *p, float *out, const float *x, int64_t n);
void ts_relu_backward(ts_pool *p, float *dx, const float *dout, const float *out, int64_t n);
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
