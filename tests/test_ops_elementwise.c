/* test_ops_elementwise.c -- the values of the elementwise families
 * (ts_unary, ts_binary) and of Where with an f32 condition, on the inputs
 * where their definitions differ from the obvious: Round's halves go to
 * the even neighbour, Mod takes the divisor's sign and FMod the dividend's,
 * Max and Min let NaN win, IsInf counts each infinity only when asked,
 * predicates give exactly 1 or 0 (-0 and NaN included), casts to int go
 * toward zero, the trigonometric and hyperbolic functions give their
 * values (NaN outside an inverse's domain). Expected values are written from the ops' definitions
 * (ONNX's and numpy's); finite-difference gradients are test_ops_grad's.
 * Also: an unknown op name is an error that lists the family. */
#include <math.h>
#include <string.h>

#include "check.h"

#define N 8

/* One inference run of y = op(x[, x2]) over 8 values. */
static int run(const char *label, const char *op, int binary, const float *a, const float *b, float alpha, float beta,
               float *y)
{
    ts_graph *g = ts_graph_new(1);
    int64_t shape[1] = {N};
    ts_tensor *x = ts_input(g, "a", TS_F32, 1, shape), *x2 = binary ? ts_input(g, "b", TS_F32, 1, shape) : NULL;
    ts_tensor *t = binary ? ts_binary(g, op, x, x2) : ts_unary(g, op, x, alpha, beta);
    ts_model *m = NULL;
    ts_array in[2] = {ts_array_f32((float *)a, 1, shape), ts_array_f32((float *)b, 1, shape)};
    const char *names[2] = {"a", "b"};
    ts_array out;
    int ok = t && !ts_model_inference(&m, g, &t, 1, NULL) && !ts_model_run(m, names, in, binary ? 2 : 1) &&
             !ts_model_anchored(m, ts_tensor_name(t), &out) && ts_array_numel(&out) == N;
    CHECK(ok, "%s runs: %s", label, ok ? "" : ts_last_error());
    if (ok && out.dtype == TS_BOOL) /* comparisons, predicates and logic: bool tensors, read as 1 and 0 */
        for (int i = 0; i < N; i++)
            y[i] = ((const uint8_t *)out.data)[i] ? 1.0f : 0.0f;
    else if (ok)
        memcpy(y, out.data, sizeof(float) * N);
    ts_model_free(m);
    ts_graph_free(g);
    return ok;
}

/* x is y: NaN is NaN, a zero has y's sign, other values within float
 * rounding (1e-6 relative). */
static int same(float x, float y)
{
    if (isnan(x) || isnan(y))
        return isnan(x) && isnan(y);
    if (y == 0.0f || isinf(y))
        return x == y && signbit(x) == signbit(y);
    return fabsf(x - y) <= 1e-6f * fabsf(y);
}

static void expect(const char *label, const char *op, int binary, const float *a, const float *b, float alpha, float beta,
                   const float *want)
{
    float y[N];
    if (!run(label, op, binary, a, b, alpha, beta, y))
        return;
    int bad = -1;
    for (int i = 0; i < N && bad < 0; i++)
        if (!same(y[i], want[i]))
            bad = i;
    CHECK(bad < 0, "%s: every value as defined%s", label, bad < 0 ? "" : " (MISMATCH)");
    if (bad >= 0)
        printf("     [%d] got %g, want %g\n", bad, (double)y[bad], (double)want[bad]);
}

int main(void)
{
    const float inf = INFINITY, nan = NAN;
    const float halves[N] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 2.4f, -2.6f};
    expect("Round: halves to even", "Round", 0, halves, NULL, 0, 0, (const float[N]){0, 2, 2, -0.0f, -2, -2, 2, -3});
    expect("Floor", "Floor", 0, halves, NULL, 0, 0, (const float[N]){0, 1, 2, -1, -2, -3, 2, -3});
    expect("Ceil", "Ceil", 0, halves, NULL, 0, 0, (const float[N]){1, 2, 3, -0.0f, -1, -2, 3, -2});
    expect("CastInt: toward zero", "CastInt", 0, halves, NULL, 0, 0, (const float[N]){0, 1, 2, -0.0f, -1, -2, 2, -2});

    const float odd[N] = {0.0f, -0.0f, nan, inf, -inf, 1.0f, -3.0f, 1e-30f};
    expect("CastBool: 1 where non-zero (-0 is zero, NaN is not)", "CastBool", 0, odd, NULL, 0, 0, (const float[N]){0, 0, 1, 1, 1, 1, 1, 1});
    expect("Not", "Not", 0, odd, NULL, 0, 0, (const float[N]){1, 1, 0, 0, 0, 0, 0, 0});
    expect("IsNaN", "IsNaN", 0, odd, NULL, 0, 0, (const float[N]){0, 0, 1, 0, 0, 0, 0, 0});
    expect("IsInf both", "IsInf", 0, odd, NULL, 1, 1, (const float[N]){0, 0, 0, 1, 1, 0, 0, 0});
    expect("IsInf positive only", "IsInf", 0, odd, NULL, 1, 0, (const float[N]){0, 0, 0, 1, 0, 0, 0, 0});
    expect("IsInf negative only", "IsInf", 0, odd, NULL, 0, 1, (const float[N]){0, 0, 0, 0, 1, 0, 0, 0});

    const float xs[N] = {-4.0f, -3.0f, -1.0f, 0.0f, 1.0f, 3.0f, 4.0f, -0.5f};
    expect("HardSwish: 0 below -3, x above 3", "HardSwish", 0, xs, NULL, 0, 0,
           (const float[N]){-0.0f, -0.0f, -1.0f / 3.0f, 0, 2.0f / 3.0f, 3, 4, -0.5f * (-0.5f / 6 + 0.5f)});
    expect("HardSigmoid alpha 0.2 beta 0.5", "HardSigmoid", 0, xs, NULL, 0.2f, 0.5f,
           (const float[N]){0, 0, 0.2f * -1.0f + 0.5f, 0.5f, 0.2f * 1.0f + 0.5f, 1, 1, 0.2f * -0.5f + 0.5f});
    expect("LeakyRelu alpha 0.1", "LeakyRelu", 0, xs, NULL, 0.1f, 0,
           (const float[N]){0.1f * -4.0f, 0.1f * -3.0f, 0.1f * -1.0f, 0, 1, 3, 4, 0.1f * -0.5f});

    /* the trigonometric and hyperbolic functions at the points where their
     * values are known exactly, and outside the inverses' domains: NaN */
    const float tx[N] = {0.0f, -0.0f, 0.5f, 1.0f, -1.0f, 2.0f, nan, inf};
    const float pi2 = 1.57079632679489662f, pi4 = 0.785398163397448310f;
    expect("Tan", "Tan", 0, tx, NULL, 0, 0, (const float[N]){0, -0.0f, 0.546302489843790514f, 1.55740772465490223f, -1.55740772465490223f,
                                                             -2.18503986326151899f, nan, nan});
    expect("Asin", "Asin", 0, tx, NULL, 0, 0, (const float[N]){0, -0.0f, 0.523598775598298873f, pi2, -pi2, nan, nan, nan});
    expect("Acos", "Acos", 0, tx, NULL, 0, 0, (const float[N]){pi2, pi2, 1.04719755119659775f, 0, 2 * pi2, nan, nan, nan});
    expect("Atan", "Atan", 0, tx, NULL, 0, 0, (const float[N]){0, -0.0f, 0.463647609000806116f, pi4, -pi4, 1.10714871779409050f, nan, pi2});
    expect("Sinh", "Sinh", 0, tx, NULL, 0, 0, (const float[N]){0, -0.0f, 0.521095305493747361f, 1.17520119364380146f, -1.17520119364380146f,
                                                               3.62686040784701877f, nan, inf});
    expect("Cosh", "Cosh", 0, tx, NULL, 0, 0, (const float[N]){1, 1, 1.12762596520638079f, 1.54308063481524377f, 1.54308063481524377f,
                                                               3.76219569108363146f, nan, inf});
    expect("Asinh", "Asinh", 0, tx, NULL, 0, 0, (const float[N]){0, -0.0f, 0.481211825059603448f, 0.881373587019543025f,
                                                                 -0.881373587019543025f, 1.44363547517881034f, nan, inf});
    expect("Acosh", "Acosh", 0, tx, NULL, 0, 0, (const float[N]){nan, nan, nan, 0, nan, 1.31695789692481671f, nan, inf});
    expect("Atanh", "Atanh", 0, tx, NULL, 0, 0, (const float[N]){0, -0.0f, 0.549306144334054846f, inf, -inf, nan, nan, nan});

    /* Mod (the divisor's sign) and FMod (the dividend's), numpy's mod and fmod */
    const float na[N] = {7, -7, 7, -7, 5.5f, -5.5f, 6, 0};
    const float nb[N] = {3, 3, -3, -3, 2, 2, 3, 4};
    expect("Mod: the sign of the divisor", "Mod", 1, na, nb, 0, 0, (const float[N]){1, 2, -2, -1, 1.5f, 0.5f, 0, 0});
    expect("FMod: the sign of the dividend", "FMod", 1, na, nb, 0, 0, (const float[N]){1, -1, 1, -1, 1.5f, -1.5f, 0, 0});

    const float ca[N] = {1, 2, 3, nan, 1, -0.0f, inf, 5};
    const float cb[N] = {2, 2, 2, 1, nan, 0.0f, inf, -inf};
    expect("Max: NaN wins", "Max", 1, ca, cb, 0, 0, (const float[N]){2, 2, 3, nan, nan, 0.0f, inf, 5});
    expect("Min: NaN wins", "Min", 1, ca, cb, 0, 0, (const float[N]){1, 2, 2, nan, nan, 0.0f, inf, -inf});
    expect("Equal (-0 == 0, NaN != NaN)", "Equal", 1, ca, cb, 0, 0, (const float[N]){0, 1, 0, 0, 0, 1, 1, 0});
    expect("Greater", "Greater", 1, ca, cb, 0, 0, (const float[N]){0, 0, 1, 0, 0, 0, 0, 1});
    expect("GreaterOrEqual", "GreaterOrEqual", 1, ca, cb, 0, 0, (const float[N]){0, 1, 1, 0, 0, 1, 1, 1});
    expect("Less", "Less", 1, ca, cb, 0, 0, (const float[N]){1, 0, 0, 0, 0, 0, 0, 0});
    expect("LessOrEqual", "LessOrEqual", 1, ca, cb, 0, 0, (const float[N]){1, 1, 0, 0, 0, 1, 1, 0});
    const float la[N] = {0, 0, 1, 1, -0.0f, 2, nan, 0};
    const float lb[N] = {0, 1, 0, 1, 1, -3, 0, nan};
    expect("And (non-zero is true)", "And", 1, la, lb, 0, 0, (const float[N]){0, 0, 0, 1, 0, 1, 0, 0});
    expect("Or", "Or", 1, la, lb, 0, 0, (const float[N]){0, 1, 1, 1, 1, 1, 1, 1});
    expect("Xor", "Xor", 1, la, lb, 0, 0, (const float[N]){0, 1, 1, 0, 1, 0, 1, 1});
    const float pa[N] = {2, 2, 4, 9, 0, 1, -2, 0.5f};
    const float pb[N] = {3, -1, 0.5f, 0.5f, 2, 100, 2, 2};
    expect("Pow with a tensor exponent", "Pow", 1, pa, pb, 0, 0, (const float[N]){8, 0.5f, 2, 3, 0, 1, 4, 0.25f});

    /* Where with the f32 condition a comparison gives */
    {
        ts_graph *g = ts_graph_new(1);
        int64_t shape[1] = {N};
        ts_tensor *a = ts_input(g, "a", TS_F32, 1, shape), *b = ts_input(g, "b", TS_F32, 1, shape);
        ts_tensor *w = ts_where(g, ts_binary(g, "Greater", a, b), a, ts_scale(g, b, -1.0f));
        ts_model *m = NULL;
        ts_array in[2] = {ts_array_f32((float *)ca, 1, shape), ts_array_f32((float *)cb, 1, shape)}, out;
        const char *names[2] = {"a", "b"};
        int ok = w && !ts_model_inference(&m, g, &w, 1, NULL) && !ts_model_run(m, names, in, 2) &&
                 !ts_model_anchored(m, ts_tensor_name(w), &out);
        CHECK(ok, "where(a > b, a, -b) runs: %s", ok ? "" : ts_last_error());
        int bad = -1;
        for (int i = 0; ok && i < N && bad < 0; i++)
            if (!same(((const float *)out.data)[i], ca[i] > cb[i] ? ca[i] : -cb[i]))
                bad = i;
        CHECK(ok && bad < 0, "where(a > b, a, -b) with an f32 condition picks a where a > b, else -b");
        ts_model_free(m);
        ts_graph_free(g);
    }

    /* Silu (ts_silu): x / (1 + e^-x), finite far from 0 on both sides (the
     * logistic from e^-|x|, never the exp of a large number) */
    {
        const float sx[N] = {-80.0f, -20.0f, -1.0f, 0.0f, 0.5f, 1.0f, 20.0f, 80.0f};
        ts_graph *g = ts_graph_new(1);
        int64_t shape[1] = {N};
        ts_tensor *x = ts_input(g, "a", TS_F32, 1, shape), *s = ts_silu(g, x);
        ts_model *m = NULL;
        ts_array in = ts_array_f32((float *)sx, 1, shape), out;
        const char *names[1] = {"a"};
        int ok = s && !ts_model_inference(&m, g, &s, 1, NULL) && !ts_model_run(m, names, &in, 1) && !ts_model_anchored(m, ts_tensor_name(s), &out);
        CHECK(ok, "silu runs: %s", ok ? "" : ts_last_error());
        int bad = -1;
        for (int i = 0; ok && i < N && bad < 0; i++)
            if (!same(((const float *)out.data)[i], (float)((double)sx[i] / (1.0 + exp(-(double)sx[i]))))) bad = i;
        CHECK(ok && bad < 0, "Silu: x sigmoid(x) from -80 to 80%s", bad < 0 ? "" : " (MISMATCH)");
        ts_model_free(m);
        ts_graph_free(g);
    }

    /* names the family does not have */
    {
        ts_graph *g = ts_graph_new(1);
        int64_t shape[1] = {N};
        ts_tensor *x = ts_input(g, "a", TS_F32, 1, shape);
        CHECK(ts_unary(g, "Sec", x, 0, 0) == NULL && ts_graph_status(g) == TS_ERR_INVALID_ARGUMENT && strstr(ts_last_error(), "Softplus"),
              "ts_unary of an unknown name fails, listing the family: %s", ts_last_error());
        ts_graph_free(g);
        g = ts_graph_new(1);
        x = ts_input(g, "a", TS_F32, 1, shape);
        CHECK(ts_binary(g, "Sin", x, x) == NULL && strstr(ts_last_error(), "GreaterOrEqual"),
              "ts_binary of a unary name fails, listing the binary ops: %s", ts_last_error());
        ts_graph_free(g);
    }
    return check_summary("test_ops_elementwise");
}
