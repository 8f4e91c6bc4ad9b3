"""ts.compare_dumps: a dump whose tensors were rounded to bf16 from one
layer on, against the dump it came from, is ranked by relative error with
the rounded layer named as the first jump; values and gradients apart; the
same dumps read from a directory in the order its order.txt records."""
import numpy as np
import pytest

import tensorscope as ts


def bf16(x):
    """Rounds float32 values to bfloat16 (nearest even) and back."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + np.uint64(0x7FFF) + ((u >> np.uint64(16)) & np.uint64(1))) & np.uint64(0xFFFF0000)
    return u.astype(np.uint32).view(np.float32)


def twin_dumps(seed=0):
    """An f32 dump of an MLP's forward and backward in graph order, and the
    same with every tensor from fc2/MatMul:0 on rounded to bf16, the
    gradients from Gradient___fc2/MatMul:0 on (backward order)."""
    rng = np.random.default_rng(seed)
    names = ["x", "fc1.weight", "fc1/MatMul:0", "fc1/Add:0", "Relu:0", "fc2.weight", "fc2/MatMul:0",
             "fc2/Add:0", "LogSoftmax:0"]
    f32, low = {}, {}
    for i, n in enumerate(names):
        v = rng.standard_normal((16, 32)).astype(np.float32)
        f32[n] = v
        low[n] = bf16(v) if i >= names.index("fc2/MatMul:0") else v
        g = rng.standard_normal((16, 32)).astype(np.float32) * 1e-3
        f32["Gradient___" + n] = g
        # the backward meets fc2 first: its gradients and those after lose precision
        low["Gradient___" + n] = bf16(g) if i <= names.index("fc2/MatMul:0") else g
    low["fc2/MatMul:0"] = low["fc2/MatMul:0"] * np.float32(1.01)  # the worst of the values
    low["fc1.weight@bf16"] = bf16(f32["fc1.weight"])
    return f32, low


def test_the_rounded_layer_is_the_first_jump_and_ranks_first():
    f32, low = twin_dumps()
    r = ts.compare_dumps(low, f32)
    values = [row["name"] for row in r["values"]]
    assert values == [n for n in f32 if "___" not in n]  # graph order kept
    assert r["first_jump"]["values"]["name"] == "fc2/MatMul:0"
    assert r["first_jump"]["gradients"]["name"] == "Gradient___fc2/MatMul:0"
    by_name = {row["name"]: row for row in r["values"]}
    assert by_name["fc2/MatMul:0"]["rank"] == 1
    assert by_name["x"]["rel_error"] == 0
    expected = np.linalg.norm(low["fc2/Add:0"] - f32["fc2/Add:0"]) / np.linalg.norm(f32["fc2/Add:0"])
    assert by_name["fc2/Add:0"]["rel_error"] == pytest.approx(expected, rel=1e-6)
    assert 1e-4 < expected < 4e-3  # bf16's rounding: 8 bits of mantissa
    grads = [row["name"] for row in r["gradients"]]
    assert grads[0] == "Gradient___LogSoftmax:0" and grads[-1] == "Gradient___x"  # backward order
    assert r["only_a"] == ["fc1.weight@bf16"] and r["only_b"] == []


def test_a_directory_dump_is_read_in_the_order_it_records(tmp_path):
    f32, low = twin_dumps()
    for d, dump in (("f32", f32), ("low", low)):
        (tmp_path / d).mkdir()
        with open(tmp_path / d / "order.txt", "w") as f:
            for n, v in dump.items():
                stem = n.replace("/", "_").replace(":", "_")
                np.save(tmp_path / d / (stem + ".npy"), v)
                f.write(f"{stem}\t{n}\n")
    r = ts.compare_dumps(tmp_path / "low", tmp_path / "f32", plot=tmp_path / "p.png")
    assert r["first_jump"]["values"]["name"] == "fc2/MatMul:0"
    assert [row["name"] for row in r["values"]][:3] == ["x", "fc1.weight", "fc1/MatMul:0"]
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_jump_when_the_dumps_agree_and_bad_input_is_an_error():
    f32, _ = twin_dumps()
    r = ts.compare_dumps(f32, f32)
    assert r["first_jump"] == {"values": None, "gradients": None}
    with pytest.raises(ValueError, match="no tensor name is in both"):
        ts.compare_dumps({"a": np.zeros(3)}, {"b": np.zeros(3)})
    with pytest.raises(ts.TensorscopeError, match="factor"):
        ts.compare_dumps(f32, f32, jump=0.5)
