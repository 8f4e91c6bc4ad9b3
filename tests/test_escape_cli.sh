#!/bin/bash
# test_escape_cli.sh -- an ONNX file whose names hold terminal control
# sequences (a value named ESC ]0;pwned BEL ESC [2J, which would retitle the
# window and clear the screen, and a node named ESC ]0; BEL) through the
# CLI: `graph --locations`, `names --anchor` with such a name, and `train`
# failing on the node (its op type renamed STFT, which the importer lacks).
# No raw ESC or BEL reaches stdout or stderr; the names show as \x1b, \x07.
# needs: onnx
set -u

. "$(dirname "$0")/support/cli_checks.sh"
cli_paths
FIX=$SRC/tests/reference/onnx
PY=/usr/bin/python3

T=$(mktemp -d "${TMPDIR:-/tmp}/ts_escape_cli.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1

# the same lengths, so the protobuf stays valid: "/Relu_output_0" (14 bytes),
# the node name "/Relu" (5)
"$PY" - "$FIX/mlp_op13.onnx" <<'PYEOF' || fail "python writes evil.onnx"
import sys
b = open(sys.argv[1], "rb").read()
evil = b"\x1b]0;pwned\x07\x1b[2J"
assert len(evil) == 14 and b.count(b"/Relu_output_0") == 2 and b.count(b"\x1a\x05/Relu") == 1
b = b.replace(b"/Relu_output_0", evil).replace(b"\x1a\x05/Relu", b"\x1a\x05\x1b]0;\x07")
open("evil.onnx", "wb").write(b)
open("evil_selu.onnx", "wb").write(b.replace(b"\x22\x04Relu", b"\x22\x04STFT", 1))
PYEOF

raw() { LC_ALL=C grep -q $'[\x1b\x07]' "$@"; } # a raw ESC or BEL in any of the files

run graph "$BIN" graph --model evil.onnx --locations
[ "$rc" -eq 0 ] && ! raw graph.out graph.err && hasf graph.out '(\x1b]0;\x07)' \
    && ok "graph --locations shows the node name escaped: $(grep -o '@ evil.onnx:2 .*' graph.out)" || { fail "graph --locations: exit $rc"; show graph.out 20; }

run names "$BIN" names --model evil.onnx --anchor $'Relu\x1b]0;pwned\x07\x1b[2J'
[ "$rc" -ne 0 ] && ! raw names.out names.err && hasf names.err "no tensor named 'Relu\\x1b]0;pwned\\x07\\x1b[2J'" \
    && ok "names --anchor with an unknown name holding ESC and BEL: the error shows them escaped" || { fail "names --anchor: exit $rc"; show names.err; }

run selu "$BIN" train --model evil_selu.onnx --max-steps 1 --quiet
[ "$rc" -ne 0 ] && ! raw selu.out selu.err && hasf selu.err "node 2 '\\x1b]0;\\x07' (STFT, opset 13): op type STFT is not supported" \
    && ok "an import error naming the node shows its name escaped" || { fail "the import error: exit $rc"; show selu.err; }

finish
