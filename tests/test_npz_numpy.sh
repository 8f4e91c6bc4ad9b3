#!/usr/bin/env bash
# test_npz_numpy.sh -- .npz archives checked against NumPy both ways: NumPy
# loads what tensorscope writes (`test_npz --write`), and tensorscope reads
# what numpy.savez and numpy.savez_compressed write (`test_npz --read`).
# needs: npz
set -euo pipefail

PY=/usr/bin/python3 # Debian's interpreter, the one with numpy
BUILD=${TS_BUILD_DIR:?set TS_BUILD_DIR to the CMake build directory}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ts_npz_numpy.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

"$BUILD/test_npz" --write "$tmp/ours.npz"
"$PY" - "$tmp" <<'PYEOF'
import sys, numpy as np
d = sys.argv[1]
z = np.load(f"{d}/ours.npz")
ok = (sorted(z.files) == ["labels", "w"]
      and z["w"].dtype == np.float32 and z["w"].shape == (2, 3)
      and np.array_equal(z["w"], (np.arange(6) * 0.5 - 1).reshape(2, 3))
      and z["labels"].dtype == np.int32 and np.array_equal(z["labels"], 3 - np.arange(4)))
print(("ok  " if ok else "FAIL") + " numpy loads the .npz tensorscope wrote:", {k: (z[k].dtype, z[k].shape) for k in z.files})
x = (np.arange(4, dtype=np.float32) + 0.25).reshape(2, 2)
y = np.arange(3, dtype=np.int64) * 10
np.savez(f"{d}/plain.npz", x=x, y=y, z=np.float64(2.5))
np.savez_compressed(f"{d}/deflated.npz", x=x, y=y, z=np.float64(2.5))
sys.exit(0 if ok else 1)
PYEOF
"$BUILD/test_npz" --read "$tmp/plain.npz"
"$BUILD/test_npz" --read "$tmp/deflated.npz"
