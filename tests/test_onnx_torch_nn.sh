#!/usr/bin/env bash
# test_onnx_torch_nn.sh -- every module class of torch.nn (whatever the
# current PyTorch's torch.nn.modules exports, so a new class shows up by
# itself), in its 1-D/2-D/3-D variants and common options, exported by both
# of PyTorch's ONNX exporters, imported and checked against PyTorch: forward,
# gradients and 5 SGD steps. A failure not listed in
# tests/onnx_torch_nn_expected_failures.txt, or a listed one that passes,
# fails the test; it prints the table per family (tests/onnx_torch_nn.py
# says how). PyTorch and the exporters' packages live in the real-model venv
# (tests/support/realmodels_venv.sh; PyPI the first time).
# needs: onnx
set -u
build=${TS_BUILD_DIR:-build}
src=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=$(cd "$build" && pwd)
fail() { echo "FAIL $*"; echo "test_onnx_torch_nn: FAIL"; exit 1; }

. "$(dirname "$0")/support/realmodels_venv.sh"
realmodels_test_env "$build" "$src"
"$REALMODELS_PY" "$src/tests/onnx_torch_nn.py" "$@" || fail "tests/onnx_torch_nn.py"
echo "test_onnx_torch_nn: PASS"
