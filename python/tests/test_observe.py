"""Watches as dicts, the one-line summary and the print op, each checked
against NumPy over the same values."""
import re

import numpy as np
import pytest

import tensorscope as ts
from conftest import batches, small_mlp


def test_watch_results_are_dicts_that_match_numpy():
    g = small_mlp()
    opts = (ts.Options().watch("*Relu:0", "stats|histogram|range")
            .anchor_tensor("r", "Relu:0", "final"))
    m = ts.training_model(g, opts, optimizer=ts.SGD(lr=0.01))
    m.compile()
    m(*batches(1))
    w = m.watches()
    assert set(w) == {"Relu:0", "Gradient___Relu:0"}  # a glob; a pattern without *?[ is one exact name
    s = w["Relu:0"]
    r = m.get_anchored_tensor("r").astype(np.float64)
    assert s["count"] == r.size and s["zeros"] == int((r == 0).sum())
    assert s["nans"] == 0 and s["pos_infs"] == 0
    assert s["mean"] == pytest.approx(r.mean(), rel=1e-6)
    assert s["std"] == pytest.approx(r.std(), rel=1e-5)
    assert s["min"] == r.min() and s["max"] == pytest.approx(r.max())
    assert s["l2"] == pytest.approx(np.sqrt((r * r).sum()), rel=1e-6)
    assert s["log2_zeros"] == s["zeros"]
    assert s["log2_counts"].sum() + s["log2_zeros"] == r.size
    exps = np.frexp(r[r != 0].astype(np.float32))[1] - 1 + 127  # the float exponent field
    np.testing.assert_array_equal(np.bincount(exps, minlength=256), s["log2_counts"])
    assert set(s["range"]) >= {"fp16_underflow", "bf16_overflow"}
    assert s["run"] == 0


def test_summary_line_is_the_library_line(capsys):
    a = np.array([[1.0, -2.0, 0.5], [0.0, 4.0, np.nan]])
    ts.summary(a, "a")
    line = capsys.readouterr().out.strip()
    assert line.startswith("a f64[2,3] n=6 ")
    assert "NaN!" in line
    finite = a[np.isfinite(a)]
    m = re.search(r"x∈\[(\S+), (\S+)\] μ=(\S+) σ=(\S+)", line)
    assert float(m.group(1)) == finite.min() and float(m.group(2)) == finite.max()
    assert float(m.group(3)) == pytest.approx(finite.mean(), rel=1e-2)
    assert float(m.group(4)) == pytest.approx(finite.std(), rel=1e-2)
    assert ts.summary_line(np.zeros((2, 2), np.float32)).endswith("all zeros")
    with pytest.raises(TypeError):
        ts.summary(np.array(["text"]))


def test_merged_summaries_are_the_summary_of_all_values():
    rng = np.random.default_rng(5)
    a = rng.normal(3.0, 2.0, (40, 7)).astype(np.float32)
    b = rng.normal(-1.0, 0.5, 123).astype(np.float32)
    b[:9] = 0
    b[10] = np.inf
    both = np.concatenate([a.ravel(), b])
    what = "stats|histogram|range"
    m = ts.merge_summaries(ts.summarize(a, what), ts.summarize(b, what))
    whole = ts.summarize(both, what)
    finite = both[np.isfinite(both)].astype(np.float64)
    assert m["count"] == both.size and m["zeros"] == 9 and m["pos_infs"] == 1 and m["nans"] == 0
    assert m["min"] == finite.min() and m["max"] == finite.max()
    assert m["mean"] == pytest.approx(finite.mean(), rel=1e-6)
    assert m["std"] == pytest.approx(finite.std(), rel=1e-6)
    assert m["l2"] == pytest.approx(np.sqrt((finite * finite).sum()), rel=1e-6)
    np.testing.assert_array_equal(m["log2_counts"], whole["log2_counts"])
    np.testing.assert_array_equal(m["tb_counts"], whole["tb_counts"])
    assert m["range"] == pytest.approx(whole["range"])
    # a zeroed summary takes the other; different `what`s are an error
    empty = dict(ts.summarize(a), what=0)
    assert ts.merge_summaries(empty, ts.summarize(b))["count"] == b.size
    with pytest.raises(ts.InvalidArgumentError, match="different"):
        ts.merge_summaries(ts.summarize(a), ts.summarize(b, "stats|histogram"))


def test_print_tensor_logs_the_value_and_its_gradient(capfd):
    g = ts.Graph(seed=3)
    x = g.input("x", "f32", [2, 3])
    labels = g.input("labels", "i32", [2])
    h = ts.print_tensor(g.linear(x, 3, "fc"), "logits")
    loss = g.cross_entropy(h, labels)
    loss.name = "loss"
    m = ts.training_model(g, ts.Options(), optimizer=ts.SGD(lr=0.01))
    m.compile()
    m(np.ones((2, 3), np.float32), np.zeros(2, np.int32))
    err = capfd.readouterr().err
    assert "logits" in err and "logits_gradient" in err


def test_print_beside_logs_without_being_read():
    g = ts.Graph(seed=3)
    x = g.input("x", "f32", [2, 3])
    labels = g.input("labels", "i32", [2])
    h = g.linear(x, 3, "fc")
    g.print_beside(h, "beside")
    g.print_tensor(h, "unread")
    loss = g.cross_entropy(h, labels)
    loss.name = "loss"
    m = ts.training_model(g, ts.Options(), optimizer=ts.SGD(lr=0.01))
    m.compile()
    warnings = m.lint()
    assert len(warnings) == 1 and "Print:1" in warnings[0] and "not used" in warnings[0], warnings  # print_tensor's, not print_beside's (Print:0)


def test_log_callback_receives_print_ops():
    lines = []
    ts.set_log_callback(lambda level, message: lines.append((level, message)))
    try:
        g = ts.Graph(seed=3)
        x = g.input("x", "f32", [2, 3])
        labels = g.input("labels", "i32", [2])
        loss = g.cross_entropy(ts.print_tensor(g.linear(x, 3, "fc"), "logits"), labels)
        loss.name = "loss"
        m = ts.training_model(g, ts.Options(), optimizer=ts.SGD(lr=0.01))
        m.compile()
        m(np.ones((2, 3), np.float32), np.zeros(2, np.int32))
    finally:
        ts.set_log_callback(None)
    printed = [msg for level, msg in lines if level == 6]  # TS_LOG_PRINT
    assert any("logits" in msg and "logits_gradient" not in msg for msg in printed)
    assert any("logits_gradient" in msg for msg in printed)


def test_metrics_report_counts_runs():
    m = ts.training_model(small_mlp(), ts.Options(), optimizer=ts.SGD(lr=0.01))
    m.compile()
    m(*batches(1))
    report = m.metrics_report()
    assert report.startswith("Metric: ")
    assert "ExecuteTime" in report and "CompileTime" in report
    assert m.runs == 1 and m.steps == 1
    assert m.memory()["parameters"] == 4 * (5 * 6 + 5 + 3 * 5 + 3)
    assert "Relu:0" in m.dump()
    bwd = m.dump(backward=True)
    assert "\n# backward, once per micro-batch" in bwd and "\n# optimizer step" in bwd
    assert "+= ReluBackward(%Gradient___Relu:0, %Relu:0)" in bwd


def test_dump_backward_needs_a_compiled_training_model():
    g = small_mlp()
    with pytest.raises(ts.InvalidArgumentError, match="compile it first"):
        ts.training_model(g, ts.Options(), optimizer=ts.SGD(lr=0.01)).dump(backward=True)
    with pytest.raises(ts.InvalidArgumentError, match="no model given"):
        g.dump(backward=True)


def test_log_layer_shapes_each_run_and_what_a_recompilation_changed():
    """Options().log_layer_shapes(): after each run one log line with every
    layer's output shape, as the anchored arrays have them; a new batch
    size recompiles, and a line says which shapes changed."""
    lines = []
    ts.set_log_level(3)
    ts.set_log_callback(lambda level, msg: lines.append(msg))
    try:
        g = small_mlp(batch=4)
        model = ts.training_model(g, ts.Options().log_layer_shapes().anchor_tensor("fc*/Add:0").anchor_tensor("Relu:0"),
                                  optimizer=ts.SGD(lr=0.1))
        shapes = []
        for n_rows in (4, 4, 2):
            x, y = batches(1, batch=n_rows)
            model(x, y)
            shapes.append({k: model.get_anchored_tensor(k).shape for k in ("fc1/Add:0", "Relu:0", "fc2/Add:0")})
    finally:
        ts.set_log_callback(None)
        ts.set_log_level(1)
    steps = [m for m in lines if re.match(r"step \d+: layer output shapes:", m)]
    assert [int(m.split()[1][:-1]) for m in steps] == [1, 2, 3], lines
    for line, want in zip(steps, shapes):
        got = dict(re.findall(r"([\w/:.]+) f32\[([\d,]*)\]", line.split(":", 1)[1]))
        for name, shape in want.items():  # the anchors' shapes
            assert got[name] == ",".join(map(str, shape)), (name, line)
    changed = [m for m in lines if m.startswith("recompiled (InputShapeChanged): layer output shapes changed:")]
    assert len(changed) == 1, lines
    assert "fc1/Add:0 f32[4,5] -> f32[2,5]" in changed[0] and "Relu:0 f32[4,5] -> f32[2,5]" in changed[0], changed
    assert "loss" not in changed[0].split(":", 2)[2], changed  # a scalar keeps its shape


def test_on_start_runs_once_with_the_model_before_the_first_step():
    """Options().on_start(fn): fn(model) once, after compile and before the
    first step; an exception stops the call before any step and is raised
    from it (the weights untouched), and the next call runs the hook again."""
    seen = []

    def check_model(model):
        seen.append((model.steps, set(model.get_tensor_names()), g.tensor("fc1.weight").numpy().copy()))

    g = small_mlp()
    w0 = g.tensor("fc1.weight").numpy().copy()
    model = ts.training_model(g, ts.Options().on_start(check_model), optimizer=ts.SGD(lr=0.1))
    for _ in range(3):
        model(*batches(1))
    assert len(seen) == 1, seen
    steps, names, w = seen[0]
    assert steps == 0 and "Gradient___fc1.weight" in names and names == set(model.get_tensor_names())
    np.testing.assert_array_equal(w, w0)  # before the first step
    assert model.steps == 3

    calls = []

    def refuse(model):
        calls.append(model.steps)
        if len(calls) == 1:
            raise ValueError("fc1.weight is not what I expected")

    g = small_mlp()
    w0 = g.tensor("fc1.weight").numpy().copy()
    model = ts.training_model(g, ts.Options().on_start(refuse), optimizer=ts.SGD(lr=0.1))
    with pytest.raises(ValueError, match="fc1.weight is not what I expected"):
        model(*batches(1))
    assert model.steps == 0 and model.runs == 0
    np.testing.assert_array_equal(g.tensor("fc1.weight").numpy(), w0)
    model(*batches(1))  # the hook again, which passes now; then the step
    assert calls == [0, 0] and model.steps == 1


def test_stability_rows_match_numpy():
    """Options.watch_stability: rows stability/<layer>/<signal> after the
    user's watches, each the value NumPy gives from the run's tensors."""
    g = small_mlp()
    opts = (ts.Options().watch("fc1/Add:0", "stats").watch_stability("*")
            .anchor_tensor("fc2/Add:0").anchor_tensor("Accum___*").anchor_tensor("UpdatedVar___fc1.weight"))
    m = ts.training_model(g, opts, optimizer=ts.SGD(lr=0.1))
    m.compile()
    x, y = batches(1)
    m(x, y)
    w = m.watches()
    names = list(w)
    assert names[0] == "fc1/Add:0" and all(n.startswith("stability/") for n in names[1:])
    assert "fc2/Add:0" not in w and not any(n.startswith("Accum___") for n in w)  # read by the rows, not rows themselves
    z = m.get_anchored_tensor("fc2/Add:0").astype(np.float64)
    assert w["stability/fc2/rms"]["mean"] == pytest.approx(np.sqrt((z * z).mean()), rel=1e-6)
    assert w["stability/fc2/max_abs"]["mean"] == pytest.approx(np.abs(z).max(), rel=1e-7)
    mx = z.max(axis=1, keepdims=True)
    lse = (mx[:, 0] + np.log(np.exp(z - mx).sum(axis=1))).mean()
    assert w["stability/fc2/lse"]["mean"] == pytest.approx(lse, rel=1e-6)
    for p in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"):
        gr = m.get_anchored_tensor("Accum___" + p).astype(np.float64)
        assert w[f"stability/{p}/grad_norm"]["mean"] == pytest.approx(np.linalg.norm(gr), rel=1e-6)
        assert f"stability/{p}/adam_update_norm" not in w  # SGD
    # SGD: w_after - w_before = -lr * g, so the ratio is lr * ||g|| / ||w_before||
    w1 = m.get_anchored_tensor("UpdatedVar___fc1.weight").astype(np.float64)
    g1 = m.get_anchored_tensor("Accum___fc1.weight").astype(np.float64)
    ratio = np.linalg.norm(0.1 * g1) / np.linalg.norm(w1 + 0.1 * g1)
    assert w["stability/fc1.weight/update_ratio"]["mean"] == pytest.approx(ratio, rel=1e-4)
    with pytest.raises(ts.InvalidArgumentError):
        ts.Options().watch_stability("*", period=0)
