/* onnx.c -- ONNX model files -> graph (docs/design.md#bring-your-own-model).
 *
 * The file is parsed with protobuf-c (src/import/proto/onnx.proto, a proto2
 * subset of ONNX's schema). Every value name of the file maps to either a
 * graph tensor or a host constant (initializers, Constant nodes, and what
 * the shape computations make of them). Nodes are imported in file order
 * (ONNX requires a topological order) through one table from op type to an
 * import function: with only constant inputs a node is folded on the host
 * (shape subgraphs: Shape, Gather, Concat, Unsqueeze, ConstantOfShape, Range,
 * Cast, Equal, Where, Slice, ... for the static input shapes given), else it
 * becomes builder calls. Float initializers become parameters under their
 * own names the first time a graph op reads them.
 *
 * The import functions of the ops live in one file per op family
 * (onnx_<family>.c, listed in onnx_ops.h, which declares what they share);
 * the op table here names them all. */
#include "core/half.h"
#include "core/lowbits.h"
#include "import/onnx_consts.h"
#include "import/onnx_fuse.h"
#include "import/onnx_rnn.h"
#include "import/onnx_torch.h"
#include "import/onnx_ops.h"

#include "onnx.pb-c.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef TensorscopeOnnx__ValueInfoProto ValueInfo;

/* The default domain's opsets read here: 1 to the newest of onnx 1.23.2
 * (onnx.defs.onnx_opset_version()). Each node is read by the version of
 * its op that the model's opset selects (the newest one not above it), see
 * `since`; an op of a version older than its row's `oldest` (op_table)
 * is refused. */
#define MIN_OPSET 1
#define MAX_OPSET 28

#define MAX_MODEL_BYTES ((size_t)1 << 31)

typedef ts_status (*import_fn)(importer *im, node_io *io);

/* One row per ONNX op type: the import table. `oldest` is the oldest
 * opset whose version of the op the row reads: the op's version at opset
 * 13 and the older ones that differ from it in types only (onnx.defs'
 * schemas: the same attributes, defaults, inputs and outputs, or a subset
 * read the same), and older ones still where the row reads them as their
 * spec says (Squeeze's, Unsqueeze's and ReduceSum's axes attribute,
 * Softmax's 2-D coercion, Dropout's ratio attribute). A node of a version
 * older than that is refused, never read as another version. */
static const struct {
    const char *op_type;
    int required;  /* inputs that must be present */
    int oldest;    /* opset */
    import_fn fn;
} op_table[] = {
    {"Abs", 1, 6, ts_onnx_op_unary},
    {"Acos", 1, 7, ts_onnx_op_unary},
    {"Acosh", 1, 9, ts_onnx_op_unary},
    {"Add", 2, 7, ts_onnx_op_binary},
    {"AffineGrid", 2, 20, ts_onnx_op_affine_grid},
    {"And", 2, 7, ts_onnx_op_binary},
    {"ArgMax", 1, 1, ts_onnx_op_arg_extreme},
    {"ArgMin", 1, 1, ts_onnx_op_arg_extreme},
    {"Asin", 1, 7, ts_onnx_op_unary},
    {"Asinh", 1, 9, ts_onnx_op_unary},
    {"Atan", 1, 7, ts_onnx_op_unary},
    {"Atanh", 1, 9, ts_onnx_op_unary},
    {"Attention", 3, 23, ts_onnx_op_attention},
    {"AveragePool", 1, 10, ts_onnx_op_pool},
    {"BatchNormalization", 5, 9, ts_onnx_op_batch_norm},
    {"BitCast", 1, 26, ts_onnx_op_bitcast},
    {"BitShift", 2, 11, ts_onnx_op_bitwise},
    {"BitwiseAnd", 2, 18, ts_onnx_op_bitwise},
    {"BitwiseNot", 1, 18, ts_onnx_op_bitwise},
    {"BitwiseOr", 2, 18, ts_onnx_op_bitwise},
    {"BitwiseXor", 2, 18, ts_onnx_op_bitwise},
    {"Cast", 1, 6, ts_onnx_op_cast},
    {"CausalConvWithState", 2, 27, ts_onnx_op_causal_conv},
    {"CastLike", 2, 13, ts_onnx_op_cast_like},
    {"Ceil", 1, 6, ts_onnx_op_unary},
    {"Celu", 1, 12, ts_onnx_op_composed_unary},
    {"CenterCropPad", 2, 18, ts_onnx_op_center_crop_pad},
    {"Clip", 1, 6, ts_onnx_op_clip},
    {"Col2Im", 3, 18, ts_onnx_op_col2im},
    {"Compress", 2, 9, ts_onnx_op_compress},
    {"Concat", 1, 4, ts_onnx_op_concat},
    {"ConcatFromSequence", 1, 11, ts_onnx_op_concat_from_sequence},
    {"Constant", 0, 1, ts_onnx_op_constant},
    {"ConstantOfShape", 1, 9, ts_onnx_op_fold},
    {"Conv", 2, 1, ts_onnx_op_conv},
    {"ConvTranspose", 2, 1, ts_onnx_op_conv_transpose},
    {"Cos", 1, 7, ts_onnx_op_unary},
    {"Cosh", 1, 9, ts_onnx_op_unary},
    {"CumProd", 2, 26, ts_onnx_op_cumprod},
    {"CumSum", 2, 11, ts_onnx_op_cumsum},
    {"DepthToSpace", 1, 1, ts_onnx_op_depth_space},
    {"Det", 1, 11, ts_onnx_op_det},
    {"Div", 2, 7, ts_onnx_op_binary},
    {"Dropout", 1, 10, ts_onnx_op_dropout},
    {"Elu", 1, 6, ts_onnx_op_unary},
    {"Equal", 2, 7, ts_onnx_op_binary},
    {"Einsum", 1, 12, ts_onnx_op_einsum},
    {"Erf", 1, 9, ts_onnx_op_unary},
    {"Exp", 1, 6, ts_onnx_op_unary},
    {"EyeLike", 1, 9, ts_onnx_op_eye_like},
    {"Expand", 2, 8, ts_onnx_op_expand},
    {"Flatten", 1, 1, ts_onnx_op_flatten},
    {"Floor", 1, 6, ts_onnx_op_unary},
    {"Gather", 2, 1, ts_onnx_op_gather},
    {"GatherElements", 2, 11, ts_onnx_op_gather},
    {"GatherND", 2, 11, ts_onnx_op_gather_nd},
    {"Gelu", 1, 13, ts_onnx_op_unary},
    {"Gemm", 2, 7, ts_onnx_op_gemm},
    {"GlobalAveragePool", 1, 1, ts_onnx_op_global_avg_pool},
    {"GlobalMaxPool", 1, 1, ts_onnx_op_global_max_pool},
    {"Greater", 2, 7, ts_onnx_op_binary},
    {"GreaterOrEqual", 2, 12, ts_onnx_op_binary},
    {"GridSample", 2, 16, ts_onnx_op_grid_sample},
    {"GroupNormalization", 3, 18, ts_onnx_op_group_norm},
    {"GRU", 3, 7, ts_onnx_op_rnn},
    {"HardSigmoid", 1, 6, ts_onnx_op_unary},
    {"Hardmax", 1, 1, ts_onnx_op_hardmax},
    {"HardSwish", 1, 13, ts_onnx_op_unary},
    {"If", 1, 1, ts_onnx_op_if},
    {"Identity", 1, 1, ts_onnx_op_identity},
    {"InstanceNormalization", 3, 6, ts_onnx_op_instance_norm},
    {"IsInf", 1, 10, ts_onnx_op_unary},
    {"IsNaN", 1, 9, ts_onnx_op_unary},
    {"LayerNormalization", 2, 13, ts_onnx_op_layer_norm},
    {"LeakyRelu", 1, 6, ts_onnx_op_unary},
    {"Less", 2, 7, ts_onnx_op_binary},
    {"LessOrEqual", 2, 12, ts_onnx_op_binary},
    {"Log", 1, 6, ts_onnx_op_unary},
    {"LogSoftmax", 1, 1, ts_onnx_op_softmax},
    {"LpNormalization", 1, 1, ts_onnx_op_lp_norm},
    {"LinearAttention", 3, 27, ts_onnx_op_linear_attention},
    {"LRN", 1, 1, ts_onnx_op_lrn},
    {"LpPool", 1, 11, ts_onnx_op_lp_pool},
    {"LSTM", 3, 7, ts_onnx_op_rnn},
    {"Loop", 0, 1, ts_onnx_op_loop},
    {"MatMul", 2, 1, ts_onnx_op_matmul},
    {"Max", 1, 6, ts_onnx_op_variadic},
    {"MaxPool", 1, 10, ts_onnx_op_pool},
    {"MaxUnpool", 2, 9, ts_onnx_op_max_unpool},
    {"Mean", 1, 6, ts_onnx_op_variadic},
    {"MeanVarianceNormalization", 1, 9, ts_onnx_op_mvn},
    {"Min", 1, 6, ts_onnx_op_variadic},
    {"Mish", 1, 18, ts_onnx_op_composed_unary},
    {"Mod", 2, 10, ts_onnx_op_binary},
    {"Mul", 2, 7, ts_onnx_op_binary},
    {"Neg", 1, 6, ts_onnx_op_unary},
    {"NegativeLogLikelihoodLoss", 2, 12, ts_onnx_op_loss},
    {"Not", 1, 1, ts_onnx_op_unary},
    {"OneHot", 3, 9, ts_onnx_op_one_hot},
    {"Or", 2, 7, ts_onnx_op_binary},
    {"Pad", 1, 11, ts_onnx_op_pad},
    {"Pow", 2, 7, ts_onnx_op_binary},
    {"PRelu", 2, 7, ts_onnx_op_prelu},
    {"Range", 3, 11, ts_onnx_op_range},
    {"Reciprocal", 1, 6, ts_onnx_op_unary},
    {"ReduceL1", 1, 1, ts_onnx_op_reduce},
    {"ReduceL2", 1, 1, ts_onnx_op_reduce},
    {"ReduceLogSum", 1, 1, ts_onnx_op_reduce},
    {"ReduceLogSumExp", 1, 1, ts_onnx_op_reduce},
    {"ReduceMax", 1, 1, ts_onnx_op_reduce},
    {"ReduceMean", 1, 1, ts_onnx_op_reduce},
    {"ReduceMin", 1, 1, ts_onnx_op_reduce},
    {"ReduceProd", 1, 1, ts_onnx_op_reduce},
    {"ReduceSum", 1, 1, ts_onnx_op_reduce},
    {"ReduceSumSquare", 1, 1, ts_onnx_op_reduce},
    {"Relu", 1, 6, ts_onnx_op_unary},
    {"Reshape", 2, 5, ts_onnx_op_reshape},
    {"Resize", 1, 11, ts_onnx_op_resize},
    {"RNN", 3, 7, ts_onnx_op_rnn},
    {"RMSNormalization", 2, 23, ts_onnx_op_rms_norm},
    {"RotaryEmbedding", 3, 23, ts_onnx_op_rotary},
    {"Round", 1, 11, ts_onnx_op_unary},
    {"Scatter", 3, 9, ts_onnx_op_scatter},
    {"ScatterElements", 3, 11, ts_onnx_op_scatter},
    {"ScatterND", 3, 11, ts_onnx_op_scatter},
    {"Scan", 0, 8, ts_onnx_op_scan},
    {"SequenceAt", 2, 11, ts_onnx_op_sequence},
    {"SequenceConstruct", 1, 11, ts_onnx_op_sequence},
    {"SequenceEmpty", 0, 11, ts_onnx_op_sequence},
    {"SequenceErase", 1, 11, ts_onnx_op_sequence},
    {"SequenceInsert", 2, 11, ts_onnx_op_sequence},
    {"SequenceLength", 1, 11, ts_onnx_op_sequence},
    {"Selu", 1, 6, ts_onnx_op_unary},
    {"Shape", 1, 1, ts_onnx_op_shape},
    {"Shrink", 1, 9, ts_onnx_op_composed_unary},
    {"Sigmoid", 1, 6, ts_onnx_op_unary},
    {"Sign", 1, 9, ts_onnx_op_composed_unary},
    {"Sin", 1, 7, ts_onnx_op_unary},
    {"Sinh", 1, 9, ts_onnx_op_unary},
    {"Size", 1, 1, ts_onnx_op_size},
    {"Slice", 3, 10, ts_onnx_op_slice},
    {"Softmax", 1, 1, ts_onnx_op_softmax},
    {"SoftmaxCrossEntropyLoss", 2, 12, ts_onnx_op_loss},
    {"Softplus", 1, 1, ts_onnx_op_unary},
    {"Softsign", 1, 1, ts_onnx_op_composed_unary},
    {"SpaceToDepth", 1, 1, ts_onnx_op_depth_space},
    {"Split", 1, 13, ts_onnx_op_split},
    {"SplitToSequence", 1, 11, ts_onnx_op_split_to_sequence},
    {"Sqrt", 1, 6, ts_onnx_op_unary},
    {"Squeeze", 1, 1, ts_onnx_op_squeeze_unsqueeze},
    {"Sub", 2, 7, ts_onnx_op_binary},
    {"Sum", 1, 6, ts_onnx_op_variadic},
    {"Swish", 1, 24, ts_onnx_op_swish},
    {"SwiGLU", 2, 28, ts_onnx_op_swish},
    {"Tan", 1, 7, ts_onnx_op_unary},
    {"Tanh", 1, 6, ts_onnx_op_unary},
    {"TensorScatter", 2, 24, ts_onnx_op_tensor_scatter},
    {"ThresholdedRelu", 1, 10, ts_onnx_op_composed_unary},
    {"Tile", 2, 6, ts_onnx_op_tile},
    {"TopK", 1, 1, ts_onnx_op_topk},
    {"Transpose", 1, 1, ts_onnx_op_transpose},
    {"Trilu", 1, 14, ts_onnx_op_trilu},
    {"Unsqueeze", 1, 1, ts_onnx_op_squeeze_unsqueeze},
    {"Upsample", 1, 7, ts_onnx_op_upsample},
    {"Where", 3, 9, ts_onnx_op_where},
    {"Xor", 2, 7, ts_onnx_op_binary},
    {"ai.tensorscope.StopGradient", 1, 1, ts_onnx_op_stop_gradient}, /* tensorscope's own domain: key "<domain>.<op type>" */
};

static const char *supported_list(void) {
    static char buf[1024];
    size_t used = 0;
    for (size_t i = 0; i < TS_ARRAY_LEN(op_table) && used < sizeof buf; i++)
        used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%s", i ? ", " : "", op_table[i].op_type);
    return buf;
}

static import_fn find_op(const char *op_type, int *required, int *oldest) {
    for (size_t i = 0; i < TS_ARRAY_LEN(op_table); i++)
        if (strcmp(op_table[i].op_type, op_type) == 0) {
            *required = op_table[i].required;
            *oldest = op_table[i].oldest;
            return op_table[i].fn;
        }
    return NULL;
}

/* ------------------------------------------------------------------ scope */

/* "/blocks.0/attn/MatMul" -> "blocks.0.attn" (the components before the
 * last, joined with dots); "" for a name without a scope. PyTorch names a
 * Sequential's child after its full path ("/layer4/layer4.0/conv1/Conv"):
 * a component that the next one repeats as its prefix is dropped, so the
 * scope is the module path of the parameters ("layer4.0.conv1"). */
static void scope_of(const char *name, char *buf, size_t n) {
    buf[0] = '\0';
    if (!name) return;
    const char *last = strrchr(name, '/');
    if (!last) return;
    size_t used = 0;
    for (const char *p = name; p < last && used + 1 < n;) {
        if (*p == '/') {
            p++;
            continue;
        }
        const char *end = p;
        while (end < last && *end != '/') end++;
        size_t len = (size_t)(end - p);
        const char *next = end < last ? end + 1 : NULL;
        /* "layer4" followed by "layer4.0": keep only the second */
        if (next && next < last && strncmp(next, p, len) == 0 && next[len] == '.') {
            p = end;
            continue;
        }
        if (used && used + 1 < n) buf[used++] = '.';
        for (; p < end && used + 1 < n; p++) {
            char c = *p;
            buf[used++] = (c == ':' || (unsigned char)c < 0x20 || c == '"' || c == '\\') ? '_' : c;
        }
    }
    while (used && buf[used - 1] == '.') used--;
    buf[used] = '\0';
}

/* The ops and attributes read here that exist in some of the opsets
 * MIN_OPSET..MAX_OPSET only (onnx.defs' schemas): one outside its versions is not
 * part of the op at the model's opset and is refused, never read (nor
 * ignored). A row without an attribute name is the op itself. */
static const struct {
    const char *op_type, *name;
    int from, until; /* opsets; until 0: still there */
    const char *instead;
} attr_versions[] = {
    {"LayerNormalization", NULL, 17, 0, NULL},
    {"Gelu", NULL, 20, 0, NULL},
    {"AveragePool", "dilations", 19, 0, NULL},
    {"BatchNormalization", "training_mode", 14, 0, NULL},
    {"Clip", "min", 1, 10, "from opset 11 on, the bounds are inputs 1 and 2"},
    {"Clip", "max", 1, 10, "from opset 11 on, the bounds are inputs 1 and 2"},
    {"Cast", "saturate", 19, 0, NULL},
    {"Cast", "round_mode", 24, 0, NULL},
    {"CastLike", "saturate", 19, 0, NULL},
    {"CastLike", "round_mode", 24, 0, NULL},
    {"Dropout", "ratio", 1, 11, "the ratio is input 1"},
    {"GRU", "layout", 14, 0, NULL},
    {"LSTM", "layout", 14, 0, NULL},
    {"RNN", "layout", 14, 0, NULL},
    {"Pad", "pads", 1, 10, "the pads are input 1"},
    {"Range", "stash_type", 27, 0, NULL},
    {"ReduceL1", "axes", 1, 17, "from opset 18 on, the axes are input 1"},
    {"ReduceL1", "noop_with_empty_axes", 18, 0, NULL},
    {"ReduceL2", "axes", 1, 17, "from opset 18 on, the axes are input 1"},
    {"ReduceL2", "noop_with_empty_axes", 18, 0, NULL},
    {"ReduceLogSum", "axes", 1, 17, "from opset 18 on, the axes are input 1"},
    {"ReduceLogSum", "noop_with_empty_axes", 18, 0, NULL},
    {"ReduceLogSumExp", "axes", 1, 17, "from opset 18 on, the axes are input 1"},
    {"ReduceLogSumExp", "noop_with_empty_axes", 18, 0, NULL},
    {"ReduceMax", "axes", 1, 17, "from opset 18 on, the axes are input 1"},
    {"ReduceMax", "noop_with_empty_axes", 18, 0, NULL},
    {"ReduceMean", "axes", 1, 17, "from opset 18 on, the axes are input 1"},
    {"ReduceMean", "noop_with_empty_axes", 18, 0, NULL},
    {"ReduceMin", "axes", 1, 17, "from opset 18 on, the axes are input 1"},
    {"ReduceMin", "noop_with_empty_axes", 18, 0, NULL},
    {"ReduceSum", "axes", 1, 12, "from opset 13 on, the axes are input 1"},
    {"ReduceSum", "noop_with_empty_axes", 13, 0, NULL},
    {"ReduceProd", "axes", 1, 17, "from opset 18 on, the axes are input 1"},
    {"ReduceProd", "noop_with_empty_axes", 18, 0, NULL},
    {"ReduceSumSquare", "axes", 1, 17, "from opset 18 on, the axes are input 1"},
    {"ReduceSumSquare", "noop_with_empty_axes", 18, 0, NULL},
    {"Reshape", "allowzero", 14, 0, NULL},
    {"Upsample", NULL, 7, 9, "Resize replaces it"},
    {"Shape", "start", 15, 0, NULL},
    {"Shape", "end", 15, 0, NULL},
    {"Split", "split", 1, 12, "the sizes are input 1"},
    {"Split", "num_outputs", 18, 0, NULL},
    {"Squeeze", "axes", 1, 12, "the axes are input 1"},
    {"Unsqueeze", "axes", 1, 12, "the axes are input 1"},
};

static ts_status check_attr_versions(const importer *im) {
    for (size_t i = 0; i < TS_ARRAY_LEN(attr_versions); i++) {
        int from = attr_versions[i].from, until = attr_versions[i].until;
        const char *name = attr_versions[i].name;
        if (strcmp(attr_versions[i].op_type, im->node->op_type) != 0 || (name && !ts_onnx_attr(im, name)) ||
            (since(im, from) && (!until || !since(im, until + 1))))
            continue;
        if (!name && until && since(im, until + 1))
            return ts_onnx_node_error(im, TS_ERR_FORMAT, "%s is part of the default ONNX domain up to opset %d only (%s); the model's opset has no "
                                      "such op", im->node->op_type, until, attr_versions[i].instead);
        if (!name)
            return ts_onnx_node_error(im, TS_ERR_FORMAT, "%s is part of the default ONNX domain from opset %d on; the model's opset has no such "
                                      "op (raise it to %d or more)", im->node->op_type, from, from);
        if (until)
            return ts_onnx_node_error(im, TS_ERR_FORMAT, "attribute '%s' is part of %s up to opset %d only (%s); re-export, or fix the exporter",
                                      attr_versions[i].name, im->node->op_type, until, attr_versions[i].instead);
        return ts_onnx_node_error(im, TS_ERR_FORMAT, "attribute '%s' is part of %s from opset %d on; the model's opset reads an older version "
                                  "without it (raise the model's opset, or drop the attribute)", attr_versions[i].name, im->node->op_type, from);
    }
    return TS_OK;
}

/* ----------------------------------------------------------------- import */

/* A folded constant is freed after the last node that reads it: counts
 * down the node's inputs' readers and frees what no node reads any more. */
static void release_values(importer *im, const Node *n) {
    for (size_t i = 0; i < n->n_input + n->n_output; i++) {
        bool in = i < n->n_input;
        const char *name = in ? n->input[i] : n->output[i - n->n_input];
        int left = name && *name ? ts_strmap_get(&im->uses, name) : -1;
        if (in && left > 0) ts_strmap_put(&im->uses, name, --left);
        value *v = left == 0 ? ts_onnx_lookup(im, name) : NULL;
        if (v && !v->t && !v->param) ts_const_free(&v->c);
    }
}

/* A node that would be folded (every input a constant that is not a
 * parameter) and whose outputs nothing reads: computing it would only cost
 * time and memory (ConstantOfShape of a large shape), so it is skipped. */
static bool folds_unread(importer *im, const Node *n) {
    for (size_t i = 0; i < n->n_input; i++) {
        if (!n->input[i] || !*n->input[i]) continue;
        const value *v = ts_onnx_lookup(im, n->input[i]);
        if (!v || v->t || v->param) return false;
    }
    for (size_t i = 0; i < n->n_output; i++)
        if (n->output[i] && *n->output[i] && ts_strmap_get(&im->uses, n->output[i]) != 0) return false;
    return true;
}

/* ------------------------------------------------ chains imported as one op */

static ts_onnx_chain *chain_of(importer *im, int index) {
    for (size_t c = 0; c < im->n_chain; c++)
        for (int k = 0; k < im->chain[c].n_node && !im->chain[c].off; k++)
            if (im->chain[c].node[k] == (size_t)index) return &im->chain[c];
    return NULL;
}

/* Whether the constant v holds exactly the ints want[0..n) (0 and -1 of
 * a Reshape where `lenient`: copy that dim, infer this one). */
static bool const_shape_is(const value *v, const int64_t *want, int n, bool lenient) {
    if (!v || !is_const(v) || v->param || !v->c.v || v->c.shape.ndim != 1 || v->c.shape.d[0] != n) return false;
    for (int i = 0; i < n; i++)
        if (v->c.v[i] != (double)want[i] && !(lenient && (v->c.v[i] == -1 || (v->c.v[i] == 0 && i < 2)))) return false;
    return true;
}

/* Whether a per-channel operand is C values: [C], or [C,1,...] one dim
 * fewer than x (against [N,C,...]); or one constant value ([1], the
 * exporter's unit scale and zero bias of GroupNorm(affine=False)) */
static bool per_channel_of(const value *v, int64_t C, int ndim) {
    const ts_shape *s = v ? shape_of(v) : NULL;
    if (s && ts_shape_numel(s) == 1 && s->ndim <= 1 && is_const(v) && !v->param && v->c.v) return true;
    if (!s || ts_shape_numel(s) != C || s->ndim < 1 || s->d[0] != C || (s->ndim != 1 && s->ndim != ndim - 1)) return false;
    return true;
}

/* A per-channel operand (per_channel_of) as [C]. */
static ts_tensor *channels_of(importer *im, value *v, int64_t C, const char *what, ts_status *st) {
    if (is_const(v) && !v->param && v->c.v) { /* a constant's C values, or its one value C times */
        ts_tensor *t = ts_onnx_spread_constant(im, what, C, v, ts_shape_numel(shape_of(v)) == 1 ? C : 1, 0.0f);
        if (!t) *st = ts_graph_status(im->g) ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
        return t;
    }
    ts_tensor *t = as_f32(im, v, st);
    if (t && t->shape.ndim != 1) t = ts_reshape(im->g, t, 1, &C);
    if (!t && !*st) *st = ts_graph_status(im->g);
    return t;
}

/* Whether v is one constant value (of any shape that broadcasts to
 * nothing larger than x's: one element) equal to x as a float */
static bool const_scalar_is(const value *v, float x) {
    return v && is_const(v) && !v->param && v->c.v && ts_shape_numel(&v->c.shape) == 1 && (float)v->c.v[0] == x;
}

/* Whether GELU's chain has its constants: x / sqrt(2), + 1, * 0.5, x f32 */
static bool gelu_fits(importer *im, const ts_onnx_chain *c) {
    const value *x = ts_onnx_lookup(im, c->x);
    return x && x->t && x->t->dtype == TS_F32 && const_scalar_is(ts_onnx_lookup(im, c->root2), 1.41421356237309504880f) &&
           const_scalar_is(ts_onnx_lookup(im, c->one), 1.0f) && const_scalar_is(ts_onnx_lookup(im, c->half), 0.5f) &&
           shape_of(ts_onnx_lookup(im, c->root2))->ndim <= x->t->shape.ndim && shape_of(ts_onnx_lookup(im, c->one))->ndim <= x->t->shape.ndim &&
           shape_of(ts_onnx_lookup(im, c->half))->ndim <= x->t->shape.ndim;
}

/* Whether v is one constant value of at most ndim dims (never a
 * parameter) */
static bool const_scalar_of(const value *v, int ndim) {
    return v && is_const(v) && !v->param && v->c.v && ts_shape_numel(&v->c.shape) == 1 && v->c.shape.ndim <= ndim;
}

/* Whether RMSNorm's chain has its values: x f32, the mean over its last
 * axis, the constants 2, eps >= 0 (kept in c->eps) and 1, and a weight of
 * the last dim's D values ([D], or [1,..,D]) */
static bool rms_norm_fits(importer *im, ts_onnx_chain *c) {
    const value *x = ts_onnx_lookup(im, c->x), *w = ts_onnx_lookup(im, c->weight), *e = ts_onnx_lookup(im, c->eps_in);
    if (!x || !x->t || x->t->dtype != TS_F32 || !w || !const_scalar_of(e, x->t->shape.ndim) || !(e->c.v[0] >= 0)) return false;
    int nd = x->t->shape.ndim;
    int64_t D = nd ? x->t->shape.d[nd - 1] : 0;
    const ts_shape *ws = shape_of(w);
    if (nd < 1 || ws->ndim < 1 || ws->ndim > nd || ws->d[ws->ndim - 1] != D || ts_shape_numel(ws) != D || (w->t && w->t->dtype != TS_F32))
        return false;
    if (c->two && !(const_scalar_of(ts_onnx_lookup(im, c->two), nd) && ts_onnx_lookup(im, c->two)->c.v[0] == 2.0)) return false;
    if (c->one && !(const_scalar_of(ts_onnx_lookup(im, c->one), nd) && ts_onnx_lookup(im, c->one)->c.v[0] == 1.0)) return false;
    const value *ax = c->axes_in ? ts_onnx_lookup(im, c->axes_in) : NULL;
    if (ax && !(is_const(ax) && !ax->param && ax->c.v && ts_shape_numel(&ax->c.shape) == 1)) return false;
    int64_t axis = ax ? (int64_t)ax->c.v[0] : c->axis;
    if (axis != -1 && axis != nd - 1) return false;
    c->eps = (float)e->c.v[0];
    return true;
}

/* Whether the chain's values make it nn.GroupNorm: x [N,C,...] reshaped
 * to [N,G,L], a unit scale and zero bias of G, the Reshape back to x's
 * shape, and C weights and biases. */
static bool chain_fits(importer *im, ts_onnx_chain *c) {
    if (c->kind == TS_ONNX_CHAIN_GELU) return gelu_fits(im, c);
    if (c->kind == TS_ONNX_CHAIN_SILU) { /* x an f32 graph tensor */
        const value *x = ts_onnx_lookup(im, c->x);
        return x && x->t && x->t->dtype == TS_F32;
    }
    if (c->kind == TS_ONNX_CHAIN_RMS_NORM) return rms_norm_fits(im, c);
    const value *x = ts_onnx_lookup(im, c->x), *s = ts_onnx_lookup(im, c->scale), *b = ts_onnx_lookup(im, c->bias);
    if (!x || !s || !b || !ts_onnx_const_filled(s, 1.0) || !ts_onnx_const_filled(b, 0.0)) return false;
    const ts_shape *xs = shape_of(x);
    int64_t G = shape_of(s)->ndim == 1 ? shape_of(s)->d[0] : 0;
    if (xs->ndim < 3 || G < 1 || xs->d[1] % G || (x->t && x->t->dtype != TS_F32)) return false;
    int64_t L = ts_shape_numel(xs) / (xs->d[0] * G);
    if (!const_shape_is(ts_onnx_lookup(im, c->shape_in), (int64_t[]){xs->d[0], G, L}, 3, true) ||
        !const_shape_is(ts_onnx_lookup(im, c->shape_out), xs->d, xs->ndim, false))
        return false;
    return per_channel_of(ts_onnx_lookup(im, c->weight), xs->d[1], xs->ndim) && per_channel_of(ts_onnx_lookup(im, c->shift), xs->d[1], xs->ndim);
}

/* A chain whose values do not make its op: its nodes but the last, one by one. */
static ts_status chain_one_by_one(importer *im, ts_onnx_chain *c) {
    c->off = true;
    ts_status st = TS_OK;
    for (size_t j = 0; j < im->chain_graph->n_node && !st; j++) /* in the file's order */
        for (int k = 0; k < c->n_node && !st; k++)
            if (j == c->node[k] && j != c->last) st = ts_onnx_import_node(im, im->chain_graph->node[j], (int)j);
    return st;
}

static void chain_inputs(importer *im, const ts_onnx_chain *c, node_io *io) {
    bool rms = c->kind == TS_ONNX_CHAIN_RMS_NORM;
    const char *names[5] = {c->x, rms ? c->weight : c->scale, c->bias, c->weight, c->shift};
    io->n_in = c->kind == TS_ONNX_CHAIN_GELU || c->kind == TS_ONNX_CHAIN_SILU ? 1 : rms ? 2 : 5;
    for (int i = 0; i < io->n_in; i++) io->in[i] = ts_onnx_lookup(im, names[i]);
}

/* RMSNorm's chain (onnx_fuse.h) as one RMSNorm op: x, and the weight as
 * [D] */
static ts_status op_rms_norm_chain(importer *im, node_io *io) {
    const ts_onnx_chain *c = chain_of(im, im->node_index);
    ts_status st = TS_OK;
    ts_tensor *x = ts_onnx_as_tensor(im, io->in[0], &st);
    int64_t D = x ? x->shape.d[x->shape.ndim - 1] : 0;
    ts_tensor *w = x ? channels_of(im, io->in[1], D, "Weight", &st) : NULL;
    return w ? ts_onnx_built(im, ts_rms_norm(im->g, x, w, c->eps), &io->out[0]) : st;
}

/* F.gelu's chain (onnx_fuse.h) as one GELU op of x */
static ts_status op_gelu_chain(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = ts_onnx_as_tensor(im, io->in[0], &st);
    return x ? ts_onnx_built(im, ts_gelu(im->g, x, 0), &io->out[0]) : st;
}

/* F.silu's chain (onnx_fuse.h) as one SiLU op of x */
static ts_status op_silu_chain(importer *im, node_io *io) {
    ts_status st = TS_OK;
    ts_tensor *x = ts_onnx_as_tensor(im, io->in[0], &st);
    return x ? ts_onnx_built(im, ts_silu(im->g, x), &io->out[0]) : st;
}

/* nn.GroupNorm's chain (onnx_fuse.h) as one group-norm op: x, the G of
 * the InstanceNormalization's scale, and the weight and bias as [C]. */
static ts_status op_group_norm_chain(importer *im, node_io *io) {
    const ts_onnx_chain *c = chain_of(im, im->node_index);
    ts_status st = TS_OK;
    ts_tensor *x = ts_onnx_as_tensor(im, io->in[0], &st);
    int64_t C = x ? x->shape.d[1] : 0;
    ts_tensor *w = x ? channels_of(im, io->in[3], C, "ScalePerChannel", &st) : NULL, *b = w ? channels_of(im, io->in[4], C, "BiasPerChannel", &st) : NULL;
    if (!b) return st;
    return ts_onnx_built(im, ts_group_norm(im->g, x, w, b, (int)shape_of(io->in[1])->d[0], c->eps), &io->out[0]);
}

/* Attention's chain (onnx_fuse.h), noted as the import reaches the
 * scale's node and the mask's (their constants are freed once read): the
 * scale a constant scalar (never a trained parameter), the mask a
 * constant, at most 4-D, of 0 (the key kept) and values at most -1e30
 * (left out: -inf, or finfo.min), or a Where's of non-zero (left out:
 * filled with a constant at most -1e30), none of its rows all masked (a
 * softmax of -inf gives NaN there, the one pass an average), made an i32
 * graph constant in the node's scope. */
static ts_status attention_note(importer *im, ts_onnx_chain *c, int index) {
    if ((size_t)index == c->scale_node && c->scale_by) {
        const value *v = ts_onnx_lookup(im, c->scale_by);
        double d;
        c->scale_bad = !v || !is_const(v) || v->param || !ts_onnx_const_scalar(v, &d) || d == 0.0 || !isfinite(d);
        if (!c->scale_bad) c->att_scale = (float)(c->scale_div ? 1.0 / d : d);
    }
    if ((size_t)index != c->mask_node || !c->mask) return TS_OK;
    const value *v = ts_onnx_lookup(im, c->mask);
    double fill = 0.0;
    c->mask_bad = true;
    if (!v || !is_const(v) || v->param || !v->c.v || v->c.shape.ndim > 4) return TS_OK;
    if (c->fill ? !ts_onnx_const_scalar(ts_onnx_lookup(im, c->fill), &fill) || !(fill <= -1e30) : !ts_onnx_dtype_is_float(v->c.dtype)) return TS_OK;
    const ts_shape *ms = &v->c.shape;
    int64_t n = ts_shape_numel(ms), row = ms->ndim ? ms->d[ms->ndim - 1] : 1;
    if (n < 1 || row < 1) return TS_OK;
    int32_t *m = ts_malloc((size_t)n * sizeof *m);
    if (!m) return TS_ERR_OUT_OF_MEMORY;
    bool fits = true;
    for (int64_t r = 0; r < n / row && fits; r++) {
        bool kept = false;
        for (int64_t j = 0; j < row && fits; j++) {
            double x = v->c.v[r * row + j];
            m[r * row + j] = x != 0.0;
            kept = kept || x == 0.0;
            fits = x == 0.0 || x <= -1e30 || c->fill; /* a Where's mask: non-zero is masked */
        }
        fits = fits && kept;
    }
    if (fits) {
        char *name = ts_graph_op_output_name(im->g, "KeysMasked");
        ts_array a = {.dtype = TS_I32, .ndim = ms->ndim, .data = m};
        for (int d = 0; d < ms->ndim; d++) a.shape[d] = ms->d[d];
        c->mask_t = name ? ts_constant(im->g, name, &a) : NULL;
        ts_free(name);
        c->mask_bad = !c->mask_t;
    }
    ts_free(m);
    return c->mask_t || !fits ? TS_OK : ts_graph_status(im->g) ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
}

/* k or v (j 0 or 1) of attention's chain before grouped-query's repeat:
 * x [B,Hk,S,D] unsqueezed to [B,Hk,1,S,D], expanded to [B,Hk,r,S,D] and
 * reshaped to `repeated` [B,Hk*r,S,D]; `repeated` itself where the values
 * are not so. */
static ts_tensor *heads_before_repeat(importer *im, const ts_onnx_chain *c, int j, ts_tensor *repeated) {
    const value *x = ts_onnx_lookup(im, c->kv_src[j]), *u = ts_onnx_lookup(im, c->kv_unsq[j]), *e = ts_onnx_lookup(im, c->kv_exp[j]);
    if (!x || !u || !e || !x->t || !u->t || !e->t || x->t->dtype != TS_F32 || x->t->shape.ndim != 4) return repeated;
    const int64_t *d = x->t->shape.d, *r = repeated->shape.d;
    ts_shape us = {5, {d[0], d[1], 1, d[2], d[3]}}, es = {5, {d[0], d[1], d[1] ? r[1] / d[1] : 0, d[2], d[3]}};
    bool fits = d[1] > 0 && r[1] % d[1] == 0 && r[0] == d[0] && r[2] == d[2] && r[3] == d[3] && ts_shape_equal(&u->t->shape, &us) &&
                ts_shape_equal(&e->t->shape, &es);
    return fits ? x->t : repeated;
}

/* Attention's chain at its last MatMul, whose result `out` holds: that
 * result made the one-pass Attention node with the chain's ops as its
 * unfused twin (ts_attention; docs/onnx.md, "Attention chains"), where q,
 * k and v are f32 [B,H,T,D], [B,H,S,D], [B,H,S,Dv] and the scale and mask
 * fit (attention_note); else left as it is. */
static ts_status attention_chain(importer *im, const ts_onnx_chain *c, value *out) {
    const value *q = ts_onnx_lookup(im, c->q), *k = ts_onnx_lookup(im, c->k), *v = ts_onnx_lookup(im, c->v);
    const ts_tensor *tq = q ? q->t : NULL, *tk = k ? k->t : NULL, *tv = v ? v->t : NULL;
    const char *why = NULL;
    if (!tq || !tk || !tv || !out->t || tq->dtype != TS_F32 || tk->dtype != TS_F32 || tv->dtype != TS_F32)
        why = "q, k or v is not an f32 tensor of the graph";
    else if (tq->shape.ndim != 4 || tk->shape.ndim != 4 || tv->shape.ndim != 4 || tq->shape.d[0] != tk->shape.d[0] || tq->shape.d[1] != tk->shape.d[1] ||
             tk->shape.d[0] != tv->shape.d[0] || tk->shape.d[1] != tv->shape.d[1] || tk->shape.d[2] != tv->shape.d[2] || tq->shape.d[3] != tk->shape.d[3])
        why = "q, k and v are not [B,H,T,D], [B,H,S,D] and [B,H,S,Dv]";
    else if (c->scale_bad) why = "its scale is not a constant";
    else if (c->mask_bad) why = "its mask is not a constant of 0 and -inf (or a masked fill of -inf) with a key kept in each row";
    if (why) {
        ts_logf(TS_LOG_DEBUG, "%s: node %d '%s': attention imported as its unfused ops: %s", im->path, im->node_index, im->node->name ? im->node->name : "", why);
        return TS_OK;
    }
    ts_tensor *mask = c->mask_t;
    if (!mask) {
        int32_t none = 0;
        char *name = ts_graph_op_output_name(im->g, "KeysMasked");
        mask = name ? ts_constant(im->g, name, &(ts_array){.dtype = TS_I32, .ndim = 1, .shape = {1}, .data = &none}) : NULL;
        ts_free(name);
    }
    ts_shape scores = {4, {tq->shape.d[0], tq->shape.d[1], tq->shape.d[2], tk->shape.d[2]}}, bc;
    if (mask && (!ts_broadcast_shape(&scores, &mask->shape, &bc) || !ts_shape_equal(&bc, &scores))) return TS_OK; /* the twin's Add broadcasts it to more */
    ts_tensor *kv[2] = {k->t, v->t};
    for (int j = 0; j < 2; j++) /* grouped-query: the keys and values before their repeat */
        if (c->kv_src[j]) kv[j] = heads_before_repeat(im, c, j, kv[j]);
    if (kv[0]->shape.d[1] != kv[1]->shape.d[1]) kv[0] = k->t, kv[1] = v->t;
    ts_tensor *att = mask ? ts_attention(im->g, q->t, kv[0], kv[1], mask, c->scale_by ? c->att_scale : 1.0f, out->t) : NULL;
    if (!att) return ts_graph_status(im->g) ? ts_graph_status(im->g) : TS_ERR_OUT_OF_MEMORY;
    out->t = att;
    return TS_OK;
}

/* The name of the value a MatMul reads in place of its own Linear weight
 * merged into another's (TS_TORCH_TRANSPOSED_COPY): the file's tensor,
 * whose twin is the weight; no tensor of the graph is ever so named. */
static const char *standin_name(const char *name, char *buf, size_t cap) {
    snprintf(buf, cap, "%s (as the file stores it)", name);
    return buf;
}

/* The declared integer type (uint32, int8, ...) an op that moves values
 * keeps on an integer graph tensor, for the integer ops after it that
 * compute in it (ts_binary_typed, ts_bitwise): its data input's (input
 * 0's; any of Concat's; Where's values). */
static void keep_int_type(const char *op, node_io *io) {
    static const char *const movers[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Slice", "Expand", "Gather",
                                         "Identity", "Tile", "Concat", "Where"};
    value *o = &io->out[0];
    if (io->n_out < 1 || !o->t || o->c.dtype || !is_int_tensor(o->t)) return;
    bool concat = strcmp(op, "Concat") == 0, where = strcmp(op, "Where") == 0, mover = false;
    for (size_t k = 0; k < TS_ARRAY_LEN(movers) && !mover; k++) mover = strcmp(op, movers[k]) == 0;
    for (int i = where ? 1 : 0; mover && i < (concat || where ? io->n_in : 1); i++)
        if (io->in[i] && io->in[i]->c.dtype && !ts_onnx_dtype_is_float(io->in[i]->c.dtype) && io->in[i]->c.dtype != TS_ONNX_BOOL) {
            o->c.dtype = io->in[i]->c.dtype;
            return;
        }
}

ts_status ts_onnx_import_node(importer *im, const Node *n, int index) {
    im->node = n;
    im->node_index = index;
    if (!n->op_type || !*n->op_type) return ts_onnx_node_error(im, TS_ERR_FORMAT, "the node has no op type (corrupt file?)");
    bool own = n->domain && strcmp(n->domain, TS_ONNX_DOMAIN) == 0; /* the ops the Python wrapper marks (a detach) */
    if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx") != 0 && !own)
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "op type %s of domain '%s' is not supported: tensorscope imports the default ONNX "
                                  "domain (opsets %d to %d) and its own, " TS_ONNX_DOMAIN ": %s", n->op_type, n->domain, MIN_OPSET, MAX_OPSET,
                                  supported_list());
    char key[160];
    snprintf(key, sizeof key, "%s%s%s", own ? TS_ONNX_DOMAIN : "", own ? "." : "", n->op_type);
    int required = 0, oldest = MIN_OPSET;
    import_fn fn = find_op(key, &required, &oldest);
    if (!fn)
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "op type %s is not supported yet; tensorscope imports: %s", n->op_type, supported_list());
    if (!since(im, oldest))
        return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "opset %lld has an older version of %s than tensorscope reads (that of opset %d and "
                                  "later); re-export with a newer opset, e.g. torch.onnx.export(..., opset_version=17)",
                                  (long long)im->opset, n->op_type, oldest);
    ts_status vst = check_attr_versions(im);
    if (vst) return vst;
    if (im->depth == 0) im->top_index = index;
    ts_onnx_chain *chain = im->depth == 0 ? chain_of(im, index) : NULL, *att = NULL;
    if (chain && chain->kind == TS_ONNX_CHAIN_ATTENTION) att = chain, chain = NULL; /* its nodes imported one by one */
    if (chain && (size_t)index != chain->last) return TS_OK; /* imported with the chain's last node */
    if (chain && !chain_fits(im, chain)) {
        ts_status cst = chain_one_by_one(im, chain);
        if (cst) return cst;
        im->node = n, im->node_index = index;
        chain = NULL;
    }
    if (chain)
        fn = chain->kind == TS_ONNX_CHAIN_GELU       ? op_gelu_chain
             : chain->kind == TS_ONNX_CHAIN_SILU     ? op_silu_chain
             : chain->kind == TS_ONNX_CHAIN_RMS_NORM ? op_rms_norm_chain
                                                     : op_group_norm_chain,
        required = 0;
    if (im->depth == 0 && folds_unread(im, n)) {
        ts_logf(TS_LOG_DEBUG, "%s: node %d '%s' (%s) computes constants nothing reads: skipped", im->path, index,
                n->name ? n->name : "", n->op_type);
        release_values(im, n);
        return TS_OK;
    }
    if (n->n_input > MAX_NODE_IO || n->n_output > MAX_NODE_IO || n->n_output == 0)
        return ts_onnx_node_error(im, TS_ERR_FORMAT, "%zu inputs and %zu outputs (1..%d outputs, at most %d inputs are read)", n->n_input,
                                  n->n_output, MAX_NODE_IO, MAX_NODE_IO);
    node_io io;
    memset(&io, 0, sizeof io);
    io.n_in = (int)n->n_input;
    io.n_out = (int)n->n_output;
    if (chain) chain_inputs(im, chain, &io);
    for (size_t i = 0; !chain && i < n->n_input; i++) {
        if (!n->input[i] || !*n->input[i]) continue; /* an omitted optional input */
        io.in[i] = ts_onnx_lookup(im, n->input[i]);
        if (!io.in[i])
            return ts_onnx_node_error(im, TS_ERR_FORMAT, "input '%s' is defined by no earlier node, initializer or graph input (the file is "
                                      "corrupt or its nodes are not in topological order)", n->input[i]);
    }
    for (size_t f = 0; f < im->n_fix && im->depth == 0; f++) { /* a parameter's own copy in place of a merged one, a dropped bias */
        const ts_torch_fix *x = &im->fix[f];
        if ((x->kind != TS_TORCH_COPY && x->kind != TS_TORCH_ZERO_BIAS && x->kind != TS_TORCH_TRANSPOSED_COPY) || x->node != (size_t)index ||
            x->input >= MAX_NODE_IO)
            continue;
        char standin[600];
        value *v = ts_onnx_lookup(im, x->kind == TS_TORCH_TRANSPOSED_COPY ? standin_name(x->name, standin, sizeof standin) : x->name);
        if (!v) continue;
        io.in[x->input] = v;
        if ((int)x->input >= io.n_in) io.n_in = (int)x->input + 1;
    }
    for (int i = 0; i < required; i++)
        if (i >= io.n_in || !io.in[i]) return ts_onnx_node_error(im, TS_ERR_FORMAT, "input %d is required but missing", i);
    for (int i = 0; i < io.n_in; i++)
        if (io.in[i] && io.in[i]->seq && !ts_onnx_takes_sequences(n->op_type))
            return ts_onnx_node_error(im, TS_ERR_UNSUPPORTED, "its input %d ('%s') is a sequence; tensorscope reads sequences in the Sequence ops, "
                                      "ConcatFromSequence and Loop, and %s takes tensors", i, n->input[i], n->op_type);
    char scope[512]; /* the module a dynamo export's node came from, or the scope of its name (TorchScript's /layer1/0/conv1/Conv) */
    if (!ts_torch_scope(n, scope, sizeof scope)) scope_of(n->name, scope, sizeof scope);
    ts_graph_at(im->g, im->file, im->top_index); /* a body's node: at the node that holds the body */
    im->g->origin = n->name && *n->name ? ts_graph_keep_string(im->g, n->name) : NULL;
    size_t first_new = ts_graph_tensor_count(im->g);
    ts_status st = scope[0] ? ts_scope_push(im->g, scope) : TS_OK;
    if (st) return ts_onnx_node_error(im, st, "%s", ts_last_error());
    if (att) st = attention_note(im, att, index);
    if (!st) st = fn(im, &io);
    if (!st) keep_int_type(n->op_type, &io);
    if (!st && att && (size_t)index == att->last) st = attention_chain(im, att, &io.out[0]);
    if (scope[0]) ts_scope_pop(im->g);
    if (st) {
        for (int i = 0; i < io.n_out; i++) ts_const_free(&io.out[i].c);
        if (strncmp(ts_last_error(), im->path, strlen(im->path)) == 0) return st;
        char msg[900]; /* a builder's error: say which node of the file */
        snprintf(msg, sizeof msg, "%s", ts_last_error());
        return ts_onnx_node_error(im, st, "%s", msg);
    }
    /* The node's result is named after its op type when the builder named
     * it after another op (Gemm = MatMul + Add). */
    for (int i = 0; i < io.n_out && !st; i++) {
        value *o = &io.out[i];
        if (o->t && !chain && !att && (size_t)o->t->id >= first_new && !ts_op_holds_value(o->t->op) && strcmp(ts_op_get(o->t->op)->name, n->op_type) != 0) {
            if (scope[0]) ts_scope_push(im->g, scope);
            char *name = ts_graph_op_output_name(im->g, n->op_type);
            if (scope[0]) ts_scope_pop(im->g);
            st = name ? ts_tensor_set_name(o->t, name) : TS_ERR_OUT_OF_MEMORY;
            ts_free(name);
        }
        if (!st && o->t && n->output[i] && *n->output[i]) st = ts_graph_add_alias(im->g, n->output[i], o->t);
        /* an output the op does not compute (Dropout's mask, ...) stays
         * undefined: a node that reads it fails with a clear message */
        if (!st && n->output[i] && *n->output[i] && (o->t || o->c.v || o->seq)) st = ts_onnx_define(im, n->output[i], o);
        else ts_const_free(&o->c);
    }
    for (int i = 0; i < io.n_out && !st; i++) {
        const ts_tensor *t = io.out[i].t;
        if (!t) continue;
        bool usable = ts_shape_numel(&t->shape) <= TS_MAX_NUMEL;
        for (int d = 0; d < t->shape.ndim; d++) usable = usable && t->shape.d[d] >= 0;
        char buf[96];
        if (!usable)
            return ts_onnx_node_error(im, TS_ERR_SHAPE, "its output %d would have the shape %s, more than 2^34 elements (check its attributes: "
                                      "pads, strides, kernel)", i, ts_shape_str(&t->shape, buf, sizeof buf));
    }
    if (!st && ts_log_enabled(TS_LOG_TRACE)) { /* what each node became (TS_LOG_VMODULE=onnx=5) */
        const value *o = &io.out[0];
        char buf[96];
        if (o->t) ts_logf(TS_LOG_TRACE, "%s: node %d '%s' (%s) -> '%s' %s %s", im->path, index, n->name ? n->name : "", n->op_type,
                          o->t->name, ts_dtype_name(o->t->dtype), ts_shape_str(&o->t->shape, buf, sizeof buf));
        else ts_logf(TS_LOG_TRACE, "%s: node %d '%s' (%s) -> a constant, folded at import", im->path, index, n->name ? n->name : "",
                     n->op_type);
    }
    if (!st && im->depth == 0) release_values(im, n); /* a body's values live until the import's end */
    return st;
}

/* The ts_dtype of ONNX's float, double, float16, bfloat16, integer and
 * bool types; false for the others (float8, int4, string, ...). */
bool ts_onnx_array_dtype(int elem, ts_dtype *out) {
    static const struct { int onnx; ts_dtype dt; } map[] = {
        {TS_ONNX_FLOAT, TS_F32},   {TS_ONNX_DOUBLE, TS_F64}, {TS_ONNX_INT32, TS_I32},  {TS_ONNX_INT64, TS_I64},
        {TS_ONNX_UINT8, TS_U8},    {TS_ONNX_BOOL, TS_BOOL},  {TS_ONNX_INT8, TS_I8},    {TS_ONNX_INT16, TS_I16},
        {TS_ONNX_UINT16, TS_U16},  {TS_ONNX_UINT32, TS_U32}, {TS_ONNX_UINT64, TS_U64}, {TS_ONNX_FLOAT16, TS_F16},
        {TS_ONNX_BFLOAT16, TS_BF16},
    };
    for (size_t i = 0; i < TS_ARRAY_LEN(map); i++)
        if (map[i].onnx == elem) {
            *out = map[i].dt;
            return true;
        }
    return false;
}

/* An input bound to a value at import: that constant, of the file's type
 * and, where the file gives them, its sizes. */
static ts_status bind_input(importer *im, const ValueInfo *vi, int elem, const ts_array *a) {
    const TensorscopeOnnx__TypeProto__Tensor *tt = vi->type->tensor_type;
    char got[128];
    ts_array_shape_str(a, got, sizeof got);
    int64_t n = ts_array_numel(a);
    if (n < 0 || (n > 0 && !a->data) || !ts_dtype_size(a->dtype))
        return ts_error(TS_ERR_INVALID_ARGUMENT, "%s: the value bound to input '%s' is no valid array (%s)", im->path, vi->name, got);
    /* the array's shape where the file's has dynamic sizes; the file's
     * where it is static and holds as many values ([1] for a scalar) */
    ts_shape s = {.ndim = a->ndim}, file = {.ndim = tt->shape ? (int)tt->shape->n_dim : -1};
    for (int d = 0; d < a->ndim; d++) s.d[d] = a->shape[d];
    bool fits = file.ndim < 0 || file.ndim == a->ndim, known = file.ndim >= 0 && file.ndim <= TS_MAX_DIMS;
    for (int d = 0; known && d < file.ndim; d++) {
        const TensorscopeOnnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        known = dim->has_dim_value && dim->dim_value >= 0;
        file.d[d] = known ? dim->dim_value : -1;
        fits = fits && (!known || file.d[d] == a->shape[d]);
    }
    if (!fits && known && ts_shape_numel(&file) == n) s = file, fits = true;
    if (!fits) return ts_error(TS_ERR_SHAPE, "%s: the value bound to input '%s' is %s, which is not the input's shape", im->path, vi->name, got);
    bool integer = !ts_onnx_dtype_is_float(elem);
    value v = {0};
    ts_status st = ts_const_fill(&s, elem, 0, &v.c);
    for (int64_t i = 0; !st && i < n; i++) {
        v.c.v[i] = ts_array_value(a, i);
        if (integer && v.c.v[i] != floor(v.c.v[i]))
            st = ts_error(TS_ERR_INVALID_ARGUMENT, "%s: the value bound to input '%s' holds %g at [%lld]; the input is %s", im->path, vi->name,
                          v.c.v[i], (long long)i, ts_onnx_dtype_name(elem));
    }
    if (!st && a->dtype == TS_I64 && elem == TS_ONNX_INT64) st = ts_const_set_exact(&v.c, a->data, n); /* beyond 2^53 too */
    if (!st) st = ts_onnx_define(im, vi->name, &v);
    if (st) ts_const_free(&v.c);
    return st;
}

static ts_status import_inputs(importer *im, const TensorscopeOnnx__GraphProto *gp, const ts_onnx_input *given, int n_given) {
    for (int k = 0; k < n_given; k++) {
        bool found = false;
        for (size_t i = 0; i < gp->n_input && !found; i++) found = gp->input[i]->name && strcmp(gp->input[i]->name, given[k].name) == 0;
        if (!found) {
            char names[512] = "";
            size_t used = 0;
            for (size_t i = 0; i < gp->n_input && used < sizeof names; i++)
                if (gp->input[i]->name && !ts_onnx_lookup(im, gp->input[i]->name))
                    used += (size_t)snprintf(names + used, sizeof names - used, "%s'%s'", used ? ", " : "", gp->input[i]->name);
            return ts_error(TS_ERR_NOT_FOUND, "%s has no input named '%s'; its inputs: %s", im->path, given[k].name, names);
        }
    }
    for (size_t i = 0; i < gp->n_input; i++) {
        const ValueInfo *vi = gp->input[i];
        if (!vi->name || !*vi->name) return ts_error(TS_ERR_FORMAT, "%s: graph input %zu has no name", im->path, i);
        if (ts_onnx_lookup(im, vi->name)) continue; /* an initializer listed as an input (IR < 4) */
        const ts_onnx_input *user = NULL;
        for (int k = 0; k < n_given; k++)
            if (strcmp(given[k].name, vi->name) == 0) user = &given[k];
        const TensorscopeOnnx__TypeProto__Tensor *tt = vi->type ? vi->type->tensor_type : NULL;
        if (!tt) return ts_error(TS_ERR_UNSUPPORTED, "%s: input '%s' is not a tensor", im->path, vi->name);
        int elem = tt->has_elem_type ? tt->elem_type : TS_ONNX_FLOAT;
        if (user && user->value) {
            ts_status st = bind_input(im, vi, elem, user->value);
            if (st) return st;
            continue;
        }
        ts_dtype dt;
        if (ts_onnx_dtype_is_float(elem) || ts_lowbits_is(elem)) dt = TS_F32; /* low precision: the values, exact in f32 */
        /* int64: exactly, in i64 (ids, positions, counts); uint32 and uint64 in i64 too (u32, u64 inputs: every
         * value of the type fed, a uint64 as its bits); bool: bool (masks); the other integers (ids, labels): i32 */
        else if (ts_onnx_array_dtype(elem, &dt))
            dt = elem == TS_ONNX_INT64 ? TS_I64 : elem == TS_ONNX_UINT32 || elem == TS_ONNX_UINT64 ? dt : elem == TS_ONNX_BOOL ? TS_BOOL : TS_I32;
        else return ts_error(TS_ERR_UNSUPPORTED, "%s: input '%s' has data type %s; tensorscope feeds float, bool and integer inputs "
                             "(8 to 64 bits, signed or not)", im->path, vi->name, ts_onnx_dtype_name(elem));
        ts_shape s = {0};
        if (tt->shape) {
            if (tt->shape->n_dim > TS_MAX_DIMS) return ts_error(TS_ERR_UNSUPPORTED, "%s: input '%s' has more than %d dimensions", im->path, vi->name, TS_MAX_DIMS);
            s.ndim = (int)tt->shape->n_dim;
        } else if (!user) {
            return ts_error(TS_ERR_INVALID_ARGUMENT, "%s: input '%s' has no shape in the file; give it (--input %s:D0xD1x...)", im->path,
                            vi->name, vi->name);
        }
        char dims[256] = "";
        size_t used = 0;
        for (int d = 0; d < s.ndim; d++) {
            const TensorscopeOnnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
            if (dim->has_dim_value && dim->dim_value > 0) s.d[d] = dim->dim_value;
            else s.d[d] = -1;
            /* a long dim_param is cut, never written past the buffer */
            if (used < sizeof dims)
                used += (size_t)snprintf(dims + used, sizeof dims - used, "%s%s", d ? "x" : "",
                                         s.d[d] > 0 ? "" : dim->dim_param && *dim->dim_param ? dim->dim_param : "?");
            if (s.d[d] > 0 && used < sizeof dims) used += (size_t)snprintf(dims + used, sizeof dims - used, "%lld", (long long)s.d[d]);
        }
        if (user) {
            if (user->ndim < 0 || user->ndim > TS_MAX_DIMS) return ts_error(TS_ERR_INVALID_ARGUMENT, "input '%s': ndim %d is out of range", vi->name, user->ndim);
            if (tt->shape && user->ndim != s.ndim)
                return ts_error(TS_ERR_SHAPE, "%s: input '%s' has %d dimensions (%s) but %d were given", im->path, vi->name, s.ndim, dims, user->ndim);
            /* a given size replaces the file's, dynamic or not: exporters
             * record the example's batch size, and shape computations are
             * folded for the sizes given here */
            for (int d = 0; d < user->ndim; d++) {
                if (user->shape[d] <= 0) return ts_error(TS_ERR_SHAPE, "input '%s': dimension %d must be positive", vi->name, d);
                s.d[d] = user->shape[d];
            }
            s.ndim = user->ndim;
        }
        for (int d = 0; d < s.ndim; d++)
            if (s.d[d] <= 0)
                return ts_error(TS_ERR_INVALID_ARGUMENT, "%s: input '%s' has the dynamic shape %s; give its static shape (ts_onnx_input, or "
                                "--input %s:%s with numbers)", im->path, vi->name, dims, vi->name, dims);
        ts_graph_at(im->g, im->file, -1);
        im->g->origin = "graph input";
        ts_tensor *t = ts_input(im->g, vi->name, dt, s.ndim, s.d);
        if (!t) return ts_graph_status(im->g);
        /* the type a CastLike reads; an integer input's type, which the bitwise ops compute in */
        value v = {.t = t, .c.dtype = ts_lowbits_is(elem) || t->dtype != TS_F32 ? elem : 0};
        ts_status st = ts_onnx_define(im, vi->name, &v);
        if (st) return st;
    }
    return TS_OK;
}

/* A node's name for messages: its name, else its place in the graph. */
static const char *node_label(const Node *n, size_t i, char *buf, size_t cap) {
    if (n->name && *n->name) return n->name;
    snprintf(buf, cap, "#%zu", i);
    return buf;
}

/* Every value has one writer (static single assignment, as onnx.checker
 * requires): a node output that another node, a graph input or an
 * initializer already defines is refused, naming both. */
static ts_status single_writers(importer *im, const TensorscopeOnnx__GraphProto *gp) {
    enum { INPUT = -3, INITIALIZER = -2 }; /* else the writing node's index (-1: none yet) */
    ts_strmap w = {0};
    ts_status st = TS_OK;
    /* an initializer may also be listed as an input (IR version < 4) */
    for (size_t i = 0; !st && i < gp->n_input; i++)
        if (gp->input[i]->name && *gp->input[i]->name) st = ts_strmap_put(&w, gp->input[i]->name, INPUT);
    for (size_t i = 0; !st && i < gp->n_initializer; i++)
        if (gp->initializer[i]->name && *gp->initializer[i]->name) st = ts_strmap_put(&w, gp->initializer[i]->name, INITIALIZER);
    for (size_t i = 0; !st && i < gp->n_node; i++) {
        const Node *n = gp->node[i];
        for (size_t k = 0; !st && k < n->n_output; k++) {
            const char *name = n->output[k];
            if (!name || !*name) continue; /* an optional output left out */
            int prev = ts_strmap_get(&w, name);
            char a[32], b[32];
            if (prev == INPUT || prev == INITIALIZER)
                st = ts_error(TS_ERR_FORMAT, "%s: node '%s' (%s) writes '%s', which is a graph %s; every value has one writer (onnx.checker "
                              "refuses this graph too): rename the node's output",
                              im->path, node_label(n, i, a, sizeof a), n->op_type, name, prev == INPUT ? "input" : "initializer");
            else if (prev >= 0)
                st = ts_error(TS_ERR_FORMAT, "%s: nodes '%s' (%s) and '%s' (%s) both write '%s'; every value has one writer (onnx.checker "
                              "refuses this graph too): rename one of the outputs",
                              im->path, node_label(gp->node[prev], (size_t)prev, a, sizeof a), gp->node[prev]->op_type,
                              node_label(n, i, b, sizeof b), n->op_type, name);
            else
                st = ts_strmap_put(&w, name, (int)i);
        }
    }
    ts_strmap_free(&w);
    return st;
}

/* How many node inputs read each value (0 for a node output no node
 * reads; a graph output counts as one reader more), so ts_onnx_import_node frees a
 * folded constant after its last reader and skips what nothing reads. */
static ts_status count_uses(importer *im, const TensorscopeOnnx__GraphProto *gp) {
    ts_status st = TS_OK;
    for (size_t i = 0; !st && i < gp->n_node; i++) {
        const Node *n = gp->node[i];
        for (size_t a = 0; !st && a < n->n_attribute; a++) /* a branch's or body's reads: never freed */
            if (n->attribute[a]->g) st = count_uses(im, n->attribute[a]->g);
        for (size_t k = 0; !st && k < n->n_input + n->n_output; k++) {
            const char *name = k < n->n_input ? n->input[k] : n->output[k - n->n_input];
            int c = name && *name ? ts_strmap_get(&im->uses, name) : 0;
            if (k < n->n_input && name && *name) st = ts_strmap_put(&im->uses, name, (c < 0 ? 0 : c) + 1);
            else if (c < 0) st = ts_strmap_put(&im->uses, name, 0);
        }
    }
    for (size_t i = 0; !st && i < gp->n_output; i++) {
        const char *name = gp->output[i]->name;
        if (!name || !*name) continue;
        int c = ts_strmap_get(&im->uses, name);
        st = ts_strmap_put(&im->uses, name, (c < 0 ? 0 : c) + 1);
    }
    return st;
}

/* A parameter the file's metadata names (onnx_torch.h), defined as a
 * value under its PyTorch name once (c: its values, or just the shape and
 * type of `tp`'s); returns the value, NULL after an error (*st). */
static value *torch_param(importer *im, const char *name, const TensorProto *tp, ts_const *c, ts_status *st) {
    value *v = ts_onnx_lookup(im, name);
    if (v) {
        ts_const_free(c);
        return v;
    }
    const char *kept = ts_graph_keep_string(im->g, name);
    value nv = {.c = *c, .param = tp};
    *st = kept ? ts_onnx_define(im, kept, &nv) : TS_ERR_OUT_OF_MEMORY;
    if (*st) ts_const_free(c);
    return *st ? NULL : ts_onnx_lookup(im, kept);
}

/* Gives the parameters of a dynamo export their PyTorch names where the
 * file's metadata says which they are (onnx_torch.h): renamed, a merged
 * one's own copy, a Linear weight stored transposed (its twin), a zero
 * bias the optimizer dropped (param marks the value a parameter; c holds
 * its values); and a float initializer that is no parameter of the
 * module, nor folded from one, a constant. */
static ts_status torch_names(importer *im, const TensorscopeOnnx__GraphProto *gp) {
    char first[256] = "";
    size_t frozen = ts_torch_frozen_batch_norms(gp, first, sizeof first);
    if (frozen)
        ts_logf(TS_LOG_WARN, "%s: %zu BatchNorm%s of a module in training mode %s here in inference mode (the dynamo exporter writes them "
                "so, and fuses them into the Conv before: '%s' is the first): the model normalises by the running statistics and trains "
                "neither them nor a fused BatchNorm's weight and bias. To train BatchNorm, export with the TorchScript exporter "
                "(dynamo=False; ts.training_model does). A fused Conv's weight is named '<weight>.fused': it holds the BatchNorm's scale "
                "too", im->path, frozen, frozen == 1 ? "" : "s", frozen == 1 ? "is" : "are", first);
    ts_status st = ts_torch_fixes(gp, &im->fix, &im->n_fix);
    size_t lost = 0;
    const char *first_lost = NULL;
    for (size_t f = 0; f < im->n_fix && !st; f++) {
        const ts_torch_fix *x = &im->fix[f];
        if (x->kind == TS_TORCH_LOST) {
            if (!lost++) first_lost = x->name;
            continue;
        }
        value *v = x->kind == TS_TORCH_ZERO_BIAS ? ts_onnx_lookup(im, gp->node[x->node]->input[1]) : ts_onnx_lookup(im, gp->initializer[x->init]->name);
        if (!v || !v->param) continue; /* an initializer that is no parameter (an integer type) */
        ts_const c = {.dtype = v->c.dtype, .shape = v->c.shape};
        switch (x->kind) {
        case TS_TORCH_CONSTANT: {
            char what[600];
            snprintf(what, sizeof what, "initializer '%s'", v->name);
            if (!(st = ts_onnx_tensor_decode(im, v->param, what, &v->c))) v->param = NULL;
            break;
        }
        case TS_TORCH_FOLDED: v->folded = true; break;
        case TS_TORCH_RENAME:
        case TS_TORCH_FUSED:
            v->pname = ts_graph_keep_string(im->g, x->name);
            v->fused = x->kind == TS_TORCH_FUSED;
            st = v->pname ? TS_OK : TS_ERR_OUT_OF_MEMORY;
            break;
        case TS_TORCH_COPY: torch_param(im, x->name, v->param, &c, &st); break;
        case TS_TORCH_TRANSPOSED: {
            ts_const_attrs at = {.n_perm = -1};
            const ts_const *in = &v->c;
            if (!(st = ts_onnx_decoded(im, v)) && !(st = ts_const_op("Transpose", &in, 1, &at, &c))) v->twin = torch_param(im, x->name, v->param, &c, &st);
            ts_const_free(&v->c); /* decoded again if a fold reads it */
            const value *w = v->twin; /* an initializer of that name already (tied): of the transposed shape */
            if (w && (!w->param || w->c.shape.ndim != 2 || w->c.shape.d[0] != v->c.shape.d[1] || w->c.shape.d[1] != v->c.shape.d[0]))
                v->twin = NULL;
            break;
        }
        case TS_TORCH_TRANSPOSED_COPY: { /* the parameter, and the value the MatMul reads: the file's tensor, its twin the parameter */
            ts_const_attrs at = {.n_perm = -1};
            const ts_const *in = &v->c;
            value *w = NULL;
            if (!(st = ts_onnx_decoded(im, v)) && !(st = ts_const_op("Transpose", &in, 1, &at, &c))) w = torch_param(im, x->name, v->param, &c, &st);
            ts_const_free(&v->c);
            char standin[600];
            const char *kept = w ? ts_graph_keep_string(im->g, standin_name(x->name, standin, sizeof standin)) : NULL;
            value sv = {.param = v->param, .twin = w, .c = {.dtype = v->c.dtype, .shape = v->c.shape}};
            if (w && (!w->param || w->c.shape.ndim != 2 || w->c.shape.d[0] != v->c.shape.d[1] || w->c.shape.d[1] != v->c.shape.d[0])) break;
            if (w && !st) st = kept ? ts_onnx_define(im, kept, &sv) : TS_ERR_OUT_OF_MEMORY;
            break;
        }
        case TS_TORCH_ZERO_BIAS: {
            ts_shape s = {.ndim = 1, .d = {x->length}};
            if (!(st = ts_const_fill(&s, TS_ONNX_FLOAT, 0.0, &c))) torch_param(im, x->name, v->param, &c, &st);
            break;
        }
        case TS_TORCH_LOST: break;
        }
    }
    if (lost)
        ts_logf(TS_LOG_WARN, "%s: %zu parameter%s of the PyTorch module ('%s'%s) %s in the file nowhere: the dynamo exporter's optimizer "
                "stores initializers of equal values once (fresh zero biases, the copies of a layer) and fuses BatchNorm into the Conv "
                "before it, so such a parameter trains as the tensor the file reads in its place, or not at all. To train each parameter "
                "as the module does, export with the TorchScript exporter (dynamo=False; ts.training_model of the module does), or with "
                "optimize=False, which keeps every parameter (and writes a Split as a sequence)",
                im->path, lost, lost == 1 ? "" : "s", first_lost, lost == 1 ? "" : " is the first", lost == 1 ? "is" : "are");
    return st;
}

static ts_status import_graph(importer *im, const TensorscopeOnnx__ModelProto *mp, const ts_onnx_input *inputs, int n_inputs) {
    const TensorscopeOnnx__GraphProto *gp = mp->graph;
    if (!gp) return ts_error(TS_ERR_FORMAT, "%s holds no graph (not an ONNX model, or truncated)", im->path);
    bool named = false;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const char *d = mp->opset_import[i]->domain;
        if (!d || !*d || strcmp(d, "ai.onnx") == 0) {
            im->opset = mp->opset_import[i]->version;
            named = true;
        }
    }
    if (!named)
        return ts_error(TS_ERR_FORMAT, "%s names no opset of the default ONNX domain (its opset_import lists none); tensorscope imports "
                        "opsets %d to %d", im->path, MIN_OPSET, MAX_OPSET);
    if (im->opset < MIN_OPSET || im->opset > MAX_OPSET)
        return ts_error(TS_ERR_UNSUPPORTED, "%s uses opset %lld of the default ONNX domain; tensorscope imports opsets %d to %d (re-export "
                        "with one of them, e.g. torch.onnx.export(..., opset_version=18))", im->path, (long long)im->opset, MIN_OPSET,
                        MAX_OPSET);
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const TensorProto *tp = gp->initializer[i];
        if (!tp->name || !*tp->name) return ts_error(TS_ERR_FORMAT, "%s: initializer %zu has no name", im->path, i);
        char what[600];
        snprintf(what, sizeof what, "initializer '%s'", tp->name);
        value v = {0};
        ts_status st = ts_onnx_tensor_check(im, tp, what, &v.c);
        /* float initializers are parameters; the low-precision ones
         * (float8, float4) constants, which training would move off their grid */
        if (!st && ts_onnx_dtype_is_float(v.c.dtype) && !ts_lowbits_is(v.c.dtype)) v.param = tp;
        else if (!st) st = ts_onnx_tensor_decode(im, tp, what, &v.c);
        if (!st) st = ts_onnx_define(im, tp->name, &v);
        if (st) {
            ts_const_free(&v.c);
            return st;
        }
    }
    ts_status st = single_writers(im, gp);
    if (!st) st = torch_names(im, gp);
    if (!st) st = ts_onnx_chains(gp, &im->chain, &im->n_chain);
    im->chain_graph = gp;
    if (!st) st = count_uses(im, gp);
    im->inputs_from = ts_graph_tensor_count(im->g);
    if (!st) st = import_inputs(im, gp, inputs, n_inputs);
    im->inputs_to = ts_graph_tensor_count(im->g);
    if (!st)
        ts_logf(TS_LOG_DEBUG, "%s: opset %lld, %zu nodes, %zu initializers, %zu inputs, %zu outputs", im->path, (long long)im->opset,
                gp->n_node, gp->n_initializer, gp->n_input, gp->n_output);
    for (size_t i = 0; !st && i < gp->n_node; i++) st = ts_onnx_import_node(im, gp->node[i], (int)i);
    if (st) return st;
    im->node = NULL;
    for (size_t i = 0; i < gp->n_output; i++) {
        const char *name = gp->output[i]->name;
        value *v = name ? ts_onnx_lookup(im, name) : NULL;
        const char *op = NULL;
        for (size_t k = 0; !v && name && k < gp->n_node; k++)
            for (size_t j = 0; j < gp->node[k]->n_output; j++)
                if (gp->node[k]->output[j] && strcmp(gp->node[k]->output[j], name) == 0) op = gp->node[k]->op_type;
        if (!v && op)
            return ts_error(TS_ERR_UNSUPPORTED, "%s: graph output '%s' is an output of a %s node that tensorscope does not compute", im->path,
                            name, op);
        if (!v) return ts_error(TS_ERR_FORMAT, "%s: graph output '%s' is computed by no node", im->path, name ? name : "?");
        if (v->seq)
            return ts_error(TS_ERR_UNSUPPORTED, "%s: graph output '%s' is a sequence; tensorscope's graph outputs are tensors (a ConcatFromSequence "
                            "of it is one)", im->path, name);
        /* an output that folded to a constant is returned as that constant */
        ts_tensor *t = v->t ? v->t : ts_onnx_as_tensor(im, v, &st);
        if (!t) return st;
        st = ts_graph_add_output(im->g, t);
        if (!st && !v->t) st = ts_graph_add_alias(im->g, name, t);
        /* returned in the file's type (int64, bool, double, ...) */
        const TensorscopeOnnx__TypeProto__Tensor *tt = gp->output[i]->type ? gp->output[i]->type->tensor_type : NULL;
        ts_dtype dt;
        if (!st && tt && tt->has_elem_type && ts_onnx_array_dtype(tt->elem_type, &dt)) st = ts_tensor_set_output_dtype(t, dt);
        if (!st && tt && tt->has_elem_type && ts_lowbits_is(tt->elem_type)) t->onnx_type = tt->elem_type; /* held in f32 */
        if (st) return st;
    }
    if (gp->n_output == 0) return ts_error(TS_ERR_FORMAT, "%s: the graph has no outputs", im->path);
    return ts_graph_status(im->g);
}

/* Maps the file read-only (the parser copies what it keeps). */
static ts_status map_file(const char *path, void **out, size_t *n) {
    *out = NULL;
    *n = 0;
    int fd;
    uint64_t size;
    ts_status s = ts_file_open_read(path, "ONNX model", &fd, &size);
    if (s) return s;
    if (size > MAX_MODEL_BYTES)
        s = ts_error(TS_ERR_UNSUPPORTED, "%s is %llu bytes; ONNX files hold at most 2 GB (larger models keep their weights as external "
                     "data)", path, (unsigned long long)size);
    if (!s) *n = (size_t)size;
    if (!s && *n) {
        void *p = mmap(NULL, *n, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
        if (p == MAP_FAILED) s = ts_error(TS_ERR_IO, "cannot map %s: %s", path, strerror(errno));
        else *out = p;
    }
    close(fd);
    return s;
}

/* How deeply the graphs of b[0..n), a message of `kind`, nest (If's
 * branches, Loop's and Scan's bodies: ModelProto.graph (7), GraphProto.node
 * (1), NodeProto.attribute (5), AttributeProto.g (6), a graph again), or
 * -1 past `left` levels: read from the wire format before the parser,
 * whose recursion follows the file's nesting. Bytes that do not parse end
 * the walk (the parser refuses them). */
enum { PB_MODEL, PB_GRAPH, PB_NODE, PB_ATTR };
static bool pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return true;
    }
    return false;
}
static int graph_depth(const uint8_t *b, size_t n, int kind, int left) {
    static const uint64_t field[] = {[PB_MODEL] = 7, [PB_GRAPH] = 1, [PB_NODE] = 5, [PB_ATTR] = 6};
    const uint8_t *p = b, *end = b + n;
    int deepest = 0;
    while (p < end) {
        uint64_t key, len = 0;
        if (!pb_varint(&p, end, &key)) break;
        int wire = (int)(key & 7);
        if (wire == 0 && pb_varint(&p, end, &len)) continue;
        if ((wire == 1 || wire == 5) && (size_t)(end - p) >= (wire == 1 ? 8u : 4u)) {
            p += wire == 1 ? 8 : 4;
            continue;
        }
        if (wire != 2 || !pb_varint(&p, end, &len) || len > (uint64_t)(end - p)) break;
        if (key >> 3 == field[kind]) {
            bool graph = kind == PB_ATTR; /* AttributeProto.g: one level deeper */
            int d = graph && left == 0 ? -1 : graph_depth(p, (size_t)len, kind == PB_ATTR ? PB_GRAPH : kind + 1, left - graph);
            if (d < 0) return -1;
            if (d + graph > deepest) deepest = d + graph;
        }
        p += len;
    }
    return deepest;
}

static void *pb_alloc(void *user, size_t n) { (void)user; return ts_malloc(n ? n : 1); }
static void pb_free(void *user, void *p) { (void)user; ts_free(p); }

ts_status ts_onnx_import_bytes(ts_graph **out, const uint8_t *bytes, size_t n, const char *path, const ts_onnx_input *inputs,
                               int n_inputs) {
    *out = NULL;
    if (n == 0) return ts_error(TS_ERR_FORMAT, "%s is empty: not an ONNX model", path);
    if (graph_depth(bytes, n, PB_MODEL, MAX_GRAPH_DEPTH) < 0)
        return ts_error(TS_ERR_UNSUPPORTED, "%s nests graphs (If branches, Loop and Scan bodies) more than %d deep; tensorscope imports "
                        "at most %d levels", path, MAX_GRAPH_DEPTH, MAX_GRAPH_DEPTH);
    ProtobufCAllocator alloc = {pb_alloc, pb_free, NULL};
    TensorscopeOnnx__ModelProto *mp = tensorscope_onnx__model_proto__unpack(&alloc, n, bytes);
    if (!mp)
        return ts_error(TS_ERR_FORMAT, "%s is not a valid ONNX model: its protobuf encoding is corrupt or truncated (%zu bytes)", path, n);
    importer im;
    memset(&im, 0, sizeof im);
    im.path = path;
    snprintf(im.dir, sizeof im.dir, "%s", path);
    char *slash = strrchr(im.dir, '/');
    if (slash) *slash = '\0';
    else snprintf(im.dir, sizeof im.dir, ".");
    im.g = ts_graph_new(0);
    ts_const_budget(ts_get_limit(TS_LIMIT_IMPORT_BYTES));
    ts_status st = im.g ? TS_OK : TS_ERR_OUT_OF_MEMORY;
    if (!st) {
        const char *base = strrchr(path, '/');
        im.file = ts_graph_keep_string(im.g, base ? base + 1 : path);
        st = im.file ? import_graph(&im, mp, inputs, n_inputs) : TS_ERR_OUT_OF_MEMORY;
    }
    ts_graph_at(im.g, NULL, 0);
    for (size_t i = 0; i < im.nv; i++) {
        ts_const_free(&im.v[i]->c);
        ts_free(im.v[i]);
    }
    ts_free(im.v);
    ts_free(im.hash);
    ts_onnx_seqs_free(&im);
    ts_strmap_free(&im.uses);
    ts_torch_fixes_free(im.fix, im.n_fix);
    ts_free(im.chain);
    ts_const_budget(UINT64_MAX);
    tensorscope_onnx__model_proto__free_unpacked(mp, &alloc);
    if (st) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ts_last_error());
        ts_graph_free(im.g);
        return ts_error(st, "%s", msg);
    }
    *out = im.g;
    return TS_OK;
}

ts_status ts_graph_from_onnx(ts_graph **out, const char *path, const ts_onnx_input *inputs, int n_inputs) {
    if (!out) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_graph_from_onnx: out is NULL");
    *out = NULL;
    if (!path) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_graph_from_onnx: path is NULL");
    if (n_inputs < 0 || (n_inputs > 0 && !inputs)) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_graph_from_onnx: bad input list");
    for (int i = 0; i < n_inputs; i++)
        if (!inputs[i].name) return ts_error(TS_ERR_INVALID_ARGUMENT, "ts_graph_from_onnx: input %d has no name", i);
    void *b = NULL;
    size_t n = 0;
    uint64_t t0 = ts_now_ns();
    ts_status st = map_file(path, &b, &n);
    if (!st) st = ts_onnx_import_bytes(out, b, n, path, inputs, n_inputs);
    if (b) munmap(b, n);
    if (!st) ts_metric_record("OnnxImportTime", (double)(ts_now_ns() - t0));
    return st;
}
