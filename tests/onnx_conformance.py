"""ONNX's own backend node test cases, every one, run through tensorscope's importer.

Every node test case of the `onnx` package (the cases onnx's generator
makes, the ones onnx/backend/test/data/node holds in ONNX's repository,
including the `_expanded` function bodies) is imported at its input shapes
and run twice: through the Python package (Graph.from_onnx, then an
inference model on its inputs, the outputs compared as ONNX's backend runner
does: same count, shape and dtype, then rtol=1e-3, atol=1e-7), and through
the CLI's `tensorscope compare` against the case's outputs at the same
tolerances. A case passes when both do; a case whose op (or one op of its
function body) the importer does not import fails like any other.

Two figures are printed: over the whole suite, and over the cases a training
or inference graph of floats and integers can hold. The latter leaves out,
by a rule on each case's ops, domains and types (`outside`, never a list of
cases), the cases that use string tensors or ops, sequences or optionals,
quantized ops or the 8-, 4- and 2-bit types, image decoding, signal
processing, detection post-processing, random sampling, Unique, or a domain
other than the default one (ai.onnx.ml, ai.onnx.preview, training).

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
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

import expected_failures

EXPECTED_FILE = os.path.join("tests", "onnx_conformance_expected_failures.txt")
CASE_TIMEOUT_S = 60  # one case, both paths: import, compile and run are milliseconds, the CLI's start a little more
HEADER = """\
# ONNX's node test cases (onnx==1.23.2) that tensorscope fails today, through
# Python or through the CLI's compare, and why: `case  reason`, sorted; a reason
# in [brackets] first is the category that leaves the case out of the figure
# over the cases a graph of floats and integers can hold. tests/test_onnx_conformance.sh
# fails on a failing case missing here and on a case here that passes: remove it then.
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


def generate_cases():
    """Every one of ONNX's node test cases: [(op_type, TestCase)], sorted by
    name; op_type is the op the case tests (the function's op for an
    `_expanded` body)."""
    import onnx.backend.test.case.node as node_cases

    warnings.simplefilter("ignore")  # the generators' own overflow warnings
    cases = node_cases.collect_testcases(None)

    def op_of(case):
        # expect() records each case's node under its name; an expanded
        # function body is named <case>_expanded[_verN]
        node = node_cases._existing_names.get(case.name)
        if node is None:
            node = node_cases._existing_names[case.name.split("_expanded")[0]]
        return node.op_type

    cases = [(op_of(c), c) for c in cases]
    cases.sort(key=lambda oc: oc[1].name)
    return cases


# ----------------------------------------------------- the cases left out

# The categories a training or inference graph of floats and integers does
# not hold: a case using one is left out of the figure over what tensorscope
# takes (and counted in the one over the whole suite).
LOW_BIT_TYPES = ("FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "FLOAT8E8M0",
                 "UINT4", "INT4", "FLOAT4E2M1", "UINT2", "INT2")


def _type_categories():
    from onnx import TensorProto

    cats = {TensorProto.STRING: "strings"}
    for name in LOW_BIT_TYPES:
        if hasattr(TensorProto, name):
            cats[getattr(TensorProto, name)] = "quantized types"
    return cats


def op_category(domain, op):
    """The category an op of `domain` falls in, or None."""
    if domain not in ("", "ai.onnx"):
        return f"domain {domain}"
    if op.startswith("String") or op == "RegexFullMatch":
        return "strings"
    if "Sequence" in op or op.startswith("Optional"):
        return "sequences and optionals"
    if op in ("QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear") or op.startswith("QLinear") \
            or op.endswith("Integer"):
        return "quantized ops"
    if op == "ImageDecoder":
        return "image decoding"
    if op in ("DFT", "STFT", "MelWeightMatrix") or op.endswith("Window"):
        return "signal processing"
    if op in ("NonMaxSuppression", "RoiAlign"):
        return "detection post-processing"
    if op in ("Bernoulli", "Multinomial") or op.startswith("Random"):
        return "random sampling"
    if op == "Unique":
        return "Unique"
    return None


def outside(model):
    """The categories (sorted) of what `model` uses that a graph of floats
    and integers does not hold: its nodes' ops and domains, and the types
    of its inputs, outputs, value infos, initializers, Constant values and
    Cast targets, its subgraphs' (If, Loop, Scan bodies) included. Empty
    when the case counts in the figure over what tensorscope takes."""
    from onnx import AttributeProto

    type_cats = _type_categories()
    cats = set()

    def of_type(tp):
        kind = tp.WhichOneof("value")
        if kind in ("sequence_type", "optional_type", "map_type"):
            cats.add("sequences and optionals")
        elif kind == "sparse_tensor_type":
            cats.add("sparse tensors")
        elif kind == "tensor_type" and tp.tensor_type.elem_type in type_cats:
            cats.add(type_cats[tp.tensor_type.elem_type])

    def walk(g):
        for vi in list(g.input) + list(g.output) + list(g.value_info):
            of_type(vi.type)
        for t in g.initializer:
            if t.data_type in type_cats:
                cats.add(type_cats[t.data_type])
        for n in g.node:
            c = op_category(n.domain, n.op_type)
            if c:
                cats.add(c)
            for a in n.attribute:
                if a.HasField("t") and a.t.data_type in type_cats:
                    cats.add(type_cats[a.t.data_type])
                if a.type == AttributeProto.STRING and n.op_type == "Constant":
                    cats.add("strings")
                if a.name == "to" and a.type == AttributeProto.INT and a.i in type_cats:
                    cats.add(type_cats[a.i])
                if a.HasField("g"):
                    walk(a.g)
                for sub in a.graphs:
                    walk(sub)

    walk(model.graph)
    return sorted(cats)


def ops_used(model):
    """Every op type of the model's nodes and subgraphs (`domain.Op` outside
    the default domain)."""
    ops = set()

    def walk(g):
        for n in g.node:
            ops.add(n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}")
            for a in n.attribute:
                if a.HasField("g"):
                    walk(a.g)
                for sub in a.graphs:
                    walk(sub)

    walk(model.graph)
    return ops


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
    "ReduceProd": {1}, "Tile": {1}, "Trilu": {1}, "CumSum": {1}, "Resize": {1, 2, 3}, "OneHot": {1}, "CumProd": {1}, "CenterCropPad": {1}, "TopK": {1}, "Compress": {1}, "ScatterND": {1}, "ScatterElements": {1}, "Scatter": {1}, "MaxUnpool": {1, 2}, "AffineGrid": {1}, "Col2Im": {1, 2}, "Upsample": {1},
    "If": {0}, "Loop": {0, 1},  # a condition and a trip count known at import: folded, unrolled
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


def run_case(ts, case, workdir, cli):
    """Runs one case through Python, then through the CLI (`cli`, the
    tensorscope binary; None: Python only). Returns (None or the Python
    path's reason, None or the CLI's reason)."""
    model = case.model
    path = os.path.join(workdir, case.name + ".onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    input_names = [vi.name for vi in model.graph.input]
    output_names = [vi.name for vi in model.graph.output]
    why_py = why_cli = None
    try:
        for inputs, outputs in case.data_sets:
            inputs = [_array(v) for v in inputs]
            outputs = [_array(v) for v in outputs]
            feeds = dict(zip(input_names, inputs))
            if any(not isinstance(v, np.ndarray) for v in feeds.values()):  # an ONNX sequence or optional
                kind = next(type(v).__name__ for v in feeds.values() if not isinstance(v, np.ndarray))
                return f"input type {kind} not fed", f"input type {kind} not fed"
            # an input of no values (a dimension of 0) is known at import:
            # bound, an empty constant (tensorscope's dimensions are positive)
            bound = {k: feeds.pop(k) for k in bound_inputs(model) | {k for k, v in feeds.items() if v.size == 0} if k in feeds}
            if why_py is None:
                try:
                    why_py = run_python(ts, path, feeds, bound, outputs)
                except Exception as e:  # the library's error: the reason
                    why_py = f"{type(e).__name__}: {e}".replace(workdir + os.sep, "")
            if cli and why_cli is None:
                why_cli = run_cli(cli, path, workdir, feeds, bound, dict(zip(output_names, outputs)))
    finally:
        os.unlink(path)
    return why_py, why_cli


def run_python(ts, path, feeds, bound, outputs):
    """The Python package's import and inference run of one data set."""
    g = ts.Graph.from_onnx(path, {k: v.shape for k, v in feeds.items()}, input_values=bound)
    try:
        # "final": each output as it is (the default for inference,
        # "all", stacks the samples of a run on a leading axis)
        m = ts.inference_model(g, ts.Options().output_mode("final"))
        got = m(**feeds)
        got = list(got) if isinstance(got, tuple) else [got]
        return compare(outputs, got)
    finally:
        g.close()


def run_cli(cli, path, workdir, feeds, bound, outputs):
    """`tensorscope compare` of one data set: the model fed the case's
    inputs (.npz), its bound inputs given by --input-value (.npy), against
    the case's outputs by the file's output names at ONNX's tolerances.
    None when it exits 0, else its last error line or FAIL row."""
    for name, v in outputs.items():
        if not isinstance(v, np.ndarray):
            return f"output type {type(v).__name__} not compared"
    stem = os.path.join(workdir, "cli")
    # in C order, as the CLI takes arrays (a case's transposed output is Fortran-ordered)
    feeds = {k: np.require(v, requirements="C") for k, v in feeds.items()}
    outputs = {k: np.require(v, requirements="C") for k, v in outputs.items()}
    # ml_dtypes' types (bfloat16, the float8s) have no .npy form (NumPy
    # saves them as opaque '<V2' bytes): their values, exact in float32, are
    # fed (the CLI converts an input exactly to its declared type) and
    # compared as such
    def npy_form(arrays):
        return {k: v.astype(np.float32) if v.dtype.kind == "V" else v for k, v in arrays.items()}
    np.savez(stem + "_in.npz", **npy_form(feeds))  # none (every input bound): an archive of no arrays
    np.savez(stem + "_ref.npz", **npy_form(outputs))
    cmd = [cli, "compare", "--model", path, "--inputs", stem + "_in.npz", "--reference", stem + "_ref.npz",
           "--atol", repr(ATOL), "--rtol", repr(RTOL)]
    for k, (name, v) in enumerate(bound.items()):
        npy = f"{stem}_bound{k}.npy"
        np.save(npy, npy_form({name: v})[name])
        cmd += ["--input-value", f"{name}={npy}"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=CASE_TIMEOUT_S / 2, errors="replace")
    except subprocess.TimeoutExpired:
        return f"cli: timeout: no result in {CASE_TIMEOUT_S / 2:g} s"
    if r.returncode == 0:
        return None
    lines = [ln for ln in (r.stderr + r.stdout).splitlines() if ln.strip()]
    said = [ln for ln in lines if re.match(r"(FAIL|SHAPE|NO-MATCH)\b", ln)] or \
        [ln for ln in lines if "error" in ln.lower()] or lines[-1:] or [""]
    msg = re.sub(re.escape(workdir + os.sep), "", said[0])
    return f"cli: exit status {r.returncode}: {' '.join(msg.split())[:300]}"


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


def worker(cases, start, wfd, cli):
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
                why = run_case(ts, cases[i][1], workdir, cli)
            except Exception as e:  # one case's failure never stops the others
                why = f"{type(e).__name__}: {e}".replace(workdir + os.sep, "")
                why = (why, None)
            out.write(json.dumps({"i": i, "why": why}) + "\n")
    out.close()
    os._exit(0)


def run_all(cases, cli):
    """{case name: (None or the Python path's reason, None or the CLI's)}. A forked worker runs the cases in turn;
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
                worker(cases, i, wfd, cli)
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
                    why = f"timeout: no result in {CASE_TIMEOUT_S} s"
                    results[cases[i][1].name] = (why, why)
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
                    results[cases[rec["i"]][1].name] = tuple(rec["why"])
                    i = rec["i"] + 1
        _, status = os.waitpid(pid, 0)
        if i < len(cases) and not killed:
            how = (f"signal {signal.Signals(os.WTERMSIG(status)).name}" if os.WIFSIGNALED(status)
                   else f"exit status {os.WEXITSTATUS(status)}")
            results[cases[i][1].name] = (f"crash: the worker died ({how})", "cli: not run (the Python run crashed first)")
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


def outcome(why, cats):
    """A case's line in the expected-failures file: None when it passes
    both ways, else the Python path's reason (the CLI's where only it
    fails), after the category that leaves it out of the figure."""
    py, cli = why
    if py is None and cli is None:
        return None
    reason = classify(py) if py is not None else classify(cli)
    return f"[{', '.join(cats)}] {reason}" if cats else reason


def figure(n, of):
    return f"{n} of {of} ({100.0 * n / of if of else 0.0:.1f}%)"


def main():
    p = expected_failures.parser(__doc__, EXPECTED_FILE, "cases")
    p.add_argument("-v", "--verbose", action="store_true", help="print every case's result")
    p.add_argument("--cli", default=os.environ.get("TS_CLI"), help="the tensorscope binary (default $TS_CLI)")
    args = p.parse_args()
    expected_failures.check_args(p, args)
    if not args.cli or not os.access(args.cli, os.X_OK):
        sys.exit(f"FAIL the tensorscope binary ({args.cli or 'none given'}) is missing: build it, or give --cli\n"
                 "test_onnx_conformance: FAIL")
    t0 = time.perf_counter()

    import onnx

    ops = supported_op_types(args.source)
    cases = generate_cases()
    if args.only:
        cases = [(op, c) for op, c in cases if re.search(args.only, c.name)]
    cats = {c.name: outside(c.model) for _, c in cases}
    t_gen = time.perf_counter() - t0
    print(f"onnx {onnx.__version__}: {len(cases)} node test cases, {sum(not v for v in cats.values())} of them of "
          f"what a graph of floats and integers holds; the importer lists {len(ops)} op types; "
          f"generated in {t_gen:.1f} s", flush=True)

    results = run_all(cases, args.cli)
    lines = {c.name: outcome(results[c.name], cats[c.name]) for _, c in cases}
    if args.verbose:
        for _, c in cases:
            py, cli = results[c.name]
            print(f"{'pass' if lines[c.name] is None else 'FAIL'} {c.name}"
                  + (f": python: {py}" if py else "") + (f"; {cli}" if cli else ""))

    expected_path = os.path.join(args.source, EXPECTED_FILE)
    if args.write_expected:
        expected_failures.write(expected_path, HEADER, lines, lambda line: line)
    expected = expected_failures.read(expected_path)

    # the table: per op type under test, its cases, those in the figure,
    # and what passes of each through Python, the CLI and both
    per_op = collections.defaultdict(lambda: [0, 0, 0, 0, 0, 0])
    for op, c in cases:
        py, cli = results[c.name]
        row = per_op[op]
        row[0] += 1
        row[1] += not cats[c.name]
        row[2] += py is None
        row[3] += cli is None
        row[4] += lines[c.name] is None
        row[5] += lines[c.name] is None and not cats[c.name]
    width = max([len(op) for op in per_op] + [7])
    print(f"\n{'op type':<{width}}  cases  in figure  python  cli  both  both in figure")
    for op in sorted(per_op):
        n, nin, okp, okc, ok, okin = per_op[op]
        print(f"{op:<{width}}  {n:5d}  {nin:9d}  {okp:6d}  {okc:3d}  {ok:4d}  {okin:14d}")

    total = len(cases)
    inside = [c.name for _, c in cases if not cats[c.name]]
    pass_py = sum(results[n][0] is None for n in results)
    pass_cli = sum(results[n][1] is None for n in results)
    pass_all = sum(v is None for v in lines.values())
    in_py = sum(results[n][0] is None for n in inside)
    in_cli = sum(results[n][1] is None for n in inside)
    in_all = sum(lines[n] is None for n in inside)

    left = collections.Counter(k for v in cats.values() for k in v)
    if left:
        print("\ncases left out of the figure, by what they use (a case may use several):")
        for k, n in sorted(left.items(), key=lambda kv: (-kv[1], kv[0])):
            print(f"{n:5d}  {k}")
    missing = collections.Counter()
    for n in inside:
        if lines[n] is not None:
            for op in ops_used(next(c for _, c in cases if c.name == n).model) - set(ops):
                missing[op] += 1
    if missing:
        print("\nop types the importer lacks, by the failing cases of the figure that use them:")
        for op, n in sorted(missing.items(), key=lambda kv: (-kv[1], kv[0])):
            print(f"{n:5d}  {op}")
    reasons = collections.Counter(re.sub(r"^\[[^]]*\] ", "", v).split(":")[0] for n, v in lines.items()
                                  if v is not None and not cats[n])
    if reasons:
        print("\nfailures of the figure by reason:")
        for reason, n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])):
            print(f"{n:5d}  {reason}")

    bad = expected_failures.verdict(lines, expected, lambda line: line, EXPECTED_FILE,
                                    "case", "tests/test_onnx_conformance.sh", subset=bool(args.only))
    print(f"\nwhat a graph of floats and integers holds: {figure(in_all, len(inside))} pass "
          f"(python {figure(in_py, len(inside))}, cli {figure(in_cli, len(inside))})")
    print(f"the whole suite: {figure(pass_all, total)} pass (python {figure(pass_py, total)}, "
          f"cli {figure(pass_cli, total)}); {time.perf_counter() - t0:.1f} s")
    print(f"test_onnx_conformance: {'FAIL' if bad else 'PASS'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
