# tb_venv.sh -- sourced by the TensorBoard tests: a venv with a pinned
# TensorBoard (and the protobuf it works with) under $BUILD/tb-venv, made once
# and reused while the pins match. Needs PyPI the first time: without it the
# caller's fail() is called; the tests fail, they do not skip.
# Sets VENV. The caller defines BUILD and fail().
TB_VERSION=2.21.0
PROTOBUF_VERSION=7.36.2
VENV=$BUILD/tb-venv

tb_venv_ensure() {
    local stamp=$VENV/.tensorscope-tensorboard-$TB_VERSION-protobuf-$PROTOBUF_VERSION
    exec 9> "$BUILD/tb-venv.lock" # never two builders at once (ctest -j)
    flock 9
    if [ -f "$stamp" ]; then
        echo "ok   reusing $VENV (tensorboard $TB_VERSION, protobuf $PROTOBUF_VERSION)"
    else
        rm -rf "$VENV"
        # Debian's numpy comes from the system site-packages; the rest from PyPI.
        /usr/bin/python3 -m venv --system-site-packages "$VENV" || fail "cannot create a venv in $VENV"
        if ! "$VENV/bin/pip" install --quiet --disable-pip-version-check --timeout 30 --retries 2 \
            "tensorboard==$TB_VERSION" "protobuf==$PROTOBUF_VERSION"; then
            rm -rf "$VENV"
            fail "pip could not install tensorboard==$TB_VERSION protobuf==$PROTOBUF_VERSION from PyPI (no network or no index?); this test needs them, it does not skip"
        fi
        touch "$stamp"
        echo "ok   installed tensorboard $TB_VERSION and protobuf $PROTOBUF_VERSION into $VENV"
    fi
    flock -u 9
}
