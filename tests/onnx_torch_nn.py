"""onnx_torch_nn.py -- every module class of torch.nn, exported by both of
PyTorch's ONNX exporters, imported and checked against PyTorch.

The classes come from `torch.nn.modules.__all__` of the PyTorch at hand, so
a newer PyTorch's new classes appear by themselves: a class with no recipe
here is a failure ("no recipe"), not a silent gap. Each recipe builds the
class with typical arguments, in its 1-D, 2-D and 3-D variants where it has
them and with its common options, and gives it an input. Each variant is
put after a Linear (or Conv) where it has no parameters of its own, so that
the gradient reaching its input is checked through that layer's weight.

Per variant and exporter (tests/onnx_torch_layers.py's `check`): the
forward within 1e-5 (relative to 1 + |value|) of PyTorch's, every
parameter's gradient within 1e-4 of its largest value, and then 5 SGD steps
whose losses and final weights match PyTorch's own loop. A variant the
exporter itself cannot export is counted as such ("exporter cannot": not
ours to fix). So is a variant whose file holds another program than the
module, where the test itself computes the evidence (file_differs):
onnxruntime running the file disagrees with PyTorch and tensorscope agrees
with onnxruntime, or the file holds one tensor for several equal
parameters and tensorscope's gradient of it is the sum of PyTorch's
gradients of them. Every other failure must be listed, with its reason, in
tests/onnx_torch_nn_expected_failures.txt, and a listed variant that passes
fails the test too (the list only shrinks). Classes that are not layers
(Module, the containers' bases, option records) are named in NOT_LAYERS
with the reason.

Prints a line per variant and exporter, then the table per family (pass /
exporter cannot / failing) and the share of exportable classes that pass;
below FLOOR the test fails. Every variant goes through the TorchScript
exporter and each class's first variant through the dynamo exporter too (a
few seconds a module), or every variant with --all-dynamo. The cases run in
at most 2 spawned worker processes (PyTorch's and tensorscope's threads are
never forked); a case that runs past --timeout seconds, or whose process
dies, fails with that reason and its worker is replaced.
Usage: onnx_torch_nn.py [--only REGEX] [--jobs N] [--timeout S] [--all-dynamo] [--write-expected]
"""
import multiprocessing as mp
import multiprocessing.connection as mp_conn
import os
import re
import sys
import tempfile
import time
import traceback
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import expected_failures  # noqa: E402
import onnx_torch_layers  # noqa: E402
from onnx_torch_layers import Wrapped, check  # noqa: E402  (one check for both tests)

import tensorscope as ts  # noqa: E402

EXPECTED_FILE = os.path.join("tests", "onnx_torch_nn_expected_failures.txt")
HEADER = ("# torch.nn variants (Class.variant/exporter) that fail, with the reason: tests/onnx_torch_nn.py.\n"
          "# Written by `onnx_torch_nn.py --write-expected`; it only shrinks (a listed variant that passes fails the test).\n")
# the share of the exportable classes that pass every variant, below which
# the test fails (raised as classes are fixed)
FLOOR = 99.3
EXPORTERS = ("torchscript", "dynamo")
STEPS, LR = 5, 0.05
TRAIN_RTOL = 1e-4

NOT_LAYERS = {
    "Module": "the base class of every module",
    "Container": "a deprecated base class",
    "RNNBase": "the base class of RNN, LSTM and GRU (each has recipes)",
    "RNNCellBase": "the base class of RNNCell, LSTMCell and GRUCell (each has recipes)",
    "LinearCrossEntropyOptions": "an options record of LinearCrossEntropyLoss, not a module",
    "ParameterList": "holds parameters, computes nothing (used inside the ParameterDict/List recipe's module)",
    "ParameterDict": "holds parameters, computes nothing",
    "ModuleDict": "holds modules, computes nothing (its modules are the other recipes)",
    "ModuleList": "holds modules, computes nothing (its modules are the other recipes)",
    "SyncBatchNorm": "BatchNorm across processes: one process has no group to synchronise with (BatchNorm's recipes)",
}


class After(nn.Module):
    """`first` (a Linear or Conv with parameters), then the module."""

    def __init__(self, first, m):
        super().__init__()
        self.first, self.m = first, m

    def forward(self, x):
        return self.m(self.first(x))


class Head(nn.Module):
    """A Linear over the last axis, then a loss module of (scores, target)."""

    def __init__(self, loss, d=4, c=5, transpose=False, activation=None):
        super().__init__()
        self.lin, self.loss, self.transpose, self.activation = nn.Linear(d, c), loss, transpose, activation

    def forward(self, x, y):
        s = self.lin(x)
        if self.transpose:
            s = s.transpose(1, 2)
        if self.activation is not None:
            s = self.activation(s)
        return self.loss(s, y)


class Pair(nn.Module):
    """Two Linear heads and a module of both (a distance, a pairwise loss)."""

    def __init__(self, m, d=4, e=5, third=False, target=False):
        super().__init__()
        self.a, self.b, self.m, self.third, self.target = nn.Linear(d, e), nn.Linear(d, e), m, third, target
        self.c = nn.Linear(d, e) if third else None

    def forward(self, x, *rest):
        args = [self.a(x), self.b(x)] + ([self.c(x)] if self.third else [])
        return self.m(*args, *rest)


class Call(nn.Module):
    """The module applied to the first Linear's output and fixed extra inputs."""

    def __init__(self, first, m, fn):
        super().__init__()
        self.first, self.m, self.fn = first, m, fn

    def forward(self, x, *rest):
        return self.fn(self.m, self.first(x), *rest)


def lin(d=6):
    return nn.Linear(d, d)


def conv(dims, c_in=2, c_out=3, bias=True):
    return (nn.Conv1d, nn.Conv2d, nn.Conv3d)[dims - 1](c_in, c_out, 3, padding=1, bias=bias)


SPATIAL = {1: (9,), 2: (6, 7), 3: (4, 5, 6)}
EVEN = {1: (8,), 2: (6, 8), 3: (4, 6, 6)}


def xs(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def ints(low, high, *shape, seed=1):
    return torch.randint(low, high, shape, generator=torch.Generator().manual_seed(seed))


def spatial_input(dims, c=2, n=2):
    return {"x": xs(n, c, *SPATIAL[dims])}


def recipes():
    """class name -> [(variant, module factory, inputs factory, scalar output?)]"""
    R = {}

    def add(cls, variant, make, inputs, scalar=False):
        R.setdefault(cls, []).append((variant, make, inputs, scalar))

    # activations: after a Linear
    x3 = lambda: {"x": xs(3, 5, 6)}
    for cls, make in [("ReLU", nn.ReLU), ("ReLU6", nn.ReLU6), ("ELU", lambda: nn.ELU(0.7)), ("SELU", nn.SELU),
                      ("CELU", lambda: nn.CELU(1.3)), ("GELU", nn.GELU), ("SiLU", nn.SiLU), ("Mish", nn.Mish),
                      ("Sigmoid", nn.Sigmoid), ("Tanh", nn.Tanh), ("LogSigmoid", nn.LogSigmoid), ("Softplus", lambda: nn.Softplus(2.0, 5.0)),
                      ("Softsign", nn.Softsign), ("Hardsigmoid", nn.Hardsigmoid), ("Hardswish", nn.Hardswish),
                      ("Hardtanh", lambda: nn.Hardtanh(-0.6, 0.8)), ("LeakyReLU", lambda: nn.LeakyReLU(0.1)),
                      ("Hardshrink", lambda: nn.Hardshrink(0.3)), ("Softshrink", lambda: nn.Softshrink(0.3)),
                      ("Tanhshrink", nn.Tanhshrink), ("Threshold", lambda: nn.Threshold(0.1, -1.0)),
                      ("Softmax", lambda: nn.Softmax(-1)), ("Softmin", lambda: nn.Softmin(-1)), ("LogSoftmax", lambda: nn.LogSoftmax(-1)),
                      ("GLU", lambda: nn.GLU(-1)), ("Identity", nn.Identity), ("PReLU", lambda: nn.PReLU(5)),
                      ("Flatten", lambda: nn.Flatten(1)),
                      ("Unflatten", lambda: nn.Unflatten(2, (2, 3)))]:
        add(cls, "", lambda make=make: After(lin(), make()), x3)
    add("RReLU", "eval", lambda: After(lin(), nn.RReLU()).eval(), x3)  # in training its slopes are random draws
    add("GELU", "tanh", lambda: After(lin(), nn.GELU("tanh")), x3)
    add("Softmax2d", "", lambda: After(conv(2), nn.Softmax2d()), lambda: spatial_input(2))
    add("ChannelShuffle", "", lambda: After(nn.Conv2d(2, 4, 3, padding=1), nn.ChannelShuffle(2)), lambda: spatial_input(2))
    add("PixelShuffle", "", lambda: After(nn.Conv2d(2, 8, 3, padding=1), nn.PixelShuffle(2)), lambda: spatial_input(2))
    add("PixelUnshuffle", "", lambda: After(conv(2), nn.PixelUnshuffle(2)), lambda: {"x": xs(2, 2, 6, 8)})

    # dropout: p = 0 in training (the masks are PyTorch's own draws), or eval
    for cls in ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"):
        dims = {"Dropout1d": 1, "Dropout2d": 2, "Dropout3d": 3}.get(cls)
        make = getattr(nn, cls)
        if dims:
            add(cls, "p0", lambda make=make, dims=dims: After(conv(dims), make(0.0)), lambda dims=dims: spatial_input(dims))
        else:
            add(cls, "p0", lambda make=make: After(lin(), make(0.0)), x3)

    # linear layers
    add("Linear", "", lambda: nn.Linear(6, 4), x3)
    add("Linear", "nobias", lambda: nn.Linear(6, 4, bias=False), x3)
    add("LazyLinear", "", lambda: nn.LazyLinear(4), x3)
    add("Bilinear", "", lambda: Call(lin(), nn.Bilinear(6, 6, 3), lambda m, h: m(h, h * 0.5 + 1)), x3)

    # convolutions, 1-D to 3-D, with their options
    for dims in (1, 2, 3):
        d = f"{dims}d"
        C, T = (nn.Conv1d, nn.Conv2d, nn.Conv3d)[dims - 1], (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)[dims - 1]
        inp = lambda dims=dims: spatial_input(dims)
        add(f"Conv{d}", "", lambda C=C: C(2, 3, 3), inp)
        add(f"Conv{d}", "stride_padding", lambda C=C: C(2, 4, 3, stride=2, padding=1), inp)
        add(f"Conv{d}", "dilation_groups_nobias", lambda C=C: C(2, 4, 2, dilation=2, groups=2, bias=False), inp)
        add(f"Conv{d}", "same", lambda C=C: C(2, 3, 3, padding="same"), inp)
        for mode in ("reflect", "replicate", "circular"):
            add(f"Conv{d}", f"padding_mode_{mode}", lambda C=C, mode=mode: C(2, 3, 3, padding=1, padding_mode=mode), inp)
        add(f"ConvTranspose{d}", "", lambda T=T: T(2, 3, 3), inp)
        add(f"ConvTranspose{d}", "stride_output_padding", lambda T=T: T(2, 3, 3, stride=2, padding=1, output_padding=1), inp)
        add(f"ConvTranspose{d}", "dilation_groups_nobias", lambda T=T: T(2, 4, 2, dilation=2, groups=2, bias=False), inp)
        add(f"LazyConv{d}", "", lambda dims=dims: (nn.LazyConv1d, nn.LazyConv2d, nn.LazyConv3d)[dims - 1](3, 3), inp)
        add(f"LazyConvTranspose{d}", "", lambda dims=dims: (nn.LazyConvTranspose1d, nn.LazyConvTranspose2d, nn.LazyConvTranspose3d)[dims - 1](3, 3), inp)

        # pooling
        M, A, AA, AM, LP = (getattr(nn, f"{k}{d}") for k in ("MaxPool", "AvgPool", "AdaptiveAvgPool", "AdaptiveMaxPool", "LPPool"))
        add(f"MaxPool{d}", "", lambda M=M, dims=dims: After(conv(dims), M(2)), inp)
        add(f"MaxPool{d}", "stride_padding_ceil", lambda M=M, dims=dims: After(conv(dims), M(3, stride=2, padding=1, ceil_mode=True)), inp)
        add(f"MaxPool{d}", "dilation", lambda M=M, dims=dims: After(conv(dims), M(2, dilation=2)), inp)
        add(f"AvgPool{d}", "", lambda A=A, dims=dims: After(conv(dims), A(2)), inp)
        add(f"AvgPool{d}", "padding_ceil_exclude", lambda A=A, dims=dims: After(conv(dims), A(3, stride=2, padding=1, ceil_mode=True,
                                                                                               count_include_pad=False)), inp)
        add(f"AdaptiveAvgPool{d}", "", lambda AA=AA, dims=dims: After(conv(dims), AA(2)), inp)
        add(f"AdaptiveAvgPool{d}", "global", lambda AA=AA, dims=dims: After(conv(dims), AA(1)), inp)
        add(f"AdaptiveMaxPool{d}", "", lambda AM=AM, dims=dims: After(conv(dims), AM(2)), inp)
        add(f"LPPool{d}", "", lambda LP=LP, dims=dims: After(conv(dims), LP(2, 2)), inp)
        U = getattr(nn, f"MaxUnpool{d}")  # even sizes: the unpooled output is the pooled input's size
        add(f"MaxUnpool{d}", "", lambda M=M, U=U, dims=dims: Call(conv(dims), (M(2, return_indices=True), U(2)),
                                                                 lambda m, h: m[1](*m[0](h))),
            lambda dims=dims: {"x": xs(2, 2, *EVEN[dims])})

        # normalisation
        B, I = getattr(nn, f"BatchNorm{d}"), getattr(nn, f"InstanceNorm{d}")
        binp = (lambda: {"x": xs(4, 6)}) if dims == 1 else inp
        # bias-free layers before the norms: a norm in training removes a
        # bias, whose gradient is then rounding noise only
        first = (lambda: nn.Linear(6, 3, bias=False)) if dims == 1 else (lambda dims=dims: conv(dims, bias=False))
        add(f"BatchNorm{d}", "", lambda B=B, first=first: After(first(), B(3)), binp)
        add(f"BatchNorm{d}", "no_affine_momentum", lambda B=B, first=first: After(first(), B(3, momentum=0.3, affine=False)), binp)
        add(f"LazyBatchNorm{d}", "", lambda d=d, first=first: After(first(), getattr(nn, f"LazyBatchNorm{d}")()), binp)
        add(f"InstanceNorm{d}", "", lambda I=I, dims=dims: After(conv(dims, bias=False), I(3)), inp)
        add(f"InstanceNorm{d}", "affine", lambda I=I, dims=dims: After(conv(dims, bias=False), I(3, affine=True)), inp)
        add(f"LazyInstanceNorm{d}", "affine", lambda dims=dims, d=d: After(conv(dims, bias=False),
                                                                          getattr(nn, f"LazyInstanceNorm{d}")(affine=True)), inp)

        # padding
        for kind in ("Zero", "Constant", "Reflection", "Replication", "Circular"):
            P = getattr(nn, f"{kind}Pad{d}")
            args = (1, 0.5) if kind == "Constant" else (1,)
            add(f"{kind}Pad{d}", "", lambda P=P, args=args, dims=dims: After(conv(dims), P(*args)), inp)
    add("BatchNorm2d", "eval", lambda: After(conv(2), nn.BatchNorm2d(3)).eval(), lambda: spatial_input(2))
    add("GroupNorm", "", lambda: After(nn.Conv2d(2, 6, 3), nn.GroupNorm(3, 6)), lambda: spatial_input(2))
    add("GroupNorm", "1d_no_affine", lambda: After(nn.Conv1d(2, 4, 3), nn.GroupNorm(2, 4, affine=False)), lambda: spatial_input(1))
    add("LayerNorm", "", lambda: After(lin(), nn.LayerNorm(6)), x3)
    add("LayerNorm", "2_axes_nobias", lambda: After(lin(), nn.LayerNorm((5, 6), bias=False)), x3)
    add("RMSNorm", "", lambda: After(lin(), nn.RMSNorm(6)), x3)
    add("LocalResponseNorm", "", lambda: After(nn.Conv2d(2, 5, 3), nn.LocalResponseNorm(3)), lambda: spatial_input(2))
    add("CrossMapLRN2d", "", lambda: After(nn.Conv2d(2, 5, 3), nn.CrossMapLRN2d(3)), lambda: spatial_input(2))
    add("FractionalMaxPool2d", "", lambda: After(conv(2), nn.FractionalMaxPool2d(2, output_size=3)), lambda: spatial_input(2))
    add("FractionalMaxPool3d", "", lambda: After(conv(3), nn.FractionalMaxPool3d(2, output_size=2)), lambda: spatial_input(3))
    add("Fold", "", lambda: After(nn.Linear(6, 6), nn.Fold((3, 4), 2)), lambda: {"x": xs(2, 8, 6)})
    add("Unfold", "", lambda: After(conv(2), nn.Unfold(2, stride=2)), lambda: {"x": xs(2, 2, 6, 8)})

    # upsampling
    for mode, dims in (("nearest", 1), ("nearest", 2), ("nearest", 3), ("linear", 1), ("bilinear", 2), ("bicubic", 2), ("trilinear", 3)):
        corners = (False, True) if mode != "nearest" else (None,)
        for ac in corners:
            v = f"{mode}_{dims}d" + ("" if ac is None else f"_align_corners_{ac}")
            add("Upsample", v, lambda mode=mode, ac=ac, dims=dims: After(conv(dims), nn.Upsample(scale_factor=2, mode=mode, align_corners=ac)),
                lambda dims=dims: spatial_input(dims))
    add("UpsamplingNearest2d", "", lambda: After(conv(2), nn.UpsamplingNearest2d(scale_factor=2)), lambda: spatial_input(2))
    add("UpsamplingBilinear2d", "", lambda: After(conv(2), nn.UpsamplingBilinear2d(scale_factor=2)), lambda: spatial_input(2))

    # embeddings
    add("Embedding", "", lambda: nn.Embedding(10, 4), lambda: {"x": ints(0, 10, 3, 5)})
    add("Embedding", "padding_idx", lambda: nn.Embedding(10, 4, padding_idx=0), lambda: {"x": ints(0, 4, 3, 5)})
    add("EmbeddingBag", "mean", lambda: nn.EmbeddingBag(10, 4, mode="mean"), lambda: {"x": ints(0, 10, 3, 5)})
    add("EmbeddingBag", "sum", lambda: nn.EmbeddingBag(10, 4, mode="sum"), lambda: {"x": ints(0, 10, 3, 5)})
    # max: distinct ids in a bag (a row twice ties with itself, where PyTorch's
    # gradient picks one and the exported ReduceMax's splits it)
    add("EmbeddingBag", "max", lambda: nn.EmbeddingBag(10, 4, mode="max"),
        lambda: {"x": torch.stack([torch.randperm(10, generator=torch.Generator().manual_seed(b))[:5] for b in range(3)])})

    # recurrent
    seq = lambda: {"x": xs(4, 3, 5)}
    for cls in ("RNN", "LSTM", "GRU"):
        C = getattr(nn, cls)
        add(cls, "", lambda C=C: Call(nn.Linear(5, 5), C(5, 6), lambda m, h: m(h)[0]), seq)
        add(cls, "bidirectional_2_layers_batch_first", lambda C=C: Call(nn.Linear(5, 5), C(5, 6, 2, batch_first=True, bidirectional=True),
                                                                        lambda m, h: m(h)[0]), seq)
        cell = getattr(nn, cls + "Cell")
        add(cls + "Cell", "", lambda cell=cell: Call(nn.Linear(5, 5), cell(5, 6),
                                                    lambda m, h: m(h[0])[0] if isinstance(m, nn.LSTMCell) else m(h[0])), seq)

    # attention and transformers (eval: dropout off)
    add("MultiheadAttention", "", lambda: Call(lin(8), nn.MultiheadAttention(8, 2, batch_first=True), lambda m, h: m(h, h, h)[0]),
        lambda: {"x": xs(2, 5, 8)})
    add("MultiheadAttention", "causal", lambda: Call(lin(8), nn.MultiheadAttention(8, 2, batch_first=True),
                                                     lambda m, h: m(h, h, h, attn_mask=torch.triu(torch.ones(5, 5, dtype=torch.bool), 1),
                                                                    need_weights=False)[0]), lambda: {"x": xs(2, 5, 8)})
    tl = lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    add("TransformerEncoderLayer", "", lambda: Call(lin(8), tl(), lambda m, h: m(h)), lambda: {"x": xs(2, 5, 8)})
    add("TransformerEncoderLayer", "norm_first_gelu", lambda: Call(lin(8), nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True,
                                                                                                     norm_first=True, activation="gelu"),
                                                                   lambda m, h: m(h)), lambda: {"x": xs(2, 5, 8)})
    add("TransformerEncoder", "", lambda: Call(lin(8), nn.TransformerEncoder(tl(), 2, enable_nested_tensor=False), lambda m, h: m(h)),
        lambda: {"x": xs(2, 5, 8)})
    dl = lambda: nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    add("TransformerDecoderLayer", "", lambda: Call(lin(8), dl(), lambda m, h: m(h, h * 0.5)), lambda: {"x": xs(2, 5, 8)})
    add("TransformerDecoder", "", lambda: Call(lin(8), nn.TransformerDecoder(dl(), 2), lambda m, h: m(h, h * 0.5)), lambda: {"x": xs(2, 5, 8)})
    add("Transformer", "", lambda: Call(lin(8), nn.Transformer(8, 2, 1, 1, 16, dropout=0.0, batch_first=True), lambda m, h: m(h, h[:, :3])),
        lambda: {"x": xs(2, 5, 8)})

    # containers
    add("Sequential", "", lambda: nn.Sequential(lin(), nn.ReLU(), nn.Linear(6, 3)), x3)

    # distances
    add("CosineSimilarity", "", lambda: Pair(nn.CosineSimilarity(-1)), lambda: {"x": xs(3, 4)})
    add("PairwiseDistance", "", lambda: Pair(nn.PairwiseDistance()), lambda: {"x": xs(3, 4)})

    # losses: scalar outputs of every reduction
    y_cls = lambda: ints(0, 5, 6)
    for red in ("mean", "sum", "none"):
        s = red != "none"
        add("CrossEntropyLoss", red, lambda red=red: Head(nn.CrossEntropyLoss(reduction=red)), lambda: {"x": xs(6, 4), "y": y_cls()}, s)
        add("NLLLoss", red, lambda red=red: Head(nn.NLLLoss(reduction=red), activation=nn.LogSoftmax(1)),
            lambda: {"x": xs(6, 4), "y": y_cls()}, s)
        add("MSELoss", red, lambda red=red: Head(nn.MSELoss(reduction=red)), lambda: {"x": xs(6, 4), "y": xs(6, 5, seed=3)}, s)
        add("L1Loss", red, lambda red=red: Head(nn.L1Loss(reduction=red)), lambda: {"x": xs(6, 4), "y": xs(6, 5, seed=3)}, s)
    add("CrossEntropyLoss", "ignore_index_label_smoothing_weight",
        lambda: Head(nn.CrossEntropyLoss(weight=torch.tensor([0.5, 1.0, 2.0, 1.5, 0.7]), ignore_index=-100, label_smoothing=0.1)),
        lambda: {"x": xs(6, 4), "y": torch.tensor([0, 4, -100, 2, 1, -100])}, True)
    add("CrossEntropyLoss", "probabilities", lambda: Head(nn.CrossEntropyLoss()),
        lambda: {"x": xs(6, 4), "y": torch.softmax(xs(6, 5, seed=4), 1)}, True)
    add("CrossEntropyLoss", "probabilities_weight_label_smoothing_sum",
        lambda: Head(nn.CrossEntropyLoss(weight=torch.tensor([0.5, 1.0, 2.0, 1.5, 0.7]), label_smoothing=0.2, reduction="sum")),
        lambda: {"x": xs(6, 4), "y": torch.softmax(xs(6, 5, seed=4), 1)}, True)
    add("CrossEntropyLoss", "probabilities_2d_weight", lambda: Head(nn.CrossEntropyLoss(weight=torch.tensor([0.5, 1.0, 2.0, 1.5, 0.7])), transpose=True),
        lambda: {"x": xs(2, 3, 4), "y": torch.softmax(xs(2, 5, 3, seed=4), 1)}, True)
    add("NLLLoss2d", "", lambda: Head(nn.NLLLoss2d(), transpose=True, activation=nn.LogSoftmax(1)),
        lambda: {"x": xs(2, 3, 4), "y": ints(0, 5, 2, 3)}, True)
    prob = lambda: torch.sigmoid(xs(6, 5, seed=5))
    sign = lambda: torch.where(xs(6, 5, seed=6) > 0, 1.0, -1.0)
    for cls, make, target, act in [
            ("BCELoss", nn.BCELoss, prob, nn.Sigmoid()), ("BCEWithLogitsLoss", nn.BCEWithLogitsLoss, prob, None),
            ("HuberLoss", lambda: nn.HuberLoss(delta=0.5), lambda: xs(6, 5, seed=3), None),
            ("SmoothL1Loss", lambda: nn.SmoothL1Loss(beta=0.5), lambda: xs(6, 5, seed=3), None),
            ("KLDivLoss", lambda: nn.KLDivLoss(reduction="batchmean"), prob, nn.LogSoftmax(1)),
            ("PoissonNLLLoss", nn.PoissonNLLLoss, lambda: prob() * 3, None),
            ("SoftMarginLoss", nn.SoftMarginLoss, sign, None),
            ("MultiLabelSoftMarginLoss", nn.MultiLabelSoftMarginLoss, lambda: (prob() > 0.5).float(), None),
            ("HingeEmbeddingLoss", nn.HingeEmbeddingLoss, sign, None),
            ("MultiMarginLoss", nn.MultiMarginLoss, y_cls, None),
            ("MultiLabelMarginLoss", nn.MultiLabelMarginLoss, lambda: torch.tensor([[3, 0, -1, 1, 2]] * 6), None)]:
        add(cls, "", lambda make=make, act=act: Head(make(), activation=act), lambda target=target: {"x": xs(6, 4), "y": target()}, True)
    add("GaussianNLLLoss", "", lambda: Call(nn.Linear(4, 10), nn.GaussianNLLLoss(), lambda m, h, y: m(h[:, :5], y, F.softplus(h[:, 5:]))),
        lambda: {"x": xs(6, 4), "y": xs(6, 5, seed=3)}, True)
    add("CosineEmbeddingLoss", "", lambda: Pair(nn.CosineEmbeddingLoss()), lambda: {"x": xs(6, 4), "y": torch.tensor([1.0, -1, 1, 1, -1, 1])}, True)
    add("MarginRankingLoss", "", lambda: Pair(nn.MarginRankingLoss(0.2)), lambda: {"x": xs(6, 4), "y": sign()}, True)
    add("TripletMarginLoss", "", lambda: Pair(nn.TripletMarginLoss(), third=True), lambda: {"x": xs(6, 4)}, True)
    add("TripletMarginWithDistanceLoss", "", lambda: Pair(nn.TripletMarginWithDistanceLoss(), third=True), lambda: {"x": xs(6, 4)}, True)
    add("CTCLoss", "", lambda: Call(nn.Linear(4, 5), nn.CTCLoss(),
                                    lambda m, h, y: m(h.log_softmax(2), y, torch.full((2,), 6, dtype=torch.long), torch.tensor([3, 2]))),
        lambda: {"x": xs(6, 2, 4), "y": torch.tensor([[1, 2, 3], [2, 4, 0]])}, True)
    add("AdaptiveLogSoftmaxWithLoss", "", lambda: Call(nn.Linear(4, 8), nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4, 8]), lambda m, h, y: m(h, y).loss),
        lambda: {"x": xs(6, 4), "y": ints(0, 10, 6)}, True)
    add("LinearCrossEntropyLoss", "", lambda: Call(nn.Linear(4, 6), linear_cross_entropy(), lambda m, h, y: m(h, y)),
        lambda: {"x": xs(6, 4), "y": ints(0, 5, 6)}, True)
    return R


def linear_cross_entropy():
    cls = getattr(nn, "LinearCrossEntropyLoss", None)
    if cls is None:
        raise RuntimeError("this PyTorch has no LinearCrossEntropyLoss")
    try:
        return cls(6, 5)
    except TypeError:
        return cls(nn.Linear(6, 5))


FAMILIES = [("loss", re.compile(r"Loss|NLLLoss2d")), ("activation", re.compile(
    r"^(ReLU|ReLU6|ELU|SELU|CELU|GELU|SiLU|Mish|Sigmoid|Tanh|LogSigmoid|Softplus|Softsign|Hardsigmoid|Hardswish|Hardtanh|LeakyReLU|"
    r"Hardshrink|Softshrink|Tanhshrink|Threshold|Softmax|Softmin|LogSoftmax|Softmax2d|GLU|PReLU|RReLU)$")),
    ("convolution", re.compile(r"Conv")), ("pooling", re.compile(r"Pool|Unpool")), ("normalization", re.compile(r"Norm|LRN")),
    ("padding", re.compile(r"Pad")), ("upsampling", re.compile(r"Upsampl|Shuffle|Unshuffle|Fold|Unfold")),
    ("dropout", re.compile(r"Dropout")), ("embedding", re.compile(r"Embedding")), ("recurrent", re.compile(r"RNN|LSTM|GRU")),
    ("transformer", re.compile(r"Transformer|Attention")), ("linear", re.compile(r"Linear|Bilinear|Identity")),
    ("other", re.compile(r"."))]


def family(cls):
    return next(f for f, r in FAMILIES if r.search(cls))


class ExporterCannot(Exception):
    """The exporter itself failed: not ours to fix."""


_export = onnx_torch_layers.export


def export_or_cannot(module, inputs, path, exporter):
    try:
        _export(module, inputs, path, exporter)
    except Exception as e:  # whatever the exporter raises
        raise ExporterCannot(" ".join(f"{type(e).__name__}: {e}".split())[:200]) from None


onnx_torch_layers.export = export_or_cannot  # check() exports through it


def train_steps(name, module, inputs, scalar, exporter, workdir):
    """STEPS SGD steps of the file check() exported beside PyTorch's own
    loop on the same wrapped loss (the same r: check's seed), from the
    module's first weights: every step's loss and the final weights."""
    feeds, training, _ = onnx_torch_layers.reference_feeds(module, inputs, scalar)
    wrapped = Wrapped(module, scalar)
    path = os.path.join(workdir, f"{name}.{exporter}.onnx")
    wrapped.train(training)
    g = ts.Graph.from_onnx(path, {k: tuple(v.shape) for k, v in feeds.items()})
    names = {t.name for t in g.tensors() if t.is_parameter}
    pairs = {}
    for n, p in wrapped.named_parameters():
        for cand in (n, n.replace("m.", "", 1)):
            if cand in names:
                pairs[n] = cand
                break
    model = ts.training_model(g, ts.Options(), optimizer=ts.SGD(lr=LR), loss=g.outputs[0])
    run = {k: (v.numpy().astype(np.int64) if v.dtype == torch.int64 else v.numpy()) for k, v in feeds.items()}
    opt = torch.optim.SGD(wrapped.parameters(), lr=LR)
    for step in range(STEPS):
        opt.zero_grad()
        ref = wrapped(*feeds.values())
        ref.backward()
        opt.step()
        got = float(model(**run))
        want = float(ref.detach())
        if not np.isfinite(got) or abs(got - want) > TRAIN_RTOL * (1 + abs(want)):
            return f"step {step + 1}: loss {got:.7g} vs PyTorch's {want:.7g}"
    params = dict(wrapped.named_parameters())
    for n, cand in pairs.items():
        got = g.tensor(cand).numpy().reshape(params[n].shape)
        want = params[n].detach().numpy()
        e = float(np.max(np.abs(got - want), initial=0.0)) / max(float(np.max(np.abs(want), initial=0.0)), 1e-6)
        if not e <= TRAIN_RTOL:
            return f"after {STEPS} steps: {n} off by {e:.3g} of its largest value"
    g.close()
    return None


def file_differs(name, module, inputs, scalar, exporter, workdir, state):
    """Evidence, computed here, that the exporter's file holds another
    program than the module (counted as "exporter cannot": what the file
    says is imported faithfully), or None:
    - onnxruntime running the file computes another loss than PyTorch's
      module (beyond the forward's tolerance) and tensorscope computes
      onnxruntime's (the dynamo exporter writes a training-mode BatchNorm
      as the inference op, and fuses it into the Conv before);
    - parameters of the module are not in the file, each equal (or its
      transpose equal) to a tensor the file holds and reads in its place,
      and tensorscope's gradient of that tensor is the sum of PyTorch's
      gradients of the parameters it stands for (the dynamo exporter's
      optimizer stores initializers of equal values once: the zero
      `in_proj_bias` of two attention blocks, the copies of a layer);
    - a tensor of the file that is no parameter holds copies of one
      parameter's values (the optimizer folded it with constants: the
      RNN's first step's b_hh), and tensorscope's gradient of the
      parameter plus its copies' is PyTorch's of the parameter."""
    import onnx
    import onnxruntime as ort
    path = os.path.join(workdir, f"{name}.{exporter}.onnx")
    if not os.path.exists(path):
        return None
    module.load_state_dict(state)
    feeds, training, _ = onnx_torch_layers.reference_feeds(module, inputs, scalar)  # check()'s seed and draws: the same r
    wrapped = Wrapped(module, scalar)
    wrapped.train(training)
    module.load_state_dict(state)
    wrapped.zero_grad()
    loss = wrapped(*feeds.values())
    loss.backward()
    want = float(loss.detach())
    grads = {n: p.grad.numpy().astype(np.float64) for n, p in wrapped.named_parameters() if p.grad is not None}
    values = {n: p.detach().numpy() for n, p in wrapped.named_parameters()}
    run = {k: (v.numpy().astype(np.int64) if v.dtype == torch.int64 else v.numpy()) for k, v in feeds.items()}
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ort_loss = float(np.asarray(sess.run(None, {i.name: run[i.name] for i in sess.get_inputs()})[0]))
    g = ts.Graph.from_onnx(path, {k: tuple(v.shape) for k, v in feeds.items()})
    names = {t.name for t in g.tensors()}
    held = {t.name: t.numpy() for t in g.tensors() if t.is_parameter}
    in_file = {i.name for i in onnx.load(path).graph.initializer}
    within = lambda a, b, tol: abs(a - b) <= tol * (1 + abs(b))  # noqa: E731
    # the module's parameters the file lacks, by the file's tensor that
    # stands for them (equal values, or their transpose)
    own = {n: next((c for c in (n, n.replace("m.", "", 1)) if c in names), None) for n in values}
    groups = {}
    for n in [n for n, c in own.items() if c is None and n in grads]:
        v = values[n]
        match = [(h, False) for h, hv in held.items() if hv.shape == v.shape and np.array_equal(hv, v)] + \
                [(h, True) for h, hv in held.items() if v.ndim == 2 and hv.shape == v.T.shape and np.array_equal(hv, v.T)]
        if len(match) > 1:  # the one the file holds (the others are the import's copies of it, by the file's metadata)
            match = [m for m in match if m[0] in in_file]
        if len(match) != 1:
            groups = {}
            break
        groups.setdefault(match[0], []).append(n)
    # a tensor of the file that no parameter is, holding copies of one
    # parameter's values (folded with constants: the RNN's first step's
    # h0 @ W_hh + b_hh of a zero h0, b_hh repeated over the batch)
    grouped = {h for h, _ in groups}
    copies = {}
    for h, hv in held.items():
        if h in own.values() or h in grouped:
            continue
        of = [n for n, c in own.items() if c is not None and n in grads and values[n].size > 1 and hv.size % values[n].size == 0
              and np.array_equal(hv.reshape(-1, values[n].size), np.broadcast_to(values[n].ravel(), (hv.size // values[n].size, values[n].size)))]
        if len(of) == 1:
            copies[h] = of[0]
    opts = ts.Options().output_mode("final")
    anchors = {}
    for h in [h for h, _ in groups] + list(copies) + [own[n] for n in copies.values()]:
        if h not in anchors:
            anchors[h] = f"g{len(anchors)}"
            opts.anchor_tensor(anchors[h], "Gradient___" + h, "final")
    model = ts.training_model(g, opts, optimizer=ts.SGD(lr=0.0), loss=g.outputs[0])
    got = float(model(**run))
    if within(got, ort_loss, onnx_torch_layers.OUT_RTOL) and not within(ort_loss, want, onnx_torch_layers.OUT_RTOL):
        g.close()
        return (f"the exporter writes a different program: onnxruntime computes the loss {ort_loss:.7g} from the file "
                f"(tensorscope {got:.7g}), PyTorch {want:.7g}")
    merged = []
    for (h, transposed), members in groups.items():
        mine = [n for n, c in own.items() if c == h]  # the module's parameter the tensor is, if any
        want_g = sum((grads[n].T if transposed else grads[n]) for n in members) + sum(grads[n] for n in mine if n in grads)
        got_g = model.get_anchored_tensor(anchors[h]).reshape(want_g.shape)
        scale = max(float(np.max(np.abs(want_g), initial=0.0)), 1e-12)
        if not float(np.max(np.abs(got_g - want_g), initial=0.0)) / scale <= onnx_torch_layers.GRAD_RTOL:
            g.close()
            return None
        if len(mine + members) > 1:
            merged.append(f"{h} for {', '.join(mine + members)}")
    for h, n in copies.items():  # n's gradient here and its copy's, summed over the copies, are PyTorch's of n
        want_g = grads[n]
        got_g = model.get_anchored_tensor(anchors[own[n]]).reshape(want_g.shape) + \
            model.get_anchored_tensor(anchors[h]).reshape(-1, want_g.size).sum(0).reshape(want_g.shape)
        scale = max(float(np.max(np.abs(want_g), initial=0.0)), 1e-12)
        if not float(np.max(np.abs(got_g - want_g), initial=0.0)) / scale <= onnx_torch_layers.GRAD_RTOL:
            g.close()
            return None
        merged.append(f"{h} a copy of {n} (folded with constants), trained apart from it")
    g.close()
    if not merged:  # no tensor stands for two parameters, none copies one: the failure is not the file's
        return None
    return ("the exporter writes a different program: the file's tensors and the module's parameters differ "
            f"(tensorscope's gradients of them summed are PyTorch's of the parameters): {'; '.join(merged)}")[:300]


def one(cls, variant, exporter):
    """(status, reason) of one variant through one exporter; status ok,
    cannot (the exporter's own failure) or fail."""
    make, inputs_of, scalar = RECIPES_BY_KEY[(cls, variant)]
    name = re.sub(r"\W", "_", f"{cls}{'.' + variant if variant else ''}")
    with tempfile.TemporaryDirectory() as workdir:
        try:
            torch.manual_seed(0)
            module, inputs = make(), inputs_of()
            if any(p.__class__.__name__ == "UninitializedParameter" for p in module.parameters()):
                with torch.no_grad():
                    module(*inputs.values())  # a lazy module: its shapes from the first call
            if not module.training:
                module.eval_export = True
            state = {k: v.clone() for k, v in module.state_dict().items()}
            why = check(name, module, inputs, scalar, exporter, workdir)
            if why is None:
                module.load_state_dict(state)
                why = train_steps(name, module, inputs, scalar, exporter, workdir)
            if why is not None:
                try:
                    differs = file_differs(name, module, inputs, scalar, exporter, workdir, state)
                except Exception:  # no evidence: the failure stands
                    differs = None
                if differs:
                    return "differs", differs
        except ExporterCannot as e:
            return "cannot", str(e).replace(workdir + os.sep, "")
        except Exception as e:  # one case's failure never stops the others
            why = " ".join(f"{type(e).__name__}: {e}".split())[:300]
            if os.environ.get("TS_NN_TRACEBACK"):
                traceback.print_exc()
        # the reason without the temporary directory (the same text every
        # run) and without the importer's list of the op types it knows
        return ("ok", None) if why is None else ("fail", why.replace(workdir + os.sep, "").split("; tensorscope imports:")[0])


RECIPES_BY_KEY = {}


def reuse_exporter_tables():
    """The dynamo exporter builds its table of ONNX translations, the list
    of PyTorch's composite ops and its decomposition table (seconds) afresh
    for every export; a worker builds each once (nothing here registers a
    custom translation or op, the things that change them)."""
    try:
        from torch.export import decomp_utils, exported_program
        from torch.onnx._internal.exporter import _decomp, _registration
    except ImportError:
        return
    build, built = _registration.ONNXRegistry.from_torchlib, {}

    def registry_once(opset_version=_registration._constants.TORCHLIB_OPSET):
        if opset_version not in built:
            built[opset_version] = build(opset_version=opset_version)
        return built[opset_version]
    _registration.ONNXRegistry.from_torchlib = staticmethod(registry_once)
    collect = getattr(exported_program, "_collect_all_valid_cia_ops", None)
    if collect is not None:
        ops = []

        def ops_once():
            if not ops:
                ops.append(collect())
            return ops[0]
        for module in (exported_program, decomp_utils):
            if getattr(module, "_collect_all_valid_cia_ops", None) is collect:
                module._collect_all_valid_cia_ops = ops_once
    table, tables = getattr(_decomp, "create_onnx_friendly_decomposition_table", None), {}
    if table is not None:
        def table_once(ops):  # a copy: the export may change the one it gets
            key = frozenset(ops)
            if key not in tables:
                tables[key] = table(ops)
            return dict(tables[key])
        _decomp.create_onnx_friendly_decomposition_table = table_once


def worker(conn):
    """A spawned process (nothing inherited from the parent's threads) that
    runs the cases the parent sends, one at a time, until it sends None."""
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    reuse_exporter_tables()
    if not os.environ.get("TS_NN_TRACEBACK"):  # the exporters print whole graphs when they fail: the reason is kept
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1), os.dup2(devnull, 2)
        os.close(devnull)
    index_recipes()
    while True:
        case = conn.recv()
        if case is None:
            return
        conn.send(one(*case))


def index_recipes():
    for cls, variants in recipes().items():
        for variant, make, inputs, scalar in variants:
            RECIPES_BY_KEY[(cls, variant)] = (make, inputs, scalar)


def run_cases(work, jobs, timeout, done):
    """{case: (status, reason)} of every case, on at most `jobs` spawned
    workers, done(case, result) called as each finishes; a case that takes
    longer than `timeout` seconds, or whose worker dies, fails with that
    reason and its worker is replaced."""
    ctx = mp.get_context("spawn")
    results, todo, busy = {}, list(reversed(work)), {}  # busy: conn -> (process, case, deadline)

    def start():
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=worker, args=(child,), daemon=True)
        proc.start()
        child.close()
        return parent, proc

    idle = []
    while todo or busy:
        while todo and len(busy) < jobs:
            conn, proc = idle.pop() if idle else start()
            case = todo.pop()
            conn.send(case)
            busy[conn] = (proc, case, time.monotonic() + timeout)
        soonest = min(d for _, _, d in busy.values())
        ready = mp_conn.wait(list(busy), timeout=max(0.0, soonest - time.monotonic()))
        for conn in ready:
            proc, case, _ = busy.pop(conn)
            try:
                results[case] = conn.recv()
                done(case, results[case])
                idle.append((conn, proc))
                continue
            except (EOFError, OSError):
                proc.join(5)
                results[case] = ("fail", f"the case's process died (exit code {proc.exitcode})")
                done(case, results[case])
            conn.close()
        now = time.monotonic()
        for conn in [c for c, (_, _, d) in busy.items() if d <= now]:
            proc, case, _ = busy.pop(conn)
            proc.kill()
            proc.join()
            conn.close()
            results[case] = ("fail", f"timeout: still running after {timeout:.0f} s")
            done(case, results[case])
        for conn, (proc, case, _) in list(busy.items()):
            if not proc.is_alive() and not conn.poll():
                busy.pop(conn)
                results[case] = ("fail", f"the case's process died (exit code {proc.exitcode})")
                done(case, results[case])
                conn.close()
    for conn, proc in idle:
        conn.send(None)
        proc.join(10)
        if proc.is_alive():
            proc.kill()
            proc.join()
    return results


def case_name(cls, variant, exporter):
    return f"{cls}{'.' + variant if variant else ''}/{exporter}"


def main():
    p = expected_failures.parser(__doc__, EXPECTED_FILE, "variants")
    p.add_argument("--jobs", type=int, default=2, help="cases at once (at most 2: the suite shares the machine)")
    p.add_argument("--timeout", type=float, default=float(os.environ.get("TS_NN_CASE_TIMEOUT", 150)),
                   help="seconds one case may take before it fails as a timeout")
    p.add_argument("--all-dynamo", action="store_true", help="every variant through the dynamo exporter, not each class's first")
    args = p.parse_args()
    expected_failures.check_args(p, args)
    only = re.compile(args.only) if args.only else None
    R = recipes()
    index_recipes()
    classes = sorted(c for c in torch.nn.modules.__all__ if isinstance(getattr(nn, c, None), type))
    no_recipe = [c for c in classes if c not in R and c not in NOT_LAYERS]
    work = []
    for cls in classes:
        for k, (variant, make, inputs, scalar) in enumerate(R.get(cls, [])):
            # every variant through the TorchScript exporter; the dynamo
            # exporter (seconds a module) takes each class's first variant,
            # or every variant with --all-dynamo
            for exporter in EXPORTERS if k == 0 or args.all_dynamo else EXPORTERS[:1]:
                if not only or only.search(case_name(cls, variant, exporter)):
                    work.append((cls, variant, exporter))

    def done(case, result):  # a line per case as it ends
        status, why = result
        name = case_name(*case)
        if status == "cannot":
            print(f"ok    {name}: the exporter cannot export it ({why})", flush=True)
        elif status == "differs":
            print(f"ok    {name}: {why}", flush=True)
        else:
            print(f"{'ok   ' if status == 'ok' else 'fail '} {name}{': ' + why if why else ''}", flush=True)

    t0 = time.monotonic()
    results = run_cases(work, max(1, min(args.jobs, 2)), args.timeout, done)
    seconds = time.monotonic() - t0
    failures, by_class, cannot = {}, {}, 0
    for case in work:
        status, why = results[case]
        by_class.setdefault(case[0], []).append(status)
        failures[case_name(*case)] = why if status == "fail" else None
        cannot += status in ("cannot", "differs")
    expected_path = os.path.join(args.source, EXPECTED_FILE)
    if args.write_expected:
        expected_failures.write(expected_path, HEADER, failures, lambda why: why)
    expected = expected_failures.read(expected_path)
    # per family: a class passes when every variant passes through every
    # exporter that can export it; the exporters cannot export any variant
    # of a class that counts under "exporter cannot"
    table, failing = {}, {}
    for cls, st in by_class.items():
        row = table.setdefault(family(cls), {"pass": 0, "cannot": 0, "fail": 0})
        if all(s in ("cannot", "differs") for s in st):
            row["cannot"] += 1
        elif all(s in ("ok", "cannot", "differs") for s in st):
            row["pass"] += 1
        else:
            row["fail"] += 1
            failing.setdefault(family(cls), []).append(cls)
    print(f"\n{'family':<15}{'pass':>6}{'exporter cannot':>17}{'failing':>9}  failing classes")
    for f, row in sorted(table.items()):
        print(f"{f:<15}{row['pass']:>6}{row['cannot']:>17}{row['fail']:>9}  {' '.join(failing.get(f, []))}")
    passed = sum(r["pass"] for r in table.values())
    exportable = sum(r["pass"] + r["fail"] for r in table.values())
    share = 100.0 * passed / max(exportable, 1)
    n_ok = sum(1 for s, _ in results.values() if s == "ok")
    print(f"classes: {len(classes)} in torch.nn.modules ({len(NOT_LAYERS)} not layers, {len(no_recipe)} without a recipe); "
          f"{passed} of {exportable} exportable classes pass every variant ({share:.1f}%); "
          f"variants x exporters: {n_ok} of {len(work) - cannot} exportable pass; {seconds:.0f} s on {min(args.jobs, 2)} workers")
    bad = expected_failures.verdict(failures, expected, lambda why: why, EXPECTED_FILE, "variant",
                                    "tests/onnx_torch_nn.py", bool(only))
    for c in no_recipe:
        print(f"FAIL {c}: a torch.nn class with no recipe here: add one to tests/onnx_torch_nn.py")
        bad += 1
    if not only and share < FLOOR:
        print(f"FAIL {share:.1f}% of the exportable classes pass, below the floor of {FLOOR}%: a class that passed fails now")
        bad += 1
    print(f"onnx_torch_nn: {'PASS' if not bad else f'{bad} FAILED'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
