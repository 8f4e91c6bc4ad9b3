"""ts.DebugDump: an offline debugger dump (Options.dump_debug, `train
--dump-debug DIR`) read back as a Mapping, name -> the tensor's arrays per
step (docs/formats.md#debugger-dump)."""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Dict, Iterator, List, Tuple, Union

import numpy as np

INDEX = "index.tsv"
COLUMNS = ("step", "name", "kind", "op", "source", "position", "dtype", "shape", "path")


def _unescape(field: str) -> str:
    out, i = [], 0
    while i < len(field):
        c = field[i]
        if c == "\\" and i + 1 < len(field):
            out.append({"t": "\t", "n": "\n", "\\": "\\"}.get(field[i + 1], field[i + 1]))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


class DumpedTensor(Mapping):
    """One tensor of a dump: a Mapping step -> numpy array (loaded when
    read), with what the index says of it: .op (its op type), .source (the
    line that built it), .kind ("value" or "grad"), .position (its node's
    index in the graph), .dtype, .shape and .steps (sorted)."""

    def __init__(self, directory: str, name: str) -> None:
        self._dir = directory
        self.name = name
        self._files: Dict[int, str] = {}
        self.op = self.source = self.kind = ""
        self.position = -1
        self.dtype = np.dtype("float32")
        self.shape: Tuple[int, ...] = ()

    @property
    def steps(self) -> List[int]:
        return sorted(self._files)

    def path(self, step: int) -> str:
        """The .npy file of `step`."""
        return os.path.join(self._dir, self._files[step])

    def __getitem__(self, step: int) -> np.ndarray:
        if step not in self._files:
            raise KeyError(f"'{self.name}' was not dumped at step {step}; its steps: {self.steps}")
        return np.load(self.path(step))

    def __iter__(self) -> Iterator[int]:
        return iter(self.steps)

    def __len__(self) -> int:
        return len(self._files)

    def __repr__(self) -> str:
        return (f"DumpedTensor({self.name!r}, op={self.op!r}, source={self.source!r}, dtype={self.dtype}, "
                f"shape={self.shape}, steps={self.steps})")


class DebugDump(Mapping):
    """An offline debugger dump: DebugDump(DIR)["fc1/MatMul:0"][3] is that
    tensor at step 3 (a numpy array). Iterates names in graph order; .steps
    are the steps dumped. Reads DIR/index.tsv, which lists only complete
    files."""

    def __init__(self, directory: Union[str, os.PathLike]) -> None:
        self.directory = os.fspath(directory)
        index = os.path.join(self.directory, INDEX)
        try:
            with open(index, encoding="utf-8") as f:
                lines = f.read().split("\n")
        except FileNotFoundError:
            raise FileNotFoundError(f"{index} does not exist: {self.directory} is not a debugger dump "
                                    "(write one with Options.dump_debug or `train --dump-debug DIR`)") from None
        if not lines or tuple(lines[0].split("\t")) != COLUMNS:
            raise ValueError(f"{index}: not a debugger dump index (its first line is not {'<tab>'.join(COLUMNS)})")
        self._tensors: Dict[str, DumpedTensor] = {}
        steps = set()
        for n, line in enumerate(lines[1:], 2):
            if not line:
                continue
            cols = line.split("\t")
            if len(cols) != len(COLUMNS):
                raise ValueError(f"{index}:{n}: {len(cols)} fields, expected {len(COLUMNS)}")
            row = dict(zip(COLUMNS, cols))
            name = _unescape(row["name"])
            t = self._tensors.get(name)
            if t is None:
                t = self._tensors[name] = DumpedTensor(self.directory, name)
                t.op, t.source, t.kind = row["op"], _unescape(row["source"]), row["kind"]
                t.position = int(row["position"])
                t.dtype = np.dtype(row["dtype"])
                shape = row["shape"].strip("[]")
                t.shape = tuple(int(v) for v in shape.split(",")) if shape else ()
            step = int(row["step"])
            t._files[step] = row["path"]
            steps.add(step)
        self.steps = sorted(steps)

    def __getitem__(self, name: str) -> DumpedTensor:
        try:
            return self._tensors[name]
        except KeyError:
            import difflib
            near = difflib.get_close_matches(name, list(self._tensors), n=3)
            raise KeyError(f"'{name}' is not in the dump {self.directory}" + (f"; closest: {', '.join(near)}" if near else "")) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._tensors)

    def __len__(self) -> int:
        return len(self._tensors)

    def __repr__(self) -> str:
        return f"DebugDump({self.directory!r}: {len(self)} tensors, steps {self.steps})"
