"""tensorscope: train on a compiled static graph and see any tensor in it.

A thin layer over the tensorscope library with PopTorch's vocabulary and
numpy arrays in and out (docs/python.md):

    import numpy as np, tensorscope as ts
    g = ts.Graph(seed=0)
    x = g.input("x", "f32", [64, 1, 28, 28]); labels = g.input("labels", "i32", [64])
    h = g.relu(g.linear(g.flatten(x, 1), 320, "fc1"))
    loss = g.nll_loss(g.log_softmax(g.linear(h, 10, "fc3"), 1), labels)
    loss.name = "loss"
    opts = ts.Options().device_iterations(4).anchor_tensor("g", "Gradient___fc3.bias", "all")
    opts.watch("fc1/*")                       # every tensor of scope fc1
    model = ts.training_model(g, opts, optimizer=ts.SGD(lr=0.01, momentum=0.9))
    model.compile()
    print(model.get_tensor_names())
    loss = model(xs, ys)                      # xs f32[4*64,1,28,28], ys i32[4*64]
    model.get_anchored_tensor("g")            # f32[4,10], a copy

Errors of the library are raised as TensorscopeError subclasses carrying its
message. Arrays returned are copies (valid after the next run); inputs are
read in place when C-contiguous; Tensor.view() is the zero-copy exception.
"""
from __future__ import annotations

from typing import Callable, Optional, Tuple, Union

from . import _capi
from ._capi import bf16
from ._capi import lib as _lib
from .data import DataLoader, Dataset
from .debug_dump import DebugDump
from .errors import (CancelledError, DistError, FileError, FormatError, InternalError, InvalidArgumentError,
                     NotFoundError, NumericsError, OutOfMemoryError, ShapeError, SpikeError, StateError,
                     TensorscopeError, UnsupportedError)
from .graph import OPS, Graph, Tensor, print_tensor
from .inspection import Inspection
from .model import Model, inference_model, metrics_report, training_model
from .observe import (compare, compare_dumps, diff_runs, memory_plan, memory_watch, memory_watch_stats, merge_summaries, plot_gradient_histogram,
                      save_npy, summarize, summary, summary_line)
from .options import SGD, Adam, AdamW, LRSchedule, Options, OutfeedQueue, OutputMode, Record, Watch

__version__ = _lib.ts_version().decode()
__all__ = ["Adam", "AdamW", "bf16", "CancelledError", "DataLoader", "Dataset", "DebugDump", "DistError", "FileError", "FormatError", "Graph",
           "Inspection", "InternalError", "InvalidArgumentError", "LRSchedule", "Model", "NotFoundError", "NumericsError",
           "OPS", "Options", "OutOfMemoryError", "OutfeedQueue", "OutputMode", "Record", "SGD",
           "ShapeError", "SpikeError", "StateError", "Tensor", "TensorscopeError", "UnsupportedError",
           "Watch", "compare", "compare_dumps", "diff_runs", "memory_plan", "inference_model", "merge_summaries", "metrics_report", "metrics_reset",
           "plot_gradient_histogram", "dist_init", "dist_finalize", "print_tensor", "save_npy", "set_log_callback",
           "set_limit", "get_limit", "has_feature", "memory_watch", "memory_watch_stats", "set_log_vmodule", "check_device", "describe_device", "describe_gpus", "set_log_level", "summarize", "summary", "summary_line", "training_model"]


def set_log_level(level: int) -> None:
    """0 off, 1 error, 2 warn, 3 info (default), 4 debug, 5 trace; print ops'
    lines (level 6 in a log callback) show at every level but 0."""
    _lib.ts_set_log_level(int(level))


def set_log_vmodule(spec: str) -> None:
    """Raises the log level of named modules only (TS_LOG_VMODULE):
    "onnx=5,exec=4"; modules: docs/observation.md#diagnostics. An unknown
    module or level is an InvalidArgumentError listing them."""
    _capi.check(_capi.function("ts_set_log_vmodule", "set_log_vmodule")(_capi.cstr(spec)))


_LIMITS = {"import": 0, "archive": 1, "compile": 2}  # ts_limit


def _limit_id(which):
    if which not in _LIMITS:
        raise InvalidArgumentError(f"unknown limit {which!r}: one of {', '.join(sorted(_LIMITS))}")
    return _LIMITS[which]


def has_feature(name: str) -> bool:
    """Whether this build has an optional feature: "plots", "onnx",
    "tensorboard", "npz", "debug-bundle", "unwind", "mpi", "cuda"."""
    return bool(_lib.ts_has_feature(_capi.cstr(name)))


def check_device(name: str) -> None:
    """Returns when `name` ("cpu", "cuda", "cuda:N") can run models here;
    otherwise raises what a model on it would (ValueError for a name
    tensorscope does not know, UnsupportedError saying why it is not
    here: built without CUDA, no GPU, no GPU N)."""
    _capi.check(_lib.ts_device_check(_capi.cstr(name)))


def describe_device(name: str) -> str:
    """`name` ("cpu", "cuda", "cuda:N") in one line, for bug reports:
    "cuda:0: NVIDIA H200, sm_90, 139.8 GiB (139.2 free), 132 SMs, driver
    13.0, runtime 13.0, cuBLAS 13.0.2, PCI ..."; raises as check_device
    does for a device that is not here (`tensorscope info --device`)."""
    buf = _capi.C.create_string_buffer(1024)
    _capi.check(_capi.function("ts_device_describe", "describe_device")(_capi.cstr(name), buf, len(buf)))
    return buf.value.decode("utf-8", "replace")


def describe_gpus() -> list[str]:
    """Every GPU CUDA sees, a line each as describe_device writes it, or one
    line saying why there is none (built without CUDA, no GPU, no driver)."""
    buf = _capi.C.create_string_buffer(8192)
    _capi.check(_capi.function("ts_gpus_describe", "describe_gpus")(buf, len(buf), None))
    return buf.value.decode("utf-8", "replace").splitlines()


def set_limit(which: str, size: Union[int, str]) -> None:
    """What reading one untrusted file may cost, beyond the bytes it holds:
    "import", the constants one ONNX import folds (default 1 GiB,
    TS_MAX_IMPORT_BYTES), or "archive", the bytes one .npz inflates to over
    the arrays read (default 2 GiB, TS_MAX_ARCHIVE_BYTES); and "compile",
    the buffers one compile lays out (default: the machine's memory,
    TS_MAX_COMPILE_BYTES). size is a byte count or a string such as "8G".
    A file or model that would pass it is refused with a FormatError naming
    the limit."""
    if isinstance(size, str):
        n = _capi.C.c_uint64()
        _capi.check(_lib.ts_parse_size(size.encode(), _capi.C.byref(n)))
        size = n.value
    _capi.check(_lib.ts_set_limit(_limit_id(which), int(size)))


def get_limit(which: str) -> int:
    """The limit in bytes ("import", "archive" or "compile"), as set_limit describes."""
    return int(_lib.ts_get_limit(_limit_id(which)))


_log_fn = None  # the callback the library holds


def set_log_callback(fn: Optional[Callable[[int, str], None]]) -> None:
    """Routes the library's log lines (print ops included) to fn(level,
    message), e.g. to show them in a notebook; None restores stderr. fn runs
    on whichever thread logs and must not call back into tensorscope."""
    global _log_fn
    if fn is None:
        _lib.ts_set_log_callback(_capi.LOG_FN(), None)
        _log_fn = None
        return
    new = _capi.LOG_FN(lambda _user, level, message: fn(level, message.decode("utf-8",
                                                                                  "replace")))
    _lib.ts_set_log_callback(new, None)
    _log_fn = new


def dist_init() -> Tuple[int, int]:
    """Joins the MPI job this process was started in (mpirun -np R python
    ...); outside one it does nothing. Returns (rank, size)."""
    _capi.check(_lib.ts_dist_init(None, None))
    return _lib.ts_dist_rank(), _lib.ts_dist_size()


def dist_finalize() -> None:
    """Leaves the MPI job (after a DistError it ends every rank)."""
    _capi.check(_lib.ts_dist_finalize())


def metrics_reset() -> None:
    """Zeroes the metrics report's counters and timings."""
    _lib.ts_metrics_reset()
