#!/usr/bin/env bash
# test_torch_opinfo.sh -- PyTorch's own OpInfo samples of every Core ATen op
# the torch.export front end maps, forward and gradient against PyTorch
# (tests/torch_opinfo.py: the failing samples must be those listed, with
# their reasons, in tests/torch_opinfo_expected_failures.txt), in the
# real-model tests' venv (tests/support/realmodels_venv.sh). Prints the
# counts of Core ATen ops mapped. A few minutes (TS_OPINFO_SAMPLES=N runs N
# samples per op and dtype instead of 1).
# needs: onnx
set -u
build=${TS_BUILD_DIR:-build}
src=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=$(cd "$build" && pwd)
fail() { echo "FAIL $*"; echo "test_torch_opinfo: FAIL"; exit 1; }

. "$(dirname "$0")/support/realmodels_venv.sh"
realmodels_test_env "$build" "$src"
cd "$build" || fail "cannot cd to $build"
out=$("$REALMODELS_PY" "$src/tests/torch_opinfo.py" "$src/tests/torch_opinfo_expected_failures.txt" 2>&1)
rc=$?
echo "$out" | grep -v '^\[tensorscope\|^W[0-9]* .*cpp_extension'
[ $rc -eq 0 ] || fail "tests/torch_opinfo.py"
