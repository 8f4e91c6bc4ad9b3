"""onnx_unrolled.py -- ONNX programs whose indices or iterations the graph
computes but the import can lay out statically, against onnxruntime.

- ScatterND whose indices the graph computes (Cast of a graph input): the
  reductions none (duplicate rows: the last write stays, as onnxruntime
  writes them in order) and add, a 1-D and a 2-D index over 3-D data,
  negative indices; the output against onnxruntime's, the gradients of the
  data and the updates (initializers, so parameters) against their
  closed form: a position's gradient goes to the data where no row writes
  it (none) or always (add), and to the update that stays there.
- A Loop without a trip count whose condition the body computes from the
  iteration number (the dynamo exporter's EmbeddingBag), building a
  sequence (SequenceEmpty, SequenceInsert of a row of a parameter times
  the input), then SequenceConstruct, SequenceInsert at a position,
  SequenceErase, SequenceAt, SequenceLength and ConcatFromSequence with and
  without a new axis; SplitToSequence by a list, by a scalar and into
  single slices: the outputs against onnxruntime's, the parameter's
  gradient against its closed form.
- MaxPool's Indices output of a 3-D window (strides, padding, ceil_mode)
  against onnxruntime's.

Each case prints its line; exits 1 on any failure.
Usage: onnx_unrolled.py [--only REGEX]
"""
import os
import re
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import tensorscope as ts

RTOL = 1e-5
ort.set_default_logger_severity(3)  # its shape inference's warning on ceil_mode's last window, which the run drops as PyTorch does


def save(nodes, inputs, outputs, inits, workdir, name, opset=18):
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    path = os.path.join(workdir, f"{name}.onnx")
    onnx.save(model, path)
    return path


def close(got, want, what):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return f"{what}: shape {got.shape}, expected {want.shape}"
    err = float(np.max(np.abs(got - want) / (1 + np.abs(want)), initial=0.0))
    return None if err <= RTOL else f"{what}: off by {err:.3g}"


def run_both(path, feeds, params, loss_of):
    """tensorscope's output 0 (anchored) and the gradients of `params`,
    the loss being output 1; onnxruntime's outputs."""
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    g = ts.Graph.from_onnx(path, {k: v.shape for k, v in feeds.items()})
    opts = ts.Options().output_mode("final")
    opts.anchor_tensor("out", g.outputs[0].name, "final")
    for i, p in enumerate(params):
        opts.anchor_tensor(f"g{i}", "Gradient___" + p, "final")
    model = ts.training_model(g, opts, optimizer=ts.SGD(lr=0.0), loss=g.outputs[loss_of])
    model(**feeds)
    got = model.get_anchored_tensor("out")
    grads = [model.get_anchored_tensor(f"g{i}") for i in range(len(params))]
    g.close()
    return got, grads, want


def scatter_nd(workdir, reduction, data_shape, idx, name):
    """ScatterND(data, Cast(p), updates) with p a float graph input holding
    `idx`; loss = sum(y * r)."""
    rng = np.random.default_rng(len(name))
    idx = np.asarray(idx, np.int64)
    q = idx.shape[-1]
    upd_shape = idx.shape[:-1] + tuple(data_shape[q:])
    data = rng.standard_normal(data_shape).astype(np.float32)
    upd = rng.standard_normal(upd_shape).astype(np.float32)
    r = rng.standard_normal(data_shape).astype(np.float32)
    nodes = [helper.make_node("Cast", ["p"], ["i"], to=TP.INT64),
             helper.make_node("ScatterND", ["data", "i", "upd"], ["y"], **({"reduction": reduction} if reduction != "none" else {})),
             helper.make_node("Mul", ["y", "r"], ["yr"]),
             helper.make_node("ReduceSum", ["yr"], ["loss"], keepdims=0)]
    path = save(nodes, [helper.make_tensor_value_info("p", TP.FLOAT, idx.shape), helper.make_tensor_value_info("r", TP.FLOAT, r.shape)],
                [helper.make_tensor_value_info("y", TP.FLOAT, None), helper.make_tensor_value_info("loss", TP.FLOAT, None)],
                [numpy_helper.from_array(data, "data"), numpy_helper.from_array(upd, "upd")], workdir, name)
    got, (gd, gu), want = run_both(path, {"p": idx.astype(np.float32), "r": r}, ["data", "upd"], 1)
    # the closed form: which update row stays at each indexed position
    M = data_shape[:q]
    flat = [int(np.ravel_multi_index(tuple(int(v) % M[j] for j, v in enumerate(row)), M)) for row in idx.reshape(-1, q)]
    rf = r.reshape(int(np.prod(M)), -1)
    want_gd = rf.copy()
    want_gu = np.zeros((len(flat), rf.shape[1]), np.float32)
    for k, f in enumerate(flat):
        if reduction == "none":
            want_gd[f] = 0
            if f not in flat[k + 1:]:
                want_gu[k] = rf[f]
        else:
            want_gu[k] = rf[f]
    return (close(got, want[0], "output") or close(gd.reshape(want_gd.shape), want_gd, "data's gradient")
            or close(gu.reshape(want_gu.shape), want_gu, "updates' gradient"))


def scatter_nd_outside(workdir, data_shape, idx, name):
    """A computed index outside its dim (onnxruntime refuses it): an error
    at run, never a write elsewhere."""
    idx = np.asarray(idx, np.float32)
    nodes = [helper.make_node("Cast", ["p"], ["i"], to=TP.INT64), helper.make_node("ScatterND", ["data", "i", "upd"], ["y"])]
    upd = np.ones(idx.shape[:-1] + tuple(data_shape[idx.shape[-1]:]), np.float32)
    path = save(nodes, [helper.make_tensor_value_info("p", TP.FLOAT, idx.shape)], [helper.make_tensor_value_info("y", TP.FLOAT, None)],
                [numpy_helper.from_array(np.zeros(data_shape, np.float32), "data"), numpy_helper.from_array(upd, "upd")], workdir, name)
    g = ts.Graph.from_onnx(path, {"p": idx.shape})
    try:
        y = ts.inference_model(g)(p=idx)
        return f"no error at run; the output {np.asarray(y).ravel().tolist()}"
    except ts.errors.InvalidArgumentError as e:
        return None if "is not an index" in str(e) else f"another error: {e}"
    finally:
        g.close()


def scatter_nd_too_large(workdir):
    """Computed indices whose comparison would pass the limit (2^13 rows
    by 2^14 positions): refused at import, saying so."""
    rows, m = 1 << 13, 1 << 14
    nodes = [helper.make_node("Cast", ["p"], ["i"], to=TP.INT64), helper.make_node("ScatterND", ["data", "i", "upd"], ["y"])]
    path = save(nodes, [helper.make_tensor_value_info("p", TP.FLOAT, (rows, 1))], [helper.make_tensor_value_info("y", TP.FLOAT, None)],
                [numpy_helper.from_array(np.zeros((m,), np.float32), "data"), numpy_helper.from_array(np.ones((rows,), np.float32), "upd")],
                workdir, "scatter_nd_too_large")
    try:
        ts.Graph.from_onnx(path, {"p": (rows, 1)}).close()
        return "imported"
    except ts.errors.UnsupportedError as e:
        return None if "comparisons" in str(e) and "constants" in str(e) else f"another error: {e}"


def loop_sequence(workdir):
    """y = ConcatFromSequence over i < 3 of (w[i] * x), built by a Loop whose
    condition the body computes; then the other sequence ops on it."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    x = rng.standard_normal((1, 4)).astype(np.float32)
    r = rng.standard_normal((3, 4)).astype(np.float32)
    one = numpy_helper.from_array(np.array(1, np.int64), "one")
    three = numpy_helper.from_array(np.array(3, np.int64), "three")
    body = helper.make_graph(
        [helper.make_node("Unsqueeze", ["i", "axis0"], ["i1"]),
         helper.make_node("Add", ["i1", "one1"], ["i2"]),
         helper.make_node("Slice", ["w", "i1", "i2"], ["row"]),
         helper.make_node("Mul", ["row", "x"], ["part"]),
         helper.make_node("SequenceInsert", ["seq_in", "part"], ["seq_out"]),
         helper.make_node("Add", ["i", "one"], ["next"]),
         helper.make_node("Less", ["next", "three"], ["cond_out"])],
        "body",
        [helper.make_tensor_value_info("i", TP.INT64, []), helper.make_tensor_value_info("cond_in", TP.BOOL, []),
         helper.make_tensor_sequence_value_info("seq_in", TP.FLOAT, None)],
        [helper.make_tensor_value_info("cond_out", TP.BOOL, []), helper.make_tensor_sequence_value_info("seq_out", TP.FLOAT, None)],
        [numpy_helper.from_array(np.array([0], np.int64), "axis0"), numpy_helper.from_array(np.array([1], np.int64), "one1")])
    nodes = [helper.make_node("SequenceEmpty", [], ["empty"], dtype=TP.FLOAT),
             helper.make_node("Loop", ["", "true", "empty"], ["rows"], body=body),
             helper.make_node("ConcatFromSequence", ["rows"], ["y"], axis=0),
             helper.make_node("Mul", ["y", "r"], ["yr"]),
             helper.make_node("ReduceSum", ["yr"], ["loss"], keepdims=0),
             # the other sequence ops, on the rows: [row2, x, row0] stacked, and the length
             helper.make_node("SequenceErase", ["rows", "one"], ["two"]),
             helper.make_node("SequenceAt", ["two", "minus1"], ["last"]),
             helper.make_node("SequenceConstruct", ["last", "x"], ["pair"]),
             helper.make_node("SequenceAt", ["rows", "zero"], ["first"]),
             helper.make_node("SequenceInsert", ["pair", "first", "two_i"], ["three_rows"]),
             helper.make_node("ConcatFromSequence", ["three_rows"], ["stacked"], axis=1, new_axis=1),
             helper.make_node("SequenceLength", ["three_rows"], ["n"])]
    path = save(nodes, [helper.make_tensor_value_info("x", TP.FLOAT, x.shape), helper.make_tensor_value_info("r", TP.FLOAT, r.shape)],
                [helper.make_tensor_value_info("y", TP.FLOAT, None), helper.make_tensor_value_info("loss", TP.FLOAT, None),
                 helper.make_tensor_value_info("stacked", TP.FLOAT, None), helper.make_tensor_value_info("n", TP.INT64, None)],
                [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array(True), "true"), one, three,
                 numpy_helper.from_array(np.array(-1, np.int64), "minus1"), numpy_helper.from_array(np.array(0, np.int64), "zero"),
                 numpy_helper.from_array(np.array(2, np.int64), "two_i")], workdir, "loop_sequence")
    feeds = {"x": x, "r": r}
    got, (gw,), want = run_both(path, feeds, ["w"], 1)
    g = ts.Graph.from_onnx(path, {k: v.shape for k, v in feeds.items()})
    outs = ts.inference_model(g)(**feeds)
    g.close()
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    return (close(got, want[0], "output") or close(outs[2], want[2], "stacked") or close(np.reshape(outs[3], np.shape(want[3])), want[3], "SequenceLength")
            or close(gw, r * x, "w's gradient"))


def split_to_sequence(workdir):
    """SplitToSequence of a parameter w [3,5]: by a list [1,2] along axis 0
    (its second part times r is the loss: w's gradient is r in rows 1 and
    2, zeros in row 0), by a scalar 2 along axis 1 (parts 2, 2 and 1, the
    last read), into single rows without keepdims (the last read)."""
    rng = np.random.default_rng(11)
    w = rng.standard_normal((3, 5)).astype(np.float32)
    r = rng.standard_normal((2, 5)).astype(np.float32)
    nodes = [helper.make_node("SplitToSequence", ["w", "sizes"], ["rows"], axis=0),
             helper.make_node("SequenceAt", ["rows", "one"], ["second"]),
             helper.make_node("Mul", ["second", "r"], ["sr"]),
             helper.make_node("ReduceSum", ["sr"], ["loss"], keepdims=0),
             helper.make_node("SplitToSequence", ["w", "two"], ["cols"], axis=1),
             helper.make_node("SequenceAt", ["cols", "minus1"], ["last_cols"]),
             helper.make_node("SplitToSequence", ["w"], ["singles"], axis=0, keepdims=0),
             helper.make_node("SequenceAt", ["singles", "minus1"], ["last_row"])]
    path = save(nodes, [helper.make_tensor_value_info("r", TP.FLOAT, r.shape)],
                [helper.make_tensor_value_info("second", TP.FLOAT, None), helper.make_tensor_value_info("loss", TP.FLOAT, None),
                 helper.make_tensor_value_info("last_cols", TP.FLOAT, None), helper.make_tensor_value_info("last_row", TP.FLOAT, None)],
                [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array([1, 2], np.int64), "sizes"),
                 numpy_helper.from_array(np.array(1, np.int64), "one"), numpy_helper.from_array(np.array(2, np.int64), "two"),
                 numpy_helper.from_array(np.array(-1, np.int64), "minus1")], workdir, "split_to_sequence")
    got, (gw,), want = run_both(path, {"r": r}, ["w"], 1)
    g = ts.Graph.from_onnx(path, {"r": r.shape})
    outs = ts.inference_model(g)(r=r)
    g.close()
    return (close(got, want[0], "output") or close(outs[2], want[2], "the scalar split's last part")
            or close(outs[3], want[3], "the last single row") or close(gw, np.concatenate([np.zeros((1, 5), np.float32), r]), "w's gradient"))


def max_pool3d_indices(workdir, name, **attrs):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 5, 6, 7)).astype(np.float32)
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], **attrs)
    path = save([node], [helper.make_tensor_value_info("x", TP.FLOAT, x.shape)],
                [helper.make_tensor_value_info("y", TP.FLOAT, None), helper.make_tensor_value_info("i", TP.INT64, None)], [], workdir, name)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    g = ts.Graph.from_onnx(path, {"x": x.shape})
    y, i = ts.inference_model(g)(x=x)
    g.close()
    if not np.array_equal(np.asarray(i), want[1]):
        return f"indices differ from onnxruntime's at {int(np.sum(np.asarray(i) != want[1]))} of {want[1].size}"
    return close(y, want[0], "output")


def cases(workdir):
    return {
        "scatter_nd_none_1d": lambda: scatter_nd(workdir, "none", (6, 3), [[4], [1], [-1], [1]], "scatter_nd_none_1d"),
        "scatter_nd_add_1d": lambda: scatter_nd(workdir, "add", (6, 3), [[4], [1], [-1], [1]], "scatter_nd_add_1d"),
        "scatter_nd_none_2d": lambda: scatter_nd(workdir, "none", (3, 4, 2), [[[0, 1], [2, 3]], [[-1, 0], [0, 1]]], "scatter_nd_none_2d"),
        "scatter_nd_add_2d": lambda: scatter_nd(workdir, "add", (3, 4, 2), [[[0, 1], [2, 3]], [[-1, 0], [0, 1]]], "scatter_nd_add_2d"),
        "scatter_nd_outside_1d": lambda: scatter_nd_outside(workdir, (6, 3), [[4], [-7]], "scatter_nd_outside_1d"),
        "scatter_nd_outside_2d": lambda: scatter_nd_outside(workdir, (3, 4, 2), [[0, 4], [1, 1]], "scatter_nd_outside_2d"),
        "scatter_nd_too_large": lambda: scatter_nd_too_large(workdir),
        "loop_sequence": lambda: loop_sequence(workdir),
        "split_to_sequence": lambda: split_to_sequence(workdir),
        "max_pool3d_indices": lambda: max_pool3d_indices(workdir, "max_pool3d_indices", kernel_shape=[2, 3, 2], strides=[2, 2, 3]),
        "max_pool3d_indices_pads_ceil": lambda: max_pool3d_indices(workdir, "max_pool3d_indices_pads_ceil", kernel_shape=[3, 2, 3],
                                                                   strides=[2, 2, 2], pads=[1, 0, 1, 1, 1, 1], ceil_mode=1),
    }


def main():
    only = re.compile(sys.argv[sys.argv.index("--only") + 1]) if "--only" in sys.argv else None
    failed = 0
    with tempfile.TemporaryDirectory() as workdir:
        for name, fn in cases(workdir).items():
            if only and not only.search(name):
                continue
            try:
                why = fn()
            except Exception as e:  # one case's failure never stops the others
                why = " ".join(f"{type(e).__name__}: {e}".split())[:300]
            failed += why is not None
            print(f"{'ok  ' if why is None else 'FAIL'}  {name}{': ' + why if why else ''}")
    print(f"onnx_unrolled: {failed} failed" if failed else "onnx_unrolled: all passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
