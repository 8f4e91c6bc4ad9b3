"""Wrapping a torch module PopTorch-style: exported through ONNX in
training mode, trained in tensorscope, weights copied back; the same steps
in PyTorch are the reference."""
import copy

import numpy as np
import pytest

import tensorscope as ts
from conftest import batches

torch = pytest.importorskip("torch")
F = torch.nn.functional
HAS_ONNX_IMPORT = hasattr(ts._capi.lib, "ts_graph_from_onnx")


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 5)
        self.fc2 = torch.nn.Linear(5, 3)

    def forward(self, x, labels):
        out = F.log_softmax(self.fc2(F.relu(self.fc1(x))), 1)
        return out, F.nll_loss(out, labels)


def example():
    x, y = batches(1)
    return torch.from_numpy(x), torch.from_numpy(y).long()


@pytest.mark.skipif(HAS_ONNX_IMPORT, reason="this library imports ONNX")
def test_without_onnx_import_the_error_says_what_is_missing():
    net = Net()
    with pytest.raises(ts.UnsupportedError, match="ts_graph_from_onnx"):
        ts.training_model(net, ts.Options(), optimizer=ts.SGD(lr=0.1), example_inputs=example())
    with pytest.raises(ts.UnsupportedError, match="ts_graph_from_onnx"):
        ts.Graph.from_onnx("model.onnx", {"x": [4, 6]})


def test_arguments_are_checked_before_exporting():
    with pytest.raises(TypeError, match="example_inputs"):
        ts.training_model(Net(), ts.Options(), optimizer=ts.SGD(lr=0.1))
    with pytest.raises(TypeError, match="optimizer"):
        ts.training_model(Net(), ts.Options(), example_inputs=example())


class Scores(torch.nn.Module):
    """The same network without its loss: tensorscope adds it (loss="nll")."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 5)
        self.fc2 = torch.nn.Linear(5, 3)

    def forward(self, x):
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), 1)


def train_both(net, forward_loss, **wrap):
    """Three SGD steps in tensorscope and in PyTorch from the same weights:
    each call returns (output, loss) as PopTorch's does, both checked
    against PyTorch's (forward_loss returns them); returns both modules
    after copy_weights_to_torch."""
    ref = copy.deepcopy(net)
    opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    x0, y0 = example()
    model = ts.training_model(net, ts.Options(),
                              optimizer=torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9),
                              **wrap)
    model.compile()
    names = model.get_tensor_names()
    assert "fc1.weight" in names and "Gradient___fc2.bias" in names
    labels_dtype = model.graph.tensor("labels").dtype
    for step in range(3):
        x, y = batches(1, seed=step)
        out, loss = model(x=x, labels=y.astype(labels_dtype))  # PopTorch's (output, loss)
        opt.zero_grad()
        ref_out, ref_loss = forward_loss(ref, torch.from_numpy(x), torch.from_numpy(y).long())
        ref_loss.backward()
        opt.step()
        assert float(loss) == pytest.approx(ref_loss.item(), rel=1e-4)
        # the output of the step's forward, before its update, as PyTorch's forward gave it
        np.testing.assert_allclose(out, ref_out.detach().numpy(), rtol=1e-5, atol=1e-6)
    before = {n: p.detach().clone() for n, p in net.named_parameters()}
    model.copy_weights_to_torch()
    for (name, p), (_, q) in zip(net.named_parameters(), ref.named_parameters()):
        assert not torch.equal(p, before[name])
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.skipif(not HAS_ONNX_IMPORT, reason="this library does not import ONNX")
def test_a_module_without_its_loss_trains_as_in_torch():
    torch.manual_seed(0)
    def scores_and_loss(m, x, y):
        out = m(x)
        return out, F.nll_loss(out, y)

    train_both(Scores(), scores_and_loss, loss="nll",
               example_inputs=(example()[0],))


@pytest.mark.skipif(not HAS_ONNX_IMPORT, reason="this library does not import ONNX")
def test_a_module_returning_its_loss_trains_as_in_torch():
    torch.manual_seed(0)
    try:
        train_both(Net(), lambda m, x, y: m(x, y), example_inputs=example())
    except ts.UnsupportedError as e:  # the importer has no loss ops yet
        assert "NegativeLogLikelihoodLoss" in str(e) or "CrossEntropyLoss" in str(e)
        pytest.xfail(str(e).split(":")[-1][:200])


@pytest.mark.skipif(not HAS_ONNX_IMPORT, reason="this library does not import ONNX")
def test_from_onnx_inference_matches_torch(tmp_path):
    from tensorscope._torch import export_onnx
    torch.manual_seed(1)
    net = Scores()
    path = str(tmp_path / "scores.onnx")
    export_onnx(net, (torch.zeros(4, 6),), path, ["x"])
    g = ts.Graph.from_onnx(path, {"x": [4, 6]})
    assert [t.name for t in g.inputs] == ["x"]
    assert set(g.parameters()) == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
    aliased = {t.alias: t for t in g.tensors() if t.alias}
    assert aliased and all(g.tensor(a) == t for a, t in aliased.items())  # found by file name
    model = ts.inference_model(g, ts.Options().device_iterations(2))  # the file's outputs
    model.compile()
    x, _ = batches(2)
    out = model(x)
    assert out.shape == (8, 3)  # as torch gives it for the 8 samples
    with torch.no_grad():
        want = net(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ts.FileError):
        ts.Graph.from_onnx(str(tmp_path / "missing.onnx"))


class DropoutNet(torch.nn.Module):
    """Scores with Dropout: a training export keeps it, mask output and all."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 16)
        self.drop = torch.nn.Dropout(0.5)
        self.fc2 = torch.nn.Linear(16, 3)

    def forward(self, x):
        return F.log_softmax(self.fc2(self.drop(F.relu(self.fc1(x)))), 1)


@pytest.mark.skipif(not HAS_ONNX_IMPORT, reason="this library does not import ONNX")
def test_a_module_with_dropout_trains_with_dropout_on():
    torch.manual_seed(0)
    net = DropoutNet()
    x, y = batches(1)

    def wrap(lr):
        model = ts.training_model(net, ts.Options(), optimizer=ts.SGD(lr=lr), loss="nll",
                                  example_inputs=(torch.from_numpy(x),))
        model.compile()
        return model, y.astype(model.graph.tensor("labels").dtype)

    # the export keeps Dropout: with the weights held, the same batch gives
    # another loss at each step (the masks differ), and in torch too
    frozen, labels = wrap(0.0)
    losses = {round(float(frozen(x=x, labels=labels)[-1]), 6) for _ in range(6)}
    assert len(losses) > 1, "every step's loss is the same: dropout was dropped"
    with torch.no_grad():
        evaluated = F.nll_loss(net.eval()(torch.from_numpy(x)), torch.from_numpy(y).long()).item()
    net.train()
    assert min(losses) < evaluated * 2 and max(losses) > 0  # the same network, masked
    # and it learns: the mean loss of the last steps below that of the first
    model, labels = wrap(0.2)
    steps = [float(model(x=x, labels=labels)[-1]) for _ in range(40)]
    assert np.mean(steps[-8:]) < 0.5 * np.mean(steps[:8]), steps
    before = net.fc1.weight.detach().clone()
    model.copy_weights_to_torch()
    assert not torch.equal(net.fc1.weight, before)


def default_opset(path):
    """The default domain's opset of an ONNX file (ModelProto.opset_import = 8:
    OperatorSetIdProto domain = 1, version = 2)."""
    from tensorscope._torch import _fields
    with open(path, "rb") as f:
        buf = memoryview(f.read())
    for field, wire, entry in _fields(buf):
        if field == 8 and wire == 2:
            parts = {k: v for k, _, v in _fields(entry)}
            if not bytes(parts.get(1, b"")):
                return parts.get(2)
    return None


def test_the_export_is_opset_17_whichever_torch(tmp_path):
    from tensorscope._torch import export_onnx
    path = str(tmp_path / "drop.onnx")
    export_onnx(DropoutNet(), (torch.zeros(4, 6),), path, ["x"])
    assert default_opset(path) == 17  # PyTorch 2.15 writes 20 by default, 1.13 writes 14


@pytest.mark.skipif(not HAS_ONNX_IMPORT, reason="this library does not import ONNX")
def test_without_the_onnx_package_the_error_says_to_install_it(monkeypatch):
    """PyTorch 2.9 on writes ONNX through the onnx package (its error then:
    "Module onnx is not installed!")."""
    import importlib.util
    find_spec = importlib.util.find_spec

    def export(*args, **kwargs):
        raise RuntimeError("Module onnx is not installed!")

    monkeypatch.setattr(torch.onnx, "export", export)
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "onnx" else find_spec(name, *a))
    with pytest.raises(ImportError, match="pip install onnx"):
        ts.training_model(Scores(), ts.Options().capture("onnx"), optimizer=ts.SGD(lr=0.1), loss="nll",
                          example_inputs=(example()[0],))
