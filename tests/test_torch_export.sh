#!/usr/bin/env bash
# test_torch_export.sh -- the torch-wrapper tests through both captures with
# the current PyTorch: the semantics beside PyTorch's loop (detach, frozen
# parameters and parameter groups, schedulers, padding_idx, losses,
# BatchNorm, a GAN's discriminator step, a frozen-backbone fine-tune), the
# Llama-style decoder with RoPE, errors, inference and the real models, run
# once with Options().capture("export") (torch.export, the default on this
# PyTorch) and once with capture("onnx") (TS_TEST_CAPTURE, see
# python/tests/conftest.py), in the real-model tests' venv
# (tests/support/realmodels_venv.sh). A few minutes.
# needs: onnx
set -u
build=${TS_BUILD_DIR:-build}
src=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=$(cd "$build" && pwd)
fail() { echo "FAIL $*"; echo "test_torch_export: FAIL"; exit 1; }

. "$(dirname "$0")/support/realmodels_venv.sh"
realmodels_test_env "$build" "$src"
cd "$build" || fail "cannot cd to $build"
t=$src/python/tests
for capture in export onnx; do
    out=$(TS_TEST_CAPTURE=$capture "$REALMODELS_PY" -m pytest -q -p no:cacheprovider -p no:logging -rsx \
        "$t/test_torch_semantics.py" "$t/test_torch_llama.py" "$t/test_torch_errors.py" "$t/test_torch.py" \
        "$t/test_torch_inference.py" "$t/test_torch_models.py" 2>&1)
    rc=$?
    echo "== capture $capture"
    echo "$out" | tail -12
    [ $rc -eq 0 ] || fail "the torch-wrapper tests through capture('$capture')"
done
echo "test_torch_export: PASS"
