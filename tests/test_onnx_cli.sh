#!/bin/bash
# test_onnx_cli.sh -- `--model FILE.onnx` and array data from the command
# line, as a user runs them: PyTorch's exported MLP (tests/reference/onnx)
# trained on an .npz and on an x.npy + labels.npy directory written by
# NumPy (float16/32/64 samples, int8/32/64 and uint8 labels); the gradient of one step on
# the whole batch equals PyTorch's (the fixture's); names lists the file's
# value names and anchors take them; graph dumps show model.onnx:<node>;
# eval; GPT-2 trained on int64 token ids (and one beyond int32 refused); and the errors: data that does not fit the model, an op the importer
# lacks (the MLP with its Relu op type renamed STFT), a missing file, bad --input / --loss, float labels;
# --input-value binds a shape input at import (a Reshape whose shape is a graph input). Every check
# prints `ok ...` or `FAIL ...`; the script exits non-zero if any failed.
# needs: onnx npz
set -u

BUILD=${TS_BUILD_DIR:?set TS_BUILD_DIR to the CMake build directory}
SRC=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=$BUILD/tensorscope
FIX=$SRC/tests/reference/onnx
PY=/usr/bin/python3 # Debian's python3-numpy lives here

. "$SRC/tests/support/cli_checks.sh"
[ -x "$BIN" ] || { fail "$BIN is missing: build the CLI first"; finish; }

T=$(mktemp -d "${TMPDIR:-/tmp}/ts_onnx_cli.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
expect() { # expect NAME RC REGEX MESSAGE: status and stderr
    if [ "$rc" -eq "$2" ] && has "$1.err" "$3"; then ok "$4 (exit $2)"; else fail "$4: exit $rc, stderr:"; show "$1.err"; fi
}

M=$FIX/mlp_op13.onnx
# the fixture's batch as data (float64 x, int32 labels), a bigger random set
# as an .npz with a held-out split, and a directory of float32/int64 arrays
$PY - "$FIX/mlp_op13.npz" <<'PYEOF' || fail "numpy writes the data"
import sys, numpy as np
f = np.load(sys.argv[1])
np.savez("batch.npz", x=f["x"].astype(np.float64), labels=f["labels"].astype(np.int32))
np.save("grad_fc1_weight.npy", f["grad/fc1.weight"])
np.savez("cin.npz", x=f["x"])
np.savez("cref.npz", out=f["out"])
rng = np.random.default_rng(0)
x = rng.standard_normal((300, 1, 4, 4)).astype(np.float32)
y = np.argmax(x.reshape(300, 16) @ rng.standard_normal((16, 5)), 1)
np.savez("data.npz", x=x[:240], labels=y[:240], x_heldout=x[240:], labels_heldout=y[240:].astype(np.uint8))
import os
os.mkdir("dir")
np.save("dir/x.npy", x)
np.save("dir/labels.npy", y)
np.savez("wrong.npz", x=np.zeros((10, 1, 5, 5), np.float32), labels=np.zeros(10, np.int64))
np.savez("floatlabels.npz", x=x, labels=y.astype(np.float32))
np.savez("half.npz", x=x.astype(np.float16), labels=y.astype(np.int8))
np.savez("images.npz", x=rng.standard_normal((48, 3, 32, 32)).astype(np.float32), labels=rng.integers(0, 10, 48))
PYEOF

# one SGD step on the fixture's whole batch (order-free mean): PyTorch's gradient
run grad "$BIN" train --model "$M" --data batch.npz --batch-size 4 --holdout 0 --run-single-step --lr 0 \
    --anchor Gradient___fc1.weight --dump-npy dump --quiet
if [ "$rc" -eq 0 ] && $PY - <<'PYEOF'; then ok "train --model mlp.onnx: the gradient of fc1.weight equals PyTorch's (1e-4)"; else fail "gradient against PyTorch"; show grad.err; fi
import numpy as np, glob
got = np.load(glob.glob("dump/Gradient___fc1.weight*.npy")[0])
want = np.load("grad_fc1_weight.npy")
err = np.max(np.abs(got - want) / (np.abs(want) + 1e-6))
print("     max rel error", err)
assert got.shape == want.shape and err < 1e-4
PYEOF

run cmp "$BIN" compare --model "$M" --inputs cin.npz --reference cref.npz
[ "$rc" -eq 0 ] && has cmp.out "^PASS +out +f32\[4,5\]" && ok "compare --model mlp.onnx against PyTorch's output, by the file's output name" ||
    { fail "compare with an ONNX model"; show cmp.out; show cmp.err; }

run npz "$BIN" train --model "$M" --data data.npz --epochs 2 --batch-size 20 --lr 0.1 --anchor 'Gradient___fc2*' --stats --quiet
if [ "$rc" -eq 0 ] && has npz.out "^trained 24 runs .*: loss [0-9.]+  held-out accuracy" && has npz.out "Gradient___fc2.weight" &&
    has npz.out "trained 24 runs"; then ok "train on an .npz with x_heldout: epochs, held-out accuracy, stats of anchored gradients"
else fail "train on an .npz"; show npz.out; show npz.err; fi

run dir "$BIN" train --model "$M" --data dir --epochs 1 --batch-size 30 --quiet --loss cross_entropy
if [ "$rc" -eq 0 ] && has dir.out "trained 9 runs"; then ok "train on x.npy + labels.npy (10% held out: 270 training samples, 9 batches of 30)"
else fail "train on a directory of .npy"; show dir.out; show dir.err; fi

run half "$BIN" train --model "$M" --data half.npz --epochs 1 --batch-size 30 --quiet
[ "$rc" -eq 0 ] && has half.out "trained 9 runs" && ok "float16 samples and int8 labels (NumPy's narrow types) are read" ||
    { fail "float16 / int8 data"; show half.err; }

run outp "$BIN" train --model "$M" --data dir --batch-size 30 --run-single-step --quiet --output /fc3/Gemm_output_0 --anchor Gradient___fc3/Gemm:0
[ "$rc" -eq 0 ] && has outp.out "Gradient___fc3/Gemm:0 f32\[30,5\]" && ok "--output puts the loss on another tensor (the logits before LogSoftmax)" ||
    { fail "--output"; show outp.out; show outp.err; }

# the kind of line the issue expects a user to type: a ResNet-18 export
run rn "$BIN" train --model "$FIX/resnet18_train_op15.onnx" --data images.npz --batch-size 8 --anchor 'Gradient___layer4*' --stats --quiet
if [ "$rc" -eq 0 ] && has rn.out "Gradient___layer4.0.conv1.weight" && has rn.out "layer4.0.bn1/BatchNormalization:0" &&
    has rn.out "^trained [0-9]+ runs .*: loss"; then ok "train --model resnet18.onnx --anchor 'Gradient___layer4*' --stats"
else fail "train an imported ResNet-18"; show rn.out; show rn.err; fi

run mse "$BIN" train --model "$M" --data dir --epochs 1 --batch-size 30 --quiet --loss mse
[ "$rc" -eq 0 ] && has mse.out "^trained [0-9]+ runs .*: loss" && ok "--loss mse trains against one-hot labels" || { fail "--loss mse"; show mse.err; }

run alias "$BIN" train --model "$M" --data dir --batch-size 30 --run-single-step --quiet --anchor /fc1/Gemm_output_0 --anchor 'Gradient___/fc2/Gemm_output_0'
if [ "$rc" -eq 0 ] && has alias.out "/fc1/Gemm_output_0 f32\[30,12\]" && has alias.out "Gradient___/fc2/Gemm_output_0 f32\[30,10\]"; then
    ok "anchors take the file's value names (and behind Gradient___)"
else fail "anchors by the file's names"; show alias.out; show alias.err; fi

run names "$BIN" names --model "$M"
if [ "$rc" -eq 0 ] && has names.out "^fc1\.weight$" && has names.out "^fc1/Gemm:0$" && has names.out "^/fc1/Gemm_output_0 -> fc1/Gemm:0$" &&
    has names.out "^out -> LogSoftmax:0$"; then ok "names lists parameters, op outputs and the file's value names"
else fail "names --model"; show names.out 40; fi

run graph "$BIN" graph --model "$M" --locations
[ "$rc" -eq 0 ] && has graph.out "fc2/Gemm:0 = Add.*@ mlp_op13.onnx:3 \(/fc2/Gemm\)" && ok "graph --locations shows mlp_op13.onnx:<node> (<node name>)" ||
    { fail "graph --locations"; show graph.out 20; }

run eval "$BIN" eval --model "$M" --data data.npz --batch-size 20
[ "$rc" -eq 0 ] && has eval.out "eval: 60 images" && ok "eval on x_heldout" || { fail "eval"; show eval.out; show eval.err; }

run wrong "$BIN" train --model "$M" --data wrong.npz --batch-size 5 --quiet
expect wrong 2 "samples of f32\[5,1,5,5\] but the model's input 'x' is f32\[5,1,4,4\]" "data whose samples do not fit the model's input"
run flab "$BIN" train --model "$M" --data floatlabels.npz --quiet
expect flab 1 "labels are f32; class labels must be integers" "float labels"
$PY - "$M" sign.onnx <<'PYEOF' || fail "python writes sign.onnx"
import sys
b = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(b.replace(b"\x22\x04Relu", b"\x22\x04STFT"))
PYEOF
run sign "$BIN" train --model sign.onnx --data data.npz --quiet
expect sign 1 "node [0-9]+ '/Relu' \(STFT, opset 13\): op type STFT is not supported yet; tensorscope imports: Abs, Acos" "an op the importer lacks"
# GPT-2's int64 token ids and labels, as PyTorch exported them, fed by --data
$PY - "$FIX/gpt2_op13.npz" <<'PYEOF' || fail "numpy writes the token data"
import sys, numpy as np
f = np.load(sys.argv[1])
x, y = np.tile(f["x"], (10, 1)), np.tile(f["labels"], (10, 1))
np.savez("ids.npz", x=x, labels=y)
x[3, 4] = 2**31
np.savez("bigids.npz", x=x, labels=y)
PYEOF
run ids "$BIN" train --model "$FIX/gpt2_op13.onnx" --data ids.npz --epochs 1 --batch-size 2 --quiet
[ "$rc" -eq 0 ] && has ids.out "trained 9 runs" && ok "GPT-2 trains on int64 token ids from --data (its i64 input fed the data's i32 ids)" ||
    { fail "int64 token ids by --data"; show ids.out; show ids.err; }
run bigids "$BIN" train --model "$FIX/gpt2_op13.onnx" --data bigids.npz --epochs 1 --batch-size 2 --quiet
expect bigids 1 "x\[28\] is 2147483648; integer samples \(token ids\) must be within int32" "a token id beyond int32 is refused, not wrapped"
# compare feeds GPT-2's int64 ids (its int64 input is i64: exact); one beyond the vocabulary is refused naming it (int32 would wrap it onto row 3)
$PY - "$FIX/gpt2_op13.npz" <<'PYEOF' || fail "numpy writes the compare inputs"
import sys, numpy as np
f = np.load(sys.argv[1])
np.savez("gin.npz", x=f["x"])
np.savez("gref.npz", out=f["out"])
x = f["x"].copy()
x[0, 0] = 2**32 + 3
np.savez("gbig.npz", x=x)
PYEOF
run gcmp "$BIN" compare --model "$FIX/gpt2_op13.onnx" --inputs gin.npz --reference gref.npz
[ "$rc" -eq 0 ] && has gcmp.out "^PASS +out" && ok "compare feeds int64 token ids to GPT-2 and matches PyTorch's output" ||
    { fail "compare with int64 ids"; show gcmp.out; show gcmp.err; }
run gbig "$BIN" compare --model "$FIX/gpt2_op13.onnx" --inputs gbig.npz --reference gref.npz
expect gbig 1 "'x'\[0\] = 4294967299 is not an index in \[-32, 32\) for wte/Gather:0" "compare refuses an id beyond int32, naming its exact value, instead of wrapping it"
run missing "$BIN" train --model nothere.onnx --data data.npz --quiet
expect missing 1 "cannot open ONNX model nothere.onnx" "a missing model file"
run badin "$BIN" train --model "$M" --data data.npz --input x:4xq --quiet
expect badin 2 "--input x:4xq" "a malformed --input"
run badloss "$BIN" train --model "$M" --data data.npz --loss hinge --quiet
expect badloss 2 "--loss must be cross_entropy, nll or mse" "an unknown --loss"
run dyn "$BIN" names --model "$FIX/mlp_dynamic_op13.onnx" --batch-size 8
expect dyn 1 "input 'x' has the dynamic shape batchx1x4x4; give its static shape .*--input x:" "a dynamic shape not given says which --input to give"
run dyn2 "$BIN" train --model "$FIX/mlp_dynamic_op13.onnx" --input x:1x1x4x4 --data dir --batch-size 30 --run-single-step --quiet
[ "$rc" -eq 0 ] && has dyn2.out "trained 1 runs" && ok "--input gives it (dim 0 from --batch-size)" || { fail "--input for a dynamic batch"; show dyn2.err; }
# y = Reshape(x, shape) with `shape` a graph input, protobuf written by hand
$PY - <<'PYEOF' || fail "python writes reshape.onnx"
def varint(n):
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out
def field(num, payload):  # length-delimited
    return varint(num << 3 | 2) + varint(len(payload)) + payload
def intf(num, v):
    return varint(num << 3) + varint(v)
def value(name, elem, dims):
    shape = b"".join(field(1, intf(1, d)) for d in dims)
    return field(1, name.encode()) + field(2, field(1, intf(1, elem) + (field(2, shape) if dims else b"")))
node = field(1, b"x") + field(1, b"shape") + field(2, b"y") + field(3, b"r") + field(4, b"Reshape")
graph = field(1, node) + field(2, b"g") + field(11, value("x", 1, [2, 6])) + field(11, value("shape", 7, [2])) + field(12, value("y", 1, []))
model = intf(1, 8) + field(8, field(1, b"") + intf(2, 13)) + field(7, graph)
open("reshape.onnx", "wb").write(model)
import numpy as np
np.save("shape.npy", np.array([4, 3], np.int64))
PYEOF
run unbound "$BIN" graph --model reshape.onnx
expect unbound 1 "bind its value at import" "a shape fed as a graph input, not bound: the error says to bind it"
run bound "$BIN" graph --model reshape.onnx --input-value shape=3,-1
[ "$rc" -eq 0 ] && has bound.out "Reshape.*f32\[3,4\]" && ok "--input-value shape=3,-1 binds it at import: y is [3,4]" ||
    { fail "--input-value NAME=V,V"; show bound.out; show bound.err; }
run boundnpy "$BIN" graph --model reshape.onnx --input-value shape=shape.npy
[ "$rc" -eq 0 ] && has boundnpy.out "Reshape.*f32\[4,3\]" && ok "--input-value shape=shape.npy binds an .npy" ||
    { fail "--input-value NAME=FILE.npy"; show boundnpy.out; show boundnpy.err; }
run badval "$BIN" graph --model reshape.onnx --input-value shape=3,x
expect badval 2 "is not a list of integers joined by commas" "a malformed --input-value"
for cmd in graph train; do # a name that is no input of the model: said so, with the inputs (not "unknown model")
    run noinput "$BIN" $cmd --model reshape.onnx --input-value shapes=3,-1
    if [ "$rc" -eq 1 ] && has noinput.err "has no input named 'shapes'; its inputs: 'x', 'shape'" && ! has noinput.err "unknown model"; then
        ok "$cmd --input-value NAME=V naming no input: the inputs are listed (exit 1)"
    else fail "$cmd --input-value naming no input: exit $rc"; show noinput.err; fi
done

# ---- docs/train.md's TS_LOG_VMODULE=onnx=5: the importer's lines at debug (a
# line per file) and trace (each node, named as in the file), no other
# module's; memwatch=4, a source file's name, raises that file only
L=$FIX/lenet_op13.onnx
run vmod env TS_LOG_VMODULE=onnx=5 "$BIN" names --model "$L"
$PY - "$L" > vmod.py.out 2>&1 <<'PYEOF'
import re, sys
path = sys.argv[1]
data = open(path, "rb").read()
lines = [l for l in open("vmod.err").read().splitlines() if l.startswith("[tensorscope")]
groups = []  # each import of the file: its debug line, then its nodes' trace lines
for l in lines:
    if l.startswith("[tensorscope D] "):
        groups.append((l, []))
    else:
        assert groups and l.startswith("[tensorscope T] "), "a line of another module, or before the file's: " + l
        groups[-1][1].append(l)
assert groups, lines
for head, body in groups:
    m = re.fullmatch(r"\[tensorscope D\] (.*): opset (\d+), (\d+) nodes, \d+ initializers, 1 inputs, 1 outputs", head)
    assert m and m.group(1) == path and m.group(2) == "13", head
    nodes = [re.fullmatch(r"\[tensorscope T\] (.*): node (\d+) '([^']*)' \((\w+)\) -> (.*)", l) for l in body]
    assert all(nodes) and len(nodes) == int(m.group(3)), (len(nodes), m.group(3))
    assert [int(n.group(2)) for n in nodes] == list(range(len(nodes)))
    for n in nodes:  # each node's name and op type are the file's
        assert n.group(3).encode() in data and n.group(4).encode() in data, n.group(0)
PYEOF
[ "$rc" -eq 0 ] && ! [ -s vmod.py.out ] && ok "TS_LOG_VMODULE=onnx=5: each import of the file a debug line (opset 13), then a trace line per node in order, named as in the file; no other module's line" ||
    { fail "TS_LOG_VMODULE=onnx=5"; show vmod.err; show vmod.py.out; }
run vfile env TS_LOG_VMODULE=onnx_torch=5 "$BIN" names --model "$L"
[ "$rc" -eq 0 ] && ! hasf vfile.err "[tensorscope" && ok "TS_LOG_VMODULE=onnx_torch=5 (a file of the importer that logs nothing for this model): no line" ||
    { fail "TS_LOG_VMODULE=onnx_torch=5"; show vfile.err; }
run vpre env TS_LOG_VMODULE=onnx=4 TS_LOG_PREFIX=1 "$BIN" names --model "$L"
[ "$rc" -eq 0 ] && has vpre.err "^\[tensorscope D\] [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}: src/import/onnx\.c:[0-9]+\] .*: opset 13," &&
    ok "TS_LOG_PREFIX=1: the time and src/import/onnx.c:LINE before the line" || { fail "TS_LOG_PREFIX=1"; show vpre.err; }
finish
