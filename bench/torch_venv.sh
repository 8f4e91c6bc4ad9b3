# torch_venv.sh -- sourced by bench/run.sh: a venv with the current PyTorch
# from PyPI (the peer users run today) under $BUILD/torch-venv, made once and
# reused while the pin matches (tests/support/py_venv.sh). Needs PyPI the
# first time (a large download); without it torch_venv_ensure returns 1 with
# the reason on stderr and the rows against PyTorch 2.x report "failed".
# Sets TORCH_VENV_PY (the venv's python). The caller defines BUILD.
TORCH_VERSION=${TS_BENCH_TORCH_VERSION:-2.15.0}
TORCH_VENV=$BUILD/torch-venv
TORCH_VENV_PY=$TORCH_VENV/bin/python
. "$(dirname "${BASH_SOURCE[0]}")/../tests/support/py_venv.sh"

torch_venv_ensure() {
    # the venv sees Debian's site-packages, but its own torch comes first
    ( fail() { echo "bench: $*" >&2; exit 1; }
      py_venv_ensure "$TORCH_VENV" "torch==$TORCH_VERSION" >&2 )
}
