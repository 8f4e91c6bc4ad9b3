# sanitizer_preload.sh -- sourced: `sanitizer_preload BUILD` sets
# SANITIZER_PRELOAD to what a process not built with the sanitizers (Python)
# must preload to load BUILD's library: nothing for a plain build; for
# -DTS_SANITIZE=ON (ASan + UBSan) or -DTS_TSAN=ON that sanitizer's runtime,
# with libstdc++ beside it (else the runtime cannot catch the C++ exceptions
# of the packages Python loads, PyTorch's). Returns 1 when the runtime is
# not found. Run such a process with leak checks off (Python's own
# allocations are not ours): ASAN_OPTIONS=detect_leaks=0.
sanitizer_preload() {
    local cache=$1/CMakeCache.txt cc runtime=""
    SANITIZER_PRELOAD=
    cc=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$cache" 2>/dev/null)
    grep -q '^TS_SANITIZE:BOOL=ON' "$cache" 2>/dev/null && runtime=libasan.so
    grep -q '^TS_TSAN:BOOL=ON' "$cache" 2>/dev/null && runtime=libtsan.so
    [ -n "$runtime" ] || return 0
    runtime=$("${cc:-cc}" -print-file-name=$runtime)
    [ -f "$runtime" ] || return 1
    SANITIZER_PRELOAD="$runtime $("${cc:-cc}" -print-file-name=libstdc++.so.6)"
}
