#!/usr/bin/env bash
# test_onnx_rnn.sh -- ONNX's LSTM and GRU as tensorscope imports them
# (unrolled over the sequence): each variant's outputs against a NumPy
# reference of the operator's equations, the initializers' gradients against
# finite differences, the gates' names, and what is refused
# (tests/onnx_rnn.py says how); then nn.GRU and nn.LSTM as PyTorch exports
# them against PyTorch (tests/onnx_rnn_torch.py, Debian's python3-torch).
# onnx lives in the venv that test_onnx_conformance.sh uses (py_venv.sh;
# PyPI the first time).
# needs: onnx
set -u
build=${TS_BUILD_DIR:-build}
src=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=$(cd "$build" && pwd)
VENV=$build/onnx-venv
fail() { echo "FAIL $*"; echo "test_onnx_rnn: FAIL"; exit 1; }

[ -f "$build/libtensorscope.so" ] || fail "$build/libtensorscope.so is missing: build the library first (cmake --build $build)"
. "$(dirname "$0")/support/py_venv.sh"
py_venv_ensure "$VENV" $PY_ONNX_PINS
flock -u 9

py_sanitizer_preload "$build"

export TENSORSCOPE_LIBRARY=$build/libtensorscope.so PYTHONPATH=$src/python
"$VENV/bin/python" "$src/tests/onnx_rnn.py" || fail "tests/onnx_rnn.py"
# PyTorch's own exports against PyTorch: Debian's python3-torch and its NumPy
/usr/bin/python3 -c "import torch" 2>/dev/null || fail "Debian's python3-torch is missing (apt-get install python3-torch)"
/usr/bin/python3 "$src/tests/onnx_rnn_torch.py" || fail "tests/onnx_rnn_torch.py"
echo "test_onnx_rnn: PASS"
