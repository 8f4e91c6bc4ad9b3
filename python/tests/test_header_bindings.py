"""Every graph-building function of include/tensorscope.h (a TS_API
function whose first parameter is the graph) has a Python binding, read
from the header itself so a new one cannot be missed; and the generic
families and the gathers give NumPy's values."""
import os
import re

import numpy as np
import pytest

import tensorscope as ts
from tensorscope import graph as tsgraph

SRC = os.environ.get("TS_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
PKG = os.path.join(os.path.dirname(tsgraph.__file__))

# Graph-building functions Python reaches another way, with the reason.
NOT_BOUND = {
    "ts_graph_at": "the C macros' call-site wrapper: Python records the calling line itself (Graph._locate)",
    "ts_gpt_build": "the CLI's built-in GPT; Python builds its models from the ops or from a torch.nn.Module",
}


def header_builders():
    text = open(os.path.join(SRC, "include", "tensorscope.h"), encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    names = re.findall(r"TS_API\b[^;{(]*?\b(ts_\w+)\s*\(\s*(?:const\s+)?ts_graph\s*\*", text)
    assert len(names) > 50, f"read only {len(names)} graph functions from the header"
    return sorted(set(names))


def bound_names():
    """C functions the package calls: the OPS table's, and every lib.ts_x,
    declare("ts_x") and function("ts_x") in its source"""
    names = {cname for cname, _ in tsgraph.OPS.values()}
    for f in os.listdir(PKG):
        if f.endswith(".py"):
            text = open(os.path.join(PKG, f), encoding="utf-8").read()
            names |= set(re.findall(r"\blib\.(ts_\w+)", text))
            names |= set(re.findall(r"""(?:declare|function)\(\s*["'](ts_\w+)["']""", text))
    return names


def test_every_graph_builder_of_the_header_has_a_python_binding():
    missing = [n for n in header_builders() if n not in bound_names() and n not in NOT_BOUND]
    assert not missing, ("graph-building functions of include/tensorscope.h with no Python binding "
                         f"(add each to graph.OPS, or to NOT_BOUND with the reason): {', '.join(missing)}")


def test_the_allow_list_names_only_functions_of_the_header():
    stale = sorted(set(NOT_BOUND) - set(header_builders()))
    assert not stale, f"NOT_BOUND names functions the header no longer has: {stale}"


def test_every_ops_entry_is_a_graph_method_calling_the_header_function():
    builders = set(header_builders())
    for method, (cname, _) in tsgraph.OPS.items():
        assert cname in builders, f"OPS[{method!r}] calls {cname}, which the header does not declare"
        assert callable(getattr(ts.Graph, method, None)), f"Graph has no method {method}"


X = np.array([[-1.5, 0.25, 2.5], [3.75, -0.5, -2.0]], np.float32)


def run(build, x, other):
    """build(g, x, c): x a graph input, c a constant holding `other`"""
    g = ts.Graph()
    out = build(g, g.input("x", "f32", list(x.shape)), g.constant("c", other))
    m = ts.inference_model(g, ts.Options(), outputs=[out])
    m.compile()
    return m(x)


def test_unary_by_name_against_numpy():
    one = np.zeros(1, np.float32)
    np.testing.assert_array_equal(run(lambda g, x, _: g.unary("Floor", x), X, one), np.floor(X))
    np.testing.assert_allclose(run(lambda g, x, _: g.unary("LeakyRelu", x, 0.1), X, one),
                               np.where(X < 0, np.float32(0.1) * X, X), rtol=1e-6)
    with pytest.raises(ts.InvalidArgumentError, match="Floor"):
        run(lambda g, x, _: g.unary("NoSuchOp", x), X, one)


def test_binary_by_name_against_numpy():
    y = np.array([1.0, -1.0, 2.0], np.float32)
    np.testing.assert_array_equal(run(lambda g, x, c: g.binary("Max", x, c), X, y), np.maximum(X, y))
    np.testing.assert_array_equal(run(lambda g, x, c: g.binary("Greater", x, c), X, y),
                                  (X > y).astype(np.float32))


def test_gathers_against_numpy():
    idx = np.array([2, 0, -1], np.int32)
    np.testing.assert_array_equal(run(lambda g, x, c: g.gather(x, c, 1), X, idx), np.take(X, idx, axis=1))
    el = np.array([[1, 0, 2], [0, 2, 1]], np.int32)
    np.testing.assert_array_equal(run(lambda g, x, c: g.gather_elements(x, c, 1), X, el),
                                  np.take_along_axis(X, el, axis=1))
