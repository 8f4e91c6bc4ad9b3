"""ONNX's own backend node test cases, run through tensorscope's importer.

For every op type the importer's table (src/import/onnx.c) lists, each of
ONNX's node test cases of that op (the cases onnx's generator makes, the ones
onnx/backend/test/data/node holds in ONNX's repository, including the
`_expanded` function bodies) is imported with Graph.from_onnx at its input
shapes, run as an inference model on its inputs, and its outputs compared
with ONNX's as ONNX's backend runner does (same shape, same dtype, then
rtol=1e-3, atol=1e-7).

Prints a table per op type, then exits 1 on a failing case that
tests/onnx_conformance_expected_failures.txt does not list, or on a listed
case that passes now (the list can only shrink). `--write-expected`
rewrites that file from today's results, each reason classified from the
library's error message.

The cases are generated once in this process; they run in a forked worker
that keeps going case after case, so that a case that crashes the library or
runs past the per-case timeout is recorded as such and a new worker goes on
with the next one.
"""
import collections
import importlib
import json
import os
import re
import select
import signal
import sys
import tempfile
import time
import warnings

import numpy as np

import expected_failures

EXPECTED_FILE = os.path.join("tests", "onnx_conformance_expected_failures.txt")
CASE_TIMEOUT_S = 20  # one case: import, compile and run are milliseconds
HEADER = """\
# ONNX's node test cases (onnx==1.23.2) that tensorscope's importer fails today,
# and why: `case  reason`, sorted. tests/test_onnx_conformance.sh fails on a
# failing case missing here and on a case here that passes: remove it then.
# Regenerate with tests/test_onnx_conformance.sh --write-expected.
"""
RTOL, ATOL = 1e-3, 1e-7  # ONNX's backend-test tolerance (every node case)


def supported_op_types(source_dir):
    """The op types of the importer's table, in the table's order."""
    path = os.path.join(source_dir, "src", "import", "onnx.c")
    with open(path, encoding="utf-8") as f:
        src = f.read()
    table = re.search(r"\bop_table\[\]\s*=\s*\{(.*?)\n\};", src, re.S)
    ops = re.findall(r'^\s*\{\s*"(\w+)"\s*,', table.group(1), re.M) if table else []
    if not ops:
        sys.exit(f"FAIL no op types found in the op_table of {path}: the test reads the rows "
                 '{"OpType", ...} of that table; update supported_op_types() to its form')
    return ops


def generate_cases(ops):
    """ONNX's node test cases of the op types in `ops`: [(op_type, TestCase)].

    Importing a module of onnx.backend.test.case.node runs its exports,
    which record cases; only the modules that make a node of one of `ops`
    are imported (all of them if that misses an op)."""
    import onnx.backend.test.case.node as node_cases

    warnings.simplefilter("ignore")  # the generators' own overflow warnings
    folder = os.path.dirname(node_cases.__file__)
    modules = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py") and not name.startswith("_"):
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                made = set(re.findall(r'make_node\(\s*"(\w+)"', f.read()))
            if made & set(ops):
                modules.append(name[:-3])
    for m in modules:
        importlib.import_module(f"{node_cases.__name__}.{m}")

    def op_of(case):
        # expect() records each case's node under its name; an expanded
        # function body is named <case>_expanded[_verN]
        node = node_cases._existing_names.get(case.name)
        if node is None:
            node = node_cases._existing_names[case.name.split("_expanded")[0]]
        return node.op_type

    cases = [(op_of(c), c) for c in node_cases._NodeTestCases]
    cases = [(op, c) for op, c in cases if op in ops]
    if {op for op, _ in cases} != set(ops):  # a module the scan missed: everything
        cases = [(op_of(c), c) for c in node_cases.collect_testcases(None)]
        cases = [(op, c) for op, c in cases if op in ops]
        missing = sorted(set(ops) - {op for op, _ in cases})
        if missing:
            print(f"ONNX has no node test case of: {', '.join(missing)}")
    cases.sort(key=lambda oc: oc[1].name)
    return cases


# ------------------------------------------------------------------ one case


def _array(value):
    """A case's input or output as numpy (ONNX gives TensorProtos for
    the dtypes numpy lacks)."""
    from onnx import TensorProto, numpy_helper

    if isinstance(value, TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, np.generic):  # a scalar input, e.g. Dropout's ratio
        return np.asarray(value)
    return value


# The node inputs that give axes, shapes, sizes, pads, bounds, a scalar
# setting or running statistics (op type -> input positions): a graph input read there is bound
# to the case's value at import (TensorRT's "shape tensors"); tensorscope
# folds them, so they cannot be fed at run time.
BOUND_INPUTS = {
    "Reshape": {1}, "Unsqueeze": {1}, "Squeeze": {1}, "Expand": {1}, "Split": {1}, "Pad": {1, 2, 3},
    "Slice": {1, 2, 3, 4}, "ReduceSum": {1}, "ReduceMean": {1}, "ReduceMax": {1}, "ReduceMin": {1},
    "ReduceL1": {1}, "ReduceL2": {1}, "ReduceLogSum": {1}, "ReduceLogSumExp": {1}, "ReduceSumSquare": {1},
    "Tile": {1}, "Trilu": {1},
    "ConstantOfShape": {0}, "Range": {0, 1, 2}, "Dropout": {1, 2},
    "BatchNormalization": {3, 4},  # the running statistics, a buffer's values
    "CastLike": {1},  # read for its type only (an empty tensor in the cases)
}


def bound_inputs(model):
    """The names of the graph inputs some node reads where BOUND_INPUTS says
    and none reads as data (Celu's expanded body reads X as CastLike's
    `like` and as Div's dividend: it is fed), and of those no node reads
    (CastLike's `like` in its expanded body)."""
    inputs = {vi.name for vi in model.graph.input}
    reads = [(name, k in BOUND_INPUTS.get(node.op_type, ())) for node in model.graph.node
             for k, name in enumerate(node.input) if name in inputs]
    as_data = {name for name, bound in reads if not bound}
    return {name for name, bound in reads if bound and name not in as_data} | (inputs - {name for name, _ in reads})


def run_case(ts, case, workdir):
    """Runs one case. Returns None when it passes, else the reason."""
    model = case.model
    path = os.path.join(workdir, case.name + ".onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    input_names = [vi.name for vi in model.graph.input]
    try:
        for inputs, outputs in case.data_sets:
            inputs = [_array(v) for v in inputs]
            outputs = [_array(v) for v in outputs]
            feeds = dict(zip(input_names, inputs))
            for v in feeds.values():
                if not isinstance(v, np.ndarray):  # an ONNX sequence or optional
                    return f"input type {type(v).__name__} not fed"
            bound = {k: feeds.pop(k) for k in bound_inputs(model) if k in feeds}
            g = ts.Graph.from_onnx(path, {k: v.shape for k, v in feeds.items()}, input_values=bound)
            try:
                # "final": each output as it is (the default for inference,
                # "all", stacks the samples of a run on a leading axis)
                m = ts.inference_model(g, ts.Options().output_mode("final"))
                got = m(**feeds)
                got = list(got) if isinstance(got, tuple) else [got]
                why = compare(outputs, got)
                if why:
                    return why
            finally:
                g.close()
    finally:
        os.unlink(path)
    return None


def compare(want, got):
    """ONNX's assert_similar_outputs: same count, then per output the same
    shape, the same dtype, and allclose at rtol, atol."""
    if len(got) != len(want):
        return f"output count: {len(got)} outputs, ONNX has {len(want)}"
    for i, (w, g) in enumerate(zip(want, got)):
        if not isinstance(w, np.ndarray):  # an ONNX sequence or optional
            return f"output type {type(w).__name__} not compared"
        g = np.asarray(g)
        if tuple(g.shape) != tuple(w.shape):
            return f"output shape: output {i} is {list(g.shape)}, ONNX has {list(w.shape)}"
        if g.dtype != w.dtype:
            return f"output dtype: output {i} is {g.dtype}, ONNX has {w.dtype}"
        try:
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)
        except AssertionError:
            wd, gd = w.astype(np.float64), g.astype(np.float64)
            with np.errstate(invalid="ignore"):
                bad = ~np.isclose(gd, wd, rtol=RTOL, atol=ATOL, equal_nan=True)
                err = np.abs(gd - wd)
            k = int(np.argmax(bad.ravel()))
            return (f"output mismatch: output {i}, {int(bad.sum())} of {w.size} values off, "
                    f"e.g. [{k}] {gd.ravel()[k]:.6g} vs ONNX {wd.ravel()[k]:.6g} "
                    f"(max abs error {np.nanmax(err):.3g})")
    return None


# -------------------------------------------------------- the forked worker


def worker(cases, start, wfd):
    """Runs cases[start:], one JSON line per case on wfd."""
    out = os.fdopen(wfd, "w", buffering=1)
    try:
        import tensorscope as ts
    except Exception as e:  # no case can run: say why once
        out.write(json.dumps({"fatal": f"cannot import tensorscope: {e}"}) + "\n")
        out.close()
        os._exit(0)
    ts.set_log_level(0)
    with tempfile.TemporaryDirectory(prefix="ts_onnx_conformance.") as workdir:
        for i in range(start, len(cases)):
            try:
                why = run_case(ts, cases[i][1], workdir)
            except Exception as e:  # one case's failure never stops the others
                why = f"{type(e).__name__}: {e}".replace(workdir + os.sep, "")
            out.write(json.dumps({"i": i, "why": why}) + "\n")
    out.close()
    os._exit(0)


def run_all(cases):
    """{case name: None or reason}. A forked worker runs the cases in turn;
    when one crashes it or runs past CASE_TIMEOUT_S, that case is recorded
    so and a new worker goes on with the next."""
    results = {}
    i = 0
    while i < len(cases):
        rfd, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(rfd)
            try:
                worker(cases, i, wfd)
            finally:
                os._exit(70)
        os.close(wfd)
        buf, killed = b"", False
        with os.fdopen(rfd, "rb", buffering=0) as r:
            while i < len(cases):
                ready, _, _ = select.select([r], [], [], CASE_TIMEOUT_S)
                if not ready:
                    os.kill(pid, signal.SIGKILL)
                    killed = True
                    results[cases[i][1].name] = f"timeout: no result in {CASE_TIMEOUT_S} s"
                    i += 1
                    break
                chunk = r.read(65536)
                if not chunk:  # the worker died in case i
                    break
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    rec = json.loads(line)
                    if "fatal" in rec:
                        os.waitpid(pid, 0)
                        raise SystemExit(f"FAIL {rec['fatal']}\ntest_onnx_conformance: FAIL")
                    results[cases[rec["i"]][1].name] = rec["why"]
                    i = rec["i"] + 1
        _, status = os.waitpid(pid, 0)
        if i < len(cases) and not killed:
            how = (f"signal {signal.Signals(os.WTERMSIG(status)).name}" if os.WIFSIGNALED(status)
                   else f"exit status {os.WEXITSTATUS(status)}")
            results[cases[i][1].name] = f"crash: the worker died ({how})"
            i += 1
    return results


# ------------------------------------------------------------ classification


NUMPY_NAMES = {"f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64", "u8": "uint8"}


def classify(why):
    """The reason a case fails, as the expected-failures file states it: the
    library's message reduced to its kind and the op it names."""
    why = " ".join(why.split())
    if why.startswith(("output ", "input type ", "crash: ", "timeout: ")):
        return why  # the runner's own words, classified already
    cls, _, msg = why.partition(": ")
    msg = re.sub(r"^test_\w+\.onnx:? ", "", msg)  # the case's file
    msg = re.sub(r" \(at test_\w+\.onnx:\d+\)$", "", msg)
    m = re.search(r"uses opset (\d+) of the default ONNX domain", msg)
    if m:
        return f"opset {m.group(1)} not supported"
    m = (re.search(r"input '[^']*' has data type (\w+); tensorscope feeds", msg)
         or re.search(r"numpy dtype (\w+) has no tensorscope dtype", msg))
    if m:
        return f"input dtype {m.group(1)} not fed"
    m = re.search(r"input '[^']*' must be (\w+) data, got (\w+)", msg)
    if m:
        return f"input dtype {NUMPY_NAMES.get(m.group(2), m.group(2))} not fed: imported as " \
            f"{NUMPY_NAMES.get(m.group(1), m.group(1))}"
    m = re.match(r"node \d+ '[^']*' \((\w+), opset \d+\): (.*)", msg)
    if m:
        op, detail = m.groups()
        if "is not supported yet" in detail:
            return f"op not supported: {op}"
        if re.search(r"on (a )?graph tensors? is not available|is computed by the graph", detail):
            return f"op on graph tensor not supported: {op}"
        detail = re.sub(r"^\w+( \(batched\))?: ", "", detail)  # the builder's own prefix
        if cls == "UnsupportedError":
            return f"{op} not supported: {detail}"
        return f"{op} rejected ({cls}): {detail}"
    return f"{cls}: {msg}"


# ------------------------------------------------------------------- report


def main():
    p = expected_failures.parser(__doc__, EXPECTED_FILE, "cases")
    p.add_argument("-v", "--verbose", action="store_true", help="print every case's result")
    args = p.parse_args()
    expected_failures.check_args(p, args)
    t0 = time.perf_counter()

    import onnx

    ops = supported_op_types(args.source)
    cases = generate_cases(ops)
    if args.only:
        cases = [(op, c) for op, c in cases if re.search(args.only, c.name)]
    t_gen = time.perf_counter() - t0
    print(f"onnx {onnx.__version__}: {len(cases)} node test cases of the {len(ops)} op types "
          f"the importer lists ({', '.join(ops)}), generated in {t_gen:.1f} s", flush=True)

    results = run_all(cases)
    for _, c in cases:
        if args.verbose:
            print(f"{'pass' if results[c.name] is None else 'FAIL'} {c.name}"
                  + (f": {results[c.name]}" if results[c.name] else ""))

    expected_path = os.path.join(args.source, EXPECTED_FILE)
    if args.write_expected:
        expected_failures.write(expected_path, HEADER, {c.name: results[c.name] for _, c in cases}, classify)
    expected = expected_failures.read(expected_path)

    # the table
    per_op = collections.OrderedDict((op, [0, 0, 0]) for op in sorted(ops))
    for op, c in cases:
        row = per_op[op]
        row[0] += 1
        if results[c.name] is None:
            row[1] += 1
        elif c.name in expected:
            row[2] += 1
    width = max(len(op) for op in ops)
    print(f"\n{'op type':<{width}}  cases  passed  expected failures")
    for op, (n, ok, xf) in per_op.items():
        print(f"{op:<{width}}  {n:5d}  {ok:6d}  {xf:6d}")
    total = len(cases)
    passed = sum(r is None for r in results.values())
    pct = 100.0 * passed / total if total else 0.0
    print(f"{'all':<{width}}  {total:5d}  {passed:6d}  {sum(r[2] for r in per_op.values()):6d}"
          f"    ({pct:.1f}% pass)")

    reasons = collections.Counter(classify(r).split(":")[0] for r in results.values() if r)
    if reasons:
        print("\nfailures by reason:")
        for reason, n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])):
            print(f"{n:5d}  {reason}")

    bad = expected_failures.verdict({c.name: results[c.name] for _, c in cases}, expected, classify, EXPECTED_FILE,
                                    "case", "tests/test_onnx_conformance.sh", subset=bool(args.only))
    unexpected = sum(1 for _, c in cases if results[c.name] is not None and c.name not in expected)
    print(f"\n{passed} of {total} cases pass ({pct:.1f}%), {total - passed - unexpected} "
          f"expected failures; {time.perf_counter() - t0:.1f} s")
    print(f"test_onnx_conformance: {'FAIL' if bad else 'PASS'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
