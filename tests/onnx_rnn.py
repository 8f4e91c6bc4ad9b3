"""ONNX's LSTM and GRU imported by tensorscope (src/import/onnx_rnn.c).

Each variant the importer supports (directions forward, reverse and
bidirectional; layouts 0 and 1; with and without the bias B, the initial
states, LSTM's peepholes P; GRU's linear_before_reset 0 and 1; the outputs
Y, Y_h, Y_c in any subset; Relu as an activation) is written as a one-node
ONNX model whose W, R, B and P are initializers, imported at its input
shapes and checked:
  forward    every output against a NumPy reference of the ONNX operator
             equations written here (float64), |ts - ref| <= 1e-4 (1 + |ref|)
  gradients  the gradient of loss = sum(Y * K) (K random, fed) with respect
             to every initializer, as tensorscope computes it, against
             central finite differences of the reference loss
  names      every gate of every step is a tensor `<node>/t<k>/<gate>`
Then what is refused says so (clip, lengths other than the sequence's, an
activation not available), and a long sequence's size and import time are
printed (T=100, hidden 128).
"""
import os
import sys
import tempfile
import time
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import tensorscope as ts

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rnn_checks import FWD_RTOL, GRAD_RTOL, check, finish, has_tensor  # noqa: E402

OPSET = 17


# ------------------------------------------------------- NumPy reference

def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


ACTS = {"Sigmoid": sigmoid, "Tanh": np.tanh, "Relu": lambda x: np.maximum(x, 0.0)}


def reference(op, X, W, R, B=None, h0=None, c0=None, P=None, direction="forward", layout=0,
              lbr=0, activations=None):
    """Y, Y_h, Y_c (None for GRU) of the ONNX operator, in float64.

    LSTM (gates i, o, f, c in W, R, B):
      i = f(Xt Wi' + H Ri' + Pi*C + Wbi + Rbi)   f = f(Xt Wf' + H Rf' + Pf*C + Wbf + Rbf)
      g = g(Xt Wc' + H Rc' + Wbc + Rbc)           C' = f*C + i*g
      o = f(Xt Wo' + H Ro' + Po*C' + Wbo + Rbo)   H' = o*h(C')
    GRU (gates z, r, h):
      z = f(Xt Wz' + H Rz' + Wbz + Rbz)   r = f(Xt Wr' + H Rr' + Wbr + Rbr)
      n = g(Xt Wh' + (r*H) Rh' + Rbh + Wbh)        linear_before_reset 0
      n = g(Xt Wh' + r*(H Rh' + Rbh) + Wbh)        linear_before_reset 1
      H' = (1-z)*n + z*H
    """
    lstm = op == "LSTM"
    G = 4 if lstm else 3
    X = X.astype(np.float64)
    if layout == 1:
        X = X.transpose(1, 0, 2)
    T, Bn, _ = X.shape
    D, H = W.shape[0], R.shape[2]
    if h0 is not None and layout == 1:
        h0 = h0.transpose(1, 0, 2)
    if c0 is not None and layout == 1:
        c0 = c0.transpose(1, 0, 2)
    n_act = 3 if lstm else 2
    acts = activations or (["Sigmoid", "Tanh", "Tanh"][:n_act] * D)
    Y = np.zeros((T, D, Bn, H))
    Yh = np.zeros((D, Bn, H))
    Yc = np.zeros((D, Bn, H))
    for d in range(D):
        f, g = ACTS[acts[d * n_act]], ACTS[acts[d * n_act + 1]]
        hact = ACTS[acts[d * n_act + 2]] if lstm else None
        w, r = W[d].astype(np.float64), R[d].astype(np.float64)
        b = B[d].astype(np.float64) if B is not None else np.zeros(2 * G * H)
        wb, rb = b[:G * H], b[G * H:]
        h = h0[d].astype(np.float64) if h0 is not None else np.zeros((Bn, H))
        c = c0[d].astype(np.float64) if c0 is not None else np.zeros((Bn, H))
        p = P[d].astype(np.float64) if P is not None else np.zeros(3 * H)
        reverse = direction == "reverse" or d == 1
        for t in (range(T - 1, -1, -1) if reverse else range(T)):
            xt = X[t]
            if lstm:
                pre = xt @ w.T + h @ r.T + wb + rb
                pi, po, pf, pc = (pre[:, k * H:(k + 1) * H] for k in range(4))
                i = f(pi + p[:H] * c)
                fg = f(pf + p[2 * H:] * c)
                gg = g(pc)
                c = fg * c + i * gg
                o = f(po + p[H:2 * H] * c)
                h = o * hact(c)
            else:
                xw = xt @ w.T + wb
                hz = h @ r[:H].T + rb[:H]
                hr = h @ r[H:2 * H].T + rb[H:2 * H]
                z = f(xw[:, :H] + hz)
                rg = f(xw[:, H:2 * H] + hr)
                if lbr:
                    n = g(xw[:, 2 * H:] + rg * (h @ r[2 * H:].T + rb[2 * H:]))
                else:
                    n = g(xw[:, 2 * H:] + (rg * h) @ r[2 * H:].T + rb[2 * H:])
                h = (1 - z) * n + z * h
            Y[t, d] = h
        Yh[d], Yc[d] = h, c
    if layout == 1:
        Y, Yh, Yc = Y.transpose(2, 0, 1, 3), Yh.transpose(1, 0, 2), Yc.transpose(1, 0, 2)
    return Y, Yh, (Yc if lstm else None)


def reference_lengths(op, X, W, R, B, h0, c0, P, direction, lengths, lbr=0):
    """The reference with sequence_lens: each batch row run alone over its
    first lengths[b] steps (layout 0); Y is zero past them."""
    T, Bn, _ = X.shape
    D, H = W.shape[0], R.shape[2]
    Y, Yh, Yc = np.zeros((T, D, Bn, H)), np.zeros((D, Bn, H)), np.zeros((D, Bn, H))
    for b in range(Bn):
        L = int(lengths[b])
        hb = h0[:, b:b + 1] if h0 is not None else np.zeros((D, 1, H))
        cb = c0[:, b:b + 1] if c0 is not None else np.zeros((D, 1, H))
        if L == 0:
            Yh[:, b], Yc[:, b] = hb[:, 0], cb[:, 0]
            continue
        y, yh, yc = reference(op, X[:L, b:b + 1], W, R, B, hb, cb, P, direction, 0, lbr)
        Y[:L, :, b] = y[:, :, 0]
        Yh[:, b] = yh[:, 0]
        if yc is not None:
            Yc[:, b] = yc[:, 0]
    return Y, Yh, (Yc if op == "LSTM" else None)


# ------------------------------------------------------------ the models

def write_model(path, op, inits, feeds, outputs, attrs, name="rnn/node", extra_nodes=(), opset=OPSET):
    """A model of one op node: inits become initializers, feeds graph inputs;
    outputs are (Y, Y_h, Y_c) names, "" for one the node does not name."""
    ins = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"][:8 if op == "LSTM" else 6]
    present = set(inits) | set(feeds) | {n.output[0] for n in extra_nodes}
    node_ins = [n if n in present else "" for n in ins]
    while node_ins and not node_ins[-1]:
        node_ins.pop()
    node = helper.make_node(op, node_ins, list(outputs), name=name, **attrs)
    graph = helper.make_graph(
        list(extra_nodes) + [node], "rnn",
        [helper.make_tensor_value_info(k, TensorProto.INT32 if v.dtype == np.int32 else TensorProto.FLOAT, v.shape)
         for k, v in feeds.items()],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs if o],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.save(model, path)


def case(workdir, label, op, T=4, Bn=3, I=2, H=3, direction="forward", layout=0, bias=True,
         init=None, peep=False, outputs=("Y", "Y_h", "Y_c"), lbr=0, activations=None, grads=True):
    """One variant, checked forward, by finite differences and by name.
    init: None, "fed" (graph inputs) or "const" (initializers, a constant
    state)."""
    rng = np.random.default_rng(zlib.crc32(label.encode()))
    lstm = op == "LSTM"
    G, D = (4 if lstm else 3), (2 if direction == "bidirectional" else 1)
    if not lstm:
        outputs = tuple(outputs[:2])
    X = rng.standard_normal((Bn, T, I) if layout else (T, Bn, I)).astype(np.float32)
    inits = {"W": (rng.standard_normal((D, G * H, I)) * 0.5).astype(np.float32),
             "R": (rng.standard_normal((D, G * H, H)) * 0.5).astype(np.float32)}
    if bias:
        inits["B"] = (rng.standard_normal((D, 2 * G * H)) * 0.5).astype(np.float32)
    if peep:
        inits["P"] = (rng.standard_normal((D, 3 * H)) * 0.5).astype(np.float32)
    feeds = {"X": X}
    state_shape = (Bn, D, H) if layout else (D, Bn, H)
    states = {}
    if init:
        states["initial_h"] = rng.standard_normal(state_shape).astype(np.float32)
        if lstm:
            states["initial_c"] = rng.standard_normal(state_shape).astype(np.float32)
        (feeds if init == "fed" else inits).update(states)
    attrs = {"hidden_size": H}
    if direction != "forward":
        attrs["direction"] = direction
    if layout:
        attrs["layout"] = 1
    if lbr:
        attrs["linear_before_reset"] = 1
    if activations:
        attrs["activations"] = activations
    path = os.path.join(workdir, label + ".onnx")
    write_model(path, op, inits, feeds, outputs, attrs)
    ref = reference(op, X, inits["W"], inits["R"], inits.get("B"), states.get("initial_h"),
                    states.get("initial_c"), inits.get("P"), direction, layout, lbr, activations)
    named = [(o, ref[k]) for k, o in enumerate(outputs) if o]

    # forward
    g = ts.Graph.from_onnx(path, {k: v.shape for k, v in feeds.items()})
    m = ts.inference_model(g, ts.Options().output_mode("final"))
    got = m(**feeds)
    got = list(got) if isinstance(got, tuple) else [got]
    ok = len(got) == len(named)
    worst = 0.0
    for (o, want), have in zip(named, got):
        have = np.asarray(have, np.float64)
        ok = ok and have.shape == want.shape
        if have.shape == want.shape:
            worst = max(worst, float(np.max(np.abs(have - want) / (1 + np.abs(want)))))
    check(ok and worst <= FWD_RTOL, f"{label}: forward {'+'.join(o for o, _ in named)} "
          f"{[tuple(np.shape(v)) for v in got]} max error {worst:.2g}")
    # names: every gate of the first and last step
    gates = ["i", "f", "g", "o", "c", "h"] if lstm else ["z", "r", "n", "h"]
    dirs = ["forward/", "reverse/"] if D == 2 else [""]
    missing = [f"rnn/node/{d}t{t}/{gt}" for d in dirs for t in (0, T - 1) for gt in gates]
    missing = [n for n in missing if not has_tensor(g, n)]
    check(not missing, f"{label}: gates named <node>/t<k>/<gate> (missing: {missing[:3]})")
    g.close()
    if not grads:
        return

    # gradients of loss = sum(Y * K) against finite differences of the reference
    y0 = outputs[0] or outputs[1]
    k_shape = ref[0 if outputs[0] else 1].shape
    K = rng.standard_normal(k_shape).astype(np.float32)
    g = ts.Graph.from_onnx(path, {k: v.shape for k, v in feeds.items()})
    out = g.tensor(y0)
    kt = g.input("K", "f32", list(k_shape))
    loss = g.sum(g.mul(out, kt))
    loss.name = "loss"
    opts = ts.Options().output_mode("final")
    # one step from a zero state never reads R (nor P's f and i parts)
    params = [n for n in ("W", "R", "B", "P") if n in inits and not (n == "R" and T == 1 and not init)]
    for n in params:
        opts.anchor_tensor("g" + n, "Gradient___" + n, "final")
    model = ts.training_model(g, opts, optimizer=ts.SGD(lr=0.0), loss=loss)
    model(**feeds, K=K)

    def ref_loss(vals):
        r = reference(op, X, vals["W"], vals["R"], vals.get("B"), states.get("initial_h"),
                      states.get("initial_c"), vals.get("P"), direction, layout, lbr, activations)
        return float(np.sum(r[0 if outputs[0] else 1] * K))

    vals = {n: inits[n].astype(np.float64) for n in ("W", "R", "B", "P") if n in inits}
    eps = 1e-6
    worst = (0.0, "")
    for n in params:
        fd = np.zeros_like(vals[n])
        for idx in np.ndindex(*vals[n].shape):
            keep = vals[n][idx]
            vals[n][idx] = keep + eps
            up = ref_loss(vals)
            vals[n][idx] = keep - eps
            down = ref_loss(vals)
            vals[n][idx] = keep
            fd[idx] = (up - down) / (2 * eps)
        have = np.asarray(model.get_anchored_tensor("g" + n), np.float64).reshape(fd.shape)
        err = float(np.max(np.abs(have - fd)) / max(float(np.max(np.abs(fd))), 1e-12))
        worst = max(worst, (err, n))
    check(worst[0] <= GRAD_RTOL, f"{label}: gradients of {', '.join(params)} against finite differences "
          f"(worst {worst[1]}: {worst[0]:.2g} of its largest value)")
    g.close()


def refused(workdir, label, op, attrs, want, seq=None, opset=OPSET):
    """A node the importer refuses with a message holding `want`."""
    H, T, Bn, I = 2, 3, 2, 2
    G = 4 if op == "LSTM" else 3
    rng = np.random.default_rng(0)
    inits = {"W": rng.standard_normal((1, G * H, I)).astype(np.float32),
             "R": rng.standard_normal((1, G * H, H)).astype(np.float32)}
    feeds = {"X": rng.standard_normal((T, Bn, I)).astype(np.float32)}
    if seq is not None:
        inits["sequence_lens"] = np.array(seq, np.int32)
    path = os.path.join(workdir, label + ".onnx")
    write_model(path, op, inits, feeds, ("Y", "Y_h"), {"hidden_size": H, **attrs}, opset=opset)
    try:
        ts.Graph.from_onnx(path, {"X": feeds["X"].shape}).close()
        check(False, f"{label}: refused (it imported)")
    except ts.TensorscopeError as e:
        check(want in str(e), f"{label}: refused with '{want}' ({str(e)[-160:]})")


def main():
    with tempfile.TemporaryDirectory() as workdir:
        # LSTM
        case(workdir, "lstm_forward", "LSTM")
        case(workdir, "lstm_no_bias_y_h_only", "LSTM", bias=False, outputs=("", "Y_h", ""))
        case(workdir, "lstm_reverse", "LSTM", direction="reverse")
        case(workdir, "lstm_bidirectional", "LSTM", direction="bidirectional")
        case(workdir, "lstm_layout1_bidirectional", "LSTM", direction="bidirectional", layout=1, init="fed")
        case(workdir, "lstm_initial_state_fed", "LSTM", init="fed")
        case(workdir, "lstm_initial_state_const", "LSTM", init="const", outputs=("Y", "", "Y_c"))
        case(workdir, "lstm_peepholes", "LSTM", peep=True, init="fed")
        case(workdir, "lstm_peepholes_bidirectional_layout1", "LSTM", peep=True, direction="bidirectional", layout=1)
        case(workdir, "lstm_relu", "LSTM", activations=["Sigmoid", "Relu", "Tanh"])
        case(workdir, "lstm_one_step", "LSTM", T=1)
        # GRU
        for lbr in (0, 1):
            case(workdir, f"gru_lbr{lbr}_forward", "GRU", lbr=lbr)
            case(workdir, f"gru_lbr{lbr}_reverse_fed_state", "GRU", lbr=lbr, direction="reverse", init="fed")
            case(workdir, f"gru_lbr{lbr}_bidirectional_layout1", "GRU", lbr=lbr, direction="bidirectional", layout=1)
            case(workdir, f"gru_lbr{lbr}_no_bias", "GRU", lbr=lbr, bias=False, outputs=("", "Y_h"))
            case(workdir, f"gru_lbr{lbr}_const_state", "GRU", lbr=lbr, init="const")
        case(workdir, "gru_relu_bidirectional", "GRU", direction="bidirectional",
             activations=["Sigmoid", "Relu", "Sigmoid", "Tanh"])
        # the batch an exporter baked into a zero initial state is not the one imported
        bake_check(workdir)
        rebatch(workdir)
        # refused, with what to do
        refused(workdir, "lstm_clip", "LSTM", {"clip": 3.0}, "clip")
        refused(workdir, "gru_lengths", "GRU", {}, "lengths are integers from 0 to seq_length", seq=[3, 5])
        lengths_case(workdir, "lstm_lengths_const", "LSTM", [4, 2, 0], fed=False)
        lengths_case(workdir, "lstm_lengths_fed_bidirectional", "LSTM", [1, 4, 3], fed=True, direction="bidirectional")
        lengths_case(workdir, "gru_lengths_fed_reverse", "GRU", [3, 4, 1], fed=True, direction="reverse")
        lengths_case(workdir, "gru_lbr1_lengths_const_bidirectional", "GRU", [2, 4], fed=False, direction="bidirectional", lbr=1)
        refused(workdir, "lstm_activation", "LSTM", {"activations": ["HardSigmoid", "Tanh", "Tanh"]},
                "Sigmoid, Tanh and Relu are")
        refused(workdir, "lstm_hidden_size", "LSTM", {"hidden_size": 5}, "hidden_size")
        refused(workdir, "gru_direction", "GRU", {"direction": "sideways"}, "forward, reverse or bidirectional")
        refused(workdir, "lstm_activation_count", "LSTM", {"activations": ["Sigmoid", "Tanh"]}, "takes 3")
        refused(workdir, "gru_layout_opset13", "GRU", {"layout": 1}, "from opset 14 on", opset=13)
        full_lengths(workdir)
        two_layers(workdir)
        too_long(workdir)
        long_sequence(workdir)
    finish("onnx_rnn")


def bake_check(workdir):
    """An initial state of zeros written for batch 1 (as PyTorch's exports
    write it) still imports, and computes, at batch 3."""
    T, I, H = 3, 2, 2
    rng = np.random.default_rng(7)
    inits = {"W": rng.standard_normal((1, 4 * H, I)).astype(np.float32),
             "R": rng.standard_normal((1, 4 * H, H)).astype(np.float32),
             "initial_h": np.zeros((1, 1, H), np.float32), "initial_c": np.zeros((1, 1, H), np.float32)}
    X = rng.standard_normal((T, 3, I)).astype(np.float32)
    path = os.path.join(workdir, "baked.onnx")
    write_model(path, "LSTM", inits, {"X": X[:, :1]}, ("Y", "Y_h"), {"hidden_size": H})
    g = ts.Graph.from_onnx(path, {"X": X.shape})
    got = ts.inference_model(g, ts.Options().output_mode("final"))(X=X)
    want = reference("LSTM", X, inits["W"], inits["R"])
    err = float(np.max(np.abs(np.asarray(got[0], np.float64) - want[0])))
    check(got[0].shape == want[0].shape and err <= FWD_RTOL,
          f"zero initial state of an exported batch 1, imported at batch 3: {got[0].shape}, max error {err:.2g}")
    g.close()


def rebatch(workdir):
    """An LSTM imported at batch 2 and run at batch 3 computes at batch 3:
    each step reads its slice of the time dim, whose batch the recompile
    scales (before, its steps read rows of [T*B, ...] at offsets made for
    batch 2, and the run was refused)."""
    T, I, H = 3, 2, 2
    rng = np.random.default_rng(8)
    inits = {"W": rng.standard_normal((1, 4 * H, I)).astype(np.float32),
             "R": rng.standard_normal((1, 4 * H, H)).astype(np.float32)}
    X = rng.standard_normal((2, T, I)).astype(np.float32)  # layout 1: the batch first, as a run stacks it
    path = os.path.join(workdir, "rebatch.onnx")
    write_model(path, "LSTM", inits, {"X": X}, ("Y", "Y_h"), {"hidden_size": H, "layout": 1})
    g = ts.Graph.from_onnx(path, {"X": X.shape})
    m = ts.inference_model(g, ts.Options().output_mode("final"))
    m(X=X)
    X3 = rng.standard_normal((3, T, I)).astype(np.float32)
    got = m(X=X3)
    want = reference("LSTM", X3, inits["W"], inits["R"], layout=1)
    for k, what in ((0, "Y"), (1, "Y_h")):
        ok = got[k].shape == want[k].shape
        err = float(np.max(np.abs(np.asarray(got[k], np.float64) - want[k]))) if ok else float("inf")
        check(ok and err <= FWD_RTOL, f"an LSTM imported at batch 2 and run at batch 3: {what} {got[k].shape}, "
              f"the reference's {want[k].shape}, max error {err:.2g}")
    g.close()


def two_layers(workdir):
    """A 2-layer nn.LSTM as PyTorch exports it: a chain of LSTM nodes
    (/lstm/LSTM, /lstm/LSTM_1), the first's Y squeezed into the second's X.
    Values against the reference, and each layer's gates under its node."""
    T, Bn, I, H = 3, 2, 2, 3
    rng = np.random.default_rng(11)
    inits = {}
    for k, i in ((0, I), (1, H)):
        inits[f"W{k}"] = (rng.standard_normal((1, 4 * H, i)) * 0.5).astype(np.float32)
        inits[f"R{k}"] = (rng.standard_normal((1, 4 * H, H)) * 0.5).astype(np.float32)
        inits[f"B{k}"] = (rng.standard_normal((1, 8 * H)) * 0.5).astype(np.float32)
    inits["axes"] = np.array([1], np.int64)
    X = rng.standard_normal((T, Bn, I)).astype(np.float32)
    nodes = [helper.make_node("LSTM", ["X", "W0", "R0", "B0"], ["Y0"], name="/lstm/LSTM", hidden_size=H),
             helper.make_node("Squeeze", ["Y0", "axes"], ["X1"], name="/lstm/Squeeze"),
             helper.make_node("LSTM", ["X1", "W1", "R1", "B1"], ["Y1", "Y1_h"], name="/lstm/LSTM_1", hidden_size=H)]
    graph = helper.make_graph(nodes, "two_layers", [helper.make_tensor_value_info("X", TensorProto.FLOAT, X.shape)],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ("Y1", "Y1_h")],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    path = os.path.join(workdir, "two_layers.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), path)
    g = ts.Graph.from_onnx(path, {"X": X.shape})
    got = ts.inference_model(g, ts.Options().output_mode("final"))(X=X)
    y0 = reference("LSTM", X, inits["W0"], inits["R0"], inits["B0"])[0][:, 0]
    want = reference("LSTM", y0, inits["W1"], inits["R1"], inits["B1"])
    err = max(float(np.max(np.abs(np.asarray(a, np.float64) - b))) for a, b in zip(got, want[:2]))
    check(err <= FWD_RTOL, f"two stacked LSTM nodes: max error {err:.2g}")
    names = ["lstm/LSTM/t0/c", "lstm/LSTM_1/t0/c", "lstm/LSTM/t2/h", "lstm/LSTM_1/t2/h"]
    check(all(has_tensor(g, n) for n in names) and g.tensor("Y1_h").name.startswith("lstm/LSTM:"),
          f"two stacked LSTM nodes: each layer's gates under its node ({', '.join(names)}); "
          f"Y1_h is {g.tensor('Y1_h').name}")
    g.close()


def lengths_case(workdir, label, op, lengths, fed, direction="forward", lbr=0):
    """sequence_lens shorter than the sequence, as a constant or fed: each
    row's steps past its length keep its state, and Y is zero there."""
    T, Bn, I, H = 4, len(lengths), 2, 3
    G, D = (4 if op == "LSTM" else 3), (2 if direction == "bidirectional" else 1)
    rng = np.random.default_rng(zlib.crc32(label.encode()))
    inits = {"W": (rng.standard_normal((D, G * H, I)) * 0.5).astype(np.float32),
             "R": (rng.standard_normal((D, G * H, H)) * 0.5).astype(np.float32),
             "B": (rng.standard_normal((D, 2 * G * H)) * 0.5).astype(np.float32)}
    h0 = rng.standard_normal((D, Bn, H)).astype(np.float32)
    X = rng.standard_normal((T, Bn, I)).astype(np.float32)
    seq = np.array(lengths, np.int32)
    feeds = {"X": X, "initial_h": h0}
    (feeds if fed else inits)["sequence_lens"] = seq
    attrs = {"hidden_size": H, "direction": direction}
    if lbr:
        attrs["linear_before_reset"] = 1
    outputs = ("Y", "Y_h", "Y_c") if op == "LSTM" else ("Y", "Y_h")
    path = os.path.join(workdir, label + ".onnx")
    write_model(path, op, inits, feeds, outputs, attrs)
    want = reference_lengths(op, X, inits["W"], inits["R"], inits["B"], h0, None, None, direction, seq, lbr)
    g = ts.Graph.from_onnx(path, {k: v.shape for k, v in feeds.items()})
    got = ts.inference_model(g, ts.Options().output_mode("final"))(**feeds)
    err = max(float(np.max(np.abs(np.asarray(a, np.float64) - b))) for a, b in zip(got, want))
    check(len(got) == len(outputs) and err <= FWD_RTOL,
          f"{label}: sequence_lens {lengths} ({'fed' if fed else 'constant'}), max error {err:.2g}")
    g.close()


def too_long(workdir):
    """A sequence of 5 million steps would unroll into some 100 million
    graph ops: refused at once, naming the import limit to raise."""
    H = 2
    rng = np.random.default_rng(2)
    inits = {"W": rng.standard_normal((1, 3 * H, 1)).astype(np.float32),
             "R": rng.standard_normal((1, 3 * H, H)).astype(np.float32)}
    path = os.path.join(workdir, "too_long.onnx")
    shape = (5_000_000, 1, 1)
    write_model(path, "GRU", inits, {"X": np.zeros((1, 1, 1), np.float32)}, ("Y", "Y_h"), {"hidden_size": H})
    t0 = time.perf_counter()
    try:
        ts.Graph.from_onnx(path, {"X": shape}).close()
        check(False, "a GRU of 5 million steps: refused (it imported)")
    except ts.TensorscopeError as e:
        check("TS_MAX_IMPORT_BYTES" in str(e) and time.perf_counter() - t0 < 5,
              f"a GRU of 5 million steps: refused in {time.perf_counter() - t0:.2f} s ({str(e)[-170:]})")


def full_lengths(workdir):
    """sequence_lens as a constant where every length is seq_length: the
    same results as without it."""
    T, Bn, I, H = 3, 2, 2, 2
    rng = np.random.default_rng(3)
    inits = {"W": rng.standard_normal((1, 3 * H, I)).astype(np.float32),
             "R": rng.standard_normal((1, 3 * H, H)).astype(np.float32),
             "sequence_lens": np.full((Bn,), T, np.int32)}
    X = rng.standard_normal((T, Bn, I)).astype(np.float32)
    path = os.path.join(workdir, "lengths.onnx")
    write_model(path, "GRU", inits, {"X": X}, ("Y", "Y_h"), {"hidden_size": H})
    g = ts.Graph.from_onnx(path, {"X": X.shape})
    got = ts.inference_model(g, ts.Options().output_mode("final"))(X=X)
    want = reference("GRU", X, inits["W"], inits["R"])
    err = float(np.max(np.abs(np.asarray(got[0], np.float64) - want[0])))
    check(err <= FWD_RTOL, f"GRU with sequence_lens all equal to seq_length: max error {err:.2g}")
    g.close()


def long_sequence(workdir):
    """T=100, hidden 128, batch 8, input 64, one direction: size and time."""
    T, Bn, I, H = 100, 8, 64, 128
    rng = np.random.default_rng(5)
    for op, G in (("LSTM", 4), ("GRU", 3)):
        inits = {"W": (rng.standard_normal((1, G * H, I)) * 0.1).astype(np.float32),
                 "R": (rng.standard_normal((1, G * H, H)) * 0.1).astype(np.float32),
                 "B": np.zeros((1, 2 * G * H), np.float32)}
        X = rng.standard_normal((T, Bn, I)).astype(np.float32)
        path = os.path.join(workdir, f"long_{op}.onnx")
        write_model(path, op, inits, {"X": X}, ("Y", "Y_h"), {"hidden_size": H})
        t0 = time.perf_counter()
        g = ts.Graph.from_onnx(path, {"X": X.shape})
        t_import = time.perf_counter() - t0
        n = len(g.tensors())
        t0 = time.perf_counter()
        m = ts.inference_model(g, ts.Options().output_mode("final"))
        got = m(X=X)
        t_run = time.perf_counter() - t0
        want = reference(op, X, inits["W"], inits["R"], inits["B"])
        err = float(np.max(np.abs(np.asarray(got[0], np.float64) - want[0]) / (1 + np.abs(want[0]))))
        check(err <= FWD_RTOL, f"{op} T={T} hidden {H}: {n} tensors, import {t_import * 1e3:.0f} ms, "
              f"compile and first run {t_run * 1e3:.0f} ms, max error {err:.2g}")
        g.close()


if __name__ == "__main__":
    main()
