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
    """Three SGD steps in tensorscope and in PyTorch from the same weights;
    returns both modules after copy_weights_to_torch."""
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
        loss = model(x=x, labels=y.astype(labels_dtype))
        opt.zero_grad()
        ref_loss = forward_loss(ref, torch.from_numpy(x), torch.from_numpy(y).long())
        ref_loss.backward()
        opt.step()
        assert float(loss) == pytest.approx(ref_loss.item(), rel=1e-4)
    before = {n: p.detach().clone() for n, p in net.named_parameters()}
    model.copy_weights_to_torch()
    for (name, p), (_, q) in zip(net.named_parameters(), ref.named_parameters()):
        assert not torch.equal(p, before[name])
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.skipif(not HAS_ONNX_IMPORT, reason="this library does not import ONNX")
def test_a_module_without_its_loss_trains_as_in_torch():
    torch.manual_seed(0)
    train_both(Scores(), lambda m, x, y: F.nll_loss(m(x), y), loss="nll",
               example_inputs=(example()[0],))


@pytest.mark.skipif(not HAS_ONNX_IMPORT, reason="this library does not import ONNX")
def test_a_module_returning_its_loss_trains_as_in_torch():
    torch.manual_seed(0)
    try:
        train_both(Net(), lambda m, x, y: m(x, y)[1], example_inputs=example())
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
