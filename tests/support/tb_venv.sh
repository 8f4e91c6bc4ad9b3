# tb_venv.sh -- sourced by the TensorBoard tests: a venv with a pinned
# TensorBoard (and the protobuf it works with) under $BUILD/tb-venv, made once
# and reused while the pins match (py_venv.sh). Needs PyPI the first time:
# without it the caller's fail() is called; the tests fail, they do not skip.
# Sets VENV. The caller defines BUILD and fail().
TB_VERSION=2.21.0
PROTOBUF_VERSION=7.36.2
VENV=$BUILD/tb-venv
. "$(dirname "${BASH_SOURCE[0]}")/py_venv.sh"

tb_venv_ensure() {
    py_venv_ensure "$VENV" "tensorboard==$TB_VERSION" "protobuf==$PROTOBUF_VERSION"
    flock -u 9
}
