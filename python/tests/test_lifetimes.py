"""Object lifetimes: memory a numpy view shows lives as long as the view
(numpy's rule), whatever is closed or collected first; every use of a closed
object is a StateError, never a read of freed memory. Under AddressSanitizer
(tests/test_python_asan.sh) a use after free would abort these tests."""
import gc

import numpy as np
import pytest

import tensorscope as ts
from conftest import batches, small_mlp


def churn():
    """Allocations that reuse freed memory: a freed graph's parameters
    would show their values."""
    graphs = [small_mlp(seed=s) for s in range(20)]
    junk = [np.full(1000, 7.0, np.float32) for _ in range(100)]
    return graphs, junk


def test_a_view_keeps_the_parameters_after_close():
    g = small_mlp()
    v = g.tensor("fc1.weight").view()
    before = v.copy()
    g.close()
    keep = churn()
    assert np.array_equal(v, before), "the view read memory the graph had freed"
    assert ts.compare(v, before)["pass"]  # the library reads the view in place (AddressSanitizer sees it)
    owned = g._owned
    assert owned.ptr is not None, "the memory stays while a view of it is alive"
    del v
    gc.collect()
    assert owned.ptr is None, "the graph's memory goes with its last view"
    del keep


def test_a_view_outlives_its_graph_object_and_a_trained_model():
    g = small_mlp()
    m = ts.training_model(g, ts.Options().device_iterations(2), optimizer=ts.SGD(lr=0.1))
    m(*batches(2))
    v = g.tensor("fc2.bias").view()
    trained = v.copy()
    del g, m
    gc.collect()
    keep = churn()
    assert np.array_equal(v, trained)
    del keep


def test_every_use_after_close_is_a_state_error():
    g = small_mlp()
    t = g.tensor("fc1.weight")
    m = ts.training_model(g, ts.Options(), optimizer=ts.SGD(lr=0.1))
    m(*batches(1))
    g.close()
    uses = [lambda: t.view(), lambda: t.numpy(), lambda: t.name, lambda: t.shape,
            lambda: t.set_value(np.zeros((5, 6), np.float32)), lambda: g.tensor("fc1.weight"),
            lambda: g.tensors(), lambda: g.relu(t), lambda: g.dump(), lambda: g.state_dict(),
            lambda: m(*batches(1)), lambda: m.get_anchored_tensor("loss"), lambda: m.watches(),
            lambda: m.get_tensor_names(), lambda: m.memory(), lambda: m.runs, lambda: m.compile(),
            lambda: ts.inference_model(g, outputs=["loss"]),
            lambda: ts.training_model(g, optimizer=ts.SGD(lr=0.1))]
    for i, use in enumerate(uses):
        with pytest.raises(ts.StateError, match="closed"):
            use()
    m.cancel()  # no run in progress, a closed model: nothing to do, no error
    g.close()  # twice: nothing more


def test_a_closed_model_refuses_and_its_graph_lives_on():
    g = small_mlp()
    m = ts.training_model(g, ts.Options(), optimizer=ts.SGD(lr=0.1))
    m(*batches(1))
    m.close()
    with pytest.raises(ts.StateError, match="model was closed"):
        m.get_anchored_tensor("loss")
    assert g.tensor("fc1.bias").numpy().shape == (5,)


def test_a_cycle_of_graph_model_and_queue_is_collected_in_a_safe_order():
    # the collector finalises a cycle in any order: the model must be freed
    # before its graph and its queue whatever runs first
    for _ in range(3):
        g = small_mlp()
        q = ts.OutfeedQueue("q")
        g.outfeed(q, "h", g.tensor("loss"))
        m = ts.training_model(g, ts.Options().outfeed(q), optimizer=ts.SGD(lr=0.1))
        m(*batches(1))
        # the records are handed over on the library's consumer thread, whose
        # callback holds the queue while it runs: wait until they are all in
        assert len(list(q)) > 0
        owned = [g._owned, m._owned, q._owned]
        g.cycle, m.cycle, q.cycle = m, q, g
        del g, m, q
        gc.collect()
        assert [o.ptr for o in owned] == [None, None, None], "every library object freed"


def test_a_loader_keeps_its_dataset():
    x = np.arange(40, dtype=np.float32).reshape(10, 4)
    y = np.arange(10, dtype=np.int32) % 3
    ds = ts.Dataset.from_arrays(x, y)
    loader = ts.DataLoader(ds, batch_size=5)
    owned = ds._owned
    del ds
    gc.collect()
    keep = churn()
    got = [xb for xb, _ in loader]
    assert np.array_equal(np.concatenate(got), x)
    del loader
    gc.collect()
    assert owned.ptr is None
    del keep
