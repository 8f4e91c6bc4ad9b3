#!/bin/bash
# test_cli_ux.sh -- the everyday edges of the command-line tool: no flag is a
# silent no-op (patterns that match nothing, --histogram without gradients,
# eval's own flags), one name-matching rule for every tensor pattern,
# learning-rate schedules, checkpoint and resume. Every check prints `ok ...`
# or `FAIL ...`; the script exits non-zero if any failed. Runs on MNIST's
# test set (data/mnist) with large batches to stay fast.
set -u

. "$(dirname "$0")/support/cli_checks.sh"
cli_paths

T=$(mktemp -d "${TMPDIR:-/tmp}/ts_ux.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
T_ARGS=(--data "$DATA" --quiet --batch-size 1000)

# ---- one name-matching rule; a pattern that matches nothing is a usage error
run pt_none "$BIN" train "${T_ARGS[@]}" --max-steps 1 --print-tensor fc1/Add
check "--print-tensor fc1/Add (no such name): exit 2, says names match exactly, closest 'fc1/Add:0'" \
    eval '[ $rc -eq 2 ] && hasf pt_none.err "matches no tensor" && hasf pt_none.err "'"'fc1/Add:0'"'" && ! [ -s pt_none.out ]' || show pt_none.err
run pt_param "$BIN" train "${T_ARGS[@]}" --max-steps 1 --print-tensor fc3.bias
check "--print-tensor fc3.bias: the parameter's 10 values printed" \
    eval '[ $rc -eq 0 ] && has pt_param.err "fc3.bias: f32\[10\] \[[-0-9.]+(, [-0-9.]+){9}\]"' || show pt_param.err
run pt_glob "$BIN" train "${T_ARGS[@]}" --max-steps 1 --print-tensor 'Relu:*'
check "--print-tensor 'Relu:*' (glob): Relu:0 and Relu:1 printed" \
    eval '[ $rc -eq 0 ] && hasf pt_glob.err "Relu:0: f32[1000,320]" && hasf pt_glob.err "Relu:1: f32[1000,100]"' || show pt_glob.err
run w_sub "$BIN" train "${T_ARGS[@]}" --max-steps 1 --watch fc1
check "--watch fc1 (a prefix, not a name): exit 2" eval '[ $rc -eq 2 ] && hasf w_sub.err "--watch matches no tensor: watch '"'fc1'"'"' || show w_sub.err
run of_sub "$BIN" train "${T_ARGS[@]}" --max-steps 1 --outfeed Relu
check "--outfeed Relu (a prefix, not a name): exit 2" eval '[ $rc -eq 2 ] && hasf of_sub.err "--outfeed"' || show of_sub.err

# ---- --anchor NAME[:MODE[:N]] with names that hold ':' (Relu:0,
# Flatten:0@bf16) and globs that do (Relu:*): split at the last ':' only
# before a mode. NumPy checks what each anchor holds.
run an_colon "$BIN" train "${T_ARGS[@]}" --max-steps 1 --precision bf16 --anchor 'Relu:0:every_n:1' --anchor 'Relu:*' \
    --anchor 'Flatten:0@bf16' --anchor 'Gradient___Relu:1:sum' --dump-npy AC
/usr/bin/python3 - > an_colon.py.out 2>&1 <<'PY'
import numpy as np
r0, r1, f, g = (np.load(f"AC/{k}.npy") for k in ("Relu_0", "Relu_1", "Flatten_0@bf16", "Gradient___Relu_1"))
assert r0.shape == (1, 1000, 320) and r1.shape == (1000, 100), (r0.shape, r1.shape)  # every_n keeps the run's axis
assert (r0 >= 0).all() and (r1 >= 0).all() and r0.max() > 0, "a Relu's output is >= 0"
assert f.shape == (1000, 784), f.shape
assert not (f.view(np.uint32) & 0xFFFF).any(), "Flatten:0@bf16 holds bf16 values (the low 16 bits of each float zero)"
assert g.shape == (1000, 100) and np.abs(g).max() > 0, g.shape
names = [l.split("\t")[1] for l in open("AC/order.txt").read().splitlines()]
assert names == ["Relu:0", "Relu:0@bf16", "Relu:1", "Relu:1@bf16", "Flatten:0@bf16", "Gradient___Relu:1", "loss"], names
PY
check "--anchor 'Relu:0:every_n:1' 'Relu:*' 'Flatten:0@bf16' 'Gradient___Relu:1:sum': every match anchored, the bf16 copy in bf16, NumPy reads them" \
    eval '[ $rc -eq 0 ] && [ -s AC/Relu_0.npy ] && ! [ -s an_colon.py.out ]' || { show an_colon.err; show an_colon.py.out; }
run an_typo "$BIN" train "${T_ARGS[@]}" --max-steps 1 --anchor 'Relu:0:fnal'
check "--anchor Relu:0:fnal: exit 2, 'fnal' is not an output mode" \
    eval '[ $rc -eq 2 ] && hasf an_typo.err "'"'fnal' is not an output mode"'" && ! hasf an_typo.out trained' || show an_typo.err

# ---- a name that differs from ours only by a module prefix (PopTorch's
# Gradient___model.fc2.bias) resolves, with one log line saying which
# tensor; one that several names end in is a usage error listing them
run pre_full "$BIN" train "${T_ARGS[@]}" --max-steps 1 --anchor Gradient___fc2.bias --dump-npy PF
run pre "$BIN" train --data "$DATA" --batch-size 1000 --max-steps 1 --anchor Gradient___model.fc2.bias --watch model.fc1.weight \
    --stats-every 1 --dump-npy PP
check "--anchor Gradient___model.fc2.bias --watch model.fc1.weight: one log line each naming the tensor matched, the same array as --anchor Gradient___fc2.bias" \
    eval '[ $rc -eq 0 ] && [ "$(grep -c "differ only by a module prefix" pre.err)" -eq 2 ] &&
          hasf pre.err "anchor: '"'Gradient___model.fc2.bias' matched tensor 'Gradient___fc2.bias'"'" &&
          hasf pre.err "watch: '"'model.fc1.weight' matched tensor 'fc1.weight'"'" && has pre.out "^ +0  fc1.weight " &&
          cmp -s PF/Gradient___fc2.bias.npy PP/Gradient___model.fc2.bias.npy' || { show pre.err; ls PP; }
run pre_amb "$BIN" train "${T_ARGS[@]}" --max-steps 1 --anchor bias
check "--anchor bias: exit 2, the three tensors it could be listed" \
    eval '[ $rc -eq 2 ] && hasf pre_amb.err "'"'fc1.bias', 'fc2.bias', 'fc3.bias'"'" && ! hasf pre_amb.out trained' || show pre_amb.err

# ---- the samples left after an epoch's last whole run: kept (PyTorch's
# drop_last=False) as a smaller last run that recompiles the model once a run
# (counted, with its cause), or dropped with --drop-last; a log line either way
run dl_keep "$BIN" train --data "$DATA" --batch-size 3000 --holdout 2000 --epochs 1 --metrics
check "8000 samples in batches of 3000: 3 runs, 8000 samples, the last of 2000 said and recompiled (Recompilations.InputShapeChanged)" \
    eval '[ $rc -eq 0 ] && has dl_keep.out "^trained 3 runs \(3 steps, 8000 samples\)" &&
          hasf dl_keep.err "data: 8000 training samples make 2 runs of 3000 and leave 2000: kept as a last run of 2000" &&
          hasf dl_keep.err "recompiling the training model: input '"'x'"' changed from [3000,1,28,28] to [2000,1,28,28]" &&
          grep -A1 "^Counter: Recompilations.InputShapeChanged" dl_keep.out | grep -Eq "Value: [1-9]"' || { show dl_keep.err; show dl_keep.out; }
# three epochs: the last run's size compiles the model once for the whole run; the later
# epochs switch between the two kept programs (counted, logged at debug level). The held-out
# set is one batch of 3500, so the evaluation model compiles once and recompiles nothing.
TS_LOG_LEVEL=debug run dl_epochs "$BIN" train --data "$DATA" --batch-size 3500 --holdout 3500 --epochs 3 --metrics
check "3 epochs of 3500 + 3000: one recompilation for the run (was 5: to 3000 and back each epoch), 4 switches between the kept programs" \
    eval '[ $rc -eq 0 ] && has dl_epochs.out "^trained 6 runs \(6 steps, 19500 samples\)" &&
          [ "$(grep -A1 "^Counter: Recompilations.InputShapeChanged" dl_epochs.out | sed -n "s/ *Value: //p")" = 1 ] &&
          [ "$(grep -A1 "^Counter: ProgramSwitches.InputShapeChanged" dl_epochs.out | sed -n "s/ *Value: //p")" = 4 ] &&
          [ "$(grep -c "recompiling the training model" dl_epochs.err)" -eq 1 ] &&
          [ "$(grep -c "switching the training model to its program compiled before" dl_epochs.err)" -eq 4 ]' || { show dl_epochs.err; show dl_epochs.out; }
run dl_drop "$BIN" train --data "$DATA" --batch-size 3000 --holdout 2000 --epochs 1 --drop-last
check "--drop-last: 2 runs, 6000 samples, the 2000 left said dropped, no training recompilation" \
    eval '[ $rc -eq 0 ] && has dl_drop.out "^trained 2 runs \(2 steps, 6000 samples\)" &&
          hasf dl_drop.err "leave 2000: dropped (--drop-last)" && ! hasf dl_drop.err "recompiling the training model"' || show dl_drop.err
run dl_group "$BIN" train --data "$DATA" --batch-size 1000 --holdout 2000 --epochs 1 --repeat-count 3 --quiet
check "--repeat-count 3, batches of 1000: 2 runs of 3000, then 1998 of the 2000 left as 3 micro-batches of 666" \
    eval '[ $rc -eq 0 ] && has dl_group.out "^trained 3 runs \(9 steps, 7998 samples\)"' || { show dl_group.err; show dl_group.out; }
run dl_gpt "$BIN" train --model gpt --steps 1 --drop-last
check "--drop-last with a corpus: exit 2, says why" eval '[ $rc -eq 2 ] && hasf dl_gpt.err "--drop-last is for a dataset"' || show dl_gpt.err

# ---- --log-layer-shapes: each run's layer output shapes, as `tensorscope
# graph` compiles them at that batch size, and what a recompilation changed
run ls_run "$BIN" train --data "$DATA" --batch-size 3000 --holdout 2000 --epochs 1 --log-layer-shapes
run ls_g3 "$BIN" graph --batch-size 3000
run ls_g2 "$BIN" graph --batch-size 2000
/usr/bin/python3 - > ls.py.out 2>&1 <<'PY'
import re
def graph(path):  # name -> "f32[...]" of `tensorscope graph`
    return dict(re.findall(r"^%(\S+) = \w+\(.*\) : (\w+\[[\d,]*\])", open(path).read(), re.M))
g3, g2 = graph("ls_g3.out"), graph("ls_g2.out")
err = open("ls_run.err").read()
steps = re.findall(r"^\[tensorscope I\] step (\d+): layer output shapes: (.*)$", err, re.M)
assert [int(s) for s, _ in steps] == [1, 2, 3], steps
for (step, text), want in zip(steps, (g3, g3, g2)):
    got = dict(item.rsplit(" ", 1) for item in text.split(", "))
    assert len(got) >= 7 and all(want[k] == v for k, v in got.items()), (step, got)
changed = re.findall(r"^\[tensorscope I\] recompiled \(InputShapeChanged\): layer output shapes changed: (.*)$", err, re.M)
assert len(changed) == 1, changed
pairs = dict((n, (a, b)) for n, a, b in re.findall(r"(\S+) (\w+\[[\d,]*\]) -> (\w+\[[\d,]*\])", changed[0]))
names = {n for n in dict(item.rsplit(" ", 1) for item in steps[0][1].split(", ")) if g3[n] != g2[n]}
assert set(pairs) == names and all(pairs[n] == (g3[n], g2[n]) for n in names), (pairs, names)
PY
check "--log-layer-shapes: steps 1-3 give each layer's shape as 'graph --batch-size 3000/2000' compiles it, and the recompilation the ones that changed" \
    eval '[ $rc -eq 0 ] && ! [ -s ls.py.out ]' || { show ls.py.out; show ls_run.err; }

# ---- --on-start CMD: once, after compile and before the first step, the
# model's names in $TS_TENSOR_NAMES (as `tensorscope names` lists them); a
# non-zero exit stops training before any step, with the command's message
run os_names "$BIN" names
run os_ok "$BIN" train "${T_ARGS[@]}" --max-steps 3 --on-start 'cp "$TS_TENSOR_NAMES" hook_names.txt; echo called >> hook_calls.txt'
check "--on-start: called once for 3 runs, \$TS_TENSOR_NAMES lists what 'tensorscope names' lists, training goes on" \
    eval '[ $rc -eq 0 ] && [ "$(grep -c called hook_calls.txt)" -eq 1 ] && cmp -s hook_names.txt os_names.out && has os_ok.out "^trained 3 runs"' ||
    { show os_ok.err; show hook_calls.txt; }
run os_fail "$BIN" train "${T_ARGS[@]}" --max-steps 3 --save-weights OSW --on-start 'echo "fc1.weight looks wrong" >&2; exit 3'
check "--on-start exiting 3: exit 1, its message and the status said, no step trained" \
    eval '[ $rc -eq 1 ] && hasf os_fail.err "fc1.weight looks wrong" && hasf os_fail.err "exited with status 3" &&
          hasf os_fail.err "training did not start" && ! hasf os_fail.out trained' || { show os_fail.err; show os_fail.out; }

# ---- --histogram needs anchored gradients: a usage error before training
if needs plots "--histogram without gradients"; then
    run hist "$BIN" train "${T_ARGS[@]}" --max-steps 1 --anchor Relu:0 --histogram h.png
    check "--histogram with only --anchor Relu:0: exit 2 before training, no PNG" \
        eval '[ $rc -eq 2 ] && hasf hist.err "--histogram" && ! hasf hist.out "trained" && ! [ -e h.png ]' || show hist.err
fi

# ---- environment values parsed strictly
run lvl env TS_LOG_LEVEL=loud "$BIN" train "${T_ARGS[@]}" --max-steps 1
check "TS_LOG_LEVEL=loud: warned about on stderr, training goes on" \
    eval '[ $rc -eq 0 ] && hasf lvl.err "TS_LOG_LEVEL='"'loud'"' is not a level"' || show lvl.err
run lvln env TS_LOG_LEVEL=trace "$BIN" train "${T_ARGS[@]}" --max-steps 2
check "TS_LOG_LEVEL=trace: the per-step lines of level 5" eval '[ $rc -eq 0 ] && [ "$(grep -c "step [0-9]* loss" lvln.err)" -ge 2 ]' || show lvln.err

# ---- eval: its own --help, training flags refused, untrained weights warned about
run ehelp "$BIN" eval --help
missing="" extra=""
for f in --model --data --batch-size --seed --holdout --all --threads --weights --quiet --help; do
    has ehelp.out "^  $f( |\$)" || missing="$missing $f"
done
for f in --epochs --lr --tensorboard --plot --stats --anchor --watch --histogram; do has ehelp.out "^  $f( |\$)" && extra="$extra $f"; done
check "eval --help: eval's flags${missing:+ (missing:$missing)}, no training flag${extra:+ (has:$extra)}" \
    eval '[ $rc -eq 0 ] && has ehelp.out "^usage: tensorscope eval" && [ -z "$missing$extra" ]'
run etrain "$BIN" eval --data "$DATA" --tensorboard D --plot e.png --stats
check "eval --tensorboard D --plot e.png --stats: exit 2 naming --tensorboard, nothing written" \
    eval '[ $rc -eq 2 ] && hasf etrain.err "--tensorboard is a training flag" && [ ! -e D ] && [ ! -e e.png ]' || show etrain.err
run eeq "$BIN" eval --data "$DATA" --epochs=3
check "eval --epochs=3: exit 2" eval '[ $rc -eq 2 ] && hasf eeq.err "--epochs is a training flag"' || show eeq.err
run erand "$BIN" eval --data "$DATA" --batch-size 500 --holdout 1000
check "eval without --weights: a warning that the weights are untrained, then the result" \
    eval '[ $rc -eq 0 ] && hasf erand.err "untrained random initialisation" && has erand.out "^eval: 1000 images"' || show erand.err
run tall "$BIN" train "${T_ARGS[@]}" --all
check "train --all (an eval flag): exit 2" eval '[ $rc -eq 2 ] && hasf tall.err "--all is an eval flag"'

# ---- learning-rate schedules: the rate of every step in the level-5 trace
run sched env TS_LOG_LEVEL=5 "$BIN" train "${T_ARGS[@]}" --max-steps 6 --lr 0.01 --lr-schedule step --lr-step-size 2 --lr-gamma 0.5 --warmup-steps 2
lrs=$(sed -n 's/.* step [0-9]* loss [^ ]* lr \([^ ]*\) .*/\1/p' sched.err | awk '{printf "%s%.6g", (NR > 1 ? " " : ""), $1}')
# warmup: 0.01*1/2, 0.01*2/2; then StepLR(2, 0.5) from 0.01 counted from the end of the warmup
check "--lr-schedule step --lr-step-size 2 --lr-gamma 0.5 --warmup-steps 2: rates '$lrs'" \
    eval '[ $rc -eq 0 ] && [ "$lrs" = "0.005 0.01 0.01 0.01 0.005 0.005" ] && has sched.out "lr 0.005$"' || show sched.err
run cos env TS_LOG_LEVEL=5 "$BIN" train "${T_ARGS[@]}" --max-steps 4 --lr 0.01 --lr-schedule cosine --lr-min 0.001
lrs=$(sed -n 's/.* step [0-9]* loss [^ ]* lr \([^ ]*\) .*/\1/p' cos.err | awk '{printf "%s%.5g", (NR > 1 ? " " : ""), $1}')
# the plan is one epoch of 8 runs (--max-steps only stops early):
# CosineAnnealingLR(T_max=8, eta_min=0.001): 0.001 + 0.009 (1 + cos(pi t/8))/2
want=$(awk 'BEGIN { for (t = 0; t < 4; t++) printf "%s%.5g", t ? " " : "", 0.001 + 0.009 * (1 + cos(3.141592653589793 * t / 8)) / 2 }')
check "--lr-schedule cosine over the epoch's 8 steps, stopped after 4: rates '$lrs' (want '$want')" eval '[ $rc -eq 0 ] && [ "$lrs" = "$want" ]' || show cos.err
run badsched "$BIN" train "${T_ARGS[@]}" --lr-schedule linear
check "--lr-schedule linear: exit 2" eval '[ $rc -eq 2 ] && hasf badsched.err "--lr-schedule must be constant, step or cosine"'

# ---- checkpoint and resume: stopped at step 11 of 24 and resumed, the weights
# equal those of the run never stopped, byte for byte (two epochs, momentum,
# cosine schedule)
C_ARGS=(--data "$DATA" --quiet --batch-size 500 --holdout 4000 --epochs 2 --momentum 0.9 --lr 0.05 --lr-schedule cosine --warmup-steps 3)
run straight "$BIN" train "${C_ARGS[@]}" --save-weights W1
run part1 "$BIN" train "${C_ARGS[@]}" --max-steps 11 --checkpoint-dir C --checkpoint-every 4
run part2 "$BIN" train "${C_ARGS[@]}" --resume C --save-weights W2
same=0
for f in W1/*.npy; do cmp -s "$f" "W2/${f#W1/}" && same=$((same + 1)); done
check "--checkpoint-dir C --checkpoint-every 4 --max-steps 11, then --resume C: $same of 6 parameters equal the straight run's, byte for byte" \
    eval '[ $same -eq 6 ] && hasf part1.out "checkpoint at step 11 in C/checkpoint.tsck" && hasf part2.out "trained 24 runs"' || show part2.err
run badresume "$BIN" train "${C_ARGS[@]}" --lr 0.1 --resume C
check "--resume with another --lr: exit 1, the schedule named" eval '[ $rc -eq 1 ] && hasf badresume.err "schedule"' || show badresume.err
run noresume "$BIN" train "${C_ARGS[@]}" --resume nowhere
check "--resume nowhere: exit 1 naming nowhere/checkpoint.tsck" eval '[ $rc -eq 1 ] && hasf noresume.err "nowhere/checkpoint.tsck"'
run everyonly "$BIN" train "${C_ARGS[@]}" --checkpoint-every 3
check "--checkpoint-every without --checkpoint-dir: exit 2" eval '[ $rc -eq 2 ] && hasf everyonly.err "--checkpoint-dir"'

# ---- plots: x in optimizer steps, loss and accuracy panels; the histogram
# is captioned (its pixels are checked in test_plot)
if needs plots "--plot and --histogram"; then
    run plot "$BIN" train "${T_ARGS[@]}" --epochs 1 --repeat-count 2 --plot P.png --histogram H.png
    check "--plot and --histogram with one epoch of D=2: both PNGs written" \
        eval '[ $rc -eq 0 ] && hasf plot.out "Saved plot to P.png" && hasf plot.out "Saved histogram to H.png" && [ -s P.png ] && [ -s H.png ]' || show plot.err
fi

# ---- TS_SAVE_GRAPH_FILE appends every compile: the debug bundle of a train
# run holds the evaluation graph and the training graph
if needs debug-bundle "debug-run's graph.txt"; then
    run dbg env TMPDIR="$T" "$BIN" debug-run --outfile B.tar.gz -- "$BIN" train "${T_ARGS[@]}" --max-steps 1
    mkdir -p bundle && tar xzf B.tar.gz -C bundle 2> /dev/null
    g=bundle/tensorscope-debug/graph.txt
    check "debug-run -- train: graph.txt holds $(grep -c '^# ---- compile' "$g" 2> /dev/null) compiles, the inference and the training graph" \
        eval '[ $rc -eq 0 ] && grep -q "^# ---- compile [0-9]*: inference model" "$g" && grep -q "^# ---- compile [0-9]*: training model" "$g"' || show "$g"
fi

# ---- a recompilation says which input changed, from what to what: 1000
# held-out images in batches of 300 end with a batch of 100
run recomp "$BIN" train --data "$DATA" --batch-size 300 --holdout 1000 --max-steps 1
check "recompilation logged with the input and both shapes" \
    eval '[ $rc -eq 0 ] && hasf recomp.err "recompiling the inference model: input '"'x'"' changed from [300,1,28,28] to [100,1,28,28]"' || show recomp.err

# ---- outfeed: one stacked [S, *T] array per key per run, read by NumPy; the
# last sample of run 1 equals the anchored Relu:0 (final) of that run. With
# --stats-every 1 a "Step N - Summary Stats" table after each run has a row
# per key over that run's records, KEY f32[S,*T], whose numbers are NumPy's
# over the stacked array
run ofs "$BIN" train "${T_ARGS[@]}" --max-steps 2 --repeat-count 2 --gradient-accumulation-count 2 \
    --outfeed 'Relu:0' --outfeed 'fc3.weight_grad' --anchor Relu:0:final --dump-npy OF --stats-every 1
/usr/bin/python3 - > ofs.py.out 2>&1 <<'PY'
import re
import numpy as np
r = [np.load(f"OF/outfeed/Relu_0.run{i}.npy") for i in (0, 1)]
g = [np.load(f"OF/outfeed/fc3.weight_grad.run{i}.npy") for i in (0, 1)]
a = np.load("OF/Relu_0.npy")
assert all(x.shape == (4, 1000, 320) for x in r), [x.shape for x in r]  # D x A micro-batches
assert all(x.shape == (2, 10, 100) for x in g), [x.shape for x in g]    # D steps (accumulated)
assert np.array_equal(r[1][-1], a), "last stacked sample != anchored Relu:0"
assert not np.array_equal(r[0][0], r[0][1]), "samples of a run differ"
out = open("ofs.out").read()
tables = re.split(r"^Step (\d+) - Summary Stats$", out, flags=re.M)
steps = [int(x) for x in tables[1::2]]
assert steps == [2, 4], steps  # after each run of D = 2 steps
def row(table, key):
    m = re.search(r"^ +\d+  " + re.escape(key) + r" f32\[([0-9,]+)\] +(\S+) +(\S+) +(\S+) +(\S+) +(\d+) +(\d+)$", table, re.M)
    assert m, (key, table)
    return tuple(int(x) for x in m.group(1).split(",")), [float(x) for x in m.group(2, 3, 4, 5)]
for run, table in enumerate(tables[2::2]):
    for key, x in (("Relu:0", r[run]), ("fc3.weight_grad", g[run])):
        shape, (mean, std, lo, hi) = row(table, key)
        x = x.astype(np.float64)
        assert shape == x.shape, (key, shape, x.shape)
        want = (x.mean(), x.std(), x.min(), x.max())
        assert abs(mean - want[0]) <= 1e-4 * want[1] + 1e-30, (key, run, mean, want)
        assert np.allclose((std, lo, hi), want[1:], rtol=1e-4, atol=1e-30), (key, run, (std, lo, hi), want)
print("ok")
PY
check "--outfeed --dump-npy --stats-every 1: Relu_0.run{0,1}.npy [4,1000,320], fc3.weight_grad.run{0,1}.npy [2,10,100], the last sample = the anchor; tables at steps 2 and 4 with rows 'Relu:0 f32[4,1000,320]' and 'fc3.weight_grad f32[2,10,100]' equal to NumPy's mean, std, min, max of each run's stacked array" \
    eval '[ $rc -eq 0 ] && grep -qx ok ofs.py.out && [ "$(ls OF/outfeed | wc -l)" -eq 4 ]' || show ofs.py.out 12
# --stats (each epoch): a row over every record of the epoch, merged as they came
run ofe "$BIN" train "${T_ARGS[@]}" --max-steps 3 --repeat-count 2 --outfeed 'fc3.bias_grad' --stats --dump-npy OE
/usr/bin/python3 - > ofe.py.out 2>&1 <<'PY'
import re
import numpy as np
x = np.concatenate([np.load(f"OE/outfeed/fc3.bias_grad.run{i}.npy") for i in range(3)]).astype(np.float64)
m = re.search(r"^ +0  fc3\.bias_grad f32\[6,10\] +(\S+) +(\S+) +(\S+) +(\S+) +0 +0$", open("ofe.out").read(), re.M)
assert m, open("ofe.out").read()
mean, std, lo, hi = (float(v) for v in m.groups())
assert abs(mean - x.mean()) <= 1e-4 * x.std() and np.allclose((std, lo, hi), (x.std(), x.min(), x.max()), rtol=1e-4), (m.groups(), x.mean(), x.std())
print("ok")
PY
check "--outfeed fc3.bias_grad --stats over 3 runs of D=2: one row 'fc3.bias_grad f32[6,10]' (no gradient watch rows), NumPy's numbers over the 6 records" \
    eval '[ $rc -eq 0 ] && grep -qx ok ofe.py.out && [ "$(grep -c "^ *[0-9]*  " ofe.out)" -eq 1 ]' || show ofe.py.out 12
# --outfeed-mode last: the table's row is the latest record (S = 1): the
# anchored final Relu:0 of the run
run oflast "$BIN" train "${T_ARGS[@]}" --max-steps 2 --repeat-count 2 --outfeed 'Relu:0' --outfeed-mode last --outfeed-depth 1 \
    --stats-every 1 --anchor Relu:0:final --dump-npy OL
n=$(sed -n 's/^outfeed: \([0-9]*\) records.*/\1/p' oflast.out)
/usr/bin/python3 - > oflast.py.out 2>&1 <<'PY'
import re
import numpy as np
a = np.load("OL/Relu_0.npy").astype(np.float64)
rows = re.findall(r"^ +\d+  Relu:0 f32\[1,1000,320\] +(\S+) +(\S+) +(\S+) +(\S+) +0 +0$", open("oflast.out").read(), re.M)
assert len(rows) == 2, rows
mean, std, lo, hi = (float(v) for v in rows[-1])
assert np.allclose((mean, std, lo, hi), (a.mean(), a.std(), a.min(), a.max()), rtol=1e-4), (rows[-1], a.mean(), a.std())
print("ok")
PY
check "--outfeed-mode last --outfeed-depth 1: $n of the 4 records delivered, each table's row 'Relu:0 f32[1,1000,320]' is the run's last micro-batch (the anchored Relu:0)" \
    eval '[ $rc -eq 0 ] && [ -n "$n" ] && [ "$n" -ge 2 ] && [ "$n" -le 4 ] && grep -qx ok oflast.py.out' || show oflast.py.out 12
# --outfeed-depth 1 waits (nothing lost); --outfeed-drop drops when full and
# counts every record it dropped: delivered + dropped = what was produced
OFD=(--batch-size 100 --max-steps 2 --repeat-count 4 --gradient-accumulation-count 4 --outfeed 'Relu:*' --outfeed '*_grad' --outfeed-pre-accumulated-gradients --outfeed-depth 1 --stats)
run ofwait "$BIN" train "${T_ARGS[@]}" "${OFD[@]}"
run ofdrop "$BIN" train "${T_ARGS[@]}" "${OFD[@]}" --outfeed-drop
all=$(sed -n 's/^outfeed: \([0-9]*\) records.*/\1/p' ofwait.out)
got=$(sed -n 's/^outfeed: \([0-9]*\) records:.*/\1/p' ofdrop.out)
dropped=$(sed -n 's/^outfeed: \([0-9]*\) records dropped (--outfeed-drop: the queue was full)$/\1/p' ofdrop.out)
warned=$(grep -c "dropping records" ofdrop.err)
check "--outfeed-depth 1 without --outfeed-drop: all $all records (2 runs x 16 micro-batches x (2 activations + 6 gradients) = 256), none dropped" \
    eval '[ $rc -eq 0 ] && [ "$all" = 256 ] && ! hasf ofwait.out "dropped" && ! hasf ofwait.err "dropping"' || show ofwait.err
check "--outfeed-depth 1 --outfeed-drop: $got delivered + ${dropped:-0} dropped = $all, drops warned about ($warned warnings)" \
    eval '[ -n "$got" ] && [ $((got + ${dropped:-0})) -eq "$all" ] && { [ -z "$dropped" ] || [ "$warned" -ge 1 ]; }' || show ofdrop.out
run ofbad "$BIN" train "${T_ARGS[@]}" --outfeed-depth 8
check "--outfeed-depth without --outfeed: exit 2" eval '[ $rc -eq 2 ] && hasf ofbad.err "--outfeed PATTERN"'
run ofdropbad "$BIN" train "${T_ARGS[@]}" --outfeed-drop
check "--outfeed-drop without --outfeed: exit 2" eval '[ $rc -eq 2 ] && hasf ofdropbad.err "--outfeed PATTERN"'

# ---- --stats-every N: the table under "Step N - Summary Stats" every N runs
run se "$BIN" train "${T_ARGS[@]}" --max-steps 5 --stats-every 2 --watch 'Gradient___fc3.bias'
heads=$(sed -n 's/^Step \([0-9]*\) - Summary Stats$/\1/p' se.out | tr '\n' ' ')
check "--stats-every 2 over 5 runs: tables at steps '$heads' (want 2 4), each with the watched row" \
    eval '[ $rc -eq 0 ] && [ "$heads" = "2 4 " ] && [ "$(grep -c "^ *0  Gradient___fc3.bias " se.out)" -eq 2 ]' || show se.out 12

# ---- --quiet: errors, warnings and the final result only. The same run
# without it prints the epoch lines and a note; the final line is the same
# (timings aside) and carries the last epoch's numbers
Q_ARGS=(--data "$DATA" --batch-size 500 --holdout 1000 --epochs 2 --threads 1 --lr-schedule cosine)
run loud "$BIN" train "${Q_ARGS[@]}"
run quiet "$BIN" train "${Q_ARGS[@]}" --quiet
untimed() { sed -E 's/ in [0-9.]+ s:/ in T s:/; s/  [0-9]+ samples\/s/  N samples\/s/' "$@"; }
last_epoch=$(grep '^epoch 2/2: ' loud.out | sed -E 's/^epoch 2\/2: (loss [0-9.]+  held-out accuracy [0-9.]+% \(loss [0-9.]+\)).*  lr ([0-9.e-]+)$/\1 lr \2/')
final=$(sed -E 's/^trained .*: (loss [0-9.]+  held-out accuracy [0-9.]+% \(loss [0-9.]+\))  [0-9]+ samples\/s  lr ([0-9.e-]+)$/\1 lr \2/' quiet.out)
check "--quiet: stdout is one line, '$(cat quiet.out)', stderr empty" \
    eval '[ $rc -eq 0 ] && [ "$(wc -l < quiet.out)" -eq 1 ] && has quiet.out "^trained 36 runs \(36 steps, 18000 samples\) in " && ! [ -s quiet.err ]' || show quiet.err
check "without --quiet: 2 epoch lines and the schedule note, the same final line (timings aside)" \
    eval '[ "$(grep -c "^epoch [12]/2: " loud.out)" -eq 2 ] && hasf loud.err "learning rate: cosine" && [ "$(tail -n 1 loud.out | untimed)" = "$(untimed quiet.out)" ]' || show loud.out
check "the final line's numbers are the last epoch's: '$final'" eval '[ -n "$last_epoch" ] && [ "$final" = "$last_epoch" ]'
# eval: the result line alone; the info log of a recompilation (1000 images
# in batches of 300) silenced, the untrained-weights warning kept
run eloud "$BIN" eval --data "$DATA" --batch-size 300 --holdout 1000
run equiet "$BIN" eval --data "$DATA" --batch-size 300 --holdout 1000 --quiet
check "eval --quiet: stdout '$(cat equiet.out)' as without it, the warning kept, the info log silenced" \
    eval '[ $rc -eq 0 ] && cmp -s eloud.out equiet.out && [ "$(wc -l < equiet.out)" -eq 1 ] && hasf eloud.err "recompiling" &&
          ! hasf equiet.err "recompiling" && hasf equiet.err "warning: no --weights"' || show equiet.err
# an explicit level wins over --quiet
run qlog env TS_LOG_LEVEL=info "$BIN" eval --data "$DATA" --batch-size 300 --holdout 1000 --quiet
check "TS_LOG_LEVEL=info with --quiet: the info log shown" eval '[ $rc -eq 0 ] && hasf qlog.err "recompiling"' || show qlog.err

# ---- level 5: a line per micro-batch with its loss and batch size; the
# losses of the last run equal the anchored loss (mode all) NumPy reads
run mb env TS_LOG_LEVEL=5 "$BIN" train "${T_ARGS[@]}" --max-steps 2 --gradient-accumulation-count 2 --anchor loss:all --dump-npy L
n=$(grep -c "micro-batch [12]/2 of step [12]: loss [0-9.]* batch 1000" mb.err)
last=$(sed -n 's/.*micro-batch [12]\/2 of step 2: loss \([0-9.]*\) batch 1000/\1/p' mb.err | tr '\n' ' ')
/usr/bin/python3 -c "import numpy as np, sys; a = np.load('L/loss.npy'); w = [float(x) for x in sys.argv[1:]]; sys.exit(0 if a.shape == (2,) and np.allclose(a, w, rtol=1e-6) else 1)" $last
ok_np=$?
check "TS_LOG_LEVEL=5 with A=2: $n micro-batch lines (want 4), step 2's losses $last= the anchored loss:all" \
    eval '[ $rc -eq 0 ] && [ "$n" -eq 4 ] && [ $ok_np -eq 0 ]' || show mb.err

# ---- debug level: the shapes of every run (D=2 stacks two micro-batches)
run dbgshape env TS_LOG_LEVEL=debug "$BIN" train "${T_ARGS[@]}" --max-steps 2 --repeat-count 2
check "TS_LOG_LEVEL=debug: 'run N (training): x f32[2000,1,28,28], labels i32[2000]' for both runs, inference runs labelled" \
    eval '[ $rc -eq 0 ] && [ "$(grep -c "run [12] (training): x f32\[2000,1,28,28\], labels i32\[2000\]" dbgshape.err)" -eq 2 ] &&
          hasf dbgshape.err "run 1 (inference): x f32[1000,1,28,28]"' || show dbgshape.err

# ---- progress on a terminal (script(1) gives a pty): at most 10 redraws a
# second, evaluation shows progress too; --quiet draws nothing
if command -v script > /dev/null; then
    s0=$(date +%s.%N)
    script -qc "$BIN train --data $DATA --batch-size 100 --max-steps 60" tty.log > /dev/null 2>&1
    s1=$(date +%s.%N)
    draws=$(tr '\r' '\n' < tty.log | grep -c "epoch 1/1 \[")
    evals=$(tr '\r' '\n' < tty.log | grep -c "evaluating \[")
    limit=$(awk -v a="$s0" -v b="$s1" 'BEGIN { printf "%d", (b - a) * 10 + 2 }')
    check "progress on a terminal: $draws training redraws for 60 runs (limit $limit for the elapsed time), $evals during evaluation" \
        eval '[ "$draws" -ge 1 ] && [ "$draws" -le "$limit" ] && [ "$draws" -lt 60 ] && [ "$evals" -ge 1 ]'
    script -qc "$BIN train --data $DATA --batch-size 100 --max-steps 60 --quiet" ttyq.log > /dev/null 2>&1
    check "--quiet on a terminal: no progress drawn" eval '! grep -q "\[#*\.*\]" ttyq.log'
else
    fail "script(1) is missing (bsdutils): cannot give the CLI a terminal"
fi
finish
