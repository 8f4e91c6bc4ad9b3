#!/bin/bash
# test_cli_device.sh -- `tensorscope train --device` on the device path
# (cpu-staged: the CPU's kernels, its memory treated as a GPU's, so what the
# device path adds shows bit for bit): watches with histograms and range
# counts, outfeeds of activations and of gradients each micro-batch, a
# print op's lines, D = 2 and A = 2. The outfeed's .npy dumps, the stats
# table and the print lines (in their order) equal the CPU's; --log-memory
# logs a line each run;
# the steps are recorded and replayed (GraphCaptures, GraphReplays), none
# launched call by call for its observers (no StepsNotRecorded), and the
# summaries are taken on the device (SummaryTensors).
# Every check prints `ok ...` or `FAIL ...`; runs on MNIST's test set.
set -u

. "$(dirname "$0")/support/cli_checks.sh"
cli_paths

T=$(mktemp -d "${TMPDIR:-/tmp}/ts_device.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
A=(--data "$DATA" --quiet --batch-size 100 --max-steps 2 --repeat-count 2 --gradient-accumulation-count 2
    --watch 'Gradient___fc*' --watch-range --outfeed 'Relu:*' --outfeed fc3.weight_grad --outfeed-pre-accumulated-gradients
    --print-tensor 'fc3/Add:0' --stats --metrics)

run cpu "$BIN" train "${A[@]}" --device cpu --dump-npy D
mv D cpu_dump
run dev "$BIN" train "${A[@]}" --device cpu-staged --dump-npy D
check "train on cpu and on cpu-staged: exit 0 both" eval '[ $rc -eq 0 ] && grep -q "^outfeed: 24 records" cpu.out' || show dev.err
check "the outfeed's 24 records dumped the same (6 .npy files, byte for byte)" \
    eval '[ "$(ls D/outfeed | wc -l)" -eq 6 ] && diff -r cpu_dump D > /dev/null' || show dev.out
# what the run prints before the metrics report: the stats table of the
# watches and of the outfeed keys, the run's summary line aside
sed '/^Metric: /,$d; /samples\/s/d' cpu.out > cpu.table
sed '/^Metric: /,$d; /samples\/s/d' dev.out > dev.table
check "the stats table the same as the CPU's" eval 'diff cpu.table dev.table > /dev/null && grep -q "Gradient___fc1.weight" dev.table' || diff cpu.table dev.table | head
grep 'print\]' cpu.err > cpu.prints
grep 'print\]' dev.err > dev.prints
check "the print op's $(wc -l < cpu.prints) lines the same as the CPU's, in the same order" \
    eval '[ "$(wc -l < cpu.prints)" -ge 8 ] && diff cpu.prints dev.prints > /dev/null' || diff cpu.prints dev.prints | head
run mem "$BIN" train --data "$DATA" --quiet --batch-size 100 --max-steps 3 --device cpu-staged --log-memory
check "--log-memory on a device: a line each run, 'step N: memory: ...' for steps 1 to 3" \
    eval '[ $rc -eq 0 ] && [ "$(grep -c "^step [123]: memory: params" mem.err)" -eq 3 ]' || show mem.err
counter() { awk -v c="Counter: $2" '$0 == c { getline; print $2 }' "$1"; }
check "the steps recorded once a kind and replayed ($(counter dev.out GraphCaptures) recorded, $(counter dev.out GraphReplays) replayed)" \
    eval '[ "$(counter dev.out GraphCaptures)" -ge 1 ] && [ "$(counter dev.out GraphReplays)" -ge 2 ]' || show dev.out
check "no step launched call by call for its histograms, ranges, outfeeds or prints (no StepsNotRecorded)" eval '! grep -q "StepsNotRecorded" dev.out' ||
    grep -A1 StepsNotRecorded dev.out
check "the summaries taken on the device ($(counter dev.out SummaryTensors) tensors)" eval '[ "$(counter dev.out SummaryTensors)" -ge 4 ]' || show dev.out
finish
