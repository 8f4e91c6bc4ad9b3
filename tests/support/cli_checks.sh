# cli_checks.sh -- what the CLI test scripts share (sourced): counters and
# `ok` / `fail` / `check MESSAGE CMD...` / `finish`, and `run NAME CMD...`
# (stdout to NAME.out, stderr to NAME.err, status in $rc), `has FILE REGEX`,
# `hasf FILE STRING`, `show FILE [N]` (context for a failure), and
# `cli_paths` (BUILD, SRC, BIN, DATA; the script ends failed without the CLI),
# and for the optional features (ts_has_feature) `has_feature NAME` (true
# when $BIN was built with it) and `needs NAME WHAT` (the same, printing
# `skip WHAT (...)` when not: `if needs plots "--histogram"; then ... fi`).
passed=0 failed=0 skipped=0
ok() { echo "ok   $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
check() { # check MESSAGE CMD...: ok when CMD succeeds
    local msg=$1
    shift
    if "$@"; then ok "$msg"; else fail "$msg"; return 1; fi
}
finish() {
    if [ "$skipped" -gt 0 ]; then echo "$passed passed, $failed failed, $skipped skipped"; else echo "$passed passed, $failed failed"; fi
    [ "$failed" -eq 0 ]
    exit
}
rc=0
run() {
    local name=$1
    shift
    "$@" > "$name.out" 2> "$name.err"
    rc=$?
}
has() { grep -Eq -- "$2" "$1"; }
hasf() { grep -Fq -- "$2" "$1"; }
show() { sed 's/^/     | /' "$1" | head -n "${2:-8}"; }
cli_paths() { # BUILD from TS_BUILD_DIR, SRC (TS_SOURCE_DIR or this checkout), BIN the CLI, DATA MNIST's test set
    BUILD=${TS_BUILD_DIR:?set TS_BUILD_DIR to the CMake build directory}
    SRC=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
    BIN=$BUILD/tensorscope
    DATA=$SRC/data/mnist
    [ -x "$BIN" ] || { fail "$BIN is missing: build the CLI first"; finish; }
}
has_feature() { "$BIN" --version 2> /dev/null | grep -Eq "^features:(.*, )? ?$1 yes(,|\$)"; }
needs() { # needs FEATURE WHAT: true when built with FEATURE, else says WHAT is skipped
    has_feature "$1" && return 0
    echo "skip $2 (this build has no $1: see 'tensorscope --version')"
    skipped=$((skipped + 1))
    return 1
}
