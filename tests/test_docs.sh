#!/bin/bash
# test_docs.sh -- every document the repository refers to is in the
# repository. Over every file of the tree (git's list in a checkout, else
# every file but build outputs):
#  - a `docs/<file>.md` or `docs/<file>.md#<section>` reference names a file
#    in docs/ and, with a section, one of its headings (GitHub's anchors:
#    lower case, spaces to dashes, punctuation dropped);
#  - a markdown link to another .md file (`[text](file.md#section)`) in a
#    markdown file resolves from that file's folder, inside the tree, to a
#    file and heading that exist;
#  - no file cites the design contract by the outside name it once had
#    (its file name or its numbered sections: the repository's own is
#    docs/design.md), nor a .md document by an absolute path;
#  - README.md is a front page of at most 400 lines.
# Prints `ok ...` or `FAIL ...` per reference.
set -u
SRC=${TS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$SRC" || exit 1
passed=0 failed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1"; failed=$((failed + 1)); }
slugs() { # the anchors of a markdown file's headings
    sed -n 's/^#\{1,6\} \(.*\)$/\1/p' "$1" | tr 'A-Z' 'a-z' | sed 's/[^a-z0-9 _-]//g; s/ /-/g'
}
# check REF PATH: PATH (REF's file, resolved) exists and has REF's section
check() {
    local ref=$1 file=${2%%#*} anchor=
    [ "$2" != "$file" ] && anchor=${2#*#}
    if [ ! -f "$file" ]; then
        fail "$ref: $file does not exist"
    elif [ -n "$anchor" ] && ! slugs "$file" | grep -qx -- "$anchor"; then
        fail "$ref: no heading '$anchor' in $file (has: $(slugs "$file" | tr '\n' ' '))"
    else
        ok "$ref"
    fi
}

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    mapfile -t files < <(git ls-files --cached --others --exclude-standard | while read -r f; do [ -f "$f" ] && echo "$f"; done)
else
    mapfile -t files < <(find . -type f -not -path './.git/*' -not -path './build*' | sed 's|^\./||')
fi
self=tests/test_docs.sh
mapfile -t texts < <(printf '%s\0' "${files[@]}" | xargs -0 grep -Il . 2>/dev/null | grep -vx "$self")
[ ${#texts[@]} -gt 0 ] || { echo "FAIL no files to read"; exit 1; }

# docs/<file>.md[#section], from anywhere
refs=$(grep -hoE 'docs/[a-z_]+\.md(#[a-z0-9_-]+)?' "${texts[@]}" | sort -u)
[ -n "$refs" ] || { echo "FAIL no docs/ reference found"; exit 1; }
for r in $refs; do check "$r" "$r"; done

# markdown links between .md files, resolved from the linking file's folder
for f in "${texts[@]}"; do
    case $f in *.md) ;; *) continue ;; esac
    dir=$(dirname "$f")
    for t in $(grep -oE '\]\([^)#[:space:]]+\.md(#[a-z0-9_-]+)?\)' "$f" | sed 's/^](//; s/)$//' | sort -u); do
        case $t in http://* | https://*) continue ;; esac
        path=$(realpath -m --relative-to=. "$dir/${t%%#*}")
        case $path in
        ../* | /*) fail "$f: link $t leaves the repository" ;;
        *) [ "$t" != "${t%%#*}" ] && path="$path#${t#*#}"; check "$f: $t" "$path" ;;
        esac
    done
done

# the outside contract's names, and .md documents by absolute path
outside=$(grep -nE 'DESIG[N](\.md|'"'"'s| ?§| section [0-9])' "${texts[@]}")
if [ -n "$outside" ]; then
    while IFS= read -r l; do fail "cites a document outside the repository (its design is docs/design.md): $l"; done <<<"$outside"
else
    ok "no file cites the design contract by an outside name"
fi
absolute=$(grep -nE '(^|[[:space:](`"'"'"'=])(/|~/)[A-Za-z0-9_.~-]+(/[A-Za-z0-9_.~-]+)*\.md\b' "${texts[@]}")
if [ -n "$absolute" ]; then
    while IFS= read -r l; do fail "a .md document by absolute path: $l"; done <<<"$absolute"
else
    ok "no .md document by absolute path"
fi

# the README is the front page (what it is, the set-up, a tour, where to
# read on); everything else lives in docs/
readme_lines=$(wc -l < README.md)
if [ "$readme_lines" -le 400 ]; then ok "README.md is a front page: $readme_lines lines (at most 400)"
else fail "README.md has $readme_lines lines: at most 400, the rest goes into docs/"; fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
