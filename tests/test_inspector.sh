#!/bin/bash
# test_inspector.sh -- the inspector (docs/inspector.md) as a person uses it:
# `tensorscope train` runs in a terminal (tmux), the test types commands and
# reads the screen.
# 1. --break-at-step 2 with --lr 0 and weights saved beforehand (--save-init):
#    help, list fc1*, stats, print NAME[0,:5], a bad name, a bad slice,
#    where, save; the printed and saved values are the weights on disk, and
#    the held fc1/MatMul:0 is x @ fc1.weight^T of the held x (NumPy); eval
#    of @, where, reductions, slices and arithmetic gives NumPy's values on
#    the same tensors, a bad expression says its column; rerun with a
#    weight or a label changed prints the MLP's loss as NumPy computes it
#    with that change, and the first tensors that differ with NumPy's max
#    |diff|; the weights are unchanged after; then continue: training ends
#    as without a break (exit 0).
# 2. step, diff and quit: diff at the second stop is what NumPy finds between
#    the two saved copies; a rerun there changes nothing: quit exits 130 and
#    writes --save-weights, equal to the copy saved at the stop.
# 3. --check-numerics op --break-on-nan on images of 3e38: the inspector names
#    the op whose output overflowed (fc1/MatMul:0, op MatMul) and print
#    shows its Inf; continue ends as the check does (exit 1).
# 4. stdin not a terminal: the flag says so on one line and training goes on;
#    SIGUSR2 too (it does not end training).
# 5. SIGUSR2 during training pauses at the next run boundary; quit: 130.
# 6. mpirun -np 2 from a terminal: rank 0 prompts once after run 2, print
#    shows the weights on disk, step pauses every rank after run 3,
#    continue: both ranks finish (exit 0, the replicas' weights agree); quit:
#    both ranks exit 130 and the weights are written; mpirun with no
#    terminal (setsid, stdin /dev/null): one line says so, the job trains on;
#    SIGUSR2 to mpirun pauses the job at the next run boundary;
#    --break-on-nan says once that an MPI job cannot open at a numeric stop.
set -u

# shellcheck source=support/cli_checks.sh
source "$(dirname "$0")/support/cli_checks.sh"
cli_paths
command -v tmux > /dev/null || { echo "skip: tmux is not installed (scripts/install-deps.sh test)"; exit 77; }
PY=/usr/bin/python3

T=$(mktemp -d "${TMPDIR:-/tmp}/ts_inspector.XXXXXX")
SOCK=$T/tmux.sock
trap 'tmux -S "$SOCK" kill-server 2> /dev/null; rm -rf "$T"' EXIT
cd "$T" || exit 1
TRAIN=("$BIN" train --model mlp --data "$DATA" --threads 1 --holdout 64 --quiet)

# start NAME CMD...: CMD in a terminal of its own; its exit code goes to NAME.rc
start() {
    local name=$1
    shift
    printf '%q ' "$@" > "$name.cmd"
    tmux -S "$SOCK" new-session -d -s "$name" -x 220 -y 50 "bash -c '$(cat "$name.cmd"); echo \$? > $name.rc; sleep 600'"
    tmux -S "$SOCK" set-option -t "$name" history-limit 20000 > /dev/null
}
screen() { tmux -S "$SOCK" capture-pane -p -J -t "$1" -S - -E -; }
# wait_for NAME STRING [SECONDS]: until the screen shows STRING (false on timeout)
wait_for() {
    local i
    for ((i = 0; i < ${3:-120} * 10; i++)); do
        screen "$1" | grep -Fq -- "$2" && return 0
        sleep 0.1
    done
    return 1
}
# prompts NAME: how many prompts the screen shows
prompts() { screen "$1" | grep -c '^(tensorscope) '; }
# type NAME LINE: types LINE and waits for the prompt after it (or the end)
type_line() {
    local before
    before=$(prompts "$1")
    tmux -S "$SOCK" send-keys -t "$1" -l -- "$2"
    tmux -S "$SOCK" send-keys -t "$1" Enter
    local i
    for ((i = 0; i < 600; i++)); do
        [ "$(prompts "$1")" -gt "$before" ] && return 0
        [ -f "$1.rc" ] && return 0
        sleep 0.1
    done
    return 1
}
# after NAME CMD: what the screen shows after the prompt line of CMD, up to the next prompt
after() { screen "$1" | awk -v c="(tensorscope) $2" '$0 == c {on = 1; out = ""; next} on && /^\(tensorscope\) / {on = 0} on {out = out $0 "\n"} END {printf "%s", out}'; }
# usr2 NAME PROG: SIGUSR2 to PROG, the command of NAME's terminal (the
# pane's shell runs bash -c, whose child is env, which execs PROG)
usr2() {
    local pid= _
    for _ in $(seq 600); do
        pid=$(pgrep -x "$2" -P "$(tmux -S "$SOCK" display -p -t "$1" '#{pane_pid}')" 2> /dev/null | head -1)
        [ -n "$pid" ] && break
        sleep 0.1
    done
    sleep 1
    [ -n "$pid" ] && kill -USR2 "$pid"
}
wait_rc() { # wait_rc NAME: its exit code once it ends
    local i
    for ((i = 0; i < 1200; i++)); do
        [ -s "$1.rc" ] && { cat "$1.rc"; return; }
        sleep 0.1
    done
    echo timeout
}

# ---- 1. --break-at-step 2, the values checked against the weights on disk
run init "${TRAIN[@]}" --max-steps 1 --save-init w0
check "weights saved beforehand (rc $rc)" [ "$rc" -eq 0 ] || show init.err
start s1 "${TRAIN[@]}" --max-steps 3 --lr 0 --weights w0 --break-at-step 2
check "--break-at-step 2: the inspector opens after run 2" wait_for s1 "(tensorscope) " || screen s1 | tail -20
check "it says why it stopped" has <(screen s1) "training paused at --break-at-step after run 2 \(optimizer step 2\)"
type_line s1 "help"
after s1 help > help.txt
check "help lists every command" [ "$(grep -cE '^  (help|list|stats|print|diff|save|grad|where|eval|rerun|step|continue|quit) ' help.txt)" -eq 13 ] || show help.txt 20
type_line s1 "help where"
check "help COMMAND: that command" has <(after s1 "help where") "^  where NAME +the op that made NAME"
type_line s1 "list fc1*"
after s1 "list fc1*" > list.txt
check "list fc1*: the four fc1 tensors with their shapes" \
    bash -c "[ \$(wc -l < list.txt) -eq 4 ] && grep -Eq 'fc1/MatMul:0 +f32\[64,320\]' list.txt && grep -Eq 'fc1.weight +f32\[320,784\]' list.txt" || show list.txt
type_line s1 "stats fc1.bias"
after s1 "stats fc1.bias" > stats.txt
check "stats: the summary line, counts and the histogram" \
    eval "has stats.txt '^fc1.bias f32\[320\] n=320' && has stats.txt '^count 320  zeros' && hasf stats.txt 'histogram of log2|x|'" || show stats.txt 20
type_line s1 "print fc1.weight[0,:5]"
after s1 "print fc1.weight[0,:5]" > print.txt
type_line s1 "print fc1.wieght"
check "a bad name: an error naming the closest" has <(after s1 "print fc1.wieght") "^error: .*no tensor named 'fc1.wieght'.*closest: 'fc1.weight'"
type_line s1 "print fc1.weight[0,:5x]"
check "a bad slice: an error naming the item" has <(after s1 "print fc1.weight[0,:5x]") "^error: fc1.weight\[...\]: cannot read ':5x' \(dimension 1, size 784\)"
type_line s1 "print fc1.weight[400]"
check "an index out of range: said" has <(after s1 "print fc1.weight[400]") "^error: .*index 400 is out of range for dimension 0 of size 320"
type_line s1 "where fc1/MatMul:0"
check "where: the op and the source line that built it" has <(after s1 "where fc1/MatMul:0") "^tensor 'fc1/MatMul:0' \(op MatMul\), built at tools/models.c:[0-9]+"
type_line s1 "grad fc3.bias"
check "grad NAME: the gradient's values" has <(after s1 "grad fc3.bias") "^Gradient___fc3.bias f32\[10\]"
type_line s1 "save fc1.weight[0] row.npy"
type_line s1 "save fc1/MatMul:0 mm.npy"
type_line s1 "save x x.npy"
type_line s1 "frobnicate"
check "an unknown command: the closest ones" has <(after s1 "frobnicate") "^error: unknown command 'frobnicate'"
# huge numbers: checked arithmetic, numpy's answers (bounds and steps past int64 clipped, an index refused)
type_line s1 "print fc1.bias[0:320:9223372036854775807]"
after s1 "print fc1.bias[0:320:9223372036854775807]" > huge1.txt
type_line s1 "print fc1.bias[1:99999999999999999999:99999999999999999999]"
after s1 "print fc1.bias[1:99999999999999999999:99999999999999999999]" > huge2.txt
check "a step of 2^63-1, and bounds and a step past int64: one value each, as numpy gives (was: out of memory, or a UBSan abort)" \
    eval 'has huge1.txt "^fc1.bias\[0:320:9223372036854775807\] f32\[1\]" && has huge2.txt "^fc1.bias\[1:99999999999999999999:99999999999999999999\] f32\[1\]"' ||
    { show huge1.txt; show huge2.txt; }
type_line s1 "print fc1.bias[99999999999999999999]"
check "an index past int64: out of range" has <(after s1 "print fc1.bias[99999999999999999999]") \
    "^error: .*index 99999999999999999999 is out of range for dimension 0 of size 320"
type_line s1 "step 99999999999999999999"
check "step 99999999999999999999: refused (was accepted)" has <(after s1 "step 99999999999999999999") "^error: step K: K is a number of runs from 1 to"
# save takes quoting; long names and slice specs are said, not cut
empty="save fc1.bias ''" spaced="save fc1.bias[0:4] 'my run.npy'" unclosed='save fc1.bias[0, ] "two words.npy'
type_line s1 "$empty"
after s1 "$empty" > empty.txt
check "save fc1.bias '': an error, no file named '' (was written)" eval 'has empty.txt "^error: save: the file name is empty" && [ ! -e "'"''"'" ]' ||
    show empty.txt
type_line s1 "$spaced"
after s1 "$spaced" > spaced.txt
check "save to 'my run.npy' (quoted, with a space): written" eval 'has spaced.txt "^saved fc1.bias\[0:4\] to my run.npy" && [ -s "my run.npy" ]' ||
    show spaced.txt
type_line s1 "$unclosed"
check "an unclosed quote: said" has <(after s1 "$unclosed") "^error: the quote at"
long=$(printf 'n%.0s' {1..700})
type_line s1 "print $long"
check "a name of 700 characters: said, not cut" has <(after s1 "print $long") "^error: .*700 characters long"
longspec=$(printf '0:1,%.0s' {1..100})
type_line s1 "print fc1.bias[${longspec}0]"
check "a slice spec of 400 characters: said, not cut" has <(after s1 "print fc1.bias[${longspec}0]") "^error: the slice spec is 401 characters long"
# eval and rerun: checked below against NumPy on the saved x, labels and the weights on disk
type_line s1 "save labels labels.npy"
EVALS=("fc1.weight @ Flatten:0[0]" "where(fc1.bias > 0.02)" "sum(fc1/MatMul:0, axis=1)[-5:] / 2 - fc3.bias[0]" "-fc3.bias**2 + max(abs(fc1.weight))"
       "x[0, 0, 14, ::-1].T @ x[1, 0, 14, :]")
for i in "${!EVALS[@]}"; do
    type_line s1 "eval ${EVALS[$i]}"
    after s1 "eval ${EVALS[$i]}" > "eval$i.txt"
done
type_line s1 "eval fc1.weight.T @ x[0]"
after s1 "eval fc1.weight.T @ x[0]" > evalbad.txt
check "eval of shapes @ cannot take: the column, the expression and a caret under the @" \
    eval 'has evalbad.txt "^error: eval: column 14: @: operands of 1 or 2 dimensions, got \[784,320\] @ \[1,28,28\]" &&
          has evalbad.txt "^  fc1.weight.T @ x\[0\]$" && has evalbad.txt "^               \^$"' || show evalbad.txt
type_line s1 "eval fc1.wieght[0]"
check "eval of an unknown name: the closest" has <(after s1 "eval fc1.wieght[0]") "^error: eval: column 1: no tensor named 'fc1.wieght'; closest: 'fc1.weight'"
type_line s1 "rerun fc1.weight[0,0]=0.5"
after s1 "rerun fc1.weight[0,0]=0.5" > rerunw.txt
type_line s1 "rerun labels[0]=7"
after s1 "rerun labels[0]=7" > rerunl.txt
type_line s1 "rerun fc1/MatMul:0[0]=1"
check "rerun of a computed tensor: refused, saying what can be changed" has <(after s1 "rerun fc1/MatMul:0[0]=1") "^error: .*a rerun changes an input or a parameter"
type_line s1 "print fc1.weight[0,:5]"
after s1 "print fc1.weight[0,:5]" > print2.txt
check "after the reruns the model's weights are unchanged (print as before)" cmp -s <(tail -n +2 print.txt) <(tail -n +2 print2.txt) || show print2.txt
type_line s1 "continue"
check "continue: training ends as without a break (rc $(wait_rc s1))" [ "$(cat s1.rc)" = 0 ] || screen s1 | tail
check "eval's values are NumPy's on the same tensors; rerun's loss is the MLP's loss in NumPy with the weight or label changed, and its first differing tensors and their max |diff| are NumPy's" "$PY" - << 'EOF'
import numpy as np, re, sys
w = {n: np.load(f"w0/{n}.npy").astype(np.float64) for n in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias")}
x = np.load("x.npy").astype(np.float64); labels = np.load("labels.npy"); mm = np.load("mm.npy").astype(np.float64)
flat = x.reshape(len(x), -1)
def values(path):  # the numbers after the summary line, as print shows them
    return np.array([float(v) for v in re.findall(r"-?[0-9.]+(?:e[-+]?[0-9]+)?|-?inf|nan", "".join(open(path).read().split("\n")[1:]))])
want = [w["fc1.weight"] @ flat[0], np.argwhere(w["fc1.bias"] > 0.02).ravel(), mm.sum(1)[-5:] / 2 - w["fc3.bias"][0],
        -w["fc3.bias"] ** 2 + np.abs(w["fc1.weight"]).max(), x[0, 0, 14, ::-1] @ x[1, 0, 14, :]]
ok = True
for i, v in enumerate(want):
    got = values(f"eval{i}.txt")
    good = got.shape == np.ravel(v).shape and np.allclose(got, np.ravel(v), rtol=2e-5, atol=1e-5)
    print(i, "ok" if good else "MISMATCH", got[:4], np.ravel(v)[:4])
    ok = ok and good
def loss(w, flat, labels):
    h = np.maximum(flat @ w["fc1.weight"].T + w["fc1.bias"], 0)
    h = np.maximum(h @ w["fc2.weight"].T + w["fc2.bias"], 0)
    z = h @ w["fc3.weight"].T + w["fc3.bias"]
    logp = z - z.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    return -logp[np.arange(len(labels)), labels].mean()
text = open("rerunw.txt").read()
m = re.search(r"loss ([-0-9.e+]+) \(held run: ([-0-9.e+]+)\); the model is unchanged", text)
rows = re.findall(r"^  (\S+) +max \|diff\| ([-0-9.e+]+) +(\d+) of (\d+) values", text, re.M)
w2 = dict(w); w2["fc1.weight"] = w["fc1.weight"].copy(); w2["fc1.weight"][0, 0] = 0.5
mm_diff = np.abs(flat[:, 0] * (0.5 - w["fc1.weight"][0, 0])).max()
good = (m and np.isclose(float(m.group(1)), loss(w2, flat, labels), rtol=1e-5) and np.isclose(float(m.group(2)), loss(w, flat, labels), rtol=1e-5)
        and [r[0] for r in rows[:2]] == ["fc1.weight", "fc1/MatMul:0"] and rows[0][2] == "1"
        and np.isclose(float(rows[0][1]), abs(0.5 - w["fc1.weight"][0, 0]), rtol=1e-5)
        and np.isclose(float(rows[1][1]), mm_diff, rtol=1e-4) and int(rows[1][2]) == np.count_nonzero(flat[:, 0]))
print("rerun fc1.weight[0,0]=0.5:", m and m.groups(), loss(w2, flat, labels), rows[:2], mm_diff, "ok" if good else "MISMATCH")
ok = ok and bool(good)
text = open("rerunl.txt").read()
k = 7
l2 = labels.copy(); l2[0] = k
m = re.search(r"loss ([-0-9.e+]+) \(held run", text)
rows = re.findall(r"^  (\S+) +max \|diff\|", text, re.M)
good = m and np.isclose(float(m.group(1)), loss(w, flat, l2), rtol=1e-5) and (k == labels[0]) == (not rows) and (k == labels[0] or rows[:2] == ["labels", "loss"])
print("rerun labels[0]=%d (held %d):" % (k, labels[0]), m and m.group(1), loss(w, flat, l2), rows[:3], "ok" if good else "MISMATCH")
sys.exit(0 if ok and good else 1)
EOF
check "the values printed are the weights on disk, the saved row too; the held fc1/MatMul:0 is x @ W^T of the held x" "$PY" - << 'EOF'
import numpy as np, re, sys
w = np.load("w0/fc1.weight.npy")
printed = [float(v) for v in re.findall(r"[-+0-9.e]+", open("print.txt").read().split("\n")[1])]
row = np.load("row.npy"); mm = np.load("mm.npy"); x = np.load("x.npy")
ok = np.allclose(printed, w[0, :5], rtol=1e-6, atol=0) and np.array_equal(row, w[0])
ok = ok and x.shape == (64, 1, 28, 28) and np.allclose(mm, x.reshape(64, -1) @ w.T, rtol=1e-4, atol=1e-5)
ok = ok and np.array_equal(np.load("my run.npy"), np.load("w0/fc1.bias.npy")[0:4])
print(printed, w[0, :5], abs(mm - x.reshape(64, -1) @ w.T).max())
sys.exit(0 if ok else 1)
EOF

# ---- 2. step, diff, quit
start s2 "${TRAIN[@]}" --max-steps 50 --weights w0 --break-at-step 1 --save-weights wq
wait_for s2 "(tensorscope) " > /dev/null
type_line s2 "save fc1.bias a.npy"
type_line s2 "diff fc1.bias"
check "diff at the first stop: no previous value, kept from now on" has <(after s2 "diff fc1.bias") "no value from the previous stop"
type_line s2 "step 2"
check "step 2: paused again two runs later" has <(screen s2) "training paused after 'step' after run 3 \(optimizer step 3\)"
type_line s2 "diff fc1.bias"
after s2 "diff fc1.bias" > diff.txt
type_line s2 "save fc1.bias b.npy"
type_line s2 "rerun fc1.bias[0]=5" # on the side: quit still writes the weights of the stop (checked below)
check "rerun after training moved the weights: only fc1.bias and what it feeds differ" has <(after s2 "rerun fc1.bias[0]=5") "^  fc1.bias +max \|diff\| [0-9.e+-]+ +1 of 320 values"
type_line s2 "quit"
check "quit exits 130 (rc $(wait_rc s2))" [ "$(cat s2.rc)" = 130 ] || screen s2 | tail
check "the change diff printed is NumPy's between the two stops; quit wrote the weights of the stop" "$PY" - << 'EOF'
import numpy as np, re, sys
a, b, q = np.load("a.npy"), np.load("b.npy"), np.load("wq/fc1.bias.npy")
m = re.search(r"changed (\d+) of 320 values, max \|change\| ([-+0-9.e]+)", open("diff.txt").read())
print(m and m.groups(), np.count_nonzero(a != b), abs(b - a).max())
sys.exit(0 if m and int(m.group(1)) == np.count_nonzero(a != b) and np.isclose(float(m.group(2)), abs(b - a).max(), rtol=1e-6)
         and abs(b - a).max() > 0 and np.array_equal(b, q) else 1)
EOF

# ---- 3. --break-on-nan: images of 3e38 overflow fc1's MatMul
mkdir -p big
"$PY" -c "import numpy as np; np.save('big/x.npy', np.full((256, 1, 28, 28), 3e38, np.float32)); np.save('big/labels.npy', (np.arange(256) % 10).astype(np.int32))"
start s3 "$BIN" train --model mlp --data big --threads 1 --holdout 64 --quiet --max-steps 3 --check-numerics op --break-on-nan
check "--break-on-nan: the inspector opens at the op that overflowed" wait_for s3 "(tensorscope) " || screen s3 | tail -20
check "it names the tensor, the op and where it was built, before the update" \
    has <(screen s3) "^training stopped by the numeric check at 'fc1/MatMul:0': tensor 'fc1/MatMul:0' \(op MatMul\), built at tools/models.c"
type_line s3 "print fc1/MatMul:0"
check "print shows the Inf" has <(after s3 "print fc1/MatMul:0") "^fc1/MatMul:0 f32\[64,320\] .*Inf!"
type_line s3 "print Flatten:0[0,:3]"
check "and its input, as it was" has <(after s3 "print Flatten:0[0,:3]") "^\[3e\+38, 3e\+38, 3e\+38\]"
type_line s3 "list fc2*"
after s3 "list fc2*" > list3.txt
check "what the run did not reach is not listed, the parameters are" [ "$(grep -cE '^  fc2' list3.txt)" -eq 2 ] || show list3.txt
type_line s3 "step"
check "step: refused, training cannot go on" has <(after s3 "step") "^error: training cannot go on"
type_line s3 "continue"
check "continue: ends as the check does (rc $(wait_rc s3))" [ "$(cat s3.rc)" = 1 ]

# ---- 4. not a terminal: said, and training goes on
run notty timeout 120 "${TRAIN[@]}" --max-steps 3 --break-at-step 2 < /dev/null
check "stdin not a terminal: exit 0 (rc $rc)" [ "$rc" -eq 0 ] || show notty.err
check "one line says so" bash -c "[ \$(grep -c 'train: --break-at-step: stdin is not a terminal; going on' notty.err) -eq 1 ]" || show notty.err

# SIGUSR2 without a terminal: said at the next run boundary; training goes on (until Ctrl-C here)
set -m # the job gets default SIGINT handling, as from a terminal
TS_LOG_LEVEL=debug "${TRAIN[@]}" --epochs 50 < /dev/null > usr2.out 2> usr2.err &
pid=$!
set +m
for _ in $(seq 1200); do
    grep -q 'run 2 (training)' usr2.err 2> /dev/null && break
    sleep 0.1
done
kill -USR2 "$pid"
for _ in $(seq 600); do
    grep -q 'SIGUSR2: stdin is not a terminal; going on' usr2.err && break
    sleep 0.1
done
check "SIGUSR2 without a terminal: one line says so" hasf usr2.err "train: SIGUSR2: stdin is not a terminal; going on" || show usr2.err
check "and training goes on" kill -0 "$pid"
kill -INT "$pid"
wait "$pid"
rc=$?
check "(stopped here by SIGINT: rc $rc)" [ "$rc" -eq 130 ]

# ---- 5. SIGUSR2: pause at the next run boundary
start s5 env TS_LOG_LEVEL=debug "${TRAIN[@]}" --epochs 50 # debug: a line as each run starts
wait_for s5 "run 2 (training)" 300 > /dev/null # training has begun: its handler is in place
usr2 s5 tensorscope
check "SIGUSR2: training pauses after the next run" wait_for s5 "training paused on SIGUSR2 after run" || screen s5 | tail
type_line s5 "quit"
check "quit: exit 130 (rc $(wait_rc s5))" [ "$(cat s5.rc)" = 130 ]
# ---- 6. an MPI job: rank 0 prompts on mpirun's terminal, every rank waits at the same run boundary
if command -v mpirun > /dev/null && "$BUILD/test_dist" --available 2> /dev/null; then
    MPIRUN=(env TMPDIR="$T" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
        mpirun --oversubscribe --bind-to none -np 2)
    # rank_rc.sh CMD...: CMD, then its exit code in $RC_PREFIX.RANK
    printf '#!/bin/bash\n"$@"; echo $? > "$RC_PREFIX.$OMPI_COMM_WORLD_RANK"\n' > rank_rc.sh
    chmod +x rank_rc.sh
    start mpi "${MPIRUN[@]}" "${TRAIN[@]}" --max-steps 4 --lr 0 --weights w0 --break-at-step 2
    check "mpirun -np 2 from a terminal: rank 0 prompts after run 2" wait_for mpi "(tensorscope) " 300 || screen mpi | tail
    check "one rank prompts, once" [ "$(screen mpi | grep -c "training paused at --break-at-step after run 2 (optimizer step 2)")" -eq 1 ] || screen mpi | tail
    type_line mpi "print fc1.weight[0,:3]"
    after mpi "print fc1.weight[0,:3]" > mpiprint.txt
    type_line mpi "step"
    check "step: every rank trains one run and pauses again" has <(screen mpi) "training paused after 'step' after run 3 \(optimizer step 3\)" || screen mpi | tail
    type_line mpi "continue"
    check "continue: both ranks finish, their weights equal (rc $(wait_rc mpi))" [ "$(cat mpi.rc)" = 0 ] || screen mpi | tail
    check "the job trained its 4 runs" has <(screen mpi) "^trained 4 runs" || screen mpi | tail
    check "print at rank 0's prompt shows the weights on disk" "$PY" - << 'EOF'
import numpy as np, re, sys
w = np.load("w0/fc1.weight.npy")
printed = [float(v) for v in re.findall(r"[-+0-9.e]+", open("mpiprint.txt").read().split("\n")[1])]
print(printed, w[0, :3])
sys.exit(0 if len(printed) == 3 and np.allclose(printed, w[0, :3], rtol=1e-6, atol=0) else 1)
EOF

    # quit: every rank exits 130, rank 0 writes the weights
    start mpiq env RC_PREFIX="$T/mpiq.rank" "${MPIRUN[@]}" ./rank_rc.sh "${TRAIN[@]}" --max-steps 50 --break-at-step 1 --save-weights wmq
    check "quit case: rank 0 prompts" wait_for mpiq "(tensorscope) " 300 || screen mpiq | tail
    type_line mpiq "quit"
    wait_rc mpiq > /dev/null
    check "quit: both ranks exit 130 (rank 0 $(cat mpiq.rank.0 2> /dev/null), rank 1 $(cat mpiq.rank.1 2> /dev/null))" \
        bash -c '[ "$(cat mpiq.rank.0)" = 130 ] && [ "$(cat mpiq.rank.1)" = 130 ]' || screen mpiq | tail
    check "and the weights of the completed steps are written" test -s wmq/fc1.weight.npy

    # SIGUSR2 to mpirun (it forwards the signal to every rank): rank 0 pauses every rank at the next run boundary
    start mpiu env TS_LOG_LEVEL=debug "${MPIRUN[@]}" "${TRAIN[@]}" --epochs 50 # debug: a line as each run starts
    wait_for mpiu "run 2 (training)" 300 > /dev/null # training has begun: the handlers are in place
    usr2 mpiu mpirun
    check "SIGUSR2 to mpirun: the job pauses after the next run" wait_for mpiu "training paused on SIGUSR2 after run" || screen mpiu | tail
    type_line mpiu "quit"
    check "quit: exit 130 (rc $(wait_rc mpiu))" [ "$(cat mpiu.rc)" = 130 ]

    # --break-on-nan: a numeric stop ends an MPI job, so it is said at the start and the job ends as the check does
    start mpin "${MPIRUN[@]}" "$BIN" train --model mlp --data big --threads 1 --holdout 64 --quiet --max-steps 3 --check-numerics op --break-on-nan
    check "--break-on-nan in an MPI job: the job ends as the check does (rc $(wait_rc mpin))" [ "$(cat mpin.rc)" != 0 ] || screen mpin | tail
    check "and no prompt opened" [ "$(prompts mpin)" -eq 0 ] || screen mpin | tail
    check "one line says why it cannot open" [ "$(screen mpin | grep -c 'train: --break-on-nan: an MPI job ends at a numeric stop')" -eq 1 ] || screen mpin | tail

    # no terminal at all (CI, nohup, setsid): said once, the job trains on, nothing waits
    run mpinotty timeout 300 setsid -w "${MPIRUN[@]}" "${TRAIN[@]}" --max-steps 3 --break-at-step 2 < /dev/null
    check "mpirun without a terminal: the job ends (rc $rc)" [ "$rc" -eq 0 ] || show mpinotty.err
    check "one line says so" [ "$(grep -c 'train: --break-at-step: no terminal (mpirun was not started from one); going on' mpinotty.err)" -eq 1 ] || show mpinotty.err
else
    echo "skip mpirun (no mpirun, or built without MPI)"
fi
finish
