#!/bin/bash
# test_cli_oneway.sh -- one training path for every model: the character
# GPT takes the flags every model takes (--check-numerics op,
# --stats-every, --metrics, --tensorboard), Ctrl-C saves its weights,
# a checkpoint resumes it to the very weights of a run never stopped;
# names, graph, lint, compare and eval take it (and lint --input); every
# name or path a flag takes is checked before training; mistyped flags,
# commands and models get the closest names, a --watch miss its closest
# tensors, a bad anchor mode is called a bad mode, and one tensor can be
# anchored in two modes.
set -u

# shellcheck source=support/cli_checks.sh
source "$(dirname "$0")/support/cli_checks.sh"
cli_paths
TEXT=$SRC/data/tinyshakespeare

T=$(mktemp -d "${TMPDIR:-/tmp}/ts_oneway.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1

GPT=(--model gpt --data "$TEXT" --layers 1 --heads 2 --embd 16 --block-size 16 --batch-size 8 --threads 1 --holdout 16)
usage() { # usage NAME PATTERN CMD...: exit 2, stderr matches, nothing trained
    local name=$1 pat=$2
    shift 2
    run "$name" "$@"
    if [ "$rc" -eq 2 ] && hasf "$name.err" "$pat" && ! has "$name.out" '^(trained|epoch)'; then ok "usage error before training: $name"
    else fail "$name (rc $rc)"; show "$name.err"; show "$name.out"; fi
}

# ---- the GPT with the flags of every model
tb=()
needs tensorboard "--tensorboard with the GPT" && tb=(--tensorboard tb)
run obs "$BIN" train "${GPT[@]}" --steps 20 --check-numerics op --stats-every 10 --metrics "${tb[@]}"
check "gpt: --check-numerics op --stats-every 10 --metrics: exit 0 (rc $rc)" [ "$rc" -eq 0 ] || show obs.err
check "gpt: the stats table at steps 10 and 20" [ "$(grep -c '^Step [12]0 - Summary Stats' obs.out)" -eq 2 ] || show obs.out
check "gpt: the table's rows are the gradients, all finite" has obs.out '^ +0 +Gradient___wte\.weight .* 0 +0$' || show obs.out 20
check "gpt: the metrics report" hasf obs.out "Counter: Compilations" || show obs.out
if [ ${#tb[@]} -gt 0 ]; then
    ev=$(ls tb/*/events.out.tfevents.* 2>/dev/null | head -n 1)
    check "gpt: TensorBoard events in the run's own directory, tags grouped" eval '[ -n "$ev" ] && grep -aq loss/train "$ev"' || ls -R tb
fi

# ---- the GPT's own data is found as MNIST is (here, from the build directory's checkout)
if [ -f "$BUILD/../data/tinyshakespeare/input.txt" ]; then
    run nodata "$BIN" train --model gpt --layers 1 --heads 2 --embd 16 --block-size 16 --batch-size 8 --steps 2 --holdout 8 --quiet
    check "train --model gpt without --data, from another directory (rc $rc)" eval '[ $rc -eq 0 ] && has nodata.out "^trained 2 runs"' || show nodata.err
fi

# ---- Ctrl-C saves the weights of the completed steps
set -m # the job gets default SIGINT handling, as from a terminal
TS_LOG_LEVEL=debug "$BIN" train "${GPT[@]}" --steps 100000000 --quiet --save-weights w > int.out 2> int.err &
pid=$!
set +m
for _ in $(seq 1200); do
    grep -q 'run 1 (training)' int.err 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
sleep 0.3
kill -INT "$pid"
wait "$pid"
rc=$?
check "gpt: SIGINT: exit 130 (rc $rc)" [ "$rc" -eq 130 ] || show int.err
check "gpt: SIGINT: it says so" hasf int.err "interrupted by SIGINT" || show int.err
check "gpt: SIGINT: the weights, lm.txt and vocab.txt are written" eval '[ -s w/wte.weight.npy ] && [ -s w/lm.txt ] && [ -s w/vocab.txt ]'
run gen "$BIN" generate --weights w --prompt "ROMEO:" --tokens 10
check "generate reads what the interrupted run saved" eval '[ $rc -eq 0 ] && hasf gen.out ROMEO:' || show gen.err

# ---- checkpoints: 10 steps, stop, resume 10 == 20 steps straight
run full "$BIN" train "${GPT[@]}" --quiet --steps 20 --save-weights full
run half "$BIN" train "${GPT[@]}" --quiet --steps 20 --max-steps 10 --checkpoint-dir ck
run rest "$BIN" train "${GPT[@]}" --quiet --steps 20 --resume ck --save-weights resumed
check "gpt: --checkpoint-dir and --resume run (rc $rc)" eval '[ $rc -eq 0 ] && [ -s ck/checkpoint.tsck ]' || show rest.err
same=1
for f in full/*.npy; do cmp -s "$f" "resumed/$(basename "$f")" || { same=0; echo "     | differs: $f"; }; done
check "gpt: 10 steps + resume 10 give the weights of 20 straight, bit for bit" eval '[ $same -eq 1 ] && [ -s full/wte.weight.npy ]'
run other "$BIN" train "${GPT[@]}" --quiet --steps 20 --seed 1 --save-weights other
if ! cmp -s full/wte.weight.npy other/wte.weight.npy; then ok "... and the comparison can fail: another seed differs"; else fail "another seed gives the same weights"; fi

# ---- every command takes the GPT, with the same --input
run names "$BIN" names --model gpt --layers 1
check "names --model gpt" eval '[ $rc -eq 0 ] && hasf names.out blocks.0.attn/Softmax:0' || show names.err
run graph "$BIN" graph --model gpt --layers 1
check "graph --model gpt" eval '[ $rc -eq 0 ] && hasf graph.out "%tokens = Input() : i32[64,64]"' || show graph.err
run lint "$BIN" lint --model gpt --input tokens:4x16
check "lint --model gpt --input tokens:4x16 (lint takes --input)" eval '[ $rc -eq 0 ] && hasf lint.out "gpt: 0 lint warnings"' || show lint.err
run lintg "$BIN" graph --model gpt --input tokens:4x16 --layers 1 --batch-size 4
check "--input tokens:BxT sets the GPT's block (dim 0 is --batch-size, as for a file's input)" hasf lintg.out "%tokens = Input() : i32[4,16]" || show lintg.err
usage lint_bad "the gpt's input is tokens:BxT" "$BIN" lint --model gpt --input x:4x16
usage lint_mlp "the model's input is x f32[64,1,28,28]" "$BIN" lint --input x:8x784
run lint_mlp_ok "$BIN" lint --input x:8x1x28x28
check "lint --input x:8x1x28x28, the mlp's own shape (rc $rc)" [ "$rc" -eq 0 ] || show lint_mlp_ok.err
run ev "$BIN" eval "${GPT[@]}" --weights full --quiet
check "eval --model gpt on the corpus's held-out windows" eval '[ $rc -eq 0 ] && has ev.out "^eval: 16 windows of 16 tokens, loss [0-9.]+"' || show ev.err
if has_feature npz; then
    /usr/bin/python3 - <<'PYEOF' && ok "compare inputs written" || fail "writing compare inputs"
import numpy as np
rng = np.random.default_rng(0)
x = rng.integers(0, 65, size=(2, 16)).astype(np.int32)
np.savez("in.npz", tokens=x, targets=np.roll(x, -1, axis=1))
PYEOF
    run dump "$BIN" compare --model gpt --layers 1 --heads 2 --embd 16 --weights full --inputs in.npz --reference full
    check "compare --model gpt (its block size from the tokens it is fed) runs and finds the weights equal" [ "$rc" -eq 0 ] || show dump.out 12
fi

# ---- an ONNX language model trains on a corpus as the GPT does, and generates
if has_feature onnx; then
    ONNX_LM=$SRC/tests/reference/onnx/gpt2_op17.onnx # tokens [2,8] -> scores [2,8,32], the batch folded into its reshapes
    head -c 4000 "$TEXT/input.txt" | tr -cd 'a-z \n' > small.txt
    run olm "$BIN" train --model "$ONNX_LM" --batch-size 2 --data small.txt --steps 10 --holdout 4 --quiet --save-weights ow
    check "an ONNX language model trains on a text corpus (rc $rc)" eval '[ $rc -eq 0 ] && has olm.out "^trained 10 runs"' || show olm.err
    run ogen "$BIN" generate --weights ow --prompt "the " --tokens 12
    check "generate samples from it (any language model the CLI trained)" eval '[ $rc -eq 0 ] && [ "$(head -c 4 ogen.out)" = "the " ] && [ "$(wc -c < ogen.out)" -eq 17 ]' || show ogen.err
fi

# ---- names and paths checked before training
usage fmaps "--feature-maps Relu:9" "$BIN" train --data "$DATA" --model cnn --max-steps 1 --feature-maps Relu:9
usage filters "--filters conv1.weigth" "$BIN" train --data "$DATA" --model cnn --max-steps 1 --filters conv1.weigth
usage attn "--attention-map blocks.0.attn/Softmax:0:99" "$BIN" train "${GPT[@]}" --steps 1 --attention-map 'blocks.0.attn/Softmax:0:99'
usage attn_shape "takes attention probabilities [B,H,T,T]" "$BIN" train "${GPT[@]}" --steps 1 --attention-map 'blocks.0.ln1/LayerNorm:0'
: > afile
usage ckdir "--checkpoint-dir afile/ck" "$BIN" train --data "$DATA" --max-steps 1 --checkpoint-dir afile/ck
if has_feature plots; then
    run plot "$BIN" train --data "$DATA" --quiet --max-steps 2 --plot out/sub/curves.png
    check "--plot creates its folder (rc $rc)" eval '[ $rc -eq 0 ] && [ -s out/sub/curves.png ]' || show plot.err
fi

# ---- did you mean, closest names, anchor modes
usage flag "did you mean '--lr-schedule'" "$BIN" train --lr-shedule cosine
run cmd "$BIN" trian
check "a mistyped command: did you mean 'train' (rc $rc)" eval '[ $rc -eq 2 ] && hasf cmd.err "did you mean '"'train'"'"' || show cmd.err
usage model "did you mean 'mlp', 'gpt'" "$BIN" train --model gtp
usage watch "closest: 'fc1.weight'" "$BIN" train --data "$DATA" --max-steps 1 --watch fc1.weigth
usage mode "'fnal' is not an output mode" "$BIN" train --data "$DATA" --max-steps 1 --anchor fc1.weight:fnal
usage mode_n "'evry_n' is not an output mode" "$BIN" train --data "$DATA" --max-steps 1 --anchor fc1.weight:evry_n:5
usage gptflag "size a --model gpt" "$BIN" train --data "$DATA" --max-steps 1 --layers 3
run modes "$BIN" train --data "$DATA" --quiet --max-steps 2 --anchor fc1.bias:final --anchor fc1.bias:sum
check "one tensor anchored in two modes (rc $rc)" eval '[ $rc -eq 0 ] && has modes.out "^  fc1\.bias f32\[320\]" && has modes.out "^  fc1\.bias:sum f32\[320\]"' || show modes.err

# ---- --help lists a model's own flags under it
run help "$BIN" train --help
check "train --help: the GPT's flags under a '--model gpt' heading" \
    [ "$(awk '/^--model gpt/ { h = 1 } h && /^  --layers / { print "yes"; exit }' help.out)" = yes ] || show help.out 200
finish
