/* test_gate_fused.c -- a SiLU-gated product, silu(gate) * up, done in the
 * Silu's output pass, and its backward in one pass at the Mul's place
 * (docs/backend.md, "A SiLU-gated product in one pass"), gives the bits
 * the separate Mul and Silu give.
 *
 * The kernels: ts_silu_mul_forward with the Silu's value kept and without,
 * and over its inputs (in place), against ts_ew_unary_forward and the
 * product of the same floats; ts_silu_mul_backward against the Mul's
 * backward then the Silu's, s either operand, each gradient stored or
 * added to, u's in place over dy; on 2 threads, a length past the vectors.
 *
 * The model: three Llama-style gated MLPs, down(silu(gate(x)) * up(x)) (up
 * computed between the Silu and its Mul, as the exported Llama orders
 * them: the Silu's kernel waits for the Mul's place), down(up(x) *
 * silu(gate(x))) (the Mul's operands the other way round), and the first
 * again with x and each projection seen through Reshapes as the ONNX
 * import makes them (up's product's backward, between the Mul's and the
 * Silu's, writes its input's gradient where the plan had the Mul's output
 * gradient dy, dead after the Mul's backward: a backward reading dy at the
 * Silu's step ran apart there), against the same graph with a Scale by 1 between each
 * Silu and its Mul (exact, and not fused). Inference and SGD steps, with
 * nothing anchored but the logits, the loss and weight gradients, and with
 * the first Silu and the first two products anchored (that Silu then runs
 * apart forward, the others still fused; the first runs apart in
 * inference too, its input's memory given to up(x)): the same logits,
 * losses, weight gradients and anchored values, to the bit;
 * FusedOps.SiluMul and FusedOps.SiluMulBackward count the fused pairs,
 * none in the twin. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "seeded.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/kernels_tensor.h"
#include "backend/ew_math.h"
#include "backend/pool.h"

/* ---- the kernel */
static void kernel_case(ts_pool *p, int64_t n) {
    size_t bytes = (size_t)n * sizeof(float);
    float *x = malloc(bytes), *u = malloc(bytes), *s0 = malloc(bytes), *y0 = malloc(bytes), *s1 = malloc(bytes), *y1 = malloc(bytes);
    if (!x || !u || !s0 || !y0 || !s1 || !y1) {
        CHECK(0, "out of memory");
        goto done;
    }
    seeded_fill(x, n, 71), seeded_fill(u, n, 72);
    for (int64_t i = 0; i < n; i++) x[i] *= 12.0f; /* both tails of the logistic */
    ts_ew_unary_forward(p, TS_EWU_SILU, s0, x, 0.0f, 0.0f, n);
    for (int64_t i = 0; i < n; i++) y0[i] = s0[i] * u[i];
    for (int64_t i = 0; i < n; i++) s1[i] = y1[i] = NAN;
    ts_silu_mul_forward(p, s1, y1, x, u, n);
    CHECK(memcmp(s0, s1, bytes) == 0 && memcmp(y0, y1, bytes) == 0, "%lld values, the Silu kept: its bits and the Mul's", (long long)n);
    for (int64_t i = 0; i < n; i++) y1[i] = NAN;
    ts_silu_mul_forward(p, NULL, y1, x, u, n);
    CHECK(memcmp(y0, y1, bytes) == 0, "%lld values, the product alone: the Mul's bits", (long long)n);
    memcpy(y1, x, bytes);
    ts_silu_mul_forward(p, NULL, y1, y1, u, n);
    CHECK(memcmp(y0, y1, bytes) == 0, "%lld values, over x: the Mul's bits", (long long)n);
    memcpy(y1, u, bytes);
    ts_silu_mul_forward(p, s1, y1, x, y1, n);
    CHECK(memcmp(y0, y1, bytes) == 0 && memcmp(s0, s1, bytes) == 0, "%lld values, over u, the Silu kept: the Mul's bits", (long long)n);
done:
    free(x), free(u), free(s0), free(y0), free(s1), free(y1);
}

/* The backward in one pass against the Mul's kernel then the Silu's: s
 * the Mul's operand j, each gradient stored or added to (s's to zeros), u's
 * apart and in place over dy, to the bit. */
static void kernel_bwd_case(ts_pool *p, int64_t n) {
    size_t bytes = (size_t)n * sizeof(float);
    float *x = malloc(bytes), *u = malloc(bytes), *s = malloc(bytes), *dy = malloc(bytes), *ds = malloc(bytes), *dx0 = malloc(bytes),
          *du0 = malloc(bytes), *dx1 = malloc(bytes), *du1 = malloc(bytes);
    if (!x || !u || !s || !dy || !ds || !dx0 || !du0 || !dx1 || !du1) {
        CHECK(0, "out of memory");
        goto done;
    }
    seeded_fill(x, n, 73), seeded_fill(u, n, 74), seeded_fill(dy, n, 75);
    for (int64_t i = 0; i < n; i++) x[i] *= 12.0f;
    ts_ew_unary_forward(p, TS_EWU_SILU, s, x, 0.0f, 0.0f, n);
    for (int mode = 0; mode < 16; mode++) {
        int j = mode & 1;
        bool store_s = mode >> 1 & 1, store_u = mode >> 2 & 1, store_x = mode >> 3 & 1, over = store_u && j == 1; /* du = dy b: in place */
        seeded_fill(dx0, n, 76), seeded_fill(du0, n, 77);
        memset(ds, 0, bytes);
        memcpy(dx1, dx0, bytes), memcpy(du1, over ? dy : du0, bytes);
        unsigned st = (store_s ? 1u << j : 0u) | (store_u ? 1u << (1 - j) : 0u);
        ts_binary_backward_store(p, TS_BIN_MUL, j ? du0 : ds, j ? ds : du0, dy, j ? u : s, j ? s : u, n, n, st);
        ts_ew_unary_backward(p, TS_EWU_SILU, dx0, ds, x, 0.0f, 0.0f, n, store_x);
        ts_silu_mul_backward(p, dx1, du1, over ? du1 : dy, u, s, x, n, j == 1 || !store_s, store_x, store_u, j == 0);
        CHECK(memcmp(dx0, dx1, bytes) == 0 && memcmp(du0, du1, bytes) == 0,
              "%lld values, s the Mul's input %d, s's gradient %s, u's %s%s, x's %s: the Mul's and the Silu's bits", (long long)n, j,
              store_s ? "stored" : "added", store_u ? "stored" : "added", over ? " over dy" : "", store_x ? "stored" : "added");
    }
done:
    free(x), free(u), free(s), free(dy), free(ds), free(dx0), free(du0), free(dx1), free(du1);
}

/* ---- the model */
enum { B = 24, D = 40, H = 36, K = 6, STEPS = 3 };

static float xs[B * D];
static int32_t ys[B];

static ts_tensor *proj(ts_graph *g, ts_tensor *x, int64_t in, int64_t out, const char *name) {
    return ts_matmul_t(g, x, ts_param(g, name, 2, (int64_t[]){out, in}));
}

/* A projection of x, where views as the ONNX import makes one of a [2,
 * B/2, D] input: Reshape to [B, D], the product, Reshape to [2, B/2, out] */
static ts_tensor *proj_in(ts_graph *g, ts_tensor *x, int64_t out, const char *name, bool views) {
    if (!views) return proj(g, x, D, out, name);
    ts_tensor *y = proj(g, ts_reshape(g, x, 2, (int64_t[]){B, D}), D, out, name);
    return ts_reshape(g, y, 3, (int64_t[]){2, B / 2, out});
}

/* down(silu(gate(x)) * up(x)), or with up first and the product's
 * operands swapped; a Scale by 1 before the Mul where apart; where views,
 * x seen [2, B/2, D] and each projection through Reshapes, as in the
 * imported Llama */
static ts_tensor *mlp(ts_graph *g, ts_tensor *x, const char *pre, bool up_first, bool apart, bool views) {
    char gn[32], un[32], dn[32], sn[32], pn[32];
    snprintf(gn, sizeof gn, "%s.gate", pre), snprintf(un, sizeof un, "%s.up", pre), snprintf(dn, sizeof dn, "%s.down", pre);
    snprintf(sn, sizeof sn, "%s.silu", pre), snprintf(pn, sizeof pn, "%s.gated", pre);
    if (views) x = ts_reshape(g, x, 3, (int64_t[]){2, B / 2, D});
    ts_tensor *u = up_first ? proj_in(g, x, H, un, views) : NULL;
    ts_tensor *s = ts_silu(g, proj_in(g, x, H, gn, views));
    ts_tensor_set_name(s, sn);
    if (!up_first) u = proj_in(g, x, H, un, views);
    if (apart) s = ts_scale(g, s, 1.0f);
    ts_tensor *h = up_first ? ts_mul(g, u, s) : ts_mul(g, s, u);
    ts_tensor_set_name(h, pn);
    return proj(g, views ? ts_reshape(g, h, 2, (int64_t[]){B, H}) : h, H, D, dn);
}

static ts_graph *model_graph(bool apart, ts_tensor **loss, ts_tensor **out) {
    ts_graph *g = ts_graph_new(5);
    ts_tensor *x = ts_input(g, "x", TS_F32, 2, (int64_t[]){B, D});
    ts_tensor *y = ts_input(g, "labels", TS_I32, 1, (int64_t[]){B});
    ts_tensor *h = ts_add(g, x, mlp(g, x, "m1", false, apart, false));
    h = ts_add(g, h, mlp(g, h, "m2", true, apart, false));
    h = ts_add(g, h, mlp(g, h, "m3", false, apart, true));
    h = proj(g, h, D, K, "head");
    ts_tensor_set_name(h, "logits");
    *out = h;
    *loss = ts_nll_loss(g, ts_log_softmax(g, h, 1), y);
    ts_tensor_set_name(*loss, "loss");
    seeded_params(g, 0.5f);
    return g;
}

static ts_status run(ts_model *m) { return run_xy(m, xs, 2, (int64_t[]){B, D}, ys); }

static ts_model *compiled(ts_graph *g, ts_tensor *loss, ts_tensor *out, bool training, bool observed) {
    static const char *const always[] = {"logits", "logits", NULL};
    static const char *const seen[] = {"silu1", "m1.silu", "gated1", "m1.gated", "gated2", "m2.gated", NULL};
    static const char *const trained[] = {"dg1", "Gradient___m1.gate", "du1", "Gradient___m1.up", "dg2", "Gradient___m2.gate",
                                          "du2", "Gradient___m2.up", NULL};
    return twin_model(g, loss, out, training, TS_F32, always, observed ? seen : NULL, trained, observed ? "observed" : "unobserved");
}

static void gated_models(void) {
    seeded_fill(xs, B * D, 81);
    for (int i = 0; i < B; i++) ys[i] = (i * 5 + 2) % K;
    ts_tensor *loss[2], *out[2];
    ts_graph *g[2] = {model_graph(false, &loss[0], &out[0]), model_graph(true, &loss[1], &out[1])};
    for (int training = 0; training < 2; training++)
        for (int observed = 0; observed < 2; observed++) {
            ts_model *m[2] = {compiled(g[0], loss[0], out[0], training, observed), compiled(g[1], loss[1], out[1], training, observed)};
            char how[64];
            snprintf(how, sizeof how, "%s, %s", training ? "training" : "inference", observed ? "Silu and products anchored" : "nothing anchored");
            for (int s = 0; s < (training ? STEPS : 1) && m[0] && m[1]; s++) {
                ts_metrics_reset();
                CHECK_OK(run(m[0]), "%s, run %d (Silu + Mul)", how, s + 1);
                int64_t took = ts_counter_get("FusedOps.SiluMul"), back = ts_counter_get("FusedOps.SiluMulBackward");
                ts_metrics_reset();
                CHECK_OK(run(m[1]), "%s, run %d (Scale between)", how, s + 1);
                /* anchored, the first Silu is written at its own place: it
                 * runs apart; so it does in inference, where the plan gives
                 * its input's memory to up(x), computed before the Mul (the
                 * fusion fails the logits without that refusal) */
                CHECK(took == (training ? (observed ? 2 : 3) : 1) && ts_counter_get("FusedOps.SiluMul") == 0,
                      "%s, run %d: FusedOps.SiluMul counts %lld of the 3 gated products, none in the twin", how, s + 1, (long long)took);
                CHECK(back == (training ? 3 : 0) && ts_counter_get("FusedOps.SiluMulBackward") == 0,
                      "%s, run %d: FusedOps.SiluMulBackward counts %lld backward pairs, none in the twin", how, s + 1, (long long)back);
                CHECK(same_anchor(m[0], m[1], "logits", B * K), "%s, run %d: the logits, to the bit", how, s + 1);
                if (training)
                    CHECK(same_anchor(m[0], m[1], "loss", 1) && same_anchor(m[0], m[1], "dg1", H * D) && same_anchor(m[0], m[1], "du1", H * D) &&
                              same_anchor(m[0], m[1], "dg2", H * D) && same_anchor(m[0], m[1], "du2", H * D),
                          "%s, step %d: the loss and the gate and up weights' gradients, to the bit", how, s + 1);
                if (observed)
                    CHECK(same_anchor(m[0], m[1], "silu1", B * H) && same_anchor(m[0], m[1], "gated1", B * H) &&
                              same_anchor(m[0], m[1], "gated2", B * H),
                          "%s, run %d: the anchored Silu and products, to the bit", how, s + 1);
            }
            ts_model_free(m[0]), ts_model_free(m[1]);
        }
    ts_graph_free(g[0]), ts_graph_free(g[1]);
}

int main(void) {
    ts_pool *p = NULL;
    CHECK_OK(ts_pool_new(&p, 2), "a pool of 2 threads");
    if (!p) return check_summary("test_gate_fused");
    kernel_case(p, 37);
    kernel_case(p, 70001);
    kernel_bwd_case(p, 37);
    kernel_bwd_case(p, 70001);
    ts_pool_free(p);
    gated_models();
    return check_summary("test_gate_fused");
}
