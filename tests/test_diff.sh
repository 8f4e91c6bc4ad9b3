#!/usr/bin/env bash
# test_diff.sh -- `tensorscope diff A B` and ts.diff_runs: two runs of one
# model, tensor by tensor. Each verdict is checked against numpy reading the
# same dumps: two seeds, f32 against bf16, one thread against two, the same
# run twice (all bit-equal), and a dump with one value moved by one ulp
# (named at that tensor, with its op and inputs); bad arguments are usage
# errors.
set -uo pipefail
PY=/usr/bin/python3
. "$(dirname "$0")/support/cli_checks.sh"
cli_paths
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ts_diff.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1

dump() { # dump NAME FLAGS...: one step of the MLP, every tensor dumped
    local name=$1
    shift
    run train_$name "$BIN" train --model mlp --data "$DATA" --steps 1 --anchor '*' --dump-npy "$tmp/$name" --quiet "$@"
    check "train $* writes a dump (exit 0)" test $rc -eq 0 || show train_$name.err
}
dump s1 --seed 1 --threads 1
dump s1again --seed 1 --threads 1
dump s2 --seed 2 --threads 1
dump t2 --seed 1 --threads 2
dump bf --seed 1 --threads 1 --precision bf16

# The independent verdict: numpy over the dump files, in the order the
# dump records, grouped forward / backward (reversed) / update.
cat > expect.py <<'PYEOF'
import sys
import numpy as np
a, b = sys.argv[1], sys.argv[2]
atol, rtol = 1e-5, 1e-4
order = [l.rstrip("\n").split("\t") for l in open(f"{a}/order.txt")]
stems_b = {n: s for s, n in (l.rstrip("\n").split("\t") for l in open(f"{b}/order.txt"))}
fwd = [(s, n) for s, n in order if "___" not in n]
bwd = [(s, n) for s, n in order if n.startswith("Gradient___")][::-1]
upd = [(s, n) for s, n in order if "___" in n and not n.startswith("Gradient___")]
first_bits = first_diff = None
counts = {"bit-equal": 0, "close": 0, "differs": 0}
for s, n in fwd + bwd + upd:
    if n not in stems_b:
        continue
    x, y = np.load(f"{a}/{s}.npy"), np.load(f"{b}/{stems_b[n]}.npy")
    if x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes():
        counts["bit-equal"] += 1
        continue
    xd, yd = x.astype(np.float64), y.astype(np.float64)
    close = x.shape == y.shape and bool(np.all(np.abs(xd - yd) <= atol + rtol * np.abs(yd)))
    counts["close" if close else "differs"] += 1
    first_bits = first_bits or n
    if not close:
        first_diff = first_diff or n
print(first_bits or "-", first_diff or "-", counts["bit-equal"], counts["close"], counts["differs"])
PYEOF

pair() { # pair NAME A B [FLAGS]: diff A B against numpy's verdict
    local name=$1 a=$2 b=$3
    shift 3
    read -r e_bits e_diff e_eq e_close e_differs < <("$PY" expect.py "$a" "$b")
    run $name "$BIN" diff "$a" "$b" --model mlp "$@"
    check "$name: the counts are numpy's ($e_eq bit-equal, $e_close close, $e_differs differ)" \
        hasf $name.out "$e_eq bit-equal, $e_close close, $e_differs differ" || show $name.out 60
    if [ "$e_bits" = "-" ]; then
        check "$name: bit-identical, said, exit 0" sh -c "test $rc -eq 0 && grep -q '^the runs are bit-identical' $name.out"
    else
        check "$name: the first tensor not bit-equal is numpy's ($e_bits)" hasf $name.out "first tensor not bit-equal: $e_bits (" ||
            show $name.out 60
    fi
    if [ "$e_diff" = "-" ]; then
        check "$name: nothing differs beyond the tolerance: exit 0" test $rc -eq 0
    else
        check "$name: something differs beyond the tolerance ($e_diff first): exit 1" test $rc -eq 1
        [ "$e_diff" = "$e_bits" ] || check "$name: ... named ($e_diff)" hasf $name.out "first tensor that differs: $e_diff ("
    fi
}

pair same s1 s1again
pair seeds s1 s2
pair threads s1 t2
pair bf16 s1 bf
check "bf16: the first difference is the first bf16 matmul" hasf bf16.out "first tensor not bit-equal: fc1/MatMul:0 (forward"
check "... its op, source line and inputs' state: inputs bit-equal, the op differs" \
    has bf16.out "^  op MatMul built at [^ ]+:[0-9]+; computed from: Flatten:0 bit-equal; fc1.weight bit-equal\. Inputs match, output differs"
check "... the table is in graph order: forward, then backward, then update" \
    sh -c "awk '/^(forward|backward|update) /{print \$1}' bf16.out | uniq | tr '\n' ' ' | grep -qx 'forward backward update '"
check "... the backward starts at the loss's gradient" sh -c "grep -m1 '^backward ' bf16.out | grep -q 'Gradient___loss '"
check "... the 16-bit copies only one run has are listed, not compared" has bf16.out "^not compared: 0 tensors only in s1, [1-9][0-9]* only in bf$"

# planted: one value of fc2/Add:0 moved by one ulp
"$PY" - "$tmp" <<'PYEOF' || { fail "writing the planted dump"; finish; }
import shutil, sys
import numpy as np
d = sys.argv[1]
shutil.copytree(f"{d}/s1", f"{d}/planted")
v = np.load(f"{d}/planted/fc2_Add_0.npy")
flat = v.reshape(-1)
flat[7] = np.nextafter(flat[7], np.float32(np.inf))
np.save(f"{d}/planted/fc2_Add_0.npy", v)
PYEOF
pair planted s1 planted
check "planted: named at fc2/Add:0, close (one ulp is within the tolerance)" \
    has planted.out "^forward +close +fc2/Add:0 "
check "... its op and inputs: the matmul and bias bit-equal, the op itself differs" \
    has planted.out "^  op Add built at [^ ]+:[0-9]+; computed from: fc2/MatMul:0 bit-equal; fc2.bias bit-equal\. Inputs match"
run exact "$BIN" diff s1 planted --exact
check "--exact: one ulp is a difference (exit 1), without --model no op named" \
    sh -c "test $rc -eq 1 && grep -q 'first tensor not bit-equal: fc2/Add:0 (forward' exact.out && grep -q 'give the model' exact.out"
check "... without --model, the order the dump records" hasf exact.out "in the order the dump records"

# an .npz (its member order is its order) against a directory
"$PY" - "$tmp" <<'PYEOF' || fail "writing the .npz"
import sys
import numpy as np
d = sys.argv[1]
order = [l.rstrip("\n").split("\t") for l in open(f"{d}/planted/order.txt")]
np.savez(f"{d}/planted.npz", **{n: np.load(f"{d}/planted/{s}.npy") for s, n in order})
PYEOF
run npz "$BIN" diff planted.npz s1 --model mlp
check "an .npz against a directory: the same tensor named" \
    sh -c "test $rc -eq 0 && grep -q 'first tensor not bit-equal: fc2/Add:0 (forward' npz.out && grep -q '^46 bit-equal, 1 close, 0 differ' npz.out"

# the Python API on the same dumps
. "$SRC/tests/support/sanitizer_preload.sh" # Python loads the library: a sanitizer build's runtime goes first
sanitizer_preload "$BUILD" || fail "cannot find the sanitizer runtime to preload for the build in $BUILD"
LD_PRELOAD="${SANITIZER_PRELOAD// /:}" ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    TENSORSCOPE_LIBRARY="$BUILD/libtensorscope.so" PYTHONPATH="$SRC/python" "$PY" - "$tmp" > py.out 2>&1 <<'PYEOF'
import sys
import tensorscope as ts
d = sys.argv[1]
r = ts.diff_runs(f"{d}/s1", f"{d}/planted")
f = r["first_not_bit_equal"]
assert f["name"] == "fc2/Add:0" and f["state"] == "close" and f["phase"] == "forward", f
assert r["first_difference"] is None, r["first_difference"]
assert r["counts"]["close"] == 1 and r["counts"]["differs"] == 0, r["counts"]
r = ts.diff_runs(f"{d}/s1", f"{d}/s1again")
assert r["counts"]["close"] == r["counts"]["differs"] == 0 and r["first_not_bit_equal"] is None, r["counts"]
r = ts.diff_runs(f"{d}/s1", f"{d}/bf")
assert r["first_difference"]["name"] == "fc1/MatMul:0", r["first_difference"]
names = [t["name"] for t in r["tensors"]]
assert names.index("Gradient___loss") < names.index("Gradient___fc1.weight") < names.index("Accum___fc1.weight"), names
print("python ok")
PYEOF
check "ts.diff_runs gives the same verdicts" hasf py.out "python ok" || show py.out 20

run none "$BIN" diff s1
check "one dump: a usage error (exit 2)" sh -c "test $rc -eq 2 && grep -q 'give two dumps' none.err"
run missing "$BIN" diff s1 "$tmp/nope"
check "a missing dump: exit 1, named" sh -c "test $rc -eq 1 && grep -q 'nope' missing.err"
finish
