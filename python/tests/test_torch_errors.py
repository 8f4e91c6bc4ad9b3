"""Errors of a wrapped torch module name the module path and the line of
its forward that made the failing op (as the exporter records it), never
the temporary ONNX file the module went through."""
import inspect

import numpy as np
import pytest

import tensorscope as ts

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not hasattr(ts._capi.lib, "ts_graph_from_onnx"),
                                reason="this library does not import ONNX")


class Block(torch.nn.Module):
    def __init__(self, op):
        super().__init__()
        self.fc = torch.nn.Linear(6, 4)
        self.op = op

    def forward(self, x):
        h = self.fc(x)
        if self.op == "det":
            return h + torch.det(x.t() @ x)  # a determinant of 6 x 6: tensorscope imports Det up to 4 x 4
        return torch.log(h)  # NaN for negative values


class Net(torch.nn.Module):
    def __init__(self, op):
        super().__init__()
        self.block = Block(op)
        self.out = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.out(self.block(x))


def line_of(fn, text):
    """file:line of the line of fn's source that holds `text`."""
    lines, first = inspect.getsourcelines(fn)
    k = next(i for i, line in enumerate(lines) if text in line)
    return f"{inspect.getsourcefile(fn)}:{first + k}"


def wrap(op, options=None):
    return ts.training_model(Net(op), options, optimizer=ts.SGD(lr=0.1), loss="cross_entropy",
                             example_inputs=(torch.zeros(4, 6),))


def test_an_op_that_cannot_be_imported_names_the_module_and_its_line():
    with pytest.raises(ts.UnsupportedError) as e:
        wrap("det")
    message = str(e.value)
    assert "module.onnx" not in message and "/tmp" not in message.split("forward at")[0]
    where = f"torch module Net, module 'block', forward at {line_of(Block.forward, 'torch.det')}: "
    if ts._torch.capture_of(ts.Options()) == "export":  # the ATen op, refused with what to do
        assert message.startswith(where + "ATen op aten._linalg_det"), message
        assert "has no mapping" in message and "Options().capture('onnx')" in message
        return
    assert message.startswith(where + "node '/block/Det' (Det")
    assert "M over 4: not available yet" in message, message


def test_a_failure_while_training_names_the_module_and_its_line():
    model = wrap("log", ts.Options().check_numerics("op"))
    x = np.full((4, 6), 1.0, np.float32)
    with torch.no_grad():  # every output of block.fc negative: log gives NaN
        model.module.block.fc.weight.fill_(-1.0)
    model.copy_weights_to_device()
    with pytest.raises(ts.NumericsError) as e:
        model(x, np.zeros(4, np.int32))
    message = str(e.value)
    assert "module.onnx" not in message
    node = {"onnx": lambda n: f" (node '{n}')", "export": lambda n: ""}[ts._torch.capture_of(ts.Options())]
    assert (f"built at torch module Net, module 'block', forward at "
            f"{line_of(Block.forward, 'torch.log')}{node('/block/Log')}") in message
    assert e.value.tensor == "block/Log:0"
    assert model.graph.tensor("block/Log:0").location == (
        f"torch module Net, module 'block', forward at {line_of(Block.forward, 'torch.log')}")
    dump = model.dump(locations=True)
    assert "module.onnx" not in dump
    assert f"forward at {line_of(Net.forward, 'self.out(')}{node('/out/Gemm')}" in dump
