#!/usr/bin/env bash
# bench/run.sh BUILD_DIR -- tensorscope's benchmarks side by side with peers.
#
# Every implementation prints one line
#   <impl> batch=B threads=T steps=N ms_per_step=.. samples_per_s=.. gflops=.. [peak_rss_mb=..]
# A training row (`mlp_row`) runs tensorscope and the peers and reports
# ratio = peer ms / tensorscope ms against a target (PASS when ratio >=
# target). A benchmark, not a test: exits 0 either way (2 only for a usage
# error). To add a benchmark, add an `mlp_row` or `overhead_row` call at the
# bottom. Overheads (observation, numeric checks, diagnostics) are
# `overhead_row`s: one command times the plain and the observed training in
# one process, interleaved, printing a role=base and a role=cand line and the
# overhead (median over repetitions of cand / base - 1, with the spread of
# the pairs); the row checks it against a maximum, or just reports it when
# the maximum is "-". ms/step is then each side's median repetition, the
# spread its best..worst.
#
# Peers: the current PyTorch from PyPI (pinned in bench/torch_venv.sh, in a
# venv under BUILD made on the first run and reused) is the peer the targets
# are set against; Debian's python3-torch (1.13) stays as an extra row. The
# table header prints both versions. The MLP rows are interleaved: REPS
# rounds (TS_BENCH_REPS, default 5), each running every implementation once
# in a rotating order, so that load from other processes hits all alike; a
# row prints each side's median ms/step and its spread (fastest..slowest
# round) and the ratio of the medians, with the spread of the per-round
# ratios.
#
# Clock: the C benchmarks time in wall time; TS_BENCH_CLOCK=cpu times each
# side in the process's CPU time instead (bench_common.h's now_s), for an
# overhead row on a machine other processes load (with TS_BENCH_THREADS=1,
# so that no waiting worker is counted); bench/onnx_models.py's rows
# likewise (both sides in its one process).
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

usage() { echo "usage: bench/run.sh BUILD_DIR   (env: TS_BENCH_THREADS, TS_BENCH_SCALE, TS_BENCH_REPS, TS_BENCH_ONLY, TS_BENCH_BASELINE, TS_BENCH_CLOCK)" >&2; exit 2; }
[ $# -eq 1 ] || usage
BUILD=$1
[ -d "$BUILD" ] || { echo "bench/run.sh: no build directory $BUILD (run make build first)" >&2; exit 2; }
SRC=$(cd "$(dirname "$0")/.." && pwd)
CORES=$(getconf _NPROCESSORS_ONLN)   # before OMP_NUM_THREADS is set: nproc obeys it
PY=/usr/bin/python3   # Debian's interpreter: it has python3-torch (1.13)
THREADS=${TS_BENCH_THREADS:-2}
SCALE=${TS_BENCH_SCALE:-1}   # multiplies every step count (0.2 for a quick look)
REPS=${TS_BENCH_REPS:-7}     # interleaved rounds of the peer rows
export TS_BENCH_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS OMP_NUM_THREADS=$THREADS \
       MKL_NUM_THREADS=$THREADS

# TS_BENCH_ONLY=REGEX: only the rows whose label matches (grep -E)
ONLY=${TS_BENCH_ONLY:-}
wanted() { [ -z "$ONLY" ] || printf '%s\n' "$1" | grep -Eq -- "$ONLY"; }
# TS_BENCH_BASELINE=BUILD_DIR: another tree's build (before a change) runs
# each peer row's tensorscope command too, in the same interleaved rounds,
# and the row prints baseline ms / this tree's ms: a change's effect measured
# under the same load as the peers
BASELINE=${TS_BENCH_BASELINE:-}
if [ -n "$BASELINE" ] && [ ! -d "$BASELINE" ]; then
    echo "bench/run.sh: TS_BENCH_BASELINE=$BASELINE is not a build directory" >&2; exit 2
fi

steps() { awk -v n="$1" -v s="$SCALE" 'BEGIN { v = int(n * s); print (v < 1 ? 1 : v) }'; }

# field LINE KEY -> the value of key=value in LINE (empty when absent)
field() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1; }

# measure CMD -> the command's result line, or "failed" (its output on stderr)
measure() {
    local out line
    if out=$(bash -c "$1" 2>&1) && line=$(printf '%s\n' "$out" | grep -E ' ms_per_step=' | tail -n 1) \
        && [ -n "$line" ]; then
        printf '%s\n' "$line"
    else
        printf '%s\n' "$out" | tail -n 5 | sed 's/^/    | /' >&2
        echo failed
    fi
}

ROWS=() PASSES=0 MISSES=0
hr() { printf '%.0s-' $(seq 1 110); printf '\n'; }
HEAD_FMT='%-22s %-16s %9s %-17s %11s %8s %6s %8s %-13s\n'
CEIL=   # the GEMM-only ceiling's GFLOP/s, measured below before the rows

# ceil_pct GFLOPS -> the share of the ceiling, "57%" (empty without one)
ceil_pct() { [ -n "$CEIL" ] && [ -n "$1" ] && awk -v g="$1" -v c="$CEIL" 'BEGIN { if (c > 0) printf "%.0f%%", 100 * g / c }'; }

# show LABEL LINE [SPREAD] -> one table line for a result line (or "failed")
show() {
    if [ "$2" = failed ]; then
        printf '%-22s %-16s %9s\n' "$1" "?" failed
    else
        local rss
        rss=$(field "$2" peak_rss_mb)
        printf "$HEAD_FMT" "$1" "${2%% *}" "$(field "$2" ms_per_step)" "${3:-}" \
            "$(field "$2" samples_per_s)" "$(field "$2" gflops)" "$(ceil_pct "$(field "$2" gflops)")" "${rss:--}" "$CPU_TAG"
    fi
}

# stat OP -> reads numbers on stdin; OP median|min|max
stat() { sort -g | awk -v op="$1" '{ v[NR] = $1 } END {
    if (!NR) { print "-"; exit }
    if (op == "min") print v[1]; else if (op == "max") print v[NR];
    else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.4f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# median_show LABEL LINES MS: the table line of the round whose ms/step is
# the median of MS (LINES: one result line per round, MS their ms/step;
# with REPS odd the median is a round's), with the spread of MS; sets MED
median_show() {
    local m
    MED=$(printf '%s\n' $3 | stat median)
    m=$(printf '%s' "$2" | awk -v t="$MED" '{ for (i = 1; i <= NF; i++) if ($i == "ms_per_step=" t) { print; exit } }')
    [ -n "$m" ] || m="$(printf '%s' "$2" | head -n 1 | sed "s/ms_per_step=[^ ]*/ms_per_step=$MED/")"
    show "$1" "$m" "$(printf '%s\n' $3 | stat min)..$(printf '%s\n' $3 | stat max)"
}

# mlp_row LABEL TARGET BATCH STEPS WARMUP: tensorscope against PyTorch 2.x
# (the target: PyTorch 2.x median ms / tensorscope median ms >= TARGET) and
# Debian's PyTorch (no target), REPS interleaved rounds.
mlp_row() {
    peer_row "$1" "$2" "$BENCH $3 $(steps "$4") $5 $THREADS" \
        "$SRC/bench/torch_mlp.py --batch $3 --steps $(steps "$4") --warmup $5 --threads $THREADS"
}

# cnn_row LABEL TARGET MODEL BATCH STEPS WARMUP: bench_cnn against
# torch_cnn.py, as mlp_row
cnn_row() {
    peer_row "$1" "$2" "$BUILD/bench_cnn train $3 $4 $(steps "$5") $6 $THREADS" \
        "$SRC/bench/torch_cnn.py --mode train --model $3 --batch $4 --steps $(steps "$5") --warmup $6 --threads $THREADS"
}

# peer_row LABEL TARGET TS_CMD TORCH_SCRIPT_AND_ARGS: the tensorscope command
# against the script under PyTorch 2.x (the target) and Debian's PyTorch
peer_row() {
    local label=$1 target=$2 n m i k r
    wanted "$label" || return 0
    local -a cmds=("$3" "$TORCH2_PY $4" "$PY $4")
    local -a lines=("" "" "" "") ms=("" "" "" "") rat=("" "" "")
    [ -n "$TORCH2_PY" ] || cmds[1]="false"
    [ -z "$BASELINE" ] || cmds[3]=${3//$BUILD\//$BASELINE/}   # the same command, the baseline's binary
    n=${#cmds[@]}
    for ((r = 0; r < REPS; r++)); do
        local -a got=()
        for ((i = 0; i < n; i++)); do
            k=$(((i + r) % n))   # rotate which implementation goes first
            got[k]=$(measure "${cmds[k]}")
            [ "$k" != 3 ] || [ "${got[k]}" = failed ] || got[k]="baseline ${got[k]#* }"
            [ "${got[k]}" = failed ] || { lines[k]+="${got[k]}"$'\n'; ms[k]+="$(field "${got[k]}" ms_per_step) "; }
        done
        for ((k = 1; k < n; k++)); do   # this round's ratio against each peer (and the baseline)
            [ "${got[0]}" = failed ] || [ "${got[k]}" = failed ] || rat[k - 1]+="$(awk -v b="$(field "${got[k]}" ms_per_step)" \
                -v c="$(field "${got[0]}" ms_per_step)" 'BEGIN { printf "%.3f", b / c }') "
        done
    done
    local -a med=()
    for ((k = 0; k < n; k++)); do
        if [ -z "${ms[k]}" ]; then show "$label" failed; med[k]=-; continue; fi
        median_show "$label" "${lines[k]}" "${ms[k]}"
        med[k]=$MED
    done
    local verdict ratio=- spread peer
    for k in 1 2; do
        ratio=- spread=
        if [ "${med[0]}" != - ] && [ "${med[k]}" != - ]; then
            ratio=$(awk -v b="${med[k]}" -v c="${med[0]}" 'BEGIN { printf "%.2f", b / c }')
            spread=" (rounds $(printf '%s\n' ${rat[k - 1]} | stat min)..$(printf '%s\n' ${rat[k - 1]} | stat max))"
        fi
        peer=$([ "$k" = 1 ] && echo "$TORCH2_VER" || echo "$TORCH1_VER")
        if [ "$k" = 2 ]; then
            printf '%-22s ratio pytorch-%s/tensorscope = %s%s (no target)\n' "$label" "$peer" "$ratio" "$spread"
            continue
        fi
        if [ "$ratio" != - ] && awk -v r="$ratio" -v t="$target" 'BEGIN { exit !(r >= t) }'; then
            verdict=PASS; PASSES=$((PASSES + 1))
        else
            verdict=MISS; MISSES=$((MISSES + 1))
        fi
        printf '%-22s ratio pytorch-%s/tensorscope = %s%s (target >= %s): %s\n' "$label" "$peer" \
            "$ratio" "$spread" "$target" "$verdict"
        ROWS+=("$label: ratio $ratio vs PyTorch $peer$spread, target >= $target, $verdict")
    done
    if [ -n "$BASELINE" ] && [ "${med[0]}" != - ] && [ "${med[3]}" != - ]; then
        ratio=$(awk -v b="${med[3]}" -v c="${med[0]}" 'BEGIN { printf "%.3f", b / c }')
        spread=" (rounds $(printf '%s\n' ${rat[2]} | stat min)..$(printf '%s\n' ${rat[2]} | stat max))"
        printf '%-22s ratio baseline/tensorscope = %s%s (above 1: this tree is faster)\n' "$label" "$ratio" "$spread"
        ROWS+=("$label: ratio $ratio baseline/this tree$spread")
    fi
    hr
}

# precision_row LABEL TS_CMD TORCH_SCRIPT_AND_ARGS PRECISION...: mixed
# precision (docs/precision.md) against PyTorch 2.x's CPU autocast at the
# same threads: the tensorscope command under TS_BENCH_PRECISION=P and the
# PyTorch twin with --precision P for each P (the first, f32, is the
# reference), all in REPS interleaved rounds in a rotating order. Each
# side's median ms/step (spread) and peak RSS; then per 16-bit P, for each
# framework, the ratios P/f32 of the median ms/step (with the spread of the
# rounds' ratios) and of the median peak RSS, and PyTorch P ms / tensorscope
# P ms. No target: info.
precision_row() {
    local label=$1 ts=$2 torch=$3 p r i k j
    shift 3
    # ms_ratio LINE_A LINE_B -> A's ms/step / B's
    ms_ratio() { awk -v a="$(field "$1" ms_per_step)" -v b="$(field "$2" ms_per_step)" 'BEGIN { printf "%.3f", a / b }'; }
    wanted "$label" || return 0
    local -a cmds=() names=() lines=() ms=() rss=() rat=()
    for p in "$@"; do
        cmds+=("TS_BENCH_PRECISION=$p $ts" "$TORCH2_PY $torch --precision $p")
        names+=("ts-$p" "torch$TORCH2_VER-$p")
    done
    local n=${#cmds[@]}
    for ((r = 0; r < REPS; r++)); do
        local -a got=()
        for ((i = 0; i < n; i++)); do
            k=$(((i + r) % n))
            got[k]=$(measure "${cmds[k]}")
            [ "${got[k]}" = failed ] && continue
            got[k]="${names[k]} ${got[k]#* }"
            lines[k]+="${got[k]}"$'\n' ms[k]+="$(field "${got[k]}" ms_per_step) " rss[k]+="$(field "${got[k]}" peak_rss_mb) "
        done
        # this round's ratios: each run against its framework's f32 run
        # (k % 2), PyTorch's against tensorscope's at the same precision
        for ((k = 1; k < n; k++)); do
            j=$((k % 2))
            [ "$k" -lt 2 ] || [ "${got[k]}" = failed ] || [ "${got[j]}" = failed ] || rat[k]+="$(ms_ratio "${got[k]}" "${got[j]}") "
            [ "$j" = 0 ] || [ "${got[k]}" = failed ] || [ "${got[k - 1]}" = failed ] || rat[n + k]+="$(ms_ratio "${got[k]}" "${got[k - 1]}") "
        done
    done
    local -a med=() mrss=()
    for ((k = 0; k < n; k++)); do
        if [ -z "${ms[k]}" ]; then show "$label" failed; med[k]=-; continue; fi
        median_show "$label" "${lines[k]}" "${ms[k]}"
        med[k]=$MED mrss[k]=$(printf '%s\n' ${rss[k]} | stat median)
    done
    # of MED_A MED_B ROUNDS -> "A/B (rounds lo..hi)", or "-"
    of() {
        [ "$1" != - ] && [ "$2" != - ] && [ -n "$2" ] || { echo -; return; }
        printf '%s (rounds %s..%s)' "$(awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }')" \
            "$(printf '%s\n' $3 | stat min)" "$(printf '%s\n' $3 | stat max)"
    }
    # rss_of A_MB B_MB -> "A/B (A vs B MB)", or "-"
    rss_of() { awk -v a="${1:--}" -v b="${2:--}" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f (%s vs %s MB)", a / b, a, b; else print "-" }'; }
    local line
    line="pytorch-$TORCH2_VER/tensorscope at f32: $(of "${med[1]}" "${med[0]}" "${rat[n + 1]}")"
    printf '%-22s %s: info\n' "$label" "$line"
    ROWS+=("$label: $line, info")
    for ((k = 2; k < n; k += 2)); do
        p=${names[k]#ts-}
        line="$p/f32 ms/step: tensorscope $(of "${med[k]}" "${med[0]}" "${rat[k]}"), pytorch $(of "${med[k + 1]}" "${med[1]}" "${rat[k + 1]}")"
        line+="; peak RSS $p/f32: tensorscope $(rss_of "${mrss[k]}" "${mrss[0]}"), pytorch $(rss_of "${mrss[k + 1]}" "${mrss[1]}")"
        line+="; pytorch-$TORCH2_VER/tensorscope at $p: $(of "${med[k + 1]}" "${med[k]}" "${rat[n + k + 1]}")"
        printf '%-22s %s: info\n' "$label" "$line"
        ROWS+=("$label: $line, info")
    done
    hr
}

# overhead_row LABEL MAX_PERCENT CMD: CMD prints a role=base and a role=cand
# line and `overhead pct=.. best_pct=..` (bench_observe, torch_observe.py);
# MAX_PERCENT "-" = no target
overhead_row() {
    wanted "$1" || return 0
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
    local line
    for line in "$base" "$cand"; do
        show "$label" "$line" "$(field "$line" best_ms)..$(field "$line" worst_ms)"
    done
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
    if [ "$pct" != - ] && [ -n "$(field "$ovh" ci_lo_pct)" ]; then
        # a verdict the noise could turn: the median's confidence interval
        # reaches across the target
        if [ "$max" != - ] && awk -v lo="$(field "$ovh" ci_lo_pct)" -v hi="$(field "$ovh" ci_hi_pct)" -v m="$max" \
            'BEGIN { exit !(lo <= m && hi > m) }'; then
            verdict="$verdict, within the noise: the 95% CI spans the target"
        fi
        pct="$pct% (95% CI $(field "$ovh" ci_lo_pct)..$(field "$ovh" ci_hi_pct)%, middle half of the pairs $(field "$ovh" q1_pct)..$(field "$ovh" q3_pct)%)"
    elif [ "$pct" != - ]; then
        pct="$pct% (pairs $(field "$ovh" min_pct)..$(field "$ovh" max_pct)%)"
    fi
    printf '%-22s overhead %s/%s = %s (%s): %s\n' "$label" "${cand%% *}" "${base%% *}" \
        "$pct" "$target" "$verdict"
    hr
    ROWS+=("$label: overhead $pct, $target, $verdict")
}

. "$SRC/bench/torch_venv.sh"
TORCH2_PY= TORCH2_VER=none
if torch_venv_ensure; then
    TORCH2_PY=$TORCH_VENV_PY
    TORCH2_VER=$("$TORCH2_PY" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null) || TORCH2_PY=
fi
TORCH1_VER=$("$PY" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null) || TORCH1_VER=none
TORCH2_PY=${TORCH2_PY:-false}   # a missing peer makes its rows "failed"

echo "peers: PyTorch $TORCH2_VER (PyPI, $TORCH_VENV; the targets' peer), PyTorch $TORCH1_VER (Debian, $PY)"
echo "threads=$THREADS, $CORES cores, $REPS interleaved rounds, load average" \
     "$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null) (other load skews the numbers)"
# the CPU the rows come from: its model and the vector instructions the
# kernels can use (machines differ: AVX2 only, AVX-512, bf16, AMX)
cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)
cpu_flags=$(sed -n 's/^flags[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1 | tr ' ' '\n' |
            grep -E '^(sse4_2|avx|avx2|fma|f16c|avx512f|avx512bw|avx512vl|avx512_vnni|avx512_bf16|avx512_fp16|amx_tile|amx_bf16|amx_int8)$' | tr '\n' ' ')
echo "cpu: ${cpu_model:-unknown}; vector flags: ${cpu_flags:-none found}"
# what tensorscope chose for it at run time (docs/backend.md: the kernel
# level, TS_CPU; the bf16 products' route, TS_BF16_GEMM)
ts_cpu=$("$BUILD/tensorscope" --version 2>/dev/null | sed -n 's/^cpu instructions: //p')
echo "tensorscope on this cpu: ${ts_cpu:-unknown (no $BUILD/tensorscope)}"
# the "cpu" column beside every row: the widest vector set, and the bf16
# instructions where there are
has_flag() { case " $cpu_flags " in *" $1 "*) return 0 ;; esac; return 1; }
CPU_TAG=generic
if has_flag avx512f; then CPU_TAG=avx512; elif has_flag avx2; then CPU_TAG=avx2; elif has_flag avx; then CPU_TAG=avx; fi
has_flag fma && [ "$CPU_TAG" = avx2 ] && CPU_TAG=avx2+fma
has_flag avx512_bf16 && CPU_TAG=$CPU_TAG+bf16
has_flag amx_bf16 && CPU_TAG=$CPU_TAG+amx
# the GEMM-only ceiling (bench_gemm.c): a model of one MatMul on a
# 1024^3 product at these threads, the fastest of 9 (a limit: the other
# load only slows a repetition down); each row's GFLOP/s (matmul FLOPs
# only, see above) is also shown as a share of it ("ceil")
if ceil_line=$("$BUILD/bench_gemm" 1024 1024 1024 9 "$THREADS" 2>&1); then
    CEIL=$(field "$ceil_line" best_gflops)
    echo "gemm ceiling: $CEIL GFLOP/s (median $(field "$ceil_line" gflops); [1024,1024]x[1024,1024], $THREADS threads, fastest of 9)"
else
    echo "gemm ceiling: failed ($ceil_line); the rows show no share of it" >&2
fi
printf "$HEAD_FMT" benchmark impl ms/step "spread(ms)" samples/s GFLOP/s ceil "RSS(MB)" cpu
hr
BENCH=$BUILD/bench_mlp

# the tutorial MLP, training steps: PyTorch 2.x ms / tensorscope ms
mlp_row "mlp train batch=1000" 1.15 1000 30 5
mlp_row "mlp train batch=32" 2.0 32 500 20
# mixed precision (docs/precision.md): the MLP at batch 1000 in f32, bf16
# and f16 (f16 with dynamic loss scaling) against PyTorch 2.x's CPU
# autocast (f16 with a GradScaler) at the same threads; ratios 16-bit/f32
precision_row "mlp b1000 precision" "$BENCH 1000 $(steps 30) 5 $THREADS" \
    "$SRC/bench/torch_mlp.py --batch 1000 --steps $(steps 30) --warmup 5 --threads $THREADS" f32 bf16 f16

# convolutional networks, training steps at batch 64 (bench_cnn.c,
# torch_cnn.py): the LeNet+BN of --model cnn, and a 3-stage ResNet on
# 3x32x32 random inputs
cnn_row "lenet+bn train b=64" 1.0 lenet 64 20 3
cnn_row "resnet3 train b=64" 1.3 resnet 64 5 1

# what observing costs: tensorscope plain vs observed in one process, many
# short interleaved pairs (a few steps of each side back to back, PAIRS of
# them): the machine's slow and fast moments, which last longer than a pair,
# fall on both sides alike, and the median pair's overhead comes with a 95%
# confidence interval (bench_common.h's overhead_report). PyTorch 2.x doing
# the same work for reference (forward hooks + .grad + updated-parameter
# stats), 7 longer pairs.
OBS=$BUILD/bench_observe
# row_obs MODE BATCH STEPS_PER_PAIR WARMUP PAIRS
row_obs() { echo "$OBS $1 $2 $3 $4 $THREADS $(steps "$5")"; }
row_torch() { echo "$TORCH2_PY $SRC/bench/torch_observe.py --batch $1 --steps $(steps "$2") --warmup $3 --threads $THREADS --reps 7"; }
# (the target of watching every tensor is 3% on every row, b=32 included)
overhead_row "watch stats b=1000" 3 "$(row_obs watch 1000 2 3 201)"
overhead_row "torch hooks b=1000" - "$(row_torch 1000 20 3)"
overhead_row "watch stats b=32" 3 "$(row_obs watch 32 20 20 101)"
overhead_row "torch hooks b=32" - "$(row_torch 32 200 20)"
overhead_row "check_numerics b=1000" 5 "$(row_obs numerics 1000 2 3 201)"
# every stability signal of every layer every step (--watch-stability '*',
# docs/observation.md#stability-signals) beside the plain step, in the same
# process: the target is the ratio's; more pairs at b=32 and on the CNN,
# whose overheads sit near it
overhead_row "mlp stability b=1000" 2 "$(row_obs stability 1000 2 3 201)"
overhead_row "mlp stability b=32" 2 "$(row_obs stability 32 20 20 401)"
# the same on the CNN: every activation, parameter gradient and updated
# parameter summarised every step; PyTorch hooks doing the same beside it
cnn_obs() { echo "$BUILD/bench_cnn observe lenet 64 2 2 $THREADS $(steps 101)"; }
overhead_row "cnn watch stats b=64" 3 "$(cnn_obs)"
overhead_row "cnn stability b=64" 2 "$BUILD/bench_cnn stability lenet 64 2 2 $THREADS $(steps 301)"
overhead_row "cnn torch hooks b=64" - "$TORCH2_PY $SRC/bench/torch_cnn.py --mode observe --model lenet --batch 64 --steps $(steps 10) --warmup 2 --threads $THREADS --reps 7"
# diagnostics off (TS_METRICS_FILE unset) with the crash handler installed
# or not: "unchanged" within the noise of interleaved runs
overhead_row "crash handler b=32" 2 "$(row_obs crash 32 20 20 201)"
overhead_row "trace on b=32" - "$(row_obs trace 32 20 20 101)"
# the memory watcher (--watch-memory) sampling every 10 ms, a tenth of its
# default period, against none; both sides start a thread (the base's sleeps)
overhead_row "watch memory 10ms b=32" 3 "$(row_obs memwatch 32 20 20 201)"

# the character GPT (4 layers, 4 heads, 128 channels, T=64, batch 32):
# against PyTorch 2.x (the target) and Debian's, peak memory on each line, and
# what watching every activation (every op's output), every parameter
# gradient and every updated parameter costs; PyTorch 2.x's hooks (every
# module's output, .grad, the updated parameters) beside it
GPT_ARGS="--layers 4 --heads 4 --embd 128 --block-size 64 --batch-size 32 --threads $THREADS"
peer_row "gpt train 4x128 T=64" 1.3 "$BUILD/bench_gpt train $(steps 10) $THREADS" \
    "$SRC/bench/torch_gpt.py bench $GPT_ARGS --steps $(steps 10)"
# the same GPT in f32 and bf16 against PyTorch 2.x's CPU autocast
precision_row "gpt 4x128 precision" "$BUILD/bench_gpt train $(steps 10) $THREADS" \
    "$SRC/bench/torch_gpt.py bench $GPT_ARGS --steps $(steps 10)" f32 bf16
# and whether they train as well: the demo MLP and the char GPT's recipes
# in bf16 and f16 against f32 (held-out accuracy within 0.3 points, loss
# within 0.02 nats: bench/precision_quality.sh), PyTorch's autocast twin of
# the GPT beside them
if wanted "precision quality"; then
    if TS_BENCH_TORCH_PY=$([ "$TORCH2_PY" = false ] || echo "$TORCH2_PY") "$SRC/bench/precision_quality.sh" "$BUILD"; then
        PASSES=$((PASSES + 1)); ROWS+=("precision quality: bf16 and f16 within 0.3 points / 0.02 nats of f32, PASS")
    else
        MISSES=$((MISSES + 1)); ROWS+=("precision quality: a 16-bit run outside 0.3 points / 0.02 nats of f32 (above), MISS")
    fi
    hr
fi
overhead_row "gpt watch stats" 3 "$BUILD/bench_gpt watch 2 $THREADS 4 4 128 64 32 $(steps 31)"
overhead_row "gpt stability" 2 "$BUILD/bench_gpt stability 2 $THREADS 4 4 128 64 32 $(steps 31)"
overhead_row "gpt torch hooks" - "$TORCH2_PY $SRC/bench/torch_gpt.py observe $GPT_ARGS --steps $(steps 4) --warmup 2 --reps 7"
"$BUILD/bench_compile" 100000 | sed 's/^/compile: /'
# data parallel (docs/design.md#replicas-and-pipeline-stages): one process with 2 threads vs 2 MPI ranks
# (replicas) with 1 thread each, the same combined batch, on the MLP and the
# CNN (bench_replicas; without mpirun it is the one process); REPS
# interleaved rounds, each running both in a rotating order; each side's
# median ms/step with its spread, the ratio of the medians in samples/s (2
# ranks / 1 process) with the spread of the per-round ratios, and the share
# of the step the ranks waited for the all-reduce (what the backward did
# not hide), median and spread. No target: on one machine the ranks share
# its cores and memory bandwidth.
replica_row() { # LABEL MODEL BATCH STEPS WARMUP
    wanted "$1" || return 0
    local label=$1 r k i
    local -a cmds=("$BUILD/bench_replicas $2 $3 $(steps "$4") $5 2" "$MPIRUN2 $BUILD/bench_replicas $2 $3 $(steps "$4") $5 1")
    local -a lines=("" "") ms=("" "") got=("" "")
    local rat="" share=""
    for ((r = 0; r < REPS; r++)); do
        for ((i = 0; i < 2; i++)); do
            k=$(((i + r) % 2))
            got[k]=$(measure "${cmds[k]}")
            [ "${got[k]}" = failed ] || { lines[k]+="${got[k]}"$'\n'; ms[k]+="$(field "${got[k]}" ms_per_step) "; }
        done
        [ "${got[0]}" = failed ] || [ "${got[1]}" = failed ] || rat+="$(awk -v b="$(field "${got[0]}" ms_per_step)" \
            -v c="$(field "${got[1]}" ms_per_step)" 'BEGIN { printf "%.3f", b / c }') "
        [ "${got[1]}" = failed ] || share+="$(field "${got[1]}" allreduce_pct) "
    done
    local -a med=()
    for ((k = 0; k < 2; k++)); do
        if [ -z "${ms[k]}" ]; then show "$label" failed; med[k]=-; continue; fi
        median_show "$label" "${lines[k]}" "${ms[k]}"
        med[k]=$MED
    done
    local ratio=- sps=- ar=-
    if [ "${med[0]}" != - ] && [ "${med[1]}" != - ]; then
        ratio="$(awk -v b="${med[0]}" -v c="${med[1]}" 'BEGIN { printf "%.2f", b / c }') (rounds $(printf '%s\n' $rat | stat min)..$(printf '%s\n' $rat | stat max))"
        sps="$(awk -v b="${med[0]}" -v c="${med[1]}" -v n="$3" 'BEGIN { printf "%.0f vs %.0f", n * 1000 / b, n * 1000 / c }')"
        ar="$(printf '%s\n' $share | stat median)% ($(printf '%s\n' $share | stat min)..$(printf '%s\n' $share | stat max)%)"
    fi
    printf '%-22s samples/s 1x2 threads vs 2x1 ranks %s, ratio 2 ranks/1 process %s, all-reduce %s of the step: info\n' "$label" "$sps" "$ratio" "$ar"
    hr
    ROWS+=("$label: samples/s 1 process x 2 threads vs 2 ranks x 1 thread $sps, ratio 2 ranks/1 process $ratio, all-reduce $ar of the step, info")
}
# pipeline_row LABEL BATCH STEPS WARMUP A [1F1B]: the MLP as 2 stages
# (split at fc2), A micro-batches a step, GPipe (or 1F1B), REPS rounds: the
# median bubble (the share of the step a rank waits for its neighbour) and
# its spread, and the ideal bubble (K-1)/(A+K-1)
pipeline_row() {
    wanted "$1" || return 0
    local label=$1 r line ms="" bubble="" lines="" ideal=-
    for ((r = 0; r < REPS; r++)); do
        line=$(measure "$MPIRUN2 $BUILD/bench_replicas mlp $2 $(steps "$3") $4 1 $5 ${6:-0}")
        [ "$line" = failed ] && continue
        lines+="$line"$'\n' ms+="$(field "$line" ms_per_step) " bubble+="$(field "$line" bubble_pct) " ideal=$(field "$line" ideal_bubble_pct)
    done
    if [ -z "$ms" ]; then show "$label" failed; else median_show "$label" "$lines" "$ms"; fi
    local b=-
    [ -n "$bubble" ] && b="$(printf '%s\n' $bubble | stat median)% ($(printf '%s\n' $bubble | stat min)..$(printf '%s\n' $bubble | stat max)%, ideal $ideal%)"
    printf '%-22s pipeline bubble %s of the step: info\n' "$label" "$b"
    hr
    ROWS+=("$label: bubble $b, info")
}
if command -v mpirun >/dev/null && [ -x "$BUILD/bench_replicas" ]; then
    MPIRUN2="env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe --bind-to none -np 2"
    replica_row "mlp 2 ranks b=1000" mlp 1000 30 5
    replica_row "mlp 2 ranks b=64" mlp 64 300 20
    replica_row "cnn 2 ranks b=64" cnn 64 60 5
    pipeline_row "mlp 2 stages b=256" 256 100 10 4
    pipeline_row "mlp 2 stages 1f1b" 256 100 10 4 1
else
    echo "mlp 2 ranks: skipped (no mpirun or no bench_replicas: scripts/install-deps.sh test, reconfigure)"
fi

# importing a full-size ONNX export (about 45 MB): median wall time of
# repeated imports against 1 s; models written to a temporary directory by
# bench/make_onnx_models.py
time_row() {
    wanted "$1" || return 0
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
# onnx_train_row LABEL MODEL.onnx: the imported model's training samples/s
# against the built-in cnn it was exported from
onnx_train_row() {
    local b i med verdict
    local -a ratios=()
    wanted "$1" || return 0
    sps() { "$BUILD/tensorscope" train --model "$1" --data "$SRC/data/mnist" --epochs 1 --batch-size 64 --optimizer adam \
        --lr 0.001 --holdout 64 --threads "$THREADS" --quiet 2>/dev/null | sed -n 's/.* \([0-9.]*\) samples\/s.*/\1/p' | head -n 1; }
    for _ in 1 2 3; do
        b=$(sps cnn) i=$(sps "$2")
        ratios+=("$(awk -v a="${i:-0}" -v b="${b:-0}" 'BEGIN { if (a > 0 && b > 0) printf "%.3f", a / b; else print 0 }')")
        printf '%-22s  built-in %s samples/s, imported %s samples/s\n' "$1" "${b:-failed}" "${i:-failed}"
    done
    med=$(printf '%s\n' "${ratios[@]}" | sort -n | sed -n 2p)
    if awk -v r="$med" 'BEGIN { exit !(r >= 0.9) }'; then verdict=PASS; PASSES=$((PASSES + 1)); else verdict=MISS; MISSES=$((MISSES + 1)); fi
    printf '%-22s imported/built-in samples/s median %s (rounds %s), target >= 0.9: %s\n' "$1" "$med" "${ratios[*]}" "$verdict"
    hr
    ROWS+=("$1: imported/built-in $med, target >= 0.9, $verdict")
}
ONNX_DIR=$(mktemp -d)
if $PY "$SRC/bench/make_onnx_models.py" "$ONNX_DIR" >/dev/null 2>&1; then
    time_row "onnx import resnet18" 1000 "$BUILD/bench_onnx_import $ONNX_DIR/resnet18.onnx 7"
    time_row "onnx import mlp 50MB" 1000 "$BUILD/bench_onnx_import $ONNX_DIR/mlp45m.onnx 7"
    # training the imported LeNet+BN against the built-in cnn it was exported
    # from: samples/s of one epoch each (--quiet's final line, evaluation
    # excluded), interleaved rounds, median ratio
    # imported/built-in against "the same speed" (0.9 allows the noise)
    onnx_train_row "onnx lenet+bn train" "$ONNX_DIR/lenet_bn.onnx"
else
    echo "onnx import: could not export the models (needs $PY with torch)" >&2
fi
rm -rf "$ONNX_DIR"

# ResNet-18 brought from PyTorch (docs/onnx.md): inference of the exported
# file against onnxruntime at batch 1 and 8, and a training step of the
# imported model against PyTorch's own step, same threads, one process per
# row interleaving both sides (bench/onnx_resnet.py); the real-model tests'
# venv (PyTorch, torchvision, onnx, onnxruntime from PyPI, pinned in
# tests/support/realmodels_venv.sh), made on the first run
onnx_peer_row() { # LABEL TARGET SCRIPT MODE BATCH STEPS
    wanted "$1" || return 0
    local label=$1 target=$2 out line ratio rounds verdict peer
    if ! out=$(cd "$BUILD" && TENSORSCOPE_LIBRARY=$PWD/libtensorscope.so PYTHONPATH=$SRC/python \
        "$REALMODELS_PY" -W ignore "$SRC/bench/$3" "$4" --batch "$5" --steps "$(steps "$6")" \
        --threads "$THREADS" --reps "$REPS" 2>&1); then
        show "$label" failed
        printf '%s\n' "$out" | tail -n 3 | sed 's/^/    | /' >&2
        MISSES=$((MISSES + 1)); ROWS+=("$label: failed"); hr; return 0
    fi
    while read -r line; do show "$label" "$line" "$(field "$line" spread_ms)"; done < <(printf '%s\n' "$out" | grep -E ' ms_per_step=')
    line=$(printf '%s\n' "$out" | grep -E '^ratio ' | tail -n 1)
    peer=${line#ratio }; peer=${peer%%/*}
    ratio=$(field "$line" median) rounds=$(field "$line" rounds)
    if [ -n "$ratio" ] && awk -v r="$ratio" -v t="$target" 'BEGIN { exit !(r >= t) }'; then
        verdict=PASS; PASSES=$((PASSES + 1))
    else
        verdict=MISS; MISSES=$((MISSES + 1))
    fi
    printf '%-22s ratio %s/tensorscope = %s (rounds %s) (target >= %s): %s\n' "$label" "$peer" "${ratio:-?}" "$rounds" "$target" "$verdict"
    ROWS+=("$label: ratio ${ratio:-?} vs $peer (rounds $rounds), target >= $target, $verdict")
    hr
}
# and three model shapes of current practice, each trained from its
# TorchScript export against PyTorch's own AdamW step on the same batch
# (bench/onnx_models.py, which first checks that both sides' losses fall):
# a small U-Net (ConvTranspose, GroupNorm, skip concatenations, bilinear
# upsampling), a 1-D convolutional audio encoder, a Llama-style decoder
# (RoPE, grouped-query attention, RMSNorm, SiLU-gated MLP)
RESNET_ROWS=("resnet18 infer b=1" "resnet18 infer b=8" "resnet18 train b=8"
             "unet train b=8" "audio enc train b=8" "llama train b=8")
resnet_wanted() { local r; for r in "${RESNET_ROWS[@]}"; do wanted "$r" && return 0; done; return 1; }
if resnet_wanted && ( fail() { echo "bench: $*" >&2; exit 1; }
                          . "$SRC/tests/support/realmodels_venv.sh"; realmodels_venv_ensure "$BUILD" >&2 ); then
    REALMODELS_PY=$(cd "$BUILD" && pwd)/realmodels-venv/bin/python   # run from inside BUILD: `make bench` names it relatively
    onnx_peer_row "${RESNET_ROWS[0]}" 1.0 onnx_resnet.py infer 1 10
    onnx_peer_row "${RESNET_ROWS[1]}" 1.0 onnx_resnet.py infer 8 4
    onnx_peer_row "${RESNET_ROWS[2]}" 1.15 onnx_resnet.py train 8 2
    onnx_peer_row "${RESNET_ROWS[3]}" 1.15 onnx_models.py unet 8 5
    onnx_peer_row "${RESNET_ROWS[4]}" 1.15 onnx_models.py audio 8 3
    onnx_peer_row "${RESNET_ROWS[5]}" 1.15 onnx_models.py llama 8 5
elif resnet_wanted; then
    echo "resnet18 rows: failed (no venv with PyTorch and onnxruntime: PyPI needed the first time)" >&2
fi

echo "summary: ${#ROWS[@]} rows, $PASSES PASS, $MISSES MISS (cpu: ${cpu_model:-unknown}; ${cpu_flags:-no vector flags found}; gemm ceiling ${CEIL:-?} GFLOP/s)"
for r in "${ROWS[@]}"; do echo "  $r"; done
exit 0
