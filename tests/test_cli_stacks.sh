#!/bin/bash
# test_cli_stacks.sh -- `tensorscope stacks PID` against a real training
# process: the test waits until training has started (the --on-start hook
# makes a file: an event, not a sleep), asks for the stacks, and checks them
# against /proc: every thread the process had is in the dump, the main
# thread's stack is the training loop's; then the clear errors for a
# process that is not ours and one that does not exist. Every check prints
# `ok ...` or `FAIL ...`; the script exits non-zero if any failed.
set -u

. "$(dirname "$0")/support/cli_checks.sh"
cli_paths

T=$(mktemp -d "${TMPDIR:-/tmp}/ts_stacks.XXXXXX")
PID=
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$T"' EXIT
cd "$T" || exit 1

"$BIN" train --data "$DATA" --batch-size 64 --epochs 1000 --quiet --on-start 'touch started' > train.out 2> train.err &
PID=$!
for _ in $(seq 1200); do # up to 120 s on a loaded machine: training starts, or the process ends
    [ -e started ] && break
    kill -0 "$PID" 2> /dev/null || break
    sleep 0.1
done
if ! [ -e started ]; then
    fail "training did not start"
    show train.err
    finish
fi
tids=$(ls /proc/"$PID"/task | sort -n)
# ThreadSanitizer holds an asynchronous signal back until the thread next
# enters its runtime and then runs the handler with the context saved on
# arrival, whose stack has moved on: there the main thread's frames are not
# its loop's, and only the dump's completeness and form are checked
late=0
ldd "$BIN" 2>/dev/null | grep -q 'libtsan' && late=1
run st "$BIN" stacks "$PID"
/usr/bin/python3 - "$PID" "$tids" "$late" > st.py.out 2>&1 <<'PY'
import os, re, sys
pid, tids, late = sys.argv[1], sys.argv[2].split(), sys.argv[3] == "1"
text = open("st.out").read()
assert text.startswith(f"\ntensorscope: SIGUSR1: stacks of all threads of process {pid}\n"), text[:200]
assert text.endswith("tensorscope: end of stacks\n"), text[-200:]
heads = re.findall(r"^thread (\d+)(.*):$", text, re.M)
dumped = [t for t, _ in heads]
missing = [t for t in tids if t not in dumped]  # a thread that ended meanwhile is not asked
assert all(not os.path.exists(f"/proc/{pid}/task/{t}") for t in missing), missing
blocks = re.split(r"^(?=thread \d+)", text, flags=re.M)
main = next(b for b in blocks if re.match(rf"thread {pid}[ :]", b))
assert late or ("cmd_train" in main and "main" in main), main
assert all(re.match(r"  #\d+ +0x[0-9a-f]+ ", l) for l in text.splitlines() if l.startswith("  #")), "frame lines"
PY
check "stacks PID of a training process: every thread of /proc/$PID/task ($(echo $tids | wc -w)) dumped, the main thread in cmd_train, the end line" \
    eval '[ $rc -eq 0 ] && ! [ -s st.py.out ] && kill -0 $PID' || { show st.py.out; show st.out 20; show st.err; }
check "the training process goes on after it answered (and its stderr holds no dump)" eval 'kill -0 $PID && ! hasf train.err "stacks of all threads"'
kill -TERM "$PID"
wait "$PID"
PID=
run notours "$BIN" stacks $$
check "stacks of this shell: exit 1, not a tensorscope process" \
    eval '[ $rc -eq 1 ] && hasf notours.err "is not a tensorscope process"' || show notours.err
sleep 0 & gone=$!
wait "$gone"
run none "$BIN" stacks "$gone"
check "stacks of a process that has ended: exit 1, there is no process" eval '[ $rc -eq 1 ] && hasf none.err "there is no process $gone"' || show none.err
run bad "$BIN" stacks abc
check "stacks abc: usage error" eval '[ $rc -eq 2 ] && hasf bad.err "not a process id"' || show bad.err
finish
