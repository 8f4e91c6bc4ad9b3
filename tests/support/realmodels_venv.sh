# realmodels_venv.sh -- sourced by the real-model tests and the ONNX bench
# rows: the current PyTorch and what its exporters and the peers need
# (torchvision, transformers, onnx, onnxscript, onnxruntime), pinned once
# here, in a venv under the build dir (BUILD/realmodels-venv; some GB, made
# once by py_venv.sh). realmodels_venv_ensure BUILD sets REALMODELS_PY and
# returns holding the venv's lock on fd 9 (`flock -u 9` when set up). The
# caller defines fail().
realmodels_venv_ensure() {
    . "$(dirname "${BASH_SOURCE[0]}")/py_venv.sh"
    REALMODELS_PY=$1/realmodels-venv/bin/python
    py_venv_ensure "$1/realmodels-venv" torch==2.15.0 torchvision==0.29.2 transformers==5.24.0 onnx==1.23.2 \
        onnxscript==0.7.2 onnxruntime==1.32.0 numpy==2.4.6 protobuf==7.36.2 ml_dtypes==0.6.0 pytest==9.2.0
}

# realmodels_test_env BUILD SRC: what a test that runs Python in that venv
# against BUILD's library needs: the library (else the caller's fail), the
# venv made and its lock let go, the sanitizer runtime preloaded where
# BUILD has one, and the library, the sources (python/ and python/tests/)
# and both directories in the environment.
realmodels_test_env() {
    [ -e "$1/libtensorscope.so" ] || fail "$1/libtensorscope.so is missing: build it first (cmake --build $1)"
    realmodels_venv_ensure "$1"
    flock -u 9
    py_sanitizer_preload "$1"
    export TENSORSCOPE_LIBRARY=$1/libtensorscope.so PYTHONPATH=$2/python:$2/python/tests TS_SOURCE_DIR=$2 TS_BUILD_DIR=$1
}
