"""Shared pieces of the Python tests: the repository, its MNIST files and a
small MLP in the tutorial's shape (names fc1, fc2, x, labels, loss)."""
import os

import numpy as np
import pytest

import tensorscope as ts

SOURCE_DIR = os.environ.get("TS_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.fixture(autouse=True)
def quiet_logs():
    ts.set_log_level(1)  # errors (and print ops) only
    yield
    ts.set_log_level(3)


@pytest.fixture
def source_dir():
    return SOURCE_DIR


@pytest.fixture
def mnist_dir():
    return os.path.join(SOURCE_DIR, "data", "mnist")


def small_mlp(batch=4, features=6, hidden=5, classes=3, seed=1):
    """x f32[B,F] -> fc1 -> relu -> fc2 -> log_softmax -> nll_loss."""
    g = ts.Graph(seed=seed)
    x = g.input("x", "f32", [batch, features])
    labels = g.input("labels", "i32", [batch])
    h = g.relu(g.linear(x, hidden, "fc1"))
    logp = g.log_softmax(g.linear(h, classes, "fc2"), 1)
    loss = g.nll_loss(logp, labels)
    loss.name = "loss"
    return g


def batches(n_micro, batch=4, features=6, classes=3, seed=0):
    """n_micro micro-batches stacked on axis 0, as a run takes them."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n_micro * batch, features)).astype(np.float32)
    y = rng.integers(0, classes, n_micro * batch).astype(np.int32)
    return x, y


# TS_TEST_CAPTURE=export|onnx: every ts.Options() of the tests captures a torch
# module that way (tests/test_torch_export.sh runs the torch tests through both)
_CAPTURE = os.environ.get("TS_TEST_CAPTURE")
if _CAPTURE:
    _options_init = ts.Options.__init__

    def _init_with_capture(self, *args, **kwargs):
        _options_init(self, *args, **kwargs)
        self.capture(_CAPTURE)

    ts.Options.__init__ = _init_with_capture
    from tensorscope import _torch as _wrapper
    _capture_of = _wrapper.capture_of
    _wrapper.capture_of = lambda options: _capture_of(options) if options is not None else _CAPTURE
