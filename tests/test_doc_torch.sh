#!/bin/bash
# test_doc_torch.sh -- docs/python.md shows a user's torch module through the
# whole workflow, and the page's samples run (tests/support/doc_samples.py,
# as test_doc_samples.sh runs every page): the section "A module from end
# to end" holds samples run, none skipped, that train the module
# (ts.training_model), watch it (Options.watch), run it for inference
# (ts.inference_model), compare it with PyTorch layer by layer
# (tensorscope_ref.dump and `tensorscope compare`) and copy the weights back
# (copy_weights_to_torch); each of them passes.
# needs: onnx npz
set -u
BUILD=${TS_BUILD_DIR:?set TS_BUILD_DIR to the CMake build directory}
SRC=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
. "$SRC/tests/support/sanitizer_preload.sh"
sanitizer_preload "$BUILD" || { echo "FAIL cannot find the sanitizer runtime to preload for the build in $BUILD"; exit 1; }
exec /usr/bin/python3 - "$SRC" "$BUILD" "$SANITIZER_PRELOAD" <<'PY'
import os, re, subprocess, sys
src, build, preload = sys.argv[1:]
sys.path.insert(0, os.path.join(src, "tests", "support"))
from doc_samples import blocks  # noqa: E402
page = os.path.join(src, "docs", "python.md")
SECTION = "### A module from end to end"
text = open(page, encoding="utf-8").read().split("\n")
failed = 0
def check(ok, what):
    global failed
    print(f"{'ok  ' if ok else 'FAIL'} {what}")
    failed += not ok
if SECTION not in text:
    check(False, f"docs/python.md has a section '{SECTION}'")
    sys.exit(1)
first = text.index(SECTION) + 1
last = next((i for i in range(first, len(text)) if text[i].startswith("#")), len(text)) + 1
mine = [b for b in blocks(page) if first <= b[0] <= last and b[1] in ("python", "console")]
code = "\n".join("\n".join(b[2]) for b in mine if not b[3])
check(mine and all(not b[3] for b in mine), f"docs/python.md:{first}: its samples are run, none marked skip or fragment")
for what, pattern in (("trains the module", r"ts\.training_model\(net"), ("watches it", r"\.watch\("),
                      ("runs it for inference", r"ts\.inference_model\("),
                      ("records PyTorch's layers", r"tensorscope_ref\.dump\("),
                      ("compares layer by layer", r"^\$ tensorscope compare .*--reference"),
                      ("copies the weights back", r"\.copy_weights_to_torch\(\)")):
    check(re.search(pattern, code, re.M), f"... the section {what} ({pattern})")
cmd = [sys.executable, os.path.join(src, "tests", "support", "doc_samples.py"), "--build", build, "--source", src,
       "--python-preload", preload, page]
r = subprocess.run(cmd, capture_output=True, text=True)
print(r.stdout, end="")
ran = {int(m.group(2)): m.group(1) for m in re.finditer(r"^(ok  |FAIL|skip) docs/python\.md:(\d+)", r.stdout, re.M)}
for line, lang, _body, _marker in mine:
    if lang == "python" or any(l.startswith("$ ") for l in _body):
        check(ran.get(line) == "ok  ", f"docs/python.md:{line} ({lang}) runs and prints what it shows")
check(r.returncode == 0, "every sample of docs/python.md passes")
print(f"test_doc_torch: {'FAIL' if failed else 'PASS'}")
sys.exit(1 if failed else 0)
PY
