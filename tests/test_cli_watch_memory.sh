#!/bin/bash
# test_cli_watch_memory.sh -- `tensorscope train --watch-memory=20` on a
# large micro-batch: the peak RSS in the log, the metrics report
# (MemoryRssBytes `Peak: ... at ...`) and TensorBoard (memory/rss and
# memory/peak_rss per step, read back by TensorBoard's EventAccumulator,
# and a memory chart in the Custom Scalars layout) are each at least what
# the run must hold at once: the model's arenas as --log-memory reports
# them plus the f32 micro-batch the CLI feeds. Bad values of
# --watch-memory and --log-vmodule are usage errors; --log-vmodule model=4
# shows the model's debug lines (the layer template) and no other module's;
# with --log-verbosity 5 each micro-batch's line carries the latest RSS;
# `debug-run --watch-memory` counts the command it runs (a child process).
# Uses the venv of tests/test_tensorboard.sh ($TS_BUILD_DIR/tb-venv).
# needs: tensorboard debug-bundle
set -uo pipefail

BUILD=${TS_BUILD_DIR:?set TS_BUILD_DIR to the CMake build directory}
SRC=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=$BUILD/tensorscope
B=4096

fail() { echo "FAIL $*"; echo "0 passed, 1 failed"; exit 1; }
[ -x "$BIN" ] || fail "$BIN is missing: build the CLI first (cmake --build $BUILD)"
. "$(dirname "$0")/support/tb_venv.sh"
tb_venv_ensure

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ts_cli_mem.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
failed=0

# --drop-last: every step a full micro-batch of B (the bound below assumes it)
if ! "$BIN" train --data "$SRC/data/mnist" --epochs 3 --batch-size $B --drop-last --watch-memory=20 --log-memory --metrics \
    --tensorboard "$TMP/tb" --run-name mem > "$TMP/out" 2> "$TMP/err"; then
    sed 's/^/     | /' "$TMP/err" | head -n 8
    fail "train --watch-memory=20 exited non-zero"
fi
echo "ok   train --epochs 3 --batch-size $B --drop-last --watch-memory=20 --log-memory --metrics --tensorboard exits 0"

"$VENV/bin/python" - "$TMP" "$B" <<'PY' || failed=1
import re, sys
from tensorboard.backend.event_processing import event_accumulator as ea
from tensorboard.plugins.custom_scalar import layout_pb2
from tensorboard.util import tensor_util

tmp, batch = sys.argv[1], int(sys.argv[2])
out, err = open(f"{tmp}/out").read(), open(f"{tmp}/err").read()
failures = 0


def check(ok, msg):
    global failures
    print(("ok   " if ok else "FAIL ") + msg)
    failures += not ok


UNIT = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3}


def size(text):  # "87.04MB" (the library's 1024-based units)
    m = re.fullmatch(r"([0-9.]+)(B|KB|MB|GB)", text)
    return float(m.group(1)) * UNIT[m.group(2)] if m else -1


m = re.search(r"^memory: params (\S+) grads (\S+) optimizer (\S+) activations (\S+)", err + out, re.M)
arenas = sum(size(x) for x in m.groups()) if m else -1
bound = arenas + batch * 784 * 4
check(arenas > 0, f"--log-memory: the arenas hold {arenas / 2**20:.1f} MiB; with the f32 micro-batch "
      f"({batch}x784) the run holds at least {bound / 2**20:.1f} MiB")

m = re.search(r"memory watcher: peak RSS (\S+) at (\S+) after its start .*; (\d+) samples every 20 ms", err)
check(m is not None and size(m.group(1)) >= bound and int(m.group(3)) >= 2,
      f"the log's peak RSS {m.group(1) if m else None} ({m.group(3) if m else 0} samples every 20 ms) is at least that")

m = re.search(r"^Metric: MemoryRssBytes\n  TotalSamples: (\d+)\n  Accumulator: \S+\n  Peak: (\S+) at (\S+)$", out, re.M)
check(m is not None and size(m.group(2)) >= bound and m.group(3).endswith("us"),
      f"--metrics: MemoryRssBytes Peak {m.group(2) if m else None} at {m.group(3) if m else None}")
check(all(f"Metric: Memory{k}Bytes\n" in out for k in ("Pss", "Uss")), "--metrics: MemoryPssBytes and MemoryUssBytes too")

acc = ea.EventAccumulator(f"{tmp}/tb/mem", size_guidance={ea.SCALARS: 0, ea.TENSORS: 0})
acc.Reload()
tags = acc.Tags()
rss = acc.Scalars("memory/rss") if "memory/rss" in tags["scalars"] else []
peak = acc.Scalars("memory/peak_rss") if "memory/peak_rss" in tags["scalars"] else []
check(len(rss) == 3 and [e.step for e in rss] == [1, 2, 3] and all(e.value * 2**20 >= arenas for e in rss),
      f"TensorBoard: memory/rss (MiB) at steps {[e.step for e in rss]}: {[round(e.value, 1) for e in rss]}, each above the arenas")
check(len(peak) == 3 and peak[-1].value * 2**20 >= bound and all(a.value <= b.value for a, b in zip(peak, peak[1:])),
      f"TensorBoard: memory/peak_rss never falls and ends at {peak[-1].value if peak else None:.1f} MiB, at least the bound")
check({"memory/pss", "memory/uss"} <= set(tags["scalars"]), "TensorBoard: memory/pss and memory/uss too")
own = [t for t in tags["scalars"] if re.fullmatch(r"memory/process/\d+_tensorscope/rss", t)]
own_rss = acc.Scalars(own[0]) if len(own) == 1 else []
check(len(own_rss) == 3 and all(o.value <= r.value + 1e-6 for o, r in zip(own_rss, rss)),
      f"TensorBoard: the process's own memory/process/<pid>_tensorscope/rss ({own}), at most the tree's each step")
layout = layout_pb2.Layout()
if "custom_scalars__config__" in tags["tensors"]:
    layout.ParseFromString(tensor_util.make_ndarray(acc.Tensors("custom_scalars__config__")[0].tensor_proto).item())
check(any(c.title == "memory" and any(r == "^memory/" for ch in c.chart for r in ch.multiline.tag) for c in layout.category),
      "the Custom Scalars layout has a memory chart drawing memory/")
sys.exit(1 if failures else 0)
PY

usage() { # usage WHAT EXPECTED-TEXT ARGS...
    local what=$1 want=$2
    shift 2
    "$BIN" train --data "$SRC/data/mnist" --max-steps 1 "$@" > "$TMP/u.out" 2> "$TMP/u.err"
    local rc=$?
    if [ $rc -eq 2 ] && grep -qF -- "$want" "$TMP/u.err"; then echo "ok   $what: exit 2, '$want'"
    else echo "FAIL $what: exit $rc, stderr: $(head -c 300 "$TMP/u.err")"; failed=1; fi
}
usage "--watch-memory=0" "--watch-memory=0: give a whole number from 1 to 2147483647, or --watch-memory alone" --watch-memory=0
usage "--watch-memory=fast" "--watch-memory=fast: give a whole number from 1 to 2147483647" --watch-memory=fast
# beyond int: refused as typed, never wrapped (was "got 1215752191")
usage "--watch-memory=99999999999" "--watch-memory=99999999999: give a whole number from 1 to 2147483647" --watch-memory=99999999999
usage "--log-vmodule bogus=4" "'bogus' is not a module" --log-vmodule bogus=4
usage "--log-vmodule exec=9" "'9' is not a level for exec" --log-vmodule exec=9

"$BIN" train --data "$SRC/data/mnist" --max-steps 1 --watch-memory --log-vmodule model=4 > "$TMP/v.out" 2> "$TMP/v.err" || failed=1
if grep -q '^\[tensorscope D\] layer template' "$TMP/v.err" && ! grep -q '^\[tensorscope T\]' "$TMP/v.err" \
    && ! grep -q 'TensorBoard events go to\|MNIST: loading' "$TMP/v.err" \
    && grep -q 'samples\? every 100 ms' "$TMP/v.err"; then
    echo "ok   --log-vmodule model=4: the layer template (model), no debug line of data or io, no trace line; --watch-memory alone: every 100 ms"
else
    echo "FAIL --log-vmodule model=4 / --watch-memory alone:"; sed 's/^/     | /' "$TMP/v.err" | head -n 12; failed=1
fi
"$BIN" train --data "$SRC/data/mnist" --max-steps 1 --log-vmodule data=4 > /dev/null 2> "$TMP/d.err"
if grep -q '^\[tensorscope D\] MNIST: loading' "$TMP/d.err" && ! grep -q 'layer template' "$TMP/d.err"; then
    echo "ok   --log-vmodule data=4: the data set's debug line, not the model's"
else
    echo "FAIL --log-vmodule data=4:"; sed 's/^/     | /' "$TMP/d.err" | head -n 8; failed=1
fi

# per micro-batch with --log-verbosity 5: each micro-batch's trace line carries the watcher's latest RSS
"$BIN" train --data "$SRC/data/mnist" --max-steps 3 --watch-memory=5 --log-verbosity 5 > /dev/null 2> "$TMP/t.err"
if [ "$(grep -cE '^\[tensorscope T\] micro-batch 1/1 of step [0-9]+: loss [0-9.]+ batch 64 rss [0-9]+\.[0-9] MiB$' "$TMP/t.err")" -eq 3 ]; then
    echo "ok   --watch-memory --log-verbosity 5: every micro-batch's line has the latest RSS"
else
    echo "FAIL --watch-memory --log-verbosity 5:"; grep 'micro-batch' "$TMP/t.err" | sed 's/^/     | /' | head -n 4; failed=1
fi
if ! grep -q ' rss ' <("$BIN" train --data "$SRC/data/mnist" --max-steps 1 --log-verbosity 5 2>&1 >/dev/null | grep 'micro-batch'); then
    echo "ok   without --watch-memory the micro-batch lines have no RSS"
else
    echo "FAIL without --watch-memory a micro-batch line shows an RSS"; failed=1
fi

# --trace with --watch-memory: beside the total's counter track, one per
# process, named by its pid and command, never above the total at a time
"$BIN" train --data "$SRC/data/mnist" --batch-size 1000 --max-steps 3 --quiet --trace "$TMP/t.json" --watch-memory=5 > /dev/null 2>&1 &
tpid=$!
wait "$tpid"
if /usr/bin/python3 - "$TMP/t.json" "$tpid" <<'PY'; then echo "ok   --trace: a counter track 'memory RSS (MiB) pid $tpid (tensorscope)' beside the total, never above it"; else echo "FAIL --trace: the per-process counter track"; failed=1; fi
import json, sys
events = json.load(open(sys.argv[1]))
events = events["traceEvents"] if isinstance(events, dict) else events
total = {e["ts"]: e["args"]["value"] for e in events if e.get("ph") == "C" and e["name"] == "memory RSS (MiB)"}
own = [e for e in events if e.get("ph") == "C" and e["name"] == f"memory RSS (MiB) pid {sys.argv[2]} (tensorscope)"]
assert total and own and all(e["args"]["value"] <= total[e["ts"]] + 1e-9 for e in own if e["ts"] in total), (len(total), len(own))
PY

# debug-run --watch-memory: the command is a child of the watcher's process;
# one that touches 96 MiB puts the logged peak above that (it holds them for
# 3 s: 300 of the watcher's periods, so that a loaded machine still samples it)
"$BIN" debug-run --outfile "$TMP/dr.tar.gz" --tidy --watch-memory=10 -- /usr/bin/python3 -c \
    'import time; b = bytearray(96 << 20); b[::4096] = b"x" * len(b[::4096]); time.sleep(3)' > /dev/null 2> "$TMP/dr.err"
peak=$(sed -n 's/.*memory watcher: peak RSS \([0-9.]*\)MB.*/\1/p' "$TMP/dr.err")
if [ -n "$peak" ] && awk -v p="$peak" 'BEGIN { exit !(p >= 96 * 1.048576) }'; then
    echo "ok   debug-run --watch-memory=10: the peak ($peak MB) counts the command's 96 MiB"
else
    echo "FAIL debug-run --watch-memory=10: peak '${peak:-none}' below the command's 96 MiB:"; sed 's/^/     | /' "$TMP/dr.err" | head -n 6; failed=1
fi

[ $failed -eq 0 ] && echo "all passed" || { echo "some failed"; exit 1; }
