#!/bin/bash
# gpu-check.sh -- tensorscope's checks on a GPU machine, in one command:
# configure (CUDA on; features found or not: the minimal core builds on a
# bare GPU node), build with every core, run the `gpu` tests, the
# compute-sanitizer subset and the GPU benchmark beside PyTorch on the same
# GPU, and bench_gpu_stats (what a summary costs by itself, against a copy
# of the same bytes; the input's transfer). Logs go to build-gpu/logs, and with $OUT set, packed into
# $OUT/gpu-check-logs.tgz beside summary.txt and bench-table.md. Prints the
# summary and the benchmark table last; exits non-zero when a step failed.
#
#     scripts/gpu-check.sh            # everything (under 8 minutes)
#     GPU_CHECK_BENCH=0 scripts/gpu-check.sh   # no benchmark
#     GPU_CHECK_GPT2=1 scripts/gpu-check.sh    # also the GPT-2-small row
#     GPU_CHECK_TF32=1 scripts/gpu-check.sh    # also GPT-2 small with TF32 products, both sides
#     GPU_CHECK_TESTS=0 scripts/gpu-check.sh   # the benchmark alone (make bench-gpu)
#     GPU_CHECK_BUDGET=300 scripts/gpu-check.sh # steps past 300 s are skipped (default 470)
#     GPU_CHECK_PROFILE=1 scripts/gpu-check.sh # the bench rows also print each model's metrics
#                                              # report (where a step's time goes, on the GPU's
#                                              # clock), and nsys's summaries where nsys is found
set -u
cd "$(dirname "$0")/.."
BUILD=${GPU_CHECK_BUILD:-build-gpu}
LOGS=$BUILD/logs
rm -rf "$LOGS"
mkdir -p "$LOGS"
JOBS=$(nproc)
STATUS=0
BUDGET=${GPU_CHECK_BUDGET:-470} # seconds: a step that would start later is skipped, and says so
step() { # step NAME TIMEOUT CMD...: runs CMD into $LOGS/NAME.log, records the outcome
    local name=$1 limit=$2
    shift 2
    if [ "$SECONDS" -ge "$BUDGET" ]; then
        printf '%-22s skipped: past the %ss budget\n' "$name" "$BUDGET" | tee -a "$LOGS/summary.txt"
        STATUS=1
        return 1
    fi
    [ $((SECONDS + limit)) -gt "$BUDGET" ] && limit=$((BUDGET - SECONDS + 10))
    local t0=$SECONDS
    timeout "$limit" "$@" >"$LOGS/$name.log" 2>&1
    local rc=$?
    printf '%-22s rc=%-3s %4ss\n' "$name" "$rc" "$((SECONDS - t0))" | tee -a "$LOGS/summary.txt"
    [ "$rc" = 0 ] || STATUS=1
    return "$rc"
}
: >"$LOGS/summary.txt"
{
    date -u
    nvidia-smi || true
    nvcc --version || true
    cmake --version | head -1
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 || true
} >"$LOGS/env.txt" 2>&1

GEN=()
[ ! -f "$BUILD/CMakeCache.txt" ] && command -v ninja >/dev/null && GEN=(-G Ninja) # a fresh build folder
step configure 120 cmake -S . -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DTS_CUDA=ON || { cat "$LOGS/configure.log"; exit 1; }
grep "tensorscope features" "$LOGS/configure.log" | tee -a "$LOGS/summary.txt"
grep -q "CUDA yes" "$LOGS/configure.log" || { echo "gpu-check: CUDA was not found by cmake" | tee -a "$LOGS/summary.txt"; exit 1; }
# everything: the gpu tests include the observation tests run on the GPU
step build 300 cmake --build "$BUILD" -j "$JOBS" || { tail -40 "$LOGS/build.log"; exit 1; }
"$BUILD/tensorscope" info 2>&1 | tee -a "$LOGS/env.txt" | tail -1 | tee -a "$LOGS/summary.txt" # the GPU, driver, runtime and cuBLAS

if [ "${GPU_CHECK_TESTS:-1}" = 1 ]; then
step gpu-tests 240 ctest --test-dir "$BUILD" -L gpu --output-on-failure --timeout 200
grep -E "tests passed|tests failed|\(Failed\)|\(Skipped\)|\(Timeout\)" "$LOGS/gpu-tests.log" | head -40
fi

bench_rows() { # bench_rows ROW...: tensorscope and PyTorch, each row
    for r in "$@"; do
        limit=60 steps=20
        case $r in gpt2*) limit=180 steps=10 ;; esac
        step "bench-ts-$r" "$limit" env BENCH_GPU_PROFILE="${GPU_CHECK_PROFILE:-0}" "$BUILD/bench_gpu" "$r" "$steps"
        step "bench-torch-$r" "$limit" python3 bench/torch_gpu.py "$r" --steps "$steps"
    done
}
[ "${GPU_CHECK_BENCH:-1}" = 1 ] && bench_rows mlp32 mlp1000 lenet64 gpt128
# what a stats watch costs by itself: the summary kernel against a copy of the same bytes
if [ "${GPU_CHECK_BENCH:-1}" = 1 ]; then
    step bench-stats 60 "$BUILD/bench_gpu_stats" && cat "$LOGS/bench-stats.log" | tee -a "$LOGS/summary.txt"
fi
if [ "${GPU_CHECK_PROFILE:-0}" = 1 ] && command -v nsys >/dev/null; then
    for r in mlp32 gpt128; do
        step "nsys-$r" 90 nsys profile --stats=true --force-overwrite=true -o "$LOGS/nsys-$r" "$BUILD/bench_gpu" "$r" 20
    done
    rm -f "$LOGS"/nsys-*.nsys-rep "$LOGS"/nsys-*.sqlite # the summaries are in the logs
elif [ "${GPU_CHECK_PROFILE:-0}" = 1 ]; then
    echo "nsys: not on this machine" | tee -a "$LOGS/summary.txt"
fi
# Python on the GPU: the device tests of the Python package (CPU and GPU
# models trained side by side, Python beside the CLI's --device cuda),
# through the library and CLI just built
if [ "${GPU_CHECK_TESTS:-1}" = 1 ]; then
    if python3 -c 'import numpy, pytest' 2>/dev/null; then
        step python-gpu 120 env TENSORSCOPE_LIBRARY="$PWD/$BUILD/libtensorscope.so" PYTHONPATH="$PWD/python" \
            TS_BUILD_DIR="$PWD/$BUILD" TS_SOURCE_DIR="$PWD" \
            python3 -m pytest -q -rs python/tests/test_device.py
        tail -3 "$LOGS/python-gpu.log"
    else
        echo "python-gpu: numpy or pytest missing here: not run" | tee -a "$LOGS/summary.txt"
    fi
fi
if [ "${GPU_CHECK_TESTS:-1}" = 1 ]; then
if command -v compute-sanitizer >/dev/null; then
    step memcheck 90 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 "$BUILD/test_backend_ops"
    tail -3 "$LOGS/memcheck.log"
    step memcheck-train 120 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 "$BUILD/test_gpu_train"
    tail -3 "$LOGS/memcheck-train.log"
    step memcheck-replay 120 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 "$BUILD/test_replay"
    tail -3 "$LOGS/memcheck-replay.log"
    step racecheck 90 compute-sanitizer --tool racecheck --error-exitcode 9 "$BUILD/test_backend_ops"
    tail -3 "$LOGS/racecheck.log"
else
    echo "compute-sanitizer: not on this machine" | tee -a "$LOGS/summary.txt"
    fi
fi
# GPT-2 small's size last: the longest row
[ "${GPU_CHECK_BENCH:-1}" = 1 ] && [ "${GPU_CHECK_GPT2:-0}" = 1 ] && bench_rows gpt2
# ... and with its float32 products in TF32 on both sides (--allow-tf32)
[ "${GPU_CHECK_BENCH:-1}" = 1 ] && [ "${GPU_CHECK_TF32:-0}" = 1 ] && bench_rows gpt2_tf32
[ "${GPU_CHECK_BENCH:-1}" = 1 ] && python3 scripts/gpu_table.py "$LOGS" | tee "$LOGS/bench-table.md"
echo
cat "$LOGS/summary.txt"
if [ -n "${OUT:-}" ]; then
    tar czf "$OUT/gpu-check-logs.tgz" -C "$BUILD" logs
    cp "$LOGS/summary.txt" "$OUT/"
    [ -f "$LOGS/bench-table.md" ] && cp "$LOGS/bench-table.md" "$OUT/"
fi
exit $STATUS
