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
