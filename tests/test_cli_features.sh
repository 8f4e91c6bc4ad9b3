#!/bin/bash
# test_cli_features.sh -- the CLI and the optional features: --version lists
# them as configure built them (TS_FEATURES, from ctest), and every flag
# that needs one the build lacks ends the command before any work (exit 1,
# no training, nothing written) with a message naming the flag and the
# package to install. In a full build only the list is checked; the
# minimal core (every TS_WITH_* off, .ci/run's build-core/) checks all.
set -u

BUILD=${TS_BUILD_DIR:?set TS_BUILD_DIR to the CMake build directory}
SRC=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
# shellcheck source=support/cli_checks.sh
source "$SRC/tests/support/cli_checks.sh"
cli_paths

T=$(mktemp -d "${TMPDIR:-/tmp}/ts_features.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1

# ---- --version: the features line agrees with configure
run version "$BIN" --version
want=""
for f in plots onnx tensorboard npz debug-bundle unwind mpi cuda; do
    case " ${TS_FEATURES-} " in *" $f "*) yn=yes ;; *) yn=no ;; esac
    want="$want${want:+, }$f $yn"
done
check "--version: 'features: $want' (configure: '${TS_FEATURES-}')" \
    eval '[ $rc -eq 0 ] && [ -n "${TS_FEATURES+x}" ] && hasf version.out "features: $want"' || show version.out

# ---- a flag whose feature is missing: exit 1 before training, nothing written
refused() { # refused FEATURE PACKAGE FLAG CMD...: when FEATURE is missing, CMD is refused
    local feature=$1 package=$2 flag=$3
    shift 3
    has_feature "$feature" && return
    rm -rf out && mkdir out
    run refused "$@"
    check "without $feature, $flag: exit 1 before any work, naming $flag and 'apt-get install $package'" \
        eval '[ $rc -eq 1 ] && hasf refused.err "$flag: " && hasf refused.err "apt-get install $package" &&
              hasf refused.err "then rebuild tensorscope" && ! has refused.out "^(epoch|trained)" && [ -z "$(ls out)" ]' ||
        show refused.err
}
M=(--data "$DATA" --quiet --max-steps 1)
refused plots libcairo2-dev --histogram "$BIN" train "${M[@]}" --histogram out/h.png
refused plots libcairo2-dev --plot "$BIN" train "${M[@]}" --plot out/p.png
refused plots libcairo2-dev --feature-maps "$BIN" train "${M[@]}" --model cnn --feature-maps Relu:0 --picture-dir out
refused plots libcairo2-dev --attention-map "$BIN" train --model gpt --data "$SRC/data/tinyshakespeare" --steps 1 \
    --attention-map 'blocks.0.attn/Softmax:0' --attention-map-dir out
refused tensorboard libprotobuf-c-dev --tensorboard "$BIN" train "${M[@]}" --tensorboard out/tb
refused onnx libprotobuf-c-dev --model "$BIN" train "${M[@]}" --model "$SRC/tests/reference/onnx/mlp.onnx"
refused npz libarchive-dev --weights "$BIN" train "${M[@]}" --weights out/w.npz
refused npz libarchive-dev --data "$BIN" train --data out/d.npz --max-steps 1
refused npz libarchive-dev --inputs "$BIN" compare --inputs out/in.npz --reference out/ref.npz
refused plots libcairo2-dev --plot "$BIN" compare --a out/a --b out/b --plot out/e.png
refused debug-bundle libarchive-dev debug-run "$BIN" debug-run --outfile out/b.tar.gz -- touch out/ran
refused cuda nvidia-cuda-toolkit --device "$BIN" train "${M[@]}" --device cuda
# a built-in model with no flag that needs a feature trains in any build
run core "$BIN" train "${M[@]}"
check "train without such flags: exit 0 in any build" eval '[ $rc -eq 0 ]' || show core.err
finish
