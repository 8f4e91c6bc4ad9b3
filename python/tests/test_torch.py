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


@pytest.mark.skipif(not HAS_ONNX_IMPORT, reason="this library does not import ONNX")
def test_training_a_torch_module_matches_torch():
    torch.manual_seed(0)
    net = Net()
    ref = copy.deepcopy(net)
    opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    model = ts.training_model(net, ts.Options(),
                              optimizer=torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9),
                              example_inputs=example())
    model.compile()
    names = model.get_tensor_names()
    assert "fc1.weight" in names and "Gradient___fc2.bias" in names
    labels_dtype = model.graph.tensor("labels").dtype
    for step in range(3):
        x, y = batches(1, seed=step)
        loss = model(x, y.astype(labels_dtype))
        opt.zero_grad()
        _, ref_loss = ref(torch.from_numpy(x), torch.from_numpy(y).long())
        ref_loss.backward()
        opt.step()
        assert float(loss) == pytest.approx(ref_loss.item(), rel=1e-4)
    before = {n: p.detach().clone() for n, p in net.named_parameters()}
    model.copy_weights_to_torch()
    for (name, p), (_, q) in zip(net.named_parameters(), ref.named_parameters()):
        assert not torch.equal(p, before[name])
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4, atol=1e-6)
