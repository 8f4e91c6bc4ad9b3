#!/bin/bash
# test_cli_reliability.sh -- the CLI under hostile input and a hostile
# environment: empty and over-long paths, integers that would overflow or
# truncate, huge learning rates, NaN weights, a FIFO as a weight file,
# outputs that cannot be written (found before training), write errors and
# a full disk during training (reported when they happen; a trace that
# cannot be written fails the run and leaves no earlier run's file), an outfeed dump
# budget, and SIGINT / SIGTERM (the run finishes, everything asked is
# written, exit 130 / 143). Every check prints `ok ...` or `FAIL ...`.
set -u

BUILD=${TS_BUILD_DIR:?set TS_BUILD_DIR to the CMake build directory}
SRC=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=$BUILD/tensorscope
DATA=$SRC/data/mnist
PY=/usr/bin/python3 # Debian's python3-numpy

# shellcheck source=support/cli_checks.sh
source "$SRC/tests/support/cli_checks.sh"
[ -x "$BIN" ] || { fail "$BIN is missing"; finish; }

T=$(mktemp -d "${TMPDIR:-/tmp}/ts_cli_rel.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
FAST=(--data "$DATA" --quiet --batch-size 500 --holdout 1000)
LOUD=(--data "$DATA" --batch-size 500 --holdout 1000) # the epoch lines say how far training went

usage2() { # usage2 WHAT REGEX ARGS...: exit 2 and REGEX on stderr, quickly (no training)
    local what=$1 re=$2
    shift 2
    run u "$BIN" train "${FAST[@]}" "$@"
    check "$what: exit 2, '$re'" eval '[ $rc -eq 2 ] && has u.err "$re" && ! has u.out "^(epoch|trained)"' || show u.err
}

# ---- empty and over-long paths (findings 4, 5)
usage2 '--dump-npy ""' 'non-empty' --dump-npy ""
usage2 '--save-weights ""' 'non-empty' --save-weights ""
usage2 '--anchor ""' 'non-empty' --anchor ""
long=$T
while [ ${#long} -lt 1100 ]; do long=$long/$(printf 'd%.0s' {1..200}); done
run longpath "$BIN" train "${FAST[@]}" --max-steps 1 --anchor 'Gradient___fc3.bias' --dump-npy "$long"
check "a ${#long}-character --dump-npy directory: the dump lands in it, nothing in its parent" \
    eval '[ $rc -eq 0 ] && [ -f "$long/Gradient___fc3.bias.npy" ] && [ -z "$(find "$(dirname "$long")" -maxdepth 1 -name "*.npy")" ]' ||
    show longpath.err

# ---- overflowing and truncated integers, huge learning rates (findings 6, 10)
usage2 'D x A = 65536 x 65536 (was SIGFPE)' 'micro-batches a run' --repeat-count 65536 --gradient-accumulation-count 65536
usage2 '--watch-period 4294967297 (was period 1)' '--watch-period 4294967297 is out of range' --watch-period 4294967297
usage2 '--watch-period 2147483648 (was -2147483648)' '--watch-period 2147483648 is out of range' --watch-period 2147483648
usage2 '--watch-period 0' 'watch-period must be 1\.\.2147483647, got 0' --watch-period 0
usage2 '--anchor x:every_n:4294967297 (was period 1)' 'period must be 1\.\.' --anchor 'fc1.bias:every_n:4294967297'
usage2 '--output-mode every_n:99999999999' 'period must be 1\.\.' --output-mode 'every_n:99999999999'
usage2 '--lr 1e308 (was inf, exit 1 at compile)' 'lr must be in \[0, 1e6\]' --lr 1e308
usage2 '--lr 2e6' 'lr must be in \[0, 1e6\]' --lr 2e6
usage2 '--dump-limit lots' 'dump-limit expects a size' --dump-limit lots

# ---- weights: NaN values and a FIFO (finding 11)
run save "$BIN" train "${FAST[@]}" --max-steps 1 --save-weights w
check "save weights" eval '[ $rc -eq 0 ] && [ -f w/fc1.weight.npy ]' || show save.err
cp -r w wnan
$PY -c "import numpy as np; a=np.load('wnan/fc2.bias.npy'); a[3]=np.nan; np.save('wnan/fc2.bias.npy', a)"
run nanw "$BIN" train "${FAST[@]}" --max-steps 1 --weights wnan
check "a weight file with a NaN is refused (exit 1, names the file)" \
    eval '[ $rc -eq 1 ] && has nanw.err "fc2.bias.npy: .fc2.bias. holds 1 NaN"' || show nanw.err
cp -r w wfifo && rm wfifo/fc1.weight.npy && mkfifo wfifo/fc1.weight.npy
run fifo timeout 60 "$BIN" train "${FAST[@]}" --max-steps 1 --weights wfifo
check "a FIFO as a weight file: an error at once, not a hang" \
    eval '[ $rc -eq 1 ] && has fifo.err "not a regular file"' || show fifo.err

# ---- outputs checked before any work (finding 14)
# (--plot and --histogram create their folder: one that cannot be made)
for spec in "plots --plot /proc/no/such/p.png" "plots --histogram /proc/no/such/h.png" "- --save-weights /proc/no/such" \
    "tensorboard --tensorboard /proc/no/such" "plots --plot ."; do
    feature=${spec%% *} spec=${spec#* }
    [ "$feature" = - ] || needs "$feature" "unwritable $spec" || continue
    # shellcheck disable=SC2086
    usage2 "unwritable $spec found before training" "${spec%% *}" $spec --epochs 3
done
run dbg "$BIN" debug-run --outfile /nonexistent-dir/x.tar.gz -- touch ran
check "debug-run --outfile in a missing directory: exit 1 before the command runs, 'debug-run:' said once (was twice)" \
    eval '[ $rc -eq 1 ] && [ ! -e ran ] && has dbg.err "^tensorscope: debug-run: --outfile: " && ! has dbg.err "debug-run: debug-run"' || show dbg.err

# ---- write errors during training, when they happen (findings 14, 15)
run metrics env TS_METRICS_FILE=/nonexistent-dir/m.txt "$BIN" train "${LOUD[@]}" --epochs 2
check "TS_METRICS_FILE that cannot be written stops the first run (exit 1)" \
    eval '[ $rc -eq 1 ] && has metrics.err "TS_METRICS_FILE" && ! has metrics.out "^epoch 1/"' || show metrics.err
# a full disk, simulated with a file size limit (writes fail with EFBIG)
full() { (ulimit -f 64 && trap '' XFSZ && exec "$@"); }
if needs tensorboard "TensorBoard on a full disk"; then
    run tbfull full "$BIN" train "${LOUD[@]}" --batch-size 100 --epochs 3 --tensorboard tb --watch 'fc*' --stats
    check "TensorBoard on a full disk: exit 1 during the first epoch, not at close" \
        eval '[ $rc -eq 1 ] && has tbfull.err "TensorBoard" && ! has tbfull.out "^epoch 1/"' || show tbfull.err
fi
run dumpfull full "$BIN" train "${FAST[@]}" --batch-size 16 --max-steps 20 --outfeed fc1.weight_grad --dump-npy dd
check "outfeed dumps on a full disk: exit 1 naming the write error (was exit 0, '0 written')" \
    eval '[ $rc -eq 1 ] && has dumpfull.err "writing outfeed dumps"' || show dumpfull.err
echo '{"a trace of an earlier run":1}' > tr.json
run tracefull full "$BIN" train "${FAST[@]}" --batch-size 16 --max-steps 20 --trace tr.json
check "--trace on a full disk: exit 1 naming the trace, the earlier run's file removed (was exit 0, a warning, the old file kept)" \
    eval '[ $rc -eq 1 ] && has tracefull.err "trace: writing tr.json failed" && [ ! -e tr.json ]' || show tracefull.err
run tracedev "$BIN" train "${FAST[@]}" --max-steps 2 --trace /dev/full
check "--trace /dev/full (an open range, written at the end): exit 1 (was exit 0)" \
    eval '[ $rc -eq 1 ] && has tracedev.err "/dev/full failed: No space left"' || show tracedev.err
run tracedev2 "$BIN" train "${FAST[@]}" --max-steps 4 --trace /dev/full --trace-steps 1:2
check "--trace /dev/full --trace-steps 1:2 (written when step 2 ends): exit 1" \
    eval '[ $rc -eq 1 ] && has tracedev2.err "/dev/full failed: No space left"' || show tracedev2.err
run budget "$BIN" train "${FAST[@]}" --batch-size 16 --epochs 1 --outfeed fc1.weight_grad --dump-npy db --dump-limit 3M
bytes=$(du -sb db | cut -f1)
check "--dump-limit 3M: training stops with a message, $bytes bytes on disk" \
    eval '[ $rc -eq 1 ] && has budget.err "reached --dump-limit 3M" && [ "$bytes" -le $((3 * 1048576 + 65536)) ]' ||
    show budget.err
check "... and says how much it wrote" eval 'has budget.out "written to db/outfeed"'

# ---- SIGINT / SIGTERM: finish the run, write what was asked, 130 / 143 (finding 13)
tfrecords_whole() { # every TFRecord of the file is whole: no torn record at the end
    $PY - "$1" << 'PYEOF'
import struct, sys
b = open(sys.argv[1], "rb").read()
pos = n = 0
while pos < len(b):
    if pos + 12 > len(b): sys.exit("torn header at %d" % pos)
    (length,) = struct.unpack("<Q", b[pos:pos + 8])
    pos += 12 + length + 4
    n += 1
if pos != len(b): sys.exit("torn record at the end")
print(n, "records")
PYEOF
}
# Training runs once TensorBoard has a loss (or, built without TensorBoard,
# once the per-step log has one); the plot is asked for when plots are built.
has_tb=false has_plots=false
has_feature tensorboard && has_tb=true
has_feature plots && has_plots=true
interrupt() { # interrupt SIG DIR: train in the background, signal it once training runs
    local sig=$1 d=$2 extra=()
    mkdir -p "$d"
    if $has_tb; then extra+=(--tensorboard "$d/tb"); else extra+=(--log-verbosity 5); fi
    $has_plots && extra+=(--plot "$d/p.png")
    set -m # the job gets default SIGINT handling, as from a terminal
    "$BIN" train "${FAST[@]}" --batch-size 50 --epochs 200 "${extra[@]}" \
        --save-weights "$d/w" --anchor 'Gradient___fc3.bias' --dump-npy "$d/npy" > "$d/out" 2> "$d/err" &
    local pid=$!
    set +m
    for _ in $(seq 600); do
        if $has_tb; then grep -q "loss" "$d/tb"/*/events.* 2> /dev/null && break; else grep -q "step [0-9]* loss" "$d/err" && break; fi
        sleep 0.1
    done
    sleep 1
    kill -"$sig" "$pid"
    wait "$pid"
    rc=$?
}
interrupt INT sigint
check "SIGINT: exit 130 after writing what was asked (weights, plot, dumps)" \
    eval '[ $rc -eq 130 ] && has sigint/err "interrupted by SIGINT" && [ -f sigint/w/fc1.weight.npy ] && { ! $has_plots || [ -f sigint/p.png ]; } && [ -f sigint/npy/Gradient___fc3.bias.npy ]' ||
    show sigint/err
if needs tensorboard "SIGINT: the TensorBoard file's last record"; then
    check "SIGINT: the TensorBoard file ends with a whole record" tfrecords_whole sigint/tb/*/events.*
fi
interrupt TERM sigterm
check "SIGTERM: exit 143 after writing the weights" \
    eval '[ $rc -eq 143 ] && has sigterm/err "interrupted by SIGTERM" && [ -f sigterm/w/fc3.bias.npy ]' || show sigterm/err

finish
