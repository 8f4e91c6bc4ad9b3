"""Integer graph tensors of imported ONNX models, exactly, against
onnxruntime and numpy.

Each model is built here with onnx.helper, run by onnxruntime and by
tensorscope (ts.Graph.from_onnx, ts.inference_model), fed values beyond
2^24 and 2^53 that float32 or double would round, and every output must
equal onnxruntime's exactly, in its type:
  inputs      int64 graph inputs are i64 tensors, int32 ones i32; an int64
              id beyond int32 fed to a Gather is an error naming the input
              and its value (onnxruntime refuses it too), never wrapped
  constants   int64 initializers and Constants beyond 2^53 reach integer
              arithmetic exactly (a scalar, a vector, value_int(s), and
              through Unsqueeze, Gather and Concat folded at import)
  compare     Equal, Less, Greater, LessOrEqual, GreaterOrEqual of int64
              tensors and constants that differ only past 2^53
  where       Where choosing int64 values (a graph condition, an int64 one)
  cast        Cast int64 -> int32 (wrapped), int64 -> float, float -> int64,
              int32 -> int64
  expand      Expand of an int64 tensor (along a new axis and the batch)
  onehot      OneHot with int64 values beyond 2^53 and negative indices
  bitwise     BitwiseAnd, Or, Xor, Not of int64 values at the ends of
              int64, and in uint64 (a Cast of them), BitShift in uint64 by
              0 to 63 and 64, of a uint64 input too
  narrow      Cast of int64 and int32 values to int8, int16, uint8, uint16,
              uint32 and uint64 (wrapped: 300 as int8 is 44)
  variadic    Max and Min of int64 tensors and constants past 2^53
  uint64      Div, Mod, the comparisons, Max, Min and Cast to float, double,
              int64 and int32 of uint64 inputs and initializers past 2^63
              (2^64-1, 2^63+5: read unsigned, not as negative int64), also
              after a Reshape; the same folded on uint64 constants
  uint32      uint32 inputs of every value (4294967295) through Add, Sub,
              Mul (wrapping mod 2^32), Div, the comparisons, Max, Cast and
              BitwiseNot; a fed -1 refused
  folds       integer folds exactly in int64: Add, Sub, Mul (wrapping),
              Div, Mod, Neg, Abs, Max, CumSum of int64 constants past 2^53, Range from
              2^62, ConstantOfShape of 2^62+1, Cast of constants to int8
  movers      Pad (constant 2^62+7, 0, edge, reflect), Tile, Gather,
              GatherElements, GatherND, ScatterElements (none, add, mul,
              max, min), ScatterND, DepthToSpace, SpaceToDepth, Split,
              Squeeze, Unsqueeze, Identity, Trilu, Compress, Slice with a
              step, TensorScatter, ScatterND at computed indices (none,
              add), of int64 tensors at the ends of int64;
              Resize nearest of int32 values past 2^24
  reductions  ReduceSum, Max, Min, Prod, SumSquare, L1 and Mean of int64
              tensors past 2^53 against ONNX's reference (numpy's int64
              arithmetic, wrapping) and an exact mean (onnxruntime 1.32
              adds int64 in double: it agrees where that is exact, which
              the test checks too); L2, LogSum and LogSumExp of int64
              and int32 past 2^24 and 2^53 as onnxruntime's (in double,
              truncated and saturated into the type); ArgMax,
              ArgMin and TopK of values that differ by 1 past 2^53
  elementwise Abs, Neg, Sign, Relu, Clip with int64 bounds, Pow by
              constant exponents and by fed ones (numpy's wrapping power;
              a negative one as onnxruntime's), MatMul (past 2^26 products
              too), Gemm (against numpy), Einsum, CumProd and PRelu (a
              constant and a fed slope) of int64 tensors
  float_exponents  Pow of int64 and int32 tensors by float exponents
              (fed, float and double constants) past 2^24 and 2^53, as
              onnxruntime's std::pow in double cast to the type
  resize      Resize linear and cubic (align_corners, antialias over the
              axes attribute, tf_crop_and_resize) of int64 and int32
              values past 2^53 and 2^24, against ONNX's reference
  widths      Concat of an int64 tensor and a small int64 constant (held
              in i32), exactly; full reductions to a scalar of shape ()
  int matmul  MatMul, Gemm, Einsum and ScatterND through the integer
              matrix product at any size: a row of 2^27 products past
              2^53 (onnxruntime's), Gemm with a fractional alpha and beta
              in int64 and int32 and Einsum with a diagonal (ONNX's
              reference), a computed-index ScatterND of int32 values past
              2^24 over more than 2^26 update elements (ONNX's reference)
Run by tests/test_onnx_int64.sh (the real-model venv: onnx, onnxruntime)."""
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import tensorscope as ts

BIG = 2**53
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def both(m, feeds):
    """onnxruntime's outputs and tensorscope's, in the file's output order."""
    path = tempfile.mktemp(suffix=".onnx")
    onnx.save(m, path)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    g = ts.Graph.from_onnx(path)
    got = ts.inference_model(g, ts.Options())(**feeds)
    got = got if isinstance(got, (list, tuple)) else [got]
    return g, want, got


def same(name, want, got, whose="onnxruntime's"):
    ok = got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)
    check(ok, f"{name}: {want.dtype}{list(want.shape)} equal to {whose}")
    if not ok:
        print(f"     want {want!r}\n     got  {got!r}")


def vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def test_inputs():
    x = np.array([[BIG + 1, -(BIG + 3), 2**62 + 5], [2**24 + 1, -7, 2**31 + 9]], np.int64)
    i32 = np.array([[1, 2, 3], [2**24 + 1, -5, 7]], np.int32)
    m = model([helper.make_node("Add", ["x", "x"], ["twice"]),
               helper.make_node("Sub", ["x", "one"], ["less"]),
               helper.make_node("Mul", ["i", "i"], ["sq"])],
              [vi("x", TensorProto.INT64, [2, 3]), vi("i", TensorProto.INT32, [2, 3])],
              [vi("twice", TensorProto.INT64, [2, 3]), vi("less", TensorProto.INT64, [2, 3]),
               vi("sq", TensorProto.INT32, [2, 3])],
              [numpy_helper.from_array(np.array(1, np.int64), "one")])
    g, want, got = both(m, {"x": x, "i": i32})
    check(g.tensor("x").dtype == np.int64 and g.tensor("i").dtype == np.int32,
          "an int64 input is an i64 graph tensor, an int32 one i32")
    for name, w, o in zip(("x + x", "x - 1", "i * i"), want, got):
        same(name, w, o)


def test_gather_ids():
    table = np.arange(12, dtype=np.float32).reshape(6, 2)
    m = model([helper.make_node("Gather", ["table", "ids"], ["rows"], axis=0)],
              [vi("ids", TensorProto.INT64, [4])], [vi("rows", TensorProto.FLOAT, [4, 2])],
              [numpy_helper.from_array(table, "table")])
    ids = np.array([0, 5, -1, 2], np.int64)
    _, want, got = both(m, {"ids": ids})
    same("Gather by int64 ids", want[0], got[0])
    bad = ids.copy()
    bad[1] = 2**32 + 1  # wraps onto row 1 in int32
    path = tempfile.mktemp(suffix=".onnx")
    onnx.save(m, path)
    try:
        ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"ids": bad})
        ort_refuses = False
    except Exception:
        ort_refuses = True
    try:
        ts.inference_model(ts.Graph.from_onnx(path), ts.Options())(ids=bad)
        msg = ""
    except ts.TensorscopeError as e:
        msg = str(e)
    check(ort_refuses and "'ids'[1] = 4294967297" in msg and "not an index in [-6, 6)" in msg,
          f"an int64 id beyond int32 is an error naming the input and its value, as onnxruntime refuses it ({msg!r})")


def test_constants():
    c = np.array(BIG + 3, np.int64)
    v = np.array([BIG + 1, -(2**62) - 1, 2**63 - 2], np.int64)
    x = np.array([[1, -2, -(2**62)], [BIG, 3, 1]], np.int64)
    m = model([helper.make_node("Add", ["x", "c"], ["a"]),
               helper.make_node("Sub", ["x", "v"], ["b"]),
               helper.make_node("Constant", [], ["k"], value_int=BIG + 7),
               helper.make_node("Constant", [], ["ks"], value_ints=[BIG + 9, 1, -(BIG + 11)]),
               helper.make_node("Add", ["x", "k"], ["d"]),
               helper.make_node("Mul", ["x", "ks"], ["e"]),
               helper.make_node("Unsqueeze", ["v", "zero"], ["v2"]),
               helper.make_node("Add", ["x", "v2"], ["f"]),
               helper.make_node("Gather", ["v", "perm"], ["vp"], axis=0),
               helper.make_node("Unsqueeze", ["vp", "zero"], ["vp2"]),
               helper.make_node("Concat", ["v2", "vp2"], ["vv"], axis=0),
               helper.make_node("Sub", ["vv", "x"], ["h"])],
              [vi("x", TensorProto.INT64, [2, 3])],
              [vi(n, TensorProto.INT64, [2, 3]) for n in "abdefh"],
              [numpy_helper.from_array(c, "c"), numpy_helper.from_array(v, "v"),
               numpy_helper.from_array(np.array([0], np.int64), "zero"),
               numpy_helper.from_array(np.array([2, 0, 1], np.int64), "perm")])
    _, want, got = both(m, {"x": x})
    for name, w, o in zip(("x + initializer 2^53+3", "x - initializer vector", "x + value_int 2^53+7",
                           "x * value_ints", "x + Unsqueeze(initializer)", "Concat(v, Gather(v)) folded - x"), want, got):
        same(name, w, o)


def test_comparisons():
    x = np.array([[BIG, BIG + 1, BIG + 2], [-(BIG + 1), 2**62 + 1, 2**62]], np.int64)
    y = np.array([[BIG + 1, BIG + 1, BIG + 1], [-BIG, 2**62, 2**62 + 1]], np.int64)
    ops = ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"]
    nodes = [helper.make_node(op, ["x", "y"], [op]) for op in ops]
    nodes += [helper.make_node("Equal", ["x", "c"], ["EqualC"]), helper.make_node("Less", ["c", "x"], ["LessC"])]
    m = model(nodes, [vi("x", TensorProto.INT64, [2, 3]), vi("y", TensorProto.INT64, [2, 3])],
              [vi(n, TensorProto.BOOL, [2, 3]) for n in ops + ["EqualC", "LessC"]],
              [numpy_helper.from_array(np.array(BIG + 1, np.int64), "c")])
    _, want, got = both(m, {"x": x, "y": y})
    for name, w, o in zip(ops + ["Equal(x, 2^53+1)", "Less(2^53+1, x)"], want, got):
        same(name, w, o)


def test_where_cast_expand():
    x = np.array([[BIG + 1, -(BIG + 1), 2**40 + 3], [7, 2**62 + 1, -(2**31) - 5]], np.int64)
    f = np.array([[1.5, -2.5, 2**40], [3e9, -3e9, 0.0]], np.float32)
    i32 = np.array([[2**31 - 1, -(2**31), 5], [0, 1, -1]], np.int32)
    m = model([helper.make_node("Greater", ["x", "zero"], ["pos"]),
               helper.make_node("Where", ["pos", "x", "big"], ["w"]),
               helper.make_node("Where", ["pos", "big", "x"], ["w2"]),
               helper.make_node("Cast", ["x"], ["x32"], to=TensorProto.INT32),
               helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT),
               helper.make_node("Cast", ["f"], ["fi"], to=TensorProto.INT64),
               helper.make_node("Cast", ["i"], ["i64"], to=TensorProto.INT64),
               helper.make_node("Add", ["i64", "big"], ["i64big"]),
               helper.make_node("Expand", ["row", "shape"], ["ex"]),
               helper.make_node("Expand", ["x", "shape3"], ["ex3"])],
              [vi("x", TensorProto.INT64, [2, 3]), vi("f", TensorProto.FLOAT, [2, 3]), vi("i", TensorProto.INT32, [2, 3])],
              [vi("w", TensorProto.INT64, [2, 3]), vi("w2", TensorProto.INT64, [2, 3]), vi("x32", TensorProto.INT32, [2, 3]),
               vi("xf", TensorProto.FLOAT, [2, 3]), vi("fi", TensorProto.INT64, [2, 3]), vi("i64big", TensorProto.INT64, [2, 3]),
               vi("ex", TensorProto.INT64, [2, 3]), vi("ex3", TensorProto.INT64, [2, 2, 3])],
              [numpy_helper.from_array(np.array(0, np.int64), "zero"),
               numpy_helper.from_array(np.array(-(2**62) - 3, np.int64), "big"),
               numpy_helper.from_array(np.array([[BIG + 5, -(BIG + 5), 2**63 - 1]], np.int64), "row"),
               numpy_helper.from_array(np.array([2, 3], np.int64), "shape"),
               numpy_helper.from_array(np.array([2, 1, 1], np.int64), "shape3")])
    # the Expand of "row" along the batch: add x's rows so that the result is a graph tensor
    _, want, got = both(m, {"x": x, "f": f, "i": i32})
    names = ["Where(x > 0, x, c)", "Where(x > 0, c, x)", "Cast int64 -> int32 (wrapped)", "Cast int64 -> float",
             "Cast float -> int64", "Cast int32 -> int64, + c", "Expand of an int64 constant", "Expand of an int64 tensor"]
    for name, w, o in zip(names, want, got):
        same(name, w, o)


def test_where_int_condition():
    c = np.array([[0, 3, -(2**40)], [BIG + 1, 0, 1]], np.int64)
    x = np.array([[BIG + 1, 2, 3], [4, 5, -(BIG + 3)]], np.int64)
    m = model([helper.make_node("Cast", ["c"], ["cb"], to=TensorProto.BOOL),
               helper.make_node("Where", ["cb", "x", "neg"], ["w"])],
              [vi("c", TensorProto.INT64, [2, 3]), vi("x", TensorProto.INT64, [2, 3])],
              [vi("w", TensorProto.INT64, [2, 3])],
              [numpy_helper.from_array(np.array([-(BIG + 1), 0, BIG + 3], np.int64), "neg")])
    _, want, got = both(m, {"c": c, "x": x})
    same("Where(Cast(int64 -> bool), x, v)", want[0], got[0])


def test_onehot():
    idx = np.array([[0, 3, -1], [2, -4, 1]], np.int64)
    m = model([helper.make_node("OneHot", ["idx", "depth", "values"], ["y"], axis=-1),
               helper.make_node("OneHot", ["idx", "depth", "fvalues"], ["yf"], axis=1)],
              [vi("idx", TensorProto.INT64, [2, 3])],
              [vi("y", TensorProto.INT64, [2, 3, 4]), vi("yf", TensorProto.FLOAT, [2, 4, 3])],
              [numpy_helper.from_array(np.array(4, np.int64), "depth"),
               numpy_helper.from_array(np.array([-(BIG + 1), 2**62 + 3], np.int64), "values"),
               numpy_helper.from_array(np.array([0.5, 2.0], np.float32), "fvalues")])
    _, want, got = both(m, {"idx": idx})
    same("OneHot with int64 values", want[0], got[0])
    same("OneHot with float values", want[1], got[1])


EDGES = np.array([-(2**63), 2**63 - 1, -1, 0, 2**62 + 12345, -(BIG + 3), 0x5555555555555555, 300], np.int64)


def test_bitwise():
    y = np.array([-1, -(2**63) + 7, 2**63 - 1, BIG + 1, 0x0F0F0F0F0F0F0F0F, -2, 0x7A7A7A7A00000001, 44], np.int64)
    s = np.array([0, 1, 63, 64, 5, 33, 2, 62], np.int64)
    small = np.array([1, 2, 3, 255, 7, 0, 1, 9], np.uint64)
    U64 = TensorProto.UINT64
    m = model([helper.make_node("BitwiseAnd", ["x", "y"], ["and"]),
               helper.make_node("BitwiseOr", ["x", "y"], ["or"]),
               helper.make_node("BitwiseXor", ["x", "y"], ["xor"]),
               helper.make_node("BitwiseNot", ["x"], ["not"]),
               helper.make_node("Cast", ["x"], ["xu"], to=U64),
               helper.make_node("Cast", ["s"], ["su"], to=U64),
               helper.make_node("BitwiseNot", ["xu"], ["notu"]),
               helper.make_node("BitShift", ["xu", "su"], ["left"], direction="LEFT"),
               helper.make_node("BitShift", ["xu", "su"], ["right"], direction="RIGHT"),
               helper.make_node("BitShift", ["small", "su"], ["left_small"], direction="LEFT"),
               helper.make_node("BitwiseXor", ["xu", "mask"], ["xoru"])],
              [vi("x", TensorProto.INT64, [8]), vi("y", TensorProto.INT64, [8]), vi("s", TensorProto.INT64, [8]),
               vi("small", U64, [8])],
              [vi(n, TensorProto.INT64, [8]) for n in ("and", "or", "xor", "not")] +
              [vi(n, U64, [8]) for n in ("notu", "left", "right", "left_small", "xoru")],
              [numpy_helper.from_array(np.array([2**64 - 1, 2**63 + 5, 1, 2**53 + 1, 0, 2**63, 7, 2**64 - 2**40], np.uint64), "mask")],
              opset=18)
    _, want, got = both(m, {"x": EDGES, "y": y, "s": s, "small": small})
    for name, w, o in zip(("BitwiseAnd int64", "BitwiseOr int64", "BitwiseXor int64", "BitwiseNot int64", "BitwiseNot uint64",
                           "BitShift LEFT uint64", "BitShift RIGHT uint64", "BitShift LEFT of a uint64 input",
                           "BitwiseXor with a uint64 initializer past 2^63"), want, got):
        same(name, w, o)


def test_variadic():
    x = np.array([BIG + 1, -(2**62) - 1, 2**62 + 3, -5], np.int64)
    y = np.array([BIG, -(2**62), 2**62 + 5, -(BIG + 1)], np.int64)
    m = model([helper.make_node("Max", ["x", "y"], ["max"]),
               helper.make_node("Min", ["x", "y", "c"], ["min"])],
              [vi("x", TensorProto.INT64, [4]), vi("y", TensorProto.INT64, [4])],
              [vi(n, TensorProto.INT64, [4]) for n in ("max", "min")],
              [numpy_helper.from_array(np.array([BIG + 3], np.int64), "c")])
    _, want, got = both(m, {"x": x, "y": y})
    for name, w, o in zip(("Max of int64 tensors", "Min of int64 tensors and a constant"), want, got):
        same(name, w, o)


U64_EDGES = np.array([2**64 - 1, 2**63 + 5, 2**63, 7, 2**63 - 1, 0, 2**64 - 2**40, 3], np.uint64)


def test_uint64():
    """uint64 values past 2^63 (held in i64 as their bits) read unsigned."""
    y = np.array([2, 2**63 + 5, 2**64 - 1, 2**63 + 1, 2**63, 5, 3, 2**64 - 2], np.uint64)
    U64 = TensorProto.UINT64
    ops = ["Div", "Mod", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Equal", "Max", "Min"]
    nodes = [helper.make_node(op, ["x", "y"], [op.lower()]) for op in ops]
    nodes += [helper.make_node("Cast", ["x"], ["f"], to=TensorProto.FLOAT),
              helper.make_node("Cast", ["x"], ["d"], to=TensorProto.DOUBLE),
              helper.make_node("Cast", ["x"], ["i"], to=TensorProto.INT64),
              helper.make_node("Cast", ["x"], ["i32"], to=TensorProto.INT32),
              helper.make_node("Div", ["x", "c"], ["divc"]),
              helper.make_node("Less", ["c", "x"], ["lessc"]),
              helper.make_node("Max", ["x", "y", "c"], ["max3"]),
              helper.make_node("Reshape", ["x", "shape"], ["xr"]),
              helper.make_node("Reshape", ["y", "shape"], ["yr"]),
              helper.make_node("Greater", ["xr", "yr"], ["greater_moved"])]
    outs = [vi(op.lower(), TensorProto.BOOL if op in ("Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Equal") else U64, [8])
            for op in ops]
    outs += [vi("f", TensorProto.FLOAT, [8]), vi("d", TensorProto.DOUBLE, [8]), vi("i", TensorProto.INT64, [8]),
             vi("i32", TensorProto.INT32, [8]), vi("divc", U64, [8]), vi("lessc", TensorProto.BOOL, [8]),
             vi("max3", U64, [8]), vi("greater_moved", TensorProto.BOOL, [2, 4])]
    inits = [numpy_helper.from_array(np.array([2**63 + 3], np.uint64), "c"),
             numpy_helper.from_array(np.array([2, 4], np.int64), "shape")]
    m = model(nodes, [vi("x", U64, [8]), vi("y", U64, [8])], outs, inits, opset=13)
    g, want, got = both(m, {"x": U64_EDGES, "y": y})
    check(g.tensor("x").dtype == np.int64, "a uint64 input is an i64 graph tensor (its bits)")
    names = [f"{op} of uint64 past 2^63" for op in ops] + ["Cast uint64 -> float", "Cast uint64 -> double",
                                                          "Cast uint64 -> int64 (its bits)", "Cast uint64 -> int32 (wrapped)",
                                                          "Div by a uint64 initializer past 2^63", "Less of a uint64 initializer",
                                                          "Max of uint64 tensors and an initializer",
                                                          "Greater of uint64 tensors after a Reshape"]
    for name, w, o in zip(names, want, got):
        same(name, w, o)


def test_uint64_folds():
    """uint64 constants past 2^63 folded at import: unsigned, as onnxruntime."""
    U64 = TensorProto.UINT64
    a = numpy_helper.from_array(np.array([2**64 - 1, 2**63 + 5, 6, 2**63], np.uint64), "a")
    b = numpy_helper.from_array(np.array([2, 2**63 + 6, 2**63, 3], np.uint64), "b")
    for op in ("Div", "Mod", "Min", "Max", "Less", "Greater"):
        out_t = TensorProto.BOOL if op in ("Less", "Greater") else U64
        nodes = [helper.make_node(op, ["a", "b"], ["k"])]
        if out_t == U64:
            nodes.append(helper.make_node("Add", ["r", "k"], ["y"]))
        else:
            nodes.append(helper.make_node("And", ["r", "k"], ["y"]))
        m = model(nodes, [vi("r", out_t, [4])], [vi("y", out_t, [4])], [a, b], opset=13)
        r = np.zeros(4, np.uint64) if out_t == U64 else np.ones(4, bool)
        try:
            _, want, got = both(m, {"r": r})
            same(f"{op} of uint64 constants past 2^63, folded", want[0], got[0])
        except Exception as e:
            check(False, f"{op} of uint64 constants, folded: {type(e).__name__}: {e}")


def test_uint32():
    """uint32 inputs take every uint32 value and wrap mod 2^32."""
    U32 = TensorProto.UINT32
    x = np.array([4294967295, 2**31, 0, 7, 2**31 - 1, 4294967290], np.uint32)
    y = np.array([1, 2**31, 5, 4294967295, 1, 10], np.uint32)
    m = model([helper.make_node("Add", ["x", "y"], ["add"]),
               helper.make_node("Sub", ["x", "y"], ["sub"]),
               helper.make_node("Mul", ["x", "y"], ["mul"]),
               helper.make_node("Div", ["x", "y"], ["div"]),
               helper.make_node("Less", ["x", "y"], ["less"]),
               helper.make_node("Greater", ["x", "y"], ["greater"]),
               helper.make_node("Max", ["x", "y"], ["max"]),
               helper.make_node("Cast", ["x"], ["f"], to=TensorProto.FLOAT),
               helper.make_node("Cast", ["x"], ["i32"], to=TensorProto.INT32),
               helper.make_node("Cast", ["x"], ["i64"], to=TensorProto.INT64),
               helper.make_node("BitwiseNot", ["x"], ["not"]),
               helper.make_node("Identity", ["x"], ["same"])],
              [vi("x", U32, [6]), vi("y", U32, [6])],
              [vi(n, U32, [6]) for n in ("add", "sub", "mul", "div")] +
              [vi(n, TensorProto.BOOL, [6]) for n in ("less", "greater")] +
              [vi("max", U32, [6]), vi("f", TensorProto.FLOAT, [6]), vi("i32", TensorProto.INT32, [6]),
               vi("i64", TensorProto.INT64, [6]), vi("not", U32, [6]), vi("same", U32, [6])], opset=18)
    g, want, got = both(m, {"x": x, "y": y})
    check(g.tensor("x").dtype == np.int64, "a uint32 input is an i64 graph tensor")
    names = ["Add of uint32 (wraps)", "Sub of uint32 (wraps)", "Mul of uint32 (wraps)", "Div of uint32", "Less of uint32",
             "Greater of uint32", "Max of uint32", "Cast uint32 -> float", "Cast uint32 -> int32 (wrapped)",
             "Cast uint32 -> int64", "BitwiseNot of uint32", "a uint32 input returned as it is"]
    for name, w, o in zip(names, want, got):
        same(name, w, o)
    path = tempfile.mktemp(suffix=".onnx")
    onnx.save(m, path)
    try:
        ts.inference_model(ts.Graph.from_onnx(path), ts.Options())(x=np.array([-1, 0, 0, 0, 0, 0], np.int64), y=y)
        msg = ""
    except ts.TensorscopeError as e:
        msg = str(e)
    check("'x'" in msg and "-1" in msg and "4294967295" in msg, f"a uint32 input fed -1 is refused, naming its range: {msg}")


def test_narrow_casts():
    i32 = np.array([-1, 300, -(2**31), 65535, -32769, 128, 2**31 - 1, -129], np.int32)
    types = {"int8": TensorProto.INT8, "int16": TensorProto.INT16, "uint8": TensorProto.UINT8, "uint16": TensorProto.UINT16,
             "uint32": TensorProto.UINT32, "uint64": TensorProto.UINT64}
    nodes = [helper.make_node("Cast", ["x"], ["x_" + n], to=t) for n, t in types.items()]
    nodes += [helper.make_node("Cast", ["i"], ["i_" + n], to=t) for n, t in types.items()]
    m = model(nodes, [vi("x", TensorProto.INT64, [8]), vi("i", TensorProto.INT32, [8])],
              [vi("x_" + n, t, [8]) for n, t in types.items()] + [vi("i_" + n, t, [8]) for n, t in types.items()])
    _, want, got = both(m, {"x": EDGES, "i": i32})
    names = [f"Cast int64 -> {n}" for n in types] + [f"Cast int32 -> {n}" for n in types]
    for name, w, o in zip(names, want, got):
        same(name, w, o)


def test_folds():
    """Each fold on its own model: its result added to a fed zero vector
    (so that a graph op reads it), against onnxruntime's."""
    I64 = TensorProto.INT64

    def const(name, v):
        return numpy_helper.from_array(np.array(v, np.int64), name)
    inits = [const("c1", [2**62 + 1]), const("c2", [2**61 + 3]), const("c3", [-(BIG + 5)]), const("four", [4]),
             const("three", [3]), const("seven", [7]), const("min", [-(2**63)]), const("start", 2**62 + 1),
             const("limit", 2**62 + 7), const("delta", 2), const("three1", [3]), const("c300", [300, -129, 2**40 + 255]),
             const("axis0", 0), const("cbig", [2**62 + 1, BIG + 1, -(2**62) + 3])]
    node = helper.make_node
    cases = [("Add of two int64 constants", [node("Add", ["c1", "c2"], ["k"])], 1),
             ("Sub of int64 constants", [node("Sub", ["c3", "c1"], ["k"])], 1),
             ("Mul of int64 constants (wrapping)", [node("Mul", ["c1", "four"], ["k"])], 1),
             ("Div of int64 constants", [node("Div", ["c1", "three"], ["k"])], 1),
             ("Mod of int64 constants", [node("Mod", ["c3", "seven"], ["k"])], 1),
             ("Neg and Abs of int64 constants, -INT64_MIN",
              [node("Neg", ["c3"], ["n"]), node("Abs", ["c3"], ["a"]), node("Neg", ["min"], ["m"]),
               node("Concat", ["n", "a", "m"], ["k"], axis=0)], 3),
             ("Max of three int64 constants", [node("Max", ["c1", "c2", "c3"], ["k"])], 1),
             ("CumSum of int64 constants", [node("CumSum", ["cbig", "axis0"], ["k"])], 3),
             ("Range from 2^62+1 to 2^62+7 by 2", [node("Range", ["start", "limit", "delta"], ["k"])], 3),
             ("ConstantOfShape of 2^62+1",
              [node("ConstantOfShape", ["three1"], ["k"], value=numpy_helper.from_array(np.array([2**62 + 1], np.int64)))], 3),
             ("Cast of int64 constants to int8 and back",
              [node("Cast", ["c300"], ["c8"], to=TensorProto.INT8), node("Cast", ["c8"], ["k"], to=I64)], 3)]
    for name, nodes, n in cases:
        used = {i for nd in nodes for i in nd.input}
        m = model(nodes + [node("Add", ["r", "k"], ["y"])], [vi("r", I64, [n])], [vi("y", I64, [n])],
                  [t for t in inits if t.name in used])
        try:
            _, want, got = both(m, {"r": np.zeros(n, np.int64)})
            same(name + ", folded", want[0], got[0])
        except Exception as e:
            check(False, f"{name}, folded: {type(e).__name__}: {e}")


I64 = TensorProto.INT64
MAX64 = 2**63 - 1
# values f32 (or double) would round or saturate, the ends of int64 among them
X = np.array([[2**62 + 1, -(2**62) - 3, MAX64, 5], [-7, BIG + 1, -(2**63), BIG + 2], [3, -(BIG + 1), 2**62 + 5, 0]], np.int64)


def ints(**arrays):
    return [numpy_helper.from_array(np.array(v, np.int64), k) for k, v in arrays.items()]


def inferred(nodes, inputs, names, inits, opset=18):
    """model() whose outputs `names` take the types and shapes ONNX's shape inference gives them."""
    g = helper.make_graph(nodes, "g", inputs, [], initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    infos = {v.name: v for v in onnx.shape_inference.infer_shapes(m).graph.value_info}
    return model(nodes, inputs, [infos[n] for n in names], inits, opset)


def test_movers():
    node = helper.make_node
    d = np.array([2**62 + 1, -(2**62) - 1, MAX64, -(2**63), BIG + 1, -(BIG + 1), 2**61 + 3, 7,
                  BIG + 3, 2**62 + 9, -5, 2**40 + 1, -(2**62) - 9, 11, BIG + 5, -(BIG + 7)], np.int64).reshape(1, 4, 2, 2)
    nodes = [node("Pad", ["x", "pads", "pv"], ["pad_c"], mode="constant"),
             node("Pad", ["x", "pads"], ["pad_0"]),
             node("Pad", ["x", "pads2"], ["pad_e"], mode="edge"),
             node("Pad", ["x", "pads2"], ["pad_r"], mode="reflect"),
             node("Tile", ["x", "reps"], ["tile"]),
             node("Gather", ["x", "gidx"], ["gather"], axis=1),
             node("GatherElements", ["x", "gi"], ["gather_el"], axis=1),
             node("GatherND", ["x", "ndi"], ["gather_nd"]),
             node("ScatterElements", ["x", "si", "su"], ["scatter_el"], axis=1),
             node("ScatterND", ["x", "ndrow", "ndu"], ["scatter_nd"]),
             node("Split", ["x", "split"], ["split0", "split1"], axis=1),
             node("Unsqueeze", ["x", "ax0"], ["unsq"]),
             node("Squeeze", ["unsq", "ax0"], ["sq"]),
             node("Identity", ["x"], ["ident"]),
             node("Trilu", ["x"], ["triu"]),
             node("Trilu", ["x", "one"], ["tril"], upper=0),
             node("Compress", ["x", "cond"], ["compress"], axis=0),
             node("Slice", ["x", "st", "en", "sax", "steps"], ["slice"])]
    names = [n.output[0] for n in nodes] + ["split1"]
    names = [n for n in names if n != "split0"] + ["split0"]
    inits = ints(pads=[1, 0, 0, 2], pv=2**62 + 7, pads2=[1, 2, 1, 2], reps=[2, 1], gidx=[3, 0, 3],
                 gi=[[3, 0], [2, 2], [0, 1]], ndi=[[0, 2], [1, 2], [2, 0]], si=[[0, 3], [1, 2], [3, 1]],
                 su=[[-(2**63), BIG + 9], [2**62 + 11, -1], [MAX64, -(BIG + 3)]], ndrow=[[1]],
                 ndu=[[MAX64 - 1, -(2**63) + 1, BIG + 11, -(BIG + 11)]], split=[1, 3], ax0=[0], one=1,
                 st=[3], en=[-5], sax=[1], steps=[-2])
    inits.append(numpy_helper.from_array(np.array([True, False, True]), "cond"))
    m = inferred(nodes, [vi("x", I64, [3, 4])], names, inits)
    _, want, got = both(m, {"x": X})
    for name, w, o in zip(names, want, got):
        same(name + " of int64", w, o)
    # DepthToSpace and SpaceToDepth (onnxruntime has no int64 ones): against ONNX's reference
    m = inferred([node("DepthToSpace", ["d"], ["d2s"], blocksize=2), node("DepthToSpace", ["d"], ["crd"], blocksize=2, mode="CRD"),
                  node("SpaceToDepth", ["d2s"], ["s2d"], blocksize=2)], [vi("d", I64, [1, 4, 2, 2])], ["d2s", "crd", "s2d"], [])
    got = ts.inference_model(ts.Graph.from_onnx(save(m)), ts.Options())(d=d)
    for name, w, o in zip(["DepthToSpace", "DepthToSpace CRD", "SpaceToDepth"], reference(m, {"d": d}), got):
        same(name + " of int64", w, o, "ONNX's reference")
    # the Scatter reductions, each combining int64 values exactly (a position written twice)
    reds = ["add", "mul", "max", "min"]
    m = inferred([node("ScatterElements", ["x", "si", "su"], ["r_" + r], axis=1, reduction=r) for r in reds],
                 [vi("x", I64, [3, 4])], ["r_" + r for r in reds],
                 ints(si=[[0, 0], [1, 3], [2, 2]], su=[[3, 2**61 + 1], [-(2**40), 7], [-1, BIG + 1]]))
    _, want, got = both(m, {"x": X})
    for r, w, o in zip(reds, want, got):
        same(f"ScatterElements reduction={r} of int64", w, o)
    # TensorScatter (opset 24): a cache of int64 values written at fed write indices, linear and circular
    past = X[:2, :, None].repeat(2, axis=2)  # [2, 4, 2]
    upd = np.array([[[MAX64, -(2**63)], [BIG + 1, -(BIG + 1)]], [[2**62 + 3, 7], [-(2**62) - 5, BIG + 9]]], np.int64)
    m = inferred([node("TensorScatter", ["past", "upd", "wi"], ["lin"]), node("TensorScatter", ["past", "upd", "wi"], ["circ"], mode="circular")],
                 [vi("past", I64, [2, 4, 2]), vi("upd", I64, [2, 2, 2]), vi("wi", I64, [2])], ["lin", "circ"], [], opset=24)
    _, want, got = both(m, {"past": past, "upd": upd, "wi": np.array([2, 1], np.int64)})
    for name, w, o in zip(["TensorScatter linear", "TensorScatter circular"], want, got):
        same(name + " of int64", w, o)
    # ScatterND at indices the graph computes (fed, through an Add), reduction none and add
    upd = np.array([[MAX64 - 2, 2**62 + 3, -(BIG + 1), 7], [1, -(2**63), BIG + 3, 2**61 + 1]], np.int64)
    for red, rows in (("none", [[2], [0]]), ("add", [[2], [2]])):
        m = inferred([node("Add", ["i", "zero"], ["ic"]), node("ScatterND", ["x", "ic", "u"], ["y"], reduction=red)],
                     [vi("x", I64, [3, 4]), vi("i", I64, [2, 1]), vi("u", I64, [2, 4])], ["y"], ints(zero=0))
        _, want, got = both(m, {"x": X, "i": np.array(rows, np.int64), "u": upd})
        same(f"ScatterND reduction={red} at computed indices of int64", want[0], got[0])
    # Resize nearest (onnxruntime has no int64 Resize): int32 values past 2^24
    x32 = np.array([[2**24 + 1, -(2**24) - 3, 2**31 - 1, 5], [-7, 2**30 + 1, -(2**31), 2**25 + 1]], np.int32)
    m = inferred([node("Resize", ["x", "", "scales"], ["y"], mode="nearest")], [vi("x", TensorProto.INT32, [2, 4])],
                 ["y"], [numpy_helper.from_array(np.array([2.0, 1.5], np.float32), "scales")])
    _, want, got = both(m, {"x": x32})
    same("Resize nearest of int32 past 2^24", want[0], got[0])


def reference(m, feeds):
    """ONNX's reference implementation (onnx.reference: numpy's int64 arithmetic)."""
    from onnx.reference import ReferenceEvaluator
    return ReferenceEvaluator(m).run(None, feeds)


def exact_mean(x, axis):
    """The mean of each line along axis, exactly, truncated toward zero."""
    def line(v):
        s, n = sum(int(e) for e in v), len(v)
        return (abs(s) // n) * (1 if s >= 0 else -1)
    return np.apply_along_axis(line, axis, x).astype(np.int64)


def test_reductions():
    node = helper.make_node
    ops = ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare", "ReduceL1"]
    nodes = [node(op, ["x", "ax1"], [op], keepdims=0) for op in ops]
    nodes += [node(op, ["x"], [op + "_all"], keepdims=1) for op in ("ReduceSum", "ReduceMax", "ReduceProd")]
    nodes += [node("ReduceMean", ["x", "ax1"], ["ReduceMean"], keepdims=0), node("ReduceMean", ["x", "ax0"], ["ReduceMean0"], keepdims=1)]
    names = [n.output[0] for n in nodes]
    m = inferred(nodes, [vi("x", I64, [3, 4])], names, ints(ax1=[1], ax0=[0]))
    g = ts.Graph.from_onnx(save(m))
    got = ts.inference_model(g, ts.Options())(x=X)
    want = reference(m, {"x": X})
    for name, w, o in list(zip(names, want, got))[:-2]:
        same(name + " of int64 (wrapping)", w, o, "ONNX's reference")
    same("ReduceMean of int64 over axis 1", exact_mean(X, 1), got[-2], "the exact mean toward zero")
    same("ReduceMean of int64 over axis 0", exact_mean(X, 0).reshape(1, 4), got[-1], "the exact mean toward zero")
    # where onnxruntime's double sums are exact (below 2^53, no overflow) it agrees
    small = np.array([[-7, 1, 1, 2**20], [3, -(2**25), 5, 9], [2**21 + 3, 2, -2, 0]], np.int64)
    _, want, got = both(m, {"x": small})
    for name, w, o in zip(names, want, got):
        same(name + " of int64 below 2^53, as onnxruntime", w, o)
    # L2, LogSum and LogSumExp as onnxruntime computes them (in double: int64 sums compensated, LogSumExp the maximum plus
    # the log of its count), truncated and saturated into the type: past 2^24 and 2^53, where f32 would round them
    cases = [("ReduceL2", [[2**40 + 1, 2**20, 0, 0], [2**30 + 1, 0, 0, 0], [MAX64, MAX64, 1, 0], [40, 2, 5, 7], [-3000, 4, 0, 1]]),
             ("ReduceLogSum", [[24154950, 3, 0, 0], [-5, 2, 0, 1], [0, 0, 0, 0], [2**60 + 1, 3, BIG + 1, 1], [BIG + 7, 2**62 + 1, 5, 9]]),
             ("ReduceLogSumExp", [[2**30 + 1, 5, 0, 0], [2**60 + 2**30 + 1, 7, 0, 0], [1, 1, 0, 0], [MAX64, 0, MAX64, 1], [-5, 7, 0, 1]])]
    for op, v in cases:
        m = inferred([node(op, ["x", "ax1"], ["y"], keepdims=0), node(op, ["x", "ax0"], ["y0"], keepdims=1)], [vi("x", I64, [5, 4])],
                     ["y", "y0"], ints(ax1=[1], ax0=[0]))
        _, want, got = both(m, {"x": np.array(v, np.int64)})
        for name, w, o in zip([" over axis 1", " over axis 0"], want, got):
            same(op + " of int64 past 2^24 and 2^53" + name, w, o)
        m = inferred([node(op, ["x", "ax1"], ["y"], keepdims=0)], [vi("x", TensorProto.INT32, [2, 4])], ["y"], ints(ax1=[1]))
        v32 = np.array({"ReduceL2": [[2**30 + 1, 5, 0, 0], [2**31 - 1, 2**31 - 1, 0, 0]], "ReduceLogSum": [[24154950, 3, 0, 0], [-5, 2, 0, 0]],
                        "ReduceLogSumExp": [[2**30 + 1, 5, 0, 0], [1, 1, 0, 0]]}[op], np.int32)
        _, want, got = both(m, {"x": v32})
        same(op + " of int32 past 2^24", want[0], got[0])
    # ArgMax, ArgMin, TopK: values past 2^53 that differ by 1
    a = np.array([[BIG + 1, BIG + 2, BIG + 3, BIG + 2], [-(BIG + 2), -(BIG + 1), -(BIG + 2), MAX64], [2**62 + 1, 2**62, 2**62 + 1, -(2**63)]], np.int64)
    m = inferred([node("ArgMax", ["x"], ["amax"], axis=1), node("ArgMin", ["x"], ["amin"], axis=1, keepdims=0),
               node("ArgMax", ["x"], ["amax_last"], axis=1, select_last_index=1),
               node("TopK", ["x", "k"], ["top_v", "top_i"], axis=1),
               node("TopK", ["x", "k"], ["low_v", "low_i"], axis=1, largest=0)],
              [vi("x", I64, [3, 4])], ["amax", "amin", "amax_last", "top_v", "top_i", "low_v", "low_i"], ints(k=[3]))
    _, want, got = both(m, {"x": a})
    for name, w, o in zip(["ArgMax", "ArgMin", "ArgMax select_last_index", "TopK values", "TopK indices", "TopK smallest values",
                           "TopK smallest indices"], want, got):
        same(name + " of int64 past 2^53", w, o)
    ties = np.array([[-(2**63), -(2**63), 5, -(2**63)]], np.int64)  # the lowest value taken twice: a position taken stays out
    m = inferred([node("TopK", ["x", "k"], ["v", "i"], axis=1)], [vi("x", I64, [1, 4])], ["v", "i"], ints(k=[4]))
    _, want, got = both(m, {"x": ties})
    for name, w, o in zip(["TopK of INT64_MIN ties, values", "TopK of INT64_MIN ties, indices"], want, got):
        same(name, w, o)


def test_elementwise():
    node = helper.make_node
    nodes = [node("Abs", ["x"], ["abs"]), node("Neg", ["x"], ["neg"]), node("Sign", ["x"], ["sign"]),
             node("Relu", ["x"], ["relu"]), node("Clip", ["x", "lo", "hi"], ["clip"]), node("Clip", ["x", "", "hi"], ["clip_hi"])]
    names = [n.output[0] for n in nodes]
    m = inferred(nodes, [vi("x", I64, [3, 4])], names, ints(lo=-(BIG + 1), hi=2**62 + 2))
    _, want, got = both(m, {"x": X})
    for name, w, o in zip(names, want, got):
        same(name + " of int64", w, o)
    # Pow by constant whole exponents (onnxruntime's integer power wraps, as numpy's)
    m = inferred([node("Pow", ["x", "three"], ["cube"]), node("Pow", ["x", "two"], ["square"]), node("Pow", ["x", "zero"], ["ones"])],
                 [vi("x", I64, [3, 4])], ["cube", "square", "ones"],
                 ints(three=3, zero=0) + [numpy_helper.from_array(np.array(2.0, np.float32), "two")])
    _, want, got = both(m, {"x": X})
    for name, w, o in zip(["Pow x^3", "Pow x^2.0", "Pow x^0"], want, got):
        same(name + " of int64 (wrapping)", w, o)
    # MatMul of int64 tensors (2-D, batched with broadcast batch dims, 1-D), wrapping as onnxruntime's
    w = np.array([[3, -1], [2**40 + 1, 7], [-(BIG + 1), 1]], np.int64)
    m = inferred([node("MatMul", ["x3", "w"], ["mm"]), node("MatMul", ["xb", "w"], ["mm_batched"]), node("MatMul", ["v", "w"], ["mm_vec"]),
                  node("MatMul", ["x3", "v"], ["mm_mat_vec"])],
                 [vi("x3", I64, [2, 3]), vi("xb", I64, [2, 2, 3]), vi("v", I64, [3])], ["mm", "mm_batched", "mm_vec", "mm_mat_vec"],
                 [numpy_helper.from_array(w, "w")])
    feeds = {"x3": X[:2, :3].copy(), "xb": X[:, :3][[0, 1, 2, 0]].reshape(2, 2, 3), "v": X[2, 1:].copy()}
    _, want, got = both(m, feeds)
    for name, w_, o in zip(["MatMul", "MatMul batched", "MatMul of a vector", "MatMul by a vector"], want, got):
        same(name + " of int64 (wrapping)", w_, o)
    # ... past 2^26 products (formed in blocks of rows), batched: as onnxruntime's
    rng = np.random.default_rng(7)
    a, b = rng.integers(-(2**62), 2**62, (2, 210, 420), np.int64), rng.integers(-(2**62), 2**62, (420, 420), np.int64)
    m = inferred([node("MatMul", ["a", "b"], ["mm"])], [vi("a", I64, [2, 210, 420]), vi("b", I64, [420, 420])], ["mm"], [])
    _, want, got = both(m, {"a": a, "b": b})
    same("MatMul of int64 past 2^26 products (wrapping)", want[0], got[0])
    # Gemm of int64 (onnxruntime has none, ONNX's reference goes through double): numpy's int64 arithmetic
    A = np.array([[2**40 + 1, -3, 7], [2**62 + 1, 1, -(BIG + 1)]], np.int64)
    B = np.array([[3, -1], [2**20 + 1, 7], [-(BIG + 1), 1]], np.int64)
    C, C2 = np.array([BIG + 1, -(2**62)], np.int64), np.array([[1], [-(2**62)]], np.int64)
    m = inferred([node("Gemm", ["a", "b", "c"], ["gemm"]), node("Gemm", ["b", "a", "c2"], ["gemm_t"], transA=1, transB=1, alpha=3.0, beta=-2.0),
                  node("Gemm", ["a", "b"], ["gemm_ab"])],
                 [vi("a", I64, [2, 3]), vi("b", I64, [3, 2]), vi("c", I64, [2]), vi("c2", I64, [2, 1])], ["gemm", "gemm_t", "gemm_ab"], [])
    got = ts.inference_model(ts.Graph.from_onnx(save(m)), ts.Options())(a=A, b=B, c=C, c2=C2)
    for name, w, o in zip(["Gemm", "Gemm transposed, alpha 3, beta -2", "Gemm without C"], [A @ B + C, (B.T @ A.T) * 3 + C2 * -2, A @ B], got):
        same(name + " of int64 (wrapping)", w, o, "numpy's")
    # Einsum of int64 (a MatMul, a batched one, sums; onnxruntime's sums go through floats): ONNX's reference (numpy's einsum)
    m = inferred([node("Einsum", ["a", "b"], ["ein"], equation="ij,jk->ik"), node("Einsum", ["ab", "b"], ["ein_b"], equation="bij,jk->bki"),
                  node("Einsum", ["a"], ["ein_sum"], equation="ij->j"), node("Einsum", ["a", "b"], ["ein_rows"], equation="ij,jk->i")],
                 [vi("a", I64, [2, 3]), vi("b", I64, [3, 2]), vi("ab", I64, [2, 2, 3])], ["ein", "ein_b", "ein_sum", "ein_rows"], [])
    feeds = {"a": A, "b": B, "ab": np.stack([A, A[::-1]])}
    got = ts.inference_model(ts.Graph.from_onnx(save(m)), ts.Options())(**feeds)
    for name, w, o in zip(["Einsum ij,jk->ik", "Einsum bij,jk->bki", "Einsum ij->j", "Einsum ij,jk->i"], reference(m, feeds), got):
        same(name + " of int64 (wrapping)", w, o, "ONNX's reference")
    # CumProd (opset 26), wrapping as onnxruntime's
    nodes = [node("CumProd", ["x", "one"], ["cumprod"]), node("CumProd", ["x", "one"], ["cumprod_er"], exclusive=1, reverse=1)]
    g = helper.make_graph(nodes, "g", [vi("x", I64, [3, 4])], [], initializer=ints(one=1))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 26)])
    m.ir_version = 10
    infos = {v.name: v for v in onnx.shape_inference.infer_shapes(m).graph.value_info}
    m.graph.output.extend([infos["cumprod"], infos["cumprod_er"]])
    _, want, got = both(m, {"x": X})
    for name, w, o in zip(["CumProd", "CumProd exclusive reverse"], want, got):
        same(name + " of int64 (wrapping)", w, o)
    # PRelu (onnxruntime's int64 PRelu goes through floats): against ONNX's reference
    m = inferred([node("PRelu", ["x", "slope"], ["prelu"])], [vi("x", I64, [3, 4])], ["prelu"], ints(slope=[3, -1, 2**40, 1]))
    got = ts.inference_model(ts.Graph.from_onnx(save(m)), ts.Options())(x=X)
    same("PRelu of int64", reference(m, {"x": X})[0], got[0] if isinstance(got, (list, tuple)) else got, "ONNX's reference")
    # PRelu by a graph-tensor slope (fed), against ONNX's reference
    m = inferred([node("PRelu", ["x", "s"], ["prelu"])], [vi("x", I64, [3, 4]), vi("s", I64, [4])], ["prelu"], [])
    s = np.array([3, -(2**40) - 1, 2**20 + 1, -1], np.int64)
    got = ts.inference_model(ts.Graph.from_onnx(save(m)), ts.Options())(x=X, s=s)
    same("PRelu of int64 by a fed slope", reference(m, {"x": X, "s": s})[0], got[0] if isinstance(got, (list, tuple)) else got, "ONNX's reference")
    # Pow by a fed exponent >= 0: the wrapping integer power, numpy's int64 `**` (onnxruntime's goes through double)
    m = inferred([node("Pow", ["x", "e"], ["pow"])], [vi("x", I64, [3, 4]), vi("e", I64, [4])], ["pow"], [])
    e = np.array([3, 1, 2, 63], np.int64)
    x = X.copy()
    x[:, 3] = [3, -3, 2**31 + 1]  # 3^63 wraps, (2^31+1)^2 is 2^62 + 2^32 + 1 exactly
    got = ts.inference_model(ts.Graph.from_onnx(save(m)), ts.Options())(x=x, e=e)
    same("Pow of int64 by a fed exponent (wrapping)", x ** e, got[0] if isinstance(got, (list, tuple)) else got, "numpy's")
    # ... and by negative ones, small bases where onnxruntime's double power is exact: as onnxruntime
    base = np.array([[1, -1, -1, 2, -2, 0, 5, 2**62 + 1]], np.int64)
    neg = np.array([-1, -2, -3, -1, -3, -1, -2, -1], np.int64)
    for t, dt in ((I64, np.int64), (TensorProto.INT32, np.int32)):
        m = inferred([node("Pow", ["x", "e"], ["pow"])], [vi("x", t, [1, 8]), vi("e", I64, [8])], ["pow"], [])
        b = base if dt == np.int64 else np.array([[1, -1, -1, 2, -2, 0, 5, 2**30 + 1]], dt)
        _, want, got = both(m, {"x": b, "e": neg})
        same(f"Pow of {np.dtype(dt).name} by fed negative exponents", want[0], got[0])


def test_int_matmul_large():
    """A MatMul of int64 one row of which forms 2^27 products (f32 before,
    which onnxruntime's int64 MatMul is not): exactly, wrapping."""
    node = helper.make_node
    rng = np.random.default_rng(11)
    # MatMul: a [128, 1, 1024] x b [1024, 1024]: one row of a forms 128 x 1024 x 1024 = 2^27 products (b broadcast over the batch)
    a = rng.integers(-(2**62), 2**62, (128, 1, 1024), np.int64)
    b = rng.integers(-(2**40), 2**40, (1024, 1024), np.int64)
    a[0, 0, :4] = [MAX64, -(2**63), BIG + 1, -(BIG + 3)]
    m = inferred([node("MatMul", ["a", "b"], ["mm"])], [vi("a", I64, [128, 1, 1024]), vi("b", I64, [1024, 1024])], ["mm"], [])
    _, want, got = both(m, {"a": a, "b": b})
    same("MatMul of int64, a row of 2^27 products past 2^53 (wrapping)", want[0], got[0])


def test_int_gemm_einsum():
    """Gemm of integers with a fractional alpha and beta, and Einsum of
    integers with a label repeated within an operand, exactly as ONNX's
    reference computes them (f32 before)."""
    node = helper.make_node
    rng = np.random.default_rng(12)
    # Gemm with a fractional alpha and beta (onnxruntime has no integer Gemm): ONNX's reference, np.dot in the type, then double, astype
    A = rng.integers(-(2**31), 2**31, (3, 4), np.int64)
    B = rng.integers(-(2**30), 2**30, (4, 5), np.int64)
    C = rng.integers(-(2**60), 2**60, (5,), np.int64)
    A[0, 0], B[0, 0] = 2**31 + 1, 2**30 - 3  # a product of 2^61 + ..., which a float's 24 bits cannot hold
    m = inferred([node("Gemm", ["a", "b", "c"], ["g1"], alpha=0.5, beta=-1.25),
                  node("Gemm", ["at", "b", "c"], ["g2"], transA=1, alpha=0.75, beta=0.5),
                  node("Gemm", ["a", "b"], ["g3"], alpha=0.3)],
                 [vi("a", I64, [3, 4]), vi("at", I64, [4, 3]), vi("b", I64, [4, 5]), vi("c", I64, [5])], ["g1", "g2", "g3"], [])
    feeds = {"a": A, "at": A.T.copy(), "b": B, "c": C}
    got = ts.inference_model(ts.Graph.from_onnx(save(m)), ts.Options())(**feeds)
    for name, w, o in zip(["Gemm alpha 0.5 beta -1.25", "Gemm transA alpha 0.75 beta 0.5", "Gemm alpha 0.3 without C"], reference(m, feeds), got):
        same(name + " of int64", w, o, "ONNX's reference")
    # ... of int32, whose np.dot wraps to int32 before the double
    A32 = rng.integers(-(2**20), 2**20, (3, 4), np.int32)
    B32 = rng.integers(-(2**20), 2**20, (4, 5), np.int32)
    C32 = rng.integers(-(2**28), 2**28, (3, 1), np.int32)
    m = inferred([node("Gemm", ["a", "b", "c"], ["g"], alpha=0.25, beta=1.5)],
                 [vi("a", TensorProto.INT32, [3, 4]), vi("b", TensorProto.INT32, [4, 5]), vi("c", TensorProto.INT32, [3, 1])], ["g"], [])
    feeds = {"a": A32, "b": B32, "c": C32}
    got = ts.inference_model(ts.Graph.from_onnx(save(m)), ts.Options())(**feeds)
    same("Gemm alpha 0.25 beta 1.5 of int32 (the product wrapped to int32 first)", reference(m, feeds)[0],
         got[0] if isinstance(got, (list, tuple)) else got, "ONNX's reference")
    # Einsum with a label repeated within an operand (a diagonal): numpy's einsum in int64 (ONNX's reference)
    D = rng.integers(-(2**62), 2**62, (3, 3), np.int64)
    D[1, 1] = BIG + 1
    Xe = rng.integers(-(2**40), 2**40, (2, 2, 3), np.int64)
    Y = rng.integers(-(2**20), 2**20, (3, 4), np.int64)
    Z = rng.integers(-(2**62), 2**62, (2, 3, 4, 3), np.int64)
    m = inferred([node("Einsum", ["d"], ["diag"], equation="ii->i"), node("Einsum", ["d"], ["trace"], equation="ii"),
                  node("Einsum", ["x", "y"], ["diag_mm"], equation="iij,jk->ik"),
                  node("Einsum", ["z", "y"], ["diag_mid"], equation="bjcj,jc->cb")],
                 [vi("d", I64, [3, 3]), vi("x", I64, [2, 2, 3]), vi("y", I64, [3, 4]), vi("z", I64, [2, 3, 4, 3])],
                 ["diag", "trace", "diag_mm", "diag_mid"], [])
    feeds = {"d": D, "x": Xe, "y": Y, "z": Z}
    got = ts.inference_model(ts.Graph.from_onnx(save(m)), ts.Options())(**feeds)
    for name, w, o in zip(["Einsum ii->i", "Einsum ii", "Einsum iij,jk->ik", "Einsum bjcj,jc->cb"], reference(m, feeds), got):
        same(name + " of int64 (a diagonal, exactly)", w, o, "ONNX's reference")


def test_int_scatter_nd_large():
    """A ScatterND at indices the graph computes, of int32 data and updates
    whose index rows x slice elements pass 2^26 (f32 before): exactly, as
    ONNX's reference (onnxruntime 1.32's reduction add over this many
    elements drops some of a row's adds where two rows hit one position)."""
    node = helper.make_node
    # ScatterND at computed indices of int32 values past 2^24: 2 index rows x 2^25 + 8 slice elements (more than 2^26)
    inner = 2**25 + 8
    x = np.full((2, inner), 2**24 + 1, np.int32)
    x[1, ::3] = -(2**31)
    u = np.full((2, inner), 2**30 + 3, np.int32)
    u[0, 1::2] = 2**24 + 3
    for red, rows in (("none", [[1], [0]]), ("add", [[1], [1]])):
        m = inferred([node("Add", ["i", "zero"], ["ic"]), node("ScatterND", ["x", "ic", "u"], ["y"], reduction=red)],
                     [vi("x", TensorProto.INT32, [2, inner]), vi("i", I64, [2, 1]), vi("u", TensorProto.INT32, [2, inner])], ["y"], ints(zero=0))
        feeds = {"x": x, "i": np.array(rows, np.int64), "u": u}
        got = ts.inference_model(ts.Graph.from_onnx(save(m)), ts.Options())(**feeds)
        want = reference(m, feeds)[0]
        same(f"ScatterND reduction={red} at computed indices of int32, 2^26 + 16 update elements", want,
             got[0] if isinstance(got, (list, tuple)) else got, "ONNX's reference")
        del want, got


def test_float_exponents():
    """Pow of an integer base by a float exponent, onnxruntime's: std::pow
    in double cast to the base's type (INT64_MIN where it is NaN or out of
    range), by a fed float tensor and by constants (float and double, a
    fraction, a whole 4.0; a scalar 2.0 squares in int64, wrapping)."""
    node = helper.make_node
    x = np.array([[2**25 + 1, BIG + 1, 3, -8, 2**62], [2, 0, 7, 2**31 + 1, 10]], np.int64)
    e = np.array([1.0, 1.0, 0.5, 1 / 3, 1.0], np.float32)
    inits = [numpy_helper.from_array(np.array([1.0, 1.0, 2.5, 1 / 3, 0.5], np.float64), "cd"),
             numpy_helper.from_array(np.array(0.5, np.float32), "half"), numpy_helper.from_array(np.array(4.0, np.float32), "four"),
             numpy_helper.from_array(np.array(2.0, np.float32), "two")]
    names = ["fed", "double_consts", "by_half", "by_four", "by_two"]
    m = inferred([node("Pow", ["x", "e"], ["fed"]), node("Pow", ["x", "cd"], ["double_consts"]), node("Pow", ["x", "half"], ["by_half"]),
                  node("Pow", ["x", "four"], ["by_four"]), node("Pow", ["x", "two"], ["by_two"])],
                 [vi("x", I64, [2, 5]), vi("e", TensorProto.FLOAT, [5])], names, inits)
    _, want, got = both(m, {"x": x, "e": e})
    for name, w, o in zip(names, want, got):
        same(f"Pow of int64 by a float exponent ({name})", w, o)
    x32 = np.array([[2**25 + 1, 2**30 + 3, 3, -8, 2**31 - 1], [2, 0, 7, 46341, 10]], np.int32)
    m = inferred([node("Pow", ["x", "e"], ["fed"]), node("Pow", ["x", "cd"], ["double_consts"])],
                 [vi("x", TensorProto.INT32, [2, 5]), vi("e", TensorProto.FLOAT, [5])], ["fed", "double_consts"], inits[:1])
    _, want, got = both(m, {"x": x32, "e": np.array([1.0, 1.0, 0.5, 1 / 3, 1.5], np.float32)})
    for name, w, o in zip(["fed", "double_consts"], want, got):
        same(f"Pow of int32 by a float exponent ({name})", w, o)
    # a fed one-element exponent: 2 and 3 square and cube in the type, wrapping (onnxruntime's), others in double
    big = np.array([2**40 + 3, BIG + 1, -(2**31) - 5, 3], np.int64)
    for t, v in ((I64, big), (TensorProto.INT32, np.array([2**20 + 3, 46341, -(2**16) - 1, 3], np.int32))):
        m = inferred([node("Pow", ["x", "k"], ["y"])], [vi("x", t, [4]), vi("k", TensorProto.FLOAT, [1])], ["y"], [])
        for k in (2.0, 3.0, 2.5, 1.0):
            _, want, got = both(m, {"x": v, "k": np.array([k], np.float32)})
            same(f"Pow of {np.dtype(v.dtype).name} by a fed one-element exponent {k}", want[0], got[0])


def test_resize():
    """Resize linear and cubic of integers (onnxruntime has no int64 one):
    ONNX's reference, which interpolates in double (its cubic coefficients
    float32), sums the taps as numpy does and rounds half to even into the
    type, clipped: both axes, align_corners, an antialiased downscale over
    the axes attribute, tf_crop_and_resize's extrapolation."""
    node = helper.make_node
    x = np.array([[BIG + 1, -(BIG + 3), 2**62 + 5, 7, 2**40 + 1], [2**24 + 1, -7, MAX64, 3, -(2**63)], [5, BIG + 11, -(2**40), 1, 2**61 + 3],
                  [9, 2**53 + 5, 2**30 + 7, -(2**62), 11]], np.int64)
    x32 = np.array([[2**24 + 1, -(2**24) - 3, 2**31 - 1, 5, 3], [-7, 2**30 + 1, -(2**31), 2**25 + 1, 9], [1, 2**24 + 3, 3, 4, -5],
                    [2**31 - 2, 0, -(2**30), 7, 2**26 + 1]], np.int32)
    scales = numpy_helper.from_array(np.array([2.0, 1.5], np.float32), "scales")
    down = numpy_helper.from_array(np.array([0.6, 0.5], np.float32), "down")
    roi = numpy_helper.from_array(np.array([0.1, -0.2, 0.9, 1.2], np.float32), "roi")
    cases = [("linear", dict(mode="linear"), ["x", "", "scales"]), ("cubic", dict(mode="cubic"), ["x", "", "scales"]),
             ("linear align_corners", dict(mode="linear", coordinate_transformation_mode="align_corners"), ["x", "", "scales"]),
             ("cubic antialias, axes [1, 0]", dict(mode="cubic", antialias=1, axes=[1, 0], exclude_outside=1), ["x", "", "down"]),
             ("linear tf_crop_and_resize", dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=7.0),
              ["x", "roi", "scales"])]
    for t, v in ((I64, x), (TensorProto.INT32, x32)):
        for name, attrs, ins in cases:
            m = inferred([node("Resize", ins, ["y"], **attrs)], [vi("x", t, [4, 5])], ["y"], [scales, down, roi])
            got = ts.inference_model(ts.Graph.from_onnx(save(m)), ts.Options())(x=v)
            got = got[0] if isinstance(got, (list, tuple)) else got
            same(f"Resize {name} of {np.dtype(v.dtype).name} past 2^{53 if t == I64 else 24}", reference(m, {"x": v})[0], got, "ONNX's reference")


def test_widths_and_scalars():
    """A Concat of an int64 input and a small int64 constant (held in i32:
    joined in i64, not in f32), and full reductions to a scalar (shape ()
    as onnxruntime's, not [1])."""
    x = np.array([2**62 + 1, -(BIG + 3)], np.int64)
    small = numpy_helper.from_array(np.array([5, -2], np.int64), "small")
    m = model([helper.make_node("Concat", ["x", "small"], ["after"], axis=0),
               helper.make_node("Concat", ["small", "x"], ["before"], axis=0),
               helper.make_node("ReduceMax", ["x"], ["top"], keepdims=0),
               helper.make_node("ArgMin", ["x"], ["lowest"], keepdims=0)],
              [vi("x", TensorProto.INT64, [2])],
              [vi("after", TensorProto.INT64, [4]), vi("before", TensorProto.INT64, [4]),
               vi("top", TensorProto.INT64, []), vi("lowest", TensorProto.INT64, [])], [small])
    _, want, got = both(m, {"x": x})
    for name, w, g in zip(("after", "before", "top", "lowest"), want, got):
        same(f"widths: {name}", w, g)


def save(m):
    path = tempfile.mktemp(suffix=".onnx")
    onnx.save(m, path)
    return path


if __name__ == "__main__":
    for t in (test_inputs, test_gather_ids, test_constants, test_comparisons, test_where_cast_expand,
              test_where_int_condition, test_onehot, test_bitwise, test_variadic, test_uint64, test_uint64_folds, test_uint32,
              test_narrow_casts, test_folds, test_movers, test_reductions, test_elementwise, test_float_exponents, test_resize,
              test_widths_and_scalars, test_int_matmul_large, test_int_gemm_einsum, test_int_scatter_nd_large):
        try:
            t()
        except Exception as e:  # one failing model does not hide the others
            check(False, f"{t.__name__}: {type(e).__name__}: {e}")
    print(f"onnx_int64: {len(failures)} failure(s)")
    sys.exit(1 if failures else 0)
