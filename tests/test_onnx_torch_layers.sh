#!/usr/bin/env bash
# test_onnx_torch_layers.sh -- the layers ordinary PyTorch models are made
# of, exported by the current PyTorch's two ONNX exporters and checked
# against PyTorch (output, loss and every parameter's gradient):
# rotary embeddings and the trigonometric and hyperbolic functions,
# CrossEntropyLoss and NLLLoss with ignore_index, class weights, label
# smoothing and every reduction (the weighted ones against onnxruntime's
# loss too), Conv1d and the 1-D pools, ConvTranspose1d/2d, InstanceNorm,
# GroupNorm and an eval-mode BatchNorm; and the ONNX ops the importer
# composes of graph ops, their gradients against finite differences
# (tests/onnx_torch_layers.py says how). PyTorch and the exporters' packages live in the real-model venv
# (tests/support/realmodels_venv.sh; PyPI the first time).
# needs: onnx
set -u
build=${TS_BUILD_DIR:-build}
src=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=$(cd "$build" && pwd)
fail() { echo "FAIL $*"; echo "test_onnx_torch_layers: FAIL"; exit 1; }

. "$(dirname "$0")/support/realmodels_venv.sh"
realmodels_test_env "$build" "$src"
"$REALMODELS_PY" "$src/tests/onnx_torch_layers.py" "$@" || fail "tests/onnx_torch_layers.py"
echo "test_onnx_torch_layers: PASS"
