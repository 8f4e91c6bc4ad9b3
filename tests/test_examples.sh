#!/usr/bin/env bash
# test_examples.sh -- runs the examples end to end on the repository's
# MNIST files from a scratch directory, without naming the data (they find
# it from any directory), and checks what they print and write:
# the tutorial lists the tensor names, anchors the six parameter gradients
# and writes GradientHistogram.png (a real PNG); the outfeed example prints
# the stats table and the keys and shapes of both gradient capture modes.
set -u
build=${TS_BUILD_DIR:-build}
src=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
data="$src/data/mnist"
build=$(cd "$build" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Under -DTS_SANITIZE=ON: fontconfig (through cairo's text) keeps caches
# that LeakSanitizer reports at exit; they are not ours.
printf 'leak:libfontconfig.so\n' >"$work/lsan.supp"
export LSAN_OPTIONS="suppressions=$work/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"

checks=0
failures=0
check() { # check "message" command...
    local msg=$1
    shift
    checks=$((checks + 1))
    if "$@" >/dev/null 2>&1; then
        echo "ok   $msg"
    else
        echo "FAIL $msg"
        failures=$((failures + 1))
    fi
}
has_line() { grep -qE -- "$2" "$1"; }
# built with plots (cairo)? ctest passes TS_FEATURES (what configure built);
# run by hand, a full build is assumed
plots=true
[ -n "${TS_FEATURES+x}" ] && case " $TS_FEATURES " in *" plots "*) ;; *) plots=false ;; esac

# ---- observing tensors
ot="$build/example_observing_tensors"
check "example_observing_tensors is built" test -x "$ot"
if [ -x "$ot" ]; then
    (cd "$work" && "$ot" >ot.out 2>ot.err)
    rc=$?
    if $plots; then
        check "observing_tensors exits 0 (got $rc)" test "$rc" -eq 0
    else
        check "built without plots, observing_tensors exits 1 at the histogram saying what to install (got $rc)" \
            eval 'test "$rc" -eq 1 && has_line "$work/ot.err" "^plotting: plots need cairo: apt-get install libcairo2-dev"'
    fi
    out="$work/ot.out"
    check "prints the tensor name header" has_line "$out" '^Tensor names \([0-9]+\):$'
    for name in x labels loss fc1.weight fc3.bias 'fc1/MatMul:0' 'fc1/Add:0' 'Relu:0' 'LogSoftmax:0' \
        Accum___fc1.weight UpdatedVar___fc2.bias; do
        check "lists tensor $name" has_line "$out" "^  ${name//./\\.}\$"
    done
    for p in fc1 fc2 fc3; do
        for k in weight bias; do
            check "lists Gradient___$p.$k" has_line "$out" "^  Gradient___$p\\.$k\$"
            check "anchored Gradient___$p.$k with its shape" has_line "$out" "^  Gradient___$p\\.$k f32\\[[0-9,]+\\]\$"
        done
    done
    check "anchored Gradient___fc1.weight is f32[320,784]" has_line "$out" '^  Gradient___fc1\.weight f32\[320,784\]$'
    check "prints the loss of each of the 10 batches" test "$(grep -cE '^batch [0-9]+/10 loss [0-9.]+$' "$out")" -eq 10
    check "prints the epoch's mean loss" has_line "$out" '^epoch 1: mean loss [0-9.]+ over 10 batches$'
    png="$work/GradientHistogram.png"
    if $plots; then
        check "prints 'Saved histogram to ./GradientHistogram.png'" has_line "$out" '^Saved histogram to \./GradientHistogram\.png$'
        check "GradientHistogram.png written in the current directory" test -s "$png"
        check "GradientHistogram.png has the PNG signature" \
            test "$(head -c 8 "$png" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a"
    else
        check "built without plots, no GradientHistogram.png" test ! -e "$png"
    fi
fi

# ---- outfeed
of="$build/example_outfeed"
check "example_outfeed is built" test -x "$of"
if [ -x "$of" ]; then
    (cd "$work" && "$of" --data "$data" >of.out 2>of.err)
    rc=$?
    check "outfeed exits 0 (got $rc)" test "$rc" -eq 0
    out="$work/of.out"
    check "prints the stats table header" has_line "$out" '^Index +Name +Mean +Std +Minimum +Maximum +NaNs +infs$'
    check "prints stats table rows" has_line "$out" '^ +[0-9]+ +fc1\.weight_grad\[[0-9]+\] +[-0-9.e]+ +[-0-9.e]+ +[-0-9.e]+ +[-0-9.e]+ +0 +0$'
    for mode in pre-accumulated accumulated; do
        check "runs gradient capture $mode" has_line "$out" "^=== gradient capture: $mode "
        check "prints the gradient keys ($mode)" has_line "$out" "^Gradient keys \\($mode\\):\$"
    done
    check "activation keys with shapes" has_line "$out" '^  fc1/Relu f32\[32,256\]$'
    check "both modes list fc1.weight_grad f32[256,784]" test "$(grep -cE '^  fc1\.weight_grad f32\[256,784\]$' "$out")" -eq 2
    check "both modes list fc3.bias_grad f32[10]" test "$(grep -cE '^  fc3\.bias_grad f32\[10\]$' "$out")" -eq 2
    check "pre-accumulated: D*A=4 records per parameter per run (24)" \
        has_line "$out" '^\(3 activation records, 24 gradient records\)$'
    check "accumulated: D=2 records per parameter per run (12)" \
        has_line "$out" '^\(3 activation records, 12 gradient records\)$'
    check "mean loss per epoch" test "$(grep -cE '^epoch [12]: mean loss [0-9.]+$' "$out")" -eq 4
    check "no gradient record dropped" test "$(grep -cE '^gradients queue: [0-9]+ records enqueued, [0-9]+ dequeued, 0 dropped$' "$out")" -eq 2
    (cd "$work" && "$of" --accumulated >acc.out 2>&1)
    check "--accumulated runs that mode only" \
        bash -c "grep -q '^=== gradient capture: accumulated' '$work/acc.out' && ! grep -q 'pre-accumulated' '$work/acc.out'"
    (cd "$work" && "$of" --bogus >/dev/null 2>&1)
    check "an unknown flag is a usage error (exit 2)" test "$?" -eq 2
fi

# ---- the Python tutorial, from the scratch directory too (Debian's NumPy; the package of python/)
py="$src/examples/observing_tensors.py"
if [ -f "$build/libtensorscope.so" ] && /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
    . "$src/tests/support/sanitizer_preload.sh"
    sanitizer_preload "$build"
    (cd "$work" && rm -f GradientHistogram.png && PYTHONPATH="$src/python" TENSORSCOPE_LIBRARY="$build/libtensorscope.so" \
        LD_PRELOAD="$SANITIZER_PRELOAD" ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" /usr/bin/python3 "$py" >py.out 2>py.err)
    rc=$?
    if $plots; then
        check "observing_tensors.py exits 0 from another directory (got $rc)" test "$rc" -eq 0
        check "observing_tensors.py writes GradientHistogram.png there" test -s "$work/GradientHistogram.png"
    fi
    check "observing_tensors.py prints the loss of each of the 10 batches" test "$(grep -cE '^batch [0-9]+/10 loss [0-9.]+$' "$work/py.out")" -eq 10
fi

echo "test_examples: $checks checks, $failures failed: $([ "$failures" -eq 0 ] && echo PASS || echo FAIL)"
[ "$failures" -eq 0 ]
