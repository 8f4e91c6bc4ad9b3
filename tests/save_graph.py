"""save_graph.py -- `--save-graph FILE.onnx` and Model.save_graph checked
by independent readers (tests/test_save_graph.sh runs it): for the built-in
mlp, cnn and gpt training models, a training graph built in Python and
ONNX models imported for inference and for training, the file
passes onnx.checker.check_model (full check); every tensor name the model
has (`tensorscope names`) is a value of the file; the forward part (the
file cut at the loss by onnx.utils.Extractor) has only standard ops and
onnxruntime computes from the step's own inputs and the saved parameters
the loss, activations and (where the backward up to them is standard ops)
gradients tensorscope computed in that step (anchored and dumped as .npy). The imported model's inference graph is run whole by
onnxruntime and compared with tensorscope's outputs."""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

build = os.environ["TS_BUILD_DIR"]
exe = os.path.join(build, "tensorscope")
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL " + msg)


def run(args):
    p = subprocess.run([exe] + args, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise SystemExit(f"FAIL tensorscope {' '.join(args)}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p.stdout


def file_values(m):
    g = m.graph
    return {o for n in g.node for o in n.output} | {t.name for t in g.initializer} | {i.name for i in g.input}


def check_file(label, path, names):
    m = onnx.load(path)
    try:
        onnx.checker.check_model(m, full_check=True)
    except onnx.checker.ValidationError as e:
        fail(f"{label}: onnx.checker rejects {path}: {e}")
    domains = {o.domain: o.version for o in m.opset_import}
    if any(n.domain == "ai.tensorscope" for n in m.graph.node) and "ai.tensorscope" not in domains:
        fail(f"{label}: ai.tensorscope nodes without its opset_import")
    undocumented = [n.name for n in m.graph.node if " of " not in n.doc_string]
    if undocumented:
        fail(f"{label}: nodes without a doc_string saying whose they are: {undocumented[:5]}")
    infos = [v.name for v in m.graph.value_info]
    if len(infos) != len(set(infos)):
        fail(f"{label}: value_info repeats names")
    missing = sorted(set(names) - file_values(m))
    if missing:
        fail(f"{label}: {len(missing)} of {len(names)} tensor names are not in the file: {missing[:8]}")
    return m


def forward_part(label, m, inputs, outputs):
    """The file cut from the inputs to `outputs`: standard ops only."""
    ex = onnx.utils.Extractor(m)
    part = ex.extract_model(inputs, outputs)
    own = sorted({n.op_type for n in part.graph.node if n.domain not in ("", "ai.onnx")})
    if own:
        fail(f"{label}: the forward part has ops of another domain: {own}")
    return part


def compare(label, what, ours, theirs, rtol=2e-4, atol=2e-5):
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    if ours.shape != theirs.shape:
        fail(f"{label}: {what}: shape {theirs.shape} from onnxruntime, {ours.shape} from tensorscope")
        return
    if not np.allclose(ours, theirs, rtol=rtol, atol=atol):
        fail(f"{label}: {what}: onnxruntime differs from tensorscope by up to {np.max(np.abs(ours - theirs)):.3g}")
    else:
        print(f"ok {label}: {what} {list(ours.shape)} matches onnxruntime (max diff {np.max(np.abs(ours - theirs)) if ours.size else 0:.2g}, largest value {np.max(np.abs(ours)) if ours.size else 0:.2g})")


def builtin(label, model_flags, inputs, anchors, own_ok=None):
    """Trains one step with the graph saved before it, the inputs and
    `anchors` dumped; onnxruntime recomputes the anchors from the file."""
    with tempfile.TemporaryDirectory(dir=build) as d:
        path, dump = os.path.join(d, label + ".onnx"), os.path.join(d, "dump")
        names = [n for n in run(["names"] + model_flags).splitlines() if n and not n.startswith("#") and " -> " not in n]  # not the file's aliases
        flags = model_flags + ["--run-single-step", "--save-graph", path, "--dump-npy", dump]
        for a in inputs + anchors:
            flags += ["--anchor", a]
        run(["train"] + flags)
        m = check_file(label, path, names)
        saved = {}
        for line in open(os.path.join(dump, "order.txt")):
            f, name = line.rstrip("\n").split("\t")
            saved[name] = np.load(os.path.join(dump, f + ".npy"))
        part = forward_part(label, m, inputs, anchors)
        sess = ort.InferenceSession(part.SerializeToString(), providers=["CPUExecutionProvider"])
        feed = {}
        for i in sess.get_inputs():
            a = saved[i.name]
            feed[i.name] = a.reshape([d for d in i.shape]).astype(np.int32 if "int32" in i.type else np.float32)
        got = sess.run(anchors, feed)
        for name, value in zip(anchors, got):
            compare(label, name, saved[name].reshape(value.shape) if saved[name].size == value.size else saved[name], value)
        own = {n.op_type for n in m.graph.node if n.domain}
        if own_ok is not None and not own <= own_ok:
            fail(f"{label}: ops of our own domain beside the optimizer's: {sorted(own - own_ok)}")
        kinds = {(n.domain or "onnx") for n in m.graph.node}
        print(f"ok {label}: {len(m.graph.node)} nodes ({', '.join(sorted(kinds))}), {len(names)} names")


def imported_training():
    """An ONNX classifier of MNIST over activations the built-in models do
    not use, written with onnx.helper, trained one step by the CLI
    (--model FILE.onnx --loss cross_entropy) with its graph saved."""
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(a, n) for n, a in [
        ("conv.w", rng.normal(size=(2, 1, 3, 3)).astype(np.float32) * 0.5),
        ("fc1.w", rng.normal(size=(8, 2 * 28 * 28)).astype(np.float32) * 0.05), ("fc1.b", np.zeros(8, np.float32)),
        ("fc2.w", rng.normal(size=(10, 8)).astype(np.float32) * 0.05), ("fc2.b", np.zeros(10, np.float32)),
        ("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)), ("flat", np.array([0, -1], np.int64))]]
    act = [("Sin", {}), ("Cos", {}), ("LeakyRelu", {"alpha": 0.1}), ("Elu", {"alpha": 0.7}), ("Selu", {}),
           ("Softplus", {}), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}), ("HardSwish", {})]
    nodes = [helper.make_node("Pad", ["x", "pads"], ["padded"]),
             helper.make_node("Conv", ["padded", "conv.w"], ["c"]),
             helper.make_node("LeakyRelu", ["c"], ["c_act"], alpha=0.05),
             helper.make_node("Reshape", ["c_act", "flat"], ["f"]),
             helper.make_node("Gemm", ["f", "fc1.w", "fc1.b"], ["h0"], transB=1)]
    for i, (op, attrs) in enumerate(act):  # h_{i+1} = h_i + op(h_i): every activation's gradient reaches fc1
        nodes += [helper.make_node(op, [f"h{i}"], [f"a{i}"], **attrs), helper.make_node("Add", [f"h{i}", f"a{i}"], [f"h{i + 1}"])]
    k = len(act)  # and SiLU, Mul(h, Sigmoid(h)): one Silu op, exported as those two again
    nodes += [helper.make_node("Sigmoid", [f"h{k}"], ["silu_s"]), helper.make_node("Mul", [f"h{k}", "silu_s"], [f"a{k}"]),
              helper.make_node("Add", [f"h{k}", f"a{k}"], [f"h{k + 1}"])]
    nodes.append(helper.make_node("Gemm", [f"h{k + 1}", "fc2.w", "fc2.b"], ["logits"], transB=1))
    g = helper.make_graph(nodes, "activations", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 1, 28, 28])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [8, 10])], inits)
    with tempfile.TemporaryDirectory(dir=build) as d:
        path = os.path.join(d, "activations.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
        builtin("imported-training", ["--model", path, "--loss", "cross_entropy", "--batch-size", "8"], ["x", "labels"],
                ["loss", "Gradient___fc1.w", "Gradient___conv.w"], own_ok={"SGD", "Adam", "AdamW"})


def saved_against_ort(label, model, loss, grads, xv, lv):
    """A Python-built training model saved by Model.save_graph: standard
    ops but the optimizer's; onnxruntime's loss and the gradients `grads`
    (anchored) for inputs x and labels against one step of the model."""
    with tempfile.TemporaryDirectory(dir=build) as d:
        path = os.path.join(d, label + ".onnx")
        model.save_graph(path)
        ours_loss = float(np.asarray(model(xv, lv)).reshape(-1)[0])
        m = check_file(label, path, model.get_tensor_names())
        own = sorted({n.op_type for n in m.graph.node if n.domain})
        if own != ["SGD"]:
            fail(f"{label}: ops of our own domain beside the optimizer's: {own}")
        part = forward_part(label, m, ["x", "labels"], [loss.name] + grads)
        got = ort.InferenceSession(part.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": xv, "labels": lv})
        compare(label, "loss", np.float32(ours_loss), got[0])
        for n, v in zip(grads, got[1:]):
            compare(label, n, model.get_anchored_tensor(n).reshape(v.shape), v)


def python_graph():
    """A training graph built in Python over ops the built-in models do not
    use, saved by Model.save_graph; its gradients recomputed by onnxruntime."""
    import tensorscope as ts

    rng = np.random.default_rng(7)
    g = ts.Graph()
    x, labels = g.input("x", "f32", [4, 2, 3, 3]), g.input("labels", "i32", [4])
    scale, w1, w2 = g.param("scale", [2, 1, 1]), g.param("w1", [2, 6]), g.param("w2", [3, 5])
    pooled = g.flatten(g.global_avg_pool2d(g.mul(x, scale)))
    h = g.matmul(pooled, w1)
    c = g.concat([g.erf(h), g.pow(h, 2.0)], 1)
    r = g.reduce_mean(g.reshape(c, [4, 3, 4]), [2])
    s = g.reduce_sum(g.reshape(c, [4, 3, 4]), [2])
    loss = g.cross_entropy_ignore(g.matmul(g.add(r, g.scale(s, 0.1)), w2), labels, -100)
    g.load_state_dict({"scale": rng.normal(size=(2, 1, 1)).astype(np.float32) + 1,
                       "w1": rng.normal(size=(2, 6)).astype(np.float32), "w2": rng.normal(size=(3, 5)).astype(np.float32)})
    model = ts.training_model(g, optimizer=ts.SGD(lr=0.1, momentum=0.9), loss=loss)
    grads = ["Gradient___scale", "Gradient___w1", "Gradient___w2"]
    for n in grads:
        model.anchor_tensor(n)
    xv, lv = rng.normal(size=(4, 2, 3, 3)).astype(np.float32), rng.integers(0, 5, size=4).astype(np.int32)
    lv[1] = -100  # ignored: the mean is over the other three
    saved_against_ort("python", model, loss, grads, xv, lv)


def python_rms_norm():
    """RMSNorm with and without its weight, and a Gelu after it, saved by
    Model.save_graph as standard ops; onnxruntime recomputes the loss and
    the gradients of the weight, the layer before and the input."""
    import tensorscope as ts

    rng = np.random.default_rng(11)
    g = ts.Graph()
    x, labels = g.input("x", "f32", [4, 3, 8]), g.input("labels", "i32", [12])
    w0, w1, w2 = g.param("w0", [8, 8]), g.param("norm.weight", [8]), g.param("w2", [8, 5])
    h = g.gelu(g.rms_norm(g.matmul_batched(x, g.reshape(w0, [1, 8, 8])), w1, 1e-5))
    h = g.rms_norm(h, None, 1e-3)
    loss = g.cross_entropy(g.matmul(g.reshape(h, [12, 8]), w2), labels)
    g.load_state_dict({"w0": rng.normal(size=(8, 8)).astype(np.float32), "norm.weight": rng.normal(size=8).astype(np.float32) + 1,
                       "w2": rng.normal(size=(8, 5)).astype(np.float32)})
    model = ts.training_model(g, optimizer=ts.SGD(lr=0.1), loss=loss)
    grads = ["Gradient___w0", "Gradient___norm.weight", "Gradient___w2"]
    for n in grads:
        model.anchor_tensor(n)
    xv, lv = rng.normal(size=(4, 3, 8)).astype(np.float32), rng.integers(0, 5, size=12).astype(np.int32)
    saved_against_ort("rms_norm", model, loss, grads, xv, lv)
    print("ok   rms_norm: standard ops, onnxruntime's loss and gradients are tensorscope's")


def imported():
    """A small CNN classifier written with onnx.helper, imported, run for
    inference; its saved graph is run whole by onnxruntime."""
    import tensorscope as ts

    rng = np.random.default_rng(5)
    w1 = numpy_helper.from_array(rng.normal(size=(4, 1, 3, 3)).astype(np.float32), "conv.w")
    b1 = numpy_helper.from_array(rng.normal(size=(4,)).astype(np.float32), "conv.b")
    w2 = numpy_helper.from_array(rng.normal(size=(36, 5)).astype(np.float32) * 0.3, "fc.w")
    b2 = numpy_helper.from_array(rng.normal(size=(5,)).astype(np.float32), "fc.b")
    shape = numpy_helper.from_array(np.array([0, -1], np.int64), "flat")
    nodes = [helper.make_node("Conv", ["x", "conv.w", "conv.b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Reshape", ["p", "flat"], ["f"]),
             helper.make_node("Gemm", ["f", "fc.w", "fc.b"], ["logits"]),
             helper.make_node("Softmax", ["logits"], ["probs"], axis=1)]
    g = helper.make_graph(nodes, "small_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 1, 6, 6])],
                          [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [2, 5])], [w1, b1, w2, b2, shape])
    src = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with tempfile.TemporaryDirectory(dir=build) as d:
        src_path, out = os.path.join(d, "small_cnn.onnx"), os.path.join(d, "saved.onnx")
        onnx.save(src, src_path)
        graph = ts.Graph.from_onnx(src_path)
        model = ts.inference_model(graph)
        x = rng.normal(size=(2, 1, 6, 6)).astype(np.float32)
        ours = model(x)
        ours = ours[0] if isinstance(ours, (list, tuple)) else ours
        if isinstance(ours, dict):
            ours = next(iter(ours.values()))
        model.save_graph(out)
        m = check_file("imported", out, model.get_tensor_names())
        own = sorted({n.op_type for n in m.graph.node if n.domain})
        if own:
            fail(f"imported: an inference graph with ops of another domain: {own}")
        sess = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
        got = sess.run(None, {sess.get_inputs()[0].name: x})[0]
        compare("imported", sess.get_outputs()[0].name, ours, got)


def imported_typed():
    """A model of bool and int64 tensors (a bool input and initializer,
    comparisons, And, Not, Where, int64 arithmetic and comparisons, uint64
    values past 2^63 divided and compared, Casts between them), imported
    and saved: the file's inputs, initializers, value_info and outputs are
    ONNX's BOOL and INT64 where the tensors are (not float 1/0), it passes
    onnx.checker, and onnxruntime runs it whole to tensorscope's outputs."""
    import tensorscope as ts

    B, I64, U64, F = TensorProto.BOOL, TensorProto.INT64, TensorProto.UINT64, TensorProto.FLOAT
    vi = helper.make_tensor_value_info
    inits = [numpy_helper.from_array(np.array([True, False, True], bool), "keep"),
             numpy_helper.from_array(np.array([2**40 + 3], np.int64), "big"),
             numpy_helper.from_array(np.array([0.5], np.float32), "half"),
             numpy_helper.from_array(np.array([3], np.int64), "three")]
    nodes = [helper.make_node("Greater", ["x", "half"], ["gt"]),
             helper.make_node("And", ["gt", "mask"], ["both"]),
             helper.make_node("Or", ["both", "keep"], ["any"]),
             helper.make_node("Not", ["any"], ["none"]),
             helper.make_node("Where", ["both", "x", "half"], ["chosen"]),
             helper.make_node("Add", ["ids", "big"], ["shifted"]),
             helper.make_node("Div", ["shifted", "three"], ["third"]),
             helper.make_node("Less", ["ids", "three"], ["small"]),
             helper.make_node("Equal", ["small", "mask"], ["same"]),
             helper.make_node("Cast", ["u"], ["uf"], to=F),
             helper.make_node("Div", ["u", "u2"], ["udiv"]),
             helper.make_node("Less", ["u", "u2"], ["uless"]),
             helper.make_node("Cast", ["mask"], ["maskf"], to=F)]
    outs = [vi("none", B, [2, 3]), vi("chosen", F, [2, 3]), vi("third", I64, [2, 3]), vi("same", B, [2, 3]),
            vi("uf", F, [3]), vi("udiv", U64, [3]), vi("uless", B, [3]), vi("maskf", F, [2, 3])]
    g = helper.make_graph(nodes, "typed", [vi("x", F, [2, 3]), vi("mask", B, [2, 3]), vi("ids", I64, [2, 3]),
                                           vi("u", U64, [3]), vi("u2", U64, [3])], outs, inits)
    src = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    rng = np.random.default_rng(7)
    feeds = {"x": rng.random((2, 3)).astype(np.float32), "mask": np.array([[True, False, True], [False, True, True]]),
             "ids": np.array([[1, 5, -7], [2**50, 3, 0]], np.int64),
             "u": np.array([2**64 - 1, 2**63 + 5, 7], np.uint64), "u2": np.array([2, 2**63 + 6, 3], np.uint64)}
    with tempfile.TemporaryDirectory(dir=build) as d:
        src_path, out = os.path.join(d, "typed.onnx"), os.path.join(d, "saved.onnx")
        onnx.save(src, src_path)
        model = ts.inference_model(ts.Graph.from_onnx(src_path))
        ours = model(**feeds)
        model.save_graph(out)
        m = check_file("imported bool/int64", out, model.get_tensor_names())
        types = {v.name: v.type.tensor_type.elem_type for v in list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info)}
        types.update({t.name: t.data_type for t in m.graph.initializer})
        for name, want in (("mask", B), ("ids", I64), ("keep", B), ("Greater:0", B), ("And:0", B), ("Not:0", B), ("Less:0", B),
                           ("Add:0", I64)):
            if types.get(name) != want:
                fail(f"imported bool/int64: '{name}' is ONNX type {types.get(name)} in the file, not {want}")
        own = sorted({n.op_type for n in m.graph.node if n.domain})
        if own:
            fail(f"imported bool/int64: ops of another domain: {own}")
        sess = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
        names = {i.name for i in sess.get_inputs()}
        got = sess.run(None, {k: (v.view(np.int64) if v.dtype == np.uint64 else v) for k, v in feeds.items() if k in names})
        for o, theirs, mine in zip(sess.get_outputs(), got, ours):
            mine = np.asarray(mine)
            if mine.dtype == np.uint64:
                theirs = np.asarray(theirs).view(np.uint64) if theirs.dtype == np.int64 else theirs
            if theirs.dtype != mine.dtype and not (mine.dtype == np.uint64 and theirs.dtype == np.uint64):
                fail(f"imported bool/int64: output {o.name} is {theirs.dtype} from onnxruntime, {mine.dtype} from tensorscope")
            elif not np.array_equal(theirs, mine):
                fail(f"imported bool/int64: output {o.name}: onnxruntime {theirs!r}, tensorscope {mine!r}")
        print("ok   imported bool/int64: saved with ONNX's bool and int64 types, run by onnxruntime to tensorscope's outputs")


# backward ops with a standard form are standard ops: onnxruntime recomputes
# the gradients the forward and those give
builtin("mlp", ["--model", "mlp", "--batch-size", "8"], ["x", "labels"],
        ["loss", "fc1/MatMul:0", "LogSoftmax:0", "Gradient___fc1.weight", "Gradient___fc2.bias", "Gradient___Relu:0"])
builtin("cnn", ["--model", "cnn", "--batch-size", "4"], ["x", "labels"], ["loss", "Relu:0", "MaxPool2d:1", "Gradient___fc3.weight", "Gradient___bn2.weight", "Gradient___conv2.weight", "Gradient___conv1.weight"])
builtin("gpt", ["--model", "gpt", "--batch-size", "2", "--layers", "1", "--embd", "32", "--heads", "2", "--block-size", "16"],
        ["tokens", "targets"], ["loss", "Gradient___logits", "Gradient___ln_f.weight", "Gradient___blocks.0.mlp.fc.weight",
                                "Gradient___blocks.0.attn.qkv.weight", "Gradient___wte.weight", "Gradient___wpe.weight"])
python_graph()
python_rms_norm()
imported()
imported_typed()
imported_training()
if failures:
    print(f"save_graph: {len(failures)} failure(s)")
    sys.exit(1)
print("save_graph: PASS")
