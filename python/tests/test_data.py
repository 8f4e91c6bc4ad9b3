"""Datasets and loaders of the library, batches as NumPy copies."""
import numpy as np
import pytest

import tensorscope as ts


def test_mnist_and_its_loader(mnist_dir):
    data = ts.Dataset.mnist(mnist_dir)
    assert len(data) == 10000
    x, y = data.arrays()
    assert x.shape == (10000, 1, 28, 28) and x.dtype == np.float32
    assert y.shape == (10000,) and y.dtype == np.int32 and 0 <= y.min() and y.max() <= 9
    assert x.min() == -1.0 and x.max() == 1.0  # (x/255 - 0.5)/0.5
    loader = ts.DataLoader(data, batch_size=1000, group=2, count=4000)
    assert len(loader) == 4
    got = list(loader)
    assert [b[0].shape for b in got] == [(2000, 1, 28, 28)] * 2
    np.testing.assert_array_equal(got[0][0], x[:2000])  # no shuffle: in order
    np.testing.assert_array_equal(got[1][1], y[2000:4000])
    assert not np.shares_memory(got[0][0], got[1][0])  # each batch is a copy


@pytest.mark.skipif(not hasattr(ts._capi.lib, "ts_dataset_from_arrays"),
                    reason="this library has no ts_dataset_from_arrays")
def test_dataset_from_arrays_copies():
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    y = np.arange(6, dtype=np.int64) % 3
    data = ts.Dataset.from_arrays(x, y)
    x[:] = -1  # the dataset holds a copy
    assert len(data) == 6
    batches = list(ts.DataLoader(data, batch_size=3))
    assert len(batches) == 2
    np.testing.assert_array_equal(batches[0][0], np.arange(12, dtype=np.float32).reshape(3, 4))
