/* onnx_consts.h -- host constants of an ONNX import and the ops folded on
 * them (shape subgraphs: Shape -> Gather -> Concat -> Reshape, masks, ...).
 * Values are held as doubles whatever their ONNX type (int64 shapes and
 * indices are exact up to 2^53, an int64 constant of the file beyond that
 * also exactly in iv; float results are rounded to float32 like the
 * exporter's own constant folding). Internal: nothing here is API. */
#ifndef TS_ONNX_CONSTS_H
#define TS_ONNX_CONSTS_H

#include "graph/graph.h"
#include "graph/ops.h"

/* ONNX TensorProto.DataType values. */
enum {
    TS_ONNX_FLOAT = 1, TS_ONNX_UINT8 = 2, TS_ONNX_INT8 = 3, TS_ONNX_UINT16 = 4, TS_ONNX_INT16 = 5,
    TS_ONNX_INT32 = 6, TS_ONNX_INT64 = 7, TS_ONNX_STRING = 8, TS_ONNX_BOOL = 9, TS_ONNX_FLOAT16 = 10,
    TS_ONNX_DOUBLE = 11, TS_ONNX_UINT32 = 12, TS_ONNX_UINT64 = 13, TS_ONNX_BFLOAT16 = 16
};

typedef struct ts_const {
    int dtype;      /* ONNX data type */
    ts_shape shape;
    double *v;      /* numel values, owned */
    uint64_t bytes; /* what v holds against the import's budget (0: file data) */
    /* An int64 (or uint64, as its bits) constant with values beyond 2^53,
     * which v holds rounded: its exact values (owned), kept by reshapes,
     * the ops that move values (Concat, Expand, Gather, Slice, Transpose,
     * Where), made by the integer folds (computed exactly in int64: the
     * arithmetic, comparisons, Neg, Abs, Cast between integer types,
     * Range, ConstantOfShape), and read by the integer graph ops
     * (ts_onnx_i64_of); NULL otherwise. */
    int64_t *iv;
} ts_const;

/* The budget of an import's folded constants (TS_LIMIT_IMPORT_BYTES):
 * ts_const_budget starts one of `limit` bytes for this thread (UINT64_MAX:
 * none); every result of ts_const_fill and the kernels below is charged
 * to it until ts_const_free, and ts_const_charge adds what outlives them
 * (graph constants made from folded values). Past the limit they refuse
 * with ts_limit_exceeded. */
void ts_const_budget(uint64_t limit);
ts_status ts_const_charge(uint64_t bytes);
/* Gives back `bytes` charged for a temporary copy, once it is freed. */
void ts_const_release(uint64_t bytes);
/* Whether v is a number in [lo, hi] (NaN never is), truncated into *out:
 * every float-to-integer conversion of a constant goes through here. */
bool ts_onnx_int_value(double v, int64_t lo, int64_t hi, int64_t *out);

/* Bytes per element of a readable ONNX type, 0 for one we do not read
 * (ONNX's low-precision types, core/lowbits.h: 1, though int4, uint4 and
 * float4e2m1 pack two per byte, int2 and uint2 four: ts_onnx_data_bytes). */
size_t ts_onnx_dtype_size(int dt);
/* The bytes n elements of type dt take in a file (packed types rounded up). */
size_t ts_onnx_data_bytes(int dt, size_t n);
const char *ts_onnx_dtype_name(int dt);
bool ts_onnx_dtype_is_float(int dt); /* float32/64, float16, bfloat16 and the float8s and float4 */
/* ONNX Slice's clamping of one axis of `size`: start and element count for
 * starts/ends st/en (negative from the end, clamped) and a non-zero step;
 * an error for a NaN start or end. */
ts_status ts_const_slice_range(int64_t size, double st, double en, int64_t step, int64_t *start, int64_t *count);
/* n little-endian elements of type dt from b into out (packed types: the
 * first element in the lowest bits). */
void ts_onnx_decode_raw(int dt, const uint8_t *b, size_t n, double *out);

void ts_const_free(ts_const *c);
/* Sets c->iv from n exact int64 values (a uint64's: its bits) where one
 * is beyond 2^53 (c->v holds them rounded); nothing otherwise. */
ts_status ts_const_set_exact(ts_const *c, const int64_t *x, int64_t n);
ts_status ts_const_fill(const ts_shape *s, int dtype, double v, ts_const *out);
ts_status ts_const_copy(const ts_const *a, ts_const *out);
/* A copy with the exact values too (iv): a reshape, an Identity. */
ts_status ts_const_copy_exact(const ts_const *a, ts_const *out);
/* Add Sub Mul Div Pow Mod FMod (Mod with fmod=1), the comparisons and And
 * Or Xor, with NumPy broadcasting; an error for another op. */
ts_status ts_const_binary(const char *op, const ts_const *a, const ts_const *b, ts_const *out);
/* Abs Ceil Floor Log Neg Not Reciprocal Relu Sigmoid Sqrt Tanh. */
ts_status ts_const_unary(const char *op, const ts_const *x, ts_const *out);
/* Reshape's target for `in` (0 copies a dimension unless allowzero, one -1). */
ts_status ts_const_reshape_target(const ts_shape *in, const int64_t *want, int n, bool allowzero, ts_shape *out);
/* The shape after Squeeze (n = -1: every 1) or Unsqueeze at `axes`. */
ts_status ts_const_squeeze_shape(const ts_shape *in, const int64_t *axes, int n, bool unsqueeze, ts_shape *out);

typedef struct ts_const_attrs {
    int64_t axis;          /* Concat, Gather */
    int to;                /* Cast */
    int lowbits_mode;      /* Cast to a low-precision type: its TS_LOWBITS_ flags (core/lowbits.h) */
    const int64_t *perm;   /* Transpose (n_perm -1: reversed) */
    int64_t n_perm;
    const ts_const *fill;  /* ConstantOfShape (NULL: float 0) */
} ts_const_attrs;
/* Cast Concat ConstantOfShape Expand Gather Range Slice Transpose Where. */
ts_status ts_const_op(const char *op, const ts_const *const *in, int n_in, const ts_const_attrs *at, ts_const *out);

/* The ONNX import of bytes already in memory (the fuzz target's entry);
 * `path` names the model in messages and locates external data. */
ts_status ts_onnx_import_bytes(ts_graph **out, const uint8_t *bytes, size_t n, const char *path,
                               const ts_onnx_input *inputs, int n_inputs);

#endif
