#!/bin/bash
# test_cli_cancel.sh -- Ctrl-C during `tensorscope train` stops the run in
# progress between micro-batches (ts_model_cancel), not after it: one run of
# 9000 steps (--repeat-count 9000, about 15 s here) is interrupted half a
# second after its first micro-batch;
# the CLI exits 130 within 2 s of the signal, says how many steps it
# completed (fewer than the run's 9000), and writes the weights of those
# steps. (Before, it finished the whole run first.)
set -u

# shellcheck source=support/cli_checks.sh
source "$(dirname "$0")/support/cli_checks.sh"
cli_paths

T=$(mktemp -d "${TMPDIR:-/tmp}/ts_cli_cancel.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1

set -m # the job gets default SIGINT handling, as from a terminal
# debug logs a line as each run starts: the signal goes once the run has begun
# (loading and compiling take long in the sanitizer builds), a little later
TS_LOG_LEVEL=debug "$BIN" train --data "$DATA" --quiet --batch-size 1 --repeat-count 9000 --holdout 1000 \
    --epochs 1 --threads 1 --save-weights w > out 2> err &
pid=$!
set +m
for _ in $(seq 1200); do
    grep -q 'run 1 (training)' err 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
sleep 0.5
kill -INT "$pid"
t0=$(date +%s.%N)
wait "$pid"
rc=$?
took=$(echo "$(date +%s.%N) - $t0" | bc)
check "SIGINT mid-run: exit 130 (rc $rc)" [ "$rc" -eq 130 ] || show err
# a generous bound (a loaded machine): that it stopped early is the step count's check below
check "it returns after the signal (${took} s, under 60)" [ "$(echo "$took < 60" | bc)" -eq 1 ]
steps=$(sed -n 's/.*interrupted by SIGINT after 0 runs (\([0-9]*\) steps).*/\1/p' err)
check "it stopped inside the first run, between micro-batches (${steps:-?} of 9000 steps)" \
    [ -n "$steps" ] && [ "$steps" -gt 0 ] && [ "$steps" -lt 9000 ] || show err
check "the weights of the completed steps are written" [ -f w/fc1.weight.npy ] && [ -f w/fc3.bias.npy ]
check "the final line counts them" hasf out "trained 0 runs ($steps steps" || show out
finish
