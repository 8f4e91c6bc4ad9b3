# cli_checks.sh -- what the CLI test scripts share (sourced): counters and
# `ok` / `fail` / `check MESSAGE CMD...` / `finish`, and `run NAME CMD...`
# (stdout to NAME.out, stderr to NAME.err, status in $rc), `has FILE REGEX`,
# `hasf FILE STRING`, `show FILE [N]` (context for a failure).
passed=0 failed=0
ok() { echo "ok   $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
check() { # check MESSAGE CMD...: ok when CMD succeeds
    local msg=$1
    shift
    if "$@"; then ok "$msg"; else fail "$msg"; return 1; fi
}
finish() {
    echo "$passed passed, $failed failed"
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
