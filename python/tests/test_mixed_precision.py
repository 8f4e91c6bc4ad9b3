"""Mixed precision from Python (docs/precision.md): Options.precision and
loss_scaling, Graph.cast and autocast, Tensor.precision, Model.precision
and loss_scale, and the measured loss in watches; f16 casts against
NumPy's float16 conversion (round to nearest even)."""
import numpy as np
import pytest

import tensorscope as ts


def small_mlp(seed=0):
    g = ts.Graph(seed=seed)
    x = g.input("x", "f32", [16, 20])
    labels = g.input("labels", "i32", [16])
    h = g.relu(g.linear(x, 12, "fc1"))
    loss = g.nll_loss(g.log_softmax(g.linear(h, 4, "fc2"), 1), labels)
    loss.name = "loss"
    return g


def batch():
    rng = np.random.default_rng(0)
    return rng.standard_normal((16, 20)).astype(np.float32), (np.arange(16) % 4).astype(np.int32)


def test_cast_f16_matches_numpy():
    g = ts.Graph()
    x = g.input("x", "f32", [9])
    y = g.cast(x, "f16")
    assert y.precision == "f16" and x.precision == "f32"
    m = ts.inference_model(g, ts.Options().watch(y.name), outputs=[y])
    values = np.array([1 / 3, 65504, 65519, 65520, 1e-8, 3e-8, -0.0, 1e5, 2.0 ** -25], np.float32)
    out = np.asarray(m(values))
    with np.errstate(over="ignore"):  # 65520 and 1e5 become inf, as they should
        want = values.astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(out, want)
    w = m.watches()[y.name]
    assert w["stored"] == "f16"
    assert w["stored_overflow"] == pytest.approx(2 / 9) and w["stored_underflow"] == pytest.approx(2 / 9)


def test_precision_option_names_the_copies():
    g = small_mlp()
    m = ts.training_model(g, ts.Options().precision("bf16").watch("*@bf16"), optimizer=ts.SGD(lr=0.1))
    assert m.precision == "bf16" and m.loss_scale() is None
    names = {t.name for t in g.tensors()}
    assert {"x@bf16", "fc1.weight@bf16", "Relu:0@bf16", "fc2.weight@bf16"} <= names
    assert g.tensor("fc1.weight@bf16").precision == "bf16" and g.tensor("fc1.weight").precision == "f32"
    x, y = batch()
    m(x, y)
    w = m.watches()
    assert w["Gradient___fc1.weight@bf16"]["stored"] == "bf16"
    with pytest.raises(ts.InvalidArgumentError, match="build the graph again"):
        ts.training_model(g, ts.Options().precision("f16"), optimizer=ts.SGD(lr=0.1))


def test_autocast_before_a_model():
    g = small_mlp()
    g.autocast("f16")
    assert g.tensor("fc2.weight@f16").op == "Cast"
    with pytest.raises(TypeError, match="bf16, f16"):
        g.autocast("f64x")


def test_loss_scaling_skips_and_backs_off():
    g = small_mlp()
    opts = ts.Options().precision("f16").loss_scaling(True, init_scale=1e30, growth_interval=3)
    m = ts.training_model(g, opts, optimizer=ts.SGD(lr=0.1))
    before = g.tensor("fc1.weight").numpy().copy()
    x, y = batch()
    m(x, y)
    scale, skipped = m.loss_scale()
    assert skipped == 1 and scale == pytest.approx(0.5 * np.float32(1e30))
    np.testing.assert_array_equal(g.tensor("fc1.weight").numpy(), before)
    with pytest.raises(ts.InvalidArgumentError, match="backoff"):
        ts.Options().loss_scaling(True, backoff=2.0)
    with pytest.raises(ts.InvalidArgumentError, match="f32, bf16 or f16"):
        ts.Options().precision("i32")


def test_bf16_trains_like_f32():
    x, y = batch()
    losses = {}
    for p in ("f32", "bf16", "f16"):
        g = small_mlp(seed=3)
        m = ts.training_model(g, ts.Options().precision(p), optimizer=ts.SGD(lr=0.1))
        for _ in range(30):
            loss = float(np.asarray(m(x, y)).mean())
        losses[p] = loss
    assert losses["f32"] < 1.0  # it learned
    assert abs(losses["bf16"] - losses["f32"]) < 0.02 and abs(losses["f16"] - losses["f32"]) < 0.02, losses
