#!/bin/bash
# test_cli_archives.sh -- the CLI given decompression bombs as .npz files
# (written by test_npz_bombs --write): `train --data` and `train --weights`
# fail at once (exit 1) with a message naming the member, the file and how
# to raise the limit, or the missing array, without inflating anything:
# each run stays under 1 GB of address space (where the build is not under
# ASan, which reserves more) and 20 seconds. And a FIFO given as an .npz.
# needs: npz
set -u
# shellcheck source=support/cli_checks.sh
source "$(dirname "$0")/support/cli_checks.sh"
cli_paths
BOMBS=$BUILD/test_npz_bombs
[ -x "$BOMBS" ] || { fail "$BOMBS is missing"; finish; }

T=$(mktemp -d "${TMPDIR:-/tmp}/ts_cli_archives.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
check "write the bombs" "$BOMBS" --write "$T" || finish
FAST=(--quiet --batch-size 500 --holdout 1000 --max-steps 1)
limit_vm() { # the bounded address space, where a sanitizer does not need more
    if ldd "$BIN" 2>/dev/null | grep -q 'lib[at]san'; then "$@"; else (ulimit -v 1000000 && "$@"); fi
}
unset TS_MAX_ARCHIVE_BYTES

run bzdata limit_vm timeout 20 "$BIN" train "${FAST[@]}" --data bzip2_bomb.npz
check "--data bzip2_bomb.npz (110 x 40 MiB, no x): exit 1 naming what is missing" \
    eval '[ $rc -eq 1 ] && has bzdata.err "holds no arrays named .x. and .labels."' || show bzdata.err
run dfdata limit_vm timeout 20 "$BIN" train "${FAST[@]}" --data deflate_bomb.npz
check "--data deflate_bomb.npz (x of 3 GiB): exit 1, refused by the limit, naming member, file and the variable" \
    eval '[ $rc -eq 1 ] && has dfdata.err "deflate_bomb.npz: member .x.npy.: inflating it would need 3221225600 bytes, over the limit of 2147483648 bytes" &&
          has dfdata.err "TS_MAX_ARCHIVE_BYTES"' || show dfdata.err
run bzw limit_vm timeout 20 "$BIN" train "${FAST[@]}" --data "$DATA" --weights bzip2_bomb.npz
check "--weights bzip2_bomb.npz: exit 1 naming the missing parameter" \
    eval '[ $rc -eq 1 ] && has bzw.err "bzip2_bomb.npz has no array .fc1.weight."' || show bzw.err
run dfw limit_vm timeout 20 "$BIN" train "${FAST[@]}" --data "$DATA" --weights weights_bomb.npz
check "--weights weights_bomb.npz (fc1.weight of 3 GiB): exit 1, refused by the limit" \
    eval '[ $rc -eq 1 ] && has dfw.err "weights_bomb.npz: member .fc1.weight.npy.: inflating it would need 3221225600 bytes"' || show dfw.err
TS_MAX_ARCHIVE_BYTES=1M run dfw1 limit_vm timeout 20 "$BIN" train "${FAST[@]}" --data deflate_bomb.npz
check "TS_MAX_ARCHIVE_BYTES=1M: the limit it names is 1 MiB" \
    eval '[ $rc -eq 1 ] && has dfw1.err "over the limit of 1048576 bytes"' || show dfw1.err
mkfifo fifo.npz
run fifo timeout 20 "$BIN" train "${FAST[@]}" --data fifo.npz
check "--data fifo.npz: an error at once, not a hang" eval '[ $rc -eq 1 ] && has fifo.err "not a regular file"' || show fifo.err
finish
