"""Learning-rate schedules and warmup from Python (the CLI's --lr-schedule and
--warmup-steps), and the learning rate changed between runs: the rate each
optimizer step applies, read off the weights it wrote."""
import math

import numpy as np
import pytest

import tensorscope as ts
from conftest import batches, small_mlp

LR = 0.1


def expected_lr(kind, t, warmup=0, step_size=1, gamma=0.1, total=1, min_lr=0.0, lr=LR):
    """docs/python.md's formulas (PyTorch's LinearLR, StepLR, CosineAnnealingLR)."""
    if t < warmup:
        return lr * (t + 1) / warmup
    u = t - warmup
    if kind == "step":
        return lr * gamma ** (u // step_size)
    if kind == "cosine":
        return min_lr + (lr - min_lr) * (1 + math.cos(math.pi * min(u, total) / total)) / 2
    return lr


def applied_rates(model, g, runs, set_base_lr=None):
    """The rate of each step (D = 1, plain SGD): bias_after = bias_before - lr * gradient."""
    x, y = batches(1)
    rates = []
    for r in range(runs):
        if set_base_lr and r in set_base_lr:
            model.base_lr = set_base_lr[r]
        before = g.tensor("fc2.bias").numpy()
        model(x, y)
        grad = model.get_anchored_tensor("g").astype(np.float64)
        step = before.astype(np.float64) - g.tensor("fc2.bias").numpy()
        k = np.argmax(np.abs(grad))
        rates.append(step[k] / grad[k])
        assert model.learning_rate == pytest.approx(rates[-1], rel=1e-4)
    return rates


def training(schedule=None):
    g = small_mlp()
    opts = ts.Options().anchor_tensor("g", "Gradient___fc2.bias")
    return g, ts.training_model(g, opts, optimizer=ts.SGD(lr=LR), lr_schedule=schedule)


@pytest.mark.parametrize("kind,params", [
    ("constant", dict(warmup_steps=3)),
    ("step", dict(warmup_steps=2, step_size=2, gamma=0.5)),
    ("cosine", dict(warmup_steps=2, total_steps=4, min_lr=0.01)),
])
def test_every_step_follows_the_schedule(kind, params):
    s = ts.LRSchedule(kind, **params)
    g, model = training(s)
    got = applied_rates(model, g, 8)
    want = [expected_lr(kind, t, params.get("warmup_steps", 0), params.get("step_size", 1),
                        params.get("gamma", 0.1), params.get("total_steps", 1),
                        params.get("min_lr", 0.0)) for t in range(8)]
    np.testing.assert_allclose(got, want, rtol=1e-4)
    assert [s.lr_at(LR, t) for t in range(8)] == pytest.approx(want, rel=1e-6)
    assert model.lr_schedule is s


def test_the_learning_rate_changes_between_runs():
    g, model = training()
    assert model.base_lr == pytest.approx(LR)
    got = applied_rates(model, g, 4, set_base_lr={2: 0.02})
    np.testing.assert_allclose(got, [LR, LR, 0.02, 0.02], rtol=1e-4)
    # under a schedule, the schedule goes on from the new base rate
    s = ts.LRSchedule("step", step_size=1, gamma=0.5)
    g, model = training(s)
    got = applied_rates(model, g, 4, set_base_lr={2: 1.0})
    np.testing.assert_allclose(got, [LR, LR / 2, 1.0 / 4, 1.0 / 8], rtol=1e-4)


def test_bad_schedules_say_what_is_wrong():
    with pytest.raises(ts.InvalidArgumentError, match="linear"):
        ts.LRSchedule("linear")
    _, model = training()
    with pytest.raises(ts.InvalidArgumentError, match="total steps must be >= 1"):
        model.set_lr_schedule(ts.LRSchedule("cosine"))
    with pytest.raises(ts.InvalidArgumentError, match="warmup steps must be >= 0"):
        model.set_lr_schedule(ts.LRSchedule(warmup_steps=-1))
    with pytest.raises(ts.InvalidArgumentError, match="learning rate"):
        model.base_lr = -1.0
    with pytest.raises(ts.InvalidArgumentError, match="learning rate"):
        model.base_lr = float("nan")
    g = small_mlp()
    infer = ts.inference_model(g, outputs=["LogSoftmax:0"])
    with pytest.raises(ts.StateError, match="no optimizer"):
        infer.set_lr_schedule(ts.LRSchedule("constant", warmup_steps=2))
    with pytest.raises(ts.StateError, match="no optimizer"):
        infer.base_lr = 0.1


@pytest.mark.parametrize("field", ["warmup_steps", "step_size", "total_steps"])
def test_integers_beyond_int64_are_refused_not_wrapped(field):
    # 2**64 + 5 would reach the library as 5 through ctypes
    with pytest.raises(ts.InvalidArgumentError, match=f"{field}=18446744073709551621 does not fit the library's int64_t"):
        ts.LRSchedule("cosine", **{field: 2**64 + 5})
    with pytest.raises(ts.InvalidArgumentError, match=f"{field}=-9223372036854775809 does not fit"):
        ts.LRSchedule("cosine", **{field: -2**63 - 1})
    assert ts.LRSchedule("cosine", **{field: 2**63 - 1})._struct().__getattribute__(field) == 2**63 - 1


def test_every_integer_the_package_passes_is_checked():
    """Arguments, struct fields and arrays: an int the C type cannot hold is
    refused (the ctypes conversion would keep its low bits)."""
    g = small_mlp()
    model = ts.training_model(g, loss="loss", optimizer=ts.SGD(lr=LR))
    with pytest.raises(ts.InvalidArgumentError, match="does not fit the library's int64_t"):
        ts.LRSchedule().lr_at(0.1, 2**64 + 1)
    with pytest.raises(ts.InvalidArgumentError, match="does not fit the library's int "):
        ts.Options().threads(2**32 + 1)
    with pytest.raises(ts.InvalidArgumentError, match="18446744073709551615 does not fit the library's int64_t"):
        ts.LRSchedule().lr_at(0.1, np.uint64(2**64 - 1))  # a NumPy integer too
    with pytest.raises(ts.InvalidArgumentError, match=r"shape\[1\]=36893488147419103232 does not fit"):
        g.input("big", "f32", [1, 2**65])
    with pytest.raises(ts.InvalidArgumentError, match="batch_size=18446744073709551617 does not fit"):
        ts.DataLoader(ts.Dataset.from_arrays(np.zeros((4, 2), np.float32), np.zeros(4, np.int64)), batch_size=2**64 + 1)
    del model
