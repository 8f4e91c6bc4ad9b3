#!/usr/bin/env bash
# test_python.sh -- the Python package as a user gets it: `pip install
# ./python` into a venv under the build dir, then its pytest tests
# (python/tests). The venv (pytest and the build backend, pinned) is made
# once by py_venv.sh, with Debian's numpy and PyTorch visible to the tests
# that wrap a torch module. Needs PyPI the first time; without it the test
# fails, it does not skip. The library is rebuilt incrementally in
# $BUILD/python-build.
set -u
build=${TS_BUILD_DIR:-build}
src=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=$(cd "$build" && pwd)
VENV=$build/py-venv
fail() { echo "FAIL $*"; echo "test_python: FAIL"; exit 1; }

. "$(dirname "$0")/support/py_venv.sh"
# shellcheck disable=SC2086 # one word per pin
py_venv_ensure "$VENV" $PY_TEST_PINS
log=$build/python-install.log
if ! CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} "$VENV/bin/pip" install \
    --disable-pip-version-check --no-build-isolation --no-deps --force-reinstall \
    --config-settings=build-dir="$build/python-build" "$src/python" >"$log" 2>&1; then
    tail -40 "$log"
    fail "pip install ./python failed (log: $log)"
fi
echo "ok   pip install ./python into $VENV"
flock -u 9

# Outside the source tree, so that `import tensorscope` is the installed package.
cd "$build" || fail "cannot cd to $build"
unset TENSORSCOPE_LIBRARY
TS_SOURCE_DIR=$src TS_BUILD_DIR=$build "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$src/python/tests"
rc=$?
# Under mpirun (when there is one and the package was built with MPI): every
# rank's outfeed records reach rank 0 from Python too, Ctrl-C on one rank
# stops every rank at the same step, and watches combine the replicas
# (naming the replica of the min, the max and a NaN).
if [ $rc -eq 0 ] && command -v mpirun >/dev/null &&
    "$VENV/bin/python" -c 'import sys, tensorscope._capi as c; sys.exit(0 if c.lib.ts_dist_available() else 1)'; then
    # OpenMPI's session directory in a directory of this test's own (see test_dist_mpi.sh)
    mpitmp=$(mktemp -d "${TMPDIR:-/tmp}/ts_python_mpi.XXXXXX")
    for script in mpi_outfeed.py mpi_cancel.py mpi_replicas.py; do
        if TMPDIR=$mpitmp OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONPATH="$src/python/tests" timeout 300 \
            mpirun --oversubscribe --bind-to none -x PYTHONPATH -np 2 "$VENV/bin/python" "$src/python/tests/$script"; then
            echo "ok   python/tests/$script under mpirun -np 2"
        else
            fail "python/tests/$script under mpirun -np 2"
        fi
    done
    rm -rf "$mpitmp"
fi
case $rc in
0) echo "test_python: PASS" ;;
5) fail "pytest collected no tests from $src/python/tests" ;;
*) fail "pytest exit status $rc" ;;
esac
