"""What tests/onnx_rnn.py and tests/onnx_rnn_torch.py share: the checks'
tally and tolerances (no package beyond tensorscope: the second runs under
Debian's Python, the first in the onnx venv)."""
import sys

import tensorscope as ts

FWD_RTOL = 1e-4
GRAD_RTOL = 2e-3  # of the largest gradient of that tensor
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def has_tensor(g, name):
    try:
        g.tensor(name)
        return True
    except ts.NotFoundError:
        return False


def finish(name):
    if failures:
        print(f"{name}: FAIL ({len(failures)} checks)")
        sys.exit(1)
    print(f"{name}: PASS")
