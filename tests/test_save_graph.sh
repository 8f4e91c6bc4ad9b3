#!/usr/bin/env bash
# test_save_graph.sh -- `--save-graph FILE.onnx` (train) and
# Model.save_graph read back by onnx and onnxruntime: tests/save_graph.py
# says what it checks. Runs in the venv with onnx and onnxruntime that the
# real-model tests use (tests/support/realmodels_venv.sh: made once, some
# GB; needs PyPI the first time).
# needs: onnx
set -u
build=${TS_BUILD_DIR:-build}
src=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=$(cd "$build" && pwd)
fail() { echo "FAIL $*"; echo "test_save_graph: FAIL"; exit 1; }

[ -x "$build/tensorscope" ] || fail "$build/tensorscope is missing: build it first (cmake --build $build)"
. "$(dirname "$0")/support/realmodels_venv.sh"
realmodels_venv_ensure "$build"
flock -u 9
py_sanitizer_preload "$build"

# a file that cannot be written is an error that names it, and leaves nothing
out=$("$build/tensorscope" graph --model mlp --batch-size 4 --save-graph /nonexistent-dir/g.onnx 2>&1) && fail "an unwritable --save-graph path succeeded"
case $out in *nonexistent-dir*) ;; *) fail "the error for an unwritable --save-graph path does not name it: $out" ;; esac

# the printed graph's flags with --save-graph are a usage error
"$build/tensorscope" graph --model mlp --format dot --save-graph "$build/unused.onnx" >/dev/null 2>&1
[ $? -eq 2 ] || fail "graph --format dot --save-graph is not a usage error"
[ -e "$build/unused.onnx" ] && fail "a refused --save-graph wrote its file"

export TENSORSCOPE_LIBRARY=$build/libtensorscope.so PYTHONPATH=$src/python TS_SOURCE_DIR=$src TS_BUILD_DIR=$build
"$REALMODELS_PY" "$src/tests/save_graph.py" || fail "tests/save_graph.py"
echo "test_save_graph: PASS"
