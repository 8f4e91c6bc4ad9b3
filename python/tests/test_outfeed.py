"""Outfeed queues from Python: lossless iteration of every record in order,
whatever the depth, with the values the anchors show."""
import numpy as np
import pytest

import tensorscope as ts
from conftest import batches, small_mlp

D, A = 3, 2
PARAMS = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]


def model_with(queue, pre_accumulated, anchors=()):
    g = small_mlp()
    opts = ts.Options().device_iterations(D).gradient_accumulation(A)
    opts.outfeed(queue, pre_accumulated=pre_accumulated)
    for short, name in anchors:
        opts.anchor_tensor(short, name, "all")
    m = ts.training_model(g, opts, optimizer=ts.SGD(lr=0.05, momentum=0.9))
    m.compile()
    return g, m


def test_pre_accumulated_gradients_lossless_with_a_tiny_depth():
    q = ts.OutfeedQueue("grads", depth=2)  # far fewer slots than records per run
    g, m = model_with(q, True, [("g", "Gradient___fc2.bias")])
    runs = 4
    for r in range(runs):
        m(*batches(D * A, seed=r))
        recs = list(q)
        assert len(recs) == D * A * len(PARAMS)
        assert {rec.key for rec in recs} == {p + "_grad" for p in PARAMS}
        assert all(rec.run == recs[0].run for rec in recs)
        bias = [rec for rec in recs if rec.key == "fc2.bias_grad"]
        assert [rec.sample for rec in bias] == list(range(D * A))
        np.testing.assert_array_equal(np.stack([rec.array for rec in bias]),
                                      m.get_anchored_tensor("g"))
        assert list(q) == []  # each record is yielded once
    c = q.counts()
    assert c["enqueued"] == runs * D * A * len(PARAMS)
    assert c["dropped"] == 0


def test_accumulated_gradients_once_per_step_equal_accum():
    q = ts.OutfeedQueue("grads", filters=["fc1.*"])
    g, m = model_with(q, False, [("acc", "Accum___fc1.weight")])
    m(*batches(D * A))
    recs = list(q)
    assert sorted({r.key for r in recs}) == ["fc1.bias_grad", "fc1.weight_grad"]
    w = [r.array for r in recs if r.key == "fc1.weight_grad"]
    assert len(w) == D and w[0].shape == (5, 6)
    np.testing.assert_array_equal(np.stack(w), m.get_anchored_tensor("acc"))


def test_graph_side_outfeed_and_last_mode():
    q_all = ts.OutfeedQueue("acts")
    q_last = ts.OutfeedQueue("last", mode="last")
    g = small_mlp()
    relu = g.tensor("Relu:0")
    g.outfeed(q_all, "relu", relu)
    g.outfeed(q_last, "relu", relu)
    opts = ts.Options().device_iterations(D).anchor_tensor("r", "Relu:0", "all")
    m = ts.training_model(g, opts, optimizer=ts.SGD(lr=0.01))
    m.compile()
    m(*batches(D))
    every = list(q_all)
    np.testing.assert_array_equal(np.stack([r.array for r in every]),
                                  m.get_anchored_tensor("r"))
    last = list(q_last)
    assert len(last) == 1 and last[0].sample == D - 1
    np.testing.assert_array_equal(last[0].array, every[-1].array)
    assert q_all.accepts("relu") and q_all.name == "acts"
    assert not ts.OutfeedQueue("none", filters=[]).accepts("relu")


def test_flush_waits_for_the_consumer_thread():
    q = ts.OutfeedQueue("grads", depth=2)
    g, m = model_with(q, True)
    m(*batches(D * A))
    q.flush()  # every record of the run handed over: nothing left to wait for
    assert q._received == q.counts()["enqueued"] == D * A * len(PARAMS)
    last = ts.OutfeedQueue("last", mode="last")
    with pytest.raises(ts.StateError, match="no sink"):
        last.flush()
