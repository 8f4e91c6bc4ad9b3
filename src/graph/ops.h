/* ops.h -- the op table: one row per op with its name, arity, shape rule,
 * cost and forward/backward kernels. Adding an op = one enum value + one row. */
#ifndef TS_OPS_H
#define TS_OPS_H

#include "graph/graph.h"

/* What a kernel sees of one node at run time. */
typedef struct ts_kctx {
    const ts_tensor *node;
    int n_in;
    const float *in[TS_MAX_INPUTS];       /* float input values (NULL for integer inputs) */
    const int32_t *in_int[TS_MAX_INPUTS]; /* integer input values (labels, indices), else NULL */
    float *out;            /* output value */
    const float *dout;     /* gradient of the output */
    float *din[TS_MAX_INPUTS]; /* gradients of the inputs to accumulate into, or NULL */
    ts_shape in_shape[TS_MAX_INPUTS];
    ts_shape out_shape;
    float *scratch;        /* per-node scratch planned at compile, kept from forward to backward */
    float *workspace;      /* transient scratch shared by all nodes (valid during one kernel call) */
    bool training;         /* a training model (batch statistics, dropout on) */
    bool update_state;     /* forward may update buffers (training, not a diagnostic replay) */
    uint64_t iteration;    /* micro-batches trained before this one (seeds dropout) */
    struct ts_pool *pool;  /* worker threads for elementwise work */
} ts_kctx;

typedef ts_status (*ts_shape_fn)(const ts_tensor *node, const ts_shape *in, ts_shape *out);
typedef void (*ts_kernel_fn)(const ts_kctx *k);
typedef double (*ts_flops_fn)(const ts_shape *in, const ts_shape *out);

typedef struct ts_op_def {
    ts_op op;
    const char *name;       /* name in tensor names: `MatMul`, `Relu`, ... */
    int arity;              /* inputs; TS_ARITY_VARIADIC: 1..TS_MAX_INPUTS, checked by the shape rule */
    bool needs_output;      /* backward reads the forward output */
    /* bit j: the backward never reads input j's value, so the memory plan
     * may reuse its buffer once the forward consumers are done. 0 (the
     * default) = it reads every input: always safe, never wrong. */
    unsigned bwd_unread_inputs;
    bool view;              /* output = input 0's data reshaped: of a model input it shares the buffer, no copy */
    unsigned int_inputs;    /* bit j: input j is i32 (labels, indices) and gets no gradient */
    ts_shape_fn shape;
    ts_kernel_fn forward;
    ts_kernel_fn backward;  /* NULL: no gradient flows through */
    ts_flops_fn flops;      /* forward FLOPs; backward counted as 2x */
    size_t (*scratch_floats)(const ts_shape *in, const ts_shape *out);
    size_t (*workspace_floats)(const ts_shape *in, const ts_shape *out, int threads); /* transient, shared; threads: the pool's */
} ts_op_def;

#define TS_ARITY_VARIADIC (-1)

const ts_op_def *ts_op_get(ts_op op);
/* Whether input j of `op` is an integer input (no gradient flows to it). */
static inline bool ts_op_int_input(ts_op op, int j) { return (ts_op_get(op)->int_inputs >> j) & 1u; }

#endif
