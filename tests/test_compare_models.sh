#!/usr/bin/env bash
# test_compare_models.sh -- `compare` takes every model a user brings, not
# only a classifier (tests/reference/compare_any_models.py, exported by
# PyTorch, references from PyTorch): a forward that returns its own loss
# (--labels-input), alone or beside its scores; outputs of rank 1 and 4,
# forward only with no loss and with --grads under --loss mse; a scalar
# computed from x alone, the model's own loss. Each matches PyTorch at the
# default tolerances; a perturbed reference element is found where it was
# put, with the error numpy computes; what cannot run says what to give.
# needs: onnx npz
set -uo pipefail
PY=/usr/bin/python3
. "$(dirname "$0")/support/cli_checks.sh"
cli_paths
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ts_compare_models.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$PY" "$SRC/tests/reference/compare_any_models.py" "$tmp" >"$tmp/export.log" 2>&1 || { show "$tmp/export.log" 20; fail "exporting the models"; finish; }

cmp() { # cmp NAME DUMP [FLAGS...]: compare NAME.onnx against DUMP's reference, output in $tmp/DUMP.out
    local name=$1 d=$2
    shift 2
    "$BIN" compare --model "$tmp/$name.onnx" --inputs "$tmp/$d/inputs.npz" --weights "$tmp/$d/weights.npz" \
        --reference "$tmp/$d/reference.npz" "$@" >"$tmp/$d.out" 2>&1
    rc=$?
}
passes() { # passes DUMP N: exit 0, every one of the reference's N tensors passed
    test "$rc" -eq 0 && grep -q "^compared: $2 passed, 0 failed; 0 without a counterpart or with another shape; 0 skipped" "$tmp/$1.out" ||
        { show "$tmp/$1.out" 30; return 1; }
}

cmp ownloss ownloss --labels-input labels --grads
check "forward(x, labels) returns its loss: --labels-input, every activation, the loss and each gradient match PyTorch" passes ownloss 9
cmp ownloss ownloss --labels-input labels
check "... forward only: the activations and the loss match, the gradients skipped" \
    sh -c "test $rc -eq 0 && grep -q '^PASS *loss ' '$tmp/ownloss.out' && grep -q '^compared: 3 passed, 0 failed; 0 without a counterpart or with another shape; 6 skipped' '$tmp/ownloss.out'"
cmp pair pair --labels-input labels --grads
check "forward returns (scores, loss): every tensor matches PyTorch" passes pair 9
"$PY" -c "import numpy as np; np.savez('$tmp/x_only.npz', x=np.load('$tmp/pair/inputs.npz')['x'])"
"$BIN" compare --model "$tmp/pair.onnx" --inputs "$tmp/x_only.npz" --weights "$tmp/pair/weights.npz" \
    --reference "$tmp/pair/reference.npz" --labels-input labels >"$tmp/nolabels.out" 2>&1
rc=$?
check "... without labels: the scores still compared (exit 0), the loss skipped saying what it needs" \
    sh -c "test $rc -eq 0 && grep -q '^PASS *fc2/' '$tmp/nolabels.out' && grep -q \"^SKIPPED *loss *the loss: add its labels 'labels' to --inputs\" '$tmp/nolabels.out'"
"$BIN" compare --model "$tmp/ownloss.onnx" --inputs "$tmp/x_only.npz" --reference "$tmp/ownloss/reference.npz" \
    --labels-input labels >"$tmp/onlyloss.out" 2>&1
rc=$?
check "... a model whose only output is its loss, without labels: a usage error naming the array" \
    sh -c "test $rc -eq 2 && grep -q \"has no array 'labels': the model's only output is its loss\" '$tmp/onlyloss.out'"

cmp regress regress_fwd
check "a 1-D output [B], forward only, no loss: every module output matches" passes regress_fwd 3
cmp regress regress --loss mse --grads
check "... --grads with --loss mse against labels [B]: the loss and every gradient match" passes regress 11
cmp regress regress --grads
check "... --grads with no loss given: a usage error saying which to give" \
    sh -c "test $rc -eq 2 && grep -q -- '--grads: .*gives no loss to differentiate: give --loss mse' '$tmp/regress.out'"
cmp conv conv_fwd
check "a 4-D output [B, C, H, W], forward only: matches" passes conv_fwd 2
cmp conv conv --loss mse --grads
check "... --grads with --loss mse: the loss and every gradient match" passes conv 9
cmp energy energy
check "a scalar computed from x alone, forward only: matches, the scalar as the loss" \
    sh -c "test $rc -eq 0 && grep -q '^PASS *loss ' '$tmp/energy.out' && grep -q '^compared: 3 passed, 0 failed' '$tmp/energy.out'"
cmp energy energy --grads
check "... --grads: the scalar is the loss, every gradient matches" passes energy 9

# compare's figures against numpy's: a reference element moved by a known amount
"$PY" - "$tmp" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
for name, key, at, delta in (("regress_fwd", "head", (4,), 0.25), ("conv_fwd", "conv2", (1, 2, 3, 4), -0.5)):
    r = dict(np.load(f"{d}/{name}/reference.npz"))
    r[key][at] += delta
    np.savez(f"{d}/{name}/bad.npz", **r)
EOF
ok_report() { # ok_report DUMP KEY INDEX: the report's figures as numpy computes them from the two references
    "$PY" - "$tmp" "$@" <<'EOF'
import json, sys, numpy as np
d, name, key, index = sys.argv[1:]
rep = json.load(open(f"{d}/{name}.json"))
good, bad = np.load(f"{d}/{name}/reference.npz"), np.load(f"{d}/{name}/bad.npz")
rows = {t["reference"]: t for t in rep["tensors"]}
t = rows[key]
err = np.abs(good[key].astype(np.float64) - bad[key])  # ours matches good to ~1e-6
want_at = "[" + ",".join(str(int(i)) for i in np.unravel_index(err.argmax(), err.shape)) + "]"
problems = []
if t["status"] != "FAIL" or t["max_abs_index"] != want_at or t["max_abs_index"] != index:
    problems.append(f"{key}: status {t['status']} at {t['max_abs_index']}, want FAIL at {want_at}")
if abs(t["max_abs"] - err.max()) > 1e-5 or t["mismatched"] != 1 or t["count"] != good[key].size:
    problems.append(f"{key}: max_abs {t['max_abs']} mismatched {t['mismatched']} of {t['count']}, numpy: {err.max()} 1 of {good[key].size}")
if abs(t["ours"]["mean"] - good[key].mean()) > 1e-5 or abs(t["reference_stats"]["mean"] - bad[key].mean()) > 1e-6:
    problems.append(f"{key}: means {t['ours']['mean']} / {t['reference_stats']['mean']}, numpy {good[key].mean()} / {bad[key].mean()}")
for k, r in rows.items():
    if k != key and (r["status"] != "PASS" or abs(r["ours"]["mean"] - good[k].mean()) > 1e-5):
        problems.append(f"{k}: {r['status']}, mean {r['ours'].get('mean') if 'ours' in r else None} vs numpy {good[k].mean()}")
if not rep["first_divergence"] or not rep["first_divergence"]["name"].startswith(key + "/"):
    problems.append(f"first divergence {rep['first_divergence']}, want {key}/...")
if problems:
    print("\n".join(problems))
sys.exit(1 if problems else 0)
EOF
}
for spec in "regress regress_fwd head [4]" "conv conv_fwd conv2 [1,2,3,4]"; do
    set -- $spec
    "$BIN" compare --model "$tmp/$1.onnx" --inputs "$tmp/$2/inputs.npz" --weights "$tmp/$2/weights.npz" \
        --reference "$tmp/$2/bad.npz" --report "$tmp/$2.json" >"$tmp/$2.bad.out" 2>&1
    rc=$?
    check "$1, forward only, $3$4 moved in the reference: exit 1, found at $4 with numpy's error and means, the rest passing" \
        sh -c "test $rc -eq 1 && grep -q '^first divergence: $3/' '$tmp/$2.bad.out'" && check "... the report's figures" ok_report "$2" "$3" "$4"
done

"$BIN" compare --help >"$tmp/help" 2>&1
check "compare --help lists the model flags of train (--loss, --labels-input, --output, --input-value)" \
    sh -c "grep -q -- '--labels-input NAME' '$tmp/help' && grep -q -- '--loss ' '$tmp/help' && grep -q -- '--output NAME' '$tmp/help' && grep -q -- '--input-value' '$tmp/help'"
finish
