"""Naming what to observe: anchor_tensor with one name or glob, and anchors or
watches that match nothing raising with the closest names (as the CLI
does); the README's Python sample runs and prints what the README shows."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import tensorscope as ts
from conftest import batches, small_mlp


def test_anchor_tensor_takes_one_name_or_glob():
    g = small_mlp()
    opts = (ts.Options().device_iterations(2).anchor_tensor("Gradient___fc2.*", mode="all")
            .anchor_tensor("fc1/MatMul:0")
            .anchor_tensor(None, "Relu:0", "final")  # the older form still works
            .anchor_tensor("b", "UpdatedVar___fc2.bias"))
    model = ts.training_model(g, opts, optimizer=ts.SGD(lr=0.1))
    model(*batches(2))
    assert set(model.anchors()) == {"Gradient___fc2.weight", "Gradient___fc2.bias",
                                    "fc1/MatMul:0", "Relu:0", "b", "loss"}
    assert model.get_anchored_tensor("Gradient___fc2.bias").shape == (2, 3)  # all: per sample
    assert model.get_anchored_tensor("fc1/MatMul:0").shape == (4, 5)  # training: final
    np.testing.assert_array_equal(model.get_anchored_tensor("b"), g.tensor("fc2.bias").numpy())
    model.anchor_tensor("Gradient___fc1.bias")  # after compile too
    model(*batches(2))
    assert model.get_anchored_tensor("Gradient___fc1.bias").shape == (5,)


@pytest.mark.parametrize("pattern", ["Gradient___fc9*", "Gradient___fc1.bais"])
def test_an_anchor_that_matches_nothing_names_the_closest(pattern):
    model = ts.training_model(small_mlp(), ts.Options().anchor_tensor(pattern),
                              optimizer=ts.SGD(lr=0.1))
    with pytest.raises(ts.NotFoundError, match=f"'{re.escape(pattern)}'.*closest: '"):
        model.compile()


def test_a_watch_that_matches_nothing_raises_with_the_closest_names():
    def model(pattern):
        return ts.training_model(small_mlp(), ts.Options().watch(pattern), optimizer=ts.SGD(lr=0.1))

    with pytest.raises(ts.NotFoundError, match=r"watch 'fc1/'.*'fc1/\*' watches the 2 tensors"):
        model("fc1/").compile()
    with pytest.raises(ts.NotFoundError, match=r"watch: no tensor named 'fc1/MatMull:0'.*closest: 'fc1/MatMul:0'"):
        model("fc1/MatMull:0")(*batches(1))  # the first call compiles: the same check
    with pytest.raises(ts.NotFoundError, match=r"watch: no tensor named 'fc9/\*'.*closest: '"):
        model("fc9/*").compile()
    m = model("fc1/*")
    m(*batches(1))
    assert set(m.watches()) == {"fc1/MatMul:0", "fc1/Add:0"}


def test_a_name_with_a_module_prefix_resolves_with_one_log_line():
    """PopTorch's names carry the wrapper's attribute (Gradient___model.fc2.bias
    for our Gradient___fc2.bias): anchors, watches and inspection take them,
    each saying in one log line which tensor it matched."""
    lines = []
    ts.set_log_level(3)
    ts.set_log_callback(lambda level, msg: lines.append(msg))
    try:
        opts = ts.Options().anchor_tensor("Gradient___model.fc2.bias").watch("model.fc1.weight")
        model = ts.training_model(small_mlp(), opts, optimizer=ts.SGD(lr=0.1))
        model.hold(True)
        model(*batches(1))
        held = model.inspect()
        by_prefix, where = held["net.fc1/MatMul:0"], held.where("model.fc1.weight")
    finally:
        ts.set_log_callback(None)
        ts.set_log_level(1)
    said = [m for m in lines if "differ only by a module prefix" in m]
    assert said == ["watch: 'model.fc1.weight' matched tensor 'fc1.weight' (the names differ only by a module prefix)",
                    "anchor: 'Gradient___model.fc2.bias' matched tensor 'Gradient___fc2.bias' (the names differ only by a module prefix)",
                    "ts_model_held: 'net.fc1/MatMul:0' matched tensor 'fc1/MatMul:0' (the names differ only by a module prefix)",
                    "ts_model_tensor_origin: 'model.fc1.weight' matched tensor 'fc1.weight' (the names differ only by a module prefix)"], said
    # the same tensors an identical model names in full
    ref = ts.training_model(small_mlp(), ts.Options().anchor_tensor("Gradient___fc2.bias"), optimizer=ts.SGD(lr=0.1))
    ref.hold(True)
    ref(*batches(1))
    np.testing.assert_array_equal(model.get_anchored_tensor("Gradient___model.fc2.bias"),
                                  ref.get_anchored_tensor("Gradient___fc2.bias"))
    np.testing.assert_array_equal(by_prefix, ref.inspect()["fc1/MatMul:0"])
    assert set(model.watches()) == {"fc1.weight"}
    assert where.startswith("parameter 'fc1.weight'"), where


def test_a_name_two_tensors_end_in_is_an_error_listing_them():
    model = ts.training_model(small_mlp(), ts.Options().anchor_tensor("bias"), optimizer=ts.SGD(lr=0.1))
    with pytest.raises(ts.NotFoundError, match=r"anchor: 'bias' is none of this model's names, and 2 differ from it only "
                                               r"by a module prefix: 'fc1.bias', 'fc2.bias'"):
        model.compile()
    model = ts.training_model(small_mlp(), ts.Options(), optimizer=ts.SGD(lr=0.1)).hold(True)
    model(*batches(1))
    with pytest.raises(KeyError, match="'fc1.bias', 'fc2.bias'"):
        model.inspect()["bias"]


def readme_python_section(source_dir):
    """The README's Python sample and the output it shows."""
    with open(os.path.join(source_dir, "README.md")) as f:
        text = f.read()
    section = text[text.index("\n## Python\n"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    shown = re.search(r"```console\n(.*?)```", section, re.S).group(1)
    return code, shown.splitlines()


def test_the_readme_python_sample_prints_what_the_readme_shows(source_dir, tmp_path):
    code, shown = readme_python_section(source_dir)
    script = tmp_path / "readme_sample.py"
    script.write_text(code)
    p = subprocess.run([sys.executable, str(script)], cwd=source_dir, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    assert len(out) == len(shown), p.stdout
    number = re.compile(r"-?\d+\.\d+(?:e-?\d+)?")
    for got, want in zip(out, shown):  # words and shapes exact, values to print precision
        assert number.sub("#", got) == number.sub("#", want), (got, want)
        for a, b in zip(number.findall(got), number.findall(want)):
            assert float(a) == pytest.approx(float(b), rel=2e-3, abs=2e-3), (got, want)


def test_graph_tensor_names_the_missing_tensor_not_an_earlier_error():
    """Graph.tensor of a name the graph lacks: NotFoundError naming it and
    the closest names, whatever failed before (a lookup sets no error of
    its own, so the library's last error is another call's)."""
    g = small_mlp()
    with pytest.raises(ts.InvalidArgumentError):
        ts.Options().device("gpu:0")  # leaves its own message as the last error
    with pytest.raises(ts.NotFoundError, match=r"^no tensor named 'fc1.wieght' in the graph \(closest: 'fc1.weight'"):
        g.tensor("fc1.wieght")
