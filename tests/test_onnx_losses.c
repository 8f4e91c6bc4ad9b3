/* test_onnx_losses.c -- ONNX's NegativeLogLikelihoodLoss and
 * SoftmaxCrossEntropyLoss beyond PyTorch's usual export: scores [N,C,D],
 * class weights, an ignore_index that is a class (2), reductions none, sum
 * and mean. Each value is checked against ONNX's definition computed here
 * in double (loss = -x[n,y,d] * w[y], 0 where y is ignored; mean divides by
 * the weights of the elements counted); the gradient of sum and mean with
 * respect to the scores (an initializer, so a parameter) against central
 * finite differences, as tests/test_ops_grad.c does for the graph ops; a
 * label out of range that is not ignore_index (C, -1) an error at the run
 * naming the labels and the value. */
/* needs: onnx */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "onnx_model.h"

enum { NN = 3, NC = 4, ND = 2, NX = NN * NC * ND, II = 2 };
static const float W[NC] = {0.5f, 1.0f, 2.0f, 1.5f};
static const int64_t Y[NN * ND] = {0, 2, 3, 1, 2, 1};
static float X[NX];

/* ONNX's definition in double: per element (none), or reduced. */
static double reference(const float *x, bool ce, int reduction, double *per) {
    double sum = 0, weights = 0;
    for (int n = 0; n < NN; n++)
        for (int d = 0; d < ND; d++) {
            int64_t y = Y[n * ND + d];
            double lse = 0, l = 0;
            for (int c = 0; c < NC && ce; c++) lse += exp((double)x[(n * NC + c) * ND + d]);
            if (y != II) {
                double logp = (double)x[(n * NC + y) * ND + d] - (ce ? log(lse) : 0);
                l = -logp * W[y];
                weights += W[y];
            }
            per[n * ND + d] = l;
            sum += l;
        }
    return reduction == 1 ? sum : sum / weights;
}

/* Imports x -> loss with the op, reduction and ignore_index II. */
static ts_graph *import_loss(const char *op, const char *reduction) {
    model_begin();
    init_f32("x", 3, (int64_t[]){NN, NC, ND}, X);
    init_f32("w", 1, (int64_t[]){NC}, W);
    input_typed("y", 7, 2, (int64_t[]){NN, ND});
    Node *n = node(op, "loss_node", "x,y,w", "loss");
    attr_string(n, "reduction", reduction);
    attr_int(n, "ignore_index", II);
    output("loss");
    ts_graph *g = NULL;
    char name[64];
    snprintf(name, sizeof name, "%s_%s", op, reduction);
    CHECK_OK(import_as(name, &g), "%s with reduction %s, weights and ignore_index %d imports", op, reduction, II);
    return g;
}

static const char *const NAMES[1] = {"y"};

static ts_array labels(void) { return (ts_array){.dtype = TS_I64, .ndim = 2, .shape = {NN, ND}, .data = (void *)Y}; }

/* The training model's loss for the scores now in x. */
static double loss_now(ts_model *m) {
    ts_array in = labels(), a;
    if (ts_model_run(m, NAMES, &in, 1) || ts_model_anchored(m, "loss", &a)) return NAN;
    return ((const float *)a.data)[0];
}

int main(void) {
    ts_set_log_level(TS_LOG_OFF);
    snprintf(dir, sizeof dir, "/tmp/ts_onnx_losses_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    for (int i = 0; i < NX; i++) X[i] = (float)(-0.1 - 1.9 * ((i * 37 % NX) / (double)NX)); /* log-probability-like, all distinct */
    const char *ops[2] = {"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"};
    const char *reductions[3] = {"none", "sum", "mean"};
    for (int o = 0; o < 2; o++)
        for (int r = 0; r < 3; r++) {
            ts_graph *g = import_loss(ops[o], reductions[r]);
            if (!g) continue;
            double per[NN * ND], want = reference(X, o == 1, r, per);
            ts_tensor *out = ts_graph_output_at(g, 0);
            ts_options *opt = ts_options_new();
            ts_options_set_output_mode(opt, TS_OUTPUT_FINAL, 0);
            ts_model *m = NULL;
            ts_array in = labels(), a;
            ts_status st = ts_model_inference(&m, g, &out, 1, opt);
            if (!st) st = ts_model_run(m, NAMES, &in, 1);
            if (!st) st = ts_model_anchored(m, ts_tensor_name(out), &a);
            int64_t n = st ? 0 : ts_array_numel(&a);
            int bad = st || n != (r == 0 ? NN * ND : 1);
            for (int64_t i = 0; !bad && i < n; i++)
                bad = fabs(((const float *)a.data)[i] - (r == 0 ? per[i] : want)) > 1e-5 * (1 + fabs(r == 0 ? per[i] : want));
            CHECK(!bad, "%s %s: the values ONNX defines (%lld of them)%s%s", ops[o], reductions[r], (long long)n, st ? ": " : "",
                  st ? ts_last_error() : "");
            /* a label out of [0, C) that is not ignore_index: an error naming the labels and the value (as PyTorch and
             * onnxruntime), never an element whose loss is 0 */
            int64_t bad_y[NN * ND];
            memcpy(bad_y, Y, sizeof bad_y);
            for (int k = 0; k < 2; k++) {
                bad_y[3] = k ? -1 : NC;
                ts_array ba = {.dtype = TS_I64, .ndim = 2, .shape = {NN, ND}, .data = bad_y};
                st = m ? ts_model_run(m, NAMES, &ba, 1) : TS_ERR_STATE;
                char want_msg[32];
                snprintf(want_msg, sizeof want_msg, "'y'[3] = %d ", k ? -1 : NC);
                CHECK(st == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), want_msg) && strstr(ts_last_error(), "[0, 4)"),
                      "%s %s: the label %d is an error naming the labels and the value: %s", ops[o], reductions[r], k ? -1 : NC,
                      st ? ts_last_error() : "(ran)");
            }
            ts_model_free(m);
            ts_options_free(opt);
            if (r == 0) {
                ts_graph_free(g);
                continue;
            }

            /* d loss / d x: analytic (SGD with lr 0 keeps x) against central differences */
            ts_tensor *x = ts_graph_find(g, "x");
            ts_options_set_output_mode(opt = ts_options_new(), TS_OUTPUT_FINAL, 0);
            ts_options_anchor(opt, "grad", "Gradient___x", TS_OUTPUT_FINAL, 0);
            ts_options_anchor(opt, "loss", ts_tensor_name(out), TS_OUTPUT_FINAL, 0);
            m = NULL;
            st = x ? ts_model_training(&m, g, out, opt, ts_sgd(0.0f, 0.0f, 0.0f)) : TS_ERR_NOT_FOUND;
            double analytic[NX];
            in = labels();
            if (!st) st = ts_model_run(m, NAMES, &in, 1);
            if (!st) st = ts_model_anchored(m, "grad", &a);
            CHECK(!st && ts_array_numel(&a) == NX, "%s %s: a training model gives the scores' gradient%s%s", ops[o], reductions[r],
                  st ? ": " : "", st ? ts_last_error() : "");
            if (st) {
                ts_model_free(m), ts_options_free(opt), ts_graph_free(g);
                continue;
            }
            for (int i = 0; i < NX; i++) analytic[i] = ((const float *)a.data)[i];
            float v[NX];
            memcpy(v, X, sizeof v);
            ts_array va = ts_array_f32(v, 3, (int64_t[]){NN, NC, ND});
            double eps = o == 1 ? 1e-2 : 0.1, worst = 0;
            int off = 0;
            for (int i = 0; i < NX; i++) {
                v[i] = X[i] + (float)eps;
                ts_param_set(x, &va);
                double lp = loss_now(m);
                v[i] = X[i] - (float)eps;
                ts_param_set(x, &va);
                double lm = loss_now(m);
                v[i] = X[i];
                double fd = (lp - lm) / (2 * eps), d = fabs(fd - analytic[i]);
                worst = fmax(worst, d);
                off += !(d <= 2e-3 + 1e-2 * fmax(fabs(fd), fabs(analytic[i])));
            }
            ts_param_set(x, &va);
            CHECK(off == 0, "%s %s: the gradient matches central differences at all %d scores (max abs error %.2g)", ops[o], reductions[r],
                  NX, worst);
            int zero = 1;
            for (int nn = 0; nn < NN; nn++)
                for (int d = 0; d < ND; d++)
                    for (int c = 0; c < NC && Y[nn * ND + d] == II; c++) zero = zero && analytic[(nn * NC + c) * ND + d] == 0;
            CHECK(zero, "%s %s: the ignored elements' scores get no gradient", ops[o], reductions[r]);
            ts_model_free(m);
            ts_options_free(opt);
            ts_graph_free(g);
        }
    remove_dir();
    return check_summary("test_onnx_losses");
}
