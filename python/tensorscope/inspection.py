"""The inspector's views from Python (docs/inspector.md): the tensors of a
held run (Model.hold) as numpy arrays, by name."""
from __future__ import annotations

import ctypes as C
import fnmatch
from collections.abc import Mapping
from typing import Any, Dict, Iterator, List, NamedTuple, Tuple

import numpy as np

from . import _capi
from ._capi import check, cstr
from .errors import NotFoundError
from .observe import summarize, summary_line


class Inspection(Mapping):
    """Every tensor of a model's last held run, by name, as numpy arrays
    (copies made when read): inputs, activations and `Gradient___` tensors
    as the run produced them, parameters, buffers and optimizer state at
    their current values. It reads the model when a value is asked for:
    a later held run replaces what it shows (`dict(insp)` keeps a copy)."""

    def __init__(self, model: Any) -> None:
        self._model = model
        fn = _capi.function("ts_model_held_names", "Model.inspect")
        ptr, n = _capi.STRS(), C.c_size_t()
        with model._lock:
            check(fn(model._h, C.byref(ptr), C.byref(n)))
            self._names = _capi.strings(ptr, n.value)

    def __getitem__(self, name: str) -> np.ndarray:
        a = _capi.Array()
        with self._model._lock:
            try:
                check(_capi.lib.ts_model_held(self._model._h, cstr(name), C.byref(a)))
            except NotFoundError as e:  # a Mapping's missing key (the message names the closest)
                raise KeyError(str(e)) from None
            return _capi.to_numpy(a, name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and bool(_capi.lib.ts_model_is_held(self._model._h, cstr(name)))

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        shown = ", ".join(self._names[:6]) + (", ..." if len(self._names) > 6 else "")
        return f"<Inspection of {len(self._names)} tensors: {shown}>"

    def names(self, pattern: str = "*") -> List[str]:
        """The held names matching a glob (`fc1*`, `Gradient___*`)."""
        return [n for n in self._names if fnmatch.fnmatchcase(n, pattern)]

    def grad(self, name: str) -> np.ndarray:
        """The gradient of `name` (`Gradient___<name>`) in the held run."""
        return self["Gradient___" + name]

    def where(self, name: str) -> str:
        """The op that made `name` and the source line that built it."""
        buf = C.create_string_buffer(1024)
        check(_capi.function("ts_model_tensor_origin", "Inspection.where")(
            self._model._h, cstr(name), buf, len(buf)))
        return buf.value.decode("utf-8", "replace")

    def stats(self, name: str) -> Dict[str, Any]:
        """The library's summary of `name` (stats, histogram and the
        fp16/bf16/fp8 ranges), as ts.summarize gives it."""
        return summarize(self[name], "stats|histogram|range")

    def summary(self, name: str) -> str:
        """The one-line summary of `name` (lovely-tensors style)."""
        return summary_line(self[name], name)

    def eval(self, expr: str) -> np.ndarray:
        """The inspector's `eval` (docs/inspector.md#eval): a numpy-style
        expression over the held tensors, by name, computed by the library
        in float32: `insp.eval("fc1.weight.T @ x[0]")`,
        `insp.eval("where(fc1.bias > 0)")` (indices as np.argwhere gives
        them). A bad expression raises the library's error, which names
        the column."""
        fn = _capi.function("ts_model_held_eval", "Inspection.eval")
        a = _capi.Array()
        with self._model._lock:
            check(fn(self._model._h, cstr(expr), C.byref(a)))
            try:
                return _capi.to_numpy(a, expr)
            finally:
                _capi.lib.ts_eval_free(C.byref(a))

    def before(self, name: str) -> np.ndarray:
        """What the held run read: a parameter's value before the run's
        update (the base to change for `rerun`), any other tensor as
        `insp[name]`."""
        fn = _capi.function("ts_model_held_before", "Inspection.before")
        a = _capi.Array()
        with self._model._lock:
            check(fn(self._model._h, cstr(name), C.byref(a)))
            return _capi.to_numpy(a, name)

    def rerun(self, name: str, value: Any) -> "Rerun":
        """The inspector's `rerun` (docs/inspector.md#rerun): the held run
        again with input or parameter `name` set to `value` (its shape), on
        the side: the model's weights, optimizer state and step count are
        left as they are. Returns the loss it computes, the held run's, and
        every held tensor that differs from the held run, in the order the
        rerun made them: (name, largest absolute difference, values
        changed). To change one value of a weight, start from what the
        held run read: `w = insp.before("fc1.weight"); w[0, 3] = 0.5`."""
        fn = _capi.function("ts_model_rerun", "Inspection.rerun")
        arr, keep = _capi.to_c(value, name)
        r = _capi.RerunResult()
        with self._model._lock:
            check(fn(self._model._h, cstr(name), C.byref(arr), C.byref(r)))
            diffs = [(r.diffs[i].name.decode("utf-8", "replace"), r.diffs[i].max_abs_diff, r.diffs[i].changed)
                     for i in range(r.n_diffs)]
        del keep
        return Rerun(r.loss, r.held_loss, diffs)


class Rerun(NamedTuple):
    """What Inspection.rerun found: the rerun's loss, the held run's, and
    the tensors that differ (name, max |difference|, values changed)."""
    loss: float
    held_loss: float
    diffs: List[Tuple[str, float, int]]
