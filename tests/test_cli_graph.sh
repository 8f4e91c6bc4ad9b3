#!/bin/bash
# test_cli_graph.sh -- `tensorscope graph --backward` and the graph dumps of
# TS_SAVE_GRAPH_FILE: for the built-in mlp and cnn, every derived tensor that
# `names` lists (Gradient___, Accum___, UpdatedVar___, optimizer state) is
# written by exactly one line of the backward pass and optimizer step, each
# gradient read after the line that writes it; the DOT form is accepted by
# Graphviz; a training run appends the training graph (with its backward
# pass under TS_SAVE_GRAPH_BACKWARD=1) and the evaluation graph to one file,
# each headed by its kind and input shapes; the debug bundle holds both.
set -u

. "$(dirname "$0")/support/cli_checks.sh"
cli_paths
command -v dot > /dev/null || { fail "Graphviz's dot is not installed (apt-get install graphviz)"; finish; }

T=$(mktemp -d "${TMPDIR:-/tmp}/ts_graph.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1

# backward_ok DUMP NAMES: the derived names of NAMES each written once in
# DUMP's backward section, every gradient read after it is written
backward_ok() {
    /usr/bin/python3 - "$1" "$2" <<'PY'
import re
import sys

dump = open(sys.argv[1]).read().split("\n")
names = [n for n in open(sys.argv[2]).read().split("\n") if n]
derived = [n for n in names if re.match(r"(Gradient|Accum|UpdatedVar|Accl|Accl1|Accl2|Step)___", n)]
start = next(i for i, l in enumerate(dump) if l.startswith("# backward"))
written, bad = {}, 0
for l in dump[start:]:
    if not l.startswith("%"):
        continue
    m = re.match(r"(.*?) \+?= (\w+)\((.*)\) :", l)
    outs = [o.strip()[1:] for o in m.group(1).split(", ")]
    if m.group(2).endswith("Backward"):
        read = m.group(3).split(", ")[0][1:]
        if read not in written:
            print("     %s reads %s before it is written" % (m.group(2), read))
            bad = 1
    for o in outs:
        written[o] = written.get(o, 0) + 1
for n in derived:
    if written.get(n) != 1:
        print("     %s written %d times" % (n, written.get(n, 0)))
        bad = 1
extra = [o for o in written if o not in names]
if extra:
    print("     written but not a tensor of the model: %s" % extra[:5])
    bad = 1
print("%d derived tensors, %d written" % (len(derived), len(written)))
sys.exit(bad)
PY
}

for model in mlp cnn; do
    run "$model" "$BIN" graph --model "$model" --backward
    run "$model.names" "$BIN" names --model "$model"
    check "graph --model $model --backward: $(backward_ok "$model.out" "$model.names.out" | tail -n1), each once, gradients read after they are written" \
        eval '[ $rc -eq 0 ] && backward_ok '"$model.out $model.names.out"' > /dev/null' || backward_ok "$model.out" "$model.names.out"
done
check "mlp: Add's backward writes Gradient___fc1.bias, MatMul's Gradient___fc1.weight from Flatten:0; SGD writes UpdatedVar___" \
    eval 'hasf mlp.out "%Gradient___fc1/MatMul:0, %Gradient___fc1.bias += AddBackward(%Gradient___fc1/Add:0) : f32[64,320], f32[320]" &&
          hasf mlp.out "%Gradient___fc1.weight += MatMulBackward(%Gradient___fc1/MatMul:0, %Flatten:0, %fc1.weight) : f32[320,784]" &&
          hasf mlp.out "%UpdatedVar___fc1.bias = SGD(%fc1.bias, %Accum___fc1.bias, lr=0.01) : f32[320]"' || show mlp.out 60
check "cnn: BatchNorm's and Conv2d's backward, Adam writing Accl1___, Accl2___ and Step___" \
    eval 'hasf cnn.out "%Gradient___conv1/Conv2d:0, %Gradient___bn1.weight, %Gradient___bn1.bias += BatchNormBackward(%Gradient___bn1/BatchNorm:0, %conv1/Conv2d:0" &&
          hasf cnn.out "%Gradient___conv1.weight += Conv2dBackward(%Gradient___conv1/Conv2d:0, %x, %conv1.weight) : f32[6,1,5,5]" &&
          hasf cnn.out "%UpdatedVar___conv1.weight, %Accl1___conv1.weight, %Accl2___conv1.weight, %Step___conv1.weight = Adam(%conv1.weight, %Accum___conv1.weight, %Accl1___conv1.weight, %Accl2___conv1.weight, %Step___conv1.weight, lr=0.001"' ||
    show cnn.out 80

run cnndot "$BIN" graph --model cnn --backward --format dot --locations
dot -Tsvg cnndot.out -o cnn.svg 2> dot.err
check "graph --model cnn --backward --format dot: Graphviz draws it with no warning, Gradient___conv1.weight and Adam included" \
    eval '[ $rc -eq 0 ] && [ -s cnn.svg ] && ! [ -s dot.err ] && hasf cnn.svg "Gradient___conv1.weight" && hasf cnn.svg "Adam(lr=0.001"' || show dot.err
run inf "$BIN" graph --backward --inference
check "graph --backward --inference: exit 2, says an inference model runs no backward pass" \
    eval '[ $rc -eq 2 ] && hasf inf.err "no backward pass"' || show inf.err

# ---- a training run appends every compile: the training graph (with its
# backward pass) and then the evaluation graph, none overwriting another
run save env TS_SAVE_GRAPH_FILE=G.txt TS_SAVE_GRAPH_BACKWARD=1 "$BIN" train --data "$DATA" --quiet --batch-size 1000 --max-steps 1
train_line=$(grep -n '^# ---- compile [0-9]*: training model, inputs x f32\[1000,1,28,28\], labels i32\[1000\]$' G.txt | head -n1 | cut -d: -f1)
inf_line=$(grep -n '^# ---- compile [0-9]*: inference model, inputs x f32\[1000,1,28,28\]' G.txt | head -n1 | cut -d: -f1)
bwd_line=$(grep -n '^# backward' G.txt | head -n1 | cut -d: -f1)
check "TS_SAVE_GRAPH_FILE after train: $(grep -c '^# ---- compile' G.txt) compiles appended; the training block (line ${train_line:-?}, its backward at ${bwd_line:-?}) and the inference block (line ${inf_line:-?}), each with its input shapes" \
    eval '[ $rc -eq 0 ] && [ -n "$train_line" ] && [ -n "$inf_line" ] && [ -n "$bwd_line" ] &&
          { [ "$train_line" -lt "$bwd_line" ] && { [ "$bwd_line" -lt "$inf_line" ] || [ "$inf_line" -lt "$train_line" ]; }; } &&
          [ "$(grep -c "^# backward" G.txt)" -eq "$(grep -c "^# ---- compile [0-9]*: training model" G.txt)" ]' || show G.txt

# ---- the debug bundle holds every graph, the training one with its backward pass
if needs debug-bundle "debug-run's graph.txt"; then
    run dbg env TMPDIR="$T" "$BIN" debug-run --outfile B.tar.gz -- "$BIN" train --data "$DATA" --quiet --batch-size 1000 --max-steps 1
    mkdir -p bundle && tar xzf B.tar.gz -C bundle 2> /dev/null
    g=bundle/tensorscope-debug/graph.txt
    check "debug-run -- train: graph.txt holds the training graph with its backward pass and optimizer step, and the inference graph" \
        eval '[ $rc -eq 0 ] && grep -q "^# ---- compile [0-9]*: training model" "$g" && grep -q "^# ---- compile [0-9]*: inference model" "$g" &&
              grep -q "^# backward" "$g" && grep -q "^# optimizer step" "$g" && grep -q " = SGD(%fc1.weight, " "$g"' || show "$g"
fi

finish
