#!/usr/bin/env bash
# test_python_install.sh -- what `pip install ./python` gives a user, in a
# fresh venv: the commands `tensorscope` (the CLI, built with the package,
# finding its installed data sets) and `tensorscope_ref` on the venv's bin/,
# the modules importable from anywhere, and the two together comparing a
# torch module; and `pip install` of the python/ folder copied out of the
# repository stops before compiling, saying that it needs the repository.
# The build backend (scikit-build-core) comes from the Python tests' venv
# (py_venv.sh; PyPI the first time), so the install itself needs no
# network (--no-build-isolation); the library is built incrementally in
# $BUILD/python-build, which test_python.sh shares (under the venv's lock).
set -u
build=${TS_BUILD_DIR:-build}
src=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=$(cd "$build" && pwd)
. "$(dirname "$0")/support/cli_checks.sh"
. "$(dirname "$0")/support/py_venv.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ts_python_install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# shellcheck disable=SC2086 # one word per pin
py_venv_ensure "$build/py-venv" $PY_TEST_PINS
backend=$("$build/py-venv/bin/python" -c 'import os, scikit_build_core as m; print(os.path.dirname(os.path.dirname(m.__file__)))')
venv=$tmp/venv
/usr/bin/python3 -m venv --system-site-packages "$venv" >"$tmp/venv.log" 2>&1 || { show "$tmp/venv.log"; fail "python3 -m venv"; finish; }
install() { # install DIR LOG: pip install DIR into the fresh venv, the backend from py-venv
    PYTHONPATH=$backend CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} "$venv/bin/pip" install \
        --disable-pip-version-check --no-build-isolation --no-deps --no-index \
        --config-settings=build-dir="$build/python-build" "$1" >"$2" 2>&1
}
install "$src/python" "$tmp/install.log"
rc=$?
flock -u 9
check "pip install ./python into a fresh venv" test $rc -eq 0 || { tail -30 "$tmp/install.log"; finish; }

cd "$tmp" || exit 1 # away from the sources: what is found is what was installed
version=$(sed -n 's/^#define TS_VERSION_STRING "\(.*\)"/\1/p' "$src/include/tensorscope.h")
"$venv/bin/tensorscope" --version >"$tmp/version" 2>&1
rc=$?
check "the venv's bin/tensorscope is the CLI: --version says tensorscope $version" \
    sh -c "test $rc -eq 0 && head -1 '$tmp/version' | grep -qx 'tensorscope $version'" || show "$tmp/version"
"$venv/bin/tensorscope" train --model mlp --steps 2 --quiet >"$tmp/train" 2>&1
rc=$?
check "... it trains the mlp on the MNIST installed with it (share/tensorscope), from any directory" \
    sh -c "test $rc -eq 0 && test -f '$venv/share/tensorscope/mnist/t10k-labels-idx1-ubyte.gz'" || show "$tmp/train"
"$venv/bin/tensorscope_ref" --help >"$tmp/refhelp" 2>&1
rc=$?
check "the venv's bin/tensorscope_ref --help: its usage" sh -c "test $rc -eq 0 && grep -q '^usage: tensorscope_ref MODULE OUT_DIR' '$tmp/refhelp'" ||
    show "$tmp/refhelp"
env -u TENSORSCOPE_LIBRARY -u PYTHONPATH "$venv/bin/python" -c "
import tensorscope, tensorscope_ref, os, sys
assert tensorscope.__file__.startswith(sys.prefix), tensorscope.__file__
assert tensorscope_ref.__file__.startswith(sys.prefix), tensorscope_ref.__file__
assert os.path.isfile(os.path.join(os.path.dirname(tensorscope.__file__), 'libtensorscope.so'))
print(tensorscope.__version__)" >"$tmp/import" 2>&1
rc=$?
check "import tensorscope and tensorscope_ref: the venv's, the library inside the package" \
    sh -c "test $rc -eq 0 && grep -qx '$version' '$tmp/import'" || show "$tmp/import"

cat >"$tmp/net.py" <<'EOF'
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(10, 8), nn.Linear(8, 4)

    def forward(self, x):
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), 1)
EOF
"$venv/bin/tensorscope_ref" net.py:Net ref --input x:6x10 --loss nll --onnx net.onnx >"$tmp/ref.out" 2>&1 &&
    "$venv/bin/tensorscope" compare --model net.onnx --inputs ref/inputs.npz --weights ref/weights.npz \
        --reference ref/reference.npz --grads >"$tmp/cmp.out" 2>&1
rc=$?
check "tensorscope_ref dumps a torch module and its ONNX file; the installed tensorscope compare passes every tensor" \
    sh -c "test $rc -eq 0 && grep -q '^compared: 9 passed, 0 failed' '$tmp/cmp.out'" || { show "$tmp/ref.out"; show "$tmp/cmp.out" 20; }

mkdir "$tmp/alone" && cp -r "$src/python" "$tmp/alone/python" && rm -rf "$tmp/alone/python/build"
install "$tmp/alone/python" "$tmp/alone.log"
rc=$?
check "pip install of python/ copied out of the repository fails" test $rc -ne 0
check "... saying it is built from the repository and how to install it" \
    grep -q "tensorscope-ml is built from the tensorscope repository that holds its python/ folder.*pip install ./python" "$tmp/alone.log" ||
    show "$tmp/alone.log" 30
check "... before compiling anything (CMake never ran)" sh -c "! grep -qE 'using CMake|Configuring|Building C' '$tmp/alone.log'" ||
    show "$tmp/alone.log" 30
finish
