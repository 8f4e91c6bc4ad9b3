/* gpt.c -- a character GPT from the graph's ops, every intermediate a named
 * tensor (docs/design.md#tensor-names): the attention probabilities are
 * `blocks.<i>.attn/Softmax:0`, computed when observed (else the layer's
 * `Attention` runs in one pass). The residual stream is kept as [B*T, C] so
 * the linear layers are plain GEMMs. */
#include "graph/graph.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static double normal(ts_graph *g) { /* Box-Muller */
    double u = ts_graph_uniform(g), v = ts_graph_uniform(g);
    return sqrt(-2.0 * log(1.0 - u)) * cos(2.0 * M_PI * v);
}

static void init_normal(ts_graph *g, ts_tensor *t, double std) {
    if (!t) return;
    for (int64_t i = 0; i < ts_shape_numel(&t->shape); i++) t->value[i] = (float)(std * normal(g));
}

static void init_const(ts_tensor *t, float v) {
    if (!t) return;
    for (int64_t i = 0; i < ts_shape_numel(&t->shape); i++) t->value[i] = v;
}

/* the full name of `<scope>.<name>` */
static void scoped(const ts_graph *g, const char *name, char *buf, size_t n) {
    char scope[512];
    ts_graph_scope_path(g, scope, sizeof scope);
    snprintf(buf, n, "%s%s%s", scope, scope[0] ? "." : "", name);
}

/* ts_linear with GPT's initialisation */
static ts_tensor *linear(ts_graph *g, ts_tensor *x, int64_t out, const char *name, double std) {
    ts_tensor *y = ts_linear(g, x, out, name);
    char w[640], b[640], full[600];
    scoped(g, name, full, sizeof full);
    snprintf(w, sizeof w, "%s.weight", full);
    snprintf(b, sizeof b, "%s.bias", full);
    init_normal(g, ts_graph_find(g, w), std);
    init_const(ts_graph_find(g, b), 0.0f);
    return y;
}

/* layer norm over the last dim in scope `name` (`<name>/LayerNorm:0`) */
static ts_tensor *layer_norm(ts_graph *g, ts_tensor *x, int64_t C, const char *name) {
    char w[640], b[640], full[600];
    scoped(g, name, full, sizeof full);
    snprintf(w, sizeof w, "%s.weight", full);
    snprintf(b, sizeof b, "%s.bias", full);
    ts_tensor *wt = ts_param(g, w, 1, (int64_t[]){C}), *bt = ts_param(g, b, 1, (int64_t[]){C});
    init_const(wt, 1.0f);
    if (ts_scope_push(g, name)) return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "%s", ts_last_error());
    ts_tensor *y = ts_layer_norm(g, x, wt, bt, 1, 1e-5f);
    ts_scope_pop(g);
    return y;
}

/* [B*T, C] -> [B, H, T, hd] */
static ts_tensor *heads(ts_graph *g, ts_tensor *x, const ts_gpt_config *c) {
    int64_t hd = c->embd / c->heads;
    ts_tensor *r = ts_reshape(g, x, 4, (int64_t[]){c->batch, c->block_size, c->heads, hd});
    return ts_transpose(g, r, 1, 2);
}

static ts_tensor *attention(ts_graph *g, ts_tensor *x, ts_tensor *mask, const ts_gpt_config *c, double proj_std) {
    int64_t C = c->embd, B = c->batch, T = c->block_size;
    ts_tensor *qkv = linear(g, x, 3 * C, "qkv", 0.02), *part[3];
    if (ts_split(g, qkv, 1, 3, part)) return NULL;
    ts_tensor *q = heads(g, part[0], c), *k = heads(g, part[1], c), *v = heads(g, part[2], c);
    float scale = (float)(1.0 / sqrt((double)(C / c->heads)));
    ts_tensor *att = ts_scale(g, ts_matmul_batched(g, q, k, 0, 1), scale);
    /* masked scores: a finite -1e30 rather than -inf, so a numeric check
     * (--check-numerics op) passes the mask; softmax gives them exactly 0
     * either way (exp underflows) */
    att = ts_softmax(g, ts_masked_fill(g, att, mask, -1e30f), -1); /* [B,H,T,T] */
    /* the same in one pass over the keys, these ops its twin: a run
     * computes the scores and probabilities only where something observes
     * them (docs/backend.md, "Fused attention") */
    ts_tensor *o = ts_attention(g, q, k, v, mask, scale, ts_matmul_batched(g, att, v, 0, 0));
    ts_tensor *y = ts_transpose(g, o, 1, 2); /* [B,T,H,hd] */
    return linear(g, ts_reshape(g, y, 2, (int64_t[]){B * T, C}), C, "proj", proj_std);
}

ts_status ts_gpt_build(ts_graph *g, const ts_gpt_config *c, ts_gpt *out) {
    if (!g || !c || !out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_gpt_build: NULL argument");
    memset(out, 0, sizeof *out);
    if (c->vocab < 2 || c->block_size < 1 || c->layers < 1 || c->heads < 1 || c->embd < 1 || c->batch < 1)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_gpt_build: vocab >= 2 and block size, layers, heads, embd, batch >= 1 are required");
    if (c->embd % c->heads)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_gpt_build: embd %lld is not a multiple of heads %lld (each head takes embd/heads channels)",
                        (long long)c->embd, (long long)c->heads);
    if (c->layers > 1000 || c->block_size > 65536 || c->embd > 65536 || c->vocab > 1 << 24)
        return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_gpt_build: the configuration is too large");
    ts_graph_at(g, __FILE__, __LINE__);
    int64_t B = c->batch, T = c->block_size, C = c->embd, V = c->vocab;
    double proj_std = 0.02 / sqrt(2.0 * (double)c->layers);
    out->tokens = ts_input(g, "tokens", TS_I32, 2, (int64_t[]){B, T});
    out->targets = ts_input(g, "targets", TS_I32, 2, (int64_t[]){B, T});
    ts_tensor *wte = ts_param(g, "wte.weight", 2, (int64_t[]){V, C});
    ts_tensor *wpe = ts_param(g, "wpe.weight", 2, (int64_t[]){T, C});
    init_normal(g, wte, 0.02);
    init_normal(g, wpe, 0.02);
    /* 1 above the diagonal: position t attends to positions <= t */
    int32_t *m = ts_calloc((size_t)(T * T), sizeof *m);
    if (!m) return ts_graph_fail(g, TS_ERR_OUT_OF_MEMORY, "ts_gpt_build: out of memory"), TS_ERR_OUT_OF_MEMORY;
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = i + 1; j < T; j++) m[i * T + j] = 1;
    ts_array ma = ts_array_i32(m, 2, (int64_t[]){T, T});
    ts_tensor *mask = ts_constant(g, "causal_mask", &ma);
    ts_free(m);
    ts_tensor *x = ts_add(g, ts_embedding(g, wte, out->tokens), wpe); /* [B,T,C] */
    x = ts_reshape(g, x, 2, (int64_t[]){B * T, C});
    for (int64_t l = 0; l < c->layers && x; l++) {
        char scope[32];
        snprintf(scope, sizeof scope, "blocks.%lld", (long long)l);
        if (ts_scope_push(g, scope)) return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "%s", ts_last_error()), ts_graph_status(g);
        ts_tensor *h = layer_norm(g, x, C, "ln1");
        ts_scope_push(g, "attn");
        h = attention(g, h, mask, c, proj_std);
        ts_scope_pop(g);
        x = ts_add(g, x, h);
        h = layer_norm(g, x, C, "ln2");
        ts_scope_push(g, "mlp");
        h = linear(g, ts_gelu(g, linear(g, h, 4 * C, "fc", 0.02), 0), C, "proj", proj_std);
        ts_scope_pop(g);
        x = ts_add(g, x, h);
        ts_scope_pop(g);
    }
    x = layer_norm(g, x, C, "ln_f");
    ts_scope_push(g, "lm_head");
    ts_tensor *logits = ts_matmul_t(g, x, wte); /* tied: the input embedding again */
    ts_scope_pop(g);
    out->logits = ts_reshape(g, logits, 3, (int64_t[]){B, T, V});
    if (out->logits) ts_tensor_set_name(out->logits, "logits");
    out->loss = ts_cross_entropy(g, out->logits, out->targets);
    if (out->loss) ts_tensor_set_name(out->loss, "loss");
    return ts_graph_status(g);
}
