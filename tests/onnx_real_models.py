"""Real models from PyTorch's two ONNX exporters, imported and checked
against PyTorch.

Seven models, built small with random weights at test time (nothing is
downloaded, nothing committed): torchvision's resnet18, mobilenet_v3_small
and a 2-layer VisionTransformer, transformers' GPT2LMHeadModel and
BertForSequenceClassification from small configs, an nn.TransformerEncoder
classifier and an nn.LSTM classifier. Each is exported in training mode by
the TorchScript exporter (opset 17, as ts.training_model exports) and by the
default (dynamo) exporter of the PyTorch this runs with; every dropout
probability is 0, so that PyTorch's training-mode forward is deterministic
(the Dropout nodes are exported all the same).

For each model x exporter, the checks (a cell each):
  import     Graph.from_onnx at the example inputs' shapes
  names      every parameter and floating-point buffer of the module whose
             values the file holds (an initializer of the same values, or of
             their transpose, under any name) is a tensor of the graph under
             its PyTorch name, or under another name of the same tensor (a
             tied weight: GPT-2's lm_head.weight is transformer.wte.weight);
             one the file does not hold at all (BatchNorm fused into a Conv,
             folded with constants: docs/onnx.md) no importer can name
  inference  ts.inference_model's output equals the module's in eval mode
             (BatchNormalization by its running statistics):
             |ts - torch| <= 1e-4 * (1 + |torch|)
  rebatch    the inference model, imported at the example's batch (2), run
             on 3 samples: its output equals the module's on them (the
             exporters bake the batch into Reshape targets and constants)
  gradients  one step of a training model (cross-entropy on the first
             output): the gradient of every parameter the graph holds
             (names) within 1e-3 of
             PyTorch's, relative to the largest value of PyTorch's gradient
             of that parameter, or to 1e-3 of the largest gradient of the
             whole model where that is larger: an absolute tolerance of
             1e-6 of the model's largest gradient. The floor is for
             gradients that are zero in exact math (the bias of a
             convolution under a training-mode BatchNormalization, whose
             batch mean cancels it: PyTorch's is ~1e-10 where the model's
             largest is ~0.4): both frameworks then return float32 rounding
             noise of the terms that cancel, which are of the model's
             gradients' size. 1e-6 of the largest is about 8 float32 ulps
             of it: rounding passes, a real error of that size fails.
  training   10 Adam steps on one batch: the loss falls
  compare    `tensorscope compare --grads` (the CLI) against the reference
             dump python/tensorscope_ref.py writes of the module passes,
             layer by layer; and with noise added to one parameter of
             --weights (the middle one the graph holds by its name, of a
             module whose output the reference records and is not about
             zero), the first divergence it
             names is an op of that parameter's module. At the inference
             check's tolerance
             (--atol 1e-4 --rtol 1e-4: |ts - torch| <= 1e-4 * (1 + |torch|);
             compare's defaults, 1e-5 and 1e-4, fail on float32 rounding
             after resnet18's tenth layer, 1.3e-5)
  cli        `tensorscope train --model FILE.onnx --data FILE.npz` (the
             CLI) trains it 10 Adam steps from an .npz of the example batch
             twice (float images or sequences, or int64 token ids; labels
             per sample, or per token for GPT-2: cross-entropy over
             [N,T,V]): the last epoch's loss is below the first's
The dynamo exporter writes every BatchNorm of a module in training mode
as an inference BatchNorm (running statistics; its optimizer then fuses it
into the Conv before it), and says so in the node's metadata, which the
importer warns of: the file's model is the module with its BatchNorms in
eval mode, so for that exporter gradients and compare take PyTorch's
reference with the BatchNorm layers in eval mode (frozen_batch_norms).

A check that cannot run because one it needs failed (gradients need the
names) fails as "not run".

Prints the table, then exits 1 on a failing cell that
tests/onnx_real_models_expected_failures.txt does not list, or on a listed
cell that passes now. `--write-expected` rewrites that file from today's
results, each reason classified as tests/onnx_conformance.py classifies
ONNX's node cases (docs/onnx.md#real-models). Each model x exporter runs
in a forked process, so that a crash or a hang is that row's failure, not
the test's.
"""
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import expected_failures  # noqa: E402
from onnx_conformance import classify  # noqa: E402
from real_models import BATCH, MODELS, build  # noqa: E402

EXPECTED_FILE = os.path.join("tests", "onnx_real_models_expected_failures.txt")
HEADER = """\
# Cells of tests/onnx_real_models.py (model/exporter/check) that fail today,
# and why: `cell  reason`, sorted. tests/test_onnx_real_models.sh fails on a
# failing cell missing here and on a cell here that passes: remove it then.
# Regenerate with tests/test_onnx_real_models.sh --write-expected.
"""
EXPORTERS = ["torchscript", "dynamo"]
CHECKS = ["import", "names", "inference", "rebatch", "gradients", "training", "compare", "cli"]
ROW_TIMEOUT_S = 600
OUT_RTOL = 1e-4      # inference: |ts - torch| <= OUT_RTOL * (1 + |torch|)
GRAD_RTOL = 1e-3     # gradients: max |ts - torch| <= GRAD_RTOL * max |torch|,
GRAD_FLOOR = 1e-3    # max |torch| taken as at least GRAD_FLOOR * the model's largest gradient
TRAIN_STEPS = 10


def export(module, inputs, path, exporter):
    """The module exported in training mode by `exporter`."""
    import warnings
    args, names = tuple(inputs.values()), list(inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "torchscript":
            from tensorscope._torch import export_onnx
            export_onnx(module, args, path, names)
        else:
            torch.onnx.export(module, args, path, input_names=names, dynamo=True,
                              external_data=False)
    module.train()  # an exporter may leave it in eval mode


class frozen_batch_norms:
    """With the dynamo exporter's file, the module's BatchNorm layers in
    eval mode while the block runs (the file holds them so: see the
    docstring); with the TorchScript exporter's, the module as it is."""

    def __init__(self, module, exporter):
        self.bns = [] if exporter != "dynamo" else [
            m for m in module.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.training]

    def __enter__(self):
        for m in self.bns:
            m.eval()

    def __exit__(self, *exc):
        for m in self.bns:
            m.train()


def scores_of(out):
    return out[0] if isinstance(out, (tuple, list)) else out


def torch_loss(scores, labels):
    import torch.nn.functional as F
    return F.cross_entropy(scores.reshape(-1, scores.shape[-1]), labels.reshape(-1))


# ------------------------------------------------------------------ checks


def relative_error(got, want, floor=0.0):
    """max |got - want| over max |want|, or over `floor` where that is larger."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), floor, 1e-30))


def where_missing_went(module, path, missing):
    """{kind: [what]} of the missing parameters and buffers, found by value
    in the file: an initializer under another name with the same values
    (the dynamo exporter's optimizer merges equal initializers: every
    LayerNorm's ones, BatchNorm's zeros), its transpose (a Linear's weight
    folded into a MatMul's operand, val_N), or nothing (folded into another
    constant, or BatchNormalization fused into Conv)."""
    import onnx
    from onnx import numpy_helper
    inits = {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
    state = dict(module.state_dict(keep_vars=True))
    said = {"merged": [], "transposed": [], "gone": []}
    for n in missing:
        v = state[n].detach().cpu().numpy()
        same = [k for k, a in inits.items() if a.shape == v.shape and np.array_equal(a, v)]
        flip = [k for k, a in inits.items() if v.ndim == 2 and a.shape == v.T.shape
                and np.array_equal(a, v.T)]
        if same:
            said["merged"].append((n, f"{n} into {same[0]}"))
        elif flip:
            said["transposed"].append((n, f"{n} as {flip[0]}"))
        else:
            said["gone"].append((n, n))
    return said


def said_text(said):
    parts = [f"{len(v)} {k} (e.g. {v[0][1]})" for k, v in said.items() if v]
    return "; the file holds them " + ", ".join(parts) if parts else ""


def graph_names(ts, g, module):
    """{PyTorch name: the graph tensor's name} of every parameter and
    floating-point buffer the graph holds: under its own name, or under
    another name of the same tensor (a tied weight: GPT-2's lm_head.weight
    is transformer.wte.weight, which named_parameters lists)."""
    aliases = {}
    for n, p in module.named_parameters(remove_duplicate=False):
        aliases.setdefault(id(p), []).append(n)
    found = {}
    want = [(n, p) for n, p in module.named_parameters()]
    want += [(n, b) for n, b in module.named_buffers() if b.is_floating_point()]
    for n, t in want:
        for name in [n] + [a for a in aliases.get(id(t), []) if a != n]:
            try:
                g.tensor(name)
            except ts.NotFoundError:
                continue
            found[n] = name
            break
    return [n for n, _ in want], found


def training_model(ts, path, inputs, labels, optimizer, anchors=()):
    g = ts.Graph.from_onnx(path, {k: tuple(v.shape) for k, v in inputs.items()})
    scores = g.outputs[0]
    lab = g.input("labels", "i32", list(labels.shape))
    loss = g.cross_entropy(scores, lab)
    loss.name = "loss"
    opts = ts.Options().output_mode("final")
    for short, tensor in anchors:
        opts.anchor_tensor(short, tensor, "final")
    model = ts.training_model(g, opts, optimizer=optimizer, loss=loss)
    model.compile()
    return model


def check_row(ts, name, exporter, workdir):
    """{check: None (pass) or reason} of one model x exporter."""
    res = {}
    module, inputs, labels = build(name)
    path = os.path.join(workdir, f"{name}.{exporter}.onnx")
    feeds = {k: v.numpy() for k, v in inputs.items()}
    y = labels.numpy().astype(np.int32)

    def run(check, fn, needs=()):
        failed = [n for n in needs if res.get(n) is not None]
        if failed:
            res[check] = f"not run: {failed[0]} failed"
            return
        try:
            res[check] = fn()
        except Exception as e:  # one check's failure never stops the others
            msg = f"{type(e).__name__}: {e}".replace(path + ": ", "").replace(path, "the file")
            res[check] = " ".join(msg.split())[:600]

    def do_import():
        try:
            export(module, inputs, path, exporter)
        except Exception as e:
            while e.__cause__ is not None:  # torch.export's own error, under the exporter's
                e = e.__cause__
            tb = traceback.extract_tb(e.__traceback__)[-1]
            first = re.sub(r"\x1b\[[0-9;]*m", "", (str(e).strip() or "?").splitlines()[0])
            return (f"export failed: {type(e).__name__}: {first[:300]} "
                    f"({os.path.basename(tb.filename)}:{tb.lineno})")
        ts.Graph.from_onnx(path, {k: tuple(v.shape) for k, v in inputs.items()}).close()
        return None

    def do_names():
        g = ts.Graph.from_onnx(path, {k: tuple(v.shape) for k, v in inputs.items()})
        want, found = graph_names(ts, g, module)
        g.close()
        missing = [n for n in want if n not in found]
        said = where_missing_went(module, path, missing)
        # what the file holds (equal or transposed values) must be under its
        # PyTorch name; what it does not hold at all no importer can name
        held = [n for k in ("merged", "transposed") for n, _ in said[k]]
        if held:
            return (f"names missing: {len(held)} of {len(want)}, e.g. "
                    f"{', '.join(held[:3])}{said_text(said)}")
        return None

    def inference_error(run_feeds):
        """The inference model (imported at the example's shapes) on
        run_feeds against the module in eval mode: None, or what differs."""
        g = ts.Graph.from_onnx(path, {k: tuple(v.shape) for k, v in inputs.items()})
        m = ts.inference_model(g, ts.Options().output_mode("final"))
        got = m(**run_feeds)
        got = np.asarray(got[0] if isinstance(got, tuple) else got)
        with torch.no_grad():
            want = scores_of(module.eval()(*[torch.from_numpy(v) for v in run_feeds.values()])).numpy()
        module.train()
        if got.shape != want.shape:
            return f"output shape {list(got.shape)}, PyTorch's {list(want.shape)}"
        err = np.abs(got.astype(np.float64) - want) / (1 + np.abs(want))
        if not np.all(err <= OUT_RTOL):
            return f"output mismatch: max error {float(np.max(err)):.3g} > {OUT_RTOL:g}"
        return None

    def do_inference():
        return inference_error(feeds)

    def do_rebatch():  # 3 samples: the example's and its first again
        try:
            return inference_error({k: np.concatenate([v, v[:1]]) for k, v in feeds.items()})
        except ts.ShapeError as e:
            return f"not at another batch: {e}"

    def do_gradients():
        g = ts.Graph.from_onnx(path, {k: tuple(v.shape) for k, v in inputs.items()})
        _, found = graph_names(ts, g, module)
        g.close()
        all_params = dict(module.named_parameters())  # those the file holds (names: the rest are gone)
        params = {n: p for n, p in all_params.items() if n in found}
        anchors = [(f"g{i}", "Gradient___" + found[n]) for i, n in enumerate(params)]
        m = training_model(ts, path, inputs, labels, ts.SGD(lr=0.0), anchors)
        m(**feeds, labels=y)
        module.zero_grad()
        with frozen_batch_norms(module, exporter):
            torch_loss(scores_of(module(*inputs.values())), labels).backward()
        wants = {n: (p.grad.numpy() if p.grad is not None
                     else np.zeros(tuple(p.shape), np.float32)) for n, p in all_params.items()}
        floor = GRAD_FLOOR * max(float(np.max(np.abs(w), initial=0.0)) for w in wants.values())
        wants = {n: wants[n] for n in params}
        worst = (0.0, "")
        for (short, _), (n, want) in zip(anchors, wants.items()):
            got = m.get_anchored_tensor(short)
            if got.size != want.size:
                return f"gradient of {n}: shape {list(got.shape)}, PyTorch's {list(want.shape)}"
            worst = max(worst, (relative_error(got.reshape(want.shape), want, floor), n))
        if worst[0] > GRAD_RTOL:
            return f"gradient mismatch: {worst[1]} off by {worst[0]:.3g} of its largest value"
        return None

    def do_training():
        m = training_model(ts, path, inputs, labels, ts.Adam(1e-3))
        losses = [float(m(**feeds, labels=y)) for _ in range(TRAIN_STEPS)]
        if not (np.all(np.isfinite(losses)) and min(losses[-3:]) < losses[0]):
            return "loss does not fall: " + ", ".join(f"{v:.4g}" for v in losses)
        return None

    def compare_cli(ref, weights):
        cli = os.path.join(os.environ.get("TS_BUILD_DIR", "build"), "tensorscope")
        r = subprocess.run([cli, "compare", "--model", path, "--grads",
                            "--inputs", os.path.join(ref, "inputs.npz"),
                            "--weights", weights,
                            "--reference", os.path.join(ref, "reference.npz"),
                            "--atol", str(OUT_RTOL), "--rtol", str(OUT_RTOL)],
                           capture_output=True, text=True, timeout=ROW_TIMEOUT_S)
        out = (r.stdout + r.stderr).replace(path, "the file").replace(workdir + os.sep, "")
        return r.returncode, out.splitlines()

    def do_compare():
        import tensorscope_ref
        ref = os.path.join(workdir, f"{name}.{exporter}.reference")
        with frozen_batch_norms(module, exporter):
            tensorscope_ref.dump(module, inputs, ref, loss_fn=torch_loss, targets=labels)
        rc, out = compare_cli(ref, os.path.join(ref, "weights.npz"))
        if rc != 0:
            said = [ln for ln in out if ln.startswith(("compared", "first divergence", "error"))]
            return "compare failed: " + "; ".join(said or out[-2:])[:500]
        # planted: noise of std 0.5 added to one parameter (the middle one
        # of those the graph holds under its name whose module's output the
        # reference records, above 1e-2 somewhere -- mobilenet's deep
        # layers are ~1e-13 at random weights --, a tied one left out; a
        # constant would vanish after a LayerNorm): the first divergence
        # is an op of its module
        g = ts.Graph.from_onnx(path, {k: tuple(v.shape) for k, v in inputs.items()})
        _, found = graph_names(ts, g, module)
        g.close()
        names_of = {}
        for n, p in module.named_parameters(remove_duplicate=False):
            names_of.setdefault(id(p), []).append(n)
        weights = dict(np.load(os.path.join(ref, "weights.npz")))
        recorded = dict(np.load(os.path.join(ref, "reference.npz")))
        params = [n for n, p in module.named_parameters()
                  if len(names_of[id(p)]) == 1 and found.get(n) == n and n in weights
                  and np.max(np.abs(recorded.get(n.rsplit(".", 1)[0], 0.0))) > 1e-2]
        if not params:
            return "compare: no parameter to plant a change in"
        planted = params[len(params) // 2]
        noise = np.random.default_rng(0).standard_normal(weights[planted].shape).astype(np.float32)
        weights[planted] = weights[planted] + np.float32(0.5) * noise
        np.savez(os.path.join(ref, "planted.npz"), **weights)
        rc, out = compare_cli(ref, os.path.join(ref, "planted.npz"))
        layer = planted.rsplit(".", 1)[0]
        first = [ln.split(": ", 1)[1] for ln in out if ln.startswith("first divergence: ")]
        if rc == 0 or not first or not (first[0].startswith(layer + "/") or first[0].startswith(layer + ".")):
            return (f"compare missed a planted change of {planted}: "
                    + "; ".join(ln for ln in out if ln.startswith(("compared", "first divergence")))[:400])
        return None

    def do_cli():
        if len(feeds) != 1:
            return f"the CLI's .npz feeds one input ('x'); the model has {len(feeds)}"
        data = os.path.join(workdir, f"{name}.{exporter}.npz")
        x = next(iter(feeds.values()))
        np.savez(data, x=np.concatenate([x, x]), labels=np.concatenate([labels.numpy()] * 2))
        cli = os.path.join(os.environ.get("TS_BUILD_DIR", "build"), "tensorscope")
        r = subprocess.run([cli, "train", "--model", path, "--data", data, "--steps", str(TRAIN_STEPS),
                            "--batch-size", str(BATCH), "--optimizer", "adam", "--lr", "0.001"],
                           capture_output=True, text=True, timeout=ROW_TIMEOUT_S)
        out = (r.stdout + r.stderr).replace(path, "the file").replace(workdir + os.sep, "")
        losses = [float(v) for v in re.findall(r"^epoch \d+/\d+: loss (\S+)", out, re.M)]
        if r.returncode != 0 or len(losses) < 2:
            return "cli failed: " + " ".join(out.split())[-400:]
        if not (np.all(np.isfinite(losses)) and losses[-1] < losses[0]):
            return "cli loss does not fall: " + ", ".join(f"{v:.4g}" for v in losses)
        return None

    run("import", do_import)
    run("names", do_names, ["import"])
    run("inference", do_inference, ["import"])
    run("rebatch", do_rebatch, ["import"])
    run("gradients", do_gradients, ["import", "names"])
    run("training", do_training, ["import"])
    run("compare", do_compare, ["import"])
    run("cli", do_cli, ["import"])
    return res


# ------------------------------------------------------- one fork per row


def run_row(name, exporter):
    """check_row in a forked process: a crash or a hang fails that row."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        try:
            import tensorscope as ts
            ts.set_log_level(0)
            with tempfile.TemporaryDirectory(prefix="ts_real_models.") as d:
                res = check_row(ts, name, exporter, d)
        except BaseException as e:
            res = {c: f"not run: {type(e).__name__}: {e}"[:300] for c in CHECKS}
        with os.fdopen(wfd, "w") as out:
            out.write(json.dumps(res))
        os._exit(0)
    os.close(wfd)
    buf, deadline = b"", time.monotonic() + ROW_TIMEOUT_S
    with os.fdopen(rfd, "rb", buffering=0) as r:
        while True:
            ready, _, _ = select.select([r], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return {c: f"timeout: no result in {ROW_TIMEOUT_S} s" for c in CHECKS}
            chunk = r.read(65536)
            if not chunk:
                break
            buf += chunk
    _, status = os.waitpid(pid, 0)
    if not buf:
        how = (f"signal {signal.Signals(os.WTERMSIG(status)).name}" if os.WIFSIGNALED(status)
               else f"exit status {os.WEXITSTATUS(status)}")
        return {c: f"crash: the process died ({how})" for c in CHECKS}
    return json.loads(buf)


def reason_of(why):
    """A failing cell's reason as the expected-failures file states it: the
    kind of mismatch without its figures, the library's message classified."""
    for kind in ("output mismatch", "gradient mismatch", "loss does not fall", "names missing",
                 "compare failed", "cli failed", "cli loss does not fall", "not at another batch"):
        if why.startswith(kind):
            return kind
    if why.startswith(("not run", "export failed", "output shape", "gradient of", "crash: ",
                       "timeout: ")):
        return why
    return classify(why)


def main():
    p = expected_failures.parser(__doc__, EXPECTED_FILE, "models")
    args = p.parse_args()
    expected_failures.check_args(p, args)
    t0 = time.perf_counter()
    models = [m for m in MODELS if not args.only or re.search(args.only, m)]
    print(f"torch {torch.__version__}: {len(models)} models x {len(EXPORTERS)} exporters",
          flush=True)
    results = {}
    for name in models:
        for exporter in EXPORTERS:
            t = time.perf_counter()
            row = run_row(name, exporter)
            for c in CHECKS:
                results[f"{name}/{exporter}/{c}"] = row.get(c, "not run: no result")
            print(f"  {name}/{exporter}: {time.perf_counter() - t:.1f} s", flush=True)

    expected_path = os.path.join(args.source, EXPECTED_FILE)
    if args.write_expected:
        expected_failures.write(expected_path, HEADER, results, reason_of)
    expected = expected_failures.read(expected_path)

    width = max(len(f"{m}/{e}") for m in models for e in EXPORTERS)
    print(f"\n{'model/exporter':<{width}}  " + "  ".join(f"{c:<9}" for c in CHECKS))
    for name in models:
        for exporter in EXPORTERS:
            cells = [results[f"{name}/{exporter}/{c}"] for c in CHECKS]
            print(f"{name + '/' + exporter:<{width}}  " + "  ".join(
                f"{'pass' if w is None else ('-' if w.startswith('not run') else 'FAIL'):<9}"
                for w in cells))
    print("\nfailing cells (reason, then the message):")
    for cell, why in results.items():
        if why is not None and not why.startswith("not run"):
            print(f"  {cell}: {reason_of(why)}\n      {why[:400]}")

    bad = expected_failures.verdict(results, expected, reason_of, EXPECTED_FILE, "cell",
                                    "tests/test_onnx_real_models.sh", subset=bool(args.only))
    passed = sum(w is None for w in results.values())
    print(f"\n{passed} of {len(results)} cells pass; {time.perf_counter() - t0:.1f} s")
    print(f"test_onnx_real_models: {'FAIL' if bad else 'PASS'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
