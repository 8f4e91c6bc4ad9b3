#!/bin/bash
# test_cli_features.sh -- the CLI and the optional features: --version lists
# them as configure built them (TS_FEATURES, from ctest), `info` the devices
# (a GPU, or why there is none), and every flag
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

# ---- info: the version lines, the CPU, then every GPU or one line saying why
# none (the build lacks CUDA; the machine a GPU); --device one of them, exit 1
# when it is not here, 2 for a name that is no device
run info "$BIN" info
sed -n 1,4p version.out > version4.out
check "info: exit 0, begins with --version's lines" eval '[ $rc -eq 0 ] && [ "$(head -n 4 info.out)" = "$(cat version4.out)" ]' || show info.out
check "--version: 'cpu instructions: ...; kernels LEVEL; bf16 products ROUTE'" \
    has version.out '^cpu instructions: .*kernels (generic|avx2|avx512).*; bf16 products (sbgemm|avx512bf16|f32)' || show version.out
check "info: a line 'cpu: N threads, X GiB memory'" has info.out '^cpu: [1-9][0-9]* threads, [0-9.]+ GiB memory$' || show info.out
run infogpu "$BIN" info --device cuda
if ! has_feature cuda; then
    check "info, built without CUDA: 'cuda: a CUDA device needs tensorscope built with CUDA: ...' after the CPU"         eval 'sed -n 6p info.out | grep -Fq "cuda: a CUDA device needs tensorscope built with CUDA: apt-get install nvidia-cuda-toolkit"' || show info.out
    check "info --device cuda, built without CUDA: exit 1, saying so"         eval '[ $rc -eq 1 ] && hasf infogpu.err "tensorscope: --device: a CUDA device needs tensorscope built with CUDA" && [ ! -s infogpu.out ]' ||
        show infogpu.err
elif [ $rc -ne 0 ]; then
    check "info, no GPU here: 'cuda:0: no usable GPU here (...)' after the CPU"         eval 'sed -n 6p info.out | grep -q "^cuda:0: no usable GPU here (.*): run with --device cpu$"' || show info.out
    check "info --device cuda, no GPU here: exit 1, saying so"         eval '[ $rc -eq 1 ] && hasf infogpu.err "tensorscope: --device: cuda:0: no usable GPU here (" && [ ! -s infogpu.out ]' || show infogpu.err
else
    check "info --device cuda on a GPU: 'cuda:0: NAME, sm_XY, X GiB (Y free), N SMs, driver ..., runtime ..., cuBLAS ...'"         has infogpu.out '^cuda:0: .+, sm_[0-9]+, [0-9.]+ GiB \([0-9.]+ free\), [0-9]+ SMs, driver [0-9.]+, runtime [0-9.]+, cuBLAS ' ||
        show infogpu.out
    check "info lists cuda:0 after the CPU" eval 'sed -n 6p info.out | grep -q "^cuda:0: .*, sm_[0-9]"' || show info.out
fi
run infocpu "$BIN" info --device cpu
check "info --device cpu: exit 0, the CPU's line alone" eval '[ $rc -eq 0 ] && [ "$(cat infocpu.out)" = "$(sed -n 5p info.out)" ]' ||
    show infocpu.out
run infobad "$BIN" info --device gpu:0
check "info --device gpu:0: usage error (exit 2) naming the choices" eval '[ $rc -eq 2 ] && hasf infobad.err "cpu, cuda and cuda:N"' ||
    show infobad.err

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
run core "$BIN" train "${M[@]}" --save-weights w32
check "train without such flags: exit 0 in any build" eval '[ $rc -eq 0 ]' || show core.err
# --allow-tf32 is a GPU's: the CPU computes in float32 either way
run tf32 "$BIN" train "${M[@]}" --allow-tf32 --save-weights wtf32
check "--allow-tf32 on the CPU: the same weights as without it" eval '[ $rc -eq 0 ] && diff -r w32 wtf32 >/dev/null' || show tf32.err
finish
