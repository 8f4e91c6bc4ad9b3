"""Summaries and plots of numpy arrays, computed by the library."""
import ctypes as C
import sys

import numpy as np

from . import _capi
from ._capi import check, cstr, lib


def summary_line(array, name=""):
    """The one-line summary of docs/observation.md#summaries (lovely-tensors style) of any
    numeric array: `name f32[3,4] n=12 x∈[-1, 2] μ=0.5 σ=0.9` plus NaN/Inf
    and all-zeros flags. The library computes it over the values as f32."""
    a = np.asarray(array)
    if a.dtype.kind not in "fiub":
        raise TypeError(f"summary: numpy dtype {a.dtype} is not numeric")
    values = np.ascontiguousarray(a, dtype=np.float32)
    shape, _ = _capi.to_c(values, "array")  # the shape, under the array's own dtype name
    if a.dtype in _capi.DTYPES:
        shape.dtype = _capi.DTYPES.index(a.dtype)
    s = _capi.Summary()
    check(lib.ts_summarize_f32(values.ctypes.data_as(C.POINTER(C.c_float)), values.size, 1,
                               C.byref(s)))
    buf = C.create_string_buffer(1024)
    return lib.ts_summary_line(cstr(name), C.byref(shape), C.byref(s.stats), buf,
                               len(buf)).decode()


def summary(array, name="", file=None):
    """Prints summary_line(array, name)."""
    print(summary_line(array, name), file=file or sys.stdout)


def plot_gradient_histogram(path, arrays):
    """The tutorial's histogram (50 bins over log2|g| of every value, zeros
    at min - 2) of numpy arrays, as a PNG drawn by the library."""
    conv = [_capi.to_c(np.asarray(a, dtype=np.float32), f"arrays[{i}]")
            for i, a in enumerate(arrays)]
    c_arrays = (_capi.Array * max(len(conv), 1))(*[a for a, _ in conv])
    check(lib.ts_plot_gradient_histogram(cstr(path), c_arrays, len(conv)))


def save_npy(path, array):
    """Writes a .npy file with the library (never half-written)."""
    arr, keep = _capi.to_c(array, "array")
    check(lib.ts_npy_save(cstr(path), C.byref(arr)))
    del keep  # the array the library wrote


def compare(a, ref, atol=1e-5, rtol=1e-4):
    """Compares `a` with the reference `ref` element by element (same shape,
    any dtypes) with torch.isclose's rule |a - r| <= atol + rtol * |r| (the
    defaults are `tensorscope compare`'s), NaN
    matching NaN: a dict with count, mismatches, max_abs, max_abs_index,
    max_rel, min_atol, pass, and both sides' stats (`a`, `ref`)."""
    (ca, keep_a), (cr, keep_ref) = _capi.to_c(a, "a"), _capi.to_c(ref, "ref")
    r = _capi.CompareResult()
    check(lib.ts_compare_arrays(C.byref(ca), C.byref(cr), float(atol), float(rtol), C.byref(r)))
    del keep_a, keep_ref  # the arrays the library read
    out = _capi.as_dict(r, skip=("a", "ref", "pass"))
    out["pass"] = bool(getattr(r, "pass"))
    out["a"], out["ref"] = _capi.as_dict(r.a), _capi.as_dict(r.ref)
    return out
