"""OpInfo conformance of the torch.export front end: PyTorch's own operator
samples (torch.testing._internal.common_methods_invocations.op_db) for
every Core ATen op the front end maps, run through ts.Graph.from_torch
(capture "export") and compared with PyTorch: forward in float32 and the
integer dtypes the sample's op takes, and where it is differentiable the
gradient of sum(out * w) (w fixed random weights) with respect to each
float input (topk's indices by the values they pick: PyTorch leaves the
order of tied entries open). A sample that fails must be listed, with its reason, in
tests/torch_opinfo_expected_failures.txt; one listed there that passes is
an error too (the list is kept exact).

Prints the counts: the Core ATen ops mapped, of those a training graph of
floats and integers can hold (PyTorch's Core ATen set less its backward
ops, out= variants, symbolic-size ops, complex FFTs, uninitialised memory
and the ops whose result's shape depends on the data).

usage: torch_opinfo.py EXPECTED_FAILURES [--write]   (--write rewrites the
list from this run: to review, never to hide a regression)"""
import os
import re
import sys
import time
import warnings

import numpy as np
import torch

import tensorscope as ts
from tensorscope import _export

SAMPLES = int(os.environ.get("TS_OPINFO_SAMPLES", "1"))  # per op, dtype and OpInfo: the first ones PyTorch gives
RTOL, ATOL = 1e-4, 1e-5
DTYPES = (torch.float32, torch.int64)

# Core ATen overloads no training graph of floats and integers holds
NOT_IN_TRAINING_GRAPH = re.compile(
    r"_backward|\.out$|^sym_|^_fft_|^empty|^nonzero\.|^_local_scalar_dense\.")

# the OpInfos that exercise a Core ATen op whose name is not theirs
OPINFOS = {
    "_softmax": ["softmax"], "_log_softmax": ["log_softmax"],
    "native_layer_norm": ["nn.functional.layer_norm"], "native_group_norm": ["nn.functional.group_norm"],
    "_native_batch_norm_legit_functional": ["nn.functional.batch_norm"],
    "_native_batch_norm_legit_no_training": ["nn.functional.batch_norm"],
    "convolution": ["nn.functional.conv1d", "nn.functional.conv2d", "nn.functional.conv_transpose2d"],
    "max_pool2d_with_indices": ["nn.functional.max_pool2d"], "avg_pool2d": ["nn.functional.avg_pool2d"],
    "_adaptive_avg_pool2d": ["nn.functional.adaptive_avg_pool2d"],
    "max_pool3d_with_indices": ["nn.functional.max_pool3d"], "avg_pool3d": ["nn.functional.avg_pool3d"],
    "_adaptive_avg_pool3d": ["nn.functional.adaptive_avg_pool3d"],
    "embedding": ["nn.functional.embedding"], "gelu": ["nn.functional.gelu"], "elu": ["nn.functional.elu"],
    "leaky_relu": ["nn.functional.leaky_relu"], "hardtanh": ["nn.functional.hardtanh"],
    "relu": ["nn.functional.relu"], "constant_pad_nd": ["constant_pad_nd", "nn.functional.pad"],
    "upsample_nearest2d": ["nn.functional.interpolate"], "upsample_bilinear2d": ["nn.functional.interpolate"],
    "native_dropout": [],
    "reflection_pad1d": ["nn.functional.pad"], "reflection_pad2d": ["nn.functional.pad"],
    "reflection_pad3d": ["nn.functional.pad"], "replication_pad2d": ["nn.functional.pad"],
    "replication_pad3d": ["nn.functional.pad"],
    "addmm": ["addmm"], "mm": ["mm"], "bmm": ["bmm"], "cat": ["cat"], "where": ["where"],
    "split_with_sizes": ["split_with_sizes"], "index": ["index_put"] and [],
    "amax": ["amax"], "amin": ["amin"], "var": ["var"], "clamp": ["clamp"],
    "_cdist_forward": ["cdist"], "_pdist_forward": ["nn.functional.pdist"],
    "_embedding_bag": ["nn.functional.embedding_bag"], "col2im": ["nn.functional.fold"],
    "grid_sampler_2d": ["nn.functional.grid_sample"],
}


# why a sample fails, by what its failure says (the list's reasons, --write)
REASONS = [
    (r"the indices of aten\.(max|min)\.dim is read",
     "the sample returns max/min's indices along the dim, which tensorscope does not compute "
     "(refused when read: use argmax/argmin)"),
    (r"not a whole window",
     "adaptive pooling to a size that does not divide the input (windows of several sizes) is not "
     "mapped (refused)"),
    (r"divisor_override", "avg_pool2d's and avg_pool3d's divisor_override is not mapped (refused)"),
    (r"computes float64", "the sample computes in float64, which tensorscope does not hold (refused)"),
    (r"bitwise_\w+\.\w+ of integers has no mapping", "bitwise ops on integers are not mapped (refused; "
     "tensorscope holds integer tensors as f32; on booleans they are)"),
    (r"max pooling's indices is read", "the sample asks for max pooling's indices (return_indices=True), "
     "which tensorscope does not compute (refused when read)"),
    (r"batch norm's saved mean is read", "the sample returns batch norm's saved mean and 1/std, which "
     "tensorscope does not compute (refused when read)"),
]


def reason(key, failure):
    for pattern, why in REASONS:
        if re.search(pattern, failure):
            return why
    return re.sub(r"(/[^\s:]+)+", "<path>", failure)  # to be reviewed and replaced by the reason


def core_overloads():
    names = set()
    for attr in dir(torch.ops.aten):
        packet = getattr(torch.ops.aten, attr, None)
        if packet is None or not hasattr(packet, "overloads"):
            continue
        for o in packet.overloads():
            op = getattr(packet, o)
            if torch.Tag.core in op.tags:
                names.add(str(op)[len("aten."):])
    return names


class Op(torch.nn.Module):
    """forward(*ints) = op(*sample) with the float tensors parameters (their
    gradients Gradient___p<k>) and the integer ones inputs."""

    def __init__(self, fn, sample, buffers=()):
        super().__init__()
        self.fn = fn
        self.slots = []  # (kind, index) per leaf of the sample: p, i, or a value
        self.values = []
        self.ints = []
        leaves, self.tree = torch.utils._pytree.tree_flatten(
            ((sample.input,) + tuple(sample.args), dict(sample.kwargs)))
        for n, v in enumerate(leaves):
            if n in buffers and isinstance(v, torch.Tensor):  # batch norm's running statistics
                name = f"b{n}"
                self.register_buffer(name, v.detach().clone())
                self.slots.append(("p", name))
            elif isinstance(v, torch.Tensor) and v.is_floating_point():
                name = f"p{len([s for s in self.slots if s[0] == 'p'])}"
                self.register_parameter(name, torch.nn.Parameter(v.detach().clone()))
                self.slots.append(("p", name))
            elif isinstance(v, torch.Tensor):
                self.slots.append(("i", len(self.ints)))
                self.ints.append(v.detach().clone())
            else:
                self.slots.append(("v", len(self.values)))
                self.values.append(v)

    def forward(self, *ints):
        leaves = [getattr(self, k) if kind == "p" else ints[k] if kind == "i" else self.values[k]
                  for kind, k in self.slots]
        (args, kwargs) = torch.utils._pytree.tree_unflatten(leaves, self.tree)
        out = self.fn(*args, **kwargs)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        return tuple(o for o in outs if isinstance(o, torch.Tensor))


def run_sample(opinfo, sample, want_grad):
    """None when our values and PyTorch's agree, else what differs."""
    # batch norm's running statistics: buffers of the module (its leaves after the input,
    # or after the input, weight and bias for _native_batch_norm_legit)
    stats = (3, 4) if opinfo.name == "_native_batch_norm_legit" else (1, 2)
    m = Op(opinfo.op, sample, buffers=stats if "batch_norm" in opinfo.name else ())
    if not m.ints and not list(m.parameters()):
        return None, "no tensor input (computed at capture)"
    with torch.no_grad():
        want = m(*m.ints)
    if not want or any(w.numel() == 0 for w in want):
        return None, "an empty result"
    g = ts.Graph.from_torch(m, tuple(m.ints), capture="export")
    names = [n for n in g.tensors()]
    del names
    feeds = [i.numpy().astype(np.int32) for i in m.ints]
    outs = g.outputs
    model = ts.inference_model(g, outputs=outs)
    got = model(*feeds) if feeds else model()
    got = got if isinstance(got, (tuple, list)) else [got]
    for k, (a, w) in enumerate(zip(got, want)):
        w = w.detach().float().numpy() if w.dtype != torch.bool else w.numpy().astype(np.float32)
        a = np.asarray(a, np.float32).reshape(w.shape)
        if opinfo.name == "topk" and k == 1:  # tied entries' indices: in an order PyTorch leaves open
            why = topk_indices_differ(sample, a, want[0].detach().float().numpy())
            if why:
                return "fwd", why
            continue
        if not np.allclose(a, w, rtol=RTOL, atol=ATOL, equal_nan=True):
            return "fwd", f"output {k}: max |diff| {np.nanmax(np.abs(a - w)):.3g}"
    model.close()
    params = dict(m.named_parameters())
    floats = [k for k, w in enumerate(want) if w.is_floating_point() and w.requires_grad]
    if not want_grad or not params or not floats:
        g.close()
        return None, None
    # the gradient of sum_k sum(out_k * w_k)
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal(tuple(want[k].shape)).astype(np.float32) for k in floats]
    out = m(*m.ints)
    loss_t = sum((out[k] * torch.from_numpy(w)).sum() for k, w in zip(floats, weights))
    loss_t.backward()
    terms = [g.reduce_sum(g.mul(g.outputs[k], g.constant(f"w{k}", w)), list(range(len(w.shape))))
             if w.shape else g.mul(g.outputs[k], g.constant(f"w{k}", w)) for k, w in zip(floats, weights)]
    loss = terms[0]
    for t in terms[1:]:
        loss = g.add(loss, t)
    opts = ts.Options()
    for n in params:
        opts.anchor_tensor(f"Gradient___{n}")
    train = ts.training_model(g, opts, optimizer=ts.SGD(lr=0.0), loss=loss)
    train(*feeds) if feeds else train()
    for n, p in params.items():
        if p.grad is None:
            continue
        a = np.asarray(train.get_anchored_tensor(f"Gradient___{n}"), np.float32).reshape(p.shape)
        w = p.grad.numpy()
        if not np.allclose(a, w, rtol=RTOL, atol=ATOL * 10, equal_nan=True):
            return "bwd", f"gradient of {n}: max |diff| {np.nanmax(np.abs(a - w)):.3g}"
    train.close()
    g.close()
    return None, None


def topk_indices_differ(sample, indices, values):
    """What is wrong with topk's indices, else None: PyTorch returns tied
    entries' indices in an order it does not specify, so each index is
    checked by what it picks (the values PyTorch returns, each entry once)."""
    x = sample.input.detach().float().numpy()
    if x.ndim == 0:
        return None if indices.size == 1 and indices.reshape(-1)[0] == 0 else "index of a 0-d input"
    dim = sample.args[1] if len(sample.args) > 1 else sample.kwargs.get("dim", -1)
    at = indices.astype(np.int64)
    picked = np.take_along_axis(x, at, axis=dim)
    if not np.allclose(picked, values, rtol=RTOL, atol=ATOL, equal_nan=True):
        return f"output 1: the indices pick other values (max |diff| {np.nanmax(np.abs(picked - values)):.3g})"
    rows = np.moveaxis(at, dim, -1).reshape(-1, at.shape[dim])
    if any(len(set(r)) != len(r) for r in rows):
        return "output 1: an index repeats"
    return None


class Fold:
    """A stand-in OpInfo for nn.functional.fold (col2im), which op_db has
    none of: samples of its kernel, dilation, padding and stride, checked
    as an OpInfo's are."""
    name, variant_test_name, aten_name, supports_autograd = "nn.functional.fold", "", "col2im", True

    @staticmethod
    def op(x, **kw):
        return torch.nn.functional.fold(x, **kw)

    @staticmethod
    def supported_dtypes(device):
        return {torch.float32}

    @staticmethod
    def sample_inputs(device, dtype, requires_grad=False):
        from torch.testing._internal.opinfo.core import SampleInput
        gen = torch.Generator().manual_seed(0)
        for out, k, kw in (((5, 5), (3, 2), {"dilation": (1, 2), "padding": 1, "stride": 2}),
                           ((4, 5), (2, 2), {}), ((3, 4), 2, {"padding": (0, 1)})):
            f = torch.nn.Unfold(k, **kw)
            blocks = f(torch.zeros(2, 3, *out)).shape
            yield SampleInput(torch.randn(blocks, generator=gen, dtype=dtype),
                              kwargs=dict(output_size=out, kernel_size=k, **kw))


def op_database():
    """PyTorch's op_db. Its module imports expecttest (for PyTorch's own
    TestCase, which the samples do not use): where that package is not
    installed, a module standing in for it is."""
    import importlib.util
    import types
    import unittest
    if importlib.util.find_spec("expecttest") is None:
        stand_in = types.ModuleType("expecttest")
        stand_in.TestCase = unittest.TestCase
        sys.modules["expecttest"] = stand_in
    from torch.testing._internal.common_methods_invocations import op_db
    return op_db


def main():
    path = sys.argv[1]
    write = "--write" in sys.argv
    op_db = op_database()
    core = core_overloads()
    holdable = sorted(n for n in core if not NOT_IN_TRAINING_GRAPH.search(n))
    mapped = sorted(n for n in holdable if n in _export.ATEN)
    print(f"Core ATen ops mapped: {len(mapped)} of the {len(holdable)} a training graph of floats "
          f"and integers can hold ({100.0 * len(mapped) / len(holdable):.1f}%); "
          f"{len(core)} Core ATen overloads in PyTorch {torch.__version__}")
    print("not mapped: " + ", ".join(n for n in holdable if n not in _export.ATEN))
    by_name = {}
    for o in list(op_db) + [Fold]:
        by_name.setdefault(o.name, []).append(o)
        if o.aten_name and o.aten_name != o.name:
            by_name.setdefault(o.aten_name, []).append(o)
    bases = sorted({n.split(".")[0] for n in mapped})
    expected = {}
    if os.path.exists(path):
        for line in open(path, encoding="utf-8"):
            line = line.strip()
            if line and not line.startswith("#"):
                key, _, why = line.partition("  # ")
                expected[key.strip()] = why.strip()
    ts.set_log_level(1)
    warnings.simplefilter("ignore")
    failures, passed, tried, untested = {}, 0, 0, []
    t0 = time.time()
    seen = set()
    for base in bases:
        infos = [o for n in OPINFOS.get(base, [base]) for o in by_name.get(n, [])]
        if not infos:
            untested.append(base)
            continue
        for info in infos:
            name = f"{info.name}.{info.variant_test_name}" if info.variant_test_name else info.name
            if name in seen:
                continue
            seen.add(name)
            for dtype in DTYPES:
                if dtype not in info.supported_dtypes("cpu"):
                    continue
                grad = dtype.is_floating_point and info.supports_autograd
                try:
                    samples = list(info.sample_inputs("cpu", dtype, requires_grad=False))[:SAMPLES]
                except Exception:
                    continue
                for k, s in enumerate(samples):
                    key = f"{name} {str(dtype)[6:]} {k}"
                    tried += 1
                    try:
                        kind, why = run_sample(info, s, grad)
                    except Exception as e:  # a refusal, a shape the graph cannot take, ...
                        kind, why = "error", f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
                    if kind is None:
                        passed += 1
                    else:
                        failures[key] = f"{kind}: {why}"
    print(f"samples: {tried} run, {passed} passed, {len(failures)} failed "
          f"({time.time() - t0:.0f} s); mapped ops without an OpInfo of their own: {', '.join(untested)}")
    if write:
        with open(path, "w", encoding="utf-8") as f:
            f.write("# OpInfo samples of tests/torch_opinfo.py that fail, each with its reason\n"
                    "# (OpInfo name, dtype, sample index  # what differs or is refused)\n")
            for key in sorted(failures):
                f.write(f"{key}  # {expected.get(key) or reason(key, failures[key])}\n")
        return 0
    bad = 0
    for key, why in sorted(failures.items()):
        if key not in expected:
            print(f"FAIL {key}: {why} (not in the expected failures)")
            bad += 1
    for key in sorted(expected):
        if key not in failures:
            print(f"FAIL {key} passes now: remove it from {os.path.basename(path)}")
            bad += 1
    print("torch_opinfo: " + ("PASS" if not bad else f"FAIL ({bad})"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
