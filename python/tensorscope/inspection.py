"""The inspector's views from Python (docs/inspector.md): the tensors of a
held run (Model.hold) as numpy arrays, by name."""
from __future__ import annotations

import ctypes as C
import fnmatch
from collections.abc import Mapping
from typing import Any, Dict, Iterator, List

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
