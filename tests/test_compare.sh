#!/usr/bin/env bash
# test_compare.sh -- `tensorscope compare` against PyTorch: a twin of the
# built-in mlp dumped by python/tensorscope_ref.py passes at the default
# tolerances, gradients included; a planted bug (one weight of fc2, or
# log-softmax over the wrong dim) is named as the first divergence with its
# inputs matching; two dumps compare; bad input is reported, never a crash.
# needs: npz plots
set -uo pipefail
PY=/usr/bin/python3
BUILD=${TS_BUILD_DIR:?set TS_BUILD_DIR}
TS=$BUILD/tensorscope
SRC=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ts_compare.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/support/cli_checks.sh"

"$PY" "$SRC/tests/reference/mlp_twin.py" "$tmp/ref" || { echo "FAIL writing the reference"; exit 1; }
"$PY" "$SRC/tests/reference/mlp_twin.py" "$tmp/ref0" --softmax-dim 0 || exit 1
printf '# the twin names its log-softmax module; ours is unscoped\nlog_softmax LogSoftmax:0\nGradient___log_softmax Gradient___LogSoftmax:0\n' >"$tmp/map"
base=(--model mlp --weights "$tmp/ref/weights.npz" --inputs "$tmp/ref/inputs.npz" --map "$tmp/map")

"$TS" compare "${base[@]}" --reference "$tmp/ref/reference.npz" --grads --report "$tmp/r.json" --plot "$tmp/e.png" >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
check "the twin passes, gradients included (exit 0)" test $rc -eq 0
check "every reference tensor compared: 15 passed, 0 failed" has "$tmp/out" "compared: 15 passed, 0 failed"
check "module paths map to layer outputs (fc2 -> fc2/Add:0)" has "$tmp/out" "fc2/Add:0 .*(reference 'fc2')"
check "the report is JSON with 15 PASS rows and no divergence" "$PY" -c "
import json,sys; r=json.load(open('$tmp/r.json')); t=r['tensors']
sys.exit(not (len(t)==15 and all(x['status']=='PASS' for x in t) and r['first_divergence'] is None
              and all(x['max_abs']<=x['atol']+x['rtol']*max(abs(x['reference_stats']['min']),abs(x['reference_stats']['max'])) for x in t)))"
check "the plot is a PNG" sh -c "head -c 8 '$tmp/e.png' | od -c | grep -q 'P   N   G'"

# planted bug 1: one weight of the second layer
"$PY" -c "
import numpy as np; w=dict(np.load('$tmp/ref/weights.npz')); w['fc2.weight'][3,7]+=0.5; np.savez('$tmp/bad.npz',**w)"
"$TS" compare --model mlp --weights "$tmp/bad.npz" --inputs "$tmp/ref/inputs.npz" --map "$tmp/map" \
    --reference "$tmp/ref/reference.npz" --grads --plot "$tmp/e2.png" >"$tmp/out2" 2>&1
rc=$?
grep -E "^FAIL|first divergence" "$tmp/out2" | cut -c1-220
check "a perturbed fc2 weight fails (exit 1)" test $rc -eq 1
check "... first divergence is fc2/Add:0, the layer the weight belongs to" has "$tmp/out2" "first divergence: fc2/Add:0"
check "... its input from the layer before matches" has "$tmp/out2" "fc1/Add:0 matches"
check "... and the verdict is the op (or its parameters), not an input" has "$tmp/out2" "Inputs match, output differs"
check "... fc1 still passes" has "$tmp/out2" "^PASS *fc1/Add:0"

# planted bug 2: log-softmax over the batch dimension in the reference
"$TS" compare "${base[@]}" --reference "$tmp/ref0/reference.npz" >"$tmp/out3" 2>&1
rc=$?
grep -E "^FAIL|first divergence" "$tmp/out3" | cut -c1-220
check "log_softmax over dim 0 in the reference fails (exit 1)" test $rc -eq 1
check "... first divergence is LogSoftmax:0" has "$tmp/out3" "first divergence: LogSoftmax:0"
check "... its input fc3/Add:0 matches: the op itself differs" has "$tmp/out3" "fc3/Add:0 matches. Inputs match, output differs: the op itself differs"

# two dumps
"$PY" -c "
import numpy as np; r=dict(np.load('$tmp/ref/reference.npz')); r['fc3']=r['fc3']*1.001; r['extra']=np.zeros(3,np.float32); del r['loss']
np.savez('$tmp/other.npz',**r)"
"$TS" compare --a "$tmp/ref/reference.npz" --b "$tmp/ref/reference.npz" >"$tmp/out4" 2>&1
check "a dump against itself passes" test $? -eq 0
"$TS" compare --a "$tmp/other.npz" --b "$tmp/ref/reference.npz" >"$tmp/out5" 2>&1
rc=$?
check "two dumps that differ: exit 1, fc3 fails" sh -c "test $rc -eq 1 && grep -q '^FAIL *fc3 ' '$tmp/out5'"
check "... a name missing from --a is reported" has "$tmp/out5" "^NO-MATCH *loss *not in"
check "... a tensor with no reference is reported" has "$tmp/out5" "(have|has) no reference: extra"
"$TS" compare --a "$tmp/other.npz" --b "$tmp/ref/reference.npz" --tol 'fc3:0:0.01' >"$tmp/out6" 2>&1
check "--tol loosens one tensor: fc3 passes at rtol 0.01" has "$tmp/out6" "^PASS *fc3 "

# bad input: reported, never a crash
"$PY" -c "
import numpy as np; r=dict(np.load('$tmp/ref/reference.npz')); r['fc2']=r['fc2'][:, :50]; r['nonsense']=np.ones(2,np.float32)
np.savez('$tmp/shape.npz',**r)"
"$TS" compare "${base[@]}" --reference "$tmp/shape.npz" >"$tmp/out7" 2>&1
rc=$?
check "a shape mismatch and an unknown name: exit 1, both reported" sh -c "test $rc -eq 1 && grep -q '^SHAPE *fc2 *shapes differ' '$tmp/out7' && grep -q '^NO-MATCH *nonsense' '$tmp/out7'"
"$TS" compare "${base[@]}" --reference "$tmp/missing.npz" >"$tmp/out8" 2>&1
rc=$?
check "a missing reference file: exit 1 with its name" sh -c "test $rc -eq 1 && grep -q 'missing.npz' '$tmp/out8'"
head -c 100 "$tmp/ref/reference.npz" >"$tmp/trunc.npz"
"$TS" compare "${base[@]}" --reference "$tmp/trunc.npz" >"$tmp/out9" 2>&1
check "a truncated reference: exit 1" test $? -eq 1
"$TS" compare "${base[@]}" --reference "$tmp/ref/reference.npz" --tol 'fc*:x:1' >/dev/null 2>&1
check "a bad --tol is a usage error (exit 2)" test $? -eq 2
"$TS" compare --a "$tmp/ref/reference.npz" >/dev/null 2>&1
check "--a without --b is a usage error (exit 2)" test $? -eq 2

# lint of the built-in model: clean
"$TS" lint --model mlp >"$tmp/lint" 2>&1
check "lint: the built-in mlp has no warnings (exit 0)" sh -c "test $? -eq 0 && grep -q '0 lint warnings' '$tmp/lint'"

finish
