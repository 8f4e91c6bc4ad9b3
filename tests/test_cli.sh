#!/bin/bash
# test_cli.sh -- the tensorscope command-line tool end to end, as a user runs
# it: help and version, usage errors (exit 2, a message naming the problem and
# the help hint), runtime errors (exit 1), names/graph, training with anchors,
# .npy dumps, stats, print ops, plots, metrics, outfeeds, numeric checks,
# inspect, debug-run, save/eval and the per-step log. Every check prints
# `ok ...` or `FAIL ...`; the script exits non-zero if any failed.
# Runs on MNIST's test set (data/mnist) with large batches to stay fast.
set -u

BUILD=${TS_BUILD_DIR:?set TS_BUILD_DIR to the CMake build directory}
SRC=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=$BUILD/tensorscope
DATA=$SRC/data/mnist
PY=/usr/bin/python3 # Debian's python3-numpy lives here, not in the first python3 on PATH

# shellcheck source=support/cli_checks.sh
source "$SRC/tests/support/cli_checks.sh"

[ -x "$BIN" ] || { fail "$BIN is missing: build the CLI first (cmake --build $BUILD)"; finish; }
[ -f "$DATA/t10k-images-idx3-ubyte.gz" ] || { fail "MNIST test set missing in $DATA"; finish; }

T=$(mktemp -d "${TMPDIR:-/tmp}/ts_cli.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1

T_ARGS=(--data "$DATA" --quiet)

# ---- help and version
run help "$BIN" --help
missing=""
for c in train eval names graph inspect debug-run; do has help.out "^  $c " || missing="$missing $c"; done
check "--help: exit 0, usage and every command listed${missing:+ (missing:$missing)}" \
    eval '[ $rc -eq 0 ] && has help.out "^usage: tensorscope COMMAND" && [ -z "$missing" ]'
run version "$BIN" --version
check "--version: exit 0, prints 'tensorscope X.Y.Z' ($(cat version.out))" \
    eval '[ $rc -eq 0 ] && has version.out "^tensorscope [0-9]+\.[0-9]+\.[0-9]+"'

run thelp "$BIN" train --help
missing=""
for f in --model --data --epochs --batch-size --lr --optimizer --momentum --weight-decay --seed --holdout --all \
    --repeat-count --gradient-accumulation-count --max-steps --threads --anchor --output-mode --outfeed \
    --outfeed-pre-accumulated-gradients --watch --watch-period --stats --histogram --dump-npy --print-tensor \
    --run-single-step --check-numerics --metrics --log-verbosity --log-memory --tensorboard --plot \
    --save-weights --weights --quiet --help; do
    has thelp.out "^  $f( |\$)" || missing="$missing $f"
done
check "train --help: exit 0 and lists every flag${missing:+ (missing:$missing)}" eval '[ $rc -eq 0 ] && [ -z "$missing" ]'

# ---- usage errors: exit 2, stderr names the problem and says where to look
run nocmd "$BIN"
check "no command: exit 2 with the usage on stderr" eval '[ $rc -eq 2 ] && has nocmd.err "usage: tensorscope"'
run badcmd "$BIN" frobnicate
check "unknown command: exit 2, names it and points to --help" \
    eval '[ $rc -eq 2 ] && hasf badcmd.err "frobnicate" && hasf badcmd.err "tensorscope --help"'

usage_error() { # usage_error WHAT REGEX ARGS...: train ARGS exits 2 with REGEX and the hint
    local what=$1 re=$2
    shift 2
    run usage "$BIN" train "$@"
    if [ $rc -eq 2 ] && has usage.err "$re" && hasf usage.err "Try 'tensorscope train --help'" && [ ! -s usage.out ]; then
        ok "$what: exit 2, '$(head -n1 usage.err)'"
    else
        fail "$what: exit $rc (want 2, stderr matching /$re/ and the help hint, nothing on stdout)"
        show usage.err
    fi
}
usage_error "unknown flag" "unknown flag '--frobnicate'" --frobnicate
usage_error "missing value" "--epochs needs a value" "${T_ARGS[@]}" --epochs
usage_error "bad integer" "--epochs expects an integer, got 'abc'" --epochs abc
# integers beyond what the flag holds: refused as typed (4294967297 is not 1)
usage_error "integer beyond int" "--threads 4294967297 is out of range: give an integer from -2147483648 to 2147483647" --threads 4294967297
usage_error "integer beyond long" "--batch-size 99999999999999999999 is out of range" --batch-size 99999999999999999999
usage_error "seed beyond int64" "--seed 9223372036854775808 is out of range: give an integer from -9223372036854775808 to 9223372036854775807" --seed 9223372036854775808
usage_error "--input shape beyond int64" "--input x:99999999999999999999x4: the shape must be up to" --model m.onnx --input x:99999999999999999999x4
usage_error "loss scale beyond float" "--loss-scale: the initial scale must be in \[1, 1e30\], got 1e39" --loss-scale 1e39
usage_error "NaN learning rate" "--lr expects a number, got 'nan'" --lr nan
usage_error "zero epochs" "--epochs must be" --epochs 0
usage_error "flag with a value it does not take" "--quiet takes no value" --quiet=1
usage_error "unknown optimizer" "--optimizer must be sgd, adam or adamw, got 'foo'" --optimizer foo
usage_error "bad --check-numerics" "--check-numerics must be off, output or op, got 'maybe'" --check-numerics maybe
usage_error "stray argument" "unexpected argument 'extra'" extra
# A trailing word where a mode goes is a mode, and a bad one.
usage_error "anchor with a bogus mode" "'bogus' is not an output mode" "${T_ARGS[@]}" --anchor x:bogus:3
usage_error "anchor on no tensor" "no tensor named 'nosuch'" "${T_ARGS[@]}" --anchor nosuch
usage_error "every_n period not dividing D x A" "period 3 must divide" \
    "${T_ARGS[@]}" --batch-size 1000 --anchor 'fc1/Add:0:every_n:3' --repeat-count 2
usage_error "unknown model" "unknown model 'resnet'" "${T_ARGS[@]}" --model resnet

# ---- missing data: a runtime error (exit 1) that says which files it wants
for d in "$T/no-such-dir" "$T/empty-dir"; do
    [ "$d" = "$T/empty-dir" ] && mkdir -p "$d"
    run nodata "$BIN" train --data "$d" --quiet
    if [ $rc -eq 1 ] && hasf nodata.err "$d" && hasf nodata.err "train-images-idx3-ubyte" && hasf nodata.err "t10k-images-idx3-ubyte"; then
        ok "data dir $(basename "$d"): exit 1, names the dir and the files looked for"
    else
        fail "data dir $(basename "$d"): exit $rc (want 1 and a message naming $d, train-images-idx3-ubyte and t10k-images-idx3-ubyte)"
        show nodata.err
    fi
done

# ---- names and graph
run names "$BIN" names --model mlp
want="fc1.weight Gradient___fc2.bias Accum___fc3.weight UpdatedVar___fc1.bias fc1/MatMul:0 LogSoftmax:0 loss x labels"
missing=""
for n in $want; do grep -Fxq -- "$n" names.out || missing="$missing $n"; done
check "names: exit 0, $(wc -l < names.out) names incl. $want${missing:+ (missing:$missing)}" \
    eval '[ $rc -eq 0 ] && [ -z "$missing" ]'
check "names: sorted (C order) without duplicates" eval 'LC_ALL=C sort -uc names.out'
check "names: plain SGD has no optimizer state (no Accl___)" eval '! grep -q "^Accl" names.out'
run names_m "$BIN" names --model mlp --momentum 0.9
check "names --momentum 0.9: Accl___fc1.weight" eval '[ $rc -eq 0 ] && grep -Fxq Accl___fc1.weight names_m.out'
run names_a "$BIN" names --model mlp --optimizer adam
check "names --optimizer adam: Accl1___, Accl2___ and Step___ state for fc1.weight" \
    eval '[ $rc -eq 0 ] && grep -Fxq Accl1___fc1.weight names_a.out && grep -Fxq Accl2___fc1.weight names_a.out && grep -q "^Step___" names_a.out'

if command -v dot > /dev/null; then
    "$BIN" graph --model mlp --format dot 2> dot1.err | dot -Tsvg > g.svg 2> dot2.err
    st=("${PIPESTATUS[@]}")
    check "graph --format dot | dot -Tsvg: both exit 0 (${st[*]}), the SVG draws fc1.weight" \
        eval '[ "${st[0]}" -eq 0 ] && [ "${st[1]}" -eq 0 ] && hasf g.svg "<svg" && hasf g.svg "fc1.weight"'
else
    fail "Graphviz's dot is not installed (apt-get install graphviz)"
fi
run gtext "$BIN" graph --model mlp --format text --locations
check "graph --format text --locations: '$(grep -Eo 'models\.c:[0-9]+' gtext.out | head -n1)' shown" \
    eval '[ $rc -eq 0 ] && has gtext.out "%fc1.weight = Param.* @ [^ ]*models\.c:[0-9]+"'
run gtext2 "$BIN" graph --model mlp --format text
check "graph without --locations: no source locations" eval '[ $rc -eq 0 ] && hasf gtext2.out "%fc1.weight" && ! hasf gtext2.out "models.c:"'
run gbad "$BIN" graph --format svg
check "graph --format svg: exit 2" eval '[ $rc -eq 2 ] && hasf gbad.err "--format must be text or dot"'

# ---- training: an ALL anchor over D=2 dumped as .npy, read by NumPy
run anchor "$BIN" train "${T_ARGS[@]}" --epochs 1 --batch-size 1000 --max-steps 2 \
    --anchor 'Gradient___fc2.bias:all' --repeat-count 2 --dump-npy npy
check "train --anchor Gradient___fc2.bias:all --repeat-count 2 --dump-npy: exit 0" eval '[ $rc -eq 0 ]' || show anchor.err
check "train: 'trained 2 runs (4 steps, 4000 samples)'" hasf anchor.out "trained 2 runs (4 steps, 4000 samples)"
if out=$("$PY" - npy/Gradient___fc2.bias.npy 2>&1 <<'PY'
import sys, numpy as np
a = np.load(sys.argv[1])
assert a.dtype == np.float32, a.dtype
assert a.shape == (2, 100), a.shape
assert np.isfinite(a).all() and np.abs(a).max() > 0, "values are not finite and non-zero"
assert not np.array_equal(a[0], a[1]), "both steps hold the same gradient"
print(a.shape)
PY
); then
    ok "NumPy loads Gradient___fc2.bias.npy: f32 $out, finite, one gradient per step"
else
    fail "NumPy on npy/Gradient___fc2.bias.npy: $out"
fi

# ---- stats table, print op, histogram, plot, metrics
run stats "$BIN" train "${T_ARGS[@]}" --batch-size 1000 --run-single-step --stats
check "--run-single-step --stats: exit 0, one run, the stats table with a Gradient___fc1.weight row" \
    eval '[ $rc -eq 0 ] && hasf stats.out "trained 1 runs" &&
          has stats.out "^Index +Name +Mean +Std +Minimum +Maximum +NaNs +infs$" &&
          has stats.out "^ +[0-9]+ +Gradient___fc1\.weight( +-?[0-9.e+-]+){4} +0 +0$"' || show stats.err

run print "$BIN" train "${T_ARGS[@]}" --batch-size 1000 --print-tensor Relu:1 --max-steps 1
check "--print-tensor Relu:1: 'Relu:1' and 'Relu:1_gradient' printed on stderr with the shape" \
    eval '[ $rc -eq 0 ] && has print.err "Relu:1: f32\[1000,100\]" && has print.err "Relu:1_gradient: f32\[1000,100\]" && ! hasf print.out "Relu:1"' || show print.err

png() { [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; }
plot_flags=()
needs plots "--histogram and --plot" && plot_flags=(--histogram H.png --plot P.png)
run plots "$BIN" train "${T_ARGS[@]}" --batch-size 1000 --max-steps 2 "${plot_flags[@]}" --metrics
if [ ${#plot_flags[@]} -gt 0 ]; then
    check "--histogram H.png: a PNG ($(stat -c %s H.png 2> /dev/null) bytes) and 'Saved histogram to H.png'" \
        eval '[ $rc -eq 0 ] && png H.png && hasf plots.out "Saved histogram to H.png"'
    check "--plot P.png: a PNG and 'Saved plot to P.png'" eval 'png P.png && hasf plots.out "Saved plot to P.png"'
fi
runs_counter=$(grep -A1 '^Counter: Runs$' plots.out | sed -n 's/^ *Value: *//p')
check "--metrics: 'Metric: ExecuteTime' with TotalSamples, 'Counter: Runs' = $runs_counter (>= 2 training runs)" \
    eval 'hasf plots.out "Metric: ExecuteTime" && grep -A1 "^Metric: ExecuteTime$" plots.out | has /dev/stdin "TotalSamples: [1-9]" &&
          [ "${runs_counter:-0}" -ge 2 ]'

# ---- outfeed: activations and fc3 gradients, D=2, A=2
outfeed() { # outfeed NAME EXTRA...: sets runs, keys (KEY COUNT lines) and total
    run "$1" "$BIN" train "${T_ARGS[@]}" --batch-size 500 --max-steps 3 --repeat-count 2 \
        --gradient-accumulation-count 2 --outfeed 'Relu:*' --outfeed 'fc3*_grad' "${@:2}"
    runs=$(sed -n 's/^trained \([0-9]*\) runs.*/\1/p' "$1.out")
    # shellcheck disable=SC2034 # read in check's eval
    total=$(sed -n 's/^outfeed: \([0-9]*\) records.*/\1/p' "$1.out")
    sed -n 's/^outfeed: [0-9]* records: //p' "$1.out" | tr ',' '\n' | sed 's/^ *\(.*\) x\([0-9]*\)$/\1 \2/' > "$1.keys"
}
count_of() { awk -v k="$2" '$1 == k { print $2 }' "$1"; }
outfeed ofpre --outfeed-pre-accumulated-gradients
# shellcheck disable=SC2034 # read in check's eval
sum=$(awk '{ s += $2 } END { print s + 0 }' ofpre.keys)
line=$(grep '^outfeed:' ofpre.out)
want=$((${runs:-0} * 2 * 2))
check "outfeed, pre-accumulated: '$line'" eval '[ $rc -eq 0 ] && [ -n "$line" ] && [ "${total:-x}" = "$sum" ]'
check "outfeed, pre-accumulated: fc3.weight_grad and fc3.bias_grad x $want (runs $runs x D 2 x A 2)" \
    eval '[ "$(count_of ofpre.keys fc3.weight_grad)" = "$want" ] && [ "$(count_of ofpre.keys fc3.bias_grad)" = "$want" ]'
r0=$(count_of ofpre.keys Relu:0) r1=$(count_of ofpre.keys Relu:1)
check "outfeed: Relu:0 x$r0, Relu:1 x$r1: at least one per training micro-batch ($want)" \
    eval '[ "${r0:-0}" -ge "$want" ] && [ "${r1:-0}" -ge "$want" ]'
outfeed ofacc
want=$((${runs:-0} * 2))
check "outfeed, accumulated: fc3 gradients x $want (runs $runs x D 2): '$(grep '^outfeed:' ofacc.out)'" \
    eval '[ $rc -eq 0 ] && [ "$(count_of ofacc.keys fc3.weight_grad)" = "$want" ] && [ "$(count_of ofacc.keys fc3.bias_grad)" = "$want" ]'

# ---- numeric check: a huge learning rate diverges
run numerics "$BIN" train "${T_ARGS[@]}" --batch-size 1000 --lr 1e6 --check-numerics output
check "--check-numerics output --lr 1e6: exit 1, stderr names the first non-finite tensor: $(grep -Eo "first non-finite value in '[^']+'" numerics.err | head -n1)" \
    eval '[ $rc -eq 1 ] && has numerics.err "numeric check.*non-finite value in '"'"'[^'"'"']+'"'"'"' || show numerics.err

# ---- inspect
run inspect "$BIN" inspect npy/Gradient___fc2.bias.npy
check "inspect: exit 0, one-line summary 'Gradient___fc2.bias.npy f32[2,100] n=200 ...'" \
    eval '[ $rc -eq 0 ] && has inspect.out "^Gradient___fc2\.bias\.npy f32\[2,100\] n=200 x∈\[" && hasf inspect.out "histogram"'
check "inspect: the stats table header and a row for the file" \
    eval 'has inspect.out "^Index +Name +Mean +Std +Minimum +Maximum +NaNs +infs$" && has inspect.out "^ +0 +Gradient___fc2\.bias\.npy +-?[0-9]"' ||
    show inspect.out 5
if out=$("$PY" - npy/Gradient___fc2.bias.npy inspect.out 2>&1 <<'PY'
import re, sys, numpy as np
a = np.load(sys.argv[1]).astype(np.float64)
text = open(sys.argv[2], encoding="utf-8").read()
m = re.search(r"x∈\[(\S+), (\S+)\]", text)
assert m, "no x∈[min, max] in the summary"
lo, hi = float(m.group(1)), float(m.group(2))
assert np.isclose(lo, a.min(), rtol=1e-2) and np.isclose(hi, a.max(), rtol=1e-2), (lo, hi, a.min(), a.max())
m = re.search(r"count (\d+)  zeros (\d+)", text)
assert m and int(m.group(1)) == a.size and int(m.group(2)) == int((a == 0).sum()), m and m.groups()
print(f"min {lo} max {hi}, count {a.size}, zeros {int((a == 0).sum())}")
PY
); then
    ok "inspect agrees with NumPy: $out"
else
    fail "inspect vs NumPy: $out"
fi
head -c 100 npy/Gradient___fc2.bias.npy > trunc.npy
echo "not a numpy file" > garbage.npy
run itrunc "$BIN" inspect trunc.npy
check "inspect of a truncated .npy: exit 1, '$(head -n1 itrunc.err)'" eval '[ $rc -eq 1 ] && hasf itrunc.err "trunc.npy" && hasf itrunc.err "truncated"'
run igarb "$BIN" inspect garbage.npy
check "inspect of a garbage file: exit 1, '$(head -n1 igarb.err)'" eval '[ $rc -eq 1 ] && hasf igarb.err "not a .npy file"'
run inone "$BIN" inspect
check "inspect with no file: exit 2" eval '[ $rc -eq 2 ] && hasf inone.err "Try '"'"'tensorscope inspect --help'"'"'"'

# ---- debug-run (its work directory goes under TMPDIR, i.e. into $T)
if needs debug-bundle "debug-run's bundle"; then
    run dbg env TMPDIR="$T" "$BIN" debug-run --outfile B.tar.gz -- "$BIN" names --model mlp
    tar tzf B.tar.gz > bundle.txt 2> /dev/null
    missing=""
    for f in output.log exit.txt env.txt sysinfo.txt gpu.txt; do grep -Fxq "tensorscope-debug/$f" bundle.txt || missing="$missing $f"; done
    check "debug-run -- names: exit 0, the bundle has output.log, exit.txt, env.txt, sysinfo.txt, gpu.txt${missing:+ (missing:$missing)}" \
        eval '[ $rc -eq 0 ] && [ -z "$missing" ]'
    mkdir -p bundle && tar xzf B.tar.gz -C bundle 2> /dev/null
    "$BIN" info 2> /dev/null | sed -n '6,$p' | sed 's/ ([0-9.]* free)//' > gpus.txt # free memory moves
    check "debug-run: gpu.txt begins with the GPUs (or why none) as 'tensorscope info' lists them" \
        eval 'sed -n "1,$(wc -l < gpus.txt)p" bundle/tensorscope-debug/gpu.txt | sed "s/ ([0-9.]* free)//" | cmp -s - gpus.txt' ||
        { show gpus.txt; show bundle/tensorscope-debug/gpu.txt; }
    check "debug-run: output.log holds the command's output, exit.txt its status 0" \
        eval 'grep -Fxq fc1.weight bundle/tensorscope-debug/output.log && grep -Eq "(^| )0$" bundle/tensorscope-debug/exit.txt'
    for f in graph.txt metrics.txt; do
        if [ -f "bundle/tensorscope-debug/$f" ]; then
            echo "     $f in the bundle ($(wc -l < "bundle/tensorscope-debug/$f") lines):"
            show "bundle/tensorscope-debug/$f" 4
        else
            echo "     (no $f in the bundle)"
        fi
    done
    run dbgfail env TMPDIR="$T" "$BIN" debug-run --tidy --outfile F.tar.gz -- "$BIN" frobnicate
    check "debug-run of a failing command: exit 1, the bundle still written" eval '[ $rc -eq 1 ] && [ -s F.tar.gz ]'
    # Ctrl-C (and SIGTERM) while the command runs: forwarded to it, what exists archived, exit 130 (143).
    # The signal goes once the command has written its pid (it runs), never after a slice of time.
    for sig in INT TERM; do
        mkdir -p "$T/w$sig" && rm -f "$T/cmd.pid"
        set -m # the job gets default signal handling, as from a terminal
        env TMPDIR="$T/w$sig" "$BIN" debug-run --tidy --outfile I$sig.tar.gz -- \
            sh -c 'echo "output before the signal"; echo $$ > "$0.tmp" && mv "$0.tmp" "$0"; while :; do sleep 0.05; done' "$T/cmd.pid" \
            > dbg$sig.out 2> dbg$sig.err &
        pid=$!
        set +m
        for _ in $(seq 1200); do [ -s "$T/cmd.pid" ] && break; kill -0 "$pid" 2> /dev/null || break; sleep 0.05; done
        cmdpid=$(cat "$T/cmd.pid" 2> /dev/null)
        kill -"$sig" "$pid"
        wait "$pid"
        rc=$?
        want=$([ $sig = INT ] && echo 130 || echo 143)
        rm -rf "b$sig" && mkdir "b$sig" && tar xzf I$sig.tar.gz -C "b$sig" 2> /dev/null
        check "debug-run, SIG$sig while the command runs: exit $want (rc $rc), the bundle written (was: killed, no bundle)" \
            eval '[ $rc -eq $want ] && has dbg$sig.err "interrupted by SIG$sig" && [ -s I$sig.tar.gz ]' || show dbg$sig.err
        check "... it holds the output so far and says the command got SIG$sig" \
            eval 'grep -q "output before the signal" b$sig/tensorscope-debug/output.log && grep -q "interrupted: debug-run got SIG$sig" b$sig/tensorscope-debug/exit.txt && grep -q "signal .* (SIG$sig)" b$sig/tensorscope-debug/exit.txt' ||
            show b$sig/tensorscope-debug/exit.txt
        check "... the command was stopped, no temporary file and no work folder left (--tidy)" \
            eval '[ -n "$cmdpid" ] && ! kill -0 "$cmdpid" 2> /dev/null && [ -z "$(ls -A "$T/w$sig")" ] && ! ls I$sig.tar.gz.tmp* > /dev/null 2>&1'
        [ -n "$cmdpid" ] && kill -9 "$cmdpid" 2> /dev/null
    done
fi
run dbgusage "$BIN" debug-run --outfile C.tar.gz
check "debug-run without '--': exit 2, nothing written" \
    eval '[ $rc -eq 2 ] && hasf dbgusage.err "after '"'"'--'"'"'" && [ ! -e C.tar.gz ]'

# ---- save-weights, then eval with them: the held-out accuracy train reported
run save "$BIN" train "${T_ARGS[@]}" --epochs 1 --batch-size 100 --lr 0.05 --save-weights W
train_acc=$(sed -n 's/^trained .*held-out accuracy \([0-9.]*%\).*/\1/p' save.out) # --quiet: the final line
run evalw "$BIN" eval --data "$DATA" --batch-size 100 --weights W
eval_acc=$(sed -n 's/^eval: 2000 images, .* accuracy \([0-9.]*%\)$/\1/p' evalw.out)
check "save-weights then eval --weights: accuracy $eval_acc = train's held-out $train_acc" \
    eval '[ -n "$train_acc" ] && [ "$train_acc" = "$eval_acc" ] && [ -f W/fc1.weight.npy ]'
run evalinit "$BIN" eval --data "$DATA" --batch-size 100
init_acc=$(sed -n 's/^eval: .* accuracy \([0-9.]*\)%$/\1/p' evalinit.out)
check "eval without --weights (initial weights) is worse: $init_acc% < $train_acc" \
    eval '[ -n "$init_acc" ] && awk -v a="$init_acc" -v b="${train_acc%\%}" "BEGIN { exit !(a + 20 < b) }"'
run evalmiss "$BIN" eval --data "$DATA" --weights no-such-dir
check "eval --weights no-such-dir: exit 1, '$(head -n1 evalmiss.err)'" eval '[ $rc -eq 1 ] && hasf evalmiss.err "no-such-dir"'

# ---- TS_LOG_LEVEL=5: a line per training step with its loss
run log5 env TS_LOG_LEVEL=5 "$BIN" train "${T_ARGS[@]}" --batch-size 1000 --max-steps 2
nlines=$(grep -Ec 'step [0-9]+ loss [0-9]+\.[0-9]+' log5.err)
check "TS_LOG_LEVEL=5: $nlines per-step lines with 'step N loss X' on stderr (want 2, one per training step)" \
    eval '[ $rc -eq 0 ] && [ "$nlines" -eq 2 ]' ||
    grep -E 'step' log5.err | head -n 4 | sed 's/^/     | /'

finish
