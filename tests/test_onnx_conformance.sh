#!/usr/bin/env bash
# test_onnx_conformance.sh -- every one of ONNX's backend node test cases,
# imported and run as inference models through the Python package and
# through the CLI's `tensorscope compare` (tests/onnx_conformance.py says
# how), a case of an op the importer lacks counted as failed. Prints the
# figure over the cases a graph of floats and integers can hold and over the
# whole suite. The package in python/ is loaded against this build's
# libtensorscope.so; onnx (pinned, with the packages it needs) lives in a
# venv under the build dir, made once by py_venv.sh. Needs PyPI the first
# time: without it the test fails, it does not skip. Fails on a failing case
# missing from tests/onnx_conformance_expected_failures.txt and on a listed
# case that passes. `--write-expected` regenerates that list; other
# arguments go to the script (`--only REGEX`, `-v`).
# needs: onnx
set -u
build=${TS_BUILD_DIR:-build}
src=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=$(cd "$build" && pwd)
VENV=$build/onnx-venv
fail() { echo "FAIL $*"; echo "test_onnx_conformance: FAIL"; exit 1; }

[ -f "$build/libtensorscope.so" ] || fail "$build/libtensorscope.so is missing: build the library first (cmake --build $build)"
. "$(dirname "$0")/support/py_venv.sh"
py_venv_ensure "$VENV" $PY_ONNX_PINS
flock -u 9

py_sanitizer_preload "$build"

cd "$build" || fail "cannot cd to $build"
[ -x "$build/tensorscope" ] || fail "$build/tensorscope is missing: build the CLI first (cmake --build $build)"
TENSORSCOPE_LIBRARY=$build/libtensorscope.so PYTHONPATH=$src/python TS_SOURCE_DIR=$src TS_CLI=$build/tensorscope \
    exec "$VENV/bin/python" "$src/tests/onnx_conformance.py" "$@"
