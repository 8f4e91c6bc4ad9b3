/* test_nan.c -- NaN propagation through every kernel: a NaN in an input
 * reaches every output it feeds, as in PyTorch, so the stats table, the
 * gradients and the numeric checks see it instead of a silent 0. PyTorch's
 * rules, checked with torch 2.x:
 *   relu(nan) = nan, and its gradient there passes through (threshold
 *   backward zeroes only where the output is <= 0);
 *   softmax / log_softmax / cross entropy of a row with a NaN are all NaN;
 *   sums, means, products and matmuls with a NaN are NaN. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/kernels_tensor.h"

static int all_nan(const float *x, int n) {
    for (int i = 0; i < n; i++)
        if (!isnan(x[i])) return 0;
    return 1;
}

int main(void) {
    const float q = NAN;
    float x[4] = {q, -1.0f, 2.0f, 0.0f}, out[4], d[4], ones[4] = {1, 1, 1, 1};

    ts_relu_forward(NULL, out, x, 4);
    CHECK(isnan(out[0]) && out[1] == 0.0f && out[2] == 2.0f && out[3] == 0.0f, "relu keeps NaN (was turned into 0)");
    memset(d, 0, sizeof d);
    ts_relu_backward(NULL, d, ones, out, 4);
    CHECK(d[0] == 1.0f && d[1] == 0.0f && d[2] == 1.0f && d[3] == 0.0f, "relu's gradient passes at NaN, as PyTorch's");
    float gq[4] = {q, 1, 1, 1};
    memset(d, 0, sizeof d);
    ts_relu_backward(NULL, d, gq, out, 4);
    CHECK(isnan(d[0]), "a NaN gradient through relu stays NaN");

    ts_scale_forward(NULL, out, x, 2.0f, 4);
    CHECK(isnan(out[0]), "scale keeps NaN");
    ts_log_forward(NULL, out, x, 4);
    CHECK(isnan(out[0]) && isnan(out[1]), "log of NaN and of -1 is NaN");
    ts_copy_forward(NULL, out, x, 4);
    CHECK(isnan(out[0]), "copy keeps NaN");
    float acc[4] = {0, 0, 0, 0};
    ts_accumulate(NULL, acc, x, 4);
    CHECK(isnan(acc[0]), "accumulate keeps NaN");

    for (int kind = TS_BIN_ADD; kind <= TS_BIN_MUL; kind++) {
        float b[2] = {1.0f, q};
        ts_binary_forward(NULL, kind, out, x, b, 4, 2);
        CHECK(isnan(out[0]) && isnan(out[1]) && isnan(out[3]) && !isnan(out[2]), "binary %d: NaN in a or b gives NaN", kind);
        float da[4] = {0}, db[2] = {0};
        ts_binary_backward(NULL, kind, da, db, ones, x, b, 4, 2);
        CHECK(kind != TS_BIN_MUL || (isnan(db[0]) && isnan(da[1])), "binary %d backward carries NaN", kind);
    }

    float row[3] = {q, 1.0f, 2.0f}, y[3];
    ts_softmax_forward(y, row, 1, 3, 1);
    CHECK(all_nan(y, 3), "softmax of a row with NaN is all NaN");
    ts_log_softmax_forward(y, row, 1, 3, 1);
    CHECK(all_nan(y, 3), "log_softmax of a row with NaN is all NaN");
    float inf_row[3] = {INFINITY, 1.0f, 2.0f};
    ts_softmax_forward(y, inf_row, 1, 3, 1);
    CHECK(isnan(y[0]) || y[0] == 1.0f, "softmax with +inf is not silently finite garbage");
    float loss, probs[3];
    int32_t lab[1] = {1};
    ts_ce_forward(NULL, &loss, probs, row, lab, 1, 3, false, 0); /* the CrossEntropy op's kernel */
    CHECK(isnan(loss) && all_nan(probs, 3), "cross entropy of a row with NaN is NaN");
    float lp[3] = {-1.0f, q, -2.0f};
    ts_nll_forward(&loss, lp, lab, 1, 3);
    CHECK(isnan(loss), "nll of a NaN log-probability is NaN");
    ts_reduce_forward(&loss, x, 4, false);
    CHECK(isnan(loss), "sum keeps NaN");
    ts_reduce_forward(&loss, x, 4, true);
    CHECK(isnan(loss), "mean keeps NaN");

    float A[4] = {q, 0, 0, 1}, B[4] = {1, 2, 3, 4}, C[4];
    ts_gemm(false, false, 2, 2, 2, A, B, 0.0f, C);
    CHECK(isnan(C[0]) && isnan(C[1]) && !isnan(C[2]) && !isnan(C[3]), "matmul: a NaN reaches its row");
    return check_summary("test_nan");
}
