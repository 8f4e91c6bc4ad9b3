"""16-bit float inputs: a NumPy float16 array feeds an f32 input exactly, a
bf16 array is given as its bits (ts.bf16(uint16 array), or an
ml_dtypes.bfloat16 array where ml_dtypes is installed); both widen to f32
bit for bit (the values are every finite 16-bit pattern's)."""
import numpy as np
import pytest

import tensorscope as ts


def identity_model(n):
    g = ts.Graph()
    x = g.input("x", "f32", [n])
    y = g.cast(x, "f32")  # a copy: the output is x as the run read it
    return ts.inference_model(g, outputs=[y])


def finite_patterns(exp_mask):
    bits = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    return bits[(bits & exp_mask) != exp_mask]  # NaN and Inf aside: their exactness is test_half's


def test_float16_input_is_exact():
    h = finite_patterns(0x7C00).view(np.float16)
    m = identity_model(h.size)
    m.compile(h)  # an f32 input takes f16 data
    out = np.asarray(m(h))
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out.view(np.uint32), h.astype(np.float32).view(np.uint32))


def test_bf16_bits_input_is_exact():
    bits = finite_patterns(0x7F80)
    m = identity_model(bits.size)
    out = np.asarray(m(ts.bf16(bits)))
    np.testing.assert_array_equal(out.view(np.uint32), bits.astype(np.uint32) << 16)
    a = ts.bf16(bits.reshape(2, -1))
    assert a.shape == (2, bits.size // 2) and a.dtype == "bf16"


def test_bf16_refuses_other_dtypes():
    with pytest.raises(TypeError, match="uint16"):
        ts.bf16(np.ones(3, np.float32))


def test_ml_dtypes_bfloat16_input():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.array([1 / 3, -2.5, 1e30, 2.0 ** -133], np.float32)
    b = x.astype(ml_dtypes.bfloat16)
    out = np.asarray(identity_model(4)(b))
    np.testing.assert_array_equal(out, b.astype(np.float32))
