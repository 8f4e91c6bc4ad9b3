#!/bin/bash
# test_cli_gpt.sh -- `tensorscope train --model gpt` and `generate` end to
# end on data/tinyshakespeare with a tiny configuration: the run trains
# (held-out loss below ln 65 = 4.17 after a few steps), saves weights (and
# lm.txt, vocab.txt) that generate reads back (the sample continues the
# prompt with characters of the vocabulary, the same seed gives the same
# text), writes attention maps whose upper triangle (the causal mask) is
# empty, and TensorBoard events; bad flags are usage errors (exit 2) that
# name the problem. The GPT trains on the one training path: what every
# model's flags do is tested with it in test_cli_oneway.sh.
set -u

BUILD=${TS_BUILD_DIR:?set TS_BUILD_DIR to the CMake build directory}
SRC=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=$BUILD/tensorscope
DATA=$SRC/data/tinyshakespeare
PY=/usr/bin/python3 # Debian's interpreter: numpy and PIL

# shellcheck source=support/cli_checks.sh
source "$SRC/tests/support/cli_checks.sh"
[ -x "$BIN" ] || { fail "$BIN is missing"; finish; }
(cd "$DATA" && sha256sum -c --quiet SHA256SUMS) && ok "data/tinyshakespeare matches its checksum" || fail "corpus checksum"

T=$(mktemp -d "${TMPDIR:-/tmp}/ts_gpt.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
rc=0
run() { local name=$1; shift; "$@" >"$name.out" 2>"$name.err"; rc=$?; }
usage_error() { # usage_error NAME PATTERN CMD...: exit 2 and stderr matches
    local name=$1 pat=$2; shift 2
    run "$name" "$@"
    if [ "$rc" -eq 2 ] && grep -q -- "$pat" "$name.err"; then ok "usage error: $name"; else fail "usage error: $name (rc $rc: $(head -c 300 "$name.err"))"; fi
}

TINY=(--model gpt --data "$DATA" --layers 1 --heads 2 --embd 16 --block-size 16 --batch-size 8 --threads 1 --quiet)
map_flags=() tb_flags=() # where plots and TensorBoard are built
needs plots "the attention maps" &&
    map_flags=(--attention-map 'blocks.0.attn/Softmax:0' --attention-map 'blocks.0.attn/Softmax:0:3' --attention-map-dir maps)
needs tensorboard "TensorBoard of the GPT" && tb_flags=(--tensorboard tb)
run train "$BIN" train "${TINY[@]}" --steps 40 --holdout 16 --lr 0.01 \
    --save-weights w "${map_flags[@]}" "${tb_flags[@]}" --anchor Gradient___wte.weight
if [ "$rc" -eq 0 ]; then ok "train --model gpt"; else fail "train --model gpt (rc $rc: $(tail -3 train.err))"; fi
loss=$(sed -n 's/^trained .*held-out accuracy .*(loss \([0-9.]*\)).*/\1/p' train.out)
if [ -n "$loss" ] && awk -v l="$loss" 'BEGIN { exit !(l < 4.0) }'; then ok "held-out loss $loss < 4.0 (ln 65 = 4.17 at the start)"; else fail "held-out loss '$loss'"; fi
grep -q "^  Gradient___wte.weight f32\[65,16\]" train.out && ok "the tied embedding has one gradient, anchored" || fail "wte gradient anchor: $(grep anchor train.out)"
for f in w/wte.weight.npy w/wpe.weight.npy w/lm.txt w/vocab.txt; do
    [ -s "$f" ] && ok "saved $f" || fail "saved $f"
done
[ ! -e w/lm_head.weight.npy ] && ok "no separate output projection saved (tied)" || fail "an lm_head weight exists"
[ ! -e w/causal_mask.npy ] && ok "the causal mask (a constant) is not saved as a weight" || fail "causal_mask.npy saved"

for m in maps/attention_blocks.0.attn_Softmax_0_s0.png maps/attention_blocks.0.attn_Softmax_0_s3.png; do
    [ ${#map_flags[@]} -gt 0 ] || break
    if $PY - "$m" <<'PYEOF'
import sys
from PIL import Image
im = Image.open(sys.argv[1]).convert("RGB")
w, h = im.size
assert w > 300 and h > 200, im.size
# the first head's panel: 16 x 16 cells; sample the upper and lower triangles
# head 0's panel (plot.c: panels of 260 px, a 28 px margin for the labels,
# 50 px of title; T = 16 cells of (260 - 28 - 10) / 16 px): cells above the
# diagonal are masked (white), the diagonal and below hold probabilities
px = im.load()
T, cell, x0, y0 = 16, (260 - 28 - 10) / 16, 28, 50 + 28
bad = []
for i in range(T):
    for j in range(T):
        c = px[int(x0 + (j + 0.5) * cell), int(y0 + (i + 0.5) * cell)]
        if (c == (255, 255, 255)) != (j > i):
            bad.append((i, j, c))
assert not bad, bad[:5]
PYEOF
    then ok "$m: the causal mask shows (upper triangle empty, the rest coloured)"; else fail "$m"; fi
done
if [ ${#tb_flags[@]} -gt 0 ]; then
    ev=$(ls tb/*/events.out.tfevents.* 2>/dev/null | head -n 1)
    [ -n "$ev" ] && grep -aq "loss/train" "$ev" && grep -aq "attention/blocks.0.attn/Softmax:0/sample_3" "$ev" &&
        ok "TensorBoard events in the run's directory, tags grouped (loss/train, attention/...)" || fail "TensorBoard events: $(ls -R tb | head)"
fi

# --quiet: the final result alone (no epoch lines, no progress); without it
# an epoch line before the same final numbers
LOUD=()
for x in "${TINY[@]}"; do [ "$x" != --quiet ] && LOUD+=("$x"); done
run gloud "$BIN" train "${LOUD[@]}" --steps 20 --holdout 16
run gquiet "$BIN" train "${TINY[@]}" --steps 20 --holdout 16
untimed() { sed -E 's/ in [0-9.]+ s:/:/; s/  [0-9]+ samples\/s$//' "$@"; }
if [ "$rc" -eq 0 ] && [ "$(wc -l < gquiet.out)" -eq 1 ] && grep -q "^trained 20 runs (20 steps" gquiet.out && ! [ -s gquiet.err ] &&
    [ "$(tail -n 1 gloud.out | untimed)" = "$(untimed gquiet.out)" ]; then
    ok "train --model gpt --quiet: one line, '$(cat gquiet.out)', as the last line without it (timings aside), stderr empty"
else fail "train --model gpt --quiet: '$(head -c 300 gquiet.out)' / '$(head -c 300 gquiet.err)'"; fi
if grep -q "^epoch 1/1: loss" gloud.out; then
    ok "train --model gpt without --quiet: the epoch line"
else fail "train --model gpt without --quiet: $(head -c 300 gloud.out)"; fi

run gen1 "$BIN" generate --model gpt --weights w --prompt "ROMEO:" --tokens 50 --seed 7
run gen2 "$BIN" generate --model gpt --weights w --prompt "ROMEO:" --tokens 50 --seed 7
if [ "$rc" -eq 0 ] && head -c 6 gen1.out | grep -q "ROMEO:" && [ "$(wc -c <gen1.out)" -ge 56 ]; then ok "generate continues the prompt"; else fail "generate (rc $rc: $(cat gen1.err))"; fi
cmp -s gen1.out gen2.out && ok "the same seed samples the same text" || fail "seeded sampling differs"

usage_error embd_heads "multiple of --heads" "$BIN" train --model gpt --embd 30 --heads 4
if [ ${#map_flags[@]} -gt 0 ]; then
    usage_error bad_map "matches no tensor" "$BIN" train "${TINY[@]}" --steps 1 --attention-map 'blocks.0.attn/Softmx:0'
    usage_error map_sample "sample in 0..7" "$BIN" train "${TINY[@]}" --steps 1 --attention-map 'blocks.0.attn/Softmax:0:99'
fi
usage_error gen_weights "--weights DIR is required" "$BIN" generate --model gpt --prompt hi
usage_error gen_prompt "not in the corpus" "$BIN" generate --model gpt --weights w --prompt "caf$(printf '\xc3\xa9')"
usage_error gen_temp "--temperature must be > 0" "$BIN" generate --model gpt --weights w --temperature 0
run missing "$BIN" train --model gpt --data "$T/nothing" --steps 1
[ "$rc" -eq 1 ] && grep -q "cannot open the text corpus" missing.err && ok "a missing corpus is a runtime error naming it" || fail "missing corpus (rc $rc)"
finish
