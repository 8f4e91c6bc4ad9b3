"""int64 graph tensors from Python: fed and returned as numpy int64, every
value exact (beyond 2^31 and 2^53, the ends of int64), through the integer
ops (casts, to the narrow integer types too, arithmetic with ONNX's and
torch's divisions, comparisons, running sums, the bitwise ops, the
reductions) and the ops that move values (pad and gather_elements too),
each against numpy."""
import math

import numpy as np
import pytest

import tensorscope as ts
from graph_run import run

BIG = np.array([[2**40 + 1, -(2**53) - 1, 2**63 - 1, -(2**63) + 1],
                [2**62 + 7, -7, 0, 123456789012345]], np.int64)
MASK = np.array([[1, 1, 1, 0], [0, 1, 1, 1]], np.int64)


def has(cname):
    return hasattr(ts._capi.lib, cname)


pytestmark = pytest.mark.skipif(not has("ts_cumsum"), reason="this library has no int64 graph tensors")


def const(g, name, v):
    return g.constant(name, np.array([v], np.int64))


def test_arithmetic_is_exact_beyond_2_53():
    with np.errstate(over="ignore"):
        want_add = BIG + np.int64(2**40 + 1)
        want_mul = BIG * np.int64(3)
    got = run(lambda g, x: [g.binary("Add", x, const(g, "c", 2**40 + 1)), g.binary("Mul", x, const(g, "three", 3)),
                            g.binary("Sub", x, x)], BIG)
    assert all(a.dtype == np.int64 for a in got)
    np.testing.assert_array_equal(got[0], want_add)  # wraps as numpy's int64 does
    np.testing.assert_array_equal(got[1], want_mul)
    np.testing.assert_array_equal(got[2], np.zeros_like(BIG))


@pytest.mark.parametrize("divisor", [7, -7, 2**33 + 1])
def test_divisions_against_numpy(divisor):
    x = BIG[:, [0, 1, 3]].copy()
    x[1, 2] = -123456789012345  # a negative dividend beside a positive one
    got = run(lambda g, t: [g.binary(op, t, const(g, op, divisor)) for op in ("Div", "FloorDiv", "Mod", "FMod")], x)
    d = np.int64(divisor)
    np.testing.assert_array_equal(got[0], np.sign(x) * np.sign(d) * (np.abs(x) // np.abs(d)))  # ONNX's Div: toward zero
    np.testing.assert_array_equal(got[1], x // d)          # torch's //, numpy's floor_divide
    np.testing.assert_array_equal(got[2], np.mod(x, d))    # the divisor's sign
    np.testing.assert_array_equal(got[3], np.fmod(x, d))   # the dividend's


def test_comparisons_min_max_neg_abs():
    near = BIG + 1
    got = run(lambda g, a, b: [g.binary("Less", a, b), g.binary("Equal", a, a), g.binary("GreaterOrEqual", a, b),
                               g.binary("Max", a, b), g.binary("Min", a, b), g.unary("Neg", a), g.unary("Abs", b)],
              BIG, near)
    with np.errstate(over="ignore"):
        want = [(BIG < near), np.ones_like(BIG, bool), BIG >= near, np.maximum(BIG, near), np.minimum(BIG, near), -BIG,
                np.abs(near)]
    assert got[0].dtype == np.bool_  # comparisons are bools, as numpy's
    for k, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(a, b.astype(a.dtype), err_msg=f"output {k}")


def test_position_ids_from_the_mask():
    """Hugging Face's: attention_mask.cumsum(-1) - 1, masked_fill(mask == 0, 1)."""
    def build(g, m):
        one, zero = const(g, "one", 1), const(g, "zero", 0)
        return [g.where(g.binary("Equal", m, zero), one, g.binary("Sub", g.cumsum(m, -1), one)),
                g.cumsum(m, 1, exclusive=1, reverse=1)]
    pos, rev = run(build, MASK)
    want = MASK.cumsum(-1) - 1
    want[MASK == 0] = 1
    np.testing.assert_array_equal(pos, want)
    np.testing.assert_array_equal(rev, np.flip(np.cumsum(np.flip(MASK, 1), 1), 1) - MASK)


def test_moves_keep_every_bit():
    idx = np.array([3, -1], np.int32)

    def build(g, x):
        return [g.transpose(x, 0, 1), g.slice(x, 1, 1, 2), g.concat([x, x], 0), g.reshape(x, [8]),
                g.gather(g.reshape(x, [8]), g.constant("idx", idx), 0)]
    got = run(build, BIG)
    np.testing.assert_array_equal(got[0], BIG.T)
    np.testing.assert_array_equal(got[1], BIG[:, 1:3])
    np.testing.assert_array_equal(got[2], np.concatenate([BIG, BIG]))
    np.testing.assert_array_equal(got[3], BIG.reshape(-1))
    np.testing.assert_array_equal(got[4], BIG.reshape(-1)[idx])


def test_pad_gather_elements_keep_every_bit():
    idx = np.array([[3, 0], [-1, 2]], np.int32)

    def build(g, x):
        return [g.pad(x, [1, 2, 0, 1]), g.pad(x, [0, 1, 1, 2], "reflect"), g.pad(x, [1, 0, 1, 1], "edge"),
                g.gather_elements(x, g.constant("gi", idx), 1)]
    got = run(build, BIG)

    def np_pad(pads, mode="constant"):  # ONNX's pads (the befores, then the afters) as numpy's pairs
        return np.pad(BIG, [(pads[d], pads[2 + d]) for d in range(2)], mode)
    np.testing.assert_array_equal(got[0], np_pad([1, 2, 0, 1]))  # constant 0
    np.testing.assert_array_equal(got[1], np_pad([0, 1, 1, 2], "reflect"))
    np.testing.assert_array_equal(got[2], np_pad([1, 0, 1, 1], "edge"))
    np.testing.assert_array_equal(got[3], np.take_along_axis(BIG, np.where(idx < 0, idx + 4, idx), 1))
    with pytest.raises(ts.TensorscopeError, match="pad x - v and add v"):
        g = ts.Graph()
        g.pad(g.input("x", "i64", [2, 4]), [1, 1, 1, 1], value=5.0)


@pytest.mark.parametrize("op", ["Sum", "Prod", "Max", "Min", "SumSquare", "L1", "Mean"])
def test_integer_reductions_against_numpy(op):
    def exact(v):  # numpy's int64 (wrapping), the mean exact and toward zero
        with np.errstate(over="ignore"):
            if op == "Mean":
                return np.array([int(abs(s) // len(r)) * (1 if s >= 0 else -1) for r in v for s in [sum(int(e) for e in r)]], np.int64)
            return {"Sum": v.sum(1), "Prod": v.prod(1), "Max": v.max(1), "Min": v.min(1), "SumSquare": (v * v).sum(1),
                    "L1": np.abs(v).sum(1)}[op]
    got, = run(lambda g, x: g.reduce_int(op, x, [1]), BIG)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, exact(BIG))


def test_integer_reductions_in_double():
    """L2, LogSum and LogSumExp of int64 in double, as onnxruntime 1.32's:
    sums of v^2 and v Kahan-compensated, LogSumExp the maximum plus the log
    of its count, each toward zero and saturated."""
    x = np.array([[2**40 + 1, 2**20, 0, 0], [2**62, 2**62, 2**62, 1], [-5, 2, 0, 1], [7, 7, 3, 7]], np.int64)

    def kahan(vals):
        s = c = 0.0
        for y0 in vals:
            y = y0 - c
            t = s + y
            c, s = (t - s) - y, t
        return s

    def sat(d):
        return 2**63 - 1 if d >= 2.0**63 else -(2**63) if d <= -(2.0**63) else int(d)
    want = {"L2": [sat(math.sqrt(kahan([float(v) * float(v) for v in r]))) for r in x],
            "LogSum": [-(2**63) if kahan([float(v) for v in r]) <= 0 else sat(math.log(kahan([float(v) for v in r]))) for r in x],
            "LogSumExp": [sat(math.log(sum(1 for v in r if v == r.max())) + float(r.max())) for r in x]}
    for op, w in want.items():
        got, = run(lambda g, t: g.reduce_int(op, t, [1]), x)
        np.testing.assert_array_equal(got, np.array(w, np.int64), err_msg=op)


def test_pow_by_float32_in_double():
    x = np.array([[2**25 + 1, 2**53 + 1, 3, -8], [2, 0, 7, 2**31 + 1]], np.int64)
    e = np.array([1.0, 1.0, 0.5, 0.5], np.float32)
    g = ts.Graph()
    out = g.binary("Pow", g.input("x", "i64", [2, 4]), g.input("e", "f32", [4]))
    got = ts.inference_model(g, ts.Options(), outputs=[out])(x, e)
    got = got[0] if isinstance(got, (list, tuple)) else got
    # pow in double, toward zero: 2^53 + 1 as a double is 2^53; a negative base's root is NaN, INT64_MIN
    np.testing.assert_array_equal(got, np.array([[2**25 + 1, 2**53, 1, -(2**63)], [2, 0, 2, 46340]], np.int64))


def test_casts_as_torch():
    f = np.array([[3.9, -3.9, 5e9, np.nan]], np.float32)
    g = ts.Graph()
    x, y = g.input("x", "i64", [2, 4]), g.input("f", "f32", [1, 4])
    outs = [g.cast(x, "i32"), g.cast(x, "f32"), g.cast(y, "i64"), g.cast(g.cast(x, "i32"), "i64")]
    m = ts.inference_model(g, ts.Options(), outputs=outs)
    m.compile()
    w32, f32, i64, back = m(BIG, f)
    np.testing.assert_array_equal(w32, BIG.astype(np.int32))  # wrapped, as numpy's and torch's
    np.testing.assert_array_equal(f32, BIG.astype(np.float32))
    np.testing.assert_array_equal(i64, np.array([[3, -3, 5000000000, 0]], np.int64))  # toward zero; NaN 0
    np.testing.assert_array_equal(back, BIG.astype(np.int32).astype(np.int64))


@pytest.mark.parametrize("dtype,np_dtype", [("i8", np.int8), ("i16", np.int16), ("u8", np.uint8), ("u16", np.uint16),
                                            ("u32", np.uint32), ("u64", np.uint64)])
def test_narrow_casts_wrap_as_numpy(dtype, np_dtype):
    got, = run(lambda g, x: g.cast(x, dtype), BIG)
    want = BIG.astype(np_dtype)  # two's complement truncation
    if dtype == "u64":
        np.testing.assert_array_equal(got, want.view(np.int64))  # held in int64 as its bits
    else:
        np.testing.assert_array_equal(got, want.astype(np.int64))  # held in int32 (8, 16 bits) or int64 (u32)


def test_bitwise_in_all_64_bits():
    shifts = np.array([[0, 1, 63, 64], [5, 33, 2, 62]], np.int64)
    got = run(lambda g, x, s: [g.bitwise("And", x, s, "i64"), g.bitwise("Xor", x, s, "i64"), g.bitwise("Not", x, None, "i64"),
                               g.bitwise("ShiftLeft", x, s, "i64"), g.bitwise("ShiftRight", x, s, "i64"),
                               g.bitwise("ShiftRight", x, s, "u64")], BIG, shifts)
    inside = shifts < 64
    s = np.where(inside, shifts, 0).astype(np.uint64)
    u = BIG.view(np.uint64)
    np.testing.assert_array_equal(got[0], BIG & shifts)
    np.testing.assert_array_equal(got[1], BIG ^ shifts)
    np.testing.assert_array_equal(got[2], ~BIG)
    np.testing.assert_array_equal(got[3], np.where(inside, (u << s).view(np.int64), 0))
    np.testing.assert_array_equal(got[4], np.where(inside, BIG >> s.astype(np.int64), np.where(BIG < 0, -1, 0)))
    np.testing.assert_array_equal(got[5], np.where(inside, (u >> s).view(np.int64), 0))


def test_mixed_widths_and_unsigned_overflow_are_refused():
    g = ts.Graph()
    a, b = g.input("a", "i64", [2]), g.input("b", "i32", [2])
    with pytest.raises(ts.TensorscopeError, match="ts_cast"):
        g.binary("Add", a, b)
    g = ts.Graph()
    a = g.input("a", "i64", [2])
    m = ts.inference_model(g, ts.Options(), outputs=[g.binary("Add", a, a)])
    m.compile()
    with pytest.raises(ts.TensorscopeError, match="2\\^63-1"):
        m(np.array([1, 2**63], np.uint64))


@pytest.mark.skipif(not has("ts_binary_typed"), reason="this library has no unsigned integer ops")
def test_unsigned_inputs_and_ops_against_numpy():
    u = np.array([2**64 - 1, 2**63 + 5, 2**63, 7], np.uint64)
    v = np.array([2, 2**63 + 6, 3, 2**64 - 1], np.uint64)
    p = np.array([4294967295, 2**31, 0, 9], np.uint32)
    q = np.array([1, 2**31, 5, 4294967295], np.uint32)
    got = run(lambda g, a, b, c, d: [g.binary_typed("Div", a, b, "u64"), g.binary_typed("Mod", a, b, "u64"),
                                     g.binary_typed("Less", a, b, "u64"), g.binary_typed("Max", a, b, "u64"),
                                     g.cast_typed(a, "u64", "f32"), g.binary_typed("Add", c, d, "u32"),
                                     g.binary_typed("Greater", c, d, "u32"), a], u, v, p, q)
    with np.errstate(over="ignore"):
        want = [u // v, u % v, u < v, np.maximum(u, v), u.astype(np.float32), p + q, p > q, u]
    for w, o in zip(want, got[:4]):
        np.testing.assert_array_equal(o.view(np.uint64) if o.dtype == np.int64 else o, w)
    np.testing.assert_array_equal(got[4], want[4])  # 2**64-1 as 1.8446744e19, not -1
    assert got[5].dtype == np.int64  # uint32 values are held in int64
    np.testing.assert_array_equal(got[5], want[5].astype(np.int64))  # wrapped mod 2**32: 4294967295 + 1 is 0
    np.testing.assert_array_equal(got[6], want[6])
    assert got[7].dtype == np.uint64 and np.array_equal(got[7], u)  # a u64 input comes back as its values
    with pytest.raises(ts.TensorscopeError, match="u32"):
        g = ts.Graph()
        x = g.input("x", "u32", [2])
        ts.inference_model(g, ts.Options(), outputs=[g.binary_typed("Add", x, x, "u32")])(np.array([-1, 0], np.int64))
