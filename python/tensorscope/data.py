"""Datasets and loaders of the library (MNIST, arrays), batches as numpy."""
from __future__ import annotations

import ctypes as C
import os
from typing import Iterator, Tuple, Union

import numpy as np

from . import _capi
from ._capi import check, cstr, lib


class Dataset:
    """Images f32 [N,1,28,28] and labels i32 [N] held by the library."""

    def __init__(self, handle: int) -> None:
        self._owned = _capi.Owned(handle, lib.ts_dataset_free)  # loaders of it pin it

    def __repr__(self) -> str:
        x, y = _capi.Array(), _capi.Array()
        check(lib.ts_dataset_arrays(self._h, C.byref(x), C.byref(y)))
        return f"<Dataset of {len(self)} samples: x {_capi.shape_str(x)}, labels {_capi.shape_str(y)}>"

    @property
    def _h(self):
        return self._owned.ptr

    @classmethod
    def mnist(cls, directory: Union[str, os.PathLike]) -> Dataset:
        """MNIST from `directory` (t10k- or train- gzip'd IDX files),
        normalised as (x/255 - 0.5)/0.5."""
        h = C.c_void_p()
        check(lib.ts_dataset_load_mnist(C.byref(h), cstr(os.fspath(directory))))
        return cls(h.value)

    @classmethod
    def from_arrays(cls, x: np.ndarray, labels: np.ndarray) -> Dataset:
        """A dataset of copies of x [N,...] and integer labels [N]."""
        fn = _capi.function("ts_dataset_from_arrays", "Dataset.from_arrays")
        (ax, keep_x), (al, keep_labels) = _capi.to_c(x, "x"), _capi.to_c(labels, "labels")
        h = C.c_void_p()
        check(fn(C.byref(h), C.byref(ax), C.byref(al)))
        del keep_x, keep_labels  # the arrays the library copied
        return cls(h.value)

    def __len__(self) -> int:
        return lib.ts_dataset_size(self._h)

    def arrays(self) -> Tuple[np.ndarray, np.ndarray]:
        """(images, labels) as numpy copies."""
        x, y = _capi.Array(), _capi.Array()
        check(lib.ts_dataset_arrays(self._h, C.byref(x), C.byref(y)))
        return _capi.to_numpy(x, "images"), _capi.to_numpy(y, "labels")

    def __del__(self):
        _capi.release(self)



class DataLoader:
    """Batches of a dataset: `for x, labels in loader:` is one epoch.
    `group` batches are stacked on axis 0 per item (D x A for a model run).
    Each item is a copy (the library reuses its buffers)."""

    def __init__(self, dataset: Dataset, batch_size: int, shuffle: bool = False, seed: int = 0,
                 drop_last: bool = False, group: int = 1, first: int = 0, count: int = 0) -> None:
        self.dataset = dataset  # the loader reads it
        self.group = int(group)
        self._config = dict(batch_size=int(batch_size), shuffle=bool(shuffle), seed=int(seed),
                            drop_last=bool(drop_last), group=self.group, first=int(first),
                            count=int(count))
        cfg = _capi.LoaderConfig(int(batch_size), int(first), int(count), int(bool(shuffle)),
                                 int(seed), int(bool(drop_last)))
        h = C.c_void_p()
        check(lib.ts_loader_new(C.byref(h), dataset._h, cfg))
        self._owned = _capi.Owned(h.value, lib.ts_loader_free, [dataset._owned])

    @property
    def _h(self):
        return self._owned.ptr

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._config.items())
        return f"<DataLoader({args}): {len(self)} batches an epoch, epoch {self.epoch}>"

    @property
    def epoch(self) -> int:
        """Epochs started (0 before the first batch; a resumed checkpoint's included)."""
        return lib.ts_loader_epoch(self._h)

    def __len__(self) -> int:
        """Batches per epoch."""
        return lib.ts_loader_batches(self._h)

    def __iter__(self) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
        x, y = _capi.Array(), _capi.Array()
        while True:
            st = lib.ts_loader_next(self._h, self.group, C.byref(x), C.byref(y))
            if st == _capi.TS_ERR_NOT_FOUND:  # the epoch is over
                return
            check(st)
            yield _capi.to_numpy(x, "images"), _capi.to_numpy(y, "labels")

    def __del__(self):
        _capi.release(self)
