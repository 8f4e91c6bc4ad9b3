#!/usr/bin/env bash
# test_onnx_real_models.sh -- real models (torchvision's resnet18,
# mobilenet_v3_small and a small ViT, transformers' GPT-2 and BERT from small
# configs, nn.TransformerEncoder and nn.LSTM classifiers) exported by the
# current PyTorch's two ONNX exporters, imported and checked against PyTorch
# (tests/onnx_real_models.py says how); then the torch-module tests of the
# Python package (python/tests/test_torch*.py, the real models through
# ts.training_model(module) among them) with that PyTorch. PyTorch and
# the packages the exporters need, pinned, live in a venv under the build dir,
# made once by py_venv.sh (PyTorch's wheels are some GB: minutes the first
# time). Needs PyPI the first time: without it the test fails, it does not
# skip. Fails on a failing cell missing from
# tests/onnx_real_models_expected_failures.txt and on a listed cell that
# passes. `--write-expected` regenerates that list; `--only REGEX` runs the
# models whose name matches.
# needs: onnx
set -u
build=${TS_BUILD_DIR:-build}
src=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=$(cd "$build" && pwd)
VENV=$build/realmodels-venv
fail() { echo "FAIL $*"; echo "test_onnx_real_models: FAIL"; exit 1; }

[ -f "$build/libtensorscope.so" ] || fail "$build/libtensorscope.so is missing: build the library first (cmake --build $build)"
. "$(dirname "$0")/support/realmodels_venv.sh"
realmodels_venv_ensure "$build"
flock -u 9

py_sanitizer_preload "$build"

cd "$build" || fail "cannot cd to $build"
export TENSORSCOPE_LIBRARY=$build/libtensorscope.so PYTHONPATH=$src/python TS_SOURCE_DIR=$src TS_BUILD_DIR=$build
"$VENV/bin/python" "$src/tests/onnx_real_models.py" "$@" || exit 1
case " $* " in *" --only "*|*" --write-expected "*) exit 0 ;; esac
"$VENV/bin/python" -m pytest -q -p no:cacheprovider -p no:warnings \
    "$src/python/tests/test_torch.py" "$src/python/tests/test_torch_errors.py" "$src/python/tests/test_torch_models.py" ||
    fail "python/tests/test_torch*.py with PyTorch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)')"
echo "test_onnx_real_models: PASS"
