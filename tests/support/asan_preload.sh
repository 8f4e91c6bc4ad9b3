# asan_preload.sh -- sourced: `asan_preload LIB` sets ASAN_PRELOAD to what a
# Python process (not built with the sanitizers) must preload to load LIB:
# nothing for a plain build; for an AddressSanitizer build (-DTS_SANITIZE=ON)
# the sanitizers' runtimes, to run with leak checks off (Python's own
# allocations are not ours).
asan_preload() {
    ASAN_PRELOAD=
    nm -D "$1" 2> /dev/null | grep -q __asan_init || return 0
    ASAN_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
}
