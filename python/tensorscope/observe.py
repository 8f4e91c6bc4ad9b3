"""Summaries and plots of numpy arrays, computed by the library."""
from __future__ import annotations

import ctypes as C
import os
import sys
from typing import Any, Dict, Optional, Sequence, TextIO, Union

import numpy as np

from . import _capi
from ._capi import check, cstr, lib
from .options import Watch, _watch_what


def summary_line(array: Any, name: str = "") -> str:
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


def _summary_dict(s):
    """A ts_summary as the dict Model.watches() and summarize() give."""
    out = _capi.as_dict(s.stats)
    out["what"] = s.what
    if s.what & Watch.HISTOGRAM:
        out["log2_zeros"] = s.log2_zeros
        out["log2_counts"] = np.ctypeslib.as_array(s.log2_counts).copy()
        out["tb_counts"] = np.ctypeslib.as_array(s.tb_counts).copy()
    if s.what & Watch.RANGE:
        out["range"] = _capi.as_dict(s.range)
    if s.stored in (11, 12):  # a 16-bit tensor: what its rounding lost, measured
        out["stored"] = "bf16" if s.stored == 11 else "f16"
        out["stored_underflow"], out["stored_overflow"] = s.stored_underflow, s.stored_overflow
    return out


def _summary_struct(d):
    """The ts_summary of such a dict (its other keys, run and step, ignored)."""
    s = _capi.Summary()
    s.what = int(d["what"])
    for name, _ in _capi.Stats._fields_:
        setattr(s.stats, name, d[name])
    if s.what & Watch.HISTOGRAM:
        s.log2_zeros = int(d["log2_zeros"])
        C.memmove(s.log2_counts, np.ascontiguousarray(d["log2_counts"], np.int64).ctypes.data,
                  C.sizeof(s.log2_counts))
        C.memmove(s.tb_counts, np.ascontiguousarray(d["tb_counts"], np.int64).ctypes.data,
                  C.sizeof(s.tb_counts))
    if s.what & Watch.RANGE:
        for name, _ in _capi.Range._fields_:
            setattr(s.range, name, d["range"][name])
    return s


def summarize(array: Any, what: Union[Watch, int, str] = "stats") -> Dict[str, Any]:
    """The library's summary of an array's values (as f32), as a dict like
    Model.watches() gives: count, zeros, nans, pos_infs, neg_infs, mean, std,
    min, max, l2, what; with "histogram" log2_zeros, log2_counts, tb_counts;
    with "range" a `range` dict. `what`: Watch flags or "stats|histogram|range"."""
    a = np.asarray(array)
    if a.dtype.kind not in "fiub":
        raise TypeError(f"summarize: numpy dtype {a.dtype} is not numeric")
    values = np.ascontiguousarray(a, dtype=np.float32)
    s = _capi.Summary()
    check(lib.ts_summarize_f32(values.ctypes.data_as(C.POINTER(C.c_float)), values.size,
                               _watch_what(what), C.byref(s)))
    return _summary_dict(s)


def merge_summaries(a: Dict[str, Any], b: Dict[str, Any]) -> Dict[str, Any]:
    """The summary of both summaries' values, as one pass over all of them
    would give (to rounding): e.g. records or runs summarised one by one.
    Both dicts (summarize(), Model.watches()) computed the same `what`."""
    into, other = _summary_struct(a), _summary_struct(b)
    check(_capi.function("ts_summary_merge", "merge_summaries")(C.byref(into), C.byref(other)))
    return _summary_dict(into)


def summary(array: Any, name: str = "", file: Optional[TextIO] = None) -> None:
    """Prints summary_line(array, name)."""
    print(summary_line(array, name), file=file or sys.stdout)


def plot_gradient_histogram(path: Union[str, os.PathLike], arrays: Sequence[Any]) -> None:
    """The tutorial's histogram (50 bins over log2|g| of every value, zeros
    at min - 2) of numpy arrays, as a PNG drawn by the library."""
    conv = [_capi.to_c(np.asarray(a, dtype=np.float32), f"arrays[{i}]")
            for i, a in enumerate(arrays)]
    c_arrays = (_capi.Array * max(len(conv), 1))(*[a for a, _ in conv])
    check(lib.ts_plot_gradient_histogram(cstr(os.fspath(path)), c_arrays, len(conv)))


def save_npy(path: Union[str, os.PathLike], array: Any) -> None:
    """Writes a .npy file with the library (never half-written)."""
    arr, keep = _capi.to_c(array, "array")
    check(lib.ts_npy_save(cstr(os.fspath(path)), C.byref(arr)))
    del keep  # the array the library wrote


def compare(a: Any, ref: Any, atol: float = 1e-5, rtol: float = 1e-4) -> Dict[str, Any]:
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


JUMP_FACTOR, JUMP_FLOOR = 10.0, 1e-5  # TS_JUMP_FACTOR, TS_JUMP_FLOOR


def _load_dump(d: Any, what: str) -> Dict[str, Any]:
    """A dump as {name: array} in the order it records: a mapping as given,
    an .npz in member order, a directory of .npy in its order.txt's order
    (`tensorscope train --dump-npy` writes it), else by file name."""
    if isinstance(d, dict):
        return d
    path = os.fspath(d)
    if os.path.isdir(path):
        stems = sorted(f[:-4] for f in os.listdir(path) if f.endswith(".npy"))
        order, seen = [], set()
        if os.path.exists(os.path.join(path, "order.txt")):
            with open(os.path.join(path, "order.txt")) as f:
                for line in f:
                    stem, _, name = line.rstrip("\r\n").partition("\t")
                    if name and stem in stems and stem not in seen:
                        order.append((stem, name))
                        seen.add(stem)
        order += [(s, s) for s in stems if s not in seen]
        return {name: np.load(os.path.join(path, stem + ".npy")) for stem, name in order}
    if os.path.isfile(path):
        with np.load(path) as z:
            return {k: z[k] for k in z.files}
    raise FileNotFoundError(f"{what}: {path} is neither an .npz file nor a directory of .npy files")


def compare_dumps(a: Any, b: Any, jump: float = JUMP_FACTOR,
                  plot: Optional[Union[str, os.PathLike]] = None) -> Dict[str, Any]:
    """Ranks the tensors of dump `a` (a low-precision run) by the precision
    they lost against dump `b` (its f32 twin), as `tensorscope compare --a
    A --b B --rank` does. A dump is a dict {name: array} (its order is the
    graph order), an .npz, or a directory of .npy files. Returns
    {"values": rows in graph order, "gradients": rows in backward order,
    "optimizer_state": rows, "first_jump": {"values": row or None,
    "gradients": row or None}, "only_a": names, "only_b": names}; a row is
    {name, rel_error (||a - b|| / ||b||), max_abs, rank (1: the largest
    error of its group), threshold}. The first jump is the first tensor
    whose error exceeds `jump` x the median of those before it and
    JUMP_FLOOR, as `tensorscope compare --rank` does. `plot`: a PNG of the errors."""
    da, db = _load_dump(a, "a"), _load_dump(b, "b")
    common = [n for n in db if n in da]
    if not common:
        raise ValueError("compare_dumps: no tensor name is in both dumps (are they dumps of the same model?)")
    groups: Dict[str, list] = {"values": [], "gradients": [], "optimizer_state": []}
    for name in common:
        r = compare(da[name], db[name])
        kind = ("gradients" if name.startswith("Gradient___") else
                "optimizer_state" if "___" in name else "values")
        groups[kind].append({"name": name, "rel_error": r["rel_error"], "max_abs": r["max_abs"]})
    groups["gradients"].reverse()  # recorded beside their values: the backward runs in reverse
    first: Dict[str, Any] = {}
    for kind, rows in groups.items():
        n = len(rows)
        err = (C.c_double * max(n, 1))(*[r["rel_error"] for r in rows])
        bar = (C.c_double * max(n, 1))()
        index, median = C.c_int(-1), C.c_double(0)
        check(lib.ts_compare_first_jump(err, n, float(jump), JUMP_FLOOR, C.byref(index),
                                        C.byref(median), bar))
        by_error = sorted(range(n), key=lambda i: (-np.nan_to_num(rows[i]["rel_error"], nan=np.inf), i))
        for rank, i in enumerate(by_error, 1):
            rows[i]["rank"], rows[i]["threshold"] = rank, bar[i]
        if kind != "optimizer_state":
            first[kind] = dict(rows[index.value], median_before=median.value) if index.value >= 0 else None
    if plot is not None:
        rows = groups["values"] + groups["gradients"] + groups["optimizer_state"]
        jumps = [r for r in (first["values"], first["gradients"]) if r is not None]
        mark = next((i for i, r in enumerate(rows) if jumps and r["name"] == jumps[0]["name"]), -1)
        names = (C.c_char_p * max(len(rows), 1))(*[cstr(r["name"]) for r in rows])
        errs = (C.c_double * max(len(rows), 1))(*[r["rel_error"] for r in rows])
        bars = (C.c_double * max(len(rows), 1))(*[r["threshold"] for r in rows])
        check(lib.ts_plot_precision(cstr(os.fspath(plot)), names, errs, bars, len(rows), mark))
    return dict(groups, first_jump=first, only_a=[n for n in da if n not in db],
                only_b=[n for n in db if n not in da])


_DIFF_STATE = ("bit-equal", "close", "differs")
_PHASES = ("forward", "backward", "update")


def diff_runs(a: Any, b: Any, atol: float = 1e-5, rtol: float = 1e-4, graph: Any = None) -> Dict[str, Any]:
    """A diff of two runs of one model, as `tensorscope diff A B` prints it.
    A dump is a dict {name: array} (its order is the graph order), an .npz,
    or a directory of .npy files (`train --dump-npy`). Tensors pair by name
    in graph order: the forward's values, the backward's gradients
    (Gradient___X, in the order the backward computes them), then the
    update's (Accum___X, UpdatedVar___X, ...); the order is the `graph`'s (a
    tensorscope Graph of the model) when given, else the order `a` records.
    Each pair is "bit-equal" (same dtype, shape and bytes: hash_a ==
    hash_b), "close" (|a - b| <= atol + rtol * |b| everywhere) or "differs".
    Returns {"tensors": rows in that order, "first_not_bit_equal": row or
    None, "first_difference": row or None, "counts": {state: n},
    "only_a": names, "only_b": names}; a row is {name, phase, state,
    hash_a, hash_b, max_abs, max_rel}, and the two first rows carry, when
    `graph` is given, op, location and inputs ([{name, state}], the op's
    inputs, or for a gradient the value it is of)."""
    da, db = _load_dump(a, "a"), _load_dump(b, "b")
    index = {t.name: i for i, t in enumerate(graph.tensors())} if graph is not None else {}
    rows = []
    for rec, name in enumerate(n for n in da if n in db):
        prefix, sep, base = name.partition("___")
        base = base if sep else name
        phase = 0 if not sep else 1 if prefix == "Gradient" else 2
        pos = index.get(base, len(index) + rec)
        (ca, keep_a), (cb, keep_b) = _capi.to_c(da[name], "a"), _capi.to_c(db[name], "b")
        r = _capi.DiffResult()
        check(lib.ts_diff_arrays(C.byref(ca), C.byref(cb), float(atol), float(rtol), C.byref(r)))
        del keep_a, keep_b
        rows.append({"name": name, "phase": _PHASES[phase], "state": _DIFF_STATE[r.kind],
                     "hash_a": f"{r.hash_a:016x}", "hash_b": f"{r.hash_b:016x}",
                     "max_abs": r.cmp.max_abs, "max_rel": r.cmp.max_rel,
                     "_key": (phase, -pos if phase == 1 and (base in index or not index) else pos)})
    if not rows:
        raise ValueError("diff_runs: no tensor name is in both dumps (are they dumps of the same model?)")
    rows.sort(key=lambda r: r.pop("_key"))
    state = {r["name"]: r["state"] for r in rows}

    def first(pred):
        row = next((r for r in rows if pred(r)), None)
        if row is None or graph is None:
            return row
        value = row["name"][len("Gradient___"):] if row["phase"] == "backward" else row["name"]
        t = next((t for t in graph.tensors() if t.name == value), None)
        if t is None:
            return row
        ins = [value] if value != row["name"] else [i.name for i in t.inputs]
        return dict(row, op=t.op, location=t.location,
                    inputs=[{"name": n, "state": state.get(n, "not in both dumps")} for n in ins])

    return {"tensors": rows, "first_not_bit_equal": first(lambda r: r["state"] != "bit-equal"),
            "first_difference": first(lambda r: r["state"] == "differs"),
            "counts": {s: sum(r["state"] == s for r in rows) for s in _DIFF_STATE},
            "only_a": [n for n in da if n not in db], "only_b": [n for n in db if n not in da]}


MEMORY_CLASSES = ("activations", "gradients", "optimizer state", "parameters", "workspace")  # ts_memory_class


def memory_plan(model: Any, plot: Optional[Union[str, os.PathLike]] = None) -> Dict[str, Any]:
    """Where a compiled model's memory goes over one step, as `tensorscope
    memory` prints it (docs/observation.md#where-memory-goes): compile's
    memory plan as a liveness report. Returns {"points": [{point, phase
    ("forward", "backward", "update"), op, tensor, location}], "buffers":
    [{name, class, bytes, start, end, op, location}] (live over points
    start..end), "timeline": {class: [live bytes per point]}, "peak":
    {point, bytes, live: buffers live there, largest first}}. `plot`: a PNG
    (or .svg) of the timeline, a stacked area per class."""
    h = model._h
    n, points = C.c_size_t(0), C.c_int64(0)
    check(lib.ts_model_memory_plan(h, None, 0, C.byref(n), C.byref(points)))
    bufs = (_capi.MemoryBuffer * max(n.value, 1))()
    check(lib.ts_model_memory_plan(h, bufs, n.value, C.byref(n), C.byref(points)))
    loc = C.create_string_buffer(1024)

    def where(t):
        return lib.ts_tensor_location(t, loc, len(loc)).decode() if t else ""

    pts = []
    for p in range(points.value):
        phase = C.c_int(0)
        t = lib.ts_model_memory_point(h, p, C.byref(phase))
        pts.append({"point": p, "phase": ("forward", "backward", "update")[phase.value],
                    "op": lib.ts_tensor_op(t).decode() if t else None,
                    "tensor": lib.ts_tensor_name(t).decode() if t else None, "location": where(t)})
    buffers = []
    for b in bufs[:n.value]:
        name = lib.ts_tensor_name(b.tensor).decode() if b.tensor else "(kernel workspace)"
        buffers.append({"name": ("Gradient___" if b.gradient else "") + name, "class": MEMORY_CLASSES[b.mclass],
                        "bytes": b.bytes, "start": b.start, "end": b.end,
                        "op": lib.ts_tensor_op(b.tensor).decode() if b.tensor else None, "location": where(b.tensor)})
    timeline = {c: [0] * points.value for c in MEMORY_CLASSES}
    for b in buffers:
        for p in range(b["start"], min(b["end"], points.value - 1) + 1):
            timeline[b["class"]][p] += b["bytes"]
    totals = [sum(timeline[c][p] for c in MEMORY_CLASSES) for p in range(points.value)]
    peak = max(range(points.value), key=lambda p: (totals[p], -p)) if totals else 0
    live = sorted((b for b in buffers if b["start"] <= peak <= b["end"]), key=lambda b: -b["bytes"])
    if plot is not None:
        flat = [float(v) for c in MEMORY_CLASSES for v in timeline[c]]
        names = (C.c_char_p * len(MEMORY_CLASSES))(*[cstr(c) for c in MEMORY_CLASSES])
        backward_at = next((q["point"] for q in pts if q["phase"] != "forward"), -1)
        check(lib.ts_plot_memory(cstr(os.fspath(plot)), cstr("live memory over one step"),
                                 (C.c_double * max(len(flat), 1))(*flat), names, len(MEMORY_CLASSES),
                                 points.value, backward_at, peak))
    return {"points": pts, "buffers": buffers, "timeline": timeline,
            "peak": {"point": peak, "bytes": totals[peak] if totals else 0, "live": live}}


# ---- the memory watcher (docs/observation.md#memory)


def _memory_dict(u):
    return {"rss": u.rss, "pss": u.pss, "uss": u.uss}


def memory_watch_stats() -> Dict[str, Any]:
    """What the memory watcher has seen (bytes; -1 unknown): latest and
    peak {rss, pss, uss}, latest_s and peak_rss_s (seconds after its
    start), samples, processes (this one and its descendants in the latest
    sample), period_ms, running. StateError when it never ran."""
    st = _capi.MemwatchStats()
    check(_capi.function("ts_memwatch_latest", "memory_watch_stats")(C.byref(st)))
    return {"latest": _memory_dict(st.latest), "peak": _memory_dict(st.peak), "latest_s": st.latest_s,
            "peak_rss_s": st.peak_rss_s, "samples": st.samples, "processes": st.processes,
            "period_ms": st.period_ms, "running": bool(st.running)}


class memory_watch:
    """Samples RSS, PSS and USS of this process and its children every
    `period_ms` on a thread of the library's (the CLI's --watch-memory):
    peaks in the log when it stops, the metrics report, a trace's counter
    track. A context manager (`with ts.memory_watch(20) as w: ...;
    w.stats()`), or start() / stop(). One watcher per process."""

    def __init__(self, period_ms: int = 100) -> None:
        self.period_ms = int(period_ms)

    def start(self) -> "memory_watch":
        check(_capi.function("ts_memwatch_start", "memory_watch")(self.period_ms))
        return self

    def stop(self) -> None:
        _capi.lib.ts_memwatch_stop()

    def stats(self) -> Dict[str, Any]:
        return memory_watch_stats()

    def __enter__(self) -> "memory_watch":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
