#!/bin/bash
# test_dist_options.sh -- ranks started with different options
# (docs/design.md#replicas-and-pipeline-stages): under mpirun's MPMD syntax (-np 1 CMD1 : -np 1 CMD2) the two ranks
# of `tensorscope train` get a different --optimizer, --lr, --batch-size or
# --lr-schedule, --loss-scale, --max-steps, --epochs or --holdout
# (replicas), or --momentum (a 2-stage pipeline). Every rank
# must stop with TS_ERR_DIST before any step, naming the option and both
# ranks' values ("rank 1 has the learning rate (--lr) 0.1, rank 0 has
# 0.01"), not blame the starting weights, and print no banner with a wrong
# global batch; the same options on both still train. Skipped (exit 77)
# when the build has no MPI, mpirun or MNIST.
set -u

BUILD=${TS_BUILD_DIR:?set TS_BUILD_DIR to the CMake build directory}
SRC=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
DATA=$SRC/data/mnist
TS=$BUILD/tensorscope

command -v mpirun >/dev/null || { echo "SKIP: mpirun not found (apt-get install openmpi-bin)"; exit 77; }
"$BUILD/test_dist" --available || { echo "SKIP: built without MPI (apt-get install libopenmpi-dev, reconfigure)"; exit 77; }
[ -f "$DATA/t10k-images-idx3-ubyte.gz" ] || { echo "SKIP: no MNIST in $DATA"; exit 77; }

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" # OpenMPI's plugins leak at MPI_Finalize (see test_dist_mpi.sh)
MPIRUN=(mpirun --oversubscribe --bind-to none)

passed=0 failed=0
ok() { echo "ok   $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }

T=$(mktemp -d "${TMPDIR:-/tmp}/ts_dist_options.XXXXXX")
trap 'rm -rf "$T"' EXIT
export TMPDIR=$T # OpenMPI's session directory is the test's own (see test_dist_mpi.sh)
cd "$T" || exit 1

COMMON=(train --data "$DATA" --holdout 128 --max-steps 3 --threads 1)

# mismatch NAME "RANK0 FLAGS" "RANK1 FLAGS" "EXPECTED MESSAGE"
mismatch() {
    local name=$1 expect=$4
    read -ra r0 <<<"$2"
    read -ra r1 <<<"$3"
    local start=$SECONDS
    timeout 120 "${MPIRUN[@]}" -np 1 "$TS" "${COMMON[@]}" "${r0[@]}" : -np 1 "$TS" "${COMMON[@]}" "${r1[@]}" >"$name.out" 2>"$name.err"
    local rc=$? took=$((SECONDS - start))
    local n
    n=$(grep -cF "$expect" "$name.err")
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$n" -eq 2 ] && [ $took -lt 60 ]; then
        ok "$name differs: exit $rc in ${took} s, both ranks say \"$expect\""
    else
        fail "$name differs: exit $rc after ${took} s, $n ranks say \"$expect\":"
        grep -v '^ *$' "$name.err" | head -5
    fi
    ! grep -q 'out of sync\|trained [0-9]* runs\|^epoch' "$name.out" "$name.err" \
        && ok "$name: no step ran and the starting weights are not blamed" || fail "$name: a step ran or the weight check fired"
}

mismatch optimizer "--optimizer sgd" "--optimizer adam" "rank 1 has the optimizer (--optimizer) adam, rank 0 has sgd"
mismatch lr "--lr 0.01" "--lr 0.1" "rank 1 has the learning rate (--lr) 0.1, rank 0 has 0.01"
mismatch batch "--batch-size 32" "--batch-size 16" "rank 1 has input 'x' (its first axis is the micro-batch size, --batch-size) f32[16,1,28,28], rank 0 has f32[32,1,28,28]"
grep -q 'replicas: 2' batch.out && fail "a banner with a global batch was printed for ranks that disagree on it" || ok "no banner with a wrong global batch"
mismatch schedule "--lr-schedule constant" "--lr-schedule cosine" "rank 1 has the learning-rate schedule (--lr-schedule) cosine, rank 0 has constant"
# loss scaling: on one rank only, or from another scale (each would skip
# other steps and drift apart silently)
mismatch loss_scale "" "--loss-scale 1024" "rank 1 has loss scaling (--loss-scale) dynamic from 1024, rank 0 has off"
mismatch loss_scale_init "--loss-scale 1024" "--loss-scale dynamic" \
    "rank 1 has loss scaling (--loss-scale) dynamic from 65536, rank 0 has dynamic from 1024"
# the planned length: a rank that stops first would leave the other waiting
# until the job's timeout; a constant schedule's mismatch names the flag,
# not the cosine schedule's steps
mismatch max_steps "" "--max-steps 5" "rank 1 has the step limit (--max-steps) 5, rank 0 has 3"
mismatch epochs "--epochs 1" "--epochs 2" "rank 1 has the epochs (--epochs) 2, rank 0 has 1"
mismatch holdout "--holdout 128" "--holdout 256" "rank 1 has the held-out samples (--holdout) 256, rank 0 has 128"
grep -q cosine holdout.err && fail "a constant schedule's --holdout mismatch speaks of the cosine schedule" \
    || ok "a constant schedule's --holdout mismatch does not speak of the cosine schedule"
mismatch cosine_holdout "--lr-schedule cosine --holdout 128" "--lr-schedule cosine --holdout 256" \
    "rank 1 has the held-out samples (--holdout) 256, rank 0 has 128"
mismatch pipeline "--pipeline-stages 2 --split-at fc2 --momentum 0.9" "--pipeline-stages 2 --split-at fc2 --momentum 0.5" \
    "rank 1 has the momentum (--momentum) 0.5, rank 0 has 0.9"

timeout 120 "${MPIRUN[@]}" -np 1 "$TS" "${COMMON[@]}" --lr 0.05 : -np 1 "$TS" "${COMMON[@]}" --lr 0.05 >same.out 2>same.err
rc=$?
[ $rc -eq 0 ] && grep -q 'replicas: 2 (one per MPI rank), micro-batch 64 each, 128 per step' same.out \
    && ok "the same options on both ranks train (exit 0, the banner says 128 per step)" || { fail "the same options: exit $rc"; tail -5 same.err; }

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
