#!/bin/bash
# test_cli_observe.sh -- what `tensorscope train` shows of the tensors a user
# asks for, where a user reads it: --print-tensor prints any tensor (an
# input, a layer's inner output, an activation, a parameter) on lines tagged
# as prints, not as errors; a numeric check's report reaches the terminal
# once; --outfeed-mode last dumps only each run's latest record per key.
# Every check prints `ok ...` or `FAIL ...`; runs on MNIST's test set.
set -u

. "$(dirname "$0")/support/cli_checks.sh"
cli_paths

T=$(mktemp -d "${TMPDIR:-/tmp}/ts_observe.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
T_ARGS=(--data "$DATA" --quiet --batch-size 1000)

# ---- --print-tensor on an input and on a layer's inner output (not wrapped by a layer)
run pt "$BIN" train "${T_ARGS[@]}" --max-steps 2 --print-tensor x --print-tensor 'fc1/MatMul:0' --print-tensor 'Relu:0'
check "--print-tensor x: the input printed each micro-batch (2 lines of f32[1000,1,28,28])" \
    eval '[ $rc -eq 0 ] && [ "$(grep -c "^\[tensorscope print\] x: f32\[1000,1,28,28\] \[\[\[\[" pt.err)" -eq 2 ]' || show pt.err
check "--print-tensor fc1/MatMul:0: the matmul's output printed each micro-batch (2 lines of f32[1000,320])" \
    eval '[ "$(grep -c "^\[tensorscope print\] fc1/MatMul:0: f32\[1000,320\] \[\[" pt.err)" -eq 2 ]' || show pt.err
check "--print-tensor Relu:0: the activation and its gradient printed" \
    eval 'hasf pt.err "[tensorscope print] Relu:0: f32[1000,320]" && hasf pt.err "[tensorscope print] Relu:0_gradient: f32[1000,320]"' || show pt.err
check "print lines are not tagged as errors" eval '! grep -q "^\[tensorscope E\]" pt.err' || show pt.err
check "the print ops --print-tensor adds beside a tensor raise no lint warning" eval '! grep -q "lint: the print op" pt.err' || show pt.err
# the printed input is the data: an image's corner is black, (0/255 - 0.5)/0.5 after the loader's normalisation
check "the printed x is the data (-1.0000 at the first image's corner)" \
    has pt.err '^\[tensorscope print\] x: f32\[1000,1,28,28\] \[\[\[\[-1\.0000, '

# ---- a numeric check's report once: the report, the re-execution's confirmation, nothing repeated
run nc "$BIN" train "${T_ARGS[@]}" --batch-size 64 --lr 1e5 --check-numerics output
check "--check-numerics output: exit 1, one report (one [tensorscope E] line)" \
    eval '[ $rc -eq 1 ] && [ "$(grep -c "^\[tensorscope E\]" nc.err)" -eq 1 ]' || show nc.err 20
check "the report names the culprit once, confirmed by the op-by-op re-execution" \
    eval '[ "$(grep -c "confirms the culprit" nc.err)" -eq 1 ] && [ "$(grep -c "first non-finite value in '"'fc3/MatMul:0'"'" nc.err)" -eq 1 ]' || show nc.err 20
check "the CLI points at the report instead of repeating it" \
    eval '[ "$(grep -c "numeric check:" nc.err)" -le 2 ] && hasf nc.err "training stopped by the numeric check (report above)"' || show nc.err 20

# ---- --outfeed-mode last: each run's file holds the run's latest record only
run ol "$BIN" train "${T_ARGS[@]}" --max-steps 2 --repeat-count 2 --outfeed 'Relu:0' --outfeed-mode last --anchor Relu:0:final --dump-npy OL
/usr/bin/python3 - > ol.py.out 2>&1 << 'PY'
import glob
import numpy as np
files = sorted(glob.glob("OL/outfeed/Relu_0.run*.npy"))
assert len(files) == 2, files
for f in files:
    a = np.load(f)
    assert a.shape == (1, 1000, 320), (f, a.shape)
final = np.load("OL/Relu_0.npy")
assert np.array_equal(np.load(files[-1])[0], final), "the last run's record is not the anchored final Relu:0"
print("ok")
PY
check "--outfeed-mode last --dump-npy: one [1,1000,320] file per run, the last run's equal to the anchored final Relu:0" \
    eval '[ $rc -eq 0 ] && grep -qx ok ol.py.out' || show ol.py.out 12

finish
