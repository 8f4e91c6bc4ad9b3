#!/usr/bin/env bash
# bench/run.sh BUILD_DIR -- tensorscope's benchmarks side by side with peers.
#
# Each row runs a baseline and a candidate command; each prints one line
#   <impl> batch=B threads=T steps=N ms_per_step=.. samples_per_s=.. gflops=..
# and the row reports ratio = baseline ms / candidate ms against a target
# (PASS when ratio >= target). A benchmark, not a test: exits 0 either way
# (2 only for a usage error). To add a benchmark, add a `row` call at the
# bottom. Overheads (observation, numeric checks, diagnostics) are
# `overhead_row`s: one command times the plain and the observed training in
# one process, interleaved, printing a role=base and a role=cand line and the
# overhead (median over repetitions of cand / base - 1); the row checks it
# against a maximum, or just reports it when the maximum is "-". ms/step is
# then each side's median repetition.
#
# Threads: TS_BENCH_THREADS (default 2) for both sides, exported as
# OPENBLAS_NUM_THREADS, OMP_NUM_THREADS and MKL_NUM_THREADS so BLAS and
# OpenMP pools match; bench_mlp takes it as its thread count and
# torch_mlp.py as torch.set_num_threads.
#
# FLOP convention (GFLOP/s column): matmuls only, per micro-batch of B
#   forward 2*B*(784*320 + 320*100 + 100*10), backward twice that,
#   6*B*(784*320 + 320*100 + 100*10) = 1,703,280*B in all
# (elementwise ops, softmax and the update are not counted; the backward of
# fc1 needs no input gradient but is counted as in the convention).
# torch_mlp.py uses this formula; bench_mlp uses ts_model_flops_per_microbatch,
# which should follow the same convention so the columns compare.
set -u

usage() { echo "usage: bench/run.sh BUILD_DIR   (env: TS_BENCH_THREADS, TS_BENCH_SCALE)" >&2; exit 2; }
[ $# -eq 1 ] || usage
BUILD=$1
[ -d "$BUILD" ] || { echo "bench/run.sh: no build directory $BUILD (run make build first)" >&2; exit 2; }
SRC=$(cd "$(dirname "$0")/.." && pwd)
CORES=$(getconf _NPROCESSORS_ONLN)   # before OMP_NUM_THREADS is set: nproc obeys it
PY=/usr/bin/python3   # Debian's interpreter: it has python3-torch
THREADS=${TS_BENCH_THREADS:-2}
SCALE=${TS_BENCH_SCALE:-1}   # multiplies every step count (0.2 for a quick look)
export TS_BENCH_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS OMP_NUM_THREADS=$THREADS \
       MKL_NUM_THREADS=$THREADS

steps() { awk -v n="$1" -v s="$SCALE" 'BEGIN { v = int(n * s); print (v < 1 ? 1 : v) }'; }

# field LINE KEY -> the value of key=value in LINE (empty when absent)
field() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1; }

# measure CMD... -> the command's result line, or "failed" (its output on stderr)
measure() {
    local out line
    if out=$("$@" 2>&1) && line=$(printf '%s\n' "$out" | grep -E ' ms_per_step=' | tail -n 1) \
        && [ -n "$line" ]; then
        printf '%s\n' "$line"
    else
        printf '%s\n' "$out" | tail -n 5 | sed 's/^/    | /' >&2
        echo failed
    fi
}

ROWS=() PASSES=0 MISSES=0
hr() { printf '%.0s-' $(seq 1 70); printf '\n'; }

# show LABEL LINE -> one table line for a result line (or "failed")
show() {
    if [ "$2" = failed ]; then
        printf '%-22s %-12s %10s\n' "$1" "?" failed
    else
        printf '%-22s %-12s %10s %12s %9s\n' "$1" "${2%% *}" "$(field "$2" ms_per_step)" \
            "$(field "$2" samples_per_s)" "$(field "$2" gflops)"
    fi
}

# row LABEL TARGET BASELINE_CMD CANDIDATE_CMD (each command one string)
row() {
    local label=$1 target=$2 base cand
    base=$(measure bash -c "$3")
    cand=$(measure bash -c "$4")
    for line in "$base" "$cand"; do show "$label" "$line"; done
    local verdict ratio=-
    if [ "$base" != failed ] && [ "$cand" != failed ]; then
        ratio=$(awk -v b="$(field "$base" ms_per_step)" -v c="$(field "$cand" ms_per_step)" \
            'BEGIN { if (c > 0) printf "%.2f", b / c; else print "-" }')
    fi
    if [ "$ratio" != - ] && awk -v r="$ratio" -v t="$target" 'BEGIN { exit !(r >= t) }'; then
        verdict=PASS; PASSES=$((PASSES + 1))
    else
        verdict=MISS; MISSES=$((MISSES + 1))
    fi
    printf '%-22s ratio %s/%s ms = %s (target >= %s): %s\n' "$label" "${base%% *}" \
        "${cand%% *}" "$ratio" "$target" "$verdict"
    hr
    ROWS+=("$label: ratio $ratio, target >= $target, $verdict")
}

# overhead_row LABEL MAX_PERCENT CMD: CMD prints a role=base and a role=cand
# line and `overhead pct=.. best_pct=..` (bench_observe, torch_observe.py);
# MAX_PERCENT "-" = no target
overhead_row() {
    local label=$1 max=$2 out base= cand= ovh= pct=- verdict target
    if out=$(bash -c "$3" 2>&1); then
        base=$(printf '%s\n' "$out" | grep -E ' role=base .*ms_per_step=' | tail -n 1)
        cand=$(printf '%s\n' "$out" | grep -E ' role=cand .*ms_per_step=' | tail -n 1)
        ovh=$(printf '%s\n' "$out" | grep -E '^overhead pct=' | tail -n 1)
    fi
    if [ -z "$base" ] || [ -z "$cand" ] || [ -z "$ovh" ]; then
        printf '%s\n' "$out" | tail -n 5 | sed 's/^/    | /' >&2
        base=failed cand=failed
    fi
    show "$label" "$base"
    show "$label" "$cand"
    [ "$base" != failed ] && pct=$(field "$ovh" pct)
    if [ "$max" = - ]; then
        verdict=info target="no target"
    else
        target="target <= $max%"
        if [ "$pct" != - ] && awk -v p="$pct" -v m="$max" 'BEGIN { exit !(p <= m) }'; then
            verdict=PASS; PASSES=$((PASSES + 1))
        else
            verdict=MISS; MISSES=$((MISSES + 1))
        fi
    fi
    [ "$pct" != - ] && pct="$pct% (best-of $(field "$ovh" best_pct)%)"
    printf '%-22s overhead %s/%s = %s (%s): %s\n' "$label" "${cand%% *}" "${base%% *}" \
        "$pct" "$target" "$verdict"
    hr
    ROWS+=("$label: overhead $pct, $target, $verdict")
}

echo "threads=$THREADS, $CORES cores, load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)" \
     "(other load skews the numbers)"
printf '%-22s %-12s %10s %12s %9s\n' benchmark impl ms/step samples/s GFLOP/s
hr
BENCH=$BUILD/bench_mlp

# the tutorial MLP, training steps: PyTorch ms / tensorscope ms
row "mlp train batch=1000" 1.0 \
    "$PY $SRC/bench/torch_mlp.py --batch 1000 --steps $(steps 30) --threads $THREADS" \
    "$BENCH 1000 $(steps 30) 5 $THREADS"
row "mlp train batch=32" 2.0 \
    "$PY $SRC/bench/torch_mlp.py --batch 32 --steps $(steps 500) --threads $THREADS" \
    "$BENCH 32 $(steps 500) 20 $THREADS"

# what observing costs: tensorscope plain vs observed in one process,
# interleaved repetitions (7 pairs); PyTorch doing the same work for
# reference (forward hooks + .grad + updated-parameter stats)
OBS=$BUILD/bench_observe
row_obs() { echo "$OBS $1 $2 $(steps "$3") $4 $THREADS 7"; }
row_torch() { echo "$PY $SRC/bench/torch_observe.py --batch $1 --steps $(steps "$2") --warmup $3 --threads $THREADS --reps 7"; }
overhead_row "watch stats b=1000" 5 "$(row_obs watch 1000 20 3)"
overhead_row "torch hooks b=1000" - "$(row_torch 1000 20 3)"
overhead_row "watch stats b=32" 15 "$(row_obs watch 32 200 20)"
overhead_row "torch hooks b=32" - "$(row_torch 32 200 20)"
overhead_row "check_numerics b=1000" 5 "$(row_obs numerics 1000 20 3)"
# diagnostics off (TS_METRICS_FILE unset) with the crash handler installed
# or not: "unchanged" within the noise of interleaved runs
overhead_row "crash handler b=32" 2 "$(row_obs crash 32 400 20)"

# importing a full-size ONNX export (about 45 MB): median wall time of
# repeated imports against 1 s; models written to a temporary directory by
# bench/make_onnx_models.py (ResNet-18 imports fully once conv lands)
time_row() {
    local label=$1 max=$2 out line ms verdict
    out=$(bash -c "$3" 2>&1)
    line=$(printf '%s\n' "$out" | grep -E '^onnx_import .*median_ms=' | tail -n 1)
    ms=$(field "$line" median_ms)
    if [ -n "$ms" ] && [ -z "$(printf '%s' "$line" | grep failed)" ] && awk -v m="$ms" -v x="$max" 'BEGIN { exit !(m <= x) }'; then
        verdict=PASS; PASSES=$((PASSES + 1))
    else
        verdict=MISS; MISSES=$((MISSES + 1))
        printf '%s\n' "$out" | tail -n 2 | cut -c1-200 | sed 's/^/    | /' >&2
    fi
    printf '%-22s median %s ms (cpu %s ms, target <= %s ms): %s\n' "$label" "${ms:-?}" "$(field "$line" cpu_median_ms)" "$max" "$verdict"
    hr
    ROWS+=("$label: ${ms:-?} ms, target <= $max ms, $verdict")
}
ONNX_DIR=$(mktemp -d)
if $PY "$SRC/bench/make_onnx_models.py" "$ONNX_DIR" >/dev/null 2>&1; then
    time_row "onnx import resnet18" 1000 "$BUILD/bench_onnx_import $ONNX_DIR/resnet18.onnx 7"
    time_row "onnx import mlp 50MB" 1000 "$BUILD/bench_onnx_import $ONNX_DIR/mlp45m.onnx 7"
else
    echo "onnx import: could not export the models (needs $PY with torch)" >&2
fi
rm -rf "$ONNX_DIR"

echo "summary: ${#ROWS[@]} rows, $PASSES PASS, $MISSES MISS"
for r in "${ROWS[@]}"; do echo "  $r"; done
exit 0
