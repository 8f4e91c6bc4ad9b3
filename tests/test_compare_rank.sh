#!/usr/bin/env bash
# test_compare_rank.sh -- `tensorscope compare --rank`: where a low-precision
# run loses precision against its f32 twin. A bf16 run of the MLP first
# differs at its first bf16 matmul; a dump rounded to bf16 from one layer
# on (values) and from one gradient back (the backward) names those as the
# first jumps, and a tensor made worse ranks first; train --dump-npy writes
# the graph order compare reads; bad flags are usage errors.
set -uo pipefail
PY=/usr/bin/python3
. "$(dirname "$0")/support/cli_checks.sh"
cli_paths
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ts_compare_rank.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1

for p in f32 bf16; do
    run train_$p "$BIN" train --model mlp --data "$DATA" --steps 1 --anchor '*' --dump-npy "$tmp/$p" --precision $p --quiet
    check "train --precision $p --anchor '*' --dump-npy writes a dump (exit 0)" test $rc -eq 0 || show train_$p.err
done
check "the dump records its graph order: order.txt, the input first, escaped file then name" \
    sh -c "head -1 f32/order.txt | grep -q '^x	x\$' && grep -q '^fc1_MatMul_0	fc1/MatMul:0\$' f32/order.txt"

# a real bf16 run against its f32 twin (the same weights and batch at step 1)
run real "$BIN" compare --a bf16 --b f32 --rank
cat real.out
check "--rank exits 0 (a ranking, not a tolerance check)" test $rc -eq 0
check "... the first jump is the first bf16 matmul: its inputs and weights agree exactly" \
    hasf real.out "precision is first lost at 'fc1/MatMul:0' (rel. error"
check "... the 16-bit copies are only in the bf16 run, not ranked" has real.out "^11 only in --a \(not ranked\): Flatten:0@bf16"
check "... in the order the dump records" hasf real.out "in the order f32 records"
check "... gradients apart, in backward order" \
    sh -c "grep -A3 '^gradients, in backward order' real.out | grep -q 'Gradient___loss'"

# planted: values rounded to bf16 from fc2/MatMul:0 on, fc3/MatMul:0 made
# worse; earlier values perturbed below the floor; gradients rounded from
# Gradient___Relu:1 back to the input
"$PY" - "$tmp" <<'PYEOF' || { fail "writing the planted dump"; finish; }
import os, shutil, sys
import numpy as np
d = sys.argv[1]
shutil.copytree(f"{d}/f32", f"{d}/planted")
order = [l.rstrip("\n").split("\t") for l in open(f"{d}/planted/order.txt")]
def bf16(x):
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + np.uint64(0x7FFF) + ((u >> np.uint64(16)) & np.uint64(1))) & np.uint64(0xFFFF0000)).astype(np.uint32).view(np.float32)
values = [n for _, n in order if "___" not in n]
grads = [n for _, n in order if n.startswith("Gradient___")]
late = set(values[values.index("fc2/MatMul:0"):]) | set(grads[:grads.index("Gradient___Relu:1") + 1])
for stem, name in order:
    p = f"{d}/planted/{stem}.npy"
    v = np.load(p)
    if v.dtype != np.float32:
        continue
    if name in late:
        v = bf16(v)
    elif "___" not in name:
        v = v * np.float32(1 + 4e-6)
    if name == "fc3/MatMul:0":
        v = v * np.float32(1.02)
    np.save(p, v)
PYEOF
run planted "$BIN" compare --a planted --b f32 --rank --jump 8
cat planted.out
check "planted: exit 0" test $rc -eq 0
check "... the first jump is fc2/MatMul:0, against the median of the tensors before it" \
    has planted.out "^precision is first lost at 'fc2/MatMul:0' \(rel. error [0-9.]+e-0[34], [0-9]+x the median of the [0-9]+ tensors before it\)$"
check "... the tensor made worse ranks first" has planted.out "^ +1  [0-9.e-]+ +[0-9.e-]+ +fc3/MatMul:0$"
check "... and leads the ranking line" has planted.out "^ranked by relative error \(values\): fc3/MatMul:0 "
check "... in the backward, the first jump is Gradient___Relu:1" \
    has planted.out "^in the backward, precision is first lost at 'Gradient___Relu:1' \(rel. error"
check "... --jump is the factor named" hasf planted.out "exceeds 8x the median"
check "... a tensor kept below the floor is no jump: fc1/MatMul:0 is not marked" \
    sh -c "! grep -q 'fc1/MatMul:0   <-' planted.out"

if needs plots "--rank --plot"; then
    run plot "$BIN" compare --a planted --b f32 --rank --plot "$tmp/rank.png"
    check "--rank --plot writes a PNG" sh -c "test $rc -eq 0 && head -c 8 '$tmp/rank.png' | od -c | grep -q 'P   N   G'"
fi

# without an order file: by name, and said
rm f32/order.txt planted/order.txt
run unordered "$BIN" compare --a planted --b f32 --rank
check "dumps without order.txt are ranked by name, and the output says so" \
    sh -c "test $rc -eq 0 && grep -q 'by name (neither dump records its order' unordered.out"

# bad input
run u1 "$BIN" compare --a planted --b f32 --jump 0.5 --rank
check "--jump below 1 is a usage error (exit 2)" sh -c "test $rc -eq 2 && grep -q 'jump must be a number >= 1' u1.err"
run u2 "$BIN" compare --rank --model mlp --inputs x.npz --reference r.npz
check "--rank without --a/--b is a usage error" sh -c "test $rc -eq 2 && grep -q 'give --a DUMP --b DUMP' u2.err"
run u3 "$BIN" compare --a planted --b f32 --rank --report r.json
check "--rank with --report is a usage error" sh -c "test $rc -eq 2 && grep -q 'tolerance check' u3.err"
mkdir other && "$PY" -c "import numpy as np; np.save('other/y.npy', np.zeros(3, np.float32))"
run u4 "$BIN" compare --a other --b f32 --rank
check "two dumps with no name in common: a usage error" sh -c "test $rc -eq 2 && grep -q 'no tensor name is in both dumps' u4.err"
finish
