"""The spike detector from Python (Options.detect_spikes, Model.spike): on a
3-layer MLP learning a fixed teacher, causes planted at step 41 after 40
clean steps are found within two steps and named by layer; a clean run
finds nothing; "skip" leaves the weights as they were, "stop" raises
SpikeError before the update."""
import numpy as np
import pytest

import tensorscope as ts

B, IN, H, OUT, N = 32, 16, 32, 4, 41


def data(batches=64, seed=3):
    rng = np.random.default_rng(seed)
    teacher = rng.standard_normal((IN, OUT))
    xs = rng.standard_normal((batches, B, IN)).astype(np.float32)
    ys = np.argmax(xs @ teacher, axis=2).astype(np.int32)
    return xs, ys


def mlp(lr_groups=False, lr=0.05, seed=7):
    g = ts.Graph(seed=seed)
    x = g.input("x", "f32", [B, IN])
    labels = g.input("labels", "i32", [B])
    h = g.relu(g.linear(x, H, "fc1"))
    h = g.relu(g.linear(h, H, "fc2"))
    loss = g.cross_entropy(g.linear(h, OUT, "fc3"), labels)
    loss.name = "loss"
    if lr_groups:  # fc1 and fc3 keep their own rate: the model's base rate moves fc2's alone
        params = g.parameters()
        for name in ("fc1.weight", "fc1.bias", "fc3.weight", "fc3.bias"):
            params[name].set_optimizer(ts.SGD(lr=lr))
    return g


def train(g, steps, action="continue", plant=None, lr=0.05):
    xs, ys = data()
    model = ts.training_model(g, ts.Options().threads(1).detect_spikes(action=action), optimizer=ts.SGD(lr=lr))
    first = None
    for step in range(1, steps + 1):
        x, y = xs[(step - 1) % len(xs)].copy(), ys[(step - 1) % len(ys)]
        if plant and step == N:
            x = plant(model, g, x)
        before = g.tensor("fc2.weight").numpy().copy()
        model(x, y)
        spike = model.spike()
        if spike and first is None:
            first = dict(spike, weights_kept=np.array_equal(before, g.tensor("fc2.weight").numpy()))
    return model, first


def lr_jump(model, g, x):
    model.base_lr = 0.05 * 300
    return x


def corrupt(model, g, x):
    w = g.tensor("fc2.weight")
    w.set_value(w.numpy() * 30)
    return x


def scale_input(model, g, x):
    return x * np.float32(1e4)


def test_a_clean_run_finds_nothing():
    model, first = train(mlp(), 400)
    assert first is None, first
    assert model.spike() is None


@pytest.mark.parametrize("plant,layer,tensor", [
    (lr_jump, "fc2", None),
    (corrupt, "fc2", "fc2.weight"),
    (scale_input, "x", "x"),
])
def test_a_planted_cause_is_found_and_named(plant, layer, tensor):
    _, first = train(mlp(lr_groups=plant is lr_jump), N + 3, plant=plant)
    assert first is not None
    assert N <= first["step"] <= N + 1, first
    assert first["layer"] == layer, first
    if tensor:
        assert first["tensor"] == tensor, first
    assert abs(first["z"]) >= 12 and first["action"] == "continue"


def test_skip_leaves_the_weights_unchanged():
    g = mlp()
    model, first = train(g, N, action="skip", plant=corrupt)
    assert first["step"] == N and first["layer"] == "fc2" and first["action"] == "skip"
    assert first["weights_kept"], "the spike's step must not update fc2.weight"
    assert model.steps == N


def test_stop_raises_before_the_update():
    g = mlp()
    with pytest.raises(ts.SpikeError, match=r"spike at step 41: .*'x' \(layer x\)"):
        train(g, N, action="stop", plant=scale_input)


def test_bad_settings_are_refused():
    with pytest.raises(ts.InvalidArgumentError, match="use continue, skip, stop, npz or inspect"):
        ts.Options().detect_spikes(action="halt")
    with pytest.raises(ts.InvalidArgumentError, match="give its path"):
        ts.Options().detect_spikes(action="npz")
    with pytest.raises(ts.InvalidArgumentError, match=">= 2"):
        ts.Options().detect_spikes(window=1)


def test_inspect_holds_the_spike_step():
    g = mlp()
    xs, ys = data()
    model = ts.training_model(g, ts.Options().threads(1).detect_spikes(action="inspect"), optimizer=ts.SGD(lr=0.05))
    for step in range(1, N):
        model(xs[step - 1], ys[step - 1])
    before = g.tensor("fc1.weight").numpy().copy()
    x = xs[N - 1] * np.float32(1e4)
    with pytest.raises(ts.SpikeError):
        model(x, ys[N - 1])
    held = model.inspect()
    assert model.spike()["tensor"] == "x" and model.spike()["action"] == "inspect"
    np.testing.assert_array_equal(held["x"], x)
    assert np.array_equal(g.tensor("fc1.weight").numpy(), before), "the update was not applied"
    assert held.grad("fc1.weight").shape == before.shape
