# torch_venv.sh -- sourced by bench/run.sh: a venv with the current PyTorch
# from PyPI (the peer users run today) under $BUILD/torch-venv, made once and
# reused while the pin matches. Needs PyPI the first time (a large download);
# without it torch_venv_ensure returns 1 with a message on stderr and the
# benchmark rows against PyTorch 2.x report "failed".
# Sets TORCH_VENV_PY (the venv's python). The caller defines BUILD.
TORCH_VERSION=${TS_BENCH_TORCH_VERSION:-2.15.0}
TORCH_VENV=$BUILD/torch-venv
TORCH_VENV_PY=$TORCH_VENV/bin/python

torch_venv_ensure() {
    local stamp=$TORCH_VENV/.tensorscope-torch-$TORCH_VERSION rc=0
    exec 8> "$BUILD/torch-venv.lock" # never two builders at once
    flock 8
    if [ -f "$stamp" ]; then
        echo "ok   reusing $TORCH_VENV (torch $TORCH_VERSION)" >&2
    else
        rm -rf "$TORCH_VENV"
        echo "..   installing torch==$TORCH_VERSION from PyPI into $TORCH_VENV (once; a large download)" >&2
        # no system site-packages: Debian's torch 1.13 must not shadow it
        if ! /usr/bin/python3 -m venv "$TORCH_VENV"; then
            echo "bench: cannot create a venv in $TORCH_VENV" >&2
            rc=1
        elif ! "$TORCH_VENV/bin/pip" install --quiet --disable-pip-version-check --timeout 60 --retries 2 \
            "torch==$TORCH_VERSION" numpy >&2; then
            rm -rf "$TORCH_VENV"
            echo "bench: pip could not install torch==$TORCH_VERSION from PyPI (no network or no index?);" \
                 "the rows against PyTorch 2.x fail" >&2
            rc=1
        else
            touch "$stamp"
            echo "ok   installed torch $TORCH_VERSION into $TORCH_VENV" >&2
        fi
    fi
    flock -u 8
    exec 8>&-
    return $rc
}
