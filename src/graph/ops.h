/* ops.h -- the op table: one row per op with what the op means, on any
 * device: its name, arity, shape rule, gradient flags, cost and the scratch
 * it keeps. The kernels are each backend's (backend/backend.h: a kernel row
 * per op). Adding an op = one enum value (graph.h) + one row here + one
 * kernel row per backend (backend/cpu/cpu.c, backend/cuda/cuda.cu) + tests
 * (docs/backend.md). */
#ifndef TS_OPS_H
#define TS_OPS_H

#include "graph/graph.h"

typedef ts_status (*ts_shape_fn)(const ts_tensor *node, const ts_shape *in, ts_shape *out);
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
    /* its data inputs (those not in int_inputs) may be i32 or i64 as well
     * as f32, all of one dtype: the op only moves their cells (a view, a
     * permutation, a slice, a concatenation, a gather, a Where), and its
     * output has their dtype (an integer output gets no gradient; an i64
     * one's 8-byte cells are moved as pairs of 4-byte ones: exec.c) */
    bool keeps_int;
    /* its builder checks its inputs' dtypes and sets the output's (the
     * integer ops: ts_cast, ts_binary, ts_unary and ts_cumsum on integers) */
    bool any_dtype;
    bool int_output;        /* its output is i32 (indices computed by the graph); no gradient */
    /* a gradient flows through: every backend has a backward kernel for
     * it (false: none, e.g. a dropout mask or a leaf) */
    bool has_backward;
    ts_shape_fn shape;
    ts_flops_fn flops;      /* forward FLOPs; backward counted as 2x */
    /* floats the forward keeps for the backward, per node (NULL: none);
     * the kernels' transient workspace is the backend's (ts_kernel_row) */
    size_t (*scratch_floats)(const ts_shape *in, const ts_shape *out);
} ts_op_def;

#define TS_ARITY_VARIADIC (-1)

const ts_op_def *ts_op_get(ts_op op);
/* Whether input j of `op` is an integer input (no gradient flows to it). */
static inline bool ts_op_int_input(ts_op op, int j) { return (ts_op_get(op)->int_inputs >> j) & 1u; }

#endif
