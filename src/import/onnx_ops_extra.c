/* onnx_ops_extra.c -- ONNX ops of the newer opsets composed at import from
 * graph ops that have gradients and device kernels, as ONNX's reference
 * computes them (onnx_ops_extra.h). Shapes are static, so a recurrence is
 * unrolled over its steps, as onnx_rnn.c does for LSTM. */
#include "import/onnx_ops_extra.h"

#include <math.h>
#include <stdio.h>

/* The graph's first error when a builder returned NULL, else TS_OK. */
static ts_status graph_status(ts_graph *g, const ts_tensor *t) {
    if (t) return TS_OK;
    ts_status st = ts_graph_status(g);
    return st ? st : ts_error(TS_ERR_INTERNAL, "a graph builder returned NULL");
}

/* ---------------------------------------------------- CausalConvWithState */

ts_status ts_onnx_causal_conv(ts_graph *g, ts_tensor *x, ts_tensor *w, ts_tensor *bias, ts_tensor *past, bool silu, ts_tensor *out[2]) {
    out[0] = out[1] = NULL;
    if (x->shape.ndim != 3 || w->shape.ndim != 3 || w->shape.d[0] != x->shape.d[1] || w->shape.d[1] != 1)
        return ts_error(TS_ERR_SHAPE, "takes an input [B,C,L] and a depthwise weight [C,1,K]; they are %d-D and %d-D with %lld and %lld "
                        "channels", x->shape.ndim, w->shape.ndim, (long long)(x->shape.ndim > 1 ? x->shape.d[1] : 0), (long long)w->shape.d[0]);
    int64_t B = x->shape.d[0], C = x->shape.d[1], L = x->shape.d[2], K = w->shape.d[2];
    if (bias && (bias->shape.ndim != 1 || bias->shape.d[0] != C))
        return ts_error(TS_ERR_SHAPE, "bias must be [%lld], one per channel", (long long)C);
    if (past && (past->shape.ndim != 3 || past->shape.d[0] != B || past->shape.d[1] != C || past->shape.d[2] != K - 1))
        return ts_error(TS_ERR_SHAPE, "past_state must be [%lld,%lld,%lld] ([B,C,K-1])", (long long)B, (long long)C, (long long)(K - 1));
    /* the causal sequence: the past (or K-1 zeros) then x */
    ts_tensor *seq = x;
    if (K > 1) {
        int64_t pads[6] = {0, 0, K - 1, 0, 0, 0};
        seq = past ? ts_concat(g, (ts_tensor *[]){past, x}, 2, 2) : ts_pad(g, x, pads, TS_PAD_CONSTANT, 0.0f);
    }
    /* y[:, c, t] = sum_j w[c, 0, j] seq[:, c, t + j] */
    ts_tensor *y = NULL;
    for (int64_t j = 0; j < K; j++) {
        ts_tensor *wj = ts_reshape(g, ts_slice(g, w, 2, j, 1), 2, (int64_t[]){C, 1});
        ts_tensor *term = ts_mul(g, ts_slice(g, seq, 2, j, L), wj);
        y = y ? ts_add(g, y, term) : term;
    }
    if (bias) y = ts_add(g, y, ts_reshape(g, bias, 2, (int64_t[]){C, 1}));
    if (silu) y = ts_mul(g, y, ts_sigmoid(g, y));
    ts_status st = graph_status(g, y);
    if (st) return st;
    out[0] = y;
    if (K > 1) {
        out[1] = ts_slice(g, seq, 2, L, K - 1);
        if ((st = graph_status(g, out[1]))) return st;
    }
    return TS_OK;
}

/* -------------------------------------------------------- LinearAttention */

/* [B,T,H*D] as [B,H,T,D] */
static ts_tensor *heads_first(ts_graph *g, ts_tensor *x, int64_t heads) {
    const int64_t *d = x->shape.d;
    static const int perm[4] = {0, 2, 1, 3};
    return ts_permute(g, ts_reshape(g, x, 4, (int64_t[]){d[0], d[1], heads, d[2] / heads}), perm);
}

ts_status ts_onnx_linear_attention_build(ts_graph *g, const ts_onnx_linear_attention *a, ts_tensor *out[2]) {
    out[0] = out[1] = NULL;
    ts_tensor *q = a->q, *k = a->k, *v = a->v;
    if (q->shape.ndim != 3 || k->shape.ndim != 3 || v->shape.ndim != 3)
        return ts_error(TS_ERR_SHAPE, "query, key and value must be 3-D [B,T,H*D]; they are %d-D, %d-D and %d-D", q->shape.ndim, k->shape.ndim,
                        v->shape.ndim);
    int64_t Hq = a->q_heads, Hkv = a->kv_heads;
    if (Hq < 1 || Hkv < 1 || Hq % Hkv)
        return ts_error(TS_ERR_FORMAT, "q_num_heads (%lld) must be a positive multiple of kv_num_heads (%lld)", (long long)Hq, (long long)Hkv);
    int64_t B = q->shape.d[0], T = q->shape.d[1];
    if (q->shape.d[2] % Hq || k->shape.d[2] % Hkv || v->shape.d[2] % Hkv)
        return ts_error(TS_ERR_SHAPE, "the last dims of query (%lld), key (%lld) and value (%lld) must split into %lld, %lld and %lld heads",
                        (long long)q->shape.d[2], (long long)k->shape.d[2], (long long)v->shape.d[2], (long long)Hq, (long long)Hkv,
                        (long long)Hkv);
    int64_t dk = q->shape.d[2] / Hq, dv = v->shape.d[2] / Hkv, G = Hq / Hkv;
    for (int i = 0; i < 2; i++) {
        const ts_tensor *o = i ? v : k;
        if (o->shape.d[0] != B || o->shape.d[1] != T || (!i && o->shape.d[2] != Hkv * dk))
            return ts_error(TS_ERR_SHAPE, "%s must be [%lld,%lld,%lld] as query and kv_num_heads give", i ? "value" : "key", (long long)B,
                            (long long)T, (long long)(i ? o->shape.d[2] : Hkv * dk));
    }
    bool gated = a->rule == TS_LINATT_GATED || a->rule == TS_LINATT_GATED_DELTA, delta = a->rule == TS_LINATT_DELTA || a->rule == TS_LINATT_GATED_DELTA;
    if (gated != (a->decay != NULL) || delta != (a->beta != NULL))
        return ts_error(TS_ERR_FORMAT, "update_rule %s decay and %s beta (gated rules take decay, delta rules beta)",
                        gated ? "needs" : "takes no", delta ? "needs" : "takes no");
    if (a->past && (a->past->shape.ndim != 4 || a->past->shape.d[0] != B || a->past->shape.d[1] != Hkv || a->past->shape.d[2] != dk ||
                    a->past->shape.d[3] != dv))
        return ts_error(TS_ERR_SHAPE, "past_state must be [%lld,%lld,%lld,%lld] ([B,H_kv,d_k,d_v])", (long long)B, (long long)Hkv, (long long)dk,
                        (long long)dv);
    ts_tensor *decay = NULL, *beta = NULL; /* [B,Hkv,T,dk or 1], [B,Hkv or 1,T,1] */
    if (a->decay) {
        const ts_shape *s = &a->decay->shape;
        if (s->ndim != 3 || s->d[0] != B || s->d[1] != T || (s->d[2] != Hkv && s->d[2] != Hkv * dk))
            return ts_error(TS_ERR_SHAPE, "decay must be [%lld,%lld,%lld] or [%lld,%lld,%lld] (per key dim or per head)", (long long)B, (long long)T,
                            (long long)(Hkv * dk), (long long)B, (long long)T, (long long)Hkv);
        decay = ts_exp(g, heads_first(g, a->decay, Hkv));
    }
    if (a->beta) {
        const ts_shape *s = &a->beta->shape;
        if (s->ndim != 3 || s->d[0] != B || s->d[1] != T || (s->d[2] != Hkv && s->d[2] != 1))
            return ts_error(TS_ERR_SHAPE, "beta must be [%lld,%lld,%lld] or [%lld,%lld,1]", (long long)B, (long long)T, (long long)Hkv, (long long)B,
                            (long long)T);
        beta = heads_first(g, a->beta, s->d[2]);
    }
    float scale = a->scale != 0.0f ? a->scale : 1.0f / sqrtf((float)dk);
    ts_tensor *q4 = heads_first(g, q, Hq), *k4 = heads_first(g, k, Hkv), *v4 = heads_first(g, v, Hkv);
    ts_tensor *S = a->past, **outs = ts_malloc((size_t)T * sizeof *outs);
    if (!outs) return ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory unrolling %lld steps", (long long)T);
    for (int64_t t = 0; t < T; t++) {
        ts_tensor *kt = ts_slice(g, k4, 2, t, 1), *vt = ts_slice(g, v4, 2, t, 1); /* [B,Hkv,1,dk], [B,Hkv,1,dv] */
        if (gated && S) S = ts_mul(g, S, ts_transpose(g, ts_slice(g, decay, 2, t, 1), 2, 3)); /* rows of S by exp(g_t) */
        if (delta) {
            if (S) vt = ts_sub(g, vt, ts_matmul_batched(g, kt, S, 0, 0)); /* v_t - S^T k_t */
            vt = ts_mul(g, vt, ts_slice(g, beta, 2, t, 1));
        }
        ts_tensor *kv = ts_matmul_batched(g, kt, vt, 1, 0); /* k_t (x) v_t: [B,Hkv,dk,dv] */
        S = S ? ts_add(g, S, kv) : kv;
        /* each kv head's state read by its G query heads (heads kv*G .. kv*G+G-1) */
        ts_tensor *qt = ts_reshape(g, ts_slice(g, q4, 2, t, 1), 4, (int64_t[]){B, Hkv, G, dk});
        outs[t] = ts_reshape(g, ts_scale(g, ts_matmul_batched(g, qt, S, 0, 0), scale), 4, (int64_t[]){B, Hq, 1, dv});
    }
    static const int perm[4] = {0, 2, 1, 3};
    ts_tensor *o = T == 1 ? outs[0] : ts_concat(g, outs, (int)T, 2);
    ts_free(outs);
    o = ts_reshape(g, ts_permute(g, o, perm), 3, (int64_t[]){B, T, Hq * dv});
    ts_status st = graph_status(g, o);
    if (st) return st;
    out[0] = o;
    out[1] = S;
    return TS_OK;
}

/* ------------------------------------------------------------- GridSample */

/* A scalar f32 constant named after `what` in the current scope. */
static ts_tensor *scalar(ts_graph *g, const char *what, float v) {
    char *name = ts_graph_op_output_name(g, what);
    ts_tensor *t = name ? ts_constant(g, name, &(ts_array){.dtype = TS_F32, .ndim = 0, .data = &v}) : NULL;
    ts_free(name);
    return t;
}

static ts_tensor *add_c(ts_graph *g, ts_tensor *x, float v) { return v == 0.0f ? x : ts_add(g, x, scalar(g, "Offset", v)); }

/* x clamped into [lo, hi] */
static ts_tensor *clamp_c(ts_graph *g, ts_tensor *x, float lo, float hi) {
    return ts_binary(g, "Min", ts_binary(g, "Max", x, scalar(g, "Low", lo)), scalar(g, "High", hi));
}

/* x reflected by the near border until it lies in [lo, hi] (ONNX's
 * GridSample reflect; x itself inside) */
static ts_tensor *reflect_c(ts_graph *g, ts_tensor *x, float lo, float hi) {
    float range = hi - lo;
    if (range <= 0.0f) return add_c(g, ts_scale(g, x, 0.0f), lo); /* one position: every x reflects onto it */
    ts_tensor *below = ts_binary(g, "Less", x, scalar(g, "Low", lo)), *above = ts_binary(g, "Greater", x, scalar(g, "High", hi));
    ts_tensor *dist = ts_where(g, below, add_c(g, ts_scale(g, x, -1.0f), lo), add_c(g, x, -hi)); /* past the border */
    ts_tensor *n = ts_unary(g, "Floor", ts_scale(g, dist, 1.0f / range), 0.0f, 0.0f);
    ts_tensor *r = ts_sub(g, dist, ts_scale(g, n, range));
    ts_tensor *odd = ts_binary(g, "Mod", n, scalar(g, "Two", 2.0f));
    ts_tensor *from_lo = add_c(g, r, lo), *from_hi = add_c(g, ts_scale(g, r, -1.0f), hi);
    return ts_where(g, below, ts_where(g, odd, from_hi, from_lo), ts_where(g, above, ts_where(g, odd, from_lo, from_hi), x));
}

typedef struct gs_tap {
    ts_tensor *index;  /* [N,1,P] f32: the tap's index along its dim, in range */
    ts_tensor *weight; /* [N,1,P] f32, times 0 where a zeros-padded tap falls outside */
} gs_tap;

/* The taps' weights of cubic convolution (Keys, A = -0.75) at t in [0, 1). */
static ts_tensor *cubic_weight(ts_graph *g, ts_tensor *t, int k) {
    const float A = -0.75f;
    /* |s| for the tap at offset k - 1: t + 1, t, 1 - t, 2 - t */
    ts_tensor *s = k == 0 ? add_c(g, t, 1.0f) : k == 1 ? t : add_c(g, ts_scale(g, t, -1.0f), k == 2 ? 1.0f : 2.0f);
    if (k == 1 || k == 2) /* ((A + 2) s - (A + 3)) s^2 + 1 */
        return add_c(g, ts_mul(g, add_c(g, ts_scale(g, s, A + 2.0f), -(A + 3.0f)), ts_mul(g, s, s)), 1.0f);
    /* ((A s - 5A) s + 8A) s - 4A */
    return add_c(g, ts_mul(g, add_c(g, ts_mul(g, add_c(g, ts_scale(g, s, A), -5.0f * A), s), 8.0f * A), s), -4.0f * A);
}

ts_status ts_onnx_grid_sample(ts_graph *g, ts_tensor *x, ts_tensor *grid, int mode, int padding, bool align_corners, ts_tensor **out) {
    *out = NULL;
    int k = x->shape.ndim - 2;
    if (k < 1 || k > 3 || grid->shape.ndim != k + 2 || grid->shape.d[k + 1] != k || grid->shape.d[0] != x->shape.d[0])
        return ts_error(TS_ERR_SHAPE, "takes X [N,C,D1..Dk] (k 1 to 3) and a grid [N,O1..Ok,k] of the same N; they are %d-D and %d-D",
                        x->shape.ndim, grid->shape.ndim);
    int64_t N = x->shape.d[0], C = x->shape.d[1], F = 1, P = 1, stride[3];
    for (int i = k - 1; i >= 0; i--) {
        stride[i] = F;
        F *= x->shape.d[2 + i];
        P *= grid->shape.d[1 + i];
    }
    if (F >= (int64_t)1 << 24)
        return ts_error(TS_ERR_UNSUPPORTED, "an input of %lld positions per channel is past 2^24, where the positions computed in f32 stop being exact",
                        (long long)F);
    int m = mode == TS_GRID_NEAREST ? 1 : mode == TS_GRID_LINEAR ? 2 : 4;
    gs_tap taps[3][4];
    ts_tensor *g2 = ts_reshape(g, grid, 3, (int64_t[]){N, P, k});
    for (int i = 0; i < k; i++) {
        float d = (float)x->shape.d[2 + i], lo = align_corners ? 0.0f : -0.5f, hi = align_corners ? d - 1.0f : d - 0.5f;
        /* the grid's last axis is (x, y, z): the last spatial dim first */
        ts_tensor *c = ts_reshape(g, ts_slice(g, g2, 2, k - 1 - i, 1), 3, (int64_t[]){N, 1, P});
        c = align_corners ? add_c(g, ts_scale(g, c, (d - 1.0f) / 2.0f), (d - 1.0f) / 2.0f) : add_c(g, ts_scale(g, c, d / 2.0f), (d - 1.0f) / 2.0f);
        if (mode == TS_GRID_NEAREST) c = ts_unary(g, "Round", c, 0.0f, 0.0f); /* half to even */
        if (padding == TS_GRID_BORDER) c = clamp_c(g, c, 0.0f, d - 1.0f);
        if (padding == TS_GRID_REFLECTION) c = reflect_c(g, c, lo, hi);
        ts_tensor *base = mode == TS_GRID_NEAREST ? c : ts_unary(g, "Floor", c, 0.0f, 0.0f);
        ts_tensor *t = mode == TS_GRID_NEAREST ? NULL : ts_sub(g, c, base); /* the gradient reaches the grid here */
        for (int j = 0; j < m; j++) {
            ts_tensor *idx = add_c(g, base, mode == TS_GRID_CUBIC ? (float)(j - 1) : (float)j), *w;
            w = mode == TS_GRID_NEAREST ? NULL : mode == TS_GRID_LINEAR ? (j ? t : add_c(g, ts_scale(g, t, -1.0f), 1.0f)) : cubic_weight(g, t, j);
            if (padding == TS_GRID_ZEROS) { /* a tap outside reads 0 */
                ts_tensor *in = ts_mul(g, ts_binary(g, "GreaterOrEqual", idx, scalar(g, "Low", 0.0f)),
                                       ts_binary(g, "LessOrEqual", idx, scalar(g, "High", d - 1.0f)));
                w = w ? ts_mul(g, w, in) : in;
            } else if (padding == TS_GRID_REFLECTION) {
                idx = reflect_c(g, idx, lo, hi); /* an integer reflects onto an integer */
            }
            taps[i][j] = (gs_tap){clamp_c(g, idx, 0.0f, d - 1.0f), w};
        }
    }
    /* every combination of one tap per dim: data[sum idx_i stride_i] times the product of the weights */
    ts_tensor *xf = ts_reshape(g, x, 3, (int64_t[]){N, C, F}), *zeros = NULL, *y = NULL;
    {
        char *name = ts_graph_op_output_name(g, "Zero");
        float *z = ts_calloc((size_t)C, sizeof *z);
        zeros = name && z ? ts_constant(g, name, &(ts_array){.dtype = TS_F32, .ndim = 3, .shape = {1, C, 1}, .data = z}) : NULL;
        ts_free(name);
        ts_free(z);
        if (!zeros) return ts_graph_status(g) ? ts_graph_status(g) : ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory");
    }
    int combos = 1;
    for (int i = 0; i < k; i++) combos *= m;
    for (int c = 0; c < combos; c++) {
        ts_tensor *flat = NULL, *w = NULL;
        for (int i = 0, rest = c; i < k; i++, rest /= m) {
            const gs_tap *tp = &taps[i][rest % m];
            ts_tensor *part = ts_scale(g, tp->index, (float)stride[i]);
            flat = flat ? ts_add(g, flat, part) : part;
            if (tp->weight) w = w ? ts_mul(g, w, tp->weight) : tp->weight;
        }
        ts_tensor *idx = ts_unary(g, "CastIndex", ts_add(g, flat, zeros), 0.0f, (float)(F - 1)); /* [N,C,P] */
        ts_tensor *v = ts_gather_elements(g, xf, idx, 2);
        if (w) v = ts_mul(g, v, w);
        y = y ? ts_add(g, y, v) : v;
    }
    ts_shape os = {.ndim = k + 2, .d = {N, C}};
    for (int i = 0; i < k; i++) os.d[2 + i] = grid->shape.d[1 + i];
    y = ts_reshape(g, y, os.ndim, os.d);
    ts_status st = graph_status(g, y);
    if (!st) *out = y;
    return st;
}

/* ------------------------------------------------------------- AffineGrid */

ts_status ts_onnx_affine_grid(ts_graph *g, ts_tensor *theta, const int64_t *size, int n_size, bool align_corners, ts_tensor **out) {
    *out = NULL;
    int k = n_size - 2; /* spatial dims: 2 or 3 */
    if ((k != 2 && k != 3) || theta->shape.ndim != 3 || theta->shape.d[0] != size[0] || theta->shape.d[1] != k || theta->shape.d[2] != k + 1)
        return ts_error(TS_ERR_SHAPE, "takes theta [N,2,3] with size [N,C,H,W], or [N,3,4] with [N,C,D,H,W]; size has %d values and theta is %d-D",
                        n_size, theta->shape.ndim);
    int64_t P = 1;
    for (int i = 0; i < k; i++) {
        if (size[2 + i] < 1) return ts_error(TS_ERR_SHAPE, "size %lld of spatial dim %d is not positive", (long long)size[2 + i], i);
        P *= size[2 + i];
    }
    /* the homogeneous base grid [1,P,k+1]: (x, y[, z], 1), x along the last dim */
    float *base = ts_malloc((size_t)(P * (k + 1)) * sizeof *base);
    if (!base) return ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory for a base grid of %lld positions", (long long)P);
    for (int64_t p = 0; p < P; p++) {
        int64_t rest = p;
        for (int i = k - 1; i >= 0; i--) { /* i: spatial dim; component k-1-i */
            int64_t d = size[2 + i], j = rest % d;
            rest /= d;
            double step = align_corners ? (d > 1 ? 2.0 / (double)(d - 1) : 0.0) : 2.0 / (double)d;
            base[p * (k + 1) + (k - 1 - i)] = (float)(align_corners ? -1.0 + (double)j * step : -1.0 + step / 2 + (double)j * step);
        }
        base[p * (k + 1) + k] = 1.0f;
    }
    char *name = ts_graph_op_output_name(g, "BaseGrid");
    ts_tensor *b = name ? ts_constant(g, name, &(ts_array){.dtype = TS_F32, .ndim = 3, .shape = {1, P, k + 1}, .data = base}) : NULL;
    ts_free(name);
    ts_free(base);
    ts_shape os = {.ndim = k + 2, .d = {size[0]}};
    for (int i = 0; i < k; i++) os.d[1 + i] = size[2 + i];
    os.d[k + 1] = k;
    ts_tensor *y = b ? ts_reshape(g, ts_matmul_batched(g, b, theta, 0, 1), os.ndim, os.d) : NULL; /* base theta^T: [N,P,k] */
    ts_status st = graph_status(g, y);
    if (!st) *out = y;
    return st;
}

/* ----------------------------------------------------------------- Col2Im */

ts_status ts_onnx_col2im(ts_graph *g, ts_tensor *x, const int64_t img[2], const int64_t block[2], const int64_t strides[2], const int64_t pads[4],
                         const int64_t dil[2], ts_tensor **out) {
    *out = NULL;
    int64_t kk = block[0] * block[1], L[2];
    for (int i = 0; i < 2; i++) {
        if (img[i] < 1 || block[i] < 1 || strides[i] < 1 || dil[i] < 1 || pads[i] < 0 || pads[2 + i] < 0)
            return ts_error(TS_ERR_FORMAT, "image_shape, block_shape, strides and dilations must be positive and pads not negative");
        int64_t span = img[i] + pads[i] + pads[2 + i] - dil[i] * (block[i] - 1) - 1;
        if (span < 0) return ts_error(TS_ERR_SHAPE, "a block of %lld (dilation %lld) does not fit the padded image's %lld", (long long)block[i],
                                      (long long)dil[i], (long long)(img[i] + pads[i] + pads[2 + i]));
        L[i] = span / strides[i] + 1;
    }
    if (x->shape.ndim != 3 || x->shape.d[1] % kk || x->shape.d[2] != L[0] * L[1])
        return ts_error(TS_ERR_SHAPE, "takes an input [N, C*%lld, %lld] (the block's %lld positions per channel, %lldx%lld blocks); it is %d-D",
                        (long long)kk, (long long)(L[0] * L[1]), (long long)kk, (long long)L[0], (long long)L[1], x->shape.ndim);
    int64_t N = x->shape.d[0], CK = x->shape.d[1], C = CK / kk;
    if (C > INT32_MAX || strides[0] > INT32_MAX || strides[1] > INT32_MAX || dil[0] > INT32_MAX || dil[1] > INT32_MAX || pads[0] > INT32_MAX ||
        pads[1] > INT32_MAX || pads[2] > INT32_MAX || pads[3] > INT32_MAX)
        return ts_error(TS_ERR_UNSUPPORTED, "a geometry past int32's range is not available");
    /* the transposed convolution, per channel (groups C), by the one-hot kernel that puts block position b at (b / KW, b % KW) */
    float *w = ts_calloc((size_t)(CK * kk), sizeof *w);
    if (!w) return ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory for a [%lld,1,%lld,%lld] kernel", (long long)CK, (long long)block[0], (long long)block[1]);
    for (int64_t ch = 0; ch < CK; ch++) w[ch * kk + ch % kk] = 1.0f;
    char *name = ts_graph_op_output_name(g, "Kernel");
    ts_tensor *k = name ? ts_constant(g, name, &(ts_array){.dtype = TS_F32, .ndim = 4, .shape = {CK, 1, block[0], block[1]}, .data = w}) : NULL;
    ts_free(name);
    ts_free(w);
    ts_conv_transpose2d_params p = {.stride_h = (int)strides[0], .stride_w = (int)strides[1], .pad_top = (int)pads[0], .pad_left = (int)pads[1],
                                    .pad_bottom = (int)pads[2], .pad_right = (int)pads[3], .dilation_h = (int)dil[0], .dilation_w = (int)dil[1],
                                    .groups = (int)C};
    ts_tensor *y = k ? ts_conv_transpose2d(g, ts_reshape(g, x, 4, (int64_t[]){N, CK, L[0], L[1]}), k, NULL, &p) : NULL;
    ts_status st = graph_status(g, y);
    if (!st && (y->shape.d[2] != img[0] || y->shape.d[3] != img[1]))
        st = ts_error(TS_ERR_SHAPE, "the blocks cover %lldx%lld, not the image's %lldx%lld (the last stride does not reach its border)",
                      (long long)y->shape.d[2], (long long)y->shape.d[3], (long long)img[0], (long long)img[1]);
    if (!st) *out = y;
    return st;
}

/* ---------------------------------------------------------- TensorScatter */

ts_status ts_onnx_tensor_scatter(ts_graph *g, ts_tensor *past, ts_tensor *update, ts_tensor *index, int axis, bool circular, ts_tensor **out) {
    *out = NULL;
    const ts_shape *ps = &past->shape, *us = &update->shape;
    bool fits = ps->ndim == us->ndim && axis > 0 && axis < ps->ndim;
    for (int i = 0; fits && i < ps->ndim; i++) fits = i == axis ? us->d[i] <= ps->d[i] : us->d[i] == ps->d[i];
    if (!fits)
        return ts_error(TS_ERR_SHAPE, "the update must have past_cache's shape but along axis %d (after the batch axis), where it is no longer", axis);
    if (index && (index->shape.ndim != 1 || index->shape.d[0] != ps->d[0]))
        return ts_error(TS_ERR_SHAPE, "write_indices must be [%lld], one per batch row", (long long)ps->d[0]);
    int64_t S = ps->d[axis], L = us->d[axis];
    /* rel = s - write_indices[b] over [B,1..S..1] (mod S when circular): where update position rel lands */
    ts_shape one = {.ndim = ps->ndim};
    for (int i = 0; i < ps->ndim; i++) one.d[i] = i == axis ? S : 1;
    float *pos = ts_malloc((size_t)S * sizeof *pos);
    if (!pos) return ts_error(TS_ERR_OUT_OF_MEMORY, "out of memory");
    for (int64_t s = 0; s < S; s++) pos[s] = (float)s;
    char *name = ts_graph_op_output_name(g, "Positions");
    ts_array pa = {.dtype = TS_F32, .ndim = one.ndim, .data = pos};
    for (int i = 0; i < one.ndim; i++) pa.shape[i] = one.d[i];
    ts_tensor *rel = name ? ts_constant(g, name, &pa) : NULL;
    ts_free(name);
    ts_free(pos);
    if (index) {
        ts_shape bs = {.ndim = ps->ndim};
        for (int i = 0; i < ps->ndim; i++) bs.d[i] = i ? 1 : ps->d[0];
        ts_tensor *at = index->dtype == TS_I32 ? ts_unary(g, "CastFloat", index, 0.0f, 0.0f) : index;
        rel = ts_sub(g, rel, ts_reshape(g, at, bs.ndim, bs.d));
        if (circular) rel = ts_binary(g, "Mod", rel, scalar(g, "Length", (float)S));
    }
    ts_tensor *written = ts_binary(g, "Less", rel, scalar(g, "Count", (float)L));
    if (index && !circular) written = ts_mul(g, written, ts_binary(g, "GreaterOrEqual", rel, scalar(g, "Zero", 0.0f)));
    /* the update at rel, on past's shape (rel broadcast by adding past times 0, which has no gradient here) */
    ts_tensor *at = ts_add(g, rel, ts_scale(g, ts_stop_gradient(g, past), 0.0f));
    ts_tensor *from = ts_gather_elements(g, update, ts_unary(g, "CastIndex", at, 0.0f, (float)(L - 1)), axis);
    ts_tensor *y = ts_where(g, written, from, past);
    ts_status st = graph_status(g, y);
    if (!st) *out = y;
    return st;
}

/* -------------------------------------------------------------------- Det */

ts_status ts_onnx_det(ts_graph *g, ts_tensor *x, ts_tensor **out) {
    *out = NULL;
    int r = x->shape.ndim;
    int64_t n = r >= 2 ? x->shape.d[r - 1] : 0;
    if (r < 2 || x->shape.d[r - 2] != n || n > 4)
        return ts_error(TS_ERR_UNSUPPORTED, "takes square matrices [...,M,M] of M up to 4 (a sum over the M! permutations); it has %d dims%s", r,
                        r >= 2 && x->shape.d[r - 2] == n ? ", M over 4: not available yet" : "");
    ts_tensor *e[4][4];
    for (int64_t i = 0; i < n; i++) {
        ts_tensor *row = ts_slice(g, x, r - 2, i, 1);
        for (int64_t j = 0; j < n; j++) e[i][j] = ts_slice(g, row, r - 1, j, 1);
    }
    /* Leibniz: the sum over permutations p of sign(p) prod_i x[i, p(i)], the permutations in Heap's order */
    int p[4] = {0, 1, 2, 3}, c[4] = {0}, sign = 1;
    ts_tensor *det = NULL;
    for (int i = 0;;) {
        ts_tensor *term = e[0][p[0]];
        for (int64_t k = 1; k < n; k++) term = ts_mul(g, term, e[k][p[k]]);
        det = !det ? term : sign > 0 ? ts_add(g, det, term) : ts_sub(g, det, term);
        while (i < n && c[i] >= i) c[i++] = 0; /* Heap's algorithm, iteratively: the next permutation by one swap */
        if (i >= n) break;
        int a = i % 2 ? c[i] : 0, t = p[a];
        p[a] = p[i];
        p[i] = t;
        sign = -sign;
        c[i]++;
        i = 0;
    }
    ts_shape s = {.ndim = r - 2};
    for (int d = 0; d < r - 2; d++) s.d[d] = x->shape.d[d];
    ts_tensor *y = ts_reshape(g, det, s.ndim, s.d);
    ts_status st = graph_status(g, y);
    if (!st) *out = y;
    return st;
}
