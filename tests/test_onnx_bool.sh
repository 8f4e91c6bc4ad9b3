#!/usr/bin/env bash
# test_onnx_bool.sh -- bool graph tensors of imported ONNX models:
# tests/onnx_bool.py builds models with onnx.helper and checks every output
# against onnxruntime's, in its type (bool inputs, initializers and
# Constants, comparisons, logic, Cast, Where, the ops that move values, a
# causal mask). The real-model venv (tests/support/realmodels_venv.sh; PyPI
# the first time) holds onnx and onnxruntime.
# needs: onnx
set -u
build=${TS_BUILD_DIR:-build}
src=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=$(cd "$build" && pwd)
fail() { echo "FAIL $*"; echo "test_onnx_bool: FAIL"; exit 1; }

. "$(dirname "$0")/support/realmodels_venv.sh"
realmodels_test_env "$build" "$src"
"$REALMODELS_PY" "$src/tests/onnx_bool.py" || fail "tests/onnx_bool.py"
echo "test_onnx_bool: PASS"
