"""Builder ops from Python: each op's forward values against NumPy, and an
op the library lacks is a clear error at call time."""
import math

import numpy as np
import pytest

import tensorscope as ts

X = np.array([[0.5, 1.0, 2.0], [0.25, 3.0, 1.5]], np.float32)
ELEMENTWISE = {
    "relu": lambda x: np.maximum(x, 0), "log": np.log, "exp": np.exp, "sqrt": np.sqrt,
    "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "erf": np.vectorize(math.erf),
}


def forward(build, x=X):
    g = ts.Graph()
    xt = g.input("x", "f32", list(x.shape))
    out = build(g, xt)
    m = ts.inference_model(g, ts.Options(), outputs=[out])
    m.compile()
    return m(x)[0]  # inference anchors every batch: [1, ...]


def has(cname):
    return hasattr(ts._capi.lib, cname)


@pytest.mark.parametrize("op", sorted(ELEMENTWISE))
def test_elementwise_ops_against_numpy(op):
    cname = ts.OPS[op][0]
    if not has(cname):
        pytest.skip(f"this library has no {cname}")
    got = forward(lambda g, x: getattr(g, op)(x))
    np.testing.assert_allclose(got, ELEMENTWISE[op](X.astype(np.float64)), rtol=1e-5, atol=1e-6)


def test_binary_and_shape_ops_against_numpy():
    np.testing.assert_allclose(forward(lambda g, x: x * 2.0 + x - x), X * 2, rtol=1e-6)
    np.testing.assert_allclose(forward(lambda g, x: g.reshape(x, [3, 2])), X.reshape(3, 2))
    np.testing.assert_allclose(forward(lambda g, x: g.softmax(x, 1)),
                               np.exp(X) / np.exp(X).sum(1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(forward(lambda g, x: g.mean(x)), X.mean(), rtol=1e-6)


@pytest.mark.skipif(not has("ts_concat"), reason="this library has no transformer ops")
def test_list_arguments_against_numpy():
    np.testing.assert_allclose(forward(lambda g, x: g.concat([x, x], 0)),
                               np.concatenate([X, X], 0))
    np.testing.assert_allclose(forward(lambda g, x: g.permute(x, [1, 0])), X.T)
    np.testing.assert_allclose(forward(lambda g, x: g.reduce_sum(x, [1], keepdim=1)),
                               X.sum(1, keepdims=True), rtol=1e-6)
    halves = []
    forward(lambda g, x: halves.extend(g.split(x, 1, 3)) or halves[1])
    assert [t.shape for t in halves] == [(2, 1)] * 3


def test_an_op_the_library_lacks_is_an_error_at_call_time():
    missing = [m for m, (cname, _) in ts.OPS.items() if not has(cname)]
    if not missing:
        pytest.skip("this library has every op of the table")
    g = ts.Graph()
    for method in missing:
        with pytest.raises(ts.UnsupportedError, match=ts.OPS[method][0]):
            getattr(g, method)()
