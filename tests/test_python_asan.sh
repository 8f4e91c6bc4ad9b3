#!/usr/bin/env bash
# test_python_asan.sh -- the Python tests of object lifetimes and of
# cancelling (python/tests/test_lifetimes.py, test_cancel.py) against the
# AddressSanitizer build of the library: libasan (and libubsan) preloaded
# into the interpreter, the package from the source tree on this build's
# libtensorscope.so. A read of freed library memory through a numpy view
# aborts with AddressSanitizer's report. Only in a sanitizer build
# (-DTS_SANITIZE=ON, make test-asan); elsewhere it skips (77). Python's own
# allocations are not leak-checked (the interpreter keeps them until exit).
set -u
build=$(cd "${TS_BUILD_DIR:-build}" && pwd)
src=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
lib=$build/libtensorscope.so
fail() { echo "FAIL $*"; echo "test_python_asan: FAIL"; exit 1; }

nm -D "$lib" 2>/dev/null | grep -q __asan_init || { echo "SKIP: $lib is not an AddressSanitizer build (-DTS_SANITIZE=ON)"; exit 77; }
asan=$(gcc -print-file-name=libasan.so) ubsan=$(gcc -print-file-name=libubsan.so)
[ -f "$asan" ] || { echo "SKIP: no libasan.so to preload"; exit 77; }

VENV=$build/py-venv
. "$(dirname "$0")/support/py_venv.sh"
# shellcheck disable=SC2086 # one word per pin
py_venv_ensure "$VENV" $PY_TEST_PINS
flock -u 9

cd "$build" || fail "cannot cd to $build"
if ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" LD_PRELOAD="$asan $ubsan" TENSORSCOPE_LIBRARY=$lib \
    PYTHONPATH="$src/python:$src/python/tests" TS_SOURCE_DIR=$src \
    "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$src/python/tests/test_lifetimes.py" "$src/python/tests/test_cancel.py"; then
    echo "test_python_asan: PASS"
else
    fail "pytest under AddressSanitizer"
fi
