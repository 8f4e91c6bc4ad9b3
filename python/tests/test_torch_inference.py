"""A torch module for inference (ts.inference_model(module), PopTorch's
inferenceModel), its graph (ts.Graph.from_torch), the capture chosen by
Options.capture, and what a wrapped module's training call returns
(PopTorch's (output, loss)): each against the module's own outputs
computed by PyTorch.

With PyTorch 2.5 or later (the real-model venv, tests/test_torch_capture.sh)
capture("export") runs torch.export; with an older one (Debian's 1.13) it is
refused saying so."""
import re

import numpy as np
import pytest

import tensorscope as ts

torch = pytest.importorskip("torch")
F = torch.nn.functional
pytestmark = pytest.mark.skipif(not hasattr(ts._capi.lib, "ts_graph_from_onnx"),
                                reason="this library does not import ONNX")
RTOL = 1e-5
HAS_EXPORT = tuple(int(p) for p in re.findall(r"\d+", torch.__version__)[:2]) >= (2, 5)


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = torch.nn.Linear(12, 32), torch.nn.Linear(32, 16), torch.nn.Linear(16, 5)

    def forward(self, x):
        return self.fc3(torch.tanh(self.fc2(F.relu(self.fc1(x)))))


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc = torch.nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        return self.fc(torch.flatten(F.relu(self.conv2(x)), 1))


def cnn():
    torch.manual_seed(1)
    net = SmallCNN()
    with torch.no_grad():  # statistics of their own, so that eval's BatchNorm is not the identity
        net.bn1.running_mean.uniform_(-0.5, 0.5)
        net.bn1.running_var.uniform_(0.5, 2.0)
        net.bn1.weight.uniform_(0.5, 1.5)
        net.bn1.bias.uniform_(-0.2, 0.2)
    return net.eval(), torch.randn(4, 3, 16, 16)


def mlp():
    torch.manual_seed(0)
    return MLP().eval(), torch.randn(8, 12)


def assert_close(ours, theirs):
    """Within RTOL of PyTorch's, relative to each value (and to the
    output's largest for values about 0)."""
    theirs = theirs.detach().numpy()
    assert ours.shape == theirs.shape and ours.dtype == np.float32
    np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=RTOL * float(np.max(np.abs(theirs))))


def logged(fn):
    """fn() with the library's log lines (info and above) collected."""
    lines = []
    level = ts._capi.lib.ts_get_log_level()
    ts.set_log_level(3)
    ts.set_log_callback(lambda _level, message: lines.append(message))
    try:
        return fn(), lines
    finally:
        ts.set_log_callback(None)
        ts.set_log_level(level)


@pytest.mark.parametrize("make", [mlp, cnn], ids=["mlp", "cnn"])
def test_inference_model_of_a_module_gives_its_outputs(make):
    net, x = make()
    model, lines = logged(lambda: ts.inference_model(net, example_inputs=(x,)))
    assert isinstance(model, ts.Model) and not model.training
    from tensorscope._torch import CAPTURES, capture_of  # the default: export on PyTorch 2.5 on
    said = CAPTURES[capture_of(ts.Options())]
    assert any("inference of torch module" in m and f"captured through {said}" in m for m in lines), lines
    with torch.no_grad():
        want = net(x)
    out = model(x.numpy())
    assert isinstance(out, np.ndarray)
    assert_close(out, want)
    # the weights are copied when it is wrapped: changing the module's afterwards changes nothing here
    with torch.no_grad():
        for p in net.parameters():
            p.add_(1.0)
    assert_close(model(x.numpy()), want)
    # D micro-batches on axis 0, as PopTorch returns them
    wide = ts.inference_model(make()[0], ts.Options().device_iterations(2), example_inputs=(x,))
    both = np.concatenate([x.numpy(), 2 * x.numpy()])
    with torch.no_grad():
        want2 = make()[0](torch.from_numpy(both))
    assert_close(wide(both), want2)


class TwoHeads(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.a, self.b = torch.nn.Linear(6, 8), torch.nn.Linear(8, 3), torch.nn.Linear(8, 2)

    def forward(self, x):
        h = F.relu(self.body(x))
        return self.a(h), torch.sigmoid(self.b(h))


def test_inference_model_returns_every_output_in_forwards_order():
    torch.manual_seed(2)
    net, x = TwoHeads(), torch.randn(5, 6)
    a, b = ts.inference_model(net, example_inputs=(x,))(x.numpy())
    with torch.no_grad():
        want_a, want_b = net(x)
    assert_close(a, want_a)
    assert_close(b, want_b)


def test_graph_from_torch_is_the_graph_itself():
    net, x = cnn()
    g = ts.Graph.from_torch(net, (x,))
    assert isinstance(g, ts.Graph)
    assert {n for n, _ in net.named_parameters()} <= set(g.parameters())
    np.testing.assert_array_equal(g.tensor("conv1.weight").numpy(), net.conv1.weight.detach().numpy())
    with torch.no_grad():
        want = net(x)
    assert_close(ts.inference_model(g)(x.numpy()), want)


def test_capture_is_checked():
    with pytest.raises(ValueError, match="'onnx'.*'export'"):
        ts.Options().capture("jit")


@pytest.mark.skipif(HAS_EXPORT, reason="this PyTorch has torch.export")
def test_capture_export_is_refused_on_an_older_torch():
    net, x = mlp()
    with pytest.raises(ts.UnsupportedError, match=r"PyTorch .* has no torch\.export.*2\.5.*capture\('onnx'\)"):
        ts.inference_model(net, ts.Options().capture("export"), example_inputs=(x,))
    with pytest.raises(ts.UnsupportedError, match="2.5"):
        ts.Graph.from_torch(net, (x,), capture="export")


@pytest.mark.skipif(not HAS_EXPORT, reason="torch.export capture needs PyTorch 2.5 or later")
@pytest.mark.parametrize("make", [mlp, cnn], ids=["mlp", "cnn"])
def test_capture_export_gives_the_modules_outputs(make):
    net, x = make()
    model, lines = logged(lambda: ts.inference_model(net, ts.Options().capture("export"), example_inputs=(x,)))
    said = [m for m in lines if "captured through" in m]
    assert len(said) == 1 and "torch.export" in said[0], lines
    with torch.no_grad():
        want = net(x)
    assert_close(model(x.numpy()), want)
    g = ts.Graph.from_torch(net, (x,), capture="export")
    assert {n for n, _ in net.named_parameters()} <= set(g.parameters())


class TopK(torch.nn.Module):
    def __init__(self, k, dim, largest):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3, 9, 5))
        self.k, self.dim, self.largest = k, dim, largest

    def forward(self, x):
        v, i = torch.topk(self.w * x, self.k, self.dim, self.largest)
        return v, i


class Sort(torch.nn.Module):
    def __init__(self, dim, descending):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randint(0, 4, (3, 9, 5)).float())  # ties
        self.dim, self.descending = dim, descending

    def forward(self, x):
        v, i = torch.sort(self.w * x, dim=self.dim, descending=self.descending, stable=True)
        return v, i


@pytest.mark.skipif(not HAS_EXPORT, reason="torch.export capture needs PyTorch 2.5 or later")
@pytest.mark.parametrize("way", ["ranks", "rounds", "bitonic"])
def test_capture_export_sort_and_topk_match_pytorch(way, monkeypatch):
    """sort (stable, ties kept in index order) and topk by ranks (n x n
    comparisons), and where the dim is too long for them (the limit
    lowered here) a topk in k rounds or a bitonic sorting network; NaN
    the largest, as PyTorch's."""
    from tensorscope import _export
    if way != "ranks":
        monkeypatch.setattr(_export, "_PAIRWISE_LIMIT", 8)  # 3*9*5 entries, 9 along dim 1
    if way == "bitonic":
        monkeypatch.setattr(_export, "_ROUNDS", 0)
    torch.manual_seed(0)
    nets = [TopK(k, dim, largest) for k, dim, largest in ((3, 1, True), (2, -1, False), (1, 0, True))]
    nets += [Sort(dim, descending) for dim, descending in ((1, False), (-1, True), (0, False))]
    for net in nets:
        with torch.no_grad():
            net.w[1, 2, 3] = float("nan")
        x = torch.ones(3, 9, 5)
        with torch.no_grad():
            want = net(x)
        got = ts.inference_model(net, ts.Options().capture("export"), example_inputs=(x,))(x.numpy())
        for a, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(a), w.numpy(), err_msg=f"{type(net).__name__} {vars(net)}")
            assert np.asarray(a).dtype == w.numpy().dtype, type(net).__name__  # the indices int64


class ArgIndices(torch.nn.Module):
    """argmax, argmin, max/min with indices and topk's indices, returned and
    read by integer consumers: gathers, a comparison, an indexing."""
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randint(0, 3, (4, 7)).float())  # ties: the first index wins
        self.r = torch.nn.Parameter(torch.randn(4, 7))  # no ties: PyTorch's topk orders tied ones as it likes
        self.table = torch.nn.Parameter(torch.randn(7, 3))

    def forward(self, x):
        s = self.w * x
        i, j = s.argmax(1), s.argmin(dim=0, keepdim=True)
        v, k = s.max(1)
        m = torch.min(s, 0).indices
        t = torch.topk(self.r * x, 2, 1).indices
        return (i, j, k, m, t, s.argmax(), v, self.table[i], torch.index_select(self.table, 0, k),
                torch.gather(s, 1, t), (i == k).float(), self.table[t[:, 0]])


@pytest.mark.skipif(not HAS_EXPORT, reason="torch.export capture needs PyTorch 2.5 or later")
def test_capture_export_indices_are_int64_as_pytorchs():
    """The indices of argmax, argmin, max(dim), min(dim) and topk are exact
    int64 tensors, returned as numpy int64 and read as they are by gathers,
    comparisons and indexing; NaN is the extreme, as PyTorch's."""
    torch.manual_seed(0)
    net = ArgIndices()
    with torch.no_grad():
        net.w[2, 4] = float("nan")
    x = torch.ones(4, 7)
    with torch.no_grad():
        want = net(x)
    got = ts.inference_model(net, ts.Options().capture("export"), example_inputs=(x,))(x.numpy())
    assert len(got) == len(want)
    for n, (a, w) in enumerate(zip(got, want)):
        a = np.asarray(a)
        np.testing.assert_array_equal(a, w.numpy(), err_msg=f"output {n}")
        assert a.dtype == w.numpy().dtype, (n, a.dtype, w.dtype)


class ArgRow(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(3, 2))

    def forward(self, x):
        return self.table[x.argmax(1)]


@pytest.mark.skipif(not HAS_EXPORT, reason="torch.export capture needs PyTorch 2.5 or later")
def test_capture_export_argmax_out_of_a_table_is_an_error():
    """argmax's index past the table it picks from is an error naming the
    indices (PyTorch's IndexError), never clamped to the last row."""
    net = ArgRow()
    x = torch.zeros(2, 5)
    model = ts.inference_model(net, ts.Options().capture("export"), example_inputs=(x,))
    ok = np.zeros((2, 5), np.float32)
    ok[:, 1] = 1.0
    np.testing.assert_array_equal(model(ok), net(torch.from_numpy(ok)).detach().numpy())
    bad = ok.copy()
    bad[1] = [0, 0, 0, 0, 1]  # row 4 of a table of 3
    with pytest.raises(IndexError):
        net(torch.from_numpy(bad))
    with pytest.raises(ts.TensorscopeError, match=r"'ArgMax:0@i32'\[1\] = 4 .*not an index in \[-3, 3\)"):
        model(bad)


class Pool3d(torch.nn.Module):
    """a 3-d pool of x scaled by a parameter (so that the pool has a gradient to pass)"""
    def __init__(self, pool):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(2, 2, 7, 6, 5))
        self.pool = pool

    def forward(self, x):
        return self.pool(x * self.w)


@pytest.mark.skipif(not HAS_EXPORT, reason="torch.export capture needs PyTorch 2.5 or later")
def test_capture_export_3d_pools_match_pytorch():
    """max_pool3d, avg_pool3d and adaptive_avg_pool3d, composed of two 2-d
    pools (H, W, then D), with strides, padding, dilation, ceil_mode and
    count_include_pad, against PyTorch; an adaptive pool to windows of
    several sizes is refused saying so."""
    torch.manual_seed(0)
    pools = [torch.nn.MaxPool3d(2), torch.nn.MaxPool3d(3, stride=2, padding=1, ceil_mode=True),
             torch.nn.MaxPool3d(2, dilation=2), torch.nn.AvgPool3d(2),
             torch.nn.AvgPool3d(3, stride=2, padding=1, count_include_pad=False),
             torch.nn.AvgPool3d(3, 2, 1, ceil_mode=True), torch.nn.AdaptiveAvgPool3d((7, 3, 5)),
             torch.nn.AdaptiveAvgPool3d(1)]
    x = torch.randn(2, 2, 7, 6, 5)
    for pool in pools:
        net = Pool3d(pool)
        with torch.no_grad():
            want = net(x).numpy()
        got = ts.inference_model(net, ts.Options().capture("export"), example_inputs=(x,))(x.numpy())
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-6, err_msg=repr(pool))
    with pytest.raises(ts.UnsupportedError, match="not a whole window"):
        ts.inference_model(Pool3d(torch.nn.AdaptiveAvgPool3d((2, 3, 2))), ts.Options().capture("export"), example_inputs=(x,))


class Draws(torch.nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def forward(self, x):
        if self.kind == "rand":
            return x + torch.rand(64, 128)
        if self.kind == "randn_like":
            return x + torch.randn_like(x)
        return x[:, torch.randperm(128)]


@pytest.mark.skipif(not HAS_EXPORT, reason="torch.export capture needs PyTorch 2.5 or later")
def test_capture_export_random_draws():
    """rand, randn_like and randperm in forward: drawn again every run
    (not PyTorch's numbers), uniform in [0, 1) with its mean and spread,
    normal with mean 0 and deviation 1, and a permutation."""
    x = torch.zeros(64, 128)
    for kind in ("rand", "randn_like"):
        m = ts.inference_model(Draws(kind), ts.Options().capture("export"), example_inputs=(x,))
        a, b = np.asarray(m(x.numpy())), np.asarray(m(x.numpy()))
        assert a.shape == (64, 128) and (a != b).any(), kind
        mean, std = (0.5, (1 / 12) ** 0.5) if kind == "rand" else (0.0, 1.0)
        assert abs(a.mean() - mean) < 0.03 and abs(a.std() - std) < 0.03, (kind, a.mean(), a.std())
        if kind == "rand":
            assert a.min() >= 0.0 and a.max() < 1.0
    m = ts.inference_model(Draws("randperm"), ts.Options().capture("export"), example_inputs=(x,))
    rows = torch.arange(128.0).repeat(64, 1).numpy()
    p, q = np.asarray(m(rows)), np.asarray(m(rows))
    assert sorted(p[0].astype(int).tolist()) == list(range(128)) and (p == p[0]).all() and (p != q).any()


# ---- a training call returns what PopTorch's does

class OnlyLoss(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 3)

    def forward(self, x, labels):
        return F.cross_entropy(self.fc(x), labels)


class HeadsAndLoss(TwoHeads):
    def forward(self, x, labels):
        a, b = super().forward(x)
        return a, b, F.cross_entropy(a, labels) + b.mean()


def test_a_training_call_returns_forwards_outputs_then_the_loss():
    torch.manual_seed(3)
    x, y = torch.randn(5, 6), torch.randint(0, 3, (5,))
    net = HeadsAndLoss()
    model = ts.training_model(net, ts.Options(), optimizer=ts.SGD(lr=0.1), example_inputs=(x, y))
    with torch.no_grad():
        want = net(x, y)  # before the step's update
    got = model(x.numpy(), y.numpy().astype(np.int32))
    assert isinstance(got, tuple) and len(got) == 3
    for ours, theirs in zip(got, want):
        assert_close(np.asarray(ours, np.float32).reshape(theirs.shape), theirs)
    # forward returning its loss alone: the loss alone
    only = ts.training_model(OnlyLoss(), ts.Options(), optimizer=ts.SGD(lr=0.1), example_inputs=(x, y))
    assert not isinstance(only(x.numpy(), y.numpy().astype(np.int32)), tuple)
    # a graph's model: the loss alone, as before
    g = ts.Graph.from_torch(OnlyLoss(), (x, y))
    m = ts.training_model(g, optimizer=ts.SGD(lr=0.1), loss=g.outputs[-1])
    assert not isinstance(m(x.numpy(), y.numpy().astype(np.int32)), tuple)


class BoolMasks(torch.nn.Module):
    def forward(self, x, keep):
        pos = x > 0
        both = pos & keep
        causal = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).tril()
        seen = (x.unsqueeze(1) * causal).sum(-1)
        return both, x.masked_fill(~both, -1.0), torch.logical_or(~pos, keep), torch.isnan(x / x), seen


@pytest.mark.skipif(not HAS_EXPORT, reason="torch.export capture needs PyTorch 2.5 or later")
def test_capture_export_bools_are_pytorchs():
    """A bool input (a mask) is fed numpy bools; comparisons, logic and
    masks computed by the module come back as numpy bool, as PyTorch's."""
    torch.manual_seed(3)
    x = torch.randn(4, 6)
    x[0, 0] = 0.0
    keep = torch.rand(4, 6) > 0.3
    net = BoolMasks().eval()
    with torch.no_grad():
        want = net(x, keep)
    got = ts.inference_model(net, ts.Options().capture("export"), example_inputs=(x, keep))(x.numpy(), keep.numpy())
    assert len(got) == len(want)
    for n, (a, w) in enumerate(zip(got, want)):
        a = np.asarray(a)
        assert a.dtype == w.numpy().dtype, (n, a.dtype, w.dtype)
        np.testing.assert_allclose(a, w.numpy(), rtol=1e-6, err_msg=f"output {n}")
