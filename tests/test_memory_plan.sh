#!/usr/bin/env bash
# test_memory_plan.sh -- `tensorscope memory`: compile's memory plan as a
# liveness report. The buffers live at the peak have the sizes numpy reads
# off a dump of the same model's tensors and add up to the peak; the plan
# is checked against the process's RSS growth over one step; the timeline
# is drawn; bad flags are usage errors.
set -uo pipefail
PY=/usr/bin/python3
. "$(dirname "$0")/support/cli_checks.sh"
cli_paths
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ts_memory_plan.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1

run plan "$BIN" memory --model mlp --top 0
check "memory --model mlp: exit 0" test $rc -eq 0 || show plan.err
check "... one row per point of the step: 19 forward ops, 19 backward, the update" \
    sh -c "test \$(grep -cE '^ +[0-9]+  [0-9.]+ [kMG]?B ' plan.out) -eq 39"
check "... each point names its op and source line" has plan.out "^ +5  .* forward fc1/MatMul:0 \(MatMul at [^ ]+:[0-9]+\)( <- peak)?;"
check "... the peak is named with its op" has plan.out "^peak: [0-9.]+ [kMG]?B \([0-9]+ bytes\) live at point [0-9]+, (forward|backward of) "

# the independent reader: every tensor of one step at the same batch
run dump "$BIN" train --model mlp --data "$DATA" --steps 1 --anchor '*' --dump-npy "$tmp/d" --quiet
check "train --dump-npy of the same model (exit 0)" test $rc -eq 0 || show dump.err
"$PY" - plan.out d > sizes.out 2>&1 <<'PYEOF'
import re, sys
import numpy as np
out, d = open(sys.argv[1]).read(), sys.argv[2]
files = {n: s for s, n in (l.rstrip("\n").split("\t") for l in open(f"{d}/order.txt"))}
peak = int(re.search(r"^peak: .*\((\d+) bytes\)", out, re.M).group(1))
rows = re.findall(r"^  (\d+) +(activations|gradients|optimizer state|parameters|workspace) +(\S+) ", out, re.M)
assert rows, "no rows live at the peak"
assert sum(int(b) for b, _, _ in rows) == peak, (sum(int(b) for b, _, _ in rows), peak)
assert [int(b) for b, _, _ in rows] == sorted((int(b) for b, _, _ in rows), reverse=True), "not largest first"
checked = 0
for b, cls, name in rows:
    v = np.load(f"{d}/{files[name]}.npy")
    want = v.size * 4
    if cls in ("activations", "gradients"):
        want = (want + 63) // 64 * 64  # the arenas align each buffer to 64 bytes
    assert int(b) == want, (name, cls, b, want)
    checked += 1
print("sizes ok", checked)
PYEOF
check "the buffers live at the peak: numpy's sizes of the dumped tensors, largest first, summing to the peak" \
    hasf sizes.out "sizes ok" || show sizes.out 20

# The plan against the process. On the CPU every planned buffer is
# allocated at compile (calloc: pages become resident when first written)
# and written in one step, so the RSS growth over building, compiling and
# one step is the plan's allocation plus what no plan holds: the worker
# threads' stacks, the allocator's arenas and compile's per-op tables, a few
# MB whatever the batch. At batch 16384 the plan is about 65 MB: the growth
# must be at least 95% of it (alignment padding a buffer may not touch is
# far below 5%) and at most 105% plus 8 MB (the fixed costs measure about
# 3 MB here; 8 MB leaves room for another allocator or more threads).
run measure "$BIN" memory --model mlp --batch-size 16384 --measure --summary
check "--measure: exit 0" test $rc -eq 0 || show measure.err
read -r grew allocated < <(sed -nE 's/.*\(grew ([0-9]+) bytes, allocated ([0-9]+)\)$/\1 \2/p' measure.out)
echo "     RSS grew ${grew:-?} bytes; the plan allocates ${allocated:-?}"
# (ThreadSanitizer's shadow memory is resident beside each byte written:
# there only the lower bound holds; AddressSanitizer's measured 1.06x.)
upper=1
ldd "$BIN" 2>/dev/null | grep -q 'libtsan' && upper=0
check "... the RSS growth is the plan's allocation, within 95%..105% + 8 MB" \
    "$PY" -c "g, a = ${grew:-0}, ${allocated:-0}; assert a > 50e6 and 0.95 * a <= g and (not $upper or g <= 1.05 * a + 8e6), (g, a)"
check "... the peak is no more than what is allocated" \
    "$PY" -c "import re; o = open('measure.out').read(); p = int(re.search(r'\((\d+) bytes\) live', o).group(1)); assert p <= ${allocated:-0}, p"

# a section of the metrics report: each compile's planned peak
run metrics "$BIN" train --model mlp --data "$DATA" --steps 1 --metrics --quiet
check "train --metrics reports MemoryPlanPeakBytes, the training program's the same as memory's peak" \
    "$PY" -c "
import re
o = open('metrics.out').read() + open('metrics.err').read()
block = re.search(r'Metric: MemoryPlanPeakBytes\n(  .*\n)*', o).group(0)
vals = [float(v) for v in re.findall(r'=([0-9.]+)MB', block)]
peak = int(re.search(r'\((\d+) bytes\) live', open('plan.out').read()).group(1)) / 2**20
assert any(abs(v - peak) <= 0.006 for v in vals), (vals, peak)" || show metrics.out 30

if needs plots "--plot-memory"; then
    run plot "$BIN" memory --model cnn --summary --plot-memory "$tmp/memory.png"
    check "--plot-memory writes a PNG" sh -c "test $rc -eq 0 && head -c 8 '$tmp/memory.png' | od -c | grep -q 'P   N   G'"
fi
run badtop "$BIN" memory --model mlp --top -1
check "--top -1: a usage error (exit 2)" sh -c "test $rc -eq 2 && grep -q -- '--top must be' badtop.err"
run badmodel "$BIN" memory --model nosuch
check "an unknown model: a usage error (exit 2)" test $rc -eq 2
finish
