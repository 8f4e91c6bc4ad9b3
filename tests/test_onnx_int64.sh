#!/usr/bin/env bash
# test_onnx_int64.sh -- integer tensors of imported ONNX models exactly:
# tests/onnx_int64.py builds models with onnx.helper and checks every
# output against onnxruntime's with values beyond 2^24 and 2^53 (int64
# inputs, constants, comparisons, Where, Cast, Expand, OneHot); then the
# CLI feeds an int64 model from an .npz of .npy arrays and binds an int64
# .npy at import (`compare --inputs`, `--input-value`), and matches
# onnxruntime's outputs, which differ from a double's by 1. The real-model
# venv (tests/support/realmodels_venv.sh; PyPI the first time) holds onnx
# and onnxruntime.
# needs: onnx
set -u
build=${TS_BUILD_DIR:-build}
src=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=$(cd "$build" && pwd)
fail() { echo "FAIL $*"; echo "test_onnx_int64: FAIL"; exit 1; }

. "$(dirname "$0")/support/realmodels_venv.sh"
realmodels_test_env "$build" "$src"
"$REALMODELS_PY" "$src/tests/onnx_int64.py" || fail "tests/onnx_int64.py"

work=$(mktemp -d "${TMPDIR:-/tmp}/ts_onnx_int64.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work" || fail "cannot cd to $work"
# y = x - c + k: x fed (int64, beyond 2^53), k bound at import from an .npy
"$REALMODELS_PY" - <<'PYEOF' || fail "python writes the model and its arrays"
import numpy as np, onnx, onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
B = 2**53
g = helper.make_graph([helper.make_node("Sub", ["x", "c"], ["d"]), helper.make_node("Add", ["d", "k"], ["y"])], "g",
                      [helper.make_tensor_value_info("x", TensorProto.INT64, [2, 2]),
                       helper.make_tensor_value_info("k", TensorProto.INT64, [2])],
                      [helper.make_tensor_value_info("y", TensorProto.INT64, [2, 2])],
                      [numpy_helper.from_array(np.array(B, np.int64), "c")])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
onnx.save(m, "sub.onnx")
x = np.array([[B + 1, B + 3], [2**62 + 1, -(B + 1)]], np.int64)
k = np.array([B + 1, -(B + 1)], np.int64)
np.savez("in.npz", x=x)
np.save("k.npy", k)
y = ort.InferenceSession("sub.onnx", providers=["CPUExecutionProvider"]).run(None, {"x": x, "k": k})[0]
assert (y - k == x - B).all()
np.savez("ref.npz", y=y)
np.savez("off.npz", y=y + 1)  # a double's answer is off by about this
PYEOF
"$build/tensorscope" compare --model sub.onnx --inputs in.npz --input-value k=k.npy --reference ref.npz --atol 0 --rtol 0 >ok.out 2>ok.err
rc=$?
if [ $rc -eq 0 ] && grep -Eq "^PASS +y" ok.out; then echo "ok   the CLI feeds int64 (.npz) and binds an int64 .npy: onnxruntime's outputs exactly"
else cat ok.out ok.err; fail "compare of an int64 model fed from .npy arrays (exit $rc)"; fi
"$build/tensorscope" compare --model sub.onnx --inputs in.npz --input-value k=k.npy --reference off.npz --atol 0 --rtol 0 >off.out 2>off.err
rc=$?
if [ $rc -ne 0 ] && grep -Eq "^FAIL +y" off.out; then echo "ok   ... and a reference off by 1 fails it (the comparison sees the difference)"
else cat off.out off.err; fail "compare against a reference off by 1 passed (exit $rc)"; fi
echo "test_onnx_int64: PASS"
