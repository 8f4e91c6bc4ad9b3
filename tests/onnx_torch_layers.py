"""onnx_torch_layers.py -- PyTorch layers that ordinary models are made of,
exported by the TorchScript exporter (training mode, parameters kept as
initializers) and, where it can, by the dynamo exporter, imported and
checked against PyTorch: rotary position embeddings (Sin and Cos of the
positions, folded) and the trigonometric and hyperbolic functions on graph
tensors; CrossEntropyLoss and NLLLoss with ignore_index (-100 and a class
index), class weights and every reduction, on [N, C] and [N, C, T] scores,
with label smoothing (the weighted cases' files run by onnxruntime too,
whose loss must agree); Conv1d and the 1-D pools;
ConvTranspose1d and ConvTranspose2d with strides, padding, output_padding,
dilation and groups; InstanceNorm and GroupNorm (one GroupNorm op per
module: one_op_per_module); GELU (TorchScript's Div, Erf, Add, Mul, Mul
one Gelu op, against the same nodes imported one by one:
gelu_fused_vs_unfused); SiLU (Mul(x, Sigmoid(x)) one Silu op); RMSNorm written by hand as Llama's and
nn.RMSNorm (the exporters' Pow, ReduceMean, Add, Sqrt, Div or Reciprocal,
Mul, Mul one RMSNorm op, one by one likewise); an eval-mode BatchNorm
exported with its running statistics as initializers (one BatchNorm op); PReLU, Hardtanh
and ReLU6 (Clip), CELU, Mish, Softsign, amin, logsumexp, norm, tril, triu
and repeat (Tile). Then the ONNX ops
the importer composes of graph ops (Clip, Mean, PRelu, Celu, Mish,
Softsign, ThresholdedRelu, Shrink, the Reduce ops, GlobalMaxPool,
LpNormalization, MeanVarianceNormalization, RMSNormalization, Trilu,
Tile, CumSum, DepthToSpace, SpaceToDepth, Swish, Resize, ReduceProd,
CumProd, CenterCropPad, TopK, Attention, RotaryEmbedding, GatherND, Compress,
ScatterND, ScatterElements, LpPool, Einsum, RNN, LRN, SwiGLU, MaxUnpool,
CausalConvWithState, LinearAttention, GridSample, AffineGrid, Col2Im, TensorScatter, Det, Upsample), one node each:
forward against onnx's reference, gradients against
central finite differences of the reference in double.

Each case's module m(*inputs) is wrapped as loss = sum(m(*inputs) * r)
for a random r (a scalar loss is the loss itself), exported, and a
training model of the file (SGD at rate 0) gives the loss, m's output
(anchored under its value name in the file) and every parameter's
gradient. Passes when the output is within OUT_RTOL of PyTorch's
(relative to 1 + |value|) and every gradient within GRAD_RTOL of the
largest gradient of that parameter (at least GRAD_FLOOR of the largest of
all). A parameter the exporter folded away (not in the file under its
name) has no gradient to compare. Eval-mode cases are exported as
torch.onnx.export(model.eval(), do_constant_folding=False) and compared
with the module in eval mode. Prints one line per case and exporter;
exits 1 on any failure.

Usage: onnx_torch_layers.py [--only REGEX]"""
import math
import os
import re
import sys
import tempfile
import warnings

import numpy as np
import torch
import torch.nn.functional as F

import tensorscope as ts

OUT_RTOL = 1e-5
GRAD_RTOL = 1e-4
GRAD_FLOOR = 1e-3


class Wrapped(torch.nn.Module):
    """loss = sum(m(*inputs) * r), or m's scalar output itself."""

    def __init__(self, m, scalar):
        super().__init__()
        self.m, self.scalar = m, scalar

    def forward(self, *args):
        if self.scalar:
            return self.m(*args)
        *inputs, r = args
        return (self.m(*inputs) * r).sum()


class RMSNorm(torch.nn.Module):
    """Llama's RMSNorm as written by hand (Hugging Face's LlamaRMSNorm)."""

    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight, self.eps = torch.nn.Parameter(torch.rand(d) + 0.5), eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class HFRMSNorm(RMSNorm):
    """transformers' LlamaRMSNorm: x in float32, its dtype back before the
    weight (the TorchScript exporter writes each .to() as a Cast)."""

    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


class Rotary(torch.nn.Module):
    """Llama's rotary embedding: cos and sin of positions x inverse
    frequencies (a buffer), applied to q = Linear(x)."""

    def __init__(self, d=8, buffer=True):
        super().__init__()
        self.q, self.buffer = torch.nn.Linear(d, d), buffer
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d)), persistent=False)

    def forward(self, x):
        t = torch.arange(x.shape[1], dtype=torch.float32)
        d = self.q.in_features  # without the buffer, every input of Cos and Sin is a constant the import folds
        inv_freq = self.inv_freq if self.buffer else 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
        freqs = (inv_freq[None, :, None] @ t[None, None, :]).transpose(1, 2)  # as transformers' Llama
        emb = torch.cat((freqs, freqs), dim=-1)
        q = self.q(x)
        half = q.shape[-1] // 2
        rot = torch.cat((-q[..., half:], q[..., :half]), dim=-1)
        return q * emb.cos() + rot * emb.sin()


class Trig(torch.nn.Module):
    """Every trigonometric and hyperbolic function on graph tensors,
    inside its domain."""

    def __init__(self, d=6):
        super().__init__()
        self.lin = torch.nn.Linear(d, d)

    def forward(self, x):
        h = self.lin(x)
        t = 0.9 * torch.tanh(h)
        return (torch.sin(h) + torch.cos(h) + torch.tan(0.5 * t) + torch.asin(t) + torch.acos(t) + torch.atan(h)
                + torch.sinh(h) + torch.cosh(h) + torch.asinh(h) + torch.acosh(1.5 + h * h) + torch.atanh(t))


class Loss(torch.nn.Module):
    """Linear scores, then `fn(scores, labels)`; scores [N, C] or, with
    seq, [N, C, T]."""

    def __init__(self, fn, c=5, seq=False, log_softmax=False):
        super().__init__()
        self.lin, self.fn, self.seq, self.log_softmax = torch.nn.Linear(4, c), fn, seq, log_softmax

    def forward(self, x, y):
        s = self.lin(x)
        if self.seq:
            s = s.transpose(1, 2)
        if self.log_softmax:
            s = F.log_softmax(s, dim=1)
        return self.fn(s, y)


class Seq(torch.nn.Sequential):
    pass


class Fn(torch.nn.Module):
    """Linear, then a function of its output (a reduction, tril, repeat)."""

    def __init__(self, fn, d=6):
        super().__init__()
        self.lin, self.fn = torch.nn.Linear(d, d), fn

    def forward(self, x):
        return self.fn(self.lin(x))


class BatchNormSkip(torch.nn.Module):
    """A fresh BatchNorm (running statistics 0 and 1, equal to its bias and
    weight: the exporters store them once) beside a skip connection (the
    dynamo exporter does not fuse it into the Conv)."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = torch.nn.Conv2d(3, 3, 3, padding=1), torch.nn.BatchNorm2d(3)

    def forward(self, x):
        h = self.conv(x)
        return self.bn(h) + h


class Bag(torch.nn.Module):
    """nn.EmbeddingBag of a 2-D input (bags of equal size) or of a 1-D
    input and offsets: the TorchScript exporter writes a Loop over the
    bags, whose trip count folds from the input's static shape; offsets
    are bound at import (bind_at_import), their values being the bags'
    bounds the Loop's body slices by."""

    def __init__(self, mode):
        super().__init__()
        self.bag = torch.nn.EmbeddingBag(10, 4, mode=mode)

    def forward(self, x, *offsets):
        return self.bag(x, *offsets)


def labels(shape, c, ignore, n_ignored):
    g = torch.Generator().manual_seed(7)
    y = torch.randint(0, c, shape, generator=g)
    flat = y.view(-1)
    flat[torch.randperm(flat.numel(), generator=g)[:n_ignored]] = ignore
    return y


def cases():
    """name -> (module, {input: tensor}, scalar output?, exporters)"""
    torch.manual_seed(0)
    x2 = torch.randn(6, 4)
    w = torch.tensor([0.5, 1.0, 2.0, 1.5, 0.7])
    both = ("torchscript", "dynamo")
    out = {}
    out["rotary_embedding"] = (Rotary(), {"x": torch.randn(2, 5, 8)}, False, both)
    out["rotary_embedding_folded"] = (Rotary(buffer=False), {"x": torch.randn(2, 5, 8)}, False, both)
    # the TorchScript exporter has no aten::sinh at opset 17
    out["trig_hyperbolic"] = (Trig(), {"x": torch.randn(3, 6)}, False, ("dynamo",))
    for red in ("mean", "sum", "none"):
        y = labels((6,), 5, -100, 2)
        out[f"cross_entropy_ignore_-100_{red}"] = (
            Loss(lambda s, t, r=red: F.cross_entropy(s, t, ignore_index=-100, reduction=r)), {"x": x2, "y": y}, red != "none", both)
        out[f"cross_entropy_weights_ignore_-100_{red}"] = (
            Loss(torch.nn.CrossEntropyLoss(weight=w, ignore_index=-100, reduction=red)), {"x": x2, "y": y},
            red != "none", both)
        out[f"nll_ignore_-100_{red}"] = (
            Loss(lambda s, t, r=red: F.nll_loss(s, t, ignore_index=-100, reduction=r), log_softmax=True), {"x": x2, "y": y},
            red != "none", both)
    y3 = labels((6,), 5, 3, 0)
    out["cross_entropy_ignore_class_3_mean"] = (
        Loss(lambda s, t: F.cross_entropy(s, t, ignore_index=3)), {"x": x2, "y": y3}, True, both)
    out["cross_entropy_seq_ignore_-100_mean"] = (
        Loss(lambda s, t: F.cross_entropy(s, t, ignore_index=-100), seq=True), {"x": torch.randn(2, 7, 4), "y": labels((2, 7), 5, -100, 4)},
        True, both)
    out["conv1d"] = (torch.nn.Conv1d(3, 4, 5, stride=2, padding=2), {"x": torch.randn(2, 3, 17)}, False, both)
    out["conv1d_dilation_groups_nobias"] = (torch.nn.Conv1d(4, 6, 3, dilation=2, groups=2, bias=False), {"x": torch.randn(2, 4, 13)},
                                            False, both)
    out["conv1d_same"] = (torch.nn.Conv1d(3, 2, 4, padding="same"), {"x": torch.randn(2, 3, 11)}, False, both)
    out["conv1d_pools"] = (Seq(torch.nn.Conv1d(2, 3, 3), torch.nn.MaxPool1d(2), torch.nn.AvgPool1d(3, stride=2, padding=1)),
                           {"x": torch.randn(2, 2, 20)}, False, both)
    out["conv_transpose2d"] = (torch.nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1), {"x": torch.randn(2, 3, 5, 6)},
                               False, both)
    out["conv_transpose2d_dilation_groups"] = (torch.nn.ConvTranspose2d(4, 6, (2, 3), stride=(1, 2), padding=(1, 0), dilation=2,
                                                                        groups=2, bias=False), {"x": torch.randn(2, 4, 4, 5)}, False, both)
    out["conv_transpose2d_unet_up"] = (torch.nn.ConvTranspose2d(8, 4, 2, stride=2), {"x": torch.randn(2, 8, 6, 6)}, False, both)
    out["conv_transpose1d"] = (torch.nn.ConvTranspose1d(3, 2, 4, stride=3, padding=1, output_padding=2), {"x": torch.randn(2, 3, 9)},
                               False, both)
    out["instance_norm2d_affine"] = (Seq(torch.nn.Conv2d(2, 3, 3), torch.nn.InstanceNorm2d(3, affine=True)), {"x": torch.randn(2, 2, 6, 7)},
                                     False, both)
    out["instance_norm1d"] = (Seq(torch.nn.Conv1d(2, 3, 3), torch.nn.InstanceNorm1d(3)), {"x": torch.randn(2, 2, 9)}, False, both)
    out["group_norm"] = (Seq(torch.nn.Conv2d(2, 6, 3), torch.nn.GroupNorm(3, 6)), {"x": torch.randn(2, 2, 6, 5)}, False, both)
    out["group_norm_1d"] = (Seq(torch.nn.Conv1d(2, 4, 3), torch.nn.GroupNorm(2, 4, eps=1e-3)), {"x": torch.randn(3, 2, 8)}, False, both)
    out["group_norm_no_affine"] = (Seq(torch.nn.Conv2d(2, 6, 3), torch.nn.GroupNorm(2, 6, affine=False)), {"x": torch.randn(2, 2, 5, 5)},
                                   False, both)
    # F.gelu: TorchScript's Div, Erf, Add, Mul, Mul import as one Gelu op
    out["gelu"] = (Seq(torch.nn.Linear(6, 5), torch.nn.GELU()), {"x": torch.randn(3, 4, 6) * 2}, False, both)
    # F.silu: Mul(x, Sigmoid(x)) imports as one Silu op
    out["silu"] = (Seq(torch.nn.Linear(6, 5), torch.nn.SiLU()), {"x": torch.randn(3, 4, 6) * 4}, False, both)
    # x * rsqrt(mean(x^2) + eps) * w: the exporters' Pow, ReduceMean, Add, Sqrt, Div or
    # Reciprocal, Mul, Mul import as one RMSNorm op (the TorchScript exporter has no aten::rms_norm)
    out["rms_norm"] = (Seq(torch.nn.Linear(6, 8), RMSNorm(8)), {"x": torch.randn(3, 4, 6)}, False, both)
    out["rms_norm_hf"] = (Seq(torch.nn.Linear(6, 8), HFRMSNorm(8)), {"x": torch.randn(3, 4, 6)}, False, both)
    out["rms_norm_module"] = (Seq(torch.nn.Linear(6, 8), torch.nn.RMSNorm(8)), {"x": torch.randn(3, 4, 6)}, False, ("dynamo",))
    for name, m, x in (("batch_norm2d_eval", Seq(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU()), torch.randn(2, 3, 6, 6)),
                       ("batch_norm1d_eval", Seq(torch.nn.Linear(5, 4), torch.nn.BatchNorm1d(4)), torch.randn(3, 5)),
                       ("batch_norm2d_eval_first", Seq(torch.nn.BatchNorm2d(3), torch.nn.Conv2d(3, 2, 1)), torch.randn(2, 3, 4, 4)),
                       ("batch_norm2d_eval_fresh", Seq(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)), torch.randn(2, 3, 6, 6))):
        for bn in m:  # running statistics that are not the initial 0 and 1 (but in the fresh one)
            if isinstance(bn, torch.nn.modules.batchnorm._BatchNorm) and not name.endswith("_fresh"):
                with torch.no_grad():
                    bn.running_mean.uniform_(-1, 1)
                    bn.running_var.uniform_(0.5, 2)
        m.eval_export = True
        # the dynamo exporter fuses an eval BatchNorm into the Conv or
        # Linear before it: the file's weight is not the module's
        out[name] = (m, {"x": x}, False, both if name.endswith("_first") else ("torchscript",))
    x3 = torch.randn(2, 5, 6)
    out["prelu"] = (Seq(torch.nn.Conv2d(2, 3, 3), torch.nn.PReLU(3)), {"x": torch.randn(2, 2, 5, 5)}, False, both)
    out["hardtanh_relu6"] = (Seq(torch.nn.Linear(6, 6), torch.nn.Hardtanh(-0.5, 0.7), torch.nn.Linear(6, 6), torch.nn.ReLU6()),
                             {"x": x3}, False, both)
    out["celu_mish_softsign"] = (Seq(torch.nn.Linear(6, 6), torch.nn.CELU(1.5), torch.nn.Linear(6, 6), torch.nn.Mish(),
                                     torch.nn.Linear(6, 6), torch.nn.Softsign()), {"x": x3}, False, both)
    out["amin_logsumexp_norm"] = (Fn(lambda h: h.amin(-1) + h.logsumexp(-1) + h.norm(dim=-1)), {"x": x3}, False, both)
    out["tril_triu_repeat"] = (Fn(lambda h: h.tril(1) + h.triu(-1) * 2 + h.repeat(1, 1, 2)[..., ::2]), {"x": x3}, False, both)
    for mode in ("sum", "mean", "max"):
        # max: no id twice in a bag (PyTorch's gradient goes to one of the
        # tied rows, ReduceMax's to each: the weight's row would get it twice)
        ids = [[1, 2, 4, 2], [5, 4, 3, 9], [0, 7, 7, 1]] if mode != "max" else [[1, 2, 4, 6], [5, 4, 3, 9], [0, 7, 8, 1]]
        out[f"embedding_bag_{mode}_2d"] = (Bag(mode), {"x": torch.tensor(ids)}, False, ("torchscript",))
        bag = Bag(mode)
        bag.bind_at_import = ("o",)
        out[f"embedding_bag_{mode}_offsets"] = (bag, {"x": torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 8]), "o": torch.tensor([0, 3, 4, 7])},
                                                False, ("torchscript",))
    skip = BatchNormSkip()
    skip.eval_export = True
    out["batch_norm2d_eval_fresh_skip"] = (skip, {"x": torch.randn(2, 3, 6, 6)}, False, both)
    # last, so that the cases before draw the same random values: class
    # weights with NLLLoss (NegativeLogLikelihoodLoss with a weight
    # input), an ignored class, scores [N, C, T] (the composed loss) and
    # label smoothing: the mean is the weighted mean over the labels kept
    ys = labels((2, 7), 5, -100, 4)
    y3w = labels((6,), 5, 1, 2)  # class 1 ignored, two labels of it
    y = labels((6,), 5, -100, 2)
    for red in ("mean", "sum", "none"):
        out[f"nll_weights_ignore_-100_{red}"] = (
            Loss(torch.nn.NLLLoss(weight=w, ignore_index=-100, reduction=red), log_softmax=True), {"x": x2, "y": y},
            red != "none", both)
        out[f"cross_entropy_weights_ignore_class_1_{red}"] = (
            Loss(torch.nn.CrossEntropyLoss(weight=w, ignore_index=1, reduction=red)), {"x": x2, "y": y3w}, red != "none", both)
        out[f"cross_entropy_seq_weights_ignore_-100_{red}"] = (
            Loss(torch.nn.CrossEntropyLoss(weight=w, ignore_index=-100, reduction=red), seq=True), {"x": torch.randn(2, 7, 4), "y": ys},
            red != "none", both)
        out[f"nll_seq_weights_ignore_-100_{red}"] = (
            Loss(torch.nn.NLLLoss(weight=w, ignore_index=-100, reduction=red), seq=True, log_softmax=True),
            {"x": torch.randn(2, 7, 4), "y": ys}, red != "none", both)
        # the dynamo exporter drops label_smoothing (its file is the
        # unsmoothed loss, onnxruntime's value too); tensorscope's exporter
        # writes PyTorch's formula
        out[f"cross_entropy_weights_smoothing_ignore_-100_{red}"] = (
            Loss(torch.nn.CrossEntropyLoss(weight=w, ignore_index=-100, reduction=red, label_smoothing=0.2)), {"x": x2, "y": y},
            red != "none", ("torchscript",))
    for name in out:
        if "weights_" in name and not name.startswith("cross_entropy_weights_ignore_-100_"):
            out[name][0].check_onnxruntime = True
    return out


def export(module, inputs, path, exporter):
    args, names = tuple(inputs.values()), list(inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if getattr(module.m, "eval_export", False):  # an inference export: torch.onnx.export(model.eval(), ...)
            module.eval()
            kw = {"dynamo": False, "opset_version": 17} if exporter == "torchscript" else {"dynamo": True, "verbose": False}
            torch.onnx.export(module, args, path, input_names=names, do_constant_folding=False, **kw)
            return
        if exporter == "torchscript":
            from tensorscope._torch import export_onnx
            export_onnx(module, args, path, names)
        else:
            torch.onnx.export(module, args, path, input_names=names, dynamo=True, external_data=False, verbose=False)
    module.train()


def output_alias(path, scalar):
    """The file's name of m's output: the Mul by r's other input, or the
    graph's output for a scalar loss."""
    import onnx
    g = onnx.load(path).graph
    if scalar:
        return g.output[0].name
    for n in g.node:
        if n.op_type == "Mul" and "r" in n.input:
            return [i for i in n.input if i != "r"][0]
    raise RuntimeError("no Mul by r in the file")


def reference_feeds(module, inputs, scalar):
    """check()'s seed, mode and draws: the module in its export mode, the
    inputs and (for a tensor output) the random r the wrapped loss dots it
    with. Returns (feeds, training, the module's output)."""
    training = not getattr(module, "eval_export", False)
    torch.manual_seed(1)
    module.train(training)
    with torch.no_grad():
        out = module(*inputs.values())
    feeds = dict(inputs)
    if not scalar:
        feeds["r"] = torch.randn(out.shape)
    return feeds, training, out


def check(name, module, inputs, scalar, exporter, workdir):
    feeds, _, ref_out = reference_feeds(module, inputs, scalar)
    wrapped = Wrapped(module, scalar)
    path = os.path.join(workdir, f"{name}.{exporter}.onnx")
    export(wrapped, feeds, path, exporter)
    wrapped.train(not getattr(module, "eval_export", False))
    module.zero_grad()
    loss = wrapped(*feeds.values())
    loss.backward()
    params = {n: p.grad.numpy() for n, p in wrapped.named_parameters() if p.grad is not None}

    bound = getattr(module, "bind_at_import", ())  # inputs whose values the import folds (EmbeddingBag's offsets)
    g = ts.Graph.from_onnx(path, {k: tuple(v.shape) for k, v in feeds.items() if k not in bound},
                           input_values={k: feeds[k].numpy() for k in bound} or None)
    tensor_names = {t.name for t in g.tensors()}
    opts = ts.Options().output_mode("final")
    opts.anchor_tensor("out", output_alias(path, scalar), "final")
    anchored = {}
    for n in params:
        for cand in (n, n.replace("m.", "", 1)):
            if cand in tensor_names:
                anchored[n] = f"g{len(anchored)}"
                opts.anchor_tensor(anchored[n], "Gradient___" + cand, "final")
                break
    import onnx
    held = {i.name for i in onnx.load(path).graph.initializer}
    # a parameter the exporter folded into another (the dynamo exporter's
    # BatchNorm into the Conv before it, GroupNorm's weight unsqueezed) is
    # not in the file: its gradient cannot be named
    missing = [n for n in params if n not in anchored and (n in held or n.replace("m.", "", 1) in held)]
    if missing:
        return f"parameters not in the graph: {missing}"
    # nothing else trains: the constants the exporter writes (GroupNorm's
    # unit scale and zero bias of InstanceNormalization) stay constants
    extra = [t.name for t in g.tensors() if t.is_parameter and t.name not in params
             and "m." + t.name not in params]
    folded = [n for n in params if n not in anchored]  # trained under the exporter's names
    if len(extra) > len(folded):
        return f"parameters the module does not have: {extra}"
    model = ts.training_model(g, opts, optimizer=ts.SGD(lr=0.0), loss=g.outputs[0])
    run = {k: (v.numpy().astype(np.int64) if v.dtype == torch.int64 else v.numpy()) for k, v in feeds.items() if k not in bound}
    got_loss = float(model(**run))
    got = model.get_anchored_tensor("out").reshape(ref_out.shape)
    want = ref_out.numpy().astype(np.float64)
    err = np.max(np.abs(got - want) / (1 + np.abs(want)), initial=0.0)
    if not np.isfinite(got_loss) or abs(got_loss - float(loss.detach())) > OUT_RTOL * (1 + abs(float(loss.detach()))) or not err <= OUT_RTOL:
        return f"output mismatch: max error {err:.3g}, loss {got_loss:.7g} vs PyTorch's {float(loss.detach()):.7g}"
    if getattr(module, "check_onnxruntime", False):  # the file's loss as onnxruntime computes it, too
        import onnxruntime
        sess = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        ort_loss = float(np.asarray(sess.run(None, {i.name: run[i.name] for i in sess.get_inputs()})[0]).reshape(-1)[0])
        if abs(got_loss - ort_loss) > OUT_RTOL * (1 + abs(ort_loss)):
            return f"loss {got_loss:.7g} vs onnxruntime's {ort_loss:.7g}"
    largest = max(float(np.max(np.abs(v))) for v in params.values()) if params else 0.0
    for n, short in anchored.items():
        gg = model.get_anchored_tensor(short).reshape(params[n].shape)
        # at least GRAD_FLOOR of the largest gradient: a bias a normalisation
        # removes has a gradient of rounding noise only
        scale = max(float(np.max(np.abs(params[n]))), GRAD_FLOOR * largest, 1e-12)
        e = float(np.max(np.abs(gg - params[n]))) / scale
        if not e <= GRAD_RTOL:
            return f"gradient mismatch: {n} off by {e:.3g} of its largest value"
    g.close()
    return None


def group_normalization_opsets(workdir):
    """ONNX's GroupNormalization, whose scale and bias are per group at
    opsets 18 to 20 and per channel from 21: against onnx's reference."""
    import onnx
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 6, 3, 4)).astype(np.float32)
    for opset, n in ((18, 3), (21, 6)):
        s, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3, epsilon=1e-3)
        graph = helper.make_graph([node], "gn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                                  [onnx.numpy_helper.from_array(s, "s"), onnx.numpy_helper.from_array(b, "b")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        path = os.path.join(workdir, f"gn{opset}.onnx")
        onnx.save(model, path)
        want = ReferenceEvaluator(model).run(None, {"x": x})[0]
        g = ts.Graph.from_onnx(path, {"x": x.shape})
        got = np.asarray(ts.inference_model(g, ts.Options().output_mode("final"))(x=x))
        err = float(np.max(np.abs(got.reshape(want.shape) - want) / (1 + np.abs(want))))
        if not err <= OUT_RTOL:
            return f"opset {opset}: max error {err:.3g} against onnx's reference"
    return None


def one_op_per_module(workdir):
    """nn.GroupNorm's export (Reshape to [N,G,L], InstanceNormalization,
    Reshape back, Mul by the weight, Add of the bias) imports as one
    GroupNorm op named in the module's scope (`m.1/GroupNorm:0`), the
    affine folded in and nothing else computed there but the view of a
    folded weight as [C]; an eval-mode BatchNorm as one BatchNorm op whose
    running statistics are buffers; through each exporter that writes
    them. The values against PyTorch's are the same cases' check()."""
    all_cases = cases()
    for name, op, scope in (("group_norm", "GroupNorm", "m.1"), ("group_norm_1d", "GroupNorm", "m.1"),
                            ("group_norm_no_affine", "GroupNorm", "m.1"), ("gelu", "Gelu", "m.1"), ("silu", "Silu", "m.1"),
                            ("rms_norm", "RMSNorm", "m.1"), ("rms_norm_hf", "RMSNorm", "m.1"), ("rms_norm_module", "RMSNorm", "m.1"),
                            ("batch_norm2d_eval", "BatchNorm", "m.1"),
                            ("batch_norm2d_eval_first", "BatchNorm", "m.0")):
        module, inputs, scalar, exporters = all_cases[name]
        for exporter in exporters:
            why = check(name, module, inputs, scalar, exporter, workdir)
            if why:
                return f"{name} ({exporter}): {why}"
            path = os.path.join(workdir, f"{name}.{exporter}.onnx")
            shapes = {k: tuple(v.shape) for k, v in inputs.items()}
            if not scalar:
                with torch.no_grad():
                    shapes["r"] = tuple(module.eval()(*inputs.values()).shape) if getattr(module, "eval_export", False) \
                        else tuple(module(*inputs.values()).shape)
            g = ts.Graph.from_onnx(path, shapes)
            ops = [t for t in g.tensors() if t.name.startswith(scope + "/") and t.op not in ("Const", "Param", "Buffer")]
            main = [t for t in ops if t.op == op]
            views = [t for t in ops if t.op == "Reshape" and all(i.op == "Param" for i in t.inputs)]
            if len(main) != 1 or len(ops) != 1 + len(views) or (op in ("GroupNorm", "Gelu", "Silu", "RMSNorm") and main[0].name != f"{scope}/{op}:0"):
                return f"{name} ({exporter}): {scope}'s ops are {[(t.name, t.op) for t in ops]}, not one {op}"
            if op == "BatchNorm" and not all(i.is_buffer for i in main[0].inputs[3:]):
                return f"{name} ({exporter}): the BatchNorm's running statistics are not buffers"
            g.close()
    return None


def gelu_fused_vs_unfused(workdir, case="gelu", op="Gelu", inner="Erf", weights=("m.0.weight", "m.0.bias"), inputs=None):
    """F.gelu's TorchScript chain imported as one Gelu op against the same
    file's nodes imported one by one (the Erf's value made a graph output
    too, so the chain's values are read elsewhere and it is not fused):
    the loss, the output and the Linear's gradients agree to float
    rounding, at values across GELU's range. Likewise another chain
    (`case`, imported as `op`, `inner` its node made an output, `weights`
    the gradients compared)."""
    import onnx
    module, case_inputs, scalar, _ = cases()[case]
    inputs = inputs or ({"x": torch.linspace(-7, 7, 3 * 4 * 6).reshape(3, 4, 6)} if case == "gelu" else case_inputs)
    feeds, _, _ = reference_feeds(module, inputs, scalar)
    path, apart = os.path.join(workdir, f"{case}_fused.onnx"), os.path.join(workdir, f"{case}_apart.onnx")
    export(Wrapped(module, scalar), feeds, path, "torchscript")
    m = onnx.load(path)
    erf = [n for n in m.graph.node if n.op_type == inner]
    if len(erf) != 1:
        return f"the export has {len(erf)} {inner} nodes, not one"
    m.graph.output.append(onnx.helper.make_tensor_value_info(erf[0].output[0], onnx.TensorProto.FLOAT, None))
    onnx.save(m, apart)
    run = {k: v.numpy() for k, v in feeds.items()}
    got = {}
    for name, p in (("fused", path), ("apart", apart)):
        g = ts.Graph.from_onnx(p, {k: tuple(v.shape) for k, v in feeds.items()})
        n_gelu = sum(t.op == op for t in g.tensors())
        if n_gelu != (name == "fused"):
            return f"the {name} import has {n_gelu} {op} ops"
        opts = ts.Options().output_mode("final")
        opts.anchor_tensor("out", output_alias(path, scalar), "final")
        for i, w in enumerate(weights):
            opts.anchor_tensor(f"g{i}", "Gradient___" + w, "final")
        model = ts.training_model(g, opts, optimizer=ts.SGD(lr=0.0), loss=g.outputs[0])
        loss = float(model(**run))
        got[name] = [loss] + [np.asarray(model.get_anchored_tensor(k), dtype=np.float64) for k in ["out"] + [f"g{i}" for i in range(len(weights))]]
        g.close()
    for what, a, b in zip(["loss", "output"] + [f"{w}'s gradient" for w in weights], got["fused"], got["apart"]):
        err = float(np.max(np.abs(np.asarray(a) - np.asarray(b)) / (1 + np.abs(np.asarray(b)))))
        if not err <= 1e-6:
            return f"{what}: fused and one by one differ by {err:.3g}"
    return None


# ONNX ops the importer composes of graph ops, one node each, whose
# gradient no exporter case above reaches: (case, op type, attributes,
# opset, x, the node's other inputs as (name, value, trained); name "" an
# omitted optional input). A trained
# input is an initializer the import makes a parameter; the others are
# settings (bounds, axes, k, repeats).
def composed_cases():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 4, 5))
    pos = np.abs(x) + 0.5
    # MaxUnpool: [2,3,2,2] values, each at a position of its 2x2 window of [2,3,4,4]
    xu = rng.standard_normal((2, 3, 2, 2))
    n_, c_, i_, j_ = np.indices(xu.shape)
    unpool_at = ((n_ * 3 + c_) * 4 + 2 * i_ + rng.integers(0, 2, xu.shape)) * 4 + 2 * j_ + rng.integers(0, 2, xu.shape)
    # Scan as a static RNN: the state s (x + p) updated by each step x_t of
    # a trained sequence, s' = tanh(s * x_t + x_t), unrolled at import
    from onnx import TensorProto, helper
    sv = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
    rnn_body = helper.make_graph([helper.make_node("Mul", ["s", "xt"], ["sx"]), helper.make_node("Add", ["sx", "xt"], ["pre"]),
                                  helper.make_node("Tanh", ["pre"], ["s2"])], "step", [sv("s"), sv("xt")], [sv("s2")])
    return [
        ("scan_rnn", "Scan", {"num_scan_inputs": 1, "body": rnn_body}, 16, x[0], [("seq", rng.standard_normal((3, 3, 4, 5)), True)]),
        ("clip", "Clip", {}, 13, x, [("lo", np.array(-0.5), False), ("hi", np.array(0.7), False)]),
        ("clip_opset10", "Clip", {"min": -0.3, "max": 0.4}, 10, x, []),
        ("mean", "Mean", {}, 13, x, [("c", rng.standard_normal((4, 5)), True)]),
        ("prelu", "PRelu", {}, 16, x, [("slope", rng.uniform(0.1, 0.5, (3, 1, 1)), True)]),
        ("celu", "Celu", {"alpha": 1.5}, 12, x, []),
        ("mish", "Mish", {}, 18, x, []),
        ("softsign", "Softsign", {}, 13, x, []),
        ("thresholded_relu", "ThresholdedRelu", {"alpha": 0.3}, 10, x, []),
        ("shrink", "Shrink", {"lambd": 0.4, "bias": 0.2}, 9, x, []),
        ("reduce_min", "ReduceMin", {"keepdims": 0}, 18, x, [("axes", np.array([1, -1]), False)]),
        ("reduce_l1", "ReduceL1", {}, 18, x, [("axes", np.array([2]), False)]),
        ("reduce_l2", "ReduceL2", {"keepdims": 0}, 18, x, [("axes", np.array([0, 3]), False)]),
        ("reduce_sum_square", "ReduceSumSquare", {}, 13, x, []),
        ("reduce_log_sum", "ReduceLogSum", {"axes": [1]}, 13, pos, []),
        ("reduce_log_sum_exp", "ReduceLogSumExp", {"keepdims": 0}, 18, x, [("axes", np.array([1, 2]), False)]),
        ("global_max_pool", "GlobalMaxPool", {}, 13, x, []),
        # positive: onnx's reference sums x, not |x| (the L1 norm, torch's)
        ("lp_normalization_l1", "LpNormalization", {"axis": 1, "p": 1}, 13, pos, []),
        ("lp_normalization_l2", "LpNormalization", {}, 13, x, []),
        ("mean_variance_normalization", "MeanVarianceNormalization", {}, 13, x, []),
        ("rms_normalization", "RMSNormalization", {"axis": -2, "epsilon": 1e-3}, 23, x,
         [("scale", rng.standard_normal((4, 5)), True)]),
        # over the last axis with a scale [D]: one RMSNorm op
        ("rms_normalization_last", "RMSNormalization", {"epsilon": 1e-3}, 23, x, [("scale", rng.standard_normal(5), True)]),
        ("trilu_lower_k1", "Trilu", {"upper": 0}, 14, x, [("k", np.array(1), False)]),
        ("tile", "Tile", {}, 13, x[:, :, :2], [("repeats", np.array([1, 2, 1, 3]), False)]),
        ("cumsum", "CumSum", {}, 14, x, [("axis", np.array(-1), False)]),
        ("cumsum_exclusive_reverse", "CumSum", {"exclusive": 1, "reverse": 1}, 14, x, [("axis", np.array(1), False)]),
        ("depth_to_space_crd", "DepthToSpace", {"blocksize": 2, "mode": "CRD"}, 13, rng.standard_normal((2, 8, 2, 3)), []),
        ("space_to_depth", "SpaceToDepth", {"blocksize": 2}, 13, rng.standard_normal((2, 2, 4, 6)), []),
        ("swish", "Swish", {"alpha": 0.7}, 24, x, []),
        ("swish_alpha_1", "Swish", {"alpha": 1.0}, 24, x, []),
        # Resize: roi omitted (""), then scales or sizes
        ("resize_linear", "Resize", {"mode": "linear"}, 19, x, [("", None, False), ("scales", np.array([1, 1, 2, 0.6]), False)]),
        ("resize_nearest_asymmetric", "Resize", {"mode": "nearest", "coordinate_transformation_mode": "asymmetric"}, 13, x,
         [("", None, False), ("scales", np.array([1, 1, 1.5, 2]), False)]),
        ("resize_cubic_antialias", "Resize", {"mode": "cubic", "antialias": 1}, 19, x,
         [("", None, False), ("", None, False), ("sizes", np.array([2, 3, 3, 3]), False)]),
        ("reduce_prod", "ReduceProd", {"keepdims": 0}, 18, x, [("axes", np.array([1, 3]), False)]),
        ("cumprod_exclusive_reverse", "CumProd", {"exclusive": 1, "reverse": 1}, 26, x, [("axis", np.array(3), False)]),
        ("center_crop_pad", "CenterCropPad", {"axes": [2, 3]}, 18, x, [("shape", np.array([2, 7]), False)]),
        ("topk_smallest", "TopK", {"largest": 0, "axis": 1}, 11, x, [("k", np.array([2]), False)]),
        # Q is x; K, V (and the additive mask) trained initializers
        ("attention_causal_softcap", "Attention", {"is_causal": 1, "softcap": 2.0}, 23, x,
         [("k", rng.standard_normal((2, 3, 6, 5)), True), ("v", rng.standard_normal((2, 3, 6, 5)), True)]),
        ("attention_grouped_mask", "Attention", {"scale": 0.3}, 23, x,
         [("k", rng.standard_normal((2, 1, 6, 5)), True), ("v", rng.standard_normal((2, 1, 6, 7)), True),
          ("mask", rng.standard_normal((4, 6)), True)]),
        ("rotary_interleaved", "RotaryEmbedding", {"interleaved": 1}, 23, rng.standard_normal((2, 3, 4, 6)),
         [("cos", rng.standard_normal((2, 4, 3)), True), ("sin", rng.standard_normal((2, 4, 3)), True)]),
        ("gathernd_batch_dims", "GatherND", {"batch_dims": 1}, 13, x, [("indices", np.array([[[0, 1], [2, 3]], [[1, 0], [0, 3]]]), False)]),
        ("compress_axis", "Compress", {"axis": 2}, 11, x, [("condition", np.array([True, False, True, True]), False)]),
        # index 0 twice: two layers of adds
        ("scatternd_add", "ScatterND", {"reduction": "add"}, 16, x,
         [("indices", np.array([[0], [1], [0]]), False), ("updates", rng.standard_normal((3, 3, 4, 5)), True)]),
        ("scatter_elements_max", "ScatterElements", {"axis": 1, "reduction": "max"}, 18, x,
         [("indices", rng.integers(0, 3, (2, 2, 4, 5)), False), ("updates", rng.standard_normal((2, 2, 4, 5)), True)]),
        ("lppool_p3", "LpPool", {"kernel_shape": [2, 2], "p": 3, "strides": [1, 2]}, 18, pos, []),
        ("einsum_matmul", "Einsum", {"equation": "abij,akj->abik"}, 12, x, [("w", rng.standard_normal((2, 6, 5)), True)]),
        ("einsum_diagonal", "Einsum", {"equation": "...ii->...i"}, 12, rng.standard_normal((2, 3, 4, 4)), []),
        # N = C: onnx's reference LRN walks the channels over range(N)
        ("lrn", "LRN", {"size": 3, "alpha": 0.1, "beta": 0.6, "bias": 1.5}, 13, rng.standard_normal((3, 3, 2, 4)), []),
        ("swiglu", "SwiGLU", {"alpha": 1.3}, 28, x, [("b", rng.standard_normal((2, 3, 4, 5)), True)]),
        ("max_unpool", "MaxUnpool", {"kernel_shape": [2, 2], "strides": [2, 2]}, 11, xu, [("I", unpool_at, False)]),
        # x the input [B,C,L]; the weight, bias and past state trained
        ("causal_conv_with_state_silu", "CausalConvWithState", {"activation": "silu"}, 27, rng.standard_normal((2, 3, 5)),
         [("weight", rng.standard_normal((3, 1, 3)), True), ("bias", rng.standard_normal(3), True),
          ("past_state", rng.standard_normal((2, 3, 2)), True)]),
        # x the query (2 query heads on 1 key/value head), decay per key dim
        ("linear_attention_gated_delta", "LinearAttention", {"q_num_heads": 2, "kv_num_heads": 1}, 27, rng.standard_normal((2, 3, 8)),
         [("key", rng.standard_normal((2, 3, 4)) * 0.5, True), ("value", rng.standard_normal((2, 3, 5)), True),
          ("past_state", rng.standard_normal((2, 1, 4, 5)), True), ("decay", rng.uniform(-0.5, 0.0, (2, 3, 4)), True),
          ("beta", rng.uniform(0.2, 0.8, (2, 3, 1)), True)]),
        ("linear_attention_linear", "LinearAttention", {"q_num_heads": 2, "kv_num_heads": 2, "update_rule": "linear", "scale": 0.3}, 27,
         rng.standard_normal((2, 3, 8)), [("key", rng.standard_normal((2, 3, 8)), True), ("value", rng.standard_normal((2, 3, 6)), True)]),
        # x the data; the grid trained, past the borders by a little
        ("grid_sample_linear_reflection", "GridSample", {"mode": "linear", "padding_mode": "reflection"}, 22, rng.standard_normal((2, 2, 4, 5)),
         [("grid", rng.uniform(-1.2, 1.2, (2, 3, 4, 2)), True)]),
        ("grid_sample_cubic_border_aligned", "GridSample", {"mode": "cubic", "padding_mode": "border", "align_corners": 1}, 22,
         rng.standard_normal((1, 2, 4, 5)), [("grid", rng.uniform(-1.2, 1.2, (1, 3, 2, 2)), True)]),
        ("grid_sample_bilinear_volumetric_opset16", "GridSample", {}, 16, rng.standard_normal((1, 2, 3, 4, 3)),
         [("grid", rng.uniform(-1.1, 1.1, (1, 2, 2, 3, 3)), True)]),
        # x is theta
        ("affine_grid_3d_aligned", "AffineGrid", {"align_corners": 1}, 20, rng.standard_normal((2, 3, 4)),
         [("size", np.array([2, 1, 3, 4, 2]), False)]),
        ("affine_grid_2d", "AffineGrid", {}, 20, rng.standard_normal((2, 2, 3)), [("size", np.array([2, 3, 4, 5]), False)]),
        ("col2im_strides_pads_dilations", "Col2Im", {"strides": [2, 1], "pads": [1, 0, 0, 1], "dilations": [1, 2]}, 18,
         rng.standard_normal((2, 8, 9)), [("image_shape", np.array([5, 4]), False), ("block_shape", np.array([2, 2]), False)]),
        # x the past cache [B,H,S,D]; the update trained; row 1 wraps around
        ("tensor_scatter_circular", "TensorScatter", {"mode": "circular"}, 24, rng.standard_normal((2, 2, 5, 3)),
         [("update", rng.standard_normal((2, 2, 3, 3)), True), ("write_indices", np.array([1, 4]), False)]),
        ("det_3x3", "Det", {}, 22, rng.standard_normal((2, 3, 3)), []),
        ("det_4x4", "Det", {}, 22, rng.standard_normal((3, 2, 4, 4)), []),
        ("upsample_nearest_opset9", "Upsample", {"mode": "nearest"}, 9, x, [("scales", np.array([1.0, 2.0, 1.0, 3.0]), False)]),
        ("rnn_bidirectional", "RNN", {"hidden_size": 3, "direction": "bidirectional"}, 14, rng.standard_normal((4, 2, 5)),
         [("W", rng.standard_normal((2, 3, 5)), True), ("R", rng.standard_normal((2, 3, 3)), True), ("B", rng.standard_normal((2, 6)), True)]),
    ]


def composed_model(op, attrs, opset, x, extra, ftype):
    """loss = sum(op(x + p, extra...) * r): p (zeros, x's shape) an
    initializer, so its gradient is that of the op's input; every float
    input in `ftype` (ONNX's FLOAT for tensorscope, DOUBLE for the
    reference's finite differences, which reads p and the trained inputs
    as graph inputs)."""
    import onnx
    from onnx import TensorProto, helper
    np_t = np.float32 if ftype == TensorProto.FLOAT else np.float64
    inits, inputs = [], [helper.make_tensor_value_info("x", ftype, x.shape)]
    feeds = {"p": np.zeros(x.shape)} | {n: v for n, v, trained in extra if trained}
    for n, v in [("p", feeds["p"])] + [(n, v) for n, v, _ in extra if n]:  # "": an omitted input
        arr = v.astype(np.int64) if v.dtype.kind == "i" else v if v.dtype.kind == "b" else v.astype(np_t)
        if ftype == TensorProto.DOUBLE and n in feeds:
            inputs.append(helper.make_tensor_value_info(n, ftype, v.shape))
        else:
            inits.append(onnx.numpy_helper.from_array(arr, n))
    inputs.append(helper.make_tensor_value_info("r", ftype, None))
    nodes = [helper.make_node("Add", ["x", "p"], ["h"]), helper.make_node(op, ["h"] + [n for n, _, _ in extra], ["y"], **attrs),
             helper.make_node("Mul", ["y", "r"], ["yr"]), helper.make_node("ReduceSum", ["yr"], ["loss"], keepdims=0)]
    outputs = [helper.make_tensor_value_info(n, ftype, None) for n in ("loss", "y")]
    model = helper.make_model(helper.make_graph(nodes, op, inputs, outputs, inits), opset_imports=[helper.make_opsetid("", opset)])
    return model, feeds


def _mvn64():
    """ONNX's MeanVarianceNormalization in the input's precision (onnx's
    reference runs its function body, whose constants are float)."""
    from onnx.reference.op_run import OpRun

    class MeanVarianceNormalization(OpRun):
        op_domain = ""

        def _run(self, x, axes=None):
            axes = tuple(axes if axes is not None else (0, 2, 3))
            mean = x.mean(axis=axes, keepdims=True)
            std = np.sqrt((x * x).mean(axis=axes, keepdims=True) - mean * mean)
            return ((x - mean) / (std + 1e-9),)
    return MeanVarianceNormalization


def _ops64():
    """onnx's reference ops that compute in float32 whatever their inputs
    (MeanVarianceNormalization's body, CausalConvWithState's SiLU,
    LinearAttention, GridSample's coordinates, AffineGrid), in the inputs' precision,
    for the finite differences."""
    from onnx.reference.op_run import OpRun

    class CausalConvWithState(OpRun):
        op_domain = ""

        def _run(self, x, w, bias=None, past_state=None, activation=None):
            k = w.shape[2]
            pad = past_state if past_state is not None else np.zeros(x.shape[:2] + (k - 1,))
            seq = np.concatenate([pad, x], axis=2)
            y = sum(w[None, :, 0, j, None] * seq[:, :, j:j + x.shape[2]] for j in range(k))
            y = y + (bias[None, :, None] if bias is not None else 0)
            if activation in ("silu", "swish"):
                y = y / (1 + np.exp(-y))
            return y, seq[:, :, seq.shape[2] - (k - 1):]

    class LinearAttention(OpRun):
        op_domain = ""

        def _run(self, q, k, v, past_state=None, decay=None, beta=None, chunk_size=None, kv_num_heads=None, q_num_heads=None,
                 scale=None, update_rule=None):
            rule = update_rule or "gated_delta"
            heads = lambda a, h: a.reshape(a.shape[0], a.shape[1], h, -1).transpose(0, 2, 1, 3)
            q4, k4, v4 = heads(q, q_num_heads), heads(k, kv_num_heads), heads(v, kv_num_heads)
            s = past_state.copy() if past_state is not None else np.zeros(k4.shape[:2] + (k4.shape[3], v4.shape[3]))
            scale = scale or 1 / np.sqrt(q4.shape[3])
            outs = []
            for t in range(q.shape[1]):
                kt, vt = k4[:, :, t], v4[:, :, t]
                if rule in ("gated", "gated_delta"):
                    s = s * np.exp(heads(decay, kv_num_heads)[:, :, t])[..., None]
                if rule in ("delta", "gated_delta"):
                    vt = heads(beta, beta.shape[2])[:, :, t] * (vt - np.einsum("bhdm,bhd->bhm", s, kt))
                s = s + kt[..., :, None] * vt[..., None, :]
                outs.append(scale * np.einsum("bhd,bhdm->bhm", q4[:, :, t], np.repeat(s, q_num_heads // kv_num_heads, axis=1)))
            o = np.stack(outs, axis=2)
            return o.transpose(0, 2, 1, 3).reshape(q.shape[0], q.shape[1], -1), s
    from onnx.reference.ops.op_grid_sample import GridSample as GridSample32

    class GridSample(GridSample32):
        op_domain = ""

        def _gs_denormalize_coordinates(self, n, dims, align_corners):
            return np.array([self._gs_denormalize(v, d, align_corners) for v, d in zip(n, dims)])
    class AffineGrid(OpRun):
        op_domain = ""

        def _run(self, theta, size, align_corners=None):
            from onnx.reference.ops.op_affine_grid import construct_original_grid
            return (np.einsum("nij,...j->n...i", theta, construct_original_grid(size[2:], align_corners or 0)),)
    return [_mvn64(), CausalConvWithState, LinearAttention, GridSample, AffineGrid]


def composed_gradients(workdir):
    """Each composed op's forward against onnx's reference and the
    gradient of its input and of its trained inputs against central
    finite differences of sum(y * r), the reference evaluated in double."""
    failures = []
    for case in composed_cases():
        try:
            why = composed_gradient(workdir, *case)
        except Exception as e:  # one case's failure never stops the others
            why = " ".join(f"{type(e).__name__}: {e}".split())[:300]
        if why:
            failures.append(f"{case[0]}: {why}")
    return "; ".join(failures) if failures else None


def composed_refusals(workdir):
    """A composed op's bad attribute or input is refused with a message
    that says what it takes."""
    import onnx
    from onnx import TensorProto, helper
    x = np.ones((2, 3), np.float32)
    bad = [("LpNormalization", {"p": 3}, [], "takes 1 or 2"),
           ("Celu", {"alpha": 0.0}, [], "non-zero alpha"),
           ("Tile", {}, [("repeats", np.array([2], np.int64))], "one per dimension"),
           ("Trilu", {}, [("k", None)], "must be a constant"),
           ("GlobalMaxPool", {}, [], "at least 3 dimensions"),
           ("TopK", {}, [("k", None)], "must be a constant"),
           ("LpPool", {"kernel_shape": [2], "ceil_mode": 1}, [], "ceil_mode 1"),
           ("DepthToSpace", {"blocksize": 2}, [], "[N,C,H,W]"),
           ("GridSample", {"padding_mode": "mirror"}, [("grid", np.zeros((2, 1, 1, 2), np.float32))], "zeros, border or reflection"),
           ("Det", {}, [], "square matrices"),
           ("Upsample", {"mode": "nearest"}, [("scales", np.ones(2, np.float32))], "Resize")]
    for op, attrs, extra, want in bad:
        inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)]
        inits = [onnx.numpy_helper.from_array(v, n) for n, v in extra if v is not None]
        inputs += [helper.make_tensor_value_info(n, TensorProto.INT64, []) for n, v in extra if v is None]
        node = helper.make_node(op, ["x"] + [n for n, _ in extra], ["y"], **attrs)
        model = helper.make_model(helper.make_graph([node], op, inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                                                    inits), opset_imports=[helper.make_opsetid("", 18)])
        path = os.path.join(workdir, f"refused_{op}.onnx")
        onnx.save(model, path)
        try:
            ts.Graph.from_onnx(path, {i.name: tuple(d.dim_value for d in i.type.tensor_type.shape.dim) for i in inputs}).close()
            return f"{op} {attrs}: imported"
        except ts.TensorscopeError as e:
            if want not in str(e) or op not in str(e):
                return f"{op} {attrs}: the error does not say '{want}': {e}"
    return None


class ScriptedIf(torch.nn.Module):
    """Python control flow that torch.jit.script keeps as an If: on the
    input's shape (folds at import) or on its values (refused)."""

    def __init__(self, on_values):
        super().__init__()
        self.lin, self.on_values = torch.nn.Linear(3, 3), on_values

    def forward(self, x):
        h = self.lin(x)
        if self.on_values:
            if h.sum() > 0:
                h = h * 2
        elif h.shape[0] > 1:
            h = h * 3
        else:
            h = h - 1
        return h


def control_flow(workdir):
    """If on a condition the import folds (a scripted module's branch on a
    shape) imports its branch and computes PyTorch's output; control flow
    on the graph's tensors is refused naming the node and what is not known
    at import: an If on the values (scripted), a Loop whose trip count is a
    graph input; graphs nested too deep and a Loop past the limit on
    unrolled nodes are refused naming the limit."""
    import onnx
    from onnx import TensorProto as T, helper as h, numpy_helper as nh
    x = torch.randn(2, 3)
    for on_values in (False, True):
        path = os.path.join(workdir, f"scripted_if_{on_values}.onnx")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = torch.jit.script(ScriptedIf(on_values))
            # a dynamic batch: the exporter keeps the If on the shape, which the import folds
            torch.onnx.export(m, (x,), path, dynamo=False, opset_version=17, input_names=["x"], dynamic_axes={"x": {0: "batch"}})
        if "If" not in {n.op_type for n in onnx.load(path).graph.node}:
            return f"the scripted module (on values: {on_values}) was exported without an If"
        try:
            g = ts.Graph.from_onnx(path, {"x": (2, 3)})
        except ts.TensorscopeError as e:
            if on_values and all(w in str(e) for w in ("'/If' (If", "its condition", "not known at import")):
                continue
            return f"scripted If (on values: {on_values}): {e}"
        if on_values:
            return "an If on the values of a graph tensor imported"
        with torch.no_grad():
            want = m(x).numpy()
        got = ts.inference_model(g)(x=x.numpy())
        g.close()
        if not np.allclose(got, want, rtol=OUT_RTOL, atol=OUT_RTOL):
            return f"scripted If on a shape: {got} where PyTorch gives {want}"

    def model(name, nodes, inputs, outputs, inits=()):
        path = os.path.join(workdir, name + ".onnx")
        onnx.save(h.make_model(h.make_graph(nodes, name, inputs, outputs, list(inits)), opset_imports=[h.make_opsetid("", 17)]), path)
        return path

    v = lambda name, elem=T.FLOAT, shape=(2,): h.make_tensor_value_info(name, elem, shape)
    body = h.make_graph([h.make_node("Identity", ["c"], ["c2"]), h.make_node("Add", ["s", "s"], ["s2"])], "body",
                        [v("i", T.INT64, []), v("c", T.BOOL, []), v("s")], [v("c2", T.BOOL, []), v("s2")])
    loop_m = model("loop_graph_m", [h.make_node("Loop", ["m", "", "x"], ["y"], body=body)], [v("m", T.INT64, []), v("x")], [v("y")])
    big = model("loop_too_long", [h.make_node("Loop", ["m", "", "x"], ["y"], body=body)], [v("x")], [v("y")],
                [nh.from_array(np.array(10 ** 9, np.int64), "m")])
    nested = h.make_graph([h.make_node("Neg", ["x"], ["y0"])], "leaf", [], [v("y0")])
    for depth in range(9):  # If in If in ... 10 graphs deep
        cond = h.make_node("Constant", [], [f"c{depth}"], value=nh.from_array(np.array(True)))
        nested = h.make_graph([cond, h.make_node("If", [f"c{depth}"], [f"y{depth + 1}"], then_branch=nested, else_branch=nested)],
                              f"g{depth}", [], [v(f"y{depth + 1}")])
    deep = model("if_nested_too_deep", list(nested.node), [v("x")], [v("y9")])
    for path, shapes, want in ((loop_m, {"m": (), "x": (2,)}, ("(Loop", "trip count M 'm'", "not known at import")),
                               (big, {"x": (2,)}, ("(Loop", "100000", "limit on unrolled nodes")),
                               (deep, {"x": (2,)}, ("more than 8 deep",))):
        try:
            ts.Graph.from_onnx(path, shapes).close()
            return f"{os.path.basename(path)}: imported"
        except ts.TensorscopeError as e:
            if not all(w in str(e) for w in want):
                return f"{os.path.basename(path)}: the error does not say {want}: {e}"
    return None


def composed_gradient(workdir, name, op, attrs, opset, x, extra):
    """One case of composed_gradients: None, or what is off."""
    from onnx import TensorProto
    from onnx.reference import ReferenceEvaluator
    import onnx
    if True:
        model, _ = composed_model(op, attrs, opset, x, extra, TensorProto.FLOAT)
        ref, feeds = composed_model(op, attrs, opset, x, extra, TensorProto.DOUBLE)
        ev = ReferenceEvaluator(ref, new_ops=_ops64())
        y_shape = ev.run(["y"], {"x": x, "r": np.ones(1)} | feeds)[0].shape
        r = np.random.default_rng(7).standard_normal(y_shape)
        y64 = ev.run(["y"], {"x": x, "r": r} | feeds)[0]
        path = os.path.join(workdir, f"composed_{name}.onnx")
        onnx.save(model, path)
        g = ts.Graph.from_onnx(path, {"x": x.shape, "r": r.shape})
        try:
            opts = ts.Options().output_mode("final")
            opts.anchor_tensor("y", "y", "final")
            for n in feeds:
                opts.anchor_tensor("grad_" + n, "Gradient___" + n, "final")
            m = ts.training_model(g, opts, optimizer=ts.SGD(lr=0.0), loss=g.outputs[0])
            m(x=x.astype(np.float32), r=r.astype(np.float32))
            got = np.asarray(m.get_anchored_tensor("y"), dtype=np.float64).reshape(y64.shape)
            err = float(np.max(np.abs(got - y64) / (1 + np.abs(y64)), initial=0.0))
            if not err <= OUT_RTOL * 10:  # f32 against the reference's f64
                return f"forward off by {err:.3g}"
            eps = 1e-6
            for n, v in feeds.items():
                fd = np.zeros(v.shape)
                for i in np.ndindex(v.shape):
                    hi, lo = v.copy(), v.copy()
                    hi[i] += eps
                    lo[i] -= eps
                    l_hi = float(ev.run(["loss"], {"x": x, "r": r} | feeds | {n: hi})[0])
                    l_lo = float(ev.run(["loss"], {"x": x, "r": r} | feeds | {n: lo})[0])
                    fd[i] = (l_hi - l_lo) / (2 * eps)
                an = np.asarray(m.get_anchored_tensor("grad_" + n), dtype=np.float64).reshape(v.shape)
                e = float(np.max(np.abs(an - fd))) / max(float(np.max(np.abs(fd))), 1e-12)
                if not e <= GRAD_RTOL * 10:  # f32 gradients against f64 differences
                    return f"gradient of {n} off by {e:.3g} of its largest value"
        finally:
            g.close()
    return None

def main():
    only = None
    if "--only" in sys.argv:
        only = re.compile(sys.argv[sys.argv.index("--only") + 1])
    failed = 0
    with tempfile.TemporaryDirectory() as workdir:
        for name, (module, inputs, scalar, exporters) in cases().items():
            if only and not only.search(name):
                continue
            for exporter in exporters:
                try:
                    why = check(name, module, inputs, scalar, exporter, workdir)
                except Exception as e:  # one case's failure never stops the others
                    why = " ".join(f"{type(e).__name__}: {e}".split())[:500]
                print(f"{'ok  ' if why is None else 'FAIL'} {name} ({exporter}){'' if why is None else ': ' + why}", flush=True)
                failed += why is not None
        for name, fn in (("group_normalization_opsets", group_normalization_opsets), ("one_op_per_module", one_op_per_module),
                         ("gelu_fused_vs_unfused", gelu_fused_vs_unfused),
                         ("rms_norm_fused_vs_unfused", lambda d: gelu_fused_vs_unfused(d, "rms_norm", "RMSNorm", "Sqrt",
                                                                                       ("m.0.weight", "m.0.bias", "m.1.weight"))),
                         ("composed_gradients", composed_gradients),
                         ("composed_refusals", composed_refusals), ("control_flow", control_flow)):
            if only and not only.search(name):
                continue
            try:
                why = fn(workdir)
            except Exception as e:
                why = " ".join(f"{type(e).__name__}: {e}".split())[:500]
            print(f"{'ok  ' if why is None else 'FAIL'} {name} (onnx){'' if why is None else ': ' + why}", flush=True)
            failed += why is not None
    print(f"onnx_torch_layers: {'PASS' if not failed else f'{failed} FAILED'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
