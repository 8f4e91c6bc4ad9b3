#!/usr/bin/env bash
# test_onnx_unrolled.sh -- ONNX programs whose indices or iterations the
# graph computes but whose layout the import fixes: ScatterND of computed
# indices, a Loop whose condition the body computes building a sequence
# (and the other sequence ops), MaxPool's indices of a 3-D window; against
# onnxruntime and the gradients' closed form (tests/onnx_unrolled.py says
# how). onnx and onnxruntime live in the real-model venv
# (tests/support/realmodels_venv.sh; PyPI the first time).
# needs: onnx
set -u
build=${TS_BUILD_DIR:-build}
src=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=$(cd "$build" && pwd)
fail() { echo "FAIL $*"; echo "test_onnx_unrolled: FAIL"; exit 1; }

. "$(dirname "$0")/support/realmodels_venv.sh"
realmodels_test_env "$build" "$src"
"$REALMODELS_PY" "$src/tests/onnx_unrolled.py" "$@" || fail "tests/onnx_unrolled.py"
echo "test_onnx_unrolled: PASS"
