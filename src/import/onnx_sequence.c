/* onnx_sequence.c -- sequence layers: Attention (masks, causal and sliding
 * windows, grouped-query heads, past keys and values), RotaryEmbedding,
 * LinearAttention, and LSTM, GRU and RNN (unrolled by onnx_rnn.c). */
#include "import/onnx_ops.h"
#include "import/onnx_rnn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* LSTM, GRU and RNN, unrolled over the sequence (onnx_rnn.c): initializers
 * as parameters under their names, other constants as their values; an
 * initial state (inputs 5 and 6) given as an initializer is a constant
 * state, not a parameter (exporters write zeros of the example's batch). */
ts_status ts_onnx_op_rnn(importer *im, node_io *io) {
    ts_onnx_rnn_node rn = {.node = im->node};
    ts_status st = TS_OK;
    if (io->n_in > TS_ONNX_RNN_INPUTS)
        return ts_onnx_node_error(im, TS_ERR_FORMAT, "has %d inputs; %s takes at most %d", io->n_in, im->node->op_type, TS_ONNX_RNN_INPUTS);
    for (int i = 0; i < io->n_in; i++) {
        value *v = io->in[i];
        if (v && (i == 5 || i == 6) && v->param && !v->t && (st = ts_onnx_decoded(im, v))) return st;
        if (v && is_const(v) && (!v->param || i == 5 || i == 6)) rn.c[i] = &v->c;
        else if (v && !(rn.t[i] = ts_onnx_as_tensor(im, v, &st))) return st;
    }
    ts_tensor *out[3];
    if ((st = ts_onnx_rnn(im->g, &rn, out))) return st;
    for (int i = 0; i < io->n_out && i < 3 && !st; i++)
        if (out[i]) st = ts_onnx_built(im, out[i], &io->out[i]);
    return st;
}

/* [q, kv]: i - j + shift, query i's offset past key j */
void ts_onnx_fill_offsets(const void *ctx, float *v) {
    const offsets_ctx *c = ctx;
    for (int64_t i = 0; i < c->q; i++)
        for (int64_t j = 0; j < c->kv; j++) v[i * c->kv + j] = (float)(i - j + c->shift);
}

/* Attention's masked-out bias: -1e30 where the mask takes a key away
 * (ONNX's -inf, finite so that a row with every key masked has a finite
 * softmax, set to 0 after as ONNX's), 0 elsewhere. */
#define ATTENTION_MASKED -1e30f

/* x [B,S,H*D] as [B,H,S,D] (Attention's 3-D inputs). */
static ts_tensor *heads_of(importer *im, ts_tensor *x, int64_t heads, ts_status *st) {
    const int64_t *d = x->shape.d;
    if (heads < 1 || d[2] % heads) {
        *st = ts_onnx_node_error(im, TS_ERR_SHAPE, "a hidden size of %lld does not split into %lld heads", (long long)d[2], (long long)heads);
        return NULL;
    }
    static const int perm[4] = {0, 2, 1, 3};
    return ts_permute(im->g, ts_reshape(im->g, x, 4, (int64_t[]){d[0], d[1], heads, d[2] / heads}), perm);
}

/* Attention (opset 23 on) composed of graph ops, as ONNX's reference
 * computes it: Q, K and V of 4 dims [B,H,S,D] or 3 ([B,S,H*D], with
 * q_num_heads and kv_num_heads); past_key and past_value concatenated
 * before K and V (present_key, present_value); grouped-query heads
 * repeated; softmax(softcap(scale QK^T) + bias) V, the bias the sum of the
 * attention mask (bool or additive, padded to the keys), the causal mask
 * (is_causal, bottom-right aligned after a past or at nonpad_kv_seqlen),
 * the sliding window (left_window_size, right_window_size) and the keys
 * past nonpad_kv_seqlen; a row with every key masked gives 0;
 * qk_matmul_output in each qk_matmul_output_mode. The softmax is in f32
 * whatever softmax_precision asks. */
ts_status ts_onnx_op_attention(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_graph *g = im->g;
    ts_tensor *q = as_f32(im, io->in[0], &st), *k = q ? as_f32(im, io->in[1], &st) : NULL, *v = k ? as_f32(im, io->in[2], &st) : NULL;
    if (!v) return st;
    int rank = q->shape.ndim, causal, mode;
    int64_t hq, hkv, left, right;
    if ((st = ts_onnx_attr_int32(im, "is_causal", 0, 0, 1, &causal)) || (st = ts_onnx_attr_int32(im, "qk_matmul_output_mode", 0, 0, 3, &mode)) ||
        (st = ts_onnx_attr_int(im, "q_num_heads", 0, 0, INT32_MAX, &hq)) || (st = ts_onnx_attr_int(im, "kv_num_heads", 0, 0, INT32_MAX, &hkv)) ||
        (st = ts_onnx_attr_int(im, "left_window_size", -1, -1, INT32_MAX, &left)) || (st = ts_onnx_attr_int(im, "right_window_size", -1, -1, INT32_MAX, &right)))
        return st;
    double softcap = ts_onnx_attr_f(im, "softcap", 0.0);
    if ((rank != 3 && rank != 4) || k->shape.ndim != rank || v->shape.ndim != rank)
        return ts_onnx_node_error(im, TS_ERR_SHAPE, "takes Q, K and V of 3 or 4 dimensions alike; they have %d, %d and %d", rank, k->shape.ndim, v->shape.ndim);
    if (rank == 3) {
        if (!hq || !hkv) return ts_onnx_node_error(im, TS_ERR_FORMAT, "3-D inputs need the attributes q_num_heads and kv_num_heads");
        if (!(q = heads_of(im, q, hq, &st)) || !(k = heads_of(im, k, hkv, &st)) || !(v = heads_of(im, v, hkv, &st))) return st;
    }
    for (int i = 4; i < 6; i++) { /* past_key, past_value: before K and V along the sequence */
        if (io->n_in <= i || !io->in[i]) continue;
        ts_tensor *past = as_f32(im, io->in[i], &st);
        if (!past) return st;
        ts_tensor *pair[2] = {past, i == 4 ? k : v};
        if (i == 4) k = ts_concat(g, pair, 2, 2);
        else v = ts_concat(g, pair, 2, 2);
        if (!k || !v) return ts_graph_status(g);
    }
    if ((io->n_in > 4 && io->in[4]) != (io->n_in > 5 && io->in[5])) return ts_onnx_node_error(im, TS_ERR_FORMAT, "past_key and past_value come together");
    ts_tensor *present_k = k, *present_v = v;
    int64_t B = q->shape.d[0], H = q->shape.d[1], Sq = q->shape.d[2], D = q->shape.d[3], Hk = k->shape.d[1], Skv = k->shape.d[2];
    int64_t past = io->n_in > 4 && io->in[4] ? shape_of(io->in[4])->d[2] : 0;
    if (H != Hk) { /* grouped-query: each of K's and V's heads repeated for its group of Q's */
        if (H % Hk || v->shape.d[1] != Hk)
            return ts_onnx_node_error(im, TS_ERR_SHAPE, "%lld query heads do not group over %lld key heads", (long long)H, (long long)Hk);
        int64_t reps = H / Hk;
        ts_tensor **xs = ts_malloc((size_t)reps * sizeof *xs);
        if (!xs) return TS_ERR_OUT_OF_MEMORY;
        for (int t = 0; t < 2; t++) {
            ts_tensor *x = t ? v : k;
            const int64_t *d = x->shape.d;
            ts_tensor *one = ts_reshape(g, x, 5, (int64_t[]){d[0], d[1], 1, d[2], d[3]});
            for (int64_t r = 0; r < reps; r++) xs[r] = one;
            x = ts_reshape(g, ts_concat(g, xs, (int)reps, 2), 4, (int64_t[]){d[0], H, d[2], d[3]});
            if (t) v = x;
            else k = x;
        }
        ts_free(xs);
        if (!k || !v) return ts_graph_status(g);
    }
    const Attr *sa = ts_onnx_attr(im, "scale");
    double scale = sa && sa->has_f ? sa->f : 1.0 / sqrt((double)D);
    ts_tensor *qk = ts_scale(g, ts_matmul_batched(g, q, k, 0, 1), (float)scale);
    if (softcap > 0) qk = ts_scale(g, ts_tanh(g, ts_scale(g, qk, (float)(1.0 / softcap))), (float)softcap);
    if (!qk) return ts_graph_status(g);
    /* the bias: mask + causal + window + padding, each 0 or masked */
    ts_tensor *bias = NULL, *zero = ts_onnx_scalar_constant(im, "Zero", 0.0f), *masked = ts_onnx_scalar_constant(im, "Masked", ATTENTION_MASKED);
    if (!zero || !masked) return ts_graph_status(g);
    if (io->n_in > 3 && io->in[3]) {
        ts_tensor *m = ts_onnx_as_tensor(im, io->in[3], &st);
        if (!m) return st;
        bool boolean = m->dtype == TS_BOOL || m->dtype == TS_I32;
        if (boolean) m = ts_where(g, m, zero, masked);
        else m = ts_binary(g, "Max", m, masked); /* -inf as the finite mask */
        int64_t have = m ? m->shape.d[m->shape.ndim - 1] : 0;
        if (m && have < Skv) { /* keys past the mask's: masked */
            ts_shape ps = m->shape;
            ps.d[ps.ndim - 1] = Skv - have;
            ts_tensor *pad = ts_onnx_computed_constant(im, "MaskPad", &ps, ts_onnx_fill_value, &(value_ctx){ts_shape_numel(&ps), ATTENTION_MASKED}, &st);
            if (!pad) return st;
            m = ts_concat(g, (ts_tensor *[]){m, pad}, 2, ps.ndim - 1);
        }
        bias = m;
    }
    ts_tensor *seqlen = NULL; /* nonpad_kv_seqlen [B] as [B,1,1,1] */
    if (io->n_in > 6 && io->in[6]) {
        if (past) return ts_onnx_node_error(im, TS_ERR_FORMAT, "nonpad_kv_seqlen cannot come with past_key and past_value");
        seqlen = as_f32(im, io->in[6], &st);
        if (!seqlen) return st;
        seqlen = ts_reshape(g, seqlen, 4, (int64_t[]){B, 1, 1, 1});
    }
    if (causal || left >= 0 || right >= 0) { /* diff = i + offset - j: causal diff >= 0, the window -right <= diff <= left */
        ts_tensor *diff = ts_onnx_computed_constant(im, "Offsets", &(ts_shape){.ndim = 2, .d = {Sq, Skv}}, ts_onnx_fill_offsets,
                                                    &(offsets_ctx){Sq, Skv, seqlen ? -Sq : past}, &st);
        if (!diff) return st;
        if (seqlen) diff = ts_add(g, ts_reshape(g, diff, 4, (int64_t[]){1, 1, Sq, Skv}), seqlen);
        ts_tensor *allowed = NULL, *cond[3] = {NULL, NULL, NULL};
        if (causal) cond[0] = ts_binary(g, "GreaterOrEqual", diff, zero);
        if (left >= 0) cond[1] = ts_binary(g, "LessOrEqual", diff, ts_onnx_scalar_constant(im, "Left", (float)left));
        if (right >= 0) cond[2] = ts_binary(g, "GreaterOrEqual", diff, ts_onnx_scalar_constant(im, "Right", (float)-right));
        for (int c = 0; c < 3; c++)
            if (cond[c]) allowed = allowed ? ts_binary(g, "And", allowed, cond[c]) : cond[c];
        ts_tensor *b = ts_where(g, allowed, zero, masked);
        bias = bias ? ts_add(g, bias, b) : b;
    }
    if (seqlen) { /* the keys at or past each sample's length */
        ts_tensor *pos = ts_onnx_iota_along(im, Skv, 3, 4, &st);
        if (!pos) return st;
        ts_tensor *b = ts_where(g, ts_binary(g, "Less", pos, seqlen), zero, masked);
        bias = bias ? ts_add(g, bias, b) : b;
    }
    if (bias) bias = ts_binary(g, "Max", bias, masked); /* a sum of masks stays one */
    ts_tensor *logits = bias ? ts_add(g, qk, bias) : qk, *p = ts_softmax(g, logits, 3);
    if (bias && p) { /* a row whose every key is masked: 0 */
        int last = bias->shape.ndim - 1;
        ts_tensor *all = ts_binary(g, "LessOrEqual", ts_reduce_max(g, bias, 1, &last, 1), masked);
        p = ts_where(g, all, zero, p);
    }
    ts_tensor *y = p ? ts_matmul_batched(g, p, v, 0, 0) : NULL;
    if (y && rank == 3) {
        static const int perm[4] = {0, 2, 1, 3};
        y = ts_reshape(g, ts_permute(g, y, perm), 3, (int64_t[]){B, Sq, H * v->shape.d[3]});
    }
    if ((st = ts_onnx_built(im, y, &io->out[0]))) return st;
    if (io->n_out > 1 && im->node->output[1] && *im->node->output[1] && (st = ts_onnx_built(im, present_k, &io->out[1]))) return st;
    if (io->n_out > 2 && im->node->output[2] && *im->node->output[2] && (st = ts_onnx_built(im, present_v, &io->out[2]))) return st;
    if (io->n_out > 3 && im->node->output[3] && *im->node->output[3]) {
        ts_tensor *o = mode == 3 ? p : mode == 2 && bias ? logits : qk;
        if (mode == 2 && bias) { /* the masked values as ONNX's -inf */
            ts_tensor *inf = ts_onnx_scalar_constant(im, "NegInf", -INFINITY);
            o = inf ? ts_where(g, ts_binary(g, "LessOrEqual", bias, masked), inf, logits) : NULL;
        }
        if ((st = ts_onnx_built(im, o, &io->out[3]))) return st;
    }
    return TS_OK;
}

/* RotaryEmbedding (opset 23): the first rotary_embedding_dim (default
 * all) features of each head rotated by the cos and sin caches (gathered
 * at position_ids where given): halves (or, interleaved, even and odd
 * features) x1, x2 become cos x1 - sin x2 and sin x1 + cos x2. The input
 * [B,H,S,D], or [B,S,H*D] with num_heads. Slices, products and concats:
 * the gradient reaches the input and the caches. */
ts_status ts_onnx_op_rotary(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_graph *g = im->g;
    ts_tensor *x = as_f32(im, io->in[0], &st), *cosc = x ? as_f32(im, io->in[1], &st) : NULL, *sinc = cosc ? as_f32(im, io->in[2], &st) : NULL;
    if (!sinc) return st;
    int64_t nh, rd;
    int inter;
    if ((st = ts_onnx_attr_int(im, "num_heads", 0, 0, INT32_MAX, &nh)) || (st = ts_onnx_attr_int(im, "rotary_embedding_dim", 0, 0, INT32_MAX, &rd)) ||
        (st = ts_onnx_attr_int32(im, "interleaved", 0, 0, 1, &inter)))
        return st;
    int rank = x->shape.ndim;
    static const int swap[4] = {0, 2, 1, 3};
    ts_shape in = x->shape;
    if (rank == 4) x = ts_permute(g, x, swap);
    else if (rank == 3) {
        if (nh < 1 || in.d[2] % nh) return ts_onnx_node_error(im, TS_ERR_FORMAT, "a 3-D input needs num_heads dividing its %lld features", (long long)in.d[2]);
        x = ts_reshape(g, x, 4, (int64_t[]){in.d[0], in.d[1], nh, in.d[2] / nh});
    } else return ts_onnx_node_error(im, TS_ERR_SHAPE, "takes an input of 3 or 4 dimensions; it has %d", rank);
    if (!x) return ts_graph_status(g);
    int64_t B = x->shape.d[0], S = x->shape.d[1], H = x->shape.d[2], hd = x->shape.d[3];
    if (rd == 0) rd = hd;
    if (rd > hd || rd % 2) return ts_onnx_node_error(im, TS_ERR_FORMAT, "rotary_embedding_dim %lld must be even and at most the head size %lld", (long long)rd, (long long)hd);
    int64_t half = rd / 2;
    if (io->n_in > 3 && io->in[3]) {
        ts_tensor *ids = ts_onnx_as_tensor(im, io->in[3], &st);
        if (!ids) return st;
        if (ids->dtype != TS_I32 && !(ids = ts_graph_indices(g, ids))) return ts_graph_status(g); /* checked before the gathers */
        cosc = ts_gather(g, cosc, ids, 0);
        sinc = ts_gather(g, sinc, ids, 0);
    }
    if (!cosc || !sinc) return ts_graph_status(g);
    if (cosc->shape.ndim != 3 || cosc->shape.d[2] != half || !ts_shape_equal(&cosc->shape, &sinc->shape))
        return ts_onnx_node_error(im, TS_ERR_SHAPE, "its cos and sin caches must be [B,S,%lld] (at the position ids, where given)", (long long)half);
    cosc = ts_reshape(g, cosc, 4, (int64_t[]){cosc->shape.d[0], cosc->shape.d[1], 1, half});
    sinc = ts_reshape(g, sinc, 4, (int64_t[]){sinc->shape.d[0], sinc->shape.d[1], 1, half});
    ts_tensor *rot = rd == hd ? x : ts_slice(g, x, 3, 0, rd), *x1, *x2;
    if (inter) {
        ts_tensor *pairs = ts_reshape(g, rot, 5, (int64_t[]){B, S, H, half, 2});
        x1 = ts_reshape(g, ts_slice(g, pairs, 4, 0, 1), 4, (int64_t[]){B, S, H, half});
        x2 = ts_reshape(g, ts_slice(g, pairs, 4, 1, 1), 4, (int64_t[]){B, S, H, half});
    } else {
        x1 = ts_slice(g, rot, 3, 0, half);
        x2 = ts_slice(g, rot, 3, half, half);
    }
    ts_tensor *re = ts_sub(g, ts_mul(g, x1, cosc), ts_mul(g, x2, sinc)), *imag = ts_add(g, ts_mul(g, x1, sinc), ts_mul(g, x2, cosc)), *y;
    if (inter) {
        int64_t five[5] = {B, S, H, half, 1};
        y = ts_reshape(g, ts_concat(g, (ts_tensor *[]){ts_reshape(g, re, 5, five), ts_reshape(g, imag, 5, five)}, 2, 4), 4, (int64_t[]){B, S, H, rd});
    } else {
        y = ts_concat(g, (ts_tensor *[]){re, imag}, 2, 3);
    }
    if (rd < hd) y = ts_concat(g, (ts_tensor *[]){y, ts_slice(g, x, 3, rd, hd - rd)}, 2, 3);
    if (!y) return ts_graph_status(g);
    y = rank == 4 ? ts_permute(g, y, swap) : ts_reshape(g, y, 3, in.d);
    return ts_onnx_built(im, y, &io->out[0]);
}

/* LinearAttention's update rules */
enum { TS_LINATT_LINEAR, TS_LINATT_GATED, TS_LINATT_DELTA, TS_LINATT_GATED_DELTA };

typedef struct ts_onnx_linear_attention {
    int rule;                   /* TS_LINATT_* */
    float scale;                /* 0: 1/sqrt(d_k) */
    int64_t q_heads, kv_heads;
    ts_tensor *q, *k, *v;       /* [B,T,Hq*dk], [B,T,Hkv*dk], [B,T,Hkv*dv] */
    ts_tensor *past;            /* [B,Hkv,dk,dv] or NULL (zeros) */
    ts_tensor *decay;           /* [B,T,Hkv*dk] or [B,T,Hkv] (gated rules), else NULL */
    ts_tensor *beta;            /* [B,T,Hkv] or [B,T,1] (delta rules), else NULL */
} ts_onnx_linear_attention;

/* -------------------------------------------------------- LinearAttention */

/* [B,T,H*D] as [B,H,T,D] */
static ts_tensor *heads_first(ts_graph *g, ts_tensor *x, int64_t heads) {
    const int64_t *d = x->shape.d;
    static const int perm[4] = {0, 2, 1, 3};
    return ts_permute(g, ts_reshape(g, x, 4, (int64_t[]){d[0], d[1], heads, d[2] / heads}), perm);
}

/* The recurrence unrolled over the T steps: out[0] [B,T,Hq*dv], out[1]
 * the last state [B,Hkv,dk,dv]. */
static ts_status ts_onnx_linear_attention_build(ts_graph *g, const ts_onnx_linear_attention *a, ts_tensor *out[2]) {
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
    ts_status st = ts_onnx_graph_status(g, o);
    if (st) return st;
    out[0] = o;
    out[1] = S;
    return TS_OK;
}

/* LinearAttention (opset 27): ts_onnx_linear_attention_build above. */
ts_status ts_onnx_op_linear_attention(importer *im, node_io *io) {
    static const char *const rules[] = {"linear", "gated", "delta", "gated_delta"}; /* TS_LINATT_* */
    const Attr *r = ts_onnx_attr(im, "update_rule");
    ts_onnx_linear_attention la = {.rule = r ? ts_onnx_attr_choice(r, rules, 4) : TS_LINATT_GATED_DELTA, .scale = (float)ts_onnx_attr_f(im, "scale", 0.0)};
    if (la.rule == 4)
        return ts_onnx_node_error(im, TS_ERR_FORMAT, "update_rule '%.*s' is not linear, gated, delta or gated_delta", (int)r->s.len, (const char *)r->s.data);
    ts_status st;
    if (!ts_onnx_attr(im, "q_num_heads") || !ts_onnx_attr(im, "kv_num_heads"))
        return ts_onnx_node_error(im, TS_ERR_FORMAT, "attributes 'q_num_heads' and 'kv_num_heads' are required");
    if ((st = ts_onnx_attr_int(im, "q_num_heads", 0, 1, INT32_MAX, &la.q_heads)) || (st = ts_onnx_attr_int(im, "kv_num_heads", 0, 1, INT32_MAX, &la.kv_heads))) return st;
    ts_tensor **in[6] = {&la.q, &la.k, &la.v, &la.past, &la.decay, &la.beta};
    for (int k = 0; k < 6 && !st; k++) *in[k] = k < 3 ? as_f32(im, io->in[k], &st) : ts_onnx_optional_f32(im, io, k, &st);
    if (st) return st;
    ts_tensor *out[2];
    if ((st = ts_onnx_linear_attention_build(im->g, &la, out))) return ts_onnx_fold_result(im, st);
    if ((st = ts_onnx_built(im, out[0], &io->out[0]))) return st;
    return ts_onnx_output_wanted(im, io, 1) ? ts_onnx_built(im, out[1], &io->out[1]) : TS_OK;
}
