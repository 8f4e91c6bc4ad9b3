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
    return m(x)  # one batch: x's samples


def has(cname):
    return hasattr(ts._capi.lib, cname)


@pytest.mark.parametrize("op", sorted(ELEMENTWISE))
def test_elementwise_ops_against_numpy(op):
    cname = ts.OPS[op][0]
    if not has(cname):
        pytest.skip(f"this library has no {cname}")
    got = forward(lambda g, x: getattr(g, op)(x))
    np.testing.assert_allclose(got, ELEMENTWISE[op](X.astype(np.float64)), rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not has("ts_abs"), reason="this library has no ts_abs")
def test_abs_of_both_signs():
    x = np.array([[-1.5, 0.0, 2.0], [3.0, -0.25, -7.0]], np.float32)
    np.testing.assert_array_equal(forward(lambda g, t: g.abs(t), x), np.abs(x))


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


@pytest.mark.skipif(not has("ts_conv2d_layer"), reason="this library has no convolutions")
def test_struct_arguments_against_numpy():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    g = ts.Graph(seed=4)
    xt = g.input("x", "f32", list(x.shape))
    conv = g.conv2d_layer(xt, 3, 3, 3, {"stride_h": 2, "stride_w": 2}, name="conv1")
    pool = g.max_pool2d(xt, {"kernel_h": 2, "kernel_w": 2})
    m = ts.inference_model(g, ts.Options(), outputs=[conv, pool])
    m.compile()
    got_conv, got_pool = m(x)
    w, b = g.tensor("conv1.weight").numpy(), g.tensor("conv1.bias").numpy()
    want = np.empty((1, 3, 2, 2), np.float64)
    for i in range(2):
        for j in range(2):
            patch = x[0, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3].astype(np.float64)
            want[0, :, i, j] = (w * patch).sum(axis=(1, 2, 3)) + b
    np.testing.assert_allclose(got_conv, want, rtol=1e-5, atol=1e-6)
    # 2x2 windows with stride 2 over the top-left 4x4 (the 5th row and column left out)
    np.testing.assert_array_equal(got_pool,
                                  x[:, :, :4, :4].reshape(1, 2, 2, 2, 2, 2).max(axis=(3, 5)))
    with pytest.raises(TypeError, match="stride_h"):
        g.max_pool2d(xt, {"kernel": 2})


@pytest.mark.skipif(not has("ts_conv_transpose2d"), reason="this library has no transposed convolution")
def test_conv_transpose2d_against_numpy():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 4, 3, 4)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 2)).astype(np.float32)  # groups 2: [C, OC/groups, KH, KW]
    b = rng.standard_normal(6).astype(np.float32)
    g = ts.Graph()
    xt = g.input("x", "f32", list(x.shape))
    p = {"stride_h": 2, "stride_w": 3, "pad_top": 1, "pad_left": 1, "output_pad_h": 1,
         "dilation_w": 2, "groups": 2}
    y = g.conv_transpose2d(xt, g.constant("w", w), g.constant("b", b), p)
    m = ts.inference_model(g, ts.Options(), outputs=[y])
    m.compile()
    got = m(x)
    # each input element scatters w * x to rows ih*2 - 1 + kh, columns iw*3 - 1 + kw*2
    OH, OW = (3 - 1) * 2 - 1 + 2 + 1 + 1, (4 - 1) * 3 - 1 + 2 * 1 + 1
    want = np.zeros((2, 6, OH, OW)) + b[None, :, None, None]
    for n, c, ih, iw, o, kh, kw in np.ndindex(2, 4, 3, 4, 3, 3, 2):
        r, q = ih * 2 - 1 + kh, iw * 3 - 1 + kw * 2
        if 0 <= r < OH and 0 <= q < OW:
            want[n, (c // 2) * 3 + o, r, q] += float(x[n, c, ih, iw]) * float(w[c, o, kh, kw])
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not has("ts_max_pool2d_indices"), reason="this library has no pooling indices")
def test_pooling_dilation_ceil_and_indices_against_numpy():
    rng = np.random.default_rng(1)
    x = rng.permutation(2 * 3 * 6 * 7).astype(np.float32).reshape(2, 3, 6, 7)  # no ties
    g = ts.Graph()
    xt = g.input("x", "f32", list(x.shape))
    # 2x2 windows dilated by 2 (3x3 spans), stride 2, ceil_mode: output rows at 0, 2 and 4,
    # the last clipped to the input (rows 4 only); columns at 0, 2, 4 (6 and 8 out of reach)
    p = {"kernel_h": 2, "kernel_w": 2, "stride_h": 2, "stride_w": 2, "dilation_h": 2,
         "dilation_w": 2, "ceil_mode": 1}
    outs = [g.max_pool2d(xt, p), g.avg_pool2d(xt, dict(p, exclude_pad=1)),
            g.max_pool2d_indices(xt, p, 0), g.max_pool2d_indices(xt, p, 1)]
    m = ts.inference_model(g, ts.Options(), outputs=outs)
    m.compile()
    mx, avg, flat, flat_cm = m(x)
    assert mx.shape == (2, 3, 3, 3)
    want_mx, want_avg = np.empty(mx.shape), np.empty(mx.shape)
    want_flat, want_cm = np.empty(mx.shape), np.empty(mx.shape)
    for i in range(3):
        for j in range(3):
            rows = [r for r in (2 * i, 2 * i + 2) if r < 6]
            cols = [c for c in (2 * j, 2 * j + 2) if c < 7]
            win = x[:, :, rows][:, :, :, cols].reshape(2, 3, -1)
            want_mx[:, :, i, j] = win.max(-1)
            want_avg[:, :, i, j] = win.mean(-1)
            k = win.argmax(-1)
            h, w = np.array(rows)[k // len(cols)], np.array(cols)[k % len(cols)]
            plane = np.arange(6).reshape(2, 3) * 42
            want_flat[:, :, i, j] = plane + h * 7 + w
            want_cm[:, :, i, j] = plane + h + w * 6
    np.testing.assert_array_equal(mx, want_mx)
    np.testing.assert_allclose(avg, want_avg, rtol=1e-6)
    np.testing.assert_array_equal(flat, want_flat)
    np.testing.assert_array_equal(flat_cm, want_cm)


@pytest.mark.skipif(not has("ts_batch_norm_layer"), reason="this library has no batch norm")
def test_buffers_are_state_but_not_parameters():
    g = ts.Graph()
    x = g.input("x", "f32", [4, 3])
    y = g.batch_norm_layer(x, "bn1")
    assert [t.name for t in y.inputs][0] == "x"
    assert set(g.parameters()) == {"bn1.weight", "bn1.bias"}
    assert set(g.state_dict()) == {"bn1.weight", "bn1.bias", "bn1.running_mean",
                                   "bn1.running_var"}
    rv = g.tensor("bn1.running_var")
    assert rv.is_buffer and not rv.is_parameter
    np.testing.assert_array_equal(rv.numpy(), np.ones(3, np.float32))


@pytest.mark.skipif(not has("ts_constant"), reason="this library has no constants")
def test_constants_hold_values_but_are_not_state():
    g = ts.Graph()
    mask = g.constant("mask", np.eye(2, dtype=np.float32))
    g.param("w", [2, 2])
    np.testing.assert_array_equal(mask.numpy(), np.eye(2))
    assert mask.op == "Const" and not mask.is_parameter and not mask.is_buffer
    assert list(g.parameters()) == ["w"] and list(g.state_dict()) == ["w"]


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_against_numpy_with_its_gradient(mode):
    """Graph.pad's values against np.pad in each mode (a crop too), and the
    gradient of sum(pad(p)): each element counted once per output that
    reads it, which np.pad of the elements' indices counts."""
    if not has("ts_pad"):
        pytest.skip("this build has no ts_pad")
    pads = [0, 2, 0, 3]  # dim 1: 2 before, 3 after (the batch dim untouched)
    np_pads = [(0, 0), (2, 3)]
    want = np.pad(X, np_pads, mode=mode, **({"constant_values": 1.5} if mode == "constant" else {}))
    got = forward(lambda g, x: g.pad(x, pads, mode, 1.5))
    np.testing.assert_allclose(got, want, rtol=0, atol=0)
    cropped = forward(lambda g, x: g.pad(x, [0, -1, 0, 1], mode, 0.0))
    np.testing.assert_array_equal(cropped[:, :-1], X[:, 1:])

    g = ts.Graph()
    p = g.param("p", [2, 3])
    loss = g.sum(g.pad(p, [1, 2, 2, 1], mode, 0.0))
    m = ts.training_model(g, ts.Options().anchor_tensor("dp", "Gradient___p", "final"),
                          optimizer=ts.SGD(lr=0.0), loss=loss)
    m()
    idx = np.arange(6).reshape(2, 3)
    spread = np.pad(idx, [(1, 2), (2, 1)], mode=mode, **({"constant_values": -1} if mode == "constant" else {}))
    counts = np.array([(spread == i).sum() for i in range(6)], np.float32).reshape(2, 3)
    np.testing.assert_array_equal(m.get_anchored_tensor("dp"), counts)


def test_pad_refuses_a_wrong_count_or_mode():
    g = ts.Graph()
    x = g.input("x", "f32", [2, 3])
    with pytest.raises(ValueError, match="3 pads for a tensor of rank 2; give 4"):
        g.pad(x, [1, 1, 1])
    with pytest.raises(ValueError, match="'mirror' is not one of constant, reflect, edge, wrap"):
        g.pad(x, [0, 1, 0, 1], "mirror")
