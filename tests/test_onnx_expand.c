/* test_onnx_expand.c -- ONNX Expand on graph tensors: a parameter [4,1]
 * expanded to [2,4,3] (both ways of numpy's broadcasting: the leading dim
 * added, the 1 stretched) and a graph input [3] expanded to [4,3]. The
 * forward is the broadcast copy; the parameter's gradient, under the loss
 * sum((expand(p) * x)^2) + sum(expand(v)), is the sum over the broadcast dims,
 * sum_{b,k} 2 p_i x_bik^2, computed here in double; and central finite
 * differences of that loss agree with it. */
/* needs: onnx */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "onnx_model.h"

#define B 2
#define T 4
#define C 3

static const float P0[T] = {0.5f, -1.0f, 2.0f, 1.5f};

/* The loss at p in double, as the model defines it. */
static double loss_at(const double *p, const float *x) {
    double l = 0;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++)
            for (int k = 0; k < C; k++) {
                double y = p[i] * x[(b * T + i) * C + k];
                l += y * y;
            }
    return l;
}

int main(void) {
    ts_set_log_level(TS_LOG_OFF);
    snprintf(dir, sizeof dir, "/tmp/ts_onnx_expand_XXXXXX");
    if (!mkdtemp(dir)) return 1;

    model_begin();
    input("x", 3, (int64_t[]){B, T, C});
    input("v", 1, (int64_t[]){C});
    output("y");
    output("w");
    init_f32("p", 2, (int64_t[]){T, 1}, P0);
    init_i64("shape3", 3, (int64_t[]){B, T, C});
    init_i64("shape2", 2, (int64_t[]){T, 1});
    node("Expand", "expand_p", "p,shape3", "e");
    node("Mul", "mul", "e,x", "y");
    node("Expand", "expand_v", "v,shape2", "w"); /* [3] with [4,1]: [4,3] */
    ts_graph *g = NULL;
    ts_status st = import_as("expand", &g);
    CHECK(st == TS_OK, "Expand of a parameter and of an input imports%s%s", st ? ": " : "", st ? ts_last_error() : "");
    if (st) return check_summary("test_onnx_expand");

    ts_tensor *y = ts_graph_output_at(g, 0), *w = ts_graph_output_at(g, 1);
    ts_array yi, wi;
    ts_tensor_info(y, &yi);
    ts_tensor_info(w, &wi);
    CHECK(yi.ndim == 3 && yi.shape[0] == B && yi.shape[1] == T && yi.shape[2] == C, "expand(p [4,1], [2,4,3]) * x is [2,4,3]");
    CHECK(wi.ndim == 2 && wi.shape[0] == T && wi.shape[1] == C, "expand(v [3], [4,1]) is [4,3]");
    ts_tensor *loss = ts_add(g, ts_sum(g, ts_mul(g, y, y)), ts_sum(g, w)); /* w's term has no p in it */
    CHECK_OK(ts_graph_status(g), "a loss on the expanded product");

    float x[B * T * C], v[C] = {1.0f, -2.0f, 3.0f};
    for (int i = 0; i < B * T * C; i++) x[i] = (float)sin(0.7 * i + 0.3);
    ts_options *o = ts_options_new();
    ts_options_anchor(o, "y", ts_tensor_name(y), TS_OUTPUT_FINAL, 0);
    ts_options_anchor(o, "w", ts_tensor_name(w), TS_OUTPUT_FINAL, 0);
    ts_options_anchor(o, "loss", ts_tensor_name(loss), TS_OUTPUT_FINAL, 0);
    ts_options_anchor(o, "gp", "Gradient___p", TS_OUTPUT_FINAL, 0);
    ts_model *m = NULL;
    CHECK_OK(ts_model_training(&m, g, loss, o, ts_sgd(0.0f, 0.0f, 0.0f)), "a training model (lr 0)");
    CHECK_OK(m ? ts_model_compile(m) : TS_ERR_STATE, "compiles");
    ts_array in[2] = {ts_array_f32(x, 3, (int64_t[]){B, T, C}), ts_array_f32(v, 1, (int64_t[]){C})};
    const char *names[2] = {"x", "v"};
    st = m ? ts_model_run(m, names, in, 2) : TS_ERR_STATE;
    CHECK(st == TS_OK, "runs%s%s", st ? ": " : "", st ? ts_last_error() : "");
    ts_array a;
    if (!st && ts_model_anchored(m, "y", &a) == TS_OK) {
        int bad = 0;
        for (int i = 0; i < B * T * C; i++)
            bad += fabsf(((const float *)a.data)[i] - P0[(i / C) % T] * x[i]) > 1e-6f;
        CHECK(bad == 0, "forward: y[b,i,k] = p[i] * x[b,i,k] (%d of %d off)", bad, B * T * C);
    }
    if (!st && ts_model_anchored(m, "w", &a) == TS_OK) {
        int bad = 0;
        for (int i = 0; i < T * C; i++) bad += ((const float *)a.data)[i] != v[i % C];
        CHECK(bad == 0, "forward: w[i,k] = v[k] (%d of %d off)", bad, T * C);
    }
    if (!st && ts_model_anchored(m, "gp", &a) == TS_OK) {
        CHECK(a.ndim == 2 && a.shape[0] == T && a.shape[1] == 1, "the gradient has p's shape [4,1]");
        double p[T], worst_an = 0, worst_fd = 0, eps = 1e-3;
        for (int i = 0; i < T; i++) p[i] = P0[i];
        for (int i = 0; i < T; i++) {
            double an = 0;
            for (int b = 0; b < B; b++)
                for (int k = 0; k < C; k++) {
                    double xv = x[(b * T + i) * C + k];
                    an += 2.0 * p[i] * xv * xv;
                }
            double save = p[i];
            p[i] = save + eps;
            double lp = loss_at(p, x);
            p[i] = save - eps;
            double lm = loss_at(p, x);
            p[i] = save;
            double got = ((const float *)a.data)[i], fd = (lp - lm) / (2 * eps);
            worst_an = fmax(worst_an, fabs(got - an) / (1 + fabs(an)));
            worst_fd = fmax(worst_fd, fabs(got - fd) / (1 + fabs(fd)));
        }
        CHECK(worst_an < 1e-5, "backward: dL/dp summed over the broadcast dims (worst relative error %.3g)", worst_an);
        CHECK(worst_fd < 1e-4, "backward agrees with central finite differences of the loss (worst %.3g)", worst_fd);
    } else {
        CHECK(0, "the gradient of p is anchored: %s", ts_last_error());
    }
    ts_model_free(m);
    ts_options_free(o);
    ts_graph_free(g);

    /* a shape that does not broadcast: a clear error */
    model_begin();
    input("x", 2, (int64_t[]){T, C});
    output("e");
    init_i64("bad", 2, (int64_t[]){T, 2});
    node("Expand", "expand_bad", "x,bad", "e");
    g = NULL;
    st = import_as("expand_bad", &g);
    CHECK(st == TS_ERR_SHAPE && strstr(ts_last_error(), "does not broadcast") && strstr(ts_last_error(), "[4,3]"),
          "x [4,3] to [4,2]: a shape error naming both shapes: %s", st ? ts_last_error() : "(imported)");
    ts_graph_free(g);

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("could not remove %s\n", dir);
    return check_summary("test_onnx_expand");
}
