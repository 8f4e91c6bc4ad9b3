#!/bin/bash
# test_doc_samples.sh -- every console, shell and Python sample of README.md
# and docs/*.md runs and prints what the page shows (tests/support/
# doc_samples.py: numbers masked, `...` for lines left out; the samples of
# one page share a scratch directory, in order). A sample that cannot run
# here carries `<!-- sample: skip REASON -->` or `<!-- sample: fragment
# REASON -->` on the line before its fence and is listed with its reason.
# Python samples use Debian's /usr/bin/python3 (NumPy, PyTorch), with the
# sanitizer's runtime preloaded in a sanitizer build.
# needs: plots onnx npz
set -u
BUILD=${TS_BUILD_DIR:?set TS_BUILD_DIR to the CMake build directory}
SRC=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
. "$SRC/tests/support/sanitizer_preload.sh"
sanitizer_preload "$BUILD" || { echo "FAIL cannot find the sanitizer runtime to preload for the build in $BUILD"; exit 1; }
exec /usr/bin/python3 "$SRC/tests/support/doc_samples.py" --build "$BUILD" --source "$SRC" --python-preload "$SANITIZER_PRELOAD"
