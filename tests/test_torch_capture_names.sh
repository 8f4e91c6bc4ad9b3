#!/usr/bin/env bash
# test_torch_capture_names.sh -- the same tensor names whichever capture:
# an MLP, a CNN with BatchNorm and a small transformer block captured by
# torch.export and by the ONNX exporter name every module's output (and
# its gradient) alike, and hold the same values under those names
# (python/tests/test_torch_capture_names.py), in the real-model tests' venv
# (tests/support/realmodels_venv.sh).
# needs: onnx
set -u
build=${TS_BUILD_DIR:-build}
src=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=$(cd "$build" && pwd)
fail() { echo "FAIL $*"; echo "test_torch_capture_names: FAIL"; exit 1; }

. "$(dirname "$0")/support/realmodels_venv.sh"
realmodels_test_env "$build" "$src"
cd "$build" || fail "cannot cd to $build"
out=$("$REALMODELS_PY" -m pytest -q -p no:cacheprovider -p no:logging -rsx "$src/python/tests/test_torch_capture_names.py" 2>&1)
rc=$?
echo "$out" | tail -20
[ $rc -eq 0 ] || fail "python/tests/test_torch_capture_names.py"
echo "test_torch_capture_names: PASS"
