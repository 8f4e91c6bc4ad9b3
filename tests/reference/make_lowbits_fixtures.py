"""Writes the onnx package's low-precision conversions for test_lowbits.

Run from the repository root with the onnx venv's interpreter (onnx 1.23.2,
ml_dtypes), the one tests/test_onnx_conformance.sh makes:

    build/onnx-venv/bin/python tests/reference/make_lowbits_fixtures.py [OUT_DIR]

Writes OUT_DIR/lowbits_v1.bin (default tests/fixtures) in the format of
make_fixtures.py; bit patterns are stored as i32 (their unsigned value).
For each type T (ONNX's name, lower case: float8e4m3fn, float8e4m3fnuz,
float8e5m2, float8e5m2fnuz, float8e8m0, float4e2m1, int4, uint4, int2,
uint2):

    T_to_f32         i32[2^bits]  bits of the f32 value of every code
    T_sat            i32[N]       the code onnx's reference Cast gives each
                                  f32 pattern with saturate=1 (round_mode up)
    T_nosat          i32[N]       ... with saturate=0
    float8e8m0_down_sat, _down_nosat, _nearest_sat, _nearest_nosat: e8m0's
                                  other round modes
    f32              i32[N]       the f32 patterns

The f32 patterns: every code's value of every type and the halfway points
between neighbouring codes, each with the f32 values one ulp either side,
both signs; the largest finite values, the next halfway past them and
beyond; the integers and half-integers from -40 to 40 and around 2^31
(the integer types); f32 subnormals, signed zeros, infinities, NaNs; random
bits from a fixed seed.
"""
import os
import sys

import ml_dtypes
import numpy as np
import onnx
from onnx.reference.ops.op_cast import cast_to

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures import Writer  # noqa: E402

TYPES = [  # (name, ONNX type, ml_dtypes dtype, bits)
    ("float8e4m3fn", onnx.TensorProto.FLOAT8E4M3FN, ml_dtypes.float8_e4m3fn, 8),
    ("float8e4m3fnuz", onnx.TensorProto.FLOAT8E4M3FNUZ, ml_dtypes.float8_e4m3fnuz, 8),
    ("float8e5m2", onnx.TensorProto.FLOAT8E5M2, ml_dtypes.float8_e5m2, 8),
    ("float8e5m2fnuz", onnx.TensorProto.FLOAT8E5M2FNUZ, ml_dtypes.float8_e5m2fnuz, 8),
    ("float8e8m0", onnx.TensorProto.FLOAT8E8M0, ml_dtypes.float8_e8m0fnu, 8),
    ("float4e2m1", onnx.TensorProto.FLOAT4E2M1, ml_dtypes.float4_e2m1fn, 4),
    ("int4", onnx.TensorProto.INT4, ml_dtypes.int4, 4),
    ("uint4", onnx.TensorProto.UINT4, ml_dtypes.uint4, 4),
    ("int2", onnx.TensorProto.INT2, ml_dtypes.int2, 2),
    ("uint2", onnx.TensorProto.UINT2, ml_dtypes.uint2, 2),
]


def codes_of(y, bits):
    """The codes of an ml_dtypes array (4- and 2-bit types: one per byte)."""
    return y.view(np.uint8).astype(np.int32) & ((1 << bits) - 1)


def decoded(dtype, bits):
    codes = np.arange(1 << bits, dtype=np.uint8)
    return codes.view(dtype).astype(np.float32)


def chosen_values():
    vals = []
    for _, _, dtype, bits in TYPES:
        v = decoded(dtype, bits)
        v = np.unique(v[np.isfinite(v)].astype(np.float64))
        mids = (v[:-1] + v[1:]) / 2  # exact in f64, and in f32 for these grids
        vals += [v, mids, v * 1.5, v * 2.5]
    vals.append(np.array([464.0, 248.0, 61440.0, 7.0]))  # the halfway points past the largest finite values
    vals.append(np.arange(-40, 40.5, 0.5))
    vals.append(np.array([2.0**31, 2.0**31 - 128, 2.0**24 + 2, 2.0**27 + 16, 1e10, 3.4e38, 1e-30, 1e-40, 1e-45]))
    x = np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in vals])
    x = x[np.abs(x) <= np.finfo(np.float32).max].astype(np.float32)  # e8m0's codes reach 2^127
    x = np.concatenate([x, -x])
    bits = x.view(np.uint32)
    bits = np.concatenate([bits, bits + 1, bits - 1])  # one ulp either side (|x| grows and shrinks)
    special = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7FA12345, 0x00000001,
                        0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F000000, 0x7F400000, 0x7F400001,
                        0x3F400000, 0x3F600000, 0x3FA00000], dtype=np.uint32)
    rng = np.random.default_rng(20261126)
    rand = rng.integers(0, 2**32, size=4000, dtype=np.uint64).astype(np.uint32)
    out = np.unique(np.concatenate([bits, special, rand]))
    return out


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join("tests", "fixtures")
    w = Writer()
    xb = chosen_values()
    x = xb.view(np.float32)
    w.add("f32", xb.view(np.int32))
    with np.errstate(all="ignore"):
        for name, onnx_type, dtype, bits in TYPES:
            w.add(name + "_to_f32", decoded(dtype, bits).view(np.int32))
            for sat in (1, 0):
                w.add(f"{name}_{'sat' if sat else 'nosat'}", codes_of(cast_to(x, onnx_type, bool(sat), "up"), bits))
            if name == "float8e8m0":
                for mode in ("down", "nearest"):
                    for sat in (1, 0):
                        y = cast_to(x, onnx_type, bool(sat), mode)
                        w.add(f"{name}_{mode}_{'sat' if sat else 'nosat'}", codes_of(y, bits))
    path = os.path.join(out_dir, "lowbits_v1.bin")
    w.write(path)
    print(f"wrote {path}: {len(x)} f32 patterns")


if __name__ == "__main__":
    main()
