"""ts.diff_runs: two dumps tensor by tensor, in the graph's order when the
graph is given, the first difference named with its op and inputs."""
import numpy as np

import tensorscope as ts
from conftest import small_mlp


def test_diff_runs_names_a_planted_ulp_in_graph_order():
    g = small_mlp()
    names = [t.name for t in g.tensors()]
    relu = next(t for t in g.tensors() if t.op == "Relu")
    rng = np.random.default_rng(0)
    a = {n: rng.standard_normal(6).astype(np.float32) for n in reversed(names)}  # recorded backwards
    a["Gradient___" + relu.name] = rng.standard_normal(6).astype(np.float32)
    b = {n: v.copy() for n, v in a.items()}
    b[relu.name][2] = np.nextafter(b[relu.name][2], np.float32(np.inf))
    r = ts.diff_runs(a, b, graph=g)
    order = [t["name"] for t in r["tensors"]]
    assert order[:len(names)] == names and order[-1] == "Gradient___" + relu.name  # the graph's order, the backward after
    f = r["first_not_bit_equal"]
    assert f["name"] == relu.name and f["state"] == "close" and f["op"] == "Relu" and f["location"]
    assert f["inputs"] == [{"name": i.name, "state": "bit-equal"} for i in relu.inputs]
    assert r["first_difference"] is None and r["counts"] == {"bit-equal": len(a) - 1, "close": 1, "differs": 0}
    b[relu.name][2] += 1
    r = ts.diff_runs(a, b, graph=g)
    assert r["first_difference"]["name"] == relu.name and r["first_difference"]["state"] == "differs"
    # without the graph: the order `a` records
    assert [t["name"] for t in ts.diff_runs(a, b)["tensors"]][0] == names[-1]


def test_diff_runs_needs_a_common_tensor():
    try:
        ts.diff_runs({"x": np.zeros(2, np.float32)}, {"y": np.zeros(2, np.float32)})
    except ValueError as e:
        assert "no tensor name is in both" in str(e)
    else:
        raise AssertionError("no error")
