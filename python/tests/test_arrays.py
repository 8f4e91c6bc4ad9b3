"""Copy and zero-copy semantics (documented in tensorscope/model.py): what
a model returns is a copy that survives the next run; inputs are read in
place or through a contiguous copy; Tensor.view() is a live read-only view."""
import numpy as np
import pytest

import tensorscope as ts
from conftest import batches, small_mlp


def trained():
    g = small_mlp()
    opts = ts.Options().anchor_tensor("g", "Gradient___fc1.weight", "final")
    model = ts.training_model(g, opts, optimizer=ts.SGD(lr=0.5))
    model.compile()
    return g, model


def test_anchored_arrays_stay_valid_after_the_next_run():
    g, model = trained()
    model(*batches(1, seed=1))
    first = model.get_anchored_tensor("g")
    kept = first.copy()
    model(*batches(1, seed=2))
    second = model.get_anchored_tensor("g")
    np.testing.assert_array_equal(first, kept)  # untouched by the run
    assert not np.array_equal(first, second)   # the run did change the anchor
    assert first.flags.owndata and first.flags.writeable


def test_parameter_copy_and_live_view():
    g, model = trained()
    w = g.tensor("fc1.weight")
    copy, view = w.numpy(), w.view()
    assert not view.flags.writeable
    with pytest.raises(ValueError):
        view[0, 0] = 1.0
    model(*batches(1))
    np.testing.assert_array_equal(view, w.numpy())  # follows the update in place
    assert not np.array_equal(view, copy)           # the copy does not
    del g, model, w
    assert np.isfinite(view).all()  # the view keeps its graph alive


def test_non_contiguous_inputs_are_read_correctly():
    x, y = batches(1)
    g1, m1 = trained()
    g2, m2 = trained()
    fortran = np.asfortranarray(x)
    strided = np.repeat(y, 2)[::2]
    assert not fortran.flags.c_contiguous and not strided.flags.c_contiguous
    assert m1(x, y) == m2(fortran, strided)
    np.testing.assert_array_equal(m1.get_anchored_tensor("g"), m2.get_anchored_tensor("g"))


def test_set_value_and_state_dict_round_trip():
    g = small_mlp()
    sd = g.state_dict()
    assert set(sd) == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
    assert sd["fc1.weight"].shape == (5, 6)
    new = {k: np.full_like(v, 0.25) for k, v in sd.items()}
    g.load_state_dict(new)
    for k, v in g.state_dict().items():
        np.testing.assert_array_equal(v, new[k])
