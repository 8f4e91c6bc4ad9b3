#!/bin/bash
# test_graph_dot.sh -- the DOT graph dump read by Graphviz itself: `dot`
# must accept it (exit 0, no warning) and draw every node with its name,
# including a tensor renamed to `wéird <relu> {a|b}; [x] -> y` and a print op
# whose title holds quotes, a backslash, a newline and a byte that is not
# UTF-8. test_graph_dump --dot FILE writes the dump (tests/test_graph_dump.c);
# the SVG is read with Python's XML parser, so Graphviz's escaping of the
# text does not matter. The same with the backward pass and optimizer step
# (test_graph_dump --dot-backward).
set -euo pipefail

BUILD=${TS_BUILD_DIR:?set TS_BUILD_DIR to the CMake build directory}
PROG=$BUILD/test_graph_dump
fail() { echo "FAIL $*"; exit 1; }

[ -x "$PROG" ] || fail "test program $PROG is missing: build the tests first (cmake --build $BUILD)"
command -v dot > /dev/null || fail "Graphviz's dot is not installed (apt-get install graphviz); this test needs it, it does not skip"

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

"$PROG" --dot "$TMP/mlp.dot" || fail "test_graph_dump --dot exited with $?"
[ -s "$TMP/mlp.dot" ] || fail "no DOT file written"
echo "ok   DOT dump written ($(wc -l < "$TMP/mlp.dot") lines)"

if ! dot -Tsvg "$TMP/mlp.dot" -o "$TMP/mlp.svg" 2> "$TMP/dot.err"; then
    cat "$TMP/dot.err"
    fail "dot -Tsvg rejected the dump"
fi
[ ! -s "$TMP/dot.err" ] || { cat "$TMP/dot.err"; fail "dot printed warnings"; }
echo "ok   dot -Tsvg exits 0 with no warnings"

grep -q '<svg' "$TMP/mlp.svg" || fail "no <svg> element in the output"
echo "ok   output is SVG"

/usr/bin/python3 - "$TMP/mlp.svg" <<'PY' || fail "the SVG does not draw what the graph holds"
import sys
import xml.etree.ElementTree as ET

ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
texts = ["".join(t.itertext()) for t in root.iter(ns + "text")]
nodes = [g for g in root.iter(ns + "g") if g.get("class") == "node"]
edges = [g for g in root.iter(ns + "g") if g.get("class") == "edge"]
names = ["x", "labels", "Flatten:0", "fc1.weight", "fc1.bias", "fc1/MatMul:0", "fc1/Add:0",
         "w\u00e9ird <relu> {a|b}; [x] -> y", "Print:0", "fc2.weight", "fc2.bias", "fc2/MatMul:0",
         "fc2/Add:0", "Relu:1", "fc3.weight", "fc3.bias", "fc3/MatMul:0", "fc3/Add:0",
         "LogSoftmax:0", "loss"]
bad = 0
for n in names:
    if n not in texts:
        print("FAIL node %r is not drawn" % n)
        bad = 1
title = 'Print(title="say \\"hi\\\\\\n\\xff")'
if title not in texts:
    print("FAIL the print title is not drawn escaped as %s" % title)
    bad = 1
if len(nodes) != 20 or len(edges) != 19:
    print("FAIL %d nodes and %d edges drawn, want 20 and 19" % (len(nodes), len(edges)))
    bad = 1
if not any("test_graph_dump.c:" in t for t in texts):
    print("FAIL no source location in the labels")
    bad = 1
if not bad:
    print("ok   all 20 node names (the odd one too), the escaped print title, 20 nodes and 19 edges drawn")
sys.exit(bad)
PY

# ---- with the backward pass: Graphviz accepts it, and every derived tensor
# of the model (Gradient___, Accum___, UpdatedVar___, Accl___) is a node, the
# odd name's gradient too, with the backward ops in their cluster
"$PROG" --dot-backward "$TMP/bwd.dot" || fail "test_graph_dump --dot-backward exited with $?"
if ! dot -Tsvg "$TMP/bwd.dot" -o "$TMP/bwd.svg" 2> "$TMP/bwd.err" || [ -s "$TMP/bwd.err" ]; then
    cat "$TMP/bwd.err"
    fail "dot -Tsvg rejected the backward dump or warned"
fi
echo "ok   backward dump: dot -Tsvg exits 0 with no warnings ($(wc -l < "$TMP/bwd.dot") lines)"
/usr/bin/python3 - "$TMP/bwd.svg" "$TMP/bwd.dot.names" <<'PY' || fail "the SVG does not draw the backward pass"
import re
import sys
import xml.etree.ElementTree as ET

ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
texts = ["".join(t.itertext()) for t in root.iter(ns + "text")]
names = open(sys.argv[2], encoding="utf-8").read().split("\n")
derived = [n for n in names if re.match(r"(Gradient|Accum|UpdatedVar|Accl|Accl1|Accl2|Step)___", n)]
bad = 0
missing = [n for n in derived if n not in texts]
if missing or not derived:
    print("FAIL derived tensors not drawn: %s" % missing[:5])
    bad = 1
want = ["Gradient___w\u00e9ird <relu> {a|b}; [x] -> y", "MatMulBackward", "LogSoftmaxBackward", "NllLossBackward",
        "AccumulateMean(micro_batches=2)", "SGD(lr=0.01, momentum=0.9)",
        "backward, once per micro-batch", "optimizer step, after every 2 micro-batches"]
for w in want:
    if w not in texts:
        print("FAIL %r is not drawn" % w)
        bad = 1
clusters = [g for g in root.iter(ns + "g") if g.get("class") == "cluster"]
if len(clusters) != 2:
    print("FAIL %d clusters, want 2 (backward, optimizer step)" % len(clusters))
    bad = 1
if not bad:
    print("ok   all %d derived tensors drawn (the odd name's gradient too), the backward ops, AccumulateMean and SGD, 2 clusters" % len(derived))
sys.exit(bad)
PY

echo "test_graph_dot: PASS"
