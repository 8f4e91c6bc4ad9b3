#!/usr/bin/env bash
# test_npy_numpy.sh -- .npy files checked against NumPy itself, both ways:
# NumPy loads what tensorscope writes (`test_npy --write`), and tensorscope
# reads what NumPy writes (`test_npy --read`). The expected values are the
# formulas listed at the top of tests/test_npy.c.
set -euo pipefail

PY=/usr/bin/python3 # Debian's interpreter, the one with numpy
BUILD=${TS_BUILD_DIR:?set TS_BUILD_DIR to the CMake build directory}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ts_npy_numpy.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

if ! "$PY" -c 'import numpy' 2>/dev/null; then
    echo "FAIL $PY has no numpy: install python3-numpy"
    exit 1
fi

"$BUILD/test_npy" --write "$tmp"

"$PY" - "$tmp" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
failed = 0

def check(name, dtype, shape, values):
    global failed
    a = np.load(f"{d}/{name}")
    with open(f"{d}/{name}", "rb") as f:
        major, minor = np.lib.format.read_magic(f)
        np.lib.format.read_array_header_1_0(f)
        offset = f.tell()
    ok = (a.dtype == np.dtype(dtype) and a.shape == shape and (major, minor) == (1, 0)
          and offset % 64 == 0 and np.array_equal(a, np.asarray(values, dtype=dtype).reshape(shape)))
    print(f"{'ok  ' if ok else 'FAIL'} numpy loads {name}: {a.dtype} {a.shape}, data at {offset}")
    if not ok:
        print("     got", a.ravel()[:8], "want", np.asarray(values).ravel()[:8])
        failed += 1

i = np.arange
check("c_f32.npy", "<f4", (2, 3), i(6) * 0.5 - 1)
check("c_f64.npy", "<f8", (4,), i(4) / 3)
check("c_i32.npy", "<i4", (3, 2), i(6) * 7 - 20)
check("c_i64.npy", "<i8", (2, 2), np.append(i(3, dtype=np.int64) * (1 << 40) - 5, np.iinfo(np.int64).max - 1))
check("c_u8.npy", "|u1", (5, 1), i(5) * 63)
check("c_scalar.npy", "<f4", (), 3.25)
check("c_empty.npy", "<f4", (0, 3), [])
sys.exit(1 if failed else 0)
EOF

"$PY" - "$tmp" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
i = np.arange
np.save(f"{d}/py_f32.npy", (i(24) * 0.25 - 1).astype("<f4").reshape(2, 3, 4))
np.save(f"{d}/py_f64.npy", i(5) / 3)
np.save(f"{d}/py_i32.npy", (i(6) - 3).astype("<i4").reshape(3, 2))
np.save(f"{d}/py_i64.npy", i(4, dtype="<i8") * (1 << 40))
np.save(f"{d}/py_u8.npy", i(256).astype("|u1"))
np.save(f"{d}/py_scalar.npy", np.float64(3.5))
np.save(f"{d}/py_sliced.npy", i(12, dtype="<f4").reshape(3, 4)[:, ::2])
with open(f"{d}/py_v2.npy", "wb") as f:
    np.lib.format.write_array(f, i(6, dtype="<f4").reshape(2, 3), version=(2, 0))
np.save(f"{d}/py_fortran.npy", np.asfortranarray(i(6, dtype="<f4").reshape(2, 3)))
np.save(f"{d}/py_bigendian.npy", i(6, dtype=">f4"))
np.save(f"{d}/py_complex.npy", i(3).astype("<c8"))
EOF

"$BUILD/test_npy" --read "$tmp"
