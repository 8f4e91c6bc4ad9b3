/* ops.h -- the op table: one row per op with its name, arity, shape rule,
 * cost and forward/backward kernels. Adding an op = one enum value + one row. */
#ifndef TS_OPS_H
#define TS_OPS_H

#include "graph/graph.h"

/* What a kernel sees of one node at run time. */
typedef struct ts_kctx {
    const ts_tensor *node;
    const float *in[2];    /* input values (labels arrive as int32 in in_i32) */
    const int32_t *in_i32; /* integer second input (labels) */
    float *out;            /* output value */
    const float *dout;     /* gradient of the output */
    float *din[2];         /* gradients of the inputs to accumulate into, or NULL */
    ts_shape in_shape[2];
    ts_shape out_shape;
    float *scratch;        /* per-node scratch planned at compile */
    struct ts_pool *pool;  /* worker threads for elementwise work */
} ts_kctx;

typedef ts_status (*ts_shape_fn)(const ts_tensor *node, const ts_shape *in, ts_shape *out);
typedef void (*ts_kernel_fn)(const ts_kctx *k);
typedef double (*ts_flops_fn)(const ts_shape *in, const ts_shape *out);

typedef struct ts_op_def {
    ts_op op;
    const char *name;       /* name in tensor names: `MatMul`, `Relu`, ... */
    int arity;
    bool needs_output;      /* backward reads the forward output */
    bool integer_input2;    /* second input is int32 labels (no gradient) */
    ts_shape_fn shape;
    ts_kernel_fn forward;
    ts_kernel_fn backward;  /* NULL: no gradient flows through */
    ts_flops_fn flops;      /* forward FLOPs; backward counted as 2x */
    size_t (*scratch_floats)(const ts_shape *in, const ts_shape *out);
} ts_op_def;

const ts_op_def *ts_op_get(ts_op op);

#endif
