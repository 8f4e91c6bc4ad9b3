"""Weights saved and loaded by the library (read back with NumPy), model
lint, the library's array comparison against NumPy's isclose, and the
Python line each node records."""
import inspect

import numpy as np
import pytest

import tensorscope as ts
from conftest import batches, small_mlp


def test_save_weights_npz_read_by_numpy_and_loaded_back(tmp_path):
    g = small_mlp(seed=1)
    path = str(tmp_path / "w.npz")
    g.save_weights(path)
    with np.load(path) as z:
        saved = {k: z[k] for k in z.files}
    want = g.state_dict()
    assert set(saved) == set(want)
    for k in want:
        np.testing.assert_array_equal(saved[k], want[k])
    other = small_mlp(seed=2)
    assert not np.array_equal(other.tensor("fc1.weight").numpy(), want["fc1.weight"])
    other.load_weights(path)
    for k, v in other.state_dict().items():
        np.testing.assert_array_equal(v, want[k])


def test_load_weights_is_strict(tmp_path):
    path = str(tmp_path / "w.npz")
    np.savez(path, **{"fc1.weight": np.zeros((5, 6), np.float32)})
    with pytest.raises(ts.TensorscopeError, match="fc1.bias|fc2"):
        small_mlp().load_weights(path)


def test_load_weights_not_strict_names_what_does_not_pair(tmp_path):
    path = str(tmp_path / "w.npz")
    fc1_w = np.full((5, 6), 0.5, np.float32)
    np.savez(path, **{"fc1.weight": fc1_w, "bn.running_mean": np.zeros(5, np.float32)})
    g = small_mlp(seed=3)
    fc2_before = g.tensor("fc2.weight").numpy().copy()
    missing, unexpected = g.load_weights(path, strict=False)
    np.testing.assert_array_equal(g.tensor("fc1.weight").numpy(), fc1_w)
    np.testing.assert_array_equal(g.tensor("fc2.weight").numpy(), fc2_before)
    assert "fc1.weight" not in missing and {"fc1.bias", "fc2.weight"} <= set(missing)
    assert unexpected == ["bn.running_mean"]
    np.savez(path, **{"fc1.weight": np.zeros((6, 6), np.float32)})
    with pytest.raises(ts.TensorscopeError, match="fc1.weight"):  # a shape is still checked
        g.load_weights(path, strict=False)
    np.savez(path, **{"other.weight": fc1_w})
    with pytest.raises(ts.TensorscopeError, match="none of the model's parameters"):
        g.load_weights(path, strict=False)


def test_lint_flags_a_softmax_over_the_batch():
    g = ts.Graph()
    x = g.input("x", "f32", [4, 3])
    labels = g.input("labels", "i32", [4])
    loss = g.nll_loss(g.log_softmax(g.linear(x, 3, "fc"), 0), labels)
    loss.name = "loss"
    m = ts.training_model(g, ts.Options(), optimizer=ts.SGD(lr=0.1))
    m.compile()
    warnings = m.lint()
    assert any("batch" in w for w in warnings), warnings
    clean = ts.training_model(small_mlp(), ts.Options(), optimizer=ts.SGD(lr=0.1))
    clean.compile()
    assert clean.lint() == []


def test_compare_agrees_with_numpy_isclose():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal(1000)
    a = (ref + rng.standard_normal(1000) * 1e-4).astype(np.float32)
    a[7] = np.nan
    r = ts.compare(a, ref, atol=1e-5, rtol=1e-3)
    close = np.isclose(a.astype(np.float64), ref, atol=1e-5, rtol=1e-3)
    assert r["count"] == 1000 and r["mismatches"] == int((~close).sum())
    assert r["pass"] is False
    finite = np.isfinite(a)
    diff = np.abs(a[finite].astype(np.float64) - ref[finite])
    assert r["max_abs"] == pytest.approx(diff.max())
    assert r["ref"]["mean"] == pytest.approx(ref.mean())
    assert ts.compare(ref, ref)["pass"] is True
    with pytest.raises(ts.TensorscopeError):
        ts.compare(np.zeros(3), np.zeros(4))


def test_nodes_record_the_python_line_that_built_them():
    g = ts.Graph()
    x = g.input("x", "f32", [2, 2])
    line = inspect.currentframe().f_lineno + 1
    h = g.relu(x)
    assert h.location.endswith(f"test_weights_compare.py:{line}")
    assert h.op == "Relu" and x.op == "Input"
    assert g.inputs == [x]


def test_runs_after_loading_weights_use_them(tmp_path):
    g = small_mlp(seed=1)
    path = str(tmp_path / "w")
    g.save_weights(path)  # a directory of .npy files
    twin = small_mlp(seed=9)
    twin.load_weights(path)
    losses = []
    for graph in (g, twin):
        m = ts.training_model(graph, ts.Options(), optimizer=ts.SGD(lr=0.1))
        m.compile()
        losses.append(float(m(*batches(1))))
    assert losses[0] == losses[1]


def test_save_npy_read_by_numpy(tmp_path):
    a = np.arange(12, dtype=np.int64).reshape(3, 4)[:, ::2]  # not contiguous
    path = str(tmp_path / "a.npy")
    ts.save_npy(path, a)
    np.testing.assert_array_equal(np.load(path), a)
