#!/usr/bin/python3
"""Writes PyTorch's 16-bit float conversions for test_half.

Run from the repository root with Debian's interpreter (torch 1.13):

    /usr/bin/python3 tests/reference/make_half_fixtures.py [OUT_DIR]

Writes OUT_DIR/half_v1.bin (default tests/fixtures) in the format of
make_fixtures.py; bit patterns are stored as i32 (their unsigned value):

    f16_to_f32   i32[65536]  bits of torch's f32 for f16 pattern i
    bf16_to_f32  i32[65536]  the same for bf16 pattern i
    f32          i32[N]      f32 bit patterns chosen to hit every rounding case
    f32_to_f16   i32[N]      bits of torch's .to(torch.float16) of each
    f32_to_bf16  i32[N]      bits of torch's .to(torch.bfloat16) of each

The f32 patterns: both signs of every f16 value's halfway point to the next
(the tie), one f32 ulp below and above it, at every f16 exponent (all of the
subnormal range, sampled mantissas elsewhere) and the same for bf16 at every
f32 exponent; the boundaries (2^-25 and around it, 2^-24, 2^-14, 65504,
65519.99, 65520, FLT_MAX and bf16's rounding to Inf below it), signed zeros,
infinities, NaNs with payloads (quiet and signalling), f32 subnormals; and
random bits from a fixed seed.
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures import Writer  # noqa: E402

F16_SAMPLED, BF16_SAMPLED = 16, 4  # mantissas per exponent, besides the first and last three


def f32_bits(values):
    return np.asarray(values, dtype=np.float32).view(np.uint32)


def mantissas(bits, sampled, rng):
    """All of range(2**bits) when small, else its ends and a sample."""
    n = 1 << bits
    if n <= 64:
        return list(range(n))
    return sorted({0, 1, 2, n - 3, n - 2, n - 1} | set(int(m) for m in rng.integers(0, n, sampled)))


def ties(grid_values):
    """f32 bits of the halfway points between consecutive grid values (f64,
    exact in f32 for these grids), and one f32 ulp on either side."""
    lo = np.asarray(grid_values[:-1], dtype=np.float64)
    hi = np.asarray(grid_values[1:], dtype=np.float64)
    mid = f32_bits((lo + hi) / 2).astype(np.int64)
    return np.concatenate([mid - 1, mid, mid + 1])


def f16_grid_patterns(rng):
    out = []
    for e in range(0, 31):  # subnormals (e = 0) to the largest finite exponent
        for m in mantissas(10, F16_SAMPLED, rng) if e else range(1024):
            h = (e << 10) | m
            if h + 1 >= 0x7C00:  # the last finite value: special_patterns()
                continue
            pair = np.array([h, h + 1], dtype=np.uint16).view(np.float16).astype(np.float64)
            out.append(ties(pair))
            out.append(f32_bits(pair[:1]).astype(np.int64))
    return np.concatenate(out)


def bf16_grid_patterns(rng):
    out = []
    for e in range(0, 255):
        for m in mantissas(7, BF16_SAMPLED, rng):
            b = (e << 7) | m
            if b + 1 >= 0x7F80:
                continue
            pair = (np.array([b, b + 1], dtype=np.uint32) << 16).view(np.float32).astype(np.float64)
            out.append(ties(pair))
            out.append(f32_bits(pair[:1]).astype(np.int64))
    return np.concatenate(out)


def special_patterns():
    fmax = np.finfo(np.float32).max
    vals = [0.0, 2.0**-25, 2.0**-24, 1.5 * 2.0**-24, 2.0**-14, 2.0**-14 - 2.0**-25, 65504.0, 65519.0,
            65519.99609375, 65520.0, 65536.0, 1e30, fmax, np.inf]
    bits = list(f32_bits(vals))
    bits += [0x32FFFFFF, 0x33000001, 0x33400000, 0x337FFFFF,  # around 2^-25 (the tie that goes to 0)
             0x477FEFFF, 0x477FF000, 0x477FF001,              # around 65520
             0x7F7F7FFF, 0x7F7F8000, 0x7F7FFFFF,               # bf16: the last finite value and the tie to Inf
             0x00000001, 0x00000002, 0x00400000, 0x007FFFFF,   # f32 subnormals
             0x7F800001, 0x7FA12345, 0x7FBFFFFF,               # signalling NaNs with payloads
             0x7FC00000, 0x7FC00001, 0x7FD55555, 0x7FFFFFFF]   # quiet NaNs
    return np.array(bits, dtype=np.int64)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures"
    rng = np.random.default_rng(28)
    positive = np.concatenate([f16_grid_patterns(rng), bf16_grid_patterns(rng), special_patterns(),
                               rng.integers(0, 1 << 31, 2048)])
    patterns = np.unique(np.concatenate([positive, positive | (1 << 31)])).astype(np.uint32)
    x = torch.from_numpy(patterns.view(np.float32).copy())

    every = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    w = Writer()
    w.add("f16_to_f32", torch.from_numpy(every.view(np.float16).copy()).float().numpy().view(np.int32))
    w.add("bf16_to_f32", torch.from_numpy(every.view(np.int16).copy()).view(torch.bfloat16).float()
          .numpy().view(np.int32))
    w.add("f32", patterns.view(np.int32))
    w.add("f32_to_f16", x.to(torch.float16).numpy().view(np.uint16).astype(np.int32))
    w.add("f32_to_bf16", x.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16).astype(np.int32))
    w.write(os.path.join(out_dir, "half_v1.bin"))


if __name__ == "__main__":
    main()
