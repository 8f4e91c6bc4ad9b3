/* onnx_ops.h -- what the files of the ONNX importer share (onnx.c and the
 * op families, onnx_<family>.c). Internal: nothing here is API.
 *
 * onnx.c walks the model: it parses the file, makes the graph's inputs and
 * initializers, and imports each node through its op table (one row per op
 * type: name -> import function). The other files:
 *   onnx_values.c: the importer's values: the table of the file's value names
 *     (graph tensors or host constants), node errors, node attributes, values
 *     made graph tensors (parameters, constants, samples repeated to the
 *     batch), and the small graph constants the ops compose with;
 *   onnx_data.c: the data of a TensorProto (an initializer, an attribute's
 *     tensor): its shape and type checked against the bytes it holds, its
 *     values decoded from the typed fields, the raw bytes or an external file
 *     inside the model's folder (opened one component at a time, following no
 *     link);
 *   onnx_elementwise.c: elementwise ops and activations: the binary and unary
 *     families (folded on constants), Max/Min/Sum/Mean, the activations
 *     composed of them, Clip, PRelu, Swish and SwiGLU, Softmax, LogSoftmax
 *     and Hardmax, Where, the bitwise ops;
 *   onnx_matmul.c: matrix products: MatMul (a tied weight's folded transpose
 *     read as its twin), Gemm, Einsum and Det;
 *   onnx_conv.c: convolutions and pooling: the window attributes (kernel,
 *     strides, dilations, pads, auto_pad), Conv and ConvTranspose in 1 to 3
 *     dims, Col2Im and CausalConvWithState, the max, average and Lp pools,
 *     the global pools and MaxUnpool;
 *   onnx_norm.c: normalizations: BatchNormalization (its running statistics
 *     as buffers), LayerNormalization, GroupNormalization and
 *     InstanceNormalization, LpNormalization, MeanVarianceNormalization,
 *     RMSNormalization and LRN;
 *   onnx_shape.c: shapes and tensor movement: Shape and Size, Reshape,
 *     Flatten, Squeeze and Unsqueeze, Transpose, Split, Slice, Concat,
 *     Expand, Pad, Tile, DepthToSpace and SpaceToDepth, CenterCropPad, Trilu,
 *     Identity and StopGradient, Dropout;
 *   onnx_types.c: constants and types: Constant, the folded-only ops
 *     (ConstantOfShape, Range), EyeLike, Cast and CastLike (the low-precision
 *     types' rounding), BitCast;
 *   onnx_gather.c: indexing: Gather and GatherElements, GatherND, Compress,
 *     OneHot, the Scatter ops and TensorScatter;
 *   onnx_reduce.c: reductions and scans along an axis: the Reduce ops (an
 *     empty constant's folded), ArgMax and ArgMin, TopK, CumSum and CumProd;
 *   onnx_loss.c: the file's own losses: NegativeLogLikelihoodLoss and
 *     SoftmaxCrossEntropyLoss (class weights, ignore_index, the reductions);
 *   onnx_sequence.c: sequence layers: Attention (masks, causal and sliding
 *     windows, grouped-query heads, past keys and values), RotaryEmbedding,
 *     LinearAttention, and LSTM, GRU and RNN (unrolled by onnx_rnn.c);
 *   onnx_resize.c: resampling: Resize (every mode and coordinate transform,
 *     antialiasing), Upsample, GridSample and AffineGrid;
 *   onnx_control.c: control flow: If (its branch chosen at import), Loop and
 *     Scan (their body imported once per iteration, the carried values
 *     threaded, the scan outputs stacked);
 * A value of the file is a graph tensor or a host constant (value); an
 * import function reads its node's inputs and attributes and writes its
 * outputs (node_io), through the helpers below. */
#ifndef TS_ONNX_OPS_H
#define TS_ONNX_OPS_H

#include "import/onnx_consts.h"
#include "import/onnx_fuse.h"
#include "import/onnx_torch.h"

#include "onnx.pb-c.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef TensorscopeOnnx__NodeProto Node;
typedef TensorscopeOnnx__TensorProto TensorProto;
typedef TensorscopeOnnx__AttributeProto Attr;

#define MAX_NODE_IO 16

/* If's branches and Loop's and Scan's bodies: graphs nest at most
 * MAX_GRAPH_DEPTH deep, and the nodes imported from them (a body once per
 * iteration, one more per iteration) number at most MAX_UNROLLED_NODES in
 * all (docs/onnx.md, "Control flow"). */
#define MAX_GRAPH_DEPTH 8
#define MAX_UNROLLED_NODES 100000

/* One value of the file: a graph tensor or a host constant. */
typedef struct value {
    const char *name; /* the file's name (points into the parsed model) */
    ts_tensor *t;     /* graph tensor, or NULL for a constant */
    ts_const c;       /* host constant when t is NULL */
    /* A float initializer: a parameter (made the first time a graph op
     * reads it), never folded; its data is decoded only when needed
     * (c.v NULL until then), straight from the file's bytes. */
    const TensorProto *param;
    /* The graph constant made from c the first time a graph op reads it
     * (c stays, for later folds): one tensor under the value's name. */
    ts_tensor *made;
    /* Where it is equal samples along dim 0, its first sample (ts_onnx_sample_of) */
    ts_tensor *sample;
    bool folded; /* a parameter folded from one and constants (TS_TORCH_FOLDED) */
    /* A parameter's PyTorch name where the file's metadata gives another
     * than the file's (onnx_torch.h; the file's name is then an alias,
     * unless it names a tensor of PyTorch's this is not: fused). */
    const char *pname;
    bool fused;
    /* The PyTorch parameter whose transpose this initializer is (a
     * Linear's weight the dynamo exporter stored as MatMul's B). */
    struct value *twin;
    /* An ONNX sequence (SequenceEmpty, SequenceInsert, ...): 1 + its index
     * in the importer's `seqs` (onnx_control.c); 0 for a tensor. */
    size_t seq;
} value;

/* An ONNX sequence known at import: the values it holds (its own copies),
 * never changed once made (SequenceInsert makes another). */
typedef struct ts_onnx_seq {
    value *items;
    int64_t n;
} ts_onnx_seq;

typedef struct importer {
    ts_graph *g;
    const char *path;
    char dir[4096];       /* the model's directory, for external data */
    const char *file;     /* basename, graph-owned, for locations */
    int64_t opset;
    value **v;
    size_t nv, capv;
    size_t *hash;         /* open addressing over v: index + 1, 0 = empty */
    size_t hcap;
    const Node *node;     /* the node being imported */
    int node_index;
    ts_strmap uses;       /* value name -> node inputs still to read it */
    ts_torch_fix *fix;    /* PyTorch's names the file's metadata gives back */
    size_t n_fix;
    ts_onnx_chain *chain; /* node chains imported as one op (onnx_fuse.h) */
    size_t n_chain;
    const TensorscopeOnnx__GraphProto *chain_graph; /* the graph they are of */
    size_t inputs_from, inputs_to; /* the graph tensors import_inputs made */
    int depth;            /* of the branch or body being imported (0: the model's graph) */
    int top_index;        /* the node of the model's graph that holds it */
    size_t unrolled;      /* nodes imported from branches and bodies so far */
    ts_onnx_seq *seqs;    /* the sequences made so far (value.seq), freed at the import's end */
    size_t n_seqs, cap_seqs;
} importer;

typedef struct node_io {
    value *in[MAX_NODE_IO];
    int n_in;
    value out[MAX_NODE_IO];
    int n_out;
} node_io;

/* The domain of tensorscope's own ops in an ONNX file, which its Python
 * wrapper writes where ONNX has no op: StopGradient, a torch detach(). */
#define TS_ONNX_DOMAIN "ai.tensorscope"

typedef struct offsets_ctx {
    int64_t q, kv, shift;
} offsets_ctx;

typedef struct value_ctx {
    int64_t n;
    float v;
} value_ctx;

typedef struct scatter_layer_ctx {
    const int64_t *src; /* per data element: the update written there in this layer, or -1 */
    int64_t n;
} scatter_layer_ctx;

/* onnx.c */
ts_status ts_onnx_import_node(importer *im, const Node *n, int index);
bool ts_onnx_array_dtype(int elem, ts_dtype *out);

/* onnx_values.c */
value *ts_onnx_lookup(const importer *im, const char *name);
ts_status ts_onnx_define(importer *im, const char *name, const value *val);
ts_status ts_onnx_node_error(const importer *im, ts_status code, const char *fmt, ...) TS_PRINTF(3, 4);
ts_status ts_onnx_fold_result(importer *im, ts_status st);
const Attr *ts_onnx_attr(const importer *im, const char *name);
int ts_onnx_attr_choice(const Attr *a, const char *const *choices, int n);
int64_t ts_onnx_attr_i(const importer *im, const char *name, int64_t def);
ts_status ts_onnx_attr_int(const importer *im, const char *name, int64_t def, int64_t lo, int64_t hi, int64_t *out);
ts_status ts_onnx_attr_int32(const importer *im, const char *name, int64_t def, int64_t lo, int64_t hi, int *out);
ts_status ts_onnx_attr_flag(const importer *im, const char *name, bool *out);
ts_status ts_onnx_attr_axis(const importer *im, const char *name, int64_t def, int ndim, bool end, int *out);
double ts_onnx_attr_f(const importer *im, const char *name, double def);
void ts_onnx_attr_ints(const importer *im, const char *name, const int64_t **v, int64_t *n);
ts_status ts_onnx_attr_int_list(const importer *im, const char *name, int64_t lo, int64_t hi, int64_t *out, int cap, int *n);
ts_tensor *ts_onnx_f32_of(importer *im, ts_tensor *t, ts_status *st);
ts_tensor *ts_onnx_i64_of(importer *im, value *v, ts_status *st);
ts_tensor *ts_onnx_i64_scalar(importer *im, int64_t k, ts_status *st);
ts_tensor *ts_onnx_int_scalar_like(importer *im, const ts_tensor *like, int64_t k, ts_status *st);
ts_tensor *ts_onnx_int_like(importer *im, value *v, const ts_tensor *like, ts_status *st);
ts_tensor *ts_onnx_broadcast_to(importer *im, ts_tensor *x, const ts_shape *to, ts_status *st);
ts_tensor *ts_onnx_repeated(importer *im, ts_tensor *sample, const ts_shape *to, ts_status *st);
ts_tensor *ts_onnx_sample_of(importer *im, value *v, int64_t batch, ts_status *st);
ts_tensor *ts_onnx_as_tensor(importer *im, value *v, ts_status *st);
const char *ts_onnx_bind_hint(const value *x);
bool ts_onnx_const_scalar(const value *v, double *s);
ts_status ts_onnx_built(importer *im, ts_tensor *t, value *out);
ts_status ts_onnx_need_consts(importer *im, node_io *io);
ts_status ts_onnx_const_ints(importer *im, value *x, int64_t *v, int *n, const char *what, int64_t lo, int64_t hi, bool clamp);
ts_status ts_onnx_axes_of(importer *im, node_io *io, int input, int input_since, int64_t *axes, int *n);
ts_tensor *ts_onnx_f32_constant(importer *im, const char *name, const ts_shape *shape, const float *v);
ts_tensor *ts_onnx_scalar_constant(importer *im, const char *what, float v);
bool ts_onnx_setting_scalar(importer *im, value *v, double *out, ts_status *st);
ts_tensor *ts_onnx_as_dtype_of(importer *im, ts_tensor *y, const ts_tensor *like);
ts_tensor *ts_onnx_computed_constant(importer *im, const char *what, const ts_shape *shape, void (*fill)(const void *, float *),
                                   const void *ctx, ts_status *st);
ts_tensor *ts_onnx_optional_f32(importer *im, node_io *io, int k, ts_status *st);
bool ts_onnx_output_wanted(const importer *im, const node_io *io, int k);
ts_status ts_onnx_attr_ints_n(importer *im, const char *name, int n, int64_t def, int64_t *v);
ts_status ts_onnx_graph_status(ts_graph *g, const ts_tensor *t);
ts_tensor *ts_onnx_scalar(ts_graph *g, const char *what, float v);

/* onnx_data.c */
bool ts_onnx_external(const TensorProto *tp);
ts_status ts_onnx_tensor_check(const importer *im, const TensorProto *tp, const char *what, ts_const *c);
ts_status ts_onnx_tensor_decode(const importer *im, const TensorProto *tp, const char *what, ts_const *c);
ts_status ts_onnx_tensor_to_const(const importer *im, const TensorProto *tp, const char *what, ts_const *c);
ts_status ts_onnx_decoded(const importer *im, value *v);

/* onnx_elementwise.c */
ts_status ts_onnx_op_binary(importer *im, node_io *io);
ts_status ts_onnx_op_unary(importer *im, node_io *io);
ts_status ts_onnx_op_variadic(importer *im, node_io *io);
ts_status ts_onnx_op_softmax(importer *im, node_io *io);
ts_status ts_onnx_op_where(importer *im, node_io *io);
ts_status ts_onnx_op_composed_unary(importer *im, node_io *io);
ts_status ts_onnx_op_clip(importer *im, node_io *io);
ts_status ts_onnx_op_prelu(importer *im, node_io *io);
ts_status ts_onnx_op_hardmax(importer *im, node_io *io);
ts_status ts_onnx_op_swish(importer *im, node_io *io);
ts_tensor *ts_onnx_as_i32(importer *im, value *v, ts_status *st);
ts_status ts_onnx_op_bitwise(importer *im, node_io *io);

/* onnx_matmul.c */
ts_tensor *ts_onnx_matmul_2d(importer *im, ts_tensor *a, ts_tensor *b, bool transb, ts_status *st);
/* Whether v is an integer graph tensor or an integer constant (no trained
 * parameter, no low-precision type): the ops that compute integers
 * exactly take it */
bool ts_onnx_int_operand(const value *v);
ts_status ts_onnx_op_matmul(importer *im, node_io *io);
ts_status ts_onnx_op_gemm(importer *im, node_io *io);
ts_status ts_onnx_op_einsum(importer *im, node_io *io);
ts_status ts_onnx_op_det(importer *im, node_io *io);

/* onnx_conv.c */
ts_status ts_onnx_op_conv(importer *im, node_io *io);
ts_status ts_onnx_op_conv_transpose(importer *im, node_io *io);
ts_status ts_onnx_op_pool(importer *im, node_io *io);
ts_status ts_onnx_op_lp_pool(importer *im, node_io *io);
ts_status ts_onnx_op_global_avg_pool(importer *im, node_io *io);
ts_status ts_onnx_op_global_max_pool(importer *im, node_io *io);
ts_status ts_onnx_op_max_unpool(importer *im, node_io *io);
ts_status ts_onnx_op_causal_conv(importer *im, node_io *io);
ts_status ts_onnx_op_col2im(importer *im, node_io *io);

/* onnx_norm.c */
ts_status ts_onnx_op_batch_norm(importer *im, node_io *io);
ts_status ts_onnx_op_layer_norm(importer *im, node_io *io);
ts_tensor *ts_onnx_spread_constant(importer *im, const char *what, int64_t n, const value *src, int64_t every, float v);
bool ts_onnx_const_filled(const value *v, double x);
ts_status ts_onnx_op_instance_norm(importer *im, node_io *io);
ts_status ts_onnx_op_group_norm(importer *im, node_io *io);
ts_status ts_onnx_op_lp_norm(importer *im, node_io *io);
ts_status ts_onnx_op_mvn(importer *im, node_io *io);
ts_status ts_onnx_op_rms_norm(importer *im, node_io *io);
ts_status ts_onnx_op_lrn(importer *im, node_io *io);

/* onnx_shape.c */
ts_status ts_onnx_op_stop_gradient(importer *im, node_io *io);
ts_status ts_onnx_op_identity(importer *im, node_io *io);
ts_status ts_onnx_op_dropout(importer *im, node_io *io);
ts_status ts_onnx_op_shape(importer *im, node_io *io);
ts_status ts_onnx_op_size(importer *im, node_io *io);
ts_status ts_onnx_op_reshape(importer *im, node_io *io);
ts_status ts_onnx_op_flatten(importer *im, node_io *io);
ts_status ts_onnx_op_squeeze_unsqueeze(importer *im, node_io *io);
ts_status ts_onnx_op_pad(importer *im, node_io *io);
ts_status ts_onnx_op_transpose(importer *im, node_io *io);
ts_status ts_onnx_op_split(importer *im, node_io *io);
ts_tensor *ts_onnx_strided(importer *im, ts_tensor *x, int ax, int64_t start, int64_t count, int64_t step, ts_status *st);
ts_status ts_onnx_op_slice(importer *im, node_io *io);
ts_status ts_onnx_op_concat(importer *im, node_io *io);
ts_status ts_onnx_op_expand(importer *im, node_io *io);
ts_status ts_onnx_op_trilu(importer *im, node_io *io);
ts_status ts_onnx_op_tile(importer *im, node_io *io);
ts_status ts_onnx_op_depth_space(importer *im, node_io *io);
ts_status ts_onnx_op_center_crop_pad(importer *im, node_io *io);

/* onnx_types.c */
ts_status ts_onnx_op_constant(importer *im, node_io *io);
ts_status ts_onnx_op_fold(importer *im, node_io *io);
ts_status ts_onnx_op_cast(importer *im, node_io *io);
ts_status ts_onnx_op_cast_like(importer *im, node_io *io);
ts_status ts_onnx_op_range(importer *im, node_io *io);
ts_status ts_onnx_op_eye_like(importer *im, node_io *io);
ts_status ts_onnx_op_bitcast(importer *im, node_io *io);

/* onnx_gather.c */
ts_status ts_onnx_op_gather(importer *im, node_io *io);
ts_status ts_onnx_op_one_hot(importer *im, node_io *io);
ts_status ts_onnx_op_gather_nd(importer *im, node_io *io);
ts_status ts_onnx_op_compress(importer *im, node_io *io);
void ts_onnx_fill_scatter_mask(const void *ctx, float *v);
ts_status ts_onnx_op_scatter(importer *im, node_io *io);
ts_status ts_onnx_op_tensor_scatter(importer *im, node_io *io);

/* onnx_reduce.c */
ts_status ts_onnx_op_reduce(importer *im, node_io *io);
ts_tensor *ts_onnx_iota_along(importer *im, int64_t n, int axis, int ndim, ts_status *st);
ts_tensor *ts_onnx_arg_extreme(importer *im, ts_tensor *x, int axis, bool min, bool last, ts_status *st);
ts_status ts_onnx_op_arg_extreme(importer *im, node_io *io);
ts_status ts_onnx_op_cumsum(importer *im, node_io *io);
void ts_onnx_fill_value(const void *ctx, float *v);
ts_status ts_onnx_op_cumprod(importer *im, node_io *io);
ts_status ts_onnx_op_topk(importer *im, node_io *io);

/* onnx_loss.c */
ts_status ts_onnx_op_loss(importer *im, node_io *io);

/* onnx_sequence.c */
ts_status ts_onnx_op_rnn(importer *im, node_io *io);
void ts_onnx_fill_offsets(const void *ctx, float *v);
ts_status ts_onnx_op_attention(importer *im, node_io *io);
ts_status ts_onnx_op_rotary(importer *im, node_io *io);
ts_status ts_onnx_op_linear_attention(importer *im, node_io *io);

/* onnx_resize.c */
ts_status ts_onnx_op_resize(importer *im, node_io *io);
ts_status ts_onnx_op_grid_sample(importer *im, node_io *io);
ts_status ts_onnx_op_affine_grid(importer *im, node_io *io);
ts_status ts_onnx_op_upsample(importer *im, node_io *io);

/* onnx_control.c */
ts_status ts_onnx_op_if(importer *im, node_io *io);
ts_status ts_onnx_op_loop(importer *im, node_io *io);
ts_status ts_onnx_op_sequence(importer *im, node_io *io);
ts_status ts_onnx_op_concat_from_sequence(importer *im, node_io *io);
ts_status ts_onnx_op_split_to_sequence(importer *im, node_io *io);
bool ts_onnx_takes_sequences(const char *op_type);
void ts_onnx_seqs_free(importer *im);
ts_status ts_onnx_op_scan(importer *im, node_io *io);

/* Whether the node's op is read at version `version` or newer: ONNX reads
 * each node by the newest version of its op at or below the model's opset,
 * so a change of version v applies from opset v on. */
static inline bool since(const importer *im, int64_t version) { return im->opset >= version; }

static inline bool is_const(const value *v) { return v && !v->t; }
static inline bool is_int_tensor(const ts_tensor *t) { return t && (t->dtype == TS_I32 || t->dtype == TS_I64); }

static inline int norm_axis(int64_t axis, int ndim) { return (int)(axis < 0 ? axis + ndim : axis); }

static inline const ts_shape *shape_of(const value *v) { return v->t ? &v->t->shape : &v->c.shape; }

/* A graph tensor of f32 values for an op that computes in f32: an i32
 * tensor (integer ids, bools) through CastFloat, a constant as a graph
 * constant first. */
/* v's values as an f32 graph tensor (ts_onnx_f32_of; a uint64's bits read
 * as the unsigned value, ts_cast_typed) */
static inline ts_tensor *as_f32(importer *im, value *v, ts_status *st) {
    ts_tensor *t = ts_onnx_as_tensor(im, v, st);
    if (t && t->dtype == TS_I64 && v->c.dtype == TS_ONNX_UINT64 && !(t = ts_cast_typed(im->g, t, TS_U64, TS_F32))) *st = ts_graph_status(im->g);
    return ts_onnx_f32_of(im, t, st);
}
/* A bool tensor (a comparison's) as the numbers 1 and 0 in f32, for the
 * arithmetic an op is composed of; another tensor as it is. */
static inline ts_tensor *num(ts_graph *g, ts_tensor *t) { return t && t->dtype == TS_BOOL ? ts_cast(g, t, TS_F32) : t; }

#endif
