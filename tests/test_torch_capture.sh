#!/usr/bin/env bash
# test_torch_capture.sh -- a torch module captured by torch.export
# (Options().capture("export"), ts.inference_model, ts.Graph.from_torch)
# with the current PyTorch: python/tests/test_torch_inference.py, which the
# Python suite runs with Debian's PyTorch (too old for torch.export: the
# refusal is checked there), run here in the real-model tests' venv
# (tests/support/realmodels_venv.sh: made once, some GB; needs PyPI the
# first time), where its capture("export") tests run.
# needs: onnx
set -u
build=${TS_BUILD_DIR:-build}
src=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=$(cd "$build" && pwd)
fail() { echo "FAIL $*"; echo "test_torch_capture: FAIL"; exit 1; }

. "$(dirname "$0")/support/realmodels_venv.sh"
realmodels_test_env "$build" "$src"
cd "$build" || fail "cannot cd to $build"
# every capture("export") test runs here: a skip of one is a failure
out=$("$REALMODELS_PY" -m pytest -q -p no:cacheprovider -rs "$src/python/tests/test_torch_inference.py" 2>&1)
rc=$?
echo "$out" | tail -20
[ $rc -eq 0 ] || fail "python/tests/test_torch_inference.py in the real-model venv"
case $out in *"SKIPPED"*"torch.export capture needs"*) fail "the torch.export tests were skipped: this PyTorch has no torch.export" ;; esac
echo "test_torch_capture: PASS"
