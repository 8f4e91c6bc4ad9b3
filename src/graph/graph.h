/* graph.h -- the graph as the builder leaves it: nodes with names, ops,
 * declared shapes and the source location where each was built. */
#ifndef TS_GRAPH_H
#define TS_GRAPH_H

#include "core/core.h"

#define TS_MAX_INPUTS 8 /* inputs of one node */
#define TS_MAX_ATTRS 16 /* integer and float attributes of one node */

typedef enum ts_op {
    TS_OP_INPUT = 0,
    TS_OP_PARAM,
    TS_OP_MATMUL,
    TS_OP_MATMUL_T,
    TS_OP_ADD,
    TS_OP_SUB,
    TS_OP_MUL,
    TS_OP_SCALE,
    TS_OP_RELU,
    TS_OP_LOG,
    TS_OP_RESHAPE,
    TS_OP_FLATTEN,
    TS_OP_LOG_SOFTMAX,
    TS_OP_SOFTMAX,
    TS_OP_NLL_LOSS,
    TS_OP_CROSS_ENTROPY,
    TS_OP_SUM,
    TS_OP_MEAN,
    TS_OP_PRINT,
    /* tensor and transformer ops (kernels in backend/cpu/kernels_tensor.c) */
    TS_OP_CONST,        /* a leaf holding a value (f32 or i32) that gets no gradient */
    TS_OP_DIV,
    TS_OP_EXP,
    TS_OP_SQRT,
    TS_OP_POW,          /* fattr[0]: the exponent */
    TS_OP_ERF,
    TS_OP_GELU,         /* attr[0]: 1 = tanh approximation */
    TS_OP_EMBEDDING,    /* in: weight [V,C], indices i32 [...] */
    TS_OP_LAYER_NORM,   /* in: x, weight, bias; attr[0]: normalised trailing dims; fattr[0]: eps */
    TS_OP_GROUP_NORM,   /* in: x [N,C,...], weight [C], bias [C]; attr[0]: groups; fattr[0]: eps */
    TS_OP_BATCH_MATMUL, /* attr[0], attr[1]: a, b stored transposed */
    TS_OP_PERMUTE,      /* attr[0..ndim): the permutation */
    TS_OP_SLICE,        /* attr[0] dim, attr[1] start, attr[2] length */
    TS_OP_CONCAT,       /* attr[0] dim */
    TS_OP_WHERE,        /* in: cond i32 (a bool one converted), a, b */
    TS_OP_MASKED_FILL,  /* in: x, mask i32 (a bool one converted); fattr[0]: the fill value */
    TS_OP_REDUCE_SUM_AXES, /* attr[0]: axis bit mask, attr[1]: keepdim */
    TS_OP_REDUCE_MEAN_AXES,
    TS_OP_REDUCE_MAX_AXES,
    /* convolutional networks (cnn.c builds them, backend/cpu/cnn.c runs them) */
    TS_OP_BUFFER,         /* non-trainable state held by the graph (batch norm running stats) */
    TS_OP_CONV2D,
    TS_OP_MAX_POOL2D,
    TS_OP_AVG_POOL2D,
    TS_OP_GLOBAL_AVG_POOL,
    TS_OP_CONV3D,           /* in: x [N,C,D,H,W], w [OC,C/groups,KD,KH,KW], bias; attr: cnn_ops.h's C3_* */
    TS_OP_CONV_TRANSPOSE3D, /* in: x, w [C,OC/groups,KD,KH,KW], bias; Conv3d's attrs and the output padding */
    TS_OP_BATCH_NORM,
    TS_OP_DROPOUT_MASK,
    TS_OP_RANDOM_UNIFORM, /* in: a tensor of the output's shape (not read); attr[0]: the seed */
    TS_OP_TANH,
    TS_OP_SIGMOID,
    TS_OP_ABS,
    /* the elementwise unary family (backend/ew_math.h); fattr[0], fattr[1]:
     * alpha, beta where the op has them */
    TS_OP_CEIL,
    TS_OP_FLOOR,
    TS_OP_ROUND,
    TS_OP_CAST_INT,     /* truncation toward zero: a cast to an integer type */
    TS_OP_CAST_BOOL,    /* 1 where non-zero: a cast to bool */
    TS_OP_SIN,
    TS_OP_COS,
    TS_OP_TAN,          /* the trigonometric and hyperbolic functions and their inverses */
    TS_OP_ASIN,
    TS_OP_ACOS,
    TS_OP_ATAN,
    TS_OP_SINH,
    TS_OP_COSH,
    TS_OP_ASINH,
    TS_OP_ACOSH,
    TS_OP_ATANH,
    TS_OP_NOT,
    TS_OP_ISNAN,
    TS_OP_ISINF,        /* fattr[0]: +inf counts, fattr[1]: -inf counts */
    TS_OP_HARD_SWISH,
    TS_OP_HARD_SIGMOID, /* fattr[0] alpha, fattr[1] beta */
    TS_OP_LEAKY_RELU,   /* fattr[0] alpha */
    TS_OP_ELU,          /* fattr[0] alpha */
    TS_OP_SELU,         /* fattr[0] alpha, fattr[1] gamma */
    TS_OP_SOFTPLUS,
    TS_OP_CAST_LOWBITS, /* x rounded onto the grid of ONNX's low-precision type fattr[0] (core/lowbits.h), held in f32; fattr[1]: its rounding flags */
    TS_OP_CAST_FLOAT,   /* in: i32; its values as f32 (a cast of integers or bools to float) */
    TS_OP_CAST_INDEX,   /* out: i32; toward zero, clamped to [fattr[0], fattr[1]] (NaN: fattr[0]): indices the graph computed */
    /* the elementwise binary family, numpy broadcasting (backend/ew_math.h) */
    TS_OP_POWER,        /* a ** b, a tensor exponent */
    TS_OP_MAX,
    TS_OP_MIN,
    TS_OP_MOD,          /* the sign of the divisor */
    TS_OP_FMOD,         /* the sign of the dividend */
    TS_OP_EQUAL,
    TS_OP_GREATER,
    TS_OP_GREATER_EQUAL,
    TS_OP_LESS,
    TS_OP_LESS_EQUAL,
    TS_OP_AND,
    TS_OP_OR,
    TS_OP_XOR,
    TS_OP_SELECT,       /* Where with an f32 condition (non-zero = true), as the predicates give it */
    TS_OP_GATHER,       /* in: data, indices i32 (negative: from the end); attr[0]: the axis (Embedding is axis 0 of 2-D) */
    TS_OP_GATHER_ELEMENTS, /* in: data, indices i32 of data's rank; attr[0]: the axis (out[p] = data[p with idx[p] on the axis]) */
    TS_OP_CAST,         /* attr[0]: the ts_dtype (bf16, f16, f32) whose values the output holds (core/half.h) */
    TS_OP_PAD,          /* attr[d]: pad before dim d, attr[TS_MAX_DIMS + d]: after; iparam: ts_pad_mode; fparam: the constant */
    TS_OP_MAX_POOL2D_INDICES, /* MaxPool2d's attrs, PA_COLUMN_MAJOR: each winner's flat index into x (no gradient) */
    TS_OP_CONV_TRANSPOSE2D, /* in: x, w [C, OC/groups, KH, KW], bias; Conv2d's attrs and CA_OPH, CA_OPW: output padding */
    TS_OP_STOP_GRADIENT, /* x itself; no gradient flows back through it (PyTorch's detach) */
    /* in: q [B,H,T,D], k [B,Hk,S,D], v [B,Hk,S,Dv] (H a multiple of Hk:
     * query head h reads key head h / (H / Hk)), mask i32 broadcasting to
     * [B,H,T,S] (non-zero: the key is left out), optionally the same
     * attention built from the unfused ops (its twin); fattr[0]: the scale.
     * softmax(scale q k^T with the masked keys left out) v, in one pass
     * over the keys (ts_attention) */
    TS_OP_ATTENTION,
    /* conformance */
    /* in: a, b of one integer dtype, i32 or i64 (broadcast; Not reads a
     * only); out: a's dtype. attr[0]: the ts_bitwise_kind, attr[1]: the
     * integer type's bits, attr[2]: 1 when it is unsigned; the result
     * wraps to that type (ONNX's Bitwise* and BitShift); no gradient */
    TS_OP_BITWISE,
    /* integer tensors (i32, i64: backend/int_math.h); no gradient */
    TS_OP_CONVERT,      /* x's values as attr[0]'s dtype (f32, i32, i64; i8, i16, u8, u16 held in i32, u32, u64 in i64: wrapped, ts_int_as_type; bool):
                         * floats toward zero (saturated, NaN 0), i64 to i32 wrapped, as PyTorch's .to();
                         * to bool: 1 where non-zero (NaN included), from bool: 1 or 0;
                         * attr[1] = 1: indices (i32 out, saturated, NaN INT32_MIN: one out of int32 stays out of any range, for the run's check);
                         * attr[2]: the declared type of x's values (TS_U64: its bits read unsigned to f32, ts_int_to_float; else 0) */
    TS_OP_INT_ARITH,    /* in: a, b of one integer dtype (broadcast; Neg and Abs read a); attr[0]: the ts_int_kind, attr[1]: the declared
                         * integer type computed in (ts_int_arith_in); out: a's dtype, bool for the comparisons */
    TS_OP_INT_CUMSUM,   /* in: x i32 or i64; attr[0]: the axis, attr[1]: exclusive, attr[2]: reverse */
    TS_OP_INT_REDUCE,   /* in: x i32 or i64; attr[0]: the axes (bit d: dim d), attr[1]: keepdim, attr[2]: the ts_int_reduce_kind; out: x's dtype */
    TS_OP_INT_MATMUL,   /* in: a [..,M,K], b [..,K,N] of one integer dtype (the batch dims broadcast), c (optional, any integer dtype,
                         * broadcast to the output); attr[0], attr[1]: a, b stored transposed; out: a's dtype, the sums over K wrapping
                         * in it (backend/int_matmul.h). attr[2] = 1: Gemm's alpha AB + beta C in double, toward zero into the dtype
                         * (alpha's and beta's bits in attr[3], attr[4]); else AB (+ C), wrapping */
    /* in: x i32 or i64, taps i32, weights i64 (doubles' bits); resize
     * levels applied in order (8 at most): attr[2L] level L's dim (| 256:
     * its sums are numpy's pairwise ones, ts_int_resize_add),
     * attr[2L+1] its taps per output position | the dim's output size <<
     * 16 (0: taps' count / taps per position, one level; taps 0 ends the
     * levels); iparam: the values' declared type (0: x's dtype). Level L's
     * output position p along its dim is sum_t weights[q] * (the levels
     * before it at input position taps[q]), q = its level's offset + p *
     * taps + t, summed in double in order (ONNX's reference Resize); a tap
     * of -1 (the first of p's) is an extrapolated position: weights[q]
     * itself. Rounded half to even into x's dtype (ts_int_resize_last) */
    TS_OP_INT_RESIZE,
    TS_OP_SILU,         /* x sigmoid(x) (SiLU, Swish with beta 1): ew_math.h's unary family */
    TS_OP_RMS_NORM,     /* in: x, weight [D] (optional); over the last dim D: x / sqrt(mean(x^2) + eps) * weight; fattr[0]: eps */
    TS_OP_COUNT
} ts_op;

/* TS_OP_INT_ARITH's attr[0] (ts_binary's and ts_unary's names, in this
 * order): Div truncates toward zero (C, ONNX's integer Div), FloorDiv
 * rounds down (PyTorch's //), Mod takes the divisor's sign, FMod the
 * dividend's; a division by zero gives 0, as numpy's; Pow is the wrapping
 * integer power (graph/int_math.h) */
typedef enum ts_int_kind {
    TS_INT_ADD, TS_INT_SUB, TS_INT_MUL, TS_INT_DIV, TS_INT_FLOOR_DIV, TS_INT_MOD, TS_INT_FMOD, TS_INT_MIN, TS_INT_MAX,
    TS_INT_EQUAL, TS_INT_LESS, TS_INT_LESS_EQUAL, TS_INT_GREATER, TS_INT_GREATER_EQUAL, TS_INT_NEG, TS_INT_ABS, TS_INT_POW,
    /* Pow by a float exponent, in double (ts_int_pow_double): b an f32
     * tensor (its cells' bits; ts_binary's Pow of an integer tensor by an
     * f32 one), or an i64 one holding doubles' bits (ts_graph_int_pow_double) */
    TS_INT_POW_F32, TS_INT_POW_F64,
    TS_INT_COUNT
} ts_int_kind;

/* TS_OP_INT_REDUCE's attr[2] (ts_reduce_int's names, in this order):
 * computed in int64, sums and products wrapping, the result wrapped to
 * the tensor's width; Mean the exact mean truncated toward zero; L2,
 * LogSum and LogSumExp in double, as onnxruntime's (graph/int_math.h) */
typedef enum ts_int_reduce_kind {
    TS_INT_RED_SUM, TS_INT_RED_MEAN, TS_INT_RED_MAX, TS_INT_RED_MIN, TS_INT_RED_PROD, TS_INT_RED_SUM_SQUARE, TS_INT_RED_L1,
    TS_INT_RED_L2, TS_INT_RED_LOG_SUM, TS_INT_RED_LOG_SUM_EXP, TS_INT_RED_COUNT
} ts_int_reduce_kind;

/* TS_OP_BITWISE's attr[0] (ts_bitwise's op names, in this order) */
typedef enum ts_bitwise_kind {
    TS_BITWISE_AND, TS_BITWISE_OR, TS_BITWISE_XOR, TS_BITWISE_NOT, TS_BITWISE_SHIFT_LEFT, TS_BITWISE_SHIFT_RIGHT, TS_BITWISE_COUNT
} ts_bitwise_kind;

struct ts_tensor {
    ts_graph *g;
    int id;
    char *name;
    ts_op op;
    int n_in;
    int in[TS_MAX_INPUTS]; /* input tensor ids */
    ts_dtype dtype;
    ts_shape shape;     /* as declared / inferred at build time */
    float fparam;       /* scale factor */
    int iparam;         /* softmax dim, flatten start dim */
    int64_t attr[TS_MAX_ATTRS]; /* op-specific integer attributes (strides, pads, axes, ...) */
    float fattr[TS_MAX_ATTRS];  /* op-specific float attributes (eps, momentum, ...) */
    ts_shape sparam;    /* reshape target (may hold one -1) */
    char *title;        /* print op */
    const char *file;   /* where it was built (string literal of the caller, or a
                           graph-owned model file name for imported nodes) */
    int line;           /* line, or node index in an imported model file */
    const char *origin; /* imported nodes: the file's node name (graph-owned) */
    float *value;       /* parameters only: owned by the graph */
    /* Where not TS_F32: the 16-bit float (TS_BF16, TS_F16) this f32 tensor's
     * values lie on, and its gradient's once complete (a cast's output, the
     * copies a model's precision makes). The tensor's dtype, what kernels
     * read and write, stays f32. */
    ts_dtype grid;
    bool typed;         /* anchored values are returned as out_dtype (ts_tensor_set_output_dtype) */
    ts_dtype out_dtype;
    ts_dtype feed_dtype; /* an input's values' type where it is not its dtype: TS_U32, TS_U64 (held in i64), else TS_F32 */
    int onnx_type;      /* ONNX's low-precision type (core/lowbits.h) an import declared for this output, held in f32; 0: none */
    /* parameters: not updated (ts_param_set_trainable), and the settings
     * they are updated with when has_opt (ts_param_set_optimizer) */
    bool frozen;
    bool has_opt;
    ts_optimizer opt;
};

typedef struct ts_outfeed_mark {
    ts_outfeed *q;
    char *key;
    int tensor;
} ts_outfeed_mark;

struct ts_graph {
    ts_tensor **t;
    /* Bumped whenever the host writes the values the graph holds
     * (ts_param_set, a checkpoint restored, a device's run brought back):
     * a device's copies are sent again when it moved (exec/device.c). */
    uint64_t values_gen;
    /* A device holds newer values than the host (a model trained there):
     * values_fetch(values_owner) brings them back, when something reads
     * or writes them on the host (ts_graph_values_current). NULL: the
     * host's are current. */
    ts_status (*values_fetch)(void *owner);
    void *values_owner;
    size_t n, cap;
    char *scope[16];
    int n_scope;
    struct { char *prefix; int count; } *op_counts; /* "<scope>/<Op>" -> next k */
    size_t n_op_counts, cap_op_counts;
    ts_status sticky;
    char sticky_msg[1024];
    uint64_t rng;
    const char *file;
    int line;
    ts_outfeed_mark *marks;
    size_t n_marks, cap_marks;
    const char *origin; /* recorded on the next nodes with file/line */
    /* imported models: the file's value names (aliases), the outputs in file
     * order, and strings the nodes point to */
    struct { char *name; int tensor; } *aliases;
    size_t n_aliases, cap_aliases;
    int *outputs;
    size_t n_outputs, cap_outputs;
    char **strings;
    size_t n_strings, cap_strings;
    ts_strmap names;    /* tensor name -> id */
    ts_dtype precision; /* the 16-bit copies a model's precision gave the matmuls (autocast.c), else TS_F32 */
    int n_models;       /* models made on it and not freed */
    ts_strmap prefixes; /* "<scope>/<Op>" -> index in op_counts */
};

/* The most elements one tensor may have (64 GiB of f32). */
#define TS_MAX_NUMEL ((int64_t)1 << 34)
/* Saturates at INT64_MAX instead of overflowing, so a size check against
 * TS_MAX_NUMEL also catches shapes whose product does not fit. */
static inline int64_t ts_shape_numel(const ts_shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++)
        if (__builtin_mul_overflow(n, s->d[i], &n)) return INT64_MAX;
    return n;
}
/* The 4-byte cells one element of a graph tensor of dtype t takes: 2 for
 * i64, else 1 (16-bit tensors are held in f32 cells outside a program; a
 * bool tensor's cells are f32 holding 1.0 or 0.0, so that the float
 * kernels that move, select and compare read them as they are and a
 * watch's mean is the fraction that is true). */
static inline int64_t ts_dtype_cells(ts_dtype t) { return t == TS_I64 ? 2 : 1; }
/* The bytes one element of a program's entry of dtype t takes: a bool's
 * f32 cell, a 16-bit copy's 2, else the dtype's size. */
static inline size_t ts_dtype_cell_bytes(ts_dtype t) { return t == TS_BOOL ? sizeof(float) : ts_dtype_size(t); }
/* The 4-byte cells t's value takes (its elements times ts_dtype_cells). */
static inline int64_t ts_tensor_cells(const ts_tensor *t) { return ts_shape_numel(&t->shape) * ts_dtype_cells(t->dtype); }
bool ts_shape_equal(const ts_shape *a, const ts_shape *b);
/* out = broadcast of a and b by numpy's rules; false when they do not fit. */
bool ts_broadcast_shape(const ts_shape *a, const ts_shape *b, ts_shape *out);
/* "[16,784]" */
const char *ts_shape_str(const ts_shape *s, char *buf, size_t n);

/* Leaves whose values the graph holds: parameters (trained) and buffers
 * (state an op updates, e.g. batch norm running statistics; no gradient). */
static inline bool ts_op_holds_value(ts_op op) { return op == TS_OP_PARAM || op == TS_OP_BUFFER || op == TS_OP_CONST; }

/* A node's attributes as data: what the builders set on the nodes they
 * make (ts_graph_node), and what an op row's sample gives (ops.h). */
typedef struct ts_node_attrs {
    int64_t attr[TS_MAX_ATTRS];
    float fattr[TS_MAX_ATTRS];
    int iparam;
    float fparam;
    ts_shape sparam;
    const char *title; /* Print's (copied) */
    ts_dtype dtype;    /* the output's, for the ops whose builder sets it (any_dtype) */
} ts_node_attrs;

/* A node of `op` on n inputs with attributes a (NULL: none), through
 * ts_graph_add_node: every builder that only sets attributes makes its
 * node with it. NULL on error (sticky). */
ts_tensor *ts_graph_node(ts_graph *g, ts_op op, const ts_tensor *const *ins, int n, const ts_node_attrs *a);

/* TS_U32 or TS_U64 for an input of that type (ts_input: held in i64, its
 * values fed in the type's range, a uint64's as its bits); else 0 */
static inline ts_dtype ts_input_unsigned(const ts_tensor *t) {
    return t->op == TS_OP_INPUT && (t->feed_dtype == TS_U32 || t->feed_dtype == TS_U64) ? t->feed_dtype : (ts_dtype)0;
}

/* x (f32 values the graph computed, or i64) as i32 indices for a gather
 * or a loss: toward zero, saturated (NaN: INT32_MIN), so that one outside
 * int32 stays outside the table and the run's check before the op that
 * reads them names it (exec.c), rather than wrapping or clamping into it. */
ts_tensor *ts_graph_indices(ts_graph *g, ts_tensor *x);

/* a (i32 or i64, of the declared integer type `type`) to the power of
 * the doubles whose bits the i64 tensor `bits` holds (broadcast): a
 * TS_INT_POW_F64 node, computed in double (ts_int_pow_double) */
ts_tensor *ts_graph_int_pow_double(ts_graph *g, ts_tensor *a, ts_tensor *bits, ts_dtype type);

/* A TS_OP_INT_RESIZE node of x (i32 or i64, its values of the declared
 * type `type`, 0: x's dtype) by `levels` levels: level L resizes dim
 * dims[L] to out[L] positions of n_taps[L] taps each (summed pairwise,
 * as numpy's along a last axis, where pairwise[L]), their positions
 * (taps, i32) and weights (weights, i64 holding doubles' bits) in order,
 * level after level (graph.h's TS_OP_INT_RESIZE) */
ts_tensor *ts_graph_int_resize(ts_graph *g, ts_tensor *x, ts_tensor *taps, ts_tensor *weights, int levels, const int *dims, const bool *pairwise,
                               const int *n_taps, const int64_t *out, ts_dtype type);

/* A Convert node (TS_OP_CONVERT) of x, f32, i32, i64 or bool, to `to`
 * (f32, i32, i64 or bool), as ts_cast converts; the caller checks. */
ts_tensor *ts_graph_convert(ts_graph *g, const ts_tensor *x, ts_dtype to);

/* Gemm of integer tensors (TS_OP_INT_MATMUL, attr[2] = 1): alpha a' b' +
 * beta c (a', b': a, b transposed where ta, tb), a' b' summed in a's
 * dtype (wrapping), then in double and toward zero into a's dtype
 * (saturated), as ONNX's reference Gemm (numpy: np.dot, then astype); c
 * may be NULL, of any integer dtype, broadcast to [M, N]. */
ts_tensor *ts_graph_int_gemm(ts_graph *g, ts_tensor *a, ts_tensor *b, ts_tensor *c, int ta, int tb, double alpha, double beta);

/* A Cast node of x onto dtype's values (ts_cast's node), named `name`
 * (NULL: `<scope>/Cast:<k>`); dtype is checked by the caller. */
ts_tensor *ts_graph_cast_named(ts_graph *g, const ts_tensor *x, ts_dtype dtype, const char *name);

/* Attention in one op (TS_OP_ATTENTION): softmax(scale q k^T, the keys
 * where mask is non-zero left out) v, q [B,H,T,D], k [B,Hk,S,D], v
 * [B,Hk,S,Dv] (grouped-query where Hk < H: query head h reads key and
 * value head h / (H / Hk)), mask i32 broadcasting to [B,H,T,S]; a row whose keys are
 * all masked averages v, as a softmax over scores filled with one value.
 * `unfused` (or NULL): the same attention built from the graph's ops
 * (BatchMatMul, Scale, MaskedFill, Softmax, BatchMatMul), whose tensors
 * keep their names: a program runs the one pass when nothing observes
 * them, else the unfused ops and the node copies their result
 * (docs/backend.md, "Fused attention"). */
ts_tensor *ts_attention(ts_graph *g, ts_tensor *q, ts_tensor *k, ts_tensor *v, ts_tensor *mask, float scale, ts_tensor *unfused);

/* The 16-bit copies an Attention node's unfused twin reads (a model's
 * precision gives its products them: autocast.c), which the one pass then
 * reads as they would be: `which` bit 0, 1, 2 a copy of q, k, v (a 16-bit
 * Cast of the node's own input), bit 3 of the probabilities (one of a
 * Softmax of the twin); `dtype` their type (TS_F32: none). `why_not`: a
 * 16-bit Cast of the twin that is none of these, or copies of two types
 * (the pass cannot stand for the twin), else NULL. */
enum { TS_ATT_COPY_Q = 1, TS_ATT_COPY_K = 2, TS_ATT_COPY_V = 4, TS_ATT_COPY_P = 8 };
typedef struct ts_attn_copies {
    unsigned which;
    ts_dtype dtype;
    const char *why_not;
} ts_attn_copies;
ts_attn_copies ts_attention_copies(const ts_tensor *att);

/* Uniform float in [0,1) from the graph's seeded generator. */
double ts_graph_uniform(ts_graph *g);

/* `file:line`, and ` (origin)` for an imported node, into buf. */
const char *ts_tensor_where(const ts_tensor *t, char *buf, size_t n);
/* A copy of s owned by the graph (freed with it), for locations. */
const char *ts_graph_keep_string(ts_graph *g, const char *s);
/* Makes `alias` find t with ts_graph_find (an imported file's value name). */
ts_status ts_graph_add_alias(ts_graph *g, const char *alias, const ts_tensor *t);
/* The alias of t (the first one recorded), or NULL. */
const char *ts_graph_alias_of(const ts_graph *g, const ts_tensor *t);
/* Appends t to the graph's outputs (ts_graph_output_at). */
ts_status ts_graph_add_output(ts_graph *g, const ts_tensor *t);
/* `<scope>/<opname>:<k>` with the builder's own counters, for a node named
 * after an op other than its table row (an imported Gemm). */
char *ts_graph_op_output_name(ts_graph *g, const char *opname);
/* Adds a node with n inputs: checks them, runs setup(t, arg) on the new
 * node (attributes), infers its shape by the op table's rule, names it
 * `<scope>/<Op>:<k>` unless `name` is given. NULL on error (sticky). */
ts_tensor *ts_graph_add_node(ts_graph *g, ts_op op, const ts_tensor *const *ins, int n, const char *name,
                             void (*setup)(ts_tensor *, const void *), const void *arg);
/* "enc.block0" from the scope stack ("" at top level). */
void ts_graph_scope_path(const ts_graph *g, char *buf, size_t n);

/* Records a failure on the graph (first one wins) and returns NULL. */
ts_tensor *ts_graph_fail(ts_graph *g, ts_status code, const char *fmt, ...) TS_PRINTF(3, 4);
/* The host's copies of the values current: what a device holds newer
 * (values_fetch) brought back first. Every host reader and writer of
 * parameter values calls it; an error is the device's. */
ts_status ts_graph_values_current(ts_graph *g);

#endif
