"""Graphs and their tensors: `ts.Graph` builds a model op by op.

For maintainers: every builder function of the C API is one row of OPS
below: the method name, the C function and its arguments after the graph as
`name:kind[=default]`, and one row of OP_DOCS saying what it does in Python
terms. Adding an op to the binding is adding both rows (tests/test_abi.py
checks each row against the prototype in include/tensorscope.h). Kinds, with the C
parameters each stands for:

    T     ts_tensor *                 T?   ts_tensor * (None gives NULL)
    TS    ts_tensor *const *, int n   (a list of tensors)
    I     int                         I32  int32_t
    L     int64_t                     F    float
    S     const char * (None: NULL)   D    ts_dtype ("f32", np.float32, ...)
    SHAPE int ndim, const int64_t *   NI   int n, const int * (a list of ints)
    IP    const int * (a list of ints whose length the op knows)
    A     const ts_array * (a numpy array, copied by the op)
    CONV2D, CONVT2D, CONV3D, POOL2D  const ts_conv2d_params *,
          const ts_conv_transpose2d_params *, const ts_conv3d_params *,
          const ts_pool2d_params *:
          a dict of the struct's fields ({"stride_h": 2, ...}; unnamed
          fields 0), or None for NULL (the op's defaults)
"""
from __future__ import annotations

import ast
import contextlib
import ctypes as C
import inspect
import os
import sys
import textwrap
import weakref
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _capi
from ._capi import check, cstr, lib
from .errors import InvalidArgumentError, NotFoundError, StateError

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

DTypeLike = Union[str, type, np.dtype]  # "f32", "float32", np.float32, np.dtype("float32")

OPS = {
    "input": ("ts_input", "name:S dtype:D shape:SHAPE"),
    "param": ("ts_param", "name:S shape:SHAPE"),
    "linear": ("ts_linear", "x:T out_features:L name:S"),
    "matmul": ("ts_matmul", "a:T b:T"),
    "matmul_t": ("ts_matmul_t", "a:T b:T"),
    "add": ("ts_add", "a:T b:T"),
    "sub": ("ts_sub", "a:T b:T"),
    "mul": ("ts_mul", "a:T b:T"),
    "scale": ("ts_scale", "x:T s:F"),
    "relu": ("ts_relu", "x:T"),
    "log": ("ts_log", "x:T"),
    "reshape": ("ts_reshape", "x:T shape:SHAPE"),
    "flatten": ("ts_flatten", "x:T start_dim:I=1"),
    "log_softmax": ("ts_log_softmax", "x:T dim:I"),
    "softmax": ("ts_softmax", "x:T dim:I"),
    "nll_loss": ("ts_nll_loss", "logp:T labels:T"),
    "cross_entropy": ("ts_cross_entropy", "logits:T labels:T"),
    "sum": ("ts_sum", "x:T"),
    "mean": ("ts_mean", "x:T"),
    "print_tensor": ("ts_print", "x:T title:S=''"),
    "print_beside": ("ts_print_beside", "x:T title:S=''"),
    # convolutional networks
    "conv2d": ("ts_conv2d", "x:T w:T b:T?=None params:CONV2D=None"),
    "conv_transpose2d": ("ts_conv_transpose2d", "x:T w:T b:T?=None params:CONVT2D=None"),
    "conv3d": ("ts_conv3d", "x:T w:T b:T?=None params:CONV3D=None"),
    "conv_transpose3d": ("ts_conv_transpose3d", "x:T w:T b:T?=None params:CONV3D=None"),
    "conv2d_layer": ("ts_conv2d_layer",
                     "x:T out_channels:L kernel_h:I kernel_w:I params:CONV2D=None bias:I=1 "
                     "name:S=None"),
    "max_pool2d": ("ts_max_pool2d", "x:T params:POOL2D"),
    "avg_pool2d": ("ts_avg_pool2d", "x:T params:POOL2D"),
    "max_pool2d_indices": ("ts_max_pool2d_indices", "x:T params:POOL2D column_major:I"),
    "global_avg_pool2d": ("ts_global_avg_pool2d", "x:T"),
    "buffer": ("ts_buffer", "name:S shape:SHAPE"),
    "batch_norm": ("ts_batch_norm", "x:T weight:T bias:T running_mean:T running_var:T "
                                    "eps:F=1e-05 momentum:F=0.1 frozen:I=0"),
    "batch_norm_layer": ("ts_batch_norm_layer", "x:T name:S"),
    "dropout": ("ts_dropout", "x:T p:F"),
    "tanh": ("ts_tanh", "x:T"),
    "sigmoid": ("ts_sigmoid", "x:T"),
    # transformers
    "constant": ("ts_constant", "name:S value:A"),
    "div": ("ts_div", "a:T b:T"),
    "exp": ("ts_exp", "x:T"),
    "sqrt": ("ts_sqrt", "x:T"),
    "pow": ("ts_pow", "x:T exponent:F"),
    "erf": ("ts_erf", "x:T"),
    "abs": ("ts_abs", "x:T"),
    "cast": ("ts_cast", "x:T dtype:D"),
    "cast_typed": ("ts_cast_typed", "x:T from_dtype:D dtype:D"),
    "cumsum": ("ts_cumsum", "x:T axis:I exclusive:I=0 reverse:I=0"),
    "gelu": ("ts_gelu", "x:T tanh_approx:I=0"),
    "embedding": ("ts_embedding", "weight:T indices:T"),
    "gather": ("ts_gather", "data:T indices:T axis:I=0"),
    "gather_elements": ("ts_gather_elements", "data:T indices:T axis:I=0"),
    # the elementwise families, by the op's name (include/tensorscope.h lists them)
    "unary": ("ts_unary", "op:S x:T alpha:F=0.0 beta:F=0.0"),
    "binary": ("ts_binary", "op:S a:T b:T"),
    "binary_typed": ("ts_binary_typed", "op:S a:T b:T dtype:D"),
    "bitwise": ("ts_bitwise", "op:S a:T b:T?=None dtype:D='i32'"),
    "layer_norm": ("ts_layer_norm", "x:T weight:T bias:T ndims:I=1 eps:F=1e-05"),
    "random_uniform": ("ts_random_uniform", "like:T"),
    "group_norm": ("ts_group_norm", "x:T weight:T bias:T groups:I eps:F=1e-05"),
    "matmul_batched": ("ts_matmul_batched", "a:T b:T transpose_a:I=0 transpose_b:I=0"),
    "permute": ("ts_permute", "x:T perm:IP"),
    "transpose": ("ts_transpose", "x:T dim0:I dim1:I"),
    "slice": ("ts_slice", "x:T dim:I start:L length:L"),
    "concat": ("ts_concat", "xs:TS dim:I"),
    "where": ("ts_where", "cond:T a:T b:T"),
    "masked_fill": ("ts_masked_fill", "x:T mask:T value:F"),
    "reduce_sum": ("ts_reduce_sum", "x:T axes:NI keepdim:I=0"),
    "reduce_mean": ("ts_reduce_mean", "x:T axes:NI keepdim:I=0"),
    "reduce_max": ("ts_reduce_max", "x:T axes:NI keepdim:I=0"),
    "reduce_int": ("ts_reduce_int", "op:S x:T axes:NI keepdim:I=0"),
    "cross_entropy_ignore": ("ts_cross_entropy_ignore",
                             "logits:T labels:T ignore_index:I32=-100"),
    "stop_gradient": ("ts_stop_gradient", "x:T"),
    "matmul_int": ("ts_matmul_int", "a:T b:T"),
    "silu": ("ts_silu", "x:T"),
    "rms_norm": ("ts_rms_norm", "x:T weight:T?=None eps:F=1e-05"),
}

# What each op does, in Python terms (the parameters are listed from OPS).
OP_DOCS = {
    "stop_gradient": "x itself, through which no gradient flows back (torch's x.detach()): a "
                     "parameter that reaches the loss only through it is not updated.",
    "input": "A graph input `name` of `dtype` and `shape` (batch first); a run feeds it.",
    "param": "A trainable parameter called `name` (used as given), zero-initialised.",
    "linear": "`x @ W.T + b` over x [B, in]: makes the parameters `<name>.weight` [out_features, in] "
              "and `<name>.bias` [out_features] (PyTorch's nn.Linear and its initialisation).",
    "matmul": "a [M, K] @ b [K, N].",
    "matmul_t": "a [M, K] @ b.T for b [N, K].",
    "add": "a + b, with NumPy broadcasting (also `a + b` on Tensors).",
    "sub": "a - b, with NumPy broadcasting (also `a - b`).",
    "mul": "a * b elementwise, with NumPy broadcasting (also `a * b`).",
    "scale": "x * s for a number s (also `x * 2.0`).",
    "relu": "max(x, 0).",
    "log": "The natural logarithm of x.",
    "reshape": "x with a new shape of the same number of elements.",
    "flatten": "x with its dimensions from `start_dim` on merged into one (torch.flatten).",
    "log_softmax": "log(softmax(x)) along `dim`, computed stably.",
    "softmax": "exp(x) / sum(exp(x)) along `dim`.",
    "nll_loss": "The mean over the batch of -logp[i, labels[i]] (labels: i32 [B]); torch's nll_loss.",
    "cross_entropy": "nll_loss(log_softmax(logits, 1), labels) in one op.",
    "sum": "The sum of every element (a scalar).",
    "mean": "The mean of every element (a scalar).",
    "print_tensor": "An identity that logs x each time it runs, and its gradient as "
                    "`<title>_gradient` in the backward pass (PopTorch's ipu_print_tensor).",
    "print_beside": "A print op beside x, off the data path: logs x each time it is computed; "
                    "nothing needs to read its result (print_tensor's is meant to replace x).",
    "conv2d": "A 2-D convolution of x [N, C, H, W] with w [OC, C/groups, KH, KW] plus b [OC] "
              "(or no bias). `params`: a dict of stride_h, stride_w, pad_top, pad_bottom, "
              "pad_left, pad_right, dilation_h, dilation_w, groups, same (1: 'same' padding); "
              "None: stride 1, no padding.",
    "conv_transpose2d": "The transpose of a 2-D convolution (torch's conv_transpose2d) of x [N, C, H, W] "
                        "by w [C, OC/groups, KH, KW] plus b [OC] (or no bias). `params`: a dict of "
                        "stride_h, stride_w, pad_top, pad_bottom, pad_left, pad_right, output_pad_h, "
                        "output_pad_w, dilation_h, dilation_w, groups; None: stride 1, no padding.",
    "conv3d": "A 3-D convolution of x [N, C, D, H, W] with w [OC, C/groups, KD, KH, KW] plus "
              "b [OC] (or no bias). `params`: a dict of stride_d, stride_h, stride_w, pad_front, "
              "pad_back, pad_top, pad_bottom, pad_left, pad_right, dilation_d, dilation_h, "
              "dilation_w, groups; None: stride 1, no padding.",
    "conv_transpose3d": "The transpose of a 3-D convolution (torch's conv_transpose3d) of x "
                        "[N, C, D, H, W] by w [C, OC/groups, KD, KH, KW] plus b [OC] (or no bias). "
                        "`params`: conv3d's keys and output_pad_d, output_pad_h, output_pad_w; "
                        "None: stride 1, no padding.",
    "conv2d_layer": "A convolution layer like torch.nn.Conv2d: makes `<name>.weight` "
                    "[out_channels, C/groups, kernel_h, kernel_w] and (bias=1) `<name>.bias`, "
                    "initialised as PyTorch does; `params` as for conv2d.",
    "max_pool2d": "Max pooling of x [N, C, H, W]. `params`: a dict of kernel_h, kernel_w, "
                  "stride_h, stride_w, pad_top, pad_bottom, pad_left, pad_right, dilation_h, "
                  "dilation_w, ceil_mode (PyTorch's rules: padding never wins, a NaN in the "
                  "window gives NaN).",
    "max_pool2d_indices": "The winners of max_pool2d(x, params) as flat indices into x "
                          "(ONNX MaxPool's Indices; column_major=1: its storage_order 1), float "
                          "values with no gradient.",
    "avg_pool2d": "Average pooling of x [N, C, H, W]; `params` as for max_pool2d, plus "
                  "exclude_pad (1: padding is not counted, count_include_pad=False).",
    "global_avg_pool2d": "The mean over H and W of x [N, C, H, W]: [N, C, 1, 1].",
    "buffer": "State called `name` that the graph holds and saves, with no gradient "
              "(like a torch buffer); zero-initialised.",
    "batch_norm": "Batch normalisation with the given weight, bias and running statistics "
                  "(torch's batch_norm; frozen=1 uses the running values in training too).",
    "batch_norm_layer": "A BatchNorm2d layer: makes `<name>.weight`, `<name>.bias` and the "
                        "buffers `<name>.running_mean`, `<name>.running_var`.",
    "dropout": "Zeroes elements with probability p and scales the rest by 1/(1-p) in training "
               "(masks drawn from the graph's seed); an identity in an inference model.",
    "tanh": "tanh(x).",
    "sigmoid": "1 / (1 + exp(-x)).",
    "constant": "A named constant holding a copy of `value` (a NumPy array, float32, int32 or int64): "
                "listed and anchorable, no gradient.",
    "div": "a / b, with NumPy broadcasting.",
    "exp": "exp(x).",
    "sqrt": "The square root of x.",
    "pow": "x ** exponent.",
    "erf": "The error function of x.",
    "abs": "|x|; its gradient is sign(x) (0 at 0, as PyTorch).",
    "cast": "x rounded to the nearest value of `dtype` (\"bf16\", \"f16\"; \"f32\": a copy), ties to "
            "even as torch's .to(); held in float32 on the CPU. The gradient passes through, rounded "
            "to the same dtype; what the rounding loses shows in watches (Summary.stored_underflow). "
            "Between f32, i32 and i64 as torch's .to(): floats toward zero (NaN 0, beyond the range "
            "its nearest end), int64 to int32 wrapped, integers to float rounded; to \"bool\" True where "
            "non-zero (NaN too), from bool 1 or 0; no gradient.",
    "cast_typed": "cast of an int32 or int64 tensor whose values are of the integer type `from_dtype` "
                  "(int8 to int64, uint8 to uint64; uint32 and uint64 are held in int64): from \"u64\" "
                  "to a float the bits are read as the unsigned value (2**64-1 is 1.8446744e19); every "
                  "other cast is cast's. No gradient.",
    "cumsum": "The running sum of an int32 or int64 tensor along `axis`, exactly (wrapping as the type "
              "does); exclusive leaves each element out of its own sum, reverse sums from the end "
              "(ONNX's CumSum). No gradient.",
    "gelu": "GELU, x * (1 + erf(x / sqrt(2))) / 2; tanh_approx=1: PyTorch's approximate='tanh'.",
    "embedding": "Rows of weight [V, C] picked by int32 `indices` [...]: [..., C].",
    "gather": "data's entries along `axis` (negative counts from the end) picked by int32 `indices` "
              "(negative ones count from that dim's end): data's dims before axis, the indices' dims, "
              "data's dims after it (numpy's take; torch.index_select for 1-D indices).",
    "gather_elements": "out[p] = data[p with indices[p] on `axis`] for int32 `indices` of data's rank "
                       "(torch.gather); out has the indices' shape.",
    "unary": "The elementwise op named `op` on x: Ceil, Floor, Round (half to even), CastInt "
             "(toward zero), CastBool, Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, "
             "Atanh (NaN outside an inverse's domain), Not, IsNaN, IsInf (alpha non-zero: +inf "
             "counts, beta: -inf), HardSwish, HardSigmoid (max(0, min(1, alpha x + beta))), "
             "LeakyRelu (alpha x below 0), Elu (alpha (e^x - 1) below 0), Selu (beta x, or beta "
             "alpha (e^x - 1) at or below 0), Softplus, CastLowbits, CastFloat, CastIndex; `alpha` "
             "and `beta` are ignored by the ops that take none. The predicates (CastBool, Not, IsNaN, "
             "IsInf) give bool tensors; they and the rounding ops pass no gradient. An unknown name raises, listing the names. On an int32 "
             "or int64 tensor: Neg and Abs, exact, wrapping as the type does; no gradient.",
    "binary": "The elementwise op named `op` on a and b, with NumPy broadcasting: Pow, Max, Min, Mod "
              "(the divisor's sign, Python's %), FMod (the dividend's, torch.fmod), Equal, Greater, "
              "GreaterOrEqual, Less, LessOrEqual, And, Or, Xor (a bool tensor out, no gradient). On two "
              "integer tensors of one dtype (int32 or int64; a mix raises: cast one), exactly in that "
              "type, wrapping as it does: Add, Sub, Mul, Div (toward zero, ONNX's), FloorDiv (torch's "
              "//), Mod, FMod, Min, Max, Pow (by a negative exponent onnxruntime's: +-1 for a base "
              "of +-1, INT64_MIN (int32: INT32_MIN) for 0, else 0), and the comparisons (bool out); a division by 0 "
              "gives 0 (numpy's). Pow of an integer tensor by a float32 one: in double (C's pow, "
              "onnxruntime's), toward zero into the base's dtype, INT64_MIN (int32: INT32_MIN) where "
              "NaN or out of range. No gradient.",
    "binary_typed": "binary's integer ops on two int32 or two int64 tensors whose values are of the "
                    "integer type `dtype` (int8 to int64, uint8 to uint64; uint32 and uint64 values are "
                    "held in int64, a uint64 as its bits): Div, FloorDiv, Mod, FMod, Min, Max and the "
                    "comparisons read a uint64 unsigned (2**64-1 is above 1), Abs of an unsigned type is "
                    "the value, and the arithmetic wraps to the type (uint32 4294967295 + 1 is 0). No "
                    "gradient.",
    "bitwise": "The bitwise op named `op` on int32 tensors, computed in the integer `dtype` (the "
               "values' type: int8 to int64, uint8 to uint64) and wrapped to its width: And, Or, "
               "Xor, Not (of a; b None), ShiftLeft, ShiftRight (a by b bits, arithmetic for a "
               "signed type; by a negative amount or by the width or more every bit goes); NumPy "
               "broadcasting; int32 out, no gradient.",
    "layer_norm": "Normalises over the last `ndims` dimensions, then * weight + bias (torch's layer_norm).",
    "random_uniform": "Values uniform in [0, 1) of `like`'s shape, drawn again every micro-batch (torch.rand; "
                      "not PyTorch's numbers), no gradient.",
    "group_norm": "x [N, C, ...] normalised over each sample's `groups` groups of channels, then * weight + bias "
                  "per channel (torch's group_norm; groups == C is instance norm).",
    "matmul_batched": "a [..., M, K] @ b [..., K, N] with the leading dimensions broadcast; "
                      "transpose_a / transpose_b: the operand is stored transposed.",
    "permute": "x with its dimensions reordered as `perm` (torch.permute).",
    "transpose": "x with dimensions dim0 and dim1 swapped.",
    "slice": "x[..., start:start + length, ...] along `dim`.",
    "concat": "The tensors `xs` joined along `dim` (torch.cat).",
    "where": "a where cond (bool, or int32 or float32 non-zero) is true, else b; all three broadcast.",
    "masked_fill": "x with `value` (may be -inf) where the mask (bool, or int32 non-zero), broadcast to x, is true.",
    "reduce_sum": "The sum over `axes` (keepdim=1 keeps them as size 1).",
    "reduce_mean": "The mean over `axes` (keepdim=1 keeps them as size 1).",
    "reduce_max": "The maximum over `axes` (keepdim=1 keeps them as size 1); its gradient goes "
                  "to every element equal to the maximum.",
    "reduce_int": "The reduction `op` (Sum, Mean, Max, Min, Prod, SumSquare, L1, L2, LogSum, "
                  "LogSumExp) of an int32 or int64 tensor over `axes`, in its dtype: exactly (wrapping as "
                  "numpy's int64 does; Mean the exact mean toward zero), L2, LogSum and LogSumExp in "
                  "double as onnxruntime's (truncated toward zero, saturated; LogSumExp the maximum plus "
                  "the log of how many equal it); no gradient. reduce_sum, reduce_mean and "
                  "reduce_max of an integer tensor are its Sum, Mean and Max.",
    "cross_entropy_ignore": "cross_entropy over logits [N, ..., V] and labels [N, ...], where "
                            "labels equal to ignore_index count neither in the loss nor in the mean.",
    "matmul_int": "a @ b of two int32 or two int64 tensors, exactly, as numpy's matmul: [..., M, K] @ "
                  "[..., K, N] with the leading dimensions broadcast, a 1-D operand as a row (a) or a "
                  "column (b) whose dimension is dropped; the sums wrap as the type does (int64 mod "
                  "2**64, int32 mod 2**32, as numpy's and onnxruntime's). Memory: the result's, never "
                  "the M x K x N products. No gradient.",
    "silu": "SiLU (Swish), x * sigmoid(x): PyTorch's F.silu.",
    "rms_norm": "x / sqrt(mean(x**2) + eps) over the last dimension, then * weight ([D]; None: none) "
                "(torch's rms_norm).",
}

# The Python type each kind of parameter takes (type hints and docstrings).
_PY_TYPES = {"T": "Tensor", "T?": "Optional[Tensor]", "TS": "Sequence[Tensor]", "I": "int",
             "I32": "int", "L": "int", "F": "float", "S": "Optional[str]", "D": "DTypeLike",
             "SHAPE": "Sequence[int]", "NI": "Sequence[int]", "IP": "Sequence[int]",
             "A": "np.ndarray", "CONV2D": "Optional[Dict[str, int]]", "CONVT2D": "Optional[Dict[str, int]]",
             "CONV3D": "Optional[Dict[str, int]]",
             "POOL2D": "Optional[Dict[str, int]]"}

_CTYPES = {"T": [C.c_void_p], "T?": [C.c_void_p], "TS": [C.POINTER(C.c_void_p), C.c_int],
           "I": [C.c_int], "I32": [C.c_int32], "L": [C.c_int64], "F": [C.c_float],
           "S": [C.c_char_p], "D": [C.c_int], "SHAPE": [C.c_int, C.POINTER(C.c_int64)],
           "NI": [C.c_int, C.POINTER(C.c_int)], "IP": [C.POINTER(C.c_int)],
           "A": [C.POINTER(_capi.Array)], "CONV2D": [C.POINTER(_capi.Conv2dParams)],
           "CONVT2D": [C.POINTER(_capi.ConvTranspose2dParams)],
           "CONV3D": [C.POINTER(_capi.Conv3dParams)],
           "POOL2D": [C.POINTER(_capi.Pool2dParams)]}
_STRUCTS = {"CONV2D": _capi.Conv2dParams, "CONVT2D": _capi.ConvTranspose2dParams,
            "CONV3D": _capi.Conv3dParams, "POOL2D": _capi.Pool2dParams}

_DTYPE_NAMES = {"f32": 0, "float32": 0, "f64": 1, "float64": 1, "i32": 2, "int32": 2,
                "i64": 3, "int64": 3, "u8": 4, "uint8": 4, "bf16": 11, "bfloat16": 11,
                "f16": 12, "float16": 12, "i8": 6, "int8": 6, "i16": 7, "int16": 7, "u16": 8, "uint16": 8,
                "u32": 9, "uint32": 9, "u64": 10, "uint64": 10}


def dtype_code(d: DTypeLike) -> int:
    """The library's dtype code of "f32", "float32", np.float32 or np.dtype('float32')."""
    if isinstance(d, str) and d in _DTYPE_NAMES:
        return _DTYPE_NAMES[d]
    try:
        return _capi.DTYPES.index(np.dtype(d))
    except (TypeError, ValueError):
        raise TypeError(f"dtype {d!r}: use one of f32, f64, i32, i64, u8, bool, bf16, f16, i8, i16, u16, u32, u64 "
                        "(or the numpy dtypes of the same names)") from None


def _shape_args(shape):
    shape = [int(d) for d in shape]
    return [len(shape), _capi.int_array(C.c_int64, shape, "shape", max(len(shape), 1))]


def _tensor_arg(value, graph, what):
    if not isinstance(value, Tensor):
        raise TypeError(f"{what}: expected a tensorscope Tensor, got {type(value).__name__}")
    if value.graph is not graph:
        raise ValueError(f"{what}: tensor '{value.name}' belongs to another graph")
    return value._h


def _ints(values, pad=0):
    """A C int array of `values`, padded with -1 (never a valid dim) to
    `pad` entries for ops that read as many as they expect."""
    values = [int(v) for v in values]
    n = len(values)
    return _capi.int_array(C.c_int, values + [-1] * max(pad - n, 0), "values", max(n, pad, 1)), n


def _struct(cls, value, what):
    if value is None:
        return None
    fields = [n for n, _ in cls._fields_]
    unknown = set(value) - set(fields)
    if unknown:
        raise TypeError(f"{what}: unknown field(s) {', '.join(sorted(unknown))}; the fields are "
                        f"{', '.join(fields)}")
    return C.pointer(cls(**{k: int(v) for k, v in value.items()}))


def _convert(kind, value, graph, what):
    if kind == "T":
        return [_tensor_arg(value, graph, what)]
    if kind == "T?":
        return [None if value is None else _tensor_arg(value, graph, what)]
    if kind == "TS":
        ptrs = [_tensor_arg(v, graph, f"{what}[{i}]") for i, v in enumerate(value)]
        return [(C.c_void_p * max(len(ptrs), 1))(*ptrs), len(ptrs)]
    if kind in ("I", "I32", "L"):
        return [int(value)]
    if kind == "NI":
        arr, n = _ints(value)
        return [n, arr]
    if kind == "IP":
        return [_ints(value, pad=_capi.TS_MAX_DIMS)[0]]
    if kind == "A":
        arr, keep = _capi.to_c(value, what)
        arr._keep = keep  # alive as long as the argument
        return [C.pointer(arr)]
    if kind in _STRUCTS:
        return [_struct(_STRUCTS[kind], value, what)]
    if kind == "F":
        return [float(value)]
    if kind == "S":
        return [cstr(value)]
    if kind == "D":
        return [dtype_code(value)]
    if kind == "SHAPE":
        return _shape_args(value)
    raise AssertionError(kind)


def _parse(spec):
    params = []
    for item in spec.split():
        name, kind = item.split(":", 1)
        default = inspect.Parameter.empty
        if "=" in kind:
            kind, text = kind.split("=", 1)
            default = ast.literal_eval(text)
        params.append((name, kind, default))
    return params


def _make_op(method, cname, spec):
    params = _parse(spec)
    argtypes = [C.c_void_p] + [t for _, kind, _ in params for t in _CTYPES[kind]]
    present = _capi.declare(cname, C.c_void_p, argtypes)
    sig = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)] +
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=d,
                           annotation=_PY_TYPES[kind])
         for n, kind, d in params], return_annotation="Tensor")

    def op(self, *args, **kwargs):
        fn = getattr(lib, cname) if present else _capi.function(cname, f"Graph.{method}")
        bound = sig.bind(self, *args, **kwargs)
        bound.apply_defaults()
        cargs = []
        for name, kind, _ in params:
            cargs += _convert(kind, bound.arguments[name], self, f"{method}({name})")
        self._locate()
        return self._tensor(fn(self._h, *cargs))

    op.__name__ = method
    op.__qualname__ = f"Graph.{method}"
    op.__signature__ = sig
    op.__annotations__ = {n: _PY_TYPES[kind] for n, kind, _ in params}
    op.__annotations__["return"] = "Tensor"
    args = "\n".join(f"    {n}: {_PY_TYPES[kind]}" + ("" if d is inspect.Parameter.empty else f" = {d!r}")
                     for n, kind, d in params)
    op.__doc__ = (textwrap.fill(OP_DOCS[method], 76) + "\n\nReturns the new Tensor; the line "
                  f"that called it is recorded, and errors name it.\n\nArguments:\n{args}\n")
    return op


class Tensor:
    """A tensor of a graph (owned by the graph). Its values exist only for
    parameters; anchor any other tensor to see it in a model."""

    __slots__ = ("graph", "_ptr")

    def __init__(self, graph: Graph, handle: int) -> None:
        self.graph = graph
        self._ptr = handle

    @property
    def _h(self):
        self.graph._h  # raises once the graph is closed
        return self._ptr

    @property
    def name(self) -> str:
        """Its name in the graph: what anchors, watches and errors use
        (settable: `loss.name = "loss"`)."""
        return lib.ts_tensor_name(self._h).decode()

    @name.setter
    def name(self, value: str) -> None:
        check(lib.ts_tensor_set_name(self._h, cstr(value)))

    def _info(self):
        a = _capi.Array()
        check(lib.ts_tensor_info(self._h, C.byref(a)))
        return a

    @property
    def shape(self) -> Tuple[int, ...]:
        """Its shape as declared or inferred when built (one micro-batch)."""
        return _capi.shape_of(self._info())

    @property
    def dtype(self) -> np.dtype:
        """Its NumPy dtype."""
        return _capi.DTYPES[self._info().dtype]

    @property
    def precision(self) -> str:
        """The 16-bit dtype whose values this tensor holds ("bf16", "f16":
        a cast's output, a copy a model's precision made), else "f32"."""
        code = _capi.function("ts_tensor_precision", "Tensor.precision")(self._h)
        return {11: "bf16", 12: "f16"}.get(code, "f32")

    @property
    def is_parameter(self) -> bool:
        """A trainable parameter (not a buffer, not a constant)."""
        return self.op == "Param"

    @property
    def is_buffer(self) -> bool:
        """State the graph holds without a gradient (batch norm's running
        statistics)."""
        return bool(_capi.function("ts_tensor_is_buffer", "Tensor.is_buffer")(self._h))

    @property
    def inputs(self) -> List[Tensor]:
        """The tensors this op reads."""
        n = lib.ts_tensor_input_count(self._h)
        return [Tensor(self.graph, lib.ts_tensor_input(self._h, i)) for i in range(n)]

    @property
    def op(self) -> str:
        """The op's name ("MatMul", "Param", "Input", ...)."""
        return lib.ts_tensor_op(self._h).decode()

    @property
    def alias(self) -> Optional[str]:
        """An imported tensor's name in its file (None for others)."""
        name = _capi.function("ts_tensor_alias", "Tensor.alias")(self._h)
        return name.decode() if name else None

    @property
    def location(self) -> str:
        """Where it was built ("train.py:42"), or "" (a wrapped torch
        module's: its module path and the line of its forward)."""
        buf = C.create_string_buffer(1024)
        where = lib.ts_tensor_location(self._h, buf, len(buf)).decode()
        origins = self.graph._origins  # an exported torch module's nodes
        return origins.explain(where) if origins else where

    def numpy(self) -> np.ndarray:
        """A copy of a parameter's current values."""
        return _capi.to_numpy(self._param_array(), self.name)

    def view(self) -> np.ndarray:
        """A zero-copy, read-only view of a parameter's values: on the CPU it
        follows training as the optimizer updates them in place; on a GPU
        the values stay on the device between runs and the view shows them
        as of the last read (numpy(), view(), saving weights). Like any numpy
        view it keeps the memory it shows: after Graph.close() it still
        reads the last values (the graph's memory goes with its last view)."""
        a = self._param_array()
        return np.asarray(_capi.Pin(self.graph._owned, {
            "shape": _capi.shape_of(a), "typestr": _capi.DTYPES[a.dtype].str,
            "data": (a.data, True), "version": 3}))

    @property
    def trainable(self) -> bool:
        """Whether a training model updates this parameter (torch's
        requires_grad). Set it False before making a model of the graph to
        freeze it: its values stay, and its gradient is computed only when
        an anchor asks for it."""
        return bool(_capi.function("ts_param_trainable", "Tensor.trainable")(self._h))

    @trainable.setter
    def trainable(self, on: bool) -> None:
        check(_capi.function("ts_param_set_trainable", "Tensor.trainable")(self._h, int(bool(on))))

    def set_optimizer(self, optimizer: Optional[Any]) -> None:
        """This parameter's own optimizer settings (a torch parameter
        group's): ts.SGD/Adam/AdamW of the model's kind, whose lr is its base
        rate (the model's LR schedule scales it too); None: the model's.
        Set before making a model of the graph."""
        f = _capi.function("ts_param_set_optimizer", "Tensor.set_optimizer")
        check(f(self._h, None if optimizer is None else C.byref(optimizer)))

    def set_value(self, values: np.ndarray) -> None:
        """Copies `values` into this parameter (the library checks shape and dtype)."""
        arr, keep = _capi.to_c(values, self.name)
        check(lib.ts_param_set(self._h, C.byref(arr)))
        del keep

    def _param_array(self):
        a = self._info()
        if not a.data:
            raise StateError(f"'{self.name}' is not a parameter: only parameters, buffers and "
                             "constants hold values in a graph; anchor it "
                             "(Options.anchor_tensor) to see it in a run")
        return a

    def __repr__(self) -> str:
        if self.graph._closed:
            return "<Tensor of a closed graph>"
        kind = {"Param": "parameter", "Input": "input"}.get(self.op) or (
            "buffer" if self.is_buffer else self.op)
        return f"<Tensor {self.name} {_capi.shape_str(self._info())} {kind}>"

    def __eq__(self, other):
        return isinstance(other, Tensor) and other._ptr == self._ptr

    def __hash__(self):
        return hash(self._ptr)

    def __add__(self, other):
        return self.graph.add(self, other)

    def __sub__(self, other):
        return self.graph.sub(self, other)

    def __mul__(self, other):
        if isinstance(other, Tensor):
            return self.graph.mul(self, other)
        return self.graph.scale(self, other)

    def __matmul__(self, other):
        return self.graph.matmul(self, other)


class Graph:
    """A model graph: `ts.Graph(seed)` then the builder's ops as methods
    (`g.input`, `g.linear`, `g.relu`, ...), or `ts.Graph.from_onnx(...)`.
    Parameters live in the graph and are initialised from `seed`."""

    _files = {}  # source file names handed to ts_graph_at (kept for the process)

    def __init__(self, seed: int = 0, _handle: Optional[int] = None) -> None:
        ptr = _handle or _capi.checked_handle(lib.ts_graph_new(int(seed)), "ts_graph_new")
        # freed on close() once no view of a parameter and no model is left;
        # outfeed queues the graph streams to outlive it
        self._owned = _capi.Owned(ptr, lib.ts_graph_free)
        self._closed = False
        self._queues = []  # the Python side of those queues, for as long as the graph
        self._models = weakref.WeakSet()  # closed before the graph
        self._origins = None  # of a wrapped torch module: where its nodes came from
        self._at = None  # (file, line) the next nodes are recorded at, else the caller's line
        self._outputs = None  # a torch.export capture's outputs (an import records its own)

    @property
    def _h(self):
        if self._closed:
            raise StateError("the graph was closed: make a new one (or keep it open while you use "
                             "its tensors and models)")
        return self._owned.ptr

    def __repr__(self) -> str:
        if self._closed:
            return "<Graph (closed)>"
        ts_ = self.tensors()
        params = [t for t in ts_ if t.is_parameter]
        n = sum(int(np.prod(t.shape)) for t in params)
        ins = ", ".join(f"{t.name} {_capi.shape_str(t._info())}" for t in ts_ if t.op == "Input")
        return f"<Graph of {len(ts_)} tensors, {len(params)} parameters ({n} values), inputs: {ins or 'none'}>"

    @classmethod
    def from_torch(cls, module: Any, example_inputs: Any, capture: Optional[str] = None) -> Graph:
        """The graph of a torch module, captured at `example_inputs` (the
        inputs of one micro-batch) as ts.training_model and
        ts.inference_model capture it (`capture`: "onnx" or "export", see
        Options.capture; None: "export" where this PyTorch has it, else
        "onnx"): parameters and buffers under their PyTorch names,
        holding the module's values now; its outputs are forward's."""
        from ._torch import graph_of_module
        return graph_of_module(module, example_inputs, capture)

    @classmethod
    def from_onnx(cls, path: Union[str, os.PathLike],
                  input_shapes: Optional[Dict[str, Sequence[int]]] = None,
                  input_values: Optional[Dict[str, np.ndarray]] = None) -> Graph:
        """Reads an ONNX model. `input_shapes` maps input names to shapes;
        inputs with dynamic dimensions must be given, others may be.
        `input_values` binds inputs to values at import: each becomes that
        constant, no input of the graph (inputs that give axes, shapes,
        sizes or pads must be bound)."""
        fn = _capi.function("ts_graph_from_onnx", "Graph.from_onnx")
        values = {k: _capi.to_c(v, k) for k, v in (input_values or {}).items()}
        shapes = {k: v for k, v in (input_shapes or {}).items() if k not in values}
        given = list(shapes.items()) + [(k, None) for k in values]
        inputs = (_capi.OnnxInput * max(len(given), 1))()
        names = []
        for i, (name, shape) in enumerate(given):
            names.append(cstr(name))
            inputs[i].name = names[-1]
            if shape is None:
                inputs[i].value = C.pointer(values[name][0])
                continue
            inputs[i].ndim = len(shape)
            inputs[i].shape[:len(shape)] = [_capi.fit_int(int(d), C.c_int64, f"input_shapes[{name!r}][{j}]")
                                            for j, d in enumerate(shape)]
        h = C.c_void_p()
        check(fn(C.byref(h), cstr(os.fspath(path)), inputs, len(given)))
        del values  # the library has copied them
        return cls(_handle=h.value)

    def close(self) -> None:
        """Closes the models of the graph, then the graph: using any of
        them, or a tensor of the graph, afterwards is a StateError. Its
        memory is freed now, or when the last Tensor.view() of it goes."""
        for m in list(self._models):
            m.close()
        if not self._closed:
            self._closed = True
            self._owned.release()

    def __del__(self):
        if not getattr(self, "_closed", True) and not sys.is_finalizing():
            self.close()

    def _locate(self):
        """Records the user's line (the first caller outside this package) as
        the source location of the next nodes."""
        if self._at is not None:  # a captured node's line of forward
            f, line = self._at
        else:
            frame = sys._getframe(1)
            while frame.f_back and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
                frame = frame.f_back
            f, line = frame.f_code.co_filename, frame.f_lineno
        b = Graph._files.setdefault(f, C.create_string_buffer(f.encode()))
        lib.ts_graph_at(self._h, b, line)

    def _tensor(self, ptr):
        if not ptr:
            _capi.check(lib.ts_graph_status(self._h) or 1)
        return Tensor(self, ptr)

    # ---- lookup
    def tensor(self, name: str) -> Tensor:
        """The tensor called `name` (parameters, inputs, op outputs)."""
        ptr = lib.ts_graph_find(self._h, cstr(name))
        if not ptr:  # a miss sets no error: the last one is another call's
            buf = _capi.C.create_string_buffer(512)
            lib.ts_graph_closest_names(self._h, cstr(name), buf, len(buf))
            near = buf.value.decode(errors="replace")
            raise NotFoundError(f"no tensor named '{name}' in the graph" + (f" (closest: {near})" if near else ""))
        return Tensor(self, ptr)

    def tensors(self) -> List[Tensor]:
        """Every tensor in build order."""
        n = lib.ts_graph_tensor_count(self._h)
        return [Tensor(self, lib.ts_graph_tensor_at(self._h, i)) for i in range(n)]

    @property
    def inputs(self) -> List[Tensor]:
        """The graph's inputs in build order: the order `model(*inputs)` takes."""
        return [t for t in self.tensors() if t.op == "Input"]

    @property
    def outputs(self) -> List[Tensor]:
        """The outputs an ONNX import recorded, in file order (a torch
        module's graph: forward's outputs, in forward's order)."""
        if self._outputs is not None:
            return list(self._outputs)
        count = _capi.function("ts_graph_output_count", "Graph.outputs")
        n = count(self._h)
        return [Tensor(self, lib.ts_graph_output_at(self._h, i)) for i in range(n)]

    def parameters(self) -> Dict[str, Tensor]:
        """{name: Tensor} of every trainable parameter, in build order."""
        return {t.name: t for t in self.tensors() if t.is_parameter}

    def state_dict(self) -> Dict[str, np.ndarray]:
        """{name: numpy copy} of every parameter and buffer (PyTorch's word)."""
        return {t.name: t.numpy() for t in self.tensors() if t.is_parameter or t.is_buffer}

    def load_state_dict(self, values: Dict[str, np.ndarray]) -> None:
        """Copies {name: array} into the parameters (or buffers) of those names."""
        for name, v in values.items():
            self.tensor(name).set_value(v)

    def save_weights(self, path: Union[str, os.PathLike]) -> None:
        """Every parameter: one .npz archive when `path` ends in .npz, else
        `<name>.npy` files in directory `path`."""
        check(lib.ts_graph_save_weights(self._h, cstr(os.fspath(path))))

    def load_weights(self, path: Union[str, os.PathLike], strict: bool = True) -> Optional[Tuple[List[str], List[str]]]:
        """Loads what save_weights wrote (or PyTorch's state dict saved the
        same way): every parameter, with its shape, and nothing else.
        With strict=False (PyTorch's load_state_dict(strict=False)), the
        arrays that are parameters by name, each still checked for its
        shape and NaNs; returns (missing_keys, unexpected_keys): the
        parameters the file lacks (they keep their values) and the file's
        arrays that are no parameter (skipped). A file that holds none of
        the parameters is refused."""
        if strict:
            check(lib.ts_graph_load_weights(self._h, cstr(os.fspath(path))))
            return None
        missing: List[str] = []
        unexpected: List[str] = []

        def told(_ctx, name, why):
            (missing if why == 1 else unexpected).append(name.decode())  # 1: TS_WEIGHT_MISSING

        fn = _capi.WEIGHT_SKIP_FN(told)
        check(lib.ts_graph_load_weights_matching(self._h, cstr(os.fspath(path)), fn, None, None))
        return missing, unexpected

    # ---- building
    def status(self) -> None:
        """Raises the graph's sticky builder error, if any."""
        check(lib.ts_graph_status(self._h))

    @contextlib.contextmanager
    def scope(self, name: str) -> Iterator[Graph]:
        """`with g.scope("block0"):` names op outputs `block0/<Op>:<k>`."""
        check(lib.ts_scope_push(self._h, cstr(name)))
        try:
            yield self
        finally:
            check(lib.ts_scope_pop(self._h))

    def autocast(self, dtype: DTypeLike) -> None:
        """What a model's precision (Options.precision) does to the graph,
        done now so the copies' names (`fc1.weight@bf16`) exist before a
        model is made: the float inputs of every matmul, batched matmul and
        convolution become `dtype` copies ("bf16", "f16"; "f32": nothing)."""
        self._locate()
        check(_capi.function("ts_graph_autocast", "Graph.autocast")(self._h, dtype_code(dtype)))

    def split(self, x: Tensor, dim: int, n: int) -> List[Tensor]:
        """`n` equal slices of x along `dim` (torch.chunk), as a list."""
        fn = _capi.function("ts_split", "Graph.split")
        n = _capi.fit_int(int(n), C.c_int, "n")  # before an array of n pointers is made
        out = (C.c_void_p * max(n, 1))()
        self._locate()
        check(fn(self._h, _tensor_arg(x, self, "split(x)"), int(dim), int(n), out))
        return [Tensor(self, out[i]) for i in range(int(n))]

    _PAD_MODES = {"constant": 0, "reflect": 1, "edge": 2, "wrap": 3}

    def pad(self, x: Tensor, pads: Sequence[int], mode: str = "constant", value: float = 0.0) -> Tensor:
        """x padded as numpy's np.pad (and ONNX's Pad): `pads` gives the
        elements before each dim, then after each dim (2 * rank entries;
        a negative pad crops); `mode` "constant" (filled with `value`),
        "reflect" (mirrored without repeating the edge), "edge" (the edge
        repeated) or "wrap". Each element's gradient sums the outputs that
        read it. An int32, int64 or bool x keeps its dtype and values, its
        constant border 0 (pad x - v and add v back for another)."""
        if not isinstance(x, Tensor):
            raise TypeError(f"pad: expected a tensorscope Tensor, got {type(x).__name__}")
        if mode not in self._PAD_MODES:
            raise ValueError(f"pad: mode {mode!r} is not one of {', '.join(self._PAD_MODES)}")
        pads = [int(p) for p in pads]
        if len(pads) != 2 * len(x.shape):
            raise ValueError(f"pad: {len(pads)} pads for a tensor of rank {len(x.shape)}; give "
                             f"{2 * len(x.shape)}: the befores of every dim, then the afters")
        fn = _capi.function("ts_pad", "Graph.pad")
        self._locate()
        return self._tensor(fn(self._h, _tensor_arg(x, self, "pad(x)"), _capi.int_array(C.c_int64, pads, "pads"),
                               self._PAD_MODES[mode], float(value)))

    def outfeed(self, queue: "OutfeedQueue", key: str, tensor: Tensor) -> None:
        """Streams `tensor` (per micro-batch) into `queue` under `key`."""
        if not isinstance(tensor, Tensor):
            raise TypeError(f"outfeed: expected a tensorscope Tensor, got {type(tensor).__name__}")
        check(lib.ts_outfeed_add(self._h, queue._h, cstr(key), tensor._h))
        self._owned.depend(queue._owned)
        self._queues.append(queue)

    def dump(self, model: Optional["Model"] = None, fmt: str = "text", locations: bool = False,
             backward: bool = False) -> str:
        """The graph as text (or Graphviz dot with fmt="dot"); with a model,
        its compiled shapes, gradients and observation flags; backward=True
        adds the backward pass and optimizer step of a compiled training
        model."""
        fmts = {"text": 0, "dot": 1}
        if fmt not in fmts:
            raise ValueError(f"dump format {fmt!r}: use 'text' or 'dot'")
        flags = (1 if locations else 0) | (2 if backward else 0)  # TS_DUMP_LOCATIONS, TS_DUMP_BACKWARD
        # the library says what is wrong (backward=True without a compiled
        # training model, or out of memory)
        return _capi.take_string(lib.ts_graph_dump(self._h, model._h if model else None, fmts[fmt], flags),
                                 failure=InvalidArgumentError)


for _method, (_cname, _spec) in OPS.items():
    setattr(Graph, _method, _make_op(_method, _cname, _spec))


def print_tensor(x: Tensor, title: str = "") -> Tensor:
    """PopTorch's print_tensor: an identity that logs x each time it runs and
    its gradient (`<title>_gradient`) in the backward pass."""
    return x.graph.print_tensor(x, title)
