/* ops.h -- the op table: one row per op with what the op means, on any
 * device: its name, arity, shape rule, gradient flags, cost and the scratch
 * it keeps. The kernels are each backend's (backend/backend.h: a kernel row
 * per op). Adding an op = one enum value (graph.h) + one row here + one
 * kernel row per backend (backend/cpu/cpu.c, backend/cuda/cuda.cu); the
 * row's sample is the op's test on every backend (docs/backend.md). */
#ifndef TS_OPS_H
#define TS_OPS_H

#include "graph/graph.h"

typedef ts_status (*ts_shape_fn)(const ts_tensor *node, const ts_shape *in, ts_shape *out);
typedef double (*ts_flops_fn)(const ts_shape *in, const ts_shape *out);

/* How the inputs of a sample of the op follow from one size x of a sweep
 * (the per-op test builds every row's samples at several sizes: odd ones,
 * rows longer than a block, one past 65536 elements). */
typedef enum ts_sample_shapes {
    TS_SAMPLE_AUTO = 0,   /* from the row: BROADCAST for the broadcasting shape rules, else SAME */
    TS_SAMPLE_SAME,       /* every input of x's shape */
    TS_SAMPLE_BROADCAST,  /* input 0 x, the others shapes that broadcast to it (x, a suffix, dims of 1) */
    TS_SAMPLE_MATMUL,     /* a [..,M,K] by b [..,K,N]; attr[0], attr[1]: a, b stored transposed (BatchMatMul's; MatMul B^T's sample sets attr[1]) */
    TS_SAMPLE_LABELS,     /* scores x [N,..,C], then integer labels [N,..] (x less its last dim) */
    TS_SAMPLE_INDICES,    /* data x, then integer indices of a shape of their own */
    TS_SAMPLE_TRAILING,   /* x, then inputs of x's last attr[0] dims (a layer norm's weight and bias) */
    TS_SAMPLE_CHANNELS,   /* x [N,C,..], then inputs [C] */
    TS_SAMPLE_CONV,       /* x [N,C,spatial..], weight [OC,C,k..], bias [OC] */
    TS_SAMPLE_CONV_T,     /* transposed: x [N,C,spatial..], weight [C,OC,k..], bias [OC] */
    TS_SAMPLE_ATTENTION,  /* q [B,H,T,D], k [B,H,S,D], v [B,H,S,Dv], integer mask [T,S] */
} ts_sample_shapes;

/* The values of a sample's integer inputs (int_inputs, and the data of a
 * sample whose dtype is an integer one) */
typedef enum ts_sample_ints {
    TS_SAMPLE_FLAGS = 0, /* 0 and 1 (int_hi: 0 .. int_hi-1; an i64 sample: every int64, its ends among them) */
    TS_SAMPLE_AXIS,      /* indices into input 0's dim attr[0] */
    TS_SAMPLE_LAST,      /* indices into input 0's last dim (labels) */
} ts_sample_ints;

/* What a generic sample of the op is: its inputs' shapes, dtypes and
 * values and the node's attributes. Semantics only: all zero (most rows)
 * means every input of one shape (or broadcasting, by the shape rule),
 * floats in [-1, 1), integer inputs 0 or 1, no attributes. */
typedef struct ts_op_sample {
    ts_sample_shapes shapes;
    int rank;              /* x's rank where the op takes only one (a pool's 4); 0: any */
    int n_in;              /* inputs of a variadic row (Concat's parts; a convolution's 3 with its bias) */
    float lo, hi;          /* the float inputs' domain [lo, hi) (Log's positive numbers, Atanh's (-1, 1)); both 0: [-1, 1) */
    ts_sample_ints ints;
    int32_t int_hi;        /* TS_SAMPLE_FLAGS: integer values 0 .. int_hi-1 (0: 2) */
    ts_dtype dtype;        /* the data inputs' dtype (f32; i32 or i64 for the integer ops) */
    unsigned state_inputs; /* bit j: input j is state the op updates (a buffer, no gradient) */
    /* the gradient is not the forward's derivative (a rounding whose
     * gradient passes straight through): no finite-difference check */
    bool straight_through;
    ts_node_attrs attrs;   /* the node's attributes (and an any_dtype op's output dtype) */
} ts_op_sample;

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
     * permutation, a slice, a concatenation, a gather, a Where, a Pad
     * whose constant border is 0), and its
     * output has their dtype (an integer output gets no gradient; an i64
     * one's 8-byte cells are moved as pairs of 4-byte ones: exec.c) */
    bool keeps_int;
    /* its builder checks its inputs' dtypes and sets the output's (the
     * integer ops: ts_cast, ts_binary, ts_unary and ts_cumsum on integers) */
    bool any_dtype;
    bool int_output;        /* its output is i32 (indices computed by the graph); no gradient */
    /* its output is bool: f32 cells holding 1 or 0 (a comparison, a
     * predicate, a logical op); no gradient */
    bool bool_output;
    /* bit j: input j takes a bool tensor: an integer input (a mask) gets
     * it as i32 1/0 (ts_graph_add_node converts it), a float one reads its
     * cells' 1 or 0 */
    unsigned bool_inputs;
    /* a gradient flows through: every backend has a backward kernel for
     * it (false: none, e.g. a dropout mask or a leaf) */
    bool has_backward;
    ts_shape_fn shape;
    ts_flops_fn flops;      /* forward FLOPs; backward counted as 2x */
    /* floats the forward keeps for the backward, per node (NULL: none);
     * the kernels' transient workspace is the backend's (ts_kernel_row) */
    size_t (*scratch_floats)(const ts_shape *in, const ts_shape *out);
    ts_op_sample sample;    /* a generic sample of the op (tests/test_backend_ops.c checks every row's) */
} ts_op_def;

#define TS_ARITY_VARIADIC (-1)

const ts_op_def *ts_op_get(ts_op op);
/* Whether input j of `op` is an integer input (no gradient flows to it). */
static inline bool ts_op_int_input(ts_op op, int j) { return (ts_op_get(op)->int_inputs >> j) & 1u; }

#endif
