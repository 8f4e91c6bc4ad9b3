#!/bin/bash
# test_cli_cnn.sh -- `--model cnn` (LeNet+BN) through the CLI as a user runs
# it: names (batch norm running buffers listed, no gradient for them), graph
# --format dot, anchors with .npy dumps read by NumPy, watches and the stats
# table, print ops, outfeeds, numeric checks, TensorBoard, metrics, feature
# maps and filter PNGs (their pixels checked by NumPy against the dumped
# tensors' layout), and save/load of the weights with the running statistics.
# Training here is short: accuracy is the job of the bench and the note.
set -u

BUILD=${TS_BUILD_DIR:?set TS_BUILD_DIR to the CMake build directory}
SRC=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=$BUILD/tensorscope
DATA=$SRC/data/mnist
PY=/usr/bin/python3

# shellcheck source=support/cli_checks.sh
source "$SRC/tests/support/cli_checks.sh"
[ -x "$BIN" ] || { fail "$BIN is missing"; finish; }
T=$(mktemp -d "${TMPDIR:-/tmp}/ts_cli_cnn.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
png() { [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; }
T_ARGS=(--model cnn --data "$DATA" --quiet --threads 2)

# ---- names and graph
run names "$BIN" names --model cnn
missing=""
for n in conv1.weight conv1/Conv2d:0 bn1.weight bn1.running_mean bn2.running_var bn1/BatchNorm:0 MaxPool2d:1 \
    Gradient___conv2.weight Gradient___bn1/BatchNorm:0 UpdatedVar___bn2.bias Accl1___conv1.weight; do
    grep -Fxq -- "$n" names.out || missing="$missing $n"
done
check "names --model cnn: exit 0, conv/batch norm/pool tensors, Adam state by default${missing:+ (missing:$missing)}" \
    eval '[ $rc -eq 0 ] && [ -z "$missing" ]'
check "names: the running buffers have no Gradient___/Accum___/Accl state" eval '! grep -Eq "^(Gradient|Accum|Accl[12]?|UpdatedVar)___bn[0-9]\.running" names.out'
if command -v dot > /dev/null; then
    "$BIN" graph --model cnn --format dot 2> dot1.err | dot -Tsvg > g.svg 2> dot2.err
    check "graph --model cnn --format dot | dot -Tsvg: an SVG drawing conv1/Conv2d:0 and bn1.running_var" \
        eval 'hasf g.svg "conv1/Conv2d:0" && hasf g.svg "bn1.running_var"'
else
    fail "Graphviz's dot is not installed (apt-get install graphviz)"
fi

# ---- a short training run with most observation turned on (TensorBoard and
# pictures where they are built)
tb_flags=() pic_flags=()
needs tensorboard "TensorBoard of the CNN" && tb_flags=(--tensorboard tb)
needs plots "the CNN's pictures" &&
    pic_flags=(--feature-maps 'Relu:0:1' --feature-maps 'MaxPool2d:1' --filters conv1.weight --filters conv2.weight --picture-dir pics)
run train "$BIN" train "${T_ARGS[@]}" --batch-size 100 --max-steps 3 --repeat-count 2 \
    --anchor 'Gradient___conv1.weight:all' --anchor bn1.running_mean:all --anchor 'MaxPool2d:0' --dump-npy npy \
    --watch '*conv1*' --stats --print-tensor bn2/BatchNorm:0 --outfeed 'Relu:0' --outfeed 'conv1.weight_grad' \
    --check-numerics output "${tb_flags[@]}" --metrics "${pic_flags[@]}" --save-weights w
check "train --model cnn with anchors, watches, print, outfeed, numeric checks, TensorBoard, metrics, pictures: exit 0" \
    eval '[ $rc -eq 0 ]' || show train.err
check "trained 3 runs (6 steps, 600 samples)" hasf train.out "trained 3 runs (6 steps, 600 samples)"
check "stats table row for Gradient___conv1.weight" has train.out "^ +[0-9]+ +Gradient___conv1\.weight( +-?[0-9.e+-]+){4} +0 +0$"
check "print op: bn2/BatchNorm:0 and its gradient printed with the shape [100,16,10,10]" \
    eval 'has train.err "bn2/BatchNorm:0: f32\[100,16,10,10\]" && has train.err "bn2/BatchNorm:0_gradient: f32\[100,16,10,10\]"'
check "outfeed: Relu:0 and conv1.weight_grad records ($(grep '^outfeed:' train.out))" \
    eval 'has train.out "^outfeed: .*Relu:0 x[1-9]" && has train.out "conv1.weight_grad x6"'
[ ${#tb_flags[@]} -eq 0 ] || check "TensorBoard event file written (in the run's subdirectory)" eval 'ls tb/*/*tfevents* > /dev/null 2>&1'
check "metrics: OpTime.Conv2d and OpTime.BatchNorm recorded" eval 'hasf train.out "OpTime.Conv2d" && hasf train.out "OpTime.BatchNorm"'
for f in pics/feature_maps_Relu_0_1.png pics/feature_maps_MaxPool2d_1_0.png pics/filters_conv1.weight.png pics/filters_conv2.weight.png; do
    [ ${#pic_flags[@]} -eq 0 ] || check "picture $f is a PNG" png "$f"
done
if out=$("$PY" - npy w 2>&1 <<'PY'
import sys, numpy as np
npy, w = sys.argv[1], sys.argv[2]
g = np.load(f"{npy}/Gradient___conv1.weight.npy")
assert g.dtype == np.float32 and g.shape == (2, 6, 1, 5, 5), g.shape
assert np.isfinite(g).all() and not np.array_equal(g[0], g[1]), "both steps hold the same gradient"
rm = np.load(f"{npy}/bn1.running_mean.npy")
assert rm.shape == (2, 6), rm.shape
assert np.abs(rm).min() > 0 and not np.array_equal(rm[0], rm[1]), rm
mp = np.load(f"{npy}/MaxPool2d_0.npy")
assert mp.shape == (100, 6, 14, 14) and (mp >= 0).all(), mp.shape
saved = np.load(f"{w}/bn1.running_mean.npy")
assert np.array_equal(saved, rm[-1]), (saved, rm[-1])
for n in ("conv1.weight", "bn1.weight", "bn1.bias", "bn1.running_var", "bn2.running_mean", "fc3.bias"):
    np.load(f"{w}/{n}.npy")
print(f"Gradient___conv1.weight {g.shape}, bn1.running_mean {rm.shape}")
PY
); then
    ok "NumPy: conv1 gradient and bn1 running mean per step, MaxPool2d:0 [100,6,14,14] >= 0, saved weights incl. running stats = last anchored: $out"
else
    fail "NumPy on the dumps: $out"
fi

# ---- the weights (with running statistics) load back
run eval1 "$BIN" eval --model cnn --data "$DATA" --quiet --threads 2 --weights w --batch-size 500
run eval0 "$BIN" eval --model cnn --data "$DATA" --quiet --threads 2 --batch-size 500
a1=$(sed -n 's/.*accuracy \([0-9.]*\)%.*/\1/p' eval1.out) a0=$(sed -n 's/.*accuracy \([0-9.]*\)%.*/\1/p' eval0.out)
check "eval --weights w: accuracy $a1% (untrained $a0%)" eval '[ $rc -eq 0 ] && [ -n "$a1" ] && [ "$a1" != "$a0" ]'
mv w/bn1.running_var.npy w/x.npy
run eval2 "$BIN" eval --model cnn --data "$DATA" --quiet --weights w
check "eval --weights without bn1.running_var.npy: exit 1 naming the file" eval '[ $rc -eq 1 ] && hasf eval2.err "bn1.running_var"' || show eval2.err

# ---- numeric check on the CNN
run numerics "$BIN" train "${T_ARGS[@]}" --batch-size 200 --lr 1e6 --optimizer sgd --check-numerics output --max-steps 20
check "--check-numerics output --lr 1e6: exit 1 naming the first non-finite tensor: $(grep -Eo "first non-finite value in '[^']+'" numerics.err | head -n1)" \
    eval '[ $rc -eq 1 ] && has numerics.err "first non-finite value in"' || show numerics.err

# ---- bad picture requests are usage errors
if needs plots "--feature-maps of a 2-D tensor"; then
    run badfm "$BIN" train "${T_ARGS[@]}" --batch-size 100 --max-steps 1 --feature-maps fc1/Add:0
    check "--feature-maps of a 2-D tensor: exit 2, says it takes a 4-D activation" eval '[ $rc -eq 2 ] && hasf badfm.err "4-D activation"' || show badfm.err
fi
finish
