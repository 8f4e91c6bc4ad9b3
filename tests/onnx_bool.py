"""bool graph tensors of imported ONNX models, against onnxruntime.

Each model is built here with onnx.helper, run by onnxruntime and by
tensorscope (ts.Graph.from_onnx, ts.inference_model), and every output must
equal onnxruntime's exactly, in its type (numpy bool for ONNX's bool):
  inputs      a bool graph input is a bool graph tensor, fed numpy bools
  producers   Less, Greater, Equal (floats and int64 beyond 2^53), IsNaN,
              IsInf, Not, And, Or, Xor, Cast to bool (NaN and -0 as ONNX)
  constants   a bool initializer and a bool Constant
  consumers   Where choosing floats and int64s by a bool condition,
              Cast from bool to float and int64, Expand, Transpose,
              Reshape, Concat, Slice and Gather of bools
  masks       a causal mask built from comparisons (Range, Unsqueeze,
              LessOrEqual) filling scores before a Softmax, as a torch
              export's masked_fill does
Run by tests/test_onnx_bool.sh (the real-model venv: onnx, onnxruntime)."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import tensorscope as ts
from onnx_int64 import both  # onnxruntime's outputs and ours

failures = []
B, N = 2, 5


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, **attrs)


def run_both(nodes, inputs, outputs, inits, feeds):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return both(m, feeds)


def same(name, want, got):
    got = np.asarray(got)
    ok = got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want, equal_nan=want.dtype.kind == "f")
    check(ok, f"{name}: {want.dtype}{list(want.shape)} equal to onnxruntime's")
    if not ok:
        print(f"     want {want!r}\n     got  {got!r}")


def test_producers_and_consumers():
    x = np.array([[0.25, -1.0, 0.0, np.nan, 3.0], [0.75, 0.5, -0.0, np.inf, -np.inf]], np.float32)
    ids = np.array([[7, 2**53 + 1, 0, -3, 7], [1, 7, 2, 2**53, 0]], np.int64)
    m = np.array([[True, False, False, True, True], [False, True, False, False, True]])
    flags = numpy_helper.from_array(np.array([True, True, False, False, True]), "flags")
    half = numpy_helper.from_array(np.array(0.5, np.float32), "half")
    big = numpy_helper.from_array(np.array(2**53, np.int64), "big")
    minus = numpy_helper.from_array(np.array(-1.0, np.float32), "minus")
    seven = numpy_helper.from_array(np.array(7, np.int64), "seven")
    shape = numpy_helper.from_array(np.array([3, B, N], np.int64), "shape")
    flat = numpy_helper.from_array(np.array([B * N], np.int64), "flat")
    pick = numpy_helper.from_array(np.array([4, 0, 4], np.int64), "pick")
    s0, s1, ax = (numpy_helper.from_array(np.array([v], np.int64), n) for v, n in ((1, "s0"), (4, "s1"), (1, "ax")))
    nodes = [
        node("Less", ["x", "half"], ["lt"]),
        node("Greater", ["ids", "big"], ["gt"]),  # 2^53 + 1 > 2^53: exact
        node("Equal", ["ids", "seven"], ["eq"]),
        node("IsNaN", ["x"], ["nan"]),
        node("IsInf", ["x"], ["inf"]),
        node("Not", ["eq"], ["ne"]),
        node("And", ["lt", "ne"], ["both"]),
        node("Or", ["both", "m"], ["any"]),
        node("Xor", ["m", "flags"], ["xo"]),
        node("Constant", [], ["kc"], value=numpy_helper.from_array(np.array([False, True, True, False, True]), "kc")),
        node("And", ["any", "kc"], ["anyk"]),
        node("Cast", ["x"], ["xb"], to=TensorProto.BOOL),
        node("Cast", ["ids"], ["ib"], to=TensorProto.BOOL),
        node("Cast", ["any"], ["af"], to=TensorProto.FLOAT),
        node("Cast", ["m"], ["mi"], to=TensorProto.INT64),
        node("Where", ["m", "x", "minus"], ["wf"]),
        node("Where", ["any", "ids", "seven"], ["wi"]),
        node("Expand", ["any", "shape"], ["ex"]),
        node("Transpose", ["any"], ["tr"], perm=[1, 0]),
        node("Reshape", ["any", "flat"], ["rs"]),
        node("Concat", ["lt", "m"], ["cat"], axis=1),
        node("Slice", ["any", "s0", "s1", "ax"], ["sl"]),
        node("Gather", ["any", "pick"], ["ga"], axis=1),
        node("Cast", ["ga"], ["gaf"], to=TensorProto.FLOAT),
    ]
    outs = ["lt", "gt", "eq", "nan", "inf", "both", "any", "xo", "anyk", "xb", "ib", "af", "mi", "wf", "wi", "ex", "tr",
            "rs", "cat", "sl", "ga", "gaf"]
    types = {"af": TensorProto.FLOAT, "mi": TensorProto.INT64, "wf": TensorProto.FLOAT, "wi": TensorProto.INT64, "gaf": TensorProto.FLOAT}
    g, want, got = run_both(nodes, [vi("x", TensorProto.FLOAT, [B, N]), vi("ids", TensorProto.INT64, [B, N]), vi("m", TensorProto.BOOL, [B, N])],
                            [vi(o, types.get(o, TensorProto.BOOL), None) for o in outs],
                            [flags, half, big, minus, seven, shape, flat, pick, s0, s1, ax], {"x": x, "ids": ids, "m": m})
    check(g.tensor("m").dtype == np.bool_ and g.tensor("lt").dtype == np.bool_ and g.tensor("any").dtype == np.bool_,
          "the bool input, a comparison and a logical op are bool graph tensors")
    for name, w, a in zip(outs, want, got):
        same(name, w, a)


def test_causal_mask():
    """scores masked where the key is after the query, as a torch export's
    masked_fill(causal_mask, -inf) builds it, then softmax"""
    T = 4
    s = np.random.default_rng(0).standard_normal((B, T, T)).astype(np.float32)
    t = numpy_helper.from_array(np.array(T, np.int64), "t")
    z = numpy_helper.from_array(np.array(0, np.int64), "z")
    o = numpy_helper.from_array(np.array(1, np.int64), "o")
    a0, a1 = numpy_helper.from_array(np.array([0], np.int64), "a0"), numpy_helper.from_array(np.array([1], np.int64), "a1")
    ninf = numpy_helper.from_array(np.array(-np.inf, np.float32), "ninf")
    nodes = [node("Range", ["z", "t", "o"], ["pos"]),
             node("Unsqueeze", ["pos", "a1"], ["row"]),
             node("Unsqueeze", ["pos", "a0"], ["col"]),
             node("Greater", ["col", "row"], ["after"]),
             node("Where", ["after", "ninf", "s"], ["masked"]),
             node("Softmax", ["masked"], ["p"], axis=-1)]
    _, want, got = run_both(nodes, [vi("s", TensorProto.FLOAT, [B, T, T])], [vi("p", TensorProto.FLOAT, None),
                            vi("after", TensorProto.BOOL, None)], [t, z, o, a0, a1, ninf], {"s": s})
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-7)
    check(True, "a causal mask from comparisons fills the scores before a softmax: onnxruntime's within 1e-5")
    same("the causal mask", want[1], got[1])


test_producers_and_consumers()
test_causal_mask()
print(f"test_onnx_bool: {'FAIL' if failures else 'PASS'}")
sys.exit(1 if failures else 0)
