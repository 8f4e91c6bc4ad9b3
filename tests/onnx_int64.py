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


def same(name, want, got):
    ok = got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)
    check(ok, f"{name}: {want.dtype}{list(want.shape)} equal to onnxruntime's")
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


if __name__ == "__main__":
    for t in (test_inputs, test_gather_ids, test_constants, test_comparisons, test_where_cast_expand,
              test_where_int_condition, test_onehot):
        try:
            t()
        except Exception as e:  # one failing model does not hide the others
            check(False, f"{t.__name__}: {type(e).__name__}: {e}")
    print(f"onnx_int64: {len(failures)} failure(s)")
    sys.exit(1 if failures else 0)
