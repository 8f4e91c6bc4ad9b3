"""Datasets and loaders of the library, batches as NumPy copies."""
import re

import numpy as np
import pytest

import tensorscope as ts
from conftest import small_mlp


def test_mnist_and_its_loader(mnist_dir):
    data = ts.Dataset.mnist(mnist_dir)
    assert len(data) == 10000
    x, y = data.arrays()
    assert x.shape == (10000, 1, 28, 28) and x.dtype == np.float32
    assert y.shape == (10000,) and y.dtype == np.int32 and 0 <= y.min() and y.max() <= 9
    assert x.min() == -1.0 and x.max() == 1.0  # (x/255 - 0.5)/0.5
    loader = ts.DataLoader(data, batch_size=1000, group=2, count=4000)
    assert len(loader) == 4
    got = list(loader)
    assert [b[0].shape for b in got] == [(2000, 1, 28, 28)] * 2
    np.testing.assert_array_equal(got[0][0], x[:2000])  # no shuffle: in order
    np.testing.assert_array_equal(got[1][1], y[2000:4000])
    assert not np.shares_memory(got[0][0], got[1][0])  # each batch is a copy


@pytest.mark.skipif(not hasattr(ts._capi.lib, "ts_dataset_from_arrays"),
                    reason="this library has no ts_dataset_from_arrays")
def test_dataset_from_arrays_copies():
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    y = np.arange(6, dtype=np.int64) % 3
    data = ts.Dataset.from_arrays(x, y)
    x[:] = -1  # the dataset holds a copy
    assert len(data) == 6
    batches = list(ts.DataLoader(data, batch_size=3))
    assert len(batches) == 2
    np.testing.assert_array_equal(batches[0][0], np.arange(12, dtype=np.float32).reshape(3, 4))


def test_the_batches_left_at_an_epochs_end_are_kept_and_train_as_pytorch_would():
    """drop_last=False (the default, PyTorch's): 20 samples in batches of 8
    are 8, 8 and a last batch of 4. The last one recompiles the model for its
    size and its loss and gradients are those of the mean loss over its 4
    samples, computed here with NumPy from the weights before its step."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((20, 6)).astype(np.float32)
    y = rng.integers(0, 3, 20).astype(np.int32)
    data = ts.Dataset.from_arrays(x, y)
    assert len(ts.DataLoader(data, batch_size=8)) == 3
    assert len(ts.DataLoader(data, batch_size=8, drop_last=True)) == 2
    assert [b[0].shape[0] for b in ts.DataLoader(data, batch_size=8, drop_last=True)] == [8, 8]
    # groups of 3 batches (D x A = 3): 12, then the 8 left as 3 batches of 2 (the 2 that do not split evenly dropped)
    assert [b[0].shape[0] for b in ts.DataLoader(data, batch_size=4, group=3)] == [12, 6]

    g = small_mlp(batch=8)
    params = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    opts = ts.Options().anchor_tensor("Gradient___fc*")
    model = ts.training_model(g, opts, optimizer=ts.SGD(lr=0.1))
    sizes = []
    for xb, yb in ts.DataLoader(data, batch_size=8):
        before = {p: g.tensor(p).numpy().copy() for p in params}
        loss = model(xb, yb)
        sizes.append(xb.shape[0])
    assert sizes == [8, 8, 4]
    w1, b1, w2, b2 = (before[p] for p in params)
    xb, yb = x[16:], y[16:]  # no shuffle: the last 4 samples
    pre = xb.astype(np.float64) @ w1.T + b1
    h = np.maximum(pre, 0)
    z = h @ w2.T + b2
    logp = z - z.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    want_loss = -logp[np.arange(4), yb].mean()
    dz = np.exp(logp)
    dz[np.arange(4), yb] -= 1
    dz /= 4
    dh = dz @ w2 * (pre > 0)
    want = {"fc2.weight": dz.T @ h, "fc2.bias": dz.sum(0), "fc1.weight": dh.T @ xb, "fc1.bias": dh.sum(0)}
    np.testing.assert_allclose(float(np.asarray(loss).reshape(-1)[0]), want_loss, rtol=1e-5)
    for p in params:
        np.testing.assert_allclose(model.get_anchored_tensor("Gradient___" + p), want[p], rtol=1e-4, atol=1e-6)


def _numpy_step(w, xb, yb):
    """The MLP's mean NLL loss over the batch and its gradients, in float64."""
    w1, b1, w2, b2 = (w[p] for p in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"))
    n = len(yb)
    pre = xb.astype(np.float64) @ w1.T + b1
    h = np.maximum(pre, 0)
    z = h @ w2.T + b2
    logp = z - z.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    dz = np.exp(logp)
    dz[np.arange(n), yb] -= 1
    dz /= n
    dh = dz @ w2 * (pre > 0)
    grads = {"fc2.weight": dz.T @ h, "fc2.bias": dz.sum(0), "fc1.weight": dh.T @ xb, "fc1.bias": dh.sum(0)}
    return -logp[np.arange(n), yb].mean(), grads


def test_a_smaller_last_batch_compiles_once_a_run_and_every_epoch_trains_as_numpy():
    """Three epochs of 8, 8 and 4: the batch of 4 compiles the model once
    (Recompilations.InputShapeChanged 1 for the run, not one each way each
    epoch); the later epochs switch between the two kept programs
    (ProgramSwitches 4), and every step's loss and the final weights are
    plain SGD's computed with NumPy over the same 9 batches."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((20, 6)).astype(np.float32)
    y = rng.integers(0, 3, 20).astype(np.int32)
    data = ts.Dataset.from_arrays(x, y)
    g = small_mlp(batch=8)
    params = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    w = {p: g.tensor(p).numpy().astype(np.float64) for p in params}
    ts.metrics_reset()
    model = ts.training_model(g, ts.Options(), optimizer=ts.SGD(lr=0.1))
    sizes = []
    for _ in range(3):
        for xb, yb in ts.DataLoader(data, batch_size=8):
            loss = float(np.asarray(model(xb, yb)).reshape(-1)[0])
            want, grads = _numpy_step(w, xb, yb)
            np.testing.assert_allclose(loss, want, rtol=1e-5)
            for p in params:
                w[p] -= 0.1 * grads[p]
            sizes.append(len(yb))
    assert sizes == [8, 8, 4] * 3
    for p in params:
        np.testing.assert_allclose(g.tensor(p).numpy(), w[p], rtol=1e-4, atol=1e-6)
    report = ts.metrics_report()
    counters = dict(re.findall(r"^Counter: (\S+)\n +Value: (\d+)", report, re.M))
    assert counters.get("Recompilations.InputShapeChanged") == "1", report
    assert counters.get("ProgramSwitches.InputShapeChanged") == "4", report
