#!/bin/bash
# test_docs.sh -- the design notes the sources point to exist: every
# `docs/<file>.md` or `docs/<file>.md#<section>` reference in include/, src/,
# tools/, tests/, python/ and the README names a file in docs/ and, with a
# section, one of its headings (GitHub's anchors: lower case, spaces to
# dashes, punctuation dropped). Prints `ok ...` or `FAIL ...` per reference.
set -u
SRC=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$SRC" || exit 1
passed=0 failed=0
slugs() { # the anchors of a markdown file's headings
    sed -n 's/^#\{1,6\} \(.*\)$/\1/p' "$1" | tr 'A-Z' 'a-z' | sed 's/[^a-z0-9 _-]//g; s/ /-/g'
}
refs=$(grep -rhoE 'docs/[a-z_]+\.md(#[a-z0-9_-]+)?' include src tools tests python README.md | sort -u)
[ -n "$refs" ] || { echo "FAIL no docs/ reference found"; exit 1; }
for r in $refs; do
    file=${r%%#*} anchor=
    [ "$r" != "$file" ] && anchor=${r#*#}
    if [ ! -f "$file" ]; then
        echo "FAIL $r: $file does not exist"
        failed=$((failed + 1))
    elif [ -n "$anchor" ] && ! slugs "$file" | grep -qx -- "$anchor"; then
        echo "FAIL $r: no heading '$anchor' in $file (has: $(slugs "$file" | tr '\n' ' '))"
        failed=$((failed + 1))
    else
        echo "ok   $r"
        passed=$((passed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
