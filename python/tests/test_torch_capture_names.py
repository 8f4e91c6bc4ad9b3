"""The same tensor names whichever capture made the graph: each module's
output (the tensor `tensorscope compare` pairs with the module, the last
one built in its scope) and its gradient are named alike by
Options().capture("export") and capture("onnx") -- `fc1/Gemm:0`,
`conv/Conv:0`, `bn/BatchNormalization:0`, `Gradient___fc1/Gemm:0` -- and,
anchored under those names, hold the same values."""
import copy

import numpy as np
import pytest

import tensorscope as ts
from tensorscope import _export

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

pytestmark = pytest.mark.skipif(not _export.available(torch),
                                reason=f"PyTorch {torch.__version__} has no torch.export capture")


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.act = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1, bias=False)
        self.norm = nn.GroupNorm(2, 4)
        self.gap = nn.AvgPool2d(2)
        self.fc = nn.Linear(4 * 2 * 2, 4)

    def forward(self, x):
        h = self.pool(self.act(self.bn(self.conv(x))))
        h = self.gap(torch.tanh(self.norm(self.conv2(h))))
        return self.fc(torch.flatten(h, 1))


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads

        def split(y):
            return y.view(b, t, h, d // h).transpose(1, 2)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        att = torch.softmax(q @ k.transpose(-2, -1) / (d // h) ** 0.5, dim=-1)
        return self.o((att @ v).transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, d=8, heads=2, vocab=11):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.ln1, self.attn = nn.LayerNorm(d), Attention(d, heads)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.emb(idx)
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return self.head(x)


class Losses(nn.Module):
    """forward returns its loss: three loss modules on a Linear's scores."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 4)
        self.ce, self.mse, self.nll = nn.CrossEntropyLoss(), nn.MSELoss(), nn.NLLLoss()

    def forward(self, x, labels):
        h = self.fc(x)
        return self.ce(h, labels) + self.mse(h, torch.tanh(x[:, :4])) + self.nll(F.log_softmax(h, 1), labels)


def module_outputs(graph, module):
    """{module path: its output's name}: the last tensor built inside each
    submodule's scope (the module's or one nested in it), as `tensorscope
    compare` pairs a module with the graph."""
    out = {}
    paths = [p for p, _ in module.named_modules() if p]
    for t in graph.tensors():
        scope = t.name.rpartition("/")[0]
        for p in paths:
            if scope == p or scope.startswith(p + "."):
                out[p] = t.name
    return out


def by_scope(graph):
    """{scope: the names of the tensors computed in it, in order}."""
    out = {}
    for t in graph.tensors():
        if t.op not in ("Param", "Buffer", "Const", "Input"):
            out.setdefault(t.name.rpartition("/")[0], []).append(t.name)
    return out


# the modules whose every tensor is named alike: all but those the export
# capture builds with fewer ops (an embedding of int32 ids, where the ONNX
# capture's int64 ids are made indices first, emb/Convert:0): their outputs
# still are (GroupNorm and GELU are one op through either capture)
MODELS = [
    ("mlp", MLP, lambda: (torch.randn(5, 6),), lambda: torch.randint(0, 4, (5,)), ()),
    ("cnn", CNN, lambda: (torch.randn(3, 1, 8, 8),), lambda: torch.randint(0, 4, (3,)), ()),
    ("block", Block, lambda: (torch.randint(0, 11, (2, 5)),), lambda: torch.randint(0, 11, (2, 5)),
     ("emb",)),
    # the losses: more ops here than the ONNX capture's one (whose exporter
    # moves forward's log_softmax into the NLL loss, and broadcasts MSE's
    # operands by adding zeros)
    ("losses", Losses, lambda: (torch.randn(5, 6), torch.randint(0, 4, (5,))), None,
     ("ce", "nll", "mse", "")),
]


@pytest.mark.parametrize("name,make,inputs,labels,fewer", MODELS, ids=[m[0] for m in MODELS])
def test_every_module_output_has_one_name_and_value_whichever_capture(name, make, inputs, labels, fewer):
    torch.manual_seed(0)
    net = make()
    x = inputs()
    names, scopes, returned = {}, {}, set()
    for capture in ("onnx", "export"):
        g = ts.Graph.from_torch(copy.deepcopy(net), x, capture=capture)
        names[capture] = module_outputs(g, net)
        scopes[capture] = by_scope(g)
        returned |= {t.name for t in g.outputs}
        g.close()
    for scope, want in scopes["onnx"].items():  # the attention's pieces, a Linear's MatMul, ...
        if scope not in fewer:
            assert scopes["export"].get(scope) == want, \
                f"{name}: the tensors of scope '{scope}' (onnx, export): {want}, {scopes['export'].get(scope)}"
    assert set(names["onnx"]) == {p for p, _ in net.named_modules() if p}, "a module without an output"
    differ = {p: (names["onnx"][p], names["export"].get(p)) for p in names["onnx"]
              if names["export"].get(p) != names["onnx"][p]}
    assert not differ, f"{name}: module outputs named otherwise by the export capture (onnx, export): {differ}"

    # anchored by those names, one training step (lr 0) gives the same
    # values and gradients through both captures
    feeds = [t.numpy().astype(np.float32 if t.is_floating_point() else np.int32) for t in x]
    if labels is not None:  # else forward returns its loss
        feeds.append(labels().numpy().astype(np.int32))
    wanted = sorted(set(names["onnx"].values()))
    got = {}
    for capture in ("onnx", "export"):
        opts = ts.Options().capture(capture)
        for n in wanted:
            if n not in returned:  # forward's outputs are anchored already
                opts.anchor_tensor(n)
            opts.anchor_tensor(f"Gradient___{n}")
        m = copy.deepcopy(net)
        model = ts.training_model(m, opts, optimizer=torch.optim.SGD(m.parameters(), lr=0.0),
                                  example_inputs=x, loss="cross_entropy" if labels else None)
        model(*feeds)
        got[capture] = {n: np.asarray(model.get_anchored_tensor(n), np.float64)
                        for n in wanted for n in (n, f"Gradient___{n}")}
        model.close()
    for n, want in got["onnx"].items():
        a = got["export"][n]
        assert a.shape == want.shape, f"{name}: {n}: shape {a.shape} through export, {want.shape} through onnx"
        scale = max(1.0, float(np.max(np.abs(want))))
        assert np.allclose(a, want, rtol=1e-4, atol=1e-5 * scale), \
            f"{name}: {n}: max |diff| {np.max(np.abs(a - want)):.3g} between the captures"
