"""The inspector's views from Python: Model.hold and Model.inspect give every
tensor of a held run as numpy arrays (values checked against NumPy's own
arithmetic on the same inputs and weights), Options.break_on_nan attaches
them to the NumericsError (and to the raising frame, for pdb.pm()), and
Options.trace writes the steps asked for as a Chrome/Perfetto trace.
Inspection.eval computes over the held tensors as NumPy does, and
Inspection.rerun re-executes the held run with one weight changed: its loss
is NumPy's with that weight, and the model is left as it was."""
import json
import sys

import numpy as np
import pytest

import tensorscope as ts

from conftest import batches, small_mlp


def held_model(lr=0.0, options=None):
    g = small_mlp()
    m = ts.training_model(g, options or ts.Options(), optimizer=ts.SGD(lr=lr))
    m.compile()
    return g, m


def test_before_any_held_run_only_parameters_and_state_are_shown():
    g, m = held_model()
    m(*batches(1))
    insp = m.inspect()
    assert "fc1.weight" in insp and "x" not in insp
    np.testing.assert_array_equal(insp["fc1.weight"], g.tensor("fc1.weight").numpy())
    with pytest.raises(ts.StateError, match="hold"):
        insp["x"]


def test_held_run_values_match_numpy():
    g, m = held_model(lr=0.0)  # the weights stay as the run used them
    x, y = batches(1)
    m.hold()
    m(x, y)
    m.hold(False)
    insp = m.inspect()
    w1, b1 = g.tensor("fc1.weight").numpy(), g.tensor("fc1.bias").numpy()
    pre = x @ w1.T + b1
    relu = [n for n in insp.names("Relu*") if not n.startswith("Gradient")]
    assert len(relu) == 1, insp.names("Relu*")
    np.testing.assert_allclose(insp[relu[0]], np.maximum(pre, 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(insp["x"], x)
    np.testing.assert_array_equal(insp["fc1.weight"], w1)
    # fc2's bias gradient: the mean over the batch of softmax - one-hot
    h = np.maximum(pre, 0)
    z = h @ g.tensor("fc2.weight").numpy().T + g.tensor("fc2.bias").numpy()
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    p[np.arange(len(y)), y] -= 1
    np.testing.assert_allclose(insp.grad("fc2.bias"), p.mean(0), rtol=1e-4, atol=1e-6)
    assert "fc1.weight" in insp and "no such tensor" not in insp
    assert len(insp) == len(list(insp)) > 10
    assert "test_inspect.py" in insp.where(relu[0]) or "conftest.py" in insp.where(relu[0])
    assert insp.stats("x")["count"] == x.size
    assert insp.summary("x").startswith("x f32[4,6]")
    with pytest.raises(KeyError, match="fc1.weigth|fc1.weight"):
        insp["fc1.weigth"]
    # a later run that is not held leaves the held copies alone
    x2, y2 = batches(1, seed=5)
    m(x2, y2)
    np.testing.assert_array_equal(m.inspect()["x"], x)


def test_break_on_nan_attaches_the_tensors(capfd):
    opts = ts.Options().check_numerics("op").break_on_nan()
    g, m = held_model(lr=0.1, options=opts)
    x, y = batches(1)
    x[:] = 3e38
    g.tensor("fc1.weight").set_value(np.ones((5, 6), np.float32))  # fc1: 6 x 3e38 overflows to +inf
    w_before = g.tensor("fc1.weight").numpy()
    with pytest.raises(ts.NumericsError) as info:
        m(x, y)
    e = info.value
    assert e.tensor and "MatMul" in e.tensor, e.tensor
    assert isinstance(e.tensors, ts.Inspection)
    bad = e.tensors[e.tensor]
    assert not np.all(np.isfinite(bad))
    np.testing.assert_array_equal(e.tensors["x"], x)
    # the frame that raised holds them too (what pdb.pm() shows)
    tb = info.tb
    while tb.tb_next:
        tb = tb.tb_next
    assert tb.tb_frame.f_locals.get("tensors") is e.tensors
    np.testing.assert_array_equal(g.tensor("fc1.weight").numpy(), w_before)  # no update applied
    err = capfd.readouterr().err
    assert err.count("numeric check: first non-finite value") <= 1, err


def test_break_on_nan_off_attaches_nothing():
    g, m = held_model(lr=0.1, options=ts.Options().check_numerics("op"))
    x, y = batches(1)
    x[:] = 3e38
    g.tensor("fc1.weight").set_value(np.ones((5, 6), np.float32))
    with pytest.raises(ts.NumericsError) as info:
        m(x, y)
    assert info.value.tensors is None


def test_trace_writes_the_steps_asked_for(tmp_path):
    path = tmp_path / "run.json"
    g, m = held_model(lr=0.01, options=ts.Options().trace(path, "2:3"))
    x, y = batches(1)
    for _ in range(4):
        m(x, y)
    events = json.loads(path.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    steps = sorted({e["name"] for e in events if e.get("name", "").startswith("step ")})
    assert steps == ["step 2", "step 3"], steps
    ops = [e for e in events if e.get("ph") == "X" and "args" in e and "op" in e["args"]]
    assert any(e["args"]["op"] == "MatMul" for e in ops)
    with pytest.raises(ts.InvalidArgumentError):
        ts.Options().trace(tmp_path / "x.json", "5:2")
    with pytest.raises(ValueError, match="A:B"):
        ts.Options().trace(tmp_path / "x.json", "two")
    with pytest.raises(ts.FileError):
        ts.Options().trace(tmp_path / "no" / "such" / "dir.json")


def test_finish_writes_an_open_trace_and_raises_its_error(tmp_path):
    path = tmp_path / "open.json"
    g, m = held_model(lr=0.01, options=ts.Options().trace(path))
    x, y = batches(1)
    m(x, y)
    assert not path.exists()
    m.finish()
    events = json.loads(path.read_text())["traceEvents"]
    assert [e["name"] for e in events if e.get("name", "").startswith("step ")] == ["step 1"]
    g, m = held_model(lr=0.01, options=ts.Options().trace("/dev/full"))
    m(x, y)
    with pytest.raises(ts.FileError, match="No space left"):
        m.finish()
    m(x, y)  # usable still, untraced
    m.finish()


def test_eval_computes_over_the_held_tensors_as_numpy_does():
    g, m = held_model(lr=0.1)
    x, y = batches(1)
    m.hold()
    m(x, y)
    m.hold(False)
    insp = m.inspect()
    w1 = insp.before("fc1.weight")  # as the run read it, before its step
    relu = [n for n in insp.names("Relu*") if not n.startswith("Gradient")][0]
    np.testing.assert_allclose(insp.eval("fc1.weight @ x[0]"), insp["fc1.weight"] @ x[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(insp.eval(f"{relu} @ fc2.weight.T[:, ::-1]"), insp[relu] @ insp["fc2.weight"].T[:, ::-1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(insp.eval(f"sum({relu}, axis=0) / 4 - max(x)"), insp[relu].sum(0) / 4 - x.max(), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(insp.eval("where(x[:, 1:] > 0.5)"), np.argwhere(x[:, 1:] > 0.5))
    np.testing.assert_allclose(insp.eval("where(x < 0, -x, x**2)"), np.where(x < 0, -x, x ** 2), rtol=1e-6)
    assert not np.array_equal(w1, insp["fc1.weight"])  # lr 0.1: the step moved it
    with pytest.raises(ts.InvalidArgumentError, match="column 5"):
        insp.eval("x + (1")
    with pytest.raises(ts.NotFoundError, match="closest: 'fc1.weight'"):
        insp.eval("fc1.wieght * 2")


def test_rerun_changes_one_weight_on_the_side_and_matches_numpy():
    g, m = held_model(lr=0.1)
    x, y = batches(1)
    m.hold()
    m(x, y)
    m.hold(False)
    insp = m.inspect()
    after = {p: g.tensor(p).numpy().copy() for p in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")}
    w = {p: insp.before(p).astype(np.float64) for p in after}
    w["fc1.weight"][2, 3] = 0.75

    def loss(w):
        h = np.maximum(x @ w["fc1.weight"].T + w["fc1.bias"], 0)
        z = h @ w["fc2.weight"].T + w["fc2.bias"]
        logp = z - z.max(1, keepdims=True)
        logp -= np.log(np.exp(logp).sum(1, keepdims=True))
        return -logp[np.arange(len(y)), y].mean()

    new = insp.before("fc1.weight")
    new[2, 3] = 0.75
    r = insp.rerun("fc1.weight", new)
    np.testing.assert_allclose(r.loss, loss(w), rtol=1e-5)
    np.testing.assert_allclose(r.held_loss, float(np.asarray(insp["loss"]).reshape(-1)[0]), rtol=1e-6)
    assert r.diffs[0][0] == "fc1.weight" and r.diffs[0][2] == 1, r.diffs
    assert r.diffs[1][0].startswith("fc1/MatMul"), r.diffs
    # the model is as before: its weights, and its next run's loss
    for p, v in after.items():
        np.testing.assert_array_equal(g.tensor(p).numpy(), v)
    with pytest.raises(ts.InvalidArgumentError, match="input or a parameter"):
        insp.rerun(relu_name(insp), np.zeros(insp[relu_name(insp)].shape, np.float32))
    with pytest.raises(ts.ShapeError, match="shape"):
        insp.rerun("fc1.bias", np.zeros(3, np.float32))


def relu_name(insp):
    return [n for n in insp.names("Relu*") if not n.startswith("Gradient")][0]
