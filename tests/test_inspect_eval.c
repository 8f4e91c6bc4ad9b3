/* test_inspect_eval.c -- ts_eval, the inspector's `eval` (docs/inspector.md#eval),
 * over a table of named arrays; every value is checked against arithmetic
 * done here, loop by loop:
 * - fc1.weight.T @ x[0], 2-D @ 2-D, 1-D @ 1-D; .T of a 3-D tensor;
 * - numpy's basic indexing: an index, negative ones, start:stop:step,
 *   negative steps, '...', bounds past the size clipped;
 * - + - * / ** with broadcasting, unary minus binding looser than **,
 *   comparisons giving 1 or 0;
 * - sum mean max min norm with and without an axis (axis=-1 too), abs
 *   sqrt exp log; where(pred, a, b) and where(pred) as np.argwhere;
 * - names with '.', '/' and ':' resolved greedily (the longest held name),
 *   one beginning with '/' where a value comes, a name in backticks, an
 *   i32 tensor read as numbers;
 * - errors: each a clear message naming the column (the right one), the
 *   right status, and nothing returned: an unknown name (the closest named),
 *   an index out of range, shapes that do not fit @ or broadcasting, an axis
 *   out of range, a missing ')' or ']', text after a complete expression, an
 *   unknown function, nesting past the limit, a result past the size limit. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "diag/inspect_eval.h"
#include "support/check.h"

enum { XR = 4, XC = 2, WR = 2, WC = 3 };
static float x[XR * XC], w[WR * WC], b[WC], mm[XR * WC], t3[2 * 3 * 4], odd[2], wide[1 << 14], tall[1 << 13];
static int32_t labels[XR];

typedef struct named {
    const char *name;
    ts_array a;
} named;
static named table[10];
static const char *names[10];
static int lookups;

static ts_status lookup(void *ctx, const char *name, ts_array *out) {
    (void)ctx;
    lookups++;
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (strcmp(table[i].name, name) == 0) return *out = table[i].a, TS_OK;
    return TS_ERR_NOT_FOUND;
}

static ts_status eval(const char *expr, ts_array *out) { return ts_eval(expr, names, sizeof names / sizeof *names, lookup, NULL, out); }

/* expr's shape and values are want[] (n of them, shape dims) to 1e-6 relative */
static void expect(const char *expr, int ndim, const int64_t *shape, const float *want, int64_t n) {
    ts_array a;
    ts_status st = eval(expr, &a);
    if (st) {
        CHECK(0, "%s: %s", expr, ts_last_error());
        return;
    }
    bool ok = a.dtype == TS_F32 && a.ndim == ndim && ts_array_numel(&a) == n;
    for (int i = 0; ok && i < ndim; i++) ok = a.shape[i] == shape[i];
    double worst = 0;
    for (int64_t i = 0; ok && i < n; i++) {
        float got = ((float *)a.data)[i];
        if (isnan(want[i]) ? !isnan(got) : fabs((double)got - want[i]) > 1e-6 * fmax(1.0, fabs((double)want[i]))) {
            ok = false;
            worst = (double)got - want[i];
        }
    }
    char s[96];
    CHECK(ok, "%s -> %s (%lld values as computed here)%s", expr, ts_array_shape_str(&a, s, sizeof s), (long long)n, ok ? "" : " MISMATCH");
    if (!ok) printf("     worst difference %g\n", worst);
    ts_eval_free(&a);
}

/* expr fails with `status`, its message naming column `col` and holding `part` */
static void expect_error(const char *expr, ts_status status, int col, const char *part) {
    ts_array a = {.data = (void *)1};
    ts_status st = eval(expr, &a);
    char head[64];
    snprintf(head, sizeof head, "eval: column %d: ", col);
    const char *msg = ts_last_error();
    CHECK(st == status && strncmp(msg, head, strlen(head)) == 0 && strstr(msg, part) && !a.data,
          "'%s': %s, at column %d, says '%s' (got %s: %s)", expr, ts_status_name(status), col, part, ts_status_name(st), msg);
}

int main(void) {
    for (int i = 0; i < XR * XC; i++) x[i] = (float)((i * 7) % 5) - 2.2f; /* mixed signs, no zeros */
    for (int i = 0; i < WR * WC; i++) w[i] = 0.25f * (float)i - 0.6f;
    for (int i = 0; i < WC; i++) b[i] = 1.0f + (float)i;
    for (int i = 0; i < XR * WC; i++) mm[i] = (float)i / 7.0f;
    for (int i = 0; i < 24; i++) t3[i] = (float)i;
    for (int i = 0; i < XR; i++) labels[i] = 3 * i - 2;
    odd[0] = 10, odd[1] = -20;
    table[0] = (named){"x", ts_array_f32(x, 2, (int64_t[]){XR, XC})};
    table[1] = (named){"fc1.weight", ts_array_f32(w, 2, (int64_t[]){WR, WC})};
    table[2] = (named){"fc1.bias", ts_array_f32(b, 1, (int64_t[]){WC})};
    table[3] = (named){"fc1/MatMul:0", ts_array_f32(mm, 2, (int64_t[]){XR, WC})};
    table[4] = (named){"t3", ts_array_f32(t3, 3, (int64_t[]){2, 3, 4})};
    table[5] = (named){"odd name!", ts_array_f32(odd, 1, (int64_t[]){2})};
    table[6] = (named){"labels", ts_array_i32(labels, 1, (int64_t[]){XR})};
    table[7] = (named){"wide", ts_array_f32(wide, 1, (int64_t[]){1 << 14})};
    table[8] = (named){"tall", ts_array_f32(tall, 2, (int64_t[]){1 << 13, 1})};
    table[9] = (named){"/fc1/Gemm_output_0", ts_array_f32(b, 1, (int64_t[]){WC})};
    for (int i = 0; i < 10; i++) names[i] = table[i].name;

    float want[64];
    /* fc1.weight.T @ x[0]: [3,2] @ [2] */
    for (int j = 0; j < WC; j++) want[j] = w[0 * WC + j] * x[0] + w[1 * WC + j] * x[1];
    expect("fc1.weight.T @ x[0]", 1, (int64_t[]){WC}, want, WC);
    /* x @ fc1.weight: [4,2] @ [2,3] */
    for (int i = 0; i < XR; i++)
        for (int j = 0; j < WC; j++) want[i * WC + j] = x[i * XC] * w[j] + x[i * XC + 1] * w[WC + j];
    expect("x @ fc1.weight", 2, (int64_t[]){XR, WC}, want, XR * WC);
    want[0] = b[0] * b[0] + b[1] * b[1] + b[2] * b[2];
    expect("fc1.bias @ fc1.bias", 0, NULL, want, 1);
    /* .T of a 3-D tensor: [4,3,2], out[i][j][k] = t3[k][j][i] */
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 2; k++) want[(i * 3 + j) * 2 + k] = t3[(k * 3 + j) * 4 + i];
    expect("t3.T", 3, (int64_t[]){4, 3, 2}, want, 24);

    /* indexing */
    want[0] = x[3 * XC + 1];
    expect("x[-1, -1]", 0, NULL, want, 1);
    for (int i = 0; i < 2; i++) want[2 * i] = x[(1 + i) * XC + 1], want[2 * i + 1] = x[(1 + i) * XC];
    expect("x[1:3, ::-1]", 2, (int64_t[]){2, 2}, want, 4);
    for (int i = 0; i < XR; i++) want[i] = x[(XR - 1 - i) * XC];
    expect("x[::-1, 0]", 1, (int64_t[]){XR}, want, XR);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) want[i * 3 + j] = t3[(i * 3 + j) * 4 + 1];
    expect("t3[..., 1]", 2, (int64_t[]){2, 3}, want, 6);
    for (int k = 0; k < 2; k++) want[k] = t3[(1 * 3 + 2) * 4 + 1 + 2 * k];
    expect("t3[1, -1, 1:99999999999999999999:2]", 1, (int64_t[]){2}, want, 2);
    expect("x[5:]", 2, (int64_t[]){0, XC}, want, 0);

    /* arithmetic, broadcasting, precedence */
    for (int i = 0; i < WR * WC; i++) want[i] = w[i] + b[i % WC];
    expect("fc1.weight + fc1.bias", 2, (int64_t[]){WR, WC}, want, WR * WC);
    for (int i = 0; i < XR; i++)
        for (int j = 0; j < WC; j++) want[i * WC + j] = x[i * XC] * b[j];
    expect("x[:, 0:1] * fc1.bias", 2, (int64_t[]){XR, WC}, want, XR * WC);
    for (int i = 0; i < XR * XC; i++) want[i] = -(x[i] * x[i]);
    expect("-x**2", 2, (int64_t[]){XR, XC}, want, XR * XC);
    for (int i = 0; i < XR * XC; i++) want[i] = 2 * x[i] - 1 / x[i] + 0.5f;
    expect("2*x - 1/x + 2**-1", 2, (int64_t[]){XR, XC}, want, XR * XC);
    for (int i = 0; i < XR * XC; i++) want[i] = (x[i] + 1) * 3;
    expect("(x + 1) * 3", 2, (int64_t[]){XR, XC}, want, XR * XC);
    for (int i = 0; i < XR * XC; i++) want[i] = x[i] > 0.5f;
    expect("x > 0.5", 2, (int64_t[]){XR, XC}, want, XR * XC);
    for (int i = 0; i < XR * XC; i++) want[i] = (float)((x[i] <= 1) + (x[i] == x[i]) + (x[i] != 2) * 10);
    expect("(x <= 1) + (x == x) + (x != 2) * 10", 2, (int64_t[]){XR, XC}, want, XR * XC);

    /* reductions and functions */
    double s = 0, n2 = 0;
    for (int i = 0; i < XR * XC; i++) s += x[i], n2 += (double)x[i] * x[i];
    want[0] = (float)s;
    expect("sum(x)", 0, NULL, want, 1);
    want[0] = (float)sqrt(n2);
    expect("norm(x)", 0, NULL, want, 1);
    for (int j = 0; j < XC; j++) {
        double c = 0;
        for (int i = 0; i < XR; i++) c += x[i * XC + j];
        want[j] = (float)(c / XR);
    }
    expect("mean(x, 0)", 1, (int64_t[]){XC}, want, XC);
    for (int i = 0; i < XR; i++) want[i] = fmaxf(x[i * XC], x[i * XC + 1]);
    expect("max(x, axis=-1)", 1, (int64_t[]){XR}, want, XR);
    want[0] = x[0];
    for (int i = 1; i < XR * XC; i++) want[0] = fminf(want[0], x[i]);
    expect("min(x)", 0, NULL, want, 1);
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 4; k++) {
            double c = 0;
            for (int j = 0; j < 3; j++) c += (double)t3[(i * 3 + j) * 4 + k] * t3[(i * 3 + j) * 4 + k];
            want[i * 4 + k] = (float)sqrt(c);
        }
    expect("norm(t3, 1)", 2, (int64_t[]){2, 4}, want, 8);
    for (int i = 0; i < XR * XC; i++) want[i] = sqrtf(fabsf(x[i])) + expf(x[i] / 4) - logf(fabsf(x[i]));
    expect("sqrt(abs(x)) + exp(x / 4) - log(abs(x))", 2, (int64_t[]){XR, XC}, want, XR * XC);
    for (int i = 0; i < XR * XC; i++) want[i] = x[i] > 0 ? x[i] : 0;
    expect("where(x > 0, x, 0)", 2, (int64_t[]){XR, XC}, want, XR * XC);
    int rows = 0;
    for (int i = 0; i < XR * XC; i++)
        if (x[i] < 0) want[2 * rows] = (float)(i / XC), want[2 * rows + 1] = (float)(i % XC), rows++;
    CHECK(rows > 0 && rows < XR * XC, "x has %d negative values of %d (the where() check means something)", rows, XR * XC);
    expect("where(x < 0)", 2, (int64_t[]){rows, 2}, want, 2 * rows);

    /* names */
    for (int i = 0; i < XR * WC; i++) want[i] = mm[i] * 2;
    expect("fc1/MatMul:0*2", 2, (int64_t[]){XR, WC}, want, XR * WC);
    want[0] = odd[1] + 1;
    expect("`odd name!`[1] + 1", 0, NULL, want, 1);
    for (int i = 0; i < XR; i++) want[i] = (float)labels[i] + 0.5f;
    expect("labels + 0.5", 1, (int64_t[]){XR}, want, XR);
    for (int j = 0; j < WC; j++) want[j] = b[j] - w[WC + j];
    expect("fc1.bias-fc1.weight[1]", 1, (int64_t[]){WC}, want, WC);
    for (int j = 0; j < WC; j++) want[j] = b[j] / b[j];
    expect("/fc1/Gemm_output_0 / /fc1/Gemm_output_0", 1, (int64_t[]){WC}, want, WC);

    /* errors: the column, the status, nothing returned */
    expect_error("x +", TS_ERR_INVALID_ARGUMENT, 4, "the expression ends where a value should come");
    expect_error("fc1.wieght + 1", TS_ERR_NOT_FOUND, 1, "no tensor named 'fc1.wieght'; closest: 'fc1.weight'");
    expect_error("x[0, 7]", TS_ERR_SHAPE, 6, "index 7 is out of range for dimension 1 of size 2");
    expect_error("x[1,2,3]", TS_ERR_SHAPE, 2, "3 indices for a tensor of 2 dimensions");
    expect_error("x @ x", TS_ERR_SHAPE, 3, "the inner sizes differ (2 and 4)");
    expect_error("t3 @ x", TS_ERR_SHAPE, 4, "operands of 1 or 2 dimensions");
    expect_error("1 + (x + fc1.bias)", TS_ERR_SHAPE, 8, "shapes [4,2] and [3] do not broadcast");
    expect_error("sum(x, 2)", TS_ERR_SHAPE, 8, "axis 2 is out of range");
    expect_error("(x + 1", TS_ERR_INVALID_ARGUMENT, 7, "expected ')' to close the '(' at column 1");
    expect_error("x[0", TS_ERR_INVALID_ARGUMENT, 4, "expected ',' or ']'");
    expect_error("x[0:1:0]", TS_ERR_INVALID_ARGUMENT, 7, "a slice's step cannot be 0");
    expect_error("x 2", TS_ERR_INVALID_ARGUMENT, 3, "unexpected '2' after a complete expression");
    expect_error("softmax(x)", TS_ERR_INVALID_ARGUMENT, 1, "no function 'softmax'");
    expect_error("`odd name", TS_ERR_INVALID_ARGUMENT, 1, "not closed");
    expect_error("x $ 1", TS_ERR_INVALID_ARGUMENT, 3, "unexpected '$'");
    expect_error("max(x[5:])", TS_ERR_INVALID_ARGUMENT, 1, "max of an empty array");
    expect_error("tall + wide", TS_ERR_INVALID_ARGUMENT, 6, "the result would have more than");
    char deep[256];
    memset(deep, '(', 200);
    strcpy(deep + 200, "x");
    expect_error(deep, TS_ERR_INVALID_ARGUMENT, TS_EVAL_MAX_DEPTH + 1, "nested more than");
    int before = lookups;
    expect_error("x + x + ", TS_ERR_INVALID_ARGUMENT, 9, "the expression ends");
    CHECK(lookups - before == 2, "a failed eval read the tensors it reached (%d) and returned nothing", lookups - before);
    ts_array a;
    CHECK(ts_eval(NULL, names, 10, lookup, NULL, &a) == TS_ERR_INVALID_ARGUMENT, "a NULL expression: TS_ERR_INVALID_ARGUMENT");
    return check_summary("test_inspect_eval");
}
