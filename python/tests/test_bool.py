"""bool graph tensors from Python: comparisons, logic, casts and Where,
fed and returned as numpy bool, each against numpy; and a torch module's
bool outputs and bool mask input (the ONNX capture) returned as PyTorch's."""
import numpy as np
import pytest

import tensorscope as ts
from graph_run import run

X = np.array([[0.25, -1.0, 0.0, np.nan, 3.0], [0.75, 0.5, -0.0, np.inf, 0.1]], np.float32)
MASK = np.array([[True, False, False, True, True], [False, True, False, False, True]])


def test_comparisons_and_logic_are_numpy_bools():
    def build(g, x, m):
        half = g.constant("half", np.array([0.5], np.float32))
        lt = g.binary("Less", x, half)
        assert lt.dtype == np.bool_ and m.dtype == np.bool_
        return [lt, g.binary("And", lt, g.unary("Not", m)), g.binary("Or", lt, m), g.binary("Xor", lt, m), g.unary("IsNaN", x),
                g.cast(x, "bool"), g.where(m, x, half), g.cast(m, "f32"), g.transpose(g.binary("Or", lt, m), 0, 1)]
    got = run(build, X, MASK)
    with np.errstate(invalid="ignore"):
        lt = X < 0.5
    want = [lt, lt & ~MASK, lt | MASK, lt ^ MASK, np.isnan(X), X.astype(bool), np.where(MASK, X, np.float32(0.5)),
            MASK.astype(np.float32), (lt | MASK).T]
    for n, (a, w) in enumerate(zip(got, want)):
        assert a.dtype == w.dtype, (n, a.dtype, w.dtype)
        np.testing.assert_array_equal(a, w, err_msg=f"output {n}")


def test_arithmetic_on_bool_says_to_cast():
    g = ts.Graph()
    m = g.input("m", "bool", [2, 5])
    x = g.input("x", "f32", [2, 5])
    with pytest.raises(ts.TensorscopeError, match="ts_cast"):
        g.add(m, x)


def test_a_bool_input_takes_bools_and_refuses_other_values():
    g = ts.Graph()
    m = g.input("m", "bool", [2, 5])
    model = ts.inference_model(g, ts.Options(), outputs=[g.unary("Not", m)])
    np.testing.assert_array_equal(model(MASK), ~MASK)
    np.testing.assert_array_equal(model(MASK.astype(np.int64)), ~MASK)  # integers 0 and 1: exactly the bools
    with pytest.raises(ts.TensorscopeError, match=r"'m' holds 2"):
        model(MASK.astype(np.int32) * 2)
    with pytest.raises(ts.TensorscopeError, match="must be bool data"):
        model(MASK.astype(np.float32))


torch = None
try:
    import torch
except ImportError:
    pass


@pytest.mark.skipif(torch is None or not hasattr(ts._capi.lib, "ts_graph_from_onnx"),
                    reason="needs PyTorch and the ONNX import")
def test_a_torch_modules_bool_outputs_and_mask_input():
    class Masks(torch.nn.Module):
        def forward(self, x, keep):
            pos = x > 0
            both = pos & keep
            causal = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).tril()
            seen = (x.unsqueeze(1) * causal).sum(-1)
            return both, x.masked_fill(~both, -1.0), torch.logical_or(~pos, keep), seen
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, 6, generator=gen)
    keep = torch.rand(4, 6, generator=gen) > 0.3
    net = Masks().eval()
    with torch.no_grad():
        want = net(x, keep)
    got = ts.inference_model(net, example_inputs=(x, keep))(x.numpy(), keep.numpy())
    for n, (a, w) in enumerate(zip(got, want)):
        a = np.asarray(a)
        assert a.dtype == w.numpy().dtype, (n, a.dtype, w.dtype)
        # the masked sums may add in another order than PyTorch's: a float's rounding of the O(1) terms
        np.testing.assert_allclose(a, w.numpy(), rtol=1e-6, atol=1e-6, err_msg=f"output {n}")
