#!/bin/bash
# test_cli_dump_debug.sh -- the offline debugger dump (docs/cli.md#debugger-dump,
# docs/formats.md#debugger-dump) against NumPy as the independent reader:
# 1. train --dump-debug D --dump-steps 2:3 --grads states its plan before
#    training; NumPy reads the index and every file it lists (dtype and shape
#    as listed), exactly steps 2 and 3 are there, every op output and every
#    gradient of each; the planned size is the files' size; fc1/MatMul:0 is
#    Flatten:0 @ fc1.weight^T; fc1.weight at step 3 is step 2's less
#    lr x its gradient (plain SGD); the values of step 3 equal the anchors
#    of the same tensors of a separate run stopped at step 3 (--dump-npy).
# 2. --dump-ops selects exactly the names (fc1*) or op types (MatMul) it says.
# 3. --dump-limit below the plan refuses before any training, saying how to
#    raise it; nothing is written. A step range outside the training, or
#    --dump-steps without --dump-debug, is a usage error.
# 4. `inspect D` (commands on stdin): print with slices, step, diff between
#    steps, grad, where, list and eval (@, where, a reduction) print the
#    values NumPy reads from the files; a bad eval names its column; rerun
#    says a dump has no model to run.
# 5. A run killed (SIGKILL) while it dumps leaves an index whose every row
#    names a complete file.
set -u

# shellcheck source=support/cli_checks.sh
source "$(dirname "$0")/support/cli_checks.sh"
cli_paths
PY=/usr/bin/python3
"$PY" -c 'import numpy' 2> /dev/null || { echo "skip: NumPy is not installed for $PY"; exit 77; }

T=$(mktemp -d "${TMPDIR:-/tmp}/ts_dump_debug.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
TRAIN=("$BIN" train --model mlp --data "$DATA" --threads 1 --holdout 64 --batch-size 16 --optimizer sgd --lr 0.05 --momentum 0 --weight-decay 0)

# 1. the dump, read by NumPy
run dump "${TRAIN[@]}" --steps 4 --dump-debug D --dump-steps 2:3 --grads
if [ "$rc" -eq 0 ] && has dump.err '^--dump-debug: [0-9]+ tensors x 2 steps = [0-9.]+ MiB planned into D \(limit 1G\)'; then
    ok "the plan is stated before training"
else
    fail "train --dump-debug (rc $rc)"
    show dump.err
fi
run anchors "${TRAIN[@]}" --steps 3 --anchor fc1/MatMul:0 --anchor Relu:0 --anchor Gradient___fc1.bias --anchor loss --dump-npy N
[ "$rc" -eq 0 ] || { fail "the separate run (rc $rc)"; show anchors.err; }
MIB=$(sed -n 's/^--dump-debug: .* = \([0-9.]*\) MiB planned.*/\1/p' dump.err)
"$PY" - "$MIB" > numpy.out 2>&1 << 'PY'
import fnmatch, glob, os, sys
import numpy as np
rows = np.genfromtxt("D/index.tsv", delimiter="\t", names=True, dtype=None, encoding="utf-8", comments=None)
assert rows.dtype.names == ("step", "name", "kind", "op", "source", "position", "dtype", "shape", "path"), rows.dtype.names
assert sorted(set(rows["step"].tolist())) == [2, 3], set(rows["step"].tolist())
val = {}
size = 0
for r in rows:
    a = np.load(os.path.join("D", r["path"]))
    assert a.dtype == np.dtype(r["dtype"]), (r["name"], a.dtype, r["dtype"])
    assert list(a.shape) == [int(v) for v in r["shape"].strip("[]").split(",") if v], (r["name"], a.shape, r["shape"])
    assert r["source"].startswith("tools/models.c:"), r["source"]
    val[(r["name"], int(r["step"]))] = a
    size += os.path.getsize(os.path.join("D", r["path"]))
files = sorted(glob.glob("D/step_*/*.npy"))
assert len(files) == len(rows), (len(files), len(rows))
assert abs(size / 2**20 - float(sys.argv[1])) <= 0.051, (size, sys.argv[1])
for step in (2, 3):
    names = {n for (n, s) in val if s == step}
    for need in ("x", "labels", "Flatten:0", "fc1.weight", "fc1/MatMul:0", "fc1/Add:0", "Relu:0", "loss",
                 "Gradient___fc1.weight", "Gradient___fc1.bias", "Gradient___Relu:0", "Gradient___fc1/MatMul:0"):
        assert need in names, (need, step, sorted(names))
    assert all(r["kind"] == ("grad" if r["name"].startswith("Gradient___") else "value") for r in rows)
    np.testing.assert_allclose(val["fc1/MatMul:0", step], val["Flatten:0", step] @ val["fc1.weight", step].T, rtol=1e-4, atol=1e-5)
np.testing.assert_allclose(val["fc1.weight", 3], val["fc1.weight", 2] - np.float32(0.05) * val["Gradient___fc1.weight", 2],
                           rtol=1e-5, atol=1e-7)
order = {}
for f in glob.glob("N/*.npy"):
    order[os.path.basename(f)] = np.load(f)
for name in ("fc1/MatMul:0", "Relu:0", "Gradient___fc1.bias", "loss"):
    hits = [k for k in order if k.startswith(name.replace("/", "_").replace(":", "_"))]
    assert len(hits) == 1, (name, sorted(order))
    np.testing.assert_array_equal(order[hits[0]].reshape(val[name, 3].shape), val[name, 3])
print("numpy agrees")
PY
if hasf numpy.out "numpy agrees"; then ok "NumPy reads the index and every file; the values are the model's and the separate run's"; else fail "the dump read by NumPy"; show numpy.out 20; fi

# 2. --dump-ops: names or op types, exactly
run ops1 "${TRAIN[@]}" --steps 2 --dump-debug O1 --dump-ops 'fc1*' --quiet
run ops2 "${TRAIN[@]}" --steps 2 --dump-debug O2 --dump-ops MatMul --dump-steps 2 --quiet
"$PY" > ops.out 2>&1 << 'PY'
import fnmatch
import numpy as np
def rows(d):
    return np.genfromtxt(d + "/index.tsv", delimiter="\t", names=True, dtype=None, encoding="utf-8", comments=None)
full = rows("D")
full2 = {(r["name"], r["op"]) for r in full if r["step"] == 2 and r["kind"] == "value"}
a = rows("O1")
assert sorted(set(a["step"].tolist())) == [1, 2]
want = {n for n, op in full2 if fnmatch.fnmatchcase(n, "fc1*") or fnmatch.fnmatchcase(op, "fc1*")}
assert {r["name"] for r in a if r["step"] == 2} == want and want, (sorted(want), a)
b = rows("O2")
assert set(b["step"].tolist()) == {2}
want = {n for n, op in full2 if op == "MatMul"}
assert {r["name"] for r in b} == want and len(want) == 3, (want, b)
print("selected exactly")
PY
if [ "$rc" -eq 0 ] && hasf ops.out "selected exactly"; then ok "--dump-ops and --dump-steps select exactly what they say"; else fail "--dump-ops"; show ops.out 20; fi

# 3. the limit
run limit "${TRAIN[@]}" --steps 3 --dump-debug L --grads --dump-limit 1M
if [ "$rc" -eq 2 ] && hasf limit.err "over the limit of 1.0 MiB; raise the limit (--dump-limit SIZE" && ! hasf limit.out "trained" && [ ! -e L/index.tsv ]; then
    ok "--dump-limit refuses a dump planned over it, before training"
else
    fail "--dump-limit (rc $rc)"
    show limit.err
fi

run outside "${TRAIN[@]}" --steps 2 --dump-debug R --dump-steps 5:6
run alone "${TRAIN[@]}" --steps 2 --dump-steps 1:2
if [ "$rc" -eq 2 ] && hasf alone.err "--dump-steps says what --dump-debug DIR writes" && hasf outside.err "training makes 2 runs, none of them in the range" &&
    [ ! -e R/index.tsv ]; then
    ok "a step range outside the training, or without --dump-debug, is a usage error"
else
    fail "--dump-steps checks"
    show outside.err
    show alone.err
fi

# 4. the offline inspector
printf '%s\n' 'list fc1*' 'print fc1/Add:0[1,:6]' 'step 3' 'grad fc1.bias[2:5]' 'diff fc1.weight[0,:4] 2 3' 'diff fc1.bias' \
    'where fc1/MatMul:0' 'eval fc1.weight[:3] @ Flatten:0[1]' 'eval where(Gradient___fc1.bias[:40] > 0)' \
    'eval sum(fc1/Add:0 * 2, axis=0)[-4:]' 'eval fc1.bias + nope' 'rerun fc1.bias=1' 'print nope' 'step 7' 'quit' > cmds
run insp "$BIN" inspect D < cmds
"$PY" > insp.check 2>&1 << 'PY'
import re
import numpy as np
out = open("insp.out").read()
rows = np.genfromtxt("D/index.tsv", delimiter="\t", names=True, dtype=None, encoding="utf-8", comments=None)
path = {(r["name"], int(r["step"])): "D/" + r["path"] for r in rows}
load = lambda n, s: np.load(path[n, s])
def values_after(label):
    m = re.search(re.escape(label) + r"[^\n]*\n\[([^\]]*)\]", out)
    assert m, (label, out)
    return np.array([float(v) for v in m.group(1).split(",")])
np.testing.assert_allclose(values_after("fc1/Add:0[1,:6]@2"), load("fc1/Add:0", 2)[1, :6], rtol=1e-6)
np.testing.assert_allclose(values_after("Gradient___fc1.bias[2:5]@3"), load("Gradient___fc1.bias", 3)[2:5], rtol=1e-6, atol=1e-12)
d = load("fc1.weight", 3)[0, :4] - load("fc1.weight", 2)[0, :4]
m = re.search(r"fc1.weight\[0,:4\]@3 - fc1.weight\[0,:4\]@2 .*\n.*changed (\d+) of 4 values, max \|change\| (\S+)", out)
assert m and int(m.group(1)) == int((d != 0).sum()) and np.isclose(float(m.group(2)), np.abs(d).max(), rtol=1e-6), (m and m.groups(), d)
d = load("fc1.bias", 3) - load("fc1.bias", 2)
m = re.search(r"fc1.bias@3 - fc1.bias@2 .*\n.*changed (\d+) of 320 values, max \|change\| (\S+)", out)
assert m and int(m.group(1)) == int((d != 0).sum()) and np.isclose(float(m.group(2)), np.abs(d).max(), rtol=1e-6), (m and m.groups())
src = [r["source"] for r in rows if r["name"] == "fc1/MatMul:0"][0]
assert f"tensor 'fc1/MatMul:0' (op MatMul), built at {src}, graph position" in out and "dumped at steps 2 3" in out, out
assert "error: no tensor 'nope' in the dump" in out and "error: step K: K is a dumped step, got '7'" in out, out
for n in ("fc1.weight", "fc1.bias", "fc1/MatMul:0", "fc1/Add:0"):
    assert re.search(r"  " + re.escape(n) + r" +float32\[", out), (n, out)
def block(label):  # the lines a command printed: its summary line (label first), then the values, up to the next prompt
    lines = out.split("\n")
    i = next(k for k, l in enumerate(lines) if re.match(r"(\(tensorscope\) )?" + re.escape(label) + " ", l))
    rest = []
    for l in lines[i + 1:]:
        if l.startswith("(tensorscope)"):
            break
        rest.append(l)
    return np.array([float(v) for v in re.findall(r"-?[0-9.]+(?:e[-+]?[0-9]+)?", " ".join(rest))])
np.testing.assert_allclose(block("fc1.weight[:3] @ Flatten:0[1]"), load("fc1.weight", 3)[:3].astype(np.float64) @ load("Flatten:0", 3)[1], rtol=1e-5, atol=1e-6)
np.testing.assert_array_equal(block("where(Gradient___fc1.bias[:40] > 0)"), np.argwhere(load("Gradient___fc1.bias", 3)[:40] > 0).ravel())
np.testing.assert_allclose(block("sum(fc1/Add:0 * 2, axis=0)[-4:]"), (load("fc1/Add:0", 3).astype(np.float64) * 2).sum(0)[-4:], rtol=1e-5, atol=1e-6)
assert re.search(r"error: eval: column 12: no tensor named 'nope'", out), out
assert "error: rerun re-executes a run `train` holds" in out, out
print("inspector agrees")
PY
if [ "$rc" -eq 0 ] && hasf insp.check "inspector agrees"; then ok "inspect DIR prints the values NumPy reads (print, grad, diff between steps, where, list, eval)"; else fail "inspect DIR (rc $rc)"; show insp.check 20; show insp.out 30; fi
mkdir empty
run empty "$BIN" inspect empty < /dev/null
if [ "$rc" -ne 0 ] && hasf empty.err "is not a debugger dump"; then ok "inspect of a directory without an index says it is not a dump"; else fail "inspect empty dir (rc $rc)"; show empty.err; fi

# 5. killed while dumping: the index lists complete files only
"${TRAIN[@]}" --steps 100000 --dump-debug K --dump-ops 'fc1*' --dump-limit 0 --quiet > kill.out 2> kill.err &
pid=$!
for ((i = 0; i < 1200; i++)); do # until the index lists 3 steps (120 s at most)
    [ -f K/index.tsv ] && [ "$(cut -f1 K/index.tsv | sort -u | wc -l)" -ge 4 ] && break
    sleep 0.1
done
kill -KILL "$pid" 2> /dev/null
wait "$pid" 2> /dev/null
"$PY" > kill.check 2>&1 << 'PY'
import os
import numpy as np
rows = np.genfromtxt("K/index.tsv", delimiter="\t", names=True, dtype=None, encoding="utf-8", comments=None)
assert len(set(rows["step"].tolist())) >= 3, rows
for r in rows:
    a = np.load("K/" + r["path"])
    assert list(a.shape) == [int(v) for v in r["shape"].strip("[]").split(",") if v]
print("complete")
PY
if hasf kill.check "complete"; then ok "a run killed while dumping leaves an index of complete files"; else fail "killed dump"; show kill.check 20; fi
finish
