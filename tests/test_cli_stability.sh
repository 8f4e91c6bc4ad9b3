#!/bin/bash
# test_cli_stability.sh -- the stability signals (--watch-stability) of the
# built-in char GPT (AdamW: attention, tied logits) and MLP (SGD with
# momentum: LogSoftmax) against NumPy over the same run's dumped tensors,
# read from the TensorBoard event file by TensorBoard itself
# (tests/stability_reference.py); the heat maps (--plot-stability) are
# PNGs, one per signal; a bad pattern or a replicated model is refused.
# needs: tensorboard plots
set -euo pipefail

BUILD=${TS_BUILD_DIR:?set TS_BUILD_DIR to the CMake build directory}
SRC=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
TS=$BUILD/tensorscope
fail() { echo "FAIL $*"; exit 1; }
[ -x "$TS" ] || fail "$TS is missing: build first"

. "$(dirname "$0")/support/tb_venv.sh"
tb_venv_ensure

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ts_stability.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

run() { # model optimizer lr weight_decay [flags]
    local model=$1 opt=$2 lr=$3 wd=$4 dir=$TMP/$1
    shift 4
    "$TS" train --model "$model" --data "$SRC/data/$( [ "$model" = gpt ] && echo tinyshakespeare || echo mnist )" \
        --max-steps 1 --optimizer "$opt" --lr "$lr" --weight-decay "$wd" --watch-stability --anchor '*' \
        --dump-npy "$dir/npy" --save-init "$dir/init" --tensorboard "$dir/tb" --run-name r --plot-stability "$dir/png" \
        --quiet "$@" > "$dir.log" 2>&1 || fail "$model: tensorscope train failed: $(tail -5 "$dir.log")"
    "$VENV/bin/python" "$SRC/tests/stability_reference.py" "$dir/npy" "$dir/init" "$dir/tb/r" "$opt" "$lr" "$wd" ||
        fail "$model: a stability signal differs from NumPy's"
    for png in "$dir"/png/stability_*.png; do
        [ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "$png is not a PNG"
    done
    echo "ok   $model: $(ls "$dir"/png | wc -l) heat maps: $(ls "$dir"/png | tr '\n' ' ')"
}
mkdir -p "$TMP/gpt" "$TMP/mlp"
run gpt adamw 0.003 0.1
[ -f "$TMP/gpt/png/stability_max_logit.png" ] && [ -f "$TMP/gpt/png/stability_adam_update_norm.png" ] || fail "gpt: a heat map is missing"
run mlp sgd 0.05 0.0 --momentum 0.9
[ ! -e "$TMP/mlp/png/stability_adam_update_norm.png" ] || fail "mlp: SGD has no Adam update norm"

# what the user gets wrong is said
out=$("$TS" train --model mlp --max-steps 1 --watch-stability --watch-period 0 2>&1) && fail "--watch-period 0 accepted"
echo "$out" | grep -q "watch-period" || fail "no word on the period: $out"
echo "ok   bad period refused"

# an output that cannot be written after the heat maps were is a failure
# like any other (exit 1): --on-start turns --plot's directory into a file
mkdir -p "$TMP/late"
rc=0
(cd "$TMP/late" && "$TS" train --model mlp --data "$SRC/data/mnist" --max-steps 1 --quiet --plot-stability png --plot pd/p.png \
    --on-start 'rm -rf pd && touch pd' > log 2>&1) || rc=$?
[ "$rc" -eq 1 ] && grep -q "writing the plot" "$TMP/late/log" || fail "--plot unwritable after --plot-stability: exit $rc: $(tail -2 "$TMP/late/log")"
[ -f "$TMP/late/png/stability_rms.png" ] || fail "the heat maps before the failed --plot are missing: $(ls "$TMP/late/png")"
echo "ok   --plot unwritable after the heat maps: exit 1"
echo "PASS"
