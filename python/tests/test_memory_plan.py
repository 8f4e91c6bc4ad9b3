"""ts.memory_plan: compile's memory plan as a liveness report, checked
against the model's own shapes."""
import numpy as np

import tensorscope as ts
from conftest import small_mlp


def aligned(n):
    return (n + 63) // 64 * 64


def test_memory_plan_is_the_models_buffers_over_the_step(tmp_path):
    g = small_mlp(batch=8, features=6, hidden=5, classes=3)
    m = ts.training_model(g, ts.Options(), optimizer=ts.SGD(lr=0.01))
    m.compile()
    r = ts.memory_plan(m, plot=tmp_path / "memory.png")
    pts, bufs = r["points"], r["buffers"]
    forward = [p for p in pts if p["phase"] == "forward"]
    assert len(pts) == 2 * len(forward) + 1 and pts[-1]["phase"] == "update"
    by_name = {b["name"]: b for b in bufs}
    # sizes from the graph's shapes: activations 64-byte aligned in their arena
    relu = by_name["Relu:0"]
    assert relu["class"] == "activations" and relu["bytes"] == aligned(8 * 5 * 4) and relu["op"] == "Relu"
    for name, value in g.state_dict().items():
        assert by_name[name]["class"] == "parameters" and by_name[name]["bytes"] == np.asarray(value).size * 4
        assert by_name[name]["start"] == 0 and by_name[name]["end"] == len(pts) - 1
    # Relu:0 lives from fc1's product, whose pass writes it after the bias
    # (the Linear's Relu done there), to its backward, which reads it
    fwd_at = next(p["point"] for p in pts if p["phase"] == "forward" and p["tensor"] == "fc1/MatMul:0")
    bwd_at = next(p["point"] for p in pts if p["phase"] == "backward" and p["tensor"] == "Relu:0")
    assert relu["start"] == fwd_at and relu["end"] >= bwd_at
    # the timeline is the live buffers' sum; the peak its largest point, its list largest first
    for p in range(len(pts)):
        live = sum(b["bytes"] for b in bufs if b["start"] <= p <= b["end"])
        assert sum(r["timeline"][c][p] for c in r["timeline"]) == live
    assert r["peak"]["bytes"] == max(sum(r["timeline"][c][p] for c in r["timeline"]) for p in range(len(pts)))
    sizes = [b["bytes"] for b in r["peak"]["live"]]
    assert sum(sizes) == r["peak"]["bytes"] and sizes == sorted(sizes, reverse=True)
    assert (tmp_path / "memory.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_memory_plan_needs_a_compiled_model():
    m = ts.training_model(small_mlp(), ts.Options(), optimizer=ts.SGD(lr=0.01))
    try:
        ts.memory_plan(m)
    except ts.StateError as e:
        assert "compile" in str(e)
    else:
        raise AssertionError("no error before compile")
