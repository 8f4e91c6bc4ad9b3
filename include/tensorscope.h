/*
 * tensorscope.h -- the whole public API of tensorscope.
 *
 * tensorscope trains neural networks on a compiled static graph and lets you
 * see any tensor of that graph (activations, gradients, accumulated
 * gradients, updated weights, optimizer state) while training runs.
 *
 * This header is the specification; the design notes behind it are in
 * docs/ (docs/README.md), which the section references below point to.
 * Every function returns a ts_status (or a handle that is NULL on failure)
 * and keeps a per-thread message readable with ts_last_error(). The library
 * never exits and never prints unless asked: it logs through a callback you
 * may replace (ts_set_log_callback).
 *
 * Worked example: the tutorial MLP, trained one run at a time.
 *
 *     ts_graph *g = ts_graph_new(42);                      // seed for init
 *     int64_t xs[] = {64, 1, 28, 28}, ys[] = {64};
 *     ts_tensor *x = ts_input(g, "x", TS_F32, 4, xs);
 *     ts_tensor *y = ts_input(g, "labels", TS_I32, 1, ys);
 *     ts_tensor *h = ts_flatten(g, x, 1);                  // [64,784]
 *     h = ts_relu(g, ts_linear(g, h, 320, "fc1"));
 *     h = ts_relu(g, ts_linear(g, h, 100, "fc2"));
 *     h = ts_log_softmax(g, ts_linear(g, h, 10, "fc3"), 1);
 *     ts_tensor *loss = ts_nll_loss(g, h, y);
 *     ts_tensor_set_name(loss, "loss");
 *
 *     ts_options *o = ts_options_new();
 *     ts_options_set_device_iterations(o, 4);              // D
 *     ts_options_anchor(o, "g2", "Gradient___fc2.bias", TS_OUTPUT_ALL, 0);
 *     ts_model *m = NULL;
 *     if (ts_model_training(&m, g, loss, o, ts_sgd(0.01f, 0.9f, 0.0f)) ||
 *         ts_model_compile(m))
 *         fprintf(stderr, "%s\n", ts_last_error());
 *
 *     // one run consumes D x A micro-batches, stacked on the leading axis
 *     ts_array in[2] = { ts_array_f32(xbuf, 4, (int64_t[]){4*64,1,28,28}),
 *                        ts_array_i32(ybuf, 1, (int64_t[]){4*64}) };
 *     const char *names[2] = {"x", "labels"};
 *     ts_model_run(m, names, in, 2);
 *     ts_array g2;
 *     ts_model_anchored(m, "g2", &g2);                     // f32[4,100]
 *     ts_model_free(m); ts_options_free(o); ts_graph_free(g);
 *
 * Tensor names (stable): parameters `<layer>.weight`, `<layer>.bias`;
 * buffers `<layer>.running_mean`, `<layer>.running_var` (batch norm); every
 * op output `<scope>/<OpName>:<k>` (`fc1/MatMul:0`, `Relu:1`); inputs and the
 * loss as named by you; derived tensors `Gradient___<name>` (per
 * micro-batch), `Accum___<param>` (mean over A micro-batches, aliasing the
 * gradient when A = 1), `UpdatedVar___<param>`, `Accl___<param>` (SGD
 * momentum), `Accl1___`/`Accl2___<param>` (Adam moments), `Step___<param>`.
 */
#ifndef TENSORSCOPE_H
#define TENSORSCOPE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TS_API __attribute__((visibility("default")))
#else
#define TS_API
#endif

#define TS_VERSION_MAJOR 0
#define TS_VERSION_MINOR 1
#define TS_VERSION_PATCH 0
#define TS_VERSION_STRING "0.1.0"
TS_API const char *ts_version(void);

/* ---------------------------------------------------------------- status */

typedef enum ts_status {
    TS_OK = 0,
    TS_ERR_INVALID_ARGUMENT, /* a bad value, name or option */
    TS_ERR_OUT_OF_MEMORY,    /* the allocator said no */
    TS_ERR_IO,               /* a file could not be opened, read or written */
    TS_ERR_FORMAT,           /* a file's contents are corrupt or truncated */
    TS_ERR_SHAPE,            /* shapes do not fit the op */
    TS_ERR_NOT_FOUND,        /* an unknown tensor, anchor or key name */
    TS_ERR_STATE,            /* called at the wrong time (e.g. before compile) */
    TS_ERR_NUMERICS,         /* a numeric check found NaN or Inf */
    TS_ERR_UNSUPPORTED,      /* a feature not built in */
    TS_ERR_INTERNAL,         /* a bug in tensorscope: please report it */
    TS_ERR_DIST,             /* another rank died, hung or disagrees (replicas) */
    TS_ERR_CANCELLED,        /* ts_model_cancel stopped the run (what it kept: see there) */
    TS_ERR_SPIKE             /* the spike detector stopped the run before a step's update (ts_options_detect_spikes) */
} ts_status;

/* Short upper-case name of a status ("TS_ERR_SHAPE"). */
TS_API const char *ts_status_name(ts_status s);
/* The message of the last failure on this thread ("" if none). */
TS_API const char *ts_last_error(void);
TS_API void ts_clear_error(void);
/* Sets this thread's last error to `message` and returns `code`: how a
 * callback (ts_options_set_on_start's hook) says why it failed. */
TS_API ts_status ts_set_error(ts_status code, const char *message);

/* ------------------------------------------------------ optional features */

/* The core needs only a C compiler, pthreads, zlib and a CBLAS; the rest
 * are features built when their library is found at configure (and left
 * out with -DTS_WITH_<LIB>=OFF; `cmake` prints the list):
 *   "plots"         cairo: ts_plot_*; the CLI's --histogram, --plot,
 *                   --feature-maps, --filters, compare --plot
 *   "onnx"          protobuf-c: ts_graph_from_onnx; --model FILE.onnx
 *   "tensorboard"   protobuf-c: ts_tb_*; --tensorboard
 *   "npz"           libarchive: ts_npz_load, ts_npz_save, .npz weights
 *                   (ts_graph_save_weights/ts_graph_load_weights), .npz
 *                   data (ts_dataset_*), compare's reference dumps
 *   "debug-bundle"  libarchive, cairo and protobuf-c: ts_debug_run
 *   "unwind"        libunwind: the crash handler walks stacks with it;
 *                   without it, with glibc's backtrace() (same report)
 *   "mpi"           MPI: ts_dist_init under mpirun (replicas, stages)
 *   "cuda"          the CUDA toolkit (nvcc, cuBLAS): ts_options_set_device
 *                   "cuda", ts_device_describe of a GPU
 * A call that needs a feature the build lacks returns TS_ERR_UNSUPPORTED
 * with a message naming what to install ("plots need cairo: apt-get
 * install libcairo2-dev, then rebuild tensorscope"); calls that return no
 * status return 0 or NULL (ts_npz_count, ts_npz_find, ts_tb_path).
 * ts_has_feature: 1 when built, 0 when not (or for an unknown name). */
TS_API int ts_has_feature(const char *name);
/* TS_OK when the feature is built; otherwise TS_ERR_UNSUPPORTED with the
 * message above; TS_ERR_INVALID_ARGUMENT (listing the names) for an
 * unknown name. For checking before work starts. */
TS_API ts_status ts_require_feature(const char *name);
/* Every feature and whether it is built, in the order above:
 * "plots yes, onnx yes, tensorboard yes, npz yes, ..., cuda no". */
TS_API const char *ts_features(void);
/* The CPU's vector instructions and the kernels chosen for them at run
 * time (docs/backend.md, "Kernels for the CPU at hand"):
 * "avx avx2 fma f16c; kernels avx2; bf16 products f32". The instruction
 * sets listed are those the CPU and the OS both enable, of avx, avx2, fma,
 * f16c, avx512f, avx512bw, avx512vl, avx512dq, avx512_bf16, amx_tile and
 * amx_bf16; "kernels" names the level the vectorised kernels run (generic,
 * avx2 or avx512; TS_CPU caps it); "bf16 products" says how a bf16 model's
 * matmuls multiply (sbgemm: OpenBLAS's bf16 GEMM; f32: widened to f32). */
TS_API const char *ts_cpu_features(void);

/* ------------------------------------------------------- memory and logs */

/* A pluggable allocator; every allocation of the library goes through it.
 * Passing NULL restores malloc/realloc/free. Set it before creating objects. */
typedef struct ts_allocator {
    void *(*alloc)(void *user, size_t size);
    void *(*realloc)(void *user, void *ptr, size_t size);
    void (*free)(void *user, void *ptr);
    void *user;
} ts_allocator;
TS_API void ts_set_allocator(const ts_allocator *a);

typedef enum ts_log_level {
    TS_LOG_OFF = 0,
    TS_LOG_ERROR = 1,
    TS_LOG_WARN = 2,
    TS_LOG_INFO = 3,  /* default */
    TS_LOG_DEBUG = 4, /* layer template at compile, per-run shapes */
    TS_LOG_TRACE = 5, /* a line per step: loss, batch size, ms/step, RSS */
    TS_LOG_PRINT = 6  /* not a threshold: a print op's line, shown unless logs are off */
} ts_log_level;
typedef void (*ts_log_fn)(void *user, int level, const char *message);
/* Default: lines to stderr. NULL restores it. */
TS_API void ts_set_log_callback(ts_log_fn fn, void *user);
/* Messages above this level are not formatted. TS_LOG_LEVEL sets it too. */
TS_API void ts_set_log_level(int level);
TS_API int ts_get_log_level(void);
/* Raises the level of named modules only: "onnx=5,exec=4" (TS_LOG_VMODULE
 * sets it too; this call wins). Modules: core, graph, compile, exec,
 * backend, cuda, observe, diag, parallel, onnx, io, model, data. NULL or ""
 * clears. TS_ERR_INVALID_ARGUMENT (nothing changed) for an unknown module
 * or a bad level. TS_LOG_THREAD_ID=1 adds the kernel thread id to the
 * default callback's lines: `[tensorscope I tid 4242] ...`. */
TS_API ts_status ts_set_log_vmodule(const char *spec);
/* One message of a binding (the Python package's own, e.g. what its torch
 * wrapper did) into the library's log, at `level` (TS_LOG_ERROR to
 * TS_LOG_TRACE), under module "model": the same level, callback and
 * stderr lines as the library's messages. */
TS_API void ts_log_write(int level, const char *message);

/* ------------------------------------------------- limits on file input */

/* What reading one untrusted file may cost, beyond the bytes the file
 * really holds. A file that would pass a limit is refused with
 * TS_ERR_FORMAT naming the limit and how to raise it; nothing is kept.
 *   TS_LIMIT_IMPORT_BYTES: memory one ONNX import may make that the files
 *     do not hold: constants folded from shape subgraphs (ConstantOfShape,
 *     Expand, Tile, Range, ...) while they are alive. Default 1 GiB;
 *     environment: TS_MAX_IMPORT_BYTES.
 *   TS_LIMIT_ARCHIVE_BYTES: bytes one .npz may inflate to, over the
 *     members that are read. Default 2 GiB; environment:
 *     TS_MAX_ARCHIVE_BYTES.
 *   TS_LIMIT_COMPILE_BYTES: the buffers one compile lays out (activation
 *     and gradient arenas, anchors, kernel workspace and scratch), checked
 *     from the plan before any is allocated: a model whose declared shapes
 *     need more is refused at compile. Default: the machine's physical
 *     memory; environment: TS_MAX_COMPILE_BYTES. A plan-only compile
 *     (ts_options_set_plan_only) allocates none and is not limited.
 * The environment variables take a byte count with an optional K, M, G or
 * T suffix (powers of 1024) and are read when the limit is first used; a
 * value set here wins over the environment. 0 is refused. */
typedef enum ts_limit { TS_LIMIT_IMPORT_BYTES = 0, TS_LIMIT_ARCHIVE_BYTES, TS_LIMIT_COMPILE_BYTES } ts_limit;
TS_API ts_status ts_set_limit(ts_limit which, uint64_t bytes);
TS_API uint64_t ts_get_limit(ts_limit which);
/* A size as the CLI and the TS_ variables take it: a number with an
 * optional K, M, G or T suffix (powers of 1024) and an optional B
 * ("1.5G", "512MB", "4096"). TS_ERR_INVALID_ARGUMENT for anything else. */
TS_API ts_status ts_parse_size(const char *text, uint64_t *bytes);

/* ---------------------------------------------------------------- arrays */

/* Graph tensors are f32, i32, i64 or bool, or bf16 / f16 where a cast
 * (ts_cast) or a model's precision (ts_options_set_precision) makes them.
 * i64 tensors hold every int64 value exactly (inputs, constants, ts_cast,
 * the integer ops of ts_binary and ts_unary, ts_cumsum, ts_reduce_int
 * (and ts_reduce_sum, _mean, _max of them), and the ops that move values:
 * reshape, flatten, permute, slice, concat, gather's data,
 * gather_elements' data, pad (its constant border 0), where's a and
 * b), and every uint32 and uint64 value (a uint64 as its bits, 2^64-1 as
 * -1: TS_U32 and TS_U64 inputs, ts_cast to them), which ts_binary_typed
 * and ts_cast_typed compute on as unsigned. bool tensors hold false and true: inputs (fed
 * one-byte bool arrays, numpy's bool, or integer arrays of 0 and 1) and
 * constants (TS_BOOL arrays, a byte an element), the comparisons and
 * predicates of ts_binary and ts_unary, And, Or, Xor and Not, ts_cast to
 * bool, and the ops that move values (as for i64) keep bool; ts_where and
 * ts_masked_fill take them as conditions and masks. Anchors, outfeed
 * records and saved .npy files of a bool tensor are one-byte bools
 * (numpy's |b1); a watch summarises its values as 1 and 0 (the mean is
 * the fraction that is true). bool tensors take no arithmetic (ts_cast
 * one to f32 or i32 first) and are no indices; no gradient flows through
 * them. Inside a program a bool element takes a 4-byte cell holding 1.0
 * or 0.0. The other dtypes are those of the arrays a run is
 * fed (converted exactly to the input's dtype) and of outputs declared
 * with ts_tensor_set_output_dtype (ONNX's typed outputs). Arrays of TS_BF16 and
 * TS_F16 hold the 16-bit patterns (uint16_t: numpy's float16, and bfloat16
 * as its bits). */
typedef enum ts_dtype {
    TS_F32 = 0, TS_F64, TS_I32, TS_I64, TS_U8,
    TS_BOOL, TS_I8, TS_I16, TS_U16, TS_U32, TS_U64,
    TS_BF16, TS_F16
} ts_dtype;
TS_API const char *ts_dtype_name(ts_dtype t); /* "f32", "i32", ... */
TS_API size_t ts_dtype_size(ts_dtype t);

#define TS_MAX_DIMS 8
/* A view of n-dimensional data; owns nothing. */
typedef struct ts_array {
    ts_dtype dtype;
    int ndim;
    int64_t shape[TS_MAX_DIMS];
    void *data;
} ts_array;
TS_API ts_array ts_array_f32(float *data, int ndim, const int64_t *shape);
TS_API ts_array ts_array_i32(int32_t *data, int ndim, const int64_t *shape);
TS_API int64_t ts_array_numel(const ts_array *a);
/* "f32[4,100]" into buf; returns buf. */
TS_API const char *ts_array_shape_str(const ts_array *a, char *buf, size_t n);

/* ----------------------------------------------------------------- graph */

typedef struct ts_graph ts_graph;
typedef struct ts_tensor ts_tensor; /* owned by its graph */

/* A graph owns its parameters' values, initialised from `seed`. */
TS_API ts_graph *ts_graph_new(uint64_t seed);
TS_API void ts_graph_free(ts_graph *g);

/* Builders return NULL on error and make the error sticky: building can go
 * on without checks and the first error is reported again by compile. */
TS_API ts_status ts_graph_status(const ts_graph *g);

/* Names of op outputs are `<scope>/<Op>:<k>`; scopes nest with dots. */
TS_API ts_status ts_scope_push(ts_graph *g, const char *name);
TS_API ts_status ts_scope_pop(ts_graph *g);

/* Source location recorded on the next nodes; the builder macros below call
 * it with __FILE__/__LINE__ so every node knows where it was built. */
TS_API ts_graph *ts_graph_at(ts_graph *g, const char *file, int line);

/* A graph input of `dtype`: TS_F32, TS_I32, TS_I64, TS_BOOL, or TS_U32
 * or TS_U64, held in i64 (ts_tensor_info says i64; a uint64 as its bits,
 * 2^64-1 as -1): a run takes every value of the type (4294967295 for
 * u32; a u64 array's values as their bits) and refuses any other, and
 * its anchored values come back in the type. */
TS_API ts_tensor *ts_input(ts_graph *g, const char *name, ts_dtype dtype, int ndim,
                           const int64_t *shape);
/* A trainable parameter, zero-initialised; `name` is used as given. */
TS_API ts_tensor *ts_param(ts_graph *g, const char *name, int ndim, const int64_t *shape);
/* y[B,out] = x[B,in] W^T + b; creates `<name>.weight` [out,in] and
 * `<name>.bias` [out] with PyTorch's default init U(-1/sqrt(in), 1/sqrt(in)),
 * inside scope `<name>` (ops `name/MatMul:0`, `name/Add:0`). */
TS_API ts_tensor *ts_linear(ts_graph *g, ts_tensor *x, int64_t out_features, const char *name);

TS_API ts_tensor *ts_matmul(ts_graph *g, ts_tensor *a, ts_tensor *b);   /* [M,K]x[K,N] */
TS_API ts_tensor *ts_matmul_t(ts_graph *g, ts_tensor *a, ts_tensor *b); /* [M,K]x[N,K]^T */
TS_API ts_tensor *ts_add(ts_graph *g, ts_tensor *a, ts_tensor *b); /* numpy broadcasting */
TS_API ts_tensor *ts_sub(ts_graph *g, ts_tensor *a, ts_tensor *b); /* numpy broadcasting */
TS_API ts_tensor *ts_mul(ts_graph *g, ts_tensor *a, ts_tensor *b); /* numpy broadcasting */
TS_API ts_tensor *ts_scale(ts_graph *g, ts_tensor *x, float s);
TS_API ts_tensor *ts_relu(ts_graph *g, ts_tensor *x);
TS_API ts_tensor *ts_log(ts_graph *g, ts_tensor *x);
/* Ops take f32 tensors, except the integer (i32) inputs each one names
 * (labels, indices, masks: a mask may be bool). ts_reshape, ts_flatten,
 * ts_permute and ts_transpose take f32, i32, i64 or bool and keep the
 * dtype: token ids and labels reshaped stay i32 (no gradient flows to
 * them). A bool tensor where an op takes numbers is TS_ERR_INVALID_ARGUMENT
 * saying to ts_cast it. */
TS_API ts_tensor *ts_reshape(ts_graph *g, ts_tensor *x, int ndim, const int64_t *shape);
/* Collapses dims start_dim.. into one (PyTorch's flatten(x, start_dim)). */
TS_API ts_tensor *ts_flatten(ts_graph *g, ts_tensor *x, int start_dim);
TS_API ts_tensor *ts_log_softmax(ts_graph *g, ts_tensor *x, int dim);
TS_API ts_tensor *ts_softmax(ts_graph *g, ts_tensor *x, int dim);
/* mean over the batch of -logp[i, label[i]]; labels i32 [B]. */
TS_API ts_tensor *ts_nll_loss(ts_graph *g, ts_tensor *logp, ts_tensor *labels);
/* nll_loss(log_softmax(logits, 1), labels) in one op. */
TS_API ts_tensor *ts_cross_entropy(ts_graph *g, ts_tensor *logits, ts_tensor *labels);
TS_API ts_tensor *ts_sum(ts_graph *g, ts_tensor *x);  /* all elements -> [] */
TS_API ts_tensor *ts_mean(ts_graph *g, ts_tensor *x); /* all elements -> [] */
/* Identity that logs x each time it runs, and its gradient in the backward
 * pass as `<title>_gradient` (`Gradient___<name>` for an empty title).
 * Never optimised away. */
TS_API ts_tensor *ts_print(ts_graph *g, ts_tensor *x, const char *title);
/* A print op beside x, off the data path: it logs x each time x is
 * computed and nothing is meant to read its result (the CLI's
 * --print-tensor on a parameter or a layer's inner output). ts_print's
 * result is meant to be used instead of x, and the lint says so when it
 * is not. */
TS_API ts_tensor *ts_print_beside(ts_graph *g, ts_tensor *x, const char *title);


/* ---- tensor and transformer ops. add, sub, mul and div broadcast by
 * numpy's rules (shapes aligned on the right, each pair of dims equal or
 * one of them 1); gradients are summed over the broadcast dims. Negative
 * dims count from the end. */
/* A named constant (f32, i32, i64 or bool, copied): listed and
 * anchorable, no gradient (masks, position ids). */
TS_API ts_tensor *ts_constant(ts_graph *g, const char *name, const ts_array *value);
TS_API ts_tensor *ts_div(ts_graph *g, ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_exp(ts_graph *g, ts_tensor *x);
TS_API ts_tensor *ts_sqrt(ts_graph *g, ts_tensor *x);
TS_API ts_tensor *ts_pow(ts_graph *g, ts_tensor *x, float exponent);
TS_API ts_tensor *ts_erf(ts_graph *g, ts_tensor *x);
/* |x|; its gradient is sign(x) (0 at 0, as PyTorch). */
TS_API ts_tensor *ts_abs(ts_graph *g, ts_tensor *x);
/* 0.5 x (1 + erf(x / sqrt 2)); tanh_approx: PyTorch's approximate='tanh'. */
TS_API ts_tensor *ts_gelu(ts_graph *g, ts_tensor *x, int tanh_approx);
/* SiLU (Swish): x sigmoid(x); PyTorch's F.silu. */
TS_API ts_tensor *ts_silu(ts_graph *g, ts_tensor *x);
/* The elementwise unary family, by the op's name: Ceil, Floor, Round
 * (half to even), CastInt (toward zero), CastBool (1 where non-zero), Sin,
 * Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh (NaN outside
 * an inverse's domain), Not, IsNaN, IsInf (alpha non-zero: +inf counts, beta: -inf),
 * HardSwish, HardSigmoid (max(0, min(1, alpha x + beta))), LeakyRelu (alpha
 * x below 0), Elu (alpha (e^x - 1) below 0), Selu (beta x, or beta alpha
 * (e^x - 1) at or below 0), Softplus, CastLowbits (x rounded onto the
 * grid of ONNX's low-precision type numbered alpha -- 17 float8e4m3fn to
 * 26 int2 --, held in f32; beta: 1 saturates, 2/4 e8m0's round mode down/
 * nearest; the gradient passes straight through), CastFloat (an i32 tensor's values
 * as f32), CastIndex (an i32 tensor: x toward zero, clamped to [alpha,
 * beta], NaN to alpha: indices the graph computes, kept inside the tensor
 * they gather from). alpha and beta are ignored by the ops
 * that take none. The predicates (CastBool, Not, IsNaN, IsInf) give bool
 * tensors (Not and CastBool take a bool or an f32 one, non-zero true);
 * they and the rounding ops pass no gradient. An unknown name is TS_ERR_INVALID_ARGUMENT listing the names.
 * On an i32 or i64 tensor: Neg and Abs, exact, wrapping as the integer
 * type does (-INT64_MIN is INT64_MIN, as PyTorch's); no gradient. */
TS_API ts_tensor *ts_unary(ts_graph *g, const char *op, ts_tensor *x, float alpha, float beta);
/* The elementwise binary family, broadcast by numpy's rules: Pow (a
 * tensor exponent), Max and Min (NaN wins; a tie splits the gradient),
 * Mod (the sign of the divisor), FMod (the sign of the dividend), Equal,
 * Greater, GreaterOrEqual, Less, LessOrEqual (of f32 tensors, or of two
 * bool ones, false below true), And, Or, Xor (of bool tensors, or f32
 * ones where non-zero is true): a bool tensor out, no gradient.
 * On two integer tensors of one dtype (i32 or i64; a mix is refused:
 * ts_cast one), exactly in that type, wrapping as it does: Add, Sub, Mul,
 * Div (toward zero, as C's and ONNX's integer Div), FloorDiv (rounded
 * down, PyTorch's //), Mod (the divisor's sign, Python's %), FMod (the
 * dividend's), Min, Max, Pow (the dtype out; Pow by an exponent >= 0
 * wraps as numpy's integer power, by a negative one is onnxruntime's:
 * +-1 for a base of +-1, INT64_MIN (int32: INT32_MIN) for 0, else 0), Equal,
 * Less, LessOrEqual, Greater, GreaterOrEqual (bool out). A division or
 * modulo by 0 gives 0 (numpy's). Pow of an integer tensor by an f32 one:
 * pow() in double, toward zero into the base's dtype (INT64_MIN, int32's
 * INT32_MIN, where it is NaN, infinite or out of the type), as
 * onnxruntime's. No gradient. */
TS_API ts_tensor *ts_binary(ts_graph *g, const char *op, ts_tensor *a, ts_tensor *b);
/* ts_binary's integer ops on two i32 or two i64 tensors whose values are
 * of the integer type `type` (TS_I8, TS_I16, TS_I32, TS_I64, TS_U8,
 * TS_U16, TS_U32 or TS_U64: their declared type; u32 and u64 values are
 * held in i64, so i32 tensors of them are refused): a uint64's bits are
 * read as the unsigned value by Div, FloorDiv, Mod, FMod, Min, Max and the
 * comparisons (2^64-1 is greater than 1, 2^64-1 / 2 is 2^63-1); Abs of an
 * unsigned type is the value; Add, Sub, Mul, Div, ... are wrapped to the
 * type's width (uint32 4294967295 + 1 is 0, int8 100 + 100 is -56), as
 * ONNX's integer ops wrap. The output has a's dtype (bool for the
 * comparisons). No gradient. */
TS_API ts_tensor *ts_binary_typed(ts_graph *g, const char *op, ts_tensor *a, ts_tensor *b, ts_dtype type);
/* Bitwise ops on two i32 or two i64 tensors, broadcast by numpy's rules,
 * computed in the integer type `type` (TS_I8, TS_I16, TS_I32, TS_I64,
 * TS_U8, TS_U16, TS_U32 or TS_U64: the values' declared type) and wrapped
 * to its width: And, Or, Xor, Not (of a; b is NULL), ShiftLeft and
 * ShiftRight (a by b bits; arithmetic for a signed type; a shift by a
 * negative amount or by the width or more shifts every bit out). The
 * output has a's dtype: on i64 tensors every type is exact over its whole
 * range (a uint64 held as its bits: 2^64-1 is -1); on i32 ones the ops
 * whose results can leave i32 (Not of an unsigned 32- or 64-bit type,
 * ShiftLeft in a 64-bit or unsigned 32-bit type) are
 * TS_ERR_INVALID_ARGUMENT (ts_cast them to i64). No gradient. */
TS_API ts_tensor *ts_bitwise(ts_graph *g, const char *op, ts_tensor *a, ts_tensor *b, ts_dtype type);
/* weight [V,C] gathered by i32 indices [...] -> [...,C]; the backward pass
 * scatter-adds into the weight's gradient (an index out of [0,V) is an
 * error at run). */
TS_API ts_tensor *ts_embedding(ts_graph *g, ts_tensor *weight, ts_tensor *indices);
/* data [...,D,...] gathered along `axis` (negative counts from the end) by
 * i32 indices [...] (negative ones count from D's end) -> data's dims
 * before axis, the indices' dims, data's dims after axis (numpy's take);
 * the backward pass scatter-adds into data's gradient. An index outside
 * [-D, D) is an error at run. ts_embedding is axis 0 of a 2-D table. */
TS_API ts_tensor *ts_gather(ts_graph *g, ts_tensor *data, ts_tensor *indices, int axis);
/* out[p] = data[p with the indices' value at p on `axis`] (PyTorch's
 * gather, ONNX's GatherElements): indices i32 of data's rank, no larger
 * than data off the axis; out has the indices' shape; negative indices
 * count from the end, one outside [-D, D) is an error at run. */
TS_API ts_tensor *ts_gather_elements(ts_graph *g, ts_tensor *data, ts_tensor *indices, int axis);
/* x's values rounded to the nearest `dtype` value, ties to even, as
 * PyTorch's .to(): TS_BF16 or TS_F16 (values beyond f16's range become
 * +-Inf), or TS_F32 (a copy). Between f32, i32 and i64 (and from i32 or
 * i64 to the 16-bit floats, through f32), as PyTorch's .to(): floats
 * toward zero (NaN gives 0, values beyond the integer's range its nearest
 * end), i64 to i32 wrapped, integers to f32 rounded to nearest; the
 * result has `dtype` and no gradient flows through. To the narrow integer
 * types TS_I8, TS_I16, TS_U8, TS_U16 (held in i32), TS_U32 and TS_U64
 * (held in i64; a uint64 as its bits, so an i64 is returned as it is):
 * an integer's value exactly, wrapped to the type (two's complement
 * truncation, as numpy's and ONNX's Cast: 300 as i8 is 44, -1 as u32 is
 * 4294967295), a float toward zero to int64 first (to u64, one in
 * [2^63, 2^64) to its value's bits, one beyond to 2^64-1); no gradient. To
 * TS_BOOL from f32, i32 or i64: true where non-zero, NaN included
 * (numpy's astype(bool)); from bool to any of them: 1 or 0. The result is a bf16 / f16 tensor of x's
 * shape; on the CPU its values are held in f32 cells (ts_tensor_info
 * reports dtype f32 and ts_tensor_precision the 16-bit dtype). The
 * gradient flows back unchanged, rounded to the dtype once complete, as
 * a 16-bit tensor's gradient is. What the rounding loses (values that
 * became 0 or Inf) is counted per run and shown by watches. */
TS_API ts_tensor *ts_cast(ts_graph *g, ts_tensor *x, ts_dtype dtype);
/* ts_cast of an i32 or i64 tensor whose values are of the integer type
 * `from` (as ts_binary_typed's type): from TS_U64 to TS_F32, TS_BF16 or
 * TS_F16 the bits are read as the unsigned value (2^64-1 is
 * 1.8446744e19, rounded to nearest); every other cast is ts_cast's, the
 * values as held being the values (a uint64's bits to i64, i32 or a
 * narrower type wrap as ts_cast wraps). */
TS_API ts_tensor *ts_cast_typed(ts_graph *g, ts_tensor *x, ts_dtype from, ts_dtype dtype);
/* The running sum of an i32 or i64 tensor along `axis` (negative counts
 * from the end), exactly, wrapping as the type does: exclusive leaves
 * each element out of its own sum, reverse sums from the end (ONNX's
 * CumSum). No gradient. */
TS_API ts_tensor *ts_cumsum(ts_graph *g, ts_tensor *x, int axis, int exclusive, int reverse);
/* What a model's precision does to its graph (ts_options_set_precision),
 * done now, so the copies' names (`fc1.weight@bf16`) can be printed,
 * anchored or looked up before a model is made: the float inputs of every
 * matmul, batched matmul and convolution become `dtype` copies (TS_BF16,
 * TS_F16; TS_F32 changes nothing). Ops added later get theirs when a model
 * is made. Refused when the graph already has copies of another dtype, or
 * when a model already uses it and copies must be added (tensor ids move). */
TS_API ts_status ts_graph_autocast(ts_graph *g, ts_dtype dtype);
/* The 16-bit float whose values t holds (a cast's output, a copy a
 * model's precision made), or TS_F32. */
TS_API ts_dtype ts_tensor_precision(const ts_tensor *t);
/* Normalises over the last `ndims` dims, then * weight + bias (both of the
 * shape of those dims), as PyTorch's layer_norm. */
TS_API ts_tensor *ts_layer_norm(ts_graph *g, ts_tensor *x, ts_tensor *weight, ts_tensor *bias, int ndims, float eps);
/* Root-mean-square norm over the last dim D: x / sqrt(mean(x^2) + eps),
 * then * weight ([D]; NULL: none), as PyTorch's rms_norm. */
TS_API ts_tensor *ts_rms_norm(ts_graph *g, ts_tensor *x, ts_tensor *weight, float eps);
/* x [N,C,...] normalised over each sample's `groups` groups of C/groups
 * channels (all their positions), then * weight + bias per channel (both
 * [C]), as PyTorch's group_norm; groups == C is instance norm. */
TS_API ts_tensor *ts_group_norm(ts_graph *g, ts_tensor *x, ts_tensor *weight, ts_tensor *bias, int groups, float eps);
/* [...,M,K] x [...,K,N] -> [...,M,N], the leading dims broadcast; with
 * transpose_a / transpose_b an operand is stored as [...,K,M] / [...,N,K]. */
TS_API ts_tensor *ts_matmul_batched(ts_graph *g, ts_tensor *a, ts_tensor *b, int transpose_a, int transpose_b);
/* The matrix product of i32 or i64 tensors of one dtype, exactly, as
 * numpy's matmul (and onnxruntime's integer MatMul): [...,M,K] x [...,K,N]
 * -> [...,M,N], the leading dims broadcast, a 1-D a read as [1,K] and a
 * 1-D b as [K,1] (that dim dropped from the result); the sums over K
 * wrap in the dtype (i64 mod 2^64, i32 mod 2^32). Memory: the result's,
 * never M x K x N products. No gradient. */
TS_API ts_tensor *ts_matmul_int(ts_graph *g, ts_tensor *a, ts_tensor *b);
/* out dim i is x's dim perm[i] (perm has x's rank entries); f32 or i32. */
TS_API ts_tensor *ts_permute(ts_graph *g, ts_tensor *x, const int *perm);
TS_API ts_tensor *ts_transpose(ts_graph *g, ts_tensor *x, int dim0, int dim1);
/* x[..., start:start+length, ...] along dim. */
TS_API ts_tensor *ts_slice(ts_graph *g, ts_tensor *x, int dim, int64_t start, int64_t length);
/* n equal slices along dim into out[0..n). */
TS_API ts_status ts_split(ts_graph *g, ts_tensor *x, int dim, int n, ts_tensor **out);
TS_API ts_tensor *ts_concat(ts_graph *g, ts_tensor *const *xs, int n, int dim);
/* How ts_pad fills the border (numpy's np.pad modes, as ONNX's Pad):
 * `value`, x mirrored without repeating its edge, x's edge repeated, x
 * wrapped around. */
typedef enum ts_pad_mode { TS_PAD_CONSTANT = 0, TS_PAD_REFLECT, TS_PAD_EDGE, TS_PAD_WRAP } ts_pad_mode;
/* x padded along each dim d by pads[d] elements before and
 * pads[ndim + d] after (ONNX's order; a negative pad crops); `value` fills
 * the border in TS_PAD_CONSTANT and is ignored otherwise. The gradient of
 * each element of x sums the output elements that read it. x may be i32,
 * i64 or bool, kept exactly, its constant border 0 (another value is
 * TS_ERR_INVALID_ARGUMENT: pad x - v and add v back with ts_binary). */
TS_API ts_tensor *ts_pad(ts_graph *g, ts_tensor *x, const int64_t *pads, ts_pad_mode mode, float value);
/* cond (bool, or i32 or f32 where non-zero is true) ? a : b, all three
 * broadcast together; a and b of one dtype (f32, i32, i64 or bool), the
 * output's. */
TS_API ts_tensor *ts_where(ts_graph *g, ts_tensor *cond, ts_tensor *a, ts_tensor *b);
/* x with `value` (may be -INFINITY) where the mask (bool, or i32 non-zero),
 * broadcast to x, is true. */
TS_API ts_tensor *ts_masked_fill(ts_graph *g, ts_tensor *x, ts_tensor *mask, float value);
/* Reductions over the n_axes given axes (keepdim: they stay as 1). Max's
 * gradient goes to every element equal to the maximum. Of an i32 or i64
 * tensor they are ts_reduce_int's Sum, Mean and Max. */
TS_API ts_tensor *ts_reduce_sum(ts_graph *g, ts_tensor *x, int n_axes, const int *axes, int keepdim);
TS_API ts_tensor *ts_reduce_mean(ts_graph *g, ts_tensor *x, int n_axes, const int *axes, int keepdim);
TS_API ts_tensor *ts_reduce_max(ts_graph *g, ts_tensor *x, int n_axes, const int *axes, int keepdim);
/* A reduction of an i32 or i64 tensor over the n_axes given axes, in its
 * dtype: op "Sum", "Mean", "Max", "Min", "Prod", "SumSquare" (the sum of
 * squares) or "L1" (of absolute values) exactly, computed in int64 and
 * wrapped as the integer type wraps (numpy's, and ONNX's reference
 * reductions); Mean is the exact mean truncated toward zero (it never
 * overflows). "L2", "LogSum" and "LogSumExp" are onnxruntime's, in
 * double: the sum of the squares (L2) or of the values (LogSum) as
 * doubles, compensated (Kahan's) for i64, then its sqrt or log;
 * LogSumExp is the maximum plus the log of how many elements equal it
 * (exp of an integer difference truncated); each toward zero, saturated
 * to the dtype's ends, a LogSum of a sum <= 0 the smallest value. No
 * gradient. */
TS_API ts_tensor *ts_reduce_int(ts_graph *g, const char *op, ts_tensor *x, int n_axes, const int *axes, int keepdim);
/* ts_cross_entropy over logits [N,...,V] and labels [N,...]; labels equal
 * to ignore_index count neither in the loss nor in the mean. */
TS_API ts_tensor *ts_cross_entropy_ignore(ts_graph *g, ts_tensor *logits, ts_tensor *labels, int32_t ignore_index);

#ifndef TS_NO_SOURCE_LOCATIONS
#define TS_AT_(g) ts_graph_at((g), __FILE__, __LINE__)
#define ts_input(g, ...) ts_input(TS_AT_(g), __VA_ARGS__)
#define ts_param(g, ...) ts_param(TS_AT_(g), __VA_ARGS__)
#define ts_linear(g, ...) ts_linear(TS_AT_(g), __VA_ARGS__)
#define ts_matmul(g, ...) ts_matmul(TS_AT_(g), __VA_ARGS__)
#define ts_matmul_t(g, ...) ts_matmul_t(TS_AT_(g), __VA_ARGS__)
#define ts_add(g, ...) ts_add(TS_AT_(g), __VA_ARGS__)
#define ts_sub(g, ...) ts_sub(TS_AT_(g), __VA_ARGS__)
#define ts_mul(g, ...) ts_mul(TS_AT_(g), __VA_ARGS__)
#define ts_scale(g, ...) ts_scale(TS_AT_(g), __VA_ARGS__)
#define ts_relu(g, ...) ts_relu(TS_AT_(g), __VA_ARGS__)
#define ts_log(g, ...) ts_log(TS_AT_(g), __VA_ARGS__)
#define ts_reshape(g, ...) ts_reshape(TS_AT_(g), __VA_ARGS__)
#define ts_flatten(g, ...) ts_flatten(TS_AT_(g), __VA_ARGS__)
#define ts_log_softmax(g, ...) ts_log_softmax(TS_AT_(g), __VA_ARGS__)
#define ts_softmax(g, ...) ts_softmax(TS_AT_(g), __VA_ARGS__)
#define ts_nll_loss(g, ...) ts_nll_loss(TS_AT_(g), __VA_ARGS__)
#define ts_cross_entropy(g, ...) ts_cross_entropy(TS_AT_(g), __VA_ARGS__)
#define ts_sum(g, ...) ts_sum(TS_AT_(g), __VA_ARGS__)
#define ts_mean(g, ...) ts_mean(TS_AT_(g), __VA_ARGS__)
#define ts_print(g, ...) ts_print(TS_AT_(g), __VA_ARGS__)
#define ts_print_beside(g, ...) ts_print_beside(TS_AT_(g), __VA_ARGS__)
#define ts_constant(g, ...) ts_constant(TS_AT_(g), __VA_ARGS__)
#define ts_div(g, ...) ts_div(TS_AT_(g), __VA_ARGS__)
#define ts_exp(g, ...) ts_exp(TS_AT_(g), __VA_ARGS__)
#define ts_sqrt(g, ...) ts_sqrt(TS_AT_(g), __VA_ARGS__)
#define ts_pow(g, ...) ts_pow(TS_AT_(g), __VA_ARGS__)
#define ts_erf(g, ...) ts_erf(TS_AT_(g), __VA_ARGS__)
#define ts_abs(g, ...) ts_abs(TS_AT_(g), __VA_ARGS__)
#define ts_gather(g, ...) ts_gather(TS_AT_(g), __VA_ARGS__)
#define ts_gather_elements(g, ...) ts_gather_elements(TS_AT_(g), __VA_ARGS__)
#define ts_cast(g, ...) ts_cast(TS_AT_(g), __VA_ARGS__)
#define ts_cast_typed(g, ...) ts_cast_typed(TS_AT_(g), __VA_ARGS__)
#define ts_cumsum(g, ...) ts_cumsum(TS_AT_(g), __VA_ARGS__)
#define ts_unary(g, ...) ts_unary(TS_AT_(g), __VA_ARGS__)
#define ts_binary(g, ...) ts_binary(TS_AT_(g), __VA_ARGS__)
#define ts_binary_typed(g, ...) ts_binary_typed(TS_AT_(g), __VA_ARGS__)
#define ts_bitwise(g, ...) ts_bitwise(TS_AT_(g), __VA_ARGS__)
#define ts_gelu(g, ...) ts_gelu(TS_AT_(g), __VA_ARGS__)
#define ts_silu(g, ...) ts_silu(TS_AT_(g), __VA_ARGS__)
#define ts_embedding(g, ...) ts_embedding(TS_AT_(g), __VA_ARGS__)
#define ts_layer_norm(g, ...) ts_layer_norm(TS_AT_(g), __VA_ARGS__)
#define ts_rms_norm(g, ...) ts_rms_norm(TS_AT_(g), __VA_ARGS__)
#define ts_group_norm(g, ...) ts_group_norm(TS_AT_(g), __VA_ARGS__)
#define ts_matmul_batched(g, ...) ts_matmul_batched(TS_AT_(g), __VA_ARGS__)
#define ts_matmul_int(g, ...) ts_matmul_int(TS_AT_(g), __VA_ARGS__)
#define ts_permute(g, ...) ts_permute(TS_AT_(g), __VA_ARGS__)
#define ts_transpose(g, ...) ts_transpose(TS_AT_(g), __VA_ARGS__)
#define ts_slice(g, ...) ts_slice(TS_AT_(g), __VA_ARGS__)
#define ts_pad(g, ...) ts_pad(TS_AT_(g), __VA_ARGS__)
#define ts_split(g, ...) ts_split(TS_AT_(g), __VA_ARGS__)
#define ts_concat(g, ...) ts_concat(TS_AT_(g), __VA_ARGS__)
#define ts_where(g, ...) ts_where(TS_AT_(g), __VA_ARGS__)
#define ts_masked_fill(g, ...) ts_masked_fill(TS_AT_(g), __VA_ARGS__)
#define ts_reduce_sum(g, ...) ts_reduce_sum(TS_AT_(g), __VA_ARGS__)
#define ts_reduce_mean(g, ...) ts_reduce_mean(TS_AT_(g), __VA_ARGS__)
#define ts_reduce_max(g, ...) ts_reduce_max(TS_AT_(g), __VA_ARGS__)
#define ts_reduce_int(g, ...) ts_reduce_int(TS_AT_(g), __VA_ARGS__)
#define ts_cross_entropy_ignore(g, ...) ts_cross_entropy_ignore(TS_AT_(g), __VA_ARGS__)
#endif

/* ---- convolutional networks (NCHW throughout, PyTorch's semantics) */

/* Geometry of a 2-D convolution; zeros mean PyTorch's defaults (stride 1,
 * no padding, dilation 1, one group). Padding may be asymmetric; `same`
 * pads so that the output has the input's size (stride 1 only; an odd total
 * puts the extra row/column at the bottom/right, as PyTorch does). */
typedef struct ts_conv2d_params {
    int stride_h, stride_w;
    int pad_top, pad_bottom, pad_left, pad_right;
    int dilation_h, dilation_w;
    int groups;
    int same;
} ts_conv2d_params;
/* y[N,OC,OH,OW] = conv(x[N,C,H,W], w[OC,C/groups,KH,KW]) + b[OC] (b may be
 * NULL); p NULL = defaults. */
TS_API ts_tensor *ts_conv2d(ts_graph *g, ts_tensor *x, ts_tensor *w, ts_tensor *b,
                            const ts_conv2d_params *p);
/* Geometry of a 2-D transposed convolution (PyTorch's ConvTranspose2d,
 * ONNX's ConvTranspose); zeros mean the defaults (stride 1, no padding,
 * no output padding, dilation 1, one group). The padding removes rows and
 * columns from the output's border; output padding adds them at its
 * bottom and right. */
typedef struct ts_conv_transpose2d_params {
    int stride_h, stride_w;
    int pad_top, pad_bottom, pad_left, pad_right;
    int output_pad_h, output_pad_w;
    int dilation_h, dilation_w;
    int groups;
} ts_conv_transpose2d_params;
/* y[N,OC,OH,OW] = the transpose of a convolution, of x[N,C,H,W] by
 * w[C,OC/groups,KH,KW], + b[OC] (b may be NULL), with OH = (H-1) stride_h
 * - pad_top - pad_bottom + dilation_h (KH-1) + output_pad_h + 1 (OW
 * likewise): the gradient of ts_conv2d with respect to its input, as
 * PyTorch's conv_transpose2d; p NULL = defaults. */
TS_API ts_tensor *ts_conv_transpose2d(ts_graph *g, ts_tensor *x, ts_tensor *w, ts_tensor *b,
                                      const ts_conv_transpose2d_params *p);
/* Geometry of a 3-D convolution or transposed convolution; zeros mean
 * PyTorch's defaults (stride 1, no padding, dilation 1, one group, no
 * output padding). The axes are depth, height, width; padding may be
 * asymmetric; output padding is the transpose's only (ts_conv3d refuses it). */
typedef struct ts_conv3d_params {
    int stride_d, stride_h, stride_w;
    int pad_front, pad_back, pad_top, pad_bottom, pad_left, pad_right;
    int dilation_d, dilation_h, dilation_w;
    int groups;
    int output_pad_d, output_pad_h, output_pad_w;
} ts_conv3d_params;
/* y[N,OC,OD,OH,OW] = conv(x[N,C,D,H,W], w[OC,C/groups,KD,KH,KW]) + b[OC]
 * (b may be NULL), PyTorch's conv3d; p NULL = defaults. */
TS_API ts_tensor *ts_conv3d(ts_graph *g, ts_tensor *x, ts_tensor *w, ts_tensor *b, const ts_conv3d_params *p);
/* y[N,OC,OD,OH,OW] = the transpose of a 3-D convolution, of x[N,C,D,H,W]
 * by w[C,OC/groups,KD,KH,KW], + b[OC] (b may be NULL): the gradient of
 * ts_conv3d with respect to its input, as PyTorch's conv_transpose3d (each
 * axis as ts_conv_transpose2d's); p NULL = defaults. */
TS_API ts_tensor *ts_conv_transpose3d(ts_graph *g, ts_tensor *x, ts_tensor *w, ts_tensor *b, const ts_conv3d_params *p);
/* A conv layer: creates `<name>.weight` [OC,C/groups,KH,KW] and (if bias)
 * `<name>.bias` [OC], PyTorch's default init U(-1/sqrt(fan_in),
 * 1/sqrt(fan_in)) with fan_in = C/groups*KH*KW; the op is `<name>/Conv2d:0`. */
TS_API ts_tensor *ts_conv2d_layer(ts_graph *g, ts_tensor *x, int64_t out_channels, int kernel_h,
                                  int kernel_w, const ts_conv2d_params *p, int bias, const char *name);

/* Pooling window: kernel (required), stride (0 = the kernel), padding per
 * side (each smaller than the dilated window), dilation (0 = 1).
 * exclude_pad (avg only): 0 divides by the taps inside the padded input
 * (PyTorch's count_include_pad=True default), 1 by those inside the input.
 * ceil_mode: 1 rounds the output size up (PyTorch's and ONNX's ceil_mode),
 * dropping a last window that would start in the bottom/right padding; the
 * extra windows are clipped to the padded input. */
typedef struct ts_pool2d_params {
    int kernel_h, kernel_w;
    int stride_h, stride_w;
    int pad_top, pad_bottom, pad_left, pad_right;
    int exclude_pad;
    int dilation_h, dilation_w;
    int ceil_mode;
} ts_pool2d_params;
/* Max pooling: padding never wins, ties go to the first element of the
 * window (row-major), a NaN in the window gives NaN (PyTorch's CPU rules). */
TS_API ts_tensor *ts_max_pool2d(ts_graph *g, ts_tensor *x, const ts_pool2d_params *p);
TS_API ts_tensor *ts_avg_pool2d(ts_graph *g, ts_tensor *x, const ts_pool2d_params *p);
/* The winners of ts_max_pool2d(g, x, p) as flat indices into x [N,C,H,W]
 * (ONNX MaxPool's Indices): ((n*C + c)*H + h)*W + w, or with column_major
 * (ONNX's storage_order 1) (n*C + c)*H*W + h + w*H; -1 for a window of
 * padding only. Float values, exact while x has at most 2^24 elements
 * (larger x is refused); no gradient flows through them. */
TS_API ts_tensor *ts_max_pool2d_indices(ts_graph *g, ts_tensor *x, const ts_pool2d_params *p, int column_major);
/* [N,C,H,W] -> [N,C,1,1]: the mean of each channel (adaptive_avg_pool2d(x, 1)). */
TS_API ts_tensor *ts_global_avg_pool2d(ts_graph *g, ts_tensor *x);

/* Non-trainable state the graph holds and saves with the parameters (listed
 * by ts_tensor_info like a parameter, set with ts_param_set), never given a
 * gradient; zero-initialised. */
TS_API ts_tensor *ts_buffer(ts_graph *g, const char *name, int ndim, const int64_t *shape);
/* 1 for a buffer (ts_buffer, batch norm running statistics), else 0. */
TS_API int ts_tensor_is_buffer(const ts_tensor *t);
/* Batch normalisation over axis 1 of x [N,C] or [N,C,H,W]. A training model
 * normalises with the batch statistics (biased variance) and updates the
 * running buffers each micro-batch: r = (1-momentum) r + momentum s, with the
 * unbiased variance; an inference model normalises with the running values.
 * frozen = 1 uses the running values in training too (no update). */
TS_API ts_tensor *ts_batch_norm(ts_graph *g, ts_tensor *x, ts_tensor *weight, ts_tensor *bias,
                                ts_tensor *running_mean, ts_tensor *running_var, float eps,
                                float momentum, int frozen);
/* A batch norm layer over x's axis 1 (eps 1e-5, momentum 0.1): creates
 * `<name>.weight` (ones), `<name>.bias` (zeros), buffers
 * `<name>.running_mean` (zeros) and `<name>.running_var` (ones); the op is
 * `<name>/BatchNorm:0`. */
TS_API ts_tensor *ts_batch_norm_layer(ts_graph *g, ts_tensor *x, const char *name);
/* Inverted dropout: x * mask, the mask a tensor of its own
 * (`<scope>/DropoutMask:<k>`, values 0 or 1/(1-p)), drawn per micro-batch
 * from the graph seed (the same seed gives the same masks), all ones in an
 * inference model. 0 <= p < 1. */
TS_API ts_tensor *ts_dropout(ts_graph *g, ts_tensor *x, float p);
/* Values drawn uniformly from [0, 1) in steps of 2^-24, of the shape of
 * `like` (its values are not read), drawn again for every micro-batch, in
 * training and inference, the same on every device (counter-based, as
 * dropout's masks; not PyTorch's numbers); no gradient. torch.rand. */
TS_API ts_tensor *ts_random_uniform(ts_graph *g, ts_tensor *like);
TS_API ts_tensor *ts_tanh(ts_graph *g, ts_tensor *x);
TS_API ts_tensor *ts_sigmoid(ts_graph *g, ts_tensor *x);

#ifndef TS_NO_SOURCE_LOCATIONS
#define ts_conv2d(g, ...) ts_conv2d(TS_AT_(g), __VA_ARGS__)
#define ts_conv_transpose2d(g, ...) ts_conv_transpose2d(TS_AT_(g), __VA_ARGS__)
#define ts_conv3d(g, ...) ts_conv3d(TS_AT_(g), __VA_ARGS__)
#define ts_conv_transpose3d(g, ...) ts_conv_transpose3d(TS_AT_(g), __VA_ARGS__)
#define ts_conv2d_layer(g, ...) ts_conv2d_layer(TS_AT_(g), __VA_ARGS__)
#define ts_max_pool2d(g, ...) ts_max_pool2d(TS_AT_(g), __VA_ARGS__)
#define ts_avg_pool2d(g, ...) ts_avg_pool2d(TS_AT_(g), __VA_ARGS__)
#define ts_max_pool2d_indices(g, ...) ts_max_pool2d_indices(TS_AT_(g), __VA_ARGS__)
#define ts_global_avg_pool2d(g, ...) ts_global_avg_pool2d(TS_AT_(g), __VA_ARGS__)
#define ts_buffer(g, ...) ts_buffer(TS_AT_(g), __VA_ARGS__)
#define ts_batch_norm(g, ...) ts_batch_norm(TS_AT_(g), __VA_ARGS__)
#define ts_batch_norm_layer(g, ...) ts_batch_norm_layer(TS_AT_(g), __VA_ARGS__)
#define ts_dropout(g, ...) ts_dropout(TS_AT_(g), __VA_ARGS__)
#define ts_random_uniform(g, ...) ts_random_uniform(TS_AT_(g), __VA_ARGS__)
#define ts_tanh(g, ...) ts_tanh(TS_AT_(g), __VA_ARGS__)
#define ts_sigmoid(g, ...) ts_sigmoid(TS_AT_(g), __VA_ARGS__)
#endif

TS_API ts_status ts_tensor_set_name(ts_tensor *t, const char *name);
TS_API const char *ts_tensor_name(const ts_tensor *t);
/* The dtype this tensor's anchored values are returned in
 * (ts_model_anchored), converted from the dtype it is computed in: every
 * value must be exact in `dtype` (an integer in its range, 0 or 1 for
 * bool), else reading it is TS_ERR_INVALID_ARGUMENT naming the first other
 * one; an i64 tensor's values as TS_U64 are their bits (uint64 values are
 * held in i64 so: ts_cast). The ONNX importer declares each graph output's ONNX type this way
 * (int64, bool, double, ...). */
TS_API ts_status ts_tensor_set_output_dtype(ts_tensor *t, ts_dtype dtype);
/* The ONNX data type an ONNX import declared for this graph output where it
 * is one of ONNX's low-precision types, which tensorscope holds in f32 on
 * their grid (17 float8e4m3fn, 18 float8e4m3fnuz, 19 float8e5m2, 20
 * float8e5m2fnuz, 21 uint4, 22 int4, 23 float4e2m1, 24 float8e8m0, 25
 * uint2, 26 int2: docs/onnx.md); 0 for any other tensor. */
TS_API int ts_tensor_onnx_type(const ts_tensor *t);
/* Shape (and a view of a parameter's values in `out->data`, NULL otherwise).
 * On the CPU the view follows every run (the optimizer writes the values
 * in place). On a GPU the values stay on the device between runs and come
 * back to the host the first time something reads or writes them there
 * (this call, saved weights, a checkpoint, ts_param_set, another model's
 * run on the graph, the model's end): the view is current as of the last
 * such call, so call this again after a run to read it. To change the
 * values, call ts_param_set: a model on a GPU sends the values again, and
 * an inference model on the CPU makes again what it keeps derived from
 * them (its convolutions' transformed weights), only after ts_param_set
 * (or a restored checkpoint, or a training run), not after a write through
 * this pointer. */
TS_API ts_status ts_tensor_info(const ts_tensor *t, ts_array *out);
/* The one rule for every tensor pattern (anchors, watches, outfeed filters,
 * the CLI's --anchor, --watch, --outfeed, --print-tensor): a pattern with
 * `*`, `?` or `[` is a glob over the whole name (fnmatch, `*` crosses `/`);
 * any other pattern is one name, matched exactly and case-sensitively.
 * Returns 1 on a match. */
TS_API int ts_name_matches(const char *pattern, const char *name);
/* Finds a tensor of the graph by name (parameters, inputs, op outputs). */
TS_API ts_tensor *ts_graph_find(const ts_graph *g, const char *name);
/* The (up to) three tensor names of the graph closest to `name`, quoted and
 * comma-separated, for "did you mean" messages; returns buf. */
TS_API const char *ts_graph_closest_names(const ts_graph *g, const char *name, char *buf, size_t n);
/* The same for any list of n words (flags, commands, model names). */
TS_API const char *ts_closest_words(const char *word, const char *const *words, size_t n, char *buf, size_t cap);
/* Every tensor of the graph in build order (i < ts_graph_tensor_count). */
TS_API size_t ts_graph_tensor_count(const ts_graph *g);
TS_API ts_tensor *ts_graph_tensor_at(const ts_graph *g, size_t i);
/* Copies values into a parameter (shape and dtype must match). */
TS_API ts_status ts_param_set(ts_tensor *param, const ts_array *values);
/* What a node is: its op's name ("MatMul", "Param", "Input"), its inputs,
 * and where it was built ("file.c:42", or "" when unknown) into buf. */
TS_API const char *ts_tensor_op(const ts_tensor *t);
TS_API int ts_tensor_input_count(const ts_tensor *t);
TS_API ts_tensor *ts_tensor_input(const ts_tensor *t, int i);
TS_API const char *ts_tensor_location(const ts_tensor *t, char *buf, size_t n);
/* Every parameter's values: saved to PATH ending in .npz as one archive,
 * otherwise into directory PATH as `<name>.npy` files (created if needed).
 * Loading needs every parameter, with its shape; a file entry the graph
 * does not have is an error too (a strict state-dict load). */
TS_API ts_status ts_graph_save_weights(const ts_graph *g, const char *path);
TS_API ts_status ts_graph_load_weights(ts_graph *g, const char *path);
/* ts_graph_load_weights without its strictness (PyTorch's strict=False):
 * sets the parameters the file has by name (each checked as above: a
 * shape or a NaN that does not fit is still an error, and then nothing is
 * set), keeps the value of each it lacks and skips its other arrays,
 * telling skipped() (may be NULL; the name lives for the call) of each. A file that holds none of the
 * parameters is an error. For a reference's weights against an exported
 * model that folded some of them (a BatchNorm fused into a Conv) or holds
 * folded values under names of its own. *loaded (may be NULL): how many
 * were set. */
typedef enum ts_weight_skip {
    TS_WEIGHT_MISSING = 1,   /* a parameter of the model the file lacks: kept */
    TS_WEIGHT_UNEXPECTED = 2 /* an array of the file that is no parameter: skipped */
} ts_weight_skip;
typedef void (*ts_weights_skipped_fn)(void *ctx, const char *name, ts_weight_skip why);
TS_API ts_status ts_graph_load_weights_matching(ts_graph *g, const char *path, ts_weights_skipped_fn skipped, void *ctx,
                                                size_t *loaded);

/* ----------------------------------------------------------- ONNX import */

/* The static shape of one input of an imported model, or its value: an
 * input bound to `value` (not NULL) is no input of the graph but that
 * constant, folded like an initializer (ndim and shape are then ignored).
 * Inputs that give axes, shapes, sizes, pads or a Range's bounds (ONNX's
 * test models, TensorRT's shape tensors) must be bound this way. */
typedef struct ts_onnx_input {
    const char *name;
    int ndim;
    int64_t shape[TS_MAX_DIMS];
    const ts_array *value;
} ts_onnx_input;
/* Reads an ONNX model into a new graph (parameters keep the file's
 * initializer names; see docs/design.md#tensor-names
 * and docs/onnx.md). Inputs with dynamic dims must be
 * given; others may be (a given shape replaces the file's, e.g. the batch
 * size of the exporter's example input). Opsets 1 to 28 of the default
 * domain (the newest of onnx 1.23.2), and tensorscope's own domain
 * `ai.tensorscope` (StopGradient: ts_stop_gradient; the Python wrapper
 * writes it for a torch detach()), each node read by its op's version at
 * the model's opset: another opset is TS_ERR_UNSUPPORTED naming the range,
 * and so is an op's version older than the importer reads (below opset 13,
 * one that differs from opset 13's in more than its types and that the
 * importer does not read as its spec says: Split's 'split' attribute, ...),
 * an attribute or input its op's version lacks TS_ERR_FORMAT; shape
 * computations (Shape, Gather, Concat, Unsqueeze, ConstantOfShape, Range,
 * Cast, ...) are folded for the static shapes, the rest becomes graph ops
 * named `<scope>/<OpType>:<k>` with the scope read from the node's name
 * (`/blocks.0/attn/MatMul` -> `blocks.0.attn/MatMul:0`); the file's value
 * names are aliases that ts_graph_find also finds. Each node records
 * `model.onnx:<node index> (<node name>)` as its source location. An op type
 * the importer lacks is TS_ERR_UNSUPPORTED naming the op type, the node,
 * the opset and the op types it supports. The file is read as untrusted
 * input: external data only from regular files inside the model's folder,
 * reached through no symbolic link (TS_ERR_FORMAT otherwise), within their
 * size; the constants folded at import count against
 * TS_LIMIT_IMPORT_BYTES; counts and int64 values out of range are errors. */
TS_API ts_status ts_graph_from_onnx(ts_graph **out, const char *path,
                                    const ts_onnx_input *inputs, int n_inputs);
/* The graph outputs an import recorded, in file order. */
TS_API size_t ts_graph_output_count(const ts_graph *g);
TS_API ts_tensor *ts_graph_output_at(const ts_graph *g, size_t i);
/* The file's own name of an imported tensor (its first alias), or NULL. */
TS_API const char *ts_tensor_alias(const ts_tensor *t);

/* --------------------------------------------------------------- options */

typedef enum ts_output_mode {
    TS_OUTPUT_DEFAULT = 0, /* FINAL for training, ALL for inference */
    TS_OUTPUT_FINAL,       /* T: the last sample */
    TS_OUTPUT_EVERY_N,     /* [S/N, *T]: samples N-1, 2N-1, ... */
    TS_OUTPUT_ALL,         /* [S, *T]: every sample, in order */
    TS_OUTPUT_SUM          /* T: the sum over the S samples */
} ts_output_mode;
TS_API const char *ts_output_mode_name(ts_output_mode m); /* "all", ... */
/* Case-insensitive "final", "every_n", "all", "sum", "default". */
TS_API ts_status ts_output_mode_parse(const char *s, ts_output_mode *out);

/* A NaN/Inf stops the run with TS_ERR_NUMERICS and a report (also logged
 * at TS_LOG_ERROR) naming the tensor, the op that made it and where that op
 * was built, with the stats of what the op read: for a gradient, the op
 * whose backward kernel wrote it ("produced by Log's backward"), its
 * incoming gradient and the forward tensors it keeps. When one of those is
 * already non-finite the report says so first (the origin is upstream).
 * Under OUTPUT the micro-batch is then re-executed op by op and the report
 * goes on with the op that made the first NaN/Inf (docs/observation.md#numeric-checks).
 * In an MPI job the report begins "numeric check on rank R of N at step S:"
 * and every rank stops at that step with it (ts_options_set_replication). */
typedef enum ts_check_numerics {
    TS_CHECK_OFF = 0,
    TS_CHECK_OUTPUT, /* after each layer output and its gradient */
    TS_CHECK_OP      /* after every op */
} ts_check_numerics;
/* Case-insensitive "off" (or "0"), "output", "op". */
TS_API ts_status ts_check_numerics_parse(const char *s, ts_check_numerics *out);

/* What a watch computes, OR-ed together. */
enum {
    TS_WATCH_STATS = 1,     /* count, mean, std, min, max, L2, zeros, NaN, Inf */
    TS_WATCH_HISTOGRAM = 2, /* log2-magnitude buckets + TensorBoard buckets */
    TS_WATCH_RANGE = 4      /* fp16/bf16/fp8 underflow and overflow fractions */
};

typedef struct ts_options ts_options;
typedef struct ts_model ts_model;
TS_API ts_options *ts_options_new(void);
TS_API void ts_options_free(ts_options *o);
/* D >= 1: the number of optimizer steps (training) per run. */
TS_API ts_status ts_options_set_device_iterations(ts_options *o, int d);
/* A >= 1: micro-batches whose gradients are averaged before each step. */
TS_API ts_status ts_options_set_gradient_accumulation(ts_options *o, int a);
/* Global output mode of anchors that do not set their own (period for
 * EVERY_N, else 0). */
TS_API ts_status ts_options_set_output_mode(ts_options *o, ts_output_mode m, int period);
/* Anchors `tensor_name` under `short_name` (NULL = the tensor's name); a
 * glob (ts_name_matches) anchors every match under its own name. mode
 * DEFAULT = use the global mode. Names are checked at compile. */
TS_API ts_status ts_options_anchor(ts_options *o, const char *short_name,
                                   const char *tensor_name, ts_output_mode mode, int period);
/* Summaries of every tensor whose name matches `pattern` (ts_name_matches:
 * a glob, or one exact name), every `period` runs (>= 1). */
TS_API ts_status ts_options_watch(ts_options *o, const char *pattern, int what, int period);
/* Stability signals of every layer whose name matches `layers` (a glob
 * over layer names: `fc1`, `blocks.*`, `*`), every `period` runs, taken
 * where the tensors live with the watches' summaries at each run's last
 * step (docs/observation.md#stability-signals). Each is a watch result row
 * (ts_model_watch_results) named `stability/<layer>/<signal>`, its value in
 * summary->stats.mean (count 1; NaN or Inf flagged as a stats row is):
 *   rms, max_abs       the layer's output (the last tensor its scope makes)
 *   max_logit.h<k>     attention scores (a Softmax's 4-D input [B,H,Tq,Tk]):
 *                      the largest logit of head k
 *   lse                the logits a LogSoftmax or CrossEntropy reads: the
 *                      mean over rows of log(sum(exp(x))) (what z-loss
 *                      squares)
 *   grad_norm          a parameter's (`<layer>` is the parameter's name):
 *                      the L2 norm of the gradient the step uses (Accum___)
 *   update_ratio       ||w_after - w_before|| / ||w_before||
 *   adam_update_norm   Adam and AdamW: ||m^ / (sqrt(v^) + eps)||, the step
 *                      before the learning rate and weight decay
 * Training models only; one replica and one pipeline stage (compile says
 * otherwise). On a GPU the update's signals are not taken (rows absent). */
TS_API ts_status ts_options_watch_stability(ts_options *o, const char *layers, int period);
TS_API ts_status ts_options_set_check_numerics(ts_options *o, ts_check_numerics c);
/* Worker threads for elementwise ops and reductions (0 = number of cores). */
TS_API ts_status ts_options_set_threads(ts_options *o, int n);
/* The device the model runs on: "cpu" (the default), "cuda" (the first
 * GPU) or "cuda:N". Without this call, the TS_DEVICE environment variable
 * names it, else the CPU. A device this build or machine lacks fails at
 * ts_model_new / ts_train_new with TS_ERR_UNSUPPORTED saying which (built
 * without CUDA; no GPU or driver; no GPU N). On a GPU today: parameters,
 * buffers and optimizer state go to the device when the host wrote them
 * and come back when the host reads them (ts_tensor_info); anchors and
 * stats watches are taken on the device, other
 * observers read a host copy of what they observe; each step is recorded
 * once as a CUDA graph and replayed after, unless what it observes or
 * checks is read on the host during the step (TS_CUDA_GRAPHS=0: never);
 * replicas and pipeline stages run on the CPU only. */
TS_API ts_status ts_options_set_device(ts_options *o, const char *device);
/* 1: on a GPU, float32 products (MatMul, Gemm, batched products,
 * convolutions) may round their inputs to TF32 (10 mantissa bits) and run
 * on tensor cores: several times faster for large products, with about
 * 1e-3 relative error in each. 0 (the default, as PyTorch's
 * torch.backends.cuda.matmul.allow_tf32): products in float32. The CPU
 * computes in float32 either way. */
TS_API ts_status ts_options_set_allow_tf32(ts_options *o, int allow);
/* 1: ts_model_compile plans the program (tensor names, shapes, the memory
 * plan and its sizes, lint warnings, graph dumps, ts_model_memory) without
 * allocating the buffers it lays out, so a model far larger than memory
 * can be inspected; such a model does not run (TS_ERR_STATE). 0 (the
 * default): compiled to run. `tensorscope names`, `graph` and `lint`
 * compile this way. */
TS_API ts_status ts_options_set_plan_only(ts_options *o, int on);
/* 1: after each run, one info line with every layer's output shape (each
 * top-level op's output and each output leaving its scope, in order):
 * "step 3: layer output shapes: Flatten:0 f32[64,784], fc1/Add:0
 * f32[64,320], ..." ("eval run N" for inference), as RETURNN's
 * debug_print_layer_output_shape; and at a recompilation the layers whose
 * shapes changed: "recompiled (InputShapeChanged): layer output shapes
 * changed: fc1/Add:0 f32[64,320] -> f32[16,320], ...". 0: off (the
 * default). */
TS_API ts_status ts_options_set_log_layer_shapes(ts_options *o, int on);
/* A startup hook (RETURNN's startup_callback): fn(model, user) runs once,
 * inside the first ts_model_run, after the model is compiled for that run's
 * inputs and before its first step -- a place for the user's checks, with
 * the model in hand (its tensor names, parameters, ts_model_tensor_origin).
 * A status other than TS_OK stops the run before any step: ts_model_run
 * returns it, its message "the on_start hook stopped the run before its
 * first step: " and the hook's ts_last_error(); the next run calls the hook
 * again. It must not run the model. NULL removes it. */
typedef ts_status (*ts_start_fn)(ts_model *m, void *user);
TS_API ts_status ts_options_set_on_start(ts_options *o, ts_start_fn fn, void *user);
/* TS_OK when `device` ("cpu", "cuda", "cuda:N") can run models here;
 * otherwise the error a model on it would give (TS_ERR_INVALID_ARGUMENT
 * for a name tensorscope does not know, TS_ERR_UNSUPPORTED saying why it
 * is not here). */
TS_API ts_status ts_device_check(const char *device);
/* `device` in one line, for users and bug reports (`tensorscope info`):
 * "cpu: 16 threads, 125.7 GiB memory"; a GPU "cuda:0: NVIDIA H200, sm_90,
 * 139.8 GiB (139.2 free), 132 SMs, driver 13.0, runtime 13.0, cuBLAS
 * 13.0.2, PCI 0000:1A:00.0" (its name, compute capability, memory and
 * what of it is free now, multiprocessors, the CUDA versions of the driver
 * and of the runtime built in, the cuBLAS a model would load, its PCI bus
 * id). A device this build or machine lacks: the error ts_device_check
 * gives. Describing a GPU starts no model on it and does not tie the
 * process to it; it loads cuBLAS and makes the CUDA runtime's context on
 * that GPU (its memory, some hundreds of MiB, held until the process ends).
 * The line is cut to fit n bytes (256 hold it). */
TS_API ts_status ts_device_describe(const char *device, char *buf, size_t n);
/* Every GPU CUDA sees, a line each as ts_device_describe writes it, or one
 * line saying why there is none ("cuda:0: no usable GPU here (...)", or
 * "cuda: a CUDA device needs tensorscope built with CUDA: ..."), each
 * ending in '\n', cut to fit n bytes; *count (may be NULL) <- how many.
 * TS_OK with or without GPUs (the debug bundle's gpu.txt begins with it). */
TS_API ts_status ts_gpus_describe(char *buf, size_t n, int *count);
/* R data-parallel replicas, one per rank of the MPI job (R must equal its
 * number of ranks; 1 = off; see ts_dist_init and
 * docs/design.md#replicas-and-pipeline-stages). Every rank
 * passes the same combined batch, x of declared shape [B,...] as
 * [D*A*R*B, ...]; replica r computes samples [r*B, (r+1)*B) of each
 * micro-batch. Gradients are averaged over the replicas (MPI_Allreduce)
 * before each step: `Gradient___` is per replica, `Accum___` the average.
 * Anchors gain a replica axis after the sample axis ([S, R, *T] for ALL and
 * EVERY_N, [R, *T] for FINAL and SUM), watch results a row per replica and a
 * reduced row (naming the replicas of its min, max and first NaN/Inf), on
 * every rank. Every `check_every` steps (0 = never; and before the first
 * step) a CRC-32C of each parameter and buffer is compared across ranks: a
 * desync is TS_ERR_DIST on every rank naming the first differing one in
 * graph order and the rank whose checksum differs from most ranks' (of
 * two, rank 1). A rank whose run fails (a numeric check) stops every other
 * at its next wait, the same step, with its status and report ("rank 1
 * failed and stopped every rank of the job: numeric check on rank 1 of 2
 * at step 3: ..."). With replicas or pipeline stages
 * the ranks compare their options and graph at compile (and again before
 * the first run after ts_model_set_lr_schedule): ranks built differently
 * fail, every one of them, with TS_ERR_DIST naming the first difference and
 * both values, before any step. */
TS_API ts_status ts_options_set_replication(ts_options *o, int replicas, int check_every);
/* A pipeline of K stages, one per rank of the MPI job (K must equal its
 * number of ranks; 1 = off): the model is split before the first op of each
 * scope in split_at (K - 1 names, in forward order; `fc2` splits before
 * `fc2/MatMul:0`). Each step's A micro-batches stream through the stages
 * (GPipe: every forward, then every backward; the last stage runs each
 * backward right after its forward; or 1F1B, ts_options_set_pipeline_schedule); activations and gradients cross ranks
 * as MPI messages; each stage updates its own parameters, and after each
 * run every rank holds all of them. Anchors and watch results of every
 * stage reach every rank. Every rank passes the same inputs. */
TS_API ts_status ts_options_set_pipeline(ts_options *o, int stages, const char *const *split_at, int n_split);
/* The order a stage runs its micro-batches in. GPIPE (default): every
 * forward, then every backward. 1F1B: stage s runs K - 1 - s forwards,
 * then alternates one forward and one backward, then the last backwards,
 * so at most K - s micro-batches wait for their backward on it (the same
 * bubble, less memory in flight). Both give the same weights, bit for bit:
 * each stage's backwards come in the same order. */
typedef enum ts_pipeline_schedule { TS_PIPELINE_GPIPE = 0, TS_PIPELINE_1F1B } ts_pipeline_schedule;
TS_API ts_status ts_options_set_pipeline_schedule(ts_options *o, ts_pipeline_schedule schedule);
/* A timeline of the run (docs/trace.md): writes `path` as a Chrome/Perfetto
 * trace (Trace Event Format JSON) of optimizer steps first_step..last_step
 * (1-based, inclusive; last_step 0 = every step from first_step on): a
 * "step N" slice enclosing each micro-batch's forward and backward (a slice
 * per op with its shape and FLOPs), the optimizer and the observers, on the
 * calling thread's track; the CPU workers' slices and the outfeed consumers'
 * deliveries on their own tracks; recompilations, all-reduces and pipeline
 * sends. Events are kept in memory while the steps run; the file is written
 * when step last_step ends, else by ts_model_finish or when the model is
 * freed (a cancelled or failed run too). When it cannot be written, the
 * error is the step's (or ts_model_finish's) and a file an earlier run left
 * at the path is removed. Inference models count a step per batch. The path is
 * checked at once (TS_ERR_IO when it cannot be written); NULL turns tracing
 * off. One model of a process traces at a time. */
TS_API ts_status ts_options_set_trace(ts_options *o, const char *path, int64_t first_step, int64_t last_step);
/* The offline debugger dump (docs/formats.md#debugger-dump), as
 * TensorFlow's enable_dump_debug_info: for each run from first_step to
 * last_step (1-based, inclusive; 0: to the end), every op's output (inputs
 * and parameters included) and, with grads, every gradient, each as
 * DIR/step_NNNNNN/<entry>_<name>.npy, listed in DIR/index.tsv (step, name,
 * kind, op, source line, graph position, dtype, shape, path). `ops` (NULL:
 * every one) is a glob over tensor names or op types (ts_name_matches):
 * "fc1*", "MatMul". Of a run of several micro-batches the tensors are those
 * of its last one (the run is held: ts_model_hold). Parameters are their
 * values as the run reads them. Each file is written atomically after the
 * run, and the index rewritten atomically after each run's files: it lists
 * only complete files. limit_bytes (0: no limit) bounds the dump: the first
 * dumped run refuses to start (TS_ERR_INVALID_ARGUMENT, saying how to raise
 * it) when the planned size (the selected tensors' files x the steps)
 * exceeds it, and writing stops with TS_ERR_IO at the limit (an open range).
 * DIR is made at once (TS_ERR_IO when it cannot be); NULL turns it off. */
TS_API ts_status ts_options_set_dump_debug(ts_options *o, const char *dir, int64_t first_step, int64_t last_step, const char *ops, int grads,
                                           int64_t limit_bytes);
/* Mixed precision, as PyTorch's autocast (docs/precision.md): TS_F32 (the
 * default), TS_BF16 or TS_F16. The float inputs of every matmul, batched
 * matmul and convolution become 16-bit copies named `<input>@bf16`
 * (`fc1.weight@bf16`, `Relu:0@bf16`), Cast nodes inserted into the graph
 * when the model is made, which those ops read, accumulating in f32; their
 * gradients are 16-bit too. Softmax, normalisations, losses, reductions,
 * the master weights and the optimizer state stay f32. A graph takes one
 * precision: a model of another precision on it is refused, and so is a
 * first 16-bit model on a graph another model already uses (make it
 * first). With TS_USE_BF16=1 in the environment, a model whose options set
 * no precision is bf16. f16 turns on dynamic loss scaling (below). */
TS_API ts_status ts_options_set_precision(ts_options *o, ts_dtype precision);
/* Dynamic loss scaling, as PyTorch's GradScaler: the loss's gradient
 * starts at `init_scale`; a step whose gradients hold an Inf or NaN is
 * skipped (the weights and optimizer state untouched, counted in the
 * metrics as SkippedSteps) and the scale multiplied by `backoff` (0..1);
 * after `growth_interval` steps in a row without one it is multiplied by
 * `growth` (> 1). The optimizer sees the gradients divided by the scale.
 * enabled: 1 on, 0 off, -1 on exactly for f16 precision (the default).
 * GradScaler's defaults: 65536, 2, 0.5, 2000. */
TS_API ts_status ts_options_set_loss_scaling(ts_options *o, int enabled, float init_scale, float growth, float backoff,
                                             int growth_interval);

/* ---- the spike detector (docs/observation.md#spikes)
 * Before each optimizer step's update, every watch result made since the
 * last check becomes a signal: the loss's value; a value's (an input, a
 * parameter, a layer's output, UpdatedVar___, optimizer state) RMS
 * (L2 / sqrt(count)) and max |x|; a gradient's (Gradient___, Accum___) L2
 * norm; a row of no tensor the program knows, made by a watch of its own,
 * its value when single (judged last in the step's order), else its RMS
 * and max |x|; NaN where the tensor held a NaN or Inf. Each signal is judged
 * against its own last `window` values: its robust z-score is
 * (x - median) / max(1.4826 MAD, 0.01 |median|) (MAD: the median absolute
 * deviation; the floor keeps a signal that has barely moved, a weight's
 * max |x|, from crossing on a small move), from its 16th value on (the
 * window's size when smaller). |z| >= k is a spike. The step's first mover
 * is the signal that crossed first in the step's order: the previous
 * update's results (UpdatedVar___, optimizer state, Accum___), then the
 * forward's values in graph order, the loss among them, then the gradients
 * in the order the backward makes them. The detector adds a stats watch of
 * every tensor, every run (ts_options_watch(o, "*", TS_WATCH_STATS, 1)),
 * and reads whatever rows the watches make: with D device iterations it
 * judges each run's last step (the one the watches summarise), and the
 * loss at it. At a spike it logs (TS_LOG_WARN) the step, the signal, the
 * tensor, its layer and z-score (ts_model_spike), then: */
typedef enum ts_spike_action {
    TS_SPIKE_CONTINUE = 0, /* trains on */
    TS_SPIKE_SKIP,         /* skips the step's update: weights and optimizer state as they were (counted: SkippedSteps) */
    TS_SPIKE_STOP,         /* stops the run before the step's update: TS_ERR_SPIKE, the weights of the last completed step */
    TS_SPIKE_NPZ,          /* as STOP, with every run held (ts_model_hold): the held tensors written to npz_path */
    TS_SPIKE_INSPECT       /* as STOP, with every run held: the step's tensors read by ts_model_held (the CLI's inspector) */
} ts_spike_action;
#define TS_SPIKE_K 12.0     /* the default threshold, in robust z-score units */
#define TS_SPIKE_WINDOW 32  /* the default window, in steps */
/* k > 0 (0: off, the default; the watch an earlier call added stays), window >= 2 steps, npz_path for
 * TS_SPIKE_NPZ (else NULL). A training model, in one process (replicas and
 * pipeline stages: TS_ERR_UNSUPPORTED at its first run). */
TS_API ts_status ts_options_detect_spikes(ts_options *o, double k, int window, ts_spike_action action, const char *npz_path);
/* Case-insensitive "continue", "skip", "stop", "npz", "inspect". */
TS_API ts_status ts_spike_action_parse(const char *s, ts_spike_action *out);
TS_API const char *ts_spike_action_name(ts_spike_action a);
typedef struct ts_spike {
    int64_t step;       /* the optimizer step (1-based) it was found at */
    const char *signal; /* "loss", "rms", "max_abs", "norm", or "value" (a single-value row of no tensor) */
    const char *tensor; /* whose signal crossed first (the loss's own name for the loss) */
    const char *layer;  /* its layer: an op's scope (fc2 of fc2/Add:0), a parameter's module (fc2 of fc2.weight), else its name */
    double value, median, mad, z; /* the signal, its window's median and MAD, its robust z-score (+-Inf: not finite) */
    int crossed;        /* how many signals crossed at that step */
    ts_spike_action action; /* what was done */
} ts_spike;
/* The spikes found so far; *last (may be NULL) <- the latest (its strings
 * valid until the next run or free). 0, *last zeroed, when none. */
TS_API int64_t ts_model_spike(const ts_model *m, ts_spike *last);

/* ------------------------------------------------------------ optimizers */

typedef enum ts_optimizer_kind { TS_OPT_SGD = 0, TS_OPT_ADAM, TS_OPT_ADAMW } ts_optimizer_kind;
typedef struct ts_optimizer {
    ts_optimizer_kind kind;
    float lr;
    float momentum;     /* SGD */
    float dampening;    /* SGD */
    int nesterov;       /* SGD */
    float weight_decay; /* SGD and Adam: L2 added to the gradient; AdamW: decoupled */
    float beta1, beta2, eps; /* Adam, AdamW */
} ts_optimizer;
/* PyTorch's defaults for everything not named. */
TS_API ts_optimizer ts_sgd(float lr, float momentum, float weight_decay);
TS_API ts_optimizer ts_adam(float lr);
TS_API ts_optimizer ts_adamw(float lr, float weight_decay);

/* Learning-rate schedules, evaluated at every optimizer step t (0-based):
 * a linear warmup over the first W steps, lr * (t + 1) / W (PyTorch's
 * LinearLR(1/W, 1, W - 1)), then with u = t - W
 *   CONSTANT  lr
 *   STEP      lr * gamma^floor(u / step_size)          (StepLR)
 *   COSINE    min_lr + (lr - min_lr)(1 + cos(pi min(u, T) / T)) / 2, T =
 *             total_steps                           (CosineAnnealingLR) */
typedef enum ts_lr_schedule_kind { TS_LR_CONSTANT = 0, TS_LR_STEP, TS_LR_COSINE } ts_lr_schedule_kind;
typedef struct ts_lr_schedule {
    ts_lr_schedule_kind kind;
    int64_t warmup_steps; /* W >= 0 (0 = none) */
    int64_t step_size;    /* STEP: >= 1 */
    double gamma;         /* STEP: >= 0 */
    int64_t total_steps;  /* COSINE: T >= 1, the steps after warmup */
    double min_lr;        /* COSINE: >= 0 */
} ts_lr_schedule;
/* Case-insensitive "constant", "step", "cosine". */
TS_API ts_status ts_lr_schedule_parse(const char *s, ts_lr_schedule_kind *out);
TS_API const char *ts_lr_schedule_name(ts_lr_schedule_kind k);
/* The learning rate of step t for a base rate (no checks: see above). */
TS_API double ts_lr_at(const ts_lr_schedule *s, double base_lr, int64_t t);

/* ------------------------------------------------ per-parameter training
 * What a PyTorch program says about training beyond its ops: detach(),
 * parameters the optimizer leaves alone, parameter groups. */

/* x itself, through which no gradient flows back (PyTorch's x.detach()):
 * what reaches the loss only through it gets no gradient at all (not a
 * zero one), so a parameter behind it is not updated, as PyTorch's
 * optimizers skip a parameter whose .grad is None. Named
 * `<scope>/StopGradient:<k>`. */
TS_API ts_tensor *ts_stop_gradient(ts_graph *g, ts_tensor *x);
#ifndef TS_NO_SOURCE_LOCATIONS
#define ts_stop_gradient(g, ...) ts_stop_gradient(TS_AT_(g), __VA_ARGS__)
#endif
/* Whether a training model updates `param` (1, the default) or leaves its
 * values alone (0: PyTorch's requires_grad=False, or a parameter its
 * optimizer does not hold). A frozen parameter's gradient is not computed
 * unless something asks for it (an anchor of `Gradient___<name>`), and
 * nothing else's is computed for it alone. Set before any model of the
 * graph is made (TS_ERR_STATE after). */
TS_API ts_status ts_param_set_trainable(ts_tensor *param, int trainable);
/* 1 when trainable, 0 when frozen or not a parameter. */
TS_API int ts_param_trainable(const ts_tensor *param);
/* The settings `param` is updated with, where they differ from the
 * model's optimizer (a PyTorch parameter group's lr, weight decay,
 * momentum, betas, ...): `opt` is checked as ts_model_training checks
 * its optimizer and must be of the model's kind (one optimizer; a model of
 * another kind fails to compile, naming the parameter). Its lr is the
 * parameter's base rate: the model's schedule scales it as it scales the
 * model's (PyTorch's schedulers scale every group from its own initial
 * rate); setting the model's base rate (ts_model_set_base_lr) leaves it
 * as it is. NULL: the model's settings again. Set before any model of
 * the graph is made (TS_ERR_STATE after). */
TS_API ts_status ts_param_set_optimizer(ts_tensor *param, const ts_optimizer *opt);

/* ----------------------------------------------------------------- model */


/* A training model of `g` minimising `loss` (a scalar). The graph must
 * outlive the model; parameters live in the graph, so an inference model of
 * the same graph sees the trained weights. */
TS_API ts_status ts_model_training(ts_model **out, ts_graph *g, ts_tensor *loss,
                                   const ts_options *o, ts_optimizer opt);
/* An inference model computing `outputs` (each anchored under its name). */
TS_API ts_status ts_model_inference(ts_model **out, ts_graph *g, ts_tensor *const *outputs,
                                    int n_outputs, const ts_options *o);
TS_API void ts_model_free(ts_model *m);
/* The dump's plan (ts_options_set_dump_debug), compiling the model if it
 * is not: the tensors one run writes, the runs left to dump (up to
 * last_run, the last run the caller will make; 0: the range's end, which
 * an open range must then not be) and their bytes. TS_ERR_INVALID_ARGUMENT,
 * with the figures and how to raise the limit, when they exceed it. */
TS_API ts_status ts_model_dump_debug_plan(ts_model *m, int64_t last_run, int64_t *tensors, int64_t *steps, int64_t *bytes);
/* Writes what the model still holds for a file of its own: a trace whose
 * step range is open or not yet reached (ts_options_set_trace) is written
 * now, and nothing more is traced. Returns the error of writing it (a full
 * disk: TS_ERR_IO), which ts_model_free can only log. The model stays
 * usable. */
TS_API ts_status ts_model_finish(ts_model *m);

/* Validates, infers shapes, orders ops and plans memory. Errors name the
 * culprit and what to do. */
TS_API ts_status ts_model_compile(ts_model *m);
/* Every tensor name of the compiled model, sorted; an error before compile.
 * The array and strings stay valid until the next compile or free. */
TS_API ts_status ts_model_tensor_names(const ts_model *m, const char *const **names, size_t *n);
/* Adds an anchor after compile: the next run recompiles (counted). */
TS_API ts_status ts_model_anchor(ts_model *m, const char *short_name, const char *tensor_name,
                                 ts_output_mode mode, int period);

/* One run: D x A micro-batches for training (D for inference). Each input is
 * given with the micro-batches stacked on axis 0: x of declared shape [B,...]
 * is passed as [D*A*B, ...]. A different B recompiles (counted). */
TS_API ts_status ts_model_run(ts_model *m, const char *const *input_names,
                              const ts_array *inputs, int n_inputs);

/* Asks the run in progress on `m` to stop (Ctrl-C). Safe from any thread
 * and from a signal handler (it only sets a flag; a NULL model is
 * TS_ERR_INVALID_ARGUMENT with no message, as a handler cannot format
 * one). The run checks the flag before each micro-batch (in an MPI job of
 * replicas or pipeline stages: before each step, every rank together, so
 * a cancel on any rank stops every rank at the same step; on a GPU whose
 * runs are replayed as CUDA graphs: before each launch, the whole run or
 * each 64 steps of it, which then runs whole) and returns
 * TS_ERR_CANCELLED saying how far it got. Each run clears the flag when it
 * starts: a cancel asked while no run is in progress has no effect.
 * A cancelled run counts in ts_model_runs and keeps what it computed:
 *   - parameters and optimizer state as the last completed optimizer step
 *     left them (ts_model_steps counts it; the micro-batches of an
 *     unfinished step leave no trace in the weights); buffers (batch-norm
 *     running statistics) include every completed micro-batch;
 *   - outfeed records of the completed micro-batches (and steps) were
 *     enqueued, as after any run (under MPI gathered to rank 0);
 *   - anchors keep their shape: rows of samples the run completed hold
 *     their values and every other row is NaN (0 for integer tensors).
 *     ALL and EVERY_N rows of completed samples are this run's; SUM is the
 *     sum over the completed samples (NaN when none); FINAL is NaN unless
 *     the run completed its last sample. A sample of a per-step tensor
 *     (Accum___, UpdatedVar___, parameters) is a completed step;
 *   - watch results and metrics of the run are not computed (those of the
 *     previous run stay). The next run starts afresh. */
TS_API ts_status ts_model_cancel(ts_model *m);

/* The anchored array of the last run (see ts_output_mode for its shape).
 * Valid until the next run. The loss of a training model and each output of
 * an inference model are anchored under their own names. */
TS_API ts_status ts_model_anchored(const ts_model *m, const char *short_name, ts_array *out);
/* Short names of every anchor of the compiled model (globs expanded), in
 * the order they were resolved. Valid until the next compile or free. */
TS_API ts_status ts_model_anchor_list(const ts_model *m, const char *const **short_names, size_t *n);
/* Follows `s` from the next optimizer step on, counted from step 0 of the
 * model (the optimizer's lr is the base rate); NULL = constant. */
TS_API ts_status ts_model_set_lr_schedule(ts_model *m, const ts_lr_schedule *s);
/* The learning rate of the last optimizer step (the next one's before any). */
TS_API double ts_model_learning_rate(const ts_model *m);
/* The base rate the schedule scales (the optimizer's lr at first): set
 * between runs, the next optimizer step follows the schedule from it.
 * A checkpoint records it; resuming needs the same. */
TS_API ts_status ts_model_set_base_lr(ts_model *m, double lr);
TS_API double ts_model_base_lr(const ts_model *m);
/* Runs so far, and optimizer steps so far. */
TS_API int64_t ts_model_runs(const ts_model *m);
TS_API int64_t ts_model_steps(const ts_model *m);
/* The model's precision (ts_options_set_precision, TS_USE_BF16): TS_F32,
 * TS_BF16 or TS_F16. */
TS_API ts_dtype ts_model_precision(const ts_model *m);
/* Dynamic loss scaling (ts_options_set_loss_scaling): the scale the next
 * step's loss gradient starts at (1 when scaling is off) and the steps
 * skipped so far because a gradient overflowed. Either pointer may be NULL;
 * returns whether scaling is on. */
TS_API int ts_model_loss_scale(const ts_model *m, double *scale, int64_t *skipped_steps);
/* FLOPs of one micro-batch (forward + backward + update) for GFLOP/s. */
TS_API double ts_model_flops_per_microbatch(const ts_model *m);

/* ------------------------------------------------------------- summaries */

/* One fused pass over a tensor (docs/observation.md#summaries). Moments, min and max cover
 * the finite values only; the counts say what else was there. */
typedef struct ts_stats {
    int64_t count;    /* all elements */
    int64_t zeros, nans, pos_infs, neg_infs;
    double mean, std; /* population std, accumulated in double */
    double min, max;
    double l2;        /* sqrt of the sum of squares of finite values */
} ts_stats;

/* Log2-magnitude histogram: bin i holds finite non-zero values whose float
 * exponent field is i (|x| in [2^(i-127), 2^(i-126)); bin 0 = subnormals);
 * exact zeros are counted apart. */
#define TS_LOG2_BINS 256
/* TensorBoard's default buckets: right edges +-1e-12 * 1.1^k up to 1e20,
 * plus 0 and +-DBL_MAX, sorted ascending (see ts_tb_bucket_limits). */
#define TS_TB_BINS 1551

/* Fractions of the values that would underflow (become 0 or subnormal) or
 * overflow (become Inf, or exceed the max finite value for e4m3) when cast. */
typedef struct ts_range {
    double fp16_underflow, fp16_overflow;
    double bf16_underflow, bf16_overflow;
    double e4m3_underflow, e4m3_overflow;
    double e5m2_underflow, e5m2_overflow;
} ts_range;

typedef struct ts_summary {
    int what;            /* TS_WATCH_* computed */
    ts_stats stats;
    int64_t log2_zeros;
    int64_t log2_counts[TS_LOG2_BINS];
    int64_t tb_counts[TS_TB_BINS];
    ts_range range;
    /* A 16-bit tensor (a cast's output or gradient, ts_tensor_precision):
     * `stored` is its dtype, and the fractions of its values that the
     * rounding onto it made 0 from non-zero, and +-Inf from finite,
     * measured when it was made (the predictions are `range`'s). TS_F32
     * and 0 for other tensors. */
    ts_dtype stored;
    double stored_underflow, stored_overflow;
} ts_summary;

/* Computes what `what` asks for over x[0..n) in one pass per part. */
TS_API ts_status ts_summarize_f32(const float *x, int64_t n, int what, ts_summary *out);
/* into += from: the summary of both sets of values, as one pass over all of
 * them would give (to rounding), e.g. records summarised one by one as they
 * come. Both computed the same `what`; a zeroed `into` (what 0) takes `from`. */
TS_API ts_status ts_summary_merge(ts_summary *into, const ts_summary *from);
/* The TS_TB_BINS right edges of TensorBoard's default buckets. */
TS_API const double *ts_tb_bucket_limits(void);
/* `fc1.weight f32[320,784] n=250880 x∈[-0.0357, 0.0357] μ=1.2e-05 σ=0.0206`
 * plus ` NaN!`, ` +Inf!`, ` -Inf!`, ` all zeros` flags. */
TS_API const char *ts_summary_line(const char *name, const ts_array *shape, const ts_stats *s,
                                   char *buf, size_t n);
/* The stats table header and one row (`Index Name Mean Std Minimum Maximum
 * NaNs infs`), as in Graphcore's outfeed example. */
TS_API const char *ts_stats_table_header(char *buf, size_t n);
TS_API const char *ts_stats_table_row(int index, const char *name, const ts_stats *s, char *buf,
                                      size_t n);

/* A watch result of the last run (pattern-selected tensors, see
 * ts_options_watch). Valid until the next run. */
typedef struct ts_watch_result {
    const char *name;   /* tensor name */
    int64_t run, step;  /* run index and optimizer step it was taken at */
    const ts_summary *summary;
    int replica;        /* with replicas: the replica, or -1 for the row
                           reduced over all of them; -1 without replicas */
    /* The reduced row (with replicas): the replica whose values hold the
     * min and the one whose values hold the max (the lowest such replica
     * on a tie; -1 when no replica has a finite value), and the first
     * replica whose values hold a NaN or an Inf (-1: none). The row's
     * counts of NaN and Inf are the sums over the replicas. -1 on every
     * other row. */
    int min_replica, max_replica, nonfinite_replica;
} ts_watch_result;
/* Where the reduced row's extremes came from, for a table or a log line:
 * "[replica 2] min -3.1  [replica 1] max 1e+12  [replica 1] NaN/Inf" (only
 * the parts that apply); "" for rows that are not reduced over replicas.
 * Returns buf. */
TS_API const char *ts_watch_result_replicas(const ts_watch_result *w, char *buf, size_t n);
TS_API ts_status ts_model_watch_results(const ts_model *m, const ts_watch_result **out, size_t *n);
/* After compile: TS_OK when every watch (ts_options_watch) matches at
 * least one tensor of the model, else TS_ERR_NOT_FOUND naming the first
 * that matches none and the closest names (a watch that matches nothing
 * is accepted by compile and summarises nothing: usually a typo). */
TS_API ts_status ts_model_check_watches(const ts_model *m);

/* ---------------------------------------------------------------- plots */

/* The tutorial's gradient histogram: 50 bins over log2|g| of every value of
 * the arrays, zeros placed at min - 2, title "Gradient Histogram", y label
 * "Frequency". PNG via cairo. */
TS_API ts_status ts_plot_gradient_histogram(const char *png_path, const ts_array *arrays, int n);
/* The same, with the zeros bar labelled "zeros: N", the count of values and
 * of NaN/+Inf/-Inf (not plotted) in a corner, and `caption` (which tensors,
 * which step; NULL for none) under it. */
TS_API ts_status ts_plot_gradient_histogram_captioned(const char *png_path, const ts_array *arrays, int n,
                                                      const char *caption);
/* Line plot of up to 8 named series sharing an x axis (loss and accuracy
 * curves). PNG (or SVG when the path ends in .svg). */
typedef struct ts_series {
    const char *label;
    const double *x, *y;
    int64_t n;
} ts_series;
TS_API ts_status ts_plot_lines(const char *path, const char *title, const char *x_label,
                               const ts_series *series, int n_series);
/* Up to 4 panels stacked over one x axis, each with its own y axis and
 * label (loss above, accuracy below). Series of up to 50 points get a dot
 * on every point. */
typedef struct ts_plot_panel {
    const char *y_label;
    const ts_series *series;
    int n_series;
} ts_plot_panel;
TS_API ts_status ts_plot_panels(const char *path, const char *title, const char *x_label,
                                const ts_plot_panel *panels, int n_panels);

/* Attention probabilities of one sample, [heads, T, T] (rows: queries,
 * columns: keys), one panel per head (4 a row), viridis over [0, max], a
 * colour bar; exact zeros (masked positions) stay white, so a causal mask
 * shows as an empty upper triangle. With `labels` (T characters) and
 * T <= 64 the axes are labelled with them. PNG via cairo. */
TS_API ts_status ts_plot_attention(const char *png_path, const char *title, const float *probs,
                                   int heads, int T, const char *labels);
/* The same picture as PNG bytes in memory (for ts_tb_image); free *png with
 * ts_buffer_free. */
TS_API ts_status ts_plot_attention_png(unsigned char **png, size_t *n, int *width, int *height,
                                       const char *title, const float *probs, int heads, int T,
                                       const char *labels);
TS_API void ts_buffer_free(void *p);
/* A grid of image tiles with one shared colour scale and a colour bar.
 * [T,H,W]: T tiles laid out near-square, labelled by index (the channels of
 * one sample's feature maps); [R,C,H,W]: R rows of C tiles labelled "r,c"
 * (conv filters: output by input channel). Values of both signs use a
 * blue-white-red scale symmetric about 0, others viridis from min to max;
 * NaN/Inf pixels are magenta. PNG (or SVG when the path ends in .svg). */
TS_API ts_status ts_plot_tiles(const char *path, const char *title, const ts_array *a);
/* The same picture as PNG bytes in memory (for ts_tb_image), *width x
 * *height pixels; free *png with ts_buffer_free. */
TS_API ts_status ts_plot_tiles_png(unsigned char **png, size_t *n, int *width, int *height, const char *title,
                                   const ts_array *a);

/* `tensorscope compare`'s picture: each tensor's max relative error (log
 * scale, in the given order) against its tolerance, green when it passed
 * (pass[i], or max_rel <= tol when pass is NULL), red when not, the first
 * failure (index, or -1) marked. */
TS_API ts_status ts_plot_errors(const char *path, const char *const *names, const double *max_rel, const double *tol,
                                const int *pass, int n, int first_failure);
/* `compare --rank`'s picture: each tensor's relative error (log scale, in
 * the given order) against the jump threshold before it (factor x the
 * median before it, at least min_error: ts_compare_first_jump), red where
 * above, the first jump (index, or -1) marked and named. */
TS_API ts_status ts_plot_precision(const char *path, const char *const *names, const double *rel_error,
                                   const double *threshold, int n, int jump);

/* ------------------------------------------------------------------ .npy */

/* Writes an array as a .npy file (format 1.0, little-endian, C order).
 * Written to a temporary name and renamed: never half-written. */
TS_API ts_status ts_npy_save(const char *path, const ts_array *a);
/* Reads a .npy file; data is allocated with the library's allocator and
 * released with ts_npy_free. Corrupt or truncated files are TS_ERR_FORMAT. */
TS_API ts_status ts_npy_load(const char *path, ts_array *out);
TS_API ts_status ts_npy_parse(const void *bytes, size_t n, ts_array *out); /* same, from memory */
TS_API void ts_npy_free(ts_array *a);

/* ------------------------------------------------------------------ .npz */

/* NumPy's .npz archives (numpy.savez / savez_compressed): named arrays.
 * Loading reads only the archive's directory (member names and sizes; the
 * file stays open until ts_npz_free); a member (stored, deflated, bzip2 ...)
 * is inflated when its array is first asked for, to exactly the size its
 * .npy header declares, which must match the size the archive states. The
 * bytes inflated from one archive are capped by TS_LIMIT_ARCHIVE_BYTES. One
 * archive is read by one thread at a time. A regular file only: a FIFO or
 * device is refused at once. */
typedef struct ts_npz ts_npz;
TS_API ts_status ts_npz_load(const char *path, ts_npz **out);
TS_API void ts_npz_free(ts_npz *z);
TS_API size_t ts_npz_count(const ts_npz *z);
/* Member i's name without ".npy", and its array (valid until ts_npz_free).
 * The array is NULL when i is out of range, or when the member cannot be
 * read (corrupt, or over TS_LIMIT_ARCHIVE_BYTES): then ts_last_error says
 * why, and ts_npz_get returns the status. */
TS_API const char *ts_npz_name(const ts_npz *z, size_t i);
TS_API const ts_array *ts_npz_array(const ts_npz *z, size_t i);
/* The array named `name`, or NULL (no such member, or it cannot be read:
 * as ts_npz_array). */
TS_API const ts_array *ts_npz_find(const ts_npz *z, const char *name);
/* 1 if the archive has a member `name`, else 0; inflates nothing. */
TS_API int ts_npz_has(const ts_npz *z, const char *name);
/* The array named `name` into *out, inflated now if it was not yet:
 * TS_ERR_NOT_FOUND when there is no such member; TS_ERR_FORMAT for a
 * corrupt member or one that would pass TS_LIMIT_ARCHIVE_BYTES, TS_ERR_IO,
 * TS_ERR_OUT_OF_MEMORY, each with ts_last_error naming the member and the
 * file. A member that failed fails the same way when asked again. */
TS_API ts_status ts_npz_get(const ts_npz *z, const char *name, const ts_array **out);
/* Writes n named arrays as an .npz (members stored uncompressed), under a
 * temporary name then renamed: never half-written. */
TS_API ts_status ts_npz_save(const char *path, const char *const *names, const ts_array *arrays, size_t n);

/* --------------------------------------------------------------- outfeed */

typedef enum ts_outfeed_mode { TS_OUTFEED_ALL = 0, TS_OUTFEED_LAST } ts_outfeed_mode;
typedef struct ts_outfeed ts_outfeed;
typedef struct ts_outfeed_config {
    const char *name;
    ts_outfeed_mode mode;       /* ALL: every enqueue; LAST: only the latest per key (and replica, stage) */
    int depth;                  /* records held before the producer waits (>= 1) */
    const char *const *filters; /* NULL = all keys; n_filters = 0 with non-NULL = none */
    int n_filters;              /* each a pattern as in ts_name_matches */
    int drop_when_full;         /* 0 (default): block the producer; 1: drop and count */
} ts_outfeed_config;
typedef struct ts_outfeed_record {
    int64_t run, sample; /* run index and sample (micro-batch or step) in the run */
    const char *key;
    ts_array array;      /* valid until the next dequeue from this queue */
    int replica;         /* the replica (MPI rank) that produced it; 0 outside a job */
    int stage;           /* the pipeline stage (MPI rank) that produced it; 0 without a pipeline */
} ts_outfeed_record;
typedef void (*ts_outfeed_sink)(void *user, const ts_outfeed_record *rec);

TS_API ts_status ts_outfeed_new(ts_outfeed **out, const ts_outfeed_config *c);
/* Stops a sink thread (after draining) and frees. */
TS_API void ts_outfeed_free(ts_outfeed *q);
TS_API const char *ts_outfeed_name(const ts_outfeed *q);
/* Whether `key` passes the queue's filters. */
TS_API int ts_outfeed_accepts(const ts_outfeed *q, const char *key);
/* Waits up to timeout_ms (-1 = forever) for a record. TS_ERR_NOT_FOUND when
 * none came; the record's data stays valid until the next dequeue. In an
 * MPI job (replicas or pipeline stages) every rank's queue gets that rank's
 * records, and rank 0's also gets every other rank's after each run, after
 * its own and by rank, tagged with their replica and stage. */
TS_API ts_status ts_outfeed_dequeue(ts_outfeed *q, ts_outfeed_record *rec, int timeout_ms);
/* Runs `fn` on a consumer thread for every record, in order. */
TS_API ts_status ts_outfeed_set_sink(ts_outfeed *q, ts_outfeed_sink fn, void *user);
/* With a sink: waits until every record enqueued so far has been handed to
 * it and its call returned (e.g. before reading what the sink gathered
 * between runs). TS_ERR_STATE without a sink (dequeue drains it). */
TS_API ts_status ts_outfeed_flush(ts_outfeed *q);
/* Records enqueued, dequeued and dropped so far, and nanoseconds producers waited. */
typedef struct ts_outfeed_counts {
    int64_t enqueued, dequeued, dropped, wait_ns;
} ts_outfeed_counts;
TS_API ts_outfeed_counts ts_outfeed_get_counts(const ts_outfeed *q);
/* Graph side: stream `t` (per micro-batch) into q under `key`. */
TS_API ts_status ts_outfeed_add(ts_graph *g, ts_outfeed *q, const char *key, ts_tensor *t);
/* Optimizer side: stream every parameter gradient `<param>_grad`, either per
 * micro-batch before accumulation (pre_accumulated = 1) or once per update. */
TS_API ts_status ts_options_outfeed_gradients(ts_options *o, ts_outfeed *q, int pre_accumulated);

/* ----------------------------------------------------------- TensorBoard */

typedef struct ts_tb_writer ts_tb_writer;
/* Creates logdir if needed and opens `events.out.tfevents.<secs>.<host>`,
 * whose first record is `brain.Event:2`. */
TS_API ts_status ts_tb_open(ts_tb_writer **out, const char *logdir);
TS_API ts_status ts_tb_scalar(ts_tb_writer *w, const char *tag, int64_t step, double value);
/* A histogram from a summary computed with TS_WATCH_HISTOGRAM|TS_WATCH_STATS
 * (TensorBoard's default buckets; the real min, max, sum, sum of squares). */
TS_API ts_status ts_tb_histogram(ts_tb_writer *w, const char *tag, int64_t step,
                                 const ts_summary *s);
TS_API ts_status ts_tb_text(ts_tb_writer *w, const char *tag, int64_t step, const char *text);
/* The run's hyperparameters for TensorBoard's HParams dashboard (its
 * session start): each a number, or a string when `text` is not NULL. The
 * dashboard shows them beside the run's last scalar values. */
typedef struct ts_tb_hparam {
    const char *name;
    const char *text;
    double number;
} ts_tb_hparam;
TS_API ts_status ts_tb_hparams(ts_tb_writer *w, const ts_tb_hparam *hp, int n);
/* The session's end for the HParams dashboard: success or failure. */
TS_API ts_status ts_tb_hparams_end(ts_tb_writer *w, int success);
/* An image (PNG bytes, e.g. from ts_plot_attention_png or
 * ts_plot_tiles_png) for the images dashboard. */
TS_API ts_status ts_tb_image(ts_tb_writer *w, const char *tag, int64_t step, const void *png, size_t n,
                             int width, int height);
/* A layout for TensorBoard's Custom Scalars dashboard: each chart draws
 * every scalar tag one of its regular expressions matches as one line;
 * charts with the same category go together, categories in the order they
 * first appear (the other dashboards sort groups by name). Write it once
 * per run: the dashboard reads one layout per run and merges the runs'. */
typedef struct ts_tb_chart {
    const char *category;
    const char *title;
    const char *const *tags; /* regular expressions over scalar tags */
    int n_tags;
} ts_tb_chart;
TS_API ts_status ts_tb_layout(ts_tb_writer *w, const ts_tb_chart *charts, int n);
TS_API ts_status ts_tb_flush(ts_tb_writer *w);
/* Flushes, closes and frees (NULL is fine). */
TS_API ts_status ts_tb_close(ts_tb_writer *w);
TS_API const char *ts_tb_path(const ts_tb_writer *w);

/* --------------------------------------------------------- diagnostics */

/* Metrics registry (PyTorch/XLA style). Timing metrics keep total samples,
 * an accumulator and a ring of recent samples; counters are integers. */
TS_API void ts_metric_record(const char *name, double value_ns); /* a timing sample */
TS_API void ts_metric_record_value(const char *name, double value); /* e.g. bytes */
TS_API void ts_counter_add(const char *name, int64_t delta);
TS_API int64_t ts_counter_get(const char *name);
TS_API void ts_metrics_reset(void);
/* The report: `Metric:` blocks then `Counter:` blocks, each sorted by name,
 * zero counters skipped. Free with ts_string_free. */
TS_API char *ts_metrics_report(void);
/* 369401746001 ns -> "06m09s401ms746.001us" (every unit floored). */
TS_API const char *ts_format_duration_ns(double ns, char *buf, size_t n);
TS_API void ts_string_free(char *s);

typedef struct ts_memory_usage {
    int64_t rss, pss, uss; /* bytes, from /proc/self/smaps_rollup (or status) */
} ts_memory_usage;
TS_API ts_status ts_memory_get(ts_memory_usage *out);
/* The same summed over this process and every descendant (children of
 * any of its threads, their children, ...): the child of a debug run, the
 * workers a data loader forks. *processes (may be NULL): how many were
 * counted. Under mpirun the ranks are siblings, not children: each rank
 * counts itself and its own descendants. */
TS_API ts_status ts_memory_get_tree(ts_memory_usage *out, int *processes);

/* The memory watcher: a background thread that samples ts_memory_get_tree
 * every period_ms (>= 1; 0 takes 100) and keeps the peak of each of RSS,
 * PSS and USS with the time of the RSS peak. Each sample goes into the
 * metrics (MemoryRssBytes, MemoryPssBytes, MemoryUssBytes, whose report
 * blocks add `Peak: <bytes> at <time since the start>`), to a trace
 * being recorded (ts_options_set_trace) as the counter track
 * `memory RSS (MiB)`, and to the callback if one is set; stopping logs the peak at TS_LOG_INFO. One
 * watcher per process: starting it again while it runs changes its period
 * (the peaks are kept). Stop returns at once, not after a period. */
typedef struct ts_memwatch_stats {
    ts_memory_usage latest, peak; /* peak: each field's maximum */
    double latest_s, peak_rss_s;  /* seconds after the start: the latest sample, the RSS peak */
    int64_t samples;              /* taken since the start */
    int processes;                /* counted in the latest sample */
    int period_ms;
    int running;                  /* 1 while the thread samples, 0 after ts_memwatch_stop */
} ts_memwatch_stats;
TS_API ts_status ts_memwatch_start(int period_ms);
TS_API void ts_memwatch_stop(void);
/* What the watcher has seen (also after stop, until the next start);
 * TS_ERR_STATE when it never ran. */
TS_API ts_status ts_memwatch_latest(ts_memwatch_stats *out);
/* Called on the watcher's thread after each sample (e.g. to draw a
 * counter track); it must not call ts_memwatch_* and should return
 * quickly. NULL removes it. */
typedef void (*ts_memwatch_fn)(void *user, const ts_memwatch_stats *sample);
TS_API void ts_memwatch_set_callback(ts_memwatch_fn fn, void *user);
/* Each process of the watcher's latest sample (this one first, then its
 * descendants breadth first; at most TS_MEMWATCH_PROCESSES): pid, command
 * (/proc/PID/comm) and RSS, PSS, USS in bytes (PSS and USS those of the
 * last smaps_rollup walk, -1 before one). Up to cap into out, *n how many;
 * TS_ERR_STATE when the watcher never ran. The log's peak line lists them
 * as they were at the RSS peak, the trace has a counter track per process
 * (`memory RSS (MiB) pid N (command)`), the CLI's TensorBoard
 * memory/process/<pid>_<command>/{rss,pss,uss} in MiB. */
#define TS_MEMWATCH_PROCESSES 32
typedef struct ts_process_memory {
    int pid;
    char command[32];
    ts_memory_usage usage;
} ts_process_memory;
TS_API ts_status ts_memwatch_processes(ts_process_memory *out, int cap, int *n);

/* Installs handlers for SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT that
 * print a native backtrace and the op being executed to stderr, then
 * re-raise; and SIGUSR1, which prints every thread's stack and returns. */
TS_API ts_status ts_crash_handler_install(void);
/* Every thread's native stack of another running tensorscope process (one
 * that installed the crash handler: the CLI's train and eval do), as its
 * SIGUSR1 dump, collected without its terminal: the target writes it into
 * a file this process made (/tmp/tensorscope-stacks.<pid>.<this pid>, mode
 * 0600, removed after), and this call waits for its end, at most
 * timeout_s. *out: the text, ending "tensorscope: end of stacks" (free
 * with ts_string_free). Errors: no such process (TS_ERR_NOT_FOUND), not a
 * tensorscope process (TS_ERR_INVALID_ARGUMENT), another user's, no crash
 * handler, no answer in time (TS_ERR_STATE), each said. */
TS_API ts_status ts_process_stacks(int pid, double timeout_s, char **out);

/* Graph dumps: every node with its name, op, shape, dtype and flags
 * (parameter, gradient, anchored, printed, watched). Pass the model (may be
 * NULL) for compiled shapes, gradients and observation flags. `flags` ORs:
 *   TS_DUMP_LOCATIONS  the source file:line where each node was built (also
 *                      with TS_IR_DEBUG=1);
 *   TS_DUMP_BACKWARD   then what a compiled training model runs after the
 *                      forward pass: one op per backward kernel, in the
 *                      order they run, reading the gradient of its op's
 *                      output and the forward tensors the kernel keeps and
 *                      adding into the gradients of its inputs,
 *       %Gradient___fc3/MatMul:0, %Gradient___fc3.bias += AddBackward(%Gradient___fc3/Add:0) : f32[64,10], f32[10]
 *                      then each parameter's optimizer step (Accum___ from
 *                      Gradient___, then SGD, Adam or AdamW writing
 *                      UpdatedVar___ and its state, Accl___ ...; the names
 *                      of docs/architecture.md#tensor-names). In DOT: two
 *                      clusters, with edges from the forward tensors read.
 *                      Without a model compiled for training: NULL and
 *                      TS_ERR_INVALID_ARGUMENT's message.
 * TS_SAVE_GRAPH_FILE + TS_SAVE_GRAPH_FMT (text|dot) append one at every
 * compile, headed by the compile's number, the kind of model (training or
 * inference) and its input shapes; TS_SAVE_GRAPH_BACKWARD=1 adds the
 * backward pass to training models' dumps (`tensorscope debug-run` sets it).
 * Free with ts_string_free. */
typedef enum ts_dump_format { TS_DUMP_TEXT = 0, TS_DUMP_DOT } ts_dump_format;
enum { TS_DUMP_LOCATIONS = 1, TS_DUMP_BACKWARD = 2 };
TS_API char *ts_graph_dump(const ts_graph *g, const ts_model *m, ts_dump_format fmt, int flags);

/* The compiled graph as an ONNX file (docs/onnx.md#the-graph-as-an-onnx-file),
 * written atomically, that Netron shows and onnx.checker accepts: the
 * forward ops as standard ONNX ops (opset 17) under the model's own tensor
 * names; for a training model then the backward pass (each gradient
 * Gradient___<name>, written as standard ops where its op has a standard
 * form, else as a node `<Op>Backward` of the domain `ai.tensorscope`) and
 * the optimizer step (Accum___, then an `ai.tensorscope` SGD, Adam or AdamW
 * node with its settings as attributes, writing UpdatedVar___ and the
 * state's next values `<state>/next`). Parameters, buffers, constants and
 * optimizer state are initializers with their current values; the inputs
 * are graph inputs at their compiled shapes and dtypes; the outputs are the
 * loss (an inference model's outputs), the updated parameters and state.
 * An inference model's file has only standard ops (onnxruntime runs it)
 * unless an op has none (listed in docs/onnx.md). Compiles the model if it
 * is not; TS_ERR_UNSUPPORTED in a build without protobuf-c. */
TS_API ts_status ts_model_save_graph(ts_model *m, const char *path);

/* Bytes held by a compiled model, by lifetime class, and the process's.
 * On a GPU also its memory: what tensorscope holds there now (every model
 * of the process, with cuBLAS's workspace) and at most since it started,
 * and what the GPU has free of its total; all four 0 on the CPU
 * ("cpu-staged": its own allocations, and the host's free and total). */
typedef struct ts_model_memory {
    int64_t parameters, gradients, optimizer_state, activations, anchors;
    int64_t activations_without_reuse; /* what the memory plan saved against */
    ts_memory_usage process;
    int64_t device_in_use, device_peak, device_free, device_total;
} ts_model_memory;
TS_API ts_status ts_model_memory_get(const ts_model *m, ts_model_memory *out);
/* One line: "memory: params 1.09MB grads ... rss 52.1MB pss ... uss ..." */
TS_API const char *ts_model_memory_line(const ts_model *m, char *buf, size_t n);

/* The memory plan as a liveness report (`tensorscope memory`,
 * docs/observation.md#where-memory-goes): every buffer a compiled model
 * holds, by class, with the points of the step it is live over. Points:
 * the forward's ops 0..L-1 in execution order, a training model's backward
 * L..2L-1 (the forward's ops in reverse) and its update 2L; *n_points is
 * their count. Activations and activation gradients live over what compile
 * planned (one arena, reused between buffers whose lives do not overlap);
 * parameters, parameter gradients, optimizer state and kernel workspace
 * over the whole step. Fills up to `cap` buffers of `out` (may be NULL
 * with cap 0) and sets *n to how many there are. */
typedef enum {
    TS_MEM_ACTIVATIONS, TS_MEM_GRADIENTS, TS_MEM_OPTIMIZER, TS_MEM_PARAMETERS, TS_MEM_WORKSPACE, TS_MEM_CLASSES
} ts_memory_class;
typedef struct ts_memory_buffer {
    const ts_tensor *tensor; /* whose value (or gradient, or optimizer state) it holds; NULL: kernel workspace */
    int mclass;              /* ts_memory_class */
    int gradient;            /* holds the tensor's gradient (Gradient___NAME) */
    int64_t start, end;      /* live over points start..end (inclusive) */
    int64_t bytes;           /* as allocated (64-byte aligned) */
} ts_memory_buffer;
TS_API ts_status ts_model_memory_plan(const ts_model *m, ts_memory_buffer *out, size_t cap, size_t *n, int64_t *n_points);
/* The op a point runs (its forward op for a backward point, *backward set
 * to 1; NULL at the update, with *backward 2); NULL and an error when the
 * point is out of range. */
TS_API const ts_tensor *ts_model_memory_point(const ts_model *m, int64_t point, int *backward);

/* A heat map (`tensorscope train --plot-stability`): values is
 * [n_rows][n_cols] (rows: layers top to bottom, columns: steps[0..n_cols)
 * left to right), coloured on viridis over the finite values' range, on a
 * log10 scale when `log_scale` and every finite value is > 0; a colour bar
 * states the scale and its unit; NaN/Inf cells are magenta. PNG, or SVG
 * for a .svg path. */
TS_API ts_status ts_plot_heatmap(const char *path, const char *title, const char *const *row_names, int n_rows,
                                 const int64_t *steps, int n_cols, const double *values, int log_scale);

/* A stacked area per class over the points of a step (`tensorscope memory
 * --plot-memory`): bytes is [n_classes][n_points], the first class at the
 * bottom; a dashed line before point backward_at (-1: none), the peak point
 * marked (-1: none). PNG, or SVG for a .svg path. */
TS_API ts_status ts_plot_memory(const char *path, const char *title, const double *bytes, const char *const *class_names, int n_classes,
                                int n_points, int backward_at, int peak);

/* Model lint: warnings found at compile about mistakes that give bad
 * scores without an error (softmax over the batch dimension, NLL loss on
 * values that are not log-probabilities, a parameter with no path to the
 * loss, a print op whose result is unused, ...). Each is also logged at
 * TS_LOG_WARN. Valid until the next compile or free. */
TS_API ts_status ts_model_lint(const ts_model *m, const char *const **warnings, size_t *n);

/* Element-wise comparison of `a` with a reference `ref` (any dtypes, the
 * same shape): an element matches when |a - r| <= atol + rtol * |r|
 * (torch.isclose's rule), or when both are NaN, or both the same infinity. */
typedef struct ts_compare_result {
    int64_t count, mismatches;
    double max_abs;          /* largest |a - r| over pairs of finite values */
    int64_t max_abs_index;   /* its flat index, -1 when there is none */
    double max_rel;          /* largest |a - r| / |r| (inf where r = 0 and a != 0) */
    double min_atol;         /* smallest atol that passes at this rtol (inf when a NaN or Inf differs) */
    ts_stats a, ref;         /* both sides' summaries */
    int pass;                /* no mismatch */
    double rel_error;        /* ||a - r|| / ||r|| (L2 over all elements): 0 when both are 0, inf when
                                ||r|| = 0 and a is not, or a NaN or Inf differs */
} ts_compare_result;
TS_API ts_status ts_compare_arrays(const ts_array *a, const ts_array *ref, double atol, double rtol,
                                   ts_compare_result *out);

/* A diff of two runs, tensor by tensor (`tensorscope diff`): bit equality
 * first, then closeness. ts_array_hash: a 64-bit FNV-1a hash of the dtype,
 * the shape and the bytes, the same on every build and machine. */
TS_API ts_status ts_array_hash(const ts_array *a, uint64_t *out);
typedef enum { TS_DIFF_BIT_EQUAL = 0, TS_DIFF_CLOSE = 1, TS_DIFF_DIFFERS = 2 } ts_diff_kind;
typedef struct ts_diff_result {
    uint64_t hash_a, hash_b;
    int kind;              /* ts_diff_kind: bit-equal (same dtype, shape and bytes), close (every element
                              passes ts_compare_arrays' rule), or differs */
    ts_compare_result cmp; /* a against b as the reference */
} ts_diff_result;
/* a and b: the same shape (else TS_ERR_SHAPE), any dtypes (bit-equal needs the same). */
TS_API ts_status ts_diff_arrays(const ts_array *a, const ts_array *b, double atol, double rtol, ts_diff_result *out);

/* Where precision is first lost along a list of tensors (graph order) with
 * their relative errors (ts_compare_result.rel_error, a low-precision run
 * against its f32 twin): the first tensor whose error exceeds `min_error` and
 * `factor` times the median error of the tensors before it (the median of
 * none is 0, a NaN error counts as infinite). *index is -1 when no tensor
 * jumps; *median_before (may be NULL) is the median before *index;
 * threshold (n entries, may be NULL) gets each tensor's bar, the larger of
 * min_error and factor x the median before it. The
 * CLI's defaults (`compare --rank`): factor TS_JUMP_FACTOR, min_error
 * TS_JUMP_FLOOR (above f32 rounding noise, below bf16's and f16's). */
#define TS_JUMP_FACTOR 10.0
#define TS_JUMP_FLOOR 1e-5
TS_API ts_status ts_compare_first_jump(const double *rel_error, int n, double factor, double min_error, int *index,
                                       double *median_before, double *threshold);

/* After a run that failed with TS_ERR_NUMERICS: the name of the first
 * non-finite tensor, or NULL. */
TS_API const char *ts_model_failed_tensor(const ts_model *m);

/* ---- holding a run's tensors (the inspector, docs/inspector.md)
 * Activations share memory, so after a run most of them are gone. With a
 * hold armed, each run keeps a copy of every tensor it makes (inputs,
 * activations, gradients, Accum___), taken on the model's device the moment
 * the tensor is final: the copies are allocated before the run, none in the
 * step loop, and a held run costs one device copy per tensor. A run that
 * fails (a numeric check) holds what it made up to the tensor it stopped
 * at, that one included. Parameters, buffers, UpdatedVar___ and optimizer
 * state are read where they live: their current values.
 * on 1: every following run is held (each replaces the last one's copies);
 * 0: no more runs are held, the last held run's copies stay readable. */
TS_API ts_status ts_model_hold(ts_model *m, int on);
/* The held value of `name` (any name of ts_model_tensor_names): the last
 * held run's copy, or the current value of a parameter, buffer or optimizer
 * state. Host memory, valid until the next run, hold or free. An unknown name
 * is TS_ERR_NOT_FOUND with the closest names; a tensor the held run did not
 * reach (it stopped before) TS_ERR_NOT_FOUND saying so; nothing held yet
 * TS_ERR_STATE saying to arm a hold. */
TS_API ts_status ts_model_held(ts_model *m, const char *name, ts_array *out);
/* 1 when ts_model_held would return a value for `name`. */
TS_API int ts_model_is_held(const ts_model *m, const char *name);
/* The names ts_model_held returns values for, sorted. Valid until the next
 * call, run or free. */
TS_API ts_status ts_model_held_names(ts_model *m, const char *const **names, size_t *n);
/* The inspector's `eval` (docs/inspector.md#eval): a numpy-style expression
 * over tensors by name, computed in f32: + - * / ** and unary minus, the
 * comparisons < <= > >= == != (1 or 0), @ of 1-D and 2-D operands, numpy's
 * basic indexing with integers (x[0, 2:5, ::-1, ...]), .T, sum mean max min
 * norm (each with an optional axis: sum(x, 0), sum(x, axis=-1)), abs sqrt
 * exp log, where(pred, a, b) and where(pred) (the indices of pred's non-zero
 * values as np.argwhere gives them: [count, ndim]). Elementwise operators
 * broadcast as numpy does. A name is the longest of `names` the text
 * starts with that no letter, digit or _ follows (fc1.weight.T is
 * fc1.weight transposed, fc1/MatMul:0 one name; where a value comes it may
 * begin with any character, /fc1/Gemm_output_0); a name that begins with
 * a digit or holds spaces goes in backticks (`a name`). lookup(ctx, name, &a) gives a
 * name's values (any dtype, valid until ts_eval returns). *out: a new f32
 * array, freed with ts_eval_free. A bad expression is
 * TS_ERR_INVALID_ARGUMENT (TS_ERR_SHAPE for shapes that do not fit,
 * TS_ERR_NOT_FOUND for an unknown name, with the closest) whose message
 * names the column, with the expression and a caret under it; nothing is
 * changed. */
typedef ts_status (*ts_eval_lookup)(void *ctx, const char *name, ts_array *out);
TS_API ts_status ts_eval(const char *expr, const char *const *names, size_t n_names, ts_eval_lookup lookup, void *ctx, ts_array *out);
TS_API void ts_eval_free(ts_array *a);
/* ts_eval over the model's held tensors (ts_model_held_names). */
TS_API ts_status ts_model_held_eval(ts_model *m, const char *expr, ts_array *out);
/* The inspector's `rerun` (docs/inspector.md#rerun): the held run again
 * with one input or one parameter changed, on the side: its forward (and a
 * training model's backward) re-executed from the held inputs and the
 * parameters as the held run read them (copied by the hold before its
 * update), with `name` set to `value` (its shape; any numeric dtype). No
 * optimizer step, no running statistics updated, no observers, anchors or
 * outfeeds: the model's parameters, optimizer state and step count are as
 * before the call. out->loss: the training loss it computes and
 * out->held_loss the held run's (NaN for an inference model); out->diffs:
 * every held tensor whose values differ from the held run's, in the order the rerun made them final (the parameters first,
 * then the forward, then the gradients), with the largest absolute
 * difference (NaN where a NaN is on one side only) and how many values
 * changed; valid until the next rerun, run, hold or free. The held run must
 * be of one micro-batch (one step per run, no accumulation, one process),
 * held by this program (no recompilation since); else TS_ERR_STATE saying
 * so. Parameters kept in 16-bit cells are TS_ERR_UNSUPPORTED. */
typedef struct ts_rerun_diff {
    const char *name;
    double max_abs_diff;
    int64_t changed, numel;
} ts_rerun_diff;
typedef struct ts_rerun_result {
    double loss, held_loss;      /* the rerun's training loss and the held run's (NaN: an inference model) */
    const ts_rerun_diff *diffs;  /* the tensors that differ, in the order the rerun made them */
    size_t n_diffs;
} ts_rerun_result;
TS_API ts_status ts_model_rerun(ts_model *m, const char *name, const ts_array *value, ts_rerun_result *out);
/* What the held run read: a parameter's value before the run's update
 * (the hold copies it, for ts_model_rerun), any other tensor as
 * ts_model_held gives it. Valid until the next run, hold or free, or the
 * next ts_model_held or ts_model_held_before of the same name. */
TS_API ts_status ts_model_held_before(ts_model *m, const char *name, ts_array *out);
/* Where a tensor comes from, into buf: "tensor 'fc1/MatMul:0' (op MatMul),
 * built at tools/models.c:120 (scope fc1)", "the gradient of parameter
 * 'fc1.weight' (op Param), built at ...": the builder's source line (an
 * ONNX model's node name in parentheses). */
TS_API ts_status ts_model_tensor_origin(const ts_model *m, const char *name, char *buf, size_t n);

/* `tensorscope debug-run`: runs argv with the debug variables set and writes
 * a .tar.gz with its output, metrics, graph dumps, system information, the
 * exit code or signal and the redacted environment. While it runs, SIGINT,
 * SIGTERM and SIGHUP (those not ignored) are caught: the first is forwarded
 * to the command's process group, which is waited for, and the bundle is
 * written with what exists (a second one kills the command); the previous
 * handlers are back when it returns. */
typedef struct ts_debug_run_config {
    const char *outfile;    /* F.tar.gz */
    char *const *argv;      /* the command, NULL-terminated */
    int tidy;               /* remove the work directory afterwards */
    double timeout_s;       /* 0 = none; on expiry the child is killed */
    int *interrupted;       /* optional: gets the signal forwarded to the command (SIGINT...), 0 if none */
} ts_debug_run_config;
/* *child_status gets the child's exit code, or 128 + signal. */
TS_API ts_status ts_debug_run(const ts_debug_run_config *c, int *child_status);

/* ------------------------------------------------- MPI jobs (docs/design.md#replicas-and-pipeline-stages) */

/* Joins the MPI job this process was started in (`mpirun -np R prog`): call
 * once, from the main thread, before compiling models (argc/argv may be
 * NULL). Outside an MPI launcher it does nothing: a job of one rank.
 * TS_ERR_UNSUPPORTED when started by mpirun but built without MPI (install
 * libopenmpi-dev, e.g. scripts/install-deps.sh, and reconfigure). */
TS_API ts_status ts_dist_init(int *argc, char ***argv);
/* Leaves the job (MPI_Finalize). After a collective failed (TS_ERR_DIST) MPI
 * cannot be left cleanly: it then ends every rank of the job with exit code
 * 1 (MPI_Abort) and does not return. */
TS_API ts_status ts_dist_finalize(void);
TS_API int ts_dist_rank(void); /* 0 outside a job; only rank 0 writes TS_METRICS_FILE and TS_SAVE_GRAPH_FILE */
TS_API int ts_dist_size(void); /* 1 outside a job */
/* Whether this build has MPI. */
TS_API int ts_dist_available(void);
/* Seconds a rank waits for the others in one collective (all-reduce,
 * gather, checksum) before failing with TS_ERR_DIST: a rank that died or
 * hangs stops the others with a message, never a silent hang (default 60). */
TS_API ts_status ts_dist_set_timeout(double seconds);
/* The limit ts_dist_set_timeout set (60 by default). */
TS_API double ts_dist_timeout(void);
/* Rank 0's buf[0..bytes) into buf on every rank of the job: every rank
 * calls it at the same point, as any collective (rank 0's buf is left as
 * it was). Outside a job of more than one rank it does nothing.
 * TS_ERR_DIST when a rank did not take part within the timeout. */
TS_API ts_status ts_dist_broadcast(void *buf, size_t bytes);
/* A setting of the application that every rank must share (the planned
 * steps, a step limit), compared as models compare their options: every
 * rank calls it at the same point with the setting's description (`what`,
 * "the step limit (--max-steps)") and its own value as text. When any
 * rank's differs from rank 0's, every rank gets TS_ERR_DIST naming the
 * first such rank and both values ("rank 1 has the step limit
 * (--max-steps) 5, rank 0 has 3"); texts past 190 (what) and 318 (value)
 * characters are not compared. Outside a job of more than one rank it
 * does nothing. */
TS_API ts_status ts_dist_agree_on(const char *what, const char *value);

/* ----------------------------------------------------------------- data */

typedef struct ts_dataset ts_dataset;
/* Loads MNIST from `dir` (t10k- or train- gzip'd IDX files, either present).
 * Images are normalised as (x/255 - 0.5)/0.5 into f32 [N,1,28,28]; labels
 * are i32 [N]. Corrupt or truncated files are TS_ERR_FORMAT. */
TS_API ts_status ts_dataset_load_mnist(ts_dataset **out, const char *dir);
/* Loads one image IDX file and one label IDX file (gzip'd or plain). */
TS_API ts_status ts_dataset_load_idx(ts_dataset **out, const char *images_path,
                                     const char *labels_path);
/* Datasets from arrays (copied): x f32/f64/... [N,...], labels integer [N]
 * (i32, i64 or u8, each >= 0). x is stored as f32 [N,...], or, when it is
 * an i32 or i64 array (token ids), as i32 (a value beyond i32 is an error,
 * never wrapped); u8 x (images) is stored as f32. */
TS_API ts_status ts_dataset_from_arrays(ts_dataset **out, const ts_array *x,
                                        const ts_array *labels);
/* Loads arrays for ts_dataset_from_arrays from `path`: a directory holding
 * x.npy and labels.npy, or one .npz with `x` and `labels`. When the .npz also
 * holds `x_heldout` and `labels_heldout`, *heldout (if not NULL) gets them
 * as a second dataset; otherwise *heldout is NULL. */
TS_API ts_status ts_dataset_load_arrays(ts_dataset **out, ts_dataset **heldout, const char *path);
TS_API void ts_dataset_free(ts_dataset *d);
TS_API int64_t ts_dataset_size(const ts_dataset *d);
/* Views of all samples f32 [N,...] (MNIST: [N,1,28,28]) and labels i32 [N,...]
 * (MNIST: [N]). */
TS_API ts_status ts_dataset_arrays(const ts_dataset *d, ts_array *images, ts_array *labels);

typedef struct ts_loader ts_loader;
typedef struct ts_loader_config {
    int64_t batch_size;
    int64_t first, count; /* the slice of the dataset to iterate (count 0 = to the end) */
    int shuffle;          /* reshuffle each epoch with a seeded RNG */
    uint64_t seed;
    int drop_last;        /* drop a final partial batch */
} ts_loader_config;
TS_API ts_status ts_loader_new(ts_loader **out, const ts_dataset *d, ts_loader_config c);
TS_API void ts_loader_free(ts_loader *l);
/* Batches per epoch. */
TS_API int64_t ts_loader_batches(const ts_loader *l);
/* Fills the next `n` batches stacked on axis 0 into internal buffers and
 * returns views (valid until the next call). Returns TS_ERR_NOT_FOUND at the
 * end of an epoch (then the next call starts a new epoch). With drop_last
 * off (PyTorch's default) the samples left after the last whole group are
 * returned too, as n equal smaller batches: the last (n * (left / n))
 * samples, the left % n that do not split evenly dropped (with n = 1,
 * none). With drop_last on a short final group is dropped. */
TS_API ts_status ts_loader_next(ts_loader *l, int n, ts_array *images, ts_array *labels);

/* Epochs the loader has started (0 before the first batch). */
TS_API int64_t ts_loader_epoch(const ts_loader *l);

/* ----------------------------------------------------------- checkpoints */

/* A compiled training model's whole state -- parameters, optimizer state
 * (momentum, Adam moments and step counts), run and step counts -- and,
 * when `l` is not NULL, the data loader's position and shuffle RNG, in one
 * versioned file (docs/formats.md) written atomically: a crash never
 * leaves a half-written checkpoint. Loading it into the same model (same
 * graph, optimizer and options, freshly compiled) and loader (same data
 * and configuration) continues exactly where it was: the following runs
 * write the same weights, bit for bit, as a run never interrupted. A
 * checkpoint that does not fit is refused and changes nothing. */
TS_API ts_status ts_checkpoint_save(const char *path, const ts_model *m, const ts_loader *l);
TS_API ts_status ts_checkpoint_load(const char *path, ts_model *m, ts_loader *l);
/* ------------------------------------------------------- text corpora */

/* A text file (or DIR/input.txt) as a character corpus: the vocabulary is
 * its distinct bytes in byte order (id i is ts_corpus_vocab(c)[i]); the
 * last tenth is the held-out split. */
typedef struct ts_corpus ts_corpus;
TS_API ts_status ts_corpus_load(ts_corpus **out, const char *path);
TS_API void ts_corpus_free(ts_corpus *c);
TS_API int ts_corpus_vocab_size(const ts_corpus *c);
TS_API const char *ts_corpus_vocab(const ts_corpus *c);
/* Tokens in the training (held_out = 0) or held-out (1) split. */
TS_API int64_t ts_corpus_length(const ts_corpus *c, int held_out);
/* `batch` windows of T+1 tokens of a split at offsets drawn from the
 * splitmix64 generator *rng (offset = next % (length - T)): inputs x and
 * targets y (x shifted by one), both i32 [batch, T]. */
TS_API ts_status ts_corpus_sample(const ts_corpus *c, int held_out, int64_t batch, int64_t T, uint64_t *rng,
                                  int32_t *x, int32_t *y);
/* The window at `offset` of a split (for a pass over the held-out text). */
TS_API ts_status ts_corpus_window(const ts_corpus *c, int held_out, int64_t offset, int64_t T, int32_t *x,
                                  int32_t *y);
/* Token ids of `text` into ids (strlen(text) of them, *n set); a character
 * outside the vocabulary is an error naming it. */
TS_API ts_status ts_corpus_encode(const ts_corpus *c, const char *text, int32_t *ids, int64_t *n);

/* ------------------------------------------------------------------ GPT */

/* A character GPT (pre-norm blocks, causal self-attention, GELU MLPs, tied
 * input/output embeddings) built into g. Inputs `tokens` and `targets`,
 * i32 [batch, block_size]; the loss `loss` is the mean cross entropy.
 * Names: `wte.weight` (also the output projection: one parameter, one
 * gradient), `wpe.weight`, `blocks.<i>.ln1`, `blocks.<i>.attn.qkv`,
 * `blocks.<i>.attn.proj`, `blocks.<i>.ln2`, `blocks.<i>.mlp.fc`,
 * `blocks.<i>.mlp.proj`, `ln_f`; attention probabilities
 * `blocks.<i>.attn/Softmax:0` [batch, heads, T, T]; logits `logits`
 * [batch, T, vocab]. Weights N(0, 0.02) (projections into the residual
 * stream 0.02/sqrt(2 layers)), biases 0, layer norms 1 and 0, from the
 * graph's seed. */
typedef struct ts_gpt_config {
    int64_t vocab, block_size, layers, heads, embd, batch;
} ts_gpt_config;
typedef struct ts_gpt {
    ts_tensor *tokens, *targets, *logits, *loss;
} ts_gpt;
TS_API ts_status ts_gpt_build(ts_graph *g, const ts_gpt_config *c, ts_gpt *out);

#ifdef __cplusplus
}
#endif
#endif /* TENSORSCOPE_H */
