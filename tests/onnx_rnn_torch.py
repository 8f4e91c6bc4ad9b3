"""nn.GRU and nn.LSTM as PyTorch's TorchScript exporter writes them,
imported by tensorscope (src/import/onnx_rnn.c) and checked against
PyTorch itself: Debian's python3-torch under /usr/bin/python3 (its NumPy),
run by tests/test_onnx_rnn.sh after tests/onnx_rnn.py."""
import os
import sys
import tempfile
import warnings

import numpy as np
import torch

import tensorscope as ts
from tensorscope._torch import export_onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rnn_checks import FWD_RTOL, GRAD_RTOL, check, finish, has_tensor  # noqa: E402


def numpy(t):
    return t.detach().numpy().astype(np.float32)


def pytorch_exports(workdir):
    """nn.GRU and nn.LSTM (2 layers, bidirectional, batch_first) as
    PyTorch's TorchScript exporter writes them (Debian's python3-torch,
    training mode as ts.training_model exports): the output equals
    PyTorch's, the parameters keep PyTorch's names, and the gradient of
    sum(out * K) of each equals PyTorch's autograd."""
    torch.manual_seed(0)
    for cls in (torch.nn.GRU, torch.nn.LSTM):
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = cls(4, 5, num_layers=2, batch_first=True, bidirectional=True)

            def forward(self, x):
                return self.rnn(x)[0]

        net, x = Net(), torch.randn(3, 6, 4)
        path = os.path.join(workdir, f"torch_{cls.__name__}.onnx")
        with warnings.catch_warnings():  # the old exporter's shape-inference notes
            warnings.simplefilter("ignore")
            export_onnx(net, (x,), path, ["x"])
        K = np.random.default_rng(1).standard_normal((3, 6, 10)).astype(np.float32)
        g = ts.Graph.from_onnx(path, {"x": tuple(x.shape)})
        params = dict(net.named_parameters())
        missing = [n for n in params if not has_tensor(g, n)]
        out = g.outputs[0]
        kt = g.input("K", "f32", list(K.shape))
        loss = g.sum(g.mul(out, kt))
        loss.name = "loss"
        opts = ts.Options().output_mode("final")
        opts.anchor_tensor("out", out.name, "final")
        for i, n in enumerate(params):
            if n not in missing:
                opts.anchor_tensor(f"g{i}", "Gradient___" + n, "final")
        model = ts.training_model(g, opts, optimizer=ts.SGD(lr=0.0), loss=loss)
        model(x=numpy(x), K=K)
        y = net(x)
        (y * torch.from_numpy(K)).sum().backward()
        err = float(np.max(np.abs(model.get_anchored_tensor("out") - numpy(y))))
        worst = max((float(np.max(np.abs(model.get_anchored_tensor(f"g{i}").reshape(p.shape) - numpy(p.grad))) /
                           max(float(np.max(np.abs(numpy(p.grad)))), 1e-12)), n)
                    for i, (n, p) in enumerate(params.items()) if n not in missing) if len(missing) < len(params) else (1.0, "")
        check(not missing and err <= FWD_RTOL and worst[0] <= GRAD_RTOL,
              f"PyTorch {torch.__version__} {cls.__name__} (2 layers, bidirectional) exported: output max error {err:.2g}, "
              f"parameters under PyTorch's names (missing: {missing[:2]}), gradients against autograd "
              f"(worst {worst[1]}: {worst[0]:.2g})")
        g.close()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as workdir:
        pytorch_exports(workdir)
    finish("onnx_rnn_torch")
