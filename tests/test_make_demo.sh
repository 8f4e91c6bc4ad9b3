#!/bin/bash
# test_make_demo.sh -- the README's first command, `make demo`, as a user
# sees it: it builds only the CLI it runs (into the build directory under
# test, DEMO_BUILD; up to date here, so nothing is compiled) with the
# compiler's lines kept in a log, then prints the training: three epoch
# lines, the stats tables, the final result and the saved histogram, and no
# line of make's or CMake's progress.
# needs: plots
set -u
. "$(dirname "$0")/support/cli_checks.sh"
cli_paths

T=$(mktemp -d "${TMPDIR:-/tmp}/ts_demo.XXXXXX")
trap 'rm -rf "$T"' EXIT
rm -f "$BUILD/GradientHistogram.png"
make --no-print-directory -C "$SRC" demo DEMO_BUILD="$BUILD" > "$T/demo.out" 2>&1
rc=$?
check "make demo exits 0 (got $rc)" test $rc -eq 0 || show "$T/demo.out" 20
check "prints the three epochs" test "$(grep -cE '^epoch [123]/3: loss [0-9.]+ +held-out accuracy [0-9.]+%' "$T/demo.out")" -eq 3 || show "$T/demo.out" 20
check "prints the stats table each epoch" test "$(grep -cE '^Step [0-9]+ - Summary Stats$' "$T/demo.out")" -eq 3
check "prints the final result" has "$T/demo.out" '^trained 375 runs \(375 steps, 24000 samples\) in [0-9.]+ s: loss [0-9.]+ +held-out accuracy [0-9.]+%'
check "saves the gradient histogram into the build directory" eval 'hasf "$T/demo.out" "Saved histogram to $BUILD/GradientHistogram.png" && [ -s "$BUILD/GradientHistogram.png" ]'
check "no build progress on the terminal (it is in the log)" \
    eval '! grep -qE "^\[ *[0-9]+%\]|Built target|Building C|Linking C|^-- |^make(\[[0-9]+\])?:" "$T/demo.out"' || show "$T/demo.out" 20
check "says where the build log is" eval 'hasf "$T/demo.out" "log: $BUILD/demo-build.log" && [ -s "$BUILD/demo-build.log" ]'
finish
