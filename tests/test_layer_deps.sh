#!/bin/bash
# test_layer_deps.sh -- the structure figures docs/backend.md shows are the
# ones scripts/layer_deps.py measures on this build, none is above
# tests/layer_deps_ceiling.txt, and the ceiling never went up in the
# repository's history. Then a second, independent reading of the includes
# (grep and awk over every .c, .h and .cu under src/, resolved from the
# including file's folder then src/, as the compiler's -I does) must draw
# the same graph of folders as the script's own reading.
# Skips (77) in a build without CUDA: the documented figures count CUDA's
# objects (the ceiling and the cross-check still run).
set -u
src=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${TS_BUILD_DIR:-$src/build}
cd "$src" || exit 1
failed=0
fail() { echo "FAIL $*"; failed=1; }

python3 scripts/layer_deps.py --check "$build"
rc=$?
case $rc in
0 | 77) ;;
*) fail "scripts/layer_deps.py --check (exit $rc)" ;;
esac

# the ceiling only comes down: no figure above its lowest committed value
ceiling=tests/layer_deps_ceiling.txt
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    for rev in $(git log --format=%H -- "$ceiling"); do
        while read -r key lowest; do
            now=$(awk -v k="$key" '$1 == k { print $2 }' "$ceiling")
            if [ -z "$now" ]; then
                fail "$ceiling lost its '$key' line (${rev:0:12} had it)"
            elif [ "$now" -gt "$lowest" ]; then
                fail "$ceiling: $key $now, above the $lowest of commit ${rev:0:12}: the ceiling only comes down"
            fi
        done < <(git show "$rev:$ceiling" 2>/dev/null | sed 's/#.*//' | awk 'NF == 2')
    done
    echo "ok   the ceiling is at or below every committed value of it"
fi

# the independent reading: "from-folder to-folder" for every quoted include
mine=$(find src -path src/import/proto -prune -o -path src/io/proto -prune -o \
    -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) -print | sort |
    while read -r f; do
        dir=$(dirname "$f")
        sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" |
            while read -r inc; do
                if [ -f "$dir/$inc" ]; then
                    t=$(realpath -m --relative-to=. "$dir/$inc")
                elif [ -f "src/$inc" ]; then
                    t="src/$inc"
                else
                    continue # a system, public (include/) or generated header
                fi
                echo "$f $t"
            done
    done | awk '
        function folder(p,   n, a) { n = split(p, a, "/"); return (a[2] == "backend" && n > 3) ? a[2] "/" a[3] : a[2] }
        { a = folder($1); b = folder($2); if (a != b) print a, b }' | sort -u)
theirs=$(python3 scripts/layer_deps.py --include-folders "$build" | sort -u)
if [ -z "$mine" ]; then
    fail "the independent reading found no include between folders"
elif [ "$mine" != "$theirs" ]; then
    fail "the folder graphs of the includes differ (< the independent reading, > layer_deps.py's):"
    diff <(echo "$mine") <(echo "$theirs") | grep '^[<>]'
else
    echo "ok   the independent reading of the includes draws layer_deps.py's folder graph ($(echo "$mine" | wc -l) arrows)"
fi
# folders on a circle of includes, by the same reading (tsort names each loop)
loops=$(echo "$mine" | tsort 2>&1 >/dev/null | grep -v 'input contains a loop' | sed 's/^tsort: //' | sort -u | tr '\n' ' ')
echo "note folders on a circle of includes: ${loops:-none}"

if [ $failed -ne 0 ]; then
    echo "test_layer_deps: FAIL"
    exit 1
fi
[ $rc -eq 77 ] && { echo "skipped: docs/backend.md's figures are of a build with CUDA (this one has none)"; exit 77; }
echo "test_layer_deps: ok"
