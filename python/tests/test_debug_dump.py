"""Options.dump_debug and ts.DebugDump (docs/formats.md#debugger-dump): the
dump of the steps asked for, read back as a Mapping, equals NumPy's own load
of every file its index lists, and the held tensors of the same runs
(Model.hold, a separate model with the same weights and batches); the limit
refuses a dump planned over it before anything runs."""
import os

import numpy as np
import pytest

import tensorscope as ts

from conftest import batches, small_mlp


def read_index(directory):
    """The index as NumPy reads it: one row per file, the header's names."""
    return np.genfromtxt(os.path.join(directory, "index.tsv"), delimiter="\t", names=True, dtype=None,
                         encoding="utf-8", comments=None, autostrip=False)


def train(options, runs=3, lr=0.1):
    g = small_mlp()
    m = ts.training_model(g, options, optimizer=ts.SGD(lr=lr))
    for r in range(runs):
        m(*batches(1, seed=10 + r))
    return g, m


def test_dump_matches_numpy_and_held_runs(tmp_path):
    d = tmp_path / "dump"
    train(ts.Options().dump_debug(d, steps="2:3", grads=True))
    rows = read_index(d)
    dump = ts.DebugDump(d)
    assert dump.steps == [2, 3]
    assert sorted(set(rows["step"].tolist())) == [2, 3]
    assert len(rows) == sum(len(t) for t in dump.values())
    for r in rows:
        t = dump[r["name"]]
        a = np.load(os.path.join(d, r["path"]))
        np.testing.assert_array_equal(t[int(r["step"])], a)
        assert a.dtype == np.dtype(r["dtype"]) == t.dtype
        assert list(a.shape) == [int(v) for v in r["shape"].strip("[]").split(",") if v]
        assert t.op == r["op"] and t.source == r["source"] and t.kind == r["kind"]
    assert dump["fc1.weight"].op == "Param" and dump["fc1.weight"].steps == [2, 3]
    assert "conftest.py" in dump["loss"].source
    assert "Gradient___fc1.bias" in dump and dump["Gradient___fc1.bias"].kind == "grad"
    with pytest.raises(KeyError, match="fc1.weight"):
        dump["fc1.weigth"]
    # the same runs again, held: each dumped tensor is the held one
    g2 = small_mlp()
    m2 = ts.training_model(g2, ts.Options(), optimizer=ts.SGD(lr=0.1))
    for r in range(3):
        if r + 1 in (2, 3):
            w = g2.tensor("fc1.weight").numpy().copy()  # as the run reads it
            m2.hold()
        m2(*batches(1, seed=10 + r))
        m2.hold(False)
        if r + 1 in (2, 3):
            insp = m2.inspect()
            np.testing.assert_array_equal(dump["fc1.weight"][r + 1], w)
            for name in ("x", "loss", "Gradient___fc1.bias", "Gradient___fc2.weight"):
                np.testing.assert_array_equal(dump[name][r + 1], insp[name])
            relu = [n for n in dump if dump[n].op == "Relu" and dump[n].kind == "value"]
            assert relu and all(np.array_equal(dump[n][r + 1], insp[n]) for n in relu)


def test_ops_glob_selects_names_or_op_types(tmp_path):
    train(ts.Options().dump_debug(tmp_path / "a", steps="1:1", ops="fc1*"), runs=1)
    train(ts.Options().dump_debug(tmp_path / "b", steps="1", ops="MatMul"), runs=1)
    train(ts.Options().dump_debug(tmp_path / "c", steps="1", ops="fc1*", grads=True), runs=1)
    a, b, c = ts.DebugDump(tmp_path / "a"), ts.DebugDump(tmp_path / "b"), ts.DebugDump(tmp_path / "c")
    assert a and all(n.startswith("fc1") for n in a) and "fc1.weight" in a
    assert not any(t.kind == "grad" for t in a.values())
    assert b and all(t.op == "MatMul" for t in b.values()) and len(b) == 2
    # a gradient goes with its tensor
    assert set(c) == set(a) | {"Gradient___" + n for n in a}


def test_limit_refuses_before_the_run(tmp_path):
    g = small_mlp()
    m = ts.training_model(g, ts.Options().dump_debug(tmp_path, steps="1:1000", limit="4K"), optimizer=ts.SGD(lr=0.1))
    w = g.tensor("fc1.weight").numpy().copy()
    with pytest.raises(ts.InvalidArgumentError, match="limit"):
        m(*batches(1))
    assert not os.path.exists(tmp_path / "index.tsv")
    np.testing.assert_array_equal(g.tensor("fc1.weight").numpy(), w)  # no step was taken
    with pytest.raises(FileNotFoundError, match="not a debugger dump"):
        ts.DebugDump(tmp_path)
