#!/usr/bin/env bash
# test_compare_onnx.sh -- comparing a user's PyTorch model layer by layer:
# a LeNet and a 2-layer GPT-2-style model exported to ONNX by PyTorch and
# imported, against the reference
# dump python/tensorscope_ref.py writes of the same module: every activation
# and gradient passes at the default tolerances; a perturbed weight of the
# second conv layer and log-softmax over the wrong dim are each named as the
# first divergence with their inputs matching; a module called twice paired
# call by call (and a weight change after its first call found there); the seed tutorial's
# LogSoftmax(dim=0) model, exported, triggers the lint.
# needs: onnx npz
set -uo pipefail
PY=/usr/bin/python3
BUILD=${TS_BUILD_DIR:?set TS_BUILD_DIR}
TS=$BUILD/tensorscope
SRC=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ts_compare_onnx.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/support/cli_checks.sh"

"$PY" "$SRC/tests/reference/compare_models.py" "$tmp" >/dev/null 2>&1 || { echo "FAIL exporting the models"; exit 1; }
m=(--model "$tmp/lenet.onnx" --inputs "$tmp/lenet/inputs.npz")

"$TS" compare "${m[@]}" --weights "$tmp/lenet/weights.npz" --reference "$tmp/lenet/reference.npz" --grads >"$tmp/out" 2>&1
rc=$?
grep -E "^[A-Z]" "$tmp/out" | cut -c1-150
check "the imported LeNet matches PyTorch, every activation and gradient (exit 0)" test $rc -eq 0
check "... all 23 reference tensors pass" has "$tmp/out" "compared: 23 passed, 0 failed"
check "... conv1 maps to the imported scope's output" has "$tmp/out" "conv1/.*(reference 'conv1')"

"$PY" -c "
import numpy as np; w=dict(np.load('$tmp/lenet/weights.npz')); w['conv2.weight'][5,2,1,3]+=0.5; np.savez('$tmp/bad.npz',**w)"
"$TS" compare "${m[@]}" --weights "$tmp/bad.npz" --reference "$tmp/lenet/reference.npz" --grads >"$tmp/out2" 2>&1
rc=$?
sed -n '/first divergence/,+1p' "$tmp/out2" | cut -c1-300
check "a perturbed conv2 weight: exit 1" test $rc -eq 1
check "... the first divergence is conv2's output" grep -q "^first divergence: conv2/" "$tmp/out2"
check "... whose input from conv1 matches" has "$tmp/out2" "conv1/[A-Za-z0-9]*:0 matches"
check "... so the op (or its weights) differs, not an input" has "$tmp/out2" "Inputs match, output differs"

"$TS" compare "${m[@]}" --weights "$tmp/lenet/weights.npz" --reference "$tmp/lenet_dim0/reference.npz" >"$tmp/out3" 2>&1
rc=$?
sed -n '/first divergence/,+1p' "$tmp/out3" | cut -c1-300
check "log_softmax over dim 0 in the reference: exit 1" test $rc -eq 1
check "... fc3 still passes" grep -q "^PASS *fc3/" "$tmp/out3"
check "... the first divergence is the log-softmax" grep -q "^first divergence: log_softmax/LogSoftmax:0" "$tmp/out3"
check "... its input fc3 matches: the op itself differs" has "$tmp/out3" "fc3/[A-Za-z0-9]*:0 matches. Inputs match, output differs: the op itself differs"

# the GPT-2-style model (tied embeddings, causal attention), every tensor
"$TS" compare --model "$tmp/gpt.onnx" --inputs "$tmp/gpt/inputs.npz" --weights "$tmp/gpt/weights.npz" \
    --reference "$tmp/gpt/reference.npz" --grads >"$tmp/out4" 2>&1
rc=$?
grep -E "^(FAIL|SHAPE|NO-MATCH)|^compared|first divergence" "$tmp/out4" | cut -c1-200
check "the imported GPT matches PyTorch, every module output and gradient (exit 0)" test $rc -eq 0
check "... all 77 reference tensors pass" has "$tmp/out4" "compared: 77 passed, 0 failed"
check "... the tied embedding is one parameter with one gradient" has "$tmp/out4" "^PASS *Gradient___wte.weight "

# a module called twice: its k-th call pairs with its k-th occurrence in graph order
"$TS" compare --model "$tmp/twice.onnx" --inputs "$tmp/twice/inputs.npz" --weights "$tmp/twice/weights.npz" \
    --reference "$tmp/twice/reference.npz" --grads >"$tmp/out5" 2>&1
rc=$?
grep -E "act|^compared|first divergence" "$tmp/out5" | cut -c1-200
check "a module called twice matches PyTorch, both calls and their gradients (exit 0)" test $rc -eq 0
check "... its second call (act#2) pairs with the second occurrence, after fc2" has "$tmp/out5" "^PASS *act_1/.*(reference 'act#2')"
"$PY" -c "
import numpy as np; w=dict(np.load('$tmp/twice/weights.npz')); w['fc2.weight'][3,5]+=0.5; np.savez('$tmp/bad2.npz',**w)"
"$TS" compare --model "$tmp/twice.onnx" --inputs "$tmp/twice/inputs.npz" --weights "$tmp/bad2.npz" \
    --reference "$tmp/twice/reference.npz" >"$tmp/out6" 2>&1
rc=$?
check "a perturbed fc2 weight: exit 1, the first divergence is fc2's output" sh -c "test $rc -eq 1 && grep -q '^first divergence: fc2/' '$tmp/out6'"
check "... the first call of act still passes" grep -q "^PASS *act/.*(reference 'act')" "$tmp/out6"

"$TS" lint --model "$tmp/tutorial.onnx" >"$tmp/lint" 2>&1
rc=$?
cat "$tmp/lint"
check "lint: the seed tutorial's LogSoftmax(dim=0) is flagged (exit 1)" sh -c "test $rc -eq 1 && grep -q 'batch dimension' '$tmp/lint'"

finish
