#!/bin/bash
# fuzz-run.sh BUILD_DIR -- runs every fuzz target built in BUILD_DIR (make
# fuzz) for FUZZ_SECONDS (default 60) each, FUZZ_JOBS (default 1) at a time,
# starting from the committed seeds in fuzz/corpus/<target>/ plus what
# earlier runs found (BUILD_DIR/fuzz-corpus/<target>/, kept between runs).
# A crash, leak, timeout or out-of-memory is a finding: its input is saved as
# BUILD_DIR/fuzz-artifacts/<target>-crash-* (replay it with
# `BUILD_DIR/<target> FILE`) and the script exits 1. Prints per target the
# executions, coverage (edges, features) and corpus size.
set -u
BUILD=${1:?usage: fuzz-run.sh BUILD_DIR}
SRC=$(cd "$(dirname "$0")/.." && pwd)
SECONDS_EACH=${FUZZ_SECONDS:-60}
JOBS=${FUZZ_JOBS:-1}
mkdir -p "$BUILD/fuzz-artifacts" "$BUILD/fuzz-logs"
targets=()
for t in "$BUILD"/fuzz_*; do [ -x "$t" ] && [ -f "$t" ] && targets+=("$(basename "$t")"); done
[ ${#targets[@]} -gt 0 ] || { echo "fuzz-run: no fuzz targets in $BUILD (run make fuzz)"; exit 1; }

run_one() {
    local t=$1 corpus=$BUILD/fuzz-corpus/$1 seeds=$SRC/fuzz/corpus/$1
    mkdir -p "$corpus"
    # usage messages of the CLI parser go to stdout/stderr: closed (reports still come)
    local mask=0
    [ "$t" = fuzz_cli_args ] && mask=3
    "$BUILD/$t" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
        -close_fd_mask=$mask -print_final_stats=1 -artifact_prefix="$BUILD/fuzz-artifacts/$t-" \
        "$corpus" "$seeds" > "$BUILD/fuzz-logs/$t.log" 2>&1
    echo $? > "$BUILD/fuzz-logs/$t.rc"
}

i=0
for t in "${targets[@]}"; do
    run_one "$t" &
    i=$((i + 1))
    if [ $((i % JOBS)) -eq 0 ]; then wait; fi
done
wait

failed=0
printf '%-16s %12s %8s %8s %8s  %s\n' target execs edges features corpus result
for t in "${targets[@]}"; do
    log=$BUILD/fuzz-logs/$t.log
    rc=$(cat "$BUILD/fuzz-logs/$t.rc" 2>/dev/null || echo 1)
    execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log")
    last=$(grep -E '^#[0-9]+' "$log" | grep -E 'cov: ' | tail -n 1)
    cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<< "$last")
    ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<< "$last")
    corp=$(find "$BUILD/fuzz-corpus/$t" -type f | wc -l)
    result=ok
    if [ "$rc" != 0 ]; then
        result="FINDING (exit $rc; see $log and $BUILD/fuzz-artifacts/$t-*)"
        failed=1
    fi
    printf '%-16s %12s %8s %8s %8s  %s\n' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$corp" "$result"
done
exit $failed
