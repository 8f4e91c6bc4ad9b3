#!/bin/bash
# test_dist_mpi.sh -- replicas under mpirun (docs/design.md#replicas-and-pipeline-stages): test_dist with 2
# and 3 ranks (same numbers, the replica axis, per-replica watch rows and
# the reduced row's extremes, NaN and Inf with their replicas, a desync, 2-
# and 3-stage pipelines), a rank that hangs and a rank that dies (the others
# must stop with a message within the timeout, never hang), a numeric stop
# on one of 2 and of 3 ranks (every rank stops at its step, soon, naming
# the rank, the step, the op and its line; replicas and pipelines, and the
# CLI), and
# the CLI under mpirun (rank 0 alone prints and writes; anchors keep the
# replica axis; the per-replica stats table, its [all] row naming the
# replicas of its min and max; --check-replicas naming a rank started from
# other weights, and 0 comparing nothing; rank 0 dumps every replica's
# and every stage's outfeed records; a 2-stage pipeline trains like one
# process). Skipped (exit 77) when the build has no MPI or mpirun is
# missing: `scripts/install-deps.sh test` installs OpenMPI.
set -u

BUILD=${TS_BUILD_DIR:?set TS_BUILD_DIR to the CMake build directory}
SRC=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
DATA=$SRC/data/mnist
PY=/usr/bin/python3

command -v mpirun >/dev/null || { echo "SKIP: mpirun not found (apt-get install openmpi-bin)"; exit 77; }
"$BUILD/test_dist" --available || { echo "SKIP: built without MPI (apt-get install libopenmpi-dev, reconfigure)"; exit 77; }

# CI runs as root; OpenMPI refuses that unless told. Two cores: oversubscribe.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(mpirun --oversubscribe --bind-to none)
# Under AddressSanitizer (make test-asan) memory errors stay fatal, but leak
# checks are off for the ranks: OpenMPI's plugins leak at MPI_Finalize and are
# unloaded by then, leaving no symbols to suppress. test_dist alone (ctest)
# and every other test keep the leak check.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

passed=0 failed=0
ok() { echo "ok   $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }

T=$(mktemp -d "${TMPDIR:-/tmp}/ts_dist.XXXXXX")
trap 'rm -rf "$T"' EXIT
# OpenMPI makes its session directory (ompi.HOST.UID) under TMPDIR; two jobs
# starting at once in the same TMPDIR can race on it ("mkdir: File exists"),
# so each test's jobs keep theirs in the test's own directory.
export TMPDIR=$T

for np in 2 3; do
    if timeout 300 "${MPIRUN[@]}" -np "$np" "$BUILD/test_dist" >"$T/np$np.out" 2>&1; then
        ok "test_dist under mpirun -np $np ($(grep -c '^ok' "$T/np$np.out") checks passed over the ranks)"
    else
        fail "test_dist under mpirun -np $np:"
        grep -E 'FAIL|rror' "$T/np$np.out" | head -20
    fi
done

# A rank that hangs, then one that dies: the job ends, non-zero, with a message.
for mode in hang die; do
    start=$(date +%s)
    timeout 60 "${MPIRUN[@]}" -np 2 "$BUILD/test_dist" "$mode" >"$T/$mode.out" 2>&1
    rc=$? secs=$(($(date +%s) - start))
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$secs" -lt 55 ] && grep -q "$([ $mode = hang ] && echo 'did not complete within 2 s' || echo 'rank 1')" "$T/$mode.out"; then
        ok "a rank that ${mode}s stops the job in ${secs} s with exit $rc and a message"
    else
        fail "a rank that ${mode}s: exit $rc after ${secs} s:"
        tail -20 "$T/$mode.out"
    fi
done

# --check-numerics on one rank: of 2 ranks the last, of 3 the middle one overflows
# at step 3; every rank stops at step 3 with the report naming the rank, the step,
# the op and its line, soon after (the ranks' timeout is 120 s; each rank checks
# and prints one line, then the job ends).
# The same in a pipeline of 2 and of 3 stages, where stage 0 (rank 0) overflows.
for mode in "nan 1" nan-pipeline; do
    for np in 2 3; do
        bad=$([ "$mode" = nan-pipeline ] && echo 0 || echo 1) # replicas: the last of 2 ranks, the middle one of 3
        start=$(date +%s)
        timeout 240 "${MPIRUN[@]}" -np "$np" "$BUILD/test_dist" $mode >"$T/nan$np.out" 2>&1
        rc=$? secs=$(($(date +%s) - start))
        good=$(grep -c '^nan: ok' "$T/nan$np.out")
        if [ "$rc" -ne 124 ] && [ "$good" -eq "$np" ] && [ "$secs" -lt 110 ]; then
            ok "$mode: a numeric stop on rank $bad of $np stops all $np ranks at step 3, each naming rank $bad, the step, the op and its line (${secs} s)"
        else
            fail "$mode: a numeric stop on rank $bad of $np: exit $rc after ${secs} s, $good of $np ranks stopped as they should:"
            grep -E '^nan:|rror' "$T/nan$np.out" | head -10
        fi
    done
done

# The CLI: one sample of 3e38 among small ones, which fc1's MatMul overflows on
# whichever replica's shard it falls in; both ranks stop at the same step, the
# one that found it with the report, the other with "rank R failed ...".
mkdir -p "$T/one_big"
"$PY" -c "import numpy as np; x = np.random.default_rng(0).standard_normal((256, 1, 28, 28)).astype(np.float32) * 0.1; x[5] = 3e38
np.save('$T/one_big/x.npy', x); np.save('$T/one_big/labels.npy', (np.arange(256) % 10).astype(np.int32))"
start=$(date +%s)
timeout 120 "${MPIRUN[@]}" -np 2 "$BUILD/tensorscope" train --model mlp --data "$T/one_big" --batch-size 4 --holdout 64 --threads 1 --quiet \
    --max-steps 40 --check-numerics op >"$T/cli_nan.out" 2>"$T/cli_nan.err"
rc=$? secs=$(($(date +%s) - start))
found=$(grep -o 'numeric check on rank [01] of 2 at step [0-9]*' "$T/cli_nan.err" | sort -u)
bad=$(echo "$found" | grep -o 'rank [01]' | head -1)
told=$(grep -c "$bad failed and stopped every rank of the job: $found: first non-finite value in 'fc1/MatMul:0' (output of op MatMul 'fc1/MatMul:0', built at " "$T/cli_nan.err")
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$(echo "$found" | grep -c .)" -eq 1 ] && [ "$told" -ge 1 ] && [ $secs -lt 60 ]; then
    ok "the CLI: $found stops the other rank at that step with the report (exit $rc, ${secs} s)"
else
    fail "the CLI under mpirun with --check-numerics: exit $rc after ${secs} s, reports '$found', $told ranks told"
    grep -E 'numeric check|failed and stopped|rror' "$T/cli_nan.err" | cut -c1-300 | head -6
fi

# The CLI: mpirun -np 2 tensorscope train with an anchor and the stats table.
if [ -f "$DATA/t10k-images-idx3-ubyte.gz" ]; then
    cd "$T" || exit 1
    timeout 300 "${MPIRUN[@]}" -np 2 "$BUILD/tensorscope" train --data "$DATA" --batch-size 32 --holdout 500 --max-steps 20 --threads 1 \
        --anchor 'Gradient___fc1.bias:all' --stats --outfeed 'Relu:0' --dump-npy dump >cli.out 2>cli.err
    rc=$?
    if [ $rc -eq 0 ]; then ok "mpirun -np 2 tensorscope train exits 0"; else fail "mpirun -np 2 tensorscope train: exit $rc"; cat cli.err; fi
    n=$(grep -c '^epoch 1/1' cli.out)
    [ "$n" -eq 1 ] && ok "rank 0 alone prints (one epoch line)" || fail "expected one epoch line, got $n"
    # the same training in one process with the combined batch: the same loss and accuracy
    "$BUILD/tensorscope" train --data "$DATA" --batch-size 64 --holdout 500 --max-steps 20 --threads 1 --outfeed 'Relu:0' --dump-npy one \
        --quiet >one.out 2>&1
    # (one.out: --quiet, the final line; cli.out: the epoch line first)
    two=$(grep -o 'loss [0-9.]*  held-out accuracy [0-9.]*%' cli.out | head -n 1) one=$(grep -o 'loss [0-9.]*  held-out accuracy [0-9.]*%' one.out)
    [ -n "$two" ] && [ "$two" = "$one" ] && ok "2 replicas of batch 32 train like one process of batch 64 ($two)" || fail "2 replicas: '$two', one process: '$one'"
    grep -q 'replicas: 2' cli.out && ok "the run says it has 2 replicas" || fail "no 'replicas: 2' line in the output"
    rows=$(grep -cE 'Gradient___fc1\.bias\[(0|1|all)\]' cli.out)
    [ "$rows" -eq 3 ] && ok "the stats table has a row per replica and the reduced row" || { fail "stats rows for Gradient___fc1.bias: $rows, expected 3"; cat cli.out; }
    # the reduced row names the replica whose row holds the min and the one whose row holds the max
    if "$PY" - cli.out <<'EOF'; then ok "the reduced row names the replicas of its min and max, as their rows show"; else fail "the reduced row's replicas of min and max"; fi
import re, sys
rows = {}
for line in open(sys.argv[1]):  # the last table's rows
    m = re.match(r"\s*\d+\s+Gradient___fc1\.bias\[(\d|all)\]\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+\d+\s+\d+(.*)", line)
    if m:
        rows[m.group(1)] = (float(m.group(4)), float(m.group(5)), m.group(6).strip())
lo = min((0, 1), key=lambda r: (rows[str(r)][0], r))
hi = min((0, 1), key=lambda r: (-rows[str(r)][1], r))
print("Gradient___fc1.bias rows (min, max, replicas):", rows)
assert rows["all"][0] == rows[str(lo)][0] and rows["all"][1] == rows[str(hi)][1]
assert f"[replica {lo}] min" in rows["all"][2] and f"[replica {hi}] max" in rows["all"][2], rows["all"][2]
EOF
    if "$PY" - dump/Gradient___fc1.bias.npy <<'EOF'; then ok "the anchored array has the replica axis [S, R, 320]"; else fail "the anchored array's shape"; fi
import sys, numpy as np
a = np.load(sys.argv[1])
print("Gradient___fc1.bias.npy", a.shape, a.dtype)
assert a.shape == (1, 2, 320), a.shape
assert not np.array_equal(a[0, 0], a[0, 1]), "the replicas saw different samples, so their gradients differ"
EOF
    # the outfeed: rank 0 gets both replicas' records and dumps each run as [S, R, *T]; first and
    # last run against the one process's [S, 64, 320] (the same samples, replica r's rows r*32..)
    if "$PY" - dump/outfeed one/outfeed <<'EOF'; then ok "rank 0 dumps both replicas' outfeed records as [S, R, *T], equal to one process's"; else fail "the outfeed records of 2 replicas on rank 0"; fi
import sys, numpy as np
for run in (0, 19):
    a = np.load(f"{sys.argv[1]}/Relu_0.run{run}.npy")
    b = np.load(f"{sys.argv[2]}/Relu_0.run{run}.npy")
    print(f"Relu_0.run{run}.npy", a.shape, "one process", b.shape, "max diff", float(np.abs(a.reshape(b.shape) - b).max()))
    assert a.shape == (1, 2, 32, 320), a.shape
    assert np.allclose(a.reshape(b.shape), b, rtol=1e-4, atol=1e-5)
EOF
    # --check-replicas: ranks started from other weights (--seed differs) are named
    # at the first check, before any step, by the first parameter; 0 checks never
    timeout 120 "${MPIRUN[@]}" -np 1 "$BUILD/tensorscope" train --data "$DATA" --max-steps 3 --holdout 128 --threads 1 --quiet --check-replicas 5 \
        : -np 1 "$BUILD/tensorscope" train --data "$DATA" --max-steps 3 --holdout 128 --threads 1 --quiet --check-replicas 5 --seed 1 >seed.out 2>seed.err
    rc=$?
    n=$(grep -c "replicas out of sync after 0 steps: rank 1's 'fc1.weight' differs from rank 0's" seed.err)
    [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$n" -eq 2 ] && ok "--check-replicas 5: weights of another seed on rank 1 stop both ranks naming rank 1 and fc1.weight (exit $rc)" \
        || { fail "--check-replicas 5 with rank 1 on another seed: exit $rc, $n ranks named it"; tail -5 seed.err; }
    timeout 120 "${MPIRUN[@]}" -np 1 "$BUILD/tensorscope" train --data "$DATA" --max-steps 3 --holdout 128 --threads 1 --quiet --check-replicas 0 \
        : -np 1 "$BUILD/tensorscope" train --data "$DATA" --max-steps 3 --holdout 128 --threads 1 --quiet --check-replicas 0 --seed 1 >seed0.out 2>seed0.err
    rc=$?
    [ $rc -eq 0 ] && ! grep -q 'out of sync' seed0.err && ok "--check-replicas 0 compares nothing (exit 0)" || { fail "--check-replicas 0: exit $rc"; tail -5 seed0.err; }
    # the library's own files (TS_METRICS_FILE): rank 0 alone appends, as many blocks as one process
    TS_METRICS_FILE=two.met timeout 120 "${MPIRUN[@]}" -np 2 -x TS_METRICS_FILE "$BUILD/tensorscope" train --data "$DATA" --max-steps 3 \
        --holdout 128 --threads 1 --quiet >/dev/null 2>&1
    TS_METRICS_FILE=one.met "$BUILD/tensorscope" train --data "$DATA" --max-steps 3 --holdout 128 --threads 1 --quiet >/dev/null 2>&1
    two=$(grep -c 'Metric: ExecuteTime' two.met 2>/dev/null) one=$(grep -c 'Metric: ExecuteTime' one.met 2>/dev/null)
    [ -n "$one" ] && [ "$one" -gt 0 ] && [ "$two" = "$one" ] && ok "TS_METRICS_FILE is written by rank 0 alone ($two blocks, one process: $one)" \
        || fail "TS_METRICS_FILE blocks: 2 ranks $two, one process $one"
    # --dump-limit reached on rank 0 (the one that writes) does not stop it alone: the
    # other rank would wait for it in the next all-reduce until the timeout
    start=$SECONDS
    timeout 120 "${MPIRUN[@]}" -np 2 "$BUILD/tensorscope" train --data "$DATA" --max-steps 30 --holdout 128 --threads 1 \
        --outfeed 'Relu:0' --dump-npy lim --dump-limit 300K >lim.out 2>lim.err
    took=$((SECONDS - start))
    grep -q 'trained 30 runs' lim.out && grep -q 'no more dumps are written, all ranks train on' lim.err && [ "$took" -lt 59 ] \
        && ok "--dump-limit under mpirun: rank 0 stops dumping, both ranks finish the 30 steps (${took} s)" \
        || { fail "--dump-limit under mpirun (${took} s)"; tail -3 lim.err; }
    # a 2-stage pipeline of the MLP trains like the unpipelined one (A = 4 micro-batches a step)
    timeout 300 "${MPIRUN[@]}" -np 2 "$BUILD/tensorscope" train --data "$DATA" --batch-size 16 --gradient-accumulation-count 4 --holdout 500 \
        --max-steps 30 --threads 1 --pipeline-stages 2 --split-at fc2 --outfeed 'Relu:1' --dump-npy pdump --quiet --metrics --log-verbosity 4 \
        >pipe.out 2>pipe.err
    rc=$?
    [ $rc -eq 0 ] && ok "mpirun -np 2 tensorscope train --pipeline-stages 2 --split-at fc2 exits 0" || { fail "2-stage pipeline: exit $rc"; tail -5 pipe.err; }
    "$BUILD/tensorscope" train --data "$DATA" --batch-size 16 --gradient-accumulation-count 4 --holdout 500 --max-steps 30 --threads 1 \
        --outfeed 'Relu:1' --dump-npy one4 --quiet >one4.out 2>&1
    two=$(grep -o 'loss [0-9.]*  held-out accuracy [0-9.]*%' pipe.out) one=$(grep -o 'loss [0-9.]*  held-out accuracy [0-9.]*%' one4.out)
    [ -n "$two" ] && [ "$two" = "$one" ] && ok "the 2-stage pipeline trains like one process ($two)" || fail "pipeline: '$two', one process: '$one'"
    if "$PY" - pdump/outfeed one4/outfeed <<'EOF'; then ok "stage 1's outfeed records (Relu:1) reach rank 0, equal to one process's"; else fail "stage 1's outfeed records on rank 0"; fi
import sys, numpy as np
for run in (0, 29):
    a = np.load(f"{sys.argv[1]}/Relu_1.run{run}.npy")
    b = np.load(f"{sys.argv[2]}/Relu_1.run{run}.npy")
    print(f"Relu_1.run{run}.npy", a.shape, "one process", b.shape, "max diff", float(np.abs(a - b).max()))
    assert a.shape == (4, 16, 100), a.shape
    assert np.allclose(a, b, rtol=1e-4, atol=1e-5)
EOF
    grep -q 'rank 1 (stage 1, from fc2): F0 B0 F1 B1' pipe.err && ok "the schedule is logged at level 4" || fail "no schedule in the log"
    # 1F1B: stage 0 runs one forward ahead, then alternates; the same training
    timeout 300 "${MPIRUN[@]}" -np 2 "$BUILD/tensorscope" train --data "$DATA" --batch-size 16 --gradient-accumulation-count 4 --holdout 500 \
        --max-steps 30 --threads 1 --pipeline-stages 2 --split-at fc2 --pipeline-schedule 1f1b --quiet --log-verbosity 4 >pipe1.out 2>pipe1.err
    grep -q 'rank 0 (stage 0, from the inputs): F0 F1 B0 F2 B1 F3 B2 B3 step' pipe1.err && ok "the 1F1B schedule is logged" ||
        { fail "no 1F1B schedule in the log"; grep -A2 'pipeline schedule' pipe1.err; }
    two=$(grep -o 'loss [0-9.]*  held-out accuracy [0-9.]*%' pipe1.out)
    [ -n "$two" ] && [ "$two" = "$one" ] && ok "the 2-stage 1F1B pipeline trains like one process ($two)" || fail "1F1B pipeline: '$two', one process: '$one'"
    grep -q 'Metric: PipelineBubblePercent' pipe.out && ok "the metrics report has the bubble" || fail "no PipelineBubblePercent in the metrics"
    timeout 60 "${MPIRUN[@]}" -np 2 "$BUILD/tensorscope" train --data "$DATA" --pipeline-stages 2 --split-at nosuchscope --max-steps 1 --quiet >bad.out 2>bad.err
    rc=$?
    [ $rc -ne 0 ] && grep -q "no op of scope 'nosuchscope'" bad.err && ok "an unknown split scope is a clear error (exit $rc)" || { fail "unknown split scope: exit $rc"; tail -5 bad.err; }
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
