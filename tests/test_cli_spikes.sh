#!/bin/bash
# test_cli_spikes.sh -- `tensorscope train --detect-spikes` on the MLP and
# MNIST's test set (docs/observation.md#spikes):
# - a clean run of 300 steps reports no spike;
# - a learning-rate jump planted at step 151 (--lr-schedule step x100) is
#   found at step 151 or 152 and named: the first signal to cross in the
#   step's order is fc1's (every layer's rate jumped; fc1 is first);
#   --on-spike stop ends training there (exit 1) with the line that names it;
# - --on-spike skip trains on to the end, saying each spike's update was
#   skipped; continue (the default) trains on too;
# - --on-spike npz:FILE writes the step's tensors (an .npz archive) and stops;
# - --on-spike inspect without a terminal says so and trains on;
# - bad flags are usage errors (exit 2) that say what to give.
# Every check prints `ok ...` or `FAIL ...`.
set -u

. "$(dirname "$0")/support/cli_checks.sh"
cli_paths

T=$(mktemp -d "${TMPDIR:-/tmp}/ts_spikes.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
T_ARGS=(--data "$DATA" --threads 1)
JUMP=(--steps 200 --lr-schedule step --lr-step-size 150 --lr-gamma 100)

run clean "$BIN" train "${T_ARGS[@]}" --steps 300 --detect-spikes
check "a clean run of 300 steps: exit 0, no spike" eval '[ $rc -eq 0 ] && ! grep -q "spike at step" clean.err' || show clean.err

run stop "$BIN" train "${T_ARGS[@]}" "${JUMP[@]}" --detect-spikes --on-spike stop
check "a learning-rate jump at step 151, --on-spike stop: exit 1, training stopped by the spike detector" \
    eval '[ $rc -eq 1 ] && hasf stop.err "training stopped by the spike detector: spike at step"' || show stop.err
check "found within two steps (at step 151 or 152), named: the first mover is in layer fc1, with its z-score" \
    has stop.err "spike at step 15[12]: [a-z_]+ of '[^']*fc1[^']*' \(layer fc1\) is [0-9.e+-]+, z [0-9.e+]+ " || show stop.err
check "no spike before the jump" eval '! grep -q "spike at step \([0-9]\|[0-9][0-9]\|1[0-4][0-9]\|150\):" stop.err' || show stop.err

run skip "$BIN" train "${T_ARGS[@]}" "${JUMP[@]}" --detect-spikes=12 --spike-window 32 --on-spike skip
check "--on-spike skip: trains on to the end (200 steps), each spike's update skipped" \
    eval '[ $rc -eq 0 ] && hasf skip.out "trained 200 runs (200 steps" && has skip.err "spike at step 15[12]: .*the step.s update is skipped"' \
    || show skip.err

run cont "$BIN" train "${T_ARGS[@]}" "${JUMP[@]}" --detect-spikes
check "--on-spike continue (the default): trains on, the spike logged" \
    eval '[ $rc -eq 0 ] && has cont.err "spike at step 15[12]: .*training goes on"' || show cont.err

if needs npz "--on-spike npz:FILE"; then
    run npz "$BIN" train "${T_ARGS[@]}" "${JUMP[@]}" --detect-spikes --on-spike npz:spike.npz
    check "--on-spike npz:FILE: the step's tensors written as an .npz archive, training stopped (exit 1)" \
        eval '[ $rc -eq 1 ] && [ "$(head -c 2 spike.npz)" = PK ] && has npz.err "tensors go to spike.npz \([0-9]+ tensors\)"' || show npz.err
fi

run insp "$BIN" train "${T_ARGS[@]}" "${JUMP[@]}" --detect-spikes --on-spike inspect < /dev/null
check "--on-spike inspect without a terminal: says so, trains on" \
    eval '[ $rc -eq 0 ] && hasf insp.err "--on-spike inspect: stdin is not a terminal; going on"' || show insp.err

run u1 "$BIN" train "${T_ARGS[@]}" --on-spike stop
check "--on-spike without --detect-spikes: usage error" eval '[ $rc -eq 2 ] && hasf u1.err "add --detect-spikes"' || show u1.err
run u2 "$BIN" train "${T_ARGS[@]}" --detect-spikes --on-spike halt
check "--on-spike halt: usage error listing the actions" \
    eval '[ $rc -eq 2 ] && hasf u2.err "continue, skip, stop, npz:FILE or inspect"' || show u2.err
run u3 "$BIN" train "${T_ARGS[@]}" --detect-spikes=0
check "--detect-spikes=0: usage error (K > 0)" eval '[ $rc -eq 2 ] && hasf u3.err "give a number > 0"' || show u3.err
run u4 "$BIN" train "${T_ARGS[@]}" --detect-spikes --on-spike npz:
check "--on-spike npz: without a file: usage error" eval '[ $rc -eq 2 ] && hasf u4.err "npz:FILE"' || show u4.err
run u5 "$BIN" train "${T_ARGS[@]}" --detect-spikes --spike-window 1
check "--spike-window 1: usage error" eval '[ $rc -eq 2 ] && hasf u5.err ">= 2 steps"' || show u5.err

finish
