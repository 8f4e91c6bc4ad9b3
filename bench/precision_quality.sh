#!/usr/bin/env bash
# bench/precision_quality.sh BUILD_DIR -- does mixed precision train as well
# as f32? (issue 26, docs/precision.md) The demo MLP (`make demo`'s recipe:
# MNIST, 3 epochs, batch 64, Adam 0.001) and the char GPT (`--model gpt`'s
# default recipe on Tiny Shakespeare, 1000 steps) trained by the CLI with
# --precision f32, bf16 and f16 (f16 with its default dynamic loss
# scaling), from the same seed: the same initial weights and batches. Each
# 16-bit run's held-out accuracy and loss against the f32 run's, both
# figures and the difference: within 0.3 points of accuracy and 0.02 nats
# of loss, else MISS. Beside it, PyTorch's autocast twin of the GPT recipe
# (bench/torch_gpt.py twin from the same initial weights and batches) in f32
# and bf16, for reference (no limit: the same comparison, PyTorch's).
#
# Prints a verdict line per 16-bit run (with the f32 figures), the twins' losses, and
# `quality: N PASS, M MISS`; exits 1 when a run misses or fails (2: usage).
# Env: TS_BENCH_THREADS (default 2), TS_BENCH_GPT_STEPS (default 1000: the
# recipe; fewer for a quick look, the limits still apply),
# TS_BENCH_TORCH_PY (the PyTorch for the twin; unset: no twin).
set -u
[ $# -eq 1 ] && [ -x "$1/tensorscope" ] || { echo "usage: bench/precision_quality.sh BUILD_DIR (with the CLI built)" >&2; exit 2; }
BUILD=$1
SRC=$(cd "$(dirname "$0")/.." && pwd)
THREADS=${TS_BENCH_THREADS:-2}
GPT_STEPS=${TS_BENCH_GPT_STEPS:-1000}
TORCH_PY=${TS_BENCH_TORCH_PY:-}
MAX_POINTS=0.3 MAX_NATS=0.02
PASSES=0 MISSES=0
MLP="--model mlp --data $SRC/data/mnist --epochs 3 --batch-size 64 --optimizer adam --lr 0.001"
GPT="--model gpt --data $SRC/data/tinyshakespeare --steps $GPT_STEPS"

# run MODEL PRECISION FLAGS... -> "ACC LOSS" from the CLI's final line
# (held-out accuracy in %, held-out loss), or "failed" (its output on stderr)
run() {
    local p=$2 out acc
    shift 2
    out=$("$BUILD/tensorscope" train "$@" --precision "$p" --threads "$THREADS" --quiet 2>&1)
    acc=$(printf '%s\n' "$out" | sed -n 's/^trained .*held-out accuracy \([0-9.]*\)% (loss \([0-9.]*\)).*/\1 \2/p' | tail -n 1)
    if [ -z "$acc" ]; then
        printf '%s\n' "$out" | tail -n 5 | sed 's/^/    | /' >&2
        echo failed
        return
    fi
    echo "$acc"
}

# verdict LABEL REF GOT: the 16-bit run GOT ("ACC LOSS") against the f32 run REF
verdict() {
    local label=$1 ref=$2 got=$3 line
    if [ "$ref" = failed ] || [ "$got" = failed ]; then
        printf '%-22s failed: MISS\n' "$label"
        MISSES=$((MISSES + 1))
        return
    fi
    line=$(awk -v a="${ref% *}" -v l="${ref#* }" -v b="${got% *}" -v m="${got#* }" -v mp="$MAX_POINTS" -v mn="$MAX_NATS" 'BEGIN {
        da = sprintf("%.2f", b - a) + 0; dl = sprintf("%.4f", m - l) + 0   # at the printed digits: -0.30 is within 0.3
        ok = (da <= mp && -da <= mp && dl <= mn && -dl <= mn)
        printf "accuracy %.2f%% vs f32 %.2f%% (%+.2f points, limit %s), loss %.4f vs %.4f (%+.4f nats, limit %s): %s\n",
            b, a, da, mp, m, l, dl, mn, ok ? "PASS" : "MISS" }')
    printf '%-22s %s\n' "$label" "$line"
    case $line in *PASS) PASSES=$((PASSES + 1)) ;; *) MISSES=$((MISSES + 1)) ;; esac
}

echo "precision quality: held-out accuracy within $MAX_POINTS points and loss within $MAX_NATS nats of f32, threads=$THREADS"
ref=$(run mlp f32 $MLP)
for p in bf16 f16; do verdict "mlp $p" "$ref" "$(run mlp $p $MLP)"; done

INIT=$(mktemp -d)
trap 'rm -rf "$INIT"' EXIT
ref=$(run gpt f32 $GPT --save-init "$INIT")
for p in bf16 f16; do verdict "gpt $p" "$ref" "$(run gpt $p $GPT)"; done

# PyTorch's autocast on the same recipe, for reference: twin f32 and bf16
if [ -n "$TORCH_PY" ] && [ "$ref" != failed ]; then
    declare -A twin=()
    for p in f32 bf16; do
        twin[$p]=$("$TORCH_PY" "$SRC/bench/torch_gpt.py" twin --init "$INIT" --steps "$GPT_STEPS" --threads "$THREADS" \
            --precision "$p" 2>&1 | sed -n 's/.*final held-out loss \([0-9.]*\) .*/\1/p')
        echo "pytorch gpt $p twin: held-out loss ${twin[$p]:-failed}"
    done
    if [ -n "${twin[f32]}" ] && [ -n "${twin[bf16]}" ]; then
        awk -v a="${twin[f32]}" -v b="${twin[bf16]}" 'BEGIN { printf "%-22s loss %.4f vs f32 %.4f (%+.4f nats): info\n", "pytorch gpt autocast", b, a, b - a }'
    fi
fi
echo "quality: $PASSES PASS, $MISSES MISS"
[ "$MISSES" = 0 ]
