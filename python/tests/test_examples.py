"""examples/observing_tensors.py runs end to end, prints what the C
tutorial prints and writes a real PNG."""
import os
import re
import subprocess
import sys

import pytest


def test_observing_tensors(tmp_path, source_dir, mnist_dir):
    script = os.path.join(source_dir, "examples", "observing_tensors.py")
    p = subprocess.run([sys.executable, script, mnist_dir], cwd=tmp_path, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    assert re.fullmatch(r"Tensor names \(\d+\):", out[0])
    for name in ["x", "labels", "loss", "fc1.weight", "fc1/MatMul:0", "Relu:0", "LogSoftmax:0",
                 "Accum___fc1.weight", "UpdatedVar___fc2.bias", "Gradient___fc3.bias"]:
        assert f"  {name}" in out
    losses = [float(m.group(1)) for line in out
              if (m := re.fullmatch(r"batch \d+/10 loss ([0-9.]+)", line))]
    assert len(losses) == 10 and losses[-1] < losses[0]
    assert re.search(r"^epoch 1: mean loss [0-9.]+ over 10 batches$", p.stdout, re.M)
    assert "  Gradient___fc1.weight f32[320,784]" in out
    assert "  Gradient___fc3.bias f32[10]" in out
    assert out[-1] == "Saved histogram to ./GradientHistogram.png"
    with open(tmp_path / "GradientHistogram.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_observing_tensors_prints_what_the_c_tutorial_prints(tmp_path, mnist_dir, source_dir):
    build = os.environ.get("TS_BUILD_DIR")
    c_example = os.path.join(build or "", "example_observing_tensors")
    if not build or not os.path.exists(c_example):
        pytest.skip("TS_BUILD_DIR has no example_observing_tensors (run through ctest)")
    (tmp_path / "c").mkdir()
    (tmp_path / "py").mkdir()
    c = subprocess.run([c_example, mnist_dir], cwd=tmp_path / "c", capture_output=True,
                       text=True, timeout=600)
    py = subprocess.run([sys.executable, os.path.join(source_dir, "examples",
                                                      "observing_tensors.py"), mnist_dir],
                        cwd=tmp_path / "py", capture_output=True, text=True, timeout=600)
    assert c.returncode == 0 and py.returncode == 0, c.stderr + py.stderr
    # line for line: names and shapes equal, losses to their printed 4 decimals
    # (give or take the last one: a Debug C build rounds differently)
    number = re.compile(r"\d+\.\d{4}")
    c_lines, py_lines = c.stdout.splitlines(), py.stdout.splitlines()
    assert len(py_lines) == len(c_lines)
    for cl, pl in zip(c_lines, py_lines):
        assert number.sub("#", pl) == number.sub("#", cl)
        for a, b in zip(number.findall(pl), number.findall(cl)):
            assert abs(float(a) - float(b)) <= 2e-4, (pl, cl)
