# py_venv.sh -- sourced by the tests that need Python packages from PyPI.
# py_venv_ensure VENV PKG==VERSION... makes VENV from Debian's interpreter
# with its site-packages (so Debian's numpy and PyTorch are visible) and
# installs the pinned packages into it, once, reused while the pins match.
# It returns holding the lock VENV.lock on fd 9 (never two builders at once
# under ctest -j): release it with `flock -u 9` when done with the venv's
# set-up. Needs PyPI the first time: without it the caller's fail() is
# called; the tests fail, they do not skip.
# The pins of the onnx venv (build/onnx-venv), which more than one test
# makes: one list, so that no test rebuilds it for another's pins.
PY_ONNX_PINS="onnx==1.23.2 protobuf==7.36.2 ml_dtypes==0.6.0 numpy==2.4.6 typing_extensions==4.16.0"
# The pins of the Python tests' venv (build/py-venv: test_python.sh and
# test_python_asan.sh), beside Debian's numpy and PyTorch 1.13: pytest, the
# package's build backend, and transformers of a version that runs on
# PyTorch 1.13 (python/tests/test_torch_models.py's GPT-2 and BERT).
PY_TEST_PINS="pytest==9.2.0 scikit-build-core==1.1.2 transformers==4.40.2 tokenizers==0.19.1 huggingface_hub==0.36.2 safetensors==0.8.0"
py_venv_ensure() {
    local venv=$1
    shift
    local pins="$*"
    local stamp="$venv/.tensorscope-${pins// /+}"
    exec 9>"$venv.lock"
    flock 9
    if [ -f "$stamp" ]; then
        echo "ok   reusing $venv ($pins)"
        return 0
    fi
    rm -rf "$venv"
    /usr/bin/python3 -m venv --system-site-packages "$venv" || fail "cannot create a venv in $venv"
    if ! "$venv/bin/pip" install --quiet --disable-pip-version-check --timeout 30 --retries 2 "$@"; then
        rm -rf "$venv"
        fail "pip could not install $pins from PyPI (no network or no index?); this test needs them, it does not skip"
    fi
    touch "$stamp"
    echo "ok   installed $pins into $venv"
}

# py_sanitizer_preload BUILD: a sanitizer build's library needs its runtime
# loaded first (tests/support/sanitizer_preload.sh): exported as LD_PRELOAD
# for the Python this script runs, leak checks off. Nothing for another build.
py_sanitizer_preload() {
    . "$(dirname "${BASH_SOURCE[0]}")/sanitizer_preload.sh"
    sanitizer_preload "$1" || fail "cannot find the sanitizer runtime to preload for the build in $1"
    [ -n "$SANITIZER_PRELOAD" ] || return 0
    export LD_PRELOAD=${SANITIZER_PRELOAD// /:}${LD_PRELOAD:+:$LD_PRELOAD}
    export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
}
