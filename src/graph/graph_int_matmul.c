/* graph_int_matmul.c -- the builders of the integer matrix product
 * (TS_OP_INT_MATMUL): ts_matmul_int (numpy's matmul of integer tensors,
 * 1-D operands included) and Gemm's ts_graph_int_gemm. */
#include "graph/graph.h"
#include "graph/ops.h"

#include <string.h>

/* A TS_OP_INT_MATMUL node of a, b (and c where not NULL); mode 1: alpha
 * and beta, in double, as attr[3], attr[4]'s bits */
static ts_tensor *int_matmul(ts_graph *g, const char *what, ts_tensor *a, ts_tensor *b, ts_tensor *c, int ta, int tb, int mode, double alpha,
                             double beta) {
    if (!g || g->sticky) return NULL;
    if (!a || !b) return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "%s: an operand is NULL (an earlier builder call failed?)", what);
    if ((a->dtype != TS_I32 && a->dtype != TS_I64) || b->dtype != a->dtype)
        return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "%s: '%s' is %s and '%s' is %s; it multiplies i32 or i64 tensors of one dtype "
                             "(ts_cast one; ts_matmul_batched multiplies f32)", what, a->name, ts_dtype_name(a->dtype), b->name, ts_dtype_name(b->dtype));
    ts_node_attrs at = {.attr = {ta != 0, tb != 0, mode}, .dtype = a->dtype};
    memcpy(&at.attr[3], &alpha, sizeof alpha);
    memcpy(&at.attr[4], &beta, sizeof beta);
    return ts_graph_node(g, TS_OP_INT_MATMUL, (const ts_tensor *[]){a, b, c}, c ? 3 : 2, &at);
}

ts_tensor *ts_matmul_int(ts_graph *g, ts_tensor *a, ts_tensor *b) {
    if (!g || g->sticky) return NULL;
    if (!a || !b) return ts_graph_fail(g, TS_ERR_INVALID_ARGUMENT, "ts_matmul_int: an operand is NULL (an earlier builder call failed?)");
    if (a->shape.ndim < 1 || b->shape.ndim < 1)
        return ts_graph_fail(g, TS_ERR_SHAPE, "ts_matmul_int: '%s' has %d dims and '%s' %d; numpy's matmul takes operands of 1 dim or more",
                             a->name, a->shape.ndim, b->name, b->shape.ndim);
    /* numpy's 1-D operands: a [K] as [1, K], b [K] as [K, 1], that dim dropped from the product */
    bool a1 = a->shape.ndim == 1, b1 = b->shape.ndim == 1;
    ts_tensor *x = a1 ? ts_reshape(g, a, 2, (int64_t[]){1, a->shape.d[0]}) : a, *y = b1 ? ts_reshape(g, b, 2, (int64_t[]){b->shape.d[0], 1}) : b;
    ts_tensor *p = x && y ? int_matmul(g, "ts_matmul_int", x, y, NULL, 0, 0, 0, 1.0, 1.0) : NULL;
    if (!p || (!a1 && !b1)) return p;
    ts_shape s = {.ndim = 0};
    for (int i = 0; i < p->shape.ndim; i++)
        if (!((a1 && i == p->shape.ndim - 2) || (b1 && i == p->shape.ndim - 1))) s.d[s.ndim++] = p->shape.d[i];
    return ts_reshape(g, p, s.ndim, s.d);
}

ts_tensor *ts_graph_int_gemm(ts_graph *g, ts_tensor *a, ts_tensor *b, ts_tensor *c, int ta, int tb, double alpha, double beta) {
    return int_matmul(g, "Gemm of integers", a, b, c, ta, tb, 1, alpha, beta);
}
